/* JSON strings for line-oriented tool I/O (celer tokenize --jsonl). Hand-rolled rather than
 * cJSON because cJSON's strings end at the first NUL, and text may contain U+0000. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static int hex4(const char *s, uint32_t *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int  d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        *v = *v * 16 + (uint32_t)d;
    }
    return 0;
}

static size_t put_utf8(uint32_t cp, char *o)
{
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 63)), 2;
    if (cp < 0x10000)
        return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 63)), o[2] = (char)(0x80 | (cp & 63)), 3;
    o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 63)), o[2] = (char)(0x80 | (cp >> 6 & 63));
    o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

int cli_json_string_decode(const char *s, size_t n, char **out, size_t *out_n)
{
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ')) n--;
    while (n && *s == ' ') s++, n--;
    if (n < 2 || s[0] != '"' || s[n - 1] != '"') return -1;
    char *o = malloc(n + 1);
    if (!o) return -1;
    size_t k = 0;
    for (size_t i = 1; i < n - 1; i++) {
        char c = s[i];
        if (c == '"' || (uint8_t)c < 0x20) goto bad;
        if (c != '\\') {
            o[k++] = c;
            continue;
        }
        if (++i >= n - 1) goto bad;
        switch (s[i]) {
        case '"': o[k++] = '"'; break;
        case '\\': o[k++] = '\\'; break;
        case '/': o[k++] = '/'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (i + 4 >= n - 1 || hex4(s + i + 1, &cp)) goto bad;
            i += 4;
            if (cp >= 0xD800 && cp < 0xDC00) { /* a surrogate pair */
                if (i + 6 >= n - 1 || s[i + 1] != '\\' || s[i + 2] != 'u' || hex4(s + i + 3, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    goto bad;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            } else if (cp >= 0xDC00 && cp < 0xE000)
                goto bad;
            k += put_utf8(cp, o + k);
            break;
        }
        default: goto bad;
        }
    }
    o[k]   = '\0';
    *out   = o;
    *out_n = k;
    return 0;
bad:
    free(o);
    return -1;
}

void cli_json_string_print(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\r')
            fputs("\\r", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}
