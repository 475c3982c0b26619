/* AVX-512 (F, BW, VL, DQ) + VNNI kernels (compiled with those flags; run only where
 * celer_cpu_isa_available says so): the 256-bit kernels with vpdpbusd for the integer dots,
 * and 512-bit kernels for Q4_0 and Q8_0 (two blocks per zmm), the r16 kernels of GGUF types and
 * of MLX-quantized matrices (x86/mlx_avx512.h). */
#if defined(__x86_64__)

#define X86_VNNI 1
#include "backends/cpu/x86/dot_x86_256.h"
#include "backends/cpu/x86/mlx_x86_256.h"

/* ---- 512-bit Q4_0 and Q8_0: two blocks per zmm --------------------------------------------
 * Lanes 0-7 of the integer sums belong to the first block, 8-15 to the second; their scales
 * d_w · d_x are spread the same way. Both types dot |w| with x given w's sign (Q4_0's codes
 * are nibble - 8), so the integer sums stay exact: no offset term that cancels in float. */

INLINE __m128 pair_dw(uint16_t d0, uint16_t d1)
{
    return _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)d0 | (uint32_t)d1 << 16)));
}

/* [dw0 · e0 ×8, dw1 · e1 ×8]: weight scales (lanes 0, 1 of dw) by the two blocks' d. */
INLINE __m512 pair_scales(__m128 dw, const celer_cpu_x32 *x)
{
    const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    __m128        de  = _mm_setr_ps(x[0].d, x[1].d, 0, 0);
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(_mm_mul_ps(dw, de)));
}

INLINE __m512i load_pair(const int8_t *a, const int8_t *b)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}

INLINE void row_wide(int is_q8, int64_t k, const char *w, const char *x, size_t xb, int nt, float *y, size_t ys)
{
    const int64_t nb = k / 32;
    __m512        acc[NT];
    __m256        tail[NT];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps(), tail[t] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        __m512i wq;
        __m128  dw;
        /* stream the weights ~0.5 KiB ahead (see row32) */
        _mm_prefetch(w + (size_t)b * (is_q8 ? sizeof(celer_block_q8_0) : sizeof(celer_block_q4_0)) + 512, _MM_HINT_T0);
        if (is_q8) {
            const celer_block_q8_0 *wb = (const celer_block_q8_0 *)w + b;
            wq = load_pair(wb[0].qs, wb[1].qs);
            dw = pair_dw(wb[0].d, wb[1].d);
        } else {
            const celer_block_q4_0 *wb = (const celer_block_q4_0 *)w + b;
            __m256i q01 = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)wb[1].qs),
                                           _mm_loadu_si128((const __m128i *)wb[0].qs));
            wq = _mm512_inserti64x4(_mm512_castsi256_si512(q01), _mm256_srli_epi16(q01, 4), 1);
            wq = _mm512_and_si512(_mm512_shuffle_i64x2(wq, wq, _MM_SHUFFLE(3, 1, 2, 0)), _mm512_set1_epi8(15));
            wq = _mm512_sub_epi8(wq, _mm512_set1_epi8(8));
            dw = pair_dw(wb[0].d, wb[1].d);
        }
        __mmask64 neg = _mm512_movepi8_mask(wq);
        wq            = _mm512_abs_epi8(wq);
        for (int t = 0; t < nt; t++) {
            const celer_cpu_x32 *xq = (const celer_cpu_x32 *)(x + t * xb) + b;
            __m512i              xh = load_pair(xq[0].hi, xq[1].hi), xl = load_pair(xq[0].lo, xq[1].lo);
            xh                      = _mm512_mask_sub_epi8(xh, neg, _mm512_setzero_si512(), xh);
            xl                      = _mm512_mask_sub_epi8(xl, neg, _mm512_setzero_si512(), xl);
            __m512i s = _mm512_slli_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), wq, xh), 8);
            s         = _mm512_dpbusd_epi32(s, wq, xl);
            acc[t]    = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), pair_scales(dw, xq), acc[t]);
        }
    }
    if (b < nb) { /* an odd last block: the 256-bit way */
        wblock wq = is_q8 ? unpack_q8_0(w, b) : unpack_q4_0(w, b);
        __m256i wa = _mm256_abs_epi8(wq.q);
        for (int t = 0; t < nt; t++) {
            const celer_cpu_x32 *xq = (const celer_cpu_x32 *)(x + t * xb) + b;
            __m256i s = dot_hilo(wa, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)xq->hi), wq.q),
                                 _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)xq->lo), wq.q));
            tail[t]   = _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(wq.d * xq->d));
        }
    }
    for (int t = 0; t < nt; t++) y[t * ys] = _mm512_reduce_add_ps(acc[t]) + hsum8(tail[t]);
}

INLINE void row_q4_0_wide(int64_t k, const char *w, const char *x, size_t xb, int nt, float *y, size_t ys)
{
    row_wide(0, k, w, x, xb, nt, y, ys);
}
INLINE void row_q8_0_wide(int64_t k, const char *w, const char *x, size_t xb, int nt, float *y, size_t ys)
{
    row_wide(1, k, w, x, xb, nt, y, ys);
}
GEMM_ROWS(gemm_q4_0_wide, row_q4_0_wide)
GEMM_ROWS(gemm_q8_0_wide, row_q8_0_wide)

/* ---- r16: 16 interleaved rows (repack.h) against broadcast activation codes ---------------
 * Lane r of every vector is row r. Per block and token: 8 broadcasts of 4 hi codes and 8 of lo
 * codes, 16 dot steps into four chains (the chains hide the dot latency when one token runs),
 * then 256 · hi + lo, the offset of unsigned codes (Q4_0: 8 · S, Q8_0: 128 · S, S the block's
 * 256 Σhi + Σlo) subtracted in integers, and one multiply-add by d_w · d_x for all 16 rows. */

#define R16_NT 4

INLINE int32_t ld_i32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Σ over n quads of v[j] · (256 · hi + lo), hi and lo the activation codes from element 4j on. */
INLINE __m512i r16_dot(const __m512i *v, int n, const int8_t *hi, const int8_t *lo)
{
    __m512i h0 = _mm512_setzero_si512(), h1 = h0, l0 = h0, l1 = h0;
    for (int q = 0; q < n; q += 2) {
        h0 = _mm512_dpbusd_epi32(h0, v[q], _mm512_set1_epi32(ld_i32(hi + 4 * q)));
        h1 = _mm512_dpbusd_epi32(h1, v[q + 1], _mm512_set1_epi32(ld_i32(hi + 4 * q + 4)));
        l0 = _mm512_dpbusd_epi32(l0, v[q], _mm512_set1_epi32(ld_i32(lo + 4 * q)));
        l1 = _mm512_dpbusd_epi32(l1, v[q + 1], _mm512_set1_epi32(ld_i32(lo + 4 * q + 4)));
    }
    return _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(h0, h1), 8), _mm512_add_epi32(l0, l1));
}

/* Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (repack.h): per block, codes v[q] of elements 4q .. 4q+3 for
 * the 16 rows; Q5's fifth bits come from a plane whose byte (row, i) holds in bit q the bit of
 * element 4q + i, shifted to bit 4. Unsigned codes: the offset (8 S, 16 S, 128 S) is subtracted
 * in integers, the min (Q4_1, Q5_1) added as m · d_x · S. */
INLINE void r16_group(celer_ggml_type wt, int64_t nb, const uint8_t *w, const char *x, size_t xb, int nt, float *y,
                      size_t ys)
{
    const bool   q5 = wt == CELER_GGML_Q5_0 || wt == CELER_GGML_Q5_1, mins = wt == CELER_GGML_Q4_1 || wt == CELER_GGML_Q5_1;
    const size_t hb  = mins ? 64 : 32;              /* the Q5 bit plane */
    const size_t ca  = hb + (q5 ? 64 : 0);          /* the codes */
    const size_t gbb = ca + (wt == CELER_GGML_Q8_0 ? 512 : 256);
    const int    off = wt == CELER_GGML_Q8_0 ? 128 : wt == CELER_GGML_Q4_0 ? 8 : wt == CELER_GGML_Q5_0 ? 16 : 0;
    __m512       acc[R16_NT];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *gb = w + (size_t)b * gbb;
        for (size_t o = 0; o < gbb; o += 64) _mm_prefetch((const char *)gb + 1024 + o, _MM_HINT_T0);
        __m512  dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)gb));
        __m512  mw = mins ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gb + 32))) : _mm512_setzero_ps();
        __m512i v[8];
        if (wt == CELER_GGML_Q8_0) {
            for (int j = 0; j < 8; j++) v[j] = _mm512_loadu_si512(gb + ca + 64 * j);
        } else {
            for (int j = 0; j < 4; j++) {
                __m512i n = _mm512_loadu_si512(gb + ca + 64 * j);
                v[j]      = _mm512_and_si512(n, _mm512_set1_epi8(15));
                v[j + 4]  = _mm512_and_si512(_mm512_srli_epi16(n, 4), _mm512_set1_epi8(15));
            }
        }
        if (q5) {
            __m512i h = _mm512_loadu_si512(gb + hb), m = _mm512_set1_epi8(0x10);
            v[0]      = _mm512_or_si512(v[0], _mm512_and_si512(_mm512_slli_epi16(h, 4), m));
            v[1]      = _mm512_or_si512(v[1], _mm512_and_si512(_mm512_slli_epi16(h, 3), m));
            v[2]      = _mm512_or_si512(v[2], _mm512_and_si512(_mm512_slli_epi16(h, 2), m));
            v[3]      = _mm512_or_si512(v[3], _mm512_and_si512(_mm512_slli_epi16(h, 1), m));
            v[4]      = _mm512_or_si512(v[4], _mm512_and_si512(h, m));
            v[5]      = _mm512_or_si512(v[5], _mm512_and_si512(_mm512_srli_epi16(h, 1), m));
            v[6]      = _mm512_or_si512(v[6], _mm512_and_si512(_mm512_srli_epi16(h, 2), m));
            v[7]      = _mm512_or_si512(v[7], _mm512_and_si512(_mm512_srli_epi16(h, 3), m));
        }
        for (int t = 0; t < nt; t++) {
            const char          *row = x + t * xb;
            const celer_cpu_x32 *xq  = (const celer_cpu_x32 *)row + b;
            __m512i              s   = r16_dot(v, 8, xq->hi, xq->lo);
            int32_t S  = ld_i32(row + CELER_CPU_X32_SUMS_AT(nb) + (size_t)b * sizeof(int32_t));
            if (off) s = _mm512_sub_epi32(s, _mm512_set1_epi32(off * S));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(xq->d)), acc[t]);
            if (mins) acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(xq->d * (float)S), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + t * ys, acc[t]);
}

/* 16-byte vector of u8 (or s8) per-row values → 16 floats. */
INLINE __m512 row_u8(const uint8_t *p) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p))); }
INLINE __m512 row_s8(const uint8_t *p) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p))); }

/* Q4_K (repack.h): d[16] dmin[16] sc[8][16] mn[8][16], then 32 vectors of qs; sub-block s is
 * the low (s even) or high nibbles of vectors 8 (s / 2) .. + 7. Per sub-block: f += Σ · sc,
 * g += mn · S (S = 256 Σhi + Σlo of its 32 activations); then d · f - dmin · g. */
INLINE void r16_q4_K(int64_t nb, const uint8_t *w, const char *x, size_t xb, int nt, float *y, size_t ys)
{
    const size_t gbb = 64 + 256 + 2048;
    __m512       acc[R16_NT];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *gb = w + (size_t)b * gbb;
        for (size_t off = 0; off < gbb; off += 64) _mm_prefetch((const char *)gb + 2 * gbb + off, _MM_HINT_T0);
        __m512 f[R16_NT], g[R16_NT];
        for (int t = 0; t < nt; t++) f[t] = g[t] = _mm512_setzero_ps();
        for (int sb = 0; sb < 8; sb++) {
            __m512  scf = row_u8(gb + 64 + 16 * sb), mnf = row_u8(gb + 192 + 16 * sb);
            __m512i v[8];
            for (int j = 0; j < 8; j++) {
                __m512i n = _mm512_loadu_si512(gb + 320 + 64 * (8 * (sb / 2) + j));
                v[j]      = _mm512_and_si512(sb & 1 ? _mm512_srli_epi16(n, 4) : n, _mm512_set1_epi8(15));
            }
            for (int t = 0; t < nt; t++) {
                const celer_cpu_x256 *xq = (const celer_cpu_x256 *)(x + t * xb) + b;
                __m512i               s  = r16_dot(v, 8, xq->hi + 32 * sb, xq->lo + 32 * sb);
                int32_t S = 256 * (xq->hsums[2 * sb] + xq->hsums[2 * sb + 1]) + xq->lsums[2 * sb] + xq->lsums[2 * sb + 1];
                f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scf, f[t]);
                g[t] = _mm512_fmadd_ps(mnf, _mm512_set1_ps((float)S), g[t]);
            }
        }
        __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)gb));
        __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gb + 32)));
        for (int t = 0; t < nt; t++) {
            __m512 xd = _mm512_set1_ps(((const celer_cpu_x256 *)(x + t * xb))[b].d);
            acc[t]    = _mm512_fmadd_ps(f[t], _mm512_mul_ps(dw, xd), acc[t]);
            acc[t]    = _mm512_fnmadd_ps(g[t], _mm512_mul_ps(dm, xd), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + t * ys, acc[t]);
}

/* Q6_K (repack.h): d[16] sc[16][16], then 32 vectors of ql and 16 of qh. Sub-block g (16
 * elements) of half n = g / 8 lies in region r = (g % 8) / 2 at element l0 = 16 (g % 2):
 * low (r < 2) or high nibbles of ql vectors 16n + 8 (r & 1) + l0 / 4 + i, with bits 2r, 2r + 1
 * of qh vectors 8n + l0 / 4 + i on top; codes 0..63 with an offset of 32 (32 · S in integers). */
INLINE void r16_q6_K(int64_t nb, const uint8_t *w, const char *x, size_t xb, int nt, float *y, size_t ys)
{
    const size_t gbb = 32 + 256 + 2048 + 1024;
    __m512       acc[R16_NT];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *gb = w + (size_t)b * gbb, *ql = gb + 288, *qh = gb + 288 + 2048;
        for (size_t off = 0; off < gbb; off += 64) _mm_prefetch((const char *)gb + 2 * gbb + off, _MM_HINT_T0);
        __m512 f[R16_NT];
        for (int t = 0; t < nt; t++) f[t] = _mm512_setzero_ps();
        for (int sb = 0; sb < 16; sb++) {
            int     n = sb / 8, r = (sb % 8) / 2, q0 = 4 * (sb % 2);
            __m512  scf = row_s8(gb + 32 + 16 * sb);
            __m512i v[4];
            for (int i = 0; i < 4; i++) {
                __m512i l = _mm512_loadu_si512(ql + 64 * (16 * n + 8 * (r & 1) + q0 + i));
                __m512i h = _mm512_loadu_si512(qh + 64 * (8 * n + q0 + i));
                l         = _mm512_and_si512(r < 2 ? l : _mm512_srli_epi16(l, 4), _mm512_set1_epi8(15));
                h = _mm512_and_si512(_mm512_srli_epi16(h, (unsigned)(2 * r)), _mm512_set1_epi8(3));
                v[i] = _mm512_or_si512(l, _mm512_slli_epi16(h, 4));
            }
            for (int t = 0; t < nt; t++) {
                const celer_cpu_x256 *xq = (const celer_cpu_x256 *)(x + t * xb) + b;
                __m512i               s  = r16_dot(v, 4, xq->hi + 16 * sb, xq->lo + 16 * sb);
                s    = _mm512_sub_epi32(s, _mm512_set1_epi32(32 * (256 * xq->hsums[sb] + xq->lsums[sb])));
                f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scf, f[t]);
            }
        }
        __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)gb));
        for (int t = 0; t < nt; t++)
            acc[t] = _mm512_fmadd_ps(f[t], _mm512_mul_ps(dw, _mm512_set1_ps(((const celer_cpu_x256 *)(x + t * xb))[b].d)),
                                     acc[t]);
    }
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + t * ys, acc[t]);
}

INLINE void r16_q4_0(int64_t nb, const uint8_t *w, const char *x, size_t xb, int nt, float *y, size_t ys)
{
    r16_group(CELER_GGML_Q4_0, nb, w, x, xb, nt, y, ys);
}
INLINE void r16_q4_1(int64_t nb, const uint8_t *w, const char *x, size_t xb, int nt, float *y, size_t ys)
{
    r16_group(CELER_GGML_Q4_1, nb, w, x, xb, nt, y, ys);
}
INLINE void r16_q5_0(int64_t nb, const uint8_t *w, const char *x, size_t xb, int nt, float *y, size_t ys)
{
    r16_group(CELER_GGML_Q5_0, nb, w, x, xb, nt, y, ys);
}
INLINE void r16_q5_1(int64_t nb, const uint8_t *w, const char *x, size_t xb, int nt, float *y, size_t ys)
{
    r16_group(CELER_GGML_Q5_1, nb, w, x, xb, nt, y, ys);
}
INLINE void r16_q8_0(int64_t nb, const uint8_t *w, const char *x, size_t xb, int nt, float *y, size_t ys)
{
    r16_group(CELER_GGML_Q8_0, nb, w, x, xb, nt, y, ys);
}

/* wb: bytes per group of 16 rows; nr: a multiple of 16; blk: elements per block. */
#define GEMM_R16(name, fn, blk)                                                                              \
    static void name(int64_t k, const void *w, size_t wb, int64_t nr, const void *x, size_t xb, int64_t nt,    \
                     float *y, size_t ys)                                                                    \
    {                                                                                                        \
        for (int64_t g = 0; g < nr / 16; g++) {                                                              \
            const uint8_t *wg = (const uint8_t *)w + g * wb;                                                 \
            const char    *xc = x;                                                                           \
            int64_t        t  = 0;                                                                           \
            for (; t + R16_NT <= nt; t += R16_NT) fn(k / blk, wg, xc + t * xb, xb, R16_NT, y + t * ys + 16 * g, ys); \
            switch (nt - t) {                                                                                \
            case 3: fn(k / blk, wg, xc + t * xb, xb, 3, y + t * ys + 16 * g, ys); break;                     \
            case 2: fn(k / blk, wg, xc + t * xb, xb, 2, y + t * ys + 16 * g, ys); break;                     \
            case 1: fn(k / blk, wg, xc + t * xb, xb, 1, y + t * ys + 16 * g, ys); break;                     \
            default: break;                                                                                  \
            }                                                                                                \
        }                                                                                                    \
    }

GEMM_R16(gemm_q4_0_r16, r16_q4_0, 32)
GEMM_R16(gemm_q4_1_r16, r16_q4_1, 32)
GEMM_R16(gemm_q5_0_r16, r16_q5_0, 32)
GEMM_R16(gemm_q5_1_r16, r16_q5_1, 32)
GEMM_R16(gemm_q8_0_r16, r16_q8_0, 32)
GEMM_R16(gemm_q4_K_r16, r16_q4_K, 256)
GEMM_R16(gemm_q6_K_r16, r16_q6_K, 256)

/* ---- MLX-quantized matrices ------------------------------------------------------------------ */
#include "backends/cpu/x86/mlx_avx512.h"

celer_cpu_gemm_fn celer_cpu_gemm_r16_avx512vnni(celer_ggml_type wtype)
{
    switch (wtype) {
    case CELER_GGML_Q4_0: return gemm_q4_0_r16;
    case CELER_GGML_Q4_1: return gemm_q4_1_r16;
    case CELER_GGML_Q5_0: return gemm_q5_0_r16;
    case CELER_GGML_Q5_1: return gemm_q5_1_r16;
    case CELER_GGML_Q8_0: return gemm_q8_0_r16;
    case CELER_GGML_Q4_K: return gemm_q4_K_r16;
    case CELER_GGML_Q6_K: return gemm_q6_K_r16;
    default: return NULL;
    }
}

celer_cpu_gemm_fn celer_cpu_gemm_avx512vnni(celer_ggml_type wtype)
{
    switch (wtype) {
    case CELER_GGML_F32: return gemm_f32;
    case CELER_GGML_F16: return gemm_f16;
    case CELER_GGML_BF16: return gemm_bf16;
    case CELER_GGML_Q4_0: return gemm_q4_0_wide;
    case CELER_GGML_Q4_1: return gemm_q4_1;
    case CELER_GGML_Q5_0: return gemm_q5_0;
    case CELER_GGML_Q5_1: return gemm_q5_1;
    case CELER_GGML_Q8_0: return gemm_q8_0_wide;
    case CELER_GGML_Q4_K: return gemm_q4_K;
    case CELER_GGML_Q5_K: return gemm_q5_K;
    case CELER_GGML_Q6_K: return gemm_q6_K;
    default: return NULL;
    }
}

#endif
