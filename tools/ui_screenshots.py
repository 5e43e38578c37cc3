"""Screenshots of the dashboard over a small demo store, for docs/ui.md.

Runs ``memtrio serve --ui`` (loopback, a free port) in a throwaway Git checkout,
writes a few memories, entities, relations and observations over MCP, and
captures each page at 1400x900 in headless Chromium (Debian's ``chromium``)
over the DevTools protocol: each page as a person first sees it, opened cold
in a new tab straight from its URL, and the Code page once more after a
symbol search and an outline. Every process it starts ends with it.

    .venv/bin/python tools/ui_screenshots.py [OUT_DIR]   # default: docs/ui
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from cdp import Browser, find_chromium, launch, open_page  # noqa: E402
from ui_serve import Mcp, open_cold, serve_ui  # noqa: E402

WIDTH, HEIGHT = 1400, 900
PAGES = ("memories", "graph", "recall", "code", "server")
MEMORIES = [
    ("Checkout calls Payments over gRPC; Payments stores card tokens in Vault", "decision", 0.9,
     ["Checkout", "Payments", "Vault"],
     [("Checkout", "calls", "Payments"), ("Payments", "stores_in", "Vault")]),
    ("Run ruff check and ruff format before every commit", "convention", 0.6, ["ruff", "CI"],
     [("CI", "runs", "ruff")]),
    ("The upload test is flaky on CI under load: retry it once before digging", "pitfall", 0.7,
     ["upload test", "CI"], [("CI", "runs", "upload test")]),
    ("Payments is owned by the billing team; ask them before changing its schema", "fact", 0.5,
     ["Payments", "billing team"], [("billing team", "owns", "Payments")]),
    ("Orders are written to Postgres by Checkout and read by Reporting", "fact", 0.6,
     ["Orders", "Postgres", "Checkout", "Reporting"],
     [("Checkout", "writes", "Orders"), ("Reporting", "reads", "Orders"),
      ("Orders", "stored_in", "Postgres")]),
    ("Vault tokens rotate every 30 days; Payments reloads them without a restart", "fact", 0.5,
     ["Vault", "Payments"], [("Payments", "reads", "Vault")]),
    ("Releases are tagged from main only, never from a release branch", "convention", 0.4, [], []),
]  # fmt: skip
OBSERVATIONS = [
    {"entityName": "Payments", "contents": ["written in Python", "PCI scope"]},
    {"entityName": "Vault", "contents": ["HashiCorp Vault 1.15"]},
]
SOURCE = {
    "payments/service.py": "class PaymentService:\n    def charge(self, card, amount):\n"
    "        return amount\n\n    def refund(self, charge_id):\n        return charge_id\n",
    "checkout/cart.py": "def total(items):\n    return sum(i.price for i in items)\n\n\n"
    "def charge_card(cart, card):\n    return total(cart.items)\n",
}


async def seed(mcp: Mcp) -> None:
    """The demo store: memories with entities and relations, observations, two recalls."""
    for content, kind, importance, entities, relations in MEMORIES:
        await mcp.ok(
            "remember", content=content, memory_type=kind, importance=importance,
            entities=entities,
            relations=[{"source": s, "relation": r, "target": t} for s, r, t in relations],
        )  # fmt: skip
    await mcp.ok("add_observations", observations=OBSERVATIONS)
    for query in ("where are card tokens stored", "who owns Payments"):
        await mcp.ok("recall", query=query, use_embeddings=False)


def make_checkout(repo: Path) -> Path:
    for name, text in SOURCE.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


async def capture(browser: Browser, url: str, out: Path) -> None:
    for name in PAGES:
        async with open_page(browser) as page:  # a new tab: nothing typed, nothing cached
            await open_cold(page, url, name, WIDTH, HEIGHT)
            if name == "server":  # the trace timelines of the seeding's calls
                await page.wait_for("!!document.querySelector('#s-traces .trace rect')")
            await page.screenshot(out / f"{name}.png")
    async with open_page(browser) as page:
        await open_cold(page, url, "code", WIDTH, HEIGHT)
        await page.fill("#c-q", "charge")
        await page.eval("document.getElementById('c-form').requestSubmit()")
        await page.wait_for("document.querySelectorAll('#c-results tbody a').length >= 2")
        await page.click("#c-results tbody a[data-path='payments/service.py']")
        await page.wait_for("!!document.querySelector('#c-outline tr.hit')")
        await page.screenshot(out / "code-search.png")


async def main(out: Path) -> None:
    binary = find_chromium()
    if binary is None:
        raise SystemExit("no chromium on PATH: apt-get install chromium")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="memtrio-demo-") as tmp:
        repo = make_checkout(Path(tmp) / "shop")
        browser = launch(binary, WIDTH, HEIGHT)
        try:
            async with serve_ui(Path(tmp) / "home", repo) as served:
                await seed(served.mcp)
                await capture(browser, served.dashboard, out)
        finally:
            browser.close()
    for shot in sorted(out.glob("*.png")):
        print(f"{shot.relative_to(ROOT) if shot.is_relative_to(ROOT) else shot}")


if __name__ == "__main__":
    trio.run(main, Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "ui")
