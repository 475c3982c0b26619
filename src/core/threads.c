#include "core/threads.h"

#include "core/error.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

enum { SPIN_ROUNDS = 1 << 16 };

struct celer_pool {
    int             n;            /* threads including the caller */
    pthread_t      *threads;      /* (n - 1) workers */
    _Atomic int     generation;   /* bumped once per job */
    _Atomic int     pending;      /* workers still running the current job */
    _Atomic int     sleepers;     /* workers waiting on the condition variable */
    _Atomic int     stop;
    celer_pool_fn   fn;
    void           *ctx;
    pthread_mutex_t mu;
    pthread_cond_t  wake;
};

typedef struct {
    celer_pool *p;
    int         ith;
} worker_arg;

static void *worker(void *arg)
{
    worker_arg  a    = *(worker_arg *)arg;
    celer_pool *p    = a.p;
    int         seen = 0;
    free(arg);
    for (;;) {
        int gen;
        int spins = 0;
        while ((gen = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
               !atomic_load_explicit(&p->stop, memory_order_acquire)) {
            if (++spins < SPIN_ROUNDS) continue;
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) return NULL;
        seen = gen;
        p->fn(p->ctx, a.ith, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
    }
}

celer_status celer_pool_init(celer_pool **out, int n_threads, celer_error *err)
{
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return celer_fail(err, CELER_ERR_INVALID, "threads: %d threads asked for; use 1 to 1024", n_threads);
    celer_pool *p = calloc(1, sizeof *p);
    if (!p) return celer_fail(err, CELER_ERR_OOM, "threads: out of memory");
    p->n       = n_threads;
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (!p->threads) {
        celer_pool_free(p);
        return celer_fail(err, CELER_ERR_OOM, "threads: out of memory");
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *a = malloc(sizeof *a);
        if (a) *a = (worker_arg){p, i};
        if (!a || pthread_create(&p->threads[i - 1], NULL, worker, a)) {
            free(a);
            p->n = i; /* only the started ones are joined */
            celer_pool_free(p);
            return celer_fail(err, CELER_ERR_OOM, "threads: cannot start thread %d of %d", i, n_threads);
        }
    }
    *out = p;
    return CELER_OK;
}

void celer_pool_free(celer_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i - 1], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p->threads);
    free(p);
}

int celer_pool_size(const celer_pool *p) { return p->n; }

void celer_pool_run(celer_pool *p, celer_pool_fn fn, void *ctx)
{
    if (p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn  = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    atomic_fetch_add(&p->generation, 1); /* seq_cst, paired with the sleepers count (Dekker) */
    if (atomic_load(&p->sleepers)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    fn(ctx, 0, p->n);
    while (atomic_load_explicit(&p->pending, memory_order_acquire)) {
    }
}
