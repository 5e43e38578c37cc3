"""Learned re-ranking of the memory seeds: a linear model over features of each candidate.

The candidates are the query's `POOL` nearest memories by cosine, its `POOL`
best FTS5 matches, and the thread neighbours (`signals.thread_neighbours`) of
the first `NEIGHBOUR_FROM` of each list. Each gets the features of
`FEATURES` (its own lexical and dense evidence, that of its thread
neighbours and of the stretch of the thread around it, its length, whether it
is itself a question, whether its subject is a name the query uses, how much
nearer it is to the query without its names, `topic_query`) and the score
``features @ WEIGHTS``; the softmax of those scores is the memory part of
PageRank's reset distribution (`rank.seeds`) in place of the fixed mixture of
cosine softmax and lexical reciprocal ranks.

Why neighbours: in a conversation stored turn by turn, the turn that holds an
answer is often not the one that shares the question's words but the reply
to it ("what did Melanie say when ..."). Only there: a candidate's neighbours
count only when it is a turn of a conversation (`conversation_turns`: speaker
labels taking turns). A note of a burst, an observation of an imported graph,
is ranked by its own evidence, with weights of its own (`NOTE_FEATURES`),
fitted at once with the turns' on conversations and notes. Why the length gate: a long memory
(an assistant's 2,000-character reply) is self-contained, and lending it its
short neighbour's match would put it above that neighbour; so the neighbour
features count in full up to `GATE` characters and fade as ``GATE /
length`` beyond. `diversify` then keeps one memory of a run of neighbours out
of the first places unless it is clearly better, so the results cover more
conversations; for a question that asks for several things (`list_question`)
it keeps a wider stretch of the thread out (`rank.Params.list_window`).

The weights are fitted on the development data by ``tools/fit_rerank.py``
(listwise softmax loss; leave-one-conversation-out, leave-one-project-out and
leave-one-family-out checks; docs/recall.md, *How the weights were fitted*),
never on the held-out data.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from ..store.domain.lexical import FUNCTION_WORDS, query_terms
from ..store.domain.stem import stem
from ..store.interfaces import Snapshot
from .graph import RecallCache
from .signals import thread_neighbours, thread_ones

POOL = 50  # candidates taken from each list (cosine, FTS5)
NEIGHBOUR_FROM = 10  # the first of each list whose thread neighbours join the candidates
LENGTH_CAP = 300  # characters: longer memories count as this long in the length features
GATE = 300  # characters: neighbour features fade as GATE / length beyond this
DIVERSIFY_POOL = 40  # best memories re-ordered by `diversify`
REGION = 6  # places on each side read for the region features
TOPIC_SUBJECTS = 2  # candidates that start with each of the query's names, for its topic
SEEDS = 40  # the best candidates by the model that seed PageRank (the rest carry ~0 mass)
LONG_FULL = 1000  # characters: a note this long or longer has its `LONG_FEATURES` in full
NOTE_MMR_SHARE = 0.2  # re-ranked notes are diversified this share as much (`note_mmr`)
COVER_CHARS = 2000  # characters of each candidate read for its `coverage` of the query

# A memory's own evidence. A turn of a conversation has it in these columns; any other
# memory in the `NOTE_FEATURES` columns: the two kinds weigh words, meaning and length
# differently (a short turn next to its reply, a self-contained note), fitted together.
OWN_FEATURES = (
    "lexical",  # FTS5 score / the best FTS5 score of the query (0 if not matched)
    "lexical_rr",  # 1 / (FTS5 rank + 1)
    "cosine",  # best window's cosine to the query
    "cosine_gap",  # cosine - the best cosine of the query
    "length",  # ln(1 + characters), at most ln(1 + LENGTH_CAP)
    "question",  # the memory itself ends with a question mark
    "length_x_lexical",  # length * lexical
    "dense_rr",  # 1 / (dense rank + 1)
    "coverage",  # share of the query's terms it holds, each weighed by its rarity (`coverage`)
)
# A memory that is not a turn of a conversation (a note, an observation) has its
# `OWN_FEATURES` in these columns instead, weighted for such memories.
NOTE_FEATURES = tuple(f"note_{f}" for f in OWN_FEATURES)
# A note longer than `LENGTH_CAP` (a document, a long reply) has its lexical evidence again
# in these, times how far beyond it is (`long_share`): BM25 weighs a long text's words
# against its length, and a long memory holds more of any query's words, so its FTS5
# score and coverage are not the evidence a short note's are. Its meaning (cosine, cosine
# rank) is not here: fitted on the one family with long notes (LongMemEval's assistant
# replies), those columns learned that family's replies, not long memories, and a long
# document whose one window is by far the best match lost to short notes.
LONG_OWN = ("lexical", "lexical_rr", "length_x_lexical", "coverage")
LONG_FEATURES = tuple(f"long_note_{f}" for f in LONG_OWN)
FEATURES = (
    *OWN_FEATURES,
    "neighbour_lexical",  # best `lexical` of the neighbours 1 place away (gated)
    "neighbour_cosine",  # best cosine_gap of the neighbours 1 place away (gated)
    "neighbour2_lexical",  # best `lexical` of the neighbours 2 places away (gated)
    "min_lexical_neighbour",  # min(lexical, neighbour_lexical)
    "lexical_x_neighbour",  # lexical * neighbour_lexical
    "min_cosine_neighbour",  # min(cosine_gap, neighbour_cosine)
    "neighbour_minus_lexical",  # neighbour_lexical - lexical
    "subject",  # the memory's first word (its speaker, its subject) is a name the query uses
    "region_lexical",  # best `lexical` of the neighbours 3 to REGION places away (gated)
    "region_hits",  # share of the neighbours up to REGION places away in either list (gated)
    # the query without its names (`topic_query`), when each is the subject of candidates:
    "topic_cosine",  # cosine to it - cosine to the query (0 when it does not apply)
    "topic_gap",  # its cosine_gap - cosine_gap
    "neighbour_topic",  # its neighbour_cosine - neighbour_cosine (gated)
    "turn",  # it is a turn of a conversation (`conversation_turns`)
    *NOTE_FEATURES,
    *LONG_FEATURES,
)
# The features read from a memory's thread neighbours: they count for a turn of a
# conversation only (`conversation_turns`), 0 for any other memory (a note of a burst).
NEIGHBOUR_FEATURES = (
    "neighbour_lexical",
    "neighbour_cosine",
    "neighbour2_lexical",
    "min_lexical_neighbour",
    "lexical_x_neighbour",
    "min_cosine_neighbour",
    "neighbour_minus_lexical",
    "region_lexical",
    "region_hits",
    "neighbour_topic",
)
COSINE_COLUMN = FEATURES.index("cosine")
SUBJECT_COLUMN = FEATURES.index("subject")
TURN_COLUMN = FEATURES.index("turn")
NOTE_COLUMNS = [FEATURES.index(f) for f in NOTE_FEATURES]
LONG_COLUMNS = [FEATURES.index(f) for f in LONG_FEATURES]
LONG_IN_OWN = [OWN_FEATURES.index(f) for f in LONG_OWN]
NO_NOTE = (0.0,) * (len(NOTE_FEATURES) + len(LONG_FEATURES))
TOPIC_COLUMN = FEATURES.index("topic_cosine")
TOPIC_COLUMNS = [TOPIC_COLUMN, FEATURES.index("topic_gap")]
# Fitted by `python tools/fit_rerank.py --no-lme-questions` on LoCoMo dev (`Speaker: text`),
# LongMemEval-S-16 (bare turns, each question weighing 30), the FAQ notes (each weighing 5) and
# the knowledge graph of tools/eval_sets/kg-packages (each question weighing 3) at once (docs/bench-runs/fit-rerank-families.json; raw feature units: the standardisation of
# the fit is folded in; an additive constant does not change a softmax, so `turn` is 0).
WEIGHTS = np.array(
    [0.3708, 0.3476, 1.9795, 2.4920, 0.2035, -1.0671, 0.6503, -0.0996, 3.0067]
    + [1.6465, 2.8082, 1.9025, -1.2461, -1.2860, 0.8779, 1.0029, 0.7783, 0.5997]
    + [0.2356, 1.7238, 2.3798, 1.8406, 0.0000, -1.0739, 0.1818, 2.4136, 1.7430]
    + [-0.4040, 0.2173, 0.4915, 1.5017, 3.5037, -4.2815, 10.4920, -0.7502, -6.3056],
    dtype=np.float64,
)


def candidate_lists(
    lexical: list[tuple[int, float]],
    dense_ids: np.ndarray,
) -> tuple[dict[int, int], dict[int, float], dict[int, int]]:
    """(FTS5 rank by id, FTS5 score / best by id, dense rank by id) of the two lists."""
    lex_rank = {m: r for r, (m, _) in enumerate(lexical)}
    best = max((s for _, s in lexical), default=0.0)
    lex_norm = {m: (s / best if best > 0 else 0.0) for m, s in lexical}
    dense_rank = {int(m): r for r, m in enumerate(dense_ids.tolist())}
    return lex_rank, lex_norm, dense_rank


# A memory's subject: its first word, capitalised, after an optional "(...)" lead (a date):
# "Melanie: ...", "(8 May, 2023) Melanie said, ...", "Alice prefers tabs".
SUBJECT = re.compile(r"\s*(?:\([^)]{0,80}\)\s*)?[\"'\[]?([A-Z][A-Za-z0-9_-]*)")
HEAD = 100  # characters of a memory read for its subject
# A turn's speaker label: a chat role, or one to three capitalised words, then ": " or
# " said," ("Melanie: ...", "user: ...", "(8 May, 2023) Melanie said, ..."), after an
# optional "(...)" or "[...]" lead (a date, a time).
SPEAKER = re.compile(
    r"\s*(?:(?:\([^)]{0,80}\)|\[[^\]]{0,80}\])\s*)?"
    r"((?i:user|assistant|human|system|ai)|[A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,2})"
    r"(?::\s| said,)"
)
QUERY_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


def subject(head: str) -> str | None:
    """The memory's subject word, lower-cased (None when it does not start with a name)."""
    m = SUBJECT.match(head)
    return m.group(1).lower() if m else None


def speaker(head: str) -> str | None:
    """The speaker label a memory starts with, lower-cased (None: it starts with none)."""
    m = SPEAKER.match(head)
    return m.group(1).lower() if m else None


def conversation_turns(
    shape: dict[int, Shape], near: dict[int, list[tuple[int, int]]], ids: list[int]
) -> set[int]:
    """The ``ids`` that are turns of a conversation: each starts with a speaker label and a
    thread neighbour one place away starts with another (speakers take turns).

    Only there does a neighbour's match say something about a memory (the reply to a
    matching question holds its answer). Notes written in one burst, knowledge-graph
    observations imported at once, a transcript without speakers are not conversations:
    there the note next to a match is about something else, and lending it the match
    put it above the answer.
    """
    out = set()
    for m in ids:
        own = shape[m].speaker if m in shape else None
        if own is None:
            continue
        for o, d in near.get(m, ()):
            other = shape[o].speaker if o in shape else None
            if d == 1 and other is not None and other != own:
                out.add(m)
                break
    return out


def query_names(query: str) -> frozenset[str]:
    """The names the query uses, lower-cased: its capitalised words of two letters or more
    that are not function words ("Melanie" of "What did Melanie paint?"; nothing of "what
    happens when a deploy fails": a common word that starts a note is not its subject)."""
    words = {w.lower() for w in QUERY_WORD.findall(query) if len(w) > 1 and w[0].isupper()}
    return frozenset(words - FUNCTION_WORDS)


def topic_query(query: str) -> str | None:
    """The query without the names it uses ("What did Melanie paint?" -> "What did paint?"),
    or None when it uses none or is nothing else.

    A small embedding model puts much of a short question's vector in its names, so
    the vector of "What did Caroline research?" is nearest every turn Caroline says;
    without the name it is nearest what the question is about. `features` uses it only
    when each name is the subject of candidates (a speaker, the person memories are
    about), not when it is what the question is about ("Korean restaurants").
    """
    names = query_names(query)
    if not names:
        return None
    tokens = query.split()
    kept = []
    for token in tokens:
        words = QUERY_WORD.findall(token)
        if words and words[0].lower() in names and words[1:] in ([], ["s"]):
            continue  # "Melanie", "Melanie's", "(Melanie)"
        kept.append(token)
    return " ".join(kept) if len(kept) < len(tokens) and kept else None


class Candidates(NamedTuple):
    """The re-ranker's input for one query (`rank.rerank_candidates`)."""

    dense: tuple[np.ndarray, np.ndarray]  # the nearest allowed memories and their cosines
    lex: list[tuple[int, float]]  # the allowed FTS5 matches, best first (dated ones first)
    ids: list[int]  # the candidates
    rows: np.ndarray  # their `FEATURES`
    lenders: dict[int, int]  # candidate -> its matching neighbour (for ``explain``)
    turns: set[int]  # the candidates that are turns of a conversation


class Shape(NamedTuple):
    length: int  # characters
    question: bool  # ends with a question mark
    subject: str | None  # `subject` of its head
    speaker: str | None = None  # `speaker` of its head


NO_SHAPE = Shape(0, False, None)  # a memory that is not in the store


class Texts:
    """The text ends of the memories one recall looks at, each read once: its `Shape` and
    its first `COVER_CHARS` characters lower-cased (for `coverage`), without the whole text
    (a memory that is not in the store has neither)."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.shape: dict[int, Shape] = {}
        self.heads: dict[int, str] = {}
        self.asked: set[int] = set()

    def read(self, ids: Iterable[int]) -> None:
        """Read those of ``ids`` not read yet, in one query."""
        rest = sorted(set(ids) - self.asked)
        if not rest:
            return
        self.asked.update(rest)
        for t in self.snap.text_ends(rest, COVER_CHARS):
            question = t.tail.rstrip().rstrip("\"'").endswith("?")
            head = t.head[:HEAD]
            self.shape[t.id] = Shape(t.length, question, subject(head), speaker(head))
            self.heads[t.id] = t.head.lower()


def cosines(
    cache: RecallCache, qvec: np.ndarray, ids: list[int], known: dict[int, float]
) -> dict[int, float]:
    """Best window cosine of each memory to the query (0 without a cached vector);
    ``known``: those the index search already gave."""
    q = np.asarray(qvec, dtype=np.float32).reshape(-1)
    rest = [m for m in ids if m not in known]
    found = cache.index["memory"].best_cosines(q, rest).tolist() if rest else []
    return {**known, **dict(zip(rest, found, strict=True))}


def candidate_pool(
    cache: RecallCache,
    texts: Texts,
    allowed: np.ndarray,
    lexical: list[tuple[int, float]],
    dense_ids: np.ndarray,
) -> tuple[list[int], dict[int, list[tuple[int, int]]], set[int]]:
    """The candidates: the first `POOL` of each list, and the thread neighbours one place
    away of the first `NEIGHBOUR_FROM` of each that are turns of a conversation; with the
    thread neighbours up to `REGION` places of each that starts with a speaker label (only
    those can be turns: `conversation_turns`), and those of them that are turns. ``texts``
    has read the candidates and those speakers' neighbours one place away."""
    lex_rank = {m: r for r, (m, _) in enumerate(lexical[:POOL])}
    dense_rank = {int(m): r for r, m in enumerate(dense_ids[:POOL].tolist())}
    near: dict[int, list[tuple[int, int]]] = {}

    def walk(ids: list[int]) -> None:
        texts.read(ids)
        for m in ids:
            if m not in near and texts.shape.get(m, NO_SHAPE).speaker is not None:
                near[m] = thread_neighbours(cache, m, allowed, REGION)
        texts.read(o for m in ids for o, d in near.get(m, ()) if d == 1)

    matched = list(dict.fromkeys([*lex_rank, *dense_rank]))
    pool = dict.fromkeys(matched)
    walk(matched)
    talk = conversation_turns(texts.shape, near, matched)
    for m in matched:
        if m in talk and (
            lex_rank.get(m, POOL) < NEIGHBOUR_FROM or dense_rank.get(m, POOL) < NEIGHBOUR_FROM
        ):
            pool.update((other, None) for other, d in near[m] if d == 1)
    ids = list(pool)
    walk(ids)
    return ids, near, conversation_turns(texts.shape, near, ids)


def features(
    cache: RecallCache,
    snap: Snapshot,
    query: str,
    qvec: np.ndarray,
    allowed: np.ndarray,
    lexical: list[tuple[int, float]],
    dense: tuple[np.ndarray, np.ndarray],
    tvec: np.ndarray | None = None,
) -> tuple[list[int], np.ndarray, dict[int, int], set[int]]:
    """The candidates (memory ids), their `FEATURES` rows, for ``explain`` the matching
    neighbour (1 place away, in either list) of each candidate that has one, and the
    candidates that are turns of a conversation (`conversation_turns`).

    Thread neighbours count only for a turn of a conversation: a memory that is not
    has its `NEIGHBOUR_FEATURES` at 0, no subject and no topic, and joins the
    candidates only by its own match.

    ``lexical``: the allowed FTS5 matches, best first, (id, score larger is better);
    ``dense``: the allowed memories nearest the query, best first, and their cosines;
    ``tvec``: the vector of `topic_query` (None: the query uses no names).
    """
    dense_ids = dense[0]
    lex_rank, lex_norm, dense_rank = candidate_lists(lexical[:POOL], dense_ids[:POOL])
    texts = Texts(snap)
    ids, near, talk = candidate_pool(cache, texts, allowed, lexical, dense_ids)
    # the best cosines are over the candidates and their neighbours one place away, turns
    # or not: an approximate index may have passed over one nearer than all it found
    walked = {o for m in ids for o, d in near.get(m, ()) if d == 1}
    every = set(ids) | walked | set(thread_ones(cache, [m for m in ids if m not in near], allowed))
    known = dict(zip(dense_ids.tolist(), dense[1].tolist(), strict=True))
    cos = cosines(cache, qvec, sorted(every), known)
    best_cos = max(cos.values(), default=0.0)
    names = query_names(query)
    said = {m: s for m, s in texts.shape.items() if m in talk}
    tcos = topic_cosines(cache, tvec, names, said, sorted(every)) or cos
    best_t = max(tcos.values(), default=0.0)
    cap = math.log1p(LENGTH_CAP)
    covered = coverage(query, texts.heads, ids)
    rows = np.zeros((len(ids), len(FEATURES)), dtype=np.float64)
    lenders: dict[int, int] = {}
    notes: list[int] = []  # the positions of the candidates that are not turns
    note_rows: list[tuple[float, ...]] = []  # their own evidence, long share and topic
    for i, m in enumerate(ids):
        length, question, subj, _ = texts.shape.get(m, NO_SHAPE)
        lex = lex_norm.get(m, 0.0)
        gap = cos[m] - best_cos
        log_len = min(math.log1p(length), cap)
        rank = lex_rank.get(m)
        own = (
            lex,
            1.0 / (rank + 1) if rank is not None else 0.0,
            cos[m],
            gap,
            log_len,
            float(question),
            log_len * lex,
            1.0 / (dense_rank[m] + 1) if m in dense_rank else 0.0,
            covered.get(m, 0.0),
        )
        if m not in talk:
            notes.append(i)
            note_rows.append((*own, long_share(length), tcos[m] - cos[m], tcos[m] - best_t - gap))
            continue
        gate = min(1.0, GATE / max(length, 1))
        one = [o for o, d in near[m] if d == 1]
        matching = [o for o in one if o in lex_rank or o in dense_rank]
        if matching:
            lenders[m] = max(matching, key=lambda o: lex_norm.get(o, 0.0) + cos[o])
        two = [o for o, d in near[m] if d == 2]
        far = [o for o, d in near[m] if d >= 3]
        region = [o for o, _ in near[m]]
        reg_lex = gate * max((lex_norm.get(o, 0.0) for o in far), default=0.0)
        reg_hits = gate * sum(o in lex_rank or o in dense_rank for o in region) / (2 * REGION)
        nb_lex = gate * max((lex_norm.get(o, 0.0) for o in one), default=0.0)
        nb_cos = gate * max((cos[o] - best_cos for o in one), default=-1.0)
        nb2_lex = gate * max((lex_norm.get(o, 0.0) for o in two), default=0.0)
        rows[i] = (
            *own,
            nb_lex,
            nb_cos,
            nb2_lex,
            min(lex, nb_lex),
            lex * nb_lex,
            min(gap, nb_cos),
            nb_lex - lex,
            float(subj is not None and subj in names),
            reg_lex,
            reg_hits,
            tcos[m] - cos[m],
            tcos[m] - best_t - gap,
            gate * max((tcos[o] - best_t for o in one), default=-1.0) - nb_cos,
            1.0,  # a turn
            *NO_NOTE,
        )
    fill_notes(rows, notes, note_rows)
    return ids, rows, lenders, talk


def fill_notes(rows: np.ndarray, at: list[int], evidence: list[tuple[float, ...]]) -> None:
    """The rows ``at``, of notes, from ``evidence`` (`OWN_FEATURES`, `long_share`, the two
    topic columns): the own evidence in the notes' columns, the lexical part again times
    the long share, the topic's; no subject, no neighbours (they are a conversation's)."""
    if at:
        block = np.array(evidence, dtype=np.float64)
        own = block[:, : len(OWN_FEATURES)]
        rows[np.ix_(at, NOTE_COLUMNS)] = own
        rows[np.ix_(at, LONG_COLUMNS)] = own[:, LONG_IN_OWN] * block[:, len(OWN_FEATURES), None]
        rows[np.ix_(at, TOPIC_COLUMNS)] = block[:, len(OWN_FEATURES) + 1 :]


def note_mmr(mmr_lambda: float) -> float:
    """The diversification of re-ranked notes: `NOTE_MMR_SHARE` of ``mmr_lambda``'s
    (`[retrieval] mmr_lambda`, 0.9: 0.98). The model's scores already weigh each note's own
    evidence; the fixed mixture's diversification moved a long reply that matches on its
    own below weaker notes (LongMemEval 0.885 session recall@5 at 0.9, 0.901 at 0.98, FAQ
    notes' recall@5 the same); a copy of a chosen note still moves down."""
    return 1.0 - (1.0 - mmr_lambda) * NOTE_MMR_SHARE


def long_share(length: int) -> float:
    """How far a memory is beyond `LENGTH_CAP` characters: 0 up to it, 1 from `LONG_FULL`."""
    return min(1.0, max(0.0, (length - LENGTH_CAP) / (LONG_FULL - LENGTH_CAP)))


def coverage(query: str, heads: dict[int, str], ids: list[int]) -> dict[int, float]:
    """memory id -> the share of the query's terms it holds, each term weighed by its
    rarity among ``ids`` (``ln(1 + n / (1 + holders))``): a note that holds the one rare
    word of the question and the common ones outranks one that holds only common ones,
    however BM25 saturated their counts. A term is held when a word of the memory's first
    `COVER_CHARS` characters starts with its stem (`stem`: "reload" holds "reloading");
    ``heads``: those characters of each memory, lower-cased (`Texts.heads`).
    """
    stems = list(dict.fromkeys(stem(w) for w in query_terms(query)))
    if not stems or not ids:
        return {}
    held = np.array([[starts_a_word(heads.get(m, ""), s) for s in stems] for m in ids], dtype=float)
    idf = np.log1p(len(ids) / (1.0 + held.sum(axis=0)))
    share = held @ idf / idf.sum()
    return dict(zip(ids, share.tolist(), strict=True))


def starts_a_word(text: str, prefix: str) -> bool:
    """Whether a word of ``text`` starts with ``prefix`` (``\\b`` + ``prefix``). Mostly
    the first `str.find` answers (about five times faster than a regular expression
    here); past an occurrence inside a word, the regular expression searches the rest, so
    a text where ``prefix`` stands inside many words costs one pass in C, not a Python
    loop per occurrence."""
    at = text.find(prefix)
    if at <= 0 or not (text[at - 1].isalnum() or text[at - 1] == "_"):
        return at >= 0
    return re.compile(r"(?<!\w)" + re.escape(prefix)).search(text, at + 1) is not None


def topic_cosines(
    cache: RecallCache,
    tvec: np.ndarray | None,
    names: frozenset[str],
    shape: dict[int, Shape],
    ids: list[int],
) -> dict[int, float]:
    """Best window cosine of each of ``ids`` to the query without its names, when each
    name starts `TOPIC_SUBJECTS` candidates or more; else {} (the topic does not apply)."""
    if tvec is None or not names:
        return {}
    counts: dict[str | None, int] = {}
    for s in shape.values():
        counts[s.subject] = counts.get(s.subject, 0) + 1
    if any(counts.get(n, 0) < TOPIC_SUBJECTS for n in names):
        return {}
    return cosines(cache, tvec, ids, {})


def topic_ranks(rows: np.ndarray, first: int = 10) -> dict[int, int]:
    """Candidate position -> its rank (0-based) by cosine to the query without its names,
    for the ``first`` best; {} when the topic does not apply (for ``explain``)."""
    if not len(rows) or not rows[:, TOPIC_COLUMN].any():
        return {}
    topic = rows[:, COSINE_COLUMN] + rows[:, TOPIC_COLUMN]
    return {int(i): r for r, i in enumerate(np.argsort(-topic, kind="stable")[:first])}


def scores(rows: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """The model's score of each candidate (larger is better)."""
    return rows @ (WEIGHTS if weights is None else weights)


def softmax_weights(z: np.ndarray) -> np.ndarray:
    """Scores to seed weights that sum to 1 (order kept)."""
    if len(z) == 0:
        return z
    e = np.exp(z - z.max())
    return e / e.sum()


# Questions that ask for several things, told apart without a model: "how many ...",
# "both", "what are ...", "which ... has/have", "has X <verb>ed", "what/which <plural>"
# ("what books has Tim read?", "which cities ...", "what kinds of art ..."). Its answer is
# spread over several conversations, so `diversify` keeps a wider stretch of the thread
# around each chosen memory out of the first places (`rank.Params.list_window`).
_SEVERAL = re.compile(
    r"\bhow many\b|\bboth\b|\bwhat are\b|\b(?:has|have)\s+\w+\s+\w+ed\b", re.IGNORECASE
)
# "which ... has/have" on one line, looked for from the first "which" of each line: a
# pattern `which.*has` would scan the rest of the line from every "which" (quadratic)
_WHICH = re.compile(r"\bwhich\b", re.IGNORECASE)
_HAS = re.compile(r"\b(?:have|has)\b", re.IGNORECASE)
_PLURAL_HEAD = re.compile(
    r"\W*(?:what|which)\s+(?:(?:kinds?|types?|sorts?)\s+of\s+)?(\w+s)\b", re.IGNORECASE
)
_NOT_PLURAL = frozenset({"is", "was", "does", "has", "this", "his", "its", "us", "yes"})


def list_question(query: str) -> bool:
    """Whether ``query`` asks for several things (see `_SEVERAL`, `_WHICH`, `_PLURAL_HEAD`)."""
    if _SEVERAL.search(query):
        return True
    for line in query.split("\n"):
        which = _WHICH.search(line)
        if which and _HAS.search(line, which.end()):
            return True
    head = _PLURAL_HEAD.match(query)
    return head is not None and head.group(1).lower() not in _NOT_PLURAL


def diversify(
    cache: RecallCache,
    ranked: list[tuple[int, float]],
    allowed: np.ndarray,
    limit: int,
    penalty: float,
    window: int = 1,
    turns: set[int] | None = None,
) -> list[tuple[int, float]]:
    """Re-order ``ranked`` (best first): greedily the memory with the best log score, less
    ``penalty`` if it is a thread neighbour (up to ``window`` places) of one already chosen;
    the first ``limit``. A memory moved down this way reports the score it was chosen by
    (its score times ``exp(-penalty)``), so the list stays in score order.

    ``turns``: only these memories (the turns of a conversation) are diversified, by
    their neighbours that are turns too (None: every memory of a thread)."""
    pool = ranked[: max(DIVERSIFY_POOL, min(limit, 2 * DIVERSIFY_POOL))]
    if penalty <= 0 or len(pool) <= 1 or turns is not None and not turns:
        return ranked[:limit]
    log_score = [math.log(max(s, 1e-300)) for _, s in pool]
    adjacent = [
        {o for o, _ in thread_neighbours(cache, m, allowed, window) if turns is None or o in turns}
        if turns is None or m in turns
        else set()
        for m, _ in pool
    ]
    chosen: list[int] = []
    taken: set[int] = set()
    free = set(range(len(pool)))
    out: list[tuple[int, float]] = []
    while free and len(chosen) < limit:
        best = max(
            sorted(free),
            key=lambda i: log_score[i] - (penalty if adjacent[i] & taken else 0.0),
        )
        chosen.append(best)
        memory, score = pool[best]
        out.append((memory, score * math.exp(-penalty) if adjacent[best] & taken else score))
        taken.add(memory)
        free.discard(best)
    # A neighbour's penalty only grows as memories are chosen: the picks come out best
    # first; a longer tail (not diversified) merges in by score (a stable sort).
    return sorted(out + ranked[len(pool) : limit], key=lambda pair: -pair[1])
