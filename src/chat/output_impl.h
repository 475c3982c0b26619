/* Private to src/chat/output*.c: the states of the chat output machine and the helpers its
 * files share. */
#ifndef CELER_CHAT_OUTPUT_IMPL_H
#define CELER_CHAT_OUTPUT_IMPL_H

#include "chat/output.h"

/* States. Text states find the earliest of their markers in the pending input (output.c);
 * ST_JSON and ST_BARE read JSON byte by byte (output_call.c). */
enum {
    ST_CONTENT,
    ST_REASONING,
    ST_JSON,     /* a JSON tool-call block after its opener */
    ST_BARE,     /* Llama 3: a message starting with '{' that may be one call (decided at its '}') */
    ST_SKIP,     /* a malformed block: raw bytes up to call_close */
    ST_REST,     /* a malformed block without a closing marker: raw bytes to the end */
    ST_GLM_NAME, /* after <tool_call>: the name, up to <arg_key> or </tool_call> */
    ST_GLM_GAP,  /* between pairs: whitespace up to <arg_key> or </tool_call> */
    ST_GLM_KEY,  /* up to </arg_key> */
    ST_GLM_VGAP, /* whitespace up to <arg_value> */
    ST_GLM_VAL,  /* up to </arg_value> */
    ST_DS_GAP,   /* in <｜tool▁calls▁begin｜>: up to <｜tool▁call▁begin｜> or <｜tool▁calls▁end｜> */
    ST_DS_HEAD,  /* up to <｜tool▁sep｜> */
    ST_DS_BODY,  /* up to <｜tool▁call▁end｜> */
    ST_H_HEADER, /* harmony: a message header, up to <|message|> */
    ST_H_BODY,   /* harmony: a message body, up to <|end|>, <|return|> or <|call|> */
};

/* Harmony body kinds (o->hkind). */
enum { HK_CONTENT, HK_REASONING, HK_TOOL };

/* Actions of markers found in text states. */
enum {
    A_THINK_OPEN,
    A_THINK_CLOSE,
    A_DROP,
    A_CALL_OPEN,
    A_SKIP_END,
    A_GLM_KEY,
    A_GLM_KEY_END,
    A_GLM_VAL,
    A_GLM_VAL_END,
    A_GLM_END,
    A_DS_CALL,
    A_DS_SEP,
    A_DS_CALL_END,
    A_DS_END,
    A_H_MESSAGE,
    A_H_END,
    A_H_RESTART,
};

#define IS_WS(c) ((c) == ' ' || (c) == '\n' || (c) == '\r' || (c) == '\t')

/* output.c */
void oc_put(celer_chat_output *o, celer_bytes *b, const void *s, size_t n); /* sets o->oom */
void oc_emit(celer_chat_output *o, celer_chat_event_kind kind, const char *text, size_t len);
void oc_markup(celer_chat_output *o, const char *text, size_t len);

/* output_call.c */
void oc_block_open(celer_chat_output *o, const char *marker, size_t n);
void oc_bare_open(celer_chat_output *o);
bool oc_json_step(celer_chat_output *o, bool final);
void oc_json_finish(celer_chat_output *o);
void oc_call_reset(celer_chat_output *o);
void oc_call_flush(celer_chat_output *o);
void oc_call_end(celer_chat_output *o);
void oc_block_done(celer_chat_output *o);
void oc_block_fail(celer_chat_output *o, const char *msg);
void oc_fail_now(celer_chat_output *o, const char *msg);
void oc_minify(celer_chat_output *o, const char *s, size_t n);
bool oc_args_valid(const celer_chat_output *o);
/* Parses exactly p[0..n) (trailing whitespace allowed) as one JSON value; NULL otherwise. */
cJSON *oc_json_parse(const char *p, size_t n);

/* output_tools.c: GLM, DeepSeek and harmony actions */
bool oc_glm_action(celer_chat_output *o, int act);
bool oc_ds_action(celer_chat_output *o, int act);
bool oc_harmony_action(celer_chat_output *o, int act);
void oc_gap_sink(celer_chat_output *o, const char *s, size_t n);

#endif
