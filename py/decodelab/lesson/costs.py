"""What decoding with a KV cache costs: memory for real model shapes, and measured time and K/V
bytes per step against context length, with the cache and without it.

Memory. Per token a cache holds K and V for every layer and KV head:
    2 x layers x kv_heads x head_dim x bytes_per_element        (kvcache.kv_cache_bytes)
Multi-head attention (MHA) has one KV head per query head; grouped-query attention (GQA) lets a
group of query heads share one, multi-query attention (MQA) has a single one. Fewer KV heads,
smaller cache: the saving is heads / kv_heads. PRESETS holds published model shapes.

Time. A cached decode step computes one new position and then reads the keys and values of
every earlier position; without a cache the step recomputes every position of the window.
So the cache turns per-step work from "the whole window" into "one position", yet the bytes a
step reads still grow with the context. `step_costs` measures both on the live model.

Left out: the cost of weights and activations, paged or quantised caches, any GPU model.
"""

import time

import numpy as np

from decodelab.core.models.kvcache import blocks_for, kv_cache_bytes
from decodelab.errors import FieldError
from decodelab.fields import PRETRAINED, read

# Published shapes (layers, query heads, KV heads, head dim), with 2-byte (16-bit) elements.
PRESETS = (
    {"id": "seed", "label": "Worked example: 32 layers, 8 KV heads, head dim 128",
     "kind": "GQA", "layers": 32, "heads": 32, "kv_heads": 8, "head_dim": 128,
     "bytes_per_element": 2,
     "note": "The shape of Llama 3 8B and Mistral 7B: 32 query heads share 8 KV heads."},
    {"id": "llama2-7b", "label": "Llama 2 7B (MHA)", "kind": "MHA", "layers": 32, "heads": 32,
     "kv_heads": 32, "head_dim": 128, "bytes_per_element": 2,
     "note": "Multi-head attention: every one of the 32 query heads keeps its own keys and values."},
    {"id": "llama2-70b", "label": "Llama 2 70B (GQA)", "kind": "GQA", "layers": 80, "heads": 64,
     "kv_heads": 8, "head_dim": 128, "bytes_per_element": 2,
     "note": "Grouped-query attention: 64 query heads share 8 KV heads, an 8x smaller cache."},
    {"id": "falcon-7b", "label": "Falcon 7B (MQA)", "kind": "MQA", "layers": 32, "heads": 71,
     "kv_heads": 1, "head_dim": 64, "bytes_per_element": 2,
     "note": "Multi-query attention: all 71 query heads read one shared KV head."},
    {"id": "gpt2", "label": "GPT-2 small (MHA)", "kind": "MHA", "layers": 12, "heads": 12,
     "kv_heads": 12, "head_dim": 64, "bytes_per_element": 2,
     "note": "The 124M-parameter GPT-2: 12 layers of 12 heads of 64 dimensions."},
    {"id": "smollm2", "label": "SmolLM2-135M (GQA)", "kind": "GQA", "layers": 30, "heads": 9,
     "model": PRETRAINED[0],  # the shape of the page's real model: a run of it is drawn live
     "kv_heads": 3, "head_dim": 64, "bytes_per_element": 4,
     "note": "The real model decodelab reads from its GGUF file (the command line's --model "
             "smollm2): 9 query heads share 3 KV heads. Its cache here is float32, 4 bytes a "
             "number; llama.cpp keeps 16-bit numbers by default (choose them below)."},
)
PRESET_IDS = tuple(p["id"] for p in PRESETS) + ("tiny",)

# The numbers a cache can hold and what each takes: float32 (the reference engine's, and this
# page's trained models' float64 beside it), 16-bit floats (llama.cpp's default cache type,
# transformers' in half precision), and llama.cpp's quantized cache types (--cache-type-k and
# -v), blocks of 32 numbers with a float16 scale, and for q4_1 a float16 offset too: 34, 18 and
# 20 bytes a block (ggml's block_q8_0, block_q4_0, block_q4_1).
CACHE_TYPES = (
    {"id": "f64", "label": "float64", "bytes": 8,
     "note": "8 bytes a number: what this page's small transformers decode in."},
    {"id": "f32", "label": "float32", "bytes": 4,
     "note": "4 bytes a number: the reference engine's cache, as transformers keeps it in "
             "float32."},
    {"id": "f16", "label": "16-bit (float16 or bfloat16)", "bytes": 2,
     "note": "2 bytes a number: llama.cpp's default cache type, and a half-precision model's."},
    {"id": "q8_0", "label": "q8_0: 8-bit blocks", "bytes": 34 / 32,
     "note": "llama.cpp's q8_0 cache: 32 numbers as 8-bit integers with one float16 scale, "
             "34 bytes a block, 1.0625 a number."},
    {"id": "q4_1", "label": "q4_1: 4-bit blocks with an offset", "bytes": 20 / 32,
     "note": "llama.cpp's q4_1 cache: 32 numbers in 4 bits with a float16 scale and offset, "
             "20 bytes a block, 0.625 a number."},
    {"id": "q4_0", "label": "q4_0: 4-bit blocks", "bytes": 18 / 32,
     "note": "llama.cpp's q4_0 cache: 32 numbers in 4 bits with a float16 scale, 18 bytes a "
             "block, 0.5625 a number."},
)


def cache_type_of(bytes_per_element: float):
    """The cache type whose numbers take these bytes, or None."""
    return next((t for t in CACHE_TYPES if t["bytes"] == float(bytes_per_element)), None)


def number_words(bytes_per_element: float) -> str:
    """A cache element's type in words: the table sets 16-bit shapes beside float32 ones."""
    found = cache_type_of(bytes_per_element)
    return found["label"] if found else f"{float(bytes_per_element):g} bytes"


MEMORY_FIELDS = ("layers", "heads", "kv_heads", "head_dim", "bytes_per_element", "tokens",
                 "sequences", "block_size")


def tiny_preset(model, dtype=np.float64) -> dict:
    """The page's own transformer as a preset: its real shape and the dtype it decodes in."""
    cfg = model.cfg
    kind = "MHA" if cfg.n_kv_head == cfg.n_head else "MQA" if cfg.n_kv_head == 1 else "GQA"
    return {"id": "tiny", "label": f"This page's tiny transformer ({kind})", "kind": kind,
            "layers": cfg.n_layer, "heads": cfg.n_head, "kv_heads": cfg.n_kv_head,
            "head_dim": cfg.head_dim, "bytes_per_element": np.dtype(dtype).itemsize,
            "tokens": cfg.context_size,
            "note": f"{cfg.n_head} query heads share {cfg.n_kv_head} KV heads; the page decodes "
                    f"in {np.dtype(dtype).name}, {np.dtype(dtype).itemsize} bytes per number, "
                    f"and preallocates room for {cfg.context_size} tokens."}


def memory(request: dict, tiny: dict | None = None) -> dict:
    """The kv-memory calculation for a preset and/or explicit fields (explicit ones win).

    Returns bytes per token and in total, and what the same shape would need with one KV head
    per query head (MHA), so the GQA/MQA saving shows as a number; and a paged cache's whole
    blocks of `block_size` per sequence, their bytes and the share of them left empty.
    """
    presets = {p["id"]: p for p in PRESETS}
    if tiny is not None:
        presets["tiny"] = tiny
    preset = read(request, ["preset"], {"preset": {"choices": tuple(presets)}})["preset"]
    base = presets.get(preset, {})
    values = read({**{k: base[k] for k in MEMORY_FIELDS if k in base}, **request}, MEMORY_FIELDS)
    if values["heads"] % values["kv_heads"]:
        raise FieldError("kv_heads", f"KV heads must divide the query heads ({values['heads']}) "
                                     f"evenly; got {values['kv_heads']}.")
    out = kv_cache_bytes(values["layers"], values["kv_heads"], values["head_dim"],
                         values["bytes_per_element"], values["tokens"], values["sequences"])
    mha = kv_cache_bytes(values["layers"], values["heads"], values["head_dim"],
                         values["bytes_per_element"], values["tokens"], values["sequences"])
    # in a paged cache, each sequence holds whole blocks: its last one may be partly empty
    b = values["block_size"]
    blocks = blocks_for(values["tokens"], b)
    paged = kv_cache_bytes(values["layers"], values["kv_heads"], values["head_dim"],
                           values["bytes_per_element"], blocks * b, values["sequences"])
    return {**out, "inputs": values, "mha_bytes_per_token": mha["bytes_per_token"],
            "mha_total_bytes": mha["total_bytes"],
            "saving": values["heads"] // values["kv_heads"], "preset": preset,
            "blocks_per_sequence": blocks, "paged_total_bytes": paged["total_bytes"],
            "paged_waste": 1 - values["tokens"] / (blocks * b)}


# ---------------------------------------------------------------------------------------------
# Time and bytes per decode step


def step_costs(model, lengths, repeats: int = 7, dtype=np.float64) -> dict:
    """Milliseconds per decode step at each context length, with the cache (one new position,
    reading the stored history) and without it (the whole window recomputed), and the K/V bytes
    a cached step reads. Medians of `repeats`.

    The cache is filled once with the longest window; each measurement rewinds it to n - 1
    positions and decodes the n-th, so nothing but the step itself is timed.
    """
    T = model.context_size
    lengths = sorted({min(max(int(n), 2), T) for n in lengths})
    V = model.tokenizer.vocab_size
    start = list(model.tokenizer.start_ids)  # then T tokens in all, none of them id 0
    window = start + [1 + (7 * i) % (V - 1) for i in range(T - len(start))]
    session = model.session(dtype=dtype)
    session.prefill(window[len(start):])
    per_position = session.cache.bytes_allocated // T  # K and V, every layer and KV head
    rows = []
    for n in lengths:
        cached = []
        for _ in range(repeats):
            session.rewind(n - 1)
            began = time.perf_counter()
            session.decode(window[n - 1])
            cached.append(time.perf_counter() - began)
        uncached = []
        for _ in range(max(3, repeats // 2)):
            began = time.perf_counter()
            model.full_logits(window[:n], dtype)
            uncached.append(time.perf_counter() - began)
        c, u = float(np.median(cached)) * 1e3, float(np.median(uncached)) * 1e3
        rows.append({"context": n, "cached_ms": c, "uncached_ms": u, "speedup": u / c,
                     "kv_bytes_read": n * per_position, "positions_computed_cached": 1,
                     "positions_computed_uncached": n})
    return {"rows": rows, "bytes_per_position": per_position, "context_size": T,
            "dtype": np.dtype(dtype).name, "repeats": repeats}
