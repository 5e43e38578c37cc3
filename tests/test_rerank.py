"""The learned re-ranker (actors/ranker/rerank.py): its features and its diversification,
and end to end what it is for: the reply after a matching turn is found, while a long
self-contained reply does not take the place of the short turn that matches."""

from __future__ import annotations

import sqlite3

import numpy as np
from mcp_client import ok, open_client
from memtrio.actors.ranker import rerank
from memtrio.actors.ranker.graph import RecallCache
from memtrio.actors.store.sqlite.snapshot import SqliteSnapshot

ON = {"MEMTRIO_EMBEDDINGS": "on"}


def thread_cache(n: int, gap_after: int | None = None) -> RecallCache:
    """Memories 1..n in one scope, written a second apart (one thread), except an hour's
    gap after ``gap_after`` (two threads)."""
    cache = RecallCache("m", "r", 4)
    t = 1000.0
    for m in range(1, n + 1):
        cache.items["memory"].set(m, [1], 0, t)
        t += 7200.0 if m == gap_after else 1.0
    return cache


def test_diversify_moves_a_chosen_memorys_neighbour_down_unless_clearly_better() -> None:
    cache = thread_cache(10)
    allowed = cache.items["memory"].allowed(None)
    ranked = [(1, 0.5), (2, 0.4), (7, 0.3)]
    # 2 is written next to 1: log(0.4) - 1 < log(0.3), so 7 comes second.
    assert [m for m, _ in rerank.diversify(cache, ranked, allowed, 3, 1.0)] == [1, 7, 2]
    assert rerank.diversify(cache, ranked, allowed, 3, 0.0) == ranked  # off
    # A neighbour far better than the rest keeps its place, reporting the score it was
    # chosen by (its own less the penalty), so the list stays in score order.
    clear = [(1, 0.5), (2, 0.45), (7, 0.01)]
    kept = rerank.diversify(cache, clear, allowed, 3, 1.0)
    assert [m for m, _ in kept] == [1, 2, 7]
    assert np.allclose([s for _, s in kept], [0.5, 0.45 * np.exp(-1.0), 0.01])
    # Memories of two threads (an hour apart) are not neighbours.
    split = thread_cache(10, gap_after=1)
    allowed = split.items["memory"].allowed(None)
    assert [m for m, _ in rerank.diversify(split, ranked, allowed, 3, 1.0)] == [1, 2, 7]


def test_weights_cover_every_feature() -> None:
    assert rerank.WEIGHTS.shape == (len(rerank.FEATURES),)
    assert np.isfinite(rerank.WEIGHTS).all() and np.abs(rerank.WEIGHTS).sum() > 0
    rows = np.eye(len(rerank.FEATURES))
    assert np.allclose(rerank.scores(rows), rerank.WEIGHTS)
    w = rerank.softmax_weights(np.array([3.0, 1.0, 2.0]))
    assert np.isclose(w.sum(), 1.0) and list(np.argsort(-w)) == [0, 2, 1]


LONG_REPLY = (
    "assistant: Congratulations! With Wells Fargo's pre-approval for $350,000 and a $325,000"
    " house, you have room for closing costs. "
) + " ".join(
    f"Step {i}: compare lenders, closing costs, inspection fees, insurance, escrow and taxes"
    " before you sign anything, and keep every document the bank sends you."
    for i in range(1, 16)
)
CHAT = [
    "user: I'm buying a $325,000 house and Wells Fargo pre-approved me for $350,000.",
    LONG_REPLY,
    "user: Can you suggest a recipe for a quick weeknight pasta?",
    "assistant: Try garlic, olive oil, chili flakes and parsley with spaghetti.",
    "user: My sister moved to Chicago last month.",
    "assistant: Chicago has wonderful neighbourhoods; Lincoln Park is lovely in spring.",
]


async def test_a_long_reply_does_not_take_the_place_of_the_short_turn_that_matches(
    tmp_path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    async with open_client(home, env=ON) as client:
        ids = [(await ok(client, "remember", content=t))["id"] for t in CHAT]
        found = await ok(
            client, "recall", query="How much did Wells Fargo pre-approve me for?", limit=3
        )
        got = [m["id"] for m in found["memories"]]
        assert got[0] == ids[0], [m["content"][:40] for m in found["memories"]]
        explained = await ok(
            client, "recall", query="How much did Wells Fargo pre-approve me for?", explain=True
        )
        first = explained["memories"][0]
        assert first["id"] == ids[0]
        assert any(r.startswith("reranked: #1") for r in first["explain"])
        assert any(r.startswith("lexical: #") for r in first["explain"])


def test_a_memorys_subject_is_its_first_name_after_a_leading_date() -> None:
    assert rerank.subject("Melanie: We went camping last weekend.") == "melanie"
    assert rerank.subject('(8 May, 2023) Melanie said, "We went camping."') == "melanie"
    assert rerank.subject("Alice prefers tabs over spaces") == "alice"
    assert rerank.subject("we use trio, never asyncio") is None
    assert rerank.subject("  (no date here") is None
    assert rerank.query_names("What do Melanie's kids like?") == {"melanie"}
    assert rerank.query_names("Did Alice and Bob both go?") == {"alice", "bob"}
    # a common word is no name: "Deploy pipeline runs are ..." is not about this query
    assert rerank.query_names("what happens when a deploy health check fails") == frozenset()


def test_texts_read_length_question_mark_subject_and_head() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE memories (id INTEGER PRIMARY KEY, content TEXT)")
    conn.executemany(
        "INSERT INTO memories VALUES (?, ?)",
        [(1, "Nate: Have you seen it?"), (2, "the build uses ruff " * 20), (3, '"Quoted" start')],
    )
    texts = rerank.Texts(SqliteSnapshot(conn))
    texts.read([1, 2, 3, 4])
    shape = texts.shape
    assert shape[1] == rerank.Shape(23, True, "nate", "nate")  # and its speaker label
    assert shape[2].length == 400 and not shape[2].question and shape[2].subject is None
    assert shape[3].subject == "quoted" and shape[3].speaker is None
    assert 4 not in shape and 4 not in texts.heads  # no such memory
    # the head for `coverage`: the first COVER_CHARS characters, lower-cased
    assert texts.heads[1] == "nate: have you seen it?"
    assert texts.heads[2] == ("the build uses ruff " * 20)[: rerank.COVER_CHARS]


def test_coverage_weighs_the_querys_rare_terms_above_its_common_ones() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE memories (id INTEGER PRIMARY KEY, content TEXT)")
    conn.executemany(
        "INSERT INTO memories VALUES (?, ?)",
        [
            (1, "Gunicorn workers are started by the master process."),
            (2, "Send HUP to the master process for a graceful reload of Gunicorn."),
            (3, "Gunicorn logs to stderr by default."),
            (4, "Reloading the application: the workers restart one by one."),
        ],
    )
    texts = rerank.Texts(SqliteSnapshot(conn))
    texts.read([1, 2, 3, 4])
    heads = texts.heads
    cover = rerank.coverage("How do I reload my application in Gunicorn?", heads, [1, 2, 3, 4])
    # "gunicorn" is in three of the four: it counts less than "reload" or "application",
    # held by one or two each; a word starting with the term's stem holds it ("Reloading").
    assert cover[4] > cover[2] > cover[1] == cover[3] > 0
    assert cover[4] == max(cover.values()) and 0 < cover[4] < 1  # not "gunicorn"
    assert rerank.coverage("?! --", heads, [1, 2]) == {}  # no terms: nothing to weigh
    assert rerank.coverage("reload", heads, []) == {}


def test_a_term_is_held_only_at_the_start_of_a_word() -> None:
    assert rerank.starts_a_word("x reload", "reload") and rerank.starts_a_word(
        "reloading", "reload"
    )
    # inside words only ("preload", "a_reload", "éreload"): not held, however many there are
    assert not rerank.starts_a_word("preload xreload a_reload éreload " * 50, "reload")
    # after occurrences inside words, one at a word's start still counts
    assert rerank.starts_a_word("preload " * 50 + "é reload", "reload")


def test_long_notes_have_their_own_columns_and_notes_are_diversified_less() -> None:
    assert rerank.long_share(rerank.LENGTH_CAP) == 0.0 and rerank.long_share(50) == 0.0
    assert 0 < rerank.long_share((rerank.LENGTH_CAP + rerank.LONG_FULL) // 2) < 1
    assert rerank.long_share(rerank.LONG_FULL) == rerank.long_share(10**6) == 1.0
    assert len(rerank.LONG_COLUMNS) == len(rerank.LONG_IN_OWN) < len(rerank.NOTE_COLUMNS)
    assert rerank.note_mmr(1.0) == 1.0  # diversification off stays off
    assert rerank.note_mmr(0.9) == 0.98 and rerank.note_mmr(0.5) == 0.9


def test_list_questions_are_told_from_questions_about_one_thing() -> None:
    several = [
        "What activities does Melanie partake in?",
        "How many times has Nate taken his turtles on a walk?",
        "What has Melanie painted?",
        "Which cities has Jon visited?",
        "What kinds of art does Caroline make?",
        "What do Jon and Gina both have in common?",
        "what conventions do we follow in this repo",
    ]
    one = [
        "What is Caroline's identity?",
        "When did Melanie paint a sunrise?",
        "What was my personal best time in the charity 5K run?",
        "What does Joanna do while she writes?",
        "Why do users get logged out?",
        "What is the wifi password",
    ]
    assert [q for q in several if not rerank.list_question(q)] == []
    assert [q for q in one if rerank.list_question(q)] == []
    # "which ... has" within one line only, whatever comes before
    assert rerank.list_question("Tell me: which of the cafes has Tim been to?")
    assert not rerank.list_question("which café\nhas the best coffee")
    assert rerank.list_question("which " * 2000 + "has")
    assert not rerank.list_question("which " * 2000)


def test_diversify_window_keeps_a_wider_stretch_of_the_thread_out() -> None:
    cache = thread_cache(20)
    allowed = cache.items["memory"].allowed(None)
    ranked = [(1, 0.5), (4, 0.45), (12, 0.3)]
    # 4 is three places from 1: no neighbour with window 1, a neighbour with window 3
    assert [m for m, _ in rerank.diversify(cache, ranked, allowed, 3, 1.5)] == [1, 4, 12]
    assert [m for m, _ in rerank.diversify(cache, ranked, allowed, 3, 1.5, 3)] == [1, 12, 4]


BOOK_THREAD = [
    "Tim: I just finished reading The Hobbit, such a great book.",
    "John: Nice! I loved that one as a kid.",
    "Tim: I also read A Dance with Dragons last week, another great fantasy book.",
    "John: Practice went well, my shooting percentage is up.",
    "Tim: That's awesome, keep it up!",
    "John: We won the game on Friday by ten points.",
    "Tim: Congrats! How is the ankle?",
    "John: Much better, I can run again.",
    "Tim: The weather here has been rainy all week.",
    "John: Same here, I stayed in and cooked soup.",
    "Tim: Last month I read The Name of the Wind, a book about a gifted musician.",
    "John: I made honey garlic chicken with roasted vegetables.",
    "Tim: Sounds delicious, send me the recipe.",
]


async def test_a_list_question_is_answered_from_both_parts_of_a_thread(tmp_path) -> None:
    """'What books has Tim read?' asks for several things: the two book turns written
    close together do not both take the first places while a third is further on.
    (The two close turns lend each other their match, so in this small thread the far one
    scores 1.7 below them in log: the cost is raised above that to show the window.)"""
    home = tmp_path / "home"
    home.mkdir()
    wide = {**ON, "MEMTRIO_RETRIEVAL_LIST_PENALTY": "3"}
    async with open_client(home, env=wide) as client:
        ids = [(await ok(client, "remember", content=t))["id"] for t in BOOK_THREAD]
        found = await ok(client, "recall", query="What books has Tim read?", limit=2)
        got = [m["id"] for m in found["memories"]]
        assert ids[10] in got and len({ids[0], ids[2]} & set(got)) == 1, [
            m["content"][:40] for m in found["memories"]
        ]
        explained = await ok(client, "recall", query="What books has Tim read?", explain=True)
        reasons = {m["id"]: m["explain"] for m in explained["memories"]}
        assert "subject: it starts with a name the query uses" in reasons[ids[10]]
        assert not any(r.startswith("subject:") for r in reasons.get(ids[1], []))  # John's
    # as any other question: the two close turns first
    narrow = {**wide, "MEMTRIO_RETRIEVAL_LIST_WINDOW": "1"}
    async with open_client(home, env=narrow) as client:
        found = await ok(client, "recall", query="What books has Tim read?", limit=2)
        assert {m["id"] for m in found["memories"]} == {ids[0], ids[2]}


def test_the_topic_query_is_the_query_without_its_names() -> None:
    assert rerank.topic_query("What did Melanie paint?") == "What did paint?"
    assert rerank.topic_query("What is Caroline's identity?") == "What is identity?"
    assert rerank.topic_query("How do Jon and Gina both destress?") == "How do and both destress?"
    assert rerank.topic_query("Where did (Tim) go?") == "Where did go?"
    assert rerank.topic_query("what happens when a deploy fails") is None  # no names
    assert rerank.topic_query("What does the API return?") == "What does the return?"
    assert rerank.topic_query("Caroline?") is None  # nothing but a name
    long = "Melanie said " * 800  # linear in the query's length
    assert rerank.topic_query(long) == " ".join(["said"] * 800)


def test_the_topic_counts_only_for_names_that_start_candidates() -> None:
    """The query without 'Caroline' is used when Caroline is whom the candidates are by or
    about; 'Korean' of 'Korean restaurants' is what the question is about: kept."""
    cache = RecallCache("m", "r", 3)
    e = np.eye(3, dtype=np.float32)
    for m, v in ((1, e[0]), (2, e[1]), (3, e[2])):
        cache.index["memory"].upsert(m, v)
    tvec = e[1]
    by = {
        1: rerank.Shape(40, False, "caroline"),
        2: rerank.Shape(40, False, "caroline"),
        3: rerank.Shape(40, False, "melanie"),
    }
    got = rerank.topic_cosines(cache, tvec, frozenset({"caroline"}), by, [1, 2, 3])
    assert got[2] > 0.99 and got[1] < 0.01 and got[3] < 0.01
    assert rerank.topic_cosines(cache, tvec, frozenset({"melanie"}), by, [1, 2, 3]) == {}
    both = frozenset({"caroline", "korean"})
    assert rerank.topic_cosines(cache, tvec, both, by, [1, 2, 3]) == {}
    assert rerank.topic_cosines(cache, None, frozenset({"caroline"}), by, [1, 2, 3]) == {}
    # explain's topic ranks: none where it does not apply (its features are 0), else by
    # cosine + (topic cosine - cosine)
    rows = np.zeros((3, len(rerank.FEATURES)))
    rows[:, rerank.FEATURES.index("cosine")] = [0.5, 0.4, 0.3]
    assert rerank.topic_ranks(rows) == {}
    rows[:, rerank.TOPIC_COLUMN] = [-0.3, 0.1, 0.0]  # topic cosines 0.2, 0.5, 0.3
    assert rerank.topic_ranks(rows) == {1: 0, 2: 1, 0: 2}
    assert rerank.topic_ranks(rows, first=1) == {1: 0}


CAROLINE_THREAD = [
    "Caroline: Hey Mel! Good to see you! How have you been?",
    "Melanie: Swamped with the kids and work. What's up with you?",
    "Caroline: I went to a support group yesterday and it was so powerful.",
    "Melanie: That sounds great, I'm glad you went.",
    "Caroline: Thanks! I've been looking into adoption agencies lately, reading up on how they work.",
    "Melanie: Wow, that's a big step!",
    "Caroline: I painted a sunset last weekend, it was so calming.",
    "Melanie: I love painting too, I did a lake sunrise last year.",
    "Caroline: My friends and family have been a huge support to me.",
    "Melanie: Family is everything. I'm off to go swimming with the kids.",
    "Caroline: I'm thinking about a career in counseling.",
    "Melanie: You'd be a great counselor!",
]


async def test_the_query_without_its_names_finds_what_it_asks_about(tmp_path) -> None:
    """Every turn says 'Caroline', so the vector of 'What has Caroline been researching?'
    is near all of hers; the vector of the query without the name finds the turn about
    looking into adoption agencies. With `topic_query = false` that turn is not in the
    first two."""
    home = tmp_path / "home"
    home.mkdir()
    query = "What has Caroline been researching?"
    async with open_client(home, env=ON) as client:
        ids = [(await ok(client, "remember", content=t))["id"] for t in CAROLINE_THREAD]
        found = await ok(client, "recall", query=query, limit=2, explain=True)
        reasons = {m["id"]: m["explain"] for m in found["memories"]}
        assert ids[4] in reasons, found["memories"]
        assert any(r.startswith("topic: #") for r in reasons[ids[4]]), reasons[ids[4]]
    off = {**ON, "MEMTRIO_RETRIEVAL_TOPIC_QUERY": "false"}
    async with open_client(home, env=off) as client:
        found = await ok(client, "recall", query=query, limit=2, explain=True)
        assert ids[4] not in [m["id"] for m in found["memories"]]
        assert not any(r.startswith("topic:") for m in found["memories"] for r in m["explain"])
