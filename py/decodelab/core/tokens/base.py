"""What a tokenizer is to the rest of the package, declared once: what the loops, the rules, the
lessons and the page ask of every tokenizer (the corpus's characters, decodelab's byte-level
BPE, a GGUF file's own, a checkpoint's bare ids), with the answers most of them share as
defaults. A caller asks; it never probes for an attribute a tokenizer might lack.

Ids are whole numbers below `vocab_size`. `eos_id` ends a sequence and `start_ids` begin a
context (for the models trained here both are id 0, EOS). Special tokens (`special_ids`: markup
-> id) are not text: `encode` never makes one from what a person typed, and their bytes are
empty. `chars` is the alphabet of a tokenizer that encodes only its characters (None: any
text), which a rule that builds text from tokens reads.
"""

from types import MappingProxyType


class Tokenizer:
    name = ""  # what a model file and a trace call this kind of tokenizer
    vocab_size = 0
    eos_id = 0  # the token that ends a sequence
    # the ids transformers calls beginning of sequence (None: none) and padding; a tokenizer
    # trained here has the one token EOS for all three
    bos_id = pad_id = 0
    start_ids = ()  # what a context starts with
    special_ids = MappingProxyType({})  # markup -> id; none unless the tokenizer has them
    chars = None  # the only characters it encodes, or None: any text

    def encode(self, text: str) -> list:
        """Text a person gave -> ids (never a special token); raises UnknownCharacters naming
        each character it cannot encode."""
        raise NotImplementedError

    def encode_marked(self, text: str) -> list:
        """Text the package wrote itself, where a special token's markup stands for it."""
        return self.encode(text)

    def decode(self, ids) -> str:
        raise NotImplementedError

    def is_special(self, token_id: int) -> bool:
        return False

    def label(self, token_id: int) -> str:
        """A token as a person reads it."""
        raise NotImplementedError

    def labels(self) -> list:
        return [self.label(i) for i in range(self.vocab_size)]

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes a token stands for (a special token: none)."""
        raise NotImplementedError

    def describe(self) -> str:
        """What text it encodes, in a few words."""
        raise NotImplementedError

    def arrays(self) -> dict:
        """What a model file stores to rebuild it (tokenfile.from_arrays); nothing by default."""
        return {}
