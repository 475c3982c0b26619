/* Element-wise and row-wise ops on the GPU: RMSNorm, biases, adds, activations, RoPE and the KV
 * cache writes. Element-wise kernels are grid-stride loops over 64-bit indices, so any size is
 * covered by a bounded grid. */
#include "backends/gpu/gpu_backend.h"
#include "backends/gpu/gpu_rope.cuh"

#include <math.h>

enum { THREADS = 256 };

#define GRID_STRIDE(i, n)                                                                                           \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* ---- argmax of rows, for greedy draws ------------------------------------------------ */

/* (value, index) pairs: the larger value, the lower index on ties; NaNs are never candidates. */
static __device__ __forceinline__ void better(float v, int64_t i, float *bv, int64_t *bi)
{
    if (v > *bv || (v == *bv && i < *bi)) *bv = v, *bi = i;
}

/* One block of THREADS per row: strided scans, then a tree through shared memory. A row whose
 * first value is NaN gives 0, as the sequential scan does; so does a row of NaNs. */
__global__ void k_argmax(const float *__restrict__ x, int64_t n, int32_t *__restrict__ ids)
{
    __shared__ float   sv[THREADS];
    __shared__ int64_t si[THREADS];
    const float       *row = x + (int64_t)blockIdx.x * n;
    float              bv  = -INFINITY;
    int64_t            bi  = n;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        if (row[i] == row[i]) better(row[i], i, &bv, &bi);
    sv[threadIdx.x] = bv, si[threadIdx.x] = bi;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) better(sv[threadIdx.x + s], si[threadIdx.x + s], &sv[threadIdx.x], &si[threadIdx.x]);
        __syncthreads();
    }
    if (threadIdx.x == 0) ids[blockIdx.x] = row[0] != row[0] || si[0] >= n ? 0 : (int32_t)si[0];
}

celer_status gpu_argmax(celer_backend *be, const float *x, int64_t rows, int64_t n, int32_t *ids, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (rows <= 0) return CELER_OK;
    if (rows > GPU_MAX_GRID_X || n <= 0 || n > INT32_MAX)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: argmax of %lld rows of %lld", CELER_GPU_NAME, (long long)rows,
                          (long long)n);
    if (gpu_buf_reserve(g, &g->d_ids, (size_t)rows * sizeof *ids, err) ||
        GPU_LAUNCH(g, err, "argmax", k_argmax, (unsigned)rows, THREADS, 0, x, n, (int32_t *)g->d_ids.p))
        return err->code;
    return g->base.ops->read(&g->base, g->d_ids.p, ids, (size_t)rows * sizeof *ids, err);
}

/* ---- RMSNorm: one block per row ---------------------------------------------------- */

__global__ void k_rmsnorm(const float *__restrict__ x, const float *__restrict__ w, int64_t d, float eps,
                          float *__restrict__ y)
{
    __shared__ float part[1024 / 32];
    const float     *xr = x + (int64_t)blockIdx.x * d;
    float           *yr = y + (int64_t)blockIdx.x * d;
    float            ss = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) ss += xr[i] * xr[i];
    const float inv = 1.0f / sqrtf(gpu_block_sum(ss, part) / (float)d + eps);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) yr[i] = xr[i] * inv * w[i];
}

celer_status gpu_rmsnorm(celer_backend *be, const float *x, const celer_weight *w, int64_t rows, int64_t d, float eps,
                         float *y, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (w->type != CELER_GGML_F32 || w->cols != d)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: rmsnorm wants an f32 weight of %lld values", CELER_GPU_NAME,
                          (long long)d);
    if (rows <= 0) return CELER_OK;
    if (rows > GPU_MAX_GRID_X)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: rmsnorm of %lld rows", CELER_GPU_NAME, (long long)rows);
    return GPU_LAUNCH(g, err, "rmsnorm", k_rmsnorm, (unsigned)rows, THREADS, 0, x, (const float *)w->data, d, eps,
                      y);
}

/* ---- element-wise ------------------------------------------------------------------- */

__global__ void k_add_bias(float *y, const float *__restrict__ b, int64_t n, int64_t total)
{
    GRID_STRIDE(i, total) y[i] += b[i % n];
}

__global__ void k_add(float *x, const float *__restrict__ y, int64_t n)
{
    GRID_STRIDE(i, n) x[i] += y[i];
}

__global__ void k_scale(float *x, int64_t n, float s)
{
    GRID_STRIDE(i, n) x[i] *= s;
}

__global__ void k_glu(float *gate, const float *__restrict__ up, int64_t n, int act)
{
    GRID_STRIDE(i, n)
    {
        const float g = gate[i];
        if (act == CELER_ACT_SILU) gate[i] = g / (1.0f + expf(-g)) * up[i];
        else {
            const float t = tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g));
            gate[i]       = 0.5f * g * (1.0f + t) * up[i];
        }
    }
}

__global__ void k_mul_sigmoid(float *x, const float *__restrict__ gt, int64_t n, int64_t total)
{
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
    return GPU_LAUNCH(g, err, "glu", k_glu, gpu_blocks(n, THREADS), THREADS, 0, gate, up, n, (int)act);
}

celer_status gpu_mul_sigmoid(celer_backend *be, float *x, const float *gt, int64_t T, int64_t n, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (T * n <= 0) return CELER_OK;
    return GPU_LAUNCH(g, err, "mul_sigmoid", k_mul_sigmoid, gpu_blocks(T * n, THREADS), THREADS, 0, x, gt, n,
                      T * n);
}

/* ---- RoPE: one thread per (token, rotated pair), over all heads --------------------- */

__global__ void k_rope(float *x, const int32_t *__restrict__ pos, int64_t T, int64_t n_heads, int64_t head_dim,
                       int64_t n_rot, int neox, float base, float pos_scale, const float *__restrict__ factors,
                       float mscale)
{
    const int64_t half = n_rot / 2;
    GRID_STRIDE(k, T * half)
    {
        const int64_t t = k / half, i = k % half;
        float         c, s;
        gpu_rope_cos_sin(pos[t], i, n_rot, base, pos_scale, factors, mscale, &c, &s);
        const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        for (int64_t h = 0; h < n_heads; h++) {
            float      *v  = x + (t * n_heads + h) * head_dim;
            const float x0 = v[i0], x1 = v[i1];
            v[i0]          = x0 * c - x1 * s;
            v[i1]          = x0 * s + x1 * c;
        }
    }
}

celer_status gpu_freq_factors(gpu_backend *g, const float *host, int64_t n, const float **dev, celer_error *err)
{
    *dev = NULL;
    if (!host) return CELER_OK;
    for (int i = 0; i < g->n_freq; i++)
        if (g->freq[i].host == host) {
            *dev = g->freq[i].dev;
            return CELER_OK;
        }
    if (g->n_freq == (int)(sizeof g->freq / sizeof g->freq[0]))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: more RoPE frequency tables than the backend keeps",
                          CELER_GPU_NAME);
    float *d;
    if (g->base.ops->alloc(&g->base, (size_t)n * sizeof *d, (void **)&d, err) ||
        gpu_upload(g, d, host, (size_t)n * sizeof *d, err))
        return err->code;
    g->freq[g->n_freq].host = host, g->freq[g->n_freq++].dev = d;
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
    const float   *ff;
    if (gpu_batch_upload(g, b, NULL, &pos, &seq, NULL, err) || gpu_freq_factors(g, r->freq_factors, r->n_rot / 2, &ff, err))
        return err->code;
    int64_t n = b->n_tokens * (r->n_rot / 2);
    return GPU_LAUNCH(g, err, "rope", k_rope, gpu_blocks(n, THREADS), THREADS, 0, x, pos, b->n_tokens, n_heads,
                      head_dim, r->n_rot, r->mode == CELER_ROPE_NEOX, r->base, r->pos_scale, ff, r->mscale);
}

/* ---- KV cache writes: one thread per value ----------------------------------------- */

__global__ void k_kv_write(float *cache, const float *__restrict__ src, const int32_t *__restrict__ pos,
                           const int32_t *__restrict__ seq, const int32_t *__restrict__ tables, int32_t max_blocks,
                           int32_t block_size, int64_t width, int64_t T)
{
    GRID_STRIDE(k, T * width)
    {
        const int64_t t = k / width, i = k % width;
        const int32_t p = pos[t];
        const int64_t slot = (int64_t)tables[(int64_t)seq[t] * max_blocks + p / block_size] * block_size + p % block_size;
        cache[slot * width + i] = src[k];
    }
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
    int64_t kw = kv->n_kv_heads * kv->head_dim_k, vw = kv->n_kv_heads * kv->head_dim_v;
    if (GPU_LAUNCH(g, err, "kv_write", k_kv_write, gpu_blocks(b->n_tokens * kw, THREADS), THREADS, 0, kv->k[layer],
                   k, pos, seq, tables, kv->max_blocks, kv->block_size, kw, b->n_tokens))
        return err->code;
    return GPU_LAUNCH(g, err, "kv_write", k_kv_write, gpu_blocks(b->n_tokens * vw, THREADS), THREADS, 0,
                      kv->v[layer], v, pos, seq, tables, kv->max_blocks, kv->block_size, vw, b->n_tokens);
}
