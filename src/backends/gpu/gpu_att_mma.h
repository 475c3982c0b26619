/* Decode attention of a batch on the matrix units (gpu_att_mma.cu). */
#ifndef CELER_BACKENDS_GPU_ATT_MMA_H
#define CELER_BACKENDS_GPU_ATT_MMA_H

#include "backends/gpu/gpu_matvec.h"

/* Decode attention of a batch on the matrix units (NVIDIA sm_80 on),
 * for the steps gpu_att_mma_takes (att_split.h's celer_att_mma: far is the step's furthest
 * position, rows its tokens times query heads); pos, seq and tables are gpu_batch_upload's, xo
 * the output's quantization for the o-projection (or none). */
bool         gpu_att_mma_takes(const gpu_backend *g, const celer_kv_cache *kv, const celer_attn *a, int32_t far,
                               int64_t rows);
celer_status gpu_att_mma(gpu_backend *g, const float *q, const celer_kv_cache *kv, int32_t layer, const int32_t *pos,
                         const int32_t *seq, const int32_t *tables, const celer_batch *b, const celer_attn *a,
                         float *out, gpu_xq_out xo, celer_error *err);
#endif
