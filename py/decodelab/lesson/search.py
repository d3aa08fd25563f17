"""The search chapter: beam search beside greedy and sampling, speculative decoding round by
round, and the acceptance experiment.

Both panels take the workbench's settings (the model, the prompt, the stop rules, the budget) and
add their own (the search fields). What the lesson decides here:

- Beam search draws nothing, so the beam run takes the workbench's settings without its sampling
  rules (temperature, greedy, the filters, the repetition penalty back at their defaults). Beside
  it run greedy decoding and the workbench's own sampled run, and each text gets the model's own
  log-probability per token (ln p at T = 1, end-of-sequence included: what a beam's score sums)
  and its repeated 3-gram rate (tokens), the two numbers the lesson is about: beam search finds
  text the model finds likelier, and it tends to repeat itself.
- The beam tree: every beam kept at a step is a node whose parent is the beam it grew from; a
  node is on a returned path when the path (a finished hypothesis returned, by rank) passes
  through it; the others are pruned branches.
- Speculative decoding runs with the workbench's settings as they are; beside it the same
  settings without the draft. Greedy, the two texts are the same token for token; sampled, the
  draft changes which random numbers are used where, so the texts differ while each is drawn from
  the model's own distribution (tests/test_speculative.py holds that up).
- The acceptance experiment: for every draft length (gamma) and temperature, `samples` runs with
  seeds seed, seed + 1, ... (at T = 0, one run: greedy draws nothing), each measured by its
  acceptance rate (guesses accepted / proposed) and tokens per model pass; mean and a 95%
  interval (mean +- 1.96 standard errors) over the runs.
"""

import dataclasses
import math

from decodelab.core.loops import search
from decodelab.core.loops.beam import BLOCKED, banned_by_ngrams
from decodelab.core.loops.generate import prepare, start
from decodelab.core.rules.settings import SAMPLING_ONLY
from decodelab.core.loops.slices import drain
from decodelab.errors import FieldError, FieldErrors
from decodelab.fields import from_file, read
from decodelab.lesson.experiment import mean_logprob, repeated_ngram_rate
from decodelab.lesson.planned import Planned

BEAM_FIELDS = ("num_beams", "length_penalty", "early_stopping", "no_repeat_ngram_size",
               "num_return_sequences")
DRAFT_FIELDS = ("draft", "num_draft_tokens")
SEARCH_MAX_TOKENS = 120  # a search waits for its whole answer: keep it short
# the real model's search costs about 20 ms a token natively and tenths of a second in the page
# (beam rows and their check, draft passes: its limits, pretrained.model): a beam search runs there in slices (`core.loops.slices`),
# so the worker answers meanwhile; speculative decoding's rounds (a pass over a few positions
# each) in one call
MAX_RUNS = 400  # runs per acceptance experiment: gammas x temperatures x samples
# What the page's acceptance experiment starts with: greedy and two temperatures (the table's
# own default, 0.3, 1, 2, is the temperature experiment's).
ACCEPTANCE_DEFAULTS = {"temperatures": "0, 0.7, 1.2"}


def _settings(req: dict, pretrained: bool = False) -> dict:
    """The workbench's settings, run with the transformer: both searches use its KV cache (the
    bigram is the draft). pretrained: the real model runs too when it is the workbench's model
    (beam search; a draft must share its vocabulary, and no draft here does)."""
    raw = req.get("settings", {})
    if not isinstance(raw, dict):
        raise FieldError("settings", "Settings must be an object of name: value.")
    keep = pretrained and from_file(raw.get("model"))
    return dict(raw, model=raw["model"] if keep else "transformer")


def _short(settings, model) -> None:
    if settings.max_new_tokens > SEARCH_MAX_TOKENS:
        raise FieldError("max_new_tokens", f"Max new tokens: a search here takes at most "
                                           f"{SEARCH_MAX_TOKENS}; got {settings.max_new_tokens}.")
    most = model.limits.get("search_max_tokens")
    if most is not None and settings.max_new_tokens > most:
        raise FieldError("max_new_tokens", f"Max new tokens: a search on {model.label} here "
                                           f"takes at most {most} (each of its tokens costs the "
                                           f"real model tenths of a second in the page); got "
                                           f"{settings.max_new_tokens}.")


def _measured(name: str, text: str, ids: list, logprob_per_token, eos: int) -> dict:
    tokens = [t for t in ids if t != eos]
    return {"name": name, "text": text, "tokens": len(ids),
            "logprob_per_token": logprob_per_token, "repeated_3gram": repeated_ngram_rate(tokens)}


SAME = 1e-9  # log-probabilities per token this close are the same text's


def breaks_ngram_ban(prompt_ids, ids, n: int) -> bool:
    """Would a search with no_repeat_ngram_size = n have been barred from writing `ids` after
    `prompt_ids`? (Some token of it completes an n-gram the text already has.)"""
    seq = list(prompt_ids)
    for token in ids:
        if token in banned_by_ngrams(seq, n):
            return True
        seq.append(token)
    return False


def why(settings, prompt_ids, side: list, ids: list) -> dict:
    """Why the best beam (side[0]) is, or is not, the likeliest per token of the texts beside
    it (`ids`: each text's tokens). causes, when some text is likelier: "no_repeat_ngram" (a
    likelier text repeats an n-gram the search bans: those are `barred`), "length_penalty" (a
    penalty other than 1 ranks the beams by something other than log-probability per token,
    and the likelier text has another length), else "narrow" (the search keeps num_beams paths
    a step, and the likelier path was dropped on the way). `found`: the texts that are the best
    beam's own tokens (often greedy's: the search found it too), as likely as it whatever the
    last digits say (the search's sum and a run's records add up in another order, and in
    float32 they part by more than SAME); `same`: those and the texts as likely per token as
    the best beam, to SAME."""
    best = side[0]["logprob_per_token"]
    found = [k for k in range(1, len(side)) if list(ids[k]) == list(ids[0])]
    better = [k for k in range(1, len(side))
              if k not in found and side[k]["logprob_per_token"] > best + SAME]
    same = [side[k]["name"] for k in range(1, len(side))
            if k in found or abs(side[k]["logprob_per_token"] - best) <= SAME]
    causes = []
    n = settings.no_repeat_ngram_size
    barred = [k for k in better if n and breaks_ngram_ban(prompt_ids, ids[k], n)]
    if barred:
        causes.append("no_repeat_ngram")
    if settings.length_penalty != 1 and any(side[k]["tokens"] != side[0]["tokens"]
                                             for k in better):
        causes.append("length_penalty")
    if better and not causes:
        causes.append("narrow")
    return {"likelier": not better, "better": [side[k]["name"] for k in better], "same": same,
            "found": [side[k]["name"] for k in found],
            "barred": [side[k]["name"] for k in barred], "causes": causes,
            "no_repeat_ngram_size": n, "length_penalty": settings.length_penalty,
            "num_beams": settings.num_beams}


def beam_lesson(library, req: dict) -> dict:
    """{"settings": the workbench's, "beam": {the beam fields}} -> the search's trace, its tree,
    and beam, greedy and sampled side by side (on the real model too, when it is the
    workbench's)."""
    return drain(beam_lesson_steps(library, req))


def beam_lesson_steps(library, req: dict):
    """beam_lesson, sliced (`core.loops.slices`): a piece per step of the search and of each run
    beside it, and per chunk of a full pass (the page's worker runs it a slice at a time)."""
    raw = _settings(req, pretrained=True)
    own = req.get("beam", {})
    if not isinstance(own, dict) or set(own) - set(BEAM_FIELDS):
        raise FieldError("beam", f"beam must be an object of {', '.join(BEAM_FIELDS)}.")
    sampled_raw = dict(raw, strategy="sample", draft="off")
    beam_raw = {k: v for k, v in sampled_raw.items() if k not in SAMPLING_ONLY}
    beam_raw.update(own, strategy="beam")
    settings, model, prompt = prepare(library, beam_raw)
    _short(settings, model)
    run = search.start(library, settings, model, prompt[0])
    yield from run.run_steps()
    trace = run.trace()
    eos = model.tokenizer.eos_id
    side = [_measured("beam", b["text"], b["ids"], b["logprob_per_token"], eos)
            for b in trace["beams"][:1]]
    ids = [trace["beams"][0]["ids"]]
    for name, extra in (("greedy", {"greedy": True}), ("sampled", {})):
        other = start(library, dict(sampled_raw, **extra))
        yield from other.run_steps()
        side.append(_measured(name, other.text, other.output_ids, mean_logprob(other.records),
                              eos))
        side[-1].update(finish_reason=other.finish_reason, stop_reason=other.stop_reason)
        ids.append(other.output_ids)
    side[0].update(finish_reason=trace["finish_reason"], stop_reason=trace["stop_reason"])
    return {"trace": trace, "tree": tree(trace), "side": side,
            "why": why(settings, prompt[0], side, ids),
            "sampled": {"seed": other.settings.seed, "temperature": other.settings.temperature,
                        "greedy": other.settings.is_greedy}}


def tree(trace: dict) -> dict:
    """The beam tree: nodes[step][slot] = {"parent": slot at the step before (None at step 0),
    "token_text", "score", "rank": the returned path it lies on (1 = best) or None}; finished:
    the hypotheses offered to the bank, at the step they finished, with their parent slot,
    "banked" (the bank took it) and "left": the step at which the bank let it go for better
    ones (its own step when it was never taken), or None if it holds it to the end."""
    steps = trace["steps"]
    paths, nodes = [], []
    for s, st in enumerate(steps):
        row, at = [], []
        for k in st["kept"]:
            before = paths[s - 1][k["from"]] if s else []
            at.append(before + [k["token_id"]])
            row.append({"parent": k["from"] if s else None, "token_text": k["token_text"],
                        "score": k["score"], "rank": None,
                        "blocked": k["score"] <= BLOCKED / 2})  # a finished slot filled in
        paths.append(at)
        nodes.append(row)
    finished = []
    for s, st in enumerate(steps):
        for c in st["candidates"]:
            if c["entered"]:
                ids = (paths[s - 1][c["beam"]] if s else []) + [c["token_id"]]
                left = next((k for k in range(s, len(steps))
                             if ids not in [b["ids"] for b in steps[k]["bank"]]), None)
                finished.append({"step": s, "parent": c["beam"] if s else None,
                                 "token_text": c["token_text"], "score": c["score"],
                                 "rank": None, "banked": c["banked"], "left": left})
    for rank, b in enumerate(trace["beams"], 1):
        ids, s = b["ids"], len(b["ids"]) - 1  # it finished at the step of its last token
        slot = next((i for i, p in enumerate(paths[s - 1]) if p == ids[:-1]), None) \
            if s else None
        for f in finished:
            if f["step"] == s and f["parent"] == slot and f["rank"] is None \
                    and f["token_text"] == b["tokens"][-1]:
                f["rank"] = rank
                break
        while slot is not None and s > 0:  # up the tree from its parent
            s -= 1
            node = nodes[s][slot]
            node["rank"] = node["rank"] or rank
            slot = node["parent"]
    return {"nodes": nodes, "finished": finished,
            "rows_from": [[k["from"] for k in st["kept"]] for st in steps]}


def speculative_lesson(library, req: dict) -> dict:
    """{"settings": the workbench's, "draft": {the draft fields}} -> the speculative run's trace,
    and the same settings without the draft beside it. The real model runs too when it is the
    workbench's, with the n-gram draft (no model here reads its tokens)."""
    raw = _settings(req, pretrained=True)
    own = req.get("draft", {})
    if not isinstance(own, dict) or set(own) - set(DRAFT_FIELDS):
        raise FieldError("draft", f"draft must be an object of {', '.join(DRAFT_FIELDS)}.")
    raw.update(strategy="sample", **own)
    if raw.get("draft", "bigram") == "off":
        raise FieldError("draft", "Draft model must be bigram or ngram here: this panel shows a "
                                  "draft at work; got off.")
    raw.setdefault("draft", "bigram")
    settings, model, prompt = prepare(library, raw)
    _short(settings, model)
    skipped = None
    if not model.limits.get("checks_each_round", True) and settings.cache_check:
        settings = dataclasses.replace(settings, cache_check=False)
        skipped = (f"The cache check is off for {model.label} here: checking a round is a full "
                   "pass over "
                   "the whole text, several seconds each in the page. The workbench's own runs "
                   "check its cache, once at the end of the text.")
    run = search.start(library, settings, model, prompt[0]).run()
    trace = run.trace()
    plain = start(library, dict(raw, draft="off", cache_check=False)).run()
    return {"trace": trace, "plain": {"text": plain.text, "ids": plain.output_ids,
                                      "finish_reason": plain.finish_reason,
                                      "stop_reason": plain.stop_reason,
                                      "steps": len(plain.records)},
            "greedy": settings.is_greedy, "check_skipped": skipped}


class AcceptanceExperiment(Planned):
    """Acceptance rate and tokens per model pass against the draft length and temperature."""

    FIELDS = ("gammas", "temperatures", "spec_samples")

    def __init__(self, library, req: dict):
        if not isinstance(req, dict):
            raise FieldErrors([FieldError("request", "The request must be a JSON object.")])
        values = read(req, self.FIELDS)
        raw = _settings(req)
        # the workbench's Greedy switch would make every temperature of the table the same: here
        # (as in the temperature experiment) only T = 0 means greedy
        raw.update(strategy="sample", draft="bigram", greedy=False)
        errors = []
        try:
            self.settings, model, _ = prepare(library, dict(raw, temperature=1,
                                                            num_draft_tokens=max(values["gammas"])))
            _short(self.settings, model)
        except FieldErrors as e:
            errors += e.errors
        except FieldError as e:
            errors.append(e)
        gammas = sorted(set(int(g) for g in values["gammas"]))
        temps = sorted(set(float(t) for t in values["temperatures"]))
        plan = [(g, t, seed) for g in gammas for t in temps
                for seed in range(1 if t == 0 else values["spec_samples"])]
        if len(plan) > MAX_RUNS:
            errors.append(FieldError("spec_samples", f"Samples per cell: {len(gammas)} draft "
                                                     f"lengths x {len(temps)} temperatures x "
                                                     f"{values['spec_samples']} samples make "
                                                     f"{len(plan)} runs; at most {MAX_RUNS} are "
                                                     f"allowed."))
        if errors:
            raise FieldErrors(errors)
        self.library, self.raw = library, raw
        self.gammas, self.temperatures = gammas, temps
        self.plan, self.total, self.steps = plan, len(plan), 0
        self.runs = {}  # (gamma, T) -> [(acceptance rate, tokens per pass, proposed)]

    def _make(self, item) -> None:
        gamma, t, offset = item
        raw = dict(self.raw, num_draft_tokens=gamma, temperature=t,
                   seed=(self.settings.seed + offset) % (2**32))
        trace = start(self.library, raw).run().trace()
        self.steps += len(trace["ids"])
        proposed = sum(r["proposed"] for r in trace["rounds"])
        self.runs.setdefault((gamma, t), []).append(
            (trace["acceptance_rate"], trace["tokens_per_pass"], proposed))

    def result(self) -> dict:
        cells = []
        for g in self.gammas:
            for t in self.temperatures:
                runs = self.runs.get((g, t), [])
                rates = [r for r, _, n in runs if r is not None]
                cells.append({"gamma": g, "temperature": t, "runs": len(runs),
                              # what the page writes for it: T = 0 is greedy, no division
                              "temperature_words": "0 (greedy)" if t == 0 else f"{t:g}",
                              "acceptance": summary(rates),
                              "tokens_per_pass": summary([x for _, x, _ in runs]),
                              "proposed": sum(n for _, _, n in runs)})
        return {"cells": cells, "gammas": self.gammas, "temperatures": self.temperatures,
                "settings": self.settings.to_json(), "runs": self.total, "steps": self.steps}


def summary(values: list) -> dict:
    """Mean and a 95% interval (mean +- 1.96 standard errors; none from fewer than 2 values)."""
    n = len(values)
    if not n:
        return {"mean": None, "low": None, "high": None, "n": 0}
    mean = sum(values) / n
    if n < 2:
        return {"mean": mean, "low": None, "high": None, "n": n}
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = 1.96 * sd / math.sqrt(n)
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": n}
