/* A head's row of a step's queries or keys made ready for attention: normalized by a per-head
 * norm (rmsnorm: 1 / sqrt(mean of squares + eps), as gpu_norm.cu) and rotated pair by pair at
 * its position (RoPE, as k_rope), by the attention inputs' kernel (gpu_fused.cu, a warp a head),
 * each operation rounded as written (no contraction left to the compiler).
 *
 * Lane l of the head's warp holds the row's values l + CELER_WARP · e (e < HEAD_PER) and its
 * pairs l + CELER_WARP · e (e < HEAD_PAIRS). */
#ifndef CELER_BACKENDS_GPU_GPU_HEAD_CUH
#define CELER_BACKENDS_GPU_GPU_HEAD_CUH

#include "backends/gpu/gpu_rope.cuh"

enum { HEAD_MAX = 512 };

/* The lane's value e of a row of n, or -1 where it holds none. */
static __device__ __forceinline__ int64_t head_at(int e, int64_t n)
{
    const int64_t j = (int64_t)(threadIdx.x % CELER_WARP) + (int64_t)CELER_WARP * e;
    return j < n ? j : -1;
}

/* The rotations of the lane's pairs at position p (half = n_rot / 2 pairs rotate). */
template <int PAIRS>
static __device__ __forceinline__ void head_rotations(int32_t p, int64_t half, const double *__restrict__ freqs,
                                                      float pos_scale, float mscale, float (&rc)[PAIRS],
                                                      float (&rs)[PAIRS])
{
#pragma unroll
    for (int e = 0; e < PAIRS; e++) {
        const int64_t i = head_at(e, half);
        rc[e] = rs[e] = 0.0f;
        if (i >= 0) gpu_rope_cos_sin(p, i, freqs, pos_scale, mscale, &rc[e], &rs[e]);
    }
}

/* The lane's values of a norm's weight w (hd of them; none: zeros) into wn. */
template <int PER>
static __device__ __forceinline__ void head_weights(const float *w, int64_t hd, float (&wn)[PER])
{
#pragma unroll
    for (int e = 0; e < PER; e++) {
        const int64_t j = head_at(e, hd);
        wn[e]           = w && j >= 0 ? w[j] : 0.0f;
    }
}

/* The lane's values of src (hd of them) into row (shared); returns their sum of squares. */
template <int PER>
static __device__ __forceinline__ float head_load(const float *src, int64_t hd, float *row)
{
    float ss = 0.0f;
#pragma unroll
    for (int e = 0; e < PER; e++) {
        const int64_t j = head_at(e, hd);
        if (j < 0) continue;
        const float x = src[j];
        row[j]        = x;
        ss            = __fmaf_rn(x, x, ss);
    }
    return ss;
}

/* row's values (the lane's) normalized: sum is the warp's sum of head_load's sums, wn the lane's
 * values of the norm's weight. */
template <int PER>
static __device__ __forceinline__ void head_scale(float *row, int64_t hd, float sum, float eps, const float (&wn)[PER])
{
    const float inv = __fdiv_rn(1.0f, sqrtf(__fadd_rn(__fdiv_rn(sum, (float)hd), eps)));
#pragma unroll
    for (int e = 0; e < PER; e++) {
        const int64_t j = head_at(e, hd);
        if (j >= 0) row[j] = __fmul_rn(__fmul_rn(row[j], inv), wn[e]);
    }
}

/* Pair e of the lane, rotated: its two indices (*i0 -1: the lane holds no such pair) and values,
 * from row (whole: after a barrier). */
static __device__ __forceinline__ void head_pair(const float *row, int e, int64_t half, int neox, float c, float s,
                                                 int64_t *i0, int64_t *i1, float *y0, float *y1)
{
    const int64_t i = head_at(e, half);
    *i0             = -1;
    if (i < 0) return;
    *i0 = neox ? i : 2 * i, *i1 = neox ? i + half : 2 * i + 1;
    const float x0 = row[*i0], x1 = row[*i1];
    *y0 = __fmaf_rn(x0, c, -__fmul_rn(x1, s));
    *y1 = __fmaf_rn(x0, s, __fmul_rn(x1, c));
}

#endif
