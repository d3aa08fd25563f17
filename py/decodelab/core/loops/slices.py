"""Long work in slices: a generator that does one bounded piece of work per `next` and returns
its result (the value of StopIteration).

The page's Python is one worker that must answer its heartbeat and a Stop between two calls,
so a computation that can take seconds (a long prompt's prefill, a full pass of the live check,
a beam search) is written once, as such a generator, and run two ways from it:

    drain(work)            natively, the CLI and the tests: every piece at once, the result
    Slices(work).run(s)    the page: pieces until about s seconds have gone (at least one),
                           then back to the worker; again until `done`, then `result`

so there is one computation, not a sliced copy of it. A piece yields None, or a dict of its
progress, which `Slices` keeps for the page (a long call's "pending" answer carries it).

Dimension legend: none (no arrays here).
"""

import sys
import time

# Positions a prefill reads per piece (a chunked prefill, as vLLM's). In the page 16: about
# 0.6 s of SmolLM2 on a 2-core machine, and no slower in total (numpy there has no BLAS, and
# its einsum runs as fast on 16 rows as on 200, measured in Pyodide 0.27.7). Natively 256:
# nothing waits on a heartbeat there, and BLAS reads each weight once per chunk, so small
# chunks cost (SmolLM2, 200 tokens: 172 tokens/s in one pass, 108 in chunks of 64, 57 of 16).
PREFILL_CHUNK = 16 if sys.platform == "emscripten" else 256


def drain(work):
    """Run a sliced computation to its end; its result."""
    while True:
        try:
            next(work)
        except StopIteration as end:
            return end.value


def chunks(n: int, size: int = 0):
    """(start, stop) of n positions in pieces of `size` (PREFILL_CHUNK unless said), the last
    one shorter."""
    size = size or PREFILL_CHUNK
    return [(i, min(i + size, n)) for i in range(0, n, size)]


class Slices:
    """A sliced computation run a time budget at a time: run(seconds) makes pieces until the
    budget is spent (at least one), then returns; `done`, `result` and `progress` say where it
    is."""

    def __init__(self, work):
        self.work, self.done, self.result = work, False, None
        self.progress = None  # the last progress dict a piece yielded

    def run(self, seconds: float) -> bool:
        end = time.perf_counter() + seconds
        while not self.done:
            try:
                said = next(self.work)
            except StopIteration as stop:
                self.done, self.result = True, stop.value
                break
            if isinstance(said, dict):
                self.progress = said
            if time.perf_counter() >= end:
                break
        return self.done

    def finish(self):
        """Every piece left; the result."""
        while not self.run(3600.0):
            pass
        return self.result

    def close(self) -> None:
        """Give the computation up (its generator's `finally` runs)."""
        self.work.close()
        self.done = True
