/* The arithmetic of an RMS norm over a row, shared by the norm kernels (gpu_norm.cu) and the
 * products that normalize their own input (gpu_matvec.cu, celer_port_norm_matmuls): the same
 * sums in the same order, so that both give the same normed row bit for bit.
 *
 * The row's sum of squares is taken by L "lanes" (norm_lanes): lane i sums float4s i, i + L,
 * .. (at most NORM_V of them) in that order, then the lanes' sums are added as gpu_block_sum
 * adds a block of L threads' values. A block of L threads is one lane a thread (k_norm_vec); a
 * block of B threads (B and L multiples of the warp) takes lanes t, t + B, .. a thread. */
#ifndef CELER_BACKENDS_GPU_GPU_NORM_CUH
#define CELER_BACKENDS_GPU_GPU_NORM_CUH

#include "backends/gpu/gpu_backend.h"

#include <stdint.h>

enum { NORM_V = 4, NORM_MAX_THREADS = 1024 };

/* Lanes for a row of d values: a multiple of 64 (whole warps on wave32 and wave64), or 0 when
 * the row is not whole float4s or wants more than NORM_MAX_THREADS. */
static inline __host__ __device__ int64_t norm_lanes(int64_t d)
{
    const int64_t per = (d / 4 + NORM_V - 1) / NORM_V, t = (per + 63) / 64 * 64;
    return d % 4 || t > NORM_MAX_THREADS ? 0 : t;
}

/* x² + y² + z² + w², rounded step by step (no contraction: every kernel sums alike). */
static __device__ __forceinline__ float norm_sq4(float4 v)
{
    return __fadd_rn(__fadd_rn(__fadd_rn(__fmul_rn(v.x, v.x), __fmul_rn(v.y, v.y)), __fmul_rn(v.z, v.z)),
                     __fmul_rn(v.w, v.w));
}

static __device__ __forceinline__ float norm_inv(float ss, int64_t d, float eps)
{
    return 1.0f / sqrtf(ss / (float)d + eps);
}

static __device__ __forceinline__ float4 norm_scale4(float4 a, float s, float4 w)
{
    return make_float4(a.x * s * w.x, a.y * s * w.y, a.z * s * w.z, a.w * s * w.w);
}

/* 1 / rms of the row x (d values, 16-byte aligned) as norm_lanes(d) lanes sum it, by the whole
 * block (blockDim.x a multiple of the warp); part: __shared__ float[NORM_MAX_THREADS / 32]. */
static __device__ __forceinline__ float norm_row_inv(const float *x, int64_t d, float eps, float *part)
{
    const int64_t L = norm_lanes(d), d4 = d / 4, nw = L / CELER_WARP;
    const int     lane = threadIdx.x % CELER_WARP;
    for (int64_t l0 = 0; l0 < L; l0 += blockDim.x) { /* whole warps in or out */
        const int64_t l = l0 + threadIdx.x;
        if (l >= L) break;
        float ss = 0.0f;
#pragma unroll
        for (int k = 0; k < NORM_V; k++) {
            const int64_t i = l + (int64_t)k * L;
            if (i < d4) ss = __fadd_rn(ss, norm_sq4(((const float4 *)x)[i]));
        }
        ss = gpu_warp_sum(ss);
        if (lane == 0) part[l / CELER_WARP] = ss;
    }
    __syncthreads();
    if (threadIdx.x < CELER_WARP) {
        float s = lane < nw ? part[lane] : 0.0f;
        s       = gpu_warp_sum(s);
        if (lane == 0) part[0] = s;
    }
    __syncthreads();
    return norm_inv(part[0], d, eps);
}

#endif
