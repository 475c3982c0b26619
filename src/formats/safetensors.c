/* safetensors: one file. The directory of shards is in safetensors_set.c. */
#include "formats/safetensors.h"

#include "core/error.h"
#include "core/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- dtypes ------------------------------------------------------------------------------ */

static const struct {
    const char *name; /* as spelled in the header */
    uint32_t    bits; /* per element */
} dtypes[CELER_ST_DTYPE_COUNT] = {
    [CELER_ST_BOOL] = {"BOOL", 8},           [CELER_ST_U8] = {"U8", 8},
    [CELER_ST_I8] = {"I8", 8},               [CELER_ST_U16] = {"U16", 16},
    [CELER_ST_I16] = {"I16", 16},            [CELER_ST_U32] = {"U32", 32},
    [CELER_ST_I32] = {"I32", 32},            [CELER_ST_U64] = {"U64", 64},
    [CELER_ST_I64] = {"I64", 64},            [CELER_ST_F16] = {"F16", 16},
    [CELER_ST_BF16] = {"BF16", 16},          [CELER_ST_F32] = {"F32", 32},
    [CELER_ST_F64] = {"F64", 64},            [CELER_ST_C64] = {"C64", 64},
    [CELER_ST_F8_E4M3] = {"F8_E4M3", 8},     [CELER_ST_F8_E5M2] = {"F8_E5M2", 8},
    [CELER_ST_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8}, [CELER_ST_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8},
    [CELER_ST_F8_E8M0] = {"F8_E8M0", 8},     [CELER_ST_F6_E2M3] = {"F6_E2M3", 6},
    [CELER_ST_F6_E3M2] = {"F6_E3M2", 6},     [CELER_ST_F4] = {"F4", 4},
};

const char *celer_st_dtype_name(celer_st_dtype t)
{
    return (unsigned)t < CELER_ST_DTYPE_COUNT ? dtypes[t].name : "?";
}

uint32_t celer_st_dtype_bits(celer_st_dtype t)
{
    return (unsigned)t < CELER_ST_DTYPE_COUNT ? dtypes[t].bits : 0;
}

static bool dtype_from_name(const char *s, celer_st_dtype *out)
{
    for (int i = 0; i < CELER_ST_DTYPE_COUNT; i++)
        if (strcmp(s, dtypes[i].name) == 0) {
            *out = (celer_st_dtype)i;
            return true;
        }
    return false;
}

/* "BOOL U8 I8 ..." into buf, for the unknown-dtype message. */
static const char *dtype_list(char *buf, size_t cap)
{
    size_t n = 0;
    buf[0]   = '\0';
    for (int i = 0; i < CELER_ST_DTYPE_COUNT && n < cap; i++) {
        int w = snprintf(buf + n, cap - n, "%s%s", i ? " " : "", dtypes[i].name);
        if (w < 0) break;
        n += (size_t)w;
    }
    return buf;
}

/* ---- helpers ----------------------------------------------------------------------------- */

static uint64_t read_u64_le(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* "[49152, 576]" into buf (from the JSON, for messages about shapes that did not parse). */
static const char *shape_str(const uint64_t *shape, uint32_t n_dims, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (uint32_t i = 0; i < n_dims && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%llu", i ? ", " : "", (unsigned long long)shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
    return buf;
}

typedef unsigned long long ull; /* for printf */

/* ---- one tensor entry -------------------------------------------------------------------- */

/* Reads shape into t (n_dims, shape, n_elems) and checks element and byte counts. */
static celer_status read_shape(const celer_safetensors *st, const char *name, const cJSON *shape,
                               celer_st_tensor *t, uint64_t *n_bytes, celer_error *err)
{
    if (!cJSON_IsArray(shape))
        return celer_fail(err, CELER_ERR_FORMAT,
                          "safetensors: %s: tensor '%s': 'shape' is missing or not an array of integers",
                          st->name, name);
    int n = cJSON_GetArraySize(shape);
    if (n > CELER_ST_MAX_DIMS)
        return celer_fail(err, CELER_ERR_FORMAT, "safetensors: %s: tensor '%s' has %d dimensions; at most %d are supported",
                          st->name, name, n, CELER_ST_MAX_DIMS);
    t->n_dims = (uint32_t)n;
    for (int i = 0; i < CELER_ST_MAX_DIMS; i++) t->shape[i] = 1;
    uint64_t     count = 1;
    bool         over  = false;
    const cJSON *d     = NULL;
    int          i     = 0;
    cJSON_ArrayForEach(d, shape)
    {
        int64_t v = 0;
        if (!celer_json_is_int(d, 0, INT64_MAX, &v))
            return celer_fail(err, CELER_ERR_FORMAT,
                              "safetensors: %s: tensor '%s': shape[%d] is not a non-negative integer",
                              st->name, name, i);
        t->shape[i++] = (uint64_t)v;
        over |= __builtin_mul_overflow(count, (uint64_t)v, &count);
    }
    char buf[200];
    if (over)
        return celer_fail(err, CELER_ERR_FORMAT,
                          "safetensors: %s: tensor '%s' has shape %s, whose element count overflows 64 bits",
                          st->name, name, shape_str(t->shape, t->n_dims, buf, sizeof buf));
    t->n_elems = count;
    uint64_t bits;
    if (__builtin_mul_overflow(count, (uint64_t)dtypes[t->dtype].bits, &bits))
        return celer_fail(err, CELER_ERR_FORMAT,
                          "safetensors: %s: tensor '%s' has shape %s, whose byte size overflows 64 bits",
                          st->name, name, shape_str(t->shape, t->n_dims, buf, sizeof buf));
    if (bits % 8 != 0)
        return celer_fail(err, CELER_ERR_FORMAT,
                          "safetensors: %s: tensor '%s' of %s has %llu elements, which do not fill whole bytes",
                          st->name, name, dtypes[t->dtype].name, (ull)count);
    *n_bytes = bits / 8;
    return CELER_OK;
}

/* Fills t from the header entry e (name already set); base is the file image, size its length. */
static celer_status read_tensor(const celer_safetensors *st, const cJSON *e, const uint8_t *base,
                                uint64_t size, celer_st_tensor *t, celer_error *err)
{
    const char *name = t->name;
    if (!cJSON_IsObject(e))
        return celer_fail(err, CELER_ERR_FORMAT,
                          "safetensors: %s: tensor '%s' must be an object with dtype, shape and data_offsets",
                          st->name, name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!cJSON_IsString(dt))
        return celer_fail(err, CELER_ERR_FORMAT, "safetensors: %s: tensor '%s': 'dtype' is missing or not a string",
                          st->name, name);
    if (!dtype_from_name(dt->valuestring, &t->dtype)) {
        char known[256];
        return celer_fail(err, CELER_ERR_FORMAT,
                          "safetensors: %s: tensor '%s' has dtype '%.40s', which celer does not know (known: %s)",
                          st->name, name, dt->valuestring, dtype_list(known, sizeof known));
    }
    uint64_t     want = 0;
    celer_status s    = read_shape(st, name, cJSON_GetObjectItemCaseSensitive(e, "shape"), t, &want, err);
    if (s != CELER_OK) return s;

    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    int64_t      b = 0, en = 0;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 ||
        !celer_json_is_int(cJSON_GetArrayItem(off, 0), 0, INT64_MAX, &b) ||
        !celer_json_is_int(cJSON_GetArrayItem(off, 1), 0, INT64_MAX, &en))
        return celer_fail(err, CELER_ERR_FORMAT,
                          "safetensors: %s: tensor '%s': 'data_offsets' must be [begin, end], two non-negative integers",
                          st->name, name);
    uint64_t begin = (uint64_t)b, end = (uint64_t)en;
    if (begin > end)
        return celer_fail(err, CELER_ERR_FORMAT,
                          "safetensors: %s: tensor '%s': data_offsets [%llu, %llu] end before they begin",
                          st->name, name, (ull)begin, (ull)end);
    if (end - begin != want) {
        char buf[200];
        return celer_fail(err, CELER_ERR_FORMAT,
                          "safetensors: %s: tensor '%s' is %s %s, %llu bytes, but data_offsets [%llu, %llu] "
                          "span %llu bytes",
                          st->name, name, dtypes[t->dtype].name, shape_str(t->shape, t->n_dims, buf, sizeof buf),
                          (ull)want, (ull)begin, (ull)end, (ull)(end - begin));
    }
    uint64_t data_size = size - st->data_offset;
    if (end > data_size)
        return celer_fail(err, CELER_ERR_FORMAT,
                          "safetensors: %s: tensor '%s' ends at file byte %llu, but the file has %llu bytes; "
                          "the download looks truncated, fetch it again",
                          st->name, name, (ull)(st->data_offset + end), (ull)size);
    t->offset  = begin;
    t->n_bytes = end - begin;
    t->data    = base + st->data_offset + begin;
    return CELER_OK;
}

/* ---- the header -------------------------------------------------------------------------- */

/* Counts tensors and the string bytes to keep; checks "__metadata__" is a string map. */
static celer_status count_header(const celer_safetensors *st, const cJSON *root, uint64_t *n_tensors,
                                 uint64_t *n_meta, size_t *n_chars, celer_error *err)
{
    const cJSON *e         = NULL;
    bool         seen_meta = false;
    cJSON_ArrayForEach(e, root)
    {
        if (strcmp(e->string, "__metadata__") != 0) {
            (*n_tensors)++;
            *n_chars += strlen(e->string) + 1;
            continue;
        }
        if (cJSON_IsNull(e)) continue;
        if (!cJSON_IsObject(e))
            return celer_fail(err, CELER_ERR_FORMAT, "safetensors: %s: '__metadata__' must be an object of strings",
                              st->name);
        if (seen_meta)
            return celer_fail(err, CELER_ERR_FORMAT, "safetensors: %s: '__metadata__' appears twice in the header",
                              st->name);
        seen_meta = true;
        const cJSON *m = NULL;
        cJSON_ArrayForEach(m, e)
        {
            if (!cJSON_IsString(m))
                return celer_fail(err, CELER_ERR_FORMAT, "safetensors: %s: __metadata__['%s'] must be a string",
                                  st->name, m->string);
            (*n_meta)++;
            *n_chars += strlen(m->string) + strlen(m->valuestring) + 2;
        }
    }
    return CELER_OK;
}

static char *keep(char **cursor, const char *s)
{
    size_t n = strlen(s) + 1;
    char  *d = *cursor;
    memcpy(d, s, n);
    *cursor += n;
    return d;
}

static int cmp_by_name(const void *a, const void *b)
{
    return strcmp(((const celer_st_tensor *)a)->name, ((const celer_st_tensor *)b)->name);
}

static int cmp_by_offset(const void *a, const void *b)
{
    const celer_st_tensor *x = *(const celer_st_tensor *const *)a, *y = *(const celer_st_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->n_bytes != y->n_bytes) return x->n_bytes < y->n_bytes ? -1 : 1;
    return 0;
}

/* Names twice, then ranges that share a byte (empty tensors share none). */
static celer_status check_table(const celer_safetensors *st, celer_error *err)
{
    uint64_t n = st->n_tensors;
    qsort(st->tensors, (size_t)n, sizeof *st->tensors, cmp_by_name);
    for (uint64_t i = 1; i < n; i++)
        if (strcmp(st->tensors[i - 1].name, st->tensors[i].name) == 0)
            return celer_fail(err, CELER_ERR_FORMAT,
                              "safetensors: %s: tensor '%s' appears twice in the header; the file is corrupt",
                              st->name, st->tensors[i].name);
    if (n < 2) return CELER_OK;
    const celer_st_tensor **by = malloc((size_t)n * sizeof *by);
    if (!by) return celer_fail(err, CELER_ERR_OOM, "safetensors: %s: out of memory sorting %llu tensors", st->name, (ull)n);
    for (uint64_t i = 0; i < n; i++) by[i] = &st->tensors[i];
    qsort(by, (size_t)n, sizeof *by, cmp_by_offset);
    const celer_st_tensor *last = NULL; /* the tensor reaching furthest so far */
    celer_status           s    = CELER_OK;
    for (uint64_t i = 0; i < n && s == CELER_OK; i++) {
        const celer_st_tensor *t = by[i];
        if (t->n_bytes == 0) continue;
        if (last && t->offset < last->offset + last->n_bytes)
            s = celer_fail(err, CELER_ERR_FORMAT,
                           "safetensors: %s: tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap "
                           "(offsets from data start at file byte %llu); the file is corrupt",
                           st->name, last->name, (ull)last->offset, (ull)(last->offset + last->n_bytes), t->name,
                           (ull)t->offset, (ull)(t->offset + t->n_bytes), (ull)st->data_offset);
        if (!last || t->offset + t->n_bytes > last->offset + last->n_bytes) last = t;
    }
    free(by);
    return s;
}

static celer_status parse_json_header(celer_safetensors *st, const cJSON *root, const uint8_t *data,
                                      uint64_t size, celer_error *err)
{
    uint64_t     n_tensors = 0, n_meta = 0;
    size_t       n_chars   = 0;
    celer_status s         = count_header(st, root, &n_tensors, &n_meta, &n_chars, err);
    if (s != CELER_OK) return s;
    st->strings = malloc(n_chars + 1);
    st->tensors = calloc((size_t)n_tensors + 1, sizeof *st->tensors);
    st->meta    = calloc((size_t)n_meta + 1, sizeof *st->meta);
    if (!st->strings || !st->tensors || !st->meta)
        return celer_fail(err, CELER_ERR_OOM, "safetensors: %s: out of memory for %llu tensors", st->name,
                          (ull)n_tensors);
    char        *cur = st->strings;
    const cJSON *e   = NULL;
    cJSON_ArrayForEach(e, root)
    {
        if (strcmp(e->string, "__metadata__") == 0) {
            const cJSON *m = NULL;
            cJSON_ArrayForEach(m, e)
            {
                st->meta[st->n_meta].key     = keep(&cur, m->string);
                st->meta[st->n_meta++].value = keep(&cur, m->valuestring);
            }
            continue;
        }
        celer_st_tensor *t = &st->tensors[st->n_tensors++];
        t->name            = keep(&cur, e->string);
        s                  = read_tensor(st, e, data, size, t, err);
        if (s != CELER_OK) return s;
    }
    return check_table(st, err);
}

static celer_status parse_image(celer_safetensors *st, const uint8_t *data, uint64_t size, celer_error *err)
{
    if (size < 8)
        return celer_fail(err, CELER_ERR_FORMAT,
                          "safetensors: %s: the file is %llu bytes, too short for the 8-byte header length; "
                          "the download looks truncated, fetch it again",
                          st->name, (ull)size);
    uint64_t n = read_u64_le(data);
    if (n > CELER_ST_MAX_HEADER)
        return celer_fail(err, CELER_ERR_FORMAT,
                          "safetensors: %s: header length %llu is over the %u-byte limit; this is not a "
                          "safetensors file, or it is corrupt",
                          st->name, (ull)n, CELER_ST_MAX_HEADER);
    if (n > size - 8)
        return celer_fail(err, CELER_ERR_FORMAT,
                          "safetensors: %s: header length %llu is larger than the file (%llu bytes); "
                          "the download looks truncated, fetch it again",
                          st->name, (ull)n, (ull)size);
    if (n < 2)
        return celer_fail(err, CELER_ERR_FORMAT,
                          "safetensors: %s: header length %llu is too small to hold a JSON object; "
                          "this is not a safetensors file",
                          st->name, (ull)n);
    st->header_len  = n;
    st->data_offset = 8 + n;

    char what[300];
    snprintf(what, sizeof what, "safetensors: %s: JSON header (its byte 0 is file byte 8)", st->name);
    cJSON       *root = NULL;
    celer_status s    = celer_json_parse((const char *)data + 8, (size_t)n, what, &root, err);
    if (s != CELER_OK) return s;
    if (!cJSON_IsObject(root))
        s = celer_fail(err, CELER_ERR_FORMAT,
                       "safetensors: %s: the header is not a JSON object; this is not a safetensors file", st->name);
    else
        s = parse_json_header(st, root, data, size, err);
    cJSON_Delete(root);
    return s;
}

static celer_status parse_named(celer_safetensors *st, const uint8_t *data, uint64_t size, const char *name,
                                celer_error *err)
{
    st->name = strdup(name ? name : "(memory)");
    if (!st->name) return celer_fail(err, CELER_ERR_OOM, "safetensors: out of memory");
    celer_status s = parse_image(st, data, size, err);
    if (s != CELER_OK) celer_safetensors_close(st);
    return s;
}

celer_status celer_safetensors_parse(celer_safetensors *st, const uint8_t *data, uint64_t size,
                                     const char *name, celer_error *err)
{
    memset(st, 0, sizeof *st);
    if (!data) size = 0;
    return parse_named(st, data, size, name, err);
}

celer_status celer_safetensors_open(celer_safetensors *st, const char *path, celer_error *err)
{
    memset(st, 0, sizeof *st);
    celer_status s = celer_mapped_file_open(&st->file, path, err);
    if (s != CELER_OK) return s;
    return parse_named(st, st->file.data, st->file.size, path, err);
}

void celer_safetensors_close(celer_safetensors *st)
{
    if (!st) return;
    celer_mapped_file_close(&st->file);
    free(st->name);
    free(st->tensors);
    free(st->meta);
    free(st->strings);
    memset(st, 0, sizeof *st);
}

const celer_st_tensor *celer_safetensors_find(const celer_safetensors *st, const char *name)
{
    if (!st || !name) return NULL;
    uint64_t lo = 0, hi = st->n_tensors;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        int      c   = strcmp(name, st->tensors[mid].name);
        if (c == 0) return &st->tensors[mid];
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

const char *celer_safetensors_meta(const celer_safetensors *st, const char *key)
{
    if (!st || !key) return NULL;
    for (uint64_t i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta[i].key, key) == 0) return st->meta[i].value;
    return NULL;
}
