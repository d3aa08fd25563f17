"""Stop strings across token boundaries, the cut, include_stop, and streaming hold-back."""

import pytest
from decodelab.core.rules.stopping import StopMatcher
from hypothesis import given, settings
from hypothesis import strategies as st


def feed(pieces, stops, include_stop=False):
    m = StopMatcher(stops, include_stop)
    shown = []
    for piece in pieces:
        shown.append(m.push(piece))
        if m.matched is not None:
            break
    else:
        shown.append(m.flush())
    return m, shown


def test_match_spanning_tokens_is_cut_at_its_start():
    m, shown = feed(["he", "llo", " wo", "rld"], ["lo w"])
    assert m.matched == "lo w"
    assert m.visible == "hel"
    assert "".join(shown) == "hel"
    assert m.cut == "lo wo"  # the stop string and the rest of the token that completed it


def test_include_stop_keeps_the_match():
    m, shown = feed(["a", "b", "c", "d"], ["bc"], include_stop=True)
    assert m.visible == "abc" and "".join(shown) == "abc" and m.cut == ""


def test_partial_match_is_held_back_then_released():
    m = StopMatcher(["\n\n"])
    assert m.push("one") == "one"
    assert m.push("\n") == "" and m.held == "\n"  # could start "\n\n": held back
    assert m.push("two") == "\ntwo" and m.held == ""  # it did not: released, nothing retracted
    assert m.push("\n") == ""
    assert m.push("\n") == ""
    assert m.matched == "\n\n" and m.visible == "one\ntwo" and m.cut == "\n\n"


def test_held_back_text_is_released_when_generation_ends_otherwise():
    m = StopMatcher(["xyz"])
    assert m.push("abx") == "ab"
    assert m.push("y") == ""
    assert m.flush() == "xy"
    assert m.visible == "abxy"


def test_earliest_match_wins_then_longest():
    m, _ = feed(["abcdef"], ["cd", "b", "bcd"])
    assert m.matched == "bcd" and m.visible == "a"


def test_stop_inside_one_token():
    m, shown = feed(["xxSTOPyy"], ["STOP"])
    assert m.visible == "xx" and shown == ["xx"] and m.cut == "STOPyy"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text("ab\n", min_size=0, max_size=4), max_size=20),
       st.lists(st.text("ab\n", min_size=1, max_size=4), min_size=1, max_size=3),
       st.booleans())
def test_streamed_text_is_never_retracted_and_matches_a_batch_search(pieces, stops, include):
    m, shown = feed(pieces, stops, include)
    assert "".join(shown) == m.visible  # what was shown is exactly the final text
    # independent reference: after each piece, search the whole text so far from the start;
    # the first piece that completes any stop string decides (earliest start, then longest)
    text, expected_stop, expected_text = "", None, "".join(pieces)
    for piece in pieces:
        text += piece
        hits = [(text.find(s), -len(s), s) for s in stops if s in text]
        if hits:
            at, _, expected_stop = min(hits)
            expected_text = text[: at + len(expected_stop)] if include else text[:at]
            break
    assert m.matched == expected_stop
    assert m.visible == expected_text


def test_no_stops_releases_everything_at_once():
    m = StopMatcher([])
    assert m.push("abc") == "abc" and m.flush() == ""


@pytest.mark.parametrize("stops", [[""], []])
def test_empty_stop_strings_never_match(stops):
    m, _ = feed(["abc"], stops)
    assert m.matched is None and m.visible == "abc"
