"""Answers with a shape (`lesson.shapes`): one card question answered four ways side by side,
and the JSON validity experiment, planned by validity_start and run by validity_advance."""

from decodelab.core.tasks import records
from decodelab.entry.webapi.registry import Session, endpoint, experiment, tasks_model
from decodelab.errors import FieldError
from decodelab.fields import read
from decodelab.lesson.shapes import ValidityExperiment, compare


def _validity(library, req: dict) -> ValidityExperiment:
    tasks_model(library)
    return ValidityExperiment(library, req)


experiment("validity", _validity, "No validity experiment has been started.")


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
