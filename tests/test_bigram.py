"""The count-based bigram model against counts done by hand."""

import math
from collections import Counter

import numpy as np
import pytest
from decodelab.core.models.bigram import BigramModel
from decodelab.core.tokens.corpus import Corpus


def test_counts_and_smoothing_by_hand():
    corpus = Corpus("t", ["ab", "b", "aab"], val_fraction=0)
    m = BigramModel.fit(corpus, alpha=0.5)
    tok = m.tokenizer  # ids: <eos>=0, a=1, b=2
    pairs = Counter()
    for s in ["ab", "b", "aab"]:
        ids = [0] + [tok.encode(c)[0] for c in s] + [0]
        pairs.update(zip(ids, ids[1:]))
    for (i, j), n in pairs.items():
        assert m.counts[i, j] == n
    assert m.counts.sum() == sum(pairs.values())
    row = m.counts[1] + 0.5
    np.testing.assert_allclose(np.exp(m.log_probs[1]), row / row.sum())
    np.testing.assert_allclose(np.exp(m.log_probs).sum(axis=1), 1.0)


def test_nll_by_hand():
    m = BigramModel.fit(Corpus("t", ["ab", "ba", "aa"], val_fraction=0))
    lp = m.log_probs
    ids = [0, 1, 2, 0]  # "ab"
    expected = -sum(lp[a, b] for a, b in zip(ids, ids[1:])) / 3
    assert m.nll(["ab"]) == pytest.approx(expected)


def test_save_load_round_trip(tmp_path, small_model):
    small_model.save(tmp_path / "m.npz")
    m = BigramModel.load(tmp_path / "m.npz")
    assert m.tokenizer.chars == small_model.tokenizer.chars
    np.testing.assert_array_equal(m.log_probs, small_model.log_probs)
    assert BigramModel.load((tmp_path / "m.npz").read_bytes()).counts.sum() == m.counts.sum()


def test_the_held_out_loss_is_measured_when_counted_and_saved_with_the_model(tmp_path, small_model):
    from decodelab.entry.webapi.catalog import held_out_nll

    corpus = Corpus("small", ["anna", "bob", "ada", "eve", "otto", "abba", "ida", "ava"] * 3)
    m = BigramModel.fit(corpus)
    assert corpus.val and m.val_nll == m.nll(corpus.val)
    m.save(tmp_path / "m.npz")
    assert BigramModel.load(tmp_path / "m.npz").val_nll == m.val_nll
    # a corpus with nothing held out has nothing to measure
    assert BigramModel.fit(Corpus("t", ["ab", "b"], val_fraction=0)).val_nll is None
    # a model saved without it (an older file) is scored when asked
    with np.load(tmp_path / "m.npz") as z:
        np.savez(tmp_path / "old.npz", **{k: z[k] for k in z.files if k != "val_nll"})
    old = BigramModel.load(tmp_path / "old.npz")
    assert old.val_nll is None and held_out_nll(old, corpus) == pytest.approx(m.val_nll, rel=1e-12)


def test_shipped_bigrams_carry_their_held_out_loss(artifacts):
    from decodelab.core.library import Library

    lib = Library(artifacts)
    for dataset, tokenizer in (("names", "chars"), ("prose", "chars"), ("prose", "bpe")):
        model, corpus = lib.model("bigram", dataset, tokenizer), lib.corpus(dataset)
        # the number saved at build time is the page's corpus scored again, in full
        assert model.val_nll == pytest.approx(model.nll(corpus.val), rel=1e-12), dataset


def test_logits_rows_cannot_be_edited_by_a_decoder(small_model):
    logits = small_model.session().prefill([])
    with pytest.raises(ValueError):
        logits[0] = 0.0


def test_real_corpora_beat_uniform_guessing(artifacts):
    from decodelab.core.library import Library

    lib = Library(artifacts)
    for dataset in ("names", "prose"):
        corpus, model = lib.corpus(dataset), lib.model("bigram", dataset)
        nll = model.nll(corpus.val)
        assert nll < math.log(model.tokenizer.vocab_size) - 0.5, dataset
        assert abs(nll - model.nll(corpus.train)) < 0.2  # a bigram barely overfits
