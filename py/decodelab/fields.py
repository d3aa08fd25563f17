"""Every input decodelab accepts, in one table: its label, help, default and allowed values, and
the one checker that turns raw input into a value, or into an error that names the field.

Inputs come from the page's controls, a link's parameters, a host page's messages, the CLI and
the Python API. All of them are checked here, against FIELDS, so the rules and the words cannot
drift apart. The page gets the table at start-up (webapi `setup`), and as the learner types
its store asks Python to check the fields (the endpoint `check`, web/state/store.js), so the
rules and the words are these; the CLI builds its options from it (entry/cli.py). A message
always names the field and what it allows, e.g.
"Top-p must be a number greater than 0 and at most 1 (1 means off); got 1.5."

Some limits depend on what is loaded, and the caller passes them in: which datasets exist, how
many steps the last run has, which characters a model knows (`encode`).

Left out: the generation settings as one object (settings.py builds it from these fields).
"""

import math
from dataclasses import asdict, dataclass, replace

from decodelab.errors import FieldError, FieldErrors, UnknownCharacters

MAX_SEED = 2**32 - 1
MODELS = ("bigram", "transformer")  # the kinds trained here, one per dataset and tokenizer
PRETRAINED = ("smollm2",)  # models read from a file, with their own tokenizer and data


def option(name: str) -> str:
    """A field's option on the command line: top_k is --top-k."""
    return "--" + name.replace("_", "-")


def from_file(model) -> bool:
    """Does this value of the Model field name a model read from a file, which brings its own
    tokenizer, data and training (Dataset and Tokenizer play no part)? The one place a setting's
    model is told so before any model is loaded; a loaded model says it itself (`own_data`)."""
    return model in PRETRAINED
# the data the pretrained model's lessons take English text from (its own training text is not
# here): a seeded serving workload without a chat template cuts its prompts from it, the
# temperature experiment counts the generated words found in it
PRETRAINED_TEXTS = "prose"
POOL_MB = 32  # a serving pool left to its default takes at most this (lesson.serving)
ORDERS = ("temperature-first", "filter-first")  # the orders the rules know (sampling reads it)
SHIFTS = ("reread", "kshift")  # how a full window goes on (core.models.session reads it)
TOOLS = ("on", "off", "guess")
STRATEGIES = ("sample", "beam")
EARLY_STOPPING = ("false", "true", "never")  # transformers' early_stopping: False, True, "never"
DRAFTS = ("off", "bigram", "ngram")  # ngram: the text itself (speculative.NgramDraft)


@dataclass(frozen=True)
class Field:
    name: str
    label: str
    kind: str  # "int" | "float" | "bool" | "choice" | "text" | "lines" | "numbers" | "object"
    default: object = None
    help: str = ""
    min: float | None = None
    max: float | None = None
    min_exclusive: bool = False
    max_exclusive: bool = False
    choices: tuple = ()
    note: str = ""  # what a special value means, e.g. "0 means off"
    max_chars: int | None = None  # text; lines and numbers: per entry
    min_chars: int = 0  # lines: per entry
    min_items: int = 0  # lines, numbers
    max_items: int | None = None
    item: str | None = None  # numbers: each entry is checked as this field
    optional: bool = False  # empty input means "none" (the value None)
    # How the page shows it (tools/page.py writes its control from these when the site is
    # built): the workbench group it sits in ("" for none), the step of its number box, a slider
    # beside the box (min, max, step), the lines of its text box, and the words of each choice.
    group: str = ""
    step: float | None = None
    slider: tuple = ()
    rows: int | None = None
    choice_labels: tuple = ()
    choice_help: tuple = ()  # what each choice is, in a sentence (the page's hint under it)

    def allowed(self) -> str:
        """The allowed values in words, as they appear in error messages."""
        note = f" ({self.note})" if self.note else ""
        if self.kind in ("int", "float"):
            noun = "a whole number" if self.kind == "int" else "a number"
            if self.min_exclusive:
                span = f"greater than {_num(self.min)} and at most {_num(self.max)}"
            elif self.max_exclusive:
                span = f"from {_num(self.min)} up to (not including) {_num(self.max)}"
            elif self.max is None:
                span = f"of at least {_num(self.min)}"
            else:
                span = f"from {_num(self.min)} to {_num(self.max)}"
            return f"{noun} {span}{note}"
        if self.kind == "bool":
            return "true or false"
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "text":
            return f"text of at most {self.max_chars} characters"
        if self.kind == "lines":
            return (f"{_count(self.min_items, self.max_items)} lines of {self.min_chars} to "
                    f"{self.max_chars} characters each")
        if self.kind == "numbers":
            noun = label_of(self.item).lower() if self.item else "numbers"
            noun += "" if noun.endswith("s") else "s"  # "temperatures", "max new tokens"
            return f"{_count(self.min_items, self.max_items)} {noun} separated by commas"
        return "an object of name: value"

    def to_json(self) -> dict:
        d = asdict(self)
        d["choices"] = list(self.choices)
        d["allowed"] = self.allowed()
        return d


def _num(x) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _count(lo, hi) -> str:
    return f"up to {hi}" if not lo else f"{lo} to {hi}"


def shown(value, limit: int = 40) -> str:
    """A value as an error message quotes it: strings in quotes, cut short."""
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


F = Field
FIELDS = (
    # --- a generation run (settings.Settings) ----------------------------------------------
    F("model", "Model", "choice", "bigram", "The model that scores each possible next token.",
      choices=MODELS + PRETRAINED,
      group="model", choice_labels=("Bigram (counts)", "Transformer (KV cache)",
                                    "SmolLM2-135M-Instruct (real, 94 MiB)"),
      choice_help=(
          "A bigram model looks only at the last character. Its scores are the logarithms of "
          "how often each character followed that one in the training text.",
          "A tiny transformer reads every earlier character through attention. It keeps their "
          "keys and values in a cache, so each new step computes only one new position.",
          "A real transformer of the same kind (Llama’s architecture), trained by Hugging "
          "Face on trillions of tokens and tuned to chat. It brings its own byte-level BPE "
          "tokenizer of 49,152 tokens, so the dataset and tokenizer settings do not apply to it.")),
    F("dataset", "Dataset", "choice", "names", "The text the model learned from.",
      choices=("names", "prose", "tasks"),
      group="model"),
    F("tokenizer", "Tokenizer", "choice", "chars",
      "How text becomes token ids: one id per character, or byte-level BPE (learned merges of "
      "bytes).", choices=("chars", "bpe"),
      group="model", choice_labels=("Characters", "Byte-level BPE")),
    F("prompt", "Prompt", "text", "",
      "The text the model continues. Leaving it empty is fine: the model then starts at the "
      "beginning of a new sequence.", max_chars=2000,
      group="model"),
    F("token_healing", "Token healing", "bool", False,
      "Take back the prompt's last token and let the first new token redo it: the first token "
      "must start with the text that was taken back.",
      group="more"),
    F("seed", "Seed", "int", 42, "Same seed, same settings: same text.", min=0, max=MAX_SEED,
      group="chance"),
    F("temperature", "Temperature", "float", 1.0,
      "Divides the logits before softmax: below 1 sharpens, above 1 flattens.",
      min=0, max=100, note="0 means greedy",
      group="chance", step=0.1, slider=(0, 3, 0.05)),
    F("greedy", "Greedy", "bool", False,
      "Always take the most likely token (ties go to the lowest id). No random draw, so the "
      "seed, temperature and filters do not matter.",
      group="chance"),
    F("top_k", "Top-k", "int", 0, "Keep only the k likeliest tokens (ties with the k-th kept).",
      min=0, max=10000, note="0 means off",
      group="filters"),
    F("top_p", "Top-p", "float", 1.0, "Keep the likeliest tokens until their total reaches p.",
      min=0, max=1, min_exclusive=True, note="1 means off",
      group="filters", step=0.05),
    F("min_p", "Min-p", "float", 0.0,
      "Drop tokens less likely than min-p times the likeliest one.",
      min=0, max=1, note="0 means off",
      group="more", step=0.05),
    F("typical_p", "Typical-p", "float", 1.0,
      "Keep the tokens whose surprise is nearest the average surprise (the entropy), until their "
      "total reaches p: even the likeliest token can go.",
      min=0, max=1, min_exclusive=True, note="1 means off",
      group="more", step=0.05),
    F("repetition_penalty", "Repetition penalty", "float", 1.0,
      "Above 1, tokens already used get less likely: positive logits are divided by it, "
      "negative ones multiplied.", min=0, max=10, min_exclusive=True, note="1 means off",
      group="more", step=0.1),
    F("order", "Order", "choice", "temperature-first",
      "temperature-first: temperature, then the filters (Hugging Face, vLLM). filter-first: "
      "the filters on the model's own probabilities, then temperature (llama.cpp).",
      choices=ORDERS,
      group="more"),
    F("max_new_tokens", "Max new tokens", "int", 50,
      "A budget, not an ending: generation stops after this many tokens.", min=1, max=10000,
      group="stopping"),
    F("min_new_tokens", "Min new tokens", "int", 0,
      "End-of-sequence is blocked until this many tokens exist.", min=0, max=10000,
      group="more"),
    F("stop", "Stop strings", "lines", (),
      "One per line; empty lines are ignored. Generation ends where one appears, even across "
      "tokens, and it is cut from the text.", min_chars=1, max_chars=100, max_items=32,
      group="stopping", rows=2),
    F("include_stop", "Include stop string", "bool", False,
      "Keep the matched stop string at the end of the text.",
      group="more"),
    F("ignore_eos", "Ignore EOS", "bool", False,
      "Never end at end-of-sequence; only the budget or a stop string ends the text.",
      group="more"),
    F("tools", "Tools", "choice", "on",
      "The tasks model only. on: when the model closes a tool call, the calculator runs it, "
      "its result is appended and the model goes on from the same cache. off: the run ends at "
      "the call. guess: no calculator; the model writes the result itself.",
      choices=TOOLS,
      group="stopping", choice_labels=("on: the calculator answers", "off: stop at the call", "guess: no calculator")),
    F("json_mode", "JSON mode", "bool", False,
      "A grammar mask before temperature and the filters: only tokens that can continue a "
      "JSON object may be drawn, and the answer may end only once the object is complete.",
      group="stopping"),
    F("json_max_depth", "JSON depth", "int", 8,
      "JSON mode: how deep objects and arrays may nest (the top object is depth 1).",
      min=1, max=32,
      group="more"),
    F("cache_check", "Cache check", "bool", True,
      "Transformers only (a model with a KV cache). Compare every step's logits from the KV cache with a full "
      "recomputation of the whole text, once the text has ended: it proves the cache right.",
      group="model"),
    F("context_shift", "When the window is full", "choice", "reread",
      "Transformers only. reread: drop the oldest half and read the rest again (exact). "
      "kshift: turn the kept keys back by the dropped length and read nothing (llama.cpp; "
      "faster, not exact: the cache check shows by how much).",
      choices=SHIFTS, group="model"),
    # --- search: several paths (beam search), or guesses checked (speculative decoding) ------
    F("strategy", "Strategy", "choice", "sample",
      "sample: one path, one token per step, by the rules above. beam: several paths at once, "
      "the likeliest kept at every step (transformers' beam search; no draw, so the sampling "
      "settings have no meaning for it).", choices=STRATEGIES,
      group="search", choice_labels=("Sample: one path", "Beam search: several paths")),
    F("num_beams", "Beams", "int", 4,
      "Beam search: the paths kept at every step, and the finished ones kept in the bank.",
      min=2, max=16, group="search"),
    F("length_penalty", "Length penalty", "float", 1.0,
      "Beam search: a finished path's score is its summed log-probability divided by its "
      "length to this power. Above 0 it favours longer paths, below 0 shorter ones.",
      min=-10, max=10, note="0 means the plain sum", group="search", step=0.1),
    F("early_stopping", "Early stopping", "choice", "false",
      "Beam search: true stops once the bank holds as many finished paths as beams; false stops "
      "when no running path, scored at its length, can beat the worst in the bank; never, the "
      "same but scored at the longest length it could reach (transformers' three modes).",
      choices=EARLY_STOPPING, group="search"),
    F("no_repeat_ngram_size", "No repeat n-gram", "int", 0,
      "Beam search: no path may hold the same n tokens in a row twice.",
      min=0, max=10, note="0 means off", group="search"),
    F("num_return_sequences", "Paths returned", "int", 1,
      "Beam search: how many finished paths to return, best first (at most Beams).",
      min=1, max=16, group="search"),
    F("draft", "Draft model", "choice", "off",
      "Speculative decoding: a cheap model on the same tokens guesses ahead, and the model "
      "checks all its guesses in one pass; the text is the model's own either way.",
      choices=DRAFTS, group="search",
      choice_labels=("Off: the model alone", "Bigram, same tokens",
                     "N-gram: the text itself (prompt lookup)")),
    F("num_draft_tokens", "Draft tokens", "int", 4,
      "Speculative decoding: the tokens the draft guesses each round (gamma).",
      min=1, max=8, group="search"),
    # --- the page's lesson: one step, the playground, the experiment ------------------------
    F("step", "Step", "int", 0, "A step of the last run.", min=0, note="steps count from 0"),
    F("top_n", "Candidates shown", "int", 10, "How many of the likeliest tokens to list.",
      min=1, max=100),
    F("logits", "Logits", "numbers", None,
      "Scores, separated by commas; they are named A, B, C... in the order typed.",
      min_items=1, max_items=10000),
    F("probs", "Probabilities", "numbers", None,
      "Probabilities, separated by commas; they are scaled to add up to 1.",
      min=0, min_items=1, max_items=10000),
    F("u", "u", "float", None, "The draw: a number from 0 up to 1. Empty: no draw.",
      min=0, max=1, max_exclusive=True, note="empty means no draw", optional=True),
    F("sweep", "Compare temperatures", "numbers", None,
      "Up to 8 temperatures: the final distribution at each, side by side.",
      item="temperature", min_items=1, max_items=8, optional=True),
    F("temperatures", "T values", "numbers", "0.3, 1, 2",
      "The temperatures to compare, separated by commas.", item="temperature", min_items=1,
      max_items=6),
    F("mode", "Runs", "choice", "single",
      "single: one sample per temperature, with the seed above. repeated: several samples "
      "per temperature, seeds seed, seed + 1, ...", choices=("single", "repeated")),
    F("samples", "Samples per temperature", "int", 50,
      "Every temperature gets the same seeds, so they differ in nothing else.", min=2, max=200),
    F("gammas", "Draft lengths", "numbers", "1, 2, 4, 8",
      "The numbers of draft tokens (gamma) to compare, separated by commas.",
      item="num_draft_tokens", min_items=1, max_items=4),
    F("spec_samples", "Samples per cell", "int", 10,
      "Runs of each draft length at each temperature, with seeds seed, seed + 1, ... (at T = 0 "
      "one run: greedy does not draw).", min=2, max=100),
    # --- the KV cache: batch view, break it on purpose, the measured cost -------------------
    F("prompts", "Batch prompts", "lines", (),
      "2 to 6 prompts, one per line, of different lengths: the shorter ones are padded on the "
      "left.", min_chars=0, max_chars=48, min_items=2, max_items=6,
      rows=4),
    F("batch_steps", "Batch steps", "int", 8, "Tokens drawn for every row of the batch.",
      min=1, max=32),
    F("bug", "Bug", "choice", "none", "One classic KV-cache bug to inject, or none.",
      choices=("none", "frozen-position", "token-twice", "no-causal-mask", "dropout-on",
               "unmasked-padding"),
      choice_labels=("Off: the correct cache", "Positions not advanced during decode", "The last token fed twice", "No causal mask in prefill", "Dropout left on", "Padding without a mask")),
    F("test_prompt", "Test prompt", "text", "", "The text the cache check starts from.",
      max_chars=48),
    F("check_steps", "Check steps", "int", 16, "Steps compared with a full recomputation.",
      min=4, max=48),
    F("repeats", "Repeats", "int", 5, "Timings per context length (the median is shown).",
      min=1, max=25),
    # --- serving: a paged cache, a prefix tree, continuous batching (paged) ------------------
    F("requests", "Requests", "int", 16, "Requests in the seeded workload.", min=1, max=200),
    F("block_size", "Block size", "int", 16, "Positions per block of the paged cache.", min=1,
      max=64),
    F("memory_blocks", "Memory blocks", "int", None,
      "Blocks in the pool: the cache memory the requests share. Empty: room for 8 requests at "
      f"the full window, or {POOL_MB} MiB of blocks if that is less.", min=1, max=100_000,
      note=f"empty means room for 8 full windows, up to {POOL_MB} MiB",
      optional=True),
    F("max_running", "Running at once", "int", 8,
      "Requests that decode together at a step; the others wait in the queue.", min=1, max=32),
    F("parallel_samples", "Samples per request", "int", 1,
      "Samples drawn for each request, each with its own seed: they share the prompt's blocks, "
      "and the first write into a shared block copies it (copy-on-write).", min=1, max=8),
    F("workload", "Your workload", "lines", (),
      "One request per line: its arrival step, its new tokens, then its prompt, like "
      "“0 20 The ship”. Empty: the seeded workload of Requests requests.",
      min_chars=0, max_chars=120, max_items=64, rows=5),
    # --- the memory calculator (kv-memory) ---------------------------------------------------
    F("preset", "Preset", "choice", None, "A published model shape to start from.",
      choices=("seed", "llama2-7b", "llama2-70b", "falcon-7b", "gpt2", "smollm2", "tiny"),
      optional=True),
    F("layers", "Layers", "int", 32, "Transformer blocks, each with its own cache.",
      min=1, max=1000),
    F("heads", "Query heads", "int", 32, "Attention heads that ask (queries).", min=1, max=1024),
    F("kv_heads", "KV heads", "int", 8, "Heads whose keys and values are cached.",
      min=1, max=1024),
    F("head_dim", "Head dim", "int", 128, "Numbers per key (and per value) per head.",
      min=1, max=4096),
    F("bytes_per_element", "Bytes per element", "float", 2,
      "2 for 16-bit numbers, 4 for 32-bit; 1.0625 for llama.cpp's q8_0 blocks.", min=0, max=8,
      min_exclusive=True, step=0.5),
    F("tokens", "Tokens", "int", 4096, "Tokens of context per sequence.", min=1,
      max=10_000_000),
    F("sequences", "Sequences", "int", 1, "Sequences held at once.", min=1, max=100_000),
    # --- the command line's own -----------------------------------------------------------
    F("steps", "Steps", "int", 20, "Logits vectors compared: the prefill, then one per decode.",
      min=1, max=10000),
    F("dtype", "dtype", "choice", "float32", "The floating-point type the check computes in.",
      choices=("float32", "float64")),
    # --- asking the tasks model (ask, the accuracy experiment) -----------------------------
    F("question", "Question", "text", "",
      "A question for the tasks model: arithmetic, e.g. What is 12 plus 7? (whole numbers, "
      "plus, minus or times), or a card, e.g. Card for \"Ada\", age 31, from \"Paris\".",
      max_chars=200),
    F("questions", "Questions", "int", 24,
      "Questions asked at every temperature: the tasks model's held-out arithmetic (it never "
      "trained on them), or SmolLM2's capitals and small sums.",
      min=1, max=500),
    F("samples_per_question", "Samples per question", "int", 4,
      "Runs of each question at each temperature, with seeds seed, seed + 1, ... (at T = 0 "
      "one run: greedy does not draw).", min=1, max=50),
    F("budgets", "Token budgets", "numbers", "8, 16, 40",
      "Max new tokens of the runs, separated by commas: each budget is tried at every "
      "temperature.", item="max_new_tokens", min_items=1, max_items=6),
    F("cards", "Cards", "int", 6,
      "Held-out card questions asked at every budget and temperature, with and without JSON "
      "mode.", min=1, max=200),
    # --- whole requests, and the learner's own text ------------------------------------------
    F("text", "Your text", "text", "", "Nothing you paste leaves this page.",
      rows=6),
    # --- tokens: the command line's tokenize and detokenize ---------------------------------
    F("token_id", "Token id", "int", None, "One token's id.", min=0, max=1_000_000),
    F("ids", "Token ids", "numbers", None, "Token ids, separated by commas.", item="token_id",
      min_items=1, max_items=100_000),
    F("settings", "Settings", "object"),
    F("request", "Request", "object"),
)
FIELD_BY_NAME = {f.name: f for f in FIELDS}


def default(name: str):
    """The field's default: what a setting is when it is not given. A decoding rule's default
    is the value that switches it off, so a run's defaults switch every rule off (sampling's
    Rules and OFF take them from here)."""
    return FIELD_BY_NAME[name].default

# The settings of a run are the fields the workbench shows (each has its group there).
RUN_FIELDS = tuple(f for f in FIELDS if f.group)


# the names of what a request may carry besides the table's fields, as the page says them
OTHER_LABELS = {"messages": "The conversation", "message": "Message",
                "answer_tokens": "Tokens of each answer", "engine": "Engine"}


def label_of(name: str) -> str:
    f = FIELD_BY_NAME.get(name)
    return f.label if f else OTHER_LABELS.get(name, name)


def error_json(e: FieldError) -> dict:
    """A FieldError as the page and hosts receive it: the field, its label and the sentence."""
    out = {"field": e.field, "label": label_of(e.field), "message": e.message}
    if getattr(e, "also", ()):
        out["also"] = list(e.also)
    if getattr(e, "pending", None):  # right, but waits for the learner (library.NotLoaded)
        out["pending"] = e.pending
    return out


def spec(name: str, **limits) -> Field:
    """The field, with limits that depend on what is loaded (choices, max) filled in."""
    f = FIELD_BY_NAME[name]
    return replace(f, **limits) if limits else f


# --- checking -------------------------------------------------------------------------------------

def _bad(f: Field, value) -> FieldError:
    return FieldError(f.name, f"{f.label} must be {f.allowed()}; got {_got(value)}.")


def _got(value) -> str:
    """What a message says it got: a number typed as text as it was typed (the box shows it
    so), empty input as "nothing", anything else as Python writes it, cut short."""
    if value is NOT_A_NUMBER:
        return "something that is not a number"
    if value is None or (isinstance(value, str) and not value.strip()):
        return "nothing"
    if isinstance(value, str) and _is_number(value):
        text = value.strip()
        return text if len(text) <= 40 else text[:37] + "..."
    return shown(value)


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


NOT_A_NUMBER = object()  # a number box holding text that is no number (the browser keeps it)


def _empty(value) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or value == []


def _number(f: Field, value):
    given = value.strip() if isinstance(value, str) else value
    if isinstance(value, bool) or value is None or value is NOT_A_NUMBER:
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
    too_high = f.max is not None and (x >= f.max if f.max_exclusive else x > f.max)
    if too_low or too_high:
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


def _choice(f: Field, value) -> str:
    if not isinstance(value, str) or value not in f.choices:
        raise FieldError(f.name, f"{f.label} must be one of {', '.join(f.choices)}; "
                                 f"got {shown(value)}.")
    return value


def _text(f: Field, value) -> str:
    if not isinstance(value, str):
        raise FieldError(f.name, f"{f.label} must be text; got {type(value).__name__}.")
    if f.max_chars is not None and len(value) > f.max_chars:
        raise FieldError(f.name, f"{f.label} must be at most {f.max_chars} characters; "
                                 f"got {len(value)}.")
    return value


def _lines(f: Field, value) -> tuple:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(s, str) for s in value):
        raise FieldError(f.name, f"{f.label} must be a list of strings.")
    if len(value) > f.max_items:
        raise FieldError(f.name, f"{f.label}: at most {f.max_items} are allowed; "
                                 f"got {len(value)}.")
    if len(value) < f.min_items:
        raise FieldError(f.name, f"{f.label}: at least {f.min_items} are needed, one per "
                                 f"line; got {len(value)}.")
    for i, s in enumerate(value, 1):
        if not f.min_chars <= len(s) <= f.max_chars:
            raise FieldError(f.name, f"{f.label}: entry {i} has {len(s)} characters; each must "
                                     f"have {f.min_chars} to {f.max_chars}.")
    return tuple(value)


def _numbers(f: Field, value) -> list:
    """"0.3, 1, 2" or [0.3, 1, 2] -> [0.3, 1.0, 2.0]; each entry a finite number (at least
    f.min if set), or checked as the field f.item."""
    items = value.split(",") if isinstance(value, str) else value
    if isinstance(value, str) and f.item is not None:
        items = [s for s in items if s.strip()]
    if not isinstance(items, (list, tuple)) or not f.min_items <= len(items) <= f.max_items:
        raise FieldError(f.name, f"{f.label} must be {f.allowed()}, like "
                                 f"{'0.3, 1, 2' if f.item else '2, 1'}.")
    out = []
    for i, item in enumerate(items, 1):
        raw = item.strip() if isinstance(item, str) else item
        if f.item is not None:
            try:
                out.append(_check(FIELD_BY_NAME[f.item], raw))
            except FieldError as e:
                raise FieldError(f.name, f"{f.label}: entry {i}: {e.message}") from None
            continue
        try:
            if isinstance(raw, bool):
                raise ValueError
            x = float(raw)
        except (TypeError, ValueError):
            raise FieldError(f.name, f"{f.label}: entry {i} is not a number: {shown(raw, 20)}; "
                                     f"give numbers separated by commas, like 2, 1.") from None
        if not math.isfinite(x) or (f.min is not None and x < f.min):
            need = "a finite number" if f.min is None else "a non-negative finite number" \
                if f.min == 0 else f"a finite number of at least {_num(f.min)}"
            raise FieldError(f.name, f"{f.label}: entry {i} must be {need}; got {x}.")
        out.append(x)
    return out


CHECKS = {"int": _number, "float": _number, "bool": _bool, "choice": _choice, "text": _text,
          "lines": _lines, "numbers": _numbers}


def _check(f: Field, value):
    if f.optional and _empty(value):
        return None
    if f.kind == "object":
        if not isinstance(value, dict):
            raise FieldError(f.name, f"{f.label} must be a JSON object of name: value.")
        return value
    return CHECKS[f.kind](f, value)


def check(name: str, value, not_a_number: bool = False, **limits):
    """One field's raw value -> its normalised value; raises FieldError naming the field.

    limits: what depends on what is loaded, e.g. choices=datasets, or max=last step.
    not_a_number: the value comes from a number box that holds text that is no number (a
    browser gives such a box's value as empty).
    """
    return _check(spec(name, **limits), NOT_A_NUMBER if not_a_number else value)


def read(req: dict, names, limits=None) -> dict:
    """Check the named fields of a request (absent ones take their defaults); every bad field
    is reported at once (FieldErrors). limits: {name: {choices or max ...}}."""
    if not isinstance(req, dict):
        raise FieldErrors([FieldError("request", "The request must be a JSON object of name: "
                                                 "value.")])
    values, errors = {}, []
    for name in names:
        try:
            values[name] = check(name, req.get(name, FIELD_BY_NAME[name].default),
                                 **(limits or {}).get(name, {}))
        except FieldError as e:
            errors.append(e)
    if errors:
        raise FieldErrors(errors)
    return values


def encode(tokenizer, name: str, text: str, entry: int | None = None) -> list:
    """Text of field `name` (or of its entry number `entry`) -> token ids; characters the
    model never saw are named, all at once."""
    try:
        return tokenizer.encode(text)
    except UnknownCharacters as e:
        unknown = e.chars
        listed = " ".join(repr(c) for c in unknown[:12]) + (" ..." if len(unknown) > 12 else "")
        what = label_of(name) + (f": entry {entry}" if entry is not None else "")
        raise FieldError(name, f"{what} has characters this model has never seen: {listed}. "
                               f"Use only: {tokenizer.describe()}.") from None
