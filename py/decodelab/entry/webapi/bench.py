"""The benchmark's rows, measured by the same functions natively (tests/benchmark.py calls them
in CPython) and in the page (through these endpoints), so the two numbers time the same code:
a whole run, the transformer's cached and uncached decode, the BPE encoder, resuming after a
tool result, prefix sharing, the accuracy experiment's pace, what JSON mode adds to a step,
speculative decoding against decoding alone, and the real model's prefill and decode
(tests/benchmark_real.py).
"""

import dataclasses
import time

import numpy as np

from decodelab.core.rules import grammar, sampling
from decodelab.core.tasks import data as tasks
from decodelab.core.tokens.bpe import BPE
from decodelab.core.loops.generate import Generation, Prefix
from decodelab.core.loops.generate import start as start_generation
from decodelab.core.models.uncached import Uncached
from decodelab.core.loops.replay import Replay
from decodelab.core.rules.settings import validate
from decodelab.core.loops.speculative import speculate
from decodelab.entry.webapi.catalog import sample_card
from decodelab.entry.webapi.registry import Session, endpoint
from decodelab.entry.webapi.reuse import REUSE_APPENDED, REUSE_QUESTION
from decodelab.errors import FieldError
from decodelab.fields import read
from decodelab.lesson.accuracy import AccuracyExperiment


def time_generation(model, settings, check_every: int | None = None) -> dict:
    """Run one generation (step records included) and time it: the whole run, and the decode
    steps alone (every step after the first, which also carries the prefill). check_every: how
    far the live check may fall behind (1: every step checked as it is made, the old way)."""
    run = Generation(model, settings)
    if check_every is not None:
        run.check_every = check_every
    began = time.perf_counter()
    first = last = None
    contexts = []
    for record in run:
        last = time.perf_counter()
        if first is None:
            first = last
        contexts.append(len(run.prompt_ids) + len(run.output_ids))
    ended = time.perf_counter()  # after the live check (if on) caught up with the last step
    n = len(run.records)
    decode_seconds = ended - first if first is not None else 0.0
    return {"steps": n, "seconds": ended - began, "steps_per_second": n / (ended - began),
            # the text alone: until the last step was handed out, before the check caught up
            "text_steps_per_second": n / (last - began) if last is not None else None,
            "check_catch_up_ms": (ended - last) * 1e3 if last is not None else None,
            "first_step_ms": (first - began) * 1e3 if first is not None else None,
            "decode_steps_per_second": (n - 1) / decode_seconds if n > 1 else None,
            "context_from": min(contexts, default=0), "context_to": max(contexts, default=0),
            "text": run.text}


def time_resume(model, context_ids, appended_ids, repeats: int = 15) -> dict:
    """Resuming after a tool result: the appended tokens fed after a cache that holds the
    context (session.append) against a full recomputation of the same text without one (a
    fresh session's prefill of all of it). Medians over `repeats`, in ms; both give the same
    logits (the largest difference is reported)."""
    base = model.session()
    base.prefill(context_ids)
    resume, full, diff = [], [], 0.0
    for _ in range(repeats):
        s = base.fork()
        t0 = time.perf_counter()
        a = s.append(appended_ids)
        t1 = time.perf_counter()
        fresh = model.session()
        b = fresh.prefill(list(context_ids) + list(appended_ids))
        t2 = time.perf_counter()
        resume.append(t1 - t0)
        full.append(t2 - t1)
        diff = max(diff, float(np.abs(a - b).max()))
    r, f = sorted(resume)[len(resume) // 2] * 1e3, sorted(full)[len(full) // 2] * 1e3
    return {"context": len(context_ids) + 1, "appended": len(appended_ids), "resume_ms": r,
            "full_ms": f, "speedup": f / r, "max_abs_diff": diff}


def time_prefix_sharing(model, settings, samples: int) -> dict:
    """`samples` runs of one prompt (seeds seed, seed + 1, ...): each with its own prefill,
    and all from one shared prefill (generate.Prefix). Seconds for each way, and whether every
    run's trace came out the same both ways."""
    runs = [dataclasses.replace(settings, seed=settings.seed + j) for j in range(samples)]
    t0 = time.perf_counter()
    own = [Generation(model, s).run().trace() for s in runs]
    t1 = time.perf_counter()
    first = Generation(model, runs[0])  # the prompt's ids, as a run makes them
    prefix = Prefix(model, first.prompt_ids)
    shared = [Generation(model, s, prefix=prefix).run().trace() for s in runs]
    t2 = time.perf_counter()
    return {"samples": samples, "own_prefill_s": t1 - t0, "shared_prefill_s": t2 - t1,
            "saving": 1 - (t2 - t1) / (t1 - t0), "same": own == shared,
            "prompt_tokens": len(first.prompt_ids)}


def time_json_mode(model, settings, repeats: int = 15) -> dict:
    """What JSON mode adds to a step. One run with JSON mode on; then, over the states and
    logits of its steps, the grammar's own work timed apart: the mask of each state with fresh
    tables (`cold`, the first run of a page) and with the tables kept (`warm`, every later
    run), and the rules applied with the mask against without it. Each of these is the fastest
    of `repeats` passes over all the steps (a browser's clock is coarse; the fastest pass is
    the one least disturbed). Also the whole run, with fresh tables and once more, per step.
    All in ms."""
    on = dataclasses.replace(settings, json_mode=True, cache_check=False)
    model.tokenizer.__dict__.pop("_json_masks", None)  # the first run builds its tables
    t0 = time.perf_counter()
    run = Generation(model, on).run()
    t1 = time.perf_counter()
    Generation(model, on).run()
    t2 = time.perf_counter()
    n = len(run.records)
    replay = Replay(run)
    logits = [replay.logits_at(k) for k in range(n)]
    states, rules = run.json.states, on.rules

    def fastest(work) -> float:
        best = float("inf")
        for _ in range(repeats):
            began = time.perf_counter()
            work()
            best = min(best, time.perf_counter() - began)
        return best * 1e3 / n

    def cold():
        fresh = grammar.JsonMask(model.tokenizer, on.json_max_depth)
        for s in states:
            fresh.allowed(s)

    kept = grammar.JsonMask(model.tokenizer, on.json_max_depth)
    masks = [kept.allowed(s) for s in states]
    mask_cold = fastest(cold)
    mask_warm = fastest(lambda: [kept.allowed(s) for s in states])
    masked = fastest(lambda: [sampling.decide(z, rules, allowed=m, mask_kind="json")
                              for z, m in zip(logits, masks)])
    plain = fastest(lambda: [sampling.decide(z, rules) for z in logits])
    per = lambda seconds: seconds * 1e3 / n  # noqa: E731
    return {"steps": n, "vocab_size": model.tokenizer.vocab_size, "states": len(kept._masks),
            "status": run.json_report()["status"],
            "run_cold_ms_per_step": per(t1 - t0), "run_warm_ms_per_step": per(t2 - t1),
            "mask_cold_ms_per_step": mask_cold, "mask_warm_ms_per_step": mask_warm,
            "rules_ms_per_step": plain, "masked_rules_ms_per_step": masked,
            "overhead_cold_ms_per_step": mask_cold + masked - plain,
            "overhead_warm_ms_per_step": mask_warm + masked - plain}


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


def filler(model, text: str, n: int) -> list:
    """n ordinary tokens of `text` (repeated as needed), no special token."""
    tok = model.tokenizer
    ids = [i for i in tok.encode(text) if not tok.is_special(i)]
    return (ids * (n // max(len(ids), 1) + 1))[:n]


def decode_rate(model, ids: list, context: int, steps: int, repeats: int,
                dtype=np.float32) -> float:
    """Tokens per second of bare decode steps (the model's forward and cache, no rules or
    records) with `context` tokens in the cache; the median of `repeats`. ids: at least
    context + steps tokens."""
    import statistics  # (not at start-up: the page's start imports only what it needs)

    rates = []
    for _ in range(repeats):
        session = model.session(dtype=dtype)
        session.prefill(ids[:context])
        began = time.perf_counter()
        for t in ids[context:context + steps]:
            session.decode(t)
        rates.append(steps / (time.perf_counter() - began))
    return statistics.median(rates)


def prefill_rate(model, ids: list, repeats: int, dtype=np.float32) -> float:
    """Tokens per second of one prefill of `ids`; the median of `repeats`."""
    import statistics

    times = []
    for _ in range(repeats):
        session = model.session(dtype=dtype)
        began = time.perf_counter()
        session.prefill(ids)
        times.append(time.perf_counter() - began)
    return len(ids) / statistics.median(times)


REAL_TEXT_DATASET = "prose"  # the filler the real model's rows read (any ordinary text)


def real_rates(library, contexts=(50, 500), prefills=(50, 500), steps: int = 20,
               repeats: int = 3) -> dict:
    """The real model's rows: prefill at each length and decode at each context, in tokens
    per second (the same function natively and in the page)."""
    model = library.pretrained()
    text = "\n".join(library.corpus(REAL_TEXT_DATASET).train[:400])
    ids = filler(model, text, max([c + steps for c in contexts] + list(prefills) + [1]))
    return {"prefill": {str(n): prefill_rate(model, ids[:n], repeats) for n in prefills},
            "decode": {str(c): decode_rate(model, ids, c, steps, repeats) for c in contexts}}


@endpoint
def _bench_real(session: Session, req: dict) -> dict:
    """The real model's prefill and decode rows ({"contexts", "prefills", "steps", "repeats"},
    small positive whole numbers), once the model is loaded. (The page asks for one row at a
    time: a call holds the worker, and a long one would be taken for a hang.)"""
    def ints(name, default, most):
        got = req.get(name, default)
        ok = isinstance(got, list) and all(
            isinstance(x, int) and not isinstance(x, bool) and 0 < x <= most for x in got)
        if not ok:
            raise FieldError("request", f"{name} must be a list of whole numbers from 1 to "
                                        f"{most}; got {got!r}.")
        return tuple(got)

    steps = (ints("steps", [20], 200) or (20,))[0]
    repeats = (ints("repeats", [3], 20) or (3,))[0]
    return real_rates(session.library, ints("contexts", [50, 500], 1500),
                      ints("prefills", [50, 500], 1500), steps, repeats)


@endpoint
def _bench_tokenize(session: Session, req: dict) -> dict:
    """The benchmark's tokenizer row: {"dataset", "text"} -> milliseconds to encode the text
    with the dataset's BPE from an empty piece cache (a prompt seen for the first time) and
    again with the cache filled."""
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
def _bench_tools(session: Session, req: dict) -> dict:
    """The benchmark's tool rows, the same function natively and here: resuming after a tool
    result against a full recomputation (on the tasks model at a question's length, and on the
    prose BPE model from 100 tokens of context), one question's samples with and without a
    shared prefill, and the accuracy experiment's questions per second."""
    library = session.library
    tasks_model = library.model("transformer", "tasks", "bpe")
    tok = tasks_model.tokenizer
    question = tasks.question_ids(tok, REUSE_QUESTION)
    call = [tok.special_ids[tasks.CALL]] + tok.encode(REUSE_APPENDED)
    appended = [tok.special_ids[tasks.END_CALL]] + tasks.result_ids(tok, "19")  # as a run does
    prose = library.model("transformer", "prose", "bpe")
    text = library.corpus("prose").val
    long = prose.tokenizer.encode(" ".join(text))[:99]  # with the start token: 100 of context
    out = {"resume_tasks": time_resume(tasks_model, question + call, appended),
           "resume_100": time_resume(prose, long, prose.tokenizer.encode(" 19 is the")),
           "prefix": time_prefix_sharing(tasks_model, validate({
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
    mask adds to a step (time_json_mode) on the tasks model answering a held-out card at
    T = 1, and on the prose BPE model at T = 2 from an empty prompt."""
    library = session.library
    card = sample_card(library) or 'Card for "Ada", age 31, from "Paris".'
    runs = {"tasks card, T = 1": {"model": "transformer", "dataset": "tasks", "prompt": card,
                                  "temperature": 1.0, "seed": 0, "max_new_tokens": 60},
            "prose BPE, T = 2": {"model": "transformer", "dataset": "prose", "tokenizer": "bpe",
                                 "temperature": 2.0, "seed": 0, "max_new_tokens": 60}}
    out = {}
    for name, raw in runs.items():
        settings = validate(raw, datasets=session.datasets())
        out[name] = time_json_mode(library.for_settings(settings), settings)
    return out


@endpoint
def _bench_generation(session: Session, req: dict) -> dict:
    """The benchmark's transformer rows: {"settings", "cache": true|false, "check_every"} ->
    one generation timed whole and decode-only (time_generation), the same function natively
    and here."""
    settings = validate(req.get("settings", {}), datasets=session.datasets())
    model = session.library.for_settings(settings)
    if not req.get("cache", True):
        model = Uncached(model)
    every = req.get("check_every")
    return time_generation(model, settings, None if every is None else max(int(every), 1))


SPECULATION = {"gammas": (1, 2, 4, 8), "temperatures": (0.0, 0.7, 1.0), "tokens": 48, "seeds": 3}


def time_speculation(target, draft, prompt_ids, temperature: float, gamma: int, tokens: int,
                     seeds: int) -> dict:
    """Speculative decoding (draft -> target) against the target decoding alone, with the same
    rules and seeds, end-of-sequence blocked so every run writes `tokens`: acceptance rate, tokens
    per target pass, and the wall-clock ratio of the two (above 1: speculation pays)."""
    rules = sampling.Rules(temperature=temperature)
    speculate(target, draft, prompt_ids, rules, gamma, 4, ignore_eos=True)  # warm up both
    spec_s = plain_s = 0.0
    proposed = accepted = passes = made = 0
    for seed in range(seeds):
        t0 = time.perf_counter()
        out = speculate(target, draft, prompt_ids, rules, gamma, tokens, seed=seed,
                        ignore_eos=True)
        spec_s += time.perf_counter() - t0
        proposed += sum(r["proposed"] for r in out["rounds"])
        accepted += sum(r["accepted"] for r in out["rounds"])
        passes += out["target_passes"]
        made += len(out["ids"])
        settings = validate({"model": "transformer", "temperature": temperature, "seed": seed,
                             "max_new_tokens": tokens, "ignore_eos": True, "cache_check": False})
        t0 = time.perf_counter()
        run = Generation(target, settings)
        for _ in run:
            pass
        plain_s += time.perf_counter() - t0
    return {"gamma": gamma, "temperature": temperature, "acceptance_rate": accepted / proposed,
            "tokens_per_target_pass": made / passes, "speculative_tokens_per_second": made / spec_s,
            "plain_tokens_per_second": made / plain_s, "speed_up": plain_s / spec_s}


@endpoint
def _bench_speculative(session: Session, req: dict) -> dict:
    """{"dataset", "prompt", "gammas", "temperatures", "tokens", "seeds"} -> time_speculation for
    every gamma and temperature, the names (or the given) transformer checked against its bigram
    draft: the same function natively and here."""
    dataset = req.get("dataset", "names")
    library = session.library
    target = library.model("transformer", dataset, "chars")
    draft = library.model("bigram", dataset, "chars")
    prompt = target.tokenizer.encode(req.get("prompt", ""))
    cfg = {k: req.get(k, v) for k, v in SPECULATION.items()}
    return {"rows": [time_speculation(target, draft, prompt, float(t), int(g), int(cfg["tokens"]),
                                      int(cfg["seeds"]))
                     for t in cfg["temperatures"] for g in cfg["gammas"]]}


def time_serving(library, dataset: str, requests: int, block_size: int, seed: int,
                 repeats: int = 5) -> dict:
    """A seeded workload (`lesson.serving`) served from the paged cache, continuously and in
    static batches, with the same blocks, each step's decodes in one call: steps, wall time
    (the median of `repeats`, the two kinds taking turns) and tokens per second of each."""
    import statistics  # here: the page's start does not import it

    from decodelab.core.serving.scheduler import Scheduler
    from decodelab.lesson.serving import MAX_RUNNING, room_for, workload

    model = library.model("transformer", dataset, "chars")
    blocks = room_for(model, block_size)
    out = {"dataset": dataset, "requests": requests, "block_size": block_size}
    times = {"continuous": [], "static": []}
    for _ in range(repeats):
        for name, static in (("continuous", False), ("static", True)):
            work = workload(library, dataset, "chars", requests, seed)
            t0 = time.perf_counter()
            s = Scheduler(library, work, num_blocks=blocks, block_size=block_size,
                          max_running=MAX_RUNNING, static=static, share_prefixes=not static).run()
            times[name].append(time.perf_counter() - t0)
            tokens = sum(len(r.run.output_ids) for r in work)
            out[name] = {"steps": s.step, "tokens": tokens}
    for name, seconds in times.items():
        median = statistics.median(seconds)
        out[name].update(seconds=median, tokens_per_second=out[name]["tokens"] / median)
    return out


@endpoint
def _bench_paged(session: Session, req: dict) -> dict:
    """{"dataset", "requests", "block_size", "seed"} -> time_serving: the same function
    natively and here."""
    return time_serving(session.library, req.get("dataset", "prose"), int(req.get("requests", 24)),
                        int(req.get("block_size", 16)), int(req.get("seed", 1)))
