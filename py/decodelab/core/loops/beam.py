"""Beam search: several paths at once, the cache reordered between them at every step.

The rule is transformers' `generate(num_beams=N, do_sample=False)` (its vectorised beam search,
as of transformers 5), so the library learners use next gives the same beams in the same order:

- N running beams share one cache, one row each. At the first step only beam 0 counts (the others
  start at a score of -1e9: all N rows hold the same prompt).
- Each step: log-softmax of every beam's logits, a ban of tokens that would repeat an n-gram
  (`no_repeat_ngram_size`, over the prompt and the beam's tokens, the start token included), and
  each beam's running score added. Of all N x V continuations the best 2N are candidates.
- A candidate that ends with end-of-sequence, or reaches the token budget, has finished. Among
  the first N candidates, a finished one enters the bank of finished hypotheses with the score
  sum of log-probabilities / (new tokens, end-of-sequence included) ** length_penalty; the bank
  keeps the best N. The best N candidates that have not finished are the next running beams, and
  the cache rows are copied to follow them (`BatchSession.reorder`: row i takes the row of the
  beam it grew from, as transformers' `reorder_cache` does).
- It stops when the budget is spent, when every candidate finished, or by `early_stopping`:
  True, as soon as the bank holds N finished hypotheses; False, when the best running beam,
  scored at its current length, cannot beat the worst in a full bank; "never", the same but
  scored at the longest length it could reach when length_penalty > 0 (the canonical rule).
- The result: the bank's best `num_return_sequences`, best first.

Scores are float64 here; transformers adds them in float32, so they agree to about 1e-6. A
score of -1e9 marks a slot that cannot be chosen, as in transformers.

Left out: sampling beams (do_sample=True), diverse and constrained beam search, batches of
prompts (one prompt per search), context shifts (a search must fit the model's window).

Dimension legend: N beams, K = 2N candidates, V vocabulary size.
"""

from dataclasses import dataclass

import numpy as np

from decodelab.core.models.batchsession import BatchSession
from decodelab.core.rules.sampling import likeliest
from decodelab.core.loops.slices import drain

BLOCKED = -1.0e9  # a score that cannot win: a slot to skip (as transformers marks them)
EARLY_STOPPING = (True, False, "never")


@dataclass(frozen=True)
class BeamRules:
    num_beams: int = 4
    max_new_tokens: int = 20
    length_penalty: float = 1.0
    early_stopping: object = False  # True | False | "never"
    no_repeat_ngram_size: int = 0
    num_return_sequences: int = 1


def log_softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def banned_by_ngrams(seq: list, n: int) -> list:
    """The tokens that would complete an n-gram `seq` already has, after its last n-1 tokens."""
    if n <= 0 or len(seq) + 1 < n:
        return []
    if n == 1:
        return list(set(seq))
    tail = tuple(seq[len(seq) - n + 1:])
    return [seq[i + n - 1] for i in range(len(seq) - n + 1) if tuple(seq[i:i + n - 1]) == tail]


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest, largest first (ties: the lower index first)."""
    return likeliest(scores, k)


def beam_search(model, prompt_ids, rules: BeamRules, eos=None, check: bool = False,
                eos_blocked=None, ends=None) -> dict:
    """One search (`beam_search_steps`, every piece at once)."""
    return drain(beam_search_steps(model, prompt_ids, rules, eos, check, eos_blocked, ends))


def beam_search_steps(model, prompt_ids, rules: BeamRules, eos=None, check: bool = False,
                      eos_blocked=None, ends=None):
    """One search, sliced (`slices`: a piece per chunk of the prompt, per step and per beam's
    check) from one prompt. Returns {"beams": [{"ids", "score", "finish_reason",
    "stop_reason"}], "steps": [one record per step: the candidates, the beams kept with the beam
    each grew from, the bank after it], "stopped": why the search ended}.

    eos_blocked(step) -> bool: end-of-sequence gets log-probability -inf at that step (min new
    tokens, ignore EOS; as transformers' MinNewTokensLengthLogitsProcessor does). ends(new ids)
    -> (finish_reason, stop_reason) or None: a path that ends by another rule (a stop string, a
    tool call), finished like one that ends with end-of-sequence. check: each step's cached
    logits of every beam compared with a full recomputation (cache_diff). eos: the id that ends
    a path (default: the model's)."""
    N, K = rules.num_beams, 2 * rules.num_beams
    eos = model.tokenizer.eos_id if eos is None else eos
    start = list(model.tokenizer.start_ids)
    prompt = start + [int(i) for i in prompt_ids]
    P = len(prompt)
    max_length = P + rules.max_new_tokens
    if max_length > model.cfg.context_size:
        raise ValueError(f"the prompt and {rules.max_new_tokens} new tokens need {max_length} "
                         f"positions; the model's window holds {model.cfg.context_size}")
    # one cache, a row per beam, in the model's own dtype (float64 for the models trained
    # here; float32 for the real one, whose float64 copy would be another gigabyte)
    session = BatchSession(model, N, model.generation_dtype)
    logits = yield from session.prefill_steps([prompt[len(start):]] * N)  # (N, V): every
    # row the same prompt
    seqs = [list(prompt) for _ in range(N)]  # running beams, prompt included
    running = np.full(N, BLOCKED)
    running[0] = 0.0
    bank_scores = np.full(N, BLOCKED)
    bank_seqs = [list(prompt) for _ in range(N)]
    bank_done = np.zeros(N, bool)
    bank_reason = [None] * N
    improvable = True  # transformers' early-stop heuristic, not yet satisfied
    cur_len, steps, stopped = P, [], "length"
    while True:
        logp = log_softmax(np.asarray(logits, np.float64))  # (N, V)
        if eos_blocked is not None and eos_blocked(cur_len - P):
            logp[:, eos] = -np.inf
        if rules.no_repeat_ngram_size:
            for b, seq in enumerate(seqs):
                logp[b, banned_by_ngrams(seq, rules.no_repeat_ngram_size)] = -np.inf
        V = logp.shape[1]
        total = (logp + running[:, None]).reshape(-1)  # (N*V,)
        top = _top(total, K)  # (K,)
        cand_score, cand_beam, cand_tok = total[top], top // V, top % V
        at_budget = cur_len + 1 >= max_length
        cand_seqs = [seqs[b] + [int(t)] for b, t in zip(cand_beam, cand_tok)]
        reasons = [("stop", "eos") if t == eos else None for t in cand_tok]
        if ends is not None:
            reasons = [r or ends(seq[P:]) for r, seq in zip(reasons, cand_seqs)]
        reasons = [r or (("length", None) if at_budget else None) for r in reasons]
        finished = np.array([r is not None for r in reasons])  # (K,)
        # the next running beams: the best K candidates that did not finish
        keep = _top(np.where(finished, cand_score + BLOCKED, cand_score), N)
        # the bank: the first N candidates that finished, scored with the length penalty
        entering = finished & (np.arange(K) < N)
        scored = cand_score / float(cur_len + 1 - P) ** rules.length_penalty
        closed = (rules.early_stopping is True and bank_done.all()) or not improvable
        offered = np.where(entering & (not closed), scored, scored + BLOCKED)
        merged = np.concatenate([bank_scores, offered])
        best = _top(merged, N)
        merged_seqs = bank_seqs + cand_seqs
        merged_done = np.concatenate([bank_done, entering])
        merged_reason = bank_reason + reasons
        # which offered candidates the bank holds after the merge (one may enter and be pushed
        # out by a better one of the same step)
        banked = np.zeros(K, bool)
        banked[[j - N for j in best if j >= N]] = True
        banked &= entering & (not closed)
        bank_scores = merged[best]
        bank_seqs = [merged_seqs[i] for i in best]
        bank_done = merged_done[best]
        bank_reason = [merged_reason[i] for i in best]
        parents = cand_beam[keep]
        steps.append({
            "step": cur_len - P,
            "candidates": [{"beam": int(b), "token_id": int(t), "score": float(s),
                            "finished": bool(f), "entered": bool(e and not closed),
                            "banked": bool(k)}
                           for b, t, s, f, e, k in zip(cand_beam, cand_tok, cand_score, finished,
                                                       entering, banked)],
            "kept": [{"from": int(cand_beam[i]), "token_id": int(cand_tok[i]),
                      "score": float(cand_score[i])} for i in keep],
            "bank": [{"ids": s[P:], "score": float(x), "finish_reason": r[0]}
                     for s, x, d, r in zip(bank_seqs, bank_scores, bank_done, bank_reason)
                     if d],
        })
        seqs = [cand_seqs[i] for i in keep]
        running = np.where(finished[keep], cand_score[keep] + BLOCKED, cand_score[keep])
        cur_len += 1
        # can a running beam still beat the worst finished one? (transformers' heuristic)
        length = (max_length - P if rules.early_stopping == "never" and rules.length_penalty > 0
                  else cur_len - P)
        best_running = running[0] / float(length) ** rules.length_penalty
        worst = bank_scores.min() if bank_done.any() else BLOCKED
        improvable = improvable and (not bank_done.all() or best_running > worst)
        if not improvable:
            stopped = "no better beam possible"
            break
        if rules.early_stopping is True and bank_done.all():
            stopped = "bank full"
            break
        if finished.all():
            stopped = "length" if at_budget else "every candidate finished"
            break
        session.reorder(parents)  # the cache's rows follow the beams
        logits = session.decode([s[-1] for s in seqs])
        yield None
        if check:
            expected = yield from session.recompute_steps()  # (N, V)
            diff = float(np.abs(session.logits - expected).max())
            steps[-1]["cache_diff"] = diff  # read by the next step: recorded with this one
    n = rules.num_return_sequences
    return {"beams": [{"ids": s[P:], "score": float(x), "finish_reason": r[0],
                       "stop_reason": r[1]}
                      for s, x, r, d in zip(bank_seqs[:n], bank_scores[:n], bank_reason[:n],
                                            bank_done[:n]) if d],
            "steps": steps, "stopped": stopped, "prompt_ids": prompt[len(start):]}
