/* Weights asked of the L2 ahead of the product that reads them (celer_port_prefetch's hints,
 * gpu_l2_hint): a one-token product's blocks, as they finish, each ask for their share of the
 * next weights, so that those bytes move while the latency-bound kernels between (a layer's
 * attention inputs and attention, its norms) leave the memory idle. gpu_l2_prefetch_line
 * (gpu_vendor.h) asks without waiting on CUDA; HIP has no such instruction for gfx90a or gfx1030,
 * so there the hint asks for nothing. */
#ifndef CELER_BACKENDS_GPU_GPU_L2_CUH
#define CELER_BACKENDS_GPU_GPU_L2_CUH

#include "backends/gpu/gpu_backend.h"

enum { L2_LINE = 128 };

/* Share part of parts of every range of h, a line a thread at a time (thread tid of n). */
static __device__ __forceinline__ void gpu_l2_prefetch(const gpu_l2_hint &h, uint64_t part, uint64_t parts, int tid,
                                                       int n)
{
#pragma unroll
    for (int r = 0; r < GPU_L2_RANGES; r++) {
        const uint64_t lines = (h.n[r] + L2_LINE - 1) / L2_LINE, a = lines * part / parts, b = lines * (part + 1) / parts;
        for (uint64_t l = a + (uint64_t)tid; l < b; l += (uint64_t)n) gpu_l2_prefetch_line(h.p[r] + L2_LINE * l, h.last);
    }
}

#endif
