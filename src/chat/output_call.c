/* JSON tool-call blocks, read byte by byte: one call object or a list of them after the opener
 * (Hermes/Qwen, Granite, Command R, Mistral v0.3, Llama's <|python_tag|>), Mistral's
 * name[CALL_ID]id[ARGS]{…}, and Llama 3's bare call object. The scanner follows strings and
 * nesting, so a closing marker inside a JSON string is text; it drops whitespace outside
 * strings from the arguments (the compact form OpenAI sends) and streams them once the name is
 * known. cJSON checks each complete call; anything it rejects becomes an ERROR with the raw bytes. */
#include "chat/output_impl.h"
#include "core/utf8.h"

#include <stdio.h>
#include <string.h>

enum { P_START, P_LIST, P_OBJ, P_LIST_NEXT, P_DONE, P_NAME, P_CALLID, P_ARGS_START, P_ARGS };
enum { K_KEY, K_IN_KEY, K_COLON, K_VALUE, K_SCALAR, K_AFTER };
enum { R_NONE, R_NAME, R_ARGS, R_OTHER };

#define DEPTH_MAX 512 /* below cJSON's nesting limit, so what we accept it can check */

void oc_call_reset(celer_chat_output *o)
{
    o->name.n = o->args.n = o->key.n = o->val.n = 0;
    o->args_sent                                = 0;
    o->has_name = o->has_args = o->args_stream = o->begun = false;
    o->jstr = o->jesc = false;
    o->jn_args                                  = 0;
    o->call                                     = -1;
}

void oc_call_flush(celer_chat_output *o)
{
    if (o->deferred || !o->has_name || o->oom) return;
    if (!o->begun) {
        o->call = o->n_calls++;
        celer_chat_call_id(o->cfg.id_seed, o->call, o->fam->short_ids, o->id);
        o->begun = true;
        if (!o->name.p) oc_put(o, &o->name, "", 0);
        oc_emit(o, CELER_CHAT_EVENT_TOOL_CALL_BEGIN, NULL, 0);
    }
    if (!o->args_stream && !o->has_args) return;
    size_t end = o->has_args ? o->args.n : celer_utf8_complete_prefix(o->args.p, o->args.n);
    if (end > o->args_sent) oc_emit(o, CELER_CHAT_EVENT_TOOL_CALL_ARGS, o->args.p + o->args_sent, end - o->args_sent);
    o->args_sent = end;
}

void oc_call_end(celer_chat_output *o)
{
    if (!o->has_args) o->args.n = 0, o->args_sent = 0, oc_put(o, &o->args, "{}", 2);
    o->has_args = true;
    o->deferred = false;
    oc_call_flush(o);
    oc_markup(o, o->raw.p, o->raw.n);
    o->raw.n = 0;
    oc_emit(o, CELER_CHAT_EVENT_TOOL_CALL_END, NULL, 0);
    oc_call_reset(o);
}

void oc_block_done(celer_chat_output *o)
{
    oc_markup(o, o->raw.p, o->raw.n);
    o->raw.n    = 0;
    o->state    = ST_CONTENT;
    o->deferred = false;
    oc_call_reset(o);
}

void oc_fail_now(celer_chat_output *o, const char *msg)
{
    oc_call_flush(o); /* what the scanner stored goes out before the error, however the input was cut */
    snprintf(o->errmsg, sizeof o->errmsg, "%s", msg);
    o->err_index = o->begun ? o->call : -1;
    oc_emit(o, CELER_CHAT_EVENT_ERROR, o->raw.p, o->raw.n);
    o->raw.n = 0;
    o->state = ST_CONTENT;
    oc_call_reset(o);
}

/* A Llama message that is not a call after all: its bytes go back in front of the input and are
 * read again as content. */
static void reinject(celer_chat_output *o)
{
    celer_bytes b = {0};
    if (!celer_bytes_put(&b, o->raw.p, o->raw.n) ||
        !celer_bytes_put(&b, o->in.p + o->pos, o->in.n - o->pos)) {
        celer_bytes_free(&b);
        o->oom = true;
        return;
    }
    celer_bytes_free(&o->in);
    o->in = b, o->pos = 0, o->raw.n = 0;
    o->state = ST_CONTENT, o->msg_start = false, o->deferred = false;
    oc_call_reset(o);
}

void oc_block_fail(celer_chat_output *o, const char *msg)
{
    if (o->deferred) {
        reinject(o);
        return;
    }
    oc_call_flush(o);
    snprintf(o->errmsg, sizeof o->errmsg, "%s", msg);
    o->err_index = o->begun ? o->call : -1;
    o->state     = o->fam->call_close ? ST_SKIP : ST_REST;
    oc_call_reset(o);
}

void oc_block_open(celer_chat_output *o, const char *marker, size_t n)
{
    o->raw.n = 0;
    oc_put(o, &o->raw, marker, n);
    oc_call_reset(o);
    o->junk = false, o->deferred = false, o->jlist = false, o->jphase = P_START;
    switch (o->fam->tools) {
    case CELER_CHAT_TOOLS_GLM: o->state = ST_GLM_NAME; break;
    case CELER_CHAT_TOOLS_DEEPSEEK: o->state = ST_DS_GAP; break;
    default: o->state = ST_JSON; break;
    }
}

void oc_bare_open(celer_chat_output *o)
{
    o->raw.n = 0;
    oc_call_reset(o);
    o->state = ST_BARE, o->deferred = true, o->jlist = false, o->jphase = P_START;
}

void oc_minify(celer_chat_output *o, const char *s, size_t n)
{
    size_t a = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (o->jstr) {
            if (o->jesc) o->jesc = false;
            else if (c == '\\') o->jesc = true;
            else if (c == '"') o->jstr = false;
        } else if (IS_WS(c)) {
            oc_put(o, &o->args, s + a, i - a);
            a = i + 1;
        } else if (c == '"') {
            o->jstr = true;
        }
    }
    oc_put(o, &o->args, s + a, n - a);
}

cJSON *oc_json_parse(const char *p, size_t n)
{
    const char *end = NULL;
    cJSON      *j   = n ? cJSON_ParseWithLengthOpts(p, n, &end, 0) : NULL;
    if (!j) return NULL;
    while (end && end < p + n && IS_WS(*end)) end++;
    if (end != p + n) cJSON_Delete(j), j = NULL;
    return j;
}

bool oc_args_valid(const celer_chat_output *o)
{
    cJSON *j  = oc_json_parse(o->args.p, o->args.n);
    bool   ok = j != NULL;
    cJSON_Delete(j);
    return ok;
}

/* ---- a call object, byte by byte ---------------------------------------- */

static void store(celer_chat_output *o, char c)
{
    if (o->jrole == R_NAME) oc_put(o, &o->name, &c, 1);
    else if (o->jrole == R_ARGS) oc_put(o, &o->args, &c, 1);
}

static bool key_is(const celer_chat_output *o, const char *k)
{
    return o->key.n == strlen(k) && memcmp(o->key.p, k, o->key.n) == 0;
}

static void key_role(celer_chat_output *o)
{
    o->jn_args++;
    if ((key_is(o, "name") || key_is(o, "tool_name")) && !o->has_name && o->name.n == 0) o->jrole = R_NAME;
    else if ((key_is(o, "arguments") || key_is(o, "parameters")) && !o->has_args && o->args.n == 0) o->jrole = R_ARGS;
    else o->jrole = R_OTHER;
}

/* Replaces b (a JSON string literal) by the string it stands for; false when it is not one. */
static bool decode_string(celer_chat_output *o, celer_bytes *b)
{
    cJSON *j  = oc_json_parse(b->p, b->n);
    bool   ok = cJSON_IsString(j);
    if (ok) {
        b->n = 0;
        oc_put(o, b, j->valuestring, strlen(j->valuestring));
        if (!b->p) oc_put(o, b, "", 0);
    }
    cJSON_Delete(j);
    return ok;
}

static void value_end(celer_chat_output *o)
{
    if (o->jrole == R_NAME) o->has_name = decode_string(o, &o->name) && o->name.n > 0;
    if (o->jrole == R_ARGS) {
        if (o->args.n && o->args.p[0] == '"') decode_string(o, &o->args);
        o->has_args = true;
    }
    o->jrole = R_NONE;
    o->jkst  = K_AFTER;
    oc_call_flush(o);
}

/* Returns 0: consumed; 1: consumed, the object ended; -1: a syntax error at c (not consumed). */
static int obj_byte(celer_chat_output *o, char c)
{
    if (o->jstr) {
        if (o->jkst == K_IN_KEY) {
            if (o->jesc) o->jesc = false;
            else if (c == '\\') o->jesc = true;
            else if (c == '"') return o->jstr = false, o->jkst = K_COLON, key_role(o), 0;
            if (o->key.n < 64) oc_put(o, &o->key, &c, 1);
            return 0;
        }
        store(o, c);
        if (o->jesc) o->jesc = false;
        else if (c == '\\') o->jesc = true;
        else if (c == '"' && (o->jstr = false, o->jdepth == 1)) value_end(o);
        return 0;
    }
    if (IS_WS(c)) {
        if (o->jdepth == 1 && o->jkst == K_SCALAR) value_end(o);
        return 0;
    }
    if (o->jdepth > 1) {
        if (c == '"') o->jstr = true;
        else if (c == '{' || c == '[') {
            if (++o->jdepth > DEPTH_MAX) return -1;
        } else if (c == '}' || c == ']') o->jdepth--;
        store(o, c);
        if (o->jdepth == 1) value_end(o);
        return 0;
    }
    switch (o->jkst) {
    case K_KEY:
        if (c == '"') return o->jstr = true, o->jkst = K_IN_KEY, o->key.n = 0, 0;
        return c == '}' && o->jn_args == 0 ? 1 : -1;
    case K_COLON: return c == ':' ? (o->jkst = K_VALUE, 0) : -1;
    case K_VALUE:
        if (c == '}' || c == ']' || c == ',' || c == ':') return -1;
        o->jkst = K_SCALAR;
        if (c == '"') o->jstr = true;
        else if (c == '{' || c == '[') {
            o->jdepth++;
            if (o->jrole == R_ARGS) o->args_stream = true;
        }
        store(o, c);
        if (o->args_stream) oc_call_flush(o);
        return 0;
    case K_SCALAR:
        if (c == ',') return value_end(o), o->jkst = K_KEY, 0;
        if (c == '}') return value_end(o), 1;
        if (c == '"' || c == '{' || c == '[' || c == ':' || c == ']') return -1;
        store(o, c);
        return 0;
    case K_AFTER:
        if (c == ',') return o->jkst = K_KEY, 0;
        return c == '}' ? 1 : -1;
    default: return -1; /* K_IN_KEY without jstr cannot happen */
    }
}

static void obj_open(celer_chat_output *o)
{
    oc_call_reset(o);
    o->obj_start = o->raw.n;
    o->jdepth = 1, o->jkst = K_KEY, o->jrole = R_NONE;
    o->jphase = P_OBJ;
}

/* The JSON value after the opener is complete: the block ends here or at call_close. */
static void value_done(celer_chat_output *o)
{
    if (o->state == ST_BARE || !o->fam->call_close) oc_block_done(o);
    else o->jphase = P_DONE;
}

/* The object just closed: check it with cJSON and end the call. */
static bool obj_end(celer_chat_output *o)
{
    cJSON       *j    = oc_json_parse(o->raw.p + o->obj_start, o->raw.n - o->obj_start);
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(j, "arguments");
    if (!args) args = cJSON_GetObjectItemCaseSensitive(j, "parameters");
    bool parsed = cJSON_IsObject(j), args_ok = o->deferred ? cJSON_IsObject(args) : true;
    cJSON_Delete(j);
    if (!parsed) return oc_block_fail(o, "chat output: a tool call is not valid JSON; it is reported raw"), false;
    if (!o->has_name)
        return oc_block_fail(o, "chat output: a tool call has no string \"name\"; it is reported raw"), false;
    if (!args_ok) return oc_block_fail(o, "chat output: not a call"), false;
    oc_call_end(o);
    if (o->jlist) o->jphase = P_LIST_NEXT;
    else value_done(o);
    return true;
}

/* Matches the marker w at s[0..n): 1 matched, 0 could still match (needs more), -1 does not. */
static int match(const char *s, size_t n, const char *w)
{
    size_t k = strlen(w), m = n < k ? n : k;
    if (memcmp(s, w, m) != 0) return -1;
    return m == k ? 1 : 0;
}

#define FAIL(msg)                                                                                            \
    do {                                                                                                     \
        oc_block_fail(o, msg);                                                                               \
        goto out;                                                                                            \
    } while (0)

bool oc_json_step(celer_chat_output *o, bool final)
{
    const char *s = o->in.p + o->pos;
    size_t      n = o->in.n - o->pos, i = 0;
    int         state0 = o->state, phase0 = o->jphase;
    bool        bare   = o->state == ST_BARE;
#define TAKE(k) (oc_put(o, &o->raw, s + i, (k)), o->pos += (k), i += (k))
    while (i < n && (o->state == ST_JSON || o->state == ST_BARE) && !o->oom) {
        char c = s[i];
        int  r;
        switch (o->jphase) {
        case P_START:
            if (IS_WS(c)) TAKE(1);
            else if (c == '[' && !bare) o->jlist = true, o->jphase = P_LIST, TAKE(1);
            else if (c == '{') obj_open(o), TAKE(1);
            else if (o->fam->name_args && !bare) o->jphase = P_NAME;
            else FAIL("chat output: a tool call does not start with '{' or '['; it is reported raw");
            break;
        case P_LIST:
            if (IS_WS(c)) TAKE(1);
            else if (c == '{') obj_open(o), TAKE(1);
            else if (c == ']') TAKE(1), value_done(o);
            else FAIL("chat output: a tool-call list holds something other than call objects; it is reported raw");
            break;
        case P_OBJ:
            if ((r = obj_byte(o, c)) < 0)
                FAIL("chat output: a tool call is not valid JSON; it is reported raw");
            TAKE(1);
            if (r == 1 && !obj_end(o)) goto out;
            break;
        case P_LIST_NEXT:
            if (IS_WS(c)) TAKE(1);
            else if (c == ',') o->jphase = P_LIST, TAKE(1);
            else if (c == ']') TAKE(1), value_done(o);
            else FAIL("chat output: a tool-call list is not valid JSON; it is reported raw");
            break;
        case P_DONE:
            if (IS_WS(c)) {
                TAKE(1);
                break;
            }
            r = match(s + i, n - i, o->fam->call_close);
            if (r < 0) FAIL("chat output: text after a tool call where its closing marker belongs; reported raw");
            if (r == 0 && !final) goto out;
            TAKE(r ? strlen(o->fam->call_close) : n - i);
            oc_block_done(o);
            break;
        case P_NAME:
        case P_CALLID:
            if (c == '[') {
                int ra = match(s + i, n - i, "[ARGS]"), rc = o->jphase == P_NAME ? match(s + i, n - i, "[CALL_ID]") : -1;
                if (ra < 0 && rc < 0) FAIL("chat output: [TOOL_CALLS]name is not followed by [ARGS]; reported raw");
                if (ra < 1 && rc < 1) {
                    if (final) FAIL("chat output: the output ended inside a tool call; it is reported raw");
                    goto out;
                }
                if (rc == 1) {
                    TAKE(strlen("[CALL_ID]"));
                    o->jphase = P_CALLID;
                    break;
                }
                TAKE(strlen("[ARGS]"));
                o->has_name = o->name.n > 0;
                if (!o->has_name) FAIL("chat output: [TOOL_CALLS] names no function before [ARGS]; reported raw");
                o->jphase = P_ARGS_START;
                oc_call_flush(o);
            } else if ((unsigned char)c <= ' ' || (o->jphase == P_NAME ? o->name.n : o->val.n) >= 128) {
                FAIL("chat output: a [TOOL_CALLS] function name is malformed; it is reported raw");
            } else {
                oc_put(o, o->jphase == P_NAME ? &o->name : &o->val, &c, 1);
                TAKE(1);
            }
            break;
        case P_ARGS_START:
            if (IS_WS(c)) TAKE(1);
            else if (c == '{' || c == '[') {
                o->jdepth = 1, o->args_stream = true;
                oc_put(o, &o->args, &c, 1);
                o->jphase = P_ARGS;
                TAKE(1);
            } else FAIL("chat output: [ARGS] is not followed by a JSON object; it is reported raw");
            break;
        case P_ARGS:
            if (o->jstr) {
                if (o->jesc) o->jesc = false;
                else if (c == '\\') o->jesc = true;
                else if (c == '"') o->jstr = false;
            } else if (c == '"') o->jstr = true;
            else if (c == '{' || c == '[') {
                if (++o->jdepth > DEPTH_MAX) FAIL("chat output: tool-call arguments nest too deep; reported raw");
            } else if (c == '}' || c == ']') o->jdepth--;
            if (o->jstr || !IS_WS(c)) oc_put(o, &o->args, &c, 1);
            TAKE(1);
            if (o->jdepth == 0) {
                if (!oc_args_valid(o)) FAIL("chat output: tool-call arguments are not valid JSON; reported raw");
                o->has_args = true;
                oc_call_end(o);
                value_done(o);
            }
            break;
        default: FAIL("chat output: internal scanner state lost; reported raw");
        }
    }
out: /* s is stale here when reinject replaced the input */
    if (o->state == ST_JSON) oc_call_flush(o);
    return i > 0 || o->state != state0 || o->jphase != phase0;
#undef TAKE
}

void oc_json_finish(celer_chat_output *o)
{
    if (o->state == ST_BARE) {
        reinject(o);
        return;
    }
    if (o->jphase == P_DONE) { /* complete; only the closing marker is missing */
        oc_block_done(o);
        return;
    }
    oc_fail_now(o, "chat output: the output ended inside a tool call; it is reported raw");
}
