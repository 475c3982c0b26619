/* One model reply for the CLI: template → tokens → generate → stream split into channels. */
#include "reply.h"

#include "chat/output.h"
#include "chat/template.h"
#include "models/model_file.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    celer_chat_output out;
    bool              show_reasoning;
    bool              in_reasoning; /* the last text printed was reasoning */
    char             *content;      /* what was printed as content */
    size_t            n_content, cap;
    celer_error       err;
    bool              failed;
} printer;

static void keep_content(printer *p, const char *s, size_t n)
{
    if (p->n_content + n + 1 > p->cap) {
        size_t cap = (p->n_content + n + 1) * 2;
        char  *c   = realloc(p->content, cap);
        if (!c) return; /* the history loses this piece; the reply itself is printed */
        p->content = c, p->cap = cap;
    }
    memcpy(p->content + p->n_content, s, n);
    p->n_content += n;
    p->content[p->n_content] = '\0';
}

/* Content to stdout; reasoning too with --show-reasoning (between <think> marks); tool calls
 * as one JSON object per call. */
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
        keep_content(p, ev->text, ev->len);
        break;
    case CELER_CHAT_EVENT_TOOL_CALL_BEGIN: printf("{\"tool_call\": \"%s\", \"arguments\": ", ev->name); break;
    case CELER_CHAT_EVENT_TOOL_CALL_ARGS: fwrite(ev->text, 1, ev->len, stdout); break;
    case CELER_CHAT_EVENT_TOOL_CALL_END: puts("}"); break;
    case CELER_CHAT_EVENT_ERROR: fwrite(ev->text, 1, ev->len, stdout); break; /* a malformed call: show what came */
    default: break;
    }
    fflush(stdout);
}

static bool on_text(void *user, const char *text, size_t n)
{
    printer *p = user;
    if (celer_chat_output_push(&p->out, text, n, on_event, p, &p->err)) {
        p->failed = true;
        return false;
    }
    return true;
}

/* The prompt text: the rendered template, or the last message's content as it is. */
static int render(celer_engine *e, const cJSON *messages, bool chat, char **out, size_t *n, celer_error *err)
{
    if (!chat) {
        const cJSON *last = cJSON_GetArrayItem(messages, cJSON_GetArraySize(messages) - 1);
        const char  *text = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(last, "content"));
        *n                = text ? strlen(text) : 0;
        *out              = malloc(*n + 1);
        if (!*out) return EXIT_RUNTIME;
        memcpy(*out, text ? text : "", *n + 1);
        return EXIT_OK;
    }
    bool used;
    if (celer_chat_apply(celer_engine_model_file(e), messages, NULL, true, NULL, out, n, &used, err)) return cli_report(err);
    if (!used) fprintf(stderr, "celer: the model has no chat template; joining the messages as plain text\n");
    return EXIT_OK;
}

int reply_run(celer_engine *e, const cJSON *messages, const celer_gen_params *gp, reply_opts *o)
{
    celer_error             err = {0};
    const celer_model_file *mf  = celer_engine_model_file(e);
    char                   *text;
    size_t                  text_n;
    int                     rc = render(e, messages, o->chat, &text, &text_n, &err);
    if (rc) return rc;
    int32_t *ids = NULL;
    size_t   n_ids;
    /* a rendered template writes BOS itself, as transformers' apply_chat_template assumes */
    if (celer_tokenizer_encode(celer_engine_tokenizer(e), text, text_n,
                               (celer_encode_opts){.add_special = !o->chat, .parse_special = o->chat}, &ids, &n_ids, &err)) {
        free(text);
        return cli_report(&err);
    }
    size_t                src_n = 0;
    const char           *src   = o->chat ? celer_chat_template_source(mf, &src_n) : NULL;
    printer               pr    = {.show_reasoning = o->show_reasoning};
    celer_chat_output_cfg oc    = {
           .family = o->chat ? celer_chat_family_pick(celer_model_file_hparams(mf)->arch, src) : CELER_CHAT_FAMILY_PLAIN};
    oc.starts_in_reasoning = celer_chat_prompt_opens_reasoning(oc.family, text, text_n);
    free(text);
    celer_gen_stats st;
    if (celer_chat_output_init(&pr.out, &oc, &err))
        rc = cli_report(&err);
    else if (celer_engine_generate(e, ids, n_ids, gp, on_text, &pr, &st, &err))
        rc = cli_report(&err);
    else if (pr.failed || celer_chat_output_finish(&pr.out, on_event, &pr, &pr.err))
        rc = cli_report(&pr.err);
    else {
        putchar('\n');
        if (!o->quiet_stats)
            fprintf(stderr,
                    "celer: prompt %lld tokens (%lld reused), %.1f tok/s; generated %lld tokens, %.1f tok/s; first token "
                    "%.0f ms; finish: %s\n",
                    (long long)st.n_prompt, (long long)st.n_reused,
                    st.t_prompt > 0 ? (double)(st.n_prompt - st.n_reused) / st.t_prompt : 0.0, (long long)st.n_gen,
                    st.t_gen > 0 ? (double)(st.n_gen > 1 ? st.n_gen - 1 : st.n_gen) / st.t_gen : 0.0, st.t_first * 1e3,
                    st.finish);
    }
    celer_chat_output_free(&pr.out);
    free(ids);
    o->content = pr.content;
    return rc;
}
