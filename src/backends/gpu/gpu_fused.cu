/* The GPU's fused kernels, reached through the port tables (backends/ports.h): each does in one
 * pass what its fallback does in two ops, with the same arithmetic (add_rmsnorm is with the
 * other norms in gpu_norm.cu, the matmuls port in gpu_matmul.cu). */
#include "backends/gpu/gpu_backend.h"
#include "backends/gpu/gpu_rope.cuh"

extern "C" {
#include "backends/gpu/gpu_ports.h"
}

enum { THREADS = 256 };

/* One thread per (token, kv head, element pair or unrotated value): the rotated keys and the
 * values go straight to their cache slots. */
__global__ void k_rope_kv_write(float *kc, float *vc, const float *__restrict__ k, const float *__restrict__ v,
                                const int32_t *__restrict__ pos, const int32_t *__restrict__ seq,
                                const int32_t *__restrict__ tables, int32_t max_blocks, int32_t block_size, int64_t T,
                                int64_t n_kv, int64_t hd, int64_t n_rot, int neox, float base, float pos_scale,
                                const float *__restrict__ factors, float mscale)
{
    gpu_dep_enter();
    const int64_t half = n_rot / 2, kw = n_kv * hd;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < T * kw;
         idx += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = idx / kw, e = idx % kw, h = e / hd, j = e % hd;
        const int32_t p    = pos[t];
        const int64_t slot = (int64_t)tables[(int64_t)seq[t] * max_blocks + p / block_size] * block_size + p % block_size;
        vc[slot * kw + e]  = v[idx];
        /* the pair (i0, i1) is written by the thread of its first element */
        const float *kr = k + t * kw + h * hd;
        float       *kd = kc + slot * kw + h * hd;
        if (j >= n_rot) {
            kd[j] = kr[j];
            continue;
        }
        const int64_t i = neox ? (j < half ? j : -1) : (j % 2 == 0 ? j / 2 : -1);
        if (i < 0) continue;
        const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        float         c, s;
        gpu_rope_cos_sin(p, i, n_rot, base, pos_scale, factors, mscale, &c, &s);
        const float x0 = kr[i0], x1 = kr[i1];
        kd[i0]         = x0 * c - x1 * s;
        kd[i1]         = x0 * s + x1 * c;
    }
}

extern "C" celer_status celer_gpu_rope_kv_write(celer_backend *be, celer_kv_cache *kv, int32_t layer, const float *k,
                                                const float *v, const celer_batch *b, int64_t head_dim,
                                                const celer_rope *r, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (r->n_rot > head_dim || r->n_rot % 2 || head_dim != kv->head_dim_k || kv->head_dim_v != kv->head_dim_k)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: rope_kv_write over %lld of %lld dimensions (cache %lld/%lld)",
                          CELER_GPU_NAME, (long long)r->n_rot, (long long)head_dim, (long long)kv->head_dim_k,
                          (long long)kv->head_dim_v);
    if (gpu_kv_check(kv, b, false, err)) return err->code;
    if (b->n_tokens <= 0) return CELER_OK;
    const int32_t *pos, *seq, *tables;
    const float   *ff;
    if (gpu_batch_upload(g, b, kv, &pos, &seq, &tables, err) ||
        gpu_freq_factors(g, r->freq_factors, r->n_rot / 2, &ff, err))
        return err->code;
    unsigned blocks = gpu_blocks(b->n_tokens * kv->n_kv_heads * head_dim, THREADS);
    return GPU_LAUNCH(g, err, "rope_kv_write", k_rope_kv_write, blocks, THREADS, 0, kv->k[layer], kv->v[layer], k,
                      v, pos, seq, tables, kv->max_blocks, kv->block_size, b->n_tokens, kv->n_kv_heads, head_dim,
                      r->n_rot, r->mode == CELER_ROPE_NEOX, r->base, r->pos_scale, ff, r->mscale);
}
