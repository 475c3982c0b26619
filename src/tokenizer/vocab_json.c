/* A tokenizer from a Hugging Face / MLX model directory: tokenizer.json's BPE model, added tokens
 * and post-processor, with tokenizer_config.json's add_bos_token/add_eos_token and named special
 * tokens, resolved as transformers' TokenizersBackend (what AutoTokenizer builds from a
 * tokenizer.json) resolves them:
 *   - added tokens get the ids the tokenizers library gives them: a content the model's
 *     vocabulary has keeps that id, a new one takes the next id after the vocabulary;
 *   - every named special token of tokenizer_config.json (bos_token … mask_token, other
 *     "*_token" keys, extra_special_tokens / additional_special_tokens) that is not an added
 *     token yet becomes a special added token;
 *   - BOS/EOS: when tokenizer_config.json sets add_bos_token or add_eos_token, or tokenizer.json
 *     has no post_processor, those flags with bos_token/eos_token decide; otherwise the
 *     post_processor does (TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel,
 *     Sequence of those).
 * The normalizer, pre-tokenizer and decoder are mapped in vocab_json_pipeline.c. */
#include "core/error.h"
#include "core/json.h"
#include "models/model_file.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_SIZE (1ull << 30)

typedef struct {
    const char *text; /* the content, in a cJSON tree */
    int32_t     id;
    bool        special, normalized;
} added_tok;

typedef struct {
    celer_tokenizer *t;
    char             what[1024]; /* "DIR/tokenizer.json" */
    char             cfg_what[1024];
    int32_t          n_model;    /* model.vocab holds ids 0 .. n_model-1 */
    int32_t          cap_vocab;
    added_tok       *added;      /* (n_added) one per content, in the order tokenizers adds them */
    uint32_t         n_added, cap_added;
} loader;

static const char *str_or_null(const cJSON *obj, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(it) ? it->valuestring : NULL;
}

static bool truthy(const cJSON *obj, const char *key)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, key));
}

/* ---- the BPE model ----------------------------------------------------------------------- */

static celer_status check_model_options(loader *L, const cJSON *model, celer_error *err)
{
    const char *ty = str_or_null(model, "type");
    if (!ty || strcmp(ty, "BPE"))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: model type '%s' is not supported; celer "
                          "reproduces BPE models only (not WordPiece, Unigram or WordLevel)", L->what, ty ? ty : "?");
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (drop && !cJSON_IsNull(drop) && !(cJSON_IsNumber(drop) && drop->valuedouble == 0.0))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: BPE dropout is set; celer reproduces "
                          "deterministic BPE only (dropout null)", L->what);
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t i = 0; i < 2; i++) {
        const char *s = str_or_null(model, affixes[i]);
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(model, affixes[i]);
        if ((s && *s) || (it && !cJSON_IsNull(it) && !s))
            return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: BPE %s '%.40s' is not supported; celer "
                              "reproduces BPE without subword affixes (null or \"\")", L->what, affixes[i], s ? s : "?");
    }
    celer_tokenizer *t = L->t;
    if (celer_json_get_bool(model, "fuse_unk", L->what, &t->fuse_unk, NULL, err) ||
        celer_json_get_bool(model, "byte_fallback", L->what, &t->byte_fallback, NULL, err) ||
        celer_json_get_bool(model, "ignore_merges", L->what, &t->ignore_merges, NULL, err))
        return err->code;
    return CELER_OK;
}

/* model.vocab: ids must be 0 .. n-1, each once (tokenizers' model vocabulary size is its count). */
static celer_status read_vocab(loader *L, const cJSON *vocab, int32_t extra, celer_error *err)
{
    if (!cJSON_IsObject(vocab))
        return celer_fail(err, CELER_ERR_FORMAT, "tokenizer: %s: model.vocab must be an object of token → id", L->what);
    int n = cJSON_GetArraySize(vocab);
    if (n <= 0 || n > (1 << 24))
        return celer_fail(err, CELER_ERR_FORMAT, "tokenizer: %s: model.vocab has %d entries", L->what, n);
    celer_tokenizer *t = L->t;
    L->n_model = n, L->cap_vocab = n + extra;
    t->vocab   = calloc((size_t)L->cap_vocab, sizeof *t->vocab);
    if (!t->vocab) return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory for %d tokens", L->cap_vocab);
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab)
    {
        int64_t id;
        if (!celer_json_is_int(it, 0, n - 1, &id))
            return celer_fail(err, CELER_ERR_FORMAT, "tokenizer: %s: model.vocab['%.60s'] is not an id in 0..%d; the "
                              "ids of a vocabulary of %d tokens must be 0..%d", L->what, it->string, n - 1, n, n - 1);
        if (t->vocab[id].text)
            return celer_fail(err, CELER_ERR_FORMAT, "tokenizer: %s: model.vocab gives id %lld to both '%.60s' and "
                              "'%.60s'", L->what, (long long)id, t->vocab[id].text, it->string);
        size_t len = strlen(it->string);
        if (len > 65535)
            return celer_fail(err, CELER_ERR_FORMAT, "tokenizer: %s: token %lld is %zu bytes long", L->what,
                              (long long)id, len);
        t->vocab[id] = (tok_entry){.text = it->string, .len = (uint32_t)len, .orig = it->string,
                                   .orig_len = (uint32_t)len, .type = TOKEN_NORMAL};
    }
    t->n_vocab = n;
    return tok_str_map_build(&t->ids, t->vocab, n, err); /* the model's vocabulary only, as BPE sees it */
}

/* One merge: "left right" (split at the first space) or ["left", "right"]. */
static bool merge_parts(const cJSON *m, const char **l, size_t *ln, const char **r, size_t *rn)
{
    if (cJSON_IsString(m)) {
        const char *sp = strchr(m->valuestring, ' ');
        if (!sp) return false;
        *l = m->valuestring, *ln = (size_t)(sp - m->valuestring), *r = sp + 1, *rn = strlen(sp + 1);
        return true;
    }
    const cJSON *a = cJSON_GetArrayItem(m, 0), *b = cJSON_GetArrayItem(m, 1);
    if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) != 2 || !cJSON_IsString(a) || !cJSON_IsString(b)) return false;
    *l = a->valuestring, *ln = strlen(a->valuestring), *r = b->valuestring, *rn = strlen(b->valuestring);
    return true;
}

static celer_status read_merges(loader *L, const cJSON *merges, celer_error *err)
{
    celer_tokenizer *t = L->t;
    if (merges && !cJSON_IsArray(merges))
        return celer_fail(err, CELER_ERR_FORMAT, "tokenizer: %s: model.merges must be a list", L->what);
    int n = merges ? cJSON_GetArraySize(merges) : 0;
    if (tok_merge_map_init(&t->merges, (uint32_t)n, err)) return err->code;
    size_t cap = 256;
    char  *buf = malloc(cap);
    if (!buf) return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory");
    const cJSON *m;
    uint32_t     rank = 0;
    celer_status st   = CELER_OK;
    cJSON_ArrayForEach(m, merges)
    {
        const char *l, *r;
        size_t      ln, rn;
        int32_t     li = -1, ri = -1, lr = -1;
        bool        ok = merge_parts(m, &l, &ln, &r, &rn);
        if (ok && ln + rn > cap) {
            char *g = realloc(buf, cap = ln + rn);
            if (!g) {
                st = celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory");
                break;
            }
            buf = g;
        }
        if (ok) {
            li = tok_str_map_get(&t->ids, t->vocab, l, ln);
            ri = tok_str_map_get(&t->ids, t->vocab, r, rn);
            memcpy(buf, l, ln), memcpy(buf + ln, r, rn);
            lr = tok_str_map_get(&t->ids, t->vocab, buf, ln + rn);
        }
        if (li < 0 || ri < 0 || lr < 0) {
            char *shown = cJSON_PrintUnformatted(m);
            st = celer_fail(err, CELER_ERR_FORMAT, "tokenizer: %s: model.merges[%u] %.80s is not two tokens of "
                            "model.vocab whose join is a token", L->what, rank, shown ? shown : "?");
            cJSON_free(shown);
            break;
        }
        tok_merge_map_put(&t->merges, li, ri, rank++, lr);
    }
    free(buf);
    return st;
}

/* ---- added tokens ------------------------------------------------------------------------- */

static const added_tok *find_added(const loader *L, const char *text)
{
    for (uint32_t i = 0; i < L->n_added; i++)
        if (!strcmp(L->added[i].text, text)) return &L->added[i];
    return NULL;
}

/* As tokenizers' AddedVocabulary::add_tokens: an empty or already added content is skipped; a
 * content in the model's vocabulary keeps its id; a new one takes the next free id. want_id >= 0
 * is the id the file records, which must agree. */
static celer_status add_token(loader *L, const char *text, int64_t want_id, bool special, bool normalized,
                              const char *where, celer_error *err)
{
    if (!*text || find_added(L, text)) return CELER_OK;
    celer_tokenizer *t  = L->t;
    int32_t          id = tok_str_map_get(&t->ids, t->vocab, text, strlen(text));
    if (id < 0) {
        if (t->n_vocab == L->cap_vocab)
            return celer_fail(err, CELER_ERR_FORMAT, "tokenizer: %s: too many added tokens", L->what);
        id            = t->n_vocab++;
        size_t len    = strlen(text);
        t->vocab[id] = (tok_entry){.text = text, .len = (uint32_t)len, .orig = text, .orig_len = (uint32_t)len,
                                   .type = TOKEN_NORMAL};
    }
    if (want_id >= 0 && want_id != id)
        return celer_fail(err, CELER_ERR_FORMAT, "tokenizer: %s: %s '%.60s' has id %lld, but the tokenizers library "
                          "gives it id %d (%s); the file is inconsistent, re-save it with tokenizers", L->what, where,
                          text, (long long)want_id, id, id < L->n_model ? "its id in model.vocab" : "the next free id");
    if (L->n_added == L->cap_added) {
        uint32_t   cap = L->cap_added ? 2 * L->cap_added : 64;
        added_tok *g   = realloc(L->added, cap * sizeof *g);
        if (!g) return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory");
        L->added = g, L->cap_added = cap;
    }
    L->added[L->n_added++] = (added_tok){.text = text, .id = id, .special = special, .normalized = normalized};
    return CELER_OK;
}

static celer_status check_strip_flags(loader *L, const cJSON *tok, const char *text, const char *where,
                                      celer_error *err)
{
    static const char *const flags[] = {"lstrip", "rstrip", "single_word"};
    for (size_t i = 0; i < 3; i++)
        if (truthy(tok, flags[i]))
            return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: %s '%.60s' has %s true; celer reproduces "
                              "added tokens without lstrip, rstrip or single_word", L->what, where, text, flags[i]);
    return CELER_OK;
}

static celer_status read_added(loader *L, const cJSON *list, celer_error *err)
{
    if (list && !cJSON_IsNull(list) && !cJSON_IsArray(list))
        return celer_fail(err, CELER_ERR_FORMAT, "tokenizer: %s: added_tokens must be a list", L->what);
    const cJSON *it;
    cJSON_ArrayForEach(it, list)
    {
        const char *text = str_or_null(it, "content");
        int64_t     id;
        if (!text || !celer_json_is_int(cJSON_GetObjectItemCaseSensitive(it, "id"), 0, (1 << 24) - 1, &id))
            return celer_fail(err, CELER_ERR_FORMAT, "tokenizer: %s: each added token needs a string \"content\" "
                              "and an integer \"id\"", L->what);
        if (check_strip_flags(L, it, text, "added token", err)) return err->code;
        bool special = truthy(it, "special");
        const cJSON *norm = cJSON_GetObjectItemCaseSensitive(it, "normalized");
        bool normalized = norm ? cJSON_IsTrue(norm) : !special; /* tokenizers' AddedToken default */
        if (add_token(L, text, id, special, normalized, "added token", err)) return err->code;
    }
    return CELER_OK;
}

/* A named token of tokenizer_config.json: a string, or an AddedToken object with "content". */
static const char *token_text(const cJSON *v) { return cJSON_IsString(v) ? v->valuestring : str_or_null(v, "content"); }

static celer_status add_config_token(loader *L, const cJSON *v, bool named, celer_error *err)
{
    const char *text = token_text(v);
    if (!text || find_added(L, text)) return CELER_OK;
    if (check_strip_flags(L, v, text, "tokenizer_config.json special token", err)) return err->code;
    const cJSON *sp      = cJSON_GetObjectItemCaseSensitive(v, "special");
    bool         special = named || !cJSON_IsObject(v) || cJSON_IsTrue(sp); /* transformers: AddedToken(s, special=True) */
    const cJSON *norm    = cJSON_GetObjectItemCaseSensitive(v, "normalized");
    bool normalized = cJSON_IsBool(norm) ? cJSON_IsTrue(norm) : !special;
    return add_token(L, text, -1, special, normalized, "tokenizer_config.json special token", err);
}

/* The special tokens transformers adds from tokenizer_config.json, in its order: the seven named
 * ones, other "*_token" keys, then extra_special_tokens (or additional_special_tokens). */
static celer_status read_config_tokens(loader *L, const cJSON *cfg, celer_error *err)
{
    static const char *const named[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                        "pad_token", "cls_token", "mask_token"};
    if (!cfg) return CELER_OK;
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (add_config_token(L, cJSON_GetObjectItemCaseSensitive(cfg, named[i]), true, err)) return err->code;
    const cJSON *it;
    cJSON_ArrayForEach(it, cfg)
    {
        size_t n     = strlen(it->string);
        bool   std   = false;
        for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) std |= !strcmp(it->string, named[i]);
        if (!std && n > 6 && !strcmp(it->string + n - 6, "_token") && token_text(it) &&
            add_config_token(L, it, true, err))
            return err->code;
    }
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(cfg, "extra_special_tokens");
    if (!extra || cJSON_IsNull(extra)) extra = cJSON_GetObjectItemCaseSensitive(cfg, "additional_special_tokens");
    cJSON_ArrayForEach(it, extra) if (add_config_token(L, it, cJSON_IsObject(extra), err)) return err->code;
    return CELER_OK;
}

/* tokenizers matches non-normalized added tokens in the raw text, then normalized ones in the
 * normalized rest; celer matches all in one pass over the raw text, which is the same only when
 * there is no normalizer and the tokens are all of one kind. */
static celer_status check_normalized(loader *L, const cJSON *root, celer_error *err)
{
    const cJSON     *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    const added_tok *on = NULL, *off = NULL;
    for (uint32_t i = 0; i < L->n_added; i++) *(L->added[i].normalized ? &on : &off) = &L->added[i];
    if (!on) return CELER_OK;
    if (norm && !cJSON_IsNull(norm))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: added token '%.60s' has normalized true under a "
                          "normalizer; celer matches added tokens in the raw text, so it reproduces normalized tokens "
                          "only without a normalizer", L->what, on->text);
    if (off)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: added tokens mix normalized true ('%.60s') and "
                          "false ('%.60s'); tokenizers matches the two kinds in separate passes, celer in one", L->what,
                          on->text, off->text);
    return CELER_OK;
}

/* ---- BOS / EOS ------------------------------------------------------------------------------ */

static int32_t id_of(const loader *L, const char *text)
{
    if (!text) return -1;
    const added_tok *a = find_added(L, text);
    return a ? a->id : tok_str_map_get(&L->t->ids, L->t->vocab, text, strlen(text));
}

/* The one id a post-processor adds for a special token, checked against the vocabulary. */
static celer_status pp_id(loader *L, const char *where, const cJSON *id_item, int32_t *out, celer_error *err)
{
    int64_t id;
    if (!celer_json_is_int(id_item, 0, L->t->n_vocab - 1, &id))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: post_processor %s does not add exactly one "
                          "token id of the vocabulary; celer adds at most one BOS and one EOS", L->what, where);
    *out = (int32_t)id;
    return CELER_OK;
}

static celer_status post_processor(loader *L, const cJSON *pp, celer_error *err)
{
    celer_tokenizer *t  = L->t;
    const char      *ty = str_or_null(pp, "type");
    if (!ty) return celer_fail(err, CELER_ERR_FORMAT, "tokenizer: %s: post_processor has no \"type\"", L->what);
    if (!strcmp(ty, "ByteLevel")) return CELER_OK; /* offsets only */
    if (!strcmp(ty, "Sequence")) {
        const cJSON *it;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(pp, "processors")) if (post_processor(L, it, err))
            return err->code;
        return CELER_OK;
    }
    if (t->add_bos || t->add_eos)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: post_processor has two steps that add special "
                          "tokens; celer reproduces one", L->what);
    if (!strcmp(ty, "RobertaProcessing") || !strcmp(ty, "BertProcessing")) { /* cls $A sep */
        const cJSON *cls = cJSON_GetObjectItemCaseSensitive(pp, "cls"), *sep = cJSON_GetObjectItemCaseSensitive(pp, "sep");
        if (pp_id(L, ty, cJSON_GetArrayItem(cls, 1), &t->bos_id, err) ||
            pp_id(L, ty, cJSON_GetArrayItem(sep, 1), &t->eos_id, err))
            return err->code;
        t->add_bos = t->add_eos = true;
        return CELER_OK;
    }
    if (strcmp(ty, "TemplateProcessing"))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: post_processor '%s' is not supported; celer "
                          "reproduces TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel and Sequence of "
                          "those", L->what, ty);
    /* single: [SpecialToken] Sequence A [SpecialToken] */
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single"), *specials =
                                                                               cJSON_GetObjectItemCaseSensitive(pp, "special_tokens");
    int  n = cJSON_GetArraySize(single), at = -1;
    bool ok = cJSON_IsArray(single);
    for (int i = 0; ok && i < n; i++) {
        const cJSON *seq = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(single, i), "Sequence");
        if (seq) ok = at < 0 && !strcmp(str_or_null(seq, "id") ? str_or_null(seq, "id") : "", "A"), at = i;
    }
    if (!ok || at < 0 || at > 1 || n - at > 2)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer: %s: post_processor TemplateProcessing single template "
                          "is not [special] $A [special]; celer adds at most one BOS and one EOS", L->what);
    for (int i = 0; i < n; i++) {
        if (i == at) continue;
        const cJSON *sp   = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(single, i), "SpecialToken");
        const char  *name = str_or_null(sp, "id");
        const cJSON *def  = name ? cJSON_GetObjectItemCaseSensitive(specials, name) : NULL;
        if (!def)
            return celer_fail(err, CELER_ERR_FORMAT, "tokenizer: %s: post_processor TemplateProcessing names a special "
                              "token '%.60s' that special_tokens does not define", L->what, name ? name : "?");
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(def, "ids");
        if (pp_id(L, "TemplateProcessing", cJSON_GetArraySize(ids) == 1 ? cJSON_GetArrayItem(ids, 0) : NULL,
                  i < at ? &t->bos_id : &t->eos_id, err))
            return err->code;
        *(i < at ? &t->add_bos : &t->add_eos) = true;
    }
    return CELER_OK;
}

static celer_status resolve_bos_eos(loader *L, const cJSON *root, const celer_hf_tokenizer_config *tc,
                                    celer_error *err)
{
    celer_tokenizer *t  = L->t;
    const cJSON     *pp = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
    t->bos_id = id_of(L, tc->bos_token), t->eos_id = id_of(L, tc->eos_token);
    t->unk_id = id_of(L, tc->unk_token), t->pad_id = id_of(L, tc->pad_token);
    /* TokenizersBackend rebuilds the template from the flags when the config sets either */
    if (tc->add_bos_token >= 0 || tc->add_eos_token >= 0 || !pp || cJSON_IsNull(pp)) {
        t->add_bos = tc->add_bos_token == 1 && t->bos_id >= 0;
        t->add_eos = tc->add_eos_token == 1 && t->eos_id >= 0;
        return CELER_OK;
    }
    return post_processor(L, pp, err);
}

/* ---- putting it together ---------------------------------------------------------------------- */

/* Runs tok_finish for the byte ids and chunking only, then installs the added tokens as read. */
static int cmp_added(const void *a, const void *b)
{
    const tok_added *x = a, *y = b;
    uint32_t         n = x->len < y->len ? x->len : y->len;
    int              c = memcmp(x->text, y->text, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

static celer_status finish(loader *L, celer_error *err)
{
    celer_tokenizer *t = L->t;
    /* all texts into one pool owned by the tokenizer (the JSON trees are freed) */
    size_t total = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) total += t->vocab[i].len;
    t->pool = malloc(total ? total : 1);
    if (!t->pool) return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory for %zu bytes of tokens", total);
    char *p = t->pool;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        tok_entry *e = &t->vocab[i];
        memcpy(p, e->text ? e->text : "", e->len);
        e->text = e->orig = p;
        p += e->len;
    }
    /* tok_finish would add tokens by type and by the named ids; here the file's list decides */
    int32_t named[4] = {t->bos_id, t->eos_id, t->unk_id, t->pad_id};
    t->bos_id = t->eos_id = t->unk_id = t->pad_id = -1;
    if (tok_finish(t, err)) return err->code;
    t->bos_id = named[0], t->eos_id = named[1], t->unk_id = named[2], t->pad_id = named[3];
    t->n_added = 0, t->added_max_len = 0;
    memset(t->added_first, 0, sizeof t->added_first);
    for (uint32_t i = 0; i < L->n_added; i++) {
        const added_tok *a = &L->added[i];
        tok_entry       *e = &t->vocab[a->id];
        e->type            = a->special ? TOKEN_CONTROL : TOKEN_USER_DEFINED;
        t->added[t->n_added++] = (tok_added){.text = e->text, .len = e->len, .id = a->id, .special = a->special};
        uint8_t c = (uint8_t)e->text[0];
        t->added_first[c >> 3] |= (uint8_t)(1u << (c & 7));
        if (e->len > t->added_max_len) t->added_max_len = e->len;
    }
    qsort(t->added, t->n_added, sizeof *t->added, cmp_added);
    return CELER_OK;
}

static celer_status load(loader *L, const cJSON *root, const cJSON *cfg, const celer_hf_tokenizer_config *tc,
                         celer_error *err)
{
    celer_tokenizer *t     = L->t;
    const cJSON     *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON     *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(model))
        return celer_fail(err, CELER_ERR_FORMAT, "tokenizer: %s: no \"model\" object; is this a tokenizers file?", L->what);
    int32_t extra = cJSON_GetArraySize(added) + (cfg ? cJSON_GetArraySize(cfg) : 0);
    const cJSON *xs = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "extra_special_tokens") : NULL;
    const cJSON *as = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "additional_special_tokens") : NULL;
    extra += cJSON_GetArraySize(xs) + cJSON_GetArraySize(as);
    if (check_model_options(L, model, err) || read_vocab(L, cJSON_GetObjectItemCaseSensitive(model, "vocab"), extra, err) ||
        read_merges(L, cJSON_GetObjectItemCaseSensitive(model, "merges"), err))
        return err->code;
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    if (cJSON_IsString(unk)) {
        t->bpe_unk = tok_str_map_get(&t->ids, t->vocab, unk->valuestring, strlen(unk->valuestring));
        if (t->bpe_unk < 0)
            return celer_fail(err, CELER_ERR_FORMAT, "tokenizer: %s: model.unk_token '%.60s' is not in model.vocab",
                              L->what, unk->valuestring);
    }
    /* chunking SentencePiece text at ▁ is exact, except that ignore_merges looks up whole words */
    t->model = t->ignore_merges ? TOK_MODEL_BYTE_LEVEL : TOK_MODEL_SPM;
    if (tok_json_pipeline(t, root, L->what, err) || read_added(L, added, err) || read_config_tokens(L, cfg, err) ||
        check_normalized(L, root, err) || resolve_bos_eos(L, root, tc, err))
        return err->code;
    return finish(L, err);
}

static celer_status read_optional_json(const char *path, cJSON **out, celer_error *err)
{
    FILE *f = fopen(path, "rb");
    *out    = NULL;
    if (!f) return CELER_OK;
    fclose(f);
    return celer_json_read_file(path, JSON_MAX_SIZE, out, err);
}

celer_status tok_load_json(celer_tokenizer **out, const celer_model_file *mf, celer_error *err)
{
    *out     = NULL;
    loader L = {0};
    snprintf(L.what, sizeof L.what, "%s/tokenizer.json", mf->st.dir);
    snprintf(L.cfg_what, sizeof L.cfg_what, "%s/tokenizer_config.json", mf->st.dir);
    FILE *f = fopen(L.what, "rb");
    if (!f)
        return celer_fail(err, CELER_ERR_IO, "tokenizer: %s: cannot open it; celer reads a model directory's tokenizer "
                          "from tokenizer.json (save one with transformers' tokenizer.save_pretrained)", L.what);
    fclose(f);
    cJSON       *root = NULL, *cfg = NULL;
    celer_status st   = celer_json_read_file(L.what, JSON_MAX_SIZE, &root, err);
    if (!st) st = read_optional_json(L.cfg_what, &cfg, err);
    if (!st && !(L.t = calloc(1, sizeof *L.t))) st = celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory");
    if (!st) {
        L.t->bpe_unk = L.t->bos_id = L.t->eos_id = L.t->unk_id = L.t->pad_id = L.t->eot_id = L.t->eom_id = -1;
        st = load(&L, root, cJSON_IsObject(cfg) ? cfg : NULL, &mf->tcfg, err);
    }
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    free(L.added);
    if (st) {
        celer_tokenizer_free(L.t);
        return st;
    }
    *out = L.t;
    return CELER_OK;
}
