#include "core/json.h"

#include "core/error.h"
#include "core/mapped_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

celer_status celer_json_parse(const char *text, size_t len, const char *what, cJSON **out, celer_error *err)
{
    const char *end  = NULL;
    cJSON      *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    *out             = root;
    if (!root) {
        size_t at = (end && end >= text && end <= text + len) ? (size_t)(end - text) : 0;
        return celer_fail(err, CELER_ERR_FORMAT, "%s: malformed JSON near byte %zu", what, at);
    }
    return CELER_OK;
}

celer_status celer_json_read_file(const char *path, uint64_t max_size, cJSON **out, celer_error *err)
{
    char        *text = NULL;
    uint64_t     n    = 0;
    celer_status st   = celer_file_read_all(path, max_size, &text, &n, err);
    *out              = NULL;
    if (st != CELER_OK) return st;
    st = celer_json_parse(text, (size_t)n, path, out, err);
    free(text);
    return st;
}

bool celer_json_is_int(const cJSON *item, int64_t lo, int64_t hi, int64_t *v)
{
    if (!cJSON_IsNumber(item)) return false;
    double d = item->valuedouble;
    /* doubles hold integers exactly up to 2^53 */
    if (!isfinite(d) || d != floor(d) || d < -9007199254740992.0 || d > 9007199254740992.0) return false;
    int64_t i = (int64_t)d;
    if (i < lo || i > hi) return false;
    *v = i;
    return true;
}

static const cJSON *field(const cJSON *obj, const char *key, bool *found)
{
    const cJSON *it = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
    if (it && cJSON_IsNull(it)) it = NULL; /* null means "not set" in HF configs */
    if (found) *found = it != NULL;
    return it;
}

celer_status celer_json_get_int(const cJSON *obj, const char *key, const char *what, int64_t lo, int64_t hi,
                                int64_t *v, bool *found, celer_error *err)
{
    const cJSON *it = field(obj, key, found);
    if (!it) return CELER_OK;
    if (!celer_json_is_int(it, lo, hi, v))
        return celer_fail(err, CELER_ERR_FORMAT, "%s: '%s' must be an integer in [%lld, %lld]", what, key,
                          (long long)lo, (long long)hi);
    return CELER_OK;
}

celer_status celer_json_get_double(const cJSON *obj, const char *key, const char *what, double *v,
                                   bool *found, celer_error *err)
{
    const cJSON *it = field(obj, key, found);
    if (!it) return CELER_OK;
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
        return celer_fail(err, CELER_ERR_FORMAT, "%s: '%s' must be a finite number", what, key);
    *v = it->valuedouble;
    return CELER_OK;
}

celer_status celer_json_get_bool(const cJSON *obj, const char *key, const char *what, bool *v, bool *found,
                                 celer_error *err)
{
    const cJSON *it = field(obj, key, found);
    if (!it) return CELER_OK;
    if (!cJSON_IsBool(it)) return celer_fail(err, CELER_ERR_FORMAT, "%s: '%s' must be true or false", what, key);
    *v = cJSON_IsTrue(it);
    return CELER_OK;
}

celer_status celer_json_get_string(const cJSON *obj, const char *key, const char *what, const char **v,
                                   bool *found, celer_error *err)
{
    const cJSON *it = field(obj, key, found);
    if (!it) return CELER_OK;
    if (!cJSON_IsString(it)) return celer_fail(err, CELER_ERR_FORMAT, "%s: '%s' must be a string", what, key);
    *v = it->valuestring;
    return CELER_OK;
}

/* v in the fewest significant digits that strtod reads back as v. */
static void exact_number(double v, char *out, size_t cap)
{
    if (!isfinite(v)) {
        snprintf(out, cap, "null"); /* JSON has no infinity or NaN; cJSON prints them so too */
        return;
    }
    if (v == floor(v) && fabs(v) <= 9007199254740992.0) {
        snprintf(out, cap, "%lld", (long long)v);
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(out, cap, "%.*g", p, v);
        if (strtod(out, NULL) == v) return;
    }
}

/* A copy of obj whose numbers are raw text written by exact_number. */
static cJSON *exact_copy(const cJSON *obj)
{
    if (cJSON_IsNumber(obj)) {
        char text[40];
        exact_number(obj->valuedouble, text, sizeof text);
        return cJSON_CreateRaw(text);
    }
    if (!cJSON_IsArray(obj) && !cJSON_IsObject(obj)) return cJSON_Duplicate(obj, true);
    cJSON *c = cJSON_IsArray(obj) ? cJSON_CreateArray() : cJSON_CreateObject();
    if (!c) return NULL;
    for (const cJSON *it = obj->child; it; it = it->next) {
        cJSON *e = exact_copy(it);
        if (!e) {
            cJSON_Delete(c);
            return NULL;
        }
        if (cJSON_IsArray(obj)) cJSON_AddItemToArray(c, e);
        else cJSON_AddItemToObject(c, it->string, e);
    }
    return c;
}

cJSON *celer_json_add_float(cJSON *obj, const char *key, double v)
{
    char text[48];
    exact_number(v, text, sizeof text);
    if (isfinite(v) && !strpbrk(text, ".e")) strcat(text, ".0");
    return cJSON_AddRawToObject(obj, key, text);
}

char *celer_json_print_exact(const cJSON *obj)
{
    cJSON *c = exact_copy(obj);
    if (!c) return NULL;
    char *text = cJSON_Print(c);
    cJSON_Delete(c);
    return text;
}

