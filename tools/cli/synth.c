/* celer synth: a random-weight GGUF model of a real shape, for benchmarks without downloads. */
#include "cli.h"
#include "models/synth.h"

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void synth_usage(FILE *out)
{
    fprintf(out,
            "usage: celer synth (--shape NAME | --arch A --layers N --embd D --ff F --heads H --kv-heads K\n"
            "                   [--head-dim HD] [--vocab V] [--ctx C] [--tied]\n"
            "                   [--experts E --experts-used U --expert-ff FE]) --type T [--seed S] -o FILE\n"
            "       celer synth --list\n\n"
            "Writes a GGUF model with the tensor names, shapes, types and metadata of a real model but\n"
            "random weights and a placeholder vocabulary: for speed tests (the output is gibberish).\n"
            "The same seed gives the same bytes. With --shape, the other shape options override the\n"
            "preset (e.g. --shape llama-3.1-8b --layers 2).\n\n"
            "options:\n"
            "  -s, --shape NAME     a preset (--list shows them): %s\n"
            "  -a, --arch A         %s (with --shape: must match it)\n"
            "  --layers, --embd, --ff, --heads, --kv-heads, --head-dim (default embd/heads; a preset\n"
            "                       keeps its own), --vocab (default 32000), --ctx (default 4096)\n"
            "  --tied               no output.weight: reuse the embeddings (always so for gemma3)\n"
            "  --experts, --experts-used, --expert-ff   mixture of experts (qwen3moe)\n"
            "  -T, --type T         %s\n"
            "                       (one type for every weight matrix; Q4_K_M mixes Q4_K and Q6_K like\n"
            "                       llama.cpp; rows that are not whole blocks fall back: Q4_K→Q5_0,\n"
            "                       Q5_K→Q5_1, Q6_K→Q8_0, else F16)\n"
            "  --seed S             random seed (default 0)\n"
            "  -o, --output FILE    where to write (atomically, through FILE.tmp-PID)\n"
            "  -l, --list           list the presets\n"
            "  -h, --help           show this help\n",
            celer_synth_preset_names(), celer_synth_arch_names(), celer_synth_type_names());
}

static void list_presets(void)
{
    printf("%-14s %-9s %6s %6s %6s %5s %4s %5s %7s %7s %9s %6s %s\n", "preset", "arch", "layers", "embd", "ff", "heads",
           "kv", "hdim", "vocab", "ctx", "rope", "tied", "extra");
    for (size_t i = 0; celer_synth_preset_at(i); i++) {
        const celer_synth_shape *s = celer_synth_preset_at(i);
        char                     extra[96] = "";
        if (s->n_expert)
            snprintf(extra, sizeof extra, "experts %lld/%lld × ff %lld", (long long)s->n_expert_used,
                     (long long)s->n_expert, (long long)s->n_ff_expert);
        else if (s->qkv_bias)
            snprintf(extra, sizeof extra, "qkv bias");
        else if (s->sliding_window)
            snprintf(extra, sizeof extra, "sliding window %lld", (long long)s->sliding_window);
        else if (s->rope_factor > 0)
            snprintf(extra, sizeof extra, "llama3 rope ×%g", s->rope_factor);
        printf("%-14s %-9s %6lld %6lld %6lld %5lld %4lld %5lld %7lld %7lld %9g %6s %s\n", s->name, s->arch,
               (long long)s->n_layer, (long long)s->n_embd, (long long)s->n_ff, (long long)s->n_head,
               (long long)s->n_head_kv, (long long)s->head_dim, (long long)s->n_vocab, (long long)s->n_ctx,
               s->rope_theta, s->tied ? "yes" : "no", extra);
    }
}

/* A whole number in [lo, hi]. */
static bool parse_int(const char *s, long long lo, long long hi, long long *v)
{
    char     *end;
    long long x = strtoll(s, &end, 10);
    if (end == s || *end || x < lo || x > hi) return false;
    *v = x;
    return true;
}

int cmd_synth(int argc, char **argv)
{
    enum { O_LAYERS = 256, O_EMBD, O_FF, O_HEADS, O_KV, O_HD, O_VOCAB, O_CTX, O_EXP, O_EXPU, O_EXPFF, O_SEED, O_TIED };
    static const struct option opts[] = {
        {"shape", required_argument, NULL, 's'},     {"arch", required_argument, NULL, 'a'},
        {"type", required_argument, NULL, 'T'},      {"output", required_argument, NULL, 'o'},
        {"layers", required_argument, NULL, O_LAYERS}, {"embd", required_argument, NULL, O_EMBD},
        {"ff", required_argument, NULL, O_FF},       {"heads", required_argument, NULL, O_HEADS},
        {"kv-heads", required_argument, NULL, O_KV}, {"head-dim", required_argument, NULL, O_HD},
        {"vocab", required_argument, NULL, O_VOCAB}, {"ctx", required_argument, NULL, O_CTX},
        {"experts", required_argument, NULL, O_EXP}, {"experts-used", required_argument, NULL, O_EXPU},
        {"expert-ff", required_argument, NULL, O_EXPFF}, {"seed", required_argument, NULL, O_SEED},
        {"tied", no_argument, NULL, O_TIED},         {"list", no_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},            {0},
    };
    /* the dimension options, in the order of their O_ values, and where they go */
    static const struct {
        const char *flag;
        size_t      field;
        long long   hi;
    } dims[] = {
        {"--layers", offsetof(celer_synth_shape, n_layer), 1024},   {"--embd", offsetof(celer_synth_shape, n_embd), 65536},
        {"--ff", offsetof(celer_synth_shape, n_ff), 1 << 20},        {"--heads", offsetof(celer_synth_shape, n_head), 1024},
        {"--kv-heads", offsetof(celer_synth_shape, n_head_kv), 1024}, {"--head-dim", offsetof(celer_synth_shape, head_dim), 1024},
        {"--vocab", offsetof(celer_synth_shape, n_vocab), 1 << 22},  {"--ctx", offsetof(celer_synth_shape, n_ctx), 1 << 24},
        {"--experts", offsetof(celer_synth_shape, n_expert), 1024},
        {"--experts-used", offsetof(celer_synth_shape, n_expert_used), 1024},
        {"--expert-ff", offsetof(celer_synth_shape, n_ff_expert), 1 << 20},
    };
    long long   set[sizeof dims / sizeof dims[0]];
    bool        given[sizeof dims / sizeof dims[0]] = {0}, tied = false;
    const char *shape_name = NULL, *arch = NULL, *type_name = NULL, *out = NULL;
    long long   seed       = 0;
    int         c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":s:a:T:o:lh", opts, NULL)) != -1) {
        const char *arg = optarg;
        switch (c) {
        case 's': shape_name = arg; break;
        case 'a': arch = arg; break;
        case 'T': type_name = arg; break;
        case 'o': out = arg; break;
        case O_TIED: tied = true; break;
        case O_SEED:
            if (!parse_int(arg, 0, 9223372036854775807LL, &seed))
                return cli_usage_error("synth", "--seed wants a whole number from 0, got '%s'", arg);
            break;
        case 'l': list_presets(); return EXIT_OK;
        case 'h': synth_usage(stdout); return EXIT_OK;
        case ':': return cli_usage_error("synth", "option %s needs a value", argv[optind - 1]);
        case '?': return cli_usage_error("synth", "unknown option '%s'", argv[optind - 1]);
        default: {
            size_t k = (size_t)(c - O_LAYERS);
            if (!parse_int(arg, 1, dims[k].hi, &set[k]))
                return cli_usage_error("synth", "%s wants a whole number from 1 to %lld, got '%s'", dims[k].flag,
                                       dims[k].hi, arg);
            given[k] = true;
        }
        }
    }
    if (optind < argc) return cli_usage_error("synth", "unexpected argument '%s'", argv[optind]);

    celer_synth_shape s;
    if (shape_name) {
        const celer_synth_shape *p = celer_synth_preset_find(shape_name);
        if (!p)
            return cli_usage_error("synth", "unknown preset '%s' (known: %s)", shape_name, celer_synth_preset_names());
        if (arch && strcmp(arch, p->arch))
            return cli_usage_error("synth", "preset %s is --arch %s, not %s", shape_name, p->arch, arch);
        s = *p;
    } else {
        if (!arch) return cli_usage_error("synth", "give --shape NAME, or --arch and the dimensions of a custom shape");
        if (!celer_synth_shape_defaults(&s, arch))
            return cli_usage_error("synth", "unknown architecture '%s' (synth writes: %s)", arch, celer_synth_arch_names());
        for (size_t k = 0; k < 5; k++)
            if (!given[k]) return cli_usage_error("synth", "a custom shape needs %s", dims[k].flag);
    }
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++)
        if (given[k]) *(int64_t *)((char *)&s + dims[k].field) = set[k];
    if (!given[5] && !shape_name) s.head_dim = s.n_embd / s.n_head;
    if (tied) s.tied = true;
    if (!type_name) return cli_usage_error("synth", "no weight type given (--type %s)", celer_synth_type_names());
    const celer_synth_type *t = celer_synth_type_find(type_name);
    if (!t) return cli_usage_error("synth", "unknown type '%s' (known: %s)", type_name, celer_synth_type_names());
    if (!out) return cli_usage_error("synth", "no output file given (-o FILE)");
    celer_error err = {0};
    if (celer_synth_shape_check(&s, &err)) return cli_report(&err);

    cli_progress       ps;
    celer_synth_result r;
    cli_progress_start(&ps, "synth", out);
    if (celer_synth_write(&s, t, (uint64_t)seed, out, cli_progress_show, &ps, &r, &err)) {
        cli_progress_end(&ps);
        return cli_report(&err);
    }
    double dt = cli_now_s() - ps.t0;
    char   b[32];
    double p = (double)r.n_params;
    fprintf(stderr, "celer synth: wrote %s: %s %s, %llu tensors, %.2f%s parameters, %s in %.1f s (%.0f MB/s)\n", out,
            s.name ? s.name : s.arch, t->name, (unsigned long long)r.n_tensors, p >= 1e9 ? p / 1e9 : p / 1e6,
            p >= 1e9 ? "B" : "M", cli_bytes(r.file_bytes, b, sizeof b), dt, dt > 0 ? (double)r.file_bytes / 1e6 / dt : 0.0);
    return EXIT_OK;
}
