/* The rotation of RoPE pair i at position pos, as the CPU computes it (in double: the angle of a
 * far position keeps its precision), for gpu_ops.cu and the fused RoPE + KV append. freqs: the
 * pairs' frequencies as the host computed them (gpu_rope_freqs), so that the kernels spend no
 * double pow; the cosine and sine from one sincos. */
#ifndef CELER_BACKENDS_GPU_GPU_ROPE_CUH
#define CELER_BACKENDS_GPU_GPU_ROPE_CUH

#include "backends/gpu/gpu_vendor.h"

static __device__ __forceinline__ void gpu_rope_cos_sin(int32_t pos, int64_t i, const double *__restrict__ freqs,
                                                        float pos_scale, float mscale, float *c, float *s)
{
    const double a = (double)pos * pos_scale * freqs[i];
    double       sd, cd;
    sincos(a, &sd, &cd);
    *c = (float)(cd * mscale);
    *s = (float)(sd * mscale);
}

#endif
