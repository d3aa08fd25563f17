"""Break it on purpose: five classic KV-cache bugs, each one override of a named hook of the
correct session or cache (`core.models.session`, `kvcache`), and the check that catches it.

The lesson of the seed's falsifiable experiment: run the cached path and a full recomputation
side by side and compare the last-position logits. A correct cache agrees to rounding; each of
these bugs makes the numbers disagree by far more than the tolerance, so the check fails in
plain sight.

    frozen-position   decode feeds every new token at the same position
    token-twice       the first decode step feeds the last prompt token again
    no-causal-mask    prefill lets each prompt position see the positions after it
    dropout-on        inference keeps dropout switched on
    unmasked-padding  a padded batch does not hide its padding from attention

The first four fail the live cache check (`checks.cache_check`, the same function as the CLI);
the last fails the batch check (`batch.batch_run`: each row against the same prompt alone).

Nothing in the normal path imports this module: the generation loop, the CLI and the page's
Generate button only ever build `session.Session` and `batchsession.BatchSession`. The bugs
are reached only through `run_bug(model, bug, ...)`, which the page calls from its separate
"Break it on purpose" panel (webapi.break_it).

Left out: bugs that crash (those announce themselves); wrong weights (not a cache bug).
"""

import copy
from dataclasses import dataclass, replace

import numpy as np

from decodelab.core.models.batchsession import BatchSession
from decodelab.core.models.checks import cache_check_steps
from decodelab.core.models.session import Session
from decodelab.core.models.kvcache import KVCache
from decodelab.core.loops.slices import drain
from decodelab.errors import FieldError
from decodelab.lesson.batch import batch_run

DROPOUT_RATE = 0.1


class FrozenPositionSession(Session):
    """BUG: every decode step uses the position of the first generated token. Keeps, per decode
    step, the position it should have had and the one it was given (`fed`)."""

    fed = None

    def positions(self, n):
        if n == 1:
            self.fed = (self.fed or []) + [(self.cache.length, self.prefilled)]
        return np.full((1, n), self.prefilled)  # should count on from the cache length


ROTATION_ROWS = 4  # decode steps the page draws as dials


def rotations(cfg, fed) -> dict:
    """What the frozen position does to the rotations: for the first decode steps, the position
    each new key should have had and the one it got, and the angle each puts on the key's
    fastest-turning pair of channels (one radian per position) and its slowest, in degrees
    after whole turns. The first decode step is still right; from the second on the angle is
    short by a radian more each step."""
    D = cfg.head_dim
    per_position = np.degrees(cfg.rope_theta ** (-np.arange(0, D, 2) / D))  # (D/2,) degrees
    fast, slow = float(per_position[0]), float(per_position[-1])
    rows = [{"step": k + 1, "right": int(right), "used": int(used),
             "right_deg": right * fast % 360, "used_deg": used * fast % 360,
             "slow_right_deg": right * slow % 360, "slow_used_deg": used * slow % 360}
            for k, (right, used) in enumerate(fed[:ROTATION_ROWS], start=1)]
    wrong = next((r for r in rows if r["right"] != r["used"]), None)
    if wrong is None:
        sentence = "Every decode step here was at its own position (too few steps to go wrong)."
    else:
        short = (wrong["right"] - wrong["used"]) * fast
        sentence = (
            f"A position turns the fastest pair of a key's channels by {fast:.1f}\u00b0 and the "
            f"slowest by {slow:.3f}\u00b0. At step {wrong['step']} the new key belongs at "
            f"position {wrong['right']} ({wrong['right_deg']:.0f}\u00b0 after whole turns) but "
            f"was turned as position {wrong['used']} ({wrong['used_deg']:.0f}\u00b0): "
            f"{short:.0f}\u00b0 short, and a radian more with each step after it. Attention "
            f"reads a distance from the difference of two angles, so every cached key now "
            f"looks nearer than it is.")
    return {"degrees_per_position": fast, "slowest_degrees_per_position": slow, "rows": rows,
            "sentence": sentence}


class TokenTwiceSession(Session):
    """BUG: the first decode step feeds [last prompt token, new token], although the last prompt
    token is already in the cache. The text has it once; the cache now has it twice."""

    def feed(self, token):
        return np.array([self.tokens[-2:]]) if self.length == self.prefilled else super().feed(token)


class NoCausalMaskCache(KVCache):
    """BUG: attention over the new positions has no causal mask, so in a prefill every prompt
    position also sees the ones after it. (A decode step has one new position: nothing to mask.)"""

    def causal_mask(self, n, S, dtype):
        return None  # should hide the keys after each query


class NoCausalMaskSession(Session):
    cache_class = NoCausalMaskCache


def dropped(weights, rng):
    """A copy of the inference weights with dropout's masks in them. Dropout on a branch output
    y = h @ W is the same as scaling W's columns by the keep mask, so W_o and W_proj get fresh
    masks (one per call, shared by the positions of a prefill)."""
    keep = lambda n: (rng.random(n) >= DROPOUT_RATE) / (1.0 - DROPOUT_RATE)  # noqa: E731
    w = copy.copy(weights)
    w.layers = [(w_qkv, w_o * keep(w_o.shape[1]), w_fc, w_proj * keep(w_proj.shape[1]))
                for w_qkv, w_o, w_fc, w_proj in weights.layers]
    return w


class DropoutSession(Session):
    """BUG: dropout stays on at inference. Each call zeroes a random DROPOUT_RATE of the outputs
    of every residual branch (attention and MLP) and scales the rest by 1 / (1 - rate)."""

    def weights_now(self):
        return dropped(self.weights, self.rng)  # should be the weights as trained


class NoPaddingMaskCache(KVCache):
    """BUG: told which slots are padding, it ignores it, so padding keys stay visible."""

    def set_padding(self, valid):
        pass  # should record NEG for the padding slots in key_bias


class UnmaskedPaddingBatch(BatchSession):
    cache_class = NoPaddingMaskCache


@dataclass(frozen=True)
class Bug:
    id: str
    label: str
    check: str  # "cache": the live cache check; "batch": the batch == single check
    what_went_wrong: str


BUGS = {b.id: b for b in (
    Bug("frozen-position", "Positions not advanced during decode", "cache",
        "Every decode step was fed at the same position. Positions here are rotations: each "
        "new {unit}'s query and key were turned by the angle of the first new position, "
        "not their own, so every key cached from then on carries the wrong angle and each "
        "query misjudges how far back the cached keys lie. The full recomputation turns each "
        "by its own position."),
    Bug("token-twice", "The last token fed twice", "cache",
        "The first decode step fed the prompt's last {unit} again together with the new "
        "one, although it was already in the cache. The cache now holds a sequence with that "
        "{unit} doubled, which is not the text: every later step attends to it and shifts "
        "every position after it by one."),
    Bug("no-causal-mask", "No causal mask in prefill", "cache",
        "During prefill each prompt position could attend to the positions after it, so the "
        "keys and values cached for the prompt were computed from {unit}s that come later. "
        "The recomputation is causal, and the damaged keys stay in the cache for every later "
        "step."),
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
SESSIONS = {"frozen-position": FrozenPositionSession, "token-twice": TokenTwiceSession,
            "no-causal-mask": NoCausalMaskSession, "dropout-on": DropoutSession}


def answer(model, session, prompt_ids, steps: int) -> str:
    """What `session` makes the model write after the prompt: greedy, `steps` tokens at most,
    ending at end-of-sequence. The same for a correct session and a broken one, so the two
    texts differ only by the bug."""
    return drain(answer_steps(model, session, prompt_ids, steps))


def answer_steps(model, session, prompt_ids, steps: int):
    """answer, sliced (`core.loops.slices`): a piece per chunk of the prompt and per step."""
    eos, out = model.tokenizer.eos_id, []
    logits = yield from session.prefill_steps(prompt_ids)
    for _ in range(steps):
        token = int(np.argmax(logits))
        if token == eos:
            break
        out.append(token)
        logits = session.decode(token)
        yield None
    return model.tokenizer.decode(out)


def run_bug(model, bug: str, prompt_ids, steps: int, seed: int = 0, batch_prompts=None,
            dtype=None) -> dict:
    """run_bug_steps, every piece at once."""
    return drain(run_bug_steps(model, bug, prompt_ids, steps, seed, batch_prompts, dtype))


def run_bug_steps(model, bug: str, prompt_ids, steps: int, seed: int = 0, batch_prompts=None,
                  dtype=None):
    """Run the check that catches `bug` ("none" runs the correct cache through the same check).

    Cache bugs: kvcache.cache_check with a buggy session, per-step max |cached - recomputed|,
    and what the model writes with the bug and without it (`answers`: greedy, `steps` tokens).
    The batch bug: batch.batch_run with a buggy batch, per-row max |batch - alone|.
    Returns the check's result plus which check ran, and the sentence on what went wrong (in
    the model's unit: characters or tokens). dtype: the model's generation dtype unless said.
    """
    if bug not in BUG_IDS:
        raise FieldError("bug", f"Bug must be one of {', '.join(BUG_IDS)}; got {bug!r}.")
    dtype = dtype or model.generation_dtype
    unit = "character" if model.tokenizer.name == "chars" else "token"
    spec = BUGS.get(bug)
    if spec is not None:
        spec = replace(spec, what_went_wrong=spec.what_went_wrong.format(unit=unit))
    if bug == "no-causal-mask" and not prompt_ids:
        raise FieldError("test_prompt", "Test prompt: a missing causal mask only matters when the "
                                   "prefill has something to hide; type at least one character.")
    if spec is not None and spec.check == "batch":
        prompts = batch_prompts or [prompt_ids]
        session = UnmaskedPaddingBatch(model, len(prompts), dtype)
        result = batch_run(model, prompts, steps, seed, dtype, session=session)
        return {"bug": bug, "check": "batch", "label": spec.label,
                "what_went_wrong": spec.what_went_wrong, "batch": result,
                "course": course(result["diff"].max(axis=1).tolist(), result["tolerance"])}
    broken = lambda: SESSIONS.get(bug, Session)(model, dtype)  # noqa: E731
    session = broken()
    session.rng = np.random.default_rng(seed)  # dropout draws its masks from the run's seed too
    result = yield from cache_check_steps(model, prompt_ids, steps, seed, session=session)
    answers = {"correct": (yield from answer_steps(model, model.session(dtype=dtype), prompt_ids,
                                                   steps)),
               "broken": None}
    if spec is not None:  # a second broken session, with the same draws (dropout's masks)
        writes = broken()
        writes.rng = np.random.default_rng(seed)
        answers["broken"] = yield from answer_steps(model, writes, prompt_ids, steps)
    out = {"bug": bug, "check": "cache", "label": spec.label if spec else "No bug",
           "what_went_wrong": spec.what_went_wrong if spec else None, "cache": result,
           "course": course(result["per_step"], result["tolerance"]), "answers": answers}
    if bug == "frozen-position":
        out["rotations"] = rotations(model.cfg, session.fed or [])
    return out


SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")


def _sci(x: float) -> str:
    """A difference as the page writes it: 0.47, 4.3, or 1.8 × 10⁻¹⁵ (two significant digits)."""
    if x == 0:
        return "0"
    if 0.01 <= abs(x) < 1000:
        return f"{x:.2g}"
    mantissa, exponent = f"{x:.1e}".split("e")
    power = "10" + str(int(exponent)).translate(SUPERSCRIPT)
    return power if mantissa == "1.0" else f"{mantissa} \u00d7 {power}"


def course(per_step, tolerance) -> str:
    """What the check did step by step, in words drawn from the differences themselves: where it
    first failed, at how many steps, and whether the gap grew, shrank or held."""
    bad = [i for i, d in enumerate(per_step) if d > tolerance]
    if not bad:
        return (f"At every one of the {len(per_step)} steps the difference stayed within the "
                f"tolerance {_sci(tolerance)} (largest {_sci(max(per_step, default=0.0))}).")
    first, last = bad[0], bad[-1]
    text = f"The check failed first at step {first + 1}"
    text += f" and at {len(bad)} of the {len(per_step)} steps" if len(bad) > 1 else ", at that step only"
    a, b = per_step[first], per_step[last]
    if len(bad) > 1:
        if b > 3 * a:
            text += f"; the gap grew from {_sci(a)} at step {first + 1} to {_sci(b)} at step {last + 1}"
        elif a > 3 * b:
            text += f"; the gap shrank from {_sci(a)} at step {first + 1} to {_sci(b)} at step {last + 1}"
        else:
            lo, hi = min(per_step[i] for i in bad), max(per_step[i] for i in bad)
            moves = "went up and down" if hi > 3 * lo else "held"
            text += f"; the gap {moves} between {_sci(lo)} and {_sci(hi)}"
    else:
        text += f", by {_sci(a)}"
    return text + f" (the tolerance is {_sci(tolerance)})."

