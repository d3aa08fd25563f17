"""The live cache check behind the text: its verdicts against the per-step check it replaces
(a full recomputation of each step's window, made at the step itself), through context shifts
(re-read and turned back), a tool's tokens appended in one pass, and a cache broken on purpose."""

import numpy as np
import pytest
from decodelab.core.loops.generate import Generation
from decodelab.core.models.session import Session
from decodelab.core.loops.livecheck import LiveCheck
from decodelab.core.rules.settings import validate
from decodelab.lesson.bugs import FrozenPositionSession

from tests.test_kvcache import make_model


def checked_by_hand(model, session_class, shift, tokens, appends=()):
    """Drive a session and a LiveCheck side by side; at every step also check the old way: the
    logits handed out against a full pass over exactly that step's window, made right then."""
    s = session_class(model, np.float64, shift=shift)
    check = LiveCheck(s, every=5)
    records, expected = [], []
    logits = s.prefill(tokens[:2])
    for step, token in enumerate(tokens[2:]):
        record = {"step": step}
        check.add(record, s)
        records.append(record)
        expected.append(float(np.abs(logits - model.full_logits(s.tokens, np.float64)).max()))
        logits = s.append([token, *appends]) if step == 3 and appends else s.decode(token)
    check.catch_up()
    return records, expected, check


@pytest.mark.parametrize("shift", ["reread", "kshift"])
def test_verdicts_equal_the_per_step_recomputation_through_shifts(shift):
    model = make_model("gqa", context=8, layers=2, seed=3)
    tokens = np.random.default_rng(1).integers(1, model.cfg.vocab_size, 40).tolist()
    records, expected, check = checked_by_hand(model, Session, shift, tokens, appends=(2, 5, 7))
    got = [r["cache_diff"] for r in records]
    assert got == pytest.approx(expected, abs=1e-12)
    assert all(r["cache_ok"] == (r["cache_diff"] <= 1e-9) for r in records)
    if shift == "reread":
        assert all(r["cache_ok"] for r in records)
    else:  # turned-back keys are not exact: the check says so after the first shift
        assert max(got) > 1e-6
    verdicts = check.take()
    assert [v[0] for v in verdicts] == [r["step"] for r in records]  # each step once, in order
    assert check.take() == []  # taken


def test_a_broken_cache_fails_behind_the_text_as_it_failed_at_each_step():
    model = make_model("gqa", context=16, layers=2, seed=2)
    tokens = np.random.default_rng(4).integers(1, model.cfg.vocab_size, 12).tolist()
    records, expected, _ = checked_by_hand(model, FrozenPositionSession, "reread", tokens)
    assert [r["cache_diff"] for r in records] == pytest.approx(expected, abs=1e-12)
    assert not all(r["cache_ok"] for r in records) and records[0]["cache_ok"]


def test_pending_until_it_catches_up_every_n_steps_and_at_the_end():
    model = make_model("gqa", context=16, layers=2, seed=2)
    g = Generation(model, validate({"model": "transformer", "max_new_tokens": 20, "ignore_eos": True,
                                    "seed": 3, "cache_check": True}))
    g.check_every = 8
    seen = []
    for record in g:
        seen.append(record)
        if len(seen) == 5:  # not yet checked: pending, and said so
            assert record["cache_diff"] is None and record["cache_ok"] is None
            assert g.take_checks() == []
        if len(seen) == 9:  # the first 8 were checked when the 8th was added (check_every)
            assert [v[0] for v in g.take_checks()] == list(range(8))
    assert all(r["cache_ok"] for r in g.records)  # the end caught up with the rest
    assert [v[0] for v in g.take_checks()] == list(range(8, 20))
    # the same numbers as a run that checked every step at once
    once = Generation(model, validate({"model": "transformer", "max_new_tokens": 20,
                                       "ignore_eos": True, "seed": 3, "cache_check": True}))
    once.check_every = 1
    once.run()
    assert [r["cache_diff"] for r in g.records] == pytest.approx(
        [r["cache_diff"] for r in once.records], abs=1e-12)


def test_a_cancelled_run_has_every_step_checked_and_no_check_without_the_setting():
    model = make_model("gqa", context=16, layers=2, seed=2)
    g = Generation(model, validate({"model": "transformer", "max_new_tokens": 30, "ignore_eos": True,
                                    "seed": 1, "cache_check": True}))
    for _ in range(6):
        next(g)
    g.cancel()
    assert len(g.records) == 6 and all(r["cache_ok"] for r in g.records)
    off = Generation(model, validate({"model": "transformer", "max_new_tokens": 5, "seed": 1,
                                      "cache_check": False})).run()
    assert all("cache_diff" not in r for r in off.records) and off.take_checks() == []
