"""Measuring generated text, and the temperature experiment that uses the measures.

Per temperature, over all its samples together:

- spread: the entropy, in bits, of the tokens the samples used, all samples pooled. It says how
  evenly the choices spread over the vocabulary (higher: more varied), and unlike a distinct-n
  ratio it does not fall just because a text is longer (a hot temperature writes longer names,
  and longer texts repeat more characters). Fewer than MIN_POOL tokens are too few to measure.

Per sample (one generation run), then averaged:

- repeated 3-gram rate: the share of 3-gram occurrences that repeat one already seen in the same
  sample, which is 1 - distinct-3 (0 = no loops).
- mean log-probability under the model: the average of ln p_model(token) over the chosen tokens
  (end-of-sequence included), where p_model is the model's own softmax at T = 1, before any
  decoding rule. The rules change what is picked; this says how likely the model finds it.
- share of words found in the training data, and the share that are new: a text's words (split
  on spaces, outer punctuation stripped, lower case), counting only words with at least one
  generated character; a word cut off by the length budget is not counted. A pretrained model's
  own training text is not here: its words are looked up in the prose data instead, an English
  reference, so the new words are those no English text here has (invented words, odd pieces).

The experiment runs the same settings at several temperatures: one sample each with the seed
from the settings ("single"), or `samples` runs per temperature with seeds seed, seed + 1, ...
("repeated"), the same seeds for every temperature, so the temperatures differ in nothing else.
Repeated mode reports mean, spread (sample standard deviation), min and max of each measure, and
the share of samples whose text is unlike every other sample's.

A fixed budget keeps it fair and bounded: every sample gets the same max_new_tokens, and
samples x temperatures x max_new_tokens may not exceed MAX_BUDGET tokens.

Left out: measures that need a reference text (BLEU and friends) or a bigger model (MAUVE).
"""

import dataclasses
import math
import re

import numpy as np

from decodelab.core.rules import sampling
from decodelab.core.loops.generate import Generation
from decodelab.core.rules.settings import validate
from decodelab.errors import FieldError, FieldErrors
from decodelab.fields import MAX_SEED, encode, label_of, read
from decodelab.lesson.planned import Planned

MAX_BUDGET = 100_000  # tokens per experiment: samples x temperatures x max_new_tokens
# What the page's experiment starts with. One sample per temperature (the request's default) is
# a single name of five or six characters: too few tokens to measure a spread, and word shares of
# 0% or 100%. Twenty samples pool about 120 tokens per temperature, and run in about a second.
PAGE_DEFAULTS = {"mode": "repeated", "samples": 20}
EXAMPLES = 8  # texts kept per temperature to show
MIN_POOL = 20  # tokens a temperature's samples need together before their spread is measured

# What each measure means, in the words the page shows (also the order of table rows).
MEASURES = (
    {"key": "spread", "label": "Spread", "lo": 0, "hi": None, "pooled": True,
     "means": "entropy of the tokens used, all samples together, in bits (higher: more varied)"},
    {"key": "repeated_3gram", "label": "Repeated 3-grams", "lo": 0, "hi": 1,
     "means": "share of 3-character runs seen earlier in the same text (higher: loops)"},
    {"key": "mean_logprob", "label": "Mean log-prob", "lo": None, "hi": 0,
     "means": "average ln p of the chosen tokens under the model at T = 1 (nearer 0: likelier)"},
    {"key": "known_share", "label": "Words in the data", "lo": 0, "hi": 1,
     "means": "share of generated words that occur in the training text"},
    {"key": "new_share", "label": "New words", "lo": 0, "hi": 1,
     "means": "share of generated words the training text never had"},
)
KEYS = tuple(m["key"] for m in MEASURES)
# a pretrained model's words are looked up in an English reference, not its training text
REFERENCE_WORDS = {
    "known_share": {"label": "Words in English prose",
                    "means": "share of generated words that occur in the prose data, an English "
                             "reference (the model's own training text is not here)"},
    "new_share": {"label": "Words not in it",
                  "means": "share of generated words the prose data never has (invented words, "
                           "odd pieces, rare names)"},
}


def measures_for(model) -> list:
    """MEASURES in the words of this model: its tokens' unit (characters or tokens), and where
    its words are looked up."""
    unit = "character" if model.tokenizer.name == "chars" else "token"
    out = []
    for m in MEASURES:
        m = dict(m)
        if m["key"] == "repeated_3gram":
            m["means"] = m["means"].replace("3-character", f"3-{unit}")
        if model.reference_texts and m["key"] in REFERENCE_WORDS:
            m.update(REFERENCE_WORDS[m["key"]])
        out.append(m)
    return out


# --- measures of one sample --------------------------------------------------------------------

def ngrams(tokens, n: int) -> list:
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def spread(tokens):
    """Entropy in bits of the tokens' frequencies; None below MIN_POOL tokens."""
    if len(tokens) < MIN_POOL:
        return None
    counts = np.bincount(np.asarray(tokens, dtype=np.intp))
    p = counts[counts > 0] / len(tokens)
    return float(-(p * np.log2(p)).sum())


def distinct_n(tokens, n: int):
    """Distinct n-grams / all n-grams; None when the text has fewer than n tokens."""
    grams = ngrams(list(tokens), n)
    return len(set(grams)) / len(grams) if grams else None


def repeated_ngram_rate(tokens, n: int = 3):
    """Share of n-gram occurrences that already occurred earlier in the same text."""
    d = distinct_n(tokens, n)
    return None if d is None else 1.0 - d


_EDGE = re.compile(r"^[\W_]+|[\W_]+$")


def normalise_word(word: str) -> str:
    """"Docutils," -> "docutils": outer punctuation off, lower case (inner marks stay)."""
    return _EDGE.sub("", word).lower()


def word_vocabulary(sequences) -> set:
    return {w for s in sequences for w in map(normalise_word, s.split()) if w}


def generated_words(prompt: str, text: str, cut_off: bool) -> list:
    """The normalised words of prompt + text that contain a generated character.

    cut_off: the text ended at the length budget, so its last word may be unfinished (dropped
    unless the text ended with a space).
    """
    full = prompt + text
    spans = [m for m in re.finditer(r"\S+", full) if m.end() > len(prompt)]
    if cut_off and spans and spans[-1].end() == len(full):
        spans.pop()
    return [w for w in (normalise_word(m.group()) for m in spans) if w]


def known_share(words, vocabulary: set):
    """Share of words found in the vocabulary; None without words."""
    return sum(w in vocabulary for w in words) / len(words) if words else None


def mean_logprob(records) -> float | None:
    """Mean ln p_model(chosen token) at T = 1, from the step records."""
    chosen = [r["logprob"] for r in records if r.get("source", "model") == "model"]
    return sum(chosen) / len(chosen) if chosen else None


def sample_measures(run: Generation, vocabulary: set) -> dict:
    tokens = [t for t in run.output_ids if t != run.tokenizer.eos_id]
    words = generated_words(run.settings.prompt, run.text, run.finish_reason == "length")
    known = known_share(words, vocabulary)
    return {"repeated_3gram": repeated_ngram_rate(tokens, 3),
            "mean_logprob": mean_logprob(run.records),
            "known_share": known, "new_share": None if known is None else 1.0 - known,
            "words": len(words), "tokens": len(tokens), "ids": tokens}


def summarise(values) -> dict:
    """Mean, spread (sample standard deviation; 0 for one value), min, max of the defined values."""
    xs = np.array([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if xs.size == 0:
        return {"mean": None, "sd": None, "min": None, "max": None, "n": 0}
    return {"mean": float(xs.mean()), "sd": float(xs.std(ddof=1)) if xs.size > 1 else 0.0,
            "min": float(xs.min()), "max": float(xs.max()), "n": int(xs.size)}


# --- the experiment -----------------------------------------------------------------------------

def check_request(req, datasets=None):
    """Validate an experiment request; returns (settings, temperatures, mode, samples).

    req: {"settings": {...the generation settings...}, "temperatures": "0.3, 1, 2",
          "mode": "single" | "repeated", "samples": 50}
    Every bad field is reported at once (FieldErrors).
    """
    if not isinstance(req, dict):
        raise FieldErrors([FieldError("request", "The experiment request must be an object.")])
    errors, settings, values = [], None, None
    try:
        settings = validate(req.get("settings", {}), datasets=datasets)
    except FieldErrors as e:
        errors += e.errors
    names = ("temperatures", "mode") + (("samples",) if req.get("mode") == "repeated" else ())
    try:
        values = read(req, names)
    except FieldErrors as e:
        errors += e.errors
    if not errors:
        samples = values.get("samples", 1)
        budget = samples * len(values["temperatures"]) * settings.max_new_tokens
        if budget > MAX_BUDGET:
            field = "samples" if values["mode"] == "repeated" else "max_new_tokens"
            errors.append(FieldError(field, f"The budget is at most {MAX_BUDGET:,} tokens "
                                            f"(samples x temperatures x max new tokens); got "
                                            f"{samples} x {len(values['temperatures'])} x "
                                            f"{settings.max_new_tokens} = {budget:,}. Use fewer "
                                            f"samples or a smaller Max new tokens."))
    if errors:
        raise FieldErrors(errors)
    return settings, values["temperatures"], values["mode"], values.get("samples", 1)


class Experiment(Planned):
    """The runs of one experiment, done a few at a time (advance) or all at once (run)."""

    def __init__(self, library, req: dict):
        settings, temperatures, mode, samples = check_request(req, datasets=library.catalog())
        self.model = library.for_settings(settings)
        try:
            encode(self.model.tokenizer, "prompt", settings.prompt)
        except FieldError as e:
            raise FieldErrors([e]) from None
        # the learner's greedy switch would make every temperature the same: here only T = 0
        # means greedy. A live cache check (if the settings have one) only costs time here.
        self.settings = dataclasses.replace(settings, greedy=False, cache_check=False)
        self.temperatures, self.mode, self.samples = temperatures, mode, samples
        self.reference = self.model.reference_texts
        self.vocabulary = word_vocabulary(library.corpus(self.reference or settings.dataset).train)
        self.seeds = [(settings.seed + j) % (MAX_SEED + 1) for j in range(samples)]
        self.plan = [(t, seed) for t in range(len(temperatures)) for seed in self.seeds]
        self.results = [[] for _ in temperatures]  # per temperature: (measures, text, finish)
        self.total = len(temperatures) * samples
        self.steps = 0

    def _make(self, item) -> None:
        t, seed = item
        s = dataclasses.replace(self.settings, temperature=self.temperatures[t], seed=seed)
        run = Generation(self.model, s).run()
        self.steps += len(run.records)
        self.results[t].append((sample_measures(run, self.vocabulary), run.text,
                                run.finish_reason))

    def result(self) -> dict:
        rows = []
        for T, results in zip(self.temperatures, self.results):
            texts = [text for _, text, _ in results]
            finishes = {}
            for _, _, f in results:
                finishes[f] = finishes.get(f, 0) + 1
            pool = [t for m, _, _ in results for t in m["ids"]]
            measures = {k: summarise([m[k] for m, _, _ in results]) for k in KEYS
                        if k != "spread"}
            measures["spread"] = {"mean": spread(pool), "sd": None, "min": None, "max": None,
                                  "n": len(pool)}
            row = {"temperature": T, "greedy": T == 0, "samples": len(results),
                   "measures": {k: measures[k] for k in KEYS},
                   "texts": texts[:EXAMPLES], "finish": finishes,
                   "tokens": summarise([m["tokens"] for m, _, _ in results])}
            if self.mode == "repeated":
                # texts that no other sample produced (at a low temperature, samples repeat)
                counts = {}
                for text in texts:
                    counts[text] = counts.get(text, 0) + 1
                row["unique_share"] = sum(1 for t in texts if counts[t] == 1) / len(texts)
                row["distinct_texts"] = len(counts)
            rows.append(row)
        s = self.settings
        most = math.log2(self.model.tokenizer.vocab_size - 1)  # every token but EOS equally often
        measures = [dict(m, hi=round(most, 2)) if m["key"] == "spread" else m
                    for m in measures_for(self.model)]
        uses = "SmolLM2-135M-Instruct (its words looked up in the prose data)" \
            if self.reference else f"{s.dataset} data"
        out = {"mode": self.mode, "samples": self.samples, "temperatures": self.temperatures,
               "uses": uses, "reference": self.reference,
               "seeds": [self.seeds[0], self.seeds[-1]], "settings": s.to_json(),
               # the filters on, as the page lists them ("top-k 3")
               "filters": [f"{label_of(name).lower()} {value}"
                           for name, value in sampling.filters_on(s.rules)],
               "budget": self.samples * len(self.temperatures) * s.max_new_tokens,
               "steps": self.steps, "measures": measures, "rows": rows, "min_pool": MIN_POOL}
        out["findings"] = findings(out)
        return out


# --- what the numbers say, in sentences ------------------------------------------------------------

def _pct(x) -> str:
    """A share as the page writes it: one decimal, "<0.1%" for tiny ones."""
    if x == 0:
        return "0%"
    if x == 1:
        return "100%"
    return "<0.1%" if x < 0.0005 else ">99.9%" if x > 0.9995 else f"{100 * x:.1f}%"


def _number(key: str, x) -> str:
    text = _pct(x) if key in ("known_share", "new_share") else f"{x:.2f}"
    return text.replace("-", "\u2212")


def _t(row) -> str:
    return "T = 0 (greedy)" if row["greedy"] else f"T = {row['temperature']:g}"


def change(key: str, lo, hi, lo_row, hi_row, between=()) -> str:
    """How a measure moves from the coolest to the hottest temperature, in words that cannot
    contradict the numbers: "rises from A at T = a to B at T = b", "falls ...", or, when the two
    numbers read the same, "stays at A". between: (row, value) of the temperatures in between;
    where one of them goes past both ends, the words say it did not move steadily and where it
    peaked (T = 1 above both T = 0.3 and T = 2 is no fall from the one to the other)."""
    a, b = _number(key, lo), _number(key, hi)
    if a == b:
        words = f"stays at {a} from {_t(lo_row)} to {_t(hi_row)}"
    else:
        verb = "rises" if hi > lo else "falls"
        words = f"{verb} from {a} at {_t(lo_row)} to {b} at {_t(hi_row)}"
    shown = [(row, x) for row, x in between
             if x is not None and _number(key, x) not in (a, b)]
    top = max(shown, key=lambda rx: rx[1], default=None)
    bottom = min(shown, key=lambda rx: rx[1], default=None)
    if top is not None and top[1] > max(lo, hi):
        return f"{words}, not steadily: it is highest, {_number(key, top[1])}, at {_t(top[0])}"
    if bottom is not None and bottom[1] < min(lo, hi):
        return f"{words}, not steadily: it is lowest, {_number(key, bottom[1])}, at {_t(bottom[0])}"
    return words


def findings(result: dict) -> list:
    """The experiment's conclusions, each {"kind", "text"}, every one derived from the numbers
    in `result` (the page shows these sentences; the tests hold each kind to its numbers)."""
    rows = sorted(result["rows"], key=lambda r: r["temperature"])
    out = [{"kind": "same", "text": "Every column used the same trained model, the same settings "
                                    "and the same seeds; only T differed."}]
    lo, hi = rows[0], rows[-1]
    value = lambda row, key: row["measures"][key]["mean"]  # noqa: E731
    inside = lambda key: [(r, value(r, key)) for r in rows[1:-1]]  # noqa: E731
    if len(rows) > 1:
        if value(lo, "spread") is not None and value(hi, "spread") is not None:
            out.append({"kind": "spread", "text": "The spread of the tokens used (entropy, bits) "
                        + change("spread", value(lo, "spread"), value(hi, "spread"), lo, hi,
                                 inside("spread"))
                        + "."})
        elif any(value(r, "spread") is None for r in rows):
            out.append({"kind": "spread", "text": f"Too few tokens to measure the spread at some "
                                                  f"temperatures (it needs {MIN_POOL} together): "
                                                  f"repeated samples give more."})
        if value(lo, "mean_logprob") is not None and value(hi, "mean_logprob") is not None:
            out.append({"kind": "logprob", "text": "The model's own average log-probability of "
                        "what was picked " + change("mean_logprob", value(lo, "mean_logprob"),
                                                    value(hi, "mean_logprob"), lo, hi,
                                                    inside("mean_logprob")) + "."})
        # a text under 3 tokens has no 3-gram to repeat (no number for it)
        measured = [r for r in rows if value(r, "repeated_3gram") is not None]
        if measured and all(_number("repeated_3gram", value(r, "repeated_3gram")) ==
                            _number("repeated_3gram", 0) for r in measured):
            longest = max(r["tokens"]["mean"] or 0 for r in rows)
            out.append({"kind": "repeats", "text": f"No sample repeated a 3-gram at any "
                        f"temperature: texts of about {longest:.0f} tokens at most are too short "
                        f"to loop. Loops show on longer text: English prose, T = 0.3, 200 new "
                        f"tokens."})
        elif len(measured) > 1:
            a, b = measured[0], measured[-1]
            out.append({"kind": "repeats", "text": "The share of repeated 3-grams " + change(
                "repeated_3gram", value(a, "repeated_3gram"), value(b, "repeated_3gram"), a, b)
                + "."})
        where = "in English prose (the prose data)" if result["reference"] else \
            "in the training text"
        if value(lo, "known_share") is not None and value(hi, "known_share") is not None:
            out.append({"kind": "known", "text": f"The share of words found {where} "
                        + change("known_share", value(lo, "known_share"),
                                 value(hi, "known_share"), lo, hi, inside("known_share"))
                        + "."})
        if result["mode"] == "repeated":
            out.append({"kind": "texts", "text": f"Different texts among {result['samples']} "
                        f"samples: {lo['distinct_texts']} at {_t(lo)}, {hi['distinct_texts']} at "
                        f"{_t(hi)}."})
    out.append({"kind": "closing", "text": "Temperature changed which tokens were selected, not "
                                           "what the model knows."})
    return out
