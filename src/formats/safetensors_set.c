/* safetensors: the shards of one checkpoint in a model directory (see safetensors.h). */
#include "formats/safetensors.h"

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/json.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define INDEX_NAME     "model.safetensors.index.json"
#define SINGLE_NAME    "model.safetensors"
#define INDEX_MAX_SIZE (64u << 20) /* bytes; the largest real indexes are a few MB */

typedef unsigned long long ull;

/* 1: a regular file, 0: nothing there, -1: something else or an error (err set). */
static int is_file(const char *path, celer_error *err)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) return 0;
        celer_fail(err, CELER_ERR_IO, "safetensors: %s: cannot stat: %s", path, strerror(errno));
        return -1;
    }
    return S_ISREG(sb.st_mode) ? 1 : 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void free_names(char **names, uint32_t n)
{
    if (!names) return;
    for (uint32_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* ---- which files -------------------------------------------------------------------------- */

static bool is_model_shard(const char *name)
{
    static const char prefix[] = "model", suffix[] = ".safetensors";
    size_t            n = strlen(name), p = sizeof prefix - 1, s = sizeof suffix - 1;
    return n >= p + s && memcmp(name, prefix, p) == 0 && memcmp(name + n - s, suffix, s) == 0;
}

/* Every model*.safetensors in dir, sorted. */
static celer_status scan_dir(const char *dir, char ***out, uint32_t *n_out, celer_error *err)
{
    DIR *d = opendir(dir);
    if (!d) return celer_fail(err, CELER_ERR_IO, "safetensors: %s: cannot list the directory: %s", dir, strerror(errno));
    char        **names = NULL;
    uint32_t      n = 0, cap = 0;
    celer_status  s = CELER_OK;
    struct dirent *de;
    while (s == CELER_OK && (de = readdir(d)) != NULL) {
        if (!is_model_shard(de->d_name)) continue;
        if (n == cap) {
            uint32_t cap2 = cap ? cap * 2 : 8;
            char   **n2   = realloc(names, cap2 * sizeof *n2);
            if (!n2) {
                s = celer_fail(err, CELER_ERR_OOM, "safetensors: %s: out of memory listing shards", dir);
                break;
            }
            names = n2;
            cap   = cap2;
        }
        if (!(names[n] = strdup(de->d_name)))
            s = celer_fail(err, CELER_ERR_OOM, "safetensors: %s: out of memory listing shards", dir);
        else n++;
    }
    closedir(d);
    if (s == CELER_OK && n == 0)
        s = celer_fail(err, CELER_ERR_IO,
                       "safetensors: %s: no " INDEX_NAME ", " SINGLE_NAME " or model*.safetensors here; "
                       "is this a Hugging Face or MLX model directory?",
                       dir);
    if (s != CELER_OK) {
        free_names(names, n);
        return s;
    }
    qsort(names, n, sizeof *names, cmp_str);
    *out   = names;
    *n_out = n;
    return CELER_OK;
}

/* One weight_map entry. */
typedef struct {
    const char *tensor;
    const char *shard;
} map_entry;

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const map_entry *)a)->tensor, ((const map_entry *)b)->tensor);
}

/* A shard name must be a plain file name in the directory. */
static bool shard_name_ok(const char *s)
{
    return s[0] && !strchr(s, '/') && !strchr(s, '\\') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/* Reads weight_map of the index into *entries (sorted by tensor; strings point into root) and the
 * distinct shard names into *names (sorted, owned). */
static celer_status read_index(const char *index, const cJSON *root, map_entry **entries, uint32_t *n_entries,
                               char ***names, uint32_t *n_names, celer_error *err)
{
    const cJSON *map = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(map))
        return celer_fail(err, CELER_ERR_FORMAT, "safetensors: %s: no 'weight_map' object; the index is damaged, "
                          "download it again", index);
    int n = cJSON_GetArraySize(map);
    if (n <= 0) return celer_fail(err, CELER_ERR_FORMAT, "safetensors: %s: 'weight_map' is empty", index);
    map_entry *e = calloc((size_t)n, sizeof *e);
    *entries     = e;
    *names       = calloc((size_t)n, sizeof **names);
    if (!e || !*names) return celer_fail(err, CELER_ERR_OOM, "safetensors: %s: out of memory", index);
    const cJSON *it = NULL;
    uint32_t     i  = 0;
    cJSON_ArrayForEach(it, map)
    {
        if (!cJSON_IsString(it))
            return celer_fail(err, CELER_ERR_FORMAT, "safetensors: %s: weight_map['%s'] must be a shard file name",
                              index, it->string);
        if (!shard_name_ok(it->valuestring))
            return celer_fail(err, CELER_ERR_FORMAT,
                              "safetensors: %s: weight_map['%s'] names shard '%s', which is not a plain file "
                              "name in the model directory",
                              index, it->string, it->valuestring);
        e[i].tensor  = it->string;
        e[i++].shard = it->valuestring;
    }
    *n_entries = i;
    qsort(e, i, sizeof *e, cmp_entry);
    for (uint32_t k = 1; k < i; k++)
        if (strcmp(e[k - 1].tensor, e[k].tensor) == 0)
            return celer_fail(err, CELER_ERR_FORMAT, "safetensors: %s: weight_map lists tensor '%s' twice", index,
                              e[k].tensor);
    /* distinct shards */
    const char **tmp = malloc(i * sizeof *tmp);
    if (!tmp) return celer_fail(err, CELER_ERR_OOM, "safetensors: %s: out of memory", index);
    for (uint32_t k = 0; k < i; k++) tmp[k] = e[k].shard;
    qsort(tmp, i, sizeof *tmp, cmp_str);
    celer_status s = CELER_OK;
    for (uint32_t k = 0; k < i && s == CELER_OK; k++) {
        if (k && strcmp(tmp[k - 1], tmp[k]) == 0) continue;
        if (!((*names)[*n_names] = strdup(tmp[k]))) s = celer_fail(err, CELER_ERR_OOM, "safetensors: out of memory");
        else (*n_names)++;
    }
    free(tmp);
    return s;
}

/* ---- opening --------------------------------------------------------------------------------- */

/* Opens the shards named (relative to s->dir, or as given when dir is NULL); e: the index's
 * entries (n_e of them, NULL without an index), to say which tensors a shard that cannot be read
 * holds. */
static celer_status open_files(celer_safetensors_set *s, const char *dir, char **names, uint32_t n,
                               const map_entry *e, uint32_t n_e, celer_error *err)
{
    s->files = calloc(n ? n : 1, sizeof *s->files);
    if (!s->files) return celer_fail(err, CELER_ERR_OOM, "safetensors: out of memory");
    for (uint32_t i = 0; i < n; i++) {
        char *path = dir ? celer_path_join(dir, names[i]) : strdup(names[i]);
        if (!path) return celer_fail(err, CELER_ERR_OOM, "safetensors: out of memory");
        celer_status st = celer_safetensors_open(&s->files[i], path, err);
        if (st == CELER_ERR_IO && s->index_path && err) {
            char        inner[sizeof err->msg];
            const char *first = NULL;
            uint32_t    n_in  = 0;
            for (uint32_t k = 0; k < n_e; k++)
                if (strcmp(e[k].shard, names[i]) == 0 && n_in++ == 0) first = e[k].tensor;
            char more[48] = "";
            if (n_in > 1) snprintf(more, sizeof more, " and %u more", n_in - 1);
            memcpy(inner, err->msg, sizeof inner);
            celer_fail(err, st, "safetensors: %s names shard '%s', which cannot be read (%s), for tensor '%s'%s; "
                       "download it again", s->index_path, names[i], inner, first ? first : "?", more);
        }
        free(path);
        if (st != CELER_OK) return st;
        s->n_files = i + 1;
    }
    return CELER_OK;
}

static int cmp_set_entry(const void *a, const void *b)
{
    return strcmp(((const celer_st_entry *)a)->tensor->name, ((const celer_st_entry *)b)->tensor->name);
}

/* The name-sorted table over all shards; a name in two shards is an error. */
static celer_status build_table(celer_safetensors_set *s, celer_error *err)
{
    uint64_t n = 0;
    for (uint32_t f = 0; f < s->n_files; f++) n += s->files[f].n_tensors;
    s->tensors = calloc((size_t)n + 1, sizeof *s->tensors);
    if (!s->tensors) return celer_fail(err, CELER_ERR_OOM, "safetensors: out of memory for %llu tensors", (ull)n);
    for (uint32_t f = 0; f < s->n_files; f++)
        for (uint64_t i = 0; i < s->files[f].n_tensors; i++)
            s->tensors[s->n_tensors++] = (celer_st_entry){&s->files[f].tensors[i], f};
    qsort(s->tensors, (size_t)n, sizeof *s->tensors, cmp_set_entry);
    for (uint64_t i = 1; i < n; i++) {
        const celer_st_entry *a = &s->tensors[i - 1], *b = &s->tensors[i];
        if (strcmp(a->tensor->name, b->tensor->name) == 0)
            return celer_fail(err, CELER_ERR_FORMAT,
                              "safetensors: %s: tensor '%s' is in both %s and %s; the directory mixes two "
                              "checkpoints, remove the stray file",
                              s->dir, b->tensor->name, s->files[a->file].name, s->files[b->file].name);
    }
    return CELER_OK;
}

/* Every tensor weight_map names must be in the shard it names. */
static celer_status check_index(const celer_safetensors_set *s, const map_entry *e, uint32_t n, char **names,
                                celer_error *err)
{
    for (uint32_t i = 0; i < n; i++) {
        const char **hit = bsearch(&e[i].shard, names, s->n_files, sizeof *names, cmp_str);
        CELER_ASSERT(hit != NULL);
        const celer_safetensors *f = &s->files[(const char *const *)hit - (const char *const *)names];
        if (!celer_safetensors_find(f, e[i].tensor))
            return celer_fail(err, CELER_ERR_FORMAT,
                              "safetensors: %s says tensor '%s' is in shard '%s', but that shard has no such "
                              "tensor; the shard and the index come from different downloads",
                              s->index_path, e[i].tensor, e[i].shard);
    }
    return CELER_OK;
}

static celer_status open_indexed(celer_safetensors_set *s, celer_error *err)
{
    cJSON       *root    = NULL;
    map_entry   *entries = NULL;
    char       **names   = NULL;
    uint32_t     n_e = 0, n_names = 0;
    celer_status st = celer_json_read_file(s->index_path, INDEX_MAX_SIZE, &root, err);
    if (st == CELER_OK) st = read_index(s->index_path, root, &entries, &n_e, &names, &n_names, err);
    if (st == CELER_OK) st = open_files(s, s->dir, names, n_names, entries, n_e, err);
    if (st == CELER_OK) st = check_index(s, entries, n_e, names, err);
    if (st == CELER_OK) st = build_table(s, err);
    free_names(names, n_names);
    free(entries);
    cJSON_Delete(root);
    return st;
}

static celer_status open_dir(celer_safetensors_set *s, celer_error *err)
{
    s->index_path = celer_path_join(s->dir, INDEX_NAME);
    char *single  = celer_path_join(s->dir, SINGLE_NAME);
    if (!s->index_path || !single) {
        free(single);
        return celer_fail(err, CELER_ERR_OOM, "safetensors: out of memory");
    }
    int          has_index = is_file(s->index_path, err);
    int          has_one   = has_index == 0 ? is_file(single, err) : 0;
    celer_status st        = CELER_OK;
    if (has_index < 0 || has_one < 0) st = err ? err->code : CELER_ERR_IO;
    else if (has_index) st = open_indexed(s, err);
    else {
        free(s->index_path);
        s->index_path  = NULL;
        char   **names = NULL;
        uint32_t n     = 0;
        if (has_one) {
            names = malloc(sizeof *names);
            if (names && (names[0] = strdup(SINGLE_NAME))) n = 1;
            else st = celer_fail(err, CELER_ERR_OOM, "safetensors: out of memory");
        } else st = scan_dir(s->dir, &names, &n, err);
        if (st == CELER_OK) st = open_files(s, s->dir, names, n, NULL, 0, err);
        if (st == CELER_OK) st = build_table(s, err);
        free_names(names, n);
    }
    free(single);
    return st;
}

celer_status celer_safetensors_set_open(celer_safetensors_set *s, const char *path, celer_error *err)
{
    memset(s, 0, sizeof *s);
    s->dir = strdup(path);
    if (!s->dir) return celer_fail(err, CELER_ERR_OOM, "safetensors: out of memory");
    struct stat sb;
    celer_status st;
    if (stat(path, &sb) != 0)
        st = celer_fail(err, CELER_ERR_IO, "safetensors: %s: cannot open: %s", path, strerror(errno));
    else if (S_ISDIR(sb.st_mode)) st = open_dir(s, err);
    else {
        char *one = s->dir;
        st        = open_files(s, NULL, &one, 1, NULL, 0, err);
        if (st == CELER_OK) st = build_table(s, err);
    }
    if (st != CELER_OK) celer_safetensors_set_close(s);
    return st;
}

void celer_safetensors_set_close(celer_safetensors_set *s)
{
    if (!s) return;
    for (uint32_t i = 0; i < s->n_files; i++) celer_safetensors_close(&s->files[i]);
    free(s->files);
    free(s->tensors);
    free(s->index_path);
    free(s->dir);
    memset(s, 0, sizeof *s);
}

const celer_st_tensor *celer_safetensors_set_find(const celer_safetensors_set *s, const char *name)
{
    if (!s || !name) return NULL;
    uint64_t lo = 0, hi = s->n_tensors;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        int      c   = strcmp(name, s->tensors[mid].tensor->name);
        if (c == 0) return s->tensors[mid].tensor;
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}
