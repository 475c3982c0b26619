/* Prefill attention on AMD's matrix units (a HIP build's gpu_flash.cu): the NVIDIA kernel's
 * blocks, passes, tiles and precision (gpu_flash.cu), its products as f16 16 × 16 × 16 tiles on
 * MFMA (CDNA) or WMMA (RDNA 3), whose operand and result placements amx_layout.h gives.
 *
 * The products are taken transposed. Scores as Sᵀ = K Qᵀ: a lane's accumulators then hold one
 * query (its column, lane % 16) and several keys, and Oᵀ = Vᵀ Pᵀ takes the probabilities Pᵀ as its
 * B operand, whose lane gives one column (the same query) and several k (keys): MFMA's
 * accumulators are that operand as they lie, WMMA's hold every other key and take the rest from
 * the lane 16 away (amx_from_lane, amx_from_reg). Each lane's output accumulators are then one
 * query's, so its softmax rescaling is one factor a lane; a query's maximum and sum are reduced
 * over the lane groups that share its column (lanes 16 and 32 apart). Keys are staged key by key
 * (A of the scores: a key's consecutive dimensions), values transposed (A of the output: a
 * dimension's consecutive keys).
 *
 * A block is FL_THREADS threads: 4 waves of 32 (RDNA), each 16 of the 64 rows, or 2 of 64 (CDNA),
 * each 32 rows as two 16-query tiles. A lane holds its queries' q (times the softmax scale) in
 * f16 as B operands, HD / 16 of them a tile.
 *
 * Runs where the pass has units (CELER_GPU_AMX_HERE), on gpu_amx_hmma. No AMD GPU has run it:
 * the layouts are held to the ISA by tests/test_amx_layout.c, the rest by the CUDA harness
 * dev/kernels/gpu_flash_amx.cu (this kernel on an NVIDIA warp with WMMA's placements computed by
 * shuffles), and at a backend's start by a self-check against the f32 kernel
 * (gpu_selfcheck.cu). */
#ifndef CELER_BACKENDS_GPU_FLASH_AMX_CUH
#define CELER_BACKENDS_GPU_FLASH_AMX_CUH

#include "backends/gpu/gpu_flash.cuh"

#if CELER_GPU_AMX_HERE != CELER_AMX_NONE
/* A lane's operand words from a staged row: the f16 pairs at p, p + 2, .. (p 4-byte aligned). */
template <int HW> static __device__ __forceinline__ void fla_words(uint32_t (&w)[HW], const uint16_t *p)
{
#pragma unroll
    for (int i = 0; i < HW; i++) w[i] = *(const uint32_t *)(p + 2 * i);
}

/* The lane's B operand words of its score accumulators sc (keys × its query) for the output
 * product: f16 pairs of probabilities by consecutive keys. A pair's two keys are one register on
 * WMMA, held here for one key and by the lane 16 away for the other: one shuffle a pair. */
static __device__ __forceinline__ void fla_probs(uint32_t *pb, const float *sc)
{
    constexpr int K = CELER_GPU_AMX_HERE;
    const int     lane = (int)(threadIdx.x % CELER_WARP);
#pragma unroll
    for (int i = 0; i < amx_halves(K); i += 2) {
        const float m0 = sc[amx_from_reg(K, i)], m1 = sc[amx_from_reg(K, i + 1)];
        const float there = K == CELER_AMX_WMMA11 ? gpu_shfl_xor(m0, 16) : 0.0f; /* every lane takes part */
        pb[i / 2] = gpu_half2_bits(amx_from_lane(K, lane, i) == lane ? m0 : there,
                                   amx_from_lane(K, lane, i + 1) == lane ? m1 : there);
    }
}
#endif

template <int HD, typename KT>
__global__ void __launch_bounds__(FL_THREADS)
    k_flash_amx(const float *__restrict__ q, const KT *__restrict__ kc, const KT *__restrict__ vc,
                const int32_t *__restrict__ pos, const int32_t *__restrict__ seq, const int32_t *__restrict__ tables,
                int32_t max_blocks, int32_t block_size, int64_t T, int64_t n_heads, int64_t n_kv_heads,
                float scale_log2, int32_t window, float *__restrict__ out)
{
    gpu_dep_enter();
#if CELER_GPU_AMX_HERE != CELER_AMX_NONE
    constexpr int K   = CELER_GPU_AMX_HERE, ACC = amx_acc(K), HW = amx_halves(K) / 2; /* an operand's words */
    constexpr int NQ  = FL_ROWS / (FL_THREADS / CELER_WARP) / 16;                   /* a wave's query tiles */
    constexpr int NKB = FL_KEYS / 16, ND = HD / 16;
    static_assert(amx_lanes(K) == CELER_WARP && NQ >= 1, "the kind's wave is the pass's");
    __shared__ __align__(16) uint16_t ks[FL_KEYS][HD + FL_PAD]; /* f16 bits, key by key */
    __shared__ __align__(16) uint16_t vt[HD][FL_KEYS + FL_PAD]; /* f16 bits, dimension by dimension */
    __shared__ int32_t s_seq[FL_ROWS], s_lo[FL_ROWS], s_hi[FL_ROWS];
    const int64_t t0 = (int64_t)blockIdx.x * FL_ROWS, h = blockIdx.y, kvh = h / (n_heads / n_kv_heads);
    const int64_t kw = n_kv_heads * HD;
    const int     lane = (int)(threadIdx.x % CELER_WARP), c = lane % 16, hk0 = amx_half_k(K, lane, 0);
    const int     r0 = (int)(threadIdx.x / CELER_WARP) * 16 * NQ + c; /* row of tile qi: r0 + 16 qi */
    fl_rows(pos, seq, t0, T, window, s_seq, s_lo, s_hi);
    uint32_t qb[NQ][ND][HW]; /* q of the lane's queries at dimensions 16 kk + amx_half_k .. */
#pragma unroll
    for (int qi = 0; qi < NQ; qi++) {
        const int64_t t  = t0 + r0 + 16 * qi;
        const float  *qr = q + (t * n_heads + h) * HD;
#pragma unroll
        for (int kk = 0; kk < ND; kk++)
#pragma unroll
            for (int i = 0; i < HW; i++) {
                const int d      = 16 * kk + hk0 + 2 * i;
                qb[qi][kk][i] = t < T ? gpu_half2_bits(qr[d] * scale_log2, qr[d + 1] * scale_log2) : 0u;
            }
    }
    float o[NQ][ND][ACC], m[NQ], l[NQ];
#pragma unroll
    for (int qi = 0; qi < NQ; qi++) {
        m[qi] = -INFINITY, l[qi] = 0.0f;
#pragma unroll
        for (int nd = 0; nd < ND; nd++)
#pragma unroll
            for (int v = 0; v < ACC; v++) o[qi][nd][v] = 0.0f;
    }
    __syncthreads();
    int32_t rs[NQ], rlo[NQ], rhi[NQ]; /* each query's sequence and visible keys */
#pragma unroll
    for (int qi = 0; qi < NQ; qi++) {
        const int r = r0 + 16 * qi;
        rs[qi] = s_seq[r], rlo[qi] = s_lo[r], rhi[qi] = s_hi[r];
    }

    for (int32_t prev = -1, s, klo, khi; fl_next_pass(s_seq, s_lo, s_hi, prev, &s, &klo, &khi); prev = s) {
        const int32_t *table = tables + (int64_t)s * max_blocks;
        for (int32_t j0 = klo; j0 <= khi; j0 += FL_KEYS) {
            __syncthreads(); /* the previous tile is consumed */
            constexpr int PER = FL_KEYS * HD / 4 / FL_THREADS;
            static_assert(PER % FL_BATCH == 0, "whole batches");
#pragma unroll
            for (int i0 = 0; i0 < PER; i0 += FL_BATCH) {
                uint2 k4[FL_BATCH], v4[FL_BATCH];
                fl_fetch<HD, KT>(k4, v4, kc, vc, table, block_size, kw, kvh, j0, khi, i0);
#pragma unroll
                for (int i = 0; i < FL_BATCH; i++) {
                    const int e = threadIdx.x + (i0 + i) * FL_THREADS, kj = e / (HD / 4), d = e % (HD / 4) * 4;
                    *(uint2 *)&ks[kj][d] = k4[i];
                    vt[d][kj] = (uint16_t)v4[i].x, vt[d + 1][kj] = (uint16_t)(v4[i].x >> 16);
                    vt[d + 2][kj] = (uint16_t)v4[i].y, vt[d + 3][kj] = (uint16_t)(v4[i].y >> 16);
                }
            }
            __syncthreads();
            const int32_t j1   = j0 + FL_KEYS - 1;
            bool          mine = false;
#pragma unroll
            for (int qi = 0; qi < NQ; qi++) mine = mine || (rs[qi] == s && rlo[qi] <= j1 && rhi[qi] >= j0);
            if (!gpu_any(mine)) continue; /* none of this wave's rows sees the tile */
            float sc[NQ][NKB][ACC]; /* Sᵀ: key 16 kb + amx_row(v) of the lane's query */
#pragma unroll
            for (int qi = 0; qi < NQ; qi++)
#pragma unroll
                for (int kb = 0; kb < NKB; kb++)
#pragma unroll
                    for (int v = 0; v < ACC; v++) sc[qi][kb][v] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < ND; kk++)
#pragma unroll
                for (int kb = 0; kb < NKB; kb++) {
                    uint32_t ka[HW]; /* key 16 kb + c at dimensions 16 kk + hk0 .. */
                    fla_words(ka, &ks[16 * kb + c][16 * kk + hk0]);
#pragma unroll
                    for (int qi = 0; qi < NQ; qi++) gpu_amx_hmma(sc[qi][kb], ka, qb[qi][kk]);
                }
#pragma unroll
            for (int qi = 0; qi < NQ; qi++) {
                float mx = -INFINITY;
#pragma unroll
                for (int kb = 0; kb < NKB; kb++)
#pragma unroll
                    for (int v = 0; v < ACC; v++) {
                        const int32_t j = j0 + 16 * kb + amx_row(K, lane, v);
                        if (!(rs[qi] == s && j >= rlo[qi] && j <= rhi[qi])) sc[qi][kb][v] = -INFINITY;
                        mx = fmaxf(mx, sc[qi][kb][v]);
                    }
#pragma unroll
                for (int off = 16; off < CELER_WARP; off *= 2) mx = fmaxf(mx, gpu_shfl_xor(mx, off));
                const float n = fmaxf(m[qi], mx), b = n == -INFINITY ? 0.0f : n; /* no key yet */
                const float f = exp2f(m[qi] - b);
                m[qi] = n, l[qi] *= f;
#pragma unroll
                for (int nd = 0; nd < ND; nd++)
#pragma unroll
                    for (int v = 0; v < ACC; v++) o[qi][nd][v] *= f;
#pragma unroll
                for (int kb = 0; kb < NKB; kb++)
#pragma unroll
                    for (int v = 0; v < ACC; v++) sc[qi][kb][v] = exp2f(sc[qi][kb][v] - b), l[qi] += sc[qi][kb][v];
            }
#pragma unroll
            for (int kb = 0; kb < NKB; kb++) {
                uint32_t pb[NQ][HW]; /* Pᵀ's 16 keys of the lane's query */
#pragma unroll
                for (int qi = 0; qi < NQ; qi++) fla_probs(pb[qi], sc[qi][kb]);
#pragma unroll
                for (int nd = 0; nd < ND; nd++) {
                    uint32_t va[HW]; /* dimension 16 nd + c at keys 16 kb + hk0 .. */
                    fla_words(va, &vt[16 * nd + c][16 * kb + hk0]);
#pragma unroll
                    for (int qi = 0; qi < NQ; qi++) gpu_amx_hmma(o[qi][nd], va, pb[qi]);
                }
            }
        }
    }
#pragma unroll
    for (int qi = 0; qi < NQ; qi++) { /* a query's sum is spread over the lane groups of its column */
        float sum = l[qi];
#pragma unroll
        for (int off = 16; off < CELER_WARP; off *= 2) sum += gpu_shfl_xor(sum, off);
        const int64_t t   = t0 + r0 + 16 * qi;
        const float   inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        float        *orow = out + (t * n_heads + h) * HD;
        if (t < T)
#pragma unroll
            for (int nd = 0; nd < ND; nd++)
#pragma unroll
                for (int v = 0; v < ACC; v++) orow[16 * nd + amx_row(K, lane, v)] = o[qi][nd][v] * inv;
    }
#else
    (void)q, (void)kc, (void)vc, (void)pos, (void)seq, (void)tables, (void)max_blocks, (void)block_size, (void)T;
    (void)n_heads, (void)n_kv_heads, (void)scale_log2, (void)window, (void)out;
#endif
}

#endif
