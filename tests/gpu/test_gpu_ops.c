/* The GPU's other ops against the CPU backend and against exact references, on fresh random
 * inputs (the seed is printed; CELER_TEST_SEED repeats a run) and odd shapes (every weight
 * format's products and embedding rows: test_gpu_formats.c). Bounds (relative L2 error,
 * ‖gpu − ref‖ / ‖ref‖):
 *   - norms, activations, RoPE, attention over the paged cache (a mixed batch of three
 *     sequences: prefill, decode and a chunk; grouped-query heads; a sliding window): 1e-5, and
 *     2e-3 where the matrix units take it in f16 (prefill, gpu_flash.cu; a batch's decodes,
 *     gpu_att_mma.cu);
 *   - a norm of a few rows (sliced over blocks) and the same rows among many: equal bit for bit.
 * The port tables' fused kernels: test_gpu_ports.c; mixture of experts: test_gpu_moe.c; the
 * greedy and sampled draws: test_gpu_sample.c. Run on a machine with a GPU (scripts/gpu-check.sh); built
 * only with CELER_CUDA or CELER_HIP. */
#include "backends/gpu/att_split.h"
#include "backends/ports.h"
#include "runtime/kv_cache.h"

#include "gpu/gpu_test.h"

/* ---- element-wise and row-wise ------------------------------------------------------------- */

/* rmsnorm and the port's add_rmsnorm at the widths that take each kernel: rows held in registers
 * (a head of 128, 640, hidden sizes of 2048 and 4096), rows walked in a loop (130: not a multiple
 * of 4; 16388: past what a block holds; and a row that starts off 16-byte alignment). A few rows
 * (sliced over blocks; add_rmsnorm's too unless CELER_GPU_NORM_ADD_SLICE=0) give the same values bit for
 * bit as the same rows among many (a block each). */
static void test_norms(void)
{
    static const int64_t ds[] = {128, 640, 4096, 130, 16388, 640, 2048};
    celer_port_fn        fn;
    CHECK(celer_port_select(&celer_port_add_rmsnorm, gpu->ops->kind, &fn, &err) == CELER_OK);
    for (size_t k = 0; k < sizeof ds / sizeof ds[0]; k++) {
        const int64_t R = 3, D = ds[k], off = k == 5 ? 1 : 0, N = R * D;
        float *x = malloc((size_t)N * sizeof *x), *o = malloc((size_t)N * sizeof *o), *wv = malloc((size_t)D * sizeof *wv);
        float *c = malloc((size_t)N * sizeof *c), *h = malloc((size_t)N * sizeof *h), *out = malloc((size_t)N * sizeof *out);
        random_fill(x, N, 3.0f), random_fill(o, N, 3.0f), random_fill(wv, D, 1.0f);
        celer_weight norm = {.type = CELER_GGML_F32, .rows = 1, .cols = D, .data = wv}, ng = norm;
        CHECK(gpu->ops->weight_load(gpu, &ng, &err) == CELER_OK);
        float *bx = dev_zeros((size_t)(N + off)), *bo = dev_zeros((size_t)(N + off)), *bh = dev_zeros((size_t)(N + off));
        float *dx = bx + off, *dob = bo + off, *dh = bh + off;
        CHECK(gpu->ops->write(gpu, dx, x, (size_t)N * sizeof *x, &err) == CELER_OK);
        CHECK(gpu->ops->write(gpu, dob, o, (size_t)N * sizeof *o, &err) == CELER_OK);
        CHECK(cpu->ops->rmsnorm(cpu, x, &norm, R, D, 1e-6f, c, &err) == CELER_OK);
        CHECK(gpu->ops->rmsnorm(gpu, dx, &ng, R, D, 1e-6f, dh, &err) == CELER_OK);
        to_host(dh, out, (size_t)N * sizeof *out);
        double e1 = rel_l2f(out, c, N);
        CHECK(((celer_add_rmsnorm_fn)fn)(gpu, dx, dob, &ng, R, D, 1e-6f, dh, &err) == CELER_OK);
        CHECK(cpu->ops->add(cpu, x, o, N, &err) == CELER_OK);
        CHECK(cpu->ops->rmsnorm(cpu, x, &norm, R, D, 1e-6f, c, &err) == CELER_OK);
        to_host(dx, out, (size_t)N * sizeof *out), to_host(dh, h, (size_t)N * sizeof *h);
        double e2 = rel_l2f(out, x, N), e3 = rel_l2f(h, c, N);
        if (!(e1 < 1e-5 && e2 < 1e-6 && e3 < 1e-5))
            fprintf(stderr, "  norms d=%lld offset %lld: rmsnorm %.2e, add %.2e, add_rmsnorm %.2e\n", (long long)D,
                    (long long)off, e1, e2, e3);
        CHECK(e1 < 1e-5 && e2 < 1e-6 && e3 < 1e-5);
        if (D % 32 == 0 && !off) { /* a few rows (sliced over blocks) equal the same rows of many (a block each) */
            enum { MANY = 1024 };
            float *mx = malloc((size_t)(MANY * D) * sizeof *mx), *mh = malloc((size_t)(MANY * D) * sizeof *mh);
            float *mo = malloc((size_t)(MANY * D) * sizeof *mo);
            for (int64_t r = 0; r < MANY; r++)
                memcpy(mx + r * D, x + (r % R) * D, (size_t)D * sizeof *x), memcpy(mo + r * D, o + (r % R) * D, (size_t)D * sizeof *o);
            float *dmx = dev_copy(mx, (size_t)(MANY * D) * sizeof *mx), *dmh = dev_zeros((size_t)(MANY * D));
            float *dmo = dev_copy(mo, (size_t)(MANY * D) * sizeof *mo);
            for (int add = 0; add < 2; add++) {
                CHECK(gpu->ops->write(gpu, dx, x, (size_t)N * sizeof *x, &err) == CELER_OK);
                CHECK(add ? ((celer_add_rmsnorm_fn)fn)(gpu, dx, dob, &ng, R, D, 1e-6f, dh, &err) == CELER_OK
                          : gpu->ops->rmsnorm(gpu, dx, &ng, R, D, 1e-6f, dh, &err) == CELER_OK);
                CHECK(add ? ((celer_add_rmsnorm_fn)fn)(gpu, dmx, dmo, &ng, MANY, D, 1e-6f, dmh, &err) == CELER_OK
                          : gpu->ops->rmsnorm(gpu, dmx, &ng, MANY, D, 1e-6f, dmh, &err) == CELER_OK);
                to_host(dh, h, (size_t)N * sizeof *h), to_host(dmh, mh, (size_t)(MANY * D) * sizeof *mh);
                bool same = !memcmp(h, mh, (size_t)N * sizeof *h);
                if (add) { /* and the sums left in x */
                    to_host(dx, out, (size_t)N * sizeof *out), to_host(dmx, mx, (size_t)N * sizeof *mx);
                    same = same && !memcmp(out, mx, (size_t)N * sizeof *out);
                }
                if (!same) fprintf(stderr, "  norms d=%lld: %s of few rows differs from many\n", (long long)D,
                                   add ? "add_rmsnorm" : "rmsnorm");
                CHECK(same);
            }
            gpu->ops->release(gpu, dmx), gpu->ops->release(gpu, dmh), gpu->ops->release(gpu, dmo);
            free(mx), free(mh), free(mo);
        }
        gpu->ops->release(gpu, bx), gpu->ops->release(gpu, bo), gpu->ops->release(gpu, bh);
        free(x), free(o), free(wv), free(c), free(h), free(out);
    }
}

static void test_elementwise(void)
{
    enum { R = 5, D = 640, N = R * D };
    static float x[N], y[N], g[R], wv[D], c[N], out[N];
    random_fill(x, N, 3.0f), random_fill(y, N, 3.0f), random_fill(g, R, 4.0f), random_fill(wv, D, 1.0f);
    celer_weight norm = {.type = CELER_GGML_F32, .rows = 1, .cols = D, .data = wv}, ng = norm;
    CHECK(gpu->ops->weight_load(gpu, &ng, &err) == CELER_OK);
    float *dx = dev_copy(x, sizeof x), *dy = dev_copy(y, sizeof y), *dg = dev_copy(g, sizeof g), *dout = dev_zeros(N);
    /* rmsnorm */
    memcpy(c, x, sizeof x);
    CHECK(cpu->ops->rmsnorm(cpu, c, &norm, R, D, 1e-6f, c, &err) == CELER_OK);
    CHECK(gpu->ops->rmsnorm(gpu, dx, &ng, R, D, 1e-6f, dout, &err) == CELER_OK);
    to_host(dout, out, sizeof out);
    CHECK(rel_l2f(out, c, N) < 1e-5);
    /* add_bias (the norm weight as a bias of D) */
    memcpy(c, x, sizeof x);
    CHECK(gpu->ops->copy(gpu, dout, dx, sizeof x, &err) == CELER_OK);
    CHECK(cpu->ops->add_bias(cpu, c, &norm, R, &err) == CELER_OK);
    CHECK(gpu->ops->add_bias(gpu, dout, &ng, R, &err) == CELER_OK);
    to_host(dout, out, sizeof out);
    CHECK(rel_l2f(out, c, N) < 1e-6);
    /* add, scale, mul_sigmoid, glu */
    for (int op = 0; op < 5; op++) {
        memcpy(c, x, sizeof x);
        CHECK(gpu->ops->copy(gpu, dout, dx, sizeof x, &err) == CELER_OK);
        celer_backend *b[2]    = {cpu, gpu};
        float         *xs[2]   = {c, dout};
        const float   *ys[2]   = {y, dy};
        const float   *gs[2]   = {g, dg};
        for (int k = 0; k < 2; k++) {
            celer_status st = op == 0 ? b[k]->ops->add(b[k], xs[k], ys[k], N, &err)
                            : op == 1 ? b[k]->ops->scale(b[k], xs[k], N, 0.37f, &err)
                            : op == 2 ? b[k]->ops->mul_sigmoid(b[k], xs[k], gs[k], R, D, &err)
                            : b[k]->ops->glu(b[k], xs[k], ys[k], N, op == 3 ? CELER_ACT_SILU : CELER_ACT_GELU_TANH, &err);
            CHECK(st == CELER_OK);
        }
        to_host(dout, out, sizeof out);
        double e = rel_l2f(out, c, N);
        if (e >= 1e-5) fprintf(stderr, "  element-wise op %d: %.2e\n", op, e);
        CHECK(e < 1e-5);
    }
    gpu->ops->release(gpu, dx), gpu->ops->release(gpu, dy), gpu->ops->release(gpu, dg), gpu->ops->release(gpu, dout);
}

static void test_rope(void)
{
    enum { T = 6, H = 3, HD = 128 };
    static float x[T * H * HD], c[T * H * HD], out[T * H * HD], factors[32];
    int32_t      pos[T] = {0, 1, 5, 1000, 70000, 3}, seq[T] = {0};
    celer_batch  b = {T, pos, seq};
    for (int i = 0; i < 32; i++) factors[i] = 1.0f + (float)i / 4.0f;
    for (int mode = 0; mode < 2; mode++)
        for (int ff = 0; ff < 2; ff++) {
            celer_rope r = {.mode = mode ? CELER_ROPE_NEOX : CELER_ROPE_NORM, .n_rot = ff ? 64 : HD, .base = 10000.0f,
                            .pos_scale = ff ? 0.5f : 1.0f, .freq_factors = ff ? factors : NULL, .mscale = ff ? 1.1f : 1.0f};
            random_fill(x, T * H * HD, 2.0f);
            memcpy(c, x, sizeof x);
            float *dx = dev_copy(x, sizeof x);
            CHECK(cpu->ops->rope(cpu, c, &b, H, HD, &r, &err) == CELER_OK);
            CHECK(gpu->ops->rope(gpu, dx, &b, H, HD, &r, &err) == CELER_OK);
            to_host(dx, out, sizeof out);
            double e = rel_l2f(out, c, T * H * HD);
            if (e >= 1e-5) fprintf(stderr, "  rope mode %d factors %d: %.2e\n", mode, ff, e);
            CHECK(e < 1e-5);
            gpu->ops->release(gpu, dx);
        }
}

/* ---- attention over the paged cache ------------------------------------------------------- */

static void check_same_product(const char *what, const celer_weight *w, const float *dx, int64_t T);

/* Whether gpu takes a batch's decode attention on the matrix units: the default backend unless
 * the run has CELER_GPU_ATT_MMA=0 (gpu-check.sh's variant), not the one test_attention opens
 * with it. */
static bool att_mma;

/* Three sequences of a cache of ctx positions: step 1 prefills lens1 tokens of each, step 2 runs
 * lens2 more of each (a decode is 1). */
static void attention_run(int64_t n_heads, int64_t n_kv, int64_t hd, int32_t window, int32_t ctx,
                          const int32_t lens1[3], const int32_t lens2[3])
{
    celer_kv_cache kc, kg;
    int64_t        kw = n_kv * hd, qw = n_heads * hd;
    int32_t        n_blocks = 3 * ctx / 16; /* every sequence may fill its context */
    CHECK(celer_kv_cache_init(&kc, cpu, 1, n_kv, hd, hd, 3, ctx, n_blocks, &err) == CELER_OK);
    CHECK(celer_kv_cache_init(&kg, gpu, 1, n_kv, hd, hd, 3, ctx, n_blocks, &err) == CELER_OK);
    const int32_t *starts2 = lens1;
    int32_t       *pos = malloc(3 * (size_t)ctx * sizeof *pos), *seq = malloc(3 * (size_t)ctx * sizeof *seq);
    for (int step = 0; step < 2; step++) {
        int32_t T = 0;
        for (int s = 0; s < 3; s++) {
            int32_t p0 = step ? starts2[s] : 0, n = step ? lens2[s] : lens1[s];
            CHECK(celer_kv_cache_reserve(&kc, s, p0 + n, &err) == CELER_OK);
            CHECK(celer_kv_cache_reserve(&kg, s, p0 + n, &err) == CELER_OK);
            for (int32_t i = 0; i < n; i++) pos[T] = p0 + i, seq[T++] = s;
        }
        CHECK(!memcmp(kc.tables, kg.tables, (size_t)(3 * kc.max_blocks) * sizeof *kc.tables));
        celer_batch b = {T, pos, seq};
        celer_attn  a = {n_heads, n_kv, hd, 1.0f / sqrtf((float)hd), window};
        float *q = malloc((size_t)(T * qw) * sizeof *q), *k = malloc((size_t)(T * kw) * sizeof *k);
        float *v = malloc((size_t)(T * kw) * sizeof *v), *oc = malloc((size_t)(T * qw) * sizeof *oc);
        float *og = malloc((size_t)(T * qw) * sizeof *og);
        random_fill(q, T * qw, 2.0f), random_fill(k, T * kw, 2.0f), random_fill(v, T * kw, 1.0f);
        if (kg.elem_bytes == 2) round_f16(k, T * kw), round_f16(v, T * kw); /* an f16 cache: the same keys */
        float *dq = dev_copy(q, (size_t)(T * qw) * 4), *dk = dev_copy(k, (size_t)(T * kw) * 4);
        float *dv = dev_copy(v, (size_t)(T * kw) * 4), *dout = dev_zeros((size_t)(T * qw));
        CHECK(cpu->ops->kv_write(cpu, &kc, 0, k, v, &b, &err) == CELER_OK);
        CHECK(gpu->ops->kv_write(gpu, &kg, 0, dk, dv, &b, &err) == CELER_OK);
        CHECK(cpu->ops->attention(cpu, q, &kc, 0, &b, &a, oc, &err) == CELER_OK);
        CHECK(gpu->ops->attention(gpu, dq, &kg, 0, &b, &a, dout, &err) == CELER_OK);
        to_host(dout, og, (size_t)(T * qw) * 4);
        /* steps of 16 tokens a sequence and more with heads of 64 or 128 run on the matrix units
         * (gpu_flash.cu), and with att_mma so do steps of 512 query rows or more below 4,096 keys
         * (gpu_att_mma.cu, att_split.h's celer_att_mma): q, k, v and the probabilities in f16,
         * about 4e-4 here as numpy rounds them (2e-3 with room); every other step sums in f32 */
        int32_t far = 0;
        for (int32_t i = 0; i < T; i++) far = pos[i] > far ? pos[i] : far;
        const bool flash = ((hd == 64 || hd == 128) && T >= 16 * 3) ||
                           (att_mma && celer_att_mma(far, T * n_heads, hd, n_heads / n_kv));
        const double bound = flash ? 2e-3 : 1e-5;
        double       e     = rel_l2f(og, oc, T * qw);
        if (e >= bound)
            fprintf(stderr, "  attention %lld/%lld heads of %lld, window %d, step %d: %.2e\n", (long long)n_heads,
                    (long long)n_kv, (long long)hd, window, step, e);
        CHECK(e < bound);
        if (qw % 32 == 0) { /* the output's held quantization (head sizes of 32s) is the quantizer's own */
            void        *raw = random_weights(CELER_GGML_Q4_0, 48, qw, 0.1f);
            celer_weight wo  = {.type = CELER_GGML_Q4_0, .rows = 48, .cols = qw, .data = raw};
            CHECK(gpu->ops->weight_load(gpu, &wo, &err) == CELER_OK);
            check_same_product("attention, then a product", &wo, dout, T);
            free(raw);
        }
        gpu->ops->release(gpu, dq), gpu->ops->release(gpu, dk), gpu->ops->release(gpu, dv), gpu->ops->release(gpu, dout);
        free(q), free(k), free(v), free(oc), free(og);
    }
    free(pos), free(seq);
    celer_kv_cache_free(&kc, cpu);
    celer_kv_cache_free(&kg, gpu);
}

/* Prefills of 37, 80 and 14 tokens, then a decode, a chunk of 5, a decode. */
static void attention_case(int64_t n_heads, int64_t n_kv, int64_t hd, int32_t window)
{
    static const int32_t lens1[3] = {37, 80, 14}, lens2[3] = {1, 5, 1};
    attention_run(n_heads, n_kv, hd, window, 512, lens1, lens2);
}

/* Decodes past long prompts (700, 260 and 1030 tokens): their keys split over blocks, some
 * splits empty (the shorter sequences; the window's start). */
static void attention_long(int64_t n_heads, int64_t n_kv, int64_t hd, int32_t window)
{
    static const int32_t lens1[3] = {700, 260, 1030}, lens2[3] = {1, 1, 1};
    attention_run(n_heads, n_kv, hd, window, 1152, lens1, lens2);
}

/* Prefills of 37, 80 and 14 tokens, then chunks of 40, 20 and 33 more (keys of both steps). */
static void attention_chunks(int64_t n_heads, int64_t n_kv, int64_t hd, int32_t window)
{
    static const int32_t lens1[3] = {37, 80, 14}, lens2[3] = {40, 20, 33};
    attention_run(n_heads, n_kv, hd, window, 512, lens1, lens2);
}

/* Steps of 12 tokens of each sequence past prompts of 300, 100 and 400 (heads of 80: off the
 * matrix units): with 16 query heads 576 rows, every key in one split (att_split.h's
 * celer_att_whole) where the split rule alone takes two. */
static void attention_batch(int64_t n_heads, int64_t n_kv, int64_t hd, int32_t window)
{
    static const int32_t lens1[3] = {300, 100, 400}, lens2[3] = {12, 12, 12};
    attention_run(n_heads, n_kv, hd, window, 512, lens1, lens2);
}

/* The same past prompts of 20, 300 and 5 tokens: some sequences' keys too few for every warp of
 * a block (gpu_att_mma.cu: a warp with no keys; one with a part of its 16). */
static void attention_batch_short(int64_t n_heads, int64_t n_kv, int64_t hd)
{
    static const int32_t lens1[3] = {20, 300, 5}, lens2[3] = {12, 12, 12};
    attention_run(n_heads, n_kv, hd, 0, 512, lens1, lens2);
}

static void test_attention(void)
{
    const char *env  = getenv("CELER_GPU_ATT_MMA");
    const bool  dflt = !(env && !strcmp(env, "0")); /* the default backend's */
    att_mma          = dflt;
    attention_case(8, 2, 64, 0);
    attention_case(4, 4, 256, 0);
    attention_case(6, 1, 128, 8);
    attention_case(2, 2, 80, 0); /* a head size that is not a multiple of the warp */
    /* more query heads a key head than one block takes (8, 4 and 2 for heads up to 128, 256, 512) */
    attention_case(16, 1, 128, 0);
    attention_case(12, 2, 256, 0);
    attention_case(4, 1, 512, 0);
    attention_long(10, 2, 128, 0);
    attention_long(8, 2, 64, 0);
    attention_long(4, 1, 128, 600);
    attention_chunks(8, 2, 64, 0);
    attention_chunks(4, 2, 128, 24);
    attention_batch(16, 2, 80, 0);
    attention_batch(16, 4, 80, 100);
    /* the same steps of heads of 128 and 64 (groups of 4, 8, 3 and 16 query heads: a whole row
     * tile; a window; short prompts) on the matrix units (gpu_att_mma.cu), then again on
     * k_attention (CELER_GPU_ATT_MMA=0) */
    celer_backend *keep = gpu, *f32 = gpu_backend_with((const char *const[]){"CELER_GPU_ATT_MMA=0"}, 1);
    for (int pass = 0; pass < 2 && (pass == 0 || f32); pass++) {
        gpu = pass ? f32 : keep, att_mma = !pass && dflt;
        attention_batch(16, 4, 128, 0);
        attention_batch(16, 2, 64, 0);
        attention_batch(24, 8, 128, 0);
        attention_batch(16, 1, 128, 100);
        attention_batch_short(16, 4, 128);
    }
    gpu = keep, att_mma = dflt;
    if (f32) celer_backend_destroy(f32);
}

/* ---- activations quantized by the kernel that wrote them -------------------------------- */

/* y = w · x on the device, then the same product of a fresh copy of x's values (quantized by
 * the product itself): equal bit for bit. */
/* check_same_product's output, allocated before any test: an allocation forgets the held
 * quantization (gpu_alloc), so one made inside the check would have the product quantize its
 * input afresh, and the check could not fail. */
enum { SAME_DY_MAX = 1 << 20 }; /* the longest: 3 sequences of 1152 tokens, 48 rows */
static float *same_dy;

static void check_same_product(const char *what, const celer_weight *w, const float *dx, int64_t T)
{
    const int64_t n = T * w->cols, m = T * w->rows;
    if (m > SAME_DY_MAX) {
        fprintf(stderr, "  %s: %lld outputs, more than the check's %d\n", what, (long long)m, SAME_DY_MAX);
        failures++;
        return;
    }
    float *h = malloc((size_t)n * sizeof *h), *a = malloc((size_t)m * sizeof *a), *b = malloc((size_t)m * sizeof *b);
    float *dy = same_dy;
    CHECK(gpu->ops->matmul(gpu, w, dx, T, dy, &err) == CELER_OK); /* x's held quantization, if any */
    to_host(dy, a, (size_t)m * sizeof *a);
    to_host(dx, h, (size_t)n * sizeof *h);
    float *fresh = dev_copy(h, (size_t)n * sizeof *h);
    CHECK(gpu->ops->matmul(gpu, w, fresh, T, dy, &err) == CELER_OK);
    to_host(dy, b, (size_t)m * sizeof *b);
    if (memcmp(a, b, (size_t)m * sizeof *a)) fprintf(stderr, "  %s: the product differs from a fresh copy's\n", what);
    CHECK(!memcmp(a, b, (size_t)m * sizeof *a));
    gpu->ops->release(gpu, fresh);
    free(h), free(a), free(b);
}

/* A norm and the GLU quantize what they write for the next product: that product equals the
 * one that quantizes the same values itself (decode and prefill sizes), also after an MoE
 * router's product and routing (which keep it), and a write to the activations between them is
 * seen (the held quantization is forgotten). */
static void test_xq_held(void)
{
    enum { D = 512, FF = 1024, OUT = 80 };
    void        *ra = random_weights(CELER_GGML_Q4_0, OUT, D, 0.1f), *rb = random_weights(CELER_GGML_Q8_0, OUT, FF, 0.1f);
    celer_weight wa = {.type = CELER_GGML_Q4_0, .rows = OUT, .cols = D, .data = ra};
    celer_weight wb = {.type = CELER_GGML_Q8_0, .rows = OUT, .cols = FF, .data = rb};
    static float wv[D];
    random_fill(wv, D, 1.0f);
    celer_weight norm = {.type = CELER_GGML_F32, .rows = 1, .cols = D, .data = wv};
    static float rv[8 * D]; /* a router of 8 experts */
    random_fill(rv, 8 * D, 0.1f);
    celer_weight router = {.type = CELER_GGML_F32, .rows = 8, .cols = D, .data = rv};
    CHECK(gpu->ops->weight_load(gpu, &wa, &err) == CELER_OK && gpu->ops->weight_load(gpu, &wb, &err) == CELER_OK &&
          gpu->ops->weight_load(gpu, &norm, &err) == CELER_OK && gpu->ops->weight_load(gpu, &router, &err) == CELER_OK);
    celer_port_fn fn;
    CHECK(celer_port_select(&celer_port_add_rmsnorm, gpu->ops->kind, &fn, &err) == CELER_OK);
    static const int64_t Ts[] = {1, 3, 40};
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
        const int64_t T = Ts[ti];
        float        *x = malloc((size_t)(T * FF) * sizeof *x), *o = malloc((size_t)(T * FF) * sizeof *o);
        random_fill(x, T * FF, 2.0f), random_fill(o, T * FF, 2.0f);
        float *dx = dev_copy(x, (size_t)(T * D) * sizeof *x), *dob = dev_copy(o, (size_t)(T * D) * sizeof *o);
        float *dh = dev_zeros((size_t)(T * D));
        CHECK(gpu->ops->rmsnorm(gpu, dx, &norm, T, D, 1e-6f, dh, &err) == CELER_OK);
        check_same_product("rmsnorm, then a product", &wa, dh, T);
        CHECK(((celer_add_rmsnorm_fn)fn)(gpu, dx, dob, &norm, T, D, 1e-6f, dh, &err) == CELER_OK);
        check_same_product("add_rmsnorm, then a product", &wa, dh, T);
        CHECK(gpu->ops->rmsnorm(gpu, dx, &norm, T, D, 1e-6f, dh, &err) == CELER_OK);
        CHECK(gpu->ops->write(gpu, dh, o, (size_t)(T * D) * sizeof *o, &err) == CELER_OK); /* other values */
        check_same_product("rmsnorm, a write, then a product", &wa, dh, T);
        /* an MoE layer: the router's f32 product and the routing keep the norm's quantization */
        float *dl = dev_zeros((size_t)(T * 8)), *dw = dev_zeros((size_t)(T * 2)), *di = dev_zeros((size_t)(T * 2));
        CHECK(gpu->ops->rmsnorm(gpu, dx, &norm, T, D, 1e-6f, dh, &err) == CELER_OK);
        CHECK(gpu->ops->matmul(gpu, &router, dh, T, dl, &err) == CELER_OK);
        CHECK(gpu->ops->moe_route(gpu, dl, T, 8, 2, true, (int32_t *)di, dw, &err) == CELER_OK);
        check_same_product("rmsnorm, a router and its routing, then a product", &wa, dh, T);
        gpu->ops->release(gpu, dl), gpu->ops->release(gpu, dw), gpu->ops->release(gpu, di);
        float *dg = dev_copy(x, (size_t)(T * FF) * sizeof *x), *du = dev_copy(o, (size_t)(T * FF) * sizeof *o);
        CHECK(gpu->ops->glu(gpu, dg, du, T * FF, CELER_ACT_SILU, &err) == CELER_OK);
        check_same_product("glu, then a product", &wb, dg, T);
        CHECK(gpu->ops->glu(gpu, dg, du, T * FF, CELER_ACT_GELU_TANH, &err) == CELER_OK);
        CHECK(gpu->ops->copy(gpu, dg, du, (size_t)(T * FF) * sizeof(float), &err) == CELER_OK); /* other values */
        check_same_product("glu, a copy, then a product", &wb, dg, T);
        gpu->ops->release(gpu, dx), gpu->ops->release(gpu, dob), gpu->ops->release(gpu, dh);
        gpu->ops->release(gpu, dg), gpu->ops->release(gpu, du);
        free(x), free(o);
    }
    free(ra), free(rb);
}

/* ---- step graphs ------------------------------------------------------------------------ */

/* One step of key: the product of w by x into y, rerun op by op when the backend asks. */
static void run_step(uint64_t key, const celer_weight *w, const float *dx, float *dy)
{
    for (int pass = 0; pass < 2; pass++) {
        bool redo = false;
        CHECK(gpu->ops->step_begin(gpu, key, &err) == CELER_OK);
        CHECK(gpu->ops->matmul(gpu, w, dx, 1, dy, &err) == CELER_OK);
        CHECK(gpu->ops->step_end(gpu, true, &redo, &err) == CELER_OK);
        if (!redo) return;
    }
    CHECK(!"the step asked for a third pass");
}

/* A key reused for other work (another weight, another format) after its graph was recorded:
 * the replay must not run the recorded launches on the old weight; the output is the new one's. */
static void test_graph_reuse(void)
{
    enum { K = 512, R = 96 };
    CHECK(gpu->ops->step_begin && gpu->ops->step_end);
    if (!gpu->ops->step_begin) return;
    static const celer_ggml_type types[3] = {CELER_GGML_Q4_0, CELER_GGML_Q4_0, CELER_GGML_Q8_0};
    celer_weight w[3];
    void        *raw[3];
    for (int i = 0; i < 3; i++) {
        raw[i] = random_weights(types[i], R, K, 0.1f);
        w[i]   = (celer_weight){.type = types[i], .rows = R, .cols = K, .data = raw[i]};
        CHECK(gpu->ops->weight_load(gpu, &w[i], &err) == CELER_OK);
    }
    float x[K], want[R], got[R];
    random_acts(x, 1, K);
    float *dx = dev_copy(x, sizeof x), *dy = dev_zeros(R);
    for (int i = 1; i < 3; i++) {
        for (int s = 0; s < 4; s++) run_step(0xfeed, &w[0], dx, dy); /* seen, recorded, replayed */
        CHECK(gpu->ops->matmul(gpu, &w[i], dx, 1, dy, &err) == CELER_OK); /* outside any step */
        to_host(dy, want, sizeof want);
        CHECK(gpu->ops->copy(gpu, dy, dx, sizeof got, &err) == CELER_OK); /* something else in y */
        run_step(0xfeed, &w[i], dx, dy);
        to_host(dy, got, sizeof got);
        if (memcmp(got, want, sizeof got)) fprintf(stderr, "  step graph reused for weight %d: the old weight's product\n", i);
        CHECK(!memcmp(got, want, sizeof got));
    }
    gpu->ops->release(gpu, dx), gpu->ops->release(gpu, dy);
    for (int i = 0; i < 3; i++) free(raw[i]);
}

/* Writes land in stream order, and their sources may be reused as soon as write returns: each
 * write's bytes, copied on the device into a slot of their own, are what was written, the host
 * buffer and the device buffer both reused by the next write. The backend takes small writes
 * through a pinned ring of two 64 KiB halves (gpu_backend.cu's gpu_upload): 300 writes of 1 to
 * 7 KiB go round it many times, and a write of 80 KiB now and then is copied from pageable
 * memory among them. */
static void test_upload_order(void)
{
    enum { N = 300, SLOT = 80 << 10, WORDS = SLOT / 4 };
    int32_t *src = malloc(SLOT), *got = malloc((size_t)N * SLOT);
    float   *dx = dev_zeros(WORDS), *dall = dev_zeros((int64_t)N * WORDS);
    size_t   n[N];
    for (int i = 0; i < N; i++) {
        n[i] = i % 50 == 25 ? SLOT : (size_t)(i % 7 + 1) * 1024;
        for (size_t j = 0; j < n[i] / 4; j++) src[j] = i * 100000 + (int32_t)j;
        CHECK(gpu->ops->write(gpu, dx, src, n[i], &err) == CELER_OK);
        CHECK(gpu->ops->copy(gpu, dall + (size_t)i * WORDS, dx, n[i], &err) == CELER_OK);
        memset(src, 0xff, SLOT); /* the source, reused at once */
    }
    to_host(dall, got, (size_t)N * SLOT);
    int bad = 0;
    for (int i = 0; i < N; i++)
        for (size_t j = 0; j < n[i] / 4; j++) bad += got[(size_t)i * WORDS + j] != i * 100000 + (int32_t)j;
    if (bad) fprintf(stderr, "  uploads: %d words not as written\n", bad);
    CHECK(bad == 0);
    gpu->ops->release(gpu, dx), gpu->ops->release(gpu, dall);
    free(src), free(got);
}

int main(void)
{
    if (gpu_test_open("test_gpu_ops")) return 1;
    same_dy = dev_zeros(SAME_DY_MAX);
    test_elementwise();
    test_norms();
    test_rope();
    test_attention();
    test_graph_reuse();
    test_xq_held();
    test_upload_order();
    return gpu_test_close("test_gpu_ops");
}
