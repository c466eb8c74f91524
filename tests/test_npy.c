/* test_npy.c: .npy round trips, hand-made files of every supported version and dtype, and one
 * clear error for every kind of bad file. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/npy.h"
#include "core/paths.h"
#include "core/rng.h"
#include "ft_test.h"

static char dir[64];

static void path_of(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

/* Write a hand-made .npy: the given version, header dict and raw data bytes. */
static void write_raw(const char *name, int major, const char *dict, const void *data,
                      size_t bytes) {
    char p[256];
    path_of(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    FT_CHECK(f != NULL, "cannot create %s", p);
    if (!f) return;
    size_t dl = strlen(dict);
    size_t pre = major == 1 ? 10 : 12;
    size_t total = (pre + dl + 1 + 63) / 64 * 64, hlen = total - pre;
    unsigned char head[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)major, 0};
    for (size_t i = 0; i < pre - 8; i++)
        head[8 + i] = (unsigned char)(hlen >> (8 * i));
    fwrite(head, 1, pre, f);
    fwrite(dict, 1, dl, f);
    for (size_t i = pre + dl; i + 1 < total; i++)
        fputc(' ', f);
    fputc('\n', f);
    if (bytes) fwrite(data, 1, bytes, f);
    fclose(f);
}

static ft_status load(const char *name, ft_tensor **t, ft_err *err) {
    char p[256];
    path_of(p, sizeof p, name);
    return ft_npy_load(p, t, err);
}

static void expect_error(const char *name, const char *needle) {
    ft_tensor *t = NULL;
    ft_err err = {0};
    ft_status s = load(name, &t, &err);
    FT_CHECK(s != FT_OK, "%s should fail", name);
    FT_CHECK(t == NULL, "%s: no tensor on failure", name);
    FT_CHECK(strstr(err.msg, needle) != NULL, "%s: message '%s' lacks '%s'", name, err.msg, needle);
    FT_CHECK(strstr(err.msg, name) != NULL, "%s: message '%s' does not name the file", name,
             err.msg);
    ft_tensor_free(t);
}

static void test_round_trip(void) {
    static const ft_dtype dts[] = {FT_F32, FT_F64, FT_I32, FT_U8};
    static const int64_t shapes[][3] = {{0, 0, 0}, {7, 0, 0}, {3, 4, 5}};
    static const int ranks[] = {0, 1, 3};
    ft_rng rng;
    ft_rng_seed(&rng, 42);
    for (size_t d = 0; d < 4; d++) {
        for (size_t k = 0; k < 3; k++) {
            ft_tensor *a, *b = NULL;
            ft_err err = {0};
            FT_CHECK(ft_tensor_new(dts[d], ranks[k], shapes[k], &a, &err) == FT_OK, "%s", err.msg);
            for (int64_t i = 0; i < ft_tensor_numel(a); i++) {
                double v = ft_rng_normal(&rng) * 100;
                if (dts[d] == FT_F32) ((float *)a->data)[i] = (float)v;
                if (dts[d] == FT_F64) ((double *)a->data)[i] = v;
                if (dts[d] == FT_I32) ((int32_t *)a->data)[i] = (int32_t)v;
                if (dts[d] == FT_U8) ((uint8_t *)a->data)[i] = (uint8_t)ft_rng_below(&rng, 256);
            }
            char p[256];
            path_of(p, sizeof p, "rt.npy");
            FT_CHECK(ft_npy_save(p, a, &err) == FT_OK, "save: %s", err.msg);
            FT_CHECK(ft_npy_load(p, &b, &err) == FT_OK, "load: %s", err.msg);
            if (b) {
                FT_CHECK(b->dtype == a->dtype && b->rank == a->rank, "dtype/rank %s rank %d",
                         ft_dtype_name(b->dtype), b->rank);
                for (int r = 0; r < a->rank; r++)
                    FT_CHECK(b->shape[r] == a->shape[r], "shape");
                FT_CHECK(memcmp(a->data, b->data, ft_tensor_nbytes(a)) == 0, "data differs");
            }
            /* NumPy's layout: the data starts on a 64-byte boundary. */
            FILE *f = fopen(p, "rb");
            unsigned char head[10] = {0};
            FT_CHECK(f && fread(head, 1, 10, f) == 10, "reread header");
            if (f) fclose(f);
            FT_CHECK(head[6] == 1 && head[7] == 0, "version 1.0");
            FT_CHECK((10 + (head[8] | head[9] << 8)) % 64 == 0, "header padded to 64 bytes");
            ft_tensor_free(a);
            ft_tensor_free(b);
        }
    }
}

static void test_versions_and_conversions(void) {
    float f[6] = {1, -2, 3.5f, 4, 5, 6};
    write_raw("v2.npy", 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f,
              sizeof f);
    write_raw("v3.npy", 3, "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (6,)}", f,
              sizeof f);
    const char *names[] = {"v2.npy", "v3.npy"};
    for (int i = 0; i < 2; i++) {
        ft_tensor *t = NULL;
        ft_err err = {0};
        FT_CHECK(load(names[i], &t, &err) == FT_OK, "%s: %s", names[i], err.msg);
        if (!t) continue;
        FT_CHECK(t->dtype == FT_F32 && ft_tensor_numel(t) == 6, "%s dtype/numel", names[i]);
        FT_CHECK(memcmp(t->data, f, sizeof f) == 0, "%s data", names[i]);
        ft_tensor_free(t);
    }
    int64_t i64[3] = {0, -7, 2147483647};
    write_raw("i64.npy", 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", i64,
              sizeof i64);
    ft_tensor *t = NULL;
    ft_err err = {0};
    FT_CHECK(load("i64.npy", &t, &err) == FT_OK, "i64: %s", err.msg);
    if (t) {
        const int32_t *d = t->data;
        FT_CHECK(t->dtype == FT_I32 && d[0] == 0 && d[1] == -7 && d[2] == 2147483647,
                 "int64 narrowed to int32");
        ft_tensor_free(t);
    }
    uint8_t b[4] = {0, 1, 1, 0};
    write_raw("bool.npy", 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (2, 2), }", b, 4);
    t = NULL;
    FT_CHECK(load("bool.npy", &t, &err) == FT_OK, "bool: %s", err.msg);
    if (t) {
        FT_CHECK(t->dtype == FT_U8 && memcmp(t->data, b, 4) == 0, "bool read as uint8");
        ft_tensor_free(t);
    }
}

static void test_bad_files(void) {
    float f[4] = {1, 2, 3, 4};
    char p[256];
    path_of(p, sizeof p, "magic.npy");
    FILE *fp = fopen(p, "wb");
    if (fp) {
        fputs("PK\x03\x04 this is a zip, not an npy file", fp);
        fclose(fp);
    }
    expect_error("magic.npy", "wrong magic");
    write_raw("f16.npy", 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }", f, 8);
    expect_error("f16.npy", "unsupported dtype '<f2'");
    write_raw("be.npy", 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", f, 16);
    expect_error("be.npy", "big-endian");
    write_raw("fortran.npy", 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", f,
              16);
    expect_error("fortran.npy", "Fortran");
    write_raw("short.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", f, 16);
    expect_error("short.npy", "truncated data");
    write_raw("long.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", f, 16);
    expect_error("long.npy", "extra bytes");
    write_raw("noshape.npy", 1, "{'descr': '<f4', 'fortran_order': False, }", f, 16);
    expect_error("noshape.npy", "lacks 'shape'");
    write_raw("garbage.npy", 1, "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (4,), }", f, 16);
    expect_error("garbage.npy", "malformed");
    /* (4) is Python's integer 4: NumPy writes one dimension as (4,) and reads (4) as no shape */
    write_raw("int4.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4), }", f, 16);
    expect_error("int4.npy", "malformed");
    write_raw("after.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), } x", f, 16);
    expect_error("after.npy", "malformed");
    write_raw("v9.npy", 9, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", f, 16);
    expect_error("v9.npy", "version 9.0");
    int64_t big[1] = {1LL << 40};
    write_raw("i64big.npy", 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", big, 8);
    expect_error("i64big.npy", "does not fit in int32");
    expect_error("does-not-exist.npy", "cannot open");
    /* a legal 2.0 header padded past what the reader takes: said so, not "truncated" */
    size_t pad = 70000;
    char *dict = malloc(pad + 100);
    if (dict) {
        int w = snprintf(dict, 100, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }");
        memset(dict + w, ' ', pad);
        dict[w + pad] = '\0';
        write_raw("bighead.npy", 2, dict, f, 16);
        expect_error("bighead.npy", "more than the 65536 this reader takes");
        free(dict);
    }
}

/* AddressSanitizer's shadow memory does not fit under an address-space limit (FT_TEST_ASAN:
 * ft_test.h). */

/* A header that claims more data than the file holds is refused from the file's size, before
 * anything is allocated, and a shape too large to address names the file. */
static void test_lying_headers(void) {
    write_raw("huge.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824, 1), }",
              NULL, 0);
    char p[256];
    path_of(p, sizeof p, "huge.npy");
    struct stat st;
    FT_CHECK(stat(p, &st) == 0 && st.st_size == 128, "the lying file is 128 bytes");
    expect_error("huge.npy", "truncated data");
    expect_error("huge.npy", "4294967296 bytes");
#ifndef FT_TEST_ASAN
    /* Under a 1 GiB address-space limit the 4 GiB the header claims cannot even be reserved:
     * the message must still be the file's, not "out of memory". */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {1UL << 30, 1UL << 30};
        setrlimit(RLIMIT_AS, &rl);
        ft_tensor *t = NULL;
        ft_err err = {0};
        ft_status s = ft_npy_load(p, &t, &err);
        int ok = s == FT_EFORMAT && strstr(err.msg, "truncated data") && strstr(err.msg, p);
        if (!ok) fprintf(stderr, "under a 1 GiB limit: %s\n", err.msg);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    FT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
             "the claimed size is checked before allocating");
#endif
    float f[2] = {1, 2};
    write_raw("overflow.npy", 1,
              "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }",
              f, sizeof f);
    expect_error("overflow.npy", "too large");
    write_raw("overflow2.npy", 1,
              "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,), }", f,
              sizeof f);
    expect_error("overflow2.npy", "too large");
    /* A directory where a file should be. */
    path_of(p, sizeof p, "adir.npy");
    FT_CHECK(mkdir(p, 0755) == 0, "mkdir %s", p);
    expect_error("adir.npy", "is a directory");
    ft_tensor *t = NULL;
    ft_err err = {0};
    ft_npy_load(p, &t, &err);
    FT_CHECK(strstr(err.msg, "magic") == NULL, "a directory is not a wrong magic string: %s",
             err.msg);
    rmdir(p);
}

static void write_text_file(const char *p, const char *text) {
    FILE *f = fopen(p, "wb");
    FT_CHECK(f != NULL, "cannot create %s", p);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static int file_is(const char *p, const char *text) {
    FILE *f = fopen(p, "rb");
    if (!f) return 0;
    char buf[256];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strcmp(buf, text) == 0;
}

/* Several files committed all together or not at all. */
static void test_commit_all(void) {
    char pa[256], pb[256], pc[256], ta[4096], tb[4096], tc[4096];
    path_of(pa, sizeof pa, "all_a.txt");
    path_of(pb, sizeof pb, "all_b.txt");
    path_of(pc, sizeof pc, "all_c.txt");
    write_text_file(pa, "old a");
    /* b is a (non-empty) directory: nothing may change, a's old content included. */
    FT_CHECK(mkdir(pb, 0755) == 0, "mkdir %s", pb);
    char inside[300];
    snprintf(inside, sizeof inside, "%s/x", pb);
    write_text_file(inside, "x");
    ft_err err = {0};
    const char *paths[3] = {pa, pb, pc};
    char *tmps[3] = {ta, tb, tc};
    const char *texts[3] = {"new a", "new b", "new c"};
    for (int i = 0; i < 3; i++) {
        FILE *f = ft_file_create_tmp(paths[i], tmps[i], 4096, &err);
        FT_CHECK(f != NULL, "tmp: %s", err.msg);
        if (f) {
            fputs(texts[i], f);
            fclose(f);
        }
    }
    const char *const ctmps[3] = {ta, tb, tc};
    ft_status s = ft_file_commit_all(3, ctmps, paths, &err);
    FT_CHECK(s == FT_EIO && strstr(err.msg, "all_b.txt") && strstr(err.msg, "is a directory"),
             "a directory in the way: %s", err.msg);
    FT_CHECK(file_is(pa, "old a"), "a was replaced although b failed");
    FT_CHECK(access(pc, F_OK) != 0, "c appeared although b failed");
    for (int i = 0; i < 3; i++)
        FT_CHECK(access(tmps[i], F_OK) != 0, "temporary file %s left behind", tmps[i]);
    unlink(inside);
    rmdir(pb);
    /* With the way clear, every file appears, replacing the old a. */
    for (int i = 0; i < 3; i++) {
        FILE *f = ft_file_create_tmp(paths[i], tmps[i], 4096, &err);
        if (f) {
            fputs(texts[i], f);
            fclose(f);
        }
    }
    FT_CHECK(ft_file_commit_all(3, ctmps, paths, &err) == FT_OK, "commit: %s", err.msg);
    for (int i = 0; i < 3; i++)
        FT_CHECK(file_is(paths[i], texts[i]), "%s not committed", paths[i]);
    for (int i = 0; i < 3; i++)
        unlink(paths[i]);
}

/* A zeroed f32 vector of n elements, and p the path of name in the test's folder. */
static ft_tensor *vector_at(int64_t n, char *p, size_t np, const char *name) {
    int64_t shape[1] = {n};
    ft_tensor *t = NULL;
    ft_err err = {0};
    FT_CHECK(ft_tensor_new(FT_F32, 1, shape, &t, &err) == FT_OK, "alloc");
    path_of(p, np, name);
    return t;
}

/* A file that is replaced keeps its permissions. */
/* Output paths that are not files (a device, a pipe) are written in place: renaming a file over
 * them would replace /dev/null for everyone, or leave a pipe's reader waiting forever. The
 * devices are reached through links in the test's own folder, so that a regression replaces a
 * link, never a device. */
static int write_line(FILE *f, const void *ctx) { return fputs(ctx, f) < 0; }

static void test_write_in_place(void) {
    char null_link[256], full_link[256], fifo[256];
    path_of(null_link, sizeof null_link, "to-null");
    path_of(full_link, sizeof full_link, "to-full");
    path_of(fifo, sizeof fifo, "pipe");
    FT_CHECK(symlink("/dev/null", null_link) == 0, "symlink %s", null_link);
    FT_CHECK(symlink("/dev/full", full_link) == 0, "symlink %s", full_link);
    ft_err err = {0};
    struct stat st;
    FT_CHECK(ft_file_write(null_link, write_line, "a line\n", &err) == FT_OK, "/dev/null: %s",
             err.msg);
    FT_CHECK(lstat(null_link, &st) == 0 && S_ISLNK(st.st_mode),
             "the link to /dev/null was replaced");
    FT_CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode), "/dev/null is not a device now");
    ft_tensor *t = NULL;
    FT_CHECK(ft_tensor_new(FT_F32, 1, (const int64_t[]){4}, &t, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(t && ft_npy_save(null_link, t, &err) == FT_OK, "npy to /dev/null: %s", err.msg);
    ft_tensor_free(t);
    FT_CHECK(lstat(null_link, &st) == 0 && S_ISLNK(st.st_mode), "npy replaced the link");
    /* A full device: one clear error, the device left as it is. */
    if (stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode)) {
        FT_CHECK(ft_file_write(full_link, write_line, "a line\n", &err) == FT_EIO &&
                     strstr(err.msg, "write failed"),
                 "/dev/full: %s", err.msg);
        FT_CHECK(lstat(full_link, &st) == 0 && S_ISLNK(st.st_mode),
                 "the link to /dev/full was replaced");
    }
    /* A pipe: its reader gets the text and the pipe stays a pipe. */
    FT_CHECK(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
    const char *text = "through the pipe\n";
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20); /* a pipe no one writes to would block the reader for ever */
        FILE *r = fopen(fifo, "rb");
        char buf[64] = {0};
        size_t n = r ? fread(buf, 1, sizeof buf - 1, r) : 0;
        _exit(n == strlen(text) && strcmp(buf, text) == 0 ? 0 : 1);
    }
    FT_CHECK(ft_file_write(fifo, write_line, text, &err) == FT_OK, "fifo: %s", err.msg);
    int status = 0;
    FT_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
                 WEXITSTATUS(status) == 0,
             "the pipe's reader did not get the text");
    FT_CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode), "the pipe was replaced by a file");
    /* All or nothing with a device among the files: the file is committed, the device written. */
    char pa[256], ta[4096], tn[4096];
    path_of(pa, sizeof pa, "beside-null.txt");
    FILE *fa = ft_file_create_tmp(pa, ta, sizeof ta, &err);
    FILE *fn = ft_file_create_tmp(null_link, tn, sizeof tn, &err);
    FT_CHECK(fa && fn && tn[0] == '\0', "tmp files: %s", err.msg);
    if (fa) fputs("new", fa), fclose(fa);
    if (fn) fputs("new", fn), fclose(fn);
    const char *const tmps[2] = {ta, tn}, *const paths[2] = {pa, null_link};
    FT_CHECK(ft_file_commit_all(2, tmps, paths, &err) == FT_OK, "commit: %s", err.msg);
    FT_CHECK(file_is(pa, "new"), "the file beside the device was not committed");
    FT_CHECK(lstat(null_link, &st) == 0 && S_ISLNK(st.st_mode), "commit_all replaced the link");
    unlink(pa);
    unlink(fifo);
    unlink(null_link);
    unlink(full_link);
}

static void test_save_keeps_mode(void) {
    char p[256];
    ft_tensor *t = vector_at(2, p, sizeof p, "mode.npy");
    ft_err err = {0};
    FT_CHECK(ft_npy_save(p, t, &err) == FT_OK, "save: %s", err.msg);
    FT_CHECK(chmod(p, 0640) == 0, "chmod");
    FT_CHECK(ft_npy_save(p, t, &err) == FT_OK, "save again: %s", err.msg);
    struct stat st;
    FT_CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0640, "mode %o after a save, want 640",
             (unsigned)(st.st_mode & 07777));
    unlink(p);
    ft_tensor_free(t);
}

/* A write through a symbolic link lands on the file the link pointed at when the temporary file
 * was made, beside it, even if the link is pointed elsewhere before the commit. */
static void test_link_moved_meanwhile(void) {
    char a[128], b[128], link[128], tmp[256];
    snprintf(a, sizeof a, "%s/first.txt", dir);
    snprintf(b, sizeof b, "%s/second.txt", dir);
    snprintf(link, sizeof link, "%s/out.txt", dir);
    FILE *f = fopen(a, "w");
    FT_CHECK(f && fputs("first\n", f) >= 0 && fclose(f) == 0, "write %s", a);
    f = fopen(b, "w");
    FT_CHECK(f && fputs("second\n", f) >= 0 && fclose(f) == 0, "write %s", b);
    FT_CHECK(symlink("first.txt", link) == 0, "symlink %s", link);
    ft_err err = {0};
    f = ft_file_create_tmp(link, tmp, sizeof tmp, &err);
    FT_CHECK(f && strncmp(tmp, a, strlen(a)) == 0, "temporary file beside the target: %s", tmp);
    if (f) {
        fputs("new\n", f);
        FT_CHECK(unlink(link) == 0 && symlink("second.txt", link) == 0, "link moved");
        FT_CHECK(ft_file_commit(f, tmp, link, &err) == FT_OK, "commit: %s", err.msg);
    }
    char got[16] = "";
    f = fopen(a, "r");
    FT_CHECK(f && fgets(got, sizeof got, f) && strcmp(got, "new\n") == 0, "%s holds the write", a);
    if (f) fclose(f);
    f = fopen(b, "r");
    FT_CHECK(f && fgets(got, sizeof got, f) && strcmp(got, "second\n") == 0, "%s untouched", b);
    if (f) fclose(f);
    struct stat st;
    FT_CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "the link stays a link");
    unlink(a);
    unlink(b);
    unlink(link);
}

/* A file made at path, its modification time set back by age seconds (0: left as made). */
static void make_aged(const char *path, int age, int is_dir) {
    if (is_dir) {
        FT_CHECK(mkdir(path, 0700) == 0, "mkdir %s", path);
    } else {
        FILE *f = fopen(path, "w");
        FT_CHECK(f && fputs("partial", f) >= 0 && fclose(f) == 0, "make %s", path);
    }
    if (age) {
        struct timespec ts[2] = {{time(NULL) - age, 0}, {time(NULL) - age, 0}};
        FT_CHECK(utimensat(AT_FDCWD, path, ts, 0) == 0, "age %s", path);
    }
}

/* Temporary files that writes to a path left behind (killed before their rename) are removed by
 * the next write to it, and nothing else is: not a live writer's (held), not a fresh one, not a
 * directory or a name of another shape. */
static void test_stale_tmp_removed(void) {
    char p[512], stale[600], fresh[600], held[600], shortn[600], other[600], sdir[600];
    snprintf(p, sizeof p, "%s/s.npy", dir);
    snprintf(stale, sizeof stale, "%s.tmp.AAAAAA", p);
    snprintf(fresh, sizeof fresh, "%s.tmp.BBBBBB", p);
    snprintf(shortn, sizeof shortn, "%s.tmp.AB", p);
    snprintf(other, sizeof other, "%s/t.npy.tmp.DDDDDD", dir);
    snprintf(sdir, sizeof sdir, "%s.tmp.EEEEEE", p);
    make_aged(stale, 3600, 0);
    make_aged(fresh, 0, 0);
    make_aged(shortn, 3600, 0);
    make_aged(other, 3600, 0);
    make_aged(sdir, 3600, 1);

    /* A writer that is still running (a child holding its temporary file), then killed. */
    int up[2], down[2];
    FT_CHECK(pipe(up) == 0 && pipe(down) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        ft_err e = {0};
        char t[600] = "";
        FILE *f = ft_file_create_tmp(p, t, sizeof t, &e);
        if (!f || fputs("half a file", f) < 0 || fflush(f) != 0) _exit(1);
        if (write(up[1], t, sizeof t) != (ssize_t)sizeof t) _exit(2);
        char c;
        if (read(down[0], &c, 1) < 0) _exit(3);
        _exit(0); /* as if killed: neither committed nor removed */
    }
    FT_CHECK(read(up[0], held, sizeof held) == (ssize_t)sizeof held && held[0], "child's tmp");
    struct timespec old[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
    FT_CHECK(utimensat(AT_FDCWD, held, old, 0) == 0, "age %s", held);

    ft_err err = {0};
    FT_CHECK(ft_file_write(p, write_line, "one\n", &err) == FT_OK, "%s", err.msg);
    FT_CHECK(access(stale, F_OK) != 0, "a temporary file left an hour ago is removed");
    FT_CHECK(access(fresh, F_OK) == 0, "a fresh one is kept (its writer may be about to lock it)");
    FT_CHECK(access(held, F_OK) == 0, "a running writer's is kept, however old");
    FT_CHECK(access(shortn, F_OK) == 0 && access(other, F_OK) == 0 && access(sdir, F_OK) == 0,
             "other names and a directory are kept");

    FT_CHECK(write(down[1], "x", 1) == 1, "release the child");
    int status = 0;
    waitpid(pid, &status, 0);
    FT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exited %d", status);
    FT_CHECK(ft_file_write(p, write_line, "two\n", &err) == FT_OK, "%s", err.msg);
    FT_CHECK(access(held, F_OK) != 0, "once its writer is gone, its temporary file is removed");
    FT_CHECK(access(fresh, F_OK) == 0, "the fresh one is still kept");
    close(up[0]);
    close(up[1]);
    close(down[0]);
    close(down[1]);
    unlink(fresh);
    unlink(shortn);
    unlink(other);
    rmdir(sdir);
    unlink(p);
}

/* The directory of a path, as the temporary files and the profile's lock find it. */
static void test_path_dir(void) {
    static const struct {
        const char *path, *dir;
    } cases[] = {
        {"x.npy", "."}, {"/x.npy", "/"}, {"a/x.npy", "a"}, {"/a/b/x.npy", "/a/b"}, {"a/", "a"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char d[64] = "junk";
        FT_CHECK(ft_path_dir(cases[i].path, d, sizeof d) && strcmp(d, cases[i].dir) == 0,
                 "%s: dir '%s', want '%s'", cases[i].path, d, cases[i].dir);
    }
    char small[4] = "junk";
    FT_CHECK(!ft_path_dir("abcd/x", small, sizeof small) && small[0] == '\0',
             "a directory that does not fit: '%s'", small);
}

/* A FIFO (or a device) is refused before it is opened: opening a FIFO would wait for a writer. */
static void test_load_refuses_a_fifo(void) {
    char p[512];
    snprintf(p, sizeof p, "%s/fifo.npy", dir);
    FT_CHECK(mkfifo(p, 0600) == 0, "mkfifo %s", p);
    ft_tensor *t = NULL;
    ft_err err = {0};
    FT_CHECK(ft_npy_load(p, &t, &err) == FT_EIO && t == NULL &&
                 strstr(err.msg, "not a regular file"),
             "a FIFO: %s", err.msg);
    FT_CHECK(ft_npy_load("/dev/null", &t, &err) == FT_EIO && strstr(err.msg, "not a regular file"),
             "/dev/null: %s", err.msg);
    unlink(p);
}

static void test_save_failure_leaves_nothing(void) {
    char p[256];
    ft_tensor *t = vector_at(4, p, sizeof p, "no-such-dir/x.npy");
    ft_err err = {0};
    FT_CHECK(ft_npy_save(p, t, &err) == FT_EIO, "saving into a missing directory fails");
    FT_CHECK(strstr(err.msg, "no-such-dir") != NULL, "message names the path: %s", err.msg);
    ft_tensor_free(t);
    /* No temporary file may be left behind by any test above. */
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        FT_CHECK(strstr(e->d_name, ".tmp.") == NULL, "left over temporary file %s", e->d_name);
    if (d) closedir(d);
}

int main(void) {
    ft_test_tmpdir(dir, sizeof dir, "npy");
    FT_RUN(test_round_trip);
    FT_RUN(test_versions_and_conversions);
    FT_RUN(test_bad_files);
    FT_RUN(test_lying_headers);
    FT_RUN(test_commit_all);
    FT_RUN(test_write_in_place);
    FT_RUN(test_save_keeps_mode);
    FT_RUN(test_link_moved_meanwhile);
    FT_RUN(test_stale_tmp_removed);
    FT_RUN(test_load_refuses_a_fifo);
    FT_RUN(test_path_dir);
    FT_RUN(test_save_failure_leaves_nothing);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return ft_test_finish();
}
