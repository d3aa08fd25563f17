"""What the browser worker calls: plain functions, JSON strings in and out.

Only strings cross the JavaScript boundary (no Python objects held by JS, nothing to leak), and
generation is driven from JavaScript in short time-budgeted batches (`advance`), so the worker
reads a Stop message between batches. One run at a time per worker.

The CLI does not use this module; both go through `generate.start`.
"""

import json
import time

from decodelab import __version__
from decodelab.assets import Library
from decodelab.corpus import corpus_from_text
from decodelab.errors import FieldError, FieldErrors
from decodelab.generate import start as start_generation
from decodelab.playground import probs_from_request
from decodelab.settings import FIELDS, MODELS, Settings

_library = None
_run = None
_last = None  # the last run that finished, for Export trace


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
    global _library
    _library = Library(assets_dir)
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
    })


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
