/* npy.c: reading and writing NumPy .npy files (see core/npy.h).
 *
 * The header is a Python dict literal such as
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * parsed here by a small recursive-descent reader that accepts exactly the three keys NumPy
 * writes, so a damaged header is reported rather than guessed at.
 */
#include "core/npy.h"

#include "core/paths.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The largest header read: any 1.0 header, and any 2.0 one NumPy writes. */
#define NPY_HEADER_MAX 65536

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* ---- header parsing ------------------------------------------------------------------------ */

typedef struct {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int eat(cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

static int read_str(cursor *c, char *out, size_t n) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return 0;
    char q = *c->p++;
    size_t k = 0;
    while (c->p < c->end && *c->p != q) {
        if (k + 1 >= n) return 0;
        out[k++] = *c->p++;
    }
    if (c->p >= c->end) return 0;
    c->p++;
    out[k] = '\0';
    return 1;
}

static int read_word(cursor *c, const char *w) {
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, w, n) == 0) {
        c->p += n;
        return 1;
    }
    return 0;
}

static int read_shape(cursor *c, ft_npy_header *h) {
    if (!eat(c, '(')) return 0;
    h->rank = 0;
    for (;;) {
        if (eat(c, ')')) return 1;
        skip_ws(c);
        if (c->p >= c->end || *c->p < '0' || *c->p > '9') return 0;
        long long v = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (v > (LLONG_MAX - 9) / 10) return 0;
            v = v * 10 + (*c->p++ - '0');
        }
        if (c->p < c->end && *c->p == 'L') c->p++; /* Python 2 longs */
        if (h->rank >= FT_MAX_RANK) return -1;
        h->shape[h->rank++] = v;
        /* (64) is Python's integer 64, not a shape: one dimension is (64,) */
        if (!eat(c, ',')) return h->rank > 1 && eat(c, ')');
    }
}

ft_status ft_npy_parse_header(const unsigned char *buf, size_t len, const char *name,
                              ft_npy_header *h, ft_err *err) {
    memset(h, 0, sizeof *h);
    if (len < 10 || memcmp(buf, npy_magic, 6) != 0)
        return ft_err_set(err, FT_EFORMAT, "%s: not a .npy file (wrong magic string)", name);
    h->major = buf[6];
    h->minor = buf[7];
    size_t hlen, pre;
    if (h->major == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        pre = 10;
    } else if (h->major == 2 || h->major == 3) {
        if (len < 12) return ft_err_set(err, FT_EFORMAT, "%s: truncated .npy header", name);
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        pre = 12;
    } else {
        return ft_err_set(err, FT_EFORMAT, "%s: unsupported .npy format version %d.%d", name,
                          h->major, h->minor);
    }
    if (hlen > NPY_HEADER_MAX)
        return ft_err_set(err, FT_EFORMAT,
                          "%s: a .npy header of %zu bytes, more than the %d this reader takes "
                          "(NumPy writes them under a kilobyte)",
                          name, hlen, NPY_HEADER_MAX);
    if (pre + hlen > len) return ft_err_set(err, FT_EFORMAT, "%s: truncated .npy header", name);
    h->data_offset = pre + hlen;

    if (memchr(buf + pre, '\0', hlen))
        return ft_err_set(err, FT_EFORMAT, "%s: malformed .npy header (a NUL byte in it)", name);
    cursor c = {(const char *)buf + pre, (const char *)buf + pre + hlen};
    int have_descr = 0, have_fortran = 0, have_shape = 0;
    if (!eat(&c, '{')) goto bad;
    while (!eat(&c, '}')) {
        char key[32];
        if (!read_str(&c, key, sizeof key) || !eat(&c, ':')) goto bad;
        if (strcmp(key, "descr") == 0) {
            if (!read_str(&c, h->descr, sizeof h->descr)) goto bad;
            have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (read_word(&c, "True"))
                h->fortran_order = 1;
            else if (read_word(&c, "False"))
                h->fortran_order = 0;
            else
                goto bad;
            have_fortran = 1;
        } else if (strcmp(key, "shape") == 0) {
            int r = read_shape(&c, h);
            if (r < 0)
                return ft_err_set(err, FT_EFORMAT, "%s: more than %d dimensions", name,
                                  FT_MAX_RANK);
            if (!r) goto bad;
            have_shape = 1;
        } else {
            return ft_err_set(err, FT_EFORMAT, "%s: unexpected key '%s' in .npy header", name, key);
        }
        if (!eat(&c, ',')) {
            if (!eat(&c, '}')) goto bad;
            break;
        }
    }
    skip_ws(&c); /* what follows the dictionary: numpy's padding and line break, nothing else */
    if (c.p != c.end) goto bad;
    if (!have_descr || !have_fortran || !have_shape)
        return ft_err_set(err, FT_EFORMAT, "%s: .npy header lacks '%s'", name,
                          !have_descr     ? "descr"
                          : !have_fortran ? "fortran_order"
                                          : "shape");
    return FT_OK;
bad:
    return ft_err_set(err, FT_EFORMAT, "%s: malformed .npy header", name);
}

/* ---- loading ------------------------------------------------------------------------------- */

typedef enum { SRC_F32, SRC_F64, SRC_I32, SRC_I64, SRC_U8, SRC_BOOL } src_type;

static ft_status descr_type(const char *descr, const char *name, src_type *st, ft_err *err) {
    static const struct {
        const char *descr;
        src_type st;
    } known[] = {{"<f4", SRC_F32}, {"<f8", SRC_F64}, {"<i4", SRC_I32}, {"<i8", SRC_I64},
                 {"|u1", SRC_U8},  {"<u1", SRC_U8},  {"|b1", SRC_BOOL}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(descr, known[i].descr) == 0) {
            *st = known[i].st;
            return FT_OK;
        }
    }
    if (descr[0] == '>' && strlen(descr) > 1 && descr[1] != '1')
        return ft_err_set(err, FT_EFORMAT,
                          "%s: big-endian data ('%s') is not supported; save it little-endian "
                          "(numpy: a.astype(a.dtype.newbyteorder('<')))",
                          name, descr);
    return ft_err_set(err, FT_EFORMAT,
                      "%s: unsupported dtype '%s' (supported: float32, int32, uint8; float64, "
                      "int64 and bool are converted)",
                      name, descr);
}

static size_t src_size(src_type st) {
    switch (st) {
    case SRC_F32:
    case SRC_I32: return 4;
    case SRC_F64:
    case SRC_I64: return 8;
    case SRC_U8:
    case SRC_BOOL: return 1;
    }
    return 0;
}

/* Elements of a shape, or -1 when the count (or its bytes at 16 per element, the widest any
 * conversion makes) does not fit in an int64. */
static int64_t shape_numel(const ft_npy_header *h) {
    for (int i = 0; i < h->rank; i++)
        if (h->shape[i] == 0) return 0;
    int64_t n = 1;
    for (int i = 0; i < h->rank; i++) {
        if (n > INT64_MAX / 16 / h->shape[i]) return -1;
        n *= h->shape[i];
    }
    return n;
}

/* The header at the start of f. The header is at most 4 GiB in 2.0+ but NumPy keeps it small;
 * 64 KiB + prefix covers every 1.0 header and any real 2.0 one. */
static ft_status read_header(FILE *f, const char *path, ft_npy_header *h, ft_err *err) {
    enum { HEAD_MAX = NPY_HEADER_MAX + 12 };
    unsigned char *head = malloc(HEAD_MAX);
    if (!head) return ft_err_set(err, FT_ENOMEM, "out of memory");
    size_t got = fread(head, 1, HEAD_MAX, f);
    ft_status s = ft_npy_parse_header(head, got, path, h, err);
    free(head);
    return s;
}

/* What the header asks for, checked before anything is allocated: C order, a known dtype, a
 * shape that can be addressed and, for a regular file, exactly as many data bytes as it holds.
 * Sets the source type and the element count. */
static ft_status check_header(const ft_npy_header *h, const struct stat *sb, const char *path,
                              src_type *st, int64_t *numel, ft_err *err) {
    ft_status s;
    if (h->fortran_order)
        return ft_err_set(err, FT_EFORMAT,
                          "%s: Fortran-order arrays are not supported; save a C-order array "
                          "(numpy: np.ascontiguousarray(a))",
                          path);
    if ((s = descr_type(h->descr, path, st, err))) return s;
    char shape_s[128];
    int64_t n = shape_numel(h);
    if (n < 0)
        return ft_err_set(err, FT_EFORMAT, "%s: shape %s is too large to address", path,
                          ft_shape_str(h->rank, h->shape, shape_s, sizeof shape_s));
    size_t want = (size_t)n * src_size(*st);
    /* A header may claim any size: compare it with the file's before allocating anything, so
     * a 128-byte file claiming 4 GiB is refused at once. (A pipe has no size; its reads are
     * checked below.) */
    if (S_ISREG(sb->st_mode)) {
        uint64_t held =
            (uint64_t)sb->st_size > h->data_offset ? (uint64_t)sb->st_size - h->data_offset : 0;
        if (held < (uint64_t)want)
            return ft_err_set(err, FT_EFORMAT,
                              "%s: truncated data: the header promises %lld elements (%zu bytes) "
                              "but the file holds %llu",
                              path, (long long)n, want, (unsigned long long)held);
        if (held > (uint64_t)want)
            return ft_err_set(err, FT_EFORMAT, "%s: extra bytes after the %zu bytes of data", path,
                              want);
    }
    *numel = n;
    return FT_OK;
}

/* The n elements of type st at the header's data offset into t, converted to t's dtype (int64
 * narrowed to int32 when every value fits, bool to 0/1). */
static ft_status read_data(FILE *f, const ft_npy_header *h, src_type st, int64_t n, ft_tensor *t,
                           const char *path, ft_err *err) {
    ft_status s = FT_OK;
    void *raw = NULL;
    size_t esz = src_size(st);
    size_t want = (size_t)n * esz;
    void *dst = t->data;
    if (esz != ft_dtype_size(t->dtype)) {
        raw = malloc(want ? want : 1);
        if (!raw) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", path);
        dst = raw;
    }
    if (fseeko(f, (off_t)h->data_offset, SEEK_SET) != 0) {
        s = ft_err_set(err, FT_EIO, "%s: seek failed: %s", path, strerror(errno));
        goto done;
    }
    size_t rd = want ? fread(dst, 1, want, f) : 0;
    if (rd != want) {
        s = ft_err_set(err, FT_EFORMAT,
                       "%s: truncated data: the header promises %lld elements (%zu bytes) but "
                       "the file holds %zu",
                       path, (long long)n, want, rd);
        goto done;
    }
    if (fgetc(f) != EOF) {
        s = ft_err_set(err, FT_EFORMAT, "%s: extra bytes after the %zu bytes of data", path, want);
        goto done;
    }
    if (st == SRC_I64) {
        const int64_t *src = raw;
        int32_t *d = t->data;
        for (int64_t i = 0; i < n; i++) {
            if (src[i] < INT32_MIN || src[i] > INT32_MAX) {
                s = ft_err_set(err, FT_EFORMAT,
                               "%s: int64 value %lld at index %lld does not fit in int32", path,
                               (long long)src[i], (long long)i);
                goto done;
            }
            d[i] = (int32_t)src[i];
        }
    } else if (st == SRC_BOOL) {
        const uint8_t *src = t->data;
        uint8_t *d = t->data;
        for (int64_t i = 0; i < n; i++)
            d[i] = src[i] != 0;
    }
done:
    free(raw);
    return s;
}

ft_status ft_npy_load(const char *path, ft_tensor **out, ft_err *err) {
    *out = NULL;
    /* A pipe, a device or a socket is refused before it is opened: opening a FIFO waits for a
     * writer, and what it gives cannot be checked against its size. */
    struct stat pre;
    if (stat(path, &pre) == 0 && !S_ISREG(pre.st_mode) && !S_ISDIR(pre.st_mode))
        return ft_err_set(err, FT_EIO,
                          "%s: not a regular file (a pipe or a device), not a .npy file", path);
    FILE *f = fopen(path, "rb");
    if (!f) return ft_err_set(err, FT_EIO, "%s: cannot open: %s", path, strerror(errno));
    ft_status s = FT_OK;
    ft_tensor *t = NULL;
    /* fopen opens a directory too; reading it would only say "wrong magic string". */
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        s = ft_err_set(err, FT_EIO, "%s: cannot stat: %s", path, strerror(errno));
        fclose(f);
        return s;
    }
    if (S_ISDIR(sb.st_mode)) {
        fclose(f);
        return ft_err_set(err, FT_EIO, "%s: is a directory, not a .npy file", path);
    }

    ft_npy_header h;
    src_type st = SRC_F32;
    int64_t n = 0;
    if ((s = read_header(f, path, &h, err))) goto done;
    if ((s = check_header(&h, &sb, path, &st, &n, err))) goto done;
    ft_dtype dt = st == SRC_F32                      ? FT_F32
                  : st == SRC_F64                    ? FT_F64
                  : (st == SRC_I32 || st == SRC_I64) ? FT_I32
                                                     : FT_U8;
    if ((s = ft_tensor_new(dt, h.rank, h.shape, &t, err))) {
        ft_err_wrap(err, "%s", path);
        goto done;
    }
    s = read_data(f, &h, st, n, t, path, err);
done:
    fclose(f);
    if (s) {
        ft_tensor_free(t);
        return s;
    }
    *out = t;
    return FT_OK;
}

/* ---- writing ------------------------------------------------------------------------------- */

/* Whether path names something other than a regular file (through links): a device such as
 * /dev/null, a pipe, a terminal. Such a target is written in place, never renamed over. */
static int not_a_regular_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

/* fsync of what is not a file (a pipe, /dev/null) fails with EINVAL: nothing to sync. */
static int sync_failed(FILE *f, const char *tmp) {
    return fsync(fileno(f)) != 0 && (*tmp || (errno != EINVAL && errno != EROFS));
}

/* Where a write to path lands: the file a symbolic link points at (so that the link stays a
 * link, as `cp` and editors keep it; a dangling link's target is made), else path itself.
 * Returns out, or path when it is no link or its links cannot be followed (a loop). */
static const char *landing(const char *path, char *out, size_t n) {
    struct stat st;
    int exists;
    if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode)) return path;
    return ft_path_follow(path, out, n, &exists) == 0 ? out : path;
}

/* Where the temporary file tmp of path (ft_file_create_tmp's "<landing>.tmp.XXXXXX") lands: the
 * name it was made beside, so that a link changed meanwhile cannot send it elsewhere (onto
 * another file system, where rename fails). Falls back to landing(path) for any other name. */
static const char *tmp_landing(const char *tmp, const char *path, char *out, size_t n) {
    static const char suffix[] = ".tmp.XXXXXX";
    size_t k = strlen(tmp), cut = k - (sizeof suffix - 1);
    if (k <= sizeof suffix - 1 || k >= n || strncmp(tmp + cut, ".tmp.", 5) != 0)
        return landing(path, out, n);
    memcpy(out, tmp, cut);
    out[cut] = '\0';
    return out;
}

/* How long a temporary file no writer holds must have gone unchanged to count as left behind:
 * a writer holds its own from creation to fclose (flock), so only the moments just before the
 * lock and between close and rename are unheld, and those last microseconds. */
#define FT_TMP_STALE_S 60

/* Temporary files of writes to path that ended without renaming or removing theirs (a process
 * killed): "<path>.tmp.XXXXXX" beside it, a regular file of this user that no process holds
 * and that has not changed for FT_TMP_STALE_S. A live writer's file is never among them. */
static void remove_stale_tmp(const char *path) {
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    char dir[PATH_MAX], stem[NAME_MAX + 1];
    if (!ft_path_dir(path, dir, sizeof dir)) return;
    if (snprintf(stem, sizeof stem, "%s.tmp.", base) >= (int)sizeof stem) return;
    size_t sl = strlen(stem);
    DIR *d = opendir(dir);
    if (!d) return;
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        if (strncmp(nm, stem, sl) != 0 || strlen(nm) != sl + 6) continue;
        int fd = openat(dirfd(d), nm, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
            now - st.st_mtime >= FT_TMP_STALE_S && flock(fd, LOCK_EX | LOCK_NB) == 0)
            unlinkat(dirfd(d), nm, 0);
        close(fd);
    }
    closedir(d);
}

FILE *ft_file_create_tmp(const char *path, char *tmp, size_t n, ft_err *err) {
    char real[PATH_MAX];
    path = landing(path, real, sizeof real);
    if (n > 0 && not_a_regular_file(path)) {
        tmp[0] = '\0';
        FILE *f = fopen(path, "wb");
        if (!f) ft_err_set(err, FT_EIO, "%s: cannot write there: %s", path, strerror(errno));
        return f;
    }
    int w = snprintf(tmp, n, "%s.tmp.XXXXXX", path);
    if (w < 0 || (size_t)w >= n) {
        ft_err_set(err, FT_EINVAL, "%s: path too long", path);
        return NULL;
    }
    /* The temporary file's name is the file's and a suffix of 11 bytes: a name with no room
     * for it is refused as such, not blamed on the name itself. */
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    const size_t room = sizeof ".tmp.XXXXXX" - 1;
    if (strlen(base) + room > NAME_MAX) {
        ft_err_set(err, FT_EINVAL,
                   "%s: a name of %zu bytes leaves no room for its temporary file's suffix "
                   "(.tmp.XXXXXX): at most %zu bytes",
                   path, strlen(base), (size_t)NAME_MAX - room);
        return NULL;
    }
    remove_stale_tmp(path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        ft_err_set(err, FT_EIO, "%s: cannot create a file there: %s", path, strerror(errno));
        return NULL;
    }
    /* Held until the file is closed, so that no later write removes it as left behind. */
    (void)flock(fd, LOCK_EX | LOCK_NB);
    /* mkstemp makes the file 0600; give it the permissions of the file it replaces (through a
     * symbolic link: of the link's target), or the usual ones of a new file. */
    struct stat old;
    mode_t mode;
    if (stat(path, &old) == 0 && S_ISREG(old.st_mode)) {
        mode = old.st_mode & 07777;
    } else {
        mode_t mask = umask(0);
        umask(mask);
        mode = 0666 & ~mask;
    }
    if (fchmod(fd, mode) != 0) {
        /* Not fatal: the file is still correct, only private. */
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        ft_err_set(err, FT_EIO, "%s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
    }
    return f;
}

ft_status ft_file_commit(FILE *f, const char *tmp, const char *path, ft_err *err) {
    int bad = ferror(f) || fflush(f) != 0 || sync_failed(f, tmp);
    int saved = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        saved = errno;
    }
    if (bad) {
        if (*tmp) unlink(tmp);
        return ft_err_set(err, FT_EIO, "%s: write failed: %s", path, strerror(saved));
    }
    if (!*tmp) return FT_OK; /* written in place (ft_file_create_tmp) */
    char real[PATH_MAX];
    if (rename(tmp, tmp_landing(tmp, path, real, sizeof real)) != 0) {
        saved = errno;
        unlink(tmp);
        return ft_err_set(err, FT_EIO, "%s: cannot rename into place: %s", path, strerror(saved));
    }
    return FT_OK;
}

int ft_file_read_all(FILE *f, size_t max, char **buf, size_t *len) {
    char *b = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) { /* doubled from 64 KiB, up to one byte past max: enough to tell */
            size_t ncap = cap ? 2 * cap : 65536;
            if (ncap > max + 1) ncap = max + 1;
            char *nb = realloc(b, ncap);
            if (!nb) {
                free(b);
                return -1;
            }
            b = nb;
            cap = ncap;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
        if (n > max) {
            free(b);
            return 1;
        }
    }
    *buf = b;
    *len = n;
    return 0;
}

ft_status ft_file_write(const char *path, int (*write)(FILE *f, const void *ctx), const void *ctx,
                        ft_err *err) {
    char tmp[4096];
    FILE *f = ft_file_create_tmp(path, tmp, sizeof tmp, err);
    if (!f) return err ? err->status : FT_EIO;
    errno = 0;
    if (write(f, ctx)) {
        /* The cause, where the writer's failed call left one (a full disk, a file size limit) */
        const int saved = errno;
        fclose(f);
        if (*tmp) remove(tmp);
        return saved ? ft_err_set(err, FT_EIO, "%s: write failed: %s", path, strerror(saved))
                     : ft_err_set(err, FT_EIO, "%s: write failed", path);
    }
    return ft_file_commit(f, tmp, path, err);
}

ft_status ft_file_commit_all(int n, const char *const *tmp, const char *const *path, ft_err *err) {
    ft_status s = FT_OK;
    int done = 0;
    /* Each replaced file is kept under a second name (a hard link) until every new file is in
     * place: 0 no old file, 1 linked, 2 moved aside (a file system without hard links). */
    enum { OLD_NONE, OLD_LINKED, OLD_MOVED };
    char(*old)[4096 + 8] = n > 0 ? calloc((size_t)n, sizeof *old) : NULL;
    int *kept = n > 0 ? calloc((size_t)n, sizeof *kept) : NULL;
    /* Where each lands: through a symbolic link, the file it points at (ft_file_create_tmp). */
    char(*real)[PATH_MAX] = n > 0 ? calloc((size_t)n, sizeof *real) : NULL;
    const char **dst = n > 0 ? calloc((size_t)n, sizeof *dst) : NULL;
    for (int k = 0; k < n && real && dst; k++)
        dst[k] = *tmp[k] ? tmp_landing(tmp[k], path[k], real[k], sizeof real[k])
                         : landing(path[k], real[k], sizeof real[k]);
    if (n > 0 && (!old || !kept || !real || !dst)) {
        s = ft_err_set(err, FT_ENOMEM, "out of memory committing %d files", n);
        goto undo;
    }
    /* Every target first: what rename cannot replace fails here, before anything changed. */
    for (int k = 0; k < n; k++) {
        struct stat st;
        if (lstat(dst[k], &st) == 0 && S_ISDIR(st.st_mode)) {
            s = ft_err_set(err, FT_EIO, "%s: is a directory; no output was written", path[k]);
            goto undo;
        }
        if (snprintf(old[k], sizeof old[k], "%s.old", tmp[k]) >= (int)sizeof old[k]) {
            s = ft_err_set(err, FT_EINVAL, "%s: path too long", path[k]);
            goto undo;
        }
    }
    for (int k = 0; k < n; k++) {
        struct stat st;
        if (!*tmp[k]) { /* written in place already (ft_file_create_tmp) */
            done = k + 1;
            continue;
        }
        if (lstat(dst[k], &st) == 0) {
            if (link(dst[k], old[k]) == 0) {
                kept[k] = OLD_LINKED;
            } else if (rename(dst[k], old[k]) == 0) {
                kept[k] = OLD_MOVED;
            } else {
                s = ft_err_set(err, FT_EIO, "%s: cannot keep the old file while replacing it: %s",
                               path[k], strerror(errno));
                goto undo;
            }
        }
        if (rename(tmp[k], dst[k]) != 0) {
            s = ft_err_set(err, FT_EIO, "%s: cannot rename into place: %s", path[k],
                           strerror(errno));
            if (kept[k] == OLD_MOVED) rename(old[k], dst[k]);
            if (kept[k] == OLD_LINKED) unlink(old[k]);
            kept[k] = OLD_NONE;
            goto undo;
        }
        done = k + 1;
    }
    for (int k = 0; k < n; k++)
        if (kept[k]) unlink(old[k]);
    free(old);
    free(kept);
    free(real);
    free(dst);
    return FT_OK;
undo:
    /* Put back what was replaced, newest first, and remove what was new. */
    for (int k = done - 1; k >= 0; k--) {
        if (!*tmp[k]) continue; /* written in place: nothing to put back */
        if (kept[k])
            rename(old[k], dst[k]);
        else
            unlink(dst[k]);
    }
    for (int k = done; k < n; k++)
        if (*tmp[k]) unlink(tmp[k]);
    free(old);
    free(kept);
    free(real);
    free(dst);
    return s;
}

static const char *dtype_descr(ft_dtype dt) {
    switch (dt) {
    case FT_F32: return "<f4";
    case FT_F64: return "<f8";
    case FT_I32: return "<i4";
    case FT_U8: return "|u1";
    }
    return "?";
}

static ft_status write_npy(FILE *f, const ft_tensor *t, const char *path, ft_err *err) {
    char dict[512];
    int k = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     dtype_descr(t->dtype));
    for (int i = 0; i < t->rank; i++)
        k += snprintf(dict + k, sizeof dict - (size_t)k, "%lld,%s", (long long)t->shape[i],
                      i + 1 < t->rank ? " " : "");
    k += snprintf(dict + k, sizeof dict - (size_t)k, "), }");
    /* Pad with spaces and end with '\n' so the data starts on a 64-byte boundary. */
    size_t pre = 10, total = pre + (size_t)k + 1;
    size_t padded = (total + 63) / 64 * 64;
    unsigned char prefix[10];
    memcpy(prefix, npy_magic, 6);
    prefix[6] = 1;
    prefix[7] = 0;
    size_t hlen = padded - pre;
    prefix[8] = (unsigned char)(hlen & 0xff);
    prefix[9] = (unsigned char)(hlen >> 8);
    if (fwrite(prefix, 1, pre, f) != pre || fwrite(dict, 1, (size_t)k, f) != (size_t)k) goto bad;
    for (size_t i = pre + (size_t)k; i + 1 < padded; i++)
        if (fputc(' ', f) == EOF) goto bad;
    if (fputc('\n', f) == EOF) goto bad;
    size_t bytes = ft_tensor_nbytes(t);
    if (bytes && fwrite(t->data, 1, bytes, f) != bytes) goto bad;
    return FT_OK;
bad:
    return ft_err_set(err, FT_EIO, "%s: write failed: %s", path, strerror(errno));
}

ft_status ft_npy_save_tmp(const char *path, const ft_tensor *t, char *tmp, size_t n, ft_err *err) {
    FILE *f = ft_file_create_tmp(path, tmp, n, err);
    if (!f) return err ? err->status : FT_EIO;
    ft_status s = write_npy(f, t, path, err);
    int bad = s || ferror(f) || fflush(f) != 0 || sync_failed(f, tmp);
    int saved = errno;
    if (fclose(f) != 0) bad = 1;
    if (bad) {
        if (*tmp) unlink(tmp);
        if (!s) s = ft_err_set(err, FT_EIO, "%s: write failed: %s", path, strerror(saved));
        return s;
    }
    return FT_OK;
}

ft_status ft_npy_save(const char *path, const ft_tensor *t, ft_err *err) {
    char tmp[4096];
    ft_status s = ft_npy_save_tmp(path, t, tmp, sizeof tmp, err);
    if (s || !*tmp) return s;
    char real[PATH_MAX];
    if (rename(tmp, tmp_landing(tmp, path, real, sizeof real)) != 0) {
        int saved = errno;
        unlink(tmp);
        return ft_err_set(err, FT_EIO, "%s: cannot rename into place: %s", path, strerror(saved));
    }
    return FT_OK;
}

ft_status ft_dir_make_noting(const char *dir, int *made, int max, int *nmade, ft_err *err) {
    char path[4096];
    if (nmade) *nmade = 0;
    if (!dir[0]) return ft_err_set(err, FT_EINVAL, "an empty directory name");
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return ft_err_set(err, FT_EIO, "%s: path too long", dir);
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(path, 0777) == 0) {
            if (made && nmade && *nmade < max) made[(*nmade)++] = (int)(p - path);
        } else if (errno != EEXIST) {
            return ft_err_set(err, FT_EIO, "%s: cannot create directory: %s", path,
                              strerror(errno));
        }
        *p = saved;
        if (!saved) break;
    }
    struct stat st;
    if (stat(dir, &st) != 0)
        return ft_err_set(err, FT_EIO, "%s: cannot use as a directory: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return ft_err_set(err, FT_EIO, "%s: not a directory", dir);
    return FT_OK;
}

ft_status ft_dir_make(const char *dir, ft_err *err) {
    return ft_dir_make_noting(dir, NULL, 0, NULL, err);
}

void ft_dir_unmake(const char *dir, const int *made, int nmade) {
    char path[4096];
    for (int i = nmade - 1; i >= 0; i--)
        if (made[i] > 0 && made[i] < (int)sizeof path) {
            snprintf(path, (size_t)made[i] + 1, "%s", dir);
            rmdir(path); /* only an empty one goes: what another process put there stays */
        }
}
