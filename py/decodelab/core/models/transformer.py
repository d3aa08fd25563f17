"""The transformer as a model object: its weights and configuration, its tokenizer, how it was
trained, the logits of a window computed from scratch, cached generation sessions, and its file.
It offers the interface the bigram offers too (`tokenizer`, `context_size`, `session()`), so one
generation loop serves both.

The maths of every layer is in `layers`; the cached forward in `cachedforward`, the sessions in `session`.
"""

import io
import json
from dataclasses import asdict

import numpy as np

from decodelab.core.models.base import Model
from decodelab.core.models.layers import (
    Config,
    causal_bias,
    cross_entropy,
    forward,
    matmul_layout,
    scoring_rows,
    segment_layout,
)
from decodelab.core.tokens.tokenfile import from_arrays
from decodelab.core.tokens.tokenizer import CharTokenizer


class TransformerModel(Model):
    kind = "transformer"
    exports = True  # to transformers' LlamaForCausalLM (interop.hf)
    handoff = True

    def __init__(self, cfg: Config, params: dict, tokenizer: CharTokenizer, curve=None,
                 info=None):
        assert cfg.vocab_size == tokenizer.vocab_size, "config and tokenizer disagree on V"
        self.cfg, self.params, self.tokenizer = cfg, params, tokenizer
        self.context_size = cfg.context_size
        self.curve = curve or {}  # training curve: {"step": [...], "train": [...], "val": [...]}
        self.info = info or {}  # how it was trained: seconds, steps, seed, settings
        self.derived = {}  # the parameters in other forms (dtypes, inference layouts), made once

    @property
    def n_params(self) -> int:
        return int(sum(a.size for a in self.params.values()))

    def params_as(self, dtype) -> dict:
        key = ("params", np.dtype(dtype))
        if key not in self.derived:
            self.derived[key] = {  # the matrices right of an @ in matmul_layout
                k: matmul_layout(v.astype(dtype)) if k.split(".")[-1].startswith("w_")
                else v.astype(dtype) for k, v in self.params.items()}
        return self.derived[key]

    def all_logits(self, tokens, dtype=np.float32) -> np.ndarray:
        """The logits at every position (T, V) of one window: what one forward pass over a
        prompt returns (row t scores the token after position t)."""
        n = len(tokens)
        idx = np.asarray(tokens, np.int64)[None]  # (1, n)
        bias = causal_bias(n, np.dtype(dtype))[None, None]  # (1, 1, n, n)
        logits, _ = forward(self.params_as(dtype), self.cfg, idx, np.arange(n)[None], bias)
        return logits[0]  # (T, V)

    def nll(self, sequences, rows_per_pass: int = 64) -> float:
        """Mean negative log-likelihood in nats per predicted token (EOS included), each
        sequence scored as [EOS] + ids + [EOS] the way generation would see it."""
        inputs, targets, weights = scoring_rows(sequences, self.tokenizer, self.context_size)
        total, count = 0.0, float(weights.sum())
        for r in range(0, len(inputs), rows_per_pass):
            sl = slice(r, r + rows_per_pass)
            pos, bias = segment_layout(inputs[sl], self.params["wte"].dtype)
            logits, _ = forward(self.params, self.cfg, inputs[sl], pos, bias)  # (R, T, V)
            loss, _ = cross_entropy(logits, targets[sl], weights[sl])
            total += loss * max(float(weights[sl].sum()), 1.0)
        return total / max(count, 1.0)

    def session(self, dtype=None, shift: str = "reread"):
        """A cached generation session (session.Session); its cache holds the whole context
        window.

        Generation runs in float64 unless asked otherwise: the native build and WebAssembly
        then agree to ~1e-15 on every probability (float32 sums in a different BLAS order would
        differ by ~1e-6), and the live cache check can hold a tight tolerance. It costs about
        15% per step. shift: how a full window goes on ("reread" or "kshift", session.Session).
        """
        from decodelab.core.models.session import Session  # here: training never generates,
        # so the session is not part of a trained model's key (build.py, model_artifact)

        return Session(self, self.generation_dtype if dtype is None else dtype, shift)

    def save(self, path) -> None:
        curve = {f"curve.{k}": np.asarray(v) for k, v in self.curve.items()}
        weights = {f"param.{k}": v for k, v in self.params.items()}
        np.savez(path, kind=np.array(self.kind), config=np.array(json.dumps(asdict(self.cfg))),
                 **self.tokenizer.arrays(), info=np.array(json.dumps(self.info)),
                 **curve, **weights)

    @classmethod
    def load(cls, path_or_bytes) -> "TransformerModel":
        src = io.BytesIO(path_or_bytes) if isinstance(path_or_bytes, bytes) else path_or_bytes
        with np.load(src) as z:
            cfg = Config(**json.loads(str(z["config"])))
            params = {k[6:]: z[k] for k in z.files if k.startswith("param.")}
            curve = {k[6:]: z[k].tolist() for k in z.files if k.startswith("curve.")}
            return cls(cfg, params, from_arrays(z), curve,
                       json.loads(str(z["info"])))
