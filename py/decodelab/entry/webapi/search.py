"""The search chapter (`lesson.search`): beam search beside greedy and sampling, speculative
decoding round by round, and the acceptance experiment (planned by acceptance_start, run in
time-boxed batches by acceptance_advance)."""

from decodelab.entry.command import repeat
from decodelab.entry.webapi.registry import Session, endpoint, experiment
from decodelab.lesson.search import AcceptanceExperiment, beam_lesson_steps, speculative_lesson


@endpoint
def _beam(session: Session, req: dict):
    """{"settings": the workbench's, "beam": the beam fields} -> the search, its tree, and
    beam, greedy and sampled side by side; in slices (on the real model a search takes tens of
    seconds in the page)."""
    out = yield from beam_lesson_steps(session.library, req)
    return with_command(session, out)


@endpoint
def _speculate(session: Session, req: dict) -> dict:
    """{"settings": the workbench's, "draft": the draft fields} -> every round, and the run
    without the draft beside it."""
    return with_command(session, speculative_lesson(session.library, req))


def with_command(session: Session, out: dict) -> dict:
    """A search's reply with the command line that repeats its trace (entry.command)."""
    trace, library = out["trace"], session.library
    # (a model read from a file: the one the search ran on, unless the learner read another
    # meanwhile)
    opened = library.pretrained().info.get("opened") \
        if "engine" in trace and library.has_pretrained() else None
    return {**out, "command": repeat(library, trace["settings"], trace.get("engine"), None,
                                     opened)}


experiment("acceptance", AcceptanceExperiment, "No acceptance experiment has been started.")
