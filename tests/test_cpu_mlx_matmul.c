/* celer_cpu_matmul_mlx: every MLX format (affine 2, 3, 4, 5, 6, 8 bits in groups of 32, 64, 128
 * with BF16, F16 and F32 scales; mxfp4; mxfp8; nvfp4 with and without a global scale) × shapes
 * (row counts that are not multiples of 16, k of 1 to 3 column blocks and a long one) × both
 * layouts × every kernel level this CPU runs × 1 and 2 threads. Against the exact product of
 * the reference dequantizer's values (celer_mlx_dequant_row, the ground truth) and the f32
 * activations within the accuracy contract of backends/cpu/matmul.h, and every SIMD level
 * against the scalar reference on the same quantized activations. Also: packing and reading
 * rows back gives mlx's arrays byte for byte, the AVX2 X32H quantizer equals the reference, and
 * bad calls fail with the right status. */
#include "backends/cpu/dot.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/repack_mlx.h"
#include "core/threads.h"
#include "quant/half.h"
#include "quant/mlx_quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#define RNG_SEED 0x243f6a8885a308d3ull
#include "rng.h"


/* An MLX matrix as mlx stores it, and its values as the reference dequantizer gives them. */
typedef struct {
    celer_mlx_quant      q;
    celer_mlx_quant_data d;
    void                *words, *scales, *biases;
    float               *W;  /* (rows, cols) the values mlx's matmul uses */
    float               *Wa; /* (rows, cols) affine: scale · q alone (the bias part is W - Wa) */
} mlx_matrix;

static void put_float(celer_st_dtype dt, void *p, size_t i, float v)
{
    if (dt == CELER_ST_F32) {
        memcpy((char *)p + 4 * i, &v, 4);
        return;
    }
    uint16_t h = dt == CELER_ST_F16 ? celer_f32_to_half(v) : celer_f32_to_bf16(v);
    memcpy((char *)p + 2 * i, &h, 2);
}

static float get_float(celer_st_dtype dt, const void *p, size_t i)
{
    float    f;
    uint16_t h;
    if (dt == CELER_ST_F32) return memcpy(&f, (const char *)p + 4 * i, 4), f;
    memcpy(&h, (const char *)p + 2 * i, 2);
    return dt == CELER_ST_F16 ? celer_half_to_f32(h) : celer_bf16_to_f32(h);
}

/* The reference values of every row, in f32 (affine scales and biases widened exactly). */
static int reference_values(mlx_matrix *m, bool scale_part_only)
{
    celer_mlx_quant      q = m->q;
    celer_mlx_quant_data d = m->d;
    size_t               ng = (size_t)(q.rows * (q.cols / q.group_size));
    float               *sb = NULL;
    if (q.mode == CELER_HF_QUANT_AFFINE) {
        sb = malloc(2 * ng * sizeof *sb);
        CHECK(sb);
        for (size_t i = 0; i < ng; i++)
            sb[i] = get_float(q.dtype, m->scales, i), sb[ng + i] = scale_part_only ? 0 : get_float(q.dtype, m->biases, i);
        d.scales = sb, d.scales_bytes = ng * 4, d.biases = sb + ng, d.biases_bytes = ng * 4;
    }
    q.dtype         = CELER_ST_F32;
    celer_error err = {0};
    float      *out = scale_part_only ? m->Wa : m->W;
    for (int64_t r = 0; r < q.rows; r++)
        if (celer_mlx_dequant_row(&q, &d, r, out + r * q.cols, &err) != CELER_OK) {
            fprintf(stderr, "%s\n", err.msg);
            free(sb);
            return 1;
        }
    free(sb);
    return 0;
}

/* Random codes and finite scales: affine scales and biases of either sign, E8M0 exponents near
 * 1, E4M3 scale bytes and mxfp8 codes of every value but NaN. */
static int make_matrix(mlx_matrix *m, celer_hf_quant_mode mode, uint32_t bits, uint32_t gs, celer_st_dtype dt,
                       bool gscale, int64_t rows, int64_t cols)
{
    memset(m, 0, sizeof *m);
    m->q = (celer_mlx_quant){.name = "test", .mode = mode, .bits = bits, .group_size = gs, .dtype = dt,
                             .has_global_scale = gscale, .global_scale = gscale ? 1.7f : 0, .rows = rows, .cols = cols};
    celer_mlx_quant_shapes s;
    celer_error            err = {0};
    CHECK(celer_mlx_quant_get_shapes(&m->q, &s, &err) == CELER_OK);
    m->words  = malloc(s.weight_bytes);
    m->scales = malloc(s.scales_bytes);
    m->biases = s.has_biases ? malloc(s.biases_bytes) : NULL;
    m->W      = malloc(sizeof(float) * (size_t)(rows * cols));
    m->Wa     = malloc(sizeof(float) * (size_t)(rows * cols));
    CHECK(m->words && m->scales && (!s.has_biases || m->biases) && m->W && m->Wa);
    uint8_t *w = m->words;
    for (uint64_t i = 0; i < s.weight_bytes; i++) w[i] = (uint8_t)rnd();
    if (mode == CELER_HF_QUANT_MXFP8)
        for (uint64_t i = 0; i < s.weight_bytes; i++)
            if ((w[i] & 0x7f) == 0x7f) w[i] ^= 1; /* no NaN */
    uint64_t ng = (uint64_t)(rows * (cols / gs));
    uint8_t *sc = m->scales;
    for (uint64_t i = 0; i < ng; i++) {
        if (mode == CELER_HF_QUANT_AFFINE) {
            put_float(dt, m->scales, i, uni() * 0.05f);
            put_float(dt, m->biases, i, uni() * 0.5f);
        } else if (mode == CELER_HF_QUANT_NVFP4) {
            sc[i] = (uint8_t)rnd();
            if ((sc[i] & 0x7f) == 0x7f) sc[i] ^= 1;
        } else {
            sc[i] = (uint8_t)(120 + rnd() % 12);
        }
    }
    m->d = (celer_mlx_quant_data){m->words, s.weight_bytes, m->scales, s.scales_bytes, m->biases, s.biases_bytes};
    if (reference_values(m, false)) return 1;
    if (mode == CELER_HF_QUANT_AFFINE) return reference_values(m, true);
    memcpy(m->Wa, m->W, sizeof(float) * (size_t)(rows * cols));
    return 0;
}

static void free_matrix(mlx_matrix *m) { free(m->words), free(m->scales), free(m->biases), free(m->W), free(m->Wa); }

/* Per activation: its error bound e (one fine step of its block; 0 for f32) and its quantized
 * value x̂, as the reference quantizer makes them. */
static void act_error(bool f32, const float *x, int64_t k, float *e, float *xq)
{
    if (f32) {
        for (int64_t i = 0; i < k; i++) e[i] = 0, xq[i] = x[i];
        return;
    }
    int64_t        nb  = k / 32;
    celer_cpu_x32 *row = malloc((size_t)nb * (sizeof *row + sizeof(int32_t)));
    if (!row) abort();
    celer_cpu_quantize_x32_ref(x, row, nb, 0, nb);
    for (int64_t b = 0; b < nb; b++) {
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * b + i]));
        for (int i = 0; i < 32; i++) {
            xq[32 * b + i] = (float)((double)row[b].d * (256.0 * row[b].hi[i] + row[b].lo[i]));
            e[32 * b + i]  = amax / 127.0f / 256.0f;
        }
    }
    free(row);
}

typedef struct {
    celer_pool *pool[3]; /* NULL, 1 thread, 2 threads */
    int         n_pool;
} ctx;

static int64_t n_checked;

static const char *fmt_name(const celer_mlx_quant *q, char *buf, size_t n)
{
    char d[64];
    snprintf(buf, n, "%s %s%s", celer_mlx_quant_describe(q, d, sizeof d), celer_st_dtype_name(q->dtype),
             q->has_global_scale ? " +global" : "");
    return buf;
}

static int check_shape(const ctx *c, const mlx_matrix *m, int64_t T, const celer_host_info *host)
{
    const celer_mlx_quant *q = &m->q;
    const int64_t          rows = q->rows, k = q->cols;
    const bool             f32 = celer_cpu_mlx_act(q) == CELER_CPU_ACT_F32;
    float  *X = malloc(sizeof(float) * (size_t)(T * k)), *E = malloc(sizeof(float) * (size_t)(T * k));
    float  *XQ = malloc(sizeof(float) * (size_t)(T * k));
    float  *Y = malloc(sizeof(float) * (size_t)(T * rows)), *Yref = malloc(sizeof(float) * (size_t)(T * rows));
    double *exact = malloc(sizeof(double) * (size_t)(T * rows)), *bound = malloc(sizeof(double) * (size_t)(T * rows));
    double *scale = malloc(sizeof(double) * (size_t)(T * rows));
    char   *P = malloc(celer_cpu_mlx_size(q)), *P16 = malloc(celer_cpu_mlx_size(q));
    CHECK(X && E && XQ && Y && Yref && exact && bound && scale && P && P16);
    random_acts(X, T, k);
    for (int64_t t = 0; t < T; t++) act_error(f32, X + t * k, k, E + t * k, XQ + t * k);
    for (int64_t t = 0; t < T; t++)
        for (int64_t r = 0; r < rows; r++) {
            double s = 0, eb = 0, a = 0, aq = 0;
            for (int64_t i = 0; i < k; i++) {
                double w = m->W[r * k + i], x = X[t * k + i], wa = m->Wa[r * k + i];
                double mag = fabs(wa) + fabs(w - wa); /* |scale · q| + |bias| */
                s += w * x;
                eb += fabs(w) * E[t * k + i];
                a += mag * fabs(x);
                aq += mag * fabs(XQ[t * k + i]);
            }
            exact[t * rows + r] = s;
            bound[t * rows + r] = 1.05 * eb + 1e-5 * a + 1e-30;
            scale[t * rows + r] = 1e-5 * aq + 1e-30;
        }
    celer_cpu_mlx_pack(q, &m->d, 1, 0, rows, P);
    int64_t sets = rows / 16;
    celer_cpu_mlx_pack(q, &m->d, 16, 0, 16 * sets, P16);
    celer_cpu_mlx_pack(q, &m->d, 1, 16 * sets, rows - 16 * sets, P16 + (size_t)(16 * sets) * celer_cpu_mlx_row_bytes(q));

    char              name[96];
    celer_error       err = {0};
    celer_cpu_scratch s   = {0};
    fmt_name(q, name, sizeof name);
    for (int isa = 0; isa < CELER_CPU_ISA_COUNT; isa++) {
        if (!celer_cpu_isa_available((celer_cpu_isa)isa, host) || (int)celer_cpu_mlx_isa_for(isa, q) != isa) continue;
        CHECK(celer_cpu_scratch_init(&s, (celer_cpu_isa)isa, celer_cpu_mlx_matmul_scratch_size(q, T), &err) == CELER_OK);
        bool r16 = celer_cpu_mlx_r16_available((celer_cpu_isa)isa, q);
        for (int p = 0; p < c->n_pool * (r16 ? 2 : 1); p++) {
            celer_cpu_layout lay = p < c->n_pool ? CELER_CPU_LAYOUT_MLX_ROWS : CELER_CPU_LAYOUT_MLX_R16;
            for (int64_t i = 0; i < T * rows; i++) Y[i] = NAN;
            if (celer_cpu_matmul_mlx(c->pool[p % c->n_pool], q, lay, lay == CELER_CPU_LAYOUT_MLX_R16 ? P16 : P, X, T, Y,
                                     &s, &err) != CELER_OK) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
            }
            const char *lname = lay == CELER_CPU_LAYOUT_MLX_R16 ? "r16" : celer_cpu_isa_name(isa);
            for (int64_t i = 0; i < T * rows; i++) {
                double dev = fabs(Y[i] - exact[i]);
                if (!(dev <= bound[i])) {
                    fprintf(stderr, "%s %s rows %lld k %lld T %lld pool %d: Y[%lld][%lld] = %.9g, exact %.9g, off by "
                            "%.3g > bound %.3g\n", name, lname, (long long)rows, (long long)k, (long long)T, p,
                            (long long)(i / rows), (long long)(i % rows), Y[i], exact[i], dev, bound[i]);
                    return 1;
                }
                if (isa == CELER_CPU_ISA_REF && p == 0) Yref[i] = Y[i];
                double dr = fabs(Y[i] - Yref[i]);
                if (!(dr <= scale[i])) {
                    fprintf(stderr, "%s %s rows %lld k %lld T %lld pool %d: Y[%lld][%lld] = %.9g, ref %.9g, off by "
                            "%.3g > 1e-5 of sum |w x| %.3g\n", name, lname, (long long)rows, (long long)k,
                            (long long)T, p, (long long)(i / rows), (long long)(i % rows), Y[i], Yref[i], dr, scale[i]);
                    return 1;
                }
            }
            n_checked++;
        }
        celer_cpu_scratch_free(&s);
    }
    free(X), free(E), free(XQ), free(Y), free(Yref), free(exact), free(bound), free(scale), free(P), free(P16);
    return 0;
}

/* Both layouts read back to mlx's three arrays, byte for byte, for every row. */
static int check_rows_back(const mlx_matrix *m)
{
    const celer_mlx_quant *q = &m->q;
    celer_mlx_quant_shapes s;
    celer_error            err = {0};
    CHECK(celer_mlx_quant_get_shapes(q, &s, &err) == CELER_OK);
    size_t   wr = s.weight_bytes / (size_t)q->rows, sr = s.scales_bytes / (size_t)q->rows;
    char    *P = malloc(celer_cpu_mlx_size(q)), *w = malloc(wr), *sc = malloc(sr), *bi = malloc(sr);
    int64_t  sets = q->rows / 16;
    CHECK(P && w && sc && bi);
    for (int r16 = 0; r16 < 2; r16++) {
        if (r16) {
            celer_cpu_mlx_pack(q, &m->d, 16, 0, 16 * sets, P);
            celer_cpu_mlx_pack(q, &m->d, 1, 16 * sets, q->rows - 16 * sets,
                               P + (size_t)(16 * sets) * celer_cpu_mlx_row_bytes(q));
        } else {
            celer_cpu_mlx_pack(q, &m->d, 1, 0, q->rows, P);
        }
        for (int64_t r = 0; r < q->rows; r++) {
            celer_cpu_mlx_unpack_row(q, r16, P, r, w, sc, s.has_biases ? bi : NULL);
            CHECK(memcmp(w, (const char *)m->words + (size_t)r * wr, wr) == 0);
            CHECK(memcmp(sc, (const char *)m->scales + (size_t)r * sr, sr) == 0);
            CHECK(!s.has_biases || memcmp(bi, (const char *)m->biases + (size_t)r * sr, sr) == 0);
        }
    }
    free(P), free(w), free(sc), free(bi);
    return 0;
}

static int test_quantizer(const celer_host_info *host)
{
#if defined(__x86_64__)
    if (!celer_cpu_isa_available(CELER_CPU_ISA_AVX2, host)) return 0;
    enum { N = 4096, NB = N / 32 };
    static float x[N];
    static char  a[NB * (sizeof(celer_cpu_x32) + 2 * sizeof(int32_t))], b[sizeof a];
    for (int rep = 0; rep < 10; rep++) {
        random_acts(x, 1, N);
        if (rep == 1) x[5] = NAN, x[300] = INFINITY, x[700] = -INFINITY;
        memset(a, 0x5a, sizeof a), memset(b, 0x5a, sizeof b);
        int64_t lo = rep % 2 ? 3 : 0;
        celer_cpu_quantize_x32h_ref(x, a, NB, lo, NB);
        celer_cpu_quantize_x32h_avx2(x, b, NB, lo, NB);
        CHECK(memcmp(a, b, sizeof a) == 0);
    }
#else
    (void)host;
#endif
    return 0;
}

static int test_errors(void)
{
    mlx_matrix        m;
    celer_error       err = {0};
    celer_cpu_scratch s   = {0};
    float             x[64] = {0}, y[2];
    CHECK(make_matrix(&m, CELER_HF_QUANT_AFFINE, 4, 32, CELER_ST_BF16, false, 2, 64) == 0);
    char *P = malloc(celer_cpu_mlx_size(&m.q));
    CHECK(P);
    celer_cpu_mlx_pack(&m.q, &m.d, 1, 0, 2, P);
    CHECK(celer_cpu_scratch_init(&s, CELER_CPU_ISA_REF, 0, &err) == CELER_OK);
    CHECK(celer_cpu_matmul_mlx(NULL, &m.q, CELER_CPU_LAYOUT_MLX_ROWS, P, x, 1, y, &s, &err) == CELER_ERR_INVALID);
    CHECK(strstr(err.msg, "scratch") != NULL);
    celer_cpu_scratch_free(&s);
    CHECK(celer_cpu_scratch_init(&s, CELER_CPU_ISA_REF, celer_cpu_mlx_matmul_scratch_size(&m.q, 1), &err) == CELER_OK);
    CHECK(celer_cpu_matmul_mlx(NULL, &m.q, CELER_CPU_LAYOUT_MLX_R16, P, x, 1, y, &s, &err) == CELER_ERR_INVALID);
    CHECK(celer_cpu_matmul_mlx(NULL, &m.q, CELER_CPU_LAYOUT_STORED, P, x, 1, y, &s, &err) == CELER_ERR_INVALID);
    CHECK(celer_cpu_matmul_mlx(NULL, &m.q, CELER_CPU_LAYOUT_MLX_ROWS, P, x, 1, y, &s, &err) == CELER_OK);
    celer_mlx_quant bad = m.q;
    bad.bits            = 7;
    CHECK(celer_cpu_matmul_mlx(NULL, &bad, CELER_CPU_LAYOUT_MLX_ROWS, P, x, 1, y, &s, &err) == CELER_ERR_FORMAT);
    CHECK(celer_cpu_mlx_matmul_scratch_size(&m.q, 3) == 3 * 2 * (sizeof(celer_cpu_x32) + sizeof(int32_t)));
    celer_mlx_quant nv = {.mode = CELER_HF_QUANT_NVFP4, .bits = 4, .group_size = 16, .dtype = CELER_ST_BF16,
                          .rows = 1, .cols = 64};
    CHECK(celer_cpu_mlx_matmul_scratch_size(&nv, 3) == 3 * (2 * sizeof(celer_cpu_x32) + 4 * sizeof(int32_t)));
    nv.mode = CELER_HF_QUANT_MXFP8, nv.bits = 8, nv.group_size = 32;
    CHECK(celer_cpu_mlx_matmul_scratch_size(&nv, 3) == 0);
    celer_cpu_scratch_free(&s);
    free(P);
    free_matrix(&m);
    return 0;
}

typedef struct {
    celer_hf_quant_mode mode;
    uint32_t            bits, gs;
    celer_st_dtype      dt;
    bool                gscale;
} format;

int main(void)
{
    celer_host_info host = {0};
    celer_host_info_read(&host);
    ctx         c   = {.n_pool = 3};
    celer_error err = {0};
    CHECK(celer_pool_init(&c.pool[1], 1, &err) == CELER_OK);
    CHECK(celer_pool_init(&c.pool[2], 2, &err) == CELER_OK);
    if (test_errors() || test_quantizer(&host)) return 1;

    format fmts[64];
    int    nf = 0;
    static const uint32_t       bits[] = {2, 3, 4, 5, 6, 8}, groups[] = {32, 64, 128};
    static const celer_st_dtype dts[]  = {CELER_ST_BF16, CELER_ST_F16, CELER_ST_F32};
    for (int b = 0; b < 6; b++)
        for (int g = 0; g < 3; g++)
            for (int d = 0; d < 3; d++) fmts[nf++] = (format){CELER_HF_QUANT_AFFINE, bits[b], groups[g], dts[d], false};
    fmts[nf++] = (format){CELER_HF_QUANT_MXFP4, 4, 32, CELER_ST_BF16, false};
    fmts[nf++] = (format){CELER_HF_QUANT_MXFP8, 8, 32, CELER_ST_BF16, false};
    fmts[nf++] = (format){CELER_HF_QUANT_NVFP4, 4, 16, CELER_ST_BF16, false};
    fmts[nf++] = (format){CELER_HF_QUANT_NVFP4, 4, 16, CELER_ST_F32, true};

    static const int64_t rows[] = {1, 7, 16, 37}, Ts[] = {1, 2, 5};
    for (int f = 0; f < nf; f++) {
        int64_t B  = fmts[f].gs > 32 ? fmts[f].gs : 32;
        int64_t ks[] = {B, 2 * B, 3 * B, 2048};
        for (int ri = 0; ri < 4; ri++)
            for (int ki = 0; ki < 4; ki++) {
                /* the long rows on the full set of shapes only for a few row counts */
                if (ki == 3 && ri != 3) continue;
                mlx_matrix m;
                if (make_matrix(&m, fmts[f].mode, fmts[f].bits, fmts[f].gs, fmts[f].dt, fmts[f].gscale, rows[ri],
                                ks[ki]))
                    return 1;
                if (ki == 0 && check_rows_back(&m)) return 1;
                for (int ti = 0; ti < 3; ti++)
                    if (check_shape(&c, &m, Ts[ti], &host)) return 1;
                free_matrix(&m);
            }
    }
    celer_pool_free(c.pool[1]);
    celer_pool_free(c.pool[2]);
    fprintf(stderr, "test_cpu_mlx_matmul: %d formats, %lld runs pass\n", nf, (long long)n_checked);
    return 0;
}
