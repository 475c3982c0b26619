/* The integer decode kernels (gpu_matvec.cu): activations quantized once, dotted with each
 * weight format's codes four bytes at a time. */
#ifndef CELER_BACKENDS_GPU_GPU_MATVEC_H
#define CELER_BACKENDS_GPU_GPU_MATVEC_H

#include "backends/gpu/gpu_backend.h"
#include "backends/gpu/gpu_decode.cuh"

/* Tokens a pass of the decode kernels reads the weights for; weights one launch takes; bytes of
 * codes of a block of quantized activations (32 hi, then 32 lo). */
enum { GPU_MVQ_TOKENS = 8, GPU_MVQ_SET = 3, XQ_BLOCK = 64 };

/* Activations (T, cols) quantized per block of 32 values: for block b of token t, 64 bytes at
 * q + (t · nb + b) · 64 (32 hi codes, then 32 lo codes) and d[t · nb + b] = (d, d · S), with
 * x ≈ d · (256 hi + lo) and S = Σ (256 hi + lo): the CPU backend's X32 format. */
typedef struct {
    const int8_t *q;
    const float2 *d;
    int64_t       nb; /* blocks per token: cols / 32 */
} gpu_xq;

/* Quantizes x (T, cols) into the backend's buffer for quantized activations (valid until the
 * next call); cols is a multiple of 32. */
celer_status gpu_quant_x(gpu_backend *g, const float *x, int64_t T, int64_t cols, gpu_xq *xq, celer_error *err);
/* Whether the format (enum gpu_fmt) has an integer decode kernel. */
bool         gpu_matvec_q8_has(int fmt);
/* y[i] (T, w[i].rows) = x̂ · w[i]ᵀ for the quantized activations of gpu_quant_x and n (1 ..
 * GPU_MVQ_SET) weights of format fmt, one launch per GPU_MVQ_TOKENS tokens. */
celer_status gpu_matvec_q8(gpu_backend *g, const gpu_wdesc *w, int n, int fmt, const gpu_xq *xq, int64_t T,
                           float *const *y, celer_error *err);

#endif
