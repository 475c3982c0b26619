/* celer template: render a chat template (a model's, or a .jinja file) for a conversation, byte
 * for byte as transformers' apply_chat_template(..., tokenize=False) renders it. */
#include "cli.h"

#include "chat/template.h"
#include "core/json.h"
#include "core/mapped_file.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INPUT (64u << 20) /* bytes of a template, messages or tools file */

static void template_usage(FILE *out)
{
    fprintf(out, "usage: celer template (-m MODEL | --file T.jinja) --messages M.json [options]\n\n"
                 "Prints the prompt a chat template renders for a conversation, exactly as Hugging Face\n"
                 "transformers' apply_chat_template(..., tokenize=False) does (jinja2 semantics), with no\n"
                 "newline added. A model without a template gets its messages' contents concatenated, with a\n"
                 "warning on stderr.\n\n"
                 "options:\n"
                 "  -m, --model MODEL      a .gguf file or model directory: its chat template, bos and eos tokens\n"
                 "  -f, --file T.jinja     a template file instead of a model's\n"
                 "      --messages FILE    JSON array of messages ({\"role\": ..., \"content\": ...}); - for stdin\n"
                 "      --tools FILE       JSON array of tool definitions (the template's `tools`)\n"
                 "      --documents FILE   JSON array of documents (the template's `documents`)\n"
                 "      --no-generation-prompt  add_generation_prompt=false (default: true)\n"
                 "      --var NAME=JSON    an extra template variable, e.g. --var enable_thinking=false\n"
                 "                         (repeatable; JSON that does not parse is taken as a string)\n"
                 "      --bos TEXT         bos_token (default: the model's; none with --file)\n"
                 "      --eos TEXT         eos_token (default: the model's; none with --file)\n"
                 "  -h, --help             show this help\n\n"
                 "strftime_now() uses SOURCE_DATE_EPOCH (seconds, UTC) when it is set, else the clock (UTC).\n"
                 "exit codes: 0 ok; 2 bad input: arguments, files, a template error or raise_exception() in\n"
                 "the template (the message names line:column); 3 out of memory.\n");
}

static int read_json(const char *path, cJSON **out)
{
    celer_error  err = {0};
    celer_status st;
    if (!strcmp(path, "-")) {
        size_t cap = 1 << 16, n = 0;
        char  *buf = malloc(cap);
        if (!buf) return EXIT_RUNTIME;
        size_t k;
        while ((k = fread(buf + n, 1, cap - n, stdin)) > 0) {
            n += k;
            if (n == cap) {
                if (cap >= MAX_INPUT) {
                    free(buf);
                    return cli_usage_error("template", "standard input is larger than %u MiB", MAX_INPUT >> 20);
                }
                char *p = realloc(buf, cap * 2);
                if (!p) {
                    free(buf);
                    return EXIT_RUNTIME;
                }
                buf = p, cap *= 2;
            }
        }
        st = celer_json_parse(buf, n, "<stdin>", out, &err);
        free(buf);
    } else {
        st = celer_json_read_file(path, MAX_INPUT, out, &err);
    }
    return st ? cli_report(&err) : EXIT_OK;
}

typedef struct {
    const char *model, *file, *messages, *tools, *documents, *bos, *eos;
    bool        add_generation_prompt;
    cJSON      *vars;
} tpl_args;

static int add_var(tpl_args *a, const char *spec)
{
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec) return cli_usage_error("template", "--var wants NAME=JSON, got '%s'", spec);
    char *name = strndup(spec, (size_t)(eq - spec));
    if (!name) return EXIT_RUNTIME;
    cJSON *v = cJSON_Parse(eq + 1);
    if (!v) v = cJSON_CreateString(eq + 1);
    if (!v) {
        free(name);
        return EXIT_RUNTIME;
    }
    if (cJSON_GetObjectItemCaseSensitive(a->vars, name)) cJSON_ReplaceItemInObjectCaseSensitive(a->vars, name, v);
    else cJSON_AddItemToObject(a->vars, name, v);
    free(name);
    return EXIT_OK;
}

static int render(const tpl_args *a)
{
    cJSON      *messages = NULL, *tools = NULL, *documents = NULL, *ctx = NULL;
    celer_error err      = {0};
    int         rc;
    char       *out = NULL, *src = NULL;
    size_t      n   = 0;
    uint64_t    src_n;
    celer_model_file *mf = NULL;
    celer_template   *t  = NULL;
    if ((rc = read_json(a->messages, &messages))) goto done;
    if (a->tools && (rc = read_json(a->tools, &tools))) goto done;
    if (a->documents && (rc = read_json(a->documents, &documents))) goto done;
    if (a->model && !a->bos && !a->eos) {
        bool used;
        if (celer_model_file_open(&mf, a->model, &err) ||
            celer_chat_apply(mf, messages, tools, a->add_generation_prompt, a->vars, &out, &n, &used, &err)) {
            rc = cli_report(&err);
            goto done;
        }
        if (!used) fprintf(stderr, "celer: warning: %s has no chat template; the messages' contents are concatenated as they are\n", a->model);
    } else if (a->model) {
        /* --bos/--eos with a model: render its template with these tokens */
        if (celer_model_file_open(&mf, a->model, &err)) {
            rc = cli_report(&err);
            goto done;
        }
        bool used;
        cJSON *extra = cJSON_Duplicate(a->vars, true);
        if (!extra) {
            rc = EXIT_RUNTIME;
            goto done;
        }
        if (a->bos) cJSON_AddStringToObject(extra, "bos_token", a->bos);
        if (a->eos) cJSON_AddStringToObject(extra, "eos_token", a->eos);
        celer_status st = celer_chat_apply(mf, messages, tools, a->add_generation_prompt, extra, &out, &n, &used, &err);
        cJSON_Delete(extra);
        if (st) {
            rc = cli_report(&err);
            goto done;
        }
        if (!used) fprintf(stderr, "celer: warning: %s has no chat template; the messages' contents are concatenated as they are\n", a->model);
    } else {
        if (celer_file_read_all(a->file, MAX_INPUT, &src, &src_n, &err) ||
            celer_chat_context(messages, tools, documents, a->add_generation_prompt, a->bos, a->eos, a->vars, &ctx, &err) ||
            celer_template_parse(&t, src, src_n, a->file, &err) || celer_template_render(t, ctx, &out, &n, &err)) {
            rc = cli_report(&err);
            goto done;
        }
    }
    if (fwrite(out, 1, n, stdout) != n || fflush(stdout)) {
        fprintf(stderr, "celer: cannot write the rendered prompt to stdout\n");
        rc = EXIT_RUNTIME;
    }
done:
    free(out);
    free(src);
    celer_template_free(t);
    celer_model_file_close(mf);
    cJSON_Delete(messages);
    cJSON_Delete(tools);
    cJSON_Delete(documents);
    cJSON_Delete(ctx);
    return rc;
}

int cmd_template(int argc, char **argv)
{
    enum { OPT_MESSAGES = 256, OPT_TOOLS, OPT_DOCUMENTS, OPT_NO_GEN, OPT_VAR, OPT_BOS, OPT_EOS };
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'},          {"file", required_argument, NULL, 'f'},
        {"messages", required_argument, NULL, OPT_MESSAGES}, {"tools", required_argument, NULL, OPT_TOOLS},
        {"documents", required_argument, NULL, OPT_DOCUMENTS},
        {"no-generation-prompt", no_argument, NULL, OPT_NO_GEN}, {"var", required_argument, NULL, OPT_VAR},
        {"bos", required_argument, NULL, OPT_BOS},         {"eos", required_argument, NULL, OPT_EOS},
        {"help", no_argument, NULL, 'h'},                  {NULL, 0, NULL, 0}};
    tpl_args a = {.add_generation_prompt = true, .vars = cJSON_CreateObject()};
    if (!a.vars) return EXIT_RUNTIME;
    int c, rc = EXIT_OK;
    optind = 1;
    opterr = 0;
    while (rc == EXIT_OK && (c = getopt_long(argc, argv, "m:f:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': a.model = optarg; break;
        case 'f': a.file = optarg; break;
        case OPT_MESSAGES: a.messages = optarg; break;
        case OPT_TOOLS: a.tools = optarg; break;
        case OPT_DOCUMENTS: a.documents = optarg; break;
        case OPT_NO_GEN: a.add_generation_prompt = false; break;
        case OPT_VAR: rc = add_var(&a, optarg); break;
        case OPT_BOS: a.bos = optarg; break;
        case OPT_EOS: a.eos = optarg; break;
        case 'h':
            template_usage(stdout);
            cJSON_Delete(a.vars);
            return EXIT_OK;
        default: rc = cli_usage_error("template", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (rc == EXIT_OK) {
        if (optind < argc) rc = cli_usage_error("template", "unexpected argument '%s'", argv[optind]);
        else if (!a.model == !a.file) rc = cli_usage_error("template", "give exactly one of -m MODEL and --file T.jinja");
        else if (!a.messages) rc = cli_usage_error("template", "--messages FILE is required");
        else rc = render(&a);
    }
    cJSON_Delete(a.vars);
    return rc;
}
