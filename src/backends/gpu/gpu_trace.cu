/* A trace build's timeline of replayed steps (cmake -DCELER_GPU_TRACE=ON, CUDA; CELER_GPU_TRACE=1 at
 * run time). The knockouts of dev/patches/knockout.diff bound what a kernel costs a decode step
 * by leaving it out; this measures it in place. Every kernel's block (0, 0, 0) stamps the global
 * timer where its dependency wait returns (gpu_vendor.h): the kernel before has then finished and
 * its writes are visible. In a replayed step, one kernel's release to the next one's is what the
 * first costs the step's critical path (its own work after the wait, the end of its last blocks,
 * the launch gap), and the stamp before the wait tells how early the kernel was in place.
 *
 * The launches a step records are noted in order with their grids (GPU_LAUNCH); a replay's
 * records, in the order of their release, are matched to them by grid and block size
 * (trace_match.c, tested on the host); a replay whose records do not match is left out and
 * counted. Means over the replays are printed per step graph (the most replayed first) when the
 * backend is freed, then summed by kernel name. */
#include "backends/gpu/gpu_backend.h"

#if CELER_GPU_TRACE

#include <stdlib.h>
#include <string.h>

enum { TRACE_FILES = 64, TRACE_CAP = 8192, TRACE_KEYS = 8 };

/* each source file's setter of its copy of the buffer's address (gpu_vendor.h) */
static void (*attach_fns[TRACE_FILES])(gpu_trace_buf *);
static int n_attach;

void gpu_trace_register(void (*attach)(gpu_trace_buf *buf))
{
    if (n_attach < TRACE_FILES) attach_fns[n_attach++] = attach;
}

typedef struct {
    uint64_t            key;
    celer_trace_launch *l; /* the recorded step's launches (backends/gpu/trace_match.h) */
    int                 n, cap;
    int64_t             replays, unmatched;
} trace_key;

struct gpu_trace {
    gpu_trace_buf   *dev;
    celer_trace_rec *host;
    trace_key        keys[TRACE_KEYS];
    int              n_keys;
};

celer_status gpu_trace_open(gpu_backend *g, celer_error *err)
{
    struct gpu_trace *t = (struct gpu_trace *)calloc(1, sizeof *t);
    if (!t) return celer_fail(err, CELER_ERR_OOM, "%s: no memory for the step trace", CELER_GPU_NAME);
    g->trace     = t;
    t->host      = (celer_trace_rec *)malloc(TRACE_CAP * sizeof *t->host);
    const size_t bytes = sizeof(gpu_trace_buf) + (TRACE_CAP - 1) * sizeof(celer_trace_rec);
    if (!t->host) return celer_fail(err, CELER_ERR_OOM, "%s: no memory for the step trace", CELER_GPU_NAME);
    GPU_TRY(g, err, cudaMalloc((void **)&t->dev, bytes), "allocating the step trace");
    const gpu_trace_buf head = {0, TRACE_CAP, {}};
    GPU_TRY(g, err, cudaMemcpy(t->dev, &head, sizeof head, cudaMemcpyHostToDevice), "clearing the step trace");
    for (int i = 0; i < n_attach; i++) attach_fns[i](t->dev);
    GPU_TRY(g, err, cudaGetLastError(), "pointing the kernels at the step trace");
    fprintf(stderr, "celer: %s step trace on (%d source files)\n", CELER_GPU_NAME, n_attach);
    return CELER_OK;
}

void gpu_trace_free(gpu_backend *g)
{
    struct gpu_trace *t = g->trace;
    if (!t) return;
    for (int i = 0; i < n_attach; i++) attach_fns[i](NULL);
    if (t->dev) (void)cudaFree(t->dev);
    for (int k = 0; k < t->n_keys; k++) free(t->keys[k].l);
    free(t->host), free(t);
    g->trace = NULL;
}

/* The entry of key (made when missing and there is room; NULL otherwise). */
static trace_key *key_of(struct gpu_trace *t, uint64_t key)
{
    for (int k = 0; k < t->n_keys; k++)
        if (t->keys[k].key == key) return &t->keys[k];
    if (t->n_keys == TRACE_KEYS) return NULL;
    trace_key *e = &t->keys[t->n_keys++];
    memset(e, 0, sizeof *e);
    e->key = key;
    return e;
}

void gpu_trace_recording(gpu_backend *g)
{
    trace_key *e = key_of(g->trace, g->step_key);
    if (e) e->n = 0, e->replays = 0, e->unmatched = 0;
}

void gpu_trace_note(gpu_backend *g, const char *name, dim3 grid, dim3 block)
{
    trace_key *e = key_of(g->trace, g->step_key);
    if (!e) return;
    if (e->n == e->cap) {
        const int           cap = e->cap ? 2 * e->cap : 256;
        celer_trace_launch *l   = (celer_trace_launch *)realloc(e->l, (size_t)cap * sizeof *l);
        if (!l) return;
        e->l = l, e->cap = cap;
    }
    e->l[e->n++] = (celer_trace_launch){name, {grid.x, grid.y, grid.z}, block.x, 0.0, 0.0};
}

celer_status gpu_trace_before(gpu_backend *g, celer_error *err)
{
    GPU_TRY(g, err, cudaMemsetAsync(&g->trace->dev->n, 0, sizeof(unsigned), g->stream), "clearing the step trace");
    return CELER_OK;
}

celer_status gpu_trace_after(gpu_backend *g, celer_error *err)
{
    struct gpu_trace *t = g->trace;
    trace_key        *e = key_of(t, g->step_key);
    unsigned          n = 0;
    if (!e || !e->n) return CELER_OK;
    GPU_TRY(g, err, cudaStreamSynchronize(g->stream), "reading the step trace");
    GPU_TRY(g, err, cudaMemcpy(&n, &t->dev->n, sizeof n, cudaMemcpyDeviceToHost), "reading the step trace");
    if (n > TRACE_CAP) n = TRACE_CAP;
    GPU_TRY(g, err, cudaMemcpy(t->host, t->dev->rec, n * sizeof *t->host, cudaMemcpyDeviceToHost),
            "reading the step trace");
    /* one record a launch, in the launches' order (kernels launched by a library, as cuBLAS's, stamp
     * nothing and are not noted either) */
    if (celer_trace_add(t->host, (int)n, e->l, e->n)) e->replays++;
    else e->unmatched++;
    return CELER_OK;
}

void gpu_trace_print(const gpu_backend *g)
{
    const struct gpu_trace *t = g->trace;
    if (!t) return;
    int order[TRACE_KEYS]; /* the graphs replayed most first */
    for (int k = 0; k < t->n_keys; k++) {
        int j = k;
        while (j > 0 && t->keys[order[j - 1]].replays < t->keys[k].replays) order[j] = order[j - 1], j--;
        order[j] = k;
    }
    for (int o = 0; o < t->n_keys; o++) {
        const trace_key *e = &t->keys[order[o]];
        if (!e->replays) {
            if (e->unmatched)
                fprintf(stderr, "celer: trace of step %016llx: %lld replays, none matched its %d launches\n",
                        (unsigned long long)e->key, (long long)e->unmatched, e->n);
            continue;
        }
        const double r = (double)e->replays;
        double       total = 0.0;
        fprintf(stderr,
                "celer: trace of step %016llx: %lld replays (%lld unmatched), %d launches; us from a kernel's "
                "release to the next one's, and how long its first block waited to be released\n",
                (unsigned long long)e->key, (long long)e->replays, (long long)e->unmatched, e->n);
        fprintf(stderr, "  %5s  %-24s %-18s %9s %9s\n", "#", "kernel", "grid x block", "cost us", "wait us");
        for (int i = 0; i + 1 < e->n; i++) {
            const celer_trace_launch *l = &e->l[i];
            char                      shape[40];
            snprintf(shape, sizeof shape, "%ux%ux%u x %u", l->grid[0], l->grid[1], l->grid[2], l->block);
            fprintf(stderr, "  %5d  %-24s %-18s %9.2f %9.2f\n", i, l->name, shape, l->cost_ns / r * 1e-3,
                    l->wait_ns / r * 1e-3);
            total += l->cost_ns / r * 1e-3;
        }
        fprintf(stderr, "  by kernel (first release to last: %.1f us):\n", total);
        for (int i = 0; i + 1 < e->n; i++) { /* each name once, at its first launch */
            int    j = 0, calls = 0;
            double sum = 0.0;
            while (j < i && strcmp(e->l[j].name, e->l[i].name)) j++;
            if (j < i) continue;
            for (j = i; j + 1 < e->n; j++)
                if (!strcmp(e->l[j].name, e->l[i].name)) calls++, sum += e->l[j].cost_ns / r * 1e-3;
            fprintf(stderr, "  %-24s %5d calls %9.1f us %5.1f%%\n", e->l[i].name, calls, sum,
                    total > 0.0 ? 100.0 * sum / total : 0.0);
        }
    }
}

#endif
