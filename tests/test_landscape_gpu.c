/* test_landscape_gpu.c: the community's measured GPU landscapes (landscapes/README.md beside
 * DESIGN.md: the FAIR Benchmark Hub for Auto-Tuning) read by tuner/landscape_formats.c: each
 * file's counts and optimum, the time each takes to load, and the two files of one measurement
 * (a Kernel Tuner cache and its FAIR T4 twin) giving the same landscape.
 *
 * The files are looked for in $FT_LANDSCAPES_DIR, else in shared/landscapes beside the source
 * tree; where neither is, the test skips (77): CI need not have them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tuner/replay.h"
#include "ft_test.h"

static char dir[1024];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Load gpu/NAME.json.gz; the seconds it took in *secs. */
static int load(const char *name, ft_landscape *l, double *secs) {
    char path[1200];
    snprintf(path, sizeof path, "%s/gpu/%s.json.gz", dir, name);
    ft_err err = {0};
    double t0 = now_s();
    ft_status s = ft_landscape_load(path, l, &err);
    *secs = now_s() - t0;
    FT_CHECK(s == FT_OK, "%s", err.msg);
    return s == FT_OK;
}

/* Every file: its counts (README's table) and optimum; how long it takes to load. */
static void test_files(void) {
    static const struct {
        const char *name, *format;
        int entries, valid;
        double best_ms;
    } files[] = {
        {"convolution-A100", "kt-cache", 4362, 4201, 0.554},
        {"convolution-A100_T4", "t4", 4362, 4201, 0.554},
        {"convolution-A4000", "kt-cache", 4362, 4201, 1.021},
        {"convolution-MI250X", "kt-cache", 4362, 4362, 0.659},
        {"dedispersion-A100", "kt-cache", 11130, 11130, 68.1},
        {"dedispersion-A4000", "kt-cache", 11130, 11130, 147.7},
        {"dedispersion-A4000_T4", "t4", 11130, 11130, 147.7},
        {"dedispersion-MI250X", "kt-cache", 11130, 11130, 49.6},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        ft_landscape l;
        double secs;
        if (!load(files[i].name, &l, &secs)) continue;
        fprintf(stderr, "  %-24s %-8s %6d candidates, %4d failed, optimum %.4g ms: loaded in %.3f s\n",
                files[i].name, l.format, l.ncands, l.nrejected, 1e3 * l.score[l.best], secs);
        FT_CHECK(strcmp(l.format, files[i].format) == 0, "%s: %s", files[i].name, l.format);
        FT_CHECK(l.ncands == files[i].entries && l.ncands - l.nrejected == files[i].valid,
                 "%s: %d candidates, %d failed", files[i].name, l.ncands, l.nrejected);
        FT_CHECK(fabs(1e3 * l.score[l.best] - files[i].best_ms) < 0.0015 * files[i].best_ms,
                 "%s: optimum %.6g ms", files[i].name, 1e3 * l.score[l.best]);
        FT_CHECK(l.ncost == l.ncands, "%s: %d costs", files[i].name, l.ncost);
        ft_landscape_free(&l);
    }
}

/* A Kernel Tuner cache and the T4 file of the same measurement: the same candidates, scores
 * and failures; costs alike up to what the formats record differently (Kernel Tuner's
 * benchmark_time against T4's sum of runtimes: within 1% here). */
static void same_measurement(const char *kt_name, const char *t4_name) {
    ft_landscape kt, t4;
    double s1, s2;
    if (!load(kt_name, &kt, &s1)) return;
    if (!load(t4_name, &t4, &s2)) {
        ft_landscape_free(&kt);
        return;
    }
    FT_CHECK(ft_landscape_same_params(&kt, &t4), "%s and %s: parameters differ", kt_name, t4_name);
    FT_CHECK(kt.ncands == t4.ncands && kt.nrejected == t4.nrejected && kt.best == t4.best,
             "%d/%d/%d vs %d/%d/%d", kt.ncands, kt.nrejected, kt.best, t4.ncands, t4.nrejected,
             t4.best);
    int cands = 0, scores = 0, costs = 0;
    for (int c = 0; c < kt.ncands && c < t4.ncands; c++) {
        cands += !ft_config_equal(&kt.cands[c], &t4.cands[c]);
        scores += !(kt.score[c] == t4.score[c]);
        costs += !(fabs(kt.cost[c] - t4.cost[c]) <= 0.01 * kt.cost[c]);
    }
    FT_CHECK(cands == 0 && scores == 0 && costs == 0,
             "%s vs %s: %d candidates, %d scores, %d costs differ", kt_name, t4_name, cands, scores,
             costs);
    ft_landscape_free(&kt);
    ft_landscape_free(&t4);
}

static void test_kt_equals_t4(void) {
    same_measurement("convolution-A100", "convolution-A100_T4");
    same_measurement("dedispersion-A4000", "dedispersion-A4000_T4");
}

/* The same kernel on two GPUs: a warm start across them; another kernel: refused. */
static void test_warm_across_gpus(void) {
    ft_landscape a, b, d;
    double s;
    if (!load("convolution-A100", &a, &s)) return;
    if (load("convolution-A4000", &b, &s)) {
        int first[3], nfirst = 0;
        ft_err err = {0};
        FT_CHECK(ft_landscape_warm(&a, &b, 3, first, &nfirst, NULL, &err) == FT_OK && nfirst == 3,
                 "%s", err.msg);
        ft_landscape_free(&b);
    }
    if (load("dedispersion-A100", &d, &s)) {
        ft_err err = {0};
        FT_CHECK(ft_landscape_warm(&a, &d, 3, NULL, NULL, NULL, &err) == FT_EINVAL &&
                     strstr(err.msg, "same tunable parameters"),
                 "%s", err.msg);
        ft_landscape_free(&d);
    }
    ft_landscape_free(&a);
}

int main(void) {
    const char *env = getenv("FT_LANDSCAPES_DIR");
    snprintf(dir, sizeof dir, "%s", env && *env ? env : FT_SOURCE_DIR "/../shared/landscapes");
    char probe[1200];
    struct stat sb;
    snprintf(probe, sizeof probe, "%s/gpu/convolution-A100.json.gz", dir);
    if (stat(probe, &sb) != 0) ft_test_skip("no GPU landscapes (set FT_LANDSCAPES_DIR)");
    FT_RUN(test_files);
    FT_RUN(test_kt_equals_t4);
    FT_RUN(test_warm_across_gpus);
    return ft_test_finish();
}
