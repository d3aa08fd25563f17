"""The transformer's maths: every backward against central finite differences (float64), the
masks and positions, and scoring that matches what generation sees."""

import math

import numpy as np
import pytest
from decodelab.core.models import layers as tf
from decodelab.core.tokens.corpus import Corpus
from decodelab.core.tokens.tokenizer import EOS, CharTokenizer
from decodelab.core.models.transformer import TransformerModel

TOL = 1e-5  # relative error of analytic vs numerical gradients (float64)


def numeric_grad(f, x, h=1e-5):
    """Central differences of the scalar f() with respect to every entry of x (edited in place)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + h
        up = f()
        x[i] = old - h
        down = f()
        x[i] = old
        g[i] = (up - down) / (2 * h)
    return g


def rel_error(a, b) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(a) + np.linalg.norm(b), 1e-12))


def check_layer(forward, backward, inputs: dict, seed=0):
    """Loss = sum(R * out) for a fixed random R; compare backward(R) with finite differences
    for every named input. backward returns gradients in the order of `inputs`."""
    rng = np.random.default_rng(seed)
    out, _ = forward(**inputs)
    R = rng.standard_normal(out.shape)
    _, cache = forward(**inputs)
    grads = backward(R, cache)
    grads = grads if isinstance(grads, tuple) else (grads,)
    for (name, x), g in zip(inputs.items(), grads):
        num = numeric_grad(lambda: float((forward(**inputs)[0] * R).sum()), x)
        assert rel_error(g, num) < TOL, name


def rand(rng, *shape, scale=1.0):
    return rng.standard_normal(shape) * scale


CONFIGS = [  # MHA, GQA, MQA
    tf.Config(vocab_size=7, context_size=6, n_layer=2, n_embd=8, n_head=2, n_kv_head=2),
    tf.Config(vocab_size=7, context_size=6, n_layer=2, n_embd=8, n_head=4, n_kv_head=2),
    tf.Config(vocab_size=7, context_size=6, n_layer=1, n_embd=8, n_head=4, n_kv_head=1),
]


def test_rmsnorm_gradients():
    rng = np.random.default_rng(1)
    check_layer(tf.rmsnorm_forward, tf.rmsnorm_backward,
                {"x": rand(rng, 2, 3, 5), "g": rand(rng, 5) + 1.0})


def test_swiglu_gradients_and_values():
    rng = np.random.default_rng(2)
    check_layer(lambda a: (tf.swiglu_forward(a), a), tf.swiglu_backward,
                {"a": rand(rng, 3, 8) * 2})
    m = tf.swiglu_forward(np.array([-3.0, 0.0, 1.0, 2.0, 5.0, -1.0]))  # gates | ups
    # silu(g) = g / (1 + e^-g): silu(-3) = -0.142278, silu(1) = 0.731059 (published values)
    np.testing.assert_allclose(m, [-0.142278 * 2.0, 0.0, 0.731059 * -1.0], atol=1e-6)


def test_mlp_gradients():
    rng = np.random.default_rng(3)
    check_layer(tf.mlp_forward, tf.mlp_backward,
                {"h": rand(rng, 2, 3, 4), "w_fc": rand(rng, 4, 16, scale=0.5),
                 "w_proj": rand(rng, 8, 4, scale=0.5)})


def rotation(cfg, pos, dtype=np.float64):
    cos, sin = tf.rope_tables(cfg, dtype, int(np.max(pos)) + 1)
    return cos[pos], sin[pos]


def test_rope_gradient_rotation_and_relative_positions():
    cfg = tf.Config(vocab_size=7, context_size=6, n_layer=1, n_embd=16, n_head=2, n_kv_head=1)
    rng, D = np.random.default_rng(10), cfg.head_dim  # D = 8: four pairs
    pos = np.array([[0, 1, 5, 2]])
    cos, sin = rotation(cfg, pos)
    check_layer(lambda x: (tf.rope(x, cos, sin), None),
                lambda dy, _: tf.rope_backward(dy, cos, sin), {"x": rand(rng, 1, 4, D)})
    # by hand: pair (i, i + D/2) turned by pos * 10000^(-2i/D), angles as transformers makes them
    x = rand(rng, D)
    p = 5
    ang = p * (np.float32(1) / np.float32(10000.0) ** (np.arange(0, D, 2, dtype=np.float32)
                                                       / np.float32(D)))
    c, s_ = np.cos(ang.astype(np.float32)).astype(float), np.sin(ang.astype(np.float32)).astype(float)
    h = D // 2
    want = np.concatenate([x[:h] * c - x[h:] * s_, x[h:] * c + x[:h] * s_])
    np.testing.assert_allclose(tf.rope(x, *[t[p] for t in tf.rope_tables(cfg, np.float64)]),
                               want, atol=1e-15)
    # a rotation keeps lengths, and q.k depends only on the distance between the positions
    table = tf.rope_tables(cfg, np.float64, 64)
    q, k = rand(rng, D), rand(rng, D)
    turn = lambda v, t: tf.rope(v, table[0][t], table[1][t])  # noqa: E731
    assert np.linalg.norm(turn(q, 9)) == pytest.approx(np.linalg.norm(q))
    dots = [turn(q, a + 3) @ turn(k, a) for a in (0, 7, 40)]
    np.testing.assert_allclose(dots, dots[0], rtol=1e-5)  # angles rounded in float32


@pytest.mark.parametrize("cfg", CONFIGS, ids=["mha", "gqa", "mqa"])
def test_attention_gradients(cfg):
    rng = np.random.default_rng(4)
    B, T, C = 2, 5, cfg.n_embd
    idx = np.array([[3, 1, EOS, 2, 4], [1, 2, 3, EOS, 5]])  # EOS mid-row: the segment mask
    pos, bias = tf.segment_layout(idx, np.float64)
    rot = rotation(cfg, pos)
    Q = (cfg.n_head + 2 * cfg.n_kv_head) * cfg.head_dim
    check_layer(lambda h, w_qkv, w_o: tf.attention_forward(h, w_qkv, w_o, bias, rot, cfg),
                tf.attention_backward,
                {"h": rand(rng, B, T, C), "w_qkv": rand(rng, C, Q, scale=0.7),
                 "w_o": rand(rng, C, C, scale=0.5)})


def test_embedding_gradients_with_repeated_ids():
    rng = np.random.default_rng(5)
    idx = np.array([[1, 1, 2], [0, 1, 1]])
    check_layer(lambda wte: tf.embed_forward(wte, idx), tf.embed_backward,
                {"wte": rand(rng, 4, 3)})


def test_dropout_gradient_uses_the_same_mask():
    x = np.random.default_rng(6).standard_normal((4, 5))
    check_layer(lambda x: tf.dropout_forward(x, 0.3, np.random.default_rng(0)),
                tf.dropout_backward, {"x": x})
    y, keep = tf.dropout_forward(np.ones((200, 200)), 0.25, np.random.default_rng(1))
    assert abs(y.mean() - 1.0) < 0.02 and set(np.unique(keep)) == {0.0, 1 / 0.75}


def test_block_gradients():
    cfg, rng = CONFIGS[1], np.random.default_rng(7)
    params = tf.init_params(cfg, 0, np.float64)
    lp = {k: v + rand(rng, *v.shape, scale=0.3) for k, v in tf.layer_params(params, 0).items()}
    pos, bias = tf.segment_layout(np.array([[1, 2, 3, 4]]), np.float64)
    rot = rotation(cfg, pos)

    def forward(x, **weights):
        return tf.block_forward(x, weights, bias, rot, cfg)

    def backward(dy, cache):
        dx, g = tf.block_backward(dy, cache)
        return (dx,) + tuple(g[k] for k in tf.LAYER_KEYS)

    check_layer(forward, backward, {"x": rand(rng, 1, 4, cfg.n_embd), **lp})


def test_cross_entropy_gradient_and_value():
    rng = np.random.default_rng(8)
    logits, targets = rand(rng, 2, 3, 5), rng.integers(0, 5, (2, 3))
    weights = np.array([[1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    loss, dlogits = tf.cross_entropy(logits, targets, weights)
    num = numeric_grad(lambda: tf.cross_entropy(logits, targets, weights)[0], logits)
    assert rel_error(dlogits, num) < TOL
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    picked = np.take_along_axis(logp, targets[..., None], -1)[..., 0]
    assert loss == pytest.approx(-(picked * weights).sum() / weights.sum())


@pytest.mark.parametrize("cfg", CONFIGS, ids=["mha", "gqa", "mqa"])
def test_whole_model_loss_gradients(cfg):
    """Every parameter of the model, through the loss, with an EOS reset inside a row."""
    rng = np.random.default_rng(9)
    params = {k: v + rand(rng, *v.shape, scale=0.2)
              for k, v in tf.init_params(cfg, 0, np.float64).items()}
    idx = np.array([[EOS, 3, 1, 4, EOS, 2], [5, 6, EOS, 1, 1, 2]])
    targets, weights = rng.integers(0, cfg.vocab_size, idx.shape), np.ones(idx.shape)
    _, grads = tf.loss_and_grads(params, cfg, idx, targets, weights)
    assert set(grads) == set(params)
    for name, p in params.items():
        num = numeric_grad(lambda: tf.loss_and_grads(params, cfg, idx, targets, weights)[0], p)
        assert rel_error(grads[name], num) < TOL, name


def test_segment_layout_resets_positions_and_hides_earlier_sequences():
    pos, bias = tf.segment_layout(np.array([[4, 5, EOS, 6, EOS, 7]]), np.float64)
    assert pos.tolist() == [[0, 1, 0, 1, 0, 1]]
    seen = bias[0, 0] == 0
    assert seen[1].tolist() == [True, True, False, False, False, False]
    assert seen[3].tolist() == [False, False, True, True, False, False]
    assert seen[5].tolist() == [False, False, False, False, True, True]


def test_config_rejects_heads_that_do_not_divide():
    with pytest.raises(ValueError):
        tf.Config(vocab_size=5, n_embd=8, n_head=4, n_kv_head=3)
    with pytest.raises(ValueError):
        tf.Config(vocab_size=5, n_embd=10, n_head=4, n_kv_head=2)


def test_default_size_is_in_the_planned_range():
    cfg = tf.Config(vocab_size=96)
    n = sum(a.size for a in tf.init_params(cfg).values())
    assert 100_000 <= n <= 300_000
    assert (cfg.n_head, cfg.n_kv_head, cfg.context_size) == (4, 2, 128)


@pytest.fixture(scope="module")
def tiny_model():
    tok = CharTokenizer("abcde")
    cfg = tf.Config(vocab_size=tok.vocab_size, context_size=8, n_layer=2, n_embd=16, n_head=4,
                    n_kv_head=2)
    rng = np.random.default_rng(10)
    params = {k: v + rand(rng, *v.shape, scale=0.3).astype(np.float32)
              for k, v in tf.init_params(cfg, 1).items()}
    return TransformerModel(cfg, params, tok)


def session_nll(model, text) -> tuple:
    """Total -log p of [EOS] + ids + [EOS] predicted token by token through a session."""
    ids = model.tokenizer.encode(text) + [EOS]
    s = model.session(dtype=np.float64)
    logits, total = s.prefill([]), 0.0
    for t in ids:
        total -= logits[t] - np.log(np.exp(logits - logits.max()).sum()) - logits.max()
        logits = s.decode(t)
    return total, len(ids)


def test_nll_scores_each_sequence_as_a_session_would(tiny_model):
    """Packed short sequences, and long ones through context-shift windows, give the same
    total log-likelihood as generating them token by token with the cache."""
    texts = ["ab", "cde", "a", "abcdeabcdeabcdeabcdeab", "eeee", "abcdeabcd"]  # 22 > context 8
    total, count = 0.0, 0
    for t in texts:
        nats, n = session_nll(tiny_model, t)
        total, count = total + nats, count + n
    assert tiny_model.nll(texts) == pytest.approx(total / count, abs=1e-5)


def test_scoring_rows_weights_every_target_once():
    tok = CharTokenizer("ab")
    seqs = ["ab", "ba" * 9, "a"]
    inputs, targets, weights = tf.scoring_rows(seqs, tok, 6)
    assert weights.sum() == sum(len(s) + 1 for s in seqs)
    assert inputs.shape == targets.shape == weights.shape and inputs.shape[1] == 6


def test_save_load_round_trip(tmp_path, tiny_model):
    tiny_model.curve = {"step": [1, 2], "train": [3.0, 2.5], "val": [3.1, 2.7]}
    tiny_model.info = {"seconds": 1.5}
    tiny_model.save(tmp_path / "t.npz")
    for src in (tmp_path / "t.npz", (tmp_path / "t.npz").read_bytes()):
        m = TransformerModel.load(src)
        assert m.kind == "transformer" and m.cfg == tiny_model.cfg
        assert m.tokenizer.chars == tiny_model.tokenizer.chars
        assert m.curve == tiny_model.curve and m.info == tiny_model.info
        for k, v in tiny_model.params.items():
            np.testing.assert_array_equal(m.params[k], v)
        np.testing.assert_array_equal(m.session().prefill([1, 2]),
                                      tiny_model.session().prefill([1, 2]))
    assert m.n_params == tiny_model.n_params


def test_model_interface_matches_the_bigram(tiny_model):
    s = tiny_model.session()
    logits = s.prefill([])
    assert logits.shape == (tiny_model.tokenizer.vocab_size,) and s.length == 1
    assert logits.dtype in (np.float32, np.float64)
    assert tiny_model.context_size == 8 and tiny_model.n_params > 0
    assert math.isfinite(tiny_model.nll(["abc", "de"]))


def test_nll_scores_the_same_tokens_as_the_bigram():
    """Same count of predicted tokens as BigramModel.nll (len + 1 per sequence, EOS included),
    so the two numbers compare; a model with near-zero weights scores about log V."""
    from decodelab.core.models.bigram import pair_ids

    corpus = Corpus("t", ["abc", "bca", "cab", "aa"], val_fraction=0)
    tok = CharTokenizer(corpus.chars)
    _, weights = tf.scoring_rows(corpus.train, tok, 8)[1:]
    assert weights.sum() == len(pair_ids(corpus.train, tok)[0])
    cfg = tf.Config(vocab_size=tok.vocab_size, context_size=8, n_layer=1, n_embd=8, n_head=2,
                    n_kv_head=1)
    model = TransformerModel(cfg, tf.init_params(cfg, 0), tok)
    assert model.nll(corpus.train) == pytest.approx(math.log(tok.vocab_size), abs=0.05)
