"""The temperature experiment (`lesson.experiment`): planned by experiment_start, run in
time-boxed batches by experiment_advance."""

from decodelab.entry.webapi.registry import Session, advance_planned, endpoint
from decodelab.lesson.experiment import Experiment


@endpoint
def _experiment_start(session: Session, req: dict) -> dict:
    """Check an experiment request and plan its runs; experiment_advance then does them."""
    session.experiment = Experiment(session.library, req)
    return {"done": False, "progress": session.experiment.progress()}


@endpoint
def _experiment_advance(session: Session, req: dict) -> dict:
    """{"budget_ms"} -> samples run for about that long (at least one); the result comes with
    the last batch."""
    return advance_planned(session.experiment, req, "No experiment has been started.")
