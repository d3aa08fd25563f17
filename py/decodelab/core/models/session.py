"""One generation with a KV cache: prefill the prompt, then decode a token at a time, and the
context-shift rule every session follows when the window is full (`window_after`).

A session exposes small hooks (`feed`, `positions`, `weights_now`, and the cache's
`causal_mask` and `set_padding`): the correct behaviour is written once, in them, and `bugs`
breaks a cache on purpose by overriding exactly one. Its live check recomputes the window from
nothing (the model's `logits_at`); the limit is `checks.check_tolerance`.

Dimension legend: n new tokens, V vocabulary, T context size.

Left out: sampling (generate and sampling do that), batches (`batchsession`), paged caches
(`serving.paged`); speculative decoding's rounds (`speculative`) use `score` and `rewind` here.
"""

import numpy as np

from decodelab.core.loops.slices import drain, prefill_chunks
from decodelab.core.models.base import Session as SessionBase
from decodelab.core.models.cachedforward import (NO_ROWS, InferenceWeights, cached_forward,
                                                 weights_of)
from decodelab.core.models.checks import check_tolerance
from decodelab.core.models.kvcache import KVCache
from decodelab.core.models.layers import context_drop, rope, window_start
from decodelab.errors import FieldError
from decodelab.fields import SHIFTS  # how a full window goes on: re-read the kept tokens, or
# turn their cached keys back (llama.cpp's K-shift); the choices of the field context_shift

EMPTY_PROMPT = ("Prompt: this model starts a sequence with no token of its own, so an empty "
                "prompt gives it nothing to read; type something.")


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
                                      cfg.head_dim, self.dtype, model.cache_reserve)
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
        """prefill, sliced (`slices`): the prompt read `prefill_chunks` a piece."""
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
        """append, sliced (`slices`): `prefill_chunks` a piece."""
        ids = [int(i) for i in ids]
        if self.cache.length + len(ids) > self.cache.max_len:
            window, self.shifts = window_after(self.tokens, ids, self.shifts, self.cache.max_len)
            self.shifted = True
            self.logits = yield from self._fill_steps(window)
            return self.logits
        self.shifted = False
        for a, b in prefill_chunks(len(ids), self.model.cfg, self.cache.length):
            self.tokens += ids[a:b]
            idx = np.array([ids[a:b]], np.int64)  # (1, n)
            self.logits = cached_forward(self.weights_now(), self.cache, idx,
                                         self.positions(b - a),
                                         rows=None if b == len(ids) else NO_ROWS)[0]  # (V,)
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
        """An empty cache filled with this window, `prefill_chunks` a piece (a chunked
        prefill: each piece attends to the pieces before it in the cache). The logits after
        its last token."""
        self.cache.reset()
        self.tokens = list(tokens)
        idx = np.array([self.tokens], np.int64)  # (1, n)
        logits = None
        for a, b in prefill_chunks(len(tokens), self.model.cfg):
            logits = cached_forward(self.weights_now(), self.cache, idx[:, a:b],
                                    np.arange(a, b)[None],
                                    rows=None if b == len(tokens) else NO_ROWS)[0]
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
