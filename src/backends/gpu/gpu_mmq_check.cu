/* A self-check of the tiled integer kernel at the backend's start (gpu_mmq.h). Its AMD path, on
 * the MFMA and WMMA units, has run on no AMD hardware (docs/platforms.md): its fragment layouts
 * are held to the ISA's by a host model (tests/test_amx_layout.c), but a slip the model cannot
 * see would turn every prefill into noise. So before any product takes it, the tiled kernel and
 * the decode kernel (gpu_matvec.cu: another code path over the same quantized tokens and the
 * same integer sums) multiply one random Q8_0 matrix; they must agree to f32 rounding. Where
 * they do not, the tiled kernel is left off with a note on stderr, and long steps take the
 * other kernels: slower, never wrong.
 *
 * CELER_GPU_MMQ_CHECK: unset, the check runs where AMD's units are taken (g->amx); 1: wherever the
 * tiled kernel runs (NVIDIA too: to test the check); 0: never; bad: as 1, with one weight changed
 * between the two products (to test what a failed check does). */
#include "backends/gpu/gpu_mmq.h"

#include "quant/half.h"

#include <math.h>

/* 64 rows (the kernel's row block) × 8 column blocks (two of its column steps) × 40 tokens (a
 * partial token tile past the batch kernel's 32). */
enum { CK_ROWS = 64, CK_COLS = 256, CK_T = 40, CK_ROW_BYTES = CK_COLS + 2 * (CK_COLS / 32) };
enum { CK_WB = CK_ROWS * CK_ROW_BYTES, CK_XB = CK_T * CK_COLS * 4, CK_YB = CK_T * CK_ROWS * 4 };

static uint32_t ck_rnd(uint32_t *r)
{
    *r ^= *r << 13, *r ^= *r >> 17, *r ^= *r << 5;
    return *r;
}

/* The two products of the check into y[0] (tiled) and y[1] (decode): host memory w, x, y staged
 * by the caller; with bad, a weight byte changed between them. */
static celer_status ck_run(gpu_backend *g, const uint8_t *w, const float *x, float *const y[2], bool bad,
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
    const size_t  at   = 5 * CK_ROW_BYTES + 77; /* the byte bad changes: row 5, column 77 */
    const uint8_t flip = (uint8_t)(w[at] ^ 0x40);
    celer_status  st   = gpu_upload(g, dw, w, CK_WB, err);
    if (!st) st = gpu_upload(g, dx, x, CK_XB, err);
    if (!st) st = gpu_quant_x(g, dx, CK_T, CK_COLS, g->mvq_x8, &xq, err);
    if (!st) st = gpu_mmq_xq(g, &d, GPU_Q8_0, &xq, CK_T, dy[0], false, err);
    if (!st && bad) st = gpu_upload(g, dw + at, &flip, 1, err);
    if (!st) st = gpu_matvec_q8(g, &d, 1, GPU_Q8_0, &xq, CK_T, &dy[1], false, err);
    for (int i = 0; i < 2 && !st; i++) st = g->base.ops->read(&g->base, dy[i], y[i], CK_YB, err);
    if (!st) st = gpu_sync(g, err);
    g->base.ops->release(&g->base, mem);
    gpu_forget_acts(g); /* x's quantization named memory that is gone */
    return st;
}

celer_status gpu_mmq_selfcheck(gpu_backend *g, celer_error *err)
{
    const char *ev  = getenv("CELER_GPU_MMQ_CHECK");
    const bool  bad = ev && strcmp(ev, "bad") == 0, asked = bad || (ev && strcmp(ev, "1") == 0);
    if ((ev && strcmp(ev, "0") == 0) || !gpu_mmq_has(g, GPU_Q8_0) || (!asked && g->amx == CELER_AMX_NONE))
        return CELER_OK;
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
    const celer_status st = ck_run(g, w, x, y, bad, err);
    /* the same integer sums, added in other orders: apart by f32 rounding of the largest terms */
    float top = 0.0f;
    for (int i = 0; i < CK_T * CK_ROWS; i++) top = fmaxf(top, fabsf(y[1][i]));
    int worst = -1;
    for (int i = 0; !st && i < CK_T * CK_ROWS; i++)
        if (!(fabsf(y[0][i] - y[1][i]) <= 1e-4f * top)) worst = i;
    if (worst >= 0) {
        g->mmq_off = true;
        fprintf(stderr,
                "celer: %s: the integer matrix units' product disagreed with the decode kernel's on a self-check "
                "(token %d, row %d: %g against %g); long steps of Q4_0 and Q8_0 run on other kernels. Please "
                "report this with the output of `celer info`\n",
                CELER_GPU_NAME, worst / CK_ROWS, worst % CK_ROWS, (double)y[0][worst], (double)y[1][worst]);
    }
    free(w);
    return st;
}
