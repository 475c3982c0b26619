/* The port tables' fused kernels (backends/ports.h) on the GPU against their fallbacks, on
 * fresh random inputs (the seed is printed; CELER_TEST_SEED repeats a run). Bounds (relative L2
 * error, ‖gpu − ref‖ / ‖ref‖):
 *   - add_rmsnorm and attn_inputs against their fallbacks run on the CPU backend: 1e-5 (the
 *     cache contents compared directly);
 *   - matmuls against the CPU's matmul per weight: 1e-3 (1e-2 where the BLAS path may take it);
 *   - matmul_add against the product and an add: equal bit for bit;
 *   - attn_step (CELER_GPU_ATT_STEP=1, which main sets) on decode steps the wide attention kernel
 *     takes, against attn_inputs then attention: outputs and cache contents equal bit for bit;
 *   - matmuls_glu (CELER_GPU_GLU_FUSE=1, likewise) against matmuls then glu: equal bit for bit.
 * Every other op: test_gpu_ops.c. Run on a machine with a GPU (scripts/gpu-check.sh); built only
 * with CELER_CUDA or CELER_HIP. */
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

/* matmuls: three weights of one input, two formats among them, against the CPU's matmul per
 * weight at decode, batched-decode (16: Q4_0 on the matrix units, Q6_K in the decode kernel, on
 * one quantization) and prefill sizes (1e-3: the CPU quantizes a K-quant's activations per 256
 * values, the GPU per 32 or not at all; each format's own matmul is checked exactly above; 1e-2
 * where the BLAS path may take it, as above: at 70 tokens all three weights, the second and
 * third on the f16 halves the first made). Each size twice, new values written into the same
 * input between: no product may reuse a quantization or halves of the old ones. */
static void test_matmuls(void)
{
    enum { K = 512, N = 3 };
    static const celer_ggml_type types[N] = {CELER_GGML_Q4_0, CELER_GGML_Q6_K, CELER_GGML_Q4_0};
    static const int64_t         rows[N]  = {96, 33, 65};
    static const int64_t         Ts[]     = {1, 5, 16, 33, 70};
    celer_weight                 wc[N], wg[N];
    const celer_weight          *pg[N];
    void                        *raw[N];
    for (int i = 0; i < N; i++) {
        raw[i] = random_weights(types[i], rows[i], K, 0.1f);
        wc[i] = wg[i] = (celer_weight){.type = types[i], .rows = rows[i], .cols = K, .data = raw[i]};
        CHECK(cpu->ops->weight_load(cpu, &wc[i], &err) == CELER_OK);
        CHECK(gpu->ops->weight_load(gpu, &wg[i], &err) == CELER_OK);
        pg[i] = &wg[i];
    }
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
                CHECK(cpu->ops->matmul(cpu, &wc[i], x, T, yc, &err) == CELER_OK);
                to_host(dy[i], yg, (size_t)(T * rows[i]) * sizeof *yg);
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

/* The port matmul_add: y + the product, as matmul then a host add gives it, bit for bit: the
 * decode kernel's sums (1 and 5 tokens), the matrix-unit kernels' (16: streamed, 40: tiled, on
 * a device with them), the vendor BLAS's and F32's through tmp (70 tokens; F32 at any). */
static void test_matmul_add(void)
{
    enum { K = 512, R = 80 };
    celer_port_fn fn;
    CHECK(celer_port_select(&celer_port_matmul_add, gpu->ops->kind, &fn, &err) == CELER_OK);
    static const celer_ggml_type types[] = {CELER_GGML_Q4_0, CELER_GGML_Q4_K, CELER_GGML_F32};
    static const int64_t         Ts[]    = {1, 5, 16, 40, 70};
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

/* matmuls_glu (CELER_GPU_GLU_FUSE=1, which main sets) against gate and up through the decode
 * kernel, then glu: h equal bit for bit, u_out left as it was (the fused launch ran: it writes no
 * up product), and the down product that follows (reading each path's quantization of h) equal
 * bit for bit. Decode-sized steps (a one-token step against the first token of a two-token step
 * of the same token: a lone token's products may take column slices, which sum in another
 * order; under CELER_GPU_MVQ_X8=1 the lone token's kernel takes its sums another way: 1e-6), silu
 * and gelu, three formats. Q4_0 and Q8_0 steps past CELER_GPU_MMQ_FROM tokens (8) take the
 * integer matrix units, and with them the two steps (an NVIDIA device has those units). */
static void test_matmuls_glu(void)
{
    const char *mf       = getenv("CELER_GPU_MMQ_FROM");
    const int   mmq_from = mf && *mf ? atoi(mf) : 8;
    enum { K = 512, FF = 352, D = 96 };
    static const celer_ggml_type types[] = {CELER_GGML_Q4_0, CELER_GGML_Q4_K, CELER_GGML_Q8_0};
    static const int64_t         Ts[]    = {1, 3, 8, 9};
    celer_port_fn                fn, mm;
    CHECK(celer_port_select(&celer_port_matmuls_glu, gpu->ops->kind, &fn, &err) == CELER_OK);
    CHECK(celer_port_select(&celer_port_matmuls, gpu->ops->kind, &mm, &err) == CELER_OK);
    void        *rd = random_weights(CELER_GGML_Q4_0, D, FF, 0.1f);
    celer_weight wd = {.type = CELER_GGML_Q4_0, .rows = D, .cols = FF, .data = rd};
    CHECK(gpu->ops->weight_load(gpu, &wd, &err) == CELER_OK);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        void        *rg = random_weights(types[k], FF, K, 0.1f), *ru = random_weights(types[k], FF, K, 0.1f);
        celer_weight wg = {.type = types[k], .rows = FF, .cols = K, .data = rg};
        celer_weight wu = {.type = types[k], .rows = FF, .cols = K, .data = ru};
        CHECK(gpu->ops->weight_load(gpu, &wg, &err) == CELER_OK && gpu->ops->weight_load(gpu, &wu, &err) == CELER_OK);
        const celer_weight *gu[2] = {&wg, &wu};
        for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++)
            for (int act = CELER_ACT_SILU; act <= CELER_ACT_GELU_TANH; act++) {
                const int64_t T = Ts[ti], TB = T > 1 ? T : 2; /* the reference's tokens */
                float        *x = malloc((size_t)(TB * K) * sizeof *x);
                random_acts(x, T, K);
                if (T == 1) memcpy(x + K, x, K * sizeof *x);
                float *ha = malloc((size_t)(TB * FF) * sizeof *ha), *hb = malloc((size_t)(TB * FF) * sizeof *hb);
                float *ua = malloc((size_t)(T * FF) * sizeof *ua), *ya = malloc((size_t)(TB * D) * sizeof *ya);
                float *yb = malloc((size_t)(TB * D) * sizeof *yb);
                float *dx = dev_copy(x, (size_t)(TB * K) * sizeof *x), *dga = dev_zeros((size_t)(T * FF));
                float *dua = dev_zeros((size_t)(T * FF)), *dgb = dev_zeros((size_t)(TB * FF));
                float *dub = dev_zeros((size_t)(TB * FF)), *dya = dev_zeros((size_t)(TB * D));
                float *dyb = dev_zeros((size_t)(TB * D));
                float *const yb2[2] = {dgb, dub};
                CHECK(((celer_matmuls_glu_fn)fn)(gpu, &wg, &wu, dx, T, (celer_act)act, dga, dua, &err) == CELER_OK);
                CHECK(gpu->ops->matmul(gpu, &wd, dga, T, dya, &err) == CELER_OK);
                CHECK(((celer_matmuls_fn)mm)(gpu, gu, 2, dx, TB, yb2, &err) == CELER_OK);
                CHECK(gpu->ops->glu(gpu, dgb, dub, TB * FF, (celer_act)act, &err) == CELER_OK);
                CHECK(gpu->ops->matmul(gpu, &wd, dgb, TB, dyb, &err) == CELER_OK);
                to_host(dga, ha, (size_t)(T * FF) * sizeof *ha), to_host(dgb, hb, (size_t)(TB * FF) * sizeof *hb);
                to_host(dua, ua, (size_t)(T * FF) * sizeof *ua);
                to_host(dya, ya, (size_t)(T * D) * sizeof *ya), to_host(dyb, yb, (size_t)(TB * D) * sizeof *yb);
                const bool exact  = T > 1 || !x8_mode();
                const bool fuses  = types[k] == CELER_GGML_Q4_K || T <= mmq_from;
                bool       same_h = exact ? !memcmp(ha, hb, (size_t)(T * FF) * sizeof *ha)
                                          : rel_l2f(ha, hb, T * FF) < 1e-6,
                     untouched = true;
                bool same_y = T == 1 || !memcmp(ya, yb, (size_t)(T * D) * sizeof *ya); /* T 1: the down product's
                                                                                       * own slices, as above */
                for (int64_t i = 0; i < T * FF; i++) untouched &= ua[i] == 0.0f;
                if (!same_h || !same_y || untouched != fuses)
                    fprintf(stderr, "  matmuls_glu type %d T=%lld act %d: h %s (rel %.2e), down %s, up %s\n",
                            (int)types[k], (long long)T, act, same_h ? "equal" : "differs",
                            rel_l2f(ha, hb, T * FF), same_y ? "equal" : "differs",
                            untouched ? "untouched" : "written (the two steps ran)");
                CHECK(same_h && same_y && untouched == fuses);
                float *bufs[] = {dx, dga, dua, dgb, dub, dya, dyb};
                for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) gpu->ops->release(gpu, bufs[i]);
                free(x), free(ha), free(hb), free(ua), free(ya), free(yb);
            }
        free(rg), free(ru);
    }
    free(rd);
}

/* One decode step of S sequences (one token each, positions under the wide kernel's 128 keys)
 * through attn_step and through attn_inputs then attention, on two caches holding the same
 * random keys and values before it: equal outputs and caches, bit for bit; and q left as it was
 * (the fused kernel reads it, the two kernels rotate it in place: the fused path ran). Both
 * rotations, with and without per-head norms, the f32 or f16 cache as the variables say, a
 * sliding window in the last case. Under CELER_GPU_ATT_WIDE=0 or a fixed CELER_GPU_ATT_CHUNK the
 * steps are split and the port runs the two kernels (q rotated). */
static void test_attn_step(void)
{
    const char *aw = getenv("CELER_GPU_ATT_WIDE"), *ac = getenv("CELER_GPU_ATT_CHUNK");
    const bool  fuses = !(aw && !strcmp(aw, "0")) && !(ac && atoi(ac) >= 16 && atoi(ac) <= 65536);
    enum { S = 3, NH = 8, KV = 2, HD = 128, NSEQ = 4 };
    static float q[S * NH * HD], k[S * KV * HD], v[S * KV * HD], qnv[HD], knv[HD];
    static float oa[S * NH * HD], ob[S * NH * HD], qa[S * NH * HD];
    int32_t      pos[S] = {0, 37, 126}, seq[S] = {2, 0, 3};
    celer_batch  b = {S, pos, seq};
    random_fill(qnv, HD, 1.0f), random_fill(knv, HD, 1.0f);
    celer_weight qng = {.type = CELER_GGML_F32, .rows = 1, .cols = HD, .data = qnv};
    celer_weight kng = {.type = CELER_GGML_F32, .rows = 1, .cols = HD, .data = knv};
    CHECK(gpu->ops->weight_load(gpu, &qng, &err) == CELER_OK && gpu->ops->weight_load(gpu, &kng, &err) == CELER_OK);
    celer_port_fn step, inputs;
    CHECK(celer_port_select(&celer_port_attn_step, gpu->ops->kind, &step, &err) == CELER_OK);
    CHECK(celer_port_select(&celer_port_attn_inputs, gpu->ops->kind, &inputs, &err) == CELER_OK);
    for (int c = 0; c < 4; c++) {
        const int      mode = c % 2;
        const bool     nrm  = c >= 2;
        celer_rope     r = {.mode = mode ? CELER_ROPE_NEOX : CELER_ROPE_NORM, .n_rot = mode ? 64 : HD, .base = 10000.0f,
                            .pos_scale = 1.0f, .mscale = 1.0f};
        celer_attn     at = {.n_heads = NH, .n_kv_heads = KV, .head_dim = HD, .scale = 0.088f};
        at.window         = c == 3 ? 20 : 0;
        celer_kv_cache ka, kb;
        CHECK(celer_kv_cache_init(&ka, gpu, 1, KV, HD, HD, NSEQ, 4096, 64, &err) == CELER_OK);
        CHECK(celer_kv_cache_init(&kb, gpu, 1, KV, HD, HD, NSEQ, 4096, 64, &err) == CELER_OK);
        for (int i = 0; i < S; i++) {
            CHECK(celer_kv_cache_reserve(&ka, seq[i], pos[i] + 1, &err) == CELER_OK);
            CHECK(celer_kv_cache_reserve(&kb, seq[i], pos[i] + 1, &err) == CELER_OK);
        }
        const size_t pool = (size_t)ka.n_blocks * ka.block_size * KV * HD * ka.elem_bytes;
        float       *fill = malloc(pool), *pa = malloc(pool), *pb = malloc(pool);
        random_fill(fill, (int64_t)(pool / sizeof *fill), 1.0f);
        if (ka.elem_bytes == 2) /* f16 pools: random bits, exponent fields up to 14 (finite, under 1) */
            for (size_t i = 0; i < pool / 2; i++) ((uint16_t *)fill)[i] &= 0xbbff;
        for (int w = 0; w < 2; w++) {
            CHECK(gpu->ops->write(gpu, w ? ka.v[0] : ka.k[0], fill, pool, &err) == CELER_OK);
            CHECK(gpu->ops->write(gpu, w ? kb.v[0] : kb.k[0], fill, pool, &err) == CELER_OK);
        }
        random_fill(q, S * NH * HD, 2.0f), random_fill(k, S * KV * HD, 2.0f), random_fill(v, S * KV * HD, 2.0f);
        float *dqa = dev_copy(q, sizeof q), *dqb = dev_copy(q, sizeof q), *dk = dev_copy(k, sizeof k);
        float *dv = dev_copy(v, sizeof v), *doa = dev_zeros(S * NH * HD), *dob = dev_zeros(S * NH * HD);
        CHECK(((celer_attn_step_fn)step)(gpu, &ka, 0, dqa, dk, dv, nrm ? &qng : NULL, nrm ? &kng : NULL, 1e-6f, &b, &r,
                                         &at, doa, &err) == CELER_OK);
        CHECK(((celer_attn_inputs_fn)inputs)(gpu, &kb, 0, dqb, NH, dk, dv, nrm ? &qng : NULL, nrm ? &kng : NULL, 1e-6f,
                                             &b, HD, &r, &err) == CELER_OK);
        CHECK(gpu->ops->attention(gpu, dqb, &kb, 0, &b, &at, dob, &err) == CELER_OK);
        to_host(doa, oa, sizeof oa), to_host(dob, ob, sizeof ob), to_host(dqa, qa, sizeof qa);
        const bool same_out = !memcmp(oa, ob, sizeof oa), q_kept = !memcmp(qa, q, sizeof q);
        bool       same_kv  = true;
        for (int w = 0; w < 2; w++) {
            to_host(w ? ka.v[0] : ka.k[0], pa, pool), to_host(w ? kb.v[0] : kb.k[0], pb, pool);
            same_kv &= !memcmp(pa, pb, pool);
        }
        if (!same_out || !same_kv || q_kept != fuses)
            fprintf(stderr, "  attn_step mode %d norms %d window %d: outputs %s (rel %.2e), caches %s, q %s\n", mode,
                    nrm, at.window, same_out ? "equal" : "differ", rel_l2f(oa, ob, S * NH * HD),
                    same_kv ? "equal" : "differ", q_kept ? "kept" : "rotated (the two kernels ran)");
        CHECK(same_out && same_kv && q_kept == fuses);
        free(fill), free(pa), free(pb);
        float *bufs[] = {dqa, dqb, dk, dv, doa, dob};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) gpu->ops->release(gpu, bufs[i]);
        celer_kv_cache_free(&ka, gpu);
        celer_kv_cache_free(&kb, gpu);
    }
}

int main(void)
{
    /* the fused kernels of test_attn_step and test_matmuls_glu: read when the backend opens */
    setenv("CELER_GPU_ATT_STEP", "1", 1), setenv("CELER_GPU_GLU_FUSE", "1", 1);
    if (gpu_test_open("test_gpu_ports")) return 1;
    test_fused();
    test_matmuls();
    test_matmul_add();
    test_attn_step();
    test_matmuls_glu();
    return gpu_test_close("test_gpu_ports");
}
