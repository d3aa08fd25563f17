"""Correctness against temperature: a model asked questions with one right answer at several
temperatures, with repeated samples and one fixed token budget, and graded.

Two sets of questions, one per kind of model (`Questions`): the tasks model gets held-out
arithmetic questions (right when the number its answer ends on is the result); a real chat
model (SmolLM2) gets capitals and small sums as a chat's user message (right when the answer
names the expected city or number: `pretrained.questions`).

Per temperature it reports the share of right answers with a 95% Wilson interval, the share of
runs that ran out of budget (finish_reason "length"), and, for the tasks model, the share whose
tool call did not parse. At T = 0 decoding is greedy and draws nothing, so every seed gives the
same run: each question is asked once there, and its interval is over questions alone.

Repeated samples of one question share its prefill (`paged.PagedPrefix`): the question is run
through the model once into blocks of a paged cache, and each sample holds those blocks too;
the first write into the shared last block, while it has room, copies that block alone
(copy-on-write), where a contiguous cache would copy the whole prompt for every sample. The
result counts both.

The page runs it a few runs at a time (advance, with progress and Stop); the CLI's
`experiment` runs it whole. Both give the same numbers for the same request.
"""

import dataclasses
import math

from decodelab.core.tasks import data as tasks
from decodelab.core.loops.generate import Generation, chat_ids
from decodelab.core.models.kvcache import blocks_for
from decodelab.core.serving.paged import BlockPool, PagedPrefix, PagedSession
from decodelab.core.rules.sampling import FILTER_NAMES
from decodelab.core.rules.settings import validate
from decodelab.errors import FieldError, FieldErrors
from decodelab.fields import MAX_SEED, from_file, read
from decodelab.lesson.planned import Planned
from decodelab.pretrained.engines import ENGINES
from decodelab.pretrained.questions import MAX_QUESTIONS, real_questions, says

Z95 = 1.959963984540054  # the normal quantile of 0.975
MAX_RUNS = 20_000  # questions x samples x temperatures
FIELDS = ("temperatures", "questions", "samples_per_question")
# the settings a request may give (the rest are the tasks model's), and this experiment's own
# defaults where they differ from a single run's
SETTINGS = ("model", "seed", *FILTER_NAMES, "tools", "max_new_tokens")
DEFAULTS = {"temperatures": "0, 0.5, 1, 1.5", "max_new_tokens": 40}
# a real model's runs take about a second each in the page: fewer of them, and a budget that
# holds a short answer ("The capital of France is Paris." is 8 tokens, "3 + 4 = 7" 7)
PRETRAINED_DEFAULTS = {"temperatures": "0, 0.5, 1, 1.5", "max_new_tokens": 16, "questions": 8,
                       "samples_per_question": 3}
EXAMPLES = 6  # wrong answers kept per temperature to show
BLOCK_SIZE = 16  # positions per block of the samples' paged cache


def wilson(k: int, n: int, z: float = Z95) -> tuple:
    """The Wilson score interval of k successes in n trials: (low, high); (0, 1) for n = 0."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # at k = 0 (k = n) the bound is exactly 0 (1); the subtraction leaves a rounding error
    low = 0.0 if k == 0 else max(0.0, centre - half)
    return low, (1.0 if k == n else min(1.0, centre + half))


def given_settings(req: dict, allowed, errors: list) -> dict:
    """The run settings an experiment request gives (req["settings"]), those it takes; an error
    for each one it does not take, added to `errors`."""
    given = req.get("settings", {})
    if not isinstance(given, dict):
        errors.append(FieldError("settings", "Settings must be an object of name: value."))
        return {}
    errors += [FieldError(k, f"Unknown setting {k!r} for this experiment; it takes "
                             f"{', '.join(allowed)}.") for k in given if k not in allowed]
    return {k: v for k, v in given.items() if k in allowed}


def held_out_questions(library, n: int) -> list:
    """The first n arithmetic questions of the tasks data's validation split (fixed by the
    corpus's seeded split): never seen in training."""
    return tasks.held_out(library.corpus("tasks").val, "arithmetic", n)


def defaults_for(model: str) -> dict:
    """The experiment's own defaults for a model (the page fills its form from them)."""
    return PRETRAINED_DEFAULTS if from_file(model) else DEFAULTS


def about(model: str) -> dict:
    """What the page says of the experiment on a model before it runs: its defaults, what is
    asked and how it is graded, and whether the model calls tools."""
    asked = RealQuestions if from_file(model) else Questions
    return {"defaults": defaults_for(model), "who": asked.who, "asked": asked.source,
            "graded": asked.rule, "tools": asked.tools}


class Questions:
    """What one model is asked and how its answer is graded: the tasks model's held-out
    arithmetic, asked with its question template (tool calls as its settings say)."""

    who = "The tasks model"
    source = "held-out arithmetic questions"
    tools = True  # the model was trained to call the calculator
    rule = "right when the number its answer ends on is the true result"

    def __init__(self, library, model, n: int):
        self.model = model
        self.texts = held_out_questions(library, n)
        self.expected = [tasks.true_result(q) for q in self.texts]
        self.prompt_ids = [tasks.question_ids(model.tokenizer, q) for q in self.texts]
        # a tool's result is appended beyond the budget: room for the whole window
        self.room = model.cfg.context_size

    def prompt(self, q: int):
        """Generation's `prompt` argument: None, read from the settings' prompt as a run does."""
        return None

    def graded(self, q: int, answer: str) -> tuple:
        """(what the answer states, whether it is right)."""
        stated = tasks.stated_number(answer)
        return stated, stated == self.expected[q]


class RealQuestions(Questions):
    """A real chat model's: capitals and small sums, each the one user message of a chat after
    the model's default system message."""

    who = "SmolLM2"
    source = "capitals and small sums"
    tools = False
    rule = "right when the answer names the expected city or number as a whole word"

    def __init__(self, library, model, n: int, budget: int):
        self.model = model
        asked = real_questions(n)
        self.texts = [a["question"] for a in asked]
        self.expected = [a["expected"] for a in asked]
        # (a FieldError for a model whose chat template decodelab does not render)
        self.prompt_ids = [chat_ids(model, [{"role": "user", "content": q}]) for q in self.texts]
        # nothing is appended beyond the budget: the longest prompt and its answer
        self.room = min(model.cfg.context_size, max(map(len, self.prompt_ids)) + budget)

    def prompt(self, q: int):
        return self.prompt_ids[q], None

    def graded(self, q: int, answer: str) -> tuple:
        right = says(answer, self.expected[q])
        return (self.expected[q] if right else None), right


class AccuracyExperiment(Planned):
    """The runs of one experiment, done a few at a time (advance) or all at once (run)."""

    def __init__(self, library, req: dict):
        if not isinstance(req, dict):
            raise FieldErrors([FieldError("request", "The experiment request must be an "
                                                     "object.")])
        errors = []
        model = req.get("settings", {}).get("model") if isinstance(req.get("settings"), dict) \
            else None
        own = defaults_for(model)
        try:
            values = read({**{k: v for k, v in own.items() if k in FIELDS}, **req}, FIELDS)
        except FieldErrors as e:
            errors += e.errors
            values = None
        raw = {"model": "transformer", "max_new_tokens": own["max_new_tokens"],
               **given_settings(req, SETTINGS, errors),
               "dataset": "tasks", "tokenizer": "bpe"}
        settings = None
        try:
            settings = validate(raw, datasets=library.catalog())
        except FieldErrors as e:
            errors += e.errors
        real = settings is not None and from_file(settings.model)
        if values is not None:
            runs = values["questions"] * sum(1 if t == 0 else values["samples_per_question"]
                                             for t in values["temperatures"])
            if runs > MAX_RUNS:
                errors.append(FieldError("questions", f"At most {MAX_RUNS:,} runs (questions x "
                                                      f"samples x temperatures); got {runs:,}."))
            elif real and values["questions"] > MAX_QUESTIONS:
                errors.append(FieldError("questions", f"SmolLM2 has {MAX_QUESTIONS} questions "
                                                      f"(capitals and sums); got "
                                                      f"{values['questions']}."))
        if errors:
            raise FieldErrors(errors)
        self.model = library.for_settings(settings)
        self.engine = self.model.engine if real else None  # (the trained models have one)
        self.settings = dataclasses.replace(settings, cache_check=False)
        self.temperatures = values["temperatures"]
        self.samples = values["samples_per_question"]
        self.asked = RealQuestions(library, self.model, values["questions"],
                                   settings.max_new_tokens) if real \
            else Questions(library, self.model, values["questions"])
        self.questions, self.truths = self.asked.texts, self.asked.expected
        self.prefixes = {}  # question index -> PagedPrefix (the shared prefill)
        # room for a question's prefill and one sample growing as far as it can
        per_run = blocks_for(self.asked.room, BLOCK_SIZE)
        self.pool = BlockPool.for_model(self.model, 2 * per_run + 1, BLOCK_SIZE)
        self.forked = 0  # prompt positions the samples share instead of copying
        # the order runs are made in: by question, so a question's prefix is reused at once
        self.plan = [(q, t, j) for q in range(len(self.questions))
                     for t, T in enumerate(self.temperatures)
                     for j in range(1 if T == 0 else self.samples)]
        self.total = len(self.plan)
        self.outcomes = [[] for _ in self.temperatures]  # per temperature: dicts
        self.steps = 0

    def _run(self, q: int, t: int, j: int) -> dict:
        T = self.temperatures[t]
        s = dataclasses.replace(self.settings, prompt=self.questions[q], temperature=T,
                                greedy=T == 0, seed=(self.settings.seed + j) % (MAX_SEED + 1))
        if q not in self.prefixes:
            for old in self.prefixes.values():  # the last question's: no sample forks it again
                old.release()
            self.prefixes = {q: PagedPrefix(self.model, self.pool, self.asked.prompt_ids[q])}
        run = Generation(self.model, s, prefix=self.prefixes[q], prompt=self.asked.prompt(q))
        run.run()
        if isinstance(run.session, PagedSession):  # it forked the question's prefill
            self.forked += len(self.prefixes[q].session.tokens)
            run.session.release()  # its own blocks back to the pool
        self.steps += len(run.records)
        stated, right = self.asked.graded(q, run.text)
        return {"question": q, "seed": s.seed, "answer": run.text, "stated": stated,
                "correct": right, "finish_reason": run.finish_reason,
                "length": run.finish_reason == "length",
                "malformed": any(c["error"] for c in run.tool_calls),
                "calls": len(run.tool_calls)}

    def _make(self, item) -> None:
        q, t, j = item
        self.outcomes[t].append(self._run(q, t, j))

    def result(self) -> dict:
        rows = []
        for T, outs in zip(self.temperatures, self.outcomes):
            n = len(outs)
            k = sum(o["correct"] for o in outs)
            lo, hi = wilson(k, n)
            rows.append({
                "temperature": T, "greedy": T == 0, "runs": n, "correct": k,
                "accuracy": k / n if n else None, "low": lo, "high": hi,
                "length_share": sum(o["length"] for o in outs) / n if n else None,
                # ran out of budget and wrong: the budget, not the model, may be to blame
                "cut_short_share": sum(o["length"] and not o["correct"] for o in outs) / n
                if n else None,
                "malformed_share": sum(o["malformed"] for o in outs) / n if n else None,
                "wrong": [{"question": self.questions[o["question"]],
                           "expected": self.truths[o["question"]], "answer": o["answer"],
                           "finish_reason": o["finish_reason"]}
                          for o in outs if not o["correct"]][:EXAMPLES]})
        s = self.settings
        out = {"questions": len(self.questions), "samples": self.samples,
               "temperatures": self.temperatures, "budget": s.max_new_tokens,
               "tools": s.tools if self.asked.tools else None, "model": s.model,
               # the real model's arithmetic (its engine), and its every answer, so a run of the
               # same plan on the other engine can be set beside it (`engines_compared`)
               "engine": self.engine,
               "asked": self.asked.source, "graded": self.asked.rule, "seed": s.seed,
               "rows": rows,
               "runs": self.total - len(self.plan), "steps": self.steps,
               # the prompts' keys and values: positions a contiguous copy per sample would
               # copy, and positions the paged samples copied (whole blocks, on write)
               "prefill_copies": {"contiguous": self.forked,
                                  "paged": self.pool.copies_on_write * BLOCK_SIZE}}
        if self.engine is not None:  # (at most MAX_QUESTIONS questions: a short list)
            out["answers"] = [{"question": o["question"], "temperature": T, "seed": o["seed"],
                               "answer": o["answer"], "correct": o["correct"]}
                              for T, outs in zip(self.temperatures, self.outcomes) for o in outs]
        out["findings"] = findings(out)
        return out


def percent(x: float) -> str:
    """A share as the page writes one (web/ui/render.js pct): one decimal, so 5 of 8 is 62.5%,
    not 62%; "<0.1%" and ">99.9%" at the ends."""
    if x in (0, 1):
        return f"{100 * x:.0f}%"
    return "<0.1%" if x < 0.0005 else ">99.9%" if x > 0.9995 else f"{100 * x:.1f}%"


def temperature_words(T: float) -> str:
    return "T = 0 (greedy)" if T == 0 else f"T = {T:g}"


def findings(result: dict) -> list:
    """What the numbers allow one to say, in sentences derived from them."""
    rows = [r for r in result["rows"] if r["runs"]]
    out = []
    if not rows:
        return out
    best = max(rows, key=lambda r: r["accuracy"])
    worst = min(rows, key=lambda r: r["accuracy"])
    t = lambda r: temperature_words(r["temperature"])  # noqa: E731
    out.append({"kind": "best", "text": f"Most right answers at {t(best)}: "
                f"{percent(best['accuracy'])} (95% interval {percent(best['low'])} to "
                f"{percent(best['high'])}, {best['runs']} runs)."})
    if worst is not best:
        if worst["high"] < best["low"]:
            out.append({"kind": "difference", "text": f"At {t(worst)} it falls to "
                        f"{percent(worst['accuracy'])}, and the intervals do not overlap: with "
                        f"these runs, the difference is more than chance."})
        else:
            out.append({"kind": "difference", "text": f"At {t(worst)} it is "
                        f"{percent(worst['accuracy'])}, but the intervals overlap: these runs "
                        f"cannot tell the two apart; ask more questions or take more samples."})
    capped = max(rows, key=lambda r: r["cut_short_share"])
    if capped["cut_short_share"] > 0:
        out.append({"kind": "length", "text": f"{percent(capped['cut_short_share'])} of the runs "
                    f"at {t(capped)} ran out of budget without a right answer: a larger budget "
                    f"would show whether they were on the way to one."})
    bad = max(rows, key=lambda r: r["malformed_share"])
    if bad["malformed_share"] > 0:
        out.append({"kind": "malformed", "text": f"{percent(bad['malformed_share'])} of the runs "
                    f"at {t(bad)} wrote a tool call the calculator could not read."})
    ordered = sorted(rows, key=lambda r: r["temperature"])
    falls = all(a["accuracy"] >= b["accuracy"] for a, b in zip(ordered, ordered[1:]))
    if len(ordered) > 1 and falls and ordered[0]["accuracy"] > ordered[-1]["accuracy"]:
        why = ("the calculator did the arithmetic, and every step above T = 0 was one more chance "
               "to copy a digit wrong" if result["tools"] == "on" else
               "the model's likeliest answer was the right one more often than any other, and "
               "every step above T = 0 was one more chance to draw something else"
               if result["tools"] is None else
               "without the calculator the model must compute, and sampling only spreads its "
               "guesses wider")
        out.append({"kind": "closing", "text": "Accuracy only fell as the temperature rose: "
                                               f"{why}. Temperature changed which tokens were "
                                               "drawn, not what the model knows."})
    else:
        out.append({"kind": "closing", "text": "Temperature changed which tokens were drawn, "
                                               "not what the model knows."})
    return out


PLAN = ("model", "questions", "samples", "temperatures", "budget", "seed", "asked")


def same_plan(a: dict, b: dict) -> bool:
    """Two results of the same questions, samples, temperatures, budget and seed."""
    return all(a.get(k) == b.get(k) for k in PLAN)


def engines_compared(a: dict, b: dict) -> dict:
    """Two results of one plan on the real model's two engines (`same_plan`), side by side:
    per temperature each engine's right answers with their intervals and how many runs gave
    the same answer, word for word (a run is its question, temperature and seed on both), and
    what the numbers allow one to say."""
    first, second = sorted((a, b), key=lambda r: ENGINES.index(r["engine"]))  # as offered
    said = {(x["question"], x["temperature"], x["seed"]): x["answer"] for x in first["answers"]}
    rows = []
    for T, ra, rb in zip(first["temperatures"], first["rows"], second["rows"]):
        runs = [x for x in second["answers"] if x["temperature"] == T]
        alike = sum(said.get((x["question"], T, x["seed"])) == x["answer"] for x in runs)
        rows.append({"temperature": T, "runs": ra["runs"], "alike": alike,
                     first["engine"]: {k: ra[k] for k in ("correct", "accuracy", "low", "high")},
                     second["engine"]: {k: rb[k] for k in ("correct", "accuracy", "low", "high")},
                     "apart": ra["high"] < rb["low"] or rb["high"] < ra["low"]})
    total = sum(r["runs"] for r in rows)
    alike = sum(r["alike"] for r in rows)
    apart = [temperature_words(r["temperature"]) for r in rows if r["apart"]]
    words = [f"The same {total} runs on both engines (each question, temperature and seed the "
             f"same): {alike} of them gave the same answer word for word."]
    if apart:
        words.append(f"At {', '.join(apart)} the two engines' intervals do not overlap: with "
                     "these runs, quantization changed the share of right answers by more "
                     "than chance.")
    else:
        words.append("At every temperature the two engines' intervals overlap: however many "
                     "answers' words quantization changed, these runs cannot tell the two "
                     "engines' shares of right answers apart; ask more questions or take more "
                     "samples for a finer look.")
    return {"engines": [first["engine"], second["engine"]], "rows": rows, "runs": total,
            "alike": alike, "text": " ".join(words)}
