/* Mixture of experts on the CPU: the router's top-k, and the experts' feed-forward as three
 * grouped matmuls (backends/cpu/matmul.h). The (token, slot) pairs of a step are sorted by
 * expert, so each chosen expert's matrices are read once per step whether one token chose it
 * (decode: only the selected experts' rows are read) or hundreds did (prefill: a matrix-matrix
 * product per expert). Unchosen experts are never touched. */
#include "backends/cpu/cpu_backend.h"

#include "backends/cpu/matmul.h"
#include "core/error.h"

#include <math.h>
#include <string.h>

celer_status cpu_moe_route(celer_backend *be, const float *logits, int64_t T, int64_t n_expert, int64_t n_used,
                           bool renorm, int32_t *ids, float *w, celer_error *err)
{
    (void)be;
    if (n_expert <= 0 || n_used <= 0 || n_used > n_expert || n_expert > CPU_MOE_MAX_EXPERTS)
        return celer_fail(err, CELER_ERR_INVALID, "cpu: MoE routing of %lld experts to %lld per token (1 to %d "
                          "experts, at most all of them per token)", (long long)n_expert, (long long)n_used,
                          CPU_MOE_MAX_EXPERTS);
    float p[CPU_MOE_MAX_EXPERTS];
    for (int64_t t = 0; t < T; t++) {
        const float *l  = logits + t * n_expert;
        float        mx = l[0], sum = 0;
        for (int64_t e = 1; e < n_expert; e++) mx = l[e] > mx ? l[e] : mx;
        for (int64_t e = 0; e < n_expert; e++) sum += p[e] = expf(l[e] - mx);
        int32_t *id = ids + t * n_used;
        float   *wt = w + t * n_used, kept = 0;
        for (int64_t j = 0; j < n_used; j++) { /* the largest left; on a tie the lower index */
            int64_t best = -1;
            for (int64_t e = 0; e < n_expert; e++)
                if (p[e] >= 0 && (best < 0 || p[e] > p[best])) best = e;
            id[j] = (int32_t)best;
            wt[j] = p[best] / sum;
            kept += wt[j];
            p[best] = -1; /* taken */
        }
        if (renorm)
            for (int64_t j = 0; j < n_used; j++) wt[j] /= kept;
    }
    return CELER_OK;
}

/* A projection's storage, as its expert 0 has it (every expert is stored alike). */
static celer_cpu_matrix matrix_of(const celer_weight *w)
{
    return (celer_cpu_matrix){.wtype = w->type, .q = w->type == CELER_WEIGHT_MLX ? &w->mlx : NULL,
                              .layout = (celer_cpu_layout)w->layout, .rows = w->rows, .k = w->cols};
}

celer_status cpu_moe_ffn(celer_backend *be, const celer_moe *moe, const float *x, int64_t T, const int32_t *ids,
                         const float *w, int64_t n_used, celer_act act, float *out, celer_error *err)
{
    int64_t E = moe->n_expert, ff = moe->n_ff, d = moe->down[0].rows, N = T * n_used;
    if (E <= 0 || E > CPU_MOE_MAX_EXPERTS || n_used <= 0 || n_used > E)
        return celer_fail(err, CELER_ERR_INVALID, "cpu: MoE of %lld experts, %lld per token", (long long)E,
                          (long long)n_used);
    if (T <= 0) return CELER_OK;
    int64_t count[CPU_MOE_MAX_EXPERTS] = {0};
    for (int64_t i = 0; i < N; i++) {
        if (ids[i] < 0 || ids[i] >= E)
            return celer_fail(err, CELER_ERR_INVALID, "cpu: MoE: token %lld chose expert %d of %lld",
                              (long long)(i / n_used), ids[i], (long long)E);
        count[ids[i]]++;
    }
    /* work: seg_x (E + 1), the matrices of each segment (3 E), xrow and pos (N each), then the
     * gate and up outputs (N, ff) and the experts' outputs (N, d) in expert order */
    size_t off_w = (size_t)(E + 1) * sizeof(int64_t), off_i = off_w + 3 * (size_t)E * sizeof(void *);
    size_t off_f = (off_i + 2 * (size_t)N * sizeof(int32_t) + 63) / 64 * 64;
    size_t bytes = off_f + (size_t)N * (size_t)(2 * ff + d) * sizeof(float);
    char  *work;
    if (cpu_work(be, bytes, (void **)&work, err)) return err->code;
    int64_t     *seg_x = (int64_t *)work;
    const void **wg = (const void **)(work + off_w), **wu = wg + E, **wd = wu + E;
    int32_t     *xrow = (int32_t *)(work + off_i), *pos = xrow + N;
    float       *g = (float *)(work + off_f), *u = g + N * ff, *y = u + N * ff;
    int64_t      n_seg = 0, at[CPU_MOE_MAX_EXPERTS];
    seg_x[0]           = 0;
    for (int64_t e = 0; e < E; e++) {
        if (!count[e]) continue;
        at[e] = seg_x[n_seg];
        wg[n_seg] = moe->gate[e].data, wu[n_seg] = moe->up[e].data, wd[n_seg] = moe->down[e].data;
        seg_x[n_seg + 1] = seg_x[n_seg] + count[e];
        n_seg++;
    }
    for (int64_t i = 0; i < N; i++) { /* tokens in order within each expert */
        int64_t r = at[ids[i]]++;
        xrow[r] = (int32_t)(i / n_used), pos[i] = (int32_t)r;
    }
    celer_cpu_matrix   mg = matrix_of(&moe->gate[0]), mu = matrix_of(&moe->up[0]), md = matrix_of(&moe->down[0]);
    size_t             need = celer_cpu_matmul_grouped_scratch_size(&mg, N);
    size_t             nu = celer_cpu_matmul_grouped_scratch_size(&mu, N), nd = celer_cpu_matmul_grouped_scratch_size(&md, N);
    celer_cpu_scratch *s;
    need = nu > need ? nu : need, need = nd > need ? nd : need;
    if (cpu_scratch(be, need, &s, err)) return err->code;
    celer_pool *pool = cpu_pool(be);
    if (celer_cpu_matmul_grouped(pool, &mg, n_seg, wg, seg_x, x, xrow, g, s, err) ||
        celer_cpu_matmul_grouped(pool, &mu, n_seg, wu, seg_x, x, xrow, u, s, err) ||
        cpu_glu(be, g, u, N * ff, act, err) ||
        celer_cpu_matmul_grouped(pool, &md, n_seg, wd, seg_x, g, NULL, y, s, err))
        return err->code;
    for (int64_t t = 0; t < T; t++) {
        float *o = out + t * d;
        memset(o, 0, (size_t)d * sizeof *o);
        for (int64_t j = 0; j < n_used; j++) {
            const float *r  = y + (int64_t)pos[t * n_used + j] * d;
            float        wt = w[t * n_used + j];
            for (int64_t c = 0; c < d; c++) o[c] += wt * r[c];
        }
    }
    return CELER_OK;
}

celer_status cpu_mul_sigmoid(celer_backend *be, float *x, const float *g, int64_t T, int64_t n, celer_error *err)
{
    (void)be, (void)err;
    for (int64_t t = 0; t < T; t++) {
        float s = 1.0f / (1.0f + expf(-g[t]));
        for (int64_t i = 0; i < n; i++) x[t * n + i] *= s;
    }
    return CELER_OK;
}
