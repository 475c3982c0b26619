/* CPU attention over the paged KV cache, one task per (token, kv head): the query heads that
 * share the kv head (grouped-query attention maps query head h to kv head h / (H / Hkv)) walk
 * the visible keys together, in tiles, with an online softmax (running max and sum), so each
 * key and value row is read once per group, no score buffer grows with the context, and any
 * context length works.
 *
 * The dot products are written lane-wise (16 independent partial sums) so that the compiler
 * vectorizes them without reordering a float sum, the value sums in GCC's 8-float vectors held
 * across a tile's keys (tile_values); both are compiled twice, for baseline x86-64 and for AVX2 +
 * FMA, and the backend's kernel level picks one. A tile's scores are taken two query heads by two
 * keys at a time (dot2x2: each operand loaded once for two products, where one at a time loaded
 * both for each), each sum in dot's order. */
#include "backends/cpu/cpu_backend.h"

#include "backends/cpu/matmul.h"
#include "core/error.h"

#include <math.h>
#include <string.h>

enum {
    TILE      = 32, /* keys scored before their values are summed */
    MAX_GROUP = 16, /* query heads per kv head handled at once (larger groups loop) */
    LANES     = 16,
    VALUE_VECS = 8, /* vectors of 8 outputs a head's value sums hold in registers (64 outputs) */
};

typedef struct {
    const float          *q;
    const celer_kv_cache *kv;
    int32_t               layer;
    const celer_batch    *b;
    const celer_attn     *a;
    float                *out;
} attn_job;

#define INLINE static inline __attribute__((always_inline))

INLINE float dot(const float *a, const float *b, int64_t n)
{
    float   acc[LANES] = {0};
    int64_t i          = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += a[i + j] * b[i + j];
    float s = 0;
    for (; i < n; i++) s += a[i] * b[i];
    for (int j = 0; j < LANES; j++) s += acc[j];
    return s;
}

/* s[g][c] = dot(q[g], k[c], n) for two query rows and two keys, in dot's order (bit for bit). */
INLINE void dot2x2(const float *q0, const float *q1, const float *k0, const float *k1, int64_t n, float s[2][2])
{
    float   a00[LANES] = {0}, a01[LANES] = {0}, a10[LANES] = {0}, a11[LANES] = {0};
    int64_t i          = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            a00[j] += q0[i + j] * k0[i + j], a01[j] += q0[i + j] * k1[i + j];
            a10[j] += q1[i + j] * k0[i + j], a11[j] += q1[i + j] * k1[i + j];
        }
    float s00 = 0, s01 = 0, s10 = 0, s11 = 0;
    for (; i < n; i++) s00 += q0[i] * k0[i], s01 += q0[i] * k1[i], s10 += q1[i] * k0[i], s11 += q1[i] * k1[i];
    for (int j = 0; j < LANES; j++) s00 += a00[j], s01 += a01[j], s10 += a10[j], s11 += a11[j];
    s[0][0] = s00, s[0][1] = s01, s[1][0] = s10, s[1][1] = s11;
}

/* sc[g][i] = q_g · kr[i] · scale for the ng query rows at q (hd apart) and the n keys. */
INLINE void tile_scores(const float *q, int64_t ng, const float *const *kr, int n, int64_t hd, float scale,
                        float sc[][TILE])
{
    int64_t g = 0;
    for (; g + 2 <= ng; g += 2) {
        const float *q0 = q + g * hd, *q1 = q0 + hd;
        int          i  = 0;
        for (; i + 2 <= n; i += 2) {
            float s[2][2];
            dot2x2(q0, q1, kr[i], kr[i + 1], hd, s);
            sc[g][i] = s[0][0] * scale, sc[g][i + 1] = s[0][1] * scale;
            sc[g + 1][i] = s[1][0] * scale, sc[g + 1][i + 1] = s[1][1] * scale;
        }
        for (; i < n; i++) sc[g][i] = dot(q0, kr[i], hd) * scale, sc[g + 1][i] = dot(q1, kr[i], hd) * scale;
    }
    for (; g < ng; g++)
        for (int i = 0; i < n; i++) sc[g][i] = dot(q + g * hd, kr[i], hd) * scale;
}

/* Eight floats as one vector (GCC's vector extension: one AVX register, or two SSE ones in the
 * baseline build), copied in and out unaligned with memcpy (no function takes or returns one: the
 * baseline build's ABI for 32-byte vectors differs). */
typedef float vf8 __attribute__((vector_size(32)));

/* o = o · c (where rescale) + Σ_i w[i] · vr[i] over n value rows of hd: VALUE_VECS vectors of o
 * at a time held in registers across the tile's keys, each output added to key by key as one walk
 * of the keys a multiply-add at a time did (bit for bit), where that walk loaded and stored o for
 * every key (41% of attention's time in a 512-token prefill). */
INLINE void tile_values(float *o, bool rescale, float c, const float *w, const float *const *vr, int n, int64_t hd)
{
    int64_t d = 0;
    for (; d + 8 * VALUE_VECS <= hd; d += 8 * VALUE_VECS) {
        vf8 acc[VALUE_VECS];
        for (int k = 0; k < VALUE_VECS; k++) {
            vf8 v;
            memcpy(&v, o + d + 8 * k, sizeof v);
            acc[k] = rescale ? v * c : v;
        }
        for (int i = 0; i < n; i++) {
            const float wi = w[i];
            for (int k = 0; k < VALUE_VECS; k++) {
                vf8 v;
                memcpy(&v, vr[i] + d + 8 * k, sizeof v);
                acc[k] += wi * v;
            }
        }
        for (int k = 0; k < VALUE_VECS; k++) {
            const vf8 v = acc[k];
            memcpy(o + d + 8 * k, &v, sizeof v);
        }
    }
    for (; d < hd; d++) {
        float acc = rescale ? o[d] * c : o[d];
        for (int i = 0; i < n; i++) acc += w[i] * vr[i][d];
        o[d] = acc;
    }
}

INLINE void scale(float *o, float c, int64_t n)
{
    for (int64_t i = 0; i < n; i++) o[i] *= c;
}

/* Query heads h0 .. h0 + ng of token t, all on kv head kvh. */
INLINE void attend_group(const attn_job *j, int64_t t, int64_t h0, int64_t ng, int64_t kvh)
{
    const celer_kv_cache *kv = j->kv;
    const celer_attn     *a  = j->a;
    int64_t               hd = a->head_dim;
    int64_t               kw = kv->n_kv_heads * kv->head_dim_k, vw = kv->n_kv_heads * kv->head_dim_v;
    int32_t               s = j->b->seq[t], p = j->b->pos[t];
    int32_t               lo    = a->window > 0 && p - a->window + 1 > 0 ? p - a->window + 1 : 0;
    const int32_t        *table = kv->tables + (int64_t)s * kv->max_blocks;
    float                 m[MAX_GROUP], l[MAX_GROUP], sc[MAX_GROUP][TILE];
    const float          *kr[TILE], *vr[TILE];
    for (int64_t g = 0; g < ng; g++) {
        m[g] = -INFINITY, l[g] = 0;
        memset(j->out + (t * a->n_heads + h0 + g) * hd, 0, (size_t)hd * sizeof(float));
    }
    for (int32_t p0 = lo; p0 <= p; p0 += TILE) {
        int n = p - p0 + 1 < TILE ? p - p0 + 1 : TILE;
        for (int i = 0; i < n; i++) {
            int32_t pos  = p0 + i;
            int64_t slot = (int64_t)table[pos / kv->block_size] * kv->block_size + pos % kv->block_size;
            kr[i]        = (const float *)kv->k[j->layer] + slot * kw + kvh * kv->head_dim_k;
            vr[i]        = (const float *)kv->v[j->layer] + slot * vw + kvh * kv->head_dim_v;
        }
        tile_scores(j->q + (t * a->n_heads + h0) * hd, ng, kr, n, hd, a->scale, sc);
        bool  rescale[MAX_GROUP];
        float corr[MAX_GROUP];
        for (int64_t g = 0; g < ng; g++) { /* the scores become weights in place */
            float mx = m[g];
            for (int i = 0; i < n; i++) mx = sc[g][i] > mx ? sc[g][i] : mx;
            rescale[g] = mx > m[g]; /* a new maximum: what was summed so far is rescaled */
            corr[g]    = 1.0f;
            if (rescale[g]) {
                corr[g] = expf(m[g] - mx);
                l[g] *= corr[g];
                m[g] = mx;
            }
            for (int i = 0; i < n; i++) {
                sc[g][i] = expf(sc[g][i] - mx);
                l[g] += sc[g][i];
            }
        }
        for (int64_t g = 0; g < ng; g++)
            tile_values(j->out + (t * a->n_heads + h0 + g) * hd, rescale[g], corr[g], sc[g], vr, n, hd);
    }
    for (int64_t g = 0; g < ng; g++) scale(j->out + (t * a->n_heads + h0 + g) * hd, l[g] > 0 ? 1.0f / l[g] : 0, hd);
}

INLINE void attend_body(const attn_job *j, int ith, int nth)
{
    const celer_attn *a = j->a;
    int64_t           group = a->n_heads / a->n_kv_heads, tasks = j->b->n_tokens * a->n_kv_heads;
    /* query heads per task: the whole group, or fewer when there are too few tasks to share
     * (decode of a model with few kv heads) */
    int64_t per = group < MAX_GROUP ? group : MAX_GROUP;
    while (per > 1 && tasks * ((group + per - 1) / per) < 2 * nth) per = (per + 1) / 2;
    int64_t chunks = (group + per - 1) / per;
    /* tasks dealt out in turn, not in runs: a causal prefill's later tokens see more keys, and
     * runs of tasks left the thread with the first tokens waiting for the one with the last (a
     * third of the work against two) */
    for (int64_t task = ith; task < tasks * chunks; task += nth) {
        int64_t c = task % chunks, tk = task / chunks, t = tk / a->n_kv_heads, kvh = tk % a->n_kv_heads;
        int64_t g0 = c * per, ng = group - g0 < per ? group - g0 : per;
        attend_group(j, t, kvh * group + g0, ng, kvh);
    }
}

static void attend(void *ctx, int ith, int nth) { attend_body(ctx, ith, nth); }

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) static void attend_avx2(void *ctx, int ith, int nth)
{
    attend_body(ctx, ith, nth);
}
#endif

celer_status cpu_attention(celer_backend *be, const float *q, const celer_kv_cache *kv, int32_t layer,
                           const celer_batch *b, const celer_attn *a, float *out, celer_error *err)
{
    if (a->n_kv_heads <= 0 || a->n_heads % a->n_kv_heads || a->head_dim != kv->head_dim_k ||
        kv->head_dim_v != kv->head_dim_k)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "cpu: attention with %lld heads over %lld kv heads of %lld/%lld",
                          (long long)a->n_heads, (long long)a->n_kv_heads, (long long)kv->head_dim_k,
                          (long long)kv->head_dim_v);
    attn_job      j  = {q, kv, layer, b, a, out};
    celer_pool_fn fn = attend;
#if defined(__x86_64__)
    if (cpu_isa(be) >= CELER_CPU_ISA_AVX2) fn = attend_avx2;
#endif
    celer_pool_run(cpu_pool(be), fn, &j);
    return CELER_OK;
}
