/* celer_quantize_model: a Hugging Face checkpoint or a GGUF file → an MLX-format directory, as
 * mlx_lm.convert writes it (mlx-lm 0.32): the same tensors under the same names, the same
 * choice of what to quantize, the same bytes (src/quant/mlx_quantize.h is bit-identical to
 * mlx.core.quantize), shards of at most 5 GiB with an index, config.json with its
 * "quantization" block, and the tokenizer files.
 *
 * What mlx-lm quantizes: every Linear and Embedding weight whose last dimension is a multiple
 * of the group size; for these architectures, every 2-D ".weight". Everything else keeps its
 * values, cast to the output dtype.
 *
 * The directory is built under OUT.partial and renamed into place at the end, so a failed or
 * interrupted run leaves nothing that looks like a model. */
#include "models/mlx_export.h"

#include "models/model.h"

#include "core/error.h"
#include "core/json.h"
#include "core/threads.h"
#include "formats/safetensors_write.h"
#include "quant/half.h"
#include "quant/mlx_quant.h"
#include "quant/mlx_quantize.h"
#include "tokenizer/export_json.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CELER_MAX_JOB_THREADS 256
#define SHARD_BYTES ((uint64_t)5 << 30) /* mlx-lm's make_shards: 5 GiB */

/* One tensor of the output: a source tensor as is (part 0) or one of its quantized three. */
typedef enum { PART_PLAIN, PART_WEIGHT, PART_SCALES, PART_BIASES } part;

typedef struct {
    celer_st_decl decl;
    char          name[200];
    uint64_t      x;     /* the source tensor */
    part          part;
    uint64_t      bytes;
    uint32_t      shard;
} out_tensor;

typedef struct {
    const celer_model_file *mf;
    const char             *out;      /* the final directory */
    char                    tmp[4200]; /* where it is built */
    celer_xtensor          *xs;
    uint64_t                n_x;
    bool                   *quant;    /* (n_x) quantized? */
    celer_mlx_quant         q;        /* the settings (rows, cols per tensor) */
    celer_mlx_quant        *qs;       /* (n_x) each quantized tensor's: q, or its model's override */
    const uint8_t         **experts;  /* the per-expert data pointers of stacked tensors (xs point here) */
    celer_st_dtype          dtype;    /* of every float tensor written */
    out_tensor             *outs;
    uint64_t                n_out;
    uint32_t                n_shards;
    celer_pool             *pool;
    const celer_quantize_params *p;
    uint64_t                done, total;
    /* the source tensor computed last, in its output form */
    uint64_t                cached;   /* UINT64_MAX: none */
    uint8_t                *buf[4];   /* by part */
} exporter;

static const struct {
    const char         *name;
    celer_hf_quant_mode mode;
    uint32_t            bits, group;
} MODES[] = {
    {"affine", CELER_HF_QUANT_AFFINE, 4, 64},
    {"mxfp4", CELER_HF_QUANT_MXFP4, 4, 32},
    {"mxfp8", CELER_HF_QUANT_MXFP8, 8, 32},
    {"nvfp4", CELER_HF_QUANT_NVFP4, 4, 16},
};

static const struct {
    const char    *name;
    celer_st_dtype dtype;
} DTYPES[] = {{"bfloat16", CELER_ST_BF16}, {"float16", CELER_ST_F16}, {"float32", CELER_ST_F32}};

/* ---- the plan ------------------------------------------------------------------------------ */

/* model.layers.L.mlp.experts.{0..n-1}.<proj>.weight (t is expert 0's), stacked as mlx-lm's
 * sanitize stacks them: model.layers.L.mlp.switch_mlp.<proj>.weight, (n, rows, cols). */
static celer_status stack_experts(exporter *E, const celer_st_tensor *t0, unsigned layer, const char *proj,
                                  celer_error *err)
{
    const celer_safetensors_set *s = &E->mf->st;
    int64_t                      n = E->mf->hp.n_expert;
    if (n <= 0 || t0->n_dims != 2)
        return celer_fail(err, CELER_ERR_FORMAT, "quantize: %s: tensor '%s' is an expert's, but config.json has "
                          "%lld experts", s->dir, t0->name, (long long)n);
    const uint8_t **data = E->experts + (size_t)E->n_x * (size_t)n;
    for (int64_t e = 0; e < n; e++) {
        char name[256];
        snprintf(name, sizeof name, "model.layers.%u.mlp.experts.%lld.%s", layer, (long long)e, proj);
        const celer_st_tensor *t = celer_safetensors_set_find(s, name);
        if (!t || t->dtype != t0->dtype || t->n_dims != 2 || t->shape[0] != t0->shape[0] || t->shape[1] != t0->shape[1])
            return celer_fail(err, CELER_ERR_FORMAT, "quantize: %s: tensor '%s' is %s; config.json's %lld experts "
                              "need it, shaped and typed as expert 0's", s->dir, name, t ? "of another shape or dtype"
                              : "missing", (long long)n);
        data[e] = t->data;
    }
    celer_xtensor *x = &E->xs[E->n_x++];
    snprintf(x->name, sizeof x->name, "model.layers.%u.mlp.switch_mlp.%s", layer, proj);
    x->gguf_type   = -1;
    x->st_dtype    = t0->dtype;
    x->n_dims      = 3;
    x->shape[0]    = (uint64_t)n, x->shape[1] = t0->shape[0], x->shape[2] = t0->shape[1];
    x->cols        = (int64_t)t0->shape[1];
    x->rows        = n * (int64_t)t0->shape[0];
    x->experts     = data;
    x->expert_rows = (int64_t)t0->shape[0];
    return CELER_OK;
}

/* The source tensors of a Hugging Face directory, as mlx-lm's sanitize keeps them. */
static celer_status dir_tensors(exporter *E, bool tied, celer_error *err)
{
    const celer_safetensors_set *s = &E->mf->st;
    E->xs                          = calloc(s->n_tensors ? s->n_tensors : 1, sizeof *E->xs);
    /* room for every tensor to start a stack of n_expert (few do; the pointers are small) */
    size_t n_exp = E->mf->hp.n_expert > 0 ? (size_t)E->mf->hp.n_expert : 0;
    E->experts   = n_exp ? calloc(s->n_tensors * n_exp, sizeof *E->experts) : NULL;
    if (!E->xs || (n_exp && !E->experts)) return celer_fail(err, CELER_ERR_OOM, "quantize: out of memory");
    for (uint64_t i = 0; i < s->n_tensors; i++) {
        const celer_st_tensor *t    = s->tensors[i].tensor;
        const char            *file = s->files[s->tensors[i].file].name;
        if (strstr(t->name, "rotary_emb.inv_freq") || (tied && !strcmp(t->name, "lm_head.weight"))) continue;
        if (t->dtype != CELER_ST_F32 && t->dtype != CELER_ST_F16 && t->dtype != CELER_ST_BF16)
            return celer_fail(err, CELER_ERR_UNSUPPORTED, "quantize: %s: tensor '%s' is %s; celer quantize reads "
                              "F32, F16 and BF16 checkpoints (an already quantized model cannot be quantized again)",
                              file, t->name, celer_st_dtype_name(t->dtype));
        if (strlen(t->name) >= sizeof E->xs[0].name || t->n_dims > 2)
            return celer_fail(err, CELER_ERR_UNSUPPORTED, "quantize: %s: tensor '%s' (%u dimensions) is not one "
                              "celer quantize writes", file, t->name, t->n_dims);
        unsigned layer, expert;
        int      at = 0;
        if (sscanf(t->name, "model.layers.%u.mlp.experts.%u.%n", &layer, &expert, &at) == 2 && at) {
            if (expert == 0 && stack_experts(E, t, layer, t->name + at, err)) return err->code;
            continue; /* taken into the stack when expert 0 came */
        }
        celer_xtensor *x = &E->xs[E->n_x++];
        snprintf(x->name, sizeof x->name, "%s", t->name);
        x->data      = t->data;
        x->gguf_type = -1;
        x->st_dtype  = t->dtype;
        x->n_dims    = t->n_dims;
        memcpy(x->shape, t->shape, sizeof x->shape);
        x->cols = t->n_dims ? (int64_t)t->shape[t->n_dims - 1] : 1;
        x->rows = t->n_dims > 1 ? (int64_t)t->shape[0] : 1;
    }
    return CELER_OK;
}

static int cmp_out(const void *a, const void *b)
{
    return strcmp(((const out_tensor *)a)->name, ((const out_tensor *)b)->name);
}

static celer_status add_out(exporter *E, uint64_t x, part pt, celer_st_dtype dt, int64_t d0, int64_t d1, int nd,
                            celer_error *err)
{
    static const char *const suffix[] = {"", "weight", "scales", "biases"};
    out_tensor              *o        = &E->outs[E->n_out++];
    const char              *name     = E->xs[x].name;
    if (pt == PART_PLAIN)
        snprintf(o->name, sizeof o->name, "%s", name);
    else /* "M.weight" → "M.weight" / "M.scales" / "M.biases" */
        snprintf(o->name, sizeof o->name, "%.*s.%s", (int)(strlen(name) - strlen(".weight")), name, suffix[pt]);
    o->decl = (celer_st_decl){.name = o->name, .dtype = dt, .n_dims = (uint32_t)nd};
    if (pt == PART_PLAIN) memcpy(o->decl.shape, E->xs[x].shape, sizeof o->decl.shape);
    else if (nd == 3) /* stacked experts: (n, rows, d1), d0 = n · rows */
        o->decl.shape[0] = E->xs[x].shape[0], o->decl.shape[1] = (uint64_t)d0 / E->xs[x].shape[0],
        o->decl.shape[2] = (uint64_t)d1;
    else o->decl.shape[0] = (uint64_t)d0, o->decl.shape[1] = (uint64_t)d1;
    o->x    = x;
    o->part = pt;
    return celer_st_decl_bytes(&o->decl, &o->bytes, err);
}

/* mlx-lm's qwen3_moe keeps every router (mlp.gate) at affine 8 bits in groups of 64, whatever
 * the other settings (its quant_predicate; the default predicate has already required the
 * input width to be a multiple of the chosen group size). */
static bool router_at_8_bits(const exporter *E, const celer_xtensor *x)
{
    const char *arch = E->mf->hp.arch;
    size_t      n    = strlen(x->name);
    return (!strcmp(arch, "qwen3_moe") || !strcmp(arch, "qwen3moe")) && n > 16 &&
           !strcmp(x->name + n - 16, ".mlp.gate.weight") && x->cols % 64 == 0;
}

static celer_status plan(exporter *E, celer_error *err)
{
    E->quant = calloc(E->n_x ? E->n_x : 1, sizeof *E->quant);
    E->qs    = calloc(E->n_x ? E->n_x : 1, sizeof *E->qs);
    E->outs  = calloc(3 * E->n_x + 1, sizeof *E->outs);
    if (!E->quant || !E->qs || !E->outs) return celer_fail(err, CELER_ERR_OOM, "quantize: out of memory");
    for (uint64_t i = 0; i < E->n_x; i++) {
        celer_xtensor *x = &E->xs[i];
        size_t         n = strlen(x->name);
        E->quant[i]      = (x->n_dims == 2 || (x->n_dims == 3 && strstr(x->name, ".switch_mlp."))) && n > 7 &&
                      !strcmp(x->name + n - 7, ".weight") && x->cols % E->q.group_size == 0;
        if (!E->quant[i]) {
            if (add_out(E, i, PART_PLAIN, E->dtype, 0, 0, (int)x->n_dims, err)) return err->code;
            continue;
        }
        celer_mlx_quant q = E->q;
        q.rows = x->rows, q.cols = x->cols, q.name = x->name;
        if (router_at_8_bits(E, x)) /* qwen3_moe's quant_predicate */
            q.mode = CELER_HF_QUANT_AFFINE, q.bits = 8, q.group_size = 64, q.dtype = E->dtype;
        E->qs[i] = q;
        if (q.mode == CELER_HF_QUANT_NVFP4 && (q.rows * (q.cols / 16)) % 2)
            return celer_fail(err, CELER_ERR_UNSUPPORTED, "quantize: tensor '%s' (%lld x %lld) has an odd number of "
                              "16-wide groups, which mlx's nvfp4 quantizer cannot pack (it takes 32 values at a "
                              "time); use another mode", x->name, (long long)q.rows, (long long)q.cols);
        celer_mlx_quant_shapes sh;
        if (celer_mlx_quant_get_shapes(&q, &sh, err) ||
            add_out(E, i, PART_WEIGHT, CELER_ST_U32, sh.weight[0], sh.weight[1], (int)x->n_dims, err) ||
            add_out(E, i, PART_SCALES, sh.scales_dtype, sh.scales[0], sh.scales[1], (int)x->n_dims, err) ||
            (sh.has_biases && add_out(E, i, PART_BIASES, E->dtype, sh.biases[0], sh.biases[1], (int)x->n_dims, err)))
            return err->code;
    }
    qsort(E->outs, E->n_out, sizeof *E->outs, cmp_out);
    for (uint64_t i = 0; i < E->n_out; i++) E->outs[i].decl.name = E->outs[i].name; /* moved by the sort */
    /* shards as make_shards cuts them: a new one when the next tensor would pass the limit */
    uint64_t in_shard = 0;
    E->n_shards       = 1;
    for (uint64_t i = 0; i < E->n_out; i++) {
        if (in_shard && in_shard + E->outs[i].bytes > SHARD_BYTES) E->n_shards++, in_shard = 0;
        in_shard += E->outs[i].bytes;
        E->outs[i].shard = E->n_shards - 1;
        E->total += E->outs[i].bytes;
    }
    return CELER_OK;
}

/* ---- computing one source tensor ----------------------------------------------------------- */

typedef struct {
    exporter    *E;
    uint64_t     x;
    celer_status st[CELER_MAX_JOB_THREADS]; /* per thread */
    celer_error  err[CELER_MAX_JOB_THREADS];
} job;

static void store(celer_st_dtype dt, const float *y, int64_t n, uint8_t *dst)
{
    if (dt == CELER_ST_F32) {
        memcpy(dst, y, (size_t)n * sizeof *y);
    } else {
        uint16_t *d = (uint16_t *)dst;
        for (int64_t i = 0; i < n; i++) d[i] = dt == CELER_ST_BF16 ? celer_f32_to_bf16(y[i]) : celer_f32_to_half(y[i]);
    }
}

enum { CHUNK_ROWS = 16 };

static void compute_slice(void *ctx, int ith, int nth)
{
    job           *j = ctx;
    exporter      *E = j->E;
    celer_xtensor *x = &E->xs[j->x];
    int64_t        r0, r1;
    celer_pool_slice((x->rows + CHUNK_ROWS - 1) / CHUNK_ROWS, ith, nth, &r0, &r1);
    r0 *= CHUNK_ROWS, r1 *= CHUNK_ROWS;
    if (r1 > x->rows) r1 = x->rows;
    if (r0 >= r1) return;
    size_t   eb  = celer_st_dtype_bits(E->dtype) / 8;
    float   *y   = malloc((size_t)x->cols * sizeof *y);
    uint8_t *row = E->quant[j->x] ? malloc((size_t)x->cols * eb * CHUNK_ROWS) : NULL;
    if (!y || (E->quant[j->x] && !row)) {
        j->st[ith] = celer_fail(&j->err[ith], CELER_ERR_OOM, "quantize: out of memory");
        free(y);
        return;
    }
    /* each chunk of rows is quantized as a matrix of its own, written at its rows' offsets */
    celer_mlx_quant        q = E->qs[j->x];
    celer_mlx_quant_shapes sh;
    if (E->quant[j->x] && celer_mlx_quant_get_shapes(&q, &sh, &j->err[ith])) {
        j->st[ith] = j->err[ith].code;
        r1         = r0;
    }
    size_t wrow = E->quant[j->x] ? (size_t)sh.weight[1] * 4 : 0;
    size_t srow = E->quant[j->x] ? (size_t)sh.scales[1] * (celer_st_dtype_bits(sh.scales_dtype) / 8) : 0;
    for (int64_t r = r0; r < r1; r += CHUNK_ROWS) {
        int64_t n = r1 - r < CHUNK_ROWS ? r1 - r : CHUNK_ROWS;
        for (int64_t i = 0; i < n; i++) {
            celer_xtensor_read_row(x, r + i, y);
            store(E->dtype, y, x->cols, E->quant[j->x] ? row + (size_t)i * x->cols * eb
                                                       : E->buf[PART_PLAIN] + (size_t)(r + i) * x->cols * eb);
        }
        if (!E->quant[j->x]) continue;
        celer_mlx_quant chunk = q;
        chunk.rows            = n;
        if (celer_mlx_quantize_rows(&chunk, row, E->dtype, 0, n, E->buf[PART_WEIGHT] + (size_t)r * wrow,
                                    E->buf[PART_SCALES] + (size_t)r * srow,
                                    sh.has_biases ? E->buf[PART_BIASES] + (size_t)r * srow : NULL, &j->err[ith])) {
            j->st[ith] = j->err[ith].code;
            break;
        }
    }
    free(row);
    free(y);
}

static celer_status compute(exporter *E, uint64_t xi, celer_error *err)
{
    if (E->cached == xi) return CELER_OK;
    for (int i = 0; i < 4; i++) free(E->buf[i]), E->buf[i] = NULL;
    E->cached = UINT64_MAX;
    for (uint64_t i = 0; i < E->n_out; i++) {
        if (E->outs[i].x != xi) continue;
        if (!(E->buf[E->outs[i].part] = malloc(E->outs[i].bytes ? E->outs[i].bytes : 1)))
            return celer_fail(err, CELER_ERR_OOM, "quantize: out of memory for tensor '%s' (%llu bytes)",
                              E->outs[i].name, (unsigned long long)E->outs[i].bytes);
    }
    job *j = calloc(1, sizeof *j);
    if (!j) return celer_fail(err, CELER_ERR_OOM, "quantize: out of memory");
    j->E = E, j->x = xi;
    celer_pool_run(E->pool, compute_slice, j);
    for (int t = 0; t < celer_pool_size(E->pool); t++)
        if (j->st[t]) {
            *err = j->err[t];
            free(j);
            return err->code;
        }
    free(j);
    E->cached = xi;
    return CELER_OK;
}

/* ---- writing --------------------------------------------------------------------------------- */

static void shard_name(const exporter *E, uint32_t s, char *out, size_t cap)
{
    if (E->n_shards == 1) snprintf(out, cap, "model.safetensors");
    else snprintf(out, cap, "model-%05u-of-%05u.safetensors", s + 1, E->n_shards);
}

static celer_status write_shards(exporter *E, celer_error *err)
{
    static const celer_st_meta meta[] = {{"format", "mlx"}};
    uint64_t                   first  = 0;
    for (uint32_t s = 0; s < E->n_shards; s++) {
        uint64_t last = first;
        while (last < E->n_out && E->outs[last].shard == s) last++;
        celer_st_decl *decls = malloc((last - first + 1) * sizeof *decls);
        if (!decls) return celer_fail(err, CELER_ERR_OOM, "quantize: out of memory");
        for (uint64_t i = first; i < last; i++) decls[i - first] = E->outs[i].decl;
        char name[64], path[4300];
        shard_name(E, s, name, sizeof name);
        snprintf(path, sizeof path, "%s/%s", E->tmp, name);
        celer_st_writer w;
        celer_status    st = celer_st_writer_open(&w, path, decls, last - first, meta, 1, err);
        free(decls);
        if (st) return st;
        for (uint64_t i = first; i < last; i++) {
            if (compute(E, E->outs[i].x, err) || celer_st_writer_put(&w, E->buf[E->outs[i].part], E->outs[i].bytes, err)) {
                celer_st_writer_abort(&w);
                return err->code;
            }
            E->done += E->outs[i].bytes;
            if (E->p->progress) E->p->progress(E->p->user, E->done, E->total);
        }
        if (celer_st_writer_finish(&w, err)) return err->code;
        first = last;
    }
    return CELER_OK;
}

static celer_status write_json(const char *path, const cJSON *j, celer_error *err)
{
    char *text = celer_json_print_exact(j);
    if (!text) return celer_fail(err, CELER_ERR_OOM, "quantize: out of memory");
    FILE *f = fopen(path, "w");
    bool  ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f)) ok = false;
    free(text);
    if (!ok) return celer_fail(err, CELER_ERR_IO, "quantize: cannot write %s: %s", path, strerror(errno));
    return CELER_OK;
}

/* model.safetensors.index.json, which mlx-lm writes for one shard too: the bytes, the logical
 * parameters (a quantized matrix counts its unpacked elements) and each tensor's shard. */
static celer_status write_index(exporter *E, celer_error *err)
{
    cJSON *j = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(j, "metadata"),
          *map = cJSON_AddObjectToObject(j, "weight_map");
    uint64_t params = 0;
    for (uint64_t i = 0; i < E->n_x; i++) params += (uint64_t)E->xs[i].rows * (uint64_t)E->xs[i].cols;
    cJSON_AddNumberToObject(meta, "total_size", (double)E->total);
    cJSON_AddNumberToObject(meta, "total_parameters", (double)params);
    for (uint64_t i = 0; i < E->n_out; i++) {
        char name[64];
        shard_name(E, E->outs[i].shard, name, sizeof name);
        cJSON_AddStringToObject(map, E->outs[i].name, name);
    }
    char path[4300];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", E->tmp);
    celer_status s = write_json(path, j, err);
    cJSON_Delete(j);
    return s;
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp((*(cJSON *const *)a)->string, (*(cJSON *const *)b)->string);
}

/* config.json as mlx-lm's save_config writes it: no _name_or_path, the quantization block under
 * both its names, keys sorted. */
static celer_status write_config(exporter *E, cJSON *c, celer_error *err)
{
    cJSON_DeleteItemFromObject(c, "_name_or_path");
    cJSON_DeleteItemFromObject(c, "quantization");
    cJSON_DeleteItemFromObject(c, "quantization_config");
    for (int k = 0; k < 2; k++) {
        cJSON *q = cJSON_AddObjectToObject(c, k ? "quantization_config" : "quantization");
        cJSON_AddNumberToObject(q, "group_size", E->q.group_size);
        cJSON_AddNumberToObject(q, "bits", E->q.bits);
        cJSON_AddStringToObject(q, "mode", celer_hf_quant_mode_name(E->q.mode));
        /* modules whose settings differ, as mlx-lm records them, in the order it visits them */
        for (int64_t layer = 0; layer < E->mf->hp.n_layer; layer++)
            for (uint64_t i = 0; i < E->n_x; i++) {
                const celer_mlx_quant *t = &E->qs[i];
                unsigned               l;
                if (!E->quant[i] || (t->bits == E->q.bits && t->group_size == E->q.group_size && t->mode == E->q.mode) ||
                    sscanf(E->xs[i].name, "model.layers.%u.", &l) != 1 || l != layer)
                    continue;
                char module[200];
                snprintf(module, sizeof module, "%.*s", (int)(strlen(E->xs[i].name) - 7), E->xs[i].name);
                cJSON *m = cJSON_AddObjectToObject(q, module);
                cJSON_AddNumberToObject(m, "group_size", t->group_size);
                cJSON_AddNumberToObject(m, "bits", t->bits);
            }
    }
    int     n = cJSON_GetArraySize(c);
    cJSON **items = malloc((size_t)(n ? n : 1) * sizeof *items);
    if (!items) return celer_fail(err, CELER_ERR_OOM, "quantize: out of memory");
    for (int i = 0; i < n; i++) items[i] = cJSON_DetachItemFromArray(c, 0);
    qsort(items, (size_t)n, sizeof *items, cmp_key);
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(c, items[i]);
    free(items);
    char path[4300];
    snprintf(path, sizeof path, "%s/config.json", E->tmp);
    return write_json(path, c, err);
}

/* The tokenizer and generation files of a Hugging Face directory, copied as they are. */
static celer_status copy_tokenizer_files(exporter *E, const char *src, celer_error *err)
{
    static const char *const files[] = {"tokenizer.json",   "tokenizer_config.json", "special_tokens_map.json",
                                        "chat_template.jinja", "chat_template.json",  "generation_config.json",
                                        "tokenizer.model",  "vocab.json",            "merges.txt",
                                        "added_tokens.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char from[4300], to[4300];
        snprintf(from, sizeof from, "%s/%s", src, files[i]);
        snprintf(to, sizeof to, "%s/%s", E->tmp, files[i]);
        FILE *in = fopen(from, "rb");
        if (!in) continue;
        FILE *out = fopen(to, "wb");
        bool  ok  = out != NULL;
        char  b[65536];
        size_t n;
        while (ok && (n = fread(b, 1, sizeof b, in)) > 0) ok = fwrite(b, 1, n, out) == n;
        ok = ok && !ferror(in);
        fclose(in);
        if (out && fclose(out)) ok = false;
        if (!ok) return celer_fail(err, CELER_ERR_IO, "quantize: cannot copy %s to %s: %s", from, to, strerror(errno));
    }
    return CELER_OK;
}

/* Removes the partial directory and what this run put in it. */
static void remove_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

/* ---- the entry point -------------------------------------------------------------------------- */

static celer_status settings(exporter *E, const celer_quantize_params *p, celer_error *err)
{
    const char *mode = p->mode ? p->mode : "affine";
    size_t      m    = 0;
    while (m < sizeof MODES / sizeof MODES[0] && strcmp(MODES[m].name, mode)) m++;
    if (m == sizeof MODES / sizeof MODES[0])
        return celer_fail(err, CELER_ERR_INVALID, "quantize: unknown mode '%s'; modes: affine, mxfp4, mxfp8, nvfp4",
                          mode);
    E->q = (celer_mlx_quant){.name = "--mode", .mode = MODES[m].mode, .bits = p->bits ? (uint32_t)p->bits : MODES[m].bits,
                             .group_size = p->group_size ? (uint32_t)p->group_size : MODES[m].group,
                             .dtype = E->dtype, .rows = 1};
    E->q.cols = E->q.group_size;
    if (p->bits < 0 || p->group_size < 0 || celer_mlx_quant_check(&E->q, err)) {
        if (p->bits < 0 || p->group_size < 0)
            celer_fail(err, CELER_ERR_INVALID, "quantize: bits and group size must be positive");
        else
            celer_fail(err, CELER_ERR_INVALID, "quantize: %s %u-bit group %u is not an MLX quantization (affine: "
                       "--bits 2, 3, 4, 5, 6 or 8 and --group-size 32, 64 or 128; mxfp4 and mxfp8: group 32; nvfp4: "
                       "group 16)", mode, E->q.bits, E->q.group_size);
        return err->code;
    }
    return CELER_OK;
}

static celer_status run(exporter *E, const char *in, const celer_quantize_params *p, celer_error *err)
{
    if (celer_model_file_open((celer_model_file **)&E->mf, in, err)) return err->code;
    const celer_model_file *mf     = E->mf;
    cJSON                  *config = NULL;
    celer_status            st;

    /* the output dtype: asked for, or the checkpoint's torch_dtype (as mlx_lm.convert casts),
     * or bfloat16 for a GGUF file, whose dequantized values are float32 */
    const char *dtype = p->dtype;
    if (!dtype && mf->kind == MODEL_FILE_SAFETENSORS && mf->cfg.torch_dtype) dtype = mf->cfg.torch_dtype;
    if (!dtype) dtype = "bfloat16";
    size_t d = 0;
    while (d < sizeof DTYPES / sizeof DTYPES[0] && strcmp(DTYPES[d].name, dtype)) d++;
    if (d == sizeof DTYPES / sizeof DTYPES[0])
        return celer_fail(err, p->dtype ? CELER_ERR_INVALID : CELER_ERR_UNSUPPORTED, "quantize: dtype '%s'%s; give "
                          "--dtype bfloat16, float16 or float32", dtype, p->dtype ? "" : " (config.json's torch_dtype)");
    E->dtype = DTYPES[d].dtype;
    if (settings(E, p, err)) return err->code;

    if (mf->kind == MODEL_FILE_GGUF) {
        if (celer_xexport_gguf(mf, DTYPES[d].name, &E->xs, &E->n_x, &config, err)) return err->code;
    } else {
        if (mf->cfg.quant.method || mf->cfg.quant.def.quantized)
            return celer_fail(err, CELER_ERR_UNSUPPORTED, "quantize: %s is already quantized; give the unquantized "
                              "checkpoint (or a GGUF file)", mf->st.dir);
        char path[4300];
        snprintf(path, sizeof path, "%s/config.json", mf->st.dir);
        if (celer_json_read_file(path, 16u << 20, &config, err)) return err->code;
        /* mlx-lm's llama and qwen models drop lm_head unless tie_word_embeddings is false;
         * gemma3_text keeps one when present */
        bool gemma = strstr(mf->hp.arch, "gemma3") != NULL;
        bool moe   = !strcmp(mf->hp.arch, "qwen3_moe") || !strcmp(mf->hp.arch, "qwen2_moe");
        if (!gemma && !moe && !celer_arch_find(mf->hp.arch)) {
            cJSON_Delete(config);
            return celer_fail(err, CELER_ERR_UNSUPPORTED, "quantize: %s: model_type '%s' has no MLX export; celer "
                              "quantize writes llama, qwen2, qwen3, gemma3_text, qwen3_moe and qwen2_moe", mf->st.dir,
                              mf->hp.arch);
        }
        cJSON *tie = cJSON_GetObjectItemCaseSensitive(config, "tie_word_embeddings");
        if (dir_tensors(E, !gemma && !cJSON_IsFalse(tie), err)) {
            cJSON_Delete(config);
            return err->code;
        }
        if (p->dtype) cJSON_ReplaceItemInObject(config, "torch_dtype", cJSON_CreateString(DTYPES[d].name));
    }
    if (plan(E, err)) {
        cJSON_Delete(config);
        return err->code;
    }

    struct stat sb;
    if (stat(E->out, &sb) == 0) {
        cJSON_Delete(config);
        return celer_fail(err, CELER_ERR_INVALID, "quantize: %s already exists; remove it or give another output "
                          "directory", E->out);
    }
    snprintf(E->tmp, sizeof E->tmp, "%s.partial", E->out);
    remove_tmp(E->tmp); /* a previous run's leftovers */
    if (mkdir(E->tmp, 0755)) {
        cJSON_Delete(config);
        return celer_fail(err, CELER_ERR_IO, "quantize: cannot create %s: %s", E->tmp, strerror(errno));
    }
    int threads = p->n_threads;
    if (threads <= 0) {
        celer_host_info h;
        celer_host_info_read(&h);
        threads = h.physical_cores > 0 ? h.physical_cores : h.logical_cpus > 0 ? h.logical_cpus : 1;
    }
    st = celer_pool_init(&E->pool, threads, err);
    if (!st) st = write_shards(E, err);
    if (!st) st = write_index(E, err);
    if (!st) st = write_config(E, config, err);
    if (!st && mf->kind == MODEL_FILE_SAFETENSORS) st = copy_tokenizer_files(E, mf->st.dir, err);
    if (!st && mf->kind == MODEL_FILE_GGUF) st = celer_tokenizer_write_hf_gguf(mf, E->tmp, err);
    cJSON_Delete(config);
    if (!st && rename(E->tmp, E->out))
        st = celer_fail(err, CELER_ERR_IO, "quantize: cannot rename %s to %s: %s", E->tmp, E->out, strerror(errno));
    if (st) remove_tmp(E->tmp);
    return st;
}

celer_status celer_quantize_model(const char *in, const char *out, const celer_quantize_params *p, celer_error *err)
{
    celer_quantize_params defaults = {0};
    exporter              E        = {.out = out, .p = p ? p : &defaults, .cached = UINT64_MAX};
    celer_status          st       = run(&E, in, E.p, err);
    for (int i = 0; i < 4; i++) free(E.buf[i]);
    free(E.xs);
    free(E.quant);
    free(E.qs);
    free(E.experts);
    free(E.outs);
    celer_pool_free(E.pool);
    celer_model_file_close((celer_model_file *)E.mf);
    return st;
}
