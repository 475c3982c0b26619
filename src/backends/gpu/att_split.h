/* How decode attention splits a step's keys over blocks (gpu_attention.cu): one block per
 * (token, query heads of one key head, split), split z taking keys [z · chunk, (z + 1) · chunk).
 * Plain C, no GPU headers: tested on any host (tests/test_att_split.c).
 *
 * A block's warps walk their split's keys a few at a time, so a short context in one split
 * leaves most of the GPU idle and every key a wait, and many short splits pay for their blocks
 * and the merge. Measured on the H200 (8B, 32 query heads, tg128; docs/benchmarks/gpu-h200.md,
 * seventh pass): from an empty context 16-key splits were fastest (447 tok/s against 391 with 256),
 * after 4,096 tokens 256-key splits (214 against 115 with 16). The rule below aims at about
 * ATT_SPLIT_BLOCKS blocks, in power-of-two chunks of 16 to 256 keys. */
#ifndef CELER_BACKENDS_GPU_ATT_SPLIT_H
#define CELER_BACKENDS_GPU_ATT_SPLIT_H

#include <stdbool.h>
#include <stdint.h>

/* ATT_SPLIT_BELOW: steps of this many rows (tokens × blocks of heads) or more fill the GPU unsplit */
enum { ATT_SPLIT_BELOW = 1024, ATT_SPLIT_BLOCKS = 512, ATT_CHUNK_MIN = 16, ATT_CHUNK_MAX = 256 };

typedef struct {
    int32_t chunk;  /* keys a split (0: one split, all of them) */
    int32_t splits; /* 1 or a power of two; splits · chunk > far */
} celer_att_split;

/* The split of a step whose furthest position is far (its keys 0 .. far) over rows rows (tokens
 * × blocks of heads, celer_att_heads_for), at most max_splits splits. fixed_chunk > 0 (CELER_GPU_ATT_CHUNK, for
 * comparisons) keeps that chunk and takes as many splits as it needs. Otherwise the chunk and
 * the split count depend on far only through the power of two above it, so a recorded decode
 * step's grid and arguments change only as the context doubles. */
celer_att_split celer_att_split_for(int32_t far, int64_t rows, int32_t fixed_chunk, int32_t max_splits);

/* ATT_WHOLE_FROM .. ATT_WHOLE_TO: steps of this many query rows (tokens × query heads) whose
 * furthest position is below ATT_WHOLE_FAR walk their keys in one split (celer_att_whole). */
enum { ATT_WHOLE_FROM = 512, ATT_WHOLE_TO = 1024, ATT_WHOLE_FAR = 4096 };

/* Whether a step of qrows query rows whose furthest position is far takes every key in one split
 * whatever celer_att_split_for says: a batch of sequences has blocks enough, and the split's
 * merge and its shorter walks cost more than they spread. Measured on the H100 (the 8B, 32 query
 * heads, N sequences of P + 128 tokens decoding together; docs/benchmarks/gpu-h200.md,
 * forty-ninth and fiftieth passes): 16 sequences (512 rows) ran 0.4% / 5.4% / 3.3% faster in one
 * split after 128 / 512 / 2,048 tokens, 32 (1,024) 2.3% / 3.4% / 1.4%, but 64 (2,048) 0.1% / 3.1%
 * slower after 128 / 512. Contexts past ATT_WHOLE_FAR keep the split (unmeasured); like the
 * split, depends on far only through the power of two above it. */
bool celer_att_whole(int32_t far, int64_t qrows);

/* Whether a step of qrows query rows whose furthest position is far, with heads of hd values and
 * group query heads a key head, takes decode attention on the matrix units (gpu_att_mma.cu, but
 * with CELER_GPU_ATT_MMA=0: one block a token and key head, every key in one split): steps of
 * ATT_WHOLE_FROM rows or more below ATT_WHOLE_FAR keys (a batch of sequences: blocks enough
 * without a split; celer_att_whole's steps, and the larger batches the rule above splits), heads
 * of 64 or 128 values, groups of 1 to 16 (one mma row tile). Like the others, depends on far
 * only through the power of two above it. */
bool celer_att_mma(int32_t far, int64_t qrows, int64_t hd, int64_t group);

/* How many of a key head's group query heads one block serves (1 .. min(gmax, group)), for a
 * step of tokens tokens over kv_heads key heads whose furthest position is far. A block that
 * serves several reads each key once for all of them (the memory a long context asks for), one
 * that serves one makes more blocks (the latency a short context is bound by): the most heads
 * that still leave ATT_SPLIT_BLOCKS blocks in splits of ATT_CHUNK_MIN keys. Measured on the H200
 * (8B, 8 key heads of 4 query heads, tg128): all four in a block ran 36% faster than one after
 * 4,096 tokens, 3% slower from an empty context. Like the split, it depends on far only through
 * the power of two above it. */
int32_t celer_att_heads_for(int32_t far, int64_t tokens, int64_t kv_heads, int64_t group, int32_t gmax);

/* ATT_WIDE_PASSES: the most passes a wide block takes by default (CELER_GPU_ATT_WIDE sets it);
 * ATT_WIDE_PASSES_A_HEAD: the passes a key head's query head allows under that cap;
 * ATT_WIDE_ROWS: steps of more rows take one pass (below); ATT_WIDE_SPLITS_MAX: the most splits
 * of a wide step (celer_att_wide_split) */
enum { ATT_WIDE_PASSES = 16, ATT_WIDE_PASSES_A_HEAD = 4, ATT_WIDE_ROWS = 64, ATT_WIDE_SPLITS_MAX = 16 };

/* Whether a step of rows rows (tokens × query heads) whose furthest position is far runs in wide
 * blocks, one a (token, query head), unsplit: when the keys 0 .. far fit the passes such a block
 * takes (pass: the keys its warps load at once; passes: ATT_WIDE_PASSES_A_HEAD a query head of
 * the key head's group, at most cap) and the step is one the rule above would split. A split
 * step's last block to finish merges the splits (a fence, a ticket and two more reads of the
 * partial results, each a round trip to the L2 after the keys' own), and a block of several
 * heads walks its keys for all of them: a cost the wide blocks do not pay, at the price of one
 * block walking every key. Measured on the H200 (tg128 after 512, 1,024, 2,048 and 4,096 tokens;
 * heads of 128 values, 128 keys a pass; docs/benchmarks/gpu-h200.md, twenty-second pass): wide
 * blocks over 1,024 keys beat the split by 16-24% on groups of 2, 4 and 8 query heads; over
 * 2,048 keys by 10% (group of 4) and 43% (group of 8) but lost 8% on the group of 2; over 4,096
 * and 8,192 keys they lost on every model measured. Those were steps of one token (16 and 32
 * rows); a step of more than ATT_WIDE_ROWS rows, a batch of sequences each with its own keys,
 * would read every key head's keys once a query head where the split reads them once, so it
 * keeps the one pass measured before (128 keys) until batches are measured. Depends on far only
 * through the power of two above it, as the split does. */
bool celer_att_wide(int32_t far, int64_t rows, int64_t group, int32_t pass, int32_t cap);

/* The split of a wide step (celer_att_wide): one wide block a row leaves all but rows of the
 * GPU's sms multiprocessors idle (a 512-thread block fills one), so the keys 0 .. far split in
 * power-of-two chunks of at least one pass (pass keys) until the blocks would outnumber sms.
 * Like the others, depends on far only through the power of two above it. */
celer_att_split celer_att_wide_split(int32_t far, int64_t rows, int32_t pass, int32_t sms);

#endif
