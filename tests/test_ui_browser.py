"""The dashboard in headless Chromium (Debian's ``chromium``; ``.ci/run`` installs it), driven
over the DevTools protocol (``tests/cdp.py``), against ``memtrio serve --ui``: what an agent
writes over MCP on /mcp shows on the pages served beside it, and what a person does on the
pages changes what the agent gets. Every page is also opened cold, as a person does: a new
tab straight on its URL, nothing typed first. Each page's screenshot goes to the test's tmp
folder."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import cdp
import pytest
import waits
from cdp import Browser, Page, find_chromium, launch, open_page
from gitrepo import make_repo
from mcp_client import ok, open_client
from ui_serve import DEMO_SOURCE, SHOWN_ERRORS, open_cold, seed_demo, serve_ui

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


async def show(page: Page, url: str, tab: str) -> None:
    """Open the dashboard (the printed URL, with its token) on ``tab``, once it is ready."""
    await page.goto(f"{url}#{tab}")
    await page.wait_for("document.body.dataset.ready === '1'")
    await page.wait_for(f"document.body.dataset.page === {json.dumps(tab)}")


async def submit(page: Page, form: str) -> None:
    await page.eval(f"document.getElementById({json.dumps(form)}).requestSubmit()")


def text_of(selector: str) -> str:
    return f"(document.querySelector({json.dumps(selector)}) || {{}}).textContent || ''"


@needs_chromium
async def test_search_edit_and_forget_a_memory_an_agent_wrote(
    browser: Browser, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "demo\n"})
    async with serve_ui(tmp_path / "home", repo, {"MEMTRIO_CODE": "off"}) as served:
        mcp = served.mcp
        vpn = (await mcp.ok("remember", content="The deploy script needs the VPN up first",
                            memory_type="pitfall", importance=0.8))["id"]  # fmt: skip
        await mcp.ok("remember", content="Releases are tagged from main only")
        async with open_page(browser) as page:
            await show(page, served.dashboard, "memories")
            # The token moved from the URL to sessionStorage.
            assert "token" not in await page.eval("location.href")
            await page.fill("#m-q", "deploy VPN")
            await submit(page, "m-form")
            await page.wait_for(f"{text_of('#m-status')} === 'ranking: lexical'")
            rows = await page.eval(
                "[...document.querySelectorAll('#m-table tbody tr')].map(r => r.dataset.id)"
            )
            assert rows == [str(vpn)]
            await page.screenshot(tmp_path / "shots" / "memories.png")

            await page.click(f'#m-table tbody tr[data-id="{vpn}"] td.content')
            await page.wait_for("document.getElementById('d-content').value.includes('VPN')")
            assert await page.eval(text_of("#d-facts")) != ""
            await page.fill("#d-content", "The deploy script needs the staging key and the VPN")
            await page.click("#d-save")
            await page.wait_for(f"{text_of('#d-status')}.startsWith('saved')")
            recalled = await mcp.ok("recall", query="staging key", use_embeddings=False)
            assert [(m["id"], m["content"]) for m in recalled["memories"]] == [
                (vpn, "The deploy script needs the staging key and the VPN")
            ]

            await page.click("#d-forget")
            await page.wait_for("document.getElementById('confirm').open")
            assert f"Forget memory {vpn}?" in await page.eval(text_of("#confirm-text"))
            await page.screenshot(tmp_path / "shots" / "forget-confirm.png")
            await page.click("#confirm-no")  # cancelled: nothing happens
            await page.wait_for("!document.getElementById('confirm').open")
            assert (await mcp.ok("inspect", id=vpn))["id"] == vpn
            await page.click("#d-forget")
            await page.wait_for("document.getElementById('confirm').open")
            await page.click("#confirm-yes")
            await page.wait_for(f"{text_of('#m-status')} === 'memory {vpn} forgotten'")
            await page.wait_for(f"!document.querySelector('tr[data-id=\"{vpn}\"]')")
        assert (await mcp.ok("recall", query="staging key VPN", use_embeddings=False))[
            "memories"
        ] == []
        failed, message = await mcp.call("inspect", id=vpn)
        assert failed and "not found" in str(message)


@needs_chromium
async def test_graph_draws_the_seeded_entities_and_recall_says_why(
    browser: Browser, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "demo\n"})
    async with serve_ui(tmp_path / "home", repo, {"MEMTRIO_CODE": "off"}) as served:
        mcp = served.mcp
        await mcp.ok(
            "remember", content="Checkout calls Payments, which stores cards in Vault",
            entities=["Checkout", "Payments", "Vault"],
            relations=[{"source": "Checkout", "relation": "calls", "target": "Payments"},
                       {"source": "Payments", "relation": "stores_in", "target": "Vault"}],
        )  # fmt: skip
        await mcp.ok(
            "add_observations",
            observations=[{"entityName": "Payments", "contents": ["owned by the billing team"]}],
        )
        async with open_page(browser) as page:
            await show(page, served.dashboard, "graph")
            await page.fill("#g-entity", "Checkout")
            await submit(page, "g-form")
            # The drawing centred on Checkout, not the overview the page opened with (the
            # same three entities): that one may be drawn first, and the centred drawing,
            # arriving after the click below, would replace the observations it showed.
            names = await page.wait_for(
                "(() => { const c = document.querySelector('#g-svg g.node.center');"
                " if (!c || c.dataset.name !== 'Checkout') return false;"
                " const n = [...document.querySelectorAll('#g-svg g.node')]"
                ".map(g => g.dataset.name).sort(); return n.length === 3 && n; })()"
            )
            assert names == ["Checkout", "Payments", "Vault"]
            assert await page.eval("document.querySelectorAll('#g-svg g.edge').length") == 2
            await page.eval(
                "document.querySelector('#g-svg g.node[data-name=\"Payments\"]')"
                ".dispatchEvent(new MouseEvent('click', {bubbles: true}))"
            )
            await page.wait_for(f"{text_of('#g-observations')}.includes('billing team')")
            await page.fill("#g-from", "Checkout")
            await page.fill("#g-to", "Vault")
            await page.click("#g-path")
            await page.wait_for("document.querySelectorAll('#g-svg g.node.onpath').length === 3")
            await page.screenshot(tmp_path / "shots" / "graph.png")

            await show(page, served.dashboard, "recall")
            await page.fill("#r-q", "where does Payments store cards")
            await submit(page, "r-form")
            await page.wait_for("!!document.querySelector('#r-lexical li .tag')")
            tags = await page.eval(
                "[...document.querySelectorAll('#r-lexical li .tag')].map(t => t.textContent)"
            )
            assert "lexical: payments, store, cards" in tags
            assert "graph: Payments" in tags
            await page.screenshot(tmp_path / "shots" / "recall.png")


@needs_chromium
async def test_server_page_shows_the_restart_after_an_injected_parser_crash(
    browser: Browser, tmp_path: Path
) -> None:
    repo = make_repo(
        tmp_path / "repo",
        {"crash.py": "def boom():\n    pass\n", "fine.py": "def fine():\n    pass\n"},
    )
    env = {"MEMTRIO_FAULTS": "code.parse:crash.py=exit", "MEMTRIO_LOG_LEVEL": "info"}
    async with serve_ui(tmp_path / "home", repo, env) as served:
        async with open_page(browser) as page:
            await show(page, served.dashboard, "server")
            await page.wait_for("!!document.querySelector('#s-tree [data-actor=\"store\"]')")
            assert await page.eval(
                "[...document.querySelectorAll('#s-tree [data-actor^=\"parser-\"]')]"
                ".every(a => a.dataset.restarts === '0')"
            )
            await show(page, served.dashboard, "code")
            await page.fill("#c-q", "fine")
            await submit(page, "c-form")
            await page.wait_for(f"{text_of('#c-results tbody')}.includes('fine.py:1')")
            await page.wait_for(f"{text_of('#c-checkouts')}.includes('python')")
            await page.fill("#c-path", "fine.py")
            await page.click("#c-outline-btn")
            await page.wait_for(f"{text_of('#c-outline tbody')}.includes('fine')")
            await page.screenshot(tmp_path / "shots" / "code.png")

            await served.mcp.ok("server_status")  # a request for the trace timelines
            await show(page, served.dashboard, "server")
            await page.wait_for(
                '!!document.querySelector(\'#s-tree [data-actor^="parser-"][data-restarts="1"]\')'
            )
            await page.wait_for("!!document.querySelector('#s-traces .trace rect')")
            assert "server_status" in await page.eval(text_of("#s-traces"))
            assert "embeddings are off" in await page.eval(text_of("#s-model"))
            await page.screenshot(tmp_path / "shots" / "server.png")


PAGES = ("memories", "graph", "recall", "code", "server")


@needs_chromium
async def test_every_page_opened_cold_shows_content_and_no_error(
    browser: Browser, tmp_path: Path
) -> None:
    """Each page loaded straight from its URL in a new tab (nothing typed first), as a
    person opens it, on a seeded store: content, and no error shown or thrown."""
    repo = make_repo(tmp_path / "repo", dict(DEMO_SOURCE))
    async with serve_ui(tmp_path / "home", repo) as served:
        await seed_demo(served.mcp)
        for name in PAGES:
            async with open_page(browser) as page:
                await open_cold(page, served.dashboard, name)
                await page.screenshot(tmp_path / "shots" / f"{name}.png")
                assert await page.eval(SHOWN_ERRORS) == [], name
                assert page.errors == [], name
                # No empty box: every table and list that shows has rows.
                empty = await page.eval(
                    f"[...document.querySelectorAll('#page-{name} table, #page-{name} pre, "
                    f"#page-{name} ol, #page-{name} ul')].filter(e => e.offsetParent !== null"
                    " && !e.textContent.trim()).map(e => e.id || e.tagName)"
                )
                assert empty == [], (name, empty)
                if name == "graph":
                    drawn = await page.eval(
                        "[...document.querySelectorAll('#g-svg g.node')].map(g => g.dataset.name)"
                    )
                    assert {"Payments", "Checkout", "Vault", "Orders"} <= set(drawn)
                if name == "code":
                    assert "python 2" in await page.eval(text_of("#c-checkouts tbody"))


@needs_chromium
async def test_every_page_opened_cold_on_an_empty_store_says_so_without_error(
    browser: Browser, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "demo\n"})
    says = {
        "memories": ("#m-page", "no memories yet"),
        "graph": ("#g-summary", "No entities yet"),
        "recall": ("#r-recent", "No recall over this repository's scopes yet"),
        "code": ("#c-status", "up to date"),
        "server": ("#s-calls", "none"),
    }
    async with serve_ui(tmp_path / "home", repo) as served:
        for name, (where, text) in says.items():
            async with open_page(browser) as page:
                await page.goto(f"{served.dashboard}#{name}")
                await page.wait_for(f"document.getElementById('page-{name}').dataset.loaded")
                await page.wait_for(f"{text_of(where)}.includes({json.dumps(text)})")
                assert await page.eval(SHOWN_ERRORS) == [], name
                assert page.errors == [], name


# Every label box and node part (circle, name) drawn, and the pairs that overlap.
OVERLAPS = """(() => {
  const box = (el) => { const b = el.getBBox(); return {x: b.x, y: b.y, w: b.width, h: b.height}; };
  const hit = (a, b) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
  const parts = [...document.querySelectorAll('#g-svg g.node')].flatMap(g => [
    ['circle of ' + g.dataset.name, box(g.querySelector('circle'))],
    ['name of ' + g.dataset.name, box(g.querySelector('text'))]]);
  const labels = [...document.querySelectorAll('#g-svg g.label')].map(
    (g, i) => [g.dataset.relation + '#' + i, box(g.querySelector('rect'))]);
  const out = [];
  labels.forEach(([rel, l], i) => {
    for (const [what, n] of parts) if (hit(l, n)) out.push(rel + ' over ' + what);
    labels.slice(i + 1).forEach(([other, m]) => { if (hit(l, m)) out.push(rel + ' over ' + other); });
  });
  return {labels: labels.length, edges: document.querySelectorAll('#g-svg g.edge').length, overlaps: out};
})()"""


async def graph_names(page: Page, selector: str = "g.node") -> list[str]:
    return sorted(
        await page.eval(
            f"[...document.querySelectorAll('#g-svg {selector}')].map(g => g.dataset.name)"
        )
    )


@needs_chromium
async def test_graph_opens_on_the_most_connected_entities_with_labels_clear_of_nodes(
    browser: Browser, tmp_path: Path
) -> None:
    """It opened on `search_nodes: the query has no words to search for` and a blank canvas."""
    repo = make_repo(tmp_path / "repo", {"README.md": "demo\n"})
    services = [f"Service {i:02d}" for i in range(1, 13)]
    notes = [f"Note {i:02d}" for i in range(1, 36)]  # entities without relations
    relations = [("Gateway", "routes_to", s) for s in services] + [
        ("Service 01", "depends_on", "Database"),
        ("Service 02", "reads", "Database"),
        ("Service 02", "writes", "Database"),  # two relations between the same two
        ("Database", "notifies", "Service 02"),  # and one back
        ("Database", "replicates_to", "Replica with a rather long name"),
    ]
    async with serve_ui(tmp_path / "home", repo, {"MEMTRIO_CODE": "off"}) as served:
        names = {n for r in relations for n in (r[0], r[2])} | set(notes)
        await served.mcp.ok(
            "create_entities",
            entities=[
                {"name": n, "entityType": "thing", "observations": []} for n in sorted(names)
            ],
        )
        await served.mcp.ok(
            "create_relations",
            relations=[{"from": s, "relationType": t, "to": o} for s, t, o in relations],
        )
        connected = names - set(notes)
        async with open_page(browser) as page:
            await open_cold(page, served.dashboard, "graph")
            assert await page.eval(SHOWN_ERRORS) == [] and page.errors == []
            await page.wait_for("document.querySelectorAll('#g-svg g.node').length === 40")
            drawn = set(await graph_names(page))
            assert connected <= drawn  # the most connected first, then the rest up to 40
            summary = await page.eval(text_of("#g-summary"))
            assert summary.startswith(f"The 40 most connected of {len(names)} entities"), summary
            found = await page.eval(OVERLAPS)
            assert found["overlaps"] == [] and found["labels"] == found["edges"] == 17, found
            await page.screenshot(tmp_path / "shots" / "graph-overview.png")

            # The entity field filters what is drawn; Draw centres on the entity.
            await page.fill("#g-entity", "service")
            assert await graph_names(page, "g.node:not(.dim)") == services
            await page.fill("#g-entity", "Gateway")
            await submit(page, "g-form")
            await page.wait_for("!!document.querySelector('#g-svg g.node.center')")
            assert await graph_names(page, "g.node.center") == ["Gateway"]
            assert set(await graph_names(page)) == {"Gateway", "Database", *services}
            found = await page.eval(OVERLAPS)
            assert found["overlaps"] == [] and found["labels"] == found["edges"], found
            await page.fill("#g-entity", "")
            await submit(page, "g-form")
            await page.wait_for("document.querySelectorAll('#g-svg g.node').length === 40")
            assert await page.eval(SHOWN_ERRORS) == [] and page.errors == []


@needs_chromium
async def test_code_page_shows_the_index_then_symbols_and_outlines_as_tables(
    browser: Browser, tmp_path: Path
) -> None:
    """It showed raw tab-separated tool output in grey boxes (two of them empty before any
    search) and no index status until a search."""
    repo = make_repo(
        tmp_path / "repo",
        {"app/fine.py": "def fine():\n    pass\n\n\nclass Box:\n    def fine(self):\n        pass\n",
         "lib.py": "def other():\n    return 1\n"},
    )  # fmt: skip
    async with serve_ui(tmp_path / "home", repo) as served:
        async with open_page(browser) as page:
            await open_cold(page, served.dashboard, "code")
            status = await page.eval(text_of("#c-checkouts tbody"))
            assert str(repo) in status and "python 2" in status, status
            assert await page.eval(
                "[...document.querySelectorAll('#page-code pre, #page-code table')]"
                ".filter(e => e.offsetParent !== null).map(e => e.id)"
            ) == ["c-checkouts"]
            await page.fill("#c-q", "fine")
            await submit(page, "c-form")
            await page.wait_for("document.querySelectorAll('#c-results tbody a').length === 2")
            rows = await page.eval(
                "[...document.querySelectorAll('#c-results tbody tr')]"
                ".map(r => [...r.cells].slice(0, 3).map(c => c.textContent))"
            )
            assert rows == [
                ["app/fine.py:1", "function fine", ""],
                ["app/fine.py:6", "method fine", "Box"],
            ]
            await page.click("#c-results tbody a[data-line='6']")
            await page.wait_for("!!document.querySelector('#c-outline tr.hit')")
            outline = await page.eval(
                "[...document.querySelectorAll('#c-outline tbody tr')]"
                ".map(r => [r.className, r.cells[0].textContent, r.cells[1].textContent.trim()])"
            )
            assert outline == [
                ["", "app/fine.py:1", "function fine"],
                ["", "app/fine.py:5", "class Box"],
                ["hit", "app/fine.py:6", "method fine"],
            ]
            assert "app/fine.py · python" in await page.eval(text_of("#c-outline-title"))
            assert await page.eval(SHOWN_ERRORS) == [] and page.errors == []
            await page.screenshot(tmp_path / "shots" / "code.png")


@needs_chromium
async def test_memories_name_an_observations_entity_and_cut_semantic_search_as_recall(
    browser: Browser, tmp_path: Path
) -> None:
    """An observation was listed without its entity; a semantic search listed every memory."""
    repo = make_repo(tmp_path / "repo", {"README.md": "demo\n"})
    topics = ["deploys", "billing", "the CI", "releases", "the database", "caching", "logging"]
    async with serve_ui(tmp_path / "home", repo, {"MEMTRIO_EMBEDDINGS": "on"}) as served:
        for i, topic in enumerate(topics * 2):
            await served.mcp.ok("remember", content=f"Note {i} about {topic} for the team")
        await served.mcp.ok(
            "create_entities",
            entities=[{"name": "Payments", "entityType": "service",
                       "observations": ["owned by the billing team"]}],
        )  # fmt: skip
        async with open_page(browser) as page:
            await open_cold(page, served.dashboard, "memories")
            cells = await page.eval(
                "[...document.querySelectorAll('#m-table tbody tr')].filter(r => "
                "r.querySelector('td.content').textContent === 'owned by the billing team')"
                ".map(r => r.querySelector('td.entities').textContent)"
            )
            assert cells == ["Payments"]
            await page.eval("document.getElementById('m-mode').value = 'semantic'")
            await page.fill("#m-q", "who handles billing")
            await submit(page, "m-form")
            await page.wait_for(f"{text_of('#m-status')}.startsWith('ranking: semantic')")
            shown = await page.eval(
                "[...document.querySelectorAll('#m-table tbody tr')].map(r => +r.dataset.id)"
            )
            recalled = await served.mcp.ok("recall", query="who handles billing")
            assert recalled["ranking"] == "semantic"
            assert len(shown) == 10 and set(shown) == {m["id"] for m in recalled["memories"]}
            assert "the 10 best, as recall returns them" in await page.eval(text_of("#m-status"))
            assert await page.eval(SHOWN_ERRORS) == [] and page.errors == []


# A stand-in for Chromium: its helper outlives it (SIGTERM ignored) and keeps writing into the
# profile's Default/ folder, as Chromium's renderers did while its profile was being removed.
HELPER = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
folder = os.path.join(sys.argv[1], "Default")
end = time.monotonic() + 60
i = 0
while time.monotonic() < end:
    os.makedirs(folder, exist_ok=True)
    open(os.path.join(folder, f"f{i % 64}"), "w").close()
    i += 1
"""
FAKE_BROWSER = """
import subprocess, sys, time
helper = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
print(helper.pid, flush=True)
time.sleep(60)
"""


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_closing_the_browser_waits_for_its_process_group_before_removing_its_profile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`Browser.close()` once failed with ``OSError: Directory not empty: 'Default'``: it
    removed the profile while Chromium's children still wrote into it."""
    monkeypatch.setattr(cdp, "CLOSE_GRACE", 1.0, raising=False)
    profile = tempfile.TemporaryDirectory(prefix="memtrio-fake-chromium-")
    process = subprocess.Popen(
        [sys.executable, "-c", FAKE_BROWSER, HELPER, profile.name],
        stdout=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        helper = int(process.stdout.readline())
        waits.until_sync((Path(profile.name) / "Default").exists, 10)
        Browser(process, 0, "", profile).close()
        assert process.returncode is not None and not running(helper)
        assert not os.path.exists(profile.name)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
        with contextlib.suppress(OSError):
            profile.cleanup()


@needs_chromium
async def test_a_stale_memory_shows_its_badge_and_the_stale_only_filter_keeps_it(
    browser: Browser, tmp_path: Path
) -> None:
    retry = "class RetryPolicy:\n    def backoff(self, attempt):\n        return 2 ** attempt\n"
    helpers = "def helper_one():\n    return 1\n"
    repo = make_repo(tmp_path / "repo", {"retry.py": retry, "helpers.py": helpers})
    home = tmp_path / "home"
    # Written by an agent's stdio session in the repository (an HTTP session has no
    # repository until its client lists roots).
    async with open_client(home, cwd=repo) as client:
        stale = (await ok(client, "remember", content="The retry delay doubles",
                          code=[{"path": "retry.py", "symbol": "RetryPolicy.backoff"}]))["id"]  # fmt: skip
        fresh = (await ok(client, "remember", content="helper_one returns 1",
                          code=[{"path": "helpers.py", "symbol": "helper_one"}]))["id"]  # fmt: skip
    async with serve_ui(home, repo) as served:
        (repo / "retry.py").write_text(retry.replace("2 ** attempt", "3 ** attempt"))
        badges = (
            "Object.fromEntries([...document.querySelectorAll('#m-table tbody tr')]"
            ".map(r => [r.dataset.id, !!r.querySelector('.tag.stale')]))"
        )
        async with open_page(browser) as page:
            await show(page, served.dashboard, "memories")
            await page.wait_for("document.querySelectorAll('#m-table tbody tr').length === 2")
            assert await page.eval(badges) == {str(stale): True, str(fresh): False}
            await page.click("#m-stale")
            await submit(page, "m-form")
            await page.wait_for("document.querySelectorAll('#m-table tbody tr').length === 1")
            assert await page.eval(badges) == {str(stale): True}
            await page.click(f'#m-table tbody tr[data-id="{stale}"] td.content')
            await page.wait_for(f"{text_of('#d-facts')}.includes('RetryPolicy.backoff changed')")
            assert await page.eval("!!document.querySelector('#d-facts dd .stale')")
            assert await page.eval(SHOWN_ERRORS) == [] and page.errors == []
            await page.screenshot(tmp_path / "shots" / "stale.png")
