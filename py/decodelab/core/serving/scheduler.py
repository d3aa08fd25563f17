"""Continuous batching over a paged cache: a queue of requests served step by step, as vLLM's
scheduler serves them.

Each request is an ordinary run (`generate.Generation`, its own settings and seed) whose session
keeps its cache in the shared pool's blocks (`paged.PagedSession`), reusing the prefix tree's
blocks for the start of its window (`prefixtree`). At every step:

  1. Requests that have arrived join the running batch, oldest first, while the pool can hold
     their windows (the blocks a prefill needs, beyond those the tree already has).
  2. Before anyone decodes, the scheduler counts the blocks the step needs (a running request
     whose next position starts a new block, or whose last block is shared, needs one). While
     the pool cannot give them, even by evicting the tree's unused leaves, the youngest running
     request is preempted: its blocks go back, and it waits at the head of the queue; when it
     joins again its window is computed again in one pass (vLLM's recompute), and it goes on
     from the token it had reached.
  3. Every running request makes its next step, and the full blocks of its window go into the
     prefix tree: a block is full once its positions are computed, and nothing writes into it
     again, so a request that joins later (even at the same step, its prefill coming after)
     reads it instead of computing it, whether its owner still runs or has left (vLLM's
     automatic prefix caching and SGLang's radix tree share a running request's blocks the
     same way). The ones that finish leave; their blocks stay in the tree until evicted.

A request's text is the same as the same request run alone: its draws come from its own seed,
and its cache, however paged, shared or recomputed, gives the same logits (tests hold every
request's tokens to a run alone). A serving engine runs a step's decodes as one batched call;
so does this one (`paged.decode_together`: the requests under way, each reading its own blocks,
right-padded to the longest; `batched=False` runs them in turn). A request's prefill, when it
joins, is its own call.

Samples of one prompt (requests of one `group`) joining at the same step share its prefill
(`paged.PagedPrefix`): the prompt is computed once into blocks that every sample's table holds,
and a sample's first write into the shared last block, while it has room, copies that block
(copy-on-write). A sample that joins later prefills on its own (the prefix tree may still give
it the prompt's full blocks).

Static batching, for comparison (`static=True`): a batch of up to `max_running` requests starts
together and no one joins until every one of them has finished.

Left out: tool calls inside a request (appending a result takes blocks in the middle of a step),
priorities, chunked prefill.

Dimension legend: b block size.
"""

import time
from dataclasses import dataclass, field

from decodelab.core.loops import generate
from decodelab.core.tasks import data as tasks
from decodelab.core.serving.paged import BlockPool, PagedPrefix, PagedSession, decode_together
from decodelab.core.serving.prefixtree import PrefixTree


class CannotFit(ValueError):
    """The oldest request has arrived, nobody runs, and the pool cannot give the blocks it needs
    to join: it never will. Says which request, the blocks it needs and the pool's size."""

    def __init__(self, request, need: int, blocks: int):
        self.request, self.need, self.blocks = request, need, blocks
        super().__init__(f"request {request.number} cannot fit: it needs {need} blocks and the "
                         f"pool has {blocks}")


@dataclass
class Request:
    """One request of a workload: its settings (as `generate.prepare` reads them) and when it
    arrives (a step number)."""

    number: int
    settings: dict
    arrival: int = 0
    run: object = None  # its Generation, while it runs or waits after a preemption
    joined_step: int | None = None
    finished_step: int | None = None
    preempted: int = 0
    saved: list = field(default_factory=list)  # window tokens to compute again after preemption
    group: int | None = None  # parallel samples of one prompt: the first sample's number
    reused: int = 0  # window positions its first prefill found in the prefix tree
    forked: bool = False  # its window came from its group's prefill (copy-on-write), not its own


class _Paged(generate.Generation):
    """A run whose session keeps its cache in the scheduler's pool."""

    def __init__(self, scheduler, model, settings, prompt, prefix=None):
        self.scheduler = scheduler
        super().__init__(model, settings, prefix=prefix, prompt=prompt)

    def new_session(self):
        s = self.scheduler
        return PagedSession(self.model, s.pool, shift="reread", tree=s.tree)


class Scheduler:
    def __init__(self, library, requests, num_blocks: int, block_size: int = 16,
                 max_running: int = 8, static: bool = False, share_prefixes: bool = True,
                 batched: bool = True):
        self.library, self.static, self.max_running = library, static, max_running
        self.batched = batched  # a step's decodes in one call (paged.decode_together)
        self.requests = sorted(requests, key=lambda r: (r.arrival, r.number))
        self.prepared = {r.number: generate.prepare(library, r.settings) for r in self.requests}
        models = {id(m) for _, m, _ in self.prepared.values()}
        if len(models) != 1:
            raise ValueError("one pool serves one model: every request needs the same model, "
                             "dataset and tokenizer")
        if any(s.tools != "off" and tasks.marker_ids(m.tokenizer)
               for s, m, _ in self.prepared.values()):
            raise ValueError("a request of the tasks model needs tools off here: a tool's "
                             "result would take blocks in the middle of a step")
        self.model = next(iter(self.prepared.values()))[1]
        self.pool = BlockPool.for_model(self.model, num_blocks, block_size)
        self.tree = PrefixTree(self.pool) if share_prefixes else None
        self.waiting = list(self.requests)
        self.running, self.done = [], []
        self.prefixes = {}  # group -> its prompt prefilled at this step, for its samples
        self.step = 0
        self.prefill_seconds = 0.0  # wall time of the requests' first steps (their prefills)
        self.log = []  # per step: who joined, left, was preempted, runs; blocks used, shared

    # --- blocks ----------------------------------------------------------------------------

    def _free(self) -> int:
        """Blocks the pool can give: free ones, and those the tree can give back."""
        return len(self.pool.free) + (self.tree.evictable() if self.tree is not None else 0)

    def _shared(self) -> int:
        """Blocks more than one request holds: the prefix tree's own hold is not counted (it
        holds every full block a running request has computed)."""
        holders = self.pool.refs.copy()
        if self.tree is not None:
            holders[[n.block for n in self.tree.nodes()]] -= 1
        return int((holders > 1).sum())

    def _needs_now(self, request) -> int:
        """Blocks the request's next decode takes: one when its next position opens a block or
        falls in a shared one."""
        cache = self._session(request).cache
        if cache.length % self.pool.block_size == 0:
            return 1
        return int(self.pool.refs[cache.table[-1]] > 1)

    def _needs_to_join(self, request) -> int:
        """Blocks a request takes to join: its window (the start token and the prompt, or what
        it had reached before a preemption) and one to grow into; a sample whose prompt its
        group prefilled at this step holds those blocks already, and needs the one."""
        if not request.saved and request.group in self.prefixes:
            return 1
        return self._window_blocks(len(request.saved) or self._first_window(request))

    def _first_window(self, request) -> int:
        """The positions a request's first prefill fills: the start token and its prompt."""
        return 1 + len(self.prepared[request.number][2][0])

    def _window_blocks(self, window: int) -> int:
        """Blocks to join with a window of that many positions: its own, and one to grow into."""
        return self.pool.blocks_for(window) + 1

    @property
    def least_blocks(self) -> int:
        """The blocks of the largest request's first join: a pool of fewer can never serve
        this workload."""
        return max(self._window_blocks(self._first_window(r)) for r in self.requests)

    @staticmethod
    def _session(request):
        return request.run.session

    # --- the steps ---------------------------------------------------------------------------

    def _join(self, log) -> None:
        room = self.max_running - len(self.running)
        if self.static and self.running:
            return  # a static batch runs to its end before anyone joins
        promised = 0  # blocks the requests joined at this step will take when they decode
        while self.waiting and room > 0 and self.waiting[0].arrival <= self.step:
            request = self.waiting[0]
            need = self._needs_to_join(request)
            if need > self._free() - promised:
                break  # the oldest waits for room: no one overtakes it
            self.waiting.pop(0)
            if request.saved:  # back after a preemption: its window computed again in one pass
                request.run.session.refill(request.saved)
                request.saved = []
                log["recomputed"].append(request.number)
                need = 1  # the window's blocks are taken: one to grow into
            else:
                settings, model, prompt = self.prepared[request.number]
                prefix = None
                if request.group is not None:  # samples of one prompt: prefilled once
                    prefix = self.prefixes.get(request.group)
                    if prefix is None:
                        began = time.perf_counter()
                        prefix = self.prefixes[request.group] = PagedPrefix(
                            model, self.pool, prompt[0], self.tree)
                        self.prefill_seconds += time.perf_counter() - began
                        request.reused = prefix.session.reused
                        need = 1  # the prompt's blocks are taken: one to grow into
                    else:
                        request.forked = True
                request.run = _Paged(self, model, settings, prompt, prefix)
            promised += need
            if request.joined_step is None:
                request.joined_step = self.step
            self.running.append(request)
            log["joined"].append(request.number)
            room -= 1

    def _preempt(self, log) -> None:
        while self.running:
            fresh = [r for r in self.running if r.run is None or r.run.session is None]
            need = sum(self._needs_now(r) for r in self.running if r not in fresh) + \
                sum(self._needs_to_join(r) for r in fresh)
            if need <= self._free():
                return
            victim = self.running.pop()  # the youngest: the last to join
            victim.preempted += 1
            log["preempted"].append(victim.number)
            session = victim.run and victim.run.session
            if session is not None:
                victim.saved = list(session.tokens)
                session.release()
            else:  # it had not started: it starts afresh when it joins again
                victim.run, victim.forked = None, False
            self.waiting.insert(0, victim)

    def advance(self) -> dict:
        """One step: join, make room, decode, leave. Returns the step's log entry. Raises
        CannotFit, before anything is done, when the oldest request can never join."""
        first = self.waiting[0] if self.waiting else None
        if not self.running and first is not None and first.arrival <= self.step \
                and self._needs_to_join(first) > self._free():
            raise CannotFit(first, self._needs_to_join(first), self.pool.num_blocks)
        log = {"step": self.step, "joined": [], "left": [], "preempted": [], "recomputed": []}
        copied, evicted = len(self.pool.copied), len(self.tree.evicted) if self.tree else 0
        self._join(log)
        self._preempt(log)
        if self.batched:  # the decodes of requests under way, in one call of the model
            going = [r.run for r in self.running if r.run is not None and r.run.session is not None
                     and r.run.finish_reason is None]
            if going:
                decode_together([run.session for run in going],
                                [run.output_ids[-1] for run in going])
        held = []
        for request in list(self.running):
            run = request.run
            fresh = run.session is None
            began = time.perf_counter()
            next(run)
            if fresh:  # its prompt read (from the tree where it can) and its first token
                self.prefill_seconds += time.perf_counter() - began
            cache = run.session.cache
            if fresh and not request.forked and request.group is None:
                request.reused = run.session.reused
            held.append((request.number, cache.length, list(cache.table)))
            if self.tree is not None:  # its full blocks, computed: any later prefill may read them
                self.tree.insert(run.session.tokens, cache.table)
            if run.done:
                session = run.session
                session.release()
                request.finished_step = self.step
                self.running.remove(request)
                self.done.append(request)
                log["left"].append(request.number)
        for prefix in self.prefixes.values():  # its samples have forked it: its hold ends
            prefix.release()
        self.prefixes = {}
        log.update(running=[r.number for r in self.running], blocks_used=self.pool.used,
                   blocks_shared=self._shared(),
                   copied=self.pool.copied[copied:],  # (shared block, its copy) this step
                   evicted=self.tree.evicted[evicted:] if self.tree else [],
                   held=held)  # [(request, positions its cache holds, its block table)]
        self.log.append(log)
        self.step += 1
        return log

    def run(self, max_steps: int = 100_000) -> "Scheduler":
        while self.waiting or self.running:
            if self.step >= max_steps:
                raise RuntimeError(f"the workload did not finish in {max_steps} steps")
            self.advance()
        return self
