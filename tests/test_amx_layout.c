/* AMD's integer matrix units without an AMD GPU (backends/gpu/amx_layout.h): each instruction the
 * prefill kernel issues is run here as the ISA documents it — which lane and byte hold A[m][k]
 * and B[k][n], which lane and register receive D[m][n] — on operands gathered the way
 * gpu_amx_block gathers them (amx_word_at, the lane's row and token at lane % 16), and the tile
 * read back through amx_row must equal the plain sums over the 32-value block, for every kind
 * and for random and extreme (-128, 127) bytes. A layout function that pairs the wrong k, drops
 * a lane group or misplaces a row fails here.
 *
 * The ISA's placements, as this file encodes them (AMD's matrix instruction calculator and the
 * CDNA 2 / CDNA 3 / RDNA 3 ISA guides):
 *   v_mfma_i32_16x16x16i8: A[m][k] in lane m + 16 (k / 4), byte k % 4 of its register; B[k][n]
 *     in lane n + 16 (k / 4), byte k % 4; D[m][n] in lane n + 16 (m / 4), register m % 4.
 *   v_mfma_i32_16x16x32_i8: A[m][k] in lane m + 16 (k / 8), byte k % 8 of its 64-bit operand;
 *     B likewise; D as above.
 *   v_wmma_i32_16x16x16_iu8 (wave32): A[m][k] in lanes m and m + 16 (the same value: the ISA
 *     requires the halves to agree), byte k of the lane's 16; B[k][n] in lanes n and n + 16,
 *     byte k; D[m][n] in lane n + 16 (m % 2), register m / 2. */
#include "backends/gpu/amx_layout.h"

#include "check.h"
#include "rng.h"

#include <stdint.h>
#include <string.h>

enum { LANES = 64, WORDS = 8, ACC = 8 };

/* A lane's operand words, as the device gathers them for one 32-byte row. */
typedef struct {
    uint32_t w[LANES][WORDS];
} operands;

static int8_t byte_of(uint32_t w, int b) { return (int8_t)(uint8_t)(w >> (8 * b)); }

/* The device's gathering (gpu_amx_block): lane l's words from row l % 16 of the 16 rows. */
static void gather(int kind, const int8_t rows[16][32], operands *o)
{
    memset(o, 0, sizeof *o);
    for (int l = 0; l < amx_lanes(kind); l++)
        for (int i = 0; i < amx_words(kind); i++) {
            const int off = amx_word_at(kind, l, i);
            uint32_t  w   = 0;
            for (int b = 0; b < 4; b++) w |= (uint32_t)(uint8_t)rows[l % 16][off + b] << (8 * b);
            o->w[l][i] = w;
        }
}

/* One v_mfma_i32_16x16x16i8: its A and B are one register a lane, word j of the gathered ones. */
static void mfma16(const operands *a, const operands *b, int j, int32_t d[LANES][ACC])
{
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            int32_t s = 0;
            for (int k = 0; k < 16; k++)
                s += byte_of(a->w[m + 16 * (k / 4)][j], k % 4) * byte_of(b->w[n + 16 * (k / 4)][j], k % 4);
            d[n + 16 * (m / 4)][m % 4] += s;
        }
}

/* One v_mfma_i32_16x16x32_i8: its 64-bit operands are words 0 (low) and 1. */
static void mfma32(const operands *a, const operands *b, int32_t d[LANES][ACC])
{
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            int32_t s = 0;
            for (int k = 0; k < 32; k++) {
                const int la = m + 16 * (k / 8), lb = n + 16 * (k / 8), byte = k % 8;
                s += byte_of(a->w[la][byte / 4], byte % 4) * byte_of(b->w[lb][byte / 4], byte % 4);
            }
            d[n + 16 * (m / 4)][m % 4] += s;
        }
}

/* One v_wmma_i32_16x16x16_iu8, both signed: instruction j's registers are words 4 j .. 4 j + 3;
 * returns 1 when the lanes' halves disagree (the ISA's requirement broken). */
static int wmma11(const operands *a, const operands *b, int j, int32_t d[LANES][ACC])
{
    for (int l = 0; l < 16; l++)
        for (int r = 0; r < 4; r++)
            CHECK(a->w[l][4 * j + r] == a->w[l + 16][4 * j + r] && b->w[l][4 * j + r] == b->w[l + 16][4 * j + r]);
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            int32_t s = 0;
            for (int k = 0; k < 16; k++)
                s += byte_of(a->w[m][4 * j + k / 4], k % 4) * byte_of(b->w[n][4 * j + k / 4], k % 4);
            d[n + 16 * (m % 2)][m / 2] += s;
        }
    return 0;
}

/* The tile of 16 weight rows × 16 tokens over one block, as the kernel gets it back. */
static int tile(int kind, const int8_t w[16][32], const int8_t x[16][32])
{
    operands a, b;
    int32_t  d[LANES][ACC];
    memset(d, 0, sizeof d);
    gather(kind, w, &a);
    gather(kind, x, &b);
    if (kind == CELER_AMX_MFMA16) mfma16(&a, &b, 0, d), mfma16(&a, &b, 1, d);
    else if (kind == CELER_AMX_MFMA32) mfma32(&a, &b, d);
    else CHECK(wmma11(&a, &b, 0, d) == 0 && wmma11(&a, &b, 1, d) == 0);
    int seen[16][16];
    memset(seen, 0, sizeof seen);
    for (int l = 0; l < amx_lanes(kind); l++)
        for (int v = 0; v < amx_acc(kind); v++) {
            const int m = amx_row(kind, l, v), n = l % 16;
            CHECK(m >= 0 && m < 16);
            int32_t want = 0;
            for (int k = 0; k < 32; k++) want += w[m][k] * x[n][k];
            CHECK(d[l][v] == want);
            seen[m][n]++;
        }
    for (int m = 0; m < 16; m++) /* every output once (WMMA's 32 lanes hold 8 rows each) */
        for (int n = 0; n < 16; n++) CHECK(seen[m][n] == 1);
    return 0;
}

static int kind_all(int kind)
{
    CHECK(amx_lanes(kind) * amx_acc(kind) == 256); /* a 16 × 16 tile over the wave */
    CHECK(amx_words(kind) * 4 * (kind == CELER_AMX_WMMA11 ? 1 : 4) == 32); /* a block's bytes, once */
    int8_t w[16][32], x[16][32];
    for (int rep = 0; rep < 20; rep++) {
        for (int i = 0; i < 16; i++)
            for (int k = 0; k < 32; k++) {
                const uint32_t r = rnd();
                /* the kernel's codes: weights -8 .. 7 (Q4_0) or any byte (Q8_0), tokens any byte;
                 * some runs all extremes, where a sign slip shows most */
                const int code = rep % 2 ? (int)(r % 16) - 8 : (int)(r % 256) - 128;
                w[i][k]        = rep % 4 == 3 ? (int8_t)(r & 1 ? 127 : -128) : (int8_t)code;
                x[i][k] = rep % 4 == 3 ? (int8_t)(r & 2 ? 127 : -128) : (int8_t)((int)(r >> 8) % 256 - 128);
            }
        if (tile(kind, w, x)) {
            fprintf(stderr, "test_amx_layout: kind %d, run %d\n", kind, rep);
            return 1;
        }
    }
    return 0;
}

/* ---- f16 products (prefill attention, gpu_flash_amx.cuh) ----------------------------------
 * Values are small integers standing for halves: placement is what is under test. The ISA:
 *   v_mfma_f32_16x16x16f16: A[m][k] in lane m + 16 (k / 4), half k % 4; B[k][n] in lane
 *     n + 16 (k / 4), half k % 4; D as v_mfma_i32_16x16x16i8's.
 *   v_wmma_f32_16x16x16_f16 (wave32): A[m][k] in lanes m and m + 16, half k; B[k][n] in lanes n
 *     and n + 16, half k; D as v_wmma_i32_16x16x16_iu8's. */
typedef struct {
    int32_t h[LANES][16];
} halves;

/* The kernel's gathering: lane l's values i of row (A) or column (B) l % 16, at k = amx_half_k. */
static void gather_h(int kind, const int32_t rows[16][16], halves *o)
{
    memset(o, 0, sizeof *o);
    for (int l = 0; l < amx_lanes(kind); l++)
        for (int i = 0; i < amx_halves(kind); i++) o->h[l][i] = rows[l % 16][amx_half_k(kind, l, i)];
}

/* One f16 product as the ISA places it (a is A by rows, b is B by columns, gathered). */
static int hmma(int kind, const halves *a, const halves *b, int32_t d[LANES][ACC])
{
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            int32_t s = 0;
            for (int k = 0; k < 16; k++) {
                if (kind == CELER_AMX_WMMA11) {
                    CHECK(a->h[m][k] == a->h[m + 16][k] && b->h[n][k] == b->h[n + 16][k]);
                    s += a->h[m][k] * b->h[n][k];
                } else {
                    s += a->h[m + 16 * (k / 4)][k % 4] * b->h[n + 16 * (k / 4)][k % 4];
                }
            }
            if (kind == CELER_AMX_WMMA11) d[n + 16 * (m % 2)][m / 2] += s;
            else d[n + 16 * (m / 4)][m % 4] += s;
        }
    return 0;
}

/* Scores Sᵀ = K Qᵀ (keys × queries over 16 dimensions), then Oᵀ = Vᵀ Sᵀ with Sᵀ's tile handed
 * over in place as B (amx_from_lane, amx_from_reg): both must be the plain products. */
static int flash_tiles(int kind, const int32_t kk[16][16], const int32_t q[16][16], const int32_t vt[16][16])
{
    halves  a, b;
    int32_t st[LANES][ACC], ot[LANES][ACC];
    memset(st, 0, sizeof st), memset(ot, 0, sizeof ot);
    gather_h(kind, kk, &a), gather_h(kind, q, &b);
    CHECK(hmma(kind, &a, &b, st) == 0);
    int32_t s[16][16]; /* the plain Sᵀ[key][query] */
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            s[m][n] = 0;
            for (int k = 0; k < 16; k++) s[m][n] += kk[m][k] * q[n][k];
        }
    for (int l = 0; l < amx_lanes(kind); l++)
        for (int v = 0; v < amx_acc(kind); v++) CHECK(st[l][v] == s[amx_row(kind, l, v)][l % 16]);
    halves p; /* Sᵀ as B of the next product: lane l's value i from where amx_from_* say */
    memset(&p, 0, sizeof p);
    for (int l = 0; l < amx_lanes(kind); l++)
        for (int i = 0; i < amx_halves(kind); i++) {
            const int fl = amx_from_lane(kind, l, i), fr = amx_from_reg(kind, i);
            CHECK(fl >= 0 && fl < amx_lanes(kind) && fr >= 0 && fr < amx_acc(kind));
            p.h[l][i] = st[fl][fr];
        }
    gather_h(kind, vt, &a);
    CHECK(hmma(kind, &a, &p, ot) == 0);
    for (int l = 0; l < amx_lanes(kind); l++)
        for (int v = 0; v < amx_acc(kind); v++) {
            const int d = amx_row(kind, l, v), n = l % 16;
            int32_t   want = 0;
            for (int k = 0; k < 16; k++) want += vt[d][k] * s[k][n];
            CHECK(ot[l][v] == want);
        }
    return 0;
}

static int kind_f16(int kind)
{
    CHECK(amx_halves(kind) * (kind == CELER_AMX_WMMA11 ? 1 : 4) == 16); /* a row's 16 k, once */
    for (int l = 0; l < amx_lanes(kind); l++) /* pairs of consecutive k: the kernel packs them */
        for (int i = 0; i + 1 < amx_halves(kind); i += 2)
            CHECK(amx_half_k(kind, l, i + 1) == amx_half_k(kind, l, i) + 1);
    int32_t kk[16][16], q[16][16], vt[16][16];
    for (int rep = 0; rep < 20; rep++) {
        for (int i = 0; i < 16; i++)
            for (int k = 0; k < 16; k++)
                kk[i][k] = (int32_t)(rnd() % 15) - 7, q[i][k] = (int32_t)(rnd() % 15) - 7,
                vt[i][k] = (int32_t)(rnd() % 15) - 7;
        if (flash_tiles(kind, kk, q, vt)) {
            fprintf(stderr, "test_amx_layout: f16, kind %d, run %d\n", kind, rep);
            return 1;
        }
    }
    return 0;
}

int main(void)
{
    const int fails = kind_all(CELER_AMX_MFMA16) + kind_all(CELER_AMX_MFMA32) + kind_all(CELER_AMX_WMMA11) +
                      kind_f16(CELER_AMX_MFMA16) + kind_f16(CELER_AMX_MFMA32) + kind_f16(CELER_AMX_WMMA11);
    if (fails) fprintf(stderr, "test_amx_layout: %d kind(s) failed\n", fails);
    else printf("test_amx_layout: ok\n");
    return fails != 0;
}
