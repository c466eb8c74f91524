/* ft_test.h: the tiny test harness every ctest program uses.
 *
 *   static void test_something(void) { FT_CHECK(x == 1, "x was %d", x); }
 *   int main(void) { FT_RUN(test_something); return ft_test_finish(); }
 *
 * A failed check prints file:line and the message and marks the program failed; the test keeps
 * going so one run shows every failure. Each FT_RUN line gives its wall time, so the slow part of
 * a slow test is named. ft_test_skip() exits with 77 (ctest SKIP_RETURN_CODE).
 */
#ifndef FT_TEST_H
#define FT_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int ft_test_failures;
static int ft_test_checks;
static const char *ft_test_current = "";

#define FT_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        ft_test_checks++;                                                                          \
        if (!(cond)) {                                                                             \
            ft_test_failures++;                                                                    \
            fprintf(stderr, "%s:%d: %s: check failed: %s: ", __FILE__, __LINE__, ft_test_current,  \
                    #cond);                                                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* |a - b| <= tol * max(1, |b|): relative for large values, absolute near zero. */
#define FT_CHECK_NEAR(a, b, tol)                                                                   \
    do {                                                                                           \
        double ft_a_ = (double)(a), ft_b_ = (double)(b);                                           \
        double ft_s_ = fabs(ft_b_) > 1.0 ? fabs(ft_b_) : 1.0;                                      \
        FT_CHECK(fabs(ft_a_ - ft_b_) <= (tol)*ft_s_, "%s = %.17g, expected %.17g (tol %g)", #a,    \
                 ft_a_, ft_b_, (double)(tol));                                                     \
    } while (0)

#define FT_RUN(fn)                                                                                 \
    do {                                                                                           \
        ft_test_current = #fn;                                                                     \
        int ft_before_ = ft_test_failures;                                                         \
        struct timespec ft_t0_, ft_t1_;                                                            \
        clock_gettime(CLOCK_MONOTONIC, &ft_t0_);                                                   \
        fn();                                                                                      \
        clock_gettime(CLOCK_MONOTONIC, &ft_t1_);                                                   \
        fprintf(                                                                                   \
            stderr, "%-48s %-6s %8.2f s\n", #fn, ft_test_failures == ft_before_ ? "ok" : "FAILED", \
            (double)(ft_t1_.tv_sec - ft_t0_.tv_sec) + 1e-9 * (ft_t1_.tv_nsec - ft_t0_.tv_nsec));   \
    } while (0)

static inline int ft_test_finish(void) {
    fprintf(stderr, "%d checks, %d failed\n", ft_test_checks, ft_test_failures);
    return ft_test_failures ? 1 : 0;
}

static inline void ft_test_skip(const char *why) {
    fprintf(stderr, "SKIP: %s\n", why);
    exit(77);
}

/* ||a - b|| / ||b|| over n doubles (||b|| = 0: returns ||a - b||). */
static inline double ft_test_rel_err(const double *a, const double *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = a[i] - b[i];
        num += d * d;
        den += b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* free() of every pointer listed: FT_FREE(a, b, c). */
#define FT_FREE(...)                                                                               \
    do {                                                                                           \
        void *ft_free_[] = {__VA_ARGS__};                                                          \
        for (size_t ft_i_ = 0; ft_i_ < sizeof ft_free_ / sizeof ft_free_[0]; ft_i_++)              \
            free(ft_free_[ft_i_]);                                                                 \
    } while (0)

static inline void *ft_test_alloc(size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory allocating %zu bytes\n", bytes);
        exit(2);
    }
    return p;
}

/* A fresh folder /tmp/ft_test_NAME.XXXXXX into dir (n bytes); exits 1 when it cannot be made. */
static inline void ft_test_tmpdir(char *dir, size_t n, const char *name) {
    snprintf(dir, n, "/tmp/ft_test_%s.XXXXXX", name);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
}

/* dir/name, in one of four buffers used in turn (so four may be held at once). */
static inline const char *ft_test_path(const char *dir, const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* The whole of a file, NUL-terminated (a short read ends it where the read stopped); NULL when
 * it cannot be opened. The caller frees it. */
static inline char *ft_test_read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = ft_test_alloc((size_t)(n > 0 ? n : 0) + 1);
    size_t got = n > 0 ? fread(s, 1, (size_t)n, f) : 0;
    s[got] = '\0';
    fclose(f);
    return s;
}

/* FT_TEST_ASAN: a sanitizer build (gcc says so by __SANITIZE_ADDRESS__, clang by
 * __has_feature). */
#if defined(__SANITIZE_ADDRESS__)
#define FT_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FT_TEST_ASAN 1
#endif
#endif

#endif
