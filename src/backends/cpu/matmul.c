/* celer_cpu_matmul: quantize the activations once, then split the weight rows over the pool.
 * Each thread streams its contiguous slice of rows once per block of tokens; the block is as
 * many tokens as keep their quantized activations in L2, so for decode and for ordinary prefill
 * chunks every weight byte is read from memory once per call. */
#include "backends/cpu/matmul.h"

#include "backends/cpu/dot.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/repack_mlx.h"
#include "core/error.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum {
    SCRATCH_ALIGN  = 64,
    ACT_L2_BUDGET  = 512 * 1024, /* bytes of quantized activations a token block may hold */
};

/* ---- instruction-set levels ------------------------------------------------------------ */

const char *celer_cpu_isa_name(celer_cpu_isa isa)
{
    static const char *const names[CELER_CPU_ISA_COUNT] = {"ref", "avx2", "avx512vnni"};
    return (unsigned)isa < CELER_CPU_ISA_COUNT ? names[isa] : "?";
}

bool celer_cpu_isa_available(celer_cpu_isa isa, const celer_host_info *h)
{
    switch (isa) {
    case CELER_CPU_ISA_REF: return true;
#if defined(__x86_64__)
    case CELER_CPU_ISA_AVX2: return h->avx2 && h->fma && h->f16c;
    case CELER_CPU_ISA_AVX512VNNI:
        return h->avx2 && h->fma && h->f16c && h->avx512f && h->avx512bw && h->avx512vl && h->avx512_vnni;
#endif
    default: return false;
    }
}

celer_cpu_isa celer_cpu_isa_best(const celer_host_info *h)
{
    for (int i = CELER_CPU_ISA_COUNT - 1; i > 0; i--)
        if (celer_cpu_isa_available((celer_cpu_isa)i, h)) return (celer_cpu_isa)i;
    return CELER_CPU_ISA_REF;
}

static celer_cpu_gemm_fn gemm_at(celer_cpu_isa isa, celer_ggml_type wtype)
{
    switch (isa) {
    case CELER_CPU_ISA_REF: return celer_cpu_gemm_ref(wtype);
#if defined(__x86_64__)
    case CELER_CPU_ISA_AVX2: return celer_cpu_gemm_avx2(wtype);
    case CELER_CPU_ISA_AVX512VNNI: return celer_cpu_gemm_avx512vnni(wtype);
#endif
    default: return NULL;
    }
}

celer_cpu_isa celer_cpu_isa_for_type(celer_cpu_isa isa, celer_ggml_type wtype)
{
    if ((unsigned)isa >= CELER_CPU_ISA_COUNT) return CELER_CPU_ISA_COUNT;
    for (int i = isa; i >= 0; i--)
        if (gemm_at((celer_cpu_isa)i, wtype)) return (celer_cpu_isa)i;
    return CELER_CPU_ISA_COUNT;
}

bool celer_cpu_matmul_supported(celer_ggml_type wtype) { return celer_cpu_act_of(wtype) != CELER_CPU_ACT_NONE; }

bool celer_cpu_r16_available(celer_cpu_isa isa, celer_ggml_type wtype)
{
    return isa >= CELER_CPU_ISA_AVX512VNNI && isa < CELER_CPU_ISA_COUNT && celer_cpu_r16_supported(wtype);
}

/* ---- scratch ----------------------------------------------------------------------------- */

/* Bytes of one token's activations in the kernel's format. */
static size_t act_row_bytes(celer_cpu_act act, int64_t k)
{
    switch (act) {
    case CELER_CPU_ACT_F32: return (size_t)k * sizeof(float);
    case CELER_CPU_ACT_X32: return CELER_CPU_X32_SUMS_AT(k / 32) + (size_t)(k / 32) * sizeof(int32_t);
    case CELER_CPU_ACT_X256: return (size_t)(k / 256) * sizeof(celer_cpu_x256);
    case CELER_CPU_ACT_X32H: return CELER_CPU_X32_SUMS_AT(k / 32) + (size_t)(k / 16) * sizeof(int32_t);
    default: return 0;
    }
}

size_t celer_cpu_matmul_scratch_size(celer_ggml_type wtype, int64_t k, int64_t T)
{
    celer_cpu_act act = celer_cpu_act_of(wtype);
    if (act == CELER_CPU_ACT_F32 || act == CELER_CPU_ACT_NONE || k <= 0 || T <= 0) return 0;
    return act_row_bytes(act, k) * (size_t)T;
}

celer_status celer_cpu_scratch_init(celer_cpu_scratch *s, celer_cpu_isa isa, size_t bytes, celer_error *err)
{
    *s = (celer_cpu_scratch){0};
    celer_host_info h = {0};
    celer_host_info_read(&h);
    if ((unsigned)isa >= CELER_CPU_ISA_COUNT || !celer_cpu_isa_available(isa, &h))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "cpu: this CPU cannot run the '%s' kernels; use '%s'",
                          celer_cpu_isa_name(isa), celer_cpu_isa_name(celer_cpu_isa_best(&h)));
    s->isa = isa;
    if (bytes) {
        size_t n = (bytes + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
        s->buf   = aligned_alloc(SCRATCH_ALIGN, n);
        if (!s->buf) return celer_fail(err, CELER_ERR_OOM, "cpu: out of memory for %zu bytes of matmul scratch", n);
        s->size = n;
    }
    return CELER_OK;
}

void celer_cpu_scratch_free(celer_cpu_scratch *s)
{
    if (!s) return;
    free(s->buf);
    *s = (celer_cpu_scratch){0};
}

/* ---- the two passes ------------------------------------------------------------------------ */

typedef struct {
    celer_cpu_gemm_fn     gemm;     /* rows in the storage layout (all, or the r16 tail) */
    celer_cpu_gemm_fn     gemm_r16; /* groups of 16 rows in the r16 layout, or NULL */
    const celer_mlx_quant *q;       /* MLX weights: the format, and these kernels in place of gemm */
    celer_cpu_mlx_gemm_fn mgemm, mgemm_r16;
    bool                  r16;      /* gemm_r16 or mgemm_r16 runs the whole groups */
    int64_t               groups;   /* r16: whole groups; the rows after them are stored as is */
    size_t                gb;       /* r16: bytes per group */
    celer_cpu_quantize_fn quantize;
    const char           *W;      /* (rows, k) */
    size_t                wb;     /* bytes per weight row */
    int64_t               rows, k, T;
    const float          *X;      /* (T, k) */
    char                 *xq;     /* (T, xb) quantized activations, or X itself */
    size_t                xb;     /* bytes per activation row */
    int64_t               blk;    /* elements per activation block */
    int64_t               tblock; /* tokens per pass over the weights */
    float                *Y;      /* (T, rows) */
    /* grouped (celer_cpu_matmul_grouped): matrix s multiplies activation rows seg_x[s] .. seg_x[s + 1] */
    int64_t               n_seg;
    const void *const    *seg_w;  /* (n_seg) */
    const int64_t        *seg_x;  /* (n_seg + 1) */
    const int32_t        *xrow;   /* (T) activation row t is X row xrow[t]; NULL: row t */
    _Atomic int64_t      *next;   /* the next unclaimed unit */
} job;

/* Quantizes this thread's share of the T · (k / blk) activation blocks. */
static void quantize_job(void *ctx, int ith, int nth)
{
    const job *j  = ctx;
    int64_t    nb = j->k / j->blk, b0, b1;
    celer_pool_slice(j->T * nb, ith, nth, &b0, &b1);
    while (b0 < b1) {
        int64_t t = b0 / nb, i = b0 % nb, n = nb - i < b1 - b0 ? nb - i : b1 - b0;
        j->quantize(j->X + (j->xrow ? j->xrow[t] : t) * j->k, j->xq + t * j->xb, nb, i, i + n);
        b0 += n;
    }
}

/* Rows r0 .. r1 (at w; in groups of 16 when r16) for tokens x0 .. x1, a token block at a time. */
static void gemm_span(const job *j, bool r16, const char *w, size_t wb, int64_t r0, int64_t r1, int64_t x0, int64_t x1)
{
    for (int64_t t0 = x0; t0 < x1; t0 += j->tblock) {
        int64_t     nt = x1 - t0 < j->tblock ? x1 - t0 : j->tblock;
        const char *x  = j->xq + t0 * j->xb;
        float      *y  = j->Y + t0 * j->rows + r0;
        if (j->q) (r16 ? j->mgemm_r16 : j->mgemm)(j->q, w, wb, r1 - r0, x, j->xb, nt, y, (size_t)j->rows);
        else (r16 ? j->gemm_r16 : j->gemm)(j->k, w, wb, r1 - r0, x, j->xb, nt, y, (size_t)j->rows);
    }
}

static void gemm_rows(const job *j, bool r16, const char *w, size_t wb, int64_t r0, int64_t r1)
{
    gemm_span(j, r16, w, wb, r0, r1, 0, j->T);
}

static void gemm_job(void *ctx, int ith, int nth)
{
    const job *j = ctx;
    int64_t    r0, r1;
    if (!j->r16) {
        celer_pool_slice(j->rows, ith, nth, &r0, &r1);
        if (r0 < r1) gemm_rows(j, false, j->W + r0 * j->wb, j->wb, r0, r1);
        return;
    }
    int64_t g0, g1, tail = j->groups * CELER_R16_ROWS;
    celer_pool_slice(j->groups, ith, nth, &g0, &g1);
    if (g0 < g1) gemm_rows(j, true, j->W + g0 * j->gb, j->gb, g0 * CELER_R16_ROWS, g1 * CELER_R16_ROWS);
    if (ith == nth - 1 && tail < j->rows) gemm_rows(j, false, j->W + j->groups * j->gb, j->wb, tail, j->rows);
}

/* Grouped: the work is n_seg matrices × units of 16 rows (a whole r16 group, or the rows after
 * the last one). Threads claim runs of GROUPED_RUN units from a shared counter rather than a
 * fixed half each: a decode step runs hundreds of these small products, and with fixed shares
 * the thread whose memory stream ran slower held the other at the barrier ~10% of the time. */
enum { GROUPED_RUN = 4 };

static void grouped_units(const job *j, int64_t u0, int64_t u1)
{
    int64_t upm = (j->rows + CELER_R16_ROWS - 1) / CELER_R16_ROWS, whole = j->r16 ? j->groups : 0;
    for (int64_t s = u0 / upm; s < j->n_seg && s * upm < u1; s++) {
        int64_t     a = u0 > s * upm ? u0 - s * upm : 0, b = u1 < (s + 1) * upm ? u1 - s * upm : upm;
        int64_t     x0 = j->seg_x[s], x1 = j->seg_x[s + 1];
        const char *w = j->seg_w[s];
        if (x0 == x1) continue;
        if (a < whole) {
            int64_t e = b < whole ? b : whole;
            gemm_span(j, true, w + a * j->gb, j->gb, a * CELER_R16_ROWS, e * CELER_R16_ROWS, x0, x1);
            a = e;
        }
        if (a < b) {
            int64_t r0 = a * CELER_R16_ROWS, r1 = b * CELER_R16_ROWS < j->rows ? b * CELER_R16_ROWS : j->rows;
            gemm_span(j, false, w + whole * j->gb + (r0 - whole * CELER_R16_ROWS) * j->wb, j->wb, r0, r1, x0, x1);
        }
    }
}

static void grouped_job(void *ctx, int ith, int nth)
{
    const job *j     = ctx;
    int64_t    total = j->n_seg * ((j->rows + CELER_R16_ROWS - 1) / CELER_R16_ROWS);
    (void)ith, (void)nth;
    for (;;) {
        int64_t u0 = atomic_fetch_add_explicit(j->next, GROUPED_RUN, memory_order_relaxed);
        if (u0 >= total) return;
        grouped_units(j, u0, u0 + GROUPED_RUN < total ? u0 + GROUPED_RUN : total);
    }
}

static celer_cpu_quantize_fn quantizer(celer_cpu_act act, celer_cpu_isa isa)
{
#if defined(__x86_64__)
    if (isa >= CELER_CPU_ISA_AVX2)
        return act == CELER_CPU_ACT_X32 ? celer_cpu_quantize_x32_avx2
             : act == CELER_CPU_ACT_X32H ? celer_cpu_quantize_x32h_avx2 : celer_cpu_quantize_x256_avx2;
#else
    (void)isa;
#endif
    return act == CELER_CPU_ACT_X32 ? celer_cpu_quantize_x32_ref
         : act == CELER_CPU_ACT_X32H ? celer_cpu_quantize_x32h_ref : celer_cpu_quantize_x256_ref;
}

/* Quantizes the activations (unless F32), then runs the kernels over the pool. */
static void run(celer_pool *pool, job *j, celer_cpu_act act, celer_cpu_scratch *scratch)
{
    if (act == CELER_CPU_ACT_F32 && j->xrow) { /* gathered into the scratch */
        j->xq = scratch->buf;
        for (int64_t t = 0; t < j->T; t++)
            memcpy(j->xq + t * j->xb, j->X + (int64_t)j->xrow[t] * j->k, j->xb);
    } else if (act == CELER_CPU_ACT_F32) {
        j->xq = (char *)j->X;
    } else {
        j->xq       = scratch->buf;
        j->blk      = act == CELER_CPU_ACT_X256 ? 256 : 32;
        j->quantize = quantizer(act, scratch->isa);
        if (pool && celer_pool_size(pool) > 1 && j->T * j->k >= 4096)
            celer_pool_run(pool, quantize_job, j);
        else
            quantize_job(j, 0, 1);
    }
    j->tblock = (int64_t)(ACT_L2_BUDGET / j->xb);
    if (j->tblock < 4) j->tblock = 4;
    celer_pool_fn fn = j->seg_w ? grouped_job : gemm_job;
    if (pool && celer_pool_size(pool) > 1)
        celer_pool_run(pool, fn, j);
    else
        fn(j, 0, 1);
}

/* Checks a (wtype, layout, rows, k) matrix by T tokens against the scratch and fills j's
 * kernels and sizes; *act is the activation format. */
static celer_status plan_gguf(job *j, celer_cpu_act *act, celer_ggml_type wtype, celer_cpu_layout layout,
                              int64_t rows, int64_t k, int64_t T, const celer_cpu_scratch *scratch, celer_error *err)
{
    const celer_ggml_type_info *ti = celer_ggml_type_get(wtype);
    *act                           = celer_cpu_act_of(wtype);
    if (*act == CELER_CPU_ACT_NONE)
        return celer_fail(err, CELER_ERR_UNSUPPORTED,
                          "cpu: matmul by %s weights is not implemented; supported: F32, F16, BF16, Q4_0, Q4_1, "
                          "Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K (convert the model to one of these)",
                          ti ? ti->name : "an unknown type");
    if (rows < 0 || T < 0 || k <= 0 || k % ti->block_elems)
        return celer_fail(err, CELER_ERR_INVALID, "cpu: matmul %s of (%lld, %lld) by %lld tokens: k must be a positive "
                          "multiple of %u", ti->name, (long long)rows, (long long)k, (long long)T, ti->block_elems);
    size_t need = celer_cpu_matmul_scratch_size(wtype, k, T);
    if (need > scratch->size)
        return celer_fail(err, CELER_ERR_INVALID, "cpu: matmul %s k=%lld T=%lld needs %zu bytes of scratch, has %zu; "
                          "size it with celer_cpu_matmul_scratch_size for the largest call", ti->name, (long long)k,
                          (long long)T, need, scratch->size);
    celer_cpu_isa level = celer_cpu_isa_for_type(scratch->isa, wtype);
    CELER_ASSERT(level < CELER_CPU_ISA_COUNT);
    celer_cpu_gemm_fn r16 = NULL;
    if (layout == CELER_CPU_LAYOUT_R16) {
        if (!celer_cpu_r16_available(scratch->isa, wtype))
            return celer_fail(err, CELER_ERR_INVALID, "cpu: %s weights in the r16 layout need the avx512vnni kernels, "
                              "the scratch runs '%s'", ti->name, celer_cpu_isa_name(scratch->isa));
#if defined(__x86_64__)
        r16 = celer_cpu_gemm_r16_avx512vnni(wtype);
#endif
    }
    *j = (job){
        .gemm     = gemm_at(level, wtype),
        .gemm_r16 = r16,
        .r16      = r16 != NULL,
        .groups   = r16 ? rows / CELER_R16_ROWS : 0,
        .gb       = r16 ? (size_t)(k / ti->block_elems) * celer_cpu_r16_block_bytes(wtype) : 0,
        .wb       = (size_t)(k / ti->block_elems) * ti->block_bytes,
        .rows     = rows,
        .k        = k,
        .T        = T,
        .xb       = act_row_bytes(*act, k),
    };
    return CELER_OK;
}

celer_status celer_cpu_matmul(celer_pool *pool, celer_ggml_type wtype, celer_cpu_layout layout, const void *W,
                              int64_t rows, int64_t k, const float *X, int64_t T, float *Y, celer_cpu_scratch *scratch,
                              celer_error *err)
{
    job           j;
    celer_cpu_act act;
    if (plan_gguf(&j, &act, wtype, layout, rows, k, T, scratch, err)) return err->code;
    if (rows == 0 || T == 0) return CELER_OK;
    j.W = W, j.X = X, j.Y = Y;
    run(pool, &j, act, scratch);
    return CELER_OK;
}

/* ---- MLX-quantized matrices ---------------------------------------------------------------- */

static celer_cpu_mlx_gemm_fn mlx_gemm_at(celer_cpu_isa isa, const celer_mlx_quant *q)
{
    switch (isa) {
    case CELER_CPU_ISA_REF: return celer_cpu_mlx_gemm_ref(q);
#if defined(__x86_64__)
    case CELER_CPU_ISA_AVX2: return celer_cpu_mlx_gemm_avx2(q);
    case CELER_CPU_ISA_AVX512VNNI: return celer_cpu_mlx_gemm_avx512vnni(q);
#endif
    default: return NULL;
    }
}

celer_cpu_isa celer_cpu_mlx_isa_for(celer_cpu_isa isa, const celer_mlx_quant *q)
{
    if ((unsigned)isa >= CELER_CPU_ISA_COUNT) return CELER_CPU_ISA_COUNT;
    for (int i = isa; i >= 0; i--)
        if (mlx_gemm_at((celer_cpu_isa)i, q)) return (celer_cpu_isa)i;
    return CELER_CPU_ISA_COUNT;
}

bool celer_cpu_mlx_r16_available(celer_cpu_isa isa, const celer_mlx_quant *q)
{
#if defined(__x86_64__)
    return isa >= CELER_CPU_ISA_AVX512VNNI && isa < CELER_CPU_ISA_COUNT && celer_cpu_mlx_gemm_r16_avx512vnni(q);
#else
    (void)isa, (void)q;
    return false;
#endif
}

size_t celer_cpu_mlx_matmul_scratch_size(const celer_mlx_quant *q, int64_t T)
{
    celer_cpu_act act = celer_cpu_mlx_act(q);
    if (act == CELER_CPU_ACT_F32 || T <= 0) return 0;
    return act_row_bytes(act, q->cols) * (size_t)T;
}

static celer_status plan_mlx(job *j, celer_cpu_act *act, const celer_mlx_quant *q, celer_cpu_layout layout, int64_t T,
                             const celer_cpu_scratch *scratch, celer_error *err)
{
    char         desc[64]; /* described only for a message */
    celer_status st = celer_mlx_quant_check(q, err);
    if (st != CELER_OK) return st;
    if (T < 0)
        return celer_fail(err, CELER_ERR_INVALID, "cpu: matmul %s by %lld tokens",
                          celer_mlx_quant_describe(q, desc, sizeof desc), (long long)T);
    *act        = celer_cpu_mlx_act(q);
    size_t need = celer_cpu_mlx_matmul_scratch_size(q, T);
    if (need > scratch->size)
        return celer_fail(err, CELER_ERR_INVALID, "cpu: matmul %s k=%lld T=%lld needs %zu bytes of scratch, has %zu; "
                          "size it with celer_cpu_mlx_matmul_scratch_size for the largest call",
                          celer_mlx_quant_describe(q, desc, sizeof desc),
                          (long long)q->cols, (long long)T, need, scratch->size);
    bool r16 = layout == CELER_CPU_LAYOUT_MLX_R16;
    if ((layout != CELER_CPU_LAYOUT_MLX_ROWS && !r16) || (r16 && !celer_cpu_mlx_r16_available(scratch->isa, q)))
        return celer_fail(err, CELER_ERR_INVALID, "cpu: %s weights in layout %d: the '%s' kernels run MLX_ROWS%s",
                          celer_mlx_quant_describe(q, desc, sizeof desc), (int)layout, celer_cpu_isa_name(scratch->isa),
                          celer_cpu_mlx_r16_available(scratch->isa, q) ? " and MLX_R16" : "");
    celer_cpu_isa level = celer_cpu_mlx_isa_for(scratch->isa, q);
    CELER_ASSERT(level < CELER_CPU_ISA_COUNT);
    size_t rb = celer_cpu_mlx_row_bytes(q);
    *j        = (job){
        .q      = q,
        .mgemm  = mlx_gemm_at(level, q),
        .r16    = r16,
        .groups = r16 ? q->rows / CELER_R16_ROWS : 0,
        .gb     = CELER_R16_ROWS * rb,
        .wb     = rb,
        .rows   = q->rows,
        .k      = q->cols,
        .T      = T,
        .xb     = act_row_bytes(*act, q->cols),
    };
#if defined(__x86_64__)
    if (r16) j->mgemm_r16 = celer_cpu_mlx_gemm_r16_avx512vnni(q);
#endif
    return CELER_OK;
}

celer_status celer_cpu_matmul_mlx(celer_pool *pool, const celer_mlx_quant *q, celer_cpu_layout layout, const void *W,
                                  const float *X, int64_t T, float *Y, celer_cpu_scratch *scratch, celer_error *err)
{
    job           j;
    celer_cpu_act act = CELER_CPU_ACT_NONE;
    if (plan_mlx(&j, &act, q, layout, T, scratch, err)) return err->code;
    if (T == 0) return CELER_OK;
    j.W = W, j.X = X, j.Y = Y;
    run(pool, &j, act, scratch);
    return CELER_OK;
}

size_t celer_cpu_matmul_grouped_scratch_size(const celer_cpu_matrix *m, int64_t T)
{
    celer_cpu_act act = m->q ? celer_cpu_mlx_act(m->q) : celer_cpu_act_of(m->wtype);
    if (T <= 0 || act == CELER_CPU_ACT_NONE) return 0;
    return act_row_bytes(act, m->k) * (size_t)T; /* f32 activations too: they are gathered */
}

celer_status celer_cpu_matmul_grouped(celer_pool *pool, const celer_cpu_matrix *m, int64_t n_seg,
                                      const void *const *W, const int64_t *seg_x, const float *X, const int32_t *xrow,
                                      float *Y, celer_cpu_scratch *scratch, celer_error *err)
{
    job           j;
    celer_cpu_act act;
    int64_t       T = n_seg > 0 ? seg_x[n_seg] : 0;
    if (n_seg < 0 || (n_seg > 0 && seg_x[0] != 0))
        return celer_fail(err, CELER_ERR_INVALID, "cpu: grouped matmul of %lld matrices must start at row 0",
                          (long long)n_seg);
    for (int64_t s = 0; s < n_seg; s++)
        if (seg_x[s + 1] < seg_x[s])
            return celer_fail(err, CELER_ERR_INVALID, "cpu: grouped matmul: segment %lld ends before it starts",
                              (long long)s);
    celer_status st = m->q ? plan_mlx(&j, &act, m->q, m->layout, T, scratch, err)
                           : plan_gguf(&j, &act, m->wtype, m->layout, m->rows, m->k, T, scratch, err);
    if (st) return st;
    size_t need = celer_cpu_matmul_grouped_scratch_size(m, T);
    if (need > scratch->size)
        return celer_fail(err, CELER_ERR_INVALID, "cpu: grouped matmul k=%lld T=%lld needs %zu bytes of scratch, has "
                          "%zu", (long long)j.k, (long long)T, need, scratch->size);
    if (T == 0 || j.rows == 0) return CELER_OK;
    _Atomic int64_t next = 0;
    j.X = X, j.Y = Y, j.n_seg = n_seg, j.seg_w = W, j.seg_x = seg_x, j.xrow = xrow, j.next = &next;
    run(pool, &j, act, scratch);
    return CELER_OK;
}
