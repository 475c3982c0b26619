/* The chat output state machine: buffers, events, and the text states.
 *
 * Pending input lives in o->in from o->pos on. Each step either consumes a prefix of it or
 * changes state; when neither is possible (a suffix could still become a marker, or a UTF-8
 * sequence is unfinished) the machine waits for the next piece. A text state looks for the
 * earliest of its markers (the longest one on a tie); the text before it goes to the state's
 * sink, the marker to its action. Tool-call blocks keep their bytes in o->raw, which ends up in
 * a MARKUP event (well-formed) or an ERROR event (malformed), so no byte is ever dropped. */
#include "chat/output_impl.h"
#include "core/bytes.h"
#include "core/error.h"
#include "core/utf8.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- buffers and events --------------------------------------------------- */

void oc_put(celer_chat_output *o, celer_bytes *b, const void *s, size_t n)
{
    if (!celer_bytes_put(b, s, n)) o->oom = true;
}

void oc_emit(celer_chat_output *o, celer_chat_event_kind kind, const char *text, size_t len)
{
    bool is_text = kind == CELER_CHAT_EVENT_CONTENT || kind == CELER_CHAT_EVENT_REASONING ||
                   kind == CELER_CHAT_EVENT_TOOL_CALL_ARGS || kind == CELER_CHAT_EVENT_MARKUP;
    if (!o->cb || o->oom || (is_text && len == 0)) return;
    if (kind == CELER_CHAT_EVENT_MARKUP && !o->cfg.emit_markup) return;
    celer_chat_event ev = {.kind = kind, .text = text ? text : "", .len = len, .index = -1};
    if (kind >= CELER_CHAT_EVENT_TOOL_CALL_BEGIN && kind <= CELER_CHAT_EVENT_TOOL_CALL_END) ev.index = o->call;
    if (kind == CELER_CHAT_EVENT_TOOL_CALL_BEGIN) ev.id = o->id, ev.name = o->name.p ? o->name.p : "";
    if (kind == CELER_CHAT_EVENT_ERROR) ev.index = o->err_index, ev.msg = o->errmsg;
    o->cb(&ev, o->user);
}

void oc_markup(celer_chat_output *o, const char *text, size_t len)
{
    oc_emit(o, CELER_CHAT_EVENT_MARKUP, text, len);
}

/* ---- init / free ---------------------------------------------------------- */

celer_status celer_chat_output_init(celer_chat_output *o, const celer_chat_output_cfg *cfg, celer_error *err)
{
    if (!o || !cfg) return celer_fail(err, CELER_ERR_INVALID, "chat output: init needs an object and a config");
    if ((unsigned)cfg->family >= CELER_CHAT_FAMILY_COUNT)
        return celer_fail(err, CELER_ERR_INVALID, "chat output: family %d is not in the table (0..%d)",
                          (int)cfg->family, CELER_CHAT_FAMILY_COUNT - 1);
    *o           = (celer_chat_output){0};
    o->cfg       = *cfg;
    o->fam       = celer_chat_family_get(cfg->family);
    o->call      = -1;
    o->err_index = -1;
    o->msg_start = true;
    if (o->fam->tools == CELER_CHAT_TOOLS_HARMONY) {
        o->state = cfg->starts_in_reasoning ? ST_H_BODY : ST_H_HEADER;
        o->hkind = HK_REASONING;
    } else {
        o->state = cfg->starts_in_reasoning && o->fam->think_close ? ST_REASONING : ST_CONTENT;
    }
    return CELER_OK;
}

void celer_chat_output_free(celer_chat_output *o)
{
    if (!o) return;
    celer_bytes_free(&o->in);
    celer_bytes_free(&o->raw);
    celer_bytes_free(&o->name);
    celer_bytes_free(&o->args);
    celer_bytes_free(&o->key);
    celer_bytes_free(&o->val);
    *o = (celer_chat_output){0};
}

/* ---- text states ---------------------------------------------------------- */

typedef struct {
    const char *s;
    size_t      n;
    int         act;
} mark;

#define DS_CALL     "<｜tool▁call▁begin｜>"
#define DS_SEP      "<｜tool▁sep｜>"
#define DS_CALL_END "<｜tool▁call▁end｜>"
#define DS_END      "<｜tool▁calls▁end｜>"

static int add_mark(mark *m, int k, const char *s, int act)
{
    if (s) m[k++] = (mark){s, strlen(s), act};
    return k;
}

static int marks(const celer_chat_output *o, mark *m)
{
    const celer_chat_family_info *f = o->fam;
    int                           k = 0;
    switch (o->state) {
    case ST_CONTENT:
        k = add_mark(m, k, f->think_open, A_THINK_OPEN);
        k = add_mark(m, k, f->think_close, A_DROP);
        k = add_mark(m, k, f->content_open, A_DROP);
        k = add_mark(m, k, f->content_close, A_DROP);
        k = add_mark(m, k, f->call_open, A_CALL_OPEN);
        k = add_mark(m, k, f->call_open2, A_CALL_OPEN);
        k = add_mark(m, k, f->call_close, A_DROP);
        break;
    case ST_REASONING: k = add_mark(m, k, f->think_close, A_THINK_CLOSE); break;
    case ST_SKIP: k = add_mark(m, k, f->call_close, A_SKIP_END); break;
    case ST_GLM_NAME:
    case ST_GLM_GAP:
        k = add_mark(m, k, "<arg_key>", A_GLM_KEY);
        k = add_mark(m, k, "</tool_call>", A_GLM_END);
        break;
    case ST_GLM_KEY: k = add_mark(m, k, "</arg_key>", A_GLM_KEY_END); break;
    case ST_GLM_VGAP:
        k = add_mark(m, k, "<arg_value>", A_GLM_VAL);
        k = add_mark(m, k, "</tool_call>", A_GLM_END);
        break;
    case ST_GLM_VAL: k = add_mark(m, k, "</arg_value>", A_GLM_VAL_END); break;
    case ST_DS_GAP:
        k = add_mark(m, k, DS_CALL, A_DS_CALL);
        k = add_mark(m, k, DS_END, A_DS_END);
        break;
    case ST_DS_HEAD: k = add_mark(m, k, DS_SEP, A_DS_SEP); break;
    case ST_DS_BODY: k = add_mark(m, k, DS_CALL_END, A_DS_CALL_END); break;
    case ST_H_HEADER: k = add_mark(m, k, "<|message|>", A_H_MESSAGE); break;
    case ST_H_BODY:
        k = add_mark(m, k, "<|end|>", A_H_END);
        k = add_mark(m, k, "<|return|>", A_H_END);
        k = add_mark(m, k, "<|call|>", A_H_END);
        k = add_mark(m, k, "<|start|>", A_H_RESTART);
        k = add_mark(m, k, "<|channel|>", A_H_RESTART);
        break;
    default: break; /* ST_REST: no markers, everything is raw */
    }
    return k;
}

/* Bytes at the end of s[0..n) that are a proper prefix of some marker. */
static size_t held_suffix(const char *s, size_t n, const mark *m, int nm)
{
    size_t best = 0;
    for (int i = 0; i < nm; i++)
        for (size_t k = m[i].n - 1 < n ? m[i].n - 1 : n; k > best; k--)
            if (memcmp(s + n - k, m[i].s, k) == 0) {
                best = k;
                break;
            }
    return best;
}

/* Where text goes in each text state. */
static void sink(celer_chat_output *o, const char *s, size_t n)
{
    if (n == 0) return;
    switch (o->state) {
    case ST_CONTENT: oc_emit(o, CELER_CHAT_EVENT_CONTENT, s, n); return;
    case ST_REASONING: oc_emit(o, CELER_CHAT_EVENT_REASONING, s, n); return;
    case ST_H_BODY:
        if (o->hkind == HK_TOOL) {
            oc_put(o, &o->raw, s, n);
            oc_minify(o, s, n);
            oc_call_flush(o);
        } else {
            oc_emit(o, o->hkind == HK_REASONING ? CELER_CHAT_EVENT_REASONING : CELER_CHAT_EVENT_CONTENT, s, n);
        }
        return;
    case ST_GLM_NAME: oc_put(o, &o->name, s, n); break;
    case ST_GLM_KEY:
    case ST_DS_HEAD: oc_put(o, &o->key, s, n); break;
    case ST_GLM_VAL:
    case ST_DS_BODY: oc_put(o, &o->val, s, n); break;
    case ST_GLM_GAP:
    case ST_GLM_VGAP:
    case ST_DS_GAP: oc_gap_sink(o, s, n); return;
    default: break;
    }
    oc_put(o, &o->raw, s, n);
}

/* Runs the action of a marker found in a text state; returns whether the marker was consumed. */
static bool act(celer_chat_output *o, int a, const char *m, size_t mn)
{
    switch (a) {
    case A_THINK_OPEN: oc_markup(o, m, mn), o->state = ST_REASONING; return true;
    case A_THINK_CLOSE: oc_markup(o, m, mn), o->state = ST_CONTENT; return true;
    case A_DROP: oc_markup(o, m, mn); return true;
    case A_CALL_OPEN: oc_block_open(o, m, mn); return true;
    case A_SKIP_END:
        oc_put(o, &o->raw, m, mn);
        oc_emit(o, CELER_CHAT_EVENT_ERROR, o->raw.p, o->raw.n);
        o->raw.n = 0, o->state = ST_CONTENT;
        return true;
    case A_H_MESSAGE:
    case A_H_END: oc_put(o, &o->raw, m, mn); return oc_harmony_action(o, a);
    case A_H_RESTART: return oc_harmony_action(o, a);
    case A_GLM_KEY:
    case A_GLM_KEY_END:
    case A_GLM_VAL:
    case A_GLM_VAL_END:
    case A_GLM_END: oc_put(o, &o->raw, m, mn); return oc_glm_action(o, a);
    default: oc_put(o, &o->raw, m, mn); return oc_ds_action(o, a);
    }
}

#define H_HEADER_MAX 4096

static bool text_step(celer_chat_output *o, bool final)
{
    mark        m[8];
    int         nm = marks(o, m), bi = -1;
    const char *s = o->in.p + o->pos;
    size_t      n = o->in.n - o->pos, best = n;
    for (int i = 0; i < nm; i++) {
        const char *f = memmem(s, n, m[i].s, m[i].n);
        if (f && ((size_t)(f - s) < best || ((size_t)(f - s) == best && m[i].n > m[bi].n)))
            best = (size_t)(f - s), bi = i;
    }
    size_t keep = final ? 0 : held_suffix(s, n, m, nm);
    if (o->state == ST_H_HEADER) { /* a header longer than H_HEADER_MAX fails at the same byte however cut */
        size_t room = H_HEADER_MAX + 1 - o->raw.n;
        if (bi >= 0 ? best >= room : n - keep >= room) {
            sink(o, s, room);
            o->pos += room;
            oc_fail_now(o, "harmony: a message header ran past 4096 bytes without <|message|>; the model is not "
                           "following the harmony format, check the chat template and the family");
            o->state = ST_H_HEADER;
            return true;
        }
    }
    if (bi >= 0) {
        sink(o, s, best);
        o->pos += best;
        if (act(o, m[bi].act, s + best, m[bi].n)) o->pos += m[bi].n;
        return true;
    }
    size_t safe = n - keep;
    if (!final) safe = celer_utf8_complete_prefix(s, safe);
    if (safe == 0) return false;
    sink(o, s, safe);
    o->pos += safe;
    return true;
}

/* Llama 3: at the start of the message, leading whitespace then '{' may be a bare call object.
 * Returns 1 when it opened one, 0 when the message is ordinary text, -1 to wait. */
static int bare_start(celer_chat_output *o, bool final)
{
    const char *s = o->in.p + o->pos;
    size_t      n = o->in.n - o->pos, i = 0;
    while (i < n && IS_WS(s[i])) i++;
    if (i == n && !final) return -1;
    o->msg_start = false;
    if (i == n || s[i] != '{') return 0;
    oc_bare_open(o);
    oc_put(o, &o->raw, s, i);
    o->pos += i;
    return 1;
}

static void run(celer_chat_output *o, bool final)
{
    while (!o->oom && o->pos < o->in.n) {
        bool progress;
        if (o->state == ST_JSON || o->state == ST_BARE) {
            progress = oc_json_step(o, final);
        } else if (o->state == ST_CONTENT && o->fam->bare_json && o->msg_start) {
            int r = bare_start(o, final);
            if (r < 0) break;
            progress = true;
        } else {
            progress = text_step(o, final);
        }
        if (!progress) break;
    }
    if (o->pos > 0) {
        memmove(o->in.p, o->in.p + o->pos, o->in.n - o->pos);
        o->in.n -= o->pos, o->pos = 0;
    }
}

static celer_status oom(celer_error *err)
{
    return celer_fail(err, CELER_ERR_OOM, "chat output: out of memory while buffering generated text; the "
                                          "output is too large for this host's memory");
}

celer_status celer_chat_output_push(celer_chat_output *o, const char *piece, size_t n, celer_chat_event_fn cb,
                                    void *user, celer_error *err)
{
    if (!o->fam) return celer_fail(err, CELER_ERR_INVALID, "chat output: push before init; call celer_chat_output_init");
    if (o->finished)
        return celer_fail(err, CELER_ERR_INVALID, "chat output: push after finish; init a new object per output");
    if (o->oom) return oom(err);
    o->cb = cb, o->user = user;
    oc_put(o, &o->in, piece, n);
    run(o, false);
    return o->oom ? oom(err) : CELER_OK;
}

/* What is left open at the end of the output. */
static void end_state(celer_chat_output *o)
{
    switch (o->state) {
    case ST_JSON:
    case ST_BARE: oc_json_finish(o); break;
    case ST_SKIP:
    case ST_REST:
        oc_emit(o, CELER_CHAT_EVENT_ERROR, o->raw.p, o->raw.n);
        o->raw.n = 0, o->state = ST_CONTENT;
        break;
    case ST_H_HEADER:
        if (o->raw.n > 0)
            oc_fail_now(o, "harmony: the output ended inside a message header (no <|message|>); the text "
                           "is reported raw");
        break;
    case ST_H_BODY:
        if (o->hkind == HK_TOOL) oc_harmony_action(o, A_H_RESTART);
        break;
    case ST_CONTENT:
    case ST_REASONING: break;
    default: oc_fail_now(o, "chat output: the output ended inside a tool call; it is reported raw"); break;
    }
}

celer_status celer_chat_output_finish(celer_chat_output *o, celer_chat_event_fn cb, void *user, celer_error *err)
{
    if (!o->fam) return celer_fail(err, CELER_ERR_INVALID, "chat output: finish before init; call celer_chat_output_init");
    if (o->finished) return CELER_OK;
    if (o->oom) return oom(err);
    o->cb = cb, o->user = user;
    for (int i = 0; i < 3; i++) { /* a Llama non-call goes back to content once */
        run(o, true);
        end_state(o);
    }
    o->finished = true;
    return o->oom ? oom(err) : CELER_OK;
}
