/* Shared by the celer subcommands. */
#ifndef CELER_CLI_H
#define CELER_CLI_H

#include "celer.h"

#include <stdio.h>

/* Exit codes every subcommand uses; README.md documents them. EXIT_CHECK_FAILED: a check that ran
 * found a difference (celer verify). celer_status_exit_code maps statuses onto the others. */
enum { EXIT_OK = 0, EXIT_CHECK_FAILED = 1, EXIT_BAD_INPUT = 2, EXIT_RUNTIME = 3 };

/* The end of each --help that runs a model. */
#define CLI_EXIT_CODES                                                                                            \
    "exit codes: 0 ok; 2 bad input (options, files, an unsupported model, a backend this build does not\n"      \
    "have); 3 runtime failure (out of memory; a device failure: a GPU fault, out of device memory, a\n"         \
    "timeout, no device for the backend asked for).\n"

/* Prints "celer: <msg>" on stderr and returns the exit code for err. */
int cli_report(const celer_error *err);
/* Prints "celer CMD: <msg>; see celer CMD --help" and returns EXIT_BAD_INPUT. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* For text from the user (what names it: "the prompt (-p)"): EXIT_OK when it is valid UTF-8, else
 * prints "celer CMD: WHAT is not valid UTF-8 at byte N (0xXX); ..." and returns EXIT_BAD_INPUT.
 * Checked before templating, so that N counts in the user's own text. */
int cli_check_utf8(const char *cmd, const char *what, const char *text);
/* Prints "celer: MODEL (arch, N layers) on BACKEND, context N" and what the load converted. */
void cli_print_loaded(const char *model, const celer_engine *e);
/* Prints only what the load converted ("celer: ..."), when it converted anything. */
void cli_print_load_note(const celer_engine *e);
/* A --backend value (opt names the option for the message): "auto" gives *backend = NULL (the best
 * available), "cpu", "cuda" and "rocm" themselves. Anything else prints a usage error listing the
 * choices and returns EXIT_BAD_INPUT; else EXIT_OK. */
int cli_parse_backend(const char *cmd, const char *opt, const char *arg, const char **backend);
/* A whole decimal number of s within [lo, hi] into *v; false otherwise. */
bool cli_parse_long(const char *s, long lo, long hi, long *v);
/* The same for a decimal number (finite, lo <= x <= hi). */
bool cli_parse_double(const char *s, double lo, double hi, double *v);
/* Seconds on a monotonic clock. */
double cli_now_s(void);

/* Progress of long work on stderr: one line updated in place ("celer CMD: WHAT 42% (1.2 GiB of
 * 2.9 GiB) 812 MB/s"), only when stderr is a terminal. cli_progress_show has the signature of
 * the library's progress callbacks (user: the cli_progress). */
typedef struct {
    const char *cmd, *what;
    double      t0, last;
    bool        on, shown;
} cli_progress;
void cli_progress_start(cli_progress *p, const char *cmd, const char *what);
void cli_progress_show(void *user, uint64_t done, uint64_t total);
/* Ends the line if one was shown (after a failure, before the error message). */
void cli_progress_end(cli_progress *p);

/* "93.8 MiB" */
const char *cli_bytes(uint64_t n, char *buf, size_t cap);

/* The model to use when none is given: the default model in the model cache, or NULL with a
 * message on stderr saying how to fetch it. */
const char *cli_default_model(void);

/* One JSON string (a whole line, surrounding spaces allowed) → malloc'd bytes; -1 if malformed. */
int  cli_json_string_decode(const char *s, size_t n, char **out, size_t *out_n);
void cli_json_string_print(FILE *f, const char *s, size_t n);

int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_verify(int argc, char **argv);

#endif
