"""A widget that shows one idea: only the controls its link names, no run bar where nothing runs,
no words that point at what is not on screen, and a first sample once it starts."""

import re

import pytest

from tests.e2e.conftest import (
    BOOT_TIMEOUT_MS,
    ROOT,
    open_chapter,
    open_page,
    wait_seen,
    widget_frame,
)
from tests.e2e.test_page import cli_trace

# Words that point at a control or a panel: "the seed above", "Generate above", "the Greedy
# switch above", "(under More rules)", "beside the model".
POINTING = re.compile(
    r"\b(settings|seed|switch|workbench|text|run|chosen|set) above\b|Generate above"
    r"|under More rules|beside the model|The step view says|the cache card shows"
    r"|of the batch view|the experiment below|under Compare runs", re.I)
PANELS = ("controls", "text", "inspector", "runs", "tries", "share", "train", "playground",
          "experiment", "ends", "tokens", "tools", "shapes", "compare", "kvcache", "cache", "batch",
          "break", "costs", "twoengines", "beam", "speculative", "serving", "questions", "chat")


def visible_fields(frame):
    return frame.evaluate("""() => [...document.querySelectorAll('#settings .field[data-field]')]
        .filter((f) => f.getClientRects().length).map((f) => f.dataset.field)""")


def all_text(page):
    """Everything a reader can see, with every fold opened."""
    page.evaluate("() => document.querySelectorAll('details').forEach((d) => { d.open = true; })")
    return page.evaluate("() => document.body.innerText")


def test_controls_show_one_idea_and_keep_the_rest_at_the_links_values(open_host):
    page = open_host("one.html")
    ready = wait_seen(page, "ready")[0]
    assert ready["errors"] == []
    frame = widget_frame(page)
    assert visible_fields(frame) == ["temperature", "seed"]
    legends = frame.evaluate("""() => [...document.querySelectorAll('#settings .group')]
        .filter((g) => g.getClientRects().length).map((g) => g.querySelector('legend, summary').textContent.trim())""")
    assert legends == ["Chance"]

    # the first sample, with the link's settings, is there without asking
    first = wait_seen(page, "finished")[0]
    link = dict(model="bigram", dataset="names", prompt="ma", temperature=0.8, top_k=5,
                max_new_tokens=12, ignore_eos=True)
    assert first["text"] == cli_trace(seed=42, **link)["text"]
    assert frame.locator("#text-gen").inner_text() == first["text"]

    # a host may change a shown setting, never a fixed one: it is named, and keeps its value
    reply = page.evaluate("() => document.querySelector('decodelab-embed').apply({seed: 9, top_k: 2}, {generate: true})")
    assert [e["field"] for e in reply["errors"]] == ["top_k"]
    assert reply["errors"][0]["message"] == (
        "Top-k is fixed in this widget, whose link shows only Temperature and Seed; it stays 5.")
    assert reply["settings"]["seed"] == 9 and reply["settings"]["top_k"] == 5
    second = wait_seen(page, "finished", count=2)[-1]
    assert second["settings"]["top_k"] == 5
    assert second["text"] == cli_trace(seed=9, **link)["text"]

    # nothing on the page moves a fixed setting either (a Try this button goes through here)
    frame.evaluate("() => window.decodelab.applySettings({top_k: 1, temperature: 2})")
    assert frame.locator("#top_k").input_value() == "5"
    assert frame.locator("#temperature").input_value() == "2"
    # Reset goes back to the link's values, not to the page's defaults
    frame.get_by_role("button", name="Reset settings").click()
    assert frame.locator("#temperature").input_value() == "0.8"
    assert frame.locator("#seed").input_value() == "42"
    assert frame.locator("#top_k").input_value() == "5"
    assert page.errors == []


def test_a_fixed_setting_that_stops_a_run_is_named_where_it_can_be_seen(widgets):
    page = widgets.open("index.html?embed=true&controls=max_new_tokens&min_new_tokens=20&max_new_tokens=30")
    page.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
    page.get_by_label("Max new tokens", exact=True).fill("10")
    page.get_by_role("button", name="Generate", exact=True).click()
    error = page.locator("#form-error")
    error.wait_for()
    assert error.inner_text().startswith("Min new tokens must be")  # its own field is not shown
    assert page.evaluate("() => window.decodelab.lastRun.then((r) => r.status)") == "invalid"
    page.get_by_label("Max new tokens", exact=True).fill("40")
    page.get_by_role("button", name="Generate", exact=True).click()
    assert page.evaluate("() => window.decodelab.lastRun.then((r) => [r.status, r.settings.min_new_tokens])") \
        == ["done", 20]
    page.close()


def test_controls_that_do_not_exist_are_named(widgets):
    page = widgets.open("index.html?embed=true&controls=temprature,top-p")
    page.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
    notice = page.locator("#link-notice").inner_text()
    assert "controls must be a comma-separated list of model, dataset, tokenizer" in notice
    assert "got 'temprature'" in notice
    assert visible_fields(page) == ["top_p"]  # the good one still applies, written either way
    page.close()


@pytest.mark.parametrize("query", [
    "panels=experiment",
    "panels=playground",
    "panels=tokens,tools",
    "panels=kvcache,batch,break,compare",
    "panels=controls,inspector&controls=top_k",
    "panels=shapes,tries",
])
def test_a_widget_points_only_at_what_it_shows(widgets, query):
    page = widgets.open(f"embed.html?lazy=none&{query}")
    page.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
    panels = query.split("&")[0].split("=")[1].split(",")
    runs = any(p in panels for p in ("text", "inspector", "cache"))
    assert page.locator("#generate").is_visible() == ("text" in panels)  # no run bar without text
    text = all_text(page)
    assert not POINTING.search(text), POINTING.search(text).group(0)
    if not runs:  # nothing shows a run, so none was made
        assert page.evaluate("() => window.decodelab.lastRun") is None
    else:  # the step view has its first sample to show
        page.wait_for_selector("#stepper:not([hidden])", timeout=BOOT_TIMEOUT_MS)
    assert page.errors == []
    page.close()


def test_the_full_page_keeps_its_pointers_and_run_false_keeps_an_embed_empty(chromium, base_url, widgets):
    page = open_page(chromium, base_url)
    page.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
    text = ""  # every chapter's, each opened from the map
    for chapter in page.locator("#course-map a").evaluate_all("as => as.map(a => a.hash.slice(1))"):
        open_chapter(page, chapter)
        text += all_text(page)
    # in the course the workbench is a chapter of its own: nothing points "above" at it
    for words in ("Run the workbench’s settings at a few temperatures",
                  "One each, with the workbench’s seed",
                  "The workbench’s Greedy switch is not used here", "Min-p (under More rules)"):
        assert words in text
    assert "this widget" not in text.lower()
    page.context.close()

    page = widgets.open("embed.html?lazy=none&run=false")
    # a link's first run starts in the very moment the page is ready: at ready, none has
    page.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
    assert page.evaluate("() => window.decodelab.lastRun") is None
    assert page.locator("#finish-text").inner_text() == "No text generated yet."
    page.close()


WIDE = """() => { const W = document.documentElement.clientWidth; const out = [];
  for (const e of document.querySelectorAll('body *')) {
    if (e.closest('[hidden], .visually-hidden, .st-scroll, .table-wrap, pre')) continue;  // scroll boxes of their own
    const r = e.getBoundingClientRect();
    if (r.width > 0 && r.right > W + 0.5) out.push(`${e.tagName}#${e.id}.${e.className}`);
  }
  return out.slice(0, 5); }"""


@pytest.mark.parametrize("query", [
    "panels=controls,text&controls=temperature",
    "panels=text,inspector",
    "panels=controls,text,inspector",
])
def test_a_widget_in_a_phone_column_stays_inside_its_frame(widgets, query):
    """320 px, a course page's column on a phone: no part of the widget reaches past the frame's
    right edge (the run bar once pushed the text card 14 px out of sight)."""
    page = widgets.open(f"embed.html?lazy=none&dataset=names&prompt=ma&seed=7&{query}",
                        viewport={"width": 320, "height": 800})
    page.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
    page.evaluate("() => window.decodelab.lastRun")
    assert page.evaluate(WIDE) == []
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 320
    page.close()


def test_the_panels_listed_are_every_panel_of_the_page():
    html = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "web").rglob("*.html"))
    assert set(re.findall(r'data-panel="([a-z]+)"', html)) == set(PANELS)


@pytest.mark.parametrize("panel", PANELS)
def test_every_panel_alone_points_only_at_itself(widgets, panel):
    """Each panel as a widget of its own: no sentence points at a control or a panel that is
    not there (the widgets share one Python, as on a course page)."""
    page = widgets.open(f"embed.html?lazy=none&panels={panel}")
    page.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
    if panel in ("text", "inspector", "cache"):  # the first sample, and what it says
        page.wait_for_function("() => window.decodelab.lastRun !== null")
        page.evaluate("() => window.decodelab.lastRun")
        page.wait_for_selector("html[data-state=ready]")
    text = all_text(page)
    if panel == "controls":  # every control is there, More rules with them
        text = text.replace("under More rules", "")
    found = POINTING.search(text)
    assert not found, (panel, text[max(found.start() - 80, 0):found.end() + 40])
    page.close()
