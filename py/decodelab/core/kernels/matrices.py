"""Weight matrices kept as their file stores them: llama.cpp's blocks of 32 values, multiplied
as llama.cpp multiplies them. The activations are quantized to 8 bits a block at a time (for
a Q4_1 matrix with their sums, Q8_1; for a Q8_0 one without, Q8_0), and each output is the
integer dot product of the two, scaled: what ggml's CPU path computes for these types.

A matrix has the (in, out) shape of decodelab's float32 ones, so the cached forward uses it
where it would use those (`times`), and `rows` dequantizes rows of it for an embedding's
lookup (ggml's get_rows). The blocks' scales are held in float32 (the file's float16 values,
converted exactly) and the weights eight rows side by side (`arithmetic.interleave`).
"""

import numpy as np

from decodelab.core.kernels import arithmetic
from decodelab.core.kernels.library import address, kernels

QK = arithmetic.QK
KINDS = {"Q4_1": 20, "Q8_0": 34}  # the block types with a kernel: bytes per block of 32


class QuantizedMatrix:
    """A (rows, k) weight matrix of the file, used as decodelab's (k, rows) matrix W in x @ W."""

    def __init__(self, kind: str, raw: np.ndarray, rows: int, k: int):
        """raw: the tensor's stored bytes, rows x k / 32 blocks of `kind`, row after row."""
        if kind not in KINDS:
            raise ValueError(f"no kernel multiplies {kind} blocks; the kernels take "
                             f"{', '.join(KINDS)}")
        if k % QK:
            raise ValueError(f"rows of {k} values: blocks hold 32")
        nb = k // QK
        blocks = np.asarray(raw, np.uint8).reshape(rows, nb, KINDS[kind])
        self.kind, self.shape = kind, (k, rows)  # as decodelab's (in, out) matrices
        d = blocks[..., 0:2].copy().view("<f2")[..., 0].astype(np.float32)  # (rows, nb)
        self.d = arithmetic.interleave(d)
        if kind == "Q4_1":
            m = blocks[..., 2:4].copy().view("<f2")[..., 0].astype(np.float32)
            self.m = arithmetic.interleave(m)
            self.q = arithmetic.interleave(blocks[..., 4:])  # (rows/8, nb, 16, 8) nibbles
        else:
            self.m = None
            self.q = arithmetic.interleave(blocks[..., 2:].view(np.int8))  # (rows/8, nb, 32, 8)

        # the weights' addresses, read once (a read costs microseconds, a kernel call in
        # WebAssembly about ten)
        self._at = tuple(address(a) if a is not None else None for a in (self.q, self.d, self.m))

    @property
    def size(self) -> int:
        return self.shape[0] * self.shape[1]

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.q, self.d, self.m) if a is not None)

    def times(self, x: np.ndarray) -> np.ndarray:
        """x (..., k) @ W -> (..., rows), the activations quantized as llama.cpp does."""
        k, rows = self.shape
        flat = np.ascontiguousarray(x.reshape(-1, k), np.float32)
        kern = kernels()
        if kern.compiled:  # by address: the activations' blocks in scratch kept per shape
            n, q4 = flat.shape[0], self.kind == "Q4_1"
            (q, d, s), at = scratch(n, k)
            out = np.empty((n, rows), np.float32)
            kern._quantize_q8(address(flat), n, k, at[0], at[1], at[2] if q4 else None)
            if q4:
                kern._matmul_q4_1(*self._at, rows, k, *at, n, address(out))
            else:
                kern._matmul_q8_0(*self._at[:2], rows, k, *at[:2], n, address(out))
            return out.reshape(*x.shape[:-1], rows)
        if self.kind == "Q4_1":
            q, d, s = kern.quantize_q8(flat, sums=True)
            out = kern.matmul_q4_1(self.q, self.d, self.m, q, d, s)
        else:
            q, d, _ = kern.quantize_q8(flat, sums=False)
            out = kern.matmul_q8_0(self.q, self.d, q, d)
        return out.reshape(*x.shape[:-1], rows)

    def __getitem__(self, idx) -> np.ndarray:  # an embedding's lookup: wte[ids]
        return self.rows(idx)

    def rows(self, idx) -> np.ndarray:
        """Rows of the matrix (token ids, for an embedding), dequantized: (..., k) float32."""
        idx = np.asarray(idx)
        flat = idx.reshape(-1)
        g, r = flat // arithmetic.GROUP, flat % arithmetic.GROUP
        d = self.d[g, :, r][..., None]  # (n, nb, 1)
        if self.kind == "Q4_1":
            packed = self.q[g, :, :, r]  # (n, nb, 16)
            values = np.concatenate([packed & 15, packed >> 4], axis=-1).astype(np.float32)
            out = values * d + self.m[g, :, r][..., None]
        else:
            out = self.q[g, :, :, r].astype(np.float32) * d
        return out.reshape(*idx.shape, self.shape[0])


_scratch = {}


def scratch(n: int, k: int):
    """Quantized activations' arrays for n rows of k (q, d, s) and their addresses, made once
    per shape (decode steps reuse one; a kernel writes them before it reads them)."""
    if (n, k) not in _scratch:
        if len(_scratch) > 16:  # (prefills of many lengths: keep a few)
            _scratch.clear()
        arrays = (np.empty((n, k), np.int8), np.empty((n, k // QK), np.float32),
                  np.empty((n, k // QK), np.float32))
        _scratch[(n, k)] = arrays, tuple(address(a) for a in arrays)
    return _scratch[(n, k)]
