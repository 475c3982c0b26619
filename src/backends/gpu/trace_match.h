/* A trace build's step timeline (gpu_trace.cu, cmake -DCELER_GPU_TRACE=ON): one replayed step's
 * records matched to the launches the step recorded, and added to their sums. Plain C, no GPU
 * headers: tested on any host (tests/test_trace_match.c). */
#ifndef CELER_BACKENDS_GPU_TRACE_MATCH_H
#define CELER_BACKENDS_GPU_TRACE_MATCH_H

#include <stdbool.h>
#include <stdint.h>

/* What thread 0 of a kernel's block (0, 0, 0) stamps at its dependency wait (gpu_vendor.h's
 * gpu_dep_enter): the global timer (ns) as it arrives and as the wait returns, and the kernel's
 * grid and block sizes. */
typedef struct {
    uint64_t arrive, release;
    uint32_t grid[3], block;
} celer_trace_rec;

/* A launch of the recorded step, in order, and its sums over the replays matched so far: ns from
 * its release to the next launch's (the step's last launch: none), and ns its first block waited. */
typedef struct {
    const char *name;
    uint32_t    grid[3], block;
    double      cost_ns, wait_ns;
} celer_trace_launch;

/* One replay's n records (in any order: sorted here by release) added to the nl launches' sums
 * when they are one a launch, matching the launches' grids and blocks in order; false, and
 * nothing added, when they are not (a launch of another shape, a record too many or too few). */
bool celer_trace_add(celer_trace_rec *rec, int n, celer_trace_launch *l, int nl);

#endif
