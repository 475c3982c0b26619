/* Scalar reference dequantizers for the float and 32-element block types, the dispatch table,
 * and the Q8_0/Q8_K activation quantizers. K-quants are in dequant_k.c.
 *
 * Values are computed with the float32 operations of gguf-py's numpy code, in its order:
 * Q4_0 is d * (float)(q - 8), Q4_1 is (d * q) + m. For these formats the order cannot change a
 * result: d is a binary16 (11 significant bits) and q at most 8 bits, so every product is exact
 * in float32 and the only rounding is the final add. A fused multiply-add, or q*d - 8*d, gives
 * the same bits; what would not is rounding d or a product to binary16, or a wider type. */
#include "quant/dequant.h"

#include "core/error.h"
#include "quant/half.h"

#include <math.h>
#include <string.h>

/* ---- float types --------------------------------------------------------------------- */

void celer_dequant_row_f32(const void *src, float *y, int64_t n)
{
    memcpy(y, src, (size_t)n * sizeof *y); /* bits as stored, NaN payloads included */
}

void celer_dequant_row_f16(const void *src, float *y, int64_t n)
{
    const uint8_t *p = src; /* (n) binary16, little-endian */
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        uint32_t u = celer_f32_bits(celer_half_to_f32(h));
        memcpy(y + i, &u, 4);
    }
}

void celer_dequant_row_bf16(const void *src, float *y, int64_t n)
{
    const uint8_t *p = src; /* (n) bfloat16: the high half of a binary32 */
    for (int64_t i = 0; i < n; i++) {
        uint16_t b;
        memcpy(&b, p + 2 * i, 2);
        uint32_t u = (uint32_t)b << 16;
        memcpy(y + i, &u, 4);
    }
}

/* ---- 32-element blocks ----------------------------------------------------------------
 * In each, element j < 16 takes the low nibble of qs[j] and element j + 16 the high nibble;
 * for the 5-bit types bit 4 of element j is bit j of qh read as a little-endian uint32. */

static uint32_t qh_bits(const uint8_t qh[4])
{
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

void celer_dequant_row_q4_0(const void *src, float *y, int64_t n)
{
    const celer_block_q4_0 *x = src; /* (n / 32) blocks */
    for (int64_t b = 0; b < n / CELER_QK4_0; b++, y += CELER_QK4_0) {
        const float d = celer_half_to_f32(x[b].d);
        for (int j = 0; j < CELER_QK4_0 / 2; j++) {
            y[j]                   = d * (float)((x[b].qs[j] & 0x0f) - 8);
            y[j + CELER_QK4_0 / 2] = d * (float)((x[b].qs[j] >> 4) - 8);
        }
    }
}

void celer_dequant_row_q4_1(const void *src, float *y, int64_t n)
{
    const celer_block_q4_1 *x = src; /* (n / 32) blocks */
    for (int64_t b = 0; b < n / CELER_QK4_1; b++, y += CELER_QK4_1) {
        const float d = celer_half_to_f32(x[b].d), m = celer_half_to_f32(x[b].m);
        for (int j = 0; j < CELER_QK4_1 / 2; j++) {
            const float lo = d * (float)(x[b].qs[j] & 0x0f), hi = d * (float)(x[b].qs[j] >> 4);
            y[j]                   = lo + m;
            y[j + CELER_QK4_1 / 2] = hi + m;
        }
    }
}

void celer_dequant_row_q5_0(const void *src, float *y, int64_t n)
{
    const celer_block_q5_0 *x = src; /* (n / 32) blocks */
    for (int64_t b = 0; b < n / CELER_QK5_0; b++, y += CELER_QK5_0) {
        const float    d  = celer_half_to_f32(x[b].d);
        const uint32_t qh = qh_bits(x[b].qh);
        for (int j = 0; j < CELER_QK5_0 / 2; j++) {
            const int lo = (x[b].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            const int hi = (x[b].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            y[j]                   = d * (float)(lo - 16);
            y[j + CELER_QK5_0 / 2] = d * (float)(hi - 16);
        }
    }
}

void celer_dequant_row_q5_1(const void *src, float *y, int64_t n)
{
    const celer_block_q5_1 *x = src; /* (n / 32) blocks */
    for (int64_t b = 0; b < n / CELER_QK5_1; b++, y += CELER_QK5_1) {
        const float    d = celer_half_to_f32(x[b].d), m = celer_half_to_f32(x[b].m);
        const uint32_t qh = qh_bits(x[b].qh);
        for (int j = 0; j < CELER_QK5_1 / 2; j++) {
            const int   lo = (x[b].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            const int   hi = (x[b].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            const float dl = d * (float)lo, dh = d * (float)hi;
            y[j]                   = dl + m;
            y[j + CELER_QK5_1 / 2] = dh + m;
        }
    }
}

void celer_dequant_row_q8_0(const void *src, float *y, int64_t n)
{
    const celer_block_q8_0 *x = src; /* (n / 32) blocks */
    for (int64_t b = 0; b < n / CELER_QK8_0; b++, y += CELER_QK8_0) {
        const float d = celer_half_to_f32(x[b].d);
        for (int j = 0; j < CELER_QK8_0; j++) y[j] = (float)x[b].qs[j] * d;
    }
}

/* ---- dispatch -------------------------------------------------------------------------- */

typedef void (*dequant_fn)(const void *src, float *y, int64_t n);

static const dequant_fn dequant_fns[CELER_GGML_TYPE_LIMIT] = {
    [CELER_GGML_F32]  = celer_dequant_row_f32,
    [CELER_GGML_F16]  = celer_dequant_row_f16,
    [CELER_GGML_BF16] = celer_dequant_row_bf16,
    [CELER_GGML_Q4_0] = celer_dequant_row_q4_0,
    [CELER_GGML_Q4_1] = celer_dequant_row_q4_1,
    [CELER_GGML_Q5_0] = celer_dequant_row_q5_0,
    [CELER_GGML_Q5_1] = celer_dequant_row_q5_1,
    [CELER_GGML_Q8_0] = celer_dequant_row_q8_0,
    [CELER_GGML_Q2_K] = celer_dequant_row_q2_K,
    [CELER_GGML_Q3_K] = celer_dequant_row_q3_K,
    [CELER_GGML_Q4_K] = celer_dequant_row_q4_K,
    [CELER_GGML_Q5_K] = celer_dequant_row_q5_K,
    [CELER_GGML_Q6_K] = celer_dequant_row_q6_K,
    [CELER_GGML_Q8_K] = celer_dequant_row_q8_K,
};

bool celer_dequant_supported(celer_ggml_type t)
{
    return (unsigned)t < CELER_GGML_TYPE_LIMIT && dequant_fns[t] && celer_ggml_type_get((uint32_t)t);
}

bool celer_dequant_row(celer_ggml_type t, const void *src, float *y, int64_t n)
{
    if (!celer_dequant_supported(t)) return false;
    CELER_ASSERT(n >= 0 && n % celer_ggml_type_get((uint32_t)t)->block_elems == 0);
    dequant_fns[t](src, y, n);
    return true;
}

/* ---- activation quantizers --------------------------------------------------------------
 * As ggml's quantize_row_q8_0_ref and gguf-py's Q8_0.quantize: d = amax / 127 in float32,
 * q = roundf(x * (1 / d)) (a multiply by the reciprocal, not a divide), 0 when d is 0. The
 * clamp only matters for non-finite input, which it maps to defined codes. */

static int8_t round_code(float v)
{
    if (!(v > -127.0f)) return v != v ? 0 : -127; /* NaN: 0 */
    if (v > 127.0f) return 127;
    return (int8_t)roundf(v); /* half away from zero */
}

static float quantize_block(const float *x, int8_t *q, int n)
{
    float amax = 0.0f;
    for (int j = 0; j < n; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d  = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < n; j++) q[j] = round_code(x[j] * id);
    return d;
}

void celer_quantize_row_q8_0_ref(const float *x, celer_block_q8_0 *y, int64_t n)
{
    CELER_ASSERT(n >= 0 && n % CELER_QK8_0 == 0);
    for (int64_t b = 0; b < n / CELER_QK8_0; b++, x += CELER_QK8_0)
        y[b].d = celer_f32_to_half(quantize_block(x, y[b].qs, CELER_QK8_0));
}

void celer_quantize_row_q8_K_ref(const float *x, celer_block_q8_K *y, int64_t n)
{
    CELER_ASSERT(n >= 0 && n % CELER_QK_K == 0);
    for (int64_t b = 0; b < n / CELER_QK_K; b++, x += CELER_QK_K) {
        y[b].d = quantize_block(x, y[b].qs, CELER_QK_K);
        for (int s = 0; s < CELER_QK_K / 16; s++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += y[b].qs[16 * s + j];
            y[b].bsums[s] = (int16_t)sum;
        }
    }
}
