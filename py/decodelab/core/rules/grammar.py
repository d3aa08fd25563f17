"""JSON mode: a grammar mask over the vocabulary, so every token drawn keeps the answer JSON.

At each step the text so far stands in some `jsonshape.JsonState`. A token may be drawn only
if all of its bytes could come next; end-of-sequence only once the object is complete, and
then end-of-sequence alone (whitespace alone while the stop rules hold the end back: `JsonMode`).
Whitespace between the object's tokens is bounded as llama.cpp's JSON grammar bounds it: one
space, or one newline and at most 20 spaces or tabs of indentation (`jsonshape.MAX_INDENT`), so
no run writes more than 21 bytes of it in a row.
Every other token's logit becomes -inf before temperature
and the filters, so the probabilities the rules see are renormalised over what the grammar
allows.

Checking 1,030 tokens byte by byte in Python at every step would cost milliseconds in
WebAssembly. Two things make it cheap:

1. Most bytes move the parser by its mode alone (`jsonshape.step_mode`): a table
   `table[mode, byte] -> mode` (with REJECT and EVENT as two extra rows) runs every token of
   the vocabulary at once, one numpy gather per byte position (at most the longest token's
   length, 17 here). The result depends only on the mode, so it is made for every mode at once
   when the grammar is made: with the tokens sorted longest first, the gather at byte position
   j takes only the tokens that have a byte there, so the work is the vocabulary's total length
   in bytes per mode, not V x L (SmolLM2's 49,152 tokens: 60 modes in ~0.3 s natively), and a
   step then never waits for a mode it has not met yet.
2. The tokens that reach `{ } [ ] ,` outside a string (EVENT: they need the stack of open
   containers, or the depth limit) are few; they alone are fed to a copy of the real state.
3. How much indentation a gap holds is a count, not a mode: a token's share of it is the
   spaces and tabs it starts with (added to the gap's count when the gap has its newline) and
   those after each newline inside it (a new gap), both counted once per token.

The finished mask is kept per (mode, open containers): a card answer visits a few dozen such
states, so after the first runs a step's mask is one dictionary lookup.

Dimension legend: V vocabulary size, L the longest token in bytes, M modes (+2).
"""

import numpy as np

from decodelab.core.rules import jsonshape as js
from decodelab.errors import FieldError

REJECT, EVENT = js.N_MODES, js.N_MODES + 1
PAD = 256  # the byte column of positions past a token's end: the mode stays
EVENT_MODES = frozenset((js.START, js.OBJ_OPEN, js.VALUE, js.ARR_OPEN, js.AFTER)) | js.NUMBER_ENDS
EVENT_MODES |= {gap for gap, base in js.GAP_BASE.items() if base in EVENT_MODES}
MAX_KEPT_STATES = 4096  # masks kept per grammar (each V bytes)
# an object with keys and values: the characters a vocabulary must be able to write
NEEDED = '{}":,'
WHY = "cannot continue the JSON object"
WHY_ENDED = "would go on after the complete JSON object, where the answer ends"


def transition_table() -> np.ndarray:
    """(M + 2, 257) the next mode for each mode and byte (column 256: past the token's end)."""
    table = np.full((js.N_MODES + 2, PAD + 1), REJECT, dtype=np.int16)
    for mode in range(js.N_MODES):
        for byte in range(256):
            if byte in js.EVENT_BYTES and mode not in js.STRING_KIND:
                table[mode, byte] = EVENT if mode in EVENT_MODES else REJECT
            else:
                nxt = js.step_mode(mode, byte, bounded=True)
                table[mode, byte] = REJECT if nxt is None else nxt
        table[mode, PAD] = mode
    table[EVENT, :] = EVENT
    return table


TABLE = transition_table()


class JsonMask:
    """The JSON grammar over one tokenizer's vocabulary, with a depth limit."""

    def __init__(self, tokenizer, max_depth: int = js.DEFAULT_DEPTH):
        self.tokenizer = tokenizer
        self.max_depth = max_depth
        V = tokenizer.vocab_size
        self.bytes = [tokenizer.token_bytes(i) for i in range(V)]
        lengths = np.array([len(b) for b in self.bytes])  # (V,)
        L = max(1, int(lengths.max()))
        order = np.argsort(-lengths, kind="stable")  # (V,) the longest tokens first
        grid = np.full((V, L), PAD, dtype=np.int16)  # (V, L) their bytes, in that order
        for row, i in enumerate(order.tolist()):
            grid[row, :lengths[i]] = np.frombuffer(self.bytes[i], dtype=np.uint8)
        # byte position j: the tokens that have a byte there, a prefix of that order
        columns = [np.ascontiguousarray(grid[:int((lengths > j).sum()), j]) for j in range(L)]
        # tokens with no bytes (end-of-sequence, the special markers) are never JSON text
        self.textless = lengths == 0  # (V,)
        lead, inner = indentation(self.bytes)
        self.lead = lead  # (V,) the spaces and tabs each token starts with
        # (V,) no newline inside the token is followed by more indentation than a gap holds
        self.inner_ok = inner <= js.MAX_INDENT
        self._ends = ends_of_every_mode(columns, order)  # (M, V)
        self._masks = {}  # (mode, stack) -> (V,) allowed

    def ends(self, mode: int) -> np.ndarray:
        """(V,) where each token leaves a parser in `mode`: a mode, REJECT or EVENT."""
        return self._ends[mode]

    def allowed(self, state: js.JsonState) -> np.ndarray:
        """(V,) the tokens that may come next in `state` (read-only; kept for the next time)."""
        key = state.key()
        mask = self._masks.get(key)
        if mask is not None:
            return mask
        ends = self.ends(state.mode)
        mask = (ends != REJECT) & self.inner_ok  # (V,)
        if state.mode in js.INDENTED_MODES:  # the gap's newline is written: its indentation
            mask &= self.lead <= js.MAX_INDENT - state.indent
        for t in np.flatnonzero(ends == EVENT).tolist():  # the stack decides these
            mask[t] = state.accepts(self.bytes[t])
        mask &= ~self.textless
        # the answer may end once the object is complete (and only whitespace may follow it,
        # for a run that ignores end-of-sequence)
        mask[self.tokenizer.eos_id] = state.complete
        mask.flags.writeable = False
        if len(self._masks) >= MAX_KEPT_STATES:
            self._masks.clear()
        self._masks[key] = mask
        return mask


def indentation(tokens) -> tuple:
    """(V,) the spaces and tabs each token starts with, and (V,) the longest run of them after
    a newline inside it. Outside a string these are a gap's indentation; where a token starts
    inside a string its first spaces are text, and the mask asks for them only in a gap."""
    lead = np.zeros(len(tokens), dtype=np.int32)
    inner = np.zeros(len(tokens), dtype=np.int32)
    for i, raw in enumerate(tokens):
        if raw[:1] in (b" ", b"\t"):
            lead[i] = len(raw) - len(raw.lstrip(b" \t"))
        if b"\n" in raw:
            inner[i] = max(len(part) - len(part.lstrip(b" \t")) for part in raw.split(b"\n")[1:])
    return lead, inner


def ends_of_every_mode(columns, order) -> np.ndarray:
    """(M, V) the mode each token leaves a parser in, from each mode: `columns[j]` holds byte j
    of the tokens that have one (sorted longest first by `order`), so a shorter token simply
    stops being moved (its PAD column would leave the mode as it is)."""
    out = np.repeat(np.arange(js.N_MODES, dtype=np.int16)[:, None], len(order), axis=1)
    for col in columns:  # out in the sorted order: (M, V)
        n = len(col)
        out[:, :n] = TABLE[out[:, :n], col]  # (M, n)
    ends = np.empty_like(out)
    ends[:, order] = out  # back to token ids
    return ends


def check_vocabulary(tokenizer, field: str = "json_mode") -> None:
    """A FieldError when the model cannot write a JSON object at all (a character model whose
    corpus has no braces or quotes)."""
    chars = tokenizer.chars
    if chars is None:
        return  # byte-level BPE writes any bytes
    missing = [c for c in NEEDED if c not in chars]
    if missing:
        raise FieldError(field, f"JSON mode: this model's vocabulary has no "
                                f"{' '.join(repr(c) for c in missing)}, so it can never write a "
                                f"JSON object; use a BPE model (Tokenizer: BPE) or turn JSON "
                                f"mode off.")


def masks_for(tokenizer, max_depth: int) -> JsonMask:
    """One JsonMask per tokenizer and depth, kept on the tokenizer (runs share its tables)."""
    kept = tokenizer.__dict__.setdefault("_json_masks", {})
    if max_depth not in kept:
        kept[max_depth] = JsonMask(tokenizer, max_depth)
    return kept[max_depth]


class JsonMode:
    """JSON mode over one run: the grammar's tables, and where the answer stood before each
    step (the mask a step applied can be asked for again, by the page's step view)."""

    def __init__(self, tokenizer, max_depth: int, eos_blocked=lambda step: False):
        """eos_blocked(step): whether the run's stop rules hold end-of-sequence back at a step
        (min_new_tokens, ignore_eos: `Settings.eos_blocked`)."""
        check_vocabulary(tokenizer)  # FieldError
        self.mask = masks_for(tokenizer, max_depth)
        self.state = js.JsonState(max_depth, bounded=True)  # where the answer stands now
        self.states = []  # step -> the state before it
        self.eos_blocked = eos_blocked
        # Once the object is complete the answer ends there, where the run may end: JSON allows
        # any whitespace after it, and a chat model given the choice writes newline after
        # newline until the budget (SmolLM2, greedy: a newline at 54% against the end at 46%).
        # Where the run may not end yet, whitespace alone may follow, as the grammar says.
        self.end_only = np.zeros(len(self.mask.bytes), bool)
        self.end_only[tokenizer.eos_id] = True
        self.end_only.flags.writeable = False

    def begin(self) -> None:
        """A step begins: remember where the answer stands."""
        self.states.append(self.state.copy())

    def allowed(self, step: int) -> np.ndarray:
        """(V,) the tokens the grammar allows at `step` (the next one: as the answer stands):
        end-of-sequence alone once the object is complete and the run may end."""
        return self.end_only if self.ended(step) else self.mask.allowed(self._at(step))

    def why(self, step: int) -> str:
        """Why the tokens the grammar removes at `step` are removed, in words."""
        return WHY_ENDED if self.ended(step) else WHY

    def ended(self, step: int) -> bool:
        """Is the object complete at `step`, where the run may end?"""
        return self._at(step).complete and not self.eos_blocked(step)

    def _at(self, step: int) -> js.JsonState:
        return self.states[step] if step < len(self.states) else self.state

    def feed(self, raw: bytes) -> None:
        """The chosen token's bytes (the mask allowed it, so every byte is taken)."""
        self.state.feed_bytes(raw)

    def record(self, d, step: int) -> dict:
        """What JSON mode did at a step: what the answer expected next, how many tokens the
        grammar kept, and how much of the model's probability it removed."""
        kept = int(np.count_nonzero(d.allowed))
        return {"expects": self.states[step].expected(), "kept_count": kept,
                "removed_count": d.allowed.shape[0] - kept,
                "p_removed": float(d.p_raw[~d.allowed].sum())}

