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

import sys
import tempfile
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from cdp import Browser, find_chromium, launch, open_page  # noqa: E402
from gitrepo import make_repo  # noqa: E402
from ui_serve import DEMO_SOURCE, open_cold, seed_demo, serve_ui  # noqa: E402

WIDTH, HEIGHT = 1400, 900
PAGES = ("memories", "graph", "recall", "code", "server")


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
        repo = make_repo(Path(tmp) / "shop", dict(DEMO_SOURCE))
        browser = launch(binary, WIDTH, HEIGHT)
        try:
            async with serve_ui(Path(tmp) / "home", repo) as served:
                await seed_demo(served.mcp)
                await capture(browser, served.dashboard, out)
        finally:
            browser.close()
    for shot in sorted(out.glob("*.png")):
        print(f"{shot.relative_to(ROOT) if shot.is_relative_to(ROOT) else shot}")


if __name__ == "__main__":
    trio.run(main, Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "ui")
