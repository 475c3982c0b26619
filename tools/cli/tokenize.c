/* celer tokenize: text → ids and pieces, ids → text, and line-oriented batch modes for scripts. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void tokenize_usage(FILE *out)
{
    fprintf(out, "usage: celer tokenize [-m MODEL] [options] TEXT\n"
                 "       celer tokenize [-m MODEL] --decode ID...\n"
                 "       celer tokenize [-m MODEL] --jsonl FILE | --decode-jsonl FILE\n\n"
                 "Prints the token ids and pieces of TEXT with the model's own tokenizer, or the text of ids.\n\n"
                 "options:\n"
                 "  -m, --model MODEL     a .gguf file or model directory (default: the default model,\n"
                 "                        see scripts/fetch-model)\n"
                 "  -d, --decode          the arguments are token ids: print their text\n"
                 "      --jsonl FILE      read one JSON string per line, write one JSON array of ids per line\n"
                 "      --decode-jsonl FILE  read one JSON array of ids per line, write one JSON string per line\n"
                 "      --no-special      treat special-token text in the input (<|im_start|>) as plain text\n"
                 "      --no-add-special  do not add BOS/EOS even where the model's config says to\n"
                 "      --ids             print only the ids, space-separated\n"
                 "  -h, --help            show this help\n"
                 "FILE may be - for standard input.\n");
}

typedef struct {
    const celer_tokenizer *tok;
    celer_encode_opts      opts;
    bool                   ids_only;
} tk_ctx;

static int print_encoded(const tk_ctx *c, const char *text)
{
    celer_error err = {0};
    int32_t    *ids;
    size_t      n;
    if (celer_tokenizer_encode(c->tok, text, strlen(text), c->opts, &ids, &n, &err)) return cli_report(&err);
    for (size_t i = 0; i < n; i++) {
        if (c->ids_only) {
            printf("%s%d", i ? " " : "", ids[i]);
            continue;
        }
        char  *piece;
        size_t len;
        if (celer_tokenizer_decode(c->tok, &ids[i], 1, &piece, &len, &err)) {
            free(ids);
            return cli_report(&err);
        }
        printf("%8d  ", ids[i]);
        cli_json_string_print(stdout, piece, len);
        putchar('\n');
        free(piece);
    }
    if (c->ids_only) putchar('\n');
    else printf("%zu tokens\n", n);
    free(ids);
    return EXIT_OK;
}

static bool parse_id(const char *s, int32_t *id)
{
    char *end;
    errno  = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > INT32_MAX) return false;
    *id = (int32_t)v;
    return true;
}

static int print_decoded(const tk_ctx *c, char **args, int n_args)
{
    int32_t *ids = malloc((size_t)(n_args ? n_args : 1) * sizeof *ids);
    if (!ids) return EXIT_RUNTIME;
    for (int i = 0; i < n_args; i++)
        if (!parse_id(args[i], &ids[i])) {
            free(ids);
            return cli_usage_error("tokenize", "'%s' is not a token id", args[i]);
        }
    celer_error err = {0};
    char       *text;
    size_t      len;
    int         rc = EXIT_OK;
    if (celer_tokenizer_decode(c->tok, ids, (size_t)n_args, &text, &len, &err))
        rc = cli_report(&err);
    else {
        fwrite(text, 1, len, stdout);
        putchar('\n');
        free(text);
    }
    free(ids);
    return rc;
}

/* One JSON array of ids per line: "[1, 2, 3]". */
static int parse_id_array(const char *line, int32_t **ids, size_t *n)
{
    size_t cap = 16;
    *ids = malloc(cap * sizeof **ids), *n = 0;
    if (!*ids) return -1;
    const char *p = line;
    while (*p == ' ') p++;
    if (*p++ != '[') return -1;
    for (;;) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ']') return 0;
        char *end;
        long  v = strtol(p, &end, 10);
        if (end == p || v < INT32_MIN || v > INT32_MAX) return -1;
        if (*n == cap) {
            int32_t *q = realloc(*ids, (cap *= 2) * sizeof *q);
            if (!q) return -1;
            *ids = q;
        }
        (*ids)[(*n)++] = (int32_t)v;
        p = end;
        if (*p != ',' && *p != ']' && *p != ' ') return -1;
    }
}

static int run_jsonl(const tk_ctx *c, const char *path, bool decode)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        fprintf(stderr, "celer: %s: cannot open: %s\n", path, strerror(errno));
        return EXIT_BAD_INPUT;
    }
    char       *line = NULL;
    size_t      cap  = 0;
    ssize_t     len;
    long        no = 0;
    int         rc = EXIT_OK;
    celer_error err = {0};
    while (rc == EXIT_OK && (len = getline(&line, &cap, f)) >= 0) {
        no++;
        if (decode) {
            int32_t *ids;
            size_t   n;
            char    *text;
            size_t   tn;
            if (parse_id_array(line, &ids, &n)) {
                fprintf(stderr, "celer: %s:%ld: expected a JSON array of token ids\n", path, no);
                rc = EXIT_BAD_INPUT;
            } else if (celer_tokenizer_decode(c->tok, ids, n, &text, &tn, &err)) {
                fprintf(stderr, "celer: %s:%ld: %s\n", path, no, err.msg);
                rc = celer_status_exit_code(err.code);
            } else {
                cli_json_string_print(stdout, text, tn);
                putchar('\n');
                free(text);
            }
            free(ids);
            continue;
        }
        char  *text;
        size_t tn;
        if (cli_json_string_decode(line, (size_t)len, &text, &tn)) {
            fprintf(stderr, "celer: %s:%ld: expected one JSON string per line\n", path, no);
            rc = EXIT_BAD_INPUT;
            break;
        }
        int32_t *ids;
        size_t   n;
        if (celer_tokenizer_encode(c->tok, text, tn, c->opts, &ids, &n, &err)) {
            fprintf(stderr, "celer: %s:%ld: %s\n", path, no, err.msg);
            rc = celer_status_exit_code(err.code);
        } else {
            putchar('[');
            for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
            puts("]");
            free(ids);
        }
        free(text);
    }
    free(line);
    if (f != stdin) fclose(f);
    return rc;
}

int cmd_tokenize(int argc, char **argv)
{
    enum { OPT_JSONL = 256, OPT_DECODE_JSONL, OPT_NO_SPECIAL, OPT_NO_ADD_SPECIAL, OPT_IDS };
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'},
        {"decode", no_argument, NULL, 'd'},
        {"jsonl", required_argument, NULL, OPT_JSONL},
        {"decode-jsonl", required_argument, NULL, OPT_DECODE_JSONL},
        {"no-special", no_argument, NULL, OPT_NO_SPECIAL},
        {"no-add-special", no_argument, NULL, OPT_NO_ADD_SPECIAL},
        {"ids", no_argument, NULL, OPT_IDS},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    const char *model = NULL, *jsonl = NULL, *decode_jsonl = NULL;
    bool        decode = false;
    tk_ctx      c      = {.opts = {.add_special = true, .parse_special = true}};
    int         o;
    opterr = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, ":m:dh", opts, NULL)) != -1) {
        switch (o) {
        case 'm': model = optarg; break;
        case 'd': decode = true; break;
        case OPT_JSONL: jsonl = optarg; break;
        case OPT_DECODE_JSONL: decode_jsonl = optarg; break;
        case OPT_NO_SPECIAL: c.opts.parse_special = false; break;
        case OPT_NO_ADD_SPECIAL: c.opts.add_special = false; break;
        case OPT_IDS: c.ids_only = true; break;
        case 'h': tokenize_usage(stdout); return EXIT_OK;
        case ':': return cli_usage_error("tokenize", "option %s needs a value", argv[optind - 1]);
        default: return cli_usage_error("tokenize", "unknown option '%s'", argv[optind - 1]);
        }
    }
    int n_args = argc - optind;
    if ((jsonl || decode_jsonl) && n_args)
        return cli_usage_error("tokenize", "--jsonl and --decode-jsonl take no other arguments");
    if (jsonl && decode_jsonl) return cli_usage_error("tokenize", "give --jsonl or --decode-jsonl, not both");
    if (!jsonl && !decode_jsonl && !decode && n_args != 1)
        return cli_usage_error("tokenize", n_args ? "give the text as one argument (quote it)" : "no text given");
    if (!model && !(model = cli_default_model())) return EXIT_BAD_INPUT;

    celer_error       err = {0};
    celer_model_file *mf  = NULL;
    celer_tokenizer  *tok = NULL;
    if (celer_model_file_open(&mf, model, &err) || celer_tokenizer_load(&tok, mf, &err)) {
        celer_model_file_close(mf);
        return cli_report(&err);
    }
    c.tok = tok;
    int rc;
    if (jsonl || decode_jsonl)
        rc = run_jsonl(&c, jsonl ? jsonl : decode_jsonl, decode_jsonl != NULL);
    else if (decode)
        rc = print_decoded(&c, argv + optind, n_args);
    else
        rc = print_encoded(&c, argv[optind]);
    celer_tokenizer_free(tok);
    celer_model_file_close(mf);
    if (fflush(stdout) != 0 && rc == EXIT_OK) rc = EXIT_RUNTIME;
    return rc;
}
