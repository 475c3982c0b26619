/* The growable byte string (core/bytes.h): appends, the NUL after each, the empty append that
 * makes "", a refused append that leaves the text as it was, and free. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "core/bytes.h"

static int test_appends(void)
{
    celer_bytes b = {0};
    CHECK(b.p == NULL);
    CHECK(celer_bytes_put(&b, NULL, 0)); /* nothing yet: "" */
    CHECK(b.p && b.n == 0 && b.p[0] == '\0');
    CHECK(celer_bytes_puts(&b, "data: "));
    CHECK(celer_bytes_put(&b, "{}xyz", 2));
    CHECK(b.n == 8 && strcmp(b.p, "data: {}") == 0);
    /* past the first allocation, through several doublings, byte for byte */
    char want[5000];
    for (size_t i = 0; i < sizeof want; i++) want[i] = (char)('a' + i % 26);
    for (size_t i = 0; i < sizeof want; i += 7)
        CHECK(celer_bytes_put(&b, want + i, sizeof want - i < 7 ? sizeof want - i : 7));
    CHECK(b.n == 8 + sizeof want && b.cap > b.n && b.p[b.n] == '\0');
    CHECK(memcmp(b.p + 8, want, sizeof want) == 0);
    /* bytes with NULs in them count as bytes */
    const size_t n = b.n;
    CHECK(celer_bytes_put(&b, "a\0b", 3));
    CHECK(b.n == n + 3 && b.p[n + 1] == '\0' && b.p[n + 2] == 'b' && b.p[n + 3] == '\0');
    celer_bytes_free(&b);
    CHECK(b.p == NULL && b.n == 0 && b.cap == 0);
    celer_bytes_free(&b); /* twice: nothing to free */
    return 0;
}

/* An append past SIZE_MAX / 4 is refused before any allocation, and the text stays whole. */
static int test_refused(void)
{
    celer_bytes b = {0};
    CHECK(celer_bytes_puts(&b, "kept"));
    char *was = b.p;
    CHECK(!celer_bytes_put(&b, "x", SIZE_MAX / 4));
    CHECK(!celer_bytes_put(&b, "x", SIZE_MAX));
    CHECK(b.p == was && b.n == 4 && strcmp(b.p, "kept") == 0);
    CHECK(celer_bytes_puts(&b, "!") && strcmp(b.p, "kept!") == 0);
    celer_bytes_free(&b);
    return 0;
}

int main(void)
{
    if (test_appends() || test_refused()) return 1;
    printf("test_bytes: ok\n");
    return 0;
}
