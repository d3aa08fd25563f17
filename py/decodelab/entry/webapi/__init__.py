"""What the browser worker calls: one function, `call(endpoint, request_json, session)`, JSON
text in, JSON text out.

Only strings cross the JavaScript boundary (no Python objects held by JS, nothing to leak). Every
request is a JSON object read by one parser, every reply is {"ok": true, ...} or {"ok": false,
"errors": [{"field", "label", "message"}, ...]} from one error path, and `registry.ENDPOINTS`
is the table of what can be asked. Each panel of the page has its module here, named as the
panel's script in web/ is:

    catalog     setup: the field table, the models and datasets, the defaults
    run         a run: check, start, advance in batches, cancel, its trace, restore, warm-up,
                training a bigram on the learner's text
    pipeline    one step of the run taken apart
    preview     the next token under the rules being set
    playground  the rules on typed numbers
    prefill     the prompt's prefill, row by row
    experiment  the temperature experiment
    handoff     take it to transformers: the run's model and a script, zipped
    accuracy    right answers against temperature
    shapes      answers with a shape: one card four ways, the validity experiment
    reuse       what a cache is not
    batch       the batch view
    bugs        break it on purpose
    costs       the memory calculator and the measured cost of a step
    compare     both models side by side
    search      beam search and speculative decoding, the acceptance experiment
    twoengines  what an engine's choices change: the real model on both engines, step by step
    serving     a workload served from a paged cache, a frame per scheduler step
    bench       the benchmark's rows, the same functions natively and in the page
    pretrained  the real model, read from its file a part at a time

Generation is driven from JavaScript in short time-budgeted batches (`advance`), so the worker
reads a Stop message between batches. One run at a time per session. Any other endpoint that can
take seconds (a beam search on the real model, say) is a generator (`core.loops.slices`): called with
sliced (as the worker calls every endpoint), it makes a first slice and answers {"ok": true,
"pending": true, "task": n, "progress"}, and the worker calls `resume` ({"task": n,
"budget_ms"}) until the answer is the endpoint's own, or `abandon` ({"task": n}) when the page
stops it; the page sees one request either way.

The CLI does not use this package; both go through `core.loops.generate`.
"""

import inspect
import json

from decodelab.core.library import Library
from decodelab.core.loops.slices import drain
from decodelab.entry.webapi import (  # noqa: F401
    accuracy,
    batch,
    bench,
    bugs,
    catalog,
    compare,
    costs,
    experiment,
    handoff,
    pipeline,
    playground,
    prefill,
    preview,
    pretrained,
    reuse,
    run,
    search,
    serving,
    shapes,
    twoengines,
)
from decodelab.entry.webapi.registry import ENDPOINTS, SESSIONS, Session
from decodelab.errors import FieldError, FieldErrors
from decodelab.fields import error_json, label_of


def _errors(e) -> dict:
    errs = e.errors if isinstance(e, FieldErrors) else [e]
    return {"ok": False, "errors": [error_json(x) for x in errs]}


def call(name: str, request_json: str = "{}", session: str = "page", sliced: bool = False) -> str:
    """Run endpoint `name` on the request (a JSON object) for the page `session`. sliced: an
    endpoint that can take seconds answers after its first slice (the page's worker); else it
    runs to its end (the tests, a script)."""
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
        if inspect.isgenerator(out):  # a long computation, in slices (`core.loops.slices`)
            out = SESSIONS[session].begin(name, out) if sliced else drain(out)
    except (FieldError, FieldErrors) as e:
        return json.dumps(_errors(e))
    return json.dumps({"ok": True, **out})


def forget(session: str) -> None:
    """Drop a page's state when the page is gone (a widget that shared the worker closed)."""
    SESSIONS.pop(session, None)
