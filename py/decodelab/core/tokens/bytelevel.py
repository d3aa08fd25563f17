"""Byte-level BPE, the part every such tokenizer shares: decodelab's own (bpe.py, trained here)
and a GGUF file's (pretrained/tokenizer.py, SmolLM2's). They differ in how text is cut into
pieces, which id a byte is, and what their special tokens are; the rest is one rule, here.

Encoding cuts text into pieces (the subclass's `split`), turns each piece's UTF-8 bytes into
their tokens (`byte_ids`) and merges them by rank (`merge_tokens`), keeping each piece's result
in a cache: text repeats its words, so most pieces are looked up, not merged. Decoding joins the
tokens' bytes; a special token has none.

A subclass sets `ranks`, `merged`, `_bytes` (id -> bytes), `special_ids`, `_marked` (a pattern
of the special tokens' markup, or None) and `_cache` = {}, and gives `split`, `byte_ids` and
`special_label`.
"""

import heapq

from decodelab.core.tokens.base import Tokenizer

CACHE_LIMIT = 50_000  # pieces kept by encode's cache before it starts again


def merge_tokens(tok: list, ranks: dict, merged) -> tuple:
    """One piece's tokens after BPE: the merges applied lowest rank first, each at its leftmost
    place first, as training applied them. `ranks` maps a pair of ids to its rank, `merged[rank]`
    is the id the pair becomes. The tokens form a linked list and the pairs that can merge wait
    in a heap by (rank, position), so a piece of n bytes takes O(n log n), however long it is (a
    10 KB run of one character included)."""
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


class ByteLevel(Tokenizer):
    """The shared half of a byte-level BPE (see the module's docstring for what a subclass
    gives)."""

    def split(self, text: str) -> list:
        """Text -> its pieces, which no merge crosses."""
        raise NotImplementedError

    def byte_ids(self, piece: str, text: str) -> list:
        """A piece's UTF-8 bytes as their tokens' ids (text: the whole text, for an error that
        names what cannot be encoded)."""
        raise NotImplementedError

    def special_label(self, token_id: int):
        """A token's label when it is no text (its markup), else None."""
        raise NotImplementedError

    def encode(self, text: str) -> list:
        """Any text to ids. Never produces a special token: typed text is only ever text."""
        cache, ids = self._cache, []
        if len(cache) > CACHE_LIMIT:
            cache.clear()
        for piece in self.split(text):
            got = cache.get(piece)
            if got is None:
                got = cache[piece] = merge_tokens(self.byte_ids(piece, text), self.ranks,
                                                  self.merged)
            ids.extend(got)
        return ids

    def encode_marked(self, text: str) -> list:
        """Text the package wrote itself (a corpus line, a chat template), where the markup of
        a special token stands for that token. Never use it on what a person typed: that is
        `encode`."""
        if self._marked is None:
            return self.encode(text)
        ids = []
        for i, part in enumerate(self._marked.split(text)):
            if i % 2:
                ids.append(self.special_ids[part])
            elif part:
                ids.extend(self.encode(part))
        return ids

    def token_bytes(self, token_id: int) -> bytes:
        return self._bytes[token_id]

    def decode_bytes(self, ids) -> bytes:
        table = self._bytes
        return b"".join(table[i] for i in ids)

    def decode(self, ids) -> str:
        """Ids to text. Special tokens are dropped; bytes that are not UTF-8 (a character cut
        in the middle) become U+FFFD, the replacement character."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def label(self, token_id: int) -> str:
        """A token as a person can read it: its markup if it is special, its text if its bytes
        are UTF-8 on their own, else its bytes in hex, as <e2 82>."""
        markup = self.special_label(token_id)
        if markup is not None:
            return markup
        raw = self._bytes[token_id]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return "<" + " ".join(f"{b:02x}" for b in raw) + ">"
