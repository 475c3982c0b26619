/* The GPU backend's mixture-of-experts FFN (src/backends/gpu/gpu_moe.cu and the expert products
 * of gpu_matvec.cu and gpu_mmq.cu) through the backend's own ops: one MoE layer of Qwen3-30B-A3B's
 * shape (128 experts of 768 × 2048, 8 a token, stacked tensors of Q4_0 or Q8_0 viewed per
 * expert, as models load them) for T = 1, 8, 32 and 512 tokens, the choices spread evenly over
 * the experts or skewed (seven tokens in eight choose expert 0 first, as the synthetic files'
 * random routers lean). For each case: the check against the CPU backend on the same choices
 * and weights (relative L2, bound 2e-2: both quantize the activations), the time of one call op
 * by op (a step past the decode path reads its choices back to the host: that sync included),
 * and the experts' weight bytes it touches per second.
 *
 * Build against a GPU build (see README.md; `scripts/gpu-check.sh kernels` with KERNELS=gpu_moe)
 * and run: kernel_gpu_moe [REPS [TYPE]] (TYPE: Q4_0 or Q8_0, default both).
 * CELER_TEST_BACKEND=cpu checks the harness against the CPU itself (0 error). */
#define HARNESS_NAME "kernel_gpu_moe"
#include "gpu_harness.h"

#include <string.h>

#include "random_weights.h"
#include "rng.h"

enum { E = 128, K = 8, D = 2048, FF = 768 };

/* T tokens' K distinct experts and their weights (summing to 1): even, or skewed to expert 0. */
static void choices(int64_t T, bool skew, int32_t *ids, float *w)
{
    for (int64_t t = 0; t < T; t++) {
        float sum = 0;
        for (int j = 0; j < K; j++) {
            int32_t e;
            bool    again;
            do {
                e     = j == 0 && skew && (t % 8) ? 0 : (int32_t)(uni() * 0.5f * E + 0.5f * E) % E;
                again = false;
                for (int i = 0; i < j; i++) again |= ids[t * K + i] == e;
            } while (again);
            ids[t * K + j] = e;
            w[t * K + j]   = 0.1f + uni() * 0.4f + 0.5f;
            sum += w[t * K + j];
        }
        for (int j = 0; j < K; j++) w[t * K + j] /= sum;
    }
}

static void run(celer_ggml_type type, int64_t T, bool skew, int reps)
{
    const celer_ggml_type_info *ti   = celer_ggml_type_get(type);
    const size_t                rb_in = (size_t)(D / ti->block_elems) * ti->block_bytes;
    const size_t                rb_ff = (size_t)(FF / ti->block_elems) * ti->block_bytes;
    void *raw[3] = {random_weights(type, E * FF, D, 0.1f), random_weights(type, E * FF, D, 0.1f),
                    random_weights(type, E * D, FF, 0.1f)};
    celer_weight st[3] = {{.type = type, .rows = E * FF, .cols = D, .data = raw[0]},
                          {.type = type, .rows = E * FF, .cols = D, .data = raw[1]},
                          {.type = type, .rows = E * D, .cols = FF, .data = raw[2]}};
    static celer_weight gc[E], uc[E], dc[E], gg[E], ug[E], dg[E];
    for (int i = 0; i < 3; i++)
        if (gpu->ops->weight_load(gpu, &st[i], &err)) die("weight_load");
    for (int e = 0; e < E; e++) {
        gc[e] = (celer_weight){.type = type, .rows = FF, .cols = D, .data = (char *)raw[0] + e * FF * rb_in};
        uc[e] = (celer_weight){.type = type, .rows = FF, .cols = D, .data = (char *)raw[1] + e * FF * rb_in};
        dc[e] = (celer_weight){.type = type, .rows = D, .cols = FF, .data = (char *)raw[2] + e * D * rb_ff};
        if (cpu->ops->weight_load(cpu, &gc[e], &err) || cpu->ops->weight_load(cpu, &uc[e], &err) ||
            cpu->ops->weight_load(cpu, &dc[e], &err) || gpu->ops->weight_view(gpu, &st[0], e * FF, FF, &gg[e], &err) ||
            gpu->ops->weight_view(gpu, &st[1], e * FF, FF, &ug[e], &err) ||
            gpu->ops->weight_view(gpu, &st[2], e * D, D, &dg[e], &err))
            die("experts");
    }
    int32_t *ids = malloc((size_t)(T * K) * sizeof *ids);
    float   *w = malloc((size_t)(T * K) * sizeof *w), *x = malloc((size_t)(T * D) * sizeof *x);
    float   *oc = malloc((size_t)(T * D) * sizeof *oc), *og = malloc((size_t)(T * D) * sizeof *og);
    if (!ids || !w || !x || !oc || !og) die("host memory");
    choices(T, skew, ids, w);
    random_acts(x, T, D);
    bool used[E] = {false};
    for (int64_t i = 0; i < T * K; i++) used[ids[i]] = true;
    double bytes = 0; /* the chosen experts' weights, each read at least once */
    for (int e = 0; e < E; e++) bytes += used[e] ? (double)(2 * FF * rb_in + D * rb_ff) : 0;
    float   *dx = dev_of(x, (size_t)(T * D)), *dw = dev_of(w, (size_t)(T * K));
    int32_t *di = dev_of((const float *)ids, (size_t)(T * K)); /* 4-byte values either way */
    void    *dout;
    if (gpu->ops->alloc(gpu, (size_t)(T * D) * sizeof(float), &dout, &err)) die("alloc");
    const celer_moe mc = {E, FF, gc, uc, dc}, mg = {E, FF, gg, ug, dg};
    if (cpu->ops->moe_ffn(cpu, &mc, x, T, ids, w, K, CELER_ACT_SILU, oc, &err) ||
        gpu->ops->moe_ffn(gpu, &mg, dx, T, di, dw, K, CELER_ACT_SILU, dout, &err) ||
        gpu->ops->read(gpu, dout, og, (size_t)(T * D) * sizeof(float), &err))
        die("check");
    const double e = rel_l2(og, oc, T * D);
    sync_dev(dout);
    const double t0 = now();
    for (int r = 0; r < reps; r++)
        if (gpu->ops->moe_ffn(gpu, &mg, dx, T, di, dw, K, CELER_ACT_SILU, dout, &err)) die("moe_ffn");
    sync_dev(dout);
    const double us = (now() - t0) / reps * 1e6;
    printf("%-5s T %4lld %-6s  vs cpu %.1e%s | %9.1f us %6.0f GB/s of %7.1f MB (experts chosen)\n", ti->name,
           (long long)T, skew ? "skewed" : "even", e, e < 2e-2 ? "" : " (FAILED)", us, bytes / us / 1e3, bytes / 1e6);
    gpu->ops->release(gpu, dx), gpu->ops->release(gpu, dw), gpu->ops->release(gpu, di), gpu->ops->release(gpu, dout);
    free(ids), free(w), free(x), free(oc), free(og);
    for (int i = 0; i < 3; i++) free(raw[i]);
}

int main(int argc, char **argv)
{
    const int   reps = harness_open(argc, argv, 20);
    const char *only = argc > 2 ? argv[2] : "";
    printf("MoE FFN, %d experts of %d x %d, %d a token; %d repeats, op by op\n", E, FF, D, K, reps);
    static const celer_ggml_type types[] = {CELER_GGML_Q4_0, CELER_GGML_Q8_0};
    static const int64_t         Ts[]    = {1, 8, 32, 512};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (strncmp(celer_ggml_type_get(types[i])->name, only, strlen(only))) continue;
        for (size_t t = 0; t < sizeof Ts / sizeof Ts[0]; t++)
            for (int skew = 0; skew < (Ts[t] >= 32 ? 2 : 1); skew++) run(types[i], Ts[t], skew, reps);
    }
    harness_close();
    return 0;
}
