"""The two engines a real model runs on: one setting, `engine`.

    reference   the weights dequantized to float32 once, at load, and every product in
                float32: the same maths as transformers (tests/test_smollm2.py holds it there)
    quantized   the weights kept as the file stores them (Q4_1 blocks in SmolLM2's blocks, its
                Q8_0 embedding and tied head) and multiplied as llama.cpp multiplies them: the
                activations quantized to 8 bits a block at a time, integer dot products, the
                keys, values and queries of attention held as float16 (llama.cpp's default
                cache type). What every engine a learner meets next does; a quarter of the
                memory, and its own numbers (tests/test_quantized.py holds them to llama.cpp).

Where llama.cpp's CPU path rounds, and whether decodelab follows (docs/pretrained.md has the
table): each matrix product's activations (Q8_1 for Q4_1 weights, Q8_0 for Q8_0 weights:
followed, by ggml's reference quantizer); the cache (K and V written as float16: followed);
attention's query and weights (float16 for their products with the float16 cache: followed);
RMSNorm's sum of squares (float64 in ggml, float32 here) and the order of float sums inside a
dot product (ggml's SIMD lanes; here a fixed order, the same for any number of positions): not
followed, rounding alone, which an 8-bit model turns into logit differences of about 0.35.
"""

import numpy as np

from decodelab.core.kernels.matrices import KINDS, QuantizedMatrix
from decodelab.pretrained.gguf import GGUF, GGUFError

ENGINES = ("reference", "quantized")
LABELS = {"reference": "Reference (float32, as transformers)",
          "quantized": "Quantized (as llama.cpp)"}
# each in a phrase, as a sentence names the arithmetic a model runs on
PHRASES = {"reference": "the reference engine (float32, as transformers computes)",
           "quantized": "the quantized engine (llama.cpp\u2019s arithmetic: the file\u2019s 4- and "
                        "8-bit blocks, 8-bit activations)"}
# what each costs and gives, in the page's words (measured in the page, headless Chromium:
# the worker's WebAssembly heap after a load and a 40-token run, 258 MiB against 642, and 24
# steps a second against 15 on one machine; docs/pretrained.md)
WORDS = {"reference": "The file\u2019s weights turned into float32 once, as transformers reads "
                      "them: its numbers are transformers\u2019 own. About 0.6 GiB of memory.",
         "quantized": "The file\u2019s 4- and 8-bit blocks kept as they are and multiplied as "
                      "llama.cpp multiplies them: numbers of its own, in about 0.25 GiB of "
                      "memory, and about 1.5 times as fast."}


def default(compiled: bool) -> str:
    """The engine a page starts SmolLM2 on: llama.cpp's arithmetic where the kernels run it
    (what engines a learner meets next do), the reference where only numpy would (many times
    slower). The command line's default stays the reference (`--engine`)."""
    return "quantized" if compiled else "reference"


def about() -> dict:
    """The engines as the page offers them: {"choices": [{"id", "label", "words"}], "default",
    "kernels": where the quantized products run, in a sentence, "compiled"}."""
    from decodelab.core.kernels import kernels

    kern = kernels()
    return {"choices": [{"id": e, "label": LABELS[e], "words": WORDS[e]} for e in ENGINES],
            "default": default(kern.compiled), "kernels": kern.sentence,
            "compiled": kern.compiled}


def check(engine) -> str:
    """An engine asked for by name, or a FieldError naming the choices."""
    from decodelab.errors import FieldError

    if engine not in ENGINES:
        raise FieldError("engine", f"Engine: {engine!r} is not an engine; choose "
                                   f"{' or '.join(ENGINES)}.")
    return engine


def unpermute_rows(raw: np.ndarray, n_head: int) -> np.ndarray:
    """A tensor's rows of stored bytes (rows, bytes) from llama.cpp's order back to
    transformers' (`model.unpermute`, which does it to values): a row is a row, values or
    blocks."""
    rows, cols = raw.shape
    D = rows // n_head
    return raw.reshape(n_head, D // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def _rows(gguf: GGUF, name: str) -> tuple:
    info = gguf.tensor_info(name)
    rows, k = info.shape
    return info.type, gguf.raw(name).reshape(rows, -1), rows, k


def fused(gguf: GGUF, parts: list) -> QuantizedMatrix:
    """Tensors (name, heads to unpermute or None) stacked row-wise into one quantized matrix
    (q|k|v, gate|up), which must all be of one block type the kernels take."""
    got = [(_rows(gguf, name), heads) for name, heads in parts]  # (check_types: one kind)
    kinds = {kind for (kind, *_), _ in got}
    raws = [unpermute_rows(raw, heads) if heads else raw for (_, raw, _, _), heads in got]
    k = got[0][0][3]
    return QuantizedMatrix(kinds.pop(), np.concatenate(raws), sum(r.shape[0] for r in raws), k)


def single(gguf: GGUF, name: str) -> QuantizedMatrix:
    return fused(gguf, [(name, None)])


def groups(cfg, i: int) -> list:
    """Block i's matrices as the quantized engine holds them: lists of tensors stacked into one
    (q|k|v, gate|up) or alone."""
    b = f"blk.{i}."
    return [[b + "attn_q.weight", b + "attn_k.weight", b + "attn_v.weight"],
            [b + "attn_output.weight"], [b + "ffn_gate.weight", b + "ffn_up.weight"],
            [b + "ffn_down.weight"]]


def check_types(gguf: GGUF, cfg) -> None:
    """Every matrix of the file of a block type the kernels multiply, stacked ones of one type,
    rows by eights, heads by sixteens of channels: checked before a tensor is read, so a file the engine cannot run is
    refused in one sentence and nothing is allocated."""
    names = [g for i in range(cfg.n_layer) for g in groups(cfg, i)]
    names.append(["token_embd.weight"] + (["output.weight"] if "output.weight" in gguf.tensors
                                          else []))
    for group in names:
        kinds = [gguf.tensor_info(name).type for name in group]
        for name, kind in zip(group, kinds):
            if kind not in KINDS:
                raise GGUFError(f"tensor {name} is stored as {kind}; the quantized engine "
                                f"multiplies {' and '.join(KINDS)} blocks (the reference "
                                "engine runs this file)")
            if gguf.tensor_info(name).shape[0] % 8:
                raise GGUFError(f"tensor {name} has {gguf.tensor_info(name).shape[0]} rows; "
                                "the quantized engine takes them 8 at a time (the reference "
                                "engine runs this file)")
        if len(group) > 1 and len(set(kinds)) > 1 and group[0] != "token_embd.weight":
            raise GGUFError(f"tensors {', '.join(group)} are stored as {', '.join(kinds)}; the "
                            "quantized engine multiplies them as one matrix of one type (the "
                            "reference engine runs this file)")
    if cfg.head_dim % 16:  # (the kernels' attention takes a head's channels 16 at a time)
        raise GGUFError(f"each head is {cfg.head_dim} channels wide; the quantized engine's "
                        "attention takes them 16 at a time (the reference engine runs this "
                        "file)")


def block_params(gguf: GGUF, cfg, i: int) -> dict:
    """Block i's parameters for the quantized engine: its matrices as the file's blocks (in
    decodelab's fused layout), its norms' gains as float32."""
    b = f"blk.{i}."
    return {f"h{i}.g_attn": gguf.array(b + "attn_norm.weight"),
            f"h{i}.w_qkv": fused(gguf, [(b + "attn_q.weight", cfg.n_head),
                                        (b + "attn_k.weight", cfg.n_kv_head),
                                        (b + "attn_v.weight", None)]),
            f"h{i}.w_o": single(gguf, b + "attn_output.weight"),
            f"h{i}.g_mlp": gguf.array(b + "ffn_norm.weight"),
            f"h{i}.w_fc": fused(gguf, [(b + "ffn_gate.weight", None),
                                       (b + "ffn_up.weight", None)]),
            f"h{i}.w_proj": single(gguf, b + "ffn_down.weight")}


def head_params(gguf: GGUF, cfg) -> dict:
    """The embedding (looked up a row at a time), the final norm, the head (the embedding's
    own blocks when tied, as SmolLM2's)."""
    wte = single(gguf, "token_embd.weight")
    head = single(gguf, "output.weight") if "output.weight" in gguf.tensors else wte
    return {"wte": wte, "g_f": gguf.array("output_norm.weight"), "w_head": head}
