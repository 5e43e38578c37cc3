"""The dashboard in headless Chromium (Debian's ``chromium``; ``.ci/run`` installs it), driven
over the DevTools protocol (``tests/cdp.py``), against ``memtrio serve --ui``: what an agent
writes over MCP on /mcp shows on the pages served beside it, and what a person does on the
pages changes what the agent gets. Each page's screenshot goes to the test's tmp folder."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cdp import Browser, Page, find_chromium, launch, open_page
from gitrepo import make_repo
from ui_serve import serve_ui

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium on PATH (apt-get install chromium; .ci/run installs it)",
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the whole module."""
    assert CHROMIUM is not None
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
            names = await page.wait_for(
                "(() => { const n = [...document.querySelectorAll('#g-svg g.node')]"
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
            await page.wait_for(f"{text_of('#c-results')}.includes('fine.py:1-2')")
            await page.wait_for(f"{text_of('#c-checkouts')}.includes('python')")
            await page.fill("#c-path", "fine.py")
            await page.click("#c-outline-btn")
            await page.wait_for(f"{text_of('#c-outline')}.includes('fine')")
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
    for name in ("memories", "graph", "recall", "code", "server"):
        assert (tmp_path / "shots" / f"{name}.png").exists() or name in (
            "memories",
            "graph",
            "recall",
        )
