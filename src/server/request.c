#include "server/request.h"

#include "core/utf8.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static bool fail(srv_error *e, int http, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static bool fail(srv_error *e, int http, const char *param, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->http = http;
    snprintf(e->param, sizeof e->param, "%s", param);
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
    return false;
}

/* A number field: absent (untouched), or a number within [lo, hi]. */
static bool num(const cJSON *o, const char *key, double lo, double hi, double *v, srv_error *e)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!x || cJSON_IsNull(x)) return true;
    if (!cJSON_IsNumber(x)) return fail(e, 400, key, "invalid_type", "'%s' must be a number", key);
    if (!(x->valuedouble >= lo && x->valuedouble <= hi))
        return fail(e, 400, key, "invalid_value", "'%s' is %g; it must be from %g to %g", key, x->valuedouble, lo, hi);
    *v = x->valuedouble;
    return true;
}

/* An integer field within [lo, hi]. */
static bool integer(const cJSON *o, const char *key, double lo, double hi, double *v, srv_error *e)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!x || cJSON_IsNull(x)) return true;
    if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble))
        return fail(e, 400, key, "invalid_type", "'%s' must be an integer", key);
    return num(o, key, lo, hi, v, e);
}

static bool boolean(const cJSON *o, const char *key, bool *v, srv_error *e)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!x || cJSON_IsNull(x)) return true;
    if (!cJSON_IsBool(x)) return fail(e, 400, key, "invalid_type", "'%s' must be true or false", key);
    *v = cJSON_IsTrue(x);
    return true;
}

static bool utf8_ok(const char *s) { return celer_utf8_validate(s, strlen(s)) == strlen(s); }

/* A message's content: a string, an array of {"type": "text", "text": ...} parts, or null
 * (an assistant message that only calls tools). */
static bool check_content(const cJSON *m, int i, const char *role, srv_error *e)
{
    char         param[64];
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    snprintf(param, sizeof param, "messages[%d].content", i);
    if (cJSON_IsString(c)) return utf8_ok(c->valuestring) ? true : fail(e, 400, param, "invalid_value", "%s is not UTF-8", param);
    if ((!c || cJSON_IsNull(c)) && (!strcmp(role, "assistant") || !strcmp(role, "tool")) &&
        cJSON_GetObjectItemCaseSensitive(m, "tool_calls"))
        return true;
    if (!cJSON_IsArray(c))
        return fail(e, 400, param, "invalid_type", "%s must be a string or an array of text parts", param);
    int k = 0;
    for (const cJSON *p = c->child; p; p = p->next, k++) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type"), *text = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text"))
            return fail(e, 400, param, "invalid_value", "%s[%d]: only parts of type 'text' are supported (this model "
                        "reads text)", param, k);
        if (!cJSON_IsString(text) || !utf8_ok(text->valuestring))
            return fail(e, 400, param, "invalid_type", "%s[%d].text must be a UTF-8 string", param, k);
    }
    return true;
}

static bool check_messages(srv_request *r, srv_error *e)
{
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};
    const cJSON             *ms      = cJSON_GetObjectItemCaseSensitive(r->body, "messages");
    if (!ms) return fail(e, 400, "messages", "missing_required_parameter", "'messages' is required");
    if (!cJSON_IsArray(ms)) return fail(e, 400, "messages", "invalid_type", "'messages' must be an array");
    if (!cJSON_GetArraySize(ms)) return fail(e, 400, "messages", "invalid_value", "'messages' is empty");
    int i = 0;
    for (const cJSON *m = ms->child; m; m = m->next, i++) {
        char param[48];
        snprintf(param, sizeof param, "messages[%d]", i);
        if (!cJSON_IsObject(m)) return fail(e, 400, param, "invalid_type", "%s must be an object", param);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        bool         ok   = false;
        for (size_t k = 0; cJSON_IsString(role) && k < sizeof roles / sizeof *roles; k++) ok |= !strcmp(role->valuestring, roles[k]);
        snprintf(param, sizeof param, "messages[%d].role", i);
        if (!ok)
            return fail(e, 400, param, "invalid_value", "%s must be one of system, developer, user, assistant, tool",
                        param);
        if (!check_content(m, i, role->valuestring, e)) return false;
    }
    r->messages = ms;
    return true;
}

static bool check_stop(srv_request *r, srv_error *e)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(r->body, "stop");
    if (!s || cJSON_IsNull(s)) return true;
    if (cJSON_IsString(s)) {
        if (*s->valuestring) r->stop[0] = s->valuestring;
        return true;
    }
    if (!cJSON_IsArray(s)) return fail(e, 400, "stop", "invalid_type", "'stop' must be a string or an array of strings");
    if (cJSON_GetArraySize(s) > SRV_MAX_STOP)
        return fail(e, 400, "stop", "invalid_value", "'stop' has %d strings; at most %d", cJSON_GetArraySize(s), SRV_MAX_STOP);
    int n = 0;
    for (const cJSON *x = s->child; x; x = x->next) {
        if (!cJSON_IsString(x)) return fail(e, 400, "stop", "invalid_type", "'stop' must be a string or an array of strings");
        if (*x->valuestring) r->stop[n++] = x->valuestring;
    }
    return true;
}

/* Fields celer refuses rather than ignore. */
/* Chat: logprobs (bool) and top_logprobs (0-20, with logprobs). Completions: logprobs, the
 * number of alternatives (0-5), as the legacy API has it. */
static bool check_logprobs(srv_request *r, srv_error *e)
{
    const cJSON *b  = r->body, *top = cJSON_GetObjectItemCaseSensitive(b, "top_logprobs");
    double       n  = -1;
    bool         on = false;
    r->logprobs     = -1;
    if (!r->chat) {
        if (!integer(b, "logprobs", 0, 5, &n, e)) return false;
        r->logprobs = (int32_t)n;
        return true;
    }
    if (!boolean(b, "logprobs", &on, e) || !integer(b, "top_logprobs", 0, 20, &n, e)) return false;
    if (top && !cJSON_IsNull(top) && !on)
        return fail(e, 400, "top_logprobs", "invalid_value", "'top_logprobs' needs 'logprobs': true");
    if (on) r->logprobs = n > 0 ? (int32_t)n : 0;
    return true;
}

static bool check_unsupported(const srv_request *r, srv_error *e)
{
    const cJSON *b = r->body, *x;
    double       n = 1;
    if (!integer(b, "n", 1, 1e9, &n, e)) return false;
    if (n != 1) return fail(e, 400, "n", "invalid_value", "'n' is %g; this server returns one choice per request (n = 1)", n);
    if ((x = cJSON_GetObjectItemCaseSensitive(b, "response_format")) && !cJSON_IsNull(x)) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(x, "type");
        if (!cJSON_IsObject(x) || !cJSON_IsString(type))
            return fail(e, 400, "response_format", "invalid_type", "'response_format' must be an object with a 'type'");
        if (strcmp(type->valuestring, "text"))
            return fail(e, 400, "response_format", "unsupported_parameter", "response_format '%s' is not supported "
                        "(constrained output is not implemented); leave it out or use 'text'", type->valuestring);
    }
    return true;
}

static bool check_tools(srv_request *r, srv_error *e)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(r->body, "tools"), *c;
    if (t && !cJSON_IsNull(t)) {
        if (!cJSON_IsArray(t)) return fail(e, 400, "tools", "invalid_type", "'tools' must be an array");
        int i = 0;
        for (const cJSON *x = t->child; x; x = x->next, i++) {
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(x, "function");
            if (!cJSON_IsObject(x) || !cJSON_IsObject(fn) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(fn, "name")))
                return fail(e, 400, "tools", "invalid_value", "tools[%d] must be {\"type\": \"function\", \"function\": "
                            "{\"name\": ..., ...}}", i);
        }
        if (cJSON_GetArraySize(t)) r->tools = t;
    }
    if ((c = cJSON_GetObjectItemCaseSensitive(r->body, "tool_choice")) && !cJSON_IsNull(c)) {
        if (!cJSON_IsString(c) || (strcmp(c->valuestring, "auto") && strcmp(c->valuestring, "none")))
            return fail(e, 400, "tool_choice", "unsupported_parameter", "tool_choice may be \"auto\" or \"none\" "
                        "(forcing a call is not supported)");
        if (!strcmp(c->valuestring, "none")) r->tools = NULL;
    }
    return true;
}

bool srv_request_parse(srv_request *r, const char *body, size_t n, bool chat, const char *model_id, srv_error *e)
{
    memset(r, 0, sizeof *r);
    memset(e, 0, sizeof *e);
    r->chat       = chat;
    r->max_tokens = -1;
    r->sampling   = celer_sampling_default();
    r->sampling.temperature = 1.0f; /* OpenAI's default */
    if (celer_utf8_validate(body, n) != n)
        return fail(e, 400, "", "invalid_json", "the body is not UTF-8 (byte %zu)", celer_utf8_validate(body, n));
    r->body = cJSON_ParseWithLength(body, n);
    if (!r->body) return fail(e, 400, "", "invalid_json", "the body is not valid JSON");
    if (!cJSON_IsObject(r->body)) return fail(e, 400, "", "invalid_json", "the body must be a JSON object");
    const cJSON *b = r->body, *x;
    if ((x = cJSON_GetObjectItemCaseSensitive(b, "model")) && !cJSON_IsNull(x)) {
        if (!cJSON_IsString(x)) return fail(e, 400, "model", "invalid_type", "'model' must be a string");
        if (strcmp(x->valuestring, model_id))
            return fail(e, 404, "model", "model_not_found", "the model '%.100s' does not exist; this server runs '%.100s'",
                        x->valuestring, model_id);
    }
    if (chat ? !check_messages(r, e) || !check_tools(r, e) : false) return false;
    if (!chat) {
        x = cJSON_GetObjectItemCaseSensitive(b, "prompt");
        if (!x) return fail(e, 400, "prompt", "missing_required_parameter", "'prompt' is required");
        if (!cJSON_IsString(x))
            return fail(e, 400, "prompt", "invalid_type", "'prompt' must be a string (one prompt per request)");
        if (!utf8_ok(x->valuestring)) return fail(e, 400, "prompt", "invalid_value", "'prompt' is not UTF-8");
        r->prompt = x->valuestring;
    }
    double t = 1, tp = 1, tk = 0, mp = 0, seed = 0, pp = 0, fp = 0;
    for (int k = 0; k < 2; k++) { /* max_completion_tokens, or the older max_tokens */
        const char *key = k ? "max_tokens" : "max_completion_tokens";
        double      m   = -1;
        if (!(x = cJSON_GetObjectItemCaseSensitive(b, key)) || cJSON_IsNull(x)) continue;
        if (!integer(b, key, -1e18, 1e18, &m, e)) return false;
        if (m < 1 || m > 1e9) return fail(e, 400, key, "invalid_value", "'%s' is %.0f; it must be at least 1", key, m);
        r->max_tokens = (int32_t)m;
        break;
    }
    if (!num(b, "temperature", 0, 2, &t, e) || !num(b, "top_p", 0, 1, &tp, e) || !integer(b, "top_k", 0, 1e9, &tk, e) ||
        !num(b, "min_p", 0, 1, &mp, e) || !integer(b, "seed", -9.2e18, 9.2e18, &seed, e) ||
        !num(b, "presence_penalty", -2, 2, &pp, e) || !num(b, "frequency_penalty", -2, 2, &fp, e) ||
        !boolean(b, "stream", &r->stream, e) || !check_stop(r, e) || !check_logprobs(r, e) || !check_unsupported(r, e))
        return false;
    if ((x = cJSON_GetObjectItemCaseSensitive(b, "stream_options")) && !cJSON_IsNull(x)) {
        if (!cJSON_IsObject(x)) return fail(e, 400, "stream_options", "invalid_type", "'stream_options' must be an object");
        if (!boolean(x, "include_usage", &r->include_usage, e)) return false;
    }
    r->sampling.temperature       = (float)t;
    r->sampling.top_p             = (float)tp;
    r->sampling.top_k             = (int32_t)tk;
    r->sampling.min_p             = (float)mp;
    r->sampling.seed              = (uint64_t)(int64_t)seed;
    r->sampling.presence_penalty  = (float)pp;
    r->sampling.frequency_penalty = (float)fp;
    return true;
}

void srv_request_free(srv_request *r)
{
    cJSON_Delete(r->body);
    memset(r, 0, sizeof *r);
}
