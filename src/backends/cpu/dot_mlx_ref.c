/* Scalar reference kernels of MLX-quantized matrices (the contract is in dot.h; the layout in
 * repack_mlx.h). These define the results the SIMD kernels are tested against: each block of a
 * row is read back as mlx stores it and dequantized by the reference dequantizer
 * (celer_mlx_dequant_row, quant/mlx_quant.h) to the values mlx's quantized matmul uses, in
 * float32 (affine scales and biases widened exactly), then dotted with the activations in
 * double. */
#include "backends/cpu/dot.h"

#include "backends/cpu/repack_mlx.h"
#include "core/error.h"
#include "quant/half.h"

#include <string.h>

enum { MAX_B = 128 }; /* elements of the largest column block */

celer_cpu_act celer_cpu_mlx_act(const celer_mlx_quant *q)
{
    switch (q->mode) {
    case CELER_HF_QUANT_MXFP8: return CELER_CPU_ACT_F32;
    case CELER_HF_QUANT_NVFP4: return CELER_CPU_ACT_X32H;
    default: return CELER_CPU_ACT_X32;
    }
}

/* A stored scale or bias of dtype at p, as float32 (exact). */
static float widen(celer_st_dtype dtype, const uint8_t *p)
{
    uint16_t h;
    float    f;
    if (dtype == CELER_ST_F32) return memcpy(&f, p, 4), f;
    memcpy(&h, p, 2);
    return dtype == CELER_ST_F16 ? celer_half_to_f32(h) : celer_bf16_to_f32(h);
}

/* Block cb of a ROWS-layout row as float32 values v (B of them). */
static void block_values(const celer_mlx_quant *q, const char *row, int64_t cb, float *v)
{
    const int64_t   B   = celer_cpu_mlx_block_elems(q);
    const bool      aff = q->mode == CELER_HF_QUANT_AFFINE;
    celer_mlx_quant one = *q; /* the block as a matrix of its own: one row of B columns */
    one.rows = 1, one.cols = B, one.name = "cpu block";
    uint8_t words[MAX_B], scales[2 * 4], biases[4];
    celer_cpu_mlx_unpack_row(&one, false, row + (size_t)cb * celer_cpu_mlx_block_bytes(q, 1), 0, words, scales,
                             aff ? biases : NULL);
    /* affine: scale and bias widened to f32, for mlx's f32 matmul values; the fp modes' values
     * are exact in f32 */
    float                sb[2] = {aff ? widen(q->dtype, scales) : 0, aff ? widen(q->dtype, biases) : 0};
    celer_mlx_quant_data d     = {words, (size_t)(B * q->bits / 8), scales, (size_t)(B / q->group_size), NULL, 0};
    if (aff) d.scales = &sb[0], d.scales_bytes = 4, d.biases = &sb[1], d.biases_bytes = 4;
    one.dtype       = CELER_ST_F32;
    celer_error  err = {0};
    celer_status st  = celer_mlx_dequant_row(&one, &d, 0, v, &err);
    CELER_ASSERT(st == CELER_OK);
}

enum { TOKEN_TILE = 16 };

/* One row at a time; each block is dequantized once per tile of tokens. */
static void gemm_mlx_ref(const celer_mlx_quant *q, const void *w, size_t wb, int64_t nr, const void *x, size_t xb,
                         int64_t nt, float *y, size_t ys)
{
    const int64_t B = celer_cpu_mlx_block_elems(q), nb = q->cols / B;
    const bool    f32 = celer_cpu_mlx_act(q) == CELER_CPU_ACT_F32;
    float         v[MAX_B];
    for (int64_t r = 0; r < nr; r++) {
        const char *row = (const char *)w + r * wb;
        for (int64_t t0 = 0; t0 < nt; t0 += TOKEN_TILE) {
            int    tn = nt - t0 < TOKEN_TILE ? (int)(nt - t0) : TOKEN_TILE;
            double acc[TOKEN_TILE] = {0};
            for (int64_t cb = 0; cb < nb; cb++) {
                block_values(q, row, cb, v);
                for (int t = 0; t < tn; t++) {
                    const char *xr = (const char *)x + (t0 + t) * xb;
                    if (f32) {
                        const float *xf = (const float *)xr + cb * B;
                        for (int64_t i = 0; i < B; i++) acc[t] += (double)v[i] * xf[i];
                        continue;
                    }
                    for (int64_t s = 0; s < B / 32; s++) {
                        const celer_cpu_x32 *xq = (const celer_cpu_x32 *)xr + cb * (B / 32) + s;
                        const float         *vs = v + 32 * s;
                        double               sh = 0, sl = 0;
                        for (int i = 0; i < 32; i++) sh += (double)vs[i] * xq->hi[i], sl += (double)vs[i] * xq->lo[i];
                        acc[t] += (double)xq->d * (256.0 * sh + sl);
                    }
                }
            }
            for (int t = 0; t < tn; t++) y[(t0 + t) * (int64_t)ys + r] = (float)acc[t];
        }
    }
}

celer_cpu_mlx_gemm_fn celer_cpu_mlx_gemm_ref(const celer_mlx_quant *q)
{
    (void)q;
    return gemm_mlx_ref;
}
