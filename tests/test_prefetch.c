/* test_prefetch.c: the compile pool (kernels/cuda/backend/prefetch.h) on the emulator's device.
 *
 * The device compiles with a wrapper around the real C++ compiler that logs every compile and
 * waits for a gate file before it starts, so the test decides when the pool's threads may
 * finish: what is queued, running or done when a caller asks is known, not timed. Checked: a
 * module the pool holds is compiled once (ft_dev_compile then loads it from the disk cache), one
 * asked for while queued moves ahead of the queue, a failing one gives its error to the caller
 * that needs it (and is not compiled again), dropped jobs can be queued again, and freeing a
 * pool with jobs queued drops them and returns once the running one ends.
 *
 * The modules go to a private FLARETUNE_CACHE_DIR, removed at the end.
 */
#define _GNU_SOURCE
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cuda/backend/cuda_backend.h"
#include "cuda/device_emu.h"
#include "cuda/backend/prefetch.h"
#include "cuda/device.h"
#include "ft_emu.h"
#include "ft_test.h"

#ifndef FT_TEST_CXX
#define FT_TEST_CXX ""
#endif

#define SAMPLE(name) FT_SOURCE_DIR "/tests/cuda/" name

static ft_dev *dev;
static char dir[256], gate[320], compiles_log[320], started_log[320];

/* ---- the gate and the log ----------------------------------------------------------------------
 */

static void gate_close(void) { unlink(gate); }

static void gate_open(void) {
    FILE *f = fopen(gate, "w");
    if (f) fclose(f);
}

/* Lines of a log that contain needle (all lines when NULL). */
static int count_lines(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += !needle || strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* Compiles that ran to the end of the gate (define: only those with it). */
static int compiles(const char *define) { return count_lines(compiles_log, define); }

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Wait (at most two minutes: a broken pool fails the test instead of hanging it) until the
 * wrapper has started the compile of `define`. */
static int wait_started(const char *define) {
    for (int i = 0; i < 12000; i++) {
        if (count_lines(started_log, define)) return 1;
        sleep_ms(10);
    }
    return 0;
}

static int write_wrapper(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    fprintf(f,
            "#!/bin/sh\n"
            "# test_prefetch's compiler: logs each compile and waits for the gate first.\n"
            "if [ \"$1\" = --version ]; then exec '%s' \"$@\"; fi\n"
            "echo \"$*\" >> '%s'\n"
            "while [ ! -e '%s' ]; do sleep 0.01; done\n"
            "echo \"$*\" >> '%s'\n"
            "exec '%s' \"$@\"\n",
            FT_TEST_CXX, started_log, gate, compiles_log, FT_TEST_CXX);
    fclose(f);
    return chmod(path, 0755) == 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* ---- helpers -----------------------------------------------------------------------------------
 */

static ft_cuda_module_spec spec(const char *source, const char *define) {
    ft_cuda_module_spec s;
    memset(&s, 0, sizeof s);
    s.source = source;
    ft_cuda_spec_define(&s, "%s", define);
    return s;
}

/* emu_basic.cu compiled with FT_PROBE=n: a module of its own for each n. */
static ft_cuda_module_spec probe(int n) {
    char define[32];
    snprintf(define, sizeof define, "FT_PROBE=%d", n);
    return spec(SAMPLE("emu_basic.cu"), define);
}

static ft_status compile_spec(const ft_cuda_module_spec *s, ft_err *err) {
    const char *d = s->defines[0];
    ft_dev_module *m = NULL;
    return ft_dev_compile(dev, s->source, &d, 1, &m, err);
}

/* A pool of nthreads compile threads on the device, its compiles held at the closed gate; NULL,
 * after a failed check, when it cannot be made. */
static ft_cuda_pool *gated_pool(int nthreads) {
    gate_close();
    ft_err err = {0};
    ft_cuda_pool *p = NULL;
    FT_CHECK(ft_cuda_pool_for_device(dev, nthreads, &p, &err) == FT_OK, "%s", err.msg);
    return p;
}

/* Opens the gate once the pool has moved a job to the front of its queue. */
static void *open_when_promoted(void *arg) {
    ft_cuda_pool *p = arg;
    for (int i = 0; i < 12000; i++) {
        ft_cuda_pool_stats st;
        ft_cuda_pool_stats_of(p, &st);
        if (st.promoted > 0) break;
        sleep_ms(10);
    }
    gate_open();
    return NULL;
}

/* Opens the gate a little later (the caller frees the pool meanwhile). */
static void *open_later(void *arg) {
    (void)arg;
    sleep_ms(100);
    gate_open();
    return NULL;
}

/* ---- the tests ---------------------------------------------------------------------------------
 */

/* Three modules and a failing one on two threads: each compiled once; the one asked for while
 * queued runs before the one queued ahead of it; the failure reaches its caller. */
static void test_promote_and_share(void) {
    ft_cuda_pool *p = gated_pool(2);
    if (!p) return;
    ft_err err = {0};
    ft_cuda_module_spec a = probe(1), b = probe(2), c = probe(3);
    ft_cuda_module_spec bad = spec(SAMPLE("emu_unsupported.cu"), "USE=6");
    int ia = ft_cuda_pool_add(p, &a), ib = ft_cuda_pool_add(p, &b);
    int ibad = ft_cuda_pool_add(p, &bad), ic = ft_cuda_pool_add(p, &c);
    FT_CHECK(ia == 0 && ib == 1 && ibad == 2 && ic == 3, "jobs %d %d %d %d", ia, ib, ibad, ic);
    FT_CHECK(ft_cuda_pool_add(p, &a) == ia && ft_cuda_pool_size(p) == 4,
             "a module added twice is one job (%d jobs)", ft_cuda_pool_size(p));

    /* Both threads hold a job at the gate (or are about to): c waits behind bad until asked. */
    pthread_t opener;
    FT_CHECK(pthread_create(&opener, NULL, open_when_promoted, p) == 0, "thread");
    FT_CHECK(compile_spec(&c, &err) == FT_OK, "c: %s", err.msg);
    pthread_join(opener, NULL);
    FT_CHECK(compile_spec(&a, &err) == FT_OK, "a: %s", err.msg);
    FT_CHECK(compile_spec(&b, &err) == FT_OK, "b: %s", err.msg);
    ft_err e1 = {0}, e2 = {0};
    ft_status s1 = compile_spec(&bad, &e1), s2 = compile_spec(&bad, &e2);
    FT_CHECK(s1 == FT_EINVAL && strstr(e1.msg, "undeclared_variable") &&
                 strstr(e1.msg, "emu_unsupported.cu") && strstr(e1.msg, "USE=6"),
             "the failing module's error reaches its caller: %s %s", ft_status_name(s1), e1.msg);
    FT_CHECK(s2 == FT_EINVAL && strcmp(e1.msg, e2.msg) == 0, "and again: %s", e2.msg);

    const ft_cuda_pool_job *jc = ft_cuda_pool_job_at(p, ic), *jbad = ft_cuda_pool_job_at(p, ibad);
    FT_CHECK(jc && jbad && jc->order > 0 && jbad->order > jc->order,
             "the module asked for while queued ran before the one queued ahead of it (%d, %d)",
             jc ? jc->order : -1, jbad ? jbad->order : -1);
    ft_cuda_pool_stats st;
    ft_cuda_pool_stats_of(p, &st);
    FT_CHECK(st.jobs == 4 && st.compiled == 3 && st.cached == 0 && st.failed == 1 &&
                 st.dropped == 0 && st.promoted >= 1,
             "pool: %d jobs, %d compiled, %d cached, %d failed, %d dropped, %d promoted", st.jobs,
             st.compiled, st.cached, st.failed, st.dropped, st.promoted);
    FT_CHECK(st.seconds > 0 && jc && jc->seconds > 0 && jc->seconds <= st.seconds,
             "compile seconds: %g in all", st.seconds);

    /* None compiled twice: the pool built each once, ft_dev_compile loaded them from disk. */
    FT_CHECK(compiles(NULL) == 4 && compiles("FT_PROBE=1") == 1 && compiles("FT_PROBE=2") == 1 &&
                 compiles("FT_PROBE=3") == 1 && compiles("USE=6") == 1,
             "%d compiles", compiles(NULL));
    ft_dev_emu_stats ds;
    ft_dev_emu_stats_of(dev, &ds, &err);
    FT_CHECK(ds.compiled == 3 && ds.disk_hits == 3 && ds.memory_hits == 0,
             "device: %d compiled, %d from disk, %d from memory", ds.compiled, ds.disk_hits,
             ds.memory_hits);
    ft_cuda_pool_free(p);
}

/* Dropped jobs are not compiled; added again they are queued again. */
static void test_drop_and_requeue(void) {
    ft_cuda_pool *p = gated_pool(1);
    if (!p) return;
    ft_cuda_module_spec g = probe(7), h = probe(8);
    ft_cuda_pool_add(p, &g);
    int ih = ft_cuda_pool_add(p, &h);
    FT_CHECK(wait_started("FT_PROBE=7"), "the pool's thread did not start its job");
    ft_cuda_pool_drop_queued(p); /* h: its thread is at the gate with g */
    const ft_cuda_pool_job *jh = ft_cuda_pool_job_at(p, ih);
    ft_cuda_pool_stats st;
    ft_cuda_pool_stats_of(p, &st);
    FT_CHECK(jh && jh->state == FT_POOL_DROPPED && st.dropped == 1, "dropped: %d", st.dropped);
    FT_CHECK(ft_cuda_pool_add(p, &h) == ih && jh->state == FT_POOL_QUEUED, "queued again");
    gate_open();
    ft_cuda_pool_wait_all(p);
    FT_CHECK(jh->state == FT_POOL_DONE && jh->status == FT_OK && compiles("FT_PROBE=8") == 1,
             "compiled once queued again: %s", jh->msg);
    ft_cuda_pool_free(p);
}

/* Freeing a pool whose thread is compiling and whose queue is not empty: the queue is dropped,
 * the running compile ends, free returns and the device compiles alone again. */
static void test_free_with_queued(void) {
    ft_cuda_pool *p = gated_pool(1);
    if (!p) return;
    ft_err err = {0};
    ft_cuda_module_spec d = probe(4), e = probe(5), f = probe(6);
    ft_cuda_pool_add(p, &d);
    ft_cuda_pool_add(p, &e);
    ft_cuda_pool_add(p, &f);
    FT_CHECK(wait_started("FT_PROBE=4"), "the pool's thread did not start its job");
    pthread_t opener;
    FT_CHECK(pthread_create(&opener, NULL, open_later, NULL) == 0, "thread");
    ft_cuda_pool_free(p);
    pthread_join(opener, NULL);
    FT_CHECK(compiles("FT_PROBE=4") == 1 && compiles("FT_PROBE=5") == 0 &&
                 compiles("FT_PROBE=6") == 0,
             "the running compile ended, the queued ones were dropped");
    FT_CHECK(compile_spec(&e, &err) == FT_OK && compiles("FT_PROBE=5") == 1,
             "no pool attached: the device compiles itself: %s", err.msg);
}

int main(void) {
    if (!*FT_TEST_CXX || access(FT_TEST_CXX, X_OK) != 0)
        ft_test_skip("no C++ compiler for the emulator's modules");
    unsetenv("FLARETUNE_EMU_DEBUG");
    unsetenv("FLARETUNE_EMU_THREADS");
    snprintf(dir, sizeof dir, "%s/ft-prefetch-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(gate, sizeof gate, "%s/gate", dir);
    snprintf(compiles_log, sizeof compiles_log, "%s/compiles", dir);
    snprintf(started_log, sizeof started_log, "%s/started", dir);
    char cxx[320], cache[320];
    snprintf(cxx, sizeof cxx, "%s/cxx.sh", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    if (!write_wrapper(cxx)) {
        perror(cxx);
        return 1;
    }
    setenv("FLARETUNE_EMU_CXX", cxx, 1);
    setenv("FLARETUNE_CACHE_DIR", cache, 1);
    ft_test_open_emu(&dev, NULL);
    FT_RUN(test_promote_and_share);
    FT_RUN(test_drop_and_requeue);
    FT_RUN(test_free_with_queued);
    ft_dev_close(dev);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return ft_test_finish();
}
