"""The generation loop: prefill the prompt, then one decode step at a time, one record per step.

The same generator drives the CLI, the tests and the browser page. A model provides a
`session()` with `prefill(ids) -> logits (V,)` and `decode(token_id) -> logits (V,)`; everything
about choosing tokens lives here and in `sampling`, nothing of it in the models.

Each step:
  1. logits from the model (prefill for step 0, decode afterwards)
  2. the rules (`sampling.decide`): EOS blocked while fewer than min_new_tokens exist or with
     ignore_eos, the repetition penalty on ids already in prompt + output, temperature and the
     filters in the chosen order -> the final distribution
  3. one uniform draw u -> the token (greedy: argmax, no draw)
  4. the stop rules, each checked in one place below
  5. with a KV-cached model: the cache length and any context shift, and with cache_check on,
     the logits just used compared with a full recomputation of the whole window (the live
     cache check), recorded per step

A caller ends a run early with cancel() between steps (finish_reason "cancelled").

Dimension legend: V vocabulary size.
"""

import numpy as np

from decodelab import sampling
from decodelab.fields import FieldError, FieldErrors, encode
from decodelab.settings import Settings, validate
from decodelab.stopping import StopMatcher
from decodelab.tokenizer import EOS

TOP_N = 10  # candidates recorded per step (plus the chosen token if it is not among them)


class Generation:
    """One run. Iterate it to get step records; afterwards read finish_reason and text."""

    def __init__(self, model, settings):
        self.model = model
        self.settings = settings
        self.tokenizer = model.tokenizer
        self.prompt_ids = encode(self.tokenizer, "prompt", settings.prompt)  # FieldError
        self.rng = np.random.default_rng(settings.seed)
        self.stopper = StopMatcher(settings.stop, settings.include_stop)
        self.records = []
        self.output_ids = []
        self.finish_reason = None
        self.stop_reason = None
        self._steps = self._run()

    def __iter__(self):
        return self._steps

    def __next__(self):
        return next(self._steps)

    @property
    def done(self) -> bool:
        return self.finish_reason is not None

    @property
    def text(self) -> str:
        return self.stopper.visible

    def cancel(self) -> str:
        """Stop between steps. Returns the held-back text that this releases (if any)."""
        if self.finish_reason is not None:
            return ""
        self._steps.close()
        return self._finish("cancelled", None)

    def run(self) -> "Generation":
        for _ in self:
            pass
        return self

    def _finish(self, finish_reason, stop_reason) -> str:
        self.finish_reason, self.stop_reason = finish_reason, stop_reason
        return self.stopper.flush() if stop_reason is None or stop_reason == "eos" else ""

    def _run(self):
        s = self.settings
        rules = s.rules
        session = self.model.session()
        logits = session.prefill(self.prompt_ids)  # (V,)
        seen = sampling.seen_mask(self.tokenizer.vocab_size, self.prompt_ids)  # for the penalty
        cached = hasattr(session, "check_report")  # a KV cache: its length, and the live check
        greedy, compare = rules.is_greedy, rules.orders_can_differ
        for step in range(s.max_new_tokens):
            # the rules, in sampling: EOS blocking, the penalty, temperature and the filters
            d = sampling.decide(logits, rules, eos_blocked=s.eos_blocked(step), seen=seen)
            if greedy:
                u, token = None, d.greedy_token()
            else:
                u = float(self.rng.random())  # exactly one draw per sampled step
                token = sampling.pick(d.p_final, u)
            self.output_ids.append(token)
            seen[token] = True
            record = self._record(step, d, token, u, compare and sampling.orders_differ(d))
            if cached:  # rule-free, but per step: cached logits == full recomputation?
                record.update(session.check_report(s.cache_check))
            if token == EOS:  # rule: end-of-sequence ends the run; EOS is never visible text
                record["emit"] = self._finish("stop", "eos")
            else:
                record["emit"] = self.stopper.push(self.tokenizer.label(token))
                if self.stopper.matched is not None:  # rule: a stop string matched
                    self._finish("stop", self.stopper.matched)
                elif step == s.max_new_tokens - 1:  # rule: the budget is used up
                    record["emit"] += self._finish("length", None)
            self.records.append(record)
            yield record
            if self.finish_reason is not None:
                return
            logits = session.decode(token)
        if self.finish_reason is None:  # only reachable if max_new_tokens were 0
            self._finish("length", None)

    def _record(self, step, d, token, u, orders_differ) -> dict:
        label = self.tokenizer.label
        top = np.argsort(-d.p_temp, kind="stable")[:TOP_N].tolist()  # likeliest after temperature
        if token not in top:
            top.append(token)
        # Plain Python values for the per-candidate fields: in WebAssembly every numpy call
        # costs microseconds, and indexing numpy scalars one by one would be TOP_N x 4 of them.
        raw, temp, keep, final = d.p_raw.tolist(), d.p_temp.tolist(), d.kept.tolist(), \
            d.p_final.tolist()
        return {
            "step": step,
            "phase": "prefill" if step == 0 else "decode",
            "token_id": token,
            "token_text": label(token),
            "prob": final[token],
            "logprob": d.logprob(token),
            "u": u,
            # final mass of the ids before the chosen one: u landed in [cdf_before, +prob)
            "cdf_before": float(d.p_final[:token].sum()),
            "entropy": sampling.entropy(d.p_final),
            "entropy_raw": sampling.entropy(d.p_raw),
            "kept_count": int(d.kept.sum()),
            "orders_differ": orders_differ,
            "top": [{"token_id": i, "token_text": label(i), "p_raw": raw[i], "p_temp": temp[i],
                     "kept": keep[i], "p_final": final[i]} for i in top],
        }

    def trace(self) -> dict:
        """The trace contract: settings, prompt, visible text, finish and every step record;
        `cut` is the generated text a stop string removed from the end ("" when none was)."""
        return {
            "settings": self.settings.to_json(),
            "prompt": self.settings.prompt,
            "text": self.text,
            "finish_reason": self.finish_reason,
            "stop_reason": self.stop_reason,
            "cut": self.stopper.cut,
            "steps": self.records,
        }


def start(library, raw: dict) -> Generation:
    """Validate raw settings against what the library holds, load the model, begin a run.

    Raises FieldErrors naming every bad field at once, an unknown prompt character included.
    """
    try:
        settings = validate(raw, datasets=library.datasets())
    except FieldErrors as e:
        raise FieldErrors(e.errors + _prompt_errors(library, raw, e.errors)) from None
    try:
        return Generation(library.model(settings.model, settings.dataset), settings)
    except FieldError as e:
        raise FieldErrors([e]) from None


def _prompt_errors(library, raw, errors) -> list:
    """Report an out-of-vocabulary prompt together with other bad fields, when we can tell."""
    bad = {e.field for e in errors}
    if not isinstance(raw, dict) or bad & {"prompt", "model", "dataset"} \
            or not isinstance(raw.get("prompt", ""), str):
        return []
    try:
        model = library.model(raw.get("model", Settings.model), raw.get("dataset", Settings.dataset))
        encode(model.tokenizer, "prompt", raw.get("prompt", ""))
    except FieldError as e:
        return [e]
    return []
