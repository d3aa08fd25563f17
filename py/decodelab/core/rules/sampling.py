"""Decoding rules: from one vector of logits to the distribution a token is drawn from, and the draw.

Every rule lives here, once, and `decide` applies them in order, keeping each stage on the way:
generation reads the final distribution from it, and the page's view of a step (`pipeline`),
the playground and the metrics read the stages of the very same call. Pure functions over 1-D
arrays of length V (the vocabulary) and an explicit np.random.Generator; no global state.

The decided semantics:

- end-of-sequence can be blocked (logit -inf): before min_new_tokens, or always with ignore_eos.
- a mask (token healing, JSON mode's grammar) can allow only some tokens: every other one gets
  logit -inf.
- repetition penalty (1 = off): for each id already in prompt + output, a positive logit is
  divided by the penalty and a negative one multiplied (so the token always gets less likely).
- greedy: argmax, ties to the lowest token id; no random draw.
- temperature T > 0: p_i proportional to exp(z_i / T). T = 0 is never divided by: it means greedy.
- top-k (0 = off): keep every token whose probability is >= the k-th largest (ties kept).
- top-p (1 = off): sort by probability (ties by token id), keep the shortest prefix whose mass
  reaches p; the token that crosses the threshold is kept; at least one token is kept.
- min-p (0 = off): keep tokens with p >= min_p * p_max.
- typical-p (1 = off; locally typical sampling, Meister et al. 2022): rank tokens by how far
  their surprise -log p is from the distribution's entropy H, nearest first (ties by id), and
  keep the shortest such list whose mass reaches typical_p (the crossing token and its ties kept).
  The likeliest token can go: when one token is far likelier than the entropy says a token is.
- after each filter the kept probabilities are renormalised, so the next filter sees a
  distribution (this is what makes top-k 3 then top-p 0.75 keep two of [.4 .3 .2 .1]).
- the filters run in the order top-k, top-p, min-p, typical-p (Hugging Face's order).
- order "temperature-first" (Hugging Face, vLLM): temperature, then the filters.
  order "filter-first" (llama.cpp's default chain): filters on the T=1 distribution, then
  temperature on what is left.
- a token that cannot be drawn (probability 0 in the final distribution) is not "kept".
- the draw: one uniform u in [0, 1); the chosen token is the first token, in id order, whose
  cumulative final probability exceeds u (inverse CDF).

Dimension legend: V vocabulary size.

Left out: beam search, epsilon and eta cutoffs, frequency/presence penalties, batching.
"""

import math
from dataclasses import dataclass, field, replace

import numpy as np

from decodelab.core.tokens.tokenizer import EOS
from decodelab.fields import ORDERS, default  # ORDERS: the orders the rules know (the choices)

# top-p compares a running sum with p; sums of floats land a hair off (0.6 + 0.25 vs 0.85), so
# a cumulative mass within this much of p counts as having reached it.
TOP_P_SLACK = 1e-9


@dataclass(frozen=True)
class Rules:
    """The decoding rules of a step. Each is a run setting, and its default (the field table's)
    switches it off."""

    temperature: float = default("temperature")
    greedy: bool = default("greedy")
    top_k: int = default("top_k")
    top_p: float = default("top_p")
    min_p: float = default("min_p")
    typical_p: float = default("typical_p")
    order: str = default("order")
    repetition_penalty: float = default("repetition_penalty")
    # worked out once (decide reads them at every step):
    is_greedy: bool = field(init=False, repr=False, compare=False)  # greedy, or T = 0
    filtering: bool = field(init=False, repr=False, compare=False)  # a filter is on
    orders_can_differ: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        greedy = bool(self.greedy or self.temperature == 0)  # never a division by 0
        filtering = any(getattr(self, name) != off for name, off in OFF.items())
        object.__setattr__(self, "is_greedy", greedy)
        object.__setattr__(self, "filtering", filtering)
        # the two orders keep different sets only with a filter on and T != 1 (never greedy)
        object.__setattr__(self, "orders_can_differ",
                           not greedy and filtering and self.temperature != 1.0)

    def with_order(self, order: str) -> "Rules":
        return replace(self, order=order)


# --- the rules, one function each ---------------------------------------------------------------

def softmax(z: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """exp(z / T) normalised; -inf logits get probability 0."""
    if temperature != 1.0:
        z = z / temperature  # (V,)
    e = np.exp(z - z.max())  # (V,) largest entry is exp(0) = 1, so no overflow
    return e / e.sum()


def renormalise(p: np.ndarray, kept: np.ndarray) -> np.ndarray:
    q = np.where(kept, p, 0.0)  # (V,)
    return q / q.sum()


SORT_UP_TO = 4096  # below this many values a full sort is fewer numpy calls than a partition


def likeliest(p, n: int) -> np.ndarray:
    """The indices of the n largest values of p, largest first, ties by the lower index: what
    `np.argsort(-p, kind="stable")[:n]` gives, without sorting a large vocabulary whole (a
    real model's 49,152 tokens: a partition finds the n-th largest value, and only the values
    above it and its first ties are sorted)."""
    V = p.shape[0]
    n = min(int(n), V)
    if V <= SORT_UP_TO or n <= 0:
        return np.argsort(-p, kind="stable")[:n]
    nth = np.partition(p, V - n)[V - n]
    above = np.flatnonzero(p > nth)
    ties = np.flatnonzero(p == nth)[:n - above.size]
    chosen = np.concatenate([above, ties])
    return chosen[np.lexsort((chosen, -p[chosen]))]


def top_k_cut(p, k):
    """Tokens whose value is >= the k-th largest value (ties with the k-th are all kept).

    Returns the mask (V,) and the numbers that decide it (k, the k-th largest value)."""
    V = p.shape[0]
    n = min(int(k), V)
    kth = float(np.partition(p, V - n)[V - n])  # the k-th largest value: ties with it stay
    return p >= kth, {"k": int(k), "kth": kth}


def top_p_cut(p, top_p):
    """The smallest set of likeliest tokens (ties by id) whose mass reaches top_p.

    Returns the mask and the numbers that decide it: the likeliest-first order of the tokens and
    the running total along it, the crossing token, its rank and its total."""
    V = p.shape[0]
    order = np.argsort(-p, kind="stable")  # likeliest first; stable sort orders ties by id
    running = np.cumsum(p[order])  # (V,) mass of the likeliest 1, 2, ... tokens
    n = int(np.searchsorted(running, top_p - TOP_P_SLACK, side="left")) + 1  # crossing kept
    n = min(n, V)
    kept = np.zeros(V, dtype=bool)
    kept[order[:n]] = True
    crossing = int(order[n - 1])  # the last one kept is the one whose total reached p
    return kept, {"top_p": float(top_p), "order": order, "running": running,
                  "crossing": crossing, "crossing_rank": n, "reached": float(running[n - 1])}


def min_p_cut(p, min_p):
    """Tokens at least min_p times as likely as the likeliest; the mask and the cutoff."""
    p_max = float(p.max())
    cutoff = min_p * p_max
    return p >= cutoff, {"min_p": float(min_p), "p_max": p_max, "cutoff": cutoff}


def typical_p_cut(p, mass):
    """The tokens whose surprise -log p is nearest the entropy H, shortest list reaching `mass`.

    Returns the mask and the numbers that decide it: H, the nearest-first order of the tokens and
    the running total along it, the crossing token, its rank and its total."""
    V = p.shape[0]
    alive = p > 0
    surprise = -np.log(p, out=np.full(V, np.inf), where=alive)  # (V,) nats; inf where p = 0
    H = float((p[alive] * surprise[alive]).sum())
    distance = np.abs(surprise - H)  # (V,) how atypical each token is; inf where p = 0
    order = np.argsort(distance, kind="stable")  # most typical first; stable sort: ties by id
    running = np.cumsum(p[order])  # (V,)
    n = min(int(np.searchsorted(running, mass - TOP_P_SLACK, side="left")) + 1, V)
    crossing = int(order[n - 1])
    kept = distance <= distance[crossing]  # ties with the crossing token's distance stay
    return kept, {"typical_p": float(mass), "entropy": H, "order": order, "running": running,
                  "crossing": crossing, "crossing_rank": n, "reached": float(running[n - 1])}


def apply_repetition_penalty(z: np.ndarray, seen: np.ndarray, penalty: float) -> np.ndarray:
    """Logits with every seen id penalised once: positive / penalty, negative * penalty.

    `seen` is a boolean mask (V,) of ids already in prompt + output.
    """
    if penalty == 1.0 or not seen.any():
        return z
    scaled = np.where(z > 0, z / penalty, z * penalty)  # (V,)
    return np.where(seen, scaled, z)


def seen_mask(vocab_size: int, ids) -> np.ndarray:
    """(V,) True for every id in `ids`: what the repetition penalty counts as already used."""
    seen = np.zeros(vocab_size, dtype=bool)
    seen[list(ids)] = True
    return seen


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


# --- the rules in order ---------------------------------------------------------------------------

# The filters, in the order they run, and the value that switches each off (its field's
# default). A new filter is a cut function, one entry here, a field of Rules and a row of
# fields.FIELDS.
FILTERS = (("top_k", top_k_cut), ("top_p", top_p_cut), ("min_p", min_p_cut),
           ("typical_p", typical_p_cut))
CUTS = dict(FILTERS)
OFF = {name: default(name) for name, _ in FILTERS}
# what greedy leaves unused: it takes the argmax of the penalised logits, so no temperature,
# no filter and no order matters (the repetition penalty and end-of-sequence blocking still do)
FILTER_NAMES = tuple(OFF)
GREEDY_IGNORES = ("temperature", *FILTER_NAMES, "order")


def filters_on(rules: Rules) -> list:
    """[(name, value)] of the filters these rules switch on, in the order they run."""
    return [(name, getattr(rules, name)) for name, _ in FILTERS
            if getattr(rules, name) != OFF[name]]


@dataclass(slots=True)
class Stage:
    """One rule applied: the distribution it saw (p_in), who is still in the running after it
    (kept, cumulative), the distribution after it (p), and the numbers that decide its cut.
    p_in is None for temperature applied first: its input is Decision.p_rules, computed only
    when someone asks."""

    kind: str  # "temperature" | "top_k" | "top_p" | "min_p" | "greedy"
    p_in: np.ndarray | None
    kept: np.ndarray
    p: np.ndarray
    facts: dict = field(default_factory=dict)
    kept_before: np.ndarray | None = None  # filters: who was in the running before it

    @property
    def removed(self) -> np.ndarray | None:
        """(V,) the tokens this stage removed (None for a stage that removes nothing)."""
        return None if self.kept_before is None else self.kept_before & ~self.kept


def _filter_stages(p, rules: Rules, kept, stages: list):
    """The filters on p (V,) in FILTERS order, renormalising after each; returns (kept, p)."""
    if not rules.filtering:
        return kept, p
    for name, value in filters_on(rules):
        mask, facts = CUTS[name](p, value)
        before, kept = kept, kept & mask
        p_in, p = p, renormalise(p, kept)
        stages.append(Stage(name, p_in, kept, p, facts, before))
    return kept, p


@dataclass(slots=True)
class Decision:
    """Everything the rules made of one step's logits.

    logits: the model's (V,); z: what the rules start from, after end-of-sequence blocking and
    the repetition penalty (the same array when neither applied); p_raw: the model's own
    distribution, softmax(logits) at T = 1; p_temp: after temperature (T = 1 when greedy);
    kept and p_final: what can be drawn, and with which probability; stages: each rule's step.
    """

    rules: Rules
    logits: np.ndarray
    z: np.ndarray
    p_raw: np.ndarray
    allowed: np.ndarray | None = None  # (V,) the mask, when one applied
    mask_why: str = ""  # what a masked token fails, in words ("does not start with ' '")
    mask_kind: str = ""  # whose mask: "healing" or "json"
    p_temp: np.ndarray | None = None
    kept: np.ndarray | None = None
    p_final: np.ndarray | None = None
    stages: list = field(default_factory=list)
    _p_rules: np.ndarray | None = None

    @property
    def adjusted(self) -> bool:
        return self.z is not self.logits

    @property
    def p_rules(self) -> np.ndarray:
        """softmax(z) at T = 1: the distribution the rules start from (p_raw unless adjusted)."""
        if self._p_rules is None:
            self._p_rules = softmax(self.z) if self.adjusted else self.p_raw
        return self._p_rules

    def logprob(self, token: int) -> float:
        """The model's own log-probability of `token` (before any rule), in nats."""
        p = float(self.p_raw[token])
        if p > 0:
            return math.log(p)
        z = self.logits  # a probability below the smallest float: from the logits themselves
        return float(z[token] - z.max() - np.log(np.exp(z - z.max()).sum()))

    def greedy_token(self) -> int:
        return int(np.argmax(self.p_final))

    def in_order(self, order: str) -> "Decision":
        """The same logits decided in the other order (greedy has only one)."""
        if order == self.rules.order or self.rules.is_greedy:
            return self
        d = Decision(self.rules.with_order(order), self.logits, self.z, self.p_raw, self.allowed,
                     self.mask_why, self.mask_kind, self.p_temp, _p_rules=self._p_rules)
        d.kept, d.p_final, d.stages = _apply(d, order)
        self._p_rules = d._p_rules  # computed once for both
        return d


def _apply(d: Decision, order: str):
    """Temperature and the filters in `order`, on d's distributions: (kept, p_final, stages)."""
    rules, stages = d.rules, []
    everyone = np.ones(d.z.shape[0], dtype=bool)
    T = float(rules.temperature)
    if order == "temperature-first" or not rules.filtering:
        stages.append(Stage("temperature", None, everyone, d.p_temp, {"T": T}))
        kept, p_final = _filter_stages(d.p_temp, rules, everyone, stages)
    else:
        kept, _ = _filter_stages(d.p_rules if T != 1.0 else d.p_temp, rules, everyone, stages)
        p_final = renormalise(d.p_temp, kept)  # temperature last, on what was kept
        stages.append(Stage("temperature", d.p_temp, kept, p_final, {"T": T, "last": True}))
    return kept & (p_final > 0), p_final, stages  # what cannot be drawn is not kept


def decide(logits, rules: Rules, *, eos_blocked: bool = False, seen=None, allowed=None,
           mask_why: str = "", mask_kind: str = "", eos: int = EOS) -> Decision:
    """Apply the rules to one step's logits (V,), keeping every stage.

    eos_blocked: end-of-sequence (id `eos`, the model's) gets logit -inf; seen: (V,) mask of
    ids already used, for the repetition penalty; allowed: (V,) mask of the only tokens that may
    be chosen (at least one True), with mask_why saying in words what the others fail and
    mask_kind whose mask it is (token healing's, or JSON mode's grammar).
    """
    z = logits
    if eos_blocked:
        z = z.copy()
        z[eos] = -np.inf
    if seen is not None:
        z = apply_repetition_penalty(z, seen, rules.repetition_penalty)
    if allowed is not None:
        z = np.where(allowed, z, -np.inf)  # (V,)
        if not np.isfinite(z).any():  # everything allowed was blocked too (EOS): keep them
            z = np.where(allowed, logits, -np.inf)
    d = Decision(rules, logits, z, softmax(logits), allowed, mask_why, mask_kind)  # p_raw: model's
    if rules.is_greedy:
        p1 = d.p_rules
        kept = np.zeros(z.shape[0], dtype=bool)
        kept[int(np.argmax(z))] = True  # argmax returns the first maximum: lowest id wins ties
        d.p_temp, d.kept, d.p_final = p1, kept, kept.astype(np.float64)
        d.stages.append(Stage("greedy", p1, kept, d.p_final, {}, np.ones(z.shape[0], dtype=bool)))
        return d
    if rules.order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}; got {rules.order!r}")
    T = float(rules.temperature)
    d.p_temp = softmax(z, T) if T != 1.0 else d.p_rules  # (V,)
    d.kept, d.p_final, d.stages = _apply(d, rules.order)
    return d


def orders_differ(d: Decision) -> bool:
    """Would the other order keep a different set of tokens at this step?"""
    if not d.rules.orders_can_differ:
        return False
    other = ORDERS[1 - ORDERS.index(d.rules.order)]
    return bool((_apply(d, other)[0] != d.kept).any())
