/* Step graphs: a forward step's device work recorded once (stream capture) and replayed for
 * later steps of the same key, so that a decode step is one launch. The step's inputs (token
 * ids, positions, sequences, KV block tables) live in device buffers at fixed addresses that
 * the ops upload before the replay; a buffer that moves drops every graph.
 *
 * A key is recorded the second time it is seen (a one-off shape, such as a prefill chunk, is
 * not worth a capture); at most GRAPHS_MAX graphs are kept, the least recently used replaced. */
#include "backends/gpu/gpu_backend.h"

#include <stdlib.h>
#include <string.h>

enum { GRAPHS_MAX = 48 };

struct gpu_graph {
    uint64_t       key;
    int            seen;  /* steps of this key run op by op so far */
    bool           never; /* the step cannot be recorded */
    gpuGraphExec_t exec;  /* NULL until recorded */
    uint64_t       used;  /* g->clock when last begun */
    uint64_t       sig;   /* the recorded launches' signature (gpu_sign) */
    int            misses; /* replays refused for another signature since the last one replayed */
};

static void drop_exec(struct gpu_graph *e)
{
    if (e->exec) (void)gpuGraphExecDestroy(e->exec);
    e->exec = NULL;
}

void gpu_graphs_drop(gpu_backend *g)
{
    for (int i = 0; i < g->n_graphs; i++) drop_exec(&g->graphs[i]), g->graphs[i].seen = 0;
}

void gpu_graphs_free(gpu_backend *g)
{
    gpu_graphs_drop(g);
    free(g->graphs);
    g->graphs = NULL, g->n_graphs = 0;
    if (g->side) (void)gpuStreamDestroy(g->side);
    g->side = NULL;
}

/* The entry of key, made (or taken from the least recently used) when missing; NULL: no memory. */
static struct gpu_graph *entry(gpu_backend *g, uint64_t key)
{
    int lru = 0;
    for (int i = 0; i < g->n_graphs; i++) {
        if (g->graphs[i].key == key) return &g->graphs[i];
        if (g->graphs[i].used < g->graphs[lru].used) lru = i;
    }
    if (!g->graphs) {
        g->graphs = (struct gpu_graph *)calloc(GRAPHS_MAX, sizeof *g->graphs);
        if (!g->graphs) return NULL;
    }
    int i = g->n_graphs < GRAPHS_MAX ? g->n_graphs++ : lru;
    drop_exec(&g->graphs[i]);
    memset(&g->graphs[i], 0, sizeof g->graphs[i]);
    g->graphs[i].key = key;
    return &g->graphs[i];
}

void gpu_graph_break(gpu_backend *g, bool forever)
{
    if (g->rec == GPU_REC_EAGER) return;
    if (g->rec == GPU_REC_CAPTURE) { /* leave the capture: what it holds is dropped */
        gpuGraph_t graph = NULL;
        (void)gpuStreamEndCapture(g->stream, &graph);
        if (graph) (void)gpuGraphDestroy(graph);
        (void)gpuGetLastError();
    }
    g->rec = GPU_REC_BROKEN;
    if (g->cur >= 0) {
        struct gpu_graph *e = &g->graphs[g->cur];
        drop_exec(e);
        e->seen = 0;
        e->never |= forever;
    }
}

celer_status gpu_step_begin(celer_backend *be, uint64_t key, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    g->rec = GPU_REC_EAGER, g->cur = -1, g->sig = 0xcbf29ce484222325ull, g->in_step = true;
#if CELER_GPU_TRACE
    g->step_key = key;
#endif
    if (g->stats) {
        g->t_step = gpu_now_s();
        if (!g->free_first) gpu_note_memory(g), g->free_first = g->free_min; /* what the engine's creation took */
    }
    if (g->graphs_off || gpu_alive(g, err)) return g->failed ? err->code : CELER_OK;
    struct gpu_graph *e = entry(g, key);
    if (!e) return CELER_OK; /* no memory for the table: op by op */
    g->cur = (int)(e - g->graphs), e->used = ++g->clock;
    if (e->never) return CELER_OK;
    if (e->exec) {
        g->rec = GPU_REC_REPLAY;
        return CELER_OK;
    }
    if (++e->seen < 2) return CELER_OK;
    if (!g->side) GPU_TRY(g, err, gpuStreamCreateNonBlocking(&g->side), "creating the upload stream");
    if (gpu_sync(g, err)) return err->code; /* uploads during the capture land at once: nothing may read them */
    if (gpuStreamBeginCaptureRelaxed(g->stream) != gpuSuccess) {
        (void)gpuGetLastError();
        e->never = true; /* this runtime cannot capture: op by op */
        return CELER_OK;
    }
    g->rec = GPU_REC_CAPTURE;
#if CELER_GPU_TRACE
    if (g->trace) gpu_trace_recording(g);
#endif
    return CELER_OK;
}

celer_status gpu_step_end(celer_backend *be, bool ok, bool *redo, celer_error *err)
{
    gpu_backend *g   = gpu_of(be);
    int          rec = g->rec;
    *redo            = false;
    if (g->stats) { /* a replayed step that allocated nothing left the free memory as it was */
        g->walk_s[rec] += gpu_now_s() - g->t_step, g->steps[rec]++;
        if (rec != GPU_REC_REPLAY || g->allocs[0] != g->allocs_noted) gpu_note_memory(g);
    }
    g->rec           = GPU_REC_EAGER;
    g->in_step       = false;
    if (rec == GPU_REC_EAGER) return CELER_OK;
    if (rec == GPU_REC_BROKEN) {
        *redo = ok;
        return CELER_OK;
    }
    struct gpu_graph *e = &g->graphs[g->cur];
    if (rec == GPU_REC_CAPTURE) {
        gpuGraph_t graph = NULL;
        gpuError_t ec    = gpuStreamEndCapture(g->stream, &graph);
        gpuError_t ei    = ec == gpuSuccess && ok ? gpuGraphInstantiate(&e->exec, graph) : ec;
        if (graph) (void)gpuGraphDestroy(graph);
        if (ei != gpuSuccess) { /* not recordable after all: this step again, op by op from now on */
            (void)gpuGetLastError();
            e->exec = NULL, e->never = true;
            *redo   = ok;
            return CELER_OK;
        }
        e->sig = g->sig;
    } else if (g->sig != e->sig) { /* the step's launches are not the recorded ones: run it op by op */
        drop_exec(e);
        e->seen  = 0;
        e->never = ++e->misses >= 2; /* work that changes at every step is not worth recording */
        *redo    = ok;
        return CELER_OK;
    } else
        e->misses = 0; /* work that changes now and then (a longer context) is recorded again */
    if (!ok) return CELER_OK; /* the caller reports the op's error; the graph stays for later steps */
#if CELER_GPU_TRACE
    if (g->trace && rec == GPU_REC_REPLAY && gpu_trace_before(g, err)) return err->code;
#endif
    GPU_TRY(g, err, gpuGraphLaunch(e->exec, g->stream), "replaying a step");
#if CELER_GPU_TRACE
    if (g->trace && rec == GPU_REC_REPLAY && gpu_trace_after(g, err)) return err->code;
#endif
    return CELER_OK;
}

void gpu_stats_print(const gpu_backend *g)
{
    static const char *mode[4] = {"op by op", "recorded", "replayed", "broken"};
    fprintf(stderr, "celer: %s steps:", CELER_GPU_NAME);
    for (int m = 0; m < 4; m++)
        if (g->steps[m])
            fprintf(stderr, " %lld %s (host %.0f us each)", (long long)g->steps[m], mode[m],
                    1e6 * g->walk_s[m] / (double)g->steps[m]);
    fprintf(stderr, "; %lld device waits (%.0f us each)\n", (long long)g->waits,
            g->waits ? 1e6 * g->wait_s / (double)g->waits : 0.0);
    fprintf(stderr, "celer: %s device allocations: %lld (%lld inside steps, %lld inside replayed steps)\n",
            CELER_GPU_NAME, (long long)g->allocs[0], (long long)g->allocs[1], (long long)g->allocs[2]);
    const double   gib   = 1024.0 * 1024.0 * 1024.0, peak = (double)(g->free0 - g->free_min) / gib;
    const double   first = g->free_first ? (double)(g->free0 - g->free_first) / gib : peak;
    if (g->plan)
        fprintf(stderr, "celer: %s device memory: peak %.2f GiB (%.2f when the first step began), planned %.2f GiB "
                "(%+.1f%%)\n", CELER_GPU_NAME, peak, first, (double)g->plan / gib,
                100.0 * (peak * gib / (double)g->plan - 1.0));
    else
        fprintf(stderr, "celer: %s device memory: peak %.2f GiB (%.2f when the first step began)\n", CELER_GPU_NAME,
                peak, first);
}
