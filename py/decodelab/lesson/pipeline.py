"""One decoding step taken apart, for the page: every stage the rules passed the candidates
through, in order, as `sampling.decide` kept them:

    model logits -> (EOS blocked, repetition penalty) -> softmax at T = 1
      temperature-first: -> temperature -> top-k -> top-p -> min-p -> typical-p  (renormalised each time)
      filter-first:      -> top-k -> top-p -> min-p -> typical-p (at T = 1) -> temperature on what is kept
    -> final distribution -> one uniform draw u -> the token whose cumulative stretch holds u

Nothing here decides anything: it lays out the stages of the decision the run itself made (and
of the same decision in the other order), with the numbers that decide each cut: the k-th
largest value (top-k), the running total and the token where it reaches p (top-p; typical-p
along its own order, nearest the entropy first), min_p * p_max (min-p).

`explain_step` takes a step of a run apart, from the logits `core.loops.replay` gives back.

Dimension legend: V vocabulary size, N candidates shown (the likeliest, plus the chosen one).
"""

import math

import numpy as np

from decodelab.core.rules import sampling
from decodelab.core.loops.generate import TOP_N
from decodelab.fields import label_of

MAX_SEGMENTS = 200  # the draw strip lists at most this many kept tokens
MASK_LIKELY = 5  # the likeliest tokens a mask removed, listed
FILTERS = tuple(name for name, _ in sampling.FILTERS)


def _finite(x):
    """A float for JSON; -inf (a blocked token) becomes None."""
    x = float(x)
    return x if math.isfinite(x) else None


def shown_rows(p, token, top_n: int) -> list:
    """The top_n likeliest ids of p (ties by id), plus the chosen token if it is not among them."""
    rows = sampling.likeliest(p, top_n).tolist()
    if token is not None and int(token) not in rows:
        rows.append(int(token))
    return rows


def _cut_after(kept, removed):
    """The last kept row, when the rows this stage removed all come after it (so the cut can be
    drawn as one line between two rows); None when nothing shown was removed here."""
    if not any(removed):
        return None
    last_kept = max((i for i, k in enumerate(kept) if k), default=-1)
    first_removed = removed.index(True)
    return last_kept if last_kept < first_removed else None


def _dist_json(p, kept, idx, rest) -> dict:
    return {"p": p[idx].tolist(), "kept": kept[idx].tolist(), "kept_count": int(kept.sum()),
            "rest_p": float(p[rest].sum()), "rest_kept": int(kept[rest].sum())}


def _stage_json(d: sampling.Decision, stage: sampling.Stage, idx, rest) -> dict:
    p_in = stage.p_in if stage.p_in is not None else d.p_rules
    out = {"kind": stage.kind, "title": label_of(stage.kind), "filter": stage.kind in FILTERS,
           **_dist_json(stage.p, stage.kept, idx, rest),
           "p_in": p_in[idx].tolist(), "rest_p_in": float(p_in[rest].sum())}
    removed = stage.removed
    if removed is not None:
        shown = removed[idx].tolist()
        out.update(removed=shown, removed_count=int(removed.sum()),
                   rest_removed=int(removed[rest].sum()), cut_after=_cut_after(out["kept"], shown))
    facts = dict(stage.facts)
    if "running" in facts:  # top-p, typical-p: each row's running total, in the filter's order
        cum = np.empty_like(facts["running"])  # (V,)
        cum[facts.pop("order")] = facts.pop("running")
        facts["cum"] = cum[idx].tolist()
        # the row of the token whose total reached p (None when it is not among the rows)
        hit = np.flatnonzero(idx == facts["crossing"])
        facts["crossing_row"] = int(hit[0]) if hit.size else None
    out.update(facts)
    return out


def pipeline_json(d: sampling.Decision, rows) -> dict:
    idx = np.asarray(rows, dtype=np.intp)
    rest = np.ones(d.p_final.shape[0], dtype=bool)
    rest[idx] = False
    everyone = np.ones(d.p_final.shape[0], dtype=bool)
    first = {"kind": "softmax", "title": "Softmax", "filter": False, **_dist_json(d.p_rules, everyone, idx, rest)}
    return {"stages": [first] + [_stage_json(d, s, idx, rest) for s in d.stages],
            "final": _dist_json(d.p_final, d.kept, idx, rest)}


def draw_json(p_final, u, token, label) -> dict:
    """Where u landed: the kept tokens laid end to end in id order, each [lo, hi)."""
    hi = np.cumsum(p_final)  # (V,)
    lo = hi - p_final  # (V,)
    ids = np.flatnonzero(p_final > 0)
    segments = [{"token_id": int(i), "token_text": label(int(i)), "lo": float(lo[i]),
                 "hi": float(hi[i])} for i in ids[:MAX_SEGMENTS]]
    return {"u": u, "token_id": int(token), "token_text": label(int(token)),
            "lo": float(p_final[:token].sum()), "hi": float(p_final[:token].sum() + p_final[token]),
            "segments": segments, "segments_cut": int(max(0, ids.size - MAX_SEGMENTS))}


def explain(d: sampling.Decision, label, *, u=None, token=None, top_n=TOP_N) -> dict:
    """Everything the page draws for one step decided as `d`.

    label(id) -> text. u and token: the draw and the chosen token, if there was one (token is
    derived from u, or from argmax when greedy, if not given).
    """
    rules = d.rules
    greedy = rules.is_greedy
    if token is None:
        token = d.greedy_token() if greedy or u is None else sampling.pick(d.p_final, u)
    token = int(token)
    rows = shown_rows(d.p_temp, token, top_n)  # likeliest after temperature first (ties by id)
    # the same logits in the other order too, to show where the two differ (greedy has one)
    decisions = {order: d.in_order(order) for order in (sampling.ORDERS if not greedy
                                                         else (rules.order,))}
    adjusted = d.adjusted and not np.array_equal(d.logits, d.z)
    mask = None
    if d.allowed is not None:  # a mask (healing, JSON mode): its own stage, before softmax
        removed = ~d.allowed
        ranked = np.argsort(-np.where(removed, d.p_raw, -1.0), kind="stable")[:MASK_LIKELY]
        likely = [int(i) for i in ranked if removed[i]]
        mask = {"kind": d.mask_kind, "why": d.mask_why,
                "removed": removed[np.asarray(rows, dtype=np.intp)].tolist(),
                "removed_count": int(removed.sum()), "kept_count": int(d.allowed.sum()),
                "p_removed": float(d.p_raw[removed].sum()),
                # the likeliest tokens the mask took away, with the model's own probability
                "likely": [{"token_id": i, "token_text": label(i), "p": float(d.p_raw[i])}
                           for i in likely]}
    return {
        "order": rules.order, "greedy": greedy, "temperature": float(rules.temperature),
        **{name: getattr(rules, name) for name in FILTERS},  # each filter's value
        "filters": [label_of(name).lower() for name in FILTERS],  # in the order they run
        "vocab_size": int(d.z.shape[0]),
        "rows": [{"token_id": i, "token_text": label(i)} for i in rows],
        "logits": [_finite(d.logits[i]) for i in rows],
        "adjusted": [_finite(d.z[i]) for i in rows] if adjusted else None,
        "mask": mask,
        "token_id": token, "token_text": label(token), "prob": float(d.p_final[token]),
        "orders_differ": sampling.orders_differ(d),
        "pipelines": {o: pipeline_json(decisions[o], rows) for o in sampling.ORDERS
                      if o in decisions},
        "draw": None if greedy or u is None else draw_json(d.p_final, float(u), token, label),
    }


def explain_step(run, replay, step: int, top_n: int = TOP_N) -> dict:
    """Everything the page's step view draws for step `step` of a run, with its replay."""
    s = run.settings
    record = run.records[step]
    if record["source"] == "tool":  # no rule chose it: say what put it there
        return {"step": step, "steps": len(run.records), "source": "tool",
                "phase": record["phase"], "token_id": record["token_id"],
                "token_text": record["token_text"], "token_bytes": record["token_bytes"],
                "tokenizer": s.tokenizer, "prompt_length": len(run.prompt_ids),
                "part": record["part"], "tool_call": run.tools.call_of(run.records, step)}
    out = explain(replay.decision(step), run.tokenizer.label, u=record["u"],
                  token=record["token_id"], top_n=top_n)
    out.update(step=step, steps=len(run.records), phase=record["phase"],
               entropy=record["entropy"], entropy_raw=record["entropy_raw"],
               penalty=float(s.repetition_penalty),
               eos_blocked=s.eos_blocked(run.made_before[step]),
               prompt_length=len(run.prompt_ids),
               fed=None if step == 0 else run.tokenizer.label(run.output_ids[step - 1]),
               after_tool=_appended_before(run, step),
               token_bytes=record["token_bytes"], stop_at=record.get("stop_at"),
               tokenizer=s.tokenizer,
               # the recomputation must give the probability the run recorded
               matches_record=bool(abs(out["prob"] - record["prob"]) <= 1e-9))
    return out


def _appended_before(run, step: int) -> int:
    """How many tokens were appended in one pass just before `step` (a tool's result together
    with the call's closing token), or 0 after an ordinary decode."""
    n = 0
    while step - 1 - n >= 0 and run.records[step - 1 - n]["source"] == "tool":
        n += 1
    return n + 1 if n else 0
