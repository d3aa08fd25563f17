"""Resuming from the cache after a tool result, sharing a prefill between samples, and what a
cache is not: each checked against a full recomputation with the same (randomly initialised)
transformer, in float64 where rounding is ~1e-14."""

import numpy as np
import pytest
from decodelab.core.models import checks, session
from decodelab.core.tasks import data as tasks
from decodelab.core.tokens.bpe import BPE
from decodelab.core.loops.generate import Generation, Prefix
from decodelab.core.models.layers import Config, init_params, window_start
from decodelab.core.rules.settings import validate
from decodelab.core.models.transformer import TransformerModel
from decodelab.lesson.accuracy import wilson

from tests.test_tool_calls import TOK

F64 = np.float64


def model(context=32, seed=0):
    cfg = Config(vocab_size=TOK.vocab_size, context_size=context, n_layer=2, n_embd=32,
                 n_head=4, n_kv_head=2)
    return TransformerModel(cfg, init_params(cfg, seed, dtype=np.float64), TOK)


def ids(n, seed=1):
    return np.random.default_rng(seed).integers(1, TOK.vocab_size, n).tolist()


def test_append_computes_only_the_new_tokens_and_matches_a_recomputation(monkeypatch):
    m = model()
    s = m.session(dtype=F64)
    prompt, extra = ids(9), ids(5, seed=2)
    s.prefill(prompt)
    before = [k[:, :, :s.length].copy() for k in s.cache.k]
    n_before = s.length
    fed = []
    real = session.cached_forward
    monkeypatch.setattr(session, "cached_forward",
                        lambda w, c, idx, pos, **kw: fed.append(idx.shape[1])
                        or real(w, c, idx, pos, **kw))
    logits = s.append(extra)
    assert fed == [len(extra)]  # one pass over the appended tokens, nothing else
    assert s.length == n_before + len(extra)
    for old, k in zip(before, s.cache.k):  # the earlier keys were not touched
        assert np.array_equal(old, k[:, :, :n_before])
    full = m.full_logits([0] + prompt + extra, F64)
    assert np.abs(logits - full).max() < 1e-9


def test_an_append_that_overflows_shifts_the_context_by_the_decode_rule():
    m = model(context=16)
    prompt, extra = ids(10), ids(9, seed=3)
    a = m.session(dtype=F64)
    a.prefill(prompt)
    got = a.append(extra)
    b = m.session(dtype=F64)  # the same tokens one at a time, through decode's own rule
    b.prefill(prompt)
    for t in extra:
        want = b.decode(t)
    assert a.shifted and a.shifts == b.shifts
    assert a.tokens == b.tokens
    seen = 1 + len(prompt) + len(extra)
    assert a.tokens == ([0] + prompt + extra)[window_start(seen, 16):]
    assert np.abs(got - want).max() < 1e-9
    assert np.abs(got - m.full_logits(a.tokens, F64)).max() < 1e-9


def test_a_shared_prefix_gives_the_same_logits_as_its_own_prefill():
    m = model()
    prompt = ids(12)
    shared = Prefix(m, prompt)
    own = m.session(dtype=F64)
    assert np.array_equal(shared.logits, own.prefill(prompt))
    fork = shared.session.fork()
    for t in ids(6, seed=4):
        assert np.array_equal(fork.decode(t), own.decode(t))
    # the fork wrote its own cache: the shared one still holds the prompt alone
    again = shared.session.fork()
    fresh = m.session(dtype=F64)
    fresh.prefill(prompt)
    assert np.array_equal(again.decode(7), fresh.decode(7))


def test_runs_from_a_shared_prefix_equal_runs_with_their_own_prefill():
    m = model()
    raw = {"tokenizer": "bpe", "prompt": "What is 12 plus 7?", "max_new_tokens": 15,
           "ignore_eos": True, "temperature": 1.3}
    prefix = Prefix(m, tasks.question_ids(TOK, raw["prompt"]))
    for seed in range(3):
        s = validate({**raw, "seed": seed})
        a = Generation(m, s, prefix=prefix).run().trace()
        b = Generation(m, s).run().trace()
        assert a == b


def test_what_a_cache_is_not():
    m = model()
    prompt, extra = ids(10), ids(4, seed=5)
    r = checks.reuse_check(m, prompt, extra, change_at=3, new_token=(prompt[3] % 50) + 1)
    assert r["append"]["ok"] and r["append"]["diff"] < 1e-9
    assert not r["edit"]["ok"] and r["edit"]["diff"] > 1e-3
    assert r["append"]["cache_length"] == 1 + len(prompt) + len(extra)


@pytest.mark.parametrize("k, n, low, high", [
    (5, 10, 0.2366, 0.7634), (0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0), (81, 263, 0.2553, 0.3662),
])
def test_wilson_intervals_against_published_values(k, n, low, high):
    lo, hi = wilson(k, n)
    assert lo == pytest.approx(low, abs=1e-4) and hi == pytest.approx(high, abs=1e-4)
    assert (lo == 0.0) == (k == 0) and (hi == 1.0) == (k == n)  # exact at the ends, not 1e-17


def test_wilson_interval_by_its_definition():
    """The Wilson interval is the set of p whose score test does not reject k of n: its ends
    solve (k/n - p)^2 = z^2 p (1 - p) / n."""
    z = 1.959963984540054
    for k, n in [(3, 7), (12, 40), (199, 200)]:
        for p in wilson(k, n):
            assert (k / n - p) ** 2 == pytest.approx(z * z * p * (1 - p) / n, abs=1e-12)


def test_the_tokenizer_round_trip_keeps_markers_out_of_text():
    rebuilt = BPE(TOK.merges, TOK.specials)
    line = tasks.example("plus", 12, 7, tasks.PHRASINGS["plus"][0])["line"]
    assert rebuilt.encode_marked(line) == TOK.encode_marked(line)
    assert rebuilt.decode(rebuilt.encode_marked(line)) == \
        "What is 12 plus 7?12+719The answer is 19."
