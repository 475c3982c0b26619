/* The integer prefill kernels (gpu_mmq.cu): products of more than a decode step's tokens on the
 * integer matrix units, with the decode kernels' quantized activations. */
#ifndef CELER_BACKENDS_GPU_GPU_MMQ_H
#define CELER_BACKENDS_GPU_GPU_MMQ_H

#include "backends/gpu/gpu_matvec.h"

/* Whether this device and build run the format (enum gpu_fmt) on the integer matrix units. */
bool         gpu_mmq_has(const gpu_backend *g, int fmt);
/* y (T, w.rows) = x̂ · wᵀ, x quantized here (gpu_quant_x). */
celer_status gpu_mmq(gpu_backend *g, const gpu_wdesc *w, int fmt, const float *x, int64_t T, float *y,
                     celer_error *err);

#endif
