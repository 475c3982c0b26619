/* The Jinja-subset interpreter behind chat templates (internal to src/chat).
 *
 * Pipeline: jinja_lex.c turns the source into tokens, applying whitespace control (trim_blocks,
 * lstrip_blocks, {%- -%}) exactly as jinja2's lexer does; jinja_parse.c builds an AST;
 * jinja_render.c walks it with Python/jinja2 value semantics (jinja_value.c), filters and tests
 * (jinja_filters.c), and methods and globals (jinja_methods.c).
 *
 * Memory: every value and AST node lives in an arena (jinja_arena) freed as a whole, so values
 * are passed by copy and never freed one by one. Errors inside lexing, parsing and rendering
 * unwind with longjmp to the public entry point (template.c), which turns them into a
 * celer_error; nothing is leaked because nothing outside the arenas is allocated on the way. */
#ifndef CELER_CHAT_JINJA_H
#define CELER_CHAT_JINJA_H

#include "celer.h"

#include <setjmp.h>
#include <stdarg.h>

/* ---- limits ---------------------------------------------------------------------------- */
#define JINJA_MAX_OUTPUT      (16u << 20)  /* bytes of rendered text */
#define JINJA_MAX_MEMORY      (256u << 20) /* arena bytes per render */
#define JINJA_MAX_ITERATIONS  1000000      /* loop iterations per render, all loops together */
#define JINJA_MAX_CALL_DEPTH  100          /* nested macro calls */
#define JINJA_MAX_NEST        200          /* nesting of expressions and blocks in the source */
#define JINJA_MAX_RANGE       100000       /* items from range(), as jinja2's sandbox allows */

/* ---- arena ------------------------------------------------------------------------------ */
typedef struct jchunk jchunk;
typedef struct {
    jchunk *head;
    size_t  used;  /* bytes handed out, all chunks */
    size_t  limit; /* 0: none */
} jinja_arena;

/* The error sink shared by lexer, parser and renderer. */
typedef struct {
    jmp_buf     jmp;
    celer_error *err;
    celer_status code;
    const char  *name; /* template name, for messages */
} jinja_fail_ctx;

_Noreturn void jinja_fail(jinja_fail_ctx *f, celer_status code, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

void *jinja_alloc(jinja_arena *a, jinja_fail_ctx *f, size_t n); /* zeroed */
void  jinja_arena_free(jinja_arena *a);

/* ---- values ----------------------------------------------------------------------------- */
typedef enum {
    JV_UNDEF, /* jinja2's default Undefined; s holds the name for messages */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,   /* UTF-8, s.p[0..s.n), not NUL-terminated */
    JV_LIST,  /* also tuples (flag JV_TUPLE) */
    JV_DICT,  /* insertion-ordered */
    JV_NS,    /* namespace(): a dict with attribute assignment */
    JV_MACRO,
    JV_FUNC,  /* a builtin global or a bound method */
    JV_LOOP,  /* the loop variable of a for */
} jtype;

#define JV_TUPLE 1u /* flag on JV_LIST */

typedef struct jlist  jlist;
typedef struct jdict  jdict;
typedef struct jmacro jmacro;
typedef struct jfunc  jfunc;
typedef struct jloop  jloop;

typedef struct jv {
    uint8_t t;
    uint8_t flags;
    union {
        bool    b;
        int64_t i;
        double  f;
        struct {
            const char *p;
            size_t      n;
        } s;
        jlist  *l;
        jdict  *d;
        jmacro *m;
        jfunc  *fn;
        jloop  *loop;
    } u;
} jv;

struct jlist {
    jv    *v; /* (n) */
    size_t n, cap;
};
struct jdict {
    jv    *k, *v; /* (n) each */
    size_t n, cap;
};

/* A growable byte buffer on the heap (output, captures, string building). */
typedef struct {
    char  *p;
    size_t n, cap;
    size_t limit; /* 0: none */
    bool   heap;  /* malloc'd (the final output, freed by its owner); else grows in the render arena */
} jbuf;

typedef struct jinja_rt jinja_rt;

/* Builtin callables: globals and methods. self is the receiver of a method. */
typedef struct {
    const jv          *args;
    size_t             n;
    const char *const *kw_names;
    const jv          *kw_vals;
    size_t             n_kw;
} jargs;
typedef jv (*jfunc_impl)(jinja_rt *rt, const jfunc *fn, const jargs *a);
struct jfunc {
    const char *name;
    jfunc_impl  impl;
    jv          self;
};

struct jloop {
    int64_t index0, length;
    jlist  *items;
};

/* ---- AST --------------------------------------------------------------------------------- */
typedef enum {
    /* expressions */
    N_LIT, N_NAME, N_LIST, N_TUPLE, N_DICT, N_GETATTR, N_GETITEM, N_SLICE, N_CALL, N_KWARG, N_FILTER, N_TEST,
    N_NEG, N_POS, N_NOT, N_BIN, N_AND, N_OR, N_CMP, N_COND, N_CONCAT,
    /* statements */
    N_BODY, N_TEXT, N_OUTPUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_CALLBLOCK, N_BREAK, N_CONTINUE, N_GENERATION,
} jnode_kind;

typedef enum {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN,
} jop;

typedef struct jnode jnode;
struct jnode {
    uint8_t  kind, op;
    bool     flag;        /* N_TEST: negated; N_FOR: has filter; N_DICT... */
    uint16_t depth;       /* expression nesting, bounded by JINJA_MAX_NEST */
    int      line, col;
    jnode   *a, *b, *c, *d;
    jnode  **kids;        /* args, items, body statements */
    uint32_t n;
    jnode  **kids2;       /* else body, macro defaults */
    uint32_t n2;
    const char *s;        /* names, text */
    size_t      sn;
    jv          lit;
};

typedef struct {
    jinja_arena    arena;
    jnode         *root; /* N_BODY */
    char          *name;
} jinja_program;

/* Lex and parse src into prog (nodes in prog->arena). Errors longjmp through f. */
void jinja_parse(jinja_program *prog, const char *src, size_t len, jinja_fail_ctx *f);

/* ---- tokens (between lexer and parser) ---------------------------------------------------- */
typedef enum {
    T_EOF, T_DATA, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STRING, T_INT, T_FLOAT, T_OP,
} jtok_kind;

typedef struct {
    uint8_t     kind;
    int         line, col;
    const char *s; /* text (data, name, op, decoded string), in the program arena */
    size_t      n;
    int64_t     i;
    double      f;
} jtok;

/* Tokenizes src into *toks (arena-allocated, ends with T_EOF). */
void jinja_lex(const char *src, size_t len, jinja_arena *a, jinja_fail_ctx *f, jtok **toks, size_t *n_toks);

/* ---- the renderer ------------------------------------------------------------------------ */
typedef struct jframe jframe;
struct jframe {
    jframe *parent;
    jdict   vars;
};

struct jinja_rt {
    jinja_fail_ctx *f;
    jinja_arena     arena;  /* values of this render */
    jbuf           *out;    /* where output goes now (captures swap it) */
    const jdict    *ctx;    /* render variables */
    jframe         *root;
    jframe         *cur_frame; /* where names resolve now */
    int64_t         iterations;
    int             depth;  /* macro calls */
    int             brk;    /* 1: break, 2: continue pending */
    int             line, col; /* of the node being evaluated, for messages */
    int64_t         now;    /* strftime_now time, seconds since the epoch (UTC) */
};

_Noreturn void jinja_rt_fail(jinja_rt *rt, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Renders prog with ctx into out. Errors longjmp through rt->f. */
void jinja_render(jinja_rt *rt, const jinja_program *prog);

/* ---- value helpers (jinja_value.c) ------------------------------------------------------- */
static inline jv jv_undef(const char *name) { jv v = {.t = JV_UNDEF}; v.u.s.p = name; v.u.s.n = name ? __builtin_strlen(name) : 0; return v; }
static inline jv jv_none(void) { jv v = {.t = JV_NONE}; return v; }
static inline jv jv_bool(bool b) { jv v = {.t = JV_BOOL}; v.u.b = b; return v; }
static inline jv jv_int(int64_t i) { jv v = {.t = JV_INT}; v.u.i = i; return v; }
static inline jv jv_float(double f) { jv v = {.t = JV_FLOAT}; v.u.f = f; return v; }
static inline jv jv_strn(const char *p, size_t n) { jv v = {.t = JV_STR}; v.u.s.p = p; v.u.s.n = n; return v; }

jv   jv_str_copy(jinja_rt *rt, const char *p, size_t n); /* copies into the arena */
jv   jv_str_buf(jinja_rt *rt, jbuf *b);                  /* an arena jbuf's text as a string; resets b */
jv   jv_list_new(jinja_rt *rt, size_t cap);
void jv_list_push(jinja_rt *rt, jlist *l, jv v);
jv   jv_dict_new(jinja_rt *rt);
void jv_dict_set(jinja_rt *rt, jdict *d, jv k, jv v);
const jv *jv_dict_get(const jdict *d, jv k);
const jv *jv_dict_gets(const jdict *d, const char *k, size_t n);
jv   jv_func(jinja_rt *rt, const char *name, jfunc_impl impl, jv self);

bool jv_truthy(jv v);
bool jv_is_num(jv v); /* bool, int, float */
double jv_num(jv v);
bool jv_equal(jv a, jv b);
/* Python ordering: <0, 0, >0; errors for types Python cannot order. */
int  jv_compare(jinja_rt *rt, jv a, jv b);
const char *jv_type_name(jv v); /* Python's: 'str', 'int', 'dict', ... */

/* str(v) and repr(v) as Python prints them, appended to b. */
void jv_write_str(jinja_rt *rt, jbuf *b, jv v);
void jv_write_repr(jinja_rt *rt, jbuf *b, jv v);
jv   jv_to_str(jinja_rt *rt, jv v); /* str(v) as a JV_STR */
size_t jinja_float_repr(char out[48], double f); /* repr(float), NUL-terminated; returns the length */

typedef struct {
    bool        ensure_ascii, sort_keys;
    const char *indent; /* NULL: none */
    size_t      indent_n;
    const char *item_sep, *key_sep;
    size_t      item_sep_n, key_sep_n;
} jjson_opts;
/* json.dumps(v, ...) as Python writes it. */
void jv_write_json(jinja_rt *rt, jbuf *b, jv v, const jjson_opts *o, int level);

/* Code points of a string: count, and the byte offset of the i-th (i <= count). */
size_t jv_str_len(jv s);
size_t jv_utf8_offset(const char *p, size_t n, size_t i);
bool   jinja_py_space(uint32_t cp); /* Python's str.isspace() for one code point */

void jbuf_put(jinja_rt *rt, jbuf *b, const char *s, size_t n);
void jbuf_putc(jinja_rt *rt, jbuf *b, char c);
void jbuf_printf(jinja_rt *rt, jbuf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void jbuf_free(jbuf *b);

/* ---- filters, tests, methods, globals --------------------------------------------------- */
/* Applies filter/test `name` to v; false when no such filter/test exists. */
bool jinja_filter(jinja_rt *rt, const char *name, size_t nn, jv v, const jargs *a, jv *out);
bool jinja_test(jinja_rt *rt, const char *name, size_t nn, jv v, const jargs *a, bool *out);
/* Attribute lookup for methods of str/dict/list and fields of loop; false when none. */
bool jinja_method(jinja_rt *rt, jv obj, const char *name, size_t nn, jv *out);
/* The environment's globals (range, namespace, dict, raise_exception, strftime_now, ...). */
bool jinja_global(jinja_rt *rt, const char *name, size_t nn, jv *out);
/* Iterates v into a list (str: code points, dict: keys); errors for what Python cannot iterate. */
jlist *jinja_iter(jinja_rt *rt, jv v);
/* Calls a callable value. */
jv jinja_call(jinja_rt *rt, jv callee, const jargs *a);
/* Argument helpers for builtins: the i-th positional or the keyword `name`, else dflt. */
jv jargs_get(const jargs *a, size_t i, const char *name, jv dflt);

#endif
