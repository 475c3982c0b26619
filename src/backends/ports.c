/* The port tables. A slot holds a backend's fused kernel; the GPU library fills the slot of the
 * kind it was built for (CELER_GPU_BACKEND_KIND, from cmake/celer_gpu.cmake). */
#include "backends/ports.h"

#include "core/error.h"

#if CELER_HAVE_GPU
#include "backends/gpu/gpu_ports.h"
#define GPU_SLOT(fn) [CELER_GPU_BACKEND_KIND] = (celer_port_fn)(fn)
#else
#define GPU_SLOT(fn) [CELER_BACKEND_CPU] = NULL
#endif

const celer_port celer_port_add_rmsnorm = {
    .name     = "add_rmsnorm",
    .does     = "adds a sub-layer's output to the residual stream and normalizes it in one pass",
    .fallback = "add, then rmsnorm",
    .impl     = {GPU_SLOT(celer_gpu_add_rmsnorm)},
};

const celer_port celer_port_attn_inputs = {
    .name     = "attn_inputs",
    .does     = "normalizes and rotates the queries and keys per head and appends the keys and values to the "
                "paged KV cache in one pass",
    .fallback = "rmsnorm on the queries and keys (models with per-head norms), rope on each, then kv_write",
    .impl     = {GPU_SLOT(celer_gpu_attn_inputs)},
};

const celer_port celer_port_qkv_inputs = {
    .name     = "qkv_inputs",
    .does     = "multiplies an attention block's input by its q, k and v weights, rotates the queries and keys and "
                "appends the keys and values to the paged KV cache in one pass (no per-head norms)",
    .fallback = "matmuls of the q, k and v weights, then attn_inputs",
    .impl     = {GPU_SLOT(celer_gpu_qkv_inputs)},
};

const celer_port celer_port_matmuls = {
    .name     = "matmuls",
    .does     = "multiplies one input by up to three weights, reading the input once",
    .fallback = "matmul for each weight",
    .impl     = {GPU_SLOT(celer_gpu_matmuls)},
};

const celer_port celer_port_matmul_glu = {
    .name     = "matmul_glu",
    .does     = "multiplies a feed-forward block's input by its gate and up weights and applies the GLU in one pass",
    .fallback = "matmuls of the gate and up weights, then glu",
    .impl     = {GPU_SLOT(celer_gpu_matmul_glu)},
};

const celer_port celer_port_matmul_add = {
    .name     = "matmul_add",
    .does     = "adds a product to the residual stream as it writes it",
    .fallback = "matmul, then add",
    .impl     = {GPU_SLOT(celer_gpu_matmul_add)},
};

const celer_port celer_port_moe_router = {
    .name     = "moe_router",
    .does     = "multiplies an MoE layer's input by its router and chooses each token's experts in one kernel",
    .fallback = "matmul, then moe_route",
    .impl     = {GPU_SLOT(celer_gpu_moe_router)},
};

const celer_port celer_port_norm_router = {
    .name     = "norm_router",
    .does     = "normalizes an MoE layer's input and multiplies it by its router and chooses each token's experts in "
                "one kernel",
    .fallback = "rmsnorm, then moe_router",
    .impl     = {GPU_SLOT(celer_gpu_norm_router)},
};

const celer_port celer_port_moe_ffn_add = {
    .name     = "moe_ffn_add",
    .does     = "adds an MoE layer's output to the residual stream as its last products make it",
    .fallback = "moe_ffn, then add",
    .impl     = {GPU_SLOT(celer_gpu_moe_ffn_add)},
};

const celer_port *const celer_ports[] = {&celer_port_add_rmsnorm, &celer_port_attn_inputs, &celer_port_qkv_inputs,
                                         &celer_port_matmuls,     &celer_port_matmul_glu,   &celer_port_matmul_add,
                                         &celer_port_moe_router,  &celer_port_norm_router,  &celer_port_moe_ffn_add,
                                         NULL};

static const char *const KIND_NAMES[CELER_BACKEND_KIND_COUNT] = {"cpu", "cuda", "rocm"};

celer_status celer_port_select(const celer_port *p, celer_backend_kind kind, celer_port_fn *fn, celer_error *err)
{
    *fn = NULL;
    if ((unsigned)kind >= CELER_BACKEND_KIND_COUNT)
        return celer_fail(err, CELER_ERR_INVALID, "port %s: backend kind %d does not exist", p->name, (int)kind);
    *fn = p->impl[kind];
    if (*fn) return CELER_OK;
    return celer_fail(err, CELER_ERR_UNSUPPORTED, "port %s: the %s backend has no fused kernel; run the fallback: %s",
                      p->name, KIND_NAMES[kind], p->fallback);
}
