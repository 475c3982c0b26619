/* One response in the making, between the batcher's thread (which pushes generated text into
 * it) and the connection's thread (which waits for bytes to send). The text goes through the
 * chat output parser (content, reasoning, tool calls) and comes out as OpenAI's shapes: SSE
 * chunks as they arise, or one JSON body at the end. */
#ifndef CELER_SERVER_REPLY_H
#define CELER_SERVER_REPLY_H

#include "chat/output.h"
#include "core/error.h"

#include <pthread.h>

typedef struct srv_reply {
    pthread_mutex_t   mu;
    pthread_cond_t    cv;
    bool              chat, stream, include_usage;
    char              id[40];
    const char       *model_id;
    long              created;
    int64_t           n_prompt;
    celer_chat_output out;
    bool              out_ready;
    celer_bytes       content, reasoning; /* whole-body responses */
    cJSON            *calls;              /* whole-body: the tool calls so far */
    int32_t           n_calls;
    celer_bytes       send;  /* bytes for the connection: SSE chunks, or the whole body at the end */
    size_t            sent;  /* of send, taken by the connection */
    bool              done, failed, oom;
    int               http;  /* the status of a whole-body response: 200, or 500 when generation failed */
    celer_gen_stats   stats;
    uint64_t          req_id; /* the batcher's id, to cancel */
    int               refs;   /* the connection and the batcher each hold one */
    double            t_submit, t_first, t_last; /* for the latency histograms */
    struct srv_metrics *metrics;
    /* logprobs: entries {token, logprob, bytes, top_logprobs} of tokens not yet sent (a stream)
     * or of all (whole); NULL when not asked for */
    cJSON                 *logprobs;
    const celer_tokenizer *tok;
    int64_t                text_offset; /* completions: where the next token's text starts */
} srv_reply;

/* A reply for a request of n_prompt tokens; family: the chat output family (chat only). */
srv_reply *srv_reply_new(bool chat, bool stream, bool include_usage, const char *model_id, int64_t n_prompt,
                         celer_chat_family family, bool starts_in_reasoning, uint64_t seed);
/* Drops one reference; the last frees. */
void       srv_reply_release(srv_reply *r);

/* Asks for log-probabilities: the reply records each token's (tok names them). */
void srv_reply_want_logprobs(srv_reply *r, const celer_tokenizer *tok);

/* The batcher's callbacks (user: the reply). */
bool srv_reply_on_text(void *user, const char *text, size_t n);
void srv_reply_on_token(void *user, int32_t id, float logprob, const int32_t *top_ids, const float *top_lp, int32_t n);
void srv_reply_on_done(void *user, const celer_gen_stats *stats, const celer_error *err);

/* A whole JSON error body in OpenAI's shape, malloc'd. */
char *srv_error_json(const char *msg, const char *type, const char *param, const char *code);

#endif
