/* Unicode categories, \s, combining classes, NFC and NFD: spot checks against the standard.
 * tests/reference/test_unicode_parity.py compares every code point with Python and HF tokenizers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/unicode.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); return 1; } } while (0)

static int cat_is(uint32_t cp, const char *want)
{
    const char *got = celer_ucat_name(celer_unicode_category(cp));
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "U+%04X: category %s, want %s\n", (unsigned)cp, got, want);
        return 0;
    }
    return 1;
}

static int test_categories(void)
{
    /* ASCII */
    CHECK(cat_is('A', "Lu") && cat_is('z', "Ll") && cat_is('0', "Nd") && cat_is(' ', "Zs"));
    CHECK(cat_is('\n', "Cc") && cat_is(0x7F, "Cc") && cat_is('!', "Po") && cat_is('$', "Sc"));
    CHECK(cat_is('+', "Sm") && cat_is('^', "Sk") && cat_is('_', "Pc") && cat_is('-', "Pd"));
    CHECK(cat_is('(', "Ps") && cat_is(')', "Pe") && cat_is('\'', "Po") && cat_is('`', "Sk"));
    /* Latin-1 */
    CHECK(cat_is(0x85, "Cc") && cat_is(0xA0, "Zs") && cat_is(0xA9, "So") && cat_is(0xAA, "Lo"));
    CHECK(cat_is(0xAB, "Pi") && cat_is(0xBB, "Pf") && cat_is(0xAD, "Cf") && cat_is(0xB2, "No"));
    CHECK(cat_is(0xB5, "Ll") && cat_is(0xC9, "Lu") && cat_is(0xD7, "Sm") && cat_is(0xDF, "Ll"));
    /* other letters and numbers */
    CHECK(cat_is(0x01C5, "Lt") && cat_is(0x02B0, "Lm") && cat_is(0x0416, "Lu") && cat_is(0x05D0, "Lo"));
    CHECK(cat_is(0x0661, "Nd") && cat_is(0x2160, "Nl") && cat_is(0x00BD, "No"));
    /* CJK, including the ranges UnicodeData.txt gives as First/Last pairs */
    CHECK(cat_is(0x4E00, "Lo") && cat_is(0x4E2D, "Lo") && cat_is(0x9FA5, "Lo") && cat_is(0x3400, "Lo"));
    CHECK(cat_is(0x20000, "Lo") && cat_is(0x2A6DF, "Lo") && cat_is(0x3000, "Zs") && cat_is(0x3002, "Po"));
    CHECK(cat_is(0x30A2, "Lo") && cat_is(0xFF01, "Po") && cat_is(0xFF21, "Lu"));
    /* Hangul syllables and jamo */
    CHECK(cat_is(0xAC00, "Lo") && cat_is(0xD7A3, "Lo") && cat_is(0xD7A4, "Cn"));
    CHECK(cat_is(0x1100, "Lo") && cat_is(0x1161, "Lo") && cat_is(0x11A8, "Lo") && cat_is(0x3131, "Lo"));
    /* emoji and their helpers */
    CHECK(cat_is(0x1F600, "So") && cat_is(0x2764, "So") && cat_is(0x1F3FB, "Sk"));
    CHECK(cat_is(0x200D, "Cf") && cat_is(0xFE0F, "Mn") && cat_is(0x1F1E6, "So"));
    /* combining marks */
    CHECK(cat_is(0x0301, "Mn") && cat_is(0x0903, "Mc") && cat_is(0x20DD, "Me") && cat_is(0x093C, "Mn"));
    /* separators */
    CHECK(cat_is(0x2028, "Zl") && cat_is(0x2029, "Zp") && cat_is(0x1680, "Zs") && cat_is(0x180E, "Cf"));
    /* unassigned, noncharacters, private use, surrogates, out of range */
    CHECK(cat_is(0x0378, "Cn") && cat_is(0xFFFE, "Cn") && cat_is(0xFFFF, "Cn") && cat_is(0xFDD0, "Cn"));
    CHECK(cat_is(0x2FFFF, "Cn") && cat_is(0xE0000, "Cn") && cat_is(0x10FFFF, "Cn"));
    CHECK(cat_is(0x110000, "Cn") && cat_is(0xFFFFFFFF, "Cn"));
    CHECK(cat_is(0xE000, "Co") && cat_is(0xF8FF, "Co") && cat_is(0xF0000, "Co") && cat_is(0x10FFFD, "Co"));
    CHECK(cat_is(0xD800, "Cs") && cat_is(0xDBFF, "Cs") && cat_is(0xDFFF, "Cs"));
    CHECK(cat_is(0xE0001, "Cf") && cat_is(0xFEFF, "Cf"));
    CHECK(strcmp(celer_ucat_name(CELER_UCAT_COUNT), "??") == 0);
    /* every category occurs */
    int seen[CELER_UCAT_COUNT] = {0};
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) seen[celer_unicode_category(cp)]++;
    for (int c = 0; c < CELER_UCAT_COUNT; c++) CHECK(seen[c] > 0);
    CHECK(seen[CELER_UCAT_CS] == 2048);
    CHECK(seen[CELER_UCAT_CO] == 6400 + 2 * 65534);
    CHECK(seen[CELER_UCAT_CC] == 65);
    return 0;
}

static int test_classes(void)
{
    CHECK(celer_unicode_is('A', CELER_UCLASS_L) && celer_unicode_is('A', CELER_UCLASS_LU));
    CHECK(!celer_unicode_is('A', CELER_UCLASS_LL) && celer_unicode_is(0x4E2D, CELER_UCLASS_LO));
    CHECK(celer_unicode_is(0x01C5, CELER_UCLASS_LT) && celer_unicode_is(0x02B0, CELER_UCLASS_LM));
    CHECK(celer_unicode_is('7', CELER_UCLASS_N) && celer_unicode_is('7', CELER_UCLASS_ND));
    CHECK(celer_unicode_is(0x2160, CELER_UCLASS_N) && !celer_unicode_is(0x2160, CELER_UCLASS_ND));
    CHECK(celer_unicode_is(0x0301, CELER_UCLASS_M) && celer_unicode_is(0x20DD, CELER_UCLASS_M));
    CHECK(celer_unicode_is('!', CELER_UCLASS_P) && celer_unicode_is(0xAB, CELER_UCLASS_P));
    CHECK(celer_unicode_is('+', CELER_UCLASS_S) && celer_unicode_is(0x1F600, CELER_UCLASS_S));
    CHECK(celer_unicode_is(' ', CELER_UCLASS_Z) && celer_unicode_is(0x2029, CELER_UCLASS_Z));
    CHECK(!celer_unicode_is('\n', CELER_UCLASS_Z) && celer_unicode_is('\n', CELER_UCLASS_C));
    CHECK(celer_unicode_is(0x0378, CELER_UCLASS_C) && celer_unicode_is(0xE000, CELER_UCLASS_C));
    CHECK(celer_unicode_is('a', CELER_UCLASS_L | CELER_UCLASS_N) && !celer_unicode_is(' ', CELER_UCLASS_L | CELER_UCLASS_N));

    uint32_t m = 0;
    CHECK(celer_unicode_class_parse("L", 1, &m) && m == CELER_UCLASS_L);
    CHECK(celer_unicode_class_parse("Lu", 2, &m) && m == CELER_UCLASS_LU);
    CHECK(celer_unicode_class_parse("lu", 2, &m) && m == CELER_UCLASS_LU);
    CHECK(celer_unicode_class_parse("Nd", 2, &m) && m == CELER_UCLASS_ND);
    CHECK(celer_unicode_class_parse("N", 1, &m) && m == CELER_UCLASS_N);
    CHECK(celer_unicode_class_parse("Cn", 2, &m) && m == CELER_UCLASS(CELER_UCAT_CN));
    CHECK(celer_unicode_class_parse("Letter", 6, &m) && m == CELER_UCLASS_L);
    CHECK(celer_unicode_class_parse("Uppercase_Letter", 16, &m) && m == CELER_UCLASS_LU);
    CHECK(celer_unicode_class_parse("decimal number", 14, &m) && m == CELER_UCLASS_ND);
    CHECK(celer_unicode_class_parse("Punctuation", 11, &m) && m == CELER_UCLASS_P);
    CHECK(celer_unicode_class_parse("LC", 2, &m) && m == (CELER_UCLASS_LU | CELER_UCLASS_LL | CELER_UCLASS_LT));
    CHECK(!celer_unicode_class_parse("Han", 3, &m));
    CHECK(!celer_unicode_class_parse("Lx", 2, &m));
    CHECK(!celer_unicode_class_parse("", 0, &m));
    CHECK(!celer_unicode_class_parse("a_very_long_name_that_is_no_category_at_all", 44, &m));
    return 0;
}

static int test_space(void)
{
    static const uint32_t ws[] = {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680,
                                  0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006,
                                  0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
    size_t k = 0;
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        if (!celer_unicode_is_space(cp)) continue;
        CHECK(k < sizeof ws / sizeof ws[0] && ws[k] == cp);
        k++;
    }
    CHECK(k == sizeof ws / sizeof ws[0]);
    CHECK(!celer_unicode_is_space(0x180E) && !celer_unicode_is_space(0x200B) && !celer_unicode_is_space(0xFEFF));
    CHECK(!celer_unicode_is_space(0x1C) && !celer_unicode_is_space(0x1F) && !celer_unicode_is_space(0x110000));
    return 0;
}

static int test_ccc(void)
{
    CHECK(celer_unicode_ccc('a') == 0 && celer_unicode_ccc(0x0301) == 230 && celer_unicode_ccc(0x0316) == 220);
    CHECK(celer_unicode_ccc(0x0345) == 240 && celer_unicode_ccc(0x05B0) == 10 && celer_unicode_ccc(0x0E38) == 103);
    CHECK(celer_unicode_ccc(0x093C) == 7 && celer_unicode_ccc(0x094D) == 9 && celer_unicode_ccc(0x0903) == 0);
    CHECK(celer_unicode_ccc(0x1D165) == 216 && celer_unicode_ccc(0x110000) == 0);
    return 0;
}

/* Normalizes `in` with fn and compares the bytes to `want`. */
typedef celer_status (*norm_fn)(const char *, size_t, char **, size_t *, celer_error *);

static int norm_is(norm_fn fn, const char *in, const char *want)
{
    char *out = NULL;
    size_t n = 0;
    celer_error err = {0};
    celer_status st = fn(in, strlen(in), &out, &n, &err);
    int ok = st == CELER_OK && n == strlen(want) && memcmp(out, want, n) == 0 && out[n] == '\0';
    if (!ok) {
        fprintf(stderr, "normalizing \"%s\": status %d (%s), got %zu bytes:", in, (int)st, err.msg, n);
        for (size_t i = 0; out && i < n; i++) fprintf(stderr, " %02X", (unsigned)(unsigned char)out[i]);
        fprintf(stderr, "\n");
    }
    free(out);
    return ok;
}

#define NFC(in, want) norm_is(celer_unicode_nfc, in, want)
#define NFD(in, want) norm_is(celer_unicode_nfd, in, want)

static int test_nfc(void)
{
    CHECK(NFC("", "") && NFC("hello world", "hello world") && NFC("caf\xC3\xA9", "caf\xC3\xA9"));
    /* e + combining acute -> é; A + ring -> Å */
    CHECK(NFC("e\xCC\x81", "\xC3\xA9") && NFC("A\xCC\x8A", "\xC3\x85"));
    /* singletons never come back: U+212B ANGSTROM SIGN -> U+00C5, U+2126 OHM -> U+03A9, U+212A KELVIN -> K */
    CHECK(NFC("\xE2\x84\xAB", "\xC3\x85") && NFC("\xE2\x84\xA6", "\xCE\xA9") && NFC("\xE2\x84\xAA", "K"));
    /* Hangul: L+V, L+V+T, LV+T, and a full syllable stays */
    CHECK(NFC("\xE1\x84\x80\xE1\x85\xA1", "\xEA\xB0\x80"));             /* U+1100 U+1161 -> U+AC00 */
    CHECK(NFC("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81")); /* + U+11A8 -> U+AC01 */
    CHECK(NFC("\xEA\xB0\x80\xE1\x86\xA8", "\xEA\xB0\x81"));             /* U+AC00 U+11A8 -> U+AC01 */
    CHECK(NFC("\xED\x95\x9C\xEA\xB8\x80", "\xED\x95\x9C\xEA\xB8\x80")); /* 한글 */
    CHECK(NFC("\xEA\xB0\x81\xE1\x86\xA8", "\xEA\xB0\x81\xE1\x86\xA8")); /* LVT + T: no further */
    CHECK(NFC("\xE1\x84\x80\xE1\x86\xA8", "\xE1\x84\x80\xE1\x86\xA8")); /* L + T: no syllable */
    /* canonical ordering: d + dot above (230) + dot below (220) -> U+1E0D (ḍ) + U+0307 */
    CHECK(NFC("d\xCC\x87\xCC\xA3", "\xE1\xB8\x8D\xCC\x87"));
    /* Vietnamese ệ from either order of its marks -> U+1EC7 */
    CHECK(NFC("e\xCC\x82\xCC\xA3", "\xE1\xBB\x87") && NFC("e\xCC\xA3\xCC\x82", "\xE1\xBB\x87"));
    CHECK(NFC("\xC3\xAA\xCC\xA3", "\xE1\xBB\x87")); /* ê + dot below */
    /* a + grave below (220) + acute (230): acute not blocked -> á + U+0316 */
    CHECK(NFC("a\xCC\x81\xCC\x96", "\xC3\xA1\xCC\x96"));
    /* blocked: U+0352 (230) between a and acute (230) */
    CHECK(NFC("a\xCD\x92\xCC\x81", "a\xCD\x92\xCC\x81"));
    /* circumflex then acute both compose: a + U+0302 + U+0301 -> U+1EA5 */
    CHECK(NFC("a\xCC\x82\xCC\x81", "\xE1\xBA\xA5"));
    /* composition exclusions: U+0958 DEVANAGARI QA stays decomposed, U+0915 U+093C stays */
    CHECK(NFC("\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC") && NFC("\xE0\xA4\x95\xE0\xA4\xBC", "\xE0\xA4\x95\xE0\xA4\xBC"));
    /* U+FB2A HEBREW SHIN WITH SHIN DOT (excluded) -> U+05E9 U+05C1 */
    CHECK(NFC("\xEF\xAC\xAA", "\xD7\xA9\xD7\x81"));
    /* non-starter decompositions: U+0344 -> U+0308 U+0301, U+0F73 -> U+0F71 U+0F72 */
    CHECK(NFC("\xCD\x84", "\xCC\x88\xCC\x81") && NFC("\xE0\xBD\xB3", "\xE0\xBD\xB1\xE0\xBD\xB2"));
    /* U+0340 COMBINING GRAVE TONE MARK -> U+0300 */
    CHECK(NFC("a\xCD\x80", "\xC3\xA0"));
    /* U+1E9B U+0323 (UAX #15's example) -> unchanged */
    CHECK(NFC("\xE1\xBA\x9B\xCC\xA3", "\xE1\xBA\x9B\xCC\xA3"));
    /* a leading combining mark has no starter to join */
    CHECK(NFC("\xCC\x81" "e", "\xCC\x81" "e"));
    /* two starters that compose: U+0B47 + U+0B3E -> U+0B4B (Oriya) */
    CHECK(NFC("\xE0\xAD\x87\xE0\xAC\xBE", "\xE0\xAD\x8B"));
    /* emoji and CJK pass through */
    CHECK(NFC("\xF0\x9F\x98\x80\xE4\xB8\xAD", "\xF0\x9F\x98\x80\xE4\xB8\xAD"));
    return 0;
}

static int test_nfd(void)
{
    CHECK(NFD("", "") && NFD("abc", "abc") && NFD("\xC2\xA0\xC2\xBF", "\xC2\xA0\xC2\xBF"));
    CHECK(NFD("\xC3\xA9", "e\xCC\x81") && NFD("\xE2\x84\xAB", "A\xCC\x8A"));
    CHECK(NFD("\xEA\xB0\x81", "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8")); /* U+AC01 */
    CHECK(NFD("\xED\x9E\xA3", "\xE1\x84\x92\xE1\x85\xB5\xE1\x87\x82")); /* U+D7A3, the last */
    CHECK(NFD("\xE1\xBA\x9B\xCC\xA3", "\xC5\xBF\xCC\xA3\xCC\x87"));      /* U+017F U+0323 U+0307 */
    /* recursive: U+1F82 -> U+03B1 U+0313 U+0300 U+0345 */
    CHECK(NFD("\xE1\xBE\x82", "\xCE\xB1\xCC\x93\xCC\x80\xCD\x85"));
    CHECK(NFD("d\xCC\x87\xCC\xA3", "d\xCC\xA3\xCC\x87"));
    return 0;
}

/* A run of 80 marks takes the counting sort; it must be stable like the insertion sort. */
static int test_long_run(void)
{
    char in[1 + 80 * 2 + 1], want_d[sizeof in], want_c[sizeof in + 1];
    size_t k = 0;
    in[k++] = 'a';
    for (int i = 0; i < 40; i++) {
        memcpy(in + k, "\xCC\x81\xCC\x96", 4); /* acute (230), grave below (220) */
        k += 4;
    }
    in[k] = '\0';
    k = 0;
    want_d[k++] = 'a';
    for (int i = 0; i < 40; i++, k += 2) memcpy(want_d + k, "\xCC\x96", 2);
    for (int i = 0; i < 40; i++, k += 2) memcpy(want_d + k, "\xCC\x81", 2);
    want_d[k] = '\0';
    CHECK(NFD(in, want_d));
    /* the first acute joins a (grave below, 220, does not block 230); á + acute has no composite */
    memcpy(want_c, "\xC3\xA1", 2);
    k = 2;
    for (int i = 0; i < 40; i++, k += 2) memcpy(want_c + k, "\xCC\x96", 2);
    for (int i = 0; i < 39; i++, k += 2) memcpy(want_c + k, "\xCC\x81", 2);
    want_c[k] = '\0';
    CHECK(NFC(in, want_c));
    return 0;
}

static int test_invalid(void)
{
    char *out = (char *)1;
    size_t n = 7;
    celer_error err = {0};
    CHECK(celer_unicode_nfc("ab\xC3\xA9\xFF", 5, &out, &n, &err) == CELER_ERR_INVALID);
    CHECK(out == NULL && n == 0 && err.code == CELER_ERR_INVALID);
    CHECK(strstr(err.msg, "byte 4") != NULL);
    CHECK(celer_unicode_nfc("ab\xED\xA0\x80", 5, &out, &n, &err) == CELER_ERR_INVALID && strstr(err.msg, "byte 2"));
    CHECK(celer_unicode_nfd("a\xE2\x82", 3, &out, &n, &err) == CELER_ERR_INVALID && strstr(err.msg, "byte 1"));
    CHECK(celer_unicode_nfc("x\xC0\x80", 3, &out, &n, NULL) == CELER_ERR_INVALID && out == NULL);
    /* embedded NUL is text like any other */
    CHECK(celer_unicode_nfc("e\0e\xCC\x81", 5, &out, &n, &err) == CELER_OK);
    CHECK(n == 4 && memcmp(out, "e\0\xC3\xA9", 4) == 0);
    free(out);
    return 0;
}

int main(void)
{
    if (test_categories() || test_classes() || test_space() || test_ccc() || test_nfc() || test_nfd() ||
        test_long_run() || test_invalid())
        return 1;
    printf("test_unicode: ok (Unicode %s)\n", celer_unicode_version());
    return 0;
}
