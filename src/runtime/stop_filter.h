/* Stop strings on a stream of generated text: text is held back while it could still be the
 * start of a stop string, and the stream ends at the first one (the text before it is kept). */
#ifndef CELER_RUNTIME_STOP_FILTER_H
#define CELER_RUNTIME_STOP_FILTER_H

#include "celer.h"

typedef struct {
    const char *const *stop; /* NULL-terminated, or NULL */
    char              *held;
    size_t             n_held, cap;
    bool               stopped; /* a stop string was seen: nothing more is emitted */
} celer_stop_filter;

/* Appends text and passes to cb what can no longer be part of a stop string; false when cb
 * asked to stop, or when memory ran out (then *oom is set). */
bool celer_stop_push(celer_stop_filter *f, const char *text, size_t n, celer_text_fn cb, void *user, bool *oom);
/* At the end of the stream: what is still held is text, not a stop string. */
void celer_stop_flush(celer_stop_filter *f, celer_text_fn cb, void *user);
void celer_stop_free(celer_stop_filter *f);

#endif
