"""Break it on purpose: five classic KV-cache bugs, each one a small subclass of the correct
session or cache, and the check that catches it.

The lesson of the seed's falsifiable experiment: run the cached path and a full recomputation
side by side and compare the last-position logits. A correct cache agrees to rounding; each of
these bugs makes the numbers disagree by far more than the tolerance, so the check fails in
plain sight.

    frozen-position   decode feeds every new token at the same position
    token-twice       the first decode step feeds the last prompt token again
    no-causal-mask    prefill lets each prompt position see the positions after it
    dropout-on        inference keeps dropout switched on
    unmasked-padding  a padded batch does not hide its padding from attention

The first four fail the live cache check (`kvcache.cache_check`, the same function as the CLI);
the last fails the batch check (`batch.batch_run`: each row against the same prompt alone).

Nothing in the normal path imports this module: the generation loop, the CLI and the page's
Generate button only ever build `transformer.Session` and `transformer.BatchSession`. The bugs
are reached only through `run_bug(model, bug, ...)`, which the page calls from its separate
"Break it on purpose" panel (webapi.break_it).

Left out: bugs that crash (those announce themselves); wrong weights (not a cache bug).
"""

import copy
from dataclasses import dataclass

import numpy as np

from decodelab.batch import batch_run
from decodelab.errors import FieldError
from decodelab.kvcache import KVCache, cache_check
from decodelab.transformer import BatchSession, Session, cached_forward

DROPOUT_RATE = 0.1


class FrozenPositionSession(Session):
    """BUG: every decode step uses the position of the first generated token."""

    def prefill(self, ids):
        logits = super().prefill(ids)
        self.frozen = self.cache.length
        return logits

    def decode(self, token_id):
        if self.cache.length == self.cache.max_len:
            return super().decode(token_id)  # a context shift re-prefills correctly
        self.shifted = False
        self.tokens.append(int(token_id))
        self._idx[0, 0], self._pos[0, 0] = int(token_id), self.frozen  # should be cache.length
        self.logits = cached_forward(self.weights, self.cache, self._idx, self._pos)[0]
        return self.logits


class TokenTwiceSession(Session):
    """BUG: the first decode step feeds [last prompt token, new token], although the last prompt
    token is already in the cache. The text has it once; the cache now has it twice."""

    def prefill(self, ids):
        self.fed_twice = False
        return super().prefill(ids)

    def decode(self, token_id):
        if self.fed_twice or self.cache.length + 2 > self.cache.max_len:
            return super().decode(token_id)
        self.fed_twice, self.shifted = True, False
        t = self.cache.length
        idx = np.array([[self.tokens[-1], int(token_id)]], np.int64)  # (1, 2): one too many
        self.tokens.append(int(token_id))
        self.logits = cached_forward(self.weights, self.cache, idx, np.array([[t, t + 1]]))[0]
        return self.logits


class NoCausalMaskCache(KVCache):
    """BUG: attention over the new positions has no causal mask, so in a prefill every prompt
    position also sees the ones after it. (A decode step has one new position: nothing to mask.)"""

    def attend(self, layer, q, k, v):
        n = k.shape[2]
        t0, S = self.length, self.length + n
        K, V = self.k[layer], self.v[layer]  # (B, Hkv, T_max, D)
        K[:, :, t0:S] = k
        V[:, :, t0:S] = v
        s = q @ K[:, :, :S].swapaxes(-1, -2)  # (B, Hkv, G*n, S); the mask should be added here
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        return s @ V[:, :, :S]  # (B, Hkv, G*n, D)


class NoCausalMaskSession(Session):
    def __init__(self, model, dtype=np.float64):
        super().__init__(model, dtype)
        c = self.cache
        self.cache = NoCausalMaskCache(len(c.k), 1, c.k[0].shape[1], c.max_len, c.k[0].shape[3],
                                       self.dtype)


class DropoutSession(Session):
    """BUG: dropout stays on at inference. Each call zeroes a random DROPOUT_RATE of the outputs
    of every residual branch (attention and MLP) and scales the rest by 1 / (1 - rate).

    Dropout on a branch output y = h @ W is the same as scaling W's columns by the keep mask,
    so each call gets a copy of the weights with fresh masks in W_o and W_proj (one mask per
    call, shared by the positions of a prefill; a decode step has one position anyway)."""

    def __init__(self, model, dtype=np.float64, seed: int = 0):
        super().__init__(model, dtype)
        self.clean, self.rng = self.weights, np.random.default_rng(seed)

    def _drop(self):
        w = copy.copy(self.clean)
        keep = lambda n: (self.rng.random(n) >= DROPOUT_RATE) / (1.0 - DROPOUT_RATE)  # noqa
        w.layers = [(w_qkv, w_o * keep(w_o.shape[1]), w_fc, w_proj * keep(w_proj.shape[1]))
                    for w_qkv, w_o, w_fc, w_proj in self.clean.layers]
        self.weights = w

    def prefill(self, ids):
        self._drop()
        return super().prefill(ids)

    def decode(self, token_id):
        self._drop()
        return super().decode(token_id)


class NoPaddingMaskCache(KVCache):
    """BUG: told which slots are padding, it ignores it, so padding keys stay visible."""

    def set_padding(self, valid):
        pass  # should record NEG for the padding slots in key_bias


class UnmaskedPaddingBatch(BatchSession):
    def __init__(self, model, batch: int, dtype=np.float64):
        super().__init__(model, batch, dtype)
        c = self.cache
        self.cache = NoPaddingMaskCache(len(c.k), batch, c.k[0].shape[1], c.max_len,
                                        c.k[0].shape[3], self.dtype)


@dataclass(frozen=True)
class Bug:
    id: str
    label: str
    check: str  # "cache": the live cache check; "batch": the batch == single check
    what_went_wrong: str


BUGS = {b.id: b for b in (
    Bug("frozen-position", "Positions not advanced during decode", "cache",
        "Every decode step was fed at the same position, so the model read each new character "
        "as if it stood where the first one did: the position it adds is wrong, and so is "
        "every key it caches from then on. The full recomputation numbers the positions "
        "correctly, and the gap grows with each step."),
    Bug("token-twice", "The last token fed twice", "cache",
        "The first decode step fed the prompt's last character again together with the new "
        "one, although it was already in the cache. The cache now holds a sequence with that "
        "character doubled, which is not the text: every later step attends to it and shifts "
        "every position after it by one."),
    Bug("no-causal-mask", "No causal mask in prefill", "cache",
        "During prefill each prompt position could attend to the positions after it, so the "
        "keys and values cached for the prompt were computed from characters that come later. "
        "The recomputation is causal and disagrees already at the first step, and keeps "
        "disagreeing because the damaged keys stay in the cache."),
    Bug("dropout-on", "Dropout left on", "cache",
        f"Dropout stayed switched on at inference: every step zeroed a random "
        f"{DROPOUT_RATE:.0%} of each residual branch's outputs and scaled up the rest. The "
        f"cached run is noisy, so it cannot match the recomputation in evaluation mode; run it "
        f"twice with another seed and it does not even match itself."),
    Bug("unmasked-padding", "Padding without a mask", "batch",
        "The shorter prompts were left-padded, but the padding slots were not hidden from "
        "attention, so those rows also attended to the padding's keys and values. Their logits "
        "no longer match the same prompts run alone; the longest prompt has no padding and "
        "still matches."),
)}
BUG_IDS = ("none",) + tuple(BUGS)


class _BuggyModel:
    """The model as cache_check sees it, except that its sessions carry the bug."""

    def __init__(self, model, make):
        self.model, self.make = model, make

    def session(self, max_tokens: int = 0, dtype=np.float64):
        return self.make(self.model, dtype)


def run_bug(model, bug: str, prompt_ids, steps: int, seed: int = 0, batch_prompts=None,
            dtype=np.float64) -> dict:
    """Run the check that catches `bug` ("none" runs the correct cache through the same check).

    Cache bugs: kvcache.cache_check with a buggy session, per-step max |cached - recomputed|.
    The batch bug: batch.batch_run with a buggy batch, per-row max |batch - alone|.
    Returns the check's result plus which check ran, and the sentence on what went wrong.
    """
    if bug not in BUG_IDS:
        raise FieldError("bug", f"Bug must be one of {', '.join(BUG_IDS)}; got {bug!r}.")
    spec = BUGS.get(bug)
    if bug == "no-causal-mask" and not prompt_ids:
        raise FieldError("prompt", "Test prompt: a missing causal mask only matters when the "
                                   "prefill has something to hide; type at least one character.")
    if spec is not None and spec.check == "batch":
        prompts = batch_prompts or [prompt_ids]
        session = UnmaskedPaddingBatch(model, len(prompts), dtype)
        return {"bug": bug, "check": "batch", "label": spec.label,
                "what_went_wrong": spec.what_went_wrong,
                "batch": batch_run(model, prompts, steps, seed, dtype, session=session)}
    makers = {
        "none": None,
        "frozen-position": FrozenPositionSession,
        "token-twice": TokenTwiceSession,
        "no-causal-mask": NoCausalMaskSession,
        "dropout-on": lambda m, dt: DropoutSession(m, dt, seed),
    }
    target = model if makers[bug] is None else _BuggyModel(model, makers[bug])
    result = cache_check(target, prompt_ids, steps, seed, dtype=dtype)
    return {"bug": bug, "check": "cache", "label": spec.label if spec else "No bug",
            "what_went_wrong": spec.what_went_wrong if spec else None, "cache": result}

