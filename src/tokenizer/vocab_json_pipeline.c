/* tokenizer.json's normalizer, pre_tokenizer and decoder, mapped onto celer's pipeline
 * (tokenizer.h) through tables keyed by each component's "type". A component, or a setting of
 * one, that celer cannot reproduce exactly is refused with CELER_ERR_UNSUPPORTED naming the
 * component and what celer supports; nothing is approximated.
 *
 *   normalizer     NFC, Replace(" " → "▁"), Prepend("▁"), Sequence of those (or null)
 *   pre_tokenizer  ByteLevel(add_prefix_space false; last), Split(Isolated, not inverted),
 *                  Digits, Metaspace(▁, prepend_scheme first|never; first), Sequence (or null)
 *   decoder        ByteLevel; Sequence[Replace("▁" → " "), ByteFallback, Fuse(, Strip(" ", 1, 0))];
 *                  Metaspace(▁) over a vocabulary without <0xXX> tokens */
#include "core/error.h"
#include "core/json.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define META "\xe2\x96\x81" /* ▁ U+2581 */

/* The pattern of ByteLevel(use_regex=true): GPT-2's split, as the tokenizers library fixes it. */
static const char BYTE_LEVEL_SPLIT[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
/* Digits(individual_digits=false): runs of numeric characters, isolated. */
static const char DIGIT_RUNS[] = "\\p{N}+";
/* Metaspace(split=true) cuts before every ▁ (MergedWithNext): a run of other characters, or one
 * ▁ with the run after it. */
static const char META_WORDS[] = "\\x{2581}[^\\x{2581}]*|[^\\x{2581}]+";

typedef struct {
    celer_tokenizer *t;
    const char      *what;        /* "DIR/tokenizer.json" */
    bool             no_spaces;   /* the normalizer leaves no U+0020 in the text */
    bool             byte_level;  /* a ByteLevel step was mapped (it must be the last) */
    bool             rewrites;    /* a step that writes the scratch buffer was mapped */
    uint32_t         n_steps;     /* pre-tokenizer steps seen, mapped or dropped */
} builder;

/* ---- small readers ------------------------------------------------------- */

static const char *type_of(const cJSON *c)
{
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(c, "type");
    return cJSON_IsString(ty) ? ty->valuestring : NULL;
}

static celer_status want_object(builder *b, const cJSON *c, const char *where, celer_error *err)
{
    if (!cJSON_IsObject(c) || !type_of(c))
        return celer_fail(err, CELER_ERR_FORMAT, "tokenizer: %s: %s must be an object with a string \"type\"", b->what,
                          where);
    return CELER_OK;
}

static bool str_is(const cJSON *obj, const char *key, const char *want)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(it) && !strcmp(it->valuestring, want);
}

/* A bool field, with its default when absent or null. */
static celer_status flag(builder *b, const cJSON *c, const char *where, const char *key, bool def, bool *v,
                         celer_error *err)
{
    char what[256];
    snprintf(what, sizeof what, "%s: %s", b->what, where);
    *v = def;
    return celer_json_get_bool(c, key, what, v, NULL, err);
}

/* {"String": s} → s (with *literal), {"Regex": r} → r; NULL when neither. */
static const char *pattern_of(const cJSON *c, bool *literal)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(c, "pattern");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(p, "String"), *r = cJSON_GetObjectItemCaseSensitive(p, "Regex");
    *literal       = cJSON_IsString(s);
    return cJSON_IsString(s) ? s->valuestring : cJSON_IsString(r) ? r->valuestring : NULL;
}

/* ---- normalizers ----------------------------------------------------------- */

static celer_status add_norm(builder *b, tok_norm n, const char *name, celer_error *err)
{
    if (b->t->n_norm == TOK_MAX_NORM)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: more than %d normalizer steps (at %s); celer "
                          "runs at most %d", b->what, TOK_MAX_NORM, name, TOK_MAX_NORM);
    b->t->norm[b->t->n_norm++] = n;
    b->no_spaces               = n == NORM_SPACE_TO_META ? true : b->no_spaces; /* NFC and ▁ never make spaces */
    return CELER_OK;
}

static celer_status normalizer(builder *b, const cJSON *c, celer_error *err);

static celer_status norm_nfc(builder *b, const cJSON *c, celer_error *err)
{
    (void)c;
    return add_norm(b, NORM_NFC, "NFC", err);
}

static celer_status norm_replace(builder *b, const cJSON *c, celer_error *err)
{
    bool        literal;
    const char *pat = pattern_of(c, &literal);
    const cJSON *to = cJSON_GetObjectItemCaseSensitive(c, "content");
    if (!literal || strcmp(pat, " ") || !str_is(c, "content", META))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: normalizer Replace(%s '%.40s' → '%.40s') is not "
                          "supported; celer reproduces Replace(String ' ' → '▁') only", b->what,
                          literal ? "String" : "Regex", pat ? pat : "?", cJSON_IsString(to) ? to->valuestring : "?");
    return add_norm(b, NORM_SPACE_TO_META, "Replace", err);
}

static celer_status norm_prepend(builder *b, const cJSON *c, celer_error *err)
{
    if (!str_is(c, "prepend", META))
        return celer_fail(err, CELER_ERR_UNSUPPORTED,
                          "tokenizer: %s: normalizer Prepend of other text than '▁' is not supported", b->what);
    return add_norm(b, NORM_PREPEND_META, "Prepend", err);
}

static celer_status norm_sequence(builder *b, const cJSON *c, celer_error *err)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(c, "normalizers"), *it;
    if (!cJSON_IsArray(list))
        return celer_fail(err, CELER_ERR_FORMAT, "tokenizer: %s: normalizer Sequence has no \"normalizers\" list",
                          b->what);
    cJSON_ArrayForEach(it, list) if (normalizer(b, it, err)) return err->code;
    return CELER_OK;
}

static const struct {
    const char *type;
    celer_status (*map)(builder *, const cJSON *, celer_error *);
} normalizers[] = {{"NFC", norm_nfc}, {"Replace", norm_replace}, {"Prepend", norm_prepend}, {"Sequence", norm_sequence}};

static celer_status normalizer(builder *b, const cJSON *c, celer_error *err)
{
    if (want_object(b, c, "a normalizer", err)) return err->code;
    const char *ty = type_of(c);
    for (size_t i = 0; i < sizeof normalizers / sizeof normalizers[0]; i++)
        if (!strcmp(ty, normalizers[i].type)) return normalizers[i].map(b, c, err);
    return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: normalizer '%s' is not supported; celer reproduces "
                      "NFC, Replace(' ' → '▁'), Prepend('▁') and Sequence of those", b->what, ty);
}

/* ---- pre-tokenizer steps ---------------------------------------------------- */

static celer_status add_pre(builder *b, tok_pre_kind kind, const char *pattern, const char *name, celer_error *err)
{
    if (b->byte_level)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: pre_tokenizer %s after ByteLevel is not "
                          "supported; celer runs ByteLevel as the last step", b->what, name);
    if (b->t->n_pre == TOK_MAX_PRE)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: more than %d pre_tokenizer steps (at %s); celer "
                          "runs at most %d", b->what, TOK_MAX_PRE, name, TOK_MAX_PRE);
    tok_pre *p = &b->t->pre[b->t->n_pre];
    *p         = (tok_pre){.kind = kind};
    if (pattern && celer_regex_compile(&p->re, pattern, err)) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return celer_fail(err, err->code, "tokenizer: %s: pre_tokenizer %s: %s; celer's regex engine "
                          "(src/tokenizer/regex.h) lacks that syntax", b->what, name, msg);
    }
    b->t->n_pre++;
    return CELER_OK;
}

static celer_status pre_tokenizer(builder *b, const cJSON *c, celer_error *err);

static celer_status pre_byte_level(builder *b, const cJSON *c, celer_error *err)
{
    bool prefix, regex;
    if (flag(b, c, "pre_tokenizer ByteLevel", "add_prefix_space", true, &prefix, err) ||
        flag(b, c, "pre_tokenizer ByteLevel", "use_regex", true, &regex, err))
        return err->code;
    if (prefix)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: pre_tokenizer ByteLevel with add_prefix_space "
                          "true is not supported; celer reproduces ByteLevel(add_prefix_space=false)", b->what);
    if (b->rewrites)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: pre_tokenizer ByteLevel after Metaspace is not "
                          "supported", b->what);
    b->n_steps++;
    if (add_pre(b, PRE_BYTE_LEVEL, regex ? BYTE_LEVEL_SPLIT : NULL, "ByteLevel", err)) return err->code;
    b->byte_level = true;
    return CELER_OK;
}

static celer_status pre_split(builder *b, const cJSON *c, celer_error *err)
{
    bool        literal, invert;
    const char *pat = pattern_of(c, &literal);
    if (!pat)
        return celer_fail(err, CELER_ERR_FORMAT, "tokenizer: %s: pre_tokenizer Split has no pattern "
                          "{\"String\": ...} or {\"Regex\": ...}", b->what);
    if (flag(b, c, "pre_tokenizer Split", "invert", false, &invert, err)) return err->code;
    b->n_steps++;
    /* splitting on a space the normalizer has already turned into ▁ finds nothing (Gemma) */
    if (literal && !strcmp(pat, " ") && b->no_spaces && !invert) return CELER_OK;
    if (invert || !str_is(c, "behavior", "Isolated")) {
        const cJSON *beh = cJSON_GetObjectItemCaseSensitive(c, "behavior");
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: pre_tokenizer Split with behavior '%s'%s is "
                          "not supported; celer reproduces Split(behavior Isolated, invert false)", b->what,
                          cJSON_IsString(beh) ? beh->valuestring : "?", invert ? " inverted" : "");
    }
    if (!literal) return add_pre(b, PRE_SPLIT_ISOLATED, pat, "Split", err);
    /* a literal: every regex metacharacter escaped */
    size_t n = strlen(pat);
    char  *re = malloc(2 * n + 1), *o = re;
    if (!re) return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory");
    for (size_t i = 0; i < n; i++) {
        if (strchr("\\^$.|?*+()[]{}", pat[i])) *o++ = '\\';
        *o++ = pat[i];
    }
    *o              = '\0';
    celer_status st = add_pre(b, PRE_SPLIT_ISOLATED, re, "Split", err);
    free(re);
    return st;
}

static celer_status pre_digits(builder *b, const cJSON *c, celer_error *err)
{
    bool one;
    if (flag(b, c, "pre_tokenizer Digits", "individual_digits", false, &one, err)) return err->code;
    b->n_steps++;
    return one ? add_pre(b, PRE_DIGITS_INDIVIDUAL, NULL, "Digits", err)
               : add_pre(b, PRE_SPLIT_ISOLATED, DIGIT_RUNS, "Digits", err);
}

/* Metaspace: spaces → ▁ in each piece, a ▁ put in front by prepend_scheme, then an optional
 * split before each ▁. As the first step its piece is the whole segment, which celer's
 * PRE_METASPACE_FIRST (and, for "never", a trailing Replace normalizer) reproduces. */
static celer_status pre_metaspace(builder *b, const cJSON *c, celer_error *err)
{
    bool split, prefix;
    if (flag(b, c, "pre_tokenizer Metaspace", "split", true, &split, err) ||
        flag(b, c, "pre_tokenizer Metaspace", "add_prefix_space", true, &prefix, err))
        return err->code;
    const cJSON *sch    = cJSON_GetObjectItemCaseSensitive(c, "prepend_scheme");
    const char  *scheme = cJSON_IsString(sch) ? sch->valuestring : prefix ? "always" : "never";
    if (!str_is(c, "replacement", META))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: pre_tokenizer Metaspace with a replacement "
                          "other than '▁' is not supported", b->what);
    if (b->n_steps)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: pre_tokenizer Metaspace after another step is not "
                          "supported; celer reproduces Metaspace as the first step", b->what);
    b->n_steps++;
    if (!strcmp(scheme, "first")) {
        if (add_pre(b, PRE_METASPACE_FIRST, NULL, "Metaspace", err)) return err->code;
        b->rewrites = b->no_spaces = true;
    } else if (!strcmp(scheme, "never")) {
        if (add_norm(b, NORM_SPACE_TO_META, "Metaspace", err)) return err->code;
    } else {
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: pre_tokenizer Metaspace with prepend_scheme "
                          "'%s' is not supported; celer reproduces prepend_scheme 'first' and 'never'", b->what, scheme);
    }
    return split ? add_pre(b, PRE_SPLIT_ISOLATED, META_WORDS, "Metaspace", err) : CELER_OK;
}

static celer_status pre_sequence(builder *b, const cJSON *c, celer_error *err)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(c, "pretokenizers"), *it;
    if (!cJSON_IsArray(list))
        return celer_fail(err, CELER_ERR_FORMAT, "tokenizer: %s: pre_tokenizer Sequence has no \"pretokenizers\" list",
                          b->what);
    cJSON_ArrayForEach(it, list) if (pre_tokenizer(b, it, err)) return err->code;
    return CELER_OK;
}

static const struct {
    const char *type;
    celer_status (*map)(builder *, const cJSON *, celer_error *);
} pre_tokenizers[] = {{"ByteLevel", pre_byte_level}, {"Split", pre_split},       {"Digits", pre_digits},
                      {"Metaspace", pre_metaspace},  {"Sequence", pre_sequence}};

static celer_status pre_tokenizer(builder *b, const cJSON *c, celer_error *err)
{
    if (want_object(b, c, "a pre_tokenizer", err)) return err->code;
    const char *ty = type_of(c);
    for (size_t i = 0; i < sizeof pre_tokenizers / sizeof pre_tokenizers[0]; i++)
        if (!strcmp(ty, pre_tokenizers[i].type)) return pre_tokenizers[i].map(b, c, err);
    return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: pre_tokenizer '%s' is not supported; celer "
                      "reproduces ByteLevel, Split (Isolated), Digits, Metaspace and Sequence of those", b->what, ty);
}

/* ---- decoder ------------------------------------------------------------------ */

static bool has_byte_tokens(const celer_tokenizer *t)
{
    for (int v = 0; v < 256; v++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", v);
        if (tok_str_map_get(&t->ids, t->vocab, name, 6) >= 0) return true;
        snprintf(name, sizeof name, "<0x%02x>", v);
        if (tok_str_map_get(&t->ids, t->vocab, name, 6) >= 0) return true;
    }
    return false;
}

/* The one decoder Sequence celer knows, step by step: Replace("▁" → " "), ByteFallback, Fuse,
 * then optionally Strip(" ", 1, 0) (Metaspace-prefixed vocabularies). */
static bool dec_step_is(const cJSON *d, int k)
{
    const char *ty = type_of(d);
    if (!ty) return false;
    bool literal;
    switch (k) {
    case 0: return !strcmp(ty, "Replace") && pattern_of(d, &literal) && literal &&
                   !strcmp(pattern_of(d, &literal), META) && str_is(d, "content", " ");
    case 1: return !strcmp(ty, "ByteFallback");
    case 2: return !strcmp(ty, "Fuse");
    default: {
        int64_t start = -1, stop = -1;
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(d, "start"), *z = cJSON_GetObjectItemCaseSensitive(d, "stop");
        return !strcmp(ty, "Strip") && str_is(d, "content", " ") && celer_json_is_int(a, 0, 1 << 20, &start) &&
               celer_json_is_int(z, 0, 1 << 20, &stop) && start == 1 && stop == 0;
    }
    }
}

static celer_status decoder(builder *b, const cJSON *c, celer_error *err)
{
    static const char SUPPORTED[] = "celer reproduces ByteLevel, Metaspace('▁') and Sequence[Replace('▁' → ' '), "
                                    "ByteFallback, Fuse] optionally followed by Strip(' ', 1, 0)";
    if (!c || cJSON_IsNull(c))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: no decoder (tokens joined by spaces) is not "
                          "supported; %s", b->what, SUPPORTED);
    if (want_object(b, c, "the decoder", err)) return err->code;
    const char *ty = type_of(c);
    if (!strcmp(ty, "ByteLevel")) {
        b->t->decoder = DEC_BYTE_LEVEL;
        return CELER_OK;
    }
    if (!strcmp(ty, "Metaspace")) {
        bool prefix;
        if (flag(b, c, "decoder Metaspace", "add_prefix_space", true, &prefix, err)) return err->code;
        const cJSON *sch    = cJSON_GetObjectItemCaseSensitive(c, "prepend_scheme");
        const char  *scheme = cJSON_IsString(sch) ? sch->valuestring : prefix ? "always" : "never";
        if (!str_is(c, "replacement", META) || has_byte_tokens(b->t))
            return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: decoder Metaspace %s is not supported; %s",
                              b->what, has_byte_tokens(b->t) ? "over a vocabulary with <0xXX> byte tokens (it leaves "
                              "them as text, celer decodes them to bytes)" : "with a replacement other than '▁'",
                              SUPPORTED);
        b->t->decoder = strcmp(scheme, "never") ? DEC_SPM_STRIP_LEAD : DEC_SPM;
        return CELER_OK;
    }
    if (!strcmp(ty, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(c, "decoders");
        int          n    = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : -1;
        bool         ok   = n == 3 || n == 4;
        for (int k = 0; ok && k < n; k++) ok = dec_step_is(cJSON_GetArrayItem(list, k), k);
        if (ok) {
            b->t->decoder = n == 4 ? DEC_SPM_STRIP_LEAD : DEC_SPM;
            return CELER_OK;
        }
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: decoder Sequence of other steps is not "
                          "supported; %s", b->what, SUPPORTED);
    }
    return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: decoder '%s' is not supported; %s", b->what, ty,
                      SUPPORTED);
}

/* ---- the whole pipeline ----------------------------------------------------------- */

celer_status tok_json_pipeline(celer_tokenizer *t, const struct cJSON *root, const char *what, celer_error *err)
{
    builder      b    = {.t = t, .what = what};
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    const cJSON *pre  = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    if (norm && !cJSON_IsNull(norm) && normalizer(&b, norm, err)) return err->code;
    if (pre && !cJSON_IsNull(pre) && pre_tokenizer(&b, pre, err)) return err->code;
    return decoder(&b, cJSON_GetObjectItemCaseSensitive(root, "decoder"), err);
}
