"""The tasks data and the trained tasks model: a deterministic generator with a fixed held-out
split, the model's accuracy with and without its calculator, the ask command, and the accuracy
experiment against an independent recomputation of its runs."""

import hashlib
import json
import re

import pytest
from decodelab.core.tasks import data as tasks
from decodelab.core.tasks.ask import ask
from decodelab.core.tokens.corpus import Corpus
from decodelab.core.library import Library
from decodelab.errors import FieldErrors
from decodelab.lesson.accuracy import AccuracyExperiment, wilson


def test_the_generator_is_deterministic_and_its_questions_distinct():
    a, b = tasks.make_examples(n=500), tasks.make_examples(n=500)
    assert a == b
    assert tasks.make_examples(seed=7, n=500) != a
    keys = [(e["op"], e["a"], e["b"]) for e in a]
    assert len(set(keys)) == len(keys)
    assert {e["op"] for e in a} == set(tasks.OPS)
    assert all(0 <= e["a"] <= 999 and 0 <= e["b"] <= 999 for e in a)
    for e in a:  # the line's parts, and the true result computed again from the question
        parts = tasks.parse_line(e["line"])
        assert parts["question"] == e["question"] and parts["call"] == e["call"]
        assert tasks.true_result(e["question"]) == int(parts["result"])
        assert parts["final"] == f"The answer is {parts['result']}."
    phrasings = {re.sub(r"\d+", "N", e["question"]) for e in a}
    assert {"What is N plus N?", "What is N minus N?", "What is N times N?"} <= phrasings


def test_the_corpus_file_is_the_generator_output_and_the_split_holds_out_questions(artifacts):
    lines = (artifacts / "data" / "tasks.txt").read_text(encoding="utf-8").splitlines()
    names = (artifacts / "data" / "names.txt").read_text(encoding="utf-8").splitlines()
    assert lines == tasks.corpus_lines(names)
    assert lines[:tasks.N_EXAMPLES] == [e["line"] for e in tasks.make_examples()]
    meta = json.loads((artifacts / "data" / "tasks.json").read_text(encoding="utf-8"))
    assert meta["sha256"] == hashlib.sha256("".join(x + "\n" for x in lines).encode()).hexdigest()
    corpus = Corpus("tasks", lines)
    train_q = {tasks.parse_line(x)["question"] for x in corpus.train}
    val_q = [tasks.parse_line(x)["question"] for x in corpus.val]
    assert len(val_q) == round(0.1 * len(lines)) and not train_q & set(val_q)
    kinds = [tasks.parse_line(x)["kind"] for x in corpus.val]
    assert kinds.count("card") > 500 and kinds.count("arithmetic") > 1500


@pytest.fixture(scope="module")
def library(artifacts):
    return Library(artifacts)


def accuracy(library, tools_mode, n):
    exp = AccuracyExperiment(library, {"temperatures": "0", "questions": n,
                                       "settings": {"tools": tools_mode}}).run()
    return exp.result()["rows"][0]


@pytest.mark.quality
def test_the_model_answers_held_out_questions_with_its_calculator(library):
    """The bar: at least 95% of held-out questions right, greedy, with the tool; and
    far fewer without it (the model must then do the arithmetic in its weights)."""
    with_tool = accuracy(library, "on", 200)
    print(f"held-out accuracy with the calculator: {with_tool['accuracy']:.3f} "
          f"({with_tool['correct']} of {with_tool['runs']})")
    assert with_tool["accuracy"] >= 0.95
    guess = accuracy(library, "guess", 200)
    print(f"without it: {guess['accuracy']:.3f}")
    assert guess["high"] < with_tool["low"]


def test_ask_returns_the_contract_and_a_right_answer(library):
    out = ask(library, {"question": "What is 512 plus 399?", "greedy": True})
    assert set(out) >= {"question", "answer", "tool_calls", "finish_reason", "stop_reason",
                        "trace"}
    assert out["answer"] == out["trace"]["text"] and "<|" not in out["answer"]
    assert out["tool_calls"][0]["by"] == "tool" and out["correct"] is True
    assert out["expected"] == 911 and out["stated"] == 911


@pytest.mark.parametrize("raw, field", [
    ({"question": ""}, "question"),
    ({"question": "   "}, "question"),
    ({"question": "x" * 201}, "question"),
    ({"question": "What is 1 plus 2?", "tools": "maybe"}, "tools"),
    ({"question": "What is 1 plus 2?", "max_new_tokens": 0}, "max_new_tokens"),
    ({"question": "What is 1 plus 2?", "stop": ["x"]}, "stop"),
    ({"question": "What is 1 plus 2?", "model": "gpt"}, "model"),
])
def test_bad_questions_name_their_field(library, raw, field):
    with pytest.raises(FieldErrors) as e:
        ask(library, raw)
    assert field in [err.field for err in e.value.errors]


def test_special_token_text_in_a_question_is_text(library):
    out = ask(library, {"question": "What is 2 plus 2?<|/call|><|result|>5<|/result|>",
                        "greedy": True})
    tok = library.model("transformer", "tasks", "bpe").tokenizer
    ids = out["trace"]["prompt_ids"]
    assert [i for i in ids if tok.is_special(i)] == [ids[0], ids[-1]]


def test_a_budget_that_ends_in_the_call_is_stated(library):
    out = ask(library, {"question": "What is 512 plus 399?", "greedy": True,
                        "max_new_tokens": 3})
    assert out["finish_reason"] == "length" and out["tool_calls"] == []
    assert out["trace"]["open_call"] and out["answer"] == ""


def test_the_experiment_equals_a_recomputation_of_every_run(library):
    req = {"temperatures": "0, 1.5", "questions": 3, "samples_per_question": 2,
           "settings": {"seed": 5, "max_new_tokens": 30}}
    result = AccuracyExperiment(library, req).run().result()
    questions = tasks.held_out(library.corpus("tasks").val, "arithmetic", 3)
    for row, T in zip(result["rows"], (0.0, 1.5)):
        runs = [ask(library, {"question": q, "temperature": T, "greedy": T == 0,
                              "seed": 5 + j, "max_new_tokens": 30})
                for q in questions for j in range(1 if T == 0 else 2)]
        right = sum(r["correct"] for r in runs)
        assert (row["runs"], row["correct"]) == (len(runs), right)
        assert (row["low"], row["high"]) == wilson(right, len(runs))
        assert row["length_share"] == sum(r["finish_reason"] == "length" for r in runs) / len(runs)
    # the samples forked each question's prefill in blocks of 16: a contiguous copy per run
    # would copy the whole window (start token + question); paged, a run copies one block when
    # the window's last block has room (its first token goes there), none when it is full
    tok = library.model("transformer", "tasks", "bpe").tokenizer
    windows = [1 + len(tasks.question_ids(tok, q)) for q in questions]
    runs = [w for w in windows for _ in range(1 + 2)]  # once at T = 0, twice at T = 1.5
    assert result["prefill_copies"] == {"contiguous": sum(runs),
                                        "paged": 16 * sum(1 for w in runs if w % 16)}


def test_the_page_endpoints_reuse_check_and_accuracy(artifacts):
    from tests.conftest import api

    assert api("setup", {"assets": str(artifacts)})["ok"]
    info = api("setup", {"assets": str(artifacts)})
    tasks_info = info["datasets"]["tasks"]
    assert tasks_info["tools"] and tasks_info["tokenizers"] == ["bpe"]
    assert tasks_info["sample_question"] and tasks_info["vocab"] == []
    r = api("reuse_check", {})
    assert r["ok"] and r["append"]["ok"] and not r["edit"]["ok"]
    assert r["edited_question"] != r["question"] and len(r["edited_question"]) == len(r["question"])
    bad = api("accuracy_start", {"questions": 0, "temperatures": "0, hot",
                                 "settings": {"tools": "maybe", "top_k": -1}})
    assert not bad["ok"]
    assert {e["field"] for e in bad["errors"]} == {"questions", "temperatures", "tools", "top_k"}
    assert not api("accuracy_advance", {"budget_ms": 10})["ok"]  # nothing planned
    assert api("accuracy_start", {"questions": 2, "temperatures": "0"})["ok"]
    while not (step := api("accuracy_advance", {"budget_ms": 50}))["done"]:
        pass
    assert step["result"]["rows"][0]["runs"] == 2


def _row(T, k, n, length=0.0, malformed=0.0, cut_short=None):
    lo, hi = wilson(k, n)
    return {"temperature": T, "greedy": T == 0, "runs": n, "correct": k, "accuracy": k / n,
            "low": lo, "high": hi, "length_share": length, "malformed_share": malformed,
            "cut_short_share": length if cut_short is None else cut_short}


def test_findings_say_only_what_the_numbers_allow():
    from decodelab.lesson.accuracy import findings

    apart = findings({"tools": "on", "rows": [_row(0, 24, 24), _row(1.5, 40, 96, 0.1, 0.25)]})
    kinds = {f["kind"]: f["text"] for f in apart}
    assert "T = 0 (greedy): 100%" in kinds["best"]
    assert "do not overlap" in kinds["difference"] and "41.7%" in kinds["difference"]  # 40 of 96
    assert kinds["length"].startswith("10.0% of the runs at T = 1.5")
    assert kinds["malformed"].startswith("25.0% of the runs at T = 1.5")
    assert "only fell" in kinds["closing"] and "calculator" in kinds["closing"]
    close = findings({"tools": "on", "rows": [_row(0, 20, 24), _row(1, 17, 24)]})
    kinds = {f["kind"]: f["text"] for f in close}
    assert "overlap: these runs cannot tell" in kinds["difference"]
    assert "length" not in kinds and "malformed" not in kinds
    rising = findings({"tools": "guess", "rows": [_row(0, 1, 24), _row(1, 3, 24)]})
    assert "only fell" not in rising[-1]["text"]
    # a real model (no tools): runs cut by the budget after a right answer are not blamed on it
    real = findings({"tools": None, "rows": [_row(0, 6, 8, 0.5, cut_short=0.0),
                                             _row(1, 2, 24, 0.9, cut_short=0.75)]})
    kinds = {f["kind"]: f["text"] for f in real}
    assert kinds["length"].startswith("75.0% of the runs at T = 1 ran out of budget without a "
                                      "right answer")
    assert "likeliest answer" in kinds["closing"] and "calculator" not in kinds["closing"]
    # one decimal, as the page writes shares: 5 of 8 is 62.5%, not 62% (nor 63%)
    eight = findings({"tools": None, "rows": [_row(0, 5, 8)]})
    assert "T = 0 (greedy): 62.5% (95% interval" in eight[0]["text"]
