"""The recipe of each trained transformer: its shape and its training settings, per corpus and
tokenizer, with what was measured when they were chosen.

This module is data. The build's key of a model (build.py, `model_artifact`) holds the one recipe
that model is trained with, not this file's text, so a change to one recipe retrains that model
alone; the code that trains (`train`, `layers`, `transformer`, ...) is in every model's key.
"""

from dataclasses import dataclass

@dataclass(frozen=True)
class TrainConfig:
    steps: int = 600
    batch_size: int = 32
    block_size: int = 0  # tokens per row; 0 means the model's context size
    lr: float = 3e-3  # peak learning rate, after warmup
    min_lr: float = 3e-4  # where the cosine ends
    warmup: int = 30
    weight_decay: float = 0.1  # on matrices only: gains are not pulled towards 0
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0  # global gradient norm
    dropout: float = 0.0  # on the residual branches, training only
    eval_every: int = 50
    eval_rows: int = 64  # validation rows scored for each point of the curve


# Hand-tuned per corpus (the vocabulary size comes from the data). Many small steps beat fewer
# big ones here: at equal tokens seen, batch 8 x 2000 steps ends far lower than 32 x 500.
# Names are at most a dozen characters, so their rows need only 32 tokens; without dropout the
# names model starts to overfit its ~33k training tokens after about 1500 steps. The prose model
# had 2000 steps (1.441 nats per character) until the tasks model joined the build: 1700 keep
# the first build under 10 minutes on two cores.
DEFAULTS = {
    "names": ({"context_size": 64},
              TrainConfig(steps=1500, batch_size=16, block_size=32, lr=6e-3, min_lr=6e-4,
                          dropout=0.1, eval_every=100)),
    "prose": ({"context_size": 128},
              TrainConfig(steps=1700, batch_size=8, lr=6e-3, min_lr=6e-4, eval_every=100)),
}
# On BPE tokens the prose is ~135k training tokens, which 3000 steps of 8 x 128 see 23 times
# over: dropout, a stronger weight decay and a long tail at a low learning rate keep the model
# from learning the training text by heart. Measured (held-out nats per token): 2000 steps
# 3.601, with dropout 0.1 3.562; 3000 steps with dropout 0.1 3.473, with weight decay 0.3 too
# 3.438 (0.6: 3.490; dropout 0.05: 3.459, 0.15: 3.458), and ending at 2e-4: 3.407.
DEFAULTS["prose-bpe"] = ({"context_size": 128},
                         TrainConfig(steps=3000, batch_size=8, lr=6e-3, min_lr=2e-4, dropout=0.1,
                                     weight_decay=0.3, eval_every=100))
# The tasks model must learn to copy numbers: from the question into its call, and from the
# calculator's result into its answer. Copying is all or nothing: below some amount of training
# it is wrong a third of the time, then it snaps into place. What decided it was the batch: the
# question's digits are random, so most of the loss is noise, and 16 rows a step were not
# enough to hear the copying in it. Measured (greedy, with the calculator, 300 held-out
# questions; 4 layers unless said):
#   batch 16: 1000 steps at lr 6e-3 61%, 2000 steps 72%; at lr 1e-2: 1500 steps 88%, 2500
#     steps 86%; with 8 heads 84%, weight decay 0 58%, sinusoidal position init 58%, windows
#     starting at a question 76%, loss on the answer only 40%, loss not on the tool's result 67%
#   batch 32 at lr 1e-2: 700 steps 31%, 1000 steps 99.3%; 3 layers, 1000 steps 98% (chosen:
#     184 s against 250 s, when it trains beside another model); 64 channels -> 48: 36%
#   batch 64, 400 steps at lr 1.5e-2: 31%
# Then the card questions joined (`records`): copy a name of 3 to 5 BPE tokens and a city into a
# JSON object. That is copying over the whole vocabulary, not over ten digits, and it came much
# later. Measured (greedy, 600 held-out cards, every value right; 3 layers of 4 query heads
# sharing 2 key/value heads unless said; the arithmetic stayed at 97-100% throughout):
#   6,000 cards (23% of the lines): 1,000 steps 0%, 2,500 steps 3%, 4,000 steps 33% (names
#     unquoted in the question, where ' Ada' and '"Ada' are different tokens: 0% at 2,500)
#   96 channels, or 2 heads of 32, at 1,500 steps: 0%
#   20,000 cards (50%): 2,500 steps 81%, 3,500 steps 93%; 40,000 (67%): 3,500 steps 93%
#   30,000 cards (60%): 3,000 steps 93.5%, 4,000 steps 93.8%; 4 key/value heads, 3,500 steps
#     92%; peak lr 1.5e-2, 3,500 steps 91%; 4 layers, 3,000 steps 93.5%
#   30,000 cards, 4 layers with 4 key/value heads: 4,000 steps 95.2% (on all 3,015 held-out
#     cards 94.6%), 5,000 steps 95.6% of all 3,015
# Trained again with numpy 2.4.6 (the same recipe comes out a little different with another
# numpy), on all 3,015 held-out cards: 5,000 steps 94.9%, 6,000 steps 96.2%, 7,000 steps 95.4%.
# Near the bar, a few hundred steps move it by a point either way.
# Then half the card questions lost their quotes and a fifth their full stop (as people type),
# and the model became Llama's (rotary positions, SwiGLU): every card value right, greedy, on
# the 1,507 quoted and 1,508 bare held-out cards, arithmetic with the calculator on 1,985:
#   6,000 steps: quoted 97.9%, bare 97.2%, arithmetic 99.6% (631-646 s in a first build)
#   4,500 steps: quoted 96.8%, bare 97.5%, arithmetic 99.4%
#   4,000 steps: quoted 97.1%, bare 96.5%, arithmetic 99.2% (chosen: this model is the longest
#     of the build, and at 6,000 steps a first build on a slow day took 11 minutes)
DEFAULTS["tasks-bpe"] = ({"context_size": 64, "n_layer": 4, "n_kv_head": 4},
                         TrainConfig(steps=4000, batch_size=32, lr=1e-2, min_lr=1e-3,
                                     eval_every=100))
FALLBACK = ({"context_size": 64}, TrainConfig(steps=1000, batch_size=16, lr=6e-3, min_lr=6e-4))


def recipe(dataset: str, tokenizer: str = "chars") -> tuple:
    """(model keywords of `layers.Config` but the vocabulary size, TrainConfig) for a corpus read
    by a tokenizer ("chars", or a BPE's name such as "bpe")."""
    return DEFAULTS.get(dataset if tokenizer == "chars" else f"{dataset}-{tokenizer}", FALLBACK)
