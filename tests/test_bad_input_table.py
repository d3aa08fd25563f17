"""The bad-input table through the worker's own entry points (decodelab.entry.webapi): every bad value
comes back as a message naming the field and what is allowed, nothing raises, and the last good
run stays as it was."""

import pytest

from tests.conftest import api, run_to_end

LONG = "a" * 10_000
JUNK = bytes(range(256)).decode("latin-1") * 20_000  # about 5 MB of binary junk


@pytest.fixture(scope="module", autouse=True)
def loaded(artifacts):
    assert api("setup", {"assets": str(artifacts)})["ok"]
    return run_to_end({"seed": 9, "max_new_tokens": 12})


SETTINGS_CASES = [
    ({"temperature": float("nan")}, "temperature", "Temperature must be a number from 0 to 100"),
    ({"temperature": float("inf")}, "temperature", "Temperature must be"),
    ({"temperature": -1e308}, "temperature", "Temperature must be"),
    ({"temperature": True}, "temperature", "Temperature must be"),
    ({"temperature": "hot"}, "temperature", "Temperature must be"),
    ({"top_k": 1e308}, "top_k", "Top-k must be a whole number from 0 to 10000"),
    ({"top_k": -3}, "top_k", "Top-k must be"),
    ({"top_p": 0}, "top_p", "Top-p must be a number greater than 0 and at most 1"),
    ({"top_p": 1.5}, "top_p", "Top-p must be"),
    ({"top_p": "0"}, "top_p", "Top-p must be"),
    ({"min_p": -0.1}, "min_p", "Min-p must be a number from 0 to 1"),
    ({"repetition_penalty": 11}, "repetition_penalty", "Repetition penalty must be"),
    ({"seed": "abc"}, "seed", "Seed must be a whole number from 0 to 4294967295"),
    ({"seed": []}, "seed", "Seed must be"),
    ({"seed": {}}, "seed", "Seed must be"),
    ({"seed": 2**40}, "seed", "Seed must be"),
    ({"seed": 1.5}, "seed", "Seed must be"),
    ({"max_new_tokens": 0}, "max_new_tokens", "Max new tokens must be a whole number from 1"),
    ({"max_new_tokens": 100000}, "max_new_tokens", "Max new tokens must be"),
    ({"max_new_tokens": "10.5"}, "max_new_tokens", "Max new tokens must be"),
    ({"min_new_tokens": 20, "max_new_tokens": 10}, "min_new_tokens", "Min new tokens must be"),
    ({"greedy": 2}, "greedy", "Greedy must be true or false"),
    ({"order": 5}, "order", "Order must be one of temperature-first, filter-first"),
    ({"model": "gpt-5"}, "model", "Model must be one of bigram, transformer"),
    ({"dataset": "../../etc/passwd"}, "dataset", "Dataset must be one of"),
    ({"prompt": None}, "prompt", "Prompt must be text"),
    ({"prompt": LONG}, "prompt", "Prompt must be at most 2000 characters; got 10000"),
    ({"prompt": "Hello"}, "prompt", "characters this model has never seen: 'H'"),
    ({"prompt": "<script>"}, "prompt", "never seen"),
    ({"stop": ["x"] * 200}, "stop", "at most 32 are allowed; got 200"),
    ({"stop": [""]}, "stop", "entry 1 has 0 characters"),
    ({"stop": [1, 2]}, "stop", "Stop strings must be a list of strings"),
    ({"stop": ["abcdefghijklmnop"], "max_new_tokens": 10}, "stop", "could never match"),
    ({"stop": ["Zz"], "dataset": "names"}, "stop", "never writes ('Z')"),
    ({"tokenizer": "words"}, "tokenizer", "Tokenizer must be one of chars, bpe"),
    ({"tokenizer": "bpe", "dataset": "names"}, "tokenizer", "learned from the prose and the tasks data only"),
    ({"tokenizer": 1}, "tokenizer", "Tokenizer must be one of"),
    ({"token_healing": 2}, "token_healing", "Token healing must be true or false"),
    ({"token_healing": True, "prompt": ""}, "token_healing", "needs a prompt"),
    ({"colour": "red"}, "colour", "Unknown setting 'colour'"),
]


@pytest.mark.parametrize("raw, field, words", SETTINGS_CASES)
def test_bad_settings(raw, field, words, loaded):
    out = api("start", raw)
    assert out["ok"] is False
    mine = [e for e in out["errors"] if e["field"] == field]
    assert mine and words in mine[0]["message"], out
    assert api("trace")["trace"] == loaded  # the last good run stays


@pytest.mark.parametrize("text", ["{oops", "[1, 2]", "null", "42"])
def test_settings_that_are_not_an_object(text, loaded):
    out = api("start", text=text)
    assert out["ok"] is False and out["errors"][0]["field"] == "settings"
    assert api("trace")["trace"] == loaded


def test_transformer_on_pasted_text_is_refused_in_words(loaded):
    assert api("train", {"text": "abab\nbaba\n"})["ok"]
    out = api("start", {"model": "transformer", "dataset": "custom"})
    assert out["errors"][0]["field"] == "model" and "choose bigram" in out["errors"][0]["message"]


def test_empty_prompt_is_valid():
    assert api("start", {"prompt": "", "seed": 1})["ok"]
    api("cancel")


@pytest.mark.parametrize("text, words", [
    ("", "at least 2 characters"),
    ("x", "at least 2 characters"),
    (JUNK, "too long"),
    (JUNK[:50_000], "control or undecodable"),
])
def test_bad_training_text(text, words):
    out = api("train", {"text": text})
    assert out["ok"] is False and out["errors"][0]["field"] == "text"
    assert words in out["errors"][0]["message"]


@pytest.mark.parametrize("request_, field, words", [
    ({"logits": ""}, "logits", "not a number"),
    ({"logits": "1,,2"}, "logits", "entry 2 is not a number"),
    ({"logits": "1,inf"}, "logits", "finite"),
    ({"probs": "-1,2"}, "probs", "non-negative"),
    ({"probs": "1,1", "logits": "1,1"}, "logits", "exactly one"),
    ({"logits": "1,2", "top_p": 0}, "top_p", "Top-p must be"),
    ([1, 2], "request", "JSON object"),
])
def test_bad_probs_requests(request_, field, words):
    out = api("probs", request_)
    assert out["ok"] is False and out["errors"][0]["field"] == field
    assert words in out["errors"][0]["message"], out


def _json_values():
    from hypothesis import strategies as st

    scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)


def test_any_json_settings_give_an_answer_never_a_crash(loaded):
    from decodelab.core.rules.settings import NAMES
    from hypothesis import given, settings
    from hypothesis import strategies as st

    names = st.sampled_from(sorted(NAMES) + ["bogus"])

    @settings(max_examples=300, deadline=None)
    @given(st.dictionaries(names, _json_values(), max_size=5))
    def check(raw):
        raw.setdefault("max_new_tokens", 3)
        out = api("start", raw)
        if out["ok"]:
            api("advance", {"budget_ms": 500})
        else:
            assert all(e["field"] and e["message"] for e in out["errors"])

    check()
