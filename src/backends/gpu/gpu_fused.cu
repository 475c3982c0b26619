/* The GPU's fused kernels, reached through the port tables (backends/ports.h): each does in one
 * pass what its fallback does in several ops, with the same arithmetic but for the order of a
 * norm's sum (add_rmsnorm is with the other norms in gpu_norm.cu, the matmuls port in
 * gpu_matmul.cu). */
#include "backends/gpu/gpu_backend.h"
#include "backends/gpu/gpu_kv.cuh"
#include "backends/gpu/gpu_head.cuh"

extern "C" {
#include "backends/gpu/gpu_ports.h"
}

/* AI_WARPS heads a block, a warp each; heads of up to AI_HD_SHORT values take a kernel that
 * holds that many a warp (half the registers of one for heads of HEAD_MAX) */
enum { AI_WARPS = 4, AI_THREADS = AI_WARPS * CELER_WARP, AI_HD_SHORT = 128 };

/* A warp per (token, head) of q's n_head and k's n_kv heads (q's first; AI_WARPS heads a block
 * along y): the head's row staged in the warp's shared memory, normalized by the warp's sum and
 * rotated (gpu_head.cuh), and written to q in place or to the key cache, with the value row
 * beside it. A warp a head where a block of two warps took one: a decode step's 36 heads (the
 * 30B-A3B's) had two block-wide barriers on their way, a prefill of 512 tokens 18,432 blocks of
 * 64 threads (34.9 us a step on the H200, forty-first pass). */
template <typename KT, int HD>
__global__ void __launch_bounds__(AI_THREADS)
    k_attn_inputs(float *q, const float *__restrict__ k, const float *__restrict__ v, KT *kc, KT *vc,
                  const float *__restrict__ qn, const float *__restrict__ kn, float eps, const int32_t *__restrict__ pos,
                  const int32_t *__restrict__ seq, const int32_t *__restrict__ tables, int32_t max_blocks,
                  int32_t block_size, int64_t n_head, int64_t n_kv, int64_t hd, int64_t n_rot, int neox,
                  const double *__restrict__ freqs, float pos_scale, float mscale)
{
    gpu_dep_deferred(); /* early (gpu_vendor.h): see below */
    /* the positions and block tables (uploaded before the step's kernels), the frequency table and
     * the norm weights are read, and the rotations computed, before the wait for the product that
     * wrote q, k and v: a chain of dependent loads after it was most of this kernel's time */
    constexpr int    PER = HD / CELER_WARP, PAIRS = PER / 2; /* PAIRS >= 1: HD is at least two warps wide */
    __shared__ float rows[AI_WARPS][HD];
    const int        w = (int)(threadIdx.x / CELER_WARP);
    const int64_t    t = blockIdx.x, hh = (int64_t)blockIdx.y * AI_WARPS + w, kw = n_kv * hd;
    const bool       live = hh < n_head + n_kv, is_q = hh < n_head; /* live: the warp has a head */
    const int64_t    h = is_q ? hh : hh - n_head;
    const float     *src = is_q ? q + (t * n_head + h) * hd : k + t * kw + h * hd, *nw = is_q ? qn : kn;
    const int32_t    p    = pos[t];
    const int64_t    slot = is_q || !live ? 0 : (int64_t)tables[(int64_t)seq[t] * max_blocks + p / block_size] *
                                                    block_size + p % block_size;
    const int64_t    half = n_rot / 2;
    float           *row = rows[w];
    float            rc[PAIRS], rs[PAIRS], wn[PER], vv[PER];
    head_rotations(p, half, freqs, pos_scale, mscale, rc, rs);
    head_weights(nw, hd, wn);
    gpu_dep_enter();
    if (live) {
        const float ss = head_load<PER>(src, hd, row); /* the row, and for a key head its value row, at once */
#pragma unroll
        for (int e = 0; e < PER; e++) {
            const int64_t j = head_at(e, hd);
            vv[e]           = !is_q && j >= 0 ? v[t * kw + h * hd + j] : 0.0f;
        }
        if (nw) head_scale(row, hd, gpu_warp_sum(ss), eps, wn);
    }
    __syncthreads(); /* the warp's row whole (every warp passes: none returns before it) */
    if (!live) return;
    float *qd = is_q ? q + (t * n_head + h) * hd : NULL; /* q in place, or the key into the cache */
    KT    *kd = is_q ? NULL : kc + slot * kw + h * hd;
#pragma unroll
    for (int e = 0; e < PAIRS; e++) { /* pair (i0, i1): one rotation for both */
        int64_t i0, i1;
        float   y0, y1;
        head_pair(row, e, half, neox, rc[e], rs[e], &i0, &i1, &y0, &y1);
        if (i0 < 0) continue;
        if (is_q) qd[i0] = y0, qd[i1] = y1;
        else kv_put(&kd[i0], y0), kv_put(&kd[i1], y1);
    }
    for (int64_t j = n_rot + threadIdx.x % CELER_WARP; j < hd; j += CELER_WARP) { /* past the rotated ones */
        if (is_q) qd[j] = row[j];
        else kv_put(&kd[j], row[j]);
    }
    if (!is_q)
#pragma unroll
        for (int e = 0; e < PER; e++) {
            const int64_t j = head_at(e, hd);
            if (j >= 0) kv_put(&vc[slot * kw + h * hd + j], vv[e]);
        }
}

/* A per-head norm's weight: f32, one value per element of a head. */
static celer_status head_norm(const celer_weight *w, int64_t hd, const float **out, celer_error *err)
{
    *out = NULL;
    if (!w) return CELER_OK;
    if (w->type != CELER_GGML_F32 || w->cols != hd)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: attn_inputs wants f32 head norms of %lld values",
                          CELER_GPU_NAME, (long long)hd);
    *out = (const float *)w->data;
    return CELER_OK;
}

/* What the attention inputs' kernel takes: the rotation within the head, a cache of the head's
 * size, both norms or none; *qn and *kn the norms' values. */
static celer_status inputs_check(const celer_kv_cache *kv, int64_t n_head, int64_t head_dim, const celer_rope *r,
                                 const celer_weight *q_norm, const celer_weight *k_norm, const float **qn,
                                 const float **kn, celer_error *err)
{
    if (r->n_rot > head_dim || r->n_rot % 2 || head_dim != kv->head_dim_k || kv->head_dim_v != kv->head_dim_k ||
        head_dim > HEAD_MAX || n_head + kv->n_kv_heads > GPU_MAX_GRID_YZ || (!q_norm) != (!k_norm))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: attn_inputs over %lld of %lld dimensions (cache %lld/%lld; "
                          "heads of at most %d), %lld + %lld heads, %s", CELER_GPU_NAME, (long long)r->n_rot,
                          (long long)head_dim, (long long)kv->head_dim_k, (long long)kv->head_dim_v, HEAD_MAX,
                          (long long)n_head, (long long)kv->n_kv_heads,
                          (!q_norm) != (!k_norm) ? "one norm of two" : "norms as given");
    return head_norm(q_norm, head_dim, qn, err) || head_norm(k_norm, head_dim, kn, err) ? err->code : CELER_OK;
}

extern "C" celer_status celer_gpu_attn_inputs(celer_backend *be, celer_kv_cache *kv, int32_t layer, float *q,
                                              int64_t n_head, const float *k, const float *v,
                                              const celer_weight *q_norm, const celer_weight *k_norm, float eps,
                                              const celer_batch *b, int64_t head_dim, const celer_rope *r,
                                              celer_error *err)
{
    gpu_backend *g  = gpu_of(be);
    const float *qn = NULL, *kn = NULL;
    if (gpu_alive(g, err) || inputs_check(kv, n_head, head_dim, r, q_norm, k_norm, &qn, &kn, err)) return err->code;
    if (gpu_kv_check(kv, b, false, err)) return err->code;
    if (b->n_tokens <= 0) return CELER_OK;
    if (b->n_tokens > GPU_MAX_GRID_X)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: attn_inputs of %lld tokens", CELER_GPU_NAME,
                          (long long)b->n_tokens);
    const int32_t *pos, *seq, *tables;
    const double  *fq;
    if (gpu_batch_upload(g, b, kv, &pos, &seq, &tables, err) || gpu_rope_freqs(g, r, &fq, err)) return err->code;
    const dim3 grid((unsigned)b->n_tokens, (unsigned)((n_head + kv->n_kv_heads + AI_WARPS - 1) / AI_WARPS));
    const bool sh = head_dim <= AI_HD_SHORT;
    if (kv->elem_bytes == 2) {
        const auto fn = sh ? k_attn_inputs<uint16_t, AI_HD_SHORT> : k_attn_inputs<uint16_t, HEAD_MAX>;
        return GPU_LAUNCH(g, err, "attn_inputs", fn, grid, AI_THREADS, 0, q, k, v, (uint16_t *)kv->k[layer],
                          (uint16_t *)kv->v[layer], qn, kn, eps, pos, seq, tables, kv->max_blocks, kv->block_size,
                          n_head, kv->n_kv_heads, head_dim, r->n_rot, r->mode == CELER_ROPE_NEOX, fq, r->pos_scale,
                          r->mscale);
    }
    const auto fn = sh ? k_attn_inputs<float, AI_HD_SHORT> : k_attn_inputs<float, HEAD_MAX>;
    return GPU_LAUNCH(g, err, "attn_inputs", fn, grid, AI_THREADS, 0, q, k, v, (float *)kv->k[layer],
                      (float *)kv->v[layer], qn, kn, eps, pos, seq, tables, kv->max_blocks, kv->block_size, n_head,
                      kv->n_kv_heads, head_dim, r->n_rot, r->mode == CELER_ROPE_NEOX, fq, r->pos_scale, r->mscale);
}
