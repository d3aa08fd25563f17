"""A prefix tree over token ids whose nodes hold cache blocks, as SGLang's RadixAttention keeps
them: a new request reuses the blocks of the longest prefix an earlier one computed, running or
finished, and prefills only the rest.

A window's tokens (the start token first) are cut into full blocks of the pool's block size;
each edge of the tree is one such block of token ids, and its node holds the physical block with
their keys and values. Two windows that start with the same full blocks have the same keys and
values there (the same tokens at the same positions), so a node's block can be read by any
request whose window starts with the path to it. Only full blocks go in the tree: a partly
filled block would be written into by the next token.

The tree holds each of its blocks once (a reference in the pool's count); a request that reuses
a block holds it too. Under a memory limit, `evict` gives back least-recently-used leaves that
no request holds, until enough blocks are free.

Measured by it: the tokens requests asked for, the tokens found in the tree (the hit rate) and
so not prefilled again.

Left out: edges of any length (SGLang's radix tree splits edges token by token; here an edge is
a block, the unit the cache is shared in), sharing a partly filled block.
"""

import itertools

from decodelab.core.serving.paged import BlockPool, PoolFull


class _Node:
    __slots__ = ("block", "children", "parent", "key", "used")

    def __init__(self, block, parent, key, used):
        self.block, self.parent, self.key, self.used = block, parent, key, used
        self.children = {}


class PrefixTree:
    def __init__(self, pool: BlockPool):
        self.pool = pool
        self.root = _Node(None, None, None, 0)
        self.clock = itertools.count(1)  # when a node was last matched or inserted
        self.asked = 0  # window tokens requests asked for
        self.found = 0  # of them, found in the tree (not prefilled again)
        self.evicted = []  # blocks given back under the memory limit, in order

    def _blocks(self, tokens):
        b = self.pool.block_size
        return [tuple(tokens[i:i + b]) for i in range(0, len(tokens) - b + 1, b)]

    def match(self, tokens) -> list:
        """The blocks of the longest cached prefix of these window tokens, in order, each held
        once more for the caller. Counts the tokens asked for and found."""
        node, out, now = self.root, [], next(self.clock)
        for key in self._blocks(tokens):
            node = node.children.get(key)
            if node is None:
                break
            node.used = now
            self.pool.hold(node.block)
            out.append(node.block)
        self.asked += len(tokens)
        self.found += len(out) * self.pool.block_size
        return out

    def insert(self, tokens, table) -> int:
        """A window's full blocks into the tree (a running request's, as it fills them, or a
        finished one's): tokens and the block table that holds them. Blocks the tree has for
        the same tokens stay (the caller's copy is not kept); new ones are held by the tree.
        Returns the blocks added."""
        node, added, now = self.root, 0, next(self.clock)
        for key, block in zip(self._blocks(tokens), table):
            child = node.children.get(key)
            if child is None:
                child = node.children[key] = _Node(block, node, key, now)
                self.pool.hold(block)
                added += 1
            child.used = now
            node = child
        return added

    def nodes(self):
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    def evict(self, need: int) -> int:
        """Give back least-recently-used leaves no request holds (the tree's reference is the
        block's only one) until `need` blocks are free or none is left to give. Returns how
        many were given back."""
        given = 0
        while len(self.pool.free) < need:
            leaves = [n for n in self.nodes() if not n.children and self.pool.refs[n.block] == 1]
            if not leaves:
                break
            oldest = min(leaves, key=lambda n: n.used)
            del oldest.parent.children[oldest.key]
            self.pool.let_go(oldest.block)
            self.evicted.append(oldest.block)
            given += 1
        return given

    def evictable(self) -> int:
        """Blocks `evict` could give back: those no request holds, under which no request holds
        a block either (leaves go first, then their parents). A block the tree alone holds above
        one a running request holds stays: a request that computed a window again after a
        preemption holds its own copies, and the tree keeps the older ones above them."""
        count = 0

        def alone(node) -> bool:  # this block and every block under it are the tree's alone
            nonlocal count
            below = [alone(child) for child in node.children.values()]  # visit every child
            if all(below) and self.pool.refs[node.block] == 1:
                count += 1
                return True
            return False

        for child in self.root.children.values():
            alone(child)
        return count

    def take(self) -> int:
        """A block from the pool, evicting a leaf first when none is free."""
        if not self.pool.free:
            self.evict(1)
        if not self.pool.free:
            raise PoolFull(f"the pool's {self.pool.num_blocks} blocks of "
                           f"{self.pool.block_size} positions are all in use, and no block of "
                           f"the prefix tree is free to give back")
        return self.pool.take()

    @property
    def hit_rate(self) -> float | None:
        return self.found / self.asked if self.asked else None

    @property
    def size(self) -> int:
        """Blocks the tree holds."""
        return sum(1 for _ in self.nodes())
