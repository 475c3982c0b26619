/* The kernel contract of celer_cpu_matmul: one function per (weight type, instruction set),
 * all with the same signature. The scalar _ref set (dot_ref.c) is the definition; SIMD sets
 * live in x86/ and are tested against it.
 *
 * A kernel computes a tile of the product for nr weight rows and nt tokens:
 *     y[t * ys + r] = Σ_i w_r[i] · x_t[i]      r < nr, t < nt
 * w:  (nr, k) weights in the type's block layout; row r starts at w + r * wb bytes
 * x:  (nt, k) activations in the type's activation format (below); row t at x + t * xb bytes
 * y:  (nt, ys) f32, ys >= nr
 * k is a multiple of the type's block size; nr, nt >= 1 and otherwise unconstrained (kernels
 * tile internally and handle the remainders). */
#ifndef CELER_BACKENDS_CPU_DOT_H
#define CELER_BACKENDS_CPU_DOT_H

#include "quant/blocks.h"
#include "quant/ggml_types.h"
#include "quant/mlx_quant.h"

#include <stddef.h>
#include <stdint.h>

typedef void (*celer_cpu_gemm_fn)(int64_t k, const void *w, size_t wb, int64_t nr, const void *x, size_t xb,
                                  int64_t nt, float *y, size_t ys);

/* How a weight type wants its activations. */
typedef enum {
    CELER_CPU_ACT_NONE, /* type not supported */
    CELER_CPU_ACT_F32,  /* X as given: k floats */
    CELER_CPU_ACT_X32,  /* k / 32 celer_cpu_x32, then k / 32 int32 (below) */
    CELER_CPU_ACT_X256, /* k / 256 celer_cpu_x256 */
    CELER_CPU_ACT_X32H, /* k / 32 celer_cpu_x32, then k / 16 int32: S of each 16 (nvfp4's groups) */
} celer_cpu_act;

celer_cpu_act celer_cpu_act_of(celer_ggml_type wtype);

/* Quantized activations: per block, two rows of 8-bit codes,
 *     x_i ≈ d · (256 · hi_i + lo_i)
 * hi are the codes of x at a step of amax / 127 (ggml's Q8_0 / Q8_K codes), lo the codes of
 * what they miss, x - 256 · d · hi, at a step 256 times finer: about 15 bits in all. An integer
 * dot of a block of weight codes with them is 256 · (w · hi) + (w · lo), which stays exact in
 * int32 for every weight type's code range (Q6_K, whose scaled sums do not fit, combines the
 * two in float).
 * In f32, with D = amax / 127 and id = 1 / D (0 for a zero block):
 *     hi = code(x · id),  r = x - hi · D,  lo = code(r · (256 · id)),  d = D / 256
 * where code rounds half away from zero, clamps to ±127 and maps NaN to 0.
 * An X32 row of nb blocks is followed by nb int32, each block's S = 256 Σhi + Σlo (so that
 * Σ x̂ = d · S), for the types with a min or an offset. */
typedef struct {
    float  d;
    int8_t hi[32];
    int8_t lo[32];
} celer_cpu_x32;

typedef struct {
    float   d;
    int8_t  hi[256];
    int8_t  lo[256];
    int16_t hsums[16]; /* Σ of hi over each 16, for the K-quants' mins and offsets */
    int16_t lsums[16];
} celer_cpu_x256;

#define CELER_CPU_X32_SUMS_AT(nb) ((size_t)(nb) * sizeof(celer_cpu_x32))

/* ---- MLX-quantized weights (quant/mlx_quant.h) ----------------------------------------------
 * Weights in the blocked layout of repack_mlx.h; q gives the format (k is q->cols). A kernel
 * for the ROWS layout takes rows at w + r · wb; one for the R16 layout takes sets of 16 rows at
 * w + s · wb, nr a multiple of 16. The values dotted are those mlx's quantized matmul uses,
 * each weight exact:
 *   affine        scale · q + bias, summed as scale · Σ q x̂ + bias · Σ x̂ (X32: the block sums)
 *   mxfp4, nvfp4  e2m1(q) · scale: 2 · e2m1 is an integer in [-12, 12], dotted as one, and the
 *                 scale (2^(s - 127) or e4m3(s), times nvfp4's global scale / 2688) multiplies
 *                 the integer sum of its group; nvfp4's groups of 16 need the X32H sums
 *   mxfp8         e4m3(q) · 2^(s - 127) in f32 (exact: 4 significant bits), by f32 activations:
 *                 E4M3 values are not integers of one scale, so no 8-bit dot takes them whole;
 *                 decoded in registers (as binary16, then f32) they are exact, at ~15 vector
 *                 instructions per 32 weights (decode is compute-bound: docs/benchmarks/cpu.md) */
typedef void (*celer_cpu_mlx_gemm_fn)(const celer_mlx_quant *q, const void *w, size_t wb, int64_t nr,
                                      const void *x, size_t xb, int64_t nt, float *y, size_t ys);

/* The activation format of an MLX format: F32 (mxfp8), X32H (nvfp4) or X32. */
celer_cpu_act celer_cpu_mlx_act(const celer_mlx_quant *q);

/* Quantizes blocks [b0, b1) of an activation row of nb blocks: x is the row's floats, row its
 * quantized bytes (blocks, and for X32 the sums). Every level's quantizer gives the same bytes. */
typedef void (*celer_cpu_quantize_fn)(const float *x, void *row, int64_t nb, int64_t b0, int64_t b1);
void celer_cpu_quantize_x32_ref(const float *x, void *row, int64_t nb, int64_t b0, int64_t b1);
void celer_cpu_quantize_x256_ref(const float *x, void *row, int64_t nb, int64_t b0, int64_t b1);
void celer_cpu_quantize_x32h_ref(const float *x, void *row, int64_t nb, int64_t b0, int64_t b1);

/* Kernel lookups per instruction set: NULL where the set has no kernel for the type. */
celer_cpu_gemm_fn celer_cpu_gemm_ref(celer_ggml_type wtype);
celer_cpu_mlx_gemm_fn celer_cpu_mlx_gemm_ref(const celer_mlx_quant *q); /* ROWS layout */
#if defined(__x86_64__)
celer_cpu_gemm_fn celer_cpu_gemm_avx2(celer_ggml_type wtype);
celer_cpu_gemm_fn celer_cpu_gemm_avx512vnni(celer_ggml_type wtype);
/* Kernels for weights in the r16 layout (repack.h), NULL for other types: w is the first group,
 * wb the bytes of one group of 16 rows, nr a multiple of 16. */
celer_cpu_gemm_fn celer_cpu_gemm_r16_avx512vnni(celer_ggml_type wtype);
void              celer_cpu_quantize_x32_avx2(const float *x, void *row, int64_t nb, int64_t b0, int64_t b1);
void              celer_cpu_quantize_x256_avx2(const float *x, void *row, int64_t nb, int64_t b0, int64_t b1);
void              celer_cpu_quantize_x32h_avx2(const float *x, void *row, int64_t nb, int64_t b0, int64_t b1);
/* MLX kernels: the ROWS layout per level, and the R16 layout (NULL where the format has none) */
celer_cpu_mlx_gemm_fn celer_cpu_mlx_gemm_avx2(const celer_mlx_quant *q);
celer_cpu_mlx_gemm_fn celer_cpu_mlx_gemm_avx512vnni(const celer_mlx_quant *q);
celer_cpu_mlx_gemm_fn celer_cpu_mlx_gemm_r16_avx512vnni(const celer_mlx_quant *q);
#endif

/* Q4_K / Q5_K: the 8 six-bit scales and 8 mins packed in 12 bytes, unpacked to bytes. */
static inline void celer_cpu_unpack_k_scales(const uint8_t q[12], uint8_t sc[8], uint8_t mn[8])
{
    for (int j = 0; j < 4; j++) {
        sc[j]     = q[j] & 63;
        mn[j]     = q[j + 4] & 63;
        sc[j + 4] = (uint8_t)((q[j + 8] & 0x0f) | ((q[j] >> 6) << 4));
        mn[j + 4] = (uint8_t)((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
    }
}

#endif
