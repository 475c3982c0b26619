/* celer bench: prefill and decode speed, the way llama-bench measures them — pp: one forward
 * over P prompt tokens from an empty cache; tg: N tokens decoded one at a time from an empty
 * cache. Each is repeated R times; the median and the spread are reported. */
#include "cli.h"

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void bench_usage(FILE *out)
{
    fprintf(out, "usage: celer bench [-m MODEL] [-p P] [-n N] [-r R] [--backend B] [--threads N] [--json]\n\n"
                 "Measures prefill (pp: P prompt tokens at once) and decode (tg: N tokens one by one) speed,\n"
                 "each from an empty context, repeated R times. Decode is then set against the memory\n"
                 "bound: the weight bytes one step reads, times tok/s, as a share of the backend's copy\n"
                 "bandwidth (read + write, buffers of twice the last-level cache) measured right after,\n"
                 "with the same threads.\n\n"
                 "options:\n"
                 "  -m, --model MODEL  a .gguf file (default: the default model)\n"
                 "  -p, --prompt P     prompt tokens for pp (default 512; 0 skips pp)\n"
                 "  -n, --gen N        generated tokens for tg (default 128; 0 skips tg)\n"
                 "  -r, --reps R       repetitions (default 5)\n"
                 "  -b, --backend B    auto, cpu, cuda or rocm (default auto: the best this build has)\n"
                 "  -t, --threads N    CPU threads (default: one per physical core)\n"
                 "      --json         one JSON object on stdout instead of the table\n"
                 "  -h, --help         show this help\n\n" CLI_EXIT_CODES);
}

/* Bytes per buffer for the copy bandwidth: twice the last-level cache (from sysfs; servers have
 * hundreds of MiB) so the copy runs from memory, at least 256 MiB and at most 1 GiB. */
static size_t copy_buffer_bytes(void)
{
    size_t bytes = (size_t)256 << 20;
    FILE  *f     = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    if (f) {
        unsigned long long n = 0;
        char               unit = 0;
        if (fscanf(f, "%llu%c", &n, &unit) >= 1) {
            n *= unit == 'K' ? 1024ull : unit == 'M' ? 1048576ull : 1ull;
            if (2 * n > bytes) bytes = (size_t)(2 * n);
        }
        fclose(f);
    }
    return bytes < ((size_t)1 << 30) ? bytes : (size_t)1 << 30;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double median, min, max;
} spread;

static spread summarize(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return (spread){n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v[0], v[n - 1]};
}

int cmd_bench(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'}, {"prompt", required_argument, NULL, 'p'},
        {"gen", required_argument, NULL, 'n'},   {"reps", required_argument, NULL, 'r'},
        {"threads", required_argument, NULL, 't'}, {"json", no_argument, NULL, 'j'},
        {"backend", required_argument, NULL, 'b'}, {"help", no_argument, NULL, 'h'},
        {0},
    };
    const char         *model = NULL;
    long                P = 512, N = 128, R = 5, v;
    bool                json = false;
    celer_engine_config cfg  = {0};
    int                 c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":m:p:n:r:t:b:jh", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'p':
            if (!cli_parse_long(optarg, 0, 1 << 20, &P)) return cli_usage_error("bench", "-p wants 0 to 1048576, got '%s'", optarg);
            break;
        case 'n':
            if (!cli_parse_long(optarg, 0, 1 << 20, &N)) return cli_usage_error("bench", "-n wants 0 to 1048576, got '%s'", optarg);
            break;
        case 'r':
            if (!cli_parse_long(optarg, 1, 1000, &R)) return cli_usage_error("bench", "-r wants 1 to 1000, got '%s'", optarg);
            break;
        case 't':
            if (!cli_parse_long(optarg, 1, 1024, &v)) return cli_usage_error("bench", "--threads wants 1 to 1024, got '%s'", optarg);
            cfg.n_threads = (int)v;
            break;
        case 'b':
            if (cli_parse_backend("bench", "--backend", optarg, &cfg.backend)) return EXIT_BAD_INPUT;
            break;
        case 'j': json = true; break;
        case 'h': bench_usage(stdout); return EXIT_OK;
        case ':': return cli_usage_error("bench", "option %s needs a value", argv[optind - 1]);
        default: return cli_usage_error("bench", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("bench", "unexpected argument '%s'", argv[optind]);
    if (!P && !N) return cli_usage_error("bench", "nothing to measure: -p and -n are both 0");
    if (!model && !(model = cli_default_model())) return EXIT_BAD_INPUT;
    cfg.n_ctx = (P > N ? P : N) + 16;

    celer_error   err = {0};
    celer_engine *e   = NULL;
    if (celer_engine_create(&e, model, &cfg, &err)) return cli_report(&err);
    cli_print_load_note(e);
    const celer_tokenizer *tok     = celer_engine_tokenizer(e);
    int32_t                n_vocab = celer_tokenizer_n_vocab(tok);
    int32_t               *prompt  = malloc((size_t)(P > 1 ? P : 1) * sizeof *prompt);
    double                *pp = calloc((size_t)R, sizeof *pp), *tg = calloc((size_t)R, sizeof *tg);
    int                    rc = EXIT_OK;
    if (!prompt || !pp || !tg) rc = EXIT_RUNTIME;
    uint64_t x = 12345;
    for (long i = 0; i < P && rc == EXIT_OK; i++) { /* arbitrary tokens: speed does not depend on them */
        x         = x * 6364136223846793005ull + 1442695040888963407ull;
        prompt[i] = (int32_t)((x >> 33) % (uint64_t)n_vocab);
    }
    celer_gen_params gp = {.sampling = celer_sampling_default(), .ignore_eos = true};
    for (long r = 0; r < R && rc == EXIT_OK; r++) {
        celer_gen_stats st;
        if (P) {
            celer_engine_reset(e);
            gp.max_tokens = 1;
            if (celer_engine_generate(e, prompt, (size_t)P, &gp, NULL, NULL, &st, &err)) rc = cli_report(&err);
            else pp[r] = (double)P / st.t_prompt;
        }
        if (N && rc == EXIT_OK) {
            celer_engine_reset(e);
            int32_t first  = celer_tokenizer_bos(tok) >= 0 ? celer_tokenizer_bos(tok) : prompt[0];
            gp.max_tokens  = (int32_t)N + 1;
            if (celer_engine_generate(e, &first, 1, &gp, NULL, NULL, &st, &err)) rc = cli_report(&err);
            else tg[r] = (double)(st.n_gen - 1) / st.t_gen;
        }
    }
    double bw = 0; /* copy bandwidth, bytes read + written per second */
    if (rc == EXIT_OK && N && celer_engine_copy_bandwidth(e, copy_buffer_bytes(), 5, &bw, &err)) rc = cli_report(&err);
    if (rc == EXIT_OK) {
        spread   sp = summarize(pp, (int)R), sg = summarize(tg, (int)R);
        uint64_t wb = celer_engine_weight_bytes_per_token(e);
        double   share = bw > 0 ? (double)wb * sg.median / bw : 0;
        const celer_hparams *hp = celer_model_file_hparams(celer_engine_model_file(e));
        if (json) {
            printf("{\"model\": ");
            cli_json_string_print(stdout, model, strlen(model));
            printf(", \"arch\": \"%s\", \"backend\": \"%s\", \"threads\": %d, \"reps\": %ld, "
                   "\"pp\": {\"tokens\": %ld, \"median\": %.2f, \"min\": %.2f, \"max\": %.2f}, "
                   "\"tg\": {\"tokens\": %ld, \"median\": %.2f, \"min\": %.2f, \"max\": %.2f}, "
                   "\"weight_bytes_per_token\": %llu, \"copy_bytes_per_s\": %.0f, \"tg_bandwidth_share\": %.4f}\n",
                   hp->arch, celer_engine_backend_name(e), celer_engine_threads(e), R, P, sp.median, sp.min,
                   sp.max, N, sg.median, sg.min, sg.max, (unsigned long long)wb, bw, share);
        } else {
            printf("%-40s %-8s %7s %5s %12s %20s\n", "model", "backend", "threads", "test", "tok/s", "min .. max");
            if (P)
                printf("%-40.40s %-8s %7d pp%-3ld %12.2f %9.2f .. %-9.2f\n", model, celer_engine_backend_name(e),
                       celer_engine_threads(e), P, sp.median, sp.min, sp.max);
            if (N) {
                printf("%-40.40s %-8s %7d tg%-3ld %12.2f %9.2f .. %-9.2f\n", model, celer_engine_backend_name(e),
                       celer_engine_threads(e), N, sg.median, sg.min, sg.max);
                printf("tg: %.1f MB of weights per token x %.2f tok/s = %.2f GB/s, %.0f%% of the copy bandwidth "
                       "%.2f GB/s (read + write)\n",
                       (double)wb / 1e6, sg.median, (double)wb * sg.median / 1e9, 100 * share, bw / 1e9);
            }
        }
    }
    free(prompt);
    free(pp);
    free(tg);
    celer_engine_free(e);
    return rc;
}
