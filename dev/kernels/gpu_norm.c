/* The GPU backend's RMSNorm (src/backends/gpu/gpu_norm.cu) through the backend's own ops: the
 * rmsnorm op and the add_rmsnorm port (the residual add fused in front of it) for the row
 * widths of the models issue 10 measures — 128 (Qwen3's per-head q/k norms), 1024 (Qwen3-0.6B),
 * 2048 (Qwen3-30B-A3B), 4096 (Llama-3.1-8B), 640 (Gemma 3 270M: not a whole number of 64-lane
 * blocks) — and a decode step's rows (1, or 32 at the per-head width), a batch's (32) and a
 * prefill's (512). For each case: the check against the CPU backend (relative L2 under 1e-5:
 * both sum in f32), the time of one call inside a replayed step graph (CALLS calls a step, as a
 * decode step's layers issue them back to back) and the bytes it moves a second (x and w read,
 * h written; add_rmsnorm also reads o and writes x).
 *
 * Build against a GPU build (see README.md; `scripts/gpu-check.sh kernels` with KERNELS=gpu_norm)
 * and run: kernel_gpu_norm [REPS]. CELER_TEST_BACKEND=cpu checks the harness against the CPU
 * itself (0 error; the CPU backend records no steps, so its times are op by op). */
#define HARNESS_NAME "kernel_gpu_norm"
#include "gpu_harness.h"

#include "backends/ports.h"

#include <string.h>

#include "random_weights.h"

enum { CALLS = 32 };

static const float EPS = 1e-6f;

/* Mean microseconds of one call, CALLS calls a step, the step recorded once and replayed reps
 * times (fused: add_rmsnorm, else rmsnorm). */
static double time_us(celer_add_rmsnorm_fn fused, float *dx, float *dob, const celer_weight *w, int64_t rows,
                      int64_t d, float *dh, int reps, uint64_t key)
{
    double t0 = 0;
    for (int pass = 0; pass < 2 + reps; pass++) { /* op by op, recorded, then replayed */
        if (pass == 2) sync_dev(dh), t0 = now();
        bool redo = false;
        if (gpu->ops->step_begin && gpu->ops->step_begin(gpu, key, &err)) die("step_begin");
        for (int c = 0; c < CALLS; c++) {
            celer_status st = fused ? fused(gpu, dx, dob, w, rows, d, EPS, dh, &err)
                                    : gpu->ops->rmsnorm(gpu, dx, w, rows, d, EPS, dh, &err);
            if (st) die("norm");
        }
        if (gpu->ops->step_end && (gpu->ops->step_end(gpu, true, &redo, &err) || redo)) die("step_end");
    }
    sync_dev(dh);
    return (now() - t0) / ((double)reps * CALLS) * 1e6;
}

static void run(int64_t rows, int64_t d, celer_add_rmsnorm_fn fused, int reps)
{
    const int64_t n = rows * d;
    float        *x = malloc((size_t)n * sizeof *x), *o = malloc((size_t)n * sizeof *o);
    float        *wv = malloc((size_t)d * sizeof *wv), *hc = malloc((size_t)n * sizeof *hc);
    float        *hg = malloc((size_t)n * sizeof *hg), *xg = malloc((size_t)n * sizeof *xg);
    if (!x || !o || !wv || !hc || !hg || !xg) die("host memory");
    random_acts(x, rows, d);
    random_acts(o, rows, d);
    for (int64_t i = 0; i < d; i++) wv[i] = 0.5f + (float)(i % 7) * 0.1f;
    celer_weight wc = {.type = CELER_GGML_F32, .rows = 1, .cols = d, .data = wv}, wg = wc;
    if (gpu->ops->weight_load(gpu, &wg, &err)) die("weight_load");
    float *dx = dev_of(x, (size_t)n), *dob = dev_of(o, (size_t)n), *dh = dev_of(x, (size_t)n);
    /* rmsnorm */
    if (cpu->ops->rmsnorm(cpu, x, &wc, rows, d, EPS, hc, &err) ||
        gpu->ops->rmsnorm(gpu, dx, &wg, rows, d, EPS, dh, &err) ||
        gpu->ops->read(gpu, dh, hg, (size_t)n * sizeof *hg, &err))
        die("rmsnorm check");
    const double e1 = rel_l2(hg, hc, n);
    const double t1 = time_us(NULL, dx, dob, &wg, rows, d, dh, reps, 0xa0a0 + (uint64_t)(rows * 131 + d));
    const double b1 = (double)(2 * n + d) * sizeof(float);
    printf("rmsnorm      %4lld x %5lld  vs cpu %.1e%s | %7.2f us %6.0f GB/s\n", (long long)rows, (long long)d, e1,
           e1 < 1e-5 ? "" : " (FAILED)", t1, b1 / t1 / 1e3);
    /* add_rmsnorm: checked once from the same x, then timed (x grows by o each call: the time
     * does not depend on the values) */
    double e2 = 0, t2 = 0;
    if (fused) {
        if (cpu->ops->add(cpu, x, o, n, &err) || cpu->ops->rmsnorm(cpu, x, &wc, rows, d, EPS, hc, &err) ||
            fused(gpu, dx, dob, &wg, rows, d, EPS, dh, &err) ||
            gpu->ops->read(gpu, dh, hg, (size_t)n * sizeof *hg, &err) ||
            gpu->ops->read(gpu, dx, xg, (size_t)n * sizeof *xg, &err))
            die("add_rmsnorm check");
        e2 = fmax(rel_l2(hg, hc, n), rel_l2(xg, x, n));
        t2 = time_us(fused, dx, dob, &wg, rows, d, dh, reps, 0xb0b0 + (uint64_t)(rows * 131 + d));
        const double b2 = (double)(4 * n + d) * sizeof(float);
        printf("add_rmsnorm  %4lld x %5lld  vs cpu %.1e%s | %7.2f us %6.0f GB/s\n", (long long)rows, (long long)d, e2,
               e2 < 1e-5 ? "" : " (FAILED)", t2, b2 / t2 / 1e3);
    }
    gpu->ops->release(gpu, dx), gpu->ops->release(gpu, dob), gpu->ops->release(gpu, dh);
    free(x), free(o), free(wv), free(hc), free(hg), free(xg);
}

int main(int argc, char **argv)
{
    const int     reps = harness_open(argc, argv, 20);
    celer_port_fn fn    = NULL;
    celer_error   none  = {0};
    const bool    fused = !celer_port_select(&celer_port_add_rmsnorm, gpu->ops->kind, &fn, &none);
    printf("RMSNorm, %d calls a replayed step, %d steps; add_rmsnorm %s\n", CALLS, reps,
           fused ? "fused on this backend" : "not fused here (its fallback is add + rmsnorm)");
    static const int64_t ds[] = {128, 640, 1024, 2048, 4096};
    static const int64_t rs[] = {1, 32, 512};
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++)
        for (size_t j = 0; j < sizeof rs / sizeof rs[0]; j++)
            run(rs[j], ds[i], fused ? (celer_add_rmsnorm_fn)fn : NULL, reps);
    harness_close();
    return 0;
}
