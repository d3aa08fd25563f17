"""What the cache costs (`lesson.costs`): the KV memory calculator with its presets and the
page's own model, and the measured time and K/V bytes of a decode step against context."""

from decodelab.core.models.kvcache import kv_cache_bytes
from decodelab.entry.webapi.batch import lab_model
from decodelab.entry.webapi.registry import Session, endpoint
from decodelab.fields import read
from decodelab.lesson import costs


@endpoint
def _memory(session: Session, req: dict) -> dict:
    """The kv-memory calculator (costs.memory) for a preset and/or explicit fields; "tiny" is the
    page's own transformer on `dataset`. Also returns every preset and every type of number a
    cache can hold (`cache_type`: the one these bytes are, or None), for the page's menus."""
    dataset = session.dataset(req)
    tiny = None
    if session.library.has_model("transformer", dataset):
        tiny = costs.tiny_preset(session.library.model("transformer", dataset))
    result = costs.memory(req, tiny)
    presets = [{**p, "bytes_per_token": kv_cache_bytes(p["layers"], p["kv_heads"], p["head_dim"],
                                                       p["bytes_per_element"], 1)["total_bytes"],
                "number": costs.number_words(p["bytes_per_element"])}
               for p in list(costs.PRESETS) + ([tiny] if tiny else [])]
    return {**result, "presets": presets, "cache_types": list(costs.CACHE_TYPES),
            "cache_type": (costs.cache_type_of(result["inputs"]["bytes_per_element"])
                           or {"id": None})["id"]}


@endpoint
def _cost_sweep(session: Session, req: dict) -> dict:
    """{"dataset", "repeats"} -> ms per decode step and K/V bytes read at context lengths from
    2 to the full window, cache on and off (costs.step_costs), measured in this Python."""
    model, dataset = lab_model(session, req)
    repeats = read(req, ["repeats"])["repeats"]
    T = model.context_size
    lengths = [2] + [T * i // 8 for i in range(1, 9)]
    return {"dataset": dataset, **costs.step_costs(model, lengths, repeats)}
