"""Bad input through the Python API: every message names the field and the allowed values."""

import json

import pytest
from decodelab.core.tokens.corpus import Corpus, corpus_from_text
from decodelab.core.rules.settings import GENERATION_FIELDS, Settings, validate
from decodelab.core.tokens.tokenizer import CharTokenizer
from decodelab.errors import FieldError, FieldErrors
from decodelab.fields import encode, error_json

BAD = [
    ("temperature", -1, "Temperature must be a number from 0 to 100"),
    ("temperature", float("nan"), "Temperature must be a number from 0 to 100"),
    ("temperature", "warm", "Temperature must be a number"),
    ("temperature", float("inf"), "Temperature must be"),
    ("top_p", 0, "Top-p must be a number greater than 0 and at most 1"),
    ("top_p", 1.5, "Top-p must be a number greater than 0 and at most 1"),
    ("top_k", -3, "Top-k must be a whole number from 0 to 10000"),
    ("top_k", 2.5, "Top-k must be a whole number"),
    ("max_new_tokens", 0, "Max new tokens must be a whole number from 1 to 10000"),
    ("max_new_tokens", 100000, "Max new tokens must be a whole number from 1 to 10000"),
    ("seed", 1.5, "Seed must be a whole number from 0 to 4294967295"),
    ("seed", -1, "Seed must be a whole number from 0 to 4294967295"),
    ("seed", True, "Seed must be a whole number"),
    ("seed", None, "Seed must be a whole number"),
    ("min_p", 2, "Min-p must be a number from 0 to 1"),
    ("repetition_penalty", 0, "Repetition penalty must be a number greater than 0"),
    ("order", "sideways", "Order must be one of temperature-first, filter-first"),
    ("model", "gpt", "Model must be one of bigram"),
    ("greedy", "maybe", "Greedy must be true or false"),
    ("stop", [""], "Stop strings: entry 1 has 0 characters"),
    ("stop", ["x"] * 200, "Stop strings: at most 32 are allowed; got 200"),
    ("stop", ["y" * 500], "each must have 1 to 100"),
    ("stop", [3], "Stop strings must be a list of strings"),
    ("prompt", "a" * 10000, "Prompt must be at most 2000 characters; got 10000"),
    ("prompt", 12, "Prompt must be text"),
]


@pytest.mark.parametrize("field, value, words", BAD)
def test_bad_value_names_field_and_allowed_values(field, value, words):
    with pytest.raises(FieldErrors) as info:
        validate({field: value})
    (err,) = info.value.errors
    assert err.field == field
    assert words in err.message
    json.dumps(error_json(err))  # the worker sends it as JSON


def test_all_bad_fields_reported_at_once():
    with pytest.raises(FieldErrors) as info:
        validate({"temperature": -1, "top_p": 0, "seed": "x", "colour": "red"})
    assert {e.field for e in info.value.errors} == {"temperature", "top_p", "seed", "colour"}


def test_min_new_tokens_cannot_exceed_the_budget():
    with pytest.raises(FieldErrors, match="Min new tokens must be from 0 to Max new tokens"):
        validate({"min_new_tokens": 30, "max_new_tokens": 10})


def test_good_values_normalise():
    s = validate({"temperature": "0.5", "top_k": "3", "seed": 7.0, "greedy": "false",
                  "stop": "\n", "dataset": "names"})
    assert (s.temperature, s.top_k, s.seed, s.greedy, s.stop) == (0.5, 3, 7, False, ("\n",))
    assert validate({"temperature": 0}).is_greedy


def test_defaults_match_the_field_table():
    d = Settings().to_json()
    for f in GENERATION_FIELDS:
        assert d[f.name] == (list(f.default) if f.kind == "lines" else f.default), f.name


def test_settings_are_the_field_tables_run_settings_and_the_rules_are_declared_once():
    """Settings is made from the table: one typed field per run setting, the same names in the
    same order (to_json's order, which the page and the CLI read), each with the table's
    default, of the type its kind gives. The rules among them are declared once, as the rules
    (sampling.Rules), of the same types."""
    import dataclasses

    from decodelab.core.rules.sampling import Rules
    from decodelab.core.rules.settings import TYPES

    written = dataclasses.fields(Settings)
    assert [f.name for f in written] == [f.name for f in GENERATION_FIELDS]
    for ours, row in zip(written, GENERATION_FIELDS):
        assert ours.default == row.default and type(ours.default) is type(row.default), row.name
        assert ours.type is TYPES[row.kind], row.name
    assert list(Settings().to_json()) == [f.name for f in GENERATION_FIELDS]
    types = {f.name: f.type for f in written}
    rules = [f for f in dataclasses.fields(Rules) if f.init]
    assert rules and all(f.type in (types[f.name], types[f.name].__name__) for f in rules)
    assert Settings(temperature=0.5, top_k=3).rules == Rules(temperature=0.5, top_k=3)


def test_the_rules_are_off_at_the_field_tables_defaults():
    """A decoding rule's off value is its field's default: Rules() takes them all, filters
    nothing and is not greedy, and each filter's OFF is its field's default."""
    import dataclasses

    from decodelab.core.rules.sampling import OFF, Rules
    from decodelab.fields import FIELD_BY_NAME

    rules = Rules()
    for f in dataclasses.fields(Rules):
        if f.init:
            assert getattr(rules, f.name) == FIELD_BY_NAME[f.name].default, f.name
    assert not rules.filtering and not rules.is_greedy
    assert OFF == {name: FIELD_BY_NAME[name].default for name in ("top_k", "top_p", "min_p",
                                                                   "typical_p")}


def test_dataset_is_checked_against_what_is_loaded():
    with pytest.raises(FieldErrors, match="Dataset must be one of names, prose; got 'poems'"):
        validate({"dataset": "poems"}, datasets=["names", "prose"])


def test_prompt_outside_vocabulary_names_the_characters():
    tok = CharTokenizer("abc")
    with pytest.raises(FieldError) as info:
        encode(tok, "prompt", "abZ!")
    assert info.value.field == "prompt"
    assert "'!' 'Z'" in info.value.message and "Use only: a, b, c" in info.value.message


def test_empty_prompt_is_valid():
    assert CharTokenizer("ab").encode("") == []


@pytest.mark.parametrize("text, words", [
    ("", "needs at least 2 characters"),
    ("x", "needs at least 2 characters"),
    ("\n\n   \n", "needs at least 2 characters"),
    ("ok\x00\x01junk", "control or undecodable"),
    (bytes(range(256)).decode("latin-1") * 20, "control or undecodable"),
    ("a" * 1_000_001, "too long"),
])
def test_bad_training_text(text, words):
    with pytest.raises(FieldError) as info:
        corpus_from_text(text)
    assert info.value.field == "text" and words in info.value.message


def test_training_text_one_sequence_per_line():
    c = corpus_from_text("  hello   world \n\n second line\n")
    assert c.sequences == ["hello world", "second line"]


def test_split_is_deterministic_and_disjoint():
    seqs = [f"s{i}" for i in range(100)]
    a, b = Corpus("x", seqs), Corpus("x", list(seqs))
    assert a.val == b.val and len(a.val) == 10 and not set(a.val) & set(a.train)
    assert sorted(a.val + a.train) == sorted(seqs)


def test_a_refused_conversation_is_named_in_words_not_by_its_key():
    """A chat turn's messages refused: the label the page names it by is words ("The
    conversation"), never the request's key ("messages needs a change")."""
    from pathlib import Path

    from decodelab.core.loops.generate import prepare
    from decodelab.core.library import Library

    lib = Library(Path(__file__).resolve().parents[1] / "artifacts")
    with pytest.raises(FieldErrors) as info:  # the trained transformer has no chat template
        prepare(lib, {"model": "transformer", "dataset": "names",
                      "messages": [{"role": "user", "content": "hi"}]})
    (err,) = info.value.errors
    assert error_json(err)["field"] == "messages"
    assert error_json(err)["label"] == "The conversation"
