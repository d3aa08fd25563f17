"""Characters <-> token ids, with a distinct end-of-sequence symbol.

Id 0 is EOS (label "<eos>"); ids 1..V-1 are the corpus characters in sorted order. A bigram or
transformer reads EOS as "start of a sequence" too, which is why an empty prompt is valid.
EOS never becomes visible text: `decode` drops it.

The other tokenizer, byte-level BPE, lives in `bpe.py`; both are what `base.Tokenizer` declares
(encode, decode, label, labels, describe, token_bytes, arrays), and `tokenfile.from_arrays` reads
either back from a model file.
"""

import numpy as np

from decodelab.core.tokens.base import Tokenizer
from decodelab.errors import UnknownCharacters

EOS = 0
EOS_LABEL = "<eos>"


class CharTokenizer(Tokenizer):
    name = "chars"
    eos_id = EOS  # the token that ends a sequence
    start_ids = (EOS,)  # what a context starts with: EOS, read as "a sequence starts here"

    def __init__(self, chars: str):
        chars = "".join(sorted(set(chars)))
        if not chars:
            raise ValueError("a tokenizer needs at least one character")
        self.chars = chars
        self.vocab_size = len(chars) + 1
        self._ids = {c: i + 1 for i, c in enumerate(chars)}
        self._labels = [EOS_LABEL] + list(chars)

    def encode(self, text: str) -> list:
        """Text to ids; raises UnknownCharacters naming every character it does not know."""
        unknown = sorted({c for c in text if c not in self._ids})
        if unknown:
            raise UnknownCharacters(unknown)
        return [self._ids[c] for c in text]

    def decode(self, ids) -> str:
        return "".join(self._labels[i] for i in ids if i != EOS)

    def label(self, token_id: int) -> str:
        return self._labels[token_id]

    def token_bytes(self, token_id: int) -> bytes:
        """The UTF-8 bytes of a token's character (EOS: none)."""
        return b"" if token_id == EOS else self._labels[token_id].encode("utf-8")

    def arrays(self) -> dict:
        """What a model file stores to rebuild this tokenizer (see from_arrays)."""
        return {"chars": np.array(self.chars)}

    def labels(self) -> list:
        return list(self._labels)

    def describe(self) -> str:
        return describe_chars(self.chars)


def describe_chars(chars: str) -> str:
    """A short human description of a character set, e.g. "a-z" or "a-z, A-Z, 0-9 and ' -"."""
    ranges = [("abcdefghijklmnopqrstuvwxyz", "a-z"), ("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "A-Z"),
              ("0123456789", "0-9")]
    parts, rest = [], set(chars)
    for letters, name in ranges:
        if set(letters) <= rest:
            parts.append(name)
            rest -= set(letters)
    named = {" ": "space", "\n": "newline", "\t": "tab"}
    others = [named.get(c, c) for c in sorted(rest)]
    if len(others) > 20:
        others = others[:20] + ["..."]
    return ", ".join(parts + others) if parts or others else "(nothing)"
