/* Prefill products on the integer matrix units: the activations quantized once to the X32
 * format (gpu_xq.cuh), as for decode, and each 32-value block of a weight row dotted with each
 * token's block by mma.m16n8k32 on signed bytes — once with the activations' hi codes, once
 * with their lo codes — then scaled in f32 by the row's and the token's block scales. Decode
 * (gpu_matvec.cu) and prefill thus compute the same sums: a token's logits do not depend on
 * the path beyond f32 rounding.
 *
 * A block of 128 threads computes 64 rows × 64 tokens; each of its 4 warps 32 × 32 (2 × 4
 * mma tiles). Per iteration it stages MMQ_BQ blocks of 32 values: the weights' codes unpacked
 * to signed bytes with their scales, the tokens' hi and lo codes with theirs. Rows are padded
 * by 4 bytes so that the fragment loads of a warp fall in distinct banks.
 *
 * mma.m16n8k32 fragments (PTX ISA), lane = 4 g + q: A (16 × 32) a0 = row g, bytes 4q .. 4q+3;
 * a1 = row g + 8, same bytes; a2, a3 = the same rows, bytes 16 + 4q ..; B (32 × 8) b0 = column
 * g, bytes 4q ..; b1 = bytes 16 + 4q ..; C (16 × 8) c0, c1 = row g, columns 2q, 2q + 1; c2, c3 =
 * row g + 8. */
#include "backends/gpu/gpu_mmq.h"

enum { MMQ_ROWS = 64, MMQ_TOKS = 64, MMQ_BQ = 4, MMQ_LD = MMQ_BQ * 32 + 4, MMQ_THREADS = 128 };

bool gpu_mmq_has(const gpu_backend *g, int fmt)
{
    return gpu_imma_ok(&g->prop) && (fmt == GPU_Q4_0 || fmt == GPU_Q8_0);
}

/* Bytes 0..15 of v minus 8, as signed bytes (no borrow between bytes). */
static __device__ __forceinline__ int minus8(uint32_t v) { return (int)((v | 0x80808080u) - 0x08080808u) ^ (int)0x80808080u; }

/* The row (in the block's tile) and the token of accumulator element e of mma tile (mi, ni). */
static __device__ __forceinline__ int c_row(int wm, int mi, int g, int e) { return wm + 16 * mi + g + (e >= 2 ? 8 : 0); }
static __device__ __forceinline__ int c_tok(int wn, int ni, int q, int e) { return wn + 8 * ni + 2 * q + (e & 1); }

template <int F>
__global__ void __launch_bounds__(MMQ_THREADS) k_mmq(gpu_wdesc w, gpu_xq x, int64_t T, float *__restrict__ y)
{
    __shared__ __align__(16) int8_t wq[MMQ_ROWS][MMQ_LD];
    __shared__ __align__(16) int8_t xh[MMQ_TOKS][MMQ_LD], xl[MMQ_TOKS][MMQ_LD];
    __shared__ float                wd[MMQ_ROWS][MMQ_BQ], xd[MMQ_TOKS][MMQ_BQ];
    const int     tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, q = lane % 4;
    const int     wm = 32 * (warp % 2), wn = 32 * (warp / 2);
    const int64_t r0 = (int64_t)blockIdx.x * MMQ_ROWS, t0 = (int64_t)blockIdx.y * MMQ_TOKS, nq = w.cols / 32;
    float         acc[2][4][4];
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[mi][ni][e] = 0.0f;
    for (int64_t k0 = 0; k0 < nq; k0 += MMQ_BQ) {
        /* stage: MMQ_ROWS × MMQ_BQ weight blocks and MMQ_TOKS × MMQ_BQ token blocks, 2 of each a thread */
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const int     u = tid + MMQ_THREADS * j, rr = u / MMQ_BQ, qb = u % MMQ_BQ;
            const int64_t r = r0 + rr, b = k0 + qb;
            int          *dst = (int *)&wq[rr][32 * qb];
            float         d   = 0.0f;
            int           v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            if (r < w.rows && b < nq) {
                const uint8_t *row = w.data + r * w.row_bytes;
                if (F == GPU_Q4_0) {
                    const uint4    c = *(const uint4 *)(row + 16 * b);
                    const uint32_t cw[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
                    for (int k = 0; k < 4; k++) v[k] = minus8(cw[k] & 0x0f0f0f0fu), v[4 + k] = minus8((cw[k] >> 4) & 0x0f0f0f0fu);
                } else { /* Q8_0 */
                    const uint4 c0 = *(const uint4 *)(row + 32 * b), c1 = *(const uint4 *)(row + 32 * b + 16);
                    v[0] = (int)c0.x, v[1] = (int)c0.y, v[2] = (int)c0.z, v[3] = (int)c0.w;
                    v[4] = (int)c1.x, v[5] = (int)c1.y, v[6] = (int)c1.z, v[7] = (int)c1.w;
                }
                d = dec_f16(ld16(row + w.scales_off + 2 * b));
            }
#pragma unroll
            for (int k = 0; k < 8; k++) dst[k] = v[k];
            wd[rr][qb] = d;
            const int64_t t  = t0 + rr; /* the same unit numbering over tokens */
            int          *dh = (int *)&xh[rr][32 * qb], *dl = (int *)&xl[rr][32 * qb];
            int           h[8] = {0, 0, 0, 0, 0, 0, 0, 0}, l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            float         dx = 0.0f;
            if (t < T && b < nq) {
                const int4 *p = (const int4 *)(x.q + (t * x.nb + b) * XQ_BLOCK);
                const int4  a0 = p[0], a1 = p[1], a2 = p[2], a3 = p[3];
                h[0] = a0.x, h[1] = a0.y, h[2] = a0.z, h[3] = a0.w, h[4] = a1.x, h[5] = a1.y, h[6] = a1.z, h[7] = a1.w;
                l[0] = a2.x, l[1] = a2.y, l[2] = a2.z, l[3] = a2.w, l[4] = a3.x, l[5] = a3.y, l[6] = a3.z, l[7] = a3.w;
                dx = x.d[t * x.nb + b].x;
            }
#pragma unroll
            for (int k = 0; k < 8; k++) dh[k] = h[k], dl[k] = l[k];
            xd[rr][qb] = dx;
        }
        __syncthreads();
#pragma unroll
        for (int qb = 0; qb < MMQ_BQ; qb++) {
            int a[2][4], sh[2][4][4], sl[2][4][4];
#pragma unroll
            for (int mi = 0; mi < 2; mi++) {
                const int r = wm + 16 * mi + g;
                a[mi][0]    = *(const int *)&wq[r][32 * qb + 4 * q];
                a[mi][1]    = *(const int *)&wq[r + 8][32 * qb + 4 * q];
                a[mi][2]    = *(const int *)&wq[r][32 * qb + 16 + 4 * q];
                a[mi][3]    = *(const int *)&wq[r + 8][32 * qb + 16 + 4 * q];
#pragma unroll
                for (int ni = 0; ni < 4; ni++)
#pragma unroll
                    for (int e = 0; e < 4; e++) sh[mi][ni][e] = sl[mi][ni][e] = 0;
            }
#pragma unroll
            for (int ni = 0; ni < 4; ni++) {
                const int n  = wn + 8 * ni + g;
                const int h0 = *(const int *)&xh[n][32 * qb + 4 * q], h1 = *(const int *)&xh[n][32 * qb + 16 + 4 * q];
                const int l0 = *(const int *)&xl[n][32 * qb + 4 * q], l1 = *(const int *)&xl[n][32 * qb + 16 + 4 * q];
#pragma unroll
                for (int mi = 0; mi < 2; mi++) {
                    gpu_imma_16x8x32(sh[mi][ni], a[mi], h0, h1);
                    gpu_imma_16x8x32(sl[mi][ni], a[mi], l0, l1);
                }
            }
#pragma unroll
            for (int c = 0; c < 32; c++) { /* accumulator element c: tile (mi, ni), element e */
                const int mi = c / 16, ni = c / 4 % 4, e = c % 4, r = c_row(wm, mi, g, e), n = c_tok(wn, ni, q, e);
                acc[mi][ni][e] += wd[r][qb] * xd[n][qb] * (float)(256 * sh[mi][ni][e] + sl[mi][ni][e]);
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int c = 0; c < 32; c++) {
        const int     mi = c / 16, ni = c / 4 % 4, e = c % 4;
        const int64_t r = r0 + c_row(wm, mi, g, e), t = t0 + c_tok(wn, ni, q, e);
        if (r < w.rows && t < T) y[t * w.rows + r] = acc[mi][ni][e];
    }
}

typedef void (*mmq_fn)(gpu_wdesc, gpu_xq, int64_t, float *);

celer_status gpu_mmq(gpu_backend *g, const gpu_wdesc *w, int fmt, const float *x, int64_t T, float *y,
                     celer_error *err)
{
    const mmq_fn fn = fmt == GPU_Q4_0 ? k_mmq<GPU_Q4_0> : fmt == GPU_Q8_0 ? k_mmq<GPU_Q8_0> : NULL;
    if (!fn || !gpu_imma_ok(&g->prop))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: no integer prefill kernel for format %d", CELER_GPU_NAME, fmt);
    const int64_t bt = (T + MMQ_TOKS - 1) / MMQ_TOKS;
    if (bt > GPU_MAX_GRID_YZ)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: a step of %lld tokens is past the prefill grid", CELER_GPU_NAME,
                          (long long)T);
    unsigned br;
    gpu_xq   xq;
    if (gpu_grid(g, w->rows, MMQ_ROWS, &br, "mmq", err) || gpu_quant_x(g, x, T, w->cols, &xq, err)) return err->code;
    return GPU_LAUNCH(g, err, "mmq", fn, dim3(br, (unsigned)bt), MMQ_THREADS, 0, *w, xq, T, y);
}
