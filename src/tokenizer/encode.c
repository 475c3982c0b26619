/* Text → ids: added tokens are matched in the raw text first (leftmost, longest); the text
 * between them is normalized, split by the pre-tokenizer steps in order, respelled into the
 * vocabulary's alphabet and handed to BPE piece by piece. */
#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

#include <stdlib.h>
#include <string.h>

static const char META[] = "\xe2\x96\x81"; /* ▁ U+2581 */

typedef struct {
    const celer_tokenizer *t;
    tok_scratch           *sc;
    tok_ids               *out;
    celer_error           *err;
    bool                   at_start; /* the segment begins at offset 0 of the input */
} encoder;

static celer_status reserve(encoder *e, int which, size_t need)
{
    tok_scratch *sc = e->sc;
    if (need <= sc->buf_cap[which]) return CELER_OK;
    size_t cap = sc->buf_cap[which] ? sc->buf_cap[which] : 256;
    while (cap < need) cap *= 2;
    char *p = realloc(sc->buf[which], cap);
    if (!p) return celer_fail(e->err, CELER_ERR_OOM, "tokenizer: out of memory for %zu bytes", need);
    sc->buf[which] = p, sc->buf_cap[which] = cap;
    return CELER_OK;
}

/* ---- pre-tokenizer steps ------------------------------------------------ */

static celer_status pre_step(encoder *e, uint32_t step, const char *s, size_t n);

static celer_status next_step(encoder *e, uint32_t step, const char *s, size_t n)
{
    if (!n) return CELER_OK;
    return step + 1 < e->t->n_pre ? pre_step(e, step + 1, s, n) : tok_bpe_text(e->t, s, n, e->out, e->sc, e->err);
}

/* Split(regex, Isolated): each match, and each gap between matches, is a piece. An empty
 * match splits the gap before it and the search goes on one character later. */
static celer_status split_isolated(encoder *e, uint32_t step, const celer_regex *re, const char *s, size_t n,
                                   celer_status (*then)(encoder *, uint32_t, const char *, size_t))
{
    size_t at = 0, from = 0; /* start of the pending gap; where to search next */
    while (from < n) {
        size_t mb, me;
        int    r = celer_regex_find(re, s, n, from, &mb, &me, &e->sc->re);
        if (r < 0) return celer_fail(e->err, CELER_ERR_OOM, "tokenizer: out of memory splitting text");
        if (r == 0) break;
        if (mb > at && then(e, step, s + at, mb - at)) return e->err->code;
        if (me > mb && then(e, step, s + mb, me - mb)) return e->err->code;
        at = me;
        if (me > mb) {
            from = me;
        } else {
            uint32_t cp;
            from = mb + (mb < n ? celer_utf8_decode(s + mb, n - mb, &cp) : 1);
        }
    }
    return at < n ? then(e, step, s + at, n - at) : CELER_OK;
}

/* Bytes → the GPT-2 alphabet, then on to BPE. */
static celer_status byte_level_map(encoder *e, uint32_t step, const char *s, size_t n)
{
    if (reserve(e, 1, 2 * n)) return e->err->code;
    char  *o = e->sc->buf[1];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += celer_utf8_encode(tok_byte_to_cp((uint8_t)s[i]), o + k);
    return next_step(e, step, o, k);
}

static bool is_numeric(uint32_t cp) { return celer_unicode_is(cp, CELER_UCLASS_N); }

static celer_status pre_step(encoder *e, uint32_t step, const char *s, size_t n)
{
    const tok_pre *p = &e->t->pre[step];
    switch (p->kind) {
    case PRE_DIGITS_INDIVIDUAL: {
        size_t run = 0; /* start of the current non-numeric run */
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            size_t   k = celer_utf8_decode(s + i, n - i, &cp);
            if (is_numeric(cp)) {
                if (i > run && next_step(e, step, s + run, i - run)) return e->err->code;
                if (next_step(e, step, s + i, k)) return e->err->code;
                run = i + k;
            }
            i += k;
        }
        return next_step(e, step, s + run, n - run);
    }
    case PRE_SPLIT_ISOLATED: return split_isolated(e, step, p->re, s, n, next_step);
    case PRE_BYTE_LEVEL:
        if (p->re) return split_isolated(e, step, p->re, s, n, byte_level_map);
        return byte_level_map(e, step, s, n);
    case PRE_METASPACE_FIRST: {
        if (reserve(e, 1, 3 * n + 3)) return e->err->code;
        char  *o = e->sc->buf[1];
        size_t k = 0;
        bool   lead_space = n && s[0] == ' ';
        bool   has_meta   = n >= 3 && !memcmp(s, META, 3);
        if (e->at_start && !lead_space && !has_meta) memcpy(o, META, 3), k = 3;
        for (size_t i = 0; i < n; i++) {
            if (s[i] == ' ')
                memcpy(o + k, META, 3), k += 3;
            else
                o[k++] = s[i];
        }
        return next_step(e, step, o, k);
    }
    }
    return CELER_OK;
}

/* ---- normalizers --------------------------------------------------------- */

static celer_status encode_segment(encoder *e, const char *s, size_t n)
{
    if (!n) return CELER_OK;
    const celer_tokenizer *t   = e->t;
    char                  *nfc = NULL;
    for (uint32_t i = 0; i < t->n_norm; i++) {
        switch (t->norm[i]) {
        case NORM_NFC: {
            size_t m;
            free(nfc);
            if (celer_unicode_nfc(s, n, &nfc, &m, e->err)) return e->err->code;
            s = nfc, n = m;
            break;
        }
        case NORM_SPACE_TO_META:
        case NORM_PREPEND_META: {
            bool   prepend = t->norm[i] == NORM_PREPEND_META;
            char  *o       = malloc(3 * n + 4);
            size_t k       = 0;
            if (!o) {
                free(nfc);
                return celer_fail(e->err, CELER_ERR_OOM, "tokenizer: out of memory");
            }
            if (prepend) memcpy(o, META, 3), k = 3;
            for (size_t j = 0; j < n; j++) {
                if (!prepend && s[j] == ' ')
                    memcpy(o + k, META, 3), k += 3;
                else
                    o[k++] = s[j];
            }
            free(nfc);
            nfc = o, s = o, n = k;
            break;
        }
        }
    }
    celer_status st = t->n_pre ? pre_step(e, 0, s, n) : tok_bpe_text(t, s, n, e->out, e->sc, e->err);
    free(nfc);
    return st;
}

/* ---- added tokens -------------------------------------------------------- */

/* The longest allowed added token at s[0, n), or NULL. Narrows the sorted list one byte of
 * prefix at a time. */
static const tok_added *match_added(const celer_tokenizer *t, const char *s, size_t n, bool special_ok)
{
    const tok_added *best = NULL;
    size_t           lo = 0, hi = t->n_added;
    for (size_t L = 1; L <= n && L <= t->added_max_len && lo < hi; L++) {
        uint8_t c = (uint8_t)s[L - 1];
        /* entries in [lo, hi) share s[0, L-1); keep those whose byte L-1 is c */
        size_t a = lo, b = hi;
        while (a < b) {
            size_t m = (a + b) / 2;
            if (t->added[m].len < L || (uint8_t)t->added[m].text[L - 1] < c) a = m + 1; else b = m;
        }
        lo = a, b = hi;
        while (a < b) {
            size_t m = (a + b) / 2;
            if ((uint8_t)t->added[m].text[L - 1] <= c) a = m + 1; else b = m;
        }
        hi = a;
        if (lo < hi && t->added[lo].len == L && (special_ok || !t->added[lo].special)) best = &t->added[lo];
    }
    return best;
}

celer_status celer_tokenizer_encode(const celer_tokenizer *t, const char *text, size_t n, celer_encode_opts opts,
                                    int32_t **ids, size_t *n_ids, celer_error *err)
{
    celer_error local;
    if (!err) err = &local;
    *ids = NULL, *n_ids = 0;
    size_t bad = celer_utf8_validate(text, n);
    if (bad < n)
        return celer_fail(err, CELER_ERR_INVALID, "tokenizer: the text is not valid UTF-8 at byte %zu", bad);
    tok_ids     out = {0};
    tok_scratch sc  = {0};
    encoder     e   = {.t = t, .sc = &sc, .out = &out, .err = err};
    celer_status st = CELER_OK;
    if (opts.add_special && t->add_bos && t->bos_id >= 0) st = tok_ids_push(&out, t->bos_id, err);
    size_t seg = 0;
    for (size_t i = 0; i < n && !st;) {
        uint8_t          c = (uint8_t)text[i];
        const tok_added *a = NULL;
        if ((t->added_first[c >> 3] >> (c & 7)) & 1) a = match_added(t, text + i, n - i, opts.parse_special);
        if (!a) {
            i++;
            continue;
        }
        e.at_start = seg == 0;
        st         = encode_segment(&e, text + seg, i - seg);
        if (!st) st = tok_ids_push(&out, a->id, err);
        i += a->len, seg = i;
    }
    e.at_start = seg == 0;
    if (!st) st = encode_segment(&e, text + seg, n - seg);
    if (!st && opts.add_special && t->add_eos && t->eos_id >= 0) st = tok_ids_push(&out, t->eos_id, err);
    tok_scratch_free(&sc);
    if (st) {
        free(out.ids);
        return st;
    }
    *ids = out.ids, *n_ids = out.n;
    return CELER_OK;
}
