"""Training: the schedule, AdamW, seeded batches, a tiny model that learns, the artifact cache."""

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from decodelab.core.models import train
from decodelab.core.tokens.corpus import Corpus
from decodelab.core.models.layers import Config
from decodelab.core.tokens.tokenizer import EOS, CharTokenizer
from decodelab.core.models.transformer import TransformerModel

from tests.conftest import NAMES

TINY_TRAIN = train.TrainConfig(steps=80, batch_size=8, block_size=16, lr=1e-2, min_lr=1e-3,
                               warmup=5, eval_every=20, eval_rows=8)


@pytest.fixture(scope="module")
def corpus():
    return Corpus("tiny", NAMES * 4)


def tiny_config(corpus):
    return Config(vocab_size=len(corpus.chars) + 1, context_size=16, n_layer=1, n_embd=16,
                  n_head=2, n_kv_head=1)


def test_learning_rate_warms_up_then_follows_a_cosine_to_the_floor():
    tc = train.TrainConfig(steps=100, lr=1.0, min_lr=0.1, warmup=10)
    lrs = [train.lr_at(s, tc) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert lrs[-1] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:]))  # never rises after warmup
    assert train.lr_at(10 + 45, tc) == pytest.approx(0.55, abs=0.02)  # halfway down


def test_adamw_decays_matrices_only_and_takes_lr_sized_first_steps():
    tc = train.TrainConfig(weight_decay=0.5)
    params = {"w": np.ones((2, 2)), "g": np.ones(2)}
    opt = train.AdamW(params, tc)
    opt.step(params, {"w": np.zeros((2, 2)), "g": np.zeros(2)}, lr=0.1)
    assert params["w"] == pytest.approx(0.95) and params["g"] == pytest.approx(1.0)
    params = {"g": np.array([0.0, 0.0])}
    opt = train.AdamW(params, tc)
    opt.step(params, {"g": np.array([3.0, -1e-3])}, lr=0.01)
    np.testing.assert_allclose(params["g"], [-0.01, 0.01], rtol=1e-3)  # Adam: sign * lr


def test_adamw_minimises_a_quadratic():
    params = {"x": np.array([3.0, -2.0])}
    opt = train.AdamW(params, train.TrainConfig(weight_decay=0.0))
    for _ in range(500):
        opt.step(params, {"x": 2 * params["x"]}, lr=0.05)
    assert np.abs(params["x"]).max() < 0.05


def test_gradient_clipping_scales_to_the_global_norm():
    grads = {"a": np.array([3.0]), "b": np.array([4.0])}
    assert train.clip_gradients(grads, 1.0) == pytest.approx(5.0)
    assert grads["a"][0] == pytest.approx(0.6) and grads["b"][0] == pytest.approx(0.8)


def test_stream_and_batches_are_seeded_and_shifted_by_one():
    tok = CharTokenizer("ab")
    stream = train.token_stream(["ab", "b"], tok)
    assert stream.tolist() == [EOS, 1, 2, EOS, 2, EOS]
    big = train.token_stream(NAMES, CharTokenizer("".join(NAMES)))
    x1, y1 = train.sample_batch(big, np.random.default_rng(4), 5, 7)
    x2, y2 = train.sample_batch(big, np.random.default_rng(4), 5, 7)
    assert x1.shape == (5, 7) and np.array_equal(x1, x2) and np.array_equal(y1, y2)
    assert np.array_equal(x1[:, 1:], y1[:, :-1])


def test_a_tiny_model_learns_and_records_its_curve(corpus):
    model = train.train_model(corpus, tiny_config(corpus), TINY_TRAIN, seed=3)
    curve = model.curve
    assert curve["step"] == [20, 40, 60, 80]
    assert curve["train"][-1] < curve["train"][0] - 0.3
    assert curve["val"][-1] < curve["val"][0]
    assert curve["val"][-1] < math.log(model.tokenizer.vocab_size) - 0.5  # beats uniform
    again = train.train_model(corpus, tiny_config(corpus), TINY_TRAIN, seed=3)
    for k, v in model.params.items():
        np.testing.assert_array_equal(again.params[k], v)  # same seed, same weights
    assert model.params["wte"].dtype == np.float32


def test_train_and_save_trains_the_recipe_and_keeps_its_validation_nll(tmp_path, corpus,
                                                                         monkeypatch):
    from decodelab.core.models import recipes
    from decodelab.core.models.transformer import TransformerModel

    short = replace(TINY_TRAIN, steps=10, eval_every=5)
    shape = {"context_size": 16, "n_layer": 1, "n_embd": 16, "n_head": 2, "n_kv_head": 1}
    monkeypatch.setattr(recipes, "FALLBACK", (shape, short))  # "tiny" has no recipe of its own
    out = tmp_path / "models" / "transformer-tiny.npz"
    model = train.train_and_save(corpus, out, seed=5)
    assert model.info["steps"] == 10 and model.cfg == tiny_config(corpus)
    assert model.info["val_nll"] == round(model.nll(corpus.val), 4) > 0
    loaded = TransformerModel.load(out)
    assert loaded.info == model.info
    for k, v in model.params.items():
        np.testing.assert_array_equal(loaded.params[k], v)


@pytest.mark.parametrize("dataset,bigram_val,margin", [("names", 2.365, 0.25),
                                                       ("prose", 2.511, 0.5)])
def test_trained_artifacts_beat_the_bigram(dataset, bigram_val, margin):
    """Checks the build's models when they exist (training them takes about a minute each)."""
    path = Path(__file__).resolve().parents[1] / "artifacts" / "models" / \
        f"transformer-{dataset}.npz"
    if not path.exists():
        pytest.skip(f"{path.name} not built yet (python3 build.py artifacts)")
    from decodelab.core.tokens.corpus import read_corpus

    data = path.parents[1] / "data" / f"{dataset}.txt"
    model = TransformerModel.load(path)
    val_nll = model.nll(Corpus(dataset, read_corpus(data)).val)
    assert val_nll <= bigram_val - margin
    assert model.curve["val"] and len(model.curve["step"]) == len(model.curve["train"])
