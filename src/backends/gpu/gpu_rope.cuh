/* The rotation of RoPE pair i at position pos, as the CPU computes it (in double: the angle of a
 * far position keeps its precision), for gpu_ops.cu and the fused RoPE + KV append. */
#ifndef CELER_BACKENDS_GPU_GPU_ROPE_CUH
#define CELER_BACKENDS_GPU_GPU_ROPE_CUH

#include "backends/gpu/gpu_vendor.h"

static __device__ __forceinline__ void gpu_rope_cos_sin(int32_t pos, int64_t i, int64_t n_rot, float base,
                                                        float pos_scale, const float *factors, float mscale, float *c,
                                                        float *s)
{
    double freq = pow((double)base, -2.0 * (double)i / (double)n_rot);
    if (factors) freq /= factors[i];
    const double a = (double)pos * pos_scale * freq;
    *c             = (float)(cos(a) * mscale);
    *s             = (float)(sin(a) * mscale);
}

#endif
