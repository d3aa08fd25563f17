"""Serving a workload from the paged cache (lesson.serving): parallel samples forked from one
prefill and copied on write, the learner's own workload lines, max_running, the frames the page
draws (every block's state, the memory bar, the tables, the prefix tree) recounted from the
tables alone, time-boxing, bad input naming its field, and the memory calculator's paged
numbers. Every request is held to the same request generated alone."""

import json
import re
from collections import Counter

import pytest

from decodelab.core.library import Library
from decodelab.errors import FieldError, FieldErrors

from tests.test_hf import ROOT, shipped


@pytest.fixture(scope="module")
def lib():
    shipped("names", "chars")  # skips when the models are not built
    return Library(ROOT / "artifacts")


def alone(lib, settings):
    """The request generated on its own, with a contiguous cache."""
    from decodelab.core.loops.generate import start

    return start(lib, settings).run()


def field_error(call, *args) -> FieldError:
    """The one FieldError a call raises (read() wraps field checks in FieldErrors)."""
    with pytest.raises((FieldError, FieldErrors)) as e:
        call(*args)
    errors = getattr(e.value, "errors", [e.value])
    assert len(errors) == 1, errors
    return errors[0]


def serving(lib, req):
    from decodelab.lesson.serving import Serving

    return Serving(lib, req)


# --- an independent recount of a frame, from its tables and the tree alone ------------------

def recount(frame, block_size, memory_blocks):
    """refs, state and memory of a frame, counted from the tables of the requests still running
    and the prefix tree's blocks: a block's holders are the running tables that hold it and the
    tree."""
    b = block_size
    tables = {n: (length, table) for n, length, table in frame["tables"]}
    tree = {node[0] for node in frame["tree"]}
    holders = [0] * memory_blocks
    fill = {}  # distinct block -> positions filled (the fullest table's view of it)
    for n in frame["running"]:
        length, table = tables[n]
        for i, block in enumerate(table):
            holders[block] += 1
            fill[block] = max(fill.get(block, 0), min(b, length - i * b))
    for block in tree:
        holders[block] += 1
    requests = [h - (i in tree) for i, h in enumerate(holders)]
    state = "".join("F" if not h else "S" if r > 1 else "U" if i not in tree else
                    "T" if r else "C" for i, (h, r) in enumerate(zip(holders, requests)))
    used = sum(fill.values())
    memory = {"used": used, "reserved": len(fill) * b - used,
              "cached": b * sum(1 for block in tree if block not in fill),
              "free": b * state.count("F")}
    return holders, state, memory


def spans_from_events(frames, number):
    """The steps a request decoded, from the frames' joined / preempted / left lists alone: it
    decodes from the step it joins until the step before a preemption (preemption comes before
    the step's decodes), or until the step it leaves."""
    spans, start = [], None
    for f in frames:
        if number in f["joined"]:
            assert start is None, (number, f["step"])
            start = f["step"]
        if number in f["preempted"]:
            assert start is not None, (number, f["step"])
            if f["step"] - 1 >= start:  # it may be preempted at the step it joined
                spans.append([start, f["step"] - 1])
            start = None
        if number in f["left"]:
            spans.append([start, f["step"]])
            start = None
    assert start is None, number
    return spans


def check_frames(out):
    """Every frame of a result against the recount; joins, leaves and spans against the
    requests; the run's end."""
    b, n_blocks, frames = out["block_size"], out["memory_blocks"], out["frames"]
    requests = {r["number"]: r for r in out["requests"]}
    assert [f["step"] for f in frames] == list(range(out["steps"]))
    decoded_before = set()
    previous = None
    for f in frames:
        tables = {n: (length, table) for n, length, table in f["tables"]}
        # who decoded at this step: the requests still running and those that just left
        assert set(tables) == set(f["running"]) | set(f["left"])
        assert not set(f["running"]) & set(f["left"])
        assert len(tables) <= out["max_running"]
        for n, (length, table) in tables.items():
            assert len(table) == -(-length // b), (f["step"], n)  # whole blocks, none spare
        holders, state, memory = recount(f, b, n_blocks)
        assert len(f["state"]) == n_blocks == len(f["refs"])
        assert f["refs"] == holders, f["step"]
        assert f["state"] == state, f["step"]
        assert f["memory"] == memory, f["step"]
        # shared: held by two running requests or more (the tree's hold is not sharing)
        held = Counter(block for n in f["running"] for block in tables[n][1])
        assert f["blocks_shared"] == sum(1 for c in held.values() if c > 1), f["step"]
        assert sum(f["memory"].values()) == n_blocks * b
        for n in f["running"]:
            assert all(f["state"][block] != "F" for block in tables[n][1])
        # the tree: parents are tree blocks, each edge one block of tokens, paths spell a
        # window the requests wrote: None (the start token), then the prompt and the text
        tree = {block: (parent, pieces) for block, parent, pieces in f["tree"]}
        for block, (parent, pieces) in tree.items():
            assert parent == -1 or parent in tree
            assert len(pieces) == b
            path, node = [], block
            while node != -1:
                path = tree[node][1] + path
                node = tree[node][0]
            assert path[0] is None and None not in path[1:]
            spelled = "".join(path[1:])
            assert any((r["prompt"] + r["text"]).startswith(spelled) for r in requests.values())
        # joiners queue behind the running ones; a preemption takes the youngest first
        order = (previous["running"] if previous else []) + f["joined"]
        gone = len(f["preempted"])
        assert f["preempted"] == order[::-1][:gone], f["step"]
        assert f["running"] == [n for n in order[:len(order) - gone] if n not in f["left"]]
        # waiting: arrived, not running, not finished
        assert f["waiting"] == sorted(
            n for n, r in requests.items() if r["arrival"] <= f["step"] < r["finished_step"]
            and n not in f["running"])
        # back after a preemption: recomputed exactly when it had decoded before
        assert f["recomputed"] == [n for n in f["joined"] if n in decoded_before]
        decoded_before |= set(tables)
        # a copy on write: the source was shared at the step before, the copy is the writer's
        for src, dst in f["copied"]:
            assert previous is not None and previous["state"][src] == "S"
            assert any(table[-1] == dst for _, table in tables.values())
        previous = f
    assert set(frames[-1]["state"]) <= {"F", "C"}
    assert frames[-1]["running"] == [] and frames[-1]["waiting"] == []
    for n, r in requests.items():
        joined = [f["step"] for f in frames if n in f["joined"]]
        left = [f["step"] for f in frames if n in f["left"]]
        preempted = [f["step"] for f in frames if n in f["preempted"]]
        assert joined[0] == r["joined_step"] >= r["arrival"]
        assert left == [r["finished_step"]]
        assert len(preempted) == r["preempted"] == len(joined) - 1
        assert r["spans"] == spans_from_events(frames, n)
        assert r["spans"][-1][1] == r["finished_step"]
    assert out["preemptions"] == sum(r["preempted"] for r in out["requests"])
    assert out["copies_on_write"] == sum(len(f["copied"]) for f in frames)


# --- parallel samples: one prefill, forked, copied on write -----------------------------------

@pytest.mark.parametrize("dataset,requests,block_size", [("names", 5, 4), ("prose", 3, 8)])
def test_parallel_samples_each_equal_the_sample_generated_alone(lib, dataset, requests,
                                                                block_size):
    from decodelab.lesson.serving import serve

    k = 3
    out = serve(lib, {"dataset": dataset, "requests": requests, "block_size": block_size,
                      "seed": 6, "parallel_samples": k})
    assert len(out["requests"]) == requests * k and out["parallel_samples"] == k
    for r in out["requests"]:
        first = r["number"] - r["number"] % k
        head = out["requests"][first]
        # samples of one request: one prompt, budget and arrival, seeds s, s + 1, s + 2
        assert r["group"] == first and r["label"] == f"{first // k}{'abc'[r['number'] % k]}"
        assert (r["prompt"], r["arrival"]) == (head["prompt"], head["arrival"])
        assert r["settings"]["seed"] == head["settings"]["seed"] + r["number"] % k
        run = alone(lib, r["settings"])
        assert r["ids"] == run.output_ids and r["text"] == run.text, r["number"]
    # three samples of one seed would be one sample three times: they differ
    assert len({tuple(r["ids"]) for r in out["requests"]}) > requests
    assert out["copies_on_write"] > 0 and out["blocks_shared"] > 0
    assert len(out["workload_lines"]) == requests


def cow_run(lib, prompt, k, budget=6, seed=3):
    out = serving(lib, {"dataset": "names", "block_size": 4, "seed": seed, "parallel_samples": k,
                        "workload": [f"0 {budget} {prompt}"]}).run().result()
    check_frames(out)
    return out


@pytest.mark.parametrize("k", [2, 3])
def test_samples_of_a_window_that_ends_inside_a_block_copy_that_block_k_minus_1_times(lib, k):
    model = lib.model("transformer", "names", "chars")
    prompt = "mari"  # the start token and 4 characters: 5 positions, blocks of 4 and 1
    window = 1 + len(model.tokenizer.encode(prompt))
    assert window % 4 == 1
    out = cow_run(lib, prompt, k)
    samples = out["requests"]
    for r in samples:  # every sample writes its first token (it does not end at once)
        assert len(r["ids"]) >= 2 and r["ids"] == alone(lib, r["settings"]).output_ids
        assert r["joined_step"] == 0 and r["preempted"] == 0
    first = out["frames"][0]
    assert first["joined"] == list(range(k)) and first["forked"] == list(range(1, k))
    # the window's two blocks are held once by every sample (the full one by the prefix tree
    # too, from the step it was computed): shared, nothing copied yet
    tables = [table for _, _, table in first["tables"]]
    assert all(table == tables[0] for table in tables) and len(tables[0]) == 2
    assert [first["refs"][block] for block in tables[0]] == [k + 1, k]
    assert [first["state"][block] for block in tables[0]] == ["S", "S"]
    assert first["copied"] == [] and first["memory"]["used"] == window
    # the first k - 1 writers into the shared, partly filled block copy it; the last writes
    # into the block itself; the full block stays shared
    second = out["frames"][1]
    assert out["copies_on_write"] == k - 1
    assert len(second["copied"]) == k - 1
    assert all(src == tables[0][1] for src, _ in second["copied"])
    last_blocks = [table[1] for _, _, table in second["tables"]]
    assert sorted(last_blocks) == sorted([dst for _, dst in second["copied"]] + [tables[0][1]])
    assert all(table[0] == tables[0][0] for _, _, table in second["tables"])


def test_samples_of_a_window_of_whole_blocks_copy_nothing(lib):
    model = lib.model("transformer", "names", "chars")
    prompt = "mar"  # the start token and 3 characters: one full block of 4
    assert (1 + len(model.tokenizer.encode(prompt))) % 4 == 0
    out = cow_run(lib, prompt, 3)
    assert all(len(r["ids"]) >= 2 for r in out["requests"])  # each wrote after the block
    first = out["frames"][0]
    (block,) = first["tables"][0][2]
    assert first["refs"][block] == 3 + 1 and first["state"][block] == "S"  # and the tree's
    assert out["copies_on_write"] == 0 and all(f["copied"] == [] for f in out["frames"])
    # the window's block stays shared while they grow into blocks of their own
    second = out["frames"][1]
    assert [table[0] for _, _, table in second["tables"]] == [block] * 3
    assert len({table[1] for _, _, table in second["tables"]}) == 3


# --- the learner's own workload ---------------------------------------------------------------

def test_own_workload_lines_are_parsed_into_requests(lib):
    from decodelab.lesson.serving import own_workload

    model = lib.model("transformer", "prose", "chars")
    lines = ["0 5 The ship", "", "   ", "  3 12 A cat sat on the mat  ", "7 1"]
    requests = own_workload(model, lines, "prose", "chars", seed=10, samples=2)
    assert [(r.number, r.arrival, r.settings["max_new_tokens"], r.settings["prompt"], r.group)
            for r in requests] == [(0, 0, 5, "The ship", 0), (1, 0, 5, "The ship", 0),
                                   # the prompt as written, its spaces at the end too (as
                                   # Edit this workload writes a prompt that ends in one)
                                   (2, 3, 12, "A cat sat on the mat  ", 2),
                                   (3, 3, 12, "A cat sat on the mat  ", 2),
                                   (4, 7, 1, "", 4), (5, 7, 1, "", 4)]
    assert [r.settings["seed"] for r in requests] == [10, 11, 12, 13, 14, 15]
    assert all(r.settings["temperature"] == 1.0 and r.settings["dataset"] == "prose"
               for r in requests)
    alone_ = own_workload(model, lines, "prose", "chars", seed=10)
    assert [r.group for r in alone_] == [None] * 3 and [r.settings["seed"] for r in alone_] == \
        [10, 11, 12]


def test_own_workload_is_served_and_each_request_equals_it_alone(lib):
    from decodelab.lesson.serving import serve

    lines = ["0 6 anna", "", "2 9 mar", "2 3"]
    out = serve(lib, {"dataset": "names", "block_size": 4, "seed": 5, "workload": lines,
                      "max_running": 2})
    assert out["own_workload"] is True
    assert [line.rstrip() for line in out["workload_lines"]] == ["0 6 anna", "2 9 mar", "2 3"]
    assert [(r["arrival"], r["prompt"], r["settings"]["max_new_tokens"]) for r in
            out["requests"]] == [(0, "anna", 6), (2, "mar", 9), (2, "", 3)]
    for r in out["requests"]:
        run = alone(lib, r["settings"])
        assert r["ids"] == run.output_ids and len(r["ids"]) <= r["settings"]["max_new_tokens"]


@pytest.mark.parametrize("lines,line,words", [
    (["0 5 ann", "x 5 bob"], 2, "the arrival step must be a whole number from 0 to 10000; "
                                "got 'x'"),
    (["0 5 ann", "", "1 0 bob"], 3, "the new tokens must be a whole number of at least 1; "
                                   "got '0'"),
    (["0 5 ann", "5"], 2, "write arrival step, new tokens, prompt"),
    (["0 61 ann"], 1, "61 new tokens after a prompt of 3 tokens do not fit the model's window "
                      "of 64 positions; at most 60 fit."),
    (["", "0 5 Ann"], 2, "has characters this model has never seen: 'A'"),
])
def test_a_bad_workload_line_is_named(lib, lines, line, words):
    from decodelab.lesson.serving import serve

    e = field_error(serve, lib, {"dataset": "names", "block_size": 4, "workload": lines})
    assert e.field == "workload" and words in e.message, e.message
    assert re.search(rf"\bline {line}\b", e.message), e.message


def test_the_budget_limit_is_the_window_less_the_start_token_and_the_prompt(lib):
    from decodelab.lesson.serving import own_workload

    model = lib.model("transformer", "names", "chars")
    room = model.cfg.context_size - 1 - len(model.tokenizer.encode("ann"))
    (r,) = own_workload(model, [f"0 {room} ann"], "names", "chars", seed=1)
    assert r.settings["max_new_tokens"] == room
    with pytest.raises(FieldError, match=f"at most {room} fit"):
        own_workload(model, [f"0 {room + 1} ann"], "names", "chars", seed=1)


def test_the_paged_command_serves_workload_lines_and_names_a_bad_one(lib):
    from decodelab.lesson.serving import serve
    from tests.test_cli import cli, ok

    args = ("paged", "--dataset", "names", "--block-size", "4", "--seed", "9",
            "--workload", "0 5 anna", "--workload", "1 7 mar", "--parallel-samples", "2",
            "--max-running", "3")
    out = ok(*args, "--json")
    assert out["workload_lines"] == ["0 5 anna", "1 7 mar"]
    assert (out["parallel_samples"], out["max_running"], len(out["requests"])) == (2, 3, 4)
    # the command prints what serve() returns
    same = serve(lib, {"dataset": "names", "block_size": 4, "seed": 9,
                       "workload": ["0 5 anna", "1 7 mar"], "parallel_samples": 2,
                       "max_running": 3})
    assert out.pop("measured").keys() == same.pop("measured").keys()  # (wall time: its own)
    assert out == json.loads(json.dumps(same))
    for line, words in (("0 5 Zed", "has characters this model has never seen: 'Z'"),
                        ("0 -1 ann", "line 2: the new tokens must be a whole number"),
                        ("ann", "line 2: write arrival step, new tokens, prompt")):
        r = cli("paged", "--dataset", "names", "--workload", "0 5 anna", "--workload", line)
        assert r.returncode == 2 and r.stdout == "", r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "--workload" in lines[0] and words in lines[0], r.stderr


# --- the frames, recounted ---------------------------------------------------------------------

@pytest.mark.parametrize("req,shows", [
    # room for all: the prefix tree finds shared starts
    ({"dataset": "names", "requests": 8, "block_size": 4, "seed": 3}, {"found"}),
    # 8 blocks for 30 samples: forks, copies, preemptions, recomputes, evictions
    ({"dataset": "names", "requests": 10, "block_size": 4, "seed": 7, "memory_blocks": 8,
      "parallel_samples": 3, "max_running": 5},
     {"copies", "preempted", "recomputed", "evicted"}),
    ({"dataset": "prose", "requests": 4, "block_size": 8, "seed": 2, "parallel_samples": 2},
     {"copies"}),
])
def test_every_frame_agrees_with_a_recount_from_its_tables(lib, req, shows):
    s = serving(lib, req).run()
    out = s.result()
    check_frames(out)
    assert out["grid"] is True and len(out["frames"]) == out["steps"]
    happened = {"found": out["prefill_tokens_saved"] > 0, "copies": out["copies_on_write"] > 0,
                "preempted": out["preemptions"] > 0, "evicted": out["evicted"] > 0,
                "recomputed": any(f["recomputed"] for f in out["frames"])}
    assert {k for k in shows if happened[k]} == shows, happened  # the case covers what it says
    assert out["evicted"] == sum(len(f["evicted"]) for f in out["frames"])
    for r in out["requests"]:
        assert r["ids"] == alone(lib, r["settings"]).output_ids, r["number"]


def test_a_small_pool_preempts_and_recomputes_and_every_request_still_equals_it_alone(lib):
    out = serving(lib, {"dataset": "names", "requests": 8, "block_size": 4, "seed": 4,
                        "memory_blocks": 5}).run().result()
    check_frames(out)
    assert out["preemptions"] > 0 and out["evicted"] > 0
    recomputed = [n for f in out["frames"] for n in f["recomputed"]]
    assert recomputed  # some request was preempted after it had decoded, and came back
    for n in recomputed:
        r = out["requests"][n]
        assert r["preempted"] > 0 and len(r["spans"]) >= 2
    for r in out["requests"]:
        assert r["ids"] == alone(lib, r["settings"]).output_ids, r["number"]
    # the same workload with room for everyone: no preemption, the same texts
    roomy = serving(lib, {"dataset": "names", "requests": 8, "block_size": 4, "seed": 4}) \
        .run().result()
    assert roomy["preemptions"] == 0
    assert [r["ids"] for r in roomy["requests"]] == [r["ids"] for r in out["requests"]]
    assert all(len(r["spans"]) == 1 for r in roomy["requests"])


def test_max_running_caps_the_requests_that_decode_together(lib):
    out = serving(lib, {"dataset": "names", "requests": 6, "block_size": 4, "seed": 1,
                        "max_running": 1}).run().result()
    check_frames(out)
    # one at a time: their decoding steps never overlap, in order of arrival
    spans = sorted((r["spans"][0], r["number"]) for r in out["requests"])
    assert all(len(r["spans"]) == 1 for r in out["requests"])
    for (a, _), (b, _) in zip(spans, spans[1:]):
        assert a[1] < b[0]
    assert [n for _, n in spans] == sorted(r["number"] for r in out["requests"])
    assert out["steps"] == sum(s[1] - s[0] + 1 for s, _ in spans) + \
        sum(1 for f in out["frames"] if not f["tables"])


# --- time-boxing --------------------------------------------------------------------------------

def test_advancing_a_step_at_a_time_gives_the_same_result_as_running_at_once(lib):
    from decodelab.lesson.serving import serve

    req = {"dataset": "names", "requests": 6, "block_size": 4, "seed": 2, "memory_blocks": 10,
           "parallel_samples": 2}
    whole = serving(lib, req).run().result()
    s = serving(lib, req)
    calls, seen = 0, []
    while not s.done:
        s.advance(0)  # at least one step per call
        calls += 1
        seen.append(s.progress())
    assert calls == s.steps == whole["steps"] + whole["static_steps"]
    assert [p["steps"] for p in seen] == list(range(1, calls + 1))
    assert [p["done"] for p in seen] == sorted(p["done"] for p in seen)
    assert seen[-1]["done"] == seen[-1]["total"] == 2 * len(whole["requests"])
    timeless = lambda r: {k: v for k, v in r.items() if k != "measured"}  # noqa: E731 (wall time)
    assert timeless(s.result()) == timeless(whole)
    no_frames = {k: v for k, v in timeless(whole).items() if k not in ("frames", "grid")}
    assert timeless(serve(lib, req)) == no_frames


def test_the_progress_names_what_it_counts(lib):
    """The progress counts servings, twice the requests (continuous, then static): it says so,
    so the page's "7 of 12" does not read as 12 requests beside a result of 6."""
    s = serving(lib, {"dataset": "names", "requests": 3, "seed": 2})
    p = s.progress()
    assert p["total"] == 2 * len(s.requests) == 6
    assert p["unit"] == ["serving", "servings"] and "served twice" in p["note"]


# --- bad input --------------------------------------------------------------------------------

@pytest.mark.parametrize("req,field,words", [
    ({"block_size": 0}, "block_size", "Block size must be a whole number from 1 to 64; got 0."),
    ({"block_size": 65}, "block_size", "got 65"),
    ({"parallel_samples": 9}, "parallel_samples", "got 9"),
    ({"max_running": 0}, "max_running", "got 0"),
    ({"requests": 51, "parallel_samples": 8}, "parallel_samples",
     "51 requests of 8 samples make 408 sequences; at most 400"),
    ({"workload": ["0 5 ann"] * 58, "parallel_samples": 7}, "parallel_samples",
     "58 requests of 7 samples make 406 sequences"),
    # the start token and 8 characters: 9 positions, 3 blocks of 4, and 1 to grow into
    ({"workload": ["0 5 marianne"], "memory_blocks": 3}, "memory_blocks",
     "Memory blocks must hold one request at least: 4 blocks of 4 here; got 3."),
    ({"dataset": "poems"}, "dataset", "poems"),
])
def test_bad_input_names_its_field(lib, req, field, words):
    from decodelab.lesson.serving import serve

    e = field_error(serve, lib, {"dataset": "names", "block_size": 4, **req})
    assert e.field == field and words in e.message, e.message


def test_the_largest_allowed_settings_are_accepted(lib):
    from decodelab.lesson.serving import MAX_SEQUENCES

    # 50 requests of 8 samples: exactly the limit, accepted (not run here)
    s = serving(lib, {"dataset": "names", "block_size": 64, "requests": 50,
                      "parallel_samples": 8, "max_running": 32})
    assert len(s.requests) == MAX_SEQUENCES and s.blocks == 32 * 1  # 64 positions: one block
    # the fewest blocks that hold the longest window accepted: 9 positions, 3 blocks + 1
    s = serving(lib, {"dataset": "names", "block_size": 4, "memory_blocks": 4,
                      "workload": ["0 5 marianne"]}).run()
    assert s.result()["requests"][0]["ids"] == alone(lib, s.requests[0].settings).output_ids


# --- tight pools: samples queue for room, never joined and preempted forever -----------------

def served_within(lib, req, max_steps=600):
    """Serving advanced step by step, at most max_steps (a livelock fails, not hangs)."""
    s = serving(lib, req)
    while not s.done and s.steps < max_steps:
        s.advance(0)
    assert s.done, f"not done after {max_steps} steps: {s.continuous.log[-1]}"
    return s.result()


@pytest.mark.parametrize("req", [
    # one sample of "elia" (5 positions) needs 3 blocks of 4 to join: 4 blocks hold one
    {"workload": ["0 5 elia"], "memory_blocks": 4, "parallel_samples": 2},
    {"workload": ["0 6 eli", "0 6 elia"], "memory_blocks": 5, "parallel_samples": 3},
    {"requests": 6, "memory_blocks": 8, "parallel_samples": 2, "seed": 1},
    {"requests": 6, "memory_blocks": 10, "parallel_samples": 2, "seed": 1},
])
def test_parallel_samples_in_a_tight_pool_finish_and_equal_them_alone(lib, req):
    out = served_within(lib, {"dataset": "names", "block_size": 4, **req})
    check_frames(out)
    for r in out["requests"]:
        assert r["ids"] == alone(lib, r["settings"]).output_ids, r["number"]


# --- known bugs (see the report): kept as strict expected failures ---------------------------

@pytest.mark.parametrize("dataset,tokenizer,block_size,line", [
    ("names", "chars", 4, "0 2 mar"),  # 4 positions: 1 block and 1 to grow into
    ("prose", "bpe", 16, "0 4 The ship sailed into the harbour at dawn"),  # 19 positions
])
def test_the_fewest_memory_blocks_that_serve_a_request_are_accepted(lib, dataset, tokenizer,
                                                                    block_size, line):
    model = lib.model("transformer", dataset, tokenizer)
    prompt = line.split(" ", 2)[2]
    need = -(-(1 + len(model.tokenizer.encode(prompt))) // block_size) + 1
    out = serving(lib, {"dataset": dataset, "tokenizer": tokenizer, "block_size": block_size,
                        "memory_blocks": need, "workload": [line]}).run().result()
    (r,) = out["requests"]
    assert r["ids"] == alone(lib, r["settings"]).output_ids


@pytest.mark.parametrize("dataset,tokenizer,block_size,lines", [
    ("names", "chars", 4, ["0 2 mar", "1 3 marianne", "0 2 a"]),
    ("tasks", "bpe", 8, ["0 4 What is 12 plus 7?"]),  # the question's template counts too
])
def test_the_smallest_pool_is_the_schedulers_largest_first_join(lib, dataset, tokenizer,
                                                               block_size, lines):
    """One rule for the blocks a request needs to join (the scheduler's): the panel refuses a
    pool one block smaller than the largest request's window and a block to grow into, counted
    here from the prompts the runs read, and the scheduler says the same number."""
    from decodelab.core.loops.generate import prepare

    if not lib.has_model("transformer", dataset, tokenizer):
        pytest.skip(f"no transformer of {dataset} read as {tokenizer}")
    windows = [1 + len(prepare(lib, {"model": "transformer", "dataset": dataset,
                                     "tokenizer": tokenizer, "prompt": line.split(" ", 2)[2],
                                     "tools": "off"})[2][0]) for line in lines]
    least = max(-(-w // block_size) + 1 for w in windows)
    req = {"dataset": dataset, "tokenizer": tokenizer, "block_size": block_size,
           "workload": lines}
    assert serving(lib, dict(req, memory_blocks=least)).continuous.least_blocks == least
    e = field_error(serving, lib, dict(req, memory_blocks=least - 1))
    assert e.field == "memory_blocks"
    assert e.message == (f"Memory blocks must hold one request at least: {least} blocks of "
                         f"{block_size} here; got {least - 1}.")


def test_a_superscript_digit_is_named_as_a_bad_line(lib):
    from decodelab.lesson.serving import serve

    e = field_error(serve, lib, {"dataset": "names", "workload": ["0 \u00b2 ann"]})
    assert e.field == "workload" and "line 1" in e.message


# --- the memory calculator ------------------------------------------------------------------

@pytest.mark.parametrize("tokens,sequences,blocks", [(4096, 1, 256), (4100, 1, 257),
                                                     (4100, 8, 257), (1, 3, 1), (17, 1, 2)])
def test_the_memory_calculator_counts_whole_blocks_per_sequence(tokens, sequences, blocks):
    from decodelab.lesson import costs

    out = costs.memory({"preset": "seed", "tokens": tokens, "sequences": sequences,
                        "block_size": 16})
    per_token = 2 * 32 * 8 * 128 * 2  # K and V, layers, KV heads, head dim, bytes
    assert out["bytes_per_token"] == per_token
    assert out["total_bytes"] == per_token * tokens * sequences
    assert out["blocks_per_sequence"] == blocks
    assert out["paged_total_bytes"] == per_token * blocks * 16 * sequences
    assert out["paged_waste"] == pytest.approx((blocks * 16 - tokens) / (blocks * 16), abs=1e-15)


def test_the_memory_calculator_worked_numbers_and_its_bad_block_size():
    from decodelab.lesson import costs

    exact = costs.memory({"preset": "seed", "tokens": 4096, "block_size": 16})
    assert exact["paged_waste"] == 0 and exact["paged_total_bytes"] == exact["total_bytes"]
    over = costs.memory({"preset": "seed", "tokens": 4100, "block_size": 16})
    assert over["blocks_per_sequence"] == 257
    assert over["paged_total_bytes"] == 4112 * 131072
    assert over["paged_waste"] == pytest.approx(12 / 4112)
    # the block size left out is 16
    assert costs.memory({"preset": "seed", "tokens": 4100})["blocks_per_sequence"] == 257
    one = costs.memory({"preset": "seed", "tokens": 4100, "block_size": 1})
    assert one["paged_waste"] == 0 and one["paged_total_bytes"] == one["total_bytes"]
    for bad in (0, 65, 2.5, "x"):
        e = field_error(costs.memory, {"preset": "seed", "block_size": bad})
        assert e.field == "block_size" and "Block size must be" in e.message, e.message


def test_the_prefix_tree_shares_the_full_blocks_of_running_and_finished_requests(lib):
    # what the page's hint says: a request that joins beside a running one with the same start
    # reuses the full blocks that one computed, as one that joins after it has left does
    from decodelab.lesson.serving import Serving

    lines = ["0 40 The ship sailed", "2 3 The ship sailed", "60 3 The ship sailed"]
    out = Serving(lib, {"dataset": "prose", "block_size": 4, "seed": 5, "workload": lines,
                        "max_running": 4}).run().result()
    first, beside, after = out["requests"]
    assert beside["joined_step"] < first["finished_step"] < after["joined_step"]
    reused = {n: positions for f in out["frames"] for n, positions in f["reused"]}
    prompt = len("The ship sailed") + 1  # the start token and the characters
    whole = (prompt - 1) // 4 * 4  # whole blocks, the last token computed (its logits answer)
    assert first["number"] not in reused
    assert reused[beside["number"]] == reused[after["number"]] == whole
    # while both run, the shared blocks are held by both tables and the tree: 3 holders each
    joined = next(f for f in out["frames"] if beside["number"] in f["joined"])
    tables = {n: table for n, _, table in joined["tables"]}
    shared = tables[first["number"]][:whole // 4]
    assert tables[beside["number"]][:whole // 4] == shared
    assert all(joined["refs"][block] == 3 and joined["state"][block] == "S" for block in shared)
    # before the second joined, the first's full blocks were its own and the tree's (T: one
    # request, 2 holders); once both have left, the tree's alone (C)
    alone_first = next(f for f in out["frames"] if f["step"] == joined["step"] - 1)
    assert all(alone_first["refs"][block] == 2 and alone_first["state"][block] == "T"
               for block in shared)
    between = [f for f in out["frames"] if f["step"] < after["joined_step"]][-1]
    assert between["step"] > max(first["finished_step"], beside["finished_step"])
    assert all(between["state"][block] == "C" for block in shared), between["step"]
    # and the text of each is what it writes alone
    for r in out["requests"]:
        assert r["ids"] == alone(lib, r["settings"]).output_ids


def test_a_tree_block_above_a_running_request_s_own_copy_is_not_counted_free(lib):
    """A request that computes a window again after a preemption holds its own copies of blocks
    the tree keeps too; its new blocks under them go into the tree as it fills them. The older
    copies above then hold no request, but `evict` cannot give them back before what is under
    them: the pool's free count leaves them out (counting every block the tree alone holds, a
    step found no block to take)."""
    from decodelab.core.serving.paged import BlockPool, PagedSession
    from decodelab.core.serving.prefixtree import PrefixTree

    model = lib.model("transformer", "names", "chars")
    pool = BlockPool.for_model(model, num_blocks=12, block_size=2)
    tree = PrefixTree(pool)
    enc = model.tokenizer.encode
    first = PagedSession(model, pool, tree=tree)
    first.prefill(enc("annabel"))  # the start token and 7 characters: 4 full blocks
    tree.insert(first.tokens, first.cache.table)
    first.release()
    assert tree.evictable() == 4  # the tree alone holds them
    again = PagedSession(model, pool)  # computes its window itself: copies of its own
    again.prefill(enc("annabelle"))  # 10 positions: the same 4 blocks' tokens, and a fifth
    tree.insert(again.tokens, again.cache.table)
    assert tree.size == 5 and pool.refs[again.cache.table[4]] == 2  # the fifth: both hold it
    assert all(pool.refs[n.block] == 1 for n in tree.nodes() if n.block != again.cache.table[4])
    # the four cannot go before the fifth: asked for one block more than is free, it gives none
    assert tree.evictable() == 0 and tree.evict(len(pool.free) + 1) == 0
    again.release()
    assert tree.evictable() == 5
    assert tree.evict(pool.num_blocks) == 5 and len(pool.free) == pool.num_blocks


def test_the_command_a_serving_run_shows_serves_it_again(lib):
    """The command line under a served workload (Serving.command, written as the workbench's
    are) run as a learner would copy it: the same requests, schedule and sharing."""
    import shlex

    from decodelab.lesson.serving import serve
    from tests.test_cli import ok

    shown = serve(lib, {"dataset": "prose", "tokenizer": "chars", "block_size": 4, "seed": 9,
                        "workload": ["0 5 The cat's", "1 7 A day"], "parallel_samples": 2,
                        "max_running": 3})  # (quotes and spaces, as a shell reads them)
    words = shlex.split(shown["command"])
    assert words[:4] == ["python3", "-m", "decodelab", "paged"] and words[-1] == "--json"
    again = ok(*words[3:])
    assert again.pop("measured").keys() == shown.pop("measured").keys()  # (wall time: its own)
    assert again == json.loads(json.dumps(shown))
