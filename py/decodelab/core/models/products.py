"""The products of the cached path: x @ W, or an einsum over W's rows where numpy has no BLAS
(WebAssembly) and W is large. The one place that chooses; `cachedforward` multiplies through it.

Left out: anything but a vector or a stack of rows times one stored column-major matrix.
"""

import sys

import numpy as np

# numpy in WebAssembly (Pyodide) has no BLAS. There one vector times a large matrix is fastest
# as an einsum over the matrix's rows with each output's weights together, which the
# column-major W (layers.matmul_layout) already is when seen as W.T (out, in), without a copy:
# about twice `@` in Pyodide 0.27.7 from 256 x 256 up (576 x 49,152 in float32: 20 ms against
# 38; SmolLM2 decodes 9.0 tokens/s against 5.2 under Node). On the small matrices of the models
# trained here (64 x 1,030 at most) einsum's own cost per call outweighs it (their decode was
# 3-25% slower through it), so they keep `@`; with BLAS (CPython) `@` is as fast on large
# matrices and 2-3 times faster on small ones.
NO_BLAS = sys.platform == "emscripten"
EINSUM_FROM = 1 << 17  # elements of W from which a vector goes through einsum, without BLAS
EINSUM_MOST = 1 << 30  # multiply-adds in one einsum call (its iterator counts them in 32 bits)


def times(x, w):
    """x @ w for a stored column-major w (C, O). Where numpy has no BLAS (WebAssembly), a large
    w goes through einsum: each output is a dot product of two contiguous rows (w.T is w's
    memory as (O, C)), which numpy's einsum runs in SIMD loops about twice as fast as its own
    matmul, for one row (a decode step) and for many (a prefill) alike; measured in Pyodide
    0.27.7 on SmolLM2's matrices (docs/pretrained.md)."""
    if not isinstance(w, np.ndarray):  # a matrix that multiplies itself: a file's quantized
        return w.times(x)  # blocks through the kernels (core/kernels/matrices.py)
    if not (NO_BLAS and w.size >= EINSUM_FROM):
        return x @ w
    if x.size == x.shape[-1]:  # one vector
        return np.einsum("oi,i->o", w.T, x.reshape(-1)).reshape(*x.shape[:-1], w.shape[1])
    rows = x.reshape(-1, x.shape[-1])
    step = max(1, EINSUM_MOST // w.size)
    out = np.concatenate([np.einsum("ti,oi->to", rows[i:i + step], w.T)
                          for i in range(0, rows.shape[0], step)])
    return out.reshape(*x.shape[:-1], w.shape[1])
