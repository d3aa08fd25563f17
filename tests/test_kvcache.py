"""The KV cache held to full recomputation: at every step, for MHA, GQA and MQA, in float32 and
float64; one-pass prefill against token-by-token; batches against single rows; context shifts."""

import numpy as np
import pytest
from decodelab.core.models import layers as tf
from decodelab.core.models.batchsession import BatchSession, left_pad
from decodelab.core.models.checks import cache_check
from decodelab.core.models.uncached import Uncached
from decodelab.core.models.kvcache import KVCache, kv_cache_bytes
from decodelab.core.models.layers import window_start
from decodelab.core.tokens.tokenizer import CharTokenizer
from decodelab.core.models.transformer import TransformerModel
from decodelab.lesson.batch import batch_run

TOL = {np.float32: 1e-5, np.float64: 1e-10}  # cached vs recomputed last-position logits
SHAPES = {"mha": (4, 4), "gqa": (4, 2), "mqa": (4, 1)}  # (n_head, n_kv_head)


def make_model(kind="gqa", context=16, layers=2, seed=0):
    n_head, n_kv_head = SHAPES[kind]
    tok = CharTokenizer("abcdefghij")
    cfg = tf.Config(vocab_size=tok.vocab_size, context_size=context, n_layer=layers, n_embd=16,
                    n_head=n_head, n_kv_head=n_kv_head)
    rng = np.random.default_rng(seed)
    params = {k: (v + rng.standard_normal(v.shape) * 0.3).astype(np.float32)
              for k, v in tf.init_params(cfg, seed).items()}  # away from init: real attention
    return TransformerModel(cfg, params, tok)


def test_worked_numbers_of_the_memory_formula():
    assert kv_cache_bytes(32, 8, 128, 2, 1)["bytes_per_token"] == 131072
    assert kv_cache_bytes(32, 8, 128, 2, 4096)["total_bytes"] == 512 * 2 ** 20
    assert kv_cache_bytes(32, 8, 128, 2, 4096, 8)["total_bytes"] == 4 * 2 ** 30


def test_cache_is_preallocated_per_layer_with_a_length_counter():
    model = make_model("gqa", context=16, layers=3)
    s = model.session()
    assert len(s.cache.k) == len(s.cache.v) == 3
    assert all(a.shape == (1, 2, 16, 4) for a in s.cache.k + s.cache.v)  # [B, Hkv, T_max, D]
    before = [a.ctypes.data for a in s.cache.k]
    s.prefill([1, 2, 3])
    assert s.length == 4  # EOS + 3
    s.decode(4)
    assert s.length == 5 and [a.ctypes.data for a in s.cache.k] == before  # never reallocated
    per_token = kv_cache_bytes(3, 2, 4, s.dtype.itemsize, 1)["bytes_per_token"]
    assert s.cache.bytes_allocated == 16 * per_token and s.length == 5


def test_a_cache_that_grows_by_blocks_holds_and_gives_what_a_preallocated_one_does():
    """cache_reserve = 3 on a window of 16: the arrays start at 3 positions and grow by 3 when a
    write needs room (never past 16), while every logit, key and value, through a prefill,
    decodes, a fork, a rewind, a context shift (both kinds) and a beam-style reorder, equals the
    preallocated cache's exactly."""
    whole, grown = make_model("gqa", context=16, layers=3), make_model("gqa", context=16, layers=3)
    grown.cache_reserve = 3
    for shift in ("reread", "kshift"):
        a, b = whole.session(shift=shift), grown.session(shift=shift)
        assert a.cache.allocated == 16 and b.cache.allocated == 3
        assert b.cache.bytes_allocated == a.cache.bytes_allocated * 3 // 16
        np.testing.assert_array_equal(a.prefill([1, 2, 3, 4]), b.prefill([1, 2, 3, 4]))
        assert b.cache.allocated == 6  # EOS + 4 = 5 positions: two blocks of 3
        sizes = []
        for t in range(20):  # past the window: the context shifts
            np.testing.assert_array_equal(a.decode(1 + t % 9), b.decode(1 + t % 9))
            sizes.append(b.cache.allocated)
        assert sizes[:3] == [6, 9, 9] and max(sizes) == 16 and sizes == sorted(sizes)
        assert a.shifts == b.shifts > 0
        for K, L in zip(a.cache.k + a.cache.v, b.cache.k + b.cache.v):
            np.testing.assert_array_equal(K[:, :, :a.length], L[:, :, :b.length])
    c, d = whole.session(), grown.session()
    c.prefill([5, 6]), d.prefill([5, 6])
    fc, fd = c.fork(), d.fork()
    assert fd.cache.allocated == 3
    for t in (7, 8, 9):
        np.testing.assert_array_equal(fc.decode(t), fd.decode(t))
    assert fd.cache.allocated == 6 and d.cache.allocated == 3  # the fork grew, not its source
    fd.rewind(2), fc.rewind(2)
    np.testing.assert_array_equal(fc.decode(1), fd.decode(1))
    assert fd.check() < 1e-5
    rows = [[1, 2, 3], [4, 5]]
    ba, bb = BatchSession(whole, 2), BatchSession(grown, 2)
    np.testing.assert_array_equal(ba.prefill(rows), bb.prefill(rows))
    ba.reorder([1, 1]), bb.reorder([1, 1])
    np.testing.assert_array_equal(ba.decode([6, 7]), bb.decode([6, 7]))
    assert bb.cache.allocated == 6


def test_a_decode_step_writes_exactly_one_position():
    s = make_model().session()
    s.prefill([1, 2])
    k_before = s.cache.k[0].copy()
    s.decode(3)
    changed = np.nonzero((s.cache.k[0] != k_before).any(axis=(0, 1, 3)))[0]
    assert changed.tolist() == [3]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["mha", "gqa", "mqa"])
def test_cached_equals_recompute_at_every_step(kind, dtype):
    rng = np.random.default_rng(1)
    for trial in range(4):
        model = make_model(kind, context=32, seed=trial)
        s = model.session(dtype=dtype)
        prompt = rng.integers(1, 11, size=int(rng.integers(0, 12))).tolist()
        logits = s.prefill(prompt)
        worst = np.abs(logits - s.recompute_logits()).max()
        for _ in range(12):
            logits = s.decode(int(rng.integers(1, 11)))
            worst = max(worst, np.abs(logits - s.recompute_logits()).max())
        assert logits.dtype == dtype
        assert worst < TOL[dtype], (kind, trial, worst)


def test_cached_equals_recompute_over_random_configs():
    """Random depth, width, heads and context; prompts sometimes longer than the context."""
    rng = np.random.default_rng(11)
    tok = CharTokenizer("abcdefghij")
    for trial in range(10):
        n_head = int(rng.choice([1, 2, 4, 8]))
        n_kv_head = int(rng.choice([d for d in (1, 2, 4, 8) if n_head % d == 0]))
        cfg = tf.Config(vocab_size=tok.vocab_size, context_size=int(rng.integers(4, 24)),
                        n_layer=int(rng.integers(1, 4)), n_embd=8 * n_head, n_head=n_head,
                        n_kv_head=n_kv_head, mlp_hidden=8 * int(rng.integers(1, 5)))
        params = {k: v + rng.standard_normal(v.shape).astype(np.float32) * 0.3
                  for k, v in tf.init_params(cfg, trial).items()}
        s = TransformerModel(cfg, params, tok).session(dtype=np.float64)
        logits = s.prefill(rng.integers(1, 11, size=int(rng.integers(0, 30))).tolist())
        worst = np.abs(logits - s.recompute_logits()).max()
        for _ in range(15):
            logits = s.decode(int(rng.integers(1, 11)))
            worst = max(worst, np.abs(logits - s.recompute_logits()).max())
        assert worst < 1e-10, (cfg, worst)


@pytest.mark.parametrize("kind", ["mha", "gqa", "mqa"])
def test_one_pass_prefill_equals_token_by_token(kind):
    model = make_model(kind, context=16)
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    one = model.session(dtype=np.float64)
    logits_one = one.prefill(prompt)
    step = model.session(dtype=np.float64)
    step.prefill([])
    for t in prompt:
        logits_step = step.decode(t)
    np.testing.assert_allclose(logits_one, logits_step, atol=1e-12)
    assert one.length == step.length == len(prompt) + 1
    for a, b in zip(one.cache.k + one.cache.v, step.cache.k + step.cache.v):
        np.testing.assert_allclose(a[:, :, :one.length], b[:, :, :step.length], atol=1e-12)


def test_uncached_full_forward_matches_the_training_forward():
    """recompute_logits is the training code path (gains not folded), so it also checks the
    inference weights: the cached path folds the gains and 1/sqrt(D) into the matrices."""
    model = make_model("gqa")
    s = model.session(dtype=np.float64)
    logits = s.prefill([2, 7, 1])
    p = model.params_as(np.float64)
    idx = np.array([[0, 2, 7, 1]])
    full, _ = tf.forward(p, model.cfg, idx, np.arange(4)[None],
                         tf.causal_bias(4, np.float64)[None, None])
    np.testing.assert_allclose(logits, full[0, -1], atol=1e-12)


def test_window_start_follows_the_shift_rule_token_by_token():
    for T in (4, 5, 8):
        window = []
        for n in range(1, 40):
            if len(window) == T:  # full: keep the newest T // 2
                window = window[T - T // 2:]
            window.append(n - 1)
            assert window_start(n, T) == window[0], (T, n)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_context_shift_keeps_cached_equal_to_recompute(dtype):
    model = make_model("gqa", context=8)
    rng = np.random.default_rng(2)
    s = model.session(dtype=dtype)
    s.prefill([1, 2, 3])
    shifts_seen = 0
    for step in range(30):
        logits = s.decode(int(rng.integers(1, 11)))
        shifts_seen += s.shifted
        assert s.length <= 8 and s.length == len(s.tokens)
        assert np.abs(logits - s.recompute_logits()).max() < TOL[dtype]
    assert s.shifts == shifts_seen >= 6  # 34 tokens through a window of 8, halved each time


def test_a_long_prompt_is_windowed_as_if_fed_token_by_token():
    model = make_model("mqa", context=8)
    prompt = [1 + i % 10 for i in range(21)]
    one = model.session(dtype=np.float64)
    logits_one = one.prefill(prompt)
    step = model.session(dtype=np.float64)
    step.prefill([])
    for t in prompt:
        logits_step = step.decode(t)
    assert one.tokens == step.tokens and one.shifts == step.shifts > 0
    np.testing.assert_allclose(logits_one, logits_step, atol=1e-12)


def test_the_uncached_session_follows_the_cached_sessions_window_rule():
    """One context-shift rule for both: after a long prompt, decode steps through full windows
    and an append that overflows, the windows, the logits and the shift counts agree."""
    model = make_model("gqa", context=8)
    cached = model.session(dtype=np.float64)
    uncached = Uncached(model).session(dtype=np.float64)
    for s in (cached, uncached):
        s.prefill([1 + i % 10 for i in range(13)])  # longer than the window: shifted at once
    assert cached.tokens == uncached.tokens and cached.shifts == uncached.shifts == 2
    for t in [3, 4, 5, 6, 7]:
        a, b = cached.decode(t), uncached.decode(t)
        assert cached.tokens == uncached.tokens and cached.shifted == uncached.shifted
        np.testing.assert_allclose(a, b, atol=1e-12)
    a, b = cached.append([1, 2, 3, 4, 5, 6, 7]), uncached.append([1, 2, 3, 4, 5, 6, 7])
    assert cached.tokens == uncached.tokens and cached.shifts == uncached.shifts
    np.testing.assert_allclose(a, b, atol=1e-12)


def test_left_pad_positions_are_the_cumulative_mask_minus_one():
    ids, valid, pos = left_pad([[5, 6, 7], [8], []])
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8], [0, 0, 0]]
    assert valid.tolist() == [[True] * 3, [False, False, True], [False] * 3]
    assert pos.tolist() == [[0, 1, 2], [0, 0, 0], [0, 0, 0]]


@pytest.mark.parametrize("kind", ["mha", "gqa", "mqa"])
def test_batch_rows_match_single_runs(kind):
    model = make_model(kind, context=24)
    prompts = [[1, 2, 3, 4, 5, 6, 7], [], [9, 9], [3, 1, 4, 1, 5]]  # different lengths
    batch = BatchSession(model, len(prompts))
    logits = batch.prefill(prompts)
    singles = [model.session() for _ in prompts]
    expected = np.stack([s.prefill(p) for s, p in zip(singles, prompts)])
    assert np.abs(logits - expected).max() < 1e-5
    rng = np.random.default_rng(3)
    for _ in range(8):
        tokens = rng.integers(1, 11, size=len(prompts))
        logits = batch.decode(tokens)
        expected = np.stack([s.decode(int(t)) for s, t in zip(singles, tokens)])
        assert np.abs(logits - expected).max() < 1e-5
        assert np.abs(logits - batch.recompute_logits()).max() < 1e-5
    assert batch.padding[1].sum() == 7 and batch.padding[0].sum() == 0  # row 1: 7 pad slots


def test_batch_stops_when_its_context_is_full():
    model = make_model("gqa", context=6)
    batch = BatchSession(model, 2)
    batch.prefill([[1, 2], [3]])
    for t in range(3):
        batch.decode([1, 2])
    with pytest.raises(ValueError, match="full"):
        batch.decode([1, 2])
    with pytest.raises(ValueError, match="context"):
        BatchSession(model, 1).prefill([[1] * 6])


def test_cache_refuses_to_write_past_its_end():
    cache = KVCache(1, 1, 1, 2, 4)
    q = np.zeros((1, 1, 3, 4), np.float32)
    with pytest.raises(ValueError, match="full"):
        cache.attend(0, q, q, q)


def test_cache_check_reports_every_step_within_tolerance():
    model = make_model("gqa", context=8)
    out = cache_check(model, [1, 2, 3], steps=20, seed=5)
    assert out["steps"] == len(out["per_step"]) == 20 and out["shifts"] >= 2
    assert out["ok"] and out["max_abs_diff"] < 1e-5 and out["tolerance"] == 1e-4
    assert cache_check(model, [1, 2, 3], steps=20, seed=5) == out  # seeded
    assert cache_check(model, [], 5, dtype=np.float64)["max_abs_diff"] < 1e-10


def test_session_check_and_batch_check():
    model = make_model("mqa", context=16)
    s = model.session()
    s.prefill([4, 5])
    s.decode(6)
    assert s.check() < 1e-5
    out = batch_run(model, [[1, 2, 3, 4], [5], []], steps=6, dtype=np.float32)
    assert out["steps"] == 6 and out["diff"].max() < 1e-5
    assert out["padding"][2][:4].tolist() == [True] * 4 and not out["padding"][0].any()


def test_step_costs_clip_and_merge_lengths_and_count_bytes_read():
    from decodelab.lesson.costs import step_costs

    model = make_model("gqa", context=16)
    rows = step_costs(model, [4, 16, 99, 16], repeats=3, dtype=np.float32)["rows"]
    assert [r["context"] for r in rows] == [4, 16]  # 99 clipped to the context, duplicates merged
    per_token = kv_cache_bytes(2, 2, 4, 4, 1)["bytes_per_token"]
    assert [r["kv_bytes_read"] for r in rows] == [4 * per_token, 16 * per_token]
    assert all(r["cached_ms"] > 0 and r["uncached_ms"] > 0 for r in rows)


def test_the_k_shift_turns_keys_back_and_is_exact_in_the_first_layer_only():
    """llama.cpp's context shift against the re-read: the same window, nothing read again;
    layer 0's keys (the token alone, turned by its new position) agree with a re-read to the
    rounding of float32 angles, deeper layers do not (they saw the dropped tokens), and the
    live check says so at the shift and less and less after it."""
    from decodelab.core.models.session import Session

    model = make_model("gqa", context=16, layers=3, seed=4)
    reread, kshift = Session(model, np.float64), Session(model, np.float64, shift="kshift")
    a, b = reread.prefill([1, 2, 3]), kshift.prefill([1, 2, 3])
    rng, shifted_checks = np.random.default_rng(5), []
    for step in range(30):
        token = int(rng.integers(1, model.cfg.vocab_size))
        a, b = reread.decode(token), kshift.decode(token)
        assert reread.tokens == kshift.tokens and reread.length == kshift.length
        assert kshift.shifted == reread.shifted and kshift.shifts == reread.shifts
        if not reread.shifts:
            assert np.array_equal(a, b)  # before the first shift they are one computation
            continue
        n = kshift.length
        layer0 = np.abs(reread.cache.k[0][..., :n, :] - kshift.cache.k[0][..., :n, :]).max()
        values0 = np.abs(reread.cache.v[0][..., :n, :] - kshift.cache.v[0][..., :n, :]).max()
        assert layer0 < 1e-4 and values0 < 1e-12  # values are not rotated: moved as they are
        deeper = np.abs(reread.cache.k[2][..., :n, :] - kshift.cache.k[2][..., :n, :]).max()
        assert deeper > 1e-3
        assert kshift.check() == pytest.approx(np.abs(a - b).max(), abs=1e-12)  # re-read = full
        if kshift.shifted:
            shifted_checks.append(kshift.check())
    assert shifted_checks and min(shifted_checks) > kshift.tolerance
    with pytest.raises(ValueError, match="shift must be one of reread, kshift"):
        Session(model, shift="rotate")


# --- what a cache does to itself: truncate, reorder, shift (each cache type owns them) ------

def _filled_cache(batch=3, n=5, seed=0):
    """A KVCache of 2 layers with n positions of random keys and values, and padding bias."""
    rng = np.random.default_rng(seed)
    cache = KVCache(2, batch, 2, 8, 4, np.float64)
    for arrays in (cache.k, cache.v):
        for a in arrays:
            a[:] = rng.standard_normal(a.shape)
    cache.length = n
    cache.set_padding(np.array([[True] * 2, [False, True], [True] * 2])[:batch])
    return cache


def test_reorder_makes_each_row_a_copy_of_the_row_it_names():
    cache = _filled_cache()
    before = [a.copy() for a in cache.k + cache.v]
    bias = cache.key_bias.copy()
    cache.reorder(np.array([2, 2, 0]))
    for old, new in zip(before, cache.k + cache.v):
        assert np.array_equal(new, np.stack([old[2], old[2], old[0]]))
    assert np.array_equal(cache.key_bias, bias[[2, 2, 0]])
    cache.k[0][0, 0, 0, 0] += 1.0  # rows that copied one row grow on their own
    assert cache.k[0][1, 0, 0, 0] != cache.k[0][0, 0, 0, 0]


def test_shift_drops_the_oldest_positions_and_turns_only_the_keys():
    cache = _filled_cache(batch=1, n=6)
    k, v = [a.copy() for a in cache.k], [a.copy() for a in cache.v]
    cache.shift(2, lambda keys: -keys)  # a stand-in turn: the cache applies it to keys alone
    assert cache.length == 4
    for old, new in zip(k, cache.k):
        assert np.array_equal(new[:, :, :4], -old[:, :, 2:6])
    for old, new in zip(v, cache.v):
        assert np.array_equal(new[:, :, :4], old[:, :, 2:6])


def test_truncate_forgets_the_positions_after_n():
    cache = _filled_cache(batch=1, n=6)
    kept = cache.k[0][:, :, :3].copy()
    cache.truncate(3)
    assert cache.length == 3 and np.array_equal(cache.k[0][:, :, :3], kept)


def test_a_batch_reorders_its_cache_tokens_padding_and_positions_together():
    """BatchSession.reorder: after it, each row decodes as the row it copied would have, so the
    cached logits still equal a full recomputation of every row."""
    model = make_model("gqa", context=16)
    b = BatchSession(model, 3, np.float64)
    b.prefill([[1, 2], [3], [4, 5, 6]])
    b.decode([7, 8, 9])
    ids, pos = b.ids.copy(), b.next_pos.copy()
    b.reorder(np.array([2, 0, 0]))
    assert np.array_equal(b.ids, ids[[2, 0, 0]]) and np.array_equal(b.next_pos, pos[[2, 0, 0]])
    logits = b.decode([1, 2, 3])
    assert np.abs(logits - b.recompute_logits()).max() < TOL[np.float64]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_without_blas_large_matrices_go_through_einsum_with_the_same_logits(monkeypatch, dtype):
    """Pyodide's numpy has no BLAS: there a decode step's vector, and a prefill's rows, times a
    large matrix go through einsum (products.times), twice as fast as `@` there. Here, with
    that path switched on (and einsum's calls made small, so a prefill's rows are split), the
    same prefill and decode steps give the same logits, and einsum did the products."""
    from decodelab.core.models import cachedforward, products

    tok = CharTokenizer("abcdefghij")
    cfg = tf.Config(vocab_size=tok.vocab_size, context_size=16, n_layer=2, n_embd=384,
                    n_head=6, n_kv_head=2)
    params = {k: v.astype(np.float32) for k, v in tf.init_params(cfg, 3).items()}
    model = TransformerModel(cfg, params, tok)
    ids = tok.encode("abcab")

    def steps():
        s = model.session(dtype=dtype)
        out = [s.prefill(ids)]
        for t in (2, 5, 7, 1):
            out.append(s.decode(t))
        return np.array(out)

    with_blas = steps()
    calls = []
    einsum = np.einsum

    def counted(subscripts, *operands, **kw):
        calls.append((subscripts, operands[0].shape[0]))
        return einsum(subscripts, *operands, **kw)

    monkeypatch.setattr(products, "NO_BLAS", True)
    # at most 3 rows of the largest matrix (384 x 2048) per call: the prefill's rows in two
    monkeypatch.setattr(products, "EINSUM_MOST", 3 * 384 * 2048)
    monkeypatch.setattr(np, "einsum", counted)
    without = steps()
    # per layer: the qkv, output and two MLP matrices (the head, 384 x 11, is under
    # EINSUM_FROM and keeps `@`); each decode step's vector in one call, the prefill's rows in
    # calls of at most EINSUM_MOST multiply-adds
    big = [w for w in cachedforward.weights_of(model, dtype).layers[0]]
    assert all(m.size >= products.EINSUM_FROM for m in big)
    vectors = [n for sub, n in calls if sub == "oi,i->o"]
    rows = [n for sub, n in calls if sub == "ti,oi->to"]
    assert len(vectors) == 4 * cfg.n_layer * 4
    prefilled = model.session(dtype=dtype)
    prefilled.prefill(ids)
    n = prefilled.length  # the prompt's positions (its start token too)
    assert sum(rows) == n * 4 * cfg.n_layer and n > 3 and max(rows) == n and 3 in rows
    np.testing.assert_allclose(without, with_blas, rtol=0, atol=TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_large_model_shares_its_matrices_and_gives_the_folded_logits(monkeypatch, dtype):
    """Over FOLD_UP_TO bytes of parameters (SmolLM2), the inference weights are the parameters
    themselves where the dtype is theirs, with the norms' gains and the query scale applied to
    vectors: the same prefill and steps, batched too, give the logits of the folded form."""
    from decodelab.core.models import cachedforward

    model = make_model("gqa", context=16, layers=2, seed=4)
    # column-major, as a GGUF file's matrices are read (pretrained/model.py: transposed views)
    model.params.update({k: np.asfortranarray(v) for k, v in model.params.items()})
    ids = [0, 3, 1, 4, 1, 5]

    def steps():
        model.derived.clear()
        s = model.session(dtype=dtype)
        out = [s.prefill(ids)]
        for t in (2, 6, 5, 3):
            out.append(s.decode(t))
        batch = BatchSession(model, 2, dtype)
        rows = [batch.prefill([ids, ids[:3]])]
        rows.append(batch.decode([2, 7]))
        return np.array(out), np.array(rows), cachedforward.weights_of(model, dtype)

    folded, folded_rows, w = steps()
    assert w.folded and w.q_scale is None
    monkeypatch.setattr(cachedforward, "FOLD_UP_TO", 0)
    shared, shared_rows, w = steps()
    assert not w.folded and w.q_scale == pytest.approx(1 / np.sqrt(model.cfg.head_dim))
    same = np.dtype(dtype) == model.params["h0.w_fc"].dtype  # float32 parameters
    for got, name in zip(w.layers[0], ("w_qkv", "w_o", "w_fc", "w_proj")):
        assert np.shares_memory(got, model.params[f"h0.{name}"]) is same, name
    assert np.shares_memory(w.wte, model.params["wte"]) is same
    np.testing.assert_allclose(shared, folded, rtol=0, atol=TOL[dtype])
    np.testing.assert_allclose(shared_rows, folded_rows, rtol=0, atol=TOL[dtype])
