/* The paged KV cache's bookkeeping: pools sized once at init, blocks handed to sequences as
 * they grow and returned when they end. (The layout is in backends/backend.h.) */
#ifndef CELER_RUNTIME_KV_CACHE_H
#define CELER_RUNTIME_KV_CACHE_H

#include "backends/backend.h"

#define CELER_KV_BLOCK 16 /* positions per block */

/* Pools for n_blocks blocks per layer, and tables for n_seqs sequences of up to n_ctx positions. */
celer_status celer_kv_cache_init(celer_kv_cache *kv, celer_backend *be, int32_t n_layers, int64_t n_kv_heads,
                                 int64_t head_dim_k, int64_t head_dim_v, int32_t n_seqs, int64_t n_ctx,
                                 int32_t n_blocks, celer_error *err);
void         celer_kv_cache_free(celer_kv_cache *kv, celer_backend *be);

/* Gives seq the blocks for positions up to end (exclusive). CELER_ERR_OOM naming the numbers
 * when the pool is exhausted; CELER_ERR_INVALID past the context. */
celer_status celer_kv_cache_reserve(celer_kv_cache *kv, int32_t seq, int32_t end, celer_error *err);
/* Keeps the first len positions of seq and returns the blocks past them. */
void         celer_kv_cache_truncate(celer_kv_cache *kv, int32_t seq, int32_t len);

#endif
