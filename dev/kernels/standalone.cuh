/* What the standalone CUDA harnesses of dev/kernels (gpu_readpat.cu, gpu_sqh.cu, gpu_sqr.cu and,
 * through mvq4.cuh, gpu_mvbulk.cu, gpu_mvnorm.cu and gpu_mvwait.cu) share: a checked runtime
 * call, a seeded generator of test values, a launch's time a repeat, and the sum of a product's
 * column parts. */
#ifndef CELER_DEV_KERNELS_STANDALONE_CUH
#define CELER_DEV_KERNELS_STANDALONE_CUH

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* A runtime call that must succeed: the harness stops with its name and the error. */
#define CHECK(x)                                                                                                    \
    do {                                                                                                            \
        cudaError_t e_ = (x);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                    \
            fprintf(stderr, "%s: %s: %s\n", __FILE__, #x, cudaGetErrorString(e_));                                  \
            exit(1);                                                                                                \
        }                                                                                                           \
    } while (0)

/* xorshift64: the same values on every run */
static uint64_t sa_rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void)
{
    sa_rng ^= sa_rng << 13, sa_rng ^= sa_rng >> 7, sa_rng ^= sa_rng << 17;
    return (uint32_t)(sa_rng >> 16);
}
static float uniform(void) { return (next_u32() & 0xffffff) / 16777216.0f; }
static float normal(void) { return sqrtf(-2.0f * logf(uniform() + 1e-7f)) * cosf(6.2831853f * uniform()); }

/* launch(r) for r = 0 .. reps - 1 between two events on the default stream: µs a repeat. */
template <typename L> static double sa_timed(int reps, L launch)
{
    cudaEvent_t a, b;
    float       ms = 0;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    CHECK(cudaEventRecord(a));
    for (int r = 0; r < reps; r++) launch(r);
    CHECK(cudaEventRecord(b));
    CHECK(cudaGetLastError());
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(&ms, a, b));
    CHECK(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(b));
    return ms * 1e3 / reps;
}

/* y (n values) = the sum of parts parts of n values each, in part order. */
__global__ void k_parts_sum(const float *__restrict__ part, int parts, int64_t n, float *__restrict__ y)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = part[i];
    for (int p = 1; p < parts; p++) s += part[p * n + i];
    y[i] = s;
}

#endif
