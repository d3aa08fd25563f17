"""Beam search held to transformers' generate(num_beams=N, do_sample=False) on the exported
model: the same beams in the same order, scores within 1e-5, for random prompts and every option
(beams, length penalty, each early_stopping, no_repeat_ngram_size, num_return_sequences); the
cache rows reordered to follow the beams, checked against a full recomputation of every beam."""

import random
from pathlib import Path

import numpy as np
import pytest

import torch
from decodelab.core.loops.beam import BeamRules, banned_by_ngrams, beam_search
from decodelab.core.library import Library
from decodelab.core.tokens.tokenizer import EOS

from tests.test_hf import load_hf, random_model, shipped

ROOT = Path(__file__).resolve().parents[1]


def hf_beams(tm, prompt_ids, rules: BeamRules):
    ids = [EOS] + list(prompt_ids)
    with torch.no_grad():
        out = tm.generate(torch.tensor([ids]), do_sample=False, num_beams=rules.num_beams,
                          max_new_tokens=rules.max_new_tokens,
                          length_penalty=rules.length_penalty,
                          early_stopping=rules.early_stopping,
                          no_repeat_ngram_size=rules.no_repeat_ngram_size,
                          num_return_sequences=rules.num_return_sequences,
                          eos_token_id=EOS, pad_token_id=EOS,
                          return_dict_in_generate=True, output_scores=True)
    beams = []
    for row, score in zip(out.sequences[:, len(ids):].tolist(), out.sequences_scores.tolist()):
        if EOS in row:  # what follows the end is padding
            row = row[:row.index(EOS) + 1]
        beams.append((row, score))
    return beams


def assert_same(ours, theirs):
    assert [b["ids"] for b in ours["beams"]] == [ids for ids, _ in theirs], (ours["beams"], theirs)
    for b, (_, score) in zip(ours["beams"], theirs):
        assert b["score"] == pytest.approx(score, abs=1e-5)


RULES = [BeamRules(num_beams=n, max_new_tokens=m, length_penalty=lp, early_stopping=es,
                   no_repeat_ngram_size=ng, num_return_sequences=r)
         for n, m, lp, es, ng, r in [
             (2, 12, 1.0, False, 0, 1), (4, 16, 1.0, True, 0, 4), (5, 16, 0.0, "never", 0, 3),
             (3, 14, 2.0, "never", 2, 2), (4, 20, -0.5, False, 3, 2), (6, 10, 1.0, True, 2, 6),
             (8, 18, 1.5, False, 0, 8), (16, 12, 1.0, "never", 3, 5)]]


@pytest.mark.reference
@pytest.mark.parametrize("rules", RULES, ids=lambda r: f"n{r.num_beams}-lp{r.length_penalty}-"
                         f"es{r.early_stopping}-ng{r.no_repeat_ngram_size}-r{r.num_return_sequences}")
def test_beams_equal_transformers_on_the_names_model(tmp_path, rules):
    model = shipped("names", "chars")
    tm = load_hf(model, tmp_path / "m")
    rng = random.Random(rules.num_beams * 31 + rules.max_new_tokens)
    for _ in range(3):
        prompt = model.tokenizer.encode("".join(rng.choice("abcdeilmnorst") for _ in range(rng.randint(0, 3))))
        ours = beam_search(model, prompt, rules)
        assert_same(ours, hf_beams(tm, prompt, rules))


@pytest.mark.reference
@pytest.mark.parametrize("rules", RULES[:4], ids=lambda r: f"n{r.num_beams}-es{r.early_stopping}")
def test_beams_equal_transformers_on_a_random_model(tmp_path, rules):
    """A model that rarely ends: the beams run to the budget, and ties are unlikely."""
    model = random_model(seed=rules.num_beams)
    tm = load_hf(model, tmp_path / "m")
    rng = np.random.default_rng(rules.num_beams)
    prompt = rng.integers(1, model.cfg.vocab_size, 4).tolist()
    assert_same(beam_search(model, prompt, rules), hf_beams(tm, prompt, rules))


@pytest.mark.reference
def test_beams_equal_transformers_on_bpe_prose(tmp_path):
    model = shipped("prose", "bpe")
    tm = load_hf(model, tmp_path / "m")
    rules = BeamRules(num_beams=4, max_new_tokens=16, no_repeat_ngram_size=3,
                      num_return_sequences=2)
    prompt = model.tokenizer.encode("The old man")
    assert_same(beam_search(model, prompt, rules), hf_beams(tm, prompt, rules))


def test_the_reordered_cache_equals_a_full_recomputation_of_every_beam():
    model = shipped("names", "chars")
    out = beam_search(model, model.tokenizer.encode("ma"),
                      BeamRules(num_beams=5, max_new_tokens=12), check=True)
    diffs = [s["cache_diff"] for s in out["steps"] if "cache_diff" in s]
    assert diffs and max(diffs) < 1e-9
    # beams that grew from one parent took copies of its row: they often do
    assert any(len({k["from"] for k in s["kept"]}) < len(s["kept"]) for s in out["steps"])


def test_the_score_is_the_sum_of_log_probabilities_over_length_to_the_penalty():
    """Each returned beam recomputed independently: teacher-forced through the model."""
    model = shipped("names", "chars")
    prompt = model.tokenizer.encode("jo")
    for lp in (1.0, 0.0, 2.0):
        out = beam_search(model, prompt, BeamRules(num_beams=3, max_new_tokens=10,
                                                   length_penalty=lp, num_return_sequences=3))
        for b in out["beams"]:
            seq = [EOS] + prompt + b["ids"]
            logits = model.all_logits(seq, np.float64)  # (T, V)
            z = logits - logits.max(axis=1, keepdims=True)
            logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
            total = sum(logp[len(prompt) + i, t] for i, t in enumerate(b["ids"]))
            assert b["score"] == pytest.approx(total / len(b["ids"]) ** lp, abs=1e-9)
        scores = [b["score"] for b in out["beams"]]
        assert scores == sorted(scores, reverse=True)


def test_ngram_bans_by_hand():
    assert banned_by_ngrams([1, 2, 3, 1, 2], 3) == [3]  # "1 2" was followed by 3
    assert banned_by_ngrams([1, 2, 3, 1, 2], 2) == [3]  # "2" was followed by 3
    assert sorted(banned_by_ngrams([5, 5, 6], 1)) == [5, 6]
    assert banned_by_ngrams([1, 2], 4) == []  # too short to repeat a 4-gram


def test_a_search_that_does_not_fit_the_window_is_refused():
    model = shipped("names", "chars")
    with pytest.raises(ValueError, match="window holds 64"):
        beam_search(model, [], BeamRules(num_beams=2, max_new_tokens=80))
