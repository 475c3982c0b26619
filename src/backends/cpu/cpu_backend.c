/* The CPU backend: a thread pool and the ops table. Weights stay views into the mapped file,
 * except matrices of the types whose kernels run faster on 16 interleaved rows (repack.h) and
 * MLX-quantized matrices (repack_mlx.h: scales beside codes, 16 rows interleaved where AVX-512
 * VNNI runs), which are packed once, at load, into memory the backend owns, at their size. */
#include "backends/cpu/cpu_backend.h"

#include "backends/cpu/matmul.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/repack_mlx.h"
#include "core/error.h"
#include "quant/dequant.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef struct {
    celer_backend     base;
    celer_pool       *pool;
    celer_cpu_scratch scratch; /* quantized activations of the matmul */
    void             *work;    /* cpu_work */
    size_t            work_size;
    struct packed {
        void  *p;
        size_t bytes;
    } *packed; /* weights packed at load (mapped memory), unmapped with the backend */
    size_t n_packed, cap_packed;
} cpu_backend;

celer_pool *cpu_pool(celer_backend *be) { return ((cpu_backend *)be)->pool; }
int         cpu_isa(celer_backend *be) { return (int)((cpu_backend *)be)->scratch.isa; }

static int cpu_n_threads(celer_backend *be) { return celer_pool_size(cpu_pool(be)); }

static void cpu_free(celer_backend *be)
{
    cpu_backend *c = (cpu_backend *)be;
    if (!c) return;
    celer_pool_free(c->pool);
    celer_cpu_scratch_free(&c->scratch);
    free(c->work);
    for (size_t i = 0; i < c->n_packed; i++) munmap(c->packed[i].p, c->packed[i].bytes);
    free(c->packed);
    free(c);
}

static celer_status cpu_alloc(celer_backend *be, size_t bytes, void **out, celer_error *err)
{
    (void)be;
    *out = calloc(1, bytes ? bytes : 1);
    if (!*out) return celer_fail(err, CELER_ERR_OOM, "cpu: cannot allocate %zu bytes", bytes);
    return CELER_OK;
}

static void cpu_release(celer_backend *be, void *p)
{
    (void)be;
    free(p);
}

typedef struct {
    celer_ggml_type type;
    const char     *src;
    char           *dst;
    int64_t         rows, k;
} pack_job;

/* This thread's whole groups; the last thread also copies the rows after them. */
static void pack_slice(void *ctx, int ith, int nth)
{
    const pack_job *j      = ctx;
    int64_t         groups = j->rows / CELER_R16_ROWS, g0, g1;
    const celer_ggml_type_info *ti = celer_ggml_type_get(j->type);
    size_t rb = (size_t)(j->k / ti->block_elems) * ti->block_bytes;
    size_t gb = (size_t)(j->k / ti->block_elems) * celer_cpu_r16_block_bytes(j->type);
    celer_pool_slice(groups, ith, nth, &g0, &g1);
    if (g0 < g1)
        celer_cpu_r16_pack(j->type, j->src + (size_t)(g0 * CELER_R16_ROWS) * rb, (g1 - g0) * CELER_R16_ROWS, j->k,
                           j->dst + (size_t)g0 * gb);
    if (ith == nth - 1)
        celer_cpu_r16_pack(j->type, j->src + (size_t)(groups * CELER_R16_ROWS) * rb, j->rows - groups * CELER_R16_ROWS,
                           j->k, j->dst + (size_t)groups * gb);
}

/* Memory for a packed weight, owned by the backend: mapped, with huge pages where the kernel
 * gives them (packing an 8B model otherwise spends most of its time faulting in a million 4 KiB
 * pages). */
static celer_status packed_alloc(cpu_backend *c, size_t bytes, char **out, celer_error *err)
{
    if (c->n_packed == c->cap_packed) {
        size_t         cap = c->cap_packed ? 2 * c->cap_packed : 64;
        struct packed *p   = realloc(c->packed, cap * sizeof *p);
        if (!p) return celer_fail(err, CELER_ERR_OOM, "cpu: out of memory for the list of packed weights");
        c->packed = p, c->cap_packed = cap;
    }
    char *dst = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (dst == MAP_FAILED) return celer_fail(err, CELER_ERR_OOM, "cpu: out of memory for %zu bytes of packed weights", bytes);
    madvise(dst, bytes, MADV_HUGEPAGE);
    c->packed[c->n_packed++] = (struct packed){dst, bytes};
    *out                     = dst;
    return CELER_OK;
}

typedef struct {
    const celer_mlx_quant      *q;
    const celer_mlx_quant_data *d;
    int                         L; /* rows per set: 16 (MLX_R16) or 1 */
    char                       *dst;
} mlx_pack_job;

/* This thread's sets of L rows; the last thread also the rows after the last whole set. */
static void mlx_pack_slice(void *ctx, int ith, int nth)
{
    const mlx_pack_job *j    = ctx;
    int64_t             sets = j->q->rows / j->L, s0, s1;
    size_t              rb   = celer_cpu_mlx_row_bytes(j->q);
    celer_pool_slice(sets, ith, nth, &s0, &s1);
    if (s0 < s1) celer_cpu_mlx_pack(j->q, j->d, j->L, s0 * j->L, (s1 - s0) * j->L, j->dst + (size_t)(s0 * j->L) * rb);
    if (ith == nth - 1 && sets * j->L < j->q->rows)
        celer_cpu_mlx_pack(j->q, j->d, 1, sets * j->L, j->q->rows - sets * j->L, j->dst + (size_t)(sets * j->L) * rb);
}

/* An MLX-quantized matrix: its three arrays checked against its format, then packed. */
static celer_status weight_load_mlx(cpu_backend *c, celer_weight *w, celer_error *err)
{
    const celer_mlx_quant      *q = &w->mlx;
    const celer_mlx_quant_data *d = &w->mlx_data;
    celer_mlx_quant_shapes      s;
    char                        desc[64];
    if (celer_mlx_quant_get_shapes(q, &s, err)) return err->code;
    celer_mlx_quant_describe(q, desc, sizeof desc);
    if (q->rows != w->rows || q->cols != w->cols || !d->weight || d->weight_bytes != s.weight_bytes || !d->scales ||
        d->scales_bytes != s.scales_bytes || (s.has_biases ? !d->biases || d->biases_bytes != s.biases_bytes : d->biases != NULL))
        return celer_fail(err, CELER_ERR_INVALID, "cpu: a %lld x %lld weight in %s has arrays of %zu, %zu and %zu bytes; "
                          "the format needs %llu, %llu and %llu", (long long)w->rows, (long long)w->cols, desc,
                          d->weight_bytes, d->scales_bytes, d->biases_bytes, (unsigned long long)s.weight_bytes,
                          (unsigned long long)s.scales_bytes, (unsigned long long)s.biases_bytes);
    bool  r16 = w->rows >= CELER_R16_ROWS && celer_cpu_mlx_r16_available(c->scratch.isa, q);
    char *dst;
    if (packed_alloc(c, celer_cpu_mlx_size(q), &dst, err)) return err->code;
    mlx_pack_job j = {q, d, r16 ? CELER_R16_ROWS : 1, dst};
    celer_pool_run(c->pool, mlx_pack_slice, &j);
    w->data   = dst;
    w->layout = r16 ? CELER_CPU_LAYOUT_MLX_R16 : CELER_CPU_LAYOUT_MLX_ROWS;
    return CELER_OK;
}

static celer_status cpu_weight_load(celer_backend *be, celer_weight *w, celer_error *err)
{
    cpu_backend *c = (cpu_backend *)be;
    if (w->type == CELER_WEIGHT_MLX) return weight_load_mlx(c, w, err);
    if (w->data && (!celer_dequant_supported(w->type) || (w->rows > 1 && !celer_cpu_matmul_supported(w->type))))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "cpu: weights of type %s are not supported",
                          celer_ggml_type_get(w->type)->name);
    w->layout = CELER_CPU_LAYOUT_STORED;
    if (!w->data || w->rows < CELER_R16_ROWS || !celer_cpu_r16_available(c->scratch.isa, w->type)) return CELER_OK;
    char *dst;
    if (packed_alloc(c, celer_cpu_r16_size(w->type, w->rows, w->cols), &dst, err)) return err->code;
    pack_job j = {w->type, w->data, dst, w->rows, w->cols};
    celer_pool_run(c->pool, pack_slice, &j);
    w->data   = dst;
    w->layout = CELER_CPU_LAYOUT_R16;
    return CELER_OK;
}

/* A view starts at a row of its own (a set of 16 in the interleaved layouts) and ends at one,
 * or at the end of w, whose rows past the last whole set are stored after the sets. */
static celer_status cpu_weight_view(celer_backend *be, const celer_weight *w, int64_t row0, int64_t rows,
                                    celer_weight *view, celer_error *err)
{
    (void)be;
    bool   mlx = w->type == CELER_WEIGHT_MLX;
    bool   r16 = w->layout == CELER_CPU_LAYOUT_R16 || w->layout == CELER_CPU_LAYOUT_MLX_R16;
    size_t rb;
    if (row0 < 0 || rows <= 0 || row0 + rows > w->rows)
        return celer_fail(err, CELER_ERR_INVALID, "cpu: rows %lld .. %lld of a %lld-row weight", (long long)row0,
                          (long long)(row0 + rows), (long long)w->rows);
    if (r16 && (row0 % CELER_R16_ROWS || (rows % CELER_R16_ROWS && row0 + rows != w->rows)))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "cpu: rows %lld .. %lld cut sets of 16 interleaved rows",
                          (long long)row0, (long long)(row0 + rows));
    if (mlx) {
        rb = celer_cpu_mlx_row_bytes(&w->mlx);
    } else {
        const celer_ggml_type_info *ti = celer_ggml_type_get(w->type);
        rb = (size_t)(w->cols / ti->block_elems) * ti->block_bytes;
    }
    size_t at = (size_t)row0 * rb;
    if (!mlx && r16) /* whole sets before row0 */
        at = (size_t)(row0 / CELER_R16_ROWS) * (size_t)(w->cols / celer_ggml_type_get(w->type)->block_elems) *
             celer_cpu_r16_block_bytes(w->type);
    *view      = *w;
    view->rows = rows;
    view->data = (const char *)w->data + at;
    if (mlx) { /* the host arrays too */
        view->mlx_data = celer_mlx_quant_data_rows(&w->mlx_data, w->rows, row0, rows);
        view->mlx.rows = rows;
    }
    return CELER_OK;
}

static celer_status cpu_read(celer_backend *be, const void *src, void *dst, size_t n, celer_error *err)
{
    (void)be, (void)err;
    memcpy(dst, src, n);
    return CELER_OK;
}

static celer_status cpu_argmax(celer_backend *be, const float *x, int64_t rows, int64_t n, int32_t *ids,
                               celer_error *err)
{
    (void)be, (void)err;
    for (int64_t r = 0; r < rows; r++) ids[r] = (int32_t)celer_argmax_row(x + r * n, n);
    return CELER_OK;
}

static celer_status cpu_write(celer_backend *be, void *dst, const void *src, size_t n, celer_error *err)
{
    (void)be, (void)err;
    memcpy(dst, src, n);
    return CELER_OK;
}

static celer_status cpu_memory(celer_backend *be, uint64_t *free_bytes, uint64_t *total_bytes, celer_error *err)
{
    (void)be, (void)err;
    celer_host_info h;
    celer_host_info_read(&h);
    *free_bytes = h.mem_available, *total_bytes = h.mem_total;
    return CELER_OK;
}

typedef struct {
    char       *dst;
    const char *src;
    size_t      n;
} copy_job;

static void copy_slice(void *ctx, int ith, int nth)
{
    const copy_job *j = ctx;
    int64_t         c0, c1; /* in 4 KiB pages, so slices do not share a page */
    celer_pool_slice((int64_t)((j->n + 4095) / 4096), ith, nth, &c0, &c1);
    size_t a = (size_t)c0 * 4096, b = (size_t)c1 * 4096 < j->n ? (size_t)c1 * 4096 : j->n;
    if (a < b) memcpy(j->dst + a, j->src + a, b - a);
}

/* Large copies are split over the pool: one core does not reach the memory bandwidth. */
static celer_status cpu_copy(celer_backend *be, void *dst, const void *src, size_t n, celer_error *err)
{
    cpu_backend *c = (cpu_backend *)be;
    if (n < ((size_t)4 << 20) || celer_pool_size(c->pool) < 2) return cpu_read(be, src, dst, n, err);
    copy_job j = {dst, src, n};
    celer_pool_run(c->pool, copy_slice, &j);
    return CELER_OK;
}

/* ---- matmul ---------------------------------------------------------------------------- */

celer_status cpu_scratch(celer_backend *be, size_t bytes, celer_cpu_scratch **out, celer_error *err)
{
    cpu_backend *c = (cpu_backend *)be;
    if (bytes > c->scratch.size) {
        celer_cpu_isa isa = c->scratch.isa;
        celer_cpu_scratch_free(&c->scratch);
        if (celer_cpu_scratch_init(&c->scratch, isa, bytes, err)) return err->code;
    }
    *out = &c->scratch;
    return CELER_OK;
}

celer_status cpu_work(celer_backend *be, size_t bytes, void **out, celer_error *err)
{
    cpu_backend *c = (cpu_backend *)be;
    if (bytes > c->work_size) {
        size_t n = (bytes + 63) / 64 * 64;
        free(c->work);
        c->work_size = 0;
        if (!(c->work = aligned_alloc(64, n)))
            return celer_fail(err, CELER_ERR_OOM, "cpu: out of memory for %zu bytes of work memory", n);
        c->work_size = n;
    }
    *out = c->work;
    return CELER_OK;
}

celer_status cpu_matmul_op(celer_backend *be, const celer_weight *w, const float *x, int64_t T, float *y,
                           celer_error *err)
{
    cpu_backend       *c   = (cpu_backend *)be;
    bool               mlx = w->type == CELER_WEIGHT_MLX;
    celer_cpu_scratch *s   = NULL;
    if (cpu_scratch(be, mlx ? celer_cpu_mlx_matmul_scratch_size(&w->mlx, T)
                            : celer_cpu_matmul_scratch_size(w->type, w->cols, T), &s, err))
        return err->code;
    if (mlx) return celer_cpu_matmul_mlx(c->pool, &w->mlx, (celer_cpu_layout)w->layout, w->data, x, T, y, s, err);
    return celer_cpu_matmul(c->pool, w->type, (celer_cpu_layout)w->layout, w->data, w->rows, w->cols, x, T, y, s, err);
}

const celer_backend_ops celer_cpu_ops = {
    .name        = "cpu",
    .kind        = CELER_BACKEND_CPU,
    .free        = cpu_free,
    .n_threads   = cpu_n_threads,
    .alloc       = cpu_alloc,
    .release     = cpu_release,
    .weight_load = cpu_weight_load,
    .weight_view = cpu_weight_view,
    .read        = cpu_read,
    .argmax      = cpu_argmax,
    .write       = cpu_write,
    .copy        = cpu_copy,
    .memory      = cpu_memory,
    .get_rows    = cpu_get_rows,
    .rmsnorm     = cpu_rmsnorm,
    .matmul      = cpu_matmul_op,
    .add_bias    = cpu_add_bias,
    .rope        = cpu_rope,
    .kv_write    = cpu_kv_write,
    .attention   = cpu_attention,
    .add         = cpu_add,
    .glu         = cpu_glu,
    .scale       = cpu_scale,
    .mul_sigmoid = cpu_mul_sigmoid,
    .moe_route   = cpu_moe_route,
    .moe_ffn     = cpu_moe_ffn,
};

/* The best kernel level of this CPU, or the one CELER_CPU_ISA names (to compare levels). */
static celer_status pick_isa(const celer_host_info *h, celer_cpu_isa *isa, celer_error *err)
{
    const char *want = getenv("CELER_CPU_ISA");
    *isa             = celer_cpu_isa_best(h);
    if (!want || !*want) return CELER_OK;
    for (int i = 0; i < CELER_CPU_ISA_COUNT; i++)
        if (!strcmp(want, celer_cpu_isa_name((celer_cpu_isa)i))) {
            if (!celer_cpu_isa_available((celer_cpu_isa)i, h))
                return celer_fail(err, CELER_ERR_UNSUPPORTED, "cpu: CELER_CPU_ISA=%s, but this CPU cannot run it", want);
            *isa = (celer_cpu_isa)i;
            return CELER_OK;
        }
    return celer_fail(err, CELER_ERR_INVALID, "cpu: CELER_CPU_ISA=%s is not a kernel level (ref, avx2, avx512vnni)", want);
}

celer_status celer_cpu_backend_create(celer_backend **out, const celer_backend_config *cfg, celer_error *err)
{
    *out           = NULL;
    cpu_backend *c = calloc(1, sizeof *c);
    if (!c) return celer_fail(err, CELER_ERR_OOM, "cpu: out of memory");
    c->base.ops = &celer_cpu_ops;
    int             n = cfg ? cfg->n_threads : 0;
    celer_host_info h;
    celer_host_info_read(&h);
    if (n <= 0) n = h.physical_cores > 0 ? h.physical_cores : h.logical_cpus;
    celer_cpu_isa isa;
    if (pick_isa(&h, &isa, err) || celer_pool_init(&c->pool, n, err) || celer_cpu_scratch_init(&c->scratch, isa, 0, err)) {
        cpu_free(&c->base);
        return err->code;
    }
    *out = &c->base;
    return CELER_OK;
}
