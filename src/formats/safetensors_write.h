/* safetensors writer: the layout safetensors.h reads, streamed so that a model larger than
 * memory can be written tensor by tensor.
 *
 * The caller declares every tensor (name, dtype, shape) up front, which fixes the header and
 * each tensor's data range; then appends the data bytes in declaration order, in pieces of any
 * size. The file is written under a temporary name beside the target and renamed into place by
 * celer_st_writer_finish, so an interrupted or failed write never leaves a file that looks
 * complete. Ranges are laid out back to back in declaration order; the header is padded with
 * spaces to a multiple of 8 bytes, so every tensor starts 8-aligned when the sizes before it
 * are multiples of 8 (as mlx and the Rust reference do). */
#ifndef CELER_FORMATS_SAFETENSORS_WRITE_H
#define CELER_FORMATS_SAFETENSORS_WRITE_H

#include "formats/safetensors.h"

#include <stdio.h>

/* One tensor to write. */
typedef struct {
    const char    *name;
    celer_st_dtype dtype;
    uint32_t       n_dims;
    uint64_t       shape[CELER_ST_MAX_DIMS];
} celer_st_decl;

typedef struct {
    FILE     *f;
    char     *path, *tmp;  /* the target, and the temporary name written until finish */
    uint64_t *ends;        /* (n) end offset of each tensor in the data section */
    char    **names;       /* (n) copies, for messages */
    uint64_t  n;
    uint64_t  at;          /* bytes of data written */
    uint64_t  cur;         /* the tensor the next byte belongs to */
} celer_st_writer;

/* Bytes of a tensor of dtype and shape; 0 with an error when the element count overflows or
 * the dtype's elements do not fill whole bytes. */
celer_status celer_st_decl_bytes(const celer_st_decl *d, uint64_t *bytes, celer_error *err);

/* Creates path's temporary file and writes the header: the n tensors (names unique) and the
 * n_meta "__metadata__" entries (may be 0). On failure nothing is left on disk. */
celer_status celer_st_writer_open(celer_st_writer *w, const char *path, const celer_st_decl *t, uint64_t n,
                                  const celer_st_meta *meta, uint64_t n_meta, celer_error *err);
/* Appends n bytes of data: the rest of the current tensor, then the next ones'. Writing past
 * the last tensor's end is CELER_ERR_INVALID. */
celer_status celer_st_writer_put(celer_st_writer *w, const void *data, size_t n, celer_error *err);
/* The tensor the next byte belongs to, and how many of its bytes are still due. */
uint64_t celer_st_writer_current(const celer_st_writer *w, uint64_t *bytes_due);
/* Checks that every byte was written, flushes and renames the file into place. The writer is
 * released whatever the outcome; on failure the temporary file is removed. */
celer_status celer_st_writer_finish(celer_st_writer *w, celer_error *err);
/* Releases the writer and removes the temporary file (a write given up). Safe after finish. */
void celer_st_writer_abort(celer_st_writer *w);

#endif
