/* Decode-step matrix products (1 to 8 tokens a pass) with integer dot products: the step's
 * activations are quantized once per product (k_quant_x, the CPU backend's X32 format: two
 * 8-bit levels, ~15 bits), and each weight format's codes are dotted with them four bytes at a
 * time (gpu_dp4a), scales applied per block. A warp takes MVQ_ROWS rows, its lanes consecutive
 * blocks ("units") of them, codes read with 128-bit loads (the SPLIT and MLX_ROWS layouts of
 * gpu_backend.h put them on 16-byte boundaries; Q4_K's and Q5_K's are there as stored); up to
 * three weights of one input share a launch (celer_port_matmuls).
 *
 * Formats without a kernel here (F32, F16, BF16, MLX affine 2/3/5/6, mxfp4, mxfp8, nvfp4) take
 * the float decode kernel of gpu_matmul.cu. */
#include "backends/gpu/gpu_matvec.h"

#include <string.h>

/* MVQ_KS: the column slices of a one-token pass whose grid is short of MVQ_KS_BELOW blocks an SM.
 * Measured on the H200 (tg128, side by side): slices below 2 blocks an SM (the 8B's o and down,
 * 256 blocks; not its qkv, 384) ran 0.6% (8B) and 1.3% (30B-A3B) faster than below 4; four
 * slices, or MVQ_UNROLL 4, lost 6% and 9%. */
enum { MVQ_THREADS = 128, MVQ_ROWS = 4, MVQ_UNROLL = 2, MVQ_KS = 2, MVQ_KS_BELOW = 2 };
static const uint32_t M4 = 0x0f0f0f0fu;

/* ---- activations ------------------------------------------------------------------------- */

/* One group of 32 threads per block of 32 values. */
__global__ void k_quant_x(const float *__restrict__ x, int64_t n_blocks, gpu_xq_out o)
{
    gpu_dep_enter();
    const int64_t blk  = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int     i    = threadIdx.x % 32;
    const bool    live = blk < n_blocks; /* every lane takes part in the group's shuffles */
    const float   v[1] = {live ? x[blk * 32 + i] : 0.0f};
    xq_put<1>(v, i, blk, live, o);
}

celer_status gpu_xq_buffer(gpu_backend *g, int64_t n, gpu_xq_out *out, celer_error *err)
{
    const int64_t nb = n / 32;
    if (gpu_buf_reserve(g, &g->d_xq, (size_t)nb * (XQ_BLOCK + sizeof(float2)), err)) return err->code;
    out->q  = (int8_t *)g->d_xq.p;
    out->dd = (float2 *)((int8_t *)g->d_xq.p + nb * XQ_BLOCK);
    out->x8 = g->mvq_x8;
    return CELER_OK;
}

celer_status gpu_quant_x(gpu_backend *g, const float *x, int64_t T, int64_t cols, bool x8, gpu_xq *xq,
                         celer_error *err)
{
    /* quantized by the kernel that wrote x, at these levels */
    const bool held = g->xq_src == x && g->xq_n == T * cols && g->xq_x8 == x8;
    gpu_xq_out o;
    unsigned   blocks;
    if (gpu_xq_buffer(g, T * cols, &o, err)) return err->code;
    o.x8  = x8;
    xq->q = o.q, xq->d = o.dd, xq->nb = cols / 32, xq->x8 = x8;
    if (held) return CELER_OK;
    if (gpu_grid(g, T * cols, 256, &blocks, "quant_x", err) ||
        GPU_LAUNCH(g, err, "quant_x", k_quant_x, blocks, 256, 0, x, T * cols / 32, o))
        return err->code;
    gpu_xq_held(g, x, T * cols, o);
    return CELER_OK;
}

/* ---- one lane's block of a row ------------------------------------------------------------- */

static __device__ __forceinline__ uint4 ld_u4(const uint8_t *p) { return *(const uint4 *)p; }
static __device__ __forceinline__ uint2 ld_u2(const uint8_t *p) { return *(const uint2 *)p; }
/* 16 bits at an even address (every header field of these layouts is): one load, not two. */
static __device__ __forceinline__ uint32_t ld_h16(const uint8_t *p) { return *(const uint16_t *)p; }
static __device__ __forceinline__ uint32_t ld_u32h(const uint8_t *p) { return ld_h16(p) | ld_h16(p + 2) << 16; }

/* The codes of x block b of token t: hi[32] then lo[32], as 32-bit words. */
static __device__ __forceinline__ const int *xq_words(const gpu_xq &x, int t, int64_t b)
{
    return (const int *)(x.q + ((int64_t)t * x.nb + b) * XQ_BLOCK);
}

/* An x block in registers: its hi and lo codes as words, and (d, d · S). */
typedef struct {
    int    h[8], l[8];
    float2 dd;
} xblk;

/* X8 (activations quantized to 8 bits: their low codes are zeros, d · S the high codes' sum):
 * the high level only, the low codes not loaded. */
template <bool X8> static __device__ __forceinline__ xblk load_x(const gpu_xq &x, int t, int64_t b)
{
    const int4 *p  = (const int4 *)xq_words(x, t, b);
    const int4  h0 = p[0], h1 = p[1], l0 = X8 ? make_int4(0, 0, 0, 0) : p[2], l1 = X8 ? make_int4(0, 0, 0, 0) : p[3];
    xblk        r;
    r.h[0] = h0.x, r.h[1] = h0.y, r.h[2] = h0.z, r.h[3] = h0.w;
    r.h[4] = h1.x, r.h[5] = h1.y, r.h[6] = h1.z, r.h[7] = h1.w;
    r.l[0] = l0.x, r.l[1] = l0.y, r.l[2] = l0.z, r.l[3] = l0.w;
    r.l[4] = l1.x, r.l[5] = l1.y, r.l[6] = l1.z, r.l[7] = l1.w;
    r.dd = x.d[(int64_t)t * x.nb + b];
    return r;
}

/* 256 · (w · hi) + (w · lo) over the 32 values of x block a, word k of w against word k of hi
 * and of lo (X8: 256 · (w · hi), the activations to 8 bits). */
template <bool X8> static __device__ __forceinline__ float dot32(const int w[8], const xblk &a)
{
    int sh = 0, sl = 0;
#pragma unroll
    for (int k = 0; k < 8; k++) sh = gpu_dp4a(w[k], a.h[k], sh), sl = X8 ? 0 : gpu_dp4a(w[k], a.l[k], sl);
    return (float)(256 * sh + sl);
}

/* Q4_0 .. Q5_1 (SPLIT): 16 bytes of codes, byte i holding value i (low nibble) and i + 16. */
static __device__ __forceinline__ void nibbles(uint4 q, int w[8])
{
    const uint32_t v[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int k = 0; k < 4; k++) w[k] = (int)(v[k] & M4), w[4 + k] = (int)((v[k] >> 4) & M4);
}

/* Bits 0..3 of h, each to bit 4 of its own byte. */
static __device__ __forceinline__ int bit4_bytes(uint32_t h)
{
    return (int)((((h & 15u) * 0x00204081u) & 0x01010101u) << 4);
}

template <int F> static __device__ __forceinline__ int64_t units(int64_t cols)
{
    return F == GPU_Q4_K || F == GPU_Q5_K ? cols / 64 : cols / 32;
}

/* A unit's bytes in registers: codes in v, scales and the like in h (per format below). */
typedef struct {
    uint4    v[5];
    uint32_t h[2];
} raw_unit;

/* Q4_K / Q5_K: the 6-bit scales and mins of sub-blocks 2p and 2p + 1 from the header's 12 scale
 * bytes B0..B11 (words s0..s2), as two bytes each (sub-block 2p's in the low one). Sub-blocks 0..3
 * keep them in the low 6 bits of B0..B3 (scales) and B4..B7 (mins); 4..7 in the nibbles of
 * B8..B11 with their high 2 bits in the top of B0..B7. A pair's bytes sit side by side in each
 * word, 16 p % 2 bits up: a few word operations, where a byte picked by a run-time index at a
 * time cost ~40 instructions a row. */
static __device__ __forceinline__ void k_scale_min_pair(uint32_t s0, uint32_t s1, uint32_t s2, int p, uint32_t *sc,
                                                        uint32_t *m)
{
    const int      sh = 16 * (p % 2);
    const uint32_t a = s0 >> sh, b = s1 >> sh, c = s2 >> sh;
    if (p < 2) *sc = a & 0x3f3fu, *m = b & 0x3f3fu;
    else *sc = (c & 0x0f0fu) | ((a >> 2) & 0x3030u), *m = ((c >> 4) & 0x0f0fu) | ((b >> 2) & 0x3030u);
}

/* Q4_0 .. Q5_1 and Q8_0 in the SPLIT layout: a unit's code bytes, and its header's (d; m; qh). */
template <int F> struct split_unit {
    static constexpr int CB = F == GPU_Q8_0 ? 32 : 16;
    static constexpr int HB = F == GPU_Q4_0 || F == GPU_Q8_0 ? 2 : F == GPU_Q4_1 ? 4 : F == GPU_Q5_0 ? 6 : 8;
};

template <int F>
static __device__ __forceinline__ raw_unit unit_load(const gpu_wdesc &w, const uint8_t *row, int64_t u)
{
    raw_unit r;
    if (F == GPU_Q4_0 || F == GPU_Q4_1 || F == GPU_Q5_0 || F == GPU_Q5_1) {
        const int      hb = split_unit<F>::HB;
        const uint8_t *h  = row + w.scales_off + hb * u; /* d, m, then qh */
        r.v[0]            = ld_u4(row + 16 * u);
        r.h[0]            = hb >= 4 ? ld_u32h(h) : ld_h16(h);
        r.h[1]            = hb == 6 ? ld_u32h(h + 2) : hb == 8 ? ld_u32h(h + 4) : 0;
    } else if (F == GPU_Q8_0) {
        r.v[0] = ld_u4(row + 32 * u), r.v[1] = ld_u4(row + 32 * u + 16);
        r.h[0] = ld_h16(row + w.scales_off + 2 * u);
    } else if (F == GPU_Q4_K || F == GPU_Q5_K) { /* as stored: a unit is 64 values, sub-blocks 2p and 2p + 1 */
        const bool     five = F == GPU_Q5_K;
        const uint8_t *blk  = row + (five ? 176 : 144) * (u / 4);
        const uint8_t *qs   = blk + (five ? 48 : 16) + 32 * (u % 4);
        r.v[0] = ld_u4(blk), r.v[1] = ld_u4(qs), r.v[2] = ld_u4(qs + 16);
        if (five) r.v[3] = ld_u4(blk + 16), r.v[4] = ld_u4(blk + 32);
    } else if (F == GPU_Q6_K) { /* SPLIT: a unit is 8 of the 32 positions l of a half, 4 values each */
        const int64_t  sb = u / 8;
        const int      hf = (int)(u % 8) / 4, l0 = 8 * ((int)(u % 8) % 4);
        const uint8_t *c  = row + 192 * sb, *h = row + w.scales_off + 18 * sb;
        const uint2    A = ld_u2(c + 64 * hf + l0), B = ld_u2(c + 64 * hf + 32 + l0), H = ld_u2(c + 128 + 32 * hf + l0);
        r.v[0]                   = make_uint4(A.x, A.y, B.x, B.y);
        r.v[1]                   = make_uint4(H.x, H.y, 0, 0);
        const uint8_t *sc        = h + 8 * hf + l0 / 16;
        r.h[0] = (uint32_t)sc[0] | (uint32_t)sc[2] << 8 | (uint32_t)sc[4] << 16 | (uint32_t)sc[6] << 24;
        r.h[1] = ld_h16(h + 16);
    } else if (F == GPU_AFFINE4 || F == GPU_AFFINE8) { /* MLX_ROWS: a unit is a 32-value chunk */
        const int64_t g = mlx_group_of(w, u);
        if (F == GPU_AFFINE4) r.v[0] = ld_u4(row + 16 * u);
        else r.v[0] = ld_u4(row + 32 * u), r.v[1] = ld_u4(row + 32 * u + 16);
        if (w.sdtype == 0) { /* the group's scale and bias side by side (MLX_ROWS): one load */
            const uint2 sb = *(const uint2 *)(row + w.scales_off + 8 * g);
            r.h[0] = sb.x, r.h[1] = sb.y;
        } else { /* both halves in h[0] (mlx_pair) */
            r.h[0] = *(const uint32_t *)(row + w.scales_off + 4 * g);
        }
    }
    return r;
}

/* A kernel's copy of an MLX descriptor with the scales' dtype SD fixed at compile time (SD < 0:
 * as the weight says): the conversions below then fold to one (the three computed and one
 * chosen, with a load of each width, were ~80 of the affine4 loop's 490 instructions). */
template <int SD> static __device__ __forceinline__ void mvq_fix_sdtype(gpu_wdesc &w)
{
    if (SD >= 0) w.sdtype = SD;
}
template <int SD> static __device__ __forceinline__ void mvq_fix_sdtype(const gpu_wdesc &) {}

/* The scale and bias of an MLX affine unit as unit_load left them (f32: h[0], h[1]; f16 and
 * bf16: the low and high halves of h[0]). A bf16 half is the top of an f32: the bias's word
 * masked, the scale's shifted, one instruction each (apart, as 16-bit values, four). */
static __device__ __forceinline__ void mlx_pair(const raw_unit &r, int32_t t, float *sc, float *bi)
{
    if (t == 0) *sc = __uint_as_float(r.h[0]), *bi = __uint_as_float(r.h[1]);
    else if (t == 1) *sc = dec_f16(r.h[0] & 0xffffu), *bi = dec_f16(r.h[0] >> 16);
    else *sc = __uint_as_float(r.h[0] << 16), *bi = __uint_as_float(r.h[0] & 0xffff0000u);
}

/* Adds unit u of MVQ_ROWS rows (loaded in r) dotted with the activations of each live token
 * to acc; each token's activations are loaded once for all the rows. */
template <int F, int NT, bool X8>
static __device__ __forceinline__ void units_dot(const gpu_wdesc &w, const raw_unit (&r)[MVQ_ROWS], int64_t u,
                                                 const gpu_xq &x, int nt, float (&acc)[MVQ_ROWS][NT])
{
    if (F == GPU_Q4_0 || F == GPU_Q4_1 || F == GPU_Q5_0 || F == GPU_Q5_1 || F == GPU_Q8_0 || F == GPU_AFFINE8) {
        /* one block of 32 a unit, each value A · q + B' for its row: Σ = A · Σ q x̂ + B · Σ x̂ */
        const bool has_m = F == GPU_Q4_1 || F == GPU_Q5_1, five = F == GPU_Q5_0 || F == GPU_Q5_1;
        int        q[MVQ_ROWS][8];
        float      A[MVQ_ROWS], B[MVQ_ROWS];
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++) {
            if (F == GPU_Q8_0 || F == GPU_AFFINE8) { /* 32 code bytes; MLX's unsigned, taken as signed q - 128 */
                const uint32_t v[8] = {r[i].v[0].x, r[i].v[0].y, r[i].v[0].z, r[i].v[0].w,
                                       r[i].v[1].x, r[i].v[1].y, r[i].v[1].z, r[i].v[1].w};
#pragma unroll
                for (int k = 0; k < 8; k++) q[i][k] = (int)(F == GPU_AFFINE8 ? v[k] ^ 0x80808080u : v[k]);
                if (F == GPU_Q8_0) A[i] = dec_f16(r[i].h[0]), B[i] = 0.0f;
                else {
                    float bias;
                    mlx_pair(r[i], w.sdtype, &A[i], &bias);
                    B[i] = 128.0f * A[i] + bias;
                }
                continue;
            }
            nibbles(r[i].v[0], q[i]);
            if (five) {
                const uint32_t qh = F == GPU_Q5_0 ? (r[i].h[0] >> 16) | (r[i].h[1] & 0xffff0000u) : r[i].h[1];
#pragma unroll
                for (int k = 0; k < 4; k++)
                    q[i][k] |= bit4_bytes(qh >> (4 * k)), q[i][4 + k] |= bit4_bytes(qh >> (16 + 4 * k));
            }
            A[i] = dec_f16(r[i].h[0] & 0xffff);
            B[i] = has_m ? dec_f16(r[i].h[0] >> 16) : -(five ? 16.0f : 8.0f) * A[i];
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t >= nt) continue;
            const xblk a = load_x<X8>(x, t, u);
#pragma unroll
            for (int i = 0; i < MVQ_ROWS; i++) acc[i][t] += A[i] * a.dd.x * dot32<X8>(q[i], a) + B[i] * a.dd.y;
        }
    } else if (F == GPU_Q4_K || F == GPU_Q5_K) {
        const int p = (int)(u % 4);
        int       lo[MVQ_ROWS][8], hi[MVQ_ROWS][8];
        float     dl[MVQ_ROWS][2], ml[MVQ_ROWS][2]; /* d · scale and dmin · min of sub-blocks 2p, 2p + 1 */
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++) {
            const uint32_t v[8] = {r[i].v[1].x, r[i].v[1].y, r[i].v[1].z, r[i].v[1].w,
                                   r[i].v[2].x, r[i].v[2].y, r[i].v[2].z, r[i].v[2].w};
#pragma unroll
            for (int k = 0; k < 8; k++) lo[i][k] = (int)(v[k] & M4), hi[i][k] = (int)((v[k] >> 4) & M4);
            if (F == GPU_Q5_K) {
                const uint32_t qh[8] = {r[i].v[3].x, r[i].v[3].y, r[i].v[3].z, r[i].v[3].w,
                                        r[i].v[4].x, r[i].v[4].y, r[i].v[4].z, r[i].v[4].w};
#pragma unroll
                for (int k = 0; k < 8; k++) { /* each byte's bits 2p and 2p + 1, one run-time shift */
                    const uint32_t t = qh[k] >> (2 * p);
                    lo[i][k] |= (int)((t << 4) & 0x10101010u), hi[i][k] |= (int)((t << 3) & 0x10101010u);
                }
            }
            uint32_t sc, m;
            k_scale_min_pair(r[i].v[0].y, r[i].v[0].z, r[i].v[0].w, p, &sc, &m);
            const float d = dec_f16(r[i].v[0].x & 0xffff), dmin = dec_f16(r[i].v[0].x >> 16);
            dl[i][0] = d * (float)(sc & 0xff), dl[i][1] = d * (float)(sc >> 8);
            ml[i][0] = dmin * (float)(m & 0xff), ml[i][1] = dmin * (float)(m >> 8);
        }
        const int64_t xb = 8 * (u / 4) + 2 * p;
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t >= nt) continue;
            const xblk a = load_x<X8>(x, t, xb), b = load_x<X8>(x, t, xb + 1);
#pragma unroll
            for (int i = 0; i < MVQ_ROWS; i++)
                acc[i][t] += dl[i][0] * a.dd.x * dot32<X8>(lo[i], a) + dl[i][1] * b.dd.x * dot32<X8>(hi[i], b) -
                             (ml[i][0] * a.dd.y + ml[i][1] * b.dd.y);
        }
    } else if (F == GPU_Q6_K) {
        const int hf = (int)(u % 8) / 4, l0 = 8 * ((int)(u % 8) % 4);
        /* [row][j][k]: the codes (0 .. 63; the -32 is taken from the activations' sum below) of x
         * block 4 hf + j at positions l0 + 4k .. */
        int   q[MVQ_ROWS][4][2];
        float dl[MVQ_ROWS][4];
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++) {
            const uint32_t a[2] = {r[i].v[0].x, r[i].v[0].y}, b[2] = {r[i].v[0].z, r[i].v[0].w};
            const uint32_t hh[2] = {r[i].v[1].x, r[i].v[1].y};
#pragma unroll
            for (int k = 0; k < 2; k++) {
                q[i][0][k] = (int)((a[k] & M4) | (hh[k] & 0x03030303u) << 4);
                q[i][1][k] = (int)((b[k] & M4) | ((hh[k] >> 2) & 0x03030303u) << 4);
                q[i][2][k] = (int)(((a[k] >> 4) & M4) | ((hh[k] >> 4) & 0x03030303u) << 4);
                q[i][3][k] = (int)(((b[k] >> 4) & M4) | ((hh[k] >> 6) & 0x03030303u) << 4);
            }
            const float d = dec_f16(r[i].h[1]);
#pragma unroll
            for (int j = 0; j < 4; j++) dl[i][j] = d * (float)(int8_t)(r[i].h[0] >> (8 * j));
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t >= nt) continue;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int64_t xb = 8 * (u / 8) + 4 * hf + j;
                const int2   *p  = (const int2 *)(xq_words(x, t, xb) + l0 / 4);
                const int2    xh = p[0], xl = X8 ? make_int2(0, 0) : p[4]; /* hi at word l0 / 4, lo 32 bytes on */
                const float   dx = x.d[(int64_t)t * x.nb + xb].x;
                /* 32 · the 8 activations' codes summed (both levels): Σ (q - 32) x = Σ q x - 32 Σ x, in
                 * integers, once for the rows (a subtraction from every code word cost 4 each) */
                const int ones = 0x01010101;
                const int sx32 = 32 * (256 * gpu_dp4a(ones, xh.y, gpu_dp4a(ones, xh.x, 0)) +
                                       (X8 ? 0 : gpu_dp4a(ones, xl.y, gpu_dp4a(ones, xl.x, 0))));
#pragma unroll
                for (int i = 0; i < MVQ_ROWS; i++) {
                    const int sh = gpu_dp4a(q[i][j][1], xh.y, gpu_dp4a(q[i][j][0], xh.x, 0));
                    const int sl = X8 ? 0 : gpu_dp4a(q[i][j][1], xl.y, gpu_dp4a(q[i][j][0], xl.x, 0));
                    acc[i][t] += dl[i][j] * dx * (float)(256 * sh + sl - sx32);
                }
            }
        }
    } else if (F == GPU_AFFINE4) { /* byte i: value i (low nibble) and i + 16 (MLX_ROWS), as Q4_0 */
        int   q[MVQ_ROWS][8];
        float sc[MVQ_ROWS], bi[MVQ_ROWS];
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++) {
            nibbles(r[i].v[0], q[i]);
            mlx_pair(r[i], w.sdtype, &sc[i], &bi[i]);
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t >= nt) continue;
            const xblk a = load_x<X8>(x, t, u);
#pragma unroll
            for (int i = 0; i < MVQ_ROWS; i++) acc[i][t] += sc[i] * a.dd.x * dot32<X8>(q[i], a) + bi[i] * a.dd.y;
        }
    }
}

/* The units u, u + SW, .. (U of them, those below nu) of each of a warp's rows into ru. */
template <int F, int U>
static __device__ __forceinline__ void units_load(const gpu_wdesc &w, const uint8_t *const (&rows)[MVQ_ROWS],
                                                  int64_t u, int64_t nu, int SW, raw_unit (&ru)[U][MVQ_ROWS])
{
#pragma unroll
    for (int j = 0; j < U; j++)
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++)
            if (u + j * SW < nu) ru[j][i] = unit_load<F>(w, rows[i], u + j * SW);
}

/* Up to three weights of one format and one input: the blocks of a launch cover their rows in
 * turn (weight i has blocks b0[i] .. b0[i + 1]); with add, the products are added to y. */
typedef struct {
    gpu_wdesc w[GPU_MVQ_SET];
    float    *y[GPU_MVQ_SET];
    unsigned  b0[GPU_MVQ_SET + 1];
    int       add;
} mv_set;

static inline uint64_t gpu_sig_arg(uint64_t h, const mv_set &s)
{
    for (int i = 0; i < GPU_MVQ_SET; i++) h = gpu_sig_args(h, s.w[i], s.y[i], s.b0[i]);
    return gpu_sig_args(h, s.b0[GPU_MVQ_SET], s.add);
}

/* MVQ_ROWS rows per warp, NT tokens (nt of them live) a pass. The lanes of a warp take
 * consecutive units of its rows (each load instruction reads a contiguous run of a row); a
 * lane loads its unit of every row, then dots them against the same activations, so that the
 * activations are read once per MVQ_ROWS rows (one read per row made the L1 the limit). With KS
 * = 2 a block has twice the warps, each row group's units split between two of them (units
 * alternate between the slices a warp's width at a time), their sums added in shared memory:
 * the grids of the 4096-row products of a decode step (256 blocks) left an SM 8 warps, too few
 * loads in flight for the memory's latency (ncu: 12% of the warps active, ~2 TB/s). X8 (one-token
 * passes of activations quantized to 8 bits, gpu_matvec.h): the high level only; half the dot
 * instructions and activation loads of both levels, which bound this loop
 * (dev/kernels/gpu_readpat.cu): 8B tg128 +9%, Q4_K_M +28% on the H200. */
template <int F, int NT, int KS, bool X8 = false, int SD = -1>
__global__ void __launch_bounds__(MVQ_THREADS * KS) k_mmvq(mv_set set, gpu_xq x, int nt, int64_t t0, gpu_mv_sel sel)
{
    gpu_dep_deferred(); /* a lane's first units are loaded before the wait: no kernel writes weights */
    if (sel.ids) gpu_dep_enter(); /* the kernel before wrote the selections */
    constexpr int GROUPS = MVQ_THREADS / 32; /* row groups a block (wave64: half of them hold rows) */
    __shared__ float part[KS > 1 ? KS - 1 : 1][GROUPS][MVQ_ROWS][NT];
    int k = 0;
#pragma unroll
    for (int i = 1; i < GPU_MVQ_SET; i++) k += blockIdx.x >= set.b0[i];
    /* MLX rows: the descriptor by value, its fields kept in registers (by reference, each unit
     * reloaded the ones it reads: 34 of the affine4 loop's 524 instructions; Q4_0's loop took 6
     * more by value), its scales' dtype fixed by SD */
    typedef typename std::conditional<F >= GPU_AFFINE2 && F <= GPU_AFFINE8, gpu_wdesc, const gpu_wdesc &>::type wdesc_t;
    wdesc_t w = set.w[k];
    mvq_fix_sdtype<SD>(w);
    float *__restrict__ y = set.y[k] + t0 * w.rows;
    const uint8_t   *base = w.data;
    if (sel.ids) { /* selection blockIdx.y: its expert's rows, its token's activations, its own output rows */
        const int64_t n = blockIdx.y;
        const int32_t e = sel.ids[n];
        if (e < 0 || e >= sel.n_expert) return; /* the whole block: the router never gives one */
        base += (int64_t)e * w.rows * w.row_bytes;
        y = set.y[k] + n * w.rows;
        x.q += n / sel.per_x * x.nb * XQ_BLOCK, x.d += n / sel.per_x * x.nb;
    }
    const int     lane = threadIdx.x % CELER_WARP, wib = threadIdx.x / CELER_WARP, nwg = MVQ_THREADS / CELER_WARP;
    const int     grp = wib % nwg, ks = wib / nwg; /* the warp's row group and column slice */
    const int64_t r0   = ((int64_t)(blockIdx.x - set.b0[k]) * nwg + grp) * MVQ_ROWS;
    const bool    live = r0 < w.rows; /* a warp past the rows still meets the block's barrier */
    const uint8_t *rows[MVQ_ROWS];
#pragma unroll
    for (int i = 0; i < MVQ_ROWS; i++) rows[i] = base + (r0 + i < w.rows ? r0 + i : 0) * w.row_bytes;
    const int64_t nu = live ? units<F>(w.cols) : 0;
    float         acc[MVQ_ROWS][NT];
#pragma unroll
    for (int i = 0; i < MVQ_ROWS; i++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[i][t] = 0.0f;
    /* MVQ_UNROLL units a lane loaded before any is used: bytes in flight (one unit a lane left a
     * decode step's SMs with half of what the memory's latency wants); the K-quants one: their
     * scales and minimums, unpacked for two units, held so many registers that an SM kept few warps
     * (ptxas: Q4_K 210 → 128 registers with one, Q6_K 128 → 96; 8B Q4_K_M tg128 +7% on the H200) */
    constexpr int U  = F == GPU_Q5_K || F == GPU_Q4_K || F == GPU_Q6_K ? 1 : MVQ_UNROLL;
    const int     SW = KS * CELER_WARP; /* units between a lane's consecutive ones */
    const int64_t u0 = ks * CELER_WARP + lane;
    raw_unit      ru[U][MVQ_ROWS];
    units_load<F, U>(w, rows, u0, nu, SW, ru);
    /* early (gpu_vendor.h): those loads overlap the kernel before, which wrote x and, with add, y */
    gpu_dep_enter();
    for (int64_t u = u0; u < nu; u += U * SW) {
        if (u != u0) units_load<F, U>(w, rows, u, nu, SW, ru);
#pragma unroll
        for (int j = 0; j < U; j++) /* the same units in the same order as one at a time */
            if (u + j * SW < nu) units_dot<F, NT, X8>(w, ru[j], u + j * SW, x, nt, acc);
    }
#pragma unroll
    for (int i = 0; i < MVQ_ROWS; i++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[i][t] = gpu_warp_sum(acc[i][t]);
    if (KS > 1) {
        if (ks > 0 && lane == 0)
#pragma unroll
            for (int i = 0; i < MVQ_ROWS; i++)
#pragma unroll
                for (int t = 0; t < NT; t++) part[ks - 1][grp][i][t] = acc[i][t];
        __syncthreads();
        if (ks > 0) return;
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++)
#pragma unroll
            for (int t = 0; t < NT; t++)
                for (int o = 0; o < KS - 1; o++) acc[i][t] += part[o][grp][i][t];
    }
#pragma unroll
    for (int i = 0; i < MVQ_ROWS; i++)
#pragma unroll
        for (int t = 0; t < NT; t++)
            if (t < nt && lane == 0 && r0 + i < w.rows) {
                float *o = &y[t * w.rows + r0 + i];
                *o       = set.add ? __fadd_rn(*o, acc[i][t]) : acc[i][t];
            }
}

/* A MoE decode step's last products and the weighted sum of each token's K (at most MVQ_CMB)
 * selections in one launch (CELER_GPU_MOE_COMBINE=1, gpu_moe.cu): block (x, t) takes rows
 * MVQ_ROWS x .. of token t's selections, a warp a selection at a time (wave64: two), each summed
 * as k_mmvq's unsliced one-token pass sums a row, the selections' sums met in shared memory;
 * then out[t] = Σ_j wts[t K + j] · y_j, j in order, as k_combine (gpu_moe.cu) sums them, where
 * y_j is selection t K + j's product: the outputs of the two launches it replaces, bit for bit
 * where that product ran unsliced (KS 1). Selection n reads activation row n. */
enum { MVQ_CMB = 8, CMB_THREADS = 32 * MVQ_CMB };
template <int F, int SD>
__global__ void __launch_bounds__(CMB_THREADS)
    k_mmvq_combine(gpu_wdesc w, gpu_xq x, gpu_mv_sel sel, int K, const float *__restrict__ wts, float *__restrict__ out)
{
    gpu_dep_enter(); /* the kernel before wrote the activations (and those before, the selections) */
    __shared__ float part[MVQ_CMB][MVQ_ROWS];
    mvq_fix_sdtype<SD>(w);
    constexpr int U    = F == GPU_Q5_K || F == GPU_Q4_K || F == GPU_Q6_K ? 1 : MVQ_UNROLL;
    const int64_t t    = blockIdx.y, r0 = (int64_t)blockIdx.x * MVQ_ROWS, nu = units<F>(w.cols);
    const int     lane = threadIdx.x % CELER_WARP, wib = threadIdx.x / CELER_WARP, nwv = CMB_THREADS / CELER_WARP;
    for (int j = wib; j < K; j += nwv) {
        const int64_t n = t * K + j;
        const int32_t e = sel.ids[n];
        float         acc[MVQ_ROWS][1];
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++) acc[i][0] = 0.0f;
        if (e >= 0 && e < sel.n_expert) { /* the router never gives another */
            const uint8_t *base = w.data + (int64_t)e * w.rows * w.row_bytes, *rows[MVQ_ROWS];
#pragma unroll
            for (int i = 0; i < MVQ_ROWS; i++) rows[i] = base + (r0 + i < w.rows ? r0 + i : 0) * w.row_bytes;
            gpu_xq xn = x;
            xn.q += n * x.nb * XQ_BLOCK, xn.d += n * x.nb;
            raw_unit ru[U][MVQ_ROWS];
            for (int64_t u = lane; u < nu; u += U * CELER_WARP) {
                units_load<F, U>(w, rows, u, nu, CELER_WARP, ru);
#pragma unroll
                for (int k = 0; k < U; k++)
                    if (u + k * CELER_WARP < nu) units_dot<F, 1, false>(w, ru[k], u + k * CELER_WARP, xn, 1, acc);
            }
        }
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++) acc[i][0] = gpu_warp_sum(acc[i][0]);
        if (lane == 0)
#pragma unroll
            for (int i = 0; i < MVQ_ROWS; i++) part[j][i] = acc[i][0];
    }
    __syncthreads();
    const int i = (int)threadIdx.x;
    if (i >= MVQ_ROWS || r0 + i >= w.rows) return;
    float s = 0.0f;
    for (int j = 0; j < K; j++) s = __fmaf_rn(wts[t * K + j], part[j][i], s);
    out[t * w.rows + r0 + i] = s;
}

/* ---- dispatch ------------------------------------------------------------------------------- */

typedef void (*mmvq_fn)(mv_set, gpu_xq, int, int64_t, gpu_mv_sel);

/* A format's kernels: 1, 2, 4, 8 tokens a pass, one token in MVQ_KS column slices, the
 * two one-token ones with X8. */
enum { MVQ_SLICED = 4, MVQ_X8 = 5, MVQ_X8_SLICED = 6, MVQ_FNS = 7 };
#define MVQ_ROW(F, SD)                                                                                              \
    F, SD, {                                                                                                        \
        k_mmvq<F, 1, 1, false, SD>, k_mmvq<F, 2, 1, false, SD>, k_mmvq<F, 4, 1, false, SD>,                         \
            k_mmvq<F, 8, 1, false, SD>, k_mmvq<F, 1, MVQ_KS, false, SD>, k_mmvq<F, 1, 1, true, SD>,                 \
            k_mmvq<F, 1, MVQ_KS, true, SD>                                                                          \
    }
static const struct {
    int     fmt, sd; /* sd: an MLX format's scales' dtype (gpu_wdesc.sdtype); -1 for the GGUF formats */
    mmvq_fn fn[MVQ_FNS];
} MVQ[] = {
    {MVQ_ROW(GPU_Q4_0, -1)},   {MVQ_ROW(GPU_Q4_1, -1)},   {MVQ_ROW(GPU_Q5_0, -1)},   {MVQ_ROW(GPU_Q5_1, -1)},
    {MVQ_ROW(GPU_Q8_0, -1)},   {MVQ_ROW(GPU_Q4_K, -1)},   {MVQ_ROW(GPU_Q5_K, -1)},   {MVQ_ROW(GPU_Q6_K, -1)},
    {MVQ_ROW(GPU_AFFINE4, 0)}, {MVQ_ROW(GPU_AFFINE4, 1)}, {MVQ_ROW(GPU_AFFINE4, 2)}, {MVQ_ROW(GPU_AFFINE8, 0)},
    {MVQ_ROW(GPU_AFFINE8, 1)}, {MVQ_ROW(GPU_AFFINE8, 2)},
};

static const mmvq_fn *mvq_of(int fmt, int sdtype)
{
    for (size_t i = 0; i < sizeof MVQ / sizeof MVQ[0]; i++)
        if (MVQ[i].fmt == fmt && (MVQ[i].sd < 0 || MVQ[i].sd == sdtype)) return MVQ[i].fn;
    return NULL;
}

bool gpu_matvec_q8_has(int fmt) { return mvq_of(fmt, 0) != NULL; }

/* gpu_matvec_q8 and gpu_matvec_q8_sel, the products written (add false) or added to y. */
static celer_status mvq_launch(gpu_backend *g, const gpu_wdesc *w, int n, int fmt, const gpu_xq *xq, int64_t T,
                               const gpu_mv_sel *sel, int64_t n_sel, float *const *y, bool add, celer_error *err)
{
    if (n < 1 || n > GPU_MVQ_SET)
        return celer_fail(err, CELER_ERR_INVALID, "%s: %d weights in one decode product", CELER_GPU_NAME, n);
    const mmvq_fn *fn = mvq_of(fmt, w[0].sdtype);
    mv_set         set;
    if (!fn)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: no integer decode kernel for format %d", CELER_GPU_NAME, fmt);
    for (int i = 1; i < n; i++)
        if (w[i].sdtype != w[0].sdtype)
            return celer_fail(err, CELER_ERR_INVALID, "%s: one decode product of weights whose scales differ in type",
                              CELER_GPU_NAME);
    if (sel && (n_sel < 1 || n_sel > GPU_MAX_GRID_YZ))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: %lld expert selections in one product", CELER_GPU_NAME,
                          (long long)n_sel);
    memset(&set, 0, sizeof set);
    int64_t total = 0;
    for (int i = 0; i < GPU_MVQ_SET; i++) {
        unsigned blocks = 0;
        if (i < n && gpu_grid(g, w[i].rows, MVQ_ROWS * (MVQ_THREADS / g->prop.warpSize), &blocks, "matvec_q8", err))
            return err->code;
        set.b0[i] = (unsigned)total;
        if (i < n) set.w[i] = w[i], set.y[i] = y[i];
        total += blocks;
    }
    set.b0[GPU_MVQ_SET] = (unsigned)total;
    set.add             = add;
    if (total > GPU_MAX_GRID_X)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: a decode product past the grid's limit", CELER_GPU_NAME);
    for (int i = n; i < GPU_MVQ_SET; i++) set.b0[i] = (unsigned)total; /* no blocks for the unused slots */
    /* one-token passes over a grid short of MVQ_KS_BELOW blocks an SM: column slices */
    const bool sliced = total * (sel ? n_sel : 1) < (int64_t)MVQ_KS_BELOW * g->prop.multiProcessorCount;
    /* one-token passes of 8-bit activations: the kernels that neither load nor multiply the low
     * codes (the others read them as zeros: the same sums, at twice the work) */
    const int  t1 = xq->x8 ? (sliced ? MVQ_X8_SLICED : MVQ_X8) : (sliced ? MVQ_SLICED : 0);
    const int  t1_threads = sliced ? MVQ_THREADS * MVQ_KS : MVQ_THREADS;
    if (sel) /* one token each: a selection per grid row */
        return GPU_LAUNCH_KEEPING_XQ(g, err, "matvec_q8", fn[t1], dim3((unsigned)total, (unsigned)n_sel), t1_threads, 0,
                                     set, *xq, 1, (int64_t)0, *sel);
    const gpu_mv_sel none = {NULL, 1, 0};
    for (int64_t t0 = 0; t0 < T; t0 += GPU_MVQ_TOKENS) {
        const int nt = (int)(T - t0 < (int64_t)GPU_MVQ_TOKENS ? T - t0 : (int64_t)GPU_MVQ_TOKENS);
        const int ix = nt == 1 ? t1 : nt == 2 ? 1 : nt <= 4 ? 2 : 3;
        gpu_xq    x  = *xq;
        x.q += t0 * x.nb * XQ_BLOCK;
        x.d += t0 * x.nb;
        if (GPU_LAUNCH_KEEPING_XQ(g, err, "matvec_q8", fn[ix], (unsigned)total, nt == 1 ? t1_threads : MVQ_THREADS, 0,
                                  set, x, nt, t0, none))
            return err->code;
    }
    return CELER_OK;
}

celer_status gpu_matvec_q8_sel(gpu_backend *g, const gpu_wdesc *w, int n, int fmt, const gpu_xq *xq, int64_t T,
                               const gpu_mv_sel *sel, int64_t n_sel, float *const *y, celer_error *err)
{
    return mvq_launch(g, w, n, fmt, xq, T, sel, n_sel, y, false, err);
}

celer_status gpu_matvec_q8(gpu_backend *g, const gpu_wdesc *w, int n, int fmt, const gpu_xq *xq, int64_t T,
                           float *const *y, bool add, celer_error *err)
{
    return mvq_launch(g, w, n, fmt, xq, T, NULL, 0, y, add, err);
}

typedef void (*cmb_fn)(gpu_wdesc, gpu_xq, gpu_mv_sel, int, const float *, float *);
#define CMB_ROW(F, SD) {F, SD, k_mmvq_combine<F, SD>}
static const struct {
    int    fmt, sd; /* as MVQ's */
    cmb_fn fn;
} CMB[] = {
    CMB_ROW(GPU_Q4_0, -1),   CMB_ROW(GPU_Q4_1, -1),   CMB_ROW(GPU_Q5_0, -1),   CMB_ROW(GPU_Q5_1, -1),
    CMB_ROW(GPU_Q8_0, -1),   CMB_ROW(GPU_Q4_K, -1),   CMB_ROW(GPU_Q5_K, -1),   CMB_ROW(GPU_Q6_K, -1),
    CMB_ROW(GPU_AFFINE4, 0), CMB_ROW(GPU_AFFINE4, 1), CMB_ROW(GPU_AFFINE4, 2), CMB_ROW(GPU_AFFINE8, 0),
    CMB_ROW(GPU_AFFINE8, 1), CMB_ROW(GPU_AFFINE8, 2),
};

bool gpu_matvec_q8_combines(int64_t K) { return K >= 1 && K <= MVQ_CMB; }

celer_status gpu_matvec_q8_combine(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq,
                                   const gpu_mv_sel *sel, int64_t T, int64_t K, const float *wts, float *out,
                                   celer_error *err)
{
    cmb_fn fn = NULL;
    for (size_t i = 0; i < sizeof CMB / sizeof CMB[0]; i++)
        if (CMB[i].fmt == fmt && (CMB[i].sd < 0 || CMB[i].sd == w->sdtype)) fn = CMB[i].fn;
    if (!fn || !gpu_matvec_q8_combines(K) || sel->per_x != 1)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: no combining decode kernel for format %d, %lld selections",
                          CELER_GPU_NAME, fmt, (long long)K);
    unsigned blocks;
    if (T < 1 || T > GPU_MAX_GRID_YZ)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: %lld tokens in one combining product", CELER_GPU_NAME,
                          (long long)T);
    if (gpu_grid(g, w->rows, MVQ_ROWS, &blocks, "matvec_q8 combine", err)) return err->code;
    return GPU_LAUNCH_KEEPING_XQ(g, err, "matvec_q8 combine", fn, dim3(blocks, (unsigned)T), CMB_THREADS, 0, *w, *xq,
                                 *sel, (int)K, wts, out);
}
