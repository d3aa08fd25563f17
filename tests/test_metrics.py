"""Measures of generated text against hand-computed values, and the temperature experiment:
same seeds across temperatures, reproducible, bounded, every bad input named."""

import dataclasses
import json
import math
import re

import numpy as np
import pytest
from decodelab.core.loops.generate import Generation
from decodelab.core.library import Library
from decodelab.core.rules.settings import validate
from decodelab.core.tokens.tokenizer import EOS
from decodelab.errors import FieldErrors
from decodelab.lesson import experiment as metrics

from tests.conftest import api, experiment

# --- measures, by hand -------------------------------------------------------------------------

def test_distinct_n_by_hand():
    assert metrics.distinct_n("abab", 1) == 0.5  # a b a b: 2 different of 4
    assert metrics.distinct_n("abab", 2) == pytest.approx(2 / 3)  # ab ba ab
    assert metrics.distinct_n("abab", 3) == 1.0  # aba bab
    assert metrics.distinct_n([5, 5, 5], 1) == pytest.approx(1 / 3)
    assert metrics.distinct_n("ab", 3) is None  # no 3-gram at all
    assert metrics.distinct_n("", 1) is None


def test_spread_is_the_entropy_of_the_pooled_tokens_in_bits():
    assert metrics.spread([1, 2, 3, 4] * 5) == pytest.approx(2.0)  # four tokens equally often
    assert metrics.spread([7] * 25) == 0.0  # one token only: no spread
    tokens = [1] * 15 + [2] * 5  # 3/4 and 1/4
    assert metrics.spread(tokens) == pytest.approx(-(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25)))
    assert metrics.spread([1, 2] * 9) is None  # 18 tokens: too few to measure
    # unlike a distinct-n ratio, a longer text of the same mix has the same spread
    assert metrics.spread([1, 2, 3, 4] * 50) == metrics.spread([1, 2, 3, 4] * 5)


def test_repeated_3gram_rate_by_hand():
    # abc bca cab abc bca cab abc: 7 runs of three, 3 different, so 4 repeat an earlier one
    assert metrics.repeated_ngram_rate("abcabcabc", 3) == pytest.approx(4 / 7)
    assert metrics.repeated_ngram_rate("abcdef", 3) == 0.0
    assert metrics.repeated_ngram_rate("aaaa", 3) == pytest.approx(1 / 2)  # aaa aaa
    assert metrics.repeated_ngram_rate("aa", 3) is None


def test_words_found_in_the_data():
    vocab = metrics.word_vocabulary(["The cat sat.", "A dog, the end"])
    assert vocab == {"the", "cat", "sat", "a", "dog", "end"}
    assert metrics.normalise_word("(Docutils),") == "docutils"
    assert metrics.normalise_word("don't") == "don't"
    assert metrics.normalise_word("--") == ""
    # the prompt's own whole words do not count; a word the generation finished does
    words = metrics.generated_words("The ca", "t sat on a mat", cut_off=False)
    assert words == ["cat", "sat", "on", "a", "mat"]
    assert metrics.known_share(words, vocab) == pytest.approx(3 / 5)
    # cut off by the budget: the last word may be unfinished, so it is left out
    assert metrics.generated_words("", "the do", cut_off=True) == ["the"]
    assert metrics.generated_words("", "the do ", cut_off=True) == ["the", "do"]
    assert metrics.known_share([], vocab) is None


def test_mean_logprob_is_the_models_own_at_t1(small_model):
    s = validate(dict(seed=2, prompt="em", max_new_tokens=12, temperature=1.7, top_k=4,
                      repetition_penalty=1.5))
    run = Generation(small_model, s).run()
    prev, logs = small_model.tokenizer.encode("em")[-1], []
    for t in run.output_ids:  # by hand: the bigram's log-probability of each chosen token
        logs.append(small_model.log_probs[prev, t])
        prev = t
    assert metrics.mean_logprob(run.records) == pytest.approx(np.mean(logs), abs=1e-12)


def test_summarise_mean_and_spread():
    s = metrics.summarise([1, 2, 3, 4, None])
    assert s["mean"] == 2.5 and s["n"] == 4 and (s["min"], s["max"]) == (1, 4)
    assert s["sd"] == pytest.approx(math.sqrt(5 / 3))  # sample standard deviation (n - 1)
    assert metrics.summarise([0.3])["sd"] == 0.0
    assert metrics.summarise([None])["mean"] is None


def test_sample_measures_of_one_run(small_model):
    run = Generation(small_model, validate(dict(seed=1, max_new_tokens=30))).run()
    m = metrics.sample_measures(run, {run.text})
    tokens = [t for t in run.output_ids if t != EOS]
    assert m["tokens"] == len(tokens) == len(run.text) and m["ids"] == tokens
    assert m["known_share"] == 1.0 and m["new_share"] == 0.0 and m["words"] == 1


# --- the experiment ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def library(artifacts):
    return Library(artifacts)


def test_single_mode_is_one_run_per_temperature_with_the_same_seed(library):
    req = {"settings": {"dataset": "names", "seed": 11, "top_k": 10, "greedy": True},
           "temperatures": "0.3, 1, 2, 0"}
    out = experiment(library, req)
    assert out["mode"] == "single" and out["samples"] == 1 and out["seeds"] == [11, 11]
    model = library.model("bigram", "names")
    for row, T in zip(out["rows"], (0.3, 1.0, 2.0, 0.0)):
        # Greedy from the settings is ignored: only T = 0 means greedy in the experiment
        s = validate({"dataset": "names", "seed": 11, "top_k": 10, "temperature": T})
        run = Generation(model, s).run()
        assert row["temperature"] == T and row["greedy"] == (T == 0)
        assert row["texts"] == [run.text]
        want = metrics.sample_measures(run, metrics.word_vocabulary(
            library.corpus("names").train))
        for key in metrics.KEYS:
            mine = metrics.spread(want["ids"]) if key == "spread" else want[key]
            assert row["measures"][key]["mean"] == mine
            assert row["measures"][key]["sd"] in (0.0, None)
    assert "unique_share" not in out["rows"][0]


def test_repeated_mode_mean_and_spread_over_the_same_seeds(library):
    req = {"settings": {"dataset": "names", "seed": 100}, "temperatures": [0.3, 2],
           "mode": "repeated", "samples": 20}
    out = experiment(library, req)
    assert out == experiment(library, req)  # reproducible
    assert out["seeds"] == [100, 119] and out["budget"] == 20 * 2 * 50
    vocab = metrics.word_vocabulary(library.corpus("names").train)
    model = library.model("bigram", "names")
    for row in out["rows"]:
        runs = [Generation(model, validate({"dataset": "names", "seed": 100 + j,
                                            "temperature": row["temperature"]})).run()
                for j in range(20)]
        texts = [r.text for r in runs]
        assert row["samples"] == 20 and row["texts"] == texts[:metrics.EXAMPLES]
        known = [metrics.sample_measures(r, vocab)["known_share"] for r in runs]
        known = [k for k in known if k is not None]
        assert row["measures"]["known_share"]["mean"] == pytest.approx(np.mean(known))
        assert row["measures"]["known_share"]["sd"] == pytest.approx(np.std(known, ddof=1))
        assert row["distinct_texts"] == len(set(texts))
        assert row["unique_share"] == sum(texts.count(t) == 1 for t in texts) / 20
        assert sum(row["finish"].values()) == 20
        pool = [t for r in runs for t in r.output_ids if t != EOS]  # every sample's tokens
        assert row["measures"]["spread"]["mean"] == pytest.approx(metrics.spread(pool))
        assert row["measures"]["spread"]["n"] == len(pool)
    low, high = out["rows"]
    # pooled, the spread means what it says even for short names: hotter is more varied
    assert high["measures"]["spread"]["mean"] > low["measures"]["spread"]["mean"]
    # the same model: a hotter temperature picks tokens the model itself finds less likely
    assert high["measures"]["mean_logprob"]["mean"] < low["measures"]["mean_logprob"]["mean"]


def test_experiment_runs_in_batches_like_the_page(library):
    req = {"settings": {"dataset": "names", "seed": 5}, "temperatures": "1, 2",
           "mode": "repeated", "samples": 10}
    exp = metrics.Experiment(library, req)
    batches = 0
    while not exp.done:
        exp.advance(0.0)  # one sample per batch
        batches += 1
    assert batches == 20 and exp.progress()["done"] == 20
    assert exp.result() == experiment(library, req)


def test_bad_experiment_requests_name_their_fields(library):
    def errors(req):
        with pytest.raises(FieldErrors) as e:
            metrics.Experiment(library, req)
        return {x.field: x.message for x in e.value.errors}

    got = errors({"settings": {"dataset": "names", "top_p": 2}, "temperatures": "0.3, hot",
                  "mode": "repeated", "samples": 1})
    assert set(got) == {"top_p", "temperatures", "samples"}
    assert got["temperatures"] == ("T values: entry 2: Temperature must be a number from 0 to "
                                   "100 (0 means greedy); got 'hot'.")
    assert "from 2 to 200" in got["samples"]
    assert "one of single, repeated" in errors({"mode": "often"})["mode"]
    assert "1 to 6 temperatures" in errors({"temperatures": "1,2,3,4,5,6,7"})["temperatures"]
    assert "1 to 6 temperatures" in errors({"temperatures": " , "})["temperatures"]
    budget = errors({"settings": {"max_new_tokens": 1000}, "temperatures": "1,2,3",
                     "mode": "repeated", "samples": 50})
    assert "at most 100,000 tokens" in budget["samples"] and "= 150,000" in budget["samples"]
    assert "never seen" in errors({"settings": {"prompt": "Q!"}})["prompt"]


def test_webapi_experiment_in_batches(artifacts):
    api("setup", {"assets": str(artifacts)})
    req = {"settings": {"dataset": "prose", "prompt": "The ", "seed": 3, "max_new_tokens": 60},
           "temperatures": "0.3, 1, 2"}
    started = api("experiment_start", req)
    assert started["ok"] and started["progress"] == {"done": 0, "total": 3, "steps": 0}
    while True:
        out = api("experiment_advance", {"budget_ms": 0})
        if out["done"]:
            break
    assert out["result"] == metrics.Experiment(Library(artifacts), req).run().result()
    text = json.dumps(out, allow_nan=False)  # plain JSON for JavaScript
    assert "Infinity" not in text
    bad = api("experiment_start", {"temperatures": "-1"})
    assert not bad["ok"] and bad["errors"][0]["field"] == "temperatures"
    assert api("experiment_start", text="nope")["errors"][0]["field"] == "request"


def test_same_settings_object_fields_are_kept(library):
    """The experiment changes the temperature, the seed and greedy; nothing else."""
    exp = metrics.Experiment(library, {"settings": {"dataset": "prose", "top_k": 7,
                                                    "stop": ["."], "min_p": 0.1},
                                       "temperatures": "0.5"})
    s = exp.settings
    assert (s.top_k, s.stop, s.min_p, s.dataset) == (7, (".",), 0.1, "prose")
    assert dataclasses.replace(s, temperature=2).top_k == 7


def test_experiment_with_the_transformer(library):
    if not library.has_model("transformer", "names"):
        pytest.skip("transformer-names.npz not built yet (python3 build.py artifacts)")
    out = experiment(library, {"settings": {"model": "transformer", "dataset": "names",
                                                    "seed": 2, "max_new_tokens": 12},
                                       "temperatures": "0.5, 1.5", "mode": "repeated",
                                       "samples": 3})
    assert [r["samples"] for r in out["rows"]] == [3, 3]
    assert out["settings"]["model"] == "transformer" and out["settings"]["cache_check"] is False


# --- every sentence of the findings, held to its numbers ---------------------------------------

NUMBER = re.compile(r"(\u2212?\d+\.\d+|\d+(?:\.\d)?%|<0\.1%|>99\.9%)")


def shown_number(key, x):
    return metrics._number(key, x)


@pytest.mark.parametrize("req", [
    {"settings": {"dataset": "names", "seed": 3}, "temperatures": "0.3, 1, 2"},
    {"settings": {"dataset": "names", "seed": 3}, "temperatures": "2, 0.3", "mode": "repeated",
     "samples": 20},
    {"settings": {"dataset": "prose", "seed": 7, "max_new_tokens": 60}, "temperatures": "0.3, 2"},
    {"settings": {"dataset": "prose", "seed": 7, "max_new_tokens": 40}, "temperatures": "1, 1"},
])
def test_every_finding_is_true_to_the_numbers(library, req):
    out = experiment(library, req)
    rows = sorted(out["rows"], key=lambda r: r["temperature"])
    lo, hi = rows[0], rows[-1]
    kinds = [f["kind"] for f in out["findings"]]
    assert kinds[0] == "same" and kinds[-1] == "closing" and len(set(kinds)) == len(kinds)
    for finding in out["findings"]:
        kind, text = finding["kind"], finding["text"]
        key = {"spread": "spread", "logprob": "mean_logprob", "known": "known_share"}.get(kind)
        if kind == "repeats":  # the rows with a number (a text under 3 tokens has none)
            shown = [shown_number("repeated_3gram", r["measures"]["repeated_3gram"]["mean"])
                     for r in rows if r["measures"]["repeated_3gram"]["mean"] is not None]
            if text.startswith("No sample"):
                assert set(shown) == {"0.00"}
                assert f"about {max(r['tokens']['mean'] for r in rows):.0f} tokens" in text
            elif shown[0] == shown[-1]:
                assert f"stays at {shown[0]} " in text, text
            else:
                assert f" {shown[0]} at " in text and f" {shown[-1]} at " in text, text
        elif key is not None and "Too few" not in text:
            a, b = lo["measures"][key]["mean"], hi["measures"][key]["mean"]
            sa, sb = shown_number(key, a), shown_number(key, b)
            if sa == sb:
                assert f"stays at {sa} " in text, text
            else:
                verb = "rises" if b > a else "falls"
                assert f"{verb} from {sa} at " in text and f" to {sb} at " in text, text
            assert "from 0% to 0%" not in text
        if kind == "spread" and "Too few" in text:
            assert any(r["measures"]["spread"]["mean"] is None for r in rows)
            assert any(r["measures"]["spread"]["n"] < metrics.MIN_POOL for r in rows)
        if kind == "texts":
            assert out["mode"] == "repeated"
            assert f"{lo['distinct_texts']} at " in text and f"{hi['distinct_texts']} at " in text
    if out["mode"] == "repeated":
        assert "texts" in kinds
    assert "repeats" in kinds


def test_change_words_never_contradict_the_numbers():
    row = lambda T: {"temperature": T, "greedy": T == 0}  # noqa: E731
    assert metrics.change("known_share", 0.0001, 0.0002, row(0.3), row(2)).startswith("stays at <0.1%")
    assert metrics.change("known_share", 0.0, 0.0001, row(0.3), row(2)).startswith("rises from 0%")
    assert metrics.change("known_share", 0.2, 0.05, row(0.3), row(2)) == \
        "falls from 20.0% at T = 0.3 to 5.0% at T = 2"
    assert metrics.change("mean_logprob", -1.75, -2.83, row(0), row(1.5)) == \
        "falls from \u22121.75 at T = 0 (greedy) to \u22122.83 at T = 1.5"
    assert metrics.change("spread", 3.351, 3.349, row(1), row(2)).startswith("stays at 3.35")
    # a middle temperature past both ends: no plain fall from the one end to the other
    assert metrics.change("known_share", 0.732, 0.234, row(0.3), row(2), [(row(1), 0.838)]) == \
        "falls from 73.2% at T = 0.3 to 23.4% at T = 2, not steadily: it is highest, 83.8%, at T = 1"
    assert metrics.change("spread", 2.0, 3.0, row(0.3), row(2), [(row(1), 1.5)]).endswith(
        "not steadily: it is lowest, 1.50, at T = 1")
    assert metrics.change("spread", 2.0, 3.0, row(0.3), row(2), [(row(1), 2.5)]) == \
        "rises from 2.00 at T = 0.3 to 3.00 at T = 2"  # in between: steady enough to say so
    assert metrics.change("spread", 2.0, 2.0, row(0.3), row(2), [(row(1), 2.9)]) == \
        "stays at 2.00 from T = 0.3 to T = 2, not steadily: it is highest, 2.90, at T = 1"
