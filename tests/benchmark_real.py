"""The real model's benchmark rows, natively and in the page in one run, next to a tiny
transformer trained here measured in the same run (ratios are what a noisy machine can tell):

    python3 build.py bench --real      (or python3 tests/benchmark_real.py [--json PATH]
                                        [--native-only])

  - load: natively, reading SmolLM2's GGUF, dequantizing it to float32 and laying the weights
    out, and the process's resident memory after it (and at its peak); in the page, from the
    click on Load to the model ready: a first visit (download, sha256, reading) and a return
    visit (the copy kept in the browser), and the return visit's click to the first token;
  - prefill: one pass over prompts of 50 and 200 tokens, in tokens per second;
  - decode: tokens per second with 50 and 200 tokens of context (the cache's length), float32,
    one BLAS thread as in the browser, next to the prose BPE transformer's at the same lengths
    (its window is 128, so its longer row is at 120);
  - the page's WebAssembly memory once the model has run;
  - the quantized engine natively (load, weights, prefill, decode), beside llama.cpp's own
    one-thread decode and prefill on the same file (measured in the same run where
    llama-cpp-python is installed, else the figure recorded with tests/fixtures/).
Prefill and decode are `decodelab.entry.webapi.bench.real_rates`, the same function natively and
in the page (its endpoint bench_real).
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

# 200, not more: a prefill of 500 tokens takes ~20 s in the page, one call the worker must
# answer within its heartbeat's 30 s
CONTEXTS, PREFILLS, STEPS, REPEATS = [50, 200], [50, 200], 20, 3
LONG_PROMPT_TOKENS = 2000  # a prompt near the window, read in slices in the page


def rss_mb(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(repeats: int = REPEATS) -> dict:
    from decodelab.core.library import Library
    from decodelab.entry.webapi.bench import decode_rate, filler, real_rates
    from decodelab.pretrained import files, model as pretrained

    library = Library(ROOT / "artifacts")
    before = rss_mb()
    began = time.perf_counter()
    smol = pretrained.load(files.find_smollm2())
    load_s = time.perf_counter() - began
    after = rss_mb()
    library.keep_pretrained(smol)
    tiny = library.model("transformer", "prose", "bpe")
    text = "\n".join(library.corpus("prose").train[:400])
    cfg = smol.cfg
    out = {"load_s": load_s, "rss_mb": after, "rss_added_mb": after - before,
           "params": smol.n_params, "window": cfg.context_size,
           "kv_bytes_per_token": 2 * cfg.n_layer * cfg.n_kv_head * cfg.head_dim * 4,
           **real_rates(library, CONTEXTS, PREFILLS, STEPS, repeats),
           "tiny_decode": {str(c): decode_rate(tiny, filler(tiny, text, c + STEPS), c, STEPS,
                                               repeats) for c in (50, 120)},
           "tiny_params": tiny.n_params}
    out["peak_rss_mb"] = rss_mb("VmHWM")
    out["long_prompt"] = smol.tokenizer.decode(filler(smol, text, LONG_PROMPT_TOKENS))
    out["quantized"] = quantized_rows(repeats)
    return out


def quantized_rows(repeats: int) -> dict:
    """The quantized engine natively (the file's blocks through the C kernels), and llama.cpp
    on the same file with one thread in the same run where llama-cpp-python is installed (else
    the figure recorded with the fixture, said)."""
    from decodelab.core.kernels import kernels
    from decodelab.core.library import Library
    from decodelab.entry.webapi.bench import real_rates
    from decodelab.pretrained import files, model as pretrained

    library = Library(ROOT / "artifacts", engine="quantized")
    began = time.perf_counter()
    model = pretrained.load(files.find_smollm2(), engine="quantized")
    out = {"load_s": time.perf_counter() - began, "kernels": kernels().sentence,
           "weights_mib": model.weight_bytes / 2**20}
    library.keep_pretrained(model)
    out.update(real_rates(library, CONTEXTS, PREFILLS, STEPS, repeats))
    fixture = json.loads((ROOT / "tests/fixtures/llamacpp_smollm2.json").read_text())
    try:
        import llama_cpp
        import numpy as np

        sys.path.insert(0, str(ROOT / "tools"))
        from llamacpp_fixture import timing

        llm = llama_cpp.Llama(str(files.find_smollm2()), n_ctx=512, n_threads=1,
                              n_threads_batch=1, logits_all=True, verbose=False)
        out["llama_cpp"] = {**timing(llm, fixture["chats"][0]["prompt_ids"], np),
                            "measured": "in this run"}
    except ImportError:
        out["llama_cpp"] = {**fixture["speed"], "measured": "recorded with the fixture "
                            "(llama-cpp-python is not installed here)"}
    return out


def in_the_page(long_prompt: str, repeats: int = REPEATS) -> dict:
    """The page's rows, in headless Chromium on the built site (static/), started cold;
    long_prompt: about LONG_PROMPT_TOKENS tokens of prose, for the prompt read in slices."""
    from playwright.sync_api import sync_playwright

    from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, STATIC, serve, wait_ready

    server, url = serve(STATIC)
    out = {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(service_workers="block")

            def load(page):
                page.goto(url)
                wait_ready(page)
                page.get_by_label("Model", exact=True).select_option("smollm2")
                began = time.perf_counter()
                page.evaluate("() => window.decodelab.pretrained.load()")
                seconds = time.perf_counter() - began
                if not page.evaluate("() => window.decodelab.pretrained.loaded"):
                    raise RuntimeError(page.locator("#pretrained-status").inner_text())
                return seconds, began

            first = context.new_page()
            out["first_load_s"], _ = load(first)  # (a load is awaited whole by the hook)
            first.close()
            page = context.new_page()  # the return visit: the kept copy
            out["return_load_s"], clicked = load(page)
            page.get_by_role("button", name="Generate", exact=True).click()
            page.wait_for_function("() => window.decodelab.steps().length > 0", timeout=120_000)
            out["return_first_token_s"] = time.perf_counter() - clicked  # Load, then Generate
            page.wait_for_selector("html[data-state=ready]", timeout=120_000)
            def row(kind, n):  # one call per measurement: a call holds the worker
                rates = []
                for _ in range(repeats):
                    got = page.evaluate("r => window.decodelab.benchReal(r)", {
                        "contexts": [n] if kind == "decode" else [],
                        "prefills": [n] if kind == "prefill" else [],
                        "steps": [STEPS], "repeats": [1]})
                    if not got.get("ok"):
                        raise RuntimeError(got)
                    rates.append(got[kind][str(n)])
                return statistics.median(rates)

            # the worker's longest job (one slice of long work: what holds its heartbeat up)
            # while the real model works for a long time
            page.evaluate("() => window.decodelab.longestJob(true)")
            began = time.perf_counter()
            got = page.evaluate("r => window.decodelab.callEndpoint('beam', r)", {
                "settings": {"model": "smollm2", "prompt": "The capital of France is",
                             "seed": 1, "max_new_tokens": 16}, "beam": {"num_beams": 3}})
            if not got.get("ok"):
                raise RuntimeError(got)
            out["beam_s"] = time.perf_counter() - began
            out["beam_longest"] = page.evaluate("() => window.decodelab.longestJob(true)")
            # a chat message of about LONG_PROMPT_TOKENS tokens (the workbench's prompt takes
            # 2,000 characters at most; a message has no cap)
            page.get_by_label("Max new tokens", exact=True).fill("1")
            page.get_by_label("Your message", exact=True).fill(long_prompt)
            page.evaluate("() => window.decodelab.settled()")
            page.wait_for_selector("html[data-state=ready]", timeout=600_000)
            page.evaluate("() => window.decodelab.longestJob(true)")
            began = time.perf_counter()
            page.evaluate("() => window.decodelab.pretrained.send()")  # (the turn, awaited)
            out["long_prompt_s"] = time.perf_counter() - began
            out["long_prompt_tokens"] = page.evaluate(
                "() => window.decodelab.pretrained.lastTurn.prompt_tokens")
            out["long_prompt_line"] = page.locator("#run-meta").inner_text()
            out["long_prompt_longest"] = page.evaluate("() => window.decodelab.longestJob(true)")
            def rows():
                info = page.evaluate("() => window.decodelab.pretrained.info")
                return {"engine": info["engine"], "weight_mib": info["weight_bytes"] / 2**20,
                        "prefill": {str(n): row("prefill", n) for n in PREFILLS},
                        "decode": {str(c): row("decode", c) for c in CONTEXTS},
                        "wasm_mb": page.evaluate("() => window.decodelab.memory()")["wasm_bytes"] / 1e6}

            out.update(rows())  # the page's default engine
            # and the other, read again from the kept copy in the same page (WebAssembly's
            # memory never shrinks: its figure is the larger of the two)
            other = "reference" if out["engine"] == "quantized" else "quantized"
            page.locator(f"#pretrained-engines input[value={other}]").check()
            page.wait_for_function("""e => { const p = window.decodelab.pretrained;
                return !p.loading && p.info && p.info.engine === e; }""", arg=other,
                                   timeout=300_000)
            out["other"] = rows()
            browser.close()
    finally:
        server.shutdown()
    return out


def table(r: dict, page: dict | None) -> str:
    d, t = r["decode"], r["tiny_decode"]
    lines = [
        f"SmolLM2-135M-Instruct ({r['params'] / 1e6:.1f}M parameters, float32, window {r['window']}), natively, one thread",
        f"  load (read, dequantize, lay out)   {r['load_s']:.2f} s, resident {r['rss_mb']:.0f} MB "
        f"(+{r['rss_added_mb']:.0f} MB; peak {r['peak_rss_mb']:.0f} MB)",
        f"  KV cache                           {r['kv_bytes_per_token']:,} bytes per token "
        f"({r['kv_bytes_per_token'] * r['window'] / 2**20:.0f} MB for the window)",
        f"  prefill                            {r['prefill']['50']:.0f} tokens/s at 50 tokens, "
        f"{r['prefill']['200']:.0f} at 200",
        f"  decode                             {d['50']:.1f} tokens/s at context 50, {d['200']:.1f} at 200",
        f"  prose BPE transformer ({r['tiny_params'] / 1e3:.0f}k)      {t['50']:.0f} tokens/s at context 50, "
        f"{t['120']:.0f} at 120: {t['50'] / d['50']:.0f}x SmolLM2's rate at 50",
    ]
    q, lc = r["quantized"], r["quantized"]["llama_cpp"]
    lines += [
        "The quantized engine (the file's Q4_1/Q8_0 blocks, llama.cpp's arithmetic), natively, one thread",
        f"  load                               {q['load_s']:.2f} s, weights {q['weights_mib']:.0f} MiB; {q['kernels']}",
        f"  prefill                            {q['prefill']['50']:.0f} tokens/s at 50 tokens, "
        f"{q['prefill']['200']:.0f} at 200",
        f"  decode                             {q['decode']['50']:.1f} tokens/s at context 50 "
        f"({q['decode']['50'] / d['50']:.1f}x the float32 engine's), {q['decode']['200']:.1f} at 200",
        f"  llama.cpp, one thread ({lc['measured']})   decode {lc['decode_tokens_per_s']:.1f} "
        f"tokens/s after {lc['decode_after']} tokens, prefill {lc['prefill_tokens_per_s']:.0f}: "
        f"the quantized engine's decode at context 50 is {q['decode']['50'] / lc['decode_tokens_per_s']:.2f}x",
    ]
    if page:
        pd, pp = page["decode"], page["prefill"]
        lines += [
            "In the page (Pyodide in headless Chromium, the same run)",
            f"  load, first visit                  {page['first_load_s']:.1f} s from the click "
            "(download, sha256, reading)",
            f"  load, return visit                 {page['return_load_s']:.1f} s (the kept copy); "
            f"{page['return_first_token_s']:.1f} s from the click to the first token",
            f"  prefill                            {pp['50']:.0f} tokens/s at 50 tokens, "
            f"{pp['200']:.0f} at 200 ({r['prefill']['50'] / pp['50']:.1f}x and "
            f"{r['prefill']['200'] / pp['200']:.1f}x slower than natively)",
            f"  decode                             {pd['50']:.1f} tokens/s at context 50, "
            f"{pd['200']:.1f} at 200 ({d['50'] / pd['50']:.2f}x and {d['200'] / pd['200']:.2f}x "
            "natively's time)",
            f"  engine                             {page['engine']} (the page's default), weights "
            f"{page['weight_mib']:.0f} MiB; WebAssembly memory {page['wasm_mb']:.0f} MB after these runs",
            f"  3 beams x 16 tokens, with check    {page['beam_s']:.1f} s; the worker's longest "
            f"job {page['beam_longest']['ms']} ms ({page['beam_longest']['what']})",
            f"  a message of {page['long_prompt_tokens']:,} tokens, 1 token  {page['long_prompt_s']:.1f} s "
            f"(\"{page['long_prompt_line']}\"); the longest job "
            f"{page['long_prompt_longest']['ms']} ms ({page['long_prompt_longest']['what']})",
        ]
        o = page["other"]
        lines += [
            f"  the {o['engine']} engine, same page   prefill {o['prefill']['50']:.0f} tokens/s at 50 "
            f"tokens, {o['prefill']['200']:.0f} at 200; decode {o['decode']['50']:.1f} tokens/s at "
            f"context 50, {o['decode']['200']:.1f} at 200 (the default's: "
            f"{pd['50'] / o['decode']['50']:.2f}x); weights {o['weight_mib']:.0f} MiB; "
            f"WebAssembly memory {o['wasm_mb']:.0f} MB after both",
        ]
    return "\n".join(lines)


def main(args) -> int:
    result = measure()
    long_prompt = result.pop("long_prompt")
    page = None if "--native-only" in args else in_the_page(long_prompt)
    print(table(result, page))
    if "--json" in args:
        Path(args[args.index("--json") + 1]).write_text(
            json.dumps({"native": result, "page": page}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
