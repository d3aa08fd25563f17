"""A corpus: a list of text sequences (one per line on disk), split deterministically.

A sequence is one name, or one paragraph of prose; every sequence ends in EOS during training,
so the models learn where things end. The split is a seeded permutation, identical natively and
in the browser, so validation numbers mean the same everywhere.

Left out: downloading and cleaning the raw sources (build.py does that once, and pins the result
by hash).
"""

import functools

import numpy as np

from decodelab.errors import FieldError

VAL_FRACTION = 0.1
SPLIT_SEED = 1234
MAX_CUSTOM_BYTES = 1_000_000


class Corpus:
    def __init__(self, name: str, sequences: list, val_fraction=VAL_FRACTION, seed=SPLIT_SEED):
        if not sequences:
            raise ValueError(f"corpus {name!r} has no sequences")
        self.name = name
        self.sequences = list(sequences)
        order = np.random.default_rng(seed).permutation(len(self.sequences))
        n_val = int(round(len(self.sequences) * val_fraction))
        # A corpus of one sequence still trains (it just has no validation part).
        n_val = min(n_val, len(self.sequences) - 1)
        self.val = [self.sequences[i] for i in order[:n_val]]
        self.train = [self.sequences[i] for i in order[n_val:]]

    @functools.cached_property
    def chars(self) -> str:
        """Every character of the corpus, sorted (for a character tokenizer; found on first use,
        as the page's start does not need them for a corpus of millions of characters)."""
        return "".join(sorted(set("".join(self.sequences))))



def read_corpus(path) -> list:
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def write_corpus(path, sequences) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for s in sequences:
            f.write(s + "\n")


def corpus_from_text(text, name: str = "custom") -> Corpus:
    """A corpus from text a learner pasted: one sequence per non-empty line.

    Refuses what would make a meaningless model, with a message that says what to paste instead.
    """
    if not isinstance(text, str):
        raise FieldError("text", "Training text must be text.")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_CUSTOM_BYTES:
        raise FieldError("text", f"Training text is too long: at most {MAX_CUSTOM_BYTES:,} bytes "
                                 f"(about {MAX_CUSTOM_BYTES // 1000} KB) are allowed.")
    control = sum(1 for c in text if (ord(c) < 32 and c not in "\n\t\r") or 0xD800 <= ord(c) < 0xE000
                  or c == "\x7f" or c == "\ufffd")
    if control:
        raise FieldError("text", f"Training text contains {control} control or undecodable "
                                 f"characters; paste plain text (letters, digits, punctuation).")
    lines = [" ".join(line.replace("\t", " ").split()) for line in text.splitlines()]
    lines = [line for line in lines if line]
    n_chars = sum(len(line) for line in lines)
    if n_chars < 2:
        raise FieldError("text", "Training text needs at least 2 characters (one sequence per "
                                 f"line); got {n_chars}.")
    chars = set("".join(lines))
    if len(chars) > 500:
        raise FieldError("text", f"Training text uses {len(chars)} different characters; at most "
                                 f"500 are allowed for a character model.")
    return Corpus(name, lines)
