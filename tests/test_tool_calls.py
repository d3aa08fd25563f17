"""The tool-call protocol, driven by a scripted model so every case is exact: where a run stops,
what the runtime appends (and that only that is fed to the model), what the budget counts, what
the trace says, and that the markers' text in a prompt stays text."""

import pytest
from decodelab.core.tokens import bpe
from decodelab.core.tasks import data as tasks, tools
from decodelab.core.tokens.bpe import BPE
from decodelab.core.loops.generate import MAX_TOOL_CALLS, Generation
from decodelab.core.rules.settings import validate
from decodelab.errors import FieldError

from tests.test_token_stops import Scripted

TOK = BPE(bpe.train(["What is 12 plus 7? The answer is 19.", "12+7 0-45"] * 3, 300)) \
    .with_specials(tasks.SPECIALS)
M = TOK.special_ids


def call(text):
    return [M[tasks.CALL]] + TOK.encode(text) + [M[tasks.END_CALL]]


def run(script, **settings):
    model = Scripted(TOK, script)
    raw = {"greedy": True, "tokenizer": "bpe", "prompt": "What is 12 plus 7?", **settings}
    g = Generation(model, validate(raw)).run()
    return g, g.trace(), model.log


def tool_ids(reply):
    return [M[tasks.RESULT]] + TOK.encode(reply) + [M[tasks.END_RESULT]]


def test_the_prompt_is_the_question_in_its_template_and_markup_in_it_stays_text():
    g, trace, log = run([0], prompt="Add <|call|>1+1<|/call|> please")
    ids = log[0][1]
    assert ids[0] == M[tasks.QUESTION] and ids[-1] == M[tasks.ANSWER]
    assert not any(TOK.is_special(i) for i in ids[1:-1])  # the markup is characters
    assert TOK.decode(ids[1:-1]) == "Add <|call|>1+1<|/call|> please"
    assert all(not TOK.is_special(i) for i in TOK.encode("".join(tasks.SPECIALS)))
    # only the package's own corpus text may hold markers
    assert TOK.encode_marked(tasks.CALL) == [M[tasks.CALL]]
    with pytest.raises(FieldError) as e:
        run([0], prompt="  ")
    assert e.value.field == "prompt"


def test_tools_on_appends_the_result_and_resumes_from_the_same_session():
    answer = TOK.encode("The answer is 19.")
    g, trace, log = run(call("12+7") + answer, max_new_tokens=len(call("12+7") + answer) + 1)
    assert trace["tool_calls"] == [{"call": "12+7", "result": "19", "error": None, "by": "tool"}]
    assert trace["text"] == "The answer is 19."
    assert (trace["finish_reason"], trace["stop_reason"]) == ("stop", "eos")
    # the closing token and the tool's tokens go in one pass; nothing else is fed twice
    appended = [entry for entry in log if entry[0] == "append"]
    assert appended == [("append", [M[tasks.END_CALL]] + tool_ids("19"))]
    assert [e[0] for e in log].count("prefill") == 1
    sources = [r["source"] for r in trace["steps"]]
    n_call = len(call("12+7"))
    assert sources == ["model"] * n_call + ["tool"] * len(tool_ids("19")) + \
        ["model"] * (len(answer) + 1)
    assert [r["step"] for r in trace["steps"]] == list(range(len(sources)))
    tool_steps = [r for r in trace["steps"] if r["source"] == "tool"]
    assert [r["token_id"] for r in tool_steps] == tool_ids("19")
    assert all(r["u"] is None and r["prob"] is None and r["part"] == "result" for r in tool_steps)
    assert {r["part"] for r in trace["steps"][:n_call]} == {"call"}
    assert "".join(r["emit"] for r in trace["steps"]) == "The answer is 19."


def test_the_budget_counts_the_model_tokens_only():
    answer = TOK.encode("The answer is 19.")
    exact = len(call("12+7") + answer) + 1  # the model's tokens, EOS included
    _, trace, _ = run(call("12+7") + answer, max_new_tokens=exact)
    assert trace["finish_reason"] == "stop"
    _, trace, _ = run(call("12+7") + answer, max_new_tokens=exact - 1)
    assert trace["finish_reason"] == "length" and trace["text"] == "The answer is 19."


def test_tools_off_ends_the_run_at_the_call():
    g, trace, log = run(TOK.encode("Let me see.") + call("12+7") + TOK.encode("x"), tools="off")
    assert (trace["finish_reason"], trace["stop_reason"]) == ("tool_calls", "tool_call")
    assert trace["tool_calls"] == [{"call": "12+7", "result": None, "error": None, "by": None}]
    assert trace["text"] == "Let me see."
    assert not any(e[0] == "append" for e in log)
    assert trace["steps"][-1]["token_id"] == M[tasks.END_CALL]


def test_guess_appends_only_the_result_marker_and_the_model_writes_the_result():
    script = call("12+7") + TOK.encode("20") + [M[tasks.END_RESULT]] + TOK.encode("It is 20.")
    _, trace, log = run(script, tools="guess")
    assert [e for e in log if e[0] == "append"] == [("append", [M[tasks.END_CALL],
                                                                M[tasks.RESULT]])]
    assert trace["tool_calls"] == [{"call": "12+7", "result": "20", "error": None, "by": "model"}]
    assert trace["text"] == "It is 20."


def test_a_hostile_call_gets_its_error_as_the_result_and_the_run_goes_on():
    script = call("__import__('os')") + TOK.encode("ok")
    _, trace, log = run(script)
    entry = trace["tool_calls"][0]
    assert entry["result"] is None and "unknown name '__import__'" in entry["error"]
    appended = [e for e in log if e[0] == "append"][0][1]
    assert TOK.decode(appended) == "error: " + entry["error"]
    assert trace["text"] == "ok" and trace["finish_reason"] == "stop"


def test_calls_beyond_the_cap_end_the_run_with_a_stated_reason():
    script = sum((call(f"{i}+1") for i in range(MAX_TOOL_CALLS + 2)), [])
    _, trace, _ = run(script, max_new_tokens=500)
    assert (trace["finish_reason"], trace["stop_reason"]) == ("tool_calls", "tool_call_limit")
    assert [c["result"] for c in trace["tool_calls"]] == \
        [str(i + 1) for i in range(MAX_TOOL_CALLS)] + [None]
    assert "at most 4 tool calls" in trace["tool_calls"][-1]["error"]


def test_a_budget_that_ends_inside_a_call_leaves_it_open_and_unrun():
    _, trace, log = run(call("123+456"), max_new_tokens=4)
    assert trace["finish_reason"] == "length" and trace["tool_calls"] == []
    assert trace["open_call"] == TOK.decode(call("123+456")[1:4])
    assert not any(e[0] == "append" for e in log)
    # the budget ends on the closing token: the call is complete, but nothing would read it
    _, trace, log = run(call("1+2"), max_new_tokens=len(call("1+2")))
    assert trace["finish_reason"] == "length" and trace["open_call"] is None
    assert trace["tool_calls"] == [{"call": "1+2", "result": None, "error": None, "by": None}]


def test_stop_strings_see_the_answer_only():
    # "19" is in the call's result, but the stop string only watches the answer text
    script = call("12+7") + TOK.encode("The answer is 19. More")
    _, trace, _ = run(script, stop=["19"], max_new_tokens=100)
    assert trace["stop_reason"] == "19" and trace["text"] == "The answer is "
    assert trace["tool_calls"][0]["result"] == "19"
    stop_at = trace["steps"][-1]["stop_at"]
    assert trace["steps"][stop_at["step"]]["part"] == "answer"


def test_markers_outside_their_place_are_not_calls():
    # a closing marker with no call open is just a token without text
    _, trace, _ = run(TOK.encode("a") + [M[tasks.END_CALL]] + TOK.encode("b"))
    assert trace["tool_calls"] == [] and trace["text"] == "ab"


def test_token_healing_is_refused_for_the_question_template():
    with pytest.raises(FieldError) as e:
        run([0], token_healing=True)
    assert e.value.field == "token_healing"


def test_the_calculator_reply_is_what_is_appended():
    assert tasks.result_ids(TOK, tools.run("2*3").reply) == tool_ids("6")
