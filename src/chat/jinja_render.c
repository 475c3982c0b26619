/* The Jinja renderer: evaluates the AST with jinja2's semantics.
 *
 * Scopes follow jinja2: each for-loop iteration and each macro call gets a fresh frame, so a
 * {% set %} inside a loop is gone at the next iteration and after the loop (that is what
 * namespace() is for); if-blocks share the enclosing frame. Names resolve through the frames,
 * then the render variables, then the globals. Undefined is jinja2's default Undefined: falsy,
 * prints as "", iterates as empty, and raises on attribute access, subscript, arithmetic and
 * calls. */
#include "chat/jinja.h"

#include <math.h>
#include <string.h>

struct jmacro {
    const jnode *def;    /* N_MACRO */
    jframe      *scope;  /* the frame it was defined in */
    jv           caller; /* for the macro a {% call %} passes as `caller` */
};

static jv   eval(jinja_rt *rt, const jnode *x);
static void exec(jinja_rt *rt, jframe *fr, const jnode *x);

static jframe *frame_new(jinja_rt *rt, jframe *parent)
{
    jframe *f = jinja_alloc(&rt->arena, rt->f, sizeof *f);
    f->parent = parent;
    return f;
}

static void at(jinja_rt *rt, const jnode *x)
{
    rt->line = x->line, rt->col = x->col;
}

_Noreturn static void undefined_fail(jinja_rt *rt, jv u)
{
    if (u.u.s.n) jinja_rt_fail(rt, "'%.*s' is undefined", (int)u.u.s.n, u.u.s.p);
    jinja_rt_fail(rt, "a value is undefined");
}

/* The frame names resolve in: set by exec, restored after loops and macro calls. */
#define FRAME(rt) ((rt)->cur_frame)

static jv lookup(jinja_rt *rt, const char *name, size_t n)
{
    for (jframe *f = FRAME(rt); f; f = f->parent) {
        const jv *v = jv_dict_gets(&f->vars, name, n);
        if (v) return *v;
    }
    const jv *v = jv_dict_gets(rt->ctx, name, n);
    if (v) return *v;
    jv g;
    if (jinja_global(rt, name, n, &g)) return g;
    jv u = {.t = JV_UNDEF};
    u.u.s.p = name, u.u.s.n = n;
    return u;
}

static void assign(jinja_rt *rt, jframe *fr, const char *name, size_t n, jv v)
{
    jv_dict_set(rt, &fr->vars, jv_strn(name, n), v);
}

/* ---- attribute and item access --------------------------------------------------------------- */

static jv getattr_v(jinja_rt *rt, jv obj, const char *name, size_t n)
{
    if (obj.t == JV_UNDEF) undefined_fail(rt, obj);
    jv m;
    if (jinja_method(rt, obj, name, n, &m)) return m;
    if (obj.t == JV_DICT || obj.t == JV_NS) {
        const jv *v = jv_dict_gets(obj.u.d, name, n);
        if (v) return *v;
    }
    jv u = {.t = JV_UNDEF};
    u.u.s.p = name, u.u.s.n = n;
    return u;
}

static bool index_of(jinja_rt *rt, jv k, size_t len, size_t *out)
{
    (void)rt;
    if (k.t != JV_INT && k.t != JV_BOOL) return false;
    int64_t i = k.t == JV_INT ? k.u.i : k.u.b;
    if (i < 0) i += (int64_t)len;
    if (i < 0 || (uint64_t)i >= len) return false;
    *out = (size_t)i;
    return true;
}

static jv getitem_v(jinja_rt *rt, jv obj, jv k)
{
    size_t i;
    switch (obj.t) {
    case JV_UNDEF: undefined_fail(rt, obj);
    case JV_DICT:
    case JV_NS: {
        const jv *v = jv_dict_get(obj.u.d, k);
        if (v) return *v;
        break;
    }
    case JV_LIST:
        if (index_of(rt, k, obj.u.l->n, &i)) return obj.u.l->v[i];
        break;
    case JV_STR:
        if (index_of(rt, k, jv_str_len(obj), &i)) {
            size_t a = jv_utf8_offset(obj.u.s.p, obj.u.s.n, i), b = jv_utf8_offset(obj.u.s.p, obj.u.s.n, i + 1);
            return jv_strn(obj.u.s.p + a, b - a);
        }
        break;
    default: break;
    }
    if (k.t == JV_STR) return getattr_v(rt, obj, k.u.s.p, k.u.s.n);
    return jv_undef(NULL);
}

static int64_t slice_bound(jinja_rt *rt, const jnode *x, int64_t len, int64_t step, bool is_start)
{
    if (!x) return step > 0 ? (is_start ? 0 : len) : (is_start ? len - 1 : -1);
    jv v = eval(rt, x);
    if (v.t == JV_NONE) return step > 0 ? (is_start ? 0 : len) : (is_start ? len - 1 : -1);
    if (v.t != JV_INT && v.t != JV_BOOL) jinja_rt_fail(rt, "slice indices must be integers or None");
    int64_t i = v.t == JV_INT ? v.u.i : v.u.b;
    if (i < 0) {
        i += len;
        if (i < 0) i = step > 0 ? 0 : -1;
    } else if (i >= len) {
        i = step > 0 ? len : len - 1;
    }
    return i;
}

static jv slice(jinja_rt *rt, const jnode *x)
{
    jv obj = eval(rt, x->a);
    if (obj.t == JV_UNDEF) undefined_fail(rt, obj);
    int64_t step = 1;
    if (x->d) {
        jv s = eval(rt, x->d);
        if (s.t == JV_INT) step = s.u.i;
        else if (s.t != JV_NONE) jinja_rt_fail(rt, "slice step must be an integer");
        if (step == 0) jinja_rt_fail(rt, "slice step cannot be zero");
    }
    bool    is_str = obj.t == JV_STR;
    int64_t len;
    if (is_str) len = (int64_t)jv_str_len(obj);
    else if (obj.t == JV_LIST) len = (int64_t)obj.u.l->n;
    else return jv_undef(NULL); /* jinja2: subscript fails, then getattr fails: Undefined */
    int64_t a = slice_bound(rt, x->b, len, step, true), b = slice_bound(rt, x->c, len, step, false);
    if (is_str) {
        jbuf out = {0};
        for (int64_t i = a; step > 0 ? i < b : i > b; i += step) {
            size_t o = jv_utf8_offset(obj.u.s.p, obj.u.s.n, (size_t)i), e = jv_utf8_offset(obj.u.s.p, obj.u.s.n, (size_t)i + 1);
            if (step == 1) { /* contiguous: one copy */
                size_t end = jv_utf8_offset(obj.u.s.p, obj.u.s.n, (size_t)b);
                return jv_strn(obj.u.s.p + o, end - o);
            }
            jbuf_put(rt, &out, obj.u.s.p + o, e - o);
        }
        return jv_str_buf(rt, &out);
    }
    jv r = jv_list_new(rt, 0);
    r.flags = obj.flags;
    for (int64_t i = a; step > 0 ? i < b : i > b; i += step) jv_list_push(rt, r.u.l, obj.u.l->v[i]);
    return r;
}

/* ---- arithmetic ------------------------------------------------------------------------------ */

static int64_t ival(jv v) { return v.t == JV_INT ? v.u.i : v.t == JV_BOOL ? v.u.b : 0; }

static jv repeat(jinja_rt *rt, jv seq, int64_t times)
{
    if (times < 0) times = 0;
    if (seq.t == JV_STR) {
        if (seq.u.s.n && (uint64_t)times > JINJA_MAX_OUTPUT / seq.u.s.n) jinja_rt_fail(rt, "string repetition too large");
        jbuf b = {0};
        for (int64_t i = 0; i < times; i++) jbuf_put(rt, &b, seq.u.s.p, seq.u.s.n);
        return b.p ? jv_str_buf(rt, &b) : jv_strn("", 0);
    }
    if (seq.u.l->n && (uint64_t)times > JINJA_MAX_ITERATIONS / seq.u.l->n) jinja_rt_fail(rt, "list repetition too large");
    jv r = jv_list_new(rt, 0);
    r.flags = seq.flags;
    for (int64_t i = 0; i < times; i++)
        for (size_t j = 0; j < seq.u.l->n; j++) jv_list_push(rt, r.u.l, seq.u.l->v[j]);
    return r;
}

static jv binop(jinja_rt *rt, int op, jv a, jv b)
{
    if (a.t == JV_UNDEF) undefined_fail(rt, a);
    if (b.t == JV_UNDEF) undefined_fail(rt, b);
    bool ints = (a.t == JV_INT || a.t == JV_BOOL) && (b.t == JV_INT || b.t == JV_BOOL);
    bool nums = jv_is_num(a) && jv_is_num(b);
    int64_t x = ival(a), y = ival(b), r;
    switch (op) {
    case OP_ADD:
        if (ints) {
            if (__builtin_add_overflow(x, y, &r)) jinja_rt_fail(rt, "integer overflow in +");
            return jv_int(r);
        }
        if (nums) return jv_float(jv_num(a) + jv_num(b));
        if (a.t == JV_STR && b.t == JV_STR) {
            jbuf s = {0};
            jbuf_put(rt, &s, a.u.s.p, a.u.s.n);
            jbuf_put(rt, &s, b.u.s.p, b.u.s.n);
            return s.p ? jv_str_buf(rt, &s) : jv_strn("", 0);
        }
        if (a.t == JV_LIST && b.t == JV_LIST && (a.flags & JV_TUPLE) == (b.flags & JV_TUPLE)) {
            jv l = jv_list_new(rt, a.u.l->n + b.u.l->n);
            l.flags = a.flags;
            for (size_t i = 0; i < a.u.l->n; i++) jv_list_push(rt, l.u.l, a.u.l->v[i]);
            for (size_t i = 0; i < b.u.l->n; i++) jv_list_push(rt, l.u.l, b.u.l->v[i]);
            return l;
        }
        break;
    case OP_SUB:
        if (ints) {
            if (__builtin_sub_overflow(x, y, &r)) jinja_rt_fail(rt, "integer overflow in -");
            return jv_int(r);
        }
        if (nums) return jv_float(jv_num(a) - jv_num(b));
        break;
    case OP_MUL:
        if (ints) {
            if (__builtin_mul_overflow(x, y, &r)) jinja_rt_fail(rt, "integer overflow in *");
            return jv_int(r);
        }
        if (nums) return jv_float(jv_num(a) * jv_num(b));
        if ((a.t == JV_STR || a.t == JV_LIST) && (b.t == JV_INT || b.t == JV_BOOL)) return repeat(rt, a, ival(b));
        if ((b.t == JV_STR || b.t == JV_LIST) && (a.t == JV_INT || a.t == JV_BOOL)) return repeat(rt, b, ival(a));
        break;
    case OP_DIV:
        if (nums) {
            if (jv_num(b) == 0) jinja_rt_fail(rt, "division by zero");
            return jv_float(jv_num(a) / jv_num(b));
        }
        break;
    case OP_FLOORDIV:
    case OP_MOD:
        if (nums) {
            if (jv_num(b) == 0) jinja_rt_fail(rt, "integer division or modulo by zero");
            if (ints) {
                if (x == INT64_MIN && y == -1) jinja_rt_fail(rt, "integer overflow in //");
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) q--, m += y;
                return jv_int(op == OP_MOD ? m : q);
            }
            double fa = jv_num(a), fb = jv_num(b), m = fmod(fa, fb);
            if (m != 0 && ((m < 0) != (fb < 0))) m += fb;
            if (op == OP_MOD) return jv_float(m == 0 ? copysign(0.0, fb) : m);
            return jv_float(floor((fa - m) / fb + 0.5) == (fa - m) / fb ? (fa - m) / fb : floor(fa / fb));
        }
        break;
    case OP_POW:
        if (ints && y >= 0) {
            int64_t acc = 1, base = x;
            for (int64_t e = y; e; e >>= 1) {
                if ((e & 1) && __builtin_mul_overflow(acc, base, &acc)) jinja_rt_fail(rt, "integer overflow in **");
                if (e > 1 && __builtin_mul_overflow(base, base, &base)) {
                    if (x != 0 && x != 1 && x != -1) jinja_rt_fail(rt, "integer overflow in **");
                }
            }
            return jv_int(acc);
        }
        if (nums) {
            if (jv_num(a) == 0 && jv_num(b) < 0) jinja_rt_fail(rt, "0.0 cannot be raised to a negative power");
            return jv_float(pow(jv_num(a), jv_num(b)));
        }
        break;
    default: break;
    }
    static const char *const sym[] = {"+", "-", "*", "/", "//", "%", "**"};
    jinja_rt_fail(rt, "unsupported operand type(s) for %s: '%s' and '%s'", sym[op], jv_type_name(a), jv_type_name(b));
}

static bool contains(jinja_rt *rt, jv hay, jv needle)
{
    switch (hay.t) {
    case JV_UNDEF: return false;
    case JV_STR:
        if (needle.t != JV_STR) jinja_rt_fail(rt, "'in <string>' requires string as left operand, not %s", jv_type_name(needle));
        if (!needle.u.s.n) return true;
        for (size_t i = 0; i + needle.u.s.n <= hay.u.s.n; i++)
            if (!memcmp(hay.u.s.p + i, needle.u.s.p, needle.u.s.n)) return true;
        return false;
    case JV_LIST:
        for (size_t i = 0; i < hay.u.l->n; i++)
            if (jv_equal(hay.u.l->v[i], needle)) return true;
        return false;
    case JV_DICT:
    case JV_NS: return jv_dict_get(hay.u.d, needle) != NULL;
    default: jinja_rt_fail(rt, "argument of type '%s' is not iterable", jv_type_name(hay));
    }
}

static bool cmp(jinja_rt *rt, int op, jv a, jv b)
{
    switch (op) {
    case OP_EQ: return jv_equal(a, b);
    case OP_NE: return !jv_equal(a, b);
    case OP_IN: return contains(rt, b, a);
    case OP_NOTIN: return !contains(rt, b, a);
    default: {
        int c = jv_compare(rt, a, b);
        if (jv_is_num(a) && jv_is_num(b) && (isnan(jv_num(a)) || isnan(jv_num(b)))) return false;
        return op == OP_LT ? c < 0 : op == OP_LE ? c <= 0 : op == OP_GT ? c > 0 : c >= 0;
    }
    }
}

/* ---- calls ----------------------------------------------------------------------------------- */

typedef struct {
    jargs        a;
    const char **names;
    jv          *vals;
    jv          *pos;
} built_args;

static void build_args(jinja_rt *rt, const jnode *x, built_args *b)
{
    size_t np = 0, nk = 0;
    for (uint32_t i = 0; i < x->n; i++) x->kids[i]->kind == N_KWARG ? nk++ : np++;
    b->pos   = jinja_alloc(&rt->arena, rt->f, (np + 1) * sizeof *b->pos);
    b->vals  = jinja_alloc(&rt->arena, rt->f, (nk + 1) * sizeof *b->vals);
    b->names = jinja_alloc(&rt->arena, rt->f, (nk + 1) * sizeof *b->names);
    np = nk = 0;
    for (uint32_t i = 0; i < x->n; i++) {
        const jnode *k = x->kids[i];
        if (k->kind == N_KWARG) {
            char *nm = jinja_alloc(&rt->arena, rt->f, k->sn + 1);
            memcpy(nm, k->s, k->sn);
            b->names[nk] = nm;
            b->vals[nk++] = eval(rt, k->a);
        } else {
            b->pos[np++] = eval(rt, k);
        }
    }
    b->a = (jargs){.args = b->pos, .n = np, .kw_names = b->names, .kw_vals = b->vals, .n_kw = nk};
}

static jv call_macro(jinja_rt *rt, const jmacro *m, const jargs *a)
{
    const jnode *def = m->def;
    if (rt->depth >= JINJA_MAX_CALL_DEPTH)
        jinja_rt_fail(rt, "macro calls nest deeper than %d (runaway recursion in '%.*s')", JINJA_MAX_CALL_DEPTH, (int)def->sn, def->s);
    if (a->n > def->n) jinja_rt_fail(rt, "macro '%.*s' takes not more than %u argument(s)", (int)def->sn, def->s, def->n);
    jframe *saved = FRAME(rt);
    jframe *fr    = frame_new(rt, m->scope);
    for (uint32_t i = 0; i < def->n; i++) {
        const jnode *p   = def->kids[i];
        jv           val = jv_undef(NULL);
        bool         got = false;
        if (i < a->n) val = a->args[i], got = true;
        for (size_t k = 0; k < a->n_kw; k++)
            if (strlen(a->kw_names[k]) == p->sn && !memcmp(a->kw_names[k], p->s, p->sn)) {
                if (got) jinja_rt_fail(rt, "macro '%.*s' got multiple values for argument '%s'", (int)def->sn, def->s, a->kw_names[k]);
                val = a->kw_vals[k], got = true;
            }
        if (!got && def->kids2[i]) {
            FRAME(rt) = fr; /* defaults see earlier parameters */
            val       = eval(rt, def->kids2[i]);
        }
        if (!got && !def->kids2[i]) val = jv_undef(NULL), val.u.s.p = p->s, val.u.s.n = p->sn;
        assign(rt, fr, p->s, p->sn, val);
    }
    for (size_t k = 0; k < a->n_kw; k++) {
        bool known = false;
        for (uint32_t i = 0; i < def->n; i++)
            if (strlen(a->kw_names[k]) == def->kids[i]->sn && !memcmp(a->kw_names[k], def->kids[i]->s, def->kids[i]->sn)) known = true;
        if (!known) jinja_rt_fail(rt, "macro '%.*s' takes no keyword argument '%s'", (int)def->sn, def->s, a->kw_names[k]);
    }
    if (m->caller.t == JV_MACRO) assign(rt, fr, "caller", 6, m->caller);
    jbuf  cap   = {0};
    jbuf *outer = rt->out;
    rt->out     = &cap;
    rt->depth++;
    int saved_brk = rt->brk;
    exec(rt, fr, def->b);
    rt->brk = saved_brk;
    rt->depth--;
    rt->out   = outer;
    FRAME(rt) = saved;
    return cap.p ? jv_str_buf(rt, &cap) : jv_strn("", 0);
}

jv jinja_call(jinja_rt *rt, jv callee, const jargs *a)
{
    if (callee.t == JV_MACRO) return call_macro(rt, callee.u.m, a);
    if (callee.t == JV_FUNC) return callee.u.fn->impl(rt, callee.u.fn, a);
    if (callee.t == JV_UNDEF) {
        if (callee.u.s.n) jinja_rt_fail(rt, "'%.*s' is undefined (called as a function)", (int)callee.u.s.n, callee.u.s.p);
        jinja_rt_fail(rt, "called an undefined value");
    }
    jinja_rt_fail(rt, "'%s' object is not callable", jv_type_name(callee));
}

/* ---- expressions ----------------------------------------------------------------------------- */

static jv eval(jinja_rt *rt, const jnode *x)
{
    at(rt, x);
    switch (x->kind) {
    case N_LIT: return x->lit;
    case N_NAME: return lookup(rt, x->s, x->sn);
    case N_LIST:
    case N_TUPLE: {
        jv l = jv_list_new(rt, x->n);
        if (x->kind == N_TUPLE) l.flags = JV_TUPLE;
        for (uint32_t i = 0; i < x->n; i++) jv_list_push(rt, l.u.l, eval(rt, x->kids[i]));
        return l;
    }
    case N_DICT: {
        jv d = jv_dict_new(rt);
        for (uint32_t i = 0; i + 1 < x->n; i += 2) {
            jv k = eval(rt, x->kids[i]);
            if (k.t == JV_LIST && !(k.flags & JV_TUPLE)) jinja_rt_fail(rt, "unhashable type: 'list'");
            if (k.t == JV_DICT || k.t == JV_NS) jinja_rt_fail(rt, "unhashable type: 'dict'");
            jv_dict_set(rt, d.u.d, k, eval(rt, x->kids[i + 1]));
        }
        return d;
    }
    case N_GETATTR: {
        jv o = eval(rt, x->a);
        at(rt, x);
        return getattr_v(rt, o, x->s, x->sn);
    }
    case N_GETITEM: {
        jv o = eval(rt, x->a), k = eval(rt, x->b);
        at(rt, x);
        return getitem_v(rt, o, k);
    }
    case N_SLICE: return slice(rt, x);
    case N_CALL: {
        jv         callee = eval(rt, x->a);
        built_args b;
        build_args(rt, x, &b);
        at(rt, x);
        return jinja_call(rt, callee, &b.a);
    }
    case N_FILTER: {
        jv         v = eval(rt, x->a);
        built_args b;
        build_args(rt, x, &b);
        at(rt, x);
        jv out;
        if (!jinja_filter(rt, x->s, x->sn, v, &b.a, &out))
            jinja_rt_fail(rt, "no filter named '%.*s' (celer's template subset)", (int)x->sn, x->s);
        return out;
    }
    case N_TEST: {
        jv         v = eval(rt, x->a);
        built_args b;
        build_args(rt, x, &b);
        at(rt, x);
        bool out;
        if (!jinja_test(rt, x->s, x->sn, v, &b.a, &out))
            jinja_rt_fail(rt, "no test named '%.*s' (celer's template subset)", (int)x->sn, x->s);
        return jv_bool(out != x->flag);
    }
    case N_NEG:
    case N_POS: {
        jv v = eval(rt, x->a);
        at(rt, x);
        if (v.t == JV_UNDEF) undefined_fail(rt, v);
        if (v.t == JV_FLOAT) return jv_float(x->kind == N_NEG ? -v.u.f : v.u.f);
        if (v.t == JV_INT || v.t == JV_BOOL) {
            int64_t i = ival(v);
            if (x->kind == N_NEG && i == INT64_MIN) jinja_rt_fail(rt, "integer overflow in unary -");
            return jv_int(x->kind == N_NEG ? -i : i);
        }
        jinja_rt_fail(rt, "bad operand type for unary %s: '%s'", x->kind == N_NEG ? "-" : "+", jv_type_name(v));
    }
    case N_NOT: return jv_bool(!jv_truthy(eval(rt, x->a)));
    case N_AND: {
        jv l = eval(rt, x->a);
        return jv_truthy(l) ? eval(rt, x->b) : l;
    }
    case N_OR: {
        jv l = eval(rt, x->a);
        return jv_truthy(l) ? l : eval(rt, x->b);
    }
    case N_BIN: {
        jv l = eval(rt, x->a), r = eval(rt, x->b);
        at(rt, x);
        return binop(rt, x->op, l, r);
    }
    case N_CMP: {
        jv l = eval(rt, x->a), r = eval(rt, x->b);
        at(rt, x);
        return jv_bool(cmp(rt, x->op, l, r));
    }
    case N_COND:
        if (jv_truthy(eval(rt, x->a))) return eval(rt, x->b);
        return x->c ? eval(rt, x->c) : jv_undef(NULL);
    case N_CONCAT: {
        jbuf b = {0};
        for (uint32_t i = 0; i < x->n; i++) jv_write_str(rt, &b, eval(rt, x->kids[i]));
        return b.p ? jv_str_buf(rt, &b) : jv_strn("", 0);
    }
    default: jinja_rt_fail(rt, "internal: node kind %d is not an expression", x->kind);
    }
}

/* ---- statements ------------------------------------------------------------------------------ */

static void unpack(jinja_rt *rt, jframe *fr, const jnode *tg, jv v)
{
    if (tg->kind == N_NAME) {
        assign(rt, fr, tg->s, tg->sn, v);
        return;
    }
    jlist *l = jinja_iter(rt, v);
    if (l->n != tg->n)
        jinja_rt_fail(rt, l->n > tg->n ? "too many values to unpack (expected %u)" : "not enough values to unpack (expected %u)", tg->n);
    for (uint32_t i = 0; i < tg->n; i++) assign(rt, fr, tg->kids[i]->s, tg->kids[i]->sn, l->v[i]);
}

static void count_iteration(jinja_rt *rt)
{
    if (++rt->iterations > JINJA_MAX_ITERATIONS)
        jinja_rt_fail(rt, "loops ran more than %d iterations in all; the template or its input is too large", JINJA_MAX_ITERATIONS);
}

static void exec_for(jinja_rt *rt, jframe *fr, const jnode *x)
{
    jv     seq = eval(rt, x->b);
    at(rt, x);
    jlist *items = jinja_iter(rt, seq);
    if (x->c) { /* loop filter: {% for a in b if cond %} */
        jv kept = jv_list_new(rt, 0);
        jframe *it = frame_new(rt, fr);
        for (size_t i = 0; i < items->n; i++) {
            count_iteration(rt);
            it->vars.n = 0;
            unpack(rt, it, x->a, items->v[i]);
            FRAME(rt) = it;
            if (jv_truthy(eval(rt, x->c))) jv_list_push(rt, kept.u.l, items->v[i]);
            FRAME(rt) = fr;
        }
        items = kept.u.l;
    }
    jloop *lp = jinja_alloc(&rt->arena, rt->f, sizeof *lp);
    lp->items = items, lp->length = (int64_t)items->n;
    jv loopv = {.t = JV_LOOP};
    loopv.u.loop = lp;
    jframe *it = frame_new(rt, fr); /* one frame, emptied at each iteration: memory stays flat */
    for (size_t i = 0; i < items->n; i++) {
        count_iteration(rt);
        lp->index0   = (int64_t)i;
        it->vars.n   = 0;
        assign(rt, it, "loop", 4, loopv);
        unpack(rt, it, x->a, items->v[i]);
        exec(rt, it, x->d);
        FRAME(rt) = fr;
        if (rt->brk == 1) {
            rt->brk = 0;
            break;
        }
        rt->brk = 0;
    }
    if (!items->n && x->n2) exec(rt, fr, x->kids2[0]);
}

static void exec(jinja_rt *rt, jframe *fr, const jnode *x)
{
    FRAME(rt) = fr;
    at(rt, x);
    switch (x->kind) {
    case N_BODY:
        for (uint32_t i = 0; i < x->n && !rt->brk; i++) exec(rt, fr, x->kids[i]);
        return;
    case N_TEXT: jbuf_put(rt, rt->out, x->s, x->sn); return;
    case N_OUTPUT: jv_write_str(rt, rt->out, eval(rt, x->a)); return;
    case N_IF:
        if (jv_truthy(eval(rt, x->a))) exec(rt, fr, x->b);
        else if (x->c) exec(rt, fr, x->c);
        return;
    case N_FOR: exec_for(rt, fr, x); return;
    case N_SET: {
        jv v = eval(rt, x->b);
        at(rt, x);
        if (x->a->kind == N_GETATTR) {
            jv ns = lookup(rt, x->a->a->s, x->a->a->sn);
            if (ns.t != JV_NS) jinja_rt_fail(rt, "cannot assign attribute on non-namespace object '%.*s'", (int)x->a->a->sn, x->a->a->s);
            if (x->a->sn && x->a->s[0] == '_') jinja_rt_fail(rt, "chat templates cannot store underscore-prefixed attributes on a namespace");
            jv_dict_set(rt, ns.u.d, jv_strn(x->a->s, x->a->sn), v);
        } else {
            unpack(rt, fr, x->a, v);
        }
        return;
    }
    case N_SETBLOCK: {
        jbuf  cap   = {0};
        jbuf *outer = rt->out;
        rt->out     = &cap;
        exec(rt, fr, x->b);
        rt->out = outer;
        assign(rt, fr, x->a->s, x->a->sn, cap.p ? jv_str_buf(rt, &cap) : jv_strn("", 0));
        return;
    }
    case N_MACRO: {
        jmacro *m = jinja_alloc(&rt->arena, rt->f, sizeof *m);
        m->def = x, m->scope = fr;
        jv v = {.t = JV_MACRO};
        v.u.m = m;
        assign(rt, fr, x->s, x->sn, v);
        return;
    }
    case N_CALLBLOCK: {
        jmacro *caller = jinja_alloc(&rt->arena, rt->f, sizeof *caller);
        caller->def = x->b, caller->scope = fr;
        jv cv = {.t = JV_MACRO};
        cv.u.m        = caller;
        jv callee     = eval(rt, x->a->a);
        built_args b;
        build_args(rt, x->a, &b);
        at(rt, x);
        if (callee.t != JV_MACRO) jinja_rt_fail(rt, "{%% call %%} needs a macro");
        jmacro with = *callee.u.m;
        with.caller = cv;
        jv_write_str(rt, rt->out, call_macro(rt, &with, &b.a));
        return;
    }
    case N_BREAK: rt->brk = 1; return;
    case N_CONTINUE: rt->brk = 2; return;
    case N_GENERATION: exec(rt, fr, x->b); return;
    default: jinja_rt_fail(rt, "internal: node kind %d is not a statement", x->kind);
    }
}

void jinja_render(jinja_rt *rt, const jinja_program *prog)
{
    rt->root  = frame_new(rt, NULL);
    FRAME(rt) = rt->root;
    exec(rt, rt->root, prog->root);
}
