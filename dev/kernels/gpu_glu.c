/* A feed-forward block's gate and up products and their GLU for one token through the GPU
 * backend's port matmul_glu: by default one launch (src/backends/gpu/gpu_matvec_glu.cu), with
 * CELER_GPU_GLU_FUSE=0 the gate and up products in one launch, then k_glu. The shapes issue
 * 10 measures — Llama-3.1-8B's 14336 x 4096 and Qwen3-0.6B's 3072 x 1024 — in Q4_0, Q8_0 and
 * Q4_K. For each: the check against the CPU (matmul, matmul, glu: relative L2 under 1e-2, the
 * CPU's 8-bit activations), the time of one call inside a replayed step graph (a call a copy of
 * the weights, as many copies as fill the L2 four times: cold weights, as a model's layers read
 * them) and the weights' bytes a second.
 *
 * Build against a GPU build (`scripts/gpu-check.sh kernels` with KERNELS=gpu_glu) and run both
 * ways: kernel_gpu_glu [REPS], CELER_GPU_GLU_FUSE=0 kernel_gpu_glu [REPS]. */
#define HARNESS_NAME "kernel_gpu_glu"
#include "gpu_harness.h"

#include "backends/ports.h"

#include <string.h>

#include "random_weights.h"

enum { MAX_COPIES = 64 };

static const double COLD_BYTES = 4.0 * 50e6; /* four times the H200's L2 */

static void run(celer_matmul_glu_fn fn, celer_ggml_type t, int64_t ff, int64_t d, int reps)
{
    const celer_ggml_type_info *ti    = celer_ggml_type_get(t);
    const double                bytes = 2.0 * (double)(ff * d / ti->block_elems) * ti->block_bytes; /* gate and up */
    int                         n     = (int)(COLD_BYTES / bytes) + 1;
    n                                 = n < 2 ? 2 : n > MAX_COPIES ? MAX_COPIES : n;
    void        *rg = random_weights(t, ff, d, 0.1f), *ru = random_weights(t, ff, d, 0.1f);
    float       *x = malloc((size_t)d * sizeof *x), *hc = malloc((size_t)ff * sizeof *hc);
    float       *uc = malloc((size_t)ff * sizeof *uc), *hg = malloc((size_t)ff * sizeof *hg);
    celer_weight wg[MAX_COPIES], wu[MAX_COPIES];
    if (!rg || !ru || !x || !hc || !uc || !hg) die("host memory");
    random_acts(x, 1, d);
    for (int c = 0; c < n; c++) {
        wg[c] = (celer_weight){.type = t, .rows = ff, .cols = d, .data = rg}, wu[c] = wg[c], wu[c].data = ru;
        if (gpu->ops->weight_load(gpu, &wg[c], &err) || gpu->ops->weight_load(gpu, &wu[c], &err)) die("weight_load");
    }
    celer_weight cg = {.type = t, .rows = ff, .cols = d, .data = rg}, cu = cg;
    cu.data         = ru;
    float *dx = dev_of(x, (size_t)d), *dh = dev_of(hc, (size_t)ff), *du = dev_of(hc, (size_t)ff);
    if (cpu->ops->weight_load(cpu, &cg, &err) || cpu->ops->weight_load(cpu, &cu, &err) ||
        cpu->ops->matmul(cpu, &cg, x, 1, hc, &err) || cpu->ops->matmul(cpu, &cu, x, 1, uc, &err) ||
        cpu->ops->glu(cpu, hc, uc, ff, CELER_ACT_SILU, &err) ||
        fn(gpu, &wg[0], &wu[0], dx, 1, CELER_ACT_SILU, dh, du, &err) ||
        gpu->ops->read(gpu, dh, hg, (size_t)ff * sizeof *hg, &err))
        die("check");
    const double e  = rel_l2(hg, hc, ff);
    double       t0 = 0;
    for (int pass = 0; pass < 2 + reps; pass++) { /* op by op, recorded, then replayed */
        if (pass == 2) sync_dev(dh), t0 = now();
        bool redo = false;
        if (gpu->ops->step_begin && gpu->ops->step_begin(gpu, 0x91u + (uint64_t)(ff * 7 + t), &err)) die("step_begin");
        for (int c = 0; c < n; c++)
            if (fn(gpu, &wg[c], &wu[c], dx, 1, CELER_ACT_SILU, dh, du, &err)) die("matmul_glu");
        if (gpu->ops->step_end && (gpu->ops->step_end(gpu, true, &redo, &err) || redo)) die("step_end");
    }
    sync_dev(dh);
    const double us = (now() - t0) / ((double)reps * n) * 1e6;
    printf("%-5s %5lld x %5lld  vs cpu %.1e%s | %7.2f us %6.0f GB/s (%d copies)\n", ti->name, (long long)ff,
           (long long)d, e, e < 1e-2 ? "" : " (FAILED)", us, bytes / us / 1e3, n);
    gpu->ops->release(gpu, dx), gpu->ops->release(gpu, dh), gpu->ops->release(gpu, du);
    free(rg), free(ru), free(x), free(hc), free(uc), free(hg);
}

int main(int argc, char **argv)
{
    const int     reps = harness_open(argc, argv, 20);
    celer_port_fn fn   = NULL;
    if (celer_port_select(&celer_port_matmul_glu, gpu->ops->kind, &fn, &err)) die("no matmul_glu port on this backend");
    const char *fuse = getenv("CELER_GPU_GLU_FUSE");
    printf("gate/up + GLU, one token, %s; %d steps\n",
           fuse && !strcmp(fuse, "0") ? "products, then glu (CELER_GPU_GLU_FUSE=0)" : "fused", reps);
    static const celer_ggml_type types[]     = {CELER_GGML_Q4_0, CELER_GGML_Q8_0, CELER_GGML_Q4_K};
    static const int64_t         shapes[][2] = {{14336, 4096}, {3072, 1024}}; /* Llama-3.1-8B's, Qwen3-0.6B's */
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            run((celer_matmul_glu_fn)fn, types[i], shapes[s][0], shapes[s][1], reps);
    harness_close();
    return 0;
}
