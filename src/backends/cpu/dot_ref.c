/* Scalar reference kernels of celer_cpu_matmul (the contract is in dot.h). These define the results every SIMD variant is tested against, and run on CPUs
 * without AVX2. Each block's integer dot product is exact; blocks are summed in double. The
 * activation quantizers of this level are quant/dequant.h's celer_quantize_row_q8_*_ref. */
#include "backends/cpu/dot.h"

#include "quant/half.h"

#include <string.h>

celer_cpu_act celer_cpu_act_of(celer_ggml_type wtype)
{
    switch (wtype) {
    case CELER_GGML_F32:
    case CELER_GGML_F16:
    case CELER_GGML_BF16: return CELER_CPU_ACT_F32;
    case CELER_GGML_Q4_0:
    case CELER_GGML_Q4_1:
    case CELER_GGML_Q5_0:
    case CELER_GGML_Q5_1:
    case CELER_GGML_Q8_0: return CELER_CPU_ACT_Q8_0;
    case CELER_GGML_Q4_K:
    case CELER_GGML_Q5_K:
    case CELER_GGML_Q6_K: return CELER_CPU_ACT_Q8_K;
    default: return CELER_CPU_ACT_NONE;
    }
}

/* ---- row dot products: nb blocks of weights w by activations x ----------------------------- */

static float dot_f32(int64_t k, const void *w, const void *x)
{
    const float *a = w, *b = x;
    double       s = 0;
    for (int64_t i = 0; i < k; i++) s += (double)a[i] * b[i];
    return (float)s;
}

static float dot_f16(int64_t k, const void *w, const void *x)
{
    const uint16_t *a = w;
    const float    *b = x;
    double          s = 0;
    for (int64_t i = 0; i < k; i++) s += (double)celer_half_to_f32(a[i]) * b[i];
    return (float)s;
}

static float dot_bf16(int64_t k, const void *w, const void *x)
{
    const uint16_t *a = w;
    const float    *b = x;
    double          s = 0;
    for (int64_t i = 0; i < k; i++) s += (double)celer_bf16_to_f32(a[i]) * b[i];
    return (float)s;
}

static float dot_q4_0(int64_t k, const void *w, const void *x)
{
    const celer_block_q4_0 *a = w;
    const celer_block_q8_0 *b = x;
    double                  s = 0;
    for (int64_t j = 0; j < k / CELER_QK4_0; j++) {
        int32_t is = 0;
        for (int i = 0; i < 16; i++)
            is += ((a[j].qs[i] & 15) - 8) * b[j].qs[i] + ((a[j].qs[i] >> 4) - 8) * b[j].qs[i + 16];
        s += (double)celer_half_to_f32(a[j].d) * celer_half_to_f32(b[j].d) * is;
    }
    return (float)s;
}

static float dot_q4_1(int64_t k, const void *w, const void *x)
{
    const celer_block_q4_1 *a = w;
    const celer_block_q8_0 *b = x;
    double                  s = 0;
    for (int64_t j = 0; j < k / CELER_QK4_1; j++) {
        int32_t is = 0, sx = 0;
        for (int i = 0; i < 16; i++) {
            is += (a[j].qs[i] & 15) * b[j].qs[i] + (a[j].qs[i] >> 4) * b[j].qs[i + 16];
            sx += b[j].qs[i] + b[j].qs[i + 16];
        }
        double dx = celer_half_to_f32(b[j].d);
        s += dx * ((double)celer_half_to_f32(a[j].d) * is + (double)celer_half_to_f32(a[j].m) * sx);
    }
    return (float)s;
}

static uint32_t load_u32(const uint8_t *p)
{
    uint32_t u;
    memcpy(&u, p, 4);
    return u;
}

static float dot_q5_0(int64_t k, const void *w, const void *x)
{
    const celer_block_q5_0 *a = w;
    const celer_block_q8_0 *b = x;
    double                  s = 0;
    for (int64_t j = 0; j < k / CELER_QK5_0; j++) {
        uint32_t qh = load_u32(a[j].qh);
        int32_t  is = 0;
        for (int i = 0; i < 16; i++) {
            int lo = (a[j].qs[i] & 15) | (int)(((qh >> i) & 1) << 4);
            int hi = (a[j].qs[i] >> 4) | (int)(((qh >> (i + 16)) & 1) << 4);
            is += (lo - 16) * b[j].qs[i] + (hi - 16) * b[j].qs[i + 16];
        }
        s += (double)celer_half_to_f32(a[j].d) * celer_half_to_f32(b[j].d) * is;
    }
    return (float)s;
}

static float dot_q5_1(int64_t k, const void *w, const void *x)
{
    const celer_block_q5_1 *a = w;
    const celer_block_q8_0 *b = x;
    double                  s = 0;
    for (int64_t j = 0; j < k / CELER_QK5_1; j++) {
        uint32_t qh = load_u32(a[j].qh);
        int32_t  is = 0, sx = 0;
        for (int i = 0; i < 16; i++) {
            int lo = (a[j].qs[i] & 15) | (int)(((qh >> i) & 1) << 4);
            int hi = (a[j].qs[i] >> 4) | (int)(((qh >> (i + 16)) & 1) << 4);
            is += lo * b[j].qs[i] + hi * b[j].qs[i + 16];
            sx += b[j].qs[i] + b[j].qs[i + 16];
        }
        double dx = celer_half_to_f32(b[j].d);
        s += dx * ((double)celer_half_to_f32(a[j].d) * is + (double)celer_half_to_f32(a[j].m) * sx);
    }
    return (float)s;
}

static float dot_q8_0(int64_t k, const void *w, const void *x)
{
    const celer_block_q8_0 *a = w;
    const celer_block_q8_0 *b = x;
    double                  s = 0;
    for (int64_t j = 0; j < k / CELER_QK8_0; j++) {
        int32_t is = 0;
        for (int i = 0; i < 32; i++) is += a[j].qs[i] * b[j].qs[i];
        s += (double)celer_half_to_f32(a[j].d) * celer_half_to_f32(b[j].d) * is;
    }
    return (float)s;
}

/* Q4_K and Q5_K: 4 chunks of 64 elements; chunk c holds sub-blocks 2c (low nibbles of
 * qs[32c, 32c+32), bit 2c of qh) and 2c+1 (high nibbles, bit 2c+1). */
static float dot_q45_K(int64_t k, const uint8_t *scales, const uint8_t *qs, const uint8_t *qh, float d, float dmin,
                       const celer_block_q8_K *b)
{
    (void)k;
    uint8_t sc[8], mn[8];
    celer_cpu_unpack_k_scales(scales, sc, mn);
    int32_t is = 0, im = 0;
    for (int c = 0; c < 4; c++) {
        int32_t s0 = 0, s1 = 0;
        for (int l = 0; l < 32; l++) {
            int q0 = qs[32 * c + l] & 15, q1 = qs[32 * c + l] >> 4;
            if (qh) {
                q0 |= ((qh[l] >> (2 * c)) & 1) << 4;
                q1 |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
            }
            s0 += q0 * b->qs[64 * c + l];
            s1 += q1 * b->qs[64 * c + 32 + l];
        }
        is += sc[2 * c] * s0 + sc[2 * c + 1] * s1;
    }
    for (int j = 0; j < 8; j++) im += mn[j] * (b->bsums[2 * j] + b->bsums[2 * j + 1]);
    return (float)((double)b->d * ((double)d * is - (double)dmin * im));
}

static float dot_q4_K(int64_t k, const void *w, const void *x)
{
    const celer_block_q4_K *a = w;
    const celer_block_q8_K *b = x;
    double                  s = 0;
    for (int64_t j = 0; j < k / CELER_QK_K; j++)
        s += dot_q45_K(k, a[j].scales, a[j].qs, NULL, celer_half_to_f32(a[j].d), celer_half_to_f32(a[j].dmin),
                       &b[j]);
    return (float)s;
}

static float dot_q5_K(int64_t k, const void *w, const void *x)
{
    const celer_block_q5_K *a = w;
    const celer_block_q8_K *b = x;
    double                  s = 0;
    for (int64_t j = 0; j < k / CELER_QK_K; j++)
        s += dot_q45_K(k, a[j].scales, a[j].qs, a[j].qh, celer_half_to_f32(a[j].d), celer_half_to_f32(a[j].dmin),
                       &b[j]);
    return (float)s;
}

/* Q6_K: two halves of 128; in each, for l < 32, ql[l] and ql[l + 32] hold the low 4 bits of
 * elements l, l + 32 (low nibbles) and l + 64, l + 96 (high nibbles); qh[l] their high 2 bits
 * (bits 0-1, 2-3, 4-5, 6-7). Sub-block of 16 elements i uses scales[i / 16]. */
static float dot_q6_K(int64_t k, const void *w, const void *x)
{
    const celer_block_q6_K *a = w;
    const celer_block_q8_K *b = x;
    double                  s = 0;
    for (int64_t j = 0; j < k / CELER_QK_K; j++) {
        int32_t sub[16] = {0};
        for (int n = 0; n < 2; n++) {
            const uint8_t *ql = a[j].ql + 64 * n, *qh = a[j].qh + 32 * n;
            const int8_t  *q8 = b[j].qs + 128 * n;
            for (int l = 0; l < 32; l++) {
                int q1 = ((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32;
                int q2 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                sub[8 * n + l / 16 + 0] += q1 * q8[l];
                sub[8 * n + l / 16 + 2] += q2 * q8[l + 32];
                sub[8 * n + l / 16 + 4] += q3 * q8[l + 64];
                sub[8 * n + l / 16 + 6] += q4 * q8[l + 96];
            }
        }
        int32_t is = 0;
        for (int i = 0; i < 16; i++) is += a[j].scales[i] * sub[i];
        s += (double)celer_half_to_f32(a[j].d) * b[j].d * is;
    }
    return (float)s;
}

/* ---- the tile loop: every reference kernel is a row dot under the contract's loop nest ----- */

#define REF_GEMM(name, dot)                                                                              \
    static void name(int64_t k, const void *w, size_t wb, int64_t nr, const void *x, size_t xb, int64_t nt, \
                     float *y, size_t ys)                                                                \
    {                                                                                                    \
        for (int64_t t = 0; t < nt; t++)                                                                 \
            for (int64_t r = 0; r < nr; r++)                                                             \
                y[t * (int64_t)ys + r] = dot(k, (const char *)w + r * wb, (const char *)x + t * xb);     \
    }

REF_GEMM(gemm_f32_ref, dot_f32)
REF_GEMM(gemm_f16_ref, dot_f16)
REF_GEMM(gemm_bf16_ref, dot_bf16)
REF_GEMM(gemm_q4_0_ref, dot_q4_0)
REF_GEMM(gemm_q4_1_ref, dot_q4_1)
REF_GEMM(gemm_q5_0_ref, dot_q5_0)
REF_GEMM(gemm_q5_1_ref, dot_q5_1)
REF_GEMM(gemm_q8_0_ref, dot_q8_0)
REF_GEMM(gemm_q4_K_ref, dot_q4_K)
REF_GEMM(gemm_q5_K_ref, dot_q5_K)
REF_GEMM(gemm_q6_K_ref, dot_q6_K)

celer_cpu_gemm_fn celer_cpu_gemm_ref(celer_ggml_type wtype)
{
    switch (wtype) {
    case CELER_GGML_F32: return gemm_f32_ref;
    case CELER_GGML_F16: return gemm_f16_ref;
    case CELER_GGML_BF16: return gemm_bf16_ref;
    case CELER_GGML_Q4_0: return gemm_q4_0_ref;
    case CELER_GGML_Q4_1: return gemm_q4_1_ref;
    case CELER_GGML_Q5_0: return gemm_q5_0_ref;
    case CELER_GGML_Q5_1: return gemm_q5_1_ref;
    case CELER_GGML_Q8_0: return gemm_q8_0_ref;
    case CELER_GGML_Q4_K: return gemm_q4_K_ref;
    case CELER_GGML_Q5_K: return gemm_q5_K_ref;
    case CELER_GGML_Q6_K: return gemm_q6_K_ref;
    default: return NULL;
    }
}
