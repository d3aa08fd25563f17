"""The KV cache: what a decoder keeps so that each new token costs one position, not the whole
sequence, plus the memory arithmetic of keeping it.

Attention at position t needs the keys and values of every position <= t. Those never change
once computed (a token's key depends only on it and the tokens before it), so a decoder computes
them once and stores them: per layer, two preallocated arrays of shape (B, Hkv, T_max, D) and
one length counter shared by all layers. A prefill writes n positions in one pass; a decode step
writes one position and reads the whole history; the new token's position is the counter.

Memory: per token the cache holds 2 (K and V) x layers x kv_heads x head_dim elements. For 32
layers, 8 KV heads, head dim 128 and 2-byte elements that is 2*32*8*128*2 = 131072 bytes
(128 KiB) per token: 512 MiB for 4096 tokens, 4 GiB for 8 such sequences, before weights and
activations. Grouped-query and multi-query attention shrink it by using fewer KV heads than
query heads.

Also here: the context-shift rule (what stays in a full context), left padding for batches,
the live cache check (cached logits against a full recomputation) and decode timings with and
without the cache. The model side (sessions, batches) is in `transformer`.

Dimension legend: B batch rows, Hkv KV heads, G query heads per KV head, D head dim,
T_max allocated positions, n new positions, S = length + n keys visible.

Left out: paging, eviction of anything but whole halves, quantised caches, sharing a prefix
between sequences.
"""

import time

import numpy as np

from decodelab import sampling

NEG = -1e9  # added to the scores of hidden keys: exp(NEG - max) is exactly 0, and never NaN

# The live cache check compares the cached logits with a full recomputation. Both do the same
# sums in a different order (one new row against the cache, or the whole window at once), so
# rounding alone separates them: in float32 by up to about 2e-5 on logits of size ~14 (measured
# over 300 steps of the trained prose model), in float64 by about 1e-14. A real cache bug (a
# position not advanced, a token fed twice, a missing mask) is off by far more: freezing the
# decode position of the trained prose model gives 0.47 after one step and 9 after thirty.
CHECK_TOLERANCE = {"float32": 1e-4, "float64": 1e-9}


def kv_cache_bytes(layers: int, kv_heads: int, head_dim: int, bytes_per_element: float,
                   tokens: int, sequences: int = 1) -> dict:
    per_token = 2 * layers * kv_heads * head_dim * bytes_per_element
    total = per_token * tokens * sequences
    as_int = lambda x: int(x) if float(x).is_integer() else x  # noqa: E731
    return {"bytes_per_token": as_int(per_token), "total_bytes": as_int(total)}


def window_start(n: int, context_size: int) -> int:
    """Where the context window starts when n tokens have been seen.

    The rule: when the context is full and one more token arrives, the oldest
    `context_size - context_size // 2` tokens are dropped (the newest half is kept) and the rest
    re-prefilled. Applied token by token from the start, the window over n tokens begins at a
    multiple of the drop that leaves at most context_size tokens.
    """
    drop = context_size - context_size // 2
    return 0 if n <= context_size else drop * -(-(n - context_size) // drop)


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


def cache_check(model, prompt_ids, steps: int, seed: int = 0, dtype=np.float32) -> dict:
    """The `cache-check` command: `steps` logits vectors (the prefill, then a decode per sampled
    token), each compared with a full recomputation over the same window.

    Tokens are drawn at temperature 1 with EOS excluded (so the text runs on through context
    shifts), one uniform draw per step from default_rng(seed), first token whose cumulative
    probability exceeds it.
    """
    rng = np.random.default_rng(seed)
    session = model.session(len(prompt_ids) + steps, dtype=dtype)
    logits, diffs = session.prefill(prompt_ids), []
    for step in range(steps):
        diffs.append(float(np.abs(logits - session.recompute_logits()).max()))
        if step == steps - 1:
            break
        z = logits.astype(np.float64)  # (V,)
        z[0] = -np.inf  # EOS blocked, as with ignore_eos
        logits = session.decode(sampling.pick(sampling.softmax(z), rng.random()))
    tolerance = CHECK_TOLERANCE[np.dtype(dtype).name]
    worst = max(diffs, default=0.0)
    return {"max_abs_diff": worst, "steps": steps, "tolerance": tolerance,
            "ok": worst <= tolerance, "dtype": np.dtype(dtype).name, "shifts": session.shifts,
            "per_step": diffs}


def decode_timings(model, lengths, repeats: int = 20, dtype=np.float32) -> list:
    """Milliseconds per decode step at each context length, with the cache (one new position
    against the stored history) and without it (the whole window recomputed), plus the K/V bytes
    a cached step reads. Medians of `repeats` runs; lengths above the context are clipped."""
    rows = []
    for n in sorted({min(max(int(n), 2), model.context_size) for n in lengths}):
        ids = [1 + i % (model.tokenizer.vocab_size - 1) for i in range(n - 1)]  # + EOS: n tokens
        session = model.session(dtype=dtype)
        cached, uncached = [], []
        for _ in range(repeats):
            session.prefill(ids[:-1])  # n - 1 tokens cached; the decode adds the n-th
            began = time.perf_counter()
            session.decode(ids[-1])
            cached.append(time.perf_counter() - began)
        for _ in range(max(3, repeats // 4)):
            began = time.perf_counter()
            session.recompute_logits()
            uncached.append(time.perf_counter() - began)
        c, u = float(np.median(cached)) * 1e3, float(np.median(uncached)) * 1e3
        rows.append({"context": n, "cached_ms": round(c, 4), "uncached_ms": round(u, 4),
                     "speedup": round(u / c, 1), "kv_bytes_read": session.cache.bytes_in_use})
    return rows


class KVCache:
    """Preallocated keys and values for every layer, and how many positions are filled."""

    def __init__(self, n_layer: int, batch: int, n_kv_head: int, max_len: int, head_dim: int,
                 dtype=np.float32):
        shape = (batch, n_kv_head, max_len, head_dim)  # (B, Hkv, T_max, D)
        self.k = [np.zeros(shape, dtype) for _ in range(n_layer)]
        self.v = [np.zeros(shape, dtype) for _ in range(n_layer)]
        self.max_len = max_len
        self.length = 0  # positions filled; the next token is written here
        self.key_bias = None  # (B, T_max) additive: NEG on padding slots, None when no padding

    def reset(self):
        self.length = 0
        self.key_bias = None

    def set_padding(self, valid):
        """Mark slots length .. length+n as real (True) or padding (False); valid (B, n)."""
        if self.key_bias is None:
            if valid.all():
                return
            self.key_bias = np.zeros((valid.shape[0], self.max_len), self.k[0].dtype)
        self.key_bias[:, self.length:self.length + valid.shape[1]] = np.where(valid, 0.0, NEG)

    @property
    def bytes_allocated(self) -> int:
        return sum(a.nbytes for a in self.k + self.v)

    @property
    def bytes_in_use(self) -> int:
        return self.bytes_allocated * self.length // self.max_len

    def attend(self, layer: int, q, k, v):
        """Write the new keys and values, then attend from the new queries to all filled slots.

        q: (B, Hkv, G*n, D), already scaled by 1/sqrt(D); k, v: (B, Hkv, n, D).
        Returns (B, Hkv, G*n, D). Does not advance `length`: every layer writes the same slots.
        """
        n = k.shape[2]
        t0, S = self.length, self.length + n
        if S > self.max_len:
            raise ValueError(f"KV cache full: {S} positions needed, {self.max_len} allocated")
        K, V = self.k[layer], self.v[layer]  # (B, Hkv, T_max, D)
        K[:, :, t0:S] = k
        V[:, :, t0:S] = v
        s = q @ K[:, :, :S].swapaxes(-1, -2)  # (B, Hkv, G*n, D) @ (B, Hkv, D, S) -> (B,Hkv,G*n,S)
        if n > 1:  # new query i sits at t0 + i and must not see the new keys after it
            B, Hkv, Gn, _ = s.shape
            s = s.reshape(B, Hkv, Gn // n, n, S)  # (B, Hkv, G, n, S) view
            s += np.triu(np.full((n, S), NEG, s.dtype), k=t0 + 1)
            s = s.reshape(B, Hkv, Gn, S)
        if self.key_bias is not None:
            s += self.key_bias[:, None, None, :S]  # padding slots hidden from every query
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)  # softmax over the S visible keys
        return s @ V[:, :, :S]  # (B, Hkv, G*n, S) @ (B, Hkv, S, D) -> (B, Hkv, G*n, D)
