"""The one tool a model may call: a calculator for whole numbers, read by a small grammar.

A tool call is text the model wrote, so it is untrusted input: it is parsed here, never given to
`eval`, and anything outside the grammar gets an error in words instead of a result.

    expression := term (("+" | "-") term)*
    term       := factor ("*" factor)*
    factor     := "-" factor | "(" expression ")" | digits

Spaces are allowed between the parts. Limits keep every call small and quick: at most
MAX_CHARS characters, MAX_DIGITS digits per number, MAX_DEPTH nested brackets or signs, and no
value (the result or any part of it) beyond MAX_VALUE in size. There is no division (whole
numbers stay whole), no power (a power is how a tiny call makes a huge number), no names.

`run(text)` -> Call(call, result, error): the result as the text the model reads next, or None
with an error sentence.
"""

from dataclasses import dataclass

MAX_CHARS = 64
MAX_DIGITS = 9
MAX_DEPTH = 8
MAX_VALUE = 10**15


class ToolError(ValueError):
    """A call the calculator does not run; the message says why, in words."""


@dataclass(frozen=True)
class Call:
    call: str  # the text between the call's start and end tokens
    result: str | None  # what the calculator answered, as text; None on an error
    error: str | None  # why it did not answer

    def to_json(self) -> dict:
        return {"call": self.call, "result": self.result, "error": self.error}

    @property
    def reply(self) -> str:
        """The text the model reads back: the result, or "error: ..."."""
        return self.result if self.error is None else f"error: {self.error}"


class _Parser:
    def __init__(self, text: str):
        self.text, self.i = text, 0

    def where(self) -> str:
        return f"at character {self.i + 1}"

    def peek(self) -> str:
        while self.i < len(self.text) and self.text[self.i] == " ":
            self.i += 1
        return self.text[self.i] if self.i < len(self.text) else ""

    def expression(self, depth: int) -> int:
        value = self.term(depth)
        while self.peek() in ("+", "-"):
            op = self.text[self.i]
            self.i += 1
            right = self.term(depth)
            value = _bounded(value + right if op == "+" else value - right)
        return value

    def term(self, depth: int) -> int:
        value = self.factor(depth)
        while self.peek() == "*":
            self.i += 1
            value = _bounded(value * self.factor(depth))
        return value

    def factor(self, depth: int) -> int:
        if depth > MAX_DEPTH:
            raise ToolError(f"brackets and signs are nested more than {MAX_DEPTH} deep")
        c = self.peek()
        if c == "-":
            self.i += 1
            return -self.factor(depth + 1)
        if c == "(":
            self.i += 1
            value = self.expression(depth + 1)
            if self.peek() != ")":
                raise ToolError(f"a bracket is not closed ({self.where()})")
            self.i += 1
            return value
        if c.isdigit() and c.isascii():
            start = self.i
            while self.i < len(self.text) and self.text[self.i].isascii() \
                    and self.text[self.i].isdigit():
                self.i += 1
            digits = self.text[start:self.i]
            if len(digits) > MAX_DIGITS:
                raise ToolError(f"a number has {len(digits)} digits (at character {start + 1}); "
                                f"at most {MAX_DIGITS} are allowed")
            return int(digits)
        if not c:
            raise ToolError("the call ends where a number was expected")
        raise self.unexpected("expected a number, '-' or '('")

    def unexpected(self, expected: str) -> ToolError:
        """The error for the character at hand; a word is named whole, as an unknown name."""
        c = self.peek()
        if c.isalpha() or c == "_":
            start = self.i
            while self.i < len(self.text) and (self.text[self.i].isalnum()
                                               or self.text[self.i] == "_"):
                self.i += 1
            return ToolError(f"unknown name {self.text[start:self.i][:20]!r} (at character "
                             f"{start + 1}): the calculator knows whole numbers, + - * and "
                             f"brackets only")
        return ToolError(f"unexpected {c!r} {self.where()}: {expected}")


def _bounded(value: int) -> int:
    if abs(value) > MAX_VALUE:
        raise ToolError(f"a value goes beyond {MAX_VALUE:,} in size")
    return value


def evaluate(text: str) -> int:
    """The value of a calculator expression; ToolError for anything the grammar does not allow."""
    if not isinstance(text, str):
        raise ToolError("the call is not text")
    if len(text) > MAX_CHARS:
        raise ToolError(f"the call has {len(text)} characters; at most {MAX_CHARS} are allowed")
    parser = _Parser(text)
    if not parser.peek():
        raise ToolError("the call is empty")
    value = parser.expression(0)
    if parser.peek():
        raise parser.unexpected("expected + - * or the end of the call")
    return value


def run(text: str) -> Call:
    """Run one call: its result, or an error in words. Never raises."""
    try:
        return Call(text, str(evaluate(text)), None)
    except ToolError as e:
        return Call(text, None, str(e))
