"""Fixtures for end-to-end tests: the built site on a local server, driven in headless Chromium.

Every test page runs with all requests outside the site's own origin blocked and recorded, so a
test would notice the page reaching out to a CDN or anywhere else.
"""

import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "static"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic"]
BOOT_TIMEOUT_MS = 120_000


@pytest.fixture(scope="session")
def site_root():
    if not (STATIC / "index.html").exists():
        subprocess.run([sys.executable, str(ROOT / "build.py"), "build"], check=True)
    return STATIC


def serve(root, host="127.0.0.1", isolated=False):
    sys.path.insert(0, str(ROOT))
    import build

    server = build.make_server(root, host=host, port=0, quiet=True, isolated=isolated)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, f"http://{host}:{server.server_address[1]}/"


@pytest.fixture(scope="session")
def base_url(site_root):
    server, url = serve(site_root)
    yield url
    server.shutdown()


@pytest.fixture(scope="session")
def chromium():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run python3 build.py setup (installs Debian's chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class OfflineGuard:
    """Aborts and records every request that leaves the page's own origin."""

    def __init__(self, context, base_url):
        self.origin = "{0.scheme}://{0.netloc}".format(urlsplit(base_url))
        self.blocked = []
        context.route("**/*", self._route)

    def _route(self, route):
        url = route.request.url
        if url.startswith(self.origin + "/") or url.startswith(("data:", "blob:")):
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort()


def open_page(chromium, base_url, path="", viewport=None, color_scheme="light",
              service_workers="block"):
    # service workers blocked unless asked for: what a test observes and routes is the network
    # itself (the service worker has its own tests, test_offline.py)
    context = chromium.new_context(viewport=viewport or {"width": 1280, "height": 900},
                                   color_scheme=color_scheme, accept_downloads=True,
                                   service_workers=service_workers)
    guard = OfflineGuard(context, base_url)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    page.guard = guard
    page.goto(base_url + path)
    return page


def wait_ready(page):
    page.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
    return page


@pytest.fixture
def fresh_page(chromium, base_url):
    page = open_page(chromium, base_url)
    yield page
    page.context.close()


@pytest.fixture(scope="module")
def app(chromium, base_url):
    """One booted page shared by a module's tests (booting costs seconds)."""
    page = wait_ready(open_page(chromium, base_url))
    yield page
    page.context.close()
