/* The decoder forward pass shared by llama, qwen2, qwen3, gemma3 and the Qwen MoE models;
 * celer_arch switches the differences (biases, q/k norms, sandwich norms, embedding scale,
 * activation, sliding window, experts in place of the dense FFN). */
#include "models/forward.h"

#include "backends/ports.h"
#include "core/error.h"
#include "quant/half.h"

#include <math.h>
#include <string.h>

#define WIDTHS(hp)                                                                                                  \
    int64_t d = (hp)->n_embd, nq = (hp)->n_head * (hp)->head_dim_k, nk = (hp)->n_head_kv * (hp)->head_dim_k,        \
            nv = (hp)->n_head_kv * (hp)->head_dim_v, na = (hp)->n_head * (hp)->head_dim_v,                          \
            ff = (hp)->n_ff > (hp)->n_ff_shexp ? (hp)->n_ff : (hp)->n_ff_shexp

uint64_t celer_acts_bytes(const celer_hparams *hp, int64_t cap, int64_t cap_out)
{
    WIDTHS(hp);
    (void)nv;
    /* MoE: router logits, the chosen ids and weights (4 bytes each), the shared expert's gate */
    uint64_t per_token = (uint64_t)(3 * d + nq + 2 * nk + na + 2 * ff + hp->n_expert + 2 * hp->n_expert_used + 1);
    return ((uint64_t)cap * per_token + (uint64_t)cap_out * (uint64_t)(d + hp->n_vocab)) * sizeof(float);
}

celer_status celer_acts_init(celer_acts *a, const celer_model *m, celer_backend *be, int64_t cap, int64_t cap_out,
                             celer_error *err)
{
    memset(a, 0, sizeof *a);
    const celer_hparams *hp = &m->hp;
    WIDTHS(hp);
    struct {
        float **p;
        int64_t n;
    } bufs[] = {
        {&a->x, cap * d},   {&a->h, cap * d},     {&a->q, cap * nq},    {&a->k, cap * nk},
        {&a->v, cap * nv},  {&a->att, cap * na},  {&a->o, cap * d},     {&a->gate, cap * ff},
        {&a->up, cap * ff}, {&a->last, cap_out * d}, {&a->logits, cap_out * hp->n_vocab},
        {&a->router, cap * hp->n_expert}, {(float **)&a->ids, cap * hp->n_expert_used},
        {&a->ew, cap * hp->n_expert_used}, {&a->sgate, cap},
    };
    a->cap = cap, a->cap_out = cap_out;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i].n && be->ops->alloc(be, (size_t)bufs[i].n * sizeof(float), (void **)bufs[i].p, err)) {
            celer_acts_free(a, be);
            return err->code;
        }
    return CELER_OK;
}

void celer_acts_free(celer_acts *a, celer_backend *be)
{
    void *bufs[] = {a->x,    a->h,    a->q,    a->k,   a->v,     a->att, a->o,  a->gate,
                    a->up,   a->last, a->logits, a->router, a->ids, a->ew, a->sgate};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) be->ops->release(be, bufs[i]);
    memset(a, 0, sizeof *a);
}

#define TRY(call)                                                                                                   \
    do {                                                                                                            \
        celer_status st_ = (call);                                                                                  \
        if (st_) return st_;                                                                                        \
    } while (0)

/* x += o, then h = rmsnorm(x) · w: the backend's fused kernel when it has one (the port), else
 * the two ops. */
static celer_status add_norm(const celer_model *m, celer_backend *be, int64_t T, const celer_weight *w, celer_acts *a,
                             celer_error *err)
{
    celer_port_fn fn;
    celer_error   none;
    int64_t       d = m->hp.n_embd;
    if (!celer_port_select(&celer_port_add_rmsnorm, be->ops->kind, &fn, &none))
        return ((celer_add_rmsnorm_fn)fn)(be, a->x, a->o, w, T, d, m->norm_eps, a->h, err);
    TRY(be->ops->add(be, a->x, a->o, T * d, err));
    return be->ops->rmsnorm(be, a->x, w, T, d, m->norm_eps, a->h, err);
}

/* q and k normalized per head (models with qk norms) and rotated, k and v appended to the cache:
 * fused where the backend can. */
static celer_status attn_inputs(const celer_model *m, celer_backend *be, celer_kv_cache *kv, const celer_batch *b,
                                int32_t il, celer_acts *a, celer_error *err)
{
    const celer_backend_ops *op = be->ops;
    const celer_hparams     *hp = &m->hp;
    const celer_layer       *l  = &m->layers[il];
    int64_t                  T  = b->n_tokens;
    const bool               qk = m->arch->qk_norm;
    celer_port_fn            fn;
    celer_error              none;
    if (!celer_port_select(&celer_port_attn_inputs, op->kind, &fn, &none))
        return ((celer_attn_inputs_fn)fn)(be, kv, il, a->q, hp->n_head, a->k, a->v, qk ? &l->q_norm : NULL,
                                          qk ? &l->k_norm : NULL, m->norm_eps, b, hp->head_dim_k, &l->rope, err);
    if (qk) {
        TRY(op->rmsnorm(be, a->q, &l->q_norm, T * hp->n_head, hp->head_dim_k, m->norm_eps, a->q, err));
        TRY(op->rmsnorm(be, a->k, &l->k_norm, T * hp->n_head_kv, hp->head_dim_k, m->norm_eps, a->k, err));
    }
    TRY(op->rope(be, a->q, b, hp->n_head, hp->head_dim_k, &l->rope, err));
    TRY(op->rope(be, a->k, b, hp->n_head_kv, hp->head_dim_k, &l->rope, err));
    return op->kv_write(be, kv, il, a->k, a->v, b, err);
}

/* y[i] = x · w[i]ᵀ for the n weights: in one pass where the backend can. */
static celer_status matmuls(celer_backend *be, const celer_weight *const *w, int n, const float *x, int64_t T,
                            float *const *y, celer_error *err)
{
    celer_port_fn fn;
    celer_error   none;
    if (!celer_port_select(&celer_port_matmuls, be->ops->kind, &fn, &none))
        return ((celer_matmuls_fn)fn)(be, w, n, x, T, y, err);
    for (int i = 0; i < n; i++) TRY(be->ops->matmul(be, w[i], x, T, y[i], err));
    return CELER_OK;
}

/* h = act(x · gateᵀ) · (x · upᵀ) (u: the up product's room): in one pass where the backend can. */
static celer_status matmul_glu(celer_backend *be, const celer_weight *gate, const celer_weight *up, const float *x,
                               int64_t T, celer_act act, float *h, float *u, celer_error *err)
{
    celer_port_fn fn;
    celer_error   none;
    if (!celer_port_select(&celer_port_matmul_glu, be->ops->kind, &fn, &none))
        return ((celer_matmul_glu_fn)fn)(be, gate, up, x, T, act, h, u, err);
    const celer_weight *w[2] = {gate, up};
    float *const        y[2] = {h, u};
    TRY(matmuls(be, w, 2, x, T, y, err));
    return be->ops->glu(be, h, u, T * gate->rows, act, err);
}

/* A sub-layer's input: x += o first when the sub-layer before left its output there (pend),
 * then h = rmsnorm(x) · norm and the n products y[i] = h · w[i]ᵀ (none: h only). */
static celer_status norm_matmuls(const celer_model *m, celer_backend *be, int64_t T, const celer_weight *norm, bool pend,
                                 const celer_weight *const *w, int n, float *const *y, celer_acts *a, celer_error *err)
{
    if (pend) TRY(add_norm(m, be, T, norm, a, err));
    else TRY(be->ops->rmsnorm(be, a->x, norm, T, m->hp.n_embd, m->norm_eps, a->h, err));
    return n > 0 ? matmuls(be, w, n, a->h, T, y, err) : CELER_OK;
}

/* A sub-layer's output in · wᵀ: added to x by the product itself where the backend can (*pend
 * false), else left in o, normalized by post_norm on models with sandwich norms, for the next
 * sub-layer's norm to add (*pend true). */
static celer_status out_product(const celer_model *m, celer_backend *be, int64_t T, const celer_weight *w,
                                const float *in, const celer_weight *post_norm, celer_acts *a, bool *pend,
                                celer_error *err)
{
    celer_port_fn fn;
    celer_error   none;
    if (!post_norm && !celer_port_select(&celer_port_matmul_add, be->ops->kind, &fn, &none)) {
        *pend = false;
        return ((celer_matmul_add_fn)fn)(be, w, in, T, a->x, a->o, err);
    }
    TRY(be->ops->matmul(be, w, in, T, a->o, err));
    if (post_norm) TRY(be->ops->rmsnorm(be, a->o, post_norm, T, m->hp.n_embd, m->norm_eps, a->o, err));
    *pend = true;
    return CELER_OK;
}

/* Attention on x (pend: as norm_matmuls), its output added or pending (out_product). */
static celer_status attention_block(const celer_model *m, celer_backend *be, celer_kv_cache *kv, const celer_batch *b,
                                    int32_t il, celer_acts *a, bool *pend, celer_error *err)
{
    const celer_backend_ops *op = be->ops;
    const celer_layer       *l  = &m->layers[il];
    int64_t                  T  = b->n_tokens;
    const celer_weight *qkv[] = {&l->wq, &l->wk, &l->wv};
    float *const        out[] = {a->q, a->k, a->v};
    celer_port_fn       fn;
    celer_error         none;
    if (!l->bq.data && !l->bk.data && !l->bv.data && !m->arch->qk_norm &&
        !celer_port_select(&celer_port_qkv_inputs, op->kind, &fn, &none)) { /* the products make the inputs */
        TRY(norm_matmuls(m, be, T, &l->attn_norm, *pend, NULL, 0, NULL, a, err));
        TRY(((celer_qkv_inputs_fn)fn)(be, qkv, a->h, kv, il, b, a->q, m->hp.n_head, a->k, a->v, m->hp.head_dim_k,
                                      &l->rope, err));
    } else {
        TRY(norm_matmuls(m, be, T, &l->attn_norm, *pend, qkv, 3, out, a, err));
        if (l->bq.data) TRY(op->add_bias(be, a->q, &l->bq, T, err));
        if (l->bk.data) TRY(op->add_bias(be, a->k, &l->bk, T, err));
        if (l->bv.data) TRY(op->add_bias(be, a->v, &l->bv, T, err));
        TRY(attn_inputs(m, be, kv, b, il, a, err));
    }
    TRY(op->attention(be, a->q, kv, il, b, &l->attn, a->att, err));
    return out_product(m, be, T, &l->wo, a->att, m->arch->sandwich_norm ? &l->post_attn_norm : NULL, a, pend, err);
}

/* The trace of this step's routing at the j-th MoE layer (celer_acts_set_router_trace). */
static celer_status trace_router(const celer_model *m, celer_backend *be, int64_t T, int32_t il, celer_acts *a,
                                 celer_error *err)
{
    int32_t n_moe = celer_model_moe_layers(m, NULL, 0), j = 0, k = (int32_t)m->hp.n_expert_used;
    for (int32_t i = 0; i < il; i++) j += m->layers[i].moe.n_expert > 0;
    for (int64_t t = 0; t < T; t++) {
        int32_t *e = a->trace + (t * n_moe + j) * k;
        TRY(be->ops->read(be, a->ids + t * k, e, (size_t)k * sizeof *e, err));
        for (int32_t x = 1; x < k; x++) /* ascending */
            for (int32_t y = x; y > 0 && e[y - 1] > e[y]; y--) {
                int32_t s = e[y];
                e[y] = e[y - 1], e[y - 1] = s;
            }
    }
    return CELER_OK;
}

/* An MoE layer's input a->h = rmsnorm(x) (x += o first where pend) and each token's experts
 * (a->ids, a->ew): the norm, the router and its routing in one kernel where the backend can and
 * nothing is pending, else the norm, then the router and its routing (fused or not). */
static celer_status moe_input(const celer_model *m, celer_backend *be, int64_t T, int32_t il, bool pend, celer_acts *a,
                              celer_error *err)
{
    const celer_backend_ops *op = be->ops;
    const celer_layer       *l  = &m->layers[il];
    int64_t                  k  = m->hp.n_expert_used;
    celer_port_fn            fn;
    celer_error              none;
    if (!pend && !celer_port_select(&celer_port_norm_router, op->kind, &fn, &none))
        return ((celer_norm_router_fn)fn)(be, a->x, &l->ffn_norm, T, m->hp.n_embd, m->norm_eps, a->h, &l->router,
                                          a->router, k, m->moe_renorm, a->ids, a->ew, err);
    TRY(norm_matmuls(m, be, T, &l->ffn_norm, pend, NULL, 0, NULL, a, err));
    if (!celer_port_select(&celer_port_moe_router, op->kind, &fn, &none)) /* the router and its routing fused */
        return ((celer_moe_router_fn)fn)(be, &l->router, a->h, T, a->router, k, m->moe_renorm, a->ids, a->ew, err);
    TRY(op->matmul(be, &l->router, a->h, T, a->router, err));
    return op->moe_route(be, a->router, T, l->moe.n_expert, k, m->moe_renorm, a->ids, a->ew, err);
}

/* A mixture-of-experts FFN on the normed input a->h routed by moe_input: the router's top
 * experts, weighted, plus (qwen2moe) the shared expert scaled by its sigmoid gate; added to x by
 * the experts' own kernels where the backend can and there is no shared expert (*pend false), else
 * left in a->o (*pend true). */
static celer_status moe_block(const celer_model *m, celer_backend *be, int64_t T, int32_t il, celer_acts *a, bool *pend,
                              celer_error *err)
{
    const celer_backend_ops *op = be->ops;
    const celer_layer       *l  = &m->layers[il];
    int64_t                  d = m->hp.n_embd, k = m->hp.n_expert_used;
    celer_port_fn            fn;
    celer_error              none;
    if (a->trace) TRY(trace_router(m, be, T, il, a, err));
    *pend = true;
    if (!l->w_gate.data && !celer_port_select(&celer_port_moe_ffn_add, op->kind, &fn, &none)) {
        *pend = false;
        return ((celer_moe_ffn_add_fn)fn)(be, &l->moe, a->h, T, a->ids, a->ew, k, m->arch->act, a->x, a->o, err);
    }
    TRY(op->moe_ffn(be, &l->moe, a->h, T, a->ids, a->ew, k, m->arch->act, a->o, err));
    if (l->w_gate.data) {
        int64_t fs = l->w_gate.rows;
        const celer_weight *sg[]  = {&l->shexp_gate, &l->w_gate, &l->w_up};
        float *const        out[] = {a->sgate, a->gate, a->up};
        TRY(matmuls(be, sg, 3, a->h, T, out, err));
        TRY(op->glu(be, a->gate, a->up, T * fs, m->arch->act, err));
        TRY(op->matmul(be, &l->w_down, a->gate, T, a->h, err)); /* a->h is not needed after this */
        TRY(op->mul_sigmoid(be, a->h, a->sgate, T, d, err));
        TRY(op->add(be, a->o, a->h, T * d, err));
    }
    return CELER_OK;
}

/* The FFN on x (pend: as norm_matmuls), its output added or pending (out_product; an MoE
 * layer's as moe_block says). */
static celer_status ffn_block(const celer_model *m, celer_backend *be, int64_t T, int32_t il, celer_acts *a, bool *pend,
                              celer_error *err)
{
    const celer_layer *l = &m->layers[il];
    if (l->moe.n_expert) {
        TRY(moe_input(m, be, T, il, *pend, a, err));
        return moe_block(m, be, T, il, a, pend, err);
    }
    TRY(norm_matmuls(m, be, T, &l->ffn_norm, *pend, NULL, 0, NULL, a, err));
    TRY(matmul_glu(be, &l->w_gate, &l->w_up, a->h, T, m->arch->act, a->gate, a->up, err));
    return out_product(m, be, T, &l->w_down, a->gate, m->arch->sandwich_norm ? &l->post_ffn_norm : NULL, a, pend, err);
}

static celer_status forward_step(const celer_model *m, celer_backend *be, celer_kv_cache *kv, const celer_batch *b,
                                 const int32_t *ids, const int32_t *out_idx, int64_t n_out, celer_acts *a,
                                 celer_error *err)
{
    const celer_backend_ops *op = be->ops;
    int64_t                  T = b->n_tokens, d = m->hp.n_embd;
    if (T > a->cap || n_out > a->cap_out)
        return celer_fail(err, CELER_ERR_INVALID, "model: a step of %lld tokens (%lld with logits) exceeds the %lld (%lld) "
                          "the buffers hold", (long long)T, (long long)n_out, (long long)a->cap, (long long)a->cap_out);
    /* an MLX table's rows as mx.dequantize gives them: from the arrays as stored (host memory), or
     * where the backend holds the table and reads a kept id's row there (embd_kept), there */
    if (m->embd_mlx && ids && !(m->embd_kept && op->argmax_keep)) {
        celer_weight e = {.type = CELER_WEIGHT_MLX, .rows = m->embd_q.rows, .cols = m->embd_q.cols,
                          .mlx = m->embd_q, .mlx_data = m->embd_d};
        TRY(op->get_rows(be, &e, ids, T, a->x, err));
    } else
        TRY(op->get_rows(be, &m->tok_embd, ids, T, a->x, err));
    if (m->arch->embd_scale) /* sqrt(n_embd) in bf16, as the reference implementations round it */
        TRY(op->scale(be, a->x, T * d, celer_bf16_to_f32(celer_f32_to_bf16(sqrtf((float)d))), err));
    bool pend = false; /* a sub-layer's output waits in a->o to be added to x */
    for (int32_t il = 0; il < m->n_layers; il++) {
        TRY(attention_block(m, be, kv, b, il, a, &pend, err));
        TRY(ffn_block(m, be, T, il, a, &pend, err));
    }
    if (pend) TRY(op->add(be, a->x, a->o, T * d, err));
    bool run = true; /* the rows that give logits follow one another in x (a decode step's) */
    for (int64_t i = 0; i < n_out; i++) {
        if (out_idx[i] < 0 || out_idx[i] >= T)
            return celer_fail(err, CELER_ERR_INVALID, "model: logits asked for token %d of a %lld-token step", out_idx[i],
                              (long long)T);
        run &= out_idx[i] == out_idx[0] + i;
    }
    /* normalized from x into last where they follow one another: no copy, and a norm whose
     * output is not its input (the GPU's sliced kernel: 2.5 us where the in-place one took 4.8
     * for Qwen3-0.6B's row on the H200); else gathered into last and normalized there */
    if (run && n_out > 0)
        TRY(op->rmsnorm(be, a->x + (int64_t)out_idx[0] * d, &m->output_norm, n_out, d, m->norm_eps, a->last, err));
    else {
        for (int64_t i = 0; i < n_out; i++)
            TRY(op->copy(be, a->last + i * d, a->x + (int64_t)out_idx[i] * d, (size_t)d * sizeof(float), err));
        TRY(op->rmsnorm(be, a->last, &m->output_norm, n_out, d, m->norm_eps, a->last, err));
    }
    return op->matmul(be, &m->output, a->last, n_out, a->logits, err);
}

/* A step's shape for the backend's step graphs: what fixes its sequence of ops and buffers
 * (the model, the cache, the activations, the token count, whether its ids are the backend's
 * kept one (their rows read from another buffer) and which rows give logits). */
static uint64_t step_key(const celer_model *m, const celer_kv_cache *kv, const celer_acts *a, int64_t T, bool kept,
                         const int32_t *out_idx, int64_t n_out)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the words */
    uint64_t words[] = {(uint64_t)(uintptr_t)m, (uint64_t)(uintptr_t)kv, (uint64_t)(uintptr_t)a->x, (uint64_t)T,
                        (uint64_t)kept, (uint64_t)n_out};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) h = (h ^ words[i]) * 1099511628211ull;
    for (int64_t i = 0; i < n_out; i++) h = (h ^ (uint64_t)(uint32_t)out_idx[i]) * 1099511628211ull;
    return h;
}

celer_status celer_model_forward(const celer_model *m, celer_backend *be, celer_kv_cache *kv, const celer_batch *b,
                                 const int32_t *ids, const int32_t *out_idx, int64_t n_out, celer_acts *a,
                                 celer_error *err)
{
    const celer_backend_ops *op = be->ops;
    if (!op->step_begin || a->trace) /* a traced step reads the routing mid-step */
        return forward_step(m, be, kv, b, ids, out_idx, n_out, a, err);
    uint64_t key = step_key(m, kv, a, b->n_tokens, !ids, out_idx, n_out);
    for (int pass = 0; pass < 2; pass++) { /* a second pass when the backend could not record the step */
        bool         redo = false;
        celer_error  end_err;
        TRY(op->step_begin(be, key, err));
        celer_status st = forward_step(m, be, kv, b, ids, out_idx, n_out, a, err);
        celer_status se = op->step_end(be, st == CELER_OK, &redo, st ? &end_err : err);
        if (st || se || !redo) return st ? st : se;
    }
    return celer_fail(err, CELER_ERR_DEVICE, "model: the backend could not run a step");
}

int32_t celer_model_moe_layers(const celer_model *m, int32_t *layers, int32_t cap)
{
    int32_t n = 0;
    for (int32_t il = 0; il < m->n_layers; il++)
        if (m->layers[il].moe.n_expert) {
            if (layers && n < cap) layers[n] = il;
            n++;
        }
    return n;
}

celer_status celer_acts_set_router_trace(celer_acts *a, const celer_model *m, int32_t *experts, celer_error *err)
{
    if (experts && !celer_model_moe_layers(m, NULL, 0))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "model: architecture '%s' has no mixture-of-experts layer, so no "
                          "router to trace", m->arch->name);
    a->trace = experts;
    return CELER_OK;
}
