"""Take it to transformers: the zip of a run's model and the script in it, run against the real
library. Greedy runs come back token for token; sampled runs come back step by step as the same
distributions through transformers' own processors; what transformers has no setting for is
compared on the model's own probabilities and said in a note."""

import base64
import io
import json
import re
import subprocess
import sys
import zipfile

import pytest
from decodelab.core.loops.generate import start
from decodelab.core.library import Library
from decodelab.errors import FieldError
from decodelab.lesson.handoff import bundle, plan

from tests.conftest import api, run_to_end

pytestmark = pytest.mark.reference  # held to PyTorch and transformers: the reference tier

BASE = {"model": "transformer", "cache_check": False}


@pytest.fixture(scope="module")
def library(artifacts):
    return Library(artifacts)


def run_of(library, **settings):
    return start(library, {**BASE, **settings}).run()


def repeat(run, tmp_path) -> str:
    """Unzip the bundle and run its script with this Python (torch and transformers are the
    test dependencies); its printout."""
    name, data = bundle(run)
    zipfile.ZipFile(io.BytesIO(data)).extractall(tmp_path)
    folder = tmp_path / name.removesuffix(".zip")
    done = subprocess.run([sys.executable, "repeat.py"], cwd=folder, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def largest(out: str, what: str) -> float:
    return float(re.search(what + r": largest difference (\S+)", out)[1])


def test_a_greedy_run_comes_back_token_for_token(library, tmp_path):
    run = run_of(library, dataset="prose", tokenizer="bpe", prompt="The parser", greedy=True,
                 max_new_tokens=30)
    out = repeat(run, tmp_path)
    assert "the same tokens as decodelab" in out and "NOT" not in out
    n = len(run.records)
    assert f"at {n} of {n} steps decodelab's token is the largest" in out
    assert largest(out, "the model's own probabilities") < 1e-4


@pytest.mark.parametrize("rules", [
    {"temperature": 0.8, "top_k": 30, "top_p": 0.9, "repetition_penalty": 1.2},
    {"temperature": 1.3, "min_p": 0.05, "typical_p": 0.8},
], ids=["k-p-penalty", "min-typical"])
def test_a_sampled_run_comes_back_as_the_same_distributions(library, tmp_path, rules):
    run = run_of(library, dataset="prose", tokenizer="bpe", prompt="The parser", seed=3,
                 max_new_tokens=30, **rules)
    out = repeat(run, tmp_path)
    assert largest(out, "final probabilities, transformers' processors") < 1e-4
    assert f"{len(run.records)} steps compared" in out
    assert "torch.multinomial" in out  # the page's sentence on why the draws differ


def test_stop_strings_go_over_and_generate_is_given_the_tokenizer(library, tmp_path):
    run = run_of(library, dataset="prose", tokenizer="bpe", prompt="The parser", seed=5,
                 temperature=0.9, stop=["."], max_new_tokens=40)
    assert plan(run)["generation"]["stop_strings"] == ["."]
    out = repeat(run, tmp_path)  # transformers refuses stop strings without the tokenizer
    assert largest(out, "final probabilities, transformers' processors") < 1e-4


def test_ignore_eos_past_the_window_is_compared_inside_it(library, tmp_path):
    run = run_of(library, dataset="names", seed=2, ignore_eos=True, max_new_tokens=80,
                 temperature=0.9)
    p = plan(run)
    assert p["generation"]["suppress_tokens"] == [0] and p["generation"]["eos_token_id"] is None
    beyond = sum(s["compare"] == "none" for s in p["steps"])
    assert beyond == len(p["start_ids"]) + 80 - 1 - run.model.cfg.context_size
    out = repeat(run, tmp_path)
    assert f"{80 - beyond} steps compared" in out
    assert largest(out, "final probabilities, transformers' processors") < 1e-4
    assert f"{beyond} step(s) came after the window" in out


def test_tool_results_are_fed_and_rules_transformers_lacks_are_said(library):
    tools = plan(run_of(library, dataset="tasks", prompt="What is 12 plus 7?", greedy=True))
    kinds = [s["compare"] for s in tools["steps"]]
    assert "fed" in kinds and set(kinds) <= {"fed", "greedy"}
    assert not tools["generate_repeats_tokens"] and any("calculator" in n for n in tools["notes"])
    shaped = plan(run_of(library, dataset="tasks", prompt="Card for Ada, age 3, from Oslo",
                         json_mode=True, temperature=1.5, seed=1))
    assert {s["compare"] for s in shaped["steps"]} <= {"raw", "fed"}
    assert any("JSON mode" in n for n in shaped["notes"])
    order = plan(run_of(library, dataset="names", seed=1, top_k=5, temperature=2.0,
                        order="filter-first"))
    assert {s["compare"] for s in order["steps"]} == {"raw"}
    # the raw comparison lists the model's own probabilities, not the final ones
    first = order["steps"][0]["candidates"][0]
    trace = run_of(library, dataset="names", seed=1, top_k=5, temperature=2.0,
                   order="filter-first").trace()
    assert first[1] == trace["steps"][0]["top"][0]["p_raw"]


def test_the_zip_is_the_export_and_the_same_for_the_same_run(library, tmp_path):
    a = run_of(library, dataset="names", seed=4, max_new_tokens=10)
    name, data = bundle(a)
    assert name == "decodelab-names-chars.zip"
    z = zipfile.ZipFile(io.BytesIO(data))
    assert sorted(n.split("/", 1)[1] for n in z.namelist()) == sorted([
        "config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
        "tokenizer_config.json", "run.json", "repeat.py"])
    assert json.loads(z.read("decodelab-names-chars/run.json"))["seed"] == 4
    again = bundle(run_of(library, dataset="names", seed=4, max_new_tokens=10))
    assert again[1] == data  # no dates or orders that change between two makes


def test_a_bigram_is_refused_in_words(library):
    with pytest.raises(FieldError) as e:
        bundle(start(library, {"model": "bigram", "dataset": "names", "seed": 1}).run())
    assert e.value.field == "model" and "Only a transformer" in e.value.message


def test_the_page_endpoint(artifacts):
    assert api("setup", {"assets": str(artifacts)}, session="handoff")["ok"]
    none = api("handoff", {}, session="handoff")
    assert not none["ok"] and "Generate first" in none["errors"][0]["message"]
    run_to_end({"model": "transformer", "dataset": "names", "seed": 1, "max_new_tokens": 5},
               session="handoff")
    got = api("handoff", {}, session="handoff")
    assert got["ok"] and got["name"] == "decodelab-names-chars.zip"
    assert zipfile.ZipFile(io.BytesIO(base64.b64decode(got["zip"]))).testzip() is None
    bigram = run_to_end({"model": "bigram", "dataset": "names", "seed": 1}, session="handoff")
    assert bigram["settings"]["model"] == "bigram"
    refused = api("handoff", {}, session="handoff")
    assert not refused["ok"] and refused["errors"][0]["field"] == "model"
