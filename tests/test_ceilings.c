/* test_ceilings.c: the cache-aware roofline (which level judges which working set), the
 * ceilings cache (a busy run cannot lower a figure, a better one raises it with its date, a
 * torn or foreign file is rebuilt, concurrent writers keep the best of all), the monotonic rule
 * between levels, one real round of the CPU probes, and the load of the rest of the machine. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "op/backend.h"
#include "tuner/ceilings.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/load.h"
#include "ft_test.h"

static void level(ft_ceilings *c, const char *name, double capacity, double bw) {
    ft_ceil_level *l = &c->level[c->nlevels++];
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", name);
    l->capacity = capacity;
    l->bw = l->bw_now = bw;
    snprintf(l->seen, sizeof l->seen, "2026-01-01T00:00:00Z");
}

/* L1 64 KiB at 200 GB/s, L2 2 MiB at 100, L3 32 MiB at 60, DRAM at 25; 200 GFLOP/s. */
static void machine(ft_ceilings *c, double scale) {
    memset(c, 0, sizeof *c);
    level(c, "L1", 65536, 200e9 * scale);
    level(c, "L2", 2097152, 100e9 * scale);
    level(c, "L3", 33554432, 60e9 * scale);
    level(c, "DRAM", 0, 25e9 * scale);
    c->bw = c->level[3].bw;
    c->flops = c->flops_now = c->peak_flops = 200e9 * scale;
    c->gemm_flops = 150e9 * scale;
    c->threads = 2;
    snprintf(c->flops_seen, sizeof c->flops_seen, "2026-01-01T00:00:00Z");
    snprintf(c->key, sizeof c->key, "cpu: test machine x 2 (Test); threads 2");
}

static void test_levels(void) {
    ft_ceilings c;
    machine(&c, 1);
    static const struct {
        double ws;
        int cold;
        const char *level;
    } cases[] = {
        {10e3, 0, "L1"},  {131072, 0, "L1"},  {131073, 0, "L2"}, {4194304, 0, "L2"},
        {5e6, 0, "L3"},   {67108864, 0, "L3"}, {1e8, 0, "DRAM"}, {10e3, 1, "DRAM"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ft_roofline r = ft_roofline_of(&c, 1e6, 0, cases[i].ws, cases[i].cold);
        FT_CHECK(!strcmp(r.level_name, cases[i].level), "working set %g (cold %d): %s, want %s",
                 cases[i].ws, cases[i].cold, r.level_name, cases[i].level);
        FT_CHECK(r.working_set == cases[i].ws && !r.compute_bound, "memory-bound at no FLOPs");
    }
    /* The floor is the larger term: 1 MB from L2 (10 us) against 4 MFLOP (20 us). */
    ft_roofline r = ft_roofline_of(&c, 1e6, 4e6, 1e6, 0);
    FT_CHECK_NEAR(r.floor_s, 20e-6, 1e-15);
    FT_CHECK(r.compute_bound && r.bw == 100e9, "compute-bound, L2 named");
    FT_CHECK_NEAR(ft_roofline_s(&c, 1e6, 0, 1e6, 0), 10e-6, 1e-15);
    /* A call faster than its floor is flagged, never printed as a result. */
    json_t *j = ft_roofline_to_json(&r, 10e-6);
    FT_CHECK(json_is_true(json_object_get(j, "suspect")) &&
                 json_number_value(json_object_get(j, "frac")) > 1,
             "above the roof: suspect");
    json_decref(j);
    j = ft_roofline_to_json(&r, 40e-6);
    FT_CHECK(json_is_false(json_object_get(j, "suspect")), "under the roof: not suspect");
    json_decref(j);
}

static char cache[256];

static double cached(const char *key, const char *level_name) {
    json_t *root = json_load_file(cache, 0, NULL);
    const json_t *m = json_object_get(json_object_get(root, "machines"), key);
    double v = level_name ? json_number_value(json_object_get(
                                json_object_get(json_object_get(m, "levels"), level_name), "value"))
                          : json_number_value(json_object_get(json_object_get(m, "flops"), "value"));
    json_decref(root);
    return v;
}

static void test_cache(void) {
    snprintf(cache, sizeof cache, "/tmp/ft_test_ceilings_%d.json", (int)getpid());
    unlink(cache);
    ft_err err = {0};
    ft_ceilings quiet, busy, better;
    machine(&quiet, 1);
    FT_CHECK(ft_ceilings_cache_merge(&quiet, cache, &err) == FT_OK && !quiet.from_cache,
             "the first merge writes the cache");
    FT_CHECK(cached(quiet.key, "L2") == 100e9 && cached(quiet.key, NULL) == 200e9,
             "figures kept: %g", cached(quiet.key, "L2"));
    /* A busy run measures everything at half: the cache's best is used, and stays. */
    machine(&busy, 0.5);
    snprintf(busy.level[1].seen, sizeof busy.level[1].seen, "2026-06-01T00:00:00Z");
    FT_CHECK(ft_ceilings_cache_merge(&busy, cache, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(busy.from_cache && busy.level[1].bw == 100e9 && busy.flops == 200e9 &&
                 busy.level[1].bw_now == 50e9,
             "a busy run cannot lower the ceilings: L2 %g (measured %g)", busy.level[1].bw,
             busy.level[1].bw_now);
    FT_CHECK(!strcmp(busy.level[1].seen, "2026-01-01T00:00:00Z"), "the best one's date");
    FT_CHECK(cached(quiet.key, "L2") == 100e9, "the cache keeps its best");
    /* A better L2 raises the cache, with its date; the other figures stay. */
    machine(&better, 1);
    better.level[1].bw = better.level[1].bw_now = 120e9;
    snprintf(better.level[1].seen, sizeof better.level[1].seen, "2026-07-01T00:00:00Z");
    FT_CHECK(ft_ceilings_cache_merge(&better, cache, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(cached(quiet.key, "L2") == 120e9 && cached(quiet.key, "L3") == 60e9,
             "raised: %g", cached(quiet.key, "L2"));
    /* Another machine (another key) has figures of its own. */
    ft_ceilings other;
    machine(&other, 0.1);
    snprintf(other.key, sizeof other.key, "cpu: another machine x 2 (Test); threads 2");
    FT_CHECK(ft_ceilings_cache_merge(&other, cache, &err) == FT_OK && !other.from_cache &&
                 other.level[1].bw == 10e9,
             "another fingerprint is not raised by this one's");
    /* A torn or foreign file is rebuilt, with a note, never an error. */
    FILE *f = fopen(cache, "w");
    fputs("{\"format\": 1, \"machines\": {\"cpu: test", f);
    fclose(f);
    machine(&busy, 0.5);
    FT_CHECK(ft_ceilings_cache_merge(&busy, cache, &err) == FT_OK && strstr(busy.cache_note, "rebuilt"),
             "a torn cache is rebuilt: %s", busy.cache_note);
    FT_CHECK(cached(quiet.key, "L2") == 50e9, "and holds this run's figures");
    /* Levels: never slower than the level below. */
    ft_ceilings odd;
    machine(&odd, 1);
    odd.level[0].bw = odd.level[0].bw_now = 50e9; /* L1 measured below L2 (a busy moment) */
    unlink(cache);
    FT_CHECK(ft_ceilings_cache_merge(&odd, cache, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(odd.level[0].bw >= odd.level[1].bw, "L1 %g >= L2 %g", odd.level[0].bw, odd.level[1].bw);
    /* No cache: nothing is read or written. */
    ft_ceilings none;
    machine(&none, 1);
    FT_CHECK(ft_ceilings_cache_merge(&none, "", &err) == FT_OK && none.cache_note[0],
             "no cache: a note");
    unlink(cache);
    char lock[300];
    snprintf(lock, sizeof lock, "%s.lock", cache);
    unlink(lock);
}

/* Writers at once: the file stays valid and ends with the best of all of them. */
static void test_concurrent_writers(void) {
    snprintf(cache, sizeof cache, "/tmp/ft_test_ceilings_cc_%d.json", (int)getpid());
    unlink(cache);
    enum { WRITERS = 4, ROUNDS = 25 };
    pid_t kids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        if ((kids[w] = fork()) == 0) {
            for (int r = 0; r < ROUNDS; r++) {
                ft_ceilings c;
                machine(&c, 1);
                c.level[0].bw = c.level[0].bw_now = 100e9 + 1e9 * (w * ROUNDS + r);
                ft_err err = {0};
                if (ft_ceilings_cache_merge(&c, cache, &err) != FT_OK || c.cache_note[0]) _exit(1);
            }
            _exit(0);
        }
    }
    int ok = 1;
    for (int w = 0; w < WRITERS; w++) {
        int st;
        waitpid(kids[w], &st, 0);
        ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    FT_CHECK(ok, "every writer merged without a note");
    ft_ceilings c;
    machine(&c, 1);
    FT_CHECK(cached(c.key, "L1") == 100e9 + 1e9 * (WRITERS * ROUNDS - 1),
             "the best of all writers: %g", cached(c.key, "L1"));
    unlink(cache);
    char lock[300];
    snprintf(lock, sizeof lock, "%s.lock", cache);
    unlink(lock);
}

/* One real round: a hierarchy that ends in memory, growing capacities, every figure measured. */
static void test_cpu_round(void) {
    ft_ceilings c;
    ft_err err = {0};
    FT_CHECK(ft_ceilings_cpu(1, &c, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(c.nlevels >= 1 && !strcmp(c.level[c.nlevels - 1].name, "DRAM") &&
                 c.level[c.nlevels - 1].capacity == 0,
             "memory last (%d levels)", c.nlevels);
    for (int i = 0; i < c.nlevels; i++) {
        FT_CHECK(c.level[i].bw > 0 && isfinite(c.level[i].bw) && c.level[i].probe_bytes > 0,
                 "%s measured", c.level[i].name);
        if (i + 1 < c.nlevels) {
            FT_CHECK(c.level[i].bw >= c.level[i + 1].bw, "%s no slower than %s", c.level[i].name,
                     c.level[i + 1].name);
            FT_CHECK(i + 2 == c.nlevels || c.level[i].capacity < c.level[i + 1].capacity,
                     "capacities grow");
        }
    }
    FT_CHECK(c.peak_flops > 0 && c.gemm_flops > 0 && c.flops >= c.peak_flops &&
                 c.flops >= c.gemm_flops,
             "the compute roof is the higher of the FMA peak and the GEMM");
    FT_CHECK(c.rounds == 1 && c.measured_s > 0, "one round");
}

static void test_load(void) {
    /* The rule at its default, whatever the suite sets (FLARETUNE_MAX_LOAD=off). */
    unsetenv("FLARETUNE_MAX_LOAD");
    ft_load_mark a = {0, 10, 0, 1, 2, 1}, b = {1, 11.5, 0.1, 1.5, 2, 1};
    ft_load l;
    ft_load_between(&a, &b, &l);
    FT_CHECK(l.known && l.busy, "1 CPU of others over 1 s: busy");
    /* FLARETUNE_MAX_LOAD: the CPUs others may use; off: nothing is busy for its load; a value
     * that does not parse leaves the default. */
    static const struct {
        const char *env;
        int busy;
    } th[] = {{"1.5", 0}, {"0.5", 1}, {"off", 0}, {"x", 1}, {"-1", 1}};
    ft_load_mark n0 = {0, 10, 0, 1, 2, 1}, n1 = {1, 11, 0, 1, 2, 1}; /* 1 CPU, no steal */
    for (size_t i = 0; i < sizeof th / sizeof th[0]; i++) {
        setenv("FLARETUNE_MAX_LOAD", th[i].env, 1);
        ft_load_between(&n0, &n1, &l);
        FT_CHECK(l.known && l.busy == th[i].busy, "FLARETUNE_MAX_LOAD=%s: busy %d, want %d",
                 th[i].env, l.busy, th[i].busy);
    }
    unsetenv("FLARETUNE_MAX_LOAD");
    ft_load_between(&a, &b, &l);
    FT_CHECK_NEAR(l.other_cpus, 1.0, 1e-12);
    FT_CHECK_NEAR(l.steal_frac, 0.05, 1e-12);
    ft_load_mark c = {1, 11.52, 0.1, 1.51, 2, 1};
    ft_load_between(&b, &c, &l);
    FT_CHECK(!l.known && !l.busy, "10 ms: too short to judge");
    ft_load_mark q0 = {0, 10, 0, 1, 2, 1}, q1 = {2, 11.2, 0, 2.0, 2, 1};
    ft_load_between(&q0, &q1, &l);
    FT_CHECK(l.known && !l.busy && fabs(l.other_cpus - 0.1) < 1e-12, "0.1 CPU of others: quiet");
    ft_load sum = {0};
    ft_load_add(&sum, &l);
    ft_load busy1;
    ft_load_between(&a, &b, &busy1);
    ft_load_add(&sum, &busy1);
    FT_CHECK_NEAR(sum.other_cpus, (0.1 * 2 + 1.0 * 1) / 3, 1e-12);
    FT_CHECK(sum.span_s == 3 && sum.busy, "weighted by span");
    /* Spans too short to judge alone (a candidate's 0.2 s) add up to a known load: three
     * of a neighbour that keeps a CPU busy are 0.6 s of it, busy. */
    ft_load shorts = {0};
    for (int i = 0; i < 3; i++) {
        ft_load_mark s0 = {10.0 * i, 100, 0, 1, 2, 1}, s1 = {10.0 * i + 0.2, 100.25, 0, 1.05, 2, 1};
        ft_load one;
        ft_load_between(&s0, &s1, &one);
        FT_CHECK(one.read && !one.known && !one.busy && fabs(one.other_cpus - 1.0) < 1e-9,
                 "0.2 s: read (%.2f CPUs), too short to judge alone", one.other_cpus);
        ft_load_add(&shorts, &one);
    }
    FT_CHECK(shorts.known && shorts.busy && fabs(shorts.span_s - 0.6) < 1e-9 &&
                 fabs(shorts.other_cpus - 1.0) < 1e-9,
             "three short spans: known and busy (%.2f s, %.2f CPUs)", shorts.span_s,
             shorts.other_cpus);
    /* A real neighbour: a process spinning for a second is seen. */
    pid_t kid = fork();
    if (kid == 0) {
        double t0 = ft_now_s();
        volatile unsigned long x = 0;
        while (ft_now_s() - t0 < 1.5) x++;
        _exit(0);
    }
    usleep(100000);
    ft_load_mark m0, m1;
    ft_load_mark_take(&m0);
    usleep(1000000);
    ft_load_mark_take(&m1);
    waitpid(kid, NULL, 0);
    ft_load_between(&m0, &m1, &l);
    if (!m0.ok) ft_test_skip("no /proc/stat");
    FT_CHECK(l.known && l.busy && l.other_cpus >= 0.5, "a spinning neighbour: %.2f CPUs",
             l.other_cpus);
    char text[200];
    ft_load_describe(&l, text, sizeof text);
    FT_CHECK(strstr(text, "other processes used") != NULL, "%s", text);
}

/* bench's start: a machine whose cache holds every figure from this week takes them without a
 * probe (no round, the cache's values); figures of long ago, or none, are measured again. */
static void test_recall(void) {
    char path[256], env[300];
    snprintf(path, sizeof path, "/tmp/ft_test_recall_%d.json", (int)getpid());
    unlink(path);
    snprintf(env, sizeof env, "%s", path);
    setenv("FLARETUNE_CEILINGS_CACHE", env, 1);
    ft_ceilings first, again, old;
    ft_err err = {0};
    FT_CHECK(ft_ceilings_recall(&ft_backend_cpu, 1, 7, &first, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(first.rounds == 1, "no cache: measured (%d rounds)", first.rounds);
    FT_CHECK(ft_ceilings_recall(&ft_backend_cpu, 1, 7, &again, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(again.rounds == 0 && again.nlevels == first.nlevels, "a fresh cache: no probe (%d)",
             again.rounds);
    for (int i = 0; i < again.nlevels && i < first.nlevels; i++)
        FT_CHECK(fabs(again.level[i].bw / first.level[i].bw - 1) < 1e-5 && /* 6 digits kept */
                     (again.level[i].capacity > 0) == (first.level[i].capacity > 0),
                 "%s from the cache: %g vs %g", again.level[i].name, again.level[i].bw,
                 first.level[i].bw);
    FT_CHECK(fabs(again.flops / first.flops - 1) < 1e-5, "the compute roof from the cache");
    /* The same cache a month old. */
    json_t *root = json_load_file(path, 0, NULL);
    json_t *m = json_object_get(json_object_get(root, "machines"), first.key);
    const char *name;
    json_t *lv;
    json_object_foreach(json_object_get(m, "levels"), name, lv)
        json_object_set_new(lv, "seen", json_string("2020-01-01T00:00:00Z"));
    json_object_set_new(json_object_get(m, "flops"), "seen", json_string("2020-01-01T00:00:00Z"));
    FT_CHECK(json_dump_file(root, path, 0) == 0, "rewrite the cache");
    json_decref(root);
    FT_CHECK(ft_ceilings_recall(&ft_backend_cpu, 1, 7, &old, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(old.rounds == 1, "an old cache is measured again (%d rounds)", old.rounds);
    unlink(path);
    unsetenv("FLARETUNE_CEILINGS_CACHE");
}

int main(void) {
    FT_RUN(test_levels);
    FT_RUN(test_cache);
    FT_RUN(test_concurrent_writers);
    FT_RUN(test_load);
    FT_RUN(test_cpu_round);
    FT_RUN(test_recall);
    return ft_test_finish();
}
