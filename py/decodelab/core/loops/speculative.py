"""Speculative decoding: a cheap draft model guesses ahead, the real model checks every guess in
one pass, and its cache is rolled back to the last token it accepted.

A round (Leviathan et al. 2023; Chen et al. 2023):
  1. The draft proposes up to gamma tokens, one at a time, each drawn from q, its final
     distribution after the run's rules (greedy: its argmax). A drafted end-of-sequence ends
     the proposal.
  2. The target reads them in one pass (`Session.score`), together with the token the previous
     round ended on, which it had not read yet: gamma + 1 positions, and so gamma + 1 final
     distributions p after the same rules.
  3. Token i is accepted with probability min(1, p(x)/q(x)): one uniform draw u, accepted when
     u < p(x)/q(x). Greedy: accepted when it is the target's argmax.
  4. At the first rejection the round ends with a token drawn from max(0, p - q), renormalised
     (greedy: the target's argmax). If every token was accepted, one bonus token comes from the
     target's last distribution. Either way the round adds the accepted tokens and one more.
  5. Both caches are rolled back to what the round kept: the rejected guesses' keys and values
     are forgotten (`Session.rewind`); a bigram draft keeps nothing.

Why the text is the target's own: for each position, a token x comes out accepted with
probability q(x) min(1, p(x)/q(x)) = min(q(x), p(x)), or rejected then resampled with
probability (1 - sum_y min(q(y), p(y))) (p(x) - min(q(x), p(x))) / (1 - sum_y min(q(y), p(y)));
the two add up to p(x). Greedy, every kept token is the target's argmax: the same text as greedy
decoding without a draft.

The draws come from one generator seeded by the run's seed, in a fixed order per round: the
draft's draws, then one u per checked token, then the resampling draw (or the bonus draw).

Other rules that end a text (a stop string, a tool call) are the caller's (`on_token`): the
kept tokens of a round are read one by one, and the run ends at the first that ends the text;
the rest of the round is dropped. The repetition penalty counts the prompt, the text kept and
the guesses before the one scored, for the draft and the target alike.

The draft is a smaller model on the same tokens (`Draft`), or no model at all: the n-gram draft
(`NgramDraft`, prompt lookup as transformers' `prompt_lookup_num_tokens` and vLLM's n-gram
speculator do it) finds the latest earlier place where the text's last few tokens occurred and
proposes the tokens that followed there. Its q is one-hot (it is sure of its guess), so a guess
x is accepted with probability p(x), and a rejection draws from p without x: the same rule, the
same target's text. It pays where a text repeats itself (a quoted passage, code, a list), and
costs one pass of the target per round like any draft; where nothing matches it proposes nothing
and the round is a plain decode step.

Left out: JSON mode and token healing (their masks follow one text as it is written); a draft
with its own tokenizer; tree-shaped drafts.

Dimension legend: V vocabulary size, g drafted tokens in a round (g <= gamma).
"""

import numpy as np

from decodelab.core.rules import sampling


def final(logits, rules: sampling.Rules, eos_blocked: bool, seen, eos: int) -> np.ndarray:
    """The final distribution (V,) after the run's rules, the one a token is drawn from; seen:
    the repetition penalty's mask of ids used (None when the penalty is off); eos: the model's
    end-of-sequence id."""
    return sampling.decide(np.asarray(logits, np.float64), rules, eos_blocked=eos_blocked,
                           seen=seen, eos=eos).p_final


def always(p: np.ndarray, q: np.ndarray, x: int, u: float) -> bool:
    """The rule: accept x with probability min(1, p(x)/q(x))."""
    return u * q[x] < p[x]


def residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """max(0, p - q), renormalised (p itself in the measure-zero case p <= q everywhere)."""
    r = np.maximum(p - q, 0.0)
    total = r.sum()
    return r / total if total > 0 else p


class Draft:
    """The draft's side of a run: its logits after the tokens kept so far, and a rollback."""

    def __init__(self, model, prompt_ids):
        self.session = model.session()
        self.logits = self.session.prefill(list(prompt_ids))
        self.kept = len(prompt_ids)
        self.start = len(model.tokenizer.start_ids)  # the tokens before the prompt
        self.eos = model.tokenizer.eos_id

    def propose(self, rules, gamma: int, eos_blocked, rng, greedy: bool, seen) -> tuple:
        """Up to gamma tokens, each with the distribution it was drawn from; seen(guesses) is
        the penalty's mask after these guesses."""
        xs, qs, logits = [], [], self.logits
        for i in range(gamma):
            q = final(logits, rules, eos_blocked(len(xs)), seen(xs), self.eos)
            x = int(np.argmax(q)) if greedy else sampling.pick(q, float(rng.random()))
            xs.append(x)
            qs.append(q)
            if x == self.eos or i == gamma - 1:
                break
            logits = self.session.decode(x)
        return xs, qs

    def keep(self, tokens: list) -> None:
        """The round kept these tokens after the ones before it: forget the rest, read these."""
        self.session.rewind(self.start + self.kept)  # its guesses taken back: the start, the kept
        self.logits = self.session.append(tokens) if len(tokens) > 1 \
            else self.session.decode(tokens[0])
        self.kept += len(tokens)


NGRAM = "ngram"  # the draft "model" that is the text itself
NGRAM_MAX, NGRAM_MIN = 3, 1  # the longest and the shortest tail the n-gram draft looks up


def lookup(ids: list, gamma: int, longest: int = NGRAM_MAX, shortest: int = NGRAM_MIN) -> list:
    """Up to gamma tokens that followed the latest earlier occurrence of the text's last n
    tokens, for n from `longest` down to `shortest`; [] when none occurred before."""
    for n in range(min(longest, len(ids) - 1), shortest - 1, -1):
        tail = ids[-n:]
        for at in range(len(ids) - n - 1, -1, -1):  # the latest first, the tail itself left out
            if ids[at:at + n] == tail:
                return ids[at + n:at + n + gamma]
    return []


class NgramDraft:
    """The draft's side of a run with no draft model: the text so far, looked up (`lookup`)."""

    def __init__(self, prompt_ids, vocab_size: int, eos: int):
        self.ids, self.V, self.eos = list(prompt_ids), vocab_size, eos

    def propose(self, rules, gamma: int, eos_blocked, rng, greedy: bool, seen) -> tuple:
        """The tokens that followed the text's tail before (at most gamma, none past an
        end-of-sequence), each with a one-hot q: the guess is certain."""
        xs = []
        for x in lookup(self.ids, gamma):
            xs.append(x)
            if x == self.eos:
                break
        qs = []
        for x in xs:
            q = np.zeros(self.V)
            q[x] = 1.0
            qs.append(q)
        return xs, qs

    def keep(self, tokens: list) -> None:
        self.ids += [int(t) for t in tokens]


def speculate(target, draft_model, prompt_ids, rules: sampling.Rules, gamma: int,
              max_new_tokens: int, seed: int = 0, ignore_eos: bool = False,
              min_new_tokens: int = 0, accept=always, check: bool = False,
              on_token=None) -> dict:
    """One speculative run. Returns {"ids", "finish_reason", "stop_reason", "rounds": [{"proposed",
    "accepted", "tokens": [{"token_id", "p", "q", "u", "accepted"}], "resampled", "bonus",
    "cache": [before, after the check, after the rollback]}], "acceptance_rate",
    "target_passes"}. on_token(token) -> (finish_reason, stop_reason) or None: each kept token
    in order; one that ends the text (a stop string, a tool call) ends the run there. accept:
    the acceptance rule (a wrong one is tested to fail). check: each
    round's pass compared with a full recomputation of the same text (the live cache check: it
    holds after every rollback), as the round's cache_diff. draft_model: a model on the
    target's tokens, or NGRAM (the n-gram draft: the text itself)."""
    ngram = isinstance(draft_model, str) and draft_model == NGRAM
    if ngram:
        draft_model = target  # its tokens, its start and its end: the checks below hold
    if target.tokenizer.vocab_size != draft_model.tokenizer.vocab_size:
        raise ValueError("the draft must read the target's tokens: their vocabularies differ "
                         f"({draft_model.tokenizer.vocab_size} and {target.tokenizer.vocab_size})")
    prompt_ids = [int(i) for i in prompt_ids]
    eos, start = target.tokenizer.eos_id, len(target.tokenizer.start_ids)
    if draft_model.tokenizer.eos_id != eos or len(draft_model.tokenizer.start_ids) != start:
        raise ValueError("the draft must end and start sequences as the target does")
    room = target.cfg.context_size - (start + len(prompt_ids))
    if max_new_tokens + gamma > room:
        raise ValueError(f"{max_new_tokens} new tokens and {gamma} drafted ones do not fit the "
                         f"target's window of {target.cfg.context_size} after this prompt")
    rng = np.random.default_rng(seed)
    greedy = rules.is_greedy
    V = target.tokenizer.vocab_size
    penalty = rules.repetition_penalty != 1.0
    session = target.session()  # in its generation dtype, with its KV cache
    p_logits = [session.prefill(prompt_ids)]  # the rows not yet used: here the prefill's last
    draft = NgramDraft(prompt_ids, V, eos) if ngram else Draft(draft_model, prompt_ids)
    out, rounds, proposed_total, accepted_total, pending = [], [], 0, 0, None
    finish = None
    while finish is None:
        made = len(out)
        blocked = lambda i: ignore_eos or made + i < min_new_tokens  # noqa: E731
        seen = (lambda guesses: sampling.seen_mask(V, prompt_ids + out + guesses)) if penalty \
            else (lambda guesses: None)
        xs, qs = draft.propose(rules, min(gamma, max_new_tokens - made), blocked, rng, greedy,
                               seen)
        before = session.length
        fed = ([pending] if pending is not None else []) + xs
        rows = session.score(fed) if fed else np.empty((0, V))  # (g [+1], V)
        ps = p_logits + list(rows)  # g + 1: p for each guess, then for the bonus
        checked = session.length
        diff = None
        if check and len(rows):  # the rows this pass read from the rolled-back cache, recomputed
            full = target.all_logits(session.tokens, session.dtype)  # (checked, V)
            diff = float(np.abs(rows - full[checked - len(rows):]).max())
        tokens, kept, extra, how = [], [], None, "bonus"
        for i, (x, q) in enumerate(zip(xs, qs)):
            p = final(ps[i], rules, blocked(i), seen(xs[:i]), eos)
            u = None if greedy else float(rng.random())
            ok = (int(np.argmax(p)) == x) if greedy else bool(accept(p, q, x, u))
            tokens.append({"token_id": x, "p": float(p[x]), "q": float(q[x]), "u": u,
                           "ratio": float(p[x] / q[x]) if q[x] > 0 else None, "accepted": ok})
            if not ok:
                r = residual(p, q)
                extra = int(np.argmax(p)) if greedy else sampling.pick(r, float(rng.random()))
                how = "resampled"
                break
            kept.append(x)
            if x == eos:
                break
        if extra is None and (not kept or kept[-1] != eos):  # all accepted: the bonus token
            p = final(ps[len(kept)], rules, blocked(len(kept)), seen(kept), eos)
            extra = int(np.argmax(p)) if greedy else sampling.pick(p, float(rng.random()))
        new = (kept + ([extra] if extra is not None else []))[:max_new_tokens - made]
        for j, token in enumerate(new):  # another rule may end the text inside the round
            ending = on_token(token) if on_token is not None and token != eos else None
            if ending is not None:
                new, finish = new[:j + 1], ending
                break
        # roll back: the target keeps what it read up to the last accepted guess; the round's
        # last token (resampled or bonus) is read at the start of the next round's pass
        session.rewind(start + len(prompt_ids) + made + len(kept))
        pending = extra
        out += new
        if finish is None and new[-1] != eos and len(out) < max_new_tokens:
            draft.keep(new)
        p_logits = []
        proposed_total += len(xs)
        accepted_total += len(kept)
        rounds.append({"proposed": len(xs), "accepted": len(kept), "tokens": tokens,
                       how: extra, "kept": len(new), "cache": [before, checked, session.length]})
        if diff is not None:
            rounds[-1]["cache_diff"] = diff
        if finish is not None:
            break
        if out and out[-1] == eos:
            finish = ("stop", "eos")
        elif len(out) >= max_new_tokens:
            finish = ("length", None)
    return {"ids": out, "finish_reason": finish[0], "stop_reason": finish[1], "rounds": rounds,
            "acceptance_rate": accepted_total / proposed_total if proposed_total else None,
            "target_passes": 1 + len(rounds)}
