"""The byte-at-a-time JSON reader: what it accepts is what Python's json module parses (as an
independent reference), every prefix of a valid object is a cut, never an error, and a finished
answer is classified with the cause in words."""

import json
import random

import pytest
from decodelab.core.rules import jsonshape as js
from decodelab.core.rules.jsonshape import JsonState, classify
from hypothesis import given, settings
from hypothesis import strategies as st

CARD = '{"name": "Ada", "age": 31, "city": "Zürich"}'


@pytest.mark.parametrize("text, value", [
    (CARD, {"name": "Ada", "age": 31, "city": "Zürich"}),
    ('{}', {}),
    (' {"a" : -0.0E+1 , "b":[ ]}\n', {"a": -0.0, "b": []}),
    ('{"a\\u00e9\\n\\"": [true, false, null, 1.5e-3, {"b": {}}]}',
     {"aé\n\"": [True, False, None, 0.0015, {"b": {}}]}),
])
def test_valid_objects_parse_to_their_value(text, value):
    out = classify(text, "stop", "eos")
    assert out == {"status": "valid", "error": None, "value": value}


@pytest.mark.parametrize("text, where, expects", [
    ('{"a": 01}', "the answer's character 8 ('1')", "'.', 'e', or the end of the number"),
    ('{"a":}', "the answer's character 6 ('}')", "a value"),
    ('{"a": 1 2}', "the answer's character 9 ('2')", "',' or '}'"),
    ('{"a": [1 2]}', "the answer's character 10 ('2')", "',' or ']'"),
    ('{"a": truth}', "the answer's character 10 ('t')", "the rest of 'true'"),
    ('{"a":1}}', "the answer's character 8 ('}')", "nothing more"),
    ('{"a":1,}', "the answer's character 8 ('}')", "a key in quotes"),
    ('[1]', "the answer's character 1 ('[')", "the opening '{'"),
    ('The answer is {"a": 1}', "the answer's character 1 ('T')", "the opening '{'"),
    ('{"é": "x\ty"}', "the answer's character 9 ('\\t')", "more of the value string"),
])
def test_malformed_names_the_character_and_what_was_expected(text, where, expects):
    out = classify(text, "stop", "eos")
    assert out["status"] == "malformed" and out["value"] is None
    assert f"not JSON from {where}" in out["error"] and expects in out["error"]


def test_a_cut_is_incomplete_and_says_what_cut_it():
    cut = CARD[:20]
    budget = classify(cut, "length", None, max_new_tokens=12)
    assert budget["status"] == "incomplete"
    assert "budget of 12 new tokens ran out" in budget["error"]
    assert "not a model error" in budget["error"]
    stop = classify(cut, "stop", "\n")
    assert stop["status"] == "incomplete" and "stop string '\\n' cut" in stop["error"]
    eos = classify(cut, "stop", "eos")
    assert eos["status"] == "incomplete" and "the model ended its answer" in eos["error"]
    assert "stopped" in classify(cut, "cancelled", None)["error"]
    assert classify("", "length", None, 1)["status"] == "incomplete"


def test_the_depth_limit_is_part_of_the_grammar():
    assert classify('{"a": {"b": {}}}', max_depth=3)["status"] == "valid"
    out = classify('{"a": {"b": {}}}', max_depth=2)
    assert out["status"] == "malformed" and "deeper than the limit of 2" in out["error"]


def test_a_refused_byte_leaves_the_state_as_it_was():
    s = JsonState()
    assert s.feed_bytes(b'{"a": 1') == 7
    before = s.key()
    assert not s.feed(ord("x")) and s.key() == before and s.fed == 7
    assert s.accepts(b", ") and s.key() == before  # asking does not move it


def test_every_prefix_of_a_valid_object_is_a_cut_and_the_whole_is_valid():
    text = '{"a\\u00e9": [1, -2.5e+3, {"b": [true, null]}], "c": "São", "d": {}}'
    data = text.encode()
    s = JsonState()
    for i, byte in enumerate(data):
        assert not s.complete, i
        assert s.feed(byte), (i, chr(byte))
    assert s.complete
    for i in range(len(text)):  # on character boundaries, as an answer is cut
        assert classify(text[:i], "length", None, 5)["status"] == "incomplete", i


def _random_value(rng, depth):
    kind = rng.choice(["str", "int", "float", "lit", "obj", "arr"] if depth < 4 else
                      ["str", "int", "float", "lit"])
    if kind == "str":
        return "".join(rng.choice('ab "\\/\n\té€😀\x01') for _ in range(rng.randrange(5)))
    if kind == "int":
        return rng.randrange(-10**6, 10**6)
    if kind == "float":
        return rng.uniform(-1e5, 1e5) * 10 ** rng.randrange(-30, 30)
    if kind == "lit":
        return rng.choice([True, False, None])
    if kind == "obj":
        return {f"k{i}{rng.choice('é x')}": _random_value(rng, depth + 1)
                for i in range(rng.randrange(4))}
    return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]


def test_objects_written_by_the_json_module_are_valid_with_their_value():
    rng = random.Random(7)
    for i in range(300):
        value = {"x": _random_value(rng, 1), "y": _random_value(rng, 1)}
        for kw in ({}, {"indent": 2}, {"separators": (",", ":")}, {"ensure_ascii": False}):
            text = json.dumps(value, **kw)
            out = classify(text, max_depth=8)
            assert out["status"] == "valid", (text, out)
            assert out["value"] == value


ALPHABET = '{}[]":,0123456789-+.eE tfrueals n\\u"abx\n\x01é'


@settings(max_examples=600, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=24))
def test_the_reader_agrees_with_the_json_module(text):
    """Random text after '{': accepted and complete exactly when json.loads parses it (an
    object, within the depth limit), and never complete when json.loads refuses it."""
    text = "{" + text
    s = JsonState(max_depth=32)
    whole = s.feed_bytes(text.encode()) == len(text.encode())
    try:
        value = json.loads(text)
        parsed = isinstance(value, dict)
    except ValueError:
        parsed = False
    assert (whole and s.complete) == parsed, text
    if whole and not s.complete:  # a valid prefix: some text finishes it
        assert classify(text)["status"] == "incomplete"


def test_modes_have_words():
    assert len({js.expected(m) for m in range(js.N_MODES)}) > 20
    assert all(js.expected(m) for m in range(js.N_MODES))
