/* The scalar reference MLX quantizer (quant/mlx_quantize.h, which says what mlx computes).
 *
 * Every float op here is one of mlx's, in the same order and precision, and none may be fused
 * with the next (no a * b - c in one expression; clang is told so below, and the project builds
 * C11 in ISO mode, where GCC does not contract either). NaN results are made explicit where
 * they reach an output byte (fix_nan), so that the bytes are x86's on every CPU. */
#include "quant/mlx_quantize.h"

#include "core/error.h"
#include "quant/half.h"

#include <inttypes.h>
#include <math.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define MAX_GROUP 128

/* ---- floats as mlx and x86 make them ----------------------------------------------------- */

static const uint32_t DEFAULT_NAN = 0xffc00000u; /* what x86 SSE returns for 0/0, inf - inf, ... */

/* The NaN x86 returns from op(a, b) when r is NaN: a's if a is NaN, else b's, else the default;
 * an input NaN comes back quiet. r itself when it is not NaN. */
static float fix_nan(float r, float a, float b)
{
    if (r == r) return r;
    if (a != a) return celer_bits_f32(celer_f32_bits(a) | 0x00400000u);
    if (b != b) return celer_bits_f32(celer_f32_bits(b) | 0x00400000u);
    return celer_bits_f32(DEFAULT_NAN);
}

static float sub_x86(float a, float b) { return fix_nan(a - b, a, b); }
static float div_x86(float a, float b) { return fix_nan(a / b, a, b); }
static float mul_x86(float a, float b) { return fix_nan(a * b, a, b); }

/* (int32_t)v as x86's cvttss2si does it: NaN, inf and out-of-range values give INT32_MIN. */
static int32_t to_i32_x86(float v)
{
    if (!(v >= -2147483648.0f && v < 2147483648.0f)) return INT32_MIN;
    return (int32_t)v;
}

/* mlx's float -> uint8 cast: through int32, keeping the low byte (-7 gives 249). */
static uint8_t to_u8_mlx(float v) { return (uint8_t)(uint32_t)to_i32_x86(v); }

/* The bits of v in dtype, as mlx's conversions write them (round to nearest even; a BF16 NaN is
 * 0x7fc0, an F16 NaN sign | 0x7d00). */
static uint16_t to_bf16_mlx(float v) { return v != v ? 0x7fc0 : celer_f32_to_bf16(v); }
static uint16_t to_f16_mlx(float v)
{
    if (v != v) return (uint16_t)((celer_f32_bits(v) >> 16 & 0x8000) | 0x7d00);
    return celer_f32_to_half(v);
}

/* R: v rounded to dtype, as the float32 mlx reads back (an F16 NaN reads as sign | 0x7fe00000). */
static float round_to(celer_st_dtype t, float v)
{
    switch (t) {
    case CELER_ST_BF16: return celer_bf16_to_f32(to_bf16_mlx(v));
    case CELER_ST_F16:
        if (v != v) return celer_bits_f32((celer_f32_bits(v) & 0x80000000u) | 0x7fe00000u);
        return celer_half_to_f32(celer_f32_to_half(v));
    default: return v;
    }
}

static uint32_t load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Element i of a little-endian array of dtype t, as float32 (exact). */
static float load_elem(celer_st_dtype t, const uint8_t *p, int64_t i)
{
    if (t == CELER_ST_F32) return celer_bits_f32(load_u32(p + 4 * i));
    uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
    return t == CELER_ST_BF16 ? celer_bf16_to_f32(h) : celer_half_to_f32(h);
}

/* Stores v (already a value of dtype t, or NaN) as element i of a little-endian array. */
static void store_elem(celer_st_dtype t, uint8_t *p, int64_t i, float v)
{
    if (t == CELER_ST_F32) {
        uint32_t u = celer_f32_bits(v);
        for (int k = 0; k < 4; k++) p[4 * i + k] = (uint8_t)(u >> 8 * k);
        return;
    }
    uint16_t h = t == CELER_ST_BF16 ? to_bf16_mlx(v) : to_f16_mlx(v);
    p[2 * i]     = (uint8_t)h;
    p[2 * i + 1] = (uint8_t)(h >> 8);
}

/* ---- the fp element formats, as mlx's ConvertFP8 does them ------------------------------ */

/* float32 -> E4M3 byte as mlx's to_fp8 writes it: round to nearest even, subnormals in steps of
 * 2^-9; magnitudes above 464 (which would round to 480, E4M3's NaN pattern 0x7f), inf and NaN
 * saturate to 448 (0x7e). The sign is v's, NaN included. Equal to mlx 0.32.4's to_fp8 on every
 * one of the 2^32 float32 bit patterns. */
static uint8_t e4m3_from_f32(float v)
{
    uint32_t u = celer_f32_bits(v), sign = u & 0x80000000u, r;
    u ^= sign;
    if (u > 0x43e80000u) { /* 464.0f; also inf and NaN */
        r = 0x7e;
    } else if (u < 0x3c800000u) { /* below 2^-6: adding 2^14 rounds to a multiple of 2^-9 */
        float t = celer_bits_f32(u) + 16384.0f;
        r       = (celer_f32_bits(t) - 0x46800000u) & 0xff;
    } else { /* rebias the exponent from 127 to 7 and round the mantissa to 3 bits, ties even */
        r = ((u - (120u << 23) + 0x7ffffu + (u >> 20 & 1)) >> 20) & 0xff;
    }
    return (uint8_t)(r | sign >> 24);
}

/* The E2M1 code mlx's argmin picks for v: the first of l_0..l_15 with the smallest |d(v - l)|,
 * where d rounds the difference to t (mxfp4) or not at all (nvfp4, F32 passed as t). Rounding
 * is monotonic, so the smallest rounded distance is the exact nearest magnitude's, and earlier
 * entries can only tie with it; ties go to the smaller magnitude, and +0 comes before -0. NaN
 * and +-inf tie everywhere: code 0. */
static uint32_t e2m1_code(float v, celer_st_dtype t)
{
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    static const float mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    const float        a      = fabsf(v); /* |v - l| = ||v| - |l|| for l of v's sign; others are farther */
    int                k      = 0;
    while (k < 7 && a > mid[k]) k++; /* the exact nearest, the lower one on a tie (0 for NaN) */
    const float best = fabsf(round_to(t, a - mag[k]));
    while (k > 0 && fabsf(round_to(t, a - mag[k - 1])) == best) k--; /* inf: every distance is inf */
    return k != 0 && signbit(v) ? 8u + (uint32_t)k : (uint32_t)k;
}

/* ---- one group ---------------------------------------------------------------------------- */

/* Appends n-bit codes to a row's little-endian bit stream. */
typedef struct {
    uint8_t *p;    /* the next byte to write */
    uint64_t acc;  /* bits not yet written, low first */
    uint32_t nacc; /* how many */
} bit_writer;

static void put_bits(bit_writer *w, uint32_t code, uint32_t bits)
{
    w->acc |= (uint64_t)code << w->nacc;
    w->nacc += bits;
    while (w->nacc >= 8) {
        *w->p++ = (uint8_t)w->acc;
        w->acc >>= 8;
        w->nacc -= 8;
    }
}

/* Affine, all in float32; writes the codes and returns the scale and bias before rounding. */
static void affine_group(const float *w, int g, uint32_t bits, bit_writer *out, float *scale_out, float *bias_out)
{
    const float n = (float)((1u << bits) - 1), eps = 1e-7f;
    float       hi = -INFINITY, lo = INFINITY;
    for (int j = 0; j < g; j++) {
        hi = hi < w[j] ? w[j] : hi; /* std::max / std::min: a NaN never wins */
        lo = w[j] < lo ? w[j] : lo;
    }
    const bool neg_edge = fabsf(lo) > fabsf(hi);
    float      s        = div_x86(sub_x86(hi, lo), n);
    s                   = s < eps ? eps : s;
    s                   = neg_edge ? s : -s;
    const float e       = neg_edge ? lo : hi;
    const float qe      = div_x86(e, s);
    const float q0      = qe != qe ? qe : rintf(qe);
    float       b       = 0.0f;
    if (q0 != 0.0f) { /* true for NaN */
        s = div_x86(e, q0);
        b = e;
    }
    for (int j = 0; j < g; j++) {
        float c = rintf((w[j] - b) / s);
        c       = c < 0.0f ? 0.0f : c;
        c       = n < c ? n : c;
        put_bits(out, c == c ? (uint32_t)c : 0u, bits); /* NaN: 0, as x86's conversion leaves it */
    }
    *scale_out = s;
    *bias_out  = b;
}

/* The E8M0 exponent mlx picks for a group whose largest magnitude over M is x >= 0: 0 for 0,
 * else the smallest e with 2^e >= x, so that no element saturates. mlx computes it as
 * rint(log2 x) in the dtype, plus 1 where 2^that < x; a log2 rounded to the dtype is within half
 * a unit of the true one, so that is exactly ceil(log2 x), found here from x's bits. NaN makes
 * mlx's int32 conversion give INT32_MIN, inf INT32_MIN + 1 (both -2^31 as float32). */
static int32_t exponent_up(float x)
{
    if (x == 0.0f) return 0;
    if (x != x) return INT32_MIN;
    if (x == INFINITY) return INT32_MIN + 1;
    int         k;
    const float f = frexpf(x, &k); /* x = f * 2^k, f in [0.5, 1) */
    return f == 0.5f ? k - 1 : k;
}

/* mxfp4 and mxfp8, in dtype t; returns the E8M0 byte. */
static uint8_t mx_group(const float *w, celer_st_dtype t, bool fp8, bit_writer *out)
{
    float m = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float a = fabsf(w[j]);
        if (a != a) { m = a; break; } /* mlx's max: a NaN wins */
        m = a > m ? a : m;
    }
    const float x = round_to(t, m / (fp8 ? 448.0f : 6.0f));
    const float e = round_to(t, (float)exponent_up(x)); /* a whole number of dtype t (or -inf in F16) */
    const float p = round_to(t, e < -149.0f ? 0.0f : e > 127.0f ? INFINITY : ldexpf(1.0f, (int)e));
    for (int j = 0; j < 32; j++) {
        const float v = round_to(t, div_x86(w[j], p));
        if (fp8) put_bits(out, e4m3_from_f32(v), 8);
        else put_bits(out, e2m1_code(v, t), 4);
    }
    return to_u8_mlx(round_to(t, e + 127.0f));
}

/* nvfp4; k is 2688 / G (or 1); returns the E4M3 byte. */
static uint8_t nv_group(const float *w, celer_st_dtype t, float k, bit_writer *out)
{
    float m = 0.0f;
    for (int j = 0; j < 16; j++) {
        const float a = fabsf(w[j]);
        if (a != a) { m = a; break; }
        m = a > m ? a : m;
    }
    const float   x    = round_to(t, m / 6.0f);
    const uint8_t byte = e4m3_from_f32(mul_x86(x, k));
    const float   d    = round_to(t, celer_mlx_e4m3_to_f32(byte)); /* mlx's from_fp8: exact (never NaN here) */
    for (int j = 0; j < 16; j++) {
        const float v = round_to(t, div_x86(w[j], d));
        put_bits(out, e2m1_code(mul_x86(v, k), CELER_ST_F32), 4);
    }
    return byte;
}

/* ---- rows --------------------------------------------------------------------------------- */

static const char *qname(const celer_mlx_quant *q) { return q->name ? q->name : "weight"; }

static celer_status check_args(const celer_mlx_quant *q, const void *src, celer_st_dtype src_dtype, int64_t row0,
                               int64_t n_rows, const void *weight_out, const void *scales_out,
                               const void *biases_out, celer_error *err)
{
    celer_error inner = {0};
    if (celer_mlx_quant_check(q, &inner) != CELER_OK) return celer_fail(err, CELER_ERR_INVALID, "%s", inner.msg);
    const char  *name   = qname(q), *mode = celer_hf_quant_mode_name(q->mode);
    const bool   affine = q->mode == CELER_HF_QUANT_AFFINE;
    if (src_dtype != CELER_ST_F32 && src_dtype != CELER_ST_BF16 && src_dtype != CELER_ST_F16)
        return celer_fail(err, CELER_ERR_INVALID, "mlx quantize: %s: src_dtype %s; mlx quantizes F32, BF16 or F16",
                          name, celer_st_dtype_name(src_dtype));
    if (affine && src_dtype != q->dtype)
        return celer_fail(err, CELER_ERR_INVALID, "mlx quantize: %s: src_dtype %s but dtype %s; affine scales and "
                          "biases come out in the source's dtype, so round the source to %s first", name,
                          celer_st_dtype_name(src_dtype), celer_st_dtype_name(q->dtype),
                          celer_st_dtype_name(q->dtype));
    if (q->has_global_scale && !(isfinite(q->global_scale) && q->global_scale > 0.0f))
        return celer_fail(err, CELER_ERR_INVALID, "mlx quantize: %s: global_scale %g; it must be a positive finite "
                          "float32 (mlx-lm uses the tensor's largest magnitude)", name, (double)q->global_scale);
    if (row0 < 0 || n_rows < 0 || row0 > q->rows || n_rows > q->rows - row0)
        return celer_fail(err, CELER_ERR_INVALID, "mlx quantize: %s: rows [%" PRId64 ", %" PRId64 ") (row0 %" PRId64
                          ", n_rows %" PRId64 ") are not inside the weight's %" PRId64 " rows", name, row0,
                          row0 + n_rows, row0, n_rows, q->rows);
    if (!src || !weight_out || !scales_out)
        return celer_fail(err, CELER_ERR_INVALID, "mlx quantize: %s: %s is NULL", name,
                          !src ? "src" : !weight_out ? "weight_out" : "scales_out");
    if (affine && !biases_out)
        return celer_fail(err, CELER_ERR_INVALID, "mlx quantize: %s: biases_out is NULL; affine writes biases", name);
    if (!affine && biases_out)
        return celer_fail(err, CELER_ERR_INVALID, "mlx quantize: %s: biases_out given, but %s has no biases; pass "
                          "NULL", name, mode);
    if (q->mode == CELER_HF_QUANT_NVFP4 && (q->rows * q->cols) % 32)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "mlx quantize: %s: nvfp4 of shape (%" PRId64 ", %" PRId64 ") "
                          "has %" PRId64 " values, not a multiple of 32; mlx's CPU quantizer and dequantizer pack "
                          "32 at a time and refuse it, so mlx-lm could not load it", name, q->rows, q->cols,
                          q->rows * q->cols);
    return CELER_OK;
}

celer_status celer_mlx_quantize_rows(const celer_mlx_quant *q, const void *src, celer_st_dtype src_dtype, int64_t row0,
                                     int64_t n_rows, void *weight_out, void *scales_out, void *biases_out,
                                     celer_error *err)
{
    celer_status st = check_args(q, src, src_dtype, row0, n_rows, weight_out, scales_out, biases_out, err);
    if (st != CELER_OK) return st;

    const int64_t  cols = q->cols, gs = q->group_size, groups = cols / gs;
    const uint64_t src_row   = (uint64_t)cols * (celer_st_dtype_bits(src_dtype) / 8); /* bytes */
    const uint64_t w_row     = (uint64_t)cols * q->bits / 8;
    const uint64_t sc_size   = q->mode == CELER_HF_QUANT_AFFINE ? celer_st_dtype_bits(q->dtype) / 8 : 1;
    const float    k         = q->has_global_scale ? div_x86(2688.0f, q->global_scale) : 1.0f;
    float          w[MAX_GROUP]; /* (group_size) one group as float32 */

    for (int64_t r = row0; r < row0 + n_rows; r++) {
        const uint8_t *in = (const uint8_t *)src + (uint64_t)r * src_row;                  /* (cols) */
        uint8_t       *sc = (uint8_t *)scales_out + (uint64_t)r * (uint64_t)groups * sc_size; /* (groups) */
        bit_writer     out = {(uint8_t *)weight_out + (uint64_t)r * w_row, 0, 0};
        for (int64_t g = 0; g < groups; g++) {
            for (int64_t j = 0; j < gs; j++) w[j] = load_elem(src_dtype, in, g * gs + j);
            switch (q->mode) {
            case CELER_HF_QUANT_AFFINE: {
                float s, b;
                affine_group(w, (int)gs, q->bits, &out, &s, &b);
                uint8_t *bi = (uint8_t *)biases_out + (uint64_t)r * (uint64_t)groups * sc_size;
                store_elem(q->dtype, sc, g, s);
                store_elem(q->dtype, bi, g, b);
                break;
            }
            case CELER_HF_QUANT_MXFP4:
            case CELER_HF_QUANT_MXFP8:
                sc[g] = mx_group(w, src_dtype, q->mode == CELER_HF_QUANT_MXFP8, &out);
                break;
            case CELER_HF_QUANT_NVFP4: sc[g] = nv_group(w, src_dtype, k, &out); break;
            default: CELER_ASSERT(!"mode checked above");
            }
        }
        CELER_ASSERT(out.nacc == 0 && out.p == (uint8_t *)weight_out + (uint64_t)(r + 1) * w_row);
    }
    return CELER_OK;
}
