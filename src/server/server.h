/* celer serve: an OpenAI-compatible HTTP server (libmicrohttpd, a thread per connection) over
 * the continuous batcher. Routes: GET /health, GET /v1/models, POST /v1/chat/completions,
 * POST /v1/completions, GET /metrics. docs/server.md documents them. */
#ifndef CELER_SERVER_SERVER_H
#define CELER_SERVER_SERVER_H

#include "celer.h"

typedef struct {
    const char *model;      /* path */
    const char *model_id;   /* the name /v1/models gives and requests may use */
    const char *host;       /* "127.0.0.1" */
    int         port;       /* 8080; 0: any free port (printed) */
    int         parallel;   /* sequences decoded together */
    int64_t     n_ctx;      /* per sequence; 0: the model's default */
    const char *api_key;    /* NULL: none */
    int         max_queue;  /* waiting requests before 503 */
    int         n_threads;  /* compute threads; 0: one per core */
    const char *backend;    /* "cpu", "cuda", "rocm"; NULL: the best available */
    size_t      max_body;   /* request body bytes */
    int         timeout_s;  /* a connection that sends nothing this long is closed (slow clients) */
} srv_config;

/* Listens, loads the model (GET /health answers 503 meanwhile), serves until SIGINT or SIGTERM.
 * Errors: the address cannot be bound, the model cannot be loaded. */
celer_status srv_run(const srv_config *c, celer_error *err);

#endif
