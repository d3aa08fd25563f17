"""The calculator a model calls: its grammar against Python's own arithmetic, and every kind of
hostile call answered in words, never run and never crashing."""

import random

import pytest
from decodelab.core.tasks import tools
from hypothesis import given, settings
from hypothesis import strategies as st


def random_expression(rng: random.Random, depth: int = 0) -> str:
    roll = rng.random()
    if depth >= 3 or roll < 0.35:
        return str(rng.randint(0, 999))
    if roll < 0.45:
        return "-" + random_expression(rng, depth + 1)
    if roll < 0.6:
        return "(" + random_expression(rng, depth + 1) + ")"
    op = rng.choice(["+", "-", "*", " + ", " - ", " * "])
    return random_expression(rng, depth + 1) + op + random_expression(rng, depth + 1)


def test_matches_python_arithmetic_on_random_expressions():
    """The reference is Python's parser on the same text (these strings are made here, so
    evaluating them in the test is safe): same precedence, same signs, same values."""
    rng = random.Random(7)
    checked = 0
    for _ in range(2000):
        text = random_expression(rng)
        if len(text) > tools.MAX_CHARS:
            continue
        call = tools.run(text)
        assert call.error is None, (text, call.error)
        assert int(call.result) == eval(text), text  # noqa: S307 - the test's own strings
        checked += 1
    assert checked > 1000


@pytest.mark.parametrize("text, value", [
    ("12+7", 19), ("12 + 7", 19), ("915*78", 71370), ("0-45", -45), ("2+3*4", 14),
    ("(2+3)*4", 20), ("10-2-3", 5), ("-3*-3", 9), ("999*999", 998001), ("007", 7),
])
def test_worked_values(text, value):
    assert tools.run(text).result == str(value)


@pytest.mark.parametrize("text, words", [
    ("", "empty"),
    ("   ", "empty"),
    ("__import__('os').system('ls')", "unknown name '__import__'"),
    ("sqrt(4)", "unknown name 'sqrt'"),
    ("2**10", "unexpected '*' at character 3"),
    ("7/2", "unexpected '/'"),
    ("1e9", "unknown name 'e9' (at character 2)"),
    ("12+", "ends where a number was expected"),
    ("(1+2", "bracket is not closed"),
    ("1+2)", "unexpected ')'"),
    ("1234567890", "10 digits"),
    ("999999999*999999999", "beyond 1,000,000,000,000,000"),
    ("(" * 9 + "1" + ")" * 9, "nested more than 8 deep"),
    ("-" * 9 + "1", "nested more than 8 deep"),
    ("1+" * 40 + "1", "at most 64 are allowed"),
    ("１２+3", "unexpected '１'"),  # full-width digits are not digits here
    ("12 plus 7", "unknown name 'plus'"),
])
def test_hostile_and_malformed_calls_get_an_error_in_words(text, words):
    call = tools.run(text)
    assert call.result is None and words in call.error, call.error
    assert call.reply == f"error: {call.error}"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_any_text_gives_a_result_or_an_error_and_never_raises(text):
    call = tools.run(text)
    assert (call.result is None) != (call.error is None)
    if call.result is not None:
        assert abs(int(call.result)) <= tools.MAX_VALUE
