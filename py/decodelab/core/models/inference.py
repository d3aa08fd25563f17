"""Generating with the transformer: the cached forward pass, one-row sessions, padded batches,
the context-shift rule, and the live check of a cache against a full recomputation.

The maths is `layers`'; here the keys and values of every position stay in a `KVCache`,
so a prefill reads the prompt in one pass and each decode step computes one new position and
reads the history. Sessions expose small hooks (`feed`, `positions`, `weights_now`, and the
cache's `causal_mask` and `set_padding`): the correct behaviour is written once, in them, and
`bugs` breaks a cache on purpose by overriding exactly one.

The live check: the logits a cached step hands out are compared with the whole window run
through the full forward without a cache (a pretrained model reads it in one pass into an
empty cache of its own instead: `pretrained.model.PretrainedModel.logits_at`). Both do the
same sums in a different order, so rounding alone separates them: in float32 by up to about 2e-5 on logits of size ~14 (measured
over 300 steps of the trained prose model), in float64 by about 1e-14. A real cache bug (a
position not advanced, a token fed twice, a missing mask) is off by far more: freezing the decode
position of the trained prose model gives 0.47 after one step and 9 after thirty.

Dimension legend: B batch rows, n new tokens per row, C channels, H query heads, Hkv KV heads,
G = H // Hkv, D head dim, V vocabulary, T context size.

Left out: sampling (generate and sampling do that), paged or shared caches; speculative
decoding's rounds (`speculative`) use `score` and `rewind` from here.
"""

import math
import sys

import numpy as np

from decodelab.core.rules import sampling
from decodelab.core.loops import slices
from decodelab.core.models.base import Model
from decodelab.core.models.base import Session as SessionBase
from decodelab.core.models.kvcache import KVCache, kv_cache_bytes
from decodelab.core.models.layers import (
    context_drop,
    layer_params,
    matmul_layout,
    merge_heads,
    rope,
    rope_tables,
    split_heads,
    swiglu_forward,
    window_start,
)
from decodelab.core.loops.slices import chunks, drain
from decodelab.errors import FieldError
from decodelab.fields import SHIFTS

SESSION_DTYPE = Model.generation_dtype  # what generation computes in unless the model says


def check_tolerance(model, dtype=None) -> float:
    """The live check's limit for a model's logits in `dtype` (its generation dtype unless
    said): rounding's, CHECK_TOLERANCE, unless the model declares its own (larger logits summed
    over longer rows round further: pretrained.model.PretrainedModel)."""
    return model.check_tolerance[np.dtype(dtype or generation_dtype(model)).name]


def cache_shape(model) -> dict:
    """A model's KV cache as its sessions hold it (in its generation dtype): the window, the
    shape of a position's keys and values, the bytes of one position, and the positions it
    allocates at a time (None: the whole window at once)."""
    cfg, itemsize = model.cfg, np.dtype(generation_dtype(model)).itemsize
    return {"context_size": cfg.context_size, "reserve": cache_reserve(model),
            "n_layer": cfg.n_layer,
            "n_kv_head": cfg.n_kv_head, "head_dim": cfg.head_dim, "bytes_per_element": itemsize,
            "bytes_per_token": kv_cache_bytes(cfg.n_layer, cfg.n_kv_head, cfg.head_dim,
                                              itemsize, 1)["total_bytes"]}


def cache_reserve(model):
    """Positions a session's cache allocates at a time: all of the window (None) unless the
    model says otherwise (a pretrained model's window is large: `kvcache.KVCache`)."""
    return model.cache_reserve


def generation_dtype(model):
    """What the model's sessions compute in: SESSION_DTYPE, or the model's own (a pretrained
    model runs in float32: a float64 copy of its weights would take another gigabyte)."""
    return model.generation_dtype

# numpy in WebAssembly (Pyodide) has no BLAS. There one vector times a large matrix is fastest
# as an einsum over the matrix's rows with each output's weights together, which the
# column-major W (layers.matmul_layout) already is when seen as W.T (out, in), without a copy:
# about twice `@` in Pyodide 0.27.7 from 256 x 256 up (576 x 49,152 in float32: 20 ms against
# 38; SmolLM2 decodes 9.0 tokens/s against 5.2 under Node). On the small matrices of the models
# trained here (64 x 1,030 at most) einsum's own cost per call outweighs it (their decode was
# 3-25% slower through it), so they keep `@`; with BLAS (CPython) `@` is as fast on large
# matrices and 2-3 times faster on small ones.
NO_BLAS = sys.platform == "emscripten"
EINSUM_FROM = 1 << 17  # elements of W from which a vector goes through einsum, without BLAS
FOLD_UP_TO = 64 << 20  # parameter bytes up to which InferenceWeights folds the norms into W


EINSUM_MOST = 1 << 30  # multiply-adds in one einsum call (its iterator counts them in 32 bits)


def times(x, w):
    """x @ w for a stored column-major w (C, O). Where numpy has no BLAS (WebAssembly), a large
    w goes through einsum: each output is a dot product of two contiguous rows (w.T is w's
    memory as (O, C)), which numpy's einsum runs in SIMD loops about twice as fast as its own
    matmul, for one row (a decode step) and for many (a prefill) alike; measured in Pyodide
    0.27.7 on SmolLM2's matrices (docs/pretrained.md)."""
    if not (NO_BLAS and w.size >= EINSUM_FROM):
        return x @ w
    if x.size == x.shape[-1]:  # one vector
        return np.einsum("oi,i->o", w.T, x.reshape(-1)).reshape(*x.shape[:-1], w.shape[1])
    rows = x.reshape(-1, x.shape[-1])
    step = max(1, EINSUM_MOST // w.size)
    out = np.concatenate([np.einsum("ti,oi->to", rows[i:i + step], w.T)
                          for i in range(0, rows.shape[0], step)])
    return out.reshape(*x.shape[:-1], w.shape[1])


EMPTY_PROMPT = ("Prompt: this model starts a sequence with no token of its own, so an empty "
                "prompt gives it nothing to read; type something.")
CHECK_TOLERANCE = Model.check_tolerance  # the live check's limit, per dtype
# (a model may declare its own: see check_tolerance above)
# SHIFTS: how a full window goes on: re-read the kept tokens, or turn their cached keys back
# (llama.cpp's K-shift); the choices of the field context_shift


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

    def __init__(self, params: dict, cfg, dtype):
        C, HD = cfg.n_embd, cfg.n_head * cfg.head_dim
        self.cfg, self.dtype, self.c_eps = cfg, np.dtype(dtype), C * cfg.norm_eps
        self.folded = sum(a.nbytes for a in params.values()) <= FOLD_UP_TO
        gain = lambda g: (math.sqrt(C) * g.astype(np.float64)).astype(dtype)  # noqa: E731
        if self.folded:
            fold = lambda g, w: folded(math.sqrt(C) * g.astype(np.float64), w, dtype)  # noqa: E731
        else:
            fold = lambda g, w: w.astype(dtype, copy=False)  # noqa: E731
        self.wte = params["wte"].astype(dtype, copy=False)
        self.cos, self.sin = rope_tables(cfg, dtype)  # (T, D) each, made once
        self.layers, self.gains = [], []
        for layer in range(cfg.n_layer):
            lp = layer_params(params, layer)
            w_qkv = fold(lp["g_attn"], lp["w_qkv"])  # (C, (H+2Hkv)*D)
            if self.folded:
                w_qkv[:, :HD] /= math.sqrt(cfg.head_dim)
            self.layers.append(tuple(map(matmul_layout, (
                w_qkv, lp["w_o"].astype(dtype, copy=False), fold(lp["g_mlp"], lp["w_fc"]),
                lp["w_proj"].astype(dtype, copy=False)))))
            self.gains.append((None, None) if self.folded
                              else (gain(lp["g_attn"]), gain(lp["g_mlp"])))
        self.w_head = matmul_layout(fold(params["g_f"], params["w_head"]))  # (C, V)
        self.g_f = None if self.folded else gain(params["g_f"])
        self.q_scale = None if self.folded else 1.0 / math.sqrt(cfg.head_dim)

    def unit(self, x, gain=None):
        """x / sqrt(sum(x^2) + C*eps): the norm without its gain and 1/C where they are folded
        into W, or times `gain` (sqrt(C) * g) where they are not."""
        if x.size == x.shape[-1]:  # one vector (a decode step of one row): a dot product and
            v = x.reshape(-1)  # Python floats take 2 numpy calls instead of 5 (WebAssembly)
            x = x * (1.0 / math.sqrt(float(v @ v) + self.c_eps))
        else:
            x = x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + self.c_eps)
        return x if gain is None else x * gain


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
            o = cache.attend(layer, q, qk[:, H:], heads[:, H + Hkv:])  # (B, Hkv, G, D)
            o = o.reshape(B, 1, H * D)  # (B, 1, H*D)
        else:
            q, k, v = split_heads(qkv, cfg)  # (B, Hkv, G*n, D), (B, Hkv, n, D) x2
            q = rope(q.reshape(B, Hkv, G, n, D), cos[:, None], sin[:, None])
            if w.q_scale is not None:
                q = q * w.q_scale
            o = merge_heads(cache.attend(layer, q.reshape(B, Hkv, G * n, D),
                                         rope(k, cos, sin), v), cfg)  # (B, n, H*D)
        x = x + times(o, w_o)  # (B, n, C)
        h = swiglu_forward(times(w.unit(x, g_mlp), w_fc))  # (B, n, 2F) -> (B, n, F)
        x = x + times(h, w_proj)  # (B, n, C)
    cache.advance(n)
    if rows is not None:
        if len(rows) == 0:  # (a piece of a chunked pass with no row asked for: no head)
            return np.empty((B, 0, w.w_head.shape[1]), x.dtype)
        return times(w.unit(x[:, rows], w.g_f), w.w_head)  # (B, R, C) -> (B, R, V)
    if every_row:
        return times(w.unit(x, w.g_f), w.w_head)  # (B, n, C) -> (B, n, V)
    return times(w.unit(x[:, -1], w.g_f), w.w_head)  # (B, C) -> (B, V)


def window_after(window, new, shifts: int, T: int) -> tuple:
    """The context-shift rule, once for every session: (the window after the `new` tokens
    follow `window`, the shifts counted since the first token), where `window` is what the
    context holds after `shifts` shifts. Tokens that do not fit push out the oldest, a whole
    context_drop(T) at a time (`layers.window_start` over every token seen), so a prompt read
    at once and the same tokens fed one by one end in the same window."""
    drop = context_drop(T)
    tokens = list(window) + list(new)
    if len(tokens) <= T:
        return tokens, shifts
    start = window_start(shifts * drop + len(tokens), T)
    return tokens[start - shifts * drop:], start // drop


class Session(SessionBase):
    """One generation (a batch of one) with a KV cache: prefill the prompt, then decode.

    The context starts with the tokenizer's start_ids (EOS for the models trained here, as in
    training; nothing for a model that adds no BOS). When the cache is full, the next decode
    drops the oldest tokens and re-prefills the rest at positions 0.. (a context shift, by the
    rule of `transformer.window_start`): `shifts` counts them and `shifted` says whether the
    last call did one. With shift="kshift" it reads nothing again: the kept keys are turned
    back by the dropped length (`k_shift`), which is fast and not exact.
    """

    cache_class = KVCache
    has_cache = True  # a run records its length and checks it live (generate reads this)

    def __init__(self, model, dtype=np.float32, shift: str = "reread"):
        cfg = model.cfg
        if shift not in SHIFTS:
            raise ValueError(f"shift must be one of {', '.join(SHIFTS)}; got {shift!r}")
        self.model, self.dtype, self.shift = model, np.dtype(dtype), shift
        self.start = list(model.tokenizer.start_ids)
        self.weights = weights_of(model, self.dtype)
        self.cache = self.cache_class(cfg.n_layer, 1, cfg.n_kv_head, cfg.context_size,
                                      cfg.head_dim, self.dtype, cache_reserve(model))
        self.tokens = []  # the window: the tokens whose keys and values are in the cache
        self.prefilled = 0  # cache length after the last prefill
        self.shifts, self.shifted = 0, False
        self.logits = None  # the last logits handed out, for check()
        self._idx = np.zeros((1, 1), np.int64)  # reused by every decode step: (B=1, n=1)
        self._pos = np.zeros((1, 1), np.int64)

    @property
    def length(self) -> int:
        return self.cache.length

    @property
    def tolerance(self) -> float:
        return check_tolerance(self.model, self.dtype)

    # --- hooks: what a decode step feeds, at which positions, with which weights -------------

    def feed(self, token: int) -> np.ndarray:
        """The tokens a decode step runs through the model: the new token alone. (1, n)"""
        self._idx[0, 0] = token
        return self._idx

    def positions(self, n: int) -> np.ndarray:
        """Positions of the n tokens a decode step feeds: the cache length onwards. (1, n)"""
        if n == 1:
            self._pos[0, 0] = self.cache.length
            return self._pos
        return np.arange(self.cache.length, self.cache.length + n)[None]

    def weights_now(self) -> InferenceWeights:
        """The weights of this call: the model's own (inference has no dropout)."""
        return self.weights

    # --- prefill and decode ------------------------------------------------------------------

    def prefill(self, ids) -> np.ndarray:
        return drain(self.prefill_steps(ids))

    def prefill_steps(self, ids):
        """prefill, sliced (`slices`): the prompt read PREFILL_CHUNK positions a piece."""
        tokens = self.start + [int(i) for i in ids]
        if not tokens:  # (a FieldError: every panel that reads a prompt says it by name)
            raise FieldError("prompt", EMPTY_PROMPT)
        window, self.shifts = window_after([], tokens, 0, self.cache.max_len)
        self.shifted = self.shifts > 0  # a long prompt: shifted already
        self.logits = yield from self._fill_steps(window)
        self.prefilled = self.cache.length
        return self.logits

    def decode(self, token_id: int) -> np.ndarray:
        token = int(token_id)
        T = self.cache.max_len
        self.shifted = self.cache.length == T
        if self.shifted:
            if self.shift == "reread":  # full: keep the newest tokens, re-prefill them
                window, self.shifts = window_after(self.tokens, [token], self.shifts, T)
                self.logits = self._fill(window)
                return self.logits
            self.shifts += 1
            self.k_shift(context_drop(T))  # full: turn the kept keys back, read nothing
        self.tokens.append(token)
        idx = self.feed(token)
        self.logits = cached_forward(self.weights_now(), self.cache, idx,
                                     self.positions(idx.shape[1]))[0]  # (V,)
        return self.logits

    def append(self, ids) -> np.ndarray:
        """Feed several tokens at once after a run has started (a tool's result): only they go
        through the model, at the positions after the cache's; nothing earlier is recomputed.
        The logits of the last one. When they do not fit, the context shifts by the same rule
        as decode, token by token from the start (`window_start` over every token seen)."""
        return drain(self.append_steps(ids))

    def append_steps(self, ids):
        """append, sliced (`slices`): PREFILL_CHUNK positions a piece."""
        ids = [int(i) for i in ids]
        if self.cache.length + len(ids) > self.cache.max_len:
            window, self.shifts = window_after(self.tokens, ids, self.shifts, self.cache.max_len)
            self.shifted = True
            self.logits = yield from self._fill_steps(window)
            return self.logits
        self.shifted = False
        for a, b in chunks(len(ids)):
            self.tokens += ids[a:b]
            idx = np.array([ids[a:b]], np.int64)  # (1, n)
            self.logits = cached_forward(self.weights_now(), self.cache, idx,
                                         self.positions(b - a))[0]  # (V,)
            if b < len(ids):  # (the last chunk and what follows it are one piece: a short
                yield None  # prompt is read and its first step made in one batch)
        return self.logits

    def score(self, ids) -> np.ndarray:
        """Feed several tokens in one pass after what the cache holds and return the logits after
        each of them (n, V): a speculative round checks all its drafted tokens at once. The
        window must have room for them (no context shift here); `rewind` takes back the ones
        the round rejects."""
        ids = [int(i) for i in ids]
        if self.cache.length + len(ids) > self.cache.max_len:
            raise ValueError(f"{len(ids)} more tokens do not fit the window of "
                             f"{self.cache.max_len} ({self.cache.length} in use)")
        self.shifted = False
        self.tokens += ids
        idx = np.array([ids], np.int64)  # (1, n)
        rows = cached_forward(self.weights_now(), self.cache, idx, self.positions(len(ids)),
                              every_row=True)[0]  # (n, V)
        self.logits = rows[-1]
        return rows

    def k_shift(self, drop: int) -> None:
        """llama.cpp's context shift: forget the oldest `drop` positions and move the rest to
        the front without reading them again. Values move as they are; keys were rotated by
        their old positions, so each is turned back by `drop` positions' angle (rotations add
        up: rope(rope(k, p), -drop) = rope(k, p - drop)). Not exact: what a kept token's deeper
        layers computed had seen the dropped tokens, and a re-read would not have (the live
        check shows by how much). Layer 0's keys depend on the token alone, so they are exact."""
        w = self.weights
        cos, sin = w.cos[drop], -w.sin[drop]  # (D,) each: the angle of -drop positions
        self.cache.shift(drop, lambda keys: rope(keys, cos, sin))
        self.tokens = self.tokens[drop:]
        self.prefilled = max(self.prefilled - drop, 0)

    def _fill(self, tokens) -> np.ndarray:
        return drain(self._fill_steps(tokens))

    def _fill_steps(self, tokens):
        """An empty cache filled with this window, PREFILL_CHUNK positions a piece (a chunked
        prefill: each piece attends to the pieces before it in the cache). The logits after
        its last token."""
        self.cache.reset()
        self.tokens = list(tokens)
        idx = np.array([self.tokens], np.int64)  # (1, n)
        logits = None
        for a, b in chunks(len(tokens)):
            logits = cached_forward(self.weights_now(), self.cache, idx[:, a:b],
                                    np.arange(a, b)[None])[0]
            if b < len(tokens):  # (the last chunk and what follows it: one piece)
                yield None
        return logits

    def fork(self) -> "Session":
        """A new session that starts where this one is: the same tokens, and a copy of the
        filled part of the cache (prefix sharing: several samples of one prompt prefill it
        once). Later steps of either never touch the other's cache."""
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.cache = self.cache.copy()
        other.tokens = list(self.tokens)
        other.logits = None if self.logits is None else self.logits.copy()
        other._idx, other._pos = self._idx.copy(), self._pos.copy()
        return other

    def rewind(self, n: int) -> None:
        """Forget everything after the first n cached positions (the keys there stay valid)."""
        self.tokens = self.tokens[:n]
        self.cache.truncate(n)

    # --- the live check ---------------------------------------------------------------------

    def recompute_logits(self) -> np.ndarray:
        """The same window recomputed from nothing (the model's logits_at)."""
        return drain(self.recompute_steps())

    def recompute_steps(self):
        """recompute_logits, sliced (`slices`) as the model slices its logits_at."""
        rows = [len(self.tokens) - 1]
        return (yield from self.model.logits_at_steps(self.tokens, rows, self.dtype))[0]  # (V,)

    def check(self) -> float:
        """Max |cached - recomputed| of the last logits handed out."""
        return drain(self.check_steps())

    def check_steps(self):
        """check, sliced (`slices`)."""
        expected = yield from self.recompute_steps()
        return float(np.abs(self.logits - expected).max())


def left_pad(rows: list, pad_id: int = 0):
    """Lists of ids of different lengths -> ids (B, T) aligned on the right, valid (B, T) bool,
    and positions (B, T) = cumulative count of real tokens minus one (pads get 0)."""
    T = max(len(r) for r in rows)
    ids = np.full((len(rows), T), pad_id, np.int64)  # (B, T)
    valid = np.zeros((len(rows), T), bool)  # (B, T)
    for b, r in enumerate(rows):
        if r:
            ids[b, T - len(r):] = r
            valid[b, T - len(r):] = True
    pos = np.maximum(np.cumsum(valid, axis=1) - 1, 0)  # (B, T)
    return ids, valid, pos


class BatchSession(SessionBase):
    """Several prompts decoded together, left-padded to one length.

    Row b's tokens sit at the right end of the row; padding slots are hidden from attention
    by the cache's key bias, and row b's positions count only its real tokens (cumulative sum
    of the mask minus one), so every row computes what it would compute alone. All rows write
    the same cache slot each step. A batch does not shift its context: it stops when full.
    """

    cache_class = KVCache

    def __init__(self, model, batch: int, dtype=np.float32):
        cfg = model.cfg
        self.model, self.dtype = model, np.dtype(dtype)
        self.weights = weights_of(model, self.dtype)
        self.cache = self.cache_class(cfg.n_layer, batch, cfg.n_kv_head, cfg.context_size,
                                      cfg.head_dim, self.dtype, cache_reserve(model))
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
        return drain(self.prefill_steps(prompts))

    def prefill_steps(self, prompts):
        """prefill, sliced (`slices`): PREFILL_CHUNK positions of every row a piece."""
        start = list(self.model.tokenizer.start_ids)
        ids, valid, pos = left_pad([start + [int(i) for i in p] for p in prompts])  # (B, n) x3
        if ids.shape[1] > self.cache.max_len:
            raise ValueError(f"the longest prompt needs {ids.shape[1]} positions; the context "
                             f"holds {self.cache.max_len}")
        self.cache.reset()
        n = ids.shape[1]
        self.ids[:, :n], self.valid[:, :n] = ids, valid
        self.next_pos[:, 0] = pos[:, -1] + 1
        for a, b in chunks(n, max(1, slices.PREFILL_CHUNK // len(prompts))):  # a chunk's work
            self.cache.set_padding(valid[:, a:b])
            self.logits = cached_forward(self.weights, self.cache, ids[:, a:b],
                                         pos[:, a:b])  # (B, V)
            if b < n:  # (the last chunk and what follows it: one piece)
                yield None
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

    def reorder(self, rows) -> None:
        """Row i becomes a copy of row rows[i]: its cache, tokens, padding and next position
        (beam search's batch following its beams)."""
        self.cache.reorder(rows)
        self.ids[:] = self.ids[rows]
        self.valid[:] = self.valid[rows]
        self.next_pos[:] = self.next_pos[rows]

    def recompute_logits(self) -> np.ndarray:
        """Every row's own window (pads left out) recomputed from nothing: (B, V)."""
        return drain(self.recompute_steps())

    def recompute_steps(self):
        """recompute_logits, sliced (`slices`): each row's window through the model's
        logits_at, as the model slices it (the real one reads it a chunk a piece)."""
        S, out = self.cache.length, np.empty_like(self.logits)
        for b in range(out.shape[0]):
            window = self.ids[b, :S][self.valid[b, :S]]
            out[b] = (yield from self.model.logits_at_steps(window, [len(window) - 1],
                                                            self.dtype))[0]
        return out  # (B, V)


def cache_check(model, prompt_ids, steps: int, seed: int = 0, dtype=np.float32,
                session=None) -> dict:
    """The `cache-check` command: `steps` logits vectors (the prefill, then a decode per sampled
    token), each compared with a full recomputation over the same window.

    Tokens are drawn at temperature 1 with end-of-sequence excluded (so the text runs on
    through context shifts), one uniform draw per step from default_rng(seed), first token whose cumulative
    probability exceeds it. `session`: a ready session to check instead of a new correct one.
    """
    return drain(cache_check_steps(model, prompt_ids, steps, seed, dtype, session))


def cache_check_steps(model, prompt_ids, steps: int, seed: int = 0, dtype=np.float32,
                      session=None):
    """cache_check, sliced (`slices`): a piece per chunk of the prompt, per step and per chunk
    of each step's full pass."""
    rng = np.random.default_rng(seed)
    session = session if session is not None else model.session(dtype=dtype)
    logits, diffs = (yield from session.prefill_steps(prompt_ids)), []
    for step in range(steps):
        diffs.append((yield from session.check_steps()))
        if step == steps - 1:
            break
        z = logits.astype(np.float64)  # (V,)
        z[model.tokenizer.eos_id] = -np.inf  # EOS blocked, as with ignore_eos
        logits = session.decode(sampling.pick(sampling.softmax(z), rng.random()))
        yield None
    worst = max(diffs, default=0.0)
    return {"max_abs_diff": worst, "steps": steps, "tolerance": session.tolerance,
            "ok": worst <= session.tolerance, "dtype": session.dtype.name,
            "shifts": session.shifts, "per_step": diffs}


def reuse_check(model, prompt_ids, appended_ids, change_at: int, new_token: int,
                dtype=np.float64) -> dict:
    """What a cache is and is not: two real uses of one prefilled cache, each compared with a
    full recomputation of the text it claims to hold.

    append: the cache of the prompt, then `appended_ids` fed in one pass after it. The keys and
        values already cached belong to the same earlier tokens, so the logits agree.
    edit: the same cache, but token `change_at` of the prompt is now `new_token` while its old
        key and value stay cached (nothing recomputed them), then the same appended tokens. The
        full recomputation reads the edited text, and the logits differ: a cache is valid only
        for the exact tokens that made it.
    """
    prompt = [int(i) for i in prompt_ids]
    if not 0 <= change_at < len(prompt):
        raise ValueError("change_at must be a position of the prompt")
    session = model.session(dtype=dtype)
    session.prefill(prompt)
    kept = session.fork()
    logits = session.append(appended_ids)  # (V,)
    full = model.full_logits(session.tokens, dtype)  # the same window, no cache
    append_diff = float(np.abs(logits - full).max())
    edited = prompt[:change_at] + [int(new_token)] + prompt[change_at + 1:]
    stale = kept.append(appended_ids)  # the old prompt's keys and values, reused
    full_edited = model.full_logits(list(model.tokenizer.start_ids) + edited +
                                    [int(i) for i in appended_ids], dtype)
    edit_diff = float(np.abs(stale - full_edited).max())
    tol = check_tolerance(model, dtype)
    top = lambda z: int(np.argmax(z))  # noqa: E731
    return {"tolerance": tol, "prompt_length": len(prompt), "appended": len(appended_ids),
            "append": {"diff": append_diff, "ok": append_diff <= tol,
                       "cache_length": session.length},
            "edit": {"diff": edit_diff, "ok": edit_diff <= tol, "position": change_at,
                     "old_token": prompt[change_at], "new_token": int(new_token),
                     "same_top": top(stale) == top(full_edited),
                     "top_cached": top(stale), "top_recomputed": top(full_edited)}}


# --- generation without a cache (the benchmark's "cache off") ------------------------------

class UncachedSession(SessionBase):
    """inference.Session's interface without a cache: every call runs the whole window
    through the full forward. Same context-shift rule, so the same windows and logits."""

    def __init__(self, model, dtype=np.float64):
        self.model, self.dtype = model, np.dtype(dtype)
        self.tokens, self.shifts, self.shifted = [], 0, False

    @property
    def length(self) -> int:
        return len(self.tokens)

    def prefill(self, ids) -> np.ndarray:
        self.tokens, self.shifts = [], 0
        return self.append(list(self.model.tokenizer.start_ids) + [int(i) for i in ids])

    def decode(self, token_id: int) -> np.ndarray:
        return self.append([token_id])

    def append(self, ids) -> np.ndarray:
        """The window after the new tokens (the cached session's rule, `window_after`), run
        whole through the full forward."""
        before = self.shifts
        self.tokens, self.shifts = window_after(self.tokens, [int(i) for i in ids], self.shifts,
                                                self.model.context_size)
        self.shifted = self.shifts > before
        return self.model.full_logits(self.tokens, self.dtype)


class Uncached:
    """A transformer seen through the shared model interface, minus its cache."""

    kind = "transformer-uncached"

    def __init__(self, model):
        self.model = model
        self.tokenizer, self.context_size = model.tokenizer, model.context_size

    def session(self, dtype=np.float64, shift: str = "reread") -> UncachedSession:
        return UncachedSession(self.model, dtype)
