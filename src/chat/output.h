/* The output side of chat: a streaming state machine that splits the text a model generates
 * into content, reasoning and tool calls, piece by piece.
 *
 * Pieces may be cut at any byte (inside a marker, inside a UTF-8 sequence). Text goes out as
 * soon as it is certain: only a suffix that could still be the start of a marker, or an
 * unfinished UTF-8 sequence, is held back. The markers belong to a model family picked by the
 * caller from explicit metadata (celer_chat_family_pick), never by sniffing the output.
 * docs/chat-output.md has the families, the event model and the OpenAI mapping.
 *
 *   celer_chat_output o = {0};
 *   celer_chat_output_init(&o, &cfg, err);
 *   for each piece: celer_chat_output_push(&o, piece, n, cb, user, err);
 *   celer_chat_output_finish(&o, cb, user, err);
 *   celer_chat_output_free(&o);
 */
#ifndef CELER_CHAT_OUTPUT_H
#define CELER_CHAT_OUTPUT_H

#include "celer.h"
#include "core/bytes.h"

#include <cjson/cJSON.h>

/* ---- families ---------------------------------------------------------- */

typedef enum {
    CELER_CHAT_FAMILY_PLAIN = 0, /* no markers: everything is content */
    CELER_CHAT_FAMILY_QWEN,      /* <think>…</think>; <tool_call>{json}</tool_call> (Qwen2.5/3, QwQ, Hermes, SmolLM3, Falcon3) */
    CELER_CHAT_FAMILY_DEEPSEEK,  /* <think>…</think>; <｜tool▁calls▁begin｜>… (R1, V3, V3.1) */
    CELER_CHAT_FAMILY_LLAMA3,    /* {"name":…,"parameters":…} as the whole message, or after <|python_tag|> */
    CELER_CHAT_FAMILY_MISTRAL,   /* [TOOL_CALLS][{…}] (v0.3, Nemo) and [TOOL_CALLS]name[ARGS]{…} (Small 3.2) */
    CELER_CHAT_FAMILY_GRANITE,   /* <think>…</think><response>…</response>; <|tool_call|>[{…}] */
    CELER_CHAT_FAMILY_GLM,       /* <think>…</think>; <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call> */
    CELER_CHAT_FAMILY_COMMAND_R, /* <|START_THINKING|>…<|END_THINKING|>; <|START_RESPONSE|>…; <|START_ACTION|>[…]<|END_ACTION|> */
    CELER_CHAT_FAMILY_HARMONY,   /* gpt-oss: <|channel|>analysis<|message|>…<|end|>, final, commentary to=functions.x */
    CELER_CHAT_FAMILY_COUNT
} celer_chat_family;

/* How a family writes tool calls. */
typedef enum {
    CELER_CHAT_TOOLS_NONE = 0,
    CELER_CHAT_TOOLS_JSON,     /* after the opener: one call object or a list of them; keys name|tool_name, arguments|parameters */
    CELER_CHAT_TOOLS_GLM,      /* name, then <arg_key>/<arg_value> pairs */
    CELER_CHAT_TOOLS_DEEPSEEK, /* <｜tool▁call▁begin｜>[function<｜tool▁sep｜>]name…args<｜tool▁call▁end｜> */
    CELER_CHAT_TOOLS_HARMONY,  /* a commentary message addressed to=functions.NAME whose body is the arguments */
} celer_chat_tools;

/* One row of the family table: the markers of a family's output protocol. NULL = none. */
typedef struct {
    const char      *name;          /* "qwen", as printed and as accepted by celer_chat_family_from_name */
    const char      *think_open;    /* opens reasoning in content */
    const char      *think_close;   /* ends reasoning; in content it is dropped */
    const char      *content_open;  /* wrapper around the answer, dropped ("<response>") */
    const char      *content_close; /* dropped */
    const char      *call_open;     /* opens a tool-call block */
    const char      *call_open2;    /* a second opener (Llama's <|python_tag|>) */
    const char      *call_close;    /* ends a tool-call block; NULL: the JSON value's end ends it */
    celer_chat_tools tools;
    bool             bare_json;     /* a message that is one {"name","parameters"} object is a call (Llama 3) */
    bool             name_args;     /* [TOOL_CALLS]name[CALL_ID]id[ARGS]{…} is accepted too (Mistral) */
    bool             short_ids;     /* ids are 9 alphanumerics, no "call_" (Mistral templates demand it) */
    const char      *signature[2];  /* template text that selects this family (celer_chat_family_pick) */
} celer_chat_family_info;

/* The row for f (the PLAIN row for an out-of-range value). */
const celer_chat_family_info *celer_chat_family_get(celer_chat_family f);
/* "qwen" → CELER_CHAT_FAMILY_QWEN; CELER_ERR_INVALID listing the names when unknown. */
celer_status celer_chat_family_from_name(const char *name, celer_chat_family *out, celer_error *err);
/* Picks the family from explicit metadata: the chat template's source text (the model's own
 * declaration of its markers) when given, else the architecture name (general.architecture or
 * config.json model_type). Rule: the first row, in table order, one of whose signatures occurs in
 * the template wins; with no template, or none matching, a fixed architecture table decides; else
 * PLAIN. Either argument may be NULL. Never fails; PLAIN means "no markers". */
celer_chat_family celer_chat_family_pick(const char *arch, const char *template_src);
/* Whether a rendered prompt leaves the model inside a reasoning block: it ends, after trailing
 * whitespace, with the family's think_open marker (QwQ, DeepSeek-R1, GLM add it themselves).
 * Set cfg.starts_in_reasoning from this. */
bool celer_chat_prompt_opens_reasoning(celer_chat_family f, const char *prompt, size_t n);

/* ---- events ------------------------------------------------------------ */

typedef enum {
    CELER_CHAT_EVENT_CONTENT,         /* text: answer text */
    CELER_CHAT_EVENT_REASONING,       /* text: thinking text */
    CELER_CHAT_EVENT_TOOL_CALL_BEGIN, /* index, id, name */
    CELER_CHAT_EVENT_TOOL_CALL_ARGS,  /* index, text: the next bytes of the compact arguments JSON */
    CELER_CHAT_EVENT_TOOL_CALL_END,   /* index: the call is complete and its JSON was valid */
    CELER_CHAT_EVENT_ERROR,           /* msg; text: the model's raw bytes that could not be parsed, markers
                                       * included; index: the call it ends, or -1 when no BEGIN went out */
    CELER_CHAT_EVENT_MARKUP,          /* text: raw bytes that are structure (markers, headers, tool-call
                                       * blocks); only with cfg.emit_markup */
} celer_chat_event_kind;

typedef struct {
    celer_chat_event_kind kind;
    const char           *text; /* not NUL-terminated; valid during the callback */
    size_t                len;
    int32_t               index; /* tool calls: 0, 1, … within this output */
    const char           *id;    /* BEGIN: NUL-terminated */
    const char           *name;  /* BEGIN: NUL-terminated */
    const char           *msg;   /* ERROR: one line, NUL-terminated */
} celer_chat_event;

typedef void (*celer_chat_event_fn)(const celer_chat_event *ev, void *user);

/* Every tool call goes BEGIN, ARGS*, END or BEGIN, ARGS*, ERROR(index). A malformed block that
 * never named a call is one ERROR(index -1). Text events (CONTENT, REASONING, ARGS) never end
 * inside a UTF-8 sequence when the model's bytes are valid UTF-8. */

/* ---- the state machine ------------------------------------------------- */

typedef struct {
    celer_chat_family family;
    bool              starts_in_reasoning; /* the prompt opened the thinking block (see above) */
    bool              emit_markup;         /* also report structure bytes as MARKUP events */
    uint64_t          id_seed;             /* tool-call ids are a function of (id_seed, index) */
} celer_chat_output_cfg;

typedef struct {
    /* private: see output.c */
    const celer_chat_family_info *fam;
    celer_chat_output_cfg         cfg;
    int                           state, hkind;
    celer_bytes                   in;   /* pending input, in.p[pos..in.n) */
    size_t                        pos;
    celer_bytes                   raw;  /* bytes of the tool-call block being read */
    celer_bytes                   name, args, key, val;
    size_t                        args_sent, obj_start;
    int32_t                       n_calls, call; /* call: index of the open call, -1 none */
    bool                          begun, has_name, has_args, args_stream, msg_start, deferred, oom, finished;
    int                           jphase, jdepth, jkst, jrole, jn_args;
    bool                          jstr, jesc, jlist, junk;
    int32_t                       err_index;   /* the call an ERROR from ST_SKIP/ST_REST will end */
    char                          errmsg[192];
    char                          id[24];
    celer_chat_event_fn           cb;
    void                         *user;
} celer_chat_output;

celer_status celer_chat_output_init(celer_chat_output *o, const celer_chat_output_cfg *cfg, celer_error *err);
/* Feeds n bytes. Calls cb for each event, in order. CELER_ERR_OOM is the only failure; the
 * object is then freeable but not usable. */
celer_status celer_chat_output_push(celer_chat_output *o, const char *piece, size_t n, celer_chat_event_fn cb,
                                    void *user, celer_error *err);
/* End of the output: flushes what was held back. A marker prefix left over is text; an open
 * reasoning block is reasoning; an open tool-call block is an ERROR (a complete call whose
 * closing marker is missing still counts as a call: stop strings often cut it). */
celer_status celer_chat_output_finish(celer_chat_output *o, celer_chat_event_fn cb, void *user, celer_error *err);
void         celer_chat_output_free(celer_chat_output *o);

/* The id of call index under seed: "call_" + 9 alphanumerics, or the 9 alone when short. */
void celer_chat_call_id(uint64_t seed, int32_t index, bool short_id, char out[24]);

/* ---- collecting a whole output ----------------------------------------- */

typedef struct {
    char   *content, *reasoning; /* NUL-terminated (never NULL after a successful parse) */
    size_t  content_len, reasoning_len;
    char   *invalid;             /* raw text of malformed tool-call blocks, in order */
    size_t  invalid_len;
    cJSON  *tool_calls;          /* [{"id","type":"function","function":{"name","arguments"}}] */
    int     n_errors;
    char    error[256];          /* the first ERROR's message, "" when none */
    /* private */
    celer_bytes    bc, br, bi, bargs;
    char           pend_id[24], *pend_name;
    bool           oom;
} celer_chat_parsed;

/* An event callback (user = celer_chat_parsed *) that collects events; after the last event call
 * celer_chat_parsed_close to make the strings. */
void         celer_chat_parsed_event(const celer_chat_event *ev, void *user);
celer_status celer_chat_parsed_close(celer_chat_parsed *p, celer_error *err);
/* The non-streaming path: parses a whole output in one call. */
celer_status celer_chat_output_parse(const celer_chat_output_cfg *cfg, const char *text, size_t n,
                                     celer_chat_parsed *out, celer_error *err);
void         celer_chat_parsed_free(celer_chat_parsed *p);

#endif
