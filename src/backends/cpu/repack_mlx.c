/* The CPU's blocked layout of MLX-quantized matrices (repack_mlx.h): packing at load and reading
 * a row back (tests, the reference kernels). A block of one row is built first (header values,
 * then 4-byte code chunks); a block of L rows puts each of those values and chunks of row r in
 * lane r. */
#include "backends/cpu/repack_mlx.h"

#include "core/error.h"

#include <string.h>

enum {
    SUB           = 32,                 /* elements per set of code planes */
    MAX_ROW_BLOCK = 2 * 4 + 128 / 32 * 32, /* bytes of a block of one row: F32 scale and bias, 128 8-bit codes */
};

static bool affine(const celer_mlx_quant *q) { return q->mode == CELER_HF_QUANT_AFFINE; }

/* Bytes of one stored scale (and bias). */
static size_t scale_bytes(const celer_mlx_quant *q) { return affine(q) ? celer_st_dtype_bits(q->dtype) / 8 : 1; }

/* Header values of one row: affine scale and bias; nvfp4 two scales; mxfp4/8 one. */
static int head_values(const celer_mlx_quant *q) { return affine(q) || q->mode == CELER_HF_QUANT_NVFP4 ? 2 : 1; }

int64_t celer_cpu_mlx_block_elems(const celer_mlx_quant *q) { return q->group_size > SUB ? q->group_size : SUB; }

size_t celer_cpu_mlx_head_bytes(const celer_mlx_quant *q, int L) { return (size_t)head_values(q) * scale_bytes(q) * (size_t)L; }

size_t celer_cpu_mlx_block_bytes(const celer_mlx_quant *q, int L)
{
    return celer_cpu_mlx_head_bytes(q, L) + (size_t)(celer_cpu_mlx_block_elems(q) / SUB) * 4 * q->bits * (size_t)L;
}

size_t celer_cpu_mlx_row_bytes(const celer_mlx_quant *q)
{
    return (size_t)(q->cols / celer_cpu_mlx_block_elems(q)) * celer_cpu_mlx_block_bytes(q, 1);
}

size_t celer_cpu_mlx_size(const celer_mlx_quant *q) { return (size_t)q->rows * celer_cpu_mlx_row_bytes(q); }

/* ---- codes of 32 elements <-> their planes (one row) ---------------------------------------- */

/* Code j of a row's little-endian bit stream p (bits <= 8: in the byte of its first bit, and
 * the next when it crosses). */
static uint32_t get_code(const uint8_t *p, int64_t j, uint32_t bits)
{
    uint64_t bit = (uint64_t)j * bits;
    uint32_t off = (uint32_t)(bit % 8), v = p[bit / 8];
    if (off + bits > 8) v |= (uint32_t)p[bit / 8 + 1] << 8;
    return (v >> off) & ((1u << bits) - 1);
}

static void put_code(uint8_t *p, int64_t j, uint32_t bits, uint32_t c)
{
    uint64_t bit = (uint64_t)j * bits;
    uint32_t off = (uint32_t)(bit % 8), v = c << off;
    p[bit / 8] |= (uint8_t)v;
    if (off + bits > 8) p[bit / 8 + 1] |= (uint8_t)(v >> 8);
}

/* The planes of a code width, low bits first: each a plane width (8, 4, 2, 1). */
static int planes_of(uint32_t bits, int w[2])
{
    switch (bits) {
    case 2: w[0] = 2; return 1;
    case 3: w[0] = 2, w[1] = 1; return 2;
    case 4: w[0] = 4; return 1;
    case 5: w[0] = 4, w[1] = 1; return 2;
    case 6: w[0] = 4, w[1] = 2; return 2;
    default: w[0] = 8; return 1;
    }
}

/* Byte and bit of element e (< 32) in a plane of width pw (one row: 4 · pw bytes). */
static void plane_at(int pw, int e, int *byte, int *shift)
{
    switch (pw) {
    case 8: *byte = e, *shift = 0; break;
    case 4: *byte = e % 16, *shift = e < 16 ? 0 : 4; break;
    case 2: *byte = e % 8, *shift = 2 * (e / 8); break;
    default: *byte = e % 4, *shift = e / 4; break;
    }
}

/* 32 codes c into their planes at out (4 · bits bytes), or back (!pack). */
static void move_codes(uint32_t bits, bool pack, uint8_t *planes, uint8_t c[SUB])
{
    int w[2], n = planes_of(bits, w), low = 0;
    if (pack) memset(planes, 0, 4 * bits);
    else memset(c, 0, SUB);
    for (int i = 0; i < n; i++) {
        uint8_t mask = (uint8_t)((1u << w[i]) - 1);
        for (int e = 0; e < SUB; e++) {
            int byte, shift;
            plane_at(w[i], e, &byte, &shift);
            if (pack) planes[byte] |= (uint8_t)(((c[e] >> low) & mask) << shift);
            else c[e] |= (uint8_t)(((planes[byte] >> shift) & mask) << low);
        }
        planes += 4 * w[i];
        low += w[i];
    }
}

/* ---- one row's block <-> the stored arrays ----------------------------------------------- */

typedef struct {
    uint8_t       *words;  /* the row's codes (bit stream) */
    uint8_t       *scales; /* the row's scales (and biases, affine) as stored */
    uint8_t       *biases;
} row_arrays;

/* Block cb of one row (celer_cpu_mlx_block_bytes(q, 1) bytes at blk) from (pack) or into the
 * row's stored arrays. */
static void move_row_block(const celer_mlx_quant *q, bool pack, uint8_t *blk, const row_arrays *a, int64_t cb)
{
    const int64_t B = celer_cpu_mlx_block_elems(q), gs = q->group_size;
    const size_t  es = scale_bytes(q);
    /* header: the block's scales (one, or nvfp4's two), then the bias */
    int64_t g0 = cb * B / gs, ng = affine(q) ? 1 : B / gs;
    for (int64_t g = 0; g < ng; g++) pack ? memcpy(blk + g * es, a->scales + (g0 + g) * es, es)
                                          : memcpy(a->scales + (g0 + g) * es, blk + g * es, es);
    if (affine(q)) pack ? memcpy(blk + es, a->biases + g0 * es, es) : memcpy(a->biases + g0 * es, blk + es, es);
    uint8_t *planes = blk + celer_cpu_mlx_head_bytes(q, 1);
    for (int64_t s = 0; s < B / SUB; s++, planes += 4 * q->bits) {
        uint8_t c[SUB];
        int64_t e0 = cb * B + s * SUB;
        if (pack && q->bits == 8) { /* the common widths without the general path (load time) */
            memcpy(planes, a->words + e0, SUB);
            continue;
        }
        if (pack && q->bits == 4) { /* byte j: codes j and j + 16, from the stream's nibble pairs */
            const uint8_t *src = a->words + e0 / 2;
            for (int j = 0; j < 16; j++)
                planes[j] = (uint8_t)(((src[j / 2] >> 4 * (j & 1)) & 15) | ((src[8 + j / 2] >> 4 * (j & 1)) & 15) << 4);
            continue;
        }
        if (pack)
            for (int e = 0; e < SUB; e++) c[e] = (uint8_t)get_code(a->words, e0 + e, q->bits);
        move_codes(q->bits, pack, planes, c);
        if (!pack)
            for (int e = 0; e < SUB; e++) put_code(a->words, e0 + e, q->bits, c[e]);
    }
}

/* Lane `lane` of a block of L rows to or from (!to_set) one row's block: header values of es
 * bytes, then 4-byte chunks. */
static void move_lane(const celer_mlx_quant *q, bool to_set, uint8_t *set, int L, int lane, uint8_t *one)
{
    const size_t es = scale_bytes(q), nh = (size_t)head_values(q);
    for (size_t i = 0; i < nh; i++) {
        uint8_t *s = set + (i * (size_t)L + (size_t)lane) * es, *o = one + i * es;
        to_set ? memcpy(s, o, es) : memcpy(o, s, es);
    }
    set += nh * es * (size_t)L, one += nh * es;
    size_t chunks = (size_t)(celer_cpu_mlx_block_elems(q) / SUB) * q->bits;
    for (size_t i = 0; i < chunks; i++) {
        uint8_t *s = set + (i * (size_t)L + (size_t)lane) * 4, *o = one + 4 * i;
        to_set ? memcpy(s, o, 4) : memcpy(o, s, 4);
    }
}

static row_arrays arrays_of(const celer_mlx_quant *q, const celer_mlx_quant_data *d, int64_t r)
{
    const int64_t groups = q->cols / q->group_size;
    const size_t  es     = scale_bytes(q);
    return (row_arrays){(uint8_t *)d->weight + (size_t)r * (size_t)(q->cols * q->bits / 8),
                        (uint8_t *)d->scales + (size_t)(r * groups) * es,
                        d->biases ? (uint8_t *)d->biases + (size_t)(r * groups) * es : NULL};
}

void celer_cpu_mlx_pack(const celer_mlx_quant *q, const celer_mlx_quant_data *d, int L, int64_t r0, int64_t n,
                        void *dst)
{
    CELER_ASSERT(L >= 1 && L <= 16 && n % L == 0);
    const int64_t nb  = q->cols / celer_cpu_mlx_block_elems(q);
    const size_t  bb1 = celer_cpu_mlx_block_bytes(q, 1), bbL = celer_cpu_mlx_block_bytes(q, L);
    uint8_t       one[MAX_ROW_BLOCK];
    CELER_ASSERT(bb1 <= sizeof one);
    uint8_t *out = dst;
    for (int64_t set = 0; set < n / L; set++)
        for (int lane = 0; lane < L; lane++) {
            row_arrays a = arrays_of(q, d, r0 + set * L + lane);
            for (int64_t cb = 0; cb < nb; cb++) {
                move_row_block(q, true, one, &a, cb);
                move_lane(q, true, out + (size_t)(set * nb + cb) * bbL, L, lane, one);
            }
        }
}

void celer_cpu_mlx_unpack_row(const celer_mlx_quant *q, bool r16, const void *packed, int64_t r, void *words,
                              void *scales, void *biases)
{
    const int64_t nb = q->cols / celer_cpu_mlx_block_elems(q), sets = r16 ? q->rows / 16 : 0;
    const int     L  = r < 16 * sets ? 16 : 1;
    const size_t  bbL = celer_cpu_mlx_block_bytes(q, L);
    const uint8_t *base = (const uint8_t *)packed +
                          (L == 16 ? (size_t)(r / 16 * nb) * bbL
                                   : (size_t)(16 * sets) * celer_cpu_mlx_row_bytes(q) +
                                         (size_t)(r - 16 * sets) * celer_cpu_mlx_row_bytes(q));
    int        lane = L == 16 ? (int)(r % 16) : 0;
    row_arrays a    = {words, scales, biases};
    uint8_t    one[MAX_ROW_BLOCK];
    memset(words, 0, (size_t)(q->cols * q->bits / 8));
    for (int64_t cb = 0; cb < nb; cb++) {
        move_lane(q, false, (uint8_t *)base + (size_t)cb * bbL, L, lane, one);
        move_row_block(q, false, one, &a, cb);
    }
}
