"""What a model is and allows, declared once, with the defaults every model starts from.

A chapter, a check or an endpoint asks the model (`model.has_template`, `model.own_data`,
`model.limits`), never its kind: a model of another kind (a second weight layout, another
engine) then plugs in by declaring what differs. The bigram, the transformer and the real model
read from its GGUF file (`decodelab.pretrained.model`) each set here only what is their own.

Also here: the one way to recompute a model's logits from nothing, `logits_at` (the live check,
the beam search's check, the bugs lab and the parity tests all go through it), and the base of
every generation session.
"""

import numpy as np


class Model:
    kind = ""  # which code runs it: bigram, transformer, pretrained
    # It brings its own tokenizer, data and training (read from a file): a run's dataset and
    # tokenizer play no part, and its texts are compared with `reference_texts`' corpus.
    own_data = False
    reference_texts = None
    template = None  # a chat template decodelab renders (ChatTemplate), or None: no chat
    exports = False  # whether it goes to transformers as a Hugging Face model (interop.hf)
    handoff = False  # whether a run of it is zipped with its weights for transformers (handoff)
    # What its sessions compute in: float64 unless the model says otherwise (see
    # transformer.TransformerModel.session for why), and the live check's limit per dtype.
    generation_dtype = np.float64
    check_tolerance = {"float32": 1e-4, "float64": 1e-9}
    cache_reserve = None  # positions a session's cache allocates at a time (None: the window)
    # Limits of its own on the lesson's heavier features (empty: the fields' own):
    # search_max_tokens (beam search and speculative decoding), check_steps (the bugs lab),
    # checks_each_round (False: speculative decoding's rounds go unchecked).
    limits = {}

    @property
    def name(self) -> str:
        """The value of the Model field that names it."""
        return self.kind

    @property
    def label(self) -> str:
        """Its name in a sentence."""
        return self.kind

    @property
    def has_template(self) -> bool:
        return self.template is not None

    def logits_at(self, tokens, rows=None, dtype=np.float32) -> np.ndarray:
        """The logits after the given positions of one window (len(rows), V), or after every
        position (T, V) when rows is None, recomputed from nothing: no session, no cache, no
        state shared with a run (so a cache bug of the bugs lab shows)."""
        from decodelab.core.loops.slices import drain  # here: training never recomputes

        return drain(self.logits_at_steps(tokens, rows, dtype))

    def logits_at_steps(self, tokens, rows=None, dtype=np.float32):
        """logits_at, sliced (`loops.slices`): here in one piece, the whole window through the
        model's full forward (`all_logits`); a model whose window is long says otherwise."""
        out = self.all_logits(tokens, dtype)  # (T, V)
        return out if rows is None else out[np.asarray(rows, np.int64)]
        yield  # (a generator of no pieces: the caller's own piece holds it)

    def full_logits(self, tokens, dtype=np.float32) -> np.ndarray:
        """Last-position logits (V,) of one window, recomputed from nothing."""
        return self.logits_at(tokens, [len(tokens) - 1], dtype)[0]  # (V,)


class Session:
    """What every generation session offers besides prefill, decode and append."""

    has_cache = False  # a KV cache: a run records its length and checks it live

    def prefill_steps(self, ids):
        """prefill, sliced (`loops.slices`): in one piece unless the session reads a long
        prompt in chunks."""
        return self.prefill(ids)
        yield  # (a generator of no pieces: the prompt read at once)
