/* AVX-512 VNNI kernels of MLX-quantized matrices, included by x86/dot_avx512vnni.c after its own
 * r16 kernels, whose r16_dot (16 rows × 4 broadcast activation codes per vpdpbusd) they use:
 * every format but mxfp8 in the R16 layout (repack_mlx.h: sets of 16 rows, lane r of every
 * vector is row r), and mxfp8 in the ROWS layout, 512 bits wide.
 *
 * Per 32 elements the code planes become 8 vectors of unsigned codes, code quad n in vector n;
 * per token r16_dot gives Σ v · (256 hi + lo) for all 16 rows in int32, exact:
 *   affine  v = q <= 255: 32 · 255 · 32639 < 2^31. Per group f += d_x · Σ and G += d_x · S
 *           (S the block's 256 Σhi + Σlo), then acc += scale · f + bias · G.
 *   fp4     v = 2 · e2m1 + 12 in [0, 24] (vpshufb from the nibble), so that vpdpbusd's unsigned
 *           operand can be the weights; 12 · S comes off in integers (nvfp4: S of each 16, from
 *           the X32H sums), then acc += cvt(Σ) · scale / 2 · d_x.
 * mxfp8 has no R16 kernel: its f32 decode gains nothing from interleaving. */

/* ---- mxfp8, ROWS ---------------------------------------------------------------------------- */

/* 32 E4M3 codes as binary16 bits of their values / 256 (see e4m3x16_h16). */
INLINE __m512i e4m3x32_h16(const uint8_t *p)
{
    __m512i   t   = _mm512_slli_epi16(_mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)p)), 7);
    __m512i   h   = _mm512_add_epi16(t, _mm512_and_si512(t, _mm512_set1_epi16(0x4000)));
    __mmask32 nan = _mm512_cmpeq_epi16_mask(_mm512_and_si512(t, _mm512_set1_epi16(0x3f80)), _mm512_set1_epi16(0x3f80));
    return _mm512_mask_mov_epi16(h, nan, _mm512_set1_epi16(0x7e00));
}

/* mlx_row_fp8 (x86/mlx_x86_256.h) 16 lanes wide. */
INLINE void mlx_row_fp8_512(const celer_mlx_quant *q, const char *w, const char *x, size_t xb, int nt, float *y,
                            size_t ys)
{
    const int64_t nb = q->cols / 32;
    __m512        a0[NT], a1[NT];
    for (int t = 0; t < nt; t++) a0[t] = a1[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = (const uint8_t *)w + (size_t)b * 33;
        _mm_prefetch((const char *)blk + PREFETCH_ROWS, _MM_HINT_T0);
        bool         two;
        const __m512 k  = _mm512_set1_ps(fp8_factor(blk[0], &two));
        __m512i      h  = e4m3x32_h16(blk + 1);
        __m512       w0 = _mm512_cvtph_ps(_mm512_castsi512_si256(h)), w1 = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
        if (two) w0 = _mm512_mul_ps(w0, _mm512_set1_ps(256.0f)), w1 = _mm512_mul_ps(w1, _mm512_set1_ps(256.0f));
        w0 = _mm512_mul_ps(w0, k), w1 = _mm512_mul_ps(w1, k);
        for (int t = 0; t < nt; t++) {
            const float *xf = (const float *)(x + t * xb) + 32 * b;
            a0[t]           = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xf), a0[t]);
            a1[t]           = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xf + 16), a1[t]);
        }
    }
    for (int t = 0; t < nt; t++) y[t * ys] = _mm512_reduce_add_ps(_mm512_add_ps(a0[t], a1[t]));
}
MLX_GEMM_ROWS(gemm_mlx_mxfp8_512, mlx_row_fp8_512)

celer_cpu_mlx_gemm_fn celer_cpu_mlx_gemm_avx512vnni(const celer_mlx_quant *q)
{
    return q->mode == CELER_HF_QUANT_MXFP8 ? gemm_mlx_mxfp8_512 : mlx_rows_kernel(q);
}

/* ---- R16 -------------------------------------------------------------------------------------- */

/* 16 header values (lane r = row r) of dtype BF16, F16 or F32 as f32. */
INLINE __m512 head16(celer_st_dtype dt, const uint8_t *p)
{
    if (dt == CELER_ST_F32) return _mm512_loadu_ps(p);
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    if (dt == CELER_ST_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The 8 code-quad vectors of 32 elements of 16 rows whose planes start at p (see repack_mlx.h). */
INLINE void r16_codes(int bits, const uint8_t *p, __m512i v[8])
{
    const __m512i m4 = _mm512_set1_epi8(15), m2 = _mm512_set1_epi8(3), m1 = _mm512_set1_epi8(1);
    if (bits == 8) {
        for (int n = 0; n < 8; n++) v[n] = _mm512_loadu_si512(p + 64 * n);
        return;
    }
    if (bits >= 4) { /* P4 */
        for (int n = 0; n < 4; n++) {
            __m512i c = _mm512_loadu_si512(p + 64 * n);
            v[n]      = _mm512_and_si512(c, m4);
            v[n + 4]  = _mm512_and_si512(_mm512_srli_epi16(c, 4), m4);
        }
        p += 256;
    } else { /* P2: quad n is vector n & 1 shifted by 2 (n >> 1) */
        __m512i t0 = _mm512_loadu_si512(p), t1 = _mm512_loadu_si512(p + 64);
        for (int n = 0; n < 8; n++) v[n] = _mm512_and_si512(_mm512_srli_epi16(n & 1 ? t1 : t0, 2 * (n >> 1)), m2);
        p += 128;
    }
    if (bits == 3 || bits == 5) { /* P1: quad n is the plane shifted by n; bit 2 or bit 4 */
        __m512i pl = _mm512_loadu_si512(p);
        for (int n = 0; n < 8; n++)
            v[n] = _mm512_or_si512(v[n], _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(pl, n), m1), bits - 1));
    }
    if (bits == 6) { /* P2 above the nibble */
        __m512i t0 = _mm512_loadu_si512(p), t1 = _mm512_loadu_si512(p + 64);
        for (int n = 0; n < 8; n++)
            v[n] = _mm512_or_si512(v[n], _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(n & 1 ? t1 : t0, 2 * (n >> 1)), m2), 4));
    }
}

INLINE int32_t x32_sum(const char *row, int64_t nb, int64_t b)
{
    int32_t S;
    memcpy(&S, row + CELER_CPU_X32_SUMS_AT(nb) + (size_t)b * sizeof S, sizeof S);
    return S;
}

/* One set of 16 rows: per group (header: 16 scales, 16 biases) and token, accb += bias ·
 * Σ d_x · S over the group's blocks; per 32 codes and token, acc += cvt(Σ q (256 hi + lo)) ·
 * scale · d_x. The bits and the group size are constants of each instance, so that the group's
 * loops unroll; the per-token sums are arrays indexed by constants only, so that they stay in
 * registers. */
INLINE void r16_mlx_affine(int bits, int gs, const celer_mlx_quant *q, const uint8_t *w, const char *x, size_t xb,
                           int nt, float *y, size_t ys)
{
    const celer_st_dtype dt = q->dtype;
    const int64_t        ng = q->cols / gs, nb = q->cols / 32;
    const int            ns = gs / 32;
    const size_t         es = dt == CELER_ST_F32 ? 4 : 2, hb = 32 * es, sbb = 64 * (size_t)bits;
    const size_t         gbb = hb + (size_t)ns * sbb;
    __m512               acc[R16_NT], accb[R16_NT];
    for (int t = 0; t < nt; t++) acc[t] = accb[t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        const uint8_t *gb = w + (size_t)g * gbb;
        /* 0.75 KiB ahead: the codes' lines and two for the header (one too many for 2-byte
         * scales). Decoding a 1B model's worth of matrices on two cores here, 0.75 KiB ran as
         * fast as Q4_0's kernel, 2 KiB 25% slower; 8 accumulator chains (r16_dot's 4 halved in
         * depth) were slower too. */
        for (int o = 0; o < ns * bits + 2; o++) _mm_prefetch((const char *)gb + 768 + 64 * o, _MM_HINT_T0);
        const __m512 sc = head16(dt, gb), bi = head16(dt, gb + 16 * es);
        for (int t = 0; t < nt; t++) { /* the bias term: bias · Σ d_x · S over the group's blocks */
            const char *row = x + t * xb;
            float       G   = 0;
            for (int s = 0; s < ns; s++)
                G += ((const celer_cpu_x32 *)row)[g * ns + s].d * (float)x32_sum(row, nb, g * ns + s);
            accb[t] = _mm512_fmadd_ps(bi, _mm512_set1_ps(G), accb[t]);
        }
        for (int s = 0; s < ns; s++) {
            const int64_t b = g * ns + s;
            __m512i       v[8];
            r16_codes(bits, gb + hb + (size_t)s * sbb, v);
            for (int t = 0; t < nt; t++) {
                const celer_cpu_x32 *xq = (const celer_cpu_x32 *)(x + t * xb) + b;
                __m512i              si = r16_dot(v, 8, xq->hi, xq->lo);
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(si), _mm512_mul_ps(sc, _mm512_set1_ps(xq->d)), acc[t]);
            }
        }
    }
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + t * ys, _mm512_add_ps(acc[t], accb[t]));
}

/* 16 E8M0 bytes → 2^(s - 127) / 2 as f32 (0: 2^-128; 255: +inf). */
INLINE __m512 e8m0x16_half(const uint8_t *p)
{
    __m512i e = _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)), 23);
    e         = _mm512_mask_mov_epi32(e, _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512()), _mm512_set1_epi32(0x00400000));
    return _mm512_mul_ps(_mm512_castsi512_ps(e), _mm512_set1_ps(0.5f));
}

/* 16 E4M3 bytes → nvfp4's scale / 2 as f32 (see e4m3_h16; times the global scale / 2688). */
INLINE __m512 e4m3x16_half(const celer_mlx_quant *q, const uint8_t *p)
{
    __m256i c = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p));
    __m256i m = _mm256_and_si256(c, _mm256_set1_epi16(0x7f));
    __m256i h = _mm256_or_si256(_mm256_slli_epi16(m, 7), _mm256_slli_epi16(_mm256_and_si256(c, _mm256_set1_epi16(0x80)), 8));
    h         = _mm256_or_si256(h, _mm256_and_si256(_mm256_cmpeq_epi16(m, _mm256_set1_epi16(0x7f)), _mm256_set1_epi16(0x7c00)));
    __m512 s  = _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f));
    if (q->has_global_scale) s = _mm512_mul_ps(s, _mm512_set1_ps(q->global_scale / 2688.0f));
    return _mm512_mul_ps(s, _mm512_set1_ps(0.5f));
}

/* 2 · e2m1 + 12 of the 16 codes. */
#define E2M1X2P12 12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0

/* One set of 16 rows of 32-element blocks: header (mxfp4: E8M0[16]; nvfp4: E4M3[2][16]), P4. */
INLINE void r16_mlx_fp4(int nv, const celer_mlx_quant *q, const uint8_t *w, const char *x, size_t xb, int nt,
                        float *y, size_t ys)
{
    const int64_t nb  = q->cols / 32;
    const size_t  hb  = nv ? 32 : 16, bb = hb + 256;
    const __m512i lut = _mm512_broadcast_i32x4(_mm_setr_epi8(E2M1X2P12)), m4 = _mm512_set1_epi8(15);
    __m512        acc[R16_NT];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *gb = w + (size_t)b * bb;
        for (size_t o = 0; o < bb; o += 64) _mm_prefetch((const char *)gb + 768 + o, _MM_HINT_T0); /* as affine */
        __m512i v[8];
        for (int n = 0; n < 4; n++) {
            __m512i c = _mm512_loadu_si512(gb + hb + 64 * n);
            v[n]      = _mm512_shuffle_epi8(lut, _mm512_and_si512(c, m4));
            v[n + 4]  = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(c, 4), m4));
        }
        if (!nv) {
            __m512 sc = e8m0x16_half(gb);
            for (int t = 0; t < nt; t++) {
                const char          *row = x + t * xb;
                const celer_cpu_x32 *xq  = (const celer_cpu_x32 *)row + b;
                __m512i si = _mm512_sub_epi32(r16_dot(v, 8, xq->hi, xq->lo), _mm512_set1_epi32(12 * x32_sum(row, nb, b)));
                acc[t]     = _mm512_fmadd_ps(_mm512_cvtepi32_ps(si), _mm512_mul_ps(sc, _mm512_set1_ps(xq->d)), acc[t]);
            }
            continue;
        }
        __m512 s0 = e4m3x16_half(q, gb), s1 = e4m3x16_half(q, gb + 16);
        for (int t = 0; t < nt; t++) {
            const char          *row = x + t * xb;
            const celer_cpu_x32 *xq  = (const celer_cpu_x32 *)row + b;
            const int32_t       *Sh  = (const int32_t *)(row + CELER_CPU_X32_SUMS_AT(nb)) + 2 * b; /* X32H */
            __m512i i0 = _mm512_sub_epi32(r16_dot(v, 4, xq->hi, xq->lo), _mm512_set1_epi32(12 * Sh[0]));
            __m512i i1 = _mm512_sub_epi32(r16_dot(v + 4, 4, xq->hi + 16, xq->lo + 16), _mm512_set1_epi32(12 * Sh[1]));
            __m512  dx = _mm512_set1_ps(xq->d);
            acc[t]     = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i0), _mm512_mul_ps(s0, dx), acc[t]);
            acc[t]     = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1), _mm512_mul_ps(s1, dx), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(y + t * ys, acc[t]);
}

/* wb: bytes per set of 16 rows; nr: a multiple of 16. */
#define MLX_GEMM_R16(name, fn)                                                                                \
    static void name(const celer_mlx_quant *q, const void *w, size_t wb, int64_t nr, const void *x, size_t xb,    \
                     int64_t nt, float *y, size_t ys)                                                         \
    {                                                                                                         \
        for (int64_t g = 0; g < nr / 16; g++) {                                                               \
            const uint8_t *wg = (const uint8_t *)w + g * wb;                                                  \
            const char    *xc = x;                                                                            \
            int64_t        t  = 0;                                                                            \
            for (; t + R16_NT <= nt; t += R16_NT) fn(q, wg, xc + t * xb, xb, R16_NT, y + t * ys + 16 * g, ys); \
            switch (nt - t) {                                                                                 \
            case 3: fn(q, wg, xc + t * xb, xb, 3, y + t * ys + 16 * g, ys); break;                            \
            case 2: fn(q, wg, xc + t * xb, xb, 2, y + t * ys + 16 * g, ys); break;                            \
            case 1: fn(q, wg, xc + t * xb, xb, 1, y + t * ys + 16 * g, ys); break;                            \
            default: break;                                                                                   \
            }                                                                                                 \
        }                                                                                                     \
    }

#define MLX_AFFINE_R16(bits, gs)                                                                              \
    INLINE void r16_mlx_a##bits##g##gs(const celer_mlx_quant *q, const uint8_t *w, const char *x, size_t xb,   \
                                       int nt, float *y, size_t ys)                                           \
    {                                                                                                         \
        r16_mlx_affine(bits, gs, q, w, x, xb, nt, y, ys);                                                     \
    }                                                                                                         \
    MLX_GEMM_R16(gemm_mlx_a##bits##g##gs##_r16, r16_mlx_a##bits##g##gs)
#define MLX_AFFINE_R16_GROUPS(bits) MLX_AFFINE_R16(bits, 32) MLX_AFFINE_R16(bits, 64) MLX_AFFINE_R16(bits, 128)

MLX_AFFINE_R16_GROUPS(2)
MLX_AFFINE_R16_GROUPS(3)
MLX_AFFINE_R16_GROUPS(4)
MLX_AFFINE_R16_GROUPS(5)
MLX_AFFINE_R16_GROUPS(6)
MLX_AFFINE_R16_GROUPS(8)

/* The instance of (bits, group size), by a table rather than a 18-way switch. */
#define MLX_R16_ROW(bits) {gemm_mlx_a##bits##g32_r16, gemm_mlx_a##bits##g64_r16, gemm_mlx_a##bits##g128_r16}
static const celer_cpu_mlx_gemm_fn mlx_affine_r16[9][3] = {
    [2] = MLX_R16_ROW(2), [3] = MLX_R16_ROW(3), [4] = MLX_R16_ROW(4),
    [5] = MLX_R16_ROW(5), [6] = MLX_R16_ROW(6), [8] = MLX_R16_ROW(8),
};

INLINE void r16_mlx_mxfp4(const celer_mlx_quant *q, const uint8_t *w, const char *x, size_t xb, int nt, float *y,
                          size_t ys)
{
    r16_mlx_fp4(0, q, w, x, xb, nt, y, ys);
}
INLINE void r16_mlx_nvfp4(const celer_mlx_quant *q, const uint8_t *w, const char *x, size_t xb, int nt, float *y,
                          size_t ys)
{
    r16_mlx_fp4(1, q, w, x, xb, nt, y, ys);
}
MLX_GEMM_R16(gemm_mlx_mxfp4_r16, r16_mlx_mxfp4)
MLX_GEMM_R16(gemm_mlx_nvfp4_r16, r16_mlx_nvfp4)

celer_cpu_mlx_gemm_fn celer_cpu_mlx_gemm_r16_avx512vnni(const celer_mlx_quant *q)
{
    switch (q->mode) {
    case CELER_HF_QUANT_AFFINE:
        return q->bits <= 8 && group_col(q->group_size) >= 0 ? mlx_affine_r16[q->bits][group_col(q->group_size)] : NULL;
    case CELER_HF_QUANT_MXFP4: return gemm_mlx_mxfp4_r16;
    case CELER_HF_QUANT_NVFP4: return gemm_mlx_nvfp4_r16;
    default: return NULL; /* mxfp8: ROWS */
    }
}
