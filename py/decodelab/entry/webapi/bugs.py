"""Break it on purpose (`lesson.bugs`): one classic KV-cache bug injected, and the check that
catches it run, with the sentence on what went wrong.

The bugs are imported inside the endpoint alone: a page that never breaks its cache on purpose
never even loads them (a test holds the normal path to that)."""

from decodelab.entry.webapi.batch import batch_prompts, fits, lab_model
from decodelab.entry.webapi.registry import Session, endpoint
from decodelab.errors import FieldError
from decodelab.fields import encode, read
from decodelab.lesson import batch


@endpoint
def _break_it(session: Session, req: dict):
    """{"bug", "dataset", "model", "test_prompt", "check_steps", "seed", "prompts"} -> the
    check that catches the bug, run with it injected (bugs.run_bug), what the model writes with
    it and without it, and the sentence on what went wrong. "model": "smollm2" runs the real
    model (loaded in the page first); otherwise the dataset's transformer."""
    from decodelab.lesson import bugs

    values = read(req, ["bug", "test_prompt", "check_steps", "seed"])
    model, dataset = lab_model(session, req)
    bug, steps = values["bug"], values["check_steps"]
    ids = encode(model.tokenizer, "test_prompt", values["test_prompt"])
    most = model.limits.get("check_steps")
    if most is not None and steps > most:
        raise FieldError("check_steps", f"Check steps: with {model.label} at "
                                        f"most {most} here: each step's check is a "
                                        f"full pass over the text, about a second each in the "
                                        f"page; got {steps}.")
    if not ids and not model.tokenizer.start_ids:
        raise FieldError("test_prompt", "Test prompt: this model starts a sequence with no token "
                                        "of its own, so it needs a prompt; type something.")
    texts, batch_ids = None, None
    if bug == "unmasked-padding":
        texts, batch_ids = batch_prompts(model, req)
        if len({len(p) for p in batch_ids}) < 2:
            raise FieldError("prompts", "Batch prompts: padding only appears when the prompts "
                                        "differ in length; make one shorter.")
        fits(model, "check_steps", f"Check steps: the longest batch prompt and {steps} steps",
              max(len(p) for p in batch_ids) + 1 + steps)
    else:
        fits(model, "check_steps", f"Check steps: the test prompt and {steps} steps",
              len(ids) + 1 + steps)
    out = yield from bugs.run_bug_steps(model, bug, ids, steps, values["seed"],
                                        batch_prompts=batch_ids)
    if out["check"] == "batch":
        out["batch"] = batch.describe(model, texts, out["batch"])
    return {"dataset": dataset, "test_prompt": values["test_prompt"], **out}
