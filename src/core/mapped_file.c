#include "core/mapped_file.h"

#include "core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Opens path for reading and checks it is a regular file; returns the fd or -1 with err set. */
static int open_regular(const char *path, struct stat *st, celer_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        celer_fail(err, CELER_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, st) != 0) {
        celer_fail(err, CELER_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        celer_fail(err, CELER_ERR_IO, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    return fd;
}

celer_status celer_mapped_file_open(celer_mapped_file *f, const char *path, celer_error *err)
{
    memset(f, 0, sizeof *f);
    struct stat st;
    int         fd = open_regular(path, &st, err);
    if (fd < 0) return err ? err->code : CELER_ERR_IO;
    f->path = strdup(path);
    if (!f->path) {
        close(fd);
        return celer_fail(err, CELER_ERR_OOM, "%s: out of memory", path);
    }
    f->size = (uint64_t)st.st_size;
    if (f->size > 0) {
        void *p = mmap(NULL, (size_t)f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            celer_mapped_file_close(f);
            return celer_fail(err, CELER_ERR_IO, "%s: cannot map %llu bytes: %s", path,
                              (unsigned long long)st.st_size, strerror(e));
        }
        f->data = p;
    }
    close(fd);
    return CELER_OK;
}

void celer_mapped_file_close(celer_mapped_file *f)
{
    if (!f) return;
    if (f->data) munmap((void *)f->data, (size_t)f->size);
    free(f->path);
    memset(f, 0, sizeof *f);
}

celer_status celer_file_read_all(const char *path, uint64_t max_size, char **out, uint64_t *size,
                                 celer_error *err)
{
    *out = NULL;
    struct stat st;
    int         fd = open_regular(path, &st, err);
    if (fd < 0) return err ? err->code : CELER_ERR_IO;
    if ((uint64_t)st.st_size > max_size) {
        close(fd);
        return celer_fail(err, CELER_ERR_FORMAT, "%s: file is %llu bytes, more than the %llu allowed here",
                          path, (unsigned long long)st.st_size, (unsigned long long)max_size);
    }
    size_t n   = (size_t)st.st_size;
    char  *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return celer_fail(err, CELER_ERR_OOM, "%s: out of memory reading %zu bytes", path, n);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : 0;
            close(fd);
            free(buf);
            return celer_fail(err, CELER_ERR_IO, "%s: read failed at byte %zu: %s", path, got,
                              e ? strerror(e) : "file shrank while reading");
        }
        got += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *out   = buf;
    if (size) *size = n;
    return CELER_OK;
}

char *celer_path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char  *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t n = a;
    if (a && dir[a - 1] != '/') p[n++] = '/';
    memcpy(p + n, name, b + 1);
    return p;
}
