/* libFuzzer target: the chat output state machine on arbitrary text cut at arbitrary points.
 *
 * Input: byte 0 picks the family, byte 1 bit 0 sets starts_in_reasoning, bytes 1-2 seed the cut
 * points; the rest is the model's output, where bytes 0x01..0x08 stand for the family's markers
 * (so mutations combine markers without having to spell them). Checked, besides crashes and leaks:
 *   1. accounting: with emit_markup, CONTENT + REASONING + MARKUP + ERROR text, concatenated in
 *      event order, is the input byte for byte (whatever the input);
 *   2. cut invariance: the event transcript (adjacent text events of one kind merged) is the same
 *      for the whole output in one piece and for the chosen cuts;
 *   3. protocol: BEGIN(i) ARGS(i)* then END(i) or ERROR(i), i = 0, 1, …; names and ids non-empty;
 *   4. no marker of the family inside a run of content;
 *   5. for valid UTF-8 input, CONTENT and REASONING events are valid UTF-8. */
#include "chat/output.h"
#include "core/utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    char  *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        if (!(b->p = realloc(b->p, b->cap))) abort();
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

typedef struct {
    const celer_chat_family_info *fam;
    buf                           all, log, run; /* accounted bytes, transcript, current content run */
    int                           last, open, next;
    bool                          utf8_in;
} sink;

static const char *markers[CELER_CHAT_FAMILY_COUNT][3] = {
    [CELER_CHAT_FAMILY_DEEPSEEK] = {"<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"},
    [CELER_CHAT_FAMILY_MISTRAL]  = {"[ARGS]", "[CALL_ID]", "{\"name\":\"f\",\"arguments\":"},
    [CELER_CHAT_FAMILY_GLM]      = {"<arg_key>", "</arg_key><arg_value>", "</arg_value>"},
    [CELER_CHAT_FAMILY_HARMONY]  = {"<|channel|>", "<|message|>", "<|end|><|start|>assistant"},
    [CELER_CHAT_FAMILY_QWEN]     = {"{\"name\": \"f\", \"arguments\": ", "\"</tool_call>\"", "\\\""},
    [CELER_CHAT_FAMILY_LLAMA3]   = {"{\"name\": \"f\", \"parameters\": ", "}", "\"x\""},
};

static const char *token(const celer_chat_family_info *f, celer_chat_family fam, uint8_t b)
{
    switch (b) {
    case 1: return f->think_open;
    case 2: return f->think_close;
    case 3: return f->call_open;
    case 4: return f->call_close ? f->call_close : f->call_open2;
    case 5: return f->content_open ? f->content_open : f->content_close;
    default: return markers[fam][b - 6];
    }
}

static bool has_marker(const char *s, const celer_chat_family_info *f)
{
    const char *m[] = {f->think_open,  f->think_close, f->content_open, f->content_close, f->call_open,
                       f->call_open2, f->call_close,  NULL,            NULL,             NULL};
    if (f->tools == CELER_CHAT_TOOLS_HARMONY) m[7] = "<|end|>", m[8] = "<|channel|>", m[9] = "<|return|>";
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (m[i] && strstr(s, m[i])) return true;
    return false;
}

static void end_run(sink *s)
{
    if (s->run.n && memchr(s->run.p, 0, s->run.n) == NULL && has_marker(s->run.p, s->fam)) {
        fprintf(stderr, "content run holds a marker: [%s]\n", s->run.p);
        abort();
    }
    s->run.n = 0;
}

static void on_event(const celer_chat_event *ev, void *user)
{
    sink *s    = user;
    bool  text = ev->kind == CELER_CHAT_EVENT_CONTENT || ev->kind == CELER_CHAT_EVENT_REASONING ||
                ev->kind == CELER_CHAT_EVENT_TOOL_CALL_ARGS || ev->kind == CELER_CHAT_EVENT_MARKUP;
    if (ev->kind != CELER_CHAT_EVENT_TOOL_CALL_ARGS && ev->kind != CELER_CHAT_EVENT_TOOL_CALL_BEGIN &&
        ev->kind != CELER_CHAT_EVENT_TOOL_CALL_END)
        put(&s->all, ev->text, ev->len);
    if (text && ev->len == 0) abort();
    if (!text || (int)ev->kind != s->last) {
        char h[64];
        snprintf(h, sizeof h, "\n%d/%d:", (int)ev->kind, (int)ev->index);
        put(&s->log, h, strlen(h));
    }
    put(&s->log, ev->text ? ev->text : "", ev->len);
    if (ev->kind == CELER_CHAT_EVENT_TOOL_CALL_BEGIN) {
        put(&s->log, ev->name, strlen(ev->name));
        put(&s->log, "|", 1);
        put(&s->log, ev->id, strlen(ev->id));
    }
    if (ev->kind == CELER_CHAT_EVENT_ERROR) put(&s->log, ev->msg, strlen(ev->msg));
    s->last = (int)ev->kind;
    if (ev->kind == CELER_CHAT_EVENT_CONTENT) put(&s->run, ev->text, ev->len);
    else end_run(s);
    if (s->utf8_in && (ev->kind == CELER_CHAT_EVENT_CONTENT || ev->kind == CELER_CHAT_EVENT_REASONING) &&
        celer_utf8_validate(ev->text, ev->len) != ev->len)
        abort();
    switch (ev->kind) {
    case CELER_CHAT_EVENT_TOOL_CALL_BEGIN:
        if (s->open != -1 || ev->index != s->next || !ev->name[0] || !ev->id[0]) abort();
        s->open = ev->index, s->next++;
        break;
    case CELER_CHAT_EVENT_TOOL_CALL_ARGS:
        if (ev->index != s->open) abort();
        break;
    case CELER_CHAT_EVENT_TOOL_CALL_END:
        if (ev->index != s->open) abort();
        s->open = -1;
        break;
    case CELER_CHAT_EVENT_ERROR:
        if (ev->index != s->open || !ev->msg[0]) abort();
        s->open = -1;
        break;
    default: break;
    }
}

static void run(const celer_chat_output_cfg *cfg, const char *in, size_t n, const size_t *cuts, size_t nc, sink *s)
{
    celer_chat_output o   = {0};
    celer_error       err = {0};
    s->last = -1, s->open = -1;
    if (celer_chat_output_init(&o, cfg, &err) != CELER_OK) abort();
    size_t at = 0;
    for (size_t i = 0; i <= nc; i++) {
        size_t to = i < nc ? cuts[i] : n;
        if (celer_chat_output_push(&o, in + at, to - at, on_event, s, &err) != CELER_OK) abort();
        at = to;
    }
    if (celer_chat_output_finish(&o, on_event, s, &err) != CELER_OK) abort();
    end_run(s);
    celer_chat_output_free(&o);
    if (s->open != -1 || s->all.n != n || (n && memcmp(s->all.p, in, n) != 0)) {
        fprintf(stderr, "bytes not accounted for: %zu of %zu\n", s->all.n, n);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3 || size > 8192) return 0;
    celer_chat_output_cfg cfg = {.family              = (celer_chat_family)(data[0] % CELER_CHAT_FAMILY_COUNT),
                                 .starts_in_reasoning = data[1] & 1,
                                 .emit_markup         = true,
                                 .id_seed             = data[2]};
    const celer_chat_family_info *f    = celer_chat_family_get(cfg.family);
    uint32_t                      rng  = (uint32_t)data[1] << 8 | data[2] | 1u;
    buf                           text = {0};
    for (size_t i = 3; i < size; i++) {
        const char *t = data[i] >= 1 && data[i] <= 8 ? token(f, cfg.family, data[i]) : NULL;
        if (t) put(&text, t, strlen(t));
        else put(&text, &data[i], 1);
    }
    if (!text.p) put(&text, "", 0);

    size_t *cuts = malloc((text.n + 1) * sizeof *cuts), nc = 0;
    if (!cuts) abort();
    int mode = (data[1] >> 1) & 3;
    for (size_t i = 1; i < text.n; i++) {
        rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
        if (mode == 0 || (mode == 1 && rng % 3 == 0) || (mode == 2 && rng % 17 == 0) || (mode == 3 && i == text.n / 2))
            cuts[nc++] = i;
    }

    sink a = {.fam = f, .utf8_in = celer_utf8_validate(text.p, text.n) == text.n};
    sink b = a;
    run(&cfg, text.p, text.n, NULL, 0, &a);
    run(&cfg, text.p, text.n, cuts, nc, &b);
    if (a.log.n != b.log.n || (a.log.n && memcmp(a.log.p, b.log.p, a.log.n) != 0)) {
        fprintf(stderr, "transcripts differ with the cuts:\n--- one piece%s\n--- cut%s\n", a.log.p, b.log.p);
        abort();
    }
    free(a.all.p), free(a.log.p), free(a.run.p);
    free(b.all.p), free(b.log.p), free(b.run.p);
    free(cuts);
    free(text.p);
    return 0;
}
