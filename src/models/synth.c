/* celer synth: the tensors and metadata of a model family, written with random weights.
 * Tensor names and shapes follow the GGUF converters (ne[0] is the input width):
 *   token_embd.weight      (n_embd, n_vocab)         output.weight (n_embd, n_vocab), unless tied
 *   rope_freqs.weight      (head_dim/2)              llama 3 RoPE scaling only
 *   blk.N.attn_q.weight    (n_embd, n_head·hd)       attn_k/v (n_embd, n_kv·hd), attn_output (n_head·hd, n_embd)
 *   blk.N.attn_q/k/v.bias  (n_head·hd), (n_kv·hd)    qwen2
 *   blk.N.attn_q/k_norm    (hd)                      qwen3, qwen3moe, gemma3
 *   blk.N.ffn_gate/up      (n_embd, n_ff)            ffn_down (n_ff, n_embd)
 *   blk.N.ffn_gate_inp     (n_embd, n_expert)        the MoE router (qwen3moe)
 *   blk.N.ffn_gate/up_exps (n_embd, n_ff_exp, n_expert), ffn_down_exps (n_ff_exp, n_embd, n_expert)
 *   blk.N.post_attention_norm, post_ffw_norm (n_embd) gemma3 */
#include "models/synth.h"

#include "core/error.h"
#include "models/rope_scaling.h"
#include "models/synth_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { K_MATRIX, K_ROUTER, K_NORM, K_BIAS, K_ROPE_FREQS } tensor_kind;

typedef struct {
    char            name[64];
    tensor_kind     kind;
    int64_t         layer; /* -1 outside the blocks */
    uint32_t        n_dims;
    uint64_t        ne[3];
    celer_ggml_type type;
} planned;

typedef struct {
    planned *t;   /* (n) */
    size_t   n, cap;
} plan;

static celer_status add(plan *p, tensor_kind kind, int64_t layer, const char *what, uint64_t ne0, uint64_t ne1,
                        uint64_t ne2, celer_error *err)
{
    if (p->n == p->cap) {
        size_t   cap = p->cap ? p->cap * 2 : 256;
        planned *t   = realloc(p->t, cap * sizeof *t);
        if (!t) return celer_fail(err, CELER_ERR_OOM, "synth: out of memory planning tensors");
        p->t = t, p->cap = cap;
    }
    planned *t = &p->t[p->n++];
    *t         = (planned){.kind = kind, .layer = layer, .ne = {ne0, ne1, ne2}};
    t->n_dims  = ne2 ? 3 : ne1 ? 2 : 1;
    if (layer >= 0)
        snprintf(t->name, sizeof t->name, "blk.%lld.%s", (long long)layer, what);
    else
        snprintf(t->name, sizeof t->name, "%s", what);
    return CELER_OK;
}

static celer_status plan_tensors(plan *p, const celer_synth_shape *s, celer_error *err)
{
    uint64_t d = (uint64_t)s->n_embd, hd = (uint64_t)s->head_dim, nq = (uint64_t)s->n_head * hd,
             nkv = (uint64_t)s->n_head_kv * hd, ff = (uint64_t)s->n_ff, v = (uint64_t)s->n_vocab;
    bool qk_norm = strcmp(s->arch, "llama") && strcmp(s->arch, "qwen2"), gemma = !strcmp(s->arch, "gemma3");
    bool moe     = !strcmp(s->arch, "qwen3moe");
    if (add(p, K_MATRIX, -1, "token_embd.weight", d, v, 0, err)) return err->code;
    if (s->rope_factor > 0 && add(p, K_ROPE_FREQS, -1, "rope_freqs.weight", hd / 2, 0, 0, err)) return err->code;
    for (int64_t il = 0; il < s->n_layer; il++) {
        if (add(p, K_NORM, il, "attn_norm.weight", d, 0, 0, err) || add(p, K_MATRIX, il, "attn_q.weight", d, nq, 0, err) ||
            add(p, K_MATRIX, il, "attn_k.weight", d, nkv, 0, err) || add(p, K_MATRIX, il, "attn_v.weight", d, nkv, 0, err))
            return err->code;
        if (s->qkv_bias && (add(p, K_BIAS, il, "attn_q.bias", nq, 0, 0, err) || add(p, K_BIAS, il, "attn_k.bias", nkv, 0, 0, err) ||
                            add(p, K_BIAS, il, "attn_v.bias", nkv, 0, 0, err)))
            return err->code;
        if (add(p, K_MATRIX, il, "attn_output.weight", nq, d, 0, err)) return err->code;
        if (qk_norm && (add(p, K_NORM, il, "attn_q_norm.weight", hd, 0, 0, err) ||
                        add(p, K_NORM, il, "attn_k_norm.weight", hd, 0, 0, err)))
            return err->code;
        if (gemma && add(p, K_NORM, il, "post_attention_norm.weight", d, 0, 0, err)) return err->code;
        if (add(p, K_NORM, il, "ffn_norm.weight", d, 0, 0, err)) return err->code;
        if (moe) {
            uint64_t fe = (uint64_t)s->n_ff_expert, ne = (uint64_t)s->n_expert;
            if (add(p, K_ROUTER, il, "ffn_gate_inp.weight", d, ne, 0, err) ||
                add(p, K_MATRIX, il, "ffn_gate_exps.weight", d, fe, ne, err) ||
                add(p, K_MATRIX, il, "ffn_up_exps.weight", d, fe, ne, err) ||
                add(p, K_MATRIX, il, "ffn_down_exps.weight", fe, d, ne, err))
                return err->code;
        } else if (add(p, K_MATRIX, il, "ffn_gate.weight", d, ff, 0, err) ||
                   add(p, K_MATRIX, il, "ffn_up.weight", d, ff, 0, err) ||
                   add(p, K_MATRIX, il, "ffn_down.weight", ff, d, 0, err))
            return err->code;
        if (gemma && add(p, K_NORM, il, "post_ffw_norm.weight", d, 0, 0, err)) return err->code;
    }
    if (add(p, K_NORM, -1, "output_norm.weight", d, 0, 0, err)) return err->code;
    if (!s->tied && add(p, K_MATRIX, -1, "output.weight", d, v, 0, err)) return err->code;
    return CELER_OK;
}

/* The metadata llama.cpp and celer read: general.*, <arch>.* hyper-parameters, the vocabulary. */
static celer_status add_metadata(celer_gguf_writer *w, const celer_synth_shape *s, const celer_synth_type *t,
                                 uint64_t seed, celer_error *err)
{
    char desc[160], key[96];
    snprintf(desc, sizeof desc, "random weights from celer synth (seed %llu, %s): not a trained model; for speed tests",
             (unsigned long long)seed, t->name);
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", s->arch, suffix), key)
    bool kv_len = strcmp(s->arch, "llama") && strcmp(s->arch, "qwen2");
    kv_len |= s->head_dim * s->n_head != s->n_embd;
    if (celer_gguf_writer_add_str(w, "general.architecture", s->arch, err) ||
        celer_gguf_writer_add_str(w, "general.type", "model", err) ||
        celer_gguf_writer_add_str(w, "general.name", s->title, err) ||
        celer_gguf_writer_add_str(w, "general.description", desc, err) ||
        celer_gguf_writer_add_u32(w, "general.file_type", t->file_type, err) ||
        celer_gguf_writer_add_u32(w, "general.quantization_version", 2, err) ||
        celer_gguf_writer_add_u32(w, KEY("context_length"), (uint32_t)s->n_ctx, err) ||
        celer_gguf_writer_add_u32(w, KEY("embedding_length"), (uint32_t)s->n_embd, err) ||
        celer_gguf_writer_add_u32(w, KEY("block_count"), (uint32_t)s->n_layer, err) ||
        celer_gguf_writer_add_u32(w, KEY("feed_forward_length"), (uint32_t)s->n_ff, err) ||
        celer_gguf_writer_add_u32(w, KEY("attention.head_count"), (uint32_t)s->n_head, err) ||
        celer_gguf_writer_add_u32(w, KEY("attention.head_count_kv"), (uint32_t)s->n_head_kv, err) ||
        (kv_len && (celer_gguf_writer_add_u32(w, KEY("attention.key_length"), (uint32_t)s->head_dim, err) ||
                    celer_gguf_writer_add_u32(w, KEY("attention.value_length"), (uint32_t)s->head_dim, err))) ||
        celer_gguf_writer_add_f32(w, KEY("attention.layer_norm_rms_epsilon"), (float)s->norm_eps, err) ||
        celer_gguf_writer_add_f32(w, KEY("rope.freq_base"), (float)s->rope_theta, err) ||
        celer_gguf_writer_add_u32(w, KEY("rope.dimension_count"), (uint32_t)s->head_dim, err) ||
        celer_gguf_writer_add_u32(w, KEY("vocab_size"), (uint32_t)s->n_vocab, err))
        return err->code;
    if (s->sliding_window && celer_gguf_writer_add_u32(w, KEY("attention.sliding_window"), (uint32_t)s->sliding_window, err))
        return err->code;
    if (s->n_expert && (celer_gguf_writer_add_u32(w, KEY("expert_count"), (uint32_t)s->n_expert, err) ||
                        celer_gguf_writer_add_u32(w, KEY("expert_used_count"), (uint32_t)s->n_expert_used, err) ||
                        celer_gguf_writer_add_u32(w, KEY("expert_feed_forward_length"), (uint32_t)s->n_ff_expert, err)))
        return err->code;
#undef KEY
    return synth_add_vocab(w, s->n_vocab, err);
}

#define CHUNK_BYTES (8u << 20)

/* Streams one tensor's bytes in chunks of whole blocks. */
static celer_status write_tensor(celer_gguf_writer *w, const celer_synth_shape *s, const planned *t, uint64_t seed,
                                 uint8_t *buf, celer_error *err)
{
    const celer_ggml_type_info *ti = celer_ggml_type_get(t->type);
    uint64_t                    total = celer_gguf_tensor_size(t->type, t->n_dims, t->ne);
    if (t->kind == K_ROPE_FREQS) {
        celer_rope_llama3_factors((int64_t)t->ne[0] * 2, s->rope_theta, s->rope_factor, (double)s->rope_orig_ctx,
                                  s->rope_low, s->rope_high, (float *)buf);
        return celer_gguf_writer_write(w, buf, (size_t)total, err);
    }
    synth_kind kind = t->kind == K_NORM ? SYNTH_NORM : t->kind == K_BIAS ? SYNTH_BIAS : SYNTH_WEIGHT;
    synth_rng  rng;
    synth_rng_init(&rng, seed, t->name);
    uint64_t per_chunk = CHUNK_BYTES / ti->block_bytes, blocks = total / ti->block_bytes;
    for (uint64_t b = 0; b < blocks; b += per_chunk) {
        uint64_t n = blocks - b < per_chunk ? blocks - b : per_chunk;
        synth_fill(&rng, t->type, kind, buf, n);
        if (celer_gguf_writer_write(w, buf, (size_t)(n * ti->block_bytes), err)) return err->code;
    }
    return CELER_OK;
}

celer_status celer_synth_write(const celer_synth_shape *s, const celer_synth_type *t, uint64_t seed, const char *path,
                               celer_gguf_progress_fn progress, void *user, celer_synth_result *res, celer_error *err)
{
    if (res) memset(res, 0, sizeof *res);
    if (celer_synth_shape_check(s, err)) return err->code;
    celer_gguf_writer w   = {0};
    plan              p   = {0};
    uint8_t          *buf = NULL;
    celer_status      st  = celer_gguf_writer_open(&w, path, err);
    if (!st) st = plan_tensors(&p, s, err);
    if (!st) st = add_metadata(&w, s, t, seed, err);
    uint64_t n_params = 0;
    for (size_t i = 0; i < p.n && !st; i++) {
        planned *x = &p.t[i];
        x->type    = x->kind == K_MATRIX ? celer_synth_matrix_type(s, t, x->name, x->layer, x->ne[0]) : CELER_GGML_F32;
        n_params += x->ne[0] * (x->ne[1] ? x->ne[1] : 1) * (x->ne[2] ? x->ne[2] : 1);
        st = celer_gguf_writer_add_tensor(&w, x->name, x->type, x->n_dims, x->ne, err);
    }
    if (!st && !(buf = malloc(CHUNK_BYTES)))
        st = celer_fail(err, CELER_ERR_OOM, "synth: out of memory for an %u MiB write buffer", CHUNK_BYTES >> 20);
    if (!st) st = celer_gguf_writer_begin_data(&w, progress, user, err);
    for (size_t i = 0; i < p.n && !st; i++) st = write_tensor(&w, s, &p.t[i], seed, buf, err);
    uint64_t file_bytes = w.file_pos;
    if (!st) st = celer_gguf_writer_finish(&w, err);
    if (!st && res) *res = (celer_synth_result){.n_tensors = p.n, .n_params = n_params, .file_bytes = file_bytes};
    free(buf);
    free(p.t);
    celer_gguf_writer_free(&w);
    return st;
}
