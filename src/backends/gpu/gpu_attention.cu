/* Attention over the paged KV cache on the GPU, for decode, and for prefill where the matrix
 * units cannot take it (gpu_flash.cu; gpu_flash_takes says when): one block per (token, key
 * head, split), serving the key head's query heads (up to a bound; more take more blocks) from
 * each key and value it loads — one block a query head read each key four times for Llama 3's
 * grouping. The block's warps take the visible keys of its split in turn, each keeping per head
 * an online softmax (running max and sum) and its share of the output row in registers, and the
 * warps' partial results are merged at the end; no score buffer grows with the context, and
 * tokens of different sequences and lengths share one launch (a continuous batch).
 *
 * Steps of few tokens (decode) split the keys over more blocks (att_split.h says how many): one
 * block walking 4,000 keys waits on memory at every few of them. Each split writes
 * its max, sum and unnormalized output, and the last split of each (token, block of heads) to
 * finish merges them in split order (or a second kernel, CELER_GPU_ATT_MERGE_IN=0). At short
 * contexts, whose keys fit a few passes of a 512-thread block, such steps run a wide block a
 * query head instead (celer_att_wide), in a few long splits, one block an SM
 * (celer_att_wide_split): the merge of many short splits of several heads cost more than walking
 * the keys.
 *
 * Head sizes that are a multiple of 32 also leave the output quantized for the o-projection's
 * integer kernels (held quantization, gpu_matvec.h): that product then skips its quantizer. */
#include "backends/gpu/gpu_att_mma.h"
#include "backends/gpu/gpu_kv.cuh"
#include "backends/gpu/gpu_matvec.h"
extern "C" {
#include "backends/gpu/att_split.h"
}

#include <math.h>

/* ATT_SPLITS_MAX: a block's heads' merge weights (GMAX of them, each up to this many splits)
 * fit its accumulators' shared memory; longer contexts take longer splits (att_split.h) */
enum { ATT_THREADS = 128, ATT_WIDE_THREADS = 512, HD_MAX = 512, ATT_SPLITS_MAX = 512 };

/* Value i of an output row (its first value is value base of the step's output), and with xo.q
 * its quantization for the o-projection (the X32 format, gpu_matvec.h): a warp's 32 lanes hold
 * 32 consecutive values of one block when the head size is a multiple of 32, the only case
 * that passes one. */
static __device__ __forceinline__ void put_out(float *o, int64_t i, float r, int64_t base, const gpu_xq_out &xo)
{
    o[i] = r;
    if (!xo.q) return;
    const float v[1] = {r};
    xq_put<1>(v, (int)(i % 32), (base + i) / 32, true, xo);
}

/* A warp's N partial sums (N a power of two up to the warp) summed over its lanes, every sum
 * left on every lane: N - 1 shuffles fold them so that lane l holds sum l % N, a few more add
 * the groups of N lanes, N broadcast them (where summing each alone takes 5 N). */
template <int N> static __device__ __forceinline__ void warp_sums(float (&v)[N], int lane)
{
#pragma unroll
    for (int r = N / 2; r >= 1; r /= 2) {
        const bool up = lane & r;
#pragma unroll
        for (int i = 0; i < r; i++) {
            const float send = up ? v[i] : v[i + r], keep = up ? v[i + r] : v[i];
            v[i]             = keep + gpu_shfl_xor(send, r);
        }
    }
    float s = v[0];
#pragma unroll
    for (int r = N; r < CELER_WARP; r *= 2) s += gpu_shfl_xor(s, r);
#pragma unroll
    for (int i = 0; i < N; i++) v[i] = gpu_shfl(s, i);
}

/* The cache slots of keys j0 .. j0 + K - 1 through the sequence's block table, -1 for those past
 * hi (none read: masked by the caller). One division for the run, the rest carried key by key (a
 * division a key, and its branch, were most of a warp's ~540 instructions before the wait). */
template <int K>
static __device__ __forceinline__ void att_slots(const int32_t *table, int32_t block_size, int32_t j0, int32_t hi,
                                                 int64_t (&slot)[K])
{
    int32_t blk = j0 <= hi ? j0 / block_size : 0, off = j0 - blk * block_size;
#pragma unroll
    for (int j = 0; j < K; j++) {
        slot[j] = j0 + j <= hi ? (int64_t)table[blk] * block_size + off : -1;
        if (++off == block_size) off = 0, blk++;
    }
}

/* Keys O .. O + K - 1 of a warp's pass and their values (zeros for a slot of -1) into those rows
 * of kr and vr: a lane's NV values of each row, VW consecutive ones at VW lane + VW · warp · c. */
template <int KPW, int NV, int VW, int O, int K, typename KT>
static __device__ __forceinline__ void att_load(const KT *__restrict__ kc, const KT *__restrict__ vc,
                                                const int64_t (&slot)[KPW], int64_t kw, int64_t off, int64_t hd,
                                                int lane, float (&kr)[KPW][NV], float (&vr)[KPW][NV])
{
#pragma unroll
    for (int j = O; j < O + K; j++) {
        const KT *kp = kc + slot[j] * kw + off, *vp = vc + slot[j] * kw + off;
#pragma unroll
        for (int c = 0; c < NV / VW; c++) {
            const int64_t i = VW * lane + VW * CELER_WARP * c; /* VW 2: wave64, heads up to 128 */
            if (i < hd && slot[j] >= 0) kv_get_n<VW>(kp + i, &kr[j][VW * c]), kv_get_n<VW>(vp + i, &vr[j][VW * c]);
            else
#pragma unroll
                for (int e = 0; e < VW; e++) kr[j][VW * c + e] = 0.0f, vr[j][VW * c + e] = 0.0f;
        }
    }
}

/* Keys j0 + O .. j0 + O + K - 1 (rows O .. of kr and vr; those past hi masked) into each of the
 * ng heads' online softmax: the running max m, sum l and unnormalized output acc. The running
 * max must be finite after the call: the first key of a call with O == 0 is live, and one with
 * O > 0 follows it. */
template <int O, int K, int KPW, int NV, int GMAX>
static __device__ __forceinline__ void att_keys(const float (&qv)[GMAX][NV], const float (&kr)[KPW][NV],
                                                const float (&vr)[KPW][NV], int32_t j0, int32_t hi, float scale,
                                                int ng, int lane, float (&acc)[GMAX][NV], float (&m)[GMAX],
                                                float (&l)[GMAX])
{
#pragma unroll
    for (int g = 0; g < GMAX; g++) {
        if (g >= ng) continue;
        float d[K];
#pragma unroll
        for (int j = 0; j < K; j++) {
            d[j] = 0.0f;
#pragma unroll
            for (int k = 0; k < NV; k++) d[j] += qv[g][k] * kr[O + j][k];
        }
        warp_sums<K>(d, lane);
        float mx = m[g];
#pragma unroll
        for (int j = 0; j < K; j++) d[j] = j0 + O + j <= hi ? d[j] * scale : -INFINITY, mx = fmaxf(mx, d[j]);
        const float corr = expf(m[g] - mx);
        l[g] *= corr;
#pragma unroll
        for (int k = 0; k < NV; k++) acc[g][k] *= corr;
#pragma unroll
        for (int j = 0; j < K; j++) {
            const float e = expf(d[j] - mx);
            l[g] += e;
#pragma unroll
            for (int k = 0; k < NV; k++) acc[g][k] += e * vr[O + j][k];
        }
        m[g] = mx;
    }
}

/* The outputs of heads row0 .. row0 + ng - 1 (rows of the step's output, consecutive): the merge
 * of each one's splits' partial results (split z's max, sum and hd unnormalized values at
 * part + (row · splits + z) · (hd + 2)), in split order, into out (and its quantization). All the
 * heads at once: warp w takes the maxima and sums of heads w, w + warps, ... (the loads of many
 * splits in flight) and leaves each split's weight in s_w (ng · splits floats) and each head's
 * sum in s_l; then each thread sums MERGE_OUTS outputs over the splits together, their loads in
 * flight at once — one chain of round trips to the L2 for all the heads, where one head after
 * another made a chain each (~20 µs a layer of the 8B after 512 tokens: 64 splits of 4 heads).
 * Each output's sum runs in split order: the same values as one head at a time. U: the splits a
 * thread's loads take at once (MERGE_OUTS · U loads in flight; 64 splits, 4 heads: 4 round
 * trips at 16, 8 at 8). P: how the partials are read (volatile: written by other blocks of the
 * running kernel, past this SM's L1). Every thread of the block calls it. */
enum { MERGE_OUTS = 4 };
template <int U, typename P>
static __device__ __forceinline__ void merge_heads(P *part, int64_t row0, int ng, int32_t splits, int64_t hd,
                                                   float *out, const gpu_xq_out &xo, float *s_w, float *s_l)
{
    const int     lane = threadIdx.x % CELER_WARP, wid = threadIdx.x / CELER_WARP, nw = blockDim.x / CELER_WARP;
    const int64_t st = hd + 2;
    const int     n = ng * (int)hd, d = (int)hd; /* at most GMAX heads of HD_MAX: 32-bit divisions */
    for (int g = wid; g < ng; g += nw) {
        P    *pr = part + (row0 + g) * splits * st;
        float M = -INFINITY, L = 0.0f;
        for (int32_t z = lane; z < splits; z += CELER_WARP) M = fmaxf(M, pr[z * st]);
        M = gpu_warp_max(M);
        for (int32_t z = lane; z < splits; z += CELER_WARP) {
            const float mz = pr[z * st], w = mz == -INFINITY ? 0.0f : expf(mz - M); /* -inf: no key there */
            s_w[g * splits + z] = w, L += pr[z * st + 1] * w;
        }
        L = gpu_warp_sum(L);
        if (lane == 0) s_l[g] = L;
    }
    __syncthreads();
    for (int r = threadIdx.x; r < n; r += MERGE_OUTS * (int)blockDim.x) {
        P           *pv[MERGE_OUTS];
        const float *wv[MERGE_OUTS];
        float        v[MERGE_OUTS];
        bool         live[MERGE_OUTS];
#pragma unroll
        for (int k = 0; k < MERGE_OUTS; k++) {
            const int rk = r + k * (int)blockDim.x, g = rk < n ? rk / d : 0, i = rk % d;
            live[k] = rk < n, v[k] = 0.0f;
            pv[k] = part + (row0 + g) * splits * st + 2 + i, wv[k] = s_w + g * splits;
        }
#pragma unroll U
        for (int32_t z = 0; z < splits; z++)
#pragma unroll
            for (int k = 0; k < MERGE_OUTS; k++)
                if (live[k]) v[k] += pv[k][z * st] * wv[k][z];
#pragma unroll
        for (int k = 0; k < MERGE_OUTS; k++) {
            if (!live[k]) continue;
            const int     rk = r + k * (int)blockDim.x, g = rk / d, i = rk % d;
            const int64_t row = row0 + g;
            const float   L  = s_l[g];
            put_out(out + row * hd, i, L > 0.0f ? v[k] / L : 0.0f, row * hd, xo);
        }
    }
}

/* Whether this block is the last of its gridDim.z splits to finish, which then merges them all:
 * each block takes a ticket from *count (one counter a (token, blockIdx.y)); the last resets it
 * to 0 for the next step, every other split having taken its ticket. Called by every thread. */
static __device__ __forceinline__ bool last_split(int32_t *count)
{
    __shared__ int s_last;
    __threadfence(); /* this block's partial results visible to the block that merges */
    __syncthreads();
    if (threadIdx.x == 0) {
        s_last = atomicAdd(count, 1) == (int32_t)gridDim.z - 1;
        if (s_last) *count = 0;
    }
    __syncthreads();
    if (!s_last) return false;
    __threadfence(); /* the other splits' results, seen after their tickets */
    return true;
}

/* HDC: the head-size class (128, 256 or 512; heads up to it, a multiple of 4). A lane holds NV
 * of a row's values, VW consecutive ones at VW lane + VW · warp · c (each load instruction of a
 * warp reads a contiguous run of the row); a block takes up to GMAX of one key head's query
 * heads, so that each key and value it loads serves all of them, GMAX · NV accumulators a lane. */
static constexpr __host__ __device__ int att_gmax(int hdc) { return 1024 / hdc; }

/* Split blockIdx.z of gridDim.z: keys [z · chunk, (z + 1) · chunk) of those visible (chunk 0: all,
 * one split), for the query heads g0 .. g0 + ng of key head kvh, hpb a block (blockIdx.y = kvh ·
 * hg + g0 / hpb; att_split.h chooses hpb, at most GMAX). Each warp takes KPW keys at a time
 * (loaded before any is used), keeping per head an online softmax (running max and sum) and its
 * share of the output row; the warps' results are merged at the end. With part (splits), out is
 * not written: part holds per (token, head, split) the max, the sum and the hd unnormalized
 * outputs. THREADS: the block's; GM: the most heads a block serves (att_gmax, or 1 for the wide
 * blocks of short contexts: att_split.h's celer_att_wide). */
template <int HDC, typename KT, int THREADS = ATT_THREADS, int GM = att_gmax(HDC)>
__global__ void __launch_bounds__(THREADS) k_attention(
    const float *__restrict__ q, const KT *__restrict__ kc, const KT *__restrict__ vc,
    const int32_t *__restrict__ pos, const int32_t *__restrict__ seq, const int32_t *__restrict__ tables,
    int32_t max_blocks, int32_t block_size, int64_t n_heads, int64_t n_kv_heads, int64_t hd, float scale,
    int32_t window, int32_t hpb, int32_t chunk, float *__restrict__ part, float *__restrict__ out, gpu_xq_out xo,
    int32_t *count)
{
    gpu_dep_deferred(); /* the token's position and sequence, uploaded before the step's kernels, are read first */
    constexpr int GMAX = GM, NV = HDC / CELER_WARP, VW = NV < 4 ? NV : 4, NC = NV / VW;
    constexpr int KPW = 32 / NV, MAX_WARPS = THREADS / 32;
    __shared__ float s_m[MAX_WARPS][GMAX], s_l[MAX_WARPS][GMAX], s_acc[MAX_WARPS][GMAX][HDC];
    /* head indices in 32 bits (n_heads is at most GPU_MAX_GRID_YZ: gpu_attention): 64-bit ones took
     * the division routine's calls */
    const int        G = (int)n_heads / (int)n_kv_heads, hg = (G + hpb - 1) / hpb;
    const int64_t    kw = n_kv_heads * hd, t = blockIdx.x;
    const int        kvh = (int)blockIdx.y / hg, g0 = (int)blockIdx.y % hg * hpb;
    const int        ng = (int)(G - g0 < hpb ? G - g0 : hpb); /* hpb <= GMAX */
    const int        lane = threadIdx.x % CELER_WARP, wid = threadIdx.x / CELER_WARP, nw = blockDim.x / CELER_WARP;
    const int64_t    h0 = kvh * G + g0; /* the block's first query head */
    const int32_t    p = pos[t], lo0 = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
    const int32_t    z = blockIdx.z, lo = chunk && z * chunk > lo0 ? z * chunk : lo0;
    const int32_t    hi = chunk && (z + 1) * chunk - 1 < p ? (z + 1) * chunk - 1 : p; /* this split's last key */
    const int32_t   *table = tables + (int64_t)seq[t] * max_blocks;
    /* the cache slots of the warp's first keys, from the block table (uploaded with the positions)
     * before the wait: after it the keys' loads wait on nothing else */
    int64_t slot[KPW];
    int32_t j0 = lo + wid * KPW;
    att_slots<KPW>(table, block_size, j0, hi, slot);
    gpu_dep_enter(); /* the kernel before wrote q and this step's keys and values */
    float kr[KPW][NV], vr[KPW][NV];
    if (j0 <= hi) att_load<KPW, NV, VW, 0, KPW>(kc, vc, slot, kw, kvh * hd, hd, lane, kr, vr); /* in flight */
    float qv[GMAX][NV], acc[GMAX][NV], m[GMAX], l[GMAX];
#pragma unroll
    for (int g = 0; g < GMAX; g++) {
        const float *qr = q + (t * n_heads + h0 + (g < ng ? g : 0)) * hd;
        m[g] = -INFINITY, l[g] = 0.0f;
#pragma unroll
        for (int c = 0; c < NC; c++)
#pragma unroll
            for (int e = 0; e < VW; e++) {
                const int64_t i = VW * lane + VW * CELER_WARP * c + e;
                qv[g][VW * c + e] = i < hd ? qr[i] : 0.0f, acc[g][VW * c + e] = 0.0f;
            }
    }
    /* two halves of KH keys: the next pass's first half loads while this one's second is used */
    constexpr int KH = KPW > 1 ? KPW / 2 : 1;
    for (; j0 <= hi; j0 += nw * KPW) {
        const int32_t jn = j0 + nw * KPW;
        att_slots<KPW>(table, block_size, jn, hi, slot); /* the next keys' (loads in flight) */
        att_keys<0, KH>(qv, kr, vr, j0, hi, scale, ng, lane, acc, m, l);
        if (jn <= hi) att_load<KPW, NV, VW, 0, KH>(kc, vc, slot, kw, kvh * hd, hd, lane, kr, vr);
        if constexpr (KPW > KH) {
            if (j0 + KH <= hi) att_keys<KH, KPW - KH>(qv, kr, vr, j0, hi, scale, ng, lane, acc, m, l);
            if (jn <= hi) att_load<KPW, NV, VW, KH, KPW - KH>(kc, vc, slot, kw, kvh * hd, hd, lane, kr, vr);
        }
    }
#pragma unroll
    for (int g = 0; g < GMAX; g++) {
        if (lane == 0) s_m[wid][g] = m[g], s_l[wid][g] = l[g];
#pragma unroll
        for (int c = 0; c < NC; c++)
#pragma unroll
            for (int e = 0; e < VW; e++) {
                const int64_t i = VW * lane + VW * CELER_WARP * c + e;
                if (i < hd) s_acc[wid][g][i] = acc[g][VW * c + e];
            }
    }
    __syncthreads();
    for (int r = threadIdx.x; r < ng * (int)hd; r += blockDim.x) { /* consecutive threads, consecutive values */
        const int     g = r / (int)hd;
        const int64_t i = r % (int)hd, h = h0 + g;
        float         M = -INFINITY, L = 0.0f, v = 0.0f;
        for (int w = 0; w < nw; w++) M = fmaxf(M, s_m[w][g]);
        for (int w = 0; w < nw; w++) {
            const float f = M == -INFINITY ? 0.0f : expf(s_m[w][g] - M); /* max -inf: no key here */
            L += s_l[w][g] * f, v += s_acc[w][g][i] * f;
        }
        if (part) { /* this split's max, sum and unnormalized output */
            float *pr = part + ((t * n_heads + h) * gridDim.z + z) * (hd + 2);
            if (i == 0) pr[0] = M, pr[1] = L;
            pr[2 + i] = v;
        } else
            put_out(out + (t * n_heads + h) * hd, i, L > 0.0f ? v / L : 0.0f, (t * n_heads + h) * hd, xo);
    }
    if constexpr (GM == 1 && HDC == 512) return; /* never split (att_wide_split): the merge spilled */
    if (!part || !count) return;                 /* one split, or k_attention_merge merges them */
    if (!last_split(count + t * gridDim.y + blockIdx.y)) return;
    static_assert(MAX_WARPS * HDC >= ATT_SPLITS_MAX, "the heads' merge weights fit s_acc, free now");
    /* 16 splits' loads of each output in flight (the heads of 512: 8, which left it 168 registers) */
    merge_heads<HDC == 512 ? 8 : 16>((const volatile float *)part, t * n_heads + h0, ng, (int32_t)gridDim.z, hd, out,
                                     xo, &s_acc[0][0][0], &s_m[0][0]);
}

/* out (token, head) = the merge of its splits (at most ATT_SPLITS_MAX): one block a (token,
 * head). */
__global__ void k_attention_merge(const float *__restrict__ part, int32_t splits, int64_t hd, float *__restrict__ out,
                                  gpu_xq_out xo)
{
    gpu_dep_enter();
    __shared__ float s_w[ATT_SPLITS_MAX], s_l[1];
    merge_heads<16>(part, (int64_t)blockIdx.x, 1, splits, hd, out, xo, s_w, s_l);
}

/* Decode attention a group of lanes a key: one block of ATT_THREADS a (token, query head, split).
 * In each warp LPK = HDC / 16 lanes take a key, 16 of its values a lane (four 4-value loads, each
 * a contiguous run of the row across the group), so a warp scores CELER_WARP / LPK keys at once
 * and sums each over log2(LPK) shuffles, where k_attention spreads a key over the whole warp.
 * Each group keeps an online softmax over its keys (KP a pass, loaded before any is used; the
 * next pass's cache slots read while this one's are used), merged with the others' at the
 * end; the splits merge as k_attention's do. A block serves one query head: the L2, not the
 * block, serves a key head's keys to its other query heads. The arguments are k_attention's
 * (hpb unused: 1). */
template <int HDC, typename KT>
__global__ void __launch_bounds__(ATT_THREADS) k_attention_lanes(
    const float *__restrict__ q, const KT *__restrict__ kc, const KT *__restrict__ vc,
    const int32_t *__restrict__ pos, const int32_t *__restrict__ seq, const int32_t *__restrict__ tables,
    int32_t max_blocks, int32_t block_size, int64_t n_heads, int64_t n_kv_heads, int64_t hd, float scale,
    int32_t window, int32_t hpb, int32_t chunk, float *__restrict__ part, float *__restrict__ out, gpu_xq_out xo,
    int32_t *count)
{
    gpu_dep_deferred(); /* the token's position and sequence, uploaded before the step's kernels, are read first */
    constexpr int NV = 16, LPK = HDC / NV, KP = 2, GROUPS = ATT_THREADS / LPK;
    __shared__ float s_m[GROUPS], s_l[GROUPS], s_acc[GROUPS][HDC];
    (void)hpb;
    const int64_t t = blockIdx.x, h = blockIdx.y, kvh = (int)h / ((int)n_heads / (int)n_kv_heads), kw = n_kv_heads * hd;
    const int     r = threadIdx.x % LPK, grp = threadIdx.x / LPK; /* lane r of group grp */
    const int     wgrp = threadIdx.x / CELER_WARP * (CELER_WARP / LPK); /* the warp's first group */
    const int32_t p = pos[t], lo0 = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
    const int32_t z = blockIdx.z, lo = chunk && z * chunk > lo0 ? z * chunk : lo0;
    const int32_t hi = chunk && (z + 1) * chunk - 1 < p ? (z + 1) * chunk - 1 : p; /* this split's last key */
    const int32_t *table = tables + (int64_t)seq[t] * max_blocks;
    /* the warp walks while its first group has keys (every lane of a warp takes part in the
     * shuffles); a group past hi reads nothing (slot -1) and keeps an empty softmax */
    int64_t slot[KP];
    int32_t j0 = lo + grp * KP, jw = lo + wgrp * KP;
    att_slots<KP>(table, block_size, j0, hi, slot);
    gpu_dep_enter(); /* the kernel before wrote q and this step's keys and values */
    const int64_t off = kvh * hd;
    float         kr[KP][NV], vr[KP][NV];
    auto          load = [&](int k) {
#pragma unroll
        for (int c = 0; c < NV / 4; c++) {
            const int64_t i = 4 * r + 4 * LPK * c;
            if (i < hd && slot[k] >= 0) kv_get_n<4>(kc + slot[k] * kw + off + i, &kr[k][4 * c]),
                                        kv_get_n<4>(vc + slot[k] * kw + off + i, &vr[k][4 * c]);
            else
#pragma unroll
                for (int e = 0; e < 4; e++) kr[k][4 * c + e] = 0.0f, vr[k][4 * c + e] = 0.0f;
        }
    };
    if (jw <= hi)
#pragma unroll
        for (int k = 0; k < KP; k++) load(k);
    float        qv[NV], acc[NV], m = -INFINITY, l = 0.0f;
    const float *qr = q + (t * n_heads + h) * hd;
#pragma unroll
    for (int c = 0; c < NV / 4; c++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int64_t i = 4 * r + 4 * LPK * c + e;
            qv[4 * c + e] = i < hd ? qr[i] : 0.0f, acc[4 * c + e] = 0.0f;
        }
    const int32_t step = GROUPS * KP;
    for (; jw <= hi; j0 += step, jw += step) {
        att_slots<KP>(table, block_size, j0 + step, hi, slot); /* the next keys' (loads in flight) */
        float d[KP];
#pragma unroll
        for (int k = 0; k < KP; k++) {
            d[k] = 0.0f;
#pragma unroll
            for (int v = 0; v < NV; v++) d[k] += qv[v] * kr[k][v];
#pragma unroll
            for (int o = 1; o < LPK; o *= 2) d[k] += gpu_shfl_xor(d[k], o);
        }
        float mx = m;
#pragma unroll
        for (int k = 0; k < KP; k++) d[k] = j0 + k <= hi ? d[k] * scale : -INFINITY, mx = fmaxf(mx, d[k]);
        if (mx != -INFINITY) { /* the group has seen a key */
            const float corr = expf(m - mx);
            l *= corr;
#pragma unroll
            for (int v = 0; v < NV; v++) acc[v] *= corr;
#pragma unroll
            for (int k = 0; k < KP; k++) {
                const float e = expf(d[k] - mx);
                l += e;
#pragma unroll
                for (int v = 0; v < NV; v++) acc[v] += e * vr[k][v];
            }
            m = mx;
        }
        if (jw + step <= hi)
#pragma unroll
            for (int k = 0; k < KP; k++) load(k);
    }
    if (r == 0) s_m[grp] = m, s_l[grp] = l;
#pragma unroll
    for (int c = 0; c < NV / 4; c++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int64_t i = 4 * r + 4 * LPK * c + e;
            if (i < hd) s_acc[grp][i] = acc[4 * c + e];
        }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) { /* consecutive threads, consecutive values */
        float M = -INFINITY, L = 0.0f, v = 0.0f;
        for (int w = 0; w < GROUPS; w++) M = fmaxf(M, s_m[w]);
        for (int w = 0; w < GROUPS; w++) {
            const float f = M == -INFINITY ? 0.0f : expf(s_m[w] - M); /* max -inf: no key here */
            L += s_l[w] * f, v += s_acc[w][i] * f;
        }
        if (part) { /* this split's max, sum and unnormalized output */
            float *pr = part + ((t * n_heads + h) * gridDim.z + z) * (hd + 2);
            if (i == 0) pr[0] = M, pr[1] = L;
            pr[2 + i] = v;
        } else
            put_out(out + (t * n_heads + h) * hd, i, L > 0.0f ? v / L : 0.0f, (t * n_heads + h) * hd, xo);
    }
    if (!part || !count) return; /* one split, or k_attention_merge merges them */
    if (!last_split(count + t * gridDim.y + blockIdx.y)) return;
    static_assert(GROUPS * HDC >= ATT_SPLITS_MAX, "the merge weights fit s_acc, free now");
    merge_heads<8>((const volatile float *)part, t * n_heads + h, 1, (int32_t)gridDim.z, hd, out, xo, &s_acc[0][0],
                    &s_l[0]);
}

/* One launch of k_attention for the head-size class hdc over the cache's pools of values KT: with
 * part (chunk > 0) its splits' partial results, else out and its quantization; wide: the blocks
 * of one query head (hpb 1). */
template <typename KT>
static celer_status att_launch(gpu_backend *g, int hdc, dim3 grid, const float *q, const celer_kv_cache *kv,
                               int32_t layer, const int32_t *pos, const int32_t *seq, const int32_t *tables,
                               const celer_attn *a, bool wide, bool lanes, int32_t hpb, int32_t chunk, float *part,
                               float *out, gpu_xq_out xo, int32_t *count, celer_error *err)
{
    typedef void (*fn_t)(const float *, const KT *, const KT *, const int32_t *, const int32_t *, const int32_t *,
                         int32_t, int32_t, int64_t, int64_t, int64_t, float, int32_t, int32_t, int32_t, float *,
                         float *, gpu_xq_out, int32_t *);
    constexpr int W = ATT_WIDE_THREADS, T = ATT_THREADS;
    /* heads of 128 values: the kernel for 2 or 4 heads a block where that is all a block serves
     * (ptxas, sm_90: 148 / 168 registers against 208 for 8: 3 blocks an SM instead of 2) */
    const fn_t narrow = hdc == 128   ? (hpb <= 2 ? k_attention<128, KT, T, 2> : hpb <= 4 ? k_attention<128, KT, T, 4>
                                                                                 : k_attention<128, KT>)
                        : hdc == 256 ? k_attention<256, KT>
                                     : k_attention<512, KT>;
    const fn_t    broad  = hdc == 128   ? k_attention<128, KT, W, 1>
                           : hdc == 256 ? k_attention<256, KT, W, 1>
                                        : k_attention<512, KT, W, 1>;
    const fn_t    by_lanes = hdc == 128 ? k_attention_lanes<128, KT> : k_attention_lanes<256, KT>; /* not 512 */
    const fn_t    fn = wide ? broad : lanes ? by_lanes : narrow;
    const int     threads = wide ? W : ATT_THREADS;
    return GPU_LAUNCH(g, err, "attention", fn, grid, threads, 0, q, (const KT *)kv->k[layer],
                      (const KT *)kv->v[layer], pos, seq, tables, kv->max_blocks, kv->block_size, a->n_heads,
                      a->n_kv_heads, a->head_dim, a->scale, a->window, hpb, chunk, part, out, xo, count);
}

/* The furthest position of b's tokens. */
static int32_t att_far(const celer_batch *b)
{
    int32_t far = 0;
    for (int64_t i = 0; i < b->n_tokens; i++) far = b->pos[i] > far ? b->pos[i] : far;
    return far;
}

/* Whether a step of b whose furthest position is far takes the wide blocks (celer_att_wide) for
 * heads of the class hdc. */
static bool att_wide(const gpu_backend *g, const celer_batch *b, const celer_attn *a, int hdc, int32_t far)
{
    /* a lane holds hdc / warp values of a row, a warp 32 / that keys at once */
    return !g->att_chunk && celer_att_wide(far, b->n_tokens * a->n_heads, a->n_heads / a->n_kv_heads,
                                           ATT_WIDE_THREADS * 32 / hdc, g->att_wide);
}

/* The split of a wide step (celer_att_wide_split; heads of up to 256 values: the wide kernel of
 * 512 compiles no merge). */
static celer_att_split att_wide_split(const gpu_backend *g, int32_t far, int64_t rows, int hdc)
{
    return celer_att_wide_split(far, rows, ATT_WIDE_THREADS * 32 / hdc, g->prop.multiProcessorCount);
}

static int att_class(const celer_attn *a) { return a->head_dim <= 128 ? 128 : a->head_dim <= 256 ? 256 : 512; }

celer_status gpu_attention(celer_backend *be, const float *q, const celer_kv_cache *kv, int32_t layer,
                           const celer_batch *b, const celer_attn *a, float *out, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (a->n_kv_heads <= 0 || a->n_heads % a->n_kv_heads || a->head_dim != kv->head_dim_k ||
        kv->head_dim_v != kv->head_dim_k || a->head_dim > HD_MAX || a->head_dim % 4 || a->n_heads > GPU_MAX_GRID_YZ)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: attention with %lld heads over %lld kv heads of %lld/%lld "
                          "(the kernel takes head sizes of 4s up to %d)", CELER_GPU_NAME, (long long)a->n_heads,
                          (long long)a->n_kv_heads, (long long)kv->head_dim_k, (long long)kv->head_dim_v, HD_MAX);
    if (gpu_kv_check(kv, b, true, err)) return err->code;
    if (b->n_tokens <= 0) return CELER_OK;
    if (b->n_tokens > GPU_MAX_GRID_X)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: attention over %lld tokens", CELER_GPU_NAME,
                          (long long)b->n_tokens);
    const int32_t *pos, *seq, *tables;
    if (gpu_batch_upload(g, b, kv, &pos, &seq, &tables, err)) return err->code;
    if (gpu_flash_takes(g, b, a)) return gpu_flash_attention(g, q, kv, layer, pos, seq, tables, b, a, out, err);
    /* blocks of up to GMAX query heads of one key head; few of them: split the keys by the
     * furthest position, or at a short context every key in one pass of a wide block a query head */
    const int     hdc  = att_class(a);
    const int64_t G    = a->n_heads / a->n_kv_heads, rows = b->n_tokens * a->n_heads;
    const int32_t far  = att_far(b);
    const bool    wide = att_wide(g, b, a, hdc, far);
    /* steps of few rows that do not take the wide blocks: a block a query head, a lane group a key
     * (heads of up to 256 values: at 512 a group is a warp, k_attention's own shape) */
    const bool            lanes = !wide && rows < ATT_SPLIT_BELOW && hdc < 512;
    const int32_t         hpb = wide || lanes ? 1 : celer_att_heads_for(far, b->n_tokens, a->n_kv_heads, G, att_gmax(hdc));
    const int64_t         hy  = a->n_kv_heads * ((G + hpb - 1) / hpb);
    const bool            whole = !wide && !g->att_chunk && celer_att_whole(far, rows); /* a batch's keys */
    const celer_att_split sp  = whole      ? celer_att_split{0, 1}
                                : !wide    ? celer_att_split_for(far, b->n_tokens * hy, g->att_chunk, ATT_SPLITS_MAX)
                                : hdc < 512 ? att_wide_split(g, far, rows, hdc)
                                            : celer_att_split{0, 1};
    const int32_t         splits = sp.splits;
    const dim3            grid((unsigned)b->n_tokens, (unsigned)hy, (unsigned)splits);
    /* the output quantized on the way out for the o-projection that reads it next */
    gpu_xq_out xo = {NULL, NULL, false};
    const bool qz = a->head_dim % 32 == 0;
    if (qz && gpu_xq_buffer(g, rows * a->head_dim, &xo, err)) return err->code;
    /* the splits' buffer, sized for the furthest position the cache holds: a longer context
     * (more splits) must not move it, and with it every recorded step, in the middle of a decode */
    const int32_t         far_max = kv->max_blocks * kv->block_size - 1;
    const int32_t         hpb_max = celer_att_heads_for(far_max, b->n_tokens, a->n_kv_heads, G, att_gmax(hdc));
    const int64_t         hy_max  = a->n_kv_heads * ((G + hpb_max - 1) / hpb_max);
    const celer_att_split sp_max  = celer_att_split_for(far_max, b->n_tokens * hy_max, g->att_chunk, ATT_SPLITS_MAX);
    const int64_t         most    = sp_max.splits > splits ? sp_max.splits : splits;
    if (most > 1 && gpu_buf_reserve(g, &g->d_attn, (size_t)(rows * most * (a->head_dim + 2)) * sizeof(float), err))
        return err->code;
    /* with splits the kernel leaves partial results and the merge writes the output: the last
     * split of each (token, block of heads), whose tickets (at most ATT_SPLIT_BELOW of them: a step
     * splits only below that many rows) start at 0 (gpu_alloc zeroes fresh memory), or under
     * CELER_GPU_ATT_MERGE_IN=0 a kernel of its own (one launch more a layer: 8B tg128 -2% on the H200) */
    const bool in   = splits > 1 && g->att_merge_in;
    float     *part = splits > 1 ? (float *)g->d_attn.p : NULL;
    /* reserved with the splits' buffer, not at the first split: that step (its context past what
     * one wide block takes) replays a recorded decode step, and would allocate inside it */
    if (most > 1 && g->att_merge_in &&
        gpu_buf_reserve(g, &g->d_att_count, ATT_SPLIT_BELOW * sizeof(int32_t), err))
        return err->code;
    gpu_xq_out    kxo   = xo; /* the attention kernel's: none when a kernel of its own merges */
    if (splits > 1 && !in) kxo.q = NULL, kxo.dd = NULL;
    int32_t      *count = in ? (int32_t *)g->d_att_count.p : NULL;
    const int32_t ch    = splits > 1 ? sp.chunk : 0;
    if (!wide && gpu_att_mma_takes(g, kv, a, far, rows)) { /* a batch: one split, on the matrix units */
        if (gpu_att_mma(g, q, kv, layer, pos, seq, tables, b, a, out, xo, err)) return err->code;
        if (qz) gpu_xq_held(g, out, rows * a->head_dim, xo);
        return CELER_OK;
    }
    if (kv->elem_bytes == 2 ? att_launch<uint16_t>(g, hdc, grid, q, kv, layer, pos, seq, tables, a, wide, lanes, hpb, ch,
                                                   part, out, kxo, count, err)
                            : att_launch<float>(g, hdc, grid, q, kv, layer, pos, seq, tables, a, wide, lanes, hpb, ch,
                                                part, out, kxo, count, err))
        return err->code;
    if (splits > 1 && !in &&
        GPU_LAUNCH(g, err, "attention merge", k_attention_merge, (unsigned)rows, ATT_THREADS, 0, (const float *)part,
                   splits, a->head_dim, out, xo))
        return err->code;
    if (qz) gpu_xq_held(g, out, rows * a->head_dim, xo);
    return CELER_OK;
}
