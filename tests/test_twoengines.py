"""The lesson on what an engine's choices change (lesson/twoengines.py), held to full
recomputation: SmolLM2 read for both engines, each engine's numbers recomputed from nothing
(`logits_at`, no session), the distances and agreements counted again, and a model compared
with itself changing nothing; the page's float32 twin made from the blocks, and its endpoint."""

import numpy as np
import pytest

from decodelab.core.library import Library
from decodelab.core.loops.slices import drain
from decodelab.entry import webapi
from decodelab.entry.webapi.registry import Session
from decodelab.lesson.twoengines import compare, probabilities
from decodelab.pretrained.files import find_smollm2
from decodelab.pretrained.model import load, reference_steps

from tests.conftest import api

PROMPT = "The capital of France is"
STEPS = 8


@pytest.fixture(scope="module")
def models():
    path = find_smollm2()
    return {engine: load(path, engine=engine) for engine in ("reference", "quantized")}


@pytest.fixture(scope="module")
def compared(models):
    ids = models["reference"].tokenizer.encode(PROMPT)
    return ids, compare(models, ids, STEPS)


# cached against recomputed logits: float32 sums in another order for the reference; the
# quantized engine's sums do not depend on how many positions are read at once
AGREE = {"reference": 1e-3, "quantized": 0.0}


def test_each_engines_answer_is_its_own_greedy_choice_recomputed(models, compared):
    prompt, out = compared
    for name, model in models.items():
        ids = out["greedy"][name]
        assert len(ids) == STEPS
        full = model.logits_at(prompt + ids, rows=range(len(prompt) - 1, len(prompt) + STEPS - 1))
        assert list(full.argmax(-1)) == ids, name
    a, b = out["greedy"]["reference"], out["greedy"]["quantized"]
    parted = out["greedy"]["parted_at"]
    assert (parted is None and a == b) or (a[:parted] == b[:parted] and a[parted] != b[parted])
    assert " Paris" in out["greedy"]["texts"]["quantized"]


def test_each_step_lists_both_engines_numbers_along_the_same_tokens(models, compared):
    prompt, out = compared
    ids = out["greedy"]["reference"]
    rows = range(len(prompt) - 1, len(prompt) + len(ids) - 1)
    full = {name: m.logits_at(prompt + ids, rows=rows) for name, m in models.items()}
    for step, row in enumerate(out["steps"]):
        assert row["token_id"] == ids[step]
        for name in models:
            logits, listed = full[name][step], row[name]
            got = np.array([c["logit"] for c in listed])
            at = [c["token_id"] for c in listed]
            np.testing.assert_allclose(got, logits[at], atol=AGREE[name], rtol=0)
            fifth = np.sort(logits)[-len(listed)]
            assert (logits[at] >= fifth - AGREE[name]).all()  # the top five, ties aside
            p = probabilities(logits)
            np.testing.assert_allclose([c["p"] for c in listed], p[at], atol=1e-3)
        a, b = (probabilities(full[n][step]) for n in ("reference", "quantized"))
        assert row["distance"] == pytest.approx(0.5 * np.abs(a - b).sum(), abs=1e-3)
        assert 0 <= row["distance"] <= 1
        same = full["reference"][step].argmax() == full["quantized"][step].argmax()
        assert row["same_first"] == same
        assert row["largest_logit_difference"] >= abs(full["reference"][step][ids[step]]
                                                      - full["quantized"][step][ids[step]]) - 2e-3
    summary = out["summary"]
    assert summary["same_first"] == sum(r["same_first"] for r in out["steps"])
    assert summary["largest_distance"] == max(r["distance"] for r in out["steps"])
    # the engines' weights as they hold them: the file's blocks under a quarter of float32
    held = out["engines"]
    assert held["quantized"]["weight_bytes"] < 0.25 * held["reference"]["weight_bytes"]
    assert all(e["seconds_per_step"] > 0 for e in held.values())


def test_a_model_compared_with_itself_changes_nothing(models):
    model = models["quantized"]
    ids = model.tokenizer.encode(PROMPT)
    out = compare({"reference": model, "quantized": model}, ids, 4)
    assert out["greedy"]["parted_at"] is None
    assert out["summary"]["same_first"] == 4 and out["summary"]["largest_distance"] == 0.0
    assert all(r["largest_logit_difference"] == 0.0 for r in out["steps"])


def test_the_float32_twin_made_from_the_blocks_is_the_reference_engines_read(models):
    """The page keeps no file once a model is read: the comparison makes the reference engine's
    arrays from the quantized engine's blocks, and they are the reference reader's, bit for bit
    (the same layout too: column-major, the head the embedding's own array when tied)."""
    twin = drain(reference_steps(models["quantized"]))
    read = models["reference"]
    assert twin.engine == "reference" and list(twin.params) == list(read.params)
    for name, want in read.params.items():
        got = twin.params[name]
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert got.flags.f_contiguous == want.flags.f_contiguous, name
        assert np.array_equal(got, want), name
    assert np.shares_memory(twin.params["w_head"], twin.params["wte"])
    assert twin.weight_bytes == read.weight_bytes
    with pytest.raises(ValueError, match="quantized engine's blocks"):
        drain(reference_steps(read))


def test_the_pages_comparison_is_the_lessons_on_the_chat_prompt(models):
    """The endpoint (entry/webapi/twoengines): the message as the chat's first turn, each
    engine's answer ending at the end of its turn, the numbers compare's own; bad input named
    by field, and a model on the reference engine refused (the twin is made from blocks)."""
    library = Library(engine="quantized")
    library.keep_pretrained(models["quantized"])
    webapi.SESSIONS["twoengines"] = Session(library)
    try:
        out = api("twoengines", {"message": "What is the capital of France?", "answer_tokens": 12},
                  session="twoengines")
        assert out["ok"], out
        model = models["quantized"]
        ids = model.template.ids([{"role": "user", "content": "What is the capital of France?"}])
        assert out["prompt_tokens"] == len(ids)
        want = compare(models, ids, 12, (model.template.end_id, model.tokenizer.eos_id))
        assert out["greedy"]["reference"] == want["greedy"]["reference"]
        assert out["greedy"]["quantized"] == want["greedy"]["quantized"]
        assert [r["distance"] for r in out["steps"]] == [r["distance"] for r in want["steps"]]
        assert "Paris" in out["greedy"]["texts"]["reference"]
        # as the page's worker calls it: pieces (the twin a few million weights at a time, then
        # a step at a time), each answered "pending", and the same answer at the end
        reply, pieces = api("twoengines", {"message": "What is the capital of France?",
                                           "answer_tokens": 12}, session="twoengines",
                            sliced=True), 1
        while reply.get("pending"):
            reply = api("resume", {"task": reply["task"], "budget_ms": 0}, session="twoengines")
            pieces += 1
        assert pieces > 30 * 4 + 12 and reply["greedy"] == out["greedy"]
        held = out["engines"]
        assert held["reference"]["cache_bytes_per_position"] == 2 * 30 * 3 * 64 * 4
        assert held["quantized"]["cache_bytes_per_position_llamacpp"] == 2 * 30 * 3 * 64 * 2
        for req, field in (({"message": "  "}, "message"), ({"message": "x" * 2001}, "message"),
                           ({"message": "Hi", "answer_tokens": 0}, "answer_tokens"),
                           ({"message": "Hi", "answer_tokens": 33}, "answer_tokens"),
                           ({"message": "Hi", "answer_tokens": True}, "answer_tokens")):
            bad = api("twoengines", req, session="twoengines")
            assert not bad["ok"] and bad["errors"][0]["field"] == field, (req, bad)
            assert bad["errors"][0]["label"] in ("Message", "Tokens of each answer")
        library.keep_pretrained(models["reference"])
        bad = api("twoengines", {"message": "Hi"}, session="twoengines")
        assert bad["errors"][0]["field"] == "engine" and "Quantized" in bad["errors"][0]["message"]
    finally:
        webapi.SESSIONS.pop("twoengines", None)


def test_the_accuracy_experiment_on_both_engines_is_set_side_by_side(models):
    """The accuracy experiment on the real model says its engine; run again with the same plan
    on the other engine, its result sets the two side by side: each engine's counts are its own
    result's, the runs answered alike are counted again from both lists of answers, and the
    verdict follows the intervals."""
    from decodelab.lesson.accuracy import wilson

    library = Library(engine="quantized")
    webapi.SESSIONS["accuracy"] = Session(library)
    plan = {"temperatures": "0, 1", "questions": 3, "samples_per_question": 2,
            "settings": {"model": "smollm2", "max_new_tokens": 10, "seed": 3}}

    def run_on(engine):
        library.keep_pretrained(models[engine])
        assert api("accuracy_start", plan, session="accuracy")["ok"]
        while True:
            out = api("accuracy_advance", {"budget_ms": 500}, session="accuracy")
            assert out["ok"], out
            if out["done"]:
                return out["result"]

    try:
        first = run_on("quantized")
        assert first["engine"] == "quantized" and "engines" not in first
        second = run_on("reference")
        assert second["engine"] == "reference"
        both = second["engines"]
        assert both["engines"] == ["reference", "quantized"]
        said = {(a["question"], a["temperature"], a["seed"]): a["answer"]
                for a in first["answers"]}
        for row, ra, rb in zip(both["rows"], first["rows"], second["rows"]):
            assert row["quantized"]["correct"] == ra["correct"]
            assert row["reference"]["correct"] == rb["correct"]
            assert (row["reference"]["low"], row["reference"]["high"]) == \
                pytest.approx(wilson(rb["correct"], rb["runs"]))
            mine = [a for a in second["answers"] if a["temperature"] == row["temperature"]]
            assert row["alike"] == sum(said[(a["question"], a["temperature"], a["seed"])]
                                       == a["answer"] for a in mine)
            q, r = row["quantized"], row["reference"]
            assert row["apart"] == (q["high"] < r["low"] or r["high"] < q["low"])
        assert both["runs"] == 3 * (1 + 2) and f"{both['alike']} of them" in both["text"]
        # another plan is not compared with the last one
        plan["settings"]["seed"] = 4
        assert "engines" not in run_on("quantized")
    finally:
        webapi.SESSIONS.pop("accuracy", None)
