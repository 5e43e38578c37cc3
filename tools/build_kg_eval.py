#!/usr/bin/env python
"""Build the knowledge-graph evaluation set from the metadata of installed Python packages.

The text is nobody's here: each installed distribution but memtrio (``importlib.metadata``
of the interpreter that runs this script) becomes one entity of type
``python-package`` whose observations are its own metadata, written the way an
agent writes observations into the reference memory server
(``@modelcontextprotocol/server-memory``), and each requirement on another
installed package becomes a ``depends_on`` relation. The graph is written in
that server's ``memory.jsonl`` format, so ``memtrio import`` reads it as a
user's file.

Observations of a package, in this order (each only when the metadata has it):

- its ``Summary``, verbatim;
- ``licensed under <licence>``: ``License-Expression``, else the licence
  classifiers' last part (``MIT License``), else a one-line ``License`` field;
- ``requires Python <Requires-Python>``;
- ``depends on <name>``: one per requirement without an ``extra`` marker;
- ``written by <names>``: ``Author`` or the names of ``Author-email``
  (else the maintainer's), e-mail addresses removed;
- ``keywords: <Keywords>``;
- ``topic: <...>`` and ``framework: <...>``: one per ``Topic ::`` and
  ``Framework ::`` classifier;
- ``implemented in <language>``: one per ``Programming Language ::``
  classifier that is not Python;
- ``source code at <url>``: the ``Source`` (or ``Repository``, ``GitHub``,
  ``Homepage``) project URL, else ``Home-page``;
- ``version <version>``.

Questions (``questions.jsonl``: ``id``, ``category``, ``question``, ``gold``,
a list of ``[entity, observation]`` pairs; any of them returned counts):

- about one package, gold its one observation of that kind: ``summary``
  ("What is httpx for?"), ``python`` ("Which Python versions does httpx
  support?"), ``author`` ("Who wrote httpx?"), ``source`` ("Where is the
  source code of httpx?");
- about a value held by one to three packages, gold the observation of each:
  ``license`` ("Which package is licensed under MPL-2.0?"), ``depends``
  ("Which package depends on sniffio?"), ``topic`` ("Which package has the
  topic Internet :: WWW/HTTP?"), ``language`` ("Which package is
  implemented in Rust?"), ``keyword`` ("Which package has the keyword
  tokenize?").

At most ``--per-category`` questions of each category (40), chosen by a hash of
their text, so the set stays the same when the same packages are installed.
``meta.json`` records the rules, the interpreter, and every package's version.

Usage::

    python tools/build_kg_eval.py --out tools/eval_sets/kg-packages
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as md
import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

OWN = {"memtrio"}  # this project's own metadata is not data nobody here wrote
ENTITY_TYPE = "python-package"
RELATION = "depends_on"
PER_CATEGORY = 40
MAX_HOLDERS = 3  # a value question's answer: one to this many packages
MAX_TEXT = 300  # an observation is cut here (at a word), as a note would be
SOURCE_LABELS = ("source", "source code", "repository", "github", "code", "homepage", "home")
EMAIL = re.compile(r"\s*<[^>]*>|\S+@\S+")
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def canonical(name: str) -> str:
    """PEP 503 normalised name (``Typing_Extensions`` -> ``typing-extensions``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def clip(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= MAX_TEXT:
        return text
    return text[: MAX_TEXT - 3].rsplit(" ", 1)[0] + "..."


def one(meta: md.PackageMetadata, key: str) -> str:
    """A metadata field's (first) value, "" when absent."""
    return (meta.get_all(key) or [""])[0]


def licence(meta: md.PackageMetadata) -> str | None:
    expression = (one(meta, "License-Expression") or "").strip()
    if expression:
        return expression
    classifiers = [
        c.split(" :: ")[-1] for c in meta.get_all("Classifier") or [] if c.startswith("License ::")
    ]
    classifiers = [c for c in classifiers if c != "OSI Approved"]
    if classifiers:
        return " and ".join(dict.fromkeys(classifiers))
    field = (one(meta, "License") or "").strip()
    if field and "\n" not in field and len(field) <= 80 and field.upper() != "UNKNOWN":
        return field
    return None


def authors(meta: md.PackageMetadata) -> str | None:
    for key, mail in (("Author", "Author-email"), ("Maintainer", "Maintainer-email")):
        names = (one(meta, key) or "").strip()
        if not names:
            names = EMAIL.sub("", one(meta, mail) or "").strip(" ,")
        names = " ".join(EMAIL.sub("", names).split()).strip(" ,")
        if names and names.upper() != "UNKNOWN":
            return names
    return None


def source_url(meta: md.PackageMetadata) -> str | None:
    urls: dict[str, str] = {}
    for item in meta.get_all("Project-URL") or []:
        label, _, url = item.partition(",")
        urls.setdefault(label.strip().lower(), url.strip())
    for label in SOURCE_LABELS:
        if urls.get(label):
            return urls[label]
    home = (one(meta, "Home-page") or "").strip()
    return home if home and home.upper() != "UNKNOWN" else None


def requirements(dist: md.Distribution) -> list[str]:
    """Names of the requirements that hold without an extra, in the metadata's order."""
    out: list[str] = []
    for req in dist.requires or []:
        if "extra" in req.partition(";")[2]:
            continue
        m = REQUIREMENT.match(req)
        if m and canonical(m.group(1)) not in out:
            out.append(canonical(m.group(1)))
    return out


def package(dist: md.Distribution) -> dict[str, Any]:  # noqa: C901
    """One package's observations, each tagged with the kind of fact it states."""
    meta = dist.metadata
    facts: list[tuple[str, str, str]] = []  # (kind, value, observation)

    def add(kind: str, value: str, text: str) -> None:
        facts.append((kind, value, clip(text)))

    summary = (one(meta, "Summary") or "").strip()
    if summary and summary.upper() != "UNKNOWN":
        add("summary", "", summary)
    lic = licence(meta)
    if lic:
        add("license", lic, f"licensed under {lic}")
    python = (one(meta, "Requires-Python") or "").strip()
    if python:
        add("python", python, f"requires Python {python}")
    for dep in requirements(dist):
        add("depends", dep, f"depends on {dep}")
    who = authors(meta)
    if who:
        add("author", who, f"written by {who}")
    keywords = (one(meta, "Keywords") or "").strip()
    if keywords:
        add("keywords", keywords, f"keywords: {keywords}")
    for c in meta.get_all("Classifier") or []:
        head, _, rest = c.partition(" :: ")
        if head == "Topic" and rest:
            add("topic", rest, f"topic: {rest}")
        elif head == "Framework" and rest:
            add("framework", rest, f"framework: {rest}")
        elif head == "Programming Language" and rest and not rest.startswith(("Python", "Other")):
            add("language", rest, f"implemented in {rest}")
    url = source_url(meta)
    if url:
        add("source", url, f"source code at {url}")
    add("version", dist.version, f"version {dist.version}")
    seen: set[str] = set()
    unique = []
    for fact in facts:  # a classifier listed twice is one observation
        if fact[2] not in seen:
            seen.add(fact[2])
            unique.append(fact)
    return {"name": meta["Name"], "version": dist.version, "facts": unique}


def keyword_list(text: str) -> list[str]:
    parts = re.split(r"[,;]\s*|\s+", text) if "," not in text else re.split(r",\s*", text)
    return [p.strip().lower() for p in parts if p.strip()]


def questions(packages: list[dict[str, Any]], per_category: int) -> list[dict[str, Any]]:  # noqa: C901
    qs: list[dict[str, Any]] = []

    def ask(category: str, question: str, gold: list[list[str]]) -> None:
        qs.append({"category": category, "question": question, "gold": gold})

    templates = {
        "summary": "What is {name} for?",
        "python": "Which Python versions does {name} support?",
        "author": "Who wrote {name}?",
        "source": "Where is the source code of {name}?",
    }
    holders: dict[tuple[str, str], list[list[str]]] = defaultdict(list)
    for p in packages:
        for kind, value, text in p["facts"]:
            if kind in templates:
                ask(kind, templates[kind].format(name=p["name"]), [[p["name"], text]])
            elif kind in ("license", "depends", "topic", "language"):
                holders[(kind, value)].append([p["name"], text])
            elif kind == "keywords":
                for word in keyword_list(value):
                    if re.fullmatch(r"[a-z][a-z0-9-]{2,}", word):
                        holders[("keyword", word)].append([p["name"], text])
    value_templates = {
        "license": "Which package is licensed under {value}?",
        "depends": "Which package depends on {value}?",
        "topic": "Which package has the topic {value}?",
        "language": "Which package is implemented in {value}?",
        "keyword": "Which package has the keyword {value}?",
    }
    for (kind, value), gold in sorted(holders.items()):
        names = {name for name, _ in gold}
        if 1 <= len(names) <= MAX_HOLDERS and len(names) == len(gold):
            ask(kind, value_templates[kind].format(value=value), gold)
    by_category: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q in qs:
        by_category[q["category"]].append(q)
    chosen: list[dict[str, Any]] = []
    for category in sorted(by_category):
        ranked = sorted(
            by_category[category],
            key=lambda q: hashlib.sha256(q["question"].encode()).hexdigest(),
        )
        chosen += sorted(ranked[:per_category], key=lambda q: q["question"])
    for i, q in enumerate(chosen):
        q["id"] = f"kg/q{i:04d}"
    return [{"id": q["id"], **{k: v for k, v in q.items() if k != "id"}} for q in chosen]


def dumps(record: object) -> str:
    """``JSON.stringify``'s compact form, as the reference server writes its lines."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def build(per_category: int) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """(memory.jsonl text, questions, meta) from this interpreter's installed packages."""
    dists: dict[str, md.Distribution] = {}
    for dist in md.distributions():
        name = dist.metadata["Name"]
        if name and canonical(name) not in dists and canonical(name) not in OWN:
            dists[canonical(name)] = dist
    packages = [package(dists[key]) for key in sorted(dists)]
    lines = [
        dumps(
            {
                "type": "entity",
                "name": p["name"],
                "entityType": ENTITY_TYPE,
                "observations": [text for _, _, text in p["facts"]],
            }
        )
        for p in packages
    ]
    names = {canonical(p["name"]): p["name"] for p in packages}
    for p in packages:
        for kind, value, _ in p["facts"]:
            if kind == "depends" and value in names and names[value] != p["name"]:
                lines.append(
                    dumps(
                        {
                            "type": "relation",
                            "from": p["name"],
                            "to": names[value],
                            "relationType": RELATION,
                        }
                    )
                )
    qs = questions(packages, per_category)
    meta = {
        "name": "kg-packages: the metadata of installed Python packages as a reference memory.jsonl",
        "generator": "tools/build_kg_eval.py",
        "python": sys.version.split()[0],
        "per_category": per_category,
        "entities": len(packages),
        "observations": sum(len(p["facts"]) for p in packages),
        "relations": len(lines) - len(packages),
        "questions": len(qs),
        "categories": {
            c: sum(q["category"] == c for q in qs) for c in sorted({q["category"] for q in qs})
        },
        "packages": {p["name"]: p["version"] for p in packages},
    }
    return "\n".join(lines), qs, meta


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out", required=True, help="directory for memory.jsonl, questions.jsonl, meta.json"
    )
    parser.add_argument(
        "--per-category", type=int, default=PER_CATEGORY, help="questions per category at most"
    )
    args = parser.parse_args()
    graph, qs, meta = build(args.per_category)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "memory.jsonl").write_text(graph)  # no newline after the last line, as the reference
    (out / "questions.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in qs)
    )
    (out / "meta.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
    print(
        f"{meta['entities']} packages, {meta['observations']} observations, "
        f"{meta['relations']} relations, {meta['questions']} questions {meta['categories']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
