#include "formats/gguf.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

/* ---- bounded reading --------------------------------------------------- */

/* Limits that no real file comes near; past them a count is corruption, not a model. */
enum { MAX_DIMS = 4, MAX_ARRAY_DEPTH = 8, MAX_KEY_LEN = 65535 };
#define MAX_ENTRIES (1u << 24)

typedef struct {
    const uint8_t *base;
    uint64_t       size;
    uint64_t       pos;
    const char    *name;
    celer_error   *err;
} reader;

static celer_status truncated(reader *r, uint64_t need, const char *what)
{
    return celer_fail(r->err, CELER_ERR_FORMAT,
                      "gguf: %s: %s at byte %llu needs %llu bytes but the file ends at byte %llu; "
                      "the file looks truncated, download it again",
                      r->name, what, (unsigned long long)r->pos, (unsigned long long)need,
                      (unsigned long long)r->size);
}

static celer_status need(reader *r, uint64_t n, const char *what)
{
    return n > r->size - r->pos ? truncated(r, n, what) : CELER_OK;
}

static celer_status read_u32(reader *r, uint32_t *v, const char *what)
{
    celer_status st = need(r, 4, what);
    if (st) return st;
    memcpy(v, r->base + r->pos, 4);
    r->pos += 4;
    return CELER_OK;
}

static celer_status read_u64(reader *r, uint64_t *v, const char *what)
{
    celer_status st = need(r, 8, what);
    if (st) return st;
    memcpy(v, r->base + r->pos, 8);
    r->pos += 8;
    return CELER_OK;
}

static celer_status read_str(reader *r, celer_gguf_str *s, const char *what)
{
    uint64_t     len = 0;
    celer_status st  = read_u64(r, &len, what);
    if (!st) st = need(r, len, what);
    if (st) return st;
    s->ptr = (const char *)r->base + r->pos;
    s->len = len;
    r->pos += len;
    return CELER_OK;
}

/* ---- name index -------------------------------------------------------- */

static uint64_t hash_bytes(const char *p, uint64_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (uint64_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h;
}

static bool str_eq(celer_gguf_str a, const char *p, uint64_t n)
{
    return a.len == n && (n == 0 || memcmp(a.ptr, p, n) == 0);
}

bool celer_gguf_str_eq(celer_gguf_str s, const char *c) { return str_eq(s, c, strlen(c)); }

typedef celer_gguf_str (*name_fn)(const celer_gguf *g, uint32_t i);

static celer_gguf_str kv_name(const celer_gguf *g, uint32_t i) { return g->kv[i].key; }
static celer_gguf_str tensor_name(const celer_gguf *g, uint32_t i) { return g->tensors[i].name; }

/* The slot holding name, or the empty slot where it would go. */
static uint64_t index_probe(const celer_gguf_index *idx, const celer_gguf *g, name_fn names, const char *p,
                            uint64_t n)
{
    uint64_t mask = idx->cap - 1, h = hash_bytes(p, n) & mask;
    while (idx->slots[h] && !str_eq(names(g, idx->slots[h] - 1), p, n)) h = (h + 1) & mask;
    return h;
}

static celer_status index_init(celer_gguf_index *idx, uint64_t n, const char *name, celer_error *err)
{
    uint64_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    idx->slots = calloc(cap, sizeof *idx->slots);
    idx->cap   = cap;
    if (!idx->slots) return celer_fail(err, CELER_ERR_OOM, "gguf: %s: out of memory for a %llu-entry index", name,
                                      (unsigned long long)n);
    return CELER_OK;
}

/* ---- metadata values --------------------------------------------------- */

static const uint8_t scalar_size[CELER_GGUF_TYPE_COUNT] = {
    [CELER_GGUF_UINT8] = 1,  [CELER_GGUF_INT8] = 1,   [CELER_GGUF_UINT16] = 2,  [CELER_GGUF_INT16] = 2,
    [CELER_GGUF_UINT32] = 4, [CELER_GGUF_INT32] = 4,  [CELER_GGUF_FLOAT32] = 4, [CELER_GGUF_BOOL] = 1,
    [CELER_GGUF_UINT64] = 8, [CELER_GGUF_INT64] = 8,  [CELER_GGUF_FLOAT64] = 8,
};

const char *celer_gguf_type_name(celer_gguf_type t)
{
    static const char *const names[CELER_GGUF_TYPE_COUNT] = {
        "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool",
        "string", "array", "uint64", "int64", "float64",
    };
    return (unsigned)t < CELER_GGUF_TYPE_COUNT ? names[t] : "unknown";
}

static celer_status check_value_type(reader *r, uint32_t type, const char *key_ctx)
{
    if (type >= CELER_GGUF_TYPE_COUNT)
        return celer_fail(r->err, CELER_ERR_FORMAT, "gguf: %s: key '%s': unknown value type %u at byte %llu",
                          r->name, key_ctx, type, (unsigned long long)(r->pos - 4));
    return CELER_OK;
}

/* Validates one value of type and moves past it. */
static celer_status skip_value(reader *r, uint32_t type, int depth, const char *key)
{
    if (type != CELER_GGUF_STRING && type != CELER_GGUF_ARRAY) {
        if (need(r, scalar_size[type], "metadata value")) return r->err->code;
        r->pos += scalar_size[type];
        return CELER_OK;
    }
    if (type == CELER_GGUF_STRING) {
        celer_gguf_str s;
        return read_str(r, &s, "metadata string");
    }
    if (depth >= MAX_ARRAY_DEPTH)
        return celer_fail(r->err, CELER_ERR_FORMAT, "gguf: %s: key '%s': arrays nested deeper than %d at byte %llu",
                          r->name, key, MAX_ARRAY_DEPTH, (unsigned long long)r->pos);
    uint32_t elem  = 0;
    uint64_t count = 0;
    if (read_u32(r, &elem, "array element type") || check_value_type(r, elem, key)) return r->err->code;
    if (read_u64(r, &count, "array length")) return r->err->code;
    uint64_t min_size = elem == CELER_GGUF_STRING ? 8 : elem == CELER_GGUF_ARRAY ? 12 : scalar_size[elem];
    if (count > (r->size - r->pos) / min_size)
        return celer_fail(r->err, CELER_ERR_FORMAT,
                          "gguf: %s: key '%s': array of %llu %s at byte %llu cannot fit in the %llu bytes left; "
                          "the file is corrupt or truncated",
                          r->name, key, (unsigned long long)count, celer_gguf_type_name(elem),
                          (unsigned long long)(r->pos - 8), (unsigned long long)(r->size - r->pos));
    if (elem != CELER_GGUF_STRING && elem != CELER_GGUF_ARRAY) {
        r->pos += count * min_size;
        return CELER_OK;
    }
    for (uint64_t i = 0; i < count; i++)
        if (skip_value(r, elem, depth + 1, key)) return r->err->code;
    return CELER_OK;
}

/* A name from the file, cut to fit buf, with control bytes shown as '?' so that a message
 * stays one line. */
static const char *kv_key_buf(celer_gguf_str k, char *buf, size_t cap)
{
    size_t n = k.len < cap - 1 ? (size_t)k.len : cap - 1;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)k.ptr[i];
        buf[i]    = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    buf[n] = '\0';
    return buf;
}

/* ---- header ------------------------------------------------------------ */

static celer_status parse_kvs(celer_gguf *g, reader *r)
{
    /* smallest entry: key length (8) + type (4) + one byte of value */
    if (g->n_kv > MAX_ENTRIES || g->n_kv > (r->size - r->pos) / 13)
        return celer_fail(r->err, CELER_ERR_FORMAT,
                          "gguf: %s: metadata count %llu at byte 16 cannot fit in a file of %llu bytes; "
                          "the file is corrupt",
                          r->name, (unsigned long long)g->n_kv, (unsigned long long)r->size);
    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    if (!g->kv) return celer_fail(r->err, CELER_ERR_OOM, "gguf: %s: out of memory", r->name);
    if (index_init(&g->kv_index, g->n_kv, r->name, r->err)) return r->err->code;
    char keybuf[128];
    for (uint64_t i = 0; i < g->n_kv; i++) {
        celer_gguf_kv *kv      = &g->kv[i];
        uint64_t       key_at  = r->pos;
        uint32_t       type    = 0;
        if (read_str(r, &kv->key, "metadata key")) return r->err->code;
        if (kv->key.len > MAX_KEY_LEN)
            return celer_fail(r->err, CELER_ERR_FORMAT, "gguf: %s: metadata key at byte %llu is %llu bytes long (limit %d)",
                              r->name, (unsigned long long)key_at, (unsigned long long)kv->key.len, MAX_KEY_LEN);
        const char *key = kv_key_buf(kv->key, keybuf, sizeof keybuf);
        uint64_t    slot = index_probe(&g->kv_index, g, kv_name, kv->key.ptr, kv->key.len);
        if (g->kv_index.slots[slot])
            return celer_fail(r->err, CELER_ERR_FORMAT, "gguf: %s: metadata key '%s' at byte %llu appears twice",
                              r->name, key, (unsigned long long)key_at);
        if (read_u32(r, &type, "metadata value type") || check_value_type(r, type, key)) return r->err->code;
        kv->type   = (celer_gguf_type)type;
        kv->offset = r->pos;
        if (type == CELER_GGUF_ARRAY) {
            uint32_t elem = 0;
            if (read_u32(r, &elem, "array element type") || check_value_type(r, elem, key)) return r->err->code;
            if (read_u64(r, &kv->array_len, "array length")) return r->err->code;
            kv->array_type = (celer_gguf_type)elem;
            kv->data       = r->base + r->pos;
            r->pos         = kv->offset;
        } else {
            kv->data = r->base + r->pos;
        }
        if (skip_value(r, type, 0, key)) return r->err->code;
        g->kv_index.slots[slot] = (uint32_t)i + 1;
    }
    return CELER_OK;
}

static celer_status parse_tensor_info(reader *r, celer_gguf_tensor *t)
{
    uint64_t at   = r->pos;
    uint32_t type = 0;
    char     nm[128];
    if (read_str(r, &t->name, "tensor name")) return r->err->code;
    const char *name = kv_key_buf(t->name, nm, sizeof nm);
    if (read_u32(r, &t->n_dims, "tensor dimension count")) return r->err->code;
    if (t->n_dims < 1 || t->n_dims > MAX_DIMS)
        return celer_fail(r->err, CELER_ERR_FORMAT, "gguf: %s: tensor '%s' at byte %llu has %u dimensions (1 to %d allowed)",
                          r->name, name, (unsigned long long)at, t->n_dims, MAX_DIMS);
    uint64_t n_elems = 1;
    for (int d = 0; d < MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if (read_u64(r, &t->ne[d], "tensor dimension")) return r->err->code;
        if (t->ne[d] > (uint64_t)INT64_MAX || (t->ne[d] && n_elems > (uint64_t)INT64_MAX / t->ne[d]))
            return celer_fail(r->err, CELER_ERR_FORMAT,
                              "gguf: %s: tensor '%s' at byte %llu: dimension %u (%llu) overflows the element count",
                              r->name, name, (unsigned long long)at, d, (unsigned long long)t->ne[d]);
        n_elems *= t->ne[d];
    }
    if (read_u32(r, &type, "tensor type")) return r->err->code;
    const celer_ggml_type_info *ti = celer_ggml_type_get(type);
    if (!ti)
        return celer_fail(r->err, CELER_ERR_FORMAT,
                          "gguf: %s: tensor '%s' has unknown type %u (at byte %llu); the file is corrupt or "
                          "uses a type newer than this celer",
                          r->name, name, type, (unsigned long long)(r->pos - 4));
    t->type = (celer_ggml_type)type;
    if (t->ne[0] % ti->block_elems)
        return celer_fail(r->err, CELER_ERR_FORMAT,
                          "gguf: %s: tensor '%s': row of %llu elements is not a whole number of %s blocks (%u)",
                          r->name, name, (unsigned long long)t->ne[0], ti->name, ti->block_elems);
    t->n_bytes = n_elems / ti->block_elems * ti->block_bytes; /* n_elems < 2^63, block_bytes <= 292 / elems */
    if (n_elems / ti->block_elems > UINT64_MAX / ti->block_bytes)
        return celer_fail(r->err, CELER_ERR_FORMAT, "gguf: %s: tensor '%s' is too large", r->name, name);
    return read_u64(r, &t->offset, "tensor data offset");
}

static int cmp_by_offset(const void *a, const void *b)
{
    const celer_gguf_tensor *x = *(const celer_gguf_tensor *const *)a, *y = *(const celer_gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Places every tensor in the data section: aligned, inside the file, not overlapping. */
static celer_status place_tensors(celer_gguf *g, reader *r)
{
    char nm[128], nm2[128];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        celer_gguf_tensor *t    = &g->tensors[i];
        const char        *name = kv_key_buf(t->name, nm, sizeof nm);
        if (t->offset % g->alignment)
            return celer_fail(r->err, CELER_ERR_FORMAT,
                              "gguf: %s: tensor '%s' data offset %llu is not a multiple of the alignment %u",
                              r->name, name, (unsigned long long)t->offset, g->alignment);
        uint64_t avail = g->data_offset <= r->size ? r->size - g->data_offset : 0;
        if (t->offset > avail || t->n_bytes > avail - t->offset)
            return celer_fail(r->err, CELER_ERR_FORMAT,
                              "gguf: %s: tensor '%s' (%llu bytes at data offset %llu, file byte %llu) ends past the "
                              "end of the file (%llu bytes); the file looks truncated, download it again",
                              r->name, name, (unsigned long long)t->n_bytes, (unsigned long long)t->offset,
                              (unsigned long long)(g->data_offset + t->offset), (unsigned long long)r->size);
        t->data = r->base + g->data_offset + t->offset;
    }
    /* tensors holding bytes, by offset: each must end before the next begins */
    const celer_gguf_tensor **order = malloc((g->n_tensors ? g->n_tensors : 1) * sizeof *order);
    if (!order) return celer_fail(r->err, CELER_ERR_OOM, "gguf: %s: out of memory", r->name);
    uint64_t n = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].n_bytes) order[n++] = &g->tensors[i];
    qsort(order, n, sizeof *order, cmp_by_offset);
    for (uint64_t i = 0; i + 1 < n; i++) {
        const celer_gguf_tensor *a = order[i], *b = order[i + 1];
        if (a->offset + a->n_bytes > b->offset) {
            celer_fail(r->err, CELER_ERR_FORMAT, "gguf: %s: tensors '%s' and '%s' overlap at data offset %llu",
                       r->name, kv_key_buf(a->name, nm, sizeof nm), kv_key_buf(b->name, nm2, sizeof nm2),
                       (unsigned long long)b->offset);
            free(order);
            return r->err->code;
        }
    }
    free(order);
    return CELER_OK;
}

static celer_status parse_tensors(celer_gguf *g, reader *r)
{
    /* smallest tensor info: name length (8) + n_dims (4) + one dim (8) + type (4) + offset (8) */
    if (g->n_tensors > MAX_ENTRIES || g->n_tensors > (r->size - r->pos) / 32)
        return celer_fail(r->err, CELER_ERR_FORMAT,
                          "gguf: %s: tensor count %llu at byte 8 cannot fit in the %llu bytes after the metadata; "
                          "the file is corrupt",
                          r->name, (unsigned long long)g->n_tensors, (unsigned long long)(r->size - r->pos));
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    if (!g->tensors) return celer_fail(r->err, CELER_ERR_OOM, "gguf: %s: out of memory", r->name);
    if (index_init(&g->tensor_index, g->n_tensors, r->name, r->err)) return r->err->code;
    char nm[128];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        uint64_t at = r->pos;
        if (parse_tensor_info(r, &g->tensors[i])) return r->err->code;
        celer_gguf_str name = g->tensors[i].name;
        uint64_t       slot = index_probe(&g->tensor_index, g, tensor_name, name.ptr, name.len);
        if (g->tensor_index.slots[slot])
            return celer_fail(r->err, CELER_ERR_FORMAT, "gguf: %s: tensor '%s' at byte %llu appears twice",
                              r->name, kv_key_buf(name, nm, sizeof nm), (unsigned long long)at);
        g->tensor_index.slots[slot] = (uint32_t)i + 1;
    }
    return CELER_OK;
}

static celer_status read_alignment(celer_gguf *g, reader *r)
{
    g->alignment        = 32;
    const celer_gguf_kv *kv = celer_gguf_find(g, "general.alignment");
    if (!kv) return CELER_OK;
    uint32_t a = 0;
    if (kv->type == CELER_GGUF_UINT32) memcpy(&a, kv->data, 4);
    if (kv->type != CELER_GGUF_UINT32 || a == 0 || (a & (a - 1)))
        return celer_fail(r->err, CELER_ERR_FORMAT,
                          "gguf: %s: general.alignment at byte %llu must be a uint32 power of two (got %s %u)",
                          r->name, (unsigned long long)kv->offset, celer_gguf_type_name(kv->type), a);
    g->alignment = a;
    return CELER_OK;
}

celer_status celer_gguf_parse(celer_gguf *g, const uint8_t *data, uint64_t size, const char *name,
                              celer_error *err)
{
    celer_error local;
    if (!err) err = &local;
    memset(g, 0, sizeof *g);
    g->name  = name;
    reader r = {.base = data, .size = size, .pos = 0, .name = name, .err = err};
    if (size < 4 || memcmp(data, "GGUF", 4) != 0)
        return celer_fail(err, CELER_ERR_FORMAT, "gguf: %s: not a GGUF file (the first 4 bytes are not 'GGUF')", name);
    r.pos = 4;
    if (read_u32(&r, &g->version, "version")) return err->code;
    if (g->version == 1)
        return celer_fail(err, CELER_ERR_UNSUPPORTED,
                          "gguf: %s: GGUF version 1 is not supported; convert the model again with a current "
                          "converter (versions 2 and 3 are read)", name);
    if (g->version >= 0x01000000u)
        return celer_fail(err, CELER_ERR_UNSUPPORTED,
                          "gguf: %s: the file is big-endian; celer reads little-endian GGUF files only", name);
    if (g->version != 2 && g->version != 3)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "gguf: %s: GGUF version %u is not supported (2 and 3 are read)",
                          name, g->version);
    if (read_u64(&r, &g->n_tensors, "tensor count") || read_u64(&r, &g->n_kv, "metadata count")) return err->code;
    if (parse_kvs(g, &r) || parse_tensors(g, &r) || read_alignment(g, &r)) return err->code;
    uint64_t a     = g->alignment;
    g->data_offset = r.pos % a ? r.pos + (a - r.pos % a) : r.pos;
    return place_tensors(g, &r);
}

celer_status celer_gguf_open(celer_gguf *g, const char *path, celer_error *err)
{
    celer_mapped_file f;
    memset(g, 0, sizeof *g);
    celer_status st = celer_mapped_file_open(&f, path, err);
    if (st != CELER_OK) return st;
    st      = celer_gguf_parse(g, f.data, f.size, f.path, err);
    g->file = f; /* owned from here, freed by close even on failure */
    g->name = g->file.path;
    return st;
}

void celer_gguf_close(celer_gguf *g)
{
    if (!g) return;
    free(g->kv);
    free(g->tensors);
    free(g->kv_index.slots);
    free(g->tensor_index.slots);
    celer_mapped_file_close(&g->file);
    memset(g, 0, sizeof *g);
}

/* ---- lookups ----------------------------------------------------------- */

const celer_gguf_kv *celer_gguf_find(const celer_gguf *g, const char *key)
{
    if (!g->kv_index.cap) return NULL;
    uint64_t s = index_probe(&g->kv_index, g, kv_name, key, strlen(key));
    return g->kv_index.slots[s] ? &g->kv[g->kv_index.slots[s] - 1] : NULL;
}

const celer_gguf_tensor *celer_gguf_find_tensor(const celer_gguf *g, const char *name)
{
    if (!g->tensor_index.cap) return NULL;
    uint64_t s = index_probe(&g->tensor_index, g, tensor_name, name, strlen(name));
    return g->tensor_index.slots[s] ? &g->tensors[g->tensor_index.slots[s] - 1] : NULL;
}

/* ---- element access ---------------------------------------------------- */

celer_gguf_str celer_gguf_read_str(const uint8_t *p)
{
    celer_gguf_str s;
    memcpy(&s.len, p, 8);
    s.ptr = (const char *)p + 8;
    return s;
}

static bool is_int_type(celer_gguf_type t)
{
    return t <= CELER_GGUF_INT32 || t == CELER_GGUF_UINT64 || t == CELER_GGUF_INT64;
}

int64_t celer_gguf_read_int(const uint8_t *p, celer_gguf_type t)
{
    switch (t) {
    case CELER_GGUF_UINT8: return *p;
    case CELER_GGUF_INT8: return (int8_t)*p;
    case CELER_GGUF_BOOL: return *p != 0;
#define RD(T) { T v_; memcpy(&v_, p, sizeof v_); return (int64_t)v_; }
    case CELER_GGUF_UINT16: RD(uint16_t)
    case CELER_GGUF_INT16: RD(int16_t)
    case CELER_GGUF_UINT32: RD(uint32_t)
    case CELER_GGUF_INT32: RD(int32_t)
    case CELER_GGUF_UINT64: RD(uint64_t)
    case CELER_GGUF_INT64: RD(int64_t)
#undef RD
    default: return 0;
    }
}

double celer_gguf_read_float(const uint8_t *p, celer_gguf_type t)
{
    if (t == CELER_GGUF_FLOAT32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    if (t == CELER_GGUF_FLOAT64) {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    return (double)celer_gguf_read_int(p, t);
}

celer_gguf_kv celer_gguf_nested(const uint8_t *p)
{
    celer_gguf_kv kv = {.type = CELER_GGUF_ARRAY, .data = p + 12};
    uint32_t      t;
    memcpy(&t, p, 4);
    memcpy(&kv.array_len, p + 4, 8);
    kv.array_type = (celer_gguf_type)t;
    return kv;
}

const uint8_t *celer_gguf_array_next(const celer_gguf_kv *kv, const uint8_t **cursor)
{
    const uint8_t *p = *cursor;
    celer_gguf_type t = kv->array_type;
    if (t == CELER_GGUF_STRING) {
        *cursor = p + 8 + celer_gguf_read_str(p).len;
    } else if (t == CELER_GGUF_ARRAY) {
        celer_gguf_kv  inner = celer_gguf_nested(p);
        const uint8_t *c     = inner.data;
        for (uint64_t i = 0; i < inner.array_len; i++) celer_gguf_array_next(&inner, &c);
        *cursor = c;
    } else {
        *cursor = p + scalar_size[t];
    }
    return p;
}

/* ---- typed getters ----------------------------------------------------- */

static celer_status wrong_type(const celer_gguf *g, const celer_gguf_kv *kv, const char *key, const char *want,
                               celer_error *err)
{
    return celer_fail(err, CELER_ERR_FORMAT, "gguf: %s: key '%s' at byte %llu is %s, expected %s", g->name, key,
                      (unsigned long long)kv->offset, celer_gguf_type_name(kv->type), want);
}

static const celer_gguf_kv *lookup(const celer_gguf *g, const char *key, bool *found)
{
    const celer_gguf_kv *kv = celer_gguf_find(g, key);
    if (found) *found = kv != NULL;
    return kv;
}

celer_status celer_gguf_get_i64(const celer_gguf *g, const char *key, int64_t *v, bool *found, celer_error *err)
{
    const celer_gguf_kv *kv = lookup(g, key, found);
    if (!kv) return CELER_OK;
    if (!is_int_type(kv->type)) return wrong_type(g, kv, key, "an integer", err);
    if (kv->type == CELER_GGUF_UINT64 && celer_gguf_read_int(kv->data, kv->type) < 0)
        return celer_fail(err, CELER_ERR_FORMAT, "gguf: %s: key '%s' is too large", g->name, key);
    *v = celer_gguf_read_int(kv->data, kv->type);
    return CELER_OK;
}

celer_status celer_gguf_get_u64(const celer_gguf *g, const char *key, uint64_t *v, bool *found, celer_error *err)
{
    const celer_gguf_kv *kv = lookup(g, key, found);
    if (!kv) return CELER_OK;
    if (!is_int_type(kv->type)) return wrong_type(g, kv, key, "an unsigned integer", err);
    int64_t i = celer_gguf_read_int(kv->data, kv->type);
    if (kv->type == CELER_GGUF_UINT64) {
        memcpy(v, kv->data, 8);
        return CELER_OK;
    }
    if (i < 0)
        return celer_fail(err, CELER_ERR_FORMAT, "gguf: %s: key '%s' at byte %llu is negative (%lld)", g->name, key,
                          (unsigned long long)kv->offset, (long long)i);
    *v = (uint64_t)i;
    return CELER_OK;
}

celer_status celer_gguf_get_f64(const celer_gguf *g, const char *key, double *v, bool *found, celer_error *err)
{
    const celer_gguf_kv *kv = lookup(g, key, found);
    if (!kv) return CELER_OK;
    if (kv->type != CELER_GGUF_FLOAT32 && kv->type != CELER_GGUF_FLOAT64 && !is_int_type(kv->type))
        return wrong_type(g, kv, key, "a number", err);
    *v = celer_gguf_read_float(kv->data, kv->type);
    return CELER_OK;
}

celer_status celer_gguf_get_bool(const celer_gguf *g, const char *key, bool *v, bool *found, celer_error *err)
{
    const celer_gguf_kv *kv = lookup(g, key, found);
    if (!kv) return CELER_OK;
    if (kv->type != CELER_GGUF_BOOL) return wrong_type(g, kv, key, "a bool", err);
    *v = kv->data[0] != 0;
    return CELER_OK;
}

celer_status celer_gguf_get_str(const celer_gguf *g, const char *key, celer_gguf_str *v, bool *found,
                                celer_error *err)
{
    const celer_gguf_kv *kv = lookup(g, key, found);
    if (!kv) return CELER_OK;
    if (kv->type != CELER_GGUF_STRING) return wrong_type(g, kv, key, "a string", err);
    *v = celer_gguf_read_str(kv->data);
    return CELER_OK;
}
