#include "core/bytes.h"

#include <stdint.h>
#include <stdlib.h>

bool celer_bytes_put(celer_bytes *b, const void *s, size_t n)
{
    if (n > SIZE_MAX / 4 - b->n) return false;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p, b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return true;
}

void celer_bytes_free(celer_bytes *b)
{
    free(b->p);
    *b = (celer_bytes){0};
}
