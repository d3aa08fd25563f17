"""Answers with a shape (`lesson.shapes`): one card question answered four ways side by side,
and the JSON validity experiment, planned by validity_start and run by validity_advance."""

from decodelab.core import records
from decodelab.entry.webapi.registry import (
    Session,
    advance_planned,
    endpoint,
    tasks_model,
)
from decodelab.errors import FieldError
from decodelab.fields import read
from decodelab.lesson.shapes import ValidityExperiment, compare


@endpoint
def _validity_start(session: Session, req: dict) -> dict:
    """Check a JSON validity experiment request and plan its runs; validity_advance does them."""
    session.validity = None  # a refused request leaves no half-planned experiment behind
    tasks_model(session.library)
    session.validity = ValidityExperiment(session.library, req)
    return {"done": False, "progress": session.validity.progress()}


@endpoint
def _validity_advance(session: Session, req: dict) -> dict:
    """{"budget_ms"} -> runs for about that long (at least one); the result comes last."""
    return advance_planned(session.validity, req, "No validity experiment has been started.")


@endpoint
def _shapes(session: Session, req: dict) -> dict:
    """{"question", "seed"} -> one card question answered each way of validity.WAYS, side by
    side, each answer classified."""
    tasks_model(session.library)
    values = read(req, ["question", "seed"])
    if records.true_record(values["question"]) is None:
        raise FieldError("question", "Question: ask a card question, e.g. Card for \"Ada\", "
                                     "age 31, from \"Paris\". The name (capitalised) and the "
                                     "city go in quotes, and the age is from 1 to 99.")
    return {"question": values["question"], "ways": compare(session.library, values["question"],
                                                            values["seed"])}
