/* What every tokenizer source shares once the vocabulary is read: the text → id and merge
 * tables, the added-token list, lifetime and accessors. */
#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "core/utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- text → id --------------------------------------------------------- */

static uint32_t hash_text(const char *s, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

celer_status tok_str_map_build(tok_str_map *m, const tok_entry *vocab, int32_t n, celer_error *err)
{
    free(m->slots);
    m->cap = 16;
    while (m->cap < 2u * (uint32_t)n) m->cap <<= 1;
    m->slots = calloc(m->cap, sizeof *m->slots);
    if (!m->slots) return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory for the vocabulary index");
    for (int32_t id = 0; id < n; id++) {
        uint32_t mask = m->cap - 1, h = hash_text(vocab[id].text, vocab[id].len) & mask;
        while (m->slots[h]) {
            const tok_entry *e = &vocab[m->slots[h] - 1];
            if (e->len == vocab[id].len && !memcmp(e->text, vocab[id].text, e->len)) break;
            h = (h + 1) & mask;
        }
        m->slots[h] = id + 1; /* a later token with the same text takes the slot */
    }
    return CELER_OK;
}

int32_t tok_str_map_get(const tok_str_map *m, const tok_entry *vocab, const char *s, size_t n)
{
    uint32_t mask = m->cap - 1, h = hash_text(s, n) & mask;
    while (m->slots[h]) {
        const tok_entry *e = &vocab[m->slots[h] - 1];
        if (e->len == n && !memcmp(e->text, s, n)) return m->slots[h] - 1;
        h = (h + 1) & mask;
    }
    return -1;
}

/* ---- merges ------------------------------------------------------------ */

static uint32_t hash_pair(uint64_t k)
{
    k ^= k >> 33, k *= 0xff51afd7ed558ccdull, k ^= k >> 33;
    return (uint32_t)k;
}

celer_status tok_merge_map_init(tok_merge_map *m, uint32_t n_merges, celer_error *err)
{
    m->cap = 16;
    while (m->cap < 2 * n_merges) m->cap <<= 1;
    m->slots = malloc(m->cap * sizeof *m->slots);
    if (!m->slots) return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory for merges");
    for (uint32_t i = 0; i < m->cap; i++) m->slots[i].key = UINT64_MAX;
    return CELER_OK;
}

void tok_merge_map_put(tok_merge_map *m, int32_t left, int32_t right, uint32_t rank, int32_t merged)
{
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    uint32_t h   = hash_pair(key) & (m->cap - 1);
    while (m->slots[h].key != UINT64_MAX && m->slots[h].key != key) h = (h + 1) & (m->cap - 1);
    m->slots[h] = (tok_merge_slot){key, rank, merged}; /* a repeated pair: the later one wins */
}

bool tok_merge_map_get(const tok_merge_map *m, int32_t left, int32_t right, uint32_t *rank, int32_t *merged)
{
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    uint32_t h   = hash_pair(key) & (m->cap - 1);
    for (;; h = (h + 1) & (m->cap - 1)) {
        const tok_merge_slot *s = &m->slots[h];
        if (s->key == key) {
            *rank = s->rank, *merged = s->merged;
            return true;
        }
        if (s->key == UINT64_MAX) return false;
    }
}

/* ---- added tokens and byte tokens -------------------------------------- */

static int cmp_added(const void *a, const void *b)
{
    const tok_added *x = a, *y = b;
    uint32_t         n = x->len < y->len ? x->len : y->len;
    int              c = memcmp(x->text, y->text, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

static bool spelled_in_byte_alphabet(const char *s, uint32_t n);

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The characters some token joins to a following ▁ ("a▁" inside a token), for meta_chunks. */
static celer_status find_glue(celer_tokenizer *t, celer_error *err)
{
    static const char META[] = "\xe2\x96\x81";
    if (tok_str_map_get(&t->ids, t->vocab, META, 3) < 0) return CELER_OK; /* no ▁ token: no chunks */
    uint32_t cap = 16;
    t->glue      = malloc(cap * sizeof *t->glue);
    if (!t->glue) return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory");
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const tok_entry *e = &t->vocab[id];
        for (uint32_t i = 1; i + 3 <= e->len; i++) {
            if (memcmp(e->text + i, META, 3)) continue;
            uint32_t start = i - 1, cp;
            while (start && ((uint8_t)e->text[start] & 0xC0) == 0x80) start--;
            celer_utf8_decode(e->text + start, i - start, &cp);
            if (cp == 0x2581) continue; /* a run of ▁ */
            if (t->n_glue == cap) {
                uint32_t *g = realloc(t->glue, (cap *= 2) * sizeof *g);
                if (!g) return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory");
                t->glue = g;
            }
            t->glue[t->n_glue++] = cp;
        }
    }
    qsort(t->glue, t->n_glue, sizeof *t->glue, cmp_u32);
    t->meta_chunks = true;
    return CELER_OK;
}

/* Control tokens become special added tokens, user-defined ones plain added tokens (both
 * matched whole before BPE), and so do the BOS/EOS/UNK/PAD tokens the metadata names. In a
 * byte-level vocabulary a control token spelled outside the byte alphabet is a converter's
 * mislabel and is left alone, as Hugging Face does. */
celer_status tok_finish(celer_tokenizer *t, celer_error *err)
{
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_ids[b] = t->byte_fallback ? tok_str_map_get(&t->ids, t->vocab, name, 6) : -1;
    }
    t->added = calloc((size_t)t->n_vocab, sizeof *t->added);
    if (!t->added) return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory");
    int32_t named[4] = {t->bos_id, t->eos_id, t->unk_id, t->pad_id};
    for (int32_t i = 0; i < t->n_vocab; i++) {
        const tok_entry *e       = &t->vocab[i];
        bool             special = e->type == TOKEN_CONTROL;
        for (int k = 0; k < 4; k++) special |= named[k] == i;
        if (special && t->model == TOK_MODEL_BYTE_LEVEL && !spelled_in_byte_alphabet(e->orig, e->orig_len))
            special = false;
        if (!special && e->type != TOKEN_USER_DEFINED) continue;
        if (!e->orig_len) continue;
        int32_t id = tok_str_map_get(&t->ids, t->vocab, e->orig, e->orig_len);
        if (id < 0) continue; /* not in the vocabulary under this spelling: Hugging Face skips it */
        t->added[t->n_added++] = (tok_added){.text = e->orig, .len = e->orig_len, .id = id, .special = special};
    }
    qsort(t->added, t->n_added, sizeof *t->added, cmp_added);
    /* one entry per text: the same content added twice is one added token */
    uint32_t w = 0;
    for (uint32_t i = 0; i < t->n_added; i++) {
        if (w && cmp_added(&t->added[w - 1], &t->added[i]) == 0) {
            t->added[w - 1].special |= t->added[i].special;
            continue;
        }
        t->added[w++] = t->added[i];
    }
    t->n_added = w;
    if (t->model == TOK_MODEL_SPM && find_glue(t, err)) return err->code;
    for (uint32_t i = 0; i < t->n_added; i++) {
        uint8_t c = (uint8_t)t->added[i].text[0];
        t->added_first[c >> 3] |= (uint8_t)(1u << (c & 7));
        if (t->added[i].len > t->added_max_len) t->added_max_len = t->added[i].len;
    }
    return CELER_OK;
}

static bool spelled_in_byte_alphabet(const char *s, uint32_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t   k = celer_utf8_decode(s + i, n - i, &cp);
        if (cp == CELER_UTF8_BAD || tok_cp_to_byte(cp) < 0) return false;
        i += k;
    }
    return true;
}

/* ---- lifetime and accessors -------------------------------------------- */

void celer_tokenizer_free(celer_tokenizer *t)
{
    if (!t) return;
    for (uint32_t i = 0; i < t->n_pre; i++) celer_regex_free(t->pre[i].re);
    free(t->vocab);
    free(t->pool);
    free(t->ids.slots);
    free(t->merges.slots);
    free(t->added);
    free(t->glue);
    free(t);
}

int32_t celer_tokenizer_n_vocab(const celer_tokenizer *t) { return t->n_vocab; }
int32_t celer_tokenizer_bos(const celer_tokenizer *t) { return t->bos_id; }
int32_t celer_tokenizer_eos(const celer_tokenizer *t) { return t->eos_id; }

bool celer_tokenizer_is_control(const celer_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && t->vocab[id].type == TOKEN_CONTROL;
}

const char *celer_tokenizer_piece(const celer_tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->n_vocab) return NULL;
    *len = t->vocab[id].len;
    return t->vocab[id].text;
}
