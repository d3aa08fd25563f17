"""The widget embedded in a course page on another origin, in headless Chromium.

The course pages (tests/e2e/hosts/) are served from 127.0.0.1 and the widget from localhost, so
every message crosses origins as it would between a course site and the site hosting decodelab.
A third origin (another port on 127.0.0.1) plays a page that should not be obeyed.
"""

import time

import pytest

from tests.e2e.conftest import BOOT_TIMEOUT_MS, origin, seen, wait_seen, widget_frame
from tests.e2e.test_page import cli_trace

def test_custom_element_embeds_across_origins_and_speaks_the_api(open_host, widget_url, host_url):
    page = open_host("course.html")
    ready = wait_seen(page, "ready")[0]
    assert ready["decodelab"] == 1
    assert ready["errors"] == []
    assert ready["settings"]["dataset"] == "names" and ready["settings"]["prompt"] == "ma"
    assert ready["settings"]["seed"] == 5 and ready["settings"]["top_k"] == 8

    # the element made the iframe: the widget's embed page, told who its host is
    src = page.evaluate("() => document.querySelector('decodelab-embed').frame.src")
    assert src.startswith(widget_url + "embed.html?") and "host=http" in src
    frame = widget_frame(page)
    assert frame.url.startswith(widget_url + "index.html?") and "embed=true" in frame.url
    assert page.evaluate("() => document.querySelector('decodelab-embed iframe').title").startswith("decodelab")
    # every message the host heard came from the widget's origin
    origins = {m["origin"] for m in page.evaluate("() => window.raw")}
    assert origins == {origin(widget_url)}

    # started, the widget wrote a first sample with the link's settings, as the command line does
    first = wait_seen(page, "finished")[0]
    assert first["settings"]["seed"] == 5
    assert first["text"] == cli_trace(model="bigram", dataset="names", prompt="ma", seed=5,
                                      temperature=0.8, top_k=8)["text"]

    # the host sends settings (one bad): the rest apply, the bad one is named, and it generates
    reply = page.evaluate("""() => document.querySelector('decodelab-embed').apply(
        {seed: 11, max_new_tokens: 12, ignore_eos: true, top_p: 7, stop: []}, {generate: true})""")
    assert reply["type"] == "applied"
    assert [e["field"] for e in reply["errors"]] == ["top_p"]
    assert "Top-p must be a number greater than 0 and at most 1" in reply["errors"][0]["message"]
    assert reply["settings"]["seed"] == 11 and reply["settings"]["top_p"] == 1
    finished = wait_seen(page, "finished", count=2)[-1]
    expected = cli_trace(model="bigram", dataset="names", prompt="ma", seed=11, temperature=0.8,
                         top_k=8, max_new_tokens=12, ignore_eos=True)
    assert finished["text"] == expected["text"] and len(finished["text"]) == 12
    assert finished["finish_reason"] == "length"
    assert seen(page, "started")
    # the widget shows it too: the seed field, the text, and a notice naming the bad setting
    assert frame.locator("#seed").input_value() == "11"
    assert frame.locator("#text-gen").inner_text() == expected["text"]
    assert "Top-p must be" in frame.locator("#link-notice").inner_text()

    # generate() on its own, and a malformed request answered in words
    done = page.evaluate("() => document.querySelector('decodelab-embed').generate()")
    assert done["type"] == "finished" and done["text"] == expected["text"]
    bad = page.evaluate("() => document.querySelector('decodelab-embed').apply('seed=5')")
    assert bad["errors"][0]["message"] == "Settings must be an object of name: value."
    # a learner left a bad value in the widget's form: generate() answers with the field named
    frame.locator("#top_p").fill("5")
    refused = page.evaluate("() => document.querySelector('decodelab-embed').generate()")
    assert refused["type"] == "error" and refused["errors"][0]["field"] == "top_p"
    frame.locator("#top_p").fill("1")

    # auto-resize: the iframe is as tall as the widget's page says it is, once the height
    # messages from the changes above (the run, the notice, the field put right) have arrived;
    # how soon they do depends on the machine, so the test waits for them, up to a backstop
    heights = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        last = seen(page, "height")[-1]["height"]
        iframe_height = page.evaluate("() => document.querySelector('decodelab-embed iframe')"
                                      ".getBoundingClientRect().height")
        body_height = frame.evaluate("() => Math.ceil(document.body.getBoundingClientRect().height)")
        heights.append((last, iframe_height, body_height))
        if abs(iframe_height - last) <= 1 and abs(body_height - last) <= 1:
            break
        page.wait_for_timeout(100)
    assert abs(iframe_height - last) <= 1 and abs(body_height - last) <= 1, heights[-5:]
    assert page.guard.blocked == []
    assert page.errors == []


def test_messages_from_other_frames_and_origins_are_ignored(open_host, rogue_url):
    page = open_host("course.html")
    wait_seen(page, "ready")
    frame = widget_frame(page)
    before = frame.evaluate("() => window.decodelab.embed.ignored")
    # a frame of a third origin on the same page tries to drive the widget
    page.evaluate("""(url) => { const f = document.createElement('iframe');
        f.src = url; f.title = 'another site'; document.body.append(f); }""", rogue_url + "rogue.html")
    frame.wait_for_function("(n) => window.decodelab.embed.ignored >= n + 5", arg=before)
    # messages without the namespace, even from the host itself, are ignored too
    page.evaluate("""() => document.querySelector('decodelab-embed iframe').contentWindow
        .postMessage({type: 'settings', settings: {seed: 998}, generate: true}, '*')""")
    frame.wait_for_function("(n) => window.decodelab.embed.ignored >= n + 6", arg=before)
    assert frame.locator("#seed").input_value() == "5"
    # the only run is the widget's first sample, with the link's seed
    assert [m["settings"]["seed"] for m in seen(page, "started")] == [5]


def test_a_host_not_on_the_allow_list_is_neither_obeyed_nor_told(open_host):
    page = open_host("wrong.html")
    frame = None
    deadline = time.monotonic() + BOOT_TIMEOUT_MS / 1000
    while time.monotonic() < deadline:
        frame = widget_frame(page)
        if frame and "index.html" in frame.url:
            break
        page.wait_for_timeout(100)
    frame.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
    frame.wait_for_function("() => window.decodelab.lastRun")  # its first sample
    first = frame.evaluate("() => window.decodelab.lastRun.then((r) => r.text)")
    assert first and frame.locator("#text-gen").inner_text() == first
    assert frame.evaluate("() => window.decodelab.embed.allowed") == ["http://127.0.0.1:9"]
    page.evaluate("() => window.sendToWidget({decodelab: 1, type: 'settings', settings: {seed: 77}, generate: true})")
    # an ignored message is dropped where it arrives: nothing of it can follow
    frame.wait_for_function("() => window.decodelab.embed.ignored >= 1")
    assert frame.locator("#seed").input_value() == "4"
    assert frame.get_attribute("html", "data-state") == "ready"
    assert frame.locator("#text-gen").inner_text() == first
    assert page.evaluate("() => window.raw.filter((m) => m.data && m.data.decodelab)") == []


def test_plain_iframe_for_an_lms_allows_its_embedding_page(open_host, widget_url, host_url):
    page = open_host("lms.html")
    page.wait_for_function("() => window.raw.some((m) => m.data && m.data.type === 'ready')",
                           timeout=BOOT_TIMEOUT_MS)
    ready = page.evaluate("() => window.raw.find((m) => m.data.type === 'ready')")
    assert ready["origin"] == origin(widget_url)
    assert ready["data"]["settings"]["dataset"] == "prose"
    frame = widget_frame(page)
    # with no host= in the link, the embedding page's own origin is the one allowed
    assert frame.evaluate("() => window.decodelab.embed.allowed") == [origin(host_url)]
    # only the panels asked for show
    assert frame.locator("#output").is_visible() and frame.locator("#inspector").is_visible()
    assert not frame.locator("#settings").is_visible()
    page.evaluate("""() => window.sendToWidget({decodelab: 1, type: 'settings',
        settings: {seed: 6, stop: ['e']}, generate: true})""")
    is_ours = "(m) => m.data && m.data.type === 'finished' && m.data.settings.seed === 6"
    page.wait_for_function(f"() => window.raw.some({is_ours})", timeout=BOOT_TIMEOUT_MS)
    finished = page.evaluate(f"() => window.raw.find({is_ours}).data")
    # the first sample, with the link's seed, came before it
    kinds = page.evaluate("() => window.raw.filter((m) => m.data && m.data.type === 'finished')"
                          ".map((m) => m.data.settings.seed)")
    assert kinds == [4, 6]
    expected = cli_trace(model="bigram", dataset="prose", prompt="The ", seed=6, max_new_tokens=40,
                         stop=["e"])
    assert finished["text"] == expected["text"]
    assert finished["stop_reason"] == expected["stop_reason"]
    assert page.errors == []


def test_lazy_start_waits_until_the_widget_scrolls_into_view(open_host):
    page = open_host("below.html")
    page.wait_for_function("() => window.seen.some((m) => m.type === 'height')", timeout=30_000)
    frame = widget_frame(page)
    frame.wait_for_selector("html[data-waiting=view]", state="attached")  # it saw itself out of view
    assert frame.url.split("?")[0].endswith("/embed.html")
    assert frame.locator("#poster-start").is_visible()
    assert not [u for u in page.guard.requests if "/pyodide/" in u]
    assert seen(page, "ready") == []
    page.locator("decodelab-embed").scroll_into_view_if_needed()
    wait_seen(page, "ready")
    assert [u for u in page.guard.requests if "/pyodide/" in u]
    assert page.errors == []


def test_click_to_start_works_from_the_keyboard(open_host):
    page = open_host("click.html")
    page.wait_for_function("() => window.seen.some((m) => m.type === 'height')", timeout=30_000)
    frame = widget_frame(page)
    frame.wait_for_selector("html[data-waiting=click]", state="attached")
    assert not [u for u in page.guard.requests if "/pyodide/" in u]  # visible, but waits for a press
    for _ in range(10):
        page.keyboard.press("Tab")
        if frame.evaluate("() => document.activeElement && document.activeElement.id") == "poster-start":
            break
    else:
        pytest.fail("Tab never reached the poster's Start button")
    page.keyboard.press("Enter")
    finished = wait_seen(page, "finished")[-1]
    assert len(finished["text"]) == 6
    frame = widget_frame(page)
    assert frame.evaluate("() => document.activeElement.id") == "generate"  # focus carried on
    assert page.errors == []
