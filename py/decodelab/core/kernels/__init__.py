"""decodelab's kernels: the products that decide a real model's speed, in one C source
(kernels.c) built natively and for the page, with the same arithmetic in numpy
(`arithmetic`) where no build is at hand. `kernels()` gives the set this process uses."""

from decodelab.core.kernels.library import kernels

__all__ = ["kernels"]
