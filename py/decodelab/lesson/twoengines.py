"""What an engine's choices change: one prompt through the real model on both engines, step by
step (`pretrained.engines`: the reference's float32, and llama.cpp's quantized arithmetic).

    compare(models, prompt_ids, steps) -> {
        "greedy":   each engine's own greedy answer: {engine: [token ids]}, its "texts" and
                    "tokens" (each token's label), and "parted_at", the first step where the two
                    answers differ (None when they never do),
        "steps":    along the reference's answer (both engines read the same tokens, so their
                    steps line up): each engine's top candidates with logits and probabilities,
                    whether their first choices agree, the largest logit difference among the
                    candidates either ranks top, and the two distributions' total variation
                    distance (half the sum of |p - q|: the share of probability that moved),
        "summary":  how many steps' first choices agree, the median and largest distance,
        "engines":  what each engine's weights hold and how long its greedy steps took
                    (measured here, by the clock of the machine that runs it: the decode
                    steps' own time),
    }

`compare_steps` is the same computation in pieces (`core.loops.slices`), for the page.
Every number is the models' own (no sampling: greedy answers and full distributions), so the
same prompt gives the same comparison natively and in the page, but for the times.
"""

import time

import numpy as np

from decodelab.core.loops.slices import drain
from decodelab.core.models.session import Session

TOP = 5  # candidates listed per engine and step


def probabilities(logits: np.ndarray) -> np.ndarray:
    """softmax in float64 (V,)."""
    z = logits.astype(np.float64)
    z -= z.max()
    p = np.exp(z)
    return p / p.sum()


def greedy_steps(model, prompt_ids, steps: int, stop_ids=()):
    """The model's own greedy answer (token ids), the logits before each of its tokens, and the
    seconds its decode steps took (their own time, not the pauses between pieces); it ends at a
    stop id, which it keeps. A generator (`slices`): the prompt's chunks, then a step a piece."""
    session = Session(model)
    logits = yield from session.prefill_steps(list(prompt_ids))
    ids, seen, spent = [], [], 0.0
    for _ in range(steps):
        token = int(np.argmax(logits))
        ids.append(token)
        seen.append(np.array(logits, np.float32))
        if token in stop_ids or len(ids) == steps:
            break
        began = time.perf_counter()
        logits = session.decode(token)
        spent += time.perf_counter() - began
        yield None
    return ids, seen, spent


def along_steps(model, prompt_ids, ids):
    """The logits before each of `ids` when the model reads them (teacher-forced)."""
    session = Session(model)
    out = [np.array((yield from session.prefill_steps(list(prompt_ids))), np.float32)]
    for token in ids[:-1]:
        out.append(np.array(session.decode(token), np.float32))
        yield None
    return out


def top_of(logits: np.ndarray, p: np.ndarray, label, n: int = TOP) -> list:
    order = np.argsort(-logits, kind="stable")[:n]
    return [{"token_id": int(t), "token_text": label(int(t)), "logit": float(logits[t]),
             "p": float(p[t])} for t in order]


def compare(models: dict, prompt_ids, steps: int, stop_ids=()) -> dict:
    """models: {"reference": model, "quantized": model}, the same file read for each engine."""
    return drain(compare_steps(models, prompt_ids, steps, stop_ids))


def compare_steps(models: dict, prompt_ids, steps: int, stop_ids=()):
    """compare, sliced (`slices`): a prompt's chunk or a step per piece."""
    reference, quantized = models["reference"], models["quantized"]
    label = reference.tokenizer.label
    own = {}
    for name, m in models.items():
        own[name] = yield from greedy_steps(m, prompt_ids, steps, stop_ids)
    ref_ids, ref_logits, _ = own["reference"]
    q_logits = yield from along_steps(quantized, prompt_ids, ref_ids)
    rows = []
    for i, (a, b) in enumerate(zip(ref_logits, q_logits)):
        pa, pb = probabilities(a), probabilities(b)
        either = np.union1d(np.argsort(-a)[:TOP], np.argsort(-b)[:TOP])
        rows.append({
            "step": i, "token_id": ref_ids[i], "token_text": label(ref_ids[i]),
            "reference": top_of(a, pa, label), "quantized": top_of(b, pb, label),
            "same_first": int(np.argmax(a)) == int(np.argmax(b)),
            "largest_logit_difference": float(np.abs(a[either] - b[either]).max()),
            "distance": float(0.5 * np.abs(pa - pb).sum()),
        })
    answers = {name: ids for name, (ids, _, _) in own.items()}
    a, b = answers["reference"], answers["quantized"]
    parted = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y),
                  None if len(a) == len(b) else min(len(a), len(b)))
    distances = [r["distance"] for r in rows]
    return {
        "prompt_ids": list(prompt_ids),
        "greedy": {**answers, "texts": {n: reference.tokenizer.decode(ids)
                                        for n, ids in answers.items()},
                   "tokens": {n: [label(t) for t in ids] for n, ids in answers.items()},
                   "parted_at": parted},
        "steps": rows,
        "summary": {"steps": len(rows), "same_first": sum(r["same_first"] for r in rows),
                    "median_distance": float(np.median(distances)) if rows else 0.0,
                    "largest_distance": max(distances, default=0.0)},
        "engines": {n: {"weight_bytes": m.weight_bytes,
                        "seconds_per_step": own[n][2] / max(1, len(own[n][0]) - 1)}
                    for n, m in models.items()},
    }
