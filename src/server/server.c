/* The HTTP side of celer serve: a libmicrohttpd daemon with a thread per connection, and one
 * thread that runs the batcher's steps whenever it has work. A connection thread parses and
 * checks the request, renders and tokenizes the prompt, submits it, then waits on its reply:
 * streaming responses send SSE chunks as the batcher produces them; whole responses wait for
 * the end (watching the socket, so that a client that goes away cancels its request). */
#include "server/server.h"

#include "chat/output.h"
#include "chat/template.h"
#include "core/error.h"
#include "models/model_file.h"
#include "server/metrics.h"
#include "server/reply.h"
#include "server/request.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    srv_config        cfg;
    celer_engine     *e;
    celer_batcher    *b;
    celer_chat_family family;
    const char       *template_src;
    pthread_t         loop;
    bool              loop_started;
    pthread_mutex_t   mu; /* pending, stop */
    pthread_cond_t    cv;
    bool              pending, stop;
    _Atomic int       state; /* 0 loading, 1 ready, 2 failed */
    srv_metrics       metrics;
} server;

/* ---- the batcher's thread ------------------------------------------------------------------ */

static void *loop_main(void *arg)
{
    server *s = arg;
    for (;;) {
        bool        busy = false;
        celer_error err  = {0};
        if (celer_batcher_step(s->b, &busy, &err)) { /* the running requests got the error */
            fprintf(stderr, "celer serve: %s\n", err.msg);
            if (err.code != CELER_ERR_INVALID && err.code != CELER_ERR_OOM) atomic_store(&s->state, 2);
        }
        pthread_mutex_lock(&s->mu);
        if (!busy)
            while (!s->pending && !s->stop) pthread_cond_wait(&s->cv, &s->mu);
        s->pending = false;
        bool stop  = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (stop) return NULL;
    }
}

static void wake(server *s)
{
    pthread_mutex_lock(&s->mu);
    s->pending = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* ---- responses ---------------------------------------------------------------------------- */

/* Queues a response with body (malloc'd, taken). Generations are counted when they end
 * (srv_metrics_done), every other response here. */
static enum MHD_Result send_body(struct MHD_Connection *c, server *s, int status, const char *type, char *body,
                                 const char *retry_after, bool count)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(body ? strlen(body) : 0, body ? body : "",
                                                             body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    if (retry_after) MHD_add_response_header(r, "Retry-After", retry_after);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    if (count) srv_metrics_request(&s->metrics, status);
    return ok;
}

static enum MHD_Result respond(struct MHD_Connection *c, server *s, int status, const char *type, char *body,
                               const char *retry_after)
{
    return send_body(c, s, status, type, body, retry_after, true);
}

static enum MHD_Result error(struct MHD_Connection *c, server *s, int status, const char *type, const char *param,
                             const char *code, const char *msg)
{
    return respond(c, s, status, "application/json", srv_error_json(msg, type, param, code), NULL);
}

/* ---- a connection's request ------------------------------------------------------------------ */

typedef struct {
    char  *body;
    size_t n, cap;
    bool   too_big;
} upload;

typedef struct {
    server    *s;
    srv_reply *r;
    time_t     last; /* when bytes last went out */
} stream_ctx;

enum { KEEPALIVE_S = 1 }; /* inside any connection timeout (--timeout is at least 2 s) */

/* The next bytes of the stream. While a request waits for a slot or a long prompt is prefilled,
 * an SSE comment goes out every KEEPALIVE_S seconds of silence: the connection's idle timeout (which guards
 * against clients that stall) must not close a stream the server itself is slow to fill. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    static const char keepalive[] = ": keep-alive\n\n";
    stream_ctx       *x           = cls;
    srv_reply        *r           = x->r;
    pthread_mutex_lock(&r->mu);
    while (r->sent == r->send.n && !r->done && time(NULL) - x->last < KEEPALIVE_S) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_sec += 1;
        pthread_cond_timedwait(&r->cv, &r->mu, &t);
    }
    x->last = time(NULL);
    ssize_t k;
    if (r->sent == r->send.n && !r->done && max >= sizeof keepalive - 1) {
        memcpy(buf, keepalive, sizeof keepalive - 1);
        k = (ssize_t)(sizeof keepalive - 1);
    } else if (r->sent < r->send.n) {
        size_t n = r->send.n - r->sent < max ? r->send.n - r->sent : max;
        memcpy(buf, r->send.p + r->sent, n);
        r->sent += n;
        k = (ssize_t)n;
    } else {
        k = MHD_CONTENT_READER_END_OF_STREAM;
    }
    pthread_mutex_unlock(&r->mu);
    return k;
}

/* The connection is done with the stream: finished, or the client went away (then cancel). */
static void stream_free(void *cls)
{
    stream_ctx *x = cls;
    pthread_mutex_lock(&x->r->mu);
    bool done = x->r->done;
    pthread_mutex_unlock(&x->r->mu);
    if (!done) {
        celer_batcher_cancel(x->s->b, x->r->req_id);
        wake(x->s);
    }
    srv_reply_release(x->r);
    free(x);
}

/* Whole responses: wait for the end, cancelling if the client hangs up meanwhile. */
static void wait_whole(server *s, struct MHD_Connection *c, srv_reply *r)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    bool                            cancelled = false;
    pthread_mutex_lock(&r->mu);
    while (!r->done) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 200 * 1000 * 1000;
        if (t.tv_nsec >= 1000000000) t.tv_sec++, t.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&r->cv, &r->mu, &t);
        if (r->done || cancelled || !ci) continue;
        struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
        if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
            cancelled = true;
            celer_batcher_cancel(s->b, r->req_id);
            wake(s);
        }
    }
    pthread_mutex_unlock(&r->mu);
}

static enum MHD_Result generate(server *s, struct MHD_Connection *c, const upload *u, bool chat)
{
    srv_request q;
    srv_error   e;
    if (!srv_request_parse(&q, u->body ? u->body : "", u->n, chat, s->cfg.model_id, &e)) {
        srv_request_free(&q);
        return error(c, s, e.http, "invalid_request_error", e.param, e.code, e.msg);
    }
    const celer_model_file *mf   = celer_engine_model_file(s->e);
    celer_error             err  = {0};
    char                   *text = NULL;
    size_t                  n_text;
    bool                    used = false;
    if (chat ? celer_chat_apply(mf, q.messages, q.tools, true, NULL, &text, &n_text, &used, &err) : false) {
        srv_request_free(&q);
        return error(c, s, 400, "invalid_request_error", "messages", "template_error", err.msg);
    }
    if (!chat) n_text = strlen(q.prompt);
    int32_t *ids = NULL;
    size_t   n_ids = 0;
    celer_status st = celer_tokenizer_encode(celer_engine_tokenizer(s->e), chat ? text : q.prompt, n_text,
                                             (celer_encode_opts){.add_special = !chat, .parse_special = chat}, &ids,
                                             &n_ids, &err);
    bool opens = chat && st == CELER_OK && celer_chat_prompt_opens_reasoning(s->family, text, n_text);
    free(text);
    if (st) {
        srv_request_free(&q);
        return error(c, s, 400, "invalid_request_error", chat ? "messages" : "prompt", NULL, err.msg);
    }
    int64_t ctx = celer_engine_ctx(s->e);
    char    msg[256];
    if ((int64_t)n_ids >= ctx || (q.max_tokens > 0 && (int64_t)n_ids + q.max_tokens > ctx)) {
        if ((int64_t)n_ids >= ctx)
            snprintf(msg, sizeof msg, "the prompt is %zu tokens; the context holds %lld (nothing is truncated: "
                     "shorten the prompt)", n_ids, (long long)ctx);
        else
            snprintf(msg, sizeof msg, "the prompt (%zu tokens) and max_tokens (%d) exceed the context of %lld tokens",
                     n_ids, q.max_tokens, (long long)ctx);
        free(ids);
        srv_request_free(&q);
        return error(c, s, 400, "invalid_request_error", (int64_t)n_ids >= ctx ? (chat ? "messages" : "prompt")
                     : "max_tokens", "context_length_exceeded", msg);
    }
    celer_batcher_counts counts;
    celer_batcher_get_counts(s->b, &counts);
    int would_wait = counts.running + counts.waiting + 1 - s->cfg.parallel; /* with this one */
    if (would_wait > s->cfg.max_queue) {
        free(ids);
        srv_request_free(&q);
        snprintf(msg, sizeof msg, "the queue is full (%d requests waiting); retry later", counts.waiting);
        return respond(c, s, 503, "application/json", srv_error_json(msg, "server_error", NULL, "queue_full"), "1");
    }
    celer_gen_params gp = {.sampling = q.sampling, .stop = q.stop,
                           .max_tokens = q.max_tokens > 0 ? q.max_tokens : (int32_t)(ctx - (int64_t)n_ids),
                           .top_logprobs = q.logprobs, .on_token = q.logprobs >= 0 ? srv_reply_on_token : NULL};
    srv_reply *r = srv_reply_new(chat, q.stream, q.include_usage, s->cfg.model_id, (int64_t)n_ids, s->family, opens,
                                 q.sampling.seed);
    if (!r) {
        free(ids);
        srv_request_free(&q);
        return error(c, s, 500, "server_error", NULL, NULL, "out of memory");
    }
    r->metrics = &s->metrics;
    if (q.logprobs >= 0) srv_reply_want_logprobs(r, celer_engine_tokenizer(s->e));
    st         = celer_batcher_submit(s->b, ids, n_ids, &gp, srv_reply_on_text, srv_reply_on_done, r, &r->req_id, &err);
    free(ids);
    bool stream = q.stream;
    srv_request_free(&q);
    if (st) {
        srv_reply_release(r), srv_reply_release(r);
        return error(c, s, 400, "invalid_request_error", NULL, NULL, err.msg);
    }
    wake(s);
    if (!stream) {
        wait_whole(s, c, r);
        int   http = r->http;
        char *body = strndup(r->send.p ? r->send.p : "", r->send.n);
        srv_reply_release(r);
        return send_body(c, s, http, "application/json", body, NULL, false);
    }
    stream_ctx *x = malloc(sizeof *x);
    struct MHD_Response *resp = x ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, x,
                                                                      stream_free) : NULL;
    if (!resp) {
        free(x);
        celer_batcher_cancel(s->b, r->req_id);
        srv_reply_release(r);
        return MHD_NO;
    }
    x->s = s, x->r = r, x->last = time(NULL);
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    enum MHD_Result ok = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return ok;
}

static enum MHD_Result models(server *s, struct MHD_Connection *c)
{
    cJSON *o = cJSON_CreateObject(), *d = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddStringToObject(m, "id", s->cfg.model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "celer");
    cJSON_AddItemToArray(d, m);
    char *body = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return respond(c, s, 200, "application/json", body, NULL);
}

static bool authorized(server *s, struct MHD_Connection *c)
{
    if (!s->cfg.api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    return h && !strncmp(h, "Bearer ", 7) && !strcmp(h + 7, s->cfg.api_key);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *data, size_t *size, void **con_cls)
{
    (void)version;
    server *s = cls;
    upload *u = *con_cls;
    if (!u) { /* the headers: the body comes in the next calls */
        if (!(u = calloc(1, sizeof *u))) return MHD_NO;
        *con_cls = u;
        return MHD_YES;
    }
    if (*size) {
        if (u->n + *size > s->cfg.max_body) u->too_big = true;
        if (!u->too_big) {
            if (u->n + *size + 1 > u->cap) {
                size_t cap = (u->n + *size + 1) * 2;
                char  *p   = realloc(u->body, cap);
                if (!p) return MHD_NO;
                u->body = p, u->cap = cap;
            }
            memcpy(u->body + u->n, data, *size);
            u->n += *size;
        }
        *size = 0;
        return MHD_YES;
    }
    bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    int  state = atomic_load(&s->state);
    if (!strcmp(url, "/health")) {
        if (state == 1) return respond(c, s, 200, "application/json", strdup("{\"status\":\"ok\"}"), NULL);
        return respond(c, s, 503, "application/json",
                       strdup(state ? "{\"status\":\"failed\"}" : "{\"status\":\"loading\"}"), state ? NULL : "1");
    }
    if (state != 1)
        return respond(c, s, 503, "application/json",
                       srv_error_json(state ? "the device failed; restart the server" : "the model is loading",
                                      "server_error", NULL, state ? "device_failed" : "loading"), "1");
    if (!strcmp(url, "/metrics") && get) {
        celer_batcher_counts counts;
        celer_batcher_get_counts(s->b, &counts);
        return respond(c, s, 200, "text/plain; version=0.0.4", srv_metrics_render(&s->metrics, &counts,
                                                                                  s->cfg.max_queue), NULL);
    }
    bool v1 = !strncmp(url, "/v1/", 4);
    if (v1 && !authorized(s, c))
        return error(c, s, 401, "invalid_request_error", NULL, "invalid_api_key", "a valid API key is needed: send "
                     "the header 'Authorization: Bearer KEY'");
    if (u->too_big) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body is larger than the limit of %zu bytes", s->cfg.max_body);
        return error(c, s, 413, "invalid_request_error", NULL, "body_too_large", msg);
    }
    bool chat = !strcmp(url, "/v1/chat/completions"), completions = !strcmp(url, "/v1/completions");
    if (!strcmp(url, "/v1/models")) return get ? models(s, c) : error(c, s, 405, "invalid_request_error", NULL,
                                                                       "method_not_allowed", "use GET /v1/models");
    if (chat || completions)
        return post ? generate(s, c, u, chat)
                    : error(c, s, 405, "invalid_request_error", NULL, "method_not_allowed", "use POST");
    char msg[320];
    snprintf(msg, sizeof msg, "no route %.16s %.120s; the routes: GET /health, GET /v1/models, POST "
             "/v1/chat/completions, POST /v1/completions, GET /metrics", method, url);
    return error(c, s, 404, "invalid_request_error", NULL, "not_found", msg);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why)
{
    (void)cls, (void)c, (void)why;
    upload *u = *con_cls;
    if (u) free(u->body), free(u);
    *con_cls = NULL;
}

/* ---- running ------------------------------------------------------------------------------ */

celer_status srv_run(const srv_config *cfg, celer_error *err)
{
    server s = {.cfg = *cfg};
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    srv_metrics_init(&s.metrics);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT), sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* every thread started from here blocks them too */
    signal(SIGPIPE, SIG_IGN);

    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port)};
    if (inet_pton(AF_INET, cfg->host, &addr.sin_addr) != 1)
        return celer_fail(err, CELER_ERR_INVALID, "serve: --host %s is not an IPv4 address", cfg->host);
    /* a missing, unreadable or malformed model file is reported before the server listens (its
     * header and tensor table are read here; the weights load after, while /health says loading) */
    celer_model_file *probe;
    if (celer_model_file_open(&probe, cfg->model, err)) return err->code;
    celer_model_file_close(probe);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, (uint16_t)cfg->port,
        NULL, NULL, handle, &s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)(cfg->timeout_s > 0 ? cfg->timeout_s : 30), MHD_OPTION_CONNECTION_LIMIT, (unsigned)256, MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
        MHD_OPTION_END);
    if (!d)
        return celer_fail(err, CELER_ERR_IO, "serve: cannot listen on %s:%d (in use, or not allowed); pick another "
                          "--port or --host", cfg->host, cfg->port);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "celer serve: listening on http://%s:%u (loading %s)\n", cfg->host, di ? di->port : cfg->port,
            cfg->model);

    celer_engine_config ec = {.backend = cfg->backend, .n_threads = cfg->n_threads, .n_ctx = cfg->n_ctx};
    celer_status        st = celer_engine_create(&s.e, cfg->model, &ec, err);
    celer_batcher_config bc = {.n_parallel = cfg->parallel};
    if (!st) st = celer_batcher_create(&s.b, s.e, &bc, err);
    if (!st) {
        const celer_model_file *mf = celer_engine_model_file(s.e);
        size_t                  n  = 0;
        s.template_src             = celer_chat_template_source(mf, &n);
        s.family                   = celer_chat_family_pick(celer_model_file_hparams(mf)->arch, s.template_src);
        if (pthread_create(&s.loop, NULL, loop_main, &s))
            st = celer_fail(err, CELER_ERR_OOM, "serve: cannot start the batcher's thread");
        else s.loop_started = true;
    }
    if (!st) {
        atomic_store(&s.state, 1);
        fprintf(stderr, "celer serve: ready: model '%s', %d sequences in parallel, context %lld, queue %d\n",
                cfg->model_id, cfg->parallel, (long long)celer_engine_ctx(s.e), cfg->max_queue);
        int sig = 0;
        sigwait(&sigs, &sig);
        fprintf(stderr, "celer serve: %s, stopping\n", sig == SIGINT ? "interrupted" : "terminated");
    }
    MHD_stop_daemon(d); /* waits for the connections' threads */
    if (s.loop_started) {
        pthread_mutex_lock(&s.mu);
        s.stop = true;
        pthread_cond_signal(&s.cv);
        pthread_mutex_unlock(&s.mu);
        pthread_join(s.loop, NULL);
    }
    celer_batcher_free(s.b);
    celer_engine_free(s.e);
    srv_metrics_free(&s.metrics);
    pthread_mutex_destroy(&s.mu);
    pthread_cond_destroy(&s.cv);
    return st;
}
