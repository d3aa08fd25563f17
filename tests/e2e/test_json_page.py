"""Answers with a shape in the page: JSON mode as a control and a pipeline stage (the same
trace as the CLI), every card answer classified next to the finish reason, one card four ways,
valid JSON against budget and temperature (the same numbers as the CLI), and bad JSON settings
refused by name while the page keeps working."""

import json

from tests.e2e.test_page import (
    assert_same_trace,
    cli_trace,
    finish_code,
    generate,
    reset,
)
from tests.e2e.conftest import reveal, wait_ready
from tests.e2e.test_tools_page import cli_json

PROSE = dict(Dataset="prose", Tokenizer="bpe", Model="transformer")
TASKS = dict(Dataset="tasks", Tokenizer="bpe", Model="transformer")


def page_trace(page):
    return json.loads(page.evaluate("() => window.decodelab.trace()"))


def sample_card(page):
    return page.evaluate("() => window.decodelab.info.sample_card")


def test_json_mode_is_a_stage_of_the_pipeline_and_equals_the_cli(app):
    reset(app, **PROSE, Prompt="", Seed=3, Temperature=2, Max_new_tokens=40, JSON_mode=True)
    generate(app)
    trace = page_trace(app)
    expected = cli_trace(model="transformer", dataset="prose", tokenizer="bpe", prompt="",
                         seed=3, temperature=2, max_new_tokens=40, json_mode=True)
    assert_same_trace(trace, expected)
    assert trace["settings"]["json_mode"] is True
    assert trace["json"]["status"] in ("valid", "incomplete")
    assert all("grammar" in s for s in trace["steps"])
    verdict = app.locator("#json-verdict")
    assert verdict.is_visible() and verdict.get_attribute("data-status") == trace["json"]["status"]
    # the step view names the grammar's stage, with the numbers of the step's record
    app.locator("#text-gen [data-step='1']").click()
    app.locator("#pipeline > summary").click()
    app.wait_for_selector("#pipeline[data-state=ready]")
    words = app.locator("#pipeline").inner_text()
    app.locator("#pipeline > summary").click()
    g = trace["steps"][1]["grammar"]
    assert "Masked by the JSON grammar" in words and f"The other {g['removed_count']}" in words


def test_a_card_answer_is_classified_valid_or_cut_by_the_budget(app):
    card = sample_card(app)
    reset(app, **TASKS, Prompt=card, Greedy=True, Max_new_tokens=40)
    generate(app)
    assert page_trace(app)["json"]["status"] == "valid"
    assert app.locator("#json-verdict").inner_text() == "Valid JSON: one complete object."
    reset(app, **TASKS, Prompt=card, Greedy=True, Max_new_tokens=6)
    generate(app)
    verdict = app.locator("#json-verdict").inner_text()
    assert verdict.startswith("Incomplete JSON: the length budget of 6 new tokens ran out")
    assert "not a model error" in verdict
    assert finish_code(app) == "finish_reason length · stop_reason null"
    # an arithmetic question is not meant to be JSON: no verdict
    reset(app, **TASKS, Prompt="What is 12 plus 7?", Greedy=True, Max_new_tokens=40)
    generate(app)
    assert app.locator("#json-verdict").is_hidden()


def test_bad_json_settings_are_named_and_the_page_keeps_working(app):
    reset(app, Dataset="names", Tokenizer="chars", Model="bigram", JSON_mode=True)
    app.get_by_role("button", name="Generate", exact=True).click()
    error = app.locator("#json_mode-error")
    error.wait_for()
    assert "vocabulary has no" in error.inner_text() and "'{'" in error.inner_text()
    wait_ready(app)  # the field's own check can show the error before Generate has finished
    bad = app.evaluate("""() => window.decodelab.generate({dataset: 'prose', tokenizer: 'bpe',
        model: 'bigram', json_mode: true, json_max_depth: 40})""")
    assert bad["status"] == "invalid" and bad["errors"][0]["field"] == "json_max_depth"
    assert "from 1 to 32" in bad["errors"][0]["message"]
    reset(app, **{**PROSE, "Model": "bigram"}, Seed=2, Max_new_tokens=20, JSON_mode=True)
    generate(app)
    assert page_trace(app)["json"]["status"] in ("valid", "incomplete")


def test_one_card_four_ways(app):
    reveal(app, "#shapes")
    app.locator("#shapes-run").click()
    cards = app.locator("#shapes-out .shape-way")
    cards.first.wait_for(timeout=60000)
    assert cards.count() == 4
    statuses = [cards.nth(i).get_attribute("data-status") for i in range(4)]
    assert statuses[0] == "valid" and statuses[1] == "incomplete" and statuses[3] != "malformed"
    assert "ran out" in cards.nth(1).inner_text()
    # a question that is not a card is refused next to its field
    app.locator("#shapes-question").fill("What is 1 plus 2?")
    app.locator("#shapes-run").click()
    app.locator("#shapes-question-error").wait_for()
    assert "card question" in app.locator("#shapes-question-error").inner_text()
    assert cards.count() == 4  # the last answers stay


def test_the_validity_experiment_equals_the_cli_and_names_bad_fields(app):
    reveal(app, "#validity")
    app.locator("#validity-budgets").fill("8, 0")
    app.locator("#validity-run").click()
    app.locator("#validity[data-state=invalid]").wait_for()
    assert "entry 2" in app.locator("#validity-budgets-error").inner_text()
    app.locator("#validity-temps").fill("0, 2")
    app.locator("#validity-budgets").fill("8, 40")
    app.locator("#validity-cards").fill("2")
    app.locator("#validity-samples").fill("2")
    app.locator("#validity-run").click()
    app.locator("#validity[data-state=done]").wait_for(timeout=120000)
    result = app.evaluate("() => window.decodelab.lesson.shapes.last().validity")
    expected = cli_json("validity", temperatures="0, 2", budgets="8, 40", cards=2,
                        samples_per_question=2)
    assert_same_trace(result, expected)
    table = app.locator("#validity-results table")
    assert table.locator("tbody tr").count() == 4
    assert result["findings"][0]["text"] in app.locator("#validity-results .xp-takeaway").inner_text()
