"""A GGUF file's own tokenizer: byte-level BPE over its vocabulary and merges (GPT-2's kind, the
one SmolLM2 uses), with the same methods as decodelab's other tokenizers.

Text becomes tokens in three steps, as SmolLM2's tokenizer.json and llama.cpp's "smollm"
pre-tokenizer do them:
  1. every number character (Unicode category N: "7", "½", "²", "Ⅻ") is cut out on its own;
  2. each remaining stretch is cut by GPT-2's pattern
         's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
     (Python's `re` has no \\p{..} classes, so the letter and number classes are built from
     `unicodedata` once, and \\s is Unicode's White_Space list, which is what the Rust library
     means by it; Python's own \\s would also take the separators U+001C..U+001F);
  3. each piece's UTF-8 bytes, written in GPT-2's printable alphabet (one character per byte),
     are merged by rank (`bytelevel`, the rule every BPE of the package shares).

Special tokens (the file's "control" tokens: <|endoftext|>, <|im_start|>, <|im_end|>, ...) are
single ids that typed text never produces: "<|im_end|>" typed is ten characters of text. Only
the program that builds a sequence (the chat template, `chat.py`) places them. Their bytes are
empty: they never become visible text.

The end of a sequence is the file's eos_token_id (<|im_end|> for SmolLM2, the end of a chat
turn); a sequence starts with nothing unless the file says add_bos_token.
"""

import re
import unicodedata
from operator import itemgetter

import numpy as np

from decodelab.core.tokens.bytelevel import ByteLevel
from decodelab.core.interop.hftokenizer import byte_chars
from decodelab.errors import UnknownCharacters
from decodelab.pretrained.gguf import GGUFError

NORMAL, CONTROL = 1, 3  # llama.cpp's token types (1 normal text, 3 control, 6 a raw byte, ...)
# Unicode's White_Space property (PropList.txt): what \s means to the Rust library
WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"

_CLASSES = {}


def unicode_class(first_letter: str) -> str:
    """The characters whose general category starts with `first_letter` ("L" letters, "N"
    numbers) as the inside of a `re` character class (ranges). Every code point's category is
    read once, for all the letters at once (the first time, about 0.15 s natively and 0.7 s in
    the page; the model's load does it, in the part that reads the tokenizer)."""
    if not _CLASSES:
        first = "".join(map(itemgetter(0), map(unicodedata.category, map(chr, range(0x110000)))))
        codes = np.frombuffer(first.encode("ascii"), np.uint8)
        esc = lambda cp: re.escape(chr(cp))  # noqa: E731
        for letter in "LN":
            inside = np.concatenate(([False], codes == ord(letter), [False]))
            edges = np.flatnonzero(inside[1:] != inside[:-1]).tolist()  # starts, ends + 1
            _CLASSES[letter] = "".join(esc(a) if a == b - 1 else f"{esc(a)}-{esc(b - 1)}"
                                       for a, b in zip(edges[::2], edges[1::2]))
    return _CLASSES[first_letter]


_PATTERNS = {}


def pre_tokenizer():
    """(numbers, pieces): the compiled patterns of steps 1 and 2, made once."""
    if not _PATTERNS:
        L, N, S = unicode_class("L"), unicode_class("N"), WHITE_SPACE
        _PATTERNS["numbers"] = re.compile(f"([{N}])")
        _PATTERNS["pieces"] = re.compile(
            f"'s|'t|'re|'ve|'m|'ll|'d| ?[{L}]+| ?[{N}]+| ?[^{S}{L}{N}]+|[{S}]+(?![^{S}])|[{S}]+")
    return _PATTERNS["numbers"], _PATTERNS["pieces"]


def split(text: str) -> list:
    """The pieces merges stay inside (steps 1 and 2). Joined, they give the text back."""
    numbers, pieces = pre_tokenizer()
    out = []
    for i, part in enumerate(numbers.split(text)):
        if i % 2:
            out.append(part)  # one number character
        elif part:
            out.extend(pieces.findall(part))
    return out


class GGUFTokenizer(ByteLevel):
    """Byte-level BPE from a GGUF file's tokenizer.ggml.* metadata."""

    name = "gguf-bpe"

    def __init__(self, tokens, token_types, merges, eos_id: int, bos_id=None,
                 add_bos: bool = False, model_name: str = "gguf", pad_id=None):
        self.vocab_size = len(tokens)
        if len(token_types) != self.vocab_size:
            raise GGUFError(f"the tokenizer lists {self.vocab_size} tokens and "
                            f"{len(token_types)} token types")
        if not 0 <= eos_id < self.vocab_size:
            raise GGUFError(f"the end-of-sequence id {eos_id} is not a token of the vocabulary "
                            f"(0..{self.vocab_size - 1})")
        self.tokens = list(tokens)
        self.model_name = model_name
        types = np.asarray(token_types)
        self.special_ids = {self.tokens[i]: int(i) for i in np.nonzero(types == CONTROL)[0]}
        self._special = np.zeros(self.vocab_size, bool)
        self._special[list(self.special_ids.values())] = True
        self.eos_id = int(eos_id)
        self.bos_id = None if bos_id is None else int(bos_id)
        self.pad_id = self.eos_id if pad_id is None else int(pad_id)
        self.start_ids = (self.bos_id,) if add_bos and bos_id is not None else ()
        ids = {t: i for i, t in enumerate(self.tokens)}
        chars = byte_chars()
        self._byte_ids = [ids.get(c) for c in chars]  # byte b -> its token's id (None: no token)
        self.missing_bytes = bytes(b for b, i in enumerate(self._byte_ids) if i is None)
        if len(self.missing_bytes) > 64:
            raise GGUFError(f"the vocabulary lacks {len(self.missing_bytes)} of the 256 byte "
                            "tokens: it is not a byte-level BPE")
        byte_of = {c: b for b, c in enumerate(chars)}
        self._bytes = []
        for i, t in enumerate(self.tokens):
            if self._special[i]:
                self._bytes.append(b"")
            else:
                try:
                    self._bytes.append(bytes(byte_of[c] for c in t))
                except KeyError:
                    raise GGUFError(f"token {i} ({t!r}) is not written in the byte alphabet of "
                                    "a byte-level BPE") from None
        self.ranks, self.merged = {}, []
        for r, merge in enumerate(merges):
            a, sep, b = merge.partition(" ")
            if not sep or a not in ids or b not in ids or a + b not in ids:
                raise GGUFError(f"merge {r} ({merge!r}) joins tokens the vocabulary lacks")
            self.ranks[(ids[a], ids[b])] = r
            self.merged.append(ids[a + b])
        self._marked = re.compile("(" + "|".join(map(re.escape, self.special_ids)) + ")") \
            if self.special_ids else None
        self._cache = {}

    @classmethod
    def from_gguf(cls, gguf) -> "GGUFTokenizer":
        kind = gguf.get("tokenizer.ggml.model")
        if kind != "gpt2":
            raise GGUFError(f"the file's tokenizer is {kind!r}; decodelab reads byte-level BPE "
                            "tokenizers (tokenizer.ggml.model 'gpt2')")
        pre = gguf.get("tokenizer.ggml.pre", "default")
        if pre != "smollm":
            raise GGUFError(f"the file's pre-tokenizer is {pre!r}; decodelab splits text as "
                            "'smollm' does (each number character alone, then GPT-2's pattern)")
        tokens = gguf.require("tokenizer.ggml.tokens")

        def token_id(key, required=False):  # a whole number naming one of the tokens
            if key not in gguf.metadata and not required:
                return None
            i = gguf.integer(key)
            if i >= len(tokens):
                raise GGUFError(f"metadata {key} is {i}; the vocabulary has {len(tokens)} tokens")
            return i

        made = cls(tokens, gguf.require("tokenizer.ggml.token_type"),
                   gguf.require("tokenizer.ggml.merges"),
                   token_id("tokenizer.ggml.eos_token_id", required=True),
                   token_id("tokenizer.ggml.bos_token_id"),
                   bool(gguf.get("tokenizer.ggml.add_bos_token", False)),
                   gguf.get("general.name", "gguf"), token_id("tokenizer.ggml.padding_token_id"))
        # its pre-tokenizer's patterns made now, with the model's load, not inside the first
        # text's encoding (in the page that was a chat turn's start, 1.6 s in one job)
        pre_tokenizer()
        return made

    def describe(self) -> str:
        return (f"any text (byte-level BPE, {self.vocab_size} tokens, "
                f"{len(self.special_ids)} of them special)")

    def split(self, text: str) -> list:
        return split(text)

    def byte_ids(self, piece: str, text: str) -> list:
        """A character with a byte the vocabulary has no token for (SmolLM2 lacks 21 of the
        256: six control characters such as U+0004, and lead bytes of unassigned planes) raises
        UnknownCharacters naming each; Hugging Face's tokenizer drops such bytes silently."""
        tok = [self._byte_ids[b] for b in piece.encode("utf-8")]
        if None in tok:
            raise UnknownCharacters(self.unencodable(text))
        return tok

    def unencodable(self, text: str) -> list:
        """The characters of `text` that have a byte without a token, sorted, each once."""
        missing = set(self.missing_bytes)
        return sorted({c for c in text if missing.intersection(c.encode("utf-8"))})

    def is_special(self, token_id: int) -> bool:
        return bool(self._special[token_id])

    def merges(self) -> list:
        """The merges by rank, each as its two tokens' strings (the file's order)."""
        by_rank = sorted(self.ranks.items(), key=lambda item: item[1])
        return [[self.tokens[a], self.tokens[b]] for (a, b), _ in by_rank]

    def special_label(self, token_id: int):
        return self.tokens[token_id] if self._special[token_id] else None
