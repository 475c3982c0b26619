/* celer: the command line. main() is a flat dispatch; each subcommand is one function in its
 * own file and returns the process exit code. */
#include "cli.h"

#include "core/utf8.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"generate", cmd_generate, "generate text from a prompt"},
    {"chat", cmd_chat, "talk with a model interactively"},
    {"bench", cmd_bench, "prefill and decode speed of a model"},
    {"info", cmd_info, "describe this machine, or a model file (-m MODEL)"},
    {"tokenize", cmd_tokenize, "token ids of a text, or the text of token ids, with a model's tokenizer"},
    {"template", cmd_template, "render a chat template (a model's or a .jinja file) for a conversation"},
    {"quantize", cmd_quantize, "write a model as an MLX-format directory (affine, mxfp4, mxfp8, nvfp4)"},
    {"synth", cmd_synth, "write a random-weight GGUF model of a real shape, for benchmarks"},
    {"serve", cmd_serve, "serve a model over an OpenAI-compatible HTTP API"},
    {"verify", cmd_verify, "compare a backend's logits with another's (cpu) on the same model"},
};

static void usage(FILE *out)
{
    fprintf(out, "celer %s — LLM inference for MLX and GGUF checkpoints on ROCm, CUDA and the CPU\n\n"
                 "usage: celer COMMAND [options]      (celer COMMAND --help for its options)\n\ncommands:\n",
            CELER_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\noptions:\n  -h, --help     show this help\n  -V, --version  print the version\n\n"
                 "exit codes: 0 success; 1 a check failed (celer verify: the backends disagree); 2 bad input\n"
                 "(arguments, files, unsupported models, a backend this build does not have); 3 runtime failure\n"
                 "(out of memory; a device failure: a GPU fault, out of device memory, a timeout, no device).\n"
                 "Generated text goes to stdout; diagnostics to stderr.\n");
}

int cli_report(const celer_error *err)
{
    fprintf(stderr, "celer: %s\n", err->msg[0] ? err->msg : celer_status_name(err->code));
    return celer_status_exit_code(err->code);
}

void cli_print_loaded(const char *model, const celer_engine *e)
{
    const celer_hparams *hp = celer_model_file_hparams(celer_engine_model_file(e));
    fprintf(stderr, "celer: %s (%s, %lld layers) on %s, context %lld\n", model, hp->arch, (long long)hp->n_layer,
            celer_engine_backend_name(e), (long long)celer_engine_ctx(e));
    cli_print_load_note(e);
}

void cli_print_load_note(const celer_engine *e)
{
    if (*celer_engine_load_note(e)) fprintf(stderr, "celer: %s\n", celer_engine_load_note(e));
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "celer %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "; see celer %s --help\n", cmd);
    va_end(ap);
    return EXIT_BAD_INPUT;
}

int cli_check_utf8(const char *cmd, const char *what, const char *text)
{
    size_t n = strlen(text), bad = celer_utf8_validate(text, n);
    if (bad == n) return EXIT_OK;
    fprintf(stderr, "celer %s: %s is not valid UTF-8 at byte %zu (0x%02x); give UTF-8 text (convert it with iconv -t "
                    "UTF-8, or set a UTF-8 locale)\n", cmd, what, bad, (unsigned)(unsigned char)text[bad]);
    return EXIT_BAD_INPUT;
}

int cli_parse_backend(const char *cmd, const char *opt, const char *arg, const char **backend)
{
    static const char *const names[] = {"cpu", "cuda", "rocm"};
    if (!strcmp(arg, "auto")) {
        *backend = NULL;
        return EXIT_OK;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(arg, names[i])) {
            *backend = names[i];
            return EXIT_OK;
        }
    return cli_usage_error(cmd, "%s wants cpu, cuda or rocm, got '%s' (or auto: the best this build has)",
                           opt, arg);
}

bool cli_parse_long(const char *s, long lo, long hi, long *v)
{
    char *end;
    errno  = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi) return false;
    *v = x;
    return true;
}

bool cli_parse_double(const char *s, double lo, double hi, double *v)
{
    char *end;
    errno    = 0;
    double x = strtod(s, &end);
    if (errno || end == s || *end || !(x >= lo && x <= hi)) return false; /* NaN and infinities fail too */
    *v = x;
    return true;
}

const char *cli_bytes(uint64_t n, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double                   v       = (double)n;
    int                      u       = 0;
    while (v >= 1024 && u < 4) v /= 1024, u++;
    snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", v, units[u]);
    return buf;
}

double cli_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_progress_start(cli_progress *p, const char *cmd, const char *what)
{
    *p = (cli_progress){.cmd = cmd, .what = what, .t0 = cli_now_s(), .on = isatty(STDERR_FILENO)};
}

void cli_progress_show(void *user, uint64_t done, uint64_t total)
{
    cli_progress *p = user;
    double        t = cli_now_s();
    if (!p->on || (done < total && t - p->last < 0.25)) return;
    p->last  = t;
    p->shown = true;
    char a[32], b[32];
    fprintf(stderr, "\rceler %s: %s %3.0f%% (%s of %s) %.0f MB/s ", p->cmd, p->what,
            total ? 100.0 * (double)done / (double)total : 100.0, cli_bytes(done, a, sizeof a),
            cli_bytes(total, b, sizeof b), t > p->t0 ? (double)done / 1e6 / (t - p->t0) : 0.0);
    if (done == total) fputc('\n', stderr), p->shown = false;
    fflush(stderr);
}

void cli_progress_end(cli_progress *p)
{
    if (p->shown) fputc('\n', stderr);
    p->shown = false;
}

/* The default model's file name, as scripts/models.json records it for smollm2-135m. */
#define DEFAULT_MODEL_FILE "SmolLM2-135M-Instruct.Q4_1.gguf"

const char *cli_default_model(void)
{
    static char path[4096];
    const char *dir = getenv("CELER_MODELS_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (dir && *dir)
        snprintf(path, sizeof path, "%s/%s", dir, DEFAULT_MODEL_FILE);
    else if (xdg && *xdg)
        snprintf(path, sizeof path, "%s/celer/models/%s", xdg, DEFAULT_MODEL_FILE);
    else
        snprintf(path, sizeof path, "%s/.cache/celer/models/%s", home ? home : "", DEFAULT_MODEL_FILE);
    if (access(path, R_OK) == 0) return path;
    fprintf(stderr, "celer: no model given and the default model is not at %s; fetch it with "
                    "scripts/fetch-model smollm2-135m, or give -m MODEL\n", path);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_BAD_INPUT;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return EXIT_OK;
    }
    if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
        printf("celer %s\n", CELER_VERSION);
        return EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "celer: unknown command '%s'; see celer --help\n", cmd);
    return EXIT_BAD_INPUT;
}
