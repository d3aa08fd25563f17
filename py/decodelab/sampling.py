"""Decoding rules: from one vector of logits to the distribution a token is drawn from, and the draw.

Pure functions over 1-D arrays of length V (the vocabulary) and an explicit
np.random.Generator; no global state. The decided semantics:

- greedy: argmax, ties to the lowest token id; no random draw.
- temperature T > 0: p_i proportional to exp(z_i / T). T = 0 is never divided by: it means greedy.
- top-k (0 = off): keep every token whose probability is >= the k-th largest (ties kept).
- top-p (1 = off): sort by probability (ties by token id), keep the shortest prefix whose mass
  reaches p; the token that crosses the threshold is kept; at least one token is kept.
- min-p (0 = off): keep tokens with p >= min_p * p_max.
- after each filter the kept probabilities are renormalised, so the next filter sees a
  distribution (this is what makes top-k 3 then top-p 0.75 keep two of [.4 .3 .2 .1]).
- order "temperature-first" (Hugging Face, vLLM): temperature, then the filters.
  order "filter-first" (llama.cpp's default chain): filters on the T=1 distribution, then
  temperature on what is left.
- repetition penalty (1 = off): for each id already in prompt + output, a positive logit is
  divided by the penalty and a negative one multiplied (so the token always gets less likely).
- the draw: one uniform u in [0, 1); the chosen token is the first token, in id order, whose
  cumulative final probability exceeds u (inverse CDF).

Left out: beam search, typical-p, frequency/presence penalties, batching.
"""

import numpy as np

# top-p compares a running sum with p; sums of floats land a hair off (0.6 + 0.25 vs 0.85), so
# a cumulative mass within this much of p counts as having reached it.
TOP_P_SLACK = 1e-9


def softmax(z: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """exp(z / T) normalised; -inf logits get probability 0."""
    if temperature != 1.0:
        z = z / temperature  # (V,)
    e = np.exp(z - z.max())  # (V,) largest entry is exp(0) = 1, so no overflow
    return e / e.sum()


def renormalise(p: np.ndarray, kept: np.ndarray) -> np.ndarray:
    q = np.where(kept, p, 0.0)  # (V,)
    return q / q.sum()


def top_k_mask(p: np.ndarray, k: int) -> np.ndarray:
    """Tokens whose value is >= the k-th largest value (ties with the k-th are all kept)."""
    V = p.shape[0]
    if k <= 0 or k >= V:
        return np.ones(V, dtype=bool)
    kth = np.partition(p, V - k)[V - k]  # the k-th largest value
    return p >= kth


def top_p_mask(p: np.ndarray, top_p: float) -> np.ndarray:
    """The smallest set of likeliest tokens (ties by id) whose mass reaches top_p."""
    V = p.shape[0]
    if top_p >= 1.0:
        return np.ones(V, dtype=bool)
    order = np.argsort(-p, kind="stable")  # likeliest first; stable sort orders ties by id
    cum = np.cumsum(p[order])  # (V,)
    n = int(np.searchsorted(cum, top_p - TOP_P_SLACK, side="left")) + 1  # crossing token kept
    kept = np.zeros(V, dtype=bool)
    kept[order[:n]] = True
    return kept


def min_p_mask(p: np.ndarray, min_p: float) -> np.ndarray:
    if min_p <= 0.0:
        return np.ones(p.shape[0], dtype=bool)
    return p >= min_p * p.max()


def apply_filters(p: np.ndarray, top_k=0, top_p=1.0, min_p=0.0):
    """top-k, then top-p, then min-p, renormalising after each. Returns (kept, renormalised p)."""
    kept = np.ones(p.shape[0], dtype=bool)
    if top_k > 0:
        kept &= top_k_mask(p, top_k)
        p = renormalise(p, kept)
    if top_p < 1.0:
        kept &= top_p_mask(p, top_p)
        p = renormalise(p, kept)
    if min_p > 0.0:
        kept &= min_p_mask(p, min_p)
        p = renormalise(p, kept)
    return kept, p


def filters_active(top_k=0, top_p=1.0, min_p=0.0) -> bool:
    return top_k > 0 or top_p < 1.0 or min_p > 0.0


def apply_repetition_penalty(z: np.ndarray, seen: np.ndarray, penalty: float) -> np.ndarray:
    """Logits with every seen id penalised once: positive / penalty, negative * penalty.

    `seen` is a boolean mask (V,) of ids already in prompt + output.
    """
    if penalty == 1.0 or not seen.any():
        return z
    scaled = np.where(z > 0, z / penalty, z * penalty)  # (V,)
    return np.where(seen, scaled, z)


def decode_distribution(z, *, temperature=1.0, greedy=False, top_k=0, top_p=1.0, min_p=0.0,
                        order="temperature-first"):
    """What the rules make of logits z (already penalised/masked).

    Returns (p_temp, kept, p_final): the distribution after temperature (T=1 when greedy), the
    kept mask, and the final distribution the token is drawn from.
    """
    if greedy or temperature == 0:
        p_temp = softmax(z)
        kept = np.zeros(z.shape[0], dtype=bool)
        kept[int(np.argmax(z))] = True  # argmax returns the first maximum: lowest id wins ties
        return p_temp, kept, kept.astype(np.float64)
    p_temp = softmax(z, temperature)
    if not filters_active(top_k, top_p, min_p):
        kept, p_final = np.ones(z.shape[0], dtype=bool), p_temp
    elif order == "temperature-first":
        kept, p_final = apply_filters(p_temp, top_k, top_p, min_p)
    elif order == "filter-first":
        kept, _ = apply_filters(softmax(z) if temperature != 1.0 else p_temp, top_k, top_p, min_p)
        p_final = renormalise(p_temp, kept)
    else:
        raise ValueError(f"order must be temperature-first or filter-first; got {order!r}")
    # A token that cannot be drawn is not "kept": a blocked EOS (-inf), or a probability that
    # underflowed to 0 at a low temperature (which would otherwise tie with the k-th at 0).
    return p_temp, kept & (p_final > 0), p_final


def kept_set(z, *, temperature, top_k, top_p, min_p, order) -> np.ndarray:
    """Just the kept mask for one order (used to show when the two orders disagree)."""
    return decode_distribution(z, temperature=temperature, top_k=top_k, top_p=top_p,
                               min_p=min_p, order=order)[1]


def pick(p_final: np.ndarray, u: float) -> int:
    """Inverse CDF in token-id order: the first token whose cumulative probability exceeds u."""
    cum = np.cumsum(p_final)  # (V,)
    i = int(np.searchsorted(cum, u, side="right"))
    if i >= p_final.shape[0]:  # u beyond a total that rounded below 1: take the last kept token
        i = int(np.flatnonzero(p_final)[-1])
    return i


def entropy(p: np.ndarray) -> float:
    """Shannon entropy in nats; 0 * log 0 counts as 0."""
    nz = p[p > 0]
    return float(-(nz * np.log(nz)).sum())
