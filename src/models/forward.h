/* One forward pass of a decoder-only transformer over a batch, as a sequence of backend ops. */
#ifndef CELER_MODELS_FORWARD_H
#define CELER_MODELS_FORWARD_H

#include "models/model.h"

/* Activation buffers for up to cap tokens per step (backend memory), sized once. */
typedef struct {
    int64_t cap, cap_out;
    float  *x;      /* (cap, n_embd) residual stream */
    float  *h;      /* (cap, n_embd) normed input of a sub-layer */
    float  *q;      /* (cap, n_head · head_dim) */
    float  *k, *v;  /* (cap, n_kv · head_dim) */
    float  *att;    /* (cap, n_head · head_dim) */
    float  *o;      /* (cap, n_embd) sub-layer output */
    float  *gate;   /* (cap, n_ff) */
    float  *up;     /* (cap, n_ff) */
    float  *last;   /* (cap_out, n_embd) rows that produce logits */
    float  *logits; /* (cap_out, n_vocab) */
    /* mixture of experts */
    float   *router; /* (cap, n_expert) router logits */
    int32_t *ids;    /* (cap, n_expert_used) chosen experts, most probable first */
    float   *ew;     /* (cap, n_expert_used) their weights */
    float   *sgate;  /* (cap) the shared expert's gate logit */
    int32_t *trace;  /* host (cap, MoE layers, n_expert_used): celer_acts_set_router_trace; NULL: off */
} celer_acts;

celer_status celer_acts_init(celer_acts *a, const celer_model *m, celer_backend *be, int64_t cap, int64_t cap_out,
                             celer_error *err);
void         celer_acts_free(celer_acts *a, celer_backend *be);
/* Bytes celer_acts_init allocates, for the memory planner. */
uint64_t     celer_acts_bytes(const celer_hparams *hp, int64_t cap, int64_t cap_out);

/* Routers' choices, for tests against a reference's (tests/tools/logits_dump --router). */
#define CELER_ROUTER_TRACE 1
/* The indices of m's mixture-of-experts layers into layers (up to cap; layers may be NULL);
 * returns how many there are. */
int32_t      celer_model_moe_layers(const celer_model *m, int32_t *layers, int32_t cap);
/* From the next forward on, every forward writes, for each token i of its batch and the j-th MoE
 * layer, the experts the router chose, ascending, to experts[(i · n_moe + j) · n_expert_used …];
 * experts (a->cap, n_moe, n_expert_used) is host memory the caller owns; NULL stops it.
 * CELER_ERR_UNSUPPORTED (naming the architecture) when m has no MoE layer. */
celer_status celer_acts_set_router_trace(celer_acts *a, const celer_model *m, int32_t *experts, celer_error *err);

/* Runs b (ids: its tokens; NULL, one token: the one the backend kept, argmax_keep) through the
 * model: writes every token's keys and values into kv and leaves in a->logits the logits of the
 * n_out tokens listed in out_idx (indices into the batch). */
celer_status celer_model_forward(const celer_model *m, celer_backend *be, celer_kv_cache *kv, const celer_batch *b,
                                 const int32_t *ids, const int32_t *out_idx, int64_t n_out, celer_acts *a,
                                 celer_error *err);

#endif
