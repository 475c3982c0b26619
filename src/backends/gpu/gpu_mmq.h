/* The integer prefill kernels (gpu_mmq.cu): products of more than a decode step's tokens on the
 * integer matrix units, with the decode kernels' quantized activations. */
#ifndef CELER_BACKENDS_GPU_GPU_MMQ_H
#define CELER_BACKENDS_GPU_GPU_MMQ_H

#include "backends/gpu/gpu_matvec.h"
extern "C" {
#include "backends/gpu/moe_tiles.h"
}

/* Steps of more than GPU_MMQ_FROM tokens take the integer matrix units (fewer: the decode
 * kernels, whose passes of 8 tokens each read the weights again; CELER_GPU_MMQ_FROM=N moves the
 * line, for comparisons); up to GPU_MMQ_SMALL tokens the streaming kernel, past it the tiled one. */
enum { GPU_MMQ_FROM = 8, GPU_MMQ_SMALL = 32 };

/* Whether this device and build run the format (enum gpu_fmt) on the integer matrix units. */
bool         gpu_mmq_has(const gpu_backend *g, int fmt);
/* y (T, w.rows) = x̂ · wᵀ (with add: y += x̂ · wᵀ), x quantized here (gpu_quant_x). */
celer_status gpu_mmq(gpu_backend *g, const gpu_wdesc *w, int fmt, const float *x, int64_t T, float *y, bool add,
                     celer_error *err);
/* The same with x already quantized (a product sharing its input with others). */
celer_status gpu_mmq_xq(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq, int64_t T, float *y,
                        bool add, celer_error *err);

/* The experts of a stacked tensor (w: its first; the rest follow, w.rows rows each) times their
 * tokens in one launch: (token, expert) pairs sorted by expert, expert e's from starts[e] to
 * starts[e + 1] (n_expert + 1 values on the device; max_n the most of any expert), pair s's
 * activations x̂'s row tok[s] (tok on the device; NULL: row s), its output y's row s. */
celer_status gpu_mmq_experts(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq, const int32_t *tok,
                             int64_t n_expert, const int32_t *starts, int64_t max_n, float *y, celer_error *err);

/* The same on the batch kernel (CELER_GPU_MOE_STREAM=1, g->moe_stream): n_tiles tiles of pairs
 * of one expert on the device, as celer_moe_tile_list writes them (moe_tiles.h); no block
 * without work. */
celer_status gpu_mmq_expert_tiles(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq, const int32_t *tok,
                                  const int32_t *tiles, int64_t n_tiles, float *y, celer_error *err);

#endif
