/* A whole file mapped read-only. Weights are views into it; nothing is copied. */
#ifndef CELER_CORE_MAPPED_FILE_H
#define CELER_CORE_MAPPED_FILE_H

#include "celer.h"

typedef struct {
    const uint8_t *data; /* (size) bytes; NULL when size is 0 */
    uint64_t       size;
    char          *path; /* owned copy, for messages */
} celer_mapped_file;

/* Maps path read-only. On failure f stays freeable. A directory or a non-regular file is an
 * error naming the path. */
celer_status celer_mapped_file_open(celer_mapped_file *f, const char *path, celer_error *err);
/* Unmaps; safe on a zeroed struct and twice. */
void celer_mapped_file_close(celer_mapped_file *f);

/* Reads a whole (small) file into a NUL-terminated heap buffer; refuses files over max_size. */
celer_status celer_file_read_all(const char *path, uint64_t max_size, char **out, uint64_t *size,
                                 celer_error *err);

/* dir + "/" + name (no doubled slash) in a malloc'd string; NULL when out of memory. */
char *celer_path_join(const char *dir, const char *name);

#endif
