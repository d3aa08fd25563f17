"""The CPU time of the page's own tasks, read from a Chromium trace.

A task's wall-clock duration, which the Long Tasks API reports, also counts the time the
operating system gave to other processes while the task waited to run on: on a busy machine it
grows though the page does no more work. Chromium's trace records for every task of a thread
both its wall time (`dur`) and the time its thread actually ran on a CPU (`tdur`, thread
time). Thread time leaves the waiting out: it is what the page's code spends, so tests judge it
and the benchmark reports both. It is not wholly free of the machine either: a crowded machine
makes each instruction a little slower, and the page draws in one frame what arrived since the
last, so longer gaps between frames make bigger ones.

    with PageTrace(page) as trace:
        page.evaluate("() => performance.mark('x:start')")
        ...
        page.evaluate("() => performance.mark('x:end')")
    tasks = trace.tasks(trace.main, *trace.span("x:start", "x:end"))

Positions in the trace are in microseconds on one clock for every thread and process; the
page's own `performance.mark` calls (in the page or in its worker) land on it too, which is how
a test marks the moments it cares about.
"""

import json
from dataclasses import dataclass

# "toplevel": one event per task a thread's scheduler runs, with wall and thread time;
# "blink.user_timing": performance.mark and measure, from the page and from its workers
CATEGORIES = ("toplevel", "blink.user_timing")
TASK_EVENTS = ("ThreadControllerImpl::RunTask", "RunTask")  # the name in newer, older Chromium
WORKER_THREAD = "DedicatedWorker thread"

# Stop pressed as a learner would, marked just before the click and just after it (by then the
# click handler has posted the stop message); resolves with the wall-clock time to "ready".
PRESS_STOP = """() => new Promise(resolve => {
    const watch = new MutationObserver(() => {
        if (document.documentElement.dataset.state === 'ready') {
            performance.mark('stop:ready');
            watch.disconnect();
            resolve(performance.getEntriesByName('stop:ready')[0].startTime
                    - performance.getEntriesByName('stop:click')[0].startTime);
        }
    });
    watch.observe(document.documentElement, {attributes: true});
    performance.clearMarks('stop:click');
    performance.clearMarks('stop:posted');
    performance.clearMarks('stop:ready');
    performance.mark('stop:click');
    document.querySelector('#stop-button').click();
    performance.mark('stop:posted');
})"""


@dataclass(frozen=True)
class Task:
    start: float  # trace clock, microseconds
    wall_ms: float  # from its start to its end, whatever else the machine was doing
    cpu_ms: float  # the time its thread was running on a CPU
    source: str  # where Chromium posted it from (a worker's message, a frame, a timer...)

    @property
    def end(self) -> float:
        return self.start + self.wall_ms * 1000


class PageTrace:
    """A Chromium trace around a block of a test, read for one page's main thread and workers.

    The trace is browser-wide (Playwright allows one at a time per browser); the page is found
    by a mark it makes when the trace starts, so other pages and processes are left out."""

    def __init__(self, page):
        self.page = page
        self.browser = page.context.browser
        self.main = None  # (pid, tid) of the page's main thread
        self.workers = []  # (pid, tid) of its dedicated workers
        self.marks = []  # (ts, name, thread) of every performance.mark in the trace

    def __enter__(self):
        self.browser.start_tracing(categories=list(CATEGORIES))
        self.page.evaluate("() => performance.mark('tasktime:page')")
        return self

    def __exit__(self, kind, error, tb):
        # a task is only written out once it has ended: let the work under way finish first
        # (two frames of the page), so that none of the tasks a test asks about is cut short
        if kind is None:
            self.page.evaluate("() => new Promise((ok) => requestAnimationFrame(() => "
                               "requestAnimationFrame(() => setTimeout(ok, 0))))")
        data = self.browser.stop_tracing()
        if kind is None:
            self.load(json.loads(data))
        return False

    def load(self, trace):
        events = trace["traceEvents"] if isinstance(trace, dict) else trace
        names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
                 if e.get("ph") == "M" and e.get("name") == "thread_name"}
        marks = {(e["ts"], e["name"], (e["pid"], e["tid"])) for e in events
                 if e.get("cat") == "blink.user_timing" and e.get("ph") in ("I", "R", "i", "n")}
        self.marks = sorted(marks)
        own = [thread for _, name, thread in self.marks if name == "tasktime:page"]
        assert len(own) == 1, f"the page's own mark is not in the trace once: {own}"
        self.main = own[0]
        self.workers = [t for t, name in names.items() if t[0] == self.main[0] and name == WORKER_THREAD]
        self._tasks, self._open = {}, {}
        timed = 0
        for e in events:
            if e.get("name") not in TASK_EVENTS or not e.get("cat", "").startswith("toplevel"):
                continue
            thread = (e["pid"], e["tid"])
            if e["ph"] == "X":
                # Chromium 150 leaves the thread time out of some tasks of a microsecond or so;
                # for those the wall time stands in (never less than the thread time).
                timed += "tdur" in e
                source = e.get("args", {}).get("src_func", "")
                self._tasks.setdefault(thread, []).append(
                    Task(e["ts"], e["dur"] / 1000, e.get("tdur", e["dur"]) / 1000, source))
            elif e["ph"] == "B":  # begun, not ended when the trace stopped
                self._open.setdefault(thread, []).append(e["ts"])
        if self._tasks and not timed:
            raise AssertionError("the trace has no thread time for any task (no `tdur`): "
                                 "this Chromium cannot measure CPU time per task")
        for tasks in self._tasks.values():
            tasks.sort(key=lambda t: t.start)

    def at(self, name, thread=None) -> list:
        """Trace positions of the marks called `name` (made in `thread`, if given), in order."""
        return [ts for ts, n, t in self.marks if n == name and (thread is None or t == thread)]

    def span(self, start_mark, end_mark) -> tuple:
        """Positions of the one start mark and the one end mark the page's main thread made."""
        [start], [end] = self.at(start_mark, self.main), self.at(end_mark, self.main)
        assert start < end, (start_mark, end_mark)
        return start, end

    def names(self, prefix, thread=None) -> list:
        """(position, name) of the marks whose name starts with `prefix`, in order."""
        return [(ts, n) for ts, n, t in self.marks
                if n.startswith(prefix) and (thread is None or t == thread)]

    def tasks(self, thread, start, end) -> list:
        """The tasks of `thread` that ran at some moment between `start` and `end`. Tasks nested
        inside another (a nested run loop) are left out: their time is the outer task's."""
        still_open = [ts for ts in self._open.get(thread, []) if ts < end]
        assert not still_open, "the trace ended while a task of the window was still running"
        out = []
        for task in self._tasks.get(thread, []):
            if task.start < end and task.end > start:
                if out and task.end <= out[-1].end:
                    continue  # nested in the one before
                out.append(task)
        return out

    def page_tasks(self, start, end) -> list:
        """Tasks of the page's main thread and of its workers between `start` and `end`."""
        return [t for thread in [self.main, *self.workers] for t in self.tasks(thread, start, end)]
