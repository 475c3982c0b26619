/* Finding a model in the Hugging Face hub cache (hf_cache.h). */
#include "models/hf_cache.h"

#include "core/error.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void celer_hf_cache_dir(char *out, size_t cap)
{
    const char *v;
    if ((v = getenv("HF_HUB_CACHE")) && *v) snprintf(out, cap, "%s", v);
    else if ((v = getenv("HF_HOME")) && *v) snprintf(out, cap, "%s/hub", v);
    else if ((v = getenv("XDG_CACHE_HOME")) && *v) snprintf(out, cap, "%s/huggingface/hub", v);
    else snprintf(out, cap, "%s/.cache/huggingface/hub", (v = getenv("HOME")) && *v ? v : ".");
}

bool celer_hf_cache_is_id(const char *name)
{
    const char *slash = strchr(name, '/');
    if (!slash || slash == name || !slash[1] || strchr(slash + 1, '/')) return false;
    if (name[0] == '.' || slash[1] == '.') return false; /* ./x, ../x, x/.. */
    for (const char *p = name; *p; p++)
        if (!(*p == '/' || *p == '-' || *p == '_' || *p == '.' || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
              (*p >= 'A' && *p <= 'Z')))
            return false;
    return true;
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

celer_status celer_hf_cache_find(const char *name, char *out, size_t cap, celer_error *err)
{
    char cache[1024], repo[2048], ref[2200], rev[128] = "";
    celer_hf_cache_dir(cache, sizeof cache);
    const char *slash = strchr(name, '/');
    snprintf(repo, sizeof repo, "%s/models--%.*s--%s", cache, (int)(slash - name), name, slash + 1);
    if (!is_dir(repo))
        return celer_fail(err, CELER_ERR_IO, "%s: no such file or directory, and not in the Hugging Face cache (no "
                          "%s); download it (hf download %s) or give a path", name, repo, name);
    snprintf(ref, sizeof ref, "%s/refs/main", repo);
    FILE *f = fopen(ref, "r");
    if (f) {
        if (!fgets(rev, sizeof rev, f)) rev[0] = '\0';
        fclose(f);
        rev[strcspn(rev, "\r\n")] = '\0';
    }
    if (!rev[0] || strchr(rev, '/')) { /* no usable ref: the only snapshot */
        snprintf(ref, sizeof ref, "%s/snapshots", repo);
        DIR *d = opendir(ref);
        int  n = 0;
        for (struct dirent *e; d && (e = readdir(d));)
            if (e->d_name[0] != '.' && n++ == 0) snprintf(rev, sizeof rev, "%.*s", (int)sizeof rev - 1, e->d_name);
        if (d) closedir(d);
        if (n != 1)
            return celer_fail(err, n ? CELER_ERR_INVALID : CELER_ERR_IO,
                              "%s: %s has %d snapshots and no refs/main; give the snapshot folder as the path", name,
                              repo, n);
    }
    if (snprintf(out, cap, "%s/snapshots/%s", repo, rev) >= (int)cap || !is_dir(out))
        return celer_fail(err, CELER_ERR_IO, "%s: the Hugging Face cache names revision %s, but %s/snapshots/%s is "
                          "not there; download the model again", name, rev, repo, rev);
    return CELER_OK;
}
