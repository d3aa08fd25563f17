"""Training the transformer in numpy: seeded batches, AdamW, a warmup-then-cosine learning rate,
and the training curve. Each model's shape and settings are its recipe (`recipes`); when a model
needs training again is the build's to decide (build.py keys a model by its recipe, data,
tokenizer, numpy version and the syntax of this code).

The training text is one stream, EOS s1 EOS s2 EOS ...; a batch is B random windows of T + 1
tokens from it (inputs and the same shifted by one as targets). Inside a window every EOS
starts a new sequence (positions restart, earlier text is hidden: see
`transformer.segment_layout`), so a window that starts mid-sequence looks like the context after
a shift, and a window holding a whole name looks like generation from an empty prompt.

Training runs in float32 (twice the matmul speed of float64); the gradient checks in the tests
run the same code in float64.

Dimension legend: B rows per batch, T tokens per row, N tokens in the stream.

Left out: gradient accumulation, mixed precision, resuming, early stopping, any search over
settings (the defaults below were tuned by hand to fit the build budget).
"""

import math
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from decodelab.core.models.layers import (
    Config,
    cross_entropy,
    forward,
    init_params,
    loss_and_grads,
    scoring_rows,
    segment_layout,
)
from decodelab.core.models.recipes import TrainConfig, recipe
from decodelab.core.tokens.tokenizer import EOS, CharTokenizer
from decodelab.core.models.transformer import TransformerModel


def default_configs(corpus, tokenizer=None) -> tuple:
    """The model shape and training settings for a corpus read by a tokenizer (None: chars)."""
    tokenizer = tokenizer or CharTokenizer(corpus.chars)
    model_kw, tc = recipe(corpus.name, tokenizer.name)
    return Config(vocab_size=tokenizer.vocab_size, **model_kw), tc


def token_stream(sequences, tokenizer: CharTokenizer) -> np.ndarray:
    """EOS s1 EOS s2 ... EOS as one int array (N,)."""
    ids = [EOS]
    for s in sequences:
        ids += tokenizer.encode_marked(s) + [EOS]
    return np.asarray(ids, np.int64)


def sample_batch(stream, rng, batch: int, block: int):
    """B windows of block + 1 tokens at random offsets -> inputs (B, T) and targets (B, T)."""
    block = min(block, len(stream) - 1)
    starts = rng.integers(0, len(stream) - block, size=batch)  # (B,)
    rows = stream[starts[:, None] + np.arange(block + 1)]  # (B, T+1)
    return rows[:, :-1], rows[:, 1:]


def lr_at(step: int, tc: TrainConfig) -> float:
    """Linear warmup to tc.lr, then a cosine down to tc.min_lr at the last step."""
    if step < tc.warmup:
        return tc.lr * (step + 1) / tc.warmup
    frac = (step - tc.warmup) / max(1, tc.steps - 1 - tc.warmup)
    return tc.min_lr + 0.5 * (tc.lr - tc.min_lr) * (1.0 + math.cos(math.pi * min(frac, 1.0)))


class AdamW:
    """Adam with decoupled weight decay; moments kept in the parameters' dtype."""

    def __init__(self, params: dict, tc: TrainConfig):
        self.tc, self.t = tc, 0
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}

    def step(self, params: dict, grads: dict, lr: float):
        tc = self.tc
        self.t += 1
        c1, c2 = 1.0 - tc.beta1 ** self.t, 1.0 - tc.beta2 ** self.t  # bias corrections
        for k, p in params.items():
            g, m, v = grads[k], self.m[k], self.v[k]
            m *= tc.beta1
            m += (1.0 - tc.beta1) * g
            v *= tc.beta2
            v += (1.0 - tc.beta2) * g * g
            if p.ndim >= 2:  # decay pulls matrices towards 0, independent of the gradient
                p *= 1.0 - lr * tc.weight_decay
            p -= (lr / c1) * m / (np.sqrt(v / c2) + 1e-8)


def clip_gradients(grads: dict, max_norm: float) -> float:
    """Scale all gradients down together if their global norm exceeds max_norm."""
    norm = math.sqrt(sum(float(np.vdot(g, g)) for g in grads.values()))
    if norm > max_norm:
        for g in grads.values():
            g *= max_norm / norm
    return norm


def rows_loss(params, cfg: Config, rows) -> float:
    """Mean loss over scoring rows (inputs, targets, weights), no gradients."""
    inputs, targets, weights = rows
    pos, bias = segment_layout(inputs, params["wte"].dtype)
    logits, _ = forward(params, cfg, inputs, pos, bias)
    return cross_entropy(logits, targets, weights)[0]


def train_model(corpus, config: Config = None, train: TrainConfig = None, seed: int = 0,
                log=None, tokenizer=None) -> TransformerModel:
    """Train a transformer on corpus.train; the curve tracks corpus.val. tokenizer: a trained
    BPE, or None for one token per character."""
    tokenizer = tokenizer or CharTokenizer(corpus.chars)
    default_cfg, default_tc = default_configs(corpus, tokenizer)
    cfg, tc = config or default_cfg, train or default_tc
    stream = token_stream(corpus.train, tokenizer)  # (N,)
    val_rows = _curve_rows(corpus.val, tokenizer, cfg, tc.eval_rows, seed)
    params = init_params(cfg, seed)
    opt, rng = AdamW(params, tc), np.random.default_rng(seed)
    block = min(tc.block_size or cfg.context_size, len(stream) - 1)
    curve, losses, began = {"step": [], "train": [], "val": []}, [], time.perf_counter()
    for step in range(tc.steps):
        x, y = sample_batch(stream, rng, tc.batch_size, block)
        loss, grads = loss_and_grads(params, cfg, x, y, np.ones(y.shape, np.float32),
                                     tc.dropout, rng)
        clip_gradients(grads, tc.grad_clip)
        opt.step(params, grads, lr_at(step, tc))
        losses.append(loss)
        if (step + 1) % tc.eval_every == 0 or step == tc.steps - 1:
            _curve_point(curve, step + 1, losses, params, cfg, val_rows, log)
            losses = []
    info = {"seconds": round(time.perf_counter() - began, 2), "steps": tc.steps, "seed": seed,
            "train": asdict(tc), "dataset": corpus.name}
    return TransformerModel(cfg, params, tokenizer, curve, info)


def _curve_rows(sequences, tokenizer, cfg: Config, n_rows: int, seed: int):
    """A fixed, seeded sample of validation rows, so every curve point scores the same text."""
    if not sequences:
        return None
    inputs, targets, weights = scoring_rows(sequences, tokenizer, cfg.context_size)
    pick = np.sort(np.random.default_rng(seed).permutation(len(inputs))[:n_rows])
    return inputs[pick], targets[pick], weights[pick].astype(np.float32)


def _curve_point(curve, step, losses, params, cfg, val_rows, log):
    curve["step"].append(step)
    curve["train"].append(round(float(np.mean(losses)), 4))  # mean over the steps since the last
    val = rows_loss(params, cfg, val_rows) if val_rows is not None else float("nan")
    curve["val"].append(round(float(val), 4))
    if log:
        log(f"step {step}: train {curve['train'][-1]:.4f} val {curve['val'][-1]:.4f}")


def train_and_save(corpus, out_path, seed: int = 0, log=None, tokenizer=None) -> TransformerModel:
    """Train with the corpus's recipe, store the full validation NLL in the model's info, save."""
    model = train_model(corpus, seed=seed, log=log, tokenizer=tokenizer)
    model.info["val_nll"] = round(model.nll(corpus.val), 4) if corpus.val else None
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    model.save(out_path)
    return model


def main(argv=None) -> int:
    """``python -m decodelab.core.models.train``: train one model on a corpus file and save it (build.py
    runs this for each model; it decides when a model needs training)."""
    import argparse

    from decodelab.core.tokens.corpus import Corpus, read_corpus

    parser = argparse.ArgumentParser(prog="python -m decodelab.core.models.train", description=main.__doc__)
    parser.add_argument("--model", choices=("bigram", "transformer"), default="transformer")
    parser.add_argument("--dataset", required=True, help="the corpus's name (picks the defaults)")
    parser.add_argument("--data", required=True, help="the corpus: one sequence per line")
    parser.add_argument("--out", required=True, help="where to save the model (.npz)")
    parser.add_argument("--tokenizer", help="a trained BPE (.npz from python -m decodelab.core.tokens.bpe); "
                                            "without it, one token per character")
    parser.add_argument("--seed", type=int, default=0, help="transformer: initialisation, batches")
    parser.add_argument("--verbose", action="store_true", help="print the training curve")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    corpus = Corpus(args.dataset, read_corpus(args.data))
    tokenizer = None
    if args.tokenizer:
        from decodelab.core.tokens.bpe import BPE

        tokenizer = BPE.load(args.tokenizer)
    if args.model == "bigram":
        from decodelab.core.models.bigram import BigramModel

        model = BigramModel.fit(corpus, tokenizer=tokenizer)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        model.save(args.out)
        detail = f"val NLL {model.nll(corpus.val):.4f} nats/token"
    else:
        model = train_and_save(corpus, args.out, seed=args.seed,
                               log=print if args.verbose else None, tokenizer=tokenizer)
        detail = f"val NLL {model.info.get('val_nll')} nats/token"
    print(f"train: {args.model} {args.dataset} ({model.tokenizer.name}), "
          f"{model.n_params:,} parameters, {detail} "
          f"({time.perf_counter() - began:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
