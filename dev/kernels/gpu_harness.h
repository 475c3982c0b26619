/* What the GPU kernel harnesses share (gpu_matmul.c, gpu_attention.c, gpu_flash.c, gpu_moe.c,
 * gpu_norm.c): the two backends, the error they report, a clock, the device's copy bandwidth,
 * device copies of host values and a relative error. Define
 * HARNESS_NAME (the binary's name, for messages) before including. */
#ifndef CELER_DEV_KERNELS_GPU_HARNESS_H
#define CELER_DEV_KERNELS_GPU_HARNESS_H

#include "backends/backend.h"
#include "core/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static celer_backend *gpu, *cpu;
static celer_error    err;

static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline void die(const char *what)
{
    fprintf(stderr, HARNESS_NAME ": %s: %s\n", what, err.msg);
    exit(1);
}

/* The CPU backend and the GPU one (CELER_TEST_BACKEND names another: cpu checks the harness),
 * stdout a line at a time (even into a pipe); the repeats argv[1] asks for (at least 1), else
 * reps. */
static inline int harness_open(int argc, char **argv, int reps)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    celer_backend_config cfg = {0};
    if (celer_backend_create(&cpu, "cpu", &cfg, &err)) die("cpu");
    if (celer_backend_create(&gpu, getenv("CELER_TEST_BACKEND") ? getenv("CELER_TEST_BACKEND") : "cuda", &cfg, &err))
        die("gpu");
    reps = argc > 1 ? atoi(argv[1]) : reps;
    return reps < 1 ? 1 : reps;
}

static inline void harness_close(void)
{
    celer_backend_destroy(gpu);
    celer_backend_destroy(cpu);
}

/* Waits for the device: a read synchronizes. */
static inline void sync_dev(const void *p)
{
    float probe;
    if (gpu->ops->read(gpu, p, &probe, sizeof probe, &err)) die("read");
}

/* The device's copy bandwidth, bytes read + written per second: best of 6 copies of 1 GiB. */
static inline double copy_bandwidth(void)
{
    size_t bytes = (size_t)1 << 30;
    void  *a, *b;
    if (gpu->ops->alloc(gpu, bytes, &a, &err) || gpu->ops->alloc(gpu, bytes, &b, &err)) die("alloc");
    double best = 0;
    for (int r = 0; r < 6; r++) {
        double t0 = now();
        if (gpu->ops->copy(gpu, r % 2 ? a : b, r % 2 ? b : a, bytes, &err)) die("copy");
        sync_dev(a);
        double bw = 2.0 * (double)bytes / (now() - t0);
        best      = bw > best ? bw : best;
    }
    gpu->ops->release(gpu, a), gpu->ops->release(gpu, b);
    return best;
}

/* n floats of h in fresh device memory. */
static inline void *dev_of(const float *h, size_t n)
{
    void *d;
    if (gpu->ops->alloc(gpu, n * sizeof(float), &d, &err) || gpu->ops->write(gpu, d, h, n * sizeof(float), &err))
        die("alloc");
    return d;
}

/* |a - b| / |b| over n values (|a - b| where b is all zeros). */
static inline double rel_l2(const float *a, const float *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) num += (a[i] - b[i]) * (a[i] - b[i]), den += (double)b[i] * b[i];
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

#endif
