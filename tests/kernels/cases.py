"""Inputs for the kernels and every kernel's outputs on them: the same function runs natively
and in Pyodide (tests/kernels/in_pyodide.mjs), so the two builds are compared output for output.
numpy only (it is copied into Pyodide beside the package's kernels)."""

import numpy as np


def inputs(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    f32 = np.float32
    spread = rng.standard_normal(20_000) * 10.0 ** rng.integers(-9, 6, 20_000)
    edges = [65504, 65519.99, 65520, 1e6, 6.1035156e-05, 6.1e-05, 5.9604645e-08, 2.9802322e-08,
             2.98e-08, 1.0009766, 1.0004883, 1.0014648, 0.0, -0.0, np.inf, -np.inf]
    x = (rng.standard_normal((5, 576)) * 3).astype(f32)
    x[0, :32] = 0  # a block of zeros: d = 0, nothing divided
    x[1, :32] = np.arange(-16, 16) + 0.5  # amax 15.5 ...
    x[1, 0] = 127  # ... no: amax 127, d = 1, so every x.5 is a tie: halves away from zero
    rows = 72  # (weights go 8 rows at a time)
    return {
        "half": np.concatenate([spread, edges]).astype(f32),
        "x": x,
        "w_q4": rng.integers(0, 256, (rows, 18, 16), dtype=np.uint8),
        "w_d": (rng.random((rows, 18)) * 0.01).astype(np.float16).astype(f32),
        "w_m": (-rng.random((rows, 18)) * 0.05).astype(np.float16).astype(f32),
        "w_q8": rng.integers(-128, 128, (rows, 576), dtype=np.int8),
        "w_f32": rng.standard_normal((rows, 576)).astype(f32),
        "q": rng.standard_normal((3, 5, 64)).astype(f32),  # 3 heads, 5 queries each
        "keys": rng.standard_normal((3, 20, 64)).astype(f32),  # a cache of 20 slots a head
        "weights": rng.random((3, 5, 13)).astype(f32),  # over the first 13 slots
    }


def outputs(k, given: dict) -> dict:
    """Every kernel of `k` (a Compiled or an InNumpy set) on the inputs."""
    from decodelab.core.kernels.arithmetic import interleave

    x = given["x"]
    w4 = [interleave(given[name]) for name in ("w_q4", "w_d", "w_m")]
    w8 = [interleave(given["w_q8"].reshape(72, 18, 32)), interleave(given["w_d"])]
    q, d, s = k.quantize_q8(x)
    q0, d0, _ = k.quantize_q8(x, sums=False)
    return {
        "half": k.half_round(given["half"]),
        "q": q, "d": d, "s": s, "q0": q0, "d0": d0,
        "q4_1": k.matmul_q4_1(*w4, q, d, s),
        "q4_1_one": k.matmul_q4_1(*w4, q[2:3], d[2:3], s[2:3]),
        # a few rows at once (a batch's decode step): the kernels' path below four rows
        "q4_1_two": k.matmul_q4_1(*w4, q[1:3], d[1:3], s[1:3]),
        "q4_1_three": k.matmul_q4_1(*w4, q[:3], d[:3], s[:3]),
        "q8_0": k.matmul_q8_0(*w8, q0, d0),
        "q8_0_one": k.matmul_q8_0(*w8, q0[4:5], d0[4:5]),
        "q8_0_two": k.matmul_q8_0(*w8, q0[2:4], d0[2:4]),
        "q8_0_three": k.matmul_q8_0(*w8, q0[1:4], d0[1:4]),
        "f32": k.matmul_f32(given["w_f32"], x),
        "f32_one": k.matmul_f32(given["w_f32"], x[3:4]),
        "sumsq": k.sumsq_rows(x),
        "scores": k.attn_scores(given["q"], given["keys"][:, :13], 20 * 64),
        "row_sums": k.row_sums(given["weights"].reshape(15, 13)),
        "values": k.attn_values(given["weights"], given["keys"][:, :13], 20 * 64),
    }


def bits(a: np.ndarray) -> np.ndarray:
    """An array's bytes, to compare bit for bit (nan and -0.0 included)."""
    return np.ascontiguousarray(a).view(np.uint8)
