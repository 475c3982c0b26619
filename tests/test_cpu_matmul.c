/* celer_cpu_matmul: every weight type × shape × kernel level this CPU runs × 1 and 2 threads,
 * against the exact product (dequantized weights, f32 activations, double) within the accuracy
 * contract of backends/cpu/matmul.h, and every SIMD level against the scalar reference on the
 * same quantized activations. Also: the AVX2 activation quantizers equal the reference ones bit
 * for bit, and bad calls fail with the right status. */
#include "backends/cpu/dot.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/repack.h"
#include "core/threads.h"
#include "quant/dequant.h"
#include "quant/half.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "rng.h"


static uint16_t rnd_half(float scale) { return celer_f32_to_half(uni() * scale); }

static void put_half(void *p, size_t off, uint16_t h) { memcpy((char *)p + off, &h, 2); }

/* rows · k / block random valid blocks: random bytes, with finite random scales. */
static void random_weights(celer_ggml_type t, void *w, int64_t rows, int64_t k)
{
    const celer_ggml_type_info *ti = celer_ggml_type_get(t);
    size_t                      nb = (size_t)(rows * k / ti->block_elems), bs = ti->block_bytes;
    uint8_t                    *p  = w;
    for (size_t i = 0; i < nb * bs; i++) p[i] = (uint8_t)rnd();
    for (size_t b = 0; b < nb; b++) {
        void *blk = p + b * bs;
        switch (t) {
        case CELER_GGML_F32: {
            float f = uni() * 2.0f;
            memcpy(blk, &f, 4);
            break;
        }
        case CELER_GGML_F16: put_half(blk, 0, rnd_half(2.0f)); break;
        case CELER_GGML_BF16: {
            uint16_t h = celer_f32_to_bf16(uni() * 2.0f);
            memcpy(blk, &h, 2);
            break;
        }
        case CELER_GGML_Q4_0:
        case CELER_GGML_Q5_0:
        case CELER_GGML_Q8_0: put_half(blk, 0, rnd_half(0.05f)); break;
        case CELER_GGML_Q4_1:
        case CELER_GGML_Q5_1:
        case CELER_GGML_Q4_K:
        case CELER_GGML_Q5_K:
            put_half(blk, 0, rnd_half(0.05f));
            put_half(blk, 2, rnd_half(0.05f));
            break;
        case CELER_GGML_Q6_K: put_half(blk, offsetof(celer_block_q6_K, d), rnd_half(0.01f)); break;
        default: break;
        }
    }
}

/* Per activation i: the bound e(i) of its error (matmul.h: one fine step of its block) and its
 * quantized value x̂ = d · (256 · hi + lo) as the reference quantizer makes it. */
static void act_error(celer_cpu_act act, const float *x, int64_t k, float *e, float *xq)
{
    if (act == CELER_CPU_ACT_F32) {
        for (int64_t i = 0; i < k; i++) e[i] = 0, xq[i] = x[i];
        return;
    }
    int64_t blk = act == CELER_CPU_ACT_X32 ? 32 : 256, nb = k / blk;
    void   *row = malloc(nb * (sizeof(celer_cpu_x256) + sizeof(int32_t)));
    if (!row) abort();
    if (act == CELER_CPU_ACT_X32) celer_cpu_quantize_x32_ref(x, row, nb, 0, nb);
    else celer_cpu_quantize_x256_ref(x, row, nb, 0, nb);
    for (int64_t b = 0; b < nb; b++) {
        const char   *p  = (const char *)row + b * (blk == 32 ? sizeof(celer_cpu_x32) : sizeof(celer_cpu_x256));
        const int8_t *hi = blk == 32 ? ((const celer_cpu_x32 *)p)->hi : ((const celer_cpu_x256 *)p)->hi;
        const int8_t *lo = blk == 32 ? ((const celer_cpu_x32 *)p)->lo : ((const celer_cpu_x256 *)p)->lo;
        float         d, amax = 0;
        memcpy(&d, p, sizeof d);
        for (int64_t i = 0; i < blk; i++) amax = fmaxf(amax, fabsf(x[b * blk + i]));
        for (int64_t i = 0; i < blk; i++) {
            xq[b * blk + i] = (float)((double)d * (256.0 * hi[i] + lo[i]));
            e[b * blk + i]  = amax / 127.0f / 256.0f;
        }
    }
    free(row);
}

typedef struct {
    celer_pool *pool[3]; /* NULL, 1 thread, 2 threads */
    int         n_pool;
} ctx;

static int64_t n_checked, n_skipped;

static int check_shape(const ctx *c, celer_ggml_type t, int64_t rows, int64_t k, int64_t T,
                       const celer_host_info *host)
{
    const celer_ggml_type_info *ti  = celer_ggml_type_get(t);
    celer_cpu_act               act = celer_cpu_act_of(t);
    size_t                      wb  = (size_t)(k / ti->block_elems) * ti->block_bytes;
    void  *W  = malloc(wb * (size_t)rows);
    float *Wf = malloc(sizeof(float) * (size_t)(rows * k)), *Wa = malloc(sizeof(float) * (size_t)(rows * k));
    float *X = malloc(sizeof(float) * (size_t)(T * k)), *E = malloc(sizeof(float) * (size_t)(T * k));
    float *XQ = malloc(sizeof(float) * (size_t)(T * k));
    float *Y = malloc(sizeof(float) * (size_t)(T * rows)), *Yref = malloc(sizeof(float) * (size_t)(T * rows));
    double *exact = malloc(sizeof(double) * (size_t)(T * rows)), *bound = malloc(sizeof(double) * (size_t)(T * rows));
    double *scale = malloc(sizeof(double) * (size_t)(T * rows));
    CHECK(W && Wf && Wa && X && E && XQ && Y && Yref && exact && bound && scale);
    random_weights(t, W, rows, k);
    random_acts(X, T, k);
    for (int64_t r = 0; r < rows; r++) CHECK(celer_dequant_row(t, (char *)W + r * wb, Wf + r * k, k));
    /* Types with a min (w = a + b: a = scale · code, b = the block's or sub-block's min) are summed
     * by the kernels as two terms that may cancel; float rounding scales with |a| + |b|. Wa = a. */
    memcpy(Wa, Wf, sizeof(float) * (size_t)(rows * k));
    if (t == CELER_GGML_Q4_1 || t == CELER_GGML_Q5_1 || t == CELER_GGML_Q4_K || t == CELER_GGML_Q5_K) {
        char *Wz = malloc(wb * (size_t)rows);
        CHECK(Wz);
        memcpy(Wz, W, wb * (size_t)rows);
        for (size_t b = 0; b < wb * (size_t)rows / ti->block_bytes; b++) put_half(Wz, b * ti->block_bytes + 2, 0);
        for (int64_t r = 0; r < rows; r++) CHECK(celer_dequant_row(t, Wz + r * wb, Wa + r * k, k));
        free(Wz);
    }
    for (int64_t tt = 0; tt < T; tt++) act_error(act, X + tt * k, k, E + tt * k, XQ + tt * k);
    for (int64_t tt = 0; tt < T; tt++)
        for (int64_t r = 0; r < rows; r++) {
            double s = 0, eb = 0, a = 0, aq = 0;
            for (int64_t i = 0; i < k; i++) {
                double w = Wf[r * k + i], x = X[tt * k + i], wa = Wa[r * k + i];
                double mag = fabs(wa) + fabs(w - wa); /* |a| + |b| */
                s += w * x;
                eb += fabs(w) * E[tt * k + i];
                a += mag * fabs(x);
                aq += mag * fabs(XQ[tt * k + i]);
            }
            exact[tt * rows + r] = s;
            bound[tt * rows + r] = 1.05 * eb + 1e-5 * a + 1e-30;
            scale[tt * rows + r] = 1e-5 * aq + 1e-30;
        }

    celer_error       err = {0};
    celer_cpu_scratch s   = {0};
    for (int isa = 0; isa < CELER_CPU_ISA_COUNT; isa++) {
        if (!celer_cpu_isa_available((celer_cpu_isa)isa, host) || (int)celer_cpu_isa_for_type(isa, t) != isa) {
            n_skipped++;
            continue;
        }
        CHECK(celer_cpu_scratch_init(&s, (celer_cpu_isa)isa, celer_cpu_matmul_scratch_size(t, k, T), &err) == CELER_OK);
        /* the stored layout on every pool, then the r16 layout where this level runs it */
        bool  r16 = celer_cpu_r16_available((celer_cpu_isa)isa, t);
        char *P   = r16 ? malloc(celer_cpu_r16_size(t, rows, k)) : NULL;
        CHECK(!r16 || P);
        if (r16) celer_cpu_r16_pack(t, W, rows, k, P);
        for (int p = 0; p < c->n_pool * (r16 ? 2 : 1); p++) {
            celer_cpu_layout lay = p < c->n_pool ? CELER_CPU_LAYOUT_STORED : CELER_CPU_LAYOUT_R16;
            for (int64_t i = 0; i < T * rows; i++) Y[i] = NAN;
            if (celer_cpu_matmul(c->pool[p % c->n_pool], t, lay, lay ? P : W, rows, k, X, T, Y, &s, &err) != CELER_OK) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
            }
            for (int64_t i = 0; i < T * rows; i++) {
                double dev = fabs(Y[i] - exact[i]);
                if (!(dev <= bound[i])) {
                    fprintf(stderr, "%s %s rows %lld k %lld T %lld pool %d: Y[%lld][%lld] = %.9g, exact %.9g, "
                            "off by %.3g > bound %.3g\n", ti->name, lay ? "r16" : celer_cpu_isa_name(isa), (long long)rows,
                            (long long)k, (long long)T, p, (long long)(i / rows), (long long)(i % rows), Y[i],
                            exact[i], dev, bound[i]);
                    return 1;
                }
                if (isa == CELER_CPU_ISA_REF && p == 0) Yref[i] = Y[i];
                double dr = fabs(Y[i] - Yref[i]);
                if (!(dr <= scale[i])) {
                    fprintf(stderr, "%s %s rows %lld k %lld T %lld pool %d: Y[%lld][%lld] = %.9g, ref %.9g, "
                            "off by %.3g > 1e-5 of sum |w x| %.3g\n", ti->name, lay ? "r16" : celer_cpu_isa_name(isa),
                            (long long)rows, (long long)k, (long long)T, p, (long long)(i / rows),
                            (long long)(i % rows), Y[i], Yref[i], dr, scale[i]);
                    return 1;
                }
            }
            n_checked++;
        }
        free(P);
        celer_cpu_scratch_free(&s);
    }
    free(W), free(Wf), free(Wa), free(X), free(E), free(XQ), free(Y), free(Yref), free(exact), free(bound), free(scale);
    return 0;
}

/* The AVX2 activation quantizers give the reference's bytes, on random rows, ties, non-finite
 * values and zero blocks, for whole rows and for block ranges. */
static int test_quantizers(const celer_host_info *host)
{
#if defined(__x86_64__)
    if (!celer_cpu_isa_available(CELER_CPU_ISA_AVX2, host)) return 0;
    enum { N = 4096, NB32 = N / 32, NB256 = N / 256 };
    static float x[N];
    static char  a[NB32 * (sizeof(celer_cpu_x32) + sizeof(int32_t))], b[sizeof a];
    static char  aK[NB256 * sizeof(celer_cpu_x256)], bK[sizeof aK];
    for (int rep = 0; rep < 20; rep++) {
        random_acts(x, 1, N);
        if (rep == 1) /* ties: d = 1 exactly, x / d on .5 */
            for (int i = 0; i < N; i++) x[i] = i % 32 == 0 ? 127.0f : (float)(i % 64 - 32) + 0.5f;
        if (rep == 2) x[5] = NAN, x[300] = INFINITY, x[700] = -INFINITY;
        if (rep == 3) memset(x + 64, 0, 256 * sizeof *x);
        memset(a, 0x5a, sizeof a), memset(b, 0x5a, sizeof b), memset(aK, 0x5a, sizeof aK), memset(bK, 0x5a, sizeof bK);
        int64_t lo = rep % 4 == 0 ? 3 : 0; /* a block range that is not the whole row */
        celer_cpu_quantize_x32_ref(x, a, NB32, lo, NB32);
        celer_cpu_quantize_x32_avx2(x, b, NB32, lo, NB32);
        CHECK(memcmp(a, b, sizeof a) == 0);
        celer_cpu_quantize_x256_ref(x, aK, NB256, lo, NB256);
        celer_cpu_quantize_x256_avx2(x, bK, NB256, lo, NB256);
        CHECK(memcmp(aK, bK, sizeof aK) == 0);
    }
#else
    (void)host;
#endif
    return 0;
}

static int test_errors(void)
{
    celer_error       err = {0};
    celer_cpu_scratch s   = {0};
    float             x[256] = {0}, y[4];
    uint8_t           w[1024] = {0};
    CHECK(celer_cpu_scratch_init(&s, CELER_CPU_ISA_REF, 0, &err) == CELER_OK);
    CHECK(celer_cpu_matmul(NULL, CELER_GGML_Q2_K, CELER_CPU_LAYOUT_STORED, w, 1, 256, x, 1, y, &s, &err) == CELER_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "Q2_K") != NULL);
    CHECK(celer_cpu_matmul(NULL, (celer_ggml_type)5, CELER_CPU_LAYOUT_STORED, w, 1, 256, x, 1, y, &s, &err) == CELER_ERR_UNSUPPORTED);
    CHECK(celer_cpu_matmul(NULL, CELER_GGML_Q4_0, CELER_CPU_LAYOUT_STORED, w, 1, 48, x, 1, y, &s, &err) == CELER_ERR_INVALID);
    CHECK(celer_cpu_matmul(NULL, CELER_GGML_Q4_0, CELER_CPU_LAYOUT_STORED, w, 1, 32, x, 1, y, &s, &err) == CELER_ERR_INVALID); /* no scratch */
    CHECK(strstr(err.msg, "scratch") != NULL);
    CHECK(celer_cpu_matmul(NULL, CELER_GGML_F32, CELER_CPU_LAYOUT_STORED, w, 1, 5, x, 1, y, &s, &err) == CELER_OK); /* F32 needs none */
    CHECK(celer_cpu_matmul_scratch_size(CELER_GGML_Q4_K, 512, 3) == 3 * 2 * sizeof(celer_cpu_x256));
    CHECK(celer_cpu_matmul_scratch_size(CELER_GGML_Q4_0, 64, 3) == 3 * 2 * (sizeof(celer_cpu_x32) + sizeof(int32_t)));
    CHECK(celer_cpu_matmul_scratch_size(CELER_GGML_F16, 512, 3) == 0);
    celer_cpu_scratch_free(&s);
    celer_cpu_scratch_free(&s);
    celer_cpu_scratch_free(NULL);
    return 0;
}

/* Packing to r16 and reading rows back gives every stored row byte for byte, tail rows too. */
static int test_r16_rows(void)
{
    static const celer_ggml_type types[] = {CELER_GGML_Q4_0, CELER_GGML_Q4_1, CELER_GGML_Q5_0, CELER_GGML_Q5_1,
                                            CELER_GGML_Q8_0, CELER_GGML_Q4_K, CELER_GGML_Q6_K};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        celer_ggml_type t = types[i];
        int64_t         rows = 37, blk = celer_ggml_type_get(t)->block_elems, k = 3 * blk;
        size_t          rb = (size_t)(k / blk) * celer_ggml_type_get(t)->block_bytes;
        char           *W = malloc(rb * rows), *P = malloc(celer_cpu_r16_size(t, rows, k)), *row = malloc(rb);
        CHECK(W && P && row && celer_cpu_r16_supported(t));
        CHECK(celer_cpu_r16_size(t, rows, k) == 2 * 3 * celer_cpu_r16_block_bytes(t) + 5 * rb);
        random_weights(t, W, rows, k);
        celer_cpu_r16_pack(t, W, rows, k, P);
        for (int64_t r = 0; r < rows; r++) {
            celer_cpu_r16_row(t, P, rows, k, r, row);
            CHECK(memcmp(row, W + r * rb, rb) == 0);
        }
        free(W), free(P), free(row);
    }
    CHECK(!celer_cpu_r16_supported(CELER_GGML_Q5_K) && !celer_cpu_r16_supported(CELER_GGML_F16));
    return 0;
}

int main(void)
{
    celer_host_info host = {0};
    celer_host_info_read(&host);
    fprintf(stderr, "test_cpu_matmul: kernel levels here:");
    for (int i = 0; i < CELER_CPU_ISA_COUNT; i++)
        if (celer_cpu_isa_available((celer_cpu_isa)i, &host)) fprintf(stderr, " %s", celer_cpu_isa_name(i));
    fprintf(stderr, "\n");

    ctx         c   = {.n_pool = 3};
    celer_error err = {0};
    CHECK(celer_pool_init(&c.pool[1], 1, &err) == CELER_OK);
    CHECK(celer_pool_init(&c.pool[2], 2, &err) == CELER_OK);

    if (test_errors() || test_quantizers(&host) || test_r16_rows()) return 1;

    static const celer_ggml_type types[] = {CELER_GGML_F32,  CELER_GGML_F16,  CELER_GGML_BF16, CELER_GGML_Q4_0,
                                            CELER_GGML_Q4_1, CELER_GGML_Q5_0, CELER_GGML_Q5_1, CELER_GGML_Q8_0,
                                            CELER_GGML_Q4_K, CELER_GGML_Q5_K, CELER_GGML_Q6_K};
    static const int64_t rows[] = {1, 7, 64, 257}, Ts[] = {1, 2, 3, 8, 33};
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        celer_ggml_type t   = types[ti];
        int64_t         blk = celer_ggml_type_get(t)->block_elems, bk = blk == 1 ? 32 : blk;
        /* one block, several blocks (odd count; for F32/F16/BF16 also a length off the vector width), 4096 */
        int64_t ks[] = {blk == 1 ? 1 : blk, blk == 1 ? 3 * bk + 5 : 3 * bk, 4096};
        for (size_t ri = 0; ri < 4; ri++)
            for (size_t ki = 0; ki < 3; ki++)
                for (size_t Ti = 0; Ti < 5; Ti++) {
                    if (check_shape(&c, t, rows[ri], ks[ki], Ts[Ti], &host)) return 1;
                }
    }
    celer_pool_free(c.pool[1]);
    celer_pool_free(c.pool[2]);
    fprintf(stderr, "test_cpu_matmul: %lld runs pass (%lld level/type pairs fall back to a lower level)\n",
            (long long)n_checked, (long long)n_skipped);
    return 0;
}
