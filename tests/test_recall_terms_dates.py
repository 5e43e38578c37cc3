"""Entities found without an LLM (``[retrieval] terms``) and normalized dates
(``[retrieval] dates``): the rules, and what they change in ``recall`` end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp_client import ok, open_client
from memtrio.actors.ranker.dates import matches, memory_dates, query_dates
from memtrio.actors.ranker.terms import extract

ON = {"MEMTRIO_EMBEDDINGS": "on"}


def test_terms_are_names_identifiers_paths_and_quoted_titles() -> None:
    found = extract(
        'Caroline: Hey Mel! I\'m reading "Becoming Nicole" by Amy Ellis Nutt in New York; '
        "the AuthService.renew() call in src/auth/jwt.py sets refresh_token via getUser."
    )
    assert {"mel", "amy ellis nutt", "amy", "nutt", "new york", "becoming nicole"} <= found
    assert {"authservice.renew", "src/auth/jwt.py", "refresh_token", "getuser"} <= found
    # A sentence's capitalised first word, function words, contractions and months are
    # not names; "e.g" is not an identifier.
    assert not {"caroline", "hey", "i'm", "i", "the"} & found
    assert extract("Thanks! I went there in May, e.g. on a Monday.") == set()


def test_memory_dates_resolve_relative_times_against_the_written_date() -> None:
    text = '(1:56 pm on 8 May, 2023) Caroline said, "I went to a support group yesterday"'
    assert memory_dates(text) == {(2023, 5, 8), (2023, 5, 7)}
    weekend = memory_dates("(27 June, 2023) We went camping last weekend, 2 weeks ago too")
    assert {(2023, 6, 24), (2023, 6, 25), (2023, 6, 13)} <= weekend
    assert memory_dates("We went camping yesterday") == frozenset()  # nothing to resolve against
    assert query_dates("When did Melanie go camping in June?") == [(0, 6, 0)]
    assert query_dates("What did she paint on October 13, 2023?") == [(2023, 10, 13)]
    assert query_dates("When did she go camping?") == []
    assert matches((0, 5, 0), memory_dates(text)) and not matches((0, 6, 0), memory_dates(text))
    assert not matches((2023, 5, 9), memory_dates(text))


def ids_of(payload: dict[str, Any]) -> list[int]:
    return [m["id"] for m in payload["memories"]]


# The June hike is the better lexical match ("hiking" twice); the question asks for May,
# a word no memory holds (their dates are written as numbers).
# A conversation (speakers take turns), as dated transcripts are stored.
HIKES = [
    '[2023-06-12] Caroline said, "Hiking again! I love hiking the ridge trail."',
    '[2023-06-12] Melanie said, "Sounds fun, enjoy the view."',
    '[2023-05-09] Caroline said, "I went hiking up the ridge trail yesterday."',
    '[2023-07-20] Melanie said, "The pottery class was so relaxing."',
]


async def test_a_question_naming_a_month_finds_the_memory_of_that_month(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    first: dict[str, int] = {}
    for dates in ("false", "true"):
        async with open_client(home, env={**ON, "MEMTRIO_RETRIEVAL_DATES": dates}) as client:
            if dates == "false":
                ids = [(await ok(client, "remember", content=t))["id"] for t in HIKES]
            out = await ok(
                client, "recall", query="When did Caroline go hiking in May?", explain=True
            )
            first[dates] = ids_of(out)[0]
    june, may = ids[0], ids[2]
    assert first == {"false": june, "true": may}
    assert "date: about the date the query names" in out["memories"][0]["explain"]


async def test_a_memory_shares_its_terms_whether_written_while_running_or_loaded(
    tmp_path: Path,
) -> None:
    """Terms come from memories written while the server runs (the change
    notifications) as well as from those it loads at start."""
    home = tmp_path / "home"
    home.mkdir()
    # Seeds from FTS5 only, so a memory sharing no word with the question is reached by
    # the graph walk alone (and not by its vector).
    env = {
        **ON,
        "MEMTRIO_RETRIEVAL_TERMS": "true",
        "MEMTRIO_RETRIEVAL_DENSE_SEEDS": "false",
        "MEMTRIO_RETRIEVAL_NEIGHBOUR_WEIGHT": "0",
    }
    # The second note shares no word with the question, only an identifier with the first.
    notes = [
        "The flaky check in CI is test_refresh_token_rotation, it fails once a week.",
        "Priya wrote test_refresh_token_rotation during the auth rewrite.",
        "CI runs take about twelve minutes on the main branch.",
        "The flaky office network drops video calls.",
    ]
    question = "Who is responsible for the flaky check in CI?"
    async with open_client(home, env=env) as client:
        ids = [(await ok(client, "remember", content=t))["id"] for t in notes]
        live = ids_of(await ok(client, "recall", query=question))
    async with open_client(home, env=env) as client:
        loaded = ids_of(await ok(client, "recall", query=question))
    async with open_client(home, env={**env, "MEMTRIO_RETRIEVAL_TERMS": "false"}) as client:
        without = ids_of(await ok(client, "recall", query=question))
    assert live[0] == ids[0] and ids[1] in live and sorted(live) == sorted(loaded)
    assert without[0] == ids[0] and ids[1] not in without
