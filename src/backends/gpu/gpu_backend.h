/* The GPU backend's instance, its error discipline and the launchers its .cu files define.
 * One source for CUDA and HIP: everything vendor-specific is in gpu_vendor.h.
 *
 * Failures are errors (DESIGN.md): every runtime call and every launch is checked; the first
 * failure marks the device failed, and from then on every op answers CELER_ERR_DEVICE with the
 * first failure's message, so a request that meets a fault ends with an error, not a NaN stream.
 * A step that does not finish within the watchdog's deadline is such a failure too. */
#ifndef CELER_BACKENDS_GPU_GPU_BACKEND_H
#define CELER_BACKENDS_GPU_GPU_BACKEND_H

#include "backends/gpu/gpu_vendor.h"

extern "C" {
#include "backends/backend.h"
#include "core/error.h"
}

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <type_traits>

/* A device buffer that grows to the largest size asked for and is kept. */
typedef struct {
    void  *p;
    size_t bytes;
} gpu_buf;

enum { GPU_SMEM_FNS = 16 };

typedef struct {
    celer_backend base;
    int           device;
    gpuDeviceProp prop;
    gpuStream_t   stream;
    double        timeout_s;  /* watchdog: a sync that waits longer fails the device */
    char          device_name[256];
    /* weights: placed one after another in few allocations ("arenas", gpu_weights.cu), freed with
     * the backend; bytes uploaded, for the progress line */
    void   **weights; /* the arenas */
    size_t   n_weights, cap_weights;
    char    *arena_next;   /* the last arena's first free byte */
    size_t   arena_left;   /* and the bytes after it */
    uint64_t arena_total;  /* bytes of all the arenas */
    uint64_t uploaded, upload_total;
    double   progress_at;
    /* weight rows rearranged on the host (gpu_weights.cu): by the pool's threads into two pinned
     * buffers in turn, each copied while the other fills */
    struct celer_pool *load_pool;
    char              *load_buf[2];
    gpuEvent_t         load_done[2]; /* a buffer's copy finished */
    bool               load_busy[2]; /* its copy queued since the last wait */
    int                load_next;
    bool          failed;
    char          failure[256];
    /* the batch and the KV block tables as the kernels see them: uploaded when they change */
    gpu_buf  d_pos, d_seq, d_tables, d_ids, d_draw;
    gpu_buf      d_xq;   /* activations quantized for the integer kernels (gpu_matvec.h) */
    gpu_buf      d_xq2;  /* the same, written by a kernel that reads d_xq (gpu_xq_buffer_apart) */
    const float *xq_src; /* whose n values d_xq (xq_in2: d_xq2) holds, or NULL (gpu_quant_x) */
    int64_t      xq_n;
    bool         xq_x8;   /* the high level only (gpu_matvec.h) */
    bool         xq_in2;
    const float *x16_src; /* whose n values the BLAS path's f16 halves hold, or NULL (gpu_blas.cu) */
    int64_t      x16_n;
    bool         x16_lo;  /* with their lo halves */
    bool         x16_x8;  /* of the values rounded to 8 bits */
    gpu_buf  d_part; /* partial products of a product split over its columns (gpu_mmq.cu) */
    gpu_buf  d_route; /* the fused MoE router's count of blocks done (gpu_matvec_plain.cu) */
    gpu_buf  d_norm_count; /* the sliced add_rmsnorm's blocks done, a counter a row (gpu_norm.cu) */
    gpu_buf  d_attn; /* decode attention's splits (gpu_attention.cu) */
    gpu_buf  d_att_count; /* their tickets, with att_merge_in */
    gpu_buf    d_keep;    /* argmax_keep's ids: the next step's inputs (gpu_sample.cu) */
    int32_t   *h_keep;    /* their copies on the host (pinned), two slots of keep_cap ids */
    int32_t    keep_cap, keep_rows[2], keep_last; /* a slot's room; the ids in each; in the last kept */
    gpuEvent_t keep_ev[2]; /* a slot's copy done */
    int        keep_head, keep_n; /* the oldest slot not taken; how many are kept */
    const void *smem_fns[GPU_SMEM_FNS]; /* kernels allowed their shared memory past 48 KB (gpu_allow_smem) */
    int         n_smem_fns;
    int      mmq_from;    /* steps of more tokens take the integer matrix units (gpu_mmq.h) */
    int      mmq_chunked; /* steps of up to this many take the batch kernel in chunks (gpu_mmq.h) */
    int      amx;         /* AMD: the matrix units the loaded code takes (CELER_AMX_*; gpu_amx_take) */
    bool     mmq_off;     /* the tiled integer kernel failed its self-check (gpu_selfcheck): left off */
    int      sq_geom;     /* the batch kernel's geometry, 2 (CELER_GPU_SQ_WIDE=0 or 1: the others; gpu_mmq_small.cuh) */
    bool     sq_long;     /* the batch kernel's long rows in parts of its 128-row grid (gpu_mmq_small.cu's
                           * sq_parts; CELER_GPU_SQ_LONG=0: of a 64-row grid, as the others) */
    int      blas_from;   /* Q4_0/Q8_0 steps of this many tokens take the vendor BLAS; 0: none does (gpu_blas.h) */
    bool     blas_f32;    /* F32 weights' long steps take it (unless CELER_GPU_BLAS_FROM=0) */
    size_t   blas_chunk;  /* bytes of f16 weight rows the BLAS path dequantizes at a time */
    int      blas_passes; /* 1 .. 3: the BLAS path's f16 products a product (gpu_blas.h) */
    struct gpu_blas *blas; /* its handle and scratch (gpu_blas.cu), made by the first product that takes it */
    bool     flash_off;   /* CELER_GPU_FLASH=0, or its self-check failed: prefill attention without the matrix units */
    int32_t  att_chunk;   /* CELER_GPU_ATT_CHUNK: decode attention's keys a split (0: by the context, att_split.h) */
    bool     kv_f16;      /* CELER_GPU_KV_F16=1: the KV cache holds f16 values (gpu_kv.cuh) */
    bool     mvq_x8;      /* CELER_GPU_MVQ_X8=1: dense products of quantized weights on 8-bit activations */
    bool     mvq_xs;      /* one-token decode products stage x in shared memory (CELER_GPU_MVQ_XS=0: not) */
    bool     sample_off;  /* CELER_GPU_SAMPLE=0: every sampled draw left to the host (gpu_sample.cu) */
    celer_backend_ops ops; /* gpu_ops, less sample_keep with sample_off (base.ops points here) */
    bool     att_merge_in; /* decode attention's last split merges them (CELER_GPU_ATT_MERGE_IN=0: a kernel does) */
    bool     att_mma;      /* a batch's decode attention on the matrix units (gpu_att_mma.cu); CELER_GPU_ATT_MMA=0: not */
    int32_t  att_wide;     /* most passes of a wide block, short contexts unsplit (CELER_GPU_ATT_WIDE; 0: split) */
    bool     early;       /* kernels launched while the one before runs (gpu_dep_enter; CELER_GPU_EARLY=0: off) */
    char     late[128];   /* CELER_GPU_LATE: ",name,name," launches never early (gpu_late; "" none) */
    bool     norm_add_slice; /* a decode step's add_rmsnorm sliced (gpu_norm.cu); CELER_GPU_NORM_ADD_SLICE=0: not */
    int      moe_group;   /* MoE decode steps of this many tokens and more grouped on the device (GPU_MOE_GROUP) */
    bool     moe_combine; /* MoE decode's down products sum their choices (gpu_matvec_combine.cu; MOE_COMBINE=0: not) */
    bool     glu_fuse;    /* one-token gate/up and GLU in one launch (gpu_matvec_glu.cu; CELER_GPU_GLU_FUSE=0: not) */
    bool     qkv_in;      /* one-token q/k/v products make their attention inputs (CELER_GPU_QKV_IN=0: not) */
    bool     moe_stream;  /* a MoE prefill's experts on the batch kernel (gpu_mmq_small_experts.cu;
                           * CELER_GPU_MOE_STREAM=0: not) */
    int32_t *h_pos, *h_seq, *h_tables; /* what was uploaded last */
    int64_t  h_pos_n, h_seq_n, h_tables_n;
    /* RoPE frequency tables (gpu_rope_freqs), one per (base, rotated dimensions, divisors) */
    struct {
        float        base;
        int64_t      n_rot;
        const float *factors; /* the model's host array, or NULL */
        double      *dev;
    } freq[64];
    int n_freq;
    /* step graphs (gpu_graph.cu) */
    int                rec;   /* what the ops do with device work: enum gpu_rec */
    gpuStream_t        side;  /* uploads while the stream is being captured */
    struct gpu_graph  *graphs;
    int                n_graphs, cur; /* cur: the step's graph, -1 none */
    uint64_t           sig;           /* the step's launches so far (gpu_sign) */
    /* CELER_GPU_STATS=1: where a step's time goes, printed when the backend is freed */
    bool               stats;
    double             t_step;                /* when the step began */
    double             walk_s[4];             /* host time from step_begin to step_end, by enum gpu_rec */
    int64_t            steps[4];
    double             wait_s;                /* time gpu_sync waited for the device */
    int64_t            waits;
    bool               in_step;               /* between step_begin and step_end */
    int64_t            allocs[3];             /* device allocations: all, inside steps, inside replayed steps */
    int64_t            allocs_noted;          /* allocs[0] when the free memory was last read (gpu_note_memory) */
    /* with stats: the device's free memory when the backend opened, when the first step began,
     * and its least at a step's end — every step's but a replayed one's that allocated nothing
     * (what the vendor BLAS and the runtime take for themselves counts; what a caller allocates
     * between steps, as bench's bandwidth probe, does not); the planner's estimate
     * (ops->note_plan; 0: none given) */
    size_t             free0, free_first, free_min;
    uint64_t           plan;
#if CELER_GPU_TRACE
    struct gpu_trace  *trace;    /* a trace build's records, with CELER_GPU_TRACE=1 (gpu_trace.cu) */
    uint64_t           step_key; /* the step's graph key (gpu_step_begin) */
#endif
    uint64_t           clock;         /* steps begun, for the least recently used graph */
    bool               graphs_off;    /* CELER_GPU_GRAPHS=0 */
    /* scratch for MoE and staging */
    gpu_buf moe[7];
    void   *host_stage;
    size_t  host_stage_bytes;
    /* small uploads' pinned ring (gpu_upload): two halves, the one in use filled from up_head;
     * up_ev[h] recorded once half h's copies were queued, waited for before it is filled again */
    char       *up_ring;
    size_t      up_head;
    int         up_half;
    gpuEvent_t  up_ev[2];
    bool        up_queued[2];
} gpu_backend;

static inline gpu_backend *gpu_of(celer_backend *be) { return (gpu_backend *)be; }

/* The runtime's words for e: "sentence (name)", or the name alone where the runtime has no
 * sentence (HIP 5.2's strings are the names); into buf, which is returned. */
const char  *gpu_error_words(gpuError_t e, char *buf, size_t n);
/* Fails the device with the runtime's error for what (a call or a launch). */
celer_status gpu_fail(gpu_backend *g, celer_error *err, gpuError_t e, const char *what);
/* The same in the words of whoever failed (a library's status); an out-of-memory (oom) leaves
 * the device usable. */
celer_status gpu_fail_with(gpu_backend *g, celer_error *err, bool oom, const char *what, const char *words);
/* CELER_OK, or the device failed for the launch of name: e (the launch call's answer;
 * gpuSuccess after a library's call) or the runtime's last error, which is read either way. */
static inline celer_status gpu_launch_done(gpu_backend *g, celer_error *err, const char *name, gpuError_t e)
{
    const gpuError_t last = gpuGetLastError();
    if (e == gpuSuccess) e = last;
    return e == gpuSuccess ? CELER_OK : gpu_fail(g, err, e, name);
}
/* The long steps' paths (the tiled integer kernel, the vendor BLAS) against the decode kernel on
 * one small product, where CELER_GPU_SELFCHECK or CELER_GPU_CHECK asks (gpu_selfcheck.cu); a path
 * that disagrees is left off (g->mmq_off; blas_from 0) and said so on stderr. An error only when
 * the device fails. */
celer_status gpu_selfcheck(gpu_backend *g, celer_error *err);
/* CELER_OK, or the failure the device had earlier. */
celer_status gpu_alive(gpu_backend *g, celer_error *err);
/* Waits for the stream, or for an event recorded on it, within the watchdog's deadline. */
celer_status gpu_sync(gpu_backend *g, celer_error *err);
celer_status gpu_sync_event(gpu_backend *g, gpuEvent_t ev, celer_error *err);
/* Seconds on a monotonic clock. */
double       gpu_now_s(void);
/* b grown to at least bytes (its contents are lost when it grows). */
celer_status gpu_buf_reserve(gpu_backend *g, gpu_buf *b, size_t bytes, celer_error *err);
/* Lets kernel fn take `bytes` of dynamic shared memory: past 48 KB a kernel must ask, once (the
 * backend remembers GPU_SMEM_FNS kernels that did; past them it asks again). */
celer_status gpu_allow_smem(gpu_backend *g, const void *fn, size_t bytes, celer_error *err);
/* Host memory for staging, at least bytes, valid until the next call. */
celer_status gpu_host_stage(gpu_backend *g, size_t bytes, void **out, celer_error *err);
/* Copies n bytes of host memory to the device (stream-ordered). */
celer_status gpu_upload(gpu_backend *g, void *dst, const void *src, size_t n, celer_error *err);

#define GPU_TRY(g, err, call, what)                                                                                 \
    do {                                                                                                            \
        gpuError_t e_ = (call);                                                                                     \
        if (e_ != gpuSuccess) return gpu_fail((g), (err), e_, (what));                                             \
    } while (0)

/* Threads a launch may use in one grid dimension: a launcher refuses what it cannot cover. */
#define GPU_MAX_GRID_X 2147483647LL
#define GPU_MAX_GRID_YZ 65535LL

/* The batch's positions and sequences and the KV block tables, on the device (uploaded when
 * they differ from what was uploaded last). */
celer_status gpu_batch_upload(gpu_backend *g, const celer_batch *b, const celer_kv_cache *kv, const int32_t **pos,
                              const int32_t **seq, const int32_t **tables, celer_error *err);

/* ---- step graphs (gpu_graph.cu) ---- */
/* During a step the ops run their device work (EAGER), record it into the step's graph
 * (CAPTURE), or leave it to the graph recorded earlier (REPLAY); BROKEN: the step could not be
 * recorded (an op needed the host mid-step, or a buffer moved), its remaining device work is
 * skipped and step_end asks the caller to run it again. Host-side work (checks, uploads of the
 * step's inputs) is done in every mode. */
enum gpu_rec { GPU_REC_EAGER, GPU_REC_CAPTURE, GPU_REC_REPLAY, GPU_REC_BROKEN };
celer_status gpu_step_begin(celer_backend *be, uint64_t key, celer_error *err);
celer_status gpu_step_end(celer_backend *be, bool ok, bool *redo, celer_error *err);
/* Whether a launch or a device-to-device copy is to be skipped (REPLAY, BROKEN). */
static inline bool gpu_skip(const gpu_backend *g) { return g->rec == GPU_REC_REPLAY || g->rec == GPU_REC_BROKEN; }
/* The step cannot be recorded (never, when forever: its key then always runs op by op). */
void gpu_graph_break(gpu_backend *g, bool forever);
/* Every recorded graph is dropped (a buffer they use moved). */
void gpu_graphs_drop(gpu_backend *g);
void gpu_graphs_free(gpu_backend *g);
/* The CELER_GPU_STATS line: steps by mode with their mean host time, and the device waits. */
void gpu_stats_print(const gpu_backend *g);
/* The device's free memory now, for the peak in CELER_GPU_STATS's line (a driver query, host
 * time in the synchronous decode loop: a replayed step that allocates nothing does not make it). */
void gpu_note_memory(gpu_backend *g);
/* A device allocation, counted for CELER_GPU_STATS (issue 10: none inside replayed decode steps). */
static inline void gpu_count_alloc(gpu_backend *g)
{
    g->allocs[0]++;
    if (g->in_step) g->allocs[1]++;
    if (g->in_step && g->rec == GPU_REC_REPLAY) g->allocs[2]++;
}

/* The step's signature: every launch (kernel, grid, block, shared memory, arguments) and copy
 * folded in, recorded with a graph and compared when it is replayed, so that a replay whose
 * launches would differ from the recorded ones (a key reused for other work) runs op by op
 * instead of on stale buffers. Arguments are folded by value: numbers and pointers as they are,
 * the kernels' structs through their gpu_sig_arg overloads; any other type does not compile. */
static inline uint64_t gpu_sig_mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }
template <typename T> static inline uint64_t gpu_sig_arg(uint64_t h, const T &v)
{
    static_assert(std::is_pointer<T>::value || std::is_arithmetic<T>::value || std::is_enum<T>::value,
                  "a kernel argument the step signature cannot fold: give its type a gpu_sig_arg");
    uint64_t w = 0;
    memcpy(&w, &v, sizeof v);
    return gpu_sig_mix(h, w);
}
static inline uint64_t gpu_sig_args(uint64_t h) { return h; }
template <typename A, typename... R> static inline uint64_t gpu_sig_args(uint64_t h, const A &a, const R &...r)
{
    return gpu_sig_args(gpu_sig_arg(h, a), r...);
}
/* Whether launches are signed: while a step is recorded or replayed (op by op, nothing compares). */
static inline bool gpu_signing(const gpu_backend *g) { return g->rec == GPU_REC_CAPTURE || g->rec == GPU_REC_REPLAY; }
static inline void gpu_sign(gpu_backend *g, const void *what, dim3 grid, dim3 block, size_t smem, uint64_t args)
{
    uint64_t h = gpu_sig_mix(g->sig, (uint64_t)(uintptr_t)what);
    h          = gpu_sig_mix(h, (uint64_t)grid.x << 32 ^ (uint64_t)grid.y << 16 ^ grid.z);
    h          = gpu_sig_mix(h, (uint64_t)block.x << 32 ^ (uint64_t)block.y << 16 ^ block.z);
    g->sig     = gpu_sig_mix(gpu_sig_mix(h, smem), args);
}

/* Whether launches named name are never early: CELER_GPU_LATE lists them, separated by commas
 * or '+' (gpu-check.sh's ab splits its items at commas), for comparisons: which kernels lose
 * when launched early, as the batch kernel did (gpu_mmq_small.cu). */
static inline bool gpu_late(const gpu_backend *g, const char *name)
{
    if (!g->late[0]) return false;
    char key[64];
    snprintf(key, sizeof key, ",%s,", name);
    return strstr(g->late, key) != NULL;
}

/* Launches kernel<<<grid, block, smem>>>(args) on the backend's stream unless gpu_skip (early
 * where g->early: gpu_vendor.h's gpu_dep_enter), and checks the launch. kernel must be one
 * token (a name or a function pointer). GPU_LAUNCH also
 * forgets whose values the quantized activations and their f16 halves hold (the kernel may write
 * them);
 * GPU_LAUNCH_KEEPING_XQ is for kernels that write only their outputs, never quantized ones (the
 * products, float or integer; MoE routing), so that an MoE layer's router product and routing
 * leave the experts' input quantized as the norm before them left it. */
#define GPU_LAUNCH_KEEPING_XQ(g, err, name, kernel, grid, block, smem, ...)                                         \
    GPU_LAUNCH_KEEPING_XQ_AS(g, err, name, (g)->early, kernel, grid, block, smem, __VA_ARGS__)
/* The same, launched early only where early_ok (and g->early): see gpu_mmq_small.cu's
 * gpu_mmq_small for a kernel that loses when launched early. */
#define GPU_LAUNCH_KEEPING_XQ_AS(g, err, name, early_ok, kernel, grid, block, smem, ...)                               \
    (GPU_TRACE_NOTE(g, name, grid, block),                                                                          \
     gpu_signing(g) ? gpu_sign((g), (const void *)(kernel), dim3(grid), dim3(block), (size_t)(smem),               \
                               gpu_sig_args(0, __VA_ARGS__))                                                        \
                    : (void)0,                                                                                      \
     gpu_skip(g) ? CELER_OK                                                                                         \
                 : gpu_launch_done((g), (err), (name),                                                              \
                                   gpu_launch_kernel((kernel), dim3(grid), dim3(block), (size_t)(smem), (g)->stream, \
                                                     (g)->early && (early_ok) && !gpu_late((g), (name)),      \
                                                     __VA_ARGS__)))
#define GPU_LAUNCH(g, err, name, kernel, grid, block, smem, ...)                                                    \
    (gpu_forget_acts(g), GPU_LAUNCH_KEEPING_XQ(g, err, name, kernel, grid, block, smem, __VA_ARGS__))

/* ---- a trace build's step timeline (gpu_trace.cu; cmake -DCELER_GPU_TRACE=ON, CUDA) ---- */
#if CELER_GPU_TRACE
/* With CELER_GPU_TRACE=1 the backend records, for each replayed step graph, when each kernel's
 * dependency wait returned (gpu_vendor.h's gpu_dep_enter): the time from one kernel's release
 * to the next one's is what that kernel costs the step, its wait how early it was in place. */
celer_status gpu_trace_open(gpu_backend *g, celer_error *err);
void         gpu_trace_free(gpu_backend *g);
/* A launch of the step being recorded (GPU_LAUNCH), in order. */
void gpu_trace_note(gpu_backend *g, const char *name, dim3 grid, dim3 block);
/* The step of key g->step_key is being recorded: its launches start over. */
void gpu_trace_recording(gpu_backend *g);
/* Around a replay of the step of key g->step_key: the records cleared, then read. */
celer_status gpu_trace_before(gpu_backend *g, celer_error *err);
celer_status gpu_trace_after(gpu_backend *g, celer_error *err);
/* Each traced step's kernels with their mean cost and wait, then by kernel name (stderr). */
void gpu_trace_print(const gpu_backend *g);
#define GPU_TRACE_NOTE(g, name, grid, block)                                                                        \
    ((g)->trace && (g)->rec == GPU_REC_CAPTURE ? gpu_trace_note((g), (name), dim3(grid), dim3(block)) : (void)0)
#else
#define GPU_TRACE_NOTE(g, name, grid, block) ((void)0)
#endif

/* Forgets whose values the activations' quantized and f16 copies hold (a kernel, copy, upload or
 * fresh allocation may land on their sources). */
static inline void gpu_forget_acts(gpu_backend *g) { g->xq_src = NULL, g->x16_src = NULL; }

/* ---- weights on the device (gpu_weights.cu) ---- */
/* How a weight's rows lie on the device:
 *   STORED    GGUF blocks as in the file (F32, F16, BF16, Q5_K: their payloads are already
 *             16-byte aligned);
 *   MLX_ROWS  an MLX matrix, row after row: the row's codes (as stored, but 4-bit affine ones
 *             in Q4_0's order: byte i of a 32-value chunk holds values i and i + 16), then from
 *             the next 16-byte boundary its scales (affine: each group's scale and bias side by
 *             side, one load for both), padded to 16 bytes;
 *   SPLIT     GGUF blocks whose payload is not 16-byte aligned in the file (Q4_0, Q4_1, Q5_0,
 *             Q5_1, Q8_0, Q6_K), or whose headers between the codes spread a warp's loads (Q4_K:
 *             a warp's header and code loads at 144-byte strides ask ~27 cache lines for 64
 *             values of a row a lane, Q4_0's 10 for as many): each row holds every block's codes in
 *             block order, then every block's remaining bytes (its "header": scales, mins, high
 *             bits) in block order, padded to 16 bytes, so that the decode kernels read codes
 *             with 128-bit loads;
 *             Q6_K's codes and scales in the order its decode unit reads them (q6k_order.h),
 *             its d values after its scales, each unit four aligned loads.
 * In every layout a run of rows (an expert of a stacked tensor) is one contiguous range. */
enum { GPU_LAYOUT_STORED = 0, GPU_LAYOUT_MLX_ROWS = 1, GPU_LAYOUT_SPLIT = 2 };
typedef struct {
    size_t codes, scales, biases; /* bytes of each part of a row (biases 0 but for affine) */
    size_t scales_at;             /* where the scales start: the codes' bytes rounded up to 16 */
    size_t row;                   /* the row's bytes, padded */
} gpu_mlx_row;
gpu_mlx_row  gpu_mlx_row_layout(const celer_mlx_quant *q);
/* A SPLIT type's block: its codes are bytes [code_off, code_off + code_len) of the block's
 * block_bytes; false for the types kept as stored. */
typedef struct {
    int code_off, code_len, block_bytes, block_elems;
} gpu_split;
bool gpu_split_of(celer_ggml_type t, gpu_split *s);
/* The bytes of one row of w on the device (any layout). */
size_t gpu_row_bytes(const celer_weight *w);
celer_status gpu_weight_load(celer_backend *be, celer_weight *w, celer_error *err);
celer_status gpu_weight_view(celer_backend *be, const celer_weight *w, int64_t row0, int64_t rows, celer_weight *view,
                             celer_error *err);
void         gpu_weights_free(gpu_backend *g);

/* ---- ops (each in the file named) ---- */
/* gpu_matmul.cu */
celer_status gpu_matmul(celer_backend *be, const celer_weight *w, const float *x, int64_t T, float *y,
                        celer_error *err);
celer_status gpu_get_rows(celer_backend *be, const celer_weight *w, const int32_t *ids, int64_t n, float *y,
                          celer_error *err);
/* gpu_norm.cu */
celer_status gpu_rmsnorm(celer_backend *be, const float *x, const celer_weight *w, int64_t rows, int64_t d, float eps,
                         float *y, celer_error *err);
/* gpu_sample.cu */
celer_status gpu_argmax(celer_backend *be, const float *x, int64_t rows, int64_t n, int32_t *ids, celer_error *err);
celer_status gpu_argmax_keep(celer_backend *be, const float *x, int64_t rows, int64_t n, celer_error *err);
celer_status gpu_argmax_take(celer_backend *be, int32_t *ids, celer_error *err);
celer_status gpu_sample_keep(celer_backend *be, const float *x, int64_t rows, int64_t n, const celer_draw *d,
                             celer_error *err);
celer_status gpu_sample(celer_backend *be, const float *x, int64_t rows, int64_t n, const celer_draw *d, int32_t *ids,
                        celer_error *err);
/* gpu_ops.cu */
celer_status gpu_add_bias(celer_backend *be, float *y, const celer_weight *b, int64_t T, celer_error *err);
celer_status gpu_add(celer_backend *be, float *x, const float *y, int64_t n, celer_error *err);
celer_status gpu_scale(celer_backend *be, float *x, int64_t n, float s, celer_error *err);
celer_status gpu_glu(celer_backend *be, float *gate, const float *up, int64_t n, celer_act act, celer_error *err);
celer_status gpu_mul_sigmoid(celer_backend *be, float *x, const float *gt, int64_t T, int64_t n, celer_error *err);
celer_status gpu_rope(celer_backend *be, float *x, const celer_batch *b, int64_t n_heads, int64_t head_dim,
                      const celer_rope *r, celer_error *err);
celer_status gpu_kv_write(celer_backend *be, celer_kv_cache *kv, int32_t layer, const float *k, const float *v,
                          const celer_batch *b, celer_error *err);
/* r's frequencies on the device, n_rot / 2 doubles computed as the CPU backend computes them
 * (base^(-2i / n_rot), divided by the model's factors where it has them), kept for the backend's
 * life. */
celer_status gpu_rope_freqs(gpu_backend *g, const celer_rope *r, const double **dev, celer_error *err);
/* gpu_attention.cu */
celer_status gpu_attention(celer_backend *be, const float *q, const celer_kv_cache *kv, int32_t layer,
                           const celer_batch *b, const celer_attn *a, float *out, celer_error *err);
/* gpu_flash.cu: prefill attention on the matrix units (NVIDIA sm_80 on, AMD's where g->amx takes
 * them: gpu_flash_has, unless flash_off), for the batches gpu_flash_takes (head sizes 64 and 128,
 * runs of at least 16 tokens of a sequence on average); pos, seq and tables are
 * gpu_batch_upload's. */
bool         gpu_flash_has(const gpu_backend *g);
bool         gpu_flash_takes(const gpu_backend *g, const celer_batch *b, const celer_attn *a);
celer_status gpu_flash_attention(gpu_backend *g, const float *q, const celer_kv_cache *kv, int32_t layer,
                                 const int32_t *pos, const int32_t *seq, const int32_t *tables, const celer_batch *b,
                                 const celer_attn *a, float *out, celer_error *err);
/* gpu_moe.cu */
celer_status gpu_moe_route(celer_backend *be, const float *logits, int64_t T, int64_t n_expert, int64_t n_used,
                           bool renorm, int32_t *ids, float *w, celer_error *err);
celer_status gpu_moe_ffn(celer_backend *be, const celer_moe *moe, const float *x, int64_t T, const int32_t *ids,
                         const float *w, int64_t n_used, celer_act act, float *out, celer_error *err);

/* Blocks of `threads` for a grid-stride loop over n items: enough to cover n, at most 65535
 * (the loop covers the rest). */
static inline unsigned gpu_blocks(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

/* The host's check of what the KV kernels trust: every token's sequence and position lie in the
 * cache and have a block (visible: also every earlier position of the sequence, as attention
 * reads them). CELER_ERR_INVALID naming the sequence and position otherwise. */
celer_status gpu_kv_check(const celer_kv_cache *kv, const celer_batch *b, bool visible, celer_error *err);

/* Blocks of `per` items covering n, refused past the grid's limit. */
celer_status gpu_grid(gpu_backend *g, int64_t n, int64_t per, unsigned *blocks, const char *kernel, celer_error *err);

#endif
