/* Tool calls written with markers rather than one JSON value: GLM's <arg_key>/<arg_value>
 * pairs, DeepSeek's <｜tool▁call▁begin｜> blocks, and harmony's commentary messages addressed to
 * functions.NAME. The text states of output.c find the markers; these are their actions. */
#include "chat/output_impl.h"

#include <stdio.h>
#include <string.h>

void oc_gap_sink(celer_chat_output *o, const char *s, size_t n)
{
    oc_put(o, &o->raw, s, n);
    for (size_t i = 0; i < n; i++)
        if (!IS_WS(s[i])) o->junk = true;
}

static void trim(const char **s, size_t *n)
{
    while (*n && IS_WS(**s)) (*s)++, (*n)--;
    while (*n && IS_WS((*s)[*n - 1])) (*n)--;
}

/* Appends s[0..n) to b as a JSON string literal. */
static void put_json_string(celer_chat_output *o, celer_bytes *b, const char *s, size_t n)
{
    oc_put(o, b, "\"", 1);
    size_t a = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        char esc[8];
        if (c == '"' || c == '\\') snprintf(esc, sizeof esc, "\\%c", c);
        else if (c == '\n') snprintf(esc, sizeof esc, "\\n");
        else if (c == '\t') snprintf(esc, sizeof esc, "\\t");
        else if (c == '\r') snprintf(esc, sizeof esc, "\\r");
        else snprintf(esc, sizeof esc, "\\u%04x", c);
        oc_put(o, b, s + a, i - a);
        oc_put(o, b, esc, strlen(esc));
        a = i + 1;
    }
    oc_put(o, b, s + a, n - a);
    oc_put(o, b, "\"", 1);
}

/* Appends the compact form of the JSON text s[0..n) to the arguments. */
static void put_minified(celer_chat_output *o, const char *s, size_t n)
{
    o->jstr = o->jesc = false;
    oc_minify(o, s, n);
    o->jstr = o->jesc = false;
}

/* Takes the trimmed text s[0..n) as the call's name; false when it is empty, longer than 256
 * bytes or holds a control byte. */
static bool set_name(celer_chat_output *o, const char *s, size_t n)
{
    trim(&s, &n);
    if (n == 0 || n > 256) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20) return false;
    celer_bytes b = {0};
    if (!celer_bytes_put(&b, s, n)) return o->oom = true, false;
    o->name.n = 0;
    oc_put(o, &o->name, b.p, b.n);
    celer_bytes_free(&b);
    o->has_name = true;
    return true;
}

/* ---- GLM: <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>…</tool_call> ---- */

/* A value is JSON when it parses as JSON (the template writes non-strings with tojson), else a string. */
static void glm_pair(celer_chat_output *o)
{
    const char *k = o->key.p ? o->key.p : "";
    size_t      kn = o->key.n;
    trim(&k, &kn);
    oc_put(o, &o->args, o->jn_args++ ? "," : "{", 1);
    put_json_string(o, &o->args, k, kn);
    oc_put(o, &o->args, ":", 1);
    cJSON *j = oc_json_parse(o->val.p, o->val.n);
    if (j) put_minified(o, o->val.p, o->val.n);
    else put_json_string(o, &o->args, o->val.p ? o->val.p : "", o->val.n);
    cJSON_Delete(j);
    o->args_stream = true;
    oc_call_flush(o);
}

bool oc_glm_action(celer_chat_output *o, int a)
{
    bool from_name = o->state == ST_GLM_NAME;
    if (from_name && !set_name(o, o->name.p, o->name.n)) {
        if (a == A_GLM_END) oc_fail_now(o, "glm: a <tool_call> names no function; it is reported raw");
        else oc_block_fail(o, "glm: a <tool_call> names no function; it is reported raw");
        return true;
    }
    if (from_name) oc_call_flush(o);
    if (o->junk || (a == A_GLM_END && o->state == ST_GLM_VGAP)) {
        const char *msg = o->junk ? "glm: text between tool-call arguments; the call is reported raw"
                                  : "glm: an <arg_key> has no <arg_value>; the call is reported raw";
        if (a == A_GLM_END) oc_fail_now(o, msg);
        else oc_block_fail(o, msg);
        return true;
    }
    switch (a) {
    case A_GLM_KEY: o->key.n = 0, o->state = ST_GLM_KEY; break;
    case A_GLM_KEY_END: o->state = ST_GLM_VGAP; break;
    case A_GLM_VAL: o->val.n = 0, o->state = ST_GLM_VAL; break;
    case A_GLM_VAL_END:
        glm_pair(o);
        o->state = ST_GLM_GAP;
        break;
    default: /* A_GLM_END */
        if (o->jn_args) o->has_args = true, oc_put(o, &o->args, "}", 1);
        oc_call_end(o);
        oc_block_done(o);
        break;
    }
    return true;
}

/* ---- DeepSeek: <｜tool▁call▁begin｜>[function<｜tool▁sep｜>]name…<｜tool▁call▁end｜> ---- */

static bool skip_prefix(const char **s, size_t *n, const char *p)
{
    size_t k = strlen(p);
    if (*n < k || memcmp(*s, p, k) != 0) return false;
    *s += k, *n -= k;
    return true;
}

/* R1: head "function", body "name\n```json\n{…}\n```"; V3.1: head "name", body "{…}". */
static void ds_call_end(celer_chat_output *o)
{
    const char *h = o->key.p ? o->key.p : "", *b = o->val.p ? o->val.p : "";
    size_t      hn = o->key.n, bn = o->val.n;
    trim(&h, &hn);
    if (hn == strlen("function") && memcmp(h, "function", hn) == 0) {
        const char *nl = memchr(b, '\n', bn);
        size_t      nn = nl ? (size_t)(nl - b) : bn;
        if (!set_name(o, b, nn)) goto bad;
        b += nn, bn -= nn;
        trim(&b, &bn);
        if (!skip_prefix(&b, &bn, "```json")) skip_prefix(&b, &bn, "```");
        trim(&b, &bn);
        if (bn >= 3 && memcmp(b + bn - 3, "```", 3) == 0) bn -= 3;
    } else if (!set_name(o, h, hn)) {
        goto bad;
    }
    cJSON *j = oc_json_parse(b, bn);
    if (!j) goto bad;
    cJSON_Delete(j);
    put_minified(o, b, bn);
    o->has_args = true;
    oc_call_end(o);
    o->junk = false, o->state = ST_DS_GAP;
    return;
bad:
    oc_fail_now(o, "deepseek: a tool call has no name or its arguments are not valid JSON; it is reported raw");
    o->junk = false, o->state = ST_DS_GAP;
}

bool oc_ds_action(celer_chat_output *o, int a)
{
    switch (a) {
    case A_DS_CALL:
        if (o->junk) {
            oc_block_fail(o, "deepseek: text between tool calls; the block is reported raw");
            break;
        }
        oc_call_reset(o);
        o->state = ST_DS_HEAD;
        break;
    case A_DS_SEP: o->state = ST_DS_BODY; break;
    case A_DS_CALL_END: ds_call_end(o); break;
    default: /* A_DS_END */
        if (o->junk) oc_fail_now(o, "deepseek: text between tool calls; the block is reported raw");
        else oc_block_done(o);
        break;
    }
    return true;
}

/* ---- harmony (gpt-oss) ---------------------------------------------------- */

/* The word after key in h[0..n): up to whitespace or '<'. */
static size_t header_word(const char *h, size_t n, const char *key, const char **w)
{
    const char *p = memmem(h, n, key, strlen(key));
    if (!p) return *w = NULL, 0;
    p += strlen(key);
    const char *e = p;
    while (e < h + n && !IS_WS(*e) && *e != '<') e++;
    *w = p;
    return (size_t)(e - p);
}

bool oc_harmony_action(celer_chat_output *o, int a)
{
    if (a == A_H_MESSAGE) {
        const char *h = o->raw.p, *ch, *to;
        size_t      hn = o->raw.n - strlen("<|message|>");
        size_t      chn = header_word(h, hn, "<|channel|>", &ch), ton = header_word(h, hn, "to=", &to);
        o->state        = ST_H_BODY;
        if (ton > 0) {
            oc_call_reset(o);
            if (ton > 10 && memcmp(to, "functions.", 10) == 0) to += 10, ton -= 10;
            set_name(o, to, ton);
            o->hkind       = HK_TOOL;
            o->args_stream = true;
            oc_call_flush(o); /* the header stays in raw: it is part of the call */
            return true;
        }
        o->hkind = chn == 8 && memcmp(ch, "analysis", 8) == 0 ? HK_REASONING : HK_CONTENT;
        oc_markup(o, o->raw.p, o->raw.n);
        o->raw.n = 0;
        return true;
    }
    if (o->hkind == HK_TOOL) {
        if (o->has_name && oc_args_valid(o)) {
            o->has_args = true;
            oc_call_end(o);
        } else {
            char msg[192];
            snprintf(msg, sizeof msg, "harmony: the arguments to %.64s are not valid JSON; the call is reported raw",
                     o->name.p ? o->name.p : "");
            oc_fail_now(o, msg);
        }
    } else {
        oc_markup(o, o->raw.p, o->raw.n);
    }
    o->raw.n = 0;
    o->hkind = HK_CONTENT;
    o->state = ST_H_HEADER;
    return a == A_H_END;
}
