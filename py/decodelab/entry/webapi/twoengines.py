"""What an engine's choices change (`lesson.twoengines`): a message to the real model read on
both engines, step by step. The page holds the model on one engine; the comparison makes its
float32 twin from the quantized engine's blocks (`pretrained.model.reference_steps`, bit for
bit the reference engine's read of the file), uses it, and lets it go."""

from decodelab.core.kernels import kernels
from decodelab.entry.webapi.registry import Session, endpoint
from decodelab.errors import FieldError
from decodelab.lesson.twoengines import compare_steps

MAX_STEPS = 32  # tokens of each engine's answer: each step is a decode on both
MAX_MESSAGE = 2000  # characters of the message


def read(req: dict) -> tuple:
    """{"message", "answer_tokens"} -> (message, steps), or a FieldError naming the field."""
    message, steps = req.get("message", ""), req.get("answer_tokens", 16)
    if not isinstance(message, str) or not message.strip():
        raise FieldError("message", "Message: write a message for the model to answer.")
    if len(message) > MAX_MESSAGE:
        raise FieldError("message", f"Message: at most {MAX_MESSAGE:,} characters here; got "
                                    f"{len(message):,}.")
    if isinstance(steps, str) and steps.strip().isdigit():
        steps = int(steps)
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise FieldError("answer_tokens", f"Tokens of each answer: a whole number from 1 to "
                                          f"{MAX_STEPS}; got {steps!r}.")
    return message, steps


def prompt_of(model, message: str) -> tuple:
    """The message as the model reads a chat's first turn (its template; plain text for a file
    whose template decodelab cannot render), and the ids that end an answer."""
    if model.template is None:
        return model.tokenizer.encode(message), (model.tokenizer.eos_id,)
    ids = model.template.ids([{"role": "user", "content": message}])
    return ids, (model.template.end_id, model.tokenizer.eos_id)


@endpoint
def _twoengines(session: Session, req: dict):
    """{"message", "answer_tokens"} -> lesson.twoengines' comparison, with the prompt's length, each
    engine's KV cache per position (its arrays' bytes) and where the quantized products ran;
    in slices (the twin is made a few million weights a piece, then a step a piece)."""
    from decodelab.pretrained.model import reference_steps  # (the page's start imports no
    # reader of GGUF files: its tokenizer's Unicode tables come with the model's load)

    message, steps = read(req)
    library = session.library
    if library.engine != "quantized":
        raise FieldError("engine", "Engine: the comparison starts from the model read on the "
                                   "quantized engine (its float32 twin is made from those "
                                   "blocks); choose Quantized on the model's card and load it.")
    model = library.pretrained()  # (NotLoaded, naming the model, where it is not loaded yet)
    ids, stop_ids = prompt_of(model, message)
    if len(ids) + steps > model.cfg.context_size:
        raise FieldError("message", f"Message: {len(ids):,} tokens with the chat's markers; "
                                    f"with {steps} to answer that is over the "
                                    f"{model.cfg.context_size:,}-position window.")
    twin = yield from reference_steps(model)
    out = yield from compare_steps({"reference": twin, "quantized": model}, ids, steps, stop_ids)
    cfg = model.cfg
    per_position = 2 * cfg.n_layer * cfg.n_kv_head * cfg.head_dim  # numbers: a key and a value
    for name, m in (("reference", twin), ("quantized", model)):
        out["engines"][name]["cache_numbers_per_position"] = per_position
        out["engines"][name]["cache_bytes_per_position"] = per_position * 4  # float32 arrays
    # what llama.cpp's cache of its default type (float16) holds: the values the quantized
    # engine's cache holds, in two bytes each
    out["engines"]["quantized"]["cache_bytes_per_position_llamacpp"] = per_position * 2
    return {**out, "message": message, "prompt_tokens": len(ids),
            "kernels": kernels().sentence, "max_steps": MAX_STEPS}
