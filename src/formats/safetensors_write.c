/* The safetensors writer (safetensors_write.h). The header is printed by hand rather than
 * through cJSON: cJSON prints numbers as doubles, which would round offsets past 2^53 and
 * print those past 2^31 in exponent form. */
#include "formats/safetensors_write.h"

#include "core/bytes.h"
#include "core/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

celer_status celer_st_decl_bytes(const celer_st_decl *d, uint64_t *bytes, celer_error *err)
{
    uint32_t bits = celer_st_dtype_bits(d->dtype);
    if (!bits) return celer_fail(err, CELER_ERR_INVALID, "safetensors: tensor '%s': unknown dtype", d->name);
    if (d->n_dims > CELER_ST_MAX_DIMS)
        return celer_fail(err, CELER_ERR_INVALID, "safetensors: tensor '%s': %u dimensions (at most %d)", d->name,
                          d->n_dims, CELER_ST_MAX_DIMS);
    uint64_t n = 1;
    for (uint32_t i = 0; i < d->n_dims; i++)
        if (d->shape[i] && n > UINT64_MAX / 8 / d->shape[i])
            return celer_fail(err, CELER_ERR_INVALID, "safetensors: tensor '%s': the element count overflows",
                              d->name);
        else
            n *= d->shape[i];
    if (n * bits % 8)
        return celer_fail(err, CELER_ERR_INVALID, "safetensors: tensor '%s': %llu elements of %s do not fill whole "
                          "bytes", d->name, (unsigned long long)n, celer_st_dtype_name(d->dtype));
    *bytes = n * bits / 8;
    return CELER_OK;
}

/* ---- the header --------------------------------------------------------------------------- */

/* oom: an append failed, and every append since did nothing (one check at the end). */
typedef struct {
    celer_bytes s;
    bool        oom;
} buf;

static void put(buf *b, const char *s, size_t n)
{
    if (!b->oom && !celer_bytes_put(&b->s, s, n)) b->oom = true;
}

static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }

static void put_u64(buf *b, uint64_t v)
{
    char s[24];
    snprintf(s, sizeof s, "%llu", (unsigned long long)v);
    puts_(b, s);
}

/* s as a JSON string: quotes, backslashes and control characters escaped, UTF-8 kept. */
static void put_str(buf *b, const char *s)
{
    put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char          e[8];
        if (c == '"' || c == '\\') {
            e[0] = '\\', e[1] = (char)c;
            put(b, e, 2);
        } else if (c < 0x20) {
            snprintf(e, sizeof e, "\\u%04x", c);
            put(b, e, 6);
        } else {
            put(b, (const char *)&c, 1);
        }
    }
    put(b, "\"", 1);
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The header JSON for the tensors and metadata; ends[i] receives tensor i's end offset. */
static celer_status build_header(buf *h, const celer_st_decl *t, uint64_t n, const celer_st_meta *meta,
                                 uint64_t n_meta, uint64_t *ends, celer_error *err)
{
    puts_(h, "{");
    if (n_meta) {
        puts_(h, "\"__metadata__\":{");
        for (uint64_t i = 0; i < n_meta; i++) {
            if (i) puts_(h, ",");
            put_str(h, meta[i].key);
            puts_(h, ":");
            put_str(h, meta[i].value);
        }
        puts_(h, "}");
    }
    uint64_t at = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t bytes;
        if (celer_st_decl_bytes(&t[i], &bytes, err)) return err->code;
        if (!strcmp(t[i].name, "__metadata__") || !*t[i].name)
            return celer_fail(err, CELER_ERR_INVALID, "safetensors: '%s' is not a tensor name", t[i].name);
        if (i || n_meta) puts_(h, ",");
        put_str(h, t[i].name);
        puts_(h, ":{\"dtype\":");
        put_str(h, celer_st_dtype_name(t[i].dtype));
        puts_(h, ",\"shape\":[");
        for (uint32_t d = 0; d < t[i].n_dims; d++) {
            if (d) puts_(h, ",");
            put_u64(h, t[i].shape[d]);
        }
        puts_(h, "],\"data_offsets\":[");
        put_u64(h, at);
        puts_(h, ",");
        put_u64(h, at + bytes);
        puts_(h, "]}");
        at += bytes;
        ends[i] = at;
    }
    puts_(h, "}");
    while (!h->oom && h->s.n % 8) puts_(h, " ");
    if (h->oom) return celer_fail(err, CELER_ERR_OOM, "safetensors: out of memory for the header");
    return CELER_OK;
}

/* ---- the writer --------------------------------------------------------------------------- */

static void release(celer_st_writer *w)
{
    if (w->names)
        for (uint64_t i = 0; i < w->n; i++) free(w->names[i]);
    free(w->names);
    free(w->ends);
    free(w->path);
    free(w->tmp);
    memset(w, 0, sizeof *w);
}

void celer_st_writer_abort(celer_st_writer *w)
{
    if (w->f) fclose(w->f);
    if (w->tmp) unlink(w->tmp);
    release(w);
}

celer_status celer_st_writer_open(celer_st_writer *w, const char *path, const celer_st_decl *t, uint64_t n,
                                  const celer_st_meta *meta, uint64_t n_meta, celer_error *err)
{
    memset(w, 0, sizeof *w);
    /* names must be unique: sort copies of the pointers and compare neighbours */
    const char **sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted) return celer_fail(err, CELER_ERR_OOM, "safetensors: out of memory");
    for (uint64_t i = 0; i < n; i++) sorted[i] = t[i].name;
    qsort(sorted, n, sizeof *sorted, cmp_name);
    for (uint64_t i = 1; i < n; i++)
        if (!strcmp(sorted[i - 1], sorted[i])) {
            celer_fail(err, CELER_ERR_INVALID, "safetensors: %s: tensor '%s' declared twice", path, sorted[i]);
            free(sorted);
            return err->code;
        }
    free(sorted);

    w->n     = n;
    w->ends  = calloc(n ? n : 1, sizeof *w->ends);
    w->names = calloc(n ? n : 1, sizeof *w->names);
    w->path  = strdup(path);
    w->tmp   = malloc(strlen(path) + 16);
    if (!w->ends || !w->names || !w->path || !w->tmp) {
        release(w);
        return celer_fail(err, CELER_ERR_OOM, "safetensors: out of memory");
    }
    for (uint64_t i = 0; i < n; i++)
        if (!(w->names[i] = strdup(t[i].name))) {
            release(w);
            return celer_fail(err, CELER_ERR_OOM, "safetensors: out of memory");
        }
    sprintf(w->tmp, "%s.partial", path);

    buf h = {0};
    if (build_header(&h, t, n, meta, n_meta, w->ends, err)) {
        free(h.s.p);
        release(w);
        return err->code;
    }
    w->f = fopen(w->tmp, "wb");
    if (!w->f) {
        celer_fail(err, CELER_ERR_IO, "safetensors: cannot create %s: %s", w->tmp, strerror(errno));
        free(h.s.p);
        release(w);
        return err->code;
    }
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)h.s.n >> (8 * i));
    bool ok = fwrite(len, 1, 8, w->f) == 8 && fwrite(h.s.p, 1, h.s.n, w->f) == h.s.n;
    free(h.s.p);
    if (!ok) {
        celer_fail(err, CELER_ERR_IO, "safetensors: cannot write %s: %s", w->tmp, strerror(errno));
        celer_st_writer_abort(w);
        return err->code;
    }
    return CELER_OK;
}

uint64_t celer_st_writer_current(const celer_st_writer *w, uint64_t *bytes_due)
{
    uint64_t i = w->cur;
    while (i < w->n && w->ends[i] == w->at) i++; /* tensors of 0 bytes, and the one just ended */
    if (bytes_due) *bytes_due = i < w->n ? w->ends[i] - w->at : 0;
    return i;
}

celer_status celer_st_writer_put(celer_st_writer *w, const void *data, size_t n, celer_error *err)
{
    uint64_t total = w->n ? w->ends[w->n - 1] : 0;
    if (n > total - w->at)
        return celer_fail(err, CELER_ERR_INVALID, "safetensors: %s: %zu bytes past the end of the last tensor",
                          w->path, n - (size_t)(total - w->at));
    if (n && fwrite(data, 1, n, w->f) != n)
        return celer_fail(err, CELER_ERR_IO, "safetensors: cannot write %s: %s", w->tmp, strerror(errno));
    w->at += n;
    while (w->cur < w->n && w->ends[w->cur] <= w->at) w->cur++;
    return CELER_OK;
}

celer_status celer_st_writer_finish(celer_st_writer *w, celer_error *err)
{
    uint64_t due;
    uint64_t i = celer_st_writer_current(w, &due);
    if (i < w->n) {
        celer_fail(err, CELER_ERR_INVALID, "safetensors: %s: tensor '%s' is missing %llu bytes", w->path,
                   w->names[i], (unsigned long long)due);
        celer_st_writer_abort(w);
        return err->code;
    }
    FILE *f      = w->f;
    w->f         = NULL;
    bool written = !fflush(f) && !fsync(fileno(f));
    if (fclose(f)) written = false;
    if (!written) {
        celer_fail(err, CELER_ERR_IO, "safetensors: cannot write %s: %s", w->tmp, strerror(errno));
        celer_st_writer_abort(w);
        return err->code;
    }
    if (rename(w->tmp, w->path)) {
        celer_fail(err, CELER_ERR_IO, "safetensors: cannot rename %s to %s: %s", w->tmp, w->path, strerror(errno));
        celer_st_writer_abort(w);
        return err->code;
    }
    release(w);
    return CELER_OK;
}
