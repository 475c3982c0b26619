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
/* A product over expert selections (MoE decode): selection n (0 .. n_sel) multiplies the rows of
 * expert ids[n] (a weight is then the stacked tensor's first expert, rows the rows of one) by
 * token n / per_x of the activations, into rows n · rows of the output. ids stay on the device. */
typedef struct {
    const int32_t *ids;
    int32_t        per_x;    /* selections per token of the activations */
    int32_t        n_expert; /* ids past it select nothing */
} gpu_mv_sel;

/* w as the kernels see it and its format (enum gpu_fmt); CELER_ERR_UNSUPPORTED for a weight no
 * GPU kernel reads (gpu_matmul.cu). */
celer_status gpu_weight_desc(const celer_weight *w, gpu_wdesc *d, int *fmt, celer_error *err);
/* Whether the format (enum gpu_fmt) has an integer decode kernel. */
bool         gpu_matvec_q8_has(int fmt);
/* y[i] (T, w[i].rows) = x̂ · w[i]ᵀ for the quantized activations of gpu_quant_x and n (1 ..
 * GPU_MVQ_SET) weights of format fmt, one launch per GPU_MVQ_TOKENS tokens. */
celer_status gpu_matvec_q8(gpu_backend *g, const gpu_wdesc *w, int n, int fmt, const gpu_xq *xq, int64_t T,
                           float *const *y, celer_error *err);
/* The same over the n_sel selections of sel (T unused), one launch. */
celer_status gpu_matvec_q8_sel(gpu_backend *g, const gpu_wdesc *w, int n, int fmt, const gpu_xq *xq, int64_t T,
                               const gpu_mv_sel *sel, int64_t n_sel, float *const *y, celer_error *err);

#endif
