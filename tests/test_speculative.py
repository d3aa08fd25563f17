"""Speculative decoding: greedy, the text of greedy decoding token for token; sampled, the
target's own distribution (a chi-square test at a fixed context over thousands of seeds, which a
deliberately wrong acceptance rule fails); every round's rollback leaves a cache equal to a full
recomputation."""

import numpy as np
import pytest
from decodelab.core.rules import sampling
from decodelab.core.loops.generate import Generation
from decodelab.core.rules.settings import validate
from decodelab.core.loops.speculative import final, speculate
from decodelab.core.tokens.tokenizer import EOS

from tests.test_hf import shipped


@pytest.fixture(scope="module")
def models():
    from decodelab.core.library import Library
    from tests.test_hf import ROOT

    shipped("names", "chars")  # skips when the models are not built
    lib = Library(ROOT / "artifacts")
    return lib.model("transformer", "names", "chars"), lib.model("bigram", "names", "chars")


@pytest.mark.parametrize("gamma", [1, 3, 6])
@pytest.mark.parametrize("prompt", ["", "ma", "chr"])
def test_greedy_speculation_writes_greedy_decoding_s_text(models, gamma, prompt):
    target, draft = models
    ids = target.tokenizer.encode(prompt)
    plain = Generation(target, validate({"model": "transformer", "prompt": prompt, "greedy": True,
                                         "max_new_tokens": 30, "ignore_eos": True,
                                         "cache_check": False})).run()
    spec = speculate(target, draft, ids, sampling.Rules(greedy=True), gamma, 30, ignore_eos=True)
    assert spec["ids"] == plain.output_ids
    assert spec["finish_reason"] == "length"
    assert 0 <= spec["acceptance_rate"] <= 1
    # fewer target passes than tokens once a guess is accepted
    assert spec["target_passes"] == 1 + len(spec["rounds"]) <= 1 + 30


def chi_square_p(counts: np.ndarray, p: np.ndarray) -> float:
    """The chi-square test's p-value of counts against p (cells with tiny expectation pooled)."""
    from math import exp, lgamma, log

    n = counts.sum()
    expected = n * p
    big = expected >= 5
    obs = np.append(counts[big], counts[~big].sum())
    exp_ = np.append(expected[big], expected[~big].sum())
    keep = exp_ > 0
    stat = float((((obs - exp_) ** 2)[keep] / exp_[keep]).sum())
    k = int(keep.sum()) - 1
    return upper_gamma(k / 2.0, stat / 2.0)


def upper_gamma(a: float, x: float) -> float:
    """The regularised upper incomplete gamma Q(a, x): the chi-square tail with 2a degrees of
    freedom at 2x. A series below x = a + 1, a continued fraction above (Numerical Recipes)."""
    from math import exp, lgamma, log

    if x <= 0:
        return 1.0
    front = exp(-x + a * log(x) - lgamma(a))
    if x < a + 1:
        term = total = 1.0 / a
        for i in range(1, 10_000):
            term *= x / (a + i)
            total += term
            if term < total * 1e-15:
                break
        return 1.0 - total * front
    b, c, d = x + 1 - a, 1e300, 1 / (x + 1 - a)
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return front * h


def test_the_chi_square_tail_by_known_values():
    # chi-square quantiles: P(X > 6.635) = 0.01 with 1 degree of freedom, P(X > 18.307) = 0.05
    # with 10, P(X > 3.357) = 0.5 with 4
    assert upper_gamma(0.5, 6.635 / 2) == pytest.approx(0.01, abs=1e-4)
    assert upper_gamma(5.0, 18.307 / 2) == pytest.approx(0.05, abs=1e-4)
    assert upper_gamma(2.0, 3.357 / 2) == pytest.approx(0.5, abs=1e-3)
    assert upper_gamma(10.0, 500.0) < 1e-100


def first_tokens(models, rules, accept=None, runs=4000):
    target, draft = models
    ids = target.tokenizer.encode("ma")
    kw = {} if accept is None else {"accept": accept}
    counts = np.zeros(target.tokenizer.vocab_size)
    for seed in range(runs):
        out = speculate(target, draft, ids, rules, 3, 1, seed=seed, **kw)
        counts[out["ids"][0]] += 1
    p = final(target.session().prefill(ids), rules, False, None, target.tokenizer.eos_id)
    return counts, p


@pytest.mark.parametrize("rules", [sampling.Rules(), sampling.Rules(temperature=0.7, top_k=8)],
                         ids=["T=1", "T=0.7,top-k 8"])
def test_sampled_tokens_follow_the_target_alone(models, rules):
    counts, p = first_tokens(models, rules)
    assert chi_square_p(counts, p) > 0.01
    assert counts[p == 0].sum() == 0  # nothing the target's rules removed


def test_a_wrong_acceptance_rule_fails_the_same_test(models):
    def greedy_for_the_draft(p, q, x, u):  # accept whenever the draft is at least as sure
        return q[x] >= p[x]
    counts, p = first_tokens(models, sampling.Rules(), accept=greedy_for_the_draft)
    assert chi_square_p(counts, p) < 0.01


def test_each_round_records_its_check_and_rolls_the_cache_back(models):
    target, draft = models
    ids = target.tokenizer.encode("an")
    out = speculate(target, draft, ids, sampling.Rules(temperature=1.2), 4, 40, seed=7,
                    ignore_eos=True, check=True)
    assert max(r["cache_diff"] for r in out["rounds"]) < 1e-9  # every pass after a rollback
    assert len(out["ids"]) == 40
    assert any(r["accepted"] < r["proposed"] for r in out["rounds"])  # some guesses rejected
    position = 1 + len(ids)
    for r in out["rounds"]:
        before, checked, after = r["cache"]
        assert before == position and after <= checked
        # one pass read the guesses, and (after the first round) the last round's token first
        assert checked - before == r["proposed"] + (r is not out["rounds"][0])
        for t in r["tokens"]:
            assert t["accepted"] == (t["u"] < t["p"] / t["q"])
        position = after  # the next pass starts there, with the round's last token
    # the rolled-back cache is a real one: continue it and compare with a full recomputation
    session = target.session()
    session.prefill(ids)
    session.score(out["ids"][:-1])
    logits = session.score(out["ids"][-1:])[-1]
    full = target.all_logits([EOS] + ids + out["ids"], np.float64)[-1]
    assert np.abs(logits - full).max() < 1e-9


def test_bad_pairs_and_sizes_are_refused(models):
    target, _ = models
    from decodelab.core.library import Library
    from tests.test_hf import ROOT

    other = Library(ROOT / "artifacts").model("bigram", "prose", "chars")
    with pytest.raises(ValueError, match="vocabularies differ"):
        speculate(target, other, [], sampling.Rules(), 3, 10)
    with pytest.raises(ValueError, match="do not fit"):
        speculate(target, models[1], [], sampling.Rules(), 8, 60)


def test_the_ngram_draft_looks_up_the_latest_earlier_tail():
    from decodelab.core.loops.speculative import lookup

    text = [5, 6, 7, 8, 1, 5, 6, 9, 2, 5, 6]
    assert lookup(text, 3) == [9, 2, 5]  # "5 6" last came before "9 2", the latest match
    assert lookup(text, 3, longest=1) == [9, 2, 5]  # "6" likewise
    assert lookup([1, 2, 3, 1, 2, 3, 4, 2, 3], 2) == [4, 2]  # no earlier "4 2 3"; "2 3" then
    assert lookup([1, 2, 3], 4) == []  # nothing repeats
    assert lookup([4, 4], 3) == [4]  # a token's own run


@pytest.mark.parametrize("prompt", ["ma", "annaannaann"])
def test_greedy_speculation_with_the_ngram_draft_writes_greedy_decoding_s_text(models, prompt):
    target, _ = models
    ids = target.tokenizer.encode(prompt)
    plain = Generation(target, validate({"model": "transformer", "prompt": prompt, "greedy": True,
                                         "max_new_tokens": 30, "ignore_eos": True,
                                         "cache_check": False})).run()
    spec = speculate(target, "ngram", ids, sampling.Rules(greedy=True), 4, 30, ignore_eos=True,
                     check=True)
    assert spec["ids"] == plain.output_ids
    assert max(r.get("cache_diff", 0) for r in spec["rounds"]) < 1e-9  # every rollback
    proposed = sum(r["proposed"] for r in spec["rounds"])
    assert proposed > 0 and spec["target_passes"] < 1 + 30  # it guessed, and saved passes


def test_sampled_tokens_with_the_ngram_draft_follow_the_target_alone(models):
    """A one-hot guess is accepted with probability p(x), and a rejection draws from p without
    x: the first token's distribution is the target's (the prompt "mama" proposes "m" after
    "a", which the rules may or may not keep)."""
    target, _ = models
    ids = target.tokenizer.encode("mama")
    rules = sampling.Rules(temperature=1.0)
    counts = np.zeros(target.tokenizer.vocab_size)
    proposed = 0
    for seed in range(3000):
        out = speculate(target, "ngram", ids, rules, 2, 1, seed=seed)
        counts[out["ids"][0]] += 1
        proposed += out["rounds"][0]["proposed"]
    assert proposed == 3000  # every run guessed: "a" was followed by "m" before
    p = final(target.session().prefill(ids), rules, False, None, target.tokenizer.eos_id)
    assert chi_square_p(counts, p) > 0.01
