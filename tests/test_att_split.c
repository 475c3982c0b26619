/* Decode attention's split of the keys (backends/gpu/att_split.h) without a GPU: every key in
 * one split, the chunks the H200 measurements chose at the contexts measured, a split that
 * changes only as the context doubles (recorded decode steps stay replayable), the fixed
 * chunk of CELER_GPU_ATT_CHUNK, the cap on the grid, the query heads a block serves, and the
 * batches that take every key in one split. */
#include "backends/gpu/att_split.h"

#include "check.h"

enum { CAP = 32767 };

static int pow2(int32_t v) { return v > 0 && !(v & (v - 1)); }

/* splits · chunk covers keys 0 .. far; one split means chunk 0 */
static int covers(celer_att_split s, int32_t far)
{
    CHECK(s.splits >= 1 && s.splits <= CAP && pow2(s.splits));
    CHECK(s.splits == 1 ? s.chunk == 0 : (int64_t)s.splits * s.chunk > far);
    /* no more splits than needed: the first half of them all have keys */
    CHECK(s.splits == 1 || (int64_t)(s.splits / 2) * s.chunk <= far);
    return 0;
}

static int by_context(void)
{
    /* the measured cases (32 query heads, one token): tg128 from empty, tg128 after 4,096 */
    celer_att_split s = celer_att_split_for(127, 32, 0, CAP);
    CHECK(s.chunk == 16 && s.splits == 8);
    s = celer_att_split_for(4100, 32, 0, CAP);
    CHECK(s.chunk == 256 && s.splits == 32);
    /* short contexts and full steps are not split */
    CHECK(celer_att_split_for(0, 32, 0, CAP).splits == 1 && celer_att_split_for(15, 32, 0, CAP).splits == 1);
    CHECK(celer_att_split_for(5000, 1024, 0, CAP).splits == 1 && celer_att_split_for(5000, 32 * 40, 0, CAP).splits == 1);
    for (int64_t rows = 1; rows < 1100; rows += rows < 64 ? 7 : 97) {
        celer_att_split prev = {0, 0};
        int64_t         prev_span = 0;
        for (int32_t far = 0; far < 1 << 22; far = far < 4096 ? far + 1 : far * 5 / 4) {
            const celer_att_split s2 = celer_att_split_for(far, rows, 0, CAP);
            if (covers(s2, far)) return 1;
            CHECK(s2.splits == 1 || (pow2(s2.chunk) && s2.chunk >= ATT_CHUNK_MIN));
            CHECK(s2.splits == 1 || s2.chunk <= ATT_CHUNK_MAX || (int64_t)s2.splits * ATT_CHUNK_MAX > CAP);
            /* the same split for every far under the same power of two (span) */
            int64_t span = 1;
            while (span <= far) span *= 2;
            CHECK(span != prev_span || (s2.chunk == prev.chunk && s2.splits == prev.splits));
            prev = s2, prev_span = span;
        }
    }
    return 0;
}

static int fixed(void)
{
    celer_att_split s = celer_att_split_for(127, 32, 64, CAP);
    CHECK(s.chunk == 64 && s.splits == 2);
    s = celer_att_split_for(63, 32, 64, CAP);
    CHECK(s.splits == 1);
    for (int32_t far = 1; far < 1 << 24; far = far * 3 + 1) {
        if (covers(celer_att_split_for(far, 32, 16, CAP), far)) return 1;
        if (covers(celer_att_split_for(far, 32, 16, 8), far)) return 1; /* the cap: longer splits */
        if (covers(celer_att_split_for(far, 32, 0, 8), far)) return 1;
    }
    return 0;
}

/* heads a block: all of a group after a long context, one from an empty one, in between as the
 * blocks allow; never more than the group or the kernel's bound; the same within a power of two
 * of the context, and never fewer as it grows */
static int heads(void)
{
    CHECK(celer_att_heads_for(127, 1, 8, 4, 8) == 1);  /* the 8B's tg128 from empty */
    CHECK(celer_att_heads_for(4100, 1, 8, 4, 8) == 4); /* ... after 4,096 tokens */
    CHECK(celer_att_heads_for(511, 1, 8, 4, 8) == 2);  /* 8 × 2 blocks × 32 splits of 16 */
    CHECK(celer_att_heads_for(600, 512, 8, 4, 8) == 4); /* a prefill */
    CHECK(celer_att_heads_for(100000, 1, 4, 16, 8) == 8 && celer_att_heads_for(100000, 1, 1, 2, 2) == 2);
    CHECK(celer_att_heads_for(100000, 1, 8, 1, 8) == 1 && celer_att_heads_for(0, 1, 8, 4, 8) == 1);
    static const int64_t groups[] = {1, 2, 3, 4, 5, 6, 7, 8, 12, 16};
    for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++)
        for (int32_t gmax = 2; gmax <= 8; gmax *= 2)
            for (int64_t tokens = 1; tokens <= 64; tokens *= 4) {
                int32_t prev = 0;
                int64_t prev_span = 0;
                for (int32_t far = 0; far < 1 << 20; far = far < 2048 ? far + 1 : far * 3 / 2) {
                    const int32_t h = celer_att_heads_for(far, tokens, 8, groups[gi], gmax);
                    CHECK(h >= 1 && h <= gmax && h <= groups[gi] && h >= prev);
                    int64_t span = 1;
                    while (span <= far) span *= 2;
                    CHECK(span != prev_span || h == prev);
                    prev = h, prev_span = span;
                }
            }
    return 0;
}

/* wide blocks: a step the split rule would split, whose keys fit the passes its group allows
 * under the cap; the same answer within a power of two of the context, and none once it grows
 * past them */
static int wide(void)
{
    enum { P = ATT_WIDE_PASSES };
    /* the measured cases (heads of 128 values, 128 keys a pass): the 8B (32 query heads over
     * groups of 4) wide to 2,048 keys, the 0.6B (16 over groups of 2) to 1,024, the 30B-A3B (32
     * over groups of 8) to the cap's 2,048 */
    CHECK(celer_att_wide(0, 32, 4, 128, P) && celer_att_wide(127, 32, 4, 128, P));
    CHECK(celer_att_wide(1151, 32, 4, 128, P) && !celer_att_wide(2048, 32, 4, 128, P));
    CHECK(celer_att_wide(639, 16, 2, 128, P) && !celer_att_wide(1024, 16, 2, 128, P));
    CHECK(celer_att_wide(2047, 32, 8, 128, P) && !celer_att_wide(2048, 32, 8, 128, P));
    CHECK(!celer_att_wide(4100, 32, 4, 128, P));
    /* batches past ATT_WIDE_ROWS rows: one pass */
    CHECK(celer_att_wide(1151, ATT_WIDE_ROWS, 4, 128, P) && !celer_att_wide(128, ATT_WIDE_ROWS + 1, 4, 128, P));
    CHECK(celer_att_wide(127, 8 * 32, 4, 128, P));
    /* heads of 256 values: 64 keys a pass; a lower cap; none at cap 0 (CELER_GPU_ATT_WIDE=0) */
    CHECK(celer_att_wide(1023, 4, 4, 64, P) && !celer_att_wide(1024, 4, 4, 64, P));
    CHECK(celer_att_wide(127, 32, 4, 128, 1) && !celer_att_wide(128, 32, 4, 128, 1));
    CHECK(!celer_att_wide(0, 32, 4, 128, 0));
    /* full steps are not split, so not wide; nothing for no rows, no group or no position */
    CHECK(!celer_att_wide(10, ATT_SPLIT_BELOW, 4, 128, P) && celer_att_wide(10, ATT_SPLIT_BELOW - 1, 4, 128, P));
    CHECK(!celer_att_wide(10, 0, 4, 128, P) && !celer_att_wide(-1, 32, 4, 128, P) && !celer_att_wide(10, 32, 0, 128, P));
    for (int64_t group = 1; group <= 16; group *= 2)
        for (int32_t pass = 32; pass <= 128; pass *= 2) {
            const int64_t keys = pass * (group * ATT_WIDE_PASSES_A_HEAD < P ? group * ATT_WIDE_PASSES_A_HEAD : P);
            bool          prev = true;
            int64_t       prev_span = 0;
            for (int32_t far = 0; far < 8192; far++) {
                const bool w = celer_att_wide(far, 32, group, pass, P);
                int64_t    span = 1;
                while (span <= far) span *= 2;
                CHECK(w == (far < keys));
                CHECK(span != prev_span || w == prev);
                CHECK(w || !prev || far == keys); /* once off, off for good */
                prev = w, prev_span = span;
            }
        }
    return 0;
}

/* a wide step's split: chunks of at least a pass, no more blocks than multiprocessors, the same
 * within a power of two of the context */
static int wide_split(void)
{
    /* the H200's 132: the 8B's 32 heads after 1,024 tokens in 4 splits of 512, the 0.6B's 16 in 8 */
    celer_att_split s = celer_att_wide_split(1151, 32, 128, 132);
    CHECK(s.splits == 4 && s.chunk == 512);
    s = celer_att_wide_split(639, 16, 128, 132);
    CHECK(s.splits == 8 && s.chunk == 128);
    /* one pass of keys, or rows enough for the GPU: one split */
    CHECK(celer_att_wide_split(127, 32, 128, 132).splits == 1 && celer_att_wide_split(2047, 132, 128, 132).splits == 1);
    CHECK(celer_att_wide_split(2047, 1, 128, 1024).splits == ATT_WIDE_SPLITS_MAX);
    CHECK(celer_att_wide_split(10, 0, 128, 132).splits == 1 && celer_att_wide_split(-1, 32, 128, 132).splits == 1);
    for (int64_t rows = 1; rows <= 96; rows += 5)
        for (int32_t sms = 1; sms <= 264; sms = sms * 2 + 1) {
            celer_att_split prev = {0, 0};
            int64_t         prev_span = 0;
            for (int32_t far = 0; far < 8192; far++) {
                const celer_att_split w = celer_att_wide_split(far, rows, 64, sms);
                if (covers(w, far)) return 1;
                CHECK(w.splits <= ATT_WIDE_SPLITS_MAX && (w.splits == 1 || rows * w.splits <= sms));
                CHECK(w.splits == 1 || (pow2(w.chunk) && w.chunk >= 64));
                int64_t span = 1;
                while (span <= far) span *= 2;
                CHECK(span != prev_span || (w.chunk == prev.chunk && w.splits == prev.splits));
                prev = w, prev_span = span;
            }
        }
    return 0;
}

/* a batch's steps in one split: the measured batches (the 8B's 32 query heads; 16 and 32
 * sequences whole, 64 split, single decodes split), contexts to ATT_WHOLE_FAR, and a choice that
 * changes only as the context doubles */
static int whole(void)
{
    CHECK(celer_att_whole(2175, 16 * 32) && celer_att_whole(255, 32 * 32) && celer_att_whole(639, 32 * 32));
    CHECK(!celer_att_whole(255, 64 * 32) && !celer_att_whole(639, 64 * 32) && !celer_att_whole(4100, 32));
    CHECK(!celer_att_whole(255, 8 * 32) && !celer_att_whole(-1, 16 * 32));
    for (int64_t rows = 1; rows <= 4096; rows += 31) {
        bool    prev      = false;
        int64_t prev_span = 0;
        for (int32_t far = 0; far < 9000; far++) {
            const bool w    = celer_att_whole(far, rows);
            int64_t    span = 1;
            while (span <= far) span *= 2;
            CHECK(w == (rows >= ATT_WHOLE_FROM && rows <= ATT_WHOLE_TO && far < ATT_WHOLE_FAR));
            CHECK(span != prev_span || w == prev);
            prev = w, prev_span = span;
        }
    }
    return 0;
}

/* the matrix units' steps: those of ATT_WHOLE_FROM query rows and more below ATT_WHOLE_FAR keys,
 * heads of 64 and 128, groups that fit one row tile (1 to 16); a choice that changes only as the
 * context doubles */
static int mma(void)
{
    CHECK(celer_att_mma(255, 32 * 32, 128, 4) && celer_att_mma(255, 64 * 32, 128, 4) && celer_att_mma(0, 512, 64, 16));
    CHECK(!celer_att_mma(255, 8 * 32, 128, 4) && !celer_att_mma(4096, 32 * 32, 128, 4));
    CHECK(!celer_att_mma(255, 32 * 32, 80, 4) && !celer_att_mma(255, 32 * 32, 256, 4));
    CHECK(!celer_att_mma(255, 32 * 32, 128, 17) && !celer_att_mma(255, 32 * 32, 128, 0));
    for (int64_t rows = 1; rows <= 4096; rows += 31) {
        bool    prev      = false;
        int64_t prev_span = 0;
        for (int32_t far = 0; far < 9000; far++) {
            const bool m    = celer_att_mma(far, rows, 128, 4);
            int64_t    span = 1;
            while (span <= far) span *= 2;
            CHECK(m == (rows >= ATT_WHOLE_FROM && far < ATT_WHOLE_FAR));
            CHECK(span != prev_span || m == prev);
            prev = m, prev_span = span;
        }
    }
    return 0;
}

int main(void)
{
    if (by_context() || fixed() || heads() || wide() || wide_split() || whole() || mma()) return 1;
    printf("test_att_split: passed\n");
    return 0;
}
