"""Serving many requests from one paged cache: a workload, the scheduler run over it
(`core.serving.scheduler`), and what the vLLM paper measured, at this page's scale.

The model is the dataset's transformer, or the pretrained model (SmolLM2, read from its GGUF
file). A chat model's requests are chats: its default system message, then one user message
(seeded: a capital or a sum of `pretrained.questions`; own: the line's text), rendered by its
chat template, so every request begins with the same tokens and the prefix tree finds them.

The workload is seeded, or the learner's own. Seeded: `requests` requests, each a prompt cut
from a held-out text of the dataset (a few base texts, so that requests share their starts as
requests of one application do), a budget of 8 to 40 new tokens, a temperature of 0.7, 1 or
1.3, its own seed, and an arrival step (gaps of 0 to 3 steps; 4 to 12 between chats). The
same seed gives the same workload. Own: one line per request, "arrival new-tokens prompt"
(temperature 1, seeds seed, seed + 1, ...). With `parallel_samples` k > 1, each request is k
samples of its prompt (seeds s, s + 1, ...), prefilled once and forked: their blocks are
shared, copied on write.

Waste, over the whole run: at every step, for every running request, the positions its cache
holds (used) against the positions reserved for it, summed over steps:
- contiguous at the maximum length: the model's whole window reserved from the start (what a
  cache of one array per sequence does, and decodelab's own Session);
- contiguous at the actual length: exactly the length the request will end with, reserved from
  the start (an oracle: even knowing it, the room waits to be filled);
- paged: the blocks its table holds (the last one partly filled).
waste = 1 - used / reserved. Blocks shared (peak), copies on write, the prefix tree's hit rate
and the prefill tokens it saved, and the steps of continuous against static batching.

For the page, `Serving` makes the run a few steps at a time (progress, Stop) and keeps a frame
per step: who joined, left and was preempted, every block's state, each request's block table,
the prefix tree and the memory bar.

Wall time is measured for one thing only, the prefills (each request's first step): with the
prefix tree (continuous) and without it (static batching), in "measured"; the benchmark
measures the rest.
"""

import codecs
import random
import re

from decodelab.core.models.kvcache import blocks_for
from decodelab.core.serving.scheduler import CannotFit, Request, Scheduler
from decodelab.errors import FieldError
from decodelab.fields import (FIELD_BY_NAME, POOL_MB, PRETRAINED, PRETRAINED_TEXTS, encode,
                              label_of, read)
from decodelab.lesson.planned import Planned
from decodelab.pretrained.questions import CAPITALS, real_questions

FIELDS = ("dataset", "tokenizer", "requests", "block_size", "seed", "memory_blocks",
          "max_running", "parallel_samples", "workload")
MAX_RUNNING = FIELD_BY_NAME["max_running"].default  # requests decoding at once, unless set
# the panel's own settings a link may carry (?block_size=4#serving)
LINK_FIELDS = ("requests", "block_size", "memory_blocks", "max_running", "parallel_samples")
MAX_SEQUENCES = 400  # requests x samples in one run
GRID_LIMIT = 1024  # frames carry every block's state up to this many blocks
LINE = "arrival step, new tokens, prompt (like “0 20 The ship”)"
MODELS = ("transformer", *PRETRAINED)  # the models with a KV cache to page
GAPS = (0, 3)  # steps between two arrivals of a seeded workload
# a chat service's users arrive further apart (and a real model's step is slow): the seeded
# chats come a few steps after each other, each finding the system message's blocks in the
# prefix tree, put there by the first chat's prefill
CHAT_GAPS = (4, 12)
# the page's form for a real model: its steps take a second or so in the page, not
# milliseconds, and blocks of 8 let the system message fill three of them (SmolLM2's chat
# prompt begins with the same 24 tokens for every request: the system message and the user's
# turn marker)
PRETRAINED_DEFAULTS = {"requests": 6, "block_size": 8}


def block_state(holders: int, in_tree: bool) -> str:
    """A block's state in a frame, from its holders (the requests whose tables have it, and the
    prefix tree, which holds each block it keeps once): F free, C kept by the tree alone, U
    held by one request, T held by one request and kept by the tree (the blocks it has filled:
    a later request with the same start finds them), S shared by two requests or more."""
    requests = holders - in_tree
    if not holders:
        return "F"
    if requests > 1:
        return "S"
    return ("T" if requests else "C") if in_tree else "U"


def _head(model, dataset: str, tokenizer: str) -> dict:
    """The settings every request of a workload starts with: which model runs it."""
    if model.own_data:  # (the library's one model read from a file, by the field's value)
        return {"model": PRETRAINED[0]}
    return {"model": "transformer", "dataset": dataset, "tokenizer": tokenizer}


POOL_BYTES = POOL_MB * 2**20  # the pool when Memory blocks is empty takes at most this
MAX_POOL_BYTES = 512 * 2**20  # and any pool at most this


def block_bytes(model, block_size: int) -> int:
    """One block's keys and values over every layer, in the dtype its sessions compute in."""
    from decodelab.core.models.kvcache import cache_shape

    return block_size * cache_shape(model)["bytes_per_token"]


def room_for(model, block_size: int, running: int = MAX_RUNNING) -> int:
    """The pool when Memory blocks is empty: room for `running` requests at the full window, or
    as many blocks as POOL_BYTES holds when that is fewer (a real model's window of 2,048
    positions, eight times over, would take 755 MB)."""
    return min(running * blocks_for(model.cfg.context_size, block_size),
               max(1, POOL_BYTES // block_bytes(model, block_size)))


def is_chat(model) -> bool:
    """Whether the model's requests are chats (a model with a chat template decodelab renders)."""
    return model.has_template


def _ask(model, prompt: str) -> dict:
    """A request's text as its settings take it: a chat's one user message, or the prompt."""
    if is_chat(model):
        return {"messages": [{"role": "user", "content": prompt}]}
    return {"prompt": prompt}


def asked(settings: dict) -> str:
    """What a request asks: its prompt, or its chat's last message."""
    return settings["messages"][-1]["content"] if "messages" in settings else settings["prompt"]


def _prompt_length(model, prompt: str, field: str = "workload") -> int:
    """The positions a request's text takes, as the model reads it (a chat with its template)."""
    if is_chat(model):
        from decodelab.core.loops.generate import chat_ids

        return len(chat_ids(model, [{"role": "user", "content": prompt}]))
    return len(encode(model.tokenizer, field, prompt))


def _expand(base: list, samples: int) -> list:
    """[(settings, arrival)] -> Requests numbered in order, each base request k samples."""
    out = []
    for settings, arrival in base:
        first = len(out)
        for j in range(samples):
            out.append(Request(len(out), {**settings, "seed": settings["seed"] + j}, arrival,
                               group=first if samples > 1 else None))
    return out


def workload(library, dataset: str, tokenizer: str, n: int, seed: int, samples: int = 1,
             model=None) -> list:
    """n seeded requests on the dataset's transformer, or on `model` (each `samples` samples),
    their prompts cut from the dataset's held-out texts."""
    rng = random.Random(seed)
    model = model or library.model("transformer", dataset, tokenizer)
    texts = [t for t in library.corpus(dataset).val if len(t) >= 4]
    bases = [rng.choice(texts) for _ in range(max(2, n // 4))]
    questions = [q["question"] for q in real_questions(2 * len(CAPITALS))]
    window = model.cfg.context_size
    base, at = [], 0
    for _ in range(n):
        if is_chat(model):  # a chat: the system message is what the requests share
            prompt = rng.choice(questions)
        else:  # cut from a few texts, so that requests share their starts
            text = rng.choice(bases)
            cut = rng.randint(max(1, len(text) // 3), max(1, len(text) * 2 // 3))
            prompt = text[:cut]
            while len(model.tokenizer.encode(prompt)) + 1 + 8 > window:
                prompt = prompt[:len(prompt) // 2]
        room = window - 1 - _prompt_length(model, prompt)
        settings = {**_head(model, dataset, tokenizer), **_ask(model, prompt),
                    "seed": rng.randrange(2**31), "temperature": rng.choice([0.7, 1.0, 1.3]),
                    "max_new_tokens": min(rng.randint(8, 40), room), "cache_check": False,
                    "tools": "off"}
        base.append((settings, at))
        at += rng.randint(*(CHAT_GAPS if is_chat(model) else GAPS))
    return _expand(base, samples)


def own_workload(model, lines, dataset: str, tokenizer: str, seed: int, samples: int = 1) -> list:
    """The learner's lines, "arrival new-tokens prompt", as Requests; a FieldError naming the
    workload and the line for anything else."""
    window = model.cfg.context_size
    base = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parts = line.split(None, 2)  # spaces or tabs between the fields; the prompt as it is
        where = f"Your workload, line {i}"
        if len(parts) < 2:
            raise FieldError("workload", f"{where}: write {LINE}; got {line.strip()!r}.")
        arrival, budget = parts[0], parts[1]
        prompt = parts[2] if len(parts) == 3 else ""
        if not re.fullmatch(r"[0-9]{1,5}", arrival) or int(arrival) > 10_000:
            raise FieldError("workload", f"{where}: the arrival step must be a whole number "
                                         f"from 0 to 10000; got {arrival!r}. Each line is {LINE}.")
        if not re.fullmatch(r"[0-9]{1,5}", budget) or int(budget) < 1:
            raise FieldError("workload", f"{where}: the new tokens must be a whole number of at "
                                         f"least 1; got {budget!r}. Each line is {LINE}.")
        try:
            length = _prompt_length(model, prompt)
        except FieldError as e:  # "Your workload has characters ...": which line, said
            words = e.message.replace(label_of("workload"), f"{where}: the prompt", 1)
            if words.startswith("Message 1 "):  # a chat's one message: the line's text
                words = f"{where}: the text{words[len('Message 1'):]}"
            raise FieldError("workload", words) from None
        room = window - 1 - length
        if room < 1 or int(budget) > room:
            raise FieldError("workload", f"{where}: {budget} new tokens after a prompt of "
                                         f"{length} tokens do not fit the model's window of "
                                         f"{window} positions; at most {max(room, 0)} fit.")
        settings = {**_head(model, dataset, tokenizer), **_ask(model, prompt),
                    "seed": (seed + len(base) * samples) % 2**32,
                    "temperature": 1.0, "max_new_tokens": int(budget), "cache_check": False,
                    "tools": "off"}
        base.append((settings, int(arrival)))
    return _expand(base, samples)


def _label(request, samples: int) -> str:
    """"3", or "3b" for the second sample of the fourth request."""
    if samples == 1:
        return str(request.number)
    return f"{request.number // samples}{'abcdefgh'[request.number % samples]}"


class Serving(Planned):
    """One serving run: the workload through the scheduler, continuous then static, a few
    steps at a time (`advance`, from Planned), a frame per continuous step."""

    def __init__(self, library, req: dict):
        name = MODELS[0]  # (a request that is not an object: read() below says what it must be)
        if isinstance(req, dict):
            name = req.get("model", name)
            req = {k: v for k, v in req.items() if k != "model"}
        if name not in MODELS:
            raise FieldError("model", f"Model must be {' or '.join(MODELS)}: only they have a KV "
                                      f"cache to page; got {name!r}.")
        if name != MODELS[0]:  # it brings its own tokenizer; its seeded prompts are prose
            req.setdefault("dataset", PRETRAINED_TEXTS)
        values = read(req, FIELDS, {"dataset": {"choices": tuple(library.datasets())},
                                    "tokenizer": {"choices": ("chars", "bpe")}})
        dataset, tokenizer = values["dataset"], values["tokenizer"]
        if name == MODELS[0] and not library.has_model("transformer", dataset, tokenizer):
            raise FieldError("tokenizer", f"There is no transformer of the {dataset} data read "
                                          f"as {tokenizer}; the site has "
                                          f"{', '.join(library.tokenizers(dataset))}.")
        self.library, self.values, self.model_name = library, values, name
        self.model = model = library.pretrained() if name != MODELS[0] else \
            library.model("transformer", dataset, tokenizer)
        self.samples = k = values["parallel_samples"]
        # the text of a token the prefix tree shows: the start token none, a special token its
        # markup (made once here: the tree is drawn at every frame)
        tok = model.tokenizer
        self._markup = {i: None for i in tok.start_ids}
        self._markup.update({i: text for text, i in tok.special_ids.items()})
        own = [line for line in values["workload"] if line.strip()]
        make = (lambda: own_workload(model, values["workload"], dataset, tokenizer, values["seed"],
                                     k)) if own \
            else (lambda: workload(library, dataset, tokenizer, values["requests"],
                                   values["seed"], k, model))
        self.requests = make()
        if len(self.requests) > MAX_SEQUENCES:
            raise FieldError("parallel_samples", f"Samples per request: {len(self.requests) // k} "
                                                 f"requests of {k} samples make "
                                                 f"{len(self.requests)} sequences; at most "
                                                 f"{MAX_SEQUENCES} are served in one run.")
        b = self.block_size = values["block_size"]
        self.per_request = blocks_for(model.cfg.context_size, b)
        running = values["max_running"]
        self.blocks = values["memory_blocks"] or room_for(model, b, running)
        most = MAX_POOL_BYTES // block_bytes(model, b)
        if self.blocks > most:
            raise FieldError("memory_blocks", f"Memory blocks: {self.blocks:,} blocks of {b} "
                                              f"positions of this model take "
                                              f"{self.blocks * block_bytes(model, b) / 2**20:,.0f}"
                                              f" MiB; at most {most:,} ({MAX_POOL_BYTES // 2**20} "
                                              f"MiB) here.")
        self.continuous = Scheduler(library, self.requests, num_blocks=self.blocks,
                                    block_size=b, max_running=running)
        least = self.continuous.least_blocks  # the largest request's join, as it counts it
        if self.blocks < least:
            raise FieldError("memory_blocks", f"Memory blocks must hold one request at least: "
                                              f"{least} blocks of {b} here; got {self.blocks}.")
        self.static = Scheduler(library, make(), num_blocks=self.blocks, block_size=b,
                                max_running=running, static=True, share_prefixes=False)
        self.frames = []
        self.total = 2 * len(self.requests)
        self.plan = [None]  # not done until both schedulers are (see done)
        self.steps = 0
        self.idle = 0  # steps in a row at which nobody decoded

    # --- made a few steps at a time ------------------------------------------------------------

    @property
    def done(self) -> bool:
        return not (self._busy(self.continuous) or self._busy(self.static))

    @staticmethod
    def _busy(s) -> bool:
        return bool(s.waiting or s.running)

    def _make(self, _) -> None:
        s = self.continuous if self._busy(self.continuous) else self.static
        if s.step >= 100_000:
            raise RuntimeError("the workload did not finish in 100000 steps")
        try:
            log = s.advance()
        except CannotFit as e:  # the scheduler's verdict, in the panel's words
            raise FieldError("memory_blocks", f"Memory blocks: the workload cannot finish: {e}. "
                                              f"Give more blocks (room for one full window is "
                                              f"{self.per_request}).") from None
        self.steps += 1
        # nobody decoded although requests have arrived: a guard against a schedule that
        # cannot go on, said instead of spinning
        stuck = not log["held"] and any(r.arrival <= s.step for r in s.waiting)
        self.idle = self.idle + 1 if stuck else 0
        if self.idle > 50:
            raise FieldError("memory_blocks", f"Memory blocks: the workload cannot go on: no "
                                              f"request could decode for 50 steps with "
                                              f"{s.pool.num_blocks} blocks. Give more blocks.")
        if s is self.continuous:
            self.frames.append(self._frame(log))
        if not self.done:
            self.plan.append(None)

    def progress(self) -> dict:
        finished = len(self.continuous.done) + len(self.static.done)
        # what is counted, in words: every request is served twice, so the count is not the
        # result's number of requests
        return {"done": finished, "total": self.total, "steps": self.steps,
                "unit": ["serving", "servings"],
                "note": "each request served twice: continuously batched, then in static batches"}

    # --- what a step looked like -----------------------------------------------------------------

    def _frame(self, log) -> dict:
        s, b = self.continuous, self.block_size
        pool, tree = s.pool, s.tree
        nodes = list(tree.nodes())
        in_tree = {n.block for n in nodes}
        fill = {}  # block -> positions filled, over the running requests' tables
        for r in s.running:
            cache = r.run.session.cache
            for i, block in enumerate(cache.table):
                fill[block] = max(fill.get(block, 0), min(b, cache.length - i * b))
        refs = pool.refs.tolist()
        state = "".join(block_state(n, i in in_tree) for i, n in enumerate(refs))
        cached = sum(1 for i, n in enumerate(refs) if n == 1 and i in in_tree and i not in fill)
        used = sum(fill.values())
        arrived = {r.number for r in s.waiting if r.arrival <= log["step"]}
        requests = {r.number: r for r in self.requests}
        frame = {
            "step": log["step"], "joined": log["joined"], "left": log["left"],
            "preempted": log["preempted"], "running": log["running"],
            "waiting": sorted(arrived),
            # [request, positions, block table] of every request that decoded at this step
            "tables": [[n, length, table] for n, length, table in log["held"]],
            "copied": [list(c) for c in log["copied"]], "evicted": log["evicted"],
            "reused": [[n, requests[n].reused] for n in log["joined"]
                       if requests[n].reused and requests[n].preempted == 0],
            "forked": [n for n in log["joined"] if requests[n].forked],
            "recomputed": log["recomputed"],
            "memory": {"used": used, "reserved": len(fill) * b - used, "cached": cached * b,
                       "free": len(pool.free) * b},
            "blocks_shared": log["blocks_shared"],
        }
        if pool.num_blocks <= GRID_LIMIT:
            frame["state"], frame["refs"] = state, refs
            parent = {id(n): n.parent.block for n in nodes}
            frame["tree"] = [[n.block, -1 if parent[id(n)] is None else parent[id(n)],
                              self._pieces(n.key)] for n in nodes]
            frame["tree"].sort(key=lambda node: node[0])
        return frame

    def _pieces(self, ids) -> list:
        """Each token's text (the start token as None, a special token as its markup)."""
        utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        tok, markup = self.model.tokenizer, self._markup
        return [markup[i] if i in markup else utf8.decode(tok.token_bytes(i)) for i in ids]

    # --- the result --------------------------------------------------------------------------------

    def result(self, frames: bool = True) -> dict:
        s, window = self.continuous, self.model.cfg.context_size
        spans = {r.number: [] for r in self.requests}
        for log in s.log:
            for n, _, _ in log["held"]:
                run = spans[n]
                if run and run[-1][1] == log["step"] - 1:
                    run[-1][1] = log["step"]
                else:
                    run.append([log["step"], log["step"]])
        out = {
            "requests": [{"number": r.number, "label": _label(r, self.samples),
                          "prompt": asked(r.settings), "settings": r.settings,
                          "ids": r.run.output_ids, "text": r.run.text,
                          "arrival": r.arrival, "joined_step": r.joined_step,
                          "finished_step": r.finished_step, "preempted": r.preempted,
                          "spans": spans[r.number], "group": r.group}
                         for r in sorted(self.requests, key=lambda r: r.number)],
            "waste": _waste(s, window),
            "blocks_shared": max((log["blocks_shared"] for log in s.log), default=0),
            "copies_on_write": s.pool.copies_on_write,
            "prefix_hit_rate": s.tree.hit_rate,
            "prefill_tokens_saved": s.tree.found,
            "evicted": len(s.tree.evicted),
            "preemptions": sum(r.preempted for r in self.requests),
            "steps": s.step, "static_steps": self.static.step,
            "block_size": self.block_size, "memory_blocks": self.blocks,
            "max_running": self.values["max_running"], "parallel_samples": self.samples,
            "window": window, "blocks_per_window": self.per_request,
            "model": self.model_name, "dataset": self.values["dataset"],
            "tokenizer": None if self.model.own_data else self.values["tokenizer"],
            "seed": self.values["seed"], "own_workload": bool(
                [line for line in self.values["workload"] if line.strip()]),
            "workload_lines": [f"{r.arrival} {r.settings['max_new_tokens']} "
                               f"{asked(r.settings)}" for r in self.requests
                               if r.group is None or r.group == r.number],
            "schedule": [{k: v for k, v in log.items() if k != "held"} for log in s.log],
            "runs": len(self.requests), "command": self.command(),
            # a chat model's requests: the system message every one of them begins with
            "system": self.model.template.default_system if is_chat(self.model) else None,
            # wall time, this machine's: the prefills with the prefix tree and without it
            "measured": {"prefill_s": s.prefill_seconds,
                         "prefill_s_without_tree": self.static.prefill_seconds},
        }
        if frames:
            out["frames"] = self.frames
            out["grid"] = self.blocks <= GRID_LIMIT
        return out


    def command(self) -> str:
        """The command line that serves this workload again and prints it as JSON, written as
        the workbench's are (entry/command.py: python3, --option=value), and for the real model
        on the engine it ran on."""
        import shlex  # here, not at the page's start (its Python is snapshotted before)

        v = self.values
        pairs = [("model", self.model_name)]
        if self.model.own_data:  # the real model: its arithmetic (--engine), no dataset
            pairs.append(("engine", self.model.engine))
        else:
            pairs += [("dataset", v["dataset"]), ("tokenizer", v["tokenizer"])]
        pairs += [("block-size", v["block_size"]), ("seed", v["seed"])]
        own = [line.strip() for line in v["workload"] if line.strip()]
        pairs += [("workload", line) for line in own] if own else [("requests", v["requests"])]
        if v["memory_blocks"] is not None:
            pairs.append(("memory-blocks", v["memory_blocks"]))
        for name in ("max_running", "parallel_samples"):
            if v[name] != FIELD_BY_NAME[name].default:
                pairs.append((name.replace("_", "-"), v[name]))
        words = ["python3", "-m", "decodelab", "paged"]
        words += [f"--{flag}={shlex.quote(str(value))}" for flag, value in pairs]
        return " ".join(words + ["--json"])


def _waste(scheduler, window: int) -> dict:
    final = {}  # the length each request ended with
    for log in scheduler.log:
        for number, length, _ in log["held"]:
            final[number] = max(final.get(number, 0), length)
    used = reserved_max = reserved_actual = reserved_paged = 0
    b = scheduler.pool.block_size
    for log in scheduler.log:
        for number, length, table in log["held"]:
            used += length
            reserved_max += window
            reserved_actual += final[number]
            reserved_paged += len(table) * b
    waste = lambda reserved: 1 - used / reserved if reserved else None  # noqa: E731
    return {"contiguous_max": waste(reserved_max), "contiguous_actual": waste(reserved_actual),
            "paged": waste(reserved_paged)}


def serve(library, req: dict) -> dict:
    """The CLI's `paged`: the workload run by the scheduler, continuous and static, with the
    measures (no frames)."""
    return Serving(library, req).run().result(frames=False)
