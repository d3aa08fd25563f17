"""A tiny decoder-only transformer in numpy, the maths: every layer's forward and its
hand-written backward pass, the full (uncached) forward, the loss. The model object that holds
the weights is in `transformer`; generating with them (the KV cache, sessions, batches) in
`inference`; training them in `train`.

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

import math
from dataclasses import dataclass

import numpy as np

from decodelab.core.kvcache import NEG
from decodelab.core.tokenizer import EOS, CharTokenizer

EPS = 1e-5  # inside the RMS norm's square root
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
# Masks, positions and the context window


def context_drop(context_size: int) -> int:
    """How many of the oldest tokens a context shift drops: when the window is full and one more
    token arrives, the oldest context_size - context_size // 2 go and the newest half stays."""
    return context_size - context_size // 2


def window_start(n: int, context_size: int) -> int:
    """Where the context window starts when n tokens have been seen: applied token by token
    from the start, the shifts leave a window that begins at a multiple of the drop and holds
    at most context_size tokens. Generation, scoring and training all follow this one rule."""
    drop = context_drop(context_size)
    return 0 if n <= context_size else drop * -(-(n - context_size) // drop)


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
    """Mean of -log p(target) over positions with weight 1; and its gradient wrt the logits.

    One exp over the (B, T, V) array and the gradient written into it in place: at a vocabulary
    of ~1000 this is a sizeable part of a training step."""
    t = targets[..., None]  # (B, T, 1)
    e = logits - logits.max(axis=-1, keepdims=True)  # (B, T, V)
    picked = np.take_along_axis(e, t, axis=-1)  # (B, T, 1) the target's shifted logit
    np.exp(e, out=e)  # unnormalised softmax
    total = e.sum(axis=-1, keepdims=True)  # (B, T, 1)
    n = max(float(weights.sum()), 1.0)
    w = weights[..., None].astype(logits.dtype) / logits.dtype.type(n)  # (B, T, 1)
    loss = -float(((picked - np.log(total)) * w).sum())
    e *= w / total  # softmax * weight / n
    np.put_along_axis(e, t, np.take_along_axis(e, t, axis=-1) - w, axis=-1)  # minus one-hot
    return loss, e


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
        ids = [EOS] + tokenizer.encode_marked(s) + [EOS]
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


def matmul_layout(w):
    """W (in, out) stored column-major: the layout that makes x @ W fast in numpy without BLAS."""
    return np.asfortranarray(w)
