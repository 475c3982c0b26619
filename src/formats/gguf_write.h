/* Streaming GGUF v3 writer (little-endian hosts). Metadata and tensor descriptions are collected
 * in memory; then the header is written and the tensor data follows tensor by tensor, in the
 * order the tensors were added, so a file of any size streams to disk in caller-sized chunks.
 *
 *   celer_gguf_writer w = {0};
 *   celer_gguf_writer_open(&w, path, &err);                 creates path.tmp-PID next to path
 *   celer_gguf_writer_add_str(&w, "general.architecture", "llama", &err);   ... more keys
 *   celer_gguf_writer_add_tensor(&w, "token_embd.weight", CELER_GGML_Q4_0, 2, ne, &err); ...
 *   celer_gguf_writer_begin_data(&w, NULL, NULL, &err);     writes the header
 *   celer_gguf_writer_write(&w, bytes, n, &err);            ... every tensor's bytes, in order
 *   celer_gguf_writer_finish(&w, &err);                     fsync, rename into place
 *   celer_gguf_writer_free(&w);                             removes the temporary file if unfinished
 *
 * Every failure leaves w freeable and names the file; OS errors carry strerror. Until finish
 * succeeds, the destination path is untouched. */
#ifndef CELER_FORMATS_GGUF_WRITE_H
#define CELER_FORMATS_GGUF_WRITE_H

#include "celer.h"
#include "formats/gguf.h"

/* Called after each chunk of tensor data reaches the file: bytes done of total (data section). */
typedef void (*celer_gguf_progress_fn)(void *user, uint64_t done, uint64_t total);

typedef struct {
    char           *name;    /* malloc'd */
    uint32_t        n_dims;  /* 1..4 */
    uint64_t        ne[4];   /* elements per dimension, ne[0] contiguous; unused dims are 1 */
    celer_ggml_type type;
    uint64_t        offset;  /* in the data section, a multiple of the alignment */
    uint64_t        n_bytes; /* without padding */
} celer_gguf_wtensor;

typedef struct {
    char               *path;       /* destination (malloc'd) */
    char               *tmp_path;   /* path.tmp-PID, written until finish renames it */
    int                 fd;         /* valid while fd_open */
    bool                fd_open;
    int                 phase;      /* 0 collecting metadata and tensors, 1 writing data, 2 finished */
    uint32_t            alignment;  /* 32 unless set */
    uint8_t            *kv;         /* (kv_len) encoded key/value pairs */
    size_t              kv_len, kv_cap;
    uint64_t            n_kv;
    char              **keys;       /* (n_kv) for the duplicate check */
    celer_gguf_wtensor *tensors;    /* (n_tensors) */
    uint64_t            n_tensors, tensors_cap;
    uint64_t            data_size;  /* data section bytes, padding included */
    uint64_t            cur;        /* tensor being written */
    uint64_t            cur_done;   /* its bytes written so far */
    uint64_t            done;       /* data section bytes written, padding included */
    uint64_t            file_pos;   /* bytes written to the file */
    uint64_t            flushed;    /* bytes whose writeback was started */
    celer_gguf_progress_fn progress;
    void               *progress_user;
} celer_gguf_writer;

/* Creates the temporary file path.tmp-PID beside path (so the final rename stays on one
 * filesystem). On failure w stays freeable. */
celer_status celer_gguf_writer_open(celer_gguf_writer *w, const char *path, celer_error *err);
/* Removes the temporary file unless finish succeeded, and frees everything; zeroed or NULL w is fine. */
void         celer_gguf_writer_free(celer_gguf_writer *w);

/* Data alignment (a power of two from 1 to 65536; default 32). Written as general.alignment;
 * call before adding tensors. */
celer_status celer_gguf_writer_set_alignment(celer_gguf_writer *w, uint32_t alignment, celer_error *err);

/* ---- metadata: keys must be unique; each call fails if the key exists ---- */

/* A scalar of any numeric type or bool; value points at that C type (uint8_t … double, bool). */
celer_status celer_gguf_writer_add(celer_gguf_writer *w, const char *key, celer_gguf_type type, const void *value,
                                   celer_error *err);
celer_status celer_gguf_writer_add_u32(celer_gguf_writer *w, const char *key, uint32_t v, celer_error *err);
celer_status celer_gguf_writer_add_f32(celer_gguf_writer *w, const char *key, float v, celer_error *err);
celer_status celer_gguf_writer_add_bool(celer_gguf_writer *w, const char *key, bool v, celer_error *err);
celer_status celer_gguf_writer_add_str(celer_gguf_writer *w, const char *key, const char *s, celer_error *err);
/* An array of n elements of elem_type: a packed C array of that scalar type, or for
 * CELER_GGUF_STRING a `const char *const *` of NUL-terminated strings. Nested arrays are not
 * written. */
celer_status celer_gguf_writer_add_array(celer_gguf_writer *w, const char *key, celer_gguf_type elem_type,
                                         const void *elems, uint64_t n, celer_error *err);

/* ---- tensors ---- */

/* Describes the next tensor: name unique, 1..4 dims, ne[0] a whole number of blocks of type.
 * Its offset follows the previous tensor, aligned. */
celer_status celer_gguf_writer_add_tensor(celer_gguf_writer *w, const char *name, celer_ggml_type type,
                                          uint32_t n_dims, const uint64_t *ne, celer_error *err);
/* Bytes one tensor of that type and shape takes (0 if ne[0] is not whole blocks or the type is unknown). */
uint64_t     celer_gguf_tensor_size(celer_ggml_type type, uint32_t n_dims, const uint64_t *ne);

/* Ends the header: checks free space for the whole file, writes magic, counts, metadata, tensor
 * infos and padding. progress (may be NULL) is then called as data arrives. */
celer_status celer_gguf_writer_begin_data(celer_gguf_writer *w, celer_gguf_progress_fn progress, void *user,
                                          celer_error *err);
/* Appends n bytes of tensor data. Chunks may cross tensor boundaries; alignment padding is
 * inserted between tensors. */
celer_status celer_gguf_writer_write(celer_gguf_writer *w, const void *data, size_t n, celer_error *err);
/* Checks that every tensor was written in full, fsyncs, renames the file into place and syncs
 * the directory. */
celer_status celer_gguf_writer_finish(celer_gguf_writer *w, celer_error *err);

#endif
