/* The GPU backend's prefill attention (src/backends/gpu/gpu_flash.cu: flash attention on the
 * matrix units for heads of 64 and 128; the other heads take gpu_attention.cu's kernels) through
 * the backend's own ops: T tokens of one sequence at positions 0 .. T - 1 attending causally to
 * each other from the cache, for the head layouts of the models issue 10 measures. For each shape
 * and T: the check against the CPU backend on the same cache and queries (relative L2; bound 2e-3
 * where flash takes the step, as tests/gpu/test_gpu_ops.c: its q, k, v and probabilities are f16;
 * 1e-5 elsewhere), the time of one call and the rate of its two products (2 · 2 · head size ·
 * query heads · T (T + 1) / 2 multiply-adds counted as two operations each), op by op.
 *
 * Build against a GPU build (see README.md; `scripts/gpu-check.sh kernels` does it with
 * KERNELS=gpu_flash) and run: kernel_gpu_flash [REPS [SHAPE]] (SHAPE: only the shapes whose name
 * starts with it). CELER_GPU_FLASH=0 runs the same steps without the matrix units, for the
 * comparison; CELER_TEST_BACKEND=cpu runs the harness against the CPU itself (a check of the
 * harness: 0 error). */
#define HARNESS_NAME "kernel_gpu_flash"
#include "gpu_harness.h"
#include "runtime/kv_cache.h"

#include <string.h>

#include "rng.h"

typedef struct {
    const char *name;
    int64_t     n_heads, n_kv, hd;
} shape;

static void run(const shape *s, int32_t T, int reps)
{
    const int64_t  kw = s->n_kv * s->hd, qw = s->n_heads * s->hd;
    const int32_t  n_blocks = (T + CELER_KV_BLOCK - 1) / CELER_KV_BLOCK;
    celer_kv_cache kg, kc;
    if (celer_kv_cache_init(&kg, gpu, 1, s->n_kv, s->hd, s->hd, 1, T, n_blocks, &err) ||
        celer_kv_cache_init(&kc, cpu, 1, s->n_kv, s->hd, s->hd, 1, T, n_blocks, &err) ||
        celer_kv_cache_reserve(&kg, 0, T, &err) || celer_kv_cache_reserve(&kc, 0, T, &err))
        die("kv cache");
    int32_t *pos = malloc((size_t)T * sizeof *pos), *seq = calloc((size_t)T, sizeof *seq);
    float   *k = malloc((size_t)(T * kw) * sizeof *k), *v = malloc((size_t)(T * kw) * sizeof *v);
    float   *q = malloc((size_t)(T * qw) * sizeof *q), *oc = malloc((size_t)(T * qw) * sizeof *oc);
    float   *og = malloc((size_t)(T * qw) * sizeof *og);
    if (!pos || !seq || !k || !v || !q || !oc || !og) {
        fprintf(stderr, HARNESS_NAME ": out of host memory\n");
        exit(1);
    }
    for (int32_t i = 0; i < T; i++) pos[i] = i;
    for (int64_t i = 0; i < T * kw; i++) k[i] = uni() * 2.0f, v[i] = uni();
    for (int64_t i = 0; i < T * qw; i++) q[i] = uni() * 2.0f;
    float *dk = dev_of(k, (size_t)(T * kw)), *dv = dev_of(v, (size_t)(T * kw)), *dq = dev_of(q, (size_t)(T * qw));
    void  *dout;
    if (gpu->ops->alloc(gpu, (size_t)(T * qw) * sizeof(float), &dout, &err)) die("alloc");
    const celer_batch all = {T, pos, seq};
    const celer_attn  a   = {s->n_heads, s->n_kv, s->hd, 1.0f / sqrtf((float)s->hd), 0};
    if (gpu->ops->kv_write(gpu, &kg, 0, dk, dv, &all, &err) || cpu->ops->kv_write(cpu, &kc, 0, k, v, &all, &err) ||
        cpu->ops->attention(cpu, q, &kc, 0, &all, &a, oc, &err) ||
        gpu->ops->attention(gpu, dq, &kg, 0, &all, &a, dout, &err) ||
        gpu->ops->read(gpu, dout, og, (size_t)(T * qw) * sizeof(float), &err))
        die("check");
    const double e = rel_l2(og, oc, T * qw);
    /* flash's bound where it takes the step (its own test's: heads of 64 or 128, 48 tokens on) */
    const char  *off   = getenv("CELER_GPU_FLASH");
    const bool   flash = (s->hd == 64 || s->hd == 128) && T >= 48 && !(off && !strcmp(off, "0"));
    const double bound = flash ? 2e-3 : 1e-5;
    sync_dev(dout);
    const double t0 = now();
    for (int r = 0; r < reps; r++)
        if (gpu->ops->attention(gpu, dq, &kg, 0, &all, &a, dout, &err)) die("attention");
    sync_dev(dout);
    const double us    = (now() - t0) / reps * 1e6;
    const double flops = 4.0 * (double)s->hd * (double)s->n_heads * (double)T * (double)(T + 1) / 2.0;
    printf("%-14s T %5d  vs cpu %.1e%s | %9.1f us %7.1f TFLOP/s %6.2f us a token\n", s->name, T, e,
           e < bound ? "" : " (FAILED)", us, flops / (us * 1e-6) / 1e12, us / T);
    gpu->ops->release(gpu, dk), gpu->ops->release(gpu, dv), gpu->ops->release(gpu, dq), gpu->ops->release(gpu, dout);
    free(pos), free(seq), free(k), free(v), free(q), free(oc), free(og);
    celer_kv_cache_free(&kg, gpu);
    celer_kv_cache_free(&kc, cpu);
}

int main(int argc, char **argv)
{
    const int   reps = harness_open(argc, argv, 20);
    const char *only = argc > 2 ? argv[2] : "";
    printf("prefill attention, one sequence, causal; %d repeats, op by op\n", reps);
    static const shape shapes[] = {
        {"llama-3.1-8b", 32, 8, 128},  /* four query heads a key head */
        {"qwen3-30b-a3b", 32, 4, 128}, /* eight */
        {"qwen3-0.6b", 16, 8, 128},    /* two */
        {"gemma-3-270m", 4, 1, 256},   /* heads of 256: not flash */
    };
    static const int32_t Ts[] = {128, 512, 2048};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t t = 0; t < sizeof Ts / sizeof Ts[0]; t++)
            if (!strncmp(shapes[s].name, only, strlen(only))) run(&shapes[s], Ts[t], reps);
    harness_close();
    return 0;
}
