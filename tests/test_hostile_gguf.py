"""Hostile and broken model files, written by the `gguf` package (llama.cpp's own writer): the
reader's header checks pass them, and the model built from their metadata must not trust it.
Each ends, fast and without allocating from the metadata, in one GGUFError that names the
problem, and the command line says it in one line with exit status 2."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import gguf  # (a test dependency: llama.cpp's own writer)

from decodelab.pretrained import model as pretrained
from decodelab.pretrained.files import find_smollm2
from decodelab.pretrained.gguf import GGUF, GGUFError

from tests.conftest import ROOT
from tests.test_gguf import add_metadata, close

LAYERS, C, HEADS, KV_HEADS, FF = 2, 16, 4, 2, 32


@pytest.fixture(scope="module")
def vocab() -> dict:
    """SmolLM2's tokenizer metadata (a real byte-level BPE vocabulary), for tiny models."""
    meta = GGUF(find_smollm2()).metadata
    return {k: v for k, v in meta.items() if k.startswith("tokenizer.")}


def tensors_of(layers=LAYERS, width=C, heads=HEADS, kv_heads=KV_HEADS, ff=FF, vocab_size=49152):
    """name -> float32 values of a tiny Llama's tensors, numpy order (out, in)."""
    rng = np.random.default_rng(0)
    D = width // heads
    shapes = {"token_embd.weight": (vocab_size, width), "output_norm.weight": (width,)}
    for i in range(layers):
        b = f"blk.{i}."
        shapes.update({b + "attn_norm.weight": (width,), b + "attn_q.weight": (heads * D, width),
                       b + "attn_k.weight": (kv_heads * D, width),
                       b + "attn_v.weight": (kv_heads * D, width),
                       b + "attn_output.weight": (width, heads * D),
                       b + "ffn_norm.weight": (width,), b + "ffn_gate.weight": (ff, width),
                       b + "ffn_up.weight": (ff, width), b + "ffn_down.weight": (width, ff)})
    return {name: (rng.standard_normal(shape) * 0.1).astype(np.float32)
            for name, shape in shapes.items()}


def tiny(tmp_path, vocab, meta=None, drop=(), tensors=None, name="tiny.gguf",
         endian=gguf.GGUFEndian.LITTLE):
    """A tiny Llama GGUF file (float32) with SmolLM2's tokenizer; `meta` overrides or adds
    metadata (a value of None drops the key, as does `drop`). Its path."""
    path = tmp_path / name
    w = gguf.GGUFWriter(str(path), "llama", endianess=endian)
    base = {"llama.block_count": LAYERS, "llama.context_length": 256,
            "llama.embedding_length": C, "llama.feed_forward_length": FF,
            "llama.attention.head_count": HEADS, "llama.attention.head_count_kv": KV_HEADS,
            "llama.rope.freq_base": 10000.0, "llama.attention.layer_norm_rms_epsilon": 1e-5,
            **{k: v for k, v in vocab.items() if k != "tokenizer.chat_template"}}
    add_metadata(w, [(key, value) for key, value in {**base, **(meta or {})}.items()
                     if value is not None and key not in drop])
    for tname, values in (tensors if tensors is not None else tensors_of()).items():
        w.add_tensor(tname, values)
    close(w)
    return path


def refused(path, *words):
    """Loading the file ends in one GGUFError naming `words`, within 20 s (a file that made the
    reader loop over its claims would hang here)."""
    def too_long(*_):
        raise TimeoutError("the file was not refused within 20 s")

    old = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(20)
    try:
        with pytest.raises(GGUFError) as e:
            pretrained.load(path)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    message = str(e.value)
    for w in words:
        assert w in message, message
    assert "\n" not in message
    return message


def test_the_tiny_model_itself_loads_and_runs(tmp_path, vocab):
    """The maker of the files below makes a model decodelab reads: each refusal is the change
    made to it, not something else."""
    model = pretrained.load(tiny(tmp_path, vocab))
    assert (model.cfg.n_layer, model.cfg.n_embd, model.cfg.n_head) == (LAYERS, C, HEADS)
    assert model.session().prefill(model.tokenizer.encode("Hi")).shape == (49152,)


def test_a_block_count_far_beyond_the_tensors_present(tmp_path, vocab):
    refused(tiny(tmp_path, vocab, {"llama.block_count": 4_000_000_000}),
            "llama.block_count is 4,000,000,000; the file has the tensors of 2 blocks")
    # a block missing in the middle is named the same way
    missing = {k: v for k, v in tensors_of(layers=3).items() if not k.startswith("blk.1.")}
    refused(tiny(tmp_path, vocab, {"llama.block_count": 3}, tensors=missing, name="gap.gguf"),
            "llama.block_count is 3; the file has the tensors of 2 blocks")


@pytest.mark.parametrize("meta, words", [
    ({"llama.attention.head_count": 0}, "llama.attention.head_count is 0; it must be at least 1"),
    ({"llama.attention.head_count": 3}, "head_count is 3, which does not divide the width"),
    ({"llama.attention.head_count_kv": 3}, "head_count_kv is 3, which does not divide the 4"),
    ({"llama.attention.head_count": 16, "llama.attention.head_count_kv": 16},
     "each head is 1 channels wide, an odd number"),
    ({"llama.embedding_length": 0}, "llama.embedding_length is 0; it must be at least 1"),
    ({"llama.feed_forward_length": None}, "the file's metadata has no llama.feed_forward_length"),
])
def test_heads_that_cannot_be(tmp_path, vocab, meta, words):
    refused(tiny(tmp_path, vocab, meta), words)


@pytest.mark.parametrize("key, value, words", [
    ("general.alignment", "32", "metadata general.alignment is text ('32'); it must be a whole "
                                "number"),
    ("llama.embedding_length", "16", "metadata llama.embedding_length is text ('16')"),
    ("llama.block_count", 2.0, "metadata llama.block_count is the number 2.0; it must be a "
                               "whole number"),
    ("llama.attention.head_count", True, "metadata llama.attention.head_count is true"),
    ("llama.context_length", [256], "metadata llama.context_length is a list of 1"),
    ("llama.rope.freq_base", "10000", "metadata llama.rope.freq_base is text ('10000'); it "
                                      "must be a number"),
    ("tokenizer.ggml.eos_token_id", 10 ** 6, "tokenizer.ggml.eos_token_id is 1000000; the "
                                             "vocabulary has 49152 tokens"),
])
def test_metadata_of_the_wrong_type(tmp_path, vocab, key, value, words):
    refused(tiny(tmp_path, vocab, {key: value}), words)


def swap(path, old: bytes, new: bytes) -> None:
    """Replace the first `old` in the file's header with `new` (as long): a file the writer
    itself would not write."""
    data = path.read_bytes()
    assert len(old) == len(new) and old in data
    path.write_bytes(data.replace(old, new, 1))


def test_duplicate_metadata_keys_and_tensor_names(tmp_path, vocab):
    path = tiny(tmp_path, vocab, {"general.name": "tiny", "general.namf": "twice"})
    swap(path, b"general.namf", b"general.name")
    refused(path, "the metadata key general.name appears twice")
    tensors = tensors_of()
    tensors["blk.0.ffn_uq.weight"] = tensors["blk.0.ffn_up.weight"]
    path = tiny(tmp_path, vocab, tensors=tensors, name="twice.gguf")
    swap(path, b"blk.0.ffn_uq.weight", b"blk.0.ffn_up.weight")
    refused(path, "the tensor name blk.0.ffn_up.weight appears twice")


def test_a_big_endian_file_is_said_to_be_one(tmp_path, vocab):
    message = refused(tiny(tmp_path, vocab, endian=gguf.GGUFEndian.BIG), "big-endian")
    assert "version 3" in message and "50331648" not in message


def test_a_tensor_of_another_shape_is_refused_before_it_is_read(tmp_path, vocab, monkeypatch):
    """A width that disagrees with its matrices: named before a value is dequantized (a file
    claiming a huge width must not allocate gigabytes first)."""
    from decodelab.pretrained import gguf as reader

    made = []
    monkeypatch.setattr(reader, "dequantize", lambda *a, **k: made.append(a) or 1 / 0)
    tensors = tensors_of()
    tensors["blk.1.ffn_down.weight"] = tensors["blk.1.ffn_down.weight"][:, :8].copy()
    refused(tiny(tmp_path, vocab, tensors=tensors),
            "tensor blk.1.ffn_down.weight has shape (16, 8); the metadata implies (16, 32)")
    refused(tiny(tmp_path, vocab, {"llama.embedding_length": 2 ** 20,
                                   "llama.feed_forward_length": 2 ** 22}, name="huge.gguf"),
            "tensor token_embd.weight has shape (49152, 16); the metadata implies (49152, "
            "1048576)")
    assert made == []


@pytest.mark.parametrize("meta, tensors, words", [
    ({"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": 4.0}, None,
     "rope scaling (llama.rope.scaling.type = 'linear')"),
    ({"llama.rope.scaling.factor": 8.0}, None, "rope scaling (llama.rope.scaling.factor = 8.0)"),
    ({}, {"rope_freqs.weight": np.ones(2, np.float32)}, "rope_freqs.weight"),
    ({"llama.expert_count": 8}, None, "a mixture of experts (llama.expert_count = 8)"),
    ({"tokenizer.ggml.pre": "llama-bpe"}, None, "the file's pre-tokenizer is 'llama-bpe'"),
    ({"llama.rope.dimension_count": 2}, None, "the file rotates 2 of each head's 4 channels"),
])
def test_what_decodelab_does_not_implement_is_refused_by_name(tmp_path, vocab, meta, tensors,
                                                              words):
    refused(tiny(tmp_path, vocab, meta, tensors={**tensors_of(), **(tensors or {})}), words)


def test_rope_scaling_of_none_is_no_scaling(tmp_path, vocab):
    pretrained.load(tiny(tmp_path, vocab, {"llama.rope.scaling.type": "none"}))


def test_the_command_line_says_it_in_one_line(tmp_path, vocab):
    path = tiny(tmp_path, vocab, {"llama.attention.head_count": 3})
    out = subprocess.run([sys.executable, "-m", "decodelab", "chat", "--gguf", str(path),
                          "--message", "Hi", "--greedy"], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "py")})
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "--gguf: GGUF: llama.attention.head_count is 3, which does not divide" in out.stderr
    ok = subprocess.run([sys.executable, "-m", "decodelab", "generate", "--gguf",
                         str(tiny(tmp_path, vocab, name="fine.gguf")), "--prompt", "Hi",
                         "--max-new-tokens", "2", "--seed", "1", "--json"],
                        capture_output=True, text=True, cwd=ROOT,
                        env={**os.environ, "PYTHONPATH": str(ROOT / "py")})
    assert ok.returncode == 0, ok.stderr
    assert len(json.loads(ok.stdout)["steps"]) == 2


def test_a_file_of_ones_own_runs_under_its_own_name(tmp_path, vocab):
    """Its trace names the model by the name its metadata gives (or its file's), not as
    SmolLM2, and says no dataset or tokenizer of the workbench's: they played no part."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "py")}
    for meta, name in (({"general.name": "Tiny Llama"}, "Tiny Llama"), (None, "mine.gguf")):
        path = tiny(tmp_path, vocab, meta, name="mine.gguf")
        out = subprocess.run([sys.executable, "-m", "decodelab", "generate", "--gguf", str(path),
                              "--prompt", "Hi", "--max-new-tokens", "2", "--seed", "1", "--json"],
                             capture_output=True, text=True, cwd=ROOT, env=env)
        assert out.returncode == 0, out.stderr
        settings = json.loads(out.stdout)["settings"]
        assert settings["model"] == name
        assert "dataset" not in settings and "tokenizer" not in settings
