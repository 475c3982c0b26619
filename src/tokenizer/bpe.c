/* Byte-pair encoding of one pre-tokenized piece, as Hugging Face `tokenizers` does it: start
 * from one symbol per character (or its byte tokens, or the unknown token), then repeatedly
 * apply the best-ranked merge among adjacent pairs — lowest rank first, leftmost on ties —
 * with a binary heap of candidate merges that are re-checked when popped. */
#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

#include <stdlib.h>
#include <string.h>

celer_status tok_ids_push(tok_ids *v, int32_t id, celer_error *err)
{
    if (v->n == v->cap) {
        size_t   cap = v->cap ? v->cap * 2 : 64;
        int32_t *p   = realloc(v->ids, cap * sizeof *p);
        if (!p) return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory for %zu ids", cap);
        v->ids = p, v->cap = cap;
    }
    v->ids[v->n++] = id;
    return CELER_OK;
}

void tok_scratch_free(tok_scratch *s)
{
    free(s->cache);
    free(s->sym);
    free(s->heap);
    celer_regex_stack_free(&s->re);
    free(s->buf[0]);
    free(s->buf[1]);
    memset(s, 0, sizeof *s);
}

static bool merge_before(const tok_merge *a, const tok_merge *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(tok_merge *h, size_t *n, tok_merge m)
{
    size_t i = (*n)++;
    while (i && merge_before(&m, &h[(i - 1) / 2])) h[i] = h[(i - 1) / 2], i = (i - 1) / 2;
    h[i] = m;
}

static tok_merge heap_pop(tok_merge *h, size_t *n)
{
    tok_merge top = h[0], last = h[--(*n)];
    size_t    i   = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && merge_before(&h[c + 1], &h[c])) c++;
        if (!merge_before(&h[c], &last)) break;
        h[i] = h[c], i = c;
    }
    if (*n) h[i] = last;
    return top;
}

/* The merge of symbols at pos and its successor into the heap, when there is one. */
static void push_pair(const celer_tokenizer *t, const tok_symbol *sym, int32_t pos, tok_merge *heap, size_t *n)
{
    if (pos < 0 || sym[pos].next < 0) return;
    uint32_t rank;
    int32_t  merged;
    if (tok_merge_map_get(&t->merges, sym[pos].id, sym[sym[pos].next].id, &rank, &merged))
        heap_push(heap, n, (tok_merge){.rank = rank, .pos = (uint32_t)pos, .merged = merged});
}

static celer_status grow(void **p, size_t *cap, size_t need, size_t elem, celer_error *err)
{
    if (need <= *cap) return CELER_OK;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory for a %zu-symbol word", need);
    *p = q, *cap = c;
    return CELER_OK;
}

static celer_status bpe_word(const celer_tokenizer *t, const char *s, size_t n, tok_ids *out, tok_scratch *sc,
                             celer_error *err)
{
    if (t->ignore_merges) {
        int32_t id = tok_str_map_get(&t->ids, t->vocab, s, n);
        if (id >= 0) return tok_ids_push(out, id, err);
    }
    /* at most one symbol per byte (byte fallback spells a character by its bytes); every merge
     * pushes at most two candidates, so the heap never holds more than 3 per symbol */
    if (grow((void **)&sc->sym, &sc->sym_cap, n, sizeof *sc->sym, err) ||
        grow((void **)&sc->heap, &sc->heap_cap, 3 * n + 1, sizeof *sc->heap, err))
        return err->code;
    tok_symbol *sym  = sc->sym;
    int32_t     nsym = 0;
    bool        last_unk = false;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t   k  = celer_utf8_decode(s + i, n - i, &cp);
        int32_t  id = tok_str_map_get(&t->ids, t->vocab, s + i, k);
        if (id >= 0) {
            sym[nsym++] = (tok_symbol){.id = id};
            last_unk    = false;
        } else {
            bool bytes = t->byte_fallback;
            for (size_t b = 0; b < k && bytes; b++) bytes = t->byte_ids[(uint8_t)s[i + b]] >= 0;
            if (bytes) {
                for (size_t b = 0; b < k; b++) sym[nsym++] = (tok_symbol){.id = t->byte_ids[(uint8_t)s[i + b]]};
                last_unk = false;
            } else if (t->bpe_unk >= 0) {
                if (!(t->fuse_unk && last_unk)) sym[nsym++] = (tok_symbol){.id = t->bpe_unk};
                last_unk = true;
            } /* no unknown token: the character is dropped */
        }
        i += k;
    }
    for (int32_t i = 0; i < nsym; i++) sym[i].prev = i - 1, sym[i].next = i + 1 < nsym ? i + 1 : -1;
    tok_merge *heap = sc->heap;
    size_t     nh   = 0;
    for (int32_t i = 0; i + 1 < nsym; i++) push_pair(t, sym, i, heap, &nh);
    while (nh) {
        tok_merge m = heap_pop(heap, &nh);
        tok_symbol *a = &sym[m.pos];
        if (a->id < 0 || a->next < 0) continue; /* merged away, or now last */
        uint32_t rank;
        int32_t  merged;
        if (!tok_merge_map_get(&t->merges, a->id, sym[a->next].id, &rank, &merged) || merged != m.merged) continue;
        tok_symbol *b = &sym[a->next];
        a->id         = merged;
        a->next       = b->next;
        b->id         = -1;
        if (a->next >= 0) sym[a->next].prev = (int32_t)m.pos;
        if (nh + 2 > sc->heap_cap) return celer_fail(err, CELER_ERR_OOM, "tokenizer: merge heap overflow");
        push_pair(t, sym, a->prev, heap, &nh);
        push_pair(t, sym, (int32_t)m.pos, heap, &nh);
    }
    for (int32_t i = 0; i >= 0 && i < nsym; i = sym[i].next)
        if (tok_ids_push(out, sym[i].id, err)) return err->code;
    return CELER_OK;
}

static uint32_t hash_piece(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h ^ h >> 15;
}

celer_status tok_bpe_piece(const celer_tokenizer *t, const char *s, size_t n, tok_ids *out, tok_scratch *sc,
                           celer_error *err)
{
    if (!n) return CELER_OK;
    /* the cache pays off only on long inputs: make it after the first few hundred pieces */
    if (!sc->cache && ++sc->n_pieces == 256) sc->cache = calloc(TOK_CACHE_SLOTS, sizeof *sc->cache);
    if (!sc->cache || n > TOK_CACHE_KEY) return bpe_word(t, s, n, out, sc, err);
    tok_cache_slot *c = &sc->cache[hash_piece(s, n) & (TOK_CACHE_SLOTS - 1)];
    if (c->len == n && !memcmp(c->key, s, n)) {
        for (uint8_t i = 0; i < c->n_ids; i++)
            if (tok_ids_push(out, c->ids[i], err)) return err->code;
        return CELER_OK;
    }
    size_t first = out->n;
    if (bpe_word(t, s, n, out, sc, err)) return err->code;
    if (out->n - first <= TOK_CACHE_IDS) {
        c->len = (uint8_t)n, c->n_ids = (uint8_t)(out->n - first);
        memcpy(c->key, s, n);
        memcpy(c->ids, out->ids + first, c->n_ids * sizeof *c->ids);
    }
    return CELER_OK;
}

static bool is_glue(const celer_tokenizer *t, uint32_t cp)
{
    size_t lo = 0, hi = t->n_glue;
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (t->glue[m] < cp) lo = m + 1; else hi = m;
    }
    return lo < t->n_glue && t->glue[lo] == cp;
}

celer_status tok_bpe_text(const celer_tokenizer *t, const char *s, size_t n, tok_ids *out, tok_scratch *sc,
                          celer_error *err)
{
    if (!t->meta_chunks) return tok_bpe_piece(t, s, n, out, sc, err);
    size_t   start = 0;
    uint32_t prev  = 0x2581;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t   k = celer_utf8_decode(s + i, n - i, &cp);
        if (cp == 0x2581 && prev != 0x2581 && i > start && !is_glue(t, prev)) {
            if (tok_bpe_piece(t, s + start, i - start, out, sc, err)) return err->code;
            start = i;
        }
        prev = cp;
        i += k;
    }
    return tok_bpe_piece(t, s + start, n - start, out, sc, err);
}
