"""The tool-call protocol of a run: which part of the text a token belongs to, the call being
written, what happens when the model closes it, and the calls made.

The tasks model writes a call between <|call|> and <|/call|> (the markers of `tasks`); the text
between them is the call, not answer text. When the model closes a call, the `tools` setting
decides (as the OpenAI API and vLLM say it, finish_reason "tool_calls" where the run ends):

    off     the run ends at the call (stop_reason "tool_call")
    on      the calculator (`tools`) runs it, and <|/call|> together with <|result|>, the
            result's tokens and <|/result|> are appended to the cache in one pass
    guess   no calculator: only <|result|> is appended, and the model writes the result itself

At most MAX_TOOL_CALLS calls run per run; the next one ends it (stop_reason "tool_call_limit"),
and a call closed with the budget used up ends the run too (nothing would read a result).

A model without the markers makes no calls: every token is answer text.
"""

import codecs

from decodelab.core.tasks import data as tasks, tools

MAX_TOOL_CALLS = 4  # calls run per run; the next one ends it (stop_reason "tool_call_limit")


class ToolCalls:
    def __init__(self, tokenizer, mode: str):
        self.tokenizer = tokenizer
        self.mode = mode  # the tools setting: on, off or guess
        self.markers = tasks.marker_ids(tokenizer)  # {} when the model has no tools
        self.end_call = self.markers.get(tasks.END_CALL)
        self.part = "answer"  # where the next token goes: "answer", "call" or "result"
        self.call_bytes, self.result_bytes = bytearray(), bytearray()
        self.utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self.calls = []  # {"call", "result", "error", "by"} for every call made

    def part_of(self, token: int) -> str:
        """The part a token belongs to, moving to the next part at a marker: <|call|> and
        <|/call|> belong to the call, <|result|> and <|/result|> to the result."""
        m = self.markers
        if not m:
            return "answer"
        part = self.part
        if token == m[tasks.CALL] and part == "answer":
            self.part, part = "call", "call"
            self.call_bytes = bytearray()
            self.utf8.reset()
        elif token == m[tasks.END_CALL] and part == "call":
            self.part = "answer"
        elif token == m[tasks.RESULT] and part != "result":
            self.part, part = "result", "result"
            self.result_bytes = bytearray()
            self.utf8.reset()
        elif token == m[tasks.END_RESULT] and part == "result":
            self.part = "answer"
        return part

    def take(self, token: int, part: str) -> str:
        """A call's or result's token: its bytes go to that part; returns the characters it
        completed there."""
        raw = self.tokenizer.token_bytes(token)
        if part == "call":
            self.call_bytes += raw
        else:
            self.result_bytes += raw
            last = self.calls[-1] if self.calls else None
            if self.part == "answer" and last and last["by"] == "model":
                # guess: the result the model wrote itself, kept with its call
                last["result"] = self.result_bytes.decode("utf-8", errors="replace").strip()
        return self.utf8.decode(raw)

    def closes(self, token: int, part: str) -> bool:
        """Did this token complete a call?"""
        return token == self.end_call and part == "call"

    def close(self, budget_left: bool):
        """The model closed a call: run it (or not) by the tools setting. Returns (ids to append
        after the closing token, None) or (None, (finish_reason, stop_reason)) to end the run."""
        text = self.call_bytes.decode("utf-8", errors="replace")
        self.call_bytes = bytearray()
        if self.mode == "off":
            self.calls.append({"call": text, "result": None, "error": None, "by": None})
            return None, ("tool_calls", "tool_call")
        if len(self.calls) >= MAX_TOOL_CALLS:
            self.calls.append({"call": text, "result": None, "by": None,
                               "error": f"not run: a run makes at most {MAX_TOOL_CALLS} tool "
                                        f"calls"})
            return None, ("tool_calls", "tool_call_limit")
        if not budget_left:  # the budget is used up: nothing would read a result
            self.calls.append({"call": text, "result": None, "error": None, "by": None})
            return None, ("length", None)
        if self.mode == "guess":
            self.calls.append({"call": text, "result": None, "error": None, "by": "model"})
            return tasks.result_ids(self.tokenizer, None), None
        call = tools.run(text)
        self.calls.append({**call.to_json(), "by": "tool"})
        return tasks.result_ids(self.tokenizer, call.reply), None

    def open_call(self):
        """The text of a call the run ended inside (the budget ran out, or EOS), else None."""
        return self.call_bytes.decode("utf-8", errors="replace") if self.part == "call" else None

    def call_of(self, records, step: int):
        """The call whose result a tool step belongs to (calls and results alternate)."""
        closes = [r for r in records[:step + 1] if r["source"] == "model"
                  and r["part"] == "call" and r["token_id"] == self.end_call]
        return self.calls[len(closes) - 1] if closes else None
