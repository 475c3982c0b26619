/* celer chat: an interactive conversation. Each turn renders the whole conversation with the
 * model's template; the engine reuses the cached positions of the turns before, so only the
 * new message is prefilled. */
#include "reply.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <unistd.h>

static void chat_usage(FILE *out)
{
    fprintf(out, "usage: celer chat [-m MODEL | MODEL] [--system TEXT] [options]\n\n"
                 "Talks with the model: type a message and press Enter; the reply streams back. Lines starting\n"
                 "with / are commands: /reset forgets the conversation, /exit (or end of input) quits.\n"
                 "At a terminal a message that cannot be answered (not UTF-8, longer than the context) is\n"
                 "reported and skipped; from a pipe or a file it ends the chat with exit code 2.\n\n"
                 "options:\n"
                 "  -m, --model MODEL      a .gguf file or model directory (default: the default model)\n"
                 "      --system TEXT      a system message for the whole conversation\n"
                 "      --temp T           sampling temperature (default 0.7; 0 is greedy)\n"
                 "      --seed S           random seed (default 0)\n"
                 "  -n, --max-tokens N     tokens per reply at most (default 1024)\n"
                 "      --show-reasoning   also print the model's thinking\n"
                 "  -b, --backend B        auto, cpu, cuda or rocm (default auto: the best this build has)\n"
                 "  -t, --threads N        CPU threads (default: one per physical core)\n"
                 "  -c, --ctx N            context length (default: the trained context, at most 4096)\n"
                 "  -h, --help             show this help\n\n" CLI_EXIT_CODES);
}

static void add_message(cJSON *msgs, const char *role, const char *content)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    cJSON_AddItemToArray(msgs, m);
}

static cJSON *new_conversation(const char *system)
{
    cJSON *msgs = cJSON_CreateArray();
    if (system) add_message(msgs, "system", system);
    return msgs;
}

int cmd_chat(int argc, char **argv)
{
    enum { O_SYSTEM = 256, O_TEMP, O_SEED, O_REASONING };
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'},    {"system", required_argument, NULL, O_SYSTEM},
        {"temp", required_argument, NULL, O_TEMP},  {"seed", required_argument, NULL, O_SEED},
        {"max-tokens", required_argument, NULL, 'n'}, {"show-reasoning", no_argument, NULL, O_REASONING},
        {"threads", required_argument, NULL, 't'},  {"ctx", required_argument, NULL, 'c'},
        {"backend", required_argument, NULL, 'b'},  {"help", no_argument, NULL, 'h'},
        {0},
    };
    const char         *model = NULL, *system = NULL;
    celer_gen_params    gp    = {.sampling = celer_sampling_default(), .max_tokens = 1024};
    celer_engine_config cfg   = {0};
    bool                reasoning = false;
    long                v;
    int                 c;
    gp.sampling.temperature = 0.7f;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":m:n:t:c:b:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case O_SYSTEM: system = optarg; break;
        case O_TEMP: {
            char  *end;
            double t = strtod(optarg, &end);
            if (*end || end == optarg || !(t >= 0 && t <= 100)) /* written so that NaN fails too */
                return cli_usage_error("chat", "--temp wants 0 to 100, got '%s'", optarg);
            gp.sampling.temperature = (float)t;
            break;
        }
        case O_SEED:
            if (!cli_parse_long(optarg, 0, LONG_MAX, &v)) return cli_usage_error("chat", "--seed wants a number, got '%s'", optarg);
            gp.sampling.seed = (uint64_t)v;
            break;
        case 'n':
            if (!cli_parse_long(optarg, 1, 1 << 24, &v)) return cli_usage_error("chat", "--max-tokens wants 1 or more, got '%s'", optarg);
            gp.max_tokens = (int32_t)v;
            break;
        case O_REASONING: reasoning = true; break;
        case 't':
            if (!cli_parse_long(optarg, 1, 1024, &v)) return cli_usage_error("chat", "--threads wants 1 to 1024, got '%s'", optarg);
            cfg.n_threads = (int)v;
            break;
        case 'c':
            if (!cli_parse_long(optarg, 16, 1 << 24, &v)) return cli_usage_error("chat", "--ctx wants 16 to 16777216, got '%s'", optarg);
            cfg.n_ctx = v;
            break;
        case 'b':
            if (cli_parse_backend("chat", "--backend", optarg, &cfg.backend)) return EXIT_BAD_INPUT;
            break;
        case 'h': chat_usage(stdout); return EXIT_OK;
        case ':': return cli_usage_error("chat", "option %s needs a value", argv[optind - 1]);
        default: return cli_usage_error("chat", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) {
        if (model || optind + 1 < argc) return cli_usage_error("chat", "give one model, not '%s'", argv[argc - 1]);
        model = argv[optind];
    }
    if (!model && !(model = cli_default_model())) return EXIT_BAD_INPUT;
    if (system && cli_check_utf8("chat", "the system message (--system)", system)) return EXIT_BAD_INPUT;
    celer_error   err = {0};
    celer_engine *e   = NULL;
    if (celer_engine_create(&e, model, &cfg, &err)) return cli_report(&err);
    cli_print_load_note(e);
    if (!celer_model_file_has_chat_template(celer_engine_model_file(e)))
        fprintf(stderr, "celer: the model has no chat template; turns are joined as plain text\n");
    bool   tty  = isatty(STDIN_FILENO);
    cJSON *msgs = new_conversation(system);
    char  *line = NULL;
    size_t cap  = 0;
    int    rc   = EXIT_OK;
    long   no   = 0; /* input line number */
    fprintf(stderr, "celer: chatting with %s; /reset starts over, /exit or Ctrl-D quits\n", model);
    for (;;) {
        if (tty) fputs("> ", stderr);
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) break;
        no++;
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        if (!n) continue;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!strcmp(line, "/reset")) {
            cJSON_Delete(msgs);
            msgs = new_conversation(system);
            celer_engine_reset(e);
            continue;
        }
        char what[64];
        snprintf(what, sizeof what, "input line %ld", no);
        if (cli_check_utf8("chat", what, line)) { /* checked here: the tokenizer would count in the templated text */
            if (tty) continue;
            rc = EXIT_BAD_INPUT;
            break;
        }
        add_message(msgs, "user", line);
        reply_opts ro = {.chat = true, .show_reasoning = reasoning, .quiet_stats = tty};
        rc            = reply_run(e, msgs, &gp, &ro);
        add_message(msgs, "assistant", ro.content ? ro.content : "");
        free(ro.content);
        /* a bad turn (too long, a template error) is reported and skipped at a terminal; a script gets exit 2 */
        if (rc == EXIT_RUNTIME || (rc && !tty)) break;
        if (rc) {
            cJSON_DeleteItemFromArray(msgs, cJSON_GetArraySize(msgs) - 1);
            cJSON_DeleteItemFromArray(msgs, cJSON_GetArraySize(msgs) - 1);
            rc = EXIT_OK;
        }
    }
    free(line);
    cJSON_Delete(msgs);
    celer_engine_free(e);
    return rc;
}
