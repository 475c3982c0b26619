/* The Jinja parser: tokens → AST, with jinja2's grammar and operator precedence
 * (parse_or → and → not → compare → math1 (+ -) → concat (~) → math2 (* / // %) → pow (**) →
 * unary (- +) → primary → postfix (. [] ()) → filter/test chain). Tags it knows: if/elif/else,
 * for/else (with loop filter), set (expression, tuple and block forms), macro, call, break,
 * continue (jinja2.ext.loopcontrols), generation (transformers' AssistantTracker), raw (lexer).
 * Anything else jinja2 would accept (include, import, extends, block, with, filter, ...) is an
 * error naming the tag and its line:column: chat templates have no loader to include from. */
#include "chat/jinja.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    jtok           *t;
    size_t          n, i;
    jinja_arena    *a;
    jinja_fail_ctx *f;
    int             nest;
} parser;

typedef struct {
    jnode  **v;
    uint32_t n, cap;
} nvec;

_Noreturn static void pfail(parser *P, const jtok *t, const char *fmt, const char *arg)
{
    jinja_fail(P->f, CELER_ERR_INVALID, t->line, t->col, fmt, arg);
}

static jtok *cur(parser *P) { return &P->t[P->i]; }
static jtok *next(parser *P)
{
    jtok *t = &P->t[P->i];
    if (t->kind != T_EOF) P->i++;
    return t;
}

static bool is_op(const jtok *t, const char *op) { return t->kind == T_OP && t->n == strlen(op) && !memcmp(t->s, op, t->n); }
static bool is_name(const jtok *t, const char *nm) { return t->kind == T_NAME && t->n == strlen(nm) && !memcmp(t->s, nm, t->n); }

static void expect_op(parser *P, const char *op)
{
    if (!is_op(cur(P), op)) pfail(P, cur(P), "expected '%s'", op);
    next(P);
}

static jnode *node(parser *P, int kind, const jtok *at)
{
    jnode *x = jinja_alloc(P->a, P->f, sizeof *x);
    x->kind  = (uint8_t)kind;
    x->line  = at->line, x->col = at->col;
    x->depth = 1;
    return x;
}

static void vpush(parser *P, nvec *v, jnode *x)
{
    if (v->n == v->cap) {
        uint32_t cap = v->cap ? v->cap * 2 : 4;
        jnode  **p   = jinja_alloc(P->a, P->f, cap * sizeof *p);
        if (v->n) memcpy(p, v->v, v->n * sizeof *p);
        v->v = p, v->cap = cap;
    }
    v->v[v->n++] = x;
}

/* Bounds the depth of expression trees (long chains like 1+1+...+1 included), so that
 * evaluating them cannot exhaust the C stack. */
static jnode *deepen(parser *P, jnode *x, const jnode *child)
{
    if (child && child->depth + 1 > x->depth) x->depth = (uint16_t)(child->depth + 1);
    if (x->depth > JINJA_MAX_NEST) pfail(P, cur(P), "expression nests deeper than %s levels", "200");
    return x;
}

/* x with the children v (its kids from now on), as deep as the deepest of them needs. */
static jnode *adopt(parser *P, jnode *x, nvec v)
{
    x->kids = v.v, x->n = v.n;
    for (uint32_t i = 0; i < v.n; i++) deepen(P, x, v.v[i]);
    return x;
}

static jnode *bin(parser *P, int kind, int op, jnode *l, jnode *r, const jtok *at)
{
    jnode *x = node(P, kind, at);
    x->op = (uint8_t)op, x->a = l, x->b = r;
    deepen(P, x, l);
    return deepen(P, x, r);
}

static jnode *expr(parser *P);
static jnode *or_expr(parser *P);
static jnode *unary(parser *P, bool with_filter);

static void enter(parser *P)
{
    if (++P->nest > JINJA_MAX_NEST) pfail(P, cur(P), "template nests deeper than %s levels", "200");
}

/* ---- expressions -------------------------------------------------------------------------- */

/* Call arguments after '(' up to ')': positional args, then name=value keyword args. */
static void call_args(parser *P, jnode *call)
{
    nvec args = {0};
    while (!is_op(cur(P), ")")) {
        if (args.n) expect_op(P, ",");
        if (is_op(cur(P), ")")) break;
        jtok *t = cur(P);
        if (is_op(t, "*") || is_op(t, "**")) pfail(P, t, "%s-arguments in calls are not supported by celer", t->s[1] == '*' ? "**" : "*");
        if (t->kind == T_NAME && is_op(&P->t[P->i + 1], "=")) {
            next(P), next(P);
            jnode *kw = node(P, N_KWARG, t);
            kw->s = t->s, kw->sn = t->n, kw->a = expr(P);
            vpush(P, &args, deepen(P, kw, kw->a));
        } else {
            vpush(P, &args, expr(P));
        }
    }
    expect_op(P, ")");
    adopt(P, call, args);
}

static jnode *primary(parser *P)
{
    enter(P);
    jtok  *t = next(P);
    jnode *x;
    switch (t->kind) {
    case T_NAME:
        x = node(P, N_LIT, t);
        if (is_name(t, "true") || is_name(t, "True")) x->lit = jv_bool(true);
        else if (is_name(t, "false") || is_name(t, "False")) x->lit = jv_bool(false);
        else if (is_name(t, "none") || is_name(t, "None")) x->lit = jv_none();
        else x->kind = N_NAME, x->s = t->s, x->sn = t->n;
        break;
    case T_STRING: {
        /* adjacent literals concatenate */
        size_t total = t->n, k = P->i;
        while (P->t[k].kind == T_STRING) total += P->t[k++].n;
        char *s = jinja_alloc(P->a, P->f, total + 1);
        memcpy(s, t->s, t->n);
        size_t o = t->n;
        while (cur(P)->kind == T_STRING) {
            jtok *u = next(P);
            memcpy(s + o, u->s, u->n);
            o += u->n;
        }
        x      = node(P, N_LIT, t);
        x->lit = jv_strn(s, total);
        break;
    }
    case T_INT: x = node(P, N_LIT, t), x->lit = jv_int(t->i); break;
    case T_FLOAT: x = node(P, N_LIT, t), x->lit = jv_float(t->f); break;
    case T_OP:
        if (is_op(t, "(")) {
            nvec items = {0};
            bool tuple = false;
            while (!is_op(cur(P), ")")) {
                if (items.n) {
                    expect_op(P, ",");
                    tuple = true;
                    if (is_op(cur(P), ")")) break;
                }
                vpush(P, &items, expr(P));
            }
            next(P);
            if (items.n == 1 && !tuple) {
                x = items.v[0];
                break;
            }
            x = adopt(P, node(P, N_TUPLE, t), items);
            break;
        }
        if (is_op(t, "[")) {
            nvec items = {0};
            while (!is_op(cur(P), "]")) {
                if (items.n) {
                    expect_op(P, ",");
                    if (is_op(cur(P), "]")) break;
                }
                vpush(P, &items, expr(P));
            }
            next(P);
            x = adopt(P, node(P, N_LIST, t), items);
            break;
        }
        if (is_op(t, "{")) {
            nvec items = {0};
            while (!is_op(cur(P), "}")) {
                if (items.n) {
                    expect_op(P, ",");
                    if (is_op(cur(P), "}")) break;
                }
                vpush(P, &items, expr(P));
                expect_op(P, ":");
                vpush(P, &items, expr(P));
            }
            next(P);
            x = adopt(P, node(P, N_DICT, t), items);
            break;
        }
        /* fall through */
    default: pfail(P, t, "unexpected %s in an expression", t->kind == T_EOF ? "end of template" : t->kind == T_OP ? "operator" : "tag end");
    }
    P->nest--;
    return x;
}

static jnode *postfix(parser *P, jnode *x)
{
    for (;;) {
        jtok *t = cur(P);
        if (is_op(t, ".")) {
            next(P);
            jtok *a = next(P);
            if (a->kind == T_NAME) {
                jnode *g = node(P, N_GETATTR, t);
                g->a = x, g->s = a->s, g->sn = a->n;
                x = deepen(P, g, x);
            } else if (a->kind == T_INT) {
                jnode *k = node(P, N_LIT, a);
                k->lit   = jv_int(a->i);
                x        = bin(P, N_GETITEM, 0, x, k, t);
            } else {
                pfail(P, a, "expected a name after '.'%s", "");
            }
        } else if (is_op(t, "[")) {
            next(P);
            jnode *idx[3] = {0};
            int    parts = 0;
            bool   slice = false;
            for (;;) {
                if (is_op(cur(P), ":")) {
                    slice = true, next(P), parts++;
                    if (parts > 2) pfail(P, cur(P), "a slice has at most three parts%s", "");
                    continue;
                }
                if (is_op(cur(P), "]")) break;
                if (idx[parts]) pfail(P, cur(P), "expected ':' or ']' in a subscript%s", "");
                idx[parts] = expr(P);
                if (is_op(cur(P), ",")) pfail(P, cur(P), "tuple subscripts are not supported by celer%s", "");
            }
            next(P);
            if (slice) {
                jnode *s = node(P, N_SLICE, t);
                s->a = x, s->b = idx[0], s->c = idx[1], s->d = idx[2];
                deepen(P, s, x);
                for (int i = 0; i < 3; i++) deepen(P, s, idx[i]);
                x = s;
            } else {
                if (!idx[0]) pfail(P, t, "empty subscript%s", "");
                x = bin(P, N_GETITEM, 0, x, idx[0], t);
            }
        } else if (is_op(t, "(")) {
            next(P);
            jnode *c = node(P, N_CALL, t);
            c->a     = x;
            deepen(P, c, x);
            call_args(P, c);
            x = c;
        } else {
            return x;
        }
    }
}

static jnode *filter_expr(parser *P, jnode *x)
{
    for (;;) {
        jtok *t = cur(P);
        if (is_op(t, "|")) {
            next(P);
            jtok *nm = next(P);
            if (nm->kind != T_NAME) pfail(P, nm, "expected a filter name after '|'%s", "");
            jnode *fl = node(P, N_FILTER, nm);
            fl->a = x, fl->s = nm->s, fl->sn = nm->n;
            deepen(P, fl, x);
            if (is_op(cur(P), "(")) next(P), call_args(P, fl);
            x = fl;
        } else if (is_name(t, "is")) {
            next(P);
            jnode *te = node(P, N_TEST, t);
            if (is_name(cur(P), "not")) next(P), te->flag = true;
            jtok *nm = next(P);
            if (nm->kind != T_NAME) pfail(P, nm, "expected a test name after 'is'%s", "");
            te->a = x, te->s = nm->s, te->sn = nm->n;
            deepen(P, te, x);
            jtok *u = cur(P);
            if (is_op(u, "(")) {
                next(P), call_args(P, te);
            } else if ((u->kind == T_NAME || u->kind == T_STRING || u->kind == T_INT || u->kind == T_FLOAT || is_op(u, "(") ||
                        is_op(u, "[") || is_op(u, "{")) &&
                       !is_name(u, "else") && !is_name(u, "or") && !is_name(u, "and")) {
                if (is_name(u, "is")) pfail(P, u, "you cannot chain multiple tests with is%s", "");
                jnode *arg = postfix(P, primary(P));
                te->kids   = jinja_alloc(P->a, P->f, sizeof *te->kids);
                te->kids[0] = arg, te->n = 1;
                deepen(P, te, arg);
            }
            x = te;
        } else if (is_op(t, "(")) {
            next(P);
            jnode *c = node(P, N_CALL, t);
            c->a     = x;
            deepen(P, c, x);
            call_args(P, c);
            x = c;
        } else {
            return x;
        }
    }
}

static jnode *unary(parser *P, bool with_filter)
{
    enter(P);
    jtok  *t = cur(P);
    jnode *x;
    if (is_op(t, "-") || is_op(t, "+")) {
        next(P);
        x    = node(P, t->s[0] == '-' ? N_NEG : N_POS, t);
        x->a = unary(P, false);
        deepen(P, x, x->a);
    } else {
        x = primary(P);
    }
    x = postfix(P, x);
    if (with_filter) x = filter_expr(P, x);
    P->nest--;
    return x;
}

static jnode *pow_expr(parser *P)
{
    jnode *l = unary(P, true);
    while (is_op(cur(P), "**")) {
        jtok *t = next(P);
        l       = bin(P, N_BIN, OP_POW, l, unary(P, true), t);
    }
    return l;
}

static jnode *math2(parser *P)
{
    jnode *l = pow_expr(P);
    for (;;) {
        jtok *t = cur(P);
        int   op = is_op(t, "*") ? OP_MUL : is_op(t, "/") ? OP_DIV : is_op(t, "//") ? OP_FLOORDIV : is_op(t, "%") ? OP_MOD : -1;
        if (op < 0) return l;
        next(P);
        l = bin(P, N_BIN, op, l, pow_expr(P), t);
    }
}

static jnode *concat(parser *P)
{
    jnode *l = math2(P);
    if (!is_op(cur(P), "~")) return l;
    jtok *t    = cur(P);
    nvec  args = {0};
    vpush(P, &args, l);
    while (is_op(cur(P), "~")) next(P), vpush(P, &args, math2(P));
    return adopt(P, node(P, N_CONCAT, t), args);
}

static jnode *math1(parser *P)
{
    jnode *l = concat(P);
    for (;;) {
        jtok *t  = cur(P);
        int   op = is_op(t, "+") ? OP_ADD : is_op(t, "-") ? OP_SUB : -1;
        if (op < 0) return l;
        next(P);
        l = bin(P, N_BIN, op, l, concat(P), t);
    }
}

static jnode *compare(parser *P)
{
    jnode *l     = math1(P);
    jnode *chain = NULL; /* a < b < c is (a < b) and (b < c) */
    for (;;) {
        jtok *t  = cur(P);
        int   op = is_op(t, "==") ? OP_EQ : is_op(t, "!=") ? OP_NE : is_op(t, "<") ? OP_LT : is_op(t, "<=") ? OP_LE
                 : is_op(t, ">") ? OP_GT : is_op(t, ">=") ? OP_GE : is_name(t, "in") ? OP_IN : -1;
        if (op < 0 && is_name(t, "not") && is_name(&P->t[P->i + 1], "in")) {
            next(P);
            op = OP_NOTIN;
        }
        if (op < 0) return chain ? chain : l;
        next(P);
        jnode *r = math1(P);
        jnode *c = bin(P, N_CMP, op, l, r, t);
        chain    = chain ? bin(P, N_AND, 0, chain, c, t) : c;
        l        = r;
    }
}

static jnode *not_expr(parser *P)
{
    if (is_name(cur(P), "not")) {
        jtok *t = next(P);
        enter(P);
        jnode *x = node(P, N_NOT, t);
        x->a     = not_expr(P);
        P->nest--;
        return deepen(P, x, x->a);
    }
    return compare(P);
}

static jnode *and_expr(parser *P)
{
    jnode *l = not_expr(P);
    while (is_name(cur(P), "and")) {
        jtok *t = next(P);
        l       = bin(P, N_AND, 0, l, not_expr(P), t);
    }
    return l;
}

static jnode *or_expr(parser *P)
{
    jnode *l = and_expr(P);
    while (is_name(cur(P), "or")) {
        jtok *t = next(P);
        l       = bin(P, N_OR, 0, l, and_expr(P), t);
    }
    return l;
}

static jnode *expr(parser *P)
{
    enter(P);
    jnode *x = or_expr(P);
    while (is_name(cur(P), "if")) {
        jtok  *t = next(P);
        jnode *c = node(P, N_COND, t);
        c->b     = x;
        c->a     = or_expr(P);
        if (is_name(cur(P), "else")) next(P), c->c = expr(P);
        deepen(P, c, c->a), deepen(P, c, c->b), deepen(P, c, c->c);
        x = c;
    }
    P->nest--;
    return x;
}

/* ---- statements ----------------------------------------------------------------------------- */

static void block_end(parser *P)
{
    if (cur(P)->kind != T_BLOCK_END) pfail(P, cur(P), "expected the end of the tag ('%%}')%s", "");
    next(P);
}

/* Assignment target: name, or names separated by commas (optionally in parentheses), or
 * name.attr for set. */
static jnode *target(parser *P, bool allow_attr)
{
    jtok *t = cur(P);
    bool  paren = is_op(t, "(");
    if (paren) next(P);
    nvec names = {0};
    for (;;) {
        jtok *nm = next(P);
        if (nm->kind != T_NAME) pfail(P, nm, "expected a variable name%s", "");
        jnode *x = node(P, N_NAME, nm);
        x->s = nm->s, x->sn = nm->n;
        if (allow_attr && !paren && !names.n && is_op(cur(P), ".")) {
            next(P);
            jtok *at = next(P);
            if (at->kind != T_NAME) pfail(P, at, "expected an attribute name%s", "");
            jnode *g = node(P, N_GETATTR, nm);
            g->a = x, g->s = at->s, g->sn = at->n;
            return g;
        }
        vpush(P, &names, x);
        if (!is_op(cur(P), ",")) break;
        next(P);
        if (paren && is_op(cur(P), ")")) break;
    }
    if (paren) expect_op(P, ")");
    if (names.n == 1 && !paren) return names.v[0];
    jnode *tu = node(P, N_TUPLE, t);
    tu->kids = names.v, tu->n = names.n;
    return tu;
}

static jnode *body(parser *P, const char *const *ends, const jtok **end_tok);

static bool tag_is(const jtok *t, const char *const *names)
{
    for (; *names; names++)
        if (is_name(t, *names)) return true;
    return false;
}

static jnode *statement(parser *P, const jtok *t);

/* Parses statements until a {% tag %} whose name is in ends (NULL-terminated); leaves the parser
 * after that tag's name and sets *end_tok to it. ends == NULL: until the end of the template. */
static jnode *body(parser *P, const char *const *ends, const jtok **end_tok)
{
    enter(P);
    jtok *start = cur(P);
    nvec  v     = {0};
    for (;;) {
        jtok *t = cur(P);
        if (t->kind == T_EOF) {
            if (ends) {
                const char *const *last = ends;
                while (last[1]) last++;
                pfail(P, t, "unexpected end of template; expected '{%% %s %%}'", *last);
            }
            break;
        }
        if (t->kind == T_DATA) {
            next(P);
            jnode *x = node(P, N_TEXT, t);
            x->s = t->s, x->sn = t->n;
            vpush(P, &v, x);
        } else if (t->kind == T_VAR_BEGIN) {
            next(P);
            jnode *x = node(P, N_OUTPUT, t);
            x->a     = expr(P);
            if (cur(P)->kind != T_VAR_END) pfail(P, cur(P), "expected the end of the print ('}}')%s", "");
            next(P);
            vpush(P, &v, x);
        } else if (t->kind == T_BLOCK_BEGIN) {
            jtok *nm = &P->t[P->i + 1];
            if (ends && tag_is(nm, ends)) {
                next(P), next(P);
                *end_tok = nm;
                break;
            }
            next(P);
            vpush(P, &v, statement(P, next(P)));
        } else {
            pfail(P, t, "unexpected token%s", "");
        }
    }
    jnode *b = node(P, N_BODY, start);
    b->kids = v.v, b->n = v.n;
    P->nest--;
    return b;
}

static void macro_params(parser *P, jnode *m)
{
    nvec names = {0}, defs = {0};
    expect_op(P, "(");
    while (!is_op(cur(P), ")")) {
        if (names.n) expect_op(P, ",");
        jtok *nm = next(P);
        if (nm->kind != T_NAME) pfail(P, nm, "expected a parameter name%s", "");
        jnode *x = node(P, N_NAME, nm);
        x->s = nm->s, x->sn = nm->n;
        vpush(P, &names, x);
        jnode *d = NULL;
        if (is_op(cur(P), "=")) next(P), d = expr(P);
        else if (defs.n && defs.v[defs.n - 1]) pfail(P, nm, "parameter without a default after one with a default%s", "");
        vpush(P, &defs, d);
    }
    next(P);
    m->kids = names.v, m->n = names.n;
    m->kids2 = defs.v, m->n2 = defs.n;
}

static jnode *statement(parser *P, const jtok *t)
{
    static const char *const if_ends[]   = {"elif", "else", "endif", NULL};
    static const char *const for_ends[]  = {"else", "endfor", NULL};
    static const char *const for_end[]   = {"endfor", NULL};
    static const char *const if_end[]    = {"endif", NULL};
    const jtok              *end         = NULL;
    if (t->kind != T_NAME) pfail(P, t, "expected a tag name after '{%%'%s", "");
    if (is_name(t, "if") || is_name(t, "elif")) {
        jnode *x = node(P, N_IF, t);
        x->a     = expr(P);
        block_end(P);
        x->b = body(P, if_ends, &end);
        if (is_name(end, "elif")) {
            x->c = statement(P, end); /* the elif chain ends at the same endif */
            return x;
        }
        if (is_name(end, "else")) {
            block_end(P);
            x->c = body(P, if_end, &end);
        }
        block_end(P);
        return x;
    }
    if (is_name(t, "for")) {
        jnode *x = node(P, N_FOR, t);
        x->a     = target(P, false);
        if (!is_name(cur(P), "in")) pfail(P, cur(P), "expected 'in' in a for tag%s", "");
        next(P);
        x->b = or_expr(P); /* jinja2 parses the iterable without inline if: "if" starts the filter */
        if (is_name(cur(P), "if")) next(P), x->c = expr(P);
        if (is_name(cur(P), "recursive")) pfail(P, cur(P), "recursive for loops are not supported by celer%s", "");
        block_end(P);
        x->d = body(P, for_ends, &end);
        if (is_name(end, "else")) {
            block_end(P);
            jnode *e = body(P, for_end, &end);
            x->kids2 = jinja_alloc(P->a, P->f, sizeof *x->kids2);
            x->kids2[0] = e, x->n2 = 1;
        }
        block_end(P);
        return x;
    }
    if (is_name(t, "set")) {
        jnode *tg = target(P, true);
        if (is_op(cur(P), "=")) {
            next(P);
            jnode *x = node(P, N_SET, t);
            x->a = tg;
            jnode *v = expr(P);
            if (is_op(cur(P), ",")) { /* set a, b = 1, 2 */
                jnode *tu = node(P, N_TUPLE, t);
                nvec   items = {0};
                vpush(P, &items, v);
                while (is_op(cur(P), ",")) {
                    next(P);
                    if (cur(P)->kind == T_BLOCK_END) break;
                    vpush(P, &items, expr(P));
                }
                tu->kids = items.v, tu->n = items.n;
                v = tu;
            }
            x->b = v;
            block_end(P);
            return x;
        }
        if (tg->kind != N_NAME) pfail(P, t, "a block set assigns one plain name%s", "");
        if (is_op(cur(P), "|")) pfail(P, cur(P), "filters on a block set are not supported by celer%s", "");
        block_end(P);
        static const char *const set_end[] = {"endset", NULL};
        jnode *x = node(P, N_SETBLOCK, t);
        x->a     = tg;
        x->b     = body(P, set_end, &end);
        block_end(P);
        return x;
    }
    if (is_name(t, "macro")) {
        jtok *nm = next(P);
        if (nm->kind != T_NAME) pfail(P, nm, "expected a macro name%s", "");
        jnode *x = node(P, N_MACRO, t);
        x->s = nm->s, x->sn = nm->n;
        macro_params(P, x);
        block_end(P);
        static const char *const m_end[] = {"endmacro", NULL};
        x->b = body(P, m_end, &end);
        if (cur(P)->kind == T_NAME) next(P); /* {% endmacro name %} */
        block_end(P);
        return x;
    }
    if (is_name(t, "call")) {
        jnode *x = node(P, N_CALLBLOCK, t);
        jnode *m = node(P, N_MACRO, t); /* the caller: a macro with these parameters */
        m->s = "caller", m->sn = 6;
        if (is_op(cur(P), "(")) macro_params(P, m);
        x->a = expr(P);
        if (x->a->kind != N_CALL) pfail(P, t, "expected a call after {%% call %%}%s", "");
        block_end(P);
        static const char *const c_end[] = {"endcall", NULL};
        m->b = body(P, c_end, &end);
        x->b = m;
        block_end(P);
        return x;
    }
    if (is_name(t, "break") || is_name(t, "continue")) {
        jnode *x = node(P, is_name(t, "break") ? N_BREAK : N_CONTINUE, t);
        block_end(P);
        return x;
    }
    if (is_name(t, "generation")) {
        jnode *x = node(P, N_GENERATION, t);
        block_end(P);
        static const char *const g_end[] = {"endgeneration", NULL};
        x->b = body(P, g_end, &end);
        block_end(P);
        return x;
    }
    char nm[64];
    snprintf(nm, sizeof nm, "%.*s", (int)(t->n < 60 ? t->n : 60), t->s);
    static const char *const known[] = {"include", "import", "from", "extends", "block", "with", "filter", "autoescape",
                                        "print", NULL};
    if (tag_is(t, known)) pfail(P, t, "the '%s' tag is not supported by celer's template subset", nm);
    pfail(P, t, "unknown tag '%s' (or a closing tag without its opening tag)", nm);
}

void jinja_parse(jinja_program *prog, const char *src, size_t len, jinja_fail_ctx *f)
{
    jtok  *toks;
    size_t n;
    jinja_lex(src, len, &prog->arena, f, &toks, &n);
    parser P = {.t = toks, .n = n, .a = &prog->arena, .f = f};
    prog->root = body(&P, NULL, NULL);
}
