/* The port tables' fused kernels (backends/ports.h) on the GPU against their fallbacks, on
 * fresh random inputs (the seed is printed; CELER_TEST_SEED repeats a run). Bounds (relative L2
 * error, ‖gpu − ref‖ / ‖ref‖):
 *   - add_rmsnorm and attn_inputs against their fallbacks run on the CPU backend: 1e-5 (the
 *     cache contents compared directly);
 *   - matmuls against the CPU's matmul per weight: 1e-3 (1e-2 where the BLAS path may take it);
 *     steps the batch kernel takes in chunks: each weight's own matmul bit for bit too;
 *   - matmul_add against the product and an add: equal bit for bit;
 *   - qkv_inputs against matmuls then attn_inputs on the GPU: equal bit for bit (q, k, v and
 *     the step's cache rows);
 *   - matmul_glu: the default's one launch bit for bit the products and glu of
 *     CELER_GPU_GLU_FUSE=0 (one token: where those run unsliced; a batch's step on the batch
 *     kernel: always), a down product of its output too; the default's against the CPU's
 *     fallback: 1e-2 (3e-2 with 8-bit activations).
 * Every other op: test_gpu_formats.c and test_gpu_ops.c. Run on a machine with a GPU (scripts/gpu-check.sh); built only
 * with CELER_CUDA or CELER_HIP. */
#include "backends/gpu/gpu_ports.h"
#include "backends/ports.h"
#include "runtime/kv_cache.h"

#include "gpu/gpu_test.h"

/* add_rmsnorm and attn_inputs against their fallbacks on the CPU. */
static void test_fused(void)
{
    enum { R = 7, D = 640 };
    static float x[R * D], o[R * D], wv[D], cx[R * D], ch[R * D], gx[R * D], gh[R * D];
    random_fill(x, R * D, 2.0f), random_fill(o, R * D, 2.0f), random_fill(wv, D, 1.0f);
    celer_weight norm = {.type = CELER_GGML_F32, .rows = 1, .cols = D, .data = wv}, ng = norm;
    CHECK(gpu->ops->weight_load(gpu, &ng, &err) == CELER_OK);
    celer_port_fn fn;
    CHECK(celer_port_select(&celer_port_add_rmsnorm, gpu->ops->kind, &fn, &err) == CELER_OK);
    float *dx = dev_copy(x, sizeof x), *dob = dev_copy(o, sizeof o), *dh = dev_zeros(R * D);
    CHECK(((celer_add_rmsnorm_fn)fn)(gpu, dx, dob, &ng, R, D, 1e-6f, dh, &err) == CELER_OK);
    memcpy(cx, x, sizeof x);
    CHECK(cpu->ops->add(cpu, cx, o, R * D, &err) == CELER_OK);
    CHECK(cpu->ops->rmsnorm(cpu, cx, &norm, R, D, 1e-6f, ch, &err) == CELER_OK);
    to_host(dx, gx, sizeof gx), to_host(dh, gh, sizeof gh);
    CHECK(rel_l2f(gx, cx, R * D) < 1e-6 && rel_l2f(gh, ch, R * D) < 1e-5);
    gpu->ops->release(gpu, dx), gpu->ops->release(gpu, dob), gpu->ops->release(gpu, dh);

    /* attn_inputs: norm and neox, partial rotation, frequency divisors, two sequences, with and
     * without per-head norms; q in place, the cache's keys and values */
    enum { T = 9, NH = 4, KV = 2, HD = 128 };
    static float q[T * NH * HD], qr[T * NH * HD], qg[T * NH * HD], k[T * KV * HD], v[T * KV * HD], kr[T * KV * HD];
    static float factors[32], qnv[HD], knv[HD];
    int32_t      pos[T] = {0, 1, 2, 3, 4, 40, 41, 42, 3000}, seq[T] = {0, 0, 0, 0, 0, 1, 1, 1, 1};
    celer_batch  b = {T, pos, seq};
    for (int i = 0; i < 32; i++) factors[i] = 1.0f + (float)i;
    random_fill(qnv, HD, 1.0f), random_fill(knv, HD, 1.0f);
    celer_weight qnc = {.type = CELER_GGML_F32, .rows = 1, .cols = HD, .data = qnv}, qng = qnc;
    celer_weight knc = {.type = CELER_GGML_F32, .rows = 1, .cols = HD, .data = knv}, kng = knc;
    CHECK(cpu->ops->weight_load(cpu, &qnc, &err) == CELER_OK && cpu->ops->weight_load(cpu, &knc, &err) == CELER_OK);
    CHECK(gpu->ops->weight_load(gpu, &qng, &err) == CELER_OK && gpu->ops->weight_load(gpu, &kng, &err) == CELER_OK);
    CHECK(celer_port_select(&celer_port_attn_inputs, gpu->ops->kind, &fn, &err) == CELER_OK);
    for (int c = 0; c < 4; c++) {
        const int  mode = c % 2;
        const bool nrm  = c >= 2;
        celer_rope r = {.mode = mode ? CELER_ROPE_NEOX : CELER_ROPE_NORM, .n_rot = mode ? 64 : HD, .base = 500000.0f,
                        .pos_scale = 1.0f, .freq_factors = mode ? factors : NULL, .mscale = 1.0f};
        celer_kv_cache kc, kg;
        CHECK(celer_kv_cache_init(&kc, cpu, 1, KV, HD, HD, 2, 4096, 256, &err) == CELER_OK);
        CHECK(celer_kv_cache_init(&kg, gpu, 1, KV, HD, HD, 2, 4096, 256, &err) == CELER_OK);
        for (int s = 0; s < 2; s++) {
            CHECK(celer_kv_cache_reserve(&kc, s, s ? 3001 : 5, &err) == CELER_OK);
            CHECK(celer_kv_cache_reserve(&kg, s, s ? 3001 : 5, &err) == CELER_OK);
        }
        random_fill(q, T * NH * HD, 2.0f), random_fill(k, T * KV * HD, 2.0f), random_fill(v, T * KV * HD, 2.0f);
        memcpy(qr, q, sizeof q), memcpy(kr, k, sizeof k);
        float *dq = dev_copy(q, sizeof q), *dk = dev_copy(k, sizeof k), *dv = dev_copy(v, sizeof v);
        CHECK(((celer_attn_inputs_fn)fn)(gpu, &kg, 0, dq, NH, dk, dv, nrm ? &qng : NULL, nrm ? &kng : NULL, 1e-6f, &b,
                                         HD, &r, &err) == CELER_OK);
        if (nrm) { /* the fallback, on the CPU */
            CHECK(cpu->ops->rmsnorm(cpu, qr, &qnc, T * NH, HD, 1e-6f, qr, &err) == CELER_OK);
            CHECK(cpu->ops->rmsnorm(cpu, kr, &knc, T * KV, HD, 1e-6f, kr, &err) == CELER_OK);
        }
        CHECK(cpu->ops->rope(cpu, qr, &b, NH, HD, &r, &err) == CELER_OK);
        CHECK(cpu->ops->rope(cpu, kr, &b, KV, HD, &r, &err) == CELER_OK);
        CHECK(cpu->ops->kv_write(cpu, &kc, 0, kr, v, &b, &err) == CELER_OK);
        /* an f16 cache (CELER_GPU_KV_F16=1) against the CPU's values rounded as it rounds them: keys
         * whose f32 sums differ by an ulp may round apart (1e-4), values not at all */
        const int64_t n  = (int64_t)kc.n_blocks * kc.block_size * KV * HD;
        const double  kb = kg.elem_bytes == 2 ? 1e-4 : 1e-5;
        float        *hk = malloc((size_t)n * sizeof *hk), *hv = malloc((size_t)n * sizeof *hv);
        float        *ck = malloc((size_t)n * sizeof *ck), *cv = malloc((size_t)n * sizeof *cv);
        pool_to_host(&kg, kg.k[0], hk, n), pool_to_host(&kg, kg.v[0], hv, n), to_host(dq, qg, sizeof qg);
        memcpy(ck, kc.k[0], (size_t)n * sizeof *ck), memcpy(cv, kc.v[0], (size_t)n * sizeof *cv);
        if (kg.elem_bytes == 2) round_f16(ck, n), round_f16(cv, n);
        double eq = rel_l2f(qg, qr, T * NH * HD), ek = rel_l2f(hk, ck, n), ev = rel_l2f(hv, cv, n);
        if (!(eq < 1e-5 && ek < kb && ev == 0))
            fprintf(stderr, "  attn_inputs mode %d norms %d: queries %.2e keys %.2e values %.2e\n", mode, nrm, eq, ek, ev);
        CHECK(eq < 1e-5 && ek < kb && ev == 0);
        free(hk), free(hv), free(ck), free(cv);
        gpu->ops->release(gpu, dq), gpu->ops->release(gpu, dk), gpu->ops->release(gpu, dv);
        celer_kv_cache_free(&kc, cpu);
        celer_kv_cache_free(&kg, gpu);
    }
}

/* n random weights of types[i] (rows[i], k) into raw[i], loaded on the CPU (wc) and the GPU (wg, pg
 * pointing at them). */
static void load_weights(int n, const celer_ggml_type *types, const int64_t *rows, int64_t k, void **raw,
                         celer_weight *wc, celer_weight *wg, const celer_weight **pg)
{
    for (int i = 0; i < n; i++) {
        raw[i] = random_weights(types[i], rows[i], k, 0.1f);
        wc[i] = wg[i] = (celer_weight){.type = types[i], .rows = rows[i], .cols = k, .data = raw[i]};
        CHECK(cpu->ops->weight_load(cpu, &wc[i], &err) == CELER_OK);
        CHECK(gpu->ops->weight_load(gpu, &wg[i], &err) == CELER_OK);
        pg[i] = &wg[i];
    }
}

/* matmuls: three weights of one input, two formats among them, against the CPU's matmul per
 * weight at decode, batched-decode (16: Q4_0 on the matrix units, Q6_K in the decode kernel, on
 * one quantization) and prefill sizes (1e-3: the CPU quantizes a K-quant's activations per 256
 * values, the GPU per 32 or not at all; each format's own matmul is checked exactly above; 1e-2
 * where the BLAS path may take it, as above: at 100 tokens all three weights, the second and
 * third on the f16 halves the first made). Each size twice, new values written into the same
 * input between: no product may reuse a quantization or halves of the old ones. At 16 tokens the
 * Q4_0 weights' products also against the GPU's own matmul per weight, bit for bit: a batch's
 * products of one format share a launch (gpu_mmq_small_set), each with its column parts as alone. */
static void test_matmuls(void)
{
    enum { K = 512, N = 3 };
    static const celer_ggml_type types[N] = {CELER_GGML_Q4_0, CELER_GGML_Q6_K, CELER_GGML_Q4_0};
    static const int64_t         rows[N]  = {96, 33, 65};
    static const int64_t         Ts[]     = {1, 5, 16, 33, 100};
    celer_weight                 wc[N], wg[N];
    const celer_weight          *pg[N];
    void                        *raw[N];
    load_weights(N, types, rows, K, raw, wc, wg, pg);
    celer_port_fn fn;
    CHECK(celer_port_select(&celer_port_matmuls, gpu->ops->kind, &fn, &err) == CELER_OK);
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
        int64_t T = Ts[ti];
        float  *x = malloc((size_t)(T * K) * sizeof *x), *dy[N];
        random_acts(x, T, K);
        float *dx = dev_copy(x, (size_t)(T * K) * sizeof *x);
        for (int i = 0; i < N; i++) dy[i] = dev_zeros((size_t)(T * rows[i]));
        for (int round = 0; round < 2; round++) {
            if (round) { /* new values, the same buffer */
                random_acts(x, T, K);
                CHECK(gpu->ops->write(gpu, dx, x, (size_t)(T * K) * sizeof *x, &err) == CELER_OK);
            }
            CHECK(((celer_matmuls_fn)fn)(gpu, pg, N, dx, T, dy, &err) == CELER_OK);
            for (int i = 0; i < N; i++) {
                float *yc = malloc((size_t)(T * rows[i]) * sizeof *yc);
                float *yg = malloc((size_t)(T * rows[i]) * sizeof *yg);
                float *y1 = malloc((size_t)(T * rows[i]) * sizeof *y1), *d1 = dev_zeros((size_t)(T * rows[i]));
                CHECK(cpu->ops->matmul(cpu, &wc[i], x, T, yc, &err) == CELER_OK);
                to_host(dy[i], yg, (size_t)(T * rows[i]) * sizeof *yg);
                CHECK(gpu->ops->matmul(gpu, &wg[i], dx, T, d1, &err) == CELER_OK);
                to_host(d1, y1, (size_t)(T * rows[i]) * sizeof *y1);
                const bool same = T != 16 || types[i] != CELER_GGML_Q4_0 ||
                                  !memcmp(yg, y1, (size_t)(T * rows[i]) * sizeof *yg);
                if (!same) fprintf(stderr, "  matmuls T=%lld weight %d: not its own matmul's outputs\n", (long long)T, i);
                CHECK(same);
                gpu->ops->release(gpu, d1), free(y1);
                double e = rel_l2f(yg, yc, T * rows[i]), bound = blas_may(types[i], T) ? 1e-2 : 1e-3;
                if (x8_mode()) bound = 2e-2; /* 8-bit activations against the CPU's two levels */
                if (!(e < bound))
                    fprintf(stderr, "  matmuls T=%lld weight %d round %d: %.2e\n", (long long)T, i, round, e);
                CHECK(e < bound);
                free(yc), free(yg);
            }
        }
        for (int i = 0; i < N; i++) gpu->ops->release(gpu, dy[i]);
        gpu->ops->release(gpu, dx);
        free(x);
    }
    for (int i = 0; i < N; i++) free(raw[i]);
}

/* The port matmuls over steps the batch kernel takes a chunk of 32 tokens at a time (48, 64 and
 * 96 tokens of two Q4_0 weights and a Q8_0 one: one launch a format a chunk): each output bit for
 * bit the weight's own matmul (which takes the same chunks alone), where the device has that
 * kernel and no variable moves the steps; and within 1e-3 of the CPU's everywhere. */
static void test_matmuls_chunked(void)
{
    enum { K = 512, N = 3, TMAX = 96 };
    static const celer_ggml_type types[N] = {CELER_GGML_Q4_0, CELER_GGML_Q8_0, CELER_GGML_Q4_0};
    static const int64_t         rows[N]  = {96, 33, 65};
    static const int64_t         Ts[]     = {48, 64, 96};
    const char                  *mc = getenv("CELER_GPU_MMQ_CHUNKED"), *bf = getenv("CELER_GPU_BLAS_FROM");
    const bool here = batch_kernel_here() && !mc && !(bf && *bf) && !checks_made_bad();
    celer_weight        wc[N], wg[N];
    const celer_weight *pg[N];
    void               *raw[N];
    load_weights(N, types, rows, K, raw, wc, wg, pg);
    if (!here) printf("  matmuls chunked: bit for bit not checked (no batch kernel here, or a variable moves it)\n");
    celer_port_fn fn;
    CHECK(celer_port_select(&celer_port_matmuls, gpu->ops->kind, &fn, &err) == CELER_OK);
    float *x = malloc((size_t)(TMAX * K) * sizeof *x), *dy[N], *d1 = dev_zeros((size_t)(TMAX * rows[0]));
    float *yc = malloc((size_t)(TMAX * rows[0]) * sizeof *yc), *yg = malloc((size_t)(TMAX * rows[0]) * sizeof *yg);
    float *y1 = malloc((size_t)(TMAX * rows[0]) * sizeof *y1);
    random_acts(x, TMAX, K);
    float *dx = dev_copy(x, (size_t)(TMAX * K) * sizeof *x);
    for (int i = 0; i < N; i++) dy[i] = dev_zeros((size_t)(TMAX * rows[i]));
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
        const int64_t T = Ts[ti];
        CHECK(((celer_matmuls_fn)fn)(gpu, pg, N, dx, T, dy, &err) == CELER_OK);
        for (int i = 0; i < N; i++) {
            const size_t bytes = (size_t)(T * rows[i]) * sizeof(float);
            CHECK(cpu->ops->matmul(cpu, &wc[i], x, T, yc, &err) == CELER_OK);
            CHECK(gpu->ops->matmul(gpu, &wg[i], dx, T, d1, &err) == CELER_OK);
            to_host(dy[i], yg, bytes), to_host(d1, y1, bytes);
            const bool   same = !here || !memcmp(yg, y1, bytes);
            const double e    = rel_l2f(yg, yc, T * rows[i]), bound = x8_mode() ? 2e-2 : 1e-3;
            if (!same || !(e < bound))
                fprintf(stderr, "  matmuls chunked T=%lld weight %d: %s, %.2e against the CPU's\n", (long long)T, i,
                        same ? "its own matmul's outputs" : "not its own matmul's outputs", e);
            CHECK(same && e < bound);
        }
    }
    for (int i = 0; i < N; i++) gpu->ops->release(gpu, dy[i]), free(raw[i]);
    gpu->ops->release(gpu, dx), gpu->ops->release(gpu, d1);
    free(x), free(yc), free(yg), free(y1);
}

/* The port matmul_add: y + the product, as matmul then a host add gives it, bit for bit: the
 * decode kernel's sums (1 and 5 tokens), the matrix-unit kernels' (16: streamed, 40: tiled, or
 * on NVIDIA streamed a chunk of 32 at a time, on a device with them), the vendor BLAS's and
 * F32's through tmp (100 tokens; F32 at any). */
static void test_matmul_add(void)
{
    enum { K = 512, R = 80 };
    celer_port_fn fn;
    CHECK(celer_port_select(&celer_port_matmul_add, gpu->ops->kind, &fn, &err) == CELER_OK);
    static const celer_ggml_type types[] = {CELER_GGML_Q4_0, CELER_GGML_Q4_K, CELER_GGML_F32};
    static const int64_t         Ts[]    = {1, 5, 16, 40, 100};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        void        *raw = random_weights(types[k], R, K, 0.1f);
        celer_weight w   = {.type = types[k], .rows = R, .cols = K, .data = raw};
        CHECK(gpu->ops->weight_load(gpu, &w, &err) == CELER_OK);
        for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
            const int64_t T = Ts[ti];
            float        *x = malloc((size_t)(T * K) * sizeof *x), *y0 = malloc((size_t)(T * R) * sizeof *y0);
            float        *p = malloc((size_t)(T * R) * sizeof *p), *y = malloc((size_t)(T * R) * sizeof *y);
            random_acts(x, T, K), random_fill(y0, T * R, 3.0f);
            float *dx = dev_copy(x, (size_t)(T * K) * sizeof *x), *dy = dev_copy(y0, (size_t)(T * R) * sizeof *y0);
            float *dp = dev_zeros((size_t)(T * R)), *dt = dev_zeros((size_t)(T * R));
            CHECK(gpu->ops->matmul(gpu, &w, dx, T, dp, &err) == CELER_OK);
            CHECK(((celer_matmul_add_fn)fn)(gpu, &w, dx, T, dy, dt, &err) == CELER_OK);
            to_host(dp, p, (size_t)(T * R) * sizeof *p), to_host(dy, y, (size_t)(T * R) * sizeof *y);
            int bad = 0;
            for (int64_t i = 0; i < T * R; i++) bad += y[i] != y0[i] + p[i];
            if (bad) fprintf(stderr, "  matmul_add type %d T=%lld: %d sums differ\n", (int)types[k], (long long)T, bad);
            CHECK(bad == 0);
            gpu->ops->release(gpu, dx), gpu->ops->release(gpu, dy), gpu->ops->release(gpu, dp), gpu->ops->release(gpu, dt);
            free(x), free(y0), free(p), free(y);
        }
        free(raw);
    }
}

/* The port matmul_glu on two backends, the default and one with CELER_GPU_GLU_FUSE=0 (the gate and
 * up products, then glu): h bit for bit, and a down product reading each one's h (the quantized
 * copy it left, into the buffer apart from the input's, where ff is a multiple of 32; h in f32
 * only where not). One token (gpu_matvec_glu.cu's launch; Q4_0, Q8_0 and Q4_K) bit for bit where
 * the second's products run unsliced (two weights of ff rows: ff / 8 blocks, at least three an
 * SM: gpu_matvec.cu's MVQ_KS_BELOW; 132 SMs on the H200); a batch's step (3 to 32 tokens: the
 * batch kernel's launch, gpu_mmq_small_glu) always. Which path ran is held to
 * celer_gpu_matmul_glu_one where no variable moves the products: one token in one launch; a
 * batch's Q4_0 and Q8_0 pairs of rows a multiple of 32 too where NVIDIA's batch kernel runs
 * (batch_kernel_here, its self-check not made to fail) with both levels of the activations, MLX
 * affine 4 and 8 bits' with either, the others (Q4_K; 600 rows) to the fallback. The default's h
 * against the CPU's fallback (matmul, matmul, glu): 1e-2 (3e-2 with 8-bit activations). SiLU and
 * GELU. */
static void test_matmul_glu(void)
{
    enum { K = 512, D = 64 };
    static const struct {
        celer_ggml_type type;
        int64_t         ff, T;
        int             mlx_bits; /* MLX affine, groups of 64, bf16 scales (type unused) */
    } cases[] = {{CELER_GGML_Q4_0, 3328, 1, 0}, {CELER_GGML_Q4_0, 3240, 1, 0}, {CELER_GGML_Q8_0, 3328, 1, 0},
                 {CELER_GGML_Q8_0, 3240, 1, 0}, {CELER_GGML_Q4_K, 3328, 1, 0}, {CELER_GGML_Q4_K, 3240, 1, 0},
                 {CELER_GGML_Q4_0, 640, 32, 0}, {CELER_GGML_Q4_0, 608, 12, 0}, {CELER_GGML_Q8_0, 640, 3, 0},
                 {CELER_GGML_Q8_0, 608, 32, 0}, {CELER_GGML_Q4_0, 600, 8, 0},  {CELER_GGML_Q4_K, 640, 16, 0},
                 {CELER_GGML_Q4_0, 640, 32, 4}, {CELER_GGML_Q4_0, 608, 5, 8}};
    celer_backend *apart = gpu_backend_with((const char *const[]){"CELER_GPU_GLU_FUSE=0"}, 1), *was = gpu;
    const bool     moved = getenv("CELER_GPU_MMQ_FROM") || getenv("CELER_GPU_BLAS_FROM") || getenv("CELER_GPU_SQ_WIDE") ||
                       getenv("CELER_GPU_GLU_FUSE");
    celer_device_facts facts;
    CHECK(celer_device_query(0, &facts, &err) == CELER_OK);
    celer_port_fn fn;
    CHECK(celer_port_select(&celer_port_matmul_glu, gpu->ops->kind, &fn, &err) == CELER_OK);
    if (!apart) return;
    if (moved) printf("  matmul_glu: which path ran not checked (a variable moves the products)\n");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const celer_ggml_type t = cases[c].type;
        const int64_t         ff = cases[c].ff, T = cases[c].T, n = T * ff;
        const celer_act       act = c % 2 ? CELER_ACT_GELU_TANH : CELER_ACT_SILU;
        const int mb = cases[c].mlx_bits;
        void     *mg[3] = {NULL, NULL, NULL}, *mu[3] = {NULL, NULL, NULL};
        void     *rg = mb ? NULL : random_weights(t, ff, K, 0.1f), *ru = mb ? NULL : random_weights(t, ff, K, 0.1f);
        const celer_weight hg = mb ? mlx_host(ff, K, CELER_HF_QUANT_AFFINE, (uint32_t)mb, 64, CELER_ST_BF16, mg)
                                   : (celer_weight){.type = t, .rows = ff, .cols = K, .data = rg};
        const celer_weight hu = mb ? mlx_host(ff, K, CELER_HF_QUANT_AFFINE, (uint32_t)mb, 64, CELER_ST_BF16, mu)
                                   : (celer_weight){.type = t, .rows = ff, .cols = K, .data = ru};
        void  *rd = random_weights(CELER_GGML_Q8_0, D, ff - ff % 32, 0.1f);
        float *x = malloc((size_t)(T * K) * sizeof *x), *h[2], *y[2], *hc = malloc((size_t)n * sizeof *hc);
        float *uc = malloc((size_t)n * sizeof *uc);
        bool   one = false;
        random_acts(x, T, K);
        celer_backend *be[2] = {was, apart};
        for (int b = 0; b < 2; b++) {
            gpu = be[b];
            celer_weight wg = hg, wu = hu, wd = {.type = CELER_GGML_Q8_0, .rows = D, .cols = ff - ff % 32, .data = rd};
            CHECK(gpu->ops->weight_load(gpu, &wg, &err) == CELER_OK && gpu->ops->weight_load(gpu, &wu, &err) == CELER_OK &&
                  gpu->ops->weight_load(gpu, &wd, &err) == CELER_OK);
            if (b == 0) one = celer_gpu_matmul_glu_one(gpu, &wg, &wu, T);
            CHECK(b == 0 || !celer_gpu_matmul_glu_one(gpu, &wg, &wu, T));
            float *dx = dev_copy(x, (size_t)(T * K) * sizeof *x), *dh = dev_zeros((size_t)n), *du = dev_zeros((size_t)n);
            float *dy = dev_zeros((size_t)(T * D));
            h[b] = malloc((size_t)n * sizeof *h[b]), y[b] = malloc((size_t)(T * D) * sizeof *y[b]);
            CHECK(((celer_matmul_glu_fn)fn)(gpu, &wg, &wu, dx, T, act, dh, du, &err) == CELER_OK);
            to_host(dh, h[b], (size_t)n * sizeof *h[b]);
            if (ff % 32 == 0) { /* the down product reads h's quantized copy */
                CHECK(gpu->ops->matmul(gpu, &wd, dh, T, dy, &err) == CELER_OK);
                to_host(dy, y[b], (size_t)(T * D) * sizeof *y[b]);
            }
            gpu->ops->release(gpu, dx), gpu->ops->release(gpu, dh), gpu->ops->release(gpu, du), gpu->ops->release(gpu, dy);
        }
        gpu = was;
        celer_weight cg = hg, cu = hu;
        CHECK(cpu->ops->weight_load(cpu, &cg, &err) == CELER_OK && cpu->ops->weight_load(cpu, &cu, &err) == CELER_OK);
        CHECK(cpu->ops->matmul(cpu, &cg, x, T, hc, &err) == CELER_OK && cpu->ops->matmul(cpu, &cu, x, T, uc, &err) == CELER_OK);
        CHECK(cpu->ops->glu(cpu, hc, uc, n, act, &err) == CELER_OK);
        const bool   batch = (mb || t == CELER_GGML_Q4_0 || t == CELER_GGML_Q8_0) && ff % 32 == 0 && batch_kernel_here() &&
                           !checks_made_bad() && (mb || !x8_mode());
        const bool   want  = T == 1 || batch;
        const bool   exact = T > 1 || 2 * (ff / 16) >= 3 * (int64_t)facts.compute_units;
        /* 8-bit activations: 3e-2 (Q4_K's 3240 rows with GELU came to 2.12e-2 against the CPU's
         * 8-bit Q8_K activations at seed 4939750085131611957) */
        const double e = rel_l2f(h[0], hc, n), bound = x8_mode() ? 3e-2 : 1e-2;
        const bool   same = !memcmp(h[0], h[1], (size_t)n * sizeof *h[0]) &&
                          (ff % 32 || !memcmp(y[0], y[1], (size_t)(T * D) * sizeof *y[0]));
        if (!(e < bound) || (exact && !same) || (!moved && one != want))
            fprintf(stderr, "  matmul_glu %s%s ff=%lld T=%lld act %d: %.2e against the CPU, apart %s, %s\n",
                    mb ? "MLX affine" : celer_ggml_type_get(t)->name, mb == 4 ? " 4" : mb == 8 ? " 8" : "", (long long)ff,
                    (long long)T, (int)act, e, same ? "equal" : "differs", one ? "one launch" : "fallback");
        CHECK(e < bound && (!exact || same) && (moved || one == want));
        free(rg), free(ru), free(rd), free(x), free(hc), free(uc);
        for (int i = 0; i < 3; i++) free(mg[i]), free(mu[i]);
        for (int b = 0; b < 2; b++) free(h[b]), free(y[b]);
    }
    celer_backend_destroy(apart);
}

/* qkv_inputs against its fallback on the GPU (matmuls, then attn_inputs), bit for bit: q, k and v
 * and the step's rows of both caches. One token of Q4_0, Q4_1, Q8_0 and MLX affine 4- and 8-bit
 * weights with 16-bit scales (the formats with fused kernels), the rotation over the whole head
 * and over half of it, at row counts the one-token products take sliced (768 rows), sliced WIDE
 * (6,144: the 8B's q/k/v) and unsliced (10,240) on the H200, with pairs adjacent (NORM) and a
 * head apart (NEOX: each warp takes the rows of its pairs); then Q4_K weights, MLX affine ones
 * with f32 scales and five tokens, which the port runs as the fallback itself. Which of the two
 * ran is held to celer_gpu_qkv_inputs_one (the values alone cannot tell), where no variable moves
 * the products elsewhere. */
static void test_qkv_inputs(void)
{
    enum { K = 512, HD = 128, TMAX = 5, P0 = 3000 };
    static const struct {
        celer_ggml_type type;
        int             nh, nkv, T, neox, n_rot;
        int             mlx_bits;     /* MLX affine, groups of 64, scales of mlx_dtype (type unused) */
        celer_st_dtype  mlx_dtype;
        bool            one;          /* the port's one launch (by default) */
    } cases[] = {{CELER_GGML_Q4_0, 4, 2, 1, 0, HD, 0, 0, true},   {CELER_GGML_Q8_0, 4, 2, 1, 0, 64, 0, 0, true},
                 {CELER_GGML_Q4_1, 32, 8, 1, 0, HD, 0, 0, true},  {CELER_GGML_Q4_0, 64, 8, 1, 0, 64, 0, 0, true},
                 {CELER_GGML_Q4_K, 4, 2, 1, 0, HD, 0, 0, false},  {CELER_GGML_Q4_0, 4, 2, 1, 1, HD, 0, 0, true},
                 {CELER_GGML_Q8_0, 32, 8, 1, 1, 64, 0, 0, true},  {CELER_GGML_Q4_0, 64, 8, 1, 1, HD, 0, 0, true},
                 {CELER_GGML_Q4_1, 4, 2, 1, 1, 64, 0, 0, true},   {CELER_GGML_Q4_0, 4, 2, TMAX, 1, HD, 0, 0, false},
                 {0, 32, 8, 1, 1, HD, 4, CELER_ST_BF16, true},    {0, 4, 2, 1, 0, 64, 4, CELER_ST_F16, true},
                 {0, 64, 8, 1, 1, HD, 8, CELER_ST_BF16, true},    {0, 4, 2, 1, 1, 64, 8, CELER_ST_F16, true},
                 {0, 4, 2, 1, 1, HD, 4, CELER_ST_F32, false},     {0, 4, 2, TMAX, 1, HD, 4, CELER_ST_BF16, false}};
    const bool    moved = getenv("CELER_GPU_QKV_IN") || getenv("CELER_GPU_MMQ_FROM") || getenv("CELER_GPU_BLAS_FROM");
    if (moved) printf("  qkv_inputs: which path ran not checked (a variable moves the products)\n");
    celer_port_fn fq, fm, fa;
    CHECK(celer_port_select(&celer_port_qkv_inputs, gpu->ops->kind, &fq, &err) == CELER_OK);
    CHECK(celer_port_select(&celer_port_matmuls, gpu->ops->kind, &fm, &err) == CELER_OK);
    CHECK(celer_port_select(&celer_port_attn_inputs, gpu->ops->kind, &fa, &err) == CELER_OK);
    if (!fq || !fm || !fa) return;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int     T = cases[c].T, nh = cases[c].nh, nkv = cases[c].nkv;
        const int64_t rows[3] = {(int64_t)nh * HD, (int64_t)nkv * HD, (int64_t)nkv * HD};
        celer_weight  w[3];
        const celer_weight *pw[3];
        void               *raw[3];
        void               *mlx[3][3] = {{NULL}};
        for (int i = 0; i < 3; i++) {
            if (cases[c].mlx_bits) {
                raw[i] = NULL;
                w[i]   = mlx_host(rows[i], K, CELER_HF_QUANT_AFFINE, (uint32_t)cases[c].mlx_bits, 64,
                                  cases[c].mlx_dtype, mlx[i]);
            } else {
                raw[i] = random_weights(cases[c].type, rows[i], K, 0.1f);
                w[i]   = (celer_weight){.type = cases[c].type, .rows = rows[i], .cols = K, .data = raw[i]};
            }
            CHECK(gpu->ops->weight_load(gpu, &w[i], &err) == CELER_OK);
            pw[i] = &w[i];
        }
        celer_rope r = {.mode = cases[c].neox ? CELER_ROPE_NEOX : CELER_ROPE_NORM, .n_rot = cases[c].n_rot,
                        .base = 500000.0f, .pos_scale = 1.0f, .mscale = 1.0f};
        int32_t     pos[TMAX], seq[TMAX];
        for (int t = 0; t < T; t++) pos[t] = P0 + t, seq[t] = 1;
        celer_batch    b = {T, pos, seq};
        celer_kv_cache kc[2];
        float         *x = malloc((size_t)(T * K) * sizeof *x), *y[2][3], *h[2][3];
        random_acts(x, T, K);
        float *dx = dev_copy(x, (size_t)(T * K) * sizeof *x);
        for (int v = 0; v < 2; v++) {
            CHECK(celer_kv_cache_init(&kc[v], gpu, 1, nkv, HD, HD, 2, 4096, 256, &err) == CELER_OK);
            CHECK(celer_kv_cache_reserve(&kc[v], 1, P0 + T, &err) == CELER_OK);
            for (int i = 0; i < 3; i++)
                y[v][i] = dev_zeros((size_t)(T * rows[i])), h[v][i] = malloc((size_t)(T * rows[i]) * sizeof(float));
        }
        const bool one = celer_gpu_qkv_inputs_one(gpu, pw, &kc[0], &b, nh, HD, &r);
        if (!moved && one != cases[c].one)
            fprintf(stderr, "  qkv_inputs case %zu: the port's %s, not its %s\n", c, one ? "one launch" : "fallback",
                    cases[c].one ? "one launch" : "fallback");
        CHECK(moved || one == cases[c].one);
        CHECK(((celer_qkv_inputs_fn)fq)(gpu, pw, dx, &kc[0], 0, &b, y[0][0], nh, y[0][1], y[0][2], HD, &r, &err) ==
              CELER_OK);
        CHECK(((celer_matmuls_fn)fm)(gpu, pw, 3, dx, T, y[1], &err) == CELER_OK);
        CHECK(((celer_attn_inputs_fn)fa)(gpu, &kc[1], 0, y[1][0], nh, y[1][1], y[1][2], NULL, NULL, 0.0f, &b, HD, &r,
                                         &err) == CELER_OK);
        int differ = 0;
        for (int i = 0; i < 3; i++) {
            for (int v = 0; v < 2; v++) to_host(y[v][i], h[v][i], (size_t)(T * rows[i]) * sizeof(float));
            differ += memcmp(h[0][i], h[1][i], (size_t)(T * rows[i]) * sizeof(float)) != 0;
        }
        const int64_t kw = (int64_t)nkv * HD, pool = (int64_t)kc[0].n_blocks * kc[0].block_size * kw;
        float        *ph[2][2];
        for (int v = 0; v < 2; v++)
            for (int kv = 0; kv < 2; kv++) {
                ph[v][kv] = malloc((size_t)pool * sizeof(float));
                pool_to_host(&kc[v], kv ? kc[v].v[0] : kc[v].k[0], ph[v][kv], pool);
            }
        for (int t = 0; t < T; t++) { /* the step's rows: the rest of the pools was never written */
            const int32_t p    = pos[t];
            const int64_t slot = (int64_t)kc[0].tables[1 * kc[0].max_blocks + p / kc[0].block_size] * kc[0].block_size +
                                 p % kc[0].block_size;
            for (int kv = 0; kv < 2; kv++)
                differ += memcmp(ph[0][kv] + slot * kw, ph[1][kv] + slot * kw, (size_t)kw * sizeof(float)) != 0;
        }
        if (differ)
            fprintf(stderr, "  qkv_inputs case %zu (%s, %d + %d heads, %d tokens%s, %d rotated): %d of %d arrays differ\n",
                    c, cases[c].mlx_bits ? "MLX affine" : celer_ggml_type_get(cases[c].type)->name, nh, nkv, T,
                    cases[c].neox ? ", neox" : "", cases[c].n_rot, differ, 3 + 2 * T);
        CHECK(differ == 0);
        for (int v = 0; v < 2; v++) {
            for (int i = 0; i < 3; i++) gpu->ops->release(gpu, y[v][i]), free(h[v][i]);
            for (int kv = 0; kv < 2; kv++) free(ph[v][kv]);
            celer_kv_cache_free(&kc[v], gpu);
        }
        gpu->ops->release(gpu, dx);
        free(x);
        for (int i = 0; i < 3; i++) {
            free(raw[i]);
            for (int j = 0; j < 3; j++) free(mlx[i][j]);
        }
    }
}

int main(void)
{
    if (gpu_test_open("test_gpu_ports")) return 1;
    test_fused();
    test_matmuls();
    test_matmuls_chunked();
    test_matmul_add();
    test_matmul_glu();
    test_qkv_inputs();
    return gpu_test_close("test_gpu_ports");
}
