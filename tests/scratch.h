/* A C test's scratch directory: made under $TMPDIR or /tmp with a name of the test's, removed at the end
 * with everything the test wrote into it. */
#ifndef CELER_TESTS_SCRATCH_H
#define CELER_TESTS_SCRATCH_H

#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* Makes $TMPDIR/celer-NAME-XXXXXX (/tmp without TMPDIR) into dir (n bytes); false, with the
 * reason on stderr, when it cannot. */
static inline bool scratch_make(char *dir, size_t n, const char *name)
{
    const char *t = getenv("TMPDIR");
    if ((size_t)snprintf(dir, n, "%s/celer-%s-XXXXXX", t && *t ? t : "/tmp", name) >= n) {
        fprintf(stderr, "scratch_make: the path of %s's scratch directory passes %zu bytes (TMPDIR?)\n", name, n);
        return false;
    }
    if (!mkdtemp(dir)) {
        perror(dir);
        return false;
    }
    return true;
}

static int scratch_rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* Removes dir and all below it (links not followed); false when something could not be removed. */
static inline bool scratch_remove(const char *dir) { return nftw(dir, scratch_rm_entry, 16, FTW_DEPTH | FTW_PHYS) == 0; }

#endif
