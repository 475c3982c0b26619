/* JSON through cJSON (Debian: libcjson-dev), with errors that name file and byte offset. */
#ifndef CELER_CORE_JSON_H
#define CELER_CORE_JSON_H

#include "celer.h"

#include <cjson/cJSON.h>

/* Parses len bytes of text (need not be NUL-terminated). what names the source in messages
 * (a path, or "path: header"). On failure *out is NULL and err names the byte offset. */
celer_status celer_json_parse(const char *text, size_t len, const char *what, cJSON **out, celer_error *err);
/* Reads and parses a JSON file of at most max_size bytes. */
celer_status celer_json_read_file(const char *path, uint64_t max_size, cJSON **out, celer_error *err);

/* Typed field access. Each returns CELER_OK and sets *v when the key is present with the right
 * type; leaves *v unchanged when absent (returns CELER_OK with *found = false where given);
 * a present key of the wrong type or out of range is CELER_ERR_FORMAT naming what.key. */
celer_status celer_json_get_int(const cJSON *obj, const char *key, const char *what, int64_t lo, int64_t hi,
                                int64_t *v, bool *found, celer_error *err);
celer_status celer_json_get_double(const cJSON *obj, const char *key, const char *what, double *v,
                                   bool *found, celer_error *err);
celer_status celer_json_get_bool(const cJSON *obj, const char *key, const char *what, bool *v, bool *found,
                                 celer_error *err);
/* *v points into obj (valid while obj lives). */
celer_status celer_json_get_string(const cJSON *obj, const char *key, const char *what, const char **v,
                                   bool *found, celer_error *err);

/* Text of obj (malloc'd) with every number written exactly: integers up to 2^53 as integers,
 * other values in the fewest digits that read back as the same double (cJSON's own printer
 * stops at 15 digits when the next ones are close, which changes the value). NULL when out of
 * memory. */
char *celer_json_print_exact(const cJSON *obj);
/* Adds key: v to obj as a float however round (8.0, not 8), in the digits print_exact uses:
 * for configs whose readers distinguish the two. NULL when out of memory. */
cJSON *celer_json_add_float(cJSON *obj, const char *key, double v);

/* A JSON number that is an exact integer within [lo, hi]. */
bool celer_json_is_int(const cJSON *item, int64_t lo, int64_t hi, int64_t *v);

#endif
