"""The benchmark itself still works: its quick mode runs end to end and prints every row.

It judges no timing (these machines are noisy); it checks that each measurement is there and
is a sensible number, so a change that breaks the benchmark is caught here, not at release."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests import benchmark

pytestmark = pytest.mark.browser


def test_quick_benchmark_prints_every_row(site_root):
    # its own Playwright, in a thread of its own: the session's browser is already running here
    with ThreadPoolExecutor(1) as pool:
        result = pool.submit(benchmark.measure, True).result()
    text = benchmark.table(result)
    rows = ["| integrity |", "| runtime |", "| numpy |", "| decodelab |", "| assets |", "| warmup |",
            "| total |", "| page_ready |", "Page end to end", "Cache on / cache off",
            "| page weight (MB) | raw | gzip |", "| pyodide |", "| page |", "Main thread while streaming"]
    rows += [f"| {name} |" for name in benchmark.RUNS]
    rows += [f"| {name} |" for name in result["transformer_tokens_per_second"]]
    for row in rows:
        assert row in text, (row, text)
    assert result["quick"] and result["repeats"] == 1
    for phases in (result["boot_cold_ms"], result["boot_warm_ms"]):
        assert all(v > 0 for k, v in phases.items() if k != "integrity_ms"), phases
    for v in list(result["steps_per_second"].values()) + list(result["transformer_tokens_per_second"].values()):
        assert v["browser"] > 0 and v["native"] > 0
    weight = result["page_weight"]
    assert weight["total"]["raw"] == sum(p.stat().st_size for p in site_root.rglob("*") if p.is_file())
    assert 0 < weight["total"]["gzip"] < weight["total"]["raw"]
    assert result["main_thread"]["tokens"] > 0
