/* The r16 weight layout (repack.h): packing at load and reading one row back (embeddings).
 * Every type's group block is a list of parts, each made from the same bytes of the 16 rows'
 * stored blocks: per-row values side by side (scales), or 4-byte groups transposed into
 * vectors (codes). */
#include "backends/cpu/repack.h"

#include "backends/cpu/dot.h"
#include "quant/blocks.h"

#include <stddef.h>
#include <string.h>

bool celer_cpu_r16_supported(celer_ggml_type wtype)
{
    switch (wtype) {
    case CELER_GGML_Q4_0:
    case CELER_GGML_Q4_1:
    case CELER_GGML_Q5_0:
    case CELER_GGML_Q5_1:
    case CELER_GGML_Q8_0:
    case CELER_GGML_Q4_K:
    case CELER_GGML_Q6_K: return true;
    default: return false;
    }
}

/* Stored-block bytes of the codes the kernels dot, transposed into 64-byte vectors; Q8_0's
 * codes are made unsigned (+128) on the way. */
typedef struct {
    size_t at, n; /* byte offset and count (a multiple of 4) in the stored block */
} span;

/* The code spans of a type, in the order of the packed vectors; returns their count. */
static int code_spans(celer_ggml_type t, span s[2])
{
    switch (t) {
    case CELER_GGML_Q4_0: s[0] = (span){offsetof(celer_block_q4_0, qs), 16}; return 1;
    case CELER_GGML_Q4_1: s[0] = (span){offsetof(celer_block_q4_1, qs), 16}; return 1;
    case CELER_GGML_Q5_0: s[0] = (span){offsetof(celer_block_q5_0, qs), 16}; return 1;
    case CELER_GGML_Q5_1: s[0] = (span){offsetof(celer_block_q5_1, qs), 16}; return 1;
    case CELER_GGML_Q8_0: s[0] = (span){offsetof(celer_block_q8_0, qs), 32}; return 1;
    case CELER_GGML_Q4_K: s[0] = (span){offsetof(celer_block_q4_K, qs), 128}; return 1;
    default: /* Q6_K */
        s[0] = (span){offsetof(celer_block_q6_K, ql), 128};
        s[1] = (span){offsetof(celer_block_q6_K, qh), 64};
        return 2;
    }
}

/* Bytes of the per-row header that precedes the vectors (see repack.h). */
static size_t head_bytes(celer_ggml_type t)
{
    switch (t) {
    case CELER_GGML_Q4_1: return 2 * 32;
    case CELER_GGML_Q5_0: return 32 + 64;
    case CELER_GGML_Q5_1: return 2 * 32 + 64;
    case CELER_GGML_Q4_K: return 2 * 32 + 16 * 16;
    case CELER_GGML_Q6_K: return 32 + 16 * 16;
    default: return 32;
    }
}

size_t celer_cpu_r16_block_bytes(celer_ggml_type wtype)
{
    span   s[2];
    size_t n = head_bytes(wtype);
    for (int i = 0, c = code_spans(wtype, s); i < c; i++) n += 16 * s[i].n;
    return n;
}

static int64_t block_elems(celer_ggml_type t) { return celer_ggml_type_get(t)->block_elems; }

size_t celer_cpu_r16_size(celer_ggml_type wtype, int64_t rows, int64_t k)
{
    int64_t groups = rows / CELER_R16_ROWS, nb = k / block_elems(wtype);
    return (size_t)(groups * nb) * celer_cpu_r16_block_bytes(wtype) +
           (size_t)(rows - groups * CELER_R16_ROWS) * (size_t)nb * celer_ggml_type_get(wtype)->block_bytes;
}

/* Q4_K's 12 packed bytes of 6-bit scales and mins from the unpacked ones (the inverse of
 * celer_cpu_unpack_k_scales). */
static void pack_k_scales(const uint8_t sc[8], const uint8_t mn[8], uint8_t q[12])
{
    for (int j = 0; j < 4; j++) {
        q[j]     = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        q[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
        q[j + 8] = (uint8_t)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
    }
}

/* Q5's 32 fifth bits of one row (qh, bit e for element e) to and from its 4 bytes of the bit
 * plane, where byte i holds in bit q the bit of element 4q + i. */
static void move_qh(bool pack, uint8_t plane[4], uint8_t qh[4])
{
    uint32_t bits = 0;
    if (pack) {
        memcpy(&bits, qh, 4);
        for (int i = 0; i < 4; i++) {
            plane[i] = 0;
            for (int q = 0; q < 8; q++) plane[i] |= (uint8_t)(((bits >> (4 * q + i)) & 1) << q);
        }
    } else {
        for (int i = 0; i < 4; i++)
            for (int q = 0; q < 8; q++) bits |= (uint32_t)((plane[i] >> q) & 1) << (4 * q + i);
        memcpy(qh, &bits, 4);
    }
}

/* One stored block of lane `lane` into (pack) or out of (!pack) the group block g. */
static void move_block(celer_ggml_type t, bool pack, uint8_t *g, int lane, uint8_t *blk)
{
    const int L = CELER_R16_ROWS;
#define MOVE(dst, src, n) (pack ? memcpy(dst, src, n) : memcpy(src, dst, n))
    switch (t) {
    case CELER_GGML_Q5_0:
    case CELER_GGML_Q5_1: move_qh(pack, g + (t == CELER_GGML_Q5_1 ? 64 : 32) + 4 * lane,
                                  blk + (t == CELER_GGML_Q5_1 ? offsetof(celer_block_q5_1, qh) : offsetof(celer_block_q5_0, qh)));
        if (t == CELER_GGML_Q5_0) {
            MOVE(g + 2 * lane, blk, 2);
            break;
        }
        /* fall through - Q5_1's d and m as Q4_1's */
    case CELER_GGML_Q4_1:
        MOVE(g + 2 * (L + lane), blk + 2, 2);
        MOVE(g + 2 * lane, blk, 2);
        break;
    case CELER_GGML_Q4_0:
    case CELER_GGML_Q8_0: MOVE(g + 2 * lane, blk, 2); break;
    case CELER_GGML_Q4_K: {
        celer_block_q4_K *b = (celer_block_q4_K *)blk;
        MOVE(g + 2 * lane, &b->d, 2);
        MOVE(g + 2 * (L + lane), &b->dmin, 2);
        uint8_t sc[8], mn[8];
        if (pack) celer_cpu_unpack_k_scales(b->scales, sc, mn);
        for (int s = 0; s < 8; s++) {
            uint8_t *gs = g + 64 + L * s + lane, *gm = g + 64 + 128 + L * s + lane;
            if (pack) *gs = sc[s], *gm = mn[s];
            else sc[s] = *gs, mn[s] = *gm;
        }
        if (!pack) pack_k_scales(sc, mn, b->scales);
        break;
    }
    default: { /* Q6_K */
        celer_block_q6_K *b = (celer_block_q6_K *)blk;
        MOVE(g + 2 * lane, &b->d, 2);
        for (int s = 0; s < 16; s++) MOVE(g + 32 + L * s + lane, &b->scales[s], 1);
    }
    }
#undef MOVE
    span    sp[2];
    size_t  at   = head_bytes(t);
    uint8_t flip = t == CELER_GGML_Q8_0 ? 0x80 : 0;
    for (int i = 0, c = code_spans(t, sp); i < c; i++) {
        for (size_t q = 0; q < sp[i].n / 4; q++)
            for (int e = 0; e < 4; e++) {
                uint8_t *v = g + at + 64 * q + 4 * lane + e, *s = blk + sp[i].at + 4 * q + e;
                if (pack) *v = *s ^ flip;
                else *s = *v ^ flip;
            }
        at += 16 * sp[i].n;
    }
}

void celer_cpu_r16_pack(celer_ggml_type wtype, const void *src, int64_t rows, int64_t k, void *dst)
{
    size_t  bb = celer_ggml_type_get(wtype)->block_bytes, gbb = celer_cpu_r16_block_bytes(wtype);
    int64_t groups = rows / CELER_R16_ROWS, nb = k / block_elems(wtype);
    for (int64_t g = 0; g < groups; g++)
        for (int64_t b = 0; b < nb; b++)
            for (int lane = 0; lane < CELER_R16_ROWS; lane++)
                move_block(wtype, true, (uint8_t *)dst + (size_t)(g * nb + b) * gbb, lane,
                           (uint8_t *)src + (size_t)((g * CELER_R16_ROWS + lane) * nb + b) * bb);
    memcpy((char *)dst + (size_t)(groups * nb) * gbb, (const char *)src + (size_t)(groups * CELER_R16_ROWS * nb) * bb,
           (size_t)(rows - groups * CELER_R16_ROWS) * (size_t)nb * bb);
}

void celer_cpu_r16_row(celer_ggml_type wtype, const void *packed, int64_t rows, int64_t k, int64_t r, void *dst)
{
    size_t  bb = celer_ggml_type_get(wtype)->block_bytes, gbb = celer_cpu_r16_block_bytes(wtype);
    int64_t groups = rows / CELER_R16_ROWS, nb = k / block_elems(wtype);
    if (r >= groups * CELER_R16_ROWS) {
        memcpy(dst, (const char *)packed + (size_t)(groups * nb) * gbb + (size_t)((r - groups * CELER_R16_ROWS) * nb) * bb,
               (size_t)nb * bb);
        return;
    }
    for (int64_t b = 0; b < nb; b++)
        move_block(wtype, false, (uint8_t *)packed + (size_t)((r / CELER_R16_ROWS) * nb + b) * gbb,
                   (int)(r % CELER_R16_ROWS), (uint8_t *)dst + (size_t)b * bb);
}
