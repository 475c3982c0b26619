/* AVX2 + FMA + F16C kernels (compiled with -mavx2 -mfma -mf16c; run only where
 * celer_cpu_isa_available says so) and the AVX2 activation quantizers. */
#if defined(__x86_64__)

#define X86_VNNI 0
#include "backends/cpu/x86/dot_x86_256.h"
#include "backends/cpu/x86/mlx_x86_256.h"

#include "quant/half.h"

celer_cpu_mlx_gemm_fn celer_cpu_mlx_gemm_avx2(const celer_mlx_quant *q) { return mlx_rows_kernel(q); }

celer_cpu_gemm_fn celer_cpu_gemm_avx2(celer_ggml_type wtype)
{
    switch (wtype) {
    case CELER_GGML_F32: return gemm_f32;
    case CELER_GGML_F16: return gemm_f16;
    case CELER_GGML_BF16: return gemm_bf16;
    case CELER_GGML_Q4_0: return gemm_q4_0;
    case CELER_GGML_Q4_1: return gemm_q4_1;
    case CELER_GGML_Q5_0: return gemm_q5_0;
    case CELER_GGML_Q5_1: return gemm_q5_1;
    case CELER_GGML_Q8_0: return gemm_q8_0;
    case CELER_GGML_Q4_K: return gemm_q4_K;
    case CELER_GGML_Q5_K: return gemm_q5_K;
    case CELER_GGML_Q6_K: return gemm_q6_K;
    default: return NULL;
    }
}

/* ---- activation quantizers: the reference's arithmetic, 8 lanes at a time ------------------- */

INLINE __m256 abs8(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

INLINE float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m        = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m        = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* The reference's code of x for the reciprocal scale id: roundf(x · id) (half away from zero)
 * after clamping to ±127, NaN to 0. The fraction of |v| is exact, so the rounding equals roundf. */
INLINE __m256i code8(__m256 x, __m256 id)
{
    __m256 v = _mm256_mul_ps(x, id);
    v        = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q)); /* NaN → 0 */
    v        = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
    __m256 a = abs8(v), t = _mm256_round_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256 up = _mm256_and_ps(_mm256_cmp_ps(_mm256_sub_ps(a, t), _mm256_set1_ps(0.5f), _CMP_GE_OQ), _mm256_set1_ps(1));
    t         = _mm256_or_ps(_mm256_add_ps(t, up), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
    return _mm256_cvtps_epi32(t);
}

/* Four vectors of 8 int32 codes (elements 0-7, ..., 24-31) → 32 int8 in element order. */
INLINE __m256i pack32(__m256i i0, __m256i i1, __m256i i2, __m256i i3)
{
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* Σ of 32 int8 codes. */
INLINE int32_t sum32(__m256i q)
{
    __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    h         = _mm_add_epi32(h, _mm_unpackhi_epi64(h, h));
    h         = _mm_add_epi32(h, _mm_srli_epi64(h, 32));
    return _mm_cvtsi128_si32(h);
}

/* 32 floats → their hi and lo codes (dot.h), with the reference's arithmetic: the residual is
 * a multiply then a subtract, never fused. */
INLINE void quantize32(const float *x, float D, float id, int8_t *hi, int8_t *lo)
{
    const __m256 vd = _mm256_set1_ps(D), vid = _mm256_set1_ps(id), vid256 = _mm256_set1_ps(id * 256.0f);
    __m256i      h[4], l[4];
    for (int i = 0; i < 4; i++) {
        __m256 xv = _mm256_loadu_ps(x + 8 * i);
        h[i]      = code8(xv, vid);
        __m256 v  = _mm256_mul_ps(_mm256_cvtepi32_ps(h[i]), vd);
        l[i]      = code8(_mm256_sub_ps(xv, v), vid256);
    }
    _mm256_storeu_si256((__m256i *)hi, pack32(h[0], h[1], h[2], h[3]));
    _mm256_storeu_si256((__m256i *)lo, pack32(l[0], l[1], l[2], l[3]));
}

INLINE float amax_n(const float *x, int n)
{
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) m = _mm256_max_ps(abs8(_mm256_loadu_ps(x + i)), m); /* NaN skipped, as fmaxf */
    return hmax8(m);
}

/* One X32 block of 32 values: both code rows and d. */
INLINE void quantize_block32(const float *xb, celer_cpu_x32 *y)
{
    float D = amax_n(xb, 32) / 127.0f, id = D != 0.0f ? 1.0f / D : 0.0f;
    quantize32(xb, D, id, y->hi, y->lo);
    y->d = D / 256.0f;
}

void celer_cpu_quantize_x32_avx2(const float *x, void *row, int64_t nb, int64_t b0, int64_t b1)
{
    celer_cpu_x32 *y    = row;
    int32_t       *sums = (int32_t *)((char *)row + CELER_CPU_X32_SUMS_AT(nb));
    for (int64_t b = b0; b < b1; b++) {
        quantize_block32(x + 32 * b, &y[b]);
        __m256i hv = _mm256_loadu_si256((const __m256i *)y[b].hi), lv = _mm256_loadu_si256((const __m256i *)y[b].lo);
        sums[b] = 256 * sum32(hv) + sum32(lv);
    }
}

/* X32 with the sums S of each 16 codes (nvfp4's groups). */
void celer_cpu_quantize_x32h_avx2(const float *x, void *row, int64_t nb, int64_t b0, int64_t b1)
{
    celer_cpu_x32 *y    = row;
    int32_t       *sums = (int32_t *)((char *)row + CELER_CPU_X32_SUMS_AT(nb));
    for (int64_t b = b0; b < b1; b++) {
        quantize_block32(x + 32 * b, &y[b]);
        for (int h = 0; h < 2; h++) {
            __m256i hv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(y[b].hi + 16 * h)));
            __m256i lv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(y[b].lo + 16 * h)));
            /* 256 · hi + lo per code fits int16 pairs summed by madd: |.| <= 32639 */
            __m256i s = _mm256_madd_epi16(_mm256_add_epi16(_mm256_slli_epi16(hv, 8), lv), _mm256_set1_epi16(1));
            __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            t         = _mm_add_epi32(t, _mm_unpackhi_epi64(t, t));
            t         = _mm_add_epi32(t, _mm_srli_epi64(t, 32));
            sums[2 * b + h] = _mm_cvtsi128_si32(t);
        }
    }
}

/* Sums of each 16 codes of 256, as int16. */
INLINE void sums16(const int8_t *q, int16_t *out)
{
    for (int j = 0; j < 16; j++) {
        __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(q + 16 * j)));
        __m128i s = _mm_add_epi16(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        s         = _mm_add_epi16(s, _mm_unpackhi_epi64(s, s));
        s         = _mm_add_epi16(s, _mm_srli_epi64(s, 32));
        s         = _mm_add_epi16(s, _mm_srli_epi32(s, 16));
        out[j]    = (int16_t)_mm_cvtsi128_si32(s);
    }
}

void celer_cpu_quantize_x256_avx2(const float *x, void *row, int64_t nb, int64_t b0, int64_t b1)
{
    (void)nb;
    celer_cpu_x256 *y = row;
    for (int64_t b = b0; b < b1; b++) {
        const float *xb = x + 256 * b;
        float        D = amax_n(xb, 256) / 127.0f, id = D != 0.0f ? 1.0f / D : 0.0f;
        for (int i = 0; i < 256; i += 32) quantize32(xb + i, D, id, y[b].hi + i, y[b].lo + i);
        y[b].d = D / 256.0f;
        sums16(y[b].hi, y[b].hsums);
        sums16(y[b].lo, y[b].lsums);
    }
}

#endif
