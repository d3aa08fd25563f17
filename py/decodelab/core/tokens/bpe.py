"""Byte-level BPE: text <-> token ids where a token is a run of bytes, learned from a corpus.

Ids: 0 is EOS (as with characters: never text, and the start of a sequence); 1..256 are the 256
single bytes (byte b is id b + 1), so any text at all can be encoded, whatever the corpus held
(emoji, CJK, combining marks, NUL); 257.. are the learned merges, in the order they were learned.
A merge joins two adjacent tokens into one; its rank is its position in that order.

Before merging, text is cut into pieces (`split`): a word with the space in front of it, a run
of digits, a run of punctuation, or whitespace, as GPT-2-style tokenizers do. Merges never cross
a piece, so " the" can become one token but "the." never does.

Training (`train`) counts every adjacent pair over the pieces of the training text and merges
the most frequent pair, again and again; ties go to the pair with the smaller ids, so the same
text gives the same merges on any machine. The pair counts are updated only for the words a
merge touches, not recounted from scratch.

Encoding (`BPE.encode`, the byte-level rule of `bytelevel.py`, which a GGUF file's tokenizer
shares) merges a piece by rank, lowest first, as training did, and keeps each piece's result in
a cache: text repeats its words, so most pieces are looked up, not merged.

Special tokens (`specials`, e.g. "<|call|>") take the ids after the merges. They are not text:
`encode` never produces one, so a prompt that contains the markup "<|call|>" stays the eight
characters it is, and only the program that builds a sequence (`encode_marked`, used on corpus
text the package itself wrote) can place them. Their bytes are empty, like EOS's.

Left out: regex features Python's `re` lacks (GPT-2 splits on Unicode letter classes; here a
letter is what `re` calls a word character that is neither a digit nor an underscore, which is
the same thing for the text this package trains on).
"""

import hashlib
import heapq
import re

import numpy as np

from decodelab.core.tokens.bytelevel import ByteLevel

EOS = 0
EOS_LABEL = "<eos>"
VOCAB_SIZE = 1024  # the size trained at build time (docs/decoding.md, Tokens: why this size)
FIRST_BYTE = 1  # byte b is id b + FIRST_BYTE
FIRST_MERGE = 256 + FIRST_BYTE

# every character falls in exactly one class: whitespace, a letter (a word character that is not
# a digit or "_"), a digit, or anything else (punctuation, symbols, "_", combining marks)
PIECES = re.compile(r"""'(?:s|t|re|ve|m|ll|d)| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")


def split(text: str) -> list:
    """The pieces merges stay inside: words with their leading space, numbers, punctuation,
    whitespace. Joined, they give the text back exactly."""
    return PIECES.findall(text)


def _pairs(word):
    return zip(word, word[1:])


def train(texts, vocab_size: int) -> np.ndarray:
    """The merges learned from `texts`, as an int32 array of shape (vocab_size - 257, 2): row r
    joins the tokens in it into token 257 + r. Deterministic: the most frequent pair first,
    ties to the smallest (left id, right id)."""
    n_merges = vocab_size - FIRST_MERGE
    if n_merges < 0:
        raise ValueError(f"a byte-level BPE needs a vocabulary of at least {FIRST_MERGE} tokens")
    counts = {}
    for text in texts:
        for piece in split(text):
            counts[piece] = counts.get(piece, 0) + 1
    words = [[b + FIRST_BYTE for b in piece.encode("utf-8")] for piece in counts]
    freqs = list(counts.values())

    pair_count, where = {}, {}
    for w, (word, freq) in enumerate(zip(words, freqs)):
        for pair in _pairs(word):
            pair_count[pair] = pair_count.get(pair, 0) + freq
            where.setdefault(pair, set()).add(w)
    # a max-heap by (count, then the smaller pair); entries whose count changed since they were
    # pushed are stale and skipped when they come up
    heap = [(-c, pair) for pair, c in pair_count.items()]
    heapq.heapify(heap)

    merges = []
    while len(merges) < n_merges and heap:
        neg, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -neg or -neg <= 0:
            continue
        new = FIRST_MERGE + len(merges)
        merges.append(pair)
        changed = set()
        for w in where.pop(pair, ()):
            word, freq = words[w], freqs[w]
            for p in _pairs(word):
                pair_count[p] -= freq
                changed.add(p)
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
                    merged.append(new)
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            words[w] = merged
            for p in _pairs(merged):
                pair_count[p] = pair_count.get(p, 0) + freq
                where.setdefault(p, set()).add(w)
                changed.add(p)
        for p in changed:
            if pair_count[p] > 0:
                heapq.heappush(heap, (-pair_count[p], p))
            else:
                del pair_count[p]
                where.pop(p, None)
    return np.array(merges, dtype=np.int32).reshape(-1, 2)


def merges_hash(merges: np.ndarray) -> str:
    """The sha256 of a merge table (int32, little-endian, row by row)."""
    return hashlib.sha256(np.ascontiguousarray(merges, dtype="<i4").tobytes()).hexdigest()


class BPE(ByteLevel):
    """A trained byte-level BPE: encode, decode, and each token's bytes (the byte-level rule
    itself is `bytelevel.ByteLevel`'s, shared with a GGUF file's tokenizer)."""

    name = "bpe"
    eos_id = EOS  # the token that ends a sequence
    start_ids = (EOS,)  # what a context starts with

    def __init__(self, merges, specials=()):
        merges = np.asarray(merges, dtype=np.int64).reshape(-1, 2)
        self.merges = merges.astype(np.int32)
        self.specials = tuple(str(t) for t in specials)  # markup, in id order
        first_special = FIRST_MERGE + len(merges)
        self.special_ids = {t: first_special + i for i, t in enumerate(self.specials)}
        self.vocab_size = first_special + len(self.specials)
        self._marked = re.compile("(" + "|".join(map(re.escape, self.specials)) + ")") \
            if self.specials else None
        self.ranks = {(int(a), int(b)): r for r, (a, b) in enumerate(merges)}
        self.merged = range(FIRST_MERGE, FIRST_MERGE + len(merges))  # rank -> the merge's id
        self._bytes = [b""] + [bytes([b]) for b in range(256)]
        for a, b in merges:
            if not 0 < a < len(self._bytes) or not 0 < b < len(self._bytes):
                raise ValueError("a merge refers to a token that does not exist yet")
            self._bytes.append(self._bytes[a] + self._bytes[b])
        self._bytes += [b""] * len(self.specials)  # not text
        self._cache = {}

    @classmethod
    def load(cls, path) -> "BPE":
        with np.load(path, allow_pickle=False) as z:
            if str(z["kind"]) != "bpe":
                raise ValueError(f"{path} does not hold a BPE tokenizer")
            return cls(z["merges"], z["specials"].tolist() if "specials" in z.files else ())

    def arrays(self) -> dict:
        """What a model file stores to rebuild this tokenizer (tokenizer.from_arrays)."""
        out = {"merges": self.merges}
        if self.specials:
            out["specials"] = np.array(self.specials)
        return out

    def with_specials(self, specials) -> "BPE":
        """The same merges with special tokens added after them."""
        return BPE(self.merges, tuple(self.specials) + tuple(specials))

    def describe(self) -> str:
        extra = f", {len(self.specials)} of them special" if self.specials else ""
        return f"any text (byte-level BPE, {self.vocab_size} tokens{extra})"

    def save(self, path, dataset: str) -> None:
        np.savez(path, kind=np.array("bpe"), dataset=np.array(dataset),
                 sha256=np.array(merges_hash(self.merges)), **self.arrays())

    def split(self, text: str) -> list:
        return split(text)

    def byte_ids(self, piece: str, text: str) -> list:
        return [b + FIRST_BYTE for b in piece.encode("utf-8")]  # every byte has its token

    def is_special(self, token_id: int) -> bool:
        return token_id >= self.vocab_size - len(self.specials)

    def special_label(self, token_id: int):
        if token_id == EOS:
            return EOS_LABEL
        if self.is_special(token_id):
            return self.specials[token_id - (self.vocab_size - len(self.specials))]
        return None


def main(argv=None) -> int:
    """python -m decodelab.core.tokens.bpe --data CORPUS.txt --dataset NAME --out FILE.npz [--vocab-size N]:
    learn the merges from the corpus's training split (build.py runs this)."""
    import argparse
    import time

    from decodelab.core.tokens.corpus import Corpus, read_corpus

    p = argparse.ArgumentParser(prog="python -m decodelab.core.tokens.bpe")
    p.add_argument("--data", required=True)
    p.add_argument("--dataset", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--vocab-size", type=int, default=VOCAB_SIZE)
    args = p.parse_args(argv)
    corpus = Corpus(args.dataset, read_corpus(args.data))
    start = time.perf_counter()
    tokens = BPE(train(corpus.train, args.vocab_size))
    tokens.save(args.out, args.dataset)
    val = "\n".join(corpus.val)
    print(f"bpe {args.dataset}: {len(tokens.merges)} merges, vocabulary {tokens.vocab_size}, "
          f"{len(val) / max(1, len(tokens.encode(val))):.2f} characters per token on the "
          f"validation split, sha256 {merges_hash(tokens.merges)[:12]} "
          f"({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
