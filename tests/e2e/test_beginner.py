"""The lesson as a beginner meets it: Generate always in reach, the keyboard's short way to it,
the basic rules first with a count of the others, the next token redrawn live, one step view
(greedy told with the model's own odds), a stop string's cut in sight, no clipped number, every
Try this followed by its button with its answer's claims checked on the page, and two runs
compared."""

import json
import math

import pytest

from tests.conftest import api
from tests.e2e.conftest import BOOT_TIMEOUT_MS, ROOT, open_chapter, open_page, reveal, wait_ready
from tests.e2e.test_page import reset, set_fields, settle

pytestmark = pytest.mark.browser

# Every control of the settings form, the run bar's own, and the next-token box: the learner
# may be looking at any of them.
IN_VIEW = """() => {
    const r = document.querySelector('#generate').getBoundingClientRect();
    return r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth;
}"""
# The control itself is in view and on top: not hidden under the sticky run bar.
UNCOVERED = """(e) => {
    const r = e.getBoundingClientRect();
    if (r.top < -1 || r.bottom > innerHeight + 1) return false;  // a pixel for rounding
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return !!hit && (hit === e || e.contains(hit) || hit.contains(e) || (e.labels && [...e.labels].some((l) => l.contains(hit))));
}"""


@pytest.mark.parametrize("width, height", [(1280, 900), (360, 740)])
def test_generate_is_in_view_whatever_control_is(chromium, base_url, width, height):
    page = wait_ready(open_page(chromium, base_url, viewport={"width": width, "height": height}))
    try:
        page.locator("#more-rules > summary").click()  # every rule, the hidden ones too
        # every control in one call (a call per check was 200 round trips a width): for each,
        # where a learner works with it (the middle or the bottom of the screen) Generate is in
        # view and the control is on top; reached by the keyboard from anywhere above or below,
        # it comes out from under the bar. Scrolling and focus are synchronous here (no smooth
        # scrolling, the bar is CSS-sticky), so each check sees the layout of its own scroll.
        misses, count = page.evaluate(f"""() => {{
            const inView = {IN_VIEW}, uncovered = {UNCOVERED};
            const controls = [...document.querySelectorAll(
                '#settings :is(input, select, textarea, summary)')].filter((e) => {{  // what Playwright calls visible
                    const r = e.getBoundingClientRect();
                    return e.checkVisibility({{visibilityProperty: true}}) && r.width > 0 && r.height > 0;
                }});
            const misses = [];
            for (const e of controls) {{
                const name = e.id || e.textContent;
                for (const block of ['center', 'end']) {{
                    e.scrollIntoView({{block}});
                    if (!inView()) misses.push(['generate hidden', block, name]);
                    if (!uncovered(e)) misses.push(['covered', block, name]);
                }}
                for (const top of [0, 1e6]) {{
                    document.activeElement.blur();
                    window.scrollTo(0, top);
                    e.focus();
                    if (!uncovered(e)) misses.push(['covered on focus', top, name]);
                }}
            }}
            return [misses, controls.length];
        }}""")
        assert count >= 20
        assert misses == [], (width, misses)
        # and at the very end of the page the bar is still inside its workbench: past the
        # workbench (where the chapter is long enough to scroll past it) the bar goes with it
        page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")
        assert page.evaluate("""() => {
            const bench = document.querySelector('#workbench').getBoundingClientRect();
            const bar = document.querySelector('#stage').getBoundingClientRect();
            return bar.bottom <= bench.bottom + 1; }""")
    finally:
        page.context.close()


def test_the_keyboard_reaches_generate_by_the_skip_link_and_the_shortcut_is_shown(fresh_page):
    page = wait_ready(fresh_page)
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.className") == "skip-link"
    # past it, the masthead's invitation to the real model, then the start-up times, then the
    # map of chapters, in the order they are read
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.id") == "real-choose"
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.closest('#course-map') !== null")
    # the skip link goes straight to the workbench: Generate is the next stop
    page.locator(".skip-link").focus()
    page.keyboard.press("Enter")
    # the address now names the workbench: its chapter opens and takes the focus at its title
    page.wait_for_function("() => document.activeElement.id === 'start-chapter-title'")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.id") == "generate"
    shortcut = page.locator("#shortcut")
    assert shortcut.is_visible() and "Enter" in shortcut.inner_text()
    assert page.locator("#generate").get_attribute("aria-describedby") == "shortcut"
    # Ctrl+Enter generates from anywhere, the stop strings' box included
    page.get_by_label("Stop strings", exact=True).click()
    page.keyboard.press("Control+Enter")
    assert settle(page)["status"] == "done"


def test_the_basic_rules_come_first_and_more_rules_counts_its_changes(app):
    reset(app)
    more = app.locator("#more-rules")
    for label in ("Prompt", "Seed", "Temperature", "Greedy", "Top-k", "Top-p", "Max new tokens",
                  "Stop strings"):
        control = app.get_by_label(label, exact=True)
        assert control.is_visible() and not control.evaluate("e => !!e.closest('#more-rules')")
    assert app.locator("#more-count").inner_text() == "(all at their defaults)"
    set_fields(app, Min_p=0.05, Repetition_penalty=1.3, Ignore_EOS=True)
    assert app.locator("#more-count").inner_text() == "(3 changed)"
    set_fields(app, Min_p=0)
    assert app.locator("#more-count").inner_text() == "(2 changed)"
    # the cache check belongs to the transformer: with the bigram it is not offered at all
    assert not app.get_by_label("Cache check", exact=True).is_visible()
    set_fields(app, Model="transformer")
    assert app.get_by_label("Cache check", exact=True).is_visible()
    reset(app, Model="bigram")
    assert app.locator("#more-count").inner_text() == "(all at their defaults)"
    more.locator(":scope > summary").click()  # closed again for the next test
    assert not more.evaluate("d => d.open")


def next_token(page):
    """The next-token box: [(token, final %)] as drawn, once its latest request is back."""
    page.evaluate("() => window.decodelab.settled()")  # the settings' change has reached it
    page.wait_for_function("() => !window.decodelab.lesson.preview.busy")
    page.wait_for_selector("#next[data-state=ready]")
    rows = page.locator("#next-bars .next-row")
    return [(rows.nth(i).locator(".next-tok").inner_text(), rows.nth(i).locator(".next-p").inner_text())
            for i in range(rows.count())]


def test_the_next_token_is_redrawn_live_as_a_rule_moves(app):
    reset(app, Dataset="names", Prompt="ma")
    api("setup", {"assets": str(ROOT / "artifacts")})
    for temperature in ("0.3", "1.5", "3"):
        slider = app.locator("#temperature-slider")
        slider.evaluate("(s, v) => { s.value = v; s.dispatchEvent(new Event('input', {bubbles: true})); }",
                        temperature)
        assert app.get_by_label("Temperature", exact=True).input_value() == temperature
        drawn = next_token(app)
        native = api("preview", {"settings": {"dataset": "names", "prompt": "ma",
                                              "temperature": float(temperature)}})
        final = native["pipelines"]["temperature-first"]["final"]
        want = [(r["token_text"], p) for r, p in zip(native["rows"], final["p"])][:len(drawn)]
        for (tok, shown), (text, p) in zip(drawn, want):
            assert tok == ("end" if text == "<eos>" else text)
            if shown.startswith("<"):  # too small for one decimal, and said so
                assert 0 < 100 * p < float(shown.strip("<%")), (temperature, tok, shown, p)
            else:
                assert abs(float(shown.rstrip("%")) - 100 * p) <= 0.051, (temperature, tok, shown, p)
    assert "After the prompt “ma”" in app.locator("#next-where").inner_text()
    # top-k 2 leaves two that can be drawn, and the rest marked cut
    set_fields(app, Top_k=2)
    drawn = next_token(app)
    assert sum(p != "cut" for _, p in drawn) == 2 and drawn[2][1] == "cut"


def test_greedy_is_told_with_the_models_own_odds(app):
    reset(app, Dataset="prose", Prompt="The ", Greedy=True, Max_new_tokens=30)
    app.get_by_role("button", name="Generate", exact=True).click()
    settle(app)
    trace = json.loads(app.evaluate("() => window.decodelab.trace()"))
    app.locator("#text-gen [data-step]").nth(3).click()
    step = trace["steps"][3]
    model = math.exp(step["logprob"])
    assert model < 0.99  # the model was not sure; greedy took its argmax all the same
    summary = app.locator("#step-summary").inner_text()
    assert "argmax" in summary and f"{100 * model:.1f}%" in summary and "100%" not in summary
    stats = dict(zip(app.locator("#stats dt").all_text_contents(), app.locator("#stats dd").all_inner_texts()))
    assert stats["Model’s chance"] == f"{100 * model:.1f}%"
    assert stats["Model’s entropy"] == f"{step['entropy_raw']:.2f} nats"
    bar = app.locator("#st-decode .st-bar").nth(2)  # step 4: the timeline tells the same odds
    assert f"{100 * model:.1f}%" in bar.get_attribute("aria-label")


def test_a_stop_strings_cut_is_shown_after_the_text_and_its_steps_marked(app):
    reset(app, Dataset="prose", Prompt="The ", Seed=2, Max_new_tokens=300, Stop_strings="ing")
    app.get_by_role("button", name="Generate", exact=True).click()
    result = settle(app)
    assert result["stop_reason"] == "ing" and result["cut"] == "ing"
    cut = app.locator("#text-cut")
    assert cut.is_visible() and cut.locator("s").inner_text() == "ing"
    assert "stop string “ing”" in cut.inner_text()
    assert "ing" not in app.locator("#text-gen").inner_text()[-3:]  # the text itself is cut
    trace = json.loads(app.evaluate("() => window.decodelab.trace()"))
    last = len(trace["steps"]) - 1
    marked = app.locator("#st-decode .st-bar.is-cut").evaluate_all("bs => bs.map(b => +b.dataset.step)")
    assert marked == [last - 2, last - 1, last]
    # the cut characters still select the steps that chose them
    cut.locator("[data-step]").first.click()
    assert app.locator("#step-count").inner_text() == f"Step {last - 1} of {last + 1}"


CLIPPED = """() => [...document.querySelectorAll(
    '#stats dd, .stat dd, .next-p, .pl-n, .finish-code, #cache-meta, .mem-num, .st-tok')]
    .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1)
    .map(e => e.textContent)"""


@pytest.mark.parametrize("width, scheme", [(1280, "light"), (360, "dark"), (1280, "dark")])
def test_no_number_is_clipped(chromium, base_url, width, scheme):
    page = wait_ready(open_page(chromium, base_url, viewport={"width": width, "height": 900},
                                color_scheme=scheme))
    try:
        # a transformer step whose cache check is a tiny number written with an exponent
        set_fields(page, Model="transformer", Dataset="names", Prompt="an", Seed=2,
                   Max_new_tokens=8)
        page.get_by_role("button", name="Generate", exact=True).click()
        settle(page)
        page.locator("#text-gen [data-step]").nth(2).click()
        page.locator("#pipeline > summary").click()
        page.wait_for_selector("#pipeline[data-state=ready]")
        assert "×10" in page.locator("#stats").inner_text()  # the exponent is there, whole
        assert page.evaluate(CLIPPED) == []
    finally:
        page.context.close()


ON_SCREEN = """e => { const r = e.getBoundingClientRect();
    return r.bottom > 0 && r.top < innerHeight && r.width > 0; }"""


def test_every_chapters_try_this_shows_its_answer_and_its_evidence_where_the_learner_is(app):
    # the walkthrough: each chapter opened from the map, each Try this by its button. A
    # suggestion that runs the workbench takes the learner there, with a note that holds the
    # answer and the way back; one that works its own chapter's panel stays. Either way every
    # thing the answer claims is on screen, and Back returns to the suggestion, answered.
    chapters = app.locator("#course-map a").evaluate_all("as => as.map(a => a.hash.slice(1))")
    assert chapters[0] == "start" and len(chapters) >= 5
    seen = []
    for chapter in chapters:
        open_chapter(app, chapter)
        items = app.locator(f"#{chapter} .try-item")
        for name in items.evaluate_all("els => els.map(e => e.id.replace(/^try-/, ''))"):
            seen.append(name)
            item = app.locator(f"#try-{name}")
            item.get_by_role("button", name="Try it").click()
            app.wait_for_selector(f"#try-{name}[data-state=done], #try-{name}[data-state=error]",
                                  state="attached", timeout=180_000)  # its chapter may be away
            assert item.get_attribute("data-state") == "done", item.locator(".try-status").text_content()
            result = app.evaluate(f"() => window.decodelab.lesson.tries.results[{json.dumps(name)}]")
            if name == "tool-call":  # its numbers against the run's own records
                steps = json.loads(app.evaluate("() => window.decodelab.trace()"))["steps"]
                close = next(i for i, s in enumerate(steps)
                             if s["source"] == "model" and s["token_text"] == "<|/call|>")
                tool = [s for s in steps if s["source"] == "tool"]
                before, after = steps[close]["cache_length"], tool[-1]["cache_length"]
                assert after - before == len(tool) + 1  # the closing token went in the same pass
                assert f"from {before} to {after} positions (1 + {len(tool)})" in result["text"]
            if name in ("ends-eos", "ends-stop"):  # its numbers against the run's own trace
                trace = json.loads(app.evaluate("() => window.decodelab.trace()"))
                assert trace["text"].replace(" ", "␣") in result["text"]  # quoted, spaces shown
                if name == "ends-eos":
                    assert trace["stop_reason"] == "eos" and trace["steps"][-1]["token_text"] == "<eos>"
                    assert f"at step {len(trace['steps'])}" in result["text"]
                    assert trace["json"]["status"] == "valid" and "valid JSON, one whole object" in result["text"]
                else:
                    assert trace["stop_reason"] == "," and trace["json"]["status"] == "incomplete"
                    assert "incomplete JSON" in result["text"]
            trip = app.locator("#trip")
            away = trip.is_visible()
            if away:  # at the workbench, with the answer in the note at the top of the window
                assert app.locator("#start").is_visible()
                assert chapter == "start" or not app.locator(f"#{chapter}").is_visible()
                assert trip.evaluate(ON_SCREEN), name
                trip.locator(".try-answer > summary").click()
                assert trip.locator(".try-answer-text").inner_text() == result["text"]
            assert result["evidence"]
            for selector, words in result["evidence"]:
                shown = app.locator(selector)
                # on screen: nothing around it hidden (its chapter, its panel); it may itself
                # be empty, as a run that wrote nothing is
                assert shown.first.evaluate("e => !e.closest('[hidden]')"), (name, selector)
                assert words in shown.first.text_content(), (name, selector, words)
            if not away:  # the run is in view, or the status says where and takes one there
                run = app.locator(result["evidence"][0][0]).first
                if not run.evaluate(ON_SCREEN):
                    item.locator(".try-where").click()
                    app.wait_for_function(ON_SCREEN, arg=run.element_handle())
            if away:
                app.locator("#trip-back").click()
                assert not trip.is_visible()
                assert item.evaluate(ON_SCREEN), name
            assert app.locator(f"#{chapter}").is_visible()
            item.locator(".try-answer > summary").click()
            assert item.locator(".try-answer-text").inner_text() == result["text"]
        # the map counts what was done
        link = app.locator(f'#course-map a[href="#{chapter}"]')
        if items.count():
            assert link.get_attribute("data-mark") == "done"
            assert link.locator(".course-progress").inner_text() == f"all {items.count()} tried"
    assert len(seen) == 23 and len(set(seen)) == 23
    open_chapter(app, "start")
    reset(app)


def test_two_runs_side_by_side_part_ways_where_their_traces_do(app):
    traces = []
    for temperature in (0.3, 2):
        reset(app, Dataset="names", Seed=21, Temperature=temperature, Max_new_tokens=30,
              Ignore_EOS=True)
        app.get_by_role("button", name="Generate", exact=True).click()
        settle(app)
        traces.append(json.loads(app.evaluate("() => window.decodelab.trace()")))
    a, b = traces
    first = next(i for i, (x, y) in enumerate(zip(a["steps"], b["steps"]))
                 if x["token_id"] != y["token_id"])
    box = app.locator("#runs-compare")
    assert box.get_attribute("data-first") == str(first)
    assert "Temperature: 0.3 → 2" in box.locator(".runs-diff").inner_text()
    columns = box.locator(".runs-col")
    for i, trace in enumerate(traces):
        col = columns.nth(i)
        assert col.locator(".runs-text").inner_text() == trace["text"]
        parted = "".join(s["token_text"] for s in trace["steps"][first:] if s["token_text"] != "<eos>")
        assert col.locator(".runs-parted").inner_text() == parted
    # the draws were the same at every step: same seed
    assert [s["u"] for s in a["steps"]] == [s["u"] for s in b["steps"]]


def test_a_short_text_box_says_where_the_rest_of_the_text_is(chromium, base_url):
    """On a phone the text box holds two lines: a longer text says it goes on, and where."""
    page = open_page(chromium, base_url, "?dataset=prose&prompt=The+&seed=3&max_new_tokens=200"
                     "&ignore_eos=true", viewport={"width": 360, "height": 760}, color_scheme="dark")
    page.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
    reveal(page, "#generate").click()
    page.evaluate("() => window.decodelab.lastRun")
    page.wait_for_selector("html[data-state=ready]")
    box, cue = page.locator("#text"), page.locator("#text-more")
    page.locator("#text-gen [data-step]").first.click()  # the start of the text in view
    page.evaluate("() => { document.getElementById('text').scrollTop = 0; }")
    page.wait_for_function("() => document.getElementById('text').dataset.more === 'below'")
    assert cue.is_visible() and cue.inner_text() == "More text below: scroll the box ↓"
    page.evaluate("() => { const b = document.getElementById('text'); b.scrollTop = b.scrollHeight; }")
    page.wait_for_function("() => document.getElementById('text').dataset.more === 'above'")
    assert cue.inner_text() == "More text above: scroll the box ↑"
    assert box.evaluate("b => b.scrollHeight > b.clientHeight")
    page.context.close()
    # a wide screen with a short text: nothing to say
    page = open_page(chromium, base_url, "?dataset=names&prompt=ma&seed=4", viewport={"width": 1280, "height": 900})
    page.wait_for_selector("html[data-state=ready]", timeout=BOOT_TIMEOUT_MS)
    reveal(page, "#generate").click()
    page.evaluate("() => window.decodelab.lastRun")
    page.wait_for_selector("html[data-state=ready]")
    # the box works out its cue in the frame after the run's end: two frames later it has
    page.evaluate("() => new Promise(ok => requestAnimationFrame(() => requestAnimationFrame(ok)))")
    assert page.locator("#text").get_attribute("data-more") == ""
    assert not page.locator("#text-more").is_visible()
    page.context.close()


WHOLE = """e => { const r = e.getBoundingClientRect();  // (a pixel for rounding)
    return r.width > 0 && r.top >= -1 && r.bottom <= innerHeight + 1; }"""


@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
def test_a_try_run_in_its_own_chapter_leaves_its_answer_in_view(chromium, base_url, width, height):
    """Chapter 5's Try this suggestions and chapter 6's, each run in turn as a learner does:
    a run grows its panel above the questions, and chapter 5's fourth answer (a broken cache)
    sat at the window's foot, chapter 6's second (a draft, greedy) under it, and the third and
    fifth of chapter 5 at 390 px. After each run its question's status and its answer are whole
    in the window (measured), the status says where the run is from there, and the answer,
    opened, is whole in the window too."""
    page = wait_ready(open_page(chromium, base_url, viewport={"width": width, "height": height}))
    try:
        for chapter in ("cache", "search"):
            open_chapter(page, chapter)
            names = page.locator(f"#{chapter} .try-item").evaluate_all(
                "els => els.map(e => e.id.replace(/^try-/, ''))")
            for name in names:
                item = page.locator(f"#try-{name}")
                item.get_by_role("button", name="Try it").click()
                page.wait_for_function(f"() => document.querySelector('#try-{name}').dataset"
                                       f".state === 'done'", timeout=180_000)
                # what the run drew fits the window's width (the draft's legend, greedy, once
                # made a phone's page 509 px wide)
                assert page.evaluate("() => document.documentElement.scrollWidth") <= width, name
                if page.locator("#trip").is_visible():  # it ran in the workbench: back here
                    page.locator("#trip-back").click()
                    continue
                for part in (".try-status", ".try-answer > summary"):
                    box = item.locator(part).bounding_box()
                    assert item.locator(part).evaluate(WHOLE), (name, part, box)
                    assert item.locator(part).evaluate(UNCOVERED), (name, part)
                result = page.evaluate(f"() => window.decodelab.lesson.tries.results['{name}']")
                run = page.locator(result["evidence"][0][0]).first
                words = item.locator(".try-status").inner_text()
                if run.evaluate(WHOLE):
                    assert words == "Done. Look at the page, then open the answer.", (name, words)
                else:
                    where = "above" if run.bounding_box()["y"] < item.bounding_box()["y"] else "below"
                    assert words.startswith(f"Done. The run is {where} this question"), (name, words)
                item.locator(".try-answer > summary").click()  # opened: all of it comes in view
                text = item.locator(".try-answer-text").element_handle()
                try:
                    page.wait_for_function(WHOLE, arg=text, timeout=5_000)
                except Exception:
                    raise AssertionError((name, text.bounding_box(),
                                          item.locator(".try-answer").get_attribute("open")))
        assert page.errors == []
    finally:
        page.context.close()
