"""Screenshots of the dashboard over a small demo store, for docs/ui.md.

Runs ``memtrio serve --ui`` in a throwaway Git checkout, writes a few memories,
entities and relations over MCP, and captures each page in headless Chromium
(Debian's ``chromium``) over the DevTools protocol.

    PYTHONPATH=... python3 tools/ui_screenshots.py [OUT_DIR]   # default: docs/ui
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from cdp import Page, find_chromium, launch, open_page  # noqa: E402
from ui_serve import Mcp, serve_ui  # noqa: E402

MEMORIES = [
    ("Checkout calls Payments over gRPC; Payments stores card tokens in Vault", "decision", 0.9,
     ["Checkout", "Payments", "Vault"],
     [("Checkout", "calls", "Payments"), ("Payments", "stores_in", "Vault")]),
    ("Run ruff check and ruff format before every commit", "convention", 0.6, ["ruff"], []),
    ("The upload test is flaky on CI under load: retry it once before digging", "pitfall", 0.7,
     ["upload test"], []),
    ("Payments is owned by the billing team; ask them before changing its schema", "fact", 0.5,
     ["Payments", "billing team"], [("billing team", "owns", "Payments")]),
    ("Releases are tagged from main only, never from a release branch", "convention", 0.4, [], []),
]  # fmt: skip
SOURCE = {
    "payments/service.py": "class PaymentService:\n    def charge(self, card, amount):\n"
    "        return amount\n\n    def refund(self, charge_id):\n        return charge_id\n",
    "checkout/cart.py": "def total(items):\n    return sum(i.price for i in items)\n",
}


async def seed(mcp: Mcp) -> None:
    for content, kind, importance, entities, relations in MEMORIES:
        await mcp.ok(
            "remember", content=content, memory_type=kind, importance=importance,
            entities=entities,
            relations=[{"source": s, "relation": r, "target": t} for s, r, t in relations],
        )  # fmt: skip
    await mcp.ok(
        "add_observations",
        observations=[{"entityName": "Payments", "contents": ["written in Python", "PCI scope"]}],
    )
    await mcp.ok("recall", query="where are card tokens stored", use_embeddings=False)


async def capture(page: Page, url: str, out: Path) -> None:
    async def tab(name: str) -> None:
        await page.goto(f"{url}#{name}")
        await page.wait_for("document.body.dataset.ready === '1'")
        await page.wait_for(f"document.body.dataset.page === '{name}'")

    await tab("memories")
    await page.wait_for("document.querySelectorAll('#m-table tbody tr').length >= 5")
    await page.click('#m-table tbody tr[data-id="1"] td.content')
    await page.wait_for("!document.getElementById('m-detail').hidden")
    await page.wait_for("document.querySelectorAll('#d-history li').length > 0")
    await page.screenshot(out / "memories.png")
    await tab("graph")
    await page.fill("#g-entity", "Payments")
    await page.eval("document.getElementById('g-form').requestSubmit()")
    await page.wait_for("document.querySelectorAll('#g-svg g.node').length === 4")
    await page.eval(
        "document.querySelector('#g-svg g.node[data-name=\"Payments\"]')"
        ".dispatchEvent(new MouseEvent('click', {bubbles: true}))"
    )
    await page.wait_for("!!document.getElementById('g-observations')")
    await page.screenshot(out / "graph.png")
    await tab("recall")
    await page.fill("#r-q", "who owns Payments")
    await page.eval("document.getElementById('r-form').requestSubmit()")
    await page.wait_for("!!document.querySelector('#r-lexical li .tag')")
    await page.screenshot(out / "recall.png")
    await tab("code")
    await page.fill("#c-q", "charge")
    await page.eval("document.getElementById('c-form').requestSubmit()")
    await page.wait_for("document.getElementById('c-results').textContent.includes('service.py')")
    await page.fill("#c-path", "payments/service.py")
    await page.click("#c-outline-btn")
    await page.wait_for("document.getElementById('c-outline').textContent.includes('refund')")
    await page.wait_for("document.getElementById('c-checkouts').textContent.includes('python')")
    await page.screenshot(out / "code.png")
    await tab("server")
    await page.wait_for("!!document.querySelector('#s-traces .trace rect')")
    await page.screenshot(out / "server.png")


async def main(out: Path) -> None:
    binary = find_chromium()
    if binary is None:
        raise SystemExit("no chromium on PATH: apt-get install chromium")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="memtrio-demo-") as tmp:
        repo = Path(tmp) / "shop"
        repo.mkdir()
        for name, text in SOURCE.items():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(text)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        browser = launch(binary, 1400, 820)
        try:
            async with serve_ui(Path(tmp) / "home", repo) as served:
                await seed(served.mcp)
                async with open_page(browser) as page:
                    await capture(page, served.dashboard, out)
        finally:
            browser.close()
    for shot in sorted(out.glob("*.png")):
        print(f"{shot.relative_to(ROOT) if shot.is_relative_to(ROOT) else shot}")


if __name__ == "__main__":
    trio.run(main, Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "ui")
