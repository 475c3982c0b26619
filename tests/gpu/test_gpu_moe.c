/* The GPU's mixture-of-experts ops against the CPU backend, on fresh random inputs (the seed is
 * printed; CELER_TEST_SEED repeats a run):
 *   - routing: the same choices in the same order (ties to the lower expert), the weights within
 *     1e-6 (relative L2);
 *   - moe_ffn over experts loaded one by one and over views of one stacked tensor per projection
 *     (as models load them: decode-sized steps then keep the choices on the device): 1e-5 for
 *     float weights, 2e-2 for quantized ones (the CPU quantizes activations to 8 bits).
 * Run on a machine with a GPU (scripts/gpu-check.sh); built only with CELER_CUDA or CELER_HIP. */
#include "gpu/gpu_test.h"

/* moe_ffn over experts that are views of one stacked tensor per projection (as models load
 * them): decode-sized steps take the device path (the choices never leave the GPU), larger
 * ones the grouped path; both against the CPU's moe_ffn on the same bytes. */
static void test_moe_stacked(celer_ggml_type t, int64_t T)
{
    enum { E = 16, K = 4, D = 256, FF = 512 };
    const celer_ggml_type_info *ti = celer_ggml_type_get(t);
    size_t                      rb_in = (size_t)(D / ti->block_elems) * ti->block_bytes;
    size_t                      rb_ff = (size_t)(FF / ti->block_elems) * ti->block_bytes;
    void *raw[3] = {random_weights(t, E * FF, D, 0.1f), random_weights(t, E * FF, D, 0.1f),
                    random_weights(t, E * D, FF, 0.1f)};
    celer_weight st[3] = {{.type = t, .rows = E * FF, .cols = D, .data = raw[0]},
                          {.type = t, .rows = E * FF, .cols = D, .data = raw[1]},
                          {.type = t, .rows = E * D, .cols = FF, .data = raw[2]}};
    celer_weight gc[E], uc[E], dc[E], gg[E], ug[E], dg[E];
    for (int i = 0; i < 3; i++) CHECK(gpu->ops->weight_load(gpu, &st[i], &err) == CELER_OK);
    for (int e = 0; e < E; e++) {
        gc[e] = (celer_weight){.type = t, .rows = FF, .cols = D, .data = (char *)raw[0] + e * FF * rb_in};
        uc[e] = (celer_weight){.type = t, .rows = FF, .cols = D, .data = (char *)raw[1] + e * FF * rb_in};
        dc[e] = (celer_weight){.type = t, .rows = D, .cols = FF, .data = (char *)raw[2] + e * D * rb_ff};
        CHECK(cpu->ops->weight_load(cpu, &gc[e], &err) == CELER_OK && cpu->ops->weight_load(cpu, &uc[e], &err) == CELER_OK &&
              cpu->ops->weight_load(cpu, &dc[e], &err) == CELER_OK);
        CHECK(gpu->ops->weight_view(gpu, &st[0], e * FF, FF, &gg[e], &err) == CELER_OK);
        CHECK(gpu->ops->weight_view(gpu, &st[1], e * FF, FF, &ug[e], &err) == CELER_OK);
        CHECK(gpu->ops->weight_view(gpu, &st[2], e * D, D, &dg[e], &err) == CELER_OK);
    }
    float   *logits = malloc((size_t)(T * E) * 4), *wc = malloc((size_t)(T * K) * 4);
    int32_t *ic     = malloc((size_t)(T * K) * 4);
    random_fill(logits, T * E, 3.0f);
    CHECK(cpu->ops->moe_route(cpu, logits, T, E, K, true, ic, wc, &err) == CELER_OK);
    celer_moe mc = {E, FF, gc, uc, dc}, mg = {E, FF, gg, ug, dg};
    float    *x = malloc((size_t)(T * D) * 4), *oc = malloc((size_t)(T * D) * 4), *og = malloc((size_t)(T * D) * 4);
    random_fill(x, T * D, 1.0f);
    float   *dx = dev_copy(x, (size_t)(T * D) * 4), *dout = dev_zeros((size_t)(T * D)), *dw = dev_copy(wc, (size_t)(T * K) * 4);
    int32_t *di = (int32_t *)dev_copy(ic, (size_t)(T * K) * 4);
    CHECK(cpu->ops->moe_ffn(cpu, &mc, x, T, ic, wc, K, CELER_ACT_SILU, oc, &err) == CELER_OK);
    CHECK(gpu->ops->moe_ffn(gpu, &mg, dx, T, di, dw, K, CELER_ACT_SILU, dout, &err) == CELER_OK);
    to_host(dout, og, (size_t)(T * D) * 4);
    double e = rel_l2f(og, oc, T * D);
    if (!(e < 2e-2)) fprintf(stderr, "  moe_ffn stacked %s T=%lld: %.2e\n", ti->name, (long long)T, e);
    CHECK(e < 2e-2);
    gpu->ops->release(gpu, dx), gpu->ops->release(gpu, dout), gpu->ops->release(gpu, dw), gpu->ops->release(gpu, di);
    free(logits), free(wc), free(ic), free(x), free(oc), free(og);
    for (int i = 0; i < 3; i++) free(raw[i]);
}

/* MoE routing of E experts to K a token, against the CPU's: the same choices in the same order
 * (ties to the lower expert), the weights within f32 rounding (the softmax's sum is added in
 * another order). */
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
        double e  = rel_l2f(wg, wc, T * K);
        if (!same || !(e < 1e-6)) fprintf(stderr, "  moe_route E=%lld K=%lld renorm %d: ids %s, weights %.2e\n",
                                         (long long)E, (long long)K, renorm, same ? "equal" : "DIFFER", e);
        CHECK(same && e < 1e-6);
        gpu->ops->release(gpu, dl), gpu->ops->release(gpu, dw), gpu->ops->release(gpu, di);
    }
    free(logits), free(wc), free(wg), free(ic), free(ig);
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
    test_moe(CELER_GGML_F32, 1);
    test_moe(CELER_GGML_F32, 37);
    test_moe(CELER_GGML_Q4_0, 1);
    test_moe(CELER_GGML_Q4_K, 300);
    test_moe_stacked(CELER_GGML_Q4_0, 1);
    test_moe_stacked(CELER_GGML_Q4_K, 5);
    test_moe_stacked(CELER_GGML_Q6_K, 37);
    test_moe_stacked(CELER_GGML_Q4_0, 300); /* past 256 pairs, Q4_0 / Q8_0: every expert in one launch */
    test_moe_stacked(CELER_GGML_Q8_0, 70);
    return gpu_test_close("test_gpu_moe");
}
