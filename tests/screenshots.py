"""Regenerate the README screenshots from the real page: python3 tests/screenshots.py

Boots the built site in headless Chromium, runs a generation with settings that show the
filters at work, selects a step, and saves docs/screenshot*.png.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "py")]

from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, open_page, serve, wait_ready  # noqa: E402

SETTINGS = {"dataset": "names", "prompt": "mar", "seed": 7, "temperature": 0.8, "top_k": 8,
            "top_p": 0.9}


def shoot(browser, url, out: Path, width: int, scheme: str) -> None:
    page = open_page(browser, url, viewport={"width": width, "height": 900}, color_scheme=scheme)
    wait_ready(page)
    for name, value in SETTINGS.items():
        control = page.locator(f"#{name}")
        control.fill(str(value)) if control.evaluate("e => e.tagName") != "SELECT" \
            else control.select_option(value)
    page.get_by_role("button", name="Generate", exact=True).click()
    page.evaluate("() => window.decodelab.lastRun")
    page.wait_for_selector("html[data-state=ready]")
    page.locator("#text-gen [data-step]").nth(1).click()
    # the top of the page: title, controls, the generated text and the selected step
    page.screenshot(path=str(out), clip={"x": 0, "y": 0, "width": width, "height": 1400 if width > 800 else 1180})
    page.context.close()


def main() -> int:
    from playwright.sync_api import sync_playwright

    docs = ROOT / "docs"
    docs.mkdir(exist_ok=True)
    server, url = serve(ROOT / "static")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            shoot(browser, url, docs / "screenshot.png", 1280, "light")
            shoot(browser, url, docs / "screenshot-dark-360.png", 360, "dark")
            browser.close()
    finally:
        server.shutdown()
    print("wrote docs/screenshot.png and docs/screenshot-dark-360.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
