/* safetensors reader: good files, sharded directories, and every bad case named in the
 * reader's contract giving the right status and a message with the key fact. */
#include "core/error.h"
#include "formats/safetensors.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check_err.h"
#include "scratch.h"

static char root[64];

static int write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return 1;
    size_t w = n ? fwrite(data, 1, n, f) : 0;
    return fclose(f) != 0 || w != n;
}

/* 8-byte length, header, data; *len gets the total. data may be NULL (zeros). */
static uint8_t *make_st(const char *header, size_t data_len, size_t *len)
{
    size_t   h = strlen(header);
    uint8_t *b = calloc(1, 8 + h + data_len + 1);
    if (!b) return NULL;
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    for (size_t i = 0; i < data_len; i++) b[8 + h + i] = (uint8_t)i;
    *len = 8 + h + data_len;
    return b;
}

static int write_st(const char *path, const char *header, size_t data_len)
{
    size_t   n = 0;
    uint8_t *b = make_st(header, data_len, &n);
    int      r = !b || write_file(path, b, n);
    free(b);
    return r;
}

static char *path_in(const char *sub, const char *name)
{
    static char buf[4][512];
    static int  k;
    char       *p = buf[k++ % 4];
    snprintf(p, 512, "%s/%s%s%s", root, sub, name ? "/" : "", name ? name : "");
    return p;
}

static int make_dir(const char *sub)
{
    return mkdir(path_in(sub, NULL), 0700) != 0;
}

/* Parses header + data_len bytes in memory; the status, with err filled. */
static celer_status parse_hdr(const char *header, size_t data_len, celer_error *err)
{
    size_t            n  = 0;
    uint8_t          *b  = make_st(header, data_len, &n);
    celer_safetensors st = {0};
    celer_status      s  = celer_safetensors_parse(&st, b, n, "t.safetensors", err);
    if (s != CELER_OK && (st.tensors || st.name)) s = CELER_ERR_DEVICE; /* not left zeroed */
    celer_safetensors_close(&st);
    free(b);
    return s;
}

#define T(name, dt, shape, b, e) "\"" name "\":{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static int test_good(void)
{
    celer_error err = {0};
    const char *hdr = "{\"__metadata__\":{\"format\":\"mlx\",\"note\":\"x\"}," T("b", "BF16", "[4]", 24, 32) ","
                      T("a", "F32", "[2,3]", 0, 24) "," T("s", "I64", "[]", 32, 40) ","
                      T("z", "U8", "[0,5]", 40, 40) "}   ";
    CHECK(write_st(path_in("good.safetensors", NULL), hdr, 40) == 0);
    celer_safetensors st = {0};
    CHECK(celer_safetensors_open(&st, path_in("good.safetensors", NULL), &err) == CELER_OK);
    CHECK(st.n_tensors == 4 && st.n_meta == 2);
    CHECK(st.header_len == strlen(hdr) && st.data_offset == 8 + strlen(hdr));
    const celer_st_tensor *a = celer_safetensors_find(&st, "a");
    CHECK(a && a->dtype == CELER_ST_F32 && a->n_dims == 2 && a->shape[0] == 2 && a->shape[1] == 3);
    CHECK(a->shape[2] == 1 && a->n_elems == 6 && a->n_bytes == 24 && a->offset == 0);
    CHECK(a->data == st.file.data + st.data_offset && a->data[5] == 5);
    const celer_st_tensor *b = celer_safetensors_find(&st, "b");
    CHECK(b && b->dtype == CELER_ST_BF16 && b->data == st.file.data + st.data_offset + 24 && b->data[0] == 24);
    const celer_st_tensor *s = celer_safetensors_find(&st, "s");
    CHECK(s && s->n_dims == 0 && s->n_elems == 1 && s->n_bytes == 8);
    const celer_st_tensor *z = celer_safetensors_find(&st, "z");
    CHECK(z && z->n_elems == 0 && z->n_bytes == 0);
    CHECK(!celer_safetensors_find(&st, "c") && !celer_safetensors_find(&st, ""));
    CHECK(strcmp(st.tensors[0].name, "a") == 0 && strcmp(st.tensors[3].name, "z") == 0); /* sorted */
    CHECK(celer_safetensors_meta(&st, "format") && strcmp(celer_safetensors_meta(&st, "format"), "mlx") == 0);
    CHECK(!celer_safetensors_meta(&st, "nope"));
    celer_safetensors_close(&st);
    celer_safetensors_close(&st); /* twice is fine */
    celer_safetensors_close(NULL);

    CHECK(parse_hdr("{}", 0, &err) == CELER_OK); /* no tensors */
    CHECK(parse_hdr("{\"__metadata__\":{}}", 0, &err) == CELER_OK);
    CHECK(parse_hdr("{" T("f4", "F4", "[4]", 0, 2) "," T("e", "F8_E8M0", "[2]", 2, 4) "}", 4, &err) == CELER_OK);
    /* a gap between tensors and trailing bytes are accepted */
    CHECK(parse_hdr("{" T("a", "U8", "[2]", 0, 2) "," T("b", "U8", "[2]", 4, 6) "}", 9, &err) == CELER_OK);
    CHECK(strcmp(celer_st_dtype_name(CELER_ST_F8_E4M3), "F8_E4M3") == 0 && celer_st_dtype_bits(CELER_ST_F4) == 4);
    CHECK(strcmp(celer_st_dtype_name(CELER_ST_DTYPE_COUNT), "?") == 0);
    return 0;
}

static int test_bad(void)
{
    celer_error       err = {0};
    celer_safetensors st  = {0};
    uint8_t           small[4] = {1, 0, 0, 0};
    CHECK_ERR(celer_safetensors_parse(&st, small, sizeof small, "t", &err), CELER_ERR_FORMAT, "truncated");
    CHECK_ERR(celer_safetensors_parse(&st, NULL, 0, "t", &err), CELER_ERR_FORMAT, "truncated");
    uint8_t big[16] = {0x00, 0x10, 0, 0, 0, 0, 0, 0, '{', '}'}; /* N = 4096 */
    CHECK_ERR(celer_safetensors_parse(&st, big, sizeof big, "t", &err), CELER_ERR_FORMAT,
              "header length 4096 is larger than the file (16 bytes); the download looks truncated");
    uint8_t huge[16] = {0, 0, 0, 0, 0, 0, 0, 0x10};
    CHECK_ERR(celer_safetensors_parse(&st, huge, sizeof huge, "t", &err), CELER_ERR_FORMAT, "limit");
    uint8_t one[9] = {1, 0, 0, 0, 0, 0, 0, 0, '{'};
    CHECK_ERR(celer_safetensors_parse(&st, one, sizeof one, "t", &err), CELER_ERR_FORMAT, "too small");
    CHECK_ERR(parse_hdr("[1, 2]", 0, &err), CELER_ERR_FORMAT, "not a JSON object");
    CHECK_ERR(parse_hdr("{\"a\": {\"dtype\": }", 0, &err), CELER_ERR_FORMAT, "malformed JSON near byte 16");
    CHECK(strstr(err.msg, "t.safetensors") && strstr(err.msg, "header"));
    CHECK_ERR(parse_hdr("{" T("w", "Q4_K", "[2]", 0, 2) "}", 2, &err), CELER_ERR_FORMAT, "'w' has dtype 'Q4_K'");
    CHECK_ERR(parse_hdr("{\"w\":{\"shape\":[2],\"data_offsets\":[0,2]}}", 2, &err), CELER_ERR_FORMAT, "'dtype'");
    CHECK_ERR(parse_hdr("{\"w\":{\"dtype\":\"U8\",\"shape\":2,\"data_offsets\":[0,2]}}", 2, &err), CELER_ERR_FORMAT,
              "'w': 'shape' is missing or not an array");
    CHECK_ERR(parse_hdr("{" T("w", "U8", "[2,-1]", 0, 2) "}", 2, &err), CELER_ERR_FORMAT, "shape[1]");
    CHECK_ERR(parse_hdr("{" T("w", "U8", "[2.5]", 0, 2) "}", 2, &err), CELER_ERR_FORMAT, "shape[0]");
    CHECK_ERR(parse_hdr("{" T("w", "U8", "[\"2\"]", 0, 2) "}", 2, &err), CELER_ERR_FORMAT, "shape[0]");
    CHECK_ERR(parse_hdr("{" T("w", "U8", "[1,1,1,1,1,1,1,1,1]", 0, 1) "}", 1, &err), CELER_ERR_FORMAT,
              "9 dimensions");
    CHECK_ERR(parse_hdr("{" T("w", "U8", "[4294967296,4294967296,2]", 0, 2) "}", 2, &err), CELER_ERR_FORMAT,
              "element count overflows");
    CHECK_ERR(parse_hdr("{" T("w", "F64", "[4294967296,536870912]", 0, 2) "}", 2, &err), CELER_ERR_FORMAT,
              "byte size overflows");
    CHECK_ERR(parse_hdr("{" T("w", "F32", "[2,3]", 0, 20) "}", 24, &err), CELER_ERR_FORMAT,
              "'w' is F32 [2, 3], 24 bytes, but data_offsets [0, 20] span 20");
    CHECK_ERR(parse_hdr("{" T("w", "U8", "[0]", 8, 4) "}", 8, &err), CELER_ERR_FORMAT, "end before they begin");
    CHECK_ERR(parse_hdr("{" T("w", "U8", "[16]", 0, 16) "}", 8, &err), CELER_ERR_FORMAT,
              "'w' ends at file byte 79, but the file has 71 bytes; the download looks truncated");
    CHECK_ERR(parse_hdr("{" T("a", "F32", "[4]", 0, 16) "," T("b", "F32", "[4]", 8, 24) "}", 24, &err),
              CELER_ERR_FORMAT, "tensors 'a' [0, 16) and 'b' [8, 24) overlap");
    CHECK_ERR(parse_hdr("{" T("b", "U8", "[8]", 0, 8) "," T("c", "U8", "[1]", 9, 10) "," T("a", "U8", "[2]", 4, 6) "}",
                        10, &err),
              CELER_ERR_FORMAT, "'b' [0, 8) and 'a' [4, 6) overlap");
    CHECK_ERR(parse_hdr("{" T("a", "U8", "[2]", 0, 2) "," T("a", "U8", "[2]", 2, 4) "}", 4, &err), CELER_ERR_FORMAT,
              "tensor 'a' appears twice");
    CHECK_ERR(parse_hdr("{\"__metadata__\":{\"k\":1}}", 0, &err), CELER_ERR_FORMAT, "__metadata__['k']");
    CHECK_ERR(parse_hdr("{\"__metadata__\":[]}", 0, &err), CELER_ERR_FORMAT, "'__metadata__' must be an object");
    CHECK_ERR(parse_hdr("{\"w\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,1,2]}}", 2, &err),
              CELER_ERR_FORMAT, "'w': 'data_offsets' must be [begin, end]");
    CHECK_ERR(parse_hdr("{\"w\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,\"2\"]}}", 2, &err),
              CELER_ERR_FORMAT, "data_offsets");
    CHECK_ERR(parse_hdr("{" T("w", "F4", "[3]", 0, 2) "}", 2, &err), CELER_ERR_FORMAT, "whole bytes");
    CHECK_ERR(parse_hdr("{\"w\":5}", 0, &err), CELER_ERR_FORMAT, "'w' must be an object");
    CHECK_ERR(celer_safetensors_open(&st, path_in("nope.safetensors", NULL), &err), CELER_ERR_IO, "nope.safetensors");
    CHECK(st.tensors == NULL && st.name == NULL);
    return 0;
}

#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"

static int write_index(const char *sub, const char *weight_map)
{
    char buf[2048];
    snprintf(buf, sizeof buf, "{\"metadata\":{\"total_size\":40},\"weight_map\":%s}", weight_map);
    return write_file(path_in(sub, "model.safetensors.index.json"), buf, strlen(buf));
}

static int write_shards(const char *sub)
{
    if (make_dir(sub)) return 1;
    return write_st(path_in(sub, SHARD1), "{" T("a", "F32", "[2]", 0, 8) "," T("b", "F32", "[4]", 8, 24) "}", 24) ||
           write_st(path_in(sub, SHARD2), "{\"__metadata__\":{\"format\":\"pt\"}," T("c", "U8", "[16]", 0, 16) "}", 16);
}

static int test_sharded(void)
{
    celer_error           err = {0};
    celer_safetensors_set s   = {0};
    CHECK(write_shards("idx") == 0);
    CHECK(write_index("idx", "{\"a\":\"" SHARD1 "\",\"b\":\"" SHARD1 "\",\"c\":\"" SHARD2 "\"}") == 0);
    CHECK(celer_safetensors_set_open(&s, path_in("idx", NULL), &err) == CELER_OK);
    CHECK(s.n_files == 2 && s.n_tensors == 3 && s.index_path && strstr(s.index_path, "index.json"));
    const celer_st_tensor *c = celer_safetensors_set_find(&s, "c");
    CHECK(c && c->n_bytes == 16 && c->data == s.files[1].file.data + s.files[1].data_offset && c->data[3] == 3);
    CHECK(celer_safetensors_set_find(&s, "a") == celer_safetensors_find(&s.files[0], "a"));
    CHECK(!celer_safetensors_set_find(&s, "d"));
    CHECK(strcmp(s.tensors[2].tensor->name, "c") == 0 && s.tensors[2].file == 1);
    celer_safetensors_set_close(&s);
    celer_safetensors_set_close(&s);

    /* the index is preferred; with no index, model*.safetensors in name order */
    CHECK(write_shards("scan") == 0);
    CHECK(write_file(path_in("scan", "other.safetensors"), "x", 1) == 0); /* not model*: ignored */
    CHECK(celer_safetensors_set_open(&s, path_in("scan", NULL), &err) == CELER_OK);
    CHECK(s.n_files == 2 && s.n_tensors == 3 && !s.index_path && strstr(s.files[0].name, SHARD1));
    celer_safetensors_set_close(&s);

    CHECK(make_dir("single") == 0);
    CHECK(write_st(path_in("single", "model.safetensors"), "{" T("w", "U8", "[3]", 0, 3) "}", 3) == 0);
    CHECK(write_st(path_in("single", "model-extra.safetensors"), "{" T("w", "U8", "[3]", 0, 3) "}", 3) == 0);
    CHECK(celer_safetensors_set_open(&s, path_in("single", NULL), &err) == CELER_OK); /* model.safetensors only */
    CHECK(s.n_files == 1 && celer_safetensors_set_find(&s, "w"));
    celer_safetensors_set_close(&s);
    CHECK(celer_safetensors_set_open(&s, path_in("single", "model-extra.safetensors"), &err) == CELER_OK);
    CHECK(s.n_files == 1 && s.n_tensors == 1);
    celer_safetensors_set_close(&s);
    return 0;
}

static int test_sharded_bad(void)
{
    celer_error           err = {0};
    celer_safetensors_set s   = {0};
    CHECK(make_dir("empty") == 0);
    CHECK_ERR(celer_safetensors_set_open(&s, path_in("empty", NULL), &err), CELER_ERR_IO,
              "no model.safetensors.index.json");
    CHECK_ERR(celer_safetensors_set_open(&s, path_in("absent", NULL), &err), CELER_ERR_IO, "absent");

    CHECK(write_shards("miss") == 0);
    CHECK(write_index("miss", "{\"a\":\"" SHARD1 "\",\"x\":\"model-00003-of-00003.safetensors\"}") == 0);
    CHECK_ERR(celer_safetensors_set_open(&s, path_in("miss", NULL), &err), CELER_ERR_IO,
              "names shard 'model-00003-of-00003.safetensors', which cannot be read");
    CHECK(s.files == NULL && s.dir == NULL);

    CHECK(write_shards("notin") == 0);
    CHECK(write_index("notin", "{\"a\":\"" SHARD1 "\",\"c\":\"" SHARD1 "\"}") == 0);
    CHECK_ERR(celer_safetensors_set_open(&s, path_in("notin", NULL), &err), CELER_ERR_FORMAT,
              "says tensor 'c' is in shard '" SHARD1 "', but that shard has no such tensor");
    CHECK(strstr(err.msg, "notin/model.safetensors.index.json"));

    CHECK(write_shards("esc") == 0);
    CHECK(write_index("esc", "{\"a\":\"../idx/" SHARD1 "\"}") == 0);
    CHECK_ERR(celer_safetensors_set_open(&s, path_in("esc", NULL), &err), CELER_ERR_FORMAT,
              "shard '../idx/" SHARD1 "', which is not a plain file name");
    CHECK(write_index("esc", "{\"a\":\"..\"}") == 0);
    CHECK_ERR(celer_safetensors_set_open(&s, path_in("esc", NULL), &err), CELER_ERR_FORMAT, "not a plain file name");
    CHECK(write_index("esc", "{\"a\":7}") == 0);
    CHECK_ERR(celer_safetensors_set_open(&s, path_in("esc", NULL), &err), CELER_ERR_FORMAT,
              "weight_map['a'] must be a shard file name");
    CHECK(write_index("esc", "{\"a\":\"" SHARD1 "\",\"a\":\"" SHARD2 "\"}") == 0);
    CHECK_ERR(celer_safetensors_set_open(&s, path_in("esc", NULL), &err), CELER_ERR_FORMAT,
              "lists tensor 'a' twice");
    CHECK(write_index("esc", "{}") == 0);
    CHECK_ERR(celer_safetensors_set_open(&s, path_in("esc", NULL), &err), CELER_ERR_FORMAT, "'weight_map' is empty");
    CHECK(write_file(path_in("esc", "model.safetensors.index.json"), "{\"metadata\":{}}", 15) == 0);
    CHECK_ERR(celer_safetensors_set_open(&s, path_in("esc", NULL), &err), CELER_ERR_FORMAT, "no 'weight_map'");
    CHECK(write_file(path_in("esc", "model.safetensors.index.json"), "{\"weight_map\":{", 15) == 0);
    CHECK_ERR(celer_safetensors_set_open(&s, path_in("esc", NULL), &err), CELER_ERR_FORMAT, "malformed JSON near byte");

    /* one tensor in two shards */
    CHECK(make_dir("dup") == 0);
    CHECK(write_st(path_in("dup", "model-a.safetensors"), "{" T("x", "U8", "[1]", 0, 1) "}", 1) == 0);
    CHECK(write_st(path_in("dup", "model-b.safetensors"), "{" T("x", "U8", "[1]", 0, 1) "}", 1) == 0);
    CHECK_ERR(celer_safetensors_set_open(&s, path_in("dup", NULL), &err), CELER_ERR_FORMAT, "tensor 'x' is in both");
    CHECK(strstr(err.msg, "model-a.safetensors") && strstr(err.msg, "model-b.safetensors"));

    /* a bad shard: its own error, naming it */
    CHECK(make_dir("badshard") == 0);
    CHECK(write_st(path_in("badshard", "model.safetensors"), "{" T("x", "U8", "[4]", 0, 4) "}", 1) == 0);
    CHECK_ERR(celer_safetensors_set_open(&s, path_in("badshard", NULL), &err), CELER_ERR_FORMAT, "truncated");
    CHECK(strstr(err.msg, "badshard/model.safetensors"));
    return 0;
}

/* Every seed of the safetensors fuzzer opens cleanly. */
static int test_corpus(void)
{
    const char *dir = "tests/fuzz/corpus/safetensors";
    DIR        *d   = opendir(dir);
    CHECK(d != NULL);
    int            n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strstr(de->d_name, ".safetensors")) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        celer_error       err = {0};
        celer_safetensors st  = {0};
        celer_status      s   = celer_safetensors_open(&st, path, &err);
        if (s != CELER_OK) fprintf(stderr, "%s\n", err.msg);
        CHECK(s == CELER_OK);
        if (strstr(path, "mlx_4bit")) {
            const celer_st_tensor *w = celer_safetensors_find(&st, "model.layers.0.self_attn.q_proj.weight");
            CHECK(w && w->dtype == CELER_ST_U32 && w->shape[1] == 16 && STREQ(celer_safetensors_meta(&st, "format"), "mlx"));
        }
        celer_safetensors_close(&st);
        n++;
    }
    closedir(d);
    CHECK(n >= 4);
    return 0;
}

int main(void)
{
    if (!scratch_make(root, sizeof root, "test-st")) return 1;
    int fails = test_good() + test_bad() + test_sharded() + test_sharded_bad() + test_corpus();
    if (!scratch_remove(root)) fails++;
    if (fails) fprintf(stderr, "test_safetensors: %d group(s) failed\n", fails);
    return fails != 0;
}
