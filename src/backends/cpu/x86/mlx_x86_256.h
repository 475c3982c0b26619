/* 256-bit kernels of MLX-quantized matrices in the ROWS layout (repack_mlx.h, one row's blocks
 * after another), included by x86/dot_avx2.c and x86/dot_avx512vnni.c after dot_x86_256.h, whose
 * helpers they use (X86_VNNI picks maddubs + madd or vpdpbusd for the integer dots).
 *
 * Shape, as the GGUF kernels: one row at a time against a tile of up to NT tokens; each 32 codes
 * are unpacked once per tile into bytes in element order, then dotted with each token's two rows
 * of activation codes (dot.h). The values are those of dot.h's MLX contract:
 *   affine  scale · Σ q x̂ + bias · Σ x̂ per group, Σ q x̂ in integers (exact), bias · Σ x̂ from the
 *           block sums S beside the activations;
 *   fp4     2 · e2m1 in [-12, 12] (a byte shuffle), dotted as |v| by x̂ given v's sign, times
 *           scale / 2 per group; nvfp4's two groups of 16 are the low and high four int32 lanes;
 *   mxfp8   e4m3 · scale in f32 (exact), by f32 activations with FMA. */
#include "backends/cpu/repack_mlx.h"
#include "quant/mlx_quant.h"

/* Bytes ahead of the weights being read that each kernel asks for: they stream once, and one core
 * reading 4-bit rows from memory ran ~30% faster at 4 KiB than at 1 KiB (the GGUF kernels' 0.5). */
#define PREFETCH_ROWS 4096

/* ---- code planes → 32 codes, in element order ----------------------------------------------- */

/* P2 (8 bytes): byte j holds code 8c + j in bits 2c, 2c + 1; 64-bit lane c shifted by 2c gives
 * codes 8c .. 8c + 7 in its bytes' low bits. */
INLINE __m256i plane2_32(const uint8_t *p)
{
    uint64_t u;
    memcpy(&u, p, 8);
    __m256i v = _mm256_srlv_epi64(_mm256_set1_epi64x((long long)u), _mm256_setr_epi64x(0, 2, 4, 6));
    return _mm256_and_si256(v, _mm256_set1_epi8(3));
}

/* P1 (4 bytes): byte b holds code 4q + b in bit q; 32-bit lane q shifted by q. */
INLINE __m256i plane1_32(const uint8_t *p)
{
    __m256i v = _mm256_srlv_epi32(_mm256_set1_epi32((int)ld32(p)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_and_si256(v, _mm256_set1_epi8(1));
}

/* The 32 codes of width bits whose planes start at p. */
INLINE __m256i codes32(int bits, const uint8_t *p)
{
    if (bits == 8) return _mm256_loadu_si256((const __m256i *)p);
    if (bits == 2) return plane2_32(p);
    if (bits == 3) return _mm256_or_si256(plane2_32(p), _mm256_slli_epi16(plane1_32(p + 8), 2));
    __m256i c = nibbles32(p); /* P4: low nibbles are codes 0-15, high ones 16-31 */
    if (bits == 5) c = _mm256_or_si256(c, _mm256_slli_epi16(plane1_32(p + 16), 4));
    if (bits == 6) c = _mm256_or_si256(c, _mm256_slli_epi16(plane2_32(p + 16), 4));
    return c;
}

/* A stored scale or bias (dtype BF16, F16 or F32) as f32. */
INLINE float mlx_scalar(celer_st_dtype dt, const uint8_t *p)
{
    uint16_t h;
    float    f;
    if (dt == CELER_ST_F32) return memcpy(&f, p, 4), f;
    memcpy(&h, p, 2);
    if (dt == CELER_ST_F16) return h2f(h);
    uint32_t u = (uint32_t)h << 16;
    return memcpy(&f, &u, 4), f;
}

/* E8M0 scale byte: 2^(s - 127) (0: 2^-127, a subnormal; 255: +inf, as mlx). */
INLINE float e8m0_f32(uint8_t s)
{
    uint32_t u = s ? (uint32_t)s << 23 : 0x00400000u;
    float    f;
    return memcpy(&f, &u, 4), f;
}

/* An E4M3 byte as binary16 bits of its value / 256: its exponent and mantissa fields land in
 * binary16's (bias 15 against 7, normals and subnormals alike); 0x7f and 0xff become NaN. */
INLINE uint16_t e4m3_h16(uint8_t c)
{
    uint16_t h = (uint16_t)((c & 0x7f) << 7 | (c & 0x80) << 8);
    return (c & 0x7f) == 0x7f ? (uint16_t)(h | 0x7c00) : h;
}

INLINE float e4m3_f32(uint8_t c) { return h2f(e4m3_h16(c)) * 256.0f; }

/* nvfp4's scale: e4m3 (times the global scale / 2688, in f32 as mlx). */
INLINE float nv_scale(const celer_mlx_quant *q, uint8_t c)
{
    float s = e4m3_f32(c);
    return q->has_global_scale ? s * (q->global_scale / 2688.0f) : s;
}

/* ---- affine -------------------------------------------------------------------------------- */

/* One group g of a row (header: scale, bias; then gs / 32 blocks of codes) against nt tokens:
 * acc += scale · d_x · Σ q (256 hi + lo) per block (8 int32 lanes), alternating the blocks
 * between accumulator sets a0 and a1 from block parity p, and bsum += bias · Σ d_x · S.
 * 8-bit codes without VNNI: maddubs would saturate on 255 · 127 · 2, so q - 128 (|.| <= 128) is
 * dotted by sign and 128 · S added back in integers. */
INLINE void affine_group(int bits, int gs, const celer_mlx_quant *q, int64_t g, int p, const uint8_t *w,
                         const char *x, size_t xb, int nt, __m256 *a0, __m256 *a1, float *bsum)
{
    const celer_st_dtype dt = q->dtype;
    const int            ns = gs / 32;
    const size_t         es = dt == CELER_ST_F32 ? 4 : 2, sbb = 4 * (size_t)bits, gbb = 2 * es + (size_t)ns * sbb;
    const int64_t        nb = q->cols / 32;
    const bool           offset = bits == 8 && !X86_VNNI;
    const uint8_t       *gb = w + (size_t)g * gbb;
    const float          sc = mlx_scalar(dt, gb), bi = mlx_scalar(dt, gb + es);
    float                G[NT];
    for (int t = 0; t < nt; t++) G[t] = 0;
    for (int s = 0; s < ns; s++) {
        const int64_t b = g * ns + s;
        __m256i       u = codes32(bits, gb + 2 * es + (size_t)s * sbb), ws = u;
        if (offset) ws = _mm256_xor_si256(u, _mm256_set1_epi8((char)0x80)), u = _mm256_abs_epi8(ws);
        for (int t = 0; t < nt; t++) {
            const char          *row = x + t * xb;
            const celer_cpu_x32 *xq  = (const celer_cpu_x32 *)row + b;
            __m256i              xh  = _mm256_loadu_si256((const __m256i *)xq->hi);
            __m256i              xl  = _mm256_loadu_si256((const __m256i *)xq->lo);
            int32_t              S;
            memcpy(&S, row + CELER_CPU_X32_SUMS_AT(nb) + (size_t)b * sizeof S, sizeof S);
            if (offset) xh = _mm256_sign_epi8(xh, ws), xl = _mm256_sign_epi8(xl, ws);
            __m256i si = dot_hilo(u, xh, xl);
            if (offset) si = _mm256_add_epi32(si, _mm256_setr_epi32(128 * S, 0, 0, 0, 0, 0, 0, 0));
            __m256 *acc = (p + s) & 1 ? a1 : a0;
            acc[t]      = _mm256_fmadd_ps(_mm256_cvtepi32_ps(si), _mm256_set1_ps(sc * xq->d), acc[t]);
            G[t] += xq->d * (float)S;
        }
    }
    for (int t = 0; t < nt; t++) bsum[t] += bi * G[t];
}

/* One row, a group at a time (groups of 32 in pairs, so that even and odd blocks go to the two
 * accumulator sets, which hides the FMA latency when one token runs). */
INLINE void mlx_row_affine(int bits, int gs, const celer_mlx_quant *q, const char *w, const char *x, size_t xb,
                           int nt, float *y, size_t ys)
{
    const int64_t  ng = q->cols / gs;
    const size_t   gbb = celer_cpu_mlx_block_bytes(q, 1);
    const uint8_t *wr = (const uint8_t *)w;
    __m256         a0[NT], a1[NT];
    float          bsum[NT];
    for (int t = 0; t < nt; t++) a0[t] = a1[t] = _mm256_setzero_ps(), bsum[t] = 0;
    int64_t g = 0;
    if (gs == 32)
        for (; g + 1 < ng; g += 2) {
            _mm_prefetch((const char *)wr + (size_t)g * gbb + PREFETCH_ROWS, _MM_HINT_T0);
            affine_group(bits, gs, q, g, 0, wr, x, xb, nt, a0, a1, bsum);
            affine_group(bits, gs, q, g + 1, 1, wr, x, xb, nt, a0, a1, bsum);
        }
    for (; g < ng; g++) {
        for (size_t o = 0; o < gbb; o += 64) _mm_prefetch((const char *)wr + (size_t)g * gbb + PREFETCH_ROWS + o, _MM_HINT_T0);
        affine_group(bits, gs, q, g, 0, wr, x, xb, nt, a0, a1, bsum);
    }
    for (int t = 0; t < nt; t++) y[t * ys] = hsum8(_mm256_add_ps(a0[t], a1[t])) + bsum[t];
}

/* ---- mxfp4, nvfp4 -------------------------------------------------------------------------- */

/* 2 · e2m1 of the 16 codes, for a byte shuffle (code 8 is -0). */
#define E2M1X2 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12

/* One row of 32-element blocks: header (mxfp4: one E8M0 byte; nvfp4: two E4M3 bytes), then P4. */
INLINE void mlx_row_fp4(int nv, const celer_mlx_quant *q, const char *w, const char *x, size_t xb, int nt, float *y,
                        size_t ys)
{
    const int64_t nb  = q->cols / 32;
    const size_t  hb  = nv ? 2 : 1, bb = hb + 16;
    const __m256i lut = _mm256_setr_epi8(E2M1X2, E2M1X2);
    __m256        acc[NT];
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = (const uint8_t *)w + (size_t)b * bb;
        _mm_prefetch((const char *)blk + PREFETCH_ROWS, _MM_HINT_T0);
        /* scale / 2 (the codes are doubled): nvfp4's first group in lanes 0-3, its second in 4-7 */
        __m256  half = nv ? _mm256_set_m128(_mm_set1_ps(0.5f * nv_scale(q, blk[1])), _mm_set1_ps(0.5f * nv_scale(q, blk[0])))
                          : _mm256_set1_ps(0.5f * e8m0_f32(blk[0]));
        __m256i v    = _mm256_shuffle_epi8(lut, nibbles32(blk + hb));
        __m256i va   = _mm256_abs_epi8(v);
        for (int t = 0; t < nt; t++) {
            const celer_cpu_x32 *xq = (const celer_cpu_x32 *)(x + t * xb) + b;
            __m256i              xh = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)xq->hi), v);
            __m256i              xl = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)xq->lo), v);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_hilo(va, xh, xl)), _mm256_mul_ps(half, _mm256_set1_ps(xq->d)),
                                     acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) y[t * ys] = hsum8(acc[t]);
}

/* ---- mxfp8 --------------------------------------------------------------------------------- */

/* 16 E4M3 codes as binary16 bits of their values / 256: shifted left by 7 (zero-extended to
 * 16 bits), the exponent and mantissa fields land in binary16's (bias 15 against 7, normals and
 * subnormals alike) and the sign in bit 14, which adding that bit to itself moves to bit 15.
 * 0x7f and 0xff become NaN. */
INLINE __m256i e4m3x16_h16(const uint8_t *p)
{
    __m256i t   = _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p)), 7);
    __m256i h   = _mm256_add_epi16(t, _mm256_and_si256(t, _mm256_set1_epi16(0x4000)));
    __m256i nan = _mm256_cmpeq_epi16(_mm256_and_si256(t, _mm256_set1_epi16(0x3f80)), _mm256_set1_epi16(0x3f80));
    return _mm256_or_si256(h, _mm256_and_si256(nan, _mm256_set1_epi16(0x7c00)));
}

/* The f32 factor by which mxfp8 multiplies the values / 256: 256 · 2^(s - 127), exact below
 * s = 247; *two when it is not, and the weights take two products (· 256, then · scale), so
 * that each weight is mlx's e4m3 · scale rounded once in every case. */
INLINE float fp8_factor(uint8_t s, bool *two)
{
    *two = s >= 247;
    return *two ? e8m0_f32(s) : e8m0_f32(s) * 256.0f;
}

/* One row of 32-element blocks: an E8M0 byte, then 32 codes. Each weight is e4m3 · scale in
 * f32, as mlx computes it, dotted with f32 activations; even and odd halves of the block in
 * two accumulators, to hide the FMA latency when one token runs. */
INLINE void mlx_row_fp8(const celer_mlx_quant *q, const char *w, const char *x, size_t xb, int nt, float *y,
                        size_t ys)
{
    const int64_t nb = q->cols / 32;
    __m256        a0[NT], a1[NT];
    for (int t = 0; t < nt; t++) a0[t] = a1[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = (const uint8_t *)w + (size_t)b * 33;
        _mm_prefetch((const char *)blk + PREFETCH_ROWS, _MM_HINT_T0);
        bool         two;
        const __m256 k = _mm256_set1_ps(fp8_factor(blk[0], &two));
        __m256       wv[4];
        for (int i = 0; i < 2; i++) {
            __m256i h = e4m3x16_h16(blk + 1 + 16 * i);
            wv[2 * i]     = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
            wv[2 * i + 1] = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
        }
        for (int i = 0; i < 4; i++) {
            if (two) wv[i] = _mm256_mul_ps(wv[i], _mm256_set1_ps(256.0f));
            wv[i] = _mm256_mul_ps(wv[i], k);
        }
        for (int t = 0; t < nt; t++) {
            const float *xf = (const float *)(x + t * xb) + 32 * b;
            a0[t]           = _mm256_fmadd_ps(wv[0], _mm256_loadu_ps(xf), a0[t]);
            a1[t]           = _mm256_fmadd_ps(wv[1], _mm256_loadu_ps(xf + 8), a1[t]);
            a0[t]           = _mm256_fmadd_ps(wv[2], _mm256_loadu_ps(xf + 16), a0[t]);
            a1[t]           = _mm256_fmadd_ps(wv[3], _mm256_loadu_ps(xf + 24), a1[t]);
        }
    }
    for (int t = 0; t < nt; t++) y[t * ys] = hsum8(_mm256_add_ps(a0[t], a1[t]));
}

/* ---- kernels and lookup -------------------------------------------------------------------- */

/* Rows outer, tiles of NT tokens, the remainder tile as its own constant size (as GEMM_ROWS). */
#define MLX_GEMM_ROWS(name, row_call)                                                                      \
    static void name(const celer_mlx_quant *q, const void *w, size_t wb, int64_t nr, const void *x, size_t xb, \
                     int64_t nt, float *y, size_t ys)                                                      \
    {                                                                                                      \
        for (int64_t r = 0; r < nr; r++) {                                                                 \
            const char *wr = (const char *)w + r * wb, *xc = x;                                            \
            int64_t     t  = 0;                                                                            \
            for (; t + NT <= nt; t += NT) row_call(q, wr, xc + t * xb, xb, NT, y + t * ys + r, ys);       \
            switch (nt - t) {                                                                              \
            case 3: row_call(q, wr, xc + t * xb, xb, 3, y + t * ys + r, ys); break;                        \
            case 2: row_call(q, wr, xc + t * xb, xb, 2, y + t * ys + r, ys); break;                        \
            case 1: row_call(q, wr, xc + t * xb, xb, 1, y + t * ys + r, ys); break;                        \
            default: break;                                                                                \
            }                                                                                              \
        }                                                                                                  \
    }

/* One instance per (bits, group size): the block's group and place in it are then shifts. */
#define MLX_AFFINE_ROWS(bits, gs)                                                                              \
    INLINE void row_mlx_a##bits##g##gs(const celer_mlx_quant *q, const char *w, const char *x, size_t xb,      \
                                       int nt, float *y, size_t ys)                                            \
    {                                                                                                          \
        mlx_row_affine(bits, gs, q, w, x, xb, nt, y, ys);                                                      \
    }                                                                                                          \
    MLX_GEMM_ROWS(gemm_mlx_a##bits##g##gs, row_mlx_a##bits##g##gs)
#define MLX_AFFINE_ROWS_GROUPS(bits) MLX_AFFINE_ROWS(bits, 32) MLX_AFFINE_ROWS(bits, 64) MLX_AFFINE_ROWS(bits, 128)

MLX_AFFINE_ROWS_GROUPS(2)
MLX_AFFINE_ROWS_GROUPS(3)
MLX_AFFINE_ROWS_GROUPS(4)
MLX_AFFINE_ROWS_GROUPS(5)
MLX_AFFINE_ROWS_GROUPS(6)
MLX_AFFINE_ROWS_GROUPS(8)

#define MLX_ROWS_ROW(bits) {gemm_mlx_a##bits##g32, gemm_mlx_a##bits##g64, gemm_mlx_a##bits##g128}
static const celer_cpu_mlx_gemm_fn mlx_affine_rows[9][3] = {
    [2] = MLX_ROWS_ROW(2), [3] = MLX_ROWS_ROW(3), [4] = MLX_ROWS_ROW(4),
    [5] = MLX_ROWS_ROW(5), [6] = MLX_ROWS_ROW(6), [8] = MLX_ROWS_ROW(8),
};

/* mlx_affine_rows' column of a group size; -1 for one mlx does not write. */
static int group_col(uint32_t gs) { return gs == 32 ? 0 : gs == 64 ? 1 : gs == 128 ? 2 : -1; }

INLINE void row_mlx_mxfp4(const celer_mlx_quant *q, const char *w, const char *x, size_t xb, int nt, float *y,
                          size_t ys)
{
    mlx_row_fp4(0, q, w, x, xb, nt, y, ys);
}
INLINE void row_mlx_nvfp4(const celer_mlx_quant *q, const char *w, const char *x, size_t xb, int nt, float *y,
                          size_t ys)
{
    mlx_row_fp4(1, q, w, x, xb, nt, y, ys);
}
MLX_GEMM_ROWS(gemm_mlx_mxfp4, row_mlx_mxfp4)
MLX_GEMM_ROWS(gemm_mlx_nvfp4, row_mlx_nvfp4)
MLX_GEMM_ROWS(gemm_mlx_mxfp8, mlx_row_fp8)

/* The ROWS kernel of q's format. */
static celer_cpu_mlx_gemm_fn mlx_rows_kernel(const celer_mlx_quant *q)
{
    switch (q->mode) {
    case CELER_HF_QUANT_AFFINE:
        return q->bits <= 8 && group_col(q->group_size) >= 0 ? mlx_affine_rows[q->bits][group_col(q->group_size)] : NULL;
    case CELER_HF_QUANT_MXFP4: return gemm_mlx_mxfp4;
    case CELER_HF_QUANT_NVFP4: return gemm_mlx_nvfp4;
    case CELER_HF_QUANT_MXFP8: return gemm_mlx_mxfp8;
    default: return NULL;
    }
}
