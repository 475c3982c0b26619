/* Attention over the paged KV cache on the GPU, for prefill and decode alike: one block per
 * (token, query head). The block's warps take the visible keys in turn, each keeping an online
 * softmax (running max and sum) and its share of the output row in registers, and the warps'
 * partial results are merged at the end; no score buffer grows with the context, and tokens of
 * different sequences and lengths share one launch (a continuous batch). */
#include "backends/gpu/gpu_backend.h"

#include <math.h>

enum { ATT_THREADS = 128, HD_MAX = 512 };

__global__ void k_attention(const float *__restrict__ q, const float *__restrict__ kc, const float *__restrict__ vc,
                            const int32_t *__restrict__ pos, const int32_t *__restrict__ seq,
                            const int32_t *__restrict__ tables, int32_t max_blocks, int32_t block_size,
                            int64_t n_heads, int64_t n_kv_heads, int64_t hd, float scale, int32_t window,
                            float *__restrict__ out)
{
    enum { PER = HD_MAX / CELER_WARP, MAX_WARPS = ATT_THREADS / 32 };
    __shared__ float s_m[MAX_WARPS], s_l[MAX_WARPS], s_acc[MAX_WARPS][HD_MAX];
    const int64_t t = blockIdx.x, h = blockIdx.y, kvh = h / (n_heads / n_kv_heads), kw = n_kv_heads * hd;
    const int     lane = threadIdx.x % CELER_WARP, wid = threadIdx.x / CELER_WARP, nw = blockDim.x / CELER_WARP;
    const float  *qr = q + (t * n_heads + h) * hd;
    float         qv[PER], acc[PER];
#pragma unroll
    for (int k = 0; k < PER; k++) {
        const int64_t i = lane + (int64_t)k * CELER_WARP;
        qv[k] = i < hd ? qr[i] : 0.0f, acc[k] = 0.0f;
    }
    const int32_t  p = pos[t], lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
    const int32_t *table = tables + (int64_t)seq[t] * max_blocks;
    float          m = -INFINITY, l = 0.0f;
    for (int32_t j = lo + wid; j <= p; j += nw) {
        const int64_t slot = (int64_t)table[j / block_size] * block_size + j % block_size;
        const float  *kr = kc + slot * kw + kvh * hd, *vr = vc + slot * kw + kvh * hd;
        float         d  = 0.0f;
#pragma unroll
        for (int k = 0; k < PER; k++) {
            const int64_t i = lane + (int64_t)k * CELER_WARP;
            if (i < hd) d += qv[k] * kr[i];
        }
        d                = gpu_warp_sum(d) * scale;
        const float mn   = fmaxf(m, d);
        const float corr = expf(m - mn), e = expf(d - mn);
        l                = l * corr + e;
#pragma unroll
        for (int k = 0; k < PER; k++) {
            const int64_t i = lane + (int64_t)k * CELER_WARP;
            if (i < hd) acc[k] = acc[k] * corr + e * vr[i];
        }
        m = mn;
    }
    if (lane == 0) s_m[wid] = m, s_l[wid] = l;
#pragma unroll
    for (int k = 0; k < PER; k++) {
        const int64_t i = lane + (int64_t)k * CELER_WARP;
        if (i < hd) s_acc[wid][i] = acc[k];
    }
    __syncthreads();
    float M = -INFINITY, L = 0.0f;
    for (int w = 0; w < nw; w++) M = fmaxf(M, s_m[w]);
    for (int w = 0; w < nw; w++) L += s_l[w] * expf(s_m[w] - M);
    float *o = out + (t * n_heads + h) * hd;
    for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
        float v = 0.0f;
        for (int w = 0; w < nw; w++) v += s_acc[w][i] * expf(s_m[w] - M);
        o[i] = L > 0.0f ? v / L : 0.0f;
    }
}

celer_status gpu_attention(celer_backend *be, const float *q, const celer_kv_cache *kv, int32_t layer,
                           const celer_batch *b, const celer_attn *a, float *out, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (a->n_kv_heads <= 0 || a->n_heads % a->n_kv_heads || a->head_dim != kv->head_dim_k ||
        kv->head_dim_v != kv->head_dim_k || a->head_dim > HD_MAX || a->n_heads > GPU_MAX_GRID_YZ)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: attention with %lld heads over %lld kv heads of %lld/%lld "
                          "(the kernel takes head sizes up to %d)", CELER_GPU_NAME, (long long)a->n_heads,
                          (long long)a->n_kv_heads, (long long)kv->head_dim_k, (long long)kv->head_dim_v, HD_MAX);
    if (gpu_kv_check(kv, b, true, err)) return err->code;
    if (b->n_tokens <= 0) return CELER_OK;
    if (b->n_tokens > GPU_MAX_GRID_X)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: attention over %lld tokens", CELER_GPU_NAME,
                          (long long)b->n_tokens);
    const int32_t *pos, *seq, *tables;
    if (gpu_batch_upload(g, b, kv, &pos, &seq, &tables, err)) return err->code;
    return GPU_LAUNCH(g, err, "attention", k_attention, dim3((unsigned)b->n_tokens, (unsigned)a->n_heads),
                      ATT_THREADS, 0, q, kv->k[layer], kv->v[layer], pos, seq, tables, kv->max_blocks,
                      kv->block_size, a->n_heads, a->n_kv_heads, a->head_dim, a->scale, a->window, out);
}
