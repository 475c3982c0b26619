/* A small backtracking regex engine for pre-tokenizer split patterns. The pattern compiles to
 * a program whose jumps are relative, so a quantified fragment can be copied or wrapped with
 * memcpy; matching runs it with an explicit stack of (pc, pos) choice points, which gives
 * Oniguruma's leftmost-first, greedy-with-backtracking results. */
#include "tokenizer/regex.h"

#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/unicode.h"

#include <stdlib.h>
#include <string.h>

enum { OP_CHAR, OP_CLASS, OP_ANY, OP_SPLIT, OP_JMP, OP_LOOK, OP_MATCH };

typedef struct {
    uint8_t  op;
    bool     neg;  /* OP_LOOK: negative lookahead */
    uint32_t c;    /* OP_CHAR: code point; OP_CLASS: class index */
    int32_t  a, b; /* OP_SPLIT: preferred and other branch; OP_JMP: a; OP_LOOK: a = sub-program, b = next */
} inst;

enum { ITEM_RANGE, ITEM_CATS, ITEM_SPACE };

typedef struct {
    uint8_t  kind;
    bool     neg;    /* \P{..}, \S, \D, \W */
    uint32_t lo, hi; /* ITEM_RANGE */
    uint32_t cats;   /* ITEM_CATS: CELER_UCLASS_* mask */
} citem;

typedef struct {
    uint64_t ascii[2]; /* membership of U+0000..U+007F, precomputed */
    bool     neg;
    uint32_t first, n; /* items[first, first + n) */
} cclass;

struct celer_regex {
    inst    *code;
    uint32_t n_code, cap_code;
    cclass  *classes;
    uint32_t n_classes, cap_classes;
    citem   *items;
    uint32_t n_items, cap_items;
};

/* ---- classes ----------------------------------------------------------- */

static bool item_has(const citem *it, uint32_t cp)
{
    bool in;
    switch (it->kind) {
    case ITEM_RANGE: in = cp >= it->lo && cp <= it->hi; break;
    case ITEM_CATS: in = celer_unicode_is(cp, it->cats); break;
    default: in = celer_unicode_is_space(cp); break;
    }
    return in != it->neg;
}

static bool class_has_slow(const celer_regex *re, const cclass *c, uint32_t cp)
{
    bool in = false;
    for (uint32_t i = 0; i < c->n && !in; i++) in = item_has(&re->items[c->first + i], cp);
    return in != c->neg;
}

static inline bool class_has(const celer_regex *re, const cclass *c, uint32_t cp)
{
    if (cp < 128) return (c->ascii[cp >> 6] >> (cp & 63)) & 1;
    return class_has_slow(re, c, cp);
}

/* ---- parser / compiler ------------------------------------------------- */

typedef struct {
    celer_regex *re;
    const char  *pat; /* the whole pattern, for messages */
    const char  *p;   /* cursor */
    celer_error *err;
    bool         icase;
    int          depth;
} parser;

static celer_status perr(parser *ps, const char *what)
{
    return celer_fail(ps->err, CELER_ERR_UNSUPPORTED, "regex: %s at offset %d of pattern '%.200s'", what,
                      (int)(ps->p - ps->pat), ps->pat);
}

static celer_status oom(parser *ps) { return celer_fail(ps->err, CELER_ERR_OOM, "regex: out of memory"); }

#define GROW(ps, arr, n, cap)                                                                                \
    do {                                                                                                     \
        if ((n) == (cap)) {                                                                                  \
            uint32_t nc_ = (cap) ? (cap) * 2 : 16;                                                           \
            void    *np_ = realloc((arr), nc_ * sizeof *(arr));                                              \
            if (!np_) return oom(ps);                                                                        \
            (arr) = np_, (cap) = nc_;                                                                        \
        }                                                                                                    \
    } while (0)

static celer_status emit(parser *ps, inst in)
{
    celer_regex *re = ps->re;
    if (re->n_code > 1u << 20) return perr(ps, "pattern too large");
    GROW(ps, re->code, re->n_code, re->cap_code);
    re->code[re->n_code++] = in;
    return CELER_OK;
}

/* Inserts k zeroed instructions at `at`, shifting the fragment after it. */
static celer_status insert(parser *ps, uint32_t at, uint32_t k)
{
    for (uint32_t i = 0; i < k; i++)
        if (emit(ps, (inst){0})) return ps->err->code;
    celer_regex *re = ps->re;
    memmove(re->code + at + k, re->code + at, (re->n_code - k - at) * sizeof *re->code);
    return CELER_OK;
}

static celer_status add_item(parser *ps, citem it)
{
    celer_regex *re = ps->re;
    GROW(ps, re->items, re->n_items, re->cap_items);
    re->items[re->n_items++] = it;
    return CELER_OK;
}

#define WORD_CATS (CELER_UCLASS_L | CELER_UCLASS_M | CELER_UCLASS_ND | CELER_UCLASS(CELER_UCAT_PC)) /* \w */

static celer_status parse_hex(parser *ps, uint32_t *cp, int max_digits)
{
    uint32_t v = 0;
    int      n = 0;
    while (n < max_digits) {
        char c = *ps->p;
        int  d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) break;
        v = v * 16 + (uint32_t)d, ps->p++, n++;
    }
    if (!n || v > 0x10FFFF) return perr(ps, "bad hexadecimal escape");
    *cp = v;
    return CELER_OK;
}

/* After a backslash: either a single code point (*cp) or a class item (*it, returns is_item). */
static celer_status parse_escape(parser *ps, uint32_t *cp, citem *it, bool *is_item)
{
    char c   = *ps->p++;
    *is_item = true;
    switch (c) {
    case 's': *it = (citem){.kind = ITEM_SPACE}; return CELER_OK;
    case 'S': *it = (citem){.kind = ITEM_SPACE, .neg = true}; return CELER_OK;
    case 'd': *it = (citem){.kind = ITEM_CATS, .cats = CELER_UCLASS_ND}; return CELER_OK;
    case 'D': *it = (citem){.kind = ITEM_CATS, .cats = CELER_UCLASS_ND, .neg = true}; return CELER_OK;
    case 'w': *it = (citem){.kind = ITEM_CATS, .cats = WORD_CATS}; return CELER_OK;
    case 'W': *it = (citem){.kind = ITEM_CATS, .cats = WORD_CATS, .neg = true}; return CELER_OK;
    case 'p':
    case 'P': {
        if (*ps->p != '{') return perr(ps, "expected '{' after \\p");
        const char *name = ++ps->p, *close = strchr(name, '}');
        if (!close) return perr(ps, "unterminated \\p{");
        bool     neg = c == 'P';
        uint32_t mask;
        if (*name == '^') neg = !neg, name++;
        if (celer_unicode_class_parse(name, (size_t)(close - name), &mask)) {
            *it   = (citem){.kind = ITEM_CATS, .cats = mask, .neg = neg};
            ps->p = close + 1;
            return CELER_OK;
        }
        return perr(ps, "unknown Unicode property");
    }
    default: break;
    }
    *is_item = false;
    switch (c) {
    case 'r': *cp = '\r'; return CELER_OK;
    case 'n': *cp = '\n'; return CELER_OK;
    case 't': *cp = '\t'; return CELER_OK;
    case 'f': *cp = '\f'; return CELER_OK;
    case 'v': *cp = '\v'; return CELER_OK;
    case 'a': *cp = 7; return CELER_OK;
    case 'e': *cp = 27; return CELER_OK;
    case 'x':
        if (*ps->p == '{') {
            ps->p++;
            if (parse_hex(ps, cp, 6)) return ps->err->code;
            if (*ps->p++ != '}') return perr(ps, "expected '}'");
            return CELER_OK;
        }
        return parse_hex(ps, cp, 2);
    case 'u': return parse_hex(ps, cp, 4);
    case '\0': ps->p--; return perr(ps, "pattern ends with a backslash");
    default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
            ps->p--;
            return perr(ps, "unsupported escape");
        }
        *cp = (uint8_t)c; /* escaped punctuation stands for itself */
        return CELER_OK;
    }
}

/* One literal code point of the pattern (UTF-8). */
static celer_status parse_literal(parser *ps, uint32_t *cp)
{
    size_t k = celer_utf8_decode(ps->p, strlen(ps->p), cp);
    if (!k || *cp == CELER_UTF8_BAD) return perr(ps, "invalid UTF-8 in pattern");
    ps->p += k;
    return CELER_OK;
}

static bool is_ascii_alpha(uint32_t c) { return (c | 32) >= 'a' && (c | 32) <= 'z'; }

static celer_status finish_class(parser *ps, uint32_t first, bool neg)
{
    celer_regex *re = ps->re;
    GROW(ps, re->classes, re->n_classes, re->cap_classes);
    cclass *c = &re->classes[re->n_classes++];
    *c        = (cclass){.neg = neg, .first = first, .n = re->n_items - first};
    for (uint32_t cp = 0; cp < 128; cp++)
        if (class_has_slow(re, c, cp)) c->ascii[cp >> 6] |= 1ull << (cp & 63);
    return CELER_OK;
}

static celer_status add_range(parser *ps, uint32_t lo, uint32_t hi)
{
    if (add_item(ps, (citem){.kind = ITEM_RANGE, .lo = lo, .hi = hi})) return ps->err->code;
    if (!ps->icase) return CELER_OK;
    /* ASCII case folding: the other case of the letters in [lo, hi] */
    for (uint32_t c = lo; c <= hi && c < 128; c++)
        if (is_ascii_alpha(c) && add_item(ps, (citem){.kind = ITEM_RANGE, .lo = c ^ 32, .hi = c ^ 32}))
            return ps->err->code;
    return CELER_OK;
}

static celer_status parse_class(parser *ps)
{
    uint32_t first = ps->re->n_items;
    bool     neg   = false;
    if (*ps->p == '^') neg = true, ps->p++;
    bool start = true;
    while (*ps->p != ']' || start) {
        start = false;
        if (!*ps->p) return perr(ps, "unterminated character class");
        if (ps->p[0] == '[' && ps->p[1] == ':') return perr(ps, "POSIX classes are not supported");
        if (ps->p[0] == '&' && ps->p[1] == '&') return perr(ps, "class intersection is not supported");
        uint32_t lo;
        if (*ps->p == '\\') {
            ps->p++;
            citem it;
            bool  is_item;
            if (parse_escape(ps, &lo, &it, &is_item)) return ps->err->code;
            if (is_item) {
                if (add_item(ps, it)) return ps->err->code;
                continue;
            }
        } else if (parse_literal(ps, &lo))
            return ps->err->code;
        uint32_t hi = lo;
        if (ps->p[0] == '-' && ps->p[1] && ps->p[1] != ']') {
            ps->p++;
            if (*ps->p == '\\') {
                ps->p++;
                citem it;
                bool  is_item;
                if (parse_escape(ps, &hi, &it, &is_item)) return ps->err->code;
                if (is_item) return perr(ps, "a class cannot end a range");
            } else if (parse_literal(ps, &hi))
                return ps->err->code;
            if (hi < lo) return perr(ps, "range out of order");
        }
        if (add_range(ps, lo, hi)) return ps->err->code;
    }
    ps->p++;
    return finish_class(ps, first, neg);
}

static celer_status emit_class_item(parser *ps, citem it)
{
    uint32_t first = ps->re->n_items;
    if (add_item(ps, it) || finish_class(ps, first, false)) return ps->err->code;
    return emit(ps, (inst){.op = OP_CLASS, .c = ps->re->n_classes - 1});
}

static celer_status emit_char(parser *ps, uint32_t cp)
{
    if (ps->icase && cp < 128 && is_ascii_alpha(cp)) {
        uint32_t first = ps->re->n_items;
        if (add_range(ps, cp, cp) || finish_class(ps, first, false)) return ps->err->code;
        return emit(ps, (inst){.op = OP_CLASS, .c = ps->re->n_classes - 1});
    }
    return emit(ps, (inst){.op = OP_CHAR, .c = cp});
}

static celer_status parse_alt(parser *ps, bool *nullable);

static celer_status parse_group(parser *ps, bool *nullable)
{
    bool saved_icase = ps->icase;
    if (++ps->depth > 64) return perr(ps, "groups nested too deeply");
    if (*ps->p == '?') {
        ps->p++;
        char k = *ps->p++;
        if (k == '=' || k == '!') {
            /* LOOK: sub-program follows, ends in MATCH; b skips it */
            uint32_t at = ps->re->n_code;
            if (emit(ps, (inst){.op = OP_LOOK, .neg = k == '!', .a = 1})) return ps->err->code;
            bool inner;
            if (parse_alt(ps, &inner) || emit(ps, (inst){.op = OP_MATCH})) return ps->err->code;
            ps->re->code[at].b = (int32_t)(ps->re->n_code - at);
            *nullable          = true;
            goto close;
        }
        if (k == 'i' && *ps->p == ':')
            ps->icase = true, ps->p++;
        else if (k != ':') {
            ps->p -= 2;
            return perr(ps, "unsupported group kind");
        }
    }
    if (parse_alt(ps, nullable)) return ps->err->code;
close:
    if (*ps->p != ')') return perr(ps, "expected ')'");
    ps->p++;
    ps->icase = saved_icase;
    ps->depth--;
    return CELER_OK;
}

static celer_status parse_atom(parser *ps, bool *nullable)
{
    *nullable = false;
    char c    = *ps->p;
    if (c == '(') {
        ps->p++;
        return parse_group(ps, nullable);
    }
    if (c == '[') {
        ps->p++;
        if (parse_class(ps)) return ps->err->code;
        return emit(ps, (inst){.op = OP_CLASS, .c = ps->re->n_classes - 1});
    }
    if (c == '.') {
        ps->p++;
        return emit(ps, (inst){.op = OP_ANY});
    }
    if (c == '^' || c == '$') return perr(ps, "anchors are not supported");
    if (c == '*' || c == '+' || c == '?' || c == '{') return perr(ps, "quantifier without an operand");
    uint32_t cp;
    if (c == '\\') {
        ps->p++;
        citem it;
        bool  is_item;
        if (parse_escape(ps, &cp, &it, &is_item)) return ps->err->code;
        return is_item ? emit_class_item(ps, it) : emit_char(ps, cp);
    }
    if (parse_literal(ps, &cp)) return ps->err->code;
    return emit_char(ps, cp);
}

static bool parse_count(parser *ps, int *v)
{
    if (*ps->p < '0' || *ps->p > '9') return false;
    long n = 0;
    while (*ps->p >= '0' && *ps->p <= '9' && n < 100000) n = n * 10 + (*ps->p++ - '0');
    *v = (int)n;
    return true;
}

/* Applies the quantifier at ps->p (if any) to the fragment code[start, n_code). */
static celer_status parse_quant(parser *ps, uint32_t start, bool *nullable)
{
    int min, max; /* max -1: unbounded */
    switch (*ps->p) {
    case '?': min = 0, max = 1, ps->p++; break;
    case '*': min = 0, max = -1, ps->p++; break;
    case '+': min = 1, max = -1, ps->p++; break;
    case '{':
        ps->p++;
        if (!parse_count(ps, &min)) return perr(ps, "expected a count after '{'");
        max = min;
        if (*ps->p == ',') {
            ps->p++;
            if (!parse_count(ps, &max)) max = -1;
        }
        if (*ps->p++ != '}') return perr(ps, "expected '}'");
        if ((max >= 0 && max < min) || min > 1000 || max > 1000) return perr(ps, "bad repetition count");
        break;
    default: return CELER_OK;
    }
    bool greedy = true;
    if (*ps->p == '?') greedy = false, ps->p++;
    if (*ps->p == '+' || *ps->p == '*' || *ps->p == '?' || *ps->p == '{') return perr(ps, "nested quantifier");
    if (*nullable && max < 0) return perr(ps, "an unbounded repeat of something that can match nothing");

    celer_regex *re  = ps->re;
    uint32_t     len = re->n_code - start;
    /* copies 2..min of the fragment, then the optional tail */
    inst *frag = malloc(len * sizeof *frag);
    if (!frag) return oom(ps);
    memcpy(frag, re->code + start, len * sizeof *frag);
    celer_status st = CELER_OK;
    if (min == 0) re->n_code = start; /* the fragment itself becomes optional below */
    for (int i = 1; i < min && !st; i++)
        for (uint32_t k = 0; k < len && !st; k++) st = emit(ps, frag[k]);
    if (!st && max < 0) {
        /* L: SPLIT body, out; body; JMP L */
        uint32_t at = re->n_code;
        st          = emit(ps, (inst){.op = OP_SPLIT});
        for (uint32_t k = 0; k < len && !st; k++) st = emit(ps, frag[k]);
        if (!st) st = emit(ps, (inst){.op = OP_JMP, .a = -(int32_t)(len + 1)});
        if (!st) {
            int32_t in = 1, out = (int32_t)(len + 2);
            re->code[at].a = greedy ? in : out, re->code[at].b = greedy ? out : in;
        }
    } else if (!st) {
        /* (max - min) times: SPLIT body, end; body — every SPLIT leaves to the same end */
        int      extra = max - (min == 0 ? 0 : min);
        uint32_t first = re->n_code;
        for (int i = 0; i < extra && !st; i++) {
            st = emit(ps, (inst){.op = OP_SPLIT});
            for (uint32_t k = 0; k < len && !st; k++) st = emit(ps, frag[k]);
        }
        for (uint32_t pc = first, i = 0; !st && i < (uint32_t)extra; i++, pc += len + 1) {
            int32_t in = 1, out = (int32_t)(re->n_code - pc);
            re->code[pc].a = greedy ? in : out, re->code[pc].b = greedy ? out : in;
        }
    }
    free(frag);
    if (min == 0) *nullable = true;
    return st;
}

static celer_status parse_seq(parser *ps, bool *nullable)
{
    *nullable = true;
    while (*ps->p && *ps->p != '|' && *ps->p != ')') {
        uint32_t start = ps->re->n_code;
        bool     n;
        if (parse_atom(ps, &n) || parse_quant(ps, start, &n)) return ps->err->code;
        *nullable = *nullable && n;
    }
    return CELER_OK;
}

/* alt := seq ('|' seq)*, compiled as SPLIT seq1, next; seq1; JMP end; … */
static celer_status parse_alt(parser *ps, bool *nullable)
{
    celer_regex *re    = ps->re;
    uint32_t     start = re->n_code;
    if (parse_seq(ps, nullable)) return ps->err->code;
    while (*ps->p == '|') {
        ps->p++;
        /* wrap what we have: SPLIT(+1, +len+2) <left> JMP(end) <right> */
        uint32_t len = re->n_code - start;
        if (insert(ps, start, 1)) return ps->err->code;
        re->code[start] = (inst){.op = OP_SPLIT, .a = 1, .b = (int32_t)len + 2};
        uint32_t jmp    = re->n_code;
        if (emit(ps, (inst){.op = OP_JMP})) return ps->err->code;
        bool n;
        if (parse_seq(ps, &n)) return ps->err->code;
        re->code[jmp].a = (int32_t)(re->n_code - jmp);
        *nullable       = *nullable || n;
    }
    return CELER_OK;
}

celer_status celer_regex_compile(celer_regex **out, const char *pattern, celer_error *err)
{
    celer_error local;
    if (!err) err = &local;
    *out            = NULL;
    celer_regex *re = calloc(1, sizeof *re);
    if (!re) return celer_fail(err, CELER_ERR_OOM, "regex: out of memory");
    parser ps = {.re = re, .pat = pattern, .p = pattern, .err = err};
    bool   nullable;
    celer_status st = parse_alt(&ps, &nullable);
    if (!st && *ps.p) st = perr(&ps, "unbalanced ')'");
    if (!st) st = emit(&ps, (inst){.op = OP_MATCH});
    if (st) {
        celer_regex_free(re);
        return st;
    }
    *out = re;
    return CELER_OK;
}

void celer_regex_free(celer_regex *re)
{
    if (!re) return;
    free(re->code);
    free(re->classes);
    free(re->items);
    free(re);
}

void celer_regex_stack_free(celer_regex_stack *st)
{
    if (!st) return;
    free(st->items);
    st->items = NULL, st->cap = 0;
}

/* ---- matching ---------------------------------------------------------- */

static inline int next_cp(const uint8_t *s, size_t n, size_t pos, uint32_t *cp)
{
    if (s[pos] < 0x80) {
        *cp = s[pos];
        return 1;
    }
    return (int)celer_utf8_decode((const char *)s + pos, n - pos, cp); /* bad bytes: CELER_UTF8_BAD */
}

/* Runs the program from pc at pos; 1 with *end on a match, 0 on none, -1 out of memory. The
 * choice points of this run live in st above `base`. */
static int run(const celer_regex *re, const uint8_t *s, size_t n, uint32_t pc, size_t pos, size_t *end,
               celer_regex_stack *st, size_t base)
{
    size_t top = base;
    for (;;) {
        const inst *in = &re->code[pc];
        uint32_t    cp;
        int         k;
        switch (in->op) {
        case OP_CHAR:
            if (pos >= n) goto fail;
            k = next_cp(s, n, pos, &cp);
            if (cp != in->c) goto fail;
            pos += (size_t)k, pc++;
            continue;
        case OP_CLASS:
            if (pos >= n) goto fail;
            k = next_cp(s, n, pos, &cp);
            if (!class_has(re, &re->classes[in->c], cp)) goto fail;
            pos += (size_t)k, pc++;
            continue;
        case OP_ANY:
            if (pos >= n || s[pos] == '\n') goto fail;
            pos += (size_t)next_cp(s, n, pos, &cp), pc++;
            continue;
        case OP_SPLIT:
            if (top + 2 > st->cap) {
                size_t    cap = st->cap ? st->cap * 2 : 256;
                uint32_t *p   = realloc(st->items, cap * sizeof *p);
                if (!p) return -1;
                st->items = p, st->cap = cap;
            }
            st->items[top++] = pc + (uint32_t)in->b;
            st->items[top++] = (uint32_t)pos;
            pc += (uint32_t)in->a;
            continue;
        case OP_JMP: pc += (uint32_t)in->a; continue;
        case OP_LOOK: {
            size_t e;
            int    r = run(re, s, n, pc + (uint32_t)in->a, pos, &e, st, top);
            if (r < 0) return -1;
            if ((r == 1) == in->neg) goto fail;
            pc += (uint32_t)in->b;
            continue;
        }
        case OP_MATCH: *end = pos; return 1;
        }
    fail:
        if (top == base) return 0;
        top -= 2;
        pc  = st->items[top];
        pos = st->items[top + 1];
    }
}

int celer_regex_find(const celer_regex *re, const char *text, size_t n, size_t from, size_t *mb, size_t *me,
                     celer_regex_stack *st)
{
    const uint8_t *s = (const uint8_t *)text;
    for (size_t pos = from; pos <= n;) {
        size_t end;
        int    r = run(re, s, n, 0, pos, &end, st, 0);
        if (r) {
            if (r > 0) *mb = pos, *me = end;
            return r;
        }
        if (pos == n) break;
        uint32_t cp;
        pos += (size_t)next_cp(s, n, pos, &cp);
    }
    return 0;
}
