"""What the browser worker calls: one function, `call(endpoint, request_json, session)`, JSON
text in, JSON text out.

Only strings cross the JavaScript boundary (no Python objects held by JS, nothing to leak). Every
request is a JSON object read by one parser, every reply is {"ok": true, ...} or {"ok": false,
"errors": [{"field", "label", "message"}, ...]} from one error path, and ENDPOINTS is the table
of what can be asked. A page's state (its run, the last finished run, the lesson's replay and
experiment, a run being made again) lives in a `Session`, one per page; `setup` opens one.

Generation is driven from JavaScript in short time-budgeted batches (`advance`), so the worker
reads a Stop message between batches. One run at a time per session.

The CLI does not use this module; both go through `generate.start`.
"""

import json
import time

import numpy as np

from decodelab import __version__, grammar, healing, jsonshape, metrics, records, tasks
from decodelab.accuracy import DEFAULTS as ACCURACY_DEFAULTS
from decodelab.accuracy import AccuracyExperiment
from decodelab.validity import DEFAULTS as VALIDITY_DEFAULTS
from decodelab.assets import Library
from decodelab.bpe import FIRST_MERGE
from decodelab.corpus import corpus_from_text
from decodelab.fields import (FIELDS, MODELS, FieldError, FieldErrors, check, encode, label_of,
                              read)
from decodelab.generate import TOP_N
from decodelab.generate import start as start_generation
from decodelab.inference import CHECK_TOLERANCE, SESSION_DTYPE
from decodelab.kvcache import kv_cache_bytes
from decodelab import sampling
from decodelab.pipeline import Replay, explain
from decodelab.playground import explain_values, probs
from decodelab.settings import Settings, validate

MODEL_LABELS = {"bigram": "Bigram (counts)", "transformer": "Transformer (KV cache)"}
COMPARE_MAX_TOKENS = 500  # the side-by-side run is not cancellable: keep it short
MAX_BUDGET_MS = 500  # the longest batch a page may ask for

REUSE_QUESTION = "What is 12 plus 7?"  # the reuse check's question, and what follows it
REUSE_APPENDED = "12+7"

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


class Session:
    """One page's state: the run on screen, the last finished run, the lesson's replay and
    experiment, and a run being made again after a restart."""

    def __init__(self, library: Library):
        self.library = library
        self.run = None  # the run in progress, or the latest
        self.last = None  # the last run that finished, for Export trace
        self.restoring = None  # (run, steps): a run being made again (restore_start)
        self.replay = None  # pipeline.Replay of the latest run, for the lesson
        self.experiment = None  # the experiment in progress (metrics.Experiment)
        self.accuracy = None  # the accuracy experiment in progress (accuracy.AccuracyExperiment)
        self.validity = None  # the JSON validity experiment in progress (validity.py)
        self.prompt_logits = None  # ((model, dataset, prompt), logits): the preview's last prefill

    def datasets(self) -> tuple:
        return tuple(self.library.datasets())

    def dataset(self, req: dict) -> str:
        return check("dataset", req.get("dataset", Settings.dataset), choices=self.datasets())


SESSIONS = {}  # session id -> Session
ENDPOINTS = {}  # name -> handler(session, request) -> dict


def endpoint(fn):
    """Register fn as the endpoint named like it (without the leading underscore)."""
    ENDPOINTS[fn.__name__.lstrip("_")] = fn
    return fn


def _errors(e) -> dict:
    errs = e.errors if isinstance(e, FieldErrors) else [e]
    return {"ok": False, "errors": [x.to_json() for x in errs]}


def call(name: str, request_json: str = "{}", session: str = "page") -> str:
    """Run endpoint `name` on the request (a JSON object) for the page `session`."""
    try:
        try:
            req = json.loads(request_json) if isinstance(request_json, str) else None
        except ValueError:
            req = None
        if not isinstance(req, dict):
            field = "settings" if name in ("start", "compare", "bench") else "request"
            raise FieldError(field, f"{label_of(field)} must be a JSON object of name: value.")
        if name not in ENDPOINTS:
            raise FieldError("request", f"Unknown request {name!r}; known requests are "
                                        f"{', '.join(ENDPOINTS)}.")
        if name == "setup":
            # pages served by one Python (widgets sharing a worker) share its loaded models
            fresh = Library(req.get("assets"))
            same = next((s.library for s in SESSIONS.values() if s.library.root == fresh.root), None)
            SESSIONS[session] = Session(same.sharing() if same else fresh)
        elif session not in SESSIONS:
            raise FieldError("request", "Python is not set up for this page yet.")
        out = ENDPOINTS[name](SESSIONS[session], req)
    except (FieldError, FieldErrors) as e:
        return json.dumps(_errors(e))
    return json.dumps({"ok": True, **out})


def forget(session: str) -> None:
    """Drop a page's state when the page is gone (a widget that shared the worker closed)."""
    SESSIONS.pop(session, None)


# --- start-up -------------------------------------------------------------------------------------

def _transformer_info(library, name: str, tokenizer: str = "chars"):
    if not library.has_model("transformer", name, tokenizer):
        return None
    m = library.model("transformer", name, tokenizer)
    cfg = m.cfg
    return {"params": m.n_params, "val_nll": m.info.get("val_nll"), "curve": m.curve,
            "context_size": cfg.context_size, "n_layer": cfg.n_layer, "n_head": cfg.n_head,
            "n_kv_head": cfg.n_kv_head, "head_dim": cfg.head_dim, "n_embd": cfg.n_embd,
            "train_seconds": m.info.get("seconds"),
            # K and V of every layer, as the page's sessions hold them (in SESSION_DTYPE)
            "bytes_per_element": np.dtype(SESSION_DTYPE).itemsize,
            "bytes_per_token": kv_cache_bytes(cfg.n_layer, cfg.n_kv_head, cfg.head_dim,
                                              np.dtype(SESSION_DTYPE).itemsize, 1)["total_bytes"]}


def held_out_nll(bigram, corpus):
    """A bigram's loss on the corpus's held-out split (None if it has none): as measured when
    it was counted, or now for a model saved without it."""
    if not corpus.val:
        return None
    return bigram.val_nll if bigram.val_nll is not None else bigram.nll(corpus.val)


def _dataset_info(library, name: str) -> dict:
    corpus = library.corpus(name)
    tokenizer = library.tokenizers(name)[0]  # the dataset's own (chars, or BPE for tasks)
    model = library.model("bigram", name, tokenizer)
    prov = library.provenance(name)
    return {"name": name, "label": prov.get("title", name),
            "description": prov.get("description", ""), "licence": prov.get("licence", ""),
            "source": prov.get("source", ""),
            "models": [k for k in MODELS if library.has_model(k, name, tokenizer)],
            "transformer": _transformer_info(library, name, tokenizer),
            # the characters a character model knows (a BPE-only dataset has none to list)
            "vocab": model.tokenizer.labels() if model.tokenizer.name == "chars" else [],
            "vocab_words": model.tokenizer.describe(),
            "n_train": len(corpus.train),
            # the held-out loss the page shows for a character model (a BPE one's is in "bpe")
            "n_val": len(corpus.val),
            "val_nll": held_out_nll(model, corpus) if tokenizer == "chars" else None,
            "examples": corpus.train[:5],
            "tokenizers": library.tokenizers(name),
            # a model that calls tools (the tasks data), and a question to start it with
            "tools": tasks.has_template(model.tokenizer),
            "sample_question": (tasks.held_out(corpus.val, "arithmetic", 1) or [None])[0]
            if tasks.has_template(model.tokenizer) else None,
            "bpe": _bpe_info(library, name)}


def _bpe_info(library, name: str):
    """The dataset's BPE models, when it has a tokenizer and any model on it (else None)."""
    if "bpe" not in library.tokenizers(name):
        return None
    tokens = library.tokenizer("bpe", name)
    corpus = library.corpus(name)
    bigram = library.model("bigram", name, "bpe") if library.has_model("bigram", name, "bpe") \
        else None
    # per token; not for the tasks data, whose held-out questions are for the accuracy
    # experiment (and scoring them all at start-up would cost the page a second)
    scored = bigram and corpus.val and not tasks.has_template(tokens)
    return {"models": [k for k in MODELS if library.has_model(k, name, "bpe")],
            "val_nll": held_out_nll(bigram, corpus) if scored else None,
            "vocab_size": tokens.vocab_size, "transformer": _transformer_info(library, name, "bpe"),
            "first_merges": [tokens.label(i) for i in range(FIRST_MERGE, min(FIRST_MERGE + 48,
                                                                             tokens.vocab_size))]}


def _sample_card(library):
    if "tasks" not in library.datasets():
        return None
    return (tasks.held_out(library.corpus("tasks").val, "card", 1) or [None])[0]


@endpoint
def _setup(session: Session, req: dict) -> dict:
    """{"assets": folder} -> what the page needs to know: the field table (with the datasets
    that exist), the models, the datasets, the defaults and the endpoints."""
    library = session.library
    fields = [f.to_json() for f in FIELDS]
    for f in fields:
        if f["name"] == "dataset":
            f["choices"] = library.datasets()
    return {"version": __version__,
            "models": [{"id": m, "label": MODEL_LABELS[m]} for m in MODELS],
            "datasets": {n: _dataset_info(library, n) for n in library.datasets()},
            "fields": fields, "defaults": Settings().to_json(), "endpoints": list(ENDPOINTS),
            "top_n": TOP_N,  # the likeliest candidates each step record lists
            "accuracy_defaults": ACCURACY_DEFAULTS,  # the accuracy experiment's own defaults
            "validity_defaults": VALIDITY_DEFAULTS,
            # a held-out card question, for the lesson's three answers
            "sample_card": _sample_card(library),
            # what the live cache check of a run is judged against (the page draws it)
            "cache_tolerance": CHECK_TOLERANCE[np.dtype(SESSION_DTYPE).name]}


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
        json.dumps(_trace(scratch, {}))
        models.append(settings["model"])
    return {"steps": steps, "models": models, "ms": round((time.perf_counter() - t0) * 1000)}


# --- a run: start, advance in batches, cancel, its trace -----------------------------------------

@endpoint
def _start(session: Session, req: dict) -> dict:
    """The settings -> a new run (the previous run and its output stay until this succeeds)."""
    session.run = run = start_generation(session.library, req)
    pieces, healed = run.prompt_pieces()
    return {"settings": run.settings.to_json(), "prompt_tokens": pieces, "healed": healed}


def _status(run, steps, emit="") -> dict:
    """A batch of a run: its steps, and the text so far: shown, held back for a possible stop
    string (while it runs), and cut by a stop string (at the end)."""
    return {"steps": steps, "done": run is None or run.done,
            "finish_reason": run and run.finish_reason, "stop_reason": run and run.stop_reason,
            "text": run.text if run else "", "emit": emit,
            "held": run.stopper.held if run and not run.done else "",
            "cut": run.stopper.cut if run else "",
            # an answer meant to be JSON, classified once the run is over
            "json": run.json_report() if run and run.done else None}


def _budget(req: dict) -> float:
    ms = req.get("budget_ms", 12.0)
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not 0 <= ms <= MAX_BUDGET_MS:
        raise FieldError("request", f"budget_ms must be a number from 0 to {MAX_BUDGET_MS}; "
                                    f"got {ms!r}.")
    return time.perf_counter() + ms / 1000.0


@endpoint
def _advance(session: Session, req: dict) -> dict:
    """{"budget_ms"} -> the step records made in about that time (at least one step)."""
    deadline, run, steps = _budget(req), session.run, []
    for record in run or ():
        steps.append(record)
        if time.perf_counter() >= deadline:
            break
    if run is not None and run.done:
        session.last = run
    return _status(run, steps)


@endpoint
def _cancel(session: Session, req: dict) -> dict:
    run = session.run
    released = run.cancel() if run else ""  # text held back for a stop string is shown after all
    if run is not None:
        session.last = run
    return _status(run, [], released)


@endpoint
def _trace(session: Session, req: dict) -> dict:
    return {"trace": session.last.trace() if session.last is not None else None}


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
    deadline = _budget(req)
    run, steps = session.restoring
    while len(run.records) < steps and not run.done:
        next(run, None)
        if time.perf_counter() >= deadline:
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
    return {"dataset": _dataset_info(session.library, corpus.name)}


@endpoint
def _bench(session: Session, req: dict) -> dict:
    """Time one whole run, step records included, inside whichever Python runs this.

    The benchmark calls this natively and in the browser, so the two numbers time the same code.
    """
    run = start_generation(session.library, req)
    t0 = time.perf_counter()
    n = sum(1 for _ in run)
    seconds = time.perf_counter() - t0
    return {"steps": n, "seconds": seconds, "steps_per_second": n / seconds}


# --- the lesson: one step taken apart, the playground, the temperature experiment -------------

@endpoint
def _explain_step(session: Session, req: dict) -> dict:
    """{"step": i, "top_n": n} -> every stage of step i of the latest run (pipeline.explain)."""
    run = session.run
    n_steps = len(run.records) if run is not None else 0
    if n_steps == 0:
        raise FieldError("step", "Step: there is no run to explain yet; generate some text first.")
    values = read(req, ["step", "top_n"], {"step": {"max": n_steps - 1}})
    if session.replay is None or session.replay.run is not run:
        session.replay = Replay(run)
    return session.replay.explain(values["step"], values["top_n"])


@endpoint
def _preview(session: Session, req: dict) -> dict:
    """{"settings", "step"} -> the next token's distribution under these settings, before any
    run: at `step` of the run on screen (its logits, its tokens so far), or, without a step, at
    the end of the prompt. What the page redraws while the learner drags a rule."""
    settings = validate(req.get("settings", {}), datasets=session.datasets())
    run, step = session.run, req.get("step")
    if step is not None and run is not None and run.records:
        step = check("step", step, max=len(run.records) - 1)
        if run.records[step]["source"] == "tool":
            raise FieldError("step", f"Step {step + 1} was appended by the tool, not chosen: no "
                                     f"rule applies to it. Select one of the model's steps.")
        if session.replay is None or session.replay.run is not run:
            session.replay = Replay(run)
        logits = session.replay.logits_at(step)
        tokenizer, used = run.tokenizer, list(run.prompt_ids) + run.output_ids[:step]
        allowed, why, kind = run.allowed_at(step)
    else:
        step = 0
        model = session.library.for_settings(settings)
        tokenizer = model.tokenizer
        used, heal = healing.prompt_ids(tokenizer, settings)
        allowed, why, kind = (heal.allowed, heal.why, "healing") if heal else (None, "", "")
        if settings.json_mode and not heal:  # the grammar at the answer's first token
            grammar.check_vocabulary(tokenizer)
            allowed, why, kind = grammar.masks_for(tokenizer, settings.json_max_depth).allowed(
                jsonshape.JsonState(settings.json_max_depth)), grammar.WHY, "json"
        key = (settings.model, settings.dataset, settings.tokenizer, settings.prompt,
               settings.token_healing)
        if session.prompt_logits is None or session.prompt_logits[0] != key:
            session.prompt_logits = (key, model.session().prefill(used).copy())
        logits = session.prompt_logits[1]
    d = sampling.decide(logits, settings.rules, eos_blocked=settings.eos_blocked(step),
                        seen=sampling.seen_mask(tokenizer.vocab_size, used), allowed=allowed,
                        mask_why=why, mask_kind=kind)
    return {"step": step, **explain(d, tokenizer.label)}


@endpoint
def _probs(session: Session, req: dict) -> dict:
    """Typed logits or probabilities through the rules (the CLI's `probs`)."""
    return probs(req)


@endpoint
def _explain_values(session: Session, req: dict) -> dict:
    """The playground: typed logits or probabilities through every stage of the rules."""
    return explain_values(req)


@endpoint
def _experiment_start(session: Session, req: dict) -> dict:
    """Check an experiment request and plan its runs; experiment_advance then does them."""
    session.experiment = metrics.Experiment(session.library, req)
    return {"done": False, "progress": session.experiment.progress()}


@endpoint
def _experiment_advance(session: Session, req: dict) -> dict:
    """{"budget_ms"} -> samples run for about that long (at least one); the result comes with
    the last batch."""
    return _advance_planned(session.experiment, req, "No experiment has been started.")


def _advance_planned(exp, req: dict, none: str) -> dict:
    """Make an experiment's runs for about req's budget; its result comes with the last batch."""
    if exp is None:
        raise FieldError("request", none)
    exp.advance(_budget(req) - time.perf_counter())
    out = {"done": exp.done, "progress": exp.progress()}
    if exp.done:
        out["result"] = exp.result()
    return out


@endpoint
def _accuracy_start(session: Session, req: dict) -> dict:
    """Check an accuracy experiment request and plan its runs; accuracy_advance does them."""
    session.accuracy = None  # a refused request leaves no half-planned experiment behind
    session.accuracy = AccuracyExperiment(session.library, req)
    return {"done": False, "progress": session.accuracy.progress()}


@endpoint
def _accuracy_advance(session: Session, req: dict) -> dict:
    """{"budget_ms"} -> runs for about that long (at least one); the result comes with the
    last batch."""
    return _advance_planned(session.accuracy, req, "No accuracy experiment has been started.")


def _tasks_model(library) -> None:
    if "tasks" not in library.datasets() or not library.has_model("transformer", "tasks", "bpe"):
        raise FieldError("dataset", "This site was built without the tasks model.")


@endpoint
def _validity_start(session: Session, req: dict) -> dict:
    """Check a JSON validity experiment request and plan its runs; validity_advance does them."""
    from decodelab.validity import ValidityExperiment

    session.validity = None  # a refused request leaves no half-planned experiment behind
    _tasks_model(session.library)
    session.validity = ValidityExperiment(session.library, req)
    return {"done": False, "progress": session.validity.progress()}


@endpoint
def _validity_advance(session: Session, req: dict) -> dict:
    """{"budget_ms"} -> runs for about that long (at least one); the result comes last."""
    return _advance_planned(session.validity, req, "No validity experiment has been started.")


@endpoint
def _shapes(session: Session, req: dict) -> dict:
    """{"question", "seed"} -> one card question answered each way of validity.WAYS, side by
    side, each answer classified."""
    from decodelab.validity import compare

    _tasks_model(session.library)
    values = read(req, ["question", "seed"])
    if records.true_record(values["question"]) is None:
        raise FieldError("question", "Question: ask a card question, e.g. Card for \"Ada\", "
                                     "age 31, from \"Paris\". The name (capitalised) and the "
                                     "city go in quotes, and the age is from 1 to 99.")
    return {"question": values["question"], "ways": compare(session.library, values["question"],
                                                            values["seed"])}


@endpoint
def _reuse_check(session: Session, req: dict) -> dict:
    """What a cache is not: the tasks model's cache of a question, reused after appending (the
    start of its answer) and after changing one digit of the question; each against a full
    recomputation (inference.reuse_check)."""
    from decodelab.inference import reuse_check

    question = check("question", req.get("question", REUSE_QUESTION))
    library = session.library
    _tasks_model(library)
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


# --- the KV cache: batch view, break it on purpose, memory and cost, both models side by side --

def _lab_model(session: Session, req: dict):
    dataset = session.dataset(req)
    tokenizer = check("tokenizer", req.get("tokenizer", Settings.tokenizer))
    return session.library.model("transformer", dataset, tokenizer), dataset


def _batch_prompts(model, req: dict) -> tuple:
    texts = read(req, ["prompts"])["prompts"]
    return texts, [encode(model.tokenizer, "prompts", t, entry=i) for i, t in
                   enumerate(texts, 1)]


def _fits(model, field: str, what: str, need: int) -> None:
    """The batch and the check run without a context shift: refuse what would need one."""
    if need > model.context_size:
        raise FieldError(field, f"{what} need {need} positions; this model's context holds "
                                f"{model.context_size}. Use fewer steps or shorter prompts.")


@endpoint
def _batch_view(session: Session, req: dict) -> dict:
    """{"dataset", "prompts": [2..6 texts], "batch_steps", "seed"} -> the padded batch, slot
    by slot, and each row's largest difference from the same prompt run alone."""
    from decodelab import batch

    model, dataset = _lab_model(session, req)
    texts, ids = _batch_prompts(model, req)
    values = read(req, ["batch_steps", "seed"])
    steps = values["batch_steps"]
    _fits(model, "batch_steps", f"Batch steps: the longest prompt and {steps} steps",
          max(len(p) for p in ids) + steps)  # EOS + longest prompt + steps - 1 decodes
    result = batch.batch_run(model, ids, steps, values["seed"])
    return {"dataset": dataset, **batch.describe(model, texts, result)}


@endpoint
def _break_it(session: Session, req: dict) -> dict:
    """{"bug", "dataset", "test_prompt", "check_steps", "seed", "prompts"} -> the check that
    catches the bug, run with it injected (bugs.run_bug), and the sentence on what went wrong."""
    from decodelab import batch, bugs

    values = read(req, ["bug", "test_prompt", "check_steps", "seed"])
    model, dataset = _lab_model(session, req)
    bug, steps = values["bug"], values["check_steps"]
    ids = encode(model.tokenizer, "test_prompt", values["test_prompt"])
    texts, batch_ids = None, None
    if bug == "unmasked-padding":
        texts, batch_ids = _batch_prompts(model, req)
        if len({len(p) for p in batch_ids}) < 2:
            raise FieldError("prompts", "Batch prompts: padding only appears when the prompts "
                                        "differ in length; make one shorter.")
        _fits(model, "check_steps", f"Check steps: the longest batch prompt and {steps} steps",
              max(len(p) for p in batch_ids) + 1 + steps)
    else:
        _fits(model, "check_steps", f"Check steps: the test prompt and {steps} steps",
              len(ids) + 1 + steps)
    out = bugs.run_bug(model, bug, ids, steps, values["seed"], batch_prompts=batch_ids)
    if out["check"] == "batch":
        out["batch"] = batch.describe(model, texts, out["batch"])
    return {"dataset": dataset, **out}


@endpoint
def _memory(session: Session, req: dict) -> dict:
    """The kv-memory calculator (costs.memory) for a preset and/or explicit fields; "tiny" is the
    page's own transformer on `dataset`. Also returns every preset, for the page's menu."""
    from decodelab import costs

    dataset = session.dataset(req)
    tiny = None
    if session.library.has_model("transformer", dataset):
        tiny = costs.tiny_preset(session.library.model("transformer", dataset))
    result = costs.memory(req, tiny)
    presets = [{**p, "bytes_per_token": kv_cache_bytes(p["layers"], p["kv_heads"], p["head_dim"],
                                                       p["bytes_per_element"], 1)["total_bytes"]}
               for p in list(costs.PRESETS) + ([tiny] if tiny else [])]
    return {**result, "presets": presets}


@endpoint
def _cost_sweep(session: Session, req: dict) -> dict:
    """{"dataset", "repeats"} -> ms per decode step and K/V bytes read at context lengths from
    2 to the full window, cache on and off (costs.step_costs), measured in this Python."""
    from decodelab import costs

    model, dataset = _lab_model(session, req)
    repeats = read(req, ["repeats"])["repeats"]
    T = model.context_size
    lengths = [2] + [T * i // 8 for i in range(1, 9)]
    return {"dataset": dataset, **costs.step_costs(model, lengths, repeats)}


def _summary(run) -> dict:
    checks = [r["cache_diff"] for r in run.records if "cache_diff" in r]
    n = len(run.records)
    return {"text": run.text, "prompt": run.settings.prompt, "finish_reason": run.finish_reason,
            "stop_reason": run.stop_reason, "steps": n,
            "tokens": [{"text": r["token_text"], "prob": r["prob"]} for r in run.records],
            "mean_prob": sum(r["prob"] for r in run.records) / n if n else None,
            "mean_entropy": sum(r["entropy"] for r in run.records) / n if n else None,
            "params": getattr(run.model, "n_params", None),
            "cache_max_diff": max(checks) if checks else None,
            "cache_ok": all(r["cache_ok"] for r in run.records) if checks else None}


@endpoint
def _bench_tokenize(session: Session, req: dict) -> dict:
    """The benchmark's tokenizer row: {"dataset", "text"} -> milliseconds to encode the text
    with the dataset's BPE from an empty piece cache (a prompt seen for the first time) and
    again with the cache filled."""
    from decodelab.bpe import BPE

    tokens = session.library.tokenizer("bpe", session.dataset(req))
    text = read(req, ["text"])["text"]
    fresh = BPE(tokens.merges)  # the same merges, nothing cached yet
    t0 = time.perf_counter()
    ids = fresh.encode(text)
    t1 = time.perf_counter()
    fresh.encode(text)
    t2 = time.perf_counter()
    return {"chars": len(text), "bytes": len(text.encode("utf-8")), "tokens": len(ids),
            "cold_ms": (t1 - t0) * 1000, "warm_ms": (t2 - t1) * 1000}


@endpoint
def _prefill(session: Session, req: dict) -> dict:
    """{"settings"} -> the prompt's prefill, row by row: the logits at every position, each
    row's likeliest next token against the one that follows (prefill.rows)."""
    from decodelab import prefill

    settings = validate(req.get("settings", {}), datasets=session.datasets())
    model = session.library.for_settings(settings)
    ids = encode(model.tokenizer, "prompt", settings.prompt)
    return prefill.rows(model, ids)


@endpoint
def _compare(session: Session, req: dict) -> dict:
    """The same settings (prompt, seed, rules) run once with each model, start to finish."""
    runs = {}
    for kind in MODELS:
        run = start_generation(session.library, {**req, "model": kind})
        if run.settings.max_new_tokens > COMPARE_MAX_TOKENS:
            raise FieldError("max_new_tokens", f"Max new tokens: the side-by-side run takes at "
                                               f"most {COMPARE_MAX_TOKENS} per model; got "
                                               f"{run.settings.max_new_tokens}.")
        runs[kind] = _summary(run.run())
    return {"settings": run.settings.to_json(), "runs": runs}


@endpoint
def _bench_tools(session: Session, req: dict) -> dict:
    """The benchmark's tool rows, the same function natively and here: resuming after a tool
    result against a full recomputation (on the tasks model at a question's length, and on the
    prose BPE model from 100 tokens of context), one question's samples with and without a
    shared prefill, and the accuracy experiment's questions per second."""
    from decodelab import costs

    library = session.library
    tasks_model = library.model("transformer", "tasks", "bpe")
    tok = tasks_model.tokenizer
    question = tasks.question_ids(tok, REUSE_QUESTION)
    call = [tok.special_ids[tasks.CALL]] + tok.encode(REUSE_APPENDED)
    appended = [tok.special_ids[tasks.END_CALL]] + tasks.result_ids(tok, "19")  # as a run does
    prose = library.model("transformer", "prose", "bpe")
    text = library.corpus("prose").val
    long = prose.tokenizer.encode(" ".join(text))[:99]  # with the start token: 100 of context
    out = {"resume_tasks": costs.time_resume(tasks_model, question + call, appended),
           "resume_100": costs.time_resume(prose, long, prose.tokenizer.encode(" 19 is the")),
           "prefix": costs.time_prefix_sharing(tasks_model, validate({
               "model": "transformer", "dataset": "tasks", "prompt": REUSE_QUESTION,
               "temperature": 1.0, "max_new_tokens": 30, "cache_check": False}), 8)}
    exp = AccuracyExperiment(library, {"questions": read(req, ["questions"])["questions"]})
    t0 = time.perf_counter()
    exp.run()
    seconds = time.perf_counter() - t0
    out["experiment"] = {"runs": exp.total, "seconds": seconds, "runs_per_second": exp.total /
                         seconds, "steps": exp.steps}
    return out


@endpoint
def _bench_json(session: Session, req: dict) -> dict:
    """The benchmark's JSON mode rows, the same function natively and here: what the grammar
    mask adds to a step (costs.time_json_mode) on the tasks model answering a held-out card at
    T = 1, and on the prose BPE model at T = 2 from an empty prompt."""
    from decodelab import costs

    library = session.library
    card = _sample_card(library) or 'Card for "Ada", age 31, from "Paris".'
    runs = {"tasks card, T = 1": {"model": "transformer", "dataset": "tasks", "prompt": card,
                                  "temperature": 1.0, "seed": 0, "max_new_tokens": 60},
            "prose BPE, T = 2": {"model": "transformer", "dataset": "prose", "tokenizer": "bpe",
                                 "temperature": 2.0, "seed": 0, "max_new_tokens": 60}}
    out = {}
    for name, raw in runs.items():
        settings = validate(raw, datasets=session.datasets())
        out[name] = costs.time_json_mode(library.for_settings(settings), settings)
    return out


@endpoint
def _bench_generation(session: Session, req: dict) -> dict:
    """The benchmark's transformer rows: {"settings", "cache": true|false} -> one generation
    timed whole and decode-only (costs.time_generation), the same function natively and here."""
    from decodelab import costs

    settings = validate(req.get("settings", {}), datasets=session.datasets())
    model = session.library.for_settings(settings)
    if not req.get("cache", True):
        model = costs.Uncached(model)
    return costs.time_generation(model, settings)
