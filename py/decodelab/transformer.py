"""A tiny decoder-only transformer in numpy: the maths, its hand-written backward pass, the
full (uncached) forward, and the cached sessions that generation uses.

One block, pre-norm:  x = x + W_o · attention(norm(x));  x = x + W_proj · gelu(W_fc · norm(x)).
After the last block a final norm and an output head give logits over the vocabulary.

Choices, and why:
  * RMSNorm (x / rms(x) * g): like LayerNorm without the mean, one reduction fewer per call,
    which matters when every numpy call costs microseconds in WebAssembly.
  * Learned absolute positions (wpe[p] added to the token embedding). With a KV cache the new
    token's position is simply the cache length, so decoding adds one table lookup. Keys in the
    cache already carry their positions, so nothing cached is ever recomputed, until the context
    is full: then the oldest half is dropped and the rest re-prefilled at positions 0.. (a
    "context shift"; the table has context_size rows and no more).
  * Grouped-query attention: n_head query heads share n_kv_head key/value heads (G = H / Hkv
    query heads per KV head). n_kv_head == n_head is ordinary multi-head attention, 1 is
    multi-query. The cache stores only the Hkv heads, so it shrinks by G.
  * One fused matrix w_qkv makes q, k and v in one matmul.
  * An EOS token starts a sequence: during training and scoring it resets the position to 0 and
    hides everything before it ("document masking"), so several names packed into one row are
    scored exactly as if each ran alone, which is how generation sees them.
  * No biases in linear layers, an untied output head, GELU (tanh form) in the MLP.
  * Inference folds the norm gains and 1/sqrt(D) into the next matrices (`inference_weights`),
    so a decode step does fewer elementwise calls; the full forward keeps them separate.

Dimension legend:
  B batch rows, T time (tokens in a row), C channels (n_embd), H query heads, Hkv KV heads,
  G = H // Hkv query heads per KV head, D head dim (C // H), F MLP width (4C), V vocabulary,
  L layers, S keys visible in the cache (cache length after writing).

Left out on purpose: biases, dropout inside attention (dropout is only on the residual
branches), mixed precision, any autograd: every backward is written out next to its forward.
"""

import io
import json
import math
from dataclasses import asdict, dataclass

import numpy as np

from decodelab.kvcache import NEG, KVCache, left_pad, window_start
from decodelab.tokenizer import EOS, CharTokenizer

EPS = 1e-5  # inside the RMS norm's square root
SESSION_DTYPE = np.float64  # what generation computes in (see TransformerModel.session)
GELU_C = math.sqrt(2.0 / math.pi)


@dataclass(frozen=True)
class Config:
    vocab_size: int
    context_size: int = 128
    n_layer: int = 4
    n_embd: int = 64
    n_head: int = 4
    n_kv_head: int = 2
    mlp_ratio: int = 4

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} must divide into n_head {self.n_head} heads")
        if self.n_head % self.n_kv_head:
            raise ValueError(f"n_kv_head {self.n_kv_head} must divide n_head {self.n_head}")

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def groups(self) -> int:
        return self.n_head // self.n_kv_head


LAYER_KEYS = ("g_attn", "w_qkv", "w_o", "g_mlp", "w_fc", "w_proj")


def init_params(cfg: Config, seed: int = 0, dtype=np.float32) -> dict:
    """Small random matrices (std 0.02), gains at 1; residual outputs scaled by 1/sqrt(2L) so
    the residual stream does not grow with depth at the start of training."""
    rng = np.random.default_rng(seed)
    C, V, D = cfg.n_embd, cfg.vocab_size, cfg.head_dim
    F, Q = cfg.mlp_ratio * C, (cfg.n_head + 2 * cfg.n_kv_head) * D
    normal = lambda *shape, std=0.02: (rng.standard_normal(shape) * std).astype(dtype)  # noqa
    out_std = 0.02 / math.sqrt(2 * cfg.n_layer)
    p = {"wte": normal(V, C), "wpe": normal(cfg.context_size, C)}
    for layer in range(cfg.n_layer):
        p.update({f"h{layer}.g_attn": np.ones(C, dtype), f"h{layer}.w_qkv": normal(C, Q),
                  f"h{layer}.w_o": normal(C, C, std=out_std), f"h{layer}.g_mlp": np.ones(C, dtype),
                  f"h{layer}.w_fc": normal(C, F), f"h{layer}.w_proj": normal(F, C, std=out_std)})
    p["g_f"] = np.ones(C, dtype)
    p["w_head"] = normal(C, V)
    return p


def layer_params(params: dict, layer: int) -> dict:
    return {k: params[f"h{layer}.{k}"] for k in LAYER_KEYS}


# ---------------------------------------------------------------------------------------------
# Masks and positions


def causal_bias(n: int, dtype) -> np.ndarray:
    """Additive mask (n, n): 0 where query i may see key j (j <= i), NEG above the diagonal."""
    return np.triu(np.full((n, n), NEG, dtype), k=1)  # (n, n)


def segment_layout(idx: np.ndarray, dtype):
    """Positions and attention bias for rows where every EOS starts a new sequence.

    A row may begin mid-sequence (position 0 is then an ordinary character, as after a context
    shift). Returns pos (B, T) and an additive bias (B, 1, T, T): a query sees keys from the
    start of its own sequence up to itself.
    """
    B, T = idx.shape
    t = np.arange(T)
    start = np.maximum.accumulate(np.where(idx == EOS, t, 0), axis=1)  # (B, T) own seq begins
    pos = t - start  # (B, T)
    key, query = t[None, None, :], t[None, :, None]  # (1, 1, T), (1, T, 1)
    seen = (key <= query) & (key >= start[:, :, None])  # (B, T, T)
    bias = np.where(seen, 0.0, NEG).astype(dtype)[:, None]  # (B, 1, T, T)
    return pos, bias


# ---------------------------------------------------------------------------------------------
# Layers: forward(...) -> (out, cache), backward(dout, cache) -> grads


def embed_forward(wte, wpe, idx, pos):
    x = wte[idx] + wpe[pos]  # (B, T) -> (B, T, C)
    return x, (idx, pos, wte.shape, wpe.shape)


def embed_backward(dx, cache):
    idx, pos, wte_shape, wpe_shape = cache
    dwte, dwpe = np.zeros(wte_shape, dx.dtype), np.zeros(wpe_shape, dx.dtype)
    np.add.at(dwte, idx, dx)  # rows used several times add up
    np.add.at(dwpe, pos, dx)
    return dwte, dwpe


def rmsnorm_forward(x, g):
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS)  # (..., 1)
    xh = x * r  # (..., C) unit root-mean-square
    return xh * g, (xh, r, g)


def rmsnorm_backward(dy, cache):
    xh, r, g = cache
    dg = (dy * xh).reshape(-1, xh.shape[-1]).sum(axis=0)  # (C,) from y = xh * g
    dxh = dy * g  # (..., C)
    # xh = x * r with r depending on x: the second term removes the part along xh itself
    dx = r * (dxh - xh * np.mean(dxh * xh, axis=-1, keepdims=True))  # (..., C)
    return dx, dg


def softmax_rows(s):
    """Softmax over the last axis, in place (s is a fresh score array nobody else holds)."""
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return s


def split_heads(qkv, cfg: Config):
    """(B, T, (H+2Hkv)*D) -> q (B, Hkv, G*T, D), k and v (B, Hkv, T, D).

    Query head h = kv*G + g uses KV head kv; its T rows are stacked under that KV head, so one
    matmul per KV head serves all G of its query heads.
    """
    B, T, _ = qkv.shape
    H, Hkv, G, D = cfg.n_head, cfg.n_kv_head, cfg.groups, cfg.head_dim
    heads = qkv.reshape(B, T, H + 2 * Hkv, D)  # (B, T, H+2Hkv, D)
    q = heads[:, :, :H].reshape(B, T, Hkv, G, D).transpose(0, 2, 3, 1, 4)  # (B, Hkv, G, T, D)
    k = heads[:, :, H:H + Hkv].transpose(0, 2, 1, 3)  # (B, Hkv, T, D)
    v = heads[:, :, H + Hkv:].transpose(0, 2, 1, 3)  # (B, Hkv, T, D)
    return q.reshape(B, Hkv, G * T, D), k, v


def merge_heads(o, cfg: Config):
    """(B, Hkv, G*T, D) -> (B, T, H*D), the inverse of split_heads for queries."""
    B, Hkv, GT, D = o.shape
    T = GT // cfg.groups
    o = o.reshape(B, Hkv, cfg.groups, T, D).transpose(0, 3, 1, 2, 4)  # (B, T, Hkv, G, D)
    return o.reshape(B, T, Hkv * cfg.groups * D)  # (B, T, H*D)


def attention_forward(h, w_qkv, w_o, bias, cfg: Config):
    """Causal self-attention with grouped KV heads. bias: additive mask, (B or 1, 1, T, T)."""
    B, T, _ = h.shape
    G = cfg.groups
    qkv = h @ w_qkv  # (B, T, C) -> (B, T, (H+2Hkv)*D)
    q, k, v = split_heads(qkv, cfg)  # (B, Hkv, G*T, D), (B, Hkv, T, D) x2
    q = q * (1.0 / math.sqrt(cfg.head_dim))  # scale the small array, not the T x T scores
    s = q @ k.swapaxes(-1, -2)  # (B, Hkv, G*T, T)
    s.reshape(B, -1, G, T, T)[...] += bias[:, :, None]  # (B, Hkv, G, T, T) view: hide keys
    p = softmax_rows(s)  # (B, Hkv, G*T, T)
    o = merge_heads(p @ v, cfg)  # (B, Hkv, G*T, D) -> (B, T, H*D)
    y = o @ w_o  # (B, T, H*D) -> (B, T, C)
    return y, (h, w_qkv, w_o, q, k, v, p, o, cfg)


def attention_backward(dy, cache):
    h, w_qkv, w_o, q, k, v, p, o, cfg = cache  # q is the scaled query
    B, T, C = h.shape
    dw_o = o.reshape(-1, o.shape[-1]).T @ dy.reshape(-1, C)  # y = o @ w_o
    do = _split_queries(dy @ w_o.T, cfg)  # (B, T, H*D) -> (B, Hkv, G*T, D)
    dv = p.swapaxes(-1, -2) @ do  # o = p @ v, summed over the G*T rows: (B, Hkv, T, D)
    ds = do @ v.swapaxes(-1, -2)  # dp: (B, Hkv, G*T, T)
    ds -= np.sum(ds * p, axis=-1, keepdims=True)  # softmax backward: ds = p * (dp - <dp, p>)
    ds *= p
    dq = (ds @ k) * (1.0 / math.sqrt(cfg.head_dim))  # s = q @ k^T, q scaled: (B, Hkv, G*T, D)
    dk = ds.swapaxes(-1, -2) @ q  # (B, Hkv, T, D), summed over the G query heads
    dqkv = _join_qkv(dq, dk, dv, cfg)  # (B, T, (H+2Hkv)*D)
    dw_qkv = h.reshape(-1, C).T @ dqkv.reshape(-1, dqkv.shape[-1])  # qkv = h @ w_qkv
    return dqkv @ w_qkv.T, dw_qkv, dw_o


def _split_queries(x, cfg: Config):
    """(B, T, H*D) -> (B, Hkv, G*T, D): the query layout of split_heads."""
    B, T, _ = x.shape
    x = x.reshape(B, T, cfg.n_kv_head, cfg.groups, cfg.head_dim).transpose(0, 2, 3, 1, 4)
    return x.reshape(B, cfg.n_kv_head, cfg.groups * T, cfg.head_dim)  # (B, Hkv, G*T, D)


def _join_qkv(dq, dk, dv, cfg: Config):
    """Gradients of q, k, v back into the fused (B, T, (H+2Hkv)*D) layout."""
    B, _, T, D = dk.shape
    dqkv = np.empty((B, T, cfg.n_head + 2 * cfg.n_kv_head, D), dq.dtype)  # (B, T, H+2Hkv, D)
    H, Hkv = cfg.n_head, cfg.n_kv_head
    dqkv[:, :, :H] = merge_heads(dq, cfg).reshape(B, T, H, D)
    dqkv[:, :, H:H + Hkv] = dk.transpose(0, 2, 1, 3)
    dqkv[:, :, H + Hkv:] = dv.transpose(0, 2, 1, 3)
    return dqkv.reshape(B, T, -1)


def gelu_forward(a):
    """GELU, tanh form: 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3)))."""
    t = a * a  # (..., F); a*a*a is far faster than a**3
    t *= 0.044715 * GELU_C
    t += GELU_C
    t *= a
    np.tanh(t, out=t)
    u = t + 1.0
    u *= a
    u *= 0.5
    return u, (a, t)


def gelu_backward(du, cache):
    a, t = cache
    # d/da: 0.5 (1 + t) + 0.5 a (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 a^2)
    inner = a * a  # (..., F)
    inner *= 3 * 0.044715 * GELU_C
    inner += GELU_C
    inner *= a
    inner *= 1.0 - t * t
    inner += 1.0 + t
    inner *= 0.5
    inner *= du
    return inner


def mlp_forward(h, w_fc, w_proj):
    a = h @ w_fc  # (B, T, C) -> (B, T, F)
    u, gelu_cache = gelu_forward(a)  # (B, T, F)
    return u @ w_proj, (h, w_fc, w_proj, u, gelu_cache)  # (B, T, F) -> (B, T, C)


def mlp_backward(dy, cache):
    h, w_fc, w_proj, u, gelu_cache = cache
    C = h.shape[-1]
    dw_proj = u.reshape(-1, u.shape[-1]).T @ dy.reshape(-1, C)  # y = u @ w_proj
    da = gelu_backward(dy @ w_proj.T, gelu_cache)  # u = gelu(a)
    dw_fc = h.reshape(-1, C).T @ da.reshape(-1, da.shape[-1])  # a = h @ w_fc
    return da @ w_fc.T, dw_fc, dw_proj


def dropout_forward(x, rate: float, rng):
    """Training only: zero a fraction `rate` of entries, scale the rest so the mean is kept."""
    if rate == 0.0:
        return x, None
    keep = (rng.random(x.shape) >= rate).astype(x.dtype) / (1.0 - rate)  # (..., C)
    return x * keep, keep


def dropout_backward(dy, keep):
    return dy if keep is None else dy * keep


def block_forward(x, lp: dict, bias, cfg: Config, dropout: float = 0.0, rng=None):
    h1, n1 = rmsnorm_forward(x, lp["g_attn"])  # (B, T, C)
    a, att = attention_forward(h1, lp["w_qkv"], lp["w_o"], bias, cfg)  # (B, T, C)
    a, keep1 = dropout_forward(a, dropout, rng)
    x = x + a  # residual
    h2, n2 = rmsnorm_forward(x, lp["g_mlp"])  # (B, T, C)
    m, mlp = mlp_forward(h2, lp["w_fc"], lp["w_proj"])  # (B, T, C)
    m, keep2 = dropout_forward(m, dropout, rng)
    return x + m, (n1, att, keep1, n2, mlp, keep2)


def block_backward(dy, cache):
    n1, att, keep1, n2, mlp, keep2 = cache
    g = {}
    dh2, g["w_fc"], g["w_proj"] = mlp_backward(dropout_backward(dy, keep2), mlp)
    dx, g["g_mlp"] = rmsnorm_backward(dh2, n2)
    dx = dx + dy  # the residual passes dy straight through
    dh1, g["w_qkv"], g["w_o"] = attention_backward(dropout_backward(dx, keep1), att)
    dx1, g["g_attn"] = rmsnorm_backward(dh1, n1)
    return dx1 + dx, g


# ---------------------------------------------------------------------------------------------
# The whole model (uncached): logits at every position, and the loss


def forward(params: dict, cfg: Config, idx, pos, bias, dropout: float = 0.0, rng=None):
    """idx, pos: (B, T) ints; bias: additive attention mask (B or 1, 1, T, T).

    Returns logits (B, T, V) and what `backward` needs.
    """
    x, emb = embed_forward(params["wte"], params["wpe"], idx, pos)  # (B, T, C)
    blocks = []
    for layer in range(cfg.n_layer):
        x, c = block_forward(x, layer_params(params, layer), bias, cfg, dropout, rng)
        blocks.append(c)
    hf, nf = rmsnorm_forward(x, params["g_f"])  # (B, T, C)
    logits = hf @ params["w_head"]  # (B, T, C) -> (B, T, V)
    return logits, (emb, blocks, nf, hf, params["w_head"])


def backward(dlogits, cache) -> dict:
    """Gradients of every parameter, same keys as params."""
    emb, blocks, nf, hf, w_head = cache
    C, V = w_head.shape
    grads = {"w_head": hf.reshape(-1, C).T @ dlogits.reshape(-1, V)}  # logits = hf @ w_head
    dx, grads["g_f"] = rmsnorm_backward(dlogits @ w_head.T, nf)
    for layer in reversed(range(len(blocks))):
        dx, g = block_backward(dx, blocks[layer])
        grads.update({f"h{layer}.{k}": v for k, v in g.items()})
    grads["wte"], grads["wpe"] = embed_backward(dx, emb)
    return grads


def cross_entropy(logits, targets, weights):
    """Mean of -log p(target) over positions with weight 1; and its gradient wrt the logits."""
    z = logits - logits.max(axis=-1, keepdims=True)  # (B, T, V)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))  # (B, T, V)
    picked = np.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]  # (B, T)
    n = max(float(weights.sum()), 1.0)
    loss = -float((picked * weights).sum()) / n
    dlogits = np.exp(logp)  # (B, T, V) softmax
    np.put_along_axis(dlogits, targets[..., None],
                      np.take_along_axis(dlogits, targets[..., None], axis=-1) - 1.0, axis=-1)
    return loss, dlogits * (weights[..., None] / n).astype(logits.dtype)


def loss_and_grads(params, cfg: Config, idx, targets, weights, dropout=0.0, rng=None):
    """One training step's maths: rows where EOS starts each sequence (see segment_layout)."""
    dtype = params["wte"].dtype
    pos, bias = segment_layout(idx, dtype)
    logits, cache = forward(params, cfg, idx, pos, bias, dropout, rng)
    loss, dlogits = cross_entropy(logits, targets, weights)
    return loss, backward(dlogits, cache)


def scoring_rows(sequences, tokenizer: CharTokenizer, T: int):
    """Rows (inputs, targets, weights), each (R, T), scoring sequences as generation sees them.

    Each sequence is [EOS] + ids + [EOS]. Short ones are packed several to a row (the EOS reset
    keeps them apart). A longer one is scored through windows that follow the context-shift
    rule: the token after n tokens of context is predicted from tokens[window_start(n):n].
    """
    rows, packed = [], []
    for s in sequences:
        ids = [EOS] + tokenizer.encode(s, field="text") + [EOS]
        if len(ids) - 1 <= T:
            if len(packed) + len(ids) - 1 > T:
                rows.append(packed)
                packed = []
            packed += [(a, b, 1) for a, b in zip(ids[:-1], ids[1:])]
            continue
        starts = [window_start(n, T) for n in range(1, len(ids))]  # target ids[n] from n tokens
        for s0 in sorted(set(starts)):
            rows.append([(ids[s0 + i], ids[s0 + i + 1], int(starts[s0 + i] == s0))
                         for i in range(min(T, len(ids) - 1 - s0))])
    rows.append(packed)
    out = np.zeros((3, len(rows), T), np.int64)  # padding: input EOS, weight 0
    for r, row in enumerate(rows):
        if row:
            out[:, r, :len(row)] = np.array(row).T
    return out[0], out[1], out[2]


# ---------------------------------------------------------------------------------------------
# Cached inference: the same maths, keys and values kept in a KVCache


def matmul_layout(w):
    """W (in, out) stored column-major: the layout that makes x @ W fast in numpy without BLAS."""
    return np.asfortranarray(w)


class InferenceWeights:
    """The parameters in the form the cached path wants, in one dtype.

    rms(x) * g @ W  ==  x / sqrt(sum(x^2) + C*eps) @ (sqrt(C) * g[:, None] * W), so the gain and
    the 1/C of the mean go into W; the attention's 1/sqrt(D) goes into the query columns.

    The matrices are stored column-major (`matmul_layout`): same shapes, same values, but each
    output's weights lie together in memory. numpy without BLAS (as in WebAssembly) then runs
    x @ W with a contiguous inner loop, 2 to 5 times faster; with BLAS it makes no difference.
    """

    def __init__(self, params: dict, cfg: Config, dtype):
        C, HD = cfg.n_embd, cfg.n_head * cfg.head_dim
        fold = lambda g, w: (math.sqrt(C) * g[:, None].astype(np.float64) * w).astype(dtype)  # noqa
        self.cfg, self.dtype, self.c_eps = cfg, np.dtype(dtype), C * EPS
        self.wte, self.wpe = params["wte"].astype(dtype), params["wpe"].astype(dtype)
        self.layers = []
        for layer in range(cfg.n_layer):
            lp = layer_params(params, layer)
            w_qkv = fold(lp["g_attn"], lp["w_qkv"])  # (C, (H+2Hkv)*D)
            w_qkv[:, :HD] /= math.sqrt(cfg.head_dim)
            self.layers.append(tuple(map(matmul_layout, (
                w_qkv, lp["w_o"].astype(dtype), fold(lp["g_mlp"], lp["w_fc"]),
                lp["w_proj"].astype(dtype)))))
        self.w_head = matmul_layout(fold(params["g_f"], params["w_head"]))  # (C, V)

    def unit(self, x):
        """x / sqrt(sum(x^2) + C*eps): the norm without its gain and 1/C (folded into W)."""
        if x.size == x.shape[-1]:  # one vector (a decode step of one row): a dot product and
            v = x.reshape(-1)  # Python floats take 2 numpy calls instead of 5 (WebAssembly)
            return x * (1.0 / math.sqrt(float(v @ v) + self.c_eps))
        return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + self.c_eps)


def cached_forward(w: InferenceWeights, cache: KVCache, idx, pos):
    """Run n new tokens per row through the model, writing their keys and values into the cache
    at positions cache.length.. and attending over everything cached so far.

    idx, pos: (B, n). Prefill is n = prompt length (one pass); decode is n = 1.
    Returns the logits of each row's last new token (B, V).
    """
    cfg = w.cfg
    B, n = idx.shape
    H, Hkv, G, D = cfg.n_head, cfg.n_kv_head, cfg.groups, cfg.head_dim
    x = w.wte[idx] + w.wpe[pos]  # (B, n, C)
    for layer, (w_qkv, w_o, w_fc, w_proj) in enumerate(w.layers):
        qkv = w.unit(x) @ w_qkv  # (B, n, C) -> (B, n, (H+2Hkv)*D)
        if n == 1:  # one position: the head axes are already in place, reshapes are views
            heads = qkv.reshape(B, H + 2 * Hkv, 1, D)  # (B, H+2Hkv, 1, D)
            q = heads[:, :H].reshape(B, Hkv, G, D)  # (B, Hkv, G*1, D)
            o = cache.attend(layer, q, heads[:, H:H + Hkv], heads[:, H + Hkv:])  # (B, Hkv, G, D)
            o = o.reshape(B, 1, H * D)  # (B, 1, H*D)
        else:
            q, k, v = split_heads(qkv, cfg)  # (B, Hkv, G*n, D), (B, Hkv, n, D) x2
            o = merge_heads(cache.attend(layer, q, k, v), cfg)  # (B, n, H*D)
        x = x + o @ w_o  # (B, n, C)
        x = x + gelu_forward(w.unit(x) @ w_fc)[0] @ w_proj  # (B, n, F) -> (B, n, C)
    cache.length += n
    return w.unit(x[:, -1]) @ w.w_head  # (B, C) -> (B, V)


class Session:
    """One generation (a batch of one) with a KV cache: prefill the prompt, then decode.

    The context always starts with EOS, as in training. When the cache is full, the next decode
    drops the oldest half of the window and re-prefills the rest at positions 0.. (a context
    shift): `shifts` counts them and `shifted` says whether the last call did one.
    """

    def __init__(self, model: "TransformerModel", dtype=np.float32):
        cfg = model.cfg
        self.model, self.dtype = model, np.dtype(dtype)
        self.weights = model.inference_weights(self.dtype)
        self.cache = KVCache(cfg.n_layer, 1, cfg.n_kv_head, cfg.context_size, cfg.head_dim,
                             self.dtype)
        self.tokens = []  # the window: the tokens whose keys and values are in the cache
        self.shifts, self.shifted = 0, False
        self.logits = None  # the last logits handed out, for check()
        self._idx = np.zeros((1, 1), np.int64)  # reused by every decode step: (B=1, n=1)
        self._pos = np.zeros((1, 1), np.int64)

    @property
    def length(self) -> int:
        return self.cache.length

    def prefill(self, ids) -> np.ndarray:
        tokens = [EOS] + [int(i) for i in ids]
        start = window_start(len(tokens), self.cache.max_len)  # a long prompt: shifted already
        drop = self.cache.max_len - self.cache.max_len // 2
        self.shifts, self.shifted = start // drop, start > 0
        self.logits = self._fill(tokens[start:])
        return self.logits

    def decode(self, token_id: int) -> np.ndarray:
        token = int(token_id)
        if self.cache.length == self.cache.max_len:  # full: keep the newest half, re-prefill
            self.shifts, self.shifted = self.shifts + 1, True
            keep = self.tokens[self.cache.max_len - self.cache.max_len // 2:]
            self.logits = self._fill(keep + [token])
            return self.logits
        self.shifted = False
        self.tokens.append(token)
        self._idx[0, 0], self._pos[0, 0] = token, self.cache.length  # position = cache length
        self.logits = cached_forward(self.weights, self.cache, self._idx, self._pos)[0]  # (V,)
        return self.logits

    def _fill(self, tokens) -> np.ndarray:
        self.cache.reset()
        self.tokens = list(tokens)
        idx = np.array([self.tokens], np.int64)  # (1, n)
        return cached_forward(self.weights, self.cache, idx, np.arange(len(tokens))[None])[0]

    def recompute_logits(self) -> np.ndarray:
        """The same window through the full forward without the cache: the live cache check."""
        return self.model.full_logits(self.tokens, self.dtype)

    def check(self) -> float:
        """Max |cached - recomputed| of the last logits handed out (see kvcache.CHECK_TOLERANCE)."""
        return float(np.abs(self.logits - self.recompute_logits()).max())


class BatchSession:
    """Several prompts decoded together, left-padded to one length.

    Row b's tokens sit at the right end of the row; padding slots are hidden from attention
    by the cache's key bias, and row b's positions count only its real tokens (cumulative sum
    of the mask minus one), so every row computes what it would compute alone. All rows write
    the same cache slot each step. A batch does not shift its context: it stops when full.
    """

    def __init__(self, model: "TransformerModel", batch: int, dtype=np.float32):
        cfg = model.cfg
        self.model, self.dtype = model, np.dtype(dtype)
        self.weights = model.inference_weights(self.dtype)
        self.cache = KVCache(cfg.n_layer, batch, cfg.n_kv_head, cfg.context_size, cfg.head_dim,
                             self.dtype)
        self.ids = np.zeros((batch, cfg.context_size), np.int64)  # (B, T_max) tokens by slot
        self.valid = np.zeros((batch, cfg.context_size), bool)  # (B, T_max) real token, not pad
        self.next_pos = np.zeros((batch, 1), np.int64)  # (B, 1) each row's next position
        self.logits = None  # (B, V) the last logits handed out, for check()

    @property
    def length(self) -> int:
        return self.cache.length

    @property
    def padding(self) -> np.ndarray:
        """(B, length) True where a slot is padding: what the page draws as empty."""
        return ~self.valid[:, :self.cache.length]

    def prefill(self, prompts) -> np.ndarray:
        ids, valid, pos = left_pad([[EOS] + [int(i) for i in p] for p in prompts])  # (B, n) x3
        if ids.shape[1] > self.cache.max_len:
            raise ValueError(f"the longest prompt needs {ids.shape[1]} positions; the context "
                             f"holds {self.cache.max_len}")
        self.cache.reset()
        self.cache.set_padding(valid)
        n = ids.shape[1]
        self.ids[:, :n], self.valid[:, :n] = ids, valid
        self.next_pos[:, 0] = pos[:, -1] + 1
        self.logits = cached_forward(self.weights, self.cache, ids, pos)  # (B, V)
        return self.logits

    def decode(self, token_ids) -> np.ndarray:
        t = self.cache.length
        if t == self.cache.max_len:
            raise ValueError(f"batch context full ({t} positions); a batch does not shift")
        tok = np.asarray(token_ids, np.int64).reshape(-1, 1)  # (B, 1)
        self.ids[:, t], self.valid[:, t] = tok[:, 0], True
        self.logits = cached_forward(self.weights, self.cache, tok, self.next_pos)  # (B, V)
        self.next_pos += 1
        return self.logits

    def recompute_logits(self) -> np.ndarray:
        """Every row's padded window through the full forward (pads masked): (B, V)."""
        S = self.cache.length
        ids, valid = self.ids[:, :S], self.valid[:, :S]  # (B, S)
        pos = np.maximum(np.cumsum(valid, axis=1) - 1, 0)  # (B, S)
        bias = causal_bias(S, self.dtype) + np.where(valid, 0.0, NEG).astype(self.dtype)[:, None]
        logits, _ = forward(self.model.params_as(self.dtype), self.model.cfg, ids, pos,
                            bias[:, None])  # bias (B, 1, S, S)
        return logits[:, -1]  # (B, V)

    def check(self) -> float:
        """Max |cached - recomputed| over all rows of the last logits handed out."""
        return float(np.abs(self.logits - self.recompute_logits()).max())


def batch_prefill(model: "TransformerModel", prompts, dtype=np.float32):
    """Prefill several prompts (lists of ids) as one left-padded batch.

    Returns (logits (B, V) of each row's last prompt token, the BatchSession to decode with).
    """
    session = BatchSession(model, len(prompts), dtype)
    return session.prefill(prompts), session


def batch_check(model: "TransformerModel", prompts, steps: int, dtype=np.float32) -> dict:
    """Run the prompts as one padded batch and each alone, greedily, for `steps` logits vectors;
    report the largest difference between a batch row and its single run (should be < 1e-5)."""
    logits, batch = batch_prefill(model, prompts, dtype)
    singles = [model.session(dtype=dtype) for _ in prompts]
    alone = np.stack([s.prefill(p) for s, p in zip(singles, prompts)])  # (B, V)
    diffs = []
    for step in range(steps):
        diffs.append(float(np.abs(logits - alone).max()))
        if step == steps - 1 or batch.length == batch.cache.max_len:
            break
        tokens = np.argmax(logits, axis=-1)  # (B,) greedy: the same choice in both runs
        logits = batch.decode(tokens)
        alone = np.stack([s.decode(int(t)) for s, t in zip(singles, tokens)])
    return {"max_abs_diff": max(diffs), "steps": len(diffs), "padding": batch.padding.tolist(),
            "tokens": batch.ids[:, :batch.length].tolist()}


# ---------------------------------------------------------------------------------------------
# The model object: the interface shared with the bigram


class TransformerModel:
    kind = "transformer"

    def __init__(self, cfg: Config, params: dict, tokenizer: CharTokenizer, curve=None,
                 info=None):
        assert cfg.vocab_size == tokenizer.vocab_size, "config and tokenizer disagree on V"
        self.cfg, self.params, self.tokenizer = cfg, params, tokenizer
        self.context_size = cfg.context_size
        self.curve = curve or {}  # training curve: {"step": [...], "train": [...], "val": [...]}
        self.info = info or {}  # how it was trained: seconds, steps, seed, hashes
        self._as_dtype, self._inference = {}, {}

    @property
    def n_params(self) -> int:
        return int(sum(a.size for a in self.params.values()))

    def params_as(self, dtype) -> dict:
        dtype = np.dtype(dtype)
        if dtype not in self._as_dtype:
            self._as_dtype[dtype] = {  # the matrices right of an @ in matmul_layout
                k: matmul_layout(v.astype(dtype)) if k.split(".")[-1].startswith("w_")
                else v.astype(dtype) for k, v in self.params.items()}
        return self._as_dtype[dtype]

    def inference_weights(self, dtype) -> InferenceWeights:
        dtype = np.dtype(dtype)
        if dtype not in self._inference:
            self._inference[dtype] = InferenceWeights(self.params, self.cfg, dtype)
        return self._inference[dtype]

    def full_logits(self, tokens, dtype=np.float32) -> np.ndarray:
        """Last-position logits (V,) of one window, recomputed from scratch (no cache)."""
        n = len(tokens)
        idx = np.asarray(tokens, np.int64)[None]  # (1, n)
        bias = causal_bias(n, np.dtype(dtype))[None, None]  # (1, 1, n, n)
        logits, _ = forward(self.params_as(dtype), self.cfg, idx, np.arange(n)[None], bias)
        return logits[0, -1]  # (V,)

    def nll(self, sequences, rows_per_pass: int = 64) -> float:
        """Mean negative log-likelihood in nats per predicted token (EOS included), each
        sequence scored as [EOS] + ids + [EOS] the way generation would see it."""
        inputs, targets, weights = scoring_rows(sequences, self.tokenizer, self.context_size)
        total, count = 0.0, float(weights.sum())
        for r in range(0, len(inputs), rows_per_pass):
            sl = slice(r, r + rows_per_pass)
            pos, bias = segment_layout(inputs[sl], self.params["wte"].dtype)
            logits, _ = forward(self.params, self.cfg, inputs[sl], pos, bias)  # (R, T, V)
            loss, _ = cross_entropy(logits, targets[sl], weights[sl])
            total += loss * max(float(weights[sl].sum()), 1.0)
        return total / max(count, 1.0)

    def session(self, max_tokens: int = 0, dtype=SESSION_DTYPE) -> Session:
        """A cached generation session. The cache always holds the whole context window, so
        max_tokens (kept for the shared interface) does not change what is computed.

        Generation runs in float64: the native build and WebAssembly then agree to ~1e-15 on
        every probability (float32 sums in a different BLAS order would differ by ~1e-6), and
        the live cache check can hold a tight tolerance. It costs about 15% per step.
        """
        return Session(self, dtype)

    def save(self, path) -> None:
        curve = {f"curve.{k}": np.asarray(v) for k, v in self.curve.items()}
        weights = {f"param.{k}": v for k, v in self.params.items()}
        np.savez(path, kind=np.array(self.kind), config=np.array(json.dumps(asdict(self.cfg))),
                 chars=np.array(self.tokenizer.chars), info=np.array(json.dumps(self.info)),
                 **curve, **weights)

    @classmethod
    def load(cls, path_or_bytes) -> "TransformerModel":
        src = io.BytesIO(path_or_bytes) if isinstance(path_or_bytes, bytes) else path_or_bytes
        with np.load(src) as z:
            cfg = Config(**json.loads(str(z["config"])))
            params = {k[6:]: z[k] for k in z.files if k.startswith("param.")}
            curve = {k[6:]: z[k].tolist() for k in z.files if k.startswith("curve.")}
            return cls(cfg, params, CharTokenizer(str(z["chars"])), curve,
                       json.loads(str(z["info"])))
