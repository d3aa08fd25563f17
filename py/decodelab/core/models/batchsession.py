"""Several prompts decoded together in one padded batch: each row computes what it would alone.

Dimension legend: B batch rows, T positions, V vocabulary.

Left out: a context shift (a batch stops when its window is full); rows of different models.
"""

import numpy as np

from decodelab.core.loops.slices import drain, prefill_chunks
from decodelab.core.models.base import Session as SessionBase
from decodelab.core.models.cachedforward import NO_ROWS, cached_forward, weights_of
from decodelab.core.models.kvcache import KVCache


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
                                      cfg.head_dim, self.dtype, model.cache_reserve)
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
        """prefill, sliced (`slices`): `prefill_chunks` of every row a piece."""
        start = list(self.model.tokenizer.start_ids)
        ids, valid, pos = left_pad([start + [int(i) for i in p] for p in prompts])  # (B, n) x3
        if ids.shape[1] > self.cache.max_len:
            raise ValueError(f"the longest prompt needs {ids.shape[1]} positions; the context "
                             f"holds {self.cache.max_len}")
        self.cache.reset()
        n = ids.shape[1]
        self.ids[:, :n], self.valid[:, :n] = ids, valid
        self.next_pos[:, 0] = pos[:, -1] + 1
        for a, b in prefill_chunks(n, self.model.cfg, rows=len(prompts)):  # a chunk's work
            self.cache.set_padding(valid[:, a:b])
            self.logits = cached_forward(self.weights, self.cache, ids[:, a:b], pos[:, a:b],
                                         rows=None if b == n else NO_ROWS)  # (B, V)
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
