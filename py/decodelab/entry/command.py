"""The command line that repeats a run: what the page shows under a finished run or search, so a
learner can run the same thing in a checkout and get the same trace as the page's Export trace.

The words follow the CLI's own options (entry/cli.py), so this is decided here once and the page
only draws it. A run of a trained model or of SmolLM2 is `generate`; a chat turn is `chat`, with
the conversation before the turn given inline to --history (JSON) and the new message to
--message; a GGUF file of one's own is --gguf, by the name of the file the learner opened. A run
on text pasted into the page has no command: the text lives only in the page.

Model, dataset, prompt and seed are always written (a chat: the seed); any other setting only
when it differs from the value the command takes without it. A model read from a file always
names its engine. Values go as --option=value so a prompt that starts with "-" stays a value.
"""

import json
import shlex

from decodelab.core.rules.settings import NAMES
from decodelab.fields import FIELD_BY_NAME, option
from decodelab.pretrained.chat import conversation_seed

ALWAYS = ("model", "dataset", "prompt", "seed")
RUN_IT = ("Run it in a decodelab checkout (after pip install -e . or with PYTHONPATH=py): it "
          "prints the same trace as Export trace.")
OWN_TEXT = ("This run used your own text, which lives only in this page, so no command line "
            "can repeat it.")


def words(settings: dict, *, engine=None, messages=None, gguf=None) -> list:
    """The shell words that repeat a run of these settings (a trace's "settings"); messages:
    a chat turn's conversation, the new user message last; gguf: the file of one's own the
    model was read from (its name, as the command expects to find it)."""
    command = "generate" if messages is None else "chat"
    names = SETTING_NAMES_OF[command]  # (each command's default is its field's: a test)
    defaults = {n: FIELD_BY_NAME[n].default for n in names}
    out = ["python3", "-m", "decodelab", command]
    if gguf is not None:
        out.append(f"--gguf={shlex.quote(gguf)}")
    if messages is not None:  # the Seed setting the turn was asked with, not the one it drew with
        settings = {**settings, "seed": conversation_seed(settings["seed"], messages)}
        *history, last = messages
        if [m["role"] for m in history] == ["system"]:
            out.append(f"--system={shlex.quote(history[0]['content'])}")
        elif history:
            out.append(f"--history={shlex.quote(json.dumps(history, ensure_ascii=False))}")
        out.append(f"--message={shlex.quote(last['content'])}")
    for name, value in settings.items():
        if name in NOT_SAID[command] or (name == "model" and gguf is not None):
            continue  # a file of one's own is --gguf
        if name not in names:  # (tests/test_command.py holds every run setting to an option)
            raise ValueError(f"{command} has no option for the setting {name}")
        if name not in ALWAYS and same(value, defaults.get(name)):
            continue
        out.extend(option_words(name, value))
    if engine is not None:  # a model read from a file: the engine it ran on
        out.append(f"--engine={engine}")
    out.append("--json")
    return out


def option_words(name: str, value) -> list:
    """One setting as the CLI reads it: a flag (--no-... turns off what is on by default), an
    option per line of a list, or --name=value (empty for none)."""
    flag = option(name)
    if FIELD_BY_NAME[name].kind == "bool":
        return [flag if value else f"--no-{flag[2:]}"]
    if isinstance(value, (list, tuple)):
        return [f"{flag}={shlex.quote(text(v))}" for v in value]
    return [f"{flag}={shlex.quote(text(value))}"]


def text(value) -> str:
    return "" if value is None else str(value)


def same(a, b) -> bool:
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return list(a or []) == list(b or [])
    return a == b


def repeat(library, settings: dict, engine=None, messages=None, opened=None) -> dict:
    """{"words": the command's words, "note": how to run it}, or {"words": None, "note": why
    none can repeat it}, for a run (or a search) with these settings as its trace says them.
    opened: the name of the GGUF file of one's own the model was read from (the page's
    `pretrained_load_start` "file"; its info's "opened"), None for the site's own file."""
    if "dataset" in settings and library.own_text(settings["dataset"]):
        return {"words": None, "note": OWN_TEXT}
    gguf = opened
    note = RUN_IT if gguf is None else (
        f"Run it in a decodelab checkout with your file {gguf} in the folder you run it from "
        "(after pip install -e . or with PYTHONPATH=py): it prints the same trace as Export "
        "trace.")
    return {"words": words(settings, engine=engine, messages=messages, gguf=gguf), "note": note}


# a chat turn's settings (the CLI's chat's options): a run's, less what the chat model's template
# decides (the prompt) and what plays no part with it
CHAT_SETTINGS = tuple(n for n in NAMES if n not in ("dataset", "tokenizer", "prompt"))
SETTING_NAMES_OF = {"generate": NAMES, "chat": CHAT_SETTINGS}
# what a run's settings hold that its command does not say: a chat turn's model is the chat
# model, and its prompt is the conversation (the workbench's Prompt, Dataset and Tokenizer
# played no part)
NOT_SAID = {"generate": (), "chat": ("model", "prompt", "dataset", "tokenizer")}
