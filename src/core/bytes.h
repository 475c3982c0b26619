/* A growable byte string, NUL-terminated after every append: the text a response, a decoded
 * stream or a file header is built in. p stays NULL until the first append (of any length:
 * appending nothing makes it ""), and belongs to the buffer until celer_bytes_free, or to
 * whoever takes p and zeroes the buffer. */
#ifndef CELER_CORE_BYTES_H
#define CELER_CORE_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

typedef struct {
    char  *p;
    size_t n, cap; /* bytes held (the NUL not counted), bytes allocated */
} celer_bytes;

/* Appends s[0, n) (s may be NULL when n is 0). False, and b as it was, when out of memory or
 * past SIZE_MAX / 4 bytes. */
bool celer_bytes_put(celer_bytes *b, const void *s, size_t n);

static inline bool celer_bytes_puts(celer_bytes *b, const char *s) { return celer_bytes_put(b, s, strlen(s)); }

void celer_bytes_free(celer_bytes *b);

#endif
