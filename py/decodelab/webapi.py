"""What the browser worker calls: plain functions, JSON strings in and out.

Only strings cross the JavaScript boundary (no Python objects held by JS, nothing to leak), and
generation is driven from JavaScript in short time-budgeted batches (`advance`), so the worker
reads a Stop message between batches. One run at a time per worker.

The CLI does not use this module; both go through `generate.start`.
"""

import json
import time

import numpy as np

from decodelab import __version__
from decodelab.assets import Library
from decodelab.corpus import corpus_from_text
from decodelab.errors import FieldError, FieldErrors
from decodelab.generate import start as start_generation
from decodelab.playground import probs_from_request
from decodelab import metrics, pipeline
from decodelab.kvcache import CHECK_TOLERANCE
from decodelab.settings import FIELDS, MODELS, Settings
from decodelab.transformer import SESSION_DTYPE

_library = None
_run = None
_last = None  # the last run that finished, for Export trace
_restoring = None  # (run, steps): a run being made again after a restart (restore_start)


def _errors(e) -> str:
    errs = e.errors if isinstance(e, FieldErrors) else [e]
    return json.dumps({"ok": False, "errors": [x.to_json() for x in errs]})


MODEL_LABELS = {"bigram": "Bigram (counts)", "transformer": "Transformer (KV cache)"}


def _transformer_info(name: str):
    if not _library.has_model("transformer", name):
        return None
    m = _library.model("transformer", name)
    cfg = m.cfg
    return {"params": m.n_params, "val_nll": m.info.get("val_nll"), "curve": m.curve,
            "context_size": cfg.context_size, "n_layer": cfg.n_layer, "n_head": cfg.n_head,
            "n_kv_head": cfg.n_kv_head, "head_dim": cfg.head_dim, "n_embd": cfg.n_embd,
            "train_seconds": m.info.get("seconds")}


def _dataset_info(name: str) -> dict:
    corpus = _library.corpus(name)
    model = _library.model("bigram", name)
    prov = _library.provenance(name)
    return {"models": [k for k in MODELS if _library.has_model(k, name)],
            "transformer": _transformer_info(name),"name": name, "label": prov.get("title", name), "description": prov.get("description", ""),
            "licence": prov.get("licence", ""), "source": prov.get("source", ""),
            "vocab": model.tokenizer.labels(), "n_train": len(corpus.train),
            "n_val": len(corpus.val),
            "val_nll": model.nll(corpus.val) if corpus.val else None,
            "examples": corpus.train[:5]}


def setup(assets_dir: str) -> str:
    """Start afresh on the lesson files in assets_dir: no run, no lesson state yet."""
    global _library, _run, _last, _replay, _experiment, _restoring
    _library = Library(assets_dir)
    _run = _last = _replay = _experiment = _restoring = None
    fields = [f.to_json() for f in FIELDS]
    for f in fields:
        if f["name"] == "dataset":
            f["choices"] = _library.datasets()
    return json.dumps({
        "version": __version__,
        "models": [{"id": m, "label": MODEL_LABELS[m]} for m in MODELS],
        "datasets": {n: _dataset_info(n) for n in _library.datasets()},
        "fields": fields,
        "defaults": Settings().to_json(),
        # what the live cache check of a run is judged against (the page draws it)
        "cache_tolerance": CHECK_TOLERANCE[np.dtype(SESSION_DTYPE).name],
    })


# A short run of each model with every rule switched on. In the browser, WebAssembly starts in a
# quick baseline compiler and recompiles each function that gets hot with the optimizing one, on
# background threads. The first real run would pay for that: the recompiling takes the processor
# from the page while it draws. Warming up while the page shows its loading bar moves the cost
# there (see `warm_up`).
WARM_UP = (
    {"model": "bigram", "max_new_tokens": 300, "ignore_eos": True, "temperature": 0.8,
     "top_k": 20, "top_p": 0.95, "min_p": 0.01, "repetition_penalty": 1.1, "stop": ["qq"]},
    {"model": "transformer", "max_new_tokens": 24, "ignore_eos": True, "top_k": 20,
     "cache_check": True},
)


def warm_up() -> str:
    """Run WARM_UP through the same code a page's run takes, step records serialized as the
    worker sends them, and keep nothing: no run, trace or lesson state changes."""
    t0 = time.perf_counter()
    steps, models = 0, []
    dataset = Settings().dataset
    for settings in WARM_UP:
        if not _library.has_model(settings["model"], dataset):
            continue
        run = start_generation(_library, dict(settings, dataset=dataset))
        records = list(run)
        json.dumps({"steps": records, "text": run.text})
        json.dumps(run.trace())
        steps += len(records)
        models.append(settings["model"])
    return json.dumps({"steps": steps, "models": models,
                       "ms": round((time.perf_counter() - t0) * 1000)})


def _parse(text, field: str = "settings"):
    """JSON from the page or a host; anything unreadable is a FieldError, never a crash."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        raise FieldError(field, "Settings must be a JSON object of name: value.") from None


def start(settings_json: str) -> str:
    global _run
    try:
        run = start_generation(_library, _parse(settings_json))
    except (FieldError, FieldErrors) as e:
        return _errors(e)  # the previous run and its output stay as they were
    _run = run
    return json.dumps({"ok": True, "settings": run.settings.to_json()})


def _status(run, steps, emit="") -> str:
    return json.dumps({"steps": steps, "done": run.done, "finish_reason": run.finish_reason,
                       "stop_reason": run.stop_reason, "text": run.text, "emit": emit})


def advance(budget_ms: float = 12.0) -> str:
    """Run steps until the time budget is used or the run ends; return their records."""
    global _last
    run = _run
    if run is None:
        return _status_empty()
    deadline = time.perf_counter() + budget_ms / 1000.0
    steps = []
    for record in run:
        steps.append(record)
        if time.perf_counter() >= deadline:
            break
    if run.done:
        _last = run
    return _status(run, steps)


def cancel() -> str:
    global _last
    run = _run
    if run is None:
        return _status_empty()
    released = run.cancel()  # text held back for a possible stop string is visible after all
    _last = run
    return _status(run, [], released)


def _status_empty() -> str:
    return json.dumps({"steps": [], "done": True, "finish_reason": None, "stop_reason": None,
                       "text": ""})


def restore_start(request_json: str) -> str:
    """{"settings", "steps"} -> start making the run the page shows again, in this Python.

    When the page replaces a worker that crashed, the new Python knows no run: Export trace and
    the lesson's view of a step would have nothing to work on. A run is a pure function of its
    settings (the seed included), so running the same settings for the same number of steps
    (cancelled there, if the learner had stopped it) gives back the very same run. The worker
    does it in time-boxed batches (restore_advance), so it keeps answering the page, and gives
    it up if the learner starts a new run. The page compares the text and the step count before
    it relies on the result.
    """
    global _restoring
    try:
        req = _request(request_json, "settings")
        steps = req.get("steps")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise FieldError("steps", f"Steps must be a whole number of at least 0; got "
                                      f"{steps!r}.")
        run = start_generation(_library, req.get("settings"))
    except (FieldError, FieldErrors) as e:
        return _errors(e)
    _restoring = (run, steps)
    return json.dumps({"ok": True, "done": False, "steps": 0})


def restore_advance(budget_ms: float = 50.0) -> str:
    """Run the restore's steps for about budget_ms (at least one); at the end, the run becomes
    the latest one, as if it had just been generated here."""
    global _restoring, _run, _last
    if _restoring is None:
        return json.dumps({"ok": False, "errors": [FieldError(
            "steps", "There is no run being restored; call restore_start first.").to_json()]})
    run, steps = _restoring
    deadline = time.perf_counter() + budget_ms / 1000.0
    while len(run.records) < steps and not run.done:
        next(run, None)
        if time.perf_counter() >= deadline:
            break
    if len(run.records) < steps and not run.done:
        return json.dumps({"ok": True, "done": False, "steps": len(run.records)})
    run.cancel()  # a run that already ended keeps its own finish reason
    _restoring = None
    _run = _last = run
    return json.dumps({"ok": True, "done": True, "steps": len(run.records), "text": run.text,
                       "finish_reason": run.finish_reason, "stop_reason": run.stop_reason})


def restore(request_json: str) -> str:
    """restore_start and restore_advance in one call, however long it takes."""
    started = restore_start(request_json)
    return started if not json.loads(started)["ok"] else restore_advance(float("inf"))


def trace() -> str:
    return json.dumps(_last.trace() if _last is not None else None)


def train_custom(text: str, name: str = "custom") -> str:
    try:
        corpus = corpus_from_text(text, name)
        _library.add_custom(corpus)
    except FieldError as e:
        return _errors(e)
    return json.dumps({"ok": True, "dataset": _dataset_info(name)})


def probs(request_json: str) -> str:
    try:
        request = _parse(request_json, "logits")
        if not isinstance(request, dict):
            raise FieldError("logits", "A probs request must be a JSON object.")
        return json.dumps({"ok": True, **probs_from_request(request)})
    except (FieldError, FieldErrors) as e:
        return _errors(e)


def bench(settings_json: str) -> str:
    """Time one whole run, step records included, inside whichever Python runs this.

    The benchmark calls this natively and in the browser, so the two numbers time the same code.
    """
    run = start_generation(_library, json.loads(settings_json))
    t0 = time.perf_counter()
    n = sum(1 for _ in run)
    seconds = time.perf_counter() - t0
    return json.dumps({"steps": n, "seconds": seconds, "steps_per_second": n / seconds})


# --- the lesson: one step taken apart, the playground, the temperature experiment -------------

_replay = None  # (run, pipeline.Replay): a run's recomputed logits, kept while it is the latest
_experiment = None  # the experiment in progress (metrics.Experiment)


def _request(text, field: str) -> dict:
    try:
        req = json.loads(text)
    except (TypeError, ValueError):
        req = None
    if not isinstance(req, dict):
        raise FieldError(field, "The request must be a JSON object of name: value.")
    return req


def explain_step(request_json: str) -> str:
    """{"step": i, "top_n": n} -> every stage of step i of the latest run (pipeline.explain)."""
    global _replay
    try:
        req = _request(request_json, "step")
        run = _run
        step = pipeline.check_step(req.get("step"), len(run.records) if run is not None else 0)
        top_n = pipeline.check_top_n(req.get("top_n"))
        if _replay is None or _replay[0] is not run:
            _replay = (run, pipeline.Replay(run))
        return json.dumps({"ok": True, **_replay[1].explain(step, top_n)})
    except (FieldError, FieldErrors) as e:
        return _errors(e)


def explain_values(request_json: str) -> str:
    """The playground: typed logits or probabilities through every stage (pipeline.explain)."""
    try:
        return json.dumps({"ok": True, **pipeline.explain_request(_request(request_json, "logits"))})
    except (FieldError, FieldErrors) as e:
        return _errors(e)


def experiment(request_json: str) -> str:
    """A whole temperature experiment at once (see metrics.Experiment for the request)."""
    try:
        return json.dumps({"ok": True, "result": metrics.experiment(
            _library, _request(request_json, "temperatures"))})
    except (FieldError, FieldErrors) as e:
        return _errors(e)


def experiment_start(request_json: str) -> str:
    """Check an experiment request and plan its runs; experiment_advance then does them."""
    global _experiment
    try:
        exp = metrics.Experiment(_library, _request(request_json, "temperatures"))
    except (FieldError, FieldErrors) as e:
        return _errors(e)
    _experiment = exp
    return json.dumps({"ok": True, "done": False, "progress": exp.progress()})


def experiment_advance(budget_ms: float = 50.0) -> str:
    """Run samples for about budget_ms (at least one); the result comes with the last batch."""
    exp = _experiment
    if exp is None:
        return _errors(FieldError("experiment", "No experiment has been started."))
    exp.advance(float(budget_ms) / 1000.0)
    out = {"ok": True, "done": exp.done, "progress": exp.progress()}
    if exp.done:
        out["result"] = exp.result()
    return json.dumps(out)


# --- the KV cache: batch view, break it on purpose, memory and cost, both models side by side --
# Each takes a JSON object and returns {"ok": true, ...} or {"ok": false, "errors": [...]}.

LAB_PROMPT_CHARS = 48  # a test or batch prompt; longer ones do not fit the grid on a phone
COMPARE_MAX_TOKENS = 500  # the side-by-side run is not cancellable: keep it short


def _kv_request(text, field: str) -> dict:
    try:
        req = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        req = None
    if not isinstance(req, dict):
        raise FieldError(field, "The request must be a JSON object of name: value.")
    return req


def _lab_number(req: dict, name: str, label: str, default, lo, hi):
    from decodelab.settings import Field, check_number

    return check_number(Field(name, label, "int", default, min=lo, max=hi), req.get(name, default))


def _lab_model(req: dict):
    from decodelab.settings import check_field

    dataset = check_field("dataset", req.get("dataset", "names"), datasets=_library.datasets())
    return _library.model("transformer", dataset), dataset


def _lab_ids(model, text, field: str, label: str) -> list:
    if not isinstance(text, str) or len(text) > LAB_PROMPT_CHARS:
        shown = f"{len(text)} characters" if isinstance(text, str) else type(text).__name__
        raise FieldError(field, f"{label} must be text of at most {LAB_PROMPT_CHARS} characters; "
                                f"got {shown}.")
    try:
        return model.tokenizer.encode(text, field=field)
    except FieldError as e:
        raise FieldError(field, e.message.replace("Prompt", label, 1)) from None


def _batch_prompts(model, req: dict) -> tuple:
    texts = req.get("prompts")
    if not isinstance(texts, list) or not 2 <= len(texts) <= 6:
        raise FieldError("prompts", "Batch prompts must be 2 to 6 prompts, one per line; got "
                                    f"{len(texts) if isinstance(texts, list) else 'none'}.")
    ids = [_lab_ids(model, t, "prompts", f"Batch prompt {i}") for i, t in enumerate(texts, 1)]
    return texts, ids


def batch_view(request_json: str) -> str:
    """{"dataset", "prompts": [2..6 texts], "steps", "seed"} -> the padded batch, slot by slot,
    and each row's largest difference from the same prompt run alone (batch.batch_run)."""
    from decodelab import batch

    try:
        req = _kv_request(request_json, "prompts")
        model, dataset = _lab_model(req)
        texts, ids = _batch_prompts(model, req)
        steps = _lab_number(req, "steps", "Batch steps", 8, 1, 32)
        seed = _lab_number(req, "seed", "Seed", 0, 0, 2**32 - 1)
        need = max(len(p) for p in ids) + steps  # EOS + longest prompt + steps - 1 decodes
        if need > model.context_size:
            raise FieldError("steps", f"Batch steps: the longest prompt and {steps} steps need {need} "
                                      f"positions; this model's context holds "
                                      f"{model.context_size}. Use fewer steps or shorter prompts.")
        result = batch.batch_run(model, ids, steps, seed)
    except (FieldError, FieldErrors) as e:
        return _errors(e)
    return json.dumps({"ok": True, "dataset": dataset, **batch.describe(model, texts, result)})


def break_it(request_json: str) -> str:
    """{"bug", "dataset", "prompt", "steps", "seed", "prompts"} -> the check that catches the
    bug, run with it injected (bugs.run_bug), and the sentence on what went wrong."""
    from decodelab import batch, bugs

    try:
        req = _kv_request(request_json, "bug")
        bug = req.get("bug", "none")
        if bug not in bugs.BUG_IDS:
            raise FieldError("bug", f"Bug must be one of {', '.join(bugs.BUG_IDS)}; got "
                                    f"{str(bug)[:40]!r}.")
        model, dataset = _lab_model(req)
        ids = _lab_ids(model, req.get("prompt", ""), "prompt", "Test prompt")
        steps = _lab_number(req, "steps", "Check steps", 16, 4, 48)
        seed = _lab_number(req, "seed", "Seed", 0, 0, 2**32 - 1)
        texts, batch_ids = None, None
        if bug == "unmasked-padding":
            texts, batch_ids = _batch_prompts(model, req)
            if len({len(p) for p in batch_ids}) < 2:
                raise FieldError("prompts", "Batch prompts: padding only appears when the "
                                            "prompts differ in length; make one shorter.")
            need = max(len(p) for p in batch_ids) + 1 + steps
            if need > model.context_size:
                raise FieldError("steps", f"Check steps: the longest batch prompt and {steps} steps "
                                          f"need {need} positions; the context holds "
                                          f"{model.context_size}.")
        elif len(ids) + 1 + steps > model.context_size:
            raise FieldError("steps", f"Check steps: the test prompt and {steps} steps need "
                                      f"{len(ids) + 1 + steps} positions; the context holds "
                                      f"{model.context_size}. Use fewer steps or a shorter prompt.")
        out = bugs.run_bug(model, bug, ids, steps, seed, batch_prompts=batch_ids)
    except (FieldError, FieldErrors) as e:
        return _errors(e)
    if out["check"] == "batch":
        out["batch"] = batch.describe(model, texts, out["batch"])
    return json.dumps({"ok": True, "dataset": dataset, **out})


def memory(request_json: str) -> str:
    """The kv-memory calculator: {"preset", "layers", "heads", "kv_heads", "head_dim",
    "bytes_per_element", "tokens", "sequences", "dataset"} (costs.memory); "tiny" is the
    page's own transformer on `dataset`. Also returns every preset, for the page's menu."""
    from decodelab import costs
    from decodelab.settings import check_field

    try:
        req = _kv_request(request_json, "preset")
        dataset = check_field("dataset", req.get("dataset", "names"), datasets=_library.datasets())
        tiny = None
        if _library.has_model("transformer", dataset):
            tiny = costs.tiny_preset(_library.model("transformer", dataset))
        result = costs.memory(req, tiny)
    except (FieldError, FieldErrors) as e:
        return _errors(e)
    presets = list(costs.PRESETS) + ([tiny] if tiny else [])
    return json.dumps({"ok": True, **result, "presets": presets})


def cost_sweep(request_json: str) -> str:
    """{"dataset", "repeats"} -> ms per decode step and K/V bytes read at context lengths from
    2 to the full window, cache on and off (costs.step_costs), measured in this Python."""
    from decodelab import costs

    try:
        req = _kv_request(request_json, "dataset")
        model, dataset = _lab_model(req)
        repeats = _lab_number(req, "repeats", "Repeats", 5, 1, 25)
    except (FieldError, FieldErrors) as e:
        return _errors(e)
    T = model.context_size
    lengths = [2] + [T * i // 8 for i in range(1, 9)]
    return json.dumps({"ok": True, "dataset": dataset, **costs.step_costs(model, lengths, repeats)})


def _summary(run, model) -> dict:
    checks = [r["cache_diff"] for r in run.records if "cache_diff" in r]
    n = len(run.records)
    return {"text": run.text, "prompt": run.settings.prompt, "finish_reason": run.finish_reason,
            "stop_reason": run.stop_reason, "steps": n,
            "tokens": [{"text": r["token_text"], "prob": r["prob"]} for r in run.records],
            "mean_prob": sum(r["prob"] for r in run.records) / n if n else None,
            "mean_entropy": sum(r["entropy"] for r in run.records) / n if n else None,
            "params": getattr(model, "n_params", None),
            "cache_max_diff": max(checks) if checks else None,
            "cache_ok": all(r["cache_ok"] for r in run.records) if checks else None}


def compare(settings_json: str) -> str:
    """The same settings (prompt, seed, rules) run once with each model, start to finish."""
    try:
        raw = _kv_request(settings_json, "settings")
        runs = {}
        for kind in MODELS:
            run = start_generation(_library, {**raw, "model": kind})
            if run.settings.max_new_tokens > COMPARE_MAX_TOKENS:
                raise FieldErrors([FieldError(
                    "max_new_tokens", f"Max new tokens: the side-by-side run takes at most "
                                      f"{COMPARE_MAX_TOKENS} per model; got "
                                      f"{run.settings.max_new_tokens}.")])
            runs[kind] = _summary(run.run(), run.model)
    except (FieldError, FieldErrors) as e:
        return _errors(e)
    return json.dumps({"ok": True, "settings": run.settings.to_json(), "runs": runs})


def bench_generation(request_json: str) -> str:
    """The benchmark's transformer rows: {"settings", "cache": true|false} -> one generation
    timed whole and decode-only (costs.time_generation), the same function natively and here."""
    from decodelab import costs
    from decodelab.settings import validate

    req = json.loads(request_json)
    settings = validate(req.get("settings", {}), datasets=_library.datasets())
    model = _library.model(settings.model, settings.dataset)
    if not req.get("cache", True):
        model = costs.Uncached(model)
    return json.dumps(costs.time_generation(model, settings))
