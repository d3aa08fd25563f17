"""Several prompts of different lengths decoded as one left-padded batch, each row held to the
same prompt run alone: what the page's batch view shows.

Left padding puts every prompt's last token in the same column, so one decode step serves all
rows. The padding slots must then be invisible: the attention mask hides their keys, and each
row counts positions over its real tokens only (batchsession.BatchSession). `batch_run` checks
that at every step: row b's logits against a single-row session fed the same tokens.

Tokens are drawn per row at temperature 1 (one uniform draw per row and step from
default_rng(seed)), with end-of-sequence blocked so every row runs all steps; the single-row
sessions are fed the batch's tokens, so both sides always see the same text.

Dimension legend: B rows, V vocabulary, S cache slots in use.
Left out: rows that finish early, per-row sampling settings.
"""

import numpy as np

from decodelab.core.rules import sampling
from decodelab.core.models.batchsession import BatchSession
from decodelab.core.models.checks import check_tolerance


def batch_run(model, prompts, steps: int, seed: int = 0, dtype=np.float64, session=None) -> dict:
    """prompts: lists of token ids (B of them). Runs `steps` logits vectors (the prefill, then a
    decode per drawn token). `session` is a ready BatchSession to use instead of a new one."""
    batch = session if session is not None else BatchSession(model, len(prompts), dtype)
    rng = np.random.default_rng(seed)
    logits = batch.prefill(prompts)  # (B, V)
    singles = [model.session(dtype=dtype) for _ in prompts]
    alone = np.stack([s.prefill(p) for s, p in zip(singles, prompts)])  # (B, V)
    diffs, drawn = [], []
    for step in range(steps):
        diffs.append(np.abs(logits - alone).max(axis=1))  # (B,) this step, per row
        z = logits.astype(np.float64)  # (B, V)
        z[:, model.tokenizer.eos_id] = -np.inf  # every row runs all steps
        tokens = [sampling.pick(sampling.softmax(row), rng.random()) for row in z]
        drawn.append(tokens)
        if step == steps - 1 or batch.length == batch.cache.max_len:
            break
        logits = batch.decode(tokens)
        alone = np.stack([s.decode(t) for s, t in zip(singles, tokens)])
    diff = np.array(diffs)  # (steps, B)
    tolerance = check_tolerance(model, dtype)
    return {"steps": len(diffs), "diff": diff, "tolerance": tolerance,
            "ok": bool(diff.max() <= tolerance), "drawn": np.array(drawn).T,  # (B, steps)
            "slots": batch.ids[:, :batch.length].copy(), "padding": batch.padding.copy(),
            "dtype": np.dtype(dtype).name}


def describe(model, prompts_text, result: dict) -> dict:
    """The batch result as plain JSON for the page: per row, each cache slot with its token,
    whether it is padding, its position and where it came from; per-row and per-step diffs."""
    label = model.tokenizer.label
    diff = result["diff"]  # (steps, B)
    rows = []
    for b, text in enumerate(prompts_text):
        pad = result["padding"][b]
        slots, pos = [], 0
        n_prompt = len(text) + 1  # EOS + the prompt's characters
        first_real = int(np.argmin(pad)) if not pad.all() else len(pad)
        for s, token in enumerate(result["slots"][b]):
            if pad[s]:
                slots.append({"pad": True})
                continue
            kind = "start" if s == first_real else "prompt" if s < first_real + n_prompt \
                else "generated"
            slots.append({"pad": False, "token": label(int(token)), "pos": pos, "kind": kind})
            pos += 1
        drawn = [label(int(t)) for t in result["drawn"][b]]
        rows.append({"prompt": text, "slots": slots, "padding": int(pad.sum()),
                     "generated": "".join(drawn), "max_abs_diff": float(diff[:, b].max()),
                     "ok": bool(diff[:, b].max() <= result["tolerance"])})
    return {"rows": rows, "steps": result["steps"], "tolerance": result["tolerance"],
            "ok": result["ok"], "max_abs_diff": float(diff.max()),
            "per_step": [float(x) for x in diff.max(axis=1)], "dtype": result["dtype"],
            "columns": int(result["slots"].shape[1])}
