/* A fixed pool of worker threads for data-parallel kernels. celer_pool_run calls fn once per
 * thread (the caller is thread 0) and returns when every call has returned. Workers spin for a
 * short while between jobs, because a decode step runs hundreds of small jobs per token, then
 * sleep on a condition variable. */
#ifndef CELER_CORE_THREADS_H
#define CELER_CORE_THREADS_H

#include "celer.h"

typedef struct celer_pool celer_pool;

typedef void (*celer_pool_fn)(void *ctx, int ith, int nth);

/* n_threads >= 1 (the caller counts as one). On failure *out is NULL. */
celer_status celer_pool_init(celer_pool **out, int n_threads, celer_error *err);
void         celer_pool_free(celer_pool *p);
int          celer_pool_size(const celer_pool *p);
/* Runs fn(ctx, ith, nth) for ith in [0, nth). Not reentrant: one job at a time per pool. */
void         celer_pool_run(celer_pool *p, celer_pool_fn fn, void *ctx);

/* The slice [*begin, *end) of n items that thread ith of nth takes. */
static inline void celer_pool_slice(int64_t n, int ith, int nth, int64_t *begin, int64_t *end)
{
    *begin = n * ith / nth;
    *end   = n * (ith + 1) / nth;
}

#endif
