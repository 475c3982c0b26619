#include "server/reply.h"

#include "server/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t next_serial(void)
{
    static _Atomic uint64_t serial = 0;
    return ++serial;
}

srv_reply *srv_reply_new(bool chat, bool stream, bool include_usage, const char *model_id, int64_t n_prompt,
                         celer_chat_family family, bool starts_in_reasoning, uint64_t seed)
{
    srv_reply *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->chat = chat, r->stream = stream, r->include_usage = include_usage;
    r->model_id = model_id, r->n_prompt = n_prompt, r->created = (long)time(NULL), r->http = 200, r->refs = 2;
    snprintf(r->id, sizeof r->id, "%s-%016llx%04llx", chat ? "chatcmpl" : "cmpl", (unsigned long long)time(NULL),
             (unsigned long long)(next_serial() & 0xffff));
    r->calls = cJSON_CreateArray();
    celer_chat_output_cfg cfg = {.family = chat ? family : CELER_CHAT_FAMILY_PLAIN,
                                 .starts_in_reasoning = chat && starts_in_reasoning, .id_seed = seed};
    celer_error err = {0};
    r->out_ready    = r->calls && !celer_chat_output_init(&r->out, &cfg, &err);
    if (!r->out_ready) {
        srv_reply_release(r), srv_reply_release(r);
        return NULL;
    }
    r->t_submit = now_s();
    return r;
}

void srv_reply_release(srv_reply *r)
{
    pthread_mutex_lock(&r->mu);
    bool last = --r->refs == 0;
    pthread_mutex_unlock(&r->mu);
    if (!last) return;
    if (r->out_ready) celer_chat_output_free(&r->out);
    cJSON_Delete(r->calls);
    cJSON_Delete(r->logprobs);
    celer_bytes_free(&r->content), celer_bytes_free(&r->reasoning), celer_bytes_free(&r->send);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

/* ---- log-probabilities ---------------------------------------------------------------------- */

void srv_reply_want_logprobs(srv_reply *r, const celer_tokenizer *tok)
{
    r->tok      = tok;
    r->logprobs = cJSON_CreateArray();
}

/* {token, logprob, bytes}: the token's text as the tokenizer decodes it alone (a token that is
 * part of a UTF-8 sequence decodes to U+FFFD), its UTF-8 bytes, and its log-probability. */
static cJSON *token_entry(const srv_reply *r, int32_t id, float lp)
{
    cJSON      *e    = cJSON_CreateObject();
    char       *text = NULL;
    size_t      n    = 0;
    celer_error err  = {0};
    if (celer_tokenizer_decode(r->tok, &id, 1, &text, &n, &err)) text = NULL, n = 0;
    cJSON_AddStringToObject(e, "token", text ? text : "");
    cJSON_AddNumberToObject(e, "logprob", lp);
    cJSON *bytes = cJSON_AddArrayToObject(e, "bytes");
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)text[i]));
    free(text);
    return e;
}

void srv_reply_on_token(void *user, int32_t id, float logprob, const int32_t *top_ids, const float *top_lp, int32_t n)
{
    srv_reply *r = user;
    pthread_mutex_lock(&r->mu);
    cJSON *e   = token_entry(r, id, logprob);
    cJSON *top = cJSON_AddArrayToObject(e, "top_logprobs");
    for (int32_t k = 0; k < n; k++) cJSON_AddItemToArray(top, token_entry(r, top_ids[k], top_lp[k]));
    cJSON_AddNumberToObject(e, "text_offset", (double)r->text_offset);
    r->text_offset += (int64_t)strlen(cJSON_GetObjectItem(e, "token")->valuestring);
    cJSON_AddItemToArray(r->logprobs, e);
    pthread_mutex_unlock(&r->mu);
}

/* The logprobs object of a choice from entries (taken): chat's {"content": [...]}, or the legacy
 * completions form {tokens, token_logprobs, top_logprobs, text_offset}. */
static cJSON *logprobs_json(const srv_reply *r, cJSON *entries)
{
    cJSON *o = cJSON_CreateObject();
    if (r->chat) {
        for (cJSON *e = entries->child; e; e = e->next) {
            cJSON_DeleteItemFromObject(e, "text_offset");
            for (cJSON *t = cJSON_GetObjectItem(e, "top_logprobs")->child; t; t = t->next)
                cJSON_DeleteItemFromObject(t, "top_logprobs"), cJSON_DeleteItemFromObject(t, "text_offset");
        }
        cJSON_AddItemToObject(o, "content", entries);
        return o;
    }
    cJSON *tokens = cJSON_AddArrayToObject(o, "tokens"), *lps = cJSON_AddArrayToObject(o, "token_logprobs");
    cJSON *tops = cJSON_AddArrayToObject(o, "top_logprobs"), *offs = cJSON_AddArrayToObject(o, "text_offset");
    for (cJSON *e = entries->child; e; e = e->next) {
        cJSON_AddItemToArray(tokens, cJSON_CreateString(cJSON_GetObjectItem(e, "token")->valuestring));
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(cJSON_GetObjectItem(e, "logprob")->valuedouble));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber(cJSON_GetObjectItem(e, "text_offset")->valuedouble));
        cJSON *m = cJSON_CreateObject();
        for (cJSON *t = cJSON_GetObjectItem(e, "top_logprobs")->child; t; t = t->next)
            if (!cJSON_GetObjectItem(m, cJSON_GetObjectItem(t, "token")->valuestring))
                cJSON_AddNumberToObject(m, cJSON_GetObjectItem(t, "token")->valuestring,
                                        cJSON_GetObjectItem(t, "logprob")->valuedouble);
        cJSON_AddItemToArray(tops, m);
    }
    cJSON_Delete(entries);
    return o;
}

/* The choice's "logprobs": null when not asked for; else the entries so far, which it takes. */
static void add_logprobs(srv_reply *r, cJSON *choice)
{
    if (!r->logprobs) {
        cJSON_AddNullToObject(choice, "logprobs");
        return;
    }
    cJSON_AddItemToObject(choice, "logprobs", logprobs_json(r, r->logprobs));
    r->logprobs = cJSON_CreateArray();
}

/* ---- streaming chunks --------------------------------------------------------------------- */

/* The chunk object with one choice whose delta (chat) or text (completions) the caller fills. */
static cJSON *chunk(const srv_reply *r, cJSON **choice)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "id", r->id);
    cJSON_AddStringToObject(c, "object", r->chat ? "chat.completion.chunk" : "text_completion");
    cJSON_AddNumberToObject(c, "created", (double)r->created);
    cJSON_AddStringToObject(c, "model", r->model_id);
    cJSON *choices = cJSON_AddArrayToObject(c, "choices");
    if (choice) {
        *choice = cJSON_CreateObject();
        cJSON_AddItemToArray(choices, *choice);
        cJSON_AddNumberToObject(*choice, "index", 0);
    }
    return c;
}

static void send_sse(srv_reply *r, cJSON *c)
{
    char *s = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    if (!s || !celer_bytes_put(&r->send, "data: ", 6) || !celer_bytes_put(&r->send, s, strlen(s)) || !celer_bytes_put(&r->send, "\n\n", 2))
        r->oom = true;
    free(s);
}

/* A delta: field (content, reasoning_content + reasoning, or a tool call) of text. */
static void send_delta(srv_reply *r, const char *field, const char *text, size_t n, const celer_chat_event *call)
{
    cJSON *choice, *c = chunk(r, &choice);
    char  *t          = strndup(text ? text : "", n);
    if (!r->chat) {
        cJSON_AddStringToObject(choice, "text", t ? t : "");
        add_logprobs(r, choice);
    } else {
        cJSON *d = cJSON_AddObjectToObject(choice, "delta");
        if (call) {
            cJSON *tc = cJSON_AddArrayToObject(d, "tool_calls"), *o = cJSON_CreateObject(), *fn;
            cJSON_AddItemToArray(tc, o);
            cJSON_AddNumberToObject(o, "index", call->index);
            if (call->kind == CELER_CHAT_EVENT_TOOL_CALL_BEGIN) {
                cJSON_AddStringToObject(o, "id", call->id);
                cJSON_AddStringToObject(o, "type", "function");
                fn = cJSON_AddObjectToObject(o, "function");
                cJSON_AddStringToObject(fn, "name", call->name);
                cJSON_AddStringToObject(fn, "arguments", "");
            } else {
                fn = cJSON_AddObjectToObject(o, "function");
                cJSON_AddStringToObject(fn, "arguments", t ? t : "");
            }
        } else if (!strcmp(field, "reasoning")) {
            cJSON_AddStringToObject(d, "reasoning_content", t ? t : "");
            cJSON_AddStringToObject(d, "reasoning", t ? t : "");
        } else {
            cJSON_AddStringToObject(d, field, t ? t : "");
        }
        if (r->logprobs) add_logprobs(r, choice); /* the tokens generated since the last chunk */
    }
    cJSON_AddNullToObject(choice, "finish_reason");
    free(t);
    send_sse(r, c);
}

/* ---- events from the chat output parser ---------------------------------------------------- */

static void on_event(const celer_chat_event *ev, void *user)
{
    srv_reply *r = user;
    switch (ev->kind) {
    case CELER_CHAT_EVENT_CONTENT:
    case CELER_CHAT_EVENT_ERROR: /* a malformed call: what the model wrote, as content */
        if (r->stream) send_delta(r, "content", ev->text, ev->len, NULL);
        else if (!celer_bytes_put(&r->content, ev->text, ev->len)) r->oom = true;
        break;
    case CELER_CHAT_EVENT_REASONING:
        if (r->stream) send_delta(r, "reasoning", ev->text, ev->len, NULL);
        else if (!celer_bytes_put(&r->reasoning, ev->text, ev->len)) r->oom = true;
        break;
    case CELER_CHAT_EVENT_TOOL_CALL_BEGIN:
    case CELER_CHAT_EVENT_TOOL_CALL_ARGS:
        r->n_calls = ev->index + 1;
        if (r->stream) {
            send_delta(r, NULL, ev->text, ev->len, ev);
        } else if (ev->kind == CELER_CHAT_EVENT_TOOL_CALL_BEGIN) {
            cJSON *o = cJSON_CreateObject(), *fn;
            cJSON_AddStringToObject(o, "id", ev->id);
            cJSON_AddStringToObject(o, "type", "function");
            fn = cJSON_AddObjectToObject(o, "function");
            cJSON_AddStringToObject(fn, "name", ev->name);
            cJSON_AddStringToObject(fn, "arguments", "");
            cJSON_AddItemToArray(r->calls, o);
        } else {
            cJSON *fn   = cJSON_GetObjectItem(cJSON_GetArrayItem(r->calls, ev->index), "function");
            cJSON *args = cJSON_GetObjectItem(fn, "arguments");
            size_t had  = args ? strlen(args->valuestring) : 0;
            char  *s    = malloc(had + ev->len + 1);
            if (!s || !args) {
                r->oom = true;
                free(s);
                break;
            }
            memcpy(s, args->valuestring, had);
            memcpy(s + had, ev->text, ev->len);
            s[had + ev->len] = '\0';
            cJSON_ReplaceItemInObject(fn, "arguments", cJSON_CreateString(s));
            free(s);
        }
        break;
    default: break;
    }
}

bool srv_reply_on_text(void *user, const char *text, size_t n)
{
    srv_reply  *r   = user;
    celer_error err = {0};
    pthread_mutex_lock(&r->mu);
    double t = now_s();
    if (r->t_first == 0) {
        r->t_first = t;
        if (r->metrics) srv_metrics_ttft(r->metrics, t - r->t_submit);
        if (r->stream && r->chat) { /* the first chunk carries the role */
            cJSON *choice, *c = chunk(r, &choice), *d = cJSON_AddObjectToObject(choice, "delta");
            cJSON_AddStringToObject(d, "role", "assistant");
            cJSON_AddStringToObject(d, "content", "");
            cJSON_AddNullToObject(choice, "finish_reason");
            send_sse(r, c);
        }
    } else if (r->metrics) {
        srv_metrics_itl(r->metrics, t - r->t_last);
    }
    r->t_last = t;
    if (celer_chat_output_push(&r->out, text, n, on_event, r, &err)) r->oom = true;
    bool go = !r->oom;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return go;
}

static const char *finish_reason(const srv_reply *r)
{
    if (r->n_calls) return "tool_calls";
    return !strcmp(r->stats.finish, "length") ? "length" : "stop";
}

static cJSON *usage(const srv_reply *r)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)r->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)r->stats.n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(r->n_prompt + r->stats.n_gen));
    return u;
}

char *srv_error_json(const char *msg, const char *type, const char *param, const char *code)
{
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", type);
    if (param && *param) cJSON_AddStringToObject(e, "param", param);
    else cJSON_AddNullToObject(e, "param");
    if (code && *code) cJSON_AddStringToObject(e, "code", code);
    else cJSON_AddNullToObject(e, "code");
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* The whole response body of a request that did not stream. */
static void whole_body(srv_reply *r)
{
    cJSON *choice, *c = chunk(r, &choice);
    cJSON_ReplaceItemInObject(c, "object", cJSON_CreateString(r->chat ? "chat.completion" : "text_completion"));
    if (r->chat) {
        cJSON *m = cJSON_AddObjectToObject(choice, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        if (r->content.n || !r->n_calls) cJSON_AddStringToObject(m, "content", r->content.p ? r->content.p : "");
        else cJSON_AddNullToObject(m, "content");
        if (r->reasoning.n) {
            cJSON_AddStringToObject(m, "reasoning_content", r->reasoning.p);
            cJSON_AddStringToObject(m, "reasoning", r->reasoning.p);
        }
        if (r->n_calls) cJSON_AddItemToObject(m, "tool_calls", cJSON_Duplicate(r->calls, true));
    } else {
        cJSON_AddStringToObject(choice, "text", r->content.p ? r->content.p : "");
    }
    add_logprobs(r, choice);
    cJSON_AddStringToObject(choice, "finish_reason", finish_reason(r));
    cJSON_AddItemToObject(c, "usage", usage(r));
    char *s = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    if (!s || !celer_bytes_put(&r->send, s, strlen(s))) r->oom = true;
    free(s);
}

void srv_reply_on_done(void *user, const celer_gen_stats *stats, const celer_error *err)
{
    srv_reply  *r  = user;
    celer_error fe = {0};
    pthread_mutex_lock(&r->mu);
    r->stats = *stats;
    if (!err && celer_chat_output_finish(&r->out, on_event, r, &fe)) r->oom = true;
    if (err || r->oom) {
        r->failed = true;
        r->http   = 500;
        char *e   = srv_error_json(err ? err->msg : "out of memory while building the response", "server_error", NULL,
                                   NULL);
        if (r->stream) {
            celer_bytes_put(&r->send, "data: ", 6), celer_bytes_put(&r->send, e ? e : "{}", e ? strlen(e) : 2);
            celer_bytes_put(&r->send, "\n\ndata: [DONE]\n\n", 16);
        } else {
            r->send.n = 0;
            celer_bytes_put(&r->send, e ? e : "{}", e ? strlen(e) : 2);
        }
        free(e);
    } else if (r->stream) {
        cJSON *choice, *c = chunk(r, &choice);
        if (r->chat) cJSON_AddObjectToObject(choice, "delta");
        else cJSON_AddStringToObject(choice, "text", "");
        if (r->logprobs) add_logprobs(r, choice); /* the tokens no text was sent for (the end-of-turn) */
        cJSON_AddStringToObject(choice, "finish_reason", finish_reason(r));
        send_sse(r, c);
        if (r->include_usage) {
            c = chunk(r, NULL);
            cJSON_AddItemToObject(c, "usage", usage(r));
            send_sse(r, c);
        }
        celer_bytes_put(&r->send, "data: [DONE]\n\n", 14);
    } else {
        whole_body(r);
    }
    if (r->metrics) srv_metrics_done(r->metrics, r->failed ? 500 : 200, r->n_prompt, stats->n_gen);
    r->done = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    srv_reply_release(r);
}
