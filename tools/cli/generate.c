/* celer generate: one prompt in, generated text out. stdout carries the generated content and
 * nothing else; stderr carries the backend line and the summary. */
#include "cli.h"

#include "chat/output.h"
#include "chat/template.h"
#include "models/model_file.h"

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
            "  -m, --model MODEL        a .gguf file (default: the default model, see scripts/fetch-model)\n"
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
            "  -t, --threads N          CPU threads (default: one per physical core)\n"
            "  -c, --ctx N              context length in tokens (default: the trained context, at most 4096)\n"
            "  -h, --help               show this help\n");
}

static bool parse_num(const char *s, double lo, double hi, double *v)
{
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(x) || x < lo || x > hi) return false;
    *v = x;
    return true;
}

typedef struct {
    celer_chat_output out;
    bool              show_reasoning;
    bool              in_reasoning; /* the last text printed was reasoning */
    celer_error       err;
    bool              failed;
} printer;

/* Content to stdout; reasoning too with --show-reasoning (marked off); tool calls as JSON. */
static void on_event(const celer_chat_event *ev, void *user)
{
    printer *p = user;
    switch (ev->kind) {
    case CELER_CHAT_EVENT_REASONING:
        if (!p->show_reasoning) return;
        if (!p->in_reasoning) fputs("<think>", stdout), p->in_reasoning = true;
        fwrite(ev->text, 1, ev->len, stdout);
        break;
    case CELER_CHAT_EVENT_CONTENT:
        if (p->in_reasoning) fputs("</think>\n", stdout), p->in_reasoning = false;
        fwrite(ev->text, 1, ev->len, stdout);
        break;
    case CELER_CHAT_EVENT_TOOL_CALL_BEGIN: printf("{\"tool_call\": \"%s\", \"arguments\": ", ev->name); break;
    case CELER_CHAT_EVENT_TOOL_CALL_ARGS: fwrite(ev->text, 1, ev->len, stdout); break;
    case CELER_CHAT_EVENT_TOOL_CALL_END: puts("}"); break;
    case CELER_CHAT_EVENT_ERROR: fwrite(ev->text, 1, ev->len, stdout); break; /* a malformed call: show what came */
    default: break;
    }
    fflush(stdout);
}

static bool write_text(void *user, const char *text, size_t n)
{
    printer *p = user;
    if (celer_chat_output_push(&p->out, text, n, on_event, p, &p->err)) {
        p->failed = true;
        return false;
    }
    return true;
}

/* The prompt as the model expects it: its chat template over [system,] user, or the raw text. */
static int build_prompt(celer_engine *e, const char *system, const char *user, bool chat, char **out, size_t *n,
                        celer_error *err)
{
    const celer_model_file *mf = celer_engine_model_file(e);
    if (!chat) {
        *n   = strlen(user);
        *out = malloc(*n + 1);
        if (!*out) return EXIT_RUNTIME;
        memcpy(*out, user, *n + 1);
        return EXIT_OK;
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
    cJSON_AddStringToObject(m, "content", user);
    cJSON_AddItemToArray(msgs, m);
    bool used;
    celer_status st = celer_chat_apply(mf, msgs, NULL, true, NULL, out, n, &used, err);
    cJSON_Delete(msgs);
    if (st) return cli_report(err);
    if (!used) fprintf(stderr, "celer: the model has no chat template; joining the messages as plain text\n");
    return EXIT_OK;
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
        {"chat", no_argument, NULL, O_CHAT},           {"no-chat", no_argument, NULL, O_NO_CHAT},
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
    while ((c = getopt_long(argc, argv, ":m:p:n:t:c:h", opts, NULL)) != -1) {
        const char *arg = optarg;
        switch (c) {
        case 'm': model = arg; break;
        case 'p': prompt = arg; break;
        case 'n':
            if (!parse_num(arg, 1, 1 << 24, &v) || v != floor(v))
                return cli_usage_error("generate", "--max-tokens wants a whole number from 1, got '%s'", arg);
            gp.max_tokens = (int32_t)v;
            break;
        case O_TEMP:
            if (!parse_num(arg, 0, 100, &v)) return cli_usage_error("generate", "--temp wants 0 to 100, got '%s'", arg);
            gp.sampling.temperature = (float)v;
            break;
        case O_TOPK:
            if (!parse_num(arg, 0, 1 << 24, &v)) return cli_usage_error("generate", "--top-k wants 0 or more, got '%s'", arg);
            gp.sampling.top_k = (int32_t)v;
            break;
        case O_TOPP:
            if (!parse_num(arg, 0, 1, &v) || v == 0) return cli_usage_error("generate", "--top-p wants (0, 1], got '%s'", arg);
            gp.sampling.top_p = (float)v;
            break;
        case O_MINP:
            if (!parse_num(arg, 0, 1, &v)) return cli_usage_error("generate", "--min-p wants [0, 1], got '%s'", arg);
            gp.sampling.min_p = (float)v;
            break;
        case O_REP:
            if (!parse_num(arg, 0.01, 100, &v)) return cli_usage_error("generate", "--repeat-penalty wants 0.01 to 100, got '%s'", arg);
            gp.sampling.repeat_penalty = (float)v;
            break;
        case O_PRES:
        case O_FREQ:
            if (!parse_num(arg, -2, 2, &v)) return cli_usage_error("generate", "%s wants -2 to 2, got '%s'", argv[optind - 2], arg);
            if (c == O_PRES) gp.sampling.presence_penalty = (float)v;
            else gp.sampling.frequency_penalty = (float)v;
            break;
        case O_SEED:
            if (!parse_num(arg, 0, 1.8e19, &v)) return cli_usage_error("generate", "--seed wants a number, got '%s'", arg);
            gp.sampling.seed = (uint64_t)v;
            break;
        case O_STOP:
            if (n_stops == 16) return cli_usage_error("generate", "at most 16 --stop strings");
            if (!*arg) return cli_usage_error("generate", "--stop wants a non-empty string");
            stops[n_stops++] = arg;
            break;
        case 't':
            if (!parse_num(arg, 1, 1024, &v)) return cli_usage_error("generate", "--threads wants 1 to 1024, got '%s'", arg);
            cfg.n_threads = (int)v;
            break;
        case 'c':
            if (!parse_num(arg, 16, 1 << 24, &v) || v != floor(v))
                return cli_usage_error("generate", "--ctx wants 16 to 16777216 tokens, got '%s'", arg);
            cfg.n_ctx = (int64_t)v;
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
    if (!model && !(model = cli_default_model())) return EXIT_BAD_INPUT;
    gp.stop = n_stops ? stops : NULL;

    celer_error   err = {0};
    celer_engine *e   = NULL;
    if (celer_engine_create(&e, model, &cfg, &err)) return cli_report(&err);
    const celer_hparams *hp = celer_model_file_hparams(celer_engine_model_file(e));
    fprintf(stderr, "celer: %s (%s, %lld layers) on %s, context %lld\n", model, hp->arch, (long long)hp->n_layer,
            celer_engine_backend_name(e), (long long)celer_engine_ctx(e));
    const celer_model_file *mf = celer_engine_model_file(e);
    if (chat < 0) chat = celer_model_file_has_chat_template(mf);
    if (system && !chat) {
        celer_engine_free(e);
        return cli_usage_error("generate", "--system needs chat mode (the model has no template, or --no-chat)");
    }
    char  *text;
    size_t text_n;
    int    rc = build_prompt(e, system, prompt, chat, &text, &text_n, &err);
    if (rc) {
        celer_engine_free(e);
        return rc;
    }
    int32_t *ids = NULL;
    size_t   n_ids;
    /* a rendered template writes BOS itself, as transformers' apply_chat_template assumes */
    if (celer_tokenizer_encode(celer_engine_tokenizer(e), text, text_n,
                               (celer_encode_opts){.add_special = !chat, .parse_special = chat}, &ids, &n_ids, &err)) {
        free(text);
        celer_engine_free(e);
        return cli_report(&err);
    }
    size_t             src_n = 0;
    const char        *src   = chat ? celer_chat_template_source(mf, &src_n) : NULL;
    printer            pr    = {.show_reasoning = show_reasoning};
    celer_chat_output_cfg oc = {.family = chat ? celer_chat_family_pick(hp->arch, src) : CELER_CHAT_FAMILY_PLAIN};
    oc.starts_in_reasoning   = celer_chat_prompt_opens_reasoning(oc.family, text, text_n);
    free(text);
    celer_gen_stats st;
    if (celer_chat_output_init(&pr.out, &oc, &err))
        rc = cli_report(&err);
    else if (celer_engine_generate(e, ids, n_ids, &gp, write_text, &pr, &st, &err))
        rc = cli_report(&err);
    else if (pr.failed || celer_chat_output_finish(&pr.out, on_event, &pr, &pr.err))
        rc = cli_report(&pr.err);
    else {
        putchar('\n');
        fprintf(stderr, "celer: prompt %lld tokens, %.1f tok/s; generated %lld tokens, %.1f tok/s; first token %.0f ms; "
                        "finish: %s\n",
                (long long)st.n_prompt, st.t_prompt > 0 ? (double)(st.n_prompt - st.n_reused) / st.t_prompt : 0.0,
                (long long)st.n_gen, st.t_gen > 0 ? (double)(st.n_gen > 1 ? st.n_gen - 1 : st.n_gen) / st.t_gen : 0.0,
                st.t_first * 1e3, st.finish);
    }
    celer_chat_output_free(&pr.out);
    free(ids);
    celer_engine_free(e);
    return rc;
}
