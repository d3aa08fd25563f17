"""The cached forward pass: the parameters in the form it wants (`InferenceWeights`, made once
per model and dtype) and n new tokens per row run through the model with their keys and values
written into a KV cache (`cached_forward`), which then advances past them.

The maths is `layers`'; the cache is `kvcache`'s; the products are `products`'. A prefill reads
the prompt in one pass; a decode step computes one new position and reads the history.

Dimension legend: B batch rows, n new tokens per row, C channels, H query heads, Hkv KV heads,
G = H // Hkv, D head dim, V vocabulary.

Left out: the sessions that call it (`session`, `batchsession`), sampling.
"""

import math

import numpy as np

from decodelab.core.kernels import kernels
from decodelab.core.kernels.arithmetic import half_round
from decodelab.core.kernels import portable
from decodelab.core.kernels.attention import fixed_order_attention
from decodelab.core.models.kvcache import KVCache
from decodelab.core.models.layers import (
    layer_params,
    matmul_layout,
    merge_heads,
    rope,
    rope_tables,
    split_heads,
    swiglu_forward,
)
from decodelab.core.models.products import times

# a chunk of a prefill before its last: its logits are never read, so the head (SmolLM2's:
# 49,152 x 576, a fifteenth of a 4-position piece's work) is not applied (cached_forward's rows)
NO_ROWS = np.zeros(0, np.int64)
FOLD_UP_TO = 64 << 20  # parameter bytes up to which InferenceWeights folds the norms into W


class InferenceWeights:
    """The parameters in the form the cached path wants, in one dtype.

    rms(x) * g @ W  ==  x / sqrt(sum(x^2) + C*eps) @ (sqrt(C) * g[:, None] * W), so on a small
    model the gain and the 1/C of the mean go into W, and the attention's 1/sqrt(D) into the
    query columns: fewer numpy calls a step, for a second copy of each matrix. A large model
    (over FOLD_UP_TO bytes of parameters, e.g. SmolLM2's 621 MB) keeps its matrices as they are,
    shared with its parameters, and multiplies each normed vector by sqrt(C) * g and each query
    by 1/sqrt(D) instead (`gains`, `q_scale`): a copy would cost half a gigabyte, and the calls
    are nothing beside its matrices.

    The matrices are stored column-major (`matmul_layout`): same shapes, same values, but each
    output's weights lie together in memory. numpy without BLAS (as in WebAssembly) then runs
    x @ W with a contiguous inner loop, 2 to 5 times faster; with BLAS it makes no difference.
    """

    def __init__(self, params: dict, cfg, dtype, fixed_order: bool = False):
        """fixed_order: a quantized engine's arithmetic (`fixed_order_attention`, `unit`):
        every sum in an order that does not depend on how many positions are computed at once,
        and attention's queries, keys, values and weights held as float16 values, as
        llama.cpp's default cache holds them."""
        C, HD = cfg.n_embd, cfg.n_head * cfg.head_dim
        self.cfg, self.dtype, self.c_eps = cfg, np.dtype(dtype), C * cfg.norm_eps
        self.fixed_order = fixed_order
        self.attention = fixed_order_attention if fixed_order else None  # None: the cache's
        quantized = [k for k, a in params.items() if not isinstance(a, np.ndarray)]
        if quantized and self.dtype != np.float32:
            raise ValueError(f"{quantized[0]} is a quantized matrix, which multiplies in "
                             "float32 alone")
        self.folded = not quantized and sum(a.nbytes for a in params.values()) <= FOLD_UP_TO
        gain = lambda g: (math.sqrt(C) * g.astype(np.float64)).astype(dtype)  # noqa: E731
        if self.folded:
            fold = lambda g, w: folded(math.sqrt(C) * g.astype(np.float64), w, dtype)  # noqa: E731
        else:
            fold = lambda g, w: stored(w, dtype)  # noqa: E731
        self.wte = stored(params["wte"], dtype, layout=False)  # (a quantized one looks rows up)
        # (T, D) each, made once; a quantized engine's element-wise maths the same anywhere
        self.cos, self.sin = portable.rope_tables(cfg) if fixed_order else rope_tables(cfg, dtype)
        self.swiglu = portable.swiglu if fixed_order else swiglu_forward
        self.layers, self.gains = [], []
        for layer in range(cfg.n_layer):
            lp = layer_params(params, layer)
            w_qkv = fold(lp["g_attn"], lp["w_qkv"])  # (C, (H+2Hkv)*D)
            if self.folded:
                w_qkv[:, :HD] /= math.sqrt(cfg.head_dim)
            self.layers.append(tuple(stored(w, dtype) for w in (
                w_qkv, lp["w_o"], fold(lp["g_mlp"], lp["w_fc"]), lp["w_proj"])))
            self.gains.append((None, None) if self.folded
                              else (gain(lp["g_attn"]), gain(lp["g_mlp"])))
        self.w_head = stored(fold(params["g_f"], params["w_head"]), dtype)  # (C, V)
        self.g_f = None if self.folded else gain(params["g_f"])
        self.q_scale = None if self.folded else 1.0 / math.sqrt(cfg.head_dim)

    def unit(self, x, gain=None):
        """x / sqrt(sum(x^2) + C*eps): the norm without its gain and 1/C where they are folded
        into W, or times `gain` (sqrt(C) * g) where they are not."""
        if self.fixed_order:  # each row's sum of squares in the kernels' order, whatever n
            flat = x.reshape(-1, x.shape[-1])
            scale = np.float32(1) / np.sqrt(kernels().sumsq_rows(flat) + np.float32(self.c_eps))
            x = (flat * scale[:, None]).reshape(x.shape)
        elif x.size == x.shape[-1]:  # one vector (a decode step of one row): a dot product and
            v = x.reshape(-1)  # Python floats take 2 numpy calls instead of 5 (WebAssembly)
            x = x * (1.0 / math.sqrt(float(v @ v) + self.c_eps))
        else:
            x = x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + self.c_eps)
        return x if gain is None else x * gain


def halved(attend, math):
    """A cache's attend with the queries, keys and values rounded to float16 values first:
    what a cache of llama.cpp's default type holds, and the query it turns to float16 for the
    product with the keys (the query here is already scaled by 1/sqrt(D), a power of two for
    SmolLM2's heads of 64, so the rounding is the same), then `math`."""
    def run(layer, q, k, v):
        return attend(layer, half_round(q), half_round(k), half_round(v), math)
    return run


def stored(w, dtype, layout: bool = True):
    """A matrix as the cached path multiplies it: an array in `dtype`, column-major (with
    `layout`); a matrix that multiplies itself (a file's quantized blocks,
    core/kernels/matrices.py) as it is."""
    if not isinstance(w, np.ndarray):
        return w
    w = w.astype(dtype, copy=False)
    return matmul_layout(w) if layout else w


def folded(scale, w, dtype, columns: int = 4096):
    """scale[:, None] * w, computed in float64 and rounded once to `dtype`, written straight
    into a column-major matrix (`matmul_layout`) a few thousand columns at a time: a float64
    copy of a whole matrix would be the load's peak (SmolLM2's head: 226 MB)."""
    out = np.empty(w.shape, dtype, order="F")
    for j in range(0, w.shape[1], columns):
        out[:, j:j + columns] = scale[:, None] * w[:, j:j + columns].astype(np.float64)
    return out


def weights_of(model, dtype) -> InferenceWeights:
    """The model's inference weights in `dtype`, made once per model and dtype."""
    key = ("inference", np.dtype(dtype))
    if key not in model.derived:
        model.derived[key] = InferenceWeights(model.params, model.cfg, dtype)
    return model.derived[key]


def cached_forward(w: InferenceWeights, cache: KVCache, idx, pos, every_row: bool = False,
                   rows=None):
    """Run n new tokens per row through the model, writing their keys and values into the cache
    at positions cache.length.. and attending over everything cached so far; then the cache
    advances past them (`KVCache.advance`: a cache moves its own length, no caller sets it).

    idx, pos: (B, n). Prefill is n = prompt length (one pass); decode is n = 1.
    Returns the logits of each row's last new token (B, V), or with every_row those of every new
    token (B, n, V): what a speculative round's check of several drafted tokens reads; or with
    rows (indices into the n new tokens) those of these alone (B, len(rows), V).
    """
    cfg = w.cfg
    B, n = idx.shape
    H, Hkv, G, D = cfg.n_head, cfg.n_kv_head, cfg.groups, cfg.head_dim
    x = w.wte[idx]  # (B, n, C)
    attend = halved(cache.attend, w.attention) if w.fixed_order else cache.attend
    if n == 1:  # one position: the head axes are already in place, reshapes are views
        cos, sin = w.cos[pos[:, 0]][:, None, None], w.sin[pos[:, 0]][:, None, None]  # (B,1,1,D)
    else:
        cos, sin = w.cos[pos][:, None], w.sin[pos][:, None]  # (B, 1, n, D)
    for layer, ((w_qkv, w_o, w_fc, w_proj), (g_attn, g_mlp)) in enumerate(zip(w.layers, w.gains)):
        qkv = times(w.unit(x, g_attn), w_qkv)  # (B, n, C) -> (B, n, (H+2Hkv)*D)
        if n == 1:
            heads = qkv.reshape(B, H + 2 * Hkv, 1, D)  # (B, H+2Hkv, 1, D)
            qk = rope(heads[:, :H + Hkv], cos, sin)  # queries and keys in one rotation
            q = qk[:, :H].reshape(B, Hkv, G, D)  # (B, Hkv, G*1, D)
            if w.q_scale is not None:
                q = q * w.q_scale
            o = attend(layer, q, qk[:, H:], heads[:, H + Hkv:])  # (B, Hkv, G, D)
            o = o.reshape(B, 1, H * D)  # (B, 1, H*D)
        else:
            q, k, v = split_heads(qkv, cfg)  # (B, Hkv, G*n, D), (B, Hkv, n, D) x2
            q = rope(q.reshape(B, Hkv, G, n, D), cos[:, None], sin[:, None])
            if w.q_scale is not None:
                q = q * w.q_scale
            o = merge_heads(attend(layer, q.reshape(B, Hkv, G * n, D),
                                   rope(k, cos, sin), v), cfg)  # (B, n, H*D)
        x = x + times(o, w_o)  # (B, n, C)
        h = w.swiglu(times(w.unit(x, g_mlp), w_fc))  # (B, n, 2F) -> (B, n, F)
        x = x + times(h, w_proj)  # (B, n, C)
    cache.advance(n)
    if rows is not None:
        if len(rows) == 0:  # (a piece of a chunked pass with no row asked for: no head)
            return np.empty((B, 0, w.w_head.shape[1]), x.dtype)
        return times(w.unit(x[:, rows], w.g_f), w.w_head)  # (B, R, C) -> (B, R, V)
    if every_row:
        return times(w.unit(x, w.g_f), w.w_head)  # (B, n, C) -> (B, n, V)
    return times(w.unit(x[:, -1], w.g_f), w.w_head)  # (B, C) -> (B, V)
