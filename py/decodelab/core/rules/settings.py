"""The settings of one generation run: one value per generation field of `fields.FIELDS`.

`validate` turns raw input (a dict from JSON, the CLI or the page) into Settings, checking
every field against the table (`check_each`, which the page's check as the learner types uses
too) and the rules that involve two fields at once. Every bad field is reported, not just the
first, so a form can mark them all at once.

Left out: which datasets exist (that depends on what is loaded; `validate` takes the list) and
whether the prompt's characters are in the vocabulary (`fields.encode` checks that with the
model's tokenizer).
"""

from dataclasses import asdict, field, fields, make_dataclass

from decodelab.core.rules import stopping
from decodelab.core.rules.sampling import Rules
from decodelab.errors import FieldError, FieldErrors
from decodelab.fields import RUN_FIELDS, check, from_file, label_of


# a field's kind -> the type of its value in Settings
TYPES = {"int": int, "float": float, "bool": bool, "choice": str, "text": str, "lines": tuple}


class Run:
    """What a run's settings decide beyond their values: the rules they make, and the EOS
    rule."""

    @property
    def is_greedy(self) -> bool:
        return self.rules.is_greedy

    @property
    def rules(self) -> Rules:
        return Rules(**{name: getattr(self, name) for name in RULE_NAMES})

    def eos_blocked(self, step: int) -> bool:
        """The rule: end-of-sequence is blocked before min_new_tokens, and always with
        ignore_eos."""
        return self.ignore_eos or step < self.min_new_tokens

    def to_json(self) -> dict:
        d = asdict(self)
        d["stop"] = list(self.stop)
        return d


Settings = make_dataclass("Settings", [(f.name, TYPES[f.kind], field(default=f.default))
                                       for f in RUN_FIELDS], bases=(Run,), frozen=True)
Settings.__module__ = __name__  # (make_dataclass names its module itself from Python 3.12)
Settings.__doc__ = """The settings of one run: one value per run setting of fields.FIELDS (the
fields the workbench shows), in the table's order, each with the table's default and the type
its kind gives. The table declares each setting once; a new setting is a row there and nothing
here. (The rules among them are declared as the rules, in sampling.Rules, which `rules`
makes.)"""


def run_json(settings: Settings, model) -> dict:
    """A run's settings as its trace says them: every setting, except that a model that brings
    its own tokenizer and data (`own_data`: read from a file) is named by its own name (a GGUF
    file of one's own is not SmolLM2), and the Dataset and Tokenizer settings, which played no
    part in its run, are left out."""
    d = settings.to_json()
    if model.own_data:
        d["model"] = model.name
        del d["dataset"], d["tokenizer"]
    return d


def engine_json(model) -> dict:
    """What a trace says of the arithmetic beside its settings: a model read from a file runs
    on the engine it was read for ({"engine": "reference"} or "quantized":
    decodelab.pretrained.engines); a model trained here has one engine, and nothing is said."""
    return {"engine": model.engine} if model.own_data else {}


RULE_NAMES = tuple(f.name for f in fields(Rules) if f.init)  # the settings the rules read
NAMES = tuple(f.name for f in RUN_FIELDS)  # the generation fields, in the table's order
GENERATION_FIELDS = RUN_FIELDS


def check_each(raw: dict, datasets=None, not_a_number=()) -> tuple:
    """Each setting of raw on its own, against its row of the field table, in the table's
    order: (the values that passed, a FieldError for each that did not). Settings raw does
    not give are left out. not_a_number: the names whose number box holds text that is no
    number (the browser gives such a box's value as empty)."""
    limits = {"dataset": {"choices": tuple(datasets)}} if datasets is not None else {}
    values, errors = {}, []
    for name in NAMES:
        if name in raw:
            try:
                values[name] = check(name, raw[name], not_a_number=name in not_a_number,
                                     **limits.get(name, {}))
            except FieldError as e:
                errors.append(e)
    return values, errors


def validate(raw: dict, datasets=None, not_a_number=()) -> Settings:
    """Raw values -> Settings; missing fields take their defaults. Raises FieldErrors.

    datasets: the datasets that exist, as a list of names or as {name: its tokenizers} (the
    library's `catalog()`); with the mapping, a dataset given without a tokenizer takes its
    first one (the tasks data exists as BPE tokens only: its markers are special tokens).
    not_a_number: as `check_each` reads it."""
    if not isinstance(raw, dict):
        raise FieldErrors([FieldError("settings", "Settings must be an object of name: value.")])
    errors = []
    for name in raw:
        if name not in NAMES:
            errors.append(FieldError(name, f"Unknown setting {name!r}; known settings are "
                                           f"{', '.join(NAMES)}."))
    values, bad = check_each(raw, datasets, not_a_number)
    errors += bad
    readers = datasets.get(values.get("dataset", Settings.dataset)) \
        if isinstance(datasets, dict) else None
    if readers and "tokenizer" not in raw and Settings.tokenizer not in readers:
        values["tokenizer"] = readers[0]
    lo, hi = values.get("min_new_tokens", 0), values.get("max_new_tokens", Settings.max_new_tokens)
    if "min_new_tokens" in values and lo > hi:
        errors.append(FieldError("min_new_tokens", f"Min new tokens must be from 0 to Max new "
                                                   f"tokens ({hi}); got {lo}.",
                                 also=("max_new_tokens",)))
    tokenizer = values.get("tokenizer", Settings.tokenizer)
    if from_file(values.get("model")):
        tokenizer = "bpe"  # its own byte-level BPE: a stop string may be one token
    budget = stopping.budget_error(values.get("stop", ()), tokenizer, hi)
    if budget is not None:
        errors.append(budget)
    if values.get("json_mode") and values.get("token_healing"):
        errors.append(FieldError("json_mode", "JSON mode and token healing cannot both be on: "
                                              "healing lets the first token rewrite the end of "
                                              "the prompt, and the grammar reads only the "
                                              "answer; turn one of them off."))
    errors += search_errors(values)
    if errors:
        raise FieldErrors(errors)
    return Settings(**values)


# Beam search draws nothing, so a decoding rule (sampling.Rules) that shapes a draw has no
# meaning for it: each is refused by name unless it is off (search_errors), a new rule too. The
# order of the filters alone is left as it is: with every filter off it changes nothing.
BEAM_IGNORES = ("order",)
SAMPLING_ONLY = ("greedy",) + tuple(name for name in RULE_NAMES  # greedy first, then in order
                                    if name not in ("greedy", *BEAM_IGNORES))
# Neither search follows one text with a mask of its own (each path or guess would need one).
ONE_PATH_ONLY = ("json_mode", "token_healing")


def search_errors(values: dict) -> list:
    """The rules that involve a search setting and another: each a FieldError naming the field
    to change. values: the settings that passed their own checks (the rest take defaults)."""
    get = lambda name: values.get(name, getattr(Settings, name))  # noqa: E731
    beam, draft = get("strategy") == "beam", get("draft") != "off"
    errors = []
    if beam and draft:
        errors.append(FieldError("draft", "Draft model must be off with beam search: a draft "
                                          "guesses ahead of one path, and beam search keeps "
                                          "several. Turn the draft off, or choose Strategy "
                                          "sample.", also=("strategy",)))
    if beam:
        for name in SAMPLING_ONLY:
            if get(name) != getattr(Settings, name):
                errors.append(FieldError(name, f"{label_of(name)} has no meaning for beam "
                                               f"search: it draws nothing and keeps the "
                                               f"likeliest paths. Set it back to "
                                               f"{default_words(name)}, or choose Strategy sample.",
                                         also=("strategy",)))
        if get("num_return_sequences") > get("num_beams"):
            errors.append(FieldError("num_return_sequences",
                                     f"Paths returned must be from 1 to Beams "
                                     f"({get('num_beams')}); got {get('num_return_sequences')}.",
                                     also=("num_beams",)))
    what = "beam search" if beam else "a draft model" if draft else None
    for name in ONE_PATH_ONLY if what else ():
        if get(name):
            errors.append(FieldError(name, f"{label_of(name)} is not allowed with {what}: its "
                                           f"mask follows one text as it is written, and "
                                           f"{'every path' if beam else 'every guess'} would "
                                           f"need its own. Turn it off, or use "
                                           f"{'Strategy sample' if beam else 'no draft'}.",
                                     also=("strategy" if beam else "draft",)))
    if draft and get("draft") != "ngram" and from_file(get("model")):
        errors.append(FieldError("draft", "Draft model: no model here reads SmolLM2's 49,152 "
                                          "tokens (the bigram drafts for the transformer "
                                          "trained here); choose the n-gram draft, which "
                                          "guesses from the text itself, or turn the draft off.",
                                 also=("model",)))
    elif what and get("model") != "transformer" and not from_file(get("model")):
        field, words = ("strategy", "Beam search keeps one row of the KV cache per path") \
            if beam else ("draft", "The n-gram draft's guesses are checked in one pass of a KV "
                                   "cache, which the bigram has not") \
            if get("draft") == "ngram" else ("draft", "The bigram drafts for the transformer, "
                                                      "not for itself")
        errors.append(FieldError(field, f"{words}: choose Model transformer.",
                                 also=("model",)))
    return errors


def default_words(name: str) -> str:
    """A setting's default as a message writes it: false, 1, 0.5."""
    value = getattr(Settings, name)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return value
    return str(int(value)) if float(value).is_integer() else str(value)
