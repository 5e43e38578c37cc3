"""Names and embedding documents: how an entity is identified and what text is embedded for a row.

The recall ranker and the embedder embed exactly what the store embeds:
`memory_document`, `entity_document`, `relation_document`.
"""

from __future__ import annotations

import re


def clean_name(name: str) -> str:
    return " ".join(name.split())


def canonical_name(name: str) -> str:
    """Entity identity: casefolded, whitespace collapsed."""
    return clean_name(name).casefold()


ROLE_LABEL = re.compile(r"\s*(?:user|assistant|human)\s*:\s+", re.IGNORECASE)


def memory_document(content: str) -> str:
    """The text embedded for a memory: its content less a leading role label."""
    found = ROLE_LABEL.match(content)
    return content[found.end() :] if found and found.end() < len(content) else content


def entity_document(name: str, kind: str) -> str:
    return name if kind == "entity" else f"{name} ({kind})"


def relation_document(source: str, relation_type: str, target: str) -> str:
    return f"{source} {relation_type.replace('_', ' ')} {target}"
