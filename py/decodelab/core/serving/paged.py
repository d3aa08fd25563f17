"""A paged KV cache: the keys and values in fixed-size blocks of one pool, as vLLM's
PagedAttention keeps them, instead of one array per sequence sized for the whole window.

- The pool: per layer, blocks of `block_size` positions, (num_blocks, Hkv, block_size, D) for
  the keys and the same for the values; a free list; a reference count per block.
- A sequence's cache (`PagedCache`) is a block table: logical block i (positions
  i*block_size ..) -> a physical block of the pool. A block is taken from the free list when
  the sequence first writes into it, and given back when no sequence holds it any more.
- Attention reads through the table: the sequence's blocks gathered in order are exactly the
  contiguous cache's first positions, so the logits are the contiguous cache's (the same numbers
  in the same order; tests hold them equal to 1e-12 in float64 for every model). The gather is a
  copy here; a serving engine's kernel reads the blocks where they lie.
- Copy-on-write: `fork` gives a second table holding the same blocks (each block's count goes
  up), so samples of one prompt share its keys and values. The first write into a shared block
  copies it (`copies_on_write` counts them): a shared, partly filled last block is copied by
  each fork that writes after it; full blocks stay shared for good.

`PagedSession` is `session.Session` on a pool: the same prefill, decode, append, score, fork
and rewind, and the live check works on it unchanged (it recomputes from the tokens).

`PagedPrefix` is a prompt prefilled once for many runs (samples of one question) that fork it.
The prefix tree that keeps requests' full blocks for later ones is `prefixtree`.

`decode_together` is a serving engine's step: the next decode of several sessions in one call
of the model, each row writing into its own block and reading its own blocks through a table of
block ids padded to the longest row (the padding hidden); the logits equal each decoding alone.

Left out: kshift (it rotates keys in place, a session on a pool rereads instead), a prefill in
the same call as the decodes (chunked prefill), the scheduler (`scheduler`).

Dimension legend: N blocks in the pool, Hkv KV heads, b block size, D head dim, S positions read.
"""

import numpy as np

from decodelab.core.models.cachedforward import cached_forward
from decodelab.core.models.session import Session
from decodelab.core.models.kvcache import NEG, KVCache, blocks_for, softmax_attention


class PoolFull(MemoryError):
    """No free block is left in the pool."""


class BlockPool:
    """The blocks of every layer, who holds each, and which are free."""

    def __init__(self, n_layer: int, num_blocks: int, n_kv_head: int, block_size: int,
                 head_dim: int, dtype=np.float64):
        if block_size < 1 or num_blocks < 1:
            raise ValueError(f"a pool needs at least one block of at least one position; got "
                             f"{num_blocks} blocks of {block_size}")
        shape = (num_blocks, n_kv_head, block_size, head_dim)  # (N, Hkv, b, D)
        self.k = [np.zeros(shape, dtype) for _ in range(n_layer)]
        self.v = [np.zeros(shape, dtype) for _ in range(n_layer)]
        self.block_size, self.num_blocks = block_size, num_blocks
        self.refs = np.zeros(num_blocks, np.int64)  # (N,) tables holding each block
        self.free = list(range(num_blocks - 1, -1, -1))  # popped from the end: lowest id first
        self.copies_on_write = 0
        self.copied = []  # (shared block, its private copy), every copy-on-write in order

    @classmethod
    def for_model(cls, model, num_blocks: int, block_size: int = 16, dtype=None):
        """A pool for the model's caches, in what its sessions compute in unless told."""
        cfg = model.cfg
        return cls(cfg.n_layer, num_blocks, cfg.n_kv_head, block_size, cfg.head_dim,
                   dtype or model.generation_dtype)

    def blocks_for(self, positions: int) -> int:
        """The blocks of this pool that hold `positions` positions."""
        return blocks_for(positions, self.block_size)

    @property
    def used(self) -> int:
        return self.num_blocks - len(self.free)

    @property
    def shared(self) -> int:
        """Blocks held by more than one table."""
        return int((self.refs > 1).sum())

    def take(self) -> int:
        if not self.free:
            raise PoolFull(f"the pool's {self.num_blocks} blocks of {self.block_size} positions "
                           f"are all in use")
        block = self.free.pop()
        self.refs[block] = 1
        return block

    def hold(self, block: int) -> None:
        self.refs[block] += 1

    def let_go(self, block: int) -> None:
        self.refs[block] -= 1
        if self.refs[block] == 0:
            self.free.append(block)

    def copy(self, block: int, take=None) -> int:
        """A private copy of a shared block, for the table about to write into it (take: where
        the new block comes from, the pool's free list by default)."""
        fresh = (take or self.take)()
        for arrays in (self.k, self.v):
            for a in arrays:
                a[fresh] = a[block]
        self.let_go(block)
        self.copies_on_write += 1
        self.copied.append((block, fresh))
        return fresh


class _Gathered:
    """cache.k or cache.v as the contiguous cache's attention reads it: [layer] -> the table's
    blocks gathered in order, (1, Hkv, blocks * b, D). A copy: writes into it go nowhere (the
    new keys and values are written into the blocks first)."""

    def __init__(self, cache, arrays):
        self.cache, self.arrays = cache, arrays

    def __getitem__(self, layer: int) -> np.ndarray:
        blocks = self.arrays[layer][self.cache.table]  # (n, Hkv, b, D)
        n, H, b, D = blocks.shape
        return blocks.transpose(1, 0, 2, 3).reshape(1, H, n * b, D)

    def __iter__(self):
        return (self[i] for i in range(len(self.arrays)))


class PagedCache(KVCache):
    """One sequence's cache as a block table into a pool; otherwise a KVCache (batch of one)."""

    def __init__(self, pool: BlockPool, max_len: int, take=None):
        self.pool, self.max_len = pool, max_len
        self.take = take or pool.take  # a new block: the pool's, or a prefix tree's (evicting)
        self.table = []  # logical block -> physical block
        self.length = 0  # positions filled
        self.key_bias = None  # one sequence, no padding

    # what KVCache's attention reads: the blocks, gathered
    k = property(lambda self: _Gathered(self, self.pool.k))
    v = property(lambda self: _Gathered(self, self.pool.v))

    def truncate(self, n: int) -> None:
        """Forget every position from n on; the blocks past them go back to the pool (or to
        the other tables that hold them)."""
        keep = self.pool.blocks_for(n)  # the blocks that still hold a position
        for block in self.table[keep:]:
            self.pool.let_go(block)
        del self.table[keep:]
        self.length = n

    def reset(self) -> None:
        self.truncate(0)

    def adopt(self, blocks: list) -> None:
        """An empty table starts from these full blocks, held for it already (a prefix tree's
        match): their positions count as filled."""
        self.table, self.length = blocks, len(blocks) * self.pool.block_size

    def reorder(self, rows) -> None:
        """Refused: a table holds one sequence, so it has no rows to reorder (beams on a pool
        would each fork a table of their own)."""
        raise ValueError("a paged cache holds one sequence: it has no rows to reorder")

    def shift(self, drop: int, turn) -> None:
        """Refused: turning keys in place would change blocks other tables may share; a session
        on a pool rereads a full window instead (PagedSession)."""
        raise ValueError("a paged cache does not shift its keys in place: its blocks may be "
                         "shared; a full window is read again (shift reread)")

    def copy(self) -> "PagedCache":
        """Another table over the same blocks (copy-on-write: nothing is copied until one of
        the two writes into a block they share)."""
        other = PagedCache(self.pool, self.max_len, self.take)
        other.table, other.length = list(self.table), self.length
        for block in self.table:
            self.pool.hold(block)
        return other

    fork = copy

    def _writable(self, start: int, end: int) -> None:
        """Blocks of its own for positions start .. end-1: new ones taken, shared ones copied."""
        b = self.pool.block_size
        for i in range(start // b, self.pool.blocks_for(end)):
            if i == len(self.table):
                self.table.append(self.take())
            elif self.pool.refs[self.table[i]] > 1:
                self.table[i] = self.pool.copy(self.table[i], self.take)

    def attend(self, layer: int, q, k, v, math=None):
        """Write the new keys and values into the blocks, then attend as KVCache does, over the
        blocks gathered in order. q: (1, Hkv, G*n, D); k, v: (1, Hkv, n, D)."""
        n = k.shape[2]
        t0, S = self.length, self.length + n
        if S > self.max_len:
            raise ValueError(f"KV cache full: {S} positions needed, {self.max_len} allowed")
        if layer == 0:
            self._writable(t0, S)
        b = self.pool.block_size
        K, V = self.pool.k[layer], self.pool.v[layer]  # (N, Hkv, b, D)
        for i in range(t0 // b, blocks_for(S, b)):  # the new positions, block by block
            lo, hi = max(t0, i * b), min(S, (i + 1) * b)
            K[self.table[i], :, lo - i * b:hi - i * b] = k[0, :, lo - t0:hi - t0]
            V[self.table[i], :, lo - i * b:hi - i * b] = v[0, :, lo - t0:hi - t0]
        return KVCache.attend(self, layer, q, k, v, math)

    def release(self) -> None:
        """Give every block back (the sequence is done)."""
        self.truncate(0)

    @property
    def bytes_allocated(self) -> int:
        """The bytes of the blocks this table holds (shared ones counted in full)."""
        per_block = sum(a[0].nbytes for a in self.pool.k + self.pool.v)
        return per_block * len(self.table)


class _StepBatch:
    """Several sequences' caches as one batch for a decode step (one new position each), as a
    serving engine runs a step: each row writes its key and value into its own block, then
    attends over its blocks, gathered for all rows at once through a table of block ids padded
    to the longest row (the padding hidden by KVCache's key bias). What `cached_forward` reads
    and writes."""

    def __init__(self, caches):
        self.caches = caches  # each cache's own length moves after the step (advance)
        pool = self.pool = caches[0].pool
        b = pool.block_size
        lengths = np.array([c.length for c in caches])  # (B,) positions before the new one
        for c in caches:
            c._writable(c.length, c.length + 1)  # the new position's block: taken, or copied
        n = pool.blocks_for(int(lengths.max()) + 1)  # the longest row's, its new position too
        self.tables = np.zeros((len(caches), n), np.int64)  # (B, n); padding reads block 0
        for i, c in enumerate(caches):
            self.tables[i, :len(c.table)] = c.table
        rows = np.arange(len(caches))
        self.where = self.tables[rows, lengths // b], lengths % b  # each new position's slot
        self.bias = np.where(np.arange(n * b)[None] <= lengths[:, None], 0.0, NEG)[:, None, None]

    def _gather(self, arrays) -> np.ndarray:
        blocks = arrays[self.tables]  # (B, n, Hkv, b, D)
        B, n, H, b, D = blocks.shape
        return blocks.transpose(0, 2, 1, 3, 4).reshape(B, H, n * b, D)

    def advance(self, n: int) -> None:
        """Each row's cache holds its new position now."""
        for c in self.caches:
            c.advance(n)

    def attend(self, layer: int, q, k, v, math=None):
        """q: (B, Hkv, G, D); k, v: (B, Hkv, 1, D) -> (B, Hkv, G, D), over each row's own
        positions only (the bias (B, 1, 1, S) hides the rest)."""
        K, V = self.pool.k[layer], self.pool.v[layer]  # (N, Hkv, b, D)
        block, slot = self.where
        K[block, :, slot] = k[:, :, 0]  # (B, Hkv, D) into each row's own block
        V[block, :, slot] = v[:, :, 0]
        return (math or softmax_attention)(q, self._gather(K), self._gather(V), self.bias)


def decode_together(sessions, tokens) -> None:
    """One decode step of several PagedSessions (one model, one pool) in one call of the model:
    each session's next `decode` of its token returns the logits computed here, and its cache
    holds the token's key and value already. A session whose window is full decodes alone
    (its context shifts), so it is left out."""
    rows = [(s, int(t)) for s, t in zip(sessions, tokens) if s.cache.length < s.cache.max_len]
    if not rows:
        return
    first = rows[0][0]
    idx = np.array([[t] for _, t in rows], np.int64)  # (B, 1)
    pos = np.array([[s.cache.length] for s, _ in rows], np.int64)  # (B, 1)
    weights = first.weights_now()
    batch = _StepBatch([s.cache for s, _ in rows])
    logits = cached_forward(weights, batch, idx, pos)  # (B, V)
    for i, (s, t) in enumerate(rows):
        s.ready = (t, logits[i])


class PagedSession(Session):
    """session.Session with its cache in a pool's blocks (`pool`, a BlockPool); with a
    prefix tree (`prefixtree.PrefixTree`), new blocks may come from evicting its leaves, and
    `prefill` starts from the blocks of the longest prefix it holds."""

    def __init__(self, model, pool: BlockPool, dtype=None, shift: str = "reread",
                 tree=None):
        if shift != "reread":
            raise ValueError("a session on a pool rereads a full window (shift reread): kshift "
                             "turns keys in place, and its blocks may be shared")
        self.pool, self.tree = pool, tree
        super().__init__(model, dtype or pool.k[0].dtype, shift)  # in the pool's dtype
        self.reused = 0  # positions the last prefill took from the prefix tree

    def cache_class(self, n_layer, batch, n_kv_head, max_len, head_dim, dtype, reserve=None):
        """The cache Session.__init__ makes: a table into the pool (sized by the window; it
        takes blocks as it fills, so the model's reserve has nothing to do here)."""
        return PagedCache(self.pool, max_len, self.tree.take if self.tree else None)

    def prefill_steps(self, ids):
        """Session.prefill_steps, reusing the prefix tree's blocks for the longest cached prefix
        of the window (the last token is always computed: its logits are the answer);
        `reused` says how many positions were not computed."""
        window = self.start + [int(i) for i in ids]
        self.reused = 0
        if self.tree is None or len(window) > self.cache.max_len:
            return (yield from super().prefill_steps(ids))  # a window that shifts at once
            # shares nothing
        self.cache.reset()
        self.cache.adopt(self.tree.match(window[:-1]))
        n = self.cache.length
        self.tokens = window[:n]
        self.shifts, self.shifted, self.reused = 0, False, n
        self.logits = yield from self.append_steps(window[n:])
        self.prefilled = self.cache.length
        return self.logits

    ready = None  # (token, logits): its next decode, already computed by decode_together

    def decode(self, token_id: int) -> np.ndarray:
        if self.ready is not None:
            token, logits = self.ready
            self.ready = None
            if token != int(token_id):
                raise ValueError(f"decode_together computed token {token}; asked for {token_id}")
            self.shifted = False
            self.tokens.append(token)
            self.logits = logits
            return logits
        return super().decode(token_id)

    def refill(self, tokens) -> None:
        """Compute the keys and values of this window again, in one pass (after a preemption
        gave its blocks back: vLLM's recompute). The run goes on from where it was."""
        self._fill(list(tokens))

    def release(self) -> None:
        """The run is over: its blocks go back to the pool (those it shares stay held)."""
        self.cache.release()
        self.tokens = []


class PagedPrefix:
    """A prompt prefilled once in a pool, for several runs of it (`generate.Generation(...,
    prefix=...)` forks it, as it forks `generate.Prefix`): the runs hold the prompt's blocks
    together, and each copies only the shared last block it writes into while it has room.
    `release` gives the prefix's own hold back once no more runs will fork it."""

    shift = "reread"

    def __init__(self, model, pool: BlockPool, prompt_ids, tree=None):
        self.ids = [int(i) for i in prompt_ids]
        self.session = PagedSession(model, pool, tree=tree)
        self.logits = self.session.prefill(self.ids).copy()  # (V,) runs only read it

    def release(self) -> None:
        self.session.release()

