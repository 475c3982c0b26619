/* Streaming GGUF v3 writer. The header is built in memory (metadata in kv, tensor infos from
 * tensors) and written once by begin_data; the data section then streams through write(2).
 * Layout, as the reader expects it:
 *   "GGUF" u32 version=3  u64 n_tensors  u64 n_kv
 *   n_kv × (string key, u32 type, value)            strings are u64 length + bytes
 *   n_tensors × (string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset)
 *   zero padding to the alignment, then the data section: each tensor at its offset, padded. */
#include "formats/gguf_write.h"

#include "core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define GGUF_VERSION 3
#define DEFAULT_ALIGNMENT 32

/* Bytes of one scalar metadata value; 0 for strings, arrays and unknown types. */
static size_t scalar_size(celer_gguf_type t)
{
    switch (t) {
    case CELER_GGUF_UINT8:
    case CELER_GGUF_INT8:
    case CELER_GGUF_BOOL: return 1;
    case CELER_GGUF_UINT16:
    case CELER_GGUF_INT16: return 2;
    case CELER_GGUF_UINT32:
    case CELER_GGUF_INT32:
    case CELER_GGUF_FLOAT32: return 4;
    case CELER_GGUF_UINT64:
    case CELER_GGUF_INT64:
    case CELER_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* ---- the in-memory metadata buffer ---- */

static celer_status kv_reserve(celer_gguf_writer *w, size_t more, celer_error *err)
{
    if (w->kv_len + more <= w->kv_cap) return CELER_OK;
    size_t cap = w->kv_cap ? w->kv_cap : 4096;
    while (cap < w->kv_len + more) cap *= 2;
    uint8_t *p = realloc(w->kv, cap);
    if (!p) return celer_fail(err, CELER_ERR_OOM, "gguf: %s: out of memory for %zu bytes of metadata", w->path, cap);
    w->kv = p, w->kv_cap = cap;
    return CELER_OK;
}

static void kv_put(celer_gguf_writer *w, const void *p, size_t n)
{
    if (!n) return; /* p may be NULL */
    memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
}

static void kv_put_u32(celer_gguf_writer *w, uint32_t v) { kv_put(w, &v, 4); }
static void kv_put_u64(celer_gguf_writer *w, uint64_t v) { kv_put(w, &v, 8); }

static celer_status kv_put_str(celer_gguf_writer *w, const char *s, celer_error *err)
{
    size_t n = strlen(s);
    if (kv_reserve(w, 8 + n, err)) return err->code;
    kv_put_u64(w, n);
    kv_put(w, s, n);
    return CELER_OK;
}

/* Checks the writer's phase and the key, records it, and writes "key, type". */
static celer_status begin_kv(celer_gguf_writer *w, const char *key, celer_gguf_type type, celer_error *err)
{
    if (w->phase != 0)
        return celer_fail(err, CELER_ERR_INVALID, "gguf: %s: metadata key '%s' added after the header was written",
                          w->path, key);
    if (!*key) return celer_fail(err, CELER_ERR_INVALID, "gguf: %s: empty metadata key", w->path);
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->keys[i], key))
            return celer_fail(err, CELER_ERR_INVALID, "gguf: %s: metadata key '%s' given twice", w->path, key);
    char **keys = realloc(w->keys, (size_t)(w->n_kv + 1) * sizeof *keys);
    if (!keys) return celer_fail(err, CELER_ERR_OOM, "gguf: %s: out of memory for metadata keys", w->path);
    w->keys = keys;
    if (!(keys[w->n_kv] = strdup(key))) return celer_fail(err, CELER_ERR_OOM, "gguf: %s: out of memory", w->path);
    w->n_kv++;
    if (kv_put_str(w, key, err) || kv_reserve(w, 4, err)) return err->code;
    kv_put_u32(w, (uint32_t)type);
    return CELER_OK;
}

/* ---- lifecycle ---- */

celer_status celer_gguf_writer_open(celer_gguf_writer *w, const char *path, celer_error *err)
{
    memset(w, 0, sizeof *w);
    w->alignment = DEFAULT_ALIGNMENT;
    size_t n     = strlen(path);
    w->path      = strdup(path);
    w->tmp_path  = malloc(n + 32);
    if (!w->path || !w->tmp_path) return celer_fail(err, CELER_ERR_OOM, "gguf: out of memory");
    snprintf(w->tmp_path, n + 32, "%s.tmp-%ld", path, (long)getpid());
    w->fd = open(w->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0)
        return celer_fail(err, CELER_ERR_IO, "gguf: cannot create %s: %s; check that the directory exists and is "
                          "writable", w->tmp_path, strerror(errno));
    w->fd_open = true;
    return CELER_OK;
}

void celer_gguf_writer_free(celer_gguf_writer *w)
{
    if (!w) return;
    if (w->fd_open) {
        close(w->fd);
        if (w->phase != 2) unlink(w->tmp_path);
    }
    for (uint64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    for (uint64_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->keys);
    free(w->tensors);
    free(w->kv);
    free(w->path);
    free(w->tmp_path);
    memset(w, 0, sizeof *w);
}

celer_status celer_gguf_writer_set_alignment(celer_gguf_writer *w, uint32_t alignment, celer_error *err)
{
    if (!alignment || alignment > 65536 || (alignment & (alignment - 1)))
        return celer_fail(err, CELER_ERR_INVALID, "gguf: %s: alignment %u is not a power of two from 1 to 65536",
                          w->path, alignment);
    if (w->n_tensors)
        return celer_fail(err, CELER_ERR_INVALID, "gguf: %s: set the alignment before adding tensors", w->path);
    if (celer_gguf_writer_add_u32(w, "general.alignment", alignment, err)) return err->code;
    w->alignment = alignment;
    return CELER_OK;
}

/* ---- metadata ---- */

celer_status celer_gguf_writer_add(celer_gguf_writer *w, const char *key, celer_gguf_type type, const void *value,
                                   celer_error *err)
{
    size_t n = scalar_size(type);
    if (!n)
        return celer_fail(err, CELER_ERR_INVALID, "gguf: %s: key '%s': type %d is not a scalar type", w->path, key,
                          (int)type);
    if (begin_kv(w, key, type, err) || kv_reserve(w, n, err)) return err->code;
    if (type == CELER_GGUF_BOOL) {
        uint8_t b = *(const bool *)value ? 1 : 0;
        kv_put(w, &b, 1);
    } else {
        kv_put(w, value, n);
    }
    return CELER_OK;
}

celer_status celer_gguf_writer_add_u32(celer_gguf_writer *w, const char *key, uint32_t v, celer_error *err)
{
    return celer_gguf_writer_add(w, key, CELER_GGUF_UINT32, &v, err);
}

celer_status celer_gguf_writer_add_f32(celer_gguf_writer *w, const char *key, float v, celer_error *err)
{
    return celer_gguf_writer_add(w, key, CELER_GGUF_FLOAT32, &v, err);
}

celer_status celer_gguf_writer_add_bool(celer_gguf_writer *w, const char *key, bool v, celer_error *err)
{
    return celer_gguf_writer_add(w, key, CELER_GGUF_BOOL, &v, err);
}

celer_status celer_gguf_writer_add_str(celer_gguf_writer *w, const char *key, const char *s, celer_error *err)
{
    if (begin_kv(w, key, CELER_GGUF_STRING, err)) return err->code;
    return kv_put_str(w, s, err);
}

celer_status celer_gguf_writer_add_array(celer_gguf_writer *w, const char *key, celer_gguf_type elem_type,
                                         const void *elems, uint64_t n, celer_error *err)
{
    size_t es = scalar_size(elem_type);
    if (!es && elem_type != CELER_GGUF_STRING)
        return celer_fail(err, CELER_ERR_INVALID, "gguf: %s: key '%s': arrays of type %d are not written", w->path,
                          key, (int)elem_type);
    if (begin_kv(w, key, CELER_GGUF_ARRAY, err) || kv_reserve(w, 12, err)) return err->code;
    kv_put_u32(w, (uint32_t)elem_type);
    kv_put_u64(w, n);
    if (elem_type == CELER_GGUF_STRING) {
        const char *const *s = elems;
        for (uint64_t i = 0; i < n; i++)
            if (kv_put_str(w, s[i], err)) return err->code;
        return CELER_OK;
    }
    if (elem_type == CELER_GGUF_BOOL) {
        const bool *b = elems;
        if (kv_reserve(w, (size_t)n, err)) return err->code;
        for (uint64_t i = 0; i < n; i++) w->kv[w->kv_len++] = b[i] ? 1 : 0;
        return CELER_OK;
    }
    if (n > SIZE_MAX / es) return celer_fail(err, CELER_ERR_OOM, "gguf: %s: key '%s': array too large", w->path, key);
    if (kv_reserve(w, (size_t)n * es, err)) return err->code;
    kv_put(w, elems, (size_t)n * es);
    return CELER_OK;
}

/* ---- tensors ---- */

uint64_t celer_gguf_tensor_size(celer_ggml_type type, uint32_t n_dims, const uint64_t *ne)
{
    const celer_ggml_type_info *ti = celer_ggml_type_get(type);
    if (!ti || !ti->block_elems || n_dims < 1 || n_dims > 4 || ne[0] % ti->block_elems) return 0;
    uint64_t rows = 1;
    for (uint32_t d = 1; d < n_dims; d++) {
        if (ne[d] && rows > UINT64_MAX / ne[d]) return 0;
        rows *= ne[d];
    }
    uint64_t row = ne[0] / ti->block_elems * ti->block_bytes;
    if (row && rows > UINT64_MAX / row) return 0;
    return row * rows;
}

celer_status celer_gguf_writer_add_tensor(celer_gguf_writer *w, const char *name, celer_ggml_type type,
                                          uint32_t n_dims, const uint64_t *ne, celer_error *err)
{
    if (w->phase != 0)
        return celer_fail(err, CELER_ERR_INVALID, "gguf: %s: tensor '%s' added after the header was written", w->path,
                          name);
    const celer_ggml_type_info *ti = celer_ggml_type_get(type);
    if (!ti || !ti->block_elems)
        return celer_fail(err, CELER_ERR_INVALID, "gguf: %s: tensor '%s': unknown type %d", w->path, name, (int)type);
    if (n_dims < 1 || n_dims > 4)
        return celer_fail(err, CELER_ERR_INVALID, "gguf: %s: tensor '%s' has %u dimensions; GGUF allows 1 to 4",
                          w->path, name, n_dims);
    for (uint32_t d = 0; d < n_dims; d++)
        if (!ne[d])
            return celer_fail(err, CELER_ERR_INVALID, "gguf: %s: tensor '%s' has an empty dimension %u", w->path, name, d);
    if (ne[0] % ti->block_elems)
        return celer_fail(err, CELER_ERR_INVALID,
                          "gguf: %s: tensor '%s' rows of %llu elements are not whole %s blocks of %u; pick a type "
                          "whose block divides the row", w->path, name, (unsigned long long)ne[0], ti->name,
                          ti->block_elems);
    uint64_t size = celer_gguf_tensor_size(type, n_dims, ne);
    if (!size) return celer_fail(err, CELER_ERR_INVALID, "gguf: %s: tensor '%s' is too large", w->path, name);
    for (uint64_t i = 0; i < w->n_tensors; i++)
        if (!strcmp(w->tensors[i].name, name))
            return celer_fail(err, CELER_ERR_INVALID, "gguf: %s: tensor '%s' given twice", w->path, name);
    if (w->n_tensors == w->tensors_cap) {
        uint64_t            cap = w->tensors_cap ? w->tensors_cap * 2 : 64;
        celer_gguf_wtensor *t   = realloc(w->tensors, (size_t)cap * sizeof *t);
        if (!t) return celer_fail(err, CELER_ERR_OOM, "gguf: %s: out of memory for tensor infos", w->path);
        w->tensors = t, w->tensors_cap = cap;
    }
    celer_gguf_wtensor *t = &w->tensors[w->n_tensors];
    *t                    = (celer_gguf_wtensor){.n_dims = n_dims, .type = type, .n_bytes = size};
    for (uint32_t d = 0; d < 4; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    if (!(t->name = strdup(name))) return celer_fail(err, CELER_ERR_OOM, "gguf: %s: out of memory", w->path);
    t->offset    = w->data_size;
    w->data_size = align_up(t->offset + size, w->alignment);
    w->n_tensors++;
    return CELER_OK;
}

/* ---- writing ---- */

static celer_status write_all(celer_gguf_writer *w, const void *p, size_t n, celer_error *err)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t k = write(w->fd, b, n > (1u << 30) ? (1u << 30) : n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return celer_fail(err, CELER_ERR_IO, "gguf: writing %s failed at byte %llu: %s; check free space (df) and "
                              "retry", w->tmp_path, (unsigned long long)w->file_pos,
                              k < 0 ? strerror(errno) : "nothing written");
        b += k, n -= (size_t)k, w->file_pos += (uint64_t)k;
    }
    return CELER_OK;
}

/* Linux: start writeback of every 64 MiB as it is written and wait for the 64 MiB before it, so
 * dirty pages stay bounded, progress follows the disk, and the final fsync has little left. */
#define WRITEBACK_STEP (64u << 20)

static void stream_writeback(celer_gguf_writer *w)
{
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
    while (w->file_pos - w->flushed >= WRITEBACK_STEP) {
        if (w->flushed >= WRITEBACK_STEP)
            (void)sync_file_range(w->fd, (off_t)(w->flushed - WRITEBACK_STEP), WRITEBACK_STEP,
                                  SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
        (void)sync_file_range(w->fd, (off_t)w->flushed, WRITEBACK_STEP, SYNC_FILE_RANGE_WRITE);
        w->flushed += WRITEBACK_STEP;
    }
#else
    (void)w;
#endif
}

static celer_status write_zeros(celer_gguf_writer *w, uint64_t n, celer_error *err)
{
    static const uint8_t zeros[4096];
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        if (write_all(w, zeros, k, err)) return err->code;
        n -= k;
    }
    return CELER_OK;
}

/* Refuses early when the filesystem cannot hold the file. */
static celer_status check_space(celer_gguf_writer *w, uint64_t need, celer_error *err)
{
    struct statvfs sv;
    if (fstatvfs(w->fd, &sv) != 0) return CELER_OK; /* unknown: let write() report it */
    uint64_t avail = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
    if (need > avail)
        return celer_fail(err, CELER_ERR_IO, "gguf: %s needs %.1f MB but its filesystem has %.1f MB free; free space "
                          "or write elsewhere", w->path, (double)need / 1e6, (double)avail / 1e6);
    return CELER_OK;
}

celer_status celer_gguf_writer_begin_data(celer_gguf_writer *w, celer_gguf_progress_fn progress, void *user,
                                          celer_error *err)
{
    if (!w->fd_open || w->phase != 0)
        return celer_fail(err, CELER_ERR_INVALID, "gguf: %s: begin_data called twice or on a closed writer",
                          w->path ? w->path : "(unopened)");
    size_t info = 0;
    for (uint64_t i = 0; i < w->n_tensors; i++) info += 8 + strlen(w->tensors[i].name) + 4 + 8 * w->tensors[i].n_dims + 4 + 8;
    size_t   head_len = 24 + w->kv_len + info;
    uint64_t data_at  = align_up(head_len, w->alignment);
    if (check_space(w, data_at + w->data_size, err)) return err->code;
    uint8_t *h = malloc(head_len), *p = h;
    if (!h) return celer_fail(err, CELER_ERR_OOM, "gguf: %s: out of memory for a %zu-byte header", w->path, head_len);
#define PUT(src, n) (memcpy(p, (src), (n)), p += (n))
    uint32_t version = GGUF_VERSION;
    PUT("GGUF", 4);
    PUT(&version, 4);
    PUT(&w->n_tensors, 8);
    PUT(&w->n_kv, 8);
    if (w->kv_len) PUT(w->kv, w->kv_len);
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        const celer_gguf_wtensor *t = &w->tensors[i];
        uint64_t                  n = strlen(t->name);
        uint32_t                  type = (uint32_t)t->type;
        PUT(&n, 8);
        PUT(t->name, n);
        PUT(&t->n_dims, 4);
        PUT(t->ne, 8 * t->n_dims);
        PUT(&type, 4);
        PUT(&t->offset, 8);
    }
#undef PUT
    CELER_ASSERT((size_t)(p - h) == head_len);
    celer_status st = write_all(w, h, head_len, err);
    free(h);
    if (st || write_zeros(w, data_at - head_len, err)) return err->code;
    w->phase         = 1;
    w->progress      = progress;
    w->progress_user = user;
    return CELER_OK;
}

celer_status celer_gguf_writer_write(celer_gguf_writer *w, const void *data, size_t n, celer_error *err)
{
    if (w->phase != 1)
        return celer_fail(err, CELER_ERR_INVALID, "gguf: %s: tensor data written outside the data phase", w->path);
    const uint8_t *b = data;
    while (n) {
        if (w->cur >= w->n_tensors)
            return celer_fail(err, CELER_ERR_INVALID, "gguf: %s: %zu bytes of tensor data past the last tensor",
                              w->path, n);
        const celer_gguf_wtensor *t = &w->tensors[w->cur];
        uint64_t                  left = t->n_bytes - w->cur_done;
        size_t                    k    = n < left ? n : (size_t)left;
        if (write_all(w, b, k, err)) return err->code;
        stream_writeback(w);
        b += k, n -= k, w->cur_done += k, w->done += k;
        if (w->cur_done == t->n_bytes) {
            uint64_t end = align_up(t->offset + t->n_bytes, w->alignment);
            if (write_zeros(w, end - (t->offset + t->n_bytes), err)) return err->code;
            w->done     = end;
            w->cur_done = 0;
            w->cur++;
        }
    }
    if (w->progress) w->progress(w->progress_user, w->done, w->data_size);
    return CELER_OK;
}

celer_status celer_gguf_writer_finish(celer_gguf_writer *w, celer_error *err)
{
    if (w->phase == 0 && w->fd_open && celer_gguf_writer_begin_data(w, NULL, NULL, err)) return err->code;
    if (w->phase != 1) return celer_fail(err, CELER_ERR_INVALID, "gguf: %s: finish on a closed writer", w->path);
    if (w->cur < w->n_tensors)
        return celer_fail(err, CELER_ERR_INVALID, "gguf: %s: tensor '%s' has %llu of its %llu bytes; the file is "
                          "incomplete", w->path, w->tensors[w->cur].name, (unsigned long long)w->cur_done,
                          (unsigned long long)w->tensors[w->cur].n_bytes);
    if (fsync(w->fd) != 0)
        return celer_fail(err, CELER_ERR_IO, "gguf: flushing %s to disk failed: %s", w->tmp_path, strerror(errno));
    int rc       = close(w->fd);
    w->fd_open   = false;
    if (rc != 0) {
        unlink(w->tmp_path);
        return celer_fail(err, CELER_ERR_IO, "gguf: closing %s failed: %s", w->tmp_path, strerror(errno));
    }
    if (rename(w->tmp_path, w->path) != 0) {
        int e = errno;
        unlink(w->tmp_path);
        return celer_fail(err, CELER_ERR_IO, "gguf: cannot rename %s to %s: %s", w->tmp_path, w->path, strerror(e));
    }
    w->phase = 2;
    /* make the rename durable: sync the directory (best effort; some filesystems refuse) */
    char *dir = strdup(w->path);
    if (dir) {
        int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
        free(dir);
    }
    return CELER_OK;
}
