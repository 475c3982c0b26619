/* RMSNorm's arithmetic on the GPU, shared by the norm kernels (gpu_norm.cu) and the MoE input's
 * norm fused with its router (gpu_matvec_plain.cu): a row's sum of squares in one fixed order,
 * whatever the block that takes it, and the scaling, so that every kernel gives the same h bit
 * for bit. */
#ifndef CELER_BACKENDS_GPU_GPU_NORM_CUH
#define CELER_BACKENDS_GPU_GPU_NORM_CUH

#include "backends/gpu/gpu_vendor.h"

#include <stdint.h>

/* The sum of a row's squares is taken by L "lanes" (norm_lanes): lane i sums float4s i, i + L,
 * .. (at most NORM_V of them) in that order, then the lanes' sums are added as gpu_block_sum
 * adds a block of L threads' values: a block of L threads is one lane a thread (k_norm_vec);
 * a block of B threads (B and L multiples of the warp) takes lanes t, t + B, .. a thread
 * (k_norm_slice): the same h bit for bit. */
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

static __device__ __forceinline__ float4 add4(float4 a, float4 b)
{
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

/* 1 / rms of the row x (with ADD, of x + o; d values, 16-byte aligned) as norm_lanes(d) lanes sum
 * it, by the whole block (blockDim.x a multiple of the warp); part: __shared__
 * float[NORM_MAX_THREADS / 32]. */
template <bool ADD>
static __device__ __forceinline__ float norm_row_inv(const float *x, const float *o, int64_t d, float eps, float *part)
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
            if (i >= d4) continue;
            float4 v = ((const float4 *)x)[i];
            if (ADD) v = add4(v, ((const float4 *)o)[i]);
            ss = __fadd_rn(ss, norm_sq4(v));
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
