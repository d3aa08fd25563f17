"""Right answers against temperature (`lesson.accuracy`): planned by accuracy_start, run in
time-boxed batches by accuracy_advance."""

from decodelab.entry.webapi.registry import Session, advance_planned, endpoint
from decodelab.lesson.accuracy import AccuracyExperiment


@endpoint
def _accuracy_start(session: Session, req: dict) -> dict:
    """Check an accuracy experiment request and plan its runs; accuracy_advance does them."""
    session.accuracy = None  # a refused request leaves no half-planned experiment behind
    session.accuracy = AccuracyExperiment(session.library, req)
    return {"done": False, "progress": session.accuracy.progress()}


@endpoint
def _accuracy_advance(session: Session, req: dict) -> dict:
    """{"budget_ms"} -> runs for about that long (at least one); the result comes with the
    last batch."""
    return advance_planned(session.accuracy, req, "No accuracy experiment has been started.")
