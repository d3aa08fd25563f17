"""The decoding rules applied to numbers you type: logits or probabilities, no model involved.

`probs` is what `python -m decodelab probs` prints, and `explain_values` is the page's
playground: the same `sampling.decide` as generation, so the worked examples ([2, 1] at T = 0.5,
1, 2; [0.6, 0.25, 0.15] with top-p 0.8) come from the same code as the text a model writes.
"""

from dataclasses import replace

import numpy as np

from decodelab.core.rules import sampling
from decodelab.core.rules.settings import RULE_NAMES
from decodelab.errors import FieldError, FieldErrors
from decodelab.fields import read
from decodelab.lesson.pipeline import explain

# the rules a step applies, but the repetition penalty (typed numbers have no history)
RULES = tuple(name for name in RULE_NAMES if name != "repetition_penalty")
MAX_ROWS = 40  # typed values shown, at most


def scores_and_rules(req: dict, extra=()):
    """Typed scores and decoding rules from a request: (logits (V,), Rules, other values).

    {"logits"} or {"probs"} (probabilities are logits up to a constant, and are normalised),
    the rules, and the `extra` fields, each checked against its field; every problem is
    reported at once (FieldErrors).
    """
    if not isinstance(req, dict):
        raise FieldErrors([FieldError("logits", "The request must be a JSON object of name: "
                                                "value.")])
    errors, z = [], None
    has_logits, has_probs = req.get("logits") is not None, req.get("probs") is not None
    try:
        if has_logits == has_probs:
            raise FieldError("logits", "Give exactly one of Logits or Probabilities.")
        values = read(req, ["logits" if has_logits else "probs"])
        if has_logits:
            z = np.asarray(values["logits"], dtype=np.float64)
        else:
            p = np.asarray(values["probs"], dtype=np.float64)
            if p.sum() <= 0:
                raise FieldError("probs", "Probabilities must have a positive sum (they are "
                                          "scaled to add up to 1).")
            with np.errstate(divide="ignore"):
                z = np.log(p / p.sum())
    except FieldError as e:
        errors.append(e)
    except FieldErrors as e:
        errors += e.errors
    try:
        values = read(req, RULES + tuple(extra))
    except FieldErrors as e:
        errors += e.errors
    if errors:
        raise FieldErrors(errors)
    return z, sampling.Rules(**{k: values[k] for k in RULES}), values


def probs(req: dict) -> dict:
    """{"logits" | "probs", temperature, greedy, top_k, top_p, min_p, order} -> the final
    probabilities and the kept mask, aligned with the input (plus the model's and after-T)."""
    z, rules, _ = scores_and_rules(req)
    d = sampling.decide(z, rules)
    return {"probs": d.p_final.tolist(), "kept": d.kept.tolist(), "p_raw": d.p_raw.tolist(),
            "p_temp": d.p_temp.tolist()}


def letter_label(n: int):
    """Names for typed values: A, B, C ... Z, then 27, 28 ... (1-based positions)."""
    def label(i: int) -> str:
        return chr(ord("A") + i) if n <= 26 else str(i + 1)
    return label


def explain_values(req: dict) -> dict:
    """The playground: {"logits" | "probs", the rules, u, sweep} -> the same JSON as a step of a
    run, plus the final distribution at each temperature of the sweep."""
    z, rules, values = scores_and_rules(req, extra=("u", "sweep"))
    d = sampling.decide(z, rules)
    out = explain(d, letter_label(z.shape[0]), u=values["u"], top_n=min(z.shape[0], MAX_ROWS))
    if values["sweep"]:
        idx = [r["token_id"] for r in out["rows"]]
        out["sweep"] = []
        for T in values["sweep"]:
            at = sampling.decide(z, replace(rules, temperature=T))
            out["sweep"].append({"temperature": T, "greedy": at.rules.is_greedy,
                                 "p": at.p_final[idx].tolist(), "kept": at.kept[idx].tolist()})
    return out
