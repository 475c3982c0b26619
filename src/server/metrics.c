#include "server/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double BOUNDS[SRV_HIST_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

void srv_metrics_init(srv_metrics *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
}

void srv_metrics_free(srv_metrics *m) { pthread_mutex_destroy(&m->mu); }

static void count_status(srv_metrics *m, int status)
{
    for (size_t i = 0; i < sizeof m->requests / sizeof *m->requests; i++)
        if (m->requests[i].status == status || !m->requests[i].status) {
            m->requests[i].status = status;
            m->requests[i].n++;
            return;
        }
}

void srv_metrics_request(srv_metrics *m, int status)
{
    pthread_mutex_lock(&m->mu);
    count_status(m, status);
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_done(srv_metrics *m, int status, int64_t prompt_tokens, int64_t generated_tokens)
{
    pthread_mutex_lock(&m->mu);
    count_status(m, status);
    m->prompt_tokens += (uint64_t)prompt_tokens;
    m->generated_tokens += (uint64_t)generated_tokens;
    pthread_mutex_unlock(&m->mu);
}

static void observe(srv_metrics *m, srv_hist *h, double s)
{
    pthread_mutex_lock(&m->mu);
    int b = 0;
    while (b < SRV_HIST_BUCKETS && s > BOUNDS[b]) b++;
    h->count[b]++;
    h->sum += s;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_ttft(srv_metrics *m, double seconds) { observe(m, &m->ttft, seconds); }
void srv_metrics_itl(srv_metrics *m, double seconds) { observe(m, &m->itl, seconds); }

typedef struct {
    char  *p;
    size_t n, cap;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...)
{
    va_list ap;
    for (int pass = 0; pass < 2; pass++) {
        va_start(ap, fmt);
        int k = vsnprintf(t->p ? t->p + t->n : NULL, t->p ? t->cap - t->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if (t->p && t->n + (size_t)k < t->cap) {
            t->n += (size_t)k;
            return;
        }
        size_t cap = (t->n + (size_t)k + 1) * 2;
        char  *p   = realloc(t->p, cap);
        if (!p) return;
        t->p = p, t->cap = cap;
    }
}

static void hist(text *t, const char *name, const char *help, const srv_hist *h)
{
    put(t, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int b = 0; b < SRV_HIST_BUCKETS; b++) {
        cum += h->count[b];
        put(t, "%s_bucket{le=\"%g\"} %llu\n", name, BOUNDS[b], (unsigned long long)cum);
    }
    cum += h->count[SRV_HIST_BUCKETS];
    put(t, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name, (unsigned long long)cum, name, h->sum,
        name, (unsigned long long)cum);
}

char *srv_metrics_render(srv_metrics *m, const celer_batcher_counts *c, int queue_limit)
{
    text t = {0};
    pthread_mutex_lock(&m->mu);
    put(&t, "# HELP celer_requests_total Requests answered, by HTTP status.\n# TYPE celer_requests_total counter\n");
    for (size_t i = 0; i < sizeof m->requests / sizeof *m->requests && m->requests[i].status; i++)
        put(&t, "celer_requests_total{status=\"%d\"} %llu\n", m->requests[i].status,
            (unsigned long long)m->requests[i].n);
    put(&t, "# HELP celer_prompt_tokens_total Prompt tokens of finished requests.\n"
            "# TYPE celer_prompt_tokens_total counter\nceler_prompt_tokens_total %llu\n"
            "# HELP celer_generated_tokens_total Tokens generated.\n"
            "# TYPE celer_generated_tokens_total counter\nceler_generated_tokens_total %llu\n",
        (unsigned long long)m->prompt_tokens, (unsigned long long)m->generated_tokens);
    put(&t, "# HELP celer_queue_depth Requests waiting for a sequence slot.\n# TYPE celer_queue_depth gauge\n"
            "celer_queue_depth %d\n# HELP celer_queue_limit Waiting requests before 503.\n"
            "# TYPE celer_queue_limit gauge\nceler_queue_limit %d\n"
            "# HELP celer_running_sequences Sequences being generated.\n# TYPE celer_running_sequences gauge\n"
            "celer_running_sequences %d\n# HELP celer_kv_blocks_used KV cache blocks in use.\n"
            "# TYPE celer_kv_blocks_used gauge\nceler_kv_blocks_used %d\n"
            "# HELP celer_kv_blocks_free KV cache blocks free.\n# TYPE celer_kv_blocks_free gauge\n"
            "celer_kv_blocks_free %d\n",
        c->waiting, queue_limit, c->running, c->kv_blocks_used, c->kv_blocks_free);
    hist(&t, "celer_time_to_first_token_seconds", "From submission to the first generated text.", &m->ttft);
    hist(&t, "celer_inter_token_latency_seconds", "Between successive pieces of generated text.", &m->itl);
    pthread_mutex_unlock(&m->mu);
    return t.p;
}
