/* AVX2 + FMA + F16C kernels (compiled with -mavx2 -mfma -mf16c; run only where
 * celer_cpu_isa_available says so) and the AVX2 activation quantizers. */
#if defined(__x86_64__)

#define X86_VNNI 0
#include "backends/cpu/x86/dot_x86_256.h"

#include "quant/half.h"

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

/* 32 floats → 32 int8 codes at q. */
INLINE void quantize32(const float *x, __m256 id, int8_t *q)
{
    __m256i i0 = code8(_mm256_loadu_ps(x), id), i1 = code8(_mm256_loadu_ps(x + 8), id);
    __m256i i2 = code8(_mm256_loadu_ps(x + 16), id), i3 = code8(_mm256_loadu_ps(x + 24), id);
    __m256i p  = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    p          = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)q, p);
}

INLINE float amax_n(const float *x, int n)
{
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) m = _mm256_max_ps(abs8(_mm256_loadu_ps(x + i)), m); /* NaN skipped, as fmaxf */
    return hmax8(m);
}

void celer_cpu_quantize_q8_0_avx2(const float *x, celer_block_q8_0 *y, int64_t n)
{
    for (int64_t b = 0; b < n / CELER_QK8_0; b++, x += CELER_QK8_0) {
        float d = amax_n(x, CELER_QK8_0) / 127.0f;
        y[b].d  = celer_f32_to_half(d);
        quantize32(x, _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f), y[b].qs);
    }
}

void celer_cpu_quantize_q8_K_avx2(const float *x, celer_block_q8_K *y, int64_t n)
{
    for (int64_t b = 0; b < n / CELER_QK_K; b++, x += CELER_QK_K) {
        float d = amax_n(x, CELER_QK_K) / 127.0f;
        y[b].d  = d;
        __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
        for (int i = 0; i < CELER_QK_K; i += 32) quantize32(x + i, id, y[b].qs + i);
        for (int j = 0; j < CELER_QK_K / 16; j++) {
            /* sums of 16 codes: widen to int16 and add pairs down */
            __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(y[b].qs + 16 * j)));
            __m128i s = _mm_add_epi16(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
            s         = _mm_add_epi16(s, _mm_unpackhi_epi64(s, s));
            s         = _mm_add_epi16(s, _mm_srli_epi64(s, 32));
            s         = _mm_add_epi16(s, _mm_srli_epi32(s, 16));
            y[b].bsums[j] = (int16_t)_mm_cvtsi128_si32(s);
        }
    }
}

#endif
