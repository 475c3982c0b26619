/* The GPU backend's host side: device selection, the stream, device memory, transfers, the
 * watchdog, and the ops table. Kernels are in the other .cu files of this directory. */
#include "backends/gpu/gpu_backend.h"
#include "backends/gpu/gpu_blas.h"
#include "backends/gpu/gpu_mmq.h"

extern "C" {
#include "backends/gpu/att_split.h"
#include "backends/gpu/gpu_device.h"
}

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- errors ---------------------------------------------------------------- */

const char *gpu_error_words(gpuError_t e, char *buf, size_t n)
{
    const char *str = gpuGetErrorString(e), *name = gpuGetErrorName(e);
    if (!strcmp(str, name)) snprintf(buf, n, "%s", name);
    else snprintf(buf, n, "%s (%s)", str, name);
    return buf;
}

celer_status gpu_fail(gpu_backend *g, celer_error *err, gpuError_t e, const char *what)
{
    char words[160];
    return gpu_fail_with(g, err, e == gpuErrorMemoryAllocation, what, gpu_error_words(e, words, sizeof words));
}

celer_status gpu_fail_with(gpu_backend *g, celer_error *err, bool oom, const char *what, const char *words)
{
    if (!g->failed && !oom) { /* an out-of-memory leaves the device usable; anything else does not */
        g->failed = true;
        snprintf(g->failure, sizeof g->failure, "%s: %s", what, words);
    }
    return celer_fail(err, oom ? CELER_ERR_OOM : CELER_ERR_DEVICE, "%s: %s failed: %s%s", CELER_GPU_NAME, what, words,
                      oom ? "" : "; the device is marked failed");
}

celer_status gpu_alive(gpu_backend *g, celer_error *err)
{
    if (!g->failed) return CELER_OK;
    return celer_fail(err, CELER_ERR_DEVICE, "%s: the device failed earlier (%s); restart celer", CELER_GPU_NAME,
                      g->failure);
}

double gpu_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Polls the stream (or, with ev, that event) until done or the deadline passes (a hung kernel
 * fails the device instead of hanging the request forever): spinning for the first SPIN_S
 * seconds, which covers a decode step (a sleep there overshoots by tens of microseconds on a step
 * of a few milliseconds), then short sleeps. */
static celer_status gpu_wait(gpu_backend *g, gpuEvent_t ev, celer_error *err)
{
    enum { SPIN_CHECK = 64 };
    static const double SPIN_S = 0.05;
    if (gpu_alive(g, err)) return err->code;
    const double t0    = gpu_now_s();
    bool         naps = false; /* past SPIN_S: a nap between polls */
    for (int spin = 1;; spin++) {
        gpuError_t e = ev ? gpuEventQuery(ev) : gpuStreamQuery(g->stream);
        if (e == gpuSuccess) break;
        if (e != gpuErrorNotReady) return gpu_fail(g, err, e, "a kernel");
        if (!naps && spin % SPIN_CHECK) continue;
        const double t = gpu_now_s();
        if (t - t0 > g->timeout_s) {
            g->failed = true;
            snprintf(g->failure, sizeof g->failure, "a step did not finish within %g s (watchdog)", g->timeout_s);
            return celer_fail(err, CELER_ERR_DEVICE, "%s: %s; the device is marked failed", CELER_GPU_NAME, g->failure);
        }
        naps = t - t0 > SPIN_S;
        if (naps) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
    if (g->stats) g->wait_s += gpu_now_s() - t0, g->waits++;
    return CELER_OK;
}

celer_status gpu_sync(gpu_backend *g, celer_error *err) { return gpu_wait(g, NULL, err); }
celer_status gpu_sync_event(gpu_backend *g, gpuEvent_t ev, celer_error *err) { return gpu_wait(g, ev, err); }

celer_status gpu_grid(gpu_backend *g, int64_t n, int64_t per, unsigned *blocks, const char *kernel, celer_error *err)
{
    (void)g;
    int64_t nb = (n + per - 1) / per;
    if (nb > GPU_MAX_GRID_X)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: %s over %lld items needs %lld blocks, past the grid's limit",
                          CELER_GPU_NAME, kernel, (long long)n, (long long)nb);
    *blocks = (unsigned)(nb > 0 ? nb : 1);
    return CELER_OK;
}

celer_status gpu_kv_check(const celer_kv_cache *kv, const celer_batch *b, bool visible, celer_error *err)
{
    int32_t last = -1, upto = -1; /* blocks 0 .. upto of sequence last are checked (a prefill's tokens follow
                                   * each other: each block is checked once) */
    for (int64_t t = 0; t < b->n_tokens; t++) {
        int32_t s = b->seq[t], p = b->pos[t];
        if (s < 0 || s >= kv->n_seqs || p < 0 || p / kv->block_size >= kv->max_blocks)
            return celer_fail(err, CELER_ERR_INVALID, "%s: sequence %d position %d is outside the KV cache",
                              CELER_GPU_NAME, s, p);
        const int32_t *table = kv->tables + (int64_t)s * kv->max_blocks;
        int32_t        kb = p / kv->block_size, from = !visible ? kb : s == last ? upto + 1 : 0;
        for (int32_t k = from; k <= kb; k++)
            if (table[k] < 0)
                return celer_fail(err, CELER_ERR_INVALID, "%s: no KV block for sequence %d position %d", CELER_GPU_NAME,
                                  s, visible ? k * kv->block_size : p);
        if (visible && (s != last || kb > upto)) last = s, upto = kb;
    }
    return CELER_OK;
}

/* ---- memory ---------------------------------------------------------------- */

static celer_status gpu_alloc(celer_backend *be, size_t bytes, void **out, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    *out           = NULL;
    if (gpu_alive(g, err)) return err->code;
    if (g->rec == GPU_REC_CAPTURE) gpu_graph_break(g, false); /* its zeroing below must not be recorded */
    gpu_count_alloc(g);
    gpuError_t e = gpuMalloc(out, bytes ? bytes : 1);
    if (e != gpuSuccess) {
        size_t free_b = 0, total_b = 0;
        (void)gpuGetLastError();
        (void)gpuMemGetInfo(&free_b, &total_b);
        return celer_fail(err, CELER_ERR_OOM, "%s: cannot allocate %.1f MiB of device memory (%.1f MiB free of %.1f)",
                          CELER_GPU_NAME, (double)bytes / 1048576.0, (double)free_b / 1048576.0,
                          (double)total_b / 1048576.0);
    }
    /* fresh memory is zeroed, as the CPU's calloc: a KV block never holds another run's values */
    gpu_forget_acts(g); /* it may be where the quantized activations' source was */
    GPU_TRY(g, err, gpuMemsetAsync(*out, 0, bytes, g->stream), "memset");
    return CELER_OK;
}

static int gpu_kv_elem_bytes(celer_backend *be) { return gpu_of(be)->kv_f16 ? 2 : (int)sizeof(float); }
static uint64_t gpu_own_scratch(celer_backend *be, int64_t tokens, int64_t cols)
{
    return gpu_blas_scratch(gpu_of(be), tokens, cols);
}
static void gpu_note_plan(celer_backend *be, uint64_t bytes) { gpu_of(be)->plan = bytes; }

static void gpu_release(celer_backend *be, void *p)
{
    (void)be;
    if (p) (void)gpuFree(p);
}

celer_status gpu_allow_smem(gpu_backend *g, const void *fn, size_t bytes, celer_error *err)
{
    if (bytes <= 48 * 1024) return CELER_OK;
    for (int i = 0; i < g->n_smem_fns; i++)
        if (g->smem_fns[i] == fn) return CELER_OK;
    GPU_TRY(g, err, gpuFuncSetMaxDynamicShared(fn, (int)bytes), "raising a kernel's shared memory");
    if (g->n_smem_fns < GPU_SMEM_FNS) g->smem_fns[g->n_smem_fns++] = fn;
    return CELER_OK;
}

celer_status gpu_buf_reserve(gpu_backend *g, gpu_buf *b, size_t bytes, celer_error *err)
{
    if (b->bytes >= bytes) return CELER_OK;
    if (b->p) { /* it moves: the graphs recorded with it go, and so does the step being recorded */
        gpu_graph_break(g, false);
        gpu_graphs_drop(g);
        if (gpu_sync(g, err)) return err->code; /* the old buffer may still be read */
        (void)gpuFree(b->p);
    }
    b->p = NULL, b->bytes = 0;
    size_t want = bytes < 4096 ? 4096 : bytes + bytes / 4;
    if (gpu_alloc(&g->base, want, &b->p, err)) return err->code;
    b->bytes = want;
    return CELER_OK;
}

celer_status gpu_host_stage(gpu_backend *g, size_t bytes, void **out, celer_error *err)
{
    if (g->host_stage_bytes < bytes) {
        free(g->host_stage);
        g->host_stage       = malloc(bytes);
        g->host_stage_bytes = g->host_stage ? bytes : 0;
        if (!g->host_stage) return celer_fail(err, CELER_ERR_OOM, "%s: out of host memory", CELER_GPU_NAME);
    }
    *out = g->host_stage;
    return CELER_OK;
}

enum { UP_HALF = 64 << 10 }; /* a half of the upload ring: many steps' positions and tables */

/* Space for n bytes in the pinned ring into *out, or NULL where the ring cannot take them (too
 * large, or no pinned memory: the caller copies from pageable memory). A copy from pageable
 * memory waits for the work queued before it, so a step queued behind a running one (the
 * engine's decode ahead) would wait for it; from the ring, the copy is queued and the call
 * returns. */
static celer_status up_space(gpu_backend *g, size_t n, char **out, celer_error *err)
{
    *out = NULL;
    n    = (n + 15) / 16 * 16;
    if (n > UP_HALF) return CELER_OK;
    if (!g->up_ring) {
        for (int h = 0; h < 2; h++)
            if (!g->up_ev[h]) GPU_TRY(g, err, gpuEventCreate(&g->up_ev[h]), "an event for uploads");
        if (gpuHostAlloc((void **)&g->up_ring, 2 * UP_HALF) != gpuSuccess) {
            (void)gpuGetLastError();
            g->up_ring = NULL;
            return CELER_OK;
        }
    }
    if (g->up_head + n > UP_HALF) { /* this half's copies are queued: the other half, once its are done */
        GPU_TRY(g, err, gpuEventRecord(g->up_ev[g->up_half], g->stream), "an event for uploads");
        g->up_queued[g->up_half] = true;
        g->up_half ^= 1, g->up_head = 0;
        if (g->up_queued[g->up_half] && gpu_sync_event(g, g->up_ev[g->up_half], err)) return err->code;
        g->up_queued[g->up_half] = false;
    }
    *out = g->up_ring + (size_t)g->up_half * UP_HALF + g->up_head;
    g->up_head += n;
    return CELER_OK;
}

/* The call returns once the source has been taken, so the caller may reuse it at once. While a
 * step is being recorded the copy is made at once on the side stream (a step's inputs are
 * uploaded before its graph runs, never recorded in it). */
celer_status gpu_upload(gpu_backend *g, void *dst, const void *src, size_t n, celer_error *err)
{
    if (!n) return CELER_OK;
    gpu_forget_acts(g); /* it may land on the quantized activations' source */
    if (g->rec == GPU_REC_CAPTURE) {
        GPU_TRY(g, err, gpuMemcpyAsync(dst, src, n, gpuMemcpyHostToDevice, g->side), "host-to-device copy");
        GPU_TRY(g, err, gpuStreamSynchronize(g->side), "host-to-device copy");
        return CELER_OK;
    }
    char *pin;
    if (up_space(g, n, &pin, err)) return err->code;
    if (pin) src = memcpy(pin, src, n);
    GPU_TRY(g, err, gpuMemcpyAsync(dst, src, n, gpuMemcpyHostToDevice, g->stream), "host-to-device copy");
    return CELER_OK;
}

static celer_status gpu_read(celer_backend *be, const void *src, void *dst, size_t n, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (g->rec != GPU_REC_EAGER) { /* mid-step: the values do not exist yet; this step cannot be recorded */
        gpu_graph_break(g, true);
        memset(dst, 0, n);
        return CELER_OK;
    }
    /* the work before the read finishes under the watchdog: a copy into pageable memory would
     * wait for it inside the runtime, past any deadline */
    if (gpu_sync(g, err)) return err->code;
    GPU_TRY(g, err, gpuMemcpyAsync(dst, src, n, gpuMemcpyDeviceToHost, g->stream), "device-to-host copy");
    return gpu_sync(g, err);
}

static celer_status gpu_write(celer_backend *be, void *dst, const void *src, size_t n, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    return gpu_upload(g, dst, src, n, err);
}

static celer_status gpu_copy(celer_backend *be, void *dst, const void *src, size_t n, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_signing(g)) gpu_sign(g, NULL, dim3(1), dim3(1), n, gpu_sig_args(0, dst, src));
    gpu_forget_acts(g); /* the copy may land on the quantized activations' source */
    if (gpu_alive(g, err) || gpu_skip(g)) return g->failed ? err->code : CELER_OK;
    GPU_TRY(g, err, gpuMemcpyAsync(dst, src, n, gpuMemcpyDeviceToDevice, g->stream), "device-to-device copy");
    return CELER_OK;
}

void gpu_note_memory(gpu_backend *g)
{
    size_t free_b = 0, total_b = 0;
    if (gpuMemGetInfo(&free_b, &total_b) != gpuSuccess) {
        (void)gpuGetLastError();
        return;
    }
    if (free_b < g->free_min) g->free_min = free_b;
    g->allocs_noted = g->allocs[0];
}

static celer_status gpu_memory(celer_backend *be, uint64_t *free_b, uint64_t *total_b, celer_error *err)
{
    gpu_backend       *g = gpu_of(be);
    celer_device_facts f;
    if (gpu_alive(g, err) || celer_gpu_device_facts(g->device, &f, err)) return err->code;
    *free_b = f.mem_allocatable, *total_b = f.mem_total;
    return CELER_OK;
}

/* ---- the batch on the device ------------------------------------------------- */

/* Uploads n values of h to d when they differ from the shadow copy (grown as needed). */
static celer_status mirror(gpu_backend *g, gpu_buf *d, int32_t **shadow, int64_t *shadow_n, const int32_t *h,
                           int64_t n, celer_error *err)
{
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(int32_t);
    if (*shadow && *shadow_n == n && d->bytes >= bytes && !memcmp(*shadow, h, (size_t)n * sizeof *h)) return CELER_OK;
    if (d->bytes < bytes) {
        free(*shadow);
        *shadow = NULL, *shadow_n = 0;
        if (gpu_buf_reserve(g, d, bytes, err)) return err->code;
    }
    int32_t *s = (int32_t *)realloc(*shadow, bytes);
    if (!s) return celer_fail(err, CELER_ERR_OOM, "%s: out of host memory", CELER_GPU_NAME);
    memcpy(s, h, (size_t)n * sizeof *h);
    *shadow = s, *shadow_n = n;
    return gpu_upload(g, d->p, h, (size_t)n * sizeof *h, err);
}

celer_status gpu_batch_upload(gpu_backend *g, const celer_batch *b, const celer_kv_cache *kv, const int32_t **pos,
                              const int32_t **seq, const int32_t **tables, celer_error *err)
{
    if (mirror(g, &g->d_pos, &g->h_pos, &g->h_pos_n, b->pos, b->n_tokens, err) ||
        mirror(g, &g->d_seq, &g->h_seq, &g->h_seq_n, b->seq, b->n_tokens, err))
        return err->code;
    if (kv && mirror(g, &g->d_tables, &g->h_tables, &g->h_tables_n, kv->tables, (int64_t)kv->n_seqs * kv->max_blocks,
                     err))
        return err->code;
    *pos = (const int32_t *)g->d_pos.p, *seq = (const int32_t *)g->d_seq.p;
    if (tables) *tables = (const int32_t *)g->d_tables.p;
    return CELER_OK;
}

/* ---- the backend ---------------------------------------------------------------- */

static int gpu_n_threads(celer_backend *be)
{
    (void)be;
    return 1; /* host threads: the device does the work */
}

static void gpu_free(celer_backend *be)
{
    gpu_backend *g = gpu_of(be);
    if (!g) return;
    if (g->stream) (void)gpuStreamSynchronize(g->stream);
    if (g->stats) gpu_stats_print(g);
#if CELER_GPU_TRACE
    gpu_trace_print(g);
    gpu_trace_free(g);
#endif
    gpu_graphs_free(g);
    gpu_buf *bufs[] = {&g->d_pos,  &g->d_seq,  &g->d_tables,    &g->d_ids,   &g->d_draw,
                       &g->d_xq,   &g->d_xq2,  &g->d_part,      &g->d_attn,      &g->d_att_count,
                       &g->d_route, &g->d_norm_count, &g->d_keep};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) gpu_release(be, bufs[i]->p);
    for (size_t i = 0; i < sizeof g->moe / sizeof g->moe[0]; i++) gpu_release(be, g->moe[i].p);
    for (int i = 0; i < g->n_freq; i++) gpu_release(be, g->freq[i].dev);
    gpu_blas_free(g); /* before the stream its handle is bound to */
    gpu_weights_free(g);
    if (g->up_ring) (void)gpuFreeHost(g->up_ring);
    for (int h = 0; h < 2; h++)
        if (g->up_ev[h]) (void)gpuEventDestroy(g->up_ev[h]);
    if (g->stream) (void)gpuStreamDestroy(g->stream);
    free(g->h_pos), free(g->h_seq), free(g->h_tables), free(g->host_stage);
    if (g->h_keep) (void)gpuFreeHost(g->h_keep);
    for (int i = 0; i < 2; i++)
        if (g->keep_ev[i]) (void)gpuEventDestroy(g->keep_ev[i]);
    free(g);
}

static const celer_backend_ops gpu_ops = {
    .name          = CELER_GPU_NAME,
    .kind          = CELER_GPU_KIND,
    .free          = gpu_free,
    .n_threads     = gpu_n_threads,
    .alloc         = gpu_alloc,
    .release       = gpu_release,
    .weight_load   = gpu_weight_load,
    .weight_view   = gpu_weight_view,
    .argmax        = gpu_argmax,
    .sample        = gpu_sample,
    .argmax_keep   = gpu_argmax_keep,
    .argmax_take   = gpu_argmax_take,
    .sample_keep   = gpu_sample_keep,
    .read          = gpu_read,
    .write         = gpu_write,
    .copy          = gpu_copy,
    .memory        = gpu_memory,
    .get_rows      = gpu_get_rows,
    .rmsnorm       = gpu_rmsnorm,
    .matmul        = gpu_matmul,
    .add_bias      = gpu_add_bias,
    .rope          = gpu_rope,
    .kv_elem_bytes = gpu_kv_elem_bytes,
    .own_scratch   = gpu_own_scratch,
    .note_plan     = gpu_note_plan,
    .kv_write      = gpu_kv_write,
    .attention     = gpu_attention,
    .add           = gpu_add,
    .glu           = gpu_glu,
    .scale         = gpu_scale,
    .mul_sigmoid   = gpu_mul_sigmoid,
    .step_begin    = gpu_step_begin,
    .step_end      = gpu_step_end,
    .moe_route     = gpu_moe_route,
    .moe_ffn       = gpu_moe_ffn,
};

/* Whether the variable name is set to exactly v (the switches below react to one value only:
 * anything else, or unset, keeps the default). */
static bool env_is(const char *name, const char *v)
{
    const char *s = getenv(name);
    return s && !strcmp(s, v);
}

extern "C" celer_status celer_gpu_backend_create(celer_backend **out, const celer_backend_config *cfg,
                                                 celer_error *err)
{
    *out = NULL;
    /* the device: the config's, else CELER_GPU_DEVICE (an index, as celer info lists them), else 0 */
    const char *dv     = getenv("CELER_GPU_DEVICE");
    int         device = cfg && cfg->device > 0 ? cfg->device : dv && *dv ? atoi(dv) : 0;
    celer_device_facts f;
    if (celer_gpu_device_facts(device, &f, err)) return err->code; /* no device */
    if (!f.supported) return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s", f.why);
    gpu_backend *g = (gpu_backend *)calloc(1, sizeof *g);
    if (!g) return celer_fail(err, CELER_ERR_OOM, "%s: out of memory", CELER_GPU_NAME);
    g->device    = device;
    /* the watchdog's deadline: the config's, else CELER_GPU_WATCHDOG (seconds), else 120 s */
    const char *wd = getenv("CELER_GPU_WATCHDOG");
    g->timeout_s   = cfg && cfg->timeout_s > 0 ? cfg->timeout_s : wd && atof(wd) > 0 ? atof(wd) : 120.0;
    g->upload_total = cfg ? cfg->upload_total : 0;
    g->cur          = -1;
    g->graphs_off   = env_is("CELER_GPU_GRAPHS", "0"); /* every step op by op (for comparisons) */
    const char *mf  = getenv("CELER_GPU_MMQ_FROM"); /* 0 .. 32: see gpu_mmq.h */
    g->mmq_from     = mf && *mf ? atoi(mf) : GPU_MMQ_FROM;
    if (g->mmq_from < 0 || g->mmq_from > GPU_MMQ_SMALL) g->mmq_from = GPU_MMQ_FROM;
    const char *mc  = getenv("CELER_GPU_MMQ_CHUNKED"); /* tokens, 0: the tiled kernel past 32 (gpu_mmq.h) */
    g->mmq_chunked  = mc && *mc && atoi(mc) >= 0 ? atoi(mc) : GPU_MMQ_CHUNKED;
    /* CELER_GPU_SQ_WIDE=0 or 1: the batch kernel's other geometries (gpu_mmq_small.cuh; 2: SQ_GEOM_DEFAULT) */
    g->sq_geom      = env_is("CELER_GPU_SQ_WIDE", "0") ? 0 : env_is("CELER_GPU_SQ_WIDE", "1") ? 1 : 2;
    g->sq_long      = !env_is("CELER_GPU_SQ_LONG", "0");
    g->norm_add_slice = !env_is("CELER_GPU_NORM_ADD_SLICE", "0"); /* 0: add_rmsnorm in one block a row */
    const char *mg  = getenv("CELER_GPU_MOE_GROUP"); /* N: MoE decode steps of N tokens and more grouped on the device */
    g->moe_group    = mg && *mg ? atoi(mg) : GPU_MOE_GROUP;
    if (g->moe_group < 0) g->moe_group = GPU_MOE_GROUP;
    g->moe_combine  = !env_is("CELER_GPU_MOE_COMBINE", "0"); /* 0: a MoE decode step's combine apart */
    g->glu_fuse     = !env_is("CELER_GPU_GLU_FUSE", "0"); /* 0: one-token gate/up products, then their GLU */
    g->qkv_in       = !env_is("CELER_GPU_QKV_IN", "0"); /* 0: one-token q/k/v products, then attn_inputs */
    g->moe_stream   = !env_is("CELER_GPU_MOE_STREAM", "0"); /* 0: a MoE prefill's experts on the tiled kernel */
    const char *bf  = getenv("CELER_GPU_BLAS_FROM"); /* tokens, 0: never (gpu_blas.h) */
    g->blas_from    = bf && *bf ? atoi(bf) : GPU_BLAS_FROM;
    if (g->blas_from < 0) g->blas_from = 0;
    const char *bp  = getenv("CELER_GPU_BLAS_PASSES"); /* 1 .. 3 (gpu_blas.h) */
    g->blas_passes  = bp && atoi(bp) >= 1 && atoi(bp) <= 3 ? atoi(bp)
                      : cfg && cfg->routed                   ? GPU_BLAS_PASSES_ROUTED
                                                             : GPU_BLAS_PASSES;
    g->blas_f32     = !(bf && *bf && atoi(bf) == 0); /* f32 products: f32 arithmetic there */
    const char  *bc = getenv("CELER_GPU_BLAS_CHUNK_MB"); /* MiB, fractions too (the tests lower it) */
    const double mb = bc && atof(bc) > 0 ? atof(bc) : (double)GPU_BLAS_CHUNK_MB;
    g->blas_chunk   = (size_t)(mb * 1048576.0);
    g->flash_off    = env_is("CELER_GPU_FLASH", "0"); /* prefill attention off the matrix units */
    const char *ac  = getenv("CELER_GPU_ATT_CHUNK"); /* positions, 16 .. 65536 (for comparisons; att_split.h) */
    g->att_chunk    = ac && atoi(ac) >= 16 && atoi(ac) <= 65536 ? atoi(ac) : 0;
    g->kv_f16       = env_is("CELER_GPU_KV_F16", "1"); /* f16 keys and values (not yet the default: unmeasured) */
    g->mvq_x8       = env_is("CELER_GPU_MVQ_X8", "1"); /* one-token products on 8 bits (gpu_matvec.cu) */
    g->mvq_xs       = !env_is("CELER_GPU_MVQ_XS", "0"); /* 0: one-token products read x from global memory */
    g->sample_off   = env_is("CELER_GPU_SAMPLE", "0"); /* sampled draws read their logits (gpu_sample.cu) */
    g->ops          = gpu_ops; /* with the host's draws, sampled decode step by step (sample_keep none) */
    if (g->sample_off) g->ops.sample_keep = NULL;
    g->base.ops = &g->ops;
    g->att_merge_in = !env_is("CELER_GPU_ATT_MERGE_IN", "0"); /* 0: decode attention's merge a kernel of its own */
    g->att_mma      = !env_is("CELER_GPU_ATT_MMA", "0"); /* a batch's decode attention on the matrix units */
    const char *aw  = getenv("CELER_GPU_ATT_WIDE"); /* most passes a wide block takes (0: every step split) */
    g->att_wide     = aw && *aw && atoi(aw) >= 0 && atoi(aw) <= 64 ? atoi(aw) : ATT_WIDE_PASSES;
    g->stats        = env_is("CELER_GPU_STATS", "1"); /* step and wait times on stderr at the end */
    snprintf(g->device_name, sizeof g->device_name, "%s", f.name);
    gpuError_t e = gpuSetDevice(device);
    if (e == gpuSuccess) e = gpuGetDeviceProperties(&g->prop, device);
    if (e == gpuSuccess) e = gpuStreamCreateNonBlocking(&g->stream);
    size_t total_b = 0;
    if (e == gpuSuccess) e = gpuMemGetInfo(&g->free0, &total_b);
    g->free_min = g->free0;
    if (e != gpuSuccess) {
        celer_status st = gpu_fail(g, err, e, "opening the device");
        gpu_free(&g->base);
        return st;
    }
    char no_blas[320]; /* a HIP build without rocBLAS (or its kernels for this GPU): no product takes it */
    if (!gpu_blas_there(&g->prop, no_blas, sizeof no_blas)) g->blas_from = 0, g->blas_f32 = false;
    /* AMD's matrix units take the tiled prefill kernel's steps past one pass of the decode kernels
     * (CELER_GPU_AMX=0: none do; the batch kernel is NVIDIA's alone: gpu_mmq.h) */
    g->amx = env_is("CELER_GPU_AMX", "0") ? CELER_AMX_NONE : gpu_amx_take(&g->prop);
    if (g->amx != CELER_AMX_NONE && !(mf && *mf)) g->mmq_from = GPU_MMQ_FROM_AMX;
    /* CELER_GPU_EARLY=0: each kernel launched after the one before ends */
    g->early       = gpu_early_launch_ok(&g->prop) && !env_is("CELER_GPU_EARLY", "0");
    if (gpu_selfcheck(g, err)) {
        const celer_status st = err->code;
        gpu_free(&g->base);
        return st;
    }
    const char *lt = getenv("CELER_GPU_LATE"); /* launch names, separated by commas or '+': never early */
    if (lt && *lt) snprintf(g->late, sizeof g->late, ",%s,", lt);
    for (char *c = g->late; *c; c++) *c = *c == '+' ? ',' : *c;
#if CELER_GPU_TRACE
    if (env_is("CELER_GPU_TRACE", "1") && gpu_trace_open(g, err)) { /* replayed steps' timelines (gpu_trace.cu) */
        const celer_status st = err->code;
        gpu_free(&g->base);
        return st;
    }
#else
    if (env_is("CELER_GPU_TRACE", "1")) /* asked of a build that cannot: say so, run untraced */
        fprintf(stderr, "celer: %s: CELER_GPU_TRACE=1 needs a trace build (cmake -DCELER_CUDA=ON "
                "-DCELER_GPU_TRACE=ON); this one records no timeline\n", CELER_GPU_NAME);
#endif
    *out = &g->base;
    return CELER_OK;
}
