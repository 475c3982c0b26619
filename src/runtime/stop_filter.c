#include "runtime/stop_filter.h"

#include <stdlib.h>
#include <string.h>

bool celer_stop_push(celer_stop_filter *f, const char *text, size_t n, celer_text_fn cb, void *user, bool *oom)
{
    if (f->stopped) return true;
    if (f->n_held + n + 1 > f->cap) {
        size_t cap = (f->n_held + n + 1) * 2;
        char  *p   = realloc(f->held, cap);
        if (!p) {
            if (oom) *oom = true;
            return false;
        }
        f->held = p, f->cap = cap;
    }
    memcpy(f->held + f->n_held, text, n);
    f->n_held += n;
    size_t emit = f->n_held;
    for (const char *const *s = f->stop; s && *s; s++) {
        size_t sl = strlen(*s);
        if (!sl) continue;
        for (size_t i = 0; i + sl <= f->n_held; i++)
            if (!memcmp(f->held + i, *s, sl)) {
                f->stopped = true;
                if (i < emit) emit = i;
            }
        /* a suffix that begins a stop string is held */
        for (size_t k = sl - 1; k > 0 && !f->stopped; k--)
            if (k <= f->n_held && !memcmp(f->held + f->n_held - k, *s, k) && f->n_held - k < emit) emit = f->n_held - k;
    }
    bool go = true;
    if (emit && cb) go = cb(user, f->held, emit);
    memmove(f->held, f->held + emit, f->n_held - emit);
    f->n_held -= emit;
    if (f->stopped) f->n_held = 0;
    return go;
}

void celer_stop_flush(celer_stop_filter *f, celer_text_fn cb, void *user)
{
    if (!f->stopped && f->n_held && cb) cb(user, f->held, f->n_held);
    f->n_held = 0;
}

void celer_stop_free(celer_stop_filter *f)
{
    free(f->held);
    *f = (celer_stop_filter){0};
}
