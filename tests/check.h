/* What every C test uses: CHECK(c) reports file:line and the condition, and makes the test
 * function return 1 (the test fails) when c is false. */
#ifndef CELER_TESTS_CHECK_H
#define CELER_TESTS_CHECK_H

#include <stdio.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c);                                \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

#endif
