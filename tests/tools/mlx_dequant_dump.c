/* mlx_dequant_dump: celer's reference MLX dequantizer (quant/mlx_quant.h) on a fixture file, for
 * tests/reference/test_mlx_dequant.py to compare with the values mlx wrote beside it.
 *
 *   mlx_dequant_dump FIXTURE.safetensors OUT
 *
 * FIXTURE is one of the files in tests/data/mlx_quant/: its "__metadata__" key "entries" is a
 * JSON array of objects
 *     {"name": ..., "mode": "affine", "bits": 4, "group_size": 64, "dtype": "BF16",
 *      "rows": 3, "cols": 128, "weight": TENSOR, "scales": TENSOR, "biases": TENSOR,
 *      "global_scale": TENSOR}
 * (biases for affine only; global_scale, a one-element F32 tensor, for some nvfp4 entries).
 * Each entry's weight is dequantized row by row, and OUT is "CMQ1" then, per entry in order,
 * little-endian: u32 name_len, name bytes, u64 n_values, n_values f32 (rows * cols).
 * Exit status: 0 ok, 1 usage, 2 bad input (the message names the entry), 3 i/o or memory. */
#include "core/json.h"
#include "formats/safetensors.h"
#include "quant/mlx_quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int write_all(FILE *f, const void *p, size_t n) { return fwrite(p, 1, n, f) == n ? 0 : -1; }

/* The tensor named by entry field key, or NULL with a message (when required). */
static const celer_st_tensor *entry_tensor(const celer_safetensors *st, const cJSON *e, const char *key,
                                           const char *name, int required)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);
    if (!cJSON_IsString(v)) {
        if (required) fprintf(stderr, "mlx_dequant_dump: entry %s: no \"%s\" tensor name\n", name, key);
        return NULL;
    }
    const celer_st_tensor *t = celer_safetensors_find(st, v->valuestring);
    if (!t) fprintf(stderr, "mlx_dequant_dump: entry %s: no tensor '%s' in the file\n", name, v->valuestring);
    return t;
}

/* q and d of entry e; t[0..2] the weight, scales and biases tensors (t[2] NULL without biases). */
static int read_entry(const celer_safetensors *st, const cJSON *e, celer_mlx_quant *q, celer_mlx_quant_data *d,
                      const celer_st_tensor *t[3])
{
    celer_error  err = {0};
    const char  *name = "?", *mode = NULL, *dtype = NULL;
    int64_t      bits = 0, gs = 0, rows = 0, cols = 0;
    const char  *what = "entry";
    if (celer_json_get_string(e, "name", what, &name, NULL, &err) ||
        celer_json_get_string(e, "mode", what, &mode, NULL, &err) ||
        celer_json_get_string(e, "dtype", what, &dtype, NULL, &err) ||
        celer_json_get_int(e, "bits", what, 0, 64, &bits, NULL, &err) ||
        celer_json_get_int(e, "group_size", what, 0, 1 << 20, &gs, NULL, &err) ||
        celer_json_get_int(e, "rows", what, 0, INT64_MAX, &rows, NULL, &err) ||
        celer_json_get_int(e, "cols", what, 0, INT64_MAX, &cols, NULL, &err) || !mode || !dtype) {
        fprintf(stderr, "mlx_dequant_dump: entry %s: %s\n", name, err.msg[0] ? err.msg : "mode or dtype missing");
        return 2;
    }
    *q = (celer_mlx_quant){.name = name, .bits = (uint32_t)bits, .group_size = (uint32_t)gs, .rows = rows, .cols = cols};
    int m = 0;
    while (m < CELER_HF_QUANT_MODE_COUNT && strcmp(celer_hf_quant_mode_name((celer_hf_quant_mode)m), mode)) m++;
    q->mode = (celer_hf_quant_mode)m; /* an unknown one is refused by the dequantizer */
    q->dtype = strcmp(dtype, "BF16") == 0 ? CELER_ST_BF16 : strcmp(dtype, "F16") == 0 ? CELER_ST_F16
             : strcmp(dtype, "F32") == 0  ? CELER_ST_F32  : CELER_ST_U8;

    const celer_st_tensor *w = entry_tensor(st, e, "weight", name, 1), *s = entry_tensor(st, e, "scales", name, 1);
    if (!w || !s) return 2;
    *d = (celer_mlx_quant_data){w->data, w->n_bytes, s->data, s->n_bytes, NULL, 0};
    t[0] = w, t[1] = s, t[2] = NULL;
    if (cJSON_GetObjectItemCaseSensitive(e, "biases")) {
        const celer_st_tensor *b = entry_tensor(st, e, "biases", name, 1);
        if (!b) return 2;
        d->biases       = b->data;
        d->biases_bytes = b->n_bytes;
        t[2]            = b;
    }
    if (cJSON_GetObjectItemCaseSensitive(e, "global_scale")) {
        const celer_st_tensor *g = entry_tensor(st, e, "global_scale", name, 1);
        if (!g) return 2;
        if (g->dtype != CELER_ST_F32 || g->n_bytes != 4) {
            fprintf(stderr, "mlx_dequant_dump: entry %s: global_scale is not one F32\n", name);
            return 2;
        }
        q->has_global_scale = true;
        memcpy(&q->global_scale, g->data, 4);
    }
    return 0;
}

static int dump_entry(FILE *out, const celer_safetensors *st, const cJSON *e)
{
    celer_mlx_quant      q;
    celer_mlx_quant_data   d;
    const celer_st_tensor *t[3];
    int                    rc = read_entry(st, e, &q, &d, t);
    if (rc) return rc;
    celer_error err = {0};
    if (celer_mlx_quant_check(&q, &err) != CELER_OK) {
        fprintf(stderr, "mlx_dequant_dump: %s\n", err.msg);
        return 2;
    }
    /* the shape rules, on the tensors mlx wrote */
    for (int p = 0; p < 3; p++) {
        if (t[p] && celer_mlx_quant_check_tensor(&q, (celer_mlx_quant_part)p, t[p]->name, t[p]->dtype, t[p]->n_dims,
                                                 t[p]->shape, &err) != CELER_OK) {
            fprintf(stderr, "mlx_dequant_dump: entry %s: %s\n", q.name, err.msg);
            return 2;
        }
    }
    uint32_t len = (uint32_t)strlen(q.name);
    uint64_t n   = (uint64_t)q.rows * (uint64_t)q.cols;
    if (write_all(out, &len, 4) || write_all(out, q.name, len) || write_all(out, &n, 8)) return 3;
    float *y = malloc((size_t)q.cols * sizeof *y); /* (cols) */
    if (!y) return 3;
    for (int64_t r = 0; r < q.rows && !rc; r++) {
        if (celer_mlx_dequant_row(&q, &d, r, y, &err) != CELER_OK) {
            fprintf(stderr, "mlx_dequant_dump: %s\n", err.msg);
            rc = 2;
        } else if (write_all(out, y, (size_t)q.cols * sizeof *y)) {
            rc = 3;
        }
    }
    free(y);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: mlx_dequant_dump FIXTURE.safetensors OUT\n");
        return 1;
    }
    celer_safetensors st  = {0};
    celer_error       err = {0};
    if (celer_safetensors_open(&st, argv[1], &err) != CELER_OK) {
        fprintf(stderr, "mlx_dequant_dump: %s\n", err.msg);
        celer_safetensors_close(&st);
        return 2;
    }
    const char *text    = celer_safetensors_meta(&st, "entries");
    cJSON      *entries = NULL;
    int         rc      = 0;
    if (!text) {
        fprintf(stderr, "mlx_dequant_dump: %s: no \"entries\" in __metadata__\n", argv[1]);
        rc = 2;
    } else if (celer_json_parse(text, strlen(text), "entries", &entries, &err) != CELER_OK ||
               !cJSON_IsArray(entries)) {
        fprintf(stderr, "mlx_dequant_dump: %s: entries: %s\n", argv[1], err.msg[0] ? err.msg : "not an array");
        rc = 2;
    }
    FILE *out = rc ? NULL : fopen(argv[2], "wb");
    if (!rc && (!out || write_all(out, "CMQ1", 4))) rc = 3;
    const cJSON *e;
    if (!rc) cJSON_ArrayForEach(e, entries) {
            if ((rc = dump_entry(out, &st, e)) != 0) break;
        }
    if (out && fclose(out) && !rc) rc = 3;
    if (rc == 3) fprintf(stderr, "mlx_dequant_dump: %s: write failed\n", argv[2]);
    cJSON_Delete(entries);
    celer_safetensors_close(&st);
    return rc;
}
