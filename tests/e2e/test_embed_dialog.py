""""Embed this": the snippets for the workbench as it is set, and a live preview of the same."""

import re
from urllib.parse import parse_qsl, urlsplit

import pytest

from tests.e2e.conftest import BOOT_TIMEOUT_MS, open_page

pytestmark = pytest.mark.browser


def element_attributes(snippet):
    tag = re.search(r"<decodelab-embed(.*?)></decodelab-embed>", snippet, re.S).group(1)
    return {name.replace("-", "_"): value for name, value in re.findall(r'([a-z-]+)="([^"]*)"', tag)}


def iframe_src(snippet):
    return re.search(r'<iframe src="([^"]*)"', snippet).group(1).replace("&amp;", "&")


def test_embed_this_writes_both_snippets_and_previews_them(chromium, base_url):
    page = open_page(chromium, base_url, "?dataset=names&prompt=ma&seed=3&temperature=0.8&top_k=8")
    page.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
    page.get_by_role("button", name="Embed this…").click()
    dialog = page.get_by_role("dialog", name="Embed this in a course page")
    assert dialog.is_visible()

    # the defaults: the usual three panels, every control, and only the settings that differ
    iframe = dialog.get_by_label("An iframe, for any course page or learning platform")
    query = dict(parse_qsl(urlsplit(iframe_src(iframe.input_value())).query))
    assert query == {"prompt": "ma", "seed": "3", "temperature": "0.8", "top_k": "8",
                     "panels": "controls,text,inspector"}
    assert re.search(r'height="\d+"', iframe.input_value())  # 720 until the preview measures
    assert "Prompt \"ma\", Seed 3, Temperature 0.8, Top-k 8" in dialog.locator("#embed-carried").inner_text()

    # one idea: the run and two controls, dark, on a click
    dialog.locator("#embed-panel-inspector").uncheck()
    dialog.get_by_label("Only these (the others are fixed)").check()
    dialog.locator("#embed-control-temperature").check()
    dialog.locator("#embed-control-seed").check()
    dialog.get_by_label("Theme").select_option("dark")
    dialog.get_by_label("Height", exact=True).fill("560")
    src = iframe_src(iframe.input_value())
    query = dict(parse_qsl(urlsplit(src).query))
    assert query["panels"] == "controls,text" and query["controls"] == "temperature,seed"
    assert query["theme"] == "dark" and "lazy" not in query
    assert src.startswith(base_url + "embed.html?")
    # the element says the same, in attributes
    element = dialog.get_by_label("The custom element, for pages that allow scripts (it fits its height)")
    assert f'src="{base_url}element.js"' in element.input_value()
    assert element_attributes(element.input_value()) == query

    # the preview is that iframe, at that size, and shows just those controls; it starts at
    # once (the snippet's own start, on view, is for the course page)
    frame = dialog.locator("#embed-preview-box iframe")
    frame.wait_for(state="attached")
    # (a new address waits for a pause in the choosing; a busy machine, where the preview starts
    # its own Python beside the page's, has made that wait long)
    page.wait_for_function("(s) => document.querySelector('#embed-preview-box iframe')?.getAttribute('src') === s",
                           arg=src + "&lazy=none", timeout=90_000)
    assert frame.get_attribute("data-src") == src
    # the typed height reaches the preview with the address: the dialog's own choices never wait
    # for Python (they once waited on its check of the workbench, and a CI run's wait passed 90 s)
    page.wait_for_function("() => document.querySelector('#embed-preview-box iframe').height === '560'",
                           timeout=90_000)
    assert frame.get_attribute("width") == "720"
    inner = page.frame_locator("#embed-preview-box iframe")
    inner.locator("html[data-state=ready]").wait_for(state="attached", timeout=BOOT_TIMEOUT_MS)
    inner.locator("#text-gen").filter(has_text=re.compile(".")).or_(
        inner.locator("#finish-text").filter(has_text="Stopped")).first.wait_for(timeout=BOOT_TIMEOUT_MS)
    assert inner.locator("html").get_attribute("data-theme") == "dark"
    shown = inner.locator("#settings .field[data-field]:visible")
    assert [shown.nth(i).get_attribute("data-field") for i in range(shown.count())] == ["temperature", "seed"]
    assert inner.locator("#temperature").input_value() == "0.8"

    # a bad choice is named, and the snippets keep the last good one
    dialog.get_by_label("Height", exact=True).fill("90")
    assert "Height must be a whole number of pixels from 200 to 4000; got \"90\"." in dialog.inner_text()
    assert iframe_src(iframe.input_value()) == src
    dialog.locator("#embed-control-temperature").uncheck()
    dialog.locator("#embed-control-seed").uncheck()
    assert "Choose at least one control, or All of them." in dialog.inner_text()
    assert iframe_src(iframe.input_value()) == src

    # closing takes the preview (and its Python) away
    dialog.get_by_role("button", name="Close").click()
    assert not dialog.is_visible()
    # the dialog's close event comes a task after it hides
    page.wait_for_function("() => !document.querySelector('#embed-preview-box iframe')")
    assert page.errors == []
    page.context.close()


def test_the_widget_offers_no_embed_dialog_of_its_own(chromium, base_url):
    page = open_page(chromium, base_url, "index.html?embed=true&panels=share")
    page.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
    assert page.locator("#share").is_visible()
    assert not page.get_by_role("button", name="Embed this…").is_visible()
    page.context.close()


# the dialog's last word on the preview's height is the widget's height as it is now
TOLD_AS_IT_IS = """() => {
    const frame = document.querySelector('#embed-preview-box iframe');
    const height = Math.ceil(frame.contentDocument.body.getBoundingClientRect().height);
    return document.querySelector('#embed-height-measured').textContent.includes(` ${height} pixels at `); }"""


def test_the_snippets_height_is_the_previews_measured_height(chromium, base_url):
    page = open_page(chromium, base_url, "?dataset=names&prompt=ma&seed=4")
    page.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
    page.get_by_role("button", name="Embed this…").click()
    dialog = page.get_by_role("dialog", name="Embed this in a course page")
    dialog.locator("#embed-panel-inspector").uncheck()
    dialog.get_by_label("Only these (the others are fixed)").check()
    dialog.locator("#embed-control-temperature").check()
    dialog.get_by_label("Preview width").fill("760")
    # the preview follows the snippet 0.6 s after the last change: wait for the one of this
    # snippet (an earlier one is replaced), then it starts once in view, writes its first sample
    # and tells the dialog its height
    page.wait_for_function("""() => {
        const f = document.querySelector('#embed-preview-box iframe');
        const snippet = document.querySelector('#embed-iframe').value;
        return f && snippet.includes(`src="${f.dataset.src.replaceAll('&', '&amp;')}"`); }""")
    dialog.locator("#embed-preview-box iframe").scroll_into_view_if_needed()
    inner = page.frame_locator("#embed-preview-box iframe")
    inner.locator("html[data-state=ready]").wait_for(state="attached", timeout=BOOT_TIMEOUT_MS)
    widget = next(f for f in page.frames if "embed.html" in f.url or "embed=true" in f.url)
    widget.wait_for_function("() => window.decodelab && window.decodelab.lastRun", timeout=60_000)
    widget.evaluate("() => window.decodelab.lastRun")
    # the dialog has been told the widget's height as it is now, after the run's last layout
    page.wait_for_function(TOLD_AS_IT_IS)
    measured = widget.evaluate("() => Math.ceil(document.body.getBoundingClientRect().height)")
    # one idea, the text and the next token: short (under 900 pixels at 760 wide)
    assert measured < 900, measured
    expected = str(-(-measured // 10) * 10)
    page.wait_for_function("h => document.querySelector('#embed-height').value === h", arg=expected)
    iframe = dialog.get_by_label("An iframe, for any course page or learning platform")
    assert f'height="{expected}"' in iframe.input_value()
    assert f"{measured} pixels at 760 wide" in dialog.locator("#embed-height-measured").inner_text()
    page.wait_for_function("h => document.querySelector('#embed-preview-box iframe').height === h",
                           arg=expected)
    # a height the author types is theirs: the preview's news no longer moves it
    dialog.get_by_label("Height", exact=True).fill("500")
    page.wait_for_function("() => document.querySelector('#embed-preview-box iframe').height === '500'")
    page.wait_for_function(TOLD_AS_IT_IS)
    # the widget grows, and the dialog is told its new height
    told = dialog.locator("#embed-height-measured").inner_text()
    grown = widget.evaluate("""() => {
        const more = document.createElement('div');
        more.style.height = '40px';
        document.body.append(more);
        return Math.ceil(document.body.getBoundingClientRect().height); }""")
    assert f" {grown} pixels at " not in told
    page.wait_for_function(TOLD_AS_IT_IS)
    assert f"{grown} pixels at 760 wide" in dialog.locator("#embed-height-measured").inner_text()
    assert 'height="500"' in iframe.input_value()
    assert dialog.get_by_label("Height", exact=True).input_value() == "500"
    page.context.close()


def test_a_widget_of_the_real_model_is_measured_after_its_load_and_shows_no_chat_unasked(
        chromium, base_url):
    """The preview of a widget whose model is SmolLM2: measured before the model is loaded, the
    dialog says so (it had said "before it has run", and kept saying it after the run, counting
    results of panels the widget does not show); loaded and run in the preview, the widget's
    height as it is then is the snippet's, with no "before". The chat, a panel of its own
    (`chat`), is not in the widget unless its link asks for it (it had added 575 pixels to a
    frame measured before the load)."""
    page = open_page(chromium, base_url, "?model=smollm2&prompt=The+capital+of+France+is"
                                         "&seed=3&max_new_tokens=4")
    page.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
    try:
        page.get_by_role("button", name="Embed this…").click()
        dialog = page.get_by_role("dialog", name="Embed this in a course page")
        dialog.locator("#embed-panel-inspector").uncheck()
        dialog.get_by_label("Preview width").fill("760")
        page.wait_for_function("""() => {
            const f = document.querySelector('#embed-preview-box iframe');
            const snippet = document.querySelector('#embed-iframe').value;
            return f && snippet.includes(`src="${f.dataset.src.replaceAll('&', '&amp;')}"`); }""")
        dialog.locator("#embed-preview-box iframe").scroll_into_view_if_needed()
        inner = page.frame_locator("#embed-preview-box iframe")
        inner.locator("html[data-state=ready]").wait_for(state="attached", timeout=BOOT_TIMEOUT_MS)
        hint = dialog.locator("#embed-height-measured")
        page.wait_for_function("() => document.querySelector('#embed-height-measured')"
                               ".textContent.includes('before its model is loaded')")
        page.wait_for_function(TOLD_AS_IT_IS)
        assert "before it has run" not in hint.inner_text()
        widget = next(f for f in page.frames if "embed.html" in f.url or "embed=true" in f.url)
        inner.get_by_role("button", name="Load the model", exact=True).click()
        widget.wait_for_function("() => window.decodelab.pretrained.loaded", timeout=120_000)
        widget.wait_for_function("() => window.decodelab.lastRun !== null", timeout=120_000)
        assert widget.evaluate("() => window.decodelab.lastRun.then((r) => r.status)") == "done"
        assert widget.evaluate("() => document.getElementById('chat').closest('[data-panel-off]')"
                               " !== null")
        assert not inner.locator("#chat").is_visible()
        page.wait_for_function(TOLD_AS_IT_IS)
        page.wait_for_function("() => !document.querySelector('#embed-height-measured')"
                               ".textContent.includes('That is before')")
        measured = widget.evaluate("() => Math.ceil(document.body.getBoundingClientRect().height)")
        expected = str(-(-measured // 10) * 10)
        page.wait_for_function("h => document.querySelector('#embed-height').value === h",
                               arg=expected)
        assert f'height="{expected}"' in dialog.get_by_label(
            "An iframe, for any course page or learning platform").input_value()
        # the chat asked for by the link: there once the model is loaded (in the shared Python)
        other = page.context.new_page()
        other.goto(base_url + "embed.html?lazy=none&run=false&panels=controls,text,chat"
                              "&model=smollm2")
        other.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
        if not other.evaluate("() => window.decodelab.pretrained.loaded"):
            other.evaluate("() => window.decodelab.pretrained.load()")
        assert other.locator("#chat").is_visible()
        assert page.errors == []
    finally:
        page.context.close()
