/* A trace build's matching of a replayed step's records to the launches it recorded
 * (backends/gpu/trace_match.h) without a GPU: records in any order are sorted by release and
 * summed into the launches' costs (release to the next release) and waits; a replay whose
 * records are not one a launch of the same shapes, in order, adds nothing. */
#include "backends/gpu/trace_match.h"

#include "check.h"

#include <string.h>

enum { N = 5 };

/* Launch i of a step: a grid of 10 i + 1 blocks of 64, the fourth of 128 threads. */
static void launches(celer_trace_launch *l)
{
    static const char *names[N] = {"rmsnorm", "matmul", "attention", "matmul", "glu"};
    for (int i = 0; i < N; i++)
        l[i] = (celer_trace_launch){names[i], {10u * (uint32_t)i + 1u, 1u, 1u}, i == 3 ? 128u : 64u, 0.0, 0.0};
}

/* One replay's records for those launches: launch i released at t0 + 1000 i + i² ns, after
 * waiting 100 + i ns; stored in a scrambled order (the device's order of atomics is not the
 * launches'). */
static void records(celer_trace_rec *r, uint64_t t0)
{
    static const int order[N] = {3, 0, 4, 1, 2};
    for (int k = 0; k < N; k++) {
        const int      i   = order[k];
        const uint64_t rel = t0 + 1000u * (uint64_t)i + (uint64_t)(i * i);
        r[k] = (celer_trace_rec){rel - 100u - (uint64_t)i, rel, {10u * (uint32_t)i + 1u, 1u, 1u}, i == 3 ? 128u : 64u};
    }
}

static int sums(void)
{
    celer_trace_launch l[N];
    celer_trace_rec    r[N];
    launches(l);
    records(r, 1000000);
    CHECK(celer_trace_add(r, N, l, N));
    records(r, 5000000); /* a second replay, later on the clock */
    CHECK(celer_trace_add(r, N, l, N));
    for (int i = 0; i + 1 < N; i++) {
        const double cost = 1000.0 + (double)((i + 1) * (i + 1) - i * i);
        CHECK(l[i].cost_ns == 2.0 * cost && l[i].wait_ns == 2.0 * (100.0 + i));
    }
    CHECK(l[N - 1].cost_ns == 0.0 && l[N - 1].wait_ns == 0.0); /* the last: no release after it */
    return 0;
}

/* Nothing is added from a replay that does not match, and it says so. */
static int mismatches(void)
{
    celer_trace_launch l[N], before[N];
    celer_trace_rec    r[N + 1];
    launches(l);
    memcpy(before, l, sizeof l);
    records(r, 0);
    r[2] = r[N - 1]; /* launch 4's record dropped: the others are a matching prefix */
    CHECK(!celer_trace_add(r, N - 1, l, N)); /* a record short (a launch stamped nothing) */
    records(r, 0);
    r[N] = r[0], r[N].release += 1;
    CHECK(!celer_trace_add(r, N + 1, l, N)); /* a record too many (a kernel that waited twice) */
    records(r, 0);
    r[2].block = 32; /* another kernel's shape where launch 2's was */
    CHECK(!celer_trace_add(r, N, l, N));
    records(r, 0);
    r[1].grid[1] = 2;
    CHECK(!celer_trace_add(r, N, l, N));
    CHECK(!celer_trace_add(r, 0, l, 0)); /* a step that recorded nothing */
    CHECK(!memcmp(before, l, sizeof l));
    return 0;
}

int main(void)
{
    if (sums() || mismatches()) return 1;
    printf("test_trace_match: passed\n");
    return 0;
}
