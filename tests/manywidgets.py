"""Many widgets on one course page: memory, CPU and the time until all are ready, with one
Python shared by the site's widgets and with one Python per widget, in one run.

    python3 tests/manywidgets.py        (also part of python3 build.py bench)

Each page is opened in a browser of its own, so nothing is cached from the one before and every
process it starts is counted: memory is the proportional set size (PSS) of all of the browser's
processes once the widgets have written their first samples, CPU the processes' CPU time, and
the time runs from the course page's start to the last widget's "ready". The course page is
served from the widgets' own site (another port of localhost), where browsers let widgets share
a worker; the widgets are those of tests/e2e/hosts/four.html.
"""

import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "py")]

from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS, serve  # noqa: E402

HOSTS = ROOT / "tests" / "e2e" / "hosts"
TIMEOUT_MS = 240_000


def widgets() -> list[str]:
    """The four <decodelab-embed> elements of hosts/four.html."""
    return re.findall(r"<decodelab-embed [^>]*></decodelab-embed>", (HOSTS / "four.html").read_text())


def course_page(folder: Path, widget_url: str, count: int, worker: str) -> str:
    tags = [w.replace("<decodelab-embed ", f'<decodelab-embed worker="{worker}" ' if worker else "<decodelab-embed ")
            .replace("{{WIDGET}}", widget_url) for w in widgets()[:count]]
    name = f"page-{count}-{worker or 'shared'}.html"
    (folder / name).write_text(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>widgets</title>"
        f"<script type=\"module\" src=\"{widget_url}element.js\"></script></head><body><main>"
        + "\n".join(tags) + "</main><script type=\"module\" src=\"host.js\"></script></body></html>")
    return name


def pss_kib(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    match = re.search(r"^Pss:\s+(\d+) kB", text, re.M)
    return int(match.group(1)) if match else 0


def measure_page(playwright, url: str, count: int) -> dict:
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    try:
        cdp = browser.new_browser_cdp_session()
        page = browser.new_page(viewport={"width": 1000, "height": 4000})
        page.goto(url)
        page.wait_for_function("(n) => window.seen.filter((m) => m.type === 'ready').length >= n",
                               arg=count, timeout=TIMEOUT_MS)
        page.wait_for_function("(n) => window.seen.filter((m) => m.type === 'finished').length >= n",
                               arg=count, timeout=TIMEOUT_MS)
        ready_ms = page.evaluate("() => Math.max(...window.seenAt.filter(([t]) => t === 'ready').map(([, ms]) => ms))")
        page.wait_for_timeout(1500)  # let the first samples' pages settle
        processes = cdp.send("SystemInfo.getProcessInfo")["processInfo"]
        frames = page.evaluate("() => document.querySelectorAll('decodelab-embed iframe').length")
        return {
            "widgets": count, "ready_ms": ready_ms,
            "memory_mib": sum(pss_kib(p["id"]) for p in processes) / 1024,
            "cpu_s": sum(p["cpuTime"] for p in processes),
            "processes": len(processes), "frames": frames,
        }
    finally:
        browser.close()


COUNTS = {2: "two", 3: "three", 4: "four"}


def measure(count: int = 4) -> dict:
    """The three pages: one widget, `count` widgets sharing a Python, `count` with a Python
    each (the benchmark's quick mode takes two: each Python started costs seconds of CPU)."""
    from playwright.sync_api import sync_playwright

    widget, widget_url = serve(ROOT / "static", host="localhost")
    folder = Path(tempfile.mkdtemp(prefix="decodelab-widgets-"))
    (folder / "host.js").write_text((HOSTS / "host.js").read_text())
    many = COUNTS[count]
    pages = {"one widget": (1, ""), f"{many} widgets, one shared Python": (count, ""),
             f"{many} widgets, a Python each": (count, "dedicated")}
    names = {label: course_page(folder, widget_url, n, worker) for label, (n, worker) in pages.items()}
    course, course_url = serve(folder, host="localhost")
    try:
        with sync_playwright() as p:
            out = {label: measure_page(p, course_url + names[label], pages[label][0]) for label in pages}
    finally:
        course.shutdown()
        widget.shutdown()
    one = out["one widget"]
    for row in out.values():
        row["memory_vs_one"] = row["memory_mib"] / one["memory_mib"]
        row["cpu_vs_one"] = row["cpu_s"] / one["cpu_s"]
        row["ready_vs_one"] = row["ready_ms"] / one["ready_ms"]
    return out


def lines(r: dict) -> list:
    out = ["", "| course page | memory (MiB, PSS) | against one | CPU (s) | against one | all ready (s) | against one |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for label, v in r.items():
        out.append(f"| {label} | {v['memory_mib']:.0f} | {v['memory_vs_one']:.2f}x | {v['cpu_s']:.1f} | "
                   f"{v['cpu_vs_one']:.2f}x | {v['ready_ms'] / 1000:.1f} | {v['ready_vs_one']:.2f}x |")
    return out


if __name__ == "__main__":
    print("\n".join(lines(measure())))
