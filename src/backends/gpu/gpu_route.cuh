/* MoE routing of one token by a group of 32 lanes (gpu_moe.cu's routing kernel, and the fused
 * router of gpu_matvec_plain.cu). */
#ifndef CELER_BACKENDS_GPU_GPU_ROUTE_CUH
#define CELER_BACKENDS_GPU_GPU_ROUTE_CUH

#include "backends/gpu/gpu_vendor.h"

#include <math.h>

/* Each lane a stride of the experts: the CPU's selection, on probabilities computed the same way
 * (the same max, the same expf of each logit; only the softmax's sum is added in another order).
 * A lane keeps the probabilities of its first ROUTE_HELD experts in registers (every expert of up
 * to 256) and recomputes the others' at each choice. One thread a token walked 128 experts K + 2
 * times (~50 us a layer for Qwen3-30B-A3B); recomputing every expf at each of the K choices left
 * it at ~8 us. */
enum { ROUTE_HELD = 8 };

/* The best of lane's experts after (last_p, last_e) in (p desc, e asc) order into (*best, *best_p). */
static __device__ __forceinline__ void route_pick(float p, int e, float last_p, int last_e, int *best, float *best_p)
{
    const bool after = p < last_p || (p == last_p && e > last_e);
    if (after && (*best < 0 || p > *best_p)) *best = e, *best_p = p;
}

/* The token's K choices from its E logits l (most probable first, ties to the lower index) into
 * ids[0 .. K) and their weights into w (renorm: over the K); every lane of the group calls, lane
 * 0 writes when live. P: the logits' pointer type (volatile where other blocks wrote them). */
template <typename P>
static __device__ __forceinline__ void gpu_route_token(P l, int64_t E, int64_t K, int renorm, int lane, bool live,
                                                       int32_t *ids, float *w)
{
    float mx = l[0], sum = 0.0f, kept = 0.0f, held[ROUTE_HELD];
#pragma unroll
    for (int i = 0; i < ROUTE_HELD; i++) /* the held logits' loads in flight together */
        held[i] = lane + 32 * i < E ? l[lane + 32 * i] : mx;
#pragma unroll
    for (int i = 0; i < ROUTE_HELD; i++) mx = held[i] > mx ? held[i] : mx;
    for (int64_t e = lane + 32 * ROUTE_HELD; e < E; e += 32) mx = l[e] > mx ? l[e] : mx;
    for (int m = 16; m > 0; m >>= 1) {
        const float o = gpu_shfl_xor(mx, m);
        mx            = o > mx ? o : mx;
    }
#pragma unroll
    for (int i = 0; i < ROUTE_HELD; i++) {
        held[i] = lane + 32 * i < E ? expf(held[i] - mx) : 0.0f;
        sum += held[i];
    }
    for (int64_t e = lane + 32 * ROUTE_HELD; e < E; e += 32) sum += expf(l[e] - mx);
    sum = gpu_group32_sum(sum);
    float last_p = INFINITY;
    int   last_e = -1;
    for (int64_t j = 0; j < K; j++) { /* the best after (last_p, last_e) */
        int   best   = -1;
        float best_p = 0.0f;
#pragma unroll
        for (int i = 0; i < ROUTE_HELD; i++)
            if (lane + 32 * i < E) route_pick(held[i], lane + 32 * i, last_p, last_e, &best, &best_p);
        for (int64_t e = lane + 32 * ROUTE_HELD; e < E; e += 32)
            route_pick(expf(l[e] - mx), (int)e, last_p, last_e, &best, &best_p);
        /* the group's best: the largest probability (p in [0, 1]: its bits order as unsigned
         * integers; a lane without a candidate offers 0), then the lowest index holding it — two
         * group reductions where a butterfly of (p, e) pairs took five rounds of two shuffles */
        const unsigned key = best >= 0 ? __float_as_uint(best_p) + 1u : 0u, top = gpu_group32_max_u32(key);
        best   = top ? (int)gpu_group32_min_u32(key == top ? (unsigned)best : 0xffffffffu) : -1;
        best_p = top ? __uint_as_float(top - 1u) : 0.0f;
        const float wj = best_p / sum; /* the same in every lane (so are best and sum) */
        if (live && j % 32 == lane) ids[j] = best, w[j] = wj;
        kept += wj;
        last_p = best_p, last_e = best;
    }
    if (renorm && live) /* each lane its own choices: reads of its own writes, one round trip */
        for (int64_t j = lane; j < K; j += 32) w[j] /= kept;
}

#endif
