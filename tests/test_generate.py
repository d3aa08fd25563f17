"""The generation loop: reproducibility, every stop rule, the step records and the trace."""

import numpy as np
import pytest
from decodelab.core.rules import sampling
from decodelab.core.loops.generate import Generation
from decodelab.core.rules.settings import validate
from decodelab.core.tokens.tokenizer import EOS

from tests.conftest import decode_distribution


def run(model, **raw):
    return Generation(model, validate(raw)).run()


def test_same_seed_same_text_and_records(small_model):
    a = run(small_model, seed=7, max_new_tokens=40, ignore_eos=True, top_k=5, temperature=1.3)
    b = run(small_model, seed=7, max_new_tokens=40, ignore_eos=True, top_k=5, temperature=1.3)
    assert a.text == b.text and a.trace() == b.trace()


def test_different_seeds_give_different_text(small_model):
    texts = {run(small_model, seed=s, max_new_tokens=30, ignore_eos=True).text for s in range(5)}
    assert len(texts) == 5


def test_each_sampled_step_is_the_inverse_cdf_of_one_uniform_draw(small_model):
    g = run(small_model, seed=3, max_new_tokens=25, ignore_eos=True, top_p=0.9, temperature=0.8)
    rng = np.random.default_rng(3)  # independent replay of the draws
    prev = EOS
    for r in g.records:
        u = rng.random()
        assert r["u"] == u
        z = small_model.log_probs[prev].copy()
        z[EOS] = -np.inf
        p_final = decode_distribution(z, temperature=0.8, top_p=0.9)[2]
        cum, expected = 0.0, None
        for i, p in enumerate(p_final):  # by hand: first id whose cumulative mass exceeds u
            cum += p
            if cum > u:
                expected = i
                break
        assert r["token_id"] == expected
        prev = r["token_id"]


def test_step_record_recomputes_from_the_model(small_model):
    g = run(small_model, prompt="em", seed=1, max_new_tokens=6, ignore_eos=True, temperature=0.7,
            top_k=4)
    prev = small_model.tokenizer.encode("em")[-1]
    for r in g.records:
        z = small_model.log_probs[prev].copy()
        z[EOS] = -np.inf
        p_temp, kept, p_final = decode_distribution(z, temperature=0.7, top_k=4)
        p_raw = np.exp(small_model.log_probs[prev])
        for c in r["top"]:
            i = c["token_id"]
            assert c["p_raw"] == pytest.approx(p_raw[i], abs=1e-12)
            assert c["p_temp"] == pytest.approx(p_temp[i], abs=1e-12)
            assert c["p_final"] == pytest.approx(p_final[i], abs=1e-12)
            assert c["kept"] == kept[i]
        assert r["kept_count"] == kept.sum() >= 4  # ties with the 4th are kept
        assert r["prob"] == pytest.approx(p_final[r["token_id"]])
        assert r["entropy"] == pytest.approx(sampling.entropy(p_final))
        prev = r["token_id"]


def test_eos_stops_and_is_never_visible(small_model):
    g = run(small_model, seed=0, max_new_tokens=200)
    assert g.finish_reason == "stop" and g.stop_reason == "eos"
    assert g.records[-1]["token_id"] == EOS and g.records[-1]["token_text"] == "<eos>"
    assert "<eos>" not in g.text and len(g.text) == len(g.records) - 1


def test_budget_gives_length(small_model):
    g = run(small_model, seed=0, max_new_tokens=5, ignore_eos=True)
    assert (g.finish_reason, g.stop_reason, len(g.records), len(g.text)) == ("length", None, 5, 5)


def test_ignore_eos_blocks_end_of_sequence_everywhere(small_model):
    g = run(small_model, seed=0, max_new_tokens=300, ignore_eos=True)
    assert all(r["token_id"] != EOS for r in g.records)
    assert all(c["p_final"] == 0 for r in g.records for c in r["top"] if c["token_id"] == EOS)


def test_min_new_tokens_masks_eos_only_until_reached(small_model):
    for seed in range(10):
        g = run(small_model, seed=seed, min_new_tokens=8, max_new_tokens=60)
        assert len(g.records) >= 9 or g.finish_reason == "length"
        for r in g.records[:8]:
            assert r["token_id"] != EOS


def test_stop_string_cuts_text_and_reports_it(small_model):
    free = run(small_model, seed=5, max_new_tokens=60, ignore_eos=True).text
    stop = free[10:12]
    g = run(small_model, seed=5, max_new_tokens=60, ignore_eos=True, stop=[stop])
    at = free.find(stop)
    assert (g.finish_reason, g.stop_reason) == ("stop", stop)
    assert g.text == free[:at]
    kept = run(small_model, seed=5, max_new_tokens=60, ignore_eos=True, stop=[stop],
               include_stop=True)
    assert kept.text == free[: at + len(stop)]


def test_emitted_pieces_add_up_to_the_text(small_model):
    for seed in range(20):
        g = run(small_model, seed=seed, max_new_tokens=30, stop=["an", "el", "a\u0000"][: seed % 3])
        assert "".join(r["emit"] for r in g.records) == g.text


def test_greedy_is_deterministic_and_has_no_draw(small_model):
    a = run(small_model, seed=1, greedy=True, max_new_tokens=10)
    b = run(small_model, seed=99, temperature=0, max_new_tokens=10)
    assert a.text == b.text and all(r["u"] is None and r["prob"] == 1.0 for r in a.records)


def test_repetition_penalty_lowers_seen_tokens(small_model):
    g = run(small_model, prompt="a", seed=2, repetition_penalty=3.0, max_new_tokens=1)
    a_id = small_model.tokenizer.encode("a")[0]
    # bigram logits are log-probabilities (all negative): the penalty multiplies a's by 3
    z = small_model.log_probs[a_id].copy()
    z[a_id] *= 3.0
    p = np.exp(z) / np.exp(z).sum()
    assert p[a_id] < np.exp(small_model.log_probs[a_id, a_id])
    for c in g.records[0]["top"]:
        assert c["p_temp"] == pytest.approx(p[c["token_id"]], abs=1e-12)


def test_cancel_between_steps(small_model):
    g = Generation(small_model, validate({"seed": 1, "max_new_tokens": 100, "ignore_eos": True}))
    steps = iter(g)
    for _ in range(3):
        next(steps)
    g.cancel()
    assert g.finish_reason == "cancelled" and len(g.records) == 3 and list(steps) == []


def test_orders_differ_flag(small_model):
    g = run(small_model, seed=1, max_new_tokens=30, ignore_eos=True, temperature=3.0, top_p=0.5)
    assert any(r["orders_differ"] for r in g.records)
    g = run(small_model, seed=1, max_new_tokens=30, ignore_eos=True, top_k=3, temperature=3.0)
    assert not any(r["orders_differ"] for r in g.records)


def test_trace_contract(small_model):
    t = run(small_model, prompt="li", seed=4, max_new_tokens=8, stop=["zz"]).trace()
    assert set(t) >= {"settings", "prompt", "text", "finish_reason", "stop_reason", "steps"}
    assert t["settings"]["seed"] == 4 and t["settings"]["stop"] == ["zz"]
    step = t["steps"][0]
    assert set(step) >= {"token_id", "token_text", "prob", "u", "entropy", "top"}
    assert set(step["top"][0]) >= {"token_id", "token_text", "p_raw", "p_temp", "kept", "p_final"}
    assert step["phase"] == "prefill" and t["steps"][1]["phase"] == "decode"
