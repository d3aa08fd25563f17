"""The benchmark: boot phases in headless Chromium, and decode throughput in the browser and
natively, measured in one run so the ratios mean something on a noisy machine.

    python3 build.py bench [--quick] [--json PATH]

What it measures (all timings are medians over repeats):
  - cold boot: a new browser profile, nothing cached; per phase as the worker reports it
    (runtime, numpy, decodelab, assets) and the page's own navigation-to-ready time;
  - warm boot: a reload in the same profile, once the first start has kept its snapshot of
    Python's memory, its bytecode and the installed packages (web/runtime/kept.js) and the service
    worker has saved the site
    (the files come from there); later: the reload after that (by then the browser keeps the
    runtime's compiled WebAssembly too), and offline: one more with the site's server gone;
  - bigram steps per second with full step records, inside Python in the browser and natively
    (the same `bench` endpoint both times), and their ratio;
  - the page end to end: Generate to "done" for a long run, streaming and rendering included;
  - the transformer (cache check off, full step records): decode steps per second at 97 to 127
    tokens of context, and 256 new tokens with the KV cache and without it (every step
    recomputing the whole window), and with the live cache check: behind the text, as the page
    runs it, and at every step as it is made (a full recomputation per step), in the browser and
    natively (the `bench_generation` endpoint).
  - a course page with four widgets (two in --quick) against one with a single widget: memory
    (PSS of every browser process), CPU time and time until all are ready, with the widgets sharing one Python
    and with a Python each (tests/manywidgets.py);
  - the page's weight in bytes, raw and as sent by a host serving the build's gzipped copies; the main thread while the page
    streams long runs (long tasks over 50 ms and the longest frame, in wall-clock time; the
    longest task in CPU time and in wall-clock time, from a Chromium trace); Stop in a long run
    (wall clock to "ready", and the CPU time of the page's work meanwhile); the boot's
    integrity phase (hashing the runtime list and the JavaScript files before Pyodide loads).
It judges nothing: it prints a table. Tests assert no speed; the page's two promises (Stop
within 200 ms, no main-thread task over 100 ms while text streams) are held there in CPU time
(what the page's code spends, not the time other processes take from it), and reported here in
wall-clock time as well.

Natively numpy runs with one BLAS thread (OPENBLAS_NUM_THREADS=1), as the browser has one: the
comparison is like for like, and on a busy 2-core machine more threads make these small
matrices slower, not faster.
"""

import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy is imported anywhere

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "py")]

from tests.e2e.conftest import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    open_page,
    serve,
    wait_kept,
    wait_ready,
)
from tests.e2e.tasktime import PRESS_STOP, PageTrace  # noqa: E402

RUNS = {
    "bigram names, T=1": {"dataset": "names", "seed": 1, "ignore_eos": True},
    "bigram prose, T=0.8 top-k 20 top-p 0.9": {"dataset": "prose", "seed": 1, "ignore_eos": True,
                                               "temperature": 0.8, "top_k": 20, "top_p": 0.9},
}


def long_prompt(chars: int = 95) -> str:
    """A fixed prose prompt: the first corpus line with enough characters, cut to `chars`."""
    for line in (ROOT / "artifacts" / "data" / "prose.txt").read_text(encoding="utf-8").splitlines():
        if len(line) >= chars:
            return line[:chars]
    raise SystemExit("no prose line long enough for the transformer benchmark")


def transformer_runs(quick: bool) -> dict:
    """name -> (request for the bench_generation endpoint, the rate to report, how many runs).

    The short runs are repeated more: at 97 to 127 tokens a run lasts about 15 ms, so a single
    busy moment of the machine moves one run's rate a lot, and the median of several does not."""
    base = {"model": "transformer", "dataset": "prose", "seed": 1, "ignore_eos": True,
            "cache_check": False}
    n = 64 if quick else 256
    few, many = (1, 3) if quick else (3, 9)
    return {
        "decode at context 97-127, cache on": (
            {"settings": {**base, "prompt": long_prompt(), "max_new_tokens": 32}, "cache": True},
            "decode_steps_per_second", many),
        f"{n} new tokens, cache on": (
            {"settings": {**base, "max_new_tokens": n}, "cache": True}, "steps_per_second", many),
        f"{n} new tokens, cache off (recompute)": (
            {"settings": {**base, "max_new_tokens": n}, "cache": False}, "steps_per_second", few),
        f"{n} new tokens, cache on + live check behind the text": (
            {"settings": {**base, "max_new_tokens": n, "cache_check": True}, "cache": True},
            "steps_per_second", many),
        f"{n} new tokens, cache on + live check at every step": (
            {"settings": {**base, "max_new_tokens": n, "cache_check": True}, "cache": True,
             "check_every": 1}, "steps_per_second", few),
        f"BPE tokens: {n} new tokens, cache on": (
            {"settings": {**base, "tokenizer": "bpe", "max_new_tokens": n}, "cache": True},
            "steps_per_second", many),
    }


def tokenize_request() -> dict:
    """10 KB of the prose's validation text (text the tokenizer did not learn from), for the
    bench_tokenize endpoint."""
    from decodelab.core.tokens.corpus import Corpus, read_corpus

    corpus = Corpus("prose", read_corpus(ROOT / "artifacts" / "data" / "prose.txt"))
    text = "\n".join(corpus.val)
    return {"dataset": "prose", "text": text.encode("utf-8")[:10_000].decode("utf-8", "ignore")}


def tokenize_times(call, repeats: int) -> dict:
    runs = [call(tokenize_request()) for _ in range(repeats)]
    return {"bytes": runs[0]["bytes"], "tokens": runs[0]["tokens"],
            "cold_ms": statistics.median(r["cold_ms"] for r in runs),
            "warm_ms": statistics.median(r["warm_ms"] for r in runs)}


def native_transformer(runs: dict) -> dict:
    from tests.conftest import api

    api("setup", {"assets": str(ROOT / "artifacts")})
    return {name: statistics.median(api("bench_generation", req)[key]
                                    for _ in range(times))
            for name, (req, key, times) in runs.items()}


def browser_transformer(page, runs: dict) -> dict:
    return {name: statistics.median(page.evaluate("r => window.decodelab.kv.bench(r)", req)[key]
                                    for _ in range(times))
            for name, (req, key, times) in runs.items()}


def native_rates(steps: int, repeats: int) -> dict:
    from tests.conftest import api

    api("setup", {"assets": str(ROOT / "artifacts")})
    out = {}
    for name, settings in RUNS.items():
        s = {**settings, "max_new_tokens": steps}
        out[name] = statistics.median(api("bench", s)["steps_per_second"]
                                      for _ in range(repeats))
    return out


def browser_rates(page, steps: int, repeats: int) -> dict:
    out = {}
    for name, settings in RUNS.items():
        s = {**settings, "max_new_tokens": steps}
        out[name] = statistics.median(page.evaluate("s => window.decodelab.bench(s)", s)
                                      ["steps_per_second"] for _ in range(repeats))
    return out


def boot(page) -> dict:
    """A start's timings, once the worker's warm-up run after ready has ended too."""
    wait_ready(page)
    page.wait_for_function("() => window.decodelab.timings.warmup_ms !== undefined", timeout=60_000)
    timings = page.evaluate("() => window.decodelab.timings")
    timings["warmup_after_ready_ms"] = timings.pop("warmup_ms")
    return timings


def boots(browser, repeats: int) -> tuple:
    """The page's start four ways, in a new browser profile each time: cold (nothing saved), warm
    (a reload, with the site saved by its service worker), later (the reload after that: the
    browser has kept the compiled WebAssembly of the saved runtime by then) and offline (one
    more reload, with the site's server gone). Returns the four lists of boot timings."""
    cold, warm, later, offline = [], [], [], []
    for _ in range(repeats):
        server, url = serve(ROOT / "static")
        page = open_page(browser, url, service_workers="allow")
        cold.append(boot(page))
        page.wait_for_function("() => ['saved', 'update', 'failed']"
                               ".includes(window.decodelab.offline.state)", timeout=120_000)
        wait_kept(page)
        for kept in (warm, later):
            page.reload()
            kept.append(boot(page))
        server.shutdown()
        server.server_close()
        page.reload()
        offline.append(boot(page))
        page.context.close()
    return cold, warm, later, offline


def page_run_seconds(page, steps: int) -> float:
    """Generate through the page (worker batches, postMessage, rendering) until done."""
    settings = {"dataset": "names", "seed": 1, "ignore_eos": True, "max_new_tokens": steps}
    t0 = time.perf_counter()
    page.evaluate("s => window.decodelab.generate(s)", settings)
    page.wait_for_selector("html[data-state=ready]")
    return time.perf_counter() - t0


def median_of(dicts, key):
    return statistics.median(d[key] for d in dicts if d and key in d)


def measure(quick: bool = False) -> dict:
    from playwright.sync_api import sync_playwright

    repeats, steps = (1, 500) if quick else (3, 5000)
    server, url = serve(ROOT / "static")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            cold, warm, later, offline = boots(browser, repeats)
            page = open_page(browser, url)
            boot(page)
            browser_rate = browser_rates(page, steps, repeats)
            t_runs = transformer_runs(quick)
            browser_t = browser_transformer(page, t_runs)
            browser_tok = tokenize_times(
                lambda req: page.evaluate("r => window.decodelab.benchTokenize(r)", req), repeats)
            tools_req = {"questions": 4 if quick else 24}  # 24: the page's default size
            browser_tools = page.evaluate("r => window.decodelab.benchTools(r)", tools_req)
            browser_json = page.evaluate("r => window.decodelab.benchJson(r)", {})
            spec_req = {"gammas": [2, 4], "temperatures": [0, 1], "tokens": 24, "seeds": 1} \
                if quick else {}
            browser_spec = page.evaluate("r => window.decodelab.benchSpeculative(r)", spec_req)
            paged_req = {"requests": 8 if quick else 24}
            browser_paged = page.evaluate("r => window.decodelab.benchPaged(r)", paged_req)
            page_seconds = page_run_seconds(page, steps)
            responsiveness = main_thread_during_runs(page, steps)
            page.context.close()
            browser.close()
    finally:
        server.shutdown()
    from tests import manywidgets

    widgets = manywidgets.measure(2 if quick else 4)
    native_rate = native_rates(steps, repeats)
    native_t = native_transformer(t_runs)
    from tests.conftest import api

    native_tok = tokenize_times(lambda req: api("bench_tokenize", req), repeats)
    native_tools = api("bench_tools", tools_req)
    native_json = api("bench_json", {})
    native_spec = api("bench_speculative", spec_req)
    native_paged = api("bench_paged", paged_req)
    phases = ("integrity_ms", "runtime_ms", "numpy_ms", "decodelab_ms", "assets_ms", "total_ms", "page_ready_ms",
              "warmup_after_ready_ms")
    return {
        "main_thread": responsiveness, "page_weight": page_weight(ROOT / "static"), "widgets": widgets,
        "quick": quick, "repeats": repeats, "steps": steps,
        "boot_cold_ms": {k: median_of(cold, k) for k in phases},
        "boot_warm_ms": {k: median_of(warm, k) for k in phases},
        "boot_later_ms": {k: median_of(later, k) for k in phases},
        "boot_offline_ms": {k: median_of(offline, k) for k in phases},
        # what each start used or made (web/runtime/kept.js): "restored/kept/kept" on a return
        "boot_kept": {kind: [f"{t.get('snapshot')}/{t.get('bytecode')}/{t.get('installed')}" for t in starts]
                      for kind, starts in (("cold", cold), ("warm", warm), ("later", later),
                                           ("offline", offline))},
        "steps_per_second": {name: {"browser": browser_rate[name], "native": native_rate[name],
                                    "native_over_browser": native_rate[name] / browser_rate[name]}
                             for name in RUNS},
        "page_end_to_end": {"steps": steps, "seconds": page_seconds,
                            "steps_per_second": steps / page_seconds},
        "bpe_encode_10kb": {"browser": browser_tok, "native": native_tok},
        "tools": {"browser": browser_tools, "native": native_tools},
        "json_mode": {"browser": browser_json, "native": native_json},
        "speculative": {"browser": browser_spec, "native": native_spec},
        "paged": {"browser": browser_paged, "native": native_paged},
        "transformer_tokens_per_second": {
            name: {"browser": browser_t[name], "native": native_t[name],
                   "native_over_browser": native_t[name] / browser_t[name],
                   "runs": t_runs[name][2]} for name in t_runs},
    }


def table(r: dict) -> str:
    lines = [f"decodelab benchmark ({'quick' if r['quick'] else 'full'}: median of {r['repeats']},"
             f" {r['steps']} steps per run)", "",
             "| boot phase (ms) | cold | warm | later | offline |", "| --- | ---: | ---: | ---: | ---: |"]
    starts = [r[f"boot_{kind}_ms"] for kind in ("cold", "warm", "later", "offline")]
    for k in r["boot_cold_ms"]:
        lines.append(f"| {k[:-3]} | " + " | ".join(f"{s[k]:.0f}" for s in starts) + " |")
    lines.append("| against cold (page ready) | | " + " | ".join(
        f"{s['page_ready_ms'] / starts[0]['page_ready_ms']:.0%}" for s in starts[1:]) + " |")
    lines += ["", "Snapshot/bytecode/installed packages per start: " + "; ".join(
        f"{kind} {', '.join(states)}" for kind, states in r["boot_kept"].items())]
    lines += ["", "| run (steps/s, full step records) | browser | native | native / browser |",
              "| --- | ---: | ---: | ---: |"]
    for name, v in r["steps_per_second"].items():
        lines.append(f"| {name} | {v['browser']:,.0f} | {v['native']:,.0f} | "
                     f"{v['native_over_browser']:.1f}x |")
    e = r["page_end_to_end"]
    lines += ["", f"Page end to end (worker batches, messages, rendering): {e['steps']} steps in "
                  f"{e['seconds']:.2f} s = {e['steps_per_second']:,.0f} steps/s"]
    t = r["transformer_tokens_per_second"]
    lines += ["", "| transformer prose (tokens/s, full step records) | browser | native | "
                  "native / browser | runs |", "| --- | ---: | ---: | ---: | ---: |"]
    for name, v in t.items():
        lines.append(f"| {name} | {v['browser']:,.0f} | {v['native']:,.0f} | "
                     f"{v['native_over_browser']:.1f}x | {v['runs']} |")
    on = next(v for k, v in t.items() if k.endswith("new tokens, cache on"))
    off = next(v for k, v in t.items() if k.endswith("cache off (recompute)"))
    lines += ["", f"Cache on / cache off: {on['browser'] / off['browser']:.1f}x in the browser, "
                  f"{on['native'] / off['native']:.1f}x natively."]
    b = r["bpe_encode_10kb"]
    lines += ["", f"BPE encoding of a {b['browser']['bytes']:,}-byte prompt "
                  f"({b['browser']['tokens']:,} tokens), ms: browser {b['browser']['cold_ms']:.1f} "
                  f"cold, {b['browser']['warm_ms']:.1f} warm; native {b['native']['cold_ms']:.1f} "
                  f"cold, {b['native']['warm_ms']:.1f} warm."]
    lines += tool_lines(r["tools"])
    lines += json_lines(r["json_mode"])
    lines += speculative_lines(r["speculative"])
    lines += paged_lines(r["paged"])
    lines += hardening_lines(r)
    from tests import manywidgets

    lines += manywidgets.lines(r["widgets"])
    return "\n".join(lines)


def tool_lines(t: dict) -> list:
    """Resuming after a tool result, a shared prefill, and the accuracy experiment's pace."""
    b, n = t["browser"], t["native"]
    lines = ["", "| tool calls | browser | native |", "| --- | ---: | ---: |"]
    for key, what in (("resume_tasks", "tasks model"), ("resume_100", "prose BPE model")):
        rb, rn = b[key], n[key]
        lines.append(f"| resume: {rb['appended']} appended tokens after {rb['context']} of "
                     f"context ({what}), ms | {rb['resume_ms']:.2f} | {rn['resume_ms']:.2f} |")
        lines.append(f"| full recomputation of the same {rb['context'] + rb['appended']} tokens, "
                     f"ms | {rb['full_ms']:.2f} | {rn['full_ms']:.2f} |")
        lines.append(f"| resume is faster by | {rb['speedup']:.1f}x | {rn['speedup']:.1f}x |")
    pb, pn = b["prefix"], n["prefix"]
    lines.append(f"| {pb['samples']} samples of one question, own prefill each, s | "
                 f"{pb['own_prefill_s']:.3f} | {pn['own_prefill_s']:.3f} |")
    lines.append(f"| the same from one shared prefill, s (traces identical: "
                 f"{pb['same'] and pn['same']}) | {pb['shared_prefill_s']:.3f} | "
                 f"{pn['shared_prefill_s']:.3f} |")
    eb, en = b["experiment"], n["experiment"]
    lines.append(f"| accuracy experiment, default size ({eb['runs']} runs), s | "
                 f"{eb['seconds']:.1f} | {en['seconds']:.1f} |")
    lines.append(f"| questions (runs) per second | {eb['runs_per_second']:.1f} | "
                 f"{en['runs_per_second']:.1f} |")
    return lines


def speculative_lines(sp: dict) -> list:
    """Speculative decoding (the names bigram drafting for the names transformer) against the
    transformer alone, in one run: acceptance, tokens per target pass, and the speed-up."""
    lines = ["", "| speculative decoding | acceptance | tokens per target pass | speed-up, "
             "browser | speed-up, native |", "| --- | ---: | ---: | ---: | ---: |"]
    for b, n in zip(sp["browser"]["rows"], sp["native"]["rows"]):
        t = "greedy" if b["temperature"] == 0 else f"T = {b['temperature']:g}"
        lines.append(f"| {t}, gamma {b['gamma']} | {n['acceptance_rate']:.2f} | "
                     f"{n['tokens_per_target_pass']:.2f} | {b['speed_up']:.2f}x | "
                     f"{n['speed_up']:.2f}x |")
    return lines


def paged_lines(p: dict) -> list:
    """A workload served from the paged cache: continuous against static batching, in one run."""
    b, n = p["browser"], p["native"]
    lines = ["", f"| serving {b['requests']} requests ({b['dataset']}, blocks of "
                 f"{b['block_size']}) | steps | browser, ms | native, ms | browser, tokens/s "
                 f"| native, tokens/s |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name in ("continuous", "static"):
        lines.append(f"| {name} batching | {n[name]['steps']} | {b[name]['seconds'] * 1e3:,.0f} "
                     f"| {n[name]['seconds'] * 1e3:,.0f} | {b[name]['tokens_per_second']:,.0f} "
                     f"| {n[name]['tokens_per_second']:,.0f} |")
    ratio = lambda r: r["continuous"]["seconds"] / r["static"]["seconds"]  # noqa: E731
    lines += ["", f"Continuous batching took {n['continuous']['steps'] / n['static']['steps']:.2f} "
                  f"of static batching's steps, and {ratio(b):.2f} of its wall time in the "
                  f"browser, {ratio(n):.2f} natively (medians of 5, each step's decodes in one "
                  f"call)."]
    return lines


def json_lines(j: dict) -> list:
    """What JSON mode's grammar mask adds to a step, first run (tables built) and later runs."""
    lines = ["", "| JSON mode, ms per step | browser | native |", "| --- | ---: | ---: |"]
    for name, b in j["browser"].items():
        if name == "ok":
            continue
        n = j["native"][name]
        lines.append(f"| {name} ({b['steps']} steps, {b['states']} parser states): whole step "
                     f"| {b['run_warm_ms_per_step']:.2f} | {n['run_warm_ms_per_step']:.2f} |")
        lines.append(f"| its mask and masked rules, first run (tables built) | "
                     f"{b['overhead_cold_ms_per_step']:.3f} | {n['overhead_cold_ms_per_step']:.3f} |")
        lines.append(f"| the same, later runs (tables kept) | {b['overhead_warm_ms_per_step']:.3f} "
                     f"| {n['overhead_warm_ms_per_step']:.3f} |")
    return lines


# --- the page's weight and its main thread while it streams (hardening) -----------------------

def page_weight(root: Path) -> dict:
    """Bytes of the built site by part (the Python runtime and wheels in pyodide/, the lesson
    data in assets/, the page): raw, and as served compressed by a host that sends the build's
    gzip copies (name.gz), or its brotli copies (name.br), where there is one and the file
    itself otherwise."""
    parts = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name.endswith((".gz", ".br")):
            continue
        top = path.relative_to(root).parts[0]
        part = top if (root / top).is_dir() else "page"
        size = path.stat().st_size
        sent = []
        for suffix in (".gz", ".br"):
            copy = path.with_name(path.name + suffix)
            sent.append(copy.stat().st_size if copy.exists() else size)
        raw, gz, br = parts.get(part, (0, 0, 0))
        parts[part] = (raw + size, gz + sent[0], br + sent[1])
    total = tuple(sum(v[i] for v in parts.values()) for i in range(3))
    return {**{k: {"raw": r, "gzip": g, "brotli": b} for k, (r, g, b) in parts.items()},
            "total": {"raw": total[0], "gzip": total[1], "brotli": total[2]}}


def main_thread_during_runs(page, steps: int) -> dict:
    """The page's main thread while it streams two runs of `steps` bigram tokens and one of
    steps / 4 transformer tokens: every task from a Chromium trace, the longest in CPU time
    (what the tests hold under 100 ms) and in wall-clock time; the long tasks (over 50 ms of
    wall clock, PerformanceObserver) and the longest animation frame, as the page sees them.
    Then Stop pressed in a long bigram run: the wall-clock time to "ready", and the CPU time
    the page and its worker spent meanwhile (what the tests hold under 200 ms)."""
    page.evaluate("""() => {
        window.__bench = {long: [], frames: []};
        new PerformanceObserver(l => window.__bench.long.push(...l.getEntries().map(e => e.duration)))
            .observe({type: 'longtask'});
        new PerformanceObserver(l => window.__bench.frames.push(...l.getEntries().map(e => e.duration)))
            .observe({type: 'long-animation-frame'});
    }""")
    runs = [{"seed": 2, "max_new_tokens": steps}, {"seed": 3, "max_new_tokens": steps},
            {"model": "transformer", "seed": 4, "max_new_tokens": max(steps // 4, 50),
             "cache_check": False}]
    with PageTrace(page) as trace:
        page.evaluate("() => performance.mark('bench:runs')")
        for settings in runs:
            page.evaluate("s => window.decodelab.generate(s)", {"ignore_eos": True, **settings})
            page.wait_for_selector("html[data-state=ready]")
        page.evaluate("() => performance.mark('bench:runs-end')")
    tasks = trace.tasks(trace.main, *trace.span("bench:runs", "bench:runs-end"))
    seen = page.evaluate("() => window.__bench")
    stop = stop_latency(page)
    return {"tokens": 2 * steps + runs[2]["max_new_tokens"], "long_tasks": len(seen["long"]),
            "longest_task_ms": max(seen["long"], default=0),
            "longest_frame_ms": max(seen["frames"], default=0),
            "tasks": len(tasks), "longest_task_cpu_ms": max(t.cpu_ms for t in tasks),
            "longest_task_wall_ms": max(t.wall_ms for t in tasks), **stop}


def stop_latency(page) -> dict:
    """Stop pressed once a long bigram run shows 50 steps: milliseconds of wall clock from the
    click to "ready", and of CPU in the tasks of the page and its worker in that span."""
    with PageTrace(page) as trace:
        page.evaluate("s => { window.decodelab.generate(s); }",
                      {"seed": 5, "max_new_tokens": 10000, "ignore_eos": True})
        page.wait_for_function("() => document.querySelectorAll('#text-gen [data-step]').length > 50")
        wall = page.evaluate(PRESS_STOP)
    page.wait_for_selector("html[data-state=ready]")
    tasks = trace.page_tasks(*trace.span("stop:click", "stop:ready"))
    return {"stop_wall_ms": wall, "stop_cpu_ms": sum(t.cpu_ms for t in tasks)}


def hardening_lines(r: dict) -> list:
    w = r["page_weight"]
    lines = ["", "| page weight (MB) | raw | gzip | brotli |", "| --- | ---: | ---: | ---: |"]
    for part in sorted(k for k in w if k != "total") + ["total"]:
        lines.append(f"| {part} | {w[part]['raw'] / 1e6:.2f} | {w[part]['gzip'] / 1e6:.2f} | "
                     f"{w[part]['brotli'] / 1e6:.2f} |")
    m = r["main_thread"]
    lines += ["", f"Main thread while streaming {m['tokens']:,} tokens: {m['long_tasks']} long tasks"
                  f" (over 50 ms of wall clock), the longest {m['longest_task_ms']:.0f} ms; the "
                  f"longest frame {m['longest_frame_ms']:.0f} ms. Of its {m['tasks']:,} tasks in the "
                  f"trace, the longest in CPU time took {m['longest_task_cpu_ms']:.1f} ms, the "
                  f"longest in wall-clock time {m['longest_task_wall_ms']:.0f} ms.",
              "", f"Stop pressed in a long run: ready {m['stop_wall_ms']:.0f} ms after the click "
                  f"(wall clock), with {m['stop_cpu_ms']:.1f} ms of CPU time in the page and its "
                  "worker."]
    return lines


def main(args) -> int:
    quick = "--quick" in args
    result = measure(quick)
    print(table(result))
    if "--json" in args:
        Path(args[args.index("--json") + 1]).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
