"""End to end in headless Chromium: the built site boots offline, generates, and behaves as the
page contract says (docs/tests.md), with the same traces as the CLI."""

import json
import os
import subprocess
import sys

import pytest

from tests.e2e.conftest import BOOT_TIMEOUT_MS, ROOT, record_errors, reveal, wait_ready


def settle(page):
    """Wait for the run started by the last click to finish; return what the page resolved."""
    result = page.evaluate("() => window.decodelab.lastRun")
    page.wait_for_selector("html[data-state=ready]")
    return result


OPEN_DETAILS = """e => { for (let d = e.closest('details'); d; d = d.parentElement.closest('details'))
    if (!d.open) d.querySelector(':scope > summary').click(); }"""


def set_fields(page, settled=True, **values):
    """Fill controls by their accessible names (the contract), e.g. set_fields(page, Seed=3);
    a control behind a closed "More rules" is reached as a learner would, by opening it."""
    for key, value in values.items():
        control = reveal(page, page.get_by_label(LABELS.get(key, key), exact=True))  # the workbench
        control.evaluate(OPEN_DETAILS)
        if isinstance(value, bool):
            control.set_checked(value)
        elif control.evaluate("e => e.tagName") == "SELECT":
            control.select_option(value)
        else:
            control.fill(str(value))
    # Python's check of the new values is back (what shows and hides with them is drawn): on a
    # busy machine the next action would otherwise see the form as it was. settled=False: act
    # at once, as a learner who clicks on before Python has answered.
    if settled:
        page.evaluate("() => window.decodelab.settled()")


def generate(page, **values):
    set_fields(page, **values)
    page.wait_for_selector("html[data-state=ready]")  # else Generate is ignored, not queued
    reveal(page, "#generate").click()
    return settle(page)


def generated_text(page):
    return page.locator("#text-gen").inner_text()


def finish_text(page):
    return page.get_by_role("region", name="Finish reason").inner_text()


def finish_code(page):
    """The finish reason as the trace says it, folded under the sentence ("In the trace")."""
    return page.locator("#finish-code").text_content()


LABELS = {"Top_k": "Top-k", "Top_p": "Top-p", "Min_p": "Min-p", "Repetition_penalty":
          "Repetition penalty", "Max_new_tokens": "Max new tokens", "Min_new_tokens":
          "Min new tokens", "Stop_strings": "Stop strings", "Ignore_EOS": "Ignore EOS",
          "Include_stop_string": "Include stop string", "Slow_motion": "Slow motion",
          "Token_healing": "Token healing", "JSON_mode": "JSON mode", "JSON_depth": "JSON depth"}
DEFAULTS = dict(Dataset="names", Tokenizer="chars", Token_healing=False, Prompt="", Seed=1, Temperature=1, Greedy=False, Top_k=0,
                Top_p=1, Min_p=0, Repetition_penalty=1, Order="temperature-first",
                Max_new_tokens=50, Min_new_tokens=0, Stop_strings="", Ignore_EOS=False,
                Include_stop_string=False, JSON_mode=False)


def shows(page, key, value) -> bool:
    """Does the control labelled by `key` show `value` already? (Read without touching it.)"""
    control = page.get_by_label(LABELS.get(key, key), exact=True)
    if isinstance(value, bool):
        return control.is_checked() == value
    return control.input_value() == str(value)


def reset(page, **values):
    """The form at DEFAULTS but for `values`, in DEFAULTS' order: each of `values` set as a
    learner sets it, and of the rest only the controls that show something else by then (a
    control set takes Chromium a few frames; one read, a message)."""
    page.wait_for_selector("html[data-state=ready]")  # whatever the last test left running
    for key, value in {**DEFAULTS, **values}.items():
        if key in values or not shows(page, key, value):
            set_fields(page, **{key: value})


def test_python_starts_before_the_page_script_has_loaded(chromium, base_url):
    # app.js (and so its modules) held back until the worker (prestart.js) has asked for
    # Python's runtime: had the worker waited for app.js, that request would never come. What
    # the worker says meanwhile, "ready" included if it comes first, reaches the page later.
    context = chromium.new_context()
    held = []
    try:
        context.route("**/app.js", lambda route: held.append(route))  # answered below
        page = record_errors(context.new_page())
        with context.expect_event("request", lambda r: r.url.endswith("/pyodide.asm.wasm"),
                                  timeout=BOOT_TIMEOUT_MS):
            page.goto(base_url, wait_until="commit")
        while not held:  # the page asks for app.js too, whenever its parser gets there
            page.wait_for_timeout(50)
        assert page.evaluate("() => window.decodelab === undefined")  # app.js has not run
        held[0].continue_()
        wait_ready(page)
        result = page.evaluate("s => window.decodelab.generate(s)", {"seed": 3, "max_new_tokens": 12})
        assert result["status"] == "done", result
        assert page.errors == []
    finally:
        context.close()


def test_shell_first_then_ready_with_phases_and_nothing_from_outside(fresh_page):
    page = fresh_page
    assert page.get_attribute("html", "data-state") in ("loading", "ready")
    assert page.get_by_role("heading").first.is_visible()
    assert page.locator("progress").count() >= 1
    wait_ready(page)
    # every start-up phase is done, and each was timed; the warm-up run of each model comes just
    # after ready, and says when it has ended
    phases = page.evaluate("() => [...document.querySelectorAll('[data-phase]')]"
                           ".map(li => [li.dataset.phase, li.dataset.state])")
    assert phases == [[p, "done"] for p in ("runtime", "numpy", "decodelab", "assets")]
    page.wait_for_function("() => window.decodelab.timings.warmup_ms !== undefined")
    timings = page.evaluate("() => window.decodelab.timings")
    assert all(timings[f"{p}_ms"] > 0 for p in ("runtime", "numpy", "decodelab", "assets", "warmup"))
    assert timings["imported_after_snapshot"] == [], timings  # snapshot.js SNAPSHOT_MODULES
    for name in ("Generate", "Export trace", "Stop"):
        assert page.get_by_role("button", name=name, exact=True).count() == 1
    for label in ("Model", "Dataset", "Prompt", "Seed", "Temperature", "Greedy", "Top-k", "Top-p",
                  "Max new tokens", "Stop strings"):
        assert page.get_by_label(label, exact=True).is_enabled(), label
    assert page.get_by_role("region", name="Generated text").is_visible()
    assert page.get_by_role("region", name="Finish reason").is_visible()
    assert page.evaluate("() => window.decodelab.info.datasets.names.vocab.length") == 27
    assert page.guard.blocked == []
    assert page.errors == []


def test_same_seed_same_text_other_seed_different_text(app):
    reset(app, Seed=5, Max_new_tokens=40, Ignore_EOS=True)
    generate(app)
    first = generated_text(app)
    assert len(first) == 40
    generate(app, Seed=5)
    assert generated_text(app) == first
    generate(app, Seed=6)
    assert generated_text(app) != first


def test_end_of_sequence_finish(app):
    reset(app, Seed=3)
    generate(app)
    assert "end-of-sequence" in finish_text(app)
    assert "<eos>" not in generated_text(app)


def test_length_finish_says_output_may_be_incomplete(app):
    reset(app, Seed=3, Max_new_tokens=5, Ignore_EOS=True)
    generate(app)
    text = finish_text(app)
    assert "limit of 5 new tokens" in text and "incomplete" in text
    assert len(generated_text(app)) == 5


def test_stop_string_finish_cuts_the_text(app):
    reset(app, Dataset="prose", Prompt="The ", Seed=3, Max_new_tokens=400, Stop_strings="e")
    generate(app)
    assert "stop string" in finish_text(app)
    assert "e" not in generated_text(app)


def test_bad_input_message_next_to_field_and_page_keeps_working(app):
    reset(app, Seed=4, Max_new_tokens=12, Ignore_EOS=True)
    generate(app)
    good = generated_text(app)
    for label, value, words in (("Temperature", "-1", "Temperature must be"),
                                ("Top-p", "1.5", "Top-p must be"),
                                ("Top-k", "-3", "Top-k must be"),
                                ("Max new tokens", "100000", "Max new tokens must be"),
                                ("Seed", "1.5", "Seed must be")):
        field = app.get_by_label(label, exact=True)
        field.fill(value)
        app.get_by_role("button", name="Generate", exact=True).click()
        settle(app)  # Python checks the settings: its answer is the run's
        described = field.get_attribute("aria-describedby") or ""
        messages = " ".join(app.locator(f"#{i}").inner_text() for i in described.split())
        assert words in messages, (label, messages)
        assert field.get_attribute("aria-invalid") == "true"
        assert generated_text(app) == good  # the last good output stays
        reset(app, Seed=4, Max_new_tokens=12, Ignore_EOS=True)
    # a prompt outside the vocabulary is caught by Python (the tokenizer knows the vocabulary)
    set_fields(app, Prompt="ZQ!")
    app.get_by_role("button", name="Generate", exact=True).click()
    app.wait_for_function("() => document.body.innerText.includes('never seen')")
    assert generated_text(app) == good
    reset(app, Seed=4, Max_new_tokens=12, Ignore_EOS=True)
    generate(app)
    assert generated_text(app) == good
    assert app.errors == []


def test_clicking_a_token_shows_that_step(app):
    reset(app, Seed=8, Max_new_tokens=10, Ignore_EOS=True, Temperature=0.7, Top_k=5)
    generate(app)
    tokens = app.locator("#text-gen [data-step]")
    assert tokens.count() == 10
    tokens.nth(3).click()
    inspector = app.locator("#inspector")
    assert "Step 4 of 10" in inspector.inner_text()
    assert "removed" in inspector.inner_text()  # top-k 5 removes candidates, said in words


def cli_trace(**settings):
    args = [sys.executable, "-m", "decodelab", "generate", "--json"]
    for key, value in settings.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, list):
            for v in value:
                args += [flag, v]
        else:
            args += [flag, str(value)]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "py"))
    out = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return json.loads(out.stdout)


def assert_same_trace(a, b, tol=1e-6):
    if isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, abs=tol)
    elif isinstance(a, dict):
        assert set(a) == set(b)
        for k in a:
            assert_same_trace(a[k], b[k], tol)
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same_trace(x, y, tol)
    else:
        assert a == b


def test_exported_trace_equals_the_cli_trace(app, tmp_path):
    reset(app, Dataset="prose", Prompt="A ", Seed=21, Temperature=0.8, Top_k=12, Top_p=0.9,
          Max_new_tokens=30, Stop_strings="zz\nqq", Repetition_penalty=1.3)
    generate(app)
    with app.expect_download() as download:
        app.get_by_role("button", name="Export trace", exact=True).click()
    path = tmp_path / "trace.json"
    download.value.save_as(path)
    exported = json.loads(path.read_text())
    expected = cli_trace(model="bigram", dataset="prose", prompt="A ", seed=21, temperature=0.8,
                         top_k=12, top_p=0.9, max_new_tokens=30, stop=["zz", "qq"],
                         repetition_penalty=1.3)
    assert exported["text"] == generated_text(app)
    assert_same_trace(exported, expected)


def test_stop_button_cancels_a_long_run(app):
    # The transformer checking its cache at every step (a full recomputation each time) makes a
    # few hundred tokens a second on a quiet machine, so 10,000 take tens of seconds: Stop lands
    # mid-run unless a busy machine holds the click up for that long. (A bigram run of 10,000
    # is over in about a second, and the click could come after it.)
    reset(app, Model="transformer", Seed=2, Max_new_tokens=10000, Ignore_EOS=True)
    app.get_by_label("Cache check", exact=True).set_checked(True)
    try:
        app.get_by_role("button", name="Generate", exact=True).click()
        app.wait_for_function("() => document.querySelectorAll('#text-gen [data-step]').length > 3")
        app.get_by_role("button", name="Stop", exact=True).click()
        settle(app)
        assert "Stopped by you" in finish_text(app)
        assert 3 < len(generated_text(app)) < 10000
    finally:
        set_fields(app, Model="bigram")


def test_train_on_pasted_text(app):
    app.get_by_text("Train on your own text").click()
    app.get_by_label("Your text", exact=True).fill("abba\nbaab\nabab\n" * 20)
    app.get_by_role("button", name="Train bigram").click()
    app.wait_for_function("() => window.decodelab.info && document.querySelector('#dataset')"
                          ".selectedOptions[0].textContent.includes('Your text')")
    generate(app, Seed=1, Max_new_tokens=30, Ignore_EOS=True, Prompt="ab")
    text = generated_text(app)
    assert len(text) == 30 and set(text) <= {"a", "b"}  # 30 tokens, EOS ignored: never empty
    # bad training text: a message next to the box, the trained dataset stays
    app.get_by_label("Your text", exact=True).fill("x")
    app.get_by_role("button", name="Train bigram").click()
    app.wait_for_function("() => document.body.innerText.includes('at least 2 characters')")
    reset(app)


def test_no_request_left_the_origin(app):
    assert app.guard.blocked == []


def test_a_refused_generate_says_so_next_to_the_button_and_keeps_the_last_text(app):
    reset(app, Seed=3, Max_new_tokens=12, Ignore_EOS=True)
    generate(app)
    before = generated_text(app)
    set_fields(app, Top_p=3)
    app.get_by_role("button", name="Generate", exact=True).click()
    refused = app.locator("#run-refused")
    refused.wait_for(state="visible")
    assert refused.inner_text() == ("Not generated: change Top-p as its message says, then "
                                    "try again. The text below is from the last run.")
    assert app.locator("#top_p-error").is_visible()
    assert generated_text(app) == before
    reset(app, Seed=3, Max_new_tokens=12, Ignore_EOS=True)
    generate(app)
    assert not refused.is_visible()
    reset(app)


def test_a_run_asked_by_script_shows_its_settings_in_the_form(app):
    """window.decodelab.generate runs settings the form did not hold: once it starts, the form
    shows what ran (as Python completed it), so the next Generate repeats it."""
    reset(app, Seed=1, Max_new_tokens=30)
    result = app.evaluate("s => window.decodelab.generate(s)",
                          {"seed": 9, "max_new_tokens": 14, "ignore_eos": True, "top_k": 5})
    assert result["status"] == "done" and result["steps"] == 14
    settle(app)
    assert app.get_by_label("Seed", exact=True).input_value() == "9"
    assert app.get_by_label("Max new tokens", exact=True).input_value() == "14"
    assert app.get_by_label("Top-k", exact=True).input_value() == "5"
    assert app.get_by_label("Ignore EOS", exact=True).is_checked()
    text = generated_text(app)
    generate(app)  # the form as it now stands: the same run again
    assert generated_text(app) == text
    reset(app)
