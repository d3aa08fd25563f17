"""The two search strategies as runs of the usual settings: beam search (`beam`) and speculative
decoding (`speculative`), with the stop rules every run has.

A run's settings choose it: Strategy beam, or a Draft model. Both end a text by the same rules
as a sampled run, decided here once:

- end-of-sequence: blocked before Min new tokens and with Ignore EOS; otherwise it ends a path
  (beam) or the run (speculative).
- Max new tokens: a path, or the run, ends when the budget is spent.
- stop strings: read on the text decoded so far, across tokens. A beam whose text holds one is
  finished, like one that drew end-of-sequence, and its text is cut there; a speculative round
  that writes one ends the run at that token (the rest of the round is dropped).
- tool calls (the tasks model): only with Tool calls off. A path that closes a call ends there
  (finish_reason "tool_calls", as a sampled run with tools off); no calculator runs inside a
  search, and `prepare` says so when Tool calls is on or guess.

The text of a path is its answer's bytes (a call's tokens are not text), decoded as UTF-8.
"""

from decodelab.core.loops import beam, speculative
from decodelab.core.tasks import data as tasks
from decodelab.core.models.checks import check_tolerance
from decodelab.core.loops.slices import drain
from decodelab.core.rules.settings import engine_json, run_json
from decodelab.core.rules.stopping import StopMatcher
from decodelab.core.tasks.toolcalls import ToolCalls
from decodelab.errors import FieldError


def kind(settings) -> str | None:
    """"beam", "speculative", or None for a sampled run of one path."""
    if settings.strategy == "beam":
        return "beam"
    return "speculative" if settings.draft != "off" else None


def model_errors(settings, model, prompt_ids) -> list:
    """What a search needs of the model it runs on: a window that holds the prompt, the budget
    (and the draft's guesses), and tool calls off for a model that calls tools."""
    what = kind(settings)
    if what is None:
        return []
    errors = []
    window = model.cfg.context_size
    need = 1 + len(prompt_ids) + settings.max_new_tokens
    extra = settings.num_draft_tokens if what == "speculative" else 0
    if need + extra > window:
        room = window - 1 - len(prompt_ids) - extra
        errors.append(FieldError("max_new_tokens",
                                 f"Max new tokens must be at most {max(room, 0)} here: "
                                 f"{'beam search' if what == 'beam' else 'speculative decoding'}"
                                 f" keeps the whole text in the model's window of {window} "
                                 f"positions (the start token, {len(prompt_ids)} of the prompt"
                                 + (f", {extra} drafted" if extra else "") + f"); got "
                                 f"{settings.max_new_tokens}.",
                                 also=("prompt",)))
    if tasks.marker_ids(model.tokenizer) and settings.tools != "off":
        errors.append(FieldError("tools", f"Tool calls must be off with "
                                          f"{'beam search' if what == 'beam' else 'a draft model'}"
                                          f": no calculator runs inside a search, so a path "
                                          f"ends at its call; got {settings.tools}.",
                                 also=("strategy" if what == "beam" else "draft",)))
    return errors


class Ending:
    """The rules that end a text besides end-of-sequence and the budget: stop strings and
    tool calls, read on a path's new tokens."""

    def __init__(self, tokenizer, settings):
        self.tokenizer = tokenizer
        self.stops, self.include_stop = tuple(settings.stop), settings.include_stop
        self.end_call = tasks.marker_ids(tokenizer).get(tasks.END_CALL)

    def text(self, ids) -> tuple:
        """A path's new tokens -> (its visible text, the stop string that matched or None, the
        text the stop string cut, whether its last token closed a tool call)."""
        calls = ToolCalls(self.tokenizer, "off")
        raw, closed = bytearray(), False
        for t in ids:
            if t == self.tokenizer.eos_id:
                break
            part = calls.part_of(t)
            closed = calls.closes(t, part)
            if part == "answer":
                raw += self.tokenizer.token_bytes(t)
        matcher = StopMatcher(self.stops, self.include_stop)
        matcher.push(bytes(raw).decode("utf-8", errors="replace"))
        matcher.flush()
        return matcher.visible, matcher.matched, matcher.cut, closed

    def __call__(self, ids):
        """(finish_reason, stop_reason) when these new tokens end the text, else None."""
        if not self.stops and (self.end_call is None or ids[-1] != self.end_call):
            return None
        _, matched, _, closed = self.text(ids)
        if matched is not None:
            return "stop", matched
        return ("tool_calls", "tool_call") if closed else None


def _base_trace(settings, model, prompt_ids) -> dict:
    tokenizer = model.tokenizer
    return {"settings": run_json(settings, model), **engine_json(model),
            "prompt": settings.prompt,
            "prompt_ids": list(prompt_ids),
            "prompt_tokens": [tokenizer.label(i) for i in prompt_ids]}


class BeamRun:
    """A beam search with a run's settings. run() searches; trace() is the result."""

    strategy = "beam"

    def __init__(self, model, settings, prompt_ids):
        self.model, self.settings, self.prompt_ids = model, settings, list(prompt_ids)
        self.tokenizer = model.tokenizer
        self.ending = Ending(self.tokenizer, settings)
        s = settings
        self.rules = beam.BeamRules(
            num_beams=s.num_beams, max_new_tokens=s.max_new_tokens,
            length_penalty=s.length_penalty,
            early_stopping={"true": True, "false": False}.get(s.early_stopping, s.early_stopping),
            no_repeat_ngram_size=s.no_repeat_ngram_size,
            num_return_sequences=s.num_return_sequences)
        self.result = None

    def run(self) -> "BeamRun":
        return drain(self.run_steps())

    def run_steps(self):
        """run, sliced (`slices`)."""
        s = self.settings
        self.result = yield from beam.beam_search_steps(
            self.model, self.prompt_ids, self.rules, check=s.cache_check,
            eos_blocked=lambda step: s.eos_blocked(step),
            ends=self.ending if (s.stop or self.ending.end_call is not None) else None)
        return self

    def beams(self) -> list:
        """The finished paths, best first: tokens, text, score and log-probability."""
        label, lp = self.tokenizer.label, self.rules.length_penalty
        out = []
        for b in self.result["beams"]:
            text, _, cut, _ = self.ending.text(b["ids"])
            n = len(b["ids"])
            logprob = b["score"] * float(n) ** lp  # the score undone: the plain sum
            out.append({"ids": b["ids"], "tokens": [label(t) for t in b["ids"]], "text": text,
                        "cut": cut, "score": b["score"], "logprob": logprob,
                        "logprob_per_token": logprob / n, "finish_reason": b["finish_reason"],
                        "stop_reason": b["stop_reason"]})
        return out

    def steps(self) -> list:
        """The search step by step, with each token's text."""
        label, out = self.tokenizer.label, []
        for st in self.result["steps"]:
            rec = dict(st)
            rec["candidates"] = [dict(c, token_text=label(c["token_id"]))
                                 for c in st["candidates"]]
            rec["kept"] = [dict(k, token_text=label(k["token_id"])) for k in st["kept"]]
            rec["bank"] = [dict(b, text=self.ending.text(b["ids"])[0]) for b in st["bank"]]
            if "cache_diff" in st:  # the model's own limit (SmolLM2 runs in float32)
                rec["cache_ok"] = st["cache_diff"] <= check_tolerance(self.model)
            out.append(rec)
        return out

    def trace(self) -> dict:
        beams = self.beams()
        best = beams[0] if beams else None
        out = _base_trace(self.settings, self.model, self.prompt_ids)
        out.update(strategy="beam", text=best["text"] if best else "",
                   finish_reason=best["finish_reason"] if best else None,
                   stop_reason=best["stop_reason"] if best else None,
                   cut=best["cut"] if best else "", beams=beams,
                   stopped=self.result["stopped"], steps=self.steps(),
                   # the cache check's limit for this model's logits (its rounding's)
                   cache_tolerance=check_tolerance(self.model) if self.settings.cache_check
                   else None)
        return out


class SpeculativeRun:
    """Speculative decoding with a run's settings: the transformer checks the draft's guesses.
    run() decodes; trace() is the result, with every round."""

    strategy = "speculative"

    def __init__(self, model, draft_model, settings, prompt_ids):
        self.model, self.draft_model = model, draft_model
        self.settings, self.prompt_ids = settings, list(prompt_ids)
        self.tokenizer = model.tokenizer
        self.ending = Ending(self.tokenizer, settings)
        self.result = None

    def run(self) -> "SpeculativeRun":
        s = self.settings
        new = []  # the tokens kept so far, read one by one for the other endings

        def on_token(token):
            new.append(token)
            return self.ending(new)

        self.result = speculative.speculate(
            self.model, self.draft_model, self.prompt_ids, s.rules, s.num_draft_tokens,
            s.max_new_tokens, seed=s.seed, ignore_eos=s.ignore_eos,
            min_new_tokens=s.min_new_tokens, check=s.cache_check, on_token=on_token)
        return self

    def steps(self) -> list:
        """One record per token of the text: the round it came from, how (accepted from the
        draft, resampled or the bonus), its probability under the model and under the draft."""
        label, out, step = self.tokenizer.label, [], 0
        for r, rnd in enumerate(self.result["rounds"]):
            accepted = [t for t in rnd["tokens"] if t["accepted"]]
            for i in range(rnd["kept"]):
                if i < len(accepted):
                    t, source = accepted[i], "accepted"
                    p, q = t["p"], t["q"]
                    token = t["token_id"]
                else:
                    source = "resampled" if "resampled" in rnd else "bonus"
                    token, p, q = rnd[source], None, None
                out.append({"step": step, "round": r, "source": source, "token_id": token,
                            "token_text": label(token), "p": p, "q": q})
                step += 1
        return out

    def trace(self) -> dict:
        res = self.result
        text, _, cut, _ = self.ending.text(res["ids"])
        out = _base_trace(self.settings, self.model, self.prompt_ids)
        rounds = []
        for rnd in res["rounds"]:
            r = dict(rnd)
            r["tokens"] = [dict(t, token_text=self.tokenizer.label(t["token_id"]))
                           for t in rnd["tokens"]]
            if "cache_diff" in rnd:
                r["cache_ok"] = rnd["cache_diff"] <= check_tolerance(self.model)
            rounds.append(r)
        out.update(strategy="speculative", draft=self.settings.draft, text=text,
                   ids=res["ids"], finish_reason=res["finish_reason"],
                   stop_reason=res["stop_reason"], cut=cut, rounds=rounds,
                   acceptance_rate=res["acceptance_rate"], target_passes=res["target_passes"],
                   tokens_per_pass=len(res["ids"]) / res["target_passes"],
                   steps=self.steps())
        return out


def start(library, settings, model, prompt_ids):
    """The run these settings ask for (settings already checked by `generate.prepare`)."""
    if kind(settings) == "beam":
        return BeamRun(model, settings, prompt_ids)
    if settings.draft == speculative.NGRAM:  # the text itself: any model's own tokens
        return SpeculativeRun(model, speculative.NGRAM, settings, prompt_ids)
    draft = library.model(settings.draft, settings.dataset, settings.tokenizer)
    if draft.tokenizer.vocab_size != model.tokenizer.vocab_size:
        raise FieldError("draft", f"Draft model must read the model's tokens: the "
                                  f"{settings.draft} has {draft.tokenizer.vocab_size} and the "
                                  f"model {model.tokenizer.vocab_size}.")
    return SpeculativeRun(model, draft, settings, prompt_ids)
