"""JSON read one byte at a time: where an answer stands, and whether it is valid, cut or broken.

`JsonState` is a pushdown automaton for one JSON object (the answer's shape): a mode (what may
come next) and a stack of the open containers. `feed(byte)` moves it on, or refuses the byte
and stays where it was, so the same object can say, after any prefix, whether some text could
still finish it. That is the one question both users ask:

- `classify` reads a finished answer: `valid` (one complete object, trailing whitespace
  allowed), `incomplete` (every byte could still begin a valid object, but the run ended:
  the budget ran out, a stop string cut it, the model ended it, or the run was stopped) or
  `malformed` (a byte no JSON can continue from, and which one).
- `grammar.JsonMask` asks it, at every step, which tokens of the vocabulary could come next.

The grammar is RFC 8259's, with three choices: the top level must be an object (the answers
here are records), containers nest at most `max_depth` deep, and text inside strings must be
well-formed UTF-8 in the sense that each lead byte is followed by as many continuation bytes as
it announces (the finer limits on overlong forms and surrogates are left to the decoder, which
shows a broken one as U+FFFD; it is still a valid JSON string then).

A fourth choice is the mask's alone (`bounded=True`): the whitespace between two tokens of the
object (a gap) is nothing, one space, or one newline and at most `MAX_INDENT` (20) spaces or tabs
of indentation: llama.cpp's JSON grammar (grammars/json.gbnf,
`ws ::= | " " | "\n" [ \t]{0,20}`). RFC 8259 allows any run of whitespace, and a small model
given the choice writes newline after newline (Outlines, for the same reason, allows a single
space by default, `[ ]?`); this bound still lets an answer be compact or indented. Reading a
finished answer (`classify`) keeps the RFC's rule: any whitespace is valid JSON.

Modes are small ints, so a table indexed by mode and byte (`grammar`) can run many tokens at
once. The transitions that need the stack are the ones on `{ } [ ] ,` outside strings
(`EVENT_BYTES`); every other transition depends on the mode alone.
"""

import json

DEFAULT_DEPTH = 8  # fields' json_max_depth default
WS = frozenset(b" \t\n\r")
DIGITS = frozenset(b"0123456789")
HEX = frozenset(b"0123456789abcdefABCDEF")
ESCAPES = frozenset(b'"\\/bfnrt')
EVENT_BYTES = frozenset(b"{}[],")
MAX_INDENT = 20  # spaces or tabs after a gap's newline (llama.cpp's grammars/json.gbnf)
LITERALS = {ord("t"): b"true", ord("f"): b"false", ord("n"): b"null"}

# --- modes ----------------------------------------------------------------------------------
_NAMES = []


def _mode(name: str) -> int:
    _NAMES.append(name)
    return len(_NAMES) - 1


START = _mode("the opening '{' of the object")
OBJ_OPEN = _mode("a key in quotes or '}'")
OBJ_KEY = _mode("a key in quotes")
COLON = _mode("':' after the key")
VALUE = _mode("a value (a string, number, object, array, true, false or null)")
ARR_OPEN = _mode("a value or ']'")
AFTER = _mode("',' or the closing bracket")
DONE = _mode("nothing more: the object is complete")
# strings: key or value, plain text, after a backslash, inside \uXXXX, inside a UTF-8 character
STRING = {}
for _kind in ("key", "value"):
    STRING[_kind, "text"] = _mode(f"more of the {_kind} string or its closing quote")
    STRING[_kind, "escape"] = _mode("an escape letter: one of \" \\ / b f n r t u")
    for _i in range(4):
        STRING[_kind, "hex", _i] = _mode("a hexadecimal digit of a \\u escape")
    for _i in (1, 2, 3):
        STRING[_kind, "utf8", _i] = _mode("the rest of a UTF-8 character")
MINUS = _mode("a digit after '-'")
ZERO = _mode("'.', 'e', or the end of the number")
INT = _mode("a digit, '.', 'e', or the end of the number")
DOT = _mode("a digit after '.'")
FRAC = _mode("a digit, 'e', or the end of the number")
EXP = _mode("a digit, '+' or '-' after 'e'")
EXP_SIGN = _mode("a digit of the exponent")
EXP_INT = _mode("a digit, or the end of the number")
# literals: (word, how many of its letters are written)
LITERAL = {}
for _word in LITERALS.values():
    for _i in range(1, len(_word)):
        LITERAL[_word, _i] = _mode(f"the rest of '{_word.decode()}'")
LITERAL_AT = {m: key for key, m in LITERAL.items()}
# a gap in the bounded grammar: after its one space (nothing more), or after its newline (only
# indentation more); the mode the gap is in comes back at the first other byte
GAP_MODES = (START, OBJ_OPEN, OBJ_KEY, COLON, VALUE, ARR_OPEN, AFTER, DONE)
SPACED = {m: _mode(_NAMES[m]) for m in GAP_MODES}
INDENTED = {m: _mode(f"{_NAMES[m]}, or more indentation") for m in GAP_MODES}
GAP_BASE = {**{s: m for m, s in SPACED.items()}, **{s: m for m, s in INDENTED.items()}}
INDENTED_MODES = frozenset(INDENTED.values())
N_MODES = len(_NAMES)
STRING_KIND = {m: key[0] for key, m in STRING.items()}
NUMBER_ENDS = frozenset((ZERO, INT, FRAC, EXP_INT))  # a number may end in these modes


def expected(mode: int) -> str:
    """What may come next in a mode, in words."""
    return _NAMES[mode]


def _utf8_follow(byte: int):
    """How many continuation bytes a lead byte announces (0 for ASCII), None for a byte that
    cannot begin a character."""
    if byte < 0x80:
        return 0
    if 0xC2 <= byte <= 0xDF:
        return 1
    if 0xE0 <= byte <= 0xEF:
        return 2
    if 0xF0 <= byte <= 0xF4:
        return 3
    return None


def _gap(mode: int, byte: int, bounded: bool):
    """A whitespace byte in a gap of `mode` (a mode of GAP_MODES): where it leaves the parser."""
    if not bounded:
        return mode
    if byte == 0x20:
        return SPACED[mode]
    return INDENTED[mode] if byte == 0x0A else None  # a gap begins with a space or a newline


def step_mode(mode: int, byte: int, bounded: bool = False):
    """The move of one byte that needs no stack: the next mode, or None (refused). For a byte
    of EVENT_BYTES outside a string this says nothing (`JsonState.feed` decides those).
    bounded: whitespace as the mask has it (a gap is one space, or a newline and indentation;
    how much indentation is `JsonState`'s count)."""
    if mode in GAP_BASE:
        if byte in WS:  # the gap goes on: indentation after its newline, nothing after a space
            return mode if mode in INDENTED_MODES and byte in b" \t" else None
        mode = GAP_BASE[mode]  # the gap is over
    kind = STRING_KIND.get(mode)
    if kind is not None:
        return _string_step(kind, mode, byte)
    if mode in LITERAL_AT:
        word, i = LITERAL_AT[mode]
        if byte != word[i]:
            return None
        return AFTER if i + 1 == len(word) else LITERAL[word, i + 1]
    if mode in GAP_MODES and byte in WS:
        return _gap(mode, byte, bounded)
    if mode in (OBJ_OPEN, OBJ_KEY):
        return STRING["key", "text"] if byte == 0x22 else None
    if mode == COLON:
        return VALUE if byte == 0x3A else None
    if mode in (VALUE, ARR_OPEN):
        if byte == 0x22:
            return STRING["value", "text"]
        if byte == 0x2D:
            return MINUS
        if byte == 0x30:
            return ZERO
        if byte in DIGITS:
            return INT
        if byte in LITERALS:
            return LITERAL[LITERALS[byte], 1]
        return None
    return _number_step(mode, byte, bounded)


def _string_step(kind: str, mode: int, byte: int):
    if mode == STRING[kind, "text"]:
        if byte == 0x22:
            return COLON if kind == "key" else AFTER
        if byte == 0x5C:
            return STRING[kind, "escape"]
        if byte < 0x20:
            return None  # control characters must be escaped
        follow = _utf8_follow(byte)
        if follow is None:
            return None
        return STRING[kind, "text"] if follow == 0 else STRING[kind, "utf8", follow]
    if mode == STRING[kind, "escape"]:
        if byte == 0x75:  # u
            return STRING[kind, "hex", 0]
        return STRING[kind, "text"] if byte in ESCAPES else None
    for i in range(4):
        if mode == STRING[kind, "hex", i]:
            if byte not in HEX:
                return None
            return STRING[kind, "text"] if i == 3 else STRING[kind, "hex", i + 1]
    for i in (1, 2, 3):
        if mode == STRING[kind, "utf8", i]:
            if not 0x80 <= byte <= 0xBF:
                return None
            return STRING[kind, "text"] if i == 1 else STRING[kind, "utf8", i - 1]
    raise AssertionError(mode)


def _number_step(mode: int, byte: int, bounded: bool):
    digit = byte in DIGITS
    if mode == MINUS:
        return (ZERO if byte == 0x30 else INT) if digit else None
    if mode in (ZERO, INT, FRAC) and byte in b"eE":
        return EXP
    if mode in (ZERO, INT) and byte == 0x2E:
        return DOT
    if mode == INT and digit:
        return INT
    if mode in (DOT, FRAC) and digit:
        return FRAC
    if mode == EXP:
        return EXP_SIGN if byte in b"+-" else (EXP_INT if digit else None)
    if mode in (EXP_SIGN, EXP_INT) and digit:
        return EXP_INT
    if mode in NUMBER_ENDS and byte in WS:
        return _gap(AFTER, byte, bounded)  # whitespace ends a number
    return None


class JsonState:
    """Where a JSON object stands after the bytes fed so far: mode, open containers, bytes.
    bounded: whitespace as the mask allows it (a gap is one space, or a newline and at most
    MAX_INDENT spaces or tabs, counted in `indent`); else any whitespace, as RFC 8259."""

    __slots__ = ("mode", "stack", "max_depth", "fed", "bounded", "indent")

    def __init__(self, max_depth: int = DEFAULT_DEPTH, mode: int = START, stack=(), fed: int = 0,
                 bounded: bool = False, indent: int = 0):
        self.mode, self.stack, self.max_depth, self.fed = mode, list(stack), max_depth, fed
        self.bounded, self.indent = bounded, indent

    def copy(self) -> "JsonState":
        return JsonState(self.max_depth, self.mode, self.stack, self.fed, self.bounded,
                         self.indent)

    def key(self) -> tuple:
        return self.mode, tuple(self.stack), self.indent

    @property
    def complete(self) -> bool:
        return self.mode == DONE or GAP_BASE.get(self.mode) == DONE

    def feed(self, byte: int) -> bool:
        """Move on by one byte; False (and no change) when no JSON object can continue so."""
        mode = self.mode
        if byte in EVENT_BYTES and mode not in STRING_KIND:
            return self._event(GAP_BASE.get(mode, mode), byte)
        nxt = step_mode(mode, byte, self.bounded)
        if nxt is None:
            return False
        indent = 0
        if nxt in INDENTED_MODES and byte != 0x0A:  # indentation after the gap's newline
            indent = self.indent + 1
            if indent > MAX_INDENT:
                return False
        self.mode, self.indent = nxt, indent
        self.fed += 1
        return True

    def _event(self, mode: int, byte: int) -> bool:
        stack = self.stack
        if mode in NUMBER_ENDS:  # the byte ends the number, then counts as after a value
            mode = AFTER
        if byte in b"{[":
            if not (mode == VALUE or mode == ARR_OPEN or (mode == START and byte == 0x7B)):
                return False
            if len(stack) >= self.max_depth:
                return False
            stack.append(byte)
            self.mode = OBJ_OPEN if byte == 0x7B else ARR_OPEN
        elif byte in b"}]":
            opener = 0x7B if byte == 0x7D else 0x5B
            closes = (mode == AFTER or (mode == OBJ_OPEN and byte == 0x7D)
                      or (mode == ARR_OPEN and byte == 0x5D))
            if not closes or not stack or stack[-1] != opener:
                return False
            stack.pop()
            self.mode = AFTER if stack else DONE
        else:  # ","
            if mode != AFTER or not stack:
                return False
            self.mode = OBJ_KEY if stack[-1] == 0x7B else VALUE
        self.fed += 1
        self.indent = 0
        return True

    def feed_bytes(self, data: bytes) -> int:
        """Feed bytes until one is refused; how many were taken (len(data) when all were)."""
        for i, b in enumerate(data):
            if not self.feed(b):
                return i
        return len(data)

    def expected(self) -> str:
        """What may come next, in words."""
        base = GAP_BASE.get(self.mode, self.mode)
        if base == AFTER and self.stack:
            words = f"',' or '{'}' if self.stack[-1] == 0x7B else ']'}'"
        else:
            words = expected(base)
        if self.mode not in INDENTED_MODES or self.indent == MAX_INDENT:
            return words
        left = MAX_INDENT - self.indent
        return f"{words}, or up to {left} more space{'' if left == 1 else 's'} of indentation"

    def accepts(self, data: bytes) -> bool:
        """Could these bytes come next? (The state itself does not move.)"""
        return self.copy().feed_bytes(data) == len(data)


# --- a finished answer, classified ------------------------------------------------------------

def _why_cut(finish_reason, stop_reason, max_new_tokens) -> str:
    if finish_reason == "length":
        budget = "" if max_new_tokens is None else \
            f"of {max_new_tokens} new token{'' if max_new_tokens == 1 else 's'} "
        return (f"the length budget {budget}ran out before the object was closed: a cut, not a "
                f"model error; allow more new tokens")
    if finish_reason == "stop" and stop_reason not in (None, "eos"):
        return f"the stop string {stop_reason!r} cut the answer before the object was closed"
    if finish_reason == "stop":
        return "the model ended its answer (end-of-sequence) before the object was closed"
    if finish_reason == "tool_calls":
        return "the run ended at a tool call before the object was closed"
    if finish_reason == "cancelled":
        return "the run was stopped before the object was closed"
    return "the answer ends before the object was closed"


def classify(text: str, finish_reason=None, stop_reason=None, max_new_tokens=None,
             max_depth: int = DEFAULT_DEPTH) -> dict:
    """{"status": "valid"|"incomplete"|"malformed", "error": words or None, "value": the parsed
    object or None} for an answer meant to be one JSON object."""
    state = JsonState(max_depth)
    data = text.encode("utf-8")
    taken = state.feed_bytes(data)
    if taken < len(data):
        at = len(data[:taken].decode("utf-8", errors="replace"))  # in characters
        where = f"the answer's character {at + 1}" if at < len(text) else "the end"
        shown = text[at:at + 1]
        nesting = (" (nested deeper than the limit of " f"{max_depth})"
                   if shown in "{[" and len(state.stack) >= max_depth else "")
        return {"status": "malformed", "value": None,
                "error": f"not JSON from {where} ({shown!r}){nesting}: expected "
                         f"{state.expected()}"}
    if state.complete:
        return {"status": "valid", "error": None, "value": json.loads(text)}
    return {"status": "incomplete", "value": None,
            "error": _why_cut(finish_reason, stop_reason, max_new_tokens)}


NOT_JSON = {"status": None, "error": None, "value": None}
