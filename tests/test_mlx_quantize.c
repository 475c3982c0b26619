/* The MLX reference quantizer (quant/mlx_quantize.h) against mlx.core.quantize, byte for byte:
 * tests/data/mlx_quant/quantize_*.safetensors hold source matrices and mlx's packed weights,
 * scales and biases (make_mlx_quantize_fixtures.py, mlx 0.32.4 on the CPU). Every entry is
 * quantized whole and again row by row in reverse order (the row-range API), and both must equal
 * mlx's bytes. Then each weight goes back through celer_mlx_dequant_row, which must land near the
 * source (the nearest value the stored scale allows, for the fp modes). Last, the argument
 * errors and a few values worked out by hand.
 *
 *   test_mlx_quantize [FIXTURE.safetensors ...]   (default: the four committed files) */
#include "core/json.h"
#include "formats/safetensors.h"
#include "quant/half.h"
#include "quant/mlx_quantize.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

static const char *const DEFAULT_FILES[] = {
    "tests/data/mlx_quant/quantize_affine.safetensors",
    "tests/data/mlx_quant/quantize_mxfp4.safetensors",
    "tests/data/mlx_quant/quantize_mxfp8.safetensors",
    "tests/data/mlx_quant/quantize_nvfp4.safetensors",
};

static int has(const celer_error *err, const char *text)
{
    if (strstr(err->msg, text)) return 1;
    fprintf(stderr, "message \"%s\" lacks \"%s\"\n", err->msg, text);
    return 0;
}

static float load_elem(celer_st_dtype t, const uint8_t *p, int64_t i)
{
    if (t == CELER_ST_F32) {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
    return t == CELER_ST_BF16 ? celer_bf16_to_f32(h) : celer_half_to_f32(h);
}

/* ---- one fixture entry ----------------------------------------------------------------- */

typedef struct {
    celer_mlx_quant        q;
    celer_st_dtype         src_dtype;
    const celer_st_tensor *src, *t[3]; /* weight, scales, biases (NULL for the fp modes) */
} entry;

/* The tensor named by field key of e; NULL with a message. */
static const celer_st_tensor *entry_tensor(const celer_safetensors *st, const cJSON *e, const char *key,
                                           const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);
    if (!cJSON_IsString(v)) {
        fprintf(stderr, "entry %s: no \"%s\"\n", name, key);
        return NULL;
    }
    const celer_st_tensor *t = celer_safetensors_find(st, v->valuestring);
    if (!t) fprintf(stderr, "entry %s: no tensor '%s'\n", name, v->valuestring);
    return t;
}

static celer_st_dtype dtype_named(const char *s)
{
    return !strcmp(s, "BF16") ? CELER_ST_BF16 : !strcmp(s, "F16") ? CELER_ST_F16 : !strcmp(s, "F32") ? CELER_ST_F32
                                                                                                        : CELER_ST_U8;
}

static int read_entry(const celer_safetensors *st, const cJSON *e, entry *x)
{
    celer_error err = {0};
    const char *name = "?", *mode = NULL, *dtype = NULL;
    int64_t     bits = 0, gs = 0, rows = 0, cols = 0;
    if (celer_json_get_string(e, "name", "entry", &name, NULL, &err) ||
        celer_json_get_string(e, "mode", "entry", &mode, NULL, &err) ||
        celer_json_get_string(e, "src_dtype", "entry", &dtype, NULL, &err) ||
        celer_json_get_int(e, "bits", "entry", 0, 64, &bits, NULL, &err) ||
        celer_json_get_int(e, "group_size", "entry", 0, 1 << 20, &gs, NULL, &err) ||
        celer_json_get_int(e, "rows", "entry", 0, INT64_MAX, &rows, NULL, &err) ||
        celer_json_get_int(e, "cols", "entry", 0, INT64_MAX, &cols, NULL, &err) || !mode || !dtype) {
        fprintf(stderr, "entry %s: %s\n", name, err.msg[0] ? err.msg : "mode or src_dtype missing");
        return 1;
    }
    memset(x, 0, sizeof *x);
    x->q = (celer_mlx_quant){.name = name, .bits = (uint32_t)bits, .group_size = (uint32_t)gs, .rows = rows,
                             .cols = cols};
    int m = 0;
    while (m < CELER_HF_QUANT_MODE_COUNT && strcmp(celer_hf_quant_mode_name((celer_hf_quant_mode)m), mode)) m++;
    x->q.mode    = (celer_hf_quant_mode)m;
    x->src_dtype = x->q.dtype = dtype_named(dtype);
    x->src                    = entry_tensor(st, e, "src", name);
    x->t[0]                   = entry_tensor(st, e, "weight", name);
    x->t[1]                   = entry_tensor(st, e, "scales", name);
    if (!x->src || !x->t[0] || !x->t[1]) return 1;
    if (cJSON_GetObjectItemCaseSensitive(e, "biases") && !(x->t[2] = entry_tensor(st, e, "biases", name))) return 1;
    if (cJSON_GetObjectItemCaseSensitive(e, "global_scale")) {
        const celer_st_tensor *g = entry_tensor(st, e, "global_scale", name);
        if (!g || g->dtype != CELER_ST_F32 || g->n_bytes != 4) {
            fprintf(stderr, "entry %s: global_scale is not one F32\n", name);
            return 1;
        }
        x->q.has_global_scale = true;
        memcpy(&x->q.global_scale, g->data, 4);
    }
    if (x->src->dtype != x->src_dtype || x->src->n_elems != (uint64_t)(rows * cols)) {
        fprintf(stderr, "entry %s: source is %s of %" PRIu64 " values, not %s (%" PRId64 ", %" PRId64 ")\n", name,
                celer_st_dtype_name(x->src->dtype), x->src->n_elems, dtype, rows, cols);
        return 1;
    }
    return 0;
}

/* Compares one output tensor with mlx's; reports the first differences. */
static int compare(const char *entry_name, const char *part, const uint8_t *got, const celer_st_tensor *want,
                   uint64_t bytes, uint64_t row_bytes, uint64_t elem)
{
    if (want->n_bytes != bytes) {
        fprintf(stderr, "%s.%s: mlx wrote %" PRIu64 " bytes, celer's shapes say %" PRIu64 "\n", entry_name, part,
                want->n_bytes, bytes);
        return 1;
    }
    uint64_t bad = 0;
    for (uint64_t i = 0; i < bytes; i += elem) {
        if (!memcmp(got + i, want->data + i, elem)) continue;
        if (bad++ < 4) {
            uint64_t g = 0, w = 0;
            memcpy(&g, got + i, elem);
            memcpy(&w, want->data + i, elem);
            fprintf(stderr, "%s.%s: row %" PRIu64 " element %" PRIu64 ": celer 0x%" PRIx64 ", mlx 0x%" PRIx64 "\n",
                    entry_name, part, i / row_bytes, i % row_bytes / elem, g, w);
        }
    }
    if (bad) fprintf(stderr, "%s.%s: %" PRIu64 " of %" PRIu64 " elements differ\n", entry_name, part, bad, bytes / elem);
    return bad != 0;
}

/* The dequantized weight next to the source: affine within half a step (plus the rounding of the
 * stored scale and bias); fp modes at the nearest value the stored scale allows (plus rounding).
 * Groups with inf or NaN are skipped, as are fp groups whose largest magnitude is below 2^-120
 * (mlx's E8M0 byte wraps below zero there), and F16 values that dequantize past F16's range. */
static int round_trip(const entry *x, const celer_mlx_quant_shapes *s, const uint8_t *out[3])
{
    const celer_mlx_quant *q = &x->q;
    celer_error            err = {0};
    celer_mlx_quant_data   d = {out[0], s->weight_bytes, out[1], s->scales_bytes, out[2], s->biases_bytes};
    float                 *y = malloc((size_t)q->cols * sizeof *y); /* (cols) */
    if (!y) return 1;
    const float u = x->src_dtype == CELER_ST_F32 ? 0x1p-24f : x->src_dtype == CELER_ST_BF16 ? 0x1p-8f : 0x1p-11f;
    const float tiny = x->src_dtype == CELER_ST_F32 ? 0x1p-149f : x->src_dtype == CELER_ST_BF16 ? 0x1p-133f : 0x1p-24f;
    const int64_t gs = q->group_size, groups = q->cols / gs;
    int           bad = 0;
    for (int64_t r = 0; r < q->rows && bad < 4; r++) {
        if (celer_mlx_dequant_row(q, &d, r, y, &err) != CELER_OK) {
            fprintf(stderr, "%s: dequant: %s\n", q->name, err.msg);
            free(y);
            return 1;
        }
        for (int64_t g = 0; g < groups && bad < 4; g++) {
            const int64_t j0 = g * gs, i0 = r * q->cols + j0, si = r * groups + g;
            float         m  = 0.0f;
            bool          finite = true;
            for (int64_t j = 0; j < gs; j++) {
                const float v = load_elem(x->src_dtype, x->src->data, i0 + j);
                finite        = finite && isfinite(v);
                m             = fmaxf(m, fabsf(v));
            }
            if (!finite) continue;
            float S = 0.0f, k = 1.0f; /* fp modes: the stored scale's step; nvfp4: 2688 / G */
            if (q->mode == CELER_HF_QUANT_AFFINE) {
                if (!isfinite(load_elem(q->dtype, out[1], si)) || !isfinite(load_elem(q->dtype, out[2], si))) continue;
            } else {
                if (m < 0x1p-120f) continue;
                const uint8_t b = out[1][si];
                if (q->mode == CELER_HF_QUANT_NVFP4) {
                    k = q->has_global_scale ? 2688.0f / q->global_scale : 1.0f;
                    S = celer_mlx_e4m3_to_f32(b) / k;
                } else {
                    S = celer_mlx_e8m0_to_f32(b);
                }
            }
            for (int64_t j = 0; j < gs; j++) {
                const float v = load_elem(x->src_dtype, x->src->data, i0 + j), yv = y[j0 + j];
                float       tol, dmin = INFINITY;
                if (isinf(yv) && x->src_dtype == CELER_ST_F16) continue; /* e.g. 4 * 2^14: past F16's range */
                if (q->mode == CELER_HF_QUANT_AFFINE) {
                    const float sc = fabsf(load_elem(q->dtype, out[1], si)), bi = fabsf(load_elem(q->dtype, out[2], si));
                    const float n  = (float)((1u << q->bits) - 1);
                    /* half a step inside the range; up to a step at the far end, which mlx
                     * gives up so that the edge (the bias) and zero are exact */
                    tol  = sc * (1.0f + 1e-5f) + (n * sc + 2.0f * bi + 2.0f * fabsf(v)) * 2.0f * u;
                    dmin = 0.0f;
                } else {
                    /* the nearest magnitude of the grid: E2M1, or E4M3 without its NaN */
                    const int n_codes = q->mode == CELER_HF_QUANT_MXFP8 ? 0x7f : 8;
                    for (int c = 0; c < n_codes; c++) {
                        const float gv = (q->mode == CELER_HF_QUANT_MXFP8 ? celer_mlx_e4m3_to_f32((uint8_t)c)
                                                                          : celer_mlx_e2m1_to_f32((uint32_t)c)) * S;
                        dmin = fminf(dmin, fabsf(fabsf(v) - gv));
                    }
                    /* rounding, and v / scale landing among the dtype's subnormals */
                    tol = 4.0f * u * (fabsf(v) + (q->mode == CELER_HF_QUANT_MXFP8 ? 448.0f : 6.0f) * S) +
                          2.0f * tiny * S * k;
                }
                tol += (q->mode == CELER_HF_QUANT_AFFINE ? (float)(1u << q->bits) + 2.0f : 2.0f) * tiny; /* subnormal scales */
                if (!(fabsf(yv - v) <= dmin + tol) && bad++ < 4)
                    fprintf(stderr, "%s: round trip: row %" PRId64 " column %" PRId64 ": source %.9g, back %.9g "
                            "(nearest allowed %.3g away, tolerance %.3g)\n", q->name, r, j0 + j, (double)v,
                            (double)yv, (double)dmin, (double)tol);
            }
        }
    }
    free(y);
    return bad != 0;
}

static int check_entry(const celer_safetensors *st, const cJSON *e, int64_t *n_values)
{
    entry x;
    if (read_entry(st, e, &x)) return 1;
    const celer_mlx_quant *q   = &x.q;
    celer_error            err = {0};
    celer_mlx_quant_shapes s;
    if (celer_mlx_quant_get_shapes(q, &s, &err) != CELER_OK) {
        fprintf(stderr, "%s: %s\n", q->name, err.msg);
        return 1;
    }
    for (int p = 0; p < 3; p++) { /* mlx's tensors against celer's shape rules */
        if (x.t[p] && celer_mlx_quant_check_tensor(q, (celer_mlx_quant_part)p, x.t[p]->name, x.t[p]->dtype,
                                                   x.t[p]->n_dims, x.t[p]->shape, &err) != CELER_OK) {
            fprintf(stderr, "%s: %s\n", q->name, err.msg);
            return 1;
        }
    }
    if (!x.t[2] != !s.has_biases) {
        fprintf(stderr, "%s: biases %s in the fixture\n", q->name, x.t[2] ? "unexpected" : "missing");
        return 1;
    }
    const uint64_t bytes[3] = {s.weight_bytes, s.scales_bytes, s.biases_bytes};
    const uint64_t elem[3]  = {4, celer_st_dtype_bits(s.scales_dtype) / 8, celer_st_dtype_bits(s.scales_dtype) / 8};
    uint8_t       *out[2][3] = {{0}};
    int            fails     = 0;
    for (int v = 0; v < 2; v++)
        for (int p = 0; p < 3; p++) {
            if (!bytes[p]) continue;
            out[v][p] = malloc(bytes[p]);
            if (!out[v][p]) goto done;
            memset(out[v][p], v ? 0x5a : 0xa5, bytes[p]); /* what no run of mlx's leaves everywhere */
        }
    /* whole, then row by row from the last */
    if (celer_mlx_quantize_rows(q, x.src->data, x.src_dtype, 0, q->rows, out[0][0], out[0][1], out[0][2], &err) !=
        CELER_OK) {
        fprintf(stderr, "%s: %s\n", q->name, err.msg);
        fails = 1;
        goto done;
    }
    for (int64_t r = q->rows - 1; r >= 0; r--)
        if (celer_mlx_quantize_rows(q, x.src->data, x.src_dtype, r, 1, out[1][0], out[1][1], out[1][2], &err) !=
            CELER_OK) {
            fprintf(stderr, "%s: row %" PRId64 ": %s\n", q->name, r, err.msg);
            fails = 1;
            goto done;
        }
    static const char *const parts[3] = {"weight", "scales", "biases"};
    for (int p = 0; p < 3; p++) {
        if (!bytes[p]) continue;
        const uint64_t row_bytes = bytes[p] / (uint64_t)q->rows;
        fails |= compare(q->name, parts[p], out[0][p], x.t[p], bytes[p], row_bytes, elem[p]);
        if (memcmp(out[0][p], out[1][p], bytes[p])) {
            fprintf(stderr, "%s.%s: quantizing row by row differs from quantizing all rows at once\n", q->name,
                    parts[p]);
            fails = 1;
        }
    }
    if (!fails) fails = round_trip(&x, &s, (const uint8_t **)out[0]);
    *n_values += q->rows * q->cols;
done:
    for (int v = 0; v < 2; v++)
        for (int p = 0; p < 3; p++) free(out[v][p]);
    return fails;
}

static int check_file(const char *path, int *n_entries, int64_t *n_values)
{
    celer_safetensors st  = {0};
    celer_error       err = {0};
    cJSON            *entries = NULL;
    int               fails   = 0;
    if (celer_safetensors_open(&st, path, &err) != CELER_OK) {
        fprintf(stderr, "%s\n", err.msg);
        fails = 1;
        goto done;
    }
    const char *text = celer_safetensors_meta(&st, "entries");
    if (!text || celer_json_parse(text, strlen(text), "entries", &entries, &err) != CELER_OK ||
        !cJSON_IsArray(entries)) {
        fprintf(stderr, "%s: no \"entries\" list in __metadata__ %s\n", path, err.msg);
        fails = 1;
        goto done;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, entries)
    {
        fails += check_entry(&st, e, n_values);
        ++*n_entries;
    }
done:
    cJSON_Delete(entries);
    celer_safetensors_close(&st);
    return fails;
}

/* ---- argument errors ------------------------------------------------------------------- */

static int test_errors(void)
{
    celer_error     err = {0};
    float           src[2 * 64];
    uint8_t         w[256], sc[64], bi[64];
    const uint8_t   sentinel = 0xa5;
    celer_mlx_quant q = {.name = "layers.0.mlp.up_proj", .mode = CELER_HF_QUANT_AFFINE, .bits = 4, .group_size = 32,
                         .dtype = CELER_ST_F32, .rows = 2, .cols = 64};
    for (int i = 0; i < 128; i++) src[i] = (float)(i % 7) - 3.0f;
    memset(w, sentinel, sizeof w);
    memset(sc, sentinel, sizeof sc);
    memset(bi, sentinel, sizeof bi);
    CHECK(celer_mlx_quantize_rows(&q, src, CELER_ST_F32, 0, 0, w, sc, bi, &err) == CELER_OK); /* nothing to do */
    CHECK(w[0] == sentinel && sc[0] == sentinel);

    celer_mlx_quant b = q;
    b.mode            = CELER_HF_QUANT_MODE_COUNT;
    CHECK(celer_mlx_quantize_rows(&b, src, CELER_ST_F32, 0, 2, w, sc, bi, &err) == CELER_ERR_INVALID &&
          has(&err, "layers.0.mlp.up_proj") && has(&err, "unknown quantization mode"));
    b      = q;
    b.bits = 7;
    CHECK(celer_mlx_quantize_rows(&b, src, CELER_ST_F32, 0, 2, w, sc, bi, &err) == CELER_ERR_INVALID &&
          has(&err, "7 bits"));
    b            = q;
    b.group_size = 64;
    b.cols       = 96;
    CHECK(celer_mlx_quantize_rows(&b, src, CELER_ST_F32, 0, 1, w, sc, bi, &err) == CELER_ERR_INVALID &&
          has(&err, "96 columns") && has(&err, "groups of 64"));
    CHECK(celer_mlx_quantize_rows(&q, src, CELER_ST_U8, 0, 2, w, sc, bi, &err) == CELER_ERR_INVALID &&
          has(&err, "src_dtype U8") && has(&err, "F32, BF16 or F16"));
    CHECK(celer_mlx_quantize_rows(&q, src, CELER_ST_BF16, 0, 2, w, sc, bi, &err) == CELER_ERR_INVALID &&
          has(&err, "src_dtype BF16 but dtype F32"));
    b       = q;
    b.dtype = CELER_ST_I32;
    CHECK(celer_mlx_quantize_rows(&b, src, CELER_ST_F32, 0, 2, w, sc, bi, &err) == CELER_ERR_INVALID &&
          has(&err, "dtype I32"));
    CHECK(celer_mlx_quantize_rows(&q, src, CELER_ST_F32, -1, 1, w, sc, bi, &err) == CELER_ERR_INVALID &&
          has(&err, "row0 -1"));
    CHECK(celer_mlx_quantize_rows(&q, src, CELER_ST_F32, 1, 2, w, sc, bi, &err) == CELER_ERR_INVALID &&
          has(&err, "n_rows 2") && has(&err, "2 rows"));
    CHECK(celer_mlx_quantize_rows(&q, NULL, CELER_ST_F32, 0, 2, w, sc, bi, &err) == CELER_ERR_INVALID &&
          has(&err, "src is NULL"));
    CHECK(celer_mlx_quantize_rows(&q, src, CELER_ST_F32, 0, 2, NULL, sc, bi, &err) == CELER_ERR_INVALID &&
          has(&err, "weight_out is NULL"));
    CHECK(celer_mlx_quantize_rows(&q, src, CELER_ST_F32, 0, 2, w, sc, NULL, &err) == CELER_ERR_INVALID &&
          has(&err, "biases_out is NULL"));

    celer_mlx_quant f = {.name = "lm_head", .mode = CELER_HF_QUANT_MXFP4, .bits = 4, .group_size = 32,
                         .dtype = CELER_ST_BF16, .rows = 2, .cols = 64};
    CHECK(celer_mlx_quantize_rows(&f, src, CELER_ST_F32, 0, 2, w, sc, bi, &err) == CELER_ERR_INVALID &&
          has(&err, "lm_head") && has(&err, "biases_out given") && has(&err, "mxfp4 has no biases"));
    f.has_global_scale = true;
    f.global_scale     = 1.0f;
    CHECK(celer_mlx_quantize_rows(&f, src, CELER_ST_F32, 0, 2, w, sc, NULL, &err) == CELER_ERR_INVALID &&
          has(&err, "only nvfp4"));
    f.mode       = CELER_HF_QUANT_NVFP4;
    f.group_size = 16;
    f.global_scale = 0.0f;
    CHECK(celer_mlx_quantize_rows(&f, src, CELER_ST_F32, 0, 2, w, sc, NULL, &err) == CELER_ERR_INVALID &&
          has(&err, "global_scale 0"));
    f.global_scale = NAN;
    CHECK(celer_mlx_quantize_rows(&f, src, CELER_ST_F32, 0, 2, w, sc, NULL, &err) == CELER_ERR_INVALID &&
          has(&err, "global_scale nan"));
    f.has_global_scale = false;
    f.rows             = 1;
    f.cols             = 48; /* 48 values: mlx packs 32 at a time */
    CHECK(celer_mlx_quantize_rows(&f, src, CELER_ST_F32, 0, 1, w, sc, NULL, &err) == CELER_ERR_UNSUPPORTED &&
          has(&err, "(1, 48)") && has(&err, "multiple of 32"));
    f.rows = 2; /* 96 values: fine, although each row is 3 groups of 16 */
    CHECK(celer_mlx_quantize_rows(&f, src, CELER_ST_F32, 0, 2, w, sc, NULL, &err) == CELER_OK);
    CHECK(w[48] == sentinel && sc[6] == sentinel); /* 2 rows of 24 bytes and 3 scales */

    memset(w, sentinel, sizeof w);
    memset(sc, sentinel, sizeof sc);
    memset(bi, sentinel, sizeof bi);
    CHECK(celer_mlx_quantize_rows(&q, src, CELER_ST_F32, 1, 1, w, sc, bi, &err) == CELER_OK);
    for (int i = 0; i < 32; i++) CHECK(w[i] == sentinel); /* row 0 untouched */
    CHECK(sc[0] == sentinel && bi[7] == sentinel && sc[8] != sentinel);
    return 0;
}

/* ---- values by hand -------------------------------------------------------------------- */

static uint32_t code_at(const uint8_t *w, int j, int bits)
{
    uint32_t c = 0;
    for (int i = 0; i < bits; i++) {
        int k = j * bits + i;
        c |= (uint32_t)(w[k / 8] >> (k % 8) & 1) << i;
    }
    return c;
}

static int test_values(void)
{
    celer_error err = {0};
    float       src[32];
    uint8_t     w[32], sc[4], bi[4];

    /* affine: 0..15 gives bias 15 and scale -1 (the maximum is the edge), codes 15 - j */
    celer_mlx_quant q = {.name = "x", .mode = CELER_HF_QUANT_AFFINE, .bits = 4, .group_size = 32,
                         .dtype = CELER_ST_F32, .rows = 1, .cols = 32};
    for (int j = 0; j < 32; j++) src[j] = (float)(j % 16);
    CHECK(celer_mlx_quantize_rows(&q, src, CELER_ST_F32, 0, 1, w, sc, bi, &err) == CELER_OK);
    float s, b;
    memcpy(&s, sc, 4);
    memcpy(&b, bi, 4);
    CHECK(s == -1.0f && b == 15.0f);
    for (int j = 0; j < 32; j++) CHECK(code_at(w, j, 4) == 15u - (uint32_t)(j % 16));
    /* k + 1/2 between 0 and 15: (15 - k - 1/2) rounds half to even */
    for (int j = 2; j < 32; j++) src[j] = (float)(j % 15) + 0.5f;
    src[0] = 0.0f, src[1] = 15.0f;
    CHECK(celer_mlx_quantize_rows(&q, src, CELER_ST_F32, 0, 1, w, sc, bi, &err) == CELER_OK);
    for (int j = 2; j < 32; j++) CHECK(code_at(w, j, 4) == (uint32_t)rintf(14.5f - (float)(j % 15)));
    /* all zeros: scale -1e-7 (eps, negated), bias 0, codes 0 */
    memset(src, 0, sizeof src);
    CHECK(celer_mlx_quantize_rows(&q, src, CELER_ST_F32, 0, 1, w, sc, bi, &err) == CELER_OK);
    memcpy(&s, sc, 4);
    memcpy(&b, bi, 4);
    CHECK(s == -1e-7f && b == 0.0f && w[0] == 0 && w[15] == 0);

    /* mxfp4: max 6 gives scale byte 127 (6 / 6 = 2^0); E2M1 ties go to the smaller magnitude,
     * and a negative value that rounds to zero is +0 */
    celer_mlx_quant f = {.name = "y", .mode = CELER_HF_QUANT_MXFP4, .bits = 4, .group_size = 32,
                         .dtype = CELER_ST_F32, .rows = 1, .cols = 32};
    static const float in[8]   = {6.0f, 0.25f, 1.25f, 5.0f, -0.1f, -0.25f, -2.5f, 0.26f};
    static const uint32_t want[8] = {7, 0, 2, 6, 0, 0, 12, 1};
    memset(src, 0, sizeof src);
    memcpy(src, in, sizeof in);
    CHECK(celer_mlx_quantize_rows(&f, src, CELER_ST_F32, 0, 1, w, sc, NULL, &err) == CELER_OK && sc[0] == 127);
    for (int j = 0; j < 8; j++) CHECK(code_at(w, j, 4) == want[j]);
    /* a group of F32 subnormals: max / 6 about 2^-134, byte 127 - 134 wraps to 249 */
    memset(src, 0, sizeof src);
    src[0] = 6.0f * 0x1p-134f;
    CHECK(celer_mlx_quantize_rows(&f, src, CELER_ST_F32, 0, 1, w, sc, NULL, &err) == CELER_OK && sc[0] == 249);

    /* mxfp8: the exponent rounds up (500 / 448 > 1 gives 2^1, byte 128), so nothing saturates;
     * 464 / 2 = 232 ties between 224 and 240 and goes to even 224 (0x76); 2^-10 ties to 0 */
    f.mode = CELER_HF_QUANT_MXFP8;
    f.bits = 8;
    memset(src, 0, sizeof src);
    src[0] = 500.0f, src[1] = 464.0f, src[2] = -470.0f, src[3] = 0x1p-9f;
    CHECK(celer_mlx_quantize_rows(&f, src, CELER_ST_F32, 0, 1, w, sc, NULL, &err) == CELER_OK && sc[0] == 128);
    CHECK(w[0] == 0x78 && w[1] == 0x76 && w[2] == 0xf7 && w[3] == 0x00);
    /* a group of exactly 448 keeps byte 127 (2^0 already holds it) */
    memset(src, 0, sizeof src);
    src[0] = 448.0f;
    CHECK(celer_mlx_quantize_rows(&f, src, CELER_ST_F32, 0, 1, w, sc, NULL, &err) == CELER_OK && sc[0] == 127);
    return 0;
}

int main(int argc, char **argv)
{
    int     fails = 0, n_entries = 0;
    int64_t n_values = 0;
    int     n_files  = argc > 1 ? argc - 1 : (int)(sizeof DEFAULT_FILES / sizeof DEFAULT_FILES[0]);
    for (int i = 0; i < n_files; i++) fails += check_file(argc > 1 ? argv[i + 1] : DEFAULT_FILES[i], &n_entries, &n_values);
    printf("test_mlx_quantize: %d entries, %" PRId64 " values against mlx\n", n_entries, n_values);
    fails += test_errors();
    fails += test_values();
    if (fails) fprintf(stderr, "test_mlx_quantize: %d failure(s)\n", fails);
    return fails != 0;
}
