"""The serving chapter (`lesson.serving`): a workload served from a paged cache with a prefix
tree and continuous batching, checked and planned by serving_start, made a few scheduler steps
at a time by serving_advance (progress, Stop); the result has a frame per step."""

from decodelab.entry.webapi.registry import Session, advance_planned, endpoint
from decodelab.lesson.serving import Serving


@endpoint
def _serving_start(session: Session, req: dict) -> dict:
    """{"dataset", "tokenizer", "requests", "block_size", "seed", "memory_blocks",
    "max_running", "parallel_samples", "workload"} -> checked; serving_advance makes it."""
    session.serving = Serving(session.library, req)
    return {"done": False, "progress": session.serving.progress()}


@endpoint
def _serving_advance(session: Session, req: dict) -> dict:
    """{"budget_ms"} -> scheduler steps made for about that long (at least one); the result,
    with its frames, comes with the last batch."""
    return advance_planned(session.serving, req, "No serving run has been started.")
