"""The kernels' arithmetic in numpy, value for value: what runs where no build of kernels.c is
at hand, and what the builds are held to (tests/test_kernels.py: identical bits).

Each function does what its C twin does, in the same float32 operations in the same order
(kernels.c says which): integer block sums, exact in any order; float sums added one block
after another, or over sixteen running sums for the float32 product. It is slow (numpy makes
the integer products in int32 and walks the blocks in Python), and exact.
"""

import numpy as np

QK = 32  # values per block (llama.cpp's QK8_0, QK8_1, QK4_1)
F32 = np.float32


def half_round(x: np.ndarray) -> np.ndarray:
    """x rounded to the nearest float16 (ties to even), as float32."""
    with np.errstate(over="ignore"):  # past float16's range: inf, as a conversion gives
        return np.asarray(x, F32).astype(np.float16).astype(F32)


def round_away(v: np.ndarray) -> np.ndarray:
    """round(v) with halves away from zero (C's roundf), as int32; |v| < 2^23."""
    a = np.abs(v)
    q = a.astype(np.int32)  # truncated: a - q is exact
    q += (a - q.astype(F32)) >= F32(0.5)
    return np.where(v < 0, -q, q)


def quantize_q8(x: np.ndarray, sums: bool = True):
    """Rows of activations (n, k), k a multiple of 32, to 8 bits a block at a time:
    q (n, k) int8, d (n, k/32) and, with sums, s (n, k/32) = sum(q) * d, as float16 values
    in float32. (ggml's quantize_row_q8_1_ref; Q8_0 is the same without s.)"""
    x = np.ascontiguousarray(x, F32)
    n, k = x.shape
    blocks = x.reshape(n, k // QK, QK)
    db = np.abs(blocks).max(axis=-1) / F32(127)  # (n, nb)
    with np.errstate(divide="ignore"):
        inverse = np.where(db != 0, F32(1) / db, F32(0)).astype(F32)
    q = round_away(blocks * inverse[..., None])  # (n, nb, 32) int32
    d = half_round(db)
    s = half_round(q.sum(axis=-1, dtype=np.int32).astype(F32) * db) if sums else None
    return q.astype(np.int8).reshape(n, k), d, s


def _rows_in_turn(terms: np.ndarray) -> np.ndarray:
    """terms (..., nb) float32 added one block after another from 0, as the C loop adds."""
    total = np.zeros(terms.shape[:-1], F32)
    for b in range(terms.shape[-1]):
        total = total + terms[..., b]
    return total


GROUP = 8  # weight rows stored side by side (kernels.c's ROWS)


def interleave(a: np.ndarray) -> np.ndarray:
    """Per-row blocks (rows, nb, m) -> the kernels' layout (rows/8, nb, m, 8): for each group
    of 8 rows and each block, item j of the 8 rows together. Scales (rows, nb) -> (rows/8,
    nb, 8). rows must be a multiple of 8."""
    rows = a.shape[0]
    if rows % GROUP:
        raise ValueError(f"{rows} rows: the kernels take weights 8 rows at a time")
    grouped = a.reshape(rows // GROUP, GROUP, *a.shape[1:])
    order = (0, 2, 3, 1) if a.ndim == 3 else (0, 2, 1)
    return np.ascontiguousarray(grouped.transpose(order))


def rows_of(a: np.ndarray) -> np.ndarray:
    """interleave undone: (rows/8, nb, m, 8) -> (rows, nb, m); (rows/8, nb, 8) -> (rows, nb)."""
    if a.ndim == 4:
        return a.transpose(0, 3, 1, 2).reshape(-1, *a.shape[1:3])
    return a.transpose(0, 2, 1).reshape(-1, a.shape[1])


ROWS_AT_ONCE = 4096  # weight rows a pass holds as int32 (4,096 x 576: 9 MB)


def matmul_q4_1(wq, wd, wm, xq, xd, xs) -> np.ndarray:
    """out (n, rows) = Q4_1 weights (nibbles, d, m, interleaved) times Q8_1 activations
    (q (n, k), d, s (n, nb)): ggml_vec_dot_q4_1_q8_1 for every pair of rows."""
    wq, wd, wm = rows_of(wq), rows_of(wd), rows_of(wm)
    rows, nb = wd.shape
    x = xq.reshape(-1, nb, QK).astype(np.int32)
    out = np.empty((x.shape[0], rows), F32)
    for a in range(0, rows, ROWS_AT_ONCE):
        packed = wq[a:a + ROWS_AT_ONCE].astype(np.int32)  # (r, nb, 16)
        values = np.concatenate([packed & 15, packed >> 4], axis=-1)  # (r, nb, 32)
        sumi = np.einsum("rbj,tbj->trb", values, x)  # (n, r, nb) exact
        part = (wd[None, a:a + ROWS_AT_ONCE] * xd[:, None]) * sumi.astype(F32)
        shift = wm[None, a:a + ROWS_AT_ONCE] * xs[:, None]
        out[:, a:a + ROWS_AT_ONCE] = _rows_in_turn(part + shift)
    return out


def matmul_q8_0(wq, wd, xq, xd) -> np.ndarray:
    """out (n, rows) = Q8_0 weights (q, d, interleaved) times Q8_0 activations (q (n, k),
    d (n, nb)): ggml_vec_dot_q8_0_q8_0 for every pair of rows."""
    wq, wd = rows_of(wq), rows_of(wd)
    rows, nb = wd.shape
    x = xq.reshape(-1, nb, QK).astype(np.int32)
    out = np.empty((x.shape[0], rows), F32)
    for a in range(0, rows, ROWS_AT_ONCE):
        w = wq[a:a + ROWS_AT_ONCE].astype(np.int32)  # (r, nb, 32)
        sumi = np.einsum("rbj,tbj->trb", w, x)  # (n, r, nb) exact
        out[:, a:a + ROWS_AT_ONCE] = _rows_in_turn(
            (wd[None, a:a + ROWS_AT_ONCE] * xd[:, None]) * sumi.astype(F32))
    return out


LANES = 16  # the float32 product's running sums


def matmul_f32(w, x) -> np.ndarray:
    """out (n, rows) = x (n, k) times w's rows (rows, k), k a multiple of 16: sixteen running
    sums (lane l takes the elements j = l mod 16), combined as kernels.c combines them."""
    rows, k = w.shape
    x = np.asarray(x, F32).reshape(-1, k)
    out = np.empty((x.shape[0], rows), F32)
    for a in range(0, rows, ROWS_AT_ONCE):
        wr = w[a:a + ROWS_AT_ONCE].reshape(-1, k // LANES, LANES)
        for t in range(x.shape[0]):
            products = wr * x[t].reshape(k // LANES, LANES)  # (r, k/16, 16)
            s = np.zeros((wr.shape[0], LANES), F32)
            for j in range(k // LANES):
                s = s + products[:, j]
            lane = [(s[:, i] + s[:, i + 4]) + (s[:, i + 8] + s[:, i + 12]) for i in range(4)]
            out[t, a:a + ROWS_AT_ONCE] = (lane[0] + lane[1]) + (lane[2] + lane[3])
    return out


def _dot16(a, b):
    """Rows of a . rows of b (..., k), k a multiple of 16, in the sixteen-lane order."""
    products = a * b  # (broadcast)
    k, shape = products.shape[-1], products.shape[:-1]
    products = products.reshape(*shape, k // LANES, LANES)
    s = np.zeros((*shape, LANES), F32)
    for j in range(k // LANES):
        s = s + products[..., j, :]
    lane = [(s[..., i] + s[..., i + 4]) + (s[..., i + 8] + s[..., i + 12]) for i in range(4)]
    return (lane[0] + lane[1]) + (lane[2] + lane[3])


def sumsq_rows(a) -> np.ndarray:
    """Each row's sum of squares, as a dot product of sixteen lanes."""
    a = np.asarray(a, F32)
    return _dot16(a, a)


def attn_scores(q, k, head_stride=None) -> np.ndarray:
    """q (heads, rows, D) . keys (heads, S, D) -> (heads, rows, S), each a sixteen-lane dot.
    (head_stride: where the compiled kernel finds heads; here `k` is the (heads, S, D) array.)"""
    return _dot16(q[:, :, None, :], k[:, None, :, :])


def row_sums(x) -> np.ndarray:
    """Each row's values added one after another from 0."""
    total = np.zeros(x.shape[0], F32)
    for s in range(x.shape[1]):
        total = total + x[:, s]
    return total


def attn_values(p, v, head_stride=None) -> np.ndarray:
    """sum over s, one key after another from 0, of p (heads, rows, S) times v (heads, S, D)."""
    out = np.zeros((p.shape[0], p.shape[1], v.shape[-1]), F32)
    for s in range(p.shape[2]):
        out = out + p[:, :, s, None] * v[:, None, s, :]
    return out
