/* Ids → text, whole or streamed. Byte-level vocabularies map their alphabet back to bytes; the
 * result is made valid UTF-8 by replacing each ill-formed subsequence with U+FFFD.
 * SentencePiece vocabularies turn ▁ into a space and <0xXX> tokens into bytes; a run of byte
 * tokens that is not valid UTF-8 as a whole becomes one U+FFFD per byte (what Hugging Face's
 * ByteFallback decoder does), and a Metaspace-prefixed vocabulary drops the leading space. */
#include "core/bytes.h"
#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

#include <stdlib.h>
#include <string.h>

/* A text being built; oom: an append failed, and every append since did nothing (one check at
 * the end covers them all). */
typedef struct {
    celer_bytes s;
    bool        oom;
} buf;

static void put(buf *b, const void *s, size_t n)
{
    if (!b->oom && !celer_bytes_put(&b->s, s, n)) b->oom = true;
}

static const char FFFD[] = "\xef\xbf\xbd";

/* Appends s[0, n) with each ill-formed subsequence replaced by U+FFFD. */
static void put_lossy(buf *b, const char *s, size_t n)
{
    size_t run = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t   k = celer_utf8_decode(s + i, n - i, &cp);
        if (cp == CELER_UTF8_BAD) {
            put(b, s + run, i - run);
            put(b, FFFD, 3);
            run = i + k;
        }
        i += k;
    }
    put(b, s + run, n - run);
}

/* A SentencePiece byte token "<0xXX>": its byte, or -1. */
static int spm_byte(const tok_entry *e)
{
    if (e->len != 6 || memcmp(e->text, "<0x", 3) || e->text[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = e->text[i];
        int  d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The bytes of one token as its decoder spells them, appended to b. */
static void put_token(const celer_tokenizer *t, const tok_entry *e, buf *b)
{
    if (t->decoder == DEC_BYTE_LEVEL) {
        size_t start = b->s.n;
        for (size_t i = 0; i < e->len;) {
            uint32_t cp;
            size_t   k    = celer_utf8_decode(e->text + i, e->len - i, &cp);
            int      byte = cp == CELER_UTF8_BAD ? -1 : tok_cp_to_byte(cp);
            if (byte < 0) { /* not in the alphabet (an added token): its own text */
                b->s.n = start;
                put(b, e->text, e->len);
                return;
            }
            uint8_t c = (uint8_t)byte;
            put(b, &c, 1);
            i += k;
        }
        return;
    }
    size_t run = 0;
    for (size_t i = 0; i + 2 < e->len; i++)
        if (!memcmp(e->text + i, "\xe2\x96\x81", 3)) {
            put(b, e->text + run, i - run);
            put(b, " ", 1);
            run = i + 3, i += 2;
        }
    put(b, e->text + run, e->len - run);
}

static celer_status check_id(const celer_tokenizer *t, int32_t id, celer_error *err)
{
    if (id < 0 || id >= t->n_vocab)
        return celer_fail(err, CELER_ERR_INVALID, "tokenizer: token id %d is outside the vocabulary (0..%d)", id,
                          t->n_vocab - 1);
    return CELER_OK;
}

celer_status celer_tokenizer_decode(const celer_tokenizer *t, const int32_t *ids, size_t n, char **out,
                                    size_t *out_n, celer_error *err)
{
    celer_error local;
    if (!err) err = &local;
    *out = NULL;
    buf b = {0}, raw = {0};
    put(&b, "", 0);
    for (size_t i = 0; i < n; i++) {
        if (check_id(t, ids[i], err)) {
            free(b.s.p), free(raw.s.p);
            return err->code;
        }
        const tok_entry *e = &t->vocab[ids[i]];
        if (t->decoder == DEC_BYTE_LEVEL) {
            put_token(t, e, &raw);
            continue;
        }
        int byte = spm_byte(e);
        if (byte >= 0) {
            uint8_t c = (uint8_t)byte;
            put(&raw, &c, 1);
            continue;
        }
        if (raw.s.n) { /* a finished run of byte tokens */
            if (celer_utf8_validate(raw.s.p, raw.s.n) == raw.s.n) put(&b, raw.s.p, raw.s.n);
            else for (size_t k = 0; k < raw.s.n; k++) put(&b, FFFD, 3);
            raw.s.n = 0;
        }
        put_token(t, e, &b);
    }
    if (t->decoder == DEC_BYTE_LEVEL)
        put_lossy(&b, raw.s.p ? raw.s.p : "", raw.s.n);
    else if (raw.s.n) {
        if (celer_utf8_validate(raw.s.p, raw.s.n) == raw.s.n) put(&b, raw.s.p, raw.s.n);
        else for (size_t k = 0; k < raw.s.n; k++) put(&b, FFFD, 3);
    }
    free(raw.s.p);
    if (b.oom || raw.oom) {
        free(b.s.p);
        return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory decoding %zu ids", n);
    }
    size_t skip = t->decoder == DEC_SPM_STRIP_LEAD && b.s.n && b.s.p[0] == ' ';
    memmove(b.s.p, b.s.p + skip, b.s.n - skip + 1);
    *out = b.s.p, *out_n = b.s.n - skip;
    return CELER_OK;
}

/* ---- streaming ---------------------------------------------------------- */

void celer_detok_init(celer_detok *d, const celer_tokenizer *t)
{
    memset(d, 0, sizeof *d);
    d->tok = t;
}

void celer_detok_free(celer_detok *d)
{
    if (!d) return;
    free(d->out);
    free(d->work);
    memset(d, 0, sizeof *d);
}

/* Shows all[0, k) (the leading space dropped once where the decoder strips it) and keeps
 * all[k, n) — at most the start of one UTF-8 sequence — for the next token. */
static celer_status emit(celer_detok *d, buf *all, size_t k, const char **text, size_t *n, celer_error *err)
{
    const char *s     = all->s.p ? all->s.p : "";
    size_t      start = 0, rest = all->s.n - k;
    CELER_ASSERT(rest <= sizeof d->pending);
    if (!d->started && k) {
        start      = d->tok->decoder == DEC_SPM_STRIP_LEAD && s[0] == ' ';
        d->started = true;
    }
    buf o = {.s = {.p = d->out, .cap = d->out_cap}};
    put(&o, "", 0);
    put_lossy(&o, s + start, k - start);
    memcpy(d->pending, s + k, rest);
    d->n_pending = rest;
    bool oom     = o.oom || all->oom;
    d->work = all->s.p, d->work_cap = all->s.cap; /* kept for the next token: no allocation per token */
    d->out = o.s.p, d->out_cap = o.s.cap;
    if (oom) return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory streaming text");
    *text = d->out, *n = o.s.n;
    return CELER_OK;
}

celer_status celer_detok_push(celer_detok *d, int32_t id, const char **text, size_t *n, celer_error *err)
{
    celer_error local;
    if (!err) err = &local;
    *text = "", *n = 0;
    if (check_id(d->tok, id, err)) return err->code;
    buf              all = {.s = {.p = d->work, .cap = d->work_cap}};
    const tok_entry *e   = &d->tok->vocab[id];
    put(&all, d->pending, d->n_pending);
    int byte = d->tok->decoder == DEC_BYTE_LEVEL ? -1 : spm_byte(e);
    if (byte >= 0) {
        uint8_t c = (uint8_t)byte;
        put(&all, &c, 1);
    } else {
        put_token(d->tok, e, &all);
    }
    return emit(d, &all, celer_utf8_complete_prefix(all.s.p ? all.s.p : "", all.s.n), text, n, err);
}

celer_status celer_detok_flush(celer_detok *d, const char **text, size_t *n, celer_error *err)
{
    celer_error local;
    if (!err) err = &local;
    buf all = {.s = {.p = d->work, .cap = d->work_cap}};
    put(&all, d->pending, d->n_pending);
    return emit(d, &all, all.s.n, text, n, err);
}
