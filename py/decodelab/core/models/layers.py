"""A tiny decoder-only transformer in numpy, the maths: every layer's forward and its
hand-written backward pass, the full (uncached) forward, the loss. The model object that holds
the weights is in `transformer`; generating with them (the KV cache, sessions, batches) in
`cachedforward` and `session`; training them in `train`.

The architecture is Llama's (transformers' `LlamaForCausalLM`, loaded as it is from an export:
`export`). One block, pre-norm:
    x = x + W_o · attention(rope(norm(x) W_q), rope(norm(x) W_k), norm(x) W_v)
    x = x + W_down · (silu(norm(x) W_gate) * norm(x) W_up)
After the last block a final norm and an output head give logits over the vocabulary.

Choices, and why:
  * RMSNorm (x / rms(x) * g): like LayerNorm without the mean, one reduction fewer per call,
    which matters when every numpy call costs microseconds in WebAssembly.
  * Rotary positions (RoPE): no position table is added to the input. Instead each query and
    key is rotated, pair of channels by pair, by an angle proportional to its position, so a
    query-key dot product depends only on how far apart the two are. With a KV cache the new
    token's position is the cache length; its key is rotated once, when it is written. The
    cos/sin tables are computed once per model (`rope_tables`), as transformers computes them
    (float32, then widened), so both give the same numbers. When the context is full, the
    oldest tokens are dropped and the rest re-read at positions 0.. (a "context shift").
  * Grouped-query attention: n_head query heads share n_kv_head key/value heads (G = H / Hkv
    query heads per KV head). n_kv_head == n_head is ordinary multi-head attention, 1 is
    multi-query. The cache stores only the Hkv heads, so it shrinks by G.
  * One fused matrix w_qkv makes q, k and v in one matmul; one fused w_fc makes the gate and
    the up projection of the SwiGLU MLP (split apart only in the export).
  * An EOS token starts a sequence: during training and scoring it resets the position to 0 and
    hides everything before it ("document masking"), so several names packed into one row are
    scored exactly as if each ran alone, which is how generation sees them.
  * No biases in linear layers, an untied output head.
  * Inference folds the norm gains and 1/sqrt(D) into the next matrices
    (`cachedforward.InferenceWeights`), so a decode step does fewer elementwise calls; the full
    forward keeps them separate.

Dimension legend:
  B batch rows, T time (tokens in a row), C channels (n_embd), H query heads, Hkv KV heads,
  G = H // Hkv query heads per KV head, D head dim (C // H), F MLP width, V vocabulary,
  L layers, S keys visible in the cache (cache length after writing).

Left out on purpose: biases, dropout inside attention (dropout is only on the residual
branches), mixed precision, any autograd: every backward is written out next to its forward.
"""

import math
from dataclasses import dataclass

import numpy as np

from decodelab.core.tokens.tokenizer import EOS, CharTokenizer

NEG = -1e9  # added to the scores of hidden keys: exp(NEG - max) is exactly 0, and never NaN
EPS = 1e-5  # inside the RMS norm's square root
ROPE_THETA = 10000.0  # transformers' default base of the rotation frequencies


@dataclass(frozen=True)
class Config:
    vocab_size: int
    context_size: int = 128
    n_layer: int = 4
    n_embd: int = 64
    n_head: int = 4
    n_kv_head: int = 2
    mlp_hidden: int = 0  # F, the MLP's width; 0: chosen from n_embd (see __post_init__)
    rope_theta: float = ROPE_THETA
    norm_eps: float = EPS

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} must divide into n_head {self.n_head} heads")
        if self.n_head % self.n_kv_head:
            raise ValueError(f"n_kv_head {self.n_kv_head} must divide n_head {self.n_head}")
        if self.head_dim % 2:
            raise ValueError(f"head dim {self.head_dim} must be even (rotations turn pairs)")
        if not self.mlp_hidden:  # Llama's rule of thumb: 8C/3, rounded up to a multiple of 16
            object.__setattr__(self, "mlp_hidden", -(-8 * self.n_embd // 3 // 16) * 16)

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
    F, Q = cfg.mlp_hidden, (cfg.n_head + 2 * cfg.n_kv_head) * D
    normal = lambda *shape, std=0.02: (rng.standard_normal(shape) * std).astype(dtype)  # noqa
    out_std = 0.02 / math.sqrt(2 * cfg.n_layer)
    p = {"wte": normal(V, C)}
    for layer in range(cfg.n_layer):
        p.update({f"h{layer}.g_attn": np.ones(C, dtype), f"h{layer}.w_qkv": normal(C, Q),
                  f"h{layer}.w_o": normal(C, C, std=out_std), f"h{layer}.g_mlp": np.ones(C, dtype),
                  f"h{layer}.w_fc": normal(C, 2 * F), f"h{layer}.w_proj": normal(F, C, std=out_std)})
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


def embed_forward(wte, idx):
    return wte[idx], (idx, wte.shape)  # (B, T) -> (B, T, C)


def embed_backward(dx, cache):
    idx, wte_shape = cache
    dwte = np.zeros(wte_shape, dx.dtype)
    np.add.at(dwte, idx, dx)  # rows used several times add up
    return dwte


_TABLES = {}


def rope_tables(cfg: Config, dtype, length: int = 0):
    """cos and sin (length, D) for positions 0..length-1 (default: the context size), laid out
    for `rope`: channel i pairs with channel i + D/2 (transformers' `rotate_half`), and the sin
    table carries the sign of the first half, so rope(x) = x * cos + swap_halves(x) * sin.

    Angles position * theta^(-2i/D), computed in float32 as transformers computes them and then
    widened to `dtype`: a float64 model then agrees with transformers' float64 model to rounding.
    Made once per (shape, dtype) and shared."""
    D, length = cfg.head_dim, length or cfg.context_size
    key = (D, length, cfg.rope_theta, np.dtype(dtype).name)
    if key not in _TABLES:
        f32 = np.float32
        inv = f32(1.0) / (f32(cfg.rope_theta) ** (np.arange(0, D, 2, dtype=f32) / f32(D)))  # (D/2,)
        ang = np.arange(length, dtype=f32)[:, None] * inv[None, :]  # (length, D/2)
        cos, sin = np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)  # (length, D/2)
        _TABLES[key] = (np.concatenate([cos, cos], axis=1), np.concatenate([-sin, sin], axis=1))
    return _TABLES[key]


_SWAPS = {}


def swap_halves(x):
    """(..., D) -> (..., D) with the two halves of the last axis exchanged (a copy, made by one
    gather: in WebAssembly every numpy call costs, and this runs twice per layer and step)."""
    D = x.shape[-1]
    order = _SWAPS.get(D)
    if order is None:
        order = _SWAPS[D] = np.concatenate([np.arange(D // 2, D), np.arange(D // 2)])
    return x[..., order]


def rope(x, cos, sin):
    """Rotate each channel pair (i, i + D/2) of x (..., D) by its angle: cos, sin broadcast
    against x. First half: x1 cos - x2 sin; second half: x2 cos + x1 sin."""
    out = swap_halves(x)
    out *= sin
    out += x * cos
    return out


def rope_backward(dy, cos, sin):
    """The transpose of the rotation: rotate back by the same angle."""
    return dy * cos + swap_halves(dy * sin)


def rmsnorm_forward(x, g, eps=EPS):
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)  # (..., 1)
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


def attention_forward(h, w_qkv, w_o, bias, rot, cfg: Config):
    """Causal self-attention with grouped KV heads and rotary positions.

    bias: additive mask, (B or 1, 1, T, T); rot: (cos, sin), each (B, T, D), the rotation of
    every row's positions (rows of the same position share an angle)."""
    B, T, _ = h.shape
    G, Hkv, D = cfg.groups, cfg.n_kv_head, cfg.head_dim
    cos, sin = rot[0][:, None], rot[1][:, None]  # (B, 1, T, D)
    qkv = h @ w_qkv  # (B, T, C) -> (B, T, (H+2Hkv)*D)
    q, k, v = split_heads(qkv, cfg)  # (B, Hkv, G*T, D), (B, Hkv, T, D) x2
    q = rope(q.reshape(B, Hkv, G, T, D), cos[:, None], sin[:, None]).reshape(B, Hkv, G * T, D)
    k = rope(k, cos, sin)  # (B, Hkv, T, D): the keys the cache would hold
    q *= 1.0 / math.sqrt(D)  # scale the small array, not the T x T scores
    s = q @ k.swapaxes(-1, -2)  # (B, Hkv, G*T, T)
    s.reshape(B, -1, G, T, T)[...] += bias[:, :, None]  # (B, Hkv, G, T, T) view: hide keys
    p = softmax_rows(s)  # (B, Hkv, G*T, T)
    o = merge_heads(p @ v, cfg)  # (B, Hkv, G*T, D) -> (B, T, H*D)
    y = o @ w_o  # (B, T, H*D) -> (B, T, C)
    return y, (h, w_qkv, w_o, q, k, v, p, o, rot, cfg)


def attention_backward(dy, cache):
    h, w_qkv, w_o, q, k, v, p, o, rot, cfg = cache  # q, k rotated; q scaled
    B, T, C = h.shape
    G, Hkv, D = cfg.groups, cfg.n_kv_head, cfg.head_dim
    cos, sin = rot[0][:, None], rot[1][:, None]  # (B, 1, T, D)
    dw_o = o.reshape(-1, o.shape[-1]).T @ dy.reshape(-1, C)  # y = o @ w_o
    do = _split_queries(dy @ w_o.T, cfg)  # (B, T, H*D) -> (B, Hkv, G*T, D)
    dv = p.swapaxes(-1, -2) @ do  # o = p @ v, summed over the G*T rows: (B, Hkv, T, D)
    ds = do @ v.swapaxes(-1, -2)  # dp: (B, Hkv, G*T, T)
    ds -= np.sum(ds * p, axis=-1, keepdims=True)  # softmax backward: ds = p * (dp - <dp, p>)
    ds *= p
    dq = (ds @ k) * (1.0 / math.sqrt(D))  # s = q @ k^T, q scaled: (B, Hkv, G*T, D)
    dk = ds.swapaxes(-1, -2) @ q  # (B, Hkv, T, D), summed over the G query heads
    dq = rope_backward(dq.reshape(B, Hkv, G, T, D), cos[:, None], sin[:, None])
    dk = rope_backward(dk, cos, sin)
    dqkv = _join_qkv(dq.reshape(B, Hkv, G * T, D), dk, dv, cfg)  # (B, T, (H+2Hkv)*D)
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


def silu(g):
    """g * sigmoid(g), in 4 numpy calls (a fresh array)."""
    e = np.exp(-g)
    e += 1.0
    return np.divide(g, e, out=e)


def swiglu_forward(a):
    """(..., 2F) -> (..., F): silu(gate) * up, where a = [gate | up] (one fused matmul)."""
    F = a.shape[-1] // 2
    m = silu(a[..., :F])
    m *= a[..., F:]
    return m


def swiglu_backward(dm, a):
    F = a.shape[-1] // 2
    g, u = a[..., :F], a[..., F:]
    sig = 1.0 / (1.0 + np.exp(-g))  # (..., F)
    da = np.empty_like(a)
    da[..., F:] = dm * (g * sig)  # d/d up: silu(gate)
    da[..., :F] = dm * u * sig * (1.0 + g * (1.0 - sig))  # d silu(g)/dg = s (1 + g (1 - s))
    return da


def mlp_forward(h, w_fc, w_proj):
    a = h @ w_fc  # (B, T, C) -> (B, T, 2F): gate and up
    m = swiglu_forward(a)  # (B, T, F)
    return m @ w_proj, (h, w_fc, w_proj, a, m)  # (B, T, F) -> (B, T, C)


def mlp_backward(dy, cache):
    h, w_fc, w_proj, a, m = cache
    C = h.shape[-1]
    dw_proj = m.reshape(-1, m.shape[-1]).T @ dy.reshape(-1, C)  # y = m @ w_proj
    da = swiglu_backward(dy @ w_proj.T, a)  # (B, T, 2F)
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


def block_forward(x, lp: dict, bias, rot, cfg: Config, dropout: float = 0.0, rng=None):
    h1, n1 = rmsnorm_forward(x, lp["g_attn"], cfg.norm_eps)  # (B, T, C)
    a, att = attention_forward(h1, lp["w_qkv"], lp["w_o"], bias, rot, cfg)  # (B, T, C)
    a, keep1 = dropout_forward(a, dropout, rng)
    x = x + a  # residual
    h2, n2 = rmsnorm_forward(x, lp["g_mlp"], cfg.norm_eps)  # (B, T, C)
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
    x, emb = embed_forward(params["wte"], idx)  # (B, T, C)
    cos, sin = rope_tables(cfg, x.dtype, max(cfg.context_size, int(np.max(pos)) + 1))
    rot = (cos[pos], sin[pos])  # (B, T, D) each: every layer rotates by the same angles
    blocks = []
    for layer in range(cfg.n_layer):
        x, c = block_forward(x, layer_params(params, layer), bias, rot, cfg, dropout, rng)
        blocks.append(c)
    hf, nf = rmsnorm_forward(x, params["g_f"], cfg.norm_eps)  # (B, T, C)
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
    grads["wte"] = embed_backward(dx, emb)
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
