/* 256-bit kernels of every weight type, included by x86/dot_avx2.c (X86_VNNI 0: integer dots
 * by maddubs + madd) and x86/dot_avx512vnni.c (X86_VNNI 1: vpdpbusd on ymm, AVX-512VL). The
 * includer defines X86_VNNI first and writes its own lookup (it may replace some kernels).
 *
 * Shape of every kernel: one weight row at a time, against a tile of up to NT tokens, so each
 * weight block is loaded and unpacked once per tile and dotted with NT activation blocks (held
 * in L1/L2 by the driver's token blocking). The tile sizes are compile-time constants of
 * always-inline functions, so the per-token accumulators stay in registers. */
#include "backends/cpu/dot.h"

#include <immintrin.h>
#include <string.h>

#define NT 4 /* tokens per tile */
#define INLINE static inline __attribute__((always_inline))
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

INLINE float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s        = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s        = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE float h2f(uint16_t h) { return _cvtsh_ss(h); }

/* acc + Σ of u8 · s8 over each 4 bytes, as 8 int32 (u <= 128 with |s| <= 127, or u <= 63). */
INLINE __m256i dot_us_acc(__m256i acc, __m256i u, __m256i s)
{
#if X86_VNNI
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

INLINE __m256i dot_us(__m256i u, __m256i s) { return dot_us_acc(_mm256_setzero_si256(), u, s); }

/* 256 · (u · hi) + (u · lo) over each 4 bytes: unsigned codes u by both rows of activation codes
 * (dot.h), exact in int32 for u <= 128. */
INLINE __m256i dot_hilo(__m256i u, __m256i hi, __m256i lo)
{
    return dot_us_acc(_mm256_slli_epi32(dot_us(u, hi), 8), u, lo);
}

/* Bit i of m, for the 32 bytes i, as 0x10 or 0. */
INLINE __m256i bits_to_0x10(uint32_t m)
{
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2,
                                          3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit  = _mm256_set1_epi64x(0x8040201008040201ll);
    __m256i       v    = _mm256_shuffle_epi8(_mm256_set1_epi32((int)m), shuf);
    v                  = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* 16 bytes of nibbles → 32 bytes: low nibbles (elements 0-15), then high (16-31). */
INLINE __m256i nibbles32(const uint8_t *qs)
{
    __m128i q = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(15));
}

INLINE uint32_t ld32(const uint8_t *p)
{
    uint32_t u;
    memcpy(&u, p, 4);
    return u;
}

/* ---- 32-element block types against Q8_0 activations -------------------------------------- */

/* Weights of one block unpacked: signed codes (Q4_0, Q5_0, Q8_0) or unsigned codes with a min
 * (Q4_1, Q5_1), and the scales. */
typedef struct {
    __m256i q;
    float   d, m;
} wblock;

INLINE wblock unpack_q4_0(const void *p, int64_t b)
{
    const celer_block_q4_0 *w = (const celer_block_q4_0 *)p + b;
    return (wblock){_mm256_sub_epi8(nibbles32(w->qs), _mm256_set1_epi8(8)), h2f(w->d), 0};
}
INLINE wblock unpack_q4_1(const void *p, int64_t b)
{
    const celer_block_q4_1 *w = (const celer_block_q4_1 *)p + b;
    return (wblock){nibbles32(w->qs), h2f(w->d), h2f(w->m)};
}
INLINE wblock unpack_q5_0(const void *p, int64_t b)
{
    const celer_block_q5_0 *w = (const celer_block_q5_0 *)p + b;
    __m256i                 q = _mm256_or_si256(nibbles32(w->qs), bits_to_0x10(ld32(w->qh)));
    return (wblock){_mm256_sub_epi8(q, _mm256_set1_epi8(16)), h2f(w->d), 0};
}
INLINE wblock unpack_q5_1(const void *p, int64_t b)
{
    const celer_block_q5_1 *w = (const celer_block_q5_1 *)p + b;
    return (wblock){_mm256_or_si256(nibbles32(w->qs), bits_to_0x10(ld32(w->qh))), h2f(w->d), h2f(w->m)};
}
INLINE wblock unpack_q8_0(const void *p, int64_t b)
{
    const celer_block_q8_0 *w = (const celer_block_q8_0 *)p + b;
    return (wblock){_mm256_loadu_si256((const __m256i *)w->qs), h2f(w->d), 0};
}

/* One block b against nt tokens, into the accumulators acc (one per token); signed: weights are
 * signed codes, else unsigned codes plus a min, whose term comes from the block sums beside each
 * activation row. */
INLINE void block32(wblock (*unpack)(const void *, int64_t), int is_signed, int64_t nb, int64_t b, const void *w,
                    const char *x, size_t xb, int nt, __m256 *acc, float *msum)
{
    wblock  wq = unpack(w, b);
    __m256i wa = is_signed ? _mm256_abs_epi8(wq.q) : wq.q;
    for (int t = 0; t < nt; t++) {
        const char          *row = x + t * xb;
        const celer_cpu_x32 *xq  = (const celer_cpu_x32 *)row + b;
        __m256i              xh  = _mm256_loadu_si256((const __m256i *)xq->hi);
        __m256i              xl  = _mm256_loadu_si256((const __m256i *)xq->lo);
        if (is_signed) xh = _mm256_sign_epi8(xh, wq.q), xl = _mm256_sign_epi8(xl, wq.q);
        __m256i s = dot_hilo(wa, xh, xl);
        acc[t]    = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(wq.d * xq->d), acc[t]);
        if (!is_signed) {
            int32_t sx;
            memcpy(&sx, row + CELER_CPU_X32_SUMS_AT(nb) + (size_t)b * sizeof sx, sizeof sx);
            msum[t] += wq.m * (xq->d * (float)sx);
        }
    }
}

/* One row of nb blocks against nt <= NT tokens; signed: weights are signed codes, else
 * unsigned codes plus a min, whose term comes from the sums quantization left beside each
 * activation row. Even and odd blocks go to two accumulator sets, named rather than indexed so
 * that they stay in registers, hiding the FMA latency when nt is 1. */
INLINE void row32(wblock (*unpack)(const void *, int64_t), int is_signed, size_t bsz, int64_t nb, const void *w,
                  const char *x, size_t xb, int nt, float *y, size_t ys)
{
    __m256 even[NT], odd[NT];
    float  msum[NT];
    for (int t = 0; t < nt; t++) even[t] = odd[t] = _mm256_setzero_ps(), msum[t] = 0;
    int64_t b = 0;
    for (; b + 1 < nb; b += 2) {
        /* weights stream once: ask for them ~0.5 KiB early (a row's tail prefetches the next row's
         * head); the hardware prefetcher alone left one core at a third of its read bandwidth */
        _mm_prefetch((const char *)w + (size_t)b * bsz + 512, _MM_HINT_T0);
        block32(unpack, is_signed, nb, b, w, x, xb, nt, even, msum);
        block32(unpack, is_signed, nb, b + 1, w, x, xb, nt, odd, msum);
    }
    if (b < nb) block32(unpack, is_signed, nb, b, w, x, xb, nt, even, msum);
    for (int t = 0; t < nt; t++) y[t * ys] = hsum8(_mm256_add_ps(even[t], odd[t])) + msum[t];
}

/* The kernel loop nest: rows outer (a row stays in L1 across token tiles), tiles of NT tokens,
 * and the remainder tile as its own constant size. */
#define GEMM_ROWS(name, row_call)                                                                          \
    __attribute__((unused)) static void name(int64_t k, const void *w, size_t wb, int64_t nr, const void *x,   \
                                             size_t xb, int64_t nt, float *y, size_t ys)                   \
    {                                                                                                      \
        for (int64_t r = 0; r < nr; r++) {                                                                 \
            const char *wr = (const char *)w + r * wb;                                                     \
            int64_t     t  = 0;                                                                            \
            for (; t + NT <= nt; t += NT) row_call(k, wr, (const char *)x + t * xb, xb, NT, y + t * ys + r, ys); \
            switch (nt - t) {                                                                              \
            case 3: row_call(k, wr, (const char *)x + t * xb, xb, 3, y + t * ys + r, ys); break;          \
            case 2: row_call(k, wr, (const char *)x + t * xb, xb, 2, y + t * ys + r, ys); break;          \
            case 1: row_call(k, wr, (const char *)x + t * xb, xb, 1, y + t * ys + r, ys); break;          \
            default: break;                                                                                \
            }                                                                                              \
        }                                                                                                  \
    }

#define ROW32(type, sgn)                                                                                   \
    INLINE void row_##type(int64_t k, const char *w, const char *x, size_t xb, int nt, float *y, size_t ys) \
    {                                                                                                      \
        row32(unpack_##type, sgn, sizeof(celer_block_##type), k / 32, w, x, xb, nt, y, ys);                                            \
    }                                                                                                      \
    GEMM_ROWS(gemm_##type, row_##type)

ROW32(q4_0, 1)
ROW32(q4_1, 0)
ROW32(q5_0, 1)
ROW32(q5_1, 0)
ROW32(q8_0, 1)

/* ---- K-quants against Q8_K activations ---------------------------------------------------- */

/* Σ_i q_i · x_i · sc over 32 elements as 8 int32: codes u <= 31, scale broadcast as int16. */
INLINE __m256i dot_scaled(__m256i u, __m256i x, __m256i sc16)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), sc16);
}

/* Q4_K and Q5_K: per block, 8 sub-blocks of 32 with 6-bit scales and mins. */
INLINE void row_q45_K(int has_qh, int64_t k, const char *w, const char *x, size_t xb, int nt, float *y, size_t ys)
{
    const size_t bbytes = has_qh ? sizeof(celer_block_q5_K) : sizeof(celer_block_q4_K);
    __m256       acc[NT];
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    for (int64_t b = 0; b < k / CELER_QK_K; b++) {
        const char    *blk = w + b * bbytes;
        _mm_prefetch(blk + 2 * bbytes, _MM_HINT_T0); /* see row32 */
        _mm_prefetch(blk + 2 * bbytes + 64, _MM_HINT_T0);
        /* Q4_K and Q5_K share d, dmin, scales at the front; qs is last */
        const celer_block_q4_K *h = (const celer_block_q4_K *)blk;
        const uint8_t *qs = has_qh ? ((const celer_block_q5_K *)blk)->qs : h->qs;
        float          d = h2f(h->d), dmin = h2f(h->dmin);
        uint8_t        sc[8], mn[8];
        celer_cpu_unpack_k_scales(h->scales, sc, mn);
        __m256i mins16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(_mm_loadl_epi64((const __m128i *)mn), dup));
        __m256i qh     = has_qh ? _mm256_loadu_si256((const __m256i *)((const celer_block_q5_K *)blk)->qh)
                                : _mm256_setzero_si256();
        __m256i lo[4], hi[4];
        for (int c = 0; c < 4; c++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            lo[c]     = _mm256_and_si256(q, _mm256_set1_epi8(15));
            hi[c]     = _mm256_and_si256(_mm256_srli_epi16(q, 4), _mm256_set1_epi8(15));
            if (has_qh) {
                __m256i b0 = _mm256_set1_epi8((char)(1 << (2 * c))), b1 = _mm256_set1_epi8((char)(2 << (2 * c)));
                lo[c] = _mm256_or_si256(lo[c], _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0),
                                                                _mm256_set1_epi8(16)));
                hi[c] = _mm256_or_si256(hi[c], _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1),
                                                                _mm256_set1_epi8(16)));
            }
        }
        for (int t = 0; t < nt; t++) {
            const celer_cpu_x256 *xq = (const celer_cpu_x256 *)(x + t * xb) + b;
            __m256i               ih = _mm256_setzero_si256(), il = _mm256_setzero_si256();
            for (int c = 0; c < 4; c++) {
                __m256i s0 = _mm256_set1_epi16(sc[2 * c]), s1 = _mm256_set1_epi16(sc[2 * c + 1]);
                ih = _mm256_add_epi32(ih, dot_scaled(lo[c], _mm256_loadu_si256((const __m256i *)(xq->hi + 64 * c)), s0));
                ih = _mm256_add_epi32(ih, dot_scaled(hi[c], _mm256_loadu_si256((const __m256i *)(xq->hi + 64 * c + 32)), s1));
                il = _mm256_add_epi32(il, dot_scaled(lo[c], _mm256_loadu_si256((const __m256i *)(xq->lo + 64 * c)), s0));
                il = _mm256_add_epi32(il, dot_scaled(hi[c], _mm256_loadu_si256((const __m256i *)(xq->lo + 64 * c + 32)), s1));
            }
            /* 256 · hi + lo: at most 257 · 8 · 2 · 2 · 31 · 127 · 63 < 2^31 for Q5_K's codes */
            __m256i is = _mm256_add_epi32(_mm256_slli_epi32(ih, 8), il);
            __m256i im = _mm256_add_epi32(
                _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xq->hsums), mins16), 8),
                _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xq->lsums), mins16));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(d * xq->d), acc[t]);
            acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(im), _mm256_set1_ps(dmin * xq->d), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) y[t * ys] = hsum8(acc[t]);
}

INLINE void row_q4_K(int64_t k, const char *w, const char *x, size_t xb, int nt, float *y, size_t ys)
{
    row_q45_K(0, k, w, x, xb, nt, y, ys);
}
INLINE void row_q5_K(int64_t k, const char *w, const char *x, size_t xb, int nt, float *y, size_t ys)
{
    row_q45_K(1, k, w, x, xb, nt, y, ys);
}
GEMM_ROWS(gemm_q4_K, row_q4_K)
GEMM_ROWS(gemm_q5_K, row_q5_K)

/* Q6_K: 16 sub-blocks of 16 with int8 scales; codes 0..63 with an offset of 32, which comes out
 * as 32 · Σ_s sc_s · bsums_s. */
INLINE void row_q6_K(int64_t k, const char *w, const char *x, size_t xb, int nt, float *y, size_t ys)
{
    __m256 acc[NT];
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    for (int64_t b = 0; b < k / CELER_QK_K; b++) {
        const celer_block_q6_K *wq = (const celer_block_q6_K *)w + b;
        _mm_prefetch((const char *)(wq + 2), _MM_HINT_T0); /* see row32 */
        _mm_prefetch((const char *)(wq + 2) + 64, _MM_HINT_T0);
        float                   d  = h2f(wq->d);
        __m256i q[8], sc[8]; /* element groups of 32 in order, and their pair of int16 scales */
        for (int n = 0; n < 2; n++) {
            __m256i la = _mm256_loadu_si256((const __m256i *)(wq->ql + 64 * n));
            __m256i lb = _mm256_loadu_si256((const __m256i *)(wq->ql + 64 * n + 32));
            __m256i h  = _mm256_loadu_si256((const __m256i *)(wq->qh + 32 * n));
            q[4 * n + 0] = _mm256_or_si256(_mm256_and_si256(la, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
            q[4 * n + 1] = _mm256_or_si256(_mm256_and_si256(lb, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
            q[4 * n + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(la, 4), m4), _mm256_and_si256(h, m30));
            q[4 * n + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lb, 4), m4),
                                           _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
        }
        for (int g = 0; g < 8; g++)
            sc[g] = _mm256_set_m128i(_mm_set1_epi16(wq->scales[2 * g + 1]), _mm_set1_epi16(wq->scales[2 * g]));
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)wq->scales));
        for (int t = 0; t < nt; t++) {
            const celer_cpu_x256 *xq = (const celer_cpu_x256 *)(x + t * xb) + b;
            __m256i               ih = _mm256_setzero_si256(), il = _mm256_setzero_si256();
            for (int g = 0; g < 8; g++) {
                ih = _mm256_add_epi32(ih, dot_scaled(q[g], _mm256_loadu_si256((const __m256i *)(xq->hi + 32 * g)), sc[g]));
                il = _mm256_add_epi32(il, dot_scaled(q[g], _mm256_loadu_si256((const __m256i *)(xq->lo + 32 * g)), sc[g]));
            }
            ih = _mm256_sub_epi32(ih, _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xq->hsums), sc16), 5));
            il = _mm256_sub_epi32(il, _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xq->lsums), sc16), 5));
            /* the int8 scales can take 256 · hi past int32: combine in float */
            __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ih), _mm256_set1_ps(256.0f), _mm256_cvtepi32_ps(il));
            acc[t]   = _mm256_fmadd_ps(f, _mm256_set1_ps(d * xq->d), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) y[t * ys] = hsum8(acc[t]);
}
GEMM_ROWS(gemm_q6_K, row_q6_K)

/* ---- F32, F16, BF16 against f32 activations ----------------------------------------------- */

INLINE __m256 load8_f32(const void *p, int64_t i) { return _mm256_loadu_ps((const float *)p + i); }
INLINE __m256 load8_f16(const void *p, int64_t i)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
}
INLINE __m256 load8_bf16(const void *p, int64_t i)
{
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
INLINE float load1_f32(const void *p, int64_t i) { return ((const float *)p)[i]; }
INLINE float load1_f16(const void *p, int64_t i) { return h2f(((const uint16_t *)p)[i]); }
INLINE float load1_bf16(const void *p, int64_t i)
{
    uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
    float    f;
    memcpy(&f, &u, 4);
    return f;
}

#define ROWF(type)                                                                                          \
    INLINE void row_##type(int64_t k, const char *w, const char *x, size_t xb, int nt, float *y, size_t ys)  \
    {                                                                                                       \
        __m256  acc[2][NT];                                                                                 \
        for (int t = 0; t < nt; t++) acc[0][t] = acc[1][t] = _mm256_setzero_ps();                          \
        int64_t i = 0;                                                                                      \
        for (; i + 16 <= k; i += 16) {                                                                      \
            __m256 w0 = load8_##type(w, i), w1 = load8_##type(w, i + 8);                                    \
            for (int t = 0; t < nt; t++) {                                                                  \
                const float *xt = (const float *)(x + t * xb);                                              \
                acc[0][t]       = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xt + i), acc[0][t]);                  \
                acc[1][t]       = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xt + i + 8), acc[1][t]);              \
            }                                                                                               \
        }                                                                                                   \
        for (int t = 0; t < nt; t++) {                                                                      \
            const float *xt = (const float *)(x + t * xb);                                                  \
            float        s  = hsum8(_mm256_add_ps(acc[0][t], acc[1][t]));                                   \
            for (int64_t j = i; j < k; j++) s += load1_##type(w, j) * xt[j];                                \
            y[t * ys] = s;                                                                                  \
        }                                                                                                   \
    }                                                                                                       \
    GEMM_ROWS(gemm_##type, row_##type)

ROWF(f32)
ROWF(f16)
ROWF(bf16)
