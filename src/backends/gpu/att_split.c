#include "backends/gpu/att_split.h"

celer_att_split celer_att_split_for(int32_t far, int64_t rows, int32_t fixed_chunk, int32_t max_splits)
{
    const celer_att_split one = {0, 1};
    if (far <= 0 || rows <= 0 || rows >= ATT_SPLIT_BELOW || max_splits < 2) return one;
    int64_t splits = 1, chunk;
    if (fixed_chunk > 0) {
        chunk = fixed_chunk;
        while (splits * chunk <= far && splits * 2 <= max_splits) splits *= 2;
        if (splits * chunk <= far) chunk = ((int64_t)far + splits) / splits; /* at the cap: longer splits */
    } else {
        int64_t span = 1; /* the power of two above far: keys 0 .. span - 1 */
        while (span <= far) span *= 2;
        chunk = ATT_CHUNK_MIN; /* the shortest power-of-two chunk that keeps the blocks near the aim */
        while (chunk < ATT_CHUNK_MAX && (span / chunk) * rows > ATT_SPLIT_BLOCKS) chunk *= 2;
        if (chunk > span) chunk = span;
        splits = span / chunk;
        while (splits > max_splits) splits /= 2, chunk *= 2;
    }
    if (splits == 1) return one;
    return (celer_att_split){(int32_t)chunk, (int32_t)splits};
}

bool celer_att_whole(int32_t far, int64_t qrows)
{
    return far >= 0 && far < ATT_WHOLE_FAR && qrows >= ATT_WHOLE_FROM && qrows <= ATT_WHOLE_TO;
}

bool celer_att_mma(int32_t far, int64_t qrows, int64_t hd, int64_t group)
{
    return far >= 0 && far < ATT_WHOLE_FAR && qrows >= ATT_WHOLE_FROM && (hd == 64 || hd == 128) && group >= 1 &&
           group <= 16;
}

int32_t celer_att_heads_for(int32_t far, int64_t tokens, int64_t kv_heads, int64_t group, int32_t gmax)
{
    int64_t span = 1;
    while (span <= far) span *= 2;
    const int64_t splits = span > ATT_CHUNK_MIN ? span / ATT_CHUNK_MIN : 1;
    int64_t       h      = group < gmax ? group : gmax;
    while (h > 1 && tokens * kv_heads * ((group + h - 1) / h) * splits < ATT_SPLIT_BLOCKS) h = (h + 1) / 2;
    return h > 1 ? (int32_t)h : 1;
}

bool celer_att_wide(int32_t far, int64_t rows, int64_t group, int32_t pass, int32_t cap)
{
    int64_t span = 1;
    while (span <= far) span *= 2;
    const int64_t by_group = rows > ATT_WIDE_ROWS ? 1 : group * ATT_WIDE_PASSES_A_HEAD;
    const int64_t passes   = by_group < cap ? by_group : cap;
    return rows > 0 && rows < ATT_SPLIT_BELOW && far >= 0 && group > 0 && span <= passes * pass;
}

celer_att_split celer_att_wide_split(int32_t far, int64_t rows, int32_t pass, int32_t sms)
{
    int64_t span = 1;
    while (span <= far) span *= 2;
    int64_t splits = 1;
    while (rows * splits * 2 <= sms && span / (splits * 2) >= pass && splits * 2 <= ATT_WIDE_SPLITS_MAX) splits *= 2;
    if (splits == 1 || rows <= 0 || far < 0 || pass <= 0) return (celer_att_split){0, 1};
    return (celer_att_split){(int32_t)(span / splits), (int32_t)splits};
}
