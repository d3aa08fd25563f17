"""The CLI contract: JSON on stdout, exit status 2 and one line naming the option on bad input."""

import functools
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "py"))
    return subprocess.run([sys.executable, "-m", "decodelab", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT)


def ok(*args):
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@functools.cache
def prose_eval(model, tokenizer="chars"):
    """`eval` on prose, run once per test process: scoring a transformer's whole training and
    validation splits takes a minute, and two tests read the same output."""
    return ok("eval", "--model", model, "--dataset", "prose", "--tokenizer", tokenizer)


def fails(*args) -> str:
    """Run a command that must be refused (exit 2, nothing on stdout); its message."""
    r = cli(*args)
    assert r.returncode == 2 and r.stdout == "", r.stdout
    return r.stderr


def test_probs_worked_numbers():
    out = ok("probs", "--logits", "2,1", "--temperature", "0.5")
    assert [round(p, 3) for p in out["probs"]] == [0.881, 0.119] and out["kept"] == [True, True]
    out = ok("probs", "--probs", "0.6,0.25,0.15", "--top-p", "0.8")
    assert [round(p, 3) for p in out["probs"]] == [0.706, 0.294, 0.0]
    assert out["kept"] == [True, True, False]
    out = ok("probs", "--logits", "-0.5108,-1.3863,-1.8971", "--temperature", "2", "--top-p",
             "0.8", "--order", "filter-first")
    assert [round(p, 3) for p in out["probs"]] == [0.608, 0.392, 0.0]
    out = ok("probs", "--logits", "1,1,1,0", "--greedy")
    assert out["probs"] == [1.0, 0.0, 0.0, 0.0]


def test_kv_memory_worked_numbers():
    out = ok("kv-memory", "--layers", "32", "--kv-heads", "8", "--head-dim", "128",
             "--bytes-per-element", "2", "--tokens", "4096")
    assert out == {"bytes_per_token": 131072, "total_bytes": 512 * 2**20}
    out = ok("kv-memory", "--layers", "32", "--kv-heads", "8", "--head-dim", "128",
             "--bytes-per-element", "2", "--tokens", "4096", "--sequences", "8")
    assert out["total_bytes"] == 4 * 2**30


@pytest.mark.parametrize("args, option", [
    (["probs", "--logits", "2,1", "--temperature", "-1"], "--temperature"),
    (["probs", "--logits", "2,x"], "--logits"),
    (["probs", "--probs", "0.5,0.5", "--top-p", "0"], "--top-p"),
    (["probs", "--probs", "0.5,0.5", "--top-k", "-3"], "--top-k"),
    (["probs", "--logits", "2,1", "--order", "random"], "--order"),
    (["kv-memory", "--layers", "0", "--kv-heads", "8", "--head-dim", "128",
      "--bytes-per-element", "2", "--tokens", "1"], "--layers"),
    (["generate", "--seed", "1.5"], "--seed"),
    (["generate", "--seed", "1", "--max-new-tokens", "100000"], "--max-new-tokens"),
    (["generate", "--seed", "1", "--prompt", "ZED"], "--prompt"),
    (["generate", "--seed", "1", "--dataset", "poems"], "--dataset"),
    (["generate", "--seed", "1", "--stop", ""], "--stop"),
    (["generate"], "--seed"),
    (["probs", "--logits", "1", "--bogus", "3"], "--bogus"),
    (["eval", "--model", "gpt", "--dataset", "names"], "--model"),
    (["generate", "--seed", "1", "--json-mode"], "--json-mode"),  # names: no braces to write
    (["generate", "--seed", "1", "--dataset", "prose", "--tokenizer", "bpe", "--json-mode",
      "--json-max-depth", "0"], "--json-max-depth"),
    (["ask", "--question", "What is 1 plus 2?", "--json-max-depth", "64"], "--json-max-depth"),
    (["validity", "--budgets", "8,0"], "--budgets"),
    (["validity", "--cards", "0"], "--cards"),
])
def test_bad_arguments_exit_2_with_one_line(args, option, artifacts):
    r = cli(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and option in lines[0], r.stderr
    assert r.stdout == ""


def test_generate_json_trace_is_reproducible(artifacts):
    args = ["generate", "--model", "bigram", "--dataset", "names", "--prompt", "ma", "--seed",
            "11", "--temperature", "0.8", "--top-k", "10", "--max-new-tokens", "20", "--json"]
    a, b = ok(*args), ok(*args)
    assert a == b
    assert a["prompt"] == "ma" and a["settings"]["seed"] == 11
    assert a["finish_reason"] in ("stop", "length") and a["steps"]
    other = ok(*args[:-3], "--seed", "12", "--max-new-tokens", "20", "--json")
    assert other["settings"]["seed"] == 12


def test_generate_stop_string_and_length(artifacts):
    t = ok("generate", "--dataset", "prose", "--prompt", "The ", "--seed", "3", "--max-new-tokens",
           "400", "--stop", "e", "--json")
    assert (t["finish_reason"], t["stop_reason"]) == ("stop", "e") and "e" not in t["text"]
    t = ok("generate", "--dataset", "prose", "--seed", "3", "--max-new-tokens", "7",
           "--ignore-eos", "--json")
    assert (t["finish_reason"], t["stop_reason"], len(t["text"])) == ("length", None, 7)


def test_generate_says_how_a_json_answer_ended(artifacts):
    r = cli("generate", "--model", "bigram", "--dataset", "prose", "--tokenizer", "bpe",
            "--seed", "2", "--max-new-tokens", "1", "--json-mode")
    assert r.returncode == 0
    assert "json=incomplete" in r.stderr and "budget of 1 new token ran out" in r.stderr
    t = ok("generate", "--model", "bigram", "--dataset", "prose", "--tokenizer", "bpe",
           "--seed", "2", "--max-new-tokens", "1", "--json-mode", "--json")
    assert t["json"]["status"] == "incomplete" and t["settings"]["json_mode"] is True
    plain = ok("generate", "--dataset", "names", "--seed", "2", "--json")
    assert plain["json"] == {"status": None, "error": None, "value": None}


def test_eval_reports_nats_and_params(artifacts):
    out = ok("eval", "--model", "bigram", "--dataset", "names")
    assert 1.5 < out["val_nll"] < 3.3 and out["params"] == 27 * 27


def test_eval_in_nats_per_character_and_bits_per_byte_against_a_sum_over_the_text(artifacts):
    import math

    from decodelab.core.library import Library
    from decodelab.core.tokens.tokenizer import EOS

    out = prose_eval("bigram")
    lib = Library(artifacts)
    model, val = lib.model("bigram", "prose"), lib.corpus("prose").val
    total = 0.0  # every prediction of every sequence, its end included, scored from the table
    for text in val:
        ids = [EOS, *model.tokenizer.encode(text), EOS]
        total -= sum(float(model.log_probs[a, b]) for a, b in zip(ids, ids[1:]))
    chars = sum(len(t) + 1 for t in val)
    assert out["nats_per_token"] == out["val_nll"]
    assert out["nats_per_char"] == pytest.approx(total / chars, rel=1e-9)
    assert out["nats_per_char"] == pytest.approx(out["val_nll"], rel=1e-12)  # a token is a character
    text_bytes = sum(len(t.encode("utf-8")) + 1 for t in val)
    assert out["bits_per_byte"] == pytest.approx(total / text_bytes / math.log(2), rel=1e-9)


@pytest.mark.quality  # scores the whole validation split
@pytest.mark.parametrize("model", ["bigram", "transformer"])
def test_eval_of_a_bpe_model_counts_its_tokens_and_the_same_characters(artifacts, model):
    from decodelab.core.library import Library

    bpe, chars = prose_eval(model, "bpe"), prose_eval(model)
    assert bpe["tokenizer"] == "bpe" and chars["tokenizer"] == "chars"
    val = Library(artifacts).corpus("prose").val
    tokens = Library(artifacts).tokenizer("bpe", "prose")
    n_tokens = sum(len(tokens.encode(t)) + 1 for t in val)
    n_chars = sum(len(t) + 1 for t in val)
    assert bpe["chars_per_token"] == pytest.approx(n_chars / n_tokens) and \
        bpe["chars_per_token"] > 2.5
    assert bpe["nats_per_char"] == pytest.approx(bpe["val_nll"] * n_tokens / n_chars)
    assert chars["chars_per_token"] == 1.0


@pytest.mark.quality
def test_the_bpe_transformer_beats_the_bpe_bigram_per_character(artifacts):
    bigram, transformer = prose_eval("bigram", "bpe"), prose_eval("transformer", "bpe")
    assert bigram["nats_per_char"] - transformer["nats_per_char"] >= 0.5


def test_a_stop_string_a_character_model_never_writes_is_named(artifacts):
    err = fails("generate", "--dataset", "names", "--seed", "1", "--stop", "é")
    assert "--stop" in err and "never writes ('é')" in err and "a-z" in err


def test_tokenize_gives_each_tokens_text_and_bytes_and_detokenize_gives_the_text_back(artifacts):
    text = "The parser's output: 42 € ✓"
    out = ok("tokenize", "--dataset", "prose", "--tokenizer", "bpe", "--text", text)
    assert len(out["ids"]) == len(out["tokens"]) == len(out["bytes"])
    assert b"".join(bytes.fromhex(h) for h in out["bytes"]) == text.encode("utf-8")
    assert len(out["ids"]) < len(text)  # merges: fewer tokens than characters
    assert " parser" in out["tokens"]  # a word keeps its leading space
    assert "<e2>" in out["tokens"]  # € is three bytes, none of them UTF-8 alone
    ids = ",".join(map(str, out["ids"]))
    assert ok("detokenize", "--dataset", "prose", "--tokenizer", "bpe", "--ids", ids) == \
        {"text": text}
    # the character tokenizer: one id per character, the default
    chars = ok("tokenize", "--dataset", "names", "--text", "ann")
    assert chars["tokens"] == ["a", "n", "n"] and chars["bytes"] == ["61", "6e", "6e"]
    assert ok("detokenize", "--dataset", "names", "--ids", ",".join(map(str, chars["ids"]))) == \
        {"text": "ann"}


@pytest.mark.parametrize("args, option, words", [
    (("tokenize", "--dataset", "names", "--tokenizer", "bpe", "--text", "ann"), "--tokenizer",
     "learned from the prose and the tasks data only"),
    (("tokenize", "--dataset", "prose", "--tokenizer", "wordpiece", "--text", "a"), "--tokenizer",
     "one of chars, bpe"),
    (("detokenize", "--dataset", "prose", "--tokenizer", "bpe", "--ids", "1,5000"), "--ids",
     "entry 2 is 5000; this tokenizer's ids go from 0 to 1023"),
    (("detokenize", "--dataset", "prose", "--tokenizer", "bpe", "--ids", "1,x"), "--ids",
     "entry 2"),
    (("tokenize", "--dataset", "names", "--text", "Ann"), "--text", "'A'"),
])
def test_bad_tokenizer_input_names_its_option(args, option, words, artifacts):
    r = cli(*args)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and f": {option}: " in r.stderr and words in r.stderr
