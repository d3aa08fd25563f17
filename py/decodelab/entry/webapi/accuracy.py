"""Right answers against temperature (`lesson.accuracy`): planned by accuracy_start, run in
time-boxed batches by accuracy_advance. On the real model the session keeps the last result of
each engine, and a result of the same plan on the other engine is set beside it."""

from decodelab.entry.webapi.registry import Session, experiment
from decodelab.lesson.accuracy import AccuracyExperiment, engines_compared, same_plan


def finish(session: Session, result: dict) -> dict:
    engine = result.get("engine")
    if engine is None:
        return result
    kept = session.finished.setdefault("accuracy", {})  # engine -> its last result
    other = next((r for e, r in kept.items() if e != engine and same_plan(r, result)), None)
    kept[engine] = result
    return {**result, "engines": engines_compared(other, result)} if other else result


experiment("accuracy", AccuracyExperiment, "No accuracy experiment has been started.", finish)
