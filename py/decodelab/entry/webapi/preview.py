"""preview: the next token under the rules being set, before anything is generated: at a step of
the run on screen (its logits and its tokens so far), or at the end of the prompt."""

from decodelab.core.loops.generate import Generation, prepare
from decodelab.core.rules.settings import validate
from decodelab.core.loops.slices import Slices
from decodelab.entry.webapi.registry import Session, endpoint
from decodelab.errors import FieldError
from decodelab.fields import check
from decodelab.lesson.pipeline import explain


@endpoint
def _preview(session: Session, req: dict):
    """{"settings", "step"} -> the next token's distribution under these settings, before any
    run: at `step` of the run on screen, or, without a step, at the end of the prompt (a run
    of these settings, not started: its first step). What the page redraws while the learner
    drags a rule."""
    run, step = session.run, req.get("step")
    if step is not None and run is not None and run.records:
        settings = validate(req.get("settings", {}), datasets=session.datasets())
        step = check("step", step, max=len(run.records) - 1)
        if run.records[step]["source"] == "tool":
            raise FieldError("step", f"Step {step + 1} was appended by the tool, not chosen: no "
                                     f"rule applies to it. Select one of the model's steps.")
        replay = session.replay_of(run)
        yield from replay.reach_steps(step)  # (a long prompt's prefill made again: sliced)
        if settings.rules == run.rules and settings.eos_blocked(run.made_before[step]) == \
                run.settings.eos_blocked(run.made_before[step]):
            d = replay.decision(step)  # the rules the run applied: its own decision
        else:
            d = run.decide(step, replay.logits_at(step), settings=settings)
        return {"step": step, **explain(d, run.tokenizer.label)}
    # the run these settings would make, not started: checked as a start checks it (once: an
    # empty prompt is refused by name for a model with no start token of its own)
    settings, model, prompt = prepare(session.library, req.get("settings", {}))
    ahead = Generation(model, settings, prompt=prompt)
    key = (settings.model, settings.dataset, settings.tokenizer, settings.prompt,
           settings.token_healing)
    if session.prompt_logits is None or session.prompt_logits[0] != key:
        # the prompt read a chunk a slice (`core.loops.slices`: for the real model a long prompt
        # takes seconds); previews asked meanwhile of the same prompt share the one reading
        if session.prompt_reading is None or session.prompt_reading[0] != key:
            reading = Slices(model.session().prefill_steps(ahead.prompt_ids))
            session.prompt_reading = (key, reading)
        reading = session.prompt_reading[1]
        while not reading.run(0.0):
            yield None
        session.prompt_logits = (key, reading.result.copy())
    d = ahead.decide(0, session.prompt_logits[1])
    return {"step": 0, **explain(d, model.tokenizer.label)}
