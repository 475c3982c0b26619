/* The GLU's value act(g) · u (gpu_ops.cu's k_glu and the fused gate/up products of
 * gpu_matvec_glu.cu: the same roundings in both). */
#ifndef CELER_BACKENDS_GPU_GPU_GLU_CUH
#define CELER_BACKENDS_GPU_GPU_GLU_CUH

#include "backends/gpu/gpu_backend.h"

/* act a celer_act; each operation rounded as written (no contraction left to the compiler). */
static __device__ __forceinline__ float glu_value(float g, float u, int act)
{
    if (act == CELER_ACT_SILU) return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
    const float c = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, g), g), g);
    const float t = tanhf(__fmul_rn(0.7978845608028654f, __fadd_rn(g, c)));
    return __fmul_rn(__fmul_rn(__fmul_rn(0.5f, g), __fadd_rn(1.0f, t)), u);
}

#endif
