/* GGUF reader (versions 2 and 3, little-endian). Parses the header of a mapped file into
 * key/value and tensor tables whose strings and data are views into the mapping. Every count,
 * length and offset is checked against the file size before use; a bad file is an error naming
 * the file, the field and the byte offset. */
#ifndef CELER_FORMATS_GGUF_H
#define CELER_FORMATS_GGUF_H

#include "celer.h"
#include "core/mapped_file.h"
#include "quant/ggml_types.h"

/* Metadata value types, numbered as in the GGUF spec. */
typedef enum {
    CELER_GGUF_UINT8   = 0,
    CELER_GGUF_INT8    = 1,
    CELER_GGUF_UINT16  = 2,
    CELER_GGUF_INT16   = 3,
    CELER_GGUF_UINT32  = 4,
    CELER_GGUF_INT32   = 5,
    CELER_GGUF_FLOAT32 = 6,
    CELER_GGUF_BOOL    = 7,
    CELER_GGUF_STRING  = 8, /* uint64 length, then that many bytes (UTF-8, not NUL-terminated) */
    CELER_GGUF_ARRAY   = 9, /* uint32 element type, uint64 count, then the elements */
    CELER_GGUF_UINT64  = 10,
    CELER_GGUF_INT64   = 11,
    CELER_GGUF_FLOAT64 = 12,
    CELER_GGUF_TYPE_COUNT
} celer_gguf_type;

/* A string inside the mapping. */
typedef struct {
    const char *ptr;
    uint64_t    len;
} celer_gguf_str;

/* One metadata entry. For arrays, data points at the first element and the elements are laid
 * out as in the file (strings and nested arrays have variable size: walk them with
 * celer_gguf_array_*). */
typedef struct {
    celer_gguf_str  key;
    celer_gguf_type type;
    uint64_t        offset;     /* byte offset of the value in the file, for messages */
    const uint8_t  *data;       /* the value (scalars, strings) or the first array element */
    celer_gguf_type array_type; /* arrays: element type */
    uint64_t        array_len;  /* arrays: element count */
} celer_gguf_kv;

typedef struct {
    celer_gguf_str   name;
    uint32_t         n_dims;    /* 1..4 */
    uint64_t         ne[4];     /* elements per dimension, ne[0] contiguous; unused dims are 1 */
    celer_ggml_type  type;
    uint64_t         offset;    /* relative to the data section; a multiple of the alignment */
    uint64_t         n_bytes;
    const uint8_t   *data;      /* into the mapping */
} celer_gguf_tensor;

/* Open-addressing name → position table (slots hold position + 1; 0 is empty). */
typedef struct {
    uint32_t *slots; /* (cap), cap a power of two */
    uint64_t  cap;
} celer_gguf_index;

typedef struct {
    celer_mapped_file  file;      /* zeroed when parsed from memory */
    const char        *name;      /* path or caller's name, for messages */
    uint32_t           version;
    uint64_t           n_kv;
    celer_gguf_kv     *kv;        /* (n_kv) */
    uint64_t           n_tensors;
    celer_gguf_tensor *tensors;   /* (n_tensors), in file order */
    celer_gguf_index   kv_index;
    celer_gguf_index   tensor_index;
    uint32_t           alignment; /* general.alignment, default 32 */
    uint64_t           data_offset;
} celer_gguf;

/* Maps and parses path. On failure g stays freeable. */
celer_status celer_gguf_open(celer_gguf *g, const char *path, celer_error *err);
/* Parses an in-memory image (used by the fuzzer and tests); data must outlive g. name is used
 * in messages. */
celer_status celer_gguf_parse(celer_gguf *g, const uint8_t *data, uint64_t size, const char *name,
                              celer_error *err);
void         celer_gguf_close(celer_gguf *g);

const char *celer_gguf_type_name(celer_gguf_type t);

/* ---- lookups: NULL / false when absent ---- */
const celer_gguf_kv     *celer_gguf_find(const celer_gguf *g, const char *key);
const celer_gguf_tensor *celer_gguf_find_tensor(const celer_gguf *g, const char *name);
bool                     celer_gguf_str_eq(celer_gguf_str s, const char *c);

/* Typed getters: CELER_OK with *v set when the key exists and converts without loss (any
 * integer type into the range of the target, float32/64 for doubles); CELER_ERR_FORMAT naming
 * the key when it exists with another type; when absent, CELER_OK and *found = false (found
 * may be NULL when the caller supplied a default in *v). */
celer_status celer_gguf_get_u64(const celer_gguf *g, const char *key, uint64_t *v, bool *found, celer_error *err);
celer_status celer_gguf_get_i64(const celer_gguf *g, const char *key, int64_t *v, bool *found, celer_error *err);
celer_status celer_gguf_get_f64(const celer_gguf *g, const char *key, double *v, bool *found, celer_error *err);
celer_status celer_gguf_get_bool(const celer_gguf *g, const char *key, bool *v, bool *found, celer_error *err);
celer_status celer_gguf_get_str(const celer_gguf *g, const char *key, celer_gguf_str *v, bool *found,
                                celer_error *err);

/* Array walking. celer_gguf_array_next advances *cursor (start it at kv->data) past one element
 * of kv's element type and returns that element's start; the header was validated at open, so
 * this cannot run past the mapping. */
const uint8_t *celer_gguf_array_next(const celer_gguf_kv *kv, const uint8_t **cursor);
/* An element of an array of arrays, as an array entry of its own (no key) to walk. */
celer_gguf_kv  celer_gguf_nested(const uint8_t *p);
/* A string element (p points at its uint64 length). */
celer_gguf_str celer_gguf_read_str(const uint8_t *p);
/* Scalar element readers (p points at one element of that type). */
int64_t  celer_gguf_read_int(const uint8_t *p, celer_gguf_type t);
double   celer_gguf_read_float(const uint8_t *p, celer_gguf_type t);

#endif
