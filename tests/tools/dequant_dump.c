/* dequant_dump: celer's reference dequantizers and activation quantizers on files, for
 * tests/reference/test_dequant_gguf.py to compare with gguf-py.
 *
 *   dequant_dump MODEL.gguf OUT [--rows N] [NAME...]
 *       Dequantizes the first N rows (default: all) of each named tensor (default: every
 *       tensor, in file order) and writes OUT as "CDQ1" then, per tensor, little-endian:
 *           u32 name_len, name bytes, u32 ggml type, u64 n_values, n_values f32
 *       A tensor of a type celer cannot dequantize gets n_values 0 (and a note on stderr).
 *   dequant_dump --quantize q8_0|q8_K IN OUT
 *       IN is raw f32 (a multiple of 32 or 256 values); OUT is the raw blocks.
 * Exit status: 0 ok, 1 usage, 2 bad input, 3 i/o or memory. */
#include "formats/gguf.h"
#include "quant/dequant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void)
{
    fprintf(stderr, "usage: dequant_dump MODEL.gguf OUT [--rows N] [NAME...]\n"
                    "       dequant_dump --quantize q8_0|q8_K IN OUT\n");
    return 1;
}

static int write_all(FILE *f, const void *p, size_t n) { return fwrite(p, 1, n, f) == n ? 0 : -1; }

/* One record for t: its first rows (at most max_rows; all when max_rows < 0). */
static int dump_tensor(FILE *out, const celer_gguf_tensor *t, int64_t max_rows)
{
    const celer_ggml_type_info *info = celer_ggml_type_get(t->type);
    uint64_t ne0 = t->ne[0], rows = t->ne[1] * t->ne[2] * t->ne[3];
    if (max_rows >= 0 && (uint64_t)max_rows < rows) rows = (uint64_t)max_rows;
    uint64_t n = celer_dequant_supported(t->type) ? ne0 * rows : 0;
    if (!n) fprintf(stderr, "dequant_dump: %.*s: type %s not supported; writing 0 values\n",
                    (int)t->name.len, t->name.ptr, info ? info->name : "?");
    if (n && ne0 % info->block_elems) {
        fprintf(stderr, "dequant_dump: %.*s: row of %llu elements is not whole %s blocks\n",
                (int)t->name.len, t->name.ptr, (unsigned long long)ne0, info->name);
        return 2;
    }
    uint32_t len = (uint32_t)t->name.len, type = (uint32_t)t->type;
    if (write_all(out, &len, 4) || write_all(out, t->name.ptr, len) || write_all(out, &type, 4) ||
        write_all(out, &n, 8))
        return 3;
    if (!n) return 0;

    uint64_t row_bytes = ne0 / info->block_elems * info->block_bytes;
    float   *y         = malloc(ne0 * sizeof *y); /* (ne0) */
    if (!y) return 3;
    for (uint64_t r = 0; r < rows; r++) {
        celer_dequant_row(t->type, t->data + r * row_bytes, y, (int64_t)ne0);
        if (write_all(out, y, ne0 * sizeof *y)) {
            free(y);
            return 3;
        }
    }
    free(y);
    return 0;
}

static int dump_model(int argc, char **argv)
{
    const char *path = argv[1], *out_path = argv[2];
    int64_t     max_rows = -1;
    int         first_name = 3;
    if (argc > 4 && strcmp(argv[3], "--rows") == 0) max_rows = atoll(argv[4]), first_name = 5;

    celer_gguf  g   = {0};
    celer_error err = {0};
    if (celer_gguf_open(&g, path, &err) != CELER_OK) {
        fprintf(stderr, "dequant_dump: %s\n", err.msg);
        celer_gguf_close(&g);
        return 2;
    }
    FILE *out = fopen(out_path, "wb");
    int   rc  = out ? 0 : 3;
    if (out && write_all(out, "CDQ1", 4)) rc = 3;
    if (!rc && first_name >= argc) {
        for (uint64_t i = 0; i < g.n_tensors && !rc; i++) rc = dump_tensor(out, &g.tensors[i], max_rows);
    }
    for (int a = first_name; a < argc && !rc; a++) {
        const celer_gguf_tensor *t = celer_gguf_find_tensor(&g, argv[a]);
        if (!t) {
            fprintf(stderr, "dequant_dump: %s: no tensor named '%s'\n", path, argv[a]);
            rc = 2;
        } else {
            rc = dump_tensor(out, t, max_rows);
        }
    }
    if (out && fclose(out) && !rc) rc = 3;
    if (rc == 3) fprintf(stderr, "dequant_dump: %s: write failed\n", out_path);
    celer_gguf_close(&g);
    return rc;
}

static int quantize_file(const char *kind, const char *in_path, const char *out_path)
{
    int k = strcmp(kind, "q8_K") == 0 ? CELER_QK_K : strcmp(kind, "q8_0") == 0 ? CELER_QK8_0 : 0;
    if (!k) return usage();
    FILE *in = fopen(in_path, "rb");
    if (!in) {
        fprintf(stderr, "dequant_dump: cannot open %s\n", in_path);
        return 3;
    }
    fseek(in, 0, SEEK_END);
    long size = ftell(in);
    fseek(in, 0, SEEK_SET);
    int64_t n = size / 4;
    if (size < 0 || size % 4 || n % k) {
        fprintf(stderr, "dequant_dump: %s: %ld bytes is not a whole number of %d floats\n", in_path, size, k);
        fclose(in);
        return 2;
    }
    size_t bsize = k == CELER_QK_K ? sizeof(celer_block_q8_K) : sizeof(celer_block_q8_0);
    float *x     = malloc((size_t)n * sizeof *x + 1);        /* (n) */
    void  *blk   = malloc((size_t)(n / k) * bsize + 1);       /* (n / k) blocks */
    int    rc    = x && blk ? 0 : 3;
    if (!rc && fread(x, 4, (size_t)n, in) != (size_t)n) rc = 3;
    fclose(in);
    if (!rc) {
        if (k == CELER_QK_K) celer_quantize_row_q8_K_ref(x, blk, n);
        else celer_quantize_row_q8_0_ref(x, blk, n);
        FILE *out = fopen(out_path, "wb");
        if (!out || write_all(out, blk, (size_t)(n / k) * bsize)) rc = 3;
        if (out && fclose(out)) rc = 3;
    }
    if (rc) fprintf(stderr, "dequant_dump: i/o or memory failure on %s -> %s\n", in_path, out_path);
    free(x);
    free(blk);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--quantize") == 0) return quantize_file(argv[2], argv[3], argv[4]);
    if (argc < 3 || argv[1][0] == '-') return usage();
    return dump_model(argc, argv);
}
