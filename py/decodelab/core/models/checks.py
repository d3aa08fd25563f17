"""A KV cache checked against a full recomputation: the limit rounding allows (`check_tolerance`),
the `cache-check` command (`cache_check`), and what a cache is and is not (`reuse_check`).

The logits a cached step hands out are compared with the whole window recomputed from nothing
(the model's `logits_at`: the trained models' full forward without a cache; the real model
reads it in one pass into an empty cache of its own). Both do the same sums in a different
order, so rounding alone separates them: in float32 by up to about 2e-5 on logits of size ~14
(measured over 300 steps of the trained prose model), in float64 by about 1e-14. A real cache
bug (a position not advanced, a token fed twice, a missing mask) is off by far more: freezing
the decode position of the trained prose model gives 0.47 after one step and 9 after thirty.

Left out: the live check that follows a run (`loops.livecheck`), broken caches (`lesson.bugs`).
"""

import numpy as np

from decodelab.core.loops.slices import drain
from decodelab.core.rules import sampling


def check_tolerance(model, dtype=None) -> float:
    """The live check's limit for a model's logits in `dtype` (its generation dtype unless
    said): rounding's (`base.Model.check_tolerance`), unless the model declares its own
    (larger logits summed over longer rows round further: pretrained.model.PretrainedModel)."""
    return model.check_tolerance[np.dtype(dtype or model.generation_dtype).name]


def cache_check(model, prompt_ids, steps: int, seed: int = 0, dtype=np.float32,
                session=None) -> dict:
    """The `cache-check` command: `steps` logits vectors (the prefill, then a decode per sampled
    token), each compared with a full recomputation over the same window.

    Tokens are drawn at temperature 1 with end-of-sequence excluded (so the text runs on
    through context shifts), one uniform draw per step from default_rng(seed), first token whose cumulative
    probability exceeds it. `session`: a ready session to check instead of a new correct one.
    """
    return drain(cache_check_steps(model, prompt_ids, steps, seed, dtype, session))


def cache_check_steps(model, prompt_ids, steps: int, seed: int = 0, dtype=np.float32,
                      session=None):
    """cache_check, sliced (`slices`): a piece per chunk of the prompt, per step and per chunk
    of each step's full pass."""
    rng = np.random.default_rng(seed)
    session = session if session is not None else model.session(dtype=dtype)
    logits, diffs = (yield from session.prefill_steps(prompt_ids)), []
    for step in range(steps):
        diffs.append((yield from session.check_steps()))
        if step == steps - 1:
            break
        z = logits.astype(np.float64)  # (V,)
        z[model.tokenizer.eos_id] = -np.inf  # EOS blocked, as with ignore_eos
        logits = session.decode(sampling.pick(sampling.softmax(z), rng.random()))
        yield None
    worst = max(diffs, default=0.0)
    return {"max_abs_diff": worst, "steps": steps, "tolerance": session.tolerance,
            "ok": worst <= session.tolerance, "dtype": session.dtype.name,
            "shifts": session.shifts, "per_step": diffs}


def reuse_check(model, prompt_ids, appended_ids, change_at: int, new_token: int,
                dtype=np.float64) -> dict:
    """What a cache is and is not: two real uses of one prefilled cache, each compared with a
    full recomputation of the text it claims to hold.

    append: the cache of the prompt, then `appended_ids` fed in one pass after it. The keys and
        values already cached belong to the same earlier tokens, so the logits agree.
    edit: the same cache, but token `change_at` of the prompt is now `new_token` while its old
        key and value stay cached (nothing recomputed them), then the same appended tokens. The
        full recomputation reads the edited text, and the logits differ: a cache is valid only
        for the exact tokens that made it.
    """
    prompt = [int(i) for i in prompt_ids]
    if not 0 <= change_at < len(prompt):
        raise ValueError("change_at must be a position of the prompt")
    session = model.session(dtype=dtype)
    session.prefill(prompt)
    kept = session.fork()
    logits = session.append(appended_ids)  # (V,)
    full = model.full_logits(session.tokens, dtype)  # the same window, no cache
    append_diff = float(np.abs(logits - full).max())
    edited = prompt[:change_at] + [int(new_token)] + prompt[change_at + 1:]
    stale = kept.append(appended_ids)  # the old prompt's keys and values, reused
    full_edited = model.full_logits(list(model.tokenizer.start_ids) + edited +
                                    [int(i) for i in appended_ids], dtype)
    edit_diff = float(np.abs(stale - full_edited).max())
    tol = check_tolerance(model, dtype)
    top = lambda z: int(np.argmax(z))  # noqa: E731
    return {"tolerance": tol, "prompt_length": len(prompt), "appended": len(appended_ids),
            "append": {"diff": append_diff, "ok": append_diff <= tol,
                       "cache_length": session.length},
            "edit": {"diff": edit_diff, "ok": edit_diff <= tol, "position": change_at,
                     "old_token": prompt[change_at], "new_token": int(new_token),
                     "same_top": top(stale) == top(full_edited),
                     "top_cached": top(stale), "top_recomputed": top(full_edited)}}
