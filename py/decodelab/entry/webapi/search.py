"""The search chapter (`lesson.search`): beam search beside greedy and sampling, speculative
decoding round by round, and the acceptance experiment (planned by acceptance_start, run in
time-boxed batches by acceptance_advance)."""

from decodelab.entry.webapi.registry import Session, advance_planned, endpoint
from decodelab.lesson.search import AcceptanceExperiment, beam_lesson, speculative_lesson


@endpoint
def _beam(session: Session, req: dict) -> dict:
    """{"settings": the workbench's, "beam": the beam fields} -> the search, its tree, and
    beam, greedy and sampled side by side."""
    return beam_lesson(session.library, req)


@endpoint
def _speculate(session: Session, req: dict) -> dict:
    """{"settings": the workbench's, "draft": the draft fields} -> every round, and the run
    without the draft beside it."""
    return speculative_lesson(session.library, req)


@endpoint
def _acceptance_start(session: Session, req: dict) -> dict:
    """Check an acceptance experiment and plan its runs; acceptance_advance then does them."""
    session.acceptance = AcceptanceExperiment(session.library, req)
    return {"done": False, "progress": session.acceptance.progress()}


@endpoint
def _acceptance_advance(session: Session, req: dict) -> dict:
    """{"budget_ms"} -> runs made for about that long (at least one); the result comes with the
    last batch."""
    return advance_planned(session.acceptance, req,
                           "No acceptance experiment has been started.")
