"""The search chapter in the page, end to end in headless Chromium: beam search equal to the
command line's `generate --strategy beam`, its tree growing step by step, a field error that
keeps the last result; speculative decoding with greedy rules equal to greedy decoding, its
rounds and cache; the acceptance experiment with its table and Stop."""

import json
import os
import shlex
import subprocess
import sys

import pytest
from playwright.sync_api import expect

from decodelab.fields import default

from tests.e2e.conftest import ROOT, open_chapter, open_page, reveal, wait_ready
from tests.e2e.test_page import cli_trace, set_fields
from tests.e2e.test_transformer_page import BASE


def last_json(page, panel):
    return page.evaluate(f"() => JSON.stringify(window.decodelab.search.last.{panel} || null)")


def wait_reply(page, panel, before):
    page.wait_for_function(f"b => window.decodelab.search.last.{panel} && "
                           f"JSON.stringify(window.decodelab.search.last.{panel}) !== b",
                           arg=before, timeout=120_000)
    return page.evaluate(f"() => window.decodelab.search.last.{panel}")


def kept_runs(page):
    """The labels of the runs Compare runs keeps (its chapter may be closed)."""
    return page.evaluate("() => [...document.querySelectorAll('#runs-a option')]"
                         ".map((o) => o.textContent)")


def search(app, **fields):
    before = last_json(app, "beam")
    for selector, value in fields.items():
        reveal(app, selector).fill(str(value))
    app.get_by_role("button", name="Search", exact=True).click()
    return wait_reply(app, "beam", before)


@pytest.mark.parametrize("ngram, cause", [(3, "the ban on repeated 3-grams forbids the beams "
                                                "greedy decoding’s text, which repeats one"),
                                           (0, None)])
def test_the_beam_summary_says_the_cause_python_found(app, ngram, cause):
    # Prose, "The ", 3 beams, length penalty 1: with the 3-gram ban greedy's text is likelier per
    # token because the ban forbids it (all texts are 30 tokens: no length penalty is at work);
    # without it nothing stands in the search's way: the best beam is greedy's text, or likelier
    # (which, turns on near-ties in the trained weights), and the summary says which
    set_fields(app, **{**BASE, "Dataset": "prose", "Prompt": "The ", "Seed": 3,
                       "Max_new_tokens": 30})
    open_chapter(app, "search")
    reply = search(app, **{"#beam-beams": 3, "#beam-return": 1, "#beam-penalty": 1,
                           "#beam-ngram": ngram})
    assert reply["ok"], reply
    assert reply["why"]["causes"] == (["no_repeat_ngram"] if ngram else [])
    summary = app.locator("#beam-summary").inner_text()
    if cause is None:
        why = reply["why"]
        assert why["likelier"]
        cause = "The search found greedy decoding’s text itself: the best beam is the same " \
            "tokens" if "greedy" in why["found"] else \
            ("it is as likely per token as greedy decoding’s text, and the search found no "
             "likelier path") if "greedy" in why["same"] else \
            "The model finds the best beam likelier per token"
    assert cause in summary
    assert "length penalty" not in summary
    assert ("try No repeat n-gram" in summary) == (not ngram)


def test_a_beam_that_is_greedy_s_text_is_said_to_be_found(app):
    # Names, "jo", 2 beams: the best beam is greedy's text token for token; the summary says the
    # search found it, with the beam's own score, and compares it with nothing it equals
    set_fields(app, **{**BASE, "Dataset": "names", "Prompt": "jo", "Seed": 3,
                       "Max_new_tokens": 30})
    open_chapter(app, "search")
    reply = search(app, **{"#beam-beams": 2, "#beam-return": 1, "#beam-penalty": 1,
                           "#beam-ngram": 0})
    assert reply["ok"], reply
    beam, greedy, _ = reply["side"]
    assert beam["text"] == greedy["text"] and reply["why"]["found"][0] == "greedy"
    score = f"{beam['logprob_per_token']:.2f}".replace("-", "−")
    summary = app.locator("#beam-summary").inner_text()
    assert f"The search found greedy decoding’s text itself: the best beam is the same tokens " \
           f"({score} per token)" in summary, summary
    assert "likelier per token (" not in summary


def test_beam_search_in_the_page_equals_the_command_line(app):
    set_fields(app, **{**BASE, "Dataset": "names", "Prompt": "el", "Seed": 3,
                       "Temperature": 0.9, "Max_new_tokens": 12})
    open_chapter(app, "search")
    reply = search(app, **{"#beam-beams": 5, "#beam-return": 3, "#beam-penalty": 1,
                           "#beam-ngram": 0})
    assert reply["ok"], reply
    expected = cli_trace(model="transformer", dataset="names", prompt="el", seed=3,
                         max_new_tokens=12, strategy="beam", num_beams=5,
                         num_return_sequences=3)
    got = reply["trace"]
    assert [b["ids"] for b in got["beams"]] == [b["ids"] for b in expected["beams"]]
    # the same numbers to rounding: WebAssembly's numpy adds up in another order than the
    # native one's
    assert [b["score"] for b in got["beams"]] == pytest.approx(
        [b["score"] for b in expected["beams"]], abs=1e-6)
    # the sampled comparison is the workbench's own run (its temperature and seed)
    sampled = cli_trace(model="transformer", dataset="names", prompt="el", seed=3,
                        temperature=0.9, max_new_tokens=12)
    assert reply["side"][2]["text"] == sampled["text"]
    assert app.locator("#beam-side article").count() == 3
    assert app.locator("#beam-list li").count() == 3
    assert app.locator("#beam-list li").first.locator(".gen-text").inner_text() == \
        expected["beams"][0]["text"]
    # the tree: every kept beam of every step, then only step 0's
    steps = len(got["steps"])
    nodes = app.locator("#beam-tree g.beam-node:not(.is-finished)")
    assert nodes.count() == sum(1 for row in reply["tree"]["nodes"] for n in row
                                if not n.get("blocked"))
    app.locator("#beam-step").fill("0")
    assert nodes.count() == 5 and app.locator("#beam-step-out").inner_text() == "0"
    assert app.locator("#beam-cand-rows tr").count() == 10  # 2N candidates
    assert "row ← row" in app.locator("#beam-rows").inner_text()
    app.locator("#beam-step").fill(str(steps - 1))
    assert "Cache check passed" in app.locator("#beam-check").inner_text()
    # Play grows the tree from step 0 to the end, then stops by itself
    play = app.locator("#beam-play")
    play.click()
    assert play.inner_text() == "Pause"
    app.wait_for_function("n => document.querySelector('#beam-step-out').textContent === n "
                          "&& document.querySelector('#beam-play').textContent === 'Play'",
                          arg=str(steps - 1), timeout=60_000)
    assert nodes.count() == sum(1 for row in reply["tree"]["nodes"] for n in row
                                if not n.get("blocked"))
    # the best path joins Compare runs, beside the workbench's runs
    assert any(label.endswith("seed 3, beam search, 5 beams") for label in kept_runs(app))
    command = app.locator("#beam-command").inner_text()
    assert "--strategy=beam" in command and "--num-beams=5" in command
    assert "--temperature" not in command  # beam search draws nothing
    # the command line Python wrote repeats the search, and its note says how to run it
    words = shlex.split(command)
    assert words[:4] == ["python3", "-m", "decodelab", "generate"] and words[-1] == "--json"
    out = subprocess.run([sys.executable, *words[1:]], capture_output=True, text=True,
                         check=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT / "py")))
    assert [b["ids"] for b in json.loads(out.stdout)["beams"]] == [b["ids"] for b in got["beams"]]
    assert "prints the same trace as Export trace" in app.locator("#beam-command-note").inner_text()


def test_a_bad_beam_setting_is_named_and_the_last_search_stays(app):
    open_chapter(app, "search")
    shown = app.locator("#beam-list").inner_text()
    reply = search(app, **{"#beam-beams": 3, "#beam-return": 4})
    assert not reply["ok"]
    error = app.locator("#beam-return-error")
    assert error.is_visible()
    assert "Paths returned must be from 1 to Beams (3); got 4." in error.inner_text()
    assert app.locator("#beam-list").inner_text() == shown
    reply = search(app, **{"#beam-beams": 3, "#beam-return": 1})
    assert reply["ok"] and not error.is_visible()


def test_greedy_speculative_decoding_writes_the_model_s_own_text(app):
    set_fields(app, **{**BASE, "Dataset": "prose", "Prompt": "The ", "Greedy": True,
                       "Max_new_tokens": 40})
    open_chapter(app, "search")
    before = last_json(app, "speculate")
    reveal(app, "#spec-gamma").fill("3")
    app.get_by_role("button", name="Decode with the draft", exact=True).click()
    reply = wait_reply(app, "speculate", before)
    assert reply["ok"], reply
    plain = cli_trace(model="transformer", dataset="prose", prompt="The ", greedy=True,
                      max_new_tokens=40, seed=1)
    assert reply["trace"]["ids"] == [s["token_id"] for s in plain["steps"]]
    assert "the same as without the draft" in app.locator("#spec-summary").inner_text()
    rounds = app.locator("#spec-rounds > li")
    assert rounds.count() == len(reply["trace"]["rounds"])
    first = reply["trace"]["rounds"][0]
    assert rounds.first.locator(".spec-chip.is-accepted").count() == first["accepted"]
    assert f"Cache: {first['cache'][0]} positions, {first['cache'][1]} while the model checks" \
        in rounds.first.inner_text()
    assert "Cache check passed" in app.locator("#spec-check").inner_text()
    # a round whose draft was turned down early says how many guesses were never checked
    for i, x in enumerate(reply["trace"]["rounds"]):
        said = f"The draft proposed {x['proposed']} guesses: the last"
        assert (said in rounds.nth(i).inner_text()) == (len(x["tokens"]) < x["proposed"]), i
    # the text shown is the model's, token by token
    assert app.locator("#spec-text .spec-tok:not(.is-rejected)").count() == \
        len(reply["trace"]["ids"])
    # the latest round's guess that was turned down shows, struck, where it was tried
    last = reply["trace"]["rounds"][-1]
    turned_down = [t for t in last["tokens"] if not t["accepted"]]
    assert app.locator("#spec-text .spec-tok.is-rejected").count() == \
        (1 if turned_down and "resampled" in last else 0)
    app.locator("#spec-round").fill("0")
    assert rounds.count() == 1
    assert kept_runs(app)[-1].endswith("greedy, bigram draft")


def test_the_acceptance_experiment_measures_each_cell_and_stops(app):
    set_fields(app, **{**BASE, "Dataset": "names", "Max_new_tokens": 20})
    open_chapter(app, "search")
    reveal(app, "#spec-gammas").fill("1, 3")
    app.locator("#spec-temps").fill("0, 1")
    app.locator("#spec-samples").fill("4")
    app.locator("#spec-xp-run").click()
    app.wait_for_function("() => document.querySelector('#acc-spec-form').dataset.state "
                          "=== 'done'", timeout=120_000)
    rows = app.locator("#spec-xp-results tbody tr")
    assert rows.count() == 4
    assert "%" in rows.nth(1).inner_text() and "[" in rows.nth(1).inner_text()  # an interval
    result = app.evaluate("() => window.decodelab.search.speculative.lastExperiment()")
    assert [c["runs"] for c in result["cells"]] == [1, 4, 1, 4]  # greedy runs once
    # each row's temperature in Python's words: T = 0 is greedy
    assert [rows.nth(i).locator("td").first.inner_text() for i in range(4)] == \
        [c["temperature_words"] for c in result["cells"]] == ["0 (greedy)", "1"] * 2
    # too many runs: refused, naming the field; the last results stay
    app.locator("#spec-samples").fill("100")
    app.locator("#spec-temps").fill("0.5, 1, 1.5")
    app.locator("#spec-xp-run").click()
    error = app.locator("#spec-samples-error")
    error.wait_for(state="visible")
    assert "2 draft lengths x 3 temperatures x 100 samples make 600 runs; at most 400" in \
        error.inner_text()
    assert rows.count() == 4
    # a long one, stopped: the last results stay
    app.locator("#spec-samples").fill("60")
    app.locator("#spec-xp-run").click()
    app.locator("#spec-xp-cancel").click()
    app.wait_for_function("() => document.querySelector('#spec-xp-status').textContent"
                          ".startsWith('Stopped')", timeout=60_000)
    assert rows.count() == 4
    assert json.dumps(result) == json.dumps(
        app.evaluate("() => window.decodelab.search.speculative.lastExperiment()"))


def test_a_link_carries_a_search_panel_s_own_settings(chromium, base_url):
    page = wait_ready(open_page(chromium, base_url, "?model=transformer&dataset=names&prompt=el"
                                                    "&num_beams=6&num_return_sequences=2#beam"))
    try:
        assert page.locator("#link-notice").is_hidden()  # no "unknown setting"
        assert page.locator("#beam-beams").input_value() == "6"
        assert page.locator("#beam-return").input_value() == "2"
        before = last_json(page, "beam")
        page.get_by_role("button", name="Search", exact=True).click()
        reply = wait_reply(page, "beam", before)
        assert reply["ok"] and len(reply["trace"]["beams"]) == 2
        assert reply["trace"]["settings"]["num_beams"] == 6
        page.locator("#beam-return").fill("1")
        page.locator("#beam-link").click()
        link = page.locator("#beam-link").get_attribute("data-link")
        assert "num_beams=6" in link and "num_return_sequences=1" in link
        assert "prompt=el" in link and link.endswith("#beam")
        assert page.errors == []
    finally:
        page.context.close()


@pytest.mark.parametrize("scheme,width", [("light", 1280), ("dark", 360)])
def test_the_search_chapter_passes_axe_and_fits_a_phone(chromium, base_url, scheme, width):
    from tests.e2e.test_a11y import AXE, axe_violations

    page = wait_ready(open_page(chromium, base_url, "?model=transformer&dataset=prose"
                                                    "&prompt=The+&max_new_tokens=30#search",
                                color_scheme=scheme, viewport={"width": width, "height": 900}))
    try:
        for button, panel in (("Search", "beam"), ("Decode with the draft", "speculate")):
            before = last_json(page, panel)
            page.get_by_role("button", name=button, exact=True).click()
            assert wait_reply(page, panel, before)["ok"]
        page.locator("#spec-gamma").fill("0")  # an error next to its field
        before = last_json(page, "speculate")
        page.get_by_role("button", name="Decode with the draft", exact=True).click()
        wait_reply(page, "speculate", before)
        page.wait_for_selector("#spec-gamma-error:not([hidden])")
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width
        if not AXE.exists():
            pytest.fail("node_modules/axe-core is missing: run npm ci")
        violations = axe_violations(page)
        assert violations == [], json.dumps(violations, indent=1)
    finally:
        page.context.close()


def test_the_searches_show_the_workbench_settings_they_run_on_and_change_them_there(app, widgets):
    """Chapter 6's copies of the workbench's prompt, dataset and budget (and the draft's
    temperature and greedy): one setting each with the workbench's control, both ways; its error
    shown beside the copy too; the search runs on what the copy shows."""
    set_fields(app, **{**BASE, "Dataset": "names", "Prompt": "el", "Max_new_tokens": 12})
    open_chapter(app, "search")
    beam = app.get_by_role("group", name="The settings it searches from")
    spec = app.get_by_role("group", name="The settings it runs")
    assert beam.get_by_label("Prompt (beam search)", exact=True).input_value() == "el"
    assert spec.get_by_label("Dataset (speculative decoding)", exact=True).input_value() == "names"
    assert beam.get_by_label("Max new tokens (beam search)", exact=True).input_value() == "12"
    # a change in a copy is a change at the workbench, in the other copy and in the address
    beam.get_by_label("Prompt (beam search)", exact=True).fill("ma")
    app.evaluate("() => window.decodelab.settled()")
    assert app.locator("#prompt").input_value() == "ma"
    assert spec.get_by_label("Prompt (speculative decoding)", exact=True).input_value() == "ma"
    app.wait_for_function("() => new URLSearchParams(location.search).get('prompt') === 'ma'")
    spec.get_by_label("Dataset (speculative decoding)", exact=True).select_option("prose")
    app.evaluate("() => window.decodelab.settled()")
    assert app.locator("#dataset").input_value() == "prose"
    assert beam.get_by_label("Dataset (beam search)", exact=True).input_value() == "prose"
    spec.get_by_label("Greedy (speculative decoding)", exact=True).check()
    app.evaluate("() => window.decodelab.settled()")
    assert app.locator("#greedy").is_checked()
    # a change at the workbench shows in the copies
    set_fields(app, Prompt="The ", Max_new_tokens=9)
    open_chapter(app, "search")
    assert beam.get_by_label("Prompt (beam search)", exact=True).input_value() == "The "
    assert spec.get_by_label("Max new tokens (speculative decoding)", exact=True).input_value() == "9"
    # Python's verdict on a bad value typed in a copy, beside the copy and at the workbench
    budget = beam.get_by_label("Max new tokens (beam search)", exact=True)
    budget.fill("0")
    budget.blur()
    app.evaluate("() => window.decodelab.settled()")
    error = app.locator("#beam-budget-error")
    assert error.is_visible() and error.inner_text() == app.locator("#max_new_tokens-error").text_content()
    assert "Max new tokens" in error.inner_text()
    budget.fill("9")
    budget.blur()
    app.evaluate("() => window.decodelab.settled()")
    assert not error.is_visible()
    # the search runs on what the copies show
    reply = search(app, **{"#beam-beams": 2, "#beam-return": 1, "#beam-penalty": 1, "#beam-ngram": 0})
    assert reply["ok"], reply
    assert reply["trace"]["settings"]["prompt"] == "The " and reply["trace"]["settings"]["dataset"] == "prose"
    assert reply["trace"]["settings"]["max_new_tokens"] == 9
    set_fields(app, **BASE)

    # a widget: a setting its link keeps fixed has no copy to change it
    page = widgets.open("embed.html?lazy=none&panels=beam&controls=prompt&dataset=names&prompt=ma")
    wait_ready(page)
    page.evaluate("() => window.decodelab.settled()")
    assert page.get_by_label("Prompt (beam search)", exact=True).input_value() == "ma"
    assert not page.get_by_label("Dataset (beam search)", exact=True).is_visible()
    assert not page.get_by_label("Max new tokens (beam search)", exact=True).is_visible()
    # ... but says what they are, so the panel still shows all it runs on
    names = page.locator("#dataset option[value=names]").inner_text()
    budget = default("max_new_tokens")
    fixed = page.locator("#beam .mirror-fixed")
    assert fixed.inner_text() == f"Kept fixed by this widget: Dataset ({names}), Max new tokens ({budget})."
    # the lede names the stop strings as the widget's own (no control of them is on screen)
    lede = page.locator("#beam .part-lede").first
    assert "on this widget’s stop strings" in lede.inner_text()
    assert "the stop strings above" not in lede.inner_text()
    page.close()
    page = widgets.open("embed.html?lazy=none&panels=beam&controls=temperature")  # none of them
    wait_ready(page)
    group = page.get_by_role("group", name="The settings it searches from")
    assert group.get_by_role("textbox").count() == 0 and group.get_by_role("combobox").count() == 0
    assert group.locator(".mirror-fixed").inner_text() == (
        f"Kept fixed by this widget: Prompt (empty), Dataset ({names}), Max new tokens ({budget}).")
    page.close()
    # beside the workbench's rules, the next token names its model: the search runs another one
    page = widgets.open("embed.html?lazy=none&panels=controls,beam&controls=prompt")
    wait_ready(page)
    page.evaluate("() => window.decodelab.settled()")
    model = page.locator("#model option[value=bigram]").inner_text()
    page.wait_for_selector("#next[data-state=ready]")
    assert page.locator("#next-where").inner_text().startswith(f"The model: {model}. ")
    assert "on this widget’s stop strings" in page.locator("#beam .part-lede").first.inner_text()
    page.close()
    # a widget with no panel of another model says nothing of it
    page = widgets.open("embed.html?lazy=none&panels=controls,text&controls=temperature&run=false")
    wait_ready(page)
    page.wait_for_selector("#next[data-state=ready]")
    assert page.locator("#next-where").inner_text().startswith("At the start of a new sequence")
    page.close()


@pytest.fixture(scope="module")
def faulty(chromium, base_url):
    """A page whose worker accepts injected faults, with a watchdog of 4 s (30 s normally)."""
    page = wait_ready(open_page(chromium, base_url, "?faults=1&watchdog=4000"))
    yield page
    page.context.close()


@pytest.mark.alone
def test_a_search_lost_with_its_worker_says_so_and_blames_no_field(faulty):
    """The worker lost during a search (here it hangs, and the watchdog replaces it): the panel
    says what happened, in the supervisor's words, and marks no field, where it had said "Fix
    the field marked above" and marked Beams. Results of a search with another model than the
    workbench's go when the model changes."""
    page = faulty
    set_fields(page, **{**BASE, "Dataset": "prose", "Prompt": "The ", "Seed": 3,
                        "Max_new_tokens": 8})
    open_chapter(page, "search")
    reply = search(page, **{"#beam-beams": 2})
    shown = lambda: not page.locator("#beam-out").evaluate("e => e.hidden")  # noqa: E731
    assert reply["ok"] and shown()
    # another model chosen: the results searched with the transformer go
    set_fields(page, Model="bigram")
    assert not shown()
    assert page.locator("#beam").get_attribute("data-state") == "idle"
    set_fields(page, Model="transformer")
    reply = search(page, **{"#beam-beams": 3})
    assert reply["ok"] and shown()
    # the worker hangs as the next search is sent: replaced after the watchdog's 4 s
    restarts = page.evaluate("() => window.decodelab.health.restarts")
    page.evaluate("() => window.decodelab.injectFault('hang')")
    page.get_by_role("button", name="Search", exact=True).click()
    page.wait_for_function("n => window.decodelab.health.restarts > n", arg=restarts,
                           timeout=60_000)
    page.wait_for_selector("#beam[data-state=lost]", timeout=30_000)
    status = page.locator("#beam-status").inner_text()
    assert status == ("The Python worker stopped answering, so it was stopped. The search went "
                      "with it and nothing of it was kept; once Python is back, search again."), status
    assert "Fix the field" not in status
    assert page.locator("#beam-beams").get_attribute("aria-invalid") is None
    assert not page.locator("#beam-beams-error").is_visible()
    expect(page.get_by_role("button", name="Stop the search")).to_be_hidden()
    # the results on screen are this model's (the transformer's, searched before the loss)
    assert shown()
    wait_ready(page)
    reply = search(page, **{"#beam-beams": 2})
    assert reply["ok"] and page.locator("#beam").get_attribute("data-state") == "done"
