"""The memory and cost view, the batch view and the side-by-side run: numbers the page shows,
held to independent arithmetic and to the single-row, cached and CLI paths."""

import numpy as np
import pytest
from decodelab.core.models.uncached import Uncached
from decodelab.core.loops.generate import Generation
from decodelab.core.library import Library
from decodelab.core.rules.settings import Settings
from decodelab.entry.webapi import bench
from decodelab.errors import FieldError, FieldErrors
from decodelab.lesson import costs
from decodelab.lesson.batch import batch_run, describe

from tests.conftest import api
from tests.test_cli import ok as cli_json
from tests.test_kvcache import make_model


@pytest.fixture(scope="module")
def library(artifacts):
    api("setup", {"assets": str(artifacts)})
    return Library(artifacts)


def test_the_worked_example_preset_gives_the_seed_numbers():
    out = costs.memory({"preset": "seed", "tokens": 4096})
    assert out["bytes_per_token"] == 131072 and out["total_bytes"] == 512 * 2 ** 20
    assert costs.memory({"preset": "seed", "tokens": 4096, "sequences": 8})["total_bytes"] \
        == 4 * 2 ** 30
    assert out["mha_bytes_per_token"] == 4 * 131072 and out["saving"] == 4


def test_presets_match_the_formula_and_their_attention_kind():
    for p in costs.PRESETS:
        out = costs.memory({"preset": p["id"], "tokens": 1})
        expected = 2 * p["layers"] * p["kv_heads"] * p["head_dim"] * p["bytes_per_element"]
        assert out["bytes_per_token"] == expected
        kind = "MHA" if p["kv_heads"] == p["heads"] else "MQA" if p["kv_heads"] == 1 else "GQA"
        assert p["kind"] == kind and (kind in p["label"] or p["id"] == "seed")
    assert {p["kind"] for p in costs.PRESETS} == {"MHA", "GQA", "MQA"}
    assert costs.memory({"preset": "llama2-7b", "tokens": 1})["bytes_per_token"] == 512 * 1024
    assert costs.memory({"preset": "falcon-7b", "tokens": 1})["bytes_per_token"] == 8 * 1024


def test_the_tiny_preset_is_what_the_live_cache_really_allocates(library):
    for dataset in ("names", "prose"):
        model = library.model("transformer", dataset)
        tiny = costs.tiny_preset(model)
        session = model.session()
        out = costs.memory({"preset": "tiny"}, tiny)
        assert out["total_bytes"] == session.cache.bytes_allocated
        session.prefill(model.tokenizer.encode("a"))
        assert session.length == 2  # EOS + "a": what the page multiplies by bytes per token
        assert session.cache.bytes_allocated // session.cache.max_len == out["bytes_per_token"]


def test_memory_input_is_checked_field_by_field():
    for request, field, words in (({"layers": 0}, "layers", "Layers must be a whole number"),
                                  ({"head_dim": "x"}, "head_dim", "Head dim must be"),
                                  ({"bytes_per_element": -2}, "bytes_per_element", "greater than 0"),
                                  ({"heads": 32, "kv_heads": 5}, "kv_heads", "divide"),
                                  ({"preset": "gpt9"}, "preset", "Preset must be one of seed"),
                                  ({"tokens": 1.5}, "tokens", "Tokens must be a whole number")):
        with pytest.raises((FieldError, FieldErrors)) as e:
            costs.memory(request)
        (error,) = getattr(e.value, "errors", [e.value])
        assert error.field == field and words in error.message, error.message


def test_step_costs_measure_the_real_step_and_count_the_bytes_it_reads():
    model = make_model("gqa", context=32, layers=2)
    out = costs.step_costs(model, [2, 8, 32, 99], repeats=2)
    assert [r["context"] for r in out["rows"]] == [2, 8, 32]  # clipped to the context
    per_position = 2 * 2 * 2 * 4 * 8  # K and V, 2 layers, 2 KV heads, head dim 4, float64
    assert out["bytes_per_position"] == per_position
    for r in out["rows"]:
        assert r["kv_bytes_read"] == r["context"] * per_position
        assert r["cached_ms"] > 0 and r["uncached_ms"] > 0
        assert r["positions_computed_uncached"] == r["context"]
    # the rewinding that the measurement relies on leaves a correct cache behind
    session = model.session()
    session.prefill(list(range(1, 11)) * 3)
    session.rewind(5)
    logits = session.decode(3)
    fresh = model.session()
    fresh.prefill(list(range(1, 5)))
    np.testing.assert_allclose(logits, fresh.decode(3), atol=1e-12)


def test_generation_without_the_cache_gives_the_same_tokens_through_context_shifts(library):
    model = library.model("transformer", "names")  # context 64: 100 tokens shift twice
    s = Settings(model="transformer", dataset="names", prompt="jo", seed=4, ignore_eos=True,
                 max_new_tokens=100, cache_check=False)
    cached = Generation(model, s).run()
    uncached = Generation(Uncached(model), s).run()
    assert uncached.text == cached.text and len(cached.text) == 100
    for a, b in zip(cached.records, uncached.records):
        assert a["prob"] == pytest.approx(b["prob"], abs=1e-9)


def test_time_generation_reports_decode_rate_and_context():
    model = make_model("mqa", context=40)
    s = Settings(model="transformer", prompt="abc", seed=1, ignore_eos=True, max_new_tokens=20)
    out = bench.time_generation(model, s)
    assert out["steps"] == 20 and out["decode_steps_per_second"] > 0
    assert out["context_from"] == 4 and out["context_to"] == 23


def test_batch_view_shows_padding_and_positions_and_matches_single_runs(library):
    out = api("batch_view", {"dataset": "names", "prompts": ["", "al", "chris"], "batch_steps": 5,
                             "seed": 2})
    assert out["ok"] and out["max_abs_diff"] < out["tolerance"] == 1e-9
    assert [r["padding"] for r in out["rows"]] == [5, 3, 0]
    assert out["columns"] == 6 + 4  # EOS + "chris", then 4 decoded tokens
    for row in out["rows"]:
        real = [s for s in row["slots"] if not s["pad"]]
        assert [s["pos"] for s in real] == list(range(len(real)))  # positions skip the pads
        assert real[0]["token"] == "<eos>" and real[0]["kind"] == "start"
        assert "".join(s["token"] for s in real[1:len(row["prompt"]) + 1]) == row["prompt"]
        assert len(row["generated"]) == 5 and row["ok"]
    assert all(s["pad"] for s in out["rows"][0]["slots"][:5])


def test_batch_run_agrees_for_mha_gqa_mqa_in_both_precisions():
    for kind in ("mha", "gqa", "mqa"):
        model = make_model(kind, context=24, seed=4)
        for dtype, tol in ((np.float64, 1e-10), (np.float32, 1e-5)):
            out = batch_run(model, [[1, 2, 3, 4], [], [5, 6]], 6, seed=3, dtype=dtype)
            assert out["ok"] and out["diff"].max() < tol, (kind, dtype, out["diff"].max())
            d = describe(model, ["abcd", "", "ef"], out)
            assert [r["padding"] for r in d["rows"]] == [0, 4, 2]


def test_batch_view_input_is_checked(library):
    for request, field, words in (
            ({"prompts": ["a"]}, "prompts", "at least 2 are needed"),
            ({"prompts": "abc"}, "prompts", "at least 2 are needed"),
            ({"prompts": ["a", "B"]}, "prompts", "Batch prompts: entry 2 has characters"),
            ({"prompts": ["a", "b" * 60]}, "prompts", "entry 2 has 60 characters; each must "
                                                      "have 0 to 48"),
            ({"prompts": ["a", "b"], "batch_steps": 0}, "batch_steps",
             "Batch steps must be a whole number"),
            ({"prompts": ["a", "b" * 48], "batch_steps": 30}, "batch_steps", "context holds 64")):
        out = api("batch_view", {"dataset": "names", **request})
        assert not out["ok"] and out["errors"][0]["field"] == field, out
        assert words in out["errors"][0]["message"], out


def test_side_by_side_runs_both_models_exactly_as_generate_does(library):
    settings = {"dataset": "names", "prompt": "el", "seed": 11, "temperature": 0.9,
                "max_new_tokens": 12}
    out = api("compare", settings)
    assert out["ok"] and set(out["runs"]) == {"bigram", "transformer"}
    for kind, run in out["runs"].items():
        trace = cli_json("generate", "--model", kind, "--dataset", "names", "--prompt", "el",
                         "--seed", "11", "--temperature", "0.9", "--max-new-tokens", "12",
                         "--json")
        assert run["text"] == trace["text"] and run["steps"] == len(trace["steps"])
        assert run["finish_reason"] == trace["finish_reason"]
    assert out["runs"]["transformer"]["cache_ok"] is True
    assert out["runs"]["bigram"]["cache_ok"] is None  # a bigram has no cache to check
    bad = api("compare", {**settings, "max_new_tokens": 5000})
    assert not bad["ok"] and bad["errors"][0]["field"] == "max_new_tokens"
    bad = api("compare", {**settings, "top_p": 3})
    assert not bad["ok"] and bad["errors"][0]["field"] == "top_p"


def test_cost_sweep_and_memory_through_the_page_api(library):
    out = api("cost_sweep", {"dataset": "names", "repeats": 1})
    assert out["ok"] and [r["context"] for r in out["rows"]] == [2, 8, 16, 24, 32, 40, 48, 56, 64]
    out = api("memory", {"preset": "tiny", "dataset": "prose"})
    assert out["ok"] and out["total_bytes"] == 128 * out["bytes_per_token"]
    assert [p["id"] for p in out["presets"]][-1] == "tiny"
    bad = api("memory", {"preset": "seed", "layers": -1})
    assert not bad["ok"] and bad["errors"][0]["field"] == "layers"


def test_the_json_mode_timing_describes_the_run_it_timed(library):
    """What the benchmark's JSON mode rows rest on: the run is a real JSON-mode run, every
    number is a time, and the states counted are the parser states that run went through."""
    from decodelab.core.rules import jsonshape
    from decodelab.core.rules.settings import validate

    settings = validate({"model": "transformer", "dataset": "prose", "tokenizer": "bpe",
                         "temperature": 2.0, "seed": 0, "max_new_tokens": 30})
    model = library.for_settings(settings)
    out = bench.time_json_mode(model, settings, repeats=2)
    run = Generation(model, validate({**settings.to_json(), "json_mode": True})).run()
    assert out["steps"] == len(run.records) and out["status"] == run.json_report()["status"]
    assert out["status"] in ("valid", "incomplete")
    assert out["states"] == len({s.key() for s in run.json.states}) >= 1
    assert all(isinstance(s, jsonshape.JsonState) for s in run.json.states)
    for key, value in out.items():
        if key.endswith("_ms_per_step") and not key.startswith("overhead"):
            assert 0 <= value < 1e4, (key, value)


def test_a_cache_of_llama_cpps_types_takes_its_blocks_bytes():
    """A cache's type of number: llama.cpp's quantized types hold 32 numbers in a block with a
    float16 scale (q4_1: and an offset), so a number takes the block's bytes over 32; the
    calculator names the type its bytes are, and SmolLM2's shape in q8_0 is 1.0625 bytes a
    number (ggml: block_q8_0 is 2 + 32 bytes)."""
    by_id = {t["id"]: t["bytes"] for t in costs.CACHE_TYPES}
    assert by_id == {"f64": 8, "f32": 4, "f16": 2, "q8_0": (2 + 32) / 32,
                     "q4_1": (2 + 2 + 16) / 32, "q4_0": (2 + 16) / 32}
    out = costs.memory({"preset": "smollm2", "tokens": 1, "bytes_per_element": 34 / 32})
    assert out["bytes_per_token"] == 2 * 30 * 3 * 64 * 34 / 32 == 12240
    assert costs.number_words(1.0625).startswith("q8_0") and costs.number_words(3) == "3 bytes"
    assert costs.cache_type_of(2)["id"] == "f16" and costs.cache_type_of(1.5) is None
