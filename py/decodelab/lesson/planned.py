"""An experiment's runs, planned up front and made a few at a time, so the page can show progress
and stop between two batches (web/lesson/planned.js draws it). The temperature experiment, the
accuracy experiment and the validity experiment are each one.
"""

import time


class Planned:
    """Runs planned up front (`plan`, a list of what `_make` takes) and made a few at a time:
    advance() until a time budget is used (at least one run), or run() them all. The page makes
    them in batches, so it can show progress and stop between two batches."""

    plan: list
    total: int
    steps: int

    @property
    def done(self) -> bool:
        return not self.plan

    def _make(self, item) -> None:
        raise NotImplementedError

    def advance(self, budget_s: float = 0.05) -> None:
        deadline = time.perf_counter() + budget_s
        while self.plan:
            self._make(self.plan.pop(0))
            if time.perf_counter() >= deadline:
                break

    def run(self):
        while not self.done:
            self.advance(1.0)
        return self

    def progress(self) -> dict:
        return {"done": self.total - len(self.plan), "total": self.total, "steps": self.steps}
