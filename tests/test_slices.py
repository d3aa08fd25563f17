"""Long work in slices (`core.loops.slices`): a long prompt, the live check's passes and a beam search
are each one computation that runs whole natively and a piece at a time in the page's worker,
with the same result either way; the worker's protocol for a long call (pending, resume,
abandon) and a run whose prompt is read over several batches."""

import numpy as np
import pytest
from decodelab.core.loops import slices
from decodelab.core.loops.generate import Generation
from decodelab.core.models.batchsession import BatchSession
from decodelab.core.models.cachedforward import cached_forward
from decodelab.core.models.kvcache import KVCache
from decodelab.core.models.layers import Config
from decodelab.core.rules.settings import validate
from decodelab.entry.webapi import registry
from decodelab.lesson.search import beam_lesson

from tests.conftest import api, run_to_end
from tests.test_kvcache import make_model

LONG = "abcdefghij" * 7  # 70 characters: five chunks of the prompt


@pytest.fixture(autouse=True)
def page_chunks(monkeypatch):
    """The page's chunk of a prefill (natively a chunk is 256 positions: BLAS)."""
    monkeypatch.setattr(slices, "PREFILL_CHUNK", 16)


def pieces(work) -> tuple:
    """(result, how many pieces it took) of a sliced computation run a piece at a time."""
    n = 0
    while True:
        try:
            next(work)
            n += 1
        except StopIteration as end:
            return end.value, n + 1


def test_drain_and_slices_give_the_result_and_run_at_least_one_piece():
    def work():
        for i in range(5):
            yield {"done": i, "total": 5}
        return "answer"

    assert slices.drain(work()) == "answer"
    s = slices.Slices(work())
    assert not s.run(0.0) and s.progress == {"done": 0, "total": 5}  # one piece, not more
    assert s.finish() == "answer" and s.done
    assert slices.chunks(35) == [(0, 16), (16, 32), (32, 35)] and slices.chunks(0) == []


def test_a_prompt_read_in_chunks_gives_what_one_pass_gives():
    """Each chunk attends to the chunks before it in the cache: the same sums as one pass over
    the window, so the logits agree to rounding, and so do the cached keys."""
    model = make_model("gqa", context=96, layers=2, seed=3)
    session = model.session(dtype=np.float64)
    ids = model.tokenizer.encode(LONG)
    logits, n = pieces(session.prefill_steps(ids))  # a piece a chunk (the last one returns)
    assert n == len(slices.chunks(len(ids) + len(model.tokenizer.start_ids)))
    tokens = list(model.tokenizer.start_ids) + ids
    cfg = model.cfg
    cache = KVCache(cfg.n_layer, 1, cfg.n_kv_head, cfg.context_size, cfg.head_dim, np.float64)
    one = cached_forward(session.weights, cache, np.array([tokens]), np.arange(len(tokens))[None])
    assert np.abs(logits - one[0]).max() < 1e-12
    assert np.abs(session.cache.k[1][:, :, :len(tokens)] - cache.k[1][:, :, :len(tokens)]).max() < 1e-12
    assert np.abs(logits - model.full_logits(tokens, np.float64)).max() < 1e-9


# SmolLM2-135M's shape (its GGUF's metadata: pretrained.model.config_of)
SMOLLM2 = Config(vocab_size=49152, context_size=2048, n_layer=30, n_embd=576, n_head=9,
                 n_kv_head=3, mlp_hidden=1536)
PAGE_MULADDS_PER_S = 2.8e9  # numpy in Pyodide on a 2-core machine: 5.6 GFLOP/s (pretrained.md)


def piece_work(cfg, piece, start=0, rows=1) -> int:
    a, b = piece
    return rows * sum(slices.position_work(cfg, start + p + 1) for p in range(a, b))


def test_in_the_page_a_piece_of_smollm2s_prefill_is_bounded_by_its_work(monkeypatch):
    """A Stop and the heartbeat wait for the piece in hand: in the page a piece of the real
    model's prefill is a few positions (16 took about 0.6 s), the fewer the longer the context
    it attends to, and a piece of a trained model's is still 16."""
    monkeypatch.setattr(slices, "IN_PAGE", True)
    assert slices.PIECE_WORK / PAGE_MULADDS_PER_S <= 0.2  # seconds a piece may hold the worker
    assert 16 * slices.position_work(SMOLLM2, 16) > 3 * slices.PIECE_WORK  # the old piece
    for start, rows in ((0, 1), (1800, 1), (0, 3), (40, 3)):  # a prompt, a chat near the window,
        n = SMOLLM2.context_size - start  # a 3-beam search's batch
        pieces_ = slices.prefill_chunks(n, SMOLLM2, start, rows)
        assert [p for piece in pieces_ for p in range(*piece)] == list(range(n))
        # (one position is the least a piece can read: 3 beams' rows near the window's end)
        assert all(piece_work(SMOLLM2, piece, start, rows) <= slices.PIECE_WORK
                   or piece[1] - piece[0] == 1 for piece in pieces_), (start, rows)
    first, last = slices.prefill_chunks(2048, SMOLLM2)[0], slices.prefill_chunks(2048, SMOLLM2)[-1]
    assert (first[1] - first[0], last[1] - last[0]) == (4, 2)
    trained = make_model("gqa", context=96, layers=4).cfg
    assert slices.prefill_chunks(70, trained) == slices.chunks(70, 16)
    monkeypatch.setattr(slices, "IN_PAGE", False)  # natively: BLAS, nothing waits
    assert slices.prefill_chunks(2048, SMOLLM2) == slices.chunks(2048, 16)


def test_a_session_reads_its_prompt_and_its_appends_in_those_pieces(monkeypatch):
    """The pieces are the session's: with a work budget of three positions at the end of the window, a prompt, an
    append and a batch's prompt each take as many pieces as prefill_chunks plans, and give the
    logits of one pass."""
    model = make_model("gqa", context=96, layers=2, seed=3)
    monkeypatch.setattr(slices, "IN_PAGE", True)
    monkeypatch.setattr(slices, "PIECE_WORK", 3 * slices.position_work(model.cfg, 96))
    ids = model.tokenizer.encode(LONG)
    n = len(ids) + len(model.tokenizer.start_ids)
    plan = slices.prefill_chunks(n, model.cfg)
    assert all(3 <= b - a < 16 for a, b in plan[:-1]) and len(plan) > n // 16
    session = model.session(dtype=np.float64)
    logits, made = pieces(session.prefill_steps(ids))
    assert made == len(plan)
    assert np.abs(logits - model.full_logits(list(model.tokenizer.start_ids) + ids,
                                             np.float64)).max() < 1e-9
    more = model.tokenizer.encode("abcdefg")
    _, made = pieces(session.append_steps(more))
    assert made == len(slices.prefill_chunks(len(more), model.cfg, n))
    batch = BatchSession(model, 2, np.float64)
    _, made = pieces(batch.prefill_steps([ids, ids[:20]]))
    assert made == len(slices.prefill_chunks(n, model.cfg, rows=2))


def test_a_run_reads_its_prompt_a_chunk_per_call_and_is_the_same_run():
    model = make_model("gqa", context=96, layers=2, seed=3)
    settings = {"model": "transformer", "prompt": LONG, "max_new_tokens": 12, "seed": 4,
                "cache_check": True, "ignore_eos": True}
    whole = Generation(model, validate(settings)).run()
    run = Generation(model, validate(settings))
    calls = 1
    while not run.read_prompt(0.0):
        assert run.records == [] and 0 < run.prompt_read["done"] <= run.prompt_read["total"]
        calls += 1
    assert calls == len(slices.chunks(len(run.prompt_ids) + 1))  # a chunk a call
    assert run.prompt_read["done"] == 71
    run.run()
    assert [r["token_id"] for r in run.records] == [r["token_id"] for r in whole.records]
    assert run.trace() == whole.trace()


def test_the_live_check_catches_up_in_pieces_that_leave_the_rest_pending():
    model = make_model("gqa", context=32, layers=2, seed=2)
    run = Generation(model, validate({"model": "transformer", "max_new_tokens": 40, "seed": 1,
                                      "ignore_eos": True, "cache_check": True}))
    for _ in run:  # 40 steps over a window of 32: the shift starts a second window
        if run.done:
            break  # as the page's batches do: the check is left to catch up
    assert run.checking
    windows = 0
    while not run.check_until(0.0):  # one window's pass a call for a trained model
        windows += 1
        assert run.checks.pending and run.take_checks()
    assert windows >= 1 and not run.checking
    assert all(r["cache_ok"] for r in run.records)


@pytest.fixture
def page(artifacts):
    assert api("setup", {"assets": str(artifacts)})["ok"]
    return artifacts


@pytest.fixture
def one_piece_slices(monkeypatch):
    """Every slice a single piece: the protocol seen at its finest."""
    monkeypatch.setattr(registry, "SLICE_MS", 0)


BEAM = {"settings": {"model": "transformer", "dataset": "prose", "prompt": "The ", "seed": 3,
                     "max_new_tokens": 12}, "beam": {"num_beams": 3}}


def test_a_long_call_answers_pending_then_its_own_answer(page, one_piece_slices):
    from decodelab.core.library import Library
    from decodelab.entry.command import words

    reply, slices_made = api("beam", BEAM, sliced=True), 1
    assert reply["ok"] and reply["pending"] and reply["endpoint"] == "beam"
    task = reply["task"]
    while reply.get("pending"):
        assert reply["task"] == task
        reply = api("resume", {"task": task, "budget_ms": 0})
        slices_made += 1
    assert slices_made > 12  # a piece per step of the search and of the runs beside it
    native = beam_lesson(Library(page), BEAM)
    # with the command line that repeats the search (entry.command)
    assert reply.pop("command")["words"] == words(native["trace"]["settings"])
    assert reply == {"ok": True, **native}
    assert registry.SESSIONS["page"].tasks == {}  # nothing left behind
    again = api("resume", {"task": task, "budget_ms": 0})  # a finished task is gone
    assert not again["ok"] and "task must be the number of a long call" in again["errors"][0]["message"]


def test_a_long_call_stopped_between_slices_leaves_nothing(page, one_piece_slices):
    reply = api("beam", BEAM, sliced=True)
    assert reply["pending"]
    assert api("abandon", {"task": reply["task"]}) == {"ok": True, "abandoned": reply["task"]}
    assert registry.SESSIONS["page"].tasks == {}
    for bad in ({"task": reply["task"]}, {"task": "1"}, {"task": True}, {}):
        out = api("abandon", bad)
        assert not out["ok"] and out["errors"][0]["field"] == "request", bad


def test_a_long_call_refused_in_its_first_slice_is_an_ordinary_error(page):
    out = api("beam", {**BEAM, "beam": {"num_beams": 0}}, sliced=True)
    assert not out["ok"] and out["errors"][0]["field"] == "num_beams"
    assert registry.SESSIONS["page"].tasks == {}


def test_a_long_prompt_is_read_over_batches_without_steps(page):
    """advance reads the prompt a chunk per batch (budget 0: one chunk), says how far it got,
    and then the run is the run made in one go (the CLI's)."""
    settings = {"model": "transformer", "dataset": "prose", "prompt": "The old house " * 6,
                "seed": 2, "max_new_tokens": 8}
    assert api("start", settings)["ok"]
    reading = []
    while True:
        out = api("advance", {"budget_ms": 0})
        if out["steps"]:
            break
        assert not out["done"] and out["reading"]["done"] <= out["reading"]["total"]
        reading.append(out["reading"]["done"])
    assert len(reading) >= 4 and reading == sorted(reading)
    while not out["done"]:
        out = api("advance", {"budget_ms": 500})
    trace = api("trace")["trace"]
    assert trace == run_to_end(settings)


def test_stop_while_the_prompt_is_read_ends_the_run_at_once(page):
    assert api("start", {"model": "transformer", "dataset": "prose", "seed": 2,
                         "prompt": "The old house " * 6, "max_new_tokens": 8})["ok"]
    assert "reading" in api("advance", {"budget_ms": 0})
    out = api("cancel")
    assert out["done"] and out["finish_reason"] == "cancelled" and out["steps"] == []
    assert api("trace")["trace"]["steps"] == []


def test_the_check_after_the_text_is_caught_up_a_window_per_batch(page):
    """A run through two context shifts has three windows to check. The batch that ends the
    text says checking; each later batch (budget 0: one piece) checks one window's steps, so
    no batch of the page's worker makes every full pass at once."""
    assert api("start", {"model": "transformer", "dataset": "names", "prompt": "an", "seed": 3,
                         "max_new_tokens": 150, "ignore_eos": True, "cache_check": True})["ok"]
    out = api("advance", {"budget_ms": 500})
    while not out["checking"]:
        assert not out["done"]
        out = api("advance", {"budget_ms": 500})
    verdicts = [len(out["checks"])]
    while not out["done"]:
        out = api("advance", {"budget_ms": 0})
        assert out["steps"] == []
        verdicts.append(len(out["checks"]))
    assert len(verdicts) >= 3 and verdicts[0] == 0 and all(n > 0 for n in verdicts[1:])
    trace = api("trace")["trace"]
    assert sum(verdicts) == len(trace["steps"]) and all(s["cache_ok"] for s in trace["steps"])


def test_a_check_given_up_for_the_next_run_says_how_many_steps_it_left(page):
    """The next run asked for (or Stop) while the check catches up after the text: cancel with
    skip_check gives the pending steps up at once, unchecked, and the last batch says how many;
    the trace keeps them with no verdict."""
    assert api("start", {"model": "transformer", "dataset": "names", "prompt": "an", "seed": 3,
                         "max_new_tokens": 150, "ignore_eos": True, "cache_check": True})["ok"]
    out = api("advance", {"budget_ms": 500})
    while not out["checking"]:
        out = api("advance", {"budget_ms": 500})
    out = api("advance", {"budget_ms": 0})  # one window's steps checked
    checked = len(out["checks"])
    assert out["checking"] and 0 < checked < 150
    out = api("cancel", {"skip_check": True})
    assert out["done"] and not out["checking"] and out["check_skipped"] == 150 - checked
    assert out["finish_reason"] == "length"  # the text had ended: its own end stands
    steps = api("trace")["trace"]["steps"]
    assert sum(s["cache_ok"] is None for s in steps) == 150 - checked
    assert all(s["cache_ok"] for s in steps if s["cache_ok"] is not None)


def test_a_short_prompt_is_read_and_its_first_step_made_in_one_batch(page):
    """A prompt of one chunk: the first batch (budget 0) already has the first step, so a short
    run never shows the reading of its prompt."""
    assert api("start", {"model": "transformer", "dataset": "prose", "prompt": "The old house",
                         "seed": 2, "max_new_tokens": 5})["ok"]
    out = api("advance", {"budget_ms": 0})
    assert "reading" not in out and len(out["steps"]) == 1
