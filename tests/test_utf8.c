/* UTF-8 decoding, encoding, validation and the streaming cut point, at every edge. */
#include <stdio.h>
#include <string.h>

#include "core/utf8.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); return 1; } } while (0)

/* Decodes s[0..n) and compares the code point (CELER_UTF8_BAD for invalid) and bytes used. */
static int dec_is(const char *s, size_t n, uint32_t want_cp, size_t want_len)
{
    uint32_t cp = 0;
    size_t len = celer_utf8_decode(s, n, &cp);
    if (cp != want_cp || len != want_len) {
        fprintf(stderr, "decode of %zu bytes %02X..: got U+%04X/%zu, want U+%04X/%zu\n", n,
                n ? (unsigned)(unsigned char)s[0] : 0u, (unsigned)cp, len, (unsigned)want_cp, want_len);
        return 0;
    }
    return 1;
}

#define BAD CELER_UTF8_BAD

static int test_decode(void)
{
    CHECK(dec_is("", 0, BAD, 0));
    CHECK(dec_is("\x00", 1, 0, 1));
    CHECK(dec_is("A", 1, 'A', 1));
    CHECK(dec_is("\x7F", 1, 0x7F, 1));
    /* boundaries of each length */
    CHECK(dec_is("\xC2\x80", 2, 0x80, 2));
    CHECK(dec_is("\xDF\xBF", 2, 0x7FF, 2));
    CHECK(dec_is("\xE0\xA0\x80", 3, 0x800, 3));
    CHECK(dec_is("\xEF\xBF\xBF", 3, 0xFFFF, 3));
    CHECK(dec_is("\xF0\x90\x80\x80", 4, 0x10000, 4));
    CHECK(dec_is("\xF4\x8F\xBF\xBF", 4, 0x10FFFF, 4));
    CHECK(dec_is("\xC3\xA9xyz", 5, 0xE9, 2)); /* reads only its own bytes */
    /* overlongs: C0/C1 are never leads; E0 80..9F and F0 80..8F encode shorter forms */
    CHECK(dec_is("\xC0\x80", 2, BAD, 1));
    CHECK(dec_is("\xC1\xBF", 2, BAD, 1));
    CHECK(dec_is("\xE0\x80\x80", 3, BAD, 1));
    CHECK(dec_is("\xE0\x9F\xBF", 3, BAD, 1));
    CHECK(dec_is("\xF0\x80\x80\x80", 4, BAD, 1));
    CHECK(dec_is("\xF0\x8F\xBF\xBF", 4, BAD, 1));
    /* surrogates D800..DFFF, and the code points around them */
    CHECK(dec_is("\xED\x9F\xBF", 3, 0xD7FF, 3));
    CHECK(dec_is("\xED\xA0\x80", 3, BAD, 1));
    CHECK(dec_is("\xED\xAF\xBF", 3, BAD, 1));
    CHECK(dec_is("\xED\xB0\x80", 3, BAD, 1));
    CHECK(dec_is("\xED\xBF\xBF", 3, BAD, 1));
    CHECK(dec_is("\xEE\x80\x80", 3, 0xE000, 3));
    /* past U+10FFFF */
    CHECK(dec_is("\xF4\x90\x80\x80", 4, BAD, 1));
    CHECK(dec_is("\xF5\x80\x80\x80", 4, BAD, 1));
    CHECK(dec_is("\xF7\xBF\xBF\xBF", 4, BAD, 1));
    CHECK(dec_is("\xF8\x88\x80\x80\x80", 5, BAD, 1));
    CHECK(dec_is("\xFE", 1, BAD, 1));
    CHECK(dec_is("\xFF", 1, BAD, 1));
    /* continuation bytes alone */
    CHECK(dec_is("\x80", 1, BAD, 1));
    CHECK(dec_is("\xBF\x80", 2, BAD, 1));
    /* truncated: the maximal subpart is every valid byte before the end or the bad byte */
    CHECK(dec_is("\xC3", 1, BAD, 1));
    CHECK(dec_is("\xE2\x82", 2, BAD, 2));
    CHECK(dec_is("\xE2", 1, BAD, 1));
    CHECK(dec_is("\xF0\x9F\x98", 3, BAD, 3));
    CHECK(dec_is("\xF0\x9F", 2, BAD, 2));
    CHECK(dec_is("\xE2\x82" "A", 3, BAD, 2));
    CHECK(dec_is("\xF0\x9F\x98" "A", 4, BAD, 3));
    CHECK(dec_is("\xC3\xC3\xA9", 3, BAD, 1));
    CHECK(dec_is("\xE2\x82\xAC", 2, BAD, 2)); /* n cuts the sequence */
    /* every 2-byte lead with every second byte: valid exactly for C2..DF 80..BF */
    for (unsigned a = 0x80; a <= 0xFF; a++) {
        for (unsigned b = 0; b <= 0xFF; b++) {
            char s[2] = {(char)a, (char)b};
            uint32_t cp;
            size_t len = celer_utf8_decode(s, 2, &cp);
            int valid2 = a >= 0xC2 && a <= 0xDF && b >= 0x80 && b <= 0xBF;
            if (valid2) CHECK(len == 2 && cp == ((a & 0x1F) << 6 | (b & 0x3F)));
            else CHECK(cp == BAD);
        }
    }
    return 0;
}

static int test_encode(void)
{
    char b[4];
    CHECK(celer_utf8_encode(0, b) == 1 && b[0] == 0);
    CHECK(celer_utf8_encode(0x7F, b) == 1 && b[0] == 0x7F);
    CHECK(celer_utf8_encode(0x80, b) == 2 && memcmp(b, "\xC2\x80", 2) == 0);
    CHECK(celer_utf8_encode(0x7FF, b) == 2 && memcmp(b, "\xDF\xBF", 2) == 0);
    CHECK(celer_utf8_encode(0x800, b) == 3 && memcmp(b, "\xE0\xA0\x80", 3) == 0);
    CHECK(celer_utf8_encode(0x20AC, b) == 3 && memcmp(b, "\xE2\x82\xAC", 3) == 0);
    CHECK(celer_utf8_encode(0xD7FF, b) == 3 && memcmp(b, "\xED\x9F\xBF", 3) == 0);
    CHECK(celer_utf8_encode(0xD800, b) == 0);
    CHECK(celer_utf8_encode(0xDFFF, b) == 0);
    CHECK(celer_utf8_encode(0xE000, b) == 3 && memcmp(b, "\xEE\x80\x80", 3) == 0);
    CHECK(celer_utf8_encode(0xFFFF, b) == 3 && memcmp(b, "\xEF\xBF\xBF", 3) == 0);
    CHECK(celer_utf8_encode(0x10000, b) == 4 && memcmp(b, "\xF0\x90\x80\x80", 4) == 0);
    CHECK(celer_utf8_encode(0x1F600, b) == 4 && memcmp(b, "\xF0\x9F\x98\x80", 4) == 0);
    CHECK(celer_utf8_encode(0x10FFFF, b) == 4 && memcmp(b, "\xF4\x8F\xBF\xBF", 4) == 0);
    CHECK(celer_utf8_encode(0x110000, b) == 0);
    CHECK(celer_utf8_encode(0xFFFFFFFF, b) == 0);
    /* round trip of every scalar value */
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        size_t n = celer_utf8_encode(cp, b);
        uint32_t back;
        CHECK(n >= 1 && celer_utf8_decode(b, n, &back) == n && back == cp);
        CHECK(celer_utf8_validate(b, n) == n);
    }
    return 0;
}

static int test_validate(void)
{
    CHECK(celer_utf8_validate("", 0) == 0);
    CHECK(celer_utf8_validate("hello", 5) == 5);
    const char *ok = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z"; /* a é € 😀 z */
    CHECK(celer_utf8_validate(ok, strlen(ok)) == strlen(ok));
    CHECK(celer_utf8_validate("ab\x80", 3) == 2);
    CHECK(celer_utf8_validate("ab\xC0\x80", 4) == 2);
    CHECK(celer_utf8_validate("a\xC3\xA9\xED\xA0\x80", 6) == 3);
    CHECK(celer_utf8_validate("a\xC3\xA9\xF4\x90\x80\x80", 7) == 3);
    CHECK(celer_utf8_validate("a\xE2\x82", 3) == 1);
    CHECK(celer_utf8_validate(ok, 9) == 6); /* cut inside the emoji */
    CHECK(celer_utf8_validate("a\0b", 3) == 3); /* NUL is a valid character */
    return 0;
}

static int test_complete_prefix(void)
{
    /* Every cut of a string with 1-, 2-, 3- and 4-byte characters: the answer is the last
     * character boundary at or before the cut. */
    const char *s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z\xD0\xAF\xE4\xB8\xAD"; /* a é € 😀 z Я 中 */
    const size_t bounds[] = {0, 1, 3, 6, 10, 11, 13, 16};
    size_t n = strlen(s);
    CHECK(n == 16);
    for (size_t cut = 0; cut <= n; cut++) {
        size_t want = 0;
        for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++)
            if (bounds[i] <= cut) want = bounds[i];
        size_t got = celer_utf8_complete_prefix(s, cut);
        if (got != want) fprintf(stderr, "cut %zu: got %zu want %zu\n", cut, got, want);
        CHECK(got == want);
        CHECK(celer_utf8_validate(s, got) == got);
    }
    /* Bytes that can never complete are not held back. */
    CHECK(celer_utf8_complete_prefix("a\x80", 2) == 2);
    CHECK(celer_utf8_complete_prefix("a\xE0\x80", 3) == 3);   /* overlong start */
    CHECK(celer_utf8_complete_prefix("a\xED\xA0", 3) == 3);   /* surrogate start */
    CHECK(celer_utf8_complete_prefix("a\xF4\x90", 3) == 3);   /* past U+10FFFF */
    CHECK(celer_utf8_complete_prefix("a\xF5", 2) == 2);
    CHECK(celer_utf8_complete_prefix("a\xC0", 2) == 2);
    CHECK(celer_utf8_complete_prefix("\x80\x80\x80\x80", 4) == 4);
    CHECK(celer_utf8_complete_prefix("\xF0\x9F\x98\x80\x80", 5) == 5); /* extra continuation */
    /* Open sequences are. */
    CHECK(celer_utf8_complete_prefix("\xE0\xA0", 2) == 0);
    CHECK(celer_utf8_complete_prefix("\xED\x9F", 2) == 0);
    CHECK(celer_utf8_complete_prefix("\xF4\x8F\xBF", 3) == 0);
    CHECK(celer_utf8_complete_prefix("\x80\xC3", 2) == 1);
    CHECK(celer_utf8_complete_prefix("", 0) == 0);
    return 0;
}

int main(void)
{
    if (test_decode() || test_encode() || test_validate() || test_complete_prefix()) return 1;
    printf("test_utf8: ok\n");
    return 0;
}
