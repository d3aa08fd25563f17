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

Encoding (`BPE.encode`) merges a piece by rank, lowest first, as training did, and keeps each
piece's result in a cache: text repeats its words, so most pieces are looked up, not merged.

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

EOS = 0
EOS_LABEL = "<eos>"
VOCAB_SIZE = 1024  # the size trained at build time (docs/decoding.md, Tokens: why this size)
FIRST_BYTE = 1  # byte b is id b + FIRST_BYTE
FIRST_MERGE = 256 + FIRST_BYTE
CACHE_LIMIT = 50_000  # pieces kept by encode's cache before it starts again

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


def merge_tokens(tok: list, ranks: dict, merged) -> tuple:
    """One piece's tokens after BPE: the merges applied lowest rank first, each at its leftmost
    place first, as training applied them. `ranks` maps a pair of ids to its rank, `merged[rank]`
    is the id the pair becomes. The tokens form a linked list and the pairs that can merge wait
    in a heap by (rank, position), so a piece of n bytes takes O(n log n), however long it is (a
    10 KB run of one character included). Shared by every byte-level BPE of the package."""
    n = len(tok)
    if n < 2:
        return tuple(tok)
    nxt = list(range(1, n + 1))  # n: no next token
    prv = list(range(-1, n - 1))
    heap = []
    for i in range(n - 1):
        r = ranks.get((tok[i], tok[i + 1]))
        if r is not None:
            heap.append((r, i))
    heapq.heapify(heap)
    while heap:
        r, i = heapq.heappop(heap)
        j = nxt[i]
        # stale: i was merged away (its token is now None), or its pair changed since
        if tok[i] is None or j >= n or ranks.get((tok[i], tok[j])) != r:
            continue
        tok[i] = merged[r]
        tok[j] = None
        nxt[i] = k = nxt[j]
        if k < n:
            prv[k] = i
        h = prv[i]
        if h >= 0:
            left = ranks.get((tok[h], tok[i]))
            if left is not None:
                heapq.heappush(heap, (left, h))
        if k < n:
            right = ranks.get((tok[i], tok[k]))
            if right is not None:
                heapq.heappush(heap, (right, i))
    return tuple(t for t in tok if t is not None)


class BPE:
    """A trained byte-level BPE: encode, decode, and each token's bytes."""

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

    def labels(self) -> list:
        return [self.label(i) for i in range(self.vocab_size)]

    def save(self, path, dataset: str) -> None:
        np.savez(path, kind=np.array("bpe"), dataset=np.array(dataset),
                 sha256=np.array(merges_hash(self.merges)), **self.arrays())

    def _merge_piece(self, piece: str) -> tuple:
        return merge_tokens([b + FIRST_BYTE for b in piece.encode("utf-8")], self.ranks,
                            self.merged)

    def encode(self, text: str) -> list:
        """Any text to ids. Never produces EOS: text is only ever text."""
        cache, ids = self._cache, []
        if len(cache) > CACHE_LIMIT:
            cache.clear()
        for piece in split(text):
            got = cache.get(piece)
            if got is None:
                got = cache[piece] = self._merge_piece(piece)
            ids.extend(got)
        return ids

    def encode_marked(self, text: str) -> list:
        """Text the package wrote itself (a corpus line), where the markup of a special token
        stands for that token. Never use it on what a person typed: that is `encode`."""
        if self._marked is None:
            return self.encode(text)
        ids = []
        for i, part in enumerate(self._marked.split(text)):
            if i % 2:
                ids.append(self.special_ids[part])
            elif part:
                ids.extend(self.encode(part))
        return ids

    def is_special(self, token_id: int) -> bool:
        return token_id >= self.vocab_size - len(self.specials)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes a token stands for (EOS and special tokens: none)."""
        return self._bytes[token_id]

    def decode_bytes(self, ids) -> bytes:
        table = self._bytes
        return b"".join(table[i] for i in ids)

    def decode(self, ids) -> str:
        """Ids to text. EOS is dropped; bytes that are not UTF-8 (a character cut in the middle)
        become U+FFFD, the replacement character."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def label(self, token_id: int) -> str:
        """A token as a person can read it: its text if its bytes are UTF-8 on their own, else
        its bytes in hex, as <e2 82>."""
        if token_id == EOS:
            return EOS_LABEL
        if self.is_special(token_id):
            return self.specials[token_id - (self.vocab_size - len(self.specials))]
        raw = self._bytes[token_id]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return "<" + " ".join(f"{b:02x}" for b in raw) + ">"


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
