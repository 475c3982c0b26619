/* CHECK (check.h) for the calls that must fail: CHECK_ERR(call, want, needle) makes the test
 * function return 1 unless call returns want and the celer_error named err in scope holds a
 * message containing needle. STREQ(a, b): a is a string equal to b. */
#ifndef CELER_TESTS_CHECK_ERR_H
#define CELER_TESTS_CHECK_ERR_H

#include <string.h>
#include "celer.h"
#include "check.h"

#define CHECK_ERR(call, want, needle)                                                                        \
    do {                                                                                                     \
        celer_status s_ = (call);                                                                            \
        if (s_ != (want) || !strstr(err.msg, (needle))) {                                                    \
            fprintf(stderr, "%s:%d: %s: got %s '%s', want %s containing '%s'\n", __FILE__, __LINE__, #call,   \
                    celer_status_name(s_), err.msg, celer_status_name(want), (needle));                      \
            return 1;                                                                                        \
        }                                                                                                    \
    } while (0)

#define STREQ(a, b) ((a) && strcmp((a), (b)) == 0)

#endif
