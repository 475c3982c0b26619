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

/* Quantizes blocks [b0, b1) of an activation row of nb blocks: x is the row's floats, row its
 * quantized bytes (blocks, and for X32 the sums). Every level's quantizer gives the same bytes. */
typedef void (*celer_cpu_quantize_fn)(const float *x, void *row, int64_t nb, int64_t b0, int64_t b1);
void celer_cpu_quantize_x32_ref(const float *x, void *row, int64_t nb, int64_t b0, int64_t b1);
void celer_cpu_quantize_x256_ref(const float *x, void *row, int64_t nb, int64_t b0, int64_t b1);

/* Kernel lookups per instruction set: NULL where the set has no kernel for the type. */
celer_cpu_gemm_fn celer_cpu_gemm_ref(celer_ggml_type wtype);
#if defined(__x86_64__)
celer_cpu_gemm_fn celer_cpu_gemm_avx2(celer_ggml_type wtype);
celer_cpu_gemm_fn celer_cpu_gemm_avx512vnni(celer_ggml_type wtype);
/* Kernels for weights in the r16 layout (repack.h), NULL for other types: w is the first group,
 * wb the bytes of one group of 16 rows, nr a multiple of 16. */
celer_cpu_gemm_fn celer_cpu_gemm_r16_avx512vnni(celer_ggml_type wtype);
void              celer_cpu_quantize_x32_avx2(const float *x, void *row, int64_t nb, int64_t b0, int64_t b1);
void              celer_cpu_quantize_x256_avx2(const float *x, void *row, int64_t nb, int64_t b0, int64_t b1);
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
