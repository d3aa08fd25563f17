"""The command line that repeats a run (entry/command.py), as the page shows it: the words for
each kind of run, and the commands themselves run through the CLI, which must print the run's
own trace (a chat turn's too, on SmolLM2)."""

import json
import os
import shlex
import subprocess
import sys

import pytest

from decodelab.core.library import Library
from decodelab.core.tokens.corpus import corpus_from_text
from decodelab.core.rules.settings import Settings, engine_json, run_json
from decodelab.entry.command import (CHAT_SETTINGS, NOT_SAID, OWN_TEXT, SETTING_NAMES_OF, repeat,
                                     words)
from decodelab.fields import MAX_SEED
from decodelab.pretrained.chat import conversation_seed, start_turn, turn_seed
from tests.conftest import ROOT


def cli(command_words):
    assert command_words[:3] == ["python3", "-m", "decodelab"] and command_words[-1] == "--json"
    out = subprocess.run([sys.executable, *command_words[1:]], capture_output=True, text=True,
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT / "py")))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def shell(command_words):
    """The words as a shell reads the line the page shows (each already quoted)."""
    return shlex.split(" ".join(command_words))


def test_a_trained_model_s_run_names_the_four_always_and_the_rest_where_not_default():
    settings = Settings(model="bigram", prompt="-ma", seed=3, temperature=1.0, stop=("a b", "c"),
                        cache_check=False).to_json()
    got = words(settings)
    assert got == ["python3", "-m", "decodelab", "generate", "--model=bigram", "--dataset=names",
                   "--prompt=-ma", "--seed=3", "--stop='a b'", "--stop=c", "--no-cache-check",
                   "--json"]
    assert shell(words({**settings, "prompt": "it's"}))[6] == "--prompt=it's"


def test_a_model_read_from_a_file_names_its_engine_and_a_file_of_one_s_own_by_its_name():
    settings = {"model": "smollm2", "prompt": "Hi", "seed": 1}
    assert words(settings, engine="quantized")[-3:] == ["--seed=1", "--engine=quantized",
                                                         "--json"]
    own = words({**settings, "model": "My Llama"}, engine="reference", gguf="my llama.gguf")
    assert own[4] == "--gguf='my llama.gguf'" and not any(w.startswith("--model") for w in own)


def test_a_chat_turn_gives_the_conversation_before_it_and_the_seed_it_was_asked_with():
    history = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]
    messages = history + [{"role": "user", "content": "And you?"}]
    settings = {"model": "smollm2", "seed": turn_seed(7, messages), "temperature": 0.2}
    got = shell(words(settings, engine="reference", messages=messages))
    assert got[3] == "chat" and "--seed=7" in got and "--temperature=0.2" in got
    assert json.loads(got[got.index(next(w for w in got if w.startswith("--history=")))]
                      .split("=", 1)[1]) == history
    assert "--message=And you?" in got and not any(w.startswith("--model") for w in got)
    # a system message alone before the first message goes as --system
    first = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    said = shell(words({"seed": 1}, messages=first))
    assert "--system=Be brief." in said and not any(w.startswith("--history") for w in said)


def test_every_run_setting_has_its_option_and_a_chat_turn_keeps_its_draft():
    """Nothing a run's settings hold is left out of its command unsaid: generate takes every
    run setting, chat every one but what the conversation and the chat model decide."""
    everything = Settings().to_json()
    assert set(everything) <= set(SETTING_NAMES_OF["generate"])
    assert set(everything) - set(NOT_SAID["chat"]) <= set(SETTING_NAMES_OF["chat"])
    turn = [{"role": "user", "content": "Hi"}]
    said = words({**everything, "draft": "ngram", "seed": 1}, engine="quantized", messages=turn)
    assert "--draft=ngram" in said
    with pytest.raises(ValueError, match="no option for the setting nonsense"):
        words({"nonsense": 1, "seed": 1})


def test_the_commands_take_their_fields_defaults_and_the_page_never_imports_the_cli():
    """A setting left out of a command is its field's default there (the CLI gives generate
    and chat no defaults of their own); and the page's Python, which writes commands at every
    run, never imports the CLI (argparse is not in the runtime's snapshot: a return visit would
    import it again), nor at its start the GGUF reader (its tokenizer's unicodedata, which the
    model's load brings)."""
    from decodelab.entry.cli import COMMANDS, build_parser

    assert COMMANDS["generate"][3] == COMMANDS["chat"][3] == {}
    chat = build_parser().parse_args(["chat", "--message", "x"])
    assert set(CHAT_SETTINGS) <= set(vars(chat))
    out = subprocess.run([sys.executable, "-c", "import sys, decodelab.entry.webapi; "
                          "print(sorted({'argparse', 'gettext', 'unicodedata'} & "
                          "set(sys.modules)))"],
                         capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT / "py")))
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("seed", [0, 5, MAX_SEED])
def test_the_seed_a_turn_drew_with_goes_back_to_the_one_it_was_asked_with(seed):
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}] * 3
    assert conversation_seed(turn_seed(seed, messages), messages) == seed


def test_a_run_on_text_of_one_s_own_has_no_command():
    library = Library()
    library.add_custom(corpus_from_text("abcabc\nabc cab\n" * 20, "mine"))
    assert repeat(library, {"model": "bigram", "dataset": "mine", "seed": 1}) == \
        {"words": None, "note": OWN_TEXT}


def test_the_command_prints_a_trained_model_s_run():
    from decodelab.core.loops.generate import start

    library = Library()
    run = start(library, {"model": "transformer", "dataset": "prose", "prompt": "The ",
                          "seed": 11, "temperature": 0.8, "top_k": 9, "max_new_tokens": 12,
                          "stop": ["."]}).run()
    command = repeat(library, run_json(run.settings, run.model))
    assert cli(shell(command["words"]))["steps"] == json.loads(json.dumps(run.trace()))["steps"]


def test_the_command_prints_the_second_turn_of_a_sampled_chat_on_smollm2():
    """Turn 2 of a sampled conversation: its history inline, and the seed the conversation was
    asked with (the turn drew with it advanced by one)."""
    library = Library(engine="quantized")
    raw = {"model": "smollm2", "seed": 5, "temperature": 0.7, "max_new_tokens": 8}
    first = start_turn(library, raw, [{"role": "user", "content": "Name a colour."}]).run()
    messages = first.model.template.trace(first.trace(), first.chat)["messages"]
    messages.append({"role": "user", "content": "And another?"})
    run = start_turn(library, raw, messages).run()
    assert run.settings.seed == 6
    command = repeat(library, run_json(run.settings, run.model),
                     engine_json(run.model)["engine"], run.chat.messages)
    printed = cli(shell(command["words"]))
    expected = run.model.template.trace(run.trace(), run.chat)
    assert printed["messages"] == expected["messages"]
    assert [s["token_id"] for s in printed["steps"]] == [s["token_id"] for s in expected["steps"]]
    assert printed["settings"] == expected["settings"] and printed["engine"] == "quantized"


def test_the_command_prints_a_run_of_a_gguf_file_of_one_s_own(tmp_path):
    """A tiny Llama file of one's own, run by its file's name, in the folder that holds it."""
    from decodelab.core.loops.generate import start
    from decodelab.pretrained.files import find_smollm2
    from decodelab.pretrained.gguf import GGUF
    from tests.test_hostile_gguf import tiny

    vocab = {k: v for k, v in GGUF(find_smollm2()).metadata.items() if k.startswith("tokenizer.")}
    path = tiny(tmp_path, vocab, name="my model.gguf")
    library = Library(gguf=path)
    run = start(library, {"model": "smollm2", "prompt": "Hi", "seed": 3, "temperature": 0.9,
                          "max_new_tokens": 5, "cache_check": False}).run()
    assert run.model.name == "my model.gguf"  # (its file names no model)
    # (the page names a file opened from disk when it reads it: the model's info "opened")
    command = repeat(library, run_json(run.settings, run.model), "reference", None,
                     "my model.gguf")
    said = shell(command["words"])
    assert "--gguf=my model.gguf" in said and "my model.gguf in the folder" in command["note"]
    out = subprocess.run([sys.executable, *said[1:]], capture_output=True, text=True,
                         cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT / "py")))
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)
    assert printed["steps"] == json.loads(json.dumps(run.trace()))["steps"]
