"""SmolLM2 on the quantized engine (decodelab.pretrained.engines): the file's Q4_1 and Q8_0
blocks multiplied as llama.cpp multiplies them, held to llama.cpp's own numbers
(tests/fixtures/llamacpp_smollm2.json, recorded by tools/llamacpp_fixture.py), and its
arithmetic in a fixed order, so a position's logits are the same however many positions are
computed with it.

How close llama.cpp can be held. With 8-bit activations the model is discontinuous: a value
that crosses a rounding boundary of a block's quantization moves by a whole step, and
SmolLM2's outlier channels make the steps large. Measured here, changing only the rounding of
exact ties in the activations' quantizer (halves away from zero, ggml's reference quantizer,
against halves to even, its x86 SIMD one) moves the top-20 logits by 0.37 (median over eight
chats' teacher-forced steps): as far as this engine is from llama.cpp (0.35), and as far as
the float32 reference is from llama.cpp (0.33). Two implementations that differ in any last bit (ggml
sums its dot products in SIMD lanes and RMSNorm's squares in float64) part that far, so the
bar is the agreement two faithful engines reach: top-1 at 95% of llama.cpp's teacher-forced
positions (167 of 176 here; the float32 reference: 169), not 99%. Greedy answers part where
a step's top two are close: this engine gives 3 of llama.cpp's 8 answers whole (the float32
reference 4); llama.cpp's "What is the capital of France?" starts with "L" at 24.74 against
"The" at 24.65, and each engine falls its own way there. Only ggml's own arithmetic,
operation for operation, could be held closer.
"""

import json

import numpy as np
import pytest

from decodelab.core.models.session import Session
from decodelab.pretrained import engines, files, model as pretrained
from decodelab.pretrained.gguf import GGUFError
from tests.conftest import ROOT
from tests.test_smollm2 import path  # noqa: F401 (the file, a fixture)

FIXTURE = json.loads((ROOT / "tests/fixtures/llamacpp_smollm2.json").read_text())


@pytest.fixture(scope="module")
def quantized(path):
    return pretrained.load(path, engine="quantized")


def test_the_fixture_is_llama_cpps_on_this_very_file():
    assert FIXTURE["file_sha256"] == files.GGUF_SHA256
    assert FIXTURE["threads"] == 1 and len(FIXTURE["chats"]) == 8
    for chat in FIXTURE["chats"]:
        assert len(chat["teacher_forced"]) == len(chat["greedy_ids"])
        assert [p["ids"][0] for p in chat["greedy_steps"]] == chat["greedy_ids"]


def test_the_engine_keeps_the_files_blocks_at_a_quarter_of_float32(quantized, path):
    held = quantized.weight_bytes  # (the tied head is the embedding's blocks, counted once)
    assert quantized.n_params == 134_515_008  # the same model, each weight once
    assert held < 0.25 * quantized.n_params * 4  # 106 MiB against float32's 513
    assert held < 1.5 * path.stat().st_size  # about the file's own 94 MiB, scales in float32


def test_a_positions_logits_do_not_depend_on_what_is_computed_with_it(quantized):
    """The cached steps of a chat, its prefill in one pass, and the full recomputation in
    chunks (the live check's) give the same bits: the check can hold this engine to 0."""
    chat = FIXTURE["chats"][0]
    prompt, answer = chat["prompt_ids"], chat["greedy_ids"]
    s = Session(quantized)
    rows = [s.prefill(prompt)]
    for t in answer[:-1]:
        rows.append(s.decode(t))
    ids = prompt + answer[:-1]
    full = quantized.logits_at(ids, list(range(len(prompt) - 1, len(ids))))
    assert np.array_equal(np.array(rows), full)
    one = Session(quantized)
    one.prefill(prompt[:1])
    for t in prompt[1:-1]:
        one.decode(t)
    assert np.array_equal(one.decode(prompt[-1]), rows[0])  # token by token, as in one pass


def agreement(model) -> tuple:
    """Top-1 agreement with llama.cpp at its teacher-forced positions (count, of), and each
    position's largest logit difference over llama.cpp's top 20."""
    agree, total, far = 0, 0, []
    for chat in FIXTURE["chats"]:
        ids = chat["prompt_ids"] + chat["greedy_ids"]
        got = model.logits_at(ids, [p["at"] for p in chat["teacher_forced"]])
        for row, p in zip(got, chat["teacher_forced"]):
            total += 1
            agree += int(np.argmax(row)) == p["ids"][0]
            far.append(np.abs(row[p["ids"]] - np.array(p["logits"])).max())
    return agree, total, far


def faithful(agree, total, far) -> bool:
    """As close to llama.cpp as two faithful engines come (see above), with a margin."""
    return agree >= 0.94 * total and np.median(far) < 0.5 and max(far) < 1.5


def test_teacher_forced_it_agrees_with_llama_cpp_as_two_faithful_engines_do(quantized, path):
    agree, total, far = agreement(quantized)
    assert faithful(agree, total, far), (agree, total, np.median(far), max(far))
    # the bar tells a wrong engine: the same blocks with two blocks of layers swapped
    wrong = pretrained.load(path, engine="quantized")
    for key in [k for k in wrong.params if k.startswith("h28.")]:
        other = "h29." + key[4:]
        wrong.params[key], wrong.params[other] = wrong.params[other], wrong.params[key]
    wrong.derived.clear()
    wrong = pretrained.PretrainedModel(wrong.cfg, wrong.params, wrong.tokenizer, wrong.info,
                                       wrong.template, "quantized")
    assert not faithful(*agreement(wrong))


def test_the_engine_is_named_and_a_file_it_cannot_run_is_refused_in_one_sentence(tmp_path):
    from tests.test_hostile_gguf import tiny

    with pytest.raises(ValueError, match="engine is 'fast'; it is one of reference, quantized"):
        pretrained.Reader(files.find_smollm2(), engine="fast")
    meta = pretrained.GGUF(files.find_smollm2()).metadata
    small = tiny(tmp_path, {k: v for k, v in meta.items() if k.startswith("tokenizer.")})
    with pytest.raises(GGUFError, match=r"^tensor blk\.0\.attn_q\.weight is stored as F32; the "
                                        r"quantized engine multiplies Q4_1 and Q8_0 blocks "
                                        r"\(the reference engine runs this file\)$"):
        pretrained.load(small, engine="quantized")
    assert pretrained.load(small).engine == "reference"  # the same file runs on the other
    # heads narrower than the attention kernel's 16 channels: refused before a tensor is read
    import dataclasses

    reader = pretrained.Reader(files.find_smollm2())
    narrow = dataclasses.replace(reader.cfg, n_head=72, n_kv_head=24)  # heads of 8 channels
    with pytest.raises(GGUFError, match=r"^each head is 8 channels wide; the quantized engine's "
                                        r"attention takes them 16 at a time"):
        engines.check_types(reader.gguf, narrow)
    assert engines.ENGINES == ("reference", "quantized")


def test_the_command_line_runs_either_engine_and_its_trace_says_which(quantized):
    import subprocess
    import sys

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "decodelab", "generate", "--model",
                               "smollm2", "--prompt", "The capital of France is", "--greedy",
                               "--max-new-tokens", "6", "--json", *args], cwd=ROOT / "py",
                              capture_output=True, text=True, timeout=300)

    got = json.loads(cli("--engine", "quantized").stdout)
    assert got["engine"] == "quantized"
    ids = quantized.tokenizer.encode("The capital of France is")
    s = Session(quantized)
    logits, out = s.prefill(ids), []
    for _ in range(6):
        out.append(int(np.argmax(logits)))
        logits = s.decode(out[-1])
    assert [step["token_id"] for step in got["steps"]] == out  # the library's own steps
    # the live check (on by default) holds the cached steps to a full recomputation: exactly
    assert [(step["cache_ok"], step["cache_diff"]) for step in got["steps"]] == [(True, 0.0)] * 6
    assert json.loads(cli().stdout)["engine"] == "reference"  # the default, said
    bad = cli("--engine", "fast")
    assert bad.returncode == 2
    assert bad.stderr.strip().endswith("--engine: Engine: 'fast' is not an engine; choose "
                                       "reference or quantized.")
