/* safetensors reader: one file, or a model directory of shards.
 *
 * File layout: an 8-byte little-endian header length N, then N bytes of JSON, then the data
 * section at byte 8 + N. The JSON is an object; each key names a tensor
 *     "model.embed_tokens.weight": {"dtype": "BF16", "shape": [49152, 576], "data_offsets": [0, 56623104]}
 * whose data_offsets [begin, end) are relative to the data section, and the optional key
 * "__metadata__" holds a string -> string map (MLX writes {"format": "mlx"}).
 *
 * Every field is checked before use: dtype known, shape an array of at most 8 non-negative
 * integers, element count and byte size free of overflow, end - begin equal to the byte size,
 * the range inside the file, no two ranges overlapping, no name twice. A bad file is
 * CELER_ERR_FORMAT naming the file, the tensor and the byte offset. Gaps between ranges and
 * bytes after the last one are accepted (the Rust reference rejects them; nothing depends on it).
 * Tensors are views into the mapping; nothing is copied. */
#ifndef CELER_FORMATS_SAFETENSORS_H
#define CELER_FORMATS_SAFETENSORS_H

#include "celer.h"
#include "core/mapped_file.h"

#define CELER_ST_MAX_DIMS   8
#define CELER_ST_MAX_HEADER 100000000u /* bytes of JSON header accepted, as the Rust reference */

/* Element types, spelled in files as the name after CELER_ST_ ("BF16", "F8_E4M3", ...). */
typedef enum {
    CELER_ST_BOOL,
    CELER_ST_U8,
    CELER_ST_I8,
    CELER_ST_U16,
    CELER_ST_I16,
    CELER_ST_U32,
    CELER_ST_I32,
    CELER_ST_U64,
    CELER_ST_I64,
    CELER_ST_F16,
    CELER_ST_BF16,
    CELER_ST_F32,
    CELER_ST_F64,
    CELER_ST_C64,         /* complex: two F32 */
    CELER_ST_F8_E4M3,     /* OCP E4M3 "fn" */
    CELER_ST_F8_E5M2,
    CELER_ST_F8_E4M3FNUZ,
    CELER_ST_F8_E5M2FNUZ,
    CELER_ST_F8_E8M0,     /* power-of-two scale of the MX formats */
    CELER_ST_F6_E2M3,     /* 6 bits, packed */
    CELER_ST_F6_E3M2,     /* 6 bits, packed */
    CELER_ST_F4,          /* E2M1, two per byte */
    CELER_ST_DTYPE_COUNT
} celer_st_dtype;

/* One tensor. Shape is stored as in the file: row-major, shape[n_dims - 1] contiguous. */
typedef struct {
    const char    *name;    /* NUL-terminated; owned by the reader */
    celer_st_dtype dtype;
    uint32_t       n_dims;  /* 0 (a scalar) .. CELER_ST_MAX_DIMS */
    uint64_t       shape[CELER_ST_MAX_DIMS]; /* (n_dims) sizes; unused entries are 1 */
    uint64_t       n_elems; /* product of shape; 1 for a scalar */
    uint64_t       offset;  /* data_offsets[0], relative to the data section */
    uint64_t       n_bytes; /* data_offsets[1] - data_offsets[0] */
    const uint8_t *data;    /* (n_bytes) into the mapping */
} celer_st_tensor;

/* One "__metadata__" entry; both strings owned by the reader. */
typedef struct {
    const char *key;
    const char *value;
} celer_st_meta;

typedef struct {
    celer_mapped_file file;        /* open(): the mapping; parse(): zeroed */
    char             *name;        /* path or the name given to parse(), for messages */
    uint64_t          header_len;  /* N */
    uint64_t          data_offset; /* 8 + N: file byte where the data section starts */
    uint64_t          n_tensors;
    celer_st_tensor  *tensors;     /* (n_tensors), sorted by name */
    uint64_t          n_meta;
    celer_st_meta    *meta;        /* (n_meta), in file order */
    char             *strings;     /* one allocation holding every name, key and value */
} celer_safetensors;

/* Maps path and parses it. On failure st stays freeable. */
celer_status celer_safetensors_open(celer_safetensors *st, const char *path, celer_error *err);
/* Parses an in-memory image (fuzzer, tests); data must outlive st. name is used in messages. */
celer_status celer_safetensors_parse(celer_safetensors *st, const uint8_t *data, uint64_t size,
                                     const char *name, celer_error *err);
/* Frees; safe on a zeroed struct, on NULL and twice. */
void         celer_safetensors_close(celer_safetensors *st);

/* The tensor called name, or NULL (binary search). */
const celer_st_tensor *celer_safetensors_find(const celer_safetensors *st, const char *name);
/* The "__metadata__" value for key, or NULL. */
const char *celer_safetensors_meta(const celer_safetensors *st, const char *key);

/* "BF16", "F8_E4M3", ... as spelled in files; "?" outside the enum. */
const char *celer_st_dtype_name(celer_st_dtype t);
/* Bits per element (4 for F4, 6 for F6_*, 16 for BF16, ...); 0 outside the enum. */
uint32_t    celer_st_dtype_bits(celer_st_dtype t);

/* ---- a model directory ------------------------------------------------------------------ */

/* The shards of one checkpoint, found in this order:
 *   1. model.safetensors.index.json: its "weight_map" {tensor: shard file} names the shards
 *      (plain file names in the directory); every tensor it lists must be in the shard it names;
 *   2. model.safetensors alone;
 *   3. every model*.safetensors in the directory, in name order (what mlx-lm globs).
 * A path to a regular file opens that one file. A tensor name present in two shards is an
 * error naming both. */
typedef struct {
    const celer_st_tensor *tensor; /* into files[file].tensors */
    uint32_t               file;   /* which shard holds it */
} celer_st_entry;

typedef struct {
    char              *dir;        /* owned copy of the path given */
    char              *index_path; /* the index file when one was used, else NULL */
    uint32_t           n_files;
    celer_safetensors *files;      /* (n_files) the shards, in name order */
    uint64_t           n_tensors;
    celer_st_entry    *tensors;    /* (n_tensors) every shard's tensors, sorted by name */
} celer_safetensors_set;

/* Opens every shard of the checkpoint at path (a directory or one file). On failure s stays
 * freeable. A missing shard is CELER_ERR_IO naming it; a bad index is CELER_ERR_FORMAT. */
celer_status celer_safetensors_set_open(celer_safetensors_set *s, const char *path, celer_error *err);
/* Frees; safe on a zeroed struct, on NULL and twice. */
void         celer_safetensors_set_close(celer_safetensors_set *s);
/* The tensor called name in whichever shard holds it, or NULL. */
const celer_st_tensor *celer_safetensors_set_find(const celer_safetensors_set *s, const char *name);

#endif
