#include "core/utf8.h"

/* Sequence length announced by a lead byte, with the range its second byte must fall in;
 * len 0 for bytes that cannot start a sequence (80..C1, F5..FF). */
typedef struct {
    uint8_t len, lo, hi;
} lead_info;

static lead_info lead(unsigned b)
{
    if (b < 0x80) return (lead_info){1, 0, 0};
    if (b >= 0xC2 && b <= 0xDF) return (lead_info){2, 0x80, 0xBF};
    if (b == 0xE0) return (lead_info){3, 0xA0, 0xBF}; /* no overlongs */
    if (b == 0xED) return (lead_info){3, 0x80, 0x9F}; /* no surrogates */
    if (b >= 0xE1 && b <= 0xEF) return (lead_info){3, 0x80, 0xBF};
    if (b == 0xF0) return (lead_info){4, 0x90, 0xBF}; /* no overlongs */
    if (b == 0xF4) return (lead_info){4, 0x80, 0x8F}; /* nothing past U+10FFFF */
    if (b >= 0xF1 && b <= 0xF3) return (lead_info){4, 0x80, 0xBF};
    return (lead_info){0, 0, 0};
}

size_t celer_utf8_decode(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *p = (const unsigned char *)s;
    *cp = CELER_UTF8_BAD;
    if (n == 0) return 0;
    lead_info li = lead(p[0]);
    if (li.len == 0) return 1;
    if (li.len == 1) {
        *cp = p[0];
        return 1;
    }
    uint32_t c = p[0] & (0x7Fu >> li.len);
    unsigned lo = li.lo, hi = li.hi;
    for (size_t i = 1; i < li.len; i++) {
        if (i >= n || p[i] < lo || p[i] > hi) return i; /* maximal subpart ends here */
        c = c << 6 | (p[i] & 0x3Fu);
        lo = 0x80;
        hi = 0xBF;
    }
    *cp = c;
    return li.len;
}

size_t celer_utf8_encode(uint32_t cp, char out[CELER_UTF8_MAX])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp > 0x10FFFF) return 0;
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t celer_utf8_validate(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) { /* ASCII runs are the common case */
            i++;
            continue;
        }
        uint32_t cp;
        size_t len = celer_utf8_decode(s + i, n - i, &cp);
        if (cp == CELER_UTF8_BAD) return i;
        i += len;
    }
    return n;
}

size_t celer_utf8_complete_prefix(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    /* The last byte that is not a continuation byte, if it is among the last three, is the
     * only lead whose sequence can still be open at the end. */
    for (size_t k = 1; k < CELER_UTF8_MAX && k <= n; k++) {
        if ((p[n - k] & 0xC0) == 0x80) continue;
        uint32_t cp;
        size_t used = celer_utf8_decode(s + n - k, k, &cp);
        /* Bad only because the bytes ran out: every byte so far was valid and more are due. */
        if (cp == CELER_UTF8_BAD && used == k && lead(p[n - k]).len > k) return n - k;
        return n;
    }
    return n;
}
