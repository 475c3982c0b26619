#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

celer_status celer_fail(celer_error *err, celer_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

const char *celer_status_name(celer_status s)
{
    static const char *const names[] = {
        [CELER_OK] = "ok",
        [CELER_ERR_INVALID] = "invalid argument",
        [CELER_ERR_IO] = "i/o error",
        [CELER_ERR_FORMAT] = "bad file format",
        [CELER_ERR_UNSUPPORTED] = "unsupported",
        [CELER_ERR_OOM] = "out of memory",
        [CELER_ERR_DEVICE] = "device failure",
    };
    if ((unsigned)s < sizeof names / sizeof names[0] && names[s]) return names[s];
    return "unknown status";
}

int celer_status_exit_code(celer_status s)
{
    switch (s) {
    case CELER_OK: return 0;
    case CELER_ERR_OOM:
    case CELER_ERR_DEVICE: return 3;
    default: return 2;
    }
}

void celer_assert_fail(const char *file, int line, const char *cond)
{
    fprintf(stderr, "celer: internal error at %s:%d: assertion '%s' failed\n", file, line, cond);
    abort();
}
