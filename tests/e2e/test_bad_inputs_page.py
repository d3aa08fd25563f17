"""The bad-input table, page side: what a learner can type or paste, and what a script can hand
the page through its hooks (the same path a host's settings take once checked), in headless
Chromium. The Python and CLI sides are in tests/test_bad_input_table.py, tests/test_cli.py and
tests/test_inputs.py; URL parameters and host messages with markup are in test_hardening.py.

Every case must: show a message next to the field it concerns, naming the field and what is
allowed; leave the last good output on screen; and leave the worker running (no restart, and
the same good run afterwards)."""

import pytest

from tests.e2e.test_page import generate, generated_text, reset, settle

GOOD = dict(Seed=4, Max_new_tokens=12, Ignore_EOS=True)

# (label of the control, what is typed, words the message must hold besides the label)
TYPED = [
    ("Seed", "-5", "whole number from 0"),
    ("Seed", "1.5", "whole number"),
    ("Seed", "1e30", "whole number from 0 to 4294967295"),
    ("Seed", "", "got nothing"),
    ("Seed", "abc", "whole number"),  # a number box takes no letters: it is left empty
    ("Temperature", "-1", "number from 0"),
    ("Temperature", "1e309", "number"),  # too big for a double: the box reports bad input
    ("Temperature", "NaN", "number"),
    ("Temperature", "Infinity", "number"),
    ("Top-k", "-3", "whole number"),
    ("Top-k", "2.5", "whole number"),
    ("Top-p", "0", "greater than 0 and at most 1"),
    ("Top-p", "1.5", "greater than 0 and at most 1"),
    ("Min-p", "2", "from 0 to 1"),
    ("Repetition penalty", "-1", "Repetition penalty must be"),
    ("Max new tokens", "0", "from 1 to 10000"),
    ("Max new tokens", "100000", "from 1 to 10000"),
    ("Max new tokens", "-1", "from 1 to 10000"),
]

# Through window.decodelab.generate: settings straight to Python (wrong types included).
# (settings, field, control id, words)
SCRIPTED = [
    ({"temperature": float("nan")}, "temperature", "temperature", "Temperature must be"),
    ({"temperature": float("inf")}, "temperature", "temperature", "Temperature must be"),
    ({"top_k": "abc"}, "top_k", "top_k", "Top-k must be"),
    ({"seed": []}, "seed", "seed", "Seed must be"),
    ({"seed": {"a": 1}}, "seed", "seed", "Seed must be"),
    ({"max_new_tokens": 1e20}, "max_new_tokens", "max_new_tokens", "Max new tokens must be"),
    ({"top_p": True}, "top_p", "top_p", "Top-p must be"),
    ({"prompt": 12345}, "prompt", "prompt", "Prompt"),
    ({"prompt": "a" * 10000}, "prompt", "prompt", "Prompt"),
    ({"stop": {"a": 1}}, "stop", "stop", "Stop strings"),
    ({"stop": [None, 3]}, "stop", "stop", "Stop strings"),
    ({"stop": [""]}, "stop", "stop", "1 to 100"),
    ({"stop": ["ab"] * 200}, "stop", "stop", "at most 32"),
    ({"stop": ["abcdefghij"], "max_new_tokens": 5}, "stop", "stop", "Max new tokens is 5"),
    ({"dataset": "nope"}, "dataset", "dataset", "Dataset must be one of"),
    ({"model": None}, "model", "model", "Model must be one of"),
    ({"order": "backwards"}, "order", "order", "Order"),
    ({"min_new_tokens": 20, "max_new_tokens": 5}, "min_new_tokens", "min_new_tokens", "Min new tokens"),
]


@pytest.fixture(scope="module")
def page(app):
    reset(app, **GOOD)
    generate(app)
    app.good_text = generated_text(app)
    assert app.good_text
    return app


def message_next_to(page, control_id):
    box = page.locator(f"#{control_id}-error")
    return box.inner_text() if box.is_visible() else ""


def still_good(page):
    assert generated_text(page) == page.good_text  # the last good output stays
    assert page.evaluate("() => window.decodelab.health.restarts") == 0
    assert page.get_attribute("html", "data-state") == "ready"


def type_into(page, label, text):
    control = page.get_by_label(label, exact=True)
    control.fill("")
    if text:
        control.press_sequentially(text)
    return control


@pytest.mark.parametrize("label, typed, words", TYPED, ids=[f"{c[0]}={c[1]!r}" for c in TYPED])
def test_typed_numbers(page, label, typed, words):
    reset(page, **GOOD)
    control = type_into(page, label, typed)
    page.get_by_role("button", name="Generate", exact=True).click()
    settle(page)  # Python checks the settings: its answer is the run's
    control_id = control.get_attribute("id")
    message = message_next_to(page, control_id)
    assert label in message and words in message and "got" in message, message
    assert control.get_attribute("aria-invalid") == "true"
    assert control_id + "-error" in (control.get_attribute("aria-describedby") or "")
    assert page.evaluate("() => window.decodelab.lastRun")["status"] == "invalid"
    still_good(page)


def test_min_new_tokens_above_max(page):
    reset(page, **{**GOOD, "Max_new_tokens": 5, "Min_new_tokens": 10})
    page.get_by_role("button", name="Generate", exact=True).click()
    settle(page)  # Python checks the settings: its answer is the run's
    message = message_next_to(page, "min_new_tokens")
    assert "Min new tokens must be from 0 to Max new tokens (5); got 10." == message
    still_good(page)


@pytest.mark.parametrize("label, text, control_id, words", [
    ("Prompt", "a" * 10000, "prompt", "at most 2000 characters; got 10000"),
    ("Prompt", "ZQ!", "prompt", "never seen"),
    ("Prompt", "é漢😀", "prompt", "never seen"),
    ("Stop strings", "\n".join(f"s{i}" for i in range(200)), "stop", "at most 32 are allowed; got 200"),
    ("Stop strings", "x" * 101, "stop", "each must have 1 to 100"),
], ids=["prompt-10000", "prompt-outside-vocab", "prompt-unicode", "200-stop-strings", "long-stop"])
def test_typed_text(page, label, text, control_id, words):
    reset(page, **GOOD)
    page.get_by_label(label, exact=True).fill(text)
    page.get_by_role("button", name="Generate", exact=True).click()
    settle(page)  # Python checks the settings: its answer is the run's
    message = message_next_to(page, control_id)
    assert label.split()[0] in message and words in message, message
    still_good(page)


def test_a_stop_string_longer_than_the_budget(page):
    reset(page, **{**GOOD, "Max_new_tokens": 5, "Stop_strings": "abcdefghij"})
    page.get_by_role("button", name="Generate", exact=True).click()
    settle(page)  # Python checks the settings: its answer is the run's
    page.wait_for_function("() => !document.querySelector('#stop-error').hidden")
    message = message_next_to(page, "stop")
    assert "Stop strings" in message and "Max new tokens is 5" in message, message
    still_good(page)


def test_empty_lines_in_stop_strings_are_ignored(page):
    reset(page, **{**GOOD, "Stop_strings": "\n\n\n"})
    assert generate(page)["status"] == "done"
    assert generated_text(page) == page.good_text  # same settings otherwise: same text
    assert message_next_to(page, "stop") == ""


@pytest.mark.parametrize("settings, field, control_id, words", SCRIPTED,
                         ids=[f"{c[1]}={str(list(c[0].values())[0])[:12]!r}" for c in SCRIPTED])
def test_settings_from_a_script(page, settings, field, control_id, words):
    reset(page, **GOOD)
    base = {"seed": 4, "max_new_tokens": 12, "ignore_eos": True}
    result = page.evaluate("s => window.decodelab.generate(s)", {**base, **settings})
    assert result["status"] == "invalid"
    assert field in [e["field"] for e in result["errors"]], result
    message = message_next_to(page, control_id)
    assert words in message, (message, result)
    still_good(page)


# --- pasted training text ---------------------------------------------------------------------

def train(page, text, by_script=False):
    if not page.get_by_label("Your text", exact=True).is_visible():
        page.get_by_text("Train on your own text").click()
    box = page.get_by_label("Your text", exact=True)
    if by_script:  # megabytes: set at once, as a paste would, then say it changed
        box.evaluate("(e, t) => { e.value = t; e.dispatchEvent(new Event('input', {bubbles: true})); }", text)
    else:
        box.fill(text)
    page.get_by_role("button", name="Train bigram").click()
    page.wait_for_function("() => !document.querySelector('#train-button').disabled")
    return message_next_to(page, "train-text")


JUNK = "".join(chr(c) for c in range(1, 256) if c not in (10, 13)) * (5_000_000 // 253)


@pytest.mark.parametrize("text, by_script, words", [
    ("", False, "at least 2 characters"),
    ("x", False, "at least 2 characters"),
    ("\n \n\t\n", False, "at least 2 characters"),
    ("ab\x00\x07cd\n", True, "control or undecodable characters"),
    (JUNK, True, "too long"),
    ("".join(chr(0x4E00 + i) for i in range(600)), False, "at most 500 are allowed"),
], ids=["empty", "one-char", "whitespace", "binary", "5MB-junk", "600-distinct"])
def test_bad_training_text(page, text, by_script, words):
    reset(page, **GOOD)
    message = train(page, text, by_script)
    assert "Training text" in message and words in message, message[:300]
    assert page.locator("#dataset").input_value() == "names"  # the chosen dataset stays
    still_good(page)


def test_the_page_still_works_after_the_whole_table(page):
    reset(page, **GOOD)
    assert generate(page)["status"] == "done"
    assert generated_text(page) == page.good_text
    assert page.evaluate("() => window.decodelab.health.restarts") == 0
    assert page.errors == []
