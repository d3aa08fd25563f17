"""Every frame height the docs give is the widget's own: each documented iframe (and the Jupyter
IFrame, and the edX problem's frame) is put on a course page of another origin at 760 pixels
wide, as the docs say, and the widget's content is measured once it has started and written its
first sample. A frame that is too short is no trap either: the widget scrolls inside it.
"Embed this…" takes its height from its own preview (test_embed_dialog.py)."""

import html
import re

import pytest

from tests.e2e.conftest import BOOT_TIMEOUT_MS, ROOT, serve

WIDTH = 760
SLACK = 60  # pixels a documented height may exceed the measured one (a round number above it)
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FRAME = re.compile(r"(?:src|html_file)=\"https://example\.org/decodelab/(embed\.html\?[^\"]*)\""
                   r"[^>]*?height=\"(\d+)\"", re.S)
IFRAME_CALL = re.compile(r"IFrame\(\"https://example\.org/decodelab/(embed\.html\?[^\"]*)\","
                         r"[^)]*?height=(\d+)\)", re.S)


def documented():
    found = {}
    for doc in DOCS:
        text = doc.read_text()
        for m in [*FRAME.finditer(text), *IFRAME_CALL.finditer(text)]:
            found[html.unescape(m.group(1))] = (doc.name, int(m.group(2)))
    return found


FRAMES = documented()
CONTENT_HEIGHT = "() => Math.ceil(document.body.getBoundingClientRect().height)"


def test_the_docs_give_heights_for_their_frames():
    assert len(FRAMES) >= 4, FRAMES
    assert {doc for doc, _ in FRAMES.values()} >= {"embedding.md", "testing.md"}


@pytest.fixture(scope="module")
def course_page_url(tmp_path_factory, widget_url):
    """One course page per documented frame, at the width the docs measure at."""
    root = tmp_path_factory.mktemp("heights")
    for i, (src, (_, height)) in enumerate(FRAMES.items()):
        (root / f"frame{i}.html").write_text(
            f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Course</title></head>'
            f'<body style="margin:0"><div style="width:{WIDTH}px"><iframe id="w" title="widget" '
            f'src="{html.escape(widget_url + src)}" width="100%" height="{height}" '
            f'style="border:0"></iframe></div></body></html>')
    server, url = serve(root, host="127.0.0.1")
    yield url
    server.shutdown()


@pytest.mark.parametrize("index", range(len(FRAMES)), ids=list(FRAMES))
def test_each_documented_height_is_the_widgets_measured_height(chromium, course_page_url, index):
    src, (doc, height) = list(FRAMES.items())[index]
    context = chromium.new_context(viewport={"width": 1000, "height": 900}, service_workers="block")
    try:
        page = context.new_page()
        page.goto(f"{course_page_url}frame{index}.html")
        frame = page.frame_locator("#w")
        frame.locator("html[data-state=ready]").wait_for(state="attached", timeout=BOOT_TIMEOUT_MS)
        widget = page.frames[1]
        if "question=" not in src:  # a widget with a run writes its first sample at once
            widget.wait_for_function("() => window.decodelab.lastRun", timeout=60_000)
            widget.evaluate("() => window.decodelab.lastRun")
            widget.wait_for_selector("html[data-state=ready]", state="attached")
        page.wait_for_timeout(300)  # the last layout after the run's end
        measured = widget.evaluate(CONTENT_HEIGHT)
        assert measured <= height <= measured + SLACK, (doc, src, measured, height)
        # and in a frame half as tall the rest is one scroll away, inside the frame
        page.evaluate("h => { document.querySelector('#w').height = String(h); }", height // 2)
        widget.wait_for_function("h => innerHeight <= h", arg=height // 2)  # the frame has shrunk
        scrolled = widget.evaluate("() => { window.scrollTo(0, 1e6); return window.scrollY; }")
        assert scrolled > 0, (doc, src)
    finally:
        context.close()
