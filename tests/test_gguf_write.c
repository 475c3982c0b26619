/* GGUF writer: a file with every metadata type and a few tensors, written in odd-sized chunks to
 * a temporary directory and read back with the reader; plus the writer's refusals and its
 * promise that an unfinished file never replaces the destination. */
#include "formats/gguf.h"
#include "formats/gguf_write.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "scratch.h"

static char dir[256];

static const char *path_in(const char *name)
{
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

/* Files in the test directory (to catch leftover temporary files). */
static int count_files(void)
{
    DIR *d = opendir(dir);
    int  n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

typedef struct {
    const char     *name;
    celer_ggml_type type;
    uint32_t        n_dims;
    uint64_t        ne[4];
} tspec;

static const tspec specs[] = {
    {"norm.weight", CELER_GGML_F32, 1, {7, 1, 1, 1}},
    {"blk.0.w.weight", CELER_GGML_Q8_0, 2, {64, 3, 1, 1}},
    {"experts.weight", CELER_GGML_Q4_K, 3, {256, 2, 2, 1}},
    {"half.weight", CELER_GGML_F16, 4, {5, 1, 2, 1}},
};
#define N_T (sizeof specs / sizeof specs[0])

static uint8_t byte_at(size_t t, uint64_t i) { return (uint8_t)(i * 31 + t * 7 + 1); }

static int write_sample(const char *path, uint32_t alignment)
{
    celer_error       err = {0};
    celer_gguf_writer w   = {0};
    bool              existed = access(path, F_OK) == 0;
    CHECK(celer_gguf_writer_open(&w, path, &err) == CELER_OK);
    if (alignment) CHECK(celer_gguf_writer_set_alignment(&w, alignment, &err) == CELER_OK);
    uint8_t  u8 = 200;
    int8_t   i8 = -100;
    uint16_t u16 = 60000;
    int16_t  i16 = -30000;
    int32_t  i32 = -2000000000;
    uint64_t u64 = 18000000000000000000ull;
    int64_t  i64 = -9000000000000000000ll;
    double   f64 = 3.141592653589793;
    CHECK(celer_gguf_writer_add(&w, "t.u8", CELER_GGUF_UINT8, &u8, &err) == CELER_OK);
    CHECK(celer_gguf_writer_add(&w, "t.i8", CELER_GGUF_INT8, &i8, &err) == CELER_OK);
    CHECK(celer_gguf_writer_add(&w, "t.u16", CELER_GGUF_UINT16, &u16, &err) == CELER_OK);
    CHECK(celer_gguf_writer_add(&w, "t.i16", CELER_GGUF_INT16, &i16, &err) == CELER_OK);
    CHECK(celer_gguf_writer_add_u32(&w, "t.u32", 4000000000u, &err) == CELER_OK);
    CHECK(celer_gguf_writer_add(&w, "t.i32", CELER_GGUF_INT32, &i32, &err) == CELER_OK);
    CHECK(celer_gguf_writer_add_f32(&w, "t.f32", 1.5f, &err) == CELER_OK);
    CHECK(celer_gguf_writer_add_bool(&w, "t.bool", true, &err) == CELER_OK);
    CHECK(celer_gguf_writer_add_str(&w, "t.str", "héllo", &err) == CELER_OK);
    CHECK(celer_gguf_writer_add_str(&w, "t.empty", "", &err) == CELER_OK);
    CHECK(celer_gguf_writer_add(&w, "t.u64", CELER_GGUF_UINT64, &u64, &err) == CELER_OK);
    CHECK(celer_gguf_writer_add(&w, "t.i64", CELER_GGUF_INT64, &i64, &err) == CELER_OK);
    CHECK(celer_gguf_writer_add(&w, "t.f64", CELER_GGUF_FLOAT64, &f64, &err) == CELER_OK);
    const char *const strs[] = {"<s>", "", "\xe2\x96\x81hi"};
    const int32_t     ints[] = {1, -2, 3, 2147483647};
    const float       fl[]   = {0.5f, -1.25f};
    const bool        bl[]   = {true, false, true};
    CHECK(celer_gguf_writer_add_array(&w, "a.str", CELER_GGUF_STRING, strs, 3, &err) == CELER_OK);
    CHECK(celer_gguf_writer_add_array(&w, "a.i32", CELER_GGUF_INT32, ints, 4, &err) == CELER_OK);
    CHECK(celer_gguf_writer_add_array(&w, "a.f32", CELER_GGUF_FLOAT32, fl, 2, &err) == CELER_OK);
    CHECK(celer_gguf_writer_add_array(&w, "a.bool", CELER_GGUF_BOOL, bl, 3, &err) == CELER_OK);
    CHECK(celer_gguf_writer_add_array(&w, "a.empty", CELER_GGUF_UINT8, NULL, 0, &err) == CELER_OK);
    /* refusals while collecting */
    CHECK(celer_gguf_writer_add_u32(&w, "t.u32", 1, &err) == CELER_ERR_INVALID && strstr(err.msg, "'t.u32' given twice"));
    CHECK(celer_gguf_writer_add(&w, "t.bad", CELER_GGUF_STRING, "x", &err) == CELER_ERR_INVALID);
    uint64_t bad_ne[2] = {100, 2};
    CHECK(celer_gguf_writer_add_tensor(&w, "bad", CELER_GGML_Q4_0, 2, bad_ne, &err) == CELER_ERR_INVALID &&
          strstr(err.msg, "'bad'") && strstr(err.msg, "Q4_0"));
    for (size_t t = 0; t < N_T; t++)
        CHECK(celer_gguf_writer_add_tensor(&w, specs[t].name, specs[t].type, specs[t].n_dims, specs[t].ne, &err) == CELER_OK);
    CHECK(celer_gguf_writer_add_tensor(&w, specs[0].name, CELER_GGML_F32, 1, specs[0].ne, &err) == CELER_ERR_INVALID &&
          strstr(err.msg, "given twice"));
    CHECK(celer_gguf_writer_begin_data(&w, NULL, NULL, &err) == CELER_OK);
    CHECK(celer_gguf_writer_add_u32(&w, "late", 1, &err) == CELER_ERR_INVALID);
    /* all tensor bytes in 13-byte chunks that cross tensor boundaries */
    size_t   total = 0;
    for (size_t t = 0; t < N_T; t++) total += celer_gguf_tensor_size(specs[t].type, specs[t].n_dims, specs[t].ne);
    uint8_t *all = malloc(total), *p = all;
    CHECK(all);
    for (size_t t = 0; t < N_T; t++) {
        uint64_t n = celer_gguf_tensor_size(specs[t].type, specs[t].n_dims, specs[t].ne);
        for (uint64_t i = 0; i < n; i++) *p++ = byte_at(t, i);
    }
    for (size_t off = 0; off < total; off += 13)
        CHECK(celer_gguf_writer_write(&w, all + off, total - off < 13 ? total - off : 13, &err) == CELER_OK);
    free(all);
    CHECK(celer_gguf_writer_write(&w, "x", 1, &err) == CELER_ERR_INVALID);
    CHECK(access(w.tmp_path, F_OK) == 0);
    CHECK(existed || access(path, F_OK) != 0); /* not in place before finish */
    CHECK(celer_gguf_writer_finish(&w, &err) == CELER_OK);
    celer_gguf_writer_free(&w);
    return 0;
}

static int check_sample(const char *path, uint32_t alignment)
{
    celer_error err = {0};
    celer_gguf  g   = {0};
    CHECK(celer_gguf_open(&g, path, &err) == CELER_OK);
    CHECK(g.version == 3);
    CHECK(g.alignment == (alignment ? alignment : 32));
    CHECK(g.n_kv == 18 + (alignment ? 1 : 0));
    uint64_t u;
    int64_t  i;
    double   f;
    bool     b;
    celer_gguf_str s;
    CHECK(celer_gguf_get_u64(&g, "t.u8", &u, NULL, &err) == CELER_OK && u == 200);
    CHECK(celer_gguf_get_i64(&g, "t.i8", &i, NULL, &err) == CELER_OK && i == -100);
    CHECK(celer_gguf_get_u64(&g, "t.u16", &u, NULL, &err) == CELER_OK && u == 60000);
    CHECK(celer_gguf_get_i64(&g, "t.i16", &i, NULL, &err) == CELER_OK && i == -30000);
    CHECK(celer_gguf_get_u64(&g, "t.u32", &u, NULL, &err) == CELER_OK && u == 4000000000u);
    CHECK(celer_gguf_get_i64(&g, "t.i32", &i, NULL, &err) == CELER_OK && i == -2000000000);
    CHECK(celer_gguf_get_f64(&g, "t.f32", &f, NULL, &err) == CELER_OK && f == 1.5);
    CHECK(celer_gguf_get_bool(&g, "t.bool", &b, NULL, &err) == CELER_OK && b);
    CHECK(celer_gguf_get_str(&g, "t.str", &s, NULL, &err) == CELER_OK && celer_gguf_str_eq(s, "héllo"));
    CHECK(celer_gguf_get_str(&g, "t.empty", &s, NULL, &err) == CELER_OK && s.len == 0);
    CHECK(celer_gguf_get_u64(&g, "t.u64", &u, NULL, &err) == CELER_OK && u == 18000000000000000000ull);
    CHECK(celer_gguf_get_i64(&g, "t.i64", &i, NULL, &err) == CELER_OK && i == -9000000000000000000ll);
    CHECK(celer_gguf_get_f64(&g, "t.f64", &f, NULL, &err) == CELER_OK && f == 3.141592653589793);
    CHECK(celer_gguf_find(&g, "t.u8")->type == CELER_GGUF_UINT8 && celer_gguf_find(&g, "t.i16")->type == CELER_GGUF_INT16);
    CHECK(celer_gguf_find(&g, "t.f64")->type == CELER_GGUF_FLOAT64 && celer_gguf_find(&g, "t.bool")->type == CELER_GGUF_BOOL);

    const celer_gguf_kv *kv = celer_gguf_find(&g, "a.str");
    CHECK(kv && kv->type == CELER_GGUF_ARRAY && kv->array_type == CELER_GGUF_STRING && kv->array_len == 3);
    const uint8_t *cur = kv->data;
    CHECK(celer_gguf_str_eq(celer_gguf_read_str(celer_gguf_array_next(kv, &cur)), "<s>"));
    CHECK(celer_gguf_str_eq(celer_gguf_read_str(celer_gguf_array_next(kv, &cur)), ""));
    CHECK(celer_gguf_str_eq(celer_gguf_read_str(celer_gguf_array_next(kv, &cur)), "\xe2\x96\x81hi"));
    kv = celer_gguf_find(&g, "a.i32");
    CHECK(kv && kv->array_type == CELER_GGUF_INT32 && kv->array_len == 4);
    cur = kv->data;
    const int64_t want_i[] = {1, -2, 3, 2147483647};
    for (int k = 0; k < 4; k++) CHECK(celer_gguf_read_int(celer_gguf_array_next(kv, &cur), kv->array_type) == want_i[k]);
    kv = celer_gguf_find(&g, "a.f32");
    CHECK(kv && kv->array_type == CELER_GGUF_FLOAT32 && kv->array_len == 2);
    cur = kv->data;
    CHECK(celer_gguf_read_float(celer_gguf_array_next(kv, &cur), kv->array_type) == 0.5);
    CHECK(celer_gguf_read_float(celer_gguf_array_next(kv, &cur), kv->array_type) == -1.25);
    kv = celer_gguf_find(&g, "a.bool");
    CHECK(kv && kv->array_type == CELER_GGUF_BOOL && kv->array_len == 3 && !memcmp(kv->data, "\1\0\1", 3));
    kv = celer_gguf_find(&g, "a.empty");
    CHECK(kv && kv->array_type == CELER_GGUF_UINT8 && kv->array_len == 0);

    CHECK(g.n_tensors == N_T);
    uint64_t expect_off = 0, align = alignment ? alignment : 32;
    for (size_t t = 0; t < N_T; t++) {
        const celer_gguf_tensor *x = &g.tensors[t];
        CHECK(celer_gguf_str_eq(x->name, specs[t].name));
        CHECK(celer_gguf_find_tensor(&g, specs[t].name) == x);
        CHECK(x->type == specs[t].type && x->n_dims == specs[t].n_dims);
        for (int d = 0; d < 4; d++) CHECK(x->ne[d] == specs[t].ne[d]);
        uint64_t n = celer_gguf_tensor_size(specs[t].type, specs[t].n_dims, specs[t].ne);
        CHECK(x->offset == expect_off && x->offset % align == 0 && x->n_bytes == n);
        CHECK((g.data_offset % align) == 0);
        for (uint64_t k = 0; k < n; k++) CHECK(x->data[k] == byte_at(t, k));
        expect_off = (expect_off + n + align - 1) / align * align;
    }
    CHECK(g.file.size == g.data_offset + expect_off);
    celer_gguf_close(&g);
    return 0;
}

static int test_roundtrip(void)
{
    CHECK(write_sample(path_in("a.gguf"), 0) == 0);
    CHECK(check_sample(path_in("a.gguf"), 0) == 0);
    CHECK(write_sample(path_in("b.gguf"), 64) == 0);
    CHECK(check_sample(path_in("b.gguf"), 64) == 0);
    /* writing over an existing file replaces it */
    CHECK(write_sample(path_in("a.gguf"), 128) == 0);
    CHECK(check_sample(path_in("a.gguf"), 128) == 0);
    CHECK(count_files() == 2);
    return 0;
}

static int test_failures(void)
{
    celer_error       err = {0};
    celer_gguf_writer w   = {0};
    celer_gguf_writer_free(&w); /* zeroed: nothing to do */
    celer_gguf_writer_free(NULL);
    /* a missing directory: the error names the file and the OS error */
    CHECK(celer_gguf_writer_open(&w, path_in("no/such/dir/x.gguf"), &err) == CELER_ERR_IO);
    CHECK(strstr(err.msg, "no/such/dir/x.gguf") && strstr(err.msg, "No such file or directory"));
    celer_gguf_writer_free(&w);
    CHECK(celer_gguf_writer_open(&w, path_in("c.gguf"), &err) == CELER_OK);
    CHECK(celer_gguf_writer_set_alignment(&w, 48, &err) == CELER_ERR_INVALID);
    /* abandoned before and after the header: no file, no temporary left */
    celer_gguf_writer_free(&w);
    CHECK(access(path_in("c.gguf"), F_OK) != 0 && count_files() == 2);
    uint64_t ne[1] = {64};
    CHECK(celer_gguf_writer_open(&w, path_in("a.gguf"), &err) == CELER_OK);
    CHECK(celer_gguf_writer_add_tensor(&w, "x", CELER_GGML_F32, 1, ne, &err) == CELER_OK);
    CHECK(celer_gguf_writer_begin_data(&w, NULL, NULL, &err) == CELER_OK);
    CHECK(celer_gguf_writer_write(&w, "abcd", 4, &err) == CELER_OK);
    CHECK(celer_gguf_writer_finish(&w, &err) == CELER_ERR_INVALID && strstr(err.msg, "'x' has 4 of its 256 bytes"));
    celer_gguf_writer_free(&w);
    CHECK(count_files() == 2);
    CHECK(check_sample(path_in("a.gguf"), 128) == 0); /* the old file is untouched */
    /* a file with no tensors is valid */
    CHECK(celer_gguf_writer_open(&w, path_in("c.gguf"), &err) == CELER_OK);
    CHECK(celer_gguf_writer_add_str(&w, "general.architecture", "none", &err) == CELER_OK);
    CHECK(celer_gguf_writer_finish(&w, &err) == CELER_OK);
    celer_gguf_writer_free(&w);
    celer_gguf g = {0};
    CHECK(celer_gguf_open(&g, path_in("c.gguf"), &err) == CELER_OK && g.n_tensors == 0 && g.n_kv == 1);
    celer_gguf_close(&g);
    return 0;
}

int main(void)
{
    if (!scratch_make(dir, sizeof dir, "gguf-write")) return 1;
    int rc = test_roundtrip() || test_failures();
    if (!scratch_remove(dir)) rc = 1;
    if (!rc) printf("test_gguf_write: ok\n");
    return rc;
}
