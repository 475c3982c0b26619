/* Scalar reference kernels of celer_cpu_matmul (the contract is in dot.h). These define the
 * results every SIMD variant is tested against, and run on CPUs without AVX2. A quantized weight
 * block is dequantized (quant/dequant.h, exact but for the f32 rounding of code · scale + min) and
 * dotted with both rows of activation codes; everything is summed in double. The activation
 * quantizers of this level are act_quant.c's. */
#include "backends/cpu/dot.h"

#include "quant/dequant.h"
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
    case CELER_GGML_Q8_0: return CELER_CPU_ACT_X32;
    case CELER_GGML_Q4_K:
    case CELER_GGML_Q5_K:
    case CELER_GGML_Q6_K: return CELER_CPU_ACT_X256;
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

/* ---- the tile loops ------------------------------------------------------------------------ */

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

enum { TOKEN_TILE = 16 };

/* Weight type wtype, blocks of n elements, against activation rows of the X32 (n = 32) or X256
 * format: one weight row at a time, each block dequantized once and dotted with a tile of
 * tokens. */
static void gemm_quant_ref(celer_ggml_type wtype, int n, int64_t k, const void *w, size_t wb, int64_t nr,
                           const void *x, size_t xb, int64_t nt, float *y, size_t ys)
{
    const celer_ggml_type_info *ti = celer_ggml_type_get(wtype);
    size_t                      xs = n == 32 ? sizeof(celer_cpu_x32) : sizeof(celer_cpu_x256);
    float                       v[256];
    for (int64_t r = 0; r < nr; r++) {
        const char *wr = (const char *)w + r * wb;
        for (int64_t t0 = 0; t0 < nt; t0 += TOKEN_TILE) {
            int    tn = nt - t0 < TOKEN_TILE ? (int)(nt - t0) : TOKEN_TILE;
            double acc[TOKEN_TILE] = {0};
            for (int64_t b = 0; b < k / n; b++) {
                celer_dequant_row(wtype, wr + (size_t)b * ti->block_bytes, v, n);
                for (int t = 0; t < tn; t++) {
                    const char   *blk = (const char *)x + (t0 + t) * xb + (size_t)b * xs;
                    const int8_t *hi  = n == 32 ? ((const celer_cpu_x32 *)blk)->hi : ((const celer_cpu_x256 *)blk)->hi;
                    const int8_t *lo  = n == 32 ? ((const celer_cpu_x32 *)blk)->lo : ((const celer_cpu_x256 *)blk)->lo;
                    float         d;
                    memcpy(&d, blk, sizeof d); /* both formats start with d */
                    double sh = 0, sl = 0;
                    for (int i = 0; i < n; i++) sh += (double)v[i] * hi[i], sl += (double)v[i] * lo[i];
                    acc[t] += (double)d * (256.0 * sh + sl);
                }
            }
            for (int t = 0; t < tn; t++) y[(t0 + t) * (int64_t)ys + r] = (float)acc[t];
        }
    }
}

#define REF_GEMM_QUANT(name, wtype, n)                                                                   \
    static void name(int64_t k, const void *w, size_t wb, int64_t nr, const void *x, size_t xb, int64_t nt, \
                     float *y, size_t ys)                                                                \
    {                                                                                                    \
        gemm_quant_ref(wtype, n, k, w, wb, nr, x, xb, nt, y, ys);                                        \
    }

REF_GEMM_QUANT(gemm_q4_0_ref, CELER_GGML_Q4_0, 32)
REF_GEMM_QUANT(gemm_q4_1_ref, CELER_GGML_Q4_1, 32)
REF_GEMM_QUANT(gemm_q5_0_ref, CELER_GGML_Q5_0, 32)
REF_GEMM_QUANT(gemm_q5_1_ref, CELER_GGML_Q5_1, 32)
REF_GEMM_QUANT(gemm_q8_0_ref, CELER_GGML_Q8_0, 32)
REF_GEMM_QUANT(gemm_q4_K_ref, CELER_GGML_Q4_K, 256)
REF_GEMM_QUANT(gemm_q5_K_ref, CELER_GGML_Q5_K, 256)
REF_GEMM_QUANT(gemm_q6_K_ref, CELER_GGML_Q6_K, 256)

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
