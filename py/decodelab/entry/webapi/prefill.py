"""The prompt's prefill, row by row (`lesson.prefill`): the logits at every position of one
forward pass, each row's likeliest next token against the one that follows."""

from decodelab.core.rules.settings import validate
from decodelab.entry.webapi.registry import Session, endpoint
from decodelab.fields import encode
from decodelab.lesson import prefill


@endpoint
def _prefill(session: Session, req: dict) -> dict:
    """{"settings"} -> the prompt's prefill, row by row: the logits at every position, each
    row's likeliest next token against the one that follows (prefill.rows)."""
    settings = validate(req.get("settings", {}), datasets=session.datasets())
    model = session.library.for_settings(settings)
    ids = encode(model.tokenizer, "prompt", settings.prompt)
    return prefill.rows(model, ids)
