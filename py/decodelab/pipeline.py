"""One decoding step taken apart: every stage the rules pass the candidates through, in order.

`sampling.decode_distribution` gives the end result of a step; this module walks the same
functions of `sampling` one at a time and keeps what lies in between, so a learner can see it:

    model logits -> (EOS blocked, repetition penalty) -> softmax at T = 1
      temperature-first: -> temperature -> top-k -> top-p -> min-p        (renormalised each time)
      filter-first:      -> top-k -> top-p -> min-p (at T = 1) -> temperature on what is kept
    -> final distribution -> one uniform draw u -> the token whose cumulative stretch holds u

For each filter it also keeps the numbers that decide the cut: the k-th largest value (top-k),
the running total in likeliest-first order and the token where it reaches p (top-p), and
min_p * p_max (min-p). The walk's result is checked against `decode_distribution`, so the
picture cannot drift from what generation does.

`Replay` recomputes the logits a run saw at any step by feeding its model the same tokens again
through the same prefill/decode calls, so it serves any model that has a session.
`explain_request` is the "type your own numbers" playground: the same walk over typed values.

Dimension legend: V vocabulary size, N candidates shown (the likeliest, plus the chosen one).

Left out: drawing (the page does that), and rules decodelab does not have (beam search).
"""

import math

import numpy as np

from decodelab import sampling
from decodelab.errors import FieldError, FieldErrors
from decodelab.playground import scores_and_rules
from decodelab.settings import check_field
from decodelab.tokenizer import EOS

TOP_N = 12  # candidates shown per step unless asked otherwise
MAX_TOP_N = 100
MAX_SEGMENTS = 200  # the draw strip lists at most this many kept tokens
MAX_SWEEP = 8  # temperatures in the playground's comparison
ORDERS = ("temperature-first", "filter-first")


# --- the walk -------------------------------------------------------------------------------

def _filter(kind, p_in, kept_before, mask, **numbers) -> dict:
    """A filter stage: the distribution it saw, what it keeps, what it newly removes."""
    kept = kept_before & mask
    return {"kind": kind, "p_in": p_in, "removed": kept_before & ~mask, "kept": kept,
            "p": sampling.renormalise(p_in, kept), **numbers}


def _filters(p, kept, top_k, top_p, min_p):
    """top-k, top-p, min-p on p (V,) exactly as sampling.apply_filters, one stage each."""
    stages = []
    V = p.shape[0]
    if top_k > 0:
        k = V if top_k >= V else top_k
        kth = float(np.partition(p, V - k)[V - k])  # the k-th largest value: ties with it stay
        stages.append(_filter("top_k", p, kept, sampling.top_k_mask(p, top_k), k=int(top_k),
                              kth=kth))
        kept, p = stages[-1]["kept"], stages[-1]["p"]
    if top_p < 1.0:
        order = np.argsort(-p, kind="stable")  # the order top_p_mask uses: likeliest, ties by id
        cum = np.empty_like(p)  # (V,) running total up to and including each token
        cum[order] = np.cumsum(p[order])
        mask = sampling.top_p_mask(p, top_p)  # (V,)
        n = int(mask.sum())
        crossing = int(order[n - 1])  # the last one kept is the one whose total reached p
        stages.append(_filter("top_p", p, kept, mask, top_p=float(top_p), cum=cum,
                              crossing=crossing, crossing_rank=n, reached=float(cum[crossing])))
        kept, p = stages[-1]["kept"], stages[-1]["p"]
    if min_p > 0.0:
        stages.append(_filter("min_p", p, kept, sampling.min_p_mask(p, min_p),
                              min_p=float(min_p), p_max=float(p.max()),
                              cutoff=float(min_p * p.max())))
        kept, p = stages[-1]["kept"], stages[-1]["p"]
    return stages, kept, p


def walk(z, *, temperature=1.0, greedy=False, top_k=0, top_p=1.0, min_p=0.0,
         order="temperature-first"):
    """The stages of one step for logits z (V,), already penalised/masked.

    Returns (stages, kept, p_final): stage dicts holding full (V,) arrays, and the final kept
    mask and distribution (equal to sampling.decode_distribution's; checked).
    """
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}; got {order!r}")
    V = z.shape[0]
    p1 = sampling.softmax(z)  # (V,) the model's own distribution
    everyone = np.ones(V, dtype=bool)
    stages = [{"kind": "softmax", "p": p1, "kept": everyone}]
    if greedy or temperature == 0:
        kept = np.zeros(V, dtype=bool)
        kept[int(np.argmax(z))] = True  # the first maximum: the lowest id wins ties
        stages.append({"kind": "greedy", "p_in": p1, "removed": ~kept, "kept": kept,
                       "p": kept.astype(np.float64)})
        kept, p = stages[-1]["kept"], stages[-1]["p"]
    else:
        p_temp = sampling.softmax(z, temperature)  # (V,)
        if order == "temperature-first" or not sampling.filters_active(top_k, top_p, min_p):
            stages.append({"kind": "temperature", "T": float(temperature), "p_in": p1,
                           "p": p_temp, "kept": everyone})
            filters, kept, p = _filters(p_temp, everyone, top_k, top_p, min_p)
            stages += filters
        else:
            filters, kept, _ = _filters(p1, everyone, top_k, top_p, min_p)
            stages += filters
            p = sampling.renormalise(p_temp, kept)  # temperature last, on what was kept
            stages.append({"kind": "temperature", "T": float(temperature), "p_in": p_temp,
                           "p": p, "kept": kept, "last": True})
        kept = kept & (p > 0)  # as decode_distribution: what cannot be drawn is not kept
    _, want_kept, want_p = sampling.decode_distribution(
        z, temperature=temperature, greedy=greedy, top_k=top_k, top_p=top_p, min_p=min_p,
        order=order)
    if not (np.array_equal(kept, want_kept) and np.allclose(p, want_p, rtol=0, atol=1e-12)):
        raise RuntimeError("pipeline.walk disagrees with sampling.decode_distribution")
    return stages, kept, p


# --- JSON for the page -----------------------------------------------------------------------

def _finite(x):
    """A float for JSON; -inf (a blocked token) becomes None."""
    x = float(x)
    return x if math.isfinite(x) else None


def shown_rows(p, token, top_n: int) -> list:
    """The top_n likeliest ids of p (ties by id), plus the chosen token if it is not among them."""
    rows = [int(i) for i in np.argsort(-p, kind="stable")[:top_n]]
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


def _stage_json(stage: dict, idx: np.ndarray, rest: np.ndarray) -> dict:
    out = {"kind": stage["kind"], "p": [float(x) for x in stage["p"][idx]],
           "kept": [bool(x) for x in stage["kept"][idx]], "kept_count": int(stage["kept"].sum()),
           "rest_p": float(stage["p"][rest].sum()), "rest_kept": int(stage["kept"][rest].sum())}
    if "p_in" in stage:
        out["p_in"] = [float(x) for x in stage["p_in"][idx]]
        out["rest_p_in"] = float(stage["p_in"][rest].sum())
    if "removed" in stage:
        removed = [bool(x) for x in stage["removed"][idx]]
        out.update(removed=removed, removed_count=int(stage["removed"].sum()),
                   rest_removed=int(stage["removed"][rest].sum()),
                   cut_after=_cut_after(out["kept"], removed))
    for key in ("T", "last", "k", "kth", "top_p", "crossing", "crossing_rank", "reached", "min_p",
                "p_max", "cutoff"):
        if key in stage:
            out[key] = stage[key]
    if "cum" in stage:
        out["cum"] = [float(x) for x in stage["cum"][idx]]
    return out


def pipeline_json(stages, kept, p_final, rows) -> dict:
    idx = np.asarray(rows, dtype=np.intp)
    rest = np.ones(p_final.shape[0], dtype=bool)
    rest[idx] = False
    return {"stages": [_stage_json(s, idx, rest) for s in stages],
            "final": {"p": [float(x) for x in p_final[idx]], "kept": [bool(x) for x in kept[idx]],
                      "kept_count": int(kept.sum()), "rest_p": float(p_final[rest].sum()),
                      "rest_kept": int(kept[rest].sum())}}


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


def explain(z_model, z, label, *, temperature=1.0, greedy=False, top_k=0, top_p=1.0, min_p=0.0,
            order="temperature-first", u=None, token=None, top_n=TOP_N) -> dict:
    """Everything the page draws for one step.

    z_model: the model's logits (V,); z: the logits the rules saw (EOS blocked, penalised);
    label(id) -> text. u and token: the draw and the chosen token, if there was one (token is
    derived from u, or from argmax when greedy, if not given).
    """
    greedy = bool(greedy or temperature == 0)
    opts = dict(temperature=temperature, greedy=greedy, top_k=top_k, top_p=top_p, min_p=min_p)
    walks = {o: walk(z, order=o, **opts) for o in ORDERS}
    stages, kept, p_final = walks[order]
    if token is None:
        token = int(np.argmax(p_final)) if greedy or u is None else sampling.pick(p_final, u)
    token = int(token)
    # rows in the inspector's order: likeliest after temperature first (ties by id)
    rows = shown_rows(sampling.softmax(z) if greedy else sampling.softmax(z, temperature), token,
                      top_n)
    adjusted = not np.array_equal(np.asarray(z_model), np.asarray(z))
    # the two orders disagree only with a filter on and T != 1 (and never in greedy mode)
    differ = not greedy and not np.array_equal(walks[ORDERS[0]][1], walks[ORDERS[1]][1])
    return {
        "order": order, "greedy": greedy, "temperature": float(temperature), "top_k": int(top_k),
        "top_p": float(top_p), "min_p": float(min_p), "vocab_size": int(z.shape[0]),
        "rows": [{"token_id": i, "token_text": label(i)} for i in rows],
        "logits": [_finite(z_model[i]) for i in rows],
        "adjusted": [_finite(z[i]) for i in rows] if adjusted else None,
        "token_id": token, "token_text": label(token), "prob": float(p_final[token]),
        "orders_differ": bool(differ),
        "pipelines": {o: pipeline_json(*walks[o], rows) for o in ORDERS} if not greedy
        else {order: pipeline_json(stages, kept, p_final, rows)},
        "draw": None if greedy or u is None else draw_json(p_final, float(u), token, label),
    }


# --- the steps of a run ----------------------------------------------------------------------

def rule_logits(z, settings, prompt_ids, output_ids, step):
    """The logits the rules saw at `step`: generate.Generation's steps 2 and 3, replayed.

    EOS blocked before min_new_tokens (always with ignore_eos); the repetition penalty on every
    id of the prompt and of the output before this step.
    """
    if settings.ignore_eos or step < settings.min_new_tokens:
        z = z.copy()
        z[EOS] = -np.inf
    seen = np.zeros(z.shape[0], dtype=bool)  # (V,)
    seen[list(prompt_ids)] = True
    seen[list(output_ids[:step])] = True
    return sampling.apply_repetition_penalty(z, seen, settings.repetition_penalty)


class Replay:
    """The logits each step of a run saw, recomputed on demand and kept.

    The run's model gets a fresh session and the very calls the run made: prefill(prompt), then
    decode(token) for each output token. Logits are kept, so walking back and forth is free and
    walking forward costs one decode step per new step.
    """

    def __init__(self, run):
        self.run = run
        self.session = None
        self.logits = []  # step -> (V,) copy

    def logits_at(self, step: int) -> np.ndarray:
        run = self.run
        while len(self.logits) <= step:
            if self.session is None:
                self.session = run.model.session(len(run.prompt_ids) + run.settings.max_new_tokens)
                z = self.session.prefill(run.prompt_ids)
            else:
                z = self.session.decode(run.output_ids[len(self.logits) - 1])
            self.logits.append(np.array(z, dtype=np.float64))  # a copy: sessions reuse buffers
        return self.logits[step]

    def explain(self, step: int, top_n: int = TOP_N) -> dict:
        run, s = self.run, self.run.settings
        record = run.records[step]
        z_model = self.logits_at(step)
        z = rule_logits(z_model, s, run.prompt_ids, run.output_ids, step)
        out = explain(z_model, z, run.tokenizer.label, temperature=s.temperature, greedy=s.is_greedy,
                      top_k=s.top_k, top_p=s.top_p, min_p=s.min_p, order=s.order, u=record["u"],
                      token=record["token_id"], top_n=top_n)
        out.update(step=step, steps=len(run.records), phase=record["phase"],
                   entropy=record["entropy"], entropy_raw=record["entropy_raw"],
                   penalty=float(s.repetition_penalty),
                   eos_blocked=bool(s.ignore_eos or step < s.min_new_tokens),
                   prompt_length=len(run.prompt_ids),
                   fed=None if step == 0 else run.tokenizer.label(run.output_ids[step - 1]),
                   # the recomputation must give the probability the run recorded
                   matches_record=bool(abs(out["prob"] - record["prob"]) <= 1e-9))
        return out


def check_step(value, n_steps: int) -> int:
    """A step index of the last run: a whole number from 0 to n_steps - 1."""
    if n_steps == 0:
        raise FieldError("step", "Step: there is no run to explain yet; generate some text first.")
    bad = FieldError("step", f"Step must be a whole number from 0 to {n_steps - 1} (steps "
                             f"count from 0); got {_shown(value)}.")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise bad
    try:
        x = float(value)
    except ValueError:
        raise bad from None
    if not math.isfinite(x) or not x.is_integer() or not 0 <= x < n_steps:
        raise bad
    return int(x)


def _shown(value) -> str:
    """A value as an error message quotes it: strings in quotes, short."""
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 24 else text[:21] + "..."


def check_top_n(value) -> int:
    if value is None:
        return TOP_N
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOP_N:
        raise FieldError("top_n", f"Candidates shown (top_n) must be a whole number from 1 to "
                                  f"{MAX_TOP_N}; got {_shown(value)}.")
    return value


# --- the playground -----------------------------------------------------------------------------

def letter_label(n: int):
    """Names for typed values: A, B, C ... Z, then 27, 28 ... (1-based positions)."""
    def label(i: int) -> str:
        return chr(ord("A") + i) if n <= 26 else str(i + 1)
    return label


def parse_temperatures(value, field: str, label: str, max_count: int) -> list:
    """"0.3, 1, 2" or [0.3, 1, 2] -> [0.3, 1.0, 2.0]; each checked like the Temperature field."""
    items = value.split(",") if isinstance(value, str) else value
    if isinstance(items, list) and isinstance(value, str):
        items = [s for s in items if s.strip()]
    if not isinstance(items, (list, tuple)) or not 1 <= len(items) <= max_count:
        raise FieldError(field, f"{label} must be 1 to {max_count} temperatures separated by "
                                f"commas, like 0.3, 1, 2.")
    out = []
    for i, item in enumerate(items, 1):
        try:
            out.append(check_field("temperature", item.strip() if isinstance(item, str) else item))
        except FieldError as e:
            raise FieldError(field, f"{label}: entry {i}: {e.message}") from None
    return out


def check_u(value):
    """The playground's draw: empty/None for none, else a number with 0 <= u < 1."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        if isinstance(value, bool):
            raise ValueError
        u = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        u = math.nan
    if not (0.0 <= u < 1.0):
        raise FieldError("u", f"u must be a number from 0 up to (not including) 1, or empty for "
                              f"no draw; got {_shown(value)}.")
    return u


def explain_request(req: dict) -> dict:
    """The playground: {"logits" | "probs", temperature, top_k, top_p, min_p, order, greedy,
    u, sweep} -> the same JSON as a step, plus the final distribution at each sweep temperature.
    """
    if not isinstance(req, dict):
        raise FieldErrors([FieldError("request", "The request must be an object.")])
    errors = []
    z, opts = scores_and_rules(req, errors, which="logits or probabilities")
    u = sweep = None
    try:
        u = check_u(req.get("u"))
    except FieldError as e:
        errors.append(e)
    try:
        if req.get("sweep") not in (None, "", []):
            sweep = parse_temperatures(req["sweep"], "sweep", "Compare temperatures", MAX_SWEEP)
    except FieldError as e:
        errors.append(e)
    if errors:
        raise FieldErrors(errors)
    label = letter_label(z.shape[0])
    out = explain(z, z, label, u=u, top_n=min(z.shape[0], 40), **opts)
    if sweep:
        idx = [r["token_id"] for r in out["rows"]]
        out["sweep"] = []
        for T in sweep:
            _, kept, p = sampling.decode_distribution(
                z, temperature=T, greedy=opts["greedy"], top_k=opts["top_k"], top_p=opts["top_p"],
                min_p=opts["min_p"], order=opts["order"])
            out["sweep"].append({"temperature": T, "greedy": bool(opts["greedy"] or T == 0),
                                 "p": [float(p[i]) for i in idx],
                                 "kept": [bool(kept[i]) for i in idx]})
    return out
