"""Serving many requests from one paged cache: a seeded workload, the scheduler run over it
(`core.scheduler`), and what the vLLM paper measured, at this page's scale.

The workload: `requests` requests, each a prompt cut from a held-out text of the dataset (a few
base texts, so that requests share their starts as requests of one application do), a budget of
8 to 40 new tokens, a temperature of 0.7, 1 or 1.3, its own seed, and an arrival step (gaps of
0 to 3 steps). The same seed gives the same workload.

Waste, over the whole run: at every step, for every running request, the positions its cache
holds (used) against the positions reserved for it, summed over steps:
- contiguous at the maximum length: the model's whole window reserved from the start (what a
  cache of one array per sequence does, and decodelab's own Session);
- contiguous at the actual length: exactly the length the request will end with, reserved from
  the start (an oracle: even knowing it, the room waits to be filled);
- paged: the blocks its table holds (the last one partly filled).
waste = 1 - used / reserved. Blocks shared (peak), copies on write, the prefix tree's hit rate
and the prefill tokens it saved, and the steps of continuous against static batching.

Left out: wall time (the benchmark measures it), a learner's own workload (the page's next part).
"""

import random

from decodelab.core.scheduler import Request, Scheduler
from decodelab.errors import FieldError
from decodelab.fields import read

FIELDS = ("dataset", "tokenizer", "requests", "block_size", "seed", "memory_blocks")
MAX_RUNNING = 8  # requests decoding at once


def workload(library, dataset: str, tokenizer: str, n: int, seed: int) -> list:
    """n seeded requests on the dataset's transformer."""
    rng = random.Random(seed)
    model = library.model("transformer", dataset, tokenizer)
    texts = [t for t in library.corpus(dataset).val if len(t) >= 4]
    bases = [rng.choice(texts) for _ in range(max(2, n // 4))]
    window = model.cfg.context_size
    out, at = [], 0
    for i in range(n):
        text = rng.choice(bases)
        cut = rng.randint(max(1, len(text) // 3), max(1, len(text) * 2 // 3))
        prompt = text[:cut]
        while len(model.tokenizer.encode(prompt)) + 1 + 8 > window:
            prompt = prompt[:len(prompt) // 2]
        room = window - 1 - len(model.tokenizer.encode(prompt))
        settings = {"model": "transformer", "dataset": dataset, "tokenizer": tokenizer,
                    "prompt": prompt, "seed": rng.randrange(2**31),
                    "temperature": rng.choice([0.7, 1.0, 1.3]),
                    "max_new_tokens": min(rng.randint(8, 40), room), "cache_check": False,
                    "tools": "off"}
        out.append(Request(i, settings, arrival=at))
        at += rng.randint(0, 3)
    return out


def _waste(scheduler, requests, window: int) -> dict:
    final = {}  # the length each request ended with
    for log in scheduler.log:
        for number, length, _ in log["held"]:
            final[number] = max(final.get(number, 0), length)
    used = reserved_max = reserved_actual = reserved_paged = 0
    b = scheduler.pool.block_size
    for log in scheduler.log:
        for number, length, blocks in log["held"]:
            used += length
            reserved_max += window
            reserved_actual += final[number]
            reserved_paged += blocks * b
    waste = lambda reserved: 1 - used / reserved if reserved else None  # noqa: E731
    return {"contiguous_max": waste(reserved_max), "contiguous_actual": waste(reserved_actual),
            "paged": waste(reserved_paged)}


def serve(library, req: dict) -> dict:
    """The CLI's `paged` and the page's serving panel: the workload run by the scheduler,
    continuous and static, with the measures."""
    values = read(req, FIELDS, {"dataset": {"choices": tuple(library.datasets())},
                                "tokenizer": {"choices": ("chars", "bpe")}})
    dataset, tokenizer = values["dataset"], values["tokenizer"]
    if not library.has_model("transformer", dataset, tokenizer):
        raise FieldError("tokenizer", f"There is no transformer of the {dataset} data read as "
                                      f"{tokenizer}; the site has {', '.join(library.tokenizers(dataset))}.")
    model = library.model("transformer", dataset, tokenizer)
    b = values["block_size"]
    per_request = -(-model.cfg.context_size // b)
    blocks = values["memory_blocks"] or MAX_RUNNING * per_request
    requests = workload(library, dataset, tokenizer, values["requests"], values["seed"])
    biggest = max(-(-(2 + len(r.settings["prompt"])) // b) + 1 for r in requests)
    if blocks < biggest:
        raise FieldError("memory_blocks", f"Memory blocks must hold one request at least: "
                                          f"{biggest} blocks of {b} here; got {blocks}.")
    s = Scheduler(library, requests, num_blocks=blocks, block_size=b, max_running=MAX_RUNNING)
    try:
        s.run()
    except ValueError as e:  # a request that outgrew the pool: said, never a hang
        raise FieldError("memory_blocks", f"Memory blocks: the workload cannot finish: {e}. "
                                          f"Give more blocks (room for one full window is "
                                          f"{per_request}).") from None
    static = Scheduler(library, workload(library, dataset, tokenizer, values["requests"],
                                         values["seed"]),
                       num_blocks=blocks, block_size=b, max_running=MAX_RUNNING,
                       static=True, share_prefixes=False).run()
    return {
        "requests": [{"prompt": r.settings["prompt"], "settings": r.settings,
                      "ids": r.run.output_ids, "text": r.run.text,
                      "arrival": r.arrival, "joined_step": r.joined_step,
                      "finished_step": r.finished_step, "preempted": r.preempted}
                     for r in sorted(requests, key=lambda r: r.number)],
        "waste": _waste(s, requests, model.cfg.context_size),
        "blocks_shared": max((log["blocks_shared"] for log in s.log), default=0),
        "copies_on_write": s.pool.copies_on_write,
        "prefix_hit_rate": s.tree.hit_rate,
        "prefill_tokens_saved": s.tree.found,
        "steps": s.step, "static_steps": static.step,
        "block_size": b, "memory_blocks": blocks,
        "schedule": [{k: v for k, v in log.items() if k != "held"} for log in s.log],
    }
