/* The engine: a model on a backend with its KV cache, activation buffers and one interactive
 * sequence. Generation prefills the prompt in chunks, then decodes token by token, streaming
 * text through the detokenizer and stopping on end-of-generation tokens, stop strings or the
 * length limit. Everything the decode loop touches is allocated before it starts. */
#include "core/error.h"
#include "models/forward.h"
#include "models/model_file.h"
#include "runtime/kv_cache.h"
#include "runtime/token_out.h"
#include "runtime/engine_impl.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool celer_engine_is_eog(const celer_engine *e, int32_t id)
{
    for (int i = 0; i < e->n_eog; i++)
        if (e->eog[i] == id) return true;
    return false;
}

/* End of generation: EOS and the end-of-turn / end-of-message ids the metadata names, then the
 * end-of-turn control tokens of the chat formats celer knows (files converted before those keys
 * existed name only EOS, e.g. Gemma's <eos> while its chats end with <end_of_turn>). */
static void find_eog(celer_engine *e)
{
    static const char *const names[] = {"<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|end|>", "<|endoftext|>"};
    const celer_tokenizer   *t       = e->tok;
    int32_t                  ids[3]  = {t->eos_id, t->eot_id, t->eom_id};
    for (int i = 0; i < 3; i++)
        if (ids[i] >= 0 && !celer_engine_is_eog(e, ids[i])) e->eog[e->n_eog++] = ids[i];
    for (size_t i = 0; i < sizeof names / sizeof names[0] && e->n_eog < 8; i++)
        for (uint32_t k = 0; k < t->n_added; k++)
            if (t->added[k].special && t->added[k].len == strlen(names[i]) &&
                !memcmp(t->added[k].text, names[i], t->added[k].len) && !celer_engine_is_eog(e, t->added[k].id))
                e->eog[e->n_eog++] = t->added[k].id;
}


/* The most columns a weight of the model has: the widest input of a product. */
static int64_t widest_input(const celer_hparams *hp)
{
    int64_t w = hp->n_embd > hp->n_ff ? hp->n_embd : hp->n_ff;
    return w > hp->n_head * hp->head_dim_v ? w : hp->n_head * hp->head_dim_v;
}

/* Refuses, with the numbers and the flag to change, a model that does not fit in the memory the
 * backend can allocate now (host MemAvailable on the CPU, where the weights are mapped but every
 * page is read each token; on a GPU the device's allocatable memory). */
static celer_status check_memory(const celer_engine *e, const celer_memory_estimate *est, int64_t n_ctx,
                                 celer_error *err)
{
    const celer_memory_estimate m = *est;
    uint64_t              avail = 0, total = 0;
    if (e->be->ops->memory(e->be, &avail, &total, err)) return err->code;
    if (!avail || m.total <= avail) return CELER_OK;
    const double gib = 1024.0 * 1024.0 * 1024.0;
    return celer_fail(err, CELER_ERR_INVALID, /* the fix is a flag: bad input, exit 2 */
                      "engine: the model needs %.2f GiB (weights %.2f + KV cache %.2f at --ctx %lld + scratch %.2f) but "
                      "%.2f GiB are available on the %s backend; lower --ctx or use a smaller model",
                      (double)m.total / gib, (double)m.weights / gib, (double)m.kv_cache / gib, (long long)n_ctx,
                      (double)m.scratch / gib, (double)avail / gib, e->be->ops->name);
}

void celer_engine_free(celer_engine *e)
{
    if (!e) return;
    if (e->be) {
        celer_acts_free(&e->acts, e->be);
        celer_kv_cache_free(&e->kv, e->be);
    }
    celer_model_free(&e->model);
    celer_backend_destroy(e->be);
    celer_tokenizer_free(e->tok);
    celer_model_file_close(e->mf);
    free(e->tokens);
    free(e->pos);
    free(e->seq);
    free(e->logits);
    free(e);
}

celer_status celer_engine_create(celer_engine **out, const char *model_path, const celer_engine_config *cfg,
                                 celer_error *err)
{
    celer_error local;
    if (!err) err = &local;
    *out            = NULL;
    celer_engine *e = calloc(1, sizeof *e);
    if (!e) return celer_fail(err, CELER_ERR_OOM, "engine: out of memory");
    celer_backend_config bc = {.n_threads = cfg ? cfg->n_threads : 0};
    celer_status         st = celer_model_file_open(&e->mf, model_path, err);
    if (!st) st = celer_tokenizer_load(&e->tok, e->mf, err);
    /* before the weights load: a load that does not fit would push the host into swap or the
     * OOM killer (or fail on the device half way), and what it took would make the check itself
     * fail a model that fits */
    int64_t               n_ctx = 0;
    celer_memory_estimate mem   = {0};
    if (!st) {
        n_ctx = cfg && cfg->n_ctx > 0 ? cfg->n_ctx : celer_model_file_default_ctx(e->mf);
        if (n_ctx > (int64_t)1 << 24)
            st = celer_fail(err, CELER_ERR_INVALID, "engine: a context of %lld tokens is more than celer supports (16M)",
                            (long long)n_ctx);
    }
    if (!st) {
        celer_model_file_estimate_memory(e->mf, n_ctx, &mem);
        bc.upload_total = mem.weights; /* the GPU's upload progress line */
        bc.routed       = celer_model_file_hparams(e->mf)->n_expert > 0;
        st              = celer_backend_create(&e->be, cfg ? cfg->backend : NULL, &bc, err);
    }
    if (!st && e->be->ops->kv_elem_bytes) { /* the estimate counts f32 keys and values; a backend may keep f16 */
        const uint64_t kv = mem.kv_cache / sizeof(float) * (uint64_t)e->be->ops->kv_elem_bytes(e->be);
        mem.total         = mem.total - mem.kv_cache + kv;
        mem.kv_cache      = kv;
    }
    if (!st && e->be->ops->own_scratch) { /* the CUDA build's BLAS path: its f16 copies and workspace */
        const uint64_t own = e->be->ops->own_scratch(e->be, n_ctx < PREFILL_CHUNK ? n_ctx : PREFILL_CHUNK,
                                                     widest_input(celer_model_file_hparams(e->mf)));
        mem.scratch += own, mem.total += own;
    }
    if (!st && e->be->ops->note_plan) e->be->ops->note_plan(e->be, mem.total);
    if (!st) st = check_memory(e, &mem, n_ctx, err);
    if (!st) st = celer_model_load(&e->model, e->mf, e->be, err);
    if (!st && celer_tokenizer_n_vocab(e->tok) > e->model.hp.n_vocab) /* ids past the table: refuse now */
        st = celer_fail(err, CELER_ERR_FORMAT, "%s: the tokenizer has %d tokens but the embedding table %lld rows; the "
                        "tokenizer and the weights do not belong together", model_path, celer_tokenizer_n_vocab(e->tok),
                        (long long)e->model.hp.n_vocab);
    if (st) {
        celer_engine_free(e);
        return st;
    }
    const celer_hparams *hp = &e->model.hp;
    e->n_ctx                = n_ctx;
    int32_t n_blocks        = (int32_t)((n_ctx + CELER_KV_BLOCK - 1) / CELER_KV_BLOCK);
    if (!st)
        st = celer_kv_cache_init(&e->kv, e->be, e->model.n_layers, hp->n_head_kv, hp->head_dim_k, hp->head_dim_v, 1,
                                 n_ctx, n_blocks, err);
    if (!st) st = celer_acts_init(&e->acts, &e->model, e->be, PREFILL_CHUNK, 1, err);
    if (!st) {
        e->tokens = malloc((size_t)n_ctx * sizeof *e->tokens);
        e->pos    = malloc(PREFILL_CHUNK * sizeof *e->pos);
        e->seq    = calloc(PREFILL_CHUNK, sizeof *e->seq);
        e->logits = malloc((size_t)hp->n_vocab * sizeof *e->logits);
        if (!e->tokens || !e->pos || !e->seq || !e->logits) st = celer_fail(err, CELER_ERR_OOM, "engine: out of memory");
    }
    if (st) {
        celer_engine_free(e);
        return st;
    }
    e->n_threads = e->be->ops->n_threads(e->be);
    find_eog(e);
    *out = e;
    return CELER_OK;
}

void celer_engine_reset(celer_engine *e)
{
    celer_kv_cache_truncate(&e->kv, 0, 0);
    e->n_tokens = 0;
}

const celer_model_file *celer_engine_model_file(const celer_engine *e) { return e->mf; }
const celer_tokenizer  *celer_engine_tokenizer(const celer_engine *e) { return e->tok; }
const char             *celer_engine_backend_name(const celer_engine *e) { return e->be->ops->name; }
int64_t                 celer_engine_ctx(const celer_engine *e) { return e->n_ctx; }
int                     celer_engine_threads(const celer_engine *e) { return e->n_threads; }
const char             *celer_engine_load_note(const celer_engine *e) { return e->model.load_note; }

/* Every weight is read once per token but the embedding table (one row, unless it is the tied
 * output) and a MoE layer's experts (n_expert_used of n_expert). */
uint64_t celer_engine_weight_bytes_per_token(const celer_engine *e)
{
    const celer_hparams *hp    = &e->model.hp;
    double               total = 0, embd = 0;
    bool                 output = false;
    for (uint64_t i = 0; i < celer_model_file_n_tensors(e->mf); i++) {
        const celer_tensor_desc *t = celer_model_file_tensor(e->mf, i);
        double                   b = (double)t->n_bytes;
        if (strstr(t->name, "_exps.") || strstr(t->name, ".switch_mlp.") || strstr(t->name, ".experts."))
            b = hp->n_expert > 0 ? b * (double)hp->n_expert_used / (double)hp->n_expert : b;
        total += b;
        if (!strcmp(t->name, "token_embd.weight") || !strncmp(t->name, "model.embed_tokens.", 19)) embd += b;
        if (!strcmp(t->name, "output.weight") || !strncmp(t->name, "lm_head.", 8)) output = true;
    }
    return (uint64_t)(output ? total - embd : total);
}

uint64_t celer_engine_kv_bytes_per_token(const celer_engine *e, int64_t ctx)
{
    const celer_kv_cache *kv  = &e->kv;
    const double          row = (double)kv->n_kv_heads * (double)(kv->head_dim_k + kv->head_dim_v) * kv->elem_bytes;
    double                total = 0;
    for (int32_t il = 0; il < e->model.n_layers; il++) {
        const int64_t w = e->model.layers[il].attn.window;
        total += (double)(w > 0 && w < ctx ? w : ctx) * row;
    }
    return (uint64_t)total;
}

celer_status celer_engine_copy_bandwidth(celer_engine *e, size_t bytes, int reps, double *bytes_per_s,
                                         celer_error *err)
{
    const celer_backend_ops *op = e->be->ops;
    void                    *a = NULL, *b = NULL;
    *bytes_per_s               = 0;
    celer_status st            = op->alloc(e->be, bytes, &a, err);
    if (!st) st = op->alloc(e->be, bytes, &b, err);
    /* First touch of both, outside the timing: a buffer never written reads as the kernel's one
     * zero page, from cache, and the first timed copy then ran at twice the memory's speed (the
     * CPU's "copy bandwidth" read 89 GB/s on a 2-core VM whose memcpy moves 40). */
    if (!st) st = op->copy(e->be, b, a, bytes, err);
    if (!st) st = op->copy(e->be, a, b, bytes, err);
    for (int r = 0; r < reps && !st; r++) {
        double t0 = now();
        float  probe; /* a read waits for the copy on a backend that runs asynchronously */
        st = op->copy(e->be, r % 2 ? a : b, r % 2 ? b : a, bytes, err);
        if (!st) st = op->read(e->be, r % 2 ? a : b, &probe, sizeof probe, err);
        double dt = now() - t0;
        if (!st && dt > 0 && 2.0 * (double)bytes / dt > *bytes_per_s) *bytes_per_s = 2.0 * (double)bytes / dt;
    }
    if (a) op->release(e->be, a);
    if (b) op->release(e->be, b);
    return st;
}

/* Runs n tokens from position start; the last one's logits stay on the backend (e->acts.logits).
 * ids NULL (n 1): the token the backend kept (argmax_keep). */
static celer_status run_tokens(celer_engine *e, const int32_t *ids, int32_t start, int32_t n, celer_error *err)
{
    for (int32_t done = 0; done < n;) {
        int32_t k = n - done < PREFILL_CHUNK ? n - done : PREFILL_CHUNK;
        for (int32_t i = 0; i < k; i++) e->pos[i] = start + done + i;
        if (celer_kv_cache_reserve(&e->kv, 0, start + done + k, err)) return err->code;
        celer_batch b    = {.n_tokens = k, .pos = e->pos, .seq = e->seq};
        int32_t     last = k - 1;
        if (celer_model_forward(&e->model, e->be, &e->kv, &b, ids ? ids + done : NULL, &last, 1, &e->acts, err))
            return err->code;
        done += k;
    }
    return CELER_OK;
}

static celer_status read_logits(celer_engine *e, celer_error *err)
{
    return e->be->ops->read(e->be, e->acts.logits, e->logits, (size_t)e->model.hp.n_vocab * sizeof(float), err);
}

/* The next token from the last run token's logits: a greedy draw is the backend's argmax, a
 * sampled one its sample op where that decides it (one id leaves the device); else the logits
 * are read into e->logits and drawn here, with the same generator number. */
static celer_status next_token(celer_engine *e, celer_sampler *sm, int32_t *id, celer_error *err)
{
    const celer_backend_ops *op = e->be->ops;
    const int64_t            nv = e->model.hp.n_vocab;
    if (celer_sampling_is_argmax(&sm->p)) return op->argmax(e->be, e->acts.logits, 1, nv, id, err);
    if (op->sample && celer_sampling_on_backend(&sm->p)) {
        celer_draw d = celer_sampler_next_draw(sm);
        if (op->sample(e->be, e->acts.logits, 1, nv, &d, id, err)) return err->code;
        if (*id >= 0) return CELER_OK;
        if (read_logits(e, err)) return err->code;
        *id = celer_sampler_draw(sm, e->logits, &d);
        return CELER_OK;
    }
    if (read_logits(e, err)) return err->code;
    *id = celer_sampler_sample(sm, e->logits, e->tokens, (size_t)e->n_tokens);
    return CELER_OK;
}

/* Decode a step ahead, where the backend keeps the next step's input (argmax_keep, or
 * sample_keep for a draw it can take, celer_sampling_on_backend): each step is queued with its
 * token still on the backend, and the token before it is read and handed out while the step runs,
 * so that the host's walk of a step, the read and the text overlap the device's work instead of
 * following it. A step queued on an end of generation (a token only read after it) is run for
 * nothing and left out of the cache. Sampled draws take the generator's numbers in token order,
 * as step by step. */
typedef struct {
    bool       on, sampled;
    bool       host; /* the next step's input was drawn here (ahead_redraw), not kept */
    int        kept; /* ids the backend keeps, not yet taken */
    celer_draw d[2]; /* the kept ids' draws, oldest first (sampled) */
} ahead_q;

static ahead_q decode_ahead(const celer_engine *e, const celer_sampler *sm)
{
    const celer_backend_ops *op = e->be->ops;
    ahead_q                  a  = {.sampled = !celer_sampling_is_argmax(&sm->p)};
    const bool keeps = a.sampled ? op->sample_keep && celer_sampling_on_backend(&sm->p) : op->argmax_keep != NULL;
    a.on = keeps && op->argmax_take && (!e->model.embd_mlx || e->model.embd_kept) && /* an MLX table's rows read
                                                                                      * where it is too */
           e->model.tok_embd.rows >= e->model.hp.n_vocab; /* every id a row of the table */
    return a;
}

/* The next token's id kept from the last run's logits; a sampled one with the draw reuse, or the
 * generator's next number. */
static celer_status ahead_keep(celer_engine *e, ahead_q *a, celer_sampler *sm, const celer_draw *reuse,
                               celer_error *err)
{
    const celer_backend_ops *op = e->be->ops;
    const int64_t            nv = e->model.hp.n_vocab;
    celer_status             st;
    if (a->sampled) {
        const celer_draw d = reuse ? *reuse : celer_sampler_next_draw(sm);
        st                 = op->sample_keep(e->be, e->acts.logits, 1, nv, &d, err);
        if (!st) a->d[a->kept] = d;
    } else
        st = op->argmax_keep(e->be, e->acts.logits, 1, nv, err);
    a->kept += !st;
    return st;
}

/* The oldest kept id, and its draw (d NULL: not wanted). */
static celer_status ahead_take(celer_engine *e, ahead_q *a, int32_t *id, celer_draw *d, celer_error *err)
{
    if (d) *d = a->d[0];
    a->d[0] = a->d[1], a->kept--; /* taken, even when the wait fails (the backend's queue too) */
    return e->be->ops->argmax_take(e->be, id, err);
}

/* A sampled id the backend left to the host (-1, draw d) made here. Where a step was queued on it
 * (queued), that step is dropped — its kept id taken, its keys and values cut — and the logits d
 * was for, which it overwrote, are made again by running the token before it once more; then the
 * step on the drawn token is queued again, its next id kept with the dropped one's draw. Else the
 * next step (if any) takes the drawn id from the host (a->host). */
static celer_status ahead_redraw(celer_engine *e, ahead_q *a, celer_sampler *sm, bool queued, const celer_draw *d,
                                 int32_t *id, celer_error *err)
{
    celer_draw next;
    int32_t    unused;
    if (queued) {
        const int32_t last = e->n_tokens - 1; /* the token whose logits d draws from */
        if (ahead_take(e, a, &unused, &next, err)) return err->code;
        celer_kv_cache_truncate(&e->kv, 0, last);
        if (run_tokens(e, &e->tokens[last], last, 1, err)) return err->code;
    }
    if (read_logits(e, err)) return err->code;
    *id     = celer_sampler_draw(sm, e->logits, d);
    a->host = !queued;
    if (!queued) return CELER_OK;
    if (run_tokens(e, id, e->n_tokens, 1, err)) return err->code;
    return ahead_keep(e, a, sm, &next, err);
}

/* The oldest kept id, made on the host where the backend left it (see ahead_redraw). */
static celer_status ahead_next(celer_engine *e, ahead_q *a, celer_sampler *sm, bool queued, int32_t *id,
                               celer_error *err)
{
    celer_draw d;
    if (ahead_take(e, a, id, &d, err)) return err->code;
    return *id < 0 ? ahead_redraw(e, a, sm, queued, &d, id, err) : CELER_OK;
}

celer_status celer_engine_generate(celer_engine *e, const int32_t *prompt, size_t n_prompt, const celer_gen_params *p,
                                   celer_text_fn on_text, void *user, celer_gen_stats *stats, celer_error *err)
{
    celer_error local;
    if (!err) err = &local;
    celer_gen_stats s = {.n_prompt = (int64_t)n_prompt, .finish = "length"};
    if (!n_prompt) return celer_fail(err, CELER_ERR_INVALID, "generate: the prompt is empty");
    if ((int64_t)n_prompt >= e->n_ctx)
        return celer_fail(err, CELER_ERR_INVALID,
                          "generate: the prompt has %zu tokens but the context holds %lld; shorten it or raise --ctx",
                          n_prompt, (long long)e->n_ctx);
    for (size_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= e->model.hp.n_vocab)
            return celer_fail(err, CELER_ERR_INVALID, "generate: prompt token %d is outside the vocabulary", prompt[i]);
    /* reuse the cached prefix, but always run at least the last prompt token for its logits */
    int32_t keep = 0;
    while (keep < e->n_tokens && (size_t)keep + 1 < n_prompt && e->tokens[keep] == prompt[keep]) keep++;
    celer_kv_cache_truncate(&e->kv, 0, keep);
    memcpy(e->tokens + keep, prompt + keep, (n_prompt - (size_t)keep) * sizeof *prompt);
    e->n_tokens  = keep;
    s.n_reused   = keep;
    celer_token_out out = {0};
    if (celer_token_out_init(&out, e, p, err)) {
        celer_token_out_free(&out);
        return err->code;
    }
    ahead_q      aq    = decode_ahead(e, &out.sm);
    const bool   ahead = aq.on;
    double       t0    = now();
    celer_status st    = run_tokens(e, prompt + keep, keep, (int32_t)n_prompt - keep, err);
    e->n_tokens        = (int32_t)n_prompt;
    int32_t id    = -1;    /* the next token, picked as each run ends (the prompt's time includes it) */
    bool    unrun = false; /* the last token in e->tokens was drawn, not run */
    bool    have  = true;  /* id holds the next token (ahead: else the backend keeps it) */
    if (!st && ahead) { /* kept for the first step's input, and taken: the prompt's time waits for it */
        st = ahead_keep(e, &aq, &out.sm, NULL, err);
        if (!st) st = ahead_next(e, &aq, &out.sm, false, &id, err);
    } else if (!st)
        st = next_token(e, &out.sm, &id, err);
    s.t_prompt = now() - t0;
    double t1  = now();
    while (!st) {
        if (s.n_gen >= p->max_tokens) break;
        if (e->n_tokens >= e->n_ctx) {
            s.finish = "length";
            break;
        }
        bool more = s.n_gen + 1 < p->max_tokens; /* the token after this one is drawn */
        if (ahead) {                              /* this token's step queued before it is read */
            if (more) st = run_tokens(e, aq.host ? &id : NULL, e->n_tokens, 1, err);
            aq.host = false;
            if (more && !st) st = ahead_keep(e, &aq, &out.sm, NULL, err);
            if (!st && !have) st = ahead_next(e, &aq, &out.sm, more, &id, err);
            have = false;
            if (st) break;
        }
        if (s.n_gen == 0) s.t_first = now() - t0;
        s.n_gen++;
        const char *end;
        st = celer_token_out_take(&out, e, id, p->ignore_eos, on_text, user, &end, err);
        if (st || end) {
            s.finish = end;
            break;
        }
        e->tokens[e->n_tokens] = id;
        if (more && !ahead) st = run_tokens(e, &id, e->n_tokens, 1, err);
        e->n_tokens++;
        unrun = !more;
        if (more && !ahead && !st) st = next_token(e, &out.sm, &id, err);
    }
    while (aq.kept > 0) { /* a step queued on the last token: its id is not wanted */
        celer_error ignored;
        int32_t     unused;
        (void)ahead_take(e, &aq, &unused, NULL, &ignored);
    }
    celer_kv_cache_truncate(&e->kv, 0, e->n_tokens); /* and its keys and values neither */
    if (!st) st = celer_token_out_end(&out, on_text, user, err);
    /* the engine's tokens are those the cache holds: the last one drawn at max_tokens was never
     * run, so a later prompt that repeats it runs it (reused, its keys and values were missing) */
    if (unrun) e->n_tokens--;
    if (e->n_tokens > 0 && e->kv.seq_len[0] < e->n_tokens) e->kv.seq_len[0] = e->n_tokens;
    s.t_gen = now() - t1;
    celer_token_out_free(&out);
    if (stats) *stats = s;
    return st;
}

/* ---- teacher forcing (celer verify) ------------------------------------------------------- */

enum { EVAL_CHUNK = 64 }; /* rows of logits one forward of celer_engine_eval returns at most */

celer_status celer_engine_eval(celer_engine *e, const int32_t *ids, size_t n, size_t n_out, float *logits,
                               celer_error *err)
{
    celer_error local;
    if (!err) err = &local;
    if (!n || !n_out || n_out > n)
        return celer_fail(err, CELER_ERR_INVALID, "eval: %zu tokens and %zu rows of logits; want 1 <= rows <= tokens",
                          n, n_out);
    if ((int64_t)n > e->n_ctx)
        return celer_fail(err, CELER_ERR_INVALID, "eval: %zu tokens but the context holds %lld; raise --ctx", n,
                          (long long)e->n_ctx);
    int64_t n_vocab = e->model.hp.n_vocab;
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab)
            return celer_fail(err, CELER_ERR_INVALID, "eval: token %d is outside the vocabulary", ids[i]);
    int32_t first = (int32_t)(n - n_out), keep = 0; /* first: the position of the first row asked for */
    while (keep < e->n_tokens && keep < first && e->tokens[keep] == ids[keep]) keep++;
    celer_kv_cache_truncate(&e->kv, 0, keep);
    e->n_tokens = keep;
    celer_status st = CELER_OK;
    if (n_out == 1) { /* the engine's own buffers: one row, as generate */
        st = run_tokens(e, ids + keep, keep, (int32_t)n - keep, err);
        if (!st) st = e->be->ops->read(e->be, e->acts.logits, logits, (size_t)n_vocab * sizeof *logits, err);
    } else {
        if (keep < first) st = run_tokens(e, ids + keep, keep, first - keep, err);
        celer_acts acts = {0};
        if (!st) st = celer_acts_init(&acts, &e->model, e->be, EVAL_CHUNK, EVAL_CHUNK, err);
        int32_t out_idx[EVAL_CHUNK];
        for (int32_t done = first; !st && done < (int32_t)n;) {
            int32_t k = (int32_t)n - done < EVAL_CHUNK ? (int32_t)n - done : EVAL_CHUNK;
            for (int32_t i = 0; i < k; i++) e->pos[i] = done + i, out_idx[i] = i;
            celer_batch b = {.n_tokens = k, .pos = e->pos, .seq = e->seq};
            st = celer_kv_cache_reserve(&e->kv, 0, done + k, err);
            if (!st) st = celer_model_forward(&e->model, e->be, &e->kv, &b, ids + done, out_idx, k, &acts, err);
            if (!st)
                st = e->be->ops->read(e->be, acts.logits, logits + (size_t)(done - first) * (size_t)n_vocab,
                                      (size_t)k * (size_t)n_vocab * sizeof *logits, err);
            done += k;
        }
        celer_acts_free(&acts, e->be);
    }
    if (st) { /* what the cache holds is unknown: start over next time */
        celer_engine_reset(e);
        return st;
    }
    memcpy(e->tokens + keep, ids + keep, (n - (size_t)keep) * sizeof *ids);
    e->n_tokens = (int32_t)n;
    return CELER_OK;
}

celer_status celer_backend_probe(const char *backend, char *name, size_t cap, celer_error *err)
{
    celer_error local;
    if (!err) err = &local;
    celer_backend       *be = NULL;
    celer_backend_config bc = {.n_threads = 1};
    celer_status         st = celer_backend_create(&be, backend, &bc, err);
    if (!st && cap) snprintf(name, cap, "%s", be->ops->name);
    celer_backend_destroy(be);
    return st;
}
