"""Valid JSON against the token budget and the temperature, with and without JSON mode.

Held-out card questions (`records`) are asked at every budget and temperature, with repeated
samples, once without JSON mode and once with it; each answer is classified (`jsonshape`):
valid, incomplete (and why) or malformed, and a valid one is graded against the right object.
Per cell it reports each share with a 95% Wilson interval for the valid share.

What the numbers separate is the seed's point: an answer cut by the budget is `incomplete`, a
fault of the setting, not of the model; a `malformed` answer is the model's (or the sampler's).
JSON mode removes the second kind and cannot remove the first.

The same seeds are used with and without JSON mode, so the two halves differ only in the mask.
Repeated samples of one question share its prefill (`generate.Prefix`). The page runs it a few
runs at a time (advance, with progress and Stop); `validity_start` checks the request.

Also here: `compare`, the lesson's three answers to one card side by side.
"""

import dataclasses
import json

from decodelab.core.tasks import records, data as tasks
from decodelab.core.loops.generate import Generation, Prefix
from decodelab.core.rules.sampling import FILTER_NAMES
from decodelab.core.rules.settings import validate
from decodelab.errors import FieldError, FieldErrors
from decodelab.fields import MAX_SEED, read
from decodelab.lesson.accuracy import given_settings, percent, temperature_words, wilson
from decodelab.lesson.planned import Planned

FIELDS = ("temperatures", "budgets", "cards", "samples_per_question")
SETTINGS = ("model", "seed", *FILTER_NAMES, "json_max_depth")
DEFAULTS = {"temperatures": "0, 1, 2", "budgets": "8, 16, 40", "cards": 6,
            "samples_per_question": 4}
MAX_BUDGET = 200  # new tokens: a card needs about 30
MAX_RUNS = 20_000
STATUSES = ("valid", "incomplete", "malformed")
EXAMPLES = 3  # answers kept per cell to show


def held_out_cards(library, n: int) -> list:
    """The first n card questions of the tasks data's validation split."""
    return tasks.held_out(library.corpus("tasks").val, "card", n)


def _check(library, req: dict):
    """(values, settings) of a request, or FieldErrors naming every bad field."""
    if not isinstance(req, dict):
        raise FieldErrors([FieldError("request", "The experiment request must be an object.")])
    errors, values = [], None
    try:
        values = read({**DEFAULTS, **{k: v for k, v in req.items() if k in FIELDS}}, FIELDS)
    except FieldErrors as e:
        errors += e.errors
    unknown = [k for k in req if k not in FIELDS and k != "settings"]
    errors += [FieldError(k, f"Unknown field {k!r} for this experiment; it takes "
                             f"{', '.join(FIELDS)} and settings.") for k in unknown]
    raw = {"model": "transformer", **given_settings(req, SETTINGS, errors), "dataset": "tasks",
           "tokenizer": "bpe"}
    settings = None
    try:
        settings = validate(raw, datasets=library.catalog())
    except FieldErrors as e:
        errors += e.errors
    if values is not None:
        big = [b for b in values["budgets"] if b > MAX_BUDGET]
        if big:
            errors.append(FieldError("budgets", f"Token budgets: at most {MAX_BUDGET} new tokens "
                                                f"each in this experiment; got {big[0]}."))
        per = sum(1 if t == 0 else values["samples_per_question"] for t in values["temperatures"])
        runs = 2 * values["cards"] * len(values["budgets"]) * per
        if runs > MAX_RUNS:
            errors.append(FieldError("cards", f"At most {MAX_RUNS:,} runs (cards x budgets x "
                                              f"samples x temperatures x 2); got {runs:,}."))
    if errors:
        raise FieldErrors(errors)
    return values, settings


class ValidityExperiment(Planned):
    """The runs of one experiment, done a few at a time (advance) or all at once (run)."""

    def __init__(self, library, req: dict):
        values, settings = _check(library, req)
        self.model = library.for_settings(settings)
        self.settings = dataclasses.replace(settings, cache_check=False)
        self.temperatures, self.budgets = values["temperatures"], values["budgets"]
        self.samples = values["samples_per_question"]
        self.questions = held_out_cards(library, values["cards"])
        self.truths = [records.true_record(q) for q in self.questions]
        self.prefixes = {}
        # cells: (json mode, budget, temperature); by question first, so its prefix is reused
        self.cells = [(mode, b, t) for mode in (False, True) for b in range(len(self.budgets))
                      for t in range(len(self.temperatures))]
        self.plan = [(q, c, j) for q in range(len(self.questions))
                     for c, (_, _, t) in enumerate(self.cells)
                     for j in range(1 if self.temperatures[t] == 0 else self.samples)]
        self.total = len(self.plan)
        self.outcomes = [[] for _ in self.cells]
        self.steps = 0

    def _make(self, item) -> None:
        q, c, j = item
        mode, b, t = self.cells[c]
        T = self.temperatures[t]
        s = dataclasses.replace(self.settings, prompt=self.questions[q], temperature=T,
                                greedy=T == 0, json_mode=mode, max_new_tokens=self.budgets[b],
                                seed=(self.settings.seed + j) % (MAX_SEED + 1))
        if q not in self.prefixes:
            self.prefixes = {q: Prefix(self.model, tasks.question_ids(self.model.tokenizer,
                                                                      self.questions[q]))}
        run = Generation(self.model, s, prefix=self.prefixes[q]).run()
        self.steps += len(run.records)
        shape = run.json_report()
        self.outcomes[c].append({
            "question": q, "seed": s.seed, "answer": run.text, "status": shape["status"],
            "error": shape["error"], "finish_reason": run.finish_reason,
            "right": shape["status"] == "valid" and bool(records.grade(self.questions[q],
                                                                       shape["value"]))})

    def result(self) -> dict:
        cells = []
        for (mode, b, t), outs in zip(self.cells, self.outcomes):
            n = len(outs)
            counts = {k: sum(o["status"] == k for o in outs) for k in STATUSES}
            lo, hi = wilson(counts["valid"], n)
            cells.append({
                "json_mode": mode, "budget": self.budgets[b], "temperature": self.temperatures[t],
                "greedy": self.temperatures[t] == 0, "runs": n, **counts,
                "right": sum(o["right"] for o in outs),
                "valid_share": counts["valid"] / n if n else None, "low": lo, "high": hi,
                "examples": [{k: o[k] for k in ("answer", "status", "error")}
                             for o in outs if o["status"] != "valid"][:EXAMPLES]})
        s = self.settings
        out = {"cards": len(self.questions), "samples": self.samples,
               "temperatures": self.temperatures, "budgets": self.budgets, "model": s.model,
               "seed": s.seed, "cells": cells, "runs": self.total - len(self.plan),
               "steps": self.steps}
        out["findings"] = findings(out)
        return out


def _where(c) -> str:
    return f"{temperature_words(c['temperature'])} with {c['budget']} tokens"


def findings(result: dict) -> list:
    """What the numbers allow one to say, in sentences derived from them."""
    cells = [c for c in result["cells"] if c["runs"]]
    out = []
    if not cells:
        return out
    free = [c for c in cells if not c["json_mode"]]
    masked = [c for c in cells if c["json_mode"]]
    bad_free = sum(c["malformed"] for c in free)
    bad_masked = sum(c["malformed"] for c in masked)
    runs_free = sum(c["runs"] for c in free)
    if bad_free:
        worst = max(free, key=lambda c: c["malformed"] / c["runs"])
        out.append({"kind": "malformed", "text": f"Without JSON mode, {bad_free} of {runs_free} "
                    f"answers were malformed, most at {_where(worst)} "
                    f"({percent(worst['malformed'] / worst['runs'])}): text no JSON can continue "
                    f"from. That is the sampler's doing, not the budget's."})
    else:
        out.append({"kind": "malformed", "text": f"Without JSON mode no answer was malformed in "
                    f"{runs_free} runs: at these temperatures the model keeps to the shape by "
                    f"itself."})
    if masked:
        out.append({"kind": "mask", "text": "With JSON mode, " + (
            f"{bad_masked} answers were still malformed: the mask failed." if bad_masked else
            f"none of {sum(c['runs'] for c in masked)} answers was malformed: the mask allows "
            f"only tokens that keep the text a prefix of a JSON object.")})
    cut = [c for c in cells if c["incomplete"]]
    if cut:
        tight = min(c["budget"] for c in cut)
        share = sum(c["incomplete"] for c in cut if c["budget"] == tight) / \
            sum(c["runs"] for c in cells if c["budget"] == tight)
        out.append({"kind": "budget", "text": f"At {tight} tokens {percent(share)} of all answers "
                    f"were cut before the object closed, with JSON mode or without: a grammar "
                    f"cannot close an object the budget cuts. Check the finish reason before "
                    f"calling an incomplete answer a model error."})
    return out


# --- the lesson's comparison: one card, three ways ---------------------------------------------

# (what the column shows, the settings that make it)
# (at T = 2 with JSON mode, half of 200 card answers closed within 33 tokens and the longest
# took 101. The hot ones get 120, so JSON mode's answer is nearly always valid, and its values
# show that a grammar guarantees the shape, not the content.)
WAYS = (("A generous budget", {"greedy": True, "max_new_tokens": 40}),
        ("A tight budget", {"greedy": True, "max_new_tokens": 10}),
        ("Hot, no grammar", {"temperature": 2.0, "max_new_tokens": 120}),
        ("Hot, JSON mode", {"temperature": 2.0, "max_new_tokens": 120, "json_mode": True}))


def what_is_wrong(truth: dict, value) -> str:
    """Why a valid answer is not the card's object, in words: its keys first (made-up or missing
    keys are not a wrong value), then their order, then the first wrong value or type."""
    if not isinstance(value, dict):
        return f"it is {_kind(value)}, not an object"
    keys, want = list(value), list(records.FIELDS)
    if set(keys) != set(want):
        extra = [k for k in keys if k not in want]
        missing = [k for k in want if k not in keys]
        bits = []
        if extra:
            bits.append(f"made-up {'key' if len(extra) == 1 else 'keys'} "
                        + ", ".join(f'"{k}"' for k in extra))
        if missing:
            bits.append("no " + ", ".join(f'"{k}"' for k in missing))
        return "its keys are not the card's (" + "; ".join(bits) + ")"
    if keys != want:
        return "its keys are the card's but in another order (" + ", ".join(keys) + ")"
    for k in want:
        if type(value[k]) is not type(truth[k]):
            return (f'"{k}" is {json.dumps(value[k], ensure_ascii=False)}, {_kind(value[k])}; the card has '
                    f'{json.dumps(truth[k], ensure_ascii=False)}, {_kind(truth[k])}')
        if value[k] != truth[k]:
            return f'"{k}" is {json.dumps(value[k], ensure_ascii=False)}; the card says {json.dumps(truth[k], ensure_ascii=False)}'
    return ""


def _kind(x) -> str:
    return {str: "text", int: "a number", float: "a number", bool: "true or false",
            list: "a list", dict: "an object"}.get(type(x), "null")


def compare(library, question: str, seed: int = 0) -> list:
    """The card question run each way of WAYS (the two hot ones with the same seed): each
    answer with its classification and whether its values are right."""
    from decodelab.core.tasks.ask import ask

    out = []
    for title, settings in WAYS:
        answer = ask(library, {"question": question, "seed": seed, "cache_check": False,
                               **settings})
        out.append({"title": title, "settings": settings, "answer": answer["answer"],
                    "finish_reason": answer["finish_reason"],
                    "stop_reason": answer["stop_reason"], "json": answer["json"],
                    "right": answer["correct"], "steps": len(answer["trace"]["steps"]),
                    # a valid answer that is not the card's object: what is wrong, in words
                    "wrong": what_is_wrong(answer["expected"], answer["stated"])
                    if answer["json"]["status"] == "valid" and not answer["correct"] else ""})
    return out
