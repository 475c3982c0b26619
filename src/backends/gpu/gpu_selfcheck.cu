/* Self-checks of the long steps' paths at the backend's start. A vendor's paths that have run on
 * no hardware of its (CELER_GPU_SELFCHECK in gpu_vendor.h: AMD's, docs/platforms.md) are held to
 * the ISA and to the libraries' headers without running: the tiled kernel's fragment layouts by
 * a host model (tests/test_amx_layout.c), prefill attention's kernel by a host run of it
 * (tests/simt/test_flash_amx.cc), the rocBLAS calls by their declarations (gpu_rocblas.h). A slip
 * none of those can show would turn every prefill into noise. So before any step takes them,
 * each product path and the decode kernel (gpu_matvec.cu: another code path over the same
 * quantized tokens) multiply one random Q8_0 matrix, and prefill attention on the matrix units
 * and the f32 kernel attend over one small cache; they must agree to the path's rounding. Where
 * one does not, it is left off with a note on stderr, and long steps take the other kernels:
 * slower, never wrong.
 *
 * CELER_GPU_CHECK: unset, the checks run where CELER_GPU_SELFCHECK says; 1: on every device (to
 * test them on NVIDIA); 0: never; bad: as 1, with one weight row (one query row) changed between
 * the path's run and the other kernel's (to test what a failed check does). */
#include "backends/gpu/gpu_blas.h"
#include "backends/gpu/gpu_mmq.h"

#include "quant/half.h"
extern "C" {
#include "runtime/kv_cache.h"
}

#include <math.h>

/* 64 rows (the kernel's row block) × 8 column blocks (two of its column steps) × 40 tokens (a
 * partial token tile past the batch kernel's 32; on NVIDIA's integer units, where steps of up to
 * GPU_MMQ_CHUNKED tokens take the batch kernel 32 at a time, its chunks of 32 and 8). */
enum { CK_ROWS = 64, CK_COLS = 256, CK_T = 40, CK_ROW_BYTES = CK_COLS + 2 * (CK_COLS / 32) };
enum { CK_WB = CK_ROWS * CK_ROW_BYTES, CK_XB = CK_T * CK_COLS * 4, CK_YB = CK_T * CK_ROWS * 4 };

static uint32_t ck_rnd(uint32_t *r)
{
    *r ^= *r << 13, *r ^= *r >> 17, *r ^= *r << 5;
    return *r;
}

enum { CK_TILED, CK_BLAS };

/* The two products of the check into y[0] (the path's: the tiled kernel or the BLAS) and y[1]
 * (the decode kernel's), from host memory w and x; with bad, a weight row changed between them. */
static celer_status ck_run(gpu_backend *g, int path, const uint8_t *w, const float *x, float *const y[2], bool bad,
                           celer_error *err)
{
    void *mem;
    if (g->base.ops->alloc(&g->base, CK_WB + CK_XB + 2 * CK_YB, &mem, err)) return err->code;
    uint8_t *dw = (uint8_t *)mem;
    float   *dx = (float *)(dw + CK_WB), *dy[2] = {dx + CK_T * CK_COLS, dx + CK_T * CK_COLS + CK_T * CK_ROWS};
    gpu_wdesc d;
    memset(&d, 0, sizeof d);
    d.data = dw, d.rows = CK_ROWS, d.cols = CK_COLS, d.row_bytes = CK_ROW_BYTES, d.scales_off = CK_COLS, d.gmul = 1.0f;
    gpu_xq        xq;
    uint8_t       neg[CK_COLS]; /* what bad makes of row 5's codes: their negation, every output of
                                 * the row moved by about its size (one byte was not enough past
                                 * the BLAS path's tolerance where its scale was small) */
    for (int k = 0; k < CK_COLS; k++) neg[k] = (uint8_t)(-(int8_t)w[5 * CK_ROW_BYTES + k]);
    celer_status  st   = gpu_upload(g, dw, w, CK_WB, err);
    if (!st) st = gpu_upload(g, dx, x, CK_XB, err);
    if (!st) st = gpu_quant_x(g, dx, CK_T, CK_COLS, g->mvq_x8, &xq, err);
    if (!st && path == CK_TILED) st = gpu_mmq_xq(g, &d, GPU_Q8_0, &xq, CK_T, dy[0], false, err);
    if (!st && path == CK_BLAS) st = gpu_blas_matmul(g, &d, GPU_Q8_0, dx, CK_T, dy[0], err);
    if (!st && bad) st = gpu_upload(g, dw + 5 * CK_ROW_BYTES, neg, CK_COLS, err);
    if (!st) st = gpu_matvec_q8(g, &d, 1, GPU_Q8_0, &xq, CK_T, &dy[1], false, err);
    for (int i = 0; i < 2 && !st; i++) st = g->base.ops->read(&g->base, dy[i], y[i], CK_YB, err);
    if (!st) st = gpu_sync(g, err);
    g->base.ops->release(&g->base, mem);
    gpu_forget_acts(g); /* x's quantization named memory that is gone */
    return st;
}

/* One path's check (tol: its difference from the decode kernel's sums, relative to the largest
 * output); *agrees false when it does not, with the note said. */
static celer_status ck_path(gpu_backend *g, int path, bool bad, float tol, bool *agrees, celer_error *err)
{
    *agrees    = true;
    uint8_t *w = (uint8_t *)malloc(CK_WB + CK_XB + 2 * CK_YB);
    if (!w) return celer_fail(err, CELER_ERR_OOM, "%s: out of memory", CELER_GPU_NAME);
    float   *x = (float *)(w + CK_WB), *const y[2] = {x + CK_T * CK_COLS, x + CK_T * CK_COLS + CK_T * CK_ROWS};
    uint32_t r = 0x2545f491u;
    for (int i = 0; i < CK_ROWS; i++) { /* a Q8_0 row as the device holds it: codes, then f16 scales */
        for (int k = 0; k < CK_COLS; k++) w[i * CK_ROW_BYTES + k] = (uint8_t)ck_rnd(&r);
        for (int b = 0; b < CK_COLS / 32; b++) {
            const float    s = ldexpf(1.0f + (float)(ck_rnd(&r) % 8) / 8.0f, -(int)(ck_rnd(&r) % 8));
            const uint16_t h = celer_f32_to_half(s);
            memcpy(&w[i * CK_ROW_BYTES + CK_COLS + 2 * b], &h, 2);
        }
    }
    for (int i = 0; i < CK_T * CK_COLS; i++) x[i] = (float)((int)(ck_rnd(&r) % 2001) - 1000) / 500.0f;
    const celer_status st = ck_run(g, path, w, x, y, bad, err);
    float top = 0.0f; /* apart by rounding, relative to the largest output */
    for (int i = 0; i < CK_T * CK_ROWS; i++) top = fmaxf(top, fabsf(y[1][i]));
    int worst = -1;
    for (int i = 0; !st && i < CK_T * CK_ROWS; i++)
        if (!(fabsf(y[0][i] - y[1][i]) <= tol * top)) worst = i;
    if (worst >= 0) {
        *agrees = false;
        fprintf(stderr,
                "celer: %s: %s disagreed with the decode kernel's on a self-check (token %d, row %d: %g against "
                "%g); long steps run on other kernels. Please report this with the output of `celer info`\n",
                CELER_GPU_NAME, path == CK_TILED ? "the integer matrix units' product" : CELER_GPU_BLAS_NAME "'s product",
                worst / CK_ROWS, worst % CK_ROWS, (double)y[0][worst], (double)y[1][worst]);
    }
    free(w);
    return st;
}

/* Prefill attention's check: two sequences (80 and 40 tokens, so that a block makes two passes),
 * 8 query heads over 2 kv heads of hd values, the matrix units' kernel into y[0] and the f32
 * kernel into y[1] (flash_off set around it), from host q, k, v; with bad, query row 50 negated
 * between them. */
enum { CKA_T0 = 80, CKA_T = 120, CKA_H = 8, CKA_HK = 2 };

static celer_status cka_run(gpu_backend *g, int64_t hd, const float *q, const float *kv_host, float *const y[2],
                            bool bad, celer_error *err)
{
    celer_backend *be = &g->base;
    const size_t   qn = (size_t)(CKA_T * CKA_H * hd), kn = (size_t)(CKA_T * CKA_HK * hd);
    int32_t        pos[CKA_T], seq[CKA_T];
    for (int t = 0; t < CKA_T; t++) seq[t] = t >= CKA_T0, pos[t] = t < CKA_T0 ? t : t - CKA_T0;
    const celer_batch b = {CKA_T, pos, seq};
    const celer_attn  a = {CKA_H, CKA_HK, hd, 1.0f / sqrtf((float)hd), 0};
    celer_kv_cache    kv;
    void             *mem;
    if (celer_kv_cache_init(&kv, be, 1, CKA_HK, hd, hd, 2, CKA_T0, 2 * CKA_T0 / CELER_KV_BLOCK, err)) return err->code;
    celer_status st = be->ops->alloc(be, (3 * qn + 2 * kn) * sizeof(float), &mem, err);
    if (st) {
        celer_kv_cache_free(&kv, be);
        return st;
    }
    float *dq = (float *)mem, *dk = dq + qn, *dv = dk + kn, *dy[2] = {dv + kn, dv + kn + qn};
    st = celer_kv_cache_reserve(&kv, 0, CKA_T0, err);
    if (!st) st = celer_kv_cache_reserve(&kv, 1, CKA_T - CKA_T0, err);
    if (!st) st = gpu_upload(g, dq, q, qn * sizeof(float), err);
    if (!st) st = gpu_upload(g, dk, kv_host, 2 * kn * sizeof(float), err); /* k, then v */
    if (!st) st = be->ops->kv_write(be, &kv, 0, dk, dv, &b, err);
    if (!st) st = be->ops->attention(be, dq, &kv, 0, &b, &a, dy[0], err);
    if (!st && bad) { /* row 50's query negated: its scores, and so its output, change */
        float neg[CKA_H * 128];
        for (int64_t i = 0; i < CKA_H * hd; i++) neg[i] = -q[50 * CKA_H * hd + i];
        st = gpu_upload(g, dq + 50 * CKA_H * hd, neg, (size_t)(CKA_H * hd) * sizeof(float), err);
    }
    const bool off = g->flash_off;
    g->flash_off   = true;
    if (!st) st = be->ops->attention(be, dq, &kv, 0, &b, &a, dy[1], err);
    g->flash_off = off;
    for (int i = 0; i < 2 && !st; i++) st = be->ops->read(be, dy[i], y[i], qn * sizeof(float), err);
    if (!st) st = gpu_sync(g, err);
    be->ops->release(be, mem);
    celer_kv_cache_free(&kv, be);
    gpu_forget_acts(g); /* the output's quantization named memory that is gone */
    return st;
}

/* *agrees false, with the note said, where the two kernels are apart by more than f16's
 * rounding of q, k, v and the probabilities (1e-2 of the largest output) at head size 64 or 128. */
static celer_status ck_flash(gpu_backend *g, bool bad, bool *agrees, celer_error *err)
{
    *agrees = true;
    for (int64_t hd = 64; hd <= 128 && *agrees; hd *= 2) {
        const size_t qn = (size_t)(CKA_T * CKA_H * hd), kn = (size_t)(CKA_T * CKA_HK * hd);
        float       *q  = (float *)malloc((3 * qn + 2 * kn) * sizeof(float));
        if (!q) return celer_fail(err, CELER_ERR_OOM, "%s: out of memory", CELER_GPU_NAME);
        float   *kvh = q + qn, *const y[2] = {kvh + 2 * kn, kvh + 2 * kn + qn};
        uint32_t r   = 0x9e3779b9u;
        for (size_t i = 0; i < qn; i++) q[i] = (float)((int)(ck_rnd(&r) % 2001) - 1000) / 250.0f; /* ±4 */
        for (size_t i = 0; i < 2 * kn; i++) kvh[i] = (float)((int)(ck_rnd(&r) % 2001) - 1000) / 1000.0f;
        const celer_status st    = cka_run(g, hd, q, kvh, y, bad, err);
        float              top   = 0.0f;
        int64_t            worst = -1;
        for (size_t i = 0; !st && i < qn; i++) top = fmaxf(top, fabsf(y[1][i]));
        for (size_t i = 0; !st && i < qn; i++)
            if (!(fabsf(y[0][i] - y[1][i]) <= 1e-2f * top)) worst = (int64_t)i;
        if (worst >= 0) {
            *agrees = false;
            fprintf(stderr,
                    "celer: %s: prefill attention on the matrix units disagreed with the f32 kernel's on a "
                    "self-check (head size %lld, token %lld, head %lld: %g against %g); prefill attention runs on "
                    "the f32 kernel. Please report this with the output of `celer info`\n",
                    CELER_GPU_NAME, (long long)hd, (long long)(worst / (CKA_H * hd)),
                    (long long)(worst / hd % CKA_H), (double)y[0][worst], (double)y[1][worst]);
        }
        free(q);
        if (st) return st;
    }
    return CELER_OK;
}

celer_status gpu_selfcheck(gpu_backend *g, celer_error *err)
{
    const char *ev  = getenv("CELER_GPU_CHECK");
    const bool  bad = ev && strcmp(ev, "bad") == 0, on = bad || (ev && strcmp(ev, "1") == 0);
    if ((ev && strcmp(ev, "0") == 0) || !(on || CELER_GPU_SELFCHECK)) return CELER_OK;
    bool agrees;
    if (gpu_mmq_has(g, GPU_Q8_0)) { /* the same integer sums: f32 rounding apart */
        if (ck_path(g, CK_TILED, bad, 1e-4f, &agrees, err)) return err->code;
        g->mmq_off = !agrees;
    }
    if (g->blas_from > 0) { /* f16 weights (11 bits) against the integer kernels' */
        if (ck_path(g, CK_BLAS, bad, 4e-3f, &agrees, err)) return err->code;
        if (!agrees) g->blas_from = 0, g->blas_f32 = false;
    }
    if (gpu_flash_has(g)) {
        if (ck_flash(g, bad, &agrees, err)) return err->code;
        g->flash_off = !agrees;
    }
    return CELER_OK;
}
