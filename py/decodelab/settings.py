"""Every user-facing setting of a generation run: its allowed values, its default, its validation.

One table (FIELDS) drives three things, so they cannot drift apart: validation here (used by the
CLI, the Python API and the browser worker), the instant checks in the page (the worker sends the
table to the page), and the wording of every error message. A message always names the field and
the allowed values, e.g. "Top-p must be a number greater than 0 and at most 1 (1 means off); got
1.5."

Deliberately left out: which datasets exist (that depends on what is loaded; `validate` takes the
list) and whether the prompt's characters are in the vocabulary (the tokenizer knows that).
"""

import math
from dataclasses import asdict, dataclass, field

from decodelab.errors import FieldError, FieldErrors

MODELS = ("bigram", "transformer")
ORDERS = ("temperature-first", "filter-first")
MAX_PROMPT_CHARS = 2000
MAX_STOP_STRINGS = 32
MAX_STOP_CHARS = 100
MAX_SEED = 2**32 - 1


@dataclass(frozen=True)
class Field:
    name: str
    label: str
    kind: str  # "int" | "float" | "bool" | "choice" | "text" | "lines"
    default: object
    help: str = ""
    min: float | None = None
    max: float | None = None
    min_exclusive: bool = False
    choices: tuple = ()
    note: str = ""  # what a special value means, e.g. "0 means off"

    def allowed(self) -> str:
        """The allowed values in words, as they appear in error messages."""
        if self.kind in ("int", "float"):
            noun = "a whole number" if self.kind == "int" else "a number"
            lo = f"greater than {_num(self.min)}" if self.min_exclusive else f"from {_num(self.min)}"
            hi = f"and at most {_num(self.max)}" if self.min_exclusive else f"to {_num(self.max)}"
            note = f" ({self.note})" if self.note else ""
            return f"{noun} {lo} {hi}{note}"
        if self.kind == "bool":
            return "true or false"
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "text":
            return f"text of at most {MAX_PROMPT_CHARS} characters"
        return (f"up to {MAX_STOP_STRINGS} strings of 1 to {MAX_STOP_CHARS} characters each")

    def to_json(self) -> dict:
        d = asdict(self)
        d["choices"] = list(self.choices)
        d["allowed"] = self.allowed()
        return d


def _num(x) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


FIELDS = (
    Field("model", "Model", "choice", "bigram", "Which language model scores the next token.",
          choices=MODELS),
    Field("dataset", "Dataset", "choice", "names", "The text the model was trained on.",
          choices=("names", "prose")),
    Field("prompt", "Prompt", "text", "",
          "Text the model continues. Empty means: start a new sequence."),
    Field("seed", "Seed", "int", 42, "Same seed and settings give the same text.",
          min=0, max=MAX_SEED),
    Field("temperature", "Temperature", "float", 1.0,
          "Divides the logits before softmax: below 1 sharpens, above 1 flattens.",
          min=0, max=100, note="0 means greedy"),
    Field("greedy", "Greedy", "bool", False, "Always take the most likely token (no randomness)."),
    Field("top_k", "Top-k", "int", 0, "Keep only the k highest-scoring tokens (ties kept).",
          min=0, max=10000, note="0 means off"),
    Field("top_p", "Top-p", "float", 1.0,
          "Keep the smallest set of likeliest tokens whose mass reaches p.",
          min=0, max=1, min_exclusive=True, note="1 means off"),
    Field("min_p", "Min-p", "float", 0.0,
          "Keep tokens at least min-p times as likely as the top token.",
          min=0, max=1, note="0 means off"),
    Field("repetition_penalty", "Repetition penalty", "float", 1.0,
          "Make tokens already seen less likely: positive logits divided, negative multiplied.",
          min=0, max=10, min_exclusive=True, note="1 means off"),
    Field("order", "Order", "choice", "temperature-first",
          "temperature-first: Hugging Face and vLLM. filter-first: llama.cpp's default.",
          choices=ORDERS),
    Field("max_new_tokens", "Max new tokens", "int", 50,
          "A budget: generation stops after this many tokens.", min=1, max=10000),
    Field("min_new_tokens", "Min new tokens", "int", 0,
          "End-of-sequence is blocked until this many tokens exist.", min=0, max=10000),
    Field("stop", "Stop strings", "lines", (),
          "Generation stops when the text contains one of these (one per line)."),
    Field("include_stop", "Include stop string", "bool", False,
          "Keep the matched stop string in the text."),
    Field("ignore_eos", "Ignore EOS", "bool", False,
          "Block end-of-sequence for the whole run."),
    Field("cache_check", "Cache check", "bool", True,
          "Transformer only: compare the cached logits with a full recomputation at every step."),
)
FIELD_BY_NAME = {f.name: f for f in FIELDS}


def label_of(name: str) -> str:
    f = FIELD_BY_NAME.get(name)
    return f.label if f else name


@dataclass(frozen=True)
class Settings:
    model: str = "bigram"
    dataset: str = "names"
    prompt: str = ""
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
    cache_check: bool = True

    @property
    def is_greedy(self) -> bool:
        """Greedy is its own mode; a temperature of 0 asks for it too (never a division by 0)."""
        return self.greedy or self.temperature == 0

    def to_json(self) -> dict:
        d = asdict(self)
        d["stop"] = list(self.stop)
        return d


def _shown(value) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _bad(f: Field, value) -> FieldError:
    return FieldError(f.name, f"{f.label} must be {f.allowed()}; got {_shown(value)}.")


def check_number(f: Field, value):
    """A number for field f (its kind, range and label): from a number or numeric text;
    anything else, or out of range, is a FieldError naming f and what it allows."""
    given = value
    if isinstance(value, bool) or value is None:
        raise _bad(f, given)
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise _bad(f, given) from None
    if not isinstance(value, (int, float)):
        raise _bad(f, given)
    x = float(value)
    if not math.isfinite(x) or (f.kind == "int" and not x.is_integer()):
        raise _bad(f, given)
    too_low = x <= f.min if f.min_exclusive else x < f.min
    if too_low or x > f.max:
        raise _bad(f, given)
    return int(x) if f.kind == "int" else x


def _bool(f: Field, value) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "on", "yes"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "0", "off", "no", ""):
        return False
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise _bad(f, value)


def _text(f: Field, value) -> str:
    if not isinstance(value, str):
        raise FieldError(f.name, f"{f.label} must be text; got {type(value).__name__}.")
    if len(value) > MAX_PROMPT_CHARS:
        raise FieldError(f.name, f"{f.label} must be at most {MAX_PROMPT_CHARS} characters; "
                                 f"got {len(value)}.")
    return value


def _lines(f: Field, value) -> tuple:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(s, str) for s in value):
        raise FieldError(f.name, f"{f.label} must be a list of strings.")
    if len(value) > MAX_STOP_STRINGS:
        raise FieldError(f.name, f"{f.label}: at most {MAX_STOP_STRINGS} are allowed; "
                                 f"got {len(value)}.")
    for i, s in enumerate(value, 1):
        if not 1 <= len(s) <= MAX_STOP_CHARS:
            raise FieldError(f.name, f"{f.label}: entry {i} has {len(s)} characters; each must "
                                     f"have 1 to {MAX_STOP_CHARS}.")
    return tuple(value)


def _choice(f: Field, value, choices) -> str:
    if not isinstance(value, str) or value not in choices:
        raise FieldError(f.name, f"{f.label} must be one of {', '.join(choices)}; "
                                 f"got {_shown(value)}.")
    return value


def check_field(name: str, value, datasets=None):
    """Validate and normalise one field's value; raises FieldError."""
    f = FIELD_BY_NAME[name]
    if f.kind in ("int", "float"):
        return check_number(f, value)
    if f.kind == "bool":
        return _bool(f, value)
    if f.kind == "text":
        return _text(f, value)
    if f.kind == "lines":
        return _lines(f, value)
    choices = tuple(datasets) if (name == "dataset" and datasets is not None) else f.choices
    return _choice(f, value, choices)


def validate(raw: dict, datasets=None) -> Settings:
    """Turn a dict of raw values (from JSON, the CLI or the page) into Settings.

    Missing fields take their defaults. Every bad field is reported, not just the first,
    so a form can mark them all at once (FieldErrors).
    """
    if not isinstance(raw, dict):
        raise FieldErrors([FieldError("settings", "Settings must be an object of name: value.")])
    errors, values = [], {}
    for name in raw:
        if name not in FIELD_BY_NAME:
            errors.append(FieldError(name, f"Unknown setting {name!r}; known settings are "
                                           f"{', '.join(FIELD_BY_NAME)}."))
    for f in FIELDS:
        if f.name in raw:
            try:
                values[f.name] = check_field(f.name, raw[f.name], datasets)
            except FieldError as e:
                errors.append(e)
    lo, hi = values.get("min_new_tokens", 0), values.get("max_new_tokens", 50)
    if "min_new_tokens" in values and lo > hi:
        errors.append(FieldError("min_new_tokens", f"Min new tokens must be from 0 to Max new "
                                                   f"tokens ({hi}); got {lo}."))
    # Character models emit one character per token, so a stop string longer than the whole
    # budget could never match: say so rather than let it silently do nothing.
    budget = values.get("max_new_tokens", FIELD_BY_NAME["max_new_tokens"].default)
    for i, stop in enumerate(values.get("stop", ()), 1):
        if len(stop) > budget:
            errors.append(FieldError("stop", f"Stop strings: entry {i} has {len(stop)} characters "
                                             f"but Max new tokens is {budget}, so it could never "
                                             f"match; shorten it or raise Max new tokens."))
            break
    if errors:
        raise FieldErrors(errors)
    return Settings(**values)
