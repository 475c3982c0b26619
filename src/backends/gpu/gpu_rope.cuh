/* The rotation of RoPE pair i at position pos, as the CPU computes it (in double: the angle of a
 * far position keeps its precision), for gpu_ops.cu and the kernels that make attention's inputs
 * ready (gpu_fused.cu, gpu_attention.cu), with their head staging below. freqs: the
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

/* A head's row of src (hd values) into row (shared memory), normalized by nw when given
 * (rmsnorm: 1 / sqrt(mean of squares + eps), as gpu_norm.cu); part: __shared__ float[32]. Every
 * thread of the block calls; row is whole when it returns. */
static __device__ __forceinline__ void gpu_head_stage(const float *src, const float *__restrict__ nw, int64_t hd,
                                                      float eps, float *row, float *part)
{
    float ss = 0.0f;
    for (int64_t j = threadIdx.x; j < hd; j += blockDim.x) {
        const float x = src[j];
        row[j]        = x;
        ss += x * x;
    }
    if (nw) { /* gpu_block_sum's barriers also make row whole */
        const float inv = 1.0f / sqrtf(gpu_block_sum(ss, part) / (float)hd + eps);
        for (int64_t j = threadIdx.x; j < hd; j += blockDim.x) row[j] = row[j] * inv * nw[j];
    }
    __syncthreads();
}

/* The first n_rot values of row rotated at position p into dst (row itself allowed: each pair is
 * one thread's), NeoX pairs (i, i + n_rot / 2) or normal ones (2i, 2i + 1). */
static __device__ __forceinline__ void gpu_head_rotate(const float *row, float *dst, int32_t p, int64_t n_rot, bool neox,
                                                       const double *__restrict__ freqs, float pos_scale, float mscale)
{
    const int64_t half = n_rot / 2;
    for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
        const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        float         c, s;
        gpu_rope_cos_sin(p, i, freqs, pos_scale, mscale, &c, &s);
        const float x0 = row[i0], x1 = row[i1];
        dst[i0]        = x0 * c - x1 * s;
        dst[i1]        = x0 * s + x1 * c;
    }
}

#endif
