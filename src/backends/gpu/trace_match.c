#include "backends/gpu/trace_match.h"

#include <stdlib.h>

static int by_release(const void *a, const void *b)
{
    const uint64_t x = ((const celer_trace_rec *)a)->release, y = ((const celer_trace_rec *)b)->release;
    return x < y ? -1 : x > y;
}

static bool same_shape(const celer_trace_rec *r, const celer_trace_launch *l)
{
    return r->grid[0] == l->grid[0] && r->grid[1] == l->grid[1] && r->grid[2] == l->grid[2] && r->block == l->block;
}

bool celer_trace_add(celer_trace_rec *rec, int n, celer_trace_launch *l, int nl)
{
    if (n != nl || n <= 0) return false;
    qsort(rec, (size_t)n, sizeof *rec, by_release);
    for (int i = 0; i < n; i++)
        if (!same_shape(&rec[i], &l[i])) return false;
    for (int i = 0; i + 1 < n; i++) {
        l[i].cost_ns += (double)(rec[i + 1].release - rec[i].release);
        l[i].wait_ns += (double)(rec[i].release - rec[i].arrive);
    }
    return true;
}
