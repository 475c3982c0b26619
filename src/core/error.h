/* Filling in a celer_error. */
#ifndef CELER_CORE_ERROR_H
#define CELER_CORE_ERROR_H

#include "celer.h"

#if defined(__GNUC__)
#define CELER_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define CELER_PRINTF(f, a)
#endif

/* Sets err (may be NULL) to code and the formatted message; returns code, so callers write
 * `return celer_fail(err, CELER_ERR_FORMAT, "gguf: %s: ...", path);`. */
celer_status celer_fail(celer_error *err, celer_status code, const char *fmt, ...) CELER_PRINTF(3, 4);

/* Aborts with file:line for a broken invariant of our own code; never for input. */
#define CELER_ASSERT(c)                                                                      \
    do {                                                                                     \
        if (!(c)) celer_assert_fail(__FILE__, __LINE__, #c);                                 \
    } while (0)
#if defined(__cplusplus)
[[noreturn]] void celer_assert_fail(const char *file, int line, const char *cond);
#else
_Noreturn void celer_assert_fail(const char *file, int line, const char *cond);
#endif

#endif
