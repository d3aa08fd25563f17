"""Coming back to the lesson: offline after the first visit (web/sw.js, web/runtime/offline.js),
and a slow first start that shows the bytes arriving (web/runtime/downloads.js).

Each offline test serves its own copy of the site and takes the server away to prove a visit
needs no network; the other modules' pages have service workers blocked (conftest.open_page),
so that what they observe and route is the network itself."""

import json
import re
import shutil

import pytest

from tests.e2e.conftest import BOOT_TIMEOUT_MS, ROOT, record_errors, serve, wait_ready
from tools.site import write_service_worker

SAVED = "() => ['saved', 'update', 'failed', 'off'].includes(window.decodelab.offline.state)"
TEMPLATE = (ROOT / "web" / "sw.js").read_text()


@pytest.fixture
def site_copy(site_root, tmp_path):
    """A copy of the site in a subfolder of its server's root, and a fresh browser profile."""
    folder = tmp_path / "courses" / "week-3" / "decodelab"
    shutil.copytree(site_root, folder)
    return folder


@pytest.fixture
def context(chromium):
    context = chromium.new_context(service_workers="allow")
    # a first visit saves the whole site before its page loads: beside other tests' browsers
    # that can take longer than Playwright's 30 s
    context.set_default_timeout(BOOT_TIMEOUT_MS)
    yield context
    context.close()


def visit(context, url):
    page = record_errors(context.new_page())
    page.goto(url)
    wait_ready(page)
    page.wait_for_function(SAVED, timeout=BOOT_TIMEOUT_MS)
    return page


def offline(page):
    return page.evaluate("() => window.decodelab.offline")


def fetched(page, path):
    """A file as this page gets it now (through its service worker, if it has one)."""
    return page.evaluate("(p) => fetch(p).then((r) => r.text())", path)


def load_real_model(page) -> str:
    """Load SmolLM2 as the learner does (its card's Load); what the card then says."""
    page.get_by_label("Model", exact=True).select_option("smollm2")
    page.evaluate("() => window.decodelab.pretrained.load()")
    return page.locator("#pretrained-status").inner_text()


def test_the_second_visit_opens_and_runs_with_the_server_gone(context, site_copy, tmp_path):
    server, url = serve(tmp_path)
    url += "courses/week-3/decodelab/"
    try:
        page = visit(context, url)
        first = offline(page)
        assert first["state"] == "saved" and not first["controlled"], first
        assert "without a network" in page.locator("#offline").inner_text()
        assert load_real_model(page).startswith("Loaded in ")  # downloaded, kept apart
    finally:
        server.shutdown()
        server.server_close()
    # no server at all now: the page, its worker, Python, numpy and the models come from the
    # saved files, and the integrity checks pass on them
    page.reload()
    wait_ready(page)
    page.wait_for_function(SAVED, timeout=BOOT_TIMEOUT_MS)
    again = offline(page)
    assert again["controlled"] and again["state"] == "saved" and again["build"] == first["build"]
    result = page.evaluate("s => window.decodelab.generate(s)",
                           {"seed": 3, "max_new_tokens": 20, "model": "transformer",
                            "ignore_eos": True})
    assert result["status"] == "done"
    # the real model, which the site's offline copy leaves out, from the copy kept for it
    assert load_real_model(page).startswith("Loaded from the copy kept in this browser")
    result = page.evaluate("s => window.decodelab.generate(s)",
                           {"model": "smollm2", "prompt": "The capital of France is",
                            "greedy": True, "max_new_tokens": 4, "cache_check": False})
    assert result["status"] == "done" and " Paris" in page.locator("#text-gen").inner_text()
    # a link with settings in its address is the same saved page
    other = context.new_page()
    other.goto(url + "index.html?seed=5&max_new_tokens=12")
    wait_ready(other)
    assert other.evaluate("() => document.querySelector('#settings [name=seed]').value") == "5"
    assert page.errors == []


# alone: the hand-over to a new build waits at most 3 s for it (web/sw.js handOver); beside
# another browser that wait ran out in fresh-clone runs and the visit got the old build
@pytest.mark.alone
def test_a_new_build_is_taken_whole_on_the_next_visit(context, site_copy, tmp_path):
    server, url = serve(tmp_path)
    url += "courses/week-3/decodelab/"
    try:
        page = visit(context, url)
        old = offline(page)["build"]
        page.close()
        # a new build on the server: the page and one of its scripts changed
        html = (site_copy / "index.html").read_text()
        (site_copy / "index.html").write_text(html.replace("<title>", "<title>Week 4: ", 1))
        (site_copy / "app.js").write_text((site_copy / "app.js").read_text() + "\n// week 4\n")
        new = write_service_worker(site_copy, TEMPLATE)
        assert new != old
        # the next visit still runs the build it started with, all of it, while the new one is
        # saved beside it
        page = visit(context, url)
        assert not page.title().startswith("Week 4")
        assert not fetched(page, "app.js").endswith("// week 4\n")
        # (the old build may say "saved" first: the browser looks for a new one after the visit
        # has asked what it holds)
        page.wait_for_function("() => window.decodelab.offline.state !== 'saved'", timeout=BOOT_TIMEOUT_MS)
        page.wait_for_function(SAVED, timeout=BOOT_TIMEOUT_MS)
        status = offline(page)
        assert status["controlled"] and status["state"] == "update" and status["next"] == new, status
        assert "new version" in page.locator("#offline").inner_text()
        page.close()
        # the visit after that is the new build, all of it
        page = visit(context, url)
        assert page.title().startswith("Week 4")
        assert fetched(page, "app.js").endswith("// week 4\n")
        status = offline(page)
        assert status["state"] == "saved" and status["build"] == new and status["controlled"]
        # the old build's files are gone from the browser's storage
        names = page.evaluate("() => caches.keys()")
        assert [n for n in names if old in n] == [] and [n for n in names if new in n] != []
        assert page.errors == []
    finally:
        server.shutdown()
        server.server_close()


def test_a_file_that_fails_its_check_is_not_saved_and_the_page_works_online(context, site_copy, tmp_path):
    # the server's copy of a file changed after the build listed it: saving fails as a whole
    (site_copy / "favicon.svg").write_text((site_copy / "favicon.svg").read_text() + "<!-- changed -->")
    server, url = serve(tmp_path)
    try:
        page = visit(context, url + "courses/week-3/decodelab/")
        status = offline(page)
        assert status["state"] == "failed", status
        assert "could not be saved" in page.locator("#offline").inner_text()
        # nothing half-saved is kept (what Python's start keeps for the next is apart: test_return)
        assert [n for n in page.evaluate("() => caches.keys()") if not n.startswith("decodelab-kept ")] == []
        result = page.evaluate("s => window.decodelab.generate(s)", {"seed": 1, "max_new_tokens": 8})
        assert result["status"] == "done"
    finally:
        server.shutdown()
        server.server_close()


def open_course(context, folder, host, widget_url, path):
    """A course page on `host` that embeds the widget's `path` in an iframe; returns the page, its
    server and the widget's frame, once the widget is ready and has settled on saving or not."""
    folder.mkdir()
    (folder / "index.html").write_text(
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>A course</title></head>'
        f'<body><iframe src="{widget_url}{path}" title="decodelab" width="1100" height="800">'
        '</iframe></body></html>')
    server, url = serve(folder, host=host)
    assert url != widget_url
    page = context.new_page()
    page.goto(url)
    return page, server, widget_frame(page, widget_url)


def widget_frame(page, widget_url):
    page.frame_locator("iframe").locator("html[data-state=ready]").wait_for(timeout=BOOT_TIMEOUT_MS)
    inner = next(f for f in page.frames if f.url.startswith(widget_url))
    inner.wait_for_function(SAVED, timeout=BOOT_TIMEOUT_MS)
    return inner


def test_an_embed_on_a_course_page_opens_with_the_widget_server_gone(context, site_root, tmp_path):
    # The course page and the widget on two origins of one site (as course.example.edu and
    # widgets.example.edu are): the widget's storage is its own, so it is saved. On a course page
    # of another site, browsers that keep third-party storage apart may refuse it (the next test).
    widget, widget_url = serve(site_root, host="localhost")
    try:
        page, host, inner = open_course(context, tmp_path / "course", "localhost", widget_url,
                                        "embed.html?panels=text&amp;lazy=none")
        status = inner.evaluate("() => window.decodelab.offline")
        assert status["state"] == "saved", status
    finally:
        widget.shutdown()
        widget.server_close()
    try:
        page.reload()  # the course page is still online; the widget's server is not
        inner = widget_frame(page, widget_url)
        assert inner.evaluate("() => window.decodelab.offline.controlled")
        result = inner.evaluate("s => window.decodelab.generate(s)", {"seed": 2, "max_new_tokens": 8})
        assert result["status"] == "done"
    finally:
        host.shutdown()
        host.server_close()


def test_an_embed_on_another_site_works_whether_or_not_the_browser_lets_it_be_saved(context, site_root, tmp_path):
    widget, widget_url = serve(site_root, host="localhost")
    try:
        # the course on 127.0.0.1, another site: the widget's storage is third-party storage
        page, host, inner = open_course(context, tmp_path / "course", "127.0.0.1", widget_url,
                                        "index.html")
        status = inner.evaluate("() => window.decodelab.offline")
        # Chromium's private profiles (Playwright's contexts) refuse it; a browser that allows
        # third-party storage saves it, kept apart under this course page
        assert status["state"] in ("off", "saved"), status
        if status["state"] == "off":
            assert inner.locator("#offline").inner_text() == ""
        result = inner.evaluate("s => window.decodelab.generate(s)", {"seed": 2, "max_new_tokens": 8})
        assert result["status"] == "done"
        host.shutdown()
    finally:
        widget.shutdown()


STARTUP_FILES = re.compile(r"pyodide\.mjs|pyodide\.asm\.js|pyodide\.asm\.wasm|python_stdlib\.zip"
                           r"|pyodide-lock\.json|numpy-.+\.whl|decodelab-.+\.whl")


# Every change of the start-up's status line, with the bar's value then, from the first one on
RECORD_STATUS = """
window.__statuses = [];
document.addEventListener('DOMContentLoaded', () => {
    const status = document.querySelector('#status');
    const bar = document.querySelector('#boot-progress');
    new MutationObserver(() => window.__statuses.push([status.textContent, bar.value]))
        .observe(status, {childList: true, characterData: true, subtree: true});
});
"""


@pytest.mark.alone  # counts progress figures over a throttled download
def test_a_slow_start_counts_the_megabytes_as_they_arrive(chromium, base_url, site_root):
    context = chromium.new_context(service_workers="block")
    try:
        page = context.new_page()
        page.add_init_script(RECORD_STATUS)
        cdp = context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.send("Network.emulateNetworkConditions", {  # 40 Mbit/s
            "offline": False, "latency": 20, "downloadThroughput": 40e6 / 8, "uploadThroughput": 5e6 / 8})
        page.goto(base_url)
        wait_ready(page)
        seen = page.evaluate("() => window.__statuses")
    finally:
        context.close()
    counted = [(float(m[1]), float(m[2]), bar) for text, bar in seen
               if (m := re.search(r"([\d.]+) of ([\d.]+) MiB$", text))]
    # the total is what a start fetches, from the build's lists: the runtime, numpy and the
    # package, then the lesson files too once their phase begins
    listed = json.loads((site_root / "pyodide" / "integrity.json").read_text())["files"]
    runtime = sum(f["bytes"] for f in listed if STARTUP_FILES.fullmatch(f["path"]))
    lesson = sum(f["bytes"] for f in json.loads((site_root / "assets" / "manifest.json").read_text())["files"])
    # about 4 s of downloads, a figure at most every 100 ms while the worker is free to count
    # (while Python starts, the bytes wait for it); how many depends on the machine, so: several
    assert len({g for g, _, _ in counted}) >= 3, seen
    totals = [t for _, t, _ in counted]
    assert totals[0] == float(f"{runtime / 2**20:.1f}"), seen
    assert set(totals) <= {totals[0], float(f"{(runtime + lesson) / 2**20:.1f}")}, seen
    assert any("Checking the models and text" in text and text.endswith(" MiB") for text, _ in seen), seen
    # the figure and the bar only go up, and the bar moves while the bytes come
    assert [g for g, _, _ in counted] == sorted(g for g, _, _ in counted)
    assert counted[-1][0] > counted[0][0] and counted[-1][2] > counted[0][2] + 0.2, counted
    bars = [bar for _, bar in seen]
    assert bars == sorted(bars)
