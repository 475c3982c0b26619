/* safetensors writer: what it writes reads back through the reader with the same names, dtypes,
 * shapes, bytes and metadata, in any piece sizes; and a write given up or left short leaves no
 * file at the target. */
#include "core/error.h"
#include "formats/safetensors_write.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "scratch.h"

static char dir[64];

static bool exists(const char *p)
{
    struct stat s;
    return stat(p, &s) == 0;
}

static int test_round_trip(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/a.safetensors", dir);
    /* names with a quote, a backslash and a control character; a 0-byte tensor; a scalar */
    const celer_st_decl t[] = {
        {.name = "w\"q\\x\x01", .dtype = CELER_ST_U32, .n_dims = 2, .shape = {3, 5}},
        {.name = "empty", .dtype = CELER_ST_BF16, .n_dims = 2, .shape = {0, 7}},
        {.name = "s", .dtype = CELER_ST_F32, .n_dims = 0},
        {.name = "b", .dtype = CELER_ST_BF16, .n_dims = 1, .shape = {9}},
    };
    const celer_st_meta meta[] = {{"format", "mlx"}, {"k\"", "v\n"}};
    uint8_t             data[60 + 0 + 4 + 18];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 7 + 1);

    celer_error     err;
    celer_st_writer w;
    CHECK(!celer_st_writer_open(&w, path, t, 4, meta, 2, &err));
    CHECK(!exists(path)); /* only the partial file until finish */
    uint64_t due;
    CHECK(celer_st_writer_current(&w, &due) == 0 && due == 60);
    size_t at = 0;
    for (size_t piece = 1; at < sizeof data; piece = piece * 3 % 17 + 1) {
        size_t n = sizeof data - at < piece ? sizeof data - at : piece;
        CHECK(!celer_st_writer_put(&w, data + at, n, &err));
        at += n;
    }
    CHECK(celer_st_writer_put(&w, data, 1, &err) == CELER_ERR_INVALID); /* past the end */
    CHECK(!celer_st_writer_finish(&w, &err));
    CHECK(exists(path));

    celer_safetensors st;
    CHECK(!celer_safetensors_open(&st, path, &err));
    CHECK(st.n_tensors == 4 && st.n_meta == 2);
    CHECK(!strcmp(st.meta[0].key, "format") && !strcmp(st.meta[0].value, "mlx"));
    CHECK(!strcmp(st.meta[1].key, "k\"") && !strcmp(st.meta[1].value, "v\n"));
    CHECK(st.data_offset % 8 == 0);
    size_t off = 0;
    for (int i = 0; i < 4; i++) {
        const celer_st_tensor *x = celer_safetensors_find(&st, t[i].name);
        CHECK(x && x->dtype == t[i].dtype && x->n_dims == t[i].n_dims);
        for (uint32_t d = 0; d < t[i].n_dims; d++) CHECK(x->shape[d] == t[i].shape[d]);
        uint64_t bytes;
        CHECK(!celer_st_decl_bytes(&t[i], &bytes, &err) && bytes == x->n_bytes);
        CHECK(x->offset == off && !memcmp(x->data, data + off, bytes));
        off += bytes;
    }
    celer_safetensors_close(&st);
    return 0;
}

static int test_failures(void)
{
    char path[128], partial[160];
    snprintf(path, sizeof path, "%s/b.safetensors", dir);
    snprintf(partial, sizeof partial, "%s.partial", path);
    celer_error     err;
    celer_st_writer w;

    const celer_st_decl twice[] = {{.name = "x", .dtype = CELER_ST_F32, .n_dims = 1, .shape = {1}},
                                   {.name = "x", .dtype = CELER_ST_F32, .n_dims = 1, .shape = {1}}};
    CHECK(celer_st_writer_open(&w, path, twice, 2, NULL, 0, &err) == CELER_ERR_INVALID && strstr(err.msg, "'x'"));
    CHECK(!exists(path) && !exists(partial));

    const celer_st_decl odd[] = {{.name = "f4", .dtype = CELER_ST_F4, .n_dims = 1, .shape = {3}}};
    CHECK(celer_st_writer_open(&w, path, odd, 1, NULL, 0, &err) == CELER_ERR_INVALID && strstr(err.msg, "f4"));

    const celer_st_decl meta_name[] = {{.name = "__metadata__", .dtype = CELER_ST_U8, .n_dims = 1, .shape = {1}}};
    CHECK(celer_st_writer_open(&w, path, meta_name, 1, NULL, 0, &err) == CELER_ERR_INVALID);

    /* short: finish names the tensor still owed bytes and leaves nothing */
    const celer_st_decl two[] = {{.name = "a", .dtype = CELER_ST_U8, .n_dims = 1, .shape = {4}},
                                 {.name = "b", .dtype = CELER_ST_U8, .n_dims = 1, .shape = {4}}};
    CHECK(!celer_st_writer_open(&w, path, two, 2, NULL, 0, &err));
    CHECK(!celer_st_writer_put(&w, "abcdef", 6, &err));
    CHECK(celer_st_writer_current(&w, NULL) == 1);
    CHECK(celer_st_writer_finish(&w, &err) == CELER_ERR_INVALID && strstr(err.msg, "'b'") && strstr(err.msg, "2 bytes"));
    CHECK(!exists(path) && !exists(partial));

    /* given up */
    CHECK(!celer_st_writer_open(&w, path, two, 2, NULL, 0, &err));
    CHECK(exists(partial));
    celer_st_writer_abort(&w);
    CHECK(!exists(path) && !exists(partial));

    /* a directory that does not exist */
    char bad[160];
    snprintf(bad, sizeof bad, "%s/no/such/c.safetensors", dir);
    CHECK(celer_st_writer_open(&w, bad, two, 2, NULL, 0, &err) == CELER_ERR_IO && strstr(err.msg, "no/such"));
    return 0;
}

int main(void)
{
    if (!scratch_make(dir, sizeof dir, "stw")) return 1;
    int fails = test_round_trip() + test_failures();
    if (!scratch_remove(dir)) fails++;
    if (!fails) printf("test_safetensors_write: ok\n");
    return fails != 0;
}
