/* paths.c: the root of the files flaretune ships besides its code (paths.h). */
#define _GNU_SOURCE /* dladdr */
#include "core/paths.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef FT_SOURCE_DIR
#define FT_SOURCE_DIR "."
#endif

static char root[PATH_MAX];
static pthread_once_t root_once = PTHREAD_ONCE_INIT;

/* Is dir a root (does it hold the kernel dialect header)? */
static int is_root(const char *dir) {
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s/kernels/cuda/ft_cuda.h", dir) >= (int)sizeof p) return 0;
    return access(p, R_OK) == 0;
}

/* PREFIX/share/flaretune for the file holding this code: PREFIX/bin/x, PREFIX/lib/x or
 * PREFIX/lib/<multiarch>/x. */
static int installed_root(char *out, size_t n) {
    Dl_info info;
    if (!dladdr((void *)&installed_root, &info) || !info.dli_fname || !info.dli_fname[0]) return 0;
    char self[PATH_MAX];
    if (!realpath(info.dli_fname, self)) return 0;
    for (int up = 1; up <= 2; up++) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", self);
        for (int k = 0; k <= up; k++) {
            char *slash = strrchr(dir, '/');
            if (!slash || slash == dir) return 0;
            *slash = '\0';
        }
        if (snprintf(out, n, "%s/share/flaretune", dir) < (int)n && is_root(out)) return 1;
    }
    return 0;
}

static void find_root(void) {
    const char *v = getenv("FLARETUNE_SOURCE_DIR");
    if (v && *v && strlen(v) < sizeof root) {
        snprintf(root, sizeof root, "%s", v);
        return;
    }
    if (installed_root(root, sizeof root)) return;
    snprintf(root, sizeof root, "%s", FT_SOURCE_DIR);
}

const char *ft_source_root(void) {
    pthread_once(&root_once, find_root);
    return root;
}

char *ft_kernel_dir(char *buf, size_t n) {
    const char *v = getenv("FLARETUNE_KERNEL_DIR");
    if (v && *v)
        snprintf(buf, n, "%s", v);
    else
        snprintf(buf, n, "%s/kernels", ft_source_root());
    return buf;
}

int ft_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int ft_path_dir(const char *path, char *dir, size_t n) {
    const char *slash = strrchr(path, '/');
    int len = !slash ? 1 : slash == path ? 1 : (int)(slash - path);
    if (n == 0 || (size_t)len >= n) {
        if (n) dir[0] = '\0';
        return 0;
    }
    snprintf(dir, n, "%.*s", len, slash ? path : ".");
    return 1;
}

int ft_path_follow(const char *path, char *out, size_t n, int *exists) {
    char cur[PATH_MAX], buf[PATH_MAX];
    *exists = 0;
    if (snprintf(cur, sizeof cur, "%s", path) >= (int)sizeof cur) return ENAMETOOLONG;
    for (int hops = 0;; hops++) {
        if (realpath(cur, buf)) {
            *exists = 1;
            break;
        }
        if (errno != ENOENT) return errno;
        struct stat st;
        if (stat(cur, &st) == 0) { /* a link only the kernel follows: /dev/stdout to a pipe */
            memcpy(buf, cur, strlen(cur) + 1);
            *exists = 1;
            break;
        }
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) { /* a name to create */
            memcpy(buf, cur, strlen(cur) + 1);
            break;
        }
        if (hops >= 40) return ELOOP;
        char to[PATH_MAX];
        ssize_t k = readlink(cur, to, sizeof to - 1);
        if (k < 0) return errno;
        to[k] = '\0';
        const char *slash = strrchr(cur, '/');
        int w = to[0] == '/' || !slash
                    ? snprintf(buf, sizeof buf, "%s", to)
                    : snprintf(buf, sizeof buf, "%.*s/%s", (int)(slash - cur), cur, to);
        if (w < 0 || (size_t)w >= sizeof cur) return ENAMETOOLONG;
        memcpy(cur, buf, (size_t)w + 1);
    }
    if (strlen(buf) >= n) return ENAMETOOLONG;
    memcpy(out, buf, strlen(buf) + 1);
    return 0;
}

/* path with its directory resolved (realpath) and its last name kept: what a file made at path
 * would be called, existing or not. Returns 0 when the directory does not resolve. */
static int resolved_name(const char *path, char *out, size_t n) {
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX], real[PATH_MAX];
    if (!ft_path_dir(path, dir, sizeof dir) || !realpath(dir, real)) return 0;
    return snprintf(out, n, "%s/%s", real, slash ? slash + 1 : path) < (int)n;
}

int ft_same_path(const char *a, const char *b) {
    if (!a || !b) return 0;
    if (ft_same_file(a, b)) return 1;
    struct stat st;
    if (stat(a, &st) == 0 && stat(b, &st) == 0) return 0; /* two files */
    char ra[PATH_MAX + 256], rb[PATH_MAX + 256];
    if (resolved_name(a, ra, sizeof ra) && resolved_name(b, rb, sizeof rb))
        return strcmp(ra, rb) == 0;
    return strcmp(a, b) == 0;
}
