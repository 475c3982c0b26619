/* CPU attention over the paged KV cache: for each (token, head), one pass over the visible
 * keys with an online softmax (running max and sum), so no score buffer is needed and any
 * context length works. Grouped-query attention maps query head h to kv head h / (H / Hkv). */
#include "backends/cpu/cpu_backend.h"

#include "core/error.h"

#include <math.h>
#include <string.h>

typedef struct {
    const float          *q;
    const celer_kv_cache *kv;
    int32_t               layer;
    const celer_batch    *b;
    const celer_attn     *a;
    float                *out;
} attn_job;

static void attend(void *ctx, int ith, int nth)
{
    const attn_job       *j  = ctx;
    const celer_kv_cache *kv = j->kv;
    const celer_attn     *a  = j->a;
    int64_t               hd = a->head_dim, group = a->n_heads / a->n_kv_heads;
    int64_t               kw = kv->n_kv_heads * kv->head_dim_k, vw = kv->n_kv_heads * kv->head_dim_v;
    int64_t               t0, t1;
    celer_pool_slice(j->b->n_tokens * a->n_heads, ith, nth, &t0, &t1);
    for (int64_t task = t0; task < t1; task++) {
        int64_t      t = task / a->n_heads, h = task % a->n_heads, kvh = h / group;
        int32_t      s = j->b->seq[t], p = j->b->pos[t];
        int32_t      lo = a->window > 0 && p - a->window + 1 > 0 ? p - a->window + 1 : 0;
        const float *q  = j->q + (t * a->n_heads + h) * hd;
        float       *o  = j->out + (t * a->n_heads + h) * hd;
        const int32_t *table = kv->tables + (int64_t)s * kv->max_blocks;
        float        m = -INFINITY, l = 0;
        memset(o, 0, (size_t)hd * sizeof *o);
        for (int32_t pos = lo; pos <= p; pos++) {
            int64_t      slot = (int64_t)table[pos / kv->block_size] * kv->block_size + pos % kv->block_size;
            const float *k    = kv->k[j->layer] + slot * kw + kvh * kv->head_dim_k;
            const float *v    = kv->v[j->layer] + slot * vw + kvh * kv->head_dim_v;
            float        sc   = 0;
            for (int64_t i = 0; i < hd; i++) sc += q[i] * k[i];
            sc *= a->scale;
            if (sc > m) {
                float corr = expf(m - sc);
                l *= corr;
                for (int64_t i = 0; i < hd; i++) o[i] *= corr;
                m = sc;
            }
            float w = expf(sc - m);
            l += w;
            for (int64_t i = 0; i < hd; i++) o[i] += w * v[i];
        }
        float inv = l > 0 ? 1.0f / l : 0;
        for (int64_t i = 0; i < hd; i++) o[i] *= inv;
    }
}

celer_status cpu_attention(celer_backend *be, const float *q, const celer_kv_cache *kv, int32_t layer,
                           const celer_batch *b, const celer_attn *a, float *out, celer_error *err)
{
    if (a->n_kv_heads <= 0 || a->n_heads % a->n_kv_heads || a->head_dim != kv->head_dim_k ||
        kv->head_dim_v != kv->head_dim_k)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "cpu: attention with %lld heads over %lld kv heads of %lld/%lld",
                          (long long)a->n_heads, (long long)a->n_kv_heads, (long long)kv->head_dim_k,
                          (long long)kv->head_dim_v);
    attn_job j = {q, kv, layer, b, a, out};
    celer_pool_run(cpu_pool(be), attend, &j);
    return CELER_OK;
}
