/* GGUF reader: every value type, nested arrays, alignment, lookups, and the corruptions a
 * download or a broken converter produces. Images are built in memory. */
#include "formats/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

/* ---- a little writer --------------------------------------------------- */

typedef struct {
    uint8_t buf[1 << 16];
    size_t  n;
} img;

static void put(img *b, const void *p, size_t n) { memcpy(b->buf + b->n, p, n), b->n += n; }
static void u32(img *b, uint32_t v) { put(b, &v, 4); }
static void u64(img *b, uint64_t v) { put(b, &v, 8); }
static void str(img *b, const char *s) { u64(b, strlen(s)), put(b, s, strlen(s)); }
static void key(img *b, const char *k, uint32_t type) { str(b, k), u32(b, type); }
static void pad(img *b, size_t a)
{
    while (b->n % a) b->buf[b->n++] = 0;
}

/* A valid file: one key of every type, a string array, an array of arrays, alignment 64, and
 * two tensors (an F32 vector and a Q8_0 matrix). Offsets of interesting fields are returned
 * for the corruption cases. */
typedef struct {
    size_t n_tensors_at, n_kv_at, str_len_at, tensor_type_at, tensor_off_at, tensor_ndim_at;
} marks;

static void build(img *b, marks *m)
{
    memset(b, 0, sizeof *b);
    put(b, "GGUF", 4);
    u32(b, 3);
    m->n_tensors_at = b->n;
    u64(b, 2);
    m->n_kv_at = b->n;
    u64(b, 16);
    key(b, "general.architecture", CELER_GGUF_STRING);
    m->str_len_at = b->n;
    str(b, "llama");
    key(b, "general.alignment", CELER_GGUF_UINT32), u32(b, 64);
    key(b, "t.u8", CELER_GGUF_UINT8), put(b, "\xff", 1);
    key(b, "t.i8", CELER_GGUF_INT8), put(b, "\x80", 1);
    key(b, "t.u16", CELER_GGUF_UINT16), put(b, "\xff\xff", 2);
    key(b, "t.i16", CELER_GGUF_INT16), put(b, "\x00\x80", 2);
    key(b, "llama.block_count", CELER_GGUF_UINT32), u32(b, 30);
    key(b, "t.i32", CELER_GGUF_INT32), u32(b, (uint32_t)-5);
    float f = 1e-5f;
    key(b, "llama.attention.layer_norm_rms_epsilon", CELER_GGUF_FLOAT32), put(b, &f, 4);
    key(b, "t.bool", CELER_GGUF_BOOL), put(b, "\x01", 1);
    key(b, "t.u64", CELER_GGUF_UINT64), u64(b, 1ull << 40);
    key(b, "t.i64", CELER_GGUF_INT64), u64(b, (uint64_t)-7);
    double d = 10000.0;
    key(b, "llama.rope.freq_base", CELER_GGUF_FLOAT64), put(b, &d, 8);
    key(b, "tokenizer.ggml.tokens", CELER_GGUF_ARRAY), u32(b, CELER_GGUF_STRING), u64(b, 3);
    str(b, "<s>"), str(b, "hello"), str(b, "");
    key(b, "t.nested", CELER_GGUF_ARRAY), u32(b, CELER_GGUF_ARRAY), u64(b, 2);
    u32(b, CELER_GGUF_UINT32), u64(b, 2), u32(b, 7), u32(b, 8);
    u32(b, CELER_GGUF_STRING), u64(b, 1), str(b, "deep");
    key(b, "llama.feed_forward_length", CELER_GGUF_ARRAY), u32(b, CELER_GGUF_INT32), u64(b, 3);
    u32(b, 1536), u32(b, 4096), u32(b, 2048);
    /* tensors */
    str(b, "norm.weight");
    m->tensor_ndim_at = b->n;
    u32(b, 1), u64(b, 64);
    u32(b, CELER_GGML_F32), u64(b, 0);
    str(b, "w.weight"), u32(b, 2), u64(b, 64), u64(b, 3);
    m->tensor_type_at = b->n;
    u32(b, CELER_GGML_Q8_0);
    m->tensor_off_at = b->n;
    u64(b, 256);
    pad(b, 64);
    for (int i = 0; i < 256 + 3 * 2 * 34; i++) b->buf[b->n++] = (uint8_t)i;
}

/* ---- the valid file ---------------------------------------------------- */

static int test_valid(void)
{
    static img  b;
    marks       m;
    celer_gguf  g;
    celer_error err = {0};
    build(&b, &m);
    CHECK(celer_gguf_parse(&g, b.buf, b.n, "mem", &err) == CELER_OK);
    CHECK(g.version == 3 && g.n_kv == 16 && g.n_tensors == 2 && g.alignment == 64);
    CHECK(g.data_offset % 64 == 0);

    uint64_t u;
    int64_t  i;
    double   x;
    bool     bl, found;
    celer_gguf_str s;
    CHECK(celer_gguf_get_str(&g, "general.architecture", &s, &found, &err) == CELER_OK && found);
    CHECK(celer_gguf_str_eq(s, "llama"));
    CHECK(celer_gguf_get_u64(&g, "t.u8", &u, NULL, &err) == CELER_OK && u == 255);
    CHECK(celer_gguf_get_i64(&g, "t.i8", &i, NULL, &err) == CELER_OK && i == -128);
    CHECK(celer_gguf_get_u64(&g, "t.u16", &u, NULL, &err) == CELER_OK && u == 65535);
    CHECK(celer_gguf_get_i64(&g, "t.i16", &i, NULL, &err) == CELER_OK && i == -32768);
    CHECK(celer_gguf_get_i64(&g, "t.i32", &i, NULL, &err) == CELER_OK && i == -5);
    CHECK(celer_gguf_get_u64(&g, "t.i32", &u, NULL, &err) == CELER_ERR_FORMAT && strstr(err.msg, "negative"));
    CHECK(celer_gguf_get_u64(&g, "t.u64", &u, NULL, &err) == CELER_OK && u == 1ull << 40);
    CHECK(celer_gguf_get_i64(&g, "t.i64", &i, NULL, &err) == CELER_OK && i == -7);
    CHECK(celer_gguf_get_f64(&g, "llama.rope.freq_base", &x, NULL, &err) == CELER_OK && x == 10000.0);
    CHECK(celer_gguf_get_f64(&g, "llama.attention.layer_norm_rms_epsilon", &x, NULL, &err) == CELER_OK &&
          (float)x == 1e-5f);
    CHECK(celer_gguf_get_bool(&g, "t.bool", &bl, NULL, &err) == CELER_OK && bl);
    CHECK(celer_gguf_get_str(&g, "t.u8", &s, NULL, &err) == CELER_ERR_FORMAT && strstr(err.msg, "'t.u8'") &&
          strstr(err.msg, "uint8"));
    found = true;
    CHECK(celer_gguf_get_u64(&g, "absent", &u, &found, &err) == CELER_OK && !found);
    CHECK(!celer_gguf_find(&g, "absent") && celer_gguf_find(&g, "t.nested"));

    const celer_gguf_kv *tok = celer_gguf_find(&g, "tokenizer.ggml.tokens");
    CHECK(tok && tok->type == CELER_GGUF_ARRAY && tok->array_type == CELER_GGUF_STRING && tok->array_len == 3);
    const uint8_t *cur = tok->data;
    const char    *want[] = {"<s>", "hello", ""};
    for (int k = 0; k < 3; k++) CHECK(celer_gguf_str_eq(celer_gguf_read_str(celer_gguf_array_next(tok, &cur)), want[k]));

    const celer_gguf_kv *nest = celer_gguf_find(&g, "t.nested");
    CHECK(nest && nest->array_type == CELER_GGUF_ARRAY && nest->array_len == 2);
    cur                 = nest->data;
    celer_gguf_kv first = celer_gguf_nested(celer_gguf_array_next(nest, &cur));
    CHECK(first.array_type == CELER_GGUF_UINT32 && first.array_len == 2);
    const uint8_t *c2 = first.data;
    CHECK(celer_gguf_read_int(celer_gguf_array_next(&first, &c2), CELER_GGUF_UINT32) == 7);
    CHECK(celer_gguf_read_int(celer_gguf_array_next(&first, &c2), CELER_GGUF_UINT32) == 8);
    celer_gguf_kv second = celer_gguf_nested(celer_gguf_array_next(nest, &cur));
    CHECK(second.array_type == CELER_GGUF_STRING && second.array_len == 1);
    CHECK(celer_gguf_str_eq(celer_gguf_read_str(second.data), "deep"));

    const celer_gguf_tensor *w = celer_gguf_find_tensor(&g, "w.weight");
    CHECK(w && w->type == CELER_GGML_Q8_0 && w->n_dims == 2 && w->ne[0] == 64 && w->ne[1] == 3);
    CHECK(w->n_bytes == 3 * 2 * 34 && w->data == b.buf + g.data_offset + 256 && w->data[0] == 0);
    const celer_gguf_tensor *nw = celer_gguf_find_tensor(&g, "norm.weight");
    CHECK(nw && nw->n_bytes == 256 && nw->data == b.buf + g.data_offset && nw->ne[1] == 1);
    CHECK(!celer_gguf_find_tensor(&g, "w"));
    celer_gguf_close(&g);
    celer_gguf_close(&g); /* twice is safe */
    return 0;
}

/* ---- corruptions ------------------------------------------------------- */

typedef enum { AT_N_TENSORS, AT_N_KV, AT_STR_LEN, AT_TYPE, AT_OFFSET, AT_NDIM, AT_MAGIC, AT_VERSION, TRUNCATE } where;

static int expect_bad(where w, uint64_t value, celer_status want, const char *needle)
{
    static img  b;
    marks       m;
    celer_gguf  g;
    celer_error err = {0};
    build(&b, &m);
    size_t at[] = {m.n_tensors_at, m.n_kv_at, m.str_len_at, m.tensor_type_at, m.tensor_off_at, m.tensor_ndim_at, 0, 4};
    size_t n    = b.n;
    if (w == TRUNCATE)
        n = (size_t)value;
    else if (w == AT_TYPE || w == AT_NDIM || w == AT_VERSION)
        memcpy(b.buf + at[w], &(uint32_t){(uint32_t)value}, 4);
    else if (w == AT_MAGIC)
        memcpy(b.buf, "GGUX", 4);
    else
        memcpy(b.buf + at[w], &value, 8);
    celer_status s = celer_gguf_parse(&g, b.buf, n, "bad.gguf", &err);
    celer_gguf_close(&g);
    if (s != want || !strstr(err.msg, needle) || !strstr(err.msg, "bad.gguf")) {
        fprintf(stderr, "case %d/%llu: got status %d, message: %s (wanted '%s')\n", (int)w, (unsigned long long)value,
                (int)s, err.msg, needle);
        return 1;
    }
    return 0;
}

static int test_corrupt(void)
{
    static img b;
    marks      m;
    build(&b, &m);
    int fails = 0;
    fails += expect_bad(AT_MAGIC, 0, CELER_ERR_FORMAT, "not a GGUF file");
    fails += expect_bad(AT_VERSION, 1, CELER_ERR_UNSUPPORTED, "version 1");
    fails += expect_bad(AT_VERSION, 0x03000000u, CELER_ERR_UNSUPPORTED, "big-endian");
    fails += expect_bad(AT_VERSION, 4, CELER_ERR_UNSUPPORTED, "version 4");
    fails += expect_bad(AT_N_TENSORS, 1ull << 60, CELER_ERR_FORMAT, "tensor count 1152921504606846976");
    fails += expect_bad(AT_N_KV, 1ull << 60, CELER_ERR_FORMAT, "metadata count");
    fails += expect_bad(AT_STR_LEN, 1ull << 62, CELER_ERR_FORMAT, "truncated");
    fails += expect_bad(AT_TYPE, 99, CELER_ERR_FORMAT, "unknown type 99");
    fails += expect_bad(AT_TYPE, 4, CELER_ERR_FORMAT, "unknown type 4"); /* a removed type number */
    fails += expect_bad(AT_OFFSET, 100, CELER_ERR_FORMAT, "not a multiple of the alignment 64");
    fails += expect_bad(AT_OFFSET, 1ull << 40, CELER_ERR_FORMAT, "past the end");
    fails += expect_bad(AT_OFFSET, 0, CELER_ERR_FORMAT, "overlap");
    fails += expect_bad(AT_NDIM, 0, CELER_ERR_FORMAT, "0 dimensions");
    fails += expect_bad(AT_NDIM, 5, CELER_ERR_FORMAT, "5 dimensions");
    for (size_t n = 0; n < b.n; n += n < 200 ? 1 : 97) /* every header prefix, then samples */
        fails += expect_bad(TRUNCATE, n, CELER_ERR_FORMAT, n < 4 ? "not a GGUF" : "bad.gguf");
    return fails != 0;
}

int main(void)
{
    int fails = test_valid() + test_corrupt();
    if (fails) return 1;
    printf("test_gguf: ok\n");
    return 0;
}
