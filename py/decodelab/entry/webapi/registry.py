"""The page's sessions and the table of endpoints every panel module registers into.

A page's state (its run, the last finished run, the lesson's replay and experiments, a run being
made again) lives in a `Session`, one per page; `setup` opens one. Endpoints are plain functions
`handler(session, request) -> dict`, registered under their name by `@endpoint`.
"""

import time

from decodelab.core.library import Library
from decodelab.errors import FieldError
from decodelab.fields import check

MAX_BUDGET_MS = 500  # the longest batch a page may ask for

SESSIONS = {}  # session id -> Session
ENDPOINTS = {}  # name -> handler(session, request) -> dict


class Session:
    """One page's state: the run on screen, the last finished run, the lesson's replay and
    experiments, and a run being made again after a restart."""

    def __init__(self, library: Library):
        self.library = library
        self.run = None  # the run in progress, or the latest
        self.last = None  # the last run that finished, for Export trace
        self.restoring = None  # (run, steps): a run being made again (restore_start)
        self.replay = None  # core.replay.Replay of the latest run, for the lesson
        self.experiment = None  # the experiment in progress (lesson.experiment.Experiment)
        self.accuracy = None  # the accuracy experiment in progress (lesson.accuracy)
        self.validity = None  # the JSON validity experiment in progress (lesson.shapes)
        self.acceptance = None  # the draft's acceptance experiment in progress (lesson.search)
        self.serving = None  # the serving run in progress (lesson.serving.Serving)
        self.prompt_logits = None  # (key, logits): the preview's last prefill

    def datasets(self) -> dict:
        """{dataset: its tokenizers}: what settings are checked against."""
        return self.library.catalog()

    def dataset(self, req: dict) -> str:
        from decodelab.core.settings import Settings

        return check("dataset", req.get("dataset", Settings.dataset),
                     choices=tuple(self.library.datasets()))

    def replay_of(self, run):
        """The replay of `run`, made once per run."""
        from decodelab.core.replay import Replay

        if self.replay is None or self.replay.run is not run:
            self.replay = Replay(run)
        return self.replay


def endpoint(fn):
    """Register fn as the endpoint named like it (without the leading underscore); a name
    registered twice is refused (the second would silently replace the first)."""
    name = fn.__name__.lstrip("_")
    if name in ENDPOINTS:
        raise ValueError(f"the endpoint {name!r} is registered twice ({fn.__module__})")
    ENDPOINTS[name] = fn
    return fn


def deadline(req: dict) -> float:
    """The time a batch of work (a run's steps, an experiment's runs) should end by."""
    ms = req.get("budget_ms", 12.0)
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not 0 <= ms <= MAX_BUDGET_MS:
        raise FieldError("request", f"budget_ms must be a number from 0 to {MAX_BUDGET_MS}; "
                                    f"got {ms!r}.")
    return time.perf_counter() + ms / 1000.0


def advance_planned(exp, req: dict, none: str) -> dict:
    """Make an experiment's runs for about req's budget; its result comes with the last batch."""
    if exp is None:
        raise FieldError("request", none)
    exp.advance(deadline(req) - time.perf_counter())
    out = {"done": exp.done, "progress": exp.progress()}
    if exp.done:
        out["result"] = exp.result()
    return out


def tasks_model(library) -> None:
    """A FieldError when the site was built without the tasks model."""
    if "tasks" not in library.datasets() or not library.has_model("transformer", "tasks", "bpe"):
        raise FieldError("dataset", "This site was built without the tasks model.")
