"""Tokens in the page: the Tokenizer control, token boundaries, a stop string that falls inside
a token, token healing, the prefill's rows, a BPE run's link and its trace against the CLI's."""

import json

import pytest

from tests.e2e.test_page import (assert_same_trace, cli_trace, generate, generated_text, reset,
                                 settle)

pytestmark = pytest.mark.browser

BPE = dict(Dataset="prose", Tokenizer="bpe", Model="transformer")


def page_trace(page):
    return json.loads(page.evaluate("() => window.decodelab.trace()"))


def test_a_bpe_run_in_the_page_equals_the_cli_run(app):
    reset(app, **BPE, Prompt="The ", Seed=7, Temperature=0.9, Top_p=0.95, Max_new_tokens=30,
          Stop_strings="zq")
    generate(app)
    trace = page_trace(app)
    expected = cli_trace(model="transformer", dataset="prose", tokenizer="bpe", prompt="The ",
                         seed=7, temperature=0.9, top_p=0.95, max_new_tokens=30, stop=["zq"])
    assert trace["settings"]["tokenizer"] == "bpe"
    assert_same_trace(trace, expected)
    # several characters per step, each step's bytes recorded, the text built from them
    assert len(trace["text"]) > len(trace["steps"])
    assert generated_text(app) == trace["text"]
    pieces = "".join(s["piece"] for s in trace["steps"])
    assert pieces.startswith(trace["text"])


def test_show_tokens_shades_every_other_token(app):
    reset(app, **BPE, Prompt="The ", Seed=3, Max_new_tokens=20)
    generate(app)
    text = app.locator("#text")
    assert "show-tokens" not in (text.get_attribute("class") or "")
    app.get_by_label("Show tokens", exact=True).check()
    assert "show-tokens" in text.get_attribute("class")
    steps = page_trace(app)["steps"]
    spans = app.locator("#text-gen .tok")
    assert spans.count() == sum(1 for s in steps if s["piece"])
    # a span per token, holding exactly what that token added; odd steps tinted
    first = spans.nth(1)
    step = int(first.get_attribute("data-step"))
    assert first.text_content() == steps[step]["piece"]
    assert ("tok-odd" in first.get_attribute("class")) == bool(step % 2)
    bg = app.evaluate("""() => [...document.querySelectorAll('#text-gen .tok')].slice(0, 2)
        .map(s => getComputedStyle(s).backgroundColor)""")
    assert bg[0] != bg[1] and "rgba(0, 0, 0, 0)" not in bg
    app.get_by_label("Show tokens", exact=True).uncheck()


def test_a_stop_string_inside_a_token_cuts_it_and_the_inspector_says_where(app):
    reset(app, **BPE, Prompt="The ", Seed=3, Max_new_tokens=40, Stop_strings="e")
    generate(app)
    trace = page_trace(app)
    assert trace["finish_reason"] == "stop" and trace["stop_reason"] == "e"
    at = trace["steps"][-1]["stop_at"]
    token = bytes.fromhex(trace["steps"][at["step"]]["token_bytes"])
    visible = "The " + trace["text"]
    assert "e" not in trace["text"] and token[at["byte"]:at["byte"] + 1] == b"e"
    assert app.locator("#text-cut").is_visible()
    app.locator(f"#text [data-step='{at['step']}']").first.click()
    notes = app.locator("#step-notes").inner_text()
    if 0 < at["byte"] < len(token):
        assert "a stop string begins inside it" in notes
    assert f"This token is {len(token)} byte" in notes
    assert visible.startswith("The ")


def test_token_healing_takes_back_the_trailing_space(app):
    reset(app, **BPE, Prompt="The man ", Greedy=True, Max_new_tokens=8, Token_healing=True)
    generate(app)
    healed = app.locator("#text-prompt .ptok.healed")
    assert healed.count() == 1 and healed.text_content() == " "
    trace = page_trace(app)
    assert trace["healed"] == " "
    assert bytes.fromhex(trace["steps"][0]["token_bytes"]).startswith(b" ")
    assert not generated_text(app).startswith(" ")  # the space is the prompt's, shown once
    app.locator("#text [data-step='0']").first.click()
    assert "Token healing" in app.locator("#step-notes").inner_text()
    # the step's pipeline shows the mask as its own stage
    app.locator("#pipeline > summary").click()
    app.wait_for_selector("#pipeline[data-state=ready]")
    assert "do not start with ' '" in app.locator("#pipeline").inner_text()
    app.locator("#pipeline > summary").click()
    reset(app, **BPE, Prompt="", Token_healing=True)
    app.get_by_role("button", name="Generate", exact=True).click()
    error = app.locator("#token_healing-error")
    error.wait_for(state="visible")
    assert "empty prompt" in error.inner_text()
    set_healing_off = app.get_by_label("Token healing", exact=True)
    set_healing_off.set_checked(False)


def test_the_prefill_shows_one_row_per_position_and_only_the_last_chooses(app):
    reset(app, **BPE, Prompt="The old man said")
    app.get_by_role("button", name="Show the rows", exact=True).click()
    table = app.locator("#prefill-out table")
    table.wait_for()
    reply = app.evaluate("() => window.decodelab.lesson.last.prefill")
    assert reply["ok"] and reply["shape"][1] == len(reply["rows"]) == reply["known"] + 1
    assert table.locator("tbody tr").count() == len(reply["rows"])
    assert "not known yet" in table.locator("tbody tr").last.inner_text()
    assert f"[1, {reply['shape'][1]}, 1024]" in table.locator("caption").inner_text()


def test_a_tokenizer_the_dataset_lacks_is_refused_next_to_its_field(app):
    reset(app, Dataset="names", Tokenizer="bpe")
    app.get_by_role("button", name="Generate", exact=True).click()
    error = app.locator("#tokenizer-error")
    error.wait_for(state="visible")
    assert "Tokenizer" in error.inner_text() and "chars" in error.inner_text()
    reset(app)
    assert not app.locator("#tokenizer-error").is_visible()


def test_a_link_reproduces_a_bpe_run(app, base_url):
    reset(app, **BPE, Prompt="The ", Seed=11, Max_new_tokens=15, Token_healing=True)
    generate(app)
    first = page_trace(app)
    link = app.evaluate("() => window.decodelab.share.link()")
    assert "tokenizer=bpe" in link and "token_healing" in link
    other = app.context.new_page()
    try:
        other.goto(link)
        other.wait_for_selector("html[data-state=ready]", timeout=120_000)
        other.get_by_role("button", name="Generate", exact=True).click()
        settle(other)
        assert page_trace(other)["steps"] == first["steps"]
    finally:
        other.close()
    reset(app)
