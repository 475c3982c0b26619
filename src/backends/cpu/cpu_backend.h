/* The CPU backend's instance and the ops its files implement. */
#ifndef CELER_BACKENDS_CPU_CPU_BACKEND_H
#define CELER_BACKENDS_CPU_CPU_BACKEND_H

#include "backends/backend.h"
#include "backends/cpu/matmul.h"
#include "core/threads.h"

extern const celer_backend_ops celer_cpu_ops;

celer_status celer_cpu_backend_create(celer_backend **out, const celer_backend_config *cfg, celer_error *err);
celer_pool  *cpu_pool(celer_backend *be);
/* The kernel level the backend runs (backends/cpu/matmul.h). */
int          cpu_isa(celer_backend *be);

celer_status cpu_get_rows(celer_backend *be, const celer_weight *w, const int32_t *ids, int64_t n, float *y,
                          celer_error *err);
celer_status cpu_rmsnorm(celer_backend *be, const float *x, const celer_weight *w, int64_t rows, int64_t d, float eps,
                         float *y, celer_error *err);
celer_status cpu_matmul_op(celer_backend *be, const celer_weight *w, const float *x, int64_t T, float *y,
                           celer_error *err);
celer_status cpu_add_bias(celer_backend *be, float *y, const celer_weight *b, int64_t T, celer_error *err);
celer_status cpu_rope(celer_backend *be, float *x, const celer_batch *b, int64_t n_heads, int64_t head_dim,
                      const celer_rope *r, celer_error *err);
celer_status cpu_kv_write(celer_backend *be, celer_kv_cache *kv, int32_t layer, const float *k, const float *v,
                          const celer_batch *b, celer_error *err);
celer_status cpu_attention(celer_backend *be, const float *q, const celer_kv_cache *kv, int32_t layer,
                           const celer_batch *b, const celer_attn *a, float *out, celer_error *err);
celer_status cpu_add(celer_backend *be, float *x, const float *y, int64_t n, celer_error *err);
celer_status cpu_glu(celer_backend *be, float *gate, const float *up, int64_t n, celer_act act, celer_error *err);
celer_status cpu_scale(celer_backend *be, float *x, int64_t n, float s, celer_error *err);
celer_status cpu_mul_sigmoid(celer_backend *be, float *x, const float *g, int64_t T, int64_t n, celer_error *err);

/* Experts per MoE layer the CPU routes (models/model.h's CELER_MAX_EXPERTS). */
#define CPU_MOE_MAX_EXPERTS 1024
celer_status cpu_moe_route(celer_backend *be, const float *logits, int64_t T, int64_t n_expert, int64_t n_used,
                           bool renorm, int32_t *ids, float *w, celer_error *err);
celer_status cpu_moe_ffn(celer_backend *be, const celer_moe *moe, const float *x, int64_t T, const int32_t *ids,
                         const float *w, int64_t n_used, celer_act act, float *out, celer_error *err);

/* The matmul scratch (backends/cpu/matmul.h), grown to at least bytes. It and the work memory
 * grow to the largest step seen: after the first prefill chunk and decode step nothing is
 * allocated again. */
celer_status cpu_scratch(celer_backend *be, size_t bytes, celer_cpu_scratch **out, celer_error *err);
/* The backend's work memory, grown to at least bytes (64-byte aligned); one op's at a time. */
celer_status cpu_work(celer_backend *be, size_t bytes, void **out, celer_error *err);

#endif
