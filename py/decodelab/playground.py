"""The decoding rules applied to numbers you type: logits or probabilities, no model involved.

This is what `python -m decodelab probs` and the page's playground run, so the worked examples
([2, 1] at T = 0.5, 1, 2; [0.6, 0.25, 0.15] with top-p 0.8) come from the same code as generation.
"""

import math

import numpy as np

from decodelab import sampling
from decodelab.errors import FieldError, FieldErrors
from decodelab.settings import check_field

MAX_VALUES = 10000


def parse_values(text_or_list, field: str) -> list:
    """"2,1" or [2, 1] -> [2.0, 1.0], with a message naming the field for anything else."""
    name = "--" + field
    items = text_or_list.split(",") if isinstance(text_or_list, str) else text_or_list
    if not isinstance(items, (list, tuple)) or not 1 <= len(items) <= MAX_VALUES:
        raise FieldError(field, f"{name} must be 1 to {MAX_VALUES} comma-separated numbers.")
    values = []
    for i, item in enumerate(items, 1):
        try:
            if isinstance(item, bool):
                raise ValueError
            x = float(item.strip() if isinstance(item, str) else item)
        except (TypeError, ValueError):
            raise FieldError(field, f"{name}: entry {i} is not a number: {str(item)[:20]!r}; "
                                    f"give comma-separated numbers like 2,1.") from None
        if not math.isfinite(x):
            raise FieldError(field, f"{name}: entry {i} must be a finite number; got {x}.")
        values.append(x)
    return values


RULES = (("temperature", 1.0), ("greedy", False), ("top_k", 0), ("top_p", 1.0), ("min_p", 0.0),
         ("order", "temperature-first"))


def scores_and_rules(req: dict, errors: list, which: str = "--logits or --probs"):
    """Typed scores and decoding rules from a request: (logits or None, {rule: value}).

    {"logits"} or {"probs"} (probabilities are logits up to a constant), and the rules of
    RULES, each checked like a setting. Every problem is appended to `errors`, so one reply
    can name all the fields at fault; `which` says how the two inputs are named to the reader.
    """
    has_logits, has_probs = req.get("logits") is not None, req.get("probs") is not None
    z = None
    try:
        if has_logits == has_probs:
            raise FieldError("logits", f"Give exactly one of {which}.")
        if has_logits:
            z = np.asarray(parse_values(req["logits"], "logits"), dtype=np.float64)
        else:
            p = np.asarray(parse_values(req["probs"], "probs"), dtype=np.float64)
            if (p < 0).any() or p.sum() <= 0:
                raise FieldError("probs", "--probs must be non-negative numbers with a positive "
                                          "sum (they are normalised).")
            with np.errstate(divide="ignore"):
                z = np.log(p / p.sum())
    except FieldError as e:
        errors.append(e)
    rules = {}
    for name, default in RULES:
        try:
            rules[name] = check_field(name, req.get(name, default))
        except FieldError as e:
            errors.append(e)
    return z, rules


def probs_from_request(req: dict) -> dict:
    """{"logits" | "probs", temperature, greedy, top_k, top_p, min_p, order} -> probs and kept."""
    errors = []
    z, opts = scores_and_rules(req, errors)
    if errors:
        raise FieldErrors(errors)
    p_temp, kept, p_final = sampling.decode_distribution(z, **opts)
    return {"probs": [float(x) for x in p_final], "kept": [bool(k) for k in kept],
            "p_raw": [float(x) for x in sampling.softmax(z)],
            "p_temp": [float(x) for x in p_temp]}
