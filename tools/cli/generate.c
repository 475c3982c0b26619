/* celer generate: one prompt in, generated text out. stdout carries the generated content and
 * nothing else; stderr carries the backend line and the summary. */
#include "reply.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void generate_usage(FILE *out)
{
    fprintf(out,
            "usage: celer generate [-m MODEL] -p TEXT [options]\n\n"
            "Generates a continuation of TEXT and prints it to stdout; diagnostics and a speed summary go to\n"
            "stderr.\n\n"
            "options:\n"
            "  -m, --model MODEL        a .gguf file or model directory (default: the default model,\n"
            "                           see scripts/fetch-model)\n"
            "  -p, --prompt TEXT        the prompt (the user's message, in chat mode)\n"
            "      --chat, --no-chat    apply the model's chat template (default: when the model has one)\n"
            "      --system TEXT        a system message (chat mode)\n"
            "      --show-reasoning     also print the model's reasoning (its thinking block)\n"
            "  -n, --max-tokens N       generate at most N tokens (default 256)\n"
            "      --temp T             sampling temperature; 0 is greedy (default 0)\n"
            "      --top-k K            keep the K most likely tokens (default 0: off)\n"
            "      --top-p P            keep the smallest set with probability P (default 1: off)\n"
            "      --min-p P            drop tokens below P times the best one's probability (default 0: off)\n"
            "      --repeat-penalty R   penalize the last 64 tokens (default 1: off)\n"
            "      --presence-penalty X, --frequency-penalty X   OpenAI-style penalties (default 0)\n"
            "      --seed S             random seed for sampling (default 0)\n"
            "      --stop TEXT          stop when TEXT is generated (may be repeated)\n"
            "  -b, --backend B          auto, cpu, cuda or rocm (default auto: the best this build has)\n"
            "  -t, --threads N          CPU threads (default: one per physical core)\n"
            "  -c, --ctx N              context length in tokens (default: the trained context, at most 4096)\n"
            "  -h, --help               show this help\n\n" CLI_EXIT_CODES);
}

int cmd_generate(int argc, char **argv)
{
    enum { O_TEMP = 256, O_TOPK, O_TOPP, O_MINP, O_REP, O_PRES, O_FREQ, O_SEED, O_STOP, O_CHAT, O_NO_CHAT, O_SYSTEM,
           O_REASONING };
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'},      {"prompt", required_argument, NULL, 'p'},
        {"max-tokens", required_argument, NULL, 'n'}, {"temp", required_argument, NULL, O_TEMP},
        {"top-k", required_argument, NULL, O_TOPK},    {"top-p", required_argument, NULL, O_TOPP},
        {"min-p", required_argument, NULL, O_MINP},    {"repeat-penalty", required_argument, NULL, O_REP},
        {"presence-penalty", required_argument, NULL, O_PRES}, {"frequency-penalty", required_argument, NULL, O_FREQ},
        {"seed", required_argument, NULL, O_SEED},     {"stop", required_argument, NULL, O_STOP},
        {"threads", required_argument, NULL, 't'},     {"ctx", required_argument, NULL, 'c'},
        {"backend", required_argument, NULL, 'b'},     {"chat", no_argument, NULL, O_CHAT},           {"no-chat", no_argument, NULL, O_NO_CHAT},
        {"system", required_argument, NULL, O_SYSTEM}, {"show-reasoning", no_argument, NULL, O_REASONING},
        {"help", no_argument, NULL, 'h'},              {0},
    };
    const char         *model = NULL, *prompt = NULL, *system = NULL;
    int                 chat = -1; /* -1: when the model has a template */
    bool                show_reasoning = false;
    const char         *stops[17] = {0};
    int                 n_stops = 0;
    celer_gen_params    gp  = {.sampling = celer_sampling_default(), .max_tokens = 256};
    celer_engine_config cfg = {0};
    double              v;
    int                 c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":m:p:n:t:c:b:h", opts, NULL)) != -1) {
        const char *arg = optarg;
        switch (c) {
        case 'm': model = arg; break;
        case 'p': prompt = arg; break;
        case 'n':
            if (!cli_parse_double(arg, 1, 1 << 24, &v) || v != floor(v))
                return cli_usage_error("generate", "--max-tokens wants a whole number from 1, got '%s'", arg);
            gp.max_tokens = (int32_t)v;
            break;
        case O_TEMP:
            if (!cli_parse_double(arg, 0, 100, &v)) return cli_usage_error("generate", "--temp wants 0 to 100, got '%s'", arg);
            gp.sampling.temperature = (float)v;
            break;
        case O_TOPK:
            if (!cli_parse_double(arg, 0, 1 << 24, &v)) return cli_usage_error("generate", "--top-k wants 0 or more, got '%s'", arg);
            gp.sampling.top_k = (int32_t)v;
            break;
        case O_TOPP:
            if (!cli_parse_double(arg, 0, 1, &v) || v == 0) return cli_usage_error("generate", "--top-p wants (0, 1], got '%s'", arg);
            gp.sampling.top_p = (float)v;
            break;
        case O_MINP:
            if (!cli_parse_double(arg, 0, 1, &v)) return cli_usage_error("generate", "--min-p wants [0, 1], got '%s'", arg);
            gp.sampling.min_p = (float)v;
            break;
        case O_REP:
            if (!cli_parse_double(arg, 0.01, 100, &v)) return cli_usage_error("generate", "--repeat-penalty wants 0.01 to 100, got '%s'", arg);
            gp.sampling.repeat_penalty = (float)v;
            break;
        case O_PRES:
        case O_FREQ:
            if (!cli_parse_double(arg, -2, 2, &v)) return cli_usage_error("generate", "%s wants -2 to 2, got '%s'", argv[optind - 2], arg);
            if (c == O_PRES) gp.sampling.presence_penalty = (float)v;
            else gp.sampling.frequency_penalty = (float)v;
            break;
        case O_SEED:
            if (!cli_parse_double(arg, 0, 1.8e19, &v)) return cli_usage_error("generate", "--seed wants a number, got '%s'", arg);
            gp.sampling.seed = (uint64_t)v;
            break;
        case O_STOP:
            if (n_stops == 16) return cli_usage_error("generate", "at most 16 --stop strings");
            if (!*arg) return cli_usage_error("generate", "--stop wants a non-empty string");
            stops[n_stops++] = arg;
            break;
        case 't':
            if (!cli_parse_double(arg, 1, 1024, &v)) return cli_usage_error("generate", "--threads wants 1 to 1024, got '%s'", arg);
            cfg.n_threads = (int)v;
            break;
        case 'c':
            if (!cli_parse_double(arg, 16, 1 << 24, &v) || v != floor(v))
                return cli_usage_error("generate", "--ctx wants 16 to 16777216 tokens, got '%s'", arg);
            cfg.n_ctx = (int64_t)v;
            break;
        case 'b':
            if (cli_parse_backend("generate", "--backend", arg, &cfg.backend)) return EXIT_BAD_INPUT;
            break;
        case O_CHAT: chat = 1; break;
        case O_NO_CHAT: chat = 0; break;
        case O_SYSTEM: system = arg; break;
        case O_REASONING: show_reasoning = true; break;
        case 'h': generate_usage(stdout); return EXIT_OK;
        case ':': return cli_usage_error("generate", "option %s needs a value", argv[optind - 1]);
        default: return cli_usage_error("generate", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("generate", "unexpected argument '%s' (give the prompt with -p)", argv[optind]);
    if (!prompt) return cli_usage_error("generate", "no prompt given (-p TEXT)");
    /* here, not in the tokenizer: there the byte offset would count in the templated text */
    if (cli_check_utf8("generate", "the prompt (-p)", prompt) ||
        (system && cli_check_utf8("generate", "the system message (--system)", system)))
        return EXIT_BAD_INPUT;
    for (int i = 0; i < n_stops; i++)
        if (cli_check_utf8("generate", "a stop string (--stop)", stops[i])) return EXIT_BAD_INPUT;
    if (!model && !(model = cli_default_model())) return EXIT_BAD_INPUT;
    gp.stop = n_stops ? stops : NULL;

    celer_error   err = {0};
    celer_engine *e   = NULL;
    if (celer_engine_create(&e, model, &cfg, &err)) return cli_report(&err);
    cli_print_loaded(model, e);
    if (chat < 0) chat = celer_model_file_has_chat_template(celer_engine_model_file(e));
    if (system && !chat) {
        celer_engine_free(e);
        return cli_usage_error("generate", "--system needs chat mode (the model has no template, or --no-chat)");
    }
    cJSON *msgs = cJSON_CreateArray();
    if (system) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "system");
        cJSON_AddStringToObject(m, "content", system);
        cJSON_AddItemToArray(msgs, m);
    }
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "user");
    cJSON_AddStringToObject(m, "content", prompt);
    cJSON_AddItemToArray(msgs, m);
    reply_opts ro = {.chat = chat, .show_reasoning = show_reasoning};
    int        rc = reply_run(e, msgs, &gp, &ro);
    free(ro.content);
    cJSON_Delete(msgs);
    celer_engine_free(e);
    return rc;
}
