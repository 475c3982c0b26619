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
    CELER_CPU_ACT_Q8_0, /* k / 32 celer_block_q8_0 */
    CELER_CPU_ACT_Q8_K, /* k / 256 celer_block_q8_K */
} celer_cpu_act;

celer_cpu_act celer_cpu_act_of(celer_ggml_type wtype);

/* Kernel lookups per instruction set: NULL where the set has no kernel for the type. */
celer_cpu_gemm_fn celer_cpu_gemm_ref(celer_ggml_type wtype);
#if defined(__x86_64__)
celer_cpu_gemm_fn celer_cpu_gemm_avx2(celer_ggml_type wtype);
celer_cpu_gemm_fn celer_cpu_gemm_avx512vnni(celer_ggml_type wtype);
/* AVX2 activation quantizers: the results of quant/dequant.h's celer_quantize_row_q8_0_ref and
 * celer_quantize_row_q8_K_ref, bit for bit. n is a multiple of the block size. */
void celer_cpu_quantize_q8_0_avx2(const float *x, celer_block_q8_0 *y, int64_t n);
void celer_cpu_quantize_q8_K_avx2(const float *x, celer_block_q8_K *y, int64_t n);
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

/* A Q8_0 activation row of nb blocks holds the blocks, then (at this 4-aligned offset) one float
 * per block: d · Σ codes, which the unsigned-code kernels (Q4_1, Q5_1) use for the min term
 * instead of summing the codes again for every weight row. */
#define CELER_Q8_0_SUMS_AT(nb) ((((size_t)(nb) * sizeof(celer_block_q8_0)) + 3) & ~(size_t)3)

#endif
