"""One step taken apart: the stages against the worked numbers, against a plain reimplementation
on random logits, and a run's every step recomputed from its model (Replay) against its records."""

import json

import numpy as np
import pytest
from decodelab.core.rules import sampling
from decodelab.core.loops.generate import Generation
from decodelab.core.loops.replay import Replay
from decodelab.core.rules.settings import validate
from decodelab.errors import FieldError, FieldErrors
from decodelab.fields import check
from decodelab.lesson import pipeline
from decodelab.lesson.playground import explain_values

from tests.conftest import api, run_to_end


def stages_of(out, order=None):
    pipe = out["pipelines"][order or out["order"]]
    return {s["kind"]: s for s in pipe["stages"]}, pipe["final"]


def approx(values, expected, tol=5e-4):
    np.testing.assert_allclose(values, expected, atol=tol)


# --- worked numbers --------------------------------------------------------------------------

def test_two_logits_at_three_temperatures():
    out = explain_values({"logits": "2, 1", "sweep": "1, 0.5, 2"})
    assert [r["token_text"] for r in out["rows"]] == ["A", "B"]
    approx([s["p"] for s in out["sweep"]], [[0.731, 0.269], [0.881, 0.119], [0.622, 0.378]])
    stages, final = stages_of(explain_values({"logits": "2,1", "temperature": 0.5}))
    approx(stages["softmax"]["p"], [0.731, 0.269])  # the model's own, at T = 1
    approx(stages["temperature"]["p"], [0.881, 0.119])
    assert out["logits"] == [2.0, 1.0] and out["adjusted"] is None


def test_top_p_cumulative_mass_threshold_and_crossing_token():
    out = explain_values({"probs": "0.6, 0.25, 0.15", "top_p": 0.8})
    stages, final = stages_of(out)
    top_p = stages["top_p"]
    approx(top_p["cum"], [0.6, 0.85, 1.0], 1e-12)
    assert top_p["top_p"] == 0.8 and top_p["crossing"] == 1 and top_p["crossing_rank"] == 2
    assert top_p["reached"] == pytest.approx(0.85)
    assert top_p["removed"] == [False, False, True] and top_p["cut_after"] == 1
    approx(final["p"], [0.706, 0.294, 0])
    assert final["kept"] == [True, True, False] and final["kept_count"] == 2
    assert not out["orders_differ"]  # at T = 1 the orders are the same thing


def test_both_orders_at_t2_keep_different_sets():
    z = np.log([0.6, 0.25, 0.15]).tolist()
    out = explain_values({"logits": z, "temperature": 2, "top_p": 0.8})
    assert out["orders_differ"]
    tf, tf_final = stages_of(out, "temperature-first")
    ff, ff_final = stages_of(out, "filter-first")
    approx(tf_final["p"], [0.466, 0.301, 0.233])
    approx(ff_final["p"], [0.608, 0.392, 0])
    # temperature-first: temperature, then the filter sees the flatter distribution
    assert [s["kind"] for s in out["pipelines"]["temperature-first"]["stages"]] == \
        ["softmax", "temperature", "top_p"]
    approx(tf["top_p"]["cum"], [0.466, 0.767, 1.0])
    assert tf["top_p"]["removed_count"] == 0
    # filter-first: the filter on T = 1, temperature last on the two that are left
    assert [s["kind"] for s in out["pipelines"]["filter-first"]["stages"]] == \
        ["softmax", "top_p", "temperature"]
    approx(ff["top_p"]["cum"], [0.6, 0.85, 1.0])
    assert ff["temperature"]["last"] is True


def test_top_k_then_top_p_renormalises_in_between():
    stages, final = stages_of(explain_values(
        {"probs": [0.4, 0.3, 0.2, 0.1], "top_k": 3, "top_p": 0.75}))
    assert stages["top_k"]["kth"] == pytest.approx(0.2) and stages["top_k"]["k"] == 3
    assert stages["top_k"]["removed"] == [False, False, False, True]
    approx(stages["top_k"]["p"], [0.444, 0.333, 0.222, 0])
    approx(stages["top_p"]["p_in"], [0.444, 0.333, 0.222, 0])  # top-p sees the renormalised
    approx(stages["top_p"]["cum"], [0.444, 0.778, 1.0, 1.0])
    assert stages["top_p"]["removed"] == [False, False, True, False]  # D was already gone
    approx(final["p"], [0.571, 0.429, 0, 0])


def test_top_k_keeps_ties_with_the_kth():
    stages, final = stages_of(explain_values({"logits": "1,1,1,0", "top_k": 2}))
    approx(final["p"], [1 / 3, 1 / 3, 1 / 3, 0], 1e-12)
    assert stages["top_k"]["removed_count"] == 1


def test_min_p_cutoff():
    stages, final = stages_of(explain_values(
        {"probs": [0.5, 0.3, 0.15, 0.05], "min_p": 0.2}))
    assert stages["min_p"]["cutoff"] == pytest.approx(0.1)
    assert stages["min_p"]["p_max"] == pytest.approx(0.5)
    approx(final["p"], [0.526, 0.316, 0.158, 0])


def test_min_p_in_both_orders():
    out = explain_values({"logits": np.log([0.6, 0.25, 0.1, 0.05]).tolist(),
                                    "temperature": 2, "min_p": 0.3})
    approx(stages_of(out, "temperature-first")[1]["p"], [0.487, 0.314, 0.199, 0])
    approx(stages_of(out, "filter-first")[1]["p"], [0.608, 0.392, 0, 0])
    assert out["orders_differ"]


def test_the_draw_lands_in_the_chosen_tokens_interval():
    out = explain_values({"probs": "0.6,0.25,0.15", "top_p": 0.8, "u": 0.75})
    draw = out["draw"]
    assert draw["token_text"] == "B" and out["token_text"] == "B"
    assert draw["lo"] <= 0.75 < draw["hi"]
    approx([draw["lo"], draw["hi"]], [0.706, 1.0])
    assert [(s["token_text"], round(s["lo"], 3), round(s["hi"], 3)) for s in draw["segments"]] \
        == [("A", 0.0, 0.706), ("B", 0.706, 1.0)]  # kept tokens only, in id order
    assert explain_values({"probs": "0.6,0.25,0.15", "u": ""})["draw"] is None


def test_greedy_has_one_pipeline_and_no_draw():
    for req in ({"logits": "1, 3, 3", "greedy": True}, {"logits": "1, 3, 3", "temperature": 0}):
        out = explain_values({**req, "u": 0.9})
        assert out["greedy"] and out["draw"] is None and list(out["pipelines"]) == ["temperature-first"]
        stages, final = stages_of(out)
        assert list(stages) == ["softmax", "greedy"]
        assert out["token_text"] == "B"  # a tie goes to the lowest id
        assert final["p"] == [1.0, 0.0, 0.0]  # rows: B, C (tie, by id), A


# --- the stages against a plain re-implementation of the decided rules ------------------------

def reference(z, temperature, top_k, top_p, min_p, order):
    """The decided semantics written again in plain Python, one rule at a time, for comparison:
    returns (kept, final probabilities)."""
    import math

    def soft(values, T):
        finite = [v / T for v in values if v != -math.inf]
        top = max(finite)
        e = [0.0 if v == -math.inf else math.exp(v / T - top) for v in values]
        return [x / sum(e) for x in e]

    def renorm(p, keep):
        total = sum(x for x, k in zip(p, keep) if k)
        return [x / total if k else 0.0 for x, k in zip(p, keep)]

    def filters(p):
        keep = [True] * len(p)
        if top_k:
            kth = sorted(p, reverse=True)[min(top_k, len(p)) - 1]
            keep = [k and x >= kth for k, x in zip(keep, p)]
            p = renorm(p, keep)
        if top_p < 1:
            ranked = sorted(range(len(p)), key=lambda i: (-p[i], i))
            total, chosen = 0.0, set()
            for i in ranked:
                chosen.add(i)
                total += p[i]
                if total >= top_p - sampling.TOP_P_SLACK:
                    break
            keep = [k and i in chosen for i, k in enumerate(keep)]
            p = renorm(p, keep)
        if min_p > 0:
            cutoff = min_p * max(p)
            keep = [k and x >= cutoff for k, x in zip(keep, p)]
            p = renorm(p, keep)
        return keep, p

    if order == "temperature-first":
        keep, p = filters(soft(z, temperature))
    else:
        keep, _ = filters(soft(z, 1.0))
        p = renorm(soft(z, temperature), keep)
    return [k and x > 0 for k, x in zip(keep, p)], p


def test_decide_matches_a_plain_reimplementation_stage_by_stage():
    rng = np.random.default_rng(0)
    for trial in range(400):
        V = int(rng.integers(4, 40))
        z = rng.normal(0, rng.uniform(0.2, 4), V)
        if trial % 5 == 0:
            z[0] = -np.inf  # a blocked EOS
        if trial % 7 == 0:
            z[1:3] = z[3]  # ties
        opts = dict(temperature=float(rng.choice([0.05, 0.3, 1.0, 1.7, 5.0])),
                    top_k=int(rng.choice([0, 1, 2, 5, 50])),
                    top_p=float(rng.choice([1.0, 0.3, 0.8, 0.95])),
                    min_p=float(rng.choice([0.0, 0.05, 0.3])))
        for order in sampling.ORDERS:
            d = sampling.decide(z, sampling.Rules(order=order, **opts))
            want_kept, want_p = reference(z.tolist(), order=order, **opts)
            assert d.kept.tolist() == want_kept, (trial, order, opts)
            np.testing.assert_allclose(d.p_final, want_p, atol=1e-12)
            previous = np.ones(V, dtype=bool)
            for stage in d.stages:
                assert stage.p.sum() == pytest.approx(1.0)
                assert not (stage.kept & ~previous).any()  # a stage only ever removes
                if stage.removed is not None:
                    assert np.array_equal(stage.removed, previous & ~stage.kept)
                previous = stage.kept
            if d.stages:
                np.testing.assert_array_equal(d.stages[-1].p, d.p_final)


def test_cut_is_a_line_between_rows():
    out = explain_values({"logits": list(range(20)), "top_k": 5, "top_p": 0.9})
    stages, _ = stages_of(out)
    k = stages["top_k"]
    assert k["cut_after"] == 4 and k["kept"][:5] == [True] * 5 and not any(k["kept"][5:])
    assert stages["top_p"]["cut_after"] == stages["top_p"]["crossing_rank"] - 1


def test_rows_are_the_likeliest_plus_the_chosen_one():
    z = np.linspace(3, 0, 30)
    out = pipeline.explain(sampling.decide(z, sampling.Rules(temperature=5)), str, u=0.999,
                           top_n=5)
    assert [r["token_id"] for r in out["rows"][:5]] == [0, 1, 2, 3, 4]
    assert out["rows"][-1]["token_id"] == out["token_id"] == 29  # appended
    pipe = out["pipelines"]["temperature-first"]
    assert pipe["final"]["rest_p"] + sum(pipe["final"]["p"]) == pytest.approx(1.0)


# --- a run's steps, recomputed -----------------------------------------------------------------

RUNS = [
    dict(seed=1, max_new_tokens=30, temperature=0.7, top_k=5),
    dict(seed=2, max_new_tokens=30, temperature=2, top_p=0.8, order="filter-first"),
    dict(seed=3, prompt="em", max_new_tokens=25, repetition_penalty=1.8, min_p=0.1,
         min_new_tokens=4),
    dict(seed=4, max_new_tokens=20, ignore_eos=True, greedy=True),
    dict(seed=5, max_new_tokens=40, ignore_eos=True, temperature=1.4, top_p=0.9, top_k=8),
]


@pytest.mark.parametrize("raw", RUNS)
def test_replay_recomputes_every_step_of_a_run(small_model, raw):
    run = Generation(small_model, validate(raw)).run()
    replay = Replay(run, reuse_last=False)  # the last step recomputed too, not the run's own
    for i in reversed(range(len(run.records))):  # any order: logits are computed up to i once
        rec = run.records[i]
        out = pipeline.explain_step(run, replay, i, top_n=30)
        assert out["matches_record"] and out["token_id"] == rec["token_id"]
        assert out["prob"] == pytest.approx(rec["prob"], abs=1e-12)
        assert out["phase"] == rec["phase"] and out["step"] == i
        assert out["orders_differ"] == rec["orders_differ"]
        final = dict(zip([r["token_id"] for r in out["rows"]],
                         out["pipelines"][out["order"]]["final"]["p"]))
        for c in rec["top"]:
            assert final[c["token_id"]] == pytest.approx(c["p_final"], abs=1e-12)
        if rec["u"] is not None:
            assert out["draw"]["u"] == rec["u"]
            assert out["draw"]["lo"] == pytest.approx(rec["cdf_before"])
            assert out["draw"]["lo"] <= rec["u"] < out["draw"]["hi"]
        assert out["eos_blocked"] == (raw.get("ignore_eos", False) or
                                      i < raw.get("min_new_tokens", 0))
    assert len(replay.logits) == len(run.records)
    # the page's step view of the last step takes the run's own decision: the same view
    last = len(run.records) - 1
    assert pipeline.explain_step(run, Replay(run), last, top_n=30) == \
        pipeline.explain_step(run, replay, last, top_n=30)


def test_penalised_logits_are_shown_next_to_the_models(small_model):
    run = Generation(small_model, validate(dict(seed=3, prompt="em", max_new_tokens=8,
                                                repetition_penalty=2.0, ignore_eos=True))).run()
    out = pipeline.explain_step(run, Replay(run), 3)
    assert out["adjusted"] is not None and out["penalty"] == 2.0
    by_id = {r["token_id"]: j for j, r in enumerate(out["rows"])}
    eos = by_id.get(0)
    if eos is not None:
        assert out["adjusted"][eos] is None  # a blocked EOS is -inf: null in JSON
    json.dumps(out, allow_nan=False)  # plain JSON: no NaN or Infinity


def test_webapi_explain_step_on_the_real_models(artifacts):
    api("setup", {"assets": str(artifacts)})
    steps = run_to_end({"dataset": "prose", "prompt": "The ", "seed": 9, "temperature": 1.5,
                        "top_k": 20, "top_p": 0.9, "max_new_tokens": 40,
                        "repetition_penalty": 1.2})["steps"]
    for i in (0, len(steps) // 2, len(steps) - 1):
        out = api("explain_step", {"step": i, "top_n": 15})
        assert out["ok"] and out["matches_record"] and out["token_id"] == steps[i]["token_id"]
        assert len(out["rows"]) in (15, 16)
    bad = api("explain_step", {"step": len(steps)})
    assert not bad["ok"] and bad["errors"][0]["field"] == "step"
    assert f"from 0 to {len(steps) - 1}" in bad["errors"][0]["message"]
    bad = api("explain_step", {"step": 0, "top_n": 0})
    assert bad["errors"][0]["field"] == "top_n" and "1 to 100" in bad["errors"][0]["message"]
    assert api("explain_step", text="[1]")["errors"][0]["field"] == "request"


def test_replay_of_a_transformer_run(artifacts):
    from decodelab.core.library import Library

    library = Library(artifacts)
    if not library.has_model("transformer", "names"):
        pytest.skip("transformer-names.npz not built yet (python3 build.py artifacts)")
    model = library.model("transformer", "names")
    run = Generation(model, validate(dict(model="transformer", seed=4, max_new_tokens=15,
                                          temperature=0.9, top_k=6, cache_check=False))).run()
    replay = Replay(run)
    for i in range(len(run.records)):
        assert pipeline.explain_step(run, replay, i)["matches_record"]


# --- bad input is named ------------------------------------------------------------------------

def test_bad_playground_input_names_every_field():
    with pytest.raises(FieldErrors) as e:
        explain_values({"logits": "2, x", "top_p": 1.5, "top_k": -1, "u": 1,
                                  "sweep": "0.5, -1", "order": "sideways"})
    by_field = {x.field: x.message for x in e.value.errors}
    assert set(by_field) == {"logits", "top_p", "top_k", "u", "sweep", "order"}
    assert "entry 2 is not a number" in by_field["logits"]
    assert "Top-p must be a number greater than 0 and at most 1" in by_field["top_p"]
    assert "from 0 up to (not including) 1" in by_field["u"]
    assert by_field["sweep"].startswith("Compare temperatures: entry 2: Temperature must be")
    assert "temperature-first, filter-first" in by_field["order"]
    with pytest.raises(FieldErrors) as e:
        explain_values({"probs": "0.5, -0.5"})
    assert e.value.errors[0].field == "probs"
    with pytest.raises(FieldErrors) as e:
        explain_values({})
    assert e.value.errors[0].field == "logits"


def test_bad_step_numbers(artifacts):
    for value, words in ((5, "from 0 to 4"), (-1, "from 0 to 4"), (1.5, "got 1.5"),
                         ("x", "got 'x'"), (True, "got True"), (None, "got nothing")):
        with pytest.raises(FieldError) as e:
            check("step", value, max=4)
        assert e.value.field == "step" and words in e.value.message
    assert check("step", "3", max=4) == 3
    api("setup", {"assets": str(artifacts)})
    out = api("explain_step", {"step": 0})
    assert out["errors"][0]["field"] == "step"
    assert "generate some text first" in out["errors"][0]["message"]
