"""Older browsers: each feature the page needs is checked in words, and each one it can do
without is forced off in Chromium to show the page still works (the palette's fallback for
browsers without light-dark() is held in test_a11y.py)."""

from tests.e2e.conftest import BOOT_TIMEOUT_MS, wait_ready

# A browser from before module workers: its Worker reads no `type` option and runs a classic
# script (as Firefox did before 114).
CLASSIC_WORKERS_ONLY = """
const Native = window.Worker;
window.Worker = class extends Native {
    constructor(url, options) { super(url, options ? {name: options.name} : undefined); }
};
"""

NO_SERVICE_WORKERS = "Object.defineProperty(Navigator.prototype, 'serviceWorker', {get: () => undefined});"


def open_with(chromium, base_url, script):
    context = chromium.new_context(service_workers="allow")
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.add_init_script(script)
    page.goto(base_url)
    return page


def test_a_browser_without_module_workers_is_told_what_it_lacks_and_what_to_use(chromium, base_url):
    page = open_with(chromium, base_url, CLASSIC_WORKERS_ONLY)
    try:
        page.wait_for_selector("html[data-state=error]", timeout=BOOT_TIMEOUT_MS)
        box = page.locator("#boot-error")
        assert box.is_visible()
        text = box.inner_text()
        assert "lacks module workers" in text and "Firefox 114" in text, text
        assert "SyntaxError" not in text  # the words, not the script error that follows
        assert page.get_by_role("button", name="Generate", exact=True).is_disabled()
    finally:
        page.context.close()


def test_without_service_workers_the_page_runs_online_and_says_nothing_of_saving(chromium, base_url):
    page = open_with(chromium, base_url, NO_SERVICE_WORKERS)
    try:
        wait_ready(page)
        # the page has looked for a way to save the site, and found none
        page.wait_for_function("() => !['waiting', 'checking'].includes(window.decodelab.offline.state)")
        assert page.evaluate("() => window.decodelab.offline.state") == "off"
        assert page.locator("#offline").inner_text() == ""
        result = page.evaluate("s => window.decodelab.generate(s)", {"seed": 2, "max_new_tokens": 8})
        assert result["status"] == "done"
        assert page.errors == []
    finally:
        page.context.close()


def test_a_page_from_an_insecure_address_says_to_open_it_from_a_secure_one(chromium, base_url):
    # what a browser does on plain http from another machine: no Web Crypto, which the lesson's
    # file checks need
    page = open_with(chromium, base_url, "Object.defineProperty(window, 'isSecureContext', {get: () => false});")
    try:
        page.wait_for_selector("html[data-state=error]", timeout=BOOT_TIMEOUT_MS)
        text = page.locator("#boot-error").inner_text()
        assert "secure address" in text and "https://" in text, text
    finally:
        page.context.close()
