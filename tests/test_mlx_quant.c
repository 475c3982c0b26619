/* The MLX quantization reference (quant/mlx_quant.h): its checks of a description, the shapes it
 * gives a checkpoint's tensors, the errors for data of the wrong size, and values worked out by
 * hand, including the cases where mlx's op-by-op rounding in bf16 or f16 differs from rounding
 * the exact value once. Bit parity with mlx.core.dequantize on random and exhaustive data is
 * tests/reference/test_mlx_dequant.py. */
#include "quant/half.h"
#include "quant/mlx_quant.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include "check.h"

/* Same float, by bits (so -0 != +0). */
static int same(float a, float b) { return celer_f32_bits(a) == celer_f32_bits(b); }

static int has(const celer_error *err, const char *text)
{
    if (strstr(err->msg, text)) return 1;
    fprintf(stderr, "message \"%s\" lacks \"%s\"\n", err->msg, text);
    return 0;
}

/* Sets code j (bits wide) in a row of little-endian uint32 words: the encoder the layout in
 * mlx_quant.h describes (bit k of the row is bit k % 32 of word k / 32). */
static void put_code(uint32_t *words, int j, int bits, uint32_t q)
{
    for (int i = 0; i < bits; i++) {
        int k = j * bits + i;
        if (q >> i & 1) words[k / 32] |= 1u << (k % 32);
    }
}

static celer_mlx_quant affine(uint32_t bits, uint32_t gs, celer_st_dtype dt, int64_t rows, int64_t cols)
{
    return (celer_mlx_quant){.name = "layers.0.mlp.up_proj", .mode = CELER_HF_QUANT_AFFINE, .bits = bits,
                             .group_size = gs, .dtype = dt, .rows = rows, .cols = cols};
}

static celer_mlx_quant fp(celer_hf_quant_mode mode, celer_st_dtype dt, int64_t rows, int64_t cols)
{
    return (celer_mlx_quant){.name = "lm_head", .mode = mode, .bits = mode == CELER_HF_QUANT_MXFP8 ? 8 : 4,
                             .group_size = mode == CELER_HF_QUANT_NVFP4 ? 16 : 32, .dtype = dt, .rows = rows,
                             .cols = cols};
}

/* ---- descriptions ------------------------------------------------------------------------ */

static int test_check(void)
{
    celer_error err = {0};
    for (uint32_t b = 2; b <= 8; b++)
        for (uint32_t g = 32; g <= 128; g *= 2) {
            celer_mlx_quant q = affine(b, g, CELER_ST_BF16, 3, 384);
            CHECK(celer_mlx_quant_check(&q, &err) == (b == 7 ? CELER_ERR_FORMAT : CELER_OK));
        }
    celer_mlx_quant q = affine(7, 64, CELER_ST_BF16, 3, 128);
    CHECK(celer_mlx_quant_check(&q, &err) == CELER_ERR_FORMAT && has(&err, "layers.0.mlp.up_proj") &&
          has(&err, "7 bits") && has(&err, "2, 3, 4, 5, 6 or 8"));
    q = affine(1, 64, CELER_ST_BF16, 3, 128);
    CHECK(celer_mlx_quant_check(&q, &err) == CELER_ERR_FORMAT);
    q = affine(16, 64, CELER_ST_BF16, 3, 128);
    CHECK(celer_mlx_quant_check(&q, &err) == CELER_ERR_FORMAT);
    q = affine(4, 16, CELER_ST_BF16, 3, 128);
    CHECK(celer_mlx_quant_check(&q, &err) == CELER_ERR_FORMAT && has(&err, "group size 16") && has(&err, "32, 64 or 128"));
    q = affine(4, 64, CELER_ST_U8, 3, 128);
    CHECK(celer_mlx_quant_check(&q, &err) == CELER_ERR_FORMAT && has(&err, "dtype U8") && has(&err, "BF16, F16 or F32"));
    q = affine(4, 64, CELER_ST_BF16, 3, 96);
    CHECK(celer_mlx_quant_check(&q, &err) == CELER_ERR_FORMAT && has(&err, "96 columns") && has(&err, "groups of 64"));
    q = affine(4, 64, CELER_ST_BF16, 0, 128);
    CHECK(celer_mlx_quant_check(&q, &err) == CELER_ERR_FORMAT && has(&err, "(0, 128)"));
    q = affine(4, 64, CELER_ST_BF16, (int64_t)1 << 40, (int64_t)1 << 20);
    CHECK(celer_mlx_quant_check(&q, &err) == CELER_ERR_FORMAT && has(&err, "too large"));
    q.name = NULL; /* messages still say something */
    CHECK(celer_mlx_quant_check(&q, &err) == CELER_ERR_FORMAT && has(&err, "weight"));

    static const celer_hf_quant_mode modes[] = {CELER_HF_QUANT_MXFP4, CELER_HF_QUANT_MXFP8, CELER_HF_QUANT_NVFP4};
    for (int m = 0; m < 3; m++) {
        q = fp(modes[m], CELER_ST_BF16, 2, 64);
        CHECK(celer_mlx_quant_check(&q, &err) == CELER_OK);
        q.bits = modes[m] == CELER_HF_QUANT_MXFP8 ? 4 : 8;
        CHECK(celer_mlx_quant_check(&q, &err) == CELER_ERR_FORMAT && has(&err, "lm_head") && has(&err, "always"));
        q = fp(modes[m], CELER_ST_BF16, 2, 64);
        q.group_size = 64;
        CHECK(celer_mlx_quant_check(&q, &err) == CELER_ERR_FORMAT && has(&err, "in groups of"));
        q = fp(modes[m], CELER_ST_BF16, 2, 64);
        q.has_global_scale = true;
        CHECK(celer_mlx_quant_check(&q, &err) == (modes[m] == CELER_HF_QUANT_NVFP4 ? CELER_OK : CELER_ERR_FORMAT));
    }
    q      = fp(CELER_HF_QUANT_MXFP4, CELER_ST_F32, 2, 64);
    q.mode = CELER_HF_QUANT_MODE_COUNT;
    CHECK(celer_mlx_quant_check(&q, &err) == CELER_ERR_FORMAT && has(&err, "unknown quantization mode"));
    q = fp(CELER_HF_QUANT_MXFP4, CELER_ST_F32, 2, 48);
    CHECK(celer_mlx_quant_check(&q, &err) == CELER_ERR_FORMAT && has(&err, "48 columns"));

    char buf[64];
    q = affine(3, 128, CELER_ST_F16, 1, 128);
    CHECK(strcmp(celer_mlx_quant_describe(&q, buf, sizeof buf), "affine 3-bit group 128") == 0);
    return 0;
}

static int test_shapes(void)
{
    celer_error            err = {0};
    celer_mlx_quant_shapes s;
    celer_mlx_quant        q = affine(3, 64, CELER_ST_BF16, 5, 128);
    CHECK(celer_mlx_quant_get_shapes(&q, &s, &err) == CELER_OK);
    CHECK(s.weight[0] == 5 && s.weight[1] == 12 && s.scales[0] == 5 && s.scales[1] == 2);
    CHECK(s.has_biases && s.biases[0] == 5 && s.biases[1] == 2 && s.scales_dtype == CELER_ST_BF16);
    CHECK(s.weight_bytes == 5 * 12 * 4 && s.scales_bytes == 5 * 2 * 2 && s.biases_bytes == 5 * 2 * 2);

    q = affine(6, 32, CELER_ST_F32, 7, 96);
    CHECK(celer_mlx_quant_get_shapes(&q, &s, &err) == CELER_OK);
    CHECK(s.weight[1] == 18 && s.scales[1] == 3 && s.scales_bytes == 7 * 3 * 4);

    q = fp(CELER_HF_QUANT_MXFP4, CELER_ST_BF16, 3, 64);
    CHECK(celer_mlx_quant_get_shapes(&q, &s, &err) == CELER_OK);
    CHECK(s.weight[0] == 3 && s.weight[1] == 8 && s.scales[1] == 2 && s.scales_dtype == CELER_ST_U8);
    CHECK(!s.has_biases && s.biases[0] == 0 && s.biases[1] == 0 && s.biases_bytes == 0 && s.scales_bytes == 6);

    q = fp(CELER_HF_QUANT_MXFP8, CELER_ST_F16, 2, 64);
    CHECK(celer_mlx_quant_get_shapes(&q, &s, &err) == CELER_OK && s.weight[1] == 16 && s.scales[1] == 2);
    q = fp(CELER_HF_QUANT_NVFP4, CELER_ST_F32, 2, 32);
    CHECK(celer_mlx_quant_get_shapes(&q, &s, &err) == CELER_OK && s.weight[1] == 4 && s.scales[1] == 2);

    q = affine(4, 48, CELER_ST_F32, 2, 96);
    CHECK(celer_mlx_quant_get_shapes(&q, &s, &err) == CELER_ERR_FORMAT);
    return 0;
}

static int test_check_tensor(void)
{
    celer_error     err = {0};
    celer_mlx_quant q   = affine(4, 64, CELER_ST_BF16, 8, 256);
    const uint64_t  w[2] = {8, 32}, sc[2] = {8, 4}, stacked[3] = {2, 4, 32}, wide[2] = {8, 33};
    CHECK(celer_mlx_quant_check_tensor(&q, CELER_MLX_QUANT_WEIGHT, "x.weight", CELER_ST_U32, 2, w, &err) == CELER_OK);
    CHECK(celer_mlx_quant_check_tensor(&q, CELER_MLX_QUANT_SCALES, "x.scales", CELER_ST_BF16, 2, sc, &err) == CELER_OK);
    CHECK(celer_mlx_quant_check_tensor(&q, CELER_MLX_QUANT_BIASES, "x.biases", CELER_ST_BF16, 2, sc, &err) == CELER_OK);
    /* experts stacked in front: (2, 4, 32) is 8 rows of 32 words */
    CHECK(celer_mlx_quant_check_tensor(&q, CELER_MLX_QUANT_WEIGHT, "x.weight", CELER_ST_U32, 3, stacked, &err) == CELER_OK);

    CHECK(celer_mlx_quant_check_tensor(&q, CELER_MLX_QUANT_WEIGHT, "x.weight", CELER_ST_U32, 2, wide, &err) ==
          CELER_ERR_FORMAT);
    CHECK(has(&err, "x.weight") && has(&err, "shape (8, 33)") && has(&err, "needs (8, 32)") && has(&err, "(8, 256)") &&
          has(&err, "affine 4-bit group 64"));
    CHECK(celer_mlx_quant_check_tensor(&q, CELER_MLX_QUANT_SCALES, "x.scales", CELER_ST_BF16, 2, w, &err) ==
          CELER_ERR_FORMAT && has(&err, "x.scales") && has(&err, "needs (8, 4)"));
    CHECK(celer_mlx_quant_check_tensor(&q, CELER_MLX_QUANT_SCALES, "x.scales", CELER_ST_F16, 2, sc, &err) ==
          CELER_ERR_FORMAT && has(&err, "x.scales: dtype F16") && has(&err, "needs BF16"));
    CHECK(celer_mlx_quant_check_tensor(&q, CELER_MLX_QUANT_WEIGHT, "x.weight", CELER_ST_U8, 2, w, &err) ==
          CELER_ERR_FORMAT && has(&err, "needs U32"));
    CHECK(celer_mlx_quant_check_tensor(&q, CELER_MLX_QUANT_WEIGHT, "x.weight", CELER_ST_U32, 1, w, &err) ==
          CELER_ERR_FORMAT && has(&err, "shape (8)"));

    q = fp(CELER_HF_QUANT_NVFP4, CELER_ST_BF16, 8, 64);
    const uint64_t s4[2] = {8, 4};
    CHECK(celer_mlx_quant_check_tensor(&q, CELER_MLX_QUANT_SCALES, "y.scales", CELER_ST_U8, 2, s4, &err) == CELER_OK);
    CHECK(celer_mlx_quant_check_tensor(&q, CELER_MLX_QUANT_SCALES, "y.scales", CELER_ST_BF16, 2, s4, &err) ==
          CELER_ERR_FORMAT && has(&err, "needs U8"));
    CHECK(celer_mlx_quant_check_tensor(&q, CELER_MLX_QUANT_BIASES, "y.biases", CELER_ST_U8, 2, s4, &err) ==
          CELER_ERR_FORMAT && has(&err, "y.biases") && has(&err, "nvfp4 has no biases"));
    return 0;
}

/* ---- sizes of the data ------------------------------------------------------------------- */

static int test_sizes(void)
{
    celer_error     err = {0};
    celer_mlx_quant q   = affine(4, 32, CELER_ST_F16, 2, 64); /* 8 words, 2 scales per row */
    uint32_t        w[16] = {0};
    uint16_t        s[4] = {0x3c00, 0x3c00, 0x3c00, 0x3c00}, b[4] = {0};
    float           y[64];
    celer_mlx_quant_data d = {w, sizeof w, s, sizeof s, b, sizeof b};
    CHECK(celer_mlx_dequant_row(&q, &d, 1, y, &err) == CELER_OK);

    y[0]             = 42.0f;
    d.weight_bytes   = sizeof w - 4;
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_ERR_FORMAT && y[0] == 42.0f);
    CHECK(has(&err, "layers.0.mlp.up_proj.weight: 60 bytes") && has(&err, "2 rows of 8 packed words (U32) = 64 bytes") &&
          has(&err, "affine 4-bit group 32") && has(&err, "(2, 64)"));
    d.weight_bytes = sizeof w;
    d.scales_bytes = 6;
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_ERR_FORMAT && y[0] == 42.0f);
    CHECK(has(&err, ".scales: 6 bytes") && has(&err, "2 rows of 2 scales (F16) = 8 bytes"));
    d.scales_bytes = sizeof s;
    d.biases       = NULL;
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_ERR_FORMAT && has(&err, ".biases: missing"));
    d.biases       = b;
    d.biases_bytes = 16;
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_ERR_FORMAT && has(&err, ".biases: 16 bytes"));
    d.biases_bytes = sizeof b;
    d.weight       = NULL;
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_ERR_FORMAT && has(&err, ".weight: missing"));
    d.weight = w;
    CHECK(celer_mlx_dequant_row(&q, &d, 2, y, &err) == CELER_ERR_INVALID && has(&err, "row 2 of a weight of 2 rows"));
    CHECK(celer_mlx_dequant_row(&q, &d, -1, y, &err) == CELER_ERR_INVALID && y[0] == 42.0f);
    q.bits = 7;
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_ERR_FORMAT && has(&err, "7 bits"));

    /* fp modes: scales are bytes, and biases must be absent */
    q                     = fp(CELER_HF_QUANT_MXFP4, CELER_ST_BF16, 2, 64); /* 8 words, 2 scales per row */
    uint8_t              e[4] = {127, 127, 127, 127};
    celer_mlx_quant_data f    = {w, sizeof w, e, sizeof e, NULL, 0};
    CHECK(celer_mlx_dequant_row(&q, &f, 0, y, &err) == CELER_OK);
    f.scales_bytes = 2;
    CHECK(celer_mlx_dequant_row(&q, &f, 0, y, &err) == CELER_ERR_FORMAT && has(&err, "lm_head.scales: 2 bytes") &&
          has(&err, "2 rows of 2 scales (U8) = 4 bytes"));
    f.scales_bytes = sizeof e;
    f.biases       = b;
    f.biases_bytes = sizeof b;
    CHECK(celer_mlx_dequant_row(&q, &f, 0, y, &err) == CELER_ERR_FORMAT && has(&err, "lm_head.biases: given") &&
          has(&err, "mxfp4 has no biases"));
    return 0;
}

/* ---- values ------------------------------------------------------------------------------ */

/* Codes that cross word boundaries come back: 32 codes of 3, 5 and 6 bits fill 3, 5, 6 words;
 * with scale 1 and bias 0 the values are the codes. */
static int test_bit_stream(void)
{
    celer_error err = {0};
    for (uint32_t bits = 2; bits <= 8; bits++) {
        if (bits == 7) continue;
        uint32_t w[2 * 8] = {0}, codes[64];
        for (int j = 0; j < 64; j++) {
            codes[j] = (uint32_t)(j * 37 + 11) & ((1u << bits) - 1);
            put_code(w, j, (int)bits, codes[j]);
        }
        uint32_t        s[2] = {0x3f800000, 0x3f800000}, b[2] = {0, 0}; /* f32 1 and 0 */
        celer_mlx_quant q    = affine(bits, 32, CELER_ST_F32, 1, 64);
        celer_mlx_quant_data d = {w, bits * 2 * 4, s, sizeof s, b, sizeof b};
        float                y[64];
        CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_OK);
        for (int j = 0; j < 64; j++) CHECK(y[j] == (float)codes[j]);
    }
    /* by hand, 3 bits: element 10 takes bits 30, 31 of word 0 and bit 0 of word 1 */
    uint32_t        w3[3] = {0x80000000u, 0x00000001u, 0}, s[1] = {0x3f800000}, b[1] = {0};
    celer_mlx_quant q     = affine(3, 32, CELER_ST_F32, 1, 32);
    celer_mlx_quant_data d = {w3, sizeof w3, s, sizeof s, b, sizeof b};
    float                y[32];
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_OK);
    CHECK(y[10] == 6.0f && y[9] == 0.0f && y[11] == 0.0f); /* bits 0b110: 1 from word 1 is the high bit */
    /* 6 bits: element 5 takes bits 30, 31 of word 0 and bits 0..3 of word 1 */
    uint32_t w6[6] = {0x40000000u, 0x0000000fu, 0, 0, 0, 0};
    q              = affine(6, 32, CELER_ST_F32, 1, 32);
    d.weight       = w6;
    d.weight_bytes = sizeof w6;
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_OK);
    CHECK(y[5] == 61.0f && y[4] == 0.0f && y[6] == 0.0f); /* 0b111101 */
    return 0;
}

/* y = R(R(q * scale) + bias): each op rounded to the dtype, as mlx evaluates it. */
static int test_affine_rounding(void)
{
    celer_error err = {0};
    uint32_t    w[4] = {0};
    float       y[32];
    put_code(w, 0, 4, 3);
    put_code(w, 1, 4, 1);
    put_code(w, 2, 4, 15);

    /* bf16: scale 1.0078125 (0x3f81), bias -2^-7. 3 * scale = 3.0234375 is a tie in bf16 and
     * goes to even, 3.03125; adding the bias gives 3.0234375, a tie again: 3.03125. Rounding the
     * exact 3 * scale + bias = 3.015625 once would give 3.015625. */
    uint16_t             s = 0x3f81, b = 0xbc00;
    celer_mlx_quant      q = affine(4, 32, CELER_ST_BF16, 1, 32);
    celer_mlx_quant_data d = {w, sizeof w, &s, 2, &b, 2};
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_OK);
    CHECK(y[0] == 3.03125f);
    CHECK(y[1] == 1.0f);           /* 1.0078125 - 0.0078125 */
    CHECK(y[3] == -0.0078125f);    /* code 0: 0 * scale + bias */
    CHECK(y[2] == 15.125f);        /* 15.1171875 rounds to 15.125 (bf16 step 0.0625) */

    /* f16: 15 * 8192 overflows to inf before the bias is added */
    uint16_t hs = celer_f32_to_half(8192.0f), hb = celer_f32_to_half(-65504.0f);
    q           = affine(4, 32, CELER_ST_F16, 1, 32);
    d           = (celer_mlx_quant_data){w, sizeof w, &hs, 2, &hb, 2};
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_OK);
    CHECK(y[2] == INFINITY && y[0] == 24576.0f - 65504.0f);

    /* f32: plain float32 ops, no fused multiply-add: 3 * (1 + 2^-23) = 3 + 3 * 2^-23 rounds to
     * 3 + 2^-21 (a tie, to even); minus 3 leaves 2^-21 (a fused op would give 3 * 2^-23). */
    float fs = 1.0f + 0x1p-23f, fb = -3.0f;
    q        = affine(4, 32, CELER_ST_F32, 1, 32);
    d        = (celer_mlx_quant_data){w, sizeof w, &fs, 4, &fb, 4};
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_OK);
    CHECK(y[0] == 0x1p-21f);
    return 0;
}

static int test_decoders(void)
{
    static const float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (uint32_t c = 0; c < 16; c++) CHECK(same(celer_mlx_e2m1_to_f32(c), c < 8 ? e2m1[c] : -e2m1[c - 8]));
    for (int c = 0; c < 256; c++) {
        int   e = (c >> 3) & 15, m = c & 7;
        float v = celer_mlx_e4m3_to_f32((uint8_t)c);
        if (e == 15 && m == 7) {
            CHECK(isnan(v));
            continue;
        }
        double want = e ? ldexp(8 + m, e - 10) : ldexp(m, -9);
        CHECK(same(v, (float)(c & 0x80 ? -want : want)));
    }
    CHECK(celer_mlx_e4m3_to_f32(0x7e) == 448.0f && celer_mlx_e4m3_to_f32(0x38) == 1.0f);
    for (int s = 0; s < 255; s++) CHECK(celer_mlx_e8m0_to_f32((uint8_t)s) == (float)ldexp(1.0, s - 127));
    CHECK(celer_mlx_e8m0_to_f32(255) == INFINITY);
    return 0;
}

static int test_fp_values(void)
{
    celer_error err = {0};
    float       y[32];
    uint32_t    w[4] = {0};
    for (int j = 0; j < 32; j++) put_code(w, j, 4, (uint32_t)j & 15);

    /* mxfp4, scale byte 128 = 2: y = 2 * e2m1 */
    uint8_t              sc = 128;
    celer_mlx_quant      q  = fp(CELER_HF_QUANT_MXFP4, CELER_ST_F32, 1, 32);
    celer_mlx_quant_data d  = {w, sizeof w, &sc, 1, NULL, 0};
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_OK);
    for (int j = 0; j < 32; j++) CHECK(same(y[j], 2.0f * celer_mlx_e2m1_to_f32((uint32_t)j)));
    /* scale byte 255 is +inf, as mlx computes 2^128: 0 * inf is NaN, -0.5 * inf is -inf */
    sc = 255;
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_OK);
    CHECK(isnan(y[0]) && isnan(y[8]) && y[1] == INFINITY && y[9] == -INFINITY);
    /* scale byte 0 is 2^-127 (subnormal): 0.5 * 2^-127 = 2^-128, exact in f32 and bf16 */
    sc = 0;
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_OK && y[1] == 0x1p-128f && y[7] == 6.0f * 0x1p-127f);
    q.dtype = CELER_ST_BF16;
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_OK && y[1] == 0x1p-128f);
    /* f16: the scale itself is rounded to f16 first, 2^-127 to 0 and 2^16 to inf, although
     * 0.5 * 2^16 = 32768 is a half-float */
    q.dtype = CELER_ST_F16;
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_OK && same(y[1], 0.0f) && same(y[9], -0.0f));
    sc = 127 + 16;
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_OK && y[1] == INFINITY && isnan(y[0]));
    sc = 127 + 15;
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_OK && y[7] == INFINITY && y[3] == 49152.0f);

    /* mxfp8: bytes in order; 0x38 = 1, 0x01 = 2^-9, 0x7e = 448, 0x7f NaN, 0x80 = -0 */
    uint8_t b8[32] = {0x38, 0x01, 0x7e, 0x7f, 0x80, 0xb8};
    q              = fp(CELER_HF_QUANT_MXFP8, CELER_ST_F32, 1, 32);
    sc             = 126; /* 0.5 */
    d              = (celer_mlx_quant_data){b8, sizeof b8, &sc, 1, NULL, 0};
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_OK);
    CHECK(y[0] == 0.5f && y[1] == 0x1p-10f && y[2] == 224.0f && isnan(y[3]) && same(y[4], -0.0f) && y[5] == -0.5f);
    CHECK(same(y[6], 0.0f));

    /* nvfp4: 16-element groups, E4M3 scales: 6 * 448 = 2688; 0.5 * 2^-9 */
    uint8_t s4[2] = {0x7e, 0x01};
    q             = fp(CELER_HF_QUANT_NVFP4, CELER_ST_BF16, 1, 32);
    d             = (celer_mlx_quant_data){w, sizeof w, s4, 2, NULL, 0};
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_OK);
    CHECK(y[7] == 2688.0f && y[15] == -2688.0f && y[17] == 0x1p-10f && y[23] == 6.0f * 0x1p-9f);
    /* a global scale of 2688 multiplies by 1; one of 1344 halves every value */
    q.has_global_scale = true;
    q.global_scale     = 2688.0f;
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_OK && y[7] == 2688.0f && y[17] == 0x1p-10f);
    q.global_scale = 1344.0f;
    CHECK(celer_mlx_dequant_row(&q, &d, 0, y, &err) == CELER_OK && y[7] == 1344.0f && y[17] == 0x1p-11f);
    return 0;
}

int main(void)
{
    int fails = 0;
    fails += test_check();
    fails += test_shapes();
    fails += test_check_tensor();
    fails += test_sizes();
    fails += test_bit_stream();
    fails += test_affine_rounding();
    fails += test_decoders();
    fails += test_fp_values();
    if (fails) fprintf(stderr, "test_mlx_quant: %d test(s) failed\n", fails);
    return fails != 0;
}
