/* logits_dump: celer's forward pass on token ids, for tests/reference/test_mlx_parity.py to
 * compare with the mlx-lm reference (tests/data/mlx/).
 *
 *   logits_dump MODEL.gguf --ids 1,2,3,... [--top K] [--chunk C] [--threads N]
 *       Teacher-forced: runs the ids through the model as a prefill, C tokens per forward
 *       (default 64), asking for the logits of every token, and prints one JSON line per
 *       position i: {"pos": i, "top": [[id, logit], ...]}, the K (default 2) largest logits
 *       of the next token after ids[0..i], largest first (ties: the lower id first).
 *   logits_dump MODEL.gguf --greedy N --prompt-ids 1,2,3,... [--top K] [--chunk C] [--threads N]
 *       Free-running: prefills the prompt, then generates N tokens greedily, one forward per
 *       token as decode does, with no end-of-generation stop. Prints one JSON line per
 *       generated token, {"step": s, "top": [[id, logit], ...]}, then {"greedy": [ids]}.
 *   --router (either mode; a mixture-of-experts model)
 *       Also prints, for every token a forward runs over (each prompt token, then each generated
 *       token but the last) and every MoE layer l, the experts its router chose for it, ascending:
 *       {"pos": i, "layer": l, "experts": [e, ...]}, i the token's position in prompt + generated,
 *       after that forward's other lines (tests/reference/test_moe_router.py compares them with
 *       mlx-lm's). Needs the engine's router trace (CELER_ROUTER_TRACE, models/forward.h): without
 *       it, or on a model with no MoE layer, logits_dump says so and exits 2.
 * Exit status: 0 ok, 1 usage, 2 bad input (model, ids; --router where there is no router to
 * trace), 3 runtime failure. */
#include "backends/backend.h"
#include "core/error.h"
#include "models/forward.h"
#include "models/model_file.h"
#include "runtime/kv_cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void)
{
    fprintf(stderr, "usage: logits_dump MODEL.gguf --ids ID,ID,... [--top K] [--chunk C] [--threads N] [--router]\n"
                    "       logits_dump MODEL.gguf --greedy N --prompt-ids ID,ID,... [--top K] [--chunk C] "
                    "[--threads N] [--router]\n");
    return 1;
}

static bool parse_int(const char *s, long lo, long hi, long *v)
{
    char *end;
    errno  = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi) return false;
    *v = x;
    return true;
}

/* Comma-separated ids into *ids (malloc'd); false on a malformed list. */
static bool parse_ids(const char *s, int32_t **ids, int64_t *n)
{
    int64_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    *ids = malloc((size_t)cap * sizeof **ids);
    if (!*ids) return false;
    *n = 0;
    for (const char *p = s;;) {
        char *end;
        errno  = 0;
        long x = strtol(p, &end, 10);
        if (errno || end == p || x < 0 || x > INT32_MAX || (*end && *end != ',')) return false;
        (*ids)[(*n)++] = (int32_t)x;
        if (!*end) return true;
        p = end + 1;
    }
}

/* The k largest of row (n): indices into top (k), largest first, lower index first on ties. */
static void top_k(const float *row, int64_t n, int k, int32_t *top)
{
    int m = 0;
    for (int64_t i = 0; i < n; i++) {
        if (m == k && row[i] <= row[top[k - 1]]) continue;
        int j = m < k ? m++ : k - 1;
        while (j > 0 && row[top[j - 1]] < row[i]) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = (int32_t)i;
    }
}

static void print_top(const char *key, int64_t at, const float *row, int64_t n_vocab, int k, int32_t *top)
{
    top_k(row, n_vocab, k, top);
    printf("{\"%s\": %lld, \"top\": [", key, (long long)at);
    for (int j = 0; j < k; j++) printf("%s[%d, %.9g]", j ? ", " : "", top[j], (double)row[top[j]]);
    printf("]}\n");
}

typedef struct {
    celer_model_file *mf;
    celer_backend    *be;
    celer_model       model;
    celer_kv_cache    kv;
    celer_acts        acts;
    int64_t           chunk;
    int32_t          *pos, *seq, *out_idx; /* (chunk) batch scratch */
    float            *logits;              /* (chunk, n_vocab) host copy */
    int32_t           n_moe, top_k;        /* with --router: MoE layers, experts per token */
    int32_t          *moe_layers;          /* (n_moe) their layer indices */
    int32_t          *experts;             /* (chunk, n_moe, top_k) the router trace, ascending ids */
} runner;

static void runner_free(runner *r)
{
    if (r->be) {
        celer_acts_free(&r->acts, r->be);
        celer_kv_cache_free(&r->kv, r->be);
    }
    celer_model_free(&r->model);
    celer_backend_destroy(r->be);
    celer_model_file_close(r->mf);
    free(r->pos);
    free(r->seq);
    free(r->out_idx);
    free(r->logits);
    free(r->moe_layers);
    free(r->experts);
}

static celer_status runner_init(runner *r, const char *path, int n_threads, int64_t n_ctx, celer_error *err)
{
    celer_backend_config bc = {.n_threads = n_threads};
    celer_status         st = celer_model_file_open(&r->mf, path, err);
    if (!st) st = celer_backend_create(&r->be, "cpu", &bc, err);
    if (!st) st = celer_model_load(&r->model, r->mf, r->be, err);
    if (st) return st;
    const celer_hparams *hp = &r->model.hp;
    int32_t n_blocks = (int32_t)((n_ctx + CELER_KV_BLOCK - 1) / CELER_KV_BLOCK);
    st = celer_kv_cache_init(&r->kv, r->be, r->model.n_layers, hp->n_head_kv, hp->head_dim_k, hp->head_dim_v, 1, n_ctx,
                             n_blocks, err);
    if (!st) st = celer_acts_init(&r->acts, &r->model, r->be, r->chunk, r->chunk, err);
    if (st) return st;
    r->pos     = malloc((size_t)r->chunk * sizeof *r->pos);
    r->seq     = calloc((size_t)r->chunk, sizeof *r->seq);
    r->out_idx = malloc((size_t)r->chunk * sizeof *r->out_idx);
    r->logits  = malloc((size_t)r->chunk * (size_t)hp->n_vocab * sizeof *r->logits);
    if (!r->pos || !r->seq || !r->out_idx || !r->logits)
        return celer_fail(err, CELER_ERR_OOM, "logits_dump: out of memory");
    return CELER_OK;
}

/* Asks the engine to record the router's choices of every forward into r->experts (--router).
 *
 * The engine side this needs, in models/forward.h (not there yet):
 *   #define CELER_ROUTER_TRACE 1
 *   // The layers with a mixture-of-experts FFN, in order: writes min(n, cap) layer indices to
 *   // layers (NULL when cap is 0) and returns n, 0 for a dense model.
 *   int32_t celer_model_moe_layers(const celer_model *m, int32_t *layers, int32_t cap);
 *   // Makes every later celer_model_forward with a write, for each token i of the batch (all
 *   // n_tokens, not only the out_idx rows) and the j-th MoE layer, the hp.n_expert_used experts
 *   // the router chose, ascending, to experts[(i * n_moe + j) * n_expert_used ...]. experts:
 *   // (a->cap, n_moe, n_expert_used) host memory the caller owns; NULL stops the trace.
 *   // CELER_ERR_UNSUPPORTED (naming the architecture) when m has no MoE layer.
 *   celer_status celer_acts_set_router_trace(celer_acts *a, const celer_model *m, int32_t *experts,
 *                                            celer_error *err); */
static celer_status runner_trace_router(runner *r, const char *path, celer_error *err)
{
#if defined(CELER_ROUTER_TRACE)
    r->n_moe = celer_model_moe_layers(&r->model, NULL, 0);
    r->top_k = (int32_t)r->model.hp.n_expert_used;
    if (r->n_moe <= 0 || r->top_k <= 0)
        return celer_fail(err, CELER_ERR_INVALID,
                          "logits_dump: --router: %s has no mixture-of-experts layers (architecture '%s'); "
                          "--router needs a MoE model such as qwen3moe or qwen2moe",
                          path, r->model.arch->name);
    r->moe_layers = malloc((size_t)r->n_moe * sizeof *r->moe_layers);
    r->experts    = malloc((size_t)r->chunk * (size_t)r->n_moe * (size_t)r->top_k * sizeof *r->experts);
    if (!r->moe_layers || !r->experts) return celer_fail(err, CELER_ERR_OOM, "logits_dump: out of memory");
    celer_model_moe_layers(&r->model, r->moe_layers, r->n_moe);
    return celer_acts_set_router_trace(&r->acts, &r->model, r->experts, err);
#else
    (void)r;
    return celer_fail(err, CELER_ERR_UNSUPPORTED,
                      "logits_dump: --router: no MoE support yet: this engine has no router trace "
                      "(celer_model_moe_layers, celer_acts_set_router_trace in models/forward.h), so %s "
                      "has no router choices to print; run without --router",
                      path);
#endif
}

/* The router trace of the last forward: n tokens from position start. */
static void print_router(const runner *r, int64_t start, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < r->n_moe; j++) {
            const int32_t *e = r->experts + ((int64_t)i * r->n_moe + j) * r->top_k;
            printf("{\"pos\": %lld, \"layer\": %d, \"experts\": [", (long long)(start + i), r->moe_layers[j]);
            for (int32_t t = 0; t < r->top_k; t++) printf("%s%d", t ? ", " : "", e[t]);
            printf("]}\n");
        }
}

/* Runs ids at positions [start, start + n), n <= chunk, as one forward. With all_logits every
 * token's logits land in r->logits (n rows), else only the last token's (one row). */
static celer_status runner_step(runner *r, const int32_t *ids, int32_t start, int32_t n, bool all_logits,
                                celer_error *err)
{
    for (int32_t i = 0; i < n; i++) r->pos[i] = start + i, r->out_idx[i] = i;
    int64_t n_out = all_logits ? n : 1;
    if (!all_logits) r->out_idx[0] = n - 1;
    if (celer_kv_cache_reserve(&r->kv, 0, start + n, err)) return err->code;
    celer_batch b = {.n_tokens = n, .pos = r->pos, .seq = r->seq};
    if (celer_model_forward(&r->model, r->be, &r->kv, &b, ids, r->out_idx, n_out, &r->acts, err)) return err->code;
    return r->be->ops->read(r->be, r->acts.logits, r->logits, (size_t)n_out * (size_t)r->model.hp.n_vocab * sizeof(float),
                            err);
}

int main(int argc, char **argv)
{
    const char *path = NULL, *ids_arg = NULL, *prompt_arg = NULL;
    long        top = 2, chunk = 64, threads = 0, greedy = -1;
    bool        router = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (a[0] != '-') {
            if (path) return usage();
            path = a;
            continue;
        }
        if (!strcmp(a, "--router")) {
            router = true;
            continue;
        }
        if (!v) return usage();
        i++;
        if (!strcmp(a, "--ids")) ids_arg = v;
        else if (!strcmp(a, "--prompt-ids")) prompt_arg = v;
        else if (!strcmp(a, "--top") && parse_int(v, 1, 64, &top)) continue;
        else if (!strcmp(a, "--chunk") && parse_int(v, 1, 4096, &chunk)) continue;
        else if (!strcmp(a, "--threads") && parse_int(v, 0, 1024, &threads)) continue;
        else if (!strcmp(a, "--greedy") && parse_int(v, 0, 1 << 20, &greedy)) continue;
        else return usage();
    }
    bool free_run = greedy >= 0;
    if (!path || (free_run ? !prompt_arg || ids_arg : !ids_arg || prompt_arg)) return usage();

    int32_t *ids = NULL, *gen = NULL, topi[64];
    int64_t  n   = 0;
    if (!parse_ids(free_run ? prompt_arg : ids_arg, &ids, &n) || n == 0) {
        fprintf(stderr, "logits_dump: '%s' is not a comma-separated list of token ids\n", free_run ? prompt_arg : ids_arg);
        free(ids);
        return 1;
    }
    celer_error  err = {0};
    runner       r   = {.chunk = chunk};
    int64_t      n_ctx = n + (free_run ? greedy : 0);
    celer_status st    = runner_init(&r, path, (int)threads, n_ctx, &err);
    if (!st && router) st = runner_trace_router(&r, path, &err);
    int64_t      n_vocab = st ? 0 : r.model.hp.n_vocab;
    if (!st && top > n_vocab) top = n_vocab;
    for (int64_t i = 0; !st && i < n; i++)
        if (ids[i] >= n_vocab)
            st = celer_fail(&err, CELER_ERR_INVALID, "logits_dump: token %lld is id %d, outside the %lld-token vocabulary",
                            (long long)i, ids[i], (long long)n_vocab);
    if (!st && free_run && !(gen = malloc((size_t)(greedy + 1) * sizeof *gen)))
        st = celer_fail(&err, CELER_ERR_OOM, "logits_dump: out of memory");

    /* prefill, in chunks; teacher-forced mode prints every position */
    for (int64_t done = 0; !st && done < n;) {
        int32_t k = (int32_t)(n - done < chunk ? n - done : chunk);
        st        = runner_step(&r, ids + done, (int32_t)done, k, !free_run, &err);
        for (int32_t i = 0; !st && !free_run && i < k; i++)
            print_top("pos", done + i, r.logits + (int64_t)i * n_vocab, n_vocab, (int)top, topi);
        if (!st && router) print_router(&r, done, k);
        done += k;
    }
    /* decode: one token per forward */
    for (long s = 0; !st && free_run && s < greedy; s++) {
        print_top("step", s, r.logits, n_vocab, (int)top, topi);
        gen[s] = topi[0];
        if (s + 1 < greedy) st = runner_step(&r, &gen[s], (int32_t)(n + s), 1, false, &err);
        if (!st && router && s + 1 < greedy) print_router(&r, n + s, 1);
    }
    if (!st && free_run) {
        printf("{\"greedy\": [");
        for (long s = 0; s < greedy; s++) printf("%s%d", s ? ", " : "", gen[s]);
        printf("]}\n");
    }
    if (st) fprintf(stderr, "%s\n", err.msg);
    runner_free(&r);
    free(ids);
    free(gen);
    return st ? celer_status_exit_code(st) : 0;
}
