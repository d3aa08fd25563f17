"""The rules on numbers the learner types: probs (the CLI's `probs` too) and explain_values
(every stage, for the page's playground), both from `lesson.playground`."""

from decodelab.entry.webapi.registry import Session, endpoint
from decodelab.lesson.playground import explain_values, probs


@endpoint
def _probs(session: Session, req: dict) -> dict:
    """Typed logits or probabilities through the rules (the CLI's `probs`)."""
    return probs(req)


@endpoint
def _explain_values(session: Session, req: dict) -> dict:
    """The playground: typed logits or probabilities through every stage of the rules."""
    return explain_values(req)
