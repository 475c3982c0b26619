/* Continuous batching: requests from any thread share the forward steps of one model. Each step
 * runs one token of every decoding sequence and, in the budget left, chunks of the prompts of
 * sequences being prefilled (so a long prompt never stalls the others' decoding for long); the
 * logits of the rows that end a prompt or decode a token are sampled per sequence, with its own
 * sampler, detokenizer and stop strings. A request is admitted to a free slot when the KV pool
 * has the blocks for its prompt and its max_tokens, all reserved up front: a running sequence
 * never runs out of cache, so nothing is ever preempted. Every token's arithmetic depends on its
 * own row alone (backends/cpu/matmul.h), so a request gives the same tokens whatever else shares
 * its steps. */
#include "core/error.h"
#include "runtime/engine_impl.h"
#include "runtime/kv_cache.h"
#include "runtime/token_out.h"
#include "tokenizer/tokenizer.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum { REQ_WAITING, REQ_RUNNING } req_state;
typedef struct celer_request celer_request;

struct celer_request {
    uint64_t          id;
    req_state         state;
    int32_t           slot;
    int32_t          *tokens;   /* (n_prompt + max_tokens) the prompt, then what was sampled */
    int32_t           n_prompt, n_tokens, n_run; /* n_run: positions in the cache */
    int32_t           reserve;  /* positions reserved in the pool */
    celer_gen_params  p;
    char            **stop;     /* copies of p.stop */
    celer_token_out   out;
    celer_text_fn     on_text;
    celer_done_fn     on_done;
    void             *user;
    celer_gen_stats   stats;
    double            t_submit, t_start;
    _Atomic bool      cancel;   /* set by celer_batcher_cancel from any thread */
    celer_request    *next; /* the waiting queue */
};

struct celer_batcher {
    celer_engine   *e;
    celer_kv_cache  kv;
    celer_acts      acts;
    int32_t         n_slots, step_tokens;
    int64_t         n_ctx;
    celer_request **slots;      /* (n_slots) */
    int32_t        *ids, *pos, *seq, *out_idx; /* (step_tokens) the step's batch */
    celer_request **out_req;    /* (n_slots) whose logits row each out_idx is */
    int32_t        *picked;     /* (n_slots) each output row's next token */
    celer_draw     *draws;      /* (n_slots) each row's draw, when the backend takes them */
    float          *logits;     /* (n_slots, n_vocab) host copy of the rows read */
    float          *scratch;    /* (n_vocab) the sampler's copy of a row whose raw logits are reported too */
    /* a step ahead (the engine's decode ahead, for a batch): the last step's greedy picks kept on
     * the backend, not yet taken — n_pend rows, each a running request's (its slot and id: one
     * that ends meanwhile is gone from its slot) */
    int32_t         n_pend;
    int32_t        *pend_slot;  /* (n_slots) */
    uint64_t       *pend_id;    /* (n_slots) */
    pthread_mutex_t mu;         /* guards the queue, next_id and cancel flags */
    celer_request  *head, *tail;
    int32_t         n_waiting;
    uint64_t        next_id;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void req_free(celer_request *r)
{
    if (!r) return;
    for (char **s = r->stop; s && *s; s++) free(*s);
    free(r->stop);
    free(r->tokens);
    celer_token_out_free(&r->out); /* zeroed parts free as nothing */
    free(r);
}

celer_status celer_batcher_create(celer_batcher **out, celer_engine *e, const celer_batcher_config *c,
                                  celer_error *err)
{
    *out             = NULL;
    celer_batcher *b = calloc(1, sizeof *b);
    if (!b) return celer_fail(err, CELER_ERR_OOM, "batcher: out of memory");
    b->e           = e;
    b->n_slots     = c && c->n_parallel > 0 ? c->n_parallel : 4;
    b->n_ctx       = c && c->n_ctx > 0 ? c->n_ctx : e->n_ctx;
    b->step_tokens = c && c->step_tokens > 0 ? c->step_tokens : PREFILL_CHUNK;
    if (b->step_tokens < b->n_slots) b->step_tokens = b->n_slots; /* every slot decodes each step */
    int64_t pool  = c && c->kv_tokens > 0 ? c->kv_tokens : b->n_ctx * b->n_slots;
    int32_t n_blk = (int32_t)((pool + CELER_KV_BLOCK - 1) / CELER_KV_BLOCK);
    const celer_hparams *hp = &e->model.hp;
    pthread_mutex_init(&b->mu, NULL);
    b->next_id = 1;
    celer_status st = celer_kv_cache_init(&b->kv, e->be, e->model.n_layers, hp->n_head_kv, hp->head_dim_k,
                                          hp->head_dim_v, b->n_slots, b->n_ctx, n_blk, err);
    if (!st) st = celer_acts_init(&b->acts, &e->model, e->be, b->step_tokens, b->n_slots, err);
    if (!st) {
        b->slots   = calloc((size_t)b->n_slots, sizeof *b->slots);
        b->ids     = malloc((size_t)b->step_tokens * sizeof *b->ids);
        b->pos     = malloc((size_t)b->step_tokens * sizeof *b->pos);
        b->seq     = malloc((size_t)b->step_tokens * sizeof *b->seq);
        b->out_idx = malloc((size_t)b->n_slots * sizeof *b->out_idx);
        b->out_req = malloc((size_t)b->n_slots * sizeof *b->out_req);
        b->picked  = malloc((size_t)b->n_slots * sizeof *b->picked);
        b->draws   = malloc((size_t)b->n_slots * sizeof *b->draws);
        b->logits  = malloc((size_t)b->n_slots * (size_t)hp->n_vocab * sizeof *b->logits);
        b->scratch = malloc((size_t)hp->n_vocab * sizeof *b->scratch);
        b->pend_slot = malloc((size_t)b->n_slots * sizeof *b->pend_slot);
        b->pend_id   = malloc((size_t)b->n_slots * sizeof *b->pend_id);
        if (!b->slots || !b->ids || !b->pos || !b->seq || !b->out_idx || !b->out_req || !b->picked || !b->draws ||
            !b->logits || !b->scratch || !b->pend_slot || !b->pend_id)
            st = celer_fail(err, CELER_ERR_OOM, "batcher: out of memory");
    }
    if (st) {
        celer_batcher_free(b);
        return st;
    }
    *out = b;
    return CELER_OK;
}

static void finish(celer_batcher *b, celer_request *r, const char *why, const celer_error *failure)
{
    if (r->state == REQ_RUNNING) {
        celer_kv_cache_truncate(&b->kv, r->slot, 0);
        b->slots[r->slot] = NULL;
    }
    if (!failure && strcmp(why, "cancelled")) {
        celer_error e2 = {0};
        (void)celer_token_out_end(&r->out, r->on_text, r->user, &e2); /* a broken tail: the text so far stands */
    }
    r->stats.finish = why;
    if (r->t_start > 0) r->stats.t_gen = now() - r->t_start - r->stats.t_prompt;
    if (r->on_done) r->on_done(r->user, &r->stats, failure);
    req_free(r);
}

void celer_batcher_free(celer_batcher *b)
{
    if (!b) return;
    if (b->n_pend && b->picked) { /* the backend's kept picks taken (it may serve others) */
        celer_error ignored;
        (void)b->e->be->ops->argmax_take(b->e->be, b->picked, &ignored);
        b->n_pend = 0;
    }
    for (int32_t s = 0; b->slots && s < b->n_slots; s++)
        if (b->slots[s]) finish(b, b->slots[s], "cancelled", NULL);
    while (b->head) {
        celer_request *r = b->head;
        b->head          = r->next;
        finish(b, r, "cancelled", NULL);
    }
    celer_acts_free(&b->acts, b->e->be);
    celer_kv_cache_free(&b->kv, b->e->be);
    free(b->slots), free(b->ids), free(b->pos), free(b->seq), free(b->out_idx), free(b->out_req), free(b->logits);
    free(b->picked), free(b->draws), free(b->pend_slot), free(b->pend_id);
    free(b->scratch);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

static int32_t blocks_for(int32_t positions) { return (positions + CELER_KV_BLOCK - 1) / CELER_KV_BLOCK; }

celer_status celer_batcher_submit(celer_batcher *b, const int32_t *prompt, size_t n_prompt, const celer_gen_params *p,
                                  celer_text_fn on_text, celer_done_fn on_done, void *user, uint64_t *id,
                                  celer_error *err)
{
    const celer_engine *e = b->e;
    if (!n_prompt) return celer_fail(err, CELER_ERR_INVALID, "generate: the prompt is empty");
    if ((int64_t)n_prompt >= b->n_ctx)
        return celer_fail(err, CELER_ERR_INVALID, "generate: the prompt has %zu tokens but the context holds %lld; "
                          "shorten it or raise --ctx", n_prompt, (long long)b->n_ctx);
    for (size_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= e->model.hp.n_vocab)
            return celer_fail(err, CELER_ERR_INVALID, "generate: prompt token %d is outside the vocabulary", prompt[i]);
    if (p->max_tokens < 0) return celer_fail(err, CELER_ERR_INVALID, "generate: max_tokens %d", p->max_tokens);
    int64_t want = (int64_t)n_prompt + p->max_tokens;
    int32_t reserve = (int32_t)(want < b->n_ctx ? want : b->n_ctx);
    if (blocks_for(reserve) > b->kv.n_blocks)
        return celer_fail(err, CELER_ERR_INVALID, "generate: the prompt and max_tokens need %d positions of cache, "
                          "more than the whole pool of %d; lower max_tokens or raise the pool",
                          reserve, b->kv.n_blocks * CELER_KV_BLOCK);
    celer_request *r = calloc(1, sizeof *r);
    if (!r) return celer_fail(err, CELER_ERR_OOM, "batcher: out of memory");
    r->p       = *p;
    r->reserve = reserve;
    r->tokens  = malloc((size_t)reserve * sizeof *r->tokens);
    size_t n_stop = 0;
    for (const char *const *s = p->stop; s && *s; s++) n_stop++;
    r->stop = calloc(n_stop + 1, sizeof *r->stop);
    bool ok = r->tokens && r->stop;
    for (size_t i = 0; ok && i < n_stop; i++) ok = (r->stop[i] = strdup(p->stop[i])) != NULL;
    if (!ok) {
        req_free(r);
        return celer_fail(err, CELER_ERR_OOM, "batcher: out of memory");
    }
    r->p.stop = (const char *const *)r->stop;
    if (celer_token_out_init(&r->out, e, &r->p, err)) {
        req_free(r);
        return err->code;
    }
    memcpy(r->tokens, prompt, n_prompt * sizeof *prompt);
    r->n_prompt = r->n_tokens = (int32_t)n_prompt;
    r->on_text = on_text, r->on_done = on_done, r->user = user;
    r->stats    = (celer_gen_stats){.n_prompt = (int64_t)n_prompt, .finish = "length"};
    r->t_submit = now();
    r->slot     = -1;
    pthread_mutex_lock(&b->mu);
    r->id = b->next_id++;
    if (b->tail) b->tail->next = r;
    else b->head = r;
    b->tail = r;
    b->n_waiting++;
    pthread_mutex_unlock(&b->mu);
    if (id) *id = r->id;
    return CELER_OK;
}

void celer_batcher_cancel(celer_batcher *b, uint64_t id)
{
    pthread_mutex_lock(&b->mu);
    for (celer_request *r = b->head; r; r = r->next)
        if (r->id == id) r->cancel = true;
    for (int32_t s = 0; s < b->n_slots; s++)
        if (b->slots[s] && b->slots[s]->id == id) b->slots[s]->cancel = true;
    pthread_mutex_unlock(&b->mu);
}

void celer_batcher_get_counts(celer_batcher *b, celer_batcher_counts *c)
{
    pthread_mutex_lock(&b->mu);
    *c = (celer_batcher_counts){.waiting = b->n_waiting, .kv_blocks_free = b->kv.n_free,
                                .kv_blocks_used = b->kv.n_blocks - b->kv.n_free};
    for (int32_t s = 0; s < b->n_slots; s++) c->running += b->slots[s] != NULL;
    pthread_mutex_unlock(&b->mu);
}

/* Cancelled requests end; waiting ones move into free slots, in order, while the pool has their
 * blocks (the head of the queue waits for blocks rather than be overtaken). */
static celer_status admit(celer_batcher *b, celer_error *err)
{
    for (int32_t s = 0; s < b->n_slots; s++) /* running requests cancelled since the last step */
        if (b->slots[s] && b->slots[s]->cancel) finish(b, b->slots[s], "cancelled", NULL);
    pthread_mutex_lock(&b->mu);
    celer_request *done = NULL, **pp = &b->head;
    while (*pp) { /* take the cancelled out of the queue */
        celer_request *r = *pp;
        if (r->cancel) {
            *pp = r->next, r->next = done, done = r, b->n_waiting--;
            continue;
        }
        pp = &r->next;
    }
    b->tail = NULL;
    for (celer_request *r = b->head; r; r = r->next) b->tail = r;
    for (int32_t s = 0; s < b->n_slots && b->head; s++) {
        if (b->slots[s]) continue;
        celer_request *r = b->head;
        if (blocks_for(r->reserve) > b->kv.n_free) break;
        if (celer_kv_cache_reserve(&b->kv, s, r->reserve, err)) {
            pthread_mutex_unlock(&b->mu);
            return err->code;
        }
        b->head = r->next;
        if (!b->head) b->tail = NULL;
        b->n_waiting--;
        r->next = NULL, r->state = REQ_RUNNING, r->slot = s, r->t_start = now();
        b->kv.seq_len[s] = 0;
        b->slots[s]      = r;
    }
    pthread_mutex_unlock(&b->mu);
    while (done) {
        celer_request *r = done;
        done             = r->next;
        finish(b, r, "cancelled", NULL);
    }
    return CELER_OK;
}

/* The chosen token's log-probability and the top ones, from the raw logits, to on_token. */
static void report_logprobs(celer_request *r, const float *logits, int64_t n_vocab, int32_t id)
{
    double mx = logits[0], sum = 0;
    for (int64_t i = 1; i < n_vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    for (int64_t i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - mx);
    double  lse = mx + log(sum);
    int32_t n = r->p.top_logprobs < 0 ? 0 : r->p.top_logprobs > CELER_MAX_TOP_LOGPROBS ? CELER_MAX_TOP_LOGPROBS
                                                                                   : r->p.top_logprobs;
    if (n > n_vocab) n = (int32_t)n_vocab;
    int32_t top[CELER_MAX_TOP_LOGPROBS];
    float   lp[CELER_MAX_TOP_LOGPROBS];
    int32_t have = 0; /* top[0..have) by logit descending; scanning ids upward keeps the lower id first on ties */
    for (int64_t i = 0; i < n_vocab && n; i++) {
        if (have == n && logits[i] <= logits[top[n - 1]]) continue;
        int32_t at = have < n ? have++ : n - 1;
        while (at > 0 && logits[i] > logits[top[at - 1]]) top[at] = top[at - 1], at--;
        top[at] = (int32_t)i;
    }
    for (int32_t k = 0; k < n; k++) lp[k] = (float)((double)logits[top[k]] - lse);
    r->p.on_token(r->user, id, (float)((double)logits[id] - lse), top, lp, n);
}

/* One drawn token of r (logits_row: its raw logits, read when log-probabilities are reported):
 * ends r, or appends the token for the next step. */
static void take_token(celer_batcher *b, celer_request *r, const float *logits_row, int32_t id)
{
    const celer_engine *e = b->e;
    if (r->stats.n_gen >= r->p.max_tokens) { /* max_tokens 0: the prompt only */
        finish(b, r, "length", NULL);
        return;
    }
    if (r->p.on_token) report_logprobs(r, logits_row, e->model.hp.n_vocab, id);
    if (r->stats.n_gen == 0) r->stats.t_first = now() - r->t_start, r->stats.t_prompt = r->stats.t_first;
    r->stats.n_gen++;
    const char *end;
    celer_error derr = {0};
    if (celer_token_out_take(&r->out, e, id, r->p.ignore_eos, r->on_text, r->user, &end, &derr)) {
        finish(b, r, end, &derr);
        return;
    }
    if (!end && (r->stats.n_gen >= r->p.max_tokens || r->n_tokens >= r->reserve)) end = "length";
    if (end) finish(b, r, end, NULL);
    else r->tokens[r->n_tokens++] = id;
}

/* Each output row's next token into b->picked. When every row's draw depends on its logits alone
 * (no penalty, no log-probabilities reported), the backend draws: its argmax when all are greedy,
 * else its sample op with each sampled row's generator number taken here (a row it leaves
 * undecided is read and drawn here with that number). Otherwise every row is read and drawn here.
 * A sampled row takes one generator number either way. */
static celer_status pick_tokens(celer_batcher *b, int32_t n_out, celer_error *err)
{
    celer_backend *be     = b->e->be;
    const int64_t  nv     = b->e->model.hp.n_vocab;
    bool           greedy = true, on_backend = be->ops->sample != NULL;
    for (int32_t i = 0; i < n_out; i++) {
        const celer_sampling *sp = &b->out_req[i]->p.sampling;
        bool                  g  = celer_sampling_is_argmax(sp) && !b->out_req[i]->p.on_token;
        greedy &= g;
        on_backend &= g || (celer_sampling_on_backend(sp) && !b->out_req[i]->p.on_token);
    }
    if (greedy) return be->ops->argmax(be, b->acts.logits, n_out, nv, b->picked, err);
    if (on_backend) {
        for (int32_t i = 0; i < n_out; i++) {
            celer_request *r = b->out_req[i];
            b->draws[i] = celer_sampling_is_argmax(&r->p.sampling) ? (celer_draw){0} : celer_sampler_next_draw(&r->out.sm);
        }
        if (be->ops->sample(be, b->acts.logits, n_out, nv, b->draws, b->picked, err)) return err->code;
        for (int32_t i = 0; i < n_out; i++) {
            if (b->picked[i] >= 0) continue;
            float *row = b->logits + i * nv;
            if (be->ops->read(be, b->acts.logits + i * nv, row, (size_t)nv * sizeof *row, err)) return err->code;
            b->picked[i] = celer_sampler_draw(&b->out_req[i]->out.sm, row, &b->draws[i]);
        }
        return CELER_OK;
    }
    if (be->ops->read(be, b->acts.logits, b->logits, (size_t)(n_out * nv) * sizeof(float), err)) return err->code;
    for (int32_t i = 0; i < n_out; i++) {
        celer_request *r    = b->out_req[i];
        float         *work = b->logits + i * nv; /* a copy when the raw values are reported too */
        if (r->p.on_token) work = memcpy(b->scratch, work, (size_t)nv * sizeof *work);
        b->picked[i] = celer_sampler_sample(&r->out.sm, work, r->tokens, (size_t)r->n_tokens);
    }
    return CELER_OK;
}

/* Each running request's cache rows reach the tokens its steps have run. */
static void cache_run(celer_batcher *b)
{
    for (int32_t s = 0; s < b->n_slots; s++)
        if (b->slots[s] && b->kv.seq_len[s] < b->slots[s]->n_run) b->kv.seq_len[s] = b->slots[s]->n_run;
}

/* The step's failure: every running request fails with it. */
static celer_status fail_all(celer_batcher *b, celer_error *err)
{
    for (int32_t s = 0; s < b->n_slots; s++)
        if (b->slots[s]) finish(b, b->slots[s], "stop", err);
    return err->code;
}

/* Whether the next step may be queued on the picks of the step just run (rows out_req[0 ..
 * n_out), or of the kept rows pend when n_out < 0), kept on the backend: a steady decode — every
 * running request one of those rows and decoding, each greedy without log-probabilities, none
 * cancelled, no request waiting while a slot is free — on a backend that keeps argmax ids, with
 * an embedding it reads them from. */
static bool steady(celer_batcher *b, int32_t n_out)
{
    const celer_engine      *e  = b->e;
    const celer_backend_ops *op = e->be->ops;
    if (!op->argmax_keep || !op->argmax_take || (e->model.embd_mlx && !e->model.embd_kept) ||
        e->model.tok_embd.rows < e->model.hp.n_vocab)
        return false;
    const int32_t n       = n_out < 0 ? b->n_pend : n_out;
    int32_t       running = 0;
    for (int32_t s = 0; s < b->n_slots; s++) running += b->slots[s] != NULL;
    if (n != running || n < 1) return false;
    for (int32_t i = 0; i < n; i++) {
        const celer_request *r = n_out < 0 ? b->slots[b->pend_slot[i]] : b->out_req[i];
        if (!r || (n_out < 0 && r->id != b->pend_id[i]) || r->cancel || r->p.on_token ||
            !celer_sampling_is_argmax(&r->p.sampling) || r->n_run != r->n_tokens)
            return false;
    }
    pthread_mutex_lock(&b->mu);
    const bool waiting = b->head != NULL && running < b->n_slots;
    pthread_mutex_unlock(&b->mu);
    return !waiting;
}

/* A step whose inputs are the kept picks of the step before (rows pend): queued where the batch is
 * still steady, its own picks kept in turn; then the kept ones taken and handed to their requests
 * while it runs. A row whose request ended or was cancelled meanwhile drops its pick; where the
 * batch is no longer steady nothing is queued, and the next step goes as usual. A step queued on
 * a pick that ends its request runs for nothing: its row's keys and values land in blocks freed
 * with the request, before any later step can reuse them. */
static celer_status step_ahead(celer_batcher *b, celer_error *err)
{
    celer_engine *e     = b->e;
    const int32_t n     = b->n_pend;
    const bool    again = steady(b, -1);
    if (again) {
        for (int32_t i = 0; i < n; i++) { /* each pick goes to position n_tokens of its request */
            celer_request *r = b->slots[b->pend_slot[i]];
            b->pos[i] = r->n_tokens, b->seq[i] = r->slot, b->out_idx[i] = i, b->out_req[i] = r;
            r->n_run = r->n_tokens + 1;
            if (b->kv.seq_len[r->slot] < r->n_run) b->kv.seq_len[r->slot] = r->n_run;
        }
        celer_batch bt = {.n_tokens = n, .pos = b->pos, .seq = b->seq};
        if (celer_model_forward(&e->model, e->be, &b->kv, &bt, NULL, b->out_idx, n, &b->acts, err)) {
            celer_error ignored;
            (void)e->be->ops->argmax_take(e->be, b->picked, &ignored);
            b->n_pend = 0;
            return fail_all(b, err);
        }
    }
    /* the rows kept next are these same rows (steady): pend_slot and pend_id stand */
    celer_status st = again ? e->be->ops->argmax_keep(e->be, b->acts.logits, n, e->model.hp.n_vocab, err) : CELER_OK;
    b->n_pend       = again && !st ? n : 0;
    celer_error  te;
    celer_status ts = e->be->ops->argmax_take(e->be, b->picked, st ? &te : err); /* the old set, always */
    if (st || ts) { /* every set the backend still keeps taken: it may serve others */
        celer_error ignored;
        if (b->n_pend) (void)e->be->ops->argmax_take(e->be, b->picked, &ignored);
        b->n_pend = 0;
        return fail_all(b, err);
    }
    for (int32_t i = 0; i < n; i++) {
        celer_request *r = b->slots[b->pend_slot[i]];
        if (r && r->id == b->pend_id[i] && !r->cancel) take_token(b, r, NULL, b->picked[i]); /* admit ends a cancelled one */
    }
    return CELER_OK;
}

celer_status celer_batcher_step(celer_batcher *b, bool *busy, celer_error *err)
{
    *busy = false;
    if (b->n_pend) {
        *busy = true;
        return step_ahead(b, err);
    }
    if (admit(b, err)) return err->code;
    /* the batch: each decoding sequence's next token, then prompt chunks in slot order */
    int32_t n = 0, n_out = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int32_t s = 0; s < b->n_slots; s++) {
            celer_request *r = b->slots[s];
            if (!r) continue;
            bool decoding = r->n_run >= r->n_prompt;
            if (decoding != (pass == 0)) continue;
            int32_t k = r->n_tokens - r->n_run;
            if (k > b->step_tokens - n) k = b->step_tokens - n;
            if (k <= 0) continue;
            for (int32_t i = 0; i < k; i++) {
                b->ids[n + i] = r->tokens[r->n_run + i];
                b->pos[n + i] = r->n_run + i;
                b->seq[n + i] = s;
            }
            n += k;
            r->n_run += k;
            if (r->n_run == r->n_tokens) b->out_idx[n_out] = n - 1, b->out_req[n_out++] = r;
        }
    if (!n) return CELER_OK; /* nothing runs, so nothing waits: an empty pool admits any request */
    *busy = true;
    celer_engine *e  = b->e;
    celer_batch   bt = {.n_tokens = n, .pos = b->pos, .seq = b->seq};
    celer_status  st = celer_model_forward(&e->model, e->be, &b->kv, &bt, b->ids, b->out_idx, n_out, &b->acts, err);
    int64_t       nv = e->model.hp.n_vocab;
    if (!st && n_out > 0 && steady(b, n_out)) { /* the picks kept, the next step queued on them (step_ahead) */
        if (e->be->ops->argmax_keep(e->be, b->acts.logits, n_out, nv, err)) return fail_all(b, err);
        for (int32_t i = 0; i < n_out; i++) b->pend_slot[i] = b->out_req[i]->slot, b->pend_id[i] = b->out_req[i]->id;
        b->n_pend = n_out;
        cache_run(b);
        return CELER_OK;
    }
    if (!st) st = pick_tokens(b, n_out, err);
    if (st) return fail_all(b, err); /* the step failed: every running request fails with it */
    cache_run(b);
    for (int32_t i = 0; i < n_out; i++)
        take_token(b, b->out_req[i], b->logits + i * nv, b->picked[i]);
    return CELER_OK;
}
