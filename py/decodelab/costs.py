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

`Uncached` wraps a transformer so that the generation loop recomputes the whole window at every
step (the same logits up to rounding, so the same tokens): the benchmark's "cache off".

Left out: the cost of weights and activations, paged or quantised caches, any GPU model.
"""

import time

import numpy as np

from decodelab.fields import FieldError, read
from decodelab.kvcache import kv_cache_bytes
from decodelab.tokenizer import EOS
from decodelab.transformer import window_start

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
)
PRESET_IDS = tuple(p["id"] for p in PRESETS) + ("tiny",)

MEMORY_FIELDS = ("layers", "heads", "kv_heads", "head_dim", "bytes_per_element", "tokens",
                 "sequences")


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
    per query head (MHA), so the GQA/MQA saving shows as a number.
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
    return {**out, "inputs": values, "mha_bytes_per_token": mha["bytes_per_token"],
            "mha_total_bytes": mha["total_bytes"],
            "saving": values["heads"] // values["kv_heads"], "preset": preset}


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
    window = [EOS] + [1 + (7 * i) % (V - 1) for i in range(T - 1)]  # T tokens, no EOS inside
    session = model.session(dtype=dtype)
    session.prefill(window[1:])
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


# ---------------------------------------------------------------------------------------------
# Generation without a cache


class UncachedSession:
    """inference.Session's interface without a cache: every call runs the whole window
    through the full forward. Same context-shift rule, so the same windows and logits."""

    def __init__(self, model, dtype=np.float64):
        self.model, self.dtype = model, np.dtype(dtype)
        self.tokens, self.shifts, self.shifted = [], 0, False

    @property
    def length(self) -> int:
        return len(self.tokens)

    def prefill(self, ids) -> np.ndarray:
        tokens = [EOS] + [int(i) for i in ids]
        start = window_start(len(tokens), self.model.context_size)
        self.shifted, self.tokens = start > 0, tokens[start:]
        return self.model.full_logits(self.tokens, self.dtype)

    def decode(self, token_id: int) -> np.ndarray:
        T = self.model.context_size
        self.shifted = len(self.tokens) == T
        if self.shifted:  # full: keep the newest tokens, as the cached session does
            self.shifts += 1
            self.tokens = self.tokens[window_start(T + 1, T):]
        self.tokens.append(int(token_id))
        return self.model.full_logits(self.tokens, self.dtype)


    def append(self, ids) -> np.ndarray:
        T = self.model.context_size
        tokens = self.tokens + [int(i) for i in ids]
        start = window_start(len(tokens), T)
        self.shifted = start > 0
        self.shifts += start > 0
        self.tokens = tokens[start:]
        return self.model.full_logits(self.tokens, self.dtype)


class Uncached:
    """A transformer seen through the shared model interface, minus its cache."""

    kind = "transformer-uncached"

    def __init__(self, model):
        self.model = model
        self.tokenizer, self.context_size = model.tokenizer, model.context_size

    def session(self, dtype=np.float64) -> UncachedSession:
        return UncachedSession(self.model, dtype)


def time_generation(model, settings) -> dict:
    """Run one generation (step records included) and time it: the whole run, and the decode
    steps alone (every step after the first, which also carries the prefill)."""
    from decodelab.generate import Generation

    run = Generation(model, settings)
    began = time.perf_counter()
    first = None
    contexts = []
    for record in run:
        if first is None:
            first = time.perf_counter()
        contexts.append(len(run.prompt_ids) + len(run.output_ids))
    ended = time.perf_counter()
    n = len(run.records)
    decode_seconds = ended - first if first is not None else 0.0
    return {"steps": n, "seconds": ended - began, "steps_per_second": n / (ended - began),
            "first_step_ms": (first - began) * 1e3 if first is not None else None,
            "decode_steps_per_second": (n - 1) / decode_seconds if n > 1 else None,
            "context_from": min(contexts, default=0), "context_to": max(contexts, default=0),
            "text": run.text}


def time_resume(model, context_ids, appended_ids, repeats: int = 15) -> dict:
    """Resuming after a tool result: the appended tokens fed after a cache that holds the
    context (session.append) against a full recomputation of the same text without one (a
    fresh session's prefill of all of it). Medians over `repeats`, in ms; both give the same
    logits (the largest difference is reported)."""
    base = model.session()
    base.prefill(context_ids)
    resume, full, diff = [], [], 0.0
    for _ in range(repeats):
        s = base.fork()
        t0 = time.perf_counter()
        a = s.append(appended_ids)
        t1 = time.perf_counter()
        fresh = model.session()
        b = fresh.prefill(list(context_ids) + list(appended_ids))
        t2 = time.perf_counter()
        resume.append(t1 - t0)
        full.append(t2 - t1)
        diff = max(diff, float(np.abs(a - b).max()))
    r, f = sorted(resume)[len(resume) // 2] * 1e3, sorted(full)[len(full) // 2] * 1e3
    return {"context": len(context_ids) + 1, "appended": len(appended_ids), "resume_ms": r,
            "full_ms": f, "speedup": f / r, "max_abs_diff": diff}


def time_prefix_sharing(model, settings, samples: int) -> dict:
    """`samples` runs of one prompt (seeds seed, seed + 1, ...): each with its own prefill,
    and all from one shared prefill (generate.Prefix). Seconds for each way, and whether every
    run's trace came out the same both ways."""
    import dataclasses

    from decodelab.generate import Generation, Prefix

    runs = [dataclasses.replace(settings, seed=settings.seed + j) for j in range(samples)]
    t0 = time.perf_counter()
    own = [Generation(model, s).run().trace() for s in runs]
    t1 = time.perf_counter()
    first = Generation(model, runs[0])  # the prompt's ids, as a run makes them
    prefix = Prefix(model, first.prompt_ids)
    shared = [Generation(model, s, prefix=prefix).run().trace() for s in runs]
    t2 = time.perf_counter()
    return {"samples": samples, "own_prefill_s": t1 - t0, "shared_prefill_s": t2 - t1,
            "saving": 1 - (t2 - t1) / (t1 - t0), "same": own == shared,
            "prompt_tokens": len(first.prompt_ids)}


def time_json_mode(model, settings, repeats: int = 15) -> dict:
    """What JSON mode adds to a step. One run with JSON mode on; then, over the states and
    logits of its steps, the grammar's own work timed apart: the mask of each state with fresh
    tables (`cold`, the first run of a page) and with the tables kept (`warm`, every later
    run), and the rules applied with the mask against without it. Each of these is the fastest
    of `repeats` passes over all the steps (a browser's clock is coarse; the fastest pass is
    the one least disturbed). Also the whole run, with fresh tables and once more, per step.
    All in ms."""
    import dataclasses

    from decodelab import grammar, sampling
    from decodelab.generate import Generation
    from decodelab.pipeline import Replay

    on = dataclasses.replace(settings, json_mode=True, cache_check=False)
    model.tokenizer.__dict__.pop("_json_masks", None)  # the first run builds its tables
    t0 = time.perf_counter()
    run = Generation(model, on).run()
    t1 = time.perf_counter()
    Generation(model, on).run()
    t2 = time.perf_counter()
    n = len(run.records)
    replay = Replay(run)
    logits = [replay.logits_at(k) for k in range(n)]
    states, rules = run.json_states, on.rules

    def fastest(work) -> float:
        best = float("inf")
        for _ in range(repeats):
            began = time.perf_counter()
            work()
            best = min(best, time.perf_counter() - began)
        return best * 1e3 / n

    def cold():
        fresh = grammar.JsonMask(model.tokenizer, on.json_max_depth)
        for s in states:
            fresh.allowed(s)

    kept = grammar.JsonMask(model.tokenizer, on.json_max_depth)
    masks = [kept.allowed(s) for s in states]
    mask_cold = fastest(cold)
    mask_warm = fastest(lambda: [kept.allowed(s) for s in states])
    masked = fastest(lambda: [sampling.decide(z, rules, allowed=m, mask_kind="json")
                              for z, m in zip(logits, masks)])
    plain = fastest(lambda: [sampling.decide(z, rules) for z in logits])
    per = lambda seconds: seconds * 1e3 / n  # noqa: E731
    return {"steps": n, "vocab_size": model.tokenizer.vocab_size, "states": len(kept._masks),
            "status": run.json_report()["status"],
            "run_cold_ms_per_step": per(t1 - t0), "run_warm_ms_per_step": per(t2 - t1),
            "mask_cold_ms_per_step": mask_cold, "mask_warm_ms_per_step": mask_warm,
            "rules_ms_per_step": plain, "masked_rules_ms_per_step": masked,
            "overhead_cold_ms_per_step": mask_cold + masked - plain,
            "overhead_warm_ms_per_step": mask_warm + masked - plain}
