/* generation_config.json and tokenizer_config.json (see hf_config.h). */
#include "formats/hf_config.h"

#include "core/error.h"
#include "core/json.h"
#include "core/mapped_file.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SIDE_MAX_SIZE     (64u << 20) /* tokenizer_config.json with its added tokens can be MBs */
#define TEMPLATE_MAX_SIZE (16u << 20)
#define TEMPLATE_DIR      "additional_chat_templates" /* transformers' CHAT_TEMPLATE_DIR */


/* 1 when path exists, 0 when it does not; -1 with err set when it cannot be checked. */
static int exists(const char *path, celer_error *err)
{
    struct stat sb;
    if (stat(path, &sb) == 0) return 1;
    if (errno == ENOENT || errno == ENOTDIR) return 0;
    celer_fail(err, CELER_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    return -1;
}

/* Reads the JSON file dir/name into *root when it exists (*root stays NULL when it does not). */
static celer_status read_optional(const char *dir, const char *name, cJSON **root, celer_error *err)
{
    *root      = NULL;
    char *path = celer_path_join(dir, name);
    if (!path) return celer_fail(err, CELER_ERR_OOM, "%s: out of memory", name);
    int          e = exists(path, err);
    celer_status s = e < 0 ? (err ? err->code : CELER_ERR_IO) : CELER_OK;
    if (e > 0) s = celer_json_read_file(path, SIDE_MAX_SIZE, root, err);
    free(path);
    return s;
}

/* ---- generation_config.json ------------------------------------------------------------- */

static celer_status get_ranged(const cJSON *obj, const char *key, const char *what, double lo, double hi,
                               bool lo_open, double *v, celer_error *err)
{
    double       d = 0;
    bool         found;
    celer_status s = celer_json_get_double(obj, key, what, &d, &found, err);
    if (s != CELER_OK || !found) return s;
    if (d < lo || d > hi || (lo_open && d == lo))
        return celer_fail(err, CELER_ERR_FORMAT, "%s: '%s' is %g; it must be in %c%g, %g]", what, key, d,
                          lo_open ? '(' : '[', lo, hi);
    *v = d;
    return CELER_OK;
}

static celer_status gen_from_json(celer_hf_generation_config *g, const cJSON *root, const char *what,
                                  celer_error *err)
{
    if (!cJSON_IsObject(root)) return celer_fail(err, CELER_ERR_FORMAT, "%s: must be a JSON object", what);
    g->present     = true;
    celer_status s = celer_hf_ids_read(root, "bos_token_id", what, &g->bos_token_id, err);
    if (s == CELER_OK) s = celer_hf_ids_read(root, "eos_token_id", what, &g->eos_token_id, err);
    if (s == CELER_OK) s = celer_json_get_int(root, "pad_token_id", what, INT32_MIN, INT32_MAX, &g->pad_token_id, NULL, err);
    if (g->pad_token_id < 0) g->pad_token_id = -1; /* old Llama configs say -1 for none */
    if (s == CELER_OK) s = get_ranged(root, "temperature", what, 0, 1e9, false, &g->temperature, err);
    if (s == CELER_OK) s = get_ranged(root, "top_p", what, 0, 1, false, &g->top_p, err);
    if (s == CELER_OK) s = get_ranged(root, "min_p", what, 0, 1, false, &g->min_p, err);
    if (s == CELER_OK) s = get_ranged(root, "repetition_penalty", what, 0, 1e9, true, &g->repetition_penalty, err);
    if (s == CELER_OK) s = celer_json_get_int(root, "top_k", what, 0, INT32_MAX, &g->top_k, NULL, err);
    if (s == CELER_OK) s = celer_json_get_int(root, "max_new_tokens", what, 0, INT32_MAX, &g->max_new_tokens, NULL, err);
    if (s == CELER_OK) s = celer_json_get_int(root, "max_length", what, 0, INT32_MAX, &g->max_length, NULL, err);
    bool v = false, found = false;
    if (s == CELER_OK) s = celer_json_get_bool(root, "do_sample", what, &v, &found, err);
    if (found) g->do_sample = v;
    return s;
}

static void gen_reset(celer_hf_generation_config *g)
{
    memset(g, 0, sizeof *g);
    g->pad_token_id = g->top_k = g->max_new_tokens = g->max_length = -1;
    g->temperature = g->top_p = g->min_p = g->repetition_penalty = -1;
    g->do_sample                                                = -1;
}

celer_status celer_hf_generation_config_parse(celer_hf_generation_config *g, const char *text, size_t len,
                                              const char *what, celer_error *err)
{
    gen_reset(g);
    cJSON       *root = NULL;
    celer_status s    = celer_json_parse(text, len, what, &root, err);
    if (s == CELER_OK) s = gen_from_json(g, root, what, err);
    cJSON_Delete(root);
    if (s != CELER_OK) celer_hf_generation_config_free(g);
    return s;
}

celer_status celer_hf_generation_config_load(celer_hf_generation_config *g, const char *dir, celer_error *err)
{
    gen_reset(g);
    cJSON       *root = NULL;
    celer_status s    = read_optional(dir, "generation_config.json", &root, err);
    if (s == CELER_OK && root) {
        char *what = celer_path_join(dir, "generation_config.json");
        s          = what ? gen_from_json(g, root, what, err) : celer_fail(err, CELER_ERR_OOM, "out of memory");
        free(what);
    }
    cJSON_Delete(root);
    if (s != CELER_OK) celer_hf_generation_config_free(g);
    return s;
}

void celer_hf_generation_config_free(celer_hf_generation_config *g)
{
    if (!g) return;
    celer_hf_ids_free(&g->bos_token_id);
    celer_hf_ids_free(&g->eos_token_id);
    memset(g, 0, sizeof *g);
}

/* ---- tokenizer_config.json -------------------------------------------------------------- */

/* A special token: a string, or an AddedToken object {"content": "<s>", ...}. */
static celer_status read_token(const cJSON *obj, const char *key, const char *what, char **dst, celer_error *err)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!it || cJSON_IsNull(it)) return CELER_OK;
    if (cJSON_IsObject(it)) it = cJSON_GetObjectItemCaseSensitive(it, "content");
    if (!cJSON_IsString(it))
        return celer_fail(err, CELER_ERR_FORMAT, "%s: '%s' must be a string or an object with a string 'content'",
                          what, key);
    if (!(*dst = strdup(it->valuestring))) return celer_fail(err, CELER_ERR_OOM, "%s: out of memory", what);
    return CELER_OK;
}

static void free_templates(celer_hf_chat_template *t, uint32_t n)
{
    for (uint32_t i = 0; t && i < n; i++) {
        free(t[i].name);
        free(t[i].text);
    }
    free(t);
}

/* Appends (name, text), both copied unless own is set (then they are taken, also on failure). */
static celer_status add_template(celer_hf_tokenizer_config *t, char *name, char *text, bool own, const char *what,
                                 celer_error *err)
{
    celer_status s = CELER_OK;
    for (uint32_t i = 0; i < t->n_templates && s == CELER_OK; i++)
        if (strcmp(t->templates[i].name, name) == 0)
            s = celer_fail(err, CELER_ERR_FORMAT, "%s: chat template '%s' is given twice", what, name);
    char *nm = NULL, *tx = NULL;
    if (s == CELER_OK) {
        celer_hf_chat_template *n2 = realloc(t->templates, (t->n_templates + 1) * sizeof *n2);
        if (n2) t->templates = n2;
        nm = own ? name : strdup(name);
        tx = own ? text : strdup(text);
        if (n2 && nm && tx) {
            t->templates[t->n_templates++] = (celer_hf_chat_template){nm, tx};
            return CELER_OK;
        }
        s = celer_fail(err, CELER_ERR_OOM, "%s: out of memory", what);
    }
    if (own) {
        free(name);
        free(text);
    } else {
        free(nm);
        free(tx);
    }
    return s;
}

static celer_status read_chat_templates(celer_hf_tokenizer_config *t, const cJSON *root, const char *what,
                                        celer_error *err)
{
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(root, "chat_template");
    if (!ct || cJSON_IsNull(ct)) return CELER_OK;
    if (cJSON_IsString(ct)) return add_template(t, "default", ct->valuestring, false, what, err);
    if (!cJSON_IsArray(ct))
        return celer_fail(err, CELER_ERR_FORMAT,
                          "%s: 'chat_template' must be a string or a list of {\"name\", \"template\"} objects", what);
    const cJSON *e = NULL;
    int          i = 0;
    cJSON_ArrayForEach(e, ct)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(e, "template");
        if (!cJSON_IsString(name) || !cJSON_IsString(text))
            return celer_fail(err, CELER_ERR_FORMAT,
                              "%s: chat_template[%d] must be an object with string 'name' and 'template'", what, i);
        celer_status s = add_template(t, name->valuestring, text->valuestring, false, what, err);
        if (s != CELER_OK) return s;
        i++;
    }
    return CELER_OK;
}

static celer_status tok_from_json(celer_hf_tokenizer_config *t, const cJSON *root, const char *what,
                                  celer_error *err)
{
    if (!cJSON_IsObject(root)) return celer_fail(err, CELER_ERR_FORMAT, "%s: must be a JSON object", what);
    t->present     = true;
    celer_status s = read_chat_templates(t, root, what, err);
    if (s == CELER_OK) s = read_token(root, "bos_token", what, &t->bos_token, err);
    if (s == CELER_OK) s = read_token(root, "eos_token", what, &t->eos_token, err);
    if (s == CELER_OK) s = read_token(root, "pad_token", what, &t->pad_token, err);
    if (s == CELER_OK) s = read_token(root, "unk_token", what, &t->unk_token, err);
    bool v = false, found = false;
    if (s == CELER_OK) s = celer_json_get_bool(root, "add_bos_token", what, &v, &found, err);
    if (found) t->add_bos_token = v;
    found = false;
    if (s == CELER_OK) s = celer_json_get_bool(root, "add_eos_token", what, &v, &found, err);
    if (found) t->add_eos_token = v;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model_max_length");
    if (s == CELER_OK && m && !cJSON_IsNull(m)) {
        /* transformers writes int(1e30) (VERY_LARGE_INTEGER) for "no limit" */
        if (!cJSON_IsNumber(m) || !(m->valuedouble >= 0))
            s = celer_fail(err, CELER_ERR_FORMAT, "%s: 'model_max_length' must be a non-negative number", what);
        else if (!celer_json_is_int(m, 0, INT64_C(1) << 53, &t->model_max_length))
            t->model_max_length = 0;
    }
    return s;
}

static void tok_reset(celer_hf_tokenizer_config *t)
{
    memset(t, 0, sizeof *t);
    t->add_bos_token = t->add_eos_token = -1;
}

celer_status celer_hf_tokenizer_config_parse(celer_hf_tokenizer_config *t, const char *text, size_t len,
                                             const char *what, celer_error *err)
{
    tok_reset(t);
    cJSON       *root = NULL;
    celer_status s    = celer_json_parse(text, len, what, &root, err);
    if (s == CELER_OK) s = tok_from_json(t, root, what, err);
    cJSON_Delete(root);
    if (s != CELER_OK) celer_hf_tokenizer_config_free(t);
    return s;
}

/* Reads path as template name into list when it exists. */
static celer_status read_template_file(celer_hf_tokenizer_config *list, const char *path, const char *name,
                                       celer_error *err)
{
    int e = exists(path, err);
    if (e <= 0) return e < 0 ? (err ? err->code : CELER_ERR_IO) : CELER_OK;
    char        *text = NULL;
    celer_status s    = celer_file_read_all(path, TEMPLATE_MAX_SIZE, &text, NULL, err);
    if (s != CELER_OK) return s;
    char *nm = strdup(name);
    if (!nm) {
        free(text);
        return celer_fail(err, CELER_ERR_OOM, "%s: out of memory", path);
    }
    return add_template(list, nm, text, true, path, err);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* additional_chat_templates/<name>.jinja, in name order. */
static celer_status read_template_dir(celer_hf_tokenizer_config *list, const char *dir, celer_error *err)
{
    char *tdir = celer_path_join(dir, TEMPLATE_DIR);
    if (!tdir) return celer_fail(err, CELER_ERR_OOM, "out of memory");
    DIR *d = opendir(tdir);
    if (!d) {
        int e = errno;
        free(tdir);
        return e == ENOENT || e == ENOTDIR ? CELER_OK
                                           : celer_fail(err, CELER_ERR_IO, "%s/%s: cannot list: %s", dir,
                                                        TEMPLATE_DIR, strerror(e));
    }
    char        **names = NULL;
    size_t        n = 0;
    celer_status  s = CELER_OK;
    struct dirent *de;
    while (s == CELER_OK && (de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len <= 6 || strcmp(de->d_name + len - 6, ".jinja") != 0) continue;
        char **n2 = realloc(names, (n + 1) * sizeof *n2);
        char  *nm = n2 ? strdup(de->d_name) : NULL;
        if (n2) names = n2;
        if (!nm) s = celer_fail(err, CELER_ERR_OOM, "%s: out of memory", tdir);
        else names[n++] = nm;
    }
    closedir(d);
    if (names) qsort(names, n, sizeof *names, cmp_name);
    for (size_t i = 0; i < n && s == CELER_OK; i++) {
        char *path = celer_path_join(tdir, names[i]);
        names[i][strlen(names[i]) - 6] = '\0';
        s = path ? read_template_file(list, path, names[i], err) : celer_fail(err, CELER_ERR_OOM, "out of memory");
        free(path);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    free(tdir);
    return s;
}

/* Template files beside the config replace the config's templates (see hf_config.h). */
static celer_status read_template_files(celer_hf_tokenizer_config *t, const char *dir, celer_error *err)
{
    celer_hf_tokenizer_config files = {0};
    char                     *path  = celer_path_join(dir, "chat_template.jinja");
    celer_status s = path ? read_template_file(&files, path, "default", err) : celer_fail(err, CELER_ERR_OOM, "out of memory");
    free(path);
    if (s == CELER_OK) s = read_template_dir(&files, dir, err);
    if (s == CELER_OK && files.n_templates) {
        free_templates(t->templates, t->n_templates);
        t->templates            = files.templates;
        t->n_templates          = files.n_templates;
        t->templates_from_files = true;
        return CELER_OK;
    }
    free_templates(files.templates, files.n_templates);
    return s;
}

celer_status celer_hf_tokenizer_config_load(celer_hf_tokenizer_config *t, const char *dir, celer_error *err)
{
    tok_reset(t);
    cJSON       *root = NULL;
    celer_status s    = read_optional(dir, "tokenizer_config.json", &root, err);
    if (s == CELER_OK && root) {
        char *what = celer_path_join(dir, "tokenizer_config.json");
        s          = what ? tok_from_json(t, root, what, err) : celer_fail(err, CELER_ERR_OOM, "out of memory");
        free(what);
    }
    cJSON_Delete(root);
    if (s == CELER_OK) s = read_template_files(t, dir, err);
    if (s != CELER_OK) celer_hf_tokenizer_config_free(t);
    return s;
}

void celer_hf_tokenizer_config_free(celer_hf_tokenizer_config *t)
{
    if (!t) return;
    free_templates(t->templates, t->n_templates);
    free(t->bos_token);
    free(t->eos_token);
    free(t->pad_token);
    free(t->unk_token);
    memset(t, 0, sizeof *t);
}

const char *celer_hf_tokenizer_config_template(const celer_hf_tokenizer_config *t, const char *name)
{
    if (!t) return NULL;
    if (!name) name = "default";
    for (uint32_t i = 0; i < t->n_templates; i++)
        if (strcmp(t->templates[i].name, name) == 0) return t->templates[i].text;
    return NULL;
}
