/* decodelab's kernels: the few products that decide a real model's speed, in plain C.
 *
 * Built twice from this one file by build.py: natively by the machine's C compiler (a shared
 * library), and for the page as a WebAssembly side module that Pyodide loads (clang with
 * -msimd128). Python calls them through ctypes with numpy arrays' addresses: no copy.
 * `arithmetic.py` does the same arithmetic in numpy, value for value, where no build is at hand.
 *
 * Same bits everywhere. Every float operation below is written out in the order it happens
 * and compiled with -ffp-contract=off (no fused multiply-add), so the native library, the
 * WebAssembly module and the numpy arithmetic give identical results on the same inputs:
 *   - integer sums (the quantized dot products) are exact in any order, so SIMD may add
 *     them as it likes;
 *   - float sums run in one fixed order: a float32 dot product keeps 16 running sums (lane k
 *     takes elements j = k mod 16), combines them as ((s0 + s4) + (s8 + s12)) ... below, and a
 *     quantized row adds its blocks one after another.
 *
 * Freestanding: no libc (the side module has none); the few helpers are written here.
 *
 * The quantized layouts are llama.cpp's blocks of 32 values, with their scales held apart in
 * float32 (converted once, exactly, from the file's float16), the weights' rows eight at a
 * time side by side (the products below say how):
 *   Q4_1 weights:     nibbles: value j = (qs[j] & 15) * d + m for j < 16,
 *                     (qs[j - 16] >> 4) * d + m for j >= 16; d, m float32
 *   Q8_0 weights:     q int8, value = q * d; d float32
 *   Q8_1 activations: q (n, nb, 32) int8, d (n, nb), s (n, nb) = sum(q) * d: Q4_1's partner
 *   Q8_0 activations: q (n, nb, 32) int8, d (n, nb): Q8_0's partner
 * Activations are quantized as ggml's reference code quantizes them (quantize_row_q8_1_ref):
 * d = amax / 127 rounded to float16, q = round(x / d) with halves away from zero.
 */

#include <stdint.h>
#ifdef __wasm_simd128__
#include <wasm_simd128.h>
#endif

#define EXPORT __attribute__((visibility("default")))
#define QK 32

static inline uint32_t bits_of(float x) { union { float f; uint32_t u; } v = {x}; return v.u; }
static inline float float_of(uint32_t u) { union { uint32_t u; float f; } v = {u}; return v.f; }

/* x rounded to the nearest float16 (ties to even), returned as a float32: the value a
 * float16 scale holds. Inf past float16's range, as a conversion gives. */
static float half_round(float x) {
    uint32_t b = bits_of(x), sign = b & 0x80000000u, a = b ^ sign;
    if (a >= 0x7f800000u) return x;                            /* inf, nan */
    if (a >= 0x477ff000u) return float_of(sign | 0x7f800000u); /* 65520 and up: inf */
    if (a < 0x38800000u) {                                      /* below 2^-14: float16's */
        float t = float_of(a) * 16777216.0f;                    /* subnormal steps of 2^-24 */
        t = (t + 8388608.0f) - 8388608.0f;                      /* to an integer, ties even */
        return float_of(sign | bits_of(t * 5.9604644775390625e-8f));
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);                  /* drop 13 bits, ties even */
    return float_of(sign | (r & ~0x1fffu));
}

/* round(v) with halves away from zero (C's roundf), for |v| < 2^23. */
static inline int32_t round_away(float v) {
    float a = v < 0.0f ? -v : v;
    int32_t q = (int32_t)a;                                     /* truncated: a - q is exact */
    if (a - (float)q >= 0.5f) q += 1;
    return v < 0.0f ? -q : q;
}

EXPORT void dl_half_round(const float *x, float *out, int n) {
    for (int i = 0; i < n; i++) out[i] = half_round(x[i]);
}

/* ------------------------------------------------------------------------------------------
 * Activations to 8 bits, a block of 32 at a time: n rows of k values (k a multiple of 32).
 * s may be 0 (Q8_0 keeps no sum). */
EXPORT void dl_quantize_q8(const float *x, int n, int k, int8_t *q, float *d, float *s) {
    int nb = k / QK;
    for (int b = 0; b < n * nb; b++) {
        const float *xb = x + (int64_t)b * QK;
        float amax = 0.0f;
        for (int j = 0; j < QK; j++) {
            float a = xb[j] < 0.0f ? -xb[j] : xb[j];
            if (a > amax) amax = a;
        }
        float db = amax / 127.0f;
        float id = db != 0.0f ? 1.0f / db : 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < QK; j++) {
            int32_t v = round_away(xb[j] * id);
            q[(int64_t)b * QK + j] = (int8_t)v;
            sum += v;
        }
        d[b] = half_round(db);
        if (s) s[b] = half_round((float)sum * db);
    }
}

/* ------------------------------------------------------------------------------------------
 * Products: out (n, rows) = x (n, k) times the weights' rows (rows, k).
 *
 * The quantized weights are stored eight rows side by side (`interleave` in arithmetic.py):
 * for each group of 8 rows and each block, value j of all 8 rows lies together, so one pass
 * adds the 8 rows' integer sums lane by lane (a vector of 8) with no sum across lanes per
 * block, the cost that would dominate. A row's blocks are then added one after another in
 * float32, each row on its own lane:
 *   Q4_1 x Q8_1: sum += (d_w * d_x) * sumi + m_w * s_x   (ggml_vec_dot_q4_1_q8_1)
 *   Q8_0 x Q8_0: sum += (d_w * d_x) * sumi               (ggml_vec_dot_q8_0_q8_0)
 * A group's weights are read once for all n activation rows (a prefill's positions). */

#define ROWS 8
#define UNPACK_FROM 4 /* activation rows from which a block is unpacked once for all */

/* The integer sums of one block of 8 weight rows (w: 32 values x 8 rows, as 16-bit integers)
 * with one activation block x (32 int8): acc[r] = sum_j w[j][r] * x[j], exact; in the
 * WebAssembly build as two vectors of four rows (lo, hi). `small`: the weights are 4-bit
 * (0..15), so 16 products (at most 15 x 128 each) add in 16 bits. */
#ifdef __wasm_simd128__
/* A block's part of 8 rows' sums, four rows a vector, the operations of the scalar loops
 * below in the same order lane by lane (so the same bits): Q4_1's
 *   o[r] = o[r] + ((d[r] * dx) * acc[r] + m[r] * sx)
 * and, with m 0, Q8_0's o[r] = o[r] + (d[r] * dx) * acc[r]. */
static inline v128_t block_part(v128_t o, const float *d, const float *m, v128_t dx, v128_t sx,
                                v128_t acc) {
    v128_t part = wasm_f32x4_mul(wasm_f32x4_mul(wasm_v128_load(d), dx),
                                 wasm_f32x4_convert_i32x4(acc));
    if (m) part = wasm_f32x4_add(part, wasm_f32x4_mul(wasm_v128_load(m), sx));
    return wasm_f32x4_add(o, part);
}
#endif

#ifdef __wasm_simd128__
static inline void block_sums(const int16_t *w, const int8_t *x, v128_t *lo, v128_t *hi,
                              int small) {
    v128_t a0 = wasm_i32x4_splat(0), a1 = a0;
    if (small) {
        for (int half = 0; half < QK; half += 16) {
            v128_t s = wasm_i16x8_splat(0);
            for (int j = half; j < half + 16; j++)
                s = wasm_i16x8_add(s, wasm_i16x8_mul(wasm_v128_load(w + j * ROWS),
                                                     wasm_i16x8_splat(x[j])));
            a0 = wasm_i32x4_add(a0, wasm_i32x4_extend_low_i16x8(s));
            a1 = wasm_i32x4_add(a1, wasm_i32x4_extend_high_i16x8(s));
        }
    } else {
        for (int j = 0; j < QK; j++) {
            v128_t v = wasm_v128_load(w + j * ROWS), xj = wasm_i16x8_splat(x[j]);
            a0 = wasm_i32x4_add(a0, wasm_i32x4_extmul_low_i16x8(v, xj));
            a1 = wasm_i32x4_add(a1, wasm_i32x4_extmul_high_i16x8(v, xj));
        }
    }
    *lo = a0;
    *hi = a1;
}
#else
static inline void block_sums(const int16_t *w, const int8_t *x, int32_t *acc) {
    for (int r = 0; r < ROWS; r++) acc[r] = 0;
    for (int j = 0; j < QK; j++)
        for (int r = 0; r < ROWS; r++) acc[r] += (int32_t)w[j * ROWS + r] * x[j];
}
#endif

/* A few activation rows (a decode step): each block's nibbles read straight, no unpacking. */
static void q4_1_direct(const uint8_t *wq, const float *wd, const float *wm, int rows,
                           int k, const int8_t *xq, const float *xd, const float *xs, int n,
                           float *out) {
    int nb = k / QK;
    for (int g = 0; g < rows / ROWS; g++) {
        for (int t = 0; t < n; t++) {
            const int8_t *x = xq + (int64_t)t * k;
            const float *dx = xd + (int64_t)t * nb, *sx = xs + (int64_t)t * nb;
            float sum[ROWS] = {0};
#ifdef __wasm_simd128__
            v128_t s0 = wasm_f32x4_splat(0.0f), s1 = s0;
#endif
            for (int b = 0; b < nb; b++) {
                int64_t at = (int64_t)g * nb + b;
                const uint8_t *p = wq + at * 16 * ROWS;
                const float *d = wd + at * ROWS, *m = wm + at * ROWS;
#ifdef __wasm_simd128__
                /* 8 rows in 16-bit lanes: |lo * x + hi * x'| <= 3,810, so 8 of them add
                 * in 16 bits before they are widened (exact, as every integer sum here) */
                v128_t a0 = wasm_i32x4_splat(0), a1 = a0;
                for (int half = 0; half < 16; half += 8) {
                    v128_t s = wasm_i16x8_splat(0);
                    for (int j = half; j < half + 8; j++) {
                        v128_t bytes = wasm_u16x8_load8x8(p + j * ROWS);
                        v128_t lo = wasm_v128_and(bytes, wasm_i16x8_splat(15));
                        v128_t hi = wasm_u16x8_shr(bytes, 4);
                        s = wasm_i16x8_add(s, wasm_i16x8_mul(lo, wasm_i16x8_splat(x[b * QK + j])));
                        s = wasm_i16x8_add(s, wasm_i16x8_mul(hi, wasm_i16x8_splat(x[b * QK + j + 16])));
                    }
                    a0 = wasm_i32x4_add(a0, wasm_i32x4_extend_low_i16x8(s));
                    a1 = wasm_i32x4_add(a1, wasm_i32x4_extend_high_i16x8(s));
                }
                v128_t vdx = wasm_f32x4_splat(dx[b]), vsx = wasm_f32x4_splat(sx[b]);
                s0 = block_part(s0, d, m, vdx, vsx, a0);
                s1 = block_part(s1, d + 4, m + 4, vdx, vsx, a1);
#else
                int32_t acc[ROWS] = {0};
                for (int j = 0; j < 16; j++) {
                    int32_t lo = x[b * QK + j], hi = x[b * QK + j + 16];
                    for (int r = 0; r < ROWS; r++)
                        acc[r] += (int32_t)(p[j * ROWS + r] & 15) * lo +
                                  (int32_t)(p[j * ROWS + r] >> 4) * hi;
                }
                float dxb = dx[b], sxb = sx[b];
                for (int r = 0; r < ROWS; r++) {
                    float part = (d[r] * dxb) * (float)acc[r];
                    float shift = m[r] * sxb;
                    sum[r] = sum[r] + (part + shift);
                }
#endif
            }
#ifdef __wasm_simd128__
            wasm_v128_store(sum, s0);
            wasm_v128_store(sum + 4, s1);
#endif
            for (int r = 0; r < ROWS; r++) out[(int64_t)t * rows + g * ROWS + r] = sum[r];
        }
    }
}

static void q8_0_direct(const int8_t *wq, const float *wd, int rows, int k,
                           const int8_t *xq, const float *xd, int n, float *out) {
    int nb = k / QK;
    for (int g = 0; g < rows / ROWS; g++) {
        for (int t = 0; t < n; t++) {
            const int8_t *x = xq + (int64_t)t * k;
            const float *dx = xd + (int64_t)t * nb;
            float sum[ROWS] = {0};
#ifdef __wasm_simd128__
            v128_t s0 = wasm_f32x4_splat(0.0f), s1 = s0;
#endif
            for (int b = 0; b < nb; b++) {
                int64_t at = (int64_t)g * nb + b;
                const int8_t *p = wq + at * QK * ROWS;
                const float *d = wd + at * ROWS;
#ifdef __wasm_simd128__
                v128_t a0 = wasm_i32x4_splat(0), a1 = a0;
                for (int j = 0; j < QK; j++) {
                    v128_t w = wasm_i16x8_load8x8(p + j * ROWS);
                    v128_t v = wasm_i16x8_splat(x[b * QK + j]);
                    a0 = wasm_i32x4_add(a0, wasm_i32x4_extmul_low_i16x8(w, v));
                    a1 = wasm_i32x4_add(a1, wasm_i32x4_extmul_high_i16x8(w, v));
                }
                v128_t vdx = wasm_f32x4_splat(dx[b]), none = vdx;
                s0 = block_part(s0, d, 0, vdx, none, a0);
                s1 = block_part(s1, d + 4, 0, vdx, none, a1);
#else
                int32_t acc[ROWS] = {0};
                for (int j = 0; j < QK; j++) {
                    int32_t v = x[b * QK + j];
                    for (int r = 0; r < ROWS; r++) acc[r] += (int32_t)p[j * ROWS + r] * v;
                }
                float dxb = dx[b];
                for (int r = 0; r < ROWS; r++) sum[r] = sum[r] + (d[r] * dxb) * (float)acc[r];
#endif
            }
#ifdef __wasm_simd128__
            wasm_v128_store(sum, s0);
            wasm_v128_store(sum + 4, s1);
#endif
            for (int r = 0; r < ROWS; r++) out[(int64_t)t * rows + g * ROWS + r] = sum[r];
        }
    }
}

/* Many activation rows: each block of 8 weight rows is unpacked once to 16-bit values and
 * used for all n of them, whose sums build up in `out`. Q4_1 (wm given): wq (rows/8, nb, 16, 8)
 * uint8, byte j of each of 8 rows' blocks (value j in its low nibble, value j + 16 in its high
 * one), wd and wm (rows/8, nb, 8), and the activations' sums xs. Q8_0 (wm, xs 0):
 * wq (rows/8, nb, 32, 8) int8, value j of each of 8 rows' blocks, wd (rows/8, nb, 8). */
static void matmul_unpacked(const void *wq, const float *wd, const float *wm, int rows, int k,
                            const int8_t *xq, const float *xd, const float *xs, int n,
                            float *out) {
    int nb = k / QK, q4 = wm != 0;
    int16_t w[QK * ROWS];
    for (int g = 0; g < rows / ROWS; g++) {
        for (int t = 0; t < n; t++)
            for (int r = 0; r < ROWS; r++) out[(int64_t)t * rows + g * ROWS + r] = 0.0f;
        for (int b = 0; b < nb; b++) {
            int64_t at = (int64_t)g * nb + b;
            const float *d = wd + at * ROWS, *m = q4 ? wm + at * ROWS : 0;
            if (q4) {
                const uint8_t *p = (const uint8_t *)wq + at * 16 * ROWS;
                for (int i = 0; i < 16 * ROWS; i++) {
                    w[i] = p[i] & 15;               /* value j = i / 8 */
                    w[i + 16 * ROWS] = p[i] >> 4;   /* value j + 16 */
                }
            } else {
                const int8_t *p = (const int8_t *)wq + at * QK * ROWS;
                for (int i = 0; i < QK * ROWS; i++) w[i] = p[i];
            }
            for (int t = 0; t < n; t++) {
                float dx = xd[(int64_t)t * nb + b];
                float *o = out + (int64_t)t * rows + g * ROWS;
#ifdef __wasm_simd128__
                v128_t a0, a1;
                block_sums(w, xq + (int64_t)t * k + b * QK, &a0, &a1, q4);
                v128_t vdx = wasm_f32x4_splat(dx);
                v128_t vsx = wasm_f32x4_splat(q4 ? xs[(int64_t)t * nb + b] : 0.0f);
                wasm_v128_store(o, block_part(wasm_v128_load(o), d, m, vdx, vsx, a0));
                wasm_v128_store(o + 4, block_part(wasm_v128_load(o + 4), d + 4, q4 ? m + 4 : 0,
                                                  vdx, vsx, a1));
#else
                int32_t acc[ROWS];
                block_sums(w, xq + (int64_t)t * k + b * QK, acc);
                if (q4) {
                    float sx = xs[(int64_t)t * nb + b];
                    for (int r = 0; r < ROWS; r++) {
                        float part = (d[r] * dx) * (float)acc[r];
                        float shift = m[r] * sx;
                        o[r] = o[r] + (part + shift);
                    }
                } else {
                    for (int r = 0; r < ROWS; r++) o[r] = o[r] + (d[r] * dx) * (float)acc[r];
                }
#endif
            }
        }
    }
}

EXPORT void dl_matmul_q4_1(const uint8_t *wq, const float *wd, const float *wm, int rows,
                           int k, const int8_t *xq, const float *xd, const float *xs, int n,
                           float *out) {
    if (n < UNPACK_FROM) q4_1_direct(wq, wd, wm, rows, k, xq, xd, xs, n, out);
    else matmul_unpacked(wq, wd, wm, rows, k, xq, xd, xs, n, out);
}

EXPORT void dl_matmul_q8_0(const int8_t *wq, const float *wd, int rows, int k,
                           const int8_t *xq, const float *xd, int n, float *out) {
    if (n < UNPACK_FROM) q8_0_direct(wq, wd, rows, k, xq, xd, n, out);
    else matmul_unpacked(wq, wd, 0, rows, k, xq, xd, 0, n, out);
}

/* ------------------------------------------------------------------------------------------
 * float32. A dot product of k values (k a multiple of 16) keeps sixteen running sums, lane l
 * taking the elements j = l mod 16, and combines them in one fixed order. */
static inline float dot16(const float *a, const float *b, int k) {
#ifdef __wasm_simd128__
    v128_t a0 = wasm_f32x4_splat(0.0f), a1 = a0, a2 = a0, a3 = a0;
    for (int j = 0; j < k; j += 16) {
        a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(wasm_v128_load(a + j), wasm_v128_load(b + j)));
        a1 = wasm_f32x4_add(a1, wasm_f32x4_mul(wasm_v128_load(a + j + 4),
                                               wasm_v128_load(b + j + 4)));
        a2 = wasm_f32x4_add(a2, wasm_f32x4_mul(wasm_v128_load(a + j + 8),
                                               wasm_v128_load(b + j + 8)));
        a3 = wasm_f32x4_add(a3, wasm_f32x4_mul(wasm_v128_load(a + j + 12),
                                               wasm_v128_load(b + j + 12)));
    }
    v128_t v = wasm_f32x4_add(wasm_f32x4_add(a0, a1), wasm_f32x4_add(a2, a3));
    float l0 = wasm_f32x4_extract_lane(v, 0), l1 = wasm_f32x4_extract_lane(v, 1);
    float l2 = wasm_f32x4_extract_lane(v, 2), l3 = wasm_f32x4_extract_lane(v, 3);
#else
    float s[16] = {0};
    for (int j = 0; j < k; j += 16)
        for (int l = 0; l < 16; l++) s[l] = s[l] + a[j + l] * b[j + l];
    float l0 = (s[0] + s[4]) + (s[8] + s[12]), l1 = (s[1] + s[5]) + (s[9] + s[13]);
    float l2 = (s[2] + s[6]) + (s[10] + s[14]), l3 = (s[3] + s[7]) + (s[11] + s[15]);
#endif
    return (l0 + l1) + (l2 + l3);
}

/* out (n, rows) = x (n, k) times w's rows (rows, k). */
EXPORT void dl_matmul_f32(const float *w, int rows, int k, const float *x, int n, float *out) {
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < n; t++)
            out[(int64_t)t * rows + r] = dot16(w + (int64_t)r * k, x + (int64_t)t * k, k);
}

/* out[i] = a_i . a_i for n rows of k (an RMS norm's sum of squares). */
EXPORT void dl_sumsq_rows(const float *a, int n, int k, float *out) {
    for (int i = 0; i < n; i++) out[i] = dot16(a + (int64_t)i * k, a + (int64_t)i * k, k);
}

/* ------------------------------------------------------------------------------------------
 * Attention in a fixed order, so a position's result does not depend on how many positions
 * are computed with it, nor on hidden keys (their weights are exactly 0, and 0 added to a sum
 * leaves it as it was, before or after the visible keys). heads: attention heads, each with
 * `rows` queries (q: heads x rows x D, contiguous) over S keys/values whose rows of D lie
 * head_stride floats apart from one head to the next (a cache's layout). */

/* scores (heads, rows, S) = q . k, each a dot16 over D (D a multiple of 16). */
EXPORT void dl_attn_scores(const float *q, const float *k, int heads, int rows, int S, int D,
                           int64_t head_stride, float *out) {
    for (int h = 0; h < heads; h++)
        for (int r = 0; r < rows; r++) {
            const float *qr = q + ((int64_t)h * rows + r) * D;
            float *o = out + ((int64_t)h * rows + r) * S;
            for (int s = 0; s < S; s++) o[s] = dot16(qr, k + h * head_stride + (int64_t)s * D, D);
        }
}

/* out[i] = the n values of row i added one after another, from 0 (a softmax's total). */
EXPORT void dl_row_sums(const float *x, int n, int S, float *out) {
    for (int i = 0; i < n; i++) {
        float sum = 0.0f;
        for (int s = 0; s < S; s++) sum = sum + x[(int64_t)i * S + s];
        out[i] = sum;
    }
}

/* out (heads, rows, D) = sum over s, one key after another from 0, of p[h, r, s] * v[h, s]. */
EXPORT void dl_attn_values(const float *p, const float *v, int heads, int rows, int S, int D,
                           int64_t head_stride, float *out) {
    for (int h = 0; h < heads; h++)
        for (int r = 0; r < rows; r++) {
            const float *pr = p + ((int64_t)h * rows + r) * S;
            float *o = out + ((int64_t)h * rows + r) * D;
            for (int d = 0; d < D; d++) o[d] = 0.0f;
            for (int s = 0; s < S; s++) {
                float w = pr[s];
                const float *vs = v + h * head_stride + (int64_t)s * D;
                for (int d = 0; d < D; d++) o[d] = o[d] + w * vs[d];
            }
        }
}
