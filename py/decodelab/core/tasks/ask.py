"""Asking the tasks model a question: one run with the tool-call protocol, its visible answer,
the calls it made, whether the answer is right, and, for an answer meant to be JSON (a card
question, or JSON mode on), whether it is valid, cut short or malformed.

`ask` is the CLI's `ask` and the page's question box: the question is the prompt (generation
wraps it in the question template), the dataset is `tasks`, and the answer is the text the
model wrote for the reader, without the special tokens, the call or the tool's result (those
are in `tool_calls` and in the trace's steps).
"""

from decodelab.core.tasks import records, data as tasks
from decodelab.core.loops.generate import start
from decodelab.core.rules.sampling import FILTER_NAMES
from decodelab.errors import FieldError, FieldErrors
from decodelab.fields import check

# the settings `ask` takes besides the question (the rest keep their defaults)
ASK_SETTINGS = ("model", "seed", "temperature", "greedy", *FILTER_NAMES, "tools", "json_mode",
                "json_max_depth", "max_new_tokens", "cache_check")


def ask(library, raw: dict) -> dict:
    """{"question", and any of ASK_SETTINGS} -> the answer. FieldErrors name bad fields."""
    if not isinstance(raw, dict):
        raise FieldErrors([FieldError("request", "The request must be a JSON object of name: "
                                                 "value.")])
    errors = []
    try:
        question = check("question", raw.get("question", ""))
        if not question.strip():
            raise FieldError("question", "Question: ask something, e.g. What is 12 plus 7?")
    except FieldError as e:
        errors.append(e)
        question = ""
    unknown = [k for k in raw if k != "question" and k not in ASK_SETTINGS]
    errors += [FieldError(k, f"Unknown setting {k!r} for a question; known: question, "
                             f"{', '.join(ASK_SETTINGS)}.") for k in unknown]
    settings = {"model": "transformer", **{k: raw[k] for k in ASK_SETTINGS if k in raw},
                "dataset": "tasks", "tokenizer": "bpe", "prompt": question or "?"}
    try:
        run = start(library, settings)
    except FieldErrors as e:
        errors += [FieldError("question", err.message) if err.field == "prompt" else err
                   for err in e.errors]
    if errors:
        raise FieldErrors(errors)
    run.run()
    return answer_of(run, question)


def answer_of(run, question: str) -> dict:
    """The answer and its grade: for a card question the parsed object against the right one,
    for arithmetic the number stated against the true result; `json` classifies the shape."""
    trace = run.trace()
    shape = trace["json"]
    card = records.true_record(question)
    if card is not None:
        expected, stated = card, shape["value"]
        correct = bool(records.grade(question, stated))
    elif shape["status"] is not None:  # JSON by its content, to a question no grader knows
        expected, stated, correct = None, shape["value"], None
    else:
        expected, stated = tasks.true_result(question), tasks.stated_number(run.text)
        correct = tasks.grade(question, run.text)
    return {"question": question, "answer": run.text, "tool_calls": trace["tool_calls"],
            "finish_reason": run.finish_reason, "stop_reason": run.stop_reason,
            "json": shape, "expected": expected, "stated": stated, "correct": correct,
            "trace": trace}
