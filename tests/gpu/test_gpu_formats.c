/* Every weight format on the GPU against the CPU backend and against exact references, on fresh
 * random inputs (the seed is printed; CELER_TEST_SEED repeats a run) and odd shapes: the products
 * on every path and the embedding rows. Bounds (relative L2 error, ‖gpu − ref‖ / ‖ref‖):
 *   - matmul vs the product in double of the CPU's reference dequantization: 1e-5 (f32
 *     accumulation), GGUF types and MLX formats with f32 scales; MLX bf16 scales: 1e-2 (mlx
 *     rounds each dequantized value to bf16, the GPU kernel does not); steps of up to 32
 *     tokens of the formats with integer decode kernels (quantized GGUF types, every MLX
 *     affine width, mxfp4, nvfp4), which quantize the activations to ~15 bits (two 8-bit levels, the CPU
 *     backend's X32 format): the same bound against the product with the activations so
 *     quantized (by the CPU's reference quantizer), and 1e-3 against the f32 activations;
 *     longer steps of Q4_0, Q8_0 and MLX affine 4 and 8 bits on a device with integer matrix
 *     units (prefill, gpu_mmq.cu) likewise, elsewhere the f32 kernel's bound against the exact product;
 *   - matmul on the CUDA backend's BLAS path (gpu_blas.cu: steps of more than 32 tokens, of Q4_0
 *     and Q8_0 from CELER_GPU_BLAS_FROM tokens), which splits weights and activations in f16
 *     halves: with three products (CELER_GPU_BLAS_PASSES=3) 1e-4 against the exact product and
 *     the CPU's (each operand to ~22 bits: ~5e-8 on such products, as numpy rounds them; the rest
 *     is f32 summation), with fewer (one, the default here: a dense model's, rounds both operands
 *     to f16; two, an MoE model's, the weights) 2e-3 (11 bits: ~3e-4 here, 6x room);
 *     2e-2 against the CPU's for quantized types as above; F32 weights stay f32 there, 1e-5. The steps of 100 tokens have
 *     activations past f16's range (the path scales them by a power of two). The weights' f16
 *     copies are made 0.25 MiB at a time (CELER_GPU_BLAS_CHUNK_MB, unless set): the larger
 *     matrices below take up to 5 chunks, the last one short;
 *   - matmul vs the CPU backend: 1e-5 for float weights, 2e-2 for quantized ones (the CPU
 *     quantizes activations to 8 bits for its integer dot products);
 *   - embedding rows: equal to the CPU's reference dequantizer bit for bit;
 *   - the batch kernel's three geometries: equal bit for bit.
 * The other ops: test_gpu_ops.c. Run on a machine with a GPU (scripts/gpu-check.sh); built only
 * with CELER_CUDA or CELER_HIP. */
#include "backends/cpu/dot.h"
#include "quant/dequant.h"
#include "quant/mlx_quantize.h"

#include "gpu/gpu_test.h"

/* ---- matmul ----------------------------------------------------------------------------- */

/* y = x · wᵀ in double from dequantized rows wd (rows, k): each output one sum in column order,
 * four tokens' sums side by side (four chains of additions where one waited on the last). */
static void ref_matmul(const float *wd, int64_t rows, int64_t k, const float *x, int64_t T, double *y)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *w = wd + r * k;
        int64_t      t = 0;
        for (; t + 4 <= T; t += 4) {
            const float *x0 = x + t * k, *x1 = x0 + k, *x2 = x1 + k, *x3 = x2 + k;
            double       s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            for (int64_t i = 0; i < k; i++) {
                const double wi = w[i];
                s0 += wi * x0[i], s1 += wi * x1[i], s2 += wi * x2[i], s3 += wi * x3[i];
            }
            y[t * rows + r] = s0, y[(t + 1) * rows + r] = s1, y[(t + 2) * rows + r] = s2, y[(t + 3) * rows + r] = s3;
        }
        for (; t < T; t++) {
            double s = 0;
            for (int64_t i = 0; i < k; i++) s += (double)w[i] * x[t * k + i];
            y[t * rows + r] = s;
        }
    }
}

/* x (T, k) as the integer decode kernels see it: each block of 32 quantized to the X32 format
 * by the CPU's reference quantizer and taken back to floats, d · (256 hi + lo), or d · 256 hi
 * where the kernel takes the high level only (hi_only). */
static void x32_values(const float *x, int64_t T, int64_t k, bool hi_only, float *xh)
{
    int64_t        nb  = k / 32;
    celer_cpu_x32 *row = malloc(CELER_CPU_X32_SUMS_AT(nb) + (size_t)nb * sizeof(int32_t));
    for (int64_t t = 0; t < T; t++) {
        celer_cpu_quantize_x32_ref(x + t * k, row, nb, 0, nb);
        for (int64_t b = 0; b < nb; b++)
            for (int i = 0; i < 32; i++)
                xh[t * k + 32 * b + i] = row[b].d * (float)(256 * row[b].hi[i] + (hi_only ? 0 : row[b].lo[i]));
    }
    free(row);
}

/* The BLAS path's bound (where gpu_test.h's blas_may): its passes as the variable says, else
 * gpu_blas.h's GPU_BLAS_PASSES (1: these backends are made for no model, so not routed). */
static double blas_bound(void)
{
    const char *p = getenv("CELER_GPU_BLAS_PASSES");
    return (p && *p ? atoi(p) : 1) >= 3 ? 1e-4 : 2e-3;
}

/* Runs w (host arrays) through both backends' matmul for several step sizes. */
static void check_matmul(const char *what, const celer_weight *host_w, const float *wd, double bound_ref,
                         double bound_cpu, bool int_decode)
{
    static const int64_t Ts[] = {1, 3, 8, 9, 16, 32, 33, 64, 100, 512};
    celer_weight         wc = *host_w, wg = *host_w;
    CHECK(cpu->ops->weight_load(cpu, &wc, &err) == CELER_OK);
    CHECK(gpu->ops->weight_load(gpu, &wg, &err) == CELER_OK);
    int64_t rows = host_w->rows, k = host_w->cols;
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
        int64_t T  = Ts[ti];
        float  *x  = malloc((size_t)(T * k) * sizeof *x), *yc = malloc((size_t)(T * rows) * sizeof *yc);
        float  *yg = malloc((size_t)(T * rows) * sizeof *yg);
        double *yr = malloc((size_t)(T * rows) * sizeof *yr);
        random_acts(x, T, k);
        if (T == 100) /* past f16's range (65504): the BLAS path scales them; relative errors as before */
            for (int64_t i = 0; i < T * k; i++) x[i] *= 4.0e5f;
        ref_matmul(wd, rows, k, x, T, yr);
        CHECK(cpu->ops->matmul(cpu, &wc, x, T, yc, &err) == CELER_OK);
        float *dx = dev_copy(x, (size_t)(T * k) * sizeof *x), *dy = dev_zeros((size_t)(T * rows));
        CHECK(gpu->ops->matmul(gpu, &wg, dx, T, dy, &err) == CELER_OK);
        to_host(dy, yg, (size_t)(T * rows) * sizeof *yg);
        double e_ref = rel_l2(yg, yr, T * rows), e_cpu = rel_l2f(yg, yc, T * rows), e_q = 0, bound = bound_ref;
        double bound_c = bound_cpu;
        bool   half    = blas_may(host_w->type, T) && host_w->type != CELER_GGML_F32;
        if (half) bound = fmax(bound, blas_bound()), bound_c = fmax(bound_c, blas_bound());
        const bool x8 = int_decode && x8_mode();
        if (x8) /* 8-bit activations: the CPU's bound against the exact product */
            bound = fmax(bound, 2e-2);
        if (int_decode) { /* the exact product of the quantized activations; f32's within 1e-3 */
            float  *xh = malloc((size_t)(T * k) * sizeof *xh);
            double *yq = malloc((size_t)(T * rows) * sizeof *yq);
            x32_values(x, T, k, x8, xh);
            ref_matmul(wd, rows, k, xh, T, yq);
            e_q = rel_l2(yg, yq, T * rows), bound = fmax(bound, 1e-3);
            /* Q4_0, Q8_0 and MLX affine 4 and 8 bits past 8 tokens: the integer matrix units (the
             * same sums) where the device has them; past 32 tokens the other formats' f32 kernels, or f16 on the BLAS
             * (with x8 both on the values the 8-bit codes stand for: the same product) */
            bool tight = e_q <= bound_ref || (half && e_q <= blas_bound()) ||
                         (!x8 && ((T > 32 && e_ref <= bound_ref) || (half && e_ref <= blas_bound())));
            if (!tight) fprintf(stderr, "  %s T=%lld: vs the quantized activations' product %.2e\n", what, (long long)T, e_q);
            CHECK(tight);
            free(xh), free(yq);
        }
        if (!(e_ref <= bound) || !(e_cpu <= bound_c))
            fprintf(stderr, "  %s %lldx%lld T=%lld: vs exact %.2e (bound %.0e), vs cpu %.2e (bound %.0e)\n", what,
                    (long long)rows, (long long)k, (long long)T, e_ref, bound, e_cpu, bound_c);
        CHECK(e_ref <= bound);
        CHECK(e_cpu <= bound_c);
        gpu->ops->release(gpu, dx), gpu->ops->release(gpu, dy);
        free(x), free(yc), free(yg), free(yr);
    }
}

static const celer_ggml_type GGUF_TYPES[] = {CELER_GGML_F32,  CELER_GGML_F16,  CELER_GGML_BF16, CELER_GGML_Q4_0,
                                             CELER_GGML_Q4_1, CELER_GGML_Q5_0, CELER_GGML_Q5_1, CELER_GGML_Q8_0,
                                             CELER_GGML_Q4_K, CELER_GGML_Q5_K, CELER_GGML_Q6_K};

static void test_matmul_gguf(void)
{
    /* every type with rows of 768 values, then: Q4_0 and Q8_0 with 544 (17 blocks: the
     * matrix-unit kernel stages 4 blocks at a time, so a partial last stage) and with 2080 (65
     * blocks: its few-block grids split the columns in 4 parts, the last one short); the plain
     * formats with enough rows for the decode kernel's four rows a block (gpu_matvec_plain.cu:
     * from 8 rows an SM), 1100 of them (a short last block); rows of 4608 and 8448 values (a
     * partial last pass of the integer decode kernel's loop, gpu_matvec.cu); 4,500 rows of 512
     * (one-token passes: a sliced grid of 282 blocks, past two an SM on the H200: the WIDE pass) */
    static const struct {
        celer_ggml_type t;
        int64_t         rows, k;
    } EXTRA[] = {{CELER_GGML_Q4_0, 0, 544},     {CELER_GGML_Q8_0, 0, 544},     {CELER_GGML_Q4_0, 0, 2080},
                 {CELER_GGML_Q8_0, 0, 2080},    {CELER_GGML_F32, 1102, 800},   {CELER_GGML_F16, 1101, 1024},
                 {CELER_GGML_BF16, 1103, 4096}, {CELER_GGML_Q4_0, 70, 4608},   {CELER_GGML_Q4_K, 71, 8448},
                 {CELER_GGML_Q4_0, 4500, 512},  {CELER_GGML_Q6_K, 4500, 512}};
    const size_t n_types = sizeof GGUF_TYPES / sizeof GGUF_TYPES[0], n_extra = sizeof EXTRA / sizeof EXTRA[0];
    for (size_t i = 0; i < n_types + n_extra; i++) {
        bool            odd = i >= n_types;
        celer_ggml_type t   = odd ? EXTRA[i - n_types].t : GGUF_TYPES[i];
        bool            fl  = t == CELER_GGML_F32 || t == CELER_GGML_F16 || t == CELER_GGML_BF16;
        int64_t rows = odd && EXTRA[i - n_types].rows ? EXTRA[i - n_types].rows : 67 + 30 * (int64_t)i;
        int64_t k    = odd ? EXTRA[i - n_types].k : 768;
        void           *raw  = random_weights(t, rows, k, 0.1f);
        float          *wd   = malloc((size_t)(rows * k) * sizeof *wd);
        const celer_ggml_type_info *ti = celer_ggml_type_get(t);
        size_t rb = (size_t)(k / ti->block_elems) * ti->block_bytes;
        for (int64_t r = 0; r < rows; r++) CHECK(celer_dequant_row(t, (char *)raw + r * rb, wd + r * k, k));
        celer_weight w = {.type = t, .rows = rows, .cols = k, .data = raw};
        check_matmul(ti->name, &w, wd, 1e-5, fl ? 1e-5 : 2e-2, !fl);
        free(raw), free(wd);
    }
}

/* y = x · wᵀ of T tokens on backend be (w loaded there), into yh. */
static void product_on(celer_backend *be, const celer_weight *host_w, const float *x, int64_t T, float *yh)
{
    celer_weight w = *host_w;
    void        *dx = NULL, *dy = NULL;
    const size_t xb = (size_t)(T * w.cols) * sizeof(float), yb = (size_t)(T * w.rows) * sizeof(float);
    CHECK(be->ops->weight_load(be, &w, &err) == CELER_OK);
    CHECK(be->ops->alloc(be, xb, &dx, &err) == CELER_OK && be->ops->alloc(be, yb, &dy, &err) == CELER_OK);
    CHECK(be->ops->write(be, dx, x, xb, &err) == CELER_OK);
    CHECK(be->ops->matmul(be, &w, dx, T, dy, &err) == CELER_OK);
    CHECK(be->ops->read(be, dy, yh, yb, &err) == CELER_OK);
    be->ops->release(be, dx), be->ops->release(be, dy);
}

/* The BLAS path's passes follow the model (gpu_blas.h): a backend made for a model that routes
 * tokens among experts (celer_backend_config.routed) multiplies in two passes, else in one. An F16
 * weight is multiplied where it lies, exact, so the error is the activations' alone: f16's
 * rounding in one pass (~2e-4 relative), ~2^-22 in two. */
static void test_blas_routed(void)
{
    const char *p = getenv("CELER_GPU_BLAS_PASSES");
    if (!blas_may(CELER_GGML_F16, 64) || (p && *p) || checks_made_bad()) {
        printf("  the passes by model: not checked here (no BLAS path, CELER_GPU_BLAS_PASSES sets them, or "
               "CELER_GPU_CHECK=bad moves long steps off the BLAS)\n");
        return;
    }
    const int64_t        rows = 256, k = 512, T = 64;
    celer_backend_config cfg  = {.routed = true};
    celer_backend       *routed = NULL;
    const char          *kind   = getenv("CELER_TEST_BACKEND");
    CHECK(celer_backend_create(&routed, kind ? kind : "cuda", &cfg, &err) == CELER_OK);
    if (!routed) return;
    void  *raw = random_weights(CELER_GGML_F16, rows, k, 0.1f);
    float *wd = malloc((size_t)(rows * k) * sizeof *wd), *x = malloc((size_t)(T * k) * sizeof *x);
    float *y1 = malloc((size_t)(T * rows) * sizeof *y1), *y2 = malloc((size_t)(T * rows) * sizeof *y2);
    double *yr = malloc((size_t)(T * rows) * sizeof *yr);
    for (int64_t r = 0; r < rows; r++) CHECK(celer_dequant_row(CELER_GGML_F16, (uint16_t *)raw + r * k, wd + r * k, k));
    random_acts(x, T, k);
    ref_matmul(wd, rows, k, x, T, yr);
    const celer_weight w = {.type = CELER_GGML_F16, .rows = rows, .cols = k, .data = raw};
    product_on(gpu, &w, x, T, y1);
    product_on(routed, &w, x, T, y2);
    const double e1 = rel_l2(y1, yr, T * rows), e2 = rel_l2(y2, yr, T * rows);
    printf("  the passes by model: dense %.2e, routed %.2e against the exact product\n", e1, e2);
    CHECK(e1 > 2e-5 && e1 < 2e-3); /* one pass: the activations rounded to f16 */
    CHECK(e2 < 1e-5);              /* two: to ~22 bits */
    celer_backend_destroy(routed);
    free(raw), free(wd), free(x), free(y1), free(y2), free(yr);
}

/* get_rows of the id argmax_keep kept (ids NULL) gives row id of w (loaded here), want, bit for
 * bit: the id made the largest of w->rows logits, kept, then taken. */
static bool kept_row_is(const celer_weight *w, int32_t id, const float *want)
{
    float *logits = malloc((size_t)w->rows * sizeof *logits), *got = malloc((size_t)w->cols * sizeof *got);
    random_fill(logits, w->rows, 1.0f);
    logits[id]  = 5.0f;
    float  *dl  = dev_copy(logits, (size_t)w->rows * 4), *dy = dev_zeros((size_t)w->cols);
    int32_t back = -1;
    bool    ok   = gpu->ops->argmax_keep(gpu, dl, 1, w->rows, &err) == CELER_OK &&
              gpu->ops->argmax_take(gpu, &back, &err) == CELER_OK && back == id &&
              gpu->ops->get_rows(gpu, w, NULL, 1, dy, &err) == CELER_OK;
    if (ok) to_host(dy, got, (size_t)w->cols * sizeof *got);
    ok = ok && !memcmp(got, want, (size_t)w->cols * sizeof *got);
    if (!ok) fprintf(stderr, "  kept row %d of a %lld-row table: %s\n", id, (long long)w->rows, back == id ? "differs" : "not kept");
    gpu->ops->release(gpu, dl), gpu->ops->release(gpu, dy);
    free(logits), free(got);
    return ok;
}

/* One MLX weight of rows x k quantized from random values, its host arrays and its dequantized rows. */
static void test_matmul_mlx_shape(celer_hf_quant_mode mode, uint32_t bits, uint32_t group, celer_st_dtype dtype,
                                  bool gscale, int64_t rows, int64_t k)
{
    celer_mlx_quant q    = {.name = "test", .mode = mode, .bits = bits, .group_size = group, .dtype = dtype,
                            .has_global_scale = gscale, .global_scale = gscale ? 3.5f : 0.0f, .rows = rows, .cols = k};
    celer_mlx_quant_shapes s;
    CHECK(celer_mlx_quant_get_shapes(&q, &s, &err) == CELER_OK);
    float *src = malloc((size_t)(rows * k) * sizeof *src);
    random_fill(src, rows * k, 0.5f);
    void *wq = malloc(s.weight_bytes), *sc = malloc(s.scales_bytes), *bi = s.has_biases ? malloc(s.biases_bytes) : NULL;
    /* affine quantizes in its scales' dtype: give it the values rounded to that dtype */
    void *in = src;
    uint16_t *r16 = NULL;
    if (mode == CELER_HF_QUANT_AFFINE && dtype != CELER_ST_F32) {
        r16 = malloc((size_t)(rows * k) * sizeof *r16);
        for (int64_t i = 0; i < rows * k; i++) r16[i] = dtype == CELER_ST_BF16 ? celer_f32_to_bf16(src[i]) : celer_f32_to_half(src[i]);
        in = r16;
    }
    celer_status st = celer_mlx_quantize_rows(&q, in, mode == CELER_HF_QUANT_AFFINE ? dtype : CELER_ST_F32, 0, rows, wq,
                                              sc, bi, &err);
    if (st) fprintf(stderr, "  quantize: %s\n", err.msg);
    CHECK(st == CELER_OK);
    celer_weight w = {.type = CELER_WEIGHT_MLX, .rows = rows, .cols = k, .data = wq, .mlx = q,
                      .mlx_data = {wq, s.weight_bytes, sc, s.scales_bytes, bi, s.biases_bytes}};
    float *wd = malloc((size_t)(rows * k) * sizeof *wd);
    for (int64_t r = 0; r < rows; r++) CHECK(celer_mlx_dequant_row(&q, &w.mlx_data, r, wd + r * k, &err) == CELER_OK);
    char desc[64];
    celer_mlx_quant_describe(&q, desc, sizeof desc);
    bool exact_dtype = dtype == CELER_ST_F32 || mode == CELER_HF_QUANT_NVFP4 || mode == CELER_HF_QUANT_MXFP4;
    const bool int_decode = mode != CELER_HF_QUANT_MXFP8;
    check_matmul(desc, &w, wd, exact_dtype ? 1e-5 : 1e-2, 2e-2, int_decode);
    /* an embedding looked up from the host arrays: mx.dequantize's values exactly */
    int32_t ids[3] = {0, (int32_t)rows - 1, 7};
    float  *rows_h = malloc(3 * (size_t)k * sizeof *rows_h), *dy = dev_zeros(3 * (size_t)k);
    celer_weight e = w;
    e.data         = NULL;
    CHECK(gpu->ops->get_rows(gpu, &e, ids, 3, dy, &err) == CELER_OK);
    to_host(dy, rows_h, 3 * (size_t)k * sizeof *rows_h);
    for (int i = 0; i < 3; i++) CHECK(!memcmp(rows_h + i * k, wd + ids[i] * k, (size_t)k * sizeof *wd));
    /* the same rows of the table on the device, for an id argmax_keep kept (decode a step ahead) */
    if (gpu->ops->argmax_keep && mode == CELER_HF_QUANT_AFFINE) {
        celer_weight wl = w;
        CHECK(gpu->ops->weight_load(gpu, &wl, &err) == CELER_OK);
        for (int i = 0; i < 3; i++) CHECK(kept_row_is(&wl, ids[i], wd + ids[i] * k));
        /* and a prefill's rows of the loaded table, the ids from the host: the same values */
        CHECK(gpu->ops->get_rows(gpu, &wl, ids, 3, dy, &err) == CELER_OK);
        to_host(dy, rows_h, 3 * (size_t)k * sizeof *rows_h);
        for (int i = 0; i < 3; i++) CHECK(!memcmp(rows_h + i * k, wd + ids[i] * k, (size_t)k * sizeof *wd));
    }
    gpu->ops->release(gpu, dy);
    free(rows_h), free(src), free(r16), free(wq), free(sc), free(bi), free(wd);
}

static void test_matmul_mlx_one(celer_hf_quant_mode mode, uint32_t bits, uint32_t group, celer_st_dtype dtype,
                                bool gscale)
{
    test_matmul_mlx_shape(mode, bits, group, dtype, gscale, 45, 512);
}

static void test_matmul_mlx(void)
{
    static const uint32_t bits[] = {2, 3, 4, 5, 6, 8}, groups[] = {32, 64, 128};
    for (size_t b = 0; b < 6; b++)
        for (size_t g = 0; g < 3; g++) test_matmul_mlx_one(CELER_HF_QUANT_AFFINE, bits[b], groups[g], CELER_ST_F32, false);
    test_matmul_mlx_one(CELER_HF_QUANT_AFFINE, 4, 64, CELER_ST_BF16, false);
    test_matmul_mlx_one(CELER_HF_QUANT_AFFINE, 8, 32, CELER_ST_F16, false);
    test_matmul_mlx_one(CELER_HF_QUANT_AFFINE, 4, 128, CELER_ST_F16, false);
    test_matmul_mlx_one(CELER_HF_QUANT_AFFINE, 8, 64, CELER_ST_BF16, false); /* each kernel's scales' dtype */
    test_matmul_mlx_one(CELER_HF_QUANT_AFFINE, 3, 64, CELER_ST_BF16, false); /* a format as stored, 16-bit pairs */
    test_matmul_mlx_one(CELER_HF_QUANT_AFFINE, 6, 32, CELER_ST_F16, false);
    test_matmul_mlx_one(CELER_HF_QUANT_AFFINE, 2, 128, CELER_ST_BF16, false);
    test_matmul_mlx_one(CELER_HF_QUANT_AFFINE, 5, 64, CELER_ST_F16, false);
    test_matmul_mlx_one(CELER_HF_QUANT_MXFP4, 4, 32, CELER_ST_BF16, false);
    test_matmul_mlx_one(CELER_HF_QUANT_MXFP8, 8, 32, CELER_ST_F32, false);
    test_matmul_mlx_one(CELER_HF_QUANT_NVFP4, 4, 16, CELER_ST_BF16, false);
    test_matmul_mlx_one(CELER_HF_QUANT_NVFP4, 4, 16, CELER_ST_F32, true);
    /* NVIDIA's batch kernel (3 to 32 tokens) on MLX affine: 17 and 18 column blocks (its
     * stages of 4 and column parts of 8 end short: a stage of one 32-value group, of one 64-value
     * group of two blocks), rows in three blocks of 128 (the last short) */
    test_matmul_mlx_shape(CELER_HF_QUANT_AFFINE, 4, 32, CELER_ST_F32, false, 300, 544);
    test_matmul_mlx_shape(CELER_HF_QUANT_AFFINE, 8, 64, CELER_ST_F32, false, 130, 576);
    test_matmul_mlx_shape(CELER_HF_QUANT_AFFINE, 4, 64, CELER_ST_BF16, false, 45, 576);
    test_matmul_mlx_shape(CELER_HF_QUANT_AFFINE, 8, 128, CELER_ST_F16, false, 45, 640);
    /* and the widths whose codes lie as stored, 3, 5 and 6 bits with 3, 5 and 6 of the stage's
     * 16-byte pieces a row (not a whole number of rows a thread's pieces apart) */
    test_matmul_mlx_shape(CELER_HF_QUANT_AFFINE, 3, 32, CELER_ST_F32, false, 300, 544);
    test_matmul_mlx_shape(CELER_HF_QUANT_AFFINE, 6, 64, CELER_ST_F32, false, 130, 576);
    test_matmul_mlx_shape(CELER_HF_QUANT_AFFINE, 5, 32, CELER_ST_F16, false, 45, 544);
    test_matmul_mlx_shape(CELER_HF_QUANT_AFFINE, 2, 128, CELER_ST_BF16, false, 45, 640);
    /* mxfp4 and nvfp4 there too: 17 column blocks (a short last stage of their byte scales) */
    test_matmul_mlx_shape(CELER_HF_QUANT_MXFP4, 4, 32, CELER_ST_BF16, false, 300, 544);
    test_matmul_mlx_shape(CELER_HF_QUANT_NVFP4, 4, 16, CELER_ST_BF16, true, 300, 544);
}

/* ---- embedding rows ------------------------------------------------------------------------ */

static void test_get_rows(void)
{
    for (size_t i = 0; i < sizeof GGUF_TYPES / sizeof GGUF_TYPES[0]; i++) {
        celer_ggml_type             t  = GGUF_TYPES[i];
        const celer_ggml_type_info *ti = celer_ggml_type_get(t);
        int64_t                     rows = 300, k = 512;
        void                       *raw = random_weights(t, rows, k, 1.0f);
        size_t                      rb  = (size_t)(k / ti->block_elems) * ti->block_bytes;
        celer_weight                w   = {.type = t, .rows = rows, .cols = k, .data = raw};
        CHECK(gpu->ops->weight_load(gpu, &w, &err) == CELER_OK);
        int32_t ids[5] = {0, 299, 17, 17, 150};
        float  *dy = dev_zeros(5 * (size_t)k), *y = malloc(5 * (size_t)k * sizeof *y), *ref = malloc((size_t)k * sizeof *ref);
        CHECK(gpu->ops->get_rows(gpu, &w, ids, 5, dy, &err) == CELER_OK);
        to_host(dy, y, 5 * (size_t)k * sizeof *y);
        for (int j = 0; j < 5; j++) {
            CHECK(celer_dequant_row(t, (char *)raw + ids[j] * rb, ref, k));
            if (memcmp(y + j * k, ref, (size_t)k * sizeof *ref)) fprintf(stderr, "  get_rows %s row %d differs\n", ti->name, ids[j]);
            CHECK(!memcmp(y + j * k, ref, (size_t)k * sizeof *ref));
            if (gpu->ops->argmax_keep) CHECK(kept_row_is(&w, ids[j], ref)); /* the same row for a kept id */
        }
        int32_t bad = 300;
        CHECK(gpu->ops->get_rows(gpu, &w, &bad, 1, dy, &err) == CELER_ERR_INVALID);
        gpu->ops->release(gpu, dy);
        free(raw), free(y), free(ref);
    }
}

/* The batch kernel's three geometries (CELER_GPU_SQ_WIDE=0, 1 and 2, the default: 64 or 128 rows
 * a block, 2 or 3 stages, gpu_mmq_small.cu) give the same products bit for bit: Q4_0 and Q8_0,
 * rows not a whole number of either size of block, columns ending in a short stage, in one column
 * part and in several, and fewer than any pipeline's depth; 3 to 32 tokens. (Without the integer
 * matrix units all three run the same kernels.) */
static void test_batch_geometries(void)
{
    static const celer_ggml_type types[] = {CELER_GGML_Q4_0, CELER_GGML_Q8_0};
    static const int64_t         Ts[]    = {3, 9, 16, 17, 32};
    static const char *const     geom[]  = {"CELER_GPU_SQ_WIDE=0", "CELER_GPU_SQ_WIDE=1", "CELER_GPU_SQ_WIDE=2"};
    static const int64_t         colss[] = {96, 992, 4064}; /* 3 column blocks, 31: one part; 127: several */
    enum { ROWS = 300, CMAX = 4064, TMAX = 32, NG = sizeof geom / sizeof geom[0] };
    celer_backend *be[NG];
    for (int g = 0; g < NG; g++) be[g] = gpu_backend_with(&geom[g], 1);
    bool all = true;
    for (int g = 0; g < NG; g++) all = all && be[g];
    if (!all) {
        for (int g = 0; g < NG; g++) celer_backend_destroy(be[g]);
        return;
    }
    float *x = malloc((size_t)(TMAX * CMAX) * sizeof *x), *y[NG];
    for (int g = 0; g < NG; g++) y[g] = malloc((size_t)(TMAX * ROWS) * sizeof *y[g]);
    const size_t nt = sizeof types / sizeof types[0], nc = sizeof colss / sizeof colss[0];
    for (size_t c = 0; c < nt * nc; c++) {
        const size_t  ti = c % nt;
        const int64_t cols = colss[c / nt];
        random_acts(x, TMAX, cols);
        void        *wd = random_weights(types[ti], ROWS, cols, 0.1f);
        celer_weight w[NG];
        void        *dx[NG], *dy[NG];
        for (int g = 0; g < NG; g++) {
            w[g] = (celer_weight){.type = types[ti], .rows = ROWS, .cols = cols, .data = wd};
            CHECK(be[g]->ops->weight_load(be[g], &w[g], &err) == CELER_OK);
            CHECK(be[g]->ops->alloc(be[g], (size_t)(TMAX * cols) * sizeof(float), &dx[g], &err) == CELER_OK);
            CHECK(be[g]->ops->alloc(be[g], (size_t)(TMAX * ROWS) * sizeof(float), &dy[g], &err) == CELER_OK);
            CHECK(be[g]->ops->write(be[g], dx[g], x, (size_t)(TMAX * cols) * sizeof(float), &err) == CELER_OK);
        }
        for (size_t k = 0; k < sizeof Ts / sizeof Ts[0]; k++) {
            const int64_t T = Ts[k];
            for (int g = 0; g < NG; g++) {
                CHECK(be[g]->ops->matmul(be[g], &w[g], dx[g], T, dy[g], &err) == CELER_OK);
                CHECK(be[g]->ops->read(be[g], dy[g], y[g], (size_t)(T * ROWS) * sizeof(float), &err) == CELER_OK);
            }
            for (int g = 1; g < NG; g++) {
                const bool same = !memcmp(y[0], y[g], (size_t)(T * ROWS) * sizeof(float));
                if (!same)
                    fprintf(stderr, "  %s %lld columns, T=%lld: CELER_GPU_SQ_WIDE=%d differs from =0\n",
                            celer_ggml_type_get(types[ti])->name, (long long)cols, (long long)T, g);
                CHECK(same);
            }
        }
        for (int g = 0; g < NG; g++) be[g]->ops->release(be[g], dx[g]), be[g]->ops->release(be[g], dy[g]);
        free(wd);
    }
    for (int g = 0; g < NG; g++) celer_backend_destroy(be[g]);
    free(x);
    for (int g = 0; g < NG; g++) free(y[g]);
}

/* Steps of more than 32 tokens that the batch kernel takes a chunk of 32 at a time (gpu_mmq.h's
 * GPU_MMQ_CHUNKED): bit for bit the chunks' products run apart (each on the batch kernel, a last
 * chunk of one or two tokens on the decode kernels as such a step alone), where the device has
 * that kernel and no variable moves those steps elsewhere. */
static void test_batch_chunks(void)
{
    static const celer_ggml_type types[] = {CELER_GGML_Q4_0, CELER_GGML_Q8_0};
    static const int64_t         Ts[]    = {33, 48, 64, 66, 96};
    enum { ROWS = 300, COLS = 992, TMAX = 96 };
    const char *mf = getenv("CELER_GPU_MMQ_FROM"), *bf = getenv("CELER_GPU_BLAS_FROM");
    if (!batch_kernel_here()) {
        printf("  batch chunks: no batch kernel on this device, not checked\n");
        return;
    }
    /* CELER_GPU_CHECK=bad: the self-check fails, long steps move off the units */
    if (getenv("CELER_GPU_MMQ_CHUNKED") || (mf && *mf && atoi(mf) >= 16) || checks_made_bad()) {
        printf("  batch chunks: not checked (a variable moves the steps)\n");
        return;
    }
    float *x = malloc((size_t)(TMAX * COLS) * sizeof *x), *y = malloc((size_t)(TMAX * ROWS) * sizeof *y);
    float *yc = malloc((size_t)(TMAX * ROWS) * sizeof *yc);
    random_acts(x, TMAX, COLS);
    float *dx = dev_copy(x, (size_t)(TMAX * COLS) * sizeof *x), *dy = dev_zeros((size_t)(TMAX * ROWS));
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        void        *wd = random_weights(types[ti], ROWS, COLS, 0.1f);
        celer_weight w  = {.type = types[ti], .rows = ROWS, .cols = COLS, .data = wd};
        CHECK(gpu->ops->weight_load(gpu, &w, &err) == CELER_OK);
        for (size_t k = 0; k < sizeof Ts / sizeof Ts[0]; k++) {
            const int64_t T = Ts[k];
            if (bf && *bf && atoi(bf) > 0 && atoi(bf) <= T) continue; /* the BLAS's step */
            CHECK(gpu->ops->matmul(gpu, &w, dx, T, dy, &err) == CELER_OK);
            to_host(dy, y, (size_t)(T * ROWS) * sizeof *y);
            for (int64_t t0 = 0; t0 < T; t0 += 32) { /* each chunk alone */
                const int64_t n = T - t0 < 32 ? T - t0 : 32;
                CHECK(gpu->ops->matmul(gpu, &w, dx + t0 * COLS, n, dy, &err) == CELER_OK);
                to_host(dy, yc + t0 * ROWS, (size_t)(n * ROWS) * sizeof *yc);
            }
            const bool same = !memcmp(y, yc, (size_t)(T * ROWS) * sizeof *y);
            if (!same)
                fprintf(stderr, "  %s T=%lld: the chunked step differs from its chunks run apart\n",
                        celer_ggml_type_get(types[ti])->name, (long long)T);
            CHECK(same);
        }
        free(wd);
    }
    gpu->ops->release(gpu, dx), gpu->ops->release(gpu, dy);
    free(x), free(y), free(yc);
}

int main(void)
{
    setenv("CELER_GPU_BLAS_CHUNK_MB", "0.25", 0); /* several chunks of f16 rows a weight (the bounds above) */
    if (gpu_test_open("test_gpu_formats")) return 1;
    test_get_rows();
    test_matmul_gguf();
    test_matmul_mlx();
    test_blas_routed();
    test_batch_geometries();
    test_batch_chunks();
    return gpu_test_close("test_gpu_formats");
}
