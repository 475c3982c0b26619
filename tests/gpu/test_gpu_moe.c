/* The GPU's mixture-of-experts ops against the CPU backend, on fresh random inputs (the seed is
 * printed; CELER_TEST_SEED repeats a run):
 *   - routing: the same choices in the same order (ties to the lower expert), the weights within
 *     1e-6 (relative L2); the fused router (the port moe_router) as the GPU's own two ops, and
 *     the norm before it in the same kernel (norm_router) as rmsnorm and moe_router, bit for bit;
 *   - moe_ffn over experts loaded one by one and over views of one stacked tensor per projection
 *     (as models load them: decode-sized steps then keep the choices on the device): 1e-5 for
 *     float weights, 2e-2 for quantized ones (the CPU quantizes activations to 8 bits); batches
 *     (8 tokens and more) grouped by expert on the device and not (CELER_GPU_MOE_GROUP=0), both
 *     within the CPU's bound; the decode path's down products summing their selections
 *     themselves against the two launches they replace (CELER_GPU_MOE_COMBINE=0), and its gate
 *     and up products and GLU in one launch against three (CELER_GPU_GLU_FUSE=0), bit for bit, and
 *     a grouped step's (the batch kernel's tiles) the same;
 *     the port moe_ffn_add (those down products adding to the residual) as moe_ffn then add;
 *     stacked MLX affine 4 and 8-bit experts (an mlx-community MoE's) on every path, 2e-2, their
 *     grouped steps bit for bit against CELER_GPU_GLU_FUSE=0.
 * Run on a machine with a GPU (scripts/gpu-check.sh); built only with CELER_CUDA or CELER_HIP. */
#include "backends/ports.h"

#include "gpu/gpu_test.h"

enum { SE = 16, SK = 4, SD = 256, SFF = 512 }; /* test_moe_stacked's experts, choices, width, usual FF width */

/* The stacked experts of type t from their bytes raw (gate, up, down; ff wide inside), as host
 * weights of one tensor a projection. */
static void stacked_host(celer_ggml_type t, int64_t ff, void *const raw[3], celer_weight host[3])
{
    host[0] = (celer_weight){.type = t, .rows = SE * ff, .cols = SD, .data = raw[0]};
    host[1] = (celer_weight){.type = t, .rows = SE * ff, .cols = SD, .data = raw[1]};
    host[2] = (celer_weight){.type = t, .rows = SE * SD, .cols = ff, .data = raw[2]};
}

/* The stacked host weights loaded on gpu (st), and each expert's rows as views of them (as models
 * load them). */
static void stacked_views(const celer_weight host[3], int64_t ff, celer_weight st[3], celer_weight gg[SE],
                          celer_weight ug[SE], celer_weight dg[SE])
{
    const int64_t per[3]   = {ff, ff, SD};
    celer_weight *views[3] = {gg, ug, dg};
    for (int i = 0; i < 3; i++) {
        st[i] = host[i];
        CHECK(gpu->ops->weight_load(gpu, &st[i], &err) == CELER_OK);
        for (int e = 0; e < SE; e++)
            CHECK(gpu->ops->weight_view(gpu, &st[i], e * per[i], per[i], &views[i][e], &err) == CELER_OK);
    }
}

/* moe_ffn on backend b (the helpers' gpu while it runs) of the stacked experts (host weights, ff
 * wide inside), as views of one loaded tensor a projection (stacked_views): og (T rows of SD). */
static void stacked_ffn(celer_backend *b, const celer_weight host[3], int64_t T, const float *x, const int32_t *ic,
                        const float *wc, int64_t ff, float *og)
{
    celer_backend *was = gpu;
    gpu                = b;
    celer_weight st[3], gg[SE], ug[SE], dg[SE];
    stacked_views(host, ff, st, gg, ug, dg);
    celer_moe mg   = {SE, ff, gg, ug, dg};
    float    *dx   = dev_copy(x, (size_t)(T * SD) * 4), *dout = dev_zeros((size_t)(T * SD));
    float    *dw   = dev_copy(wc, (size_t)(T * SK) * 4);
    int32_t  *di   = (int32_t *)dev_copy(ic, (size_t)(T * SK) * 4);
    CHECK(gpu->ops->moe_ffn(gpu, &mg, dx, T, di, dw, SK, CELER_ACT_SILU, dout, &err) == CELER_OK);
    to_host(dout, og, (size_t)(T * SD) * 4);
    gpu->ops->release(gpu, dx), gpu->ops->release(gpu, dout), gpu->ops->release(gpu, dw), gpu->ops->release(gpu, di);
    gpu = was;
}

/* Backends with variables of the decode path set (NULL where none opens): no batch grouped on
 * the device (each choice reads its expert's rows; the down products sum their selections), and
 * that with the down products and their sum in two launches, or with the gate and up products
 * and their GLU in three, each bit for bit the first where the products it replaces run unsliced
 * (ref: the variant it equals, -1: none). */
static struct {
    const char    *env[2]; /* NAME=VALUE, or NULL */
    int            ref;
    int            rows;   /* those products' rows a selection: SD (1) or 2 ff (2) */
    celer_backend *be;
    float         *out;
} variant[] = {{{"CELER_GPU_MOE_GROUP=0", NULL}, -1, 0, NULL, NULL},
               {{"CELER_GPU_MOE_GROUP=0", "CELER_GPU_MOE_COMBINE=0"}, 0, 1, NULL, NULL},
               {{"CELER_GPU_MOE_GROUP=0", "CELER_GPU_GLU_FUSE=0"}, 0, 2, NULL, NULL}};
enum { N_VARIANTS = sizeof variant / sizeof variant[0] };
/* A backend with CELER_GPU_GLU_FUSE=0 alone (NULL where none opens): a grouped step's gate and
 * up products and GLU in three launches, where the default's batch kernel takes them in one. */
static celer_backend *glu_apart;

/* moe_ffn over experts that are views of one stacked tensor per projection (as models load
 * them): decode-sized steps take the device path (the choices never leave the GPU), larger
 * ones the grouped path; both against the CPU's moe_ffn on the same bytes, and the variants'
 * backends too, within the CPU's bound, and those with a ref bit for bit against that variant
 * where the products they replace run unsliced (rows / 16 blocks × T · SK selections of at least
 * three blocks an SM: gpu_matvec.cu's MVQ_KS_BELOW). T = 64
 * makes every token choose expert 0 first: its group spans two of the batch kernel's tiles. */
static void test_moe_stacked(celer_ggml_type t, int64_t T, int64_t ff, int sms)
{
    const celer_ggml_type_info *ti = celer_ggml_type_get(t);
    size_t                      rb_in = (size_t)(SD / ti->block_elems) * ti->block_bytes;
    size_t                      rb_ff = (size_t)(ff / ti->block_elems) * ti->block_bytes;
    void *raw[3] = {random_weights(t, SE * ff, SD, 0.1f), random_weights(t, SE * ff, SD, 0.1f),
                    random_weights(t, SE * SD, ff, 0.1f)};
    celer_weight gc[SE], uc[SE], dc[SE];
    for (int e = 0; e < SE; e++) {
        gc[e] = (celer_weight){.type = t, .rows = ff, .cols = SD, .data = (char *)raw[0] + e * ff * rb_in};
        uc[e] = (celer_weight){.type = t, .rows = ff, .cols = SD, .data = (char *)raw[1] + e * ff * rb_in};
        dc[e] = (celer_weight){.type = t, .rows = SD, .cols = ff, .data = (char *)raw[2] + e * SD * rb_ff};
        CHECK(cpu->ops->weight_load(cpu, &gc[e], &err) == CELER_OK && cpu->ops->weight_load(cpu, &uc[e], &err) == CELER_OK &&
              cpu->ops->weight_load(cpu, &dc[e], &err) == CELER_OK);
    }
    float   *logits = malloc((size_t)(T * SE) * 4), *wc = malloc((size_t)(T * SK) * 4);
    int32_t *ic     = malloc((size_t)(T * SK) * 4);
    random_fill(logits, T * SE, 3.0f);
    if (T == 64)
        for (int64_t i = 0; i < T; i++) logits[i * SE] = 50.0f;
    CHECK(cpu->ops->moe_route(cpu, logits, T, SE, SK, true, ic, wc, &err) == CELER_OK);
    celer_moe mc = {SE, ff, gc, uc, dc};
    float    *x = malloc((size_t)(T * SD) * 4), *oc = malloc((size_t)(T * SD) * 4), *og = malloc((size_t)(T * SD) * 4);
    random_fill(x, T * SD, 1.0f);
    CHECK(cpu->ops->moe_ffn(cpu, &mc, x, T, ic, wc, SK, CELER_ACT_SILU, oc, &err) == CELER_OK);
    celer_weight host[3];
    stacked_host(t, ff, raw, host);
    stacked_ffn(gpu, host, T, x, ic, wc, ff, og);
    double e = rel_l2f(og, oc, T * SD);
    if (!(e < 2e-2)) fprintf(stderr, "  moe_ffn stacked %s T=%lld: %.2e\n", ti->name, (long long)T, e);
    CHECK(e < 2e-2);
    for (int v = 0; v < N_VARIANTS; v++) {
        variant[v].out = malloc((size_t)(T * SD) * 4);
        if (!variant[v].be) continue;
        stacked_ffn(variant[v].be, host, T, x, ic, wc, ff, variant[v].out);
        const int    r     = variant[v].ref;
        const bool   exact = r >= 0 && variant[r].be && T * SK <= 256 &&
                           ((variant[v].rows == 1 ? SD : 2 * ff) / 16) * T * SK >= 3 * (int64_t)sms;
        const double e2    = rel_l2f(variant[v].out, oc, T * SD);
        const bool   same  = exact && !memcmp(variant[v].out, variant[r].out, (size_t)(T * SD) * 4);
        if (!(e2 < 2e-2) || (exact && !same))
            fprintf(stderr, "  moe_ffn stacked %s T=%lld, %s %s: %.2e%s\n", ti->name, (long long)T, variant[v].env[0],
                    variant[v].env[1] ? variant[v].env[1] : "", e2, exact && !same ? ", differs bit for bit" : "");
        CHECK(e2 < 2e-2 && (!exact || same));
    }
    /* steps grouped by expert (8 tokens and more, unless a variable moves that line): the default
     * bit for bit the three launches */
    if (glu_apart && T >= 8 && !getenv("CELER_GPU_MOE_GROUP")) {
        float *oa = malloc((size_t)(T * SD) * 4);
        stacked_ffn(glu_apart, host, T, x, ic, wc, ff, oa);
        const bool same = !memcmp(oa, og, (size_t)(T * SD) * 4);
        if (!same) fprintf(stderr, "  moe_ffn stacked %s T=%lld: CELER_GPU_GLU_FUSE=0 differs bit for bit\n", ti->name, (long long)T);
        CHECK(same);
        free(oa);
    }
    for (int v = 0; v < N_VARIANTS; v++) free(variant[v].out);
    free(logits), free(wc), free(ic), free(x), free(oc), free(og);
    for (int i = 0; i < 3; i++) free(raw[i]);
}

/* moe_ffn over stacked MLX experts (an mlx-community MoE checkpoint's switch_mlp; mxfp4: gpt-oss's):
 * the GPU's views of one tensor a projection against the CPU's experts, each its rows of the same
 * arrays, within the CPU's bound: T = 1 the combining decode kernels, 32 a batch, 300 (past 256
 * pairs) the host-grouped path's matrix units (affine 4 and 8 bits, mxfp4, nvfp4); the grouped
 * steps bit for bit against CELER_GPU_GLU_FUSE=0. */
static void test_moe_stacked_mlx(celer_hf_quant_mode mode, uint32_t bits, uint32_t group, celer_st_dtype dtype,
                                 int64_t T)
{
    void        *bufs[3][3];
    celer_weight host[3] = {mlx_host(SE * SFF, SD, mode, bits, group, dtype, bufs[0]),
                            mlx_host(SE * SFF, SD, mode, bits, group, dtype, bufs[1]),
                            mlx_host(SE * SD, SFF, mode, bits, group, dtype, bufs[2])};
    celer_weight cw[3][SE];
    for (int i = 0; i < 3; i++)
        for (int e = 0; e < SE; e++) {
            const int64_t per = i < 2 ? SFF : SD;
            cw[i][e]          = host[i];
            cw[i][e].rows = cw[i][e].mlx.rows = per;
            cw[i][e].mlx_data = celer_mlx_quant_data_rows(&host[i].mlx_data, host[i].rows, e * per, per);
            cw[i][e].data     = cw[i][e].mlx_data.weight;
            CHECK(cpu->ops->weight_load(cpu, &cw[i][e], &err) == CELER_OK);
        }
    float   *logits = malloc((size_t)(T * SE) * 4), *wc = malloc((size_t)(T * SK) * 4);
    int32_t *ic     = malloc((size_t)(T * SK) * 4);
    random_fill(logits, T * SE, 3.0f);
    CHECK(cpu->ops->moe_route(cpu, logits, T, SE, SK, true, ic, wc, &err) == CELER_OK);
    celer_moe mc = {SE, SFF, cw[0], cw[1], cw[2]};
    float    *x = malloc((size_t)(T * SD) * 4), *oc = malloc((size_t)(T * SD) * 4), *og = malloc((size_t)(T * SD) * 4);
    random_fill(x, T * SD, 1.0f);
    CHECK(cpu->ops->moe_ffn(cpu, &mc, x, T, ic, wc, SK, CELER_ACT_SILU, oc, &err) == CELER_OK);
    stacked_ffn(gpu, host, T, x, ic, wc, SFF, og);
    char desc[64];
    celer_mlx_quant_describe(&host[0].mlx, desc, sizeof desc);
    const double e = rel_l2f(og, oc, T * SD);
    if (!(e < 2e-2)) fprintf(stderr, "  moe_ffn stacked %s T=%lld: %.2e\n", desc, (long long)T, e);
    CHECK(e < 2e-2);
    /* steps grouped by expert: the default (affine 4 and 8 bits: the batch kernel's tiles taking
     * gate, up and the GLU in one launch) bit for bit the three launches */
    if (glu_apart && T >= 8 && !getenv("CELER_GPU_MOE_GROUP")) {
        float *oa = malloc((size_t)(T * SD) * 4);
        stacked_ffn(glu_apart, host, T, x, ic, wc, SFF, oa);
        const bool same = !memcmp(oa, og, (size_t)(T * SD) * 4);
        if (!same)
            fprintf(stderr, "  moe_ffn stacked %s T=%lld: CELER_GPU_GLU_FUSE=0 differs bit for bit\n", desc,
                    (long long)T);
        CHECK(same);
        free(oa);
    }
    free(logits), free(wc), free(ic), free(x), free(oc), free(og);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) free(bufs[i][j]);
}

/* The port moe_ffn_add (an MoE step's output added to the residual stream by its combining
 * down products) on backend b against b's moe_ffn then add, bit for bit, over stacked experts
 * (stacked_ffn's): decode steps take the combining kernel with its add, a batch grouped on the
 * device and a backend without the combining kernel the port's fallback. */
static void test_moe_ffn_add(celer_backend *b, celer_ggml_type t, int64_t T, int64_t ff)
{
    celer_backend *was = gpu;
    gpu                = b;
    celer_port_fn fn;
    CHECK(celer_port_select(&celer_port_moe_ffn_add, gpu->ops->kind, &fn, &err) == CELER_OK);
    void *raw[3] = {random_weights(t, SE * ff, SD, 0.1f), random_weights(t, SE * ff, SD, 0.1f),
                    random_weights(t, SE * SD, ff, 0.1f)};
    celer_weight host[3], st[3], gg[SE], ug[SE], dg[SE];
    stacked_host(t, ff, raw, host);
    stacked_views(host, ff, st, gg, ug, dg);
    celer_moe mg     = {SE, ff, gg, ug, dg};
    float    *logits = malloc((size_t)(T * SE) * 4), *wc = malloc((size_t)(T * SK) * 4);
    int32_t  *ic     = malloc((size_t)(T * SK) * 4);
    float    *x = malloc((size_t)(T * SD) * 4), *y = malloc((size_t)(T * SD) * 4), *h[2];
    random_fill(logits, T * SE, 3.0f), random_fill(x, T * SD, 1.0f), random_fill(y, T * SD, 2.0f);
    CHECK(cpu->ops->moe_route(cpu, logits, T, SE, SK, true, ic, wc, &err) == CELER_OK);
    float   *dx = dev_copy(x, (size_t)(T * SD) * 4), *dw = dev_copy(wc, (size_t)(T * SK) * 4), *dy[2], *dt[2];
    int32_t *di = (int32_t *)dev_copy(ic, (size_t)(T * SK) * 4);
    for (int v = 0; v < 2; v++) {
        dy[v] = dev_copy(y, (size_t)(T * SD) * 4), dt[v] = dev_zeros((size_t)(T * SD));
        h[v]  = malloc((size_t)(T * SD) * 4);
    }
    CHECK(((celer_moe_ffn_add_fn)fn)(gpu, &mg, dx, T, di, dw, SK, CELER_ACT_SILU, dy[0], dt[0], &err) == CELER_OK);
    CHECK(gpu->ops->moe_ffn(gpu, &mg, dx, T, di, dw, SK, CELER_ACT_SILU, dt[1], &err) == CELER_OK);
    CHECK(gpu->ops->add(gpu, dy[1], dt[1], T * SD, &err) == CELER_OK);
    for (int v = 0; v < 2; v++) to_host(dy[v], h[v], (size_t)(T * SD) * 4);
    const bool same = !memcmp(h[0], h[1], (size_t)(T * SD) * 4), moved = memcmp(h[0], y, (size_t)(T * SD) * 4) != 0;
    if (!same || !moved)
        fprintf(stderr, "  moe_ffn_add %s T=%lld ff=%lld: %s\n", celer_ggml_type_get(t)->name, (long long)T,
                (long long)ff, !moved ? "y unchanged" : "differs from moe_ffn then add");
    CHECK(same && moved);
    gpu->ops->release(gpu, dx), gpu->ops->release(gpu, dw), gpu->ops->release(gpu, di);
    for (int v = 0; v < 2; v++) gpu->ops->release(gpu, dy[v]), gpu->ops->release(gpu, dt[v]), free(h[v]);
    free(logits), free(wc), free(ic), free(x), free(y);
    for (int i = 0; i < 3; i++) free(raw[i]);
    gpu = was;
}

/* MoE routing of E experts to K a token, against the CPU's: the same choices in the same order
 * (ties to the lower expert), the weights within f32 rounding: the softmax's sum of E terms is
 * added in another order, which moves it by up to E units of 2^-24 (the recursive-summation
 * bound; a fixed 1e-6 failed at E = 300, 1.11e-6 with seed
 * 18056819232497660611). */
static void test_moe_route(int64_t E, int64_t K)
{
    enum { T = 37 };
    float   *logits = malloc((size_t)(T * E) * sizeof *logits), *wc = malloc((size_t)(T * K) * 4), *wg = malloc((size_t)(T * K) * 4);
    int32_t *ic = malloc((size_t)(T * K) * 4), *ig = malloc((size_t)(T * K) * 4);
    random_fill(logits, T * E, 3.0f);
    logits[E + 3] = logits[E + E - 2] = 50.0f;       /* a tie at the top, lanes apart */
    logits[2 * E + 5] = logits[2 * E + 37 % E] = 9.0f; /* a tie lower down */
    for (int renorm = 0; renorm < 2; renorm++) {
        float   *dl = dev_copy(logits, (size_t)(T * E) * 4), *dw = dev_zeros((size_t)(T * K));
        int32_t *di = (int32_t *)dev_zeros((size_t)(T * K));
        CHECK(cpu->ops->moe_route(cpu, logits, T, E, K, renorm, ic, wc, &err) == CELER_OK);
        CHECK(gpu->ops->moe_route(gpu, dl, T, E, K, renorm, di, dw, &err) == CELER_OK);
        to_host(di, ig, (size_t)(T * K) * 4), to_host(dw, wg, (size_t)(T * K) * 4);
        bool same = !memcmp(ic, ig, (size_t)(T * K) * 4);
        double e  = rel_l2f(wg, wc, T * K), tol = (double)(E + 4) * 0x1p-24;
        if (!same || !(e < tol)) fprintf(stderr, "  moe_route E=%lld K=%lld renorm %d: ids %s, weights %.2e\n",
                                         (long long)E, (long long)K, renorm, same ? "equal" : "DIFFER", e);
        CHECK(same && e < tol);
        gpu->ops->release(gpu, dl), gpu->ops->release(gpu, dw), gpu->ops->release(gpu, di);
    }
    free(logits), free(wc), free(wg), free(ic), free(ig);
}

/* The port moe_router (the router's product and the routing: one kernel for one token of a
 * plain-float router of up to 256 experts) against the same backend's matmul and moe_route on
 * the same values: the same logits, the same choices, the same weights. One token runs the fused
 * kernel (twice: its counter of blocks done must be reset), three tokens and a Q8_0 router the
 * two ops; 300 experts are past the fused kernel's 256. */
static void test_moe_router(celer_ggml_type t, int64_t E, int64_t K, int64_t T)
{
    enum { D = 1024 };
    celer_port_fn fn;
    CHECK(celer_port_select(&celer_port_moe_router, gpu->ops->kind, &fn, &err) == CELER_OK);
    void        *raw = random_weights(t, E, D, 0.5f);
    celer_weight r   = {.type = t, .rows = E, .cols = D, .data = raw};
    CHECK(gpu->ops->weight_load(gpu, &r, &err) == CELER_OK);
    float *h = malloc((size_t)(T * D) * sizeof *h);
    random_fill(h, T * D, 1.0f);
    float   *dh = dev_copy(h, (size_t)(T * D) * 4), *l1 = dev_zeros((size_t)(T * E)), *l2 = dev_zeros((size_t)(T * E));
    float   *w1 = dev_zeros((size_t)(T * K)), *w2 = dev_zeros((size_t)(T * K));
    int32_t *i1 = (int32_t *)dev_zeros((size_t)(T * K)), *i2 = (int32_t *)dev_zeros((size_t)(T * K));
    float   *hl1 = malloc((size_t)(T * E) * 4), *hl2 = malloc((size_t)(T * E) * 4);
    float   *hw1 = malloc((size_t)(T * K) * 4), *hw2 = malloc((size_t)(T * K) * 4);
    int32_t *hi1 = malloc((size_t)(T * K) * 4), *hi2 = malloc((size_t)(T * K) * 4);
    for (int rep = 0; rep < 2; rep++) {
        const bool renorm = rep == 1;
        CHECK(((celer_moe_router_fn)fn)(gpu, &r, dh, T, l1, K, renorm, i1, w1, &err) == CELER_OK);
        CHECK(gpu->ops->matmul(gpu, &r, dh, T, l2, &err) == CELER_OK);
        CHECK(gpu->ops->moe_route(gpu, l2, T, E, K, renorm, i2, w2, &err) == CELER_OK);
        to_host(l1, hl1, (size_t)(T * E) * 4), to_host(l2, hl2, (size_t)(T * E) * 4);
        to_host(w1, hw1, (size_t)(T * K) * 4), to_host(w2, hw2, (size_t)(T * K) * 4);
        to_host(i1, hi1, (size_t)(T * K) * 4), to_host(i2, hi2, (size_t)(T * K) * 4);
        const bool   same = !memcmp(hi1, hi2, (size_t)(T * K) * 4);
        const double el = rel_l2f(hl1, hl2, T * E), ew = rel_l2f(hw1, hw2, T * K);
        if (!same || !(el < 1e-6 && ew < 1e-6))
            fprintf(stderr, "  moe_router %s E=%lld K=%lld T=%lld renorm %d: ids %s, logits %.2e, weights %.2e\n",
                    celer_ggml_type_get(t)->name, (long long)E, (long long)K, (long long)T, renorm,
                    same ? "equal" : "DIFFER", el, ew);
        CHECK(same && el < 1e-6 && ew < 1e-6);
    }
    gpu->ops->release(gpu, dh), gpu->ops->release(gpu, l1), gpu->ops->release(gpu, l2);
    gpu->ops->release(gpu, w1), gpu->ops->release(gpu, w2), gpu->ops->release(gpu, i1), gpu->ops->release(gpu, i2);
    free(raw), free(h), free(hl1), free(hl2), free(hw1), free(hw2), free(hi1), free(hi2);
}

/* The port norm_router (the MoE input's norm inside the router's kernel, for one token of a
 * plain-float router whose slices of h fit its blocks) against the same backend's rmsnorm and
 * moe_router port on the same values: h, the logits, the choices and their weights bit for bit,
 * and h's quantization for the experts the same (a Q4_0 product of h after each, compared bit for
 * bit: it reads the quantization the kernel before left). Twice each (the counter of blocks done
 * is reset); three tokens and a Q8_0 router take rmsnorm and moe_router themselves. */
static void test_norm_router(celer_ggml_type t, int64_t E, int64_t K, int64_t T, int64_t D)
{
    celer_port_fn fn, rt;
    CHECK(celer_port_select(&celer_port_norm_router, gpu->ops->kind, &fn, &err) == CELER_OK);
    CHECK(celer_port_select(&celer_port_moe_router, gpu->ops->kind, &rt, &err) == CELER_OK);
    void        *raw = random_weights(t, E, D, 0.5f), *rp = random_weights(CELER_GGML_Q4_0, 64, D, 0.1f);
    float       *x = malloc((size_t)(T * D) * 4), *nv = malloc((size_t)D * 4);
    celer_weight r = {.type = t, .rows = E, .cols = D, .data = raw};
    celer_weight n = {.type = CELER_GGML_F32, .rows = 1, .cols = D, .data = nv};
    celer_weight p = {.type = CELER_GGML_Q4_0, .rows = 64, .cols = D, .data = rp};
    random_fill(x, T * D, 3.0f), random_fill(nv, D, 1.0f);
    CHECK(gpu->ops->weight_load(gpu, &r, &err) == CELER_OK && gpu->ops->weight_load(gpu, &n, &err) == CELER_OK &&
          gpu->ops->weight_load(gpu, &p, &err) == CELER_OK);
    const size_t nh = (size_t)(T * D) * 4, nl = (size_t)(T * E) * 4, nk = (size_t)(T * K) * 4, np = (size_t)(T * 64) * 4;
    float       *dx = dev_copy(x, nh), *dh[2], *dl[2], *dw[2], *dp[2];
    int32_t     *di[2];
    char        *host[2][5];
    for (int v = 0; v < 2; v++) {
        dh[v] = dev_zeros((size_t)(T * D)), dl[v] = dev_zeros((size_t)(T * E)), dw[v] = dev_zeros((size_t)(T * K));
        di[v] = (int32_t *)dev_zeros((size_t)(T * K)), dp[v] = dev_zeros((size_t)(T * 64));
        host[v][0] = malloc(nh), host[v][1] = malloc(nl), host[v][2] = malloc(nk), host[v][3] = malloc(nk);
        host[v][4] = malloc(np);
    }
    for (int rep = 0; rep < 4; rep++) {
        const bool renorm = rep % 2;
        CHECK(((celer_norm_router_fn)fn)(gpu, dx, &n, T, D, 1e-6f, dh[0], &r, dl[0], K, renorm, di[0], dw[0], &err) ==
              CELER_OK);
        CHECK(gpu->ops->matmul(gpu, &p, dh[0], T, dp[0], &err) == CELER_OK);
        CHECK(gpu->ops->rmsnorm(gpu, dx, &n, T, D, 1e-6f, dh[1], &err) == CELER_OK);
        CHECK(((celer_moe_router_fn)rt)(gpu, &r, dh[1], T, dl[1], K, renorm, di[1], dw[1], &err) == CELER_OK);
        CHECK(gpu->ops->matmul(gpu, &p, dh[1], T, dp[1], &err) == CELER_OK);
        bool same[5];
        for (int v = 0; v < 2; v++) {
            to_host(dh[v], host[v][0], nh), to_host(dl[v], host[v][1], nl), to_host(dw[v], host[v][2], nk);
            to_host(di[v], host[v][3], nk), to_host(dp[v], host[v][4], np);
        }
        const size_t size[5] = {nh, nl, nk, nk, np};
        for (int i = 0; i < 5; i++) same[i] = !memcmp(host[0][i], host[1][i], size[i]);
        if (!(same[0] && same[1] && same[2] && same[3] && same[4]))
            fprintf(stderr, "  norm_router %s E=%lld K=%lld T=%lld D=%lld renorm %d: h %s, logits %s, weights %s, "
                            "ids %s, the product after %s\n",
                    celer_ggml_type_get(t)->name, (long long)E, (long long)K, (long long)T, (long long)D, renorm,
                    same[0] ? "equal" : "DIFFER", same[1] ? "equal" : "DIFFER", same[2] ? "equal" : "DIFFER",
                    same[3] ? "equal" : "DIFFER", same[4] ? "equal" : "DIFFER");
        CHECK(same[0] && same[1] && same[2] && same[3] && same[4]);
    }
    gpu->ops->release(gpu, dx);
    for (int v = 0; v < 2; v++) {
        gpu->ops->release(gpu, dh[v]), gpu->ops->release(gpu, dl[v]), gpu->ops->release(gpu, dw[v]);
        gpu->ops->release(gpu, di[v]), gpu->ops->release(gpu, dp[v]);
        for (int i = 0; i < 5; i++) free(host[v][i]);
    }
    free(raw), free(rp), free(x), free(nv);
}

static void test_moe(celer_ggml_type t, int64_t T)
{
    enum { E = 16, K = 4, D = 256, FF = 512 };
    float   *logits = malloc((size_t)(T * E) * sizeof *logits), *wc = malloc((size_t)(T * K) * 4), *wg = malloc((size_t)(T * K) * 4);
    int32_t *ic = malloc((size_t)(T * K) * 4), *ig = malloc((size_t)(T * K) * 4);
    random_fill(logits, T * E, 3.0f);
    if (T > 2) logits[E + 3] = logits[E + 9] = 50.0f; /* a tie at the top */
    float   *dl = dev_copy(logits, (size_t)(T * E) * 4), *dw = dev_zeros((size_t)(T * K));
    int32_t *di = (int32_t *)dev_zeros((size_t)(T * K));
    CHECK(cpu->ops->moe_route(cpu, logits, T, E, K, true, ic, wc, &err) == CELER_OK);
    CHECK(gpu->ops->moe_route(gpu, dl, T, E, K, true, di, dw, &err) == CELER_OK);
    to_host(di, ig, (size_t)(T * K) * 4), to_host(dw, wg, (size_t)(T * K) * 4);
    CHECK(!memcmp(ic, ig, (size_t)(T * K) * 4));
    CHECK(rel_l2f(wg, wc, T * K) < 1e-6);
    /* the experts */
    celer_weight gc[E], uc[E], dc[E], gg[E], ug[E], dg[E];
    void        *raw[3 * E];
    for (int e = 0; e < E; e++) {
        raw[3 * e] = random_weights(t, FF, D, 0.1f), raw[3 * e + 1] = random_weights(t, FF, D, 0.1f);
        raw[3 * e + 2] = random_weights(t, D, FF, 0.1f);
        gc[e] = gg[e] = (celer_weight){.type = t, .rows = FF, .cols = D, .data = raw[3 * e]};
        uc[e] = ug[e] = (celer_weight){.type = t, .rows = FF, .cols = D, .data = raw[3 * e + 1]};
        dc[e] = dg[e] = (celer_weight){.type = t, .rows = D, .cols = FF, .data = raw[3 * e + 2]};
        CHECK(cpu->ops->weight_load(cpu, &gc[e], &err) == CELER_OK && cpu->ops->weight_load(cpu, &uc[e], &err) == CELER_OK &&
              cpu->ops->weight_load(cpu, &dc[e], &err) == CELER_OK);
        CHECK(gpu->ops->weight_load(gpu, &gg[e], &err) == CELER_OK && gpu->ops->weight_load(gpu, &ug[e], &err) == CELER_OK &&
              gpu->ops->weight_load(gpu, &dg[e], &err) == CELER_OK);
    }
    celer_moe mc = {E, FF, gc, uc, dc}, mg = {E, FF, gg, ug, dg};
    float    *x = malloc((size_t)(T * D) * 4), *oc = malloc((size_t)(T * D) * 4), *og = malloc((size_t)(T * D) * 4);
    random_fill(x, T * D, 1.0f);
    float *dx = dev_copy(x, (size_t)(T * D) * 4), *dout = dev_zeros((size_t)(T * D));
    CHECK(cpu->ops->moe_ffn(cpu, &mc, x, T, ic, wc, K, CELER_ACT_SILU, oc, &err) == CELER_OK);
    CHECK(gpu->ops->moe_ffn(gpu, &mg, dx, T, di, dw, K, CELER_ACT_SILU, dout, &err) == CELER_OK);
    to_host(dout, og, (size_t)(T * D) * 4);
    double e = rel_l2f(og, oc, T * D), bound = t == CELER_GGML_F32 ? 1e-5 : 2e-2;
    if (t != CELER_GGML_F32 && x8_mode()) /* experts apart: each a dense product, on 8 bits */
        bound = 3e-2;
    if (e >= bound) fprintf(stderr, "  moe_ffn %s T=%lld: %.2e\n", celer_ggml_type_get(t)->name, (long long)T, e);
    CHECK(e < bound);
    for (int i = 0; i < 3 * E; i++) free(raw[i]);
    gpu->ops->release(gpu, dl), gpu->ops->release(gpu, dw), gpu->ops->release(gpu, di);
    gpu->ops->release(gpu, dx), gpu->ops->release(gpu, dout);
    free(logits), free(wc), free(wg), free(ic), free(ig), free(x), free(oc), free(og);
}

int main(void)
{
    if (gpu_test_open("test_gpu_moe")) return 1;
    test_moe_route(128, 8);
    test_moe_route(60, 6);
    test_moe_route(16, 4);
    test_moe_route(300, 40); /* past the held experts; a lane writes two choices */
    test_moe_router(CELER_GGML_F32, 128, 8, 1);
    test_moe_router(CELER_GGML_BF16, 60, 6, 1);
    test_moe_router(CELER_GGML_F16, 256, 8, 1);
    test_moe_router(CELER_GGML_F32, 128, 8, 3);
    test_moe_router(CELER_GGML_Q8_0, 128, 8, 1);
    test_moe_router(CELER_GGML_F32, 300, 8, 1);
    test_norm_router(CELER_GGML_F32, 128, 8, 1, 2048); /* Qwen3-30B-A3B's */
    test_norm_router(CELER_GGML_BF16, 60, 6, 1, 1024);
    test_norm_router(CELER_GGML_F16, 256, 8, 1, 4096);
    test_norm_router(CELER_GGML_F32, 128, 8, 3, 2048);
    test_norm_router(CELER_GGML_Q8_0, 128, 8, 1, 1024);
    test_norm_router(CELER_GGML_F32, 4, 2, 1, 4096);  /* more slices of h than blocks: the two ops */
    test_moe(CELER_GGML_F32, 1);
    test_moe(CELER_GGML_F32, 37);
    test_moe(CELER_GGML_Q4_0, 1);
    test_moe(CELER_GGML_Q4_K, 300);
    celer_device_facts facts;
    for (int v = 0; v < N_VARIANTS; v++) variant[v].be = gpu_backend_with(variant[v].env, variant[v].env[1] ? 2 : 1);
    glu_apart = gpu_backend_with((const char *const[]){"CELER_GPU_GLU_FUSE=0"}, 1);
    CHECK(celer_device_query(0, &facts, &err) == CELER_OK);
    test_moe_stacked(CELER_GGML_Q4_0, 1, SFF, facts.compute_units);
    test_moe_stacked(CELER_GGML_Q4_K, 7, SFF, facts.compute_units);
    test_moe_stacked(CELER_GGML_Q6_K, 37, SFF, facts.compute_units);
    test_moe_stacked(CELER_GGML_Q8_0, 8, SFF, facts.compute_units);
    test_moe_stacked(CELER_GGML_Q4_0, 32, SFF, facts.compute_units); /* a batch of 32 */
    test_moe_stacked(CELER_GGML_Q8_0, 64, SFF, facts.compute_units); /* 256 pairs, one expert's in two tiles */
    test_moe_stacked(CELER_GGML_Q4_0, 300, SFF, facts.compute_units); /* past 256 pairs, Q4_0 / Q8_0: every expert in one launch */
    test_moe_stacked(CELER_GGML_Q8_0, 70, SFF, facts.compute_units);
    /* 2,048 inside: the down products' rows longer than a warp's units (the combining kernel's
     * other form: two units a lane a round) */
    test_moe_stacked(CELER_GGML_Q4_0, 1, 2048, facts.compute_units);
    test_moe_stacked(CELER_GGML_Q8_0, 3, 2048, facts.compute_units);
    test_moe_stacked_mlx(CELER_HF_QUANT_AFFINE, 4, 64, CELER_ST_BF16, 1);
    test_moe_stacked_mlx(CELER_HF_QUANT_AFFINE, 4, 64, CELER_ST_BF16, 32);
    test_moe_stacked_mlx(CELER_HF_QUANT_AFFINE, 4, 64, CELER_ST_BF16, 300);
    test_moe_stacked_mlx(CELER_HF_QUANT_AFFINE, 8, 32, CELER_ST_F32, 32);
    test_moe_stacked_mlx(CELER_HF_QUANT_AFFINE, 8, 32, CELER_ST_F32, 300);
    test_moe_stacked_mlx(CELER_HF_QUANT_MXFP4, 4, 32, CELER_ST_BF16, 32);
    test_moe_stacked_mlx(CELER_HF_QUANT_MXFP4, 4, 32, CELER_ST_BF16, 300);
    test_moe_stacked_mlx(CELER_HF_QUANT_NVFP4, 4, 16, CELER_ST_BF16, 300);
    test_moe_ffn_add(gpu, CELER_GGML_Q4_0, 1, SFF);   /* the combining kernel's add */
    test_moe_ffn_add(gpu, CELER_GGML_Q8_0, 3, 2048);
    test_moe_ffn_add(gpu, CELER_GGML_Q4_K, 2, SFF);
    test_moe_ffn_add(gpu, CELER_GGML_Q4_0, 32, SFF);  /* grouped on the device: the fallback */
    test_moe_ffn_add(gpu, CELER_GGML_Q8_0, 300, SFF); /* grouped on the host: the fallback */
    if (variant[1].be) test_moe_ffn_add(variant[1].be, CELER_GGML_Q4_0, 1, SFF); /* no combining kernel */
    for (int v = 0; v < N_VARIANTS; v++) celer_backend_destroy(variant[v].be);
    celer_backend_destroy(glu_apart);
    return gpu_test_close("test_gpu_moe");
}
