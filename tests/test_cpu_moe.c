/* Mixture of experts on the CPU backend (backends/cpu/cpu_moe.c, celer_cpu_matmul_grouped):
 *   - routing: the top-k of a softmax against a sort in double, ties to the lower index, most
 *     probable first, renormalized or not;
 *   - moe_ffn for F32, Q4_0, Q8_0 and Q4_K experts, 1 and 2 threads, a decode step (1 token)
 *     and prefill steps (37 and 300 tokens, many tokens per expert, some experts unchosen):
 *     equal within float summation order to the same experts run one token and one slot at a
 *     time through the dense matmul, and within the matmul's accuracy to the exact product in
 *     double of the dequantized weights;
 *   - the grouped matmul on its own, with rows that are not whole sets of 16 and empty
 *     segments, against the dense matmul of each segment;
 *   - experts loaded as views of their stacked tensor (celer_load_experts), where the rows cut
 *     the CPU's interleaved sets and where they do not, give the products of experts loaded
 *     one by one;
 *   - bad calls: an expert id out of range, more experts per token than experts, segments that
 *     do not start at 0 or run backwards. */
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/matmul.h"
#include "core/error.h"
#include "models/model.h"
#include "quant/dequant.h"
#include "quant/half.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "rng.h"


/* A (rows, cols) matrix of random blocks of type t: random codes, small positive scales. */
static void *random_matrix(celer_ggml_type t, int64_t rows, int64_t cols)
{
    const celer_ggml_type_info *ti = celer_ggml_type_get(t);
    size_t                      n  = (size_t)(rows * cols / ti->block_elems) * ti->block_bytes;
    unsigned char              *p  = malloc(n);
    if (t == CELER_GGML_F32) {
        for (int64_t i = 0; i < rows * cols; i++) ((float *)p)[i] = uni() * 0.2f;
        return p;
    }
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)rnd();
    /* every block's f16 scales (d, and dmin for Q4_K) at its start: 0.002 .. 0.02 */
    for (size_t b = 0; b < n / ti->block_bytes; b++) {
        unsigned char *blk = p + b * ti->block_bytes;
        for (int s = 0; s < (t == CELER_GGML_Q4_K ? 2 : 1); s++) {
            uint16_t h = celer_f32_to_half(0.002f + 0.018f * (float)rnd() / 4294967296.0f);
            memcpy(blk + 2 * s, &h, 2);
        }
    }
    return p;
}

static float silu(float g) { return g / (1.0f + expf(-g)); }

/* ---- routing ----------------------------------------------------------------------------- */

static int test_route(celer_backend *be)
{
    enum { T = 50, E = 24, K = 5 };
    static float   logits[T * E], w[T * K];
    static int32_t ids[T * K];
    celer_error    err = {0};
    for (int renorm = 0; renorm < 2; renorm++) {
        for (int i = 0; i < T * E; i++) logits[i] = uni() * 4.0f;
        for (int e = 0; e < E; e++) logits[3 * E + e] = 1.0f; /* token 3: all tied */
        logits[4 * E + 7] = logits[4 * E + 2] = 9.0f;        /* token 4: a tie at the top */
        CHECK(be->ops->moe_route(be, logits, T, E, K, renorm, ids, w, &err) == CELER_OK);
        for (int t = 0; t < T; t++) {
            const float *l = logits + t * E;
            double       mx = l[0], sum = 0, kept = 0;
            for (int e = 1; e < E; e++) mx = l[e] > mx ? l[e] : mx;
            for (int e = 0; e < E; e++) sum += exp(l[e] - mx);
            int order[E];
            for (int e = 0; e < E; e++) order[e] = e;
            for (int a = 1; a < E; a++) /* by logit descending, then index ascending */
                for (int b = a; b > 0 && (l[order[b]] > l[order[b - 1]] ||
                                          (l[order[b]] == l[order[b - 1]] && order[b] < order[b - 1])); b--) {
                    int s = order[b];
                    order[b] = order[b - 1], order[b - 1] = s;
                }
            for (int j = 0; j < K; j++) kept += exp(l[order[j]] - mx) / sum;
            for (int j = 0; j < K; j++) {
                CHECK(ids[t * K + j] == order[j]);
                double p = exp(l[order[j]] - mx) / sum / (renorm ? kept : 1.0);
                CHECK(fabs(w[t * K + j] - p) <= 1e-6 * (1 + p));
            }
        }
        CHECK(ids[3 * K] == 0 && ids[3 * K + 4] == 4);
        CHECK(ids[4 * K] == 2 && ids[4 * K + 1] == 7);
    }
    CHECK(be->ops->moe_route(be, logits, T, E, E + 1, false, ids, w, &err) == CELER_ERR_INVALID);
    CHECK(be->ops->moe_route(be, logits, T, E, 0, false, ids, w, &err) == CELER_ERR_INVALID);
    return 0;
}

/* ---- the experts' FFN ---------------------------------------------------------------------- */

typedef struct {
    celer_weight w[3 * 16];
    void        *raw[3 * 16];
    float       *deq[3 * 16]; /* dequantized, (rows, cols) */
    celer_moe    moe;
} experts;

static int make_experts(celer_backend *be, experts *x, celer_ggml_type t, int64_t E, int64_t d, int64_t ff)
{
    celer_error err = {0};
    memset(x, 0, sizeof *x);
    x->moe = (celer_moe){.n_expert = E, .n_ff = ff, .gate = x->w, .up = x->w + E, .down = x->w + 2 * E};
    for (int64_t i = 0; i < 3 * E; i++) {
        int64_t rows = i < 2 * E ? ff : d, cols = i < 2 * E ? d : ff;
        x->raw[i] = random_matrix(t, rows, cols);
        x->deq[i] = malloc((size_t)(rows * cols) * sizeof(float));
        const celer_ggml_type_info *ti = celer_ggml_type_get(t);
        size_t                      rb = (size_t)(cols / ti->block_elems) * ti->block_bytes;
        for (int64_t r = 0; r < rows; r++)
            CHECK(celer_dequant_row(t, (const char *)x->raw[i] + r * rb, x->deq[i] + r * cols, cols));
        x->w[i] = (celer_weight){.type = t, .rows = rows, .cols = cols, .data = x->raw[i]};
        CHECK(be->ops->weight_load(be, &x->w[i], &err) == CELER_OK);
    }
    return 0;
}

static void free_experts(experts *x)
{
    for (int i = 0; i < 3 * 16; i++) free(x->raw[i]), free(x->deq[i]);
}

/* Token t's output, one slot at a time through the dense matmul. */
static int dense_reference(celer_backend *be, const experts *x, const float *xt, const int32_t *ids, const float *w,
                           int64_t K, int64_t d, int64_t ff, float *out)
{
    celer_error err = {0};
    float      *g = malloc((size_t)ff * 4), *u = malloc((size_t)ff * 4), *y = malloc((size_t)d * 4);
    memset(out, 0, (size_t)d * 4);
    for (int64_t j = 0; j < K; j++) {
        int64_t e = ids[j];
        CHECK(be->ops->matmul(be, &x->moe.gate[e], xt, 1, g, &err) == CELER_OK);
        CHECK(be->ops->matmul(be, &x->moe.up[e], xt, 1, u, &err) == CELER_OK);
        for (int64_t i = 0; i < ff; i++) g[i] = silu(g[i]) * u[i];
        CHECK(be->ops->matmul(be, &x->moe.down[e], g, 1, y, &err) == CELER_OK);
        for (int64_t c = 0; c < d; c++) out[c] += w[j] * y[c];
    }
    free(g), free(u), free(y);
    return 0;
}

/* Token t's output in double from the dequantized weights, and the sum of the magnitudes of
 * its terms (the scale of the activation quantization's error). */
static void exact(const experts *x, const float *xt, const int32_t *ids, const float *w, int64_t K, int64_t d,
                  int64_t ff, double *out, double *mag)
{
    double *h = malloc((size_t)ff * sizeof *h);
    for (int64_t c = 0; c < d; c++) out[c] = mag[c] = 0;
    for (int64_t j = 0; j < K; j++) {
        int64_t      e  = ids[j];
        const float *Wg = x->deq[e], *Wu = x->deq[x->moe.n_expert + e], *Wd = x->deq[2 * x->moe.n_expert + e];
        for (int64_t i = 0; i < ff; i++) {
            double gs = 0, us = 0;
            for (int64_t c = 0; c < d; c++) gs += (double)Wg[i * d + c] * xt[c], us += (double)Wu[i * d + c] * xt[c];
            h[i] = gs / (1 + exp(-gs)) * us;
        }
        for (int64_t c = 0; c < d; c++) {
            double s = 0, m = 0;
            for (int64_t i = 0; i < ff; i++) s += (double)Wd[c * ff + i] * h[i], m += fabs((double)Wd[c * ff + i] * h[i]);
            out[c] += w[j] * s, mag[c] += fabs(w[j]) * m;
        }
    }
    free(h);
}

static int test_ffn(celer_backend *be, celer_ggml_type t, int64_t T, int64_t E, int64_t K, int64_t d, int64_t ff)
{
    experts     x;
    celer_error err = {0};
    if (make_experts(be, &x, t, E, d, ff)) return 1;
    float   *X = malloc((size_t)(T * d) * 4), *out = malloc((size_t)(T * d) * 4), *ref = malloc((size_t)d * 4);
    float   *w   = malloc((size_t)(T * K) * 4);
    int32_t *ids = malloc((size_t)(T * K) * 4);
    double  *ex = malloc((size_t)d * 8), *mag = malloc((size_t)d * 8);
    for (int64_t i = 0; i < T * d; i++) X[i] = uni();
    for (int64_t tk = 0; tk < T; tk++) /* K distinct experts, never expert E - 1 (an unchosen one) */
        for (int64_t j = 0; j < K; j++) {
            int32_t e;
            bool    dup;
            do {
                e   = (int32_t)(rnd() % (uint32_t)(E - 1));
                dup = false;
                for (int64_t i = 0; i < j; i++) dup |= ids[tk * K + i] == e;
            } while (dup);
            ids[tk * K + j] = e, w[tk * K + j] = 0.1f + 0.9f * (float)rnd() / 4294967296.0f;
        }
    CHECK(be->ops->moe_ffn(be, &x.moe, X, T, ids, w, K, CELER_ACT_SILU, out, &err) == CELER_OK);
    double worst_dense = 0, worst_exact = 0;
    for (int64_t tk = 0; tk < T; tk++) {
        if (dense_reference(be, &x, X + tk * d, ids + tk * K, w + tk * K, K, d, ff, ref)) return 1;
        exact(&x, X + tk * d, ids + tk * K, w + tk * K, K, d, ff, ex, mag);
        for (int64_t c = 0; c < d; c++) {
            double o = out[tk * d + c];
            double a = fabs(o - ref[c]) / (1e-6 + mag[c]), b = fabs(o - ex[c]) / (1e-6 + mag[c]);
            worst_dense = a > worst_dense ? a : worst_dense, worst_exact = b > worst_exact ? b : worst_exact;
        }
    }
    /* the same kernels on the same quantized activations: summation order only. Against the
     * exact product: the activations' two 8-bit codes (~15 bits) at each of the two matmuls. */
    double exact_bound = t == CELER_GGML_F32 ? 1e-5 : 2e-3;
    if (worst_dense > 1e-5 || worst_exact > exact_bound)
        fprintf(stderr, "moe_ffn %s T=%lld: worst error against the dense path %.3g, against the exact %.3g\n",
                celer_ggml_type_get(t)->name, (long long)T, worst_dense, worst_exact);
    CHECK(worst_dense <= 1e-5);
    CHECK(worst_exact <= exact_bound);

    ids[K * (T - 1)] = (int32_t)E; /* out of range */
    CHECK(be->ops->moe_ffn(be, &x.moe, X, T, ids, w, K, CELER_ACT_SILU, out, &err) == CELER_ERR_INVALID);
    CHECK(strstr(err.msg, "chose expert"));
    CHECK(be->ops->moe_ffn(be, &x.moe, X, T, ids, w, E + 1, CELER_ACT_SILU, out, &err) == CELER_ERR_INVALID);
    free(X), free(out), free(ref), free(w), free(ids), free(ex), free(mag);
    free_experts(&x);
    return 0;
}

/* ---- the grouped matmul alone -------------------------------------------------------------- */

static int test_grouped(celer_backend *be)
{
    enum { S = 4, ROWS = 40, K = 64, N = 9 };
    celer_error  err = {0};
    celer_weight w[S];
    void        *raw[S];
    for (int s = 0; s < S; s++) {
        raw[s] = random_matrix(CELER_GGML_Q4_0, ROWS, K);
        w[s]   = (celer_weight){.type = CELER_GGML_Q4_0, .rows = ROWS, .cols = K, .data = raw[s]};
        CHECK(be->ops->weight_load(be, &w[s], &err) == CELER_OK);
    }
    const int64_t     seg_x[S + 1] = {0, 3, 3, 8, N}; /* segment 1 is empty */
    const int32_t     xrow[N]      = {4, 0, 2, 1, 1, 3, 0, 4, 2};
    const void       *W[S]         = {w[0].data, w[1].data, w[2].data, w[3].data};
    float             X[5 * K], Y[N * ROWS], y[ROWS];
    celer_cpu_matrix  m = {.wtype = CELER_GGML_Q4_0, .layout = (celer_cpu_layout)w[0].layout, .rows = ROWS, .k = K};
    celer_cpu_scratch *scratch;
    for (int i = 0; i < 5 * K; i++) X[i] = uni();
    CHECK(cpu_scratch(be, celer_cpu_matmul_grouped_scratch_size(&m, N), &scratch, &err) == CELER_OK);
    CHECK(celer_cpu_matmul_grouped(cpu_pool(be), &m, S, W, seg_x, X, xrow, Y, scratch, &err) == CELER_OK);
    for (int s = 0; s < S; s++)
        for (int64_t i = seg_x[s]; i < seg_x[s + 1]; i++) {
            CHECK(be->ops->matmul(be, &w[s], X + xrow[i] * K, 1, y, &err) == CELER_OK);
            for (int r = 0; r < ROWS; r++) CHECK(fabsf(Y[i * ROWS + r] - y[r]) <= 1e-5f * (1 + fabsf(y[r])));
        }
    const int64_t late[S + 1] = {1, 3, 3, 8, N}, back[S + 1] = {0, 3, 2, 8, N};
    CHECK(celer_cpu_matmul_grouped(cpu_pool(be), &m, S, W, late, X, xrow, Y, scratch, &err) == CELER_ERR_INVALID);
    CHECK(celer_cpu_matmul_grouped(cpu_pool(be), &m, S, W, back, X, xrow, Y, scratch, &err) == CELER_ERR_INVALID);
    for (int s = 0; s < S; s++) free(raw[s]);
    return 0;
}

/* ---- stacked experts as views ---------------------------------------------------------------- */

static int test_views(celer_backend *be, int64_t R)
{
    enum { N = 3, K = 64 };
    celer_error  err = {0};
    void        *raw = random_matrix(CELER_GGML_Q4_0, N * R, K);
    size_t       rb  = (size_t)(K / 32) * celer_ggml_type_get(CELER_GGML_Q4_0)->block_bytes;
    celer_weight stacked = {.type = CELER_GGML_Q4_0, .rows = N * R, .cols = K, .data = raw}, ex[N];
    float        x[K], y[64], z[64];
    for (int i = 0; i < K; i++) x[i] = uni();
    CHECK(celer_load_experts(be, &stacked, N, ex, &err) == CELER_OK);
    for (int e = 0; e < N; e++) {
        celer_weight one = {.type = CELER_GGML_Q4_0, .rows = R, .cols = K, .data = (char *)raw + (size_t)(e * R) * rb};
        CHECK(ex[e].rows == R && ex[e].cols == K);
        CHECK(be->ops->weight_load(be, &one, &err) == CELER_OK);
        CHECK(be->ops->matmul(be, &ex[e], x, 1, y, &err) == CELER_OK);
        CHECK(be->ops->matmul(be, &one, x, 1, z, &err) == CELER_OK);
        CHECK(!memcmp(y, z, (size_t)R * sizeof *y));
    }
    celer_weight v;
    CHECK(be->ops->weight_view(be, &ex[0], 0, R + 1, &v, &err) == CELER_ERR_INVALID);
    free(raw);
    return 0;
}

int main(void)
{
    int fails = 0;
    for (int threads = 1; threads <= 2; threads++) {
        celer_backend       *be;
        celer_error          err = {0};
        celer_backend_config cfg = {.n_threads = threads};
        if (celer_cpu_backend_create(&be, &cfg, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        fails += test_route(be);
        fails += test_grouped(be);
        fails += test_views(be, 32) + test_views(be, 24);
        const celer_ggml_type types[] = {CELER_GGML_F32, CELER_GGML_Q4_0, CELER_GGML_Q8_0, CELER_GGML_Q4_K};
        for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
            int64_t d = types[i] == CELER_GGML_Q4_K ? 256 : 96, ff = types[i] == CELER_GGML_Q4_K ? 256 : 64;
            fails += test_ffn(be, types[i], 1, 16, 4, d, ff);
            fails += test_ffn(be, types[i], 37, 16, 4, d, ff);
        }
        fails += test_ffn(be, CELER_GGML_Q4_0, 300, 8, 2, 128, 96);
        be->ops->free(be);
    }
    if (fails) fprintf(stderr, "test_cpu_moe: %d failures\n", fails);
    return fails != 0;
}
