"""Take it to transformers: the last finished run's model, exported and zipped with the script
that repeats the run in transformers (`lesson.handoff`). The zip crosses to JavaScript as
base64 text, since only strings cross."""

import base64

from decodelab.entry.webapi.registry import Session, endpoint
from decodelab.errors import FieldError
from decodelab.lesson.handoff import SCRIPT, REPEAT, bundle


@endpoint
def _handoff(session: Session, req: dict) -> dict:
    """{"name": the zip's file name, "zip": its bytes in base64, "bytes", "script": the file
    name of the script in it}; refused for a bigram or when no run has finished."""
    run = session.last
    if run is None:
        raise FieldError("request", "Generate first: the zip repeats the last finished run.")
    name, data = bundle(run)
    return {"name": name, "zip": base64.b64encode(data).decode("ascii"), "bytes": len(data),
            "script": SCRIPT, "script_lines": REPEAT.count("\n")}
