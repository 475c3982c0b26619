/* celer_cpu_matmul: quantize the activations once, then split the weight rows over the pool.
 * Each thread streams its contiguous slice of rows once per block of tokens; the block is as
 * many tokens as keep their quantized activations in L2, so for decode and for ordinary prefill
 * chunks every weight byte is read from memory once per call. */
#include "backends/cpu/matmul.h"

#include "backends/cpu/dot.h"
#include "core/error.h"
#include "quant/dequant.h"
#include "quant/half.h"

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

/* ---- scratch ----------------------------------------------------------------------------- */

/* Bytes of one token's activations in the kernel's format. */
static size_t act_row_bytes(celer_cpu_act act, int64_t k)
{
    switch (act) {
    case CELER_CPU_ACT_F32: return (size_t)k * sizeof(float);
    case CELER_CPU_ACT_Q8_0: /* the blocks, then d·Σq of each block (the min term of Q4_1/Q5_1) */
        return CELER_Q8_0_SUMS_AT(k / CELER_QK8_0) + (size_t)(k / CELER_QK8_0) * sizeof(float);
    case CELER_CPU_ACT_Q8_K: return (size_t)(k / CELER_QK_K) * sizeof(celer_block_q8_K);
    default: return 0;
    }
}

/* The quantized rows, then the partial products at a 64-byte boundary. */
static size_t part_offset(celer_cpu_act act, int64_t k, int64_t T)
{
    return (act_row_bytes(act, k) * 2 * (size_t)T + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
}

size_t celer_cpu_matmul_scratch_size(celer_ggml_type wtype, int64_t rows, int64_t k, int64_t T)
{
    celer_cpu_act act = celer_cpu_act_of(wtype);
    if (act == CELER_CPU_ACT_F32 || act == CELER_CPU_ACT_NONE || rows <= 0 || k <= 0 || T <= 0) return 0;
    return part_offset(act, k, T) + 2 * (size_t)T * (size_t)rows * sizeof(float);
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

typedef void (*quantize_fn)(const float *x, void *y, int64_t n);

typedef struct {
    celer_cpu_gemm_fn gemm;
    quantize_fn       quantize;
    const char       *W;      /* (rows, k) */
    size_t            wb;     /* bytes per weight row */
    int64_t           rows, k, T;
    const float      *X;      /* (T, k) */
    char             *xq;     /* (2T, xb) quantized activations: codes and residual codes */
    bool              pair;   /* quantized: each token is two rows of xq, summed into Y */
    float            *part;   /* (2T, rows) products of the two rows of each token */
    size_t            xb;     /* bytes per activation row */
    int64_t           blk;    /* elements per activation block */
    int64_t           tblock; /* tokens per pass over the weights */
    float            *Y;      /* (T, rows) */
} job;

/* Dequantized block b of an activation row, into v (blk floats). */
static void block_values(const char *row, int64_t b, int64_t blk, float *v)
{
    if (blk == CELER_QK8_0) {
        const celer_block_q8_0 *q = (const celer_block_q8_0 *)row + b;
        float                   d = celer_half_to_f32(q->d);
        for (int e = 0; e < CELER_QK8_0; e++) v[e] = d * (float)q->qs[e];
    } else {
        const celer_block_q8_K *q = (const celer_block_q8_K *)row + b;
        for (int e = 0; e < CELER_QK_K; e++) v[e] = q->d * (float)q->qs[e];
    }
}

/* Quantizes this thread's share of the T · (k / blk) activation blocks: token t's codes into
 * row 2t, then what they miss (x minus their value, computed exactly enough in f32) into row
 * 2t + 1. Q8_0 rows also get each block's d · Σq. */
static void quantize_job(void *ctx, int ith, int nth)
{
    const job *j  = ctx;
    int64_t    nb = j->k / j->blk, b0, b1;
    celer_pool_slice(j->T * nb, ith, nth, &b0, &b1);
    bool  q8_0 = j->blk == CELER_QK8_0;
    float v[CELER_QK_K];
    for (int64_t g = b0; g < b1; g++) {
        int64_t      t = g / nb, b = g % nb;
        const float *x = j->X + t * j->k + b * j->blk;
        char        *hi = j->xq + 2 * t * j->xb, *lo = hi + j->xb;
        size_t       at = q8_0 ? (size_t)b * sizeof(celer_block_q8_0) : (size_t)b * sizeof(celer_block_q8_K);
        j->quantize(x, hi + at, j->blk);
        block_values(hi, b, j->blk, v);
        for (int64_t e = 0; e < j->blk; e++) v[e] = x[e] - v[e];
        j->quantize(v, lo + at, j->blk);
        for (char *row = hi; q8_0 && row <= lo; row += j->xb) {
            const celer_block_q8_0 *blk = (const celer_block_q8_0 *)row + b;
            int32_t                 sum = 0;
            for (int e = 0; e < CELER_QK8_0; e++) sum += blk->qs[e];
            float sd = celer_half_to_f32(blk->d) * (float)sum;
            memcpy(row + CELER_Q8_0_SUMS_AT(nb) + (size_t)b * sizeof(float), &sd, sizeof sd);
        }
    }
}

static void gemm_job(void *ctx, int ith, int nth)
{
    const job *j = ctx;
    int64_t    r0, r1;
    celer_pool_slice(j->rows, ith, nth, &r0, &r1);
    if (r0 >= r1) return;
    for (int64_t t0 = 0; t0 < j->T; t0 += j->tblock) {
        int64_t nt = j->T - t0 < j->tblock ? j->T - t0 : j->tblock;
        if (!j->pair) {
            j->gemm(j->k, j->W + r0 * j->wb, j->wb, r1 - r0, j->X + t0 * j->k, j->xb, nt, j->Y + t0 * j->rows + r0,
                    (size_t)j->rows);
            continue;
        }
        /* both rows of each token, then their sum */
        float *part = j->part + 2 * t0 * j->rows;
        j->gemm(j->k, j->W + r0 * j->wb, j->wb, r1 - r0, j->xq + 2 * t0 * j->xb, j->xb, 2 * nt, part + r0,
                (size_t)j->rows);
        for (int64_t t = 0; t < nt; t++) {
            const float *a = part + 2 * t * j->rows, *b = a + j->rows;
            float       *y = j->Y + (t0 + t) * j->rows;
            for (int64_t r = r0; r < r1; r++) y[r] = a[r] + b[r];
        }
    }
}

static void quantize_q8_0(const float *x, void *y, int64_t n) { celer_quantize_row_q8_0_ref(x, y, n); }
static void quantize_q8_K(const float *x, void *y, int64_t n) { celer_quantize_row_q8_K_ref(x, y, n); }
#if defined(__x86_64__)
static void quantize_q8_0_avx2(const float *x, void *y, int64_t n) { celer_cpu_quantize_q8_0_avx2(x, y, n); }
static void quantize_q8_K_avx2(const float *x, void *y, int64_t n) { celer_cpu_quantize_q8_K_avx2(x, y, n); }
#endif

static quantize_fn quantizer(celer_cpu_act act, celer_cpu_isa isa)
{
#if defined(__x86_64__)
    if (isa >= CELER_CPU_ISA_AVX2) return act == CELER_CPU_ACT_Q8_0 ? quantize_q8_0_avx2 : quantize_q8_K_avx2;
#else
    (void)isa;
#endif
    return act == CELER_CPU_ACT_Q8_0 ? quantize_q8_0 : quantize_q8_K;
}

celer_status celer_cpu_matmul(celer_pool *pool, celer_ggml_type wtype, const void *W, int64_t rows, int64_t k,
                              const float *X, int64_t T, float *Y, celer_cpu_scratch *scratch, celer_error *err)
{
    const celer_ggml_type_info *ti  = celer_ggml_type_get(wtype);
    celer_cpu_act               act = celer_cpu_act_of(wtype);
    if (act == CELER_CPU_ACT_NONE)
        return celer_fail(err, CELER_ERR_UNSUPPORTED,
                          "cpu: matmul by %s weights is not implemented; supported: F32, F16, BF16, Q4_0, Q4_1, "
                          "Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K (convert the model to one of these)",
                          ti ? ti->name : "an unknown type");
    if (rows < 0 || T < 0 || k <= 0 || k % ti->block_elems)
        return celer_fail(err, CELER_ERR_INVALID, "cpu: matmul %s of (%lld, %lld) by %lld tokens: k must be a positive "
                          "multiple of %u", ti->name, (long long)rows, (long long)k, (long long)T, ti->block_elems);
    if (rows == 0 || T == 0) return CELER_OK;
    size_t need = celer_cpu_matmul_scratch_size(wtype, rows, k, T);
    if (need > scratch->size)
        return celer_fail(err, CELER_ERR_INVALID, "cpu: matmul %s rows=%lld k=%lld T=%lld needs %zu bytes of scratch, has %zu; "
                          "size it with celer_cpu_matmul_scratch_size for the largest call", ti->name, (long long)rows,
                          (long long)k, (long long)T, need, scratch->size);
    celer_cpu_isa level = celer_cpu_isa_for_type(scratch->isa, wtype);
    CELER_ASSERT(level < CELER_CPU_ISA_COUNT);

    job j = {
        .gemm = gemm_at(level, wtype),
        .W    = W,
        .wb   = (size_t)(k / ti->block_elems) * ti->block_bytes,
        .rows = rows,
        .k    = k,
        .T    = T,
        .X    = X,
        .xb   = act_row_bytes(act, k),
        .Y    = Y,
    };
    if (act != CELER_CPU_ACT_F32) {
        j.xq       = scratch->buf;
        j.pair     = true;
        j.part     = (float *)((char *)scratch->buf + part_offset(act, k, T));
        j.blk      = act == CELER_CPU_ACT_Q8_0 ? CELER_QK8_0 : CELER_QK_K;
        j.quantize = quantizer(act, scratch->isa);
        if (pool && celer_pool_size(pool) > 1 && T * k >= 4096)
            celer_pool_run(pool, quantize_job, &j);
        else
            quantize_job(&j, 0, 1);
    }
    j.tblock = (int64_t)(ACT_L2_BUDGET / (j.pair ? 2 * j.xb : j.xb));
    if (j.tblock < 4) j.tblock = 4;
    if (pool && celer_pool_size(pool) > 1)
        celer_pool_run(pool, gemm_job, &j);
    else
        gemm_job(&j, 0, 1);
    return CELER_OK;
}
