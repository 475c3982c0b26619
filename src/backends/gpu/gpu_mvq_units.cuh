/* The integer decode kernels' units (gpu_matvec.cu's k_mmvq and gpu_matvec_combine.cu's
 * k_mmvq_combine): a lane's block ("unit") of each of a warp's MVQ_ROWS rows of a weight format,
 * loaded with 128-bit loads and dotted with the quantized activations four bytes at a time
 * (gpu_dp4a), scales applied per block. MVQ_UNROLL units a lane are loaded before any is used
 * (the K-quants one: see k_mmvq). */
#ifndef CELER_BACKENDS_GPU_GPU_MVQ_UNITS_CUH
#define CELER_BACKENDS_GPU_GPU_MVQ_UNITS_CUH

#include "backends/gpu/gpu_matvec.h"

enum { MVQ_ROWS = 4, MVQ_UNROLL = 2 };
static const uint32_t M4 = 0x0f0f0f0fu;

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

static __device__ __forceinline__ void xblk_set(xblk &r, int4 h0, int4 h1, int4 l0, int4 l1)
{
    r.h[0] = h0.x, r.h[1] = h0.y, r.h[2] = h0.z, r.h[3] = h0.w;
    r.h[4] = h1.x, r.h[5] = h1.y, r.h[6] = h1.z, r.h[7] = h1.w;
    r.l[0] = l0.x, r.l[1] = l0.y, r.l[2] = l0.z, r.l[3] = l0.w;
    r.l[4] = l1.x, r.l[5] = l1.y, r.l[6] = l1.z, r.l[7] = l1.w;
}

/* X8 (activations quantized to 8 bits: their low codes are zeros, d · S the high codes' sum):
 * the high level only, the low codes not loaded. */
template <bool X8> static __device__ __forceinline__ xblk load_x(const gpu_xq &x, int t, int64_t b)
{
    const int4 *p = (const int4 *)xq_words(x, t, b);
    const int4  z = make_int4(0, 0, 0, 0);
    xblk        r;
    xblk_set(r, p[0], p[1], X8 ? z : p[2], X8 ? z : p[3]);
    r.dd = x.d[(int64_t)t * x.nb + b];
    return r;
}

/* A one-token pass's activations staged in shared memory (XS): the lanes of a warp read their
 * units' blocks from it, where from global memory each 16-byte load of a lane's block touched
 * its own cache line (a Q4_K unit's two blocks, 128 bytes a lane: 32 L1 wavefronts a load, three
 * times Q4_0's for the same weight bytes; ncu, the 8B's Q4_K GLU: the L1 55% busy, the DRAM 43%).
 * Block b's 16-byte chunk k (hi words 0-3, 4-7, lo words 0-3, 4-7) at c[k · nb + xs_slot(b)], its
 * (d, d · S) at dd[b]: a warp's loads of the same chunk of consecutive blocks are consecutive. The
 * K-quants whose units take blocks 2u and 2u + 1 keep even and odd blocks apart (PAIRS), so that
 * those loads are consecutive too. */
template <int F> struct xs_src {
    static constexpr bool PAIRS = F == GPU_Q4_K || F == GPU_Q5_K;
    const uint4          *c;
    const float2         *dd;
    int64_t               nb;
};
template <int F> static __device__ __forceinline__ int64_t xs_slot(int64_t b, int64_t nb)
{
    return xs_src<F>::PAIRS ? (b % 2) * (nb / 2) + b / 2 : b;
}
/* Shared memory for the staged activations of a row of cols values (cols / 32 blocks), and
 * whether a one-token pass of g over weights of format fmt stages them (unless
 * CELER_GPU_MVQ_XS=0; nb even: the PAIRS split; within the 48 KiB every target gives a block
 * without asking). A short grid (a sliced one: mvq_launch) stages them for the K-quants only:
 * a block copies all of x after its wait, and there few other blocks' loads hide the copy
 * (k_mmvq's comment has the measurements). */
static inline size_t xs_bytes(int64_t cols) { return (size_t)(cols / 32) * (4 * sizeof(uint4) + sizeof(float2)); }
static inline bool   xs_staged(const gpu_backend *g, int fmt, int64_t cols, bool short_grid)
{
    const bool kq = fmt == GPU_Q4_K || fmt == GPU_Q5_K || fmt == GPU_Q6_K; /* units' blocks scattered */
    return g->mvq_xs && cols % 64 == 0 && xs_bytes(cols) <= 48 * 1024 && (!short_grid || kq);
}

template <int F> static __device__ __forceinline__ xs_src<F> xs_view(const uint4 *mem, int64_t nb)
{
    return {mem, (const float2 *)(mem + 4 * nb), nb};
}
/* The block's threads copy token 0 of x into mem (X8: the hi chunks and dd only), then wait for
 * one another. */
template <int F, bool X8> static __device__ __forceinline__ void xs_fill(uint4 *mem, const gpu_xq &x)
{
    const int     parts = X8 ? 2 : 4;
    const int64_t nb    = x.nb;
    float2       *dd    = (float2 *)(mem + 4 * nb);
    for (int64_t i = threadIdx.x; i < nb * parts; i += blockDim.x) {
        const int64_t b = i / parts;
        const int     k = (int)(i % parts);
        mem[k * nb + xs_slot<F>(b, nb)] = ((const uint4 *)xq_words(x, 0, b))[k];
    }
    for (int64_t i = threadIdx.x; i < nb; i += blockDim.x) dd[i] = x.d[i];
    __syncthreads();
}

template <bool X8, int F> static __device__ __forceinline__ xblk load_x(const xs_src<F> &x, int t, int64_t b)
{
    (void)t; /* one token */
    const int4 *c = (const int4 *)x.c + xs_slot<F>(b, x.nb);
    const int4  z = make_int4(0, 0, 0, 0);
    xblk        r;
    xblk_set(r, c[0], c[x.nb], X8 ? z : c[2 * x.nb], X8 ? z : c[3 * x.nb]);
    r.dd = x.dd[b];
    return r;
}

/* Words w, w + 1 (w even) of block b's hi codes and of its lo codes (X8: zeros), and its d. */
static __device__ __forceinline__ void x_pair(const gpu_xq &x, int t, int64_t b, int w, bool x8, int2 *hi, int2 *lo,
                                              float *d)
{
    const int2 *p = (const int2 *)(xq_words(x, t, b) + w);
    *hi = p[0], *lo = x8 ? make_int2(0, 0) : p[4]; /* lo 32 bytes on */
    *d  = x.d[(int64_t)t * x.nb + b].x;
}
template <int F>
static __device__ __forceinline__ void x_pair(const xs_src<F> &x, int t, int64_t b, int w, bool x8, int2 *hi,
                                              int2 *lo, float *d)
{
    (void)t;
    const int2 *p = (const int2 *)(x.c + (w / 4) * x.nb + xs_slot<F>(b, x.nb)) + (w % 4) / 2;
    *hi = p[0], *lo = x8 ? make_int2(0, 0) : p[4 * x.nb]; /* two chunks on: 2 nb uint4, 4 nb int2 */
    *d  = x.dd[b].x;
}

/* 256 · (w · hi) + (w · lo) over the 32 values of x block a, word k of w against word k of hi
 * and of lo (X8: 256 · (w · hi), the activations to 8 bits); over words K0 .. K0 + NW - 1 only
 * where a format scales parts of a block apart (nvfp4: 16 values, 4 words). */
template <bool X8, int K0 = 0, int NW = 8> static __device__ __forceinline__ float dot32(const int w[8], const xblk &a)
{
    int sh = 0, sl = 0;
#pragma unroll
    for (int k = K0; k < K0 + NW; k++) sh = gpu_dp4a(w[k], a.h[k], sh), sl = X8 ? 0 : gpu_dp4a(w[k], a.l[k], sl);
    return (float)(256 * sh + sl);
}

/* Q4_0 .. Q5_1 (SPLIT): 16 bytes of codes, byte i holding value i (low nibble) and i + 16. */
static __device__ __forceinline__ void nibbles(uint4 q, int w[8])
{
    const uint32_t v[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int k = 0; k < 4; k++) w[k] = (int)(v[k] & M4), w[4 + k] = (int)((v[k] >> 4) & M4);
}

/* MLX affine codes of B bits as stored (value j at bit B j of the chunk's words wd), as bytes: word
 * k of q holds values 4k .. 4k + 3 (every shift and mask fixed at compile time). */
template <int B> static __device__ __forceinline__ void bits_bytes(const uint32_t (&wd)[B], int q[8])
{
#pragma unroll
    for (int k = 0; k < 8; k++) {
        const int bit = 4 * B * k, i = bit / 32, sh = bit % 32;
        uint32_t  t = wd[i] >> sh;
        if (sh + 4 * B > 32) t |= wd[i + 1] << (32 - sh);
        q[k] = (int)bits_spread<B>(t);
    }
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
    } else if (F == GPU_Q4_K) { /* SPLIT: a unit is 64 values, sub-blocks 2p and 2p + 1; its header apart */
        const uint8_t *qs = row + 32 * u;
        r.v[0] = ld_u4(row + w.scales_off + 16 * (u / 4)), r.v[1] = ld_u4(qs), r.v[2] = ld_u4(qs + 16);
    } else if (F == GPU_Q5_K) { /* as stored: a unit is 64 values, sub-blocks 2p and 2p + 1 */
        const uint8_t *blk = row + 176 * (u / 4), *qs = blk + 48 + 32 * (u % 4);
        r.v[0] = ld_u4(blk), r.v[1] = ld_u4(qs), r.v[2] = ld_u4(qs + 16);
        r.v[3] = ld_u4(blk + 16), r.v[4] = ld_u4(blk + 32);
    } else if (F == GPU_Q6_K) { /* SPLIT in unit order (q6k_order.h): 8 positions of a half, 4 values each */
        const int64_t  sb = u / 8;
        const int      hf = (int)(u % 8) / 4, l0 = 8 * (int)(u % 4); /* positions l0 .. l0 + 7 of half hf */
        const uint8_t *c  = row + 192 * sb;
        const uint2    H  = ld_u2(c + q6k_hi_at(hf, l0));
        r.v[0]            = ld_u4(c + q6k_lo_at(hf, 0, l0)); /* quarter 0's low nibbles, then quarter 1's */
        r.v[1]            = make_uint4(H.x, H.y, 0, 0);
        r.h[0]            = *(const uint32_t *)(row + w.scales_off + 16 * sb + q6k_scale_at(hf, 0, l0));
        r.h[1]            = ld_h16(row + w.scales_off + (w.cols >> 4) + 2 * sb); /* d: after the row's scales */
    } else if (F == GPU_MXFP4 || F == GPU_NVFP4) { /* MLX_ROWS as stored: 16 bytes a 32-value chunk */
        r.v[0] = ld_u4(row + 16 * u);
        r.h[0] = F == GPU_MXFP4 ? row[w.scales_off + u] : ld_h16(row + w.scales_off + 2 * u); /* e8m0; two e4m3 */
    } else if (F >= GPU_AFFINE2 && F <= GPU_AFFINE8) {
        /* MLX_ROWS: a unit is a 32-value chunk; 2, 3, 5 and 6 bits as stored (8, 12, 20 and 24
         * bytes a chunk: 8-, 4-, 4- and 8-byte aligned), the words in v[0] then v[1] */
        const int64_t g = mlx_group_of(w, u);
        if (F == GPU_AFFINE4) r.v[0] = ld_u4(row + 16 * u);
        else if (F == GPU_AFFINE8) r.v[0] = ld_u4(row + 32 * u), r.v[1] = ld_u4(row + 32 * u + 16);
        else if (F == GPU_AFFINE2) {
            const uint2 c = ld_u2(row + 8 * u);
            r.v[0] = make_uint4(c.x, c.y, 0, 0);
        } else if (F == GPU_AFFINE3) {
            const uint32_t *c = (const uint32_t *)(row + 12 * u);
            r.v[0] = make_uint4(c[0], c[1], c[2], 0);
        } else if (F == GPU_AFFINE5) {
            const uint32_t *c = (const uint32_t *)(row + 20 * u);
            r.v[0] = make_uint4(c[0], c[1], c[2], c[3]), r.v[1] = make_uint4(c[4], 0, 0, 0);
        } else {
            const uint2 *c = (const uint2 *)(row + 24 * u);
            const uint2  a = c[0], b = c[1], d = c[2];
            r.v[0] = make_uint4(a.x, a.y, b.x, b.y), r.v[1] = make_uint4(d.x, d.y, 0, 0);
        }
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
 * bf16: the low and high halves of h[0]). */
static __device__ __forceinline__ void mlx_pair(const raw_unit &r, int32_t t, float *sc, float *bi)
{
    mlx_scale_bias(r.h[0], r.h[1], t, sc, bi);
}

/* Adds unit u of MVQ_ROWS rows (loaded in r) dotted with the activations of each live token
 * to acc; each token's activations are loaded once for all the rows, from x: a gpu_xq, or an
 * xs_src (one token) staged by xs_fill. */
template <int F, int NT, bool X8, typename X>
static __device__ __forceinline__ void units_dot(const gpu_wdesc &w, const raw_unit (&r)[MVQ_ROWS], int64_t u,
                                                 const X &x, int nt, float (&acc)[MVQ_ROWS][NT])
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
                int2  xh, xl; /* words l0 / 4, l0 / 4 + 1 of the block's hi and lo codes */
                float dx;
                x_pair(x, t, 8 * (u / 8) + 4 * hf + j, l0 / 4, X8, &xh, &xl, &dx);
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
    } else if (F == GPU_MXFP4 || F == GPU_NVFP4) { /* twice the codes' values, half the scales (exact) */
        int   q[MVQ_ROWS][8];
        float s0[MVQ_ROWS], s1[MVQ_ROWS]; /* values 0..15's scale, 16..31's */
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++) {
            const uint32_t v[4] = {r[i].v[0].x, r[i].v[0].y, r[i].v[0].z, r[i].v[0].w};
#pragma unroll
            for (int k = 0; k < 4; k++) e2m1_bytes(v[k], &q[i][2 * k], &q[i][2 * k + 1]);
            if (F == GPU_MXFP4) s0[i] = s1[i] = 0.5f * dec_e8m0(r[i].h[0]);
            else
                s0[i] = 0.5f * (dec_e4m3(r[i].h[0] & 0xff) * w.gmul), s1[i] = 0.5f * (dec_e4m3(r[i].h[0] >> 8) * w.gmul);
        }
#pragma unroll
        for (int t = 0; t < NT; t++) {
            if (t >= nt) continue;
            const xblk a = load_x<X8>(x, t, u);
#pragma unroll
            for (int i = 0; i < MVQ_ROWS; i++) {
                if (F == GPU_MXFP4) acc[i][t] += s0[i] * a.dd.x * dot32<X8>(q[i], a);
                else acc[i][t] += a.dd.x * (s0[i] * dot32<X8, 0, 4>(q[i], a) + s1[i] * dot32<X8, 4, 4>(q[i], a));
            }
        }
    } else if (F >= GPU_AFFINE2 && F <= GPU_AFFINE6) {
        /* 4 bits: byte i holds value i (low nibble) and i + 16 (MLX_ROWS), as Q4_0; 2, 3, 5, 6: as stored */
        constexpr int B = affine_bits<F>();
        int           q[MVQ_ROWS][8];
        float         sc[MVQ_ROWS], bi[MVQ_ROWS];
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++) {
            if (F == GPU_AFFINE4) nibbles(r[i].v[0], q[i]);
            else {
                const uint32_t all[8] = {r[i].v[0].x, r[i].v[0].y, r[i].v[0].z, r[i].v[0].w,
                                         r[i].v[1].x, r[i].v[1].y, r[i].v[1].z, r[i].v[1].w};
                uint32_t       wd[B];
#pragma unroll
                for (int k = 0; k < B; k++) wd[k] = all[k];
                bits_bytes<B>(wd, q[i]);
            }
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

/* The formats the integer decode kernels are built for, ROW(format, sd) each: sd the scales' dtype
 * of an MLX format (gpu_wdesc.sdtype), -1 for a GGUF format (its own). The kernel tables of
 * gpu_matvec.cu, gpu_matvec_combine.cu and gpu_matvec_glu.cu. */
#define MVQ_FORMATS(ROW)                                                                                            \
    ROW(GPU_Q4_0, -1), ROW(GPU_Q4_1, -1), ROW(GPU_Q5_0, -1), ROW(GPU_Q5_1, -1), ROW(GPU_Q8_0, -1),                  \
        ROW(GPU_Q4_K, -1), ROW(GPU_Q5_K, -1), ROW(GPU_Q6_K, -1), ROW(GPU_AFFINE4, 0), ROW(GPU_AFFINE4, 1),          \
        ROW(GPU_AFFINE4, 2), ROW(GPU_AFFINE8, 0), ROW(GPU_AFFINE8, 1), ROW(GPU_AFFINE8, 2), ROW(GPU_MXFP4, -1),       \
        ROW(GPU_NVFP4, -1), ROW(GPU_AFFINE3, 0), ROW(GPU_AFFINE3, 1), ROW(GPU_AFFINE3, 2), ROW(GPU_AFFINE6, 0),        \
        ROW(GPU_AFFINE6, 1), ROW(GPU_AFFINE6, 2), ROW(GPU_AFFINE2, 0), ROW(GPU_AFFINE2, 1), ROW(GPU_AFFINE2, 2),      \
        ROW(GPU_AFFINE5, 0), ROW(GPU_AFFINE5, 1), ROW(GPU_AFFINE5, 2)

/* Such a table's row for a weight of format fmt and scales' dtype sdtype, or NULL. */
template <typename R, size_t N> static inline const R *mvq_row(const R (&t)[N], int fmt, int sdtype)
{
    for (size_t i = 0; i < N; i++)
        if (t[i].fmt == fmt && (t[i].sd < 0 || t[i].sd == sdtype)) return &t[i];
    return NULL;
}

#endif
