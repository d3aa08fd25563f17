"""The quantized engine's element-wise maths, with the same bits natively and in the page.

The kernels make every sum the same on every machine; what is left of a forward pass is
element-wise, and of that only the transcendental functions differ from machine to machine:
numpy's float32 exp, sin and cos are its own SIMD code on a native x86 build and the C
library's in WebAssembly, and now and then they differ in the last bit. A float32 model would
not notice; a model whose activations are rounded to 8 bits does (a last-bit change tips a
value over a rounding boundary, and the logits move by hundredths). So this engine takes them
in float64, where both are accurate to well under a float32 step, and rounds to float32: the
two agree unless a value falls within 2^-29 of a rounding boundary of its own. On SmolLM2 the
page's quantized runs then make the command line's logits bit for bit
(tests/e2e/test_pretrained_page.py).

The reference engine keeps numpy's float32 functions, as transformers computes them.
"""

import numpy as np

F32, F64 = np.float32, np.float64


def exp(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """e^x of float32 values, through float64 (into `out` when given)."""
    wide = np.exp(x, dtype=F64)
    if out is None:
        return wide.astype(F32)
    np.copyto(out, wide, casting="same_kind")
    return out


def swiglu(a: np.ndarray) -> np.ndarray:
    """(..., 2F) -> (..., F): silu(gate) * up, where a = [gate | up], as `layers.swiglu_forward`
    with its exp through float64 (the sum and the division are IEEE's own, the same anywhere)."""
    F = a.shape[-1] // 2
    g = a[..., :F]
    e = exp(-g)
    e += F32(1.0)
    np.divide(g, e, out=e)
    e *= a[..., F:]
    return e


_TABLES = {}


def rope_tables(cfg, length: int = 0):
    """`layers.rope_tables` in float32, the same on every machine: each frequency
    theta^(-2i/D) and each angle's cos and sin taken in float64 and rounded once, the angle
    itself a float32 product (position times frequency) as in the reference."""
    D, length = cfg.head_dim, length or cfg.context_size
    key = (D, length, cfg.rope_theta)
    if key not in _TABLES:
        inv = (1.0 / np.power(F64(cfg.rope_theta), np.arange(0, D, 2, dtype=F64) / D)).astype(F32)
        ang = (np.arange(length, dtype=F32)[:, None] * inv[None, :]).astype(F64)  # (length, D/2)
        cos, sin = np.cos(ang).astype(F32), np.sin(ang).astype(F32)
        _TABLES[key] = (np.concatenate([cos, cos], axis=1), np.concatenate([-sin, sin], axis=1))
    return _TABLES[key]
