/* The GPU library's fused kernels, for the port tables (backends/ports.c). */
#ifndef CELER_BACKENDS_GPU_GPU_PORTS_H
#define CELER_BACKENDS_GPU_GPU_PORTS_H

#include "backends/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

celer_status celer_gpu_add_rmsnorm(celer_backend *be, float *x, const float *o, const celer_weight *w, int64_t rows,
                                   int64_t d, float eps, float *h, celer_error *err);
celer_status celer_gpu_attn_inputs(celer_backend *be, celer_kv_cache *kv, int32_t layer, float *q, int64_t n_head,
                                   const float *k, const float *v, const celer_weight *q_norm,
                                   const celer_weight *k_norm, float eps, const celer_batch *b, int64_t head_dim,
                                   const celer_rope *r, celer_error *err);
celer_status celer_gpu_qkv_inputs(celer_backend *be, const celer_weight *const *w, const float *x, celer_kv_cache *kv,
                                  int32_t layer, const celer_batch *b, float *q, int64_t n_head, float *k, float *v,
                                  int64_t head_dim, const celer_rope *r, celer_error *err);
/* Whether celer_gpu_qkv_inputs runs these in one launch (the products make the attention
 * inputs), not its fallback: what its tests hold it to, since both give the same values. */
bool         celer_gpu_qkv_inputs_one(celer_backend *be, const celer_weight *const *w, const celer_kv_cache *kv,
                                      const celer_batch *b, int64_t n_head, int64_t head_dim, const celer_rope *r);

/* Whether celer_gpu_matmul_glu runs gate and up and their GLU in one launch (T tokens), not its
 * fallback: what its tests hold it to. */
bool         celer_gpu_matmul_glu_one(celer_backend *be, const celer_weight *gate, const celer_weight *up, int64_t T);

celer_status celer_gpu_matmuls(celer_backend *be, const celer_weight *const *w, int n, const float *x, int64_t T,
                               float *const *y, celer_error *err);
celer_status celer_gpu_matmul_glu(celer_backend *be, const celer_weight *gate, const celer_weight *up, const float *x,
                                  int64_t T, celer_act act, float *h, float *u, celer_error *err);
celer_status celer_gpu_matmul_add(celer_backend *be, const celer_weight *w, const float *x, int64_t T, float *y,
                                  float *tmp, celer_error *err);
celer_status celer_gpu_moe_router(celer_backend *be, const celer_weight *router, const float *h, int64_t T, float *logits,
                                  int64_t n_used, bool renorm, int32_t *ids, float *w, celer_error *err);
celer_status celer_gpu_norm_router(celer_backend *be, const float *x, const celer_weight *norm, int64_t T, int64_t d,
                                   float eps, float *h, const celer_weight *router, float *logits, int64_t n_used,
                                   bool renorm, int32_t *ids, float *w, celer_error *err);
celer_status celer_gpu_moe_ffn_add(celer_backend *be, const celer_moe *moe, const float *x, int64_t T,
                                   const int32_t *ids, const float *w, int64_t n_used, celer_act act, float *y,
                                   float *tmp, celer_error *err);

#ifdef __cplusplus
}
#endif

#endif
