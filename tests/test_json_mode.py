"""JSON mode: the grammar mask against a brute-force check of every token, its place in the
pipeline, what it guarantees (never malformed, never a model error for a budget cut), and the
errors for settings it cannot honour."""

import numpy as np
import pytest
from decodelab.core.rules import grammar, jsonshape, sampling
from decodelab.core.loops.generate import start
from decodelab.core.library import Library
from decodelab.core.loops.replay import Replay
from decodelab.core.tokens.tokenizer import EOS
from decodelab.errors import FieldErrors

from tests.conftest import api

PROSE = {"model": "transformer", "dataset": "prose", "tokenizer": "bpe", "json_mode": True}


@pytest.fixture(scope="module")
def lib(artifacts):
    assert api("setup", {"assets": str(artifacts)}, session="json")["ok"]
    return Library(artifacts)


@pytest.fixture(scope="module")
def bpe(lib):
    return lib.tokenizer("bpe", "tasks")  # the prose BPE plus the special markers


def brute_force(tokenizer, state) -> np.ndarray:
    """Every token fed, byte by byte, to a copy of the state: the reference the tables must
    match (EOS only when the object is complete; tokens with no bytes never)."""
    out = np.array([len(tokenizer.token_bytes(i)) > 0 and state.accepts(tokenizer.token_bytes(i))
                    for i in range(tokenizer.vocab_size)])
    out[EOS] = state.complete
    return out


TEXTS = ['{"name": "Zürich\\u00e9", "a": [1, -2.5e+3, {"b": [true, null, false]}], "c": {}}\n  ',
         '{ "x" : [ [ [ ] ] , 0.5E-7 ] , "y\\"": "a\\\\b" }',
         '{\n  "a": [\n    1,\n\t\t2\n  ],\n' + ' ' * 20 + '"b": "  x  "\n}']


@pytest.mark.parametrize("text", TEXTS)
def test_the_mask_is_every_token_that_can_continue_checked_one_by_one(bpe, text):
    masks = grammar.JsonMask(bpe, max_depth=4)
    state = jsonshape.JsonState(4, bounded=True)
    data = text.encode()
    for i in range(len(data) + 1):
        assert np.array_equal(masks.allowed(state), brute_force(bpe, state)), (i, state.expected())
        if i < len(data):
            assert state.feed(data[i]), i
    assert state.complete


def test_at_the_depth_limit_no_token_opens_another_container(bpe):
    masks = grammar.JsonMask(bpe, max_depth=2)
    state = jsonshape.JsonState(2, bounded=True)
    state.feed_bytes(b'{"a": [')
    allowed = masks.allowed(state)
    opens = [i for i in range(bpe.vocab_size) if bpe.token_bytes(i)[:1] in (b"{", b"[")]
    assert opens and not allowed[opens].any()
    assert allowed[bpe.encode("1")[0]] and allowed[bpe.encode("]")[0]]


def test_special_tokens_and_eos_are_masked_until_the_object_is_complete(bpe):
    masks = grammar.JsonMask(bpe)
    state = jsonshape.JsonState(bounded=True)
    state.feed_bytes(b'{"a": 1')
    allowed = masks.allowed(state)
    assert not allowed[EOS] and not allowed[list(bpe.special_ids.values())].any()
    state.feed(ord("}"))
    done = masks.allowed(state)
    assert done[EOS] and not done[list(bpe.special_ids.values())].any()
    # after the object only whitespace may still come (or the end)
    assert all(bpe.token_bytes(i).isspace() for i in np.flatnonzero(done) if i != EOS)


def test_a_run_in_json_mode_writes_only_what_the_grammar_allows(lib):
    run = start(lib, {**PROSE, "prompt": "The", "temperature": 1.5, "seed": 4,
                      "max_new_tokens": 40})
    run.run()
    replay = Replay(run)
    state = jsonshape.JsonState(bounded=True)
    for step, record in enumerate(run.records):
        d = replay.decision(step)
        allowed = brute_force(run.tokenizer, state)
        if state.complete:  # the run may end (no min_new_tokens): it ends with the object
            allowed = np.arange(run.tokenizer.vocab_size) == EOS
        assert np.array_equal(d.allowed, allowed)
        assert not d.p_final[~allowed].any()  # what the grammar removed cannot be drawn
        # the stage's numbers, from the model's own distribution
        g = record["grammar"]
        assert g["kept_count"] == int(allowed.sum())
        assert g["p_removed"] == pytest.approx(float(d.p_raw[~allowed].sum()), abs=1e-12)
        assert record["prob"] == pytest.approx(float(d.p_final[record["token_id"]]), abs=1e-12)
        if record["token_id"] != EOS:
            assert state.feed_bytes(run.tokenizer.token_bytes(record["token_id"])) > 0
    assert run.trace()["json"]["status"] in ("valid", "incomplete")


def test_a_complete_object_ends_the_answer_where_the_run_may_end(bpe):
    """After the object, end-of-sequence alone: JSON allows whitespace there, which a chat model
    writes until the budget. Where the stop rules hold the end back, whitespace alone may come
    (and the rules then block the end themselves)."""
    from decodelab.core.rules.grammar import JsonMode

    held = {0, 1}  # e.g. min_new_tokens = 2
    mode = JsonMode(bpe, 8, eos_blocked=lambda step: step in held)
    for step, raw in enumerate([b'{"a": 1}', b" ", b""]):
        mode.begin()
        allowed = mode.allowed(step)
        if step == 0:  # before the object: the grammar's own mask
            assert np.array_equal(allowed, brute_force(bpe, mode.state))
        elif step == 1:  # complete, but the end is held back: whitespace (and the end, masked
            # by the rules) as the grammar has it
            assert np.array_equal(allowed, brute_force(bpe, mode.state)) and allowed.sum() > 1
            assert all(bpe.token_bytes(t).isspace() for t in np.flatnonzero(allowed) if t != EOS)
        else:  # complete, and the run may end: the end alone
            assert np.flatnonzero(allowed).tolist() == [EOS]
        mode.feed(raw)


def test_the_mask_comes_before_temperature_and_renormalises(lib):
    """The rules see the model's probabilities renormalised over the allowed tokens: with no
    filter at T = 1 the final distribution is exactly p_raw restricted and rescaled."""
    run = start(lib, {**PROSE, "prompt": "", "seed": 1, "max_new_tokens": 6})
    run.run()
    d = Replay(run).decision(2)
    expect = np.where(d.allowed, d.p_raw, 0.0)
    assert np.allclose(d.p_final, expect / expect.sum(), atol=1e-12)
    hot = sampling.decide(d.logits, sampling.Rules(temperature=2.0), allowed=d.allowed)
    z = np.where(d.allowed, d.logits / 2.0, -np.inf)
    ref = np.exp(z - z.max())
    assert np.allclose(hot.p_final, ref / ref.sum(), atol=1e-12)


def test_without_json_mode_the_same_seed_can_write_malformed_text_and_with_it_never(lib):
    off = [start(lib, {**PROSE, "json_mode": False, "prompt": "{", "seed": s,
                       "temperature": 1.0, "max_new_tokens": 20}).run() for s in range(5)]
    assert any(jsonshape.classify("{" + r.text)["status"] == "malformed" for r in off)
    on = [start(lib, {**PROSE, "prompt": "", "seed": s, "temperature": 2.0,
                      "max_new_tokens": 20}).run() for s in range(10)]
    statuses = {r.trace()["json"]["status"] for r in on}
    assert statuses <= {"valid", "incomplete"}


def test_a_budget_too_small_ends_incomplete_and_says_the_budget_did_it(lib):
    run = start(lib, {**PROSE, "prompt": "", "seed": 0, "greedy": True, "max_new_tokens": 3})
    run.run()
    shape = run.trace()["json"]
    assert run.finish_reason == "length"
    assert shape["status"] == "incomplete" and "budget of 3 new tokens" in shape["error"]


def test_the_explanation_lists_the_likeliest_tokens_the_grammar_removed(lib):
    out = api("preview", {"settings": {**PROSE, "prompt": "The", "seed": 0}}, session="json")
    mask = out["mask"]
    assert mask["kind"] == "json" and mask["why"] == grammar.WHY
    assert mask["kept_count"] + mask["removed_count"] == out["vocab_size"]
    likely = [m["p"] for m in mask["likely"]]
    assert likely == sorted(likely, reverse=True) and len(likely) == 5
    assert all(not m["token_text"].lstrip().startswith("{") for m in mask["likely"])


@pytest.mark.parametrize("raw, field, words", [
    ({"json_mode": "maybe"}, "json_mode", "JSON mode"),
    ({"json_mode": 2}, "json_mode", "JSON mode"),
    ({"json_mode": True, "json_max_depth": 0}, "json_max_depth", "from 1 to 32"),
    ({"json_mode": True, "json_max_depth": 33}, "json_max_depth", "from 1 to 32"),
    ({"json_mode": True, "json_max_depth": "deep"}, "json_max_depth", "JSON depth"),
    ({"json_mode": True, "dataset": "names", "tokenizer": "chars"}, "json_mode",
     "vocabulary has no"),
    ({"json_mode": True, "token_healing": True, "prompt": "The "}, "json_mode",
     "token healing"),
])
def test_settings_json_mode_cannot_honour_are_field_errors(lib, raw, field, words):
    base = {"model": "bigram", "dataset": "prose", "tokenizer": "bpe"}
    with pytest.raises(FieldErrors) as e:
        start(lib, {**base, **raw})
    errors = {err.field: err.message for err in e.value.errors}
    assert field in errors and words in errors[field], errors


def test_the_page_api_keeps_working_after_a_json_mode_error(lib):
    bad = api("start", {"model": "bigram", "dataset": "names", "json_mode": True},
              session="json")
    assert not bad["ok"] and bad["errors"][0]["field"] == "json_mode"
    assert api("start", {**PROSE, "model": "bigram", "seed": 2, "max_new_tokens": 30},
               session="json")["ok"]
    done = api("advance", {"budget_ms": 500}, session="json")
    while not done["done"]:
        assert done["json"] is None  # classified once the run is over
        done = api("advance", {"budget_ms": 500}, session="json")
    assert done["done"] and done["json"]["status"] in ("valid", "incomplete")
    assert done["json"] == jsonshape.classify(done["text"], done["finish_reason"],
                                              done["stop_reason"], 30)


class WhitespaceFirst:
    """A model that, between the tokens of a JSON object, puts the most whitespace it can first:
    outside a string each token's logit is 10 per whitespace byte it holds, and the next
    character of a fixed object (one with no escapes) gets 5. Greedy decoding under the grammar
    then writes as much whitespace as the grammar lets through before each character."""

    def __new__(cls, tokenizer, text):
        from decodelab.core.models.base import Model, Session

        by_bytes = {tokenizer.token_bytes(i): i for i in range(tokenizer.vocab_size)}
        script = [by_bytes[bytes([b])] for b in text.encode()]  # one token a byte
        spaces = np.array([10.0 * sum(c in b" \t\n\r" for c in tokenizer.token_bytes(i))
                           for i in range(tokenizer.vocab_size)])

        class _Session(Session):
            def __init__(self):
                self.fed = []

            def _next(self):
                written = b"".join(tokenizer.token_bytes(t) for t in self.fed)
                z = spaces.copy() if written.count(b'"') % 2 == 0 else np.zeros_like(spaces)
                done = len(b"".join(tokenizer.token_bytes(t).strip() for t in self.fed))
                if done < len(script):  # the next character of the object, by its bytes
                    z[script[done]] += 5.0
                return z

            def prefill(self, ids):
                return self._next()

            def decode(self, token_id):
                self.fed.append(token_id)
                return self._next()

            def append(self, ids):
                self.fed.extend(ids)
                return self._next()

        class _Model(Model):
            context_size = 10_000

            def session(self, shift="reread"):
                return _Session()

        model = _Model()
        model.tokenizer = tokenizer
        return model


def test_a_run_that_wants_whitespace_writes_at_most_the_bound_in_a_gap(lib):
    """The grammar's bound, llama.cpp's `ws ::= | " " | "\\n" [ \\t]{0,20}`: a run whose model
    puts whitespace above everything (greedy) writes, between any two of the object's tokens,
    one space or one newline and at most 20 spaces or tabs, and then the object, which ends the
    answer. Unbounded (RFC 8259's whitespace), the same run wrote whitespace to the budget."""
    from decodelab.core.loops.generate import Generation
    from decodelab.core.rules.settings import validate
    import re

    prose = lib.tokenizer("bpe", "prose")
    obj = '{"a":[1,{"b":"x"}],"c":2}'  # no whitespace of its own, even in its strings
    for ignore_eos in (False, True):  # the end held back too: one gap after the object, then
        # end-of-sequence is the only token left, drawn as the run's end
        s = validate({"greedy": True, "json_mode": True, "max_new_tokens": 2000,
                      "tokenizer": "bpe", "dataset": "prose", "prompt": "The",
                      "ignore_eos": ignore_eos})
        run = Generation(WhitespaceFirst(prose, obj), s)
        run.run()
        assert run.finish_reason == "stop" and run.stop_reason == "eos", run.text[-80:]
        gaps = re.findall(r"\s+", run.text)
        assert re.sub(r"\s+", "", run.text) == obj
        assert gaps and all(re.fullmatch(r" |\n[ \t]{0,20}", g) for g in gaps), gaps
        # the model got all the whitespace the grammar allows, a newline and 20 spaces or tabs,
        # before each of the object's tokens (and after the last where the end was held back)
        assert {len(g) for g in gaps} == {1 + jsonshape.MAX_INDENT}
        tokens = re.findall(r'"[^"]*"|[{}\[\]:,]|\d+', obj)
        assert len(gaps) == len(tokens) + ignore_eos
