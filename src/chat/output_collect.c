/* Collecting a whole chat output into strings and an OpenAI-shaped tool_calls array. */
#include "chat/output_impl.h"
#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(celer_chat_parsed *p, celer_bytes *b, const char *s, size_t n)
{
    if (!celer_bytes_put(b, s, n)) p->oom = true;
}

static void add_call(celer_chat_parsed *p)
{
    if (!p->tool_calls && !(p->tool_calls = cJSON_CreateArray())) {
        p->oom = true;
        return;
    }
    cJSON *c = cJSON_CreateObject(), *f = cJSON_CreateObject();
    if (!c || !f || !cJSON_AddStringToObject(c, "id", p->pend_id) ||
        !cJSON_AddStringToObject(c, "type", "function") ||
        !cJSON_AddStringToObject(f, "name", p->pend_name ? p->pend_name : "") ||
        !cJSON_AddStringToObject(f, "arguments", p->bargs.p ? p->bargs.p : "")) {
        cJSON_Delete(c), cJSON_Delete(f);
        p->oom = true;
        return;
    }
    cJSON_AddItemToObject(c, "function", f);
    cJSON_AddItemToArray(p->tool_calls, c);
}

void celer_chat_parsed_event(const celer_chat_event *ev, void *user)
{
    celer_chat_parsed *p = user;
    switch (ev->kind) {
    case CELER_CHAT_EVENT_CONTENT: put(p, &p->bc, ev->text, ev->len); break;
    case CELER_CHAT_EVENT_REASONING: put(p, &p->br, ev->text, ev->len); break;
    case CELER_CHAT_EVENT_TOOL_CALL_BEGIN:
        snprintf(p->pend_id, sizeof p->pend_id, "%s", ev->id);
        free(p->pend_name);
        if (!(p->pend_name = strdup(ev->name))) p->oom = true;
        p->bargs.n = 0;
        break;
    case CELER_CHAT_EVENT_TOOL_CALL_ARGS: put(p, &p->bargs, ev->text, ev->len); break;
    case CELER_CHAT_EVENT_TOOL_CALL_END: add_call(p); break;
    case CELER_CHAT_EVENT_ERROR:
        put(p, &p->bi, ev->text, ev->len);
        if (p->n_errors++ == 0) snprintf(p->error, sizeof p->error, "%s", ev->msg ? ev->msg : "");
        break;
    case CELER_CHAT_EVENT_MARKUP: break;
    }
}

/* Moves b into a NUL-terminated string the caller owns. */
static char *take(celer_chat_parsed *p, celer_bytes *b, size_t *len)
{
    char *s = b->p ? b->p : calloc(1, 1);
    if (!s) p->oom = true;
    *len = b->n;
    *b   = (celer_bytes){0};
    return s;
}

celer_status celer_chat_parsed_close(celer_chat_parsed *p, celer_error *err)
{
    p->content   = take(p, &p->bc, &p->content_len);
    p->reasoning = take(p, &p->br, &p->reasoning_len);
    p->invalid   = take(p, &p->bi, &p->invalid_len);
    if (!p->tool_calls && !(p->tool_calls = cJSON_CreateArray())) p->oom = true;
    if (p->oom)
        return celer_fail(err, CELER_ERR_OOM, "chat output: out of memory while collecting the output; the "
                                              "output is too large for this host's memory");
    return CELER_OK;
}

celer_status celer_chat_output_parse(const celer_chat_output_cfg *cfg, const char *text, size_t n,
                                     celer_chat_parsed *out, celer_error *err)
{
    celer_chat_output o = {0};
    celer_status      s = celer_chat_output_init(&o, cfg, err);
    if (s == CELER_OK) s = celer_chat_output_push(&o, text, n, celer_chat_parsed_event, out, err);
    if (s == CELER_OK) s = celer_chat_output_finish(&o, celer_chat_parsed_event, out, err);
    if (s == CELER_OK) s = celer_chat_parsed_close(out, err);
    celer_chat_output_free(&o);
    return s;
}

void celer_chat_parsed_free(celer_chat_parsed *p)
{
    if (!p) return;
    free(p->content), free(p->reasoning), free(p->invalid), free(p->pend_name);
    cJSON_Delete(p->tool_calls);
    celer_bytes_free(&p->bc), celer_bytes_free(&p->br), celer_bytes_free(&p->bi);
    celer_bytes_free(&p->bargs);
    *p = (celer_chat_parsed){0};
}
