/* An OpenAI request body (POST /v1/chat/completions or /v1/completions), parsed and checked.
 * An unknown field is ignored; a known field of the wrong type or out of range is an error
 * that names it (OpenAI's "param"). Fields celer cannot honour are refused, never ignored. */
#ifndef CELER_SERVER_REQUEST_H
#define CELER_SERVER_REQUEST_H

#include "celer.h"

#include <cjson/cJSON.h>

enum { SRV_MAX_STOP = 4 };

typedef struct {
    bool           chat;     /* /v1/chat/completions; else /v1/completions */
    cJSON         *body;     /* the parsed body (owned) */
    const cJSON   *messages; /* chat: the array, checked */
    const cJSON   *tools;    /* chat: the tools array, or NULL */
    const char    *prompt;   /* completions: the prompt text */
    int32_t        max_tokens; /* -1: up to the context */
    celer_sampling sampling;
    const char    *stop[SRV_MAX_STOP + 1]; /* NULL-terminated, pointing into body */
    bool           stream, include_usage;
    int32_t        logprobs; /* -1: none; else how many top alternatives per token (0-20) */
} srv_request;

/* What was wrong: the message and the field ("param"; "" for the body as a whole). */
typedef struct {
    int  http;        /* 400, 404 */
    char param[64];
    char msg[256];
    char code[32];    /* OpenAI's "code", or "" */
} srv_error;

/* Parses body[0, n) for the route (chat or not) of a server whose model is called model_id.
 * false with *e filled when the request is refused. */
bool srv_request_parse(srv_request *r, const char *body, size_t n, bool chat, const char *model_id, srv_error *e);
void srv_request_free(srv_request *r);

#endif
