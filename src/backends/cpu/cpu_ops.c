/* CPU backend: the element-wise and row-wise ops (norms, RoPE, activations, embedding rows,
 * the KV cache writes). Work big enough to share goes to the thread pool; small work (a
 * decode step's vectors) runs on the calling thread, where a pool handoff would cost more than
 * the work. */
#include "backends/cpu/cpu_backend.h"

#include "backends/cpu/matmul.h"
#include "backends/cpu/repack.h"
#include "core/error.h"
#include "quant/dequant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { PARALLEL_MIN = 1 << 15 }; /* elements below which an op runs on one thread */

/* ---- rows of a weight ---------------------------------------------------- */

celer_status cpu_get_rows(celer_backend *be, const celer_weight *w, const int32_t *ids, int64_t n, float *y,
                          celer_error *err)
{
    (void)be;
    if (w->type == CELER_WEIGHT_MLX) { /* as mx.dequantize gives them, from the arrays as stored */
        for (int64_t i = 0; i < n; i++) {
            if (ids[i] < 0 || ids[i] >= w->rows)
                return celer_fail(err, CELER_ERR_INVALID, "cpu: token id %d is outside the embedding (%lld rows)",
                                  ids[i], (long long)w->rows);
            if (celer_mlx_dequant_row(&w->mlx, &w->mlx_data, ids[i], y + i * w->cols, err)) return err->code;
        }
        return CELER_OK;
    }
    const celer_ggml_type_info *ti = celer_ggml_type_get(w->type);
    size_t row_bytes = (size_t)(w->cols / ti->block_elems) * ti->block_bytes;
    char  *row       = w->layout == CELER_CPU_LAYOUT_R16 ? malloc(row_bytes) : NULL; /* a row back as stored */
    if (w->layout == CELER_CPU_LAYOUT_R16 && !row)
        return celer_fail(err, CELER_ERR_OOM, "cpu: out of memory for an embedding row");
    celer_status st = CELER_OK;
    for (int64_t i = 0; i < n && !st; i++) {
        if (ids[i] < 0 || ids[i] >= w->rows) {
            st = celer_fail(err, CELER_ERR_INVALID, "cpu: token id %d is outside the embedding (%lld rows)", ids[i],
                            (long long)w->rows);
            break;
        }
        const char *src = (const char *)w->data + (size_t)ids[i] * row_bytes;
        if (row) celer_cpu_r16_row(w->type, w->data, w->rows, w->cols, ids[i], row), src = row;
        if (!celer_dequant_row(w->type, src, y + i * w->cols, w->cols))
            st = celer_fail(err, CELER_ERR_UNSUPPORTED, "cpu: cannot read weights of type %s", ti->name);
    }
    free(row);
    return st;
}

/* ---- RMSNorm ------------------------------------------------------------- */

typedef struct {
    const float *x, *w;
    float       *y;
    int64_t      rows, d;
    float        eps;
} norm_job;

static void norm_rows(void *ctx, int ith, int nth)
{
    const norm_job *j = ctx;
    int64_t         r0, r1;
    celer_pool_slice(j->rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *x  = j->x + r * j->d;
        float       *y  = j->y + r * j->d;
        double       ss = 0;
        for (int64_t i = 0; i < j->d; i++) ss += (double)x[i] * x[i];
        float inv = 1.0f / sqrtf((float)(ss / (double)j->d) + j->eps);
        for (int64_t i = 0; i < j->d; i++) y[i] = x[i] * inv * j->w[i];
    }
}

celer_status cpu_rmsnorm(celer_backend *be, const float *x, const celer_weight *w, int64_t rows, int64_t d, float eps,
                         float *y, celer_error *err)
{
    if (w->type != CELER_GGML_F32 || w->cols != d)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "cpu: rmsnorm wants an f32 weight of %lld values", (long long)d);
    norm_job j = {x, w->data, y, rows, d, eps};
    if (rows * d < PARALLEL_MIN) norm_rows(&j, 0, 1);
    else celer_pool_run(cpu_pool(be), norm_rows, &j);
    return CELER_OK;
}

/* ---- element-wise -------------------------------------------------------- */

celer_status cpu_add_bias(celer_backend *be, float *y, const celer_weight *b, int64_t T, celer_error *err)
{
    (void)be;
    if (b->type != CELER_GGML_F32) return celer_fail(err, CELER_ERR_UNSUPPORTED, "cpu: a bias must be f32");
    const float *bias = b->data;
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < b->cols; i++) y[t * b->cols + i] += bias[i];
    return CELER_OK;
}

celer_status cpu_add(celer_backend *be, float *x, const float *y, int64_t n, celer_error *err)
{
    (void)be, (void)err;
    for (int64_t i = 0; i < n; i++) x[i] += y[i];
    return CELER_OK;
}

celer_status cpu_scale(celer_backend *be, float *x, int64_t n, float s, celer_error *err)
{
    (void)be, (void)err;
    for (int64_t i = 0; i < n; i++) x[i] *= s;
    return CELER_OK;
}

typedef struct {
    float       *gate;
    const float *up;
    int64_t      n;
    celer_act    act;
} glu_job;

static void glu_part(void *ctx, int ith, int nth)
{
    const glu_job *j = ctx;
    int64_t        i0, i1;
    celer_pool_slice(j->n, ith, nth, &i0, &i1);
    if (j->act == CELER_ACT_SILU) {
        for (int64_t i = i0; i < i1; i++) {
            float g    = j->gate[i];
            j->gate[i] = g / (1.0f + expf(-g)) * j->up[i];
        }
        return;
    }
    /* gelu, tanh approximation, as 0.5 g (1 + tanh(u)) = g / (1 + exp(-2u)): one expf where libm's
     * tanhf took 4x its time (a Gemma 3 270M prefill spent 12% of its time in tanhf), and no
     * cancellation in 1 + tanh(u) where tanh nears -1 */
    for (int64_t i = i0; i < i1; i++) {
        float g    = j->gate[i];
        float u    = 0.7978845608028654f * (g + 0.044715f * g * g * g);
        j->gate[i] = g / (1.0f + expf(-2.0f * u)) * j->up[i];
    }
}

celer_status cpu_glu(celer_backend *be, float *gate, const float *up, int64_t n, celer_act act, celer_error *err)
{
    (void)err;
    glu_job j = {gate, up, n, act};
    if (n < PARALLEL_MIN) glu_part(&j, 0, 1);
    else celer_pool_run(cpu_pool(be), glu_part, &j);
    return CELER_OK;
}

/* ---- RoPE ---------------------------------------------------------------- */

celer_status cpu_rope(celer_backend *be, float *x, const celer_batch *b, int64_t n_heads, int64_t head_dim,
                      const celer_rope *r, celer_error *err)
{
    (void)be;
    if (r->n_rot > head_dim || r->n_rot % 2)
        return celer_fail(err, CELER_ERR_INVALID, "cpu: rope over %lld of %lld dimensions", (long long)r->n_rot,
                          (long long)head_dim);
    int64_t half = r->n_rot / 2;
    for (int64_t t = 0; t < b->n_tokens; t++) {
        double pos = (double)b->pos[t] * r->pos_scale;
        for (int64_t i = 0; i < half; i++) {
            double a = pos * celer_rope_freq(r, i);
            float  c = (float)(cos(a) * r->mscale), s = (float)(sin(a) * r->mscale);
            for (int64_t h = 0; h < n_heads; h++) {
                float  *v = x + (t * n_heads + h) * head_dim;
                int64_t i0 = r->mode == CELER_ROPE_NEOX ? i : 2 * i, i1 = r->mode == CELER_ROPE_NEOX ? i + half : 2 * i + 1;
                float   x0 = v[i0], x1 = v[i1];
                v[i0]      = x0 * c - x1 * s;
                v[i1]      = x0 * s + x1 * c;
            }
        }
    }
    return CELER_OK;
}

/* ---- KV cache writes ------------------------------------------------------ */

celer_status cpu_kv_write(celer_backend *be, celer_kv_cache *kv, int32_t layer, const float *k, const float *v,
                          const celer_batch *b, celer_error *err)
{
    (void)be;
    int64_t kw = kv->n_kv_heads * kv->head_dim_k, vw = kv->n_kv_heads * kv->head_dim_v;
    for (int64_t t = 0; t < b->n_tokens; t++) {
        int32_t s = b->seq[t], p = b->pos[t];
        int32_t blk = p / kv->block_size < kv->max_blocks ? kv->tables[s * kv->max_blocks + p / kv->block_size] : -1;
        if (blk < 0)
            return celer_fail(err, CELER_ERR_INVALID, "cpu: no KV block for sequence %d position %d", s, p);
        int64_t slot = (int64_t)blk * kv->block_size + p % kv->block_size;
        memcpy((float *)kv->k[layer] + slot * kw, k + t * kw, (size_t)kw * sizeof(float));
        memcpy((float *)kv->v[layer] + slot * vw, v + t * vw, (size_t)vw * sizeof(float));
    }
    return CELER_OK;
}
