/* Values of the Jinja interpreter: the arena they live in, buffers, and Python's semantics for
 * truth, equality, ordering, str(), repr() and json.dumps(). */
#include "chat/jinja.h"
#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/unicode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- failing --------------------------------------------------------------------------------- */

void jinja_fail(jinja_fail_ctx *f, celer_status code, int line, int col, const char *fmt, ...)
{
    char    msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (f->err) {
        f->err->code = code;
        if (line > 0)
            snprintf(f->err->msg, sizeof f->err->msg, "template %s:%d:%d: %s", f->name, line, col, msg);
        else
            snprintf(f->err->msg, sizeof f->err->msg, "template %s: %s", f->name, msg);
    }
    f->code = code;
    longjmp(f->jmp, 1);
}

void jinja_rt_fail(jinja_rt *rt, const char *fmt, ...)
{
    char    msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    jinja_fail(rt->f, CELER_ERR_INVALID, rt->line, rt->col, "%s", msg);
}

/* ---- arena ----------------------------------------------------------------------------------- */

struct jchunk {
    jchunk *next;
    size_t  used, cap;
    _Alignas(16) unsigned char data[];
};

#define CHUNK_SIZE (64u << 10)

void *jinja_alloc(jinja_arena *a, jinja_fail_ctx *f, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (a->limit && (n > a->limit || a->used > a->limit - n))
        jinja_fail(f, CELER_ERR_INVALID, 0, 0, "rendering needs more than %zu MiB of memory; the template builds "
                   "values too large for a prompt (check loops that grow strings or lists)", a->limit >> 20);
    jchunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > CHUNK_SIZE / 2 ? n : CHUNK_SIZE;
        c          = malloc(sizeof *c + cap);
        if (!c) jinja_fail(f, CELER_ERR_OOM, 0, 0, "out of memory allocating %zu bytes", cap);
        c->used = 0, c->cap = cap;
        if (n > CHUNK_SIZE / 2 && a->head) { /* big block: keep the current chunk in front */
            c->next       = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    void *p = c->data + c->used;
    c->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

void jinja_arena_free(jinja_arena *a)
{
    if (!a) return;
    for (jchunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    a->head = NULL;
    a->used = 0;
}

/* ---- buffers --------------------------------------------------------------------------------- */

void jbuf_put(jinja_rt *rt, jbuf *b, const char *s, size_t n)
{
    if (b->limit && (n > b->limit || b->n > b->limit - n))
        jinja_rt_fail(rt, "the rendered text passes the limit of %zu MiB; the template or its input is too large "
                      "for a prompt", b->limit >> 20);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) {
            if (cap > ((size_t)1 << 40)) jinja_rt_fail(rt, "a string grows past any sensible size");
            cap *= 2;
        }
        char *p;
        if (b->heap) {
            p = realloc(b->p, cap);
            if (!p) jinja_fail(rt->f, CELER_ERR_OOM, 0, 0, "out of memory growing a %zu-byte buffer", cap);
        } else {
            p = jinja_alloc(&rt->arena, rt->f, cap); /* the old block stays in the arena until the render ends */
            if (b->n) memcpy(p, b->p, b->n);
        }
        b->p = p, b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void jbuf_putc(jinja_rt *rt, jbuf *b, char c) { jbuf_put(rt, b, &c, 1); }

void jbuf_printf(jinja_rt *rt, jbuf *b, const char *fmt, ...)
{
    char    tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    jbuf_put(rt, b, tmp, k < 0 ? 0 : (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

void jbuf_free(jbuf *b)
{
    if (b->heap) free(b->p);
    b->p = NULL, b->n = b->cap = 0;
}

/* ---- constructors ---------------------------------------------------------------------------- */

jv jv_str_copy(jinja_rt *rt, const char *p, size_t n)
{
    char *q = jinja_alloc(&rt->arena, rt->f, n + 1);
    if (n) memcpy(q, p, n);
    return jv_strn(q, n);
}

jv jv_str_buf(jinja_rt *rt, jbuf *b)
{
    (void)rt;
    CELER_ASSERT(!b->heap);
    jv r = b->p ? jv_strn(b->p, b->n) : jv_strn("", 0);
    *b   = (jbuf){0};
    return r;
}

jv jv_list_new(jinja_rt *rt, size_t cap)
{
    jv v  = {.t = JV_LIST};
    v.u.l = jinja_alloc(&rt->arena, rt->f, sizeof *v.u.l);
    if (cap) {
        v.u.l->v   = jinja_alloc(&rt->arena, rt->f, cap * sizeof(jv));
        v.u.l->cap = cap;
    }
    return v;
}

void jv_list_push(jinja_rt *rt, jlist *l, jv v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        jv    *p   = jinja_alloc(&rt->arena, rt->f, cap * sizeof *p);
        if (l->n) memcpy(p, l->v, l->n * sizeof *p);
        l->v = p, l->cap = cap;
    }
    l->v[l->n++] = v;
}

jv jv_dict_new(jinja_rt *rt)
{
    jv v  = {.t = JV_DICT};
    v.u.d = jinja_alloc(&rt->arena, rt->f, sizeof *v.u.d);
    return v;
}

const jv *jv_dict_get(const jdict *d, jv k)
{
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->k[i], k)) return &d->v[i];
    return NULL;
}

const jv *jv_dict_gets(const jdict *d, const char *k, size_t n)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].u.s.n == n && !memcmp(d->k[i].u.s.p, k, n)) return &d->v[i];
    return NULL;
}

void jv_dict_set(jinja_rt *rt, jdict *d, jv k, jv v)
{
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->k[i], k)) {
            d->v[i] = v;
            return;
        }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        jv    *pk  = jinja_alloc(&rt->arena, rt->f, cap * sizeof *pk);
        jv    *pv  = jinja_alloc(&rt->arena, rt->f, cap * sizeof *pv);
        if (d->n) memcpy(pk, d->k, d->n * sizeof *pk), memcpy(pv, d->v, d->n * sizeof *pv);
        d->k = pk, d->v = pv, d->cap = cap;
    }
    d->k[d->n] = k, d->v[d->n] = v, d->n++;
}

jv jv_func(jinja_rt *rt, const char *name, jfunc_impl impl, jv self)
{
    jv v   = {.t = JV_FUNC};
    v.u.fn = jinja_alloc(&rt->arena, rt->f, sizeof *v.u.fn);
    v.u.fn->name = name, v.u.fn->impl = impl, v.u.fn->self = self;
    return v;
}

/* ---- Python semantics ------------------------------------------------------------------------ */

bool jv_truthy(jv v)
{
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0;
    case JV_STR: return v.u.s.n != 0;
    case JV_LIST: return v.u.l->n != 0;
    case JV_DICT: return v.u.d->n != 0;
    default: return true;
    }
}

bool   jv_is_num(jv v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }
double jv_num(jv v) { return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : v.u.b ? 1.0 : 0.0; }

static int64_t as_i(jv v) { return v.t == JV_INT ? v.u.i : v.u.b; }

bool jv_equal(jv a, jv b)
{
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) return as_i(a) == as_i(b);
        return jv_num(a) == jv_num(b);
    }
    if (a.t != b.t) return false;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE: return true;
    case JV_STR: return a.u.s.n == b.u.s.n && !memcmp(a.u.s.p, b.u.s.p, a.u.s.n);
    case JV_LIST:
        if (a.u.l->n != b.u.l->n) return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!jv_equal(a.u.l->v[i], b.u.l->v[i])) return false;
        return true;
    case JV_DICT:
    case JV_NS:
        if (a.u.d->n != b.u.d->n) return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            const jv *o = jv_dict_get(b.u.d, a.u.d->k[i]);
            if (!o || !jv_equal(a.u.d->v[i], *o)) return false;
        }
        return true;
    case JV_MACRO: return a.u.m == b.u.m;
    case JV_FUNC: return a.u.fn == b.u.fn;
    case JV_LOOP: return a.u.loop == b.u.loop;
    default: return false;
    }
}

const char *jv_type_name(jv v)
{
    static const char *const names[] = {"Undefined", "NoneType", "bool", "int", "float", "str",
                                        "list", "dict", "Namespace", "Macro", "builtin_function_or_method", "LoopContext"};
    if (v.t == JV_LIST && (v.flags & JV_TUPLE)) return "tuple";
    return v.t < sizeof names / sizeof names[0] ? names[v.t] : "object";
}

int jv_compare(jinja_rt *rt, jv a, jv b)
{
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) return as_i(a) < as_i(b) ? -1 : as_i(a) > as_i(b);
        double x = jv_num(a), y = jv_num(b);
        return x < y ? -1 : x > y ? 1 : 0; /* NaN compares equal here; Python says False both ways */
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int    c = n ? memcmp(a.u.s.p, b.u.s.p, n) : 0; /* UTF-8 byte order is code point order */
        if (c) return c < 0 ? -1 : 1;
        return a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
    }
    if (a.t == JV_LIST && b.t == JV_LIST && (a.flags & JV_TUPLE) == (b.flags & JV_TUPLE)) {
        for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++)
            if (!jv_equal(a.u.l->v[i], b.u.l->v[i])) return jv_compare(rt, a.u.l->v[i], b.u.l->v[i]);
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    }
    if (a.t == JV_UNDEF || b.t == JV_UNDEF)
        jinja_rt_fail(rt, "'%.*s' is undefined", (int)(a.t == JV_UNDEF ? a : b).u.s.n, (a.t == JV_UNDEF ? a : b).u.s.p);
    jinja_rt_fail(rt, "'<' not supported between instances of '%s' and '%s'", jv_type_name(a), jv_type_name(b));
}

/* ---- UTF-8 helpers --------------------------------------------------------------------------- */

bool jinja_py_space(uint32_t cp) { return celer_unicode_is_space(cp) || (cp >= 0x1c && cp <= 0x1f); }

size_t jv_str_len(jv s)
{
    size_t k = 0;
    for (size_t i = 0; i < s.u.s.n; i++) k += ((unsigned char)s.u.s.p[i] & 0xC0) != 0x80;
    return k;
}

size_t jv_utf8_offset(const char *p, size_t n, size_t i)
{
    size_t k = 0, off = 0;
    for (; off < n; off++)
        if (((unsigned char)p[off] & 0xC0) != 0x80) {
            if (k == i) return off;
            k++;
        }
    return n;
}

/* ---- printing -------------------------------------------------------------------------------- */

size_t jinja_float_repr(char out[48], double f)
{
    if (isnan(f)) {
        snprintf(out, 48, "nan");
    } else if (isinf(f)) {
        snprintf(out, 48, f < 0 ? "-inf" : "inf");
    } else {
        char e[40];
        int  prec;
        for (prec = 0; prec < 17; prec++) { /* shortest digits that round-trip */
            snprintf(e, sizeof e, "%.*e", prec, f);
            if (strtod(e, NULL) == f) break;
        }
        /* e = [-]d[.ddd]e[+-]XX */
        char        digits[32];
        size_t      nd  = 0;
        const char *p   = e;
        bool        neg = *p == '-';
        if (neg) p++;
        for (; *p && *p != 'e'; p++)
            if (*p != '.') digits[nd++] = *p;
        int exp10 = atoi(p + 1);
        while (nd > 1 && digits[nd - 1] == '0') nd--;
        int    decpt = exp10 + 1; /* value = 0.digits * 10^decpt */
        size_t k     = 0;
        if (neg) out[k++] = '-';
        if (decpt <= -4 || decpt > 16) {
            out[k++] = digits[0];
            if (nd > 1) {
                out[k++] = '.';
                for (size_t i = 1; i < nd; i++) out[k++] = digits[i];
            }
            k += (size_t)snprintf(out + k, 48 - k, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
        } else if (decpt <= 0) {
            out[k++] = '0', out[k++] = '.';
            for (int i = 0; i < -decpt; i++) out[k++] = '0';
            for (size_t i = 0; i < nd; i++) out[k++] = digits[i];
            out[k] = 0;
        } else {
            for (int i = 0; i < decpt; i++) out[k++] = (size_t)i < nd ? digits[i] : '0';
            out[k++] = '.';
            if ((size_t)decpt >= nd) out[k++] = '0';
            for (size_t i = (size_t)decpt; i < nd; i++) out[k++] = digits[i];
            out[k] = 0;
        }
    }
    return strlen(out);
}

static void write_float_rt(jinja_rt *rt, jbuf *b, double f)
{
    char   out[48];
    size_t n = jinja_float_repr(out, f);
    jbuf_put(rt, b, out, n);
}

static bool py_printable(uint32_t cp)
{
    if (cp < 0x20 || cp == 0x7f) return false;
    if (cp < 0x7f) return true;
    celer_ucat c = celer_unicode_category(cp);
    return !(c == CELER_UCAT_CC || c == CELER_UCAT_CF || c == CELER_UCAT_CS || c == CELER_UCAT_CO ||
             c == CELER_UCAT_CN || c == CELER_UCAT_ZL || c == CELER_UCAT_ZP || c == CELER_UCAT_ZS);
}

static void write_str_repr(jinja_rt *rt, jbuf *b, const char *s, size_t n)
{
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q      = has_sq && !has_dq ? '"' : '\'';
    jbuf_putc(rt, b, q);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t   k = celer_utf8_decode(s + i, n - i, &cp);
        if (cp == CELER_UTF8_BAD) cp = 0xFFFD;
        if (cp == (uint32_t)q || cp == '\\') jbuf_putc(rt, b, '\\'), jbuf_putc(rt, b, (char)cp);
        else if (cp == '\n') jbuf_put(rt, b, "\\n", 2);
        else if (cp == '\r') jbuf_put(rt, b, "\\r", 2);
        else if (cp == '\t') jbuf_put(rt, b, "\\t", 2);
        else if (py_printable(cp)) jbuf_put(rt, b, s + i, k);
        else if (cp < 0x100) jbuf_printf(rt, b, "\\x%02x", cp);
        else if (cp < 0x10000) jbuf_printf(rt, b, "\\u%04x", cp);
        else jbuf_printf(rt, b, "\\U%08x", cp);
        i += k;
    }
    jbuf_putc(rt, b, q);
}

static void write_repr_depth(jinja_rt *rt, jbuf *b, jv v, int depth);

static void write_str_depth(jinja_rt *rt, jbuf *b, jv v, int depth)
{
    switch (v.t) {
    case JV_UNDEF: return;
    case JV_STR: jbuf_put(rt, b, v.u.s.p, v.u.s.n); return;
    default: write_repr_depth(rt, b, v, depth);
    }
}

static void write_repr_depth(jinja_rt *rt, jbuf *b, jv v, int depth)
{
    if (depth > JINJA_MAX_NEST) jinja_rt_fail(rt, "a value nests deeper than %d levels", JINJA_MAX_NEST);
    switch (v.t) {
    case JV_UNDEF: return; /* jinja2's Undefined prints as "" even inside a list's repr */
    case JV_NONE: jbuf_put(rt, b, "None", 4); return;
    case JV_BOOL: v.u.b ? jbuf_put(rt, b, "True", 4) : jbuf_put(rt, b, "False", 5); return;
    case JV_INT: jbuf_printf(rt, b, "%lld", (long long)v.u.i); return;
    case JV_FLOAT: write_float_rt(rt, b, v.u.f); return;
    case JV_STR: write_str_repr(rt, b, v.u.s.p, v.u.s.n); return;
    case JV_LIST: {
        bool tup = v.flags & JV_TUPLE;
        jbuf_putc(rt, b, tup ? '(' : '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) jbuf_put(rt, b, ", ", 2);
            write_repr_depth(rt, b, v.u.l->v[i], depth + 1);
        }
        if (tup && v.u.l->n == 1) jbuf_putc(rt, b, ',');
        jbuf_putc(rt, b, tup ? ')' : ']');
        return;
    }
    case JV_DICT:
    case JV_NS:
        if (v.t == JV_NS) jbuf_put(rt, b, "<Namespace ", 11);
        jbuf_putc(rt, b, '{');
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i) jbuf_put(rt, b, ", ", 2);
            write_repr_depth(rt, b, v.u.d->k[i], depth + 1);
            jbuf_put(rt, b, ": ", 2);
            write_repr_depth(rt, b, v.u.d->v[i], depth + 1);
        }
        jbuf_putc(rt, b, '}');
        if (v.t == JV_NS) jbuf_putc(rt, b, '>');
        return;
    case JV_MACRO: jbuf_put(rt, b, "<Macro>", 7); return;
    case JV_FUNC: jbuf_printf(rt, b, "<built-in method %s>", v.u.fn->name); return;
    case JV_LOOP: jbuf_printf(rt, b, "<LoopContext %lld/%lld>", (long long)v.u.loop->index0 + 1, (long long)v.u.loop->length); return;
    }
}

void jv_write_str(jinja_rt *rt, jbuf *b, jv v) { write_str_depth(rt, b, v, 0); }
void jv_write_repr(jinja_rt *rt, jbuf *b, jv v) { write_repr_depth(rt, b, v, 0); }

jv jv_to_str(jinja_rt *rt, jv v)
{
    if (v.t == JV_STR) return v;
    if (v.t == JV_UNDEF) return jv_strn("", 0);
    jbuf b = {0};
    jv_write_str(rt, &b, v);
    return jv_str_buf(rt, &b);
}

/* ---- json.dumps ------------------------------------------------------------------------------- */

static void json_string(jinja_rt *rt, jbuf *b, const char *s, size_t n, bool ascii)
{
    jbuf_putc(rt, b, '"');
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') jbuf_put(rt, b, "\\\"", 2), i++;
        else if (c == '\\') jbuf_put(rt, b, "\\\\", 2), i++;
        else if (c == '\n') jbuf_put(rt, b, "\\n", 2), i++;
        else if (c == '\r') jbuf_put(rt, b, "\\r", 2), i++;
        else if (c == '\t') jbuf_put(rt, b, "\\t", 2), i++;
        else if (c == '\b') jbuf_put(rt, b, "\\b", 2), i++;
        else if (c == '\f') jbuf_put(rt, b, "\\f", 2), i++;
        else if (c < 0x20 || (ascii && c == 0x7f)) jbuf_printf(rt, b, "\\u%04x", c), i++;
        else if (c < 0x80 || !ascii) {
            size_t j = i + 1;
            while (j < n && (unsigned char)s[j] >= 0x20 && s[j] != '"' && s[j] != '\\' &&
                   (!ascii || (unsigned char)s[j] < 0x7f))
                j++;
            jbuf_put(rt, b, s + i, j - i);
            i = j;
        } else {
            uint32_t cp;
            size_t   k = celer_utf8_decode(s + i, n - i, &cp);
            if (cp == CELER_UTF8_BAD) cp = 0xFFFD;
            if (cp >= 0x10000) {
                cp -= 0x10000;
                jbuf_printf(rt, b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else {
                jbuf_printf(rt, b, "\\u%04x", cp);
            }
            i += k;
        }
    }
    jbuf_putc(rt, b, '"');
}

static void json_newline(jinja_rt *rt, jbuf *b, const jjson_opts *o, int level)
{
    jbuf_putc(rt, b, '\n');
    for (int i = 0; i < level; i++) jbuf_put(rt, b, o->indent, o->indent_n);
}

static int cmp_keys(const void *x, const void *y)
{
    const jv *a = *(const jv *const *)x, *b = *(const jv *const *)y;
    size_t    n = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
    int       c = n ? memcmp(a->u.s.p, b->u.s.p, n) : 0;
    return c ? c : a->u.s.n < b->u.s.n ? -1 : a->u.s.n > b->u.s.n;
}

void jv_write_json(jinja_rt *rt, jbuf *b, jv v, const jjson_opts *o, int level)
{
    if (level > JINJA_MAX_NEST) jinja_rt_fail(rt, "tojson: the value nests deeper than %d levels", JINJA_MAX_NEST);
    switch (v.t) {
    case JV_NONE: jbuf_put(rt, b, "null", 4); return;
    case JV_BOOL: v.u.b ? jbuf_put(rt, b, "true", 4) : jbuf_put(rt, b, "false", 5); return;
    case JV_INT: jbuf_printf(rt, b, "%lld", (long long)v.u.i); return;
    case JV_FLOAT:
        if (isnan(v.u.f)) jbuf_put(rt, b, "NaN", 3);
        else if (isinf(v.u.f)) v.u.f < 0 ? jbuf_put(rt, b, "-Infinity", 9) : jbuf_put(rt, b, "Infinity", 8);
        else write_float_rt(rt, b, v.u.f);
        return;
    case JV_STR: json_string(rt, b, v.u.s.p, v.u.s.n, o->ensure_ascii); return;
    case JV_LIST:
        if (!v.u.l->n) {
            jbuf_put(rt, b, "[]", 2);
            return;
        }
        jbuf_putc(rt, b, '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) jbuf_put(rt, b, o->item_sep, o->item_sep_n);
            if (o->indent) json_newline(rt, b, o, level + 1);
            jv_write_json(rt, b, v.u.l->v[i], o, level + 1);
        }
        if (o->indent) json_newline(rt, b, o, level);
        jbuf_putc(rt, b, ']');
        return;
    case JV_DICT: {
        jdict *d = v.u.d;
        if (!d->n) {
            jbuf_put(rt, b, "{}", 2);
            return;
        }
        /* keys: str as is; int, float, bool, None become strings as Python's json does */
        jv *keys = jinja_alloc(&rt->arena, rt->f, d->n * sizeof *keys);
        const jv **order = jinja_alloc(&rt->arena, rt->f, d->n * sizeof *order);
        for (size_t i = 0; i < d->n; i++) {
            jv k = d->k[i];
            if (k.t == JV_STR) keys[i] = k;
            else if (k.t == JV_NONE) keys[i] = jv_strn("null", 4);
            else if (k.t == JV_BOOL) keys[i] = k.u.b ? jv_strn("true", 4) : jv_strn("false", 5);
            else if (k.t == JV_INT || k.t == JV_FLOAT) {
                jbuf kb = {0};
                jv_write_json(rt, &kb, k, o, level + 1);
                keys[i] = jv_str_buf(rt, &kb);
            } else
                jinja_rt_fail(rt, "tojson: keys must be str, int, float, bool or None, not %s", jv_type_name(k));
            order[i] = &keys[i];
        }
        if (o->sort_keys) qsort(order, d->n, sizeof *order, cmp_keys);
        jbuf_putc(rt, b, '{');
        for (size_t j = 0; j < d->n; j++) {
            size_t i = (size_t)(order[j] - keys);
            if (j) jbuf_put(rt, b, o->item_sep, o->item_sep_n);
            if (o->indent) json_newline(rt, b, o, level + 1);
            json_string(rt, b, keys[i].u.s.p, keys[i].u.s.n, o->ensure_ascii);
            jbuf_put(rt, b, o->key_sep, o->key_sep_n);
            jv_write_json(rt, b, d->v[i], o, level + 1);
        }
        if (o->indent) json_newline(rt, b, o, level);
        jbuf_putc(rt, b, '}');
        return;
    }
    default:
        jinja_rt_fail(rt, "tojson: Object of type %s is not JSON serializable", jv_type_name(v));
    }
}
