"""The live cache check of a run, behind its text.

Every logits vector a cached step hands out should equal what the full forward pass gives for
the same window without a cache (`core.models.checks`; the tolerance is rounding's, per dtype). Checking
each step on its own costs a full pass over the window per step: a 200-token run would do 200
passes for 200 cached steps, and the text would crawl. One full pass over a window scores every
position at once, though, so the steps that read one window can all be checked by one pass.

A session's window (`tokens`) is one list while it only grows (decode and append extend it in
place); a prefill, a context shift or a rewind starts a new list. The steps that read prefixes
of one list are checked by one pass over the longest of them: row n-1 of that pass is what a
pass over the first n tokens alone gives (causal attention: nothing after position n-1 reaches
it). A run's check waits until its text has ended (or been stopped) and then catches up, so the
text goes at the cached speed (the page gets the text's last batch before the check's pass:
webapi `advance`); a very long run catches up every CHECK_EVERY steps on the way,
which bounds the logits it keeps. Slow motion pauses after each step anyway: there the page
asks for each step's verdict right away (webapi `advance` with catch_up).

Measured natively (tests/benchmark.py, prose transformer, 256 new tokens, float64): the text
went at the cached speed, then the check caught up in about 16 ms; checked at every step as it
was made, the same run went about ten times slower.

Left out: batches (`batchsession.BatchSession` is checked per step by the batch panel).
"""

import numpy as np

from decodelab.core.loops.slices import drain

CHECK_EVERY = 512  # a run's live check waits for the end of the text, or this many steps at most


class LiveCheck:
    """The pending steps of one run's session and the verdicts not yet taken by the caller."""

    def __init__(self, session, every: int = CHECK_EVERY):
        self.session, self.every = session, every
        self.pending = []  # [(record, window list, n, logits (V,))] not checked yet
        self.verdicts = []  # [(step, diff, ok)] reached since the caller last took them

    def add(self, record: dict, session) -> None:
        """A step that has just handed out session.logits, to check later. Meanwhile its record
        says it is pending: cache_diff and cache_ok are None."""
        record.update(cache_diff=None, cache_ok=None)
        self.pending.append((record, session.tokens, len(session.tokens), session.logits))
        if len(self.pending) >= self.every:
            self.catch_up()

    def catch_up(self) -> None:
        """Check every pending step: one full pass per window."""
        drain(self.catch_up_steps())

    def catch_up_steps(self):
        """catch_up, sliced (`slices`): a window's steps leave `pending` once their pass is
        made, so a catch-up given up half way leaves the rest pending."""
        s = self.session
        while self.pending:
            window, j = self.pending[0][1], 0
            while j < len(self.pending) and self.pending[j][1] is window:
                j += 1
            group = self.pending[:j]
            rows = [n - 1 for _, _, n, _ in group]  # the row after each step's window
            ref = yield from s.model.logits_at_steps(window[:max(rows) + 1], rows,
                                                     s.dtype)  # (j, V)
            del self.pending[:j]
            for (record, _, n, logits), expected in zip(group, ref):
                diff = float(np.abs(logits - expected).max())
                ok = diff <= s.tolerance
                record.update(cache_diff=diff, cache_ok=ok)
                self.verdicts.append([record["step"], diff, ok])
            yield None

    def skip(self) -> int:
        """Give up the pending steps unchecked (their records keep cache_diff None): how many
        there were."""
        n, self.pending = len(self.pending), []
        return n

    def take(self) -> list:
        """The verdicts reached since the last call: [[step, diff, ok], ...]."""
        out, self.verdicts = self.verdicts, []
        return out
