"""The tokenizer a model file holds: byte-level BPE merges (with any special tokens), or a
character set. Both model kinds store theirs with `arrays()` and read it back with `from_arrays`.

Its own module because it knows both tokenizers, and neither of them needs the other.
"""

from decodelab.core.tokens.bpe import BPE
from decodelab.core.tokens.tokenizer import CharTokenizer


def from_arrays(z):
    """The tokenizer a model file (an open npz) holds."""
    if "merges" in z.files:
        return BPE(z["merges"], z["specials"].tolist() if "specials" in z.files else ())
    return CharTokenizer(str(z["chars"]))
