/* Reference dequantizers and activation quantizers (quant/dequant.h) and the half-float
 * conversions (quant/half.h), on hand-built blocks. Blocks are written by small encoders that
 * follow the layouts documented in quant/blocks.h and quant/blocks_k23.h (the inverse of the
 * code under test), with power-of-two scales so every expected value is exact. Bit parity with
 * gguf-py on real and random data is tests/reference/test_dequant_gguf.py. */
#include "quant/dequant.h"
#include "quant/half.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include "check.h"

/* Same float, by bits (so -0 != +0 and NaN == the same NaN). */
static int same(float a, float b) { return celer_f32_bits(a) == celer_f32_bits(b); }

static uint32_t rng_state = 12345;
static uint32_t rnd(uint32_t n) /* 0 .. n-1 */
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (rng_state >> 8) % n;
}

/* Compares y[0, n) with want[0, n) by bits, naming the first difference. */
static int check_row(const char *what, const float *y, const float *want, int n)
{
    for (int i = 0; i < n; i++)
        if (!same(y[i], want[i])) {
            fprintf(stderr, "%s: element %d: got %.9g, want %.9g\n", what, i, (double)y[i], (double)want[i]);
            return 1;
        }
    return 0;
}

/* ---- half and bfloat16 -------------------------------------------------------------------- */

static int test_half_all(void)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float    f = celer_half_to_f32((uint16_t)h);
        uint32_t exp = (h >> 10) & 31, man = h & 1023;
        int      neg = (h & 0x8000) != 0;
        if (exp == 31 && man) { /* NaN: stays NaN of the same sign; f32 -> f16 keeps the class */
            CHECK(f != f);
            CHECK(((celer_f32_bits(f) >> 31) != 0) == neg);
            uint16_t back = celer_f32_to_half(f);
            CHECK((back & 0x7c00) == 0x7c00 && (back & 0x3ff) && ((back & 0x8000) != 0) == neg);
            continue;
        }
        /* the value, independently: (-1)^s * man * 2^-24 (subnormal) or (1024 + man) * 2^(exp-25) */
        double want = exp == 31 ? INFINITY : exp == 0 ? ldexp(man, -24) : ldexp(1024 + man, (int)exp - 25);
        CHECK(same(f, (float)(neg ? -want : want)));
        CHECK(celer_f32_to_half(f) == h);
    }
    return 0;
}

static int test_half_rounding(void)
{
    static const struct {
        float    f;
        uint16_t h;
    } cases[] = {
        {1.0f + 0x1p-11f, 0x3c00},             /* tie between 1 and 1+2^-10: to even (down) */
        {1.0f + 3 * 0x1p-11f, 0x3c02},         /* tie between mantissas 1 and 2: to even (up) */
        {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01},  /* above the tie */
        {1.0f + 0x1p-11f - 0x1p-23f, 0x3c00},  /* below the tie */
        {-1.5f, 0xbe00},
        {2047.5f, 0x6800},                     /* tie between 2047 (odd) and 2048: up to even */
        {2046.5f, 0x67fe},                     /* tie between 2046 (even) and 2047: down */
        {65504.0f, 0x7bff},                    /* largest finite */
        {65519.99f, 0x7bff},                   /* below the tie with 65536 */
        {65520.0f, 0x7c00},                    /* tie: to even, which is infinity */
        {1e6f, 0x7c00},
        {-1e6f, 0xfc00},
        {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},
        {0x1p-24f, 0x0001},                    /* smallest subnormal */
        {0x1p-25f, 0x0000},                    /* tie between 0 and 2^-24: to even (0) */
        {0x1p-25f + 0x1p-40f, 0x0001},         /* above it */
        {3 * 0x1p-25f, 0x0002},                /* tie between subnormals 1 and 2: to 2 */
        {5 * 0x1p-25f, 0x0002},                /* tie between 2 and 3: to 2 */
        {0x1p-14f - 0x1p-25f, 0x0400},         /* tie between largest subnormal and smallest normal */
        {0x1p-14f, 0x0400},
        {-0.0f, 0x8000},
        {1e-10f, 0x0000},
        {-1e-10f, 0x8000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (celer_f32_to_half(cases[i].f) != cases[i].h) {
            fprintf(stderr, "f32_to_half(%.9g) = %#06x, want %#06x\n", (double)cases[i].f,
                    celer_f32_to_half(cases[i].f), cases[i].h);
            return 1;
        }
    }
    return 0;
}

static int test_bf16(void)
{
    for (uint32_t b = 0; b < 65536; b++) {
        float f = celer_bf16_to_f32((uint16_t)b);
        CHECK(celer_f32_bits(f) == b << 16);
        uint16_t back = celer_f32_to_bf16(f);
        if ((b & 0x7f80) == 0x7f80 && (b & 0x7f)) CHECK(back == (b | 0x40)); /* NaN: made quiet */
        else CHECK(back == b);
    }
    static const struct {
        uint32_t f;
        uint16_t b;
    } cases[] = {
        {0x3f808000, 0x3f80}, /* 1 + 2^-8: tie between 1 and 1+2^-7, to even (down) */
        {0x3f818000, 0x3f82}, /* 1 + 3*2^-8: tie, to even (up) */
        {0x3f808001, 0x3f81}, /* just above the tie */
        {0x3f807fff, 0x3f80}, /* just below it */
        {0xbf818000, 0xbf82}, /* negative tie, to even */
        {0x7f7fffff, 0x7f80}, /* FLT_MAX rounds to infinity */
        {0x7f800000, 0x7f80},
        {0xff800000, 0xff80},
        {0x7f800001, 0x7fc0}, /* signalling NaN whose payload is below bit 16: quiet, still NaN */
        {0xffc00000, 0xffc0},
        {0x00008000, 0x0000}, /* subnormal tie: to even */
        {0x00018000, 0x0002},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = celer_f32_to_bf16(celer_bits_f32(cases[i].f));
        if (got != cases[i].b) {
            fprintf(stderr, "f32_to_bf16(%#010x) = %#06x, want %#06x\n", cases[i].f, got, cases[i].b);
            return 1;
        }
    }
    return 0;
}

/* ---- float types and dispatch --------------------------------------------------------------- */

static int test_float_types(void)
{
    float       y[4];
    const float f32[4] = {1.0f, -2.5f, 0x1p-149f, -0.0f};
    CHECK(celer_dequant_row(CELER_GGML_F32, f32, y, 4) && check_row("F32", y, f32, 4) == 0);

    const uint16_t f16[4]  = {0x3c00, 0xc000, 0x0001, 0x7bff};
    const float    wf16[4] = {1.0f, -2.0f, 0x1p-24f, 65504.0f};
    CHECK(celer_dequant_row(CELER_GGML_F16, f16, y, 4) && check_row("F16", y, wf16, 4) == 0);

    const uint16_t bf[4]  = {0x3f80, 0xc040, 0x0001, 0x7f7f};
    const float    wbf[4] = {1.0f, -3.0f, 0x1p-133f, celer_bits_f32(0x7f7f0000)};
    CHECK(celer_dequant_row(CELER_GGML_BF16, bf, y, 4) && check_row("BF16", y, wbf, 4) == 0);
    return 0;
}

static int test_dispatch(void)
{
    static const celer_ggml_type yes[] = {CELER_GGML_F32,  CELER_GGML_F16,  CELER_GGML_BF16, CELER_GGML_Q4_0,
                                          CELER_GGML_Q4_1, CELER_GGML_Q5_0, CELER_GGML_Q5_1, CELER_GGML_Q8_0,
                                          CELER_GGML_Q2_K, CELER_GGML_Q3_K, CELER_GGML_Q4_K, CELER_GGML_Q5_K,
                                          CELER_GGML_Q6_K, CELER_GGML_Q8_K};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) CHECK(celer_dequant_supported(yes[i]));
    static const celer_ggml_type no[] = {CELER_GGML_Q8_1, CELER_GGML_IQ2_XXS, CELER_GGML_IQ4_NL, CELER_GGML_I8,
                                         CELER_GGML_F64,  CELER_GGML_TQ1_0,   CELER_GGML_MXFP4,  (celer_ggml_type)4,
                                         CELER_GGML_TYPE_LIMIT, (celer_ggml_type)1000};
    uint8_t src[256] = {0};
    float   y[256];
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        CHECK(!celer_dequant_supported(no[i]));
        y[0] = 42.0f;
        CHECK(!celer_dequant_row(no[i], src, y, 256) && y[0] == 42.0f); /* nothing written */
    }
    return 0;
}

/* ---- 32-element blocks ----------------------------------------------------------------------- */

/* Sets the 4-bit code of element j (< 32): low nibble of qs[j] for j < 16, else high of qs[j-16]. */
static void put_nibble(uint8_t *qs, int j, int q) { qs[j % 16] |= (uint8_t)((q & 15) << (4 * (j / 16))); }

static int test_q4_0(void)
{
    celer_block_q4_0 b[2] = {0};
    float            want[64], y[64];
    for (int k = 0; k < 2; k++) {
        b[k].d = celer_f32_to_half(k ? -0.25f : 0.5f);
        for (int j = 0; j < 32; j++) {
            int q = (int)rnd(16);
            put_nibble(b[k].qs, j, q);
            want[32 * k + j] = (k ? -0.25f : 0.5f) * (float)(q - 8);
        }
    }
    CHECK(celer_dequant_row(CELER_GGML_Q4_0, b, y, 64));
    CHECK(check_row("Q4_0", y, want, 64) == 0);
    /* by hand: qs[0] = 0xf0 -> element 0 has code 0, element 16 code 15 */
    celer_block_q4_0 h = {.d = 0x3800 /* 0.5 */};
    h.qs[0]            = 0xf0;
    CHECK(celer_dequant_row(CELER_GGML_Q4_0, &h, y, 32));
    CHECK(y[0] == -4.0f && y[16] == 3.5f && y[1] == -4.0f);
    return 0;
}

static int test_q4_1(void)
{
    celer_block_q4_1 b = {.d = celer_f32_to_half(0.25f), .m = celer_f32_to_half(-1.0f)};
    float            want[32], y[32];
    for (int j = 0; j < 32; j++) {
        int q = (int)rnd(16);
        put_nibble(b.qs, j, q);
        want[j] = 0.25f * (float)q - 1.0f;
    }
    CHECK(celer_dequant_row(CELER_GGML_Q4_1, &b, y, 32) && check_row("Q4_1", y, want, 32) == 0);
    memset(b.qs, 0, sizeof b.qs);
    b.qs[3] = 0x9f; /* element 3: 15 -> 2.75; element 19: 9 -> 1.25 */
    CHECK(celer_dequant_row(CELER_GGML_Q4_1, &b, y, 32));
    CHECK(y[3] == 2.75f && y[19] == 1.25f && y[0] == -1.0f);
    return 0;
}

static void put_qh(uint8_t qh[4], int j, int bit) { qh[j / 8] |= (uint8_t)(bit << (j % 8)); }

static int test_q5_0(void)
{
    celer_block_q5_0 b = {.d = celer_f32_to_half(2.0f)};
    float            want[32], y[32];
    for (int j = 0; j < 32; j++) {
        int q = (int)rnd(32);
        put_nibble(b.qs, j, q);
        put_qh(b.qh, j, q >> 4);
        want[j] = 2.0f * (float)(q - 16);
    }
    CHECK(celer_dequant_row(CELER_GGML_Q5_0, &b, y, 32) && check_row("Q5_0", y, want, 32) == 0);
    celer_block_q5_0 h = {.d = 0x3c00 /* 1 */, .qh = {0, 0, 0, 0x80} /* bit 31: element 31 */};
    h.qs[15]           = 0xf0; /* element 31 code 0x1f, element 15 code 0 */
    CHECK(celer_dequant_row(CELER_GGML_Q5_0, &h, y, 32));
    CHECK(y[31] == 15.0f && y[15] == -16.0f);
    return 0;
}

static int test_q5_1(void)
{
    celer_block_q5_1 b = {.d = celer_f32_to_half(0.125f), .m = celer_f32_to_half(0.5f)};
    float            want[32], y[32];
    for (int j = 0; j < 32; j++) {
        int q = (int)rnd(32);
        put_nibble(b.qs, j, q);
        put_qh(b.qh, j, q >> 4);
        want[j] = 0.125f * (float)q + 0.5f;
    }
    CHECK(celer_dequant_row(CELER_GGML_Q5_1, &b, y, 32) && check_row("Q5_1", y, want, 32) == 0);
    return 0;
}

static int test_q8_0(void)
{
    celer_block_q8_0 b = {.d = celer_f32_to_half(0.125f)};
    float            want[32], y[32];
    for (int j = 0; j < 32; j++) {
        b.qs[j] = (int8_t)(8 * j - 128);
        want[j] = (float)(8 * j - 128) / 8.0f;
    }
    CHECK(celer_dequant_row(CELER_GGML_Q8_0, &b, y, 32) && check_row("Q8_0", y, want, 32) == 0);
    CHECK(y[0] == -16.0f && y[31] == 15.0f);
    return 0;
}

/* ---- K-quants -------------------------------------------------------------------------------- */

/* 2-bit field of element i in a 64-byte qs (Q2_K, Q3_K): per 128-element half, 32 bytes; element
 * 32s + l of the half is bits 2s..2s+1 of byte l. */
static void put_2bit(uint8_t *qs, int i, int q) { qs[32 * (i / 128) + i % 32] |= (uint8_t)((q & 3) << (2 * ((i % 128) / 32))); }

static int test_q2_K(void)
{
    celer_block_q2_K b = {.d = celer_f32_to_half(0.5f), .dmin = celer_f32_to_half(0.25f)};
    float            want[256], y[256];
    int              sc[16], m[16];
    for (int s = 0; s < 16; s++) sc[s] = (int)rnd(16), m[s] = (int)rnd(16), b.scales[s] = (uint8_t)(sc[s] | m[s] << 4);
    for (int i = 0; i < 256; i++) {
        int q = (int)rnd(4);
        put_2bit(b.qs, i, q);
        want[i] = 0.5f * (float)sc[i / 16] * (float)q - 0.25f * (float)m[i / 16];
    }
    CHECK(celer_dequant_row(CELER_GGML_Q2_K, &b, y, 256) && check_row("Q2_K", y, want, 256) == 0);
    /* by hand: element 165 = 128 + 32 + 5 is bits 2-3 of qs[32 + 5] (0x0c: code 3), in
     * sub-block 10, whose scales byte 0x23 means sc 3, m 2 */
    celer_block_q2_K h = {.d = 0x3c00, .dmin = 0x3c00};
    h.scales[10]       = 0x23;
    h.qs[37]           = 0x0c;
    CHECK(celer_dequant_row(CELER_GGML_Q2_K, &h, y, 256));
    CHECK(y[165] == 3.0f * 3.0f - 2.0f && y[164] == -2.0f && y[5] == 0.0f);
    return 0;
}

static int test_q3_K(void)
{
    celer_block_q3_K b = {.d = celer_f32_to_half(0.25f)};
    float            want[256], y[256];
    int              sc[16];
    for (int s = 0; s < 16; s++) {
        sc[s]  = (int)rnd(64) - 32; /* stored biased by 32, 6 bits */
        int u  = sc[s] + 32;
        b.scales[s % 8] |= (uint8_t)((u & 15) << (4 * (s / 8)));
        b.scales[8 + s % 4] |= (uint8_t)((u >> 4) << (2 * (s / 4)));
    }
    for (int i = 0; i < 256; i++) {
        int q = (int)rnd(8) - 4; /* -4..3: low 2 bits, and hmask bit set unless 4 is subtracted */
        put_2bit(b.qs, i, q >= 0 ? q : q + 4);
        if (q >= 0) b.hmask[i % 32] |= (uint8_t)(1 << (i / 32));
        want[i] = 0.25f * (float)sc[i / 16] * (float)q;
    }
    CHECK(celer_dequant_row(CELER_GGML_Q3_K, &b, y, 256) && check_row("Q3_K", y, want, 256) == 0);
    /* by hand: all bytes 0 except d = 1: scale -32, codes -4: every element 128 */
    celer_block_q3_K h = {.d = 0x3c00};
    CHECK(celer_dequant_row(CELER_GGML_Q3_K, &h, y, 256));
    CHECK(y[0] == 128.0f && y[255] == 128.0f);
    return 0;
}

/* Packs 6-bit scales and mins of 8 sub-blocks into 12 bytes (Q4_K, Q5_K). */
static void pack_k_scales(uint8_t s[12], const int *sc, const int *m)
{
    memset(s, 0, 12);
    for (int j = 0; j < 4; j++) {
        s[j]     = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
        s[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
}

static int test_q45_K(int five)
{
    celer_block_q4_K b4 = {0};
    celer_block_q5_K b5 = {0};
    celer_half       d = celer_f32_to_half(0.5f), dmin = celer_f32_to_half(0.125f);
    float            want[256], y[256];
    int              sc[8], m[8];
    for (int j = 0; j < 8; j++) sc[j] = (int)rnd(64), m[j] = (int)rnd(64);
    sc[5] = 37, m[6] = 63; /* high bits in use */
    pack_k_scales(five ? b5.scales : b4.scales, sc, m);
    uint8_t *qs = five ? b5.qs : b4.qs;
    for (int i = 0; i < 256; i++) {
        int q = (int)rnd(five ? 32 : 16), j = i / 32, l = i % 32;
        qs[32 * (j / 2) + l] |= (uint8_t)((q & 15) << (4 * (j % 2)));
        if (five) b5.qh[l] |= (uint8_t)((q >> 4) << j);
        want[i] = 0.5f * (float)sc[j] * (float)q - 0.125f * (float)m[j];
    }
    b4.d = b5.d = d, b4.dmin = b5.dmin = dmin;
    CHECK(celer_dequant_row(five ? CELER_GGML_Q5_K : CELER_GGML_Q4_K, five ? (void *)&b5 : (void *)&b4, y, 256));
    CHECK(check_row(five ? "Q5_K" : "Q4_K", y, want, 256) == 0);
    return 0;
}

static int test_q4_K_by_hand(void)
{
    /* sub-block 5 (elements 160..191): sc = 37 = 0b100101 (low 4 bits in the low nibble of
     * scales[9], top 2 bits in bits 6-7 of scales[1]); min 2 (high nibble of scales[9]).
     * Element 161 is the high nibble of qs[64 + 1]. */
    celer_block_q4_K h = {.d = 0x3c00, .dmin = 0x3c00};
    h.scales[9]        = 0x25;
    h.scales[1]        = 0x80;
    h.qs[65]           = 0x70;
    float y[256];
    CHECK(celer_dequant_row(CELER_GGML_Q4_K, &h, y, 256));
    CHECK(y[161] == 37.0f * 7.0f - 2.0f && y[160] == -2.0f && y[65] == 0.0f);
    return 0;
}

static int test_q6_K(void)
{
    celer_block_q6_K b = {.d = celer_f32_to_half(0.0625f)};
    float            want[256], y[256];
    for (int s = 0; s < 16; s++) b.scales[s] = (int8_t)((int)rnd(256) - 128);
    for (int i = 0; i < 256; i++) {
        int q = (int)rnd(64), half = i / 128, r = i % 128; /* stored q, value q - 32 */
        b.ql[64 * half + r % 64] |= (uint8_t)((q & 15) << (4 * (r / 64)));
        b.qh[32 * half + r % 32] |= (uint8_t)((q >> 4) << (2 * (r / 32)));
        want[i] = 0.0625f * (float)b.scales[i / 16] * (float)(q - 32);
    }
    CHECK(celer_dequant_row(CELER_GGML_Q6_K, &b, y, 256) && check_row("Q6_K", y, want, 256) == 0);
    /* by hand: element 200 = half 1, r 72: low bits are the high nibble of ql[64 + 8], high bits
     * are bits 4-5 of qh[32 + 8]; code 0x3f -> 31, scale of sub-block 12 = -2, d = 1 */
    celer_block_q6_K h = {.d = 0x3c00};
    h.ql[72]           = 0xf0;
    h.qh[40]           = 0x30;
    h.scales[12]       = -2;
    CHECK(celer_dequant_row(CELER_GGML_Q6_K, &h, y, 256));
    CHECK(y[200] == -62.0f && y[199] == 64.0f);
    return 0;
}

static int test_q8_K(void)
{
    celer_block_q8_K b = {.d = 0.5f};
    float            want[256], y[256];
    for (int i = 0; i < 256; i++) b.qs[i] = (int8_t)(i - 128), want[i] = (float)(i - 128) * 0.5f;
    CHECK(celer_dequant_row(CELER_GGML_Q8_K, &b, y, 256) && check_row("Q8_K", y, want, 256) == 0);
    return 0;
}

/* ---- activation quantizers ------------------------------------------------------------------ */

static int test_quantize_q8_0(void)
{
    float            x[64] = {0};
    celer_block_q8_0 q[2];
    memset(q, 0x55, sizeof q);
    /* block 0: all zero -> d 0, codes 0 */
    /* block 1: amax 127 at element 0 (d = 1), ties at x.5 go away from zero */
    float tie[] = {127.0f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 0.49999997f, 126.5f};
    memcpy(x + 32, tie, sizeof tie);
    celer_quantize_row_q8_0_ref(x, q, 64);
    CHECK(q[0].d == 0);
    for (int j = 0; j < 32; j++) CHECK(q[0].qs[j] == 0);
    CHECK(q[1].d == 0x3c00);
    const int8_t want[] = {127, 1, -1, 2, 3, -3, 0, 127};
    for (int j = 0; j < 8; j++) CHECK(q[1].qs[j] == want[j]);

    /* the extreme element maps to -127, others in proportion; d = amax / 127 rounded to half */
    for (int j = 0; j < 32; j++) x[j] = 0.01f * (float)(j - 10);
    x[20] = -3.7f;
    celer_quantize_row_q8_0_ref(x, q, 32);
    CHECK(q[0].qs[20] == -127 && q[0].d == celer_f32_to_half(3.7f / 127.0f));
    for (int j = 0; j < 32; j++) CHECK(q[0].qs[j] >= -127 && q[0].qs[j] <= 127);
    CHECK(q[0].qs[10] == 0 && q[0].qs[31] == (int8_t)lroundf(0.21f * 127.0f / 3.7f));
    return 0;
}

static int test_quantize_q8_K(void)
{
    static float     x[512];
    celer_block_q8_K q[2];
    memset(q, 0x55, sizeof q);
    /* block 0: zero */
    /* block 1: max 254 at element 7 (d = 2), the first 16 all at the max, then ties */
    for (int j = 0; j < 16; j++) x[256 + j] = 254.0f;
    x[256 + 16] = 1.0f;  /* 0.5 -> 1 */
    x[256 + 17] = -3.0f; /* -1.5 -> -2 */
    x[256 + 18] = 5.0f;  /* 2.5 -> 3 */
    x[256 + 255] = -7.0f; /* -3.5 -> -4 */
    celer_quantize_row_q8_K_ref(x, q, 512);
    CHECK(q[0].d == 0.0f);
    for (int j = 0; j < 256; j++) CHECK(q[0].qs[j] == 0);
    for (int s = 0; s < 16; s++) CHECK(q[0].bsums[s] == 0);
    CHECK(q[1].d == 2.0f);
    CHECK(q[1].qs[0] == 127 && q[1].qs[15] == 127 && q[1].qs[16] == 1 && q[1].qs[17] == -2 && q[1].qs[18] == 3);
    CHECK(q[1].qs[255] == -4);
    CHECK(q[1].bsums[0] == 16 * 127 && q[1].bsums[1] == 1 - 2 + 3 && q[1].bsums[15] == -4);
    for (int s = 2; s < 15; s++) CHECK(q[1].bsums[s] == 0);

    /* random: bsums are the sums of each 16 codes; the extreme maps to +-127 */
    for (int j = 0; j < 256; j++) x[j] = (float)((int)rnd(2001) - 1000) * 0.001f;
    x[99] = -1.5f;
    celer_quantize_row_q8_K_ref(x, q, 256);
    CHECK(q[0].qs[99] == -127 && q[0].d == 1.5f / 127.0f);
    for (int s = 0; s < 16; s++) {
        int sum = 0;
        for (int j = 0; j < 16; j++) sum += q[0].qs[16 * s + j];
        CHECK(q[0].bsums[s] == sum);
    }
    return 0;
}

int main(void)
{
    int (*const tests[])(void) = {test_half_all, test_half_rounding, test_bf16, test_float_types, test_dispatch,
                                  test_q4_0, test_q4_1, test_q5_0, test_q5_1, test_q8_0, test_q2_K, test_q3_K,
                                  test_q4_K_by_hand, test_q6_K, test_q8_K, test_quantize_q8_0, test_quantize_q8_K};
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
        if (tests[i]()) return 1;
    if (test_q45_K(0) || test_q45_K(1)) return 1;
    printf("test_dequant: ok\n");
    return 0;
}
