/* celer — public C API. All that tools/cli and src/server include. */
#ifndef CELER_H
#define CELER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status ------------------------------------------------------------ */

typedef enum {
    CELER_OK = 0,
    CELER_ERR_INVALID,     /* bad argument, option or request */
    CELER_ERR_IO,          /* a file cannot be opened, read or written */
    CELER_ERR_FORMAT,      /* a file's content is malformed */
    CELER_ERR_UNSUPPORTED, /* well-formed, but celer cannot run it (names what to use instead) */
    CELER_ERR_OOM,         /* host or device memory exhausted */
    CELER_ERR_DEVICE,      /* the device failed (fault, lost, timeout) */
} celer_status;

/* The error a failing call fills in: its code and one line naming place, fact and fix. */
typedef struct {
    celer_status code;
    char         msg[512];
} celer_error;

const char *celer_status_name(celer_status s);
/* Process exit code for a status: 0 ok, 2 bad input (invalid, io, format, unsupported),
 * 3 runtime failure (oom, device). Only tools/ call exit(). */
int celer_status_exit_code(celer_status s);

/* ---- the host ----------------------------------------------------------- */

typedef struct {
    char     cpu_model[128];
    char     arch[16];       /* "x86_64", "aarch64" */
    int      logical_cpus;   /* online */
    int      physical_cores; /* 0 when unknown */
    /* SIMD the CPU has and the OS enabled */
    bool     sse42, avx, avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512_vnni, avx512_bf16, avx_vnni,
             amx_tile, amx_int8, amx_bf16, neon, dotprod, i8mm, sve;
    uint64_t mem_total;      /* bytes */
    uint64_t mem_available;  /* bytes */
} celer_host_info;

/* Reads CPU and memory facts from cpuid / /proc / /sys. Fields it cannot read stay 0. */
void celer_host_info_read(celer_host_info *h);

/* ---- model files ------------------------------------------------------- */

/* Hyper-parameters read from a model's metadata (GGUF keys or config.json); 0 = not given. */
typedef struct {
    char    arch[64];      /* general.architecture or config.json model_type */
    char    name[128];     /* general.name, or the directory name */
    int64_t n_layer;
    int64_t n_embd;
    int64_t n_head;
    int64_t n_head_kv;
    int64_t head_dim_k;    /* per-head key width */
    int64_t head_dim_v;
    int64_t n_ff;          /* feed-forward width (max over layers where it varies) */
    int64_t n_vocab;
    int64_t n_ctx_train;   /* context length the model was trained for */
    int64_t n_expert;
    int64_t n_expert_used;
    int64_t n_ff_expert;
    int64_t n_ff_shexp;    /* the shared expert's width (qwen2moe) */
    int64_t sliding_window;
    double  rope_theta;
    double  norm_eps;
} celer_hparams;

/* One weight as stored. */
typedef struct {
    const char *name;      /* NUL-terminated copy owned by the model file */
    const char *type;      /* storage type name: GGUF types ("Q4_K"), safetensors dtypes ("BF16") */
    int         n_dims;
    uint64_t    shape[8];  /* outermost first, as gguf-py and numpy print it */
    uint64_t    n_elems;   /* logical elements (for packed types: unpacked weights) */
    uint64_t    n_bytes;
} celer_tensor_desc;

/* A model on disk, parsed and mapped but not loaded onto a backend. */
typedef struct celer_model_file celer_model_file;

/* Opens a .gguf file or a model directory (config.json + *.safetensors). */
celer_status celer_model_file_open(celer_model_file **out, const char *path, celer_error *err);
void         celer_model_file_close(celer_model_file *mf);

const char          *celer_model_file_format(const celer_model_file *mf); /* "gguf" | "safetensors" */
const celer_hparams *celer_model_file_hparams(const celer_model_file *mf);
uint64_t             celer_model_file_n_tensors(const celer_model_file *mf);
const celer_tensor_desc *celer_model_file_tensor(const celer_model_file *mf, uint64_t i);
bool                 celer_model_file_has_chat_template(const celer_model_file *mf);

/* Memory needed to run the model at n_ctx tokens of context, in bytes. */
typedef struct {
    uint64_t weights;
    uint64_t kv_cache;     /* keys and values for n_ctx tokens, f32 as the CPU backend keeps them */
    uint64_t scratch;      /* activations and logits of one prefill chunk */
    uint64_t total;
    int64_t  n_ctx;
} celer_memory_estimate;

/* Default context: the trained context, capped at 4096 tokens. */
int64_t celer_model_file_default_ctx(const celer_model_file *mf);
void    celer_model_file_estimate_memory(const celer_model_file *mf, int64_t n_ctx, celer_memory_estimate *out);

/* ---- tokenizer ---------------------------------------------------------- */

typedef struct celer_tokenizer celer_tokenizer;

/* Builds the tokenizer a model file describes: GGUF tokenizer.ggml.* metadata, or a model
 * directory's tokenizer.json (+ tokenizer_config.json). A tokenizer model, normalizer or
 * pre-tokenizer celer cannot reproduce exactly is CELER_ERR_UNSUPPORTED naming it. */
celer_status celer_tokenizer_load(celer_tokenizer **out, const celer_model_file *mf, celer_error *err);
void         celer_tokenizer_free(celer_tokenizer *t);

int32_t celer_tokenizer_n_vocab(const celer_tokenizer *t);
int32_t celer_tokenizer_bos(const celer_tokenizer *t); /* -1 when the model has none */
int32_t celer_tokenizer_eos(const celer_tokenizer *t);
/* Whether id is a control token (BOS, EOS, chat markers). */
bool    celer_tokenizer_is_control(const celer_tokenizer *t, int32_t id);
/* The token's text as the vocabulary spells it (byte-level alphabet, ▁); NULL for a bad id. */
const char *celer_tokenizer_piece(const celer_tokenizer *t, int32_t id, size_t *len);

typedef struct {
    bool add_special;   /* add BOS/EOS where the model's config says to */
    bool parse_special; /* match special-token text in the input; false: treat it as plain text */
} celer_encode_opts;

/* Token ids of text[0, n) into *ids (malloc'd; the caller frees). Text must be valid UTF-8:
 * anything else is CELER_ERR_INVALID naming the byte offset. */
celer_status celer_tokenizer_encode(const celer_tokenizer *t, const char *text, size_t n, celer_encode_opts opts,
                                    int32_t **ids, size_t *n_ids, celer_error *err);

/* The text of ids (malloc'd and NUL-terminated; the caller frees). Special tokens are included
 * as their text; byte sequences that are not valid UTF-8 become U+FFFD. */
celer_status celer_tokenizer_decode(const celer_tokenizer *t, const int32_t *ids, size_t n, char **out,
                                    size_t *out_n, celer_error *err);

/* Streaming decode for one sequence: push ids one at a time and get back the text that is
 * complete — never half of a UTF-8 sequence. Zero-initialize, then celer_detok_init. */
typedef struct {
    const celer_tokenizer *tok;
    char                   pending[64]; /* bytes of an unfinished UTF-8 sequence / byte tokens */
    size_t                 n_pending;
    bool                   started;     /* something was emitted (for leading-space stripping) */
    char                  *out;         /* the text returned by the last call */
    size_t                 out_cap;
    char                  *work;        /* scratch reused from token to token */
    size_t                 work_cap;
} celer_detok;

void         celer_detok_init(celer_detok *d, const celer_tokenizer *t);
/* Appends id; *text / *n is what can be shown now (valid until the next call). */
celer_status celer_detok_push(celer_detok *d, int32_t id, const char **text, size_t *n, celer_error *err);
/* Whatever is still held (an incomplete sequence, as U+FFFD), at the end of the sequence. */
celer_status celer_detok_flush(celer_detok *d, const char **text, size_t *n, celer_error *err);
void         celer_detok_free(celer_detok *d);

/* ---- sampling ------------------------------------------------------------ */

typedef struct {
    float    temperature;       /* <= 0: greedy (the highest logit, lowest id on ties) */
    int32_t  top_k;             /* 0: off */
    float    top_p;             /* 1: off */
    float    min_p;             /* 0: off */
    float    repeat_penalty;    /* 1: off; divides positive logits of recent tokens, multiplies negative */
    float    presence_penalty;  /* 0: off; subtracted once from each recent token's logit */
    float    frequency_penalty; /* 0: off; subtracted per occurrence */
    int32_t  penalty_last_n;    /* how many recent tokens the penalties see */
    uint64_t seed;
} celer_sampling;

/* Defaults: greedy, no filters, no penalties, the last 64 tokens for penalties, seed 0. */
celer_sampling celer_sampling_default(void);

/* ---- the capability table: what a backend does with each weight storage type ------------- */

typedef enum { CELER_CAP_NATIVE, CELER_CAP_CONVERT, CELER_CAP_REJECT } celer_capability;

/* What loading onto the CPU backend does with weights of storage type `type` (as
 * celer_tensor_desc.type spells it: "Q4_K", "BF16", "affine4-g64", "mxfp4"): runs them as
 * stored, converts them at load, or refuses them. detail (n bytes) says how, or what to use. */
celer_capability celer_cpu_capability(const char *type, char *detail, size_t n);
/* The same for any backend kind, by name: "cpu", "cuda" or "rocm" (a name that is none of them is
 * CELER_CAP_REJECT with detail saying so). A backend this build does not have rejects every type,
 * saying what to use instead. */
celer_capability celer_backend_capability(const char *backend, const char *type, char *detail, size_t n);
/* "native", "convert", "reject" */
const char      *celer_capability_name(celer_capability c);

/* ---- converting to an MLX model directory (celer quantize) ------------------------------ */
typedef struct {
    const char *mode;       /* "affine" (NULL), "mxfp4", "mxfp8", "nvfp4" */
    int         bits;       /* 0: the mode's (affine 4, mxfp4 4, mxfp8 8, nvfp4 4) */
    int         group_size; /* 0: the mode's (affine 64, mxfp4 32, mxfp8 32, nvfp4 16) */
    const char *dtype;      /* "bfloat16", "float16", "float32" for scales and unquantized tensors; NULL:
                             * config.json's torch_dtype (a directory), bfloat16 (a GGUF file) */
    int         n_threads;  /* 0: one per physical core */
    void (*progress)(void *user, uint64_t done_bytes, uint64_t total_bytes); /* NULL: none */
    void *user;
} celer_quantize_params;
/* Writes the model at in (an unquantized Hugging Face directory, or a GGUF file of an
 * architecture celer runs) as the MLX-format directory out (which must not exist) that
 * mlx_lm.convert would write with the same settings: the same tensors, bytes and
 * config.json quantization block, and the tokenizer (copied, or rebuilt from the GGUF's). */
celer_status celer_quantize_model(const char *in, const char *out, const celer_quantize_params *p, celer_error *err);
/* ---- GPU devices ------------------------------------------------------------------------ */

typedef struct {
    char     backend[8];          /* "cuda" or "rocm" */
    char     vendor[16];          /* "NVIDIA" or "AMD" */
    char     name[256];           /* as the runtime names it */
    char     arch[64];            /* "sm_90", "gfx1151" (feature flags stripped) */
    char     runtime[32];         /* the runtime's version */
    int      index, count;        /* this device, and how many there are */
    int      compute_units;       /* multiprocessors (NVIDIA) or compute units (AMD) */
    int      warp_size;           /* 32, or 64 on CDNA */
    uint64_t mem_total, mem_free; /* as the runtime reports them */
    uint64_t mem_allocatable;     /* what the planner uses: mem_free, or on a unified-memory APU the free
                                   * VRAM carve-out plus free GTT, from sysfs */
    bool     unified;             /* the GPU allocates host memory (APUs such as Strix Halo) */
    char     unified_source[64];  /* how that was decided */
    char     built_archs[128];    /* the targets this build has code for */
    char     matrix[128];         /* its matrix units and what this build runs on them */
    char     blas[384];           /* the vendor BLAS long steps take ("cuBLAS", a rocBLAS path), or why none */
    bool     supported;           /* this build can run on it; else why says what to do */
    char     why[512];
} celer_device_facts;

/* The facts of GPU device `index` for the GPU backend this build has. CELER_ERR_UNSUPPORTED when
 * the build has no GPU backend (naming the CMake option); CELER_ERR_DEVICE when no device answers
 * (with the runtime's words). A device the build has no code for is described, with supported
 * false and the rebuild command in why. */
celer_status celer_device_query(int index, celer_device_facts *f, celer_error *err);

/* ---- the engine: a model loaded on a backend, generating --------------------------------- */

typedef struct celer_engine celer_engine;

typedef struct {
    const char *backend;   /* "cpu", or NULL for the best available */
    int         n_threads; /* 0: one per physical core */
    int64_t     n_ctx;     /* 0: the trained context, at most 4096 */
} celer_engine_config;

/* Opens the model, builds its tokenizer, checks that it fits (refusing with the numbers and the
 * flag to change when it does not), loads it onto the backend. */
celer_status celer_engine_create(celer_engine **out, const char *model_path, const celer_engine_config *cfg,
                                 celer_error *err);
void         celer_engine_free(celer_engine *e);

const celer_model_file *celer_engine_model_file(const celer_engine *e);
const celer_tokenizer  *celer_engine_tokenizer(const celer_engine *e);
const char             *celer_engine_backend_name(const celer_engine *e);
int                     celer_engine_threads(const celer_engine *e);
int64_t                 celer_engine_ctx(const celer_engine *e);
/* What loading converted that the user should know (e.g. quantized weights the backend has no
 * kernel for, dequantized), as one sentence; "" when nothing. */
const char             *celer_engine_load_note(const celer_engine *e);

/* Bytes of weights one decode step reads: every tensor of the model, less the token embedding
 * table when a separate output matrix exists (a step then reads one row of the table), and of a
 * mixture of experts' expert tensors only the share a token uses (n_expert_used / n_expert). */
uint64_t     celer_engine_weight_bytes_per_token(const celer_engine *e);
/* Bytes of keys and values a decode step at context ctx (positions 0 .. ctx - 1 visible) reads:
 * each layer's visible positions (a sliding window's at most) × key heads × (key + value head
 * sizes) × the cache's value size (4 for f32, 2 for f16). */
uint64_t     celer_engine_kv_bytes_per_token(const celer_engine *e, int64_t ctx);
/* Measures the backend's copy bandwidth now: buffers of `bytes` copied on the backend (with the
 * engine's threads), best of reps; *bytes_per_s counts the bytes read plus those written. */
celer_status celer_engine_copy_bandwidth(celer_engine *e, size_t bytes, int reps, double *bytes_per_s,
                                         celer_error *err);

typedef struct {
    celer_sampling sampling;
    int32_t        max_tokens; /* generated tokens at most */
    const char    *const *stop; /* stop strings (the text before them is kept), NULL-terminated, or NULL */
    bool           ignore_eos;  /* keep going past end-of-generation tokens (benchmarks) */
    /* celer_batcher only: with on_token set, each sampled token's log-probability under the
     * model's distribution (log-softmax of the raw logits, before temperature, penalties and
     * filters) and the top_logprobs most likely tokens' (0 to CELER_MAX_TOP_LOGPROBS) */
    int32_t        top_logprobs;
    void (*on_token)(void *user, int32_t id, float logprob, const int32_t *top_ids, const float *top_logprobs,
                     int32_t n_top);
} celer_gen_params;

#define CELER_MAX_TOP_LOGPROBS 20

/* Called with each piece of generated text as soon as it is complete UTF-8 (stop strings held
 * back until decided). Return false to stop. */
typedef bool (*celer_text_fn)(void *user, const char *text, size_t n);

typedef struct {
    int64_t     n_prompt, n_reused, n_gen;
    double      t_prompt, t_gen, t_first; /* seconds: prefill, decode, time to first token */
    const char *finish;                   /* "stop" (EOS or a stop string), "length", "callback" */
} celer_gen_stats;

/* Forgets the interactive sequence: the next generate starts from an empty cache. */
void celer_engine_reset(celer_engine *e);

/* Generates from prompt token ids on the engine's one interactive sequence. Positions already
 * in the cache that match the prompt's beginning are reused (multi-turn chat). */
celer_status celer_engine_generate(celer_engine *e, const int32_t *prompt, size_t n_prompt, const celer_gen_params *p,
                                   celer_text_fn on_text, void *user, celer_gen_stats *stats, celer_error *err);

/* Teacher forcing, for comparing backends (celer verify): runs ids[0, n) as the engine's
 * interactive sequence and writes the logits after each of its last n_out tokens into logits,
 * (n_out, n_vocab) with n_vocab from the model file's hparams: row r holds the logits that follow
 * ids[n - n_out + r], the prediction of the token after it. Cached positions matching the start of
 * ids are reused, as celer_engine_generate does, but only up to position n - n_out; the rest runs
 * as a prefill in chunks. n at most the engine's context; 1 <= n_out <= n. Allocates the rows'
 * activation buffers per call when n_out > 1: for tools, not for a decode loop. */
celer_status celer_engine_eval(celer_engine *e, const int32_t *ids, size_t n, size_t n_out, float *logits,
                               celer_error *err);

/* The backend celer_engine_create would load onto for `backend` ("cpu", "cuda", "rocm"; NULL for
 * the best available): creates it (one host thread) and frees it again, and copies its name into
 * name (cap bytes). Fails as engine creation would: CELER_ERR_UNSUPPORTED for a backend this build
 * does not have, CELER_ERR_DEVICE when its device is missing or fails. */
celer_status celer_backend_probe(const char *backend, char *name, size_t cap, celer_error *err);

/* ---- continuous batching: many requests sharing each forward step ------------------------- */

typedef struct celer_batcher celer_batcher;

typedef struct {
    int     n_parallel;  /* sequences run together (slots); 0: 4 */
    int64_t n_ctx;       /* positions one sequence may hold; 0: the engine's context */
    int64_t kv_tokens;   /* positions in the shared KV pool; 0: n_parallel × n_ctx */
    int     step_tokens; /* tokens one forward step runs at most (decode tokens + prompt chunks); 0: 512 */
} celer_batcher_config;

/* Called once when a request ends, on the thread running celer_batcher_step: its statistics
 * (finish: "stop", "length", "callback" or "cancelled"), and err when it failed (else NULL). */
typedef void (*celer_done_fn)(void *user, const celer_gen_stats *stats, const celer_error *err);

typedef struct {
    int32_t waiting, running, kv_blocks_used, kv_blocks_free;
} celer_batcher_counts;

/* A batcher over the engine's model and backend, with its own KV pool and buffers. The engine
 * must outlive it; its own celer_engine_generate may not run while the batcher steps. */
celer_status celer_batcher_create(celer_batcher **out, celer_engine *e, const celer_batcher_config *c,
                                  celer_error *err);
/* Ends every request that has not ended ("cancelled"), then frees. */
void         celer_batcher_free(celer_batcher *b);
/* Queues a generation (any thread). The prompt, p and its stop strings are copied. Refused at
 * once (CELER_ERR_INVALID, saying why): an empty prompt, one that does not fit the context, ids
 * outside the vocabulary, a prompt plus max_tokens larger than the whole KV pool. *id names the
 * request for celer_batcher_cancel. on_text and on_done run on the stepping thread. */
celer_status celer_batcher_submit(celer_batcher *b, const int32_t *prompt, size_t n_prompt, const celer_gen_params *p,
                                  celer_text_fn on_text, celer_done_fn on_done, void *user, uint64_t *id,
                                  celer_error *err);
/* Ends request id at the next step, with finish "cancelled" (any thread; an ended id is ignored). */
void         celer_batcher_cancel(celer_batcher *b, uint64_t id);
/* Admits what fits, runs one forward step and samples; *busy is false when there was nothing to
 * run. A failed step fails the requests that were running (their on_done gets the error). */
celer_status celer_batcher_step(celer_batcher *b, bool *busy, celer_error *err);
void         celer_batcher_get_counts(celer_batcher *b, celer_batcher_counts *c);

#ifdef __cplusplus
}
#endif
#endif
