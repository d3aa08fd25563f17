"""The real model's benchmark rows, natively, next to a tiny transformer trained here measured in
the same run (ratios are what a noisy machine can tell):

    python3 build.py bench --real      (or python3 tests/benchmark_real.py [--json PATH])

  - load: reading SmolLM2's GGUF, dequantizing it to float32 and laying the weights out, and the
    process's resident memory after it (and at its peak);
  - prefill: one pass over prompts of 50 and 500 tokens, in tokens per second;
  - decode: tokens per second with 50 and 500 tokens of context (the cache's length), float32,
    one BLAS thread as in the browser, next to the prose BPE transformer's at the same lengths
    (its window is 128, so its longer row is at 120).
"""

import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as benchmark.py: one thread, like the page

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "py")]

import numpy as np  # noqa: E402


def rss_mb(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def filler(model, n: int) -> list:
    """n ordinary tokens of text (a real paragraph repeated), no special token."""
    text = (ROOT / "artifacts" / "data" / "prose.txt").read_text()[:20_000]
    ids = [i for i in model.tokenizer.encode(text) if not model.tokenizer.is_special(i)]
    return (ids * (n // max(len(ids), 1) + 1))[:n]


def decode_rate(model, context: int, steps: int, repeats: int) -> float:
    """Tokens per second of decode steps taken with `context` tokens in the cache."""
    ids = filler(model, context + steps)
    rates = []
    for _ in range(repeats):
        session = model.session(dtype=np.float32)
        session.prefill(ids[:context])
        began = time.perf_counter()
        for t in ids[context:context + steps]:
            session.decode(t)
        rates.append(steps / (time.perf_counter() - began))
    return statistics.median(rates)


def prefill_rate(model, n: int, repeats: int) -> float:
    ids = filler(model, n)
    times = []
    for _ in range(repeats):
        session = model.session(dtype=np.float32)
        began = time.perf_counter()
        session.prefill(ids)
        times.append(time.perf_counter() - began)
    return n / statistics.median(times)


def measure(repeats: int = 3) -> dict:
    from decodelab.core.library import Library
    from decodelab.pretrained import files, model as pretrained

    before = rss_mb()
    began = time.perf_counter()
    smol = pretrained.load(files.find_smollm2())
    load_s = time.perf_counter() - began
    after = rss_mb()
    tiny = Library(ROOT / "artifacts").model("transformer", "prose", "bpe")
    cfg = smol.cfg
    out = {"load_s": load_s, "rss_mb": after, "rss_added_mb": after - before,
           "params": smol.n_params, "window": cfg.context_size,
           "kv_bytes_per_token": 2 * cfg.n_layer * cfg.n_kv_head * cfg.head_dim * 4,
           "prefill": {n: prefill_rate(smol, n, repeats) for n in (50, 500)},
           "decode": {c: decode_rate(smol, c, 20, repeats) for c in (50, 500)},
           "tiny_decode": {c: decode_rate(tiny, c, 20, repeats) for c in (50, 120)},
           "tiny_params": tiny.n_params}
    out["peak_rss_mb"] = rss_mb("VmHWM")
    return out


def table(r: dict) -> str:
    d, t = r["decode"], r["tiny_decode"]
    lines = [
        f"SmolLM2-135M-Instruct ({r['params'] / 1e6:.1f}M parameters, float32, window {r['window']}), natively, one thread",
        f"  load (read, dequantize, lay out)   {r['load_s']:.2f} s, resident {r['rss_mb']:.0f} MB "
        f"(+{r['rss_added_mb']:.0f} MB; peak {r['peak_rss_mb']:.0f} MB)",
        f"  KV cache                           {r['kv_bytes_per_token']:,} bytes per token "
        f"({r['kv_bytes_per_token'] * r['window'] / 2**20:.0f} MB for the window)",
        f"  prefill                            {r['prefill'][50]:.0f} tokens/s at 50 tokens, "
        f"{r['prefill'][500]:.0f} at 500",
        f"  decode                             {d[50]:.1f} tokens/s at context 50, {d[500]:.1f} at 500",
        f"  prose BPE transformer ({r['tiny_params'] / 1e3:.0f}k)      {t[50]:.0f} tokens/s at context 50, "
        f"{t[120]:.0f} at 120: {t[50] / d[50]:.0f}x SmolLM2's rate at 50",
    ]
    return "\n".join(lines)


def main(args) -> int:
    result = measure()
    print(table(result))
    if "--json" in args:
        Path(args[args.index("--json") + 1]).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
