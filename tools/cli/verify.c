/* celer verify: does a backend compute the same model as another one? What a user runs when a
 * GPU's output looks wrong. The model is loaded twice, on the backend under test (A) and on the
 * reference (B, the CPU by default). For each prompt, B continues it greedily; then the prompt and
 * that continuation run through both engines as a prefill (teacher forcing, celer_engine_eval),
 * and their logits are compared at every position, the way tests/reference/test_mlx_parity.py
 * compares celer with mlx-lm (docs/correctness.md): A's top-1 token must be B's wherever B's top-1
 * beats its top-2 by the margin (a decided position). Relative L2 error and the largest |Δlogit|
 * show how close the rest is.
 *
 * With --decode the backend is checked against itself: it continues each prompt greedily by
 * decode steps (one token a step, its KV cache reused, step graphs on a GPU), keeping each step's
 * logits, then runs the whole sequence as one prefill, and every decoded position's logits are
 * compared with the prefill's (the reference) in the same way: a token must not depend on
 * whether it was prefilled or decoded. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW       64   /* positions compared per celer_engine_eval call: bounds the rows held */
#define MAX_LISTED   20   /* mismatches listed in the text report */
#define MAX_RECORDED 1000 /* mismatches kept for the report (all are counted) */
#define MAX_DECODE   1024 /* --decode keeps each step's logits: tokens a prompt at most */

/* Short and varied: prose, code, digits, markup, other scripts, a question. */
static const char *const builtin_prompts[] = {
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Once upon a time, in a small village by the sea, there lived",
    "1, 1, 2, 3, 5, 8, 13, 21,",
    "<!DOCTYPE html>\n<html>\n<head>\n  <title>",
    "Der schnellste Weg von Berlin nach München ist",
    "東京は日本の首都で、",
    "Q: Why is the sky blue?\nA:",
};

static void verify_usage(FILE *out)
{
    fprintf(out,
            "usage: celer verify [-m MODEL] [--backend B] [--against B | --decode] [--prompts FILE] [-n N]\n"
            "                    [--margin M] [--ctx N] [--threads N] [--json]\n\n"
            "Checks that a backend computes the same model as another one (the CPU by default): run it when\n"
            "a GPU's output looks wrong. Loads the model on both. For each prompt, the reference (--against)\n"
            "continues it greedily for N tokens (until an end-of-text token); then the prompt and that\n"
            "continuation run through both engines as one prefill, and their logits are compared at every\n"
            "position (position i: the logits after the sequence's first i + 1 tokens, BOS included).\n"
            "A position is decided when the reference's top-1 logit beats its top-2 by at least M nats\n"
            "(docs/correctness.md); there the two top-1 tokens must be equal. Reported per prompt and in\n"
            "total: positions, decided positions, mismatches at decided positions, disagreements at\n"
            "undecided ones (not failures), the relative L2 error of the backend's logits against the\n"
            "reference's (|a - b| / |b| per position: median and max) and the largest |a - b| of one logit.\n\n"
            "options:\n"
            "  -m, --model MODEL     a .gguf file or model directory (default: the default model)\n"
            "  -b, --backend B       the backend to check: auto, cpu, cuda or rocm (default auto: the best\n"
            "                        this build has)\n"
            "  -a, --against B       the reference backend, the same choices (default cpu)\n"
            "  -d, --decode          check the backend against itself instead: it continues each prompt by\n"
            "                        decode steps (one token a step, as generate runs), then runs the whole\n"
            "                        sequence as one prefill; each decoded position's logits are compared with\n"
            "                        the prefill's (the reference). -n at most 1024\n"
            "  -f, --prompts FILE    one prompt per line instead of the built-in 8 (- for stdin; blank lines\n"
            "                        are skipped; a line starting with \" is one JSON string, for newlines)\n"
            "  -n, --max-tokens N    tokens the reference generates per prompt (default 32; 0: only the prompt)\n"
            "      --margin M        the decided-position margin in nats (default 0.05)\n"
            "  -c, --ctx N           context length (default: what the longest prompt and N tokens need)\n"
            "  -t, --threads N       CPU threads of each engine (default: one per physical core)\n"
            "  -j, --json            one JSON object on stdout instead of the report\n"
            "  -h, --help            show this help\n\n"
            "exit codes: 0 the backends agree at every decided position; 1 they do not (or the backend gave\n"
            "NaN or infinite logits): the report names the prompt, the position and both tokens; 2 bad input\n"
            "(options, files, an unsupported model, a backend this build does not have); 3 runtime failure\n"
            "(out of memory; a device failure: a GPU fault, out of device memory, a timeout, no device).\n");
}

/* ---- prompts ------------------------------------------------------------ */

typedef struct {
    char  **text; /* (n) NUL-terminated, malloc'd */
    size_t *len;  /* (n) bytes */
    size_t  n, cap;
} prompt_list;

static void prompts_free(prompt_list *p)
{
    for (size_t i = 0; i < p->n; i++) free(p->text[i]);
    free(p->text);
    free(p->len);
    *p = (prompt_list){0};
}

static int prompts_add(prompt_list *p, const char *s, size_t n)
{
    if (p->n == p->cap) {
        size_t  cap = p->cap ? 2 * p->cap : 16;
        char  **t   = realloc(p->text, cap * sizeof *t);
        if (t) p->text = t;
        size_t *l = t ? realloc(p->len, cap * sizeof *l) : NULL;
        if (!l) return EXIT_RUNTIME;
        p->len = l, p->cap = cap;
    }
    char *c = malloc(n + 1);
    if (!c) return EXIT_RUNTIME;
    memcpy(c, s, n);
    c[n]           = '\0';
    p->text[p->n]  = c;
    p->len[p->n++] = n;
    return EXIT_OK;
}

/* The non-blank lines of path (- for stdin); a line starting with '"' is one JSON string. */
static int prompts_read(prompt_list *p, const char *path)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        fprintf(stderr, "celer verify: --prompts %s: cannot open it (%s); give a text file with one prompt per line\n",
                path, strerror(errno));
        return EXIT_BAD_INPUT;
    }
    char   *line = NULL;
    size_t  cap  = 0;
    ssize_t n;
    long    no = 0;
    int     rc = EXIT_OK;
    while (rc == EXIT_OK && (n = getline(&line, &cap, f)) >= 0) {
        no++;
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        size_t sp = strspn(line, " \t");
        if ((size_t)n == sp) continue;
        char what[300];
        snprintf(what, sizeof what, "%.256s:%ld", path, no);
        if (memchr(line, '\0', (size_t)n)) {
            fprintf(stderr, "celer verify: %s: line %ld has a NUL byte; give text, one prompt per line\n", path, no);
            rc = EXIT_BAD_INPUT;
        } else if (cli_check_utf8("verify", what, line)) {
            rc = EXIT_BAD_INPUT;
        } else if (line[sp] == '"') {
            char  *s;
            size_t sn;
            if (cli_json_string_decode(line, (size_t)n, &s, &sn)) {
                fprintf(stderr, "celer verify: %s:%ld: a line starting with \" must be one JSON string (for a prompt "
                                "with newlines); write \\\" for a quote\n", path, no);
                rc = EXIT_BAD_INPUT;
            } else {
                if (memchr(s, '\0', sn)) {
                    fprintf(stderr, "celer verify: %s:%ld: the JSON string holds \\u0000; prompts are text\n", path, no);
                    rc = EXIT_BAD_INPUT;
                } else if (sn) {
                    rc = prompts_add(p, s, sn);
                }
                free(s);
            }
        } else {
            rc = prompts_add(p, line, (size_t)n);
        }
    }
    if (rc == EXIT_OK && ferror(f)) {
        fprintf(stderr, "celer verify: --prompts %s: %s\n", path, strerror(errno));
        rc = EXIT_BAD_INPUT;
    }
    free(line);
    if (f != stdin) fclose(f);
    if (rc == EXIT_OK && !p->n) {
        fprintf(stderr, "celer verify: --prompts %s has no prompts (no line with text); give one prompt per line\n",
                path);
        rc = EXIT_BAD_INPUT;
    }
    return rc;
}

/* ---- comparing logits ------------------------------------------------------ */

/* Counts over positions; l2 holds each position's relative L2 error, for the median. */
typedef struct {
    int64_t positions, decided, mismatches, undecided_diff, non_finite;
    double  l2_max, abs_max;
    double *l2;
    size_t  n_l2, cap_l2;
} tally;

typedef struct {
    size_t  prompt;
    int64_t pos;
    int32_t after;         /* the token at pos: the logits follow it */
    int32_t a_id, b_id;    /* the two top-1 tokens */
    float   a_top, a_of_b; /* A's logit of its top-1, and of B's */
    float   b_top, b_of_a; /* B's logit of its top-1, and of A's */
    float   margin;        /* B's top-1 minus its top-2 */
} mismatch;

typedef struct {
    const celer_tokenizer *tok;
    const char            *name_a, *name_b;
    float                  margin;
    bool                   decode; /* --decode: A is the backend's decode steps, B its prefill */
    tally                  total;
    mismatch              *mm; /* (MAX_RECORDED) */
    size_t                 n_mm;
    int64_t                nf_pos;    /* the first position with a non-finite logit, and its prompt */
    size_t                 nf_prompt;
    int                    nf_who;    /* where non-finite logits came from: 1 the checked backend, 2 the reference */
} verify_ctx;

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, size_t n)
{
    if (!n) return 0;
    qsort(v, n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int tally_push_l2(tally *t, double x)
{
    if (t->n_l2 == t->cap_l2) {
        size_t  cap = t->cap_l2 ? 2 * t->cap_l2 : 256;
        double *l   = realloc(t->l2, cap * sizeof *l);
        if (!l) return EXIT_RUNTIME;
        t->l2 = l, t->cap_l2 = cap;
    }
    t->l2[t->n_l2++] = x;
    return EXIT_OK;
}

/* The largest logit's id, the lowest id on ties (as greedy sampling picks). */
static int32_t argmax(const float *x, int64_t n)
{
    int32_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = (int32_t)i;
    return best;
}

/* Compares one position: a, b (n_vocab) are A's and B's logits after seq[pos]. */
static int compare_row(verify_ctx *v, tally *t, size_t prompt, int64_t pos, int32_t after, const float *a,
                       const float *b, int64_t n_vocab)
{
    double d2 = 0, b2 = 0, amax = 0;
    bool   finite = true;
    for (int64_t i = 0; i < n_vocab; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) {
            v->nf_who |= (!isfinite(a[i]) ? 1 : 0) | (!isfinite(b[i]) ? 2 : 0);
            finite = false;
            continue;
        }
        double d = (double)a[i] - (double)b[i];
        d2 += d * d, b2 += (double)b[i] * b[i];
        if (fabs(d) > amax) amax = fabs(d);
    }
    t->positions++;
    if (!finite) {
        if (!v->total.non_finite && !t->non_finite) v->nf_prompt = prompt, v->nf_pos = pos;
        t->non_finite++;
        return EXIT_OK;
    }
    double l2 = b2 > 0 ? sqrt(d2 / b2) : sqrt(d2);
    if (l2 > t->l2_max) t->l2_max = l2;
    if (amax > t->abs_max) t->abs_max = amax;
    if (tally_push_l2(t, l2)) return EXIT_RUNTIME;
    int32_t ia = argmax(a, n_vocab), ib = argmax(b, n_vocab), ib2 = ib ? 0 : 1;
    for (int64_t i = 0; i < n_vocab; i++)
        if (i != ib && b[i] > b[ib2]) ib2 = (int32_t)i;
    float margin = n_vocab > 1 ? b[ib] - b[ib2] : INFINITY;
    if (margin < v->margin) {
        t->undecided_diff += ia != ib;
        return EXIT_OK;
    }
    t->decided++;
    if (ia == ib) return EXIT_OK;
    t->mismatches++;
    if (v->n_mm < MAX_RECORDED)
        v->mm[v->n_mm++] = (mismatch){.prompt = prompt, .pos = pos, .after = after, .a_id = ia, .b_id = ib,
                                      .a_top = a[ia], .a_of_b = a[ib], .b_top = b[ib], .b_of_a = b[ia],
                                      .margin = margin};
    return EXIT_OK;
}

static void tally_add(tally *sum, const tally *t)
{
    sum->positions += t->positions, sum->decided += t->decided, sum->mismatches += t->mismatches;
    sum->undecided_diff += t->undecided_diff, sum->non_finite += t->non_finite;
    if (t->l2_max > sum->l2_max) sum->l2_max = t->l2_max;
    if (t->abs_max > sum->abs_max) sum->abs_max = t->abs_max;
}

/* ---- one prompt ------------------------------------------------------------ */

typedef struct {
    int32_t *seq;      /* (cap) the prompt's tokens, then the reference's continuation */
    float   *ra, *rb;  /* (WINDOW, n_vocab) rows of A's and B's logits */
    float   *dec;      /* --decode: (max_gen, n_vocab) rows of A's decode steps */
    int64_t  n_vocab;
    int32_t  max_gen;
} buffers;

/* e continues bf->seq (n_prompt tokens) greedily, one token a step (decode steps after the
 * first, which runs the prompt), for up to bf->max_gen tokens or until an end-of-text token; step
 * k's logits (after position n_prompt + k - 1) go to rows + k · stride (stride 0: one row, each
 * step's over the last's). *n: the sequence's length after; *steps: the steps run. */
static celer_status continue_greedy(const verify_ctx *v, celer_engine *e, buffers *bf, size_t n_prompt, float *rows,
                                     size_t stride, size_t *n, size_t *steps, celer_error *err)
{
    int32_t eos = celer_tokenizer_eos(v->tok);
    *n = n_prompt, *steps = 0;
    while (*steps < (size_t)bf->max_gen) {
        float       *row = rows + *steps * stride;
        celer_status st  = celer_engine_eval(e, bf->seq, *n, 1, row, err);
        if (st) return st;
        ++*steps;
        int32_t id = argmax(row, bf->n_vocab);
        if (id == eos || celer_tokenizer_is_control(v->tok, id)) break;
        bf->seq[(*n)++] = id;
    }
    return CELER_OK;
}

/* Greedy continuation on b, then both engines over the whole sequence. *n_seq: its length. */
static celer_status run_prompt(verify_ctx *v, celer_engine *a, celer_engine *b, buffers *bf, size_t prompt,
                               size_t n_prompt, size_t *n_seq, tally *t, int *rc, celer_error *err)
{
    size_t n, steps;
    if (continue_greedy(v, b, bf, n_prompt, bf->rb, 0, &n, &steps, err)) return err->code;
    *n_seq = n;
    for (size_t start = 0; start < n && *rc == EXIT_OK; start += WINDOW) {
        size_t       end = n - start < WINDOW ? n : start + WINDOW;
        celer_status st  = celer_engine_eval(b, bf->seq, end, end - start, bf->rb, err);
        if (!st) st = celer_engine_eval(a, bf->seq, end, end - start, bf->ra, err);
        if (st) return st;
        for (size_t r = 0; r < end - start && *rc == EXIT_OK; r++)
            *rc = compare_row(v, t, prompt, (int64_t)(start + r), bf->seq[start + r], bf->ra + r * (size_t)bf->n_vocab,
                              bf->rb + r * (size_t)bf->n_vocab, bf->n_vocab);
    }
    return CELER_OK;
}

/* --decode: a continues greedily by decode steps, keeping each step's logits; then a runs the
 * whole sequence as a prefill, the reference, and each decoded position is compared with it. The
 * first step runs the prompt itself (a prefill): positions n_prompt .. are the decoded ones. */
static celer_status run_prompt_decode(verify_ctx *v, celer_engine *a, buffers *bf, size_t prompt, size_t n_prompt,
                                      size_t *n_seq, tally *t, int *rc, celer_error *err)
{
    size_t n, steps;
    if (continue_greedy(v, a, bf, n_prompt, bf->dec, (size_t)bf->n_vocab, &n, &steps, err)) return err->code;
    *n_seq = n;
    const size_t first = n_prompt, last = n_prompt + steps - 1; /* decoded positions: [first, last) */
    for (size_t start = 0; start < n && start < last && *rc == EXIT_OK; start += WINDOW) {
        size_t       end = n - start < WINDOW ? n : start + WINDOW;
        celer_status st  = celer_engine_eval(a, bf->seq, end, end - start, bf->rb, err);
        if (st) return st;
        for (size_t r = 0; r < end - start && *rc == EXIT_OK; r++) {
            const size_t pos = start + r;
            if (pos < first || pos >= last) continue;
            *rc = compare_row(v, t, prompt, (int64_t)pos, bf->seq[pos],
                              bf->dec + (pos - n_prompt + 1) * (size_t)bf->n_vocab, bf->rb + r * (size_t)bf->n_vocab,
                              bf->n_vocab);
        }
    }
    return CELER_OK;
}

/* ---- the report ------------------------------------------------------------ */

/* The text of one token (malloc'd), or "<id N>" when it has none. */
static char *token_text(const celer_tokenizer *tok, int32_t id)
{
    celer_error err = {0};
    char       *s   = NULL;
    size_t      n;
    if (celer_tokenizer_decode(tok, &id, 1, &s, &n, &err) == CELER_OK) return s;
    s = malloc(32);
    if (s) snprintf(s, 32, "<id %d>", id);
    return s;
}

static void print_token(const celer_tokenizer *tok, int32_t id)
{
    char *s = token_text(tok, id);
    cli_json_string_print(stdout, s ? s : "?", s ? strlen(s) : 1);
    free(s);
}

static void print_row(const char *label, const tally *t, double l2_median)
{
    printf("%-6s %9lld %8lld %10lld %10lld %12.3e %12.3e %13.3e", label, (long long)t->positions,
           (long long)t->decided, (long long)t->mismatches, (long long)t->undecided_diff, l2_median, t->l2_max,
           t->abs_max);
}

static void print_mismatch(const verify_ctx *v, const mismatch *m)
{
    printf("mismatch: prompt %zu, position %lld (after ", m->prompt + 1, (long long)m->pos);
    print_token(v->tok, m->after);
    printf("): %s%s (checked) picks ", v->name_a, v->decode ? "'s decode step" : "");
    print_token(v->tok, m->a_id);
    printf(" (id %d, logit %.4f; the reference gives it %.4f); %s%s (reference) picks ", m->a_id, m->a_top, m->b_of_a,
           v->name_b, v->decode ? "'s prefill" : "");
    print_token(v->tok, m->b_id);
    printf(" (id %d, logit %.4f, %.4f over its runner-up; the checked backend gives it %.4f)\n", m->b_id, m->b_top,
           m->margin, m->a_of_b);
}

/* t's fields added to o (a new object when NULL); returns o. */
static cJSON *tally_json(cJSON *o, const tally *t, double l2_median)
{
    if (!o) o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "positions", (double)t->positions);
    cJSON_AddNumberToObject(o, "decided", (double)t->decided);
    cJSON_AddNumberToObject(o, "mismatches", (double)t->mismatches);
    cJSON_AddNumberToObject(o, "undecided_disagreements", (double)t->undecided_diff);
    cJSON_AddNumberToObject(o, "non_finite", (double)t->non_finite);
    cJSON_AddNumberToObject(o, "rel_l2_median", l2_median);
    cJSON_AddNumberToObject(o, "rel_l2_max", t->l2_max);
    cJSON_AddNumberToObject(o, "max_abs_dlogit", t->abs_max);
    return o;
}

static cJSON *token_json(const celer_tokenizer *tok, int32_t id, float logit)
{
    cJSON *o = cJSON_CreateObject();
    char  *s = token_text(tok, id);
    cJSON_AddNumberToObject(o, "id", id);
    cJSON_AddStringToObject(o, "text", s ? s : "?");
    cJSON_AddNumberToObject(o, "logit", logit);
    free(s);
    return o;
}

static cJSON *mismatch_json(const verify_ctx *v, const mismatch *m)
{
    cJSON *o = cJSON_CreateObject();
    char  *s = token_text(v->tok, m->after);
    cJSON_AddNumberToObject(o, "prompt", (double)m->prompt + 1);
    cJSON_AddNumberToObject(o, "position", (double)m->pos);
    cJSON_AddStringToObject(o, "after", s ? s : "?");
    free(s);
    cJSON *a = token_json(v->tok, m->a_id, m->a_top), *b = token_json(v->tok, m->b_id, m->b_top);
    cJSON_AddNumberToObject(a, "reference_logit", m->b_of_a);
    cJSON_AddNumberToObject(b, "margin", m->margin);
    cJSON_AddNumberToObject(b, "backend_logit", m->a_of_b);
    cJSON_AddItemToObject(o, "backend", a);
    cJSON_AddItemToObject(o, "reference", b);
    return o;
}

/* ---- the command ------------------------------------------------------------ */

int cmd_verify(int argc, char **argv)
{
    enum { O_MARGIN = 256 };
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'},      {"backend", required_argument, NULL, 'b'},
        {"against", required_argument, NULL, 'a'},    {"prompts", required_argument, NULL, 'f'},
        {"max-tokens", required_argument, NULL, 'n'}, {"margin", required_argument, NULL, O_MARGIN},
        {"ctx", required_argument, NULL, 'c'},        {"threads", required_argument, NULL, 't'},
        {"json", no_argument, NULL, 'j'},             {"help", no_argument, NULL, 'h'},
        {"decode", no_argument, NULL, 'd'},           {0},
    };
    const char         *model = NULL, *prompts_path = NULL, *against = "cpu";
    celer_engine_config cfg_a = {0};
    long                max_gen = 32, ctx = 0, v;
    double              margin  = 0.05;
    bool                json = false, decode = false, against_given = false;
    int                 c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":m:b:a:f:n:c:t:jhd", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'b':
            if (cli_parse_backend("verify", "--backend", optarg, &cfg_a.backend)) return EXIT_BAD_INPUT;
            break;
        case 'a':
            if (cli_parse_backend("verify", "--against", optarg, &against)) return EXIT_BAD_INPUT;
            against_given = true;
            break;
        case 'd': decode = true; break;
        case 'f': prompts_path = optarg; break;
        case 'n':
            if (!cli_parse_long(optarg, 0, 1 << 16, &max_gen))
                return cli_usage_error("verify", "--max-tokens wants 0 to 65536, got '%s'", optarg);
            break;
        case O_MARGIN:
            if (!cli_parse_double(optarg, 0, 1000, &margin))
                return cli_usage_error("verify", "--margin wants 0 to 1000 nats, got '%s'", optarg);
            break;
        case 'c':
            if (!cli_parse_long(optarg, 16, 1 << 24, &ctx))
                return cli_usage_error("verify", "--ctx wants 16 to 16777216, got '%s'", optarg);
            break;
        case 't':
            if (!cli_parse_long(optarg, 1, 1024, &v))
                return cli_usage_error("verify", "--threads wants 1 to 1024, got '%s'", optarg);
            cfg_a.n_threads = (int)v;
            break;
        case 'j': json = true; break;
        case 'h': verify_usage(stdout); return EXIT_OK;
        case ':': return cli_usage_error("verify", "option %s needs a value", argv[optind - 1]);
        default: return cli_usage_error("verify", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("verify", "unexpected argument '%s'", argv[optind]);
    if (decode && against_given)
        return cli_usage_error("verify", "--decode checks a backend against its own prefill: drop --against");
    if (decode && max_gen > MAX_DECODE)
        return cli_usage_error("verify", "--decode keeps each step's logits: --max-tokens at most %d, got %ld",
                               MAX_DECODE, max_gen);

    prompt_list prompts = {0};
    int         rc      = EXIT_OK;
    if (prompts_path) {
        rc = prompts_read(&prompts, prompts_path);
    } else {
        for (size_t i = 0; i < sizeof builtin_prompts / sizeof builtin_prompts[0] && !rc; i++)
            rc = prompts_add(&prompts, builtin_prompts[i], strlen(builtin_prompts[i]));
    }
    if (rc) {
        prompts_free(&prompts);
        return rc;
    }
    if (!model && !(model = cli_default_model())) {
        prompts_free(&prompts);
        return EXIT_BAD_INPUT;
    }

    /* the prompts' tokens first (the file and its tokenizer only): they size the context */
    celer_error       err = {0};
    celer_model_file *mf  = NULL;
    celer_tokenizer  *tok = NULL;
    int32_t         **ids   = calloc(prompts.n, sizeof *ids);
    size_t           *n_ids = calloc(prompts.n, sizeof *n_ids);
    celer_engine     *ea = NULL, *eb = NULL;
    buffers           bf = {0};
    verify_ctx        vc = {.margin = (float)margin, .decode = decode};
    tally            *per = calloc(prompts.n, sizeof *per);
    size_t            longest = 0;
    if (!ids || !n_ids || !per) rc = EXIT_RUNTIME;
    if (!rc && (celer_model_file_open(&mf, model, &err) || celer_tokenizer_load(&tok, mf, &err))) rc = cli_report(&err);
    for (size_t i = 0; i < prompts.n && !rc; i++) {
        celer_encode_opts eo = {.add_special = true, .parse_special = false};
        if (celer_tokenizer_encode(tok, prompts.text[i], prompts.len[i], eo, &ids[i], &n_ids[i], &err)) rc = cli_report(&err);
        else if (!n_ids[i]) rc = cli_usage_error("verify", "prompt %zu encodes to no tokens", i + 1);
        else if (n_ids[i] > longest) longest = n_ids[i];
    }
    long need = (long)longest + max_gen; /* positions of the longest sequence */
    if (!rc && ctx && ctx < need)
        rc = cli_usage_error("verify", "the longest prompt has %zu tokens; with --max-tokens %ld it needs a context "
                             "of %ld, more than --ctx %ld; raise --ctx or lower --max-tokens", longest, max_gen, need, ctx);
    if (!rc && !ctx && need > (1l << 24))
        rc = cli_usage_error("verify", "the longest prompt has %zu tokens: too long for celer", longest);
    celer_tokenizer_free(tok);
    celer_model_file_close(mf);
    tok = NULL, mf = NULL;

    /* the backend under test first: one that is missing fails before the reference loads */
    celer_engine_config cfg_b = cfg_a;
    cfg_a.n_ctx = cfg_b.n_ctx = ctx ? ctx : (need > 16 ? need : 16);
    cfg_b.backend             = against;
    if (!rc && celer_engine_create(&ea, model, &cfg_a, &err)) rc = cli_report(&err);
    if (!rc && !decode && celer_engine_create(&eb, model, &cfg_b, &err)) rc = cli_report(&err);
    if (!rc) {
        cli_print_loaded(model, ea);
        if (eb) cli_print_loaded(model, eb);
        vc.tok    = celer_engine_tokenizer(eb ? eb : ea);
        vc.name_a = celer_engine_backend_name(ea);
        vc.name_b = eb ? celer_engine_backend_name(eb) : vc.name_a;
        if (eb && !strcmp(vc.name_a, vc.name_b))
            fprintf(stderr, "celer verify: note: both engines run on %s, so the comparison is trivial: it only checks "
                            "that two loads agree; give --backend cuda or rocm to check a GPU\n", vc.name_a);
        bf.n_vocab = celer_model_file_hparams(celer_engine_model_file(ea))->n_vocab;
        bf.max_gen = (int32_t)max_gen;
        bf.seq     = malloc((size_t)need * sizeof *bf.seq);
        bf.ra      = malloc((size_t)WINDOW * (size_t)bf.n_vocab * sizeof *bf.ra);
        bf.rb      = malloc((size_t)WINDOW * (size_t)bf.n_vocab * sizeof *bf.rb);
        bf.dec     = decode ? malloc(((size_t)max_gen + 1) * (size_t)bf.n_vocab * sizeof *bf.dec) : NULL; /* -n 0 too */
        vc.mm      = malloc(MAX_RECORDED * sizeof *vc.mm);
        if (!bf.seq || !bf.ra || !bf.rb || (decode && !bf.dec) || !vc.mm) rc = EXIT_RUNTIME;
    }
    size_t *n_seq = rc ? NULL : calloc(prompts.n, sizeof *n_seq);
    if (!rc && !n_seq) rc = EXIT_RUNTIME;
    if (!rc && !json && !decode)
        fprintf(stderr, "celer verify: %zu prompts, %ld tokens each generated greedily on %s, compared at every "
                        "position; decided: %s's top-1 beats its top-2 by at least %g nats\n",
                prompts.n, max_gen, vc.name_b, vc.name_b, margin);
    if (!rc && !json && decode)
        fprintf(stderr, "celer verify: %zu prompts, up to %ld tokens each generated greedily on %s by decode steps, each "
                        "compared with %s's prefill of the same tokens; decided: the prefill's top-1 beats its top-2 "
                        "by at least %g nats\n", prompts.n, max_gen, vc.name_a, vc.name_a, margin);
    for (size_t i = 0; i < prompts.n && !rc; i++) {
        memcpy(bf.seq, ids[i], n_ids[i] * sizeof *bf.seq);
        celer_status st = decode ? run_prompt_decode(&vc, ea, &bf, i, n_ids[i], &n_seq[i], &per[i], &rc, &err)
                                 : run_prompt(&vc, ea, eb, &bf, i, n_ids[i], &n_seq[i], &per[i], &rc, &err);
        if (st) rc = cli_report(&err);
        if (!rc) tally_add(&vc.total, &per[i]);
        for (size_t k = 0; k < per[i].n_l2 && !rc; k++) rc = tally_push_l2(&vc.total, per[i].l2[k]);
    }
    if (rc == EXIT_RUNTIME && !err.msg[0]) fprintf(stderr, "celer verify: out of memory\n");

    if (!rc && !vc.total.decided && vc.total.positions)
        fprintf(stderr, "celer verify: warning: no position was decided (%s's top-1 never beat its top-2 by %g nats), "
                        "so no token was compared; give more or longer prompts, or a lower --margin\n", vc.name_b, margin);
    if (!rc) {
        bool ok = !vc.total.mismatches && !vc.total.non_finite;
        if (json) {
            cJSON *o = cJSON_CreateObject(), *ps = cJSON_CreateArray(), *ms = cJSON_CreateArray();
            cJSON_AddStringToObject(o, "model", model);
            cJSON_AddStringToObject(o, "backend", vc.name_a);
            cJSON_AddStringToObject(o, "against", decode ? "prefill" : vc.name_b);
            cJSON_AddStringToObject(o, "mode", decode ? "decode" : "backends");
            cJSON_AddBoolToObject(o, "trivial", !decode && !strcmp(vc.name_a, vc.name_b));
            cJSON_AddNumberToObject(o, "margin", margin);
            cJSON_AddNumberToObject(o, "max_tokens", (double)max_gen);
            cJSON_AddNumberToObject(o, "ctx", (double)celer_engine_ctx(ea));
            for (size_t i = 0; i < prompts.n; i++) {
                cJSON *p = cJSON_CreateObject();
                cJSON_AddItemToObject(p, "prompt", cJSON_CreateString(prompts.text[i]));
                cJSON_AddNumberToObject(p, "prompt_tokens", (double)n_ids[i]);
                cJSON_AddNumberToObject(p, "generated", (double)(n_seq[i] - n_ids[i]));
                cJSON_AddItemToArray(ps, tally_json(p, &per[i], median(per[i].l2, per[i].n_l2)));
            }
            cJSON_AddItemToObject(o, "prompts", ps);
            cJSON_AddItemToObject(o, "total", tally_json(NULL, &vc.total, median(vc.total.l2, vc.total.n_l2)));
            for (size_t i = 0; i < vc.n_mm; i++) cJSON_AddItemToArray(ms, mismatch_json(&vc, &vc.mm[i]));
            cJSON_AddItemToObject(o, "mismatches", ms);
            if (vc.nf_who)
                cJSON_AddStringToObject(o, "non_finite_from",
                                        vc.nf_who == 1 ? "backend" : vc.nf_who == 2 ? "reference" : "both");
            cJSON_AddBoolToObject(o, "ok", ok);
            char *s = cJSON_PrintUnformatted(o);
            if (s) printf("%s\n", s);
            free(s);
            cJSON_Delete(o);
        } else {
            if (decode) printf("verify %s: %s decode steps against its prefill\n", model, vc.name_a);
            else printf("verify %s: %s against %s\n", model, vc.name_a, vc.name_b);
            printf("%-6s %9s %8s %10s %10s %12s %12s %13s  %s\n", "prompt", "positions", "decided", "mismatches",
                   "undecided", "relL2 median", "relL2 max", "max |dlogit|", "text");
            for (size_t i = 0; i < prompts.n; i++) {
                char label[24];
                snprintf(label, sizeof label, "%zu", i + 1);
                print_row(label, &per[i], median(per[i].l2, per[i].n_l2));
                size_t shown = prompts.len[i] > 40 ? 40 : prompts.len[i]; /* whole UTF-8 sequences */
                while (shown < prompts.len[i] && ((unsigned char)prompts.text[i][shown] & 0xC0) == 0x80) shown--;
                printf("  ");
                cli_json_string_print(stdout, prompts.text[i], shown);
                printf("%s\n", shown < prompts.len[i] ? "..." : "");
            }
            print_row("total", &vc.total, median(vc.total.l2, vc.total.n_l2));
            printf("\n");
            for (size_t i = 0; i < vc.n_mm && i < MAX_LISTED; i++) print_mismatch(&vc, &vc.mm[i]);
            if (vc.total.mismatches > MAX_LISTED)
                printf("... and %lld more mismatches (--json lists up to %d)\n",
                       (long long)vc.total.mismatches - MAX_LISTED, MAX_RECORDED);
            if (vc.total.non_finite)
                printf("non-finite: %lld positions have NaN or infinite logits (from %s), the first at prompt %zu, "
                       "position %lld\n", (long long)vc.total.non_finite,
                       vc.nf_who == 1 ? "the checked backend" : vc.nf_who == 2 ? "the reference" : "both",
                       vc.nf_prompt + 1, (long long)vc.nf_pos);
            if (ok && decode)
                printf("ok: %s's decode steps agree with its prefill at all %lld decided positions (of %lld)\n",
                       vc.name_a, (long long)vc.total.decided, (long long)vc.total.positions);
            else if (ok)
                printf("ok: %s agrees with %s at all %lld decided positions (of %lld)\n", vc.name_a, vc.name_b,
                       (long long)vc.total.decided, (long long)vc.total.positions);
            else
                printf("FAILED: %lld mismatches at %lld decided positions (of %lld)%s\n", (long long)vc.total.mismatches,
                       (long long)vc.total.decided, (long long)vc.total.positions,
                       vc.total.non_finite ? ", and non-finite logits" : "");
        }
        rc = ok ? EXIT_OK : EXIT_CHECK_FAILED;
    }

    for (size_t i = 0; i < prompts.n; i++) {
        if (ids) free(ids[i]);
        if (per) free(per[i].l2);
    }
    free(ids);
    free(n_ids);
    free(per);
    free(n_seq);
    free(vc.total.l2);
    free(vc.mm);
    free(bf.seq);
    free(bf.ra);
    free(bf.rb);
    free(bf.dec);
    celer_engine_free(ea);
    celer_engine_free(eb);
    prompts_free(&prompts);
    return rc;
}
