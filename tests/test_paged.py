"""The paged KV cache: attention read through a block table gives the contiguous cache's logits
(float64, 1e-12) for every model and block size, through prefill, decode, a tool-style append,
a speculative score and rewind, and a full window read again; copy-on-write shares a prompt's
blocks between forks and copies only the shared, partly filled block a fork writes into; the
pool's accounting (free + used, reference counts, everything back at the end, a full pool
named); the live check unchanged on it."""

import numpy as np
import pytest

from decodelab.core.library import Library
from decodelab.core.loops.livecheck import LiveCheck
from decodelab.core.serving.paged import BlockPool, PagedSession, PoolFull

from tests.test_hf import ROOT, shipped

MODELS = [("names", "chars"), ("prose", "chars"), ("prose", "bpe"), ("tasks", "bpe")]


@pytest.fixture(scope="module")
def lib():
    shipped("names", "chars")  # skips when the models are not built
    return Library(ROOT / "artifacts")


def drive(session, model, rng, steps):
    """Prefill, decode, append three, score four and take two back, decode on: every logits
    vector handed out, in order."""
    V = model.tokenizer.vocab_size
    out = [session.prefill(rng.integers(1, V, 5).tolist())]
    for i in range(steps):
        out.append(session.decode(int(rng.integers(1, V))))
        if i == 3:
            out.append(session.append(rng.integers(1, V, 3).tolist()))
        if i == 6 and session.length + 4 <= model.cfg.context_size:
            out.extend(session.score(rng.integers(1, V, 4).tolist()))
            session.rewind(session.length - 2)
    return out


@pytest.mark.parametrize("block_size", [1, 3, 16])
@pytest.mark.parametrize("dataset,tokenizer", MODELS)
def test_paged_logits_equal_the_contiguous_cache(lib, dataset, tokenizer, block_size):
    model = lib.model("transformer", dataset, tokenizer)
    steps = model.cfg.context_size + 8  # past the window: the reread shift, on blocks too
    pool = BlockPool.for_model(model, num_blocks=-(-model.cfg.context_size // block_size),
                               block_size=block_size)
    paged = drive(PagedSession(model, pool), model, np.random.default_rng(1), steps)
    plain = drive(model.session(np.float64), model, np.random.default_rng(1), steps)
    assert len(paged) == len(plain)
    for a, b in zip(paged, plain):
        assert np.abs(a - b).max() <= 1e-12


def test_forks_share_the_prompt_and_copy_only_the_block_they_write_into(lib):
    model = lib.model("transformer", "names", "chars")
    pool = BlockPool.for_model(model, num_blocks=12, block_size=4)
    root = PagedSession(model, pool)
    root.prefill(model.tokenizer.encode("marianne"))  # 1 + 8 = 9 positions: blocks 4, 4, 1
    assert pool.used == 3 and list(pool.refs[root.cache.table]) == [1, 1, 1]
    forks = [root.fork() for _ in range(3)]
    assert pool.used == 3 and list(pool.refs[root.cache.table]) == [4, 4, 4]
    assert pool.shared == 3 and pool.copies_on_write == 0
    ref = model.session(np.float64)
    ref.prefill(model.tokenizer.encode("marianne"))
    for i, fork in enumerate(forks):
        alone = ref.fork()
        token = model.tokenizer.encode("aei"[i])[0]
        assert np.abs(fork.decode(token) - alone.decode(token)).max() <= 1e-12
    # each fork wrote into the shared, partly filled third block: a copy each; the full ones
    # stay shared by all four
    assert pool.copies_on_write == 3
    assert [f.cache.table[:2] for f in forks] == [root.cache.table[:2]] * 3
    assert len({f.cache.table[2] for f in forks} | {root.cache.table[2]}) == 4
    assert list(pool.refs[root.cache.table]) == [4, 4, 1]
    # the original is untouched by its forks' writes
    again = root.decode(model.tokenizer.encode("e")[0])
    alone = ref.fork()
    assert np.abs(again - alone.decode(model.tokenizer.encode("e")[0])).max() <= 1e-12
    for s in forks + [root]:
        s.release()
    assert pool.used == 0 and sorted(pool.free) == list(range(12)) and not pool.refs.any()


@pytest.mark.parametrize("dataset,tokenizer", MODELS)
@pytest.mark.parametrize("block_size", [1, 3, 16])
def test_decodes_in_one_call_equal_each_sequence_decoding_alone(lib, dataset, tokenizer,
                                                                 block_size):
    """decode_together: rows of different lengths, one a fork sharing another's blocks, each
    reading its own blocks through a padded table; every row's logits equal a contiguous
    session decoding the same tokens alone (float64, 1e-12), step after step."""
    from decodelab.core.serving.paged import decode_together

    model = lib.model("transformer", dataset, tokenizer)
    V, T = model.tokenizer.vocab_size, model.cfg.context_size
    rng = np.random.default_rng(block_size)
    pool = BlockPool.for_model(model, num_blocks=4 * (-(-T // block_size)) + 4,
                               block_size=block_size)
    prompts = [rng.integers(1, V, n).tolist() for n in (2, 7, 12)]
    paged, alone = [], []
    for ids in prompts:
        p, c = PagedSession(model, pool), model.session(dtype=np.float64)
        p.prefill(ids)
        c.prefill(ids)
        paged.append(p)
        alone.append(c)
    paged.append(paged[1].fork())  # shares the 7-token prompt's blocks, copies on write
    alone.append(alone[1].fork())
    for _ in range(10):
        tokens = rng.integers(1, V, len(paged)).tolist()
        decode_together(paged, tokens)
        for p, c, t in zip(paged, alone, tokens):
            want = c.decode(t)
            np.testing.assert_allclose(p.decode(t), want, rtol=0, atol=1e-12)
            assert p.cache.length == c.cache.length
    # the fork's first write copied the shared last block (when the prompt's window left it
    # partly filled); the full blocks stay shared
    assert pool.copies_on_write == (1 if (1 + 7) % block_size else 0)
    for p in paged:
        p.release()
    assert pool.used == 0


def test_a_full_pool_is_named_and_a_rewind_gives_blocks_back(lib):
    model = lib.model("transformer", "names", "chars")
    pool = BlockPool.for_model(model, num_blocks=2, block_size=4)
    s = PagedSession(model, pool)
    s.prefill(model.tokenizer.encode("anna"))  # 5 positions: 2 blocks
    for t in model.tokenizer.encode("bel"):  # 6, 7, 8: still 2 blocks
        s.decode(t)
    with pytest.raises(PoolFull, match="the pool's 2 blocks of 4 positions are all in use"):
        s.decode(model.tokenizer.encode("l")[0])
    s.rewind(4)
    assert pool.used == 1 and len(s.cache.table) == 1
    with pytest.raises(ValueError, match="kshift"):
        PagedSession(model, pool, shift="kshift")


def test_the_live_check_runs_unchanged_on_a_paged_session(lib):
    model = lib.model("transformer", "prose", "chars")
    pool = BlockPool.for_model(model, num_blocks=20, block_size=8)
    s = PagedSession(model, pool)
    check = LiveCheck(s)
    records = []
    logits = s.prefill(model.tokenizer.encode("The cache "))
    for t in model.tokenizer.encode("holds keys and values"):
        records.append({"step": len(records)})
        check.add(records[-1], s)
        logits = s.decode(t)
    check.catch_up()
    assert logits is not None and all(r["cache_ok"] for r in records)
    assert max(r["cache_diff"] for r in records) <= 1e-12


# --- the prefix tree ---------------------------------------------------------------------------

def test_a_request_reuses_the_blocks_of_the_longest_cached_prefix(lib):
    from decodelab.core.serving.prefixtree import PrefixTree

    model = lib.model("transformer", "prose", "chars")
    pool = BlockPool.for_model(model, num_blocks=40, block_size=4)
    tree = PrefixTree(pool)
    enc = model.tokenizer.encode
    first = PagedSession(model, pool, tree=tree)
    first.prefill(enc("The cache holds keys"))
    assert first.reused == 0
    for t in enc(" and"):
        first.decode(t)
    added = tree.insert(first.tokens, first.cache.table)
    assert added == len(first.tokens) // 4 == tree.size  # its full blocks only
    first.release()
    assert pool.used == tree.size  # the tree keeps them after the request is done
    # a second request: the same start, another ending
    second = PagedSession(model, pool, tree=tree)
    logits = second.prefill(enc("The cache holds values"))
    # the window [start] + "The cache holds " is 17 positions: 4 full blocks in common
    assert second.reused == 16 and tree.found == 16
    ref = model.session(np.float64)
    assert np.abs(logits - ref.prefill(enc("The cache holds values"))).max() <= 1e-12
    for t in enc(" and keys"):
        assert np.abs(second.decode(t) - ref.decode(t)).max() <= 1e-12
    assert 0 < tree.hit_rate < 1
    second.release()


def test_eviction_gives_back_least_recently_used_leaves_no_request_holds(lib):
    from decodelab.core.serving.prefixtree import PrefixTree

    model = lib.model("transformer", "names", "chars")
    pool = BlockPool.for_model(model, num_blocks=6, block_size=2)
    tree = PrefixTree(pool)
    enc = model.tokenizer.encode
    done = []
    for name in ("anna", "bob"):  # windows of 5 and 4 positions: 2 full blocks each
        s = PagedSession(model, pool, tree=tree)
        s.prefill(enc(name))
        tree.insert(s.tokens, s.cache.table)
        s.release()
        done.append(name)
    assert tree.size == 4 and pool.used == 4
    running = PagedSession(model, pool, tree=tree)
    running.prefill(enc("annabel"))  # reuses anna's 2 blocks, needs 2 more: 2 free
    assert running.reused == 4 and pool.used == 6
    running.decode(enc("l")[0])  # a new block: bob's least recently used leaf goes
    assert len(tree.evicted) == 1 and tree.size == 3
    # anna's blocks are held by the running request: never evicted
    assert all(pool.refs[b] == 2 for b in running.cache.table[:2])
    running.decode(enc("e")[0])
    running.decode(enc("s")[0])  # bob's other block goes too
    assert len(tree.evicted) == 2
    with pytest.raises(PoolFull, match="no block of the prefix tree is free to give back"):
        for t in enc("abcd"):
            running.decode(t)


# --- continuous batching ----------------------------------------------------------------------

def workload(n, seed, dataset="names", budgets=(4, 30),
             prompts=("marian", "mariann", "mari", "annabel", "anna", "")):
    import random

    rng = random.Random(seed)
    from decodelab.core.serving.scheduler import Request

    return [Request(i, {"model": "transformer", "dataset": dataset, "prompt": rng.choice(prompts),
                        "seed": rng.randrange(1000), "temperature": rng.choice([0.7, 1.0, 1.3]),
                        "max_new_tokens": rng.randint(*budgets), "cache_check": False,
                        "ignore_eos": rng.random() < 0.5},
                    arrival=rng.randint(0, 12)) for i in range(n)]


def alone(lib, request):
    from decodelab.core.loops.generate import start

    return start(lib, request.settings).run().output_ids


@pytest.mark.parametrize("num_blocks,block_size,static,batched", [
    (64, 4, False, True), (12, 4, False, True), (9, 8, False, True), (64, 4, True, True),
    (12, 4, False, False)])  # a step's decodes in one call, and (last) one by one
def test_every_request_writes_what_it_writes_alone(lib, num_blocks, block_size, static, batched):
    from decodelab.core.serving.scheduler import Scheduler

    requests = workload(14, seed=num_blocks + block_size)
    s = Scheduler(lib, requests, num_blocks=num_blocks, block_size=block_size, max_running=6,
                  static=static, batched=batched).run()
    assert len(s.done) == 14
    for r in requests:
        assert r.run.output_ids == alone(lib, r), r.number
        assert r.arrival <= r.joined_step <= r.finished_step
    # everything went back to the pool but what the prefix tree keeps
    assert s.pool.used == s.tree.size and set(s.pool.refs[s.pool.refs > 0]) <= {1}
    if num_blocks == 12:
        assert sum(r.preempted for r in requests) > 0  # a small pool preempts
    if block_size == 4:  # prompts of 6 and 7 characters fill a block of 4 (with the start)
        assert s.tree.found > 0  # shared prompts were found in the tree


def test_continuous_batching_takes_fewer_steps_than_static(lib):
    from decodelab.core.serving.scheduler import Scheduler

    steps = {}
    for static in (False, True):
        s = Scheduler(lib, workload(16, seed=3), num_blocks=64, block_size=4, max_running=4,
                      static=static).run()
        steps[static] = s.step
    assert steps[False] < steps[True]


def test_a_request_that_cannot_fit_is_named_and_nothing_hangs(lib):
    from decodelab.core.serving.scheduler import Request, Scheduler

    big = Request(0, {"model": "transformer", "dataset": "names", "prompt": "marianne",
                      "seed": 1, "max_new_tokens": 20, "cache_check": False})
    with pytest.raises(ValueError, match="request 0 cannot fit: it needs 4 blocks and the pool "
                                         "has 2"):
        Scheduler(lib, [big], num_blocks=2, block_size=4).run()


# --- the served workload, as the command line prints it --------------------------------------

@pytest.mark.parametrize("dataset,tokenizer,block_size,blocks", [("names", "chars", 4, 30),
                                                                ("prose", "bpe", 16, None)])
def test_the_served_workload_equals_every_request_run_alone(lib, dataset, tokenizer,
                                                            block_size, blocks):
    from decodelab.core.loops.generate import start
    from decodelab.lesson.serving import serve

    out = serve(lib, {"dataset": dataset, "tokenizer": tokenizer, "requests": 10,
                      "block_size": block_size, "seed": 4, "memory_blocks": blocks})
    assert len(out["requests"]) == 10
    for r in out["requests"]:
        run = start(lib, r["settings"]).run()
        assert r["ids"] == run.output_ids and r["text"] == run.text
        assert r["arrival"] <= r["joined_step"] <= r["finished_step"] < out["steps"]
    w = out["waste"]
    assert 0 <= w["paged"] < w["contiguous_actual"] < w["contiguous_max"] < 1
    assert out["steps"] <= out["static_steps"]
    assert 0 <= out["prefix_hit_rate"] <= 1 and out["prefill_tokens_saved"] >= 0


def test_the_paged_command_and_its_bad_input():
    from tests.test_cli import cli, ok

    out = ok("paged", "--model", "transformer", "--dataset", "names", "--requests", "6",
             "--block-size", "8", "--seed", "2", "--json")
    assert set(out) >= {"requests", "waste", "blocks_shared", "copies_on_write",
                        "prefix_hit_rate", "prefill_tokens_saved", "steps"}
    assert set(out["requests"][0]) >= {"prompt", "settings", "ids", "text", "joined_step",
                                       "finished_step", "preempted"}
    for args, words in ((("--block-size", "0"), "--block-size: Block size must be a whole "
                                                "number from 1 to 64; got 0."),
                        (("--memory-blocks", "1"), "--memory-blocks: Memory blocks must hold "
                                                   "one request at least"),
                        (("--model", "bigram"), "--model: Model must be transformer")):
        r = cli("paged", "--dataset", "names", "--requests", "4", "--seed", "1", *args)
        assert r.returncode == 2 and words in r.stderr, r.stderr


# --- what a paged cache does to itself: truncate gives blocks back; no reorder, no shift ------

def test_a_paged_cache_truncates_into_its_blocks_and_refuses_to_reorder_or_shift(lib):
    """The cache's operations on a block table: truncate keeps the blocks that still hold a
    position and gives the rest back (shared ones stay with the tables that hold them); a
    table is one sequence, so reordering rows is refused, and turning keys in place is refused
    (its blocks may be shared): each refusal says why."""
    model = lib.model("transformer", "names", "chars")
    pool = BlockPool.for_model(model, num_blocks=8, block_size=4)
    s = PagedSession(model, pool)
    s.prefill(model.tokenizer.encode("marianne"))  # 9 positions: blocks of 4, 4, 1
    other = s.fork()
    assert pool.used == 3
    s.cache.truncate(5)  # positions 0..4: two blocks still hold one
    assert s.cache.length == 5 and len(s.cache.table) == 2 and pool.used == 3  # the fork's
    other.release()
    assert pool.used == 2
    s.cache.truncate(0)
    assert pool.used == 0 and s.cache.table == []
    with pytest.raises(ValueError, match="one sequence: it has no rows to reorder"):
        s.cache.reorder([0])
    with pytest.raises(ValueError, match="does not shift its keys in place"):
        s.cache.shift(2, lambda keys: keys)


def test_a_request_that_outgrows_the_pool_ends_with_a_reason(lib):
    from decodelab.core.serving.scheduler import Request, Scheduler
    from decodelab.errors import FieldError
    from decodelab.lesson.serving import serve

    grows = Request(0, {"model": "transformer", "dataset": "names", "prompt": "anna", "seed": 1,
                        "max_new_tokens": 30, "ignore_eos": True, "cache_check": False})
    s = Scheduler(lib, [grows], num_blocks=3, block_size=4)
    with pytest.raises(ValueError, match="request 0 cannot fit: it needs 4 blocks and the pool "
                                         "has 3"):
        s.run()
    assert grows.preempted == 1  # it was preempted once it needed a fourth block
    with pytest.raises(FieldError) as e:
        # room for the longest prompt (7 blocks of 16), not for it to grow to its budget
        serve(lib, {"dataset": "prose", "requests": 8, "block_size": 16, "seed": 1,
                    "memory_blocks": 7})
    assert e.value.field == "memory_blocks"
    assert "the workload cannot finish: request 1 cannot fit: it needs 8 blocks and the pool " \
        "has 7. Give more blocks (room for one full window is 8)." in e.value.message
