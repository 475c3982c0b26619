/* Element-wise and row-wise ops on the GPU: biases, adds, activations, RoPE and the KV cache
 * writes (RMSNorm is gpu_norm.cu, the argmax and sampled draws gpu_sample.cu). Element-wise
 * kernels are grid-stride loops over 64-bit indices, so any size is covered by a bounded grid. */
#include "backends/gpu/gpu_glu.cuh"
#include "backends/gpu/gpu_kv.cuh"
#include "backends/gpu/gpu_matvec.h"
#include "backends/gpu/gpu_rope.cuh"

#include <math.h>

enum { THREADS = 256 };

#define GRID_STRIDE(i, n)                                                                                           \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* ---- element-wise ------------------------------------------------------------------- */

__global__ void k_add_bias(float *y, const float *__restrict__ b, int64_t n, int64_t total)
{
    gpu_dep_enter();
    GRID_STRIDE(i, total) y[i] += b[i % n];
}

__global__ void k_add(float *x, const float *__restrict__ y, int64_t n)
{
    gpu_dep_enter();
    GRID_STRIDE(i, n) x[i] += y[i];
}

__global__ void k_scale(float *x, int64_t n, float s)
{
    gpu_dep_enter();
    GRID_STRIDE(i, n) x[i] *= s;
}

/* With xo.q (n a multiple of 32: a warp's lanes stay in the loop together), the result is also
 * quantized for the product that reads it next (gpu_matvec.h). */
__global__ void k_glu(float *gate, const float *__restrict__ up, int64_t n, int act, gpu_xq_out xo)
{
    gpu_dep_enter();
    GRID_STRIDE(i, n)
    {
        const float r = glu_value(gate[i], up[i], act);
        gate[i]       = r;
        if (xo.q) {
            const float a[1] = {r};
            xq_put<1>(a, (int)(i % 32), i / 32, true, xo);
        }
    }
}

__global__ void k_mul_sigmoid(float *x, const float *__restrict__ gt, int64_t n, int64_t total)
{
    gpu_dep_enter();
    GRID_STRIDE(i, total) x[i] *= 1.0f / (1.0f + expf(-gt[i / n]));
}

celer_status gpu_add_bias(celer_backend *be, float *y, const celer_weight *b, int64_t T, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (b->type != CELER_GGML_F32)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: a bias must be f32", CELER_GPU_NAME);
    int64_t total = T * b->cols;
    if (total <= 0) return CELER_OK;
    return GPU_LAUNCH(g, err, "add_bias", k_add_bias, gpu_blocks(total, THREADS), THREADS, 0, y,
                      (const float *)b->data, b->cols, total);
}

celer_status gpu_add(celer_backend *be, float *x, const float *y, int64_t n, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (n <= 0) return CELER_OK;
    return GPU_LAUNCH(g, err, "add", k_add, gpu_blocks(n, THREADS), THREADS, 0, x, y, n);
}

celer_status gpu_scale(celer_backend *be, float *x, int64_t n, float s, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (n <= 0) return CELER_OK;
    return GPU_LAUNCH(g, err, "scale", k_scale, gpu_blocks(n, THREADS), THREADS, 0, x, n, s);
}

celer_status gpu_glu(celer_backend *be, float *gate, const float *up, int64_t n, celer_act act, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (n <= 0) return CELER_OK;
    gpu_xq_out xo = {NULL, NULL, false};
    const bool qz = n % 32 == 0; /* the result quantized for the product that reads it next */
    if ((qz && gpu_xq_buffer(g, n, &xo, err)) ||
        GPU_LAUNCH(g, err, "glu", k_glu, gpu_blocks(n, THREADS), THREADS, 0, gate, up, n, (int)act, xo))
        return err->code;
    if (qz) gpu_xq_held(g, gate, n, xo);
    return CELER_OK;
}

celer_status gpu_mul_sigmoid(celer_backend *be, float *x, const float *gt, int64_t T, int64_t n, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (T * n <= 0) return CELER_OK;
    return GPU_LAUNCH(g, err, "mul_sigmoid", k_mul_sigmoid, gpu_blocks(T * n, THREADS), THREADS, 0, x, gt, n,
                      T * n);
}

/* ---- RoPE: one thread per (token, head, rotated pair) -------------------------------- */

__global__ void k_rope(float *x, const int32_t *__restrict__ pos, int64_t T, int64_t n_heads, int64_t head_dim,
                       int64_t n_rot, int neox, const double *__restrict__ freqs, float pos_scale, float mscale)
{
    gpu_dep_enter();
    const int64_t half = n_rot / 2;
    GRID_STRIDE(k, T * n_heads * half)
    {
        const int64_t th = k / half, i = k % half; /* th: token t, head h, at x + th · head_dim */
        float         c, s;
        gpu_rope_cos_sin(pos[th / n_heads], i, freqs, pos_scale, mscale, &c, &s);
        const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        float        *v  = x + th * head_dim;
        const float   x0 = v[i0], x1 = v[i1];
        v[i0]            = x0 * c - x1 * s;
        v[i1]            = x0 * s + x1 * c;
    }
}

celer_status gpu_rope_freqs(gpu_backend *g, const celer_rope *r, const double **dev, celer_error *err)
{
    const int64_t half = r->n_rot / 2;
    for (int i = 0; i < g->n_freq; i++)
        if (g->freq[i].base == r->base && g->freq[i].n_rot == r->n_rot && g->freq[i].factors == r->freq_factors) {
            *dev = g->freq[i].dev;
            return CELER_OK;
        }
    if (g->n_freq == (int)(sizeof g->freq / sizeof g->freq[0]))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: more RoPE frequency tables than the backend keeps",
                          CELER_GPU_NAME);
    double *h = (double *)malloc((size_t)(half > 0 ? half : 1) * sizeof *h), *d = NULL;
    if (!h) return celer_fail(err, CELER_ERR_OOM, "%s: a RoPE frequency table", CELER_GPU_NAME);
    for (int64_t i = 0; i < half; i++) h[i] = celer_rope_freq(r, i);
    celer_status st = g->base.ops->alloc(&g->base, (size_t)(half > 0 ? half : 1) * sizeof *d, (void **)&d, err);
    if (!st) st = gpu_upload(g, d, h, (size_t)half * sizeof *d, err);
    free(h);
    if (st) return st;
    g->freq[g->n_freq].base = r->base, g->freq[g->n_freq].n_rot = r->n_rot;
    g->freq[g->n_freq].factors = r->freq_factors, g->freq[g->n_freq++].dev = d;
    *dev = d;
    return CELER_OK;
}

celer_status gpu_rope(celer_backend *be, float *x, const celer_batch *b, int64_t n_heads, int64_t head_dim,
                      const celer_rope *r, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (r->n_rot > head_dim || r->n_rot % 2)
        return celer_fail(err, CELER_ERR_INVALID, "%s: rope over %lld of %lld dimensions", CELER_GPU_NAME,
                          (long long)r->n_rot, (long long)head_dim);
    if (b->n_tokens <= 0 || r->n_rot == 0) return CELER_OK;
    const int32_t *pos, *seq;
    const double  *fq;
    if (gpu_batch_upload(g, b, NULL, &pos, &seq, NULL, err) || gpu_rope_freqs(g, r, &fq, err)) return err->code;
    int64_t n = b->n_tokens * n_heads * (r->n_rot / 2);
    return GPU_LAUNCH(g, err, "rope", k_rope, gpu_blocks(n, THREADS), THREADS, 0, x, pos, b->n_tokens, n_heads,
                      head_dim, r->n_rot, r->mode == CELER_ROPE_NEOX, fq, r->pos_scale, r->mscale);
}

/* ---- KV cache writes: one thread per value ----------------------------------------- */

template <typename KT>
__global__ void k_kv_write(KT *cache, const float *__restrict__ src, const int32_t *__restrict__ pos,
                           const int32_t *__restrict__ seq, const int32_t *__restrict__ tables, int32_t max_blocks,
                           int32_t block_size, int64_t width, int64_t T)
{
    gpu_dep_enter();
    GRID_STRIDE(k, T * width)
    {
        const int64_t t = k / width, i = k % width;
        const int32_t p = pos[t];
        const int64_t slot = (int64_t)tables[(int64_t)seq[t] * max_blocks + p / block_size] * block_size + p % block_size;
        kv_put(&cache[slot * width + i], src[k]);
    }
}

/* One of the cache's pools (k or v of a layer) into the cache at the batch's slots. */
template <typename KT>
static celer_status kv_write_pool(gpu_backend *g, void *pool, const float *src, const int32_t *pos, const int32_t *seq,
                                  const int32_t *tables, const celer_kv_cache *kv, int64_t width, int64_t T,
                                  celer_error *err)
{
    return GPU_LAUNCH(g, err, "kv_write", k_kv_write<KT>, gpu_blocks(T * width, THREADS), THREADS, 0, (KT *)pool, src,
                      pos, seq, tables, kv->max_blocks, kv->block_size, width, T);
}

celer_status gpu_kv_write(celer_backend *be, celer_kv_cache *kv, int32_t layer, const float *k, const float *v,
                          const celer_batch *b, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (gpu_kv_check(kv, b, false, err)) return err->code;
    if (b->n_tokens <= 0) return CELER_OK;
    const int32_t *pos, *seq, *tables;
    if (gpu_batch_upload(g, b, kv, &pos, &seq, &tables, err)) return err->code;
    const int64_t kw = kv->n_kv_heads * kv->head_dim_k, vw = kv->n_kv_heads * kv->head_dim_v, T = b->n_tokens;
    if (kv->elem_bytes == 2)
        return kv_write_pool<uint16_t>(g, kv->k[layer], k, pos, seq, tables, kv, kw, T, err) ||
                       kv_write_pool<uint16_t>(g, kv->v[layer], v, pos, seq, tables, kv, vw, T, err)
                   ? err->code
                   : CELER_OK;
    return kv_write_pool<float>(g, kv->k[layer], k, pos, seq, tables, kv, kw, T, err) ||
                   kv_write_pool<float>(g, kv->v[layer], v, pos, seq, tables, kv, vw, T, err)
               ? err->code
               : CELER_OK;
}
