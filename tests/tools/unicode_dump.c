/* unicode_dump: celer's Unicode layer on stdout, for tests/reference/test_unicode_parity.py.
 *   unicode_dump version      the tables' Unicode version
 *   unicode_dump props        one line per code point 0..10FFFF: "<category> <ccc> <is_space 0|1>"
 *   unicode_dump nfc|nfd      stdin: one text per line as hex of its UTF-8 bytes (may be empty);
 *                             stdout: hex of the normalized bytes, or "ERR <message>"
 *   unicode_dump lossy        the same, decoding with U+FFFD for each ill-formed subpart */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "tokenizer/unicode.h"

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void put_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) printf("%02x", (unsigned)(unsigned char)s[i]);
    putchar('\n');
}

/* Replaces each ill-formed subpart of in[0..n) by U+FFFD; out has room for 3 * n bytes. */
static size_t lossy(const char *in, size_t n, char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += celer_utf8_decode(in + i, n - i, &cp);
        k += celer_utf8_encode(cp == CELER_UTF8_BAD ? CELER_UTF8_REPLACEMENT : cp, out + k);
    }
    return k;
}

static int run_lines(const char *mode)
{
    char *line = NULL, *bytes = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
        size_t n = (size_t)len / 2;
        char *grown = realloc(bytes, 3 * n + 1);
        if (!grown) {
            fprintf(stderr, "unicode_dump: out of memory\n");
            return 1;
        }
        bytes = grown;
        for (size_t i = 0; i < n; i++) {
            int hi = hexval(line[2 * i]), lo = hexval(line[2 * i + 1]);
            if (hi < 0 || lo < 0) {
                fprintf(stderr, "unicode_dump: stdin: '%.*s' is not hex\n", (int)len, line);
                return 1;
            }
            bytes[i] = (char)(hi << 4 | lo);
        }
        if (strcmp(mode, "lossy") == 0) {
            char *out = malloc(3 * n + 1);
            if (!out) return 1;
            put_hex(out, lossy(bytes, n, out));
            free(out);
            continue;
        }
        char *out = NULL;
        size_t out_n = 0;
        celer_error err = {0};
        celer_status st = strcmp(mode, "nfc") == 0 ? celer_unicode_nfc(bytes, n, &out, &out_n, &err)
                                                   : celer_unicode_nfd(bytes, n, &out, &out_n, &err);
        if (st == CELER_OK) put_hex(out, out_n);
        else printf("ERR %s\n", err.msg);
        free(out);
    }
    free(line);
    free(bytes);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "version") == 0) {
        printf("%s\n", celer_unicode_version());
        return 0;
    }
    if (strcmp(mode, "props") == 0) {
        for (uint32_t cp = 0; cp <= 0x10FFFF; cp++)
            printf("%s %u %d\n", celer_ucat_name(celer_unicode_category(cp)), celer_unicode_ccc(cp),
                   celer_unicode_is_space(cp));
        return 0;
    }
    if (strcmp(mode, "nfc") == 0 || strcmp(mode, "nfd") == 0 || strcmp(mode, "lossy") == 0) return run_lines(mode);
    fprintf(stderr, "usage: unicode_dump version | props | nfc | nfd | lossy  (see the comment at the top)\n");
    return 2;
}
