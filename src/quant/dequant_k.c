/* Scalar reference dequantizers for the K-quants (256-element super-blocks).
 *
 * As gguf-py computes them, in float32: the sub-block scale d * sc and min dmin * m first, then
 * x = (scale * q) - min. Every product here is exact in float32 (binary16 d: 11 bits, times a
 * scale of at most 8 bits, times a code of at most 6: 25 bits only for Q6_K, whose product is
 * the last operation), so each value is the exact d * sc * q - dmin * m rounded once; the order
 * and fusing of operations cannot change it. */
#include "quant/dequant.h"

#include "quant/half.h"

/* y[0, n) = (dl * q) - ml for the n codes q, in float32. */
static void scale_sub(float *y, const uint8_t *q, int n, float dl, float ml)
{
    for (int l = 0; l < n; l++) {
        const float p = dl * (float)q[l];
        y[l]          = p - ml;
    }
}

void celer_dequant_row_q2_K(const void *src, float *y, int64_t n)
{
    const celer_block_q2_K *x = src; /* (n / 256) blocks */
    for (int64_t b = 0; b < n / CELER_QK_K; b++, y += CELER_QK_K) {
        const float d = celer_half_to_f32(x[b].d), dmin = celer_half_to_f32(x[b].dmin);
        uint8_t     q[CELER_QK_K]; /* (256) codes 0..3 */
        for (int i = 0; i < CELER_QK_K; i++) {
            const int half = i / 128, s = (i % 128) / 32, l = i % 32;
            q[i] = (x[b].qs[32 * half + l] >> (2 * s)) & 3;
        }
        for (int sb = 0; sb < CELER_QK_K / 16; sb++) {
            const float dl = d * (float)(x[b].scales[sb] & 0x0f);
            const float ml = dmin * (float)(x[b].scales[sb] >> 4);
            scale_sub(y + 16 * sb, q + 16 * sb, 16, dl, ml);
        }
    }
}

void celer_dequant_row_q3_K(const void *src, float *y, int64_t n)
{
    const celer_block_q3_K *x = src; /* (n / 256) blocks */
    for (int64_t b = 0; b < n / CELER_QK_K; b++, y += CELER_QK_K) {
        const float    d  = celer_half_to_f32(x[b].d);
        const uint8_t *sc = x[b].scales;
        for (int sb = 0; sb < CELER_QK_K / 16; sb++) {
            const int lo = (sb < 8 ? sc[sb] : sc[sb - 8] >> 4) & 0x0f;
            const int hi = (sc[8 + (sb & 3)] >> (2 * (sb >> 2))) & 3;
            const float dl = d * (float)((lo | hi << 4) - 32);
            for (int l = 0; l < 16; l++) {
                const int i = 16 * sb + l, half = i / 128, s = (i % 128) / 32, k = i % 32;
                const int low2 = (x[b].qs[32 * half + k] >> (2 * s)) & 3;
                const int high = (x[b].hmask[k] >> (i / 32)) & 1; /* clear: subtract 4 */
                y[i]           = dl * (float)(low2 - (high ? 0 : 4));
            }
        }
    }
}

/* The 6-bit scales and mins of Q4_K/Q5_K sub-blocks j = 0..7, from scales[12]:
 * j < 4: sc = scales[j] & 63, m = scales[j + 4] & 63; j >= 4: the low 4 bits come from the
 * nibbles of scales[j + 4] and the high 2 bits from the top of scales[j - 4] / scales[j]. */
static void get_scale_min(const uint8_t *scales, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = scales[j] & 63;
        *m  = scales[j + 4] & 63;
    } else {
        *sc = (scales[j + 4] & 0x0f) | ((scales[j - 4] >> 2) & 0x30);
        *m  = (scales[j + 4] >> 4) | ((scales[j] >> 2) & 0x30);
    }
}

/* Q4_K and Q5_K: sub-block j holds elements 32j..32j+31; its low 4 bits are the low (j even)
 * or high (j odd) nibbles of qs[32 (j / 2) ...], and for Q5_K bit 4 is bit j of qh[l]. */
static void dequant_k45(celer_half hd, celer_half hdmin, const uint8_t *scales, const uint8_t *qs,
                        const uint8_t *qh, float *y)
{
    const float d = celer_half_to_f32(hd), dmin = celer_half_to_f32(hdmin);
    for (int j = 0; j < CELER_QK_K / 32; j++) {
        int sc, m;
        get_scale_min(scales, j, &sc, &m);
        const float dl = d * (float)sc, ml = dmin * (float)m;
        uint8_t     q[32];
        for (int l = 0; l < 32; l++) {
            q[l] = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0x0f;
            if (qh) q[l] |= ((qh[l] >> j) & 1) << 4;
        }
        scale_sub(y + 32 * j, q, 32, dl, ml);
    }
}

void celer_dequant_row_q4_K(const void *src, float *y, int64_t n)
{
    const celer_block_q4_K *x = src; /* (n / 256) blocks */
    for (int64_t b = 0; b < n / CELER_QK_K; b++, y += CELER_QK_K)
        dequant_k45(x[b].d, x[b].dmin, x[b].scales, x[b].qs, NULL, y);
}

void celer_dequant_row_q5_K(const void *src, float *y, int64_t n)
{
    const celer_block_q5_K *x = src; /* (n / 256) blocks */
    for (int64_t b = 0; b < n / CELER_QK_K; b++, y += CELER_QK_K)
        dequant_k45(x[b].d, x[b].dmin, x[b].scales, x[b].qs, x[b].qh, y);
}

void celer_dequant_row_q6_K(const void *src, float *y, int64_t n)
{
    const celer_block_q6_K *x = src; /* (n / 256) blocks */
    for (int64_t b = 0; b < n / CELER_QK_K; b++, y += CELER_QK_K) {
        const float d = celer_half_to_f32(x[b].d);
        for (int sb = 0; sb < CELER_QK_K / 16; sb++) {
            const float dl = d * (float)x[b].scales[sb];
            for (int l = 0; l < 16; l++) {
                /* per 128-element half: low 4 bits from 64 bytes of ql (low nibbles for the
                 * first 64 elements, high for the next), high 2 bits from 32 bytes of qh */
                const int i = 16 * sb + l, half = i / 128, r = i % 128;
                const int lo = (x[b].ql[64 * half + r % 64] >> (4 * (r / 64))) & 0x0f;
                const int hi = (x[b].qh[32 * half + r % 32] >> (2 * (r / 32))) & 3;
                y[i]         = dl * (float)((lo | hi << 4) - 32);
            }
        }
    }
}

void celer_dequant_row_q8_K(const void *src, float *y, int64_t n)
{
    const celer_block_q8_K *x = src; /* (n / 256) blocks */
    for (int64_t b = 0; b < n / CELER_QK_K; b++, y += CELER_QK_K)
        for (int j = 0; j < CELER_QK_K; j++) y[j] = (float)x[b].qs[j] * x[b].d;
}
