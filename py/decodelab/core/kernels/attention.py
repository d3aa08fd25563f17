"""Attention as the quantized engine computes it: softmax(q K^T + bias) V with every sum in a
fixed order (the kernels' `dl_attn_*`), and the weights rounded to float16 values before they
meet V, as llama.cpp's non-flash path does (its V cache is float16, and ggml multiplies it by
the weights converted to float16).

Why a fixed order: with 8-bit activations a model is discontinuous. A sum added in another
order differs in its last bit, which moves a value across a rounding boundary of the next
product's quantization now and then, and SmolLM2's outlier channels make each such step large:
measured, a logit moves by about 0.4 (median over a chat's steps) when the rounding of ties
alone changes. numpy's products group their sums by the shapes they are given, so a position
computed in a prefill of 16 and the same position computed alone would part that far, and the
live cache check (the cached steps against a full recomputation) could not tell a bug from the
arithmetic. Here a position's numbers do not depend on how many are computed with it, nor on
hidden keys (their weights are exactly 0, and a 0 added to a sum leaves it as it was).
"""

import numpy as np

from decodelab.core.kernels.arithmetic import half_round
from decodelab.core.kernels.library import kernels
from decodelab.core.kernels.portable import exp


def heads_of(a: np.ndarray):
    """(B, Hkv, S, D) keys or values -> (B*Hkv, S, D) and the floats from one head to the
    next, without a copy where the heads lie evenly apart (a cache's (B, Hkv, T, D) arrays)."""
    B, H, S, D = a.shape
    if not (a.strides[-1] == 4 and a.strides[-2] == 4 * D and a.strides[0] == H * a.strides[1]):
        a = np.ascontiguousarray(a)
    return a.reshape(B * H, S, D), a.strides[1] // 4


def fixed_order_attention(q, K, V, bias):
    """q (B, Hkv, Gn, D), K and V (B, Hkv, S, D), bias broadcastable to (B, Hkv, Gn, S) or
    None -> (B, Hkv, Gn, D), in float32."""
    B, H, Gn, D = q.shape
    S = K.shape[2]
    kern = kernels()
    keys, k_stride = heads_of(K)
    values, v_stride = heads_of(V)
    s = kern.attn_scores(np.ascontiguousarray(q.reshape(B * H, Gn, D), np.float32), keys,
                         k_stride).reshape(B, H, Gn, S)
    if bias is not None:
        s += bias
    s -= s.max(axis=-1, keepdims=True)
    exp(s, out=s)  # (through float64: the same bits in the page and natively)
    s /= kern.row_sums(s.reshape(-1, S)).reshape(B, H, Gn, 1)
    weights = half_round(s).reshape(B * H, Gn, S)
    return kern.attn_values(weights, values, v_stride).reshape(B, H, Gn, D)
