/* Decoding weights on the device: every format the GPU runs natively, read 32 consecutive
 * values of a row at a time (a "chunk"; every native format's rows are whole chunks). The
 * matmul and embedding kernels are written once over dec32<F>.
 *
 * The GGUF decoders compute what the reference dequantizers (quant/dequant.c, dequant_k.c)
 * compute, operation for operation and never fused (__fmul_rn / __fadd_rn), so an embedding row
 * equals the CPU's bit for bit. The MLX decoders compute scale * q + bias in float32 without the
 * rounding to the scales' dtype that mx.dequantize adds: the matmul accumulates in float32
 * anyway, and MLX embedding rows are looked up from the host arrays (gpu_matmul.cu). */
#ifndef CELER_BACKENDS_GPU_GPU_DECODE_CUH
#define CELER_BACKENDS_GPU_GPU_DECODE_CUH

#include "backends/gpu/gpu_backend.h"
#include "backends/gpu/q6k_order.h"

#include <stdint.h>

enum gpu_fmt {
    GPU_F32, GPU_F16, GPU_BF16,
    GPU_Q4_0, GPU_Q4_1, GPU_Q5_0, GPU_Q5_1, GPU_Q8_0, GPU_Q4_K, GPU_Q5_K, GPU_Q6_K,
    GPU_AFFINE2, GPU_AFFINE3, GPU_AFFINE4, GPU_AFFINE5, GPU_AFFINE6, GPU_AFFINE8,
    GPU_MXFP4, GPU_MXFP8, GPU_NVFP4,
    GPU_FMT_COUNT
};

/* A table of kernel K's instances, indexed by enum gpu_fmt. */
#define GPU_FMT_TABLE(K)                                                                                            \
    {K<GPU_F32>,     K<GPU_F16>,     K<GPU_BF16>,    K<GPU_Q4_0>,    K<GPU_Q4_1>,    K<GPU_Q5_0>,    K<GPU_Q5_1>,   \
     K<GPU_Q8_0>,    K<GPU_Q4_K>,    K<GPU_Q5_K>,    K<GPU_Q6_K>,    K<GPU_AFFINE2>, K<GPU_AFFINE3>, K<GPU_AFFINE4>, \
     K<GPU_AFFINE5>, K<GPU_AFFINE6>, K<GPU_AFFINE8>, K<GPU_MXFP4>,   K<GPU_MXFP8>,   K<GPU_NVFP4>}

/* A weight as the kernels see it. */
typedef struct {
    const uint8_t *data;
    int64_t        rows, cols;
    int64_t        row_bytes;
    int32_t        gshift;     /* MLX affine: log2 of the values per scale (groups of 32, 64, 128) */
    int32_t        sdtype;     /* MLX affine scales and biases: 0 f32, 1 f16, 2 bf16 */
    int64_t        scales_off; /* MLX: offset of a row's scales in the row (its codes' bytes); SPLIT: of its headers */
    int64_t        biases_off; /* MLX affine: of its first bias (group g's scale and bias 2 · their size · g on) */
    float          gmul;       /* nvfp4: global scale / 2688, else 1 */
} gpu_wdesc;

/* The scale group of 32-value chunk c of an MLX affine row: a shift (groups are powers of two,
 * gpu_weight_desc refuses others), where a 64-bit division by the runtime group cost more than
 * the rest of a decode unit (affine4 ran at 40% of Q4_0's speed on 4096 × 14336 at T = 1). */
static __device__ __forceinline__ int64_t mlx_group_of(const gpu_wdesc &w, int64_t c) { return (32 * c) >> w.gshift; }

/* A weight's part in a step's signature (gpu_backend.h): its bytes and shape. */
static inline uint64_t gpu_sig_arg(uint64_t h, const gpu_wdesc &w)
{
    return gpu_sig_args(h, w.data, w.rows, w.cols, w.row_bytes, w.gshift, w.sdtype, w.scales_off, w.biases_off, w.gmul);
}

/* The f16 of the low 16 bits of h: the hardware's conversion (exact: every f16 is an f32). A
 * decoder written out in integer steps branched on subnormals and infinities; in the decode
 * kernels, where each unit converts several scales, those branches were a large share of the
 * instructions (MLX affine 4-bit: 113 branches in the PTX of its decode kernel, 25 for Q4_0). */
static __device__ __forceinline__ float dec_f16(uint32_t h) { return gpu_f16_val(h); }

static __device__ __forceinline__ float dec_bf16(uint32_t b) { return __uint_as_float(b << 16); }

static __device__ __forceinline__ uint32_t ld16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }

/* An MLX affine group's scale and bias from their words as the MLX_ROWS layout holds them side by
 * side (sdtype t: f32, h0 and h1; f16 and bf16, the low and high halves of h0). A bf16 half is
 * the top of an f32: the bias's word masked, the scale's shifted, one instruction each (apart, as
 * 16-bit values, four). */
static __device__ __forceinline__ void mlx_scale_bias(uint32_t h0, uint32_t h1, int32_t t, float *sc, float *bi)
{
    if (t == 0) *sc = __uint_as_float(h0), *bi = __uint_as_float(h1);
    else if (t == 1) *sc = dec_f16(h0 & 0xffffu), *bi = dec_f16(h0 >> 16);
    else *sc = __uint_as_float(h0 << 16), *bi = __uint_as_float(h0 & 0xffff0000u);
}

/* An e2m1 code (sign, two exponent bits, a mantissa bit): twice its magnitude, 0 1 2 3 4 6 8 12,
 * is nibble c & 7 of a constant. A table of eight floats indexed at run time lived in each
 * thread's local memory (a 32-byte stack frame): on an H100 a 14336 x 4096 mxfp4 product of 512
 * tokens (the BLAS path, which dequantizes with this) took 672 us against affine 4-bit's 169. */
static __device__ __forceinline__ float dec_e2m1(uint32_t c)
{
    const float v = (float)((0xc8643210u >> (4 * (c & 7))) & 15) * 0.5f;
    return c & 8 ? -v : v;
}

/* The bits of an MLX affine format's codes (F an enum gpu_fmt from GPU_AFFINE2 to GPU_AFFINE8). */
template <int F> static __host__ __device__ constexpr int affine_bits()
{
    return F == GPU_AFFINE2   ? 2
           : F == GPU_AFFINE3 ? 3
           : F == GPU_AFFINE4 ? 4
           : F == GPU_AFFINE5 ? 5
           : F == GPU_AFFINE6 ? 6
                              : 8;
}

/* Four B-bit codes, code e at bits B e of t, as bytes (code e in byte e). */
template <int B> static __device__ __forceinline__ uint32_t bits_spread(uint32_t t)
{
    constexpr uint32_t M = (1u << B) - 1;
    uint32_t           v = 0;
#pragma unroll
    for (int e = 0; e < 4; e++) v |= ((t >> (B * e)) & M) << (8 * e);
    return v;
}

/* mxfp4 and nvfp4 codes (e2m1: a sign, two exponent bits, a mantissa bit), c_j at bits 4j of v,
 * as signed bytes of twice their values (0, ±1, ±2, ±3, ±4, ±6, ±8, ±12: exact): codes 0..3 into
 * *lo, 4..7 into *hi. Each magnitude looked up in a positive and a negative table of eight bytes,
 * then each byte taken from the one its sign names (byte i of the negative one is byte 4 + i of
 * the pair). */
static __device__ __forceinline__ void e2m1_bytes(uint32_t v, int *lo, int *hi)
{
    const uint32_t P0 = 0x03020100u, P1 = 0x0c080604u; /* 0, 1, 2, 3, 4, 6, 8, 12 */
    const uint32_t N0 = 0xfdfeff00u, N1 = 0xf4f8fafcu; /* their negatives */
    const uint32_t m = v & 0x77777777u, s = ((v >> 1) & 0x44444444u) | 0x32103210u;
    *lo = (int)gpu_prmt(gpu_prmt(P0, P1, m), gpu_prmt(N0, N1, m), s);
    *hi = (int)gpu_prmt(gpu_prmt(P0, P1, m >> 16), gpu_prmt(N0, N1, m >> 16), s >> 16);
}

static __device__ __forceinline__ float dec_e4m3(uint32_t b)
{
    uint32_t e = (b >> 3) & 15, m = b & 7;
    float    v;
    if (e == 15 && m == 7) v = __uint_as_float(0x7fc00000u);
    else if (e == 0) v = (float)m * 0.001953125f; /* m · 2^-9 */
    else v = __uint_as_float(((e + 120) << 23) | (m << 20));
    return b & 0x80 ? -v : v;
}

static __device__ __forceinline__ float dec_e8m0(uint32_t s)
{
    return __uint_as_float(s == 0 ? 0x00400000u : s == 255 ? 0x7f800000u : s << 23);
}

static __device__ __forceinline__ float dec_sdtype(const uint8_t *p, int32_t t)
{
    if (t == 0) return __uint_as_float((uint32_t)ld16(p) | (uint32_t)ld16(p + 2) << 16);
    return t == 1 ? dec_f16(ld16(p)) : dec_bf16(ld16(p));
}

/* Q4_K / Q5_K: the 6-bit scale and min of sub-block j. */
static __device__ __forceinline__ void k_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m  = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 2) & 0x30);
        *m  = (s[j + 4] >> 4) | ((s[j] >> 2) & 0x30);
    }
}

/* v rounded to an MLX weight's scales' dtype (sdtype: 0 f32, 1 f16, 2 bf16; to nearest, ties
 * to even, as quant/half.h rounds on the host) and back. */
static __device__ __forceinline__ float mx_round(float v, int32_t sdtype)
{
    if (sdtype == 1) return __half2float(__float2half_rn(v));
    if (sdtype != 2) return v;
    const uint32_t x = __float_as_uint(v);
    if ((x & 0x7fffffffu) > 0x7f800000u) return v; /* NaN */
    return __uint_as_float((x + 0x7fffu + ((x >> 16) & 1u)) & 0xffff0000u);
}

/* Value j (0..31) of chunk c of the row at `row`. Written per value so that the decode-step
 * kernel can give each lane of a warp one value of a chunk (its loads of the activations are
 * then one contiguous line per warp); dec32 below unrolls it over a whole chunk, where the
 * compiler shares the block's scale loads between the 32 values. MX (MLX affine): the value as
 * mx.dequantize gives it, the product and the sum each rounded to the scales' dtype (an
 * embedding row; the products keep f32). */
template <int F, bool MX = false>
static __device__ __forceinline__ float dec1(const gpu_wdesc &w, const uint8_t *row, int64_t c, int j)
{
    if (F == GPU_F32) return ((const float *)row)[32 * c + j];
    if (F == GPU_F16) return dec_f16(((const uint16_t *)row)[32 * c + j]);
    if (F == GPU_BF16) return dec_bf16(((const uint16_t *)row)[32 * c + j]);
    if (F == GPU_Q4_0 || F == GPU_Q4_1 || F == GPU_Q5_0 || F == GPU_Q5_1) { /* SPLIT: 16 code bytes a block */
        const bool     has_m = F == GPU_Q4_1 || F == GPU_Q5_1, five = F == GPU_Q5_0 || F == GPU_Q5_1;
        const int      hb    = 2 + (has_m ? 2 : 0) + (five ? 4 : 0);
        const uint8_t *b     = row + w.scales_off + hb * c; /* d, m, then qh */
        const uint8_t *qh    = b + (has_m ? 4 : 2);
        const uint8_t *qs    = row + 16 * c;
        int            q     = (qs[j % 16] >> (4 * (j / 16))) & 0x0f;
        if (five) q |= ((qh[j / 8] >> (j % 8)) & 1) << 4;
        const float d = dec_f16(ld16(b));
        if (has_m) return __fadd_rn(__fmul_rn(d, (float)q), dec_f16(ld16(b + 2)));
        return __fmul_rn(d, (float)(q - (five ? 16 : 8)));
    }
    if (F == GPU_Q8_0) /* SPLIT: 32 code bytes a block, then the scales */
        return __fmul_rn((float)(int8_t)row[32 * c + j], dec_f16(ld16(row + w.scales_off + 2 * c)));
    if (F == GPU_Q4_K || F == GPU_Q5_K) { /* Q4_K SPLIT: 128 code bytes a block, then the headers; Q5_K as stored */
        const bool     five = F == GPU_Q5_K;
        const uint8_t *b    = row + (five ? 176 : 128) * (c / 8);                  /* the block's codes (Q5_K: block) */
        const uint8_t *hd   = five ? b : row + w.scales_off + 16 * (c / 8);        /* d, dmin, then the scales */
        const int      s    = (int)(c % 8);
        int            sc, m;
        k_scale_min(hd + 4, s, &sc, &m);
        const float dl = __fmul_rn(dec_f16(ld16(hd)), (float)sc), ml = __fmul_rn(dec_f16(ld16(hd + 2)), (float)m);
        int         q  = (b[(five ? 48 : 0) + 32 * (s / 2) + j] >> (4 * (s % 2))) & 0x0f;
        if (five) q |= ((b[16 + j] >> s) & 1) << 4;
        return __fsub_rn(__fmul_rn(dl, (float)q), ml);
    }
    if (F == GPU_Q6_K) { /* SPLIT in unit order (q6k_order.h) */
        const int64_t  sb = c / 8;
        const int      hf = (int)(c % 8) / 4, s = (int)(c % 4); /* value 128 hf + 32 s + j */
        const uint8_t *b  = row + 192 * sb, *sc = row + w.scales_off + 16 * sb;
        const int      lo = (b[q6k_lo_at(hf, s, j)] >> q6k_lo_shift(s)) & 0x0f;
        const int      hi = (b[q6k_hi_at(hf, j)] >> q6k_hi_shift(s)) & 3;
        const float    dl = __fmul_rn(dec_f16(ld16(row + w.scales_off + (w.cols >> 4) + 2 * sb)),
                                      (float)(int8_t)sc[q6k_scale_at(hf, s, j)]);
        return __fmul_rn(dl, (float)((lo | hi << 4) - 32));
    }
    if (F >= GPU_AFFINE2 && F <= GPU_AFFINE8) {
        const int BITS = affine_bits<F>();
        uint32_t q;
        if (BITS == 4) { /* byte i of the chunk: values i and i + 16 (MLX_ROWS) */
            q = (row[16 * c + j % 16] >> (4 * (j / 16))) & 0x0f;
        } else { /* as stored: value j at bit BITS j of the chunk's words */
            const uint32_t *wd  = (const uint32_t *)(row + 4 * BITS * c);
            const int       bit = j * BITS, wi = bit / 32, sh = bit % 32;
            q = wd[wi] >> sh;
            if (sh + BITS > 32) q |= wd[wi + 1] << (32 - sh);
            q &= (1u << BITS) - 1;
        }
        const int64_t g  = mlx_group_of(w, c);
        const int     pair = w.sdtype == 0 ? 8 : 4; /* a group's scale and bias */
        const float   s = dec_sdtype(row + w.scales_off + pair * g, w.sdtype);
        const float   b = dec_sdtype(row + w.biases_off + pair * g, w.sdtype);
        if (MX) return mx_round(__fadd_rn(mx_round(__fmul_rn((float)q, s), w.sdtype), b), w.sdtype);
        return __fadd_rn(__fmul_rn((float)q, s), b);
    }
    if (F == GPU_MXFP4 || F == GPU_NVFP4) {
        const uint32_t q = (((const uint32_t *)(row + 16 * c))[j / 8] >> (4 * (j % 8))) & 0x0f;
        if (F == GPU_MXFP4) return dec_e2m1(q) * dec_e8m0(row[w.scales_off + c]);
        return dec_e2m1(q) * (dec_e4m3(row[w.scales_off + 2 * c + j / 16]) * w.gmul);
    }
    /* GPU_MXFP8 */
    return dec_e4m3(row[32 * c + j]) * dec_e8m0(row[w.scales_off + c]);
}

/* v[0..32) = values 32c .. 32c + 31 of the row at `row`. */
template <int F, bool MX = false>
static __device__ __forceinline__ void dec32(const gpu_wdesc &w, const uint8_t *row, int64_t c, float v[32])
{
#pragma unroll
    for (int j = 0; j < 32; j++) v[j] = dec1<F, MX>(w, row, c, j);
}

#endif
