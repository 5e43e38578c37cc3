"""The storage contract of full-text search (`interfaces.fulltext.FullText`), on SQLite and PostgreSQL.

Every method, driven directly through `direct.Direct` on a fresh store of each backend, with
the cases a backend gets wrong: stems, case, query syntax and LIKE wildcards in the text,
unicode, missing rows, empty lists, id lists longer than SQLite's parameter limit, order
and ties, visibility of unscoped rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memtrio.actors.store.backend import Capability
from memtrio.actors.store.direct import Direct
from memtrio.actors.store.interfaces import StoreTx
from memtrio.actors.store.interfaces.fulltext import MemoryFilter, TextQuery, Visibility

HOSTILE = [
    '"',
    "'",
    "\\",
    "a'b",
    'say "hi"',
    "*",
    "x*",
    "-x",
    "a:b",
    "(",
    ")",
    "AND",
    "OR",
    "NOT",
    "NEAR",
    "NEAR(a b)",
    "^",
    "{x}",
    "&",
    "|",
    "!",
    "<->",
    ":*",
    "%",
    "_",
    "100%",
    "a_b",
    "\x00",
    "é",
    "🙂",
]


# -- seeding (through the other concepts' interfaces: their writes are not under test here) --


def scope(direct: Direct, name: str) -> int:
    return direct.write(lambda tx: tx.scopes.ensure(name))


def memory(
    direct: Direct,
    content: str,
    scopes: Sequence[int] = (),
    memory_type: str = "observation",
    importance: float = 0.0,
    ts: float = 1.0,
    entity: int | None = None,
) -> int:
    def op(tx: StoreTx) -> int:
        mid = tx.memories.insert(content, memory_type, importance, ts, scopes)
        if entity is not None:
            tx.memories.link_entity(mid, entity)
        return mid

    return direct.write(op)


def memories(direct: Direct, contents: Sequence[str]) -> list[int]:
    return direct.write(
        lambda tx: [tx.memories.insert(c, "observation", 0.0, 1.0, []) for c in contents]
    )


def entity(direct: Direct, name: str, kind: str = "entity", scopes: Sequence[int] = ()) -> int:
    def op(tx: StoreTx) -> int:
        eid = tx.graph_writes.create_entity(name, name, kind, 1.0)
        tx.graph_writes.link("entity", eid, scopes)
        return eid

    return direct.write(op)


def q(*terms: str, words: Sequence[str] | None = None) -> TextQuery:
    return TextQuery(list(terms), list(words if words is not None else terms))


def best(direct: Direct, query: TextQuery, low: int = 0, limit: int = 50) -> list[int]:
    return [m.id for m in direct.read(lambda tx: tx.fulltext.best_memories(query, low, limit))]


# -- memories ------------------------------------------------------------------------


def test_newest_memory_id_is_zero_when_empty_then_the_largest_id(direct: Direct) -> None:
    assert direct.read(lambda tx: tx.fulltext.newest_memory_id()) == 0
    ids = memories(direct, ["one", "two", "three"])
    assert direct.read(lambda tx: tx.fulltext.newest_memory_id()) == max(ids)
    assert direct.write(lambda tx: tx.fulltext.newest_memory_id()) == max(ids)


def test_memory_frequencies_name_every_term_and_count_by_stem(direct: Direct) -> None:
    memories(direct, ["charities help", "a charity", "the kettle"] + ["filler"] * 5)
    freqs = direct.read(lambda tx: tx.fulltext.memory_frequencies(["charity", "zzzabsent"]))
    assert freqs is not None and set(freqs) == {"charity", "zzzabsent"}
    assert all(isinstance(n, int) and n >= 0 for n in freqs.values())
    if direct.backend.has(Capability.EXACT_TERM_COUNTS):  # not a planner's estimate
        assert freqs == {"charity": 2, "zzzabsent": 0}
    assert direct.read(lambda tx: tx.fulltext.memory_frequencies([])) == {}


def test_best_memories_match_by_stem_not_prefix_best_first(direct: Direct) -> None:
    charity, camp, kitchen, both = memories(
        direct,
        [
            "I volunteered at two charities last month",
            "We camped by the lake",
            "The kitchen tap drips again",
            "charity camping charity camping weekend",
        ],
    )
    assert set(best(direct, q("charity"))) == {charity, both}
    assert best(direct, q("camping")) in ([both, camp], [camp, both])
    assert kitchen not in best(direct, q("kits"))
    # A memory matching both words ranks above one matching one of them.
    assert best(direct, q("charity", "camping"))[0] == both
    scores = [
        m.score for m in direct.read(lambda tx: tx.fulltext.best_memories(q("charity"), 0, 9))
    ]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)


def test_best_memories_words_close_together_rank_first(direct: Direct) -> None:
    # As long as each other, the phrase first (a tie would put the newer id first).
    phrase, scattered = memories(
        direct, ["model kits with trains and aid", "model trains with aid and kits"]
    )
    got = best(direct, q("model", "kits"))
    if direct.backend.has(Capability.RANKS_BY_PROXIMITY):
        assert got == [phrase, scattered]
    else:  # ts_rank does not score the phrase operators: a tie, the newer id first
        assert got == [scattered, phrase]


def test_best_memories_low_and_limit(direct: Direct) -> None:
    ids = memories(direct, [f"deploy number {i}" for i in range(20)])
    assert set(best(direct, q("deploy"), low=ids[15])) == set(ids[15:])
    assert len(best(direct, q("deploy"), limit=3)) == 3
    assert best(direct, q("deploy"), low=ids[-1] + 1) == []
    assert best(direct, q()) == []
    assert best(direct, q("absentword")) == []


def test_best_memories_ties_are_deterministic(direct: Direct) -> None:
    ids = memories(direct, ["same words here"] * 6)
    first = best(direct, q("words"))
    assert sorted(first) == sorted(ids)
    assert best(direct, q("words")) == first


def test_no_text_is_query_syntax(direct: Direct) -> None:
    """Quotes, operators and wildcards of either query language, and NUL, are plain text:
    nothing errors, and nothing but the words themselves matches."""
    plain = memory(direct, "a plain memory about kettles")
    vis = Visibility(scope_ids=[])

    def check(tx: StoreTx, word: str) -> None:
        ft = tx.fulltext
        query = TextQuery([word, "kettle"], [word, "kettle"])
        assert [m.id for m in ft.best_memories(query, 0, 10)] == [plain], word
        assert ft.seed_memories(query, 0, 10)[0].id == plain, word
        assert ft.seed_memories(query, plain, 10)[0].id == plain, word
        typed = MemoryFilter(scope_ids=[], memory_type=word)
        assert ft.best_memories_filtered(query, 0, typed, 10) == [], word
        assert ft.memory_candidates([plain], typed) == [], word
        assert ft.entities_with_word(word) == [], word
        assert ft.entities_containing(word) == [], word
        assert ft.observations_with_word(word, vis) == {}, word
        assert ft.visible_entities([1], vis, word) == [], word
        assert set(ft.memory_frequencies([word]) or {word: 0}) == {word}, word

    for word in HOSTILE:
        direct.read(lambda tx, w=word: check(tx, w))


def test_unicode_words_match(direct: Direct) -> None:
    ru, jp = memories(direct, ["привет мир и кот", "grüße aus köln"])
    assert best(direct, q("привет")) == [ru]
    assert best(direct, q("köln")) == [jp]


def test_seed_memories_window_scores_from_low(direct: Direct) -> None:
    ids = memories(direct, [f"filler text number {i}" for i in range(30)])
    both = memory(direct, "filler text alpha beta")
    one = memory(direct, "gamma text alpha beta")
    query = q("filler", "text")
    whole = [m.id for m in direct.read(lambda tx: tx.fulltext.seed_memories(query, 0, 200))]
    assert sorted(whole) == sorted([*ids, both, one])
    low = ids[20]
    seeds = direct.read(lambda tx: tx.fulltext.seed_memories(query, low, 200))
    assert {m.id for m in seeds} == {*ids[20:], both, one}
    scores = {m.id: m.score for m in seeds}
    assert scores[both] > scores[one] > 0
    assert [m.score for m in seeds] == sorted(scores.values(), reverse=True)
    assert len(direct.read(lambda tx: tx.fulltext.seed_memories(query, low, 2))) == 2
    assert direct.read(lambda tx: tx.fulltext.seed_memories(q(), 0, 10)) == []


def test_best_memories_filtered_scopes_repo_first_type_without_case(direct: Direct) -> None:
    repo, other, glob = (
        scope(direct, "repo:/r/.git"),
        scope(direct, "repo:/o/.git"),
        scope(direct, "global"),
    )
    strong_global = memory(direct, "cache cache cache", [glob])
    weak_repo = memory(direct, "the cache is warmed at startup and left alone for hours", [repo])
    unscoped = memory(direct, "cache cache", [])
    foreign = memory(direct, "cache cache cache cache", [other])
    pitfall = memory(direct, "cache pitfall cache", [repo], memory_type="Pitfall")
    allowed = MemoryFilter(scope_ids=[repo, glob], repo_ids=[repo])

    def ranked(a: MemoryFilter, low: int = 0, limit: int = 50) -> list[int]:
        return [
            m.id
            for m in direct.read(
                lambda tx: tx.fulltext.best_memories_filtered(q("cache"), low, a, limit)
            )
        ]

    got = ranked(allowed)
    assert set(got) == {strong_global, weak_repo, unscoped, pitfall}
    assert set(got[:2]) == {weak_repo, pitfall}  # repository memories first
    assert foreign not in got
    typed = MemoryFilter(scope_ids=[repo, glob], repo_ids=[repo], memory_type="PITFALL")
    assert ranked(typed) == [pitfall]
    assert ranked(MemoryFilter(scope_ids=[])) == [unscoped]
    assert len(ranked(allowed, limit=2)) == 2
    assert ranked(allowed, low=foreign) == [pitfall]


def test_best_memories_filtered_ties_newest_id_first(direct: Direct) -> None:
    ids = memories(direct, ["same words here"] * 5)
    got = direct.read(
        lambda tx: tx.fulltext.best_memories_filtered(q("words"), 0, MemoryFilter([]), 10)
    )
    assert [m.id for m in got] == sorted(ids, reverse=True)


def test_memory_candidates_filter_and_tell_ties(direct: Direct) -> None:
    repo, glob, other = scope(direct, "repo:/r/.git"), scope(direct, "global"), scope(direct, "x")
    in_repo = memory(direct, "a", [repo], importance=0.5, ts=7.0)
    in_global = memory(direct, "b", [glob], memory_type="Decision")
    unscoped = memory(direct, "c", [])
    foreign = memory(direct, "d", [other])
    allowed = MemoryFilter(scope_ids=[repo, glob], repo_ids=[repo])
    ids = [in_repo, in_global, unscoped, foreign, 999_999]

    def got(a: MemoryFilter, which: Sequence[int] = ids) -> dict[int, Any]:
        return {c.id: c for c in direct.read(lambda tx: tx.fulltext.memory_candidates(which, a))}

    found = got(allowed)
    assert set(found) == {in_repo, in_global, unscoped}
    assert found[in_repo].in_repo and not found[in_global].in_repo
    assert (found[in_repo].importance, found[in_repo].updated_at) == (0.5, 7.0)
    assert set(got(MemoryFilter([repo, glob], [repo], "decision"))) == {in_global}
    assert got(allowed, []) == {}
    assert set(got(MemoryFilter([]))) == {unscoped}


def test_memory_candidates_take_more_ids_than_sqlite_binds(direct: Direct) -> None:
    ids = memories(direct, ["x"] * 1200)
    asked = [*ids, *range(10**6, 10**6 + 40_000)]
    found = direct.read(lambda tx: tx.fulltext.memory_candidates(asked, MemoryFilter([])))
    assert sorted(c.id for c in found) == ids


# -- entities and observations -------------------------------------------------------


def test_entities_with_word_prefix_of_name_or_type_without_case(direct: Direct) -> None:
    alice = entity(direct, "Alice Liddell", "Person")
    svc = entity(direct, "DatabaseService", "service")
    ru = entity(direct, "Кот Матроскин", "кот")
    words = lambda w: direct.read(lambda tx: tx.fulltext.entities_with_word(w))  # noqa: E731
    assert words("ali") == [alice]
    assert words("LIDD") == [alice]
    assert words("person") == [alice]
    assert words("serv") == [svc]
    assert words("Service") == [svc]  # the type's word; not inside "DatabaseService"
    assert words("base") == []
    assert words("матр") == [ru]
    assert words("zz") == [] and words("") == []


def test_entities_containing_finds_text_inside_names_and_types(direct: Direct) -> None:
    svc = entity(direct, "DatabaseService", "component")
    snake = entity(direct, "snake_case", "Convention")
    pct = entity(direct, "100% Done", "state")
    other = entity(direct, "axb", "thing")
    inside = lambda t: direct.read(lambda tx: tx.fulltext.entities_containing(t))  # noqa: E731
    assert inside("baseserv") == [svc]
    assert inside("SERVICE") == [svc]
    assert inside("onven") == [snake]
    assert inside("e_c") == [snake]  # "_" is a character, not a wildcard
    assert inside("a_b") == [] and other
    assert inside("0% d") == [pct]
    assert inside("0%d") == []
    assert inside("ab") == [] and inside("") == []  # shorter than a trigram: nothing
    assert inside("zzz") == []


def test_observations_with_word_count_visible_observations_per_entity(direct: Direct) -> None:
    repo, other = scope(direct, "repo:/r/.git"), scope(direct, "repo:/o/.git")
    alice, bob = entity(direct, "Alice"), entity(direct, "Bob")
    memory(direct, "likes kettles", [repo], entity=alice)
    memory(direct, "kettle collector", [], entity=alice)
    memory(direct, "owns a kettle", [other], entity=alice)
    memory(direct, "Kettles again", [repo], memory_type="Observation", entity=bob)
    memory(direct, "kettle decision", [repo], memory_type="decision", entity=bob)
    memory(direct, "kettle with no entity", [repo])
    obs = lambda w, v: direct.read(lambda tx: tx.fulltext.observations_with_word(w, v))  # noqa: E731
    assert obs("kettl", Visibility([repo])) == {alice: 2, bob: 1}
    assert obs("KETTLE", Visibility([], everything=True)) == {alice: 3, bob: 1}
    assert obs("kettl", Visibility([])) == {alice: 1}
    assert obs("collect", Visibility([other])) == {alice: 1}
    assert obs("teapot", Visibility([repo])) == {}


def test_visible_entities_filter_scope_and_exact_type(direct: Direct) -> None:
    repo, other = scope(direct, "repo:/r/.git"), scope(direct, "repo:/o/.git")
    a = entity(direct, "A", "Person", [repo])
    b = entity(direct, "B", "person", [])
    c = entity(direct, "C", "Person", [other])
    vis = lambda ids, v, k=None: [  # noqa: E731
        e.id for e in direct.read(lambda tx: tx.fulltext.visible_entities(ids, v, k))
    ]
    assert vis([c, b, a, 10**9], Visibility([repo])) == [a, b]
    assert vis([a, b, c], Visibility([], everything=True)) == [a, b, c]
    assert vis([a, b, c], Visibility([repo]), "Person") == [a]
    assert vis([a, b, c], Visibility([repo]), "PERSON") == []
    assert vis([], Visibility([repo])) == []
    found = direct.read(lambda tx: tx.fulltext.visible_entities([a], Visibility([repo]), None))
    assert [(e.name, e.kind, e.canonical_name) for e in found] == [("A", "Person", "A")]


def test_visible_entities_take_more_ids_than_sqlite_binds(direct: Direct) -> None:
    def op(tx: StoreTx) -> list[int]:
        return [tx.graph_writes.create_entity(f"n{i}", f"n{i}", "e", 1.0) for i in range(1100)]

    ids = direct.write(op)
    asked = [*reversed(ids), *range(10**6, 10**6 + 40_000)]
    found = direct.read(lambda tx: tx.fulltext.visible_entities(asked, Visibility([]), None))
    assert [e.id for e in found] == sorted(ids)


def test_optimize_indexes_compacts_the_text_indexes_and_search_goes_on(direct: Direct) -> None:
    ids = memories(direct, [f"kettle number {i}" for i in range(30)])
    bob = entity(direct, "KettleMaker", "company")
    done = direct.write(lambda tx: tx.fulltext.optimize_indexes())
    assert done == sorted(done) and "memories_fts" in done and "entities_fts" in done
    assert sorted(best(direct, q("kettle"))) == ids
    assert direct.read(lambda tx: tx.fulltext.entities_containing("ettlemak")) == [bob]
    assert direct.write(lambda tx: tx.fulltext.optimize_indexes()) == done
