"""A chat model's prompt: messages -> the text and ids its chat template makes, rendered here
without a template engine.

SmolLM2's template (the GGUF's tokenizer.chat_template, Jinja) is ChatML:

    <|im_start|>system\\n{system}<|im_end|>\\n        (the default system message first, when
    <|im_start|>user\\n{message}<|im_end|>\\n          the first message is not a system one)
    <|im_start|>assistant\\n{answer}<|im_end|>\\n
    <|im_start|>assistant\\n                         (add_generation_prompt: the answer's start)

`ChatTemplate.from_gguf` accepts a file whose template is this one, with whatever default system
message it names, and reads that message out of it; any other template is not guessed at (the
model still generates from plain text; `chat` says why it cannot render).

The markers are special tokens placed as single ids; what a person wrote is encoded as text and
may not contain a marker: a message with "<|im_end|>" typed in is refused, naming it, since
the model would read it as the end of the turn if any tokenizer took the markup at its word.
"""

import dataclasses
import re

from decodelab.errors import FieldError, UnknownCharacters
from decodelab.fields import MAX_SEED

ROLES = ("system", "user", "assistant")
START, END = "<|im_start|>", "<|im_end|>"
# SmolLM2's template with its default system message taken out: {SYSTEM} marks where it goes
CHATML = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
          "{{ '<|im_start|>system\n{SYSTEM}<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + "
          "message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
_CHATML = re.compile(re.escape(CHATML).replace(re.escape("{SYSTEM}"), "([^'\\\\]*)"))


@dataclasses.dataclass(frozen=True)
class Turn:
    """A conversation checked once and what the template makes of it: the messages as given
    (checked), the prompt as text (markers written out) and its ids. A turn's run and its trace
    read these; nothing checks or renders the conversation again."""

    messages: list
    text: str
    ids: list


class ChatTemplate:
    def __init__(self, tokenizer, default_system: str):
        self.tokenizer, self.default_system = tokenizer, default_system
        missing = [m for m in (START, END) if m not in tokenizer.special_ids]
        if missing:
            raise ValueError(f"the vocabulary has no special token {missing[0]}")
        self.start_id, self.end_id = tokenizer.special_ids[START], tokenizer.special_ids[END]

    @classmethod
    def from_gguf(cls, gguf, tokenizer):
        """The file's template when it is SmolLM2's ChatML, else None."""
        found = _CHATML.fullmatch(gguf.get("tokenizer.chat_template") or "")
        if found is None or START not in tokenizer.special_ids or END not in tokenizer.special_ids:
            return None
        return cls(tokenizer, found.group(1))

    def jinja(self) -> str:
        """The template as the file wrote it (what transformers' apply_chat_template runs)."""
        return CHATML.replace("{SYSTEM}", self.default_system)

    def check(self, messages) -> list:
        """Messages as a list of {"role", "content"} dicts, or FieldError naming what is wrong."""
        if not isinstance(messages, list) or not messages:
            raise FieldError("messages", "Messages must be a list of at least one message, each "
                             '{"role": ..., "content": ...}.')
        out = []
        for i, m in enumerate(messages):
            where = f"Message {i + 1}"
            if not isinstance(m, dict) or set(m) - {"role", "content"} or "role" not in m \
                    or "content" not in m:
                raise FieldError("messages", f'{where} must be {{"role": ..., "content": ...}}; '
                                 f"got {m!r}.")
            role, content = m["role"], m["content"]
            if role not in ROLES:
                raise FieldError("messages", f"{where} has the role {role!r}; roles are "
                                 f"{', '.join(ROLES)}.")
            if role == "system" and i:
                raise FieldError("messages", f"{where} is a system message; only the first "
                                 "message may be one.")
            if not isinstance(content, str):
                raise FieldError("messages", f"{where}'s content must be text; got "
                                 f"{type(content).__name__}.")
            marks = [s for s in self.tokenizer.special_ids if s in content]
            if marks:
                raise FieldError("messages", f"{where} contains {', '.join(marks)}, the markup of "
                                 "a special token; the template places those itself, so a "
                                 "message may not contain them.")
            out.append({"role": role, "content": content})
        return out

    def turn(self, messages, add_generation_prompt: bool = True) -> Turn:
        """The conversation checked (FieldError naming the bad message), rendered and encoded,
        once: what a chat turn runs from and what its trace says."""
        messages = self.check(messages)
        turns = messages if messages[0]["role"] == "system" else \
            [{"role": "system", "content": self.default_system}] + messages
        return Turn(messages, self._text(turns, add_generation_prompt),
                    self._ids(turns, len(turns) - len(messages), add_generation_prompt))

    def render(self, messages, add_generation_prompt: bool = True) -> str:
        """The prompt as text, markers written out, as transformers' apply_chat_template."""
        return self.turn(messages, add_generation_prompt).text

    def ids(self, messages, add_generation_prompt: bool = True) -> list:
        """The prompt's ids: each marker one special id, everything else encoded as text."""
        return self.turn(messages, add_generation_prompt).ids

    @staticmethod
    def _text(turns, add_generation_prompt: bool) -> str:
        """The messages the template renders (the default system message first when the first
        message is not a system one) as text."""
        text = "".join(f"{START}{m['role']}\n{m['content']}{END}\n" for m in turns)
        return text + (f"{START}assistant\n" if add_generation_prompt else "")

    def _ids(self, turns, first: int, add_generation_prompt: bool) -> list:
        """The same as ids; `first` is 1 when the default system message was put first (a bad
        message is named by its place in the conversation as given)."""
        enc, out = self.tokenizer.encode, []
        for i, m in enumerate(turns):
            try:
                text = enc(f"{m['role']}\n{m['content']}")
            except UnknownCharacters as e:
                raise FieldError("messages", f"Message {i - first + 1} has characters this "
                                 f"model cannot read: {' '.join(map(repr, e.chars))}.") from None
            out += [self.start_id] + text + [self.end_id] + enc("\n")
        return out + ([self.start_id] + enc("assistant\n") if add_generation_prompt else [])

    @staticmethod
    def trace(trace: dict, turn: Turn) -> dict:
        """A chat turn's trace: the run's, with the prompt as rendered, its ids, and the
        conversation with the answer appended (what `chat` prints and the page exports)."""
        trace.update(prompt_ids=list(turn.ids), prompt=turn.text,
                     messages=list(turn.messages) + [{"role": "assistant",
                                                      "content": trace.get("text", "")}])
        return trace


def dropped(model, prompt_ids) -> int:
    """How many of a prompt's first tokens the window has no room for: the context shift's rule
    (`layers.window_start`), so the model reads the prompt without them."""
    from decodelab.core.models.layers import window_start

    start = len(model.tokenizer.start_ids)
    return max(0, window_start(start + len(prompt_ids), model.cfg.context_size) - start)


def start_turn(library, raw: dict, messages, last=None):
    """One chat turn, the page's and the command line's alike: the settings and the conversation
    go through every check a run makes (`generate.prepare_chat`: the settings, the messages,
    the stop strings, JSON mode, a search's needs), the turn draws with its own seed
    (`turn_seed`), and the run is a Generation, or with Strategy beam or a Draft model the
    search. `last`: the page's previous run; when it was a turn of this conversation whose
    cache still holds the prompt's beginning, its cache is forked there and only the new
    tokens are read (a conversation over the window is read anew). The run's `chat` is the
    checked turn (`Turn`), which its trace reads."""
    from decodelab.core.loops import search
    from decodelab.core.loops.generate import Generation, Prefix, prepare_chat

    settings, model, turn = prepare_chat(library, raw, messages)
    settings = dataclasses.replace(settings, seed=turn_seed(settings.seed, turn.messages))
    if search.kind(settings) is not None:
        run = search.start(library, settings, model, turn.ids)
    else:
        prefix = None
        if last is not None and dropped(model, turn.ids) == 0 and \
                getattr(last, "chat", None) is not None and last.model is model and \
                getattr(last, "session", None) is not None:
            prefix = Prefix.kept(last.session, turn.ids, settings.context_shift)
        run = Generation(model, settings, prefix=prefix, prompt=(turn.ids, None))
    run.chat = turn
    return run


def turn_seed(seed: int, messages) -> int:
    """The seed a conversation's turn draws with: the Seed setting advanced by one for each
    answer the conversation holds already (turn 1 draws with the seed itself, turn 2 with
    seed + 1, ...). With one seed for every turn, each turn would restart the same stream of
    draws, and a sampled follow-up tends to repeat the last answer word for word. A turn is
    reproducible from its trace: its settings hold the seed it drew with, and the command
    line's chat, given the same history, draws with the same."""
    return (int(seed) + answers(messages)) % (MAX_SEED + 1)


def conversation_seed(seed: int, messages) -> int:
    """The Seed setting a turn that drew with `seed` was asked with (`turn_seed` undone): what
    the command line's chat is given to repeat the turn."""
    return (int(seed) - answers(messages)) % (MAX_SEED + 1)


def answers(messages) -> int:
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
