"""pretrained: the real model read in the page, a part per batch.

The worker downloads the GGUF file (or takes the one kept in the browser, or one the learner
opened from disk: `reads` says what such a file must be), checks its sha256 and writes it into
Python's file system; `pretrained_load_start` {"path", "engine", "file"} reads its header and
configuration for the engine asked for (`pretrained.engines`; the page's default where absent;
"file": the name of a file of one's own, which the command line that repeats a run names),
and `pretrained_load_advance` reads the rest a part at a time (the tokenizer, each block, the
embedding), so the page shows how far it has got and can stop between two parts. The last
part hands the model to the library, which every page sharing this Python shares; runs with
Model SmolLM2 use it from then on. `pretrained_cancel` drops a load stopped
half-way (its arrays go with it). `pretrained` says whether the model is loaded, and what it is.

A chat turn is a run (`start` with "messages"): the conversation rendered by the model's chat
template, and when the page's last run was a turn of the same conversation, its cache forked
and cut where the two prompts part, so only the new turn's tokens are prefilled.
"""

import os
import time

from decodelab.core.models.kvcache import cache_shape
from decodelab.entry.webapi.registry import Session, endpoint, experiment
from decodelab.errors import FieldError
from decodelab.fields import PRETRAINED
from decodelab.lesson.planned import Planned
from decodelab.pretrained import engines
from decodelab.pretrained.card import TITLE
from decodelab.pretrained.chat import start_turn

NAME = PRETRAINED[0]


def describe(model) -> dict:
    """What the page says of a loaded model: its name and licence, its shape, and what a token
    of its cache takes in the dtype its runs use."""
    from decodelab.pretrained.model import SMOLLM2_NAME

    cfg = model.cfg
    # SmolLM2 by its makers' name, not its file's ("Smollm2 135M 8k Lc100K Mix1 Ep2"); a file
    # of one's own by the name it gives itself
    name = TITLE if model.info.get("name") == SMOLLM2_NAME else model.info.get("name", "")
    return {"model": NAME, "name": name,
            "license": model.info.get("license", ""), "params": model.n_params,
            "n_head": cfg.n_head, "n_embd": cfg.n_embd, "vocab_size": cfg.vocab_size,
            "trained_context": model.info.get("trained_context"),
            "file_types": model.info.get("file_types", []),
            "chat": model.template is not None, **cache_shape(model),
            # the arithmetic it was read for, and what its weights hold so
            "engine": model.engine, "engine_label": engines.LABELS[model.engine],
            "engine_phrase": engines.PHRASES[model.engine],
            "weight_bytes": model.weight_bytes}


class Loading(Planned):
    """One GGUF file read a part at a time (`pretrained.model.Reader`); the model goes to the
    library when the last part is read."""

    def __init__(self, library, req: dict):
        from decodelab.pretrained.gguf import GGUFError
        from decodelab.pretrained.model import Reader

        path = req.get("path")
        if not isinstance(path, str) or not os.path.isfile(path):
            raise FieldError("gguf", f"GGUF: no file at {path}.")
        engine = engines.check(req.get("engine", engines.about()["default"]))
        self.library, self.began = library, time.perf_counter()
        try:
            self.reader = Reader(path, engine=engine)
        except GGUFError as e:
            raise FieldError("gguf", f"GGUF: {e}.") from None
        if isinstance(req.get("file"), str) and req["file"]:  # a file of one's own, by its name
            self.reader.file = self.reader.opened = os.path.basename(req["file"])
        self.plan = list(self.reader.parts)
        self.total, self.steps = len(self.plan), 0
        self.info = None

    def _make(self, part: str) -> None:
        from decodelab.pretrained.gguf import GGUFError

        try:
            self.reader.part(part)
            if not self.plan:
                model = self.reader.model()
                self.library.keep_pretrained(model)
                self.reader = None  # the model holds what it needs of the file
                self.info = {**describe(model),
                             "seconds": round(time.perf_counter() - self.began, 3)}
        except GGUFError as e:
            self.plan = []
            raise FieldError("gguf", f"GGUF: {e}.") from None

    def progress(self) -> dict:
        return {**super().progress(), "part": self.plan[0] if self.plan else "done"}

    def result(self) -> dict:
        return self.info


experiment("pretrained_load", Loading, "No load of the model has been started.")


@endpoint
def _pretrained_cancel(session: Session, req: dict) -> dict:
    """Stop a load half-way: what it read so far is dropped."""
    session.planned["pretrained_load"] = None
    return {}


def reads() -> dict:
    """What a GGUF file of the learner's own must be: the reader's own limits, for the page to
    say before a file is chosen and to check its size before a byte of it is read."""
    from decodelab.pretrained.limits import ARCHITECTURES, BLOCKS, MAX_FILE_BYTES

    return {"max_file_bytes": MAX_FILE_BYTES, "architectures": list(ARCHITECTURES),
            "types": list(BLOCKS)}


def state(library) -> dict:
    """{"loaded": false, "reads", "engines"}, or {"loaded": true, "reads", "engines",
    ...describe(model)} once a model is read."""
    about = {"reads": reads(), "engines": engines.about()}
    if not library.has_pretrained():
        return {"loaded": False, **about}
    return {"loaded": True, **about, **describe(library.pretrained())}


@endpoint
def _pretrained(session: Session, req: dict) -> dict:
    """Is the real model loaded in this Python, and what is it (`state`)."""
    return state(session.library)


def chat_start(session: Session, req: dict):
    """A chat turn: req is a run's settings with "messages" (the conversation so far, the new
    user message last) -> its run (`pretrained.chat.start_turn`, the command line's chat too),
    from the last turn's cache where it can."""
    raw = {k: v for k, v in req.items() if k != "messages"}
    return start_turn(session.library, {**raw, "model": NAME}, req["messages"], session.last)
