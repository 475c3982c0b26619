/* jinja2's builtin filters and tests, as chat templates use them, plus transformers' tojson
 * (json.dumps with ensure_ascii=False, indent, separators, sort_keys). Each one follows the
 * Python source's behaviour for the value kinds JSON input can hold, Undefined included. */
#include "chat/jinja.h"
#include "core/utf8.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

jv jargs_get(const jargs *a, size_t i, const char *name, jv dflt)
{
    if (name)
        for (size_t k = 0; k < a->n_kw; k++)
            if (!strcmp(a->kw_names[k], name)) return a->kw_vals[k];
    return i < a->n ? a->args[i] : dflt;
}

static bool name_is(const char *name, size_t n, const char *lit) { return strlen(lit) == n && !memcmp(name, lit, n); }

jlist *jinja_iter(jinja_rt *rt, jv v)
{
    switch (v.t) {
    case JV_LIST: return v.u.l;
    case JV_UNDEF: return jv_list_new(rt, 0).u.l;
    case JV_DICT:
    case JV_NS: {
        jv l = jv_list_new(rt, v.u.d->n);
        for (size_t i = 0; i < v.u.d->n; i++) jv_list_push(rt, l.u.l, v.u.d->k[i]);
        return l.u.l;
    }
    case JV_STR: {
        jv l = jv_list_new(rt, 0);
        for (size_t i = 0; i < v.u.s.n;) {
            uint32_t cp;
            size_t   k = celer_utf8_decode(v.u.s.p + i, v.u.s.n - i, &cp);
            jv_list_push(rt, l.u.l, jv_strn(v.u.s.p + i, k));
            i += k;
        }
        return l.u.l;
    }
    default: jinja_rt_fail(rt, "'%s' object is not iterable", jv_type_name(v));
    }
}

/* ---- string helpers shared with methods ------------------------------------------------------- */

static uint32_t case_map(uint32_t c, bool upper)
{
    if (upper) {
        if (c >= 'a' && c <= 'z') return c - 32;
        if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
        if (c == 0xFF) return 0x178;
        if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
        if (c >= 0x430 && c <= 0x44F) return c - 32;
        if (c >= 0x450 && c <= 0x45F) return c - 80;
        if (c >= 0x100 && c <= 0x17F && (c & 1) && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F &&
            !(c >= 0x139 && c <= 0x148))
            return c - 1;
        if (c >= 0x139 && c <= 0x148 && !(c & 1)) return c - 1;
    } else {
        if (c >= 'A' && c <= 'Z') return c + 32;
        if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
        if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
        if (c >= 0x410 && c <= 0x42F) return c + 32;
        if (c >= 0x400 && c <= 0x40F) return c + 80;
        if (c >= 0x100 && c <= 0x17F && !(c & 1) && c != 0x130 && c != 0x138 && !(c >= 0x139 && c <= 0x148)) return c + 1;
        if (c >= 0x139 && c <= 0x148 && (c & 1)) return c + 1;
    }
    return c;
}

static bool is_cased_upper(uint32_t c) { return case_map(c, false) != c; }
static bool is_cased_lower(uint32_t c) { return case_map(c, true) != c; }

/* mode: 'u' upper, 'l' lower, 'c' capitalize, 't' Python str.title, 'j' jinja2's title filter */
jv jinja_str_case(jinja_rt *rt, jv s, char mode);
jv jinja_str_case(jinja_rt *rt, jv s, char mode)
{
    jbuf b     = {0};
    bool first = true, prev_cased = false;
    for (size_t i = 0; i < s.u.s.n;) {
        uint32_t cp;
        size_t   k = celer_utf8_decode(s.u.s.p + i, s.u.s.n - i, &cp);
        if (cp == CELER_UTF8_BAD) {
            jbuf_put(rt, &b, s.u.s.p + i, k);
            i += k;
            continue;
        }
        uint32_t o = cp;
        bool     cased = is_cased_upper(cp) || is_cased_lower(cp);
        switch (mode) {
        case 'u': o = case_map(cp, true); break;
        case 'l': o = case_map(cp, false); break;
        case 'c': o = case_map(cp, first); break;
        case 't': o = case_map(cp, !prev_cased); break;
        case 'j': {
            /* words start after whitespace or one of -({[< (jinja2: ([-\s({\[<]+) */
            bool sep = jinja_py_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
            o        = sep ? cp : case_map(cp, first);
            first    = sep;
            break;
        }
        default: break;
        }
        if (mode != 'j') first = false;
        if (mode == 't') prev_cased = cased;
        char e[4];
        jbuf_put(rt, &b, e, celer_utf8_encode(o, e));
        i += k;
    }
    return b.p ? jv_str_buf(rt, &b) : jv_strn("", 0);
}

/* Python str.strip/lstrip/rstrip; chars NULL: whitespace. which: 'b' both, 'l', 'r' */
jv jinja_str_strip(jv s, const jv *chars, char which);
static bool in_chars(uint32_t cp, const jv *chars)
{
    if (!chars) return jinja_py_space(cp);
    for (size_t i = 0; i < chars->u.s.n;) {
        uint32_t c;
        size_t   k = celer_utf8_decode(chars->u.s.p + i, chars->u.s.n - i, &c);
        if (c == cp) return true;
        i += k;
    }
    return false;
}
jv jinja_str_strip(jv s, const jv *chars, char which)
{
    const char *p = s.u.s.p;
    size_t      a = 0, b = s.u.s.n;
    if (which != 'r')
        while (a < b) {
            uint32_t cp;
            size_t   k = celer_utf8_decode(p + a, b - a, &cp);
            if (!in_chars(cp, chars)) break;
            a += k;
        }
    if (which != 'l')
        while (b > a) {
            size_t st = b - 1;
            while (st > a && ((unsigned char)p[st] & 0xC0) == 0x80) st--;
            uint32_t cp;
            celer_utf8_decode(p + st, b - st, &cp);
            if (!in_chars(cp, chars)) break;
            b = st;
        }
    return jv_strn(p + a, b - a);
}

jv jinja_str_replace(jinja_rt *rt, jv s, jv old, jv new_, int64_t count);
jv jinja_str_replace(jinja_rt *rt, jv s, jv old, jv new_, int64_t count)
{
    jbuf b = {0};
    if (!old.u.s.n) { /* Python inserts new_ between every character */
        size_t i = 0;
        int64_t done = 0;
        while (true) {
            if (count < 0 || done < count) jbuf_put(rt, &b, new_.u.s.p, new_.u.s.n), done++;
            if (i >= s.u.s.n) break;
            uint32_t cp;
            size_t   k = celer_utf8_decode(s.u.s.p + i, s.u.s.n - i, &cp);
            jbuf_put(rt, &b, s.u.s.p + i, k);
            i += k;
        }
        return b.p ? jv_str_buf(rt, &b) : jv_strn("", 0);
    }
    size_t  i = 0, last = 0;
    int64_t done = 0;
    while (i + old.u.s.n <= s.u.s.n && (count < 0 || done < count)) {
        if (!memcmp(s.u.s.p + i, old.u.s.p, old.u.s.n)) {
            jbuf_put(rt, &b, s.u.s.p + last, i - last);
            jbuf_put(rt, &b, new_.u.s.p, new_.u.s.n);
            i += old.u.s.n, last = i, done++;
        } else {
            i++;
        }
    }
    if (!done) return s;
    jbuf_put(rt, &b, s.u.s.p + last, s.u.s.n - last);
    return jv_str_buf(rt, &b);
}

/* ---- filters ---------------------------------------------------------------------------------- */

static jv f_tojson(jinja_rt *rt, jv v, const jargs *a)
{
    jjson_opts o  = {0};
    jv         ea = jargs_get(a, 0, "ensure_ascii", jv_bool(false));
    jv         in = jargs_get(a, 1, "indent", jv_none());
    jv         se = jargs_get(a, 2, "separators", jv_none());
    jv         sk = jargs_get(a, 3, "sort_keys", jv_bool(false));
    o.ensure_ascii = jv_truthy(ea);
    o.sort_keys    = jv_truthy(sk);
    char spaces[64];
    if (in.t == JV_INT || in.t == JV_BOOL) {
        int64_t k = in.t == JV_INT ? in.u.i : in.u.b;
        if (k < 0) k = 0;
        if (k > 32) jinja_rt_fail(rt, "tojson: indent %lld is larger than celer allows (32)", (long long)k);
        memset(spaces, ' ', (size_t)k);
        o.indent = spaces, o.indent_n = (size_t)k;
    } else if (in.t == JV_STR) {
        o.indent = in.u.s.p, o.indent_n = in.u.s.n;
    } else if (in.t != JV_NONE) {
        jinja_rt_fail(rt, "tojson: indent must be an int or a string");
    }
    o.item_sep = o.indent ? "," : ", ", o.item_sep_n = o.indent ? 1 : 2;
    o.key_sep = ": ", o.key_sep_n = 2;
    if (se.t == JV_LIST && se.u.l->n == 2 && se.u.l->v[0].t == JV_STR && se.u.l->v[1].t == JV_STR) {
        o.item_sep = se.u.l->v[0].u.s.p, o.item_sep_n = se.u.l->v[0].u.s.n;
        o.key_sep = se.u.l->v[1].u.s.p, o.key_sep_n = se.u.l->v[1].u.s.n;
    } else if (se.t != JV_NONE) {
        jinja_rt_fail(rt, "tojson: separators must be a pair of strings");
    }
    jbuf b = {0};
    jv_write_json(rt, &b, v, &o, 0);
    return jv_str_buf(rt, &b);
}

/* Length of the line break at p[e] (Python's splitlines set), 0 if none. */
static size_t line_break(const char *p, size_t n, size_t e)
{
    unsigned char c = (unsigned char)p[e];
    if (c == '\n' || c == '\v' || c == '\f' || c == 0x1c || c == 0x1d || c == 0x1e) return 1;
    if (c == '\r') return e + 1 < n && p[e + 1] == '\n' ? 2 : 1;
    if (c == 0xC2 && e + 1 < n && (unsigned char)p[e + 1] == 0x85) return 2;
    if (c == 0xE2 && e + 2 < n && (unsigned char)p[e + 1] == 0x80 &&
        ((unsigned char)p[e + 2] == 0xA8 || (unsigned char)p[e + 2] == 0xA9))
        return 3;
    return 0;
}

/* jinja2's indent: lines of s + "\n" (splitlines), joined by "\n"; lines after the first get the
 * indent unless blank (and blank=False); the first only with first=True. */
static jv f_indent(jinja_rt *rt, jv v, const jargs *a)
{
    jv   s     = jv_to_str(rt, v);
    jv   width = jargs_get(a, 0, "width", jv_int(4));
    bool first = jv_truthy(jargs_get(a, 1, "first", jv_bool(false)));
    bool blank = jv_truthy(jargs_get(a, 2, "blank", jv_bool(false)));
    jv   ind   = jv_strn("", 0);
    if (width.t == JV_STR) {
        ind = width;
    } else if (width.t == JV_INT || width.t == JV_BOOL) {
        int64_t k = width.t == JV_INT ? width.u.i : width.u.b;
        if (k > 4096) jinja_rt_fail(rt, "indent: width %lld is larger than celer allows (4096)", (long long)k);
        jbuf sp = {0};
        for (int64_t i = 0; i < k; i++) jbuf_putc(rt, &sp, ' ');
        if (sp.p) ind = jv_str_buf(rt, &sp);
    } else {
        jinja_rt_fail(rt, "indent: width must be an int or a string");
    }
    jbuf        out = {0};
    const char *p   = s.u.s.p;
    size_t      n   = s.u.s.n, st = 0;
    bool        is_first = true;
    for (;;) {
        size_t e = st, nl = 0;
        while (e < n && !(nl = line_break(p, n, e))) e++;
        /* the line p[st..e) ends at a break, or at the "\n" the quirk appends (e == n) */
        bool empty = e == st;
        if (!is_first) jbuf_putc(rt, &out, '\n');
        if (is_first ? first : (blank || !empty)) jbuf_put(rt, &out, ind.u.s.p, ind.u.s.n);
        jbuf_put(rt, &out, p + st, e - st);
        is_first = false;
        if (e == n) break;
        st = e + nl;
        if (st == n && p[n - 1] == '\r') break; /* "\r" + the appended "\n" is one break */
    }
    return out.p ? jv_str_buf(rt, &out) : jv_strn("", 0);
}

static jv attr_path(jinja_rt *rt, jv obj, jv attr)
{
    /* jinja2's make_attrgetter: "a.b" walks, digits index */
    if (attr.t == JV_INT) {
        jv m;
        if (obj.t == JV_LIST && attr.u.i >= 0 && (size_t)attr.u.i < obj.u.l->n) return obj.u.l->v[attr.u.i];
        (void)m;
        return jv_undef(NULL);
    }
    jv          cur = obj;
    const char *p = attr.u.s.p, *end = p + attr.u.s.n;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        if (!dot) dot = end;
        if (cur.t == JV_UNDEF) jinja_rt_fail(rt, "attribute lookup on an undefined value");
        bool   digits = dot > p;
        size_t idx    = 0;
        for (const char *q = p; q < dot; q++) digits = digits && *q >= '0' && *q <= '9', idx = idx * 10 + (size_t)(*q - '0');
        if (digits && cur.t == JV_LIST) cur = idx < cur.u.l->n ? cur.u.l->v[idx] : jv_undef(NULL);
        else if (cur.t == JV_DICT || cur.t == JV_NS) {
            const jv *v = jv_dict_gets(cur.u.d, p, (size_t)(dot - p));
            jv        m;
            if (jinja_method(rt, cur, p, (size_t)(dot - p), &m)) cur = m;
            else cur = v ? *v : jv_undef(NULL);
        } else {
            jv m;
            cur = jinja_method(rt, cur, p, (size_t)(dot - p), &m) ? m : jv_undef(NULL);
        }
        p = dot + 1;
    }
    return cur;
}

/* select/reject/selectattr/rejectattr */
static jv f_select(jinja_rt *rt, jv v, const jargs *a, bool attr, bool keep)
{
    jlist *items = jinja_iter(rt, v);
    size_t off   = 0;
    jv     key   = jv_none();
    if (attr) {
        if (a->n < 1) jinja_rt_fail(rt, "selectattr/rejectattr need an attribute name");
        key = a->args[0], off = 1;
    }
    const char *test = NULL;
    size_t      tn   = 0;
    if (a->n > off) {
        if (a->args[off].t != JV_STR) jinja_rt_fail(rt, "select: the test name must be a string");
        test = a->args[off].u.s.p, tn = a->args[off].u.s.n, off++;
    }
    jargs targs = {.args = a->args + off, .n = a->n > off ? a->n - off : 0, .kw_names = a->kw_names, .kw_vals = a->kw_vals, .n_kw = a->n_kw};
    jv out = jv_list_new(rt, 0);
    for (size_t i = 0; i < items->n; i++) {
        jv   x = attr ? attr_path(rt, items->v[i], key) : items->v[i];
        bool r;
        if (!test) r = jv_truthy(x);
        else if (!jinja_test(rt, test, tn, x, &targs, &r)) jinja_rt_fail(rt, "no test named '%.*s'", (int)tn, test);
        if (r == keep) jv_list_push(rt, out.u.l, items->v[i]);
    }
    return out;
}

static jv f_map(jinja_rt *rt, jv v, const jargs *a)
{
    jlist *items = jinja_iter(rt, v);
    jv     out   = jv_list_new(rt, items->n);
    jv     at    = jargs_get(a, SIZE_MAX, "attribute", jv_undef(NULL));
    if (at.t != JV_UNDEF) {
        jv dflt = jargs_get(a, SIZE_MAX, "default", jv_undef(NULL));
        for (size_t i = 0; i < items->n; i++) {
            jv x = attr_path(rt, items->v[i], at);
            jv_list_push(rt, out.u.l, x.t == JV_UNDEF && dflt.t != JV_UNDEF ? dflt : x);
        }
        return out;
    }
    if (a->n < 1 || a->args[0].t != JV_STR) jinja_rt_fail(rt, "map needs a filter name or attribute=");
    jargs fa = {.args = a->args + 1, .n = a->n - 1, .kw_names = a->kw_names, .kw_vals = a->kw_vals, .n_kw = a->n_kw};
    for (size_t i = 0; i < items->n; i++) {
        jv x;
        if (!jinja_filter(rt, a->args[0].u.s.p, a->args[0].u.s.n, items->v[i], &fa, &x))
            jinja_rt_fail(rt, "no filter named '%.*s'", (int)a->args[0].u.s.n, a->args[0].u.s.p);
        jv_list_push(rt, out.u.l, x);
    }
    return out;
}

typedef struct {
    jinja_rt *rt;
    bool      case_sensitive;
    jv        attr;
} sort_ctx;

static jv sort_key(jinja_rt *rt, jv x, const sort_ctx *c)
{
    if (c->attr.t != JV_UNDEF) x = attr_path(rt, x, c->attr);
    if (!c->case_sensitive && x.t == JV_STR) x = jinja_str_case(rt, x, 'l');
    return x;
}

static jv f_sort(jinja_rt *rt, jv v, const jargs *a, bool unique)
{
    jlist   *items = jinja_iter(rt, v);
    sort_ctx c     = {.rt = rt};
    bool     rev   = false;
    if (unique) {
        c.case_sensitive = jv_truthy(jargs_get(a, 0, "case_sensitive", jv_bool(false)));
        c.attr           = jargs_get(a, 1, "attribute", jv_undef(NULL));
    } else {
        rev              = jv_truthy(jargs_get(a, 0, "reverse", jv_bool(false)));
        c.case_sensitive = jv_truthy(jargs_get(a, 1, "case_sensitive", jv_bool(false)));
        c.attr           = jargs_get(a, 2, "attribute", jv_undef(NULL));
    }
    jv  out  = jv_list_new(rt, items->n);
    jv *keys = jinja_alloc(&rt->arena, rt->f, (items->n + 1) * sizeof *keys);
    for (size_t i = 0; i < items->n; i++) keys[i] = sort_key(rt, items->v[i], &c);
    if (unique) {
        for (size_t i = 0; i < items->n; i++) {
            bool seen = false;
            for (size_t j = 0; j < i && !seen; j++) seen = jv_equal(keys[j], keys[i]);
            if (!seen) jv_list_push(rt, out.u.l, items->v[i]);
        }
        return out;
    }
    /* stable insertion sort (lists in templates are short) */
    size_t *idx = jinja_alloc(&rt->arena, rt->f, (items->n + 1) * sizeof *idx);
    for (size_t i = 0; i < items->n; i++) {
        size_t j = i;
        while (j > 0) {
            int d = jv_compare(rt, keys[idx[j - 1]], keys[i]);
            if (rev ? d >= 0 : d <= 0) break;
            idx[j] = idx[j - 1], j--;
        }
        idx[j] = i;
    }
    for (size_t i = 0; i < items->n; i++) jv_list_push(rt, out.u.l, items->v[idx[i]]);
    return out;
}

static jv f_join(jinja_rt *rt, jv v, const jargs *a)
{
    jv     sep  = jv_to_str(rt, jargs_get(a, 0, "d", jv_strn("", 0)));
    jv     at   = jargs_get(a, 1, "attribute", jv_undef(NULL));
    jlist *items = jinja_iter(rt, v);
    jbuf   b    = {0};
    for (size_t i = 0; i < items->n; i++) {
        if (i) jbuf_put(rt, &b, sep.u.s.p, sep.u.s.n);
        jv_write_str(rt, &b, at.t != JV_UNDEF ? attr_path(rt, items->v[i], at) : items->v[i]);
    }
    return b.p ? jv_str_buf(rt, &b) : jv_strn("", 0);
}

static jv f_int(jinja_rt *rt, jv v, const jargs *a)
{
    jv dflt = jargs_get(a, 0, "default", jv_int(0));
    switch (v.t) {
    case JV_INT: return v;
    case JV_BOOL: return jv_int(v.u.b);
    case JV_FLOAT:
        if (!isfinite(v.u.f) || fabs(v.u.f) >= 9.2e18) return dflt;
        return jv_int((int64_t)v.u.f);
    case JV_STR: {
        char buf[128];
        jv   t = jinja_str_strip(v, NULL, 'b');
        if (t.u.s.n == 0 || t.u.s.n >= sizeof buf) return dflt;
        size_t k = 0;
        for (size_t i = 0; i < t.u.s.n; i++)
            if (t.u.s.p[i] != '_') buf[k++] = t.u.s.p[i];
        buf[k] = 0;
        char     *e;
        long long x = strtoll(buf, &e, 10);
        if (!*e) return jv_int(x);
        double d = strtod(buf, &e);
        if (!*e && isfinite(d) && fabs(d) < 9.2e18) return jv_int((int64_t)d);
        return dflt;
    }
    default: (void)rt; return dflt;
    }
}

static jv f_float(jinja_rt *rt, jv v, const jargs *a)
{
    (void)rt;
    jv dflt = jargs_get(a, 0, "default", jv_float(0.0));
    if (jv_is_num(v)) return jv_float(jv_num(v));
    if (v.t == JV_STR) {
        char buf[128];
        jv   t = jinja_str_strip(v, NULL, 'b');
        if (!t.u.s.n || t.u.s.n >= sizeof buf) return dflt;
        memcpy(buf, t.u.s.p, t.u.s.n);
        buf[t.u.s.n] = 0;
        char  *e;
        double d = strtod(buf, &e);
        if (!*e) return jv_float(d);
    }
    return dflt;
}

static jv first_last(jinja_rt *rt, jv v, bool last)
{
    if (v.t == JV_DICT && last) jinja_rt_fail(rt, "'dict' object is not reversible");
    jlist *l = jinja_iter(rt, v);
    if (!l->n) return jv_undef(NULL);
    return l->v[last ? l->n - 1 : 0];
}

bool jinja_filter(jinja_rt *rt, const char *name, size_t nn, jv v, const jargs *a, jv *out)
{
#define IS(lit) name_is(name, nn, lit)
    if (IS("default") || IS("d")) {
        bool boolean = jv_truthy(jargs_get(a, 1, "boolean", jv_bool(false)));
        *out = (v.t == JV_UNDEF || (boolean && !jv_truthy(v))) ? jargs_get(a, 0, "default_value", jv_strn("", 0)) : v;
    } else if (IS("length") || IS("count")) {
        if (v.t == JV_STR) *out = jv_int((int64_t)jv_str_len(v));
        else if (v.t == JV_LIST) *out = jv_int((int64_t)v.u.l->n);
        else if (v.t == JV_DICT || v.t == JV_NS) *out = jv_int((int64_t)v.u.d->n);
        else if (v.t == JV_UNDEF) *out = jv_int(0);
        else jinja_rt_fail(rt, "object of type '%s' has no len()", jv_type_name(v));
    } else if (IS("tojson")) {
        *out = f_tojson(rt, v, a);
    } else if (IS("trim")) {
        jv chars = jargs_get(a, 0, "chars", jv_none());
        *out     = jinja_str_strip(jv_to_str(rt, v), chars.t == JV_STR ? &chars : NULL, 'b');
    } else if (IS("upper") || IS("lower") || IS("capitalize") || IS("title")) {
        *out = jinja_str_case(rt, jv_to_str(rt, v), IS("upper") ? 'u' : IS("lower") ? 'l' : IS("capitalize") ? 'c' : 'j');
        if (IS("capitalize")) { /* first upper, rest lower */
            jv low = jinja_str_case(rt, jv_to_str(rt, v), 'l');
            *out   = jinja_str_case(rt, low, 'c');
        }
    } else if (IS("replace")) {
        jv s = jv_to_str(rt, v);
        jv o = jv_to_str(rt, jargs_get(a, 0, "old", jv_strn("", 0)));
        jv n = jv_to_str(rt, jargs_get(a, 1, "new", jv_strn("", 0)));
        jv c = jargs_get(a, 2, "count", jv_none());
        *out = jinja_str_replace(rt, s, o, n, c.t == JV_INT ? c.u.i : -1);
    } else if (IS("join")) {
        *out = f_join(rt, v, a);
    } else if (IS("items")) {
        if (v.t == JV_UNDEF) *out = jv_list_new(rt, 0);
        else if (v.t != JV_DICT && v.t != JV_NS) jinja_rt_fail(rt, "items: can only get item pairs from a mapping");
        else {
            *out = jv_list_new(rt, v.u.d->n);
            for (size_t i = 0; i < v.u.d->n; i++) {
                jv t = jv_list_new(rt, 2);
                t.flags = JV_TUPLE;
                jv_list_push(rt, t.u.l, v.u.d->k[i]);
                jv_list_push(rt, t.u.l, v.u.d->v[i]);
                jv_list_push(rt, out->u.l, t);
            }
        }
    } else if (IS("first") || IS("last")) {
        *out = first_last(rt, v, IS("last"));
    } else if (IS("string")) {
        *out = jv_to_str(rt, v);
    } else if (IS("int")) {
        *out = f_int(rt, v, a);
    } else if (IS("float")) {
        *out = f_float(rt, v, a);
    } else if (IS("list")) {
        jlist *l = jinja_iter(rt, v);
        *out     = jv_list_new(rt, l->n);
        for (size_t i = 0; i < l->n; i++) jv_list_push(rt, out->u.l, l->v[i]);
    } else if (IS("map")) {
        *out = f_map(rt, v, a);
    } else if (IS("select") || IS("reject")) {
        *out = f_select(rt, v, a, false, IS("select"));
    } else if (IS("selectattr") || IS("rejectattr")) {
        *out = f_select(rt, v, a, true, IS("selectattr"));
    } else if (IS("indent")) {
        *out = f_indent(rt, v, a);
    } else if (IS("safe")) {
        *out = v.t == JV_STR ? v : jv_to_str(rt, v);
    } else if (IS("unique")) {
        *out = f_sort(rt, v, a, true);
    } else if (IS("sort")) {
        *out = f_sort(rt, v, a, false);
    } else if (IS("reverse")) {
        if (v.t == JV_STR) {
            jlist *l = jinja_iter(rt, v);
            jbuf   b = {0};
            for (size_t i = l->n; i-- > 0;) jbuf_put(rt, &b, l->v[i].u.s.p, l->v[i].u.s.n);
            *out = b.p ? jv_str_buf(rt, &b) : jv_strn("", 0);
        } else {
            jlist *l = jinja_iter(rt, v);
            *out     = jv_list_new(rt, l->n);
            for (size_t i = l->n; i-- > 0;) jv_list_push(rt, out->u.l, l->v[i]);
        }
    } else if (IS("abs")) {
        if (v.t == JV_INT) {
            if (v.u.i == INT64_MIN) jinja_rt_fail(rt, "integer overflow in abs");
            *out = jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
        } else if (v.t == JV_FLOAT) *out = jv_float(fabs(v.u.f));
        else if (v.t == JV_BOOL) *out = jv_int(v.u.b);
        else jinja_rt_fail(rt, "bad operand type for abs(): '%s'", jv_type_name(v));
    } else if (IS("round")) {
        jv     pr = jargs_get(a, 0, "precision", jv_int(0));
        jv     me = jargs_get(a, 1, "method", jv_strn("common", 6));
        if (!jv_is_num(v)) jinja_rt_fail(rt, "round: expected a number");
        double m  = pow(10, (double)(pr.t == JV_INT ? pr.u.i : 0)), x = jv_num(v) * m;
        double r  = me.t == JV_STR && me.u.s.n == 4 && !memcmp(me.u.s.p, "ceil", 4) ? ceil(x)
                  : me.t == JV_STR && me.u.s.n == 5 && !memcmp(me.u.s.p, "floor", 5) ? floor(x) : round(x);
        *out = jv_float(r / m);
    } else if (IS("sum")) {
        jlist *l   = jinja_iter(rt, v);
        jv     at  = jargs_get(a, 0, "attribute", jv_undef(NULL));
        jv     acc = jargs_get(a, 1, "start", jv_int(0));
        for (size_t i = 0; i < l->n; i++) {
            jv x = at.t != JV_UNDEF ? attr_path(rt, l->v[i], at) : l->v[i];
            if (!jv_is_num(acc) || !jv_is_num(x)) jinja_rt_fail(rt, "sum: items must be numbers");
            acc = acc.t == JV_FLOAT || x.t == JV_FLOAT ? jv_float(jv_num(acc) + jv_num(x)) : jv_int((int64_t)jv_num(acc) + (int64_t)jv_num(x));
        }
        *out = acc;
    } else if (IS("min") || IS("max")) {
        jlist *l = jinja_iter(rt, v);
        if (!l->n) *out = jv_undef(NULL);
        else {
            jv best = l->v[0];
            for (size_t i = 1; i < l->n; i++) {
                int d = jv_compare(rt, l->v[i], best);
                if (IS("min") ? d < 0 : d > 0) best = l->v[i];
            }
            *out = best;
        }
    } else if (IS("attr")) {
        jv nm = jargs_get(a, 0, "name", jv_undef(NULL));
        *out  = nm.t == JV_STR ? attr_path(rt, v, nm) : jv_undef(NULL);
    } else if (IS("escape") || IS("e")) {
        jv   s = jv_to_str(rt, v);
        jbuf b = {0};
        for (size_t i = 0; i < s.u.s.n; i++) {
            char c = s.u.s.p[i];
            if (c == '&') jbuf_put(rt, &b, "&amp;", 5);
            else if (c == '<') jbuf_put(rt, &b, "&lt;", 4);
            else if (c == '>') jbuf_put(rt, &b, "&gt;", 4);
            else if (c == '"') jbuf_put(rt, &b, "&#34;", 5);
            else if (c == '\'') jbuf_put(rt, &b, "&#39;", 5);
            else jbuf_putc(rt, &b, c);
        }
        *out = b.p ? jv_str_buf(rt, &b) : jv_strn("", 0);
    } else {
        return false;
    }
    return true;
#undef IS
}

/* ---- tests ------------------------------------------------------------------------------------ */

bool jinja_test(jinja_rt *rt, const char *name, size_t nn, jv v, const jargs *a, bool *out)
{
#define IS(lit) name_is(name, nn, lit)
    jv arg = a && a->n ? a->args[0] : jv_undef(NULL);
    if (IS("defined")) *out = v.t != JV_UNDEF;
    else if (IS("undefined")) *out = v.t == JV_UNDEF;
    else if (IS("none")) *out = v.t == JV_NONE;
    else if (IS("string")) *out = v.t == JV_STR;
    else if (IS("number")) *out = jv_is_num(v);
    else if (IS("integer")) *out = v.t == JV_INT;
    else if (IS("float")) *out = v.t == JV_FLOAT;
    else if (IS("boolean")) *out = v.t == JV_BOOL;
    else if (IS("true")) *out = v.t == JV_BOOL && v.u.b;
    else if (IS("false")) *out = v.t == JV_BOOL && !v.u.b;
    else if (IS("mapping")) *out = v.t == JV_DICT;
    else if (IS("iterable")) *out = v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT || v.t == JV_UNDEF || v.t == JV_NS;
    else if (IS("sequence")) *out = v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT;
    else if (IS("callable")) *out = v.t == JV_MACRO || v.t == JV_FUNC;
    else if (IS("odd") || IS("even")) {
        if (v.t != JV_INT && v.t != JV_BOOL) jinja_rt_fail(rt, "the odd/even test needs an integer, got %s", jv_type_name(v));
        int64_t i = v.t == JV_INT ? v.u.i : v.u.b;
        *out      = ((i % 2) != 0) == IS("odd");
    } else if (IS("divisibleby")) {
        if (!jv_is_num(v) || !jv_is_num(arg)) jinja_rt_fail(rt, "divisibleby needs numbers");
        if (jv_num(arg) == 0) jinja_rt_fail(rt, "divisibleby 0");
        *out = v.t != JV_FLOAT && arg.t != JV_FLOAT ? (v.u.i % arg.u.i) == 0 : fmod(jv_num(v), jv_num(arg)) == 0;
    } else if (IS("eq") || IS("equalto") || IS("==")) *out = jv_equal(v, arg);
    else if (IS("ne") || IS("!=")) *out = !jv_equal(v, arg);
    else if (IS("lt") || IS("lessthan") || IS("<")) *out = jv_compare(rt, v, arg) < 0;
    else if (IS("le") || IS("<=")) *out = jv_compare(rt, v, arg) <= 0;
    else if (IS("gt") || IS("greaterthan") || IS(">")) *out = jv_compare(rt, v, arg) > 0;
    else if (IS("ge") || IS(">=")) *out = jv_compare(rt, v, arg) >= 0;
    else if (IS("in")) {
        jlist *l = NULL;
        if (arg.t == JV_STR) {
            if (v.t != JV_STR) jinja_rt_fail(rt, "'in <string>' requires string as left operand");
            *out = false;
            for (size_t i = 0; i + v.u.s.n <= arg.u.s.n && !*out; i++) *out = !memcmp(arg.u.s.p + i, v.u.s.p, v.u.s.n);
        } else if (arg.t == JV_DICT) {
            *out = jv_dict_get(arg.u.d, v) != NULL;
        } else {
            l    = jinja_iter(rt, arg);
            *out = false;
            for (size_t i = 0; i < l->n && !*out; i++) *out = jv_equal(l->v[i], v);
        }
    } else if (IS("sameas")) {
        *out = v.t == arg.t && (v.t == JV_NONE || v.t == JV_UNDEF || (v.t == JV_BOOL && v.u.b == arg.u.b) ||
                                ((v.t == JV_LIST || v.t == JV_DICT || v.t == JV_NS) && v.u.l == arg.u.l));
    } else if (IS("lower") || IS("upper")) {
        jv   s = jv_to_str(rt, v);
        bool cased = false, ok = true;
        for (size_t i = 0; i < s.u.s.n;) {
            uint32_t cp;
            i += celer_utf8_decode(s.u.s.p + i, s.u.s.n - i, &cp);
            if (is_cased_upper(cp)) cased = true, ok = ok && IS("upper");
            if (is_cased_lower(cp)) cased = true, ok = ok && IS("lower");
        }
        *out = cased && ok;
    } else if (IS("escaped")) *out = false;
    else return false;
    return true;
#undef IS
}
