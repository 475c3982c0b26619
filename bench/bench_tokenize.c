/* Tokenizer encode speed on English prose, one thread.
 *
 *   build/bench_tokenize MODEL.gguf [TEXT_FILE] [--mb N] [--runs R]
 *
 * The text (default: the GPL-3 licence Debian ships, 35 KB of English prose) is repeated to N
 * MB (default 16) and encoded R times (default 5); prints one CSV line:
 *   model,bytes,tokens,median_s,min_s,max_s,mb_per_s
 * where mb_per_s uses the median. The file is read before timing; nothing else runs. */
#include "celer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const char *model = NULL, *text_path = "/usr/share/common-licenses/GPL-3";
    int         mb = 16, runs = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mb") && i + 1 < argc) mb = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!model) model = argv[i];
        else text_path = argv[i];
    }
    if (!model || mb <= 0 || runs <= 0 || runs > 100) {
        fprintf(stderr, "usage: bench_tokenize MODEL.gguf [TEXT_FILE] [--mb N] [--runs R]\n");
        return 2;
    }
    FILE *f = fopen(text_path, "rb");
    if (!f) {
        fprintf(stderr, "bench_tokenize: cannot open %s\n", text_path);
        return 2;
    }
    char  *unit = malloc(1 << 24);
    size_t un   = unit ? fread(unit, 1, (1 << 24) - 1, f) : 0;
    fclose(f);
    if (!un) return 2;
    size_t total = (size_t)mb << 20;
    char  *text  = malloc(total + un);
    size_t n     = 0;
    while (n < total) memcpy(text + n, unit, un), n += un;
    free(unit);

    celer_error       err = {0};
    celer_model_file *mf;
    celer_tokenizer  *tok;
    if (celer_model_file_open(&mf, model, &err) || celer_tokenizer_load(&tok, mf, &err)) {
        fprintf(stderr, "bench_tokenize: %s\n", err.msg);
        return 2;
    }
    double *t      = malloc((size_t)runs * sizeof *t);
    size_t  n_toks = 0;
    for (int r = 0; r < runs; r++) {
        int32_t *ids;
        double   t0 = now();
        if (celer_tokenizer_encode(tok, text, n, (celer_encode_opts){0}, &ids, &n_toks, &err)) {
            fprintf(stderr, "bench_tokenize: %s\n", err.msg);
            return 3;
        }
        t[r] = now() - t0;
        free(ids);
    }
    qsort(t, (size_t)runs, sizeof *t, cmp_d);
    double med = t[runs / 2];
    printf("model,bytes,tokens,median_s,min_s,max_s,mb_per_s\n%s,%zu,%zu,%.4f,%.4f,%.4f,%.2f\n", model, n, n_toks, med,
           t[0], t[runs - 1], (double)n / med / 1e6);
    celer_tokenizer_free(tok);
    celer_model_file_close(mf);
    free(text);
    free(t);
    return 0;
}
