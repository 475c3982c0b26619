/* Kernel ports: fused kernels reached through a table with one slot per backend kind (DESIGN.md,
 * Backends). A backend that has a fused kernel fills its slot; selecting a port whose slot is
 * empty returns CELER_ERR_UNSUPPORTED naming the fallback (the unfused sequence of ops), which
 * the caller then runs. Nothing else in celer may branch on the backend kind or the GPU vendor
 * (tests/check_backend_branches.py fails the build's tests when something does). */
#ifndef CELER_BACKENDS_PORTS_H
#define CELER_BACKENDS_PORTS_H

#include "backends/backend.h"

typedef void (*celer_port_fn)(void); /* cast to the port's own type to call */

typedef struct {
    const char   *name;     /* "add_rmsnorm" */
    const char   *does;     /* what the fused kernel computes */
    const char   *fallback; /* the ops a caller runs instead */
    celer_port_fn impl[CELER_BACKEND_KIND_COUNT];
} celer_port;

/* x (rows, d) += o; h = x / rms(x) * w (w a vector of d, f32). Fallback: add, then rmsnorm. */
typedef celer_status (*celer_add_rmsnorm_fn)(celer_backend *be, float *x, const float *o, const celer_weight *w,
                                             int64_t rows, int64_t d, float eps, float *h, celer_error *err);
extern const celer_port celer_port_add_rmsnorm;

/* A layer's attention inputs made ready: q (T, n_head heads) and k each normalized per head by
 * q_norm / k_norm (rmsnorm over head_dim with eps; both NULL: no norm), then rotated at the
 * batch's positions; q in place, k (left as it was) and v written into the cache of layer.
 * Fallback: rmsnorm on q and on k (with norms), rope on q and on k, then kv_write. */
typedef celer_status (*celer_attn_inputs_fn)(celer_backend *be, celer_kv_cache *kv, int32_t layer, float *q,
                                             int64_t n_head, const float *k, const float *v,
                                             const celer_weight *q_norm, const celer_weight *k_norm, float eps,
                                             const celer_batch *b, int64_t head_dim, const celer_rope *r,
                                             celer_error *err);
extern const celer_port celer_port_attn_inputs;

/* A layer's q, k and v products and its attention inputs, for models without per-head norms:
 * q (T, n_head heads) = x · w[0]ᵀ rotated at the batch's positions, k = x · w[1]ᵀ and
 * v = x · w[2]ᵀ as the products give them, the rotated keys and the values appended to the cache
 * of layer — what matmuls then attn_inputs give. Fallback: matmuls of the three weights into q,
 * k and v, then attn_inputs. */
typedef celer_status (*celer_qkv_inputs_fn)(celer_backend *be, const celer_weight *const *w, const float *x,
                                            celer_kv_cache *kv, int32_t layer, const celer_batch *b, float *q,
                                            int64_t n_head, float *k, float *v, int64_t head_dim,
                                            const celer_rope *r, celer_error *err);
extern const celer_port celer_port_qkv_inputs;

/* y[i] (T, w[i].rows) = x (T, cols) · w[i]ᵀ for n weights (1 to 3) of the same cols, in a
 * pass that reads x once (a layer's q, k and v; its gate and up). Fallback: matmul per weight. */
typedef celer_status (*celer_matmuls_fn)(celer_backend *be, const celer_weight *const *w, int n, const float *x,
                                         int64_t T, float *const *y, celer_error *err);
extern const celer_port celer_port_matmuls;

/* h (T, gate.rows) = act(x · gateᵀ) · (x · upᵀ): a feed-forward block's gate and up products and
 * their GLU (x (T, gate.cols); gate and up of one shape); u (T, up.rows) is the backend's to use.
 * Fallback: matmuls of gate and up into h and u, then glu. */
typedef celer_status (*celer_matmul_glu_fn)(celer_backend *be, const celer_weight *gate, const celer_weight *up,
                                            const float *x, int64_t T, celer_act act, float *h, float *u,
                                            celer_error *err);
extern const celer_port celer_port_matmul_glu;

/* y (T, w.rows) += x (T, w.cols) · wᵀ: a sub-layer's output added to the residual stream by the
 * product itself; tmp (T, w.rows) is the backend's to use. Fallback: matmul into tmp, then add. */
typedef celer_status (*celer_matmul_add_fn)(celer_backend *be, const celer_weight *w, const float *x, int64_t T,
                                            float *y, float *tmp, celer_error *err);
extern const celer_port celer_port_matmul_add;

/* An MoE layer's router: logits (T, router.rows experts) = h (T, router.cols) · routerᵀ, then each
 * token's n_used choices and weights as the backend's moe_route gives them. Fallback: matmul,
 * then moe_route. */
typedef celer_status (*celer_moe_router_fn)(celer_backend *be, const celer_weight *router, const float *h, int64_t T,
                                            float *logits, int64_t n_used, bool renorm, int32_t *ids, float *w,
                                            celer_error *err);
extern const celer_port celer_port_moe_router;

/* An MoE layer's input and routing: h (T, d) = rmsnorm(x) · norm, then moe_router on h (h is
 * written: the experts read it). Fallback: rmsnorm, then moe_router (or its own fallback). */
typedef celer_status (*celer_norm_router_fn)(celer_backend *be, const float *x, const celer_weight *norm, int64_t T,
                                             int64_t d, float eps, float *h, const celer_weight *router, float *logits,
                                             int64_t n_used, bool renorm, int32_t *ids, float *w, celer_error *err);
extern const celer_port celer_port_norm_router;

/* y (T, d) += moe_ffn(x) (the backend's moe_ffn on x, as it writes out): an MoE layer's output
 * added to the residual stream by the kernels that make it, where they can; tmp (T, d) is the
 * backend's to use. Fallback: moe_ffn into tmp, then add. */
typedef celer_status (*celer_moe_ffn_add_fn)(celer_backend *be, const celer_moe *moe, const float *x, int64_t T,
                                             const int32_t *ids, const float *w, int64_t n_used, celer_act act,
                                             float *y, float *tmp, celer_error *err);
extern const celer_port celer_port_moe_ffn_add;

/* Every port, for tests and `celer info`; NULL-terminated. */
extern const celer_port *const celer_ports[];

/* *fn = p's kernel for kind, or CELER_ERR_UNSUPPORTED (fn NULL) saying which fallback to run. */
celer_status celer_port_select(const celer_port *p, celer_backend_kind kind, celer_port_fn *fn, celer_error *err);

#endif
