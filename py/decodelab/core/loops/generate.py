"""The generation loop: prefill the prompt, then one decode step at a time, one record per step.

The same generator drives the CLI, the tests and the browser page. A model provides a
`session()` with `prefill(ids) -> logits (V,)` and `decode(token_id) -> logits (V,)`; everything
about choosing tokens lives here and in `sampling`, nothing of it in the models.

Each step:
  1. logits from the model (prefill for step 0, decode afterwards)
  2. the rules (`decide`, one function for the run, its replay and the page's preview): EOS
     blocked while fewer than min_new_tokens exist or with ignore_eos, the repetition penalty
     on ids already in prompt + output, a mask (token healing's at step 0, JSON mode's
     grammar), temperature and the filters in the chosen order -> the final distribution
  3. one uniform draw u -> the token (greedy: argmax, no draw)
  4. the token's bytes through the text's accounting (`textout`: UTF-8, the stop rules, which
     step owns each character), or, inside a tool call, to the call (`toolcalls`)
  5. with a KV-cached model: the cache length and any context shift, and with cache_check on,
     the logits just used compared with a full recomputation of the whole window (the live
     cache check), recorded per step. The check runs behind the text (`livecheck`): a step's
     cache_diff and cache_ok are None until it catches up, when the run ends or is cancelled
     (finish_checks), so the text goes at the cached speed

Every stop rule is one commented check in `_run`. Tool calls (the tasks model, `toolcalls`):
when the model closes a call, the tool's tokens are appended to the same cache in one pass
(`session.append`): only they are computed, and the model goes on. Each appended token is a step
of its own with source "tool" (no rule chose it, no draw was made); the budget (max_new_tokens)
counts the model's tokens only. Stop strings and the visible text see the answer only.

JSON mode (`grammar.JsonMode`): before the rules, every token whose bytes cannot continue a JSON
object from the answer so far is masked, and end-of-sequence only once the object is complete.
Whether JSON mode is on or the prompt is a card question (`records`), the trace classifies the
answer (`jsonshape.classify`).

What the run fed its model is logged (`feeds`), so `replay` can give back the logits of any
step by making the very same calls again.

A caller ends a run early with cancel() between steps (finish_reason "cancelled").

Dimension legend: V vocabulary size.
"""

import codecs

import numpy as np

from decodelab.core.rules import grammar, healing, jsonshape, sampling, stopping
from decodelab.core.tasks import records
from decodelab.core.loops import search
from decodelab.core.models.session import EMPTY_PROMPT
from decodelab.core.loops.livecheck import CHECK_EVERY, LiveCheck
from decodelab.core.rules.settings import Settings, engine_json, run_json, validate
from decodelab.core.loops.slices import Slices
from decodelab.core.rules.textout import TextOut
from decodelab.core.tasks.toolcalls import MAX_TOOL_CALLS, ToolCalls  # noqa: F401 (the cap, for callers)
from decodelab.errors import FieldError, FieldErrors
from decodelab.fields import encode

TOP_N = 10  # candidates recorded per step (plus the chosen token if it is not among them)


# Up to this many tokens a step record lists each probability array whole (four numpy calls);
# over it, only the candidates' rows: measured in the page, a 1,030-token BPE transformer ran
# 15-20% faster that way, and characters' vocabularies 10% slower.
WHOLE_LISTS_UP_TO = 256


class Generation:
    """One run. Iterate it to get step records; afterwards read finish_reason and text."""

    def __init__(self, model, settings, prefix=None, prompt=None):
        """prefix: a Prefix of this prompt, or of its beginning, to start from (its session is
        forked, not prefilled again; the rest of the prompt is appended), or None; prompt: the
        prompt as `healing.prompt_ids` reads it, when the caller has it already (`prepare`)."""
        self.model = model
        self.prefix = prefix
        self.reused = 0  # the prompt's tokens that came from the prefix's cache
        self.chat = None  # a chat turn: its checked turn (pretrained.chat.start_turn)
        self.settings = settings
        self.rules = settings.rules
        self.tokenizer = model.tokenizer
        self.prompt_ids, self.healing = prompt or healing.prompt_ids(self.tokenizer, settings)
        self.rng = np.random.default_rng(settings.seed)
        self.out = TextOut(settings.stop, settings.include_stop)
        self.tools = ToolCalls(self.tokenizer, settings.tools)
        self.json = grammar.JsonMode(self.tokenizer, settings.json_max_depth,
                                     settings.eos_blocked) \
            if settings.json_mode else None  # FieldError
        self.records = []
        self.output_ids = []
        self.made_before = []  # step -> tokens the model had chosen before it
        self.feeds = []  # step -> what was fed to the model for its logits (see Replay)
        self.finish_reason = None
        self.stop_reason = None
        self.made = 0  # tokens the model chose (the budget counts these)
        self.last = None  # (step, Decision) of the latest model step, for the page's step view
        self.checks = None  # the live cache check, behind the text (`livecheck.LiveCheck`)
        self.session = None  # the model's session, once the first step has made it
        self.check_every = CHECK_EVERY  # unchecked steps it lets pass before it catches up
        self._prompt = None  # the prompt's reading (`read_prompt`), once begun
        self._catching = None  # the live check's catching up (`check_until`), once begun
        self.checks_skipped = 0  # steps whose check was given up (`skip_checks`)
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
        return self.out.visible

    @property
    def tool_calls(self) -> list:
        return self.tools.calls

    def cancel(self, check: bool = True) -> str:
        """Stop between steps (or while the prompt is read). Returns the held-back text that
        this releases (if any). check: the live check catches up on the steps made now; else
        it is left pending (`check_until` catches it up in slices; the trace catches it up)."""
        if check:
            self.finish_checks()
        if self.finish_reason is not None:
            return ""
        self._steps.close()
        return self._finish("cancelled", None, max(len(self.records) - 1, 0))

    @property
    def checking(self) -> bool:
        """The text has ended and the live check has steps left to catch up on."""
        return self.done and self.checks is not None and bool(self.checks.pending)

    def finish_checks(self) -> None:
        """Bring the live check up to the last step (it runs behind the text)."""
        if self.checks is not None:
            self.checks.catch_up()

    def skip_checks(self) -> int:
        """The live check's pending steps given up unchecked (a new run is asked for while this
        one's check catches up): how many."""
        if self._catching is not None:
            self._catching.close()
        self._catching = None
        self.checks_skipped = self.checks.skip() if self.checks is not None else 0
        return self.checks_skipped

    def take_checks(self) -> list:
        """The live check's verdicts reached since the last call: [[step, diff, ok], ...]."""
        return self.checks.take() if self.checks is not None else []

    def new_session(self):
        """The model's session for this run's settings (the run's and its replay's)."""
        return self.model.session(shift=self.settings.context_shift)

    def fork_prefix(self):
        """This run's session, forked from the prefilled prefix's."""
        return self.prefix.session.fork()

    def _from_prefix(self):
        """(session, logits) from the prefix, sliced (`slices`): its session forked, and the
        prompt's tokens after it appended (a conversation's next turn: only its new tokens go
        through the model); or None when the prefix is not the prompt's beginning."""
        p, ids = self.prefix, list(self.prompt_ids)
        if p is None or p.shift != self.settings.context_shift or not p.ids \
                or ids[:len(p.ids)] != p.ids or (len(ids) == len(p.ids) and p.logits is None):
            return None
        session = self.session = self.fork_prefix()
        self.reused = len(p.ids)
        rest = ids[len(p.ids):]
        return session, ((yield from session.append_steps(rest)) if rest else p.logits)

    def _prefill_steps(self):
        """The prompt read into the model's session, sliced (`slices`): (session, logits)."""
        reused = yield from self._from_prefix()
        if reused is not None:  # prefilled once, shared by many runs or turns
            return reused
        session = self.session = self.new_session()
        return session, (yield from session.prefill_steps(self.prompt_ids))  # (V,)

    def read_prompt(self, seconds: float) -> bool:
        """Read the prompt for about `seconds` (at least one piece: PREFILL_CHUNK positions):
        True once it is read, and the first step is a sampling step. The page's worker reads a
        long prompt this way, a batch at a time, so it answers its heartbeat and a Stop while
        it reads; iterating the run reads what is left in one go."""
        if self._prompt is None:
            self._prompt = Slices(self._prefill_steps())
        return self._prompt.run(seconds)

    @property
    def prompt_read(self) -> dict:
        """How much of the prompt is read: {"done", "total"} positions (with the prefix's)."""
        total = len(self.tokenizer.start_ids) + len(self.prompt_ids)
        session = self.session
        return {"done": total if self._prompt is not None and self._prompt.done
                else (session.length if session is not None else 0), "total": total}

    def check_until(self, seconds: float) -> bool:
        """Catch the live check up for about `seconds` (at least one piece): True once no step
        is pending. (finish_checks does it in one go.)"""
        if self.checks is None or not self.checks.pending:
            return True
        if self._catching is None or self._catching.done:
            self._catching = Slices(self.checks.catch_up_steps())
        self._catching.run(seconds)
        return not self.checks.pending

    def run(self) -> "Generation":
        for _ in self:
            pass
        return self

    def run_steps(self):
        """run, sliced (`slices`): a piece per chunk of the prompt, per step and per chunk of
        the live check's passes."""
        while not self.read_prompt(0.0):
            yield None
        for _ in self:
            yield None
            if self.done:  # (iterating on would catch the check up in one go)
                break
        while not self.check_until(0.0):
            yield None
        return self

    def _finish(self, finish_reason, stop_reason, step: int) -> str:
        self.finish_reason, self.stop_reason = finish_reason, stop_reason
        if stop_reason is not None and stop_reason != "eos":
            return ""
        return self.out.finish(step)

    @property
    def meant_json(self) -> bool:
        """Is the answer meant to be JSON: JSON mode; or, from the tasks model, a card question
        (whatever its phrasing) or an answer that says so itself by opening with "{"."""
        if self.settings.json_mode:
            return True
        if not self.tools.markers:
            return False
        return (records.true_record(self.settings.prompt) is not None
                or self.text.lstrip().startswith("{"))

    def json_report(self) -> dict:
        """The answer classified (`jsonshape.classify`), or all None when it is not meant to
        be JSON."""
        if not self.meant_json:
            return dict(jsonshape.NOT_JSON)
        s = self.settings
        return jsonshape.classify(self.text, self.finish_reason, self.stop_reason,
                                  s.max_new_tokens, s.json_max_depth)

    def prompt_pieces(self) -> tuple:
        """The prompt as the model reads it: the text of each of its tokens (a character split
        across two tokens goes with the second), and the text healing took back (or None)."""
        utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        pieces = [utf8.decode(self.tokenizer.token_bytes(i)) for i in self.prompt_ids]
        healed = None
        if self.healing is not None:
            healed = utf8.decode(self.healing.prefix, final=True)
        elif pieces:
            pieces[-1] += utf8.decode(b"", final=True)
        return pieces, healed

    def allowed_at(self, step: int):
        """(mask, why, kind) the rules apply at `step`: the healing mask at step 0 ("healing"),
        the grammar's in JSON mode ("json"), else (None, "", "")."""
        if step == 0 and self.healing is not None:
            return self.healing.allowed, self.healing.why, "healing"
        if self.json is not None:
            return self.json.allowed(step), self.json.why(step), "json"
        return None, "", ""

    def seen_at(self, step: int) -> np.ndarray:
        """(V,) the ids in the prompt and the output before `step`: what the penalty counts."""
        return sampling.seen_mask(self.tokenizer.vocab_size,
                                  list(self.prompt_ids) + self.output_ids[:step])

    def decide(self, step: int, logits, seen=None, settings=None) -> sampling.Decision:
        """The rules at `step` on these logits: the one place a step's inputs are assembled, for
        the run itself, its replay and the page's preview. settings: other rules to apply to the
        same step (the preview's); seen: the penalty's mask when the caller keeps one."""
        s = settings or self.settings
        made = self.made_before[step] if step < len(self.made_before) else self.made
        allowed, why, kind = self.allowed_at(step)
        return sampling.decide(logits, s.rules if settings else self.rules,
                               eos_blocked=s.eos_blocked(made),
                               seen=self.seen_at(step) if seen is None else seen,
                               allowed=allowed, mask_why=why, mask_kind=kind,
                               eos=self.tokenizer.eos_id)

    def _emit(self, step: int, token: int, record: dict) -> str:
        """A token's bytes to the text (and the stop rules) or, inside a tool call or result, to
        the call (record["part"] says where it went); the text now safe to show. On a
        stop-string match, record where the visible text ends."""
        record["part"] = part = self.tools.part_of(token)
        if part != "answer":
            self.out.mark(step)
            record["piece"] = self.tools.take(token, part)
            return ""
        raw = self.tokenizer.token_bytes(token)
        if step == 0 and self.healing is not None:
            raw = self.healing.strip(raw)
        if self.json is not None:
            self.json.feed(raw)
        record["piece"], shown = self.out.feed(step, raw)  # the characters this token completed
        if self.out.matched is not None:
            record["stop_at"] = self.out.stop_at()
        return shown

    def _tool_step(self, step: int, token: int, cache: dict) -> dict:
        """The record of a token the runtime appended (a tool's result): no rule chose it."""
        record = {"step": step, "phase": "tool", "source": "tool", "token_id": token,
                  "token_text": self.tokenizer.label(token),
                  "token_bytes": self.tokenizer.token_bytes(token).hex(), "piece": "",
                  "prob": None, "logprob": None, "u": None, "top": [],
                  "tool_call": dict(self.tools.calls[-1])}  # the call whose result this is
        record["emit"] = self._emit(step, token, record)
        record.update(cache)
        return record

    def _run(self):
        s = self.settings
        if self._prompt is None:
            self._prompt = Slices(self._prefill_steps())
        session, logits = self._prompt.finish()
        self.feeds.append(("prefill", list(self.prompt_ids)))
        seen = self.seen_at(0)  # kept up to date below: the penalty's mask
        cached = session.has_cache  # a KV cache: its length, and the live check
        if cached and s.cache_check:
            self.checks = LiveCheck(session, self.check_every)
        greedy, compare = self.rules.is_greedy, self.rules.orders_can_differ
        step = 0
        while self.made < s.max_new_tokens:
            if self.json is not None:
                self.json.begin()
            self.made_before.append(self.made)
            d = self.decide(step, logits, seen)
            if greedy:
                u, token = None, d.greedy_token()
            else:
                u = float(self.rng.random())  # exactly one draw per sampled step
                token = sampling.pick(d.p_final, u)
            self.last = (step, d)
            self.output_ids.append(token)
            self.made += 1
            seen[token] = True
            record = self._record(step, d, token, u, compare and sampling.orders_differ(d))
            if d.mask_kind == "json":  # the grammar's stage, as the trace records it
                record["grammar"] = self.json.record(d, step)
            if cached:  # rule-free, but per step: the cache's length, any context shift
                record.update(cache_length=session.length, context_shift=session.shifted)
                if self.checks is not None:  # cached logits == full recomputation? (behind)
                    self.checks.add(record, session)
            appended = None
            if token == self.tokenizer.eos_id:  # rule: end-of-sequence ends the run; it is
                # never visible text
                record["emit"] = self._finish("stop", "eos", step)
            else:
                record["emit"] = self._emit(step, token, record)
                if self.out.matched is not None:  # rule: a stop string matched
                    self._finish("stop", self.out.matched, step)
                elif self.tools.closes(token, record["part"]):  # rule: a call is complete
                    appended, ending = self.tools.close(self.made < s.max_new_tokens)
                    if ending is not None:  # rule: the tools setting ends the run at the call
                        record["emit"] += self._finish(*ending, step)
                if self.finish_reason is None and self.made == s.max_new_tokens:
                    record["emit"] += self._finish("length", None, step)  # rule: the budget
            self.records.append(record)
            yield record
            step += 1
            if self.finish_reason is not None:
                self.finish_checks()
                return
            if not appended:
                logits = session.decode(token)
                self.feeds.append(("decode", [token]))
                continue
            # the closing token and the tool's tokens in one pass, after what the cache holds
            logits = session.append([token] + appended)
            cache = {"cache_length": session.length, "context_shift": session.shifted} \
                if cached else {}
            for tool_token in appended:
                self.output_ids.append(tool_token)
                seen[tool_token] = True
                self.made_before.append(self.made)
                self.feeds.append(None)  # no logits of its own: appended with the others
                record = self._tool_step(step, tool_token, cache)
                self.records.append(record)
                yield record
                step += 1
            self.feeds.append(("append", [token] + appended))
        if self.finish_reason is None:  # only reachable if max_new_tokens were 0
            self._finish("length", None, max(step - 1, 0))
        self.finish_checks()

    def _record(self, step, d, token, u, orders_differ) -> dict:
        label = self.tokenizer.label
        top = sampling.likeliest(d.p_temp, TOP_N).tolist()  # likeliest after temperature
        if token not in top:
            top.append(token)
        # Plain Python values for the per-candidate fields: in WebAssembly every numpy call costs
        # microseconds, and indexing numpy scalars one by one would be TOP_N x 4 of them. A small
        # vocabulary goes to lists whole (four calls); a larger one (a real model's 49,152 tokens
        # take milliseconds as lists) has its candidates' rows taken first.
        if d.p_raw.size <= WHOLE_LISTS_UP_TO:
            raw, temp, keep, final = d.p_raw.tolist(), d.p_temp.tolist(), d.kept.tolist(), \
                d.p_final.tolist()
            at = {t: t for t in top}  # a token's place in those lists
        else:
            rows = np.array(top)
            raw, temp, keep, final = (a[rows].tolist() for a in (d.p_raw, d.p_temp, d.kept,
                                                                   d.p_final))
            at = {t: i for i, t in enumerate(top)}
        return {
            "step": step,
            "phase": "prefill" if step == 0 else "decode",
            "source": "model",
            "part": self.tools.part,  # answer, call or result (set again once the token is read)
            "token_id": token,
            "token_text": label(token),
            "token_bytes": self.tokenizer.token_bytes(token).hex(),
            "piece": "",  # the characters this token completed (set once it is decoded)
            "prob": final[at[token]],
            "logprob": d.logprob(token),
            "u": u,
            # final mass of the ids before the chosen one: u landed in [cdf_before, +prob)
            "cdf_before": float(d.p_final[:token].sum()),
            "entropy": sampling.entropy(d.p_final),
            "entropy_raw": sampling.entropy(d.p_raw),
            "kept_count": int(d.kept.sum()),
            "orders_differ": orders_differ,
            "top": [{"token_id": t, "token_text": label(t), "p_raw": raw[at[t]],
                     "p_temp": temp[at[t]], "kept": keep[at[t]], "p_final": final[at[t]]}
                    for t in top],
        }

    def trace(self) -> dict:
        """The trace contract: settings, prompt, visible text, finish and every step record;
        `cut` is the generated text a stop string removed from the end ("" when none was); the
        last step's record says where the visible text ends ("stop_at": step and byte). The
        live check catches up first: every checked step has its verdict."""
        self.finish_checks()
        return {
            "settings": run_json(self.settings, self.model),
            **engine_json(self.model),
            "prompt": self.settings.prompt,
            "prompt_ids": list(self.prompt_ids),
            "healed": None if self.healing is None else self.tokenizer.label(self.healing.removed),
            "text": self.text,
            "finish_reason": self.finish_reason,
            "stop_reason": self.stop_reason,
            "cut": self.out.stopper.cut,
            "tool_calls": self.tools.calls,
            # a call the run ended inside (the budget ran out, or EOS): its text so far
            "open_call": self.tools.open_call(),
            "json": self.json_report(),
            "steps": self.records,
        }


class Prefix:
    """A prompt prefilled once, for several runs of it (prefix sharing): each run forks the
    session, so the prompt's keys and values are computed once, not once per sample."""

    def __init__(self, model, prompt_ids, shift: str = "reread"):
        self.ids, self.shift = [int(i) for i in prompt_ids], shift
        self.session = model.session(shift=shift)
        self.logits = np.array(self.session.prefill(self.ids))  # a copy: runs only read it

    @classmethod
    def kept(cls, session, prompt_ids, shift: str = "reread") -> "Prefix | None":
        """The longest beginning of prompt_ids that a finished run's session holds in its
        cache, as a prefix (its own fork of the session, cut there); None if nothing is shared
        or the window had shifted. Its logits are unknown: a run appends at least one token."""
        start = list(session.model.tokenizer.start_ids)
        if session.shifts or session.tokens[:len(start)] != start:
            return None
        n = 0
        for a, b in zip(session.tokens[len(start):], prompt_ids[:-1]):  # one token left to feed
            if a != int(b):
                break
            n += 1
        if n == 0:
            return None
        out = cls.__new__(cls)
        out.ids, out.shift, out.logits = [int(i) for i in prompt_ids[:n]], shift, None
        out.session = session.fork()
        out.session.rewind(len(start) + n)
        return out


def prepare(library, raw: dict, not_a_number=(), reads_prompt: bool = True):
    """Every check a run makes before it starts, against what the library holds: the settings
    (`settings.validate`, with the prompt's characters), then what depends on the model (the
    prompt as it reads it, stop strings it can write, JSON it can write). Returns (settings,
    model, prompt): the prompt as `healing.prompt_ids` gives it. Raises FieldErrors naming
    every bad field it can tell at once. not_a_number: as `settings.check_each` reads it.
    reads_prompt False: the settings are not run here (an export keeps the rules, not the
    prompt), so an empty prompt is no fault even for a model with no start token.
    raw with "messages" instead of a prompt: a chat, rendered by the model's chat template."""
    messages = raw.get("messages") if isinstance(raw, dict) else None
    if messages is not None:
        raw = {k: v for k, v in raw.items() if k != "messages"}
    settings, model, prompt, _ = _prepare(library, raw, messages, not_a_number, reads_prompt)
    return settings, model, prompt


def prepare_chat(library, raw: dict, messages):
    """`prepare` for a chat turn: raw settings (no prompt) and the conversation -> (settings,
    model, turn), where turn is the conversation checked and rendered once by the model's
    chat template (`pretrained.chat.Turn`: its messages, text and ids)."""
    settings, model, _, turn = _prepare(library, raw, messages)
    return settings, model, turn


def _prepare(library, raw, messages=None, not_a_number=(), reads_prompt: bool = True):
    """prepare's checks; with messages, the prompt is the chat template's turn, returned too."""
    if messages is not None:
        raw = {**raw, "prompt": ""} if isinstance(raw, dict) else raw
    try:
        settings = validate(raw, datasets=library.catalog(), not_a_number=not_a_number)
    except FieldErrors as e:
        raise FieldErrors(e.errors + _prompt_errors(library, raw, e.errors)) from None
    turn = None
    try:
        model = library.for_settings(settings)
        if messages is None:
            prompt = healing.prompt_ids(model.tokenizer, settings)
        else:
            turn = chat_turn(model, messages)
            prompt = (turn.ids, None)
        if reads_prompt and not prompt[0] and not model.tokenizer.start_ids:
            raise FieldError("prompt", EMPTY_PROMPT)
        stop = stopping.vocabulary_error(settings.stop, model.tokenizer)
        if stop is not None:
            raise stop
        if settings.json_mode:
            grammar.check_vocabulary(model.tokenizer)
    except FieldError as e:
        raise FieldErrors([e]) from None
    errors = search.model_errors(settings, model, prompt[0])
    if errors:
        raise FieldErrors(errors)
    return settings, model, prompt, turn


def chat_turn(model, messages):
    """A conversation checked and rendered by the model's chat template, once (its `turn`:
    messages, text, ids), or a FieldError naming the bad message, or saying the model has no
    template decodelab renders."""
    if not model.has_template:
        raise FieldError("messages", "Messages: this model's chat template is not one "
                                     "decodelab renders, so it cannot chat; use the prompt.")
    return model.template.turn(messages)


def chat_ids(model, messages) -> list:
    """A conversation's prompt ids (`chat_turn`)."""
    return chat_turn(model, messages).ids


def start(library, raw: dict):
    """Check raw settings against what the library holds (`prepare`) and begin a run: a
    Generation, or with Strategy beam or a Draft model the search (`search`)."""
    settings, model, prompt = prepare(library, raw)
    if search.kind(settings) is not None:
        return search.start(library, settings, model, prompt[0])
    return Generation(model, settings, prompt=prompt)


def _prompt_errors(library, raw, errors) -> list:
    """Report an out-of-vocabulary prompt together with other bad fields, when we can tell."""
    bad = {e.field for e in errors}
    if not isinstance(raw, dict) or bad & {"prompt", "model", "dataset", "tokenizer"} \
            or not isinstance(raw.get("prompt", ""), str):
        return []
    try:
        model = library.model(raw.get("model", Settings.model), raw.get("dataset", Settings.dataset),
                              raw.get("tokenizer", Settings.tokenizer))
        encode(model.tokenizer, "prompt", raw.get("prompt", ""))
    except FieldError as e:
        return [e]
    return []
