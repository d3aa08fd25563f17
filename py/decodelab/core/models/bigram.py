"""A count-based bigram model: P(next | previous) from counts with add-alpha smoothing.

Training is counting how often each character follows each other character (EOS marks both
the start and the end of a sequence), adding alpha to every cell so nothing has probability 0,
and normalising each row. The logits it hands to the decoder are the row's log-probabilities:
a valid set of logits (softmax of them gives the row back).

Dimension legend: V vocabulary size (EOS + characters).

Left out: any context beyond one token (the transformer has that).
"""

import functools
import io

import numpy as np

from decodelab.core.models.base import Model, Session
from decodelab.core.tokens.tokenfile import from_arrays
from decodelab.core.tokens.tokenizer import EOS, CharTokenizer


def pair_ids(sequences, tokenizer: CharTokenizer):
    """All (previous, next) id pairs of the sequences, each wrapped in EOS ... EOS."""
    prev, nxt = [], []
    for s in sequences:
        ids = [EOS] + tokenizer.encode_marked(s) + [EOS]
        prev.extend(ids[:-1])
        nxt.extend(ids[1:])
    # np.intp: the platform's index type (32-bit in WebAssembly), which bincount insists on
    return np.asarray(prev, dtype=np.intp), np.asarray(nxt, dtype=np.intp)


class BigramModel(Model):
    kind = "bigram"

    def __init__(self, counts: np.ndarray, tokenizer: CharTokenizer, alpha: float = 1.0,
                 val_nll=None):
        V = tokenizer.vocab_size
        assert counts.shape == (V, V), "counts must be (V, V)"
        self.counts = counts  # (V, V) int64, row = previous token, column = next token
        self.tokenizer = tokenizer
        self.alpha = float(alpha)
        self.context_size = 1
        # nll() of the held-out split of the corpus it was counted from, measured then and saved
        # with it (as a transformer's is), so that a page's start need not score it again
        self.val_nll = val_nll

    @functools.cached_property
    def log_probs(self) -> np.ndarray:
        """(V, V) log P(next | previous), add-alpha smoothed. Made on first use: a BPE model's
        table is a million cells, and the page's start only needs its counts."""
        smoothed = self.counts + self.alpha  # (V, V)
        table = np.log(smoothed / smoothed.sum(axis=1, keepdims=True))
        table.setflags(write=False)  # rows are handed out as logits: never edited
        return table

    @classmethod
    def fit(cls, corpus, alpha: float = 1.0, tokenizer=None) -> "BigramModel":
        """Count the corpus's training split; tokenizer: a trained BPE, or None for characters."""
        tokenizer = tokenizer or CharTokenizer(corpus.chars)
        V = tokenizer.vocab_size
        prev, nxt = pair_ids(corpus.train, tokenizer)
        counts = np.bincount(prev * V + nxt, minlength=V * V).reshape(V, V)  # (V, V)
        model = cls(counts.astype(np.int64), tokenizer, alpha)
        model.val_nll = model.nll(corpus.val) if corpus.val else None
        return model

    @property
    def n_params(self) -> int:
        return self.counts.size

    def nll(self, sequences) -> float:
        """Mean negative log-likelihood in nats per predicted token (EOS included)."""
        prev, nxt = pair_ids(sequences, self.tokenizer)
        # the table's cells for these pairs, from the counts (the table itself may not be made)
        rows = self.counts.sum(axis=1) + self.alpha * self.tokenizer.vocab_size  # (V,)
        return float(-(np.log(self.counts[prev, nxt] + self.alpha) - np.log(rows[prev])).mean())

    def all_logits(self, tokens, dtype=np.float64) -> np.ndarray:
        """The logits at every position (T, V): row t is the table's row for tokens[t]."""
        return self.log_probs[np.asarray(tokens, dtype=np.intp)].astype(dtype, copy=False)

    def session(self, shift: str = "reread") -> "BigramSession":
        """A run's state (shift is the transformer's: a bigram keeps no window to shift)."""
        return BigramSession(self)

    def save(self, path) -> None:
        # a BPE table is a million mostly-zero cells: compressed, it is a few hundred KB
        np.savez_compressed(path, counts=self.counts.astype(np.int32), **self.tokenizer.arrays(),
                 alpha=np.array(self.alpha),
                 val_nll=np.array(np.nan if self.val_nll is None else self.val_nll))

    @classmethod
    def load(cls, path_or_bytes) -> "BigramModel":
        src = io.BytesIO(path_or_bytes) if isinstance(path_or_bytes, bytes) else path_or_bytes
        with np.load(src) as z:
            val_nll = float(z["val_nll"]) if "val_nll" in z.files else np.nan
            return cls(z["counts"].astype(np.int64), from_arrays(z), float(z["alpha"]),
                       None if np.isnan(val_nll) else val_nll)


class BigramSession(Session):
    """One generation's state. A bigram only needs the last token, so there is nothing to cache."""

    def __init__(self, model: BigramModel):
        self.model = model

    def prefill(self, ids) -> np.ndarray:
        last = ids[-1] if len(ids) else EOS  # an empty prompt starts a new sequence
        return self.model.log_probs[last]  # (V,)

    def decode(self, token_id: int) -> np.ndarray:
        return self.model.log_probs[token_id]  # (V,)

    def append(self, ids) -> np.ndarray:
        """Several tokens at once (a tool's result): only the last one matters."""
        return self.model.log_probs[ids[-1]]  # (V,)

    def rewind(self, n: int) -> None:
        """Forget everything after the first n tokens: there is nothing to forget, the next
        call names the token the next logits follow."""

    def fork(self) -> "BigramSession":
        return BigramSession(self.model)
