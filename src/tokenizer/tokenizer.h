/* The tokenizer: a vocabulary, BPE merges, and the pipeline around them (added-token matching,
 * normalizer, pre-tokenizer steps, decoder), configured from explicit metadata by tables —
 * GGUF's tokenizer.ggml.model / tokenizer.ggml.pre, or tokenizer.json's components — never by
 * sniffing token text. The pipeline mirrors Hugging Face `tokenizers`, which is the reference
 * the parity tests hold it to. */
#ifndef CELER_TOKENIZER_TOKENIZER_H
#define CELER_TOKENIZER_TOKENIZER_H

#include "celer.h"
#include "formats/gguf.h"
#include "tokenizer/regex.h"

/* Token types, numbered as GGUF's tokenizer.ggml.token_type. */
enum {
    TOKEN_NORMAL       = 1,
    TOKEN_UNKNOWN      = 2,
    TOKEN_CONTROL      = 3,
    TOKEN_USER_DEFINED = 4,
    TOKEN_UNUSED       = 5,
    TOKEN_BYTE         = 6,
};

typedef enum {
    TOK_MODEL_BYTE_LEVEL, /* GPT-2 lineage: BPE over bytes spelled as printable code points */
    TOK_MODEL_SPM,        /* SentencePiece BPE: ▁ for spaces, byte fallback */
} tok_model;

/* Normalizers, applied in order to the text between added tokens. */
typedef enum {
    NORM_NFC,           /* Unicode NFC */
    NORM_SPACE_TO_META, /* Replace(" ", "▁") */
    NORM_PREPEND_META,  /* Prepend("▁") */
} tok_norm;

/* Pre-tokenizer steps, applied in order; each splits every piece further. */
typedef enum {
    PRE_DIGITS_INDIVIDUAL, /* Digits(individual_digits=true): each numeric char alone */
    PRE_SPLIT_ISOLATED,    /* Split(regex, Isolated): matches and the gaps between them */
    PRE_BYTE_LEVEL,        /* ByteLevel: bytes to the GPT-2 alphabet (after an optional regex split) */
    PRE_METASPACE_FIRST,   /* Metaspace(▁, prepend_scheme=first, split=false) */
} tok_pre_kind;

typedef struct {
    tok_pre_kind kind;
    celer_regex *re;      /* PRE_SPLIT_ISOLATED, and PRE_BYTE_LEVEL with use_regex (else NULL) */
    const char  *pattern; /* re's source where it outlives the tokenizer (GGUF: a static table), for
                           * writing tokenizer.json (export_json.c); else NULL */
} tok_pre;

typedef enum {
    DEC_BYTE_LEVEL,     /* map the GPT-2 alphabet back to bytes */
    DEC_SPM,            /* ▁ → space, <0xXX> → byte, fuse */
    DEC_SPM_STRIP_LEAD, /* DEC_SPM, then strip one leading space (Metaspace prepend) */
} tok_decoder;

typedef struct {
    const char *text; /* the vocabulary's spelling (what BPE and the decoder see); not NUL-terminated */
    uint32_t    len;
    const char *orig; /* as the file spells it (what added-token matching sees) */
    uint32_t    orig_len;
    uint8_t     type; /* TOKEN_* */
} tok_entry;

/* An added token, matched in the raw text before anything else. */
typedef struct {
    const char *text; /* its content: the token as the file spells it */
    uint32_t    len;
    int32_t     id;
    bool        special; /* skipped when special-token text is treated as plain text */
} tok_added;

/* text → id, open addressing; later insertions of the same text overwrite (as a Python dict). */
typedef struct {
    int32_t *slots; /* (cap) id + 1; 0 is empty */
    uint32_t cap;
} tok_str_map;

/* (left id, right id) → (rank, merged id); one 16-byte slot per entry, so a lookup touches one
 * cache line. */
typedef struct {
    uint64_t key; /* left << 32 | right; UINT64_MAX: empty */
    uint32_t rank;
    int32_t  merged;
} tok_merge_slot;

typedef struct {
    tok_merge_slot *slots; /* (cap) */
    uint32_t        cap;
} tok_merge_map;

#define TOK_MAX_NORM 3
#define TOK_MAX_PRE  4

struct celer_tokenizer {
    tok_model     model;
    int32_t       n_vocab;
    tok_entry    *vocab;      /* (n_vocab) */
    char         *pool;       /* respelled token texts */
    tok_str_map   ids;        /* text → id */
    tok_merge_map merges;
    uint32_t      n_norm;
    tok_norm      norm[TOK_MAX_NORM];
    uint32_t      n_pre;
    tok_pre       pre[TOK_MAX_PRE];
    tok_decoder   decoder;
    bool          byte_fallback;
    bool          fuse_unk;
    bool          ignore_merges;
    int32_t       byte_ids[256]; /* id of <0xXX> for byte fallback; -1 where absent */
    int32_t       unk_id;        /* the metadata's unknown token (an added special token); -1: none */
    int32_t       bpe_unk;       /* what BPE emits for a character it cannot spell; -1: drop it */
    int32_t       bos_id, eos_id, pad_id;
    int32_t       eot_id, eom_id;  /* end of turn / end of message (GGUF metadata); -1: none */
    bool          add_bos, add_eos;
    /* SentencePiece text is BPE'd in chunks cut before each ▁ that follows another character,
     * which gives the same tokens as one long word wherever no token spans the cut: glue[] lists
     * the characters that some token joins to a following ▁ (cuts after them are skipped). */
    bool          meta_chunks;
    uint32_t      n_glue;
    uint32_t     *glue;          /* (n_glue) code points, sorted */
    uint32_t      n_added;
    tok_added    *added;         /* (n_added) sorted by text, for matching */
    uint8_t       added_first[256 / 8]; /* bit per first byte of some added token */
    uint32_t      added_max_len;
};

/* ---- building (tokenizer.c, vocab_gguf.c) ---- */
/* From GGUF metadata; arch is general.architecture (it picks the SentencePiece variant). The
 * tokenizer points into g's mapping: g must outlive it. */
celer_status tok_load_gguf(celer_tokenizer **out, const celer_gguf *g, const char *arch, celer_error *err);
celer_status tok_str_map_build(tok_str_map *m, const tok_entry *vocab, int32_t n, celer_error *err);
int32_t      tok_str_map_get(const tok_str_map *m, const tok_entry *vocab, const char *s, size_t n);
celer_status tok_merge_map_init(tok_merge_map *m, uint32_t n_merges, celer_error *err);
void         tok_merge_map_put(tok_merge_map *m, int32_t left, int32_t right, uint32_t rank, int32_t merged);
bool         tok_merge_map_get(const tok_merge_map *m, int32_t left, int32_t right, uint32_t *rank, int32_t *merged);
celer_status tok_finish(celer_tokenizer *t, celer_error *err); /* added tokens, byte ids, chunking */

/* ---- building from a model directory (vocab_json.c, vocab_json_pipeline.c) ---- */
struct cJSON;
/* From the directory's tokenizer.json, with tokenizer_config.json for BOS/EOS and the special
 * tokens transformers adds; a component celer cannot reproduce exactly is CELER_ERR_UNSUPPORTED
 * naming it. */
celer_status tok_load_json(celer_tokenizer **out, const celer_model_file *mf, celer_error *err);
/* Maps tokenizer.json's normalizer, pre_tokenizer and decoder onto t (whose vocabulary and text
 * index are built); what names the file in messages. */
celer_status tok_json_pipeline(celer_tokenizer *t, const struct cJSON *root, const char *what, celer_error *err);

/* ---- encoding (bpe.c, encode.c) ---- */
typedef struct {
    int32_t *ids;
    size_t   n, cap;
} tok_ids;

typedef struct {
    int32_t id;
    int32_t prev, next; /* neighbours in the word; -1 at the ends */
} tok_symbol;

typedef struct {
    uint32_t rank, pos;
    int32_t  merged;
} tok_merge;

/* A direct-mapped cache of short pieces already encoded in this call: prose repeats its words. */
#define TOK_CACHE_SLOTS 8192
#define TOK_CACHE_KEY   23
#define TOK_CACHE_IDS   8
typedef struct {
    uint8_t len, n_ids; /* len 0: empty */
    char    key[TOK_CACHE_KEY];
    int32_t ids[TOK_CACHE_IDS];
} tok_cache_slot;

/* Working memory of one encode call, grown as needed and reused across pieces. */
typedef struct {
    tok_cache_slot   *cache;    /* (TOK_CACHE_SLOTS), made after the first pieces */
    uint32_t          n_pieces;
    tok_symbol       *sym;
    size_t            sym_cap;
    tok_merge        *heap;
    size_t            heap_cap;
    celer_regex_stack re;
    char             *buf[2]; /* normalization and respelling */
    size_t            buf_cap[2];
} tok_scratch;

void         tok_scratch_free(tok_scratch *s);
celer_status tok_ids_push(tok_ids *v, int32_t id, celer_error *err);
/* Appends the ids of one pre-tokenized piece (in the vocabulary's spelling) to out; for
 * SentencePiece vocabularies tok_bpe_text cuts it into chunks first (see meta_chunks). */
celer_status tok_bpe_text(const celer_tokenizer *t, const char *s, size_t n, tok_ids *out, tok_scratch *sc,
                          celer_error *err);
celer_status tok_bpe_piece(const celer_tokenizer *t, const char *s, size_t n, tok_ids *out, tok_scratch *sc,
                           celer_error *err);

/* The GPT-2 byte alphabet: byte b is spelled as code point tok_byte_to_cp(b). */
uint32_t tok_byte_to_cp(uint8_t b);
int      tok_cp_to_byte(uint32_t cp); /* -1 when cp is not in the alphabet */

#endif
