"""The dashboard's rough edges a new user met (issue 39, items 10 and 11), each in headless
Chromium (``tests/cdp.py``) against ``memtrio serve --ui``: a search ordered by relevance,
a memory opened without stretching the table, the pager, a stale memory's diff, a query
box that shows the query, a jump to a code hit under the page header, a graph drawn over
its whole canvas, and the Server page counting the dashboard itself. Screenshots go to
the test's tmp folder."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cdp import Browser, Page, find_chromium, launch, open_page
from gitrepo import make_repo
from mcp_client import ok, open_client
from ui_serve import SHOWN_ERRORS, open_cold, serve_ui

CHROMIUM = find_chromium()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium on PATH (apt-get install chromium; .ci/run installs it)",
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the whole module."""
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH")
    running = launch(CHROMIUM)
    try:
        yield running
    finally:
        running.close()


async def submit(page: Page, form: str) -> None:
    await page.eval(f"document.getElementById({json.dumps(form)}).requestSubmit()")


def text_of(selector: str) -> str:
    return f"(document.querySelector({json.dumps(selector)}) || {{}}).textContent || ''"


def rect(selector: str) -> str:
    """The element's bounding box in the viewport, as {top, bottom, left, right, height}."""
    return (
        f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
        ".getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left,"
        " right: r.right, height: r.height, width: r.width}; })()"
    )


RETRY = (
    "class RetryPolicy:\n    def backoff(self, attempt):\n        return min(30, 2 ** attempt)\n"
)


# The first row's height, and the height of the tallest content of its cells.
ROW_AND_CONTENT = (
    "(() => { const tr = document.querySelector('#m-table tbody tr');"
    " const tallest = Math.max(...[...tr.cells].map(td => { const r = document.createRange();"
    " r.selectNodeContents(td); return r.getBoundingClientRect().height; }));"
    " return [tr.getBoundingClientRect().height, tallest]; })()"
)


async def seed_retry_notes(home: Path, repo: Path) -> int:
    """Ten memories of ``repo`` matching "retry", the best match the oldest, anchored to
    `RetryPolicy.backoff`, whose code then changes (it is stale); the best's id.

    Written by an agent's stdio session in the repository (an HTTP session has no
    repository until its client lists roots)."""
    async with open_client(home, cwd=repo) as client:
        best = (await ok(
            client, "remember", content="The retry backoff doubles the retry delay on every retry",
            code=[{"path": "retry.py", "symbol": "RetryPolicy.backoff"}],
        ))["id"]  # fmt: skip
        for i in range(9):  # newer, each matching the query by one word
            await ok(client, "remember", content=f"Note {i}: the nightly job has a retry budget")
    (repo / "retry.py").write_text(RETRY.replace("min(30", "min(60"))
    return int(best)


def sort_is(value: str) -> str:
    return f"document.getElementById('m-sort').value === {json.dumps(value)}"


@needs_chromium
async def test_a_search_is_ordered_by_relevance_as_soon_as_a_query_is_typed(
    browser: Browser, tmp_path: Path
) -> None:
    """A search stayed sorted by "created": the best match came last of ten."""
    repo = make_repo(tmp_path / "repo", {"retry.py": RETRY})
    best = await seed_retry_notes(tmp_path / "home", repo)
    async with serve_ui(tmp_path / "home", repo) as served:
        async with open_page(browser) as page:
            await open_cold(page, served.dashboard, "memories")
            await page.fill("#m-q", "retry")
            assert await page.eval(sort_is("relevance"))
            await submit(page, "m-form")
            await page.wait_for(f"{text_of('#m-status')} === 'ranking: lexical'")
            rows = await page.eval(
                "[...document.querySelectorAll('#m-table tbody tr')].map(r => +r.dataset.id)"
            )
            assert rows[0] == best and len(rows) == 10, rows
            scores = await page.eval(
                "[...document.querySelectorAll('#m-table tbody td.score')].map(c => +c.textContent)"
            )
            assert scores == sorted(scores, reverse=True), scores
            await page.screenshot(tmp_path / "shots" / "memories-search.png")
            # Clearing the query lists by creation again; a sort the user picks stays picked.
            await page.fill("#m-q", "")
            assert await page.eval(sort_is("created"))
            await page.eval(
                "(() => { const s = document.getElementById('m-sort'); s.value = 'importance';"
                " s.dispatchEvent(new Event('change')); })()"
            )
            await page.fill("#m-q", "retry")
            assert await page.eval(sort_is("importance"))
            assert await page.eval(SHOWN_ERRORS) == [] and page.errors == []


@needs_chromium
async def test_the_pager_is_disabled_where_there_is_no_page(
    browser: Browser, tmp_path: Path
) -> None:
    """The ← pager was active on page 1 (and → on the last page)."""
    repo = make_repo(tmp_path / "repo", {"retry.py": RETRY})
    await seed_retry_notes(tmp_path / "home", repo)
    async with serve_ui(tmp_path / "home", repo) as served:
        async with open_page(browser) as page:
            await open_cold(page, served.dashboard, "memories")
            assert await page.eval(text_of("#m-page")) == "1-10 of 10"
            assert await page.eval("document.getElementById('m-prev').disabled") is True
            assert await page.eval("document.getElementById('m-next').disabled") is True


@needs_chromium
async def test_opening_a_memory_leaves_the_first_row_its_height(
    browser: Browser, tmp_path: Path
) -> None:
    """Opening a memory stretched the first table row into a large blank block (a table of
    a few rows, shorter than the memory's detail beside it)."""
    repo = make_repo(tmp_path / "repo", {"README.md": "demo\n"})
    async with serve_ui(tmp_path / "home", repo, {"MEMTRIO_CODE": "off"}) as served:
        for note in ("Releases are tagged from main", "Run ruff before every commit",
                     "The deploy script needs the VPN"):  # fmt: skip
            await served.mcp.ok("remember", content=note)
        async with open_page(browser) as page:
            await open_cold(page, served.dashboard, "memories")
            await page.click("#m-table tbody tr td.content")
            await page.wait_for("document.getElementById('d-content').value !== ''")
            await page.screenshot(tmp_path / "shots" / "memories-open.png")
            row, content = await page.eval(ROW_AND_CONTENT)
            assert row <= content + 24, (row, content)  # no blank block below its text


@needs_chromium
async def test_a_stale_memorys_detail_shows_what_changed(browser: Browser, tmp_path: Path) -> None:
    """A stale memory's detail listed its anchors but not what changed."""
    repo = make_repo(tmp_path / "repo", {"retry.py": RETRY})
    best = await seed_retry_notes(tmp_path / "home", repo)
    async with serve_ui(tmp_path / "home", repo) as served:
        async with open_page(browser) as page:
            await open_cold(page, served.dashboard, "memories")
            await page.click(f'#m-table tbody tr[data-id="{best}"] td.content')
            await page.wait_for("document.getElementById('d-content').value.includes('retry')")
            await page.wait_for(f"{text_of('#d-facts')}.includes('RetryPolicy.backoff changed')")
            diff = await page.eval(text_of("#d-diff"))
            # review_stale's structural diff: the file, and the symbol that changed.
            assert "retry.py" in diff and "~" in diff and "backoff" in diff, diff
            assert await page.eval(SHOWN_ERRORS) == [] and page.errors == []
            await page.screenshot(tmp_path / "shots" / "memories-stale.png")


LONG_QUERY = "which retry policy do the nightly jobs use when the upstream API times out twice"


@needs_chromium
async def test_the_recall_box_shows_the_whole_query(browser: Browser, tmp_path: Path) -> None:
    """The Recall query box cut the query off."""
    repo = make_repo(tmp_path / "repo", {"README.md": "demo\n"})
    async with serve_ui(tmp_path / "home", repo, {"MEMTRIO_CODE": "off"}) as served:
        await served.mcp.ok("remember", content="Nightly jobs retry twice, then page on-call")
        await served.mcp.ok("recall", query="nightly jobs", use_embeddings=False)
        async with open_page(browser) as page:
            await open_cold(page, served.dashboard, "recall")
            await page.fill("#r-q", LONG_QUERY)
            box = await page.eval(
                "(() => { const q = document.getElementById('r-q');"
                " return [q.scrollWidth, q.clientWidth]; })()"
            )
            assert box[0] <= box[1], box  # nothing of the query is scrolled out of sight
            await page.screenshot(tmp_path / "shots" / "recall-query.png")


@needs_chromium
async def test_the_recall_page_names_an_observations_entity(
    browser: Browser, tmp_path: Path
) -> None:
    """A knowledge-graph observation was listed as its bare text ("written in Go": which
    service?)."""
    repo = make_repo(tmp_path / "repo", {"README.md": "demo\n"})
    async with serve_ui(tmp_path / "home", repo, {"MEMTRIO_CODE": "off"}) as served:
        await served.mcp.ok(
            "create_entities",
            entities=[{"name": "billing-api", "entityType": "service",
                       "observations": ["written in Go"]}],
        )  # fmt: skip
        await served.mcp.ok("recall", query="written in Go", use_embeddings=False)
        async with open_page(browser) as page:
            await open_cold(page, served.dashboard, "recall")
            for column in ("#r-lexical", "#r-semantic"):
                item = await page.eval(text_of(f"{column} li[data-id]"))
                assert item.startswith("billing-apiwritten in Go"), (column, item)
            await page.screenshot(tmp_path / "shots" / "recall-entity.png")


@needs_chromium
async def test_the_server_page_counts_the_dashboard(browser: Browser, tmp_path: Path) -> None:
    """The Server page left the dashboard out of its sessions ("0 sessions" while it was in
    use) and never showed the dashboard's requests."""
    repo = make_repo(tmp_path / "repo", {"README.md": "demo\n"})
    async with serve_ui(tmp_path / "home", repo, {"MEMTRIO_CODE": "off"}) as served:
        for note in (
            "Nightly jobs retry twice, then page on-call",
            "Releases are tagged from main",
            "Run ruff before every commit",
        ):
            await served.mcp.ok("remember", content=note)
        async with open_page(browser) as page:
            await open_cold(page, served.dashboard, "memories")
            await page.fill("#m-q", "nightly")
            await submit(page, "m-form")
            await page.wait_for(f"{text_of('#m-status')} === 'ranking: lexical'")
            await page.eval("location.hash = '#server'")
            await page.wait_for("!!document.querySelector('#s-tree [data-actor]')")
            summary = await page.eval(text_of("#s-summary"))
            # The test's MCP session and the dashboard's own.
            assert "· 2 sessions ·" in summary, summary
            traces = await page.wait_for(
                f"{text_of('#s-traces')}.includes('dashboard /api/memories')"
                f" && {text_of('#s-traces')}"
            )
            # Its own refresh and the header every page loads are not activity.
            assert "dashboard /api/server" not in traces, traces
            assert "dashboard /api/overview" not in traces, traces
            await page.screenshot(tmp_path / "shots" / "server.png")
            assert await page.eval(SHOWN_ERRORS) == [] and page.errors == []


LONG_FILE = "".join(f"def step_{i:03d}(x):\n    return x + {i}\n\n\n" for i in range(150))


@needs_chromium
async def test_jumping_to_a_code_hit_keeps_the_page_header(
    browser: Browser, tmp_path: Path
) -> None:
    """A jump to a hit far down a file's outline scrolled the page header (the tabs) away."""
    repo = make_repo(tmp_path / "repo", {"pipeline.py": LONG_FILE})
    async with serve_ui(tmp_path / "home", repo) as served:
        async with open_page(browser) as page:
            await open_cold(page, served.dashboard, "code")
            await page.fill("#c-q", "step_140")
            await submit(page, "c-form")
            await page.wait_for("document.querySelectorAll('#c-results tbody a').length === 1")
            await page.click("#c-results tbody a")
            await page.wait_for("!!document.querySelector('#c-outline tr.hit')")
            await page.wait_for("window.scrollY > 0")  # the hit is far below the fold
            header, hit = (
                await page.eval(rect("header")),
                await page.eval(rect("#c-outline tr.hit")),
            )
            assert header["top"] >= 0 and header["height"] > 0, header
            assert hit["top"] >= header["bottom"] and hit["bottom"] <= 900, (header, hit)
            assert await page.eval("document.querySelector('#tabs a.active').textContent") == (
                "Code"
            )
            await page.screenshot(tmp_path / "shots" / "code-jump.png")


# The drawn entities' extent on the screen, and the canvas's, as [left, top, right, bottom].
DRAWING_AND_CANVAS = (
    "(() => { const boxes = [...document.querySelectorAll('#g-svg g.node, #g-svg g.label')]"
    ".map(g => g.getBoundingClientRect());"
    " const c = document.getElementById('g-svg').getBoundingClientRect();"
    " return [[Math.min(...boxes.map(b => b.left)), Math.min(...boxes.map(b => b.top)),"
    " Math.max(...boxes.map(b => b.right)), Math.max(...boxes.map(b => b.bottom))],"
    " [c.left, c.top, c.right, c.bottom]]; })()"
)


@needs_chromium
async def test_the_graph_drawing_fills_its_canvas(browser: Browser, tmp_path: Path) -> None:
    """A few entities were drawn at their natural size in the middle of a canvas mostly left
    blank (less than 60% of its width, a third of its height)."""
    repo = make_repo(tmp_path / "repo", {"README.md": "demo\n"})
    async with serve_ui(tmp_path / "home", repo, {"MEMTRIO_CODE": "off"}) as served:
        await served.mcp.ok(
            "remember", content="Checkout calls Payments, which stores cards in Vault",
            entities=["Checkout", "Payments", "Vault", "Orders", "billing team"],
            relations=[{"source": "Checkout", "relation": "calls", "target": "Payments"},
                       {"source": "Payments", "relation": "stores_in", "target": "Vault"},
                       {"source": "Checkout", "relation": "writes", "target": "Orders"},
                       {"source": "billing team", "relation": "owns", "target": "Payments"}],
        )  # fmt: skip
        async with open_page(browser) as page:
            for width, height in ((1400, 900), (1920, 1080)):
                await open_cold(page, served.dashboard, "graph", width, height)
                await page.wait_for("document.querySelectorAll('#g-svg g.node').length === 5")
                await page.screenshot(tmp_path / "shots" / f"graph-{width}.png")
                (x0, y0, x1, y1), (c0, d0, c1, d1) = await page.eval(DRAWING_AND_CANVAS)
                filled = max((x1 - x0) / (c1 - c0), (y1 - y0) / (d1 - d0))
                assert filled >= 0.75, (width, filled)  # the limiting side is (nearly) filled
                middle = ((x0 + x1) / 2 - (c0 + c1) / 2, (y0 + y1) / 2 - (d0 + d1) / 2)
                assert abs(middle[0]) < 0.1 * (c1 - c0) and abs(middle[1]) < 0.1 * (d1 - d0)
            assert await page.eval(SHOWN_ERRORS) == [] and page.errors == []
