"""Fixtures for end-to-end tests: the built site on a local server, driven in headless Chromium.

Every test page runs with all requests outside the site's own origin blocked and recorded, so a
test would notice the page reaching out to a CDN or anywhere else.

Where start-up is not what a test is about, its page starts warm (open_page, `warm_starts`): in
a copy of a browser profile in which this test process has already started the site once, so
the start restores what a learner's second visit restores (Python's snapshot, the installed
packages and their bytecode, Chromium's compiled WebAssembly), about half the time of a cold
start on the build machine. The files in COLD test start-up itself (the service worker, a
return, recovery, the benchmark) and start cold, as does `fresh_page`.
"""

import atexit
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "static"
CHROMIUM = "/usr/bin/chromium"
# The proxy is a closed port: every request that leaves this machine's loopback fails at once,
# whatever its host (the guards below record them). Chromium never sends loopback through a
# proxy, so the site's servers on 127.0.0.1 and localhost are reached directly.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic", "--proxy-server=http://127.0.0.1:9"]
BOOT_TIMEOUT_MS = 120_000
# Test files about start-up itself: their pages start cold.
COLD = {"test_offline.py", "test_return.py", "test_hardening.py", "test_shared_python.py",
        "test_browsers.py", "test_benchmark.py"}


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


class SitesGuard:
    """Records every request of a context (`requests`) and those that leave the given sites'
    origins (`blocked`). Chromium runs with a closed proxy (CHROMIUM_ARGS), so those fail: the
    guard watches rather than routes, because a routed context has no HTTP cache, and a warm
    start needs it (Chromium keeps compiled WebAssembly there)."""

    def __init__(self, context, *urls):
        self.origins = [origin(u) + "/" for u in urls]
        self.blocked = []
        self.requests = []
        context.on("request", self._seen)

    def _seen(self, request):
        url = request.url
        self.requests.append(url)
        if not url.startswith((*self.origins, "data:", "blob:")):
            self.blocked.append(url)


OfflineGuard = SitesGuard  # for a page of one site: OfflineGuard(context, base_url)


def record_errors(page):
    """page.errors: every uncaught error and console error the page reports from now on."""
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    return page


class Starts:
    """Whether open_page starts warm: set per test module by `warm_starts`; off outside pytest
    (the benchmark and the screenshots start cold, as a learner's first visit does)."""
    warm = False
    templates = {}  # origin -> a profile that has started the site on it once
    root = None


@pytest.fixture(scope="module", autouse=True)
def warm_starts(request):
    Starts.warm = request.path.name not in COLD
    yield
    Starts.warm = False


def profile_dir(name):
    if Starts.root is None:
        Starts.root = Path(tempfile.mkdtemp(prefix="decodelab-profiles-"))
        atexit.register(shutil.rmtree, Starts.root, True)
    return Path(tempfile.mkdtemp(prefix=name, dir=Starts.root))


def template(browser_type, url):
    """A browser profile in which the site on `url`'s origin has started once and kept what a
    return restores; made at this process's first warm start on that origin. The course's
    progress (localStorage) is taken out, so each copy starts as a first visit's page. (A
    widget in a course page on another site is not started warm: Chromium keeps a frame's HTTP
    cache apart for each site that embeds it and gives it no Cache Storage, so a warm profile
    would keep little more than the compiled WebAssembly, for a start of its own per site.)"""
    key = origin(url)
    if key not in Starts.templates:
        folder = profile_dir("template-")
        context = browser_type.launch_persistent_context(
            folder, executable_path=CHROMIUM, args=CHROMIUM_ARGS, service_workers="block")
        page = context.pages[0]
        page.goto(key + "/")
        wait_ready(page)
        page.wait_for_function("() => window.decodelab.timings.warmup_ms !== undefined",
                               timeout=BOOT_TIMEOUT_MS)
        wait_kept(page)
        context.close()
        for kept_apart in ("Local Storage", "Session Storage", "IndexedDB"):
            shutil.rmtree(folder / "Default" / kept_apart, ignore_errors=True)
        Starts.templates[key] = folder
    return Starts.templates[key]


def new_context(chromium, url, warm=None, **options):
    """A browser context for a page of the site on `url`: a warm one (a copy of `template`'s
    profile, in a browser of its own) when the test module starts warm and the service worker
    is not wanted, else a new context of `chromium`. Closing the context removes the copy."""
    options.setdefault("service_workers", "block")
    if warm is None:
        warm = Starts.warm
    if not warm or options["service_workers"] != "block":
        return chromium.new_context(**options)
    folder = profile_dir("warm-")
    shutil.copytree(template(chromium.browser_type, url), folder, dirs_exist_ok=True)
    context = chromium.browser_type.launch_persistent_context(
        folder, executable_path=CHROMIUM, args=CHROMIUM_ARGS, **options)
    context.on("close", lambda _: shutil.rmtree(folder, ignore_errors=True))
    return context


def open_page(chromium, base_url, path="", viewport=None, color_scheme="light",
              service_workers="block", warm=None):
    # service workers blocked unless asked for: what a test observes and routes is the network
    # itself (the service worker has its own tests, test_offline.py)
    context = new_context(chromium, base_url, warm=warm,
                          viewport=viewport or {"width": 1280, "height": 900},
                          color_scheme=color_scheme, accept_downloads=True,
                          service_workers=service_workers)
    guard = OfflineGuard(context, base_url)
    page = record_errors(context.pages[0] if context.pages else context.new_page())
    page.guard = guard
    page.goto(base_url + path)
    return page


def wait_ready(page):
    page.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
    return page


CLOSED_CHAPTER = """e => { const c = e.closest('.chapter[data-chapter]');
    return c && c.hidden ? c.dataset.chapter : null; }"""


def open_chapter(page, name):
    """Open a chapter of the lesson from its map, as a learner does."""
    page.locator(f'#course-map a[href="#{name}"]').click()
    page.locator(f'.chapter[data-chapter="{name}"]:not([hidden])').wait_for()


def reveal(page, target):
    """The part of the page `target` (a selector or a locator) names, with its chapter opened
    from the map first when another chapter is on screen."""
    part = page.locator(target) if isinstance(target, str) else target
    name = part.first.evaluate(CLOSED_CHAPTER)
    if name:
        open_chapter(page, name)
    return part


KEPT = """async kinds => {
    const urls = [];
    for (const name of await caches.keys()) {
        if (name.startsWith("decodelab-kept ")) urls.push(...(await (await caches.open(name)).keys()).map((r) => r.url));
    }
    return Object.fromEntries(kinds.map((kind) => [kind, urls.filter((url) => url.includes(`/${kind}/`))]));
}"""


def kept(page, kinds=("runtime-snapshot", "bytecode", "installed")) -> dict:
    """What the page's starts have kept for the next one (web/runtime/kept.js): kind -> its URLs."""
    return page.evaluate(KEPT, list(kinds))


def wait_kept(page, kinds=("runtime-snapshot", "bytecode", "installed"), timeout_s=60) -> dict:
    """Until the page's start has kept each of `kinds` for the next start."""
    deadline = time.monotonic() + timeout_s
    while not all((found := kept(page, kinds)).values()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the start kept no {' and '.join(kinds)} in {timeout_s} s: {found}")
        time.sleep(0.25)
    return found


@pytest.fixture
def fresh_page(chromium, base_url):
    """A page that starts cold, as a first visit's does."""
    page = open_page(chromium, base_url, warm=False)
    yield page
    page.context.close()


class Widgets:
    """Widget pages of the site (embed.html, index.html?embed=true) opened in one browser context
    beside a widget that stays open, so each joins the Python that one started, as the widgets of
    a course page share one (web/runtime/supervisor.js): a start of about a second instead of
    five, for the tests of what a widget shows rather than of how it starts."""

    def __init__(self, chromium, base_url):
        self.base_url = base_url
        self.context = new_context(chromium, base_url, viewport={"width": 1280, "height": 900})
        self.guard = OfflineGuard(self.context, base_url)
        self.keeper = self.context.pages[0] if self.context.pages else self.context.new_page()
        self.keeper.goto(base_url + "embed.html?lazy=none&panels=share&run=false")
        wait_ready(self.keeper)

    def open(self, path, viewport=None):
        """A widget page at `path`, not yet ready; page.errors as open_page's."""
        page = record_errors(self.context.new_page())
        if viewport:
            page.set_viewport_size(viewport)
        page.guard = self.guard
        page.goto(self.base_url + path)
        return page

    def close(self):
        self.context.close()


@pytest.fixture(scope="module")
def widgets(chromium, base_url):
    """Widget pages that share one Python (Widgets)."""
    shared = Widgets(chromium, base_url)
    yield shared
    shared.close()


@pytest.fixture(scope="module")
def app(chromium, base_url):
    """One booted page shared by a module's tests (booting costs seconds)."""
    page = wait_ready(open_page(chromium, base_url))
    yield page
    page.context.close()


# --- course pages that embed the widget (tests/e2e/hosts/), on other origins ------------------
#
# The course pages are served from 127.0.0.1 and the widget from localhost, so every message
# crosses origins as it would between a course site and the site hosting decodelab. A third
# origin (another port on 127.0.0.1) plays a page that should not be obeyed.

HOSTS = Path(__file__).resolve().parent / "hosts"  # course pages that embed the widget


def origin(url):
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@pytest.fixture(scope="module")
def widget_url(site_root):
    server, url = serve(site_root, host="localhost")
    yield url
    server.shutdown()


@pytest.fixture(scope="module")
def rogue_url(tmp_path_factory):
    server, url = serve(HOSTS, host="127.0.0.1")
    yield url
    server.shutdown()


@pytest.fixture(scope="module")
def host_url(tmp_path_factory, widget_url, rogue_url):
    """The host pages, with the widget's and the rogue's addresses filled in, on 127.0.0.1."""
    root = tmp_path_factory.mktemp("hosts")
    for path in HOSTS.iterdir():
        text = path.read_text()
        text = text.replace("{{WIDGET}}", widget_url).replace("{{ROGUE}}", rogue_url)
        (root / path.name).write_text(text)
    server, url = serve(root, host="127.0.0.1")
    yield url
    server.shutdown()


@pytest.fixture
def open_host(chromium, host_url, widget_url, rogue_url):
    contexts = []

    def opener(name, viewport=None):
        context = chromium.new_context(viewport=viewport or {"width": 1100, "height": 900},
                                       service_workers="block")
        contexts.append(context)
        guard = SitesGuard(context, host_url, widget_url, rogue_url)
        page = record_errors(context.new_page())
        page.guard = guard
        page.goto(host_url + name)
        return page

    yield opener
    for context in contexts:
        context.close()


def seen(page, kind):
    return page.evaluate("(t) => window.seen.filter((m) => m.type === t)", kind)


def wait_seen(page, kind, count=1, timeout=BOOT_TIMEOUT_MS):
    page.wait_for_function("([t, n]) => window.seen.filter((m) => m.type === t).length >= n",
                           arg=[kind, count], timeout=timeout)
    return seen(page, kind)


def widget_frame(page):
    """The widget's frame (the poster first, then the page it becomes)."""
    for frame in page.frames:
        if frame.url.startswith("http://localhost"):
            return frame
    return None
