/* Weights on the device, in the layouts of gpu_backend.h: GGUF blocks as stored or split into
 * codes and headers row by row, an MLX matrix's three host arrays side by side row by row.
 * Values are moved, never re-encoded. */
#include "backends/gpu/gpu_backend.h"
#include "backends/gpu/q6k_order.h"

extern "C" {
#include "core/threads.h"
#include "quant/mlx_quant.h"
}

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The GGUF types the kernels decode (gpu_decode.cuh). */
static bool gguf_type_native(celer_ggml_type t)
{
    switch (t) {
    case CELER_GGML_F32: case CELER_GGML_F16: case CELER_GGML_BF16: case CELER_GGML_Q4_0: case CELER_GGML_Q4_1:
    case CELER_GGML_Q5_0: case CELER_GGML_Q5_1: case CELER_GGML_Q8_0: case CELER_GGML_Q4_K: case CELER_GGML_Q5_K:
    case CELER_GGML_Q6_K:
        return true;
    default:
        return false;
    }
}

gpu_mlx_row gpu_mlx_row_layout(const celer_mlx_quant *q)
{
    size_t      groups = (size_t)(q->cols / q->group_size);
    bool        affine = q->mode == CELER_HF_QUANT_AFFINE;
    gpu_mlx_row r;
    r.codes  = (size_t)q->cols * q->bits / 8;
    r.scales = affine ? groups * (q->dtype == CELER_ST_F32 ? 4 : 2) : groups; /* fp modes: a byte each */
    r.biases = affine ? r.scales : 0;
    /* 3- and 5-bit codes of 32 values are 12 and 20 bytes: the scales after 17 such groups sat
     * 4 bytes off the 8-byte boundary an f32 pair's load needs (a misaligned-address fault) */
    r.scales_at = (r.codes + 15) / 16 * 16;
    r.row       = (r.scales_at + r.scales + r.biases + 15) / 16 * 16;
    return r;
}

/* The SPLIT types, X(type, values a block, bytes a block, the codes' offset, their length): once
 * for gpu_split_of and once for the host's fill of their rows (fill_of). */
#define GPU_SPLIT_TYPES(X)                                                                                           \
    X(CELER_GGML_Q4_0, 32, 18, 2, 16)                                                                                 \
    X(CELER_GGML_Q4_1, 32, 20, 4, 16)                                                                                 \
    X(CELER_GGML_Q5_0, 32, 22, 6, 16)                                                                                 \
    X(CELER_GGML_Q5_1, 32, 24, 8, 16)                                                                                 \
    X(CELER_GGML_Q8_0, 32, 34, 2, 32)                                                                                 \
    X(CELER_GGML_Q4_K, 256, 144, 16, 128)                                                                             \
    X(CELER_GGML_Q6_K, 256, 210, 0, 192)

bool gpu_split_of(celer_ggml_type t, gpu_split *s)
{
    switch (t) {
#define SPLIT_CASE(T, BE, BB, OFF, LEN)                                                                               \
    case T: *s = (gpu_split){OFF, LEN, BB, BE}; return true;
        GPU_SPLIT_TYPES(SPLIT_CASE)
#undef SPLIT_CASE
    default: return false;
    }
}

size_t gpu_row_bytes(const celer_weight *w)
{
    if (w->type == CELER_WEIGHT_MLX) return gpu_mlx_row_layout(&w->mlx).row;
    const celer_ggml_type_info *ti = celer_ggml_type_get(w->type);
    size_t                      rb = (size_t)(w->cols / ti->block_elems) * ti->block_bytes;
    gpu_split                   sp;
    return gpu_split_of(w->type, &sp) ? (rb + 15) / 16 * 16 : rb;
}

static void progress(gpu_backend *g, uint64_t bytes)
{
    g->uploaded += bytes;
    if (!g->upload_total || !isatty(2)) return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double now = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    bool   done = g->uploaded >= g->upload_total;
    if (!done && now - g->progress_at < 0.2) return;
    g->progress_at = now;
    fprintf(stderr, "\r%s: uploading weights to %s: %.2f / %.2f GiB%s", CELER_GPU_NAME, g->device_name,
            (double)g->uploaded / 1073741824.0, (double)g->upload_total / 1073741824.0, done ? "\n" : "");
    if (done) g->upload_total = 0; /* one line per load */
}

/* A weight's place on the device. With the model's size known (upload_total: its weights' bytes
 * in the file), weights go one after another (WEIGHT_ALIGN apart) into one allocation that size,
 * and any that do not fit into one of what was left uncounted, or of their own: the 8B's ~290
 * allocations, each rounded up by the device's allocator, took ~0.2 GiB past their bytes on the
 * H200, and the planner counts the file's bytes. Without it (the kernel tests), an allocation a
 * weight, so that memcheck still sees a read past a weight's end. */
enum { WEIGHT_ALIGN = 256 };
static celer_status weight_alloc(gpu_backend *g, size_t bytes, void **out, celer_error *err)
{
    const size_t need = (bytes + WEIGHT_ALIGN - 1) / WEIGHT_ALIGN * WEIGHT_ALIGN;
    if (need <= g->arena_left) {
        *out = g->arena_next, g->arena_next += need, g->arena_left -= need;
        return CELER_OK;
    }
    size_t size = g->upload_total > g->arena_total ? (size_t)(g->upload_total - g->arena_total) : 0;
    size        = (size > need ? size : need) + WEIGHT_ALIGN - 1; /* the rest of the model, or this weight */
    size        = size / WEIGHT_ALIGN * WEIGHT_ALIGN;
    if (g->n_weights == g->cap_weights) {
        size_t cap = g->cap_weights ? 2 * g->cap_weights : 256;
        void **w   = (void **)realloc(g->weights, cap * sizeof *w);
        if (!w) return celer_fail(err, CELER_ERR_OOM, "%s: out of host memory", CELER_GPU_NAME);
        g->weights = w, g->cap_weights = cap;
    }
    gpu_count_alloc(g);
    void      *arena = NULL;
    gpuError_t e     = gpuMalloc(&arena, size);
    if (e != gpuSuccess && size > need) { /* the rest of the model at once did not fit: this weight alone */
        (void)gpuGetLastError();
        size = need;
        e    = gpuMalloc(&arena, size);
    }
    if (e != gpuSuccess) {
        (void)gpuGetLastError();
        size_t free_b = 0, total_b = 0;
        (void)gpuMemGetInfo(&free_b, &total_b);
        return celer_fail(err, CELER_ERR_OOM, "%s: out of device memory for a weight of %.1f MiB (%.1f MiB free of "
                          "%.1f); use a smaller model or a lower --ctx", CELER_GPU_NAME, (double)bytes / 1048576.0,
                          (double)free_b / 1048576.0, (double)total_b / 1048576.0);
    }
    g->weights[g->n_weights++] = arena;
    g->arena_total += size;
    *out = arena, g->arena_next = (char *)arena + need, g->arena_left = size - need;
    return CELER_OK;
}

/* Uploads synchronously (the host source is a mapped file or staging memory reused at once). */
static celer_status put(gpu_backend *g, void *dst, const void *src, size_t n, celer_error *err)
{
    GPU_TRY(g, err, gpuMemcpyAsync(dst, src, n, gpuMemcpyHostToDevice, g->stream), "weight upload");
    if (gpu_sync(g, err)) return err->code;
    progress(g, n);
    return CELER_OK;
}

/* Fills the first `used` bytes of n device rows (rb bytes apart) from host rows r0 .. r0 + n of w. */
typedef void (*row_fill_fn)(const celer_weight *w, int64_t r0, int64_t n, size_t rb, char *h);

/* Rearranging rows on the host bounded a model's upload: one thread took ~0.5 GB/s of Q4_0 with
 * its block's sizes read at run time (a 30B-A3B's 17 GB in ~35 s on the H200's host), ~1.9 GB/s
 * with them fixed at compile time (fill_split_t), and the threads of LOAD_THREADS share each buffer's
 * rows while the buffer before it is copied. LOAD_BYTES a buffer, pinned. */
enum { LOAD_THREADS = 8, LOAD_BYTES = 64 << 20 };

typedef struct {
    const celer_weight *w;
    row_fill_fn         fill;
    int64_t             r0, n;
    size_t              rb, used;
    char               *h;
} load_job;

static void load_slice(void *ctx, int ith, int nth)
{
    const load_job *j = (const load_job *)ctx;
    int64_t         a, b;
    celer_pool_slice(j->n, ith, nth, &a, &b);
    if (a >= b) return;
    j->fill(j->w, j->r0 + a, b - a, j->rb, j->h + (size_t)a * j->rb);
    for (int64_t r = a; r < b; r++) memset(j->h + (size_t)r * j->rb + j->used, 0, j->rb - j->used); /* padding */
}

static celer_status load_setup(gpu_backend *g, celer_error *err)
{
    if (g->load_buf[1]) return CELER_OK;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int  n    = cpus < 1 ? 1 : cpus > LOAD_THREADS ? LOAD_THREADS : (int)cpus;
    if (!g->load_pool && celer_pool_init(&g->load_pool, n, err)) return err->code;
    for (int i = 0; i < 2; i++) {
        if (!g->load_done[i]) GPU_TRY(g, err, gpuEventCreate(&g->load_done[i]), "an event for weight uploads");
        if (!g->load_buf[i])
            GPU_TRY(g, err, gpuHostAlloc((void **)&g->load_buf[i], LOAD_BYTES), "pinned host memory for weight uploads");
    }
    return CELER_OK;
}

/* Uploads w's rows (rb bytes each on the device, the first `used` of them filled) in the
 * arrangement fill makes, a pinned buffer at a time. */
static celer_status load_rows(gpu_backend *g, celer_weight *w, size_t rb, size_t used, row_fill_fn fill, int layout,
                              celer_error *err)
{
    void *dst;
    if (rb > LOAD_BYTES)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: a weight row of %zu bytes (at most %d)", CELER_GPU_NAME, rb,
                          (int)LOAD_BYTES);
    if (load_setup(g, err) || weight_alloc(g, rb * (size_t)w->rows, &dst, err)) return err->code;
    const int64_t chunk = (int64_t)(LOAD_BYTES / rb); /* rows a buffer */
    for (int64_t r0 = 0; r0 < w->rows; r0 += chunk) {
        const int i = g->load_next;
        g->load_next ^= 1;
        if (g->load_busy[i] && gpu_sync_event(g, g->load_done[i], err)) return err->code; /* its last copy */
        load_job j = {w, fill, r0, w->rows - r0 < chunk ? w->rows - r0 : chunk, rb, used, g->load_buf[i]};
        celer_pool_run(g->load_pool, load_slice, &j);
        GPU_TRY(g, err, gpuMemcpyAsync((char *)dst + (size_t)r0 * rb, j.h, (size_t)j.n * rb, gpuMemcpyHostToDevice,
                                       g->stream), "weight upload");
        GPU_TRY(g, err, gpuEventRecord(g->load_done[i], g->stream), "weight upload");
        g->load_busy[i] = true;
        progress(g, (size_t)j.n * rb);
    }
    w->data   = dst;
    w->layout = layout;
    return CELER_OK;
}

/* 4-bit affine codes, 32 values (16 bytes) a chunk: MLX keeps value v in byte v / 2 (the low
 * nibble for even v); the device's byte i holds values i (low nibble) and i + 16, as Q4_0's,
 * so that a chunk's codes meet the activations' words without shuffles (gpu_matvec.cu). */
static void split_nibbles(const uint8_t *src, size_t bytes, uint8_t *dst)
{
    for (size_t c = 0; c < bytes; c += 16)
        for (int i = 0; i < 16; i++) {
            const int lo = (src[c + i / 2] >> (4 * (i % 2))) & 0x0f, v = i + 16;
            const int hi = (src[c + v / 2] >> (4 * (v % 2))) & 0x0f;
            dst[c + i]   = (uint8_t)(lo | hi << 4);
        }
}

static void fill_mlx(const celer_weight *w, int64_t r0, int64_t n, size_t rb, char *h)
{
    const celer_mlx_quant_data *d  = &w->mlx_data;
    gpu_mlx_row                 L  = gpu_mlx_row_layout(&w->mlx);
    const size_t                es = w->mlx.dtype == CELER_ST_F32 ? 4 : 2; /* an affine scale's bytes */
    const bool split = w->mlx.mode == CELER_HF_QUANT_AFFINE && w->mlx.bits == 4;
    for (int64_t r = 0; r < n; r++) {
        char       *row = h + (size_t)r * rb;
        const char *s = (const char *)d->scales + (size_t)(r0 + r) * L.scales;
        const char *c = (const char *)d->weight + (size_t)(r0 + r) * L.codes;
        if (split) split_nibbles((const uint8_t *)c, L.codes, (uint8_t *)row);
        else memcpy(row, c, L.codes);
        memset(row + L.codes, 0, L.scales_at - L.codes);
        char *sr = row + L.scales_at;
        if (!L.biases) {
            memcpy(sr, s, L.scales);
            continue;
        }
        const char *b = (const char *)d->biases + (size_t)(r0 + r) * L.biases;
        for (size_t g = 0; g < L.scales / es; g++) { /* group g: its scale, then its bias */
            memcpy(sr + 2 * es * g, s + es * g, es);
            memcpy(sr + 2 * es * g + es, b + es * g, es);
        }
    }
}

/* A SPLIT row: the blocks' codes (bytes OFF .. OFF + LEN of each block of BB bytes, BE values),
 * then their other bytes in order; the sizes fixed so that each copy is a few moves
 * (GPU_SPLIT_TYPES lists them). */
template <int BE, int BB, int OFF, int LEN>
static void fill_split_t(const celer_weight *w, int64_t r0, int64_t n, size_t rb, char *h)
{
    constexpr int hb = BB - LEN, tail = hb - OFF;
    const int64_t nb = w->cols / BE;
    for (int64_t r = 0; r < n; r++) {
        const char *src = (const char *)w->data + (size_t)(r0 + r) * (size_t)(nb * BB);
        char       *codes = h + (size_t)r * rb, *hdr = codes + nb * LEN;
        for (int64_t b = 0; b < nb; b++, src += BB) {
            memcpy(codes + b * LEN, src + OFF, LEN);
            memcpy(hdr + b * hb, src, OFF);
            if (tail) memcpy(hdr + b * hb + OFF, src + OFF + LEN, tail);
        }
    }
}

/* Q6_K in unit order (q6k_order.h): a row's codes, then its scales, then its d values. */
static void fill_q6k(const celer_weight *w, int64_t r0, int64_t n, size_t rb, char *h)
{
    const int64_t nb = w->cols / 256;
    for (int64_t r = 0; r < n; r++) {
        const uint8_t *src   = (const uint8_t *)w->data + (size_t)(r0 + r) * (size_t)(nb * 210);
        uint8_t       *codes = (uint8_t *)h + (size_t)r * rb, *sc = codes + 192 * nb, *d = sc + 16 * nb;
        for (int64_t b = 0; b < nb; b++) q6k_order_block(src + 210 * b, codes + 192 * b, sc + 16 * b, d + 2 * b);
    }
}

/* The fill of a SPLIT type (Q6_K's in unit order); NULL for the others. */
static row_fill_fn fill_of(celer_ggml_type t)
{
    switch (t) {
#define FILL_CASE(T, BE, BB, OFF, LEN)                                                                                \
    case T: return T == CELER_GGML_Q6_K ? fill_q6k : fill_split_t<BE, BB, OFF, LEN>;
        GPU_SPLIT_TYPES(FILL_CASE)
#undef FILL_CASE
    default: return NULL;
    }
}

static celer_status load_mlx(gpu_backend *g, celer_weight *w, celer_error *err)
{
    const celer_mlx_quant      *q = &w->mlx;
    const celer_mlx_quant_data *d = &w->mlx_data;
    celer_mlx_quant_shapes      s;
    if (celer_mlx_quant_get_shapes(q, &s, err)) return err->code;
    if (q->rows != w->rows || q->cols != w->cols || !d->weight || d->weight_bytes != s.weight_bytes || !d->scales ||
        d->scales_bytes != s.scales_bytes ||
        (s.has_biases ? !d->biases || d->biases_bytes != s.biases_bytes : d->biases != NULL))
        return celer_fail(err, CELER_ERR_INVALID, "%s: an MLX weight's arrays do not match its %lld x %lld shape",
                          CELER_GPU_NAME, (long long)w->rows, (long long)w->cols);
    const gpu_mlx_row L = gpu_mlx_row_layout(q);
    return load_rows(g, w, L.row, L.scales_at + L.scales + L.biases, fill_mlx, GPU_LAYOUT_MLX_ROWS, err);
}

celer_status gpu_weight_load(celer_backend *be, celer_weight *w, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (w->type == CELER_WEIGHT_MLX) return load_mlx(g, w, err);
    if (!w->data) return CELER_OK; /* absent */
    const celer_ggml_type_info *ti = celer_ggml_type_get(w->type);
    if (!ti || !gguf_type_native(w->type))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: weights of type %s have no GPU kernel; requantize to Q4_0, "
                          "Q4_K, Q5_K, Q6_K or Q8_0, or use --backend cpu", CELER_GPU_NAME, ti ? ti->name : "?");
    if (w->cols % ti->block_elems)
        return celer_fail(err, CELER_ERR_FORMAT, "%s: a %s row of %lld values is not whole blocks", CELER_GPU_NAME,
                          ti->name, (long long)w->cols);
    gpu_split sp;
    if (gpu_split_of(w->type, &sp)) {
        const size_t used = (size_t)(w->cols / sp.block_elems) * (size_t)sp.block_bytes;
        return load_rows(g, w, gpu_row_bytes(w), used, fill_of(w->type), GPU_LAYOUT_SPLIT, err);
    }
    size_t bytes = (size_t)w->rows * gpu_row_bytes(w);
    void  *dst;
    if (weight_alloc(g, bytes, &dst, err) || put(g, dst, w->data, bytes, err)) return err->code;
    w->data   = dst;
    w->layout = GPU_LAYOUT_STORED;
    return CELER_OK;
}

celer_status gpu_weight_view(celer_backend *be, const celer_weight *w, int64_t row0, int64_t rows, celer_weight *view,
                             celer_error *err)
{
    (void)be;
    if (row0 < 0 || rows <= 0 || row0 + rows > w->rows)
        return celer_fail(err, CELER_ERR_INVALID, "%s: rows %lld .. %lld of a %lld-row weight", CELER_GPU_NAME,
                          (long long)row0, (long long)(row0 + rows), (long long)w->rows);
    bool   mlx = w->type == CELER_WEIGHT_MLX;
    size_t rb  = gpu_row_bytes(w);
    *view      = *w;
    view->rows = rows;
    view->data = (const char *)w->data + (size_t)row0 * rb;
    if (mlx) {
        view->mlx_data = celer_mlx_quant_data_rows(&w->mlx_data, w->rows, row0, rows);
        view->mlx.rows = rows;
    }
    return CELER_OK;
}

void gpu_weights_free(gpu_backend *g)
{
    for (int i = 0; i < 2; i++) { /* gpu_free synchronized the stream: no copy reads them */
        if (g->load_buf[i]) (void)gpuFreeHost(g->load_buf[i]);
        if (g->load_done[i]) (void)gpuEventDestroy(g->load_done[i]);
        g->load_buf[i] = NULL, g->load_done[i] = NULL, g->load_busy[i] = false;
    }
    celer_pool_free(g->load_pool);
    g->load_pool = NULL;
    for (size_t i = 0; i < g->n_weights; i++) (void)gpuFree(g->weights[i]);
    free(g->weights);
    g->weights = NULL, g->n_weights = g->cap_weights = 0;
    g->arena_next = NULL, g->arena_left = 0, g->arena_total = 0;
}
