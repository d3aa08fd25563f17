"""Shareable state and exports, in headless Chromium: every setting lives in the address, a
copied link reproduces the run, a link's bad settings are named while the rest apply, and the
CSV and the command line describe the same run as the exported trace (the command is run)."""

import csv
import io
import json
import os
import shlex
import subprocess
import sys

import pytest

from tests.e2e.conftest import ROOT, open_page, wait_ready
from tests.e2e.test_page import (
    assert_same_trace,
    generated_text,
    reset,
    set_fields,
    settle,
)


def trace_of(page):
    return json.loads(page.evaluate("() => window.decodelab.trace()"))


def wait_run(page):
    """Wait for the run a link started by itself (run=true) and return what it resolved to."""
    page.wait_for_function("() => window.decodelab.lastRun !== null")
    return settle(page)


def test_copied_link_reproduces_the_run(chromium, base_url, app):
    reset(app, Dataset="prose", Prompt="It's ", Seed=11, Temperature=0.7, Top_k=12, Top_p=0.9,
          Order="filter-first", Repetition_penalty=1.2, Max_new_tokens=40, Stop_strings="zz\nq u")
    app.get_by_role("button", name="Generate", exact=True).click()
    settle(app)
    text, trace = generated_text(app), trace_of(app)
    assert text
    app.context.grant_permissions(["clipboard-read", "clipboard-write"])
    app.get_by_role("button", name="Copy link", exact=True).click()
    app.wait_for_function("() => document.querySelector('#share-status').textContent.includes('copied')")
    link = app.evaluate("() => navigator.clipboard.readText()")
    assert link == app.locator("#share-link").input_value()
    assert link.startswith(base_url) and "run=true" in link and "stop=zz&stop=q+u" in link

    other = wait_ready(open_page(chromium, link))
    try:
        result = wait_run(other)
        assert result["status"] == "done"
        assert generated_text(other) == text
        assert_same_trace(trace_of(other), trace, tol=0)
        assert other.get_by_label("Order", exact=True).input_value() == "filter-first"
        assert other.get_by_label("Stop strings", exact=True).input_value() == "zz\nq u"
        assert other.locator("#link-notice").is_hidden()
        assert other.errors == [] and other.guard.blocked == []
    finally:
        other.context.close()


def test_the_address_follows_the_form_and_survives_a_reload(fresh_page):
    page = wait_ready(fresh_page)
    set_fields(page, Seed=1234, Greedy=True)
    # the address is rewritten 250 ms after the latest change: when the two changes come
    # further apart than that (a busy machine), it shows the seed before the greedy switch
    page.wait_for_function("() => location.search.includes('seed=1234') && "
                           "location.search.includes('greedy=true')")
    assert "run=" not in page.url
    page.reload()
    wait_ready(page)
    assert page.get_by_label("Seed", exact=True).input_value() == "1234"
    assert page.get_by_label("Greedy", exact=True).is_checked()
    assert page.evaluate("() => window.decodelab.lastRun") is None  # no run=true: nothing ran


def test_bad_link_settings_are_named_and_the_rest_applies(chromium, base_url):
    query = ("?seed=7&top_p=1.5&greedy=maybe&temperature=warm&frobnicate=1&theme=purple"
             "&dataset=names&prompt=ZZ!&max_new_tokens=8&ignore_eos=yes&seed=8&run=true")
    page = wait_ready(open_page(chromium, base_url, path=query))
    try:
        notice = page.locator("#link-notice")
        notice.wait_for()
        words = notice.inner_text()
        for expected in ("Top-p must be a number greater than 0 and at most 1 (1 means off); got 1.5.",
                         "Greedy must be true or false; got 'maybe'.",
                         "Temperature must be a number from 0 to 100 (0 means greedy); got 'warm'.",
                         "Unknown setting 'frobnicate' in the link; known settings are model, dataset,",
                         "theme must be one of light, dark, auto; got 'purple'.",
                         "Prompt has characters this model has never seen: '!' 'Z'.",
                         "Seed is given 2 times in the link"):
            assert expected in words, (expected, words)
        # the rest applied, the bad ones kept their defaults, and the run went ahead
        assert page.get_by_label("Max new tokens", exact=True).input_value() == "8"
        assert page.get_by_label("Ignore EOS", exact=True).is_checked()
        assert page.get_by_label("Top-p", exact=True).input_value() == "1"
        assert page.get_by_label("Seed", exact=True).input_value() == "42"
        assert page.get_by_label("Prompt", exact=True).input_value() == ""
        result = wait_run(page)
        assert result["status"] == "done" and len(generated_text(page)) == 8
        assert page.errors == []
    finally:
        page.context.close()


def test_the_python_table_words_every_link_message(app):
    """The link's messages come from the same field table as Python's own checks."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "py"))
    code = ("import json,sys; from decodelab.core.rules.settings import validate; from decodelab.fields import FieldErrors\n"
            "try: validate(json.loads(sys.argv[1]))\n"
            "except FieldErrors as e: print(json.dumps([[x.field, x.message] for x in e.errors]))")
    raw = {"top_k": "-3", "order": "sideways", "include_stop": "perhaps"}
    out = subprocess.run([sys.executable, "-c", code, json.dumps(raw)], env=env, capture_output=True,
                         text=True, check=True)
    python = dict(json.loads(out.stdout))
    page = app.evaluate("(raw) => window.decodelab.share.check(raw).then((r) => r.errors)", raw)
    js = {e["field"]: e["message"] for e in page}
    assert set(js) == set(python)
    for field, message in python.items():
        # Python quotes the string it was given ('-3'); the page words a number as a number
        assert js[field].replace("'", "") == message.replace("'", ""), field


def download_text(page, button_name, tmp_path, filename):
    with page.expect_download() as download:
        page.get_by_role("button", name=button_name, exact=True).click()
    path = tmp_path / filename
    download.value.save_as(path)
    return path.read_text(encoding="utf-8")


def test_csv_export_holds_every_candidate_of_every_step(app, tmp_path):
    reset(app, Dataset="prose", Prompt="A ", Seed=5, Temperature=1.3, Top_k=6, Max_new_tokens=25,
          Ignore_EOS=True)
    app.get_by_role("button", name="Generate", exact=True).click()
    settle(app)
    trace = json.loads(download_text(app, "Export trace", tmp_path, "trace.json"))
    rows = list(csv.DictReader(io.StringIO(download_text(app, "Export CSV", tmp_path, "steps.csv"))))
    expected = [(step, c) for step in trace["steps"] for c in step["top"]]
    assert len(rows) == len(expected) > 25
    for row, (step, c) in zip(rows, expected):
        assert int(row["step"]) == step["step"] and row["phase"] == step["phase"]
        assert int(row["token_id"]) == c["token_id"] and row["token_text"] == c["token_text"]
        for key in ("p_raw", "p_temp", "p_final"):
            assert float(row[key]) == c[key]
        assert row["kept"] == str(c["kept"]).lower()
        assert row["chosen"] == str(c["token_id"] == step["token_id"]).lower()
        assert float(row["u"]) == step["u"] and float(row["entropy"]) == step["entropy"]
        assert row["tokenizer"] == "chars"
    # spaces and punctuation survive the quoting
    assert any(row["token_text"] == " " for row in rows)


@pytest.mark.parametrize("fields", [
    dict(Dataset="prose", Prompt="-it's \"so\" ", Seed=19, Temperature=0.9, Top_p=0.8, Min_p=0.05,
         Repetition_penalty=1.4, Max_new_tokens=30, Stop_strings="xyz\n'q", Include_stop_string=True),
    dict(Dataset="names", Prompt="", Seed=0, Greedy=True, Max_new_tokens=7, Min_new_tokens=3),
])
def test_command_line_reproduces_the_exported_trace(app, tmp_path, fields):
    reset(app, **fields)
    app.get_by_role("button", name="Generate", exact=True).click()
    assert settle(app)["status"] == "done"
    exported = json.loads(download_text(app, "Export trace", tmp_path, "trace.json"))
    command = app.locator("#command").inner_text()
    words = shlex.split(command)
    assert words[:4] == ["python3", "-m", "decodelab", "generate"] and words[-1] == "--json"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "py"))
    out = subprocess.run([sys.executable, *words[1:]], capture_output=True, text=True, env=env,
                         cwd=ROOT, check=True)
    assert_same_trace(json.loads(out.stdout), exported)
    assert app.get_by_role("button", name="Copy command", exact=True).is_enabled()
