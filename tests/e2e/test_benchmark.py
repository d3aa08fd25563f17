"""The benchmark itself still works: its quick mode runs end to end and prints every row.

It judges no timing (these machines are noisy); it checks that each measurement is there and
is a sensible number, so a change that breaks the benchmark is caught here, not at release."""

from concurrent.futures import ThreadPoolExecutor

from tests import benchmark


def test_quick_benchmark_prints_every_row(site_root):
    # its own Playwright, in a thread of its own: the session's browser is already running here
    with ThreadPoolExecutor(1) as pool:
        result = pool.submit(benchmark.measure, True).result()
    text = benchmark.table(result)
    rows = ["| integrity |", "| runtime |", "| numpy |", "| decodelab |", "| assets |",
            "| total |", "| page_ready |", "| warmup_after_ready |", "Page end to end", "Cache on / cache off",
            "| page weight (MB) | raw | gzip |", "| pyodide |", "| page |", "Main thread while streaming",
            "the longest in CPU time", "Stop pressed in a long run",
            "| speculative decoding |", "| greedy, gamma 2 |", "| T = 1, gamma 4 |",
            "| continuous batching |", "| static batching |"]
    rows += [f"| {name} |" for name in benchmark.RUNS]
    rows += [f"| {name} |" for name in result["transformer_tokens_per_second"]]
    for row in rows:
        assert row in text, (row, text)
    assert result["quick"] and result["repeats"] == 1
    assert "| against cold (page ready) |" in text
    for phases in (result["boot_cold_ms"], result["boot_warm_ms"], result["boot_later_ms"],
                   result["boot_offline_ms"]):
        assert all(v > 0 for k, v in phases.items() if k != "integrity_ms"), phases
    # the starts are what their names say: the first makes the copies, the returns use them
    assert result["boot_kept"] == {"cold": ["made/none/none"], "warm": ["restored/kept/kept"],
                                   "later": ["restored/kept/kept"], "offline": ["restored/kept/kept"]}
    assert "Snapshot/bytecode/installed packages per start: cold made/none/none; warm restored/kept/kept" in text
    for v in list(result["steps_per_second"].values()) + list(result["transformer_tokens_per_second"].values()):
        assert v["browser"] > 0 and v["native"] > 0
    assert "BPE encoding of a" in text
    for side in ("browser", "native"):
        enc = result["bpe_encode_10kb"][side]
        assert 9_000 < enc["bytes"] <= 10_000 and 0 < enc["tokens"] < enc["bytes"]
        assert enc["cold_ms"] > 0 and enc["warm_ms"] > 0
    assert "| resume is faster by |" in text and "questions (runs) per second" in text
    assert "| JSON mode, ms per step | browser | native |" in text
    for side in ("browser", "native"):
        for name, row in result["json_mode"][side].items():
            if name != "ok":
                assert row["steps"] > 0 and row["states"] > 0 and row["mask_cold_ms_per_step"] >= 0
    for side in ("browser", "native"):
        tools = result["tools"][side]
        for key in ("resume_tasks", "resume_100"):  # both ways give the same logits
            assert tools[key]["max_abs_diff"] < 1e-9 and tools[key]["resume_ms"] > 0
        assert tools["resume_100"]["context"] == 100
        assert tools["prefix"]["same"] and tools["experiment"]["runs_per_second"] > 0
    weight = result["page_weight"]
    files = [p for p in site_root.rglob("*") if p.is_file() and p.suffix not in (".gz", ".br")]
    assert weight["total"]["raw"] == sum(p.stat().st_size for p in files)
    # as sent by a host that serves the build's gzip (or brotli) copies: each where there is one
    for kind, suffix in (("gzip", ".gz"), ("brotli", ".br")):
        sent = sum(min(p.stat().st_size, (p.parent / (p.name + suffix)).stat().st_size)
                   if (p.parent / (p.name + suffix)).exists() else p.stat().st_size for p in files)
        assert weight["total"][kind] == sent < weight["total"]["raw"]
    assert weight["total"]["brotli"] < weight["total"]["gzip"]
    main = result["main_thread"]
    assert main["tokens"] > 0 and main["tasks"] > 0
    # a task's CPU time is not more than its wall-clock time (the two clocks are read right;
    # they tick apart, so a task can show a few microseconds more CPU than wall time)
    assert 0 < main["longest_task_cpu_ms"] <= main["longest_task_wall_ms"] + 1
    assert main["stop_wall_ms"] > 0 and main["stop_cpu_ms"] > 0
    # many widgets: every page measured, each with its widgets in it, and sharing one Python
    # costs less than a Python per widget (the numbers themselves are the benchmark's to report)
    w = result["widgets"]
    assert [v["frames"] for v in w.values()] == [1, 2, 2]  # quick: two widgets, not four
    for label, v in w.items():
        assert f"| {label} |" in text and v["memory_mib"] > 0 and v["cpu_s"] > 0 and v["ready_ms"] > 0
    shared, each = w["two widgets, one shared Python"], w["two widgets, a Python each"]
    assert shared["memory_mib"] < each["memory_mib"] and shared["cpu_s"] < each["cpu_s"]
