/* A tokenizer from GGUF metadata (tokenizer.ggml.*). The pipeline comes from two explicit keys
 * through tables: tokenizer.ggml.model picks the model family, tokenizer.ggml.pre the split
 * pattern. The choices follow what Hugging Face builds from the same metadata
 * (transformers' GGUF tokenizer mapping), except where that mapping is known to lose the
 * model's own pipeline: "smollm" splits digits one by one and "qwen2" normalizes to NFC, as
 * those models' published tokenizer.json files do. */
#include "core/error.h"
#include "formats/gguf.h"
#include "models/model_file.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- split patterns ---------------------------------------------------- */

#define CONTRACTIONS "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
static const char GPT2_SPLIT[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char LLAMA3_SPLIT[] = CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
                                                "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char QWEN2_SPLIT[] = CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
                                               "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char TEKKEN_SPLIT[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char GPT4O_SPLIT[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" CONTRACTIONS "?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" CONTRACTIONS "?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* tokenizer.ggml.pre of byte-level vocabularies → how text is split before BPE. */
typedef enum { SPLIT_GPT2, SPLIT_GPT2_DIGITS, SPLIT_REGEX, SPLIT_REGEX_NFC } split_kind;

static const struct {
    const char *pre;
    split_kind  kind;
    const char *pattern; /* SPLIT_REGEX*: the Split step's pattern */
} byte_level_pres[] = {
    {"default", SPLIT_GPT2, NULL},          {"gpt-2", SPLIT_GPT2, NULL},
    {"gpt2", SPLIT_GPT2, NULL},             {"smollm", SPLIT_GPT2_DIGITS, NULL},
    {"llama3", SPLIT_REGEX, LLAMA3_SPLIT},  {"llama-v3", SPLIT_REGEX, LLAMA3_SPLIT},
    {"llama-bpe", SPLIT_REGEX, LLAMA3_SPLIT}, {"falcon3", SPLIT_REGEX, LLAMA3_SPLIT},
    {"falcon-h1", SPLIT_REGEX, LLAMA3_SPLIT}, {"pixtral", SPLIT_REGEX, LLAMA3_SPLIT},
    {"dbrx", SPLIT_REGEX, LLAMA3_SPLIT},    {"smaug-bpe", SPLIT_REGEX, LLAMA3_SPLIT},
    {"lfm2", SPLIT_REGEX, LLAMA3_SPLIT},    {"tekken", SPLIT_REGEX, TEKKEN_SPLIT},
    {"qwen2", SPLIT_REGEX_NFC, QWEN2_SPLIT}, {"deepseek-r1-qwen", SPLIT_REGEX_NFC, QWEN2_SPLIT},
    {"megrez", SPLIT_REGEX, QWEN2_SPLIT},   {"gpt-4o", SPLIT_REGEX, GPT4O_SPLIT},
    {"llama4", SPLIT_REGEX, GPT4O_SPLIT},   {"minimax-m2", SPLIT_REGEX, GPT4O_SPLIT},
};

/* SentencePiece vocabularies whose architecture changes the pipeline. */
typedef enum { SPM_LLAMA, SPM_GEMMA, SPM_PHI3 } spm_kind;
static const struct {
    const char *arch;
    spm_kind    kind;
} spm_archs[] = {{"gemma", SPM_GEMMA}, {"gemma2", SPM_GEMMA}, {"gemma3", SPM_GEMMA}, {"phi3", SPM_PHI3}};

/* ---- reading the arrays ------------------------------------------------ */

static const celer_gguf_kv *array_of(const celer_gguf *g, const char *key, celer_gguf_type want, uint64_t n,
                                     bool required, celer_error *err)
{
    const celer_gguf_kv *kv = celer_gguf_find(g, key);
    if (!kv) {
        if (required) celer_fail(err, CELER_ERR_FORMAT, "gguf: %s: no %s; the file has no usable vocabulary", g->name, key);
        return NULL;
    }
    if (kv->type != CELER_GGUF_ARRAY || kv->array_type != want || (n && kv->array_len != n)) {
        celer_fail(err, CELER_ERR_FORMAT, "gguf: %s: %s must be an array of %llu %s", g->name, key,
                   (unsigned long long)n, celer_gguf_type_name(want));
        return NULL;
    }
    return kv;
}

static celer_status load_tokens(celer_tokenizer *t, const celer_gguf *g, celer_error *err)
{
    const celer_gguf_kv *toks = array_of(g, "tokenizer.ggml.tokens", CELER_GGUF_STRING, 0, true, err);
    if (!toks) return err->code;
    if (toks->array_len == 0 || toks->array_len > (1u << 24))
        return celer_fail(err, CELER_ERR_FORMAT, "gguf: %s: tokenizer.ggml.tokens has %llu entries", g->name,
                          (unsigned long long)toks->array_len);
    t->n_vocab = (int32_t)toks->array_len;
    const celer_gguf_kv *types =
        array_of(g, "tokenizer.ggml.token_type", CELER_GGUF_INT32, toks->array_len, false, err);
    if (!types && celer_gguf_find(g, "tokenizer.ggml.token_type")) return err->code;
    t->vocab = calloc((size_t)t->n_vocab, sizeof *t->vocab);
    if (!t->vocab) return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory for %d tokens", t->n_vocab);
    const uint8_t *cur = toks->data, *tcur = types ? types->data : NULL;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        celer_gguf_str s = celer_gguf_read_str(celer_gguf_array_next(toks, &cur));
        if (s.len > 65535)
            return celer_fail(err, CELER_ERR_FORMAT, "gguf: %s: token %d is %llu bytes long", g->name, i,
                              (unsigned long long)s.len);
        t->vocab[i] = (tok_entry){.text = s.ptr, .len = (uint32_t)s.len, .orig = s.ptr, .orig_len = (uint32_t)s.len,
                                  .type = TOKEN_NORMAL};
        if (tcur) t->vocab[i].type = (uint8_t)celer_gguf_read_int(celer_gguf_array_next(types, &tcur), CELER_GGUF_INT32);
    }
    return CELER_OK;
}

static celer_status get_id(const celer_gguf *g, const char *key, int32_t n_vocab, int32_t *id, celer_error *err)
{
    int64_t v     = -1;
    bool    found = false;
    if (celer_gguf_get_i64(g, key, &v, &found, err)) return err->code;
    if (found && (v < 0 || v >= n_vocab))
        return celer_fail(err, CELER_ERR_FORMAT, "gguf: %s: %s is %lld, outside the vocabulary of %d tokens", g->name,
                          key, (long long)v, n_vocab);
    *id = found ? (int32_t)v : -1;
    return CELER_OK;
}

/* ---- merges ------------------------------------------------------------ */

/* Merges listed in the file ("left right"), ranked in file order. */
static celer_status merges_from_list(celer_tokenizer *t, const celer_gguf *g, const celer_gguf_kv *kv, celer_error *err)
{
    if (tok_merge_map_init(&t->merges, (uint32_t)kv->array_len, err)) return err->code;
    const uint8_t *cur = kv->data;
    char           buf[1024];
    for (uint64_t i = 0; i < kv->array_len; i++) {
        celer_gguf_str m  = celer_gguf_read_str(celer_gguf_array_next(kv, &cur));
        const char    *sp = memchr(m.ptr, ' ', (size_t)m.len);
        int32_t        l = -1, r = -1, lr = -1;
        if (sp && m.len < sizeof buf) {
            size_t ln = (size_t)(sp - m.ptr), rn = (size_t)m.len - ln - 1;
            l = tok_str_map_get(&t->ids, t->vocab, m.ptr, ln);
            r = tok_str_map_get(&t->ids, t->vocab, sp + 1, rn);
            memcpy(buf, m.ptr, ln), memcpy(buf + ln, sp + 1, rn);
            lr = tok_str_map_get(&t->ids, t->vocab, buf, ln + rn);
        }
        if (l < 0 || r < 0 || lr < 0)
            return celer_fail(err, CELER_ERR_FORMAT,
                              "gguf: %s: tokenizer.ggml.merges[%llu] '%.*s' is not two tokens whose join is a token",
                              g->name, (unsigned long long)i, (int)(m.len < 64 ? m.len : 64), m.ptr);
        tok_merge_map_put(&t->merges, l, r, (uint32_t)i, lr);
    }
    return CELER_OK;
}

typedef struct {
    double   score;
    uint32_t len_l, len_r; /* in code points */
    uint64_t seq;          /* position in generation order: the stable-sort tie break */
    int32_t  l, r, merged;
} merge_cand;

static int cmp_cand(const void *a, const void *b)
{
    const merge_cand *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->len_l != y->len_l) return x->len_l > y->len_l ? -1 : 1;
    if (x->len_r != y->len_r) return x->len_r > y->len_r ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static uint32_t count_cps(const char *s, uint32_t n)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) k += ((uint8_t)s[i] & 0xC0) != 0x80;
    return k;
}

/* A SentencePiece vocabulary has no merges: every token that splits into two tokens gives a
 * merge, ranked best-first by the merged token's score (highest first), then by the longer left
 * part, the longer right part, and generation order — the order Hugging Face derives them in.
 * scores[i] of token i; by_position ranks by token order instead (Gemma's scores do not follow
 * its merge order). Tokens spelled the same keep the last id (as a Python dict). */
static celer_status merges_from_vocab(celer_tokenizer *t, const float *scores, celer_error *err)
{
    size_t      cap = 1024, n = 0;
    merge_cand *c   = malloc(cap * sizeof *c);
    if (!c) return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory deriving merges");
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const tok_entry *e = &t->vocab[id];
        if (tok_str_map_get(&t->ids, t->vocab, e->text, e->len) != id) continue; /* a later duplicate holds it */
        size_t first = n;
        for (uint32_t cut = 1; cut < e->len; cut++) {
            if (((uint8_t)e->text[cut] & 0xC0) == 0x80) continue; /* split between code points only */
            int32_t l = tok_str_map_get(&t->ids, t->vocab, e->text, cut);
            int32_t r = tok_str_map_get(&t->ids, t->vocab, e->text + cut, e->len - cut);
            if (l < 0 || r < 0) continue;
            if (n == cap) {
                merge_cand *g = realloc(c, (cap *= 2) * sizeof *c);
                if (!g) {
                    free(c);
                    return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory deriving merges");
                }
                c = g;
            }
            c[n++] = (merge_cand){.score = scores ? scores[id] : -(double)id, .len_l = count_cps(e->text, cut),
                                  .len_r = count_cps(e->text + cut, e->len - cut), .l = l, .r = r, .merged = id};
        }
        /* within one token, pairs go in (left id, right id) order */
        for (size_t i = first + 1; i < n; i++)
            for (size_t j = i; j > first && (c[j].l < c[j - 1].l || (c[j].l == c[j - 1].l && c[j].r < c[j - 1].r)); j--) {
                merge_cand tmp = c[j];
                c[j] = c[j - 1], c[j - 1] = tmp;
            }
    }
    for (size_t i = 0; i < n; i++) c[i].seq = i;
    qsort(c, n, sizeof *c, cmp_cand);
    celer_status st = tok_merge_map_init(&t->merges, (uint32_t)n, err);
    for (size_t i = 0; i < n && !st; i++) tok_merge_map_put(&t->merges, c[i].l, c[i].r, (uint32_t)i, c[i].merged);
    free(c);
    return st;
}

/* ---- the two families --------------------------------------------------- */

static celer_status add_pre(celer_tokenizer *t, tok_pre_kind kind, const char *pattern, celer_error *err)
{
    CELER_ASSERT(t->n_pre < TOK_MAX_PRE);
    tok_pre *p = &t->pre[t->n_pre++];
    *p         = (tok_pre){.kind = kind, .pattern = pattern}; /* pattern: a static string */
    return pattern ? celer_regex_compile(&p->re, pattern, err) : CELER_OK;
}

static celer_status setup_byte_level(celer_tokenizer *t, const celer_gguf *g, const char *pre, celer_error *err)
{
    t->model   = TOK_MODEL_BYTE_LEVEL;
    t->decoder = DEC_BYTE_LEVEL;
    size_t k   = 0, n = sizeof byte_level_pres / sizeof byte_level_pres[0];
    while (k < n && strcmp(byte_level_pres[k].pre, pre)) k++;
    if (k == n)
        return celer_fail(err, CELER_ERR_UNSUPPORTED,
                          "tokenizer: %s: pre-tokenizer '%s' is not known to celer, so its text splitting cannot be "
                          "reproduced; known: gpt-2, smollm, llama-bpe, qwen2, tekken, gpt-4o and their aliases",
                          g->name, pre);
    switch (byte_level_pres[k].kind) {
    case SPLIT_GPT2_DIGITS:
        if (add_pre(t, PRE_DIGITS_INDIVIDUAL, NULL, err)) return err->code;
        /* fall through */
    case SPLIT_GPT2: return add_pre(t, PRE_BYTE_LEVEL, GPT2_SPLIT, err);
    case SPLIT_REGEX_NFC: t->norm[t->n_norm++] = NORM_NFC; /* fall through */
    case SPLIT_REGEX:
        if (add_pre(t, PRE_SPLIT_ISOLATED, byte_level_pres[k].pattern, err)) return err->code;
        return add_pre(t, PRE_BYTE_LEVEL, NULL, err);
    }
    return CELER_OK;
}

/* Gemma stores tokens of two or more spaces as real spaces ("  ") but looks them up as "▁▁";
 * such all-whitespace tokens with a space in them are respelled as one ▁ per code point. */
static bool is_py_space(uint8_t c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

static celer_status respell_gemma_spaces(celer_tokenizer *t, celer_error *err)
{
    size_t extra = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        const tok_entry *e   = &t->vocab[i];
        bool             all = e->len > 0, space = false;
        for (uint32_t k = 0; k < e->len && all; k++) all = is_py_space((uint8_t)e->text[k]), space |= e->text[k] == ' ';
        if (all && space) extra += (size_t)e->len * 3;
    }
    if (!extra) return CELER_OK;
    t->pool = malloc(extra);
    if (!t->pool) return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory");
    char *p = t->pool;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        tok_entry *e   = &t->vocab[i];
        bool       all = e->len > 0, space = false;
        for (uint32_t k = 0; k < e->len && all; k++) all = is_py_space((uint8_t)e->text[k]), space |= e->text[k] == ' ';
        if (!(all && space)) continue;
        for (uint32_t k = 0; k < e->len; k++) memcpy(p + 3 * k, "\xe2\x96\x81", 3);
        e->text = p, e->len *= 3;
        p += e->len;
    }
    return CELER_OK;
}

static celer_status setup_spm(celer_tokenizer *t, const celer_gguf *g, const char *arch, celer_error *err)
{
    t->model         = TOK_MODEL_SPM;
    t->byte_fallback = true;
    t->fuse_unk      = true;
    spm_kind kind    = SPM_LLAMA;
    for (size_t i = 0; i < sizeof spm_archs / sizeof spm_archs[0]; i++)
        if (!strcmp(spm_archs[i].arch, arch)) kind = spm_archs[i].kind;
    if (kind == SPM_GEMMA) {
        t->norm[t->n_norm++] = NORM_SPACE_TO_META;
        t->decoder           = DEC_SPM;
        if (respell_gemma_spaces(t, err) || tok_str_map_build(&t->ids, t->vocab, t->n_vocab, err)) return err->code;
        t->bpe_unk = tok_str_map_get(&t->ids, t->vocab, "<unk>", 5); /* GemmaTokenizer's unknown token */
        return merges_from_vocab(t, NULL, err);
    }
    if (kind == SPM_PHI3) {
        t->norm[t->n_norm++] = NORM_PREPEND_META;
        t->norm[t->n_norm++] = NORM_SPACE_TO_META;
    } else if (add_pre(t, PRE_METASPACE_FIRST, NULL, err))
        return err->code;
    t->decoder = DEC_SPM_STRIP_LEAD;
    if (tok_str_map_build(&t->ids, t->vocab, t->n_vocab, err)) return err->code;
    const celer_gguf_kv *merges = celer_gguf_find(g, "tokenizer.ggml.merges");
    if (merges) {
        if (!array_of(g, "tokenizer.ggml.merges", CELER_GGUF_STRING, 0, true, err)) return err->code;
        return merges_from_list(t, g, merges, err);
    }
    const celer_gguf_kv *sc = array_of(g, "tokenizer.ggml.scores", CELER_GGUF_FLOAT32, (uint64_t)t->n_vocab, true, err);
    if (!sc) return err->code;
    /* the array sits at any byte offset in the file: copy it out rather than read it in place */
    float *scores = malloc((size_t)t->n_vocab * sizeof *scores);
    if (!scores) return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory for %d scores", t->n_vocab);
    memcpy(scores, sc->data, (size_t)t->n_vocab * sizeof *scores);
    celer_status st = merges_from_vocab(t, scores, err);
    free(scores);
    return st;
}

celer_status tok_load_gguf(celer_tokenizer **out, const celer_gguf *g, const char *arch, celer_error *err)
{
    *out               = NULL;
    celer_tokenizer *t = calloc(1, sizeof *t);
    if (t) t->bpe_unk = t->eot_id = t->eom_id = -1; /* none yet; HF GPT-2/Llama BPE drop unspellable characters */
    if (!t) return celer_fail(err, CELER_ERR_OOM, "tokenizer: out of memory");
    celer_gguf_str model = {0}, pre = {0};
    bool           has_model, has_pre;
    char           model_s[64] = "", pre_s[64] = "default";
    celer_status   st          = celer_gguf_get_str(g, "tokenizer.ggml.model", &model, &has_model, err);
    if (!st) st = celer_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &has_pre, err);
    if (!st && !has_model)
        st = celer_fail(err, CELER_ERR_FORMAT, "gguf: %s: no tokenizer.ggml.model; the file has no tokenizer", g->name);
    if (!st) {
        snprintf(model_s, sizeof model_s, "%.*s", (int)(model.len < 63 ? model.len : 63), model.ptr);
        if (has_pre) snprintf(pre_s, sizeof pre_s, "%.*s", (int)(pre.len < 63 ? pre.len : 63), pre.ptr);
        st = load_tokens(t, g, err);
    }
    if (!st) st = get_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos_id, err);
    if (!st) st = get_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos_id, err);
    if (!st) st = get_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk_id, err);
    if (!st) st = get_id(g, "tokenizer.ggml.padding_token_id", t->n_vocab, &t->pad_id, err);
    if (!st) st = get_id(g, "tokenizer.ggml.eot_token_id", t->n_vocab, &t->eot_id, err);
    if (!st) st = get_id(g, "tokenizer.ggml.eom_token_id", t->n_vocab, &t->eom_id, err);
    /* llama.cpp and Hugging Face add BOS to a SentencePiece vocabulary that does not say otherwise */
    t->add_bos = !strcmp(model_s, "llama");
    if (!st) st = celer_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos, NULL, err);
    if (!st) st = celer_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos, NULL, err);
    if (!st) {
        if (!strcmp(model_s, "gpt2")) {
            st = tok_str_map_build(&t->ids, t->vocab, t->n_vocab, err);
            const celer_gguf_kv *m = st ? NULL : array_of(g, "tokenizer.ggml.merges", CELER_GGUF_STRING, 0, true, err);
            if (!st) st = m ? merges_from_list(t, g, m, err) : err->code;
            if (!st) st = setup_byte_level(t, g, pre_s, err);
        } else if (!strcmp(model_s, "llama")) {
            st = setup_spm(t, g, arch, err);
        } else {
            st = celer_fail(err, CELER_ERR_UNSUPPORTED,
                            "tokenizer: %s: tokenizer model '%s' is not supported (celer reads 'gpt2' byte-level BPE "
                            "and 'llama' SentencePiece BPE)", g->name, model_s);
        }
    }
    if (!st) st = tok_finish(t, err);
    if (st) {
        celer_tokenizer_free(t);
        return st;
    }
    *out = t;
    return CELER_OK;
}

celer_status celer_tokenizer_load(celer_tokenizer **out, const celer_model_file *mf, celer_error *err)
{
    celer_error local;
    if (!err) err = &local;
    *out = NULL;
    if (mf->kind == MODEL_FILE_SAFETENSORS) return tok_load_json(out, mf, err); /* a model directory */
    return tok_load_gguf(out, &mf->gguf, mf->hp.arch, err);
}
