/* tokenizer.json and tokenizer_config.json from a celer tokenizer (export_json.h): the reverse of
 * vocab_json.c and vocab_json_pipeline.c. Each step of celer's pipeline is written as the
 * `tokenizers` component that does the same, in the shape that library serializes it (mlx-lm
 * matches the decoder against fixed shapes to pick its streaming detokenizer, so they matter):
 *
 *   celer                     tokenizer.json
 *   NORM_NFC                  normalizer NFC
 *   NORM_SPACE_TO_META        normalizer Replace(String " " → "▁")
 *   NORM_PREPEND_META         normalizer Prepend("▁")
 *   PRE_DIGITS_INDIVIDUAL     pre_tokenizer Digits(individual_digits true)
 *   PRE_SPLIT_ISOLATED        pre_tokenizer Split(Regex, Isolated)
 *   PRE_BYTE_LEVEL            pre_tokenizer ByteLevel(add_prefix_space false; use_regex iff it splits)
 *   PRE_METASPACE_FIRST       pre_tokenizer Metaspace(▁, prepend_scheme first, split false)
 *   DEC_BYTE_LEVEL            decoder ByteLevel
 *   DEC_SPM, _STRIP_LEAD      decoder Sequence[Replace(▁ → " "), ByteFallback, Fuse(, Strip(" ", 1, 0))]
 *   add_bos, add_eos          post_processor TemplateProcessing; add_bos_token, add_eos_token
 *   added tokens              added_tokens (normalized false: matched in the raw text, as celer
 *                             does), added_tokens_decoder
 *
 * The vocabulary goes in its BPE spelling, one id per text (the last, as celer's index and a
 * Python dict keep it); the merges in rank order as [left, right] pairs, since tokens may hold
 * spaces. SentencePiece chunking at ▁ (meta_chunks) is celer's shortcut for the same result and
 * is not written. */
#include "tokenizer/export_json.h"

#include "core/error.h"
#include "core/json.h"
#include "core/utf8.h"
#include "models/model_file.h"
#include "tokenizer/tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define META "\xe2\x96\x81" /* ▁ U+2581 */

typedef struct {
    const celer_tokenizer *t;
    char                 **text;     /* (n_vocab) each token's BPE spelling, NUL-terminated, in pool */
    char                  *pool;
    int32_t               *added_at; /* (n_vocab) index into t->added by id, or -1 */
    bool                   oom;
} writer;

/* ---- building JSON --------------------------------------------------------------------- */

/* Adds item to parent (an object when key is set, else an array); records a failed allocation
 * and returns NULL, so one check at the end covers a whole tree. Keys are string constants or
 * pool texts, which outlive the tree (hence the CS form: no copy). */
static cJSON *put(writer *w, cJSON *parent, const char *key, cJSON *item)
{
    bool ok = item && parent && (key ? cJSON_AddItemToObjectCS(parent, key, item) : cJSON_AddItemToArray(parent, item));
    if (!ok) {
        cJSON_Delete(item);
        w->oom = true;
        return NULL;
    }
    return item;
}

static cJSON *put_str(writer *w, cJSON *parent, const char *key, const char *s)
{
    return put(w, parent, key, cJSON_CreateStringReference(s));
}

static void put_bool(writer *w, cJSON *parent, const char *key, bool v) { put(w, parent, key, cJSON_CreateBool(v)); }
static void put_num(writer *w, cJSON *parent, const char *key, double v) { put(w, parent, key, cJSON_CreateNumber(v)); }
static void put_null(writer *w, cJSON *parent, const char *key) { put(w, parent, key, cJSON_CreateNull()); }

/* {"type": type} added to parent under key (or appended). */
static cJSON *put_typed(writer *w, cJSON *parent, const char *key, const char *type)
{
    cJSON *o = put(w, parent, key, cJSON_CreateObject());
    put_str(w, o, "type", type);
    return o;
}

/* A Replace normalizer or decoder: String pattern → content. */
static void put_replace(writer *w, cJSON *parent, const char *key, const char *from, const char *to)
{
    cJSON *o = put_typed(w, parent, key, "Replace");
    put_str(w, put(w, o, "pattern", cJSON_CreateObject()), "String", from);
    put_str(w, o, "content", to);
}

/* ---- the vocabulary ---------------------------------------------------------------------- */

/* Copies every token's text into one NUL-terminated pool, refusing what JSON cannot carry. */
static celer_status gather_texts(writer *w, celer_error *err)
{
    const celer_tokenizer *t     = w->t;
    size_t                 total = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) total += (size_t)t->vocab[i].len + 1;
    w->text     = malloc((size_t)t->n_vocab * sizeof *w->text);
    w->added_at = malloc((size_t)t->n_vocab * sizeof *w->added_at);
    w->pool     = malloc(total);
    if (!w->text || !w->added_at || !w->pool)
        return celer_fail(err, CELER_ERR_OOM, "tokenizer export: out of memory for %d tokens", t->n_vocab);
    char *p = w->pool;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        const tok_entry *e = &t->vocab[i];
        for (uint32_t k = 0; k < e->len;) {
            uint32_t cp;
            size_t   n = celer_utf8_decode(e->text + k, e->len - k, &cp);
            if (cp == 0) /* JSON spells it \u0000, but cJSON's strings end at it */
                return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer export: token %d holds a NUL byte (at byte "
                                  "%u), which celer cannot write into tokenizer.json", i, k);
            if (cp == CELER_UTF8_BAD)
                return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer export: token %d is not valid UTF-8 (at byte "
                                  "%u), which tokenizer.json cannot hold", i, k);
            k += (uint32_t)n;
        }
        memcpy(p, e->text, e->len);
        p[e->len]      = '\0';
        w->text[i]     = p;
        w->added_at[i] = -1;
        p += e->len + 1;
    }
    for (uint32_t i = 0; i < t->n_added; i++)
        if (w->added_at[t->added[i].id] < 0) w->added_at[t->added[i].id] = (int32_t)i;
    return CELER_OK;
}

typedef struct {
    uint32_t rank;
    int32_t  left, right;
} merge_row;

static int cmp_rank(const void *a, const void *b)
{
    const merge_row *x = a, *y = b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* model: BPE with the vocabulary (text → id) and the merges, best first. */
static celer_status put_model(writer *w, cJSON *root, celer_error *err)
{
    const celer_tokenizer *t = w->t;
    cJSON                 *m = put_typed(w, root, "model", "BPE");
    put_null(w, m, "dropout");
    if (t->bpe_unk >= 0) put_str(w, m, "unk_token", w->text[t->bpe_unk]);
    else put_null(w, m, "unk_token");
    put_null(w, m, "continuing_subword_prefix");
    put_null(w, m, "end_of_word_suffix");
    put_bool(w, m, "fuse_unk", t->fuse_unk);
    put_bool(w, m, "byte_fallback", t->byte_fallback);
    put_bool(w, m, "ignore_merges", t->ignore_merges);
    cJSON *vocab = put(w, m, "vocab", cJSON_CreateObject());
    for (int32_t i = 0; i < t->n_vocab && !w->oom; i++)
        if (tok_str_map_get(&t->ids, t->vocab, t->vocab[i].text, t->vocab[i].len) == i) /* else a later twin holds it */
            put_num(w, vocab, w->text[i], i);

    size_t n = 0;
    for (uint32_t s = 0; s < t->merges.cap; s++) n += t->merges.slots[s].key != UINT64_MAX;
    merge_row *rows = malloc((n ? n : 1) * sizeof *rows);
    if (!rows) return celer_fail(err, CELER_ERR_OOM, "tokenizer export: out of memory for %zu merges", n);
    n = 0;
    for (uint32_t s = 0; s < t->merges.cap; s++) {
        const tok_merge_slot *sl = &t->merges.slots[s]; /* key: left << 32 | right */
        if (sl->key == UINT64_MAX) continue;
        rows[n++] = (merge_row){sl->rank, (int32_t)(sl->key >> 32), (int32_t)(uint32_t)sl->key};
    }
    qsort(rows, n, sizeof *rows, cmp_rank);
    cJSON *merges = put(w, m, "merges", cJSON_CreateArray());
    for (size_t i = 0; i < n && !w->oom; i++) {
        cJSON *pair = put(w, merges, NULL, cJSON_CreateArray());
        put_str(w, pair, NULL, w->text[rows[i].left]);
        put_str(w, pair, NULL, w->text[rows[i].right]);
    }
    free(rows);
    return CELER_OK;
}

/* ---- the pipeline ------------------------------------------------------------------------- */

static void put_normalizer(writer *w, cJSON *root)
{
    const celer_tokenizer *t = w->t;
    if (!t->n_norm) {
        put_null(w, root, "normalizer");
        return;
    }
    cJSON *list = root, *seq = NULL;
    if (t->n_norm > 1) {
        seq  = put_typed(w, root, "normalizer", "Sequence");
        list = put(w, seq, "normalizers", cJSON_CreateArray());
    }
    const char *key = seq ? NULL : "normalizer";
    for (uint32_t i = 0; i < t->n_norm; i++) {
        switch (t->norm[i]) {
        case NORM_NFC: put_typed(w, list, key, "NFC"); break;
        case NORM_SPACE_TO_META: put_replace(w, list, key, " ", META); break;
        case NORM_PREPEND_META: put_str(w, put_typed(w, list, key, "Prepend"), "prepend", META); break;
        }
    }
}

static celer_status put_pre_tokenizer(writer *w, cJSON *root, celer_error *err)
{
    const celer_tokenizer *t = w->t;
    if (!t->n_pre) {
        put_null(w, root, "pre_tokenizer");
        return CELER_OK;
    }
    cJSON *list = root, *seq = NULL;
    if (t->n_pre > 1) {
        seq  = put_typed(w, root, "pre_tokenizer", "Sequence");
        list = put(w, seq, "pretokenizers", cJSON_CreateArray());
    }
    const char *key = seq ? NULL : "pre_tokenizer";
    for (uint32_t i = 0; i < t->n_pre; i++) {
        const tok_pre *p = &t->pre[i];
        cJSON         *o;
        switch (p->kind) {
        case PRE_DIGITS_INDIVIDUAL: put_bool(w, put_typed(w, list, key, "Digits"), "individual_digits", true); break;
        case PRE_SPLIT_ISOLATED:
            if (!p->pattern)
                return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer export: pre-tokenizer step %u splits by a "
                                  "pattern this tokenizer did not keep (it was read from a tokenizer.json; copy that "
                                  "file instead of writing a new one)", i + 1);
            o = put_typed(w, list, key, "Split");
            put_str(w, put(w, o, "pattern", cJSON_CreateObject()), "Regex", p->pattern);
            put_str(w, o, "behavior", "Isolated");
            put_bool(w, o, "invert", false);
            break;
        case PRE_BYTE_LEVEL: /* with a regex it is always GPT-2's, the one ByteLevel(use_regex) builds in */
            o = put_typed(w, list, key, "ByteLevel");
            put_bool(w, o, "add_prefix_space", false);
            put_bool(w, o, "trim_offsets", true);
            put_bool(w, o, "use_regex", p->re != NULL);
            break;
        case PRE_METASPACE_FIRST:
            o = put_typed(w, list, key, "Metaspace");
            put_str(w, o, "replacement", META);
            put_str(w, o, "prepend_scheme", "first");
            put_bool(w, o, "split", false);
            break;
        }
    }
    return CELER_OK;
}

static void put_decoder(writer *w, cJSON *root)
{
    const celer_tokenizer *t = w->t;
    if (t->decoder == DEC_BYTE_LEVEL) { /* the flags do not change decoding; these are what every mlx-lm matches */
        cJSON *o = put_typed(w, root, "decoder", "ByteLevel");
        put_bool(w, o, "add_prefix_space", false);
        put_bool(w, o, "trim_offsets", false);
        put_bool(w, o, "use_regex", false);
        return;
    }
    cJSON *list = put(w, put_typed(w, root, "decoder", "Sequence"), "decoders", cJSON_CreateArray());
    put_replace(w, list, NULL, META, " ");
    put_typed(w, list, NULL, "ByteFallback");
    put_typed(w, list, NULL, "Fuse");
    if (t->decoder == DEC_SPM_STRIP_LEAD) {
        cJSON *s = put_typed(w, list, NULL, "Strip");
        put_str(w, s, "content", " ");
        put_num(w, s, "start", 1);
        put_num(w, s, "stop", 0);
    }
}

/* The text a named token (BOS, EOS, UNK, PAD) goes by: its added token's, or NULL where it is
 * not one (a byte-level control token spelled outside the byte alphabet, which transformers
 * would otherwise add as a new special token). */
static const char *named(const writer *w, int32_t id)
{
    return id >= 0 && w->added_at[id] >= 0 ? w->text[id] : NULL;
}

/* One {"SpecialToken"} or {"Sequence"} piece of a template. */
static void put_piece(writer *w, cJSON *list, const char *kind, const char *id, int type_id)
{
    cJSON *o = put(w, put(w, list, NULL, cJSON_CreateObject()), kind, cJSON_CreateObject());
    put_str(w, o, "id", id);
    put_num(w, o, "type_id", type_id);
}

/* TemplateProcessing: [BOS] $A [EOS], and for pairs [BOS] $A [EOS] [BOS] $B [EOS] with type 1 on
 * the second half, as transformers' update_post_processor builds it. */
static void put_post_processor(writer *w, cJSON *root, bool add_bos, bool add_eos)
{
    const celer_tokenizer *t   = w->t;
    const char            *bos = add_bos ? w->text[t->bos_id] : NULL, *eos = add_eos ? w->text[t->eos_id] : NULL;
    cJSON                 *pp  = put_typed(w, root, "post_processor", "TemplateProcessing");
    cJSON *single = put(w, pp, "single", cJSON_CreateArray()), *pair = put(w, pp, "pair", cJSON_CreateArray());
    if (bos) put_piece(w, single, "SpecialToken", bos, 0);
    put_piece(w, single, "Sequence", "A", 0);
    if (eos) put_piece(w, single, "SpecialToken", eos, 0);
    for (int type_id = 0; type_id < 2; type_id++) {
        if (bos) put_piece(w, pair, "SpecialToken", bos, type_id);
        put_piece(w, pair, "Sequence", type_id ? "B" : "A", type_id);
        if (eos) put_piece(w, pair, "SpecialToken", eos, type_id);
    }
    cJSON *specials = put(w, pp, "special_tokens", cJSON_CreateObject());
    for (int k = 0; k < 2; k++) {
        const char *text = k ? eos : bos;
        int32_t     id   = k ? t->eos_id : t->bos_id;
        if (!text || (k && bos && !strcmp(bos, eos))) continue; /* one entry per text */
        cJSON *o = put(w, specials, text, cJSON_CreateObject());
        put_str(w, o, "id", text);
        put_num(w, put(w, o, "ids", cJSON_CreateArray()), NULL, id);
        put_str(w, put(w, o, "tokens", cJSON_CreateArray()), NULL, text);
    }
}

/* ---- added tokens --------------------------------------------------------------------------- */

/* An added token's flags as tokenizers serializes them: matched whole in the raw text. */
static void put_token_flags(writer *w, cJSON *o, const tok_added *a)
{
    put_bool(w, o, "single_word", false);
    put_bool(w, o, "lstrip", false);
    put_bool(w, o, "rstrip", false);
    put_bool(w, o, "normalized", false);
    put_bool(w, o, "special", a->special);
}

/* tokenizer.json's added_tokens, in id order. */
static void put_added_tokens(writer *w, cJSON *root)
{
    const celer_tokenizer *t    = w->t;
    cJSON                 *list = put(w, root, "added_tokens", cJSON_CreateArray());
    for (int32_t id = 0; id < t->n_vocab && !w->oom; id++) {
        if (w->added_at[id] < 0) continue;
        cJSON *o = put(w, list, NULL, cJSON_CreateObject());
        put_num(w, o, "id", id);
        put_str(w, o, "content", w->text[id]);
        put_token_flags(w, o, &t->added[w->added_at[id]]);
    }
}

/* tokenizer_config.json's added_tokens_decoder ({"id": {...}}, as transformers 4 writes it),
 * the same AddedTokens as tokenizer.json's, so that transformers adds none of its own. No
 * additional_special_tokens: the special flags do what skipping special tokens needs, and
 * all_special_ids stays the named tokens, as transformers' own GGUF loading leaves it. */
static void put_added_config(writer *w, cJSON *cfg)
{
    const celer_tokenizer *t   = w->t;
    cJSON                 *dec = put(w, cfg, "added_tokens_decoder", cJSON_CreateObject());
    for (int32_t id = 0; id < t->n_vocab && !w->oom; id++) {
        if (w->added_at[id] < 0) continue;
        char key[16];
        snprintf(key, sizeof key, "%d", id);
        cJSON *o = cJSON_CreateObject();
        if (!o || !dec || !cJSON_AddItemToObject(dec, key, o)) { /* a key of our own: copied */
            cJSON_Delete(o);
            w->oom = true;
            return;
        }
        put_str(w, o, "content", w->text[id]);
        put_token_flags(w, o, &t->added[w->added_at[id]]);
    }
}

/* ---- writing ----------------------------------------------------------------------------------- */

/* DIR/name through DIR/name.partial, renamed into place once flushed to disk. */
static celer_status write_file(const char *dir, const char *name, const char *text, celer_error *err)
{
    char path[4096], tmp[4096 + 16];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return celer_fail(err, CELER_ERR_INVALID, "tokenizer export: the path %s/%s is too long", dir, name);
    snprintf(tmp, sizeof tmp, "%s.partial", path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return celer_fail(err, CELER_ERR_IO, "tokenizer export: cannot create %s: %s; check that %s is a writable "
                          "directory", tmp, strerror(errno), dir);
    size_t n  = strlen(text);
    bool   ok = fwrite(text, 1, n, f) == n && fputc('\n', f) != EOF && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int    e  = errno;
    if (fclose(f) != 0 && ok) ok = false, e = errno;
    if (!ok) {
        unlink(tmp);
        return celer_fail(err, CELER_ERR_IO, "tokenizer export: cannot write %s: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        return celer_fail(err, CELER_ERR_IO, "tokenizer export: cannot rename %s to %s: %s", tmp, path, strerror(e));
    }
    return CELER_OK;
}

/* Prints tree (formatted or not) into DIR/name. */
static celer_status write_json(const cJSON *tree, bool formatted, const char *dir, const char *name, celer_error *err)
{
    char *text = formatted ? cJSON_Print(tree) : cJSON_PrintUnformatted(tree);
    if (!text) return celer_fail(err, CELER_ERR_OOM, "tokenizer export: out of memory printing %s/%s", dir, name);
    celer_status st = write_file(dir, name, text, err);
    cJSON_free(text);
    return st;
}

static celer_status build_tokenizer_json(writer *w, bool add_bos, bool add_eos, cJSON **out, celer_error *err)
{
    cJSON *root = *out = cJSON_CreateObject();
    if (!root) return celer_fail(err, CELER_ERR_OOM, "tokenizer export: out of memory");
    put_str(w, root, "version", "1.0");
    put_null(w, root, "truncation");
    put_null(w, root, "padding");
    put_added_tokens(w, root);
    put_normalizer(w, root);
    if (put_pre_tokenizer(w, root, err)) return err->code;
    put_post_processor(w, root, add_bos, add_eos);
    put_decoder(w, root);
    return put_model(w, root, err);
}

static celer_status build_config(writer *w, const char *chat_template, int64_t model_max_length, bool add_bos,
                                 bool add_eos, cJSON **out, celer_error *err)
{
    const celer_tokenizer *t   = w->t;
    cJSON                 *cfg = *out = cJSON_CreateObject();
    if (!cfg) return celer_fail(err, CELER_ERR_OOM, "tokenizer export: out of memory");
    /* the keys in the sorted order transformers writes them */
    put_bool(w, cfg, "add_bos_token", add_bos);
    put_bool(w, cfg, "add_eos_token", add_eos);
    put_added_config(w, cfg);
    if (named(w, t->bos_id)) put_str(w, cfg, "bos_token", named(w, t->bos_id));
    if (chat_template) put_str(w, cfg, "chat_template", chat_template);
    put_bool(w, cfg, "clean_up_tokenization_spaces", false);
    if (named(w, t->eos_id)) put_str(w, cfg, "eos_token", named(w, t->eos_id));
    if (model_max_length > 0) put_num(w, cfg, "model_max_length", (double)model_max_length);
    if (named(w, t->pad_id)) put_str(w, cfg, "pad_token", named(w, t->pad_id));
    put_str(w, cfg, "tokenizer_class", "PreTrainedTokenizerFast"); /* TokenizersBackend in transformers 5 */
    if (named(w, t->unk_id)) put_str(w, cfg, "unk_token", named(w, t->unk_id));
    return CELER_OK;
}

celer_status celer_tokenizer_write_hf(const celer_tokenizer *tok, const char *chat_template, int64_t model_max_length,
                                      const char *dir, celer_error *err)
{
    celer_error local;
    if (!err) err = &local;
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return celer_fail(err, CELER_ERR_IO, "tokenizer export: %s: %s; create the directory first", dir,
                          strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return celer_fail(err, CELER_ERR_IO, "tokenizer export: %s is not a directory; give the directory to write "
                          "tokenizer.json and tokenizer_config.json into", dir);
    if (chat_template && celer_utf8_validate(chat_template, strlen(chat_template)) != strlen(chat_template))
        return celer_fail(err, CELER_ERR_FORMAT, "tokenizer export: the chat template is not valid UTF-8, so "
                          "tokenizer_config.json cannot hold it");
    writer       w    = {.t = tok};
    cJSON       *root = NULL, *cfg = NULL;
    bool         add_bos = tok->add_bos && tok->bos_id >= 0, add_eos = tok->add_eos && tok->eos_id >= 0;
    celer_status st      = gather_texts(&w, err);
    for (int k = 0; k < 2 && !st; k++) {
        int32_t id = k ? tok->eos_id : tok->bos_id;
        if ((k ? add_eos : add_bos) && !named(&w, id))
            st = celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer export: the tokenizer adds %s token %d ('%.40s'), "
                            "which is not an added token, so transformers could not add it by name", k ? "EOS" : "BOS",
                            id, w.text[id]);
    }
    if (!st) st = build_tokenizer_json(&w, add_bos, add_eos, &root, err);
    if (!st && w.oom)
        st = celer_fail(err, CELER_ERR_OOM, "tokenizer export: out of memory building %s/tokenizer.json", dir);
    if (!st) st = write_json(root, false, dir, "tokenizer.json", err);
    cJSON_Delete(root);
    if (!st) st = build_config(&w, chat_template, model_max_length, add_bos, add_eos, &cfg, err);
    if (!st && w.oom)
        st = celer_fail(err, CELER_ERR_OOM, "tokenizer export: out of memory building %s/tokenizer_config.json", dir);
    if (!st) st = write_json(cfg, true, dir, "tokenizer_config.json", err);
    cJSON_Delete(cfg);
    free(w.text);
    free(w.pool);
    free(w.added_at);
    return st;
}

celer_status celer_tokenizer_write_hf_gguf(const celer_model_file *mf, const char *dir, celer_error *err)
{
    celer_error local;
    if (!err) err = &local;
    if (mf->kind != MODEL_FILE_GGUF)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer export: %s is a model directory; copy its "
                          "tokenizer.json and tokenizer_config.json as they are", mf->st.dir);
    const celer_gguf *g = &mf->gguf;
    celer_gguf_str    model = {0}, tmpl = {0};
    bool              has_model, has_tmpl;
    if (celer_gguf_get_str(g, "tokenizer.ggml.model", &model, &has_model, err) ||
        celer_gguf_get_str(g, "tokenizer.chat_template", &tmpl, &has_tmpl, err))
        return err->code;
    if (!has_model)
        return celer_fail(err, CELER_ERR_FORMAT, "tokenizer export: %s: no tokenizer.ggml.model; the file has no "
                          "tokenizer to write", g->name);
    if (!celer_gguf_str_eq(model, "gpt2") && !celer_gguf_str_eq(model, "llama"))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "tokenizer export: %s: tokenizer model '%.*s' cannot be written "
                          "as a Hugging Face tokenizer.json; celer writes 'gpt2' (byte-level BPE) and 'llama' "
                          "(SentencePiece BPE with byte fallback) vocabularies", g->name,
                          (int)(model.len < 40 ? model.len : 40), model.ptr);
    char *chat = NULL;
    if (has_tmpl) {
        if (memchr(tmpl.ptr, '\0', (size_t)tmpl.len))
            return celer_fail(err, CELER_ERR_FORMAT, "tokenizer export: %s: tokenizer.chat_template holds a NUL byte",
                              g->name);
        if (!(chat = malloc((size_t)tmpl.len + 1)))
            return celer_fail(err, CELER_ERR_OOM, "tokenizer export: out of memory for the chat template");
        memcpy(chat, tmpl.ptr, (size_t)tmpl.len);
        chat[tmpl.len] = '\0';
    }
    celer_tokenizer *tok = NULL;
    celer_status     st  = celer_tokenizer_load(&tok, mf, err);
    if (!st) st = celer_tokenizer_write_hf(tok, chat, mf->hp.n_ctx_train, dir, err);
    celer_tokenizer_free(tok);
    free(chat);
    return st;
}
