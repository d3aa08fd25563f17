"""The batch view (`lesson.batch`): several prompts of different lengths decoded together,
left-padded, each row against the same prompt run alone. Its helpers serve the bugs lab too."""

from decodelab.core.rules.settings import Settings
from decodelab.entry.webapi.registry import Session, endpoint
from decodelab.errors import FieldError
from decodelab.fields import check, encode, from_file, read
from decodelab.lesson import batch


def lab_model(session: Session, req: dict):
    """The transformer of the request's dataset and tokenizer, or with "model": "smollm2" the
    real model (once loaded; a pretrained model brings its own tokenizer)."""
    dataset = session.dataset(req)
    if from_file(req.get("model")):
        return session.library.pretrained(), dataset
    tokenizer = check("tokenizer", req.get("tokenizer", Settings.tokenizer))
    return session.library.model("transformer", dataset, tokenizer), dataset


def batch_prompts(model, req: dict) -> tuple:
    texts = read(req, ["prompts"])["prompts"]
    return texts, [encode(model.tokenizer, "prompts", t, entry=i) for i, t in
                   enumerate(texts, 1)]


def fits(model, field: str, what: str, need: int) -> None:
    """The batch and the check run without a context shift: refuse what would need one."""
    if need > model.context_size:
        raise FieldError(field, f"{what} need {need} positions; this model's context holds "
                                f"{model.context_size}. Use fewer steps or shorter prompts.")


@endpoint
def _batch_view(session: Session, req: dict) -> dict:
    """{"dataset", "prompts": [2..6 texts], "batch_steps", "seed"} -> the padded batch, slot
    by slot, and each row's largest difference from the same prompt run alone."""
    model, dataset = lab_model(session, req)
    texts, ids = batch_prompts(model, req)
    values = read(req, ["batch_steps", "seed"])
    steps = values["batch_steps"]
    fits(model, "batch_steps", f"Batch steps: the longest prompt and {steps} steps",
          max(len(p) for p in ids) + steps)  # EOS + longest prompt + steps - 1 decodes
    result = batch.batch_run(model, ids, steps, values["seed"])
    return {"dataset": dataset, **batch.describe(model, texts, result)}
