/* celer bench: prefill and decode speed, the way llama-bench measures them — pp: one forward
 * over P prompt tokens from an empty cache; tg: N tokens decoded one at a time from an empty
 * cache (with --depth D, both after D tokens already in the cache, as llama-bench's -d). Each
 * is repeated R times after an untimed warm-up; the median and the spread are reported. With
 * --parallel S, the way llama-batched-bench does: S sequences of P prompt tokens prefilled
 * together, then decoded together for N tokens, through the batcher (the server's path);
 * aggregate tok/s. Tokens are greedy, as llama-bench's, or sampled (--temp, --top-k, --top-p). */
#include "cli.h"

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void bench_usage(FILE *out)
{
    fprintf(out, "usage: celer bench [-m MODEL] [-p P] [-n N] [-d D] [-r R] [-P S] [--temp T] [--backend B] [--threads N]\n"
                 "                   [--json]\n\n"
                 "Measures prefill (pp: P prompt tokens at once) and decode (tg: N tokens one by one) speed,\n"
                 "each from an empty context (or after D tokens: --depth), repeated R times after one untimed\n"
                 "warm-up. Decode is then set against the memory bound: the bytes one step reads (weights, and\n"
                 "keys and values at the steps' mean context), times tok/s, as a share of the backend's copy\n"
                 "bandwidth (read + write, buffers of twice the last-level cache) measured right after, with\n"
                 "the same threads. With --parallel S: S sequences of P prompt tokens at once (pp: all the\n"
                 "prompts in one step), then N tokens each decoded together (tg: S tokens a step), through the\n"
                 "batcher the server uses; tok/s counts every sequence's tokens (as llama-batched-bench's S_PP\n"
                 "and S_TG). Last, the seconds the model took to open and to place its weights on the\n"
                 "backend (load; JSON: load_s).\n\n"
                 "options:\n"
                 "  -m, --model MODEL  a .gguf file or model directory (default: the default model)\n"
                 "  -p, --prompt P     prompt tokens for pp (default 512; 0 skips pp)\n"
                 "  -n, --gen N        generated tokens for tg (default 128; 0 skips tg)\n"
                 "  -d, --depth D      tokens already in the context when pp and tg start (default 0; their\n"
                 "                     prefill is not timed; not with --parallel)\n"
                 "  -r, --reps R       repetitions (default 5)\n"
                 "  -P, --parallel S   S sequences together (1 to 256; default: one sequence, no batcher)\n"
                 "      --temp T       sample each token at temperature T (default 0: greedy), seed 1\n"
                 "      --top-k K      with --temp: keep the K most probable (default 0: all)\n"
                 "      --top-p P      with --temp: keep the smallest set of probability P (default 1: all)\n"
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

/* The batched test: when each sequence's first token came (prefill), and when the last ended. */
typedef struct {
    double first; /* latest time to first token, seconds from the submissions */
    int    done;
    int    failed;
} batch_run;

static void batch_done(void *user, const celer_gen_stats *st, const celer_error *err)
{
    batch_run *r = user;
    r->done++;
    if (err) r->failed++;
    else if (st->t_first > r->first) r->first = st->t_first;
}

/* S sequences of P prompt tokens and N generated: prefill tok/s (S · P over the time to the last
 * first token) and decode tok/s (S · (N - 1) over the rest; the first token comes with the
 * prefill). */
static celer_status run_batched(celer_engine *e, const int32_t *prompt, long P, long N, long S,
                                const celer_sampling *sampling, double *pp, double *tg, celer_error *err)
{
    long                 chunk = S * P < 4096 ? S * P : 4096;
    celer_batcher_config bc    = {.n_parallel = (int)S, .n_ctx = P + N + 16,
                                  .step_tokens = chunk > 256 ? (int)chunk : 256};
    celer_batcher       *b;
    if (celer_batcher_create(&b, e, &bc, err)) return err->code;
    celer_gen_params gp = {.sampling = *sampling, .ignore_eos = true, .max_tokens = (int32_t)N};
    batch_run        run = {0};
    celer_status     st  = CELER_OK;
    double           t0  = cli_now_s();
    for (long i = 0; i < S && !st; i++)
        st = celer_batcher_submit(b, prompt, (size_t)P, &gp, NULL, batch_done, &run, NULL, err);
    while (!st && run.done < S) {
        bool busy;
        st = celer_batcher_step(b, &busy, err);
    }
    double t1 = cli_now_s();
    celer_batcher_free(b);
    if (st) return st;
    if (run.failed) { /* each failure was the step's, reported through its request */
        err->code = CELER_ERR_DEVICE;
        snprintf(err->msg, sizeof err->msg, "bench: %d of %ld sequences failed", run.failed, S);
        return err->code;
    }
    *pp = (double)(S * P) / run.first;
    *tg = N > 1 ? (double)(S * (N - 1)) / (t1 - t0 - run.first) : 0;
    return CELER_OK;
}

int cmd_bench(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'}, {"prompt", required_argument, NULL, 'p'},
        {"gen", required_argument, NULL, 'n'},   {"reps", required_argument, NULL, 'r'},
        {"threads", required_argument, NULL, 't'}, {"json", no_argument, NULL, 'j'},
        {"backend", required_argument, NULL, 'b'}, {"help", no_argument, NULL, 'h'},
        {"parallel", required_argument, NULL, 'P'}, {"depth", required_argument, NULL, 'd'},
        {"temp", required_argument, NULL, 'T'},     {"top-k", required_argument, NULL, 'K'},
        {"top-p", required_argument, NULL, 'Q'},    {0},
    };
    const char         *model = NULL;
    long                P = 512, N = 128, R = 5, S = 0, D = 0, v;
    bool                json = false;
    celer_engine_config cfg  = {0};
    celer_sampling      smp  = celer_sampling_default();
    double              dv;
    int                 c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":m:p:n:d:r:t:b:P:jh", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'p':
            if (!cli_parse_long(optarg, 0, 1 << 20, &P)) return cli_usage_error("bench", "-p wants 0 to 1048576, got '%s'", optarg);
            break;
        case 'n':
            if (!cli_parse_long(optarg, 0, 1 << 20, &N)) return cli_usage_error("bench", "-n wants 0 to 1048576, got '%s'", optarg);
            break;
        case 'd':
            if (!cli_parse_long(optarg, 0, 1 << 20, &D)) return cli_usage_error("bench", "-d wants 0 to 1048576, got '%s'", optarg);
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
        case 'P':
            if (!cli_parse_long(optarg, 1, 256, &S))
                return cli_usage_error("bench", "--parallel wants 1 to 256, got '%s'", optarg);
            break;
        case 'T':
            if (!cli_parse_double(optarg, 0, 100, &dv)) return cli_usage_error("bench", "--temp wants 0 to 100, got '%s'", optarg);
            smp.temperature = (float)dv, smp.seed = 1;
            break;
        case 'K':
            if (!cli_parse_long(optarg, 0, 1 << 30, &v)) return cli_usage_error("bench", "--top-k wants 0 or more, got '%s'", optarg);
            smp.top_k = (int32_t)v;
            break;
        case 'Q':
            if (!cli_parse_double(optarg, 0, 1, &dv) || dv == 0)
                return cli_usage_error("bench", "--top-p wants (0, 1], got '%s'", optarg);
            smp.top_p = (float)dv;
            break;
        case 'j': json = true; break;
        case 'h': bench_usage(stdout); return EXIT_OK;
        case ':': return cli_usage_error("bench", "option %s needs a value", argv[optind - 1]);
        default: return cli_usage_error("bench", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("bench", "unexpected argument '%s'", argv[optind]);
    if (!P && !N) return cli_usage_error("bench", "nothing to measure: -p and -n are both 0");
    if (S && (!P || N < 2))
        return cli_usage_error("bench", "--parallel measures prompts and decoding: it wants -p of 1 or more and -n of 2 "
                               "or more");
    if (S && D) return cli_usage_error("bench", "--depth is for one sequence: leave it out with --parallel");
    if (!model && !(model = cli_default_model())) return EXIT_BAD_INPUT;
    cfg.n_ctx = S ? P + N + 16 : D + (P > N ? P : N) + 16;

    celer_error   err = {0};
    celer_engine *e   = NULL;
    double        t_load = cli_now_s(); /* the model opened and its weights on the backend */
    if (celer_engine_create(&e, model, &cfg, &err)) return cli_report(&err);
    t_load = cli_now_s() - t_load;
    cli_print_load_note(e);
    const celer_tokenizer *tok     = celer_engine_tokenizer(e);
    int32_t                n_vocab = celer_tokenizer_n_vocab(tok);
    /* ids: the D tokens of the context (--depth), then the P of the prompt */
    int32_t *ids = malloc((size_t)(D + P > 1 ? D + P : 1) * sizeof *ids), *prompt = ids + D;
    double  *pp = calloc((size_t)R, sizeof *pp), *tg = calloc((size_t)R, sizeof *tg);
    int      rc = EXIT_OK;
    if (!ids || !pp || !tg) rc = EXIT_RUNTIME;
    uint64_t x = 12345;
    for (long i = 0; i < D + P && rc == EXIT_OK; i++) { /* arbitrary tokens: speed does not depend on them */
        x      = x * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((x >> 33) % (uint64_t)n_vocab);
    }
    celer_gen_params gp = {.sampling = smp, .ignore_eos = true};
    /* r = -1: an untimed warm-up, as llama-bench's (one-time costs: the GPU's libraries load
     * their kernels and the backend allocates its buffers at the first step of a shape) */
    for (long r = -1; r < R && rc == EXIT_OK; r++) {
        celer_gen_stats st;
        double          t_pp = 0, t_tg = 0;
        if (S) {
            if (run_batched(e, prompt, P, N, S, &smp, &t_pp, &t_tg, &err)) rc = cli_report(&err);
        } else {
            if (P) { /* the context first (untimed, reused by the second call), then the prompt */
                celer_engine_reset(e);
                gp.max_tokens = 1;
                if ((D && celer_engine_generate(e, ids, (size_t)D, &gp, NULL, NULL, &st, &err)) ||
                    celer_engine_generate(e, ids, (size_t)(D + P), &gp, NULL, NULL, &st, &err))
                    rc = cli_report(&err);
                else if (st.n_prompt - st.n_reused != P) { /* the engine's reuse, not the user's input */
                    fprintf(stderr, "celer bench: pp reused %lld of the %ld context tokens (all were expected)\n",
                            (long long)st.n_reused, D);
                    rc = EXIT_RUNTIME;
                } else t_pp = (double)P / st.t_prompt;
            }
            if (N && rc == EXIT_OK) { /* from the context, or from one token */
                celer_engine_reset(e);
                int32_t first = celer_tokenizer_bos(tok) >= 0 ? celer_tokenizer_bos(tok) : ids[0];
                gp.max_tokens = (int32_t)N + 1;
                if (celer_engine_generate(e, D ? ids : &first, D ? (size_t)D : 1, &gp, NULL, NULL, &st, &err))
                    rc = cli_report(&err);
                else t_tg = (double)(st.n_gen - 1) / st.t_gen;
            }
        }
        if (r >= 0) pp[r] = t_pp, tg[r] = t_tg;
    }
    double bw = 0; /* copy bandwidth, bytes read + written per second */
    if (rc == EXIT_OK && N && !S && celer_engine_copy_bandwidth(e, copy_buffer_bytes(), 5, &bw, &err)) rc = cli_report(&err);
    if (rc == EXIT_OK) {
        spread   sp = summarize(pp, (int)R), sg = summarize(tg, (int)R);
        uint64_t wb = celer_engine_weight_bytes_per_token(e);
        /* and the keys and values a decode step reads, at the mean context of the timed steps (the
         * D tokens of --depth, or the first token, then half of the N generated) */
        uint64_t kb    = S ? 0 : celer_engine_kv_bytes_per_token(e, (D ? D : 1) + (N + 1) / 2);
        double   share = bw > 0 && !S ? (double)(wb + kb) * sg.median / bw : 0; /* batched: S tokens a weight read */
        const celer_hparams *hp = celer_model_file_hparams(celer_engine_model_file(e));
        if (json) {
            printf("{\"model\": ");
            cli_json_string_print(stdout, model, strlen(model));
            printf(", \"arch\": \"%s\", \"backend\": \"%s\", \"threads\": %d, \"reps\": %ld, \"parallel\": %ld, "
                   "\"depth\": %ld, \"pp\": {\"tokens\": %ld, \"median\": %.2f, \"min\": %.2f, \"max\": %.2f}, "
                   "\"tg\": {\"tokens\": %ld, \"median\": %.2f, \"min\": %.2f, \"max\": %.2f}, "
                   "\"weight_bytes_per_token\": %llu, \"kv_bytes_per_token\": %llu, \"copy_bytes_per_s\": %.0f, "
                   "\"tg_bandwidth_share\": %.4f, \"temperature\": %g, \"top_k\": %d, \"top_p\": %g, "
                   "\"load_s\": %.3f}\n",
                   hp->arch, celer_engine_backend_name(e), celer_engine_threads(e), R, S, D, P, sp.median, sp.min,
                   sp.max, N, sg.median, sg.min, sg.max, (unsigned long long)wb, (unsigned long long)kb, bw, share,
                   smp.temperature, smp.top_k, smp.top_p, t_load);
        } else {
            char sfx[24] = "", tp[48], tn[48]; /* the test's name: pp512, tg128 x32, tg128 @d4096 */
            if (S) snprintf(sfx, sizeof sfx, " x%ld", S);
            else if (D) snprintf(sfx, sizeof sfx, " @d%ld", D);
            snprintf(tp, sizeof tp, "pp%ld%s", P, sfx);
            snprintf(tn, sizeof tn, "tg%ld%s", N, sfx);
            printf("%-40s %-8s %7s %-9s %12s %20s\n", "model", "backend", "threads", "test", "tok/s", "min .. max");
            if (P)
                printf("%-40.40s %-8s %7d %-9s %12.2f %9.2f .. %-9.2f\n", model, celer_engine_backend_name(e),
                       celer_engine_threads(e), tp, sp.median, sp.min, sp.max);
            if (N) {
                printf("%-40.40s %-8s %7d %-9s %12.2f %9.2f .. %-9.2f\n", model, celer_engine_backend_name(e),
                       celer_engine_threads(e), tn, sg.median, sg.min, sg.max);
                if (S) printf("tg: %ld sequences decoding together, tok/s of all of them\n", S);
                else printf("tg: %.1f MB of weights + %.1f MB of keys and values per token x %.2f tok/s = %.2f GB/s, "
                            "%.0f%% of the copy bandwidth %.2f GB/s (read + write)\n",
                            (double)wb / 1e6, (double)kb / 1e6, sg.median, (double)(wb + kb) * sg.median / 1e9,
                            100 * share, bw / 1e9);
                if (smp.temperature > 0)
                    printf("tg: each token sampled at temperature %g, top-k %d, top-p %g (seed 1)\n", smp.temperature,
                           smp.top_k, smp.top_p);
            }
            printf("load: %.2f s to open the model and place its weights on %s\n", t_load,
                   celer_engine_backend_name(e));
        }
    }
    free(ids);
    free(pp);
    free(tg);
    celer_engine_free(e);
    return rc;
}
