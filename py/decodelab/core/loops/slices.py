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

# Positions a prefill reads per piece (a chunked prefill, as vLLM's), at most. In the page 16
# (numpy there has no BLAS, and its einsum runs as fast on 16 rows as on 200, measured in
# Pyodide 0.27.7). Natively 256: nothing waits on a heartbeat there, and BLAS reads each weight
# once per chunk, so small chunks cost (SmolLM2, 200 tokens: 172 tokens/s in one pass, 108 in
# chunks of 64, 57 of 16).
IN_PAGE = sys.platform == "emscripten"
PREFILL_CHUNK = 16 if IN_PAGE else 256
# In the page a piece is also held to this many multiply-adds: the worker answers a Stop and
# its heartbeat only between two pieces, and numpy there does about 2.8 billion a second on a
# 2-core machine (5.6 GFLOP/s), so a piece takes about 0.16 s, under the 0.2 s a Stop may wait.
# 16 positions of SmolLM2 were 1.7 billion (0.6 s); it now reads 4 a piece at the start of a
# prompt and 2 near the end of its window, where attention over 2,000 positions costs as much
# again. The models trained here read 16 positions in a fraction of that.
PIECE_WORK = 450_000_000


def position_work(cfg, attended: int) -> int:
    """Multiply-adds of one position through a transformer's blocks (`layers.Config`) when it
    attends to `attended` positions: its products with the weights (q, k, v and o; the MLP's
    gate, up and down) and, per head, its scores and the weighted sum of the values."""
    C, D, F = cfg.n_embd, cfg.head_dim, cfg.mlp_hidden
    weights = C * (cfg.n_head + 2 * cfg.n_kv_head) * D + cfg.n_head * D * C + 3 * C * F
    return cfg.n_layer * (weights + 2 * cfg.n_head * D * attended)


def prefill_chunks(n: int, cfg, start: int = 0, rows: int = 1) -> list:
    """(a, b) pieces of n positions read after `start` positions already cached, `rows` rows
    (a batch) at a time. Natively PREFILL_CHUNK // rows positions a piece; in the page as many
    as keep a piece's work within PIECE_WORK (at least one, at most PREFILL_CHUNK // rows), the
    work counted as if every position attended to as many as the piece's last one."""
    cap = max(1, PREFILL_CHUNK // rows)
    if not IN_PAGE:
        return chunks(n, cap)
    out, a = [], 0
    while a < n:
        size = 1
        while (size < min(cap, n - a)
               and rows * (size + 1) * position_work(cfg, start + a + size + 1) <= PIECE_WORK):
            size += 1
        out.append((a, a + size))
        a += size
    return out


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
