/* kcache.c: the kernel compilers' shared cache key and file helpers (see kcache.h). */
#define _GNU_SOURCE
#include "kcache.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* ---- hashing --------------------------------------------------------------------------------- */

void ft_kc_hash_init(ft_kc_hash *h) {
    h->a = 0xcbf29ce484222325ull;
    h->b = 0x6c62272e07bb0142ull;
}

void ft_kc_hash_bytes(ft_kc_hash *h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        h->a = (h->a ^ c[i]) * 0x100000001b3ull;
        h->b = (h->b ^ c[i]) * 0x880355f21e6d1965ull;
    }
}

void ft_kc_hash_str(ft_kc_hash *h, const char *s) { ft_kc_hash_bytes(h, s, strlen(s) + 1); }

int ft_kc_read_file(const char *path, char **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap) break;
        char *nb = realloc(buf, 2 * cap + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f) || !buf;
    fclose(f);
    if (bad) {
        free(buf);
        errno = EIO;
        return -1;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

void ft_kc_dir_of(const char *path, char *dir, size_t n) {
    const char *s = strrchr(path, '/');
    if (!s)
        snprintf(dir, n, ".");
    else
        snprintf(dir, n, "%.*s", (int)(s - path), path);
}

/* Hash the files `text` includes with quotes (#include "x"), found next to `dir` or in the
 * include directories, recursively. Conditional includes count too: a key that changes more
 * often than strictly needed only costs a compilation. */
void ft_kc_hash_includes(ft_kc_hash *h, const char *text, const char *dir, const char *const *incs,
                         int nincs, ft_kc_seen *seen, int depth) {
    if (depth > 16) return;
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        const char *q = p;
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q != '#') continue;
        q++;
        while (*q == ' ' || *q == '\t')
            q++;
        if (strncmp(q, "include", 7) != 0) continue;
        q += 7;
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q != '"') continue;
        const char *e = strchr(q + 1, '"');
        const char *nl = strchr(q + 1, '\n');
        if (!e || (nl && nl < e)) continue;
        char name[FT_KC_PATH_CAP], path[FT_KC_PATH_CAP];
        snprintf(name, sizeof name, "%.*s", (int)(e - q - 1), q + 1);
        ft_kc_hash_str(h, name);
        char *body = NULL;
        size_t len = 0;
        int found = 0;
        for (int i = -1; i < nincs && !found; i++) {
            int w = snprintf(path, sizeof path, "%s/%s", i < 0 ? dir : incs[i], name);
            found = w > 0 && (size_t)w < sizeof path && ft_kc_read_file(path, &body, &len) == 0;
        }
        if (!found) continue;
        int dup = 0;
        for (int i = 0; i < seen->n && !dup; i++)
            dup = strcmp(seen->paths[i], path) == 0;
        if (!dup && seen->n < 64) {
            snprintf(seen->paths[seen->n++], FT_KC_PATH_CAP, "%s", path);
            ft_kc_hash_bytes(h, body, len); /* its name and content; not where it is */
            char sub[FT_KC_PATH_CAP];
            ft_kc_dir_of(path, sub, sizeof sub);
            ft_kc_hash_includes(h, body, sub, incs, nincs, seen, depth + 1);
        }
        free(body);
    }
}

/* The compiler's first error line, with directories stripped from its leading path. */
void ft_kc_first_error(const char *log, char *out, size_t n) {
    const char *line = NULL, *last = NULL;
    for (const char *p = log; *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len) last = p;
        const char *hit = strstr(p, "error");
        if (hit && (!e || hit < e)) {
            line = p;
            break;
        }
        if (!e) break;
    }
    if (!line) line = last;
    if (!line) {
        snprintf(out, n, "(the compiler printed nothing)");
        return;
    }
    const char *e = strchr(line, '\n');
    size_t len = e ? (size_t)(e - line) : strlen(line);
    const char *colon = memchr(line, ':', len), *slash = NULL;
    for (const char *s = line; colon && s < colon; s++)
        if (*s == '/') slash = s;
    if (slash) len -= (size_t)(slash + 1 - line), line = slash + 1;
    snprintf(out, n, "%.*s", (int)len, line);
}

int ft_kc_mkdir_p(const char *dir) {
    char buf[FT_KC_PATH_CAP];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

int ft_kc_valid_define(const char *d) {
    if (!(isalpha((unsigned char)d[0]) || d[0] == '_')) return 0;
    const char *p = d;
    while (isalnum((unsigned char)*p) || *p == '_')
        p++;
    return *p == '\0' || *p == '=';
}

int ft_kc_define_list(const char *const *defines, int n, size_t max_len, char *out, size_t cap) {
    snprintf(out, cap, "no defines");
    size_t dl = 0;
    for (int i = 0; i < n; i++) {
        if (!defines[i] || !ft_kc_valid_define(defines[i]) || strlen(defines[i]) > max_len)
            return i;
        int w = snprintf(out + dl, cap - dl, "%s-D%s", i ? " " : "", defines[i]);
        if (w > 0) dl = dl + (size_t)w < cap ? dl + (size_t)w : cap - 1;
    }
    return -1;
}

void ft_kc_hash_hex(const ft_kc_hash *h, char *out) {
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h->a, (unsigned long long)h->b);
}

void ft_kc_digest(const void *const *parts, const size_t *lens, int n, char *out) {
    ft_kc_hash h;
    ft_kc_hash_init(&h);
    for (int i = 0; i < n; i++) {
        uint64_t len = lens[i];
        ft_kc_hash_bytes(&h, &len, sizeof len);
        ft_kc_hash_bytes(&h, parts[i], lens[i]);
    }
    ft_kc_hash_hex(&h, out);
}

static int seal_path(const char *path, char *out, size_t n) {
    if ((size_t)snprintf(out, n, "%s.sum", path) >= n) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int ft_kc_seal(const char *path, const char *digest) {
    char p[FT_KC_PATH_CAP + 16];
    return seal_path(path, p, sizeof p) ? -1 : ft_kc_write_atomic(p, digest, strlen(digest));
}

int ft_kc_sealed(const char *path, const char *digest) {
    char p[FT_KC_PATH_CAP + 16], *text = NULL;
    size_t n = 0;
    if (seal_path(path, p, sizeof p) || ft_kc_read_file(p, &text, &n) != 0) return 0;
    int ok = n == strlen(digest) && memcmp(text, digest, n) == 0;
    free(text);
    return ok;
}

int ft_kc_write_atomic(const char *path, const void *data, size_t n) {
    char tmp[FT_KC_PATH_CAP + 64];
    static unsigned counter;
    unsigned k = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), k) >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return -1;
    const char *p = data;
    size_t left = n;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = errno ? errno : EIO;
            close(fd);
            unlink(tmp);
            errno = e;
            return -1;
        }
        p += w, left -= (size_t)w;
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}

int ft_kc_cache_dir(const char *sub, char *out, size_t n) {
    const char *d = getenv("FLARETUNE_CACHE_DIR"), *home = getenv("HOME");
    if (d && *d) return snprintf(out, n, "%s/%s", d, sub);
    if (home && *home) return snprintf(out, n, "%s/.cache/flaretune/%s", home, sub);
    return snprintf(out, n, "/tmp/flaretune-cache-%ld/%s", (long)getuid(), sub);
}

/* ---- running a tool -------------------------------------------------------------------------- */

/* The process's environment with LC_ALL=C (malloc'd array of borrowed strings). */
static char **env_c_locale(void) {
    size_t nenv = 0;
    while (environ[nenv])
        nenv++;
    char **env = malloc((nenv + 2) * sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++)
        if (strncmp(environ[i], "LC_ALL=", 7) != 0) env[k++] = environ[i];
    env[k++] = "LC_ALL=C";
    env[k] = NULL;
    return env;
}

/* Read fd to its end into buf (grown up to max bytes, the rest dropped); returns the length. */
static size_t read_all(int fd, char **buf, size_t *cap, size_t max) {
    size_t n = 0;
    char sink[4096];
    for (;;) {
        if (n + 1 >= *cap && *cap < max + 1) {
            size_t c = *cap * 2 < max + 1 ? *cap * 2 : max + 1;
            char *b = realloc(*buf, c);
            if (b) *buf = b, *cap = c;
        }
        int keep = n + 1 < *cap;
        ssize_t r = read(fd, keep ? *buf + n : sink, keep ? *cap - 1 - n : sizeof sink);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        if (keep) n += (size_t)r;
    }
    (*buf)[n] = '\0';
    return n;
}

int ft_kc_run(char *const argv[], const char *err_path, size_t max, char **out, size_t *len) {
    *out = NULL;
    if (len) *len = 0;
    size_t cap = max < 4096 ? max + 1 : 4096;
    char *buf = malloc(cap);
    char **env = env_c_locale();
    int fds[2];
    if (!buf || !env || pipe(fds) != 0) {
        int e = buf && env ? errno : ENOMEM;
        free(buf), free(env);
        errno = e;
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    if (err_path)
        posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    else
        posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    /* In a process group of its own: a Ctrl-C at the terminal (or a signal to flaretune's
     * group) is flaretune's to handle, and it finishes the configuration in flight, whose
     * compiler must not die of that signal and read as the configuration's failure. */
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&at, 0);
    pid_t pid;
    int rc = strchr(argv[0], '/') ? posix_spawn(&pid, argv[0], &fa, &at, argv, env)
                                  : posix_spawnp(&pid, argv[0], &fa, &at, argv, env);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        free(buf);
        errno = rc;
        return -1;
    }
    size_t n = read_all(fds[0], &buf, &cap, max);
    close(fds[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    *out = buf;
    if (len) *len = n;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* ---- the process's tally of modules ---------------------------------------------------------- */

/* An open-addressing set of the keys seen (32 hex digits), grown as needed. */
static struct {
    pthread_mutex_t lock;
    char (*keys)[33];
    size_t cap, n;
    int compiled, cached;
} tally = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0, 0};

static size_t key_slot(char (*keys)[33], size_t cap, const char *key) {
    ft_kc_hash h;
    ft_kc_hash_init(&h);
    ft_kc_hash_str(&h, key);
    size_t i = (size_t)h.a & (cap - 1);
    while (keys[i][0] && strcmp(keys[i], key) != 0)
        i = (i + 1) & (cap - 1);
    return i;
}

void ft_kc_note(const char *key, int cached) {
    if (!key || !*key || strlen(key) > 32) return;
    pthread_mutex_lock(&tally.lock);
    if (2 * (tally.n + 1) > tally.cap) { /* keep it at most half full */
        size_t cap = tally.cap ? 2 * tally.cap : 256;
        char(*keys)[33] = calloc(cap, sizeof *keys);
        if (!keys) {
            pthread_mutex_unlock(&tally.lock); /* uncounted: only a report is short */
            return;
        }
        for (size_t i = 0; i < tally.cap; i++)
            if (tally.keys[i][0])
                memcpy(keys[key_slot(keys, cap, tally.keys[i])], tally.keys[i], 33);
        free(tally.keys);
        tally.keys = keys;
        tally.cap = cap;
    }
    size_t i = key_slot(tally.keys, tally.cap, key);
    if (!tally.keys[i][0]) {
        snprintf(tally.keys[i], 33, "%s", key);
        tally.n++;
        if (cached)
            tally.cached++;
        else
            tally.compiled++;
    }
    pthread_mutex_unlock(&tally.lock);
}

void ft_kc_counts(int *compiled, int *cached) {
    pthread_mutex_lock(&tally.lock);
    if (compiled) *compiled = tally.compiled;
    if (cached) *cached = tally.cached;
    pthread_mutex_unlock(&tally.lock);
}

void ft_kc_copy_cut(char *dst, size_t n, const char *src) {
    size_t len = strnlen(src, n - 1);
    memcpy(dst, src, len);
    dst[len] = '\0';
}
