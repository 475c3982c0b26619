/* Methods the sandbox lets templates call on values (str, dict, list: the non-mutating ones;
 * jinja2's ImmutableSandboxedEnvironment refuses append/update/pop, and so does celer, by not
 * having them), the fields of `loop`, and the globals transformers' environment defines:
 * range, namespace, dict, raise_exception, strftime_now. */
#include "chat/jinja.h"
#include "core/utf8.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

jv jinja_str_case(jinja_rt *rt, jv s, char mode);
jv jinja_str_strip(jv s, const jv *chars, char which);
jv jinja_str_replace(jinja_rt *rt, jv s, jv old, jv new_, int64_t count);

static bool eq(const char *name, size_t n, const char *lit) { return strlen(lit) == n && !memcmp(name, lit, n); }

static jv arg_str(jinja_rt *rt, const jargs *a, size_t i, const char *name, const char *fn)
{
    jv v = jargs_get(a, i, name, jv_undef(NULL));
    if (v.t != JV_STR) jinja_rt_fail(rt, "%s: argument %zu must be a string, got %s", fn, i + 1, jv_type_name(v));
    return v;
}

static int64_t arg_int(jinja_rt *rt, const jargs *a, size_t i, const char *name, int64_t dflt, const char *fn)
{
    jv v = jargs_get(a, i, name, jv_none());
    if (v.t == JV_NONE) return dflt;
    if (v.t == JV_INT) return v.u.i;
    if (v.t == JV_BOOL) return v.u.b;
    jinja_rt_fail(rt, "%s: argument %zu must be an integer, got %s", fn, i + 1, jv_type_name(v));
}

static const char *find_sub(const char *h, size_t hn, const char *nd, size_t nn)
{
    if (!nn) return h;
    for (size_t i = 0; i + nn <= hn; i++)
        if (!memcmp(h + i, nd, nn)) return h + i;
    return NULL;
}

static jv str_split(jinja_rt *rt, jv s, const jargs *a)
{
    jv      sep = jargs_get(a, 0, "sep", jv_none());
    int64_t max = arg_int(rt, a, 1, "maxsplit", -1, "split");
    jv      out = jv_list_new(rt, 0);
    const char *p = s.u.s.p;
    size_t      n = s.u.s.n, i = 0;
    if (sep.t == JV_NONE) { /* runs of whitespace; no empty strings */
        int64_t done = 0;
        while (i < n) {
            uint32_t cp;
            size_t   k;
            while (i < n && (k = celer_utf8_decode(p + i, n - i, &cp)) && jinja_py_space(cp)) i += k;
            if (i >= n) break;
            if (max >= 0 && done >= max) {
                jv rest = jinja_str_strip(jv_strn(p + i, n - i), NULL, 'r');
                jv_list_push(rt, out.u.l, rest);
                break;
            }
            size_t st = i;
            while (i < n && (k = celer_utf8_decode(p + i, n - i, &cp)) && !jinja_py_space(cp)) i += k;
            jv_list_push(rt, out.u.l, jv_strn(p + st, i - st));
            done++;
        }
        return out;
    }
    if (sep.t != JV_STR) jinja_rt_fail(rt, "split: the separator must be a string or None");
    if (!sep.u.s.n) jinja_rt_fail(rt, "split: empty separator");
    int64_t done = 0;
    for (;;) {
        const char *hit = (max < 0 || done < max) ? find_sub(p + i, n - i, sep.u.s.p, sep.u.s.n) : NULL;
        if (!hit) {
            jv_list_push(rt, out.u.l, jv_strn(p + i, n - i));
            return out;
        }
        jv_list_push(rt, out.u.l, jv_strn(p + i, (size_t)(hit - (p + i))));
        i = (size_t)(hit - p) + sep.u.s.n;
        done++;
    }
}

static bool affix(jv s, jv x, bool start)
{
    if (x.u.s.n > s.u.s.n) return false;
    return !memcmp(start ? s.u.s.p : s.u.s.p + s.u.s.n - x.u.s.n, x.u.s.p, x.u.s.n);
}

static jv str_affix(jinja_rt *rt, jv s, const jargs *a, bool start)
{
    jv x = jargs_get(a, 0, NULL, jv_undef(NULL));
    if (x.t == JV_STR) return jv_bool(affix(s, x, start));
    if (x.t == JV_LIST && (x.flags & JV_TUPLE)) {
        for (size_t i = 0; i < x.u.l->n; i++) {
            if (x.u.l->v[i].t != JV_STR) jinja_rt_fail(rt, "startswith/endswith: tuple items must be strings");
            if (affix(s, x.u.l->v[i], start)) return jv_bool(true);
        }
        return jv_bool(false);
    }
    jinja_rt_fail(rt, "%s first arg must be str or a tuple of str, not %s", start ? "startswith" : "endswith", jv_type_name(x));
}

/* str.format with {} / {0} / {name} fields (no format specs or conversions). */
static jv str_format(jinja_rt *rt, jv s, const jargs *a)
{
    jbuf   b    = {0};
    size_t auto_i = 0;
    for (size_t i = 0; i < s.u.s.n; i++) {
        char c = s.u.s.p[i];
        if ((c == '{' || c == '}') && i + 1 < s.u.s.n && s.u.s.p[i + 1] == c) {
            jbuf_putc(rt, &b, c), i++;
            continue;
        }
        if (c == '}') jinja_rt_fail(rt, "format: single '}' encountered in format string");
        if (c != '{') {
            jbuf_putc(rt, &b, c);
            continue;
        }
        const char *e = memchr(s.u.s.p + i, '}', s.u.s.n - i);
        if (!e) jinja_rt_fail(rt, "format: single '{' encountered in format string");
        const char *f = s.u.s.p + i + 1;
        size_t      fn = (size_t)(e - f);
        if (memchr(f, ':', fn) || memchr(f, '!', fn) || memchr(f, '.', fn) || memchr(f, '[', fn))
            jinja_rt_fail(rt, "format: conversions, specs and field paths are not supported by celer");
        jv v;
        if (!fn) v = auto_i < a->n ? a->args[auto_i++] : jv_undef(NULL);
        else if (f[0] >= '0' && f[0] <= '9') {
            size_t k = 0;
            for (size_t j = 0; j < fn; j++) k = k * 10 + (size_t)(f[j] - '0');
            v = k < a->n ? a->args[k] : jv_undef(NULL);
        } else {
            v = jv_undef(NULL);
            for (size_t k = 0; k < a->n_kw; k++)
                if (strlen(a->kw_names[k]) == fn && !memcmp(a->kw_names[k], f, fn)) v = a->kw_vals[k];
        }
        if (v.t == JV_UNDEF) jinja_rt_fail(rt, "format: replacement field {%.*s} has no argument", (int)fn, f);
        jv_write_str(rt, &b, v);
        i = (size_t)(e - s.u.s.p);
    }
    return b.p ? jv_str_buf(rt, &b) : jv_strn("", 0);
}

static jv str_method(jinja_rt *rt, const jfunc *fn, const jargs *a)
{
    jv          s  = fn->self;
    const char *nm = fn->name;
    size_t      nn = strlen(nm);
    if (eq(nm, nn, "strip") || eq(nm, nn, "lstrip") || eq(nm, nn, "rstrip")) {
        jv chars = jargs_get(a, 0, "chars", jv_none());
        if (chars.t != JV_NONE && chars.t != JV_STR) jinja_rt_fail(rt, "%s arg must be None or str", nm);
        return jinja_str_strip(s, chars.t == JV_STR ? &chars : NULL, nm[0] == 's' ? 'b' : nm[0]);
    }
    if (eq(nm, nn, "split")) return str_split(rt, s, a);
    if (eq(nm, nn, "startswith")) return str_affix(rt, s, a, true);
    if (eq(nm, nn, "endswith")) return str_affix(rt, s, a, false);
    if (eq(nm, nn, "replace")) {
        jv o = arg_str(rt, a, 0, NULL, "replace"), n = arg_str(rt, a, 1, NULL, "replace");
        return jinja_str_replace(rt, s, o, n, arg_int(rt, a, 2, "count", -1, "replace"));
    }
    if (eq(nm, nn, "lower")) return jinja_str_case(rt, s, 'l');
    if (eq(nm, nn, "upper")) return jinja_str_case(rt, s, 'u');
    if (eq(nm, nn, "title")) return jinja_str_case(rt, s, 't');
    if (eq(nm, nn, "capitalize")) return jinja_str_case(rt, jinja_str_case(rt, s, 'l'), 'c');
    if (eq(nm, nn, "find") || eq(nm, nn, "rfind") || eq(nm, nn, "count")) {
        jv sub = arg_str(rt, a, 0, NULL, nm);
        if (nm[0] == 'c') {
            if (!sub.u.s.n) return jv_int((int64_t)jv_str_len(s) + 1);
            int64_t k = 0;
            for (size_t i = 0; i + sub.u.s.n <= s.u.s.n;)
                if (!memcmp(s.u.s.p + i, sub.u.s.p, sub.u.s.n)) k++, i += sub.u.s.n;
                else i++;
            return jv_int(k);
        }
        int64_t at = -1;
        for (size_t i = 0; i + sub.u.s.n <= s.u.s.n; i++)
            if (!memcmp(s.u.s.p + i, sub.u.s.p, sub.u.s.n)) {
                at = (int64_t)i;
                if (nm[0] == 'f') break;
            }
        if (at < 0) return jv_int(-1);
        return jv_int((int64_t)jv_str_len(jv_strn(s.u.s.p, (size_t)at))); /* code point index */
    }
    if (eq(nm, nn, "format")) return str_format(rt, s, a);
    if (eq(nm, nn, "join")) {
        jlist *l = jinja_iter(rt, jargs_get(a, 0, NULL, jv_undef(NULL)));
        jbuf   b = {0};
        for (size_t i = 0; i < l->n; i++) {
            if (l->v[i].t != JV_STR) jinja_rt_fail(rt, "join: sequence item %zu: expected str instance, %s found", i, jv_type_name(l->v[i]));
            if (i) jbuf_put(rt, &b, s.u.s.p, s.u.s.n);
            jbuf_put(rt, &b, l->v[i].u.s.p, l->v[i].u.s.n);
        }
        return b.p ? jv_str_buf(rt, &b) : jv_strn("", 0);
    }
    if (eq(nm, nn, "splitlines")) {
        jv     out = jv_list_new(rt, 0);
        size_t st  = 0;
        for (size_t i = 0; i < s.u.s.n; i++) {
            char c = s.u.s.p[i];
            if (c == '\n' || c == '\r') {
                jv_list_push(rt, out.u.l, jv_strn(s.u.s.p + st, i - st));
                if (c == '\r' && i + 1 < s.u.s.n && s.u.s.p[i + 1] == '\n') i++;
                st = i + 1;
            }
        }
        if (st < s.u.s.n) jv_list_push(rt, out.u.l, jv_strn(s.u.s.p + st, s.u.s.n - st));
        return out;
    }
    if (eq(nm, nn, "isdigit") || eq(nm, nn, "isalpha") || eq(nm, nn, "isspace") || eq(nm, nn, "isalnum")) {
        if (!s.u.s.n) return jv_bool(false);
        for (size_t i = 0; i < s.u.s.n;) {
            uint32_t cp;
            i += celer_utf8_decode(s.u.s.p + i, s.u.s.n - i, &cp);
            bool dig = cp >= '0' && cp <= '9', alpha = (cp | 32) >= 'a' && (cp | 32) <= 'z';
            bool ok  = nm[2] == 'd' ? dig : nm[3] == 'p' ? alpha : nm[3] == 'l' ? (alpha || dig) : jinja_py_space(cp);
            if (!ok) return jv_bool(false);
        }
        return jv_bool(true);
    }
    jinja_rt_fail(rt, "str.%s is not supported by celer", nm);
}

static jv dict_method(jinja_rt *rt, const jfunc *fn, const jargs *a)
{
    jdict      *d  = fn->self.u.d;
    const char *nm = fn->name;
    if (!strcmp(nm, "get")) {
        if (a->n < 1) jinja_rt_fail(rt, "get expected at least 1 argument, got 0");
        const jv *v = jv_dict_get(d, a->args[0]);
        return v ? *v : a->n > 1 ? a->args[1] : jv_none();
    }
    jv out = jv_list_new(rt, d->n);
    for (size_t i = 0; i < d->n; i++) {
        if (!strcmp(nm, "keys")) jv_list_push(rt, out.u.l, d->k[i]);
        else if (!strcmp(nm, "values")) jv_list_push(rt, out.u.l, d->v[i]);
        else {
            jv t = jv_list_new(rt, 2);
            t.flags = JV_TUPLE;
            jv_list_push(rt, t.u.l, d->k[i]);
            jv_list_push(rt, t.u.l, d->v[i]);
            jv_list_push(rt, out.u.l, t);
        }
    }
    return out;
}

static jv list_method(jinja_rt *rt, const jfunc *fn, const jargs *a)
{
    jlist *l = fn->self.u.l;
    jv     x = jargs_get(a, 0, NULL, jv_undef(NULL));
    if (!strcmp(fn->name, "count")) {
        int64_t k = 0;
        for (size_t i = 0; i < l->n; i++) k += jv_equal(l->v[i], x);
        return jv_int(k);
    }
    for (size_t i = 0; i < l->n; i++)
        if (jv_equal(l->v[i], x)) return jv_int((int64_t)i);
    jinja_rt_fail(rt, "list.index(x): x not in list");
}

static jv loop_cycle(jinja_rt *rt, const jfunc *fn, const jargs *a)
{
    if (!a->n) jinja_rt_fail(rt, "no items for cycling given");
    return a->args[fn->self.u.loop->index0 % (int64_t)a->n];
}

bool jinja_method(jinja_rt *rt, jv obj, const char *name, size_t n, jv *out)
{
    static const char *const str_names[] = {"strip", "lstrip", "rstrip", "split", "startswith", "endswith", "replace",
                                            "lower", "upper", "title", "capitalize", "find", "rfind", "count", "format",
                                            "join", "splitlines", "isdigit", "isalpha", "isspace", "isalnum", NULL};
    static const char *const dict_names[] = {"get", "items", "keys", "values", NULL};
    static const char *const list_names[] = {"count", "index", NULL};
    const char *const       *names = NULL;
    jfunc_impl               impl  = NULL;
    if (obj.t == JV_STR) names = str_names, impl = str_method;
    else if (obj.t == JV_DICT) names = dict_names, impl = dict_method;
    else if (obj.t == JV_LIST) names = list_names, impl = list_method;
    else if (obj.t == JV_LOOP) {
        const jloop *l = obj.u.loop;
        int64_t      i = l->index0, len = l->length;
        if (eq(name, n, "index")) *out = jv_int(i + 1);
        else if (eq(name, n, "index0")) *out = jv_int(i);
        else if (eq(name, n, "revindex")) *out = jv_int(len - i);
        else if (eq(name, n, "revindex0")) *out = jv_int(len - i - 1);
        else if (eq(name, n, "first")) *out = jv_bool(i == 0);
        else if (eq(name, n, "last")) *out = jv_bool(i == len - 1);
        else if (eq(name, n, "length")) *out = jv_int(len);
        else if (eq(name, n, "depth")) *out = jv_int(1);
        else if (eq(name, n, "depth0")) *out = jv_int(0);
        else if (eq(name, n, "previtem")) *out = i > 0 ? l->items->v[i - 1] : jv_undef("previtem");
        else if (eq(name, n, "nextitem")) *out = i + 1 < len ? l->items->v[i + 1] : jv_undef("nextitem");
        else if (eq(name, n, "cycle")) *out = jv_func(rt, "cycle", loop_cycle, obj);
        else return false;
        return true;
    }
    if (!names) return false;
    for (; *names; names++)
        if (eq(name, n, *names)) {
            *out = jv_func(rt, *names, impl, obj);
            return true;
        }
    return false;
}

/* ---- globals ---------------------------------------------------------------------------------- */

static jv g_range(jinja_rt *rt, const jfunc *fn, const jargs *a)
{
    (void)fn;
    if (a->n < 1 || a->n > 3 || a->n_kw) jinja_rt_fail(rt, "range expects 1 to 3 positional integer arguments");
    int64_t v[3] = {0, 0, 1};
    for (size_t i = 0; i < a->n; i++) v[i] = arg_int(rt, a, i, NULL, 0, "range");
    int64_t start = a->n == 1 ? 0 : v[0], stop = a->n == 1 ? v[0] : v[1], step = a->n == 3 ? v[2] : 1;
    if (step == 0) jinja_rt_fail(rt, "range() arg 3 must not be zero");
    double count = step > 0 ? ((double)stop - (double)start) / (double)step : ((double)start - (double)stop) / (double)-step;
    if (count > JINJA_MAX_RANGE) jinja_rt_fail(rt, "range too big: more than %d items (the sandbox's limit)", JINJA_MAX_RANGE);
    jv out = jv_list_new(rt, 0);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) jv_list_push(rt, out.u.l, jv_int(i));
    return out;
}

static jv dict_from_args(jinja_rt *rt, const jargs *a, const char *what, bool ns)
{
    jv d = jv_dict_new(rt);
    if (ns) d.t = JV_NS;
    if (a->n > 1) jinja_rt_fail(rt, "%s expected at most 1 positional argument", what);
    if (a->n == 1) {
        jv src = a->args[0];
        if (src.t == JV_DICT || src.t == JV_NS) {
            for (size_t i = 0; i < src.u.d->n; i++) jv_dict_set(rt, d.u.d, src.u.d->k[i], src.u.d->v[i]);
        } else {
            jlist *l = jinja_iter(rt, src);
            for (size_t i = 0; i < l->n; i++) {
                jlist *kv = jinja_iter(rt, l->v[i]);
                if (kv->n != 2) jinja_rt_fail(rt, "%s: sequence element %zu has length %zu; 2 is required", what, i, kv->n);
                jv_dict_set(rt, d.u.d, kv->v[0], kv->v[1]);
            }
        }
    }
    for (size_t k = 0; k < a->n_kw; k++) jv_dict_set(rt, d.u.d, jv_strn(a->kw_names[k], strlen(a->kw_names[k])), a->kw_vals[k]);
    if (ns)
        for (size_t i = 0; i < d.u.d->n; i++)
            if (d.u.d->k[i].t == JV_STR && d.u.d->k[i].u.s.n && d.u.d->k[i].u.s.p[0] == '_')
                jinja_rt_fail(rt, "chat templates cannot store underscore-prefixed attributes on a namespace");
    return d;
}

static jv g_namespace(jinja_rt *rt, const jfunc *fn, const jargs *a) { (void)fn; return dict_from_args(rt, a, "namespace", true); }
static jv g_dict(jinja_rt *rt, const jfunc *fn, const jargs *a) { (void)fn; return dict_from_args(rt, a, "dict", false); }

static jv g_raise(jinja_rt *rt, const jfunc *fn, const jargs *a)
{
    (void)fn;
    jv msg = jv_to_str(rt, jargs_get(a, 0, "message", jv_undef(NULL)));
    jinja_rt_fail(rt, "raise_exception: %.*s", (int)(msg.u.s.n > 300 ? 300 : msg.u.s.n), msg.u.s.p);
}

static jv g_strftime(jinja_rt *rt, const jfunc *fn, const jargs *a)
{
    (void)fn;
    jv fmt = arg_str(rt, a, 0, "format", "strftime_now");
    if (fmt.u.s.n > 200) jinja_rt_fail(rt, "strftime_now: format longer than 200 bytes");
    char f[208], out[1024];
    memcpy(f, fmt.u.s.p, fmt.u.s.n);
    f[fmt.u.s.n] = 0;
    time_t    t  = (time_t)rt->now;
    struct tm tm;
    if (!gmtime_r(&t, &tm)) jinja_rt_fail(rt, "strftime_now: the time is out of range");
    size_t n = fmt.u.s.n ? strftime(out, sizeof out, f, &tm) : 0;
    return jv_str_copy(rt, out, n);
}

bool jinja_global(jinja_rt *rt, const char *name, size_t n, jv *out)
{
    static const struct {
        const char *name;
        jfunc_impl  impl;
    } globals[] = {{"range", g_range},
                   {"namespace", g_namespace},
                   {"dict", g_dict},
                   {"raise_exception", g_raise},
                   {"strftime_now", g_strftime}};
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
        if (eq(name, n, globals[i].name)) {
            *out = jv_func(rt, globals[i].name, globals[i].impl, jv_none());
            return true;
        }
    return false;
}
