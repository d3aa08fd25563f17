"""The settings of one generation run: one value per generation field of `fields.FIELDS`.

`validate` turns raw input (a dict from JSON, the CLI or the page) into Settings, checking
every field against the table and the rules that involve two fields at once. Every bad field
is reported, not just the first, so a form can mark them all at once.

Left out: which datasets exist (that depends on what is loaded; `validate` takes the list) and
whether the prompt's characters are in the vocabulary (`fields.encode` checks that with the
model's tokenizer).
"""

from dataclasses import asdict, dataclass, field

from decodelab.core import stopping
from decodelab.core.sampling import Rules
from decodelab.errors import FieldError, FieldErrors
from decodelab.fields import FIELD_BY_NAME, check


@dataclass(frozen=True)
class Settings:
    model: str = "bigram"
    dataset: str = "names"
    tokenizer: str = "chars"
    prompt: str = ""
    token_healing: bool = False
    seed: int = 42
    temperature: float = 1.0
    greedy: bool = False
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    order: str = "temperature-first"
    max_new_tokens: int = 50
    min_new_tokens: int = 0
    stop: tuple = field(default_factory=tuple)
    include_stop: bool = False
    ignore_eos: bool = False
    tools: str = "on"
    json_mode: bool = False
    json_max_depth: int = 8
    cache_check: bool = True

    @property
    def is_greedy(self) -> bool:
        return self.rules.is_greedy

    @property
    def rules(self) -> Rules:
        return Rules(self.temperature, self.greedy, self.top_k, self.top_p, self.min_p,
                     self.order, self.repetition_penalty)

    def eos_blocked(self, step: int) -> bool:
        """The rule: end-of-sequence is blocked before min_new_tokens, and always with
        ignore_eos."""
        return self.ignore_eos or step < self.min_new_tokens

    def to_json(self) -> dict:
        d = asdict(self)
        d["stop"] = list(self.stop)
        return d


NAMES = tuple(Settings.__dataclass_fields__)  # the generation fields, in the table's order
GENERATION_FIELDS = tuple(FIELD_BY_NAME[n] for n in NAMES)


def validate(raw: dict, datasets=None) -> Settings:
    """Raw values -> Settings; missing fields take their defaults. Raises FieldErrors.

    datasets: the datasets that exist, as a list of names or as {name: its tokenizers} (the
    library's `catalog()`); with the mapping, a dataset given without a tokenizer takes its
    first one (the tasks data exists as BPE tokens only: its markers are special tokens)."""
    if not isinstance(raw, dict):
        raise FieldErrors([FieldError("settings", "Settings must be an object of name: value.")])
    errors, values = [], {}
    for name in raw:
        if name not in NAMES:
            errors.append(FieldError(name, f"Unknown setting {name!r}; known settings are "
                                           f"{', '.join(NAMES)}."))
    limits = {"dataset": {"choices": tuple(datasets)}} if datasets is not None else {}
    for name in NAMES:
        if name in raw:
            try:
                values[name] = check(name, raw[name], **limits.get(name, {}))
            except FieldError as e:
                errors.append(e)
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
    budget = stopping.budget_error(values.get("stop", ()), tokenizer, hi)
    if budget is not None:
        errors.append(budget)
    if values.get("json_mode") and values.get("token_healing"):
        errors.append(FieldError("json_mode", "JSON mode and token healing cannot both be on: "
                                              "healing lets the first token rewrite the end of "
                                              "the prompt, and the grammar reads only the "
                                              "answer; turn one of them off."))
    if errors:
        raise FieldErrors(errors)
    return Settings(**values)
