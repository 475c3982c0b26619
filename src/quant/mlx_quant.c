/* MLX quantized weights: shape rules and the scalar reference dequantizer (quant/mlx_quant.h).
 *
 * The arithmetic follows mlx 0.32's CPU dequantize op by op (mlx/ops.cpp, affine_dequantize and
 * fp_dequantize, which on the CPU are built from ordinary ops): each op's result is rounded to
 * its dtype before the next op sees it. This file is built with -ffp-contract=off (CMakeLists.txt)
 * so that no compiler fuses a product into the following add, which mlx never does (they are
 * separate ops). */
#include "quant/mlx_quant.h"

#include "core/error.h"
#include "quant/half.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Sizes are kept below 2^62 bytes so that no product here overflows. */
#define MAX_ELEMS ((int64_t)1 << 56)

/* ---- element decoders ------------------------------------------------------------------ */

float celer_mlx_e2m1_to_f32(uint32_t c)
{
    static const float lut[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    return lut[c & 15];
}

float celer_mlx_e4m3_to_f32(uint8_t c)
{
    uint32_t sign = (uint32_t)(c & 0x80) << 24, exp = (c >> 3) & 15, man = c & 7;
    if (exp == 15 && man == 7) return celer_bits_f32(sign | 0x7fc00000u); /* NaN */
    /* subnormal: man * 2^-9; normal: (8 + man) * 2^(exp - 10); exact in float32 */
    float v = exp == 0 ? (float)man * 0x1p-9f : (float)(8 + man) * celer_bits_f32((exp + 117) << 23);
    return celer_bits_f32(sign | celer_f32_bits(v));
}

float celer_mlx_e8m0_to_f32(uint8_t s)
{
    /* 2^(s - 127): the float32 exponent field s, except 0 (2^-127 is subnormal) and 255, which
     * is exponent 255 with a zero mantissa: +inf, as mlx's pow(2, 128) gives (not OCP's NaN). */
    return celer_bits_f32(s ? (uint32_t)s << 23 : 0x00400000u);
}

/* v rounded to dtype, as a float32 (exact for the result). */
static float round_to(celer_st_dtype dtype, float v)
{
    switch (dtype) {
    case CELER_ST_BF16: return celer_bf16_to_f32(celer_f32_to_bf16(v));
    case CELER_ST_F16: return celer_half_to_f32(celer_f32_to_half(v));
    default: return v;
    }
}

/* The stored scale or bias i of a row in dtype, as float32 (exact). */
static float load_float(celer_st_dtype dtype, const uint8_t *p, int64_t i)
{
    if (dtype == CELER_ST_F32) {
        uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                     (uint32_t)p[4 * i + 3] << 24;
        return celer_bits_f32(u);
    }
    uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
    return dtype == CELER_ST_BF16 ? celer_bf16_to_f32(h) : celer_half_to_f32(h);
}

/* Code j (bits wide) of a row's little-endian bit stream at p. */
static uint32_t load_code(const uint8_t *p, int64_t j, uint32_t bits)
{
    /* bits <= 8: the code lies in the byte holding its first bit and, if it crosses, the next */
    const uint64_t bit = (uint64_t)j * bits;
    const uint8_t *b   = p + bit / 8;
    const uint32_t off = (uint32_t)(bit % 8);
    uint32_t       v   = b[0];
    if (off + bits > 8) v |= (uint32_t)b[1] << 8;
    return (v >> off) & ((1u << bits) - 1);
}

/* ---- descriptions and shapes ----------------------------------------------------------- */

const char *celer_mlx_quant_describe(const celer_mlx_quant *q, char *buf, size_t n)
{
    snprintf(buf, n, "%s %" PRIu32 "-bit group %" PRIu32, celer_hf_quant_mode_name(q->mode), q->bits,
             q->group_size);
    return buf;
}

static const char *qname(const celer_mlx_quant *q) { return q->name ? q->name : "weight"; }

static bool is_float_dtype(celer_st_dtype t) { return t == CELER_ST_BF16 || t == CELER_ST_F16 || t == CELER_ST_F32; }

celer_status celer_mlx_quant_check(const celer_mlx_quant *q, celer_error *err)
{
    const char *name = qname(q);
    switch (q->mode) {
    case CELER_HF_QUANT_AFFINE:
        if (q->bits < 2 || q->bits > 8 || q->bits == 7)
            return celer_fail(err, CELER_ERR_FORMAT, "mlx quant: %s: affine with %" PRIu32 " bits; mlx quantizes "
                              "to 2, 3, 4, 5, 6 or 8 bits", name, q->bits);
        if (q->group_size != 32 && q->group_size != 64 && q->group_size != 128)
            return celer_fail(err, CELER_ERR_FORMAT, "mlx quant: %s: affine with group size %" PRIu32 "; mlx "
                              "uses 32, 64 or 128", name, q->group_size);
        break;
    case CELER_HF_QUANT_MXFP4:
    case CELER_HF_QUANT_MXFP8:
    case CELER_HF_QUANT_NVFP4: {
        uint32_t bits = q->mode == CELER_HF_QUANT_MXFP8 ? 8 : 4, gs = q->mode == CELER_HF_QUANT_NVFP4 ? 16 : 32;
        if (q->bits != bits || q->group_size != gs)
            return celer_fail(err, CELER_ERR_FORMAT, "mlx quant: %s: %s with %" PRIu32 " bits and group size %"
                              PRIu32 "; %s is always %" PRIu32 " bits in groups of %" PRIu32, name,
                              celer_hf_quant_mode_name(q->mode), q->bits, q->group_size,
                              celer_hf_quant_mode_name(q->mode), bits, gs);
        break;
    }
    default:
        return celer_fail(err, CELER_ERR_FORMAT, "mlx quant: %s: unknown quantization mode %d; celer knows affine, "
                          "mxfp4, mxfp8 and nvfp4", name, (int)q->mode);
    }
    if (!is_float_dtype(q->dtype))
        return celer_fail(err, CELER_ERR_FORMAT, "mlx quant: %s: dtype %s; %s BF16, F16 or F32", name,
                          celer_st_dtype_name(q->dtype),
                          q->mode == CELER_HF_QUANT_AFFINE ? "affine scales and biases are" : "mlx dequantizes to");
    if (q->has_global_scale && q->mode != CELER_HF_QUANT_NVFP4)
        return celer_fail(err, CELER_ERR_FORMAT, "mlx quant: %s: a global scale with %s; only nvfp4 has one", name,
                          celer_hf_quant_mode_name(q->mode));
    if (q->rows < 1 || q->rows > MAX_ELEMS || q->cols < 1 || q->cols > MAX_ELEMS ||
        q->rows > MAX_ELEMS / q->cols)
        return celer_fail(err, CELER_ERR_FORMAT, "mlx quant: %s: shape (%" PRId64 ", %" PRId64 ") is empty or too "
                          "large", name, q->rows, q->cols);
    if (q->cols % q->group_size)
        return celer_fail(err, CELER_ERR_FORMAT, "mlx quant: %s: %" PRId64 " columns is not a whole number of "
                          "groups of %" PRIu32 "; mlx quantizes only rows of whole groups", name, q->cols,
                          q->group_size);
    return CELER_OK;
}

celer_status celer_mlx_quant_get_shapes(const celer_mlx_quant *q, celer_mlx_quant_shapes *s, celer_error *err)
{
    celer_status st = celer_mlx_quant_check(q, err);
    if (st != CELER_OK) return st;
    memset(s, 0, sizeof *s);
    const int64_t words = q->cols * q->bits / 32, groups = q->cols / q->group_size;
    const bool    affine = q->mode == CELER_HF_QUANT_AFFINE;
    s->weight[0] = s->scales[0] = q->rows;
    s->weight[1] = words;
    s->scales[1] = groups;
    s->scales_dtype = affine ? q->dtype : CELER_ST_U8;
    s->has_biases   = affine;
    if (affine) {
        s->biases[0] = q->rows;
        s->biases[1] = groups;
    }
    const uint64_t sbytes = celer_st_dtype_bits(s->scales_dtype) / 8;
    s->weight_bytes = (uint64_t)q->rows * (uint64_t)words * 4;
    s->scales_bytes = (uint64_t)q->rows * (uint64_t)groups * sbytes;
    s->biases_bytes = affine ? s->scales_bytes : 0;
    return CELER_OK;
}

static const char *part_name(celer_mlx_quant_part p)
{
    return p == CELER_MLX_QUANT_WEIGHT ? "weight" : p == CELER_MLX_QUANT_SCALES ? "scales" : "biases";
}

celer_status celer_mlx_quant_check_tensor(const celer_mlx_quant *q, celer_mlx_quant_part part, const char *tensor,
                                          celer_st_dtype dtype, uint32_t n_dims, const uint64_t *shape,
                                          celer_error *err)
{
    celer_mlx_quant_shapes s;
    celer_status           st = celer_mlx_quant_get_shapes(q, &s, err);
    if (st != CELER_OK) return st;
    char           desc[64];
    const char    *what = celer_mlx_quant_describe(q, desc, sizeof desc);
    const int64_t *want = part == CELER_MLX_QUANT_WEIGHT ? s.weight : part == CELER_MLX_QUANT_SCALES ? s.scales : s.biases;
    celer_st_dtype want_dtype = part == CELER_MLX_QUANT_WEIGHT ? CELER_ST_U32 : s.scales_dtype;
    if (part == CELER_MLX_QUANT_BIASES && !s.has_biases)
        return celer_fail(err, CELER_ERR_FORMAT, "mlx quant: %s: %s has no biases; the checkpoint does not match "
                          "its config's quantization", tensor, celer_hf_quant_mode_name(q->mode));
    if (dtype != want_dtype)
        return celer_fail(err, CELER_ERR_FORMAT, "mlx quant: %s: dtype %s; %s %s of %s needs %s", tensor,
                          celer_st_dtype_name(dtype), what, part_name(part), qname(q), celer_st_dtype_name(want_dtype));
    uint64_t lead = 1;
    bool     ok   = n_dims >= 2;
    for (uint32_t i = 0; ok && i + 1 < n_dims; i++) {
        if (shape[i] && lead > UINT64_MAX / shape[i]) ok = false;
        else lead *= shape[i];
    }
    if (!ok || lead != (uint64_t)want[0] || shape[n_dims - 1] != (uint64_t)want[1]) {
        char got[160];
        int  p = snprintf(got, sizeof got, "(");
        for (uint32_t i = 0; i < n_dims && p < (int)sizeof got - 24; i++)
            p += snprintf(got + p, sizeof got - (size_t)p, "%s%" PRIu64, i ? ", " : "", shape[i]);
        snprintf(got + p, sizeof got - (size_t)p, ")");
        return celer_fail(err, CELER_ERR_FORMAT, "mlx quant: %s: shape %s; %s of a (%" PRId64 ", %" PRId64 ") "
                          "weight in %s needs (%" PRId64 ", %" PRId64 ") (leading dimensions may split the rows); "
                          "the checkpoint does not match its config's quantization", tensor, got, part_name(part),
                          q->rows, q->cols, what, want[0], want[1]);
    }
    return CELER_OK;
}

/* ---- dequantization ------------------------------------------------------------------- */

/* Checks the byte size of one tensor of d against s. */
static celer_status check_bytes(const celer_mlx_quant *q, const char *part, const void *p, size_t bytes,
                                uint64_t want, int64_t per_row, const char *unit, celer_st_dtype dtype,
                                celer_error *err)
{
    char desc[64];
    if (!p || bytes != want)
        return celer_fail(err, CELER_ERR_FORMAT, "mlx quant: %s.%s: %s%zu bytes; %s of a (%" PRId64 ", %" PRId64
                          ") weight needs %" PRId64 " rows of %" PRId64 " %s (%s) = %" PRIu64 " bytes", qname(q),
                          part, p ? "" : "missing, ", p ? bytes : (size_t)0,
                          celer_mlx_quant_describe(q, desc, sizeof desc), q->rows, q->cols, q->rows, per_row, unit,
                          celer_st_dtype_name(dtype), want);
    return CELER_OK;
}

celer_status celer_mlx_dequant_row(const celer_mlx_quant *q, const celer_mlx_quant_data *d, int64_t row, float *y,
                                   celer_error *err)
{
    celer_mlx_quant_shapes s;
    celer_status           st = celer_mlx_quant_get_shapes(q, &s, err);
    if (st != CELER_OK) return st;
    if ((st = check_bytes(q, "weight", d->weight, d->weight_bytes, s.weight_bytes, s.weight[1], "packed words",
                          CELER_ST_U32, err)) != CELER_OK ||
        (st = check_bytes(q, "scales", d->scales, d->scales_bytes, s.scales_bytes, s.scales[1], "scales",
                          s.scales_dtype, err)) != CELER_OK)
        return st;
    if (s.has_biases) {
        st = check_bytes(q, "biases", d->biases, d->biases_bytes, s.biases_bytes, s.biases[1], "biases", q->dtype, err);
        if (st != CELER_OK) return st;
    } else if (d->biases || d->biases_bytes) {
        return celer_fail(err, CELER_ERR_FORMAT, "mlx quant: %s.biases: given, but %s has no biases", qname(q),
                          celer_hf_quant_mode_name(q->mode));
    }
    if (row < 0 || row >= q->rows)
        return celer_fail(err, CELER_ERR_INVALID, "mlx quant: %s: row %" PRId64 " of a weight of %" PRId64 " rows",
                          qname(q), row, q->rows);

    const int64_t  gs = q->group_size, groups = s.scales[1];
    const uint8_t *w    = (const uint8_t *)d->weight + (uint64_t)row * (uint64_t)s.weight[1] * 4; /* (words) */
    const uint8_t *sc   = (const uint8_t *)d->scales + (uint64_t)row * (uint64_t)groups *
                                                       (celer_st_dtype_bits(s.scales_dtype) / 8); /* (groups) */
    const celer_st_dtype t = q->dtype;

    switch (q->mode) {
    case CELER_HF_QUANT_AFFINE: {
        const uint8_t *bi = (const uint8_t *)d->biases + (uint64_t)row * (uint64_t)groups * (celer_st_dtype_bits(t) / 8);
        for (int64_t g = 0; g < groups; g++) {
            const float scale = load_float(t, sc, g), bias = load_float(t, bi, g);
            for (int64_t j = g * gs; j < (g + 1) * gs; j++) {
                const float p = round_to(t, (float)load_code(w, j, q->bits) * scale); /* multiply, in dtype */
                y[j]          = round_to(t, p + bias);                                /* then add, in dtype */
            }
        }
        break;
    }
    case CELER_HF_QUANT_MXFP4:
    case CELER_HF_QUANT_MXFP8:
        for (int64_t g = 0; g < groups; g++) {
            const float scale = round_to(t, celer_mlx_e8m0_to_f32(sc[g])); /* mlx: power(2, s - 127) in dtype */
            for (int64_t j = g * gs; j < (g + 1) * gs; j++) {
                const float v = q->mode == CELER_HF_QUANT_MXFP4 ? celer_mlx_e2m1_to_f32(load_code(w, j, 4))
                                                                : round_to(t, celer_mlx_e4m3_to_f32(w[j]));
                y[j] = round_to(t, v * scale);
            }
        }
        break;
    case CELER_HF_QUANT_NVFP4: {
        /* without a global scale: lut * from_fp8(s) in dtype; with one, every op in f32 */
        const float inv = q->has_global_scale ? q->global_scale / 2688.0f : 1.0f;
        for (int64_t g = 0; g < groups; g++) {
            const float e4m3  = round_to(t, celer_mlx_e4m3_to_f32(sc[g]));
            const float scale = q->has_global_scale ? e4m3 * inv : e4m3;
            for (int64_t j = g * gs; j < (g + 1) * gs; j++) {
                const float v = celer_mlx_e2m1_to_f32(load_code(w, j, 4)) * scale;
                y[j]          = q->has_global_scale ? v : round_to(t, v);
            }
        }
        break;
    }
    default: CELER_ASSERT(!"mode checked above");
    }
    return CELER_OK;
}

celer_mlx_quant_data celer_mlx_quant_data_rows(const celer_mlx_quant_data *d, int64_t n_rows, int64_t row0,
                                               int64_t rows)
{
    size_t wb = d->weight_bytes / (size_t)n_rows, sb = d->scales_bytes / (size_t)n_rows;
    size_t bb = d->biases_bytes / (size_t)n_rows;
    return (celer_mlx_quant_data){(const char *)d->weight + (size_t)row0 * wb, (size_t)rows * wb,
                                  (const char *)d->scales + (size_t)row0 * sb, (size_t)rows * sb,
                                  d->biases ? (const char *)d->biases + (size_t)row0 * bb : NULL,
                                  d->biases ? (size_t)rows * bb : 0};
}
