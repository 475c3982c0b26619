/* The Jinja lexer, with the whitespace rules of jinja2 3.1 under the options transformers uses
 * (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False):
 *   - the source's newlines (\r\n, \r, \n) become \n, and one trailing newline is dropped;
 *   - "{%-" / "{{-" / "{#-" strip all whitespace before the tag, "-%}" / "-}}" / "-#}" all after;
 *   - lstrip_blocks: before "{%" or "{#" (not "{{", not "{%+"), spaces and tabs back to the start
 *     of the line are removed when nothing else is on that line before the tag;
 *   - trim_blocks: one "\n" right after "%}" or "#}" (not "+%}") is removed;
 *   - "}}" / "%}" only end a tag outside brackets ({{ {'a': {'b': 1}} }} works). */
#include "chat/jinja.h"
#include "core/utf8.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const char     *s;
    size_t          n;
    jinja_arena    *a;
    jinja_fail_ctx *f;
    jtok           *toks;
    size_t          n_toks, cap;
    const char     *orig; /* for line/column */
} lexer;

static void pos_of(const lexer *L, size_t off, int *line, int *col)
{
    int l = 1, c = 1;
    for (size_t i = 0; i < off && i < L->n; i++) {
        if (L->s[i] == '\n') l++, c = 1;
        else if (((unsigned char)L->s[i] & 0xC0) != 0x80) c++;
    }
    *line = l, *col = c;
}

_Noreturn static void lex_fail(lexer *L, size_t off, const char *msg)
{
    int line, col;
    pos_of(L, off, &line, &col);
    jinja_fail(L->f, CELER_ERR_INVALID, line, col, "%s", msg);
}

static jtok *push(lexer *L, int kind, size_t off)
{
    if (L->n_toks == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        jtok  *t   = jinja_alloc(L->a, L->f, cap * sizeof *t);
        if (L->n_toks) memcpy(t, L->toks, L->n_toks * sizeof *t);
        L->toks = t, L->cap = cap;
    }
    jtok *t = &L->toks[L->n_toks++];
    memset(t, 0, sizeof *t);
    t->kind = (uint8_t)kind;
    t->line = (int)off; /* byte offset for now; turned into line:col at the end */
    return t;
}

/* Python's \s at s[i] (ASCII fast path); returns its byte length, 0 if not whitespace. */
static size_t space_at(const char *s, size_t n, size_t i)
{
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80) return (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f)) ? 1 : 0;
    uint32_t cp;
    size_t   k = celer_utf8_decode(s + i, n - i, &cp);
    return cp != CELER_UTF8_BAD && jinja_py_space(cp) ? k : 0;
}

static size_t skip_space(const char *s, size_t n, size_t i)
{
    size_t k;
    while (i < n && (k = space_at(s, n, i))) i += k;
    return i;
}

/* Length of text[0..n) without trailing Python whitespace. */
static size_t rstrip_len(const char *s, size_t n)
{
    while (n > 0) {
        size_t start = n - 1;
        while (start > 0 && ((unsigned char)s[start] & 0xC0) == 0x80 && n - start < 4) start--;
        if (space_at(s, n, start) != n - start) break;
        n = start;
    }
    return n;
}

static void data(lexer *L, size_t start, size_t end)
{
    if (end <= start) return;
    jtok *t = push(L, T_DATA, start);
    t->s = L->s + start, t->n = end - start;
}

/* Applies "-" / lstrip_blocks to the text s[start..end) before a tag; returns the new end. */
static size_t strip_before(const lexer *L, size_t start, size_t end, char sign, bool block_or_comment)
{
    if (sign == '-') return start + rstrip_len(L->s + start, end - start);
    if (sign == '+' || !block_or_comment) return end;
    size_t l = end;
    while (l > start && L->s[l - 1] != '\n') l--;
    bool line_starting = start == 0 || L->s[start - 1] == '\n';
    if (l == start && !line_starting) return end;
    for (size_t i = l; i < end;) {
        size_t k = L->s[i] == '\n' ? 0 : space_at(L->s, L->n, i);
        if (!k) return end;
        i += k;
    }
    return l;
}

static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Decodes a string literal body as Python's unicode-escape codec does. */
static void string_lit(lexer *L, size_t q0, size_t q1, jtok *t)
{
    const char *s   = L->s;
    char       *out = jinja_alloc(L->a, L->f, q1 - q0 + 1);
    size_t      k   = 0;
    for (size_t i = q0; i < q1;) {
        if (s[i] != '\\' || i + 1 >= q1) {
            out[k++] = s[i++];
            continue;
        }
        char     c  = s[i + 1];
        uint32_t cp = 0;
        int      nd = 0;
        i += 2;
        switch (c) {
        case '\n': continue;
        case '\\': out[k++] = '\\'; continue;
        case '\'': out[k++] = '\''; continue;
        case '"': out[k++] = '"'; continue;
        case 'a': out[k++] = '\a'; continue;
        case 'b': out[k++] = '\b'; continue;
        case 'f': out[k++] = '\f'; continue;
        case 'n': out[k++] = '\n'; continue;
        case 'r': out[k++] = '\r'; continue;
        case 't': out[k++] = '\t'; continue;
        case 'v': out[k++] = '\v'; continue;
        case 'x': nd = 2; break;
        case 'u': nd = 4; break;
        case 'U': nd = 8; break;
        default:
            if (c >= '0' && c <= '7') {
                cp = (uint32_t)(c - '0');
                for (int j = 0; j < 2 && i < q1 && s[i] >= '0' && s[i] <= '7'; j++) cp = cp * 8 + (uint32_t)(s[i++] - '0');
                k += celer_utf8_encode(cp, out + k);
                continue;
            }
            out[k++] = '\\', out[k++] = c; /* unknown escapes stay as written */
            continue;
        }
        for (int j = 0; j < nd; j++, i++) {
            char h = i < q1 ? s[i] : 0;
            int  v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (v < 0) lex_fail(L, i, "truncated \\x, \\u or \\U escape in a string literal");
            cp = cp * 16 + (uint32_t)v;
        }
        size_t e = celer_utf8_encode(cp, out + k);
        if (!e) lex_fail(L, i, "a string literal escapes a surrogate or a code point past U+10FFFF; celer's strings are UTF-8");
        k += e;
    }
    t->s = out, t->n = k;
}

static const char *const ops[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]", "(", ")",
                                  "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"};

/* Lexes the inside of a tag from i; returns the offset after the end marker. */
static size_t tag(lexer *L, size_t i, bool var, size_t tag_start)
{
    const char *s = L->s;
    size_t      n = L->n;
    char        stack[JINJA_MAX_NEST];
    int         depth = 0;
    for (;;) {
        i = skip_space(s, n, i);
        if (i >= n) lex_fail(L, tag_start, var ? "unclosed '{{': missing '}}'" : "unclosed '{%': missing '%}'");
        char end = var ? '}' : '%';
        if (depth == 0) {
            size_t j = i;
            char   sign = 0;
            if ((s[j] == '-' || s[j] == '+') && j + 2 < n + 0 && s[j + 1] == end && s[j + 2] == '}') sign = s[j++];
            if (j + 1 < n && s[j] == end && s[j + 1] == '}' && (sign != '+' || !var)) {
                push(L, var ? T_VAR_END : T_BLOCK_END, i);
                j += 2;
                if (sign == '-') j = skip_space(s, n, j);
                else if (!var && sign != '+' && j < n && s[j] == '\n') j++;
                return j;
            }
        }
        char c = s[i];
        if (is_name_start(c) || (unsigned char)c >= 0x80) {
            size_t j = i;
            while (j < n && (is_name_start(s[j]) || is_digit(s[j]))) j++;
            if (j == i) lex_fail(L, i, "unexpected character in a tag (names are ASCII)");
            jtok *t = push(L, T_NAME, i);
            t->s = s + i, t->n = j - i;
            i    = j;
        } else if (is_digit(c)) {
            size_t j = i;
            while (j < n && (is_digit(s[j]) || (s[j] == '_' && j + 1 < n && is_digit(s[j + 1])))) j++;
            bool flt = false;
            if (j + 1 < n && s[j] == '.' && is_digit(s[j + 1])) {
                flt = true, j++;
                while (j < n && (is_digit(s[j]) || (s[j] == '_' && j + 1 < n && is_digit(s[j + 1])))) j++;
            }
            if (j < n && (s[j] == 'e' || s[j] == 'E')) {
                size_t e = j + 1;
                if (e < n && (s[e] == '+' || s[e] == '-')) e++;
                if (e < n && is_digit(s[e])) {
                    flt = true, j = e;
                    while (j < n && is_digit(s[j])) j++;
                }
            }
            char   buf[64];
            size_t k = 0;
            for (size_t x = i; x < j && k < sizeof buf - 1; x++)
                if (s[x] != '_') buf[k++] = s[x];
            buf[k]  = 0;
            jtok *t = push(L, flt ? T_FLOAT : T_INT, i);
            if (flt) t->f = strtod(buf, NULL);
            else {
                char *e;
                unsigned long long v = strtoull(buf, &e, 10);
                if (k >= 20 || v > (unsigned long long)INT64_MAX) lex_fail(L, i, "integer literal too large (celer's ints are 64-bit)");
                t->i = (int64_t)v;
            }
            i = j;
        } else if (c == '\'' || c == '"') {
            size_t j = i + 1;
            while (j < n && s[j] != c) j += s[j] == '\\' ? 2 : 1;
            if (j >= n) lex_fail(L, i, "unterminated string literal");
            jtok *t = push(L, T_STRING, i);
            string_lit(L, i + 1, j, t);
            i = j + 1;
        } else {
            size_t k = 0, len = 0;
            for (; k < sizeof ops / sizeof ops[0]; k++) {
                len = strlen(ops[k]);
                if (i + len <= n && !memcmp(s + i, ops[k], len)) break;
            }
            if (k == sizeof ops / sizeof ops[0]) lex_fail(L, i, "unexpected character in a tag");
            if (c == '(' || c == '[' || c == '{') {
                if (depth == JINJA_MAX_NEST) lex_fail(L, i, "brackets nest too deep");
                stack[depth++] = c == '(' ? ')' : c == '[' ? ']' : '}';
            } else if (c == ')' || c == ']' || c == '}') {
                if (!depth || stack[depth - 1] != c) lex_fail(L, i, "unbalanced bracket");
                depth--;
            }
            jtok *t = push(L, T_OP, i);
            t->s = s + i, t->n = len;
            i += len;
        }
    }
}

/* {% raw %}...{% endraw %}: i is after the opening tag's "%}"; returns the offset after endraw. */
static size_t raw(lexer *L, size_t i, size_t tag_start)
{
    const char *s = L->s;
    size_t      n = L->n;
    for (size_t j = i; j + 1 < n; j++) {
        if (s[j] != '{' || s[j + 1] != '%') continue;
        size_t k    = j + 2;
        char   sign = 0;
        if (k < n && (s[k] == '-' || s[k] == '+')) sign = s[k++];
        k = skip_space(s, n, k);
        if (k + 6 > n || memcmp(s + k, "endraw", 6)) continue;
        k = skip_space(s, n, k + 6);
        char esign = 0;
        if (k < n && (s[k] == '-' || s[k] == '+')) esign = s[k++];
        if (k + 1 >= n || s[k] != '%' || s[k + 1] != '}') continue;
        data(L, i, strip_before(L, i, j, sign, true));
        k += 2;
        if (esign == '-') k = skip_space(s, n, k);
        else if (esign != '+' && k < n && s[k] == '\n') k++;
        return k;
    }
    lex_fail(L, tag_start, "missing {% endraw %} for this {% raw %}");
}

void jinja_lex(const char *src, size_t len, jinja_arena *a, jinja_fail_ctx *f, jtok **toks, size_t *n_toks)
{
    /* newline normalization and the dropped trailing newline */
    char  *s = jinja_alloc(a, f, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n && s[n - 1] == '\n') n--;
    lexer L = {.s = s, .n = n, .a = a, .f = f};

    size_t pos = 0;
    while (pos < n) {
        const char *q = NULL;
        for (size_t i = pos; i + 1 < n; i++)
            if (s[i] == '{' && (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#')) {
                q = s + i;
                break;
            }
        if (!q) {
            data(&L, pos, n);
            break;
        }
        size_t t0   = (size_t)(q - s);
        char   kind = q[1];
        char   sign = t0 + 2 < n && (q[2] == '-' || q[2] == '+') ? q[2] : 0;
        size_t body = t0 + 2 + (sign != 0);
        if (kind == '{' && sign == '+') sign = 0, body--; /* "{{+" is "{{" followed by unary plus */
        data(&L, pos, strip_before(&L, pos, t0, sign, kind != '{'));
        if (kind == '#') {
            size_t j = body;
            for (; j + 1 < n; j++)
                if (s[j] == '#' && s[j + 1] == '}') break;
            if (j + 1 >= n) lex_fail(&L, t0, "unclosed comment: missing '#}'");
            char esign = j > body && (s[j - 1] == '-' || s[j - 1] == '+') ? s[j - 1] : 0;
            pos        = j + 2;
            if (esign == '-') pos = skip_space(s, n, pos);
            else if (esign != '+' && pos < n && s[pos] == '\n') pos++;
            continue;
        }
        if (kind == '%') {
            size_t k = skip_space(s, n, body);
            if (k + 3 <= n && !memcmp(s + k, "raw", 3) && !(k + 3 < n && (is_name_start(s[k + 3]) || is_digit(s[k + 3])))) {
                size_t e     = skip_space(s, n, k + 3);
                char   esign = 0;
                if (e < n && (s[e] == '-' || s[e] == '+')) esign = s[e++];
                if (e + 1 < n && s[e] == '%' && s[e + 1] == '}') {
                    e += 2;
                    if (esign == '-') e = skip_space(s, n, e);
                    else if (esign != '+' && e < n && s[e] == '\n') e++;
                    pos = raw(&L, e, t0);
                    continue;
                }
            }
        }
        push(&L, kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN, t0);
        pos = tag(&L, body, kind == '{', t0);
    }
    push(&L, T_EOF, n);

    /* byte offsets → line:column, in one pass */
    int    line = 1, col = 1;
    size_t off  = 0;
    for (size_t t = 0; t < L.n_toks; t++) {
        size_t want = (size_t)L.toks[t].line;
        for (; off < want && off < n; off++) {
            if (s[off] == '\n') line++, col = 1;
            else if (((unsigned char)s[off] & 0xC0) != 0x80) col++;
        }
        L.toks[t].line = line, L.toks[t].col = col;
    }
    *toks   = L.toks;
    *n_toks = L.n_toks;
}
