"""What a cache is not: the tasks model's cache of a question, reused after appending tokens
(valid) and after changing one digit of the question (not valid), each against a full
recomputation (`core.models.checks.reuse_check`)."""

from decodelab.core.tasks import data as tasks
from decodelab.core.models.checks import reuse_check
from decodelab.entry.webapi.registry import Session, endpoint, tasks_model
from decodelab.errors import FieldError
from decodelab.fields import check

REUSE_QUESTION = "What is 12 plus 7?"  # the reuse check's question, and what follows it
REUSE_APPENDED = "12+7"


@endpoint
def _reuse_check(session: Session, req: dict) -> dict:
    """What a cache is not: the tasks model's cache of a question, reused after appending (the
    start of its answer) and after changing one digit of the question; each against a full
    recomputation (checks.reuse_check)."""
    question = check("question", req.get("question", REUSE_QUESTION))
    library = session.library
    tasks_model(library)
    model = library.model("transformer", "tasks", "bpe")
    tok = model.tokenizer
    prompt = tasks.question_ids(tok, question, field="question")
    # the first token that is one digit alone becomes another digit
    digits = [i for i, t in enumerate(prompt) if len(tok.label(t)) == 1 and tok.label(t).isdigit()]
    if not digits:
        raise FieldError("question", "Question: it needs a number, to change one digit of it.")
    at = digits[0]
    old = tok.label(prompt[at])
    new_text = "9" if old != "9" else "8"
    appended = [tok.special_ids[tasks.CALL]] + tok.encode(REUSE_APPENDED)
    new_id = tok.encode(new_text)[0]
    out = reuse_check(model, prompt, appended, at, new_id)
    labels = [tok.label(i) for i in prompt]
    out.update(question=question, tokens=labels, appended_tokens=[tok.label(i) for i in appended],
               edited_question=tok.decode(prompt[1:at] + [new_id] + prompt[at + 1:-1]),
               old_text=old, new_text=new_text)
    return out
