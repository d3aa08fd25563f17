"""kernels.c, built, opened through ctypes; or its arithmetic in numpy where no build is at hand.

`kernels()` gives the one set this process uses, with `sentence`: where its products run, in
words a page or the CLI can show. Natively the library is the build that `build.py` made of
this very source (its file name carries the source's digest, so an old build is never
taken for a new one); in the page the worker loads the WebAssembly side module into Pyodide's
heap first and names it in DECODELAB_KERNELS. Either way the arrays are passed by address:
the kernels read and write numpy's own memory, no copy.
"""

import ctypes
import os
import sys
from pathlib import Path

import numpy as np

from decodelab.core.kernels import arithmetic
from decodelab.core.kernels.source import BUILT, native_name

ENV = "DECODELAB_KERNELS"  # a built library's path, where it is not the native default
IN_BROWSER = sys.platform == "emscripten"


def library_path() -> Path | None:
    """Where this process's build of kernels.c is, or None."""
    named = os.environ.get(ENV)
    if named:
        return Path(named)
    if IN_BROWSER:
        return None
    path = BUILT / native_name()
    return path if path.exists() else None


P, I, L = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64
SIGNATURES = {
    "dl_sumsq_rows": (P, I, I, P),
    "dl_attn_scores": (P, P, I, I, I, I, L, P),
    "dl_row_sums": (P, I, I, P),
    "dl_attn_values": (P, P, I, I, I, I, L, P),
    "dl_half_round": (P, P, I),
    "dl_quantize_q8": (P, I, I, P, P, P),
    "dl_matmul_q4_1": (P, P, P, I, I, P, P, P, I, P),
    "dl_matmul_q8_0": (P, P, I, I, P, P, I, P),
    "dl_matmul_f32": (P, I, I, P, I, P),
}


def address(a: np.ndarray, rows_only: bool = False) -> int:
    """A C-contiguous array's data address (read once per array where it is kept: the read
    costs microseconds, a kernel call in WebAssembly about ten). rows_only: the array need only
    have its last two axes contiguous (a cache's keys: the caller says where heads lie)."""
    if rows_only:
        assert a.dtype == np.float32 and a.strides[-1] == 4 and a.strides[-2] == 4 * a.shape[-1]
    else:
        assert a.flags.c_contiguous, "the kernels read arrays laid out row by row"
    return a.__array_interface__["data"][0]


class Compiled:
    """The built library: the same functions as `arithmetic`, through ctypes."""

    compiled = True

    def __init__(self, path: Path):
        self.path = path
        lib = ctypes.CDLL(str(path))
        for name, args in SIGNATURES.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, None
            setattr(self, "_" + name[3:], fn)
        self.sentence = ("The quantized products run in decodelab's C kernels "
                         f"({'WebAssembly' if IN_BROWSER else 'native'}).")

    def half_round(self, x):
        x = np.ascontiguousarray(x, np.float32)
        out = np.empty_like(x)
        self._half_round(address(x), address(out), x.size)
        return out

    def quantize_q8(self, x, sums=True, out=None):
        x = np.ascontiguousarray(x, np.float32)
        n, k = x.shape
        q, d, s = out if out is not None else (
            np.empty((n, k), np.int8), np.empty((n, k // 32), np.float32),
            np.empty((n, k // 32), np.float32) if sums else None)
        self._quantize_q8(address(x), n, k, address(q), address(d),
                          address(s) if s is not None else None)
        return q, d, s

    def matmul_q4_1(self, wq, wd, wm, xq, xd, xs, out=None):
        """Weights in the kernels' layout (`arithmetic.interleave`)."""
        rows, nb = wd.shape[0] * wd.shape[2], wd.shape[1]
        n = xq.shape[0]
        out = np.empty((n, rows), np.float32) if out is None else out
        self._matmul_q4_1(address(wq), address(wd), address(wm), rows, nb * 32, address(xq),
                          address(xd), address(xs), n, address(out))
        return out

    def matmul_q8_0(self, wq, wd, xq, xd, out=None):
        rows, nb = wd.shape[0] * wd.shape[2], wd.shape[1]
        n = xq.shape[0]
        out = np.empty((n, rows), np.float32) if out is None else out
        self._matmul_q8_0(address(wq), address(wd), rows, nb * 32, address(xq), address(xd), n,
                          address(out))
        return out

    def matmul_f32(self, w, x, out=None):
        rows, k = w.shape
        x = np.ascontiguousarray(x, np.float32).reshape(-1, k)
        out = np.empty((x.shape[0], rows), np.float32) if out is None else out
        self._matmul_f32(address(w), rows, k, address(x), x.shape[0], address(out))
        return out

    def sumsq_rows(self, a):
        """Each row's sum of squares (n, k) -> (n,), a dot product of sixteen lanes."""
        return self._per_row(self._sumsq_rows, a)

    def attn_scores(self, q, k, head_stride):
        """q (heads, rows, D) contiguous; k (heads, S, D), its rows contiguous, head_stride
        floats from one head to the next (a cache's layout) -> (heads, rows, S)."""
        return self._heads(self._attn_scores, q, k, head_stride, k.shape[-2])

    def row_sums(self, x):
        """Each row's values (n, S) added one after another from 0 -> (n,)."""
        return self._per_row(self._row_sums, x)

    @staticmethod
    def _per_row(kernel, x):
        x = np.ascontiguousarray(x, np.float32)
        out = np.empty(x.shape[0], np.float32)
        kernel(address(x), x.shape[0], x.shape[1], address(out))
        return out

    def attn_values(self, p, v, head_stride):
        """p (heads, rows, S) contiguous; v as attn_scores' k -> (heads, rows, D)."""
        return self._heads(self._attn_values, p, v, head_stride, v.shape[-1])

    @staticmethod
    def _heads(kernel, a, b, head_stride, width):
        heads, rows = a.shape[:2]
        S, D = b.shape[-2:]
        out = np.empty((heads, rows, width), np.float32)
        kernel(address(a), address(b, rows_only=True), heads, rows, S, D, head_stride,
               address(out))
        return out


class InNumpy:
    """The same arithmetic in numpy (`arithmetic`): exact, and slow."""

    compiled = False
    path = None

    def __init__(self, why: str):
        self.sentence = (f"{why}, so the quantized products run in numpy: the same numbers, "
                         "many times slower.")

    half_round = staticmethod(arithmetic.half_round)

    def quantize_q8(self, x, sums=True, out=None):
        return arithmetic.quantize_q8(x, sums)

    def matmul_q4_1(self, wq, wd, wm, xq, xd, xs, out=None):
        return arithmetic.matmul_q4_1(wq, wd, wm, xq, xd, xs)

    def matmul_q8_0(self, wq, wd, xq, xd, out=None):
        return arithmetic.matmul_q8_0(wq, wd, xq, xd)

    def matmul_f32(self, w, x, out=None):
        return arithmetic.matmul_f32(w, x)

    sumsq_rows = staticmethod(arithmetic.sumsq_rows)
    attn_scores = staticmethod(arithmetic.attn_scores)
    row_sums = staticmethod(arithmetic.row_sums)
    attn_values = staticmethod(arithmetic.attn_values)


_chosen = None


def use(path: str | None, problem: str | None = None):
    """The page's worker has loaded the side module at `path` into Pyodide's heap (or could
    not: `problem`, its words): from now on this process's kernels are that build, or numpy
    with a sentence that says why."""
    global _chosen
    if path:
        os.environ[ENV] = path
        return kernels(reload=True)
    _chosen = InNumpy(f"The page could not load its C kernels ({problem})" if problem
                      else "The page has not loaded its C kernels")
    return _chosen


def kernels(reload: bool = False):
    """The kernels this process uses: the build where there is one that opens, else numpy."""
    global _chosen
    if _chosen is None or reload:
        path = library_path()
        if path is None:
            _chosen = InNumpy("decodelab's C kernels are not built here"
                              if not IN_BROWSER else "The page has not loaded its C kernels")
        else:
            try:
                _chosen = Compiled(path)
            except (OSError, AttributeError) as e:
                _chosen = InNumpy(f"decodelab's C kernels at {path} did not open ({e})")
    return _chosen
