"""The logits a run saw at any step, given back on demand by making the very same calls again.

A run logs what it fed its model (`Generation.feeds`): the prompt's prefill, then a decode of
each chosen token, or one append of a tool's tokens. A Replay gives a fresh session the same
calls in the same order, so the logits are the run's own (a context shift included), for any
model that has a session. They are kept: walking back and forth is free, and walking forward
costs one call per new step. The last step of a finished run needs no replay at all: the run
kept its decision (unless asked to recompute everything, as the tests do to check the replay).

Dimension legend: V vocabulary size.
"""

import numpy as np

from decodelab.core.loops.slices import drain


class Replay:
    def __init__(self, run, reuse_last: bool = True):
        self.run = run
        self.reuse_last = reuse_last
        self.session = None
        self.logits = []  # step -> (V,) a copy (sessions reuse their buffers); None for a tool's
        self._decision = None  # (step, Decision) last asked for

    def logits_at(self, step: int):
        """The logits step `step` decided from (None for a token a tool appended)."""
        if self._kept(step):
            return self.run.last[1].logits
        drain(self.reach_steps(step))
        return self.logits[step]

    def reach_steps(self, step: int):
        """The calls up to `step` made again, sliced (`slices`: the prompt's prefill a chunk a
        piece, then a piece per call): logits_at(step) is then at hand."""
        run = self.run
        if self._kept(step):
            return
        while len(self.logits) <= step:
            feed = run.feeds[len(self.logits)]
            z = None
            if feed is not None:
                kind, ids = feed
                if kind == "prefill":
                    self.session = run.new_session()
                    z = yield from self.session.prefill_steps(ids)
                elif kind == "decode":
                    z = self.session.decode(ids[0])
                else:  # the call's closing token and the tool's tokens, in one pass
                    z = self.session.append(ids)
            self.logits.append(None if z is None else np.array(z, dtype=np.float64))
            yield None

    def decision(self, step: int):
        """The rules applied at `step` exactly as the run applied them."""
        if self._decision is None or self._decision[0] != step:
            run = self.run
            d = run.last[1] if self._kept(step) else run.decide(step, self.logits_at(step))
            self._decision = (step, d)
        return self._decision[1]

    def _kept(self, step: int) -> bool:
        """Is this the last step of a finished run, whose decision the run kept?"""
        run = self.run
        return self.reuse_last and run.done and run.last is not None and run.last[0] == step
