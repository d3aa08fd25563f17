"""The KV cache: what a decoder keeps so that each new token costs one position, not the whole
sequence, and the memory arithmetic of keeping it.

Attention at position t needs the keys and values of every position <= t. Those never change
once computed (a token's key depends only on it and the tokens before it), so a decoder computes
them once and stores them: per layer, two preallocated arrays of shape (B, Hkv, T_max, D) and
one length counter shared by all layers. A prefill writes n positions in one pass; a decode step
writes one position and reads the whole history; the new token's position is the counter.

A model whose window would take a lot of memory asks for its cache a block of positions at a
time instead (`reserve`): SmolLM2's 2,048 positions are 94 MB a row, a chat a few hundred
positions, and a beam search holds a row per beam. The arrays then grow by `reserve` positions
when a write needs them (the filled part copied over), never past T_max; what they hold and
what attention reads are the same. (llama.cpp allocates its context whole; transformers'
default cache grows by every new position.)

Memory: per token the cache holds 2 (K and V) x layers x kv_heads x head_dim elements. For 32
layers, 8 KV heads, head dim 128 and 2-byte elements that is 2*32*8*128*2 = 131072 bytes
(128 KiB) per token: 512 MiB for 4096 tokens, 4 GiB for 8 such sequences, before weights and
activations. Grouped-query and multi-query attention shrink it by using fewer KV heads than
query heads.

The model side (what is written, at which positions, and the check against a recomputation) is
in `cachedforward`, `session` and `checks`.

Dimension legend: B batch rows, Hkv KV heads, G query heads per KV head, D head dim,
T_max allocated positions, n new positions, S = length + n keys visible.

Left out: paging, eviction of anything but whole halves, quantised caches, sharing a prefix
between sequences by reference (`copy` shares one by copying its filled part).
"""

import numpy as np

from decodelab.core.models.layers import NEG


def softmax_attention(q, K, V, bias):
    """softmax(q K^T + bias) V over the S keys: q (B, Hkv, Gn, D), K and V (B, Hkv, S, D),
    bias broadcastable to (B, Hkv, Gn, S) or None -> (B, Hkv, Gn, D)."""
    s = q @ K.swapaxes(-1, -2)  # (B, Hkv, Gn, D) @ (B, Hkv, D, S) -> (B, Hkv, Gn, S)
    if bias is not None:
        s += bias
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)  # softmax over the S visible keys
    return s @ V  # (B, Hkv, Gn, S) @ (B, Hkv, S, D) -> (B, Hkv, Gn, D)


def blocks_for(positions: int, block_size: int) -> int:
    """The blocks of `block_size` positions that hold `positions` positions: whole blocks, the
    last one maybe partly filled (a ceiling division). A cache grown by blocks, a pool's block
    table and a file's aligned sections all round up by it."""
    return -(-positions // block_size)


def kv_cache_bytes(layers: int, kv_heads: int, head_dim: int, bytes_per_element: float,
                   tokens: int, sequences: int = 1) -> dict:
    per_token = 2 * layers * kv_heads * head_dim * bytes_per_element
    total = per_token * tokens * sequences
    as_int = lambda x: int(x) if float(x).is_integer() else x  # noqa: E731
    return {"bytes_per_token": as_int(per_token), "total_bytes": as_int(total)}


def cache_shape(model) -> dict:
    """A model's KV cache as its sessions hold it (in its generation dtype): the window, the
    shape of a position's keys and values, the bytes of one position, and the positions it
    allocates at a time (None: the whole window at once)."""
    cfg, itemsize = model.cfg, np.dtype(model.generation_dtype).itemsize
    return {"context_size": cfg.context_size, "reserve": model.cache_reserve,
            "n_layer": cfg.n_layer,
            "n_kv_head": cfg.n_kv_head, "head_dim": cfg.head_dim, "bytes_per_element": itemsize,
            "bytes_per_token": kv_cache_bytes(cfg.n_layer, cfg.n_kv_head, cfg.head_dim,
                                              itemsize, 1)["total_bytes"]}


class KVCache:
    """Preallocated keys and values for every layer, and how many positions are filled."""

    reserve = None  # positions allocated at a time; None: all max_len at once

    def __init__(self, n_layer: int, batch: int, n_kv_head: int, max_len: int, head_dim: int,
                 dtype=np.float32, reserve=None):
        self.reserve = reserve
        size = max_len if reserve is None else min(reserve, max_len)
        shape = (batch, n_kv_head, size, head_dim)  # (B, Hkv, T_max or what is reserved, D)
        self.k = [np.zeros(shape, dtype) for _ in range(n_layer)]
        self.v = [np.zeros(shape, dtype) for _ in range(n_layer)]
        self.max_len = max_len
        self.length = 0  # positions filled; the next token is written here
        self.key_bias = None  # (B, T_max) additive: NEG on padding slots, None when no padding

    def copy(self) -> "KVCache":
        """A cache of the same size holding the same filled positions (the rest is not copied:
        it is never read before it is written)."""
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        n = self.length
        other.k, other.v = [], []
        for a, out in ((self.k, other.k), (self.v, other.v)):
            for layer in a:
                fresh = np.empty_like(layer)
                fresh[:, :, :n] = layer[:, :, :n]
                out.append(fresh)
        other.key_bias = None if self.key_bias is None else self.key_bias.copy()
        return other

    def reset(self):
        self.length = 0
        self.key_bias = None

    @property
    def allocated(self) -> int:
        """Positions the arrays have room for (max_len, unless the cache grows by blocks)."""
        return self.k[0].shape[2]

    def make_room(self, S: int) -> None:
        """Room for positions 0 .. S-1: arrays grown to the next multiple of `reserve` (at most
        max_len), one layer at a time, the filled positions copied over."""
        if self.reserve is None or S <= self.allocated:
            return
        size = min(blocks_for(S, self.reserve) * self.reserve, self.max_len)
        n = self.length
        for arrays in (self.k, self.v):
            for i, a in enumerate(arrays):  # (B, Hkv, allocated, D)
                grown = np.zeros(a.shape[:2] + (size,) + a.shape[3:], a.dtype)
                grown[:, :, :n] = a[:, :, :n]
                arrays[i] = grown

    # --- what a session does to its cache: advance it, cut it back, reorder its rows, shift it

    def advance(self, n: int) -> None:
        """The n positions every layer has just written (`attend`) count as filled: the next
        write goes after them. A forward pass calls it once, after its last layer."""
        self.length += n

    def truncate(self, n: int) -> None:
        """Forget every position from n on (the keys and values before n stay valid)."""
        self.length = n

    def reorder(self, rows) -> None:
        """Row i becomes a copy of row rows[i] (two rows may copy one row; each then grows on
        its own): beam search's cache following its beams."""
        for arrays in (self.k, self.v):
            for a in arrays:  # (B, Hkv, T_max, D)
                a[:] = a[rows]
        if self.key_bias is not None:
            self.key_bias[:] = self.key_bias[rows]

    def shift(self, drop: int, turn) -> None:
        """Forget the oldest `drop` positions and move the rest to the front without computing
        them again: each value as it is, each key through turn(keys) (the rotation back by
        `drop` positions, which the model knows: `session.Session.k_shift`)."""
        n = self.length
        for K, V in zip(self.k, self.v):  # (B, Hkv, T_max, D) each
            K[:, :, :n - drop] = turn(K[:, :, drop:n])
            V[:, :, :n - drop] = V[:, :, drop:n]
        self.length = n - drop

    def set_padding(self, valid):
        """Mark slots length .. length+n as real (True) or padding (False); valid (B, n)."""
        if self.key_bias is None:
            if valid.all():
                return
            self.key_bias = np.zeros((valid.shape[0], self.max_len), self.k[0].dtype)
        self.key_bias[:, self.length:self.length + valid.shape[1]] = np.where(valid, 0.0, NEG)

    def causal_mask(self, n: int, S: int, dtype):
        """Additive mask (n, S) for n new queries at positions S-n .. S-1: each may see the keys
        up to itself, none after it. (A decode step has one new query: nothing to mask.)"""
        return np.triu(np.full((n, S), NEG, dtype), k=S - n + 1)

    @property
    def bytes_allocated(self) -> int:
        return sum(a.nbytes for a in self.k + self.v)

    def attend(self, layer: int, q, k, v, math=None):
        """Write the new keys and values, then attend from the new queries to all filled slots.

        q: (B, Hkv, G*n, D), already scaled by 1/sqrt(D); k, v: (B, Hkv, n, D).
        Returns (B, Hkv, G*n, D). Does not advance `length`: every layer writes the same slots,
        and the pass calls `advance` after the last. math: the attention's arithmetic
        (`softmax_attention` unless a model's engine brings its own).
        """
        n = k.shape[2]
        t0, S = self.length, self.length + n
        if S > self.max_len:
            raise ValueError(f"KV cache full: {S} positions needed, {self.max_len} allocated")
        if layer == 0 and self.reserve is not None:
            self.make_room(S)
        K, V = self.k[layer], self.v[layer]  # (B, Hkv, T_max, D)
        K[:, :, t0:S] = k
        V[:, :, t0:S] = v
        return (math or softmax_attention)(q, K[:, :, :S], V[:, :, :S],
                                           self.bias(n, S, q.shape[2] // n, q.dtype))

    def bias(self, n: int, S: int, G: int, dtype):
        """What is added to the scores (B, Hkv, G*n, S): each new query sees the keys up to
        itself (`causal_mask`, for each of the G queries of a KV head) and no padding slot
        (`key_bias`); None when nothing is hidden (a decode step without padding)."""
        out = self.causal_mask(n, S, dtype) if n > 1 else None  # (n, S)
        if out is not None:
            out = np.tile(out, (G, 1))  # (G*n, S)
        if self.key_bias is not None:
            hidden = self.key_bias[:, None, None, :S]  # (B, 1, 1, S)
            out = hidden if out is None else out + hidden
        return out
