"""explain_step: one step of the run on screen taken apart, every stage of the rules in order
(`lesson.pipeline`), from the logits the run saw (`core.loops.replay`)."""

from decodelab.entry.webapi.registry import Session, endpoint
from decodelab.errors import FieldError
from decodelab.fields import read
from decodelab.lesson.pipeline import explain_step


@endpoint
def _explain_step(session: Session, req: dict):
    """{"step": i, "top_n": n} -> every stage of step i of the latest run; the calls up to it
    made again in slices (`core.loops.slices`: the real model's long prompt takes seconds)."""
    run = session.run
    n_steps = len(run.records) if run is not None else 0
    if n_steps == 0:
        raise FieldError("step", "Step: there is no run to explain yet; generate some text first.")
    values = read(req, ["step", "top_n"], {"step": {"max": n_steps - 1}})
    replay = session.replay_of(run)
    if run.records[values["step"]]["source"] != "tool":
        yield from replay.reach_steps(values["step"])
    return explain_step(run, replay, values["step"], values["top_n"])
