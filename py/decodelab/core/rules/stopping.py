"""Stop strings, matched on the decoded text across token boundaries, for streaming output.

A stop string can end in the middle of a token or span several tokens ("\\n\\n" may arrive as
two tokens). So matching happens on the accumulated generated text, not on token ids, and while
streaming, a tail of text that could still turn out to be the start of a stop string is held
back: nothing shown to the learner ever has to be taken back.

When a stop string matches, the visible text is cut at the start of the match (or kept through
its end when include_stop is set). If several stop strings match, the one starting earliest
wins; at the same start, the longest. When generation ends for another reason (EOS, the budget,
a cancel), the held-back tail is released: it was never part of a stop string.

Only generated text is searched, never the prompt (as in vLLM and llama.cpp).

Two rules refuse a stop string that could never match, so it does not silently do nothing
(`budget_error`, `vocabulary_error`); the field table checks the rest (how many, how long).
"""

from decodelab.errors import FieldError


def budget_error(stops, tokenizer: str, budget: int):
    """A character model writes one character per token, so a stop string longer than the whole
    budget could never match (a BPE token can carry many characters: there the budget says
    nothing about length). The FieldError for the first such string, or None."""
    if tokenizer != "chars":
        return None
    for i, stop in enumerate(stops, 1):
        if len(stop) > budget:
            return FieldError("stop", f"Stop strings: entry {i} has {len(stop)} characters but "
                                      f"Max new tokens is {budget}, so it could never match; "
                                      f"shorten it or raise Max new tokens.")
    return None


def vocabulary_error(stops, tokenizer):
    """With one token per character, a stop string holding a character outside the vocabulary
    could never be written (byte-level BPE can write any text, so there every stop string can
    match). The FieldError for the first such string, or None."""
    known = tokenizer.chars
    if known is None:
        return None
    for i, stop in enumerate(stops, 1):
        never = sorted(set(stop) - set(known))
        if never:
            shown = " ".join(repr(c) for c in never)
            return FieldError("stop", f"Stop strings: entry {i} has characters this model never "
                                      f"writes ({shown}), so it could never match; use only: "
                                      f"{tokenizer.describe()}.")
    return None


class StopMatcher:
    def __init__(self, stops=(), include_stop: bool = False):
        self.stops = tuple(s for s in stops if s)
        self.include_stop = include_stop
        self.longest = max((len(s) for s in self.stops), default=0)
        self.text = ""  # everything generated so far (visible text is a prefix of it)
        self.shown = 0  # how many characters of self.text have been released
        self.matched = None  # the stop string that ended generation, if any
        self.cut = ""  # what the match removed from the end: the stop string, and what followed

    def push(self, piece: str) -> str:
        """Add newly generated text; return the part that is now safe to show."""
        if self.matched is not None:
            return ""
        start_search = max(0, len(self.text) - self.longest + 1)
        self.text += piece
        if not self.stops:
            return self._release(len(self.text))
        hit = self._earliest_match(start_search)
        if hit is not None:
            at, stop = hit
            self.matched = stop
            end = at + len(stop) if self.include_stop else at
            self.text, self.cut = self.text[:end], self.text[end:]
            return self._release(len(self.text))
        return self._release(len(self.text) - self._held_back())

    def flush(self) -> str:
        """Release whatever is held back (generation ended without completing a stop string)."""
        return self._release(len(self.text))

    @property
    def visible(self) -> str:
        return self.text[: self.shown]

    @property
    def held(self) -> str:
        """Generated text not shown yet: it may still turn out to start a stop string."""
        return self.text[self.shown:]

    def _release(self, upto: int) -> str:
        upto = max(upto, self.shown)
        out = self.text[self.shown:upto]
        self.shown = upto
        return out

    def _earliest_match(self, start: int):
        best = None
        for stop in self.stops:
            at = self.text.find(stop, start)
            if at >= 0 and (best is None or at < best[0] or (at == best[0] and len(stop) > len(best[1]))):
                best = (at, stop)
        return best

    def _held_back(self) -> int:
        """Length of the longest tail of the text that is a proper prefix of some stop string."""
        text = self.text
        for n in range(min(self.longest - 1, len(text)), 0, -1):
            tail = text[-n:]
            if any(s.startswith(tail) for s in self.stops):
                return n
        return 0
