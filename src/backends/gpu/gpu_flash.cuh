/* What the two prefill-attention kernels share (gpu_flash.cu: NVIDIA's mma.sync; gpu_flash_amx.cuh:
 * AMD's MFMA and WMMA): a block's 64 query rows of one head and what each sees, the passes over
 * the sequences among them, and the staging of a tile of 64 keys from the paged cache as f16.
 * Device code only, on gpu_vendor.h's names: dev/kernels/gpu_flash_amx.cu includes it without
 * the backend. */
#ifndef CELER_BACKENDS_GPU_FLASH_CUH
#define CELER_BACKENDS_GPU_FLASH_CUH

#include "backends/gpu/gpu_vendor.h"

#include <limits.h>
#include <math.h>

enum { FL_ROWS = 64, FL_KEYS = 64, FL_THREADS = 128, FL_PAD = 8, FL_MIN_RUN = 16, FL_BATCH = 4 };

/* Four consecutive cache values at p as two f16 pairs (the lower index in the low half): f32
 * values rounded to the nearest, f16 ones as they are (gpu_kv.cuh). */
static __device__ __forceinline__ uint2 f16x4(const float *p)
{
    const float4 a = *(const float4 *)p;
    return make_uint2(gpu_half2_bits(a.x, a.y), gpu_half2_bits(a.z, a.w));
}
static __device__ __forceinline__ uint2 f16x4(const uint16_t *p) { return *(const uint2 *)p; }

/* The sequence and the visible keys [lo, hi] of each of the block's rows t0 .. t0 + FL_ROWS (none
 * past T: sequence -1, an empty range); the caller synchronizes before reading them. */
static __device__ __forceinline__ void fl_rows(const int32_t *__restrict__ pos, const int32_t *__restrict__ seq,
                                               int64_t t0, int64_t T, int32_t window, int32_t *s_seq, int32_t *s_lo,
                                               int32_t *s_hi)
{
    if (threadIdx.x < FL_ROWS) {
        const int64_t t = t0 + threadIdx.x;
        const int32_t p = t < T ? pos[t] : 0;
        s_seq[threadIdx.x] = t < T ? seq[t] : -1;
        s_lo[threadIdx.x]  = t >= T ? 1 : window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
        s_hi[threadIdx.x]  = t < T ? p : 0;
    }
}

/* The block's next pass: the lowest sequence above prev among its rows (*s) and the keys any of
 * its rows sees [*klo, *khi]; false when none is left. */
static __device__ __forceinline__ bool fl_next_pass(const int32_t *s_seq, const int32_t *s_lo, const int32_t *s_hi,
                                                    int32_t prev, int32_t *s, int32_t *klo, int32_t *khi)
{
    int32_t n = INT_MAX;
    for (int i = 0; i < FL_ROWS; i++) n = s_seq[i] > prev && s_seq[i] < n ? s_seq[i] : n;
    if (n == INT_MAX) return false;
    int32_t lo = INT_MAX, hi = -1;
    for (int i = 0; i < FL_ROWS; i++)
        if (s_seq[i] == n) lo = min(lo, s_lo[i]), hi = max(hi, s_hi[i]);
    *s = n, *klo = lo, *khi = hi;
    return true;
}

/* The A fragments of mma.m16n8k16 (gpu_flash.cu's layout) of two query rows q0 and q1 (rows g
 * and g + 8 of a row tile; zeros for a row not in), scaled for exp2 and rounded to f16: HD / 16
 * steps of 16 columns, this lane's columns c2, c2 + 1 and c2 + 8, c2 + 9 of each. */
template <int HD>
static __device__ __forceinline__ void fl_q_frags(const float *q0, const float *q1, bool in0, bool in1, int c2,
                                                  float scale_log2, uint32_t (&qa)[HD / 16][4])
{
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
        const int    d  = kk * 16 + c2;
        const float2 a0 = in0 ? *(const float2 *)(q0 + d) : make_float2(0, 0);
        const float2 a1 = in1 ? *(const float2 *)(q1 + d) : make_float2(0, 0);
        const float2 a2 = in0 ? *(const float2 *)(q0 + d + 8) : make_float2(0, 0);
        const float2 a3 = in1 ? *(const float2 *)(q1 + d + 8) : make_float2(0, 0);
        qa[kk][0] = gpu_half2_bits(a0.x * scale_log2, a0.y * scale_log2);
        qa[kk][1] = gpu_half2_bits(a1.x * scale_log2, a1.y * scale_log2);
        qa[kk][2] = gpu_half2_bits(a2.x * scale_log2, a2.y * scale_log2);
        qa[kk][3] = gpu_half2_bits(a3.x * scale_log2, a3.y * scale_log2);
    }
}

/* A thread's FL_BATCH pieces i0 .. of the tile of keys j0 .. j0 + FL_KEYS (piece e: 4 values at
 * dimension e % (HD / 4) · 4 of key e / (HD / 4)), keys and values of kv head kvh, zeros past khi.
 * All loads are issued before any is used: one piece at a time made a tile 16 round trips to
 * the cache, most of the kernel's time. */
template <int HD, typename KT>
static __device__ __forceinline__ void fl_fetch(uint2 (&k4)[FL_BATCH], uint2 (&v4)[FL_BATCH], const KT *__restrict__ kc,
                                                const KT *__restrict__ vc, const int32_t *__restrict__ table,
                                                int32_t block_size, int64_t kw, int64_t kvh, int32_t j0, int32_t khi,
                                                int i0)
{
#pragma unroll
    for (int i = 0; i < FL_BATCH; i++) {
        const int     e = threadIdx.x + (i0 + i) * FL_THREADS, d = e % (HD / 4) * 4;
        const int32_t j = j0 + e / (HD / 4);
        k4[i] = v4[i] = make_uint2(0, 0);
        if (j <= khi) {
            const int64_t slot = (int64_t)table[j / block_size] * block_size + j % block_size;
            k4[i] = f16x4(kc + slot * kw + kvh * HD + d);
            v4[i] = f16x4(vc + slot * kw + kvh * HD + d);
        }
    }
}

#endif
