/* fuzz_eventlog.c: the event-log reader (traces/eventlog.c) on arbitrary bytes, then what
 * replay, trace export and the dashboard make of the events it returns.
 *
 * Exercises ft_eventlog_read on the input as a file (JSON lines, blank lines, a torn last line,
 * a damaged line in the middle, lines that are not events), then on a log that read:
 * ft_landscape_from_events (tuner/replay.c: the last run_start's op, backend, dims, attrs and
 * default, the resumed runs' key chain, every candidate event's config, stats and times, the
 * last confirm event's configs and stats) and, on a landscape that loaded, its JSON export and a
 * short replay of every strategy: one by one, in batches, warm-started from its own best, and
 * for two targets at once; ft_trace_from_events (traces/trace_export.c); and the dashboard's
 * model (tui/: ft_tui_model_apply on every event, the view and every cell of every row, as
 * `flaretune top LOG` shows them).
 *
 * A finding, besides a sanitizer report, a leak or a timeout: a failure without its status and
 * message in ft_err; a read that returns something other than one object with a string "event"
 * per complete non-blank line (plus the last line when it parses), or says "torn" of a log
 * whose last line is complete; a landscape whose optimum, scores, costs or counts are
 * inconsistent, or whose export is not a JSON object of its format; a strategy that breaks its
 * contract (FT_EINTERNAL) or reports a best the landscape lacks; a replay whose time to the
 * target is negative, or whose result for a target changes when it shares the replay with
 * another; a trace that is not a {"traceEvents": [...]} object or does not encode.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "traces/eventlog.h"
#include "tuner/replay.h"
#include "tuner/strategies/strategy.h"
#include "traces/trace.h"
#include "tui/tui.h"
#include "fuzz.h"

/* Complete lines other than "\n", and whether a last line lacks its '\n'. */
static size_t count_lines(const uint8_t *data, size_t size, int *incomplete) {
    size_t n = 0, start = 0;
    *incomplete = 0;
    for (size_t i = 0; i < size; i++) {
        if (data[i] != '\n') continue;
        n += i > start; /* a line holding more than its '\n' */
        start = i + 1;
    }
    *incomplete = start < size;
    return n;
}

static void check_read(const json_t *events, int torn, const uint8_t *data, size_t size) {
    FUZZ_CHECK(json_is_array(events), "ft_eventlog_read succeeded without an array");
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev) {
        FUZZ_CHECK(json_is_object(ev) && json_is_string(json_object_get(ev, "event")),
                   "event %zu is not an object with a string \"event\"", i);
    }
    int incomplete;
    size_t lines = count_lines(data, size, &incomplete);
    FUZZ_CHECK(!torn || incomplete, "a log whose last line is complete read as torn");
    size_t want = lines + (size_t)(incomplete && !torn);
    FUZZ_CHECK(json_array_size(events) == want, "%zu events read from %zu lines%s%s",
               json_array_size(events), lines, incomplete ? " and an incomplete last one" : "",
               torn ? " (torn)" : "");
}

static void check_landscape(const ft_landscape *l) {
    FUZZ_CHECK(l->op && l->backend && l->nruns >= 1, "landscape without op, backend or run");
    FUZZ_CHECK(l->ncands > 0 && l->cands && l->score, "landscape without candidates");
    FUZZ_CHECK(l->best >= 0 && l->best < l->ncands, "optimum %d of %d candidates", l->best,
               l->ncands);
    double opt = l->score[l->best];
    FUZZ_CHECK(opt > 0 && isfinite(opt), "optimum score %g", opt);
    int rejected = 0;
    for (int c = 0; c < l->ncands; c++) {
        double s = l->score[c];
        FUZZ_CHECK(s > 0 && !isnan(s), "candidate %d scored %g", c, s);
        FUZZ_CHECK(s >= opt, "candidate %d (%g) beats the optimum (%g)", c, s, opt);
        rejected += isinf(s);
    }
    FUZZ_CHECK(rejected == l->nrejected && rejected < l->ncands, "%d rejected, counted %d",
               rejected, l->nrejected);
    int costs = 0, confirmed = 0;
    for (int c = 0; c < l->ncands; c++) {
        FUZZ_CHECK(isnan(l->cost[c]) || (l->cost[c] >= 0 && isfinite(l->cost[c])),
                   "candidate %d cost %g", c, l->cost[c]);
        FUZZ_CHECK(isnan(l->ci_rel[c]) || (l->ci_rel[c] >= 0 && isfinite(l->score[c])),
                   "candidate %d: ci_rel %g, score %g", c, l->ci_rel[c], l->score[c]);
        FUZZ_CHECK(l->confirm_samples[c] >= -1 && (!l->confirm_samples[c] || isfinite(l->score[c])),
                   "candidate %d confirmed by %d samples, score %g", c, l->confirm_samples[c],
                   l->score[c]);
        costs += !isnan(l->cost[c]);
        confirmed += l->confirm_samples[c] != 0;
    }
    FUZZ_CHECK(costs == l->ncost && confirmed == l->nconfirmed, "%d costs (%d), %d confirmed (%d)",
               costs, l->ncost, confirmed, l->nconfirmed);
    FUZZ_CHECK(isnan(l->noise_ci_rel) || l->noise_ci_rel >= 0, "noise %g", l->noise_ci_rel);
    json_t *doc = ft_landscape_to_json(l, "input.jsonl");
    const char *format = json_string_value(json_object_get(doc, "format"));
    FUZZ_CHECK(format && strcmp(format, "flaretune-landscape/1") == 0 &&
                   json_array_size(json_object_get(doc, "candidates")) == (size_t)l->ncands,
               "the export is not a landscape of %d candidates", l->ncands);
    char *text = json_dumps(doc, JSON_COMPACT);
    FUZZ_CHECK(text != NULL, "the export does not encode");
    free(text);
    json_decref(doc);
    int within = ft_landscape_count_within(l, FT_REPLAY_TARGET);
    int first = ft_landscape_first_within(l, FT_REPLAY_TARGET);
    FUZZ_CHECK(within >= 1 && within <= l->ncands && first >= 1 && first <= l->best + 1,
               "%d candidates within target, first at %d, optimum at %d", within, first, l->best);
}

/* One replay: within the budget and the candidates, a best the landscape has, the target
 * claimed only when reached and within the batch that reached it, its time a sum of costs. */
static void check_replay(const ft_landscape *l, const ft_replay_opts *o) {
    const char *name = ft_strategy_names[o->kind];
    ft_replay_result r;
    ft_err err = {0};
    ft_status s = ft_replay_run(l, o, &r, &err);
    fuzz_check_err(s, &err, "ft_replay_run");
    FUZZ_CHECK(s == FT_OK, "replaying %s: %s", name, err.msg);
    FUZZ_CHECK(r.evaluations >= 0 && r.evaluations <= o->budget && r.evaluations <= l->ncands &&
                   r.rounds <= r.evaluations && r.rounds * o->batch >= r.evaluations,
               "%s made %d evaluations in %d rounds (budget %d, batch %d, %d candidates)", name,
               r.evaluations, r.rounds, o->budget, o->batch, l->ncands);
    FUZZ_CHECK(r.evaluations == 0 || r.best >= l->score[l->best],
               "%s found %g below the optimum %g", name, r.best, l->score[l->best]);
    FUZZ_CHECK(r.to_target < 0 ||
                   (r.to_target <= r.evaluations && r.evaluations < r.to_target + o->batch &&
                    ft_landscape_reaches(l, r.best, o->target)),
               "%s claims the target at %d of %d evaluations (batch %d, best %g)", name,
               r.to_target, r.evaluations, o->batch, r.best);
    FUZZ_CHECK(r.to_target < 0 ? isnan(r.time_to_target)
                               : isnan(r.time_to_target) || r.time_to_target >= 0,
               "%s: %g s to the target at %d", name, r.time_to_target, r.to_target);
    /* The same target among others in one replay: the same result. */
    const double targets[2] = {0.0, o->target};
    ft_replay_result two[2];
    s = ft_replay_run_targets(l, o, targets, 2, two, &err);
    fuzz_check_err(s, &err, "ft_replay_run_targets");
    FUZZ_CHECK(s == FT_OK && two[1].to_target == r.to_target &&
                   two[1].evaluations == r.evaluations && two[1].rounds == r.rounds &&
                   two[0].evaluations >= r.evaluations,
               "%s: %d of %d alone, %d of %d with target 0 (%d)", name, r.to_target, r.evaluations,
               two[1].to_target, two[1].evaluations, two[0].evaluations);
}

static void check_replays(const ft_landscape *l) {
    enum { BUDGET = 48 };
    int first[3], nfirst = 0;
    double *prior = malloc(sizeof *prior * (size_t)l->ncands);
    ft_err err = {0};
    FUZZ_CHECK(prior && ft_landscape_warm(l, l, 3, first, &nfirst, prior, &err) == FT_OK &&
                   nfirst >= 1 && first[0] == l->best,
               "a warm start from itself: %d first (%d), optimum %d: %s", nfirst,
               nfirst ? first[0] : -1, l->best, err.msg);
    for (int kind = 0; kind < FT_STRAT_COUNT; kind++) {
        ft_replay_opts o;
        ft_replay_opts_default(&o);
        o.kind = (ft_strategy_kind)kind;
        o.seed = 7;
        o.budget = BUDGET;
        check_replay(l, &o);
        o.batch = 3;
        check_replay(l, &o);
        o.first = first;
        o.nfirst = nfirst;
        o.prior = prior;
        check_replay(l, &o);
    }
    free(prior);
}

static void check_trace(const json_t *events) {
    json_t *trace = ft_trace_from_events(events);
    FUZZ_CHECK(json_is_object(trace) && json_is_array(json_object_get(trace, "traceEvents")),
               "the trace is not an object with a traceEvents array");
    char *text = json_dumps(trace, JSON_COMPACT);
    FUZZ_CHECK(text != NULL, "the trace does not encode");
    free(text);
    json_decref(trace);
}

/* The dashboard following the log: every event applied, then every cell drawn. */
static void check_dashboard(const json_t *events) {
    ft_tui_model m;
    ft_tui_model_init(&m);
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev) ft_tui_model_apply(&m, ev);
    double now = m.t_last;
    int partial = 0;
    (void)ft_tui_model_eta(&m, now, &partial);
    (void)ft_tui_model_rate(&m, now);
    (void)ft_tui_model_elapsed(&m, now);
    (void)ft_tui_model_running(&m);
    int idx[64];
    for (int sort = 0; sort < FT_SORT_COUNT; sort++) {
        int n = ft_tui_model_view(&m, (ft_tui_sort)sort, NULL, idx, 64);
        FUZZ_CHECK(n >= 0 && n <= 64 && n <= m.nrows, "view of %d rows: %d", m.nrows, n);
        for (int k = 0; k < n; k++)
            FUZZ_CHECK(idx[k] >= 0 && idx[k] < m.nrows, "view row %d: index %d of %d", k, idx[k],
                       m.nrows);
    }
    for (int r = 0; r < m.nrows && r < 16; r++) {
        char buf[256];
        for (int c = 0; c < FT_COL_COUNT; c++) {
            ft_tui_cell(&m.rows[r], (ft_tui_col_id)c, 0, buf, sizeof buf);
            FUZZ_CHECK(memchr(buf, '\0', sizeof buf) != NULL, "cell not terminated");
            ft_tui_cell(&m.rows[r], (ft_tui_col_id)c, 1, buf, sizeof buf);
        }
        ft_tui_trend(&m.rows[r], 24, 0, buf, sizeof buf);
        ft_tui_trend(&m.rows[r], 24, 1, buf, sizeof buf);
        (void)ft_tui_row_eta(&m.rows[r], now);
    }
    ft_tui_model_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *events = NULL;
    int torn = -1;
    ft_err err = {0};
    ft_status s = ft_eventlog_read(fuzz_input_path(data, size), &events, &torn, &err);
    if (!fuzz_loaded(s, &err, events, "ft_eventlog_read")) return 0;
    check_read(events, torn, data, size);

    ft_landscape l;
    ft_err lerr = {0};
    s = ft_landscape_from_events(events, "input.jsonl", &l, &lerr);
    fuzz_check_err(s, &lerr, "ft_landscape_from_events");
    if (s == FT_OK) {
        check_landscape(&l);
        check_replays(&l);
        ft_landscape_free(&l);
    }
    check_trace(events);
    check_dashboard(events);
    json_decref(events);
    return 0;
}
