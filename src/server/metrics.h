/* The server's counters and latency histograms, rendered as Prometheus text (GET /metrics). */
#ifndef CELER_SERVER_METRICS_H
#define CELER_SERVER_METRICS_H

#include "celer.h"

#include <pthread.h>

enum { SRV_HIST_BUCKETS = 12 };

typedef struct {
    uint64_t count[SRV_HIST_BUCKETS + 1]; /* the last: +Inf */
    double   sum;
} srv_hist;

typedef struct srv_metrics {
    pthread_mutex_t mu;
    struct {
        int      status;
        uint64_t n;
    } requests[16];
    uint64_t prompt_tokens, generated_tokens;
    srv_hist ttft, itl;
} srv_metrics;

void srv_metrics_init(srv_metrics *m);
void srv_metrics_free(srv_metrics *m);
/* A request answered with status (for generations: when it ended). */
void srv_metrics_request(srv_metrics *m, int status);
void srv_metrics_done(srv_metrics *m, int status, int64_t prompt_tokens, int64_t generated_tokens);
void srv_metrics_ttft(srv_metrics *m, double seconds);
void srv_metrics_itl(srv_metrics *m, double seconds);
/* The text, malloc'd, with the batcher's gauges. */
char *srv_metrics_render(srv_metrics *m, const celer_batcher_counts *c, int queue_limit);

#endif
