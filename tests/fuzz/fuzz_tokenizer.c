/* libFuzzer target: encode and decode with small byte-level and SentencePiece vocabularies
 * built in memory, on arbitrary bytes. Besides crashes it checks two properties: byte-level
 * BPE is lossless (decode(encode(x)) == x for valid UTF-8 x without special tokens), and the
 * streaming decoder's output, concatenated, equals the whole decode. */
#include "core/utf8.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* ---- a GGUF image in memory ---- */
typedef struct {
    uint8_t *p;
    size_t   n, cap;
} img;

static void put(img *b, const void *s, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p   = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void u32(img *b, uint32_t v) { put(b, &v, 4); }
static void u64(img *b, uint64_t v) { put(b, &v, 8); }
static void str(img *b, const char *s, size_t n) { u64(b, n), put(b, s, n); }
static void key(img *b, const char *k, uint32_t t) { str(b, k, strlen(k)), u32(b, t); }

typedef struct {
    char  *text[600];
    size_t len[600];
    int    type[600];
    float  score[600];
    int    n;
} vocab;

static void add(vocab *v, const char *s, size_t n, int type, float score)
{
    v->text[v->n] = malloc(n + 1);
    memcpy(v->text[v->n], s, n);
    v->len[v->n] = n, v->type[v->n] = type, v->score[v->n] = score;
    v->n++;
}

static img build(const char *model, const char *arch, const vocab *v, const char *const *merges, int n_merges)
{
    img b = {0};
    put(&b, "GGUF", 4), u32(&b, 3), u64(&b, 0), u64(&b, 6);
    key(&b, "general.architecture", CELER_GGUF_STRING), str(&b, arch, strlen(arch));
    key(&b, "tokenizer.ggml.model", CELER_GGUF_STRING), str(&b, model, strlen(model));
    key(&b, "tokenizer.ggml.tokens", CELER_GGUF_ARRAY), u32(&b, CELER_GGUF_STRING), u64(&b, (uint64_t)v->n);
    for (int i = 0; i < v->n; i++) str(&b, v->text[i], v->len[i]);
    key(&b, "tokenizer.ggml.token_type", CELER_GGUF_ARRAY), u32(&b, CELER_GGUF_INT32), u64(&b, (uint64_t)v->n);
    for (int i = 0; i < v->n; i++) u32(&b, (uint32_t)v->type[i]);
    key(&b, "tokenizer.ggml.scores", CELER_GGUF_ARRAY), u32(&b, CELER_GGUF_FLOAT32), u64(&b, (uint64_t)v->n);
    for (int i = 0; i < v->n; i++) put(&b, &v->score[i], 4);
    key(&b, "tokenizer.ggml.merges", CELER_GGUF_ARRAY), u32(&b, CELER_GGUF_STRING), u64(&b, (uint64_t)n_merges);
    for (int i = 0; i < n_merges; i++) str(&b, merges[i], strlen(merges[i]));
    return b;
}

static img             imgs[3]; /* the files the tokenizers point into, for the whole run */
static celer_gguf       files[3];
static celer_tokenizer *toks[3];

static void spell(uint8_t byte, char out[4], size_t *n) { *n = celer_utf8_encode(tok_byte_to_cp(byte), out); }

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    celer_error err;
    /* byte-level: the 256-byte alphabet, a few merges, a control token */
    vocab bl = {0};
    for (int b = 0; b < 256; b++) {
        char   s[4];
        size_t n;
        spell((uint8_t)b, s, &n);
        add(&bl, s, n, TOKEN_NORMAL, 0);
    }
    static const char *merges[] = {"Ġ t", "h e", "Ġt he", "i n", "Ġ a", "Ġa n", "Ġan d", "e r", "Ġ Ġ", "ĠĠ ĠĠ"};
    static const char *merged[] = {"Ġt", "he", "Ġthe", "in", "Ġa", "Ġan", "Ġand", "er", "ĠĠ", "ĠĠĠĠ"};
    for (int i = 0; i < 10; i++) add(&bl, merged[i], strlen(merged[i]), TOKEN_NORMAL, 0);
    add(&bl, "<|s|>", 5, TOKEN_CONTROL, 0);
    /* SentencePiece: unk, bos, eos, byte tokens, pieces with scores */
    vocab sp = {0};
    add(&sp, "<unk>", 5, TOKEN_UNKNOWN, 0), add(&sp, "<s>", 3, TOKEN_CONTROL, 0), add(&sp, "</s>", 4, TOKEN_CONTROL, 0);
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        add(&sp, s, 6, TOKEN_BYTE, 0);
    }
    static const char *pieces[] = {"\xe2\x96\x81", "a", "b", "c", "\xe2\x96\x81" "a", "ab", "\xe2\x96\x81" "ab", "bc", "abc",
                                   "  ", "\xc3\xa9", "\xe2\x96\x81\xe2\x96\x81"};
    for (int i = 0; i < 12; i++) add(&sp, pieces[i], strlen(pieces[i]), TOKEN_NORMAL, -(float)i);
    imgs[0] = build("gpt2", "llama", &bl, merges, 10);
    imgs[1] = build("llama", "llama", &sp, NULL, 0);
    imgs[2] = build("llama", "gemma3", &sp, NULL, 0);
    for (int i = 0; i < bl.n; i++) free(bl.text[i]);
    for (int i = 0; i < sp.n; i++) free(sp.text[i]);
    for (int i = 0; i < 3; i++) {
        if (celer_gguf_parse(&files[i], imgs[i].p, imgs[i].n, "fuzz", &err) ||
            tok_load_gguf(&toks[i], &files[i], i == 2 ? "gemma3" : "llama", &err)) {
            fprintf(stderr, "fuzz_tokenizer: setup %d: %s\n", i, err.msg);
            abort();
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const celer_tokenizer *t    = toks[data[0] % 3];
    celer_encode_opts      opts = {.add_special = data[0] & 4, .parse_special = data[0] & 8};
    const char            *text = (const char *)data + 1;
    size_t                 n    = size - 1;
    celer_error            err;
    int32_t               *ids;
    size_t                 n_ids;
    if (celer_tokenizer_encode(t, text, n, opts, &ids, &n_ids, &err) == CELER_OK) {
        char  *back;
        size_t back_n;
        if (celer_tokenizer_decode(t, ids, n_ids, &back, &back_n, &err)) abort();
        if (t->model == TOK_MODEL_BYTE_LEVEL && !opts.add_special && (back_n != n || memcmp(back, text, n))) {
            fprintf(stderr, "byte-level round trip lost text\n");
            abort();
        }
        /* streaming equals whole */
        celer_detok d;
        celer_detok_init(&d, t);
        char  *cat   = malloc(back_n * 2 + 64);
        size_t cat_n = 0;
        for (size_t i = 0; i <= n_ids; i++) {
            const char *piece;
            size_t      pn;
            if ((i < n_ids ? celer_detok_push(&d, ids[i], &piece, &pn, &err) : celer_detok_flush(&d, &piece, &pn, &err)))
                abort();
            if (cat_n + pn > back_n * 2 + 64) abort();
            memcpy(cat + cat_n, piece, pn), cat_n += pn;
        }
        if (t->model == TOK_MODEL_BYTE_LEVEL && (cat_n != back_n || memcmp(cat, back, back_n))) {
            fprintf(stderr, "streamed text differs from decoded text\n");
            abort();
        }
        celer_detok_free(&d);
        free(cat);
        free(back);
        free(ids);
    }
    /* arbitrary ids */
    int32_t raw[64];
    size_t  k = 0;
    for (size_t i = 0; i + 1 < n && k < 64; i += 2) raw[k++] = (int32_t)((data[1 + i] | data[2 + i] << 8) % (t->n_vocab + 2)) - 1;
    char  *out;
    size_t out_n;
    if (celer_tokenizer_decode(t, raw, k, &out, &out_n, &err) == CELER_OK) {
        if (celer_utf8_validate(out, out_n) != out_n) abort(); /* decode output is always valid UTF-8 */
        free(out);
    }
    return 0;
}
