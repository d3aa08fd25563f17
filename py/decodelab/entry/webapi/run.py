"""A run of the workbench: its settings checked as the learner types them (`check`), then
started, advanced in time-boxed batches, cancelled, and its trace; a run made again in a new
Python after a restart; the warm-up run; and a bigram counted from the learner's own text.

Every batch says what the page draws next (`flow`): the newly shown characters with the step
that owns each, and where a tool call's tokens sit between them; and what is not shown, with
its steps: held back for a possible stop string while the run goes on, cut by one at the end
(`core.rules.textout`). The page draws exactly that.
"""

import json
import time

from decodelab.core.rules import sampling
from decodelab.core.tokens.corpus import corpus_from_text
from decodelab.core.loops.generate import Generation, prepare
from decodelab.core.loops.generate import start as start_generation
from decodelab.core.models.checks import check_tolerance
from decodelab.core.models.kvcache import cache_shape
from decodelab.core.rules.settings import NAMES, Settings, check_each, engine_json, run_json
from decodelab.core.loops.slices import drain
from decodelab.entry.command import repeat
from decodelab.entry.webapi.catalog import dataset_info
from decodelab.entry.webapi.registry import MAX_BUDGET_MS, Session, deadline, endpoint
from decodelab.errors import FieldError, FieldErrors
from decodelab.fields import FIELD_BY_NAME, check, default, error_json, from_file, label_of, read
from decodelab.pretrained.limits import RECOMMENDED, RECOMMENDED_FROM

# A short run of each model with every rule switched on. In the browser, WebAssembly starts in a
# quick baseline compiler and recompiles each function that gets hot with the optimizing one, on
# background threads. The first real run would pay for that: the recompiling takes the processor
# from the page while it draws. Warming up as soon as the page has opened, while the learner
# reads, moves the cost there (see `warm_up`).
WARM_UP = (
    {"model": "bigram", "max_new_tokens": 300, "ignore_eos": True, "temperature": 0.8,
     "top_k": 20, "top_p": 0.95, "min_p": 0.01, "repetition_penalty": 1.1, "stop": ["qq"]},
    {"model": "transformer", "max_new_tokens": 24, "ignore_eos": True, "top_k": 20,
     "cache_check": True},
)


# what the prompt becomes when the learner picks the real model with none typed
PRETRAINED_PROMPT = "The three primary colours are"

NOT_USED = {"greedy": "Not used in greedy mode.", "temperature": "Not used: greedy is on.",
            "zero": "Not used: temperature 0 means greedy."}


@endpoint
def _check(session: Session, req: dict) -> dict:
    """{"settings": the form's raw values, "bad_input": [names of number boxes holding no
    number], "changed": the field just changed} -> what a run of them would meet, without
    starting one: every error a start would report (each field on its own, then together and
    against the model), the values that passed, whether the run would be greedy and which
    settings that leaves unused (with the sentence to show), and `adjust`: the values the form
    should take after a change of dataset (the dataset's own tokenizer; a question to start
    from, for a model that answers questions)."""
    raw = req.get("settings", {})
    if not isinstance(raw, dict):
        raise FieldError("settings", "Settings must be an object of name: value.")
    bad_input = req.get("bad_input") or []
    raw = dict(raw)
    adjust, said = _adjust(session, raw, req.get("changed"))
    raw.update(adjust)
    # each field on its own first (the values that passed are the form's), then everything a
    # start checks: one error per field, the first found
    values, own = check_each(raw, session.datasets(), bad_input)
    errors = {}
    try:
        prepare(session.library, raw, bad_input)
    except FieldErrors as e:
        own += e.errors
    for e in own:
        errors.setdefault(e.field, e)
    greedy = sampling.Rules(values.get("temperature", Settings.temperature),
                            values.get("greedy", Settings.greedy)).is_greedy
    by_flag = values.get("greedy", False)
    not_used = {}
    if greedy:
        for name in sampling.GREEDY_IGNORES:
            not_used[name] = NOT_USED["temperature" if name == "temperature" else "greedy"] \
                if by_flag else NOT_USED["zero"]
        if not by_flag:
            del not_used["temperature"]
    # the settings that apply to this model and data: the cache check to the transformer (only
    # it has a cache), the tool calls to a model that calls tools (its tokens have the markers)
    dataset = values.get("dataset", Settings.dataset)
    model = values.get("model", Settings.model)
    own = from_file(model)  # a model with its own tokenizer and training data
    applies = {"cache_check": model != "bigram",  # a model with a KV cache
               "tools": not own and dataset in session.datasets()
               and session.library.bpe_only(dataset),
               "dataset": not own, "tokenizer": not own}
    return {"errors": [error_json(e) for e in errors.values()],
            # a value that waits for the learner (library.NotLoaded) passed: it is the form's
            "values": {n: _json(values[n]) for n in NAMES if n in values
                       and (n not in errors or getattr(errors[n], "pending", None))},
            "greedy": greedy, "not_used": not_used, "applies": applies, "adjust": adjust,
            "said": said}


def _json(value):
    return list(value) if isinstance(value, tuple) else value


def _word(name: str, value) -> str:
    """A choice in the page's words: _word("tokenizer", "bpe") -> "Byte-level BPE"."""
    f = FIELD_BY_NAME[name]
    return dict(zip(f.choices, f.choice_labels)).get(value, str(value))


def _adjust(session: Session, raw: dict, changed) -> tuple:
    """What the other settings become after a change, and why in words ({field: sentence}).

    A change of model to the real one with no prompt: a prompt to continue (it has no start
    token of its own, so an empty prompt gives it nothing to read).

    A change of dataset: its own tokenizer when the one set is not one it reads, and its sample
    question as the prompt when it answers questions and the prompt is empty. A change of
    tokenizer to one the dataset has not got: the first dataset that has it (byte-level BPE
    takes the prose), so a choice on the page never leads to a refusal."""
    catalog = session.datasets()
    dataset = raw.get("dataset")
    out, said = {}, {}
    prompt = raw.get("prompt", "")
    if changed == "model":
        out, said = _recommended(raw)
    if changed == "model" and from_file(raw.get("model")) and isinstance(prompt, str) \
            and not prompt.strip():
        out["prompt"] = PRETRAINED_PROMPT  # it has no start token of its own to begin from
    if changed == "model" and from_file(raw.get("model")):
        return out, said
    if changed == "tokenizer" and dataset in catalog:
        tokenizer = raw.get("tokenizer")
        if tokenizer not in catalog[dataset]:
            other = next((d for d, readers in catalog.items() if tokenizer in readers), None)
            if other is not None:
                out["dataset"] = raw["dataset"] = other
                said["dataset"] = (f"{_word('tokenizer', tokenizer)} is not made for the "
                                   f"{dataset} data, so Dataset is now {other}, which has it.")
                changed = "dataset"  # and the rest follows the new dataset
    if changed != "dataset" or dataset not in catalog:
        return out, said
    dataset = raw["dataset"]
    readers = catalog[dataset]
    if raw.get("tokenizer", Settings.tokenizer) not in readers:
        out["tokenizer"] = readers[0]
        said["tokenizer"] = (f"The {dataset} data is read as {_word('tokenizer', readers[0])} "
                             f"only, so Tokenizer is now {_word('tokenizer', readers[0])}.")
    info = dataset_info(session.library, dataset)
    prompt = raw.get("prompt", "")
    if info["tools"] and isinstance(prompt, str) and not prompt.strip() and info["sample_question"]:
        out["prompt"] = info["sample_question"]
    return out, said


def _recommended(raw: dict) -> tuple:
    """A change of model to a chat model: the sampling settings still at the workbench's
    defaults take the model's recommended ones (pretrained.limits.RECOMMENDED); a change back
    puts those still at the recommended values back to the workbench's. What the learner set
    stays as it is."""
    chat = from_file(raw.get("model"))
    out = {}
    for name, value in RECOMMENDED.items():
        was, now = (default(name), value) if chat else (value, default(name))
        try:
            if check(name, raw.get(name, default(name))) == was:
                out[name] = now
        except FieldError:
            continue  # (a value that is wrong stays, with its own error)
    if not out:
        return out, {}
    words = ", ".join(f"{label_of(n)} {v:g}" for n, v in out.items())
    said = (f"SmolLM2 starts from {RECOMMENDED_FROM}: {words}." if chat else
            f"The trained models start from the workbench's own settings: {words}.")
    return out, {name: said for name in out}


@endpoint
def _start(session: Session, req: dict) -> dict:
    """The settings -> a new run (the previous run and its output stay until this succeeds);
    with "messages", a chat turn of the real model (webapi.pretrained.chat_start)."""
    if isinstance(req, dict) and "messages" in req:
        from decodelab.entry.webapi.pretrained import chat_start

        run = chat_start(session, req)
    else:
        run = start_generation(session.library, req)
    if not isinstance(run, Generation):
        field = "strategy" if run.strategy == "beam" else "draft"
        raise FieldError(field, "The workbench runs one path, a step at a time: beam search "
                                "and a draft model run in the chapter Beam search and drafts, "
                                "with the workbench's settings.")
    session.run = run
    pieces, healed = run.prompt_pieces()
    engine = engine_json(run.model)  # (a model read from a file: the engine it runs on)
    out = {"settings": run.settings.to_json(), "prompt_tokens": pieces, "healed": healed,
           "greedy": run.rules.is_greedy, "vocab_size": run.tokenizer.vocab_size, **engine,
           # the command line that repeats it, for the page to show once it has run
           "command": repeat(session.library, run_json(run.settings, run.model),
                             engine.get("engine"),
                             run.chat.messages if run.chat is not None else None,
                             run.model.info.get("opened") if run.model.own_data else None)}
    if run.model.kind != "bigram":  # its KV cache, and the live check's limit for its logits
        out["cache"] = {**cache_shape(run.model), "tolerance": check_tolerance(run.model)}
    if run.chat is not None:  # a chat turn: its prompt's tokens (the special ones marked), how
        # many of them the last turn's cache holds, and how many the window had no room for
        from decodelab.pretrained.chat import dropped

        tok = run.tokenizer
        out["chat"] = {"prompt_tokens": len(run.prompt_ids),
                       "tokens": [[tok.label(i), tok.is_special(i)] for i in run.prompt_ids],
                       "reused": len(run.prefix.ids) if run.prefix is not None else 0,
                       "dropped": dropped(run.model, run.prompt_ids),
                       "window": run.model.cfg.context_size}
    return out


def cache_bytes(run):
    """The bytes the run's KV cache holds allocated now (a cache that grows by blocks, as the
    real model's, holds more as the run goes on), or None for a run without one."""
    cache = getattr(getattr(run, "session", None), "cache", None)
    return getattr(cache, "bytes_allocated", None)


def _status(run, steps, checking: bool = False) -> dict:
    """A batch of a run: its steps, what the page draws next (flow), and the text not shown:
    held back for a possible stop string (while it runs), cut by a stop string (at the end).
    checking: the text has ended with this batch and the live check has yet to catch up; the
    batch says so (done false, checking true) and the next one, after the check, is the last."""
    ended = run is None or run.done
    if ended and run is not None and not checking:
        run.finish_checks()  # the live check runs behind the text: it ends with it
    done = ended and not checking
    return {"steps": steps, "done": done, "checking": checking,
            # the live check's verdicts reached since the last batch: [[step, diff, ok], ...]
            "checks": run.take_checks() if run else [],
            "cache_bytes": cache_bytes(run),
            "finish_reason": run and run.finish_reason, "stop_reason": run and run.stop_reason,
            "text": run.text if run else "",
            "flow": run.out.take_flow() if run else [],
            "held": run.out.held() if run and not ended else [],
            "cut": run.out.cut() if run and done else [],
            # an answer meant to be JSON, classified once the run is over
            "json": run.json_report() if run and done else None,
            # steps whose live check was given up: a new run was asked for meanwhile
            "check_skipped": run.checks_skipped if run and done else 0}


@endpoint
def _advance(session: Session, req: dict) -> dict:
    """{"budget_ms", "catch_up"} -> the step records made in about that time (at least one
    step). A long prompt is read first, a chunk at a time (`Generation.read_prompt`): its
    batches have no steps and say how much is read ("reading"). The live check of the steps
    follows behind (`core.loops.livecheck`); with catch_up (slow motion, where a pause follows each
    step anyway) it catches up before the batch returns. The batch that ends the text goes out
    at once, and the check's catching up (for the real model a full pass over the whole
    window: seconds) is the next batches' work, a chunk of the pass at a time, so the page
    shows the whole answer, says that the check is running, and is answered meanwhile."""
    end, run, steps = deadline(req), session.run, []

    def left() -> float:
        return max(end - time.perf_counter(), 0.0)

    if run is not None and not run.done and not run.read_prompt(left()):
        return dict(_status(run, [], checking=False), reading=run.prompt_read)
    for record in run if run is not None and not run.done else ():  # (a finished run's
        # generator is not resumed: its end would catch the live check up in one go)
        steps.append(record)
        if run.done or time.perf_counter() >= end:
            break
    if run is not None and req.get("catch_up"):
        run.finish_checks()
    elif run is not None and run.done and not steps:
        run.check_until(left())
    if run is not None and run.done:
        session.last = run
    return _status(run, steps, checking=run is not None and run.checking)


@endpoint
def _cancel(session: Session, req: dict) -> dict:
    """{"budget_ms", "skip_check"} -> the run stopped between two steps (or while it reads its
    prompt), and the live check of the steps it made caught up for about that long: while it
    has more to do the batch says checking, and the page asks again. skip_check: the check's
    pending steps are given up instead (the learner asked for the next run while the check
    caught up: a new run never waits for the last one's check); the batch says how many
    ("check_skipped")."""
    run = session.run
    if run is not None:
        run.cancel(check=False)  # text held back for a stop string is shown (in the flow)
        if req.get("skip_check") is True:
            run.skip_checks()
        else:
            run.check_until(max(deadline(req) - time.perf_counter(), 0.0))
        session.last = run
    return _status(run, [], checking=run is not None and run.checking)


@endpoint
def _trace(session: Session, req: dict):
    """The last finished run's trace; its live check caught up first, a chunk of a pass a
    slice (`core.loops.slices`: for the real model, seconds)."""
    last = session.last
    if last is None:
        return {"trace": None}
    while not last.check_until(0.0):
        yield None
    chat = getattr(last, "chat", None)  # a chat turn's trace is `chat`'s (a search has none)
    return {"trace": last.model.template.trace(last.trace(), chat) if chat else last.trace()}


@endpoint
def _restore_start(session: Session, req: dict) -> dict:
    """{"settings", "steps"} -> start making the run the page shows again, in this Python.

    When the page replaces a worker that crashed, the new Python knows no run: Export trace and
    the lesson's view of a step would have nothing to work on. A run is a pure function of its
    settings (the seed included), so running the same settings for the same number of steps
    (cancelled there, if the learner had stopped it) gives back the very same run. The worker
    does it in time-boxed batches (restore_advance), so it keeps answering the page, and gives
    it up if the learner starts a new run. The page compares the text and the step count before
    it relies on the result.
    """
    steps = read(req, ["steps"])["steps"]
    session.restoring = (start_generation(session.library, req.get("settings")), steps)
    return {"done": False, "steps": 0}


@endpoint
def _restore_advance(session: Session, req: dict) -> dict:
    """{"budget_ms"} -> run the restore's steps for about that long (at least one); at the end,
    the run becomes the latest one, as if it had just been generated here."""
    if session.restoring is None:
        raise FieldError("steps", "There is no run being restored; call restore_start first.")
    end = deadline(req)
    run, steps = session.restoring
    while len(run.records) < steps and not run.done:
        if not run.read_prompt(max(end - time.perf_counter(), 0.0)):
            break  # a long prompt: read a chunk at a time
        next(run, None)
        if time.perf_counter() >= end:
            break
    if len(run.records) < steps and not run.done:
        return {"done": False, "steps": len(run.records)}
    run.cancel()  # a run that already ended keeps its own finish reason
    session.restoring = None
    session.run = session.last = run
    return {"done": True, "steps": len(run.records), "text": run.text,
            "finish_reason": run.finish_reason, "stop_reason": run.stop_reason}


@endpoint
def _train(session: Session, req: dict) -> dict:
    """{"text"} -> a bigram counted from the learner's own text, as the dataset "custom"."""
    corpus = corpus_from_text(req.get("text"), "custom")
    session.library.add_custom(corpus)
    return {"dataset": dataset_info(session.library, corpus.name)}


@endpoint
def _warm_up(session: Session, req: dict) -> dict:
    """Run WARM_UP through the same code a page's run takes, in a session of its own, with its
    step records serialized as the worker sends them; the page's session is left as it was."""
    t0 = time.perf_counter()
    steps, models, scratch = 0, [], Session(session.library)
    for settings in WARM_UP:
        if not session.library.has_model(settings["model"], Settings.dataset):
            continue
        _start(scratch, dict(settings, dataset=Settings.dataset))
        done = False
        while not done:
            out = _advance(scratch, {"budget_ms": MAX_BUDGET_MS})
            json.dumps(out)
            steps, done = steps + len(out["steps"]), out["done"]
        json.dumps(drain(_trace(scratch, {})))
        models.append(settings["model"])
    return {"steps": steps, "models": models, "ms": round((time.perf_counter() - t0) * 1000)}
