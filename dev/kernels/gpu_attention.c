/* The GPU backend's decode attention (src/backends/gpu/gpu_attention.cu) through the backend's
 * own ops: one token attending to a context of N positions, for the head layouts of the models
 * issue 10 measures, the time of one call, the keys and values it reads per second (N positions
 * × key heads × head size × 2 × 4 bytes: the f32 cache), and that as a share of the device's copy
 * bandwidth measured in the same run. The cache is cold: the calls take enough layers in turn to
 * exceed the L2 several times. Each shape and context is checked against the CPU backend on the
 * same cache contents (relative L2, bound 1e-5: both sum in f32). "step" times the calls inside a
 * replayed step graph (what a decode step sees, no host launch cost between them).
 *
 * Build against a GPU build (see README.md; `scripts/gpu-check.sh kernels` does it) and run:
 * kernel_gpu_attention [REPS [SHAPE]] (SHAPE: only the shapes whose name starts with it).
 * CELER_GPU_ATT_CHUNK=N fixes the keys a split, as for the whole engine. */
#define HARNESS_NAME "kernel_gpu_attention"
#include "gpu_harness.h"
#include "runtime/kv_cache.h"

#include <string.h>

#include "rng.h"

typedef struct {
    const char *name;
    int64_t     n_heads, n_kv, hd;
} shape;

/* Mean microseconds of one layer's attention, layers in turn: op by op, or in a step graph
 * (recorded once, then replayed). */
static double time_us(celer_kv_cache *kg, int32_t layers, const float *dq, float *dout, const celer_batch *b,
                      const celer_attn *a, int reps, uint64_t key)
{
    const int passes = key ? 2 + reps : 1 + reps; /* graphs: op by op, recorded, then timed */
    double    t0     = 0;
    for (int pass = 0; pass < passes; pass++) {
        if (pass == passes - reps) sync_dev(dout), t0 = now();
        bool redo = false;
        if (key && gpu->ops->step_begin(gpu, key, &err)) die("step_begin");
        for (int32_t l = 0; l < layers; l++)
            if (gpu->ops->attention(gpu, dq, kg, l, b, a, dout, &err)) die("attention");
        if (key && (gpu->ops->step_end(gpu, true, &redo, &err) || redo)) die("step_end");
    }
    sync_dev(dout);
    return (now() - t0) / ((double)reps * layers) * 1e6;
}

static void run(const shape *s, int32_t ctx, int reps, double copy_bw)
{
    const int64_t kw = s->n_kv * s->hd, qw = s->n_heads * s->hd;
    const double  layer_bytes = (double)ctx * (double)kw * 2 * 4; /* the keys and values one call reads */
    int32_t       layers = (int32_t)(256.0 * 1048576.0 / layer_bytes) + 1; /* 256 MiB: 4x the L2 */
    layers               = layers > 64 ? 64 : layers;
    const int32_t  n_blocks = (ctx + CELER_KV_BLOCK - 1) / CELER_KV_BLOCK;
    celer_kv_cache kg, kc;
    if (celer_kv_cache_init(&kg, gpu, layers, s->n_kv, s->hd, s->hd, 1, ctx, n_blocks, &err) ||
        celer_kv_cache_init(&kc, cpu, 1, s->n_kv, s->hd, s->hd, 1, ctx, n_blocks, &err) ||
        celer_kv_cache_reserve(&kg, 0, ctx, &err) || celer_kv_cache_reserve(&kc, 0, ctx, &err))
        die("kv cache");
    int32_t *pos = malloc((size_t)ctx * sizeof *pos), *seq = calloc((size_t)ctx, sizeof *seq);
    float   *k = malloc((size_t)(ctx * kw) * sizeof *k), *v = malloc((size_t)(ctx * kw) * sizeof *v);
    float   *q = malloc((size_t)qw * sizeof *q), *oc = malloc((size_t)qw * sizeof *oc), *og = malloc((size_t)qw * sizeof *og);
    for (int32_t i = 0; i < ctx; i++) pos[i] = i;
    for (int64_t i = 0; i < ctx * kw; i++) k[i] = uni() * 2.0f, v[i] = uni();
    for (int64_t i = 0; i < qw; i++) q[i] = uni() * 2.0f;
    float      *dk = dev_of(k, (size_t)(ctx * kw)), *dv = dev_of(v, (size_t)(ctx * kw)), *dq = dev_of(q, (size_t)qw);
    void       *dout;
    if (gpu->ops->alloc(gpu, (size_t)qw * sizeof(float), &dout, &err)) die("alloc");
    celer_batch all = {ctx, pos, seq}, one = {1, &pos[ctx - 1], seq};
    celer_attn  a   = {s->n_heads, s->n_kv, s->hd, 1.0f / sqrtf((float)s->hd), 0};
    for (int32_t l = 0; l < layers; l++) /* every layer the same keys: the check reads layer 0 */
        if (gpu->ops->kv_write(gpu, &kg, l, dk, dv, &all, &err)) die("kv_write");
    if (cpu->ops->kv_write(cpu, &kc, 0, k, v, &all, &err) || cpu->ops->attention(cpu, q, &kc, 0, &one, &a, oc, &err) ||
        gpu->ops->attention(gpu, dq, &kg, 0, &one, &a, dout, &err) || gpu->ops->read(gpu, dout, og, (size_t)qw * 4, &err))
        die("check");
    const double e   = rel_l2(og, oc, qw);
    const double us  = time_us(&kg, layers, dq, dout, &one, &a, reps, 0);
    const double gus = gpu->ops->step_begin ? time_us(&kg, layers, dq, dout, &one, &a, reps,
                                                      0x9e3779b97f4a7c15ull ^ (uint64_t)ctx << 20 ^ (uint64_t)s->hd)
                                            : 0;
    printf("%-14s ctx %6d %8.2f MB  vs cpu %.1e%s | %8.1f us %6.0f GB/s %3.0f%%", s->name, ctx, layer_bytes / 1e6, e,
           e < 1e-5 ? "" : " (FAILED)", us, layer_bytes / us / 1e3, 100.0 * layer_bytes / (us * 1e-6) / copy_bw);
    if (gus > 0)
        printf(" | step %8.1f us %6.0f GB/s %3.0f%%", gus, layer_bytes / gus / 1e3,
               100.0 * layer_bytes / (gus * 1e-6) / copy_bw);
    printf("\n");
    gpu->ops->release(gpu, dk), gpu->ops->release(gpu, dv), gpu->ops->release(gpu, dq), gpu->ops->release(gpu, dout);
    free(pos), free(seq), free(k), free(v), free(q), free(oc), free(og);
    celer_kv_cache_free(&kg, gpu);
    celer_kv_cache_free(&kc, cpu);
}

int main(int argc, char **argv)
{
    const int   reps = harness_open(argc, argv, 20);
    const char *only = argc > 2 ? argv[2] : "";
    const double bw = copy_bandwidth();
    printf("device copy bandwidth (read + write): %.0f GB/s; %d repeats, cache cold\n", bw / 1e9, reps);
    static const shape shapes[] = {
        {"llama-3.1-8b", 32, 8, 128}, /* four query heads a key head */
        {"qwen3-30b-a3b", 32, 4, 128}, /* eight */
        {"gemma-3-270m", 4, 1, 256},
    };
    /* 600: what tg128 after 512 tokens decodes at (a split a 16 keys there, 64 splits a key head) */
    static const int32_t ctxs[] = {128, 512, 600, 1024, 4096, 16384};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t c = 0; c < sizeof ctxs / sizeof ctxs[0]; c++)
            if (!strncmp(shapes[s].name, only, strlen(only))) run(&shapes[s], ctxs[c], reps, bw);
    harness_close();
    return 0;
}
