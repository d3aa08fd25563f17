"""Tokens in the page: the Tokenizer control, token boundaries, a stop string that falls inside
a token, token healing, the prefill's rows, a BPE run's link and its trace against the CLI's."""

import json

from tests.e2e.conftest import open_page, reveal, wait_ready
from tests.e2e.test_page import (
    assert_same_trace,
    cli_trace,
    generate,
    generated_text,
    reset,
    set_fields,
    settle,
)

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


def test_a_token_that_starts_with_a_space_is_heard_with_its_word(app):
    # a BPE word comes with the space before it: its accessible name says the space and the
    # word (a name of "space" alone, once given at the first character, hid the word)
    reset(app, **BPE, Prompt="The ", Seed=3, Max_new_tokens=20)
    generate(app)
    steps = page_trace(app)["steps"]
    heard = app.evaluate("""() => [...document.querySelectorAll('#text-gen .tok')]
        .map((s) => [Number(s.dataset.step), s.textContent,
                     s.getAttribute('aria-label') || s.textContent])""")
    spaced = [(text, name) for step, text, name in heard
              if text.startswith(" ") and text.strip() and text == steps[step]["piece"]]
    assert spaced, heard  # the case has words after a space
    for text, name in spaced:
        assert name.startswith("space, ") and text.strip() in name, (text, name)
    for step, text, name in heard:
        if text == " ":
            assert name == "space"


def test_the_chosen_badge_is_whole_beside_a_long_token(app):
    # a BPE word is wide: the candidates' first column still shows the "chosen" badge whole
    # (it goes under the token when both do not fit), at every step of the run
    reset(app, **BPE, Prompt="The ", Seed=3, Max_new_tokens=20)
    generate(app)
    steps = page_trace(app)["steps"]
    app.locator("#text-gen [data-step]").first.click()
    longest = 0
    for k in range(len(steps)):
        app.locator("#inspector .cands tr.chosen").first.wait_for()
        cell = app.locator("#inspector .cands tr.chosen .tok-cell")
        badge, box = cell.locator(".badge").bounding_box(), cell.bounding_box()
        assert badge["x"] >= box["x"] and badge["x"] + badge["width"] <= box["x"] + box["width"] \
            + 0.5, (k, steps[k]["token_text"], badge, box)
        assert badge["y"] >= box["y"] and badge["y"] + badge["height"] <= box["y"] + \
            box["height"] + 0.5, (k, badge, box)
        longest = max(longest, len(steps[k]["token_text"]))
        if k < len(steps) - 1:
            app.locator("#next-step").click()
            app.wait_for_function("k => document.querySelector('#inspector').textContent"
                                  ".includes(`Step ${k + 2} of`)", arg=k)
    assert longest >= 4  # the case has a token ("lass") whose badge was cut at the edge


def test_a_stop_string_inside_a_token_cuts_it_and_the_inspector_says_where(app):
    reset(app, **BPE, Prompt="The ", Seed=3, Max_new_tokens=40, Stop_strings="e")
    generate(app)
    trace = page_trace(app)
    assert trace["finish_reason"] == "stop" and trace["stop_reason"] == "e"
    steps = trace["steps"]
    at = steps[-1]["stop_at"]
    raw = [bytes.fromhex(s["token_bytes"]) for s in steps]
    # stop_at is where the visible text ends in the generated bytes: the "e" comes right after
    visible = len(trace["text"].encode("utf-8"))
    assert sum(len(r) for r in raw[:at["step"]]) + at["byte"] == visible
    assert b"".join(raw)[visible:visible + 1] == b"e" and "e" not in trace["text"]
    assert app.locator("#text-cut").is_visible()
    app.locator(f"#text [data-step='{at['step']}']").first.click()
    notes = app.locator("#step-notes").inner_text()
    token = raw[at["step"]]
    assert f"This token is {len(token)} byte" in notes
    if 0 < at["byte"] < len(token):
        assert "a stop string begins inside it" in notes


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
    reveal(app, "#prefill").get_by_role("button", name="Show the rows", exact=True).click()
    table = app.locator("#prefill-out table")
    table.wait_for()
    reply = app.evaluate("() => window.decodelab.lesson.last.prefill")
    assert reply["ok"] and reply["shape"][1] == len(reply["rows"]) == reply["known"] + 1
    assert table.locator("tbody tr").count() == len(reply["rows"])
    assert "not known yet" in table.locator("tbody tr").last.inner_text()
    assert f"[1, {reply['shape'][1]}, 1024]" in table.locator("caption").inner_text()
    # the start mark has one name: "start" here, as in the text box of an empty prompt
    assert table.locator("tbody tr").first.locator("td").first.inner_text() == "start"
    assert reply["rows"][0]["reads"] == "<eos>"


def test_bpe_chosen_with_data_that_lacks_it_brings_data_that_has_it_and_says_so(app):
    reset(app, Dataset="names")
    set_fields(app, Tokenizer="bpe")
    assert app.get_by_label("Dataset", exact=True).input_value() == "prose"
    assert app.locator("#dataset-said").inner_text() == (
        "Byte-level BPE is not made for the names data, so Dataset is now prose, which has it.")
    result = generate(app)
    assert result["status"] == "done" and result["settings"]["tokenizer"] == "bpe"
    reset(app)
    assert not app.locator("#dataset-said").is_visible()


def test_a_link_asking_for_a_tokenizer_the_data_lacks_says_why_in_the_pages_words(chromium, base_url):
    page = wait_ready(open_page(chromium, base_url, "?dataset=names&tokenizer=bpe"))
    try:
        notice = page.locator("#link-notice")
        assert notice.is_visible()
        assert ("Byte-level BPE is learned from the prose and the tasks data only: the names data "
                "is read one character at a time, so with it Tokenizer must be Characters "
                "(chars).") in notice.inner_text()
        # the rest of the link applies; the tokenizer keeps the value that works with it
        assert page.get_by_label("Tokenizer", exact=True).input_value() == "chars"
        assert page.get_by_label("Dataset", exact=True).input_value() == "names"
        assert page.errors == []
    finally:
        page.context.close()


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
