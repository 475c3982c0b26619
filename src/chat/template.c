/* Chat templates: the public entry points over the Jinja interpreter (jinja.h), the variables
 * transformers passes, the no-template fallback, and reading a GGUF model's template. */
#include "chat/template.h"

#include "chat/jinja.h"
#include "core/error.h"
#include "formats/gguf.h"
#include "models/model_file.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct celer_template {
    jinja_program prog;
};

celer_status celer_template_parse(celer_template **out, const char *src, size_t len, const char *name,
                                  celer_error *err)
{
    *out = NULL;
    if (!src && len) return celer_fail(err, CELER_ERR_INVALID, "template: no source given");
    celer_template *t = calloc(1, sizeof *t);
    if (!t) return celer_fail(err, CELER_ERR_OOM, "template: out of memory");
    t->prog.name = strdup(name ? name : "<template>");
    if (!t->prog.name) {
        free(t);
        return celer_fail(err, CELER_ERR_OOM, "template: out of memory");
    }
    jinja_fail_ctx *f = calloc(1, sizeof *f); /* on the heap: it changes before a longjmp */
    if (!f) {
        celer_template_free(t);
        return celer_fail(err, CELER_ERR_OOM, "template: out of memory");
    }
    f->err = err, f->name = t->prog.name;
    t->prog.arena.limit = JINJA_MAX_MEMORY;
    if (setjmp(f->jmp)) {
        celer_status code = f->code;
        celer_template_free(t);
        free(f);
        return code;
    }
    jinja_parse(&t->prog, src ? src : "", len, f);
    free(f);
    *out = t;
    return CELER_OK;
}

void celer_template_free(celer_template *t)
{
    if (!t) return;
    jinja_arena_free(&t->prog.arena);
    free(t->prog.name);
    free(t);
}

/* JSON → values. Integral numbers within int64 become ints (cJSON does not keep the text, so a
 * literal 1.0 reads as the int 1). */
static jv from_json(jinja_rt *rt, const cJSON *j, int depth)
{
    if (depth > JINJA_MAX_NEST) jinja_rt_fail(rt, "the input JSON nests deeper than %d levels", JINJA_MAX_NEST);
    if (!j || cJSON_IsNull(j)) return jv_none();
    if (cJSON_IsBool(j)) return jv_bool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (isfinite(d) && d == floor(d) && fabs(d) < 9.2e18) return jv_int((int64_t)d);
        return jv_float(d);
    }
    if (cJSON_IsString(j)) return jv_str_copy(rt, j->valuestring, strlen(j->valuestring));
    if (cJSON_IsArray(j)) {
        jv l = jv_list_new(rt, 0);
        for (const cJSON *c = j->child; c; c = c->next) jv_list_push(rt, l.u.l, from_json(rt, c, depth + 1));
        return l;
    }
    if (cJSON_IsObject(j)) {
        jv d = jv_dict_new(rt);
        for (const cJSON *c = j->child; c; c = c->next)
            jv_dict_set(rt, d.u.d, jv_str_copy(rt, c->string, strlen(c->string)), from_json(rt, c, depth + 1));
        return d;
    }
    return jv_none();
}

static int64_t render_time(void)
{
    const char *s = getenv("SOURCE_DATE_EPOCH");
    if (s && *s) {
        char *end;
        errno       = 0;
        long long v = strtoll(s, &end, 10);
        if (!errno && !*end) return v;
    }
    return (int64_t)time(NULL);
}

celer_status celer_template_render(const celer_template *t, const cJSON *vars, char **out, size_t *n,
                                   celer_error *err)
{
    *out = NULL, *n = 0;
    if (vars && !cJSON_IsObject(vars)) return celer_fail(err, CELER_ERR_INVALID, "template %s: the variables must be a JSON object", t->prog.name);
    /* what changes between setjmp and a longjmp lives on the heap, so it reads back reliably */
    struct {
        jinja_fail_ctx f;
        jbuf           output;
        jinja_rt       rt;
    } *s = calloc(1, sizeof *s);
    if (!s) return celer_fail(err, CELER_ERR_OOM, "template: out of memory");
    s->f        = (jinja_fail_ctx){.err = err, .name = t->prog.name};
    s->output   = (jbuf){.heap = true, .limit = JINJA_MAX_OUTPUT};
    s->rt.f     = &s->f;
    s->rt.out   = &s->output;
    s->rt.now   = render_time();
    s->rt.arena.limit = JINJA_MAX_MEMORY;
    if (setjmp(s->f.jmp)) {
        celer_status code = s->f.code;
        jbuf_free(&s->output);
        jinja_arena_free(&s->rt.arena);
        free(s);
        return code;
    }
    jv ctx    = vars ? from_json(&s->rt, vars, 0) : jv_dict_new(&s->rt);
    s->rt.ctx = ctx.u.d;
    jinja_render(&s->rt, &t->prog);
    jinja_arena_free(&s->rt.arena);
    jbuf output = s->output;
    free(s);
    if (!output.p) {
        output.p = malloc(1);
        if (!output.p) return celer_fail(err, CELER_ERR_OOM, "template: out of memory");
        output.p[0] = 0;
    }
    *out = output.p, *n = output.n;
    return CELER_OK;
}

/* ---- the variables transformers passes ------------------------------------------------------- */

static const char *const reasoning_keys[] = {"reasoning_content", "thinking", "reasoning"};

static celer_status oom(celer_error *err) { return celer_fail(err, CELER_ERR_OOM, "chat: out of memory building the template variables"); }

/* One message as transformers' _normalize_chat_messages and _alias_reasoning_fields leave it. */
static cJSON *normalize_message(const cJSON *m)
{
    cJSON       *out       = cJSON_CreateObject();
    const cJSON *reasoning = NULL;
    for (size_t k = 0; k < 3 && !reasoning; k++) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, reasoning_keys[k]);
        if (r && !cJSON_IsNull(r)) reasoning = r;
    }
    if (!out) return NULL;
    if (reasoning && !cJSON_AddItemToObject(out, "thinking", cJSON_Duplicate(reasoning, true))) goto fail;
    for (const cJSON *c = m->child; c; c = c->next) {
        if (cJSON_IsNull(c)) continue;
        cJSON *dup = cJSON_Duplicate(c, true);
        if (!dup) goto fail;
        if (cJSON_GetObjectItemCaseSensitive(out, c->string)) {
            if (!cJSON_ReplaceItemInObjectCaseSensitive(out, c->string, dup)) goto fail;
        } else if (!cJSON_AddItemToObject(out, c->string, dup)) {
            goto fail;
        }
    }
    if (reasoning) {
        cJSON *dup = cJSON_Duplicate(reasoning, true);
        if (!dup) goto fail;
        if (cJSON_GetObjectItemCaseSensitive(out, "reasoning_content")) {
            if (!cJSON_ReplaceItemInObjectCaseSensitive(out, "reasoning_content", dup)) goto fail;
        } else if (!cJSON_AddItemToObject(out, "reasoning_content", dup)) {
            goto fail;
        }
    }
    return out;
fail:
    cJSON_Delete(out);
    return NULL;
}

celer_status celer_chat_context(const cJSON *messages, const cJSON *tools, const cJSON *documents,
                                bool add_generation_prompt, const char *bos_token, const char *eos_token,
                                const cJSON *extra, cJSON **ctx, celer_error *err)
{
    *ctx = NULL;
    if (!cJSON_IsArray(messages))
        return celer_fail(err, CELER_ERR_INVALID, "chat: messages must be a JSON array of message objects");
    if (!messages->child)
        return celer_fail(err, CELER_ERR_INVALID, "chat: cannot apply a chat template to an empty conversation; give at least one message");
    if (tools && !cJSON_IsNull(tools) && !cJSON_IsArray(tools))
        return celer_fail(err, CELER_ERR_INVALID, "chat: tools must be a JSON array of tool definitions");
    if (extra && !cJSON_IsObject(extra)) return celer_fail(err, CELER_ERR_INVALID, "chat: extra variables must be a JSON object");
    cJSON *c = cJSON_CreateObject(), *msgs = cJSON_CreateArray();
    if (!c || !msgs || !cJSON_AddItemToObject(c, "messages", msgs)) {
        cJSON_Delete(c);
        if (!c || !cJSON_GetObjectItem(c, "messages")) cJSON_Delete(msgs);
        return oom(err);
    }
    size_t i = 0;
    for (const cJSON *m = messages->child; m; m = m->next, i++) {
        if (!cJSON_IsObject(m)) {
            cJSON_Delete(c);
            return celer_fail(err, CELER_ERR_INVALID, "chat: message %zu is not a JSON object; each message is {\"role\": ..., \"content\": ...}", i);
        }
        cJSON *nm = normalize_message(m);
        if (!nm || !cJSON_AddItemToArray(msgs, nm)) {
            cJSON_Delete(nm);
            cJSON_Delete(c);
            return oom(err);
        }
    }
    bool ok = (tools && !cJSON_IsNull(tools) ? cJSON_AddItemToObject(c, "tools", cJSON_Duplicate(tools, true))
                                              : cJSON_AddNullToObject(c, "tools") != NULL) &&
              (documents && !cJSON_IsNull(documents) ? cJSON_AddItemToObject(c, "documents", cJSON_Duplicate(documents, true))
                                                      : cJSON_AddNullToObject(c, "documents") != NULL) &&
              cJSON_AddBoolToObject(c, "add_generation_prompt", add_generation_prompt) != NULL &&
              (!bos_token || cJSON_AddStringToObject(c, "bos_token", bos_token)) &&
              (!eos_token || cJSON_AddStringToObject(c, "eos_token", eos_token));
    for (const cJSON *x = extra ? extra->child : NULL; ok && x; x = x->next) {
        cJSON *dup = cJSON_Duplicate(x, true);
        if (!dup) ok = false;
        else if (cJSON_GetObjectItemCaseSensitive(c, x->string)) ok = cJSON_ReplaceItemInObjectCaseSensitive(c, x->string, dup);
        else ok = cJSON_AddItemToObject(c, x->string, dup);
    }
    if (!ok) {
        cJSON_Delete(c);
        return oom(err);
    }
    *ctx = c;
    return CELER_OK;
}

celer_status celer_chat_concat(const cJSON *messages, char **out, size_t *n, celer_error *err)
{
    *out = NULL, *n = 0;
    if (!cJSON_IsArray(messages)) return celer_fail(err, CELER_ERR_INVALID, "chat: messages must be a JSON array of message objects");
    size_t cap = 1, len = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (const cJSON *m = messages->child; m; m = m->next) {
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
            for (const cJSON *part = cJSON_IsArray(c) ? c->child : c; part; part = cJSON_IsArray(c) ? part->next : NULL) {
                const cJSON *text = cJSON_IsString(part) ? part : cJSON_GetObjectItemCaseSensitive(part, "text");
                if (!cJSON_IsString(text)) continue;
                size_t k = strlen(text->valuestring);
                if (pass) memcpy(*out + len, text->valuestring, k);
                len += k;
            }
        }
        if (!pass) {
            cap  = len + 1;
            *out = malloc(cap);
            if (!*out) return celer_fail(err, CELER_ERR_OOM, "chat: out of memory concatenating %zu bytes", len);
            len = 0;
        }
    }
    (*out)[len] = 0;
    *n          = len;
    return CELER_OK;
}

/* ---- GGUF models ------------------------------------------------------------------------------- */

/* The text of token id (from key) in tokenizer.ggml.tokens; NULL when absent. */
static char *token_text(const celer_gguf *g, const char *key, celer_error *err, celer_status *st)
{
    uint64_t id;
    bool     found = false;
    *st            = celer_gguf_get_u64(g, key, &id, &found, err);
    if (*st || !found) return NULL;
    const celer_gguf_kv *toks = celer_gguf_find(g, "tokenizer.ggml.tokens");
    if (!toks || toks->type != CELER_GGUF_ARRAY || toks->array_type != CELER_GGUF_STRING || id >= toks->array_len) return NULL;
    const uint8_t *cur = toks->data, *el = NULL;
    for (uint64_t i = 0; i <= id; i++) el = celer_gguf_array_next(toks, &cur);
    celer_gguf_str s = celer_gguf_read_str(el);
    char          *t = malloc(s.len + 1);
    if (!t) {
        *st = celer_fail(err, CELER_ERR_OOM, "chat: out of memory");
        return NULL;
    }
    memcpy(t, s.ptr, s.len);
    t[s.len] = 0;
    return t;
}

const char *celer_chat_template_source(const celer_model_file *mf, size_t *n)
{
    if (mf->kind != MODEL_FILE_GGUF) {
        const char *t = celer_hf_tokenizer_config_template(&mf->tcfg, NULL);
        if (t) *n = strlen(t);
        return t;
    }
    celer_gguf_str src = {0};
    bool           found = false;
    if (celer_gguf_get_str(&mf->gguf, "tokenizer.chat_template", &src, &found, NULL) || !found) return NULL;
    *n = (size_t)src.len;
    return src.ptr;
}

celer_status celer_chat_apply(const celer_model_file *mf, const cJSON *messages, const cJSON *tools,
                              bool add_generation_prompt, const cJSON *extra_vars, char **out, size_t *n,
                              bool *used_template, celer_error *err)
{
    *out = NULL, *n = 0, *used_template = false;
    size_t         src_n = 0;
    const char    *src_p = celer_chat_template_source(mf, &src_n);
    celer_gguf_str src   = {.ptr = src_p, .len = src_n};
    bool           found = src_p != NULL;
    if (!found) {
        cJSON       *ctx = NULL;
        celer_status st  = celer_chat_context(messages, tools, NULL, add_generation_prompt, NULL, NULL, extra_vars, &ctx, err);
        cJSON_Delete(ctx);
        return st ? st : celer_chat_concat(messages, out, n, err);
    }
    celer_status    st  = CELER_OK;
    char           *bos = NULL, *eos = NULL;
    cJSON          *ctx = NULL;
    celer_template *t   = NULL;
    if (mf->kind == MODEL_FILE_GGUF) {
        bos = token_text(&mf->gguf, "tokenizer.ggml.bos_token_id", err, &st);
        if (!st) eos = token_text(&mf->gguf, "tokenizer.ggml.eos_token_id", err, &st);
    } else { /* tokenizer_config.json names them */
        bos = mf->tcfg.bos_token ? strdup(mf->tcfg.bos_token) : NULL;
        eos = mf->tcfg.eos_token ? strdup(mf->tcfg.eos_token) : NULL;
    }
    if (!st) st = celer_chat_context(messages, tools, NULL, add_generation_prompt, bos, eos, extra_vars, &ctx, err);
    const char *name = mf->kind == MODEL_FILE_GGUF ? mf->gguf.name : mf->st.dir;
    if (!st) st = celer_template_parse(&t, src.ptr, src.len, name ? name : "model", err);
    if (!st) st = celer_template_render(t, ctx, out, n, err);
    if (!st) *used_template = true;
    celer_template_free(t);
    cJSON_Delete(ctx);
    free(bos);
    free(eos);
    return st;
}
