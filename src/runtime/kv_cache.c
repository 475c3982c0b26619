#include "runtime/kv_cache.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

celer_status celer_kv_cache_init(celer_kv_cache *kv, celer_backend *be, int32_t n_layers, int64_t n_kv_heads,
                                 int64_t head_dim_k, int64_t head_dim_v, int32_t n_seqs, int64_t n_ctx,
                                 int32_t n_blocks, celer_error *err)
{
    memset(kv, 0, sizeof *kv);
    kv->n_layers   = n_layers;
    kv->n_kv_heads = n_kv_heads, kv->head_dim_k = head_dim_k, kv->head_dim_v = head_dim_v;
    kv->block_size = CELER_KV_BLOCK;
    kv->n_blocks   = n_blocks;
    kv->n_seqs     = n_seqs;
    kv->max_blocks = (int32_t)((n_ctx + CELER_KV_BLOCK - 1) / CELER_KV_BLOCK);
    kv->k          = calloc((size_t)n_layers, sizeof *kv->k);
    kv->v          = calloc((size_t)n_layers, sizeof *kv->v);
    kv->tables     = malloc((size_t)n_seqs * (size_t)kv->max_blocks * sizeof *kv->tables);
    kv->seq_len    = calloc((size_t)n_seqs, sizeof *kv->seq_len);
    kv->free_blocks = malloc((size_t)n_blocks * sizeof *kv->free_blocks);
    if (!kv->k || !kv->v || !kv->tables || !kv->seq_len || !kv->free_blocks) {
        celer_kv_cache_free(kv, be);
        return celer_fail(err, CELER_ERR_OOM, "kv cache: out of memory for its tables");
    }
    memset(kv->tables, 0xff, (size_t)n_seqs * (size_t)kv->max_blocks * sizeof *kv->tables);
    for (int32_t i = 0; i < n_blocks; i++) kv->free_blocks[i] = n_blocks - 1 - i;
    kv->n_free = n_blocks;
    kv->elem_bytes = be->ops->kv_elem_bytes ? be->ops->kv_elem_bytes(be) : (int32_t)sizeof(float);
    size_t kb = (size_t)n_blocks * CELER_KV_BLOCK * (size_t)(n_kv_heads * head_dim_k) * (size_t)kv->elem_bytes;
    size_t vb = (size_t)n_blocks * CELER_KV_BLOCK * (size_t)(n_kv_heads * head_dim_v) * (size_t)kv->elem_bytes;
    for (int32_t l = 0; l < n_layers; l++)
        if (be->ops->alloc(be, kb, &kv->k[l], err) || be->ops->alloc(be, vb, &kv->v[l], err)) {
            celer_kv_cache_free(kv, be);
            return err->code;
        }
    return CELER_OK;
}

void celer_kv_cache_free(celer_kv_cache *kv, celer_backend *be)
{
    if (!kv) return;
    for (int32_t l = 0; l < kv->n_layers; l++) {
        if (kv->k && kv->k[l]) be->ops->release(be, kv->k[l]);
        if (kv->v && kv->v[l]) be->ops->release(be, kv->v[l]);
    }
    free(kv->k);
    free(kv->v);
    free(kv->tables);
    free(kv->seq_len);
    free(kv->free_blocks);
    memset(kv, 0, sizeof *kv);
}

celer_status celer_kv_cache_reserve(celer_kv_cache *kv, int32_t seq, int32_t end, celer_error *err)
{
    int32_t need = (end + kv->block_size - 1) / kv->block_size;
    if (need > kv->max_blocks)
        return celer_fail(err, CELER_ERR_INVALID, "kv cache: %d positions exceed the context of %d; raise --ctx", end,
                          kv->max_blocks * kv->block_size);
    int32_t *table = kv->tables + (int64_t)seq * kv->max_blocks;
    for (int32_t i = 0; i < need; i++) {
        if (table[i] >= 0) continue;
        if (!kv->n_free)
            return celer_fail(err, CELER_ERR_OOM, "kv cache: all %d blocks of %d positions are in use", kv->n_blocks,
                              kv->block_size);
        table[i] = kv->free_blocks[--kv->n_free];
    }
    return CELER_OK;
}

void celer_kv_cache_truncate(celer_kv_cache *kv, int32_t seq, int32_t len)
{
    int32_t *table = kv->tables + (int64_t)seq * kv->max_blocks;
    for (int32_t i = (len + kv->block_size - 1) / kv->block_size; i < kv->max_blocks; i++)
        if (table[i] >= 0) {
            kv->free_blocks[kv->n_free++] = table[i];
            table[i]                      = -1;
        }
    if (kv->seq_len[seq] > len) kv->seq_len[seq] = len;
}
