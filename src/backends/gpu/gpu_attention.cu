/* Attention over the paged KV cache on the GPU, for decode, and for prefill where the matrix
 * units cannot take it (gpu_flash.cu; gpu_flash_takes says when): one block per
 * (token, query head, split). The block's warps take the visible keys of its split in turn, each
 * keeping an online softmax (running max and sum) and its share of the output row in registers,
 * and the warps' partial results are merged at the end; no score buffer grows with the context,
 * and tokens of different sequences and lengths share one launch (a continuous batch).
 *
 * Steps of few tokens (decode) split the keys over more blocks (att_split.h says how many): one
 * block walking 4,000 keys four warps at a time waits on memory at every key. Each split writes
 * its max, sum and unnormalized output, and a second kernel merges the splits of each (token,
 * head) in split order.
 *
 * Head sizes that are a multiple of 32 also leave the output quantized for the o-projection's
 * integer kernels (held quantization, gpu_matvec.h): that product then skips its quantizer. */
#include "backends/gpu/gpu_matvec.h"
extern "C" {
#include "backends/gpu/att_split.h"
}

#include <math.h>

enum { ATT_THREADS = 128, HD_MAX = 512 };

/* Value i of an output row (its first value is value base of the step's output), and with xq
 * its quantization for the o-projection (the X32 format, gpu_matvec.h): a warp's 32 lanes hold
 * 32 consecutive values of one block when the head size is a multiple of 32, the only case
 * that passes xq. */
static __device__ __forceinline__ void put_out(float *o, int64_t i, float r, int64_t base, int8_t *xq, float2 *xd)
{
    o[i] = r;
    if (!xq) return;
    const float v[1] = {r};
    xq_put<1>(v, (int)(i % 32), (base + i) / 32, true, xq, xd);
}

/* Split blockIdx.z of gridDim.z: keys [z · chunk, (z + 1) · chunk) of those visible (chunk 0: all,
 * one split). With part (splits), out is not written: part holds per (token, head, split) the
 * max, the sum and the hd unnormalized outputs. */
__global__ void k_attention(const float *__restrict__ q, const float *__restrict__ kc, const float *__restrict__ vc,
                            const int32_t *__restrict__ pos, const int32_t *__restrict__ seq,
                            const int32_t *__restrict__ tables, int32_t max_blocks, int32_t block_size,
                            int64_t n_heads, int64_t n_kv_heads, int64_t hd, float scale, int32_t window,
                            int32_t chunk, float *__restrict__ part, float *__restrict__ out, int8_t *xq, float2 *xd)
{
    gpu_dep_enter();
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
    const int32_t  p = pos[t], lo0 = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
    const int32_t  z = blockIdx.z, lo = chunk && z * chunk > lo0 ? z * chunk : lo0;
    const int32_t  hi = chunk && (z + 1) * chunk - 1 < p ? (z + 1) * chunk - 1 : p; /* this split's last key */
    const int32_t *table = tables + (int64_t)seq[t] * max_blocks;
    float          m = -INFINITY, l = 0.0f;
    for (int32_t j = lo + wid; j <= hi; j += nw) {
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
    for (int w = 0; w < nw; w++) L += M == -INFINITY ? 0.0f : s_l[w] * expf(s_m[w] - M);
    if (part) { /* this split's max, sum and unnormalized output (max -inf: no key here) */
        float *pr = part + ((t * n_heads + h) * gridDim.z + z) * (hd + 2);
        if (threadIdx.x == 0) pr[0] = M, pr[1] = L;
        for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
            float v = 0.0f;
            for (int w = 0; w < nw; w++) v += M == -INFINITY ? 0.0f : s_acc[w][i] * expf(s_m[w] - M);
            pr[2 + i] = v;
        }
        return;
    }
    float *o = out + (t * n_heads + h) * hd;
    for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
        float v = 0.0f;
        for (int w = 0; w < nw; w++) v += s_acc[w][i] * expf(s_m[w] - M);
        put_out(o, i, L > 0.0f ? v / L : 0.0f, (t * n_heads + h) * hd, xq, xd);
    }
}

/* out (token, head) = the merge of its splits, in split order: one block a (token, head). */
__global__ void k_attention_merge(const float *__restrict__ part, int32_t splits, int64_t hd, float *__restrict__ out,
                                  int8_t *xq, float2 *xd)
{
    gpu_dep_enter();
    const float *pr = part + (int64_t)blockIdx.x * splits * (hd + 2);
    float        M  = -INFINITY, L = 0.0f;
    for (int32_t z = 0; z < splits; z++) M = fmaxf(M, pr[z * (hd + 2)]);
    for (int32_t z = 0; z < splits; z++) {
        const float mz = pr[z * (hd + 2)];
        if (mz != -INFINITY) L += pr[z * (hd + 2) + 1] * expf(mz - M);
    }
    float *o = out + (int64_t)blockIdx.x * hd;
    for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
        float v = 0.0f;
        for (int32_t z = 0; z < splits; z++) {
            const float mz = pr[z * (hd + 2)];
            if (mz != -INFINITY) v += pr[z * (hd + 2) + 2 + i] * expf(mz - M);
        }
        put_out(o, i, L > 0.0f ? v / L : 0.0f, (int64_t)blockIdx.x * hd, xq, xd);
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
    if (gpu_flash_takes(g, b, a)) return gpu_flash_attention(g, q, kv, layer, pos, seq, tables, b, a, out, err);
    /* few (token, head) blocks: split the keys by the furthest position */
    int32_t       far  = 0;
    const int64_t rows = b->n_tokens * a->n_heads;
    for (int64_t i = 0; i < b->n_tokens; i++) far = b->pos[i] > far ? b->pos[i] : far;
    const celer_att_split sp     = celer_att_split_for(far, rows, g->att_chunk, (int32_t)GPU_MAX_GRID_YZ / 2);
    const int32_t         splits = sp.splits;
    const dim3            grid((unsigned)b->n_tokens, (unsigned)a->n_heads, (unsigned)splits);
    /* the output quantized on the way out for the o-projection that reads it next */
    int8_t    *xq = NULL;
    float2    *xd = NULL;
    const bool qz = a->head_dim % 32 == 0;
    if (qz && gpu_xq_buffer(g, rows * a->head_dim, &xq, &xd, err)) return err->code;
    if (splits == 1) {
        if (GPU_LAUNCH(g, err, "attention", k_attention, grid, ATT_THREADS, 0, q, kv->k[layer], kv->v[layer], pos, seq,
                       tables, kv->max_blocks, kv->block_size, a->n_heads, a->n_kv_heads, a->head_dim, a->scale,
                       a->window, (int32_t)0, (float *)NULL, out, xq, xd))
            return err->code;
    } else {
        if (gpu_buf_reserve(g, &g->d_attn, (size_t)(rows * splits * (a->head_dim + 2)) * sizeof(float), err))
            return err->code;
        float *part = (float *)g->d_attn.p;
        if (GPU_LAUNCH(g, err, "attention", k_attention, grid, ATT_THREADS, 0, q, kv->k[layer], kv->v[layer], pos, seq,
                       tables, kv->max_blocks, kv->block_size, a->n_heads, a->n_kv_heads, a->head_dim, a->scale,
                       a->window, sp.chunk, part, out, (int8_t *)NULL, (float2 *)NULL) ||
            GPU_LAUNCH(g, err, "attention merge", k_attention_merge, (unsigned)rows, ATT_THREADS, 0,
                       (const float *)part, splits, a->head_dim, out, xq, xd))
            return err->code;
    }
    if (qz) g->xq_src = out, g->xq_n = rows * a->head_dim;
    return CELER_OK;
}
