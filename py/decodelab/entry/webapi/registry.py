"""The page's sessions and the table of endpoints every panel module registers into.

A page's state (its run, the last finished run, the lesson's replay and experiments, a run being
made again) lives in a `Session`, one per page; `setup` opens one. Endpoints are plain functions
`handler(session, request) -> dict`, registered under their name by `@endpoint`.
"""

import time

from decodelab.core.library import Library
from decodelab.core.loops.slices import Slices
from decodelab.errors import FieldError
from decodelab.fields import check

MAX_BUDGET_MS = 500  # the longest batch a page may ask for
SLICE_MS = 40  # the first slice of a long call, made by the call itself

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
        self.replay = None  # core.loops.replay.Replay of the latest run, for the lesson
        self.planned = {}  # experiment name -> the one in progress (see `experiment`)
        self.prompt_logits = None  # (key, logits): the preview's last prefill
        self.prompt_reading = None  # (key, core.loops.slices.Slices): the preview's prefill under way
        self.tasks = {}  # n -> (endpoint, core.loops.slices.Slices): long calls made in slices
        self.finished = {}  # experiment name -> what it keeps of its results (see `experiment`)
        self.task_count = 0

    def begin(self, name: str, work) -> dict:
        """An endpoint's sliced computation (a generator): its first slice, then what
        `proceed` answers."""
        self.task_count += 1
        self.tasks[self.task_count] = (name, Slices(work))
        return self.proceed(self.task_count, SLICE_MS / 1000.0)

    def proceed(self, n: int, seconds: float) -> dict:
        """Task n's next slice (about `seconds`, at least one piece) -> {"pending": true,
        "task": n, "progress"} while it has work left, else the endpoint's own answer. A task
        that fails is gone (its error is the call's)."""
        name, work = self.tasks[n]
        try:
            work.run(seconds)
        except BaseException:
            del self.tasks[n]
            raise
        if not work.done:
            return {"pending": True, "task": n, "endpoint": name, "progress": work.progress}
        del self.tasks[n]
        return work.result

    def datasets(self) -> dict:
        """{dataset: its tokenizers}: what settings are checked against."""
        return self.library.catalog()

    def dataset(self, req: dict) -> str:
        from decodelab.core.rules.settings import Settings

        return check("dataset", req.get("dataset", Settings.dataset),
                     choices=tuple(self.library.datasets()))

    def replay_of(self, run):
        """The replay of `run`, made once per run."""
        from decodelab.core.loops.replay import Replay

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


@endpoint
def _resume(session: Session, req: dict) -> dict:
    """{"task": n, "budget_ms"} -> the next slice of a long call (`Session.proceed`)."""
    n = _task(session, req)
    return session.proceed(n, deadline(req) - time.perf_counter())


@endpoint
def _abandon(session: Session, req: dict) -> dict:
    """{"task": n} -> a long call given up between two slices (the worker does it when a
    "stop" names the call's id): nothing of it is kept."""
    n = _task(session, req)
    session.tasks.pop(n)[1].close()
    return {"abandoned": n}


def _task(session: Session, req: dict) -> int:
    n = req.get("task")
    if isinstance(n, bool) or not isinstance(n, int) or n not in session.tasks:
        raise FieldError("request", f"task must be the number of a long call in progress; "
                                    f"got {n!r}.")
    return n


def deadline(req: dict) -> float:
    """The time a batch of work (a run's steps, an experiment's runs) should end by."""
    ms = req.get("budget_ms", 12.0)
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not 0 <= ms <= MAX_BUDGET_MS:
        raise FieldError("request", f"budget_ms must be a number from 0 to {MAX_BUDGET_MS}; "
                                    f"got {ms!r}.")
    return time.perf_counter() + ms / 1000.0


EXPERIMENTS = {}  # name -> make(library, request): the experiments `experiment` registered


def experiment(name: str, make, none: str, finish=None) -> None:
    """Register the endpoints `<name>_start` and `<name>_advance` of an experiment made a few
    runs at a time (`lesson.planned.Planned`), kept in the session's slot `name`.

    start: make(library, request) checks the request and plans the runs (a FieldError, or
    FieldErrors, naming every bad field refuses it) -> {"done": false, "progress"}. The slot is
    cleared first, so a refused start leaves no experiment behind to advance.
    advance: {"budget_ms"} -> runs made for about that long (at least one), and the result with
    the last batch; `none` is the error when the slot holds no experiment. finish(session,
    result) -> the result as the page gets it, once (what the session keeps of it)."""

    def start(session: Session, req: dict) -> dict:
        session.planned[name] = None
        exp = session.planned[name] = make(session.library, req)
        return {"done": False, "progress": exp.progress()}

    def advance(session: Session, req: dict) -> dict:
        exp = session.planned.get(name)
        if exp is None:
            raise FieldError("request", none)
        exp.advance(deadline(req) - time.perf_counter())
        out = {"done": exp.done, "progress": exp.progress()}
        if exp.done:
            out["result"] = exp.result() if finish is None else finish(session, exp.result())
        return out

    start.__name__, advance.__name__ = f"{name}_start", f"{name}_advance"
    EXPERIMENTS[name] = make
    endpoint(start)
    endpoint(advance)


def tasks_model(library) -> None:
    """A FieldError when the site was built without the tasks model."""
    if "tasks" not in library.datasets() or not library.has_model("transformer", "tasks", "bpe"):
        raise FieldError("dataset", "This site was built without the tasks model.")
