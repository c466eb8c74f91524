/* test_tui_model.c: the dashboard's model: events reduced into rows (counts, best / last /
 * default, the top five with ties, history, rolling windows), ETA, rates and the table's order. */
#include <math.h>
#include <string.h>

#include "tui/tui.h"
#include "ft_test.h"

static json_t *ev(const char *text) {
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    if (!j) {
        fprintf(stderr, "bad test JSON: %s: %s\n", e.text, text);
        exit(2);
    }
    return j;
}

static int apply(ft_tui_model *m, const char *text) {
    json_t *j = ev(text);
    int r = ft_tui_model_apply(m, j);
    json_decref(j);
    return r;
}

#define START(run, t, valid, extra)                                                                \
    "{\"event\":\"run_start\",\"run\":\"" run "\",\"t\":" #t ",\"op\":\"fusion.dflash\","          \
    "\"backend\":\"cpu\",\"preset\":\"tiny\",\"dims\":{\"N\":48,\"H\":64},\"strategy\":"           \
    "\"exhaustive\",\"space_valid\":" #valid ",\"resumed\":0,\"budget\":0,\"time_budget_s\":0,"    \
    "\"device\":\"cpu: test\",\"default\":{\"par\":\"blas\",\"chunk\":\"all\"}" extra "}"

static char buf[4096];

static const char *measured(const char *run, double t, const char *cfg, double med, double q1,
                            double q3, int screened) {
    snprintf(buf, sizeof buf,
             "{\"event\":\"measured\",\"run\":\"%s\",\"t\":%.17g,\"config\":%s,\"stats\":"
             "{\"median_s\":%.17g,\"q1_s\":%.17g,\"q3_s\":%.17g,\"iqr_s\":%.17g,\"samples\":50},"
             "\"screened\":%s,\"hist\":{\"lo\":%.17g,\"hi\":%.17g,\"counts\":[1,2,3,4,5,6,7,8,9,"
             "10,11,12,13,14,15,16]}}",
             run, t, cfg, med, q1, q3, q3 - q1, screened ? "true" : "false", q1, q3);
    return buf;
}

static void test_rings(void) {
    ft_tui_ring r;
    FT_CHECK(ft_tui_ring_init(&r, 4), "ring made");
    for (int i = 0; i < 6; i++) {
        ft_tui_point p = {i, 10.0 * i, 0, 0};
        ft_tui_ring_push(&r, p);
    }
    FT_CHECK(r.n == 4, "keeps its capacity: %d", r.n);
    FT_CHECK(ft_tui_ring_at(&r, 0)->t == 2 && ft_tui_ring_at(&r, 3)->t == 5, "oldest dropped");
    FT_CHECK(ft_tui_ring_at(&r, 4) == NULL && ft_tui_ring_at(&r, -1) == NULL, "out of range");
    ft_tui_ring_free(&r);

    ft_tui_vring v;
    FT_CHECK(ft_tui_vring_init(&v, 3), "vring made");
    FT_CHECK(isnan(ft_tui_vring_at(&v, 0)), "empty");
    for (int i = 1; i <= 5; i++)
        ft_tui_vring_push(&v, i);
    FT_CHECK(v.n == 3 && ft_tui_vring_at(&v, 0) == 3 && ft_tui_vring_at(&v, 2) == 5,
             "the last three in order");
    ft_tui_vring_free(&v);
}

static void test_window_stats(void) {
    double p50, p95, mx, jit;
    double a[] = {1, 3, 2, 5, 4};
    ft_tui_window_stats(a, 5, &p50, &p95, &mx, &jit);
    FT_CHECK_NEAR(p50, 3, 1e-12);
    FT_CHECK_NEAR(p95, 4.8, 1e-12); /* 4 + 0.8 * (5 - 4) */
    FT_CHECK_NEAR(mx, 5, 1e-12);
    FT_CHECK_NEAR(jit, (2 + 1 + 3 + 1) / 4.0, 1e-12); /* in arrival order */
    FT_CHECK(a[1] == 3, "the input is left alone");
    ft_tui_window_stats(a, 0, &p50, &p95, &mx, &jit);
    FT_CHECK(isnan(p50) && isnan(p95) && isnan(mx) && isnan(jit), "empty: NAN");
    double one = 7;
    ft_tui_window_stats(&one, 1, &p50, &p95, &mx, &jit);
    FT_CHECK(p50 == 7 && p95 == 7 && mx == 7 && jit == 0, "one sample");

    int c[FT_TUI_BINS];
    double lo, hi;
    double h[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    ft_tui_histogram(h, 17, c, &lo, &hi);
    int sum = 0;
    for (int i = 0; i < FT_TUI_BINS; i++)
        sum += c[i];
    FT_CHECK(sum == 17 && lo == 0 && hi == 16, "every value counted, bounds min and max");
    FT_CHECK(c[0] == 1 && c[15] == 2, "the max falls in the last bin: %d %d", c[0], c[15]);
    double same[] = {2, 2, 2};
    ft_tui_histogram(same, 3, c, &lo, &hi);
    FT_CHECK(c[0] == 3 && lo == 2 && hi == 2, "equal values: one bin");
}

static void test_tune_run(void) {
    ft_tui_model m;
    ft_tui_model_init(&m);
    FT_CHECK(apply(&m, START("r1", 100, 5, "")), "run_start used");
    FT_CHECK(m.nrows == 1, "a row");
    ft_tui_row *r = ft_tui_model_find(&m, "r1");
    FT_CHECK(r && r->kind == FT_ROW_TUNE && r->state == FT_ROW_RUNNING, "running tune row");
    FT_CHECK(!strcmp(r->op, "fusion.dflash") && !strcmp(r->shape, "N=48 H=64"),
             "op and shape: %s, %s", r->op, r->shape);
    FT_CHECK(isnan(r->best) && isnan(r->def) && isnan(r->speedup), "nothing known yet");
    /* The default, with its keys in another order. */
    apply(&m, measured("r1", 101, "{\"chunk\":\"all\",\"par\":\"blas\"}", 10e-6, 9e-6, 11e-6, 0));
    r = ft_tui_model_find(&m, "r1");
    FT_CHECK(r->def == 10e-6, "the default recognised whatever its key order");
    apply(&m, measured("r1", 102, "{\"par\":\"rows\",\"chunk\":\"32\"}", 5e-6, 4.5e-6, 5.5e-6, 0));
    apply(&m, measured("r1", 103, "{\"par\":\"rows\",\"chunk\":\"all\"}", 40e-6, 39e-6, 41e-6, 1));
    apply(&m, "{\"event\":\"verified\",\"run\":\"r1\",\"t\":103.5}");
    apply(&m, "{\"event\":\"rejected\",\"run\":\"r1\",\"t\":104,\"reason\":\"verify\"}");
    r = ft_tui_model_find(&m, "r1");
    FT_CHECK(r->done == 4 && r->measured == 3 && r->rejected == 1 && r->screened == 1,
             "counts: %d %d %d %d", r->done, r->measured, r->rejected, r->screened);
    FT_CHECK(r->best == 5e-6, "best: %g", r->best);
    FT_CHECK_NEAR(r->speedup, 2, 1e-12);
    FT_CHECK(r->last_rejected, "the last one was rejected");
    FT_CHECK(r->ntop == 2, "screened ones stay out of the top: %d", r->ntop);
    FT_CHECK(r->top[0].median == 5e-6 && !strcmp(r->top[0].cfg, "par=rows chunk=32"),
             "top[0] is the best, in the space's order: %s", r->top[0].cfg);
    FT_CHECK(r->top[0].has_hist && r->top[0].hist[15] == 16, "its histogram kept");
    FT_CHECK(!r->top[0].confirmed, "search stats are not confirmed ones");
    FT_CHECK(!r->top[1].tie, "10 us [9, 11] does not tie 5 us [4.5, 5.5]");
    FT_CHECK(r->history.n == 4, "history: every candidate: %d", r->history.n);
    const ft_tui_point *p = ft_tui_ring_at(&r->history, 2);
    FT_CHECK(p->flags & FT_PT_SCREENED, "screened point flagged");
    FT_CHECK(p->t == 3 && p->b == 5e-6, "time since the start, best so far");
    p = ft_tui_ring_at(&r->history, 3);
    FT_CHECK((p->flags & FT_PT_REJECTED) && isnan(p->v), "rejected point");
    /* A near tie before the end: IQRs overlap. */
    apply(&m,
          measured("r1", 105, "{\"par\":\"tiles\",\"chunk\":\"32\"}", 5.2e-6, 5.1e-6, 5.3e-6, 0));
    r = ft_tui_model_find(&m, "r1");
    FT_CHECK(r->ntop == 3 && r->top[1].median == 5.2e-6 && r->top[1].tie, "IQR overlap is a tie");
    FT_CHECK(r->done == 5, "done");
    FT_CHECK(ft_tui_model_running(&m), "running");

    /* Confirmation re-measures side by side; run_end decides. */
    apply(&m, "{\"event\":\"confirm\",\"run\":\"r1\",\"t\":106,\"configs\":[{\"par\":\"rows\","
              "\"chunk\":\"32\"},{\"par\":\"tiles\",\"chunk\":\"32\"},{\"par\":\"blas\",\"chunk\":"
              "\"all\"}],\"stats\":[{\"median_s\":6e-6,\"q1_s\":5.9e-6,\"q3_s\":6.1e-6},"
              "{\"median_s\":5.5e-6,\"q1_s\":5.4e-6,\"q3_s\":5.6e-6},{\"median_s\":12e-6,"
              "\"q1_s\":11e-6,\"q3_s\":13e-6}]}");
    r = ft_tui_model_find(&m, "r1");
    FT_CHECK(r->top[0].median == 5.5e-6 && !strcmp(r->top[0].key, "chunk=32 par=tiles"),
             "confirm re-sorts: %s", r->top[0].key);
    FT_CHECK(r->top[0].has_hist, "the histogram survives a stats update");
    FT_CHECK(r->top[0].confirmed && r->top[1].confirmed, "confirmed stats marked");
    FT_CHECK(r->def == 12e-6 && r->best == 5.5e-6, "default and best from the confirmation");
    apply(&m, "{\"event\":\"run_end\",\"run\":\"r1\",\"t\":107,\"winner\":{\"par\":\"tiles\","
              "\"chunk\":\"32\"},\"stats\":{\"median_s\":5.5e-6,\"q1_s\":5.4e-6,\"q3_s\":5.6e-6},"
              "\"default_stats\":{\"median_s\":12e-6},\"speedup\":2.1818,\"tie\":[{\"chunk\":"
              "\"32\",\"par\":\"rows\"}],\"interrupted\":false}");
    r = ft_tui_model_find(&m, "r1");
    FT_CHECK(r->state == FT_ROW_DONE && r->t_end == 107, "ended");
    FT_CHECK(r->speedup == 2.1818, "the run's own speedup");
    FT_CHECK(!r->top[0].tie && r->top[1].tie && !strcmp(r->top[1].key, "chunk=32 par=rows"),
             "ties from run_end");
    for (int i = 2; i < r->ntop; i++)
        FT_CHECK(!r->top[i].tie, "only the listed ones tie");
    FT_CHECK(!ft_tui_model_running(&m), "nothing runs");
    FT_CHECK(m.nevents == 9 && m.nbad == 0, "events %ld bad %ld", m.nevents, m.nbad);
    ft_tui_model_free(&m);
}

static void test_top_five_and_runs(void) {
    ft_tui_model m;
    ft_tui_model_init(&m);
    apply(&m, START("a", 10, 20, ""));
    double meds[] = {8, 3, 5, 1, 7, 2, 6, 4};
    for (int i = 0; i < 8; i++) {
        char cfg[64];
        snprintf(cfg, sizeof cfg, "{\"k\":%d}", i);
        apply(&m,
              measured("a", 11 + i, cfg, meds[i] * 1e-6, meds[i] * 0.99e-6, meds[i] * 1.01e-6, 0));
    }
    ft_tui_row *r = ft_tui_model_find(&m, "a");
    FT_CHECK(r->ntop == FT_TUI_TOP, "five kept");
    for (int i = 0; i < FT_TUI_TOP; i++)
        FT_CHECK_NEAR(r->top[i].median, (i + 1) * 1e-6, 1e-12);
    /* A second run in the same feed: the first, never ended, is lost. */
    apply(&m, START("b", 30, 4, ""));
    FT_CHECK(m.nrows == 2, "a row per run");
    FT_CHECK(ft_tui_model_find(&m, "a")->state == FT_ROW_LOST, "a run left open is lost");
    FT_CHECK(ft_tui_model_find(&m, "b")->state == FT_ROW_RUNNING, "the new one runs");
    /* The same run read again (a replaced file): rebuilt, not counted twice. */
    apply(&m, START("a", 10, 20, ""));
    apply(&m, measured("a", 11, "{\"k\":0}", 8e-6, 7e-6, 9e-6, 0));
    r = ft_tui_model_find(&m, "a");
    FT_CHECK(m.nrows == 2 && r->done == 1 && r->ntop == 1, "rebuilt: %d rows, done %d", m.nrows,
             r->done);
    FT_CHECK(r->seq == 0, "keeps its place");
    /* Events of a run never started (a log truncated mid-run): a row anyway. */
    apply(&m, measured("c", 40, "{\"k\":1}", 1e-6, 1e-6, 1e-6, 0));
    FT_CHECK(m.nrows == 3 && !strcmp(ft_tui_model_find(&m, "c")->op, "?"), "unknown op shown");
    /* What is not an event. */
    long bad = m.nbad;
    FT_CHECK(!apply(&m, "[1,2]"), "not an object");
    FT_CHECK(!apply(&m, "{\"event\":\"measured\",\"t\":1}"), "no run");
    FT_CHECK(!apply(&m, "{\"event\":\"mystery\",\"run\":\"a\"}"), "unknown kind");
    FT_CHECK(m.nbad == bad + 3, "three bad");
    ft_tui_model_free(&m);
}

static void test_source_events(void) {
    ft_tui_model m;
    ft_tui_model_init(&m);
    apply(&m, START("a", 10, 20, ""));
    apply(&m, "{\"event\":\"error\",\"t\":12,\"message\":\"disk full\"}");
    FT_CHECK(!strcmp(m.error, "disk full"), "the error kept");
    FT_CHECK(ft_tui_model_find(&m, "a")->state == FT_ROW_FAILED, "the running row failed");
    FT_CHECK(!ft_tui_model_running(&m), "a failed source does not run");
    apply(&m, "{\"event\":\"done\",\"message\":\"every run finished\"}");
    FT_CHECK(m.finished && !strcmp(m.note, "every run finished"), "done");
    ft_tui_model_free(&m);
}

/* A followed log truncated or replaced is read again from the start: the rows and counts read
 * before go, a run that is no longer in the log with them, and one read again is rebuilt. */
static void test_reopen(void) {
    ft_tui_model m;
    ft_tui_model_init(&m);
    m.expected_runs = 2;
    apply(&m, START("a", 10, 20, ""));
    apply(&m, measured("a", 11, "{\"par\":\"blas\"}", 2e-6, 1e-6, 3e-6, 0));
    apply(&m, "{\"event\":\"reopen\",\"reason\":\"truncated\"}");
    FT_CHECK(strstr(m.note, "truncated") != NULL, "note: %s", m.note);
    FT_CHECK(m.nrows == 0 && !ft_tui_model_find(&m, "a"), "the old run's row is gone: %d rows",
             m.nrows);
    FT_CHECK(m.nevents == 0 && isnan(m.t_first) && m.expected_runs == 2,
             "its events no longer count: %ld, t_first %g; the runs expected kept: %d", m.nevents,
             m.t_first, m.expected_runs);
    apply(&m, START("b", 100, 8, ""));
    apply(&m, measured("b", 101, "{\"par\":\"blas\"}", 5e-6, 4e-6, 6e-6, 0));
    FT_CHECK(m.nrows == 1 && ft_tui_model_find(&m, "b") && m.nevents == 2,
             "only the new run: %d rows, %ld events", m.nrows, m.nevents);
    FT_CHECK(m.t_first == 100, "times from the new run: %g", m.t_first);
    /* Replaced by a file that holds the same run: rebuilt, not counted twice. */
    apply(&m, "{\"event\":\"reopen\",\"reason\":\"replaced\"}");
    apply(&m, START("b", 100, 8, ""));
    apply(&m, measured("b", 101, "{\"par\":\"blas\"}", 5e-6, 4e-6, 6e-6, 0));
    const ft_tui_row *r = ft_tui_model_find(&m, "b");
    FT_CHECK(m.nrows == 1 && r && r->done == 1 && strstr(m.note, "replaced"),
             "the same run read again: %d rows, done %d, note %s", m.nrows, r ? r->done : -1,
             m.note);
    ft_tui_model_free(&m);
}

static void test_eta_rate_elapsed(void) {
    ft_tui_model m;
    ft_tui_model_init(&m);
    FT_CHECK(isnan(ft_tui_model_eta(&m, 0, NULL)) && isnan(ft_tui_model_rate(&m, 0)) &&
                 isnan(ft_tui_model_elapsed(&m, 0)),
             "nothing known");
    apply(&m, START("a", 100, 10, ""));
    ft_tui_row *r = ft_tui_model_find(&m, "a");
    FT_CHECK(isnan(ft_tui_row_eta(r, 104)), "nothing done: unknown");
    for (int i = 0; i < 4; i++) {
        char cfg[32];
        snprintf(cfg, sizeof cfg, "{\"k\":%d}", i);
        apply(&m, measured("a", 101 + i, cfg, 1e-6, 1e-6, 1e-6, 0));
    }
    r = ft_tui_model_find(&m, "a");
    FT_CHECK_NEAR(ft_tui_row_eta(r, 108), 12, 1e-9); /* 8 s for 4, 6 left */
    r->budget = 5;
    FT_CHECK_NEAR(ft_tui_row_eta(r, 108), 2, 1e-9); /* one left of the budget */
    r->budget = 0;
    r->time_budget_s = 10;
    FT_CHECK_NEAR(ft_tui_row_eta(r, 108), 2, 1e-9); /* the time budget ends first */
    r->time_budget_s = 0;
    int partial = 0;
    m.expected_runs = 3;
    double eta = ft_tui_model_eta(&m, 108, &partial);
    FT_CHECK_NEAR(eta, 12, 1e-9);
    FT_CHECK(partial, "two runs of unknown length to come");
    apply(&m, "{\"event\":\"run_end\",\"run\":\"a\",\"t\":110,\"winner\":null,\"tie\":[]}");
    apply(&m, START("b", 110, 10, ""));
    for (int i = 0; i < 5; i++) {
        char cfg[32];
        snprintf(cfg, sizeof cfg, "{\"k\":%d}", i);
        apply(&m, measured("b", 111 + i, cfg, 1e-6, 1e-6, 1e-6, 0));
    }
    /* b: 5 of 10 in 5 s -> 5 s left; one run of a's length (10 s) to come. */
    eta = ft_tui_model_eta(&m, 115, &partial);
    FT_CHECK_NEAR(eta, 15, 1e-9);
    FT_CHECK(!partial, "complete");
    /* Events per second over the last 5 s: t = 111..115 while running at 115. */
    FT_CHECK_NEAR(ft_tui_model_rate(&m, 115), 5 / 5.0, 1e-9); /* 110 (start) is outside */
    FT_CHECK_NEAR(ft_tui_model_rate(&m, 125), 0, 1e-9);       /* a stall shows */
    FT_CHECK_NEAR(ft_tui_model_elapsed(&m, 125), 25, 1e-9);
    apply(&m, "{\"event\":\"run_end\",\"run\":\"b\",\"t\":116,\"winner\":null,\"tie\":[]}");
    FT_CHECK(ft_tui_model_running(&m), "between runs, one more to come: still running");
    FT_CHECK_NEAR(ft_tui_model_eta(&m, 116, NULL), 8, 1e-9); /* the mean of 10 s and 6 s */
    apply(&m, "{\"event\":\"done\",\"t\":116}");
    FT_CHECK(!ft_tui_model_running(&m), "the source is done");
    /* Ended: figures at the last event, whatever the clock says. */
    FT_CHECK_NEAR(ft_tui_model_elapsed(&m, 999), 16, 1e-9);
    FT_CHECK_NEAR(ft_tui_model_rate(&m, 999), 5 / 5.0, 1e-9); /* 112..116 */
    FT_CHECK(ft_tui_model_eta(&m, 999, NULL) == 0, "nothing left");
    ft_tui_model_free(&m);
}

/* A run that stops on its own before its space is measured (bayes converged, a --budget or
 * --time ran out) measured all it will: `done` reads 32/32, not 32/96, while the status bar
 * says every run finished. An interrupted run keeps the target it did not reach. */
static void test_run_that_stops_early(void) {
    ft_tui_model m;
    ft_tui_model_init(&m);
    apply(&m, START("a", 100, 96, ""));
    apply(&m, START("b", 100, 96, ""));
    for (int i = 0; i < 32; i++) {
        char cfg[32];
        snprintf(cfg, sizeof cfg, "{\"k\":%d}", i);
        apply(&m, measured("a", 101 + i, cfg, 1e-6, 1e-6, 1e-6, 0));
        apply(&m, measured("b", 101 + i, cfg, 1e-6, 1e-6, 1e-6, 0));
    }
    int measured_n, target;
    ft_tui_row_progress(ft_tui_model_find(&m, "a"), &measured_n, &target);
    FT_CHECK(measured_n == 32 && target == 96, "running: 32/96, got %d/%d", measured_n, target);
    apply(&m, "{\"event\":\"run_end\",\"run\":\"a\",\"t\":140,\"winner\":null,\"tie\":[],"
              "\"search_end\":\"converged\"}");
    apply(&m, "{\"event\":\"run_end\",\"run\":\"b\",\"t\":140,\"winner\":null,\"tie\":[],"
              "\"search_end\":\"interrupted\",\"interrupted\":true}");
    const ft_tui_row *a = ft_tui_model_find(&m, "a"), *b = ft_tui_model_find(&m, "b");
    ft_tui_row_progress(a, &measured_n, &target);
    FT_CHECK(measured_n == 32 && target == 32, "converged: 32/32, got %d/%d", measured_n, target);
    FT_CHECK(!strcmp(a->search_end, "converged"), "why it ended: %s", a->search_end);
    char cell[32];
    ft_tui_cell(a, FT_COL_DONE, 1, cell, sizeof cell);
    FT_CHECK(!strcmp(cell, "32/32"), "the done column: %s", cell);
    ft_tui_row_progress(b, &measured_n, &target);
    FT_CHECK(measured_n == 32 && target == 96, "interrupted: 32/96, got %d/%d", measured_n, target);
    ft_tui_model_free(&m);
}

/* The winner's figures are marked confirmed only when the confirmation round gave them: a run
 * stopped before the round keeps the search's. A run's warm and ceilings events are events of
 * it, not bad lines. */
static void test_confirmed_winner(void) {
    ft_tui_model m;
    ft_tui_model_init(&m);
    apply(&m, START("a", 100, 4, ""));
    apply(&m, START("b", 100, 4, ""));
    FT_CHECK(apply(&m, "{\"event\":\"warm\",\"run\":\"a\",\"t\":100.5,\"from\":\"p.json\"}") &&
                 apply(&m, "{\"event\":\"ceilings\",\"run\":\"a\",\"t\":100.6}") && m.nbad == 0,
             "warm and ceilings events are known: %ld bad", (long)m.nbad);
    apply(&m, measured("a", 101, "{\"k\":1}", 2e-6, 2e-6, 2e-6, 0));
    apply(&m, measured("b", 101, "{\"k\":1}", 2e-6, 2e-6, 2e-6, 0));
    apply(&m, "{\"event\":\"confirm\",\"run\":\"a\",\"t\":102,\"configs\":[{\"k\":1}],"
              "\"stats\":[{\"median_s\":1.9e-6,\"samples\":30}]}");
    apply(&m, "{\"event\":\"run_end\",\"run\":\"a\",\"t\":103,\"winner\":{\"k\":1},"
              "\"stats\":{\"median_s\":1.9e-6,\"samples\":30},\"tie\":[]}");
    apply(&m, "{\"event\":\"run_end\",\"run\":\"b\",\"t\":103,\"winner\":{\"k\":1},"
              "\"stats\":{\"median_s\":2e-6,\"samples\":50},\"tie\":[],\"interrupted\":true}");
    const ft_tui_row *a = ft_tui_model_find(&m, "a"), *b = ft_tui_model_find(&m, "b");
    FT_CHECK(a->ntop == 1 && a->top[0].confirmed, "a confirmed winner is marked so");
    FT_CHECK(b->ntop == 1 && !b->top[0].confirmed, "a stopped run's winner is not confirmed");
    ft_tui_model_free(&m);
}

/* `top` on the logs of a `tune all` knows nothing of the command but its events: run_start's
 * "runs" says which run of how many each is, so between two runs (the first ended, the next
 * not started) the source is still running, not ended. Runs of an older command in the same
 * logs (read later, with an earlier time) do not count towards the latest one. */
static void test_runs_of_a_command(void) {
    ft_tui_model m;
    ft_tui_model_init(&m);
#define RUNS(cmd, k) ",\"runs\":{\"command\":\"" cmd "\",\"index\":" #k ",\"of\":3}"
    apply(&m, START("a", 100, 4, RUNS("c2", 1)));
    FT_CHECK(ft_tui_model_pending_runs(&m) == 2, "two to come: %d", ft_tui_model_pending_runs(&m));
    apply(&m, "{\"event\":\"run_end\",\"run\":\"a\",\"t\":110,\"winner\":null,\"tie\":[]}");
    FT_CHECK(ft_tui_model_running(&m), "between two runs of the command: running");
    /* An older command's run read from another log: it neither resets nor counts. */
    apply(&m, START("old", 50, 4, RUNS("c1", 2)));
    apply(&m, "{\"event\":\"run_end\",\"run\":\"old\",\"t\":60,\"winner\":null,"
              "\"tie\":[]}");
    FT_CHECK(ft_tui_model_pending_runs(&m) == 2, "the older command's run does not count: %d",
             ft_tui_model_pending_runs(&m));
    apply(&m, START("b", 111, 4, RUNS("c2", 2)));
    apply(&m, START("b", 111, 4, RUNS("c2", 2))); /* read again (a log reopened) */
    apply(&m, "{\"event\":\"run_end\",\"run\":\"b\",\"t\":120,\"winner\":null,\"tie\":[]}");
    FT_CHECK(ft_tui_model_pending_runs(&m) == 1 && ft_tui_model_running(&m), "one more to come");
    int partial = 0;
    /* The mean length of the finished runs (10 s, 10 s for the older one, 9 s). */
    FT_CHECK_NEAR(ft_tui_model_eta(&m, 120, &partial), 29.0 / 3, 1e-9);
    apply(&m, START("c", 121, 4, RUNS("c2", 3)));
    apply(&m, "{\"event\":\"run_end\",\"run\":\"c\",\"t\":130,\"winner\":null,\"tie\":[]}");
    FT_CHECK(!ft_tui_model_running(&m), "every run of the command ended");
#undef RUNS
    ft_tui_model_free(&m);
}

/* A log whose writer is gone ("gone", from the follower: its lock free, every byte read): its
 * run without run_end is stopped, not running; no ETA, the clocks stop at its last event; an
 * event of the run after all makes it run again, and its run_end ends it. Between two runs of
 * a command, the runs it had yet to start will not come. A run that ended says nothing. */
static void test_writer_gone(void) {
    ft_tui_model m;
    ft_tui_model_init(&m);
    apply(&m, START("a", 10, 20, ""));
    apply(&m, measured("a", 12, "{\"k\":1}", 2e-6, 2e-6, 2e-6, 0));
    FT_CHECK(ft_tui_model_running(&m), "running before");
    apply(&m, "{\"event\":\"gone\",\"run\":\"nosuch\"}");
    FT_CHECK(ft_tui_model_running(&m) && !m.gone[0], "an unknown run: nothing");
    apply(&m, "{\"event\":\"gone\",\"run\":\"a\",\"log\":\"LOG\"}");
    ft_tui_row *r = ft_tui_model_find(&m, "a");
    FT_CHECK(r->state == FT_ROW_GONE, "the run stopped: state %d", (int)r->state);
    FT_CHECK(!ft_tui_model_running(&m), "the source no longer runs");
    FT_CHECK(strstr(m.gone, "no run_end") != NULL, "said why: %s", m.gone);
    FT_CHECK(isnan(ft_tui_row_eta(r, 100)), "no ETA for a stopped run");
    FT_CHECK_NEAR(ft_tui_model_elapsed(&m, 1000), 2.0, 1e-9);
    FT_CHECK(m.nevents == 2, "the notice is no event of the run: %ld", m.nevents);
    /* The writer was not gone after all (or a tuner resumed the run): it runs again. */
    apply(&m, measured("a", 13, "{\"k\":2}", 3e-6, 3e-6, 3e-6, 0));
    FT_CHECK(r->state == FT_ROW_RUNNING && ft_tui_model_running(&m) && !m.gone[0],
             "running again on its next event");
    apply(&m, "{\"event\":\"gone\",\"run\":\"a\"}");
    apply(&m, "{\"event\":\"run_end\",\"run\":\"a\",\"t\":14,\"winner\":null,\"tie\":[]}");
    FT_CHECK(r->state == FT_ROW_DONE && !m.gone[0], "run_end ends it as usual");
    /* A run that ended: its writer going says nothing. */
    apply(&m, "{\"event\":\"gone\",\"run\":\"a\"}");
    FT_CHECK(r->state == FT_ROW_DONE && !m.gone[0], "an ended run stays done");
    ft_tui_model_free(&m);

    /* Between two runs of a command of three: the writer gone, the third will not start. */
    ft_tui_model_init(&m);
#define RUNS(cmd, k) ",\"runs\":{\"command\":\"" cmd "\",\"index\":" #k ",\"of\":3}"
    apply(&m, START("old", 1, 4, RUNS("c1", 3)));
    apply(&m, "{\"event\":\"run_end\",\"run\":\"old\",\"t\":2,\"winner\":null,\"tie\":[]}");
    apply(&m, START("x", 10, 4, RUNS("c2", 1)));
    apply(&m, "{\"event\":\"run_end\",\"run\":\"x\",\"t\":20,\"winner\":null,\"tie\":[]}");
    apply(&m, START("y", 21, 4, RUNS("c2", 2)));
    apply(&m, "{\"event\":\"run_end\",\"run\":\"y\",\"t\":30,\"winner\":null,\"tie\":[]}");
    FT_CHECK(ft_tui_model_running(&m), "between two runs: running");
    apply(&m, "{\"event\":\"gone\",\"run\":\"old\"}");
    FT_CHECK(ft_tui_model_running(&m), "an older command's log says nothing of this one");
    apply(&m, "{\"event\":\"gone\",\"run\":\"y\"}");
    FT_CHECK(!ft_tui_model_running(&m) && strstr(m.gone, "1 more run will not start"),
             "the third run will not come: %s", m.gone);
    FT_CHECK(ft_tui_model_find(&m, "y")->state == FT_ROW_DONE, "the ended run stays done");
    FT_CHECK(ft_tui_model_eta(&m, 40, NULL) == 0, "no ETA: nothing runs");
    apply(&m, START("z", 41, 4, RUNS("c2", 3))); /* it came after all */
    FT_CHECK(ft_tui_model_running(&m) && !m.gone[0], "a run starts: running again");
#undef RUNS
    ft_tui_model_free(&m);
}

/* The ETA of a run whose first candidate is not measured yet (the next op of a `tune all`, a
 * run whose first candidates were rejected): estimated at the seconds per candidate the other
 * runs took, not unknown. */
static void test_eta_before_first_candidate(void) {
    ft_tui_model m;
    ft_tui_model_init(&m);
    m.expected_runs = 2;
    apply(&m, START("a", 100, 10, ""));
    int partial = 0;
    FT_CHECK(isnan(ft_tui_model_eta(&m, 101, &partial)) && partial, "nothing known at all");
    for (int i = 0; i < 10; i++) {
        char cfg[32];
        snprintf(cfg, sizeof cfg, "{\"k\":%d}", i);
        apply(&m, measured("a", 101 + i, cfg, 1e-6, 1e-6, 1e-6, 0));
    }
    apply(&m, "{\"event\":\"run_end\",\"run\":\"a\",\"t\":110,\"winner\":null,\"tie\":[]}");
    apply(&m, START("b", 110, 5, ""));
    apply(&m, "{\"event\":\"rejected\",\"run\":\"b\",\"t\":111,\"reason\":\"verify\"}");
    FT_CHECK(isnan(ft_tui_row_eta(ft_tui_model_find(&m, "b"), 112)), "b alone cannot tell");
    /* a: 10 candidates in 10 s; b: 4 left (5 valid, 1 rejected) at 1 s each. */
    double eta = ft_tui_model_eta(&m, 112, &partial);
    FT_CHECK_NEAR(eta, 4, 1e-9);
    FT_CHECK(!partial, "every part estimated");
    ft_tui_model_free(&m);
}

static void test_watch_rows(void) {
    ft_tui_model m;
    ft_tui_model_init(&m);
    apply(&m, "{\"event\":\"watch_start\",\"run\":\"w0\",\"t\":50,\"op\":\"loss\",\"backend\":"
              "\"cpu\",\"device\":\"cpu: test\",\"dims\":{\"M\":40,\"V\":320},\"config\":"
              "{\"tile\":64,\"threads\":1},\"profile_median_s\":2e-6}");
    ft_tui_row *r = ft_tui_model_find(&m, "w0");
    FT_CHECK(r && r->kind == FT_ROW_WATCH, "a watch row");
    FT_CHECK(!strcmp(r->config, "tile=64 threads=1"), "config: %s", r->config);
    apply(&m, "{\"event\":\"sample\",\"run\":\"w0\",\"t\":50.1,\"values\":[1e-6,3e-6,2e-6,5e-6,"
              "4e-6],\"calls\":9,\"max_s\":9e-6}");
    r = ft_tui_model_find(&m, "w0");
    FT_CHECK(r->calls == 9, "calls counted from the event: %ld", r->calls);
    FT_CHECK_NEAR(r->p50, 3e-6, 1e-12);
    FT_CHECK_NEAR(r->p95, 4.8e-6, 1e-12);
    FT_CHECK_NEAR(r->max, 5e-6, 1e-12);
    FT_CHECK_NEAR(r->speedup, 1.5, 1e-9); /* p50 against the profile's median */
    const ft_tui_point *p = ft_tui_ring_at(&r->history, 0);
    FT_CHECK(p && p->v == 9e-6 && p->b == 3e-6, "a point per interval: its max and median");
    int sum = 0;
    for (int i = 0; i < FT_TUI_BINS; i++)
        sum += r->win_hist[i];
    FT_CHECK(sum == 5 && r->win_lo == 1e-6 && r->win_hi == 5e-6, "the window's histogram");
    /* The window rolls: only the last FT_TUI_WINDOW samples count. */
    for (int k = 0; k < 3; k++) {
        json_t *e = ev("{\"event\":\"sample\",\"run\":\"w0\",\"t\":51}");
        json_t *vals = json_array();
        for (int i = 0; i < 500; i++)
            json_array_append_new(vals, json_real(100e-6));
        json_object_set_new(e, "values", vals);
        ft_tui_model_apply(&m, e);
        json_decref(e);
    }
    r = ft_tui_model_find(&m, "w0");
    FT_CHECK(r->window.n == FT_TUI_WINDOW, "window full");
    FT_CHECK(r->p50 == 100e-6 && r->max == 100e-6 && r->jitter == 0, "old samples rolled out");
    FT_CHECK(r->calls == 9 + 1500, "calls: %ld", r->calls);
    FT_CHECK(ft_tui_model_running(&m), "a watch row runs");
    ft_tui_model_free(&m);
}

/* A candidate event of a distributed run: evaluated by `rank` on `host`, from `started` to t. */
static const char *ranked(const char *kind, const char *run, double started, double t, int rank,
                          const char *host, const char *device) {
    snprintf(buf, sizeof buf,
             "{\"event\":\"%s\",\"run\":\"%s\",\"t\":%.17g,\"started\":%.17g,\"config\":"
             "{\"k\":%d},\"rank\":%d,\"host\":\"%s\",\"device\":\"%s\",\"stats\":{"
             "\"median_s\":1e-6,\"q1_s\":1e-6,\"q3_s\":1e-6,\"samples\":9},\"reason\":"
             "\"verify\"}",
             kind, run, t, started, (int)(t * 10), rank, host, device);
    return buf;
}

static void test_ranks(void) {
    ft_tui_model m;
    ft_tui_model_init(&m);
    apply(&m, START("d", 100, 50, ""));
    /* Rank 2 reports first; ranks are kept in rank order whatever order they arrive in. */
    apply(&m, ranked("verified", "d", 100, 101, 2, "nodeB", "cuda: NVIDIA H200 (sm_90)"));
    apply(&m, ranked("measured", "d", 100, 102, 2, "nodeB", "cuda: NVIDIA H200 (sm_90)"));
    for (int i = 0; i < 6; i++) /* rank 0: 6 measured between 101 and 131 */
        apply(&m, ranked("measured", "d", 101 + 5 * i, 106 + 5 * i, 0, "nodeA", "cpu: test"));
    apply(&m, ranked("rejected", "d", 120, 121, 1, "nodeA", "cpu: other"));
    apply(&m, ranked("measured", "d", 121, 130, 1, "nodeA", "cpu: other"));
    apply(&m, ranked("measured", "d", 130, 160, 2, "nodeB", "cuda: NVIDIA H200 (sm_90)"));
    ft_tui_row *r = ft_tui_model_find(&m, "d");
    FT_CHECK(r->nranks == 3, "three ranks: %d", r->nranks);
    FT_CHECK(ft_tui_row_ranks_shown(r) == 3, "the pane shows them");
    for (int i = 0; i < r->nranks; i++)
        FT_CHECK(r->ranks[i].rank == i, "rank order: [%d] is %d", i, r->ranks[i].rank);
    const ft_tui_rank *k0 = &r->ranks[0], *k1 = &r->ranks[1], *k2 = &r->ranks[2];
    FT_CHECK(!strcmp(k0->host, "nodeA") && !strcmp(k0->device, "cpu: test"), "rank 0: %s %s",
             k0->host, k0->device);
    FT_CHECK(!strcmp(k2->host, "nodeB") && !strcmp(k2->device, "cuda: NVIDIA H200 (sm_90)"),
             "rank 2: %s %s", k2->host, k2->device);
    FT_CHECK(k0->measured == 6 && k0->rejected == 0, "rank 0: %d %d", k0->measured, k0->rejected);
    FT_CHECK(k1->measured == 1 && k1->rejected == 1, "rank 1: %d %d", k1->measured, k1->rejected);
    FT_CHECK(k2->measured == 2 && k2->rejected == 0, "rank 2: verified is not measured: %d",
             k2->measured);
    /* The span runs from the first candidate's start to the last event. */
    FT_CHECK(k0->t_first == 101 && k0->t_last == 131, "rank 0 span %g..%g", k0->t_first,
             k0->t_last);
    FT_CHECK_NEAR(ft_tui_rank_rate(k0), 6 * 60.0 / 30, 1e-12); /* 12 a minute */
    FT_CHECK_NEAR(ft_tui_rank_rate(k1), 1 * 60.0 / 10, 1e-12); /* 120..130 */
    FT_CHECK_NEAR(ft_tui_rank_rate(k2), 2 * 60.0 / 60, 1e-12); /* 100..160 */
    FT_CHECK(r->measured == 9 && r->rejected == 1, "the row counts every rank's candidates");
    /* A single instant has no rate. */
    ft_tui_rank one;
    memset(&one, 0, sizeof one);
    one.measured = 1;
    one.t_first = one.t_last = 5;
    FT_CHECK(isnan(ft_tui_rank_rate(&one)), "no span: NAN");
    /* The run read again (a replaced log): rebuilt, the ranks not counted twice. */
    apply(&m, START("d", 100, 50, ""));
    r = ft_tui_model_find(&m, "d");
    FT_CHECK(r->nranks == 0 && !ft_tui_row_ranks_shown(r), "rebuilt without ranks");
    apply(&m, ranked("measured", "d", 101, 106, 0, "nodeA", "cpu: test"));
    r = ft_tui_model_find(&m, "d");
    FT_CHECK(r->nranks == 1 && r->ranks[0].measured == 1, "counted once");
    FT_CHECK(!ft_tui_row_ranks_shown(r), "one rank: no pane");
    /* Hostile ranks are ignored; a rank that is not an integer does not count. */
    apply(&m, "{\"event\":\"measured\",\"run\":\"d\",\"t\":107,\"rank\":-3}");
    apply(&m, "{\"event\":\"measured\",\"run\":\"d\",\"t\":107,\"rank\":\"1\"}");
    apply(&m, "{\"event\":\"measured\",\"run\":\"d\",\"t\":107,\"rank\":1e300}");
    r = ft_tui_model_find(&m, "d");
    FT_CHECK(r->nranks == 1, "nothing added: %d", r->nranks);
    /* At most FT_TUI_MAX_RANKS per row. */
    for (int i = 0; i < FT_TUI_MAX_RANKS + 10; i++)
        apply(&m, ranked("verified", "d", 107, 107, 5 + i, "h", "x"));
    r = ft_tui_model_find(&m, "d");
    FT_CHECK(r->nranks == FT_TUI_MAX_RANKS, "capped: %d", r->nranks);
    ft_tui_model_free(&m);
}

static void test_no_ranks(void) {
    ft_tui_model m;
    ft_tui_model_init(&m);
    apply(&m, START("p", 10, 5, ""));
    apply(&m, measured("p", 11, "{\"k\":1}", 1e-6, 1e-6, 1e-6, 0));
    apply(&m, "{\"event\":\"verified\",\"run\":\"p\",\"t\":12,\"host\":\"h\"}");
    apply(&m, "{\"event\":\"rejected\",\"run\":\"p\",\"t\":13,\"reason\":\"verify\"}");
    ft_tui_row *r = ft_tui_model_find(&m, "p");
    FT_CHECK(r->nranks == 0 && r->ranks == NULL, "a run that is not distributed has no ranks");
    FT_CHECK(ft_tui_row_ranks_shown(r) == 0 && ft_tui_row_ranks_shown(NULL) == 0, "no pane");
    ft_tui_layout L;
    ft_tui_layout_compute(24, 80, 1, ft_tui_row_ranks_shown(r), 0, 0, &L);
    FT_CHECK(!L.ranks.h && L.plot.y == L.table.h, "the layout as without ranks");
    ft_tui_model_free(&m);
}

/* A measured event as the scheduler leaves it: its samples thrown away and taken, `clean`,
 * and `stopped` (docs/events.md). */
static const char *busy_measured(const char *run, double t, const char *cfg, double med, int clean,
                                 int discarded, int taken, int stopped) {
    snprintf(buf, sizeof buf,
             "{\"event\":\"measured\",\"run\":\"%s\",\"t\":%.17g,\"config\":%s,\"stats\":"
             "{\"median_s\":%.17g,\"q1_s\":%.17g,\"q3_s\":%.17g,\"iqr_s\":0,\"samples\":%d,"
             "\"discarded\":%d,\"taken\":%d,\"clean\":%s},\"screened\":false,\"clean\":%s%s}",
             run, t, cfg, med, med, med, clean ? taken - discarded : taken, discarded, taken,
             clean ? "true" : "false", clean ? "true" : "false",
             stopped ? ",\"stopped\":{\"after_s\":0.5,\"limit_s\":0.1}" : "");
    return buf;
}

static void test_contention(void) {
    ft_tui_model m;
    ft_tui_model_init(&m);
    apply(&m, START("c1", 100, 6, ""));
    /* The default, not measured cleanly: its median is an upper bound, no baseline. */
    apply(&m, busy_measured("c1", 101, "{\"par\":\"blas\",\"chunk\":\"all\"}", 16e-3, 0, 40,
                            45, 0));
    ft_tui_row *r = ft_tui_model_find(&m, "c1");
    FT_CHECK(isnan(r->def) && isnan(r->best) && r->ntop == 0, "an unclean default is no figure");
    FT_CHECK(r->unclean == 1 && r->nspoiled == 1 && r->spoiled[0].unclean &&
                 r->spoiled[0].median == 16e-3,
             "listed as not clean, with its upper bound");
    FT_CHECK(r->last_spoiled == 1 && r->measured == 1, "the last one was not clean, and counted");
    FT_CHECK(ft_tui_ring_at(&r->history, 0)->flags & FT_PT_UNCLEAN, "its point flagged");
    FT_CHECK(r->discarded == 40 && r->taken == 45, "samples: %ld of %ld", r->discarded, r->taken);
    apply(&m, busy_measured("c1", 102, "{\"par\":\"rows\",\"chunk\":\"32\"}", 5e-6, 1, 2, 52,
                            0));
    r = ft_tui_model_find(&m, "c1");
    FT_CHECK(r->best == 5e-6 && r->ntop == 1 && isnan(r->speedup) && !r->last_spoiled,
             "a clean one ranks; no speedup without a baseline");
    /* Faster, but unclean or stopped: never the best. */
    apply(&m, busy_measured("c1", 103, "{\"par\":\"rows\",\"chunk\":\"64\"}", 1e-6, 0, 9, 9,
                            0));
    apply(&m, busy_measured("c1", 104, "{\"par\":\"tiles\",\"chunk\":\"64\"}", 2e-6, 1, 0, 3,
                            1));
    r = ft_tui_model_find(&m, "c1");
    FT_CHECK(r->best == 5e-6 && r->ntop == 1, "neither unclean nor stopped is the best: %g",
             r->best);
    FT_CHECK(r->unclean == 2 && r->stopped == 1 && r->nspoiled == 3, "counts: %d %d %d",
             r->unclean, r->stopped, r->nspoiled);
    FT_CHECK(r->spoiled[2].stopped && r->spoiled[2].stopped_after_s == 0.5, "the stopped one");
    FT_CHECK(r->last_spoiled == 2 && isnan(ft_tui_ring_at(&r->history, 3)->v),
             "a stopped call has no median to plot");
    FT_CHECK(ft_tui_row_mark(r) == '!', "the table marks the run");
    /* A confirmation the scheduler spoiled: the search's figures stand. */
    apply(&m, "{\"event\":\"confirm\",\"run\":\"c1\",\"t\":105,\"clean\":false,\"used\":"
              "\"search\",\"configs\":[{\"par\":\"rows\",\"chunk\":\"32\"},{\"par\":\"blas\","
              "\"chunk\":\"all\"}],\"stats\":[{\"median_s\":3e-6,\"samples\":4,\"discarded\":6,"
              "\"taken\":10,\"clean\":false},{\"median_s\":4e-6,\"samples\":9,\"discarded\":1,"
              "\"taken\":10,\"clean\":true}]}");
    r = ft_tui_model_find(&m, "c1");
    FT_CHECK(r->best == 5e-6 && !r->top[0].confirmed && isnan(r->def),
             "a spoiled confirmation changes no figure");
    FT_CHECK(r->discarded == 40 + 2 + 9 + 0 + 7 && r->taken == 45 + 52 + 9 + 3 + 20,
             "every sample counted, the confirmation's too: %ld of %ld", r->discarded, r->taken);
    ft_tui_contention c;
    ft_tui_model_contention(&m, &c);
    FT_CHECK(c.discarded == r->discarded && c.taken == r->taken && c.unclean == 2 &&
                 c.stopped == 1,
             "the model's sum");
    /* run_end withholds the speedup; its counts are the run's. */
    apply(&m, "{\"event\":\"run_end\",\"run\":\"c1\",\"t\":106,\"winner\":{\"par\":\"rows\","
              "\"chunk\":\"32\"},\"stats\":{\"median_s\":5e-6},\"default_stats\":{\"median_s\":"
              "16e-3,\"clean\":false},\"speedup\":null,\"speedup_withheld\":\"the default was not "
              "measured cleanly (busy machine)\",\"contention\":{\"busy\":true,"
              "\"samples_discarded\":70,\"samples_taken\":150,\"unclean\":2,\"stopped\":1}}");
    r = ft_tui_model_find(&m, "c1");
    FT_CHECK(isnan(r->def) && isnan(r->speedup), "no speedup from an unclean default");
    FT_CHECK(!strcmp(r->withheld, "no speedup: the default was not measured cleanly (busy "
                                  "machine)"),
             "why: %s", r->withheld);
    FT_CHECK(r->discarded == 70 && r->taken == 150 && r->unclean == 2 && r->stopped == 1,
             "run_end's counts");
    /* Nothing measured cleanly: no winner, and the reason. */
    apply(&m, START("c2", 200, 2, ""));
    apply(&m, busy_measured("c2", 201, "{\"par\":\"rows\",\"chunk\":\"32\"}", 7e-6, 0, 5, 5,
                            0));
    apply(&m, "{\"event\":\"run_end\",\"run\":\"c2\",\"t\":202,\"winner\":null,\"no_winner\":"
              "\"no candidate was measured cleanly (busy machine)\"}");
    r = ft_tui_model_find(&m, "c2");
    FT_CHECK(isnan(r->best) && r->ntop == 0 && r->state == FT_ROW_DONE, "no best");
    FT_CHECK(!strcmp(r->withheld, "no winner: no candidate was measured cleanly (busy machine)"),
             "why: %s", r->withheld);
    ft_tui_model_contention(&m, &c);
    FT_CHECK(c.discarded == 75 && c.taken == 155 && c.unclean == 3, "both runs: %ld of %ld, %d",
             c.discarded, c.taken, c.unclean);
    /* A log older than `taken`: a clean measurement's samples are the kept ones. */
    apply(&m, START("c3", 300, 2, ""));
    apply(&m, "{\"event\":\"measured\",\"run\":\"c3\",\"t\":301,\"config\":{\"par\":"
              "\"rows\"},\"stats\":{\"median_s\":1e-6,\"samples\":50,\"discarded\":3,"
              "\"clean\":true},\"clean\":true}");
    apply(&m, "{\"event\":\"measured\",\"run\":\"c3\",\"t\":302,\"config\":{\"par\":"
              "\"blas\"},\"stats\":{\"median_s\":1e-3,\"samples\":20,\"discarded\":18,"
              "\"clean\":false},\"clean\":false}");
    r = ft_tui_model_find(&m, "c3");
    FT_CHECK(r->discarded == 21 && r->taken == 73, "older logs: %ld of %ld", r->discarded,
             r->taken);
    /* A clean log: nothing to say. */
    apply(&m, START("c4", 400, 2, ""));
    apply(&m, measured("c4", 401, "{\"par\":\"rows\"}", 5e-6, 4e-6, 6e-6, 0));
    r = ft_tui_model_find(&m, "c4");
    FT_CHECK(!r->discarded && r->taken == 50 && !r->unclean && !r->nspoiled && !r->withheld[0] &&
                 ft_tui_row_mark(r) == ' ',
             "a log without the scheduler's fields: clean, its samples kept");
    ft_tui_model_free(&m);
}

static void test_view(void) {
    ft_tui_model m;
    ft_tui_model_init(&m);
    const char *ops[] = {"loss", "attention.decode", "fusion.dflash", "attention.kvproj"};
    double best[] = {5, NAN, 1, 3};
    for (int i = 0; i < 4; i++) {
        snprintf(buf, sizeof buf,
                 "{\"event\":\"run_start\",\"run\":\"r%d\",\"t\":%d,\"op\":\"%s\",\"space_valid\":"
                 "10,\"default\":{\"k\":0}}",
                 i, i, ops[i]);
        apply(&m, buf);
        if (!isnan(best[i])) {
            apply(&m, measured(m.rows[i].run, i + 0.5, "{\"k\":0}", 10e-6, 10e-6, 10e-6, 0));
            char cfg[32];
            snprintf(cfg, sizeof cfg, "{\"k\":%d}", i + 1);
            apply(&m, measured(m.rows[i].run, i + 0.6, cfg, best[i] * 1e-6, best[i] * 1e-6,
                               best[i] * 1e-6, 0));
        }
    }
    int idx[8];
    int n = ft_tui_model_view(&m, FT_SORT_ARRIVAL, NULL, idx, 8);
    FT_CHECK(n == 4 && idx[0] == 0 && idx[3] == 3, "arrival order");
    n = ft_tui_model_view(&m, FT_SORT_OP, "", idx, 8);
    FT_CHECK(n == 4 && idx[0] == 1 && idx[1] == 3 && idx[2] == 2 && idx[3] == 0, "by op");
    n = ft_tui_model_view(&m, FT_SORT_BEST, NULL, idx, 8);
    FT_CHECK(idx[0] == 2 && idx[1] == 3 && idx[2] == 0 && idx[3] == 1,
             "fastest first, unknown last");
    n = ft_tui_model_view(&m, FT_SORT_SPEEDUP, NULL, idx, 8);
    FT_CHECK(idx[0] == 2 && idx[1] == 3 && idx[2] == 0 && idx[3] == 1, "largest speedup first");
    n = ft_tui_model_view(&m, FT_SORT_ARRIVAL, "ATTENTION", idx, 8);
    FT_CHECK(n == 2 && idx[0] == 1 && idx[1] == 3, "filter, any case");
    n = ft_tui_model_view(&m, FT_SORT_ARRIVAL, "nothing", idx, 8);
    FT_CHECK(n == 0, "no match");
    n = ft_tui_model_view(&m, FT_SORT_ARRIVAL, NULL, idx, 2);
    FT_CHECK(n == 2, "capacity respected");
    ft_tui_model_free(&m);
}

int main(void) {
    FT_RUN(test_rings);
    FT_RUN(test_window_stats);
    FT_RUN(test_tune_run);
    FT_RUN(test_top_five_and_runs);
    FT_RUN(test_source_events);
    FT_RUN(test_reopen);
    FT_RUN(test_eta_rate_elapsed);
    FT_RUN(test_run_that_stops_early);
    FT_RUN(test_confirmed_winner);
    FT_RUN(test_runs_of_a_command);
    FT_RUN(test_writer_gone);
    FT_RUN(test_eta_before_first_candidate);
    FT_RUN(test_watch_rows);
    FT_RUN(test_ranks);
    FT_RUN(test_no_ranks);
    FT_RUN(test_contention);
    FT_RUN(test_view);
    return ft_test_finish();
}
