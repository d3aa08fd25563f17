"""Generation without a cache (the benchmark's "cache off"): every call runs the whole window
through the model's full forward, by the same context-shift rule as the cached session.
"""

import numpy as np

from decodelab.core.models.base import Session as SessionBase
from decodelab.core.models.session import window_after


class UncachedSession(SessionBase):
    """session.Session's interface without a cache: every call runs the whole window
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
