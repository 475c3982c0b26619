/* Reference (scalar) conversions between GGUF weight formats and f32. These are the
 * definitions every optimized kernel (CPU SIMD, CUDA, HIP) is tested against; their results
 * match gguf-py's dequantize bit for bit. */
#ifndef CELER_QUANT_DEQUANT_H
#define CELER_QUANT_DEQUANT_H

#include "quant/blocks.h"
#include "quant/blocks_k23.h"
#include "quant/ggml_types.h"

#include <stdbool.h>
#include <stddef.h>

/* Whether celer can dequantize this type (and so load weights of it). */
bool celer_dequant_supported(celer_ggml_type t);

/* y[0, n) = the values of the n elements at src (n a multiple of the type's block size).
 * Returns false for an unsupported type (nothing written). */
bool celer_dequant_row(celer_ggml_type t, const void *src, float *y, int64_t n);

/* Activation quantizers for integer dot products (n a multiple of the block size): per block
 * (32 for Q8_0, 256 for Q8_K) d = max|x| / 127 and q = round-half-away(x · (1/d)) with the
 * f32 d (the stored Q8_0 d is then rounded to half), as gguf-py's Q8_0 quantizer does; 0 when d is 0;
 * Q8_K also stores the sum of each 16 codes. */
void celer_quantize_row_q8_0_ref(const float *x, celer_block_q8_0 *y, int64_t n);
void celer_quantize_row_q8_K_ref(const float *x, celer_block_q8_K *y, int64_t n);

/* The per-type rows that celer_dequant_row dispatches to, for callers that know the type:
 * src holds n / block_elems blocks of that type (a row of n elements), y is (n). */
void celer_dequant_row_f32(const void *src, float *y, int64_t n);
void celer_dequant_row_f16(const void *src, float *y, int64_t n);
void celer_dequant_row_bf16(const void *src, float *y, int64_t n);
void celer_dequant_row_q4_0(const void *src, float *y, int64_t n);
void celer_dequant_row_q4_1(const void *src, float *y, int64_t n);
void celer_dequant_row_q5_0(const void *src, float *y, int64_t n);
void celer_dequant_row_q5_1(const void *src, float *y, int64_t n);
void celer_dequant_row_q8_0(const void *src, float *y, int64_t n);
void celer_dequant_row_q2_K(const void *src, float *y, int64_t n);
void celer_dequant_row_q3_K(const void *src, float *y, int64_t n);
void celer_dequant_row_q4_K(const void *src, float *y, int64_t n);
void celer_dequant_row_q5_K(const void *src, float *y, int64_t n);
void celer_dequant_row_q6_K(const void *src, float *y, int64_t n);
void celer_dequant_row_q8_K(const void *src, float *y, int64_t n); /* x = q * d (not in gguf-py) */

#endif
