/* model.c: the dashboard's model: events (docs/events.md, docs/dashboard.md) reduced into one
 * row per run id. Pure: no terminal, no clock (callers pass `now`), no threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "tui/tui.h"
#include "tuner/tune.h"

/* ---- ring buffers ------------------------------------------------------------------------ */

/* The two rings (points, values) share their bookkeeping: head is where the next element goes,
 * the oldest is n behind it. */
static void *ring_alloc(size_t elem, int cap, int *cap_out) {
    void *p = malloc(elem * (size_t)(cap > 0 ? cap : 1));
    if (p) *cap_out = cap > 0 ? cap : 1;
    return p;
}

/* The slot the next element goes to; the oldest is dropped when the ring is full. */
static int ring_push_slot(int *head, int *n, int cap) {
    int slot = *head;
    *head = (*head + 1) % cap;
    if (*n < cap) (*n)++;
    return slot;
}

/* The slot of the i-th oldest element, or -1. */
static int ring_slot(int head, int n, int cap, int i) {
    return i < 0 || i >= n ? -1 : (head - n + i + cap) % cap;
}

/* A ring type's init, free and push over its elements in r->F: RING_FNS(ring, ft_tui_point, p)
 * defines ft_tui_ring_init, ft_tui_ring_free and ft_tui_ring_push. */
#define RING_FNS(NAME, T, F)                                                                       \
    int ft_tui_##NAME##_init(ft_tui_##NAME *r, int cap) {                                          \
        memset(r, 0, sizeof *r);                                                                   \
        return (r->F = ring_alloc(sizeof *r->F, cap, &r->cap)) != NULL;                            \
    }                                                                                              \
    void ft_tui_##NAME##_free(ft_tui_##NAME *r) {                                                  \
        free(r->F);                                                                                \
        memset(r, 0, sizeof *r);                                                                   \
    }                                                                                              \
    void ft_tui_##NAME##_push(ft_tui_##NAME *r, T x) {                                             \
        if (r->cap) r->F[ring_push_slot(&r->head, &r->n, r->cap)] = x;                             \
    }

RING_FNS(ring, ft_tui_point, p)
RING_FNS(vring, double, v)

const ft_tui_point *ft_tui_ring_at(const ft_tui_ring *r, int i) {
    int k = ring_slot(r->head, r->n, r->cap, i);
    return k < 0 ? NULL : &r->p[k];
}

double ft_tui_vring_at(const ft_tui_vring *r, int i) {
    int k = ring_slot(r->head, r->n, r->cap, i);
    return k < 0 ? NAN : r->v[k];
}

/* ---- growing arrays ---------------------------------------------------------------------- */

/* arr (n elements of elem bytes, room for *cap) with room for one more: doubled when full, from
 * `first` when empty; NULL when memory is short (arr is left as it was). */
static void *room_for_one(void *arr, int n, int *cap, int first, size_t elem) {
    if (n < *cap) return arr;
    int c = *cap ? 2 * *cap : first;
    void *p = realloc(arr, elem * (size_t)c);
    if (p) *cap = c;
    return p;
}

/* ---- statistics -------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Linear interpolation between closest ranks of sorted x. */
static double quantile(const double *x, int n, double q) {
    double pos = q * (n - 1);
    int i = (int)floor(pos);
    if (i >= n - 1) return x[n - 1];
    return x[i] + (pos - i) * (x[i + 1] - x[i]);
}

void ft_tui_window_stats(const double *v, int n, double *p50, double *p95, double *max,
                         double *jitter) {
    *p50 = *p95 = *max = *jitter = NAN;
    if (n <= 0) return;
    double *s = malloc(sizeof *s * (size_t)n);
    if (!s) return;
    double jsum = 0;
    for (int i = 0; i < n; i++) {
        s[i] = v[i];
        if (i) jsum += fabs(v[i] - v[i - 1]);
    }
    *jitter = n > 1 ? jsum / (n - 1) : 0;
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    *p50 = quantile(s, n, 0.5);
    *p95 = quantile(s, n, 0.95);
    *max = s[n - 1];
    free(s);
}

void ft_tui_histogram(const double *v, int n, int *counts, double *lo, double *hi) {
    memset(counts, 0, sizeof *counts * FT_TUI_BINS);
    *lo = *hi = NAN;
    if (n <= 0) return;
    double a = v[0], b = v[0];
    for (int i = 1; i < n; i++) {
        if (v[i] < a) a = v[i];
        if (v[i] > b) b = v[i];
    }
    *lo = a;
    *hi = b;
    for (int i = 0; i < n; i++) {
        int k = b > a ? (int)((v[i] - a) / (b - a) * FT_TUI_BINS) : 0;
        if (k >= FT_TUI_BINS) k = FT_TUI_BINS - 1;
        if (k < 0) k = 0;
        counts[k]++;
    }
}

/* ---- JSON helpers ------------------------------------------------------------------------ */

static const char *jstr(const json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static double jnum(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* A count from an event; a log may be damaged or hostile, so a number outside +-1e9 (no real
 * count, and far from int overflow in the sums made of counts) reads as 0. */
static int jint(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    double d = json_is_number(v) ? json_number_value(v) : 0;
    return d > -1e9 && d < 1e9 ? (int)d : 0;
}

static void value_str(const json_t *v, char *buf, size_t n) {
    char num[64];
    snprintf(buf, n, "%s", ft_json_scalar_text(v, "?", num, sizeof num));
}

/* "k=v k=v" in the object's order, or with the keys sorted (identity of a config). */
static void obj_text(const json_t *o, int sorted, const char *sep, char *buf, size_t n) {
    buf[0] = '\0';
    if (!json_is_object(o) || n == 0) return;
    const char *keys[64];
    int nk = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        if (nk < 64) keys[nk++] = k;
    }
    if (sorted)
        for (int i = 1; i < nk; i++)
            for (int j = i; j > 0 && strcmp(keys[j - 1], keys[j]) > 0; j--) {
                const char *t = keys[j];
                keys[j] = keys[j - 1];
                keys[j - 1] = t;
            }
    size_t len = 0;
    for (int i = 0; i < nk && len < n; i++) {
        char val[64];
        value_str(json_object_get(o, keys[i]), val, sizeof val);
        int w = snprintf(buf + len, n - len, "%s%s=%s", i ? sep : "", keys[i], val);
        if (w < 0) break;
        len += (size_t)w;
    }
}

/* ---- rows -------------------------------------------------------------------------------- */

static void row_release(ft_tui_row *r) {
    ft_tui_ring_free(&r->history);
    ft_tui_vring_free(&r->window);
    free(r->ranks);
    r->ranks = NULL;
    r->nranks = r->ranks_cap = 0;
}

static void row_reset(ft_tui_row *r, const char *run, int seq) {
    row_release(r);
    memset(r, 0, sizeof *r);
    snprintf(r->run, sizeof r->run, "%s", run);
    r->seq = seq;
    r->state = FT_ROW_RUNNING;
    r->last = r->best = r->def = r->speedup = NAN;
    r->profile_median = r->p50 = r->p95 = r->max = r->jitter = NAN;
    r->win_lo = r->win_hi = NAN;
    snprintf(r->op, sizeof r->op, "?");
    ft_tui_ring_init(&r->history, FT_TUI_HISTORY);
}

void ft_tui_model_init(ft_tui_model *m) {
    memset(m, 0, sizeof *m);
    m->t_first = m->t_last = NAN;
}

void ft_tui_model_free(ft_tui_model *m) {
    for (int i = 0; i < m->nrows; i++)
        row_release(&m->rows[i]);
    free(m->rows);
    ft_tui_model_init(m);
}

ft_tui_row *ft_tui_model_find(ft_tui_model *m, const char *run) {
    for (int i = 0; i < m->nrows; i++)
        if (!strcmp(m->rows[i].run, run)) return &m->rows[i];
    return NULL;
}

static ft_tui_row *row_add(ft_tui_model *m, const char *run) {
    ft_tui_row *rows = room_for_one(m->rows, m->nrows, &m->cap, 16, sizeof *rows);
    if (!rows) return NULL;
    m->rows = rows;
    ft_tui_row *r = &m->rows[m->nrows++];
    memset(r, 0, sizeof *r);
    row_reset(r, run, m->next_seq++);
    return r;
}

static void shape_text(const json_t *dims, char *buf, size_t n) { obj_text(dims, 0, " ", buf, n); }

/* Ties before run_end: the IQR of a candidate overlaps the best's. */
static void top_ties(ft_tui_row *r) {
    if (r->ties_final) return;
    for (int i = 0; i < r->ntop; i++)
        r->top[i].tie = i > 0 && r->top[i].q1 <= r->top[0].q3 && isfinite(r->top[0].q3);
}

static void top_sort(ft_tui_row *r) {
    for (int i = 1; i < r->ntop; i++)
        for (int j = i; j > 0 && r->top[j].median < r->top[j - 1].median; j--) {
            ft_tui_cand t = r->top[j];
            r->top[j] = r->top[j - 1];
            r->top[j - 1] = t;
        }
}

static void cand_stats(ft_tui_cand *c, const json_t *st) {
    c->median = jnum(st, "median_s");
    c->q1 = jnum(st, "q1_s");
    c->q3 = jnum(st, "q3_s");
    c->iqr = jnum(st, "iqr_s");
    c->samples = jint(st, "samples");
}

static void cand_hist(ft_tui_cand *c, const json_t *h) {
    const json_t *counts = json_object_get(h, "counts");
    if (!json_is_array(counts) || json_array_size(counts) != FT_TUI_BINS) return;
    for (int i = 0; i < FT_TUI_BINS; i++)
        c->hist[i] = (int)json_integer_value(json_array_get(counts, (size_t)i));
    c->hist_lo = jnum(h, "lo");
    c->hist_hi = jnum(h, "hi");
    c->has_hist = 1;
}

/* Keep the FT_TUI_TOP fastest configurations; an update of a known one replaces its stats
 * (confirmed: they come from the confirmation round). */
static void top_offer(ft_tui_row *r, const json_t *config, const json_t *stats, const json_t *hist,
                      int confirmed) {
    ft_tui_cand c;
    memset(&c, 0, sizeof c);
    obj_text(config, 0, " ", c.cfg, sizeof c.cfg);
    obj_text(config, 1, " ", c.key, sizeof c.key);
    cand_stats(&c, stats);
    c.confirmed = confirmed;
    if (!isfinite(c.median)) return;
    for (int i = 0; i < r->ntop; i++)
        if (!strcmp(r->top[i].key, c.key)) {
            if (!hist && r->top[i].has_hist) {
                memcpy(c.hist, r->top[i].hist, sizeof c.hist);
                c.hist_lo = r->top[i].hist_lo;
                c.hist_hi = r->top[i].hist_hi;
                c.has_hist = 1;
            }
            if (hist) cand_hist(&c, hist);
            c.tie = r->top[i].tie;
            r->top[i] = c;
            top_sort(r);
            top_ties(r);
            return;
        }
    if (hist) cand_hist(&c, hist);
    if (r->ntop == FT_TUI_TOP) {
        if (c.median >= r->top[FT_TUI_TOP - 1].median) return;
        r->ntop--;
    }
    r->top[r->ntop++] = c;
    top_sort(r);
    top_ties(r);
}

/* ---- the scheduler's share ------------------------------------------------------------- */

/* A stats object's samples thrown away and taken (docs/events.md). Logs written before `taken`
 * existed: an unclean measurement's samples are every one it took, a clean one's the kept. */
static void count_samples(ft_tui_row *r, const json_t *st) {
    int disc = jint(st, "discarded"), samples = jint(st, "samples");
    int taken = json_is_number(json_object_get(st, "taken"))  ? jint(st, "taken")
                : json_is_false(json_object_get(st, "clean")) ? samples
                                                              : samples + disc;
    if (disc < 0 || taken < disc) return; /* a damaged event */
    r->discarded += disc;
    r->taken += taken;
}

/* Keep the latest FT_TUI_SPOILED candidates the run did not rank; a config seen again replaces
 * its entry. */
static void spoiled_add(ft_tui_row *r, const json_t *ev, int unclean, const json_t *stop) {
    ft_tui_cand c;
    memset(&c, 0, sizeof c);
    obj_text(json_object_get(ev, "config"), 0, " ", c.cfg, sizeof c.cfg);
    obj_text(json_object_get(ev, "config"), 1, " ", c.key, sizeof c.key);
    cand_stats(&c, json_object_get(ev, "stats"));
    c.unclean = unclean;
    c.stopped = !unclean;
    c.stopped_after_s = jnum(stop, "after_s");
    int at = r->nspoiled;
    for (int i = 0; i < r->nspoiled; i++)
        if (!strcmp(r->spoiled[i].key, c.key)) at = i;
    if (at == FT_TUI_SPOILED) { /* full: the oldest goes */
        memmove(&r->spoiled[0], &r->spoiled[1], sizeof c * (FT_TUI_SPOILED - 1));
        at = FT_TUI_SPOILED - 1;
    }
    if (at == r->nspoiled) r->nspoiled++;
    r->spoiled[at] = c;
}

/* run_end's counts (its confirmation included) replace the events' sums. */
static void run_end_contention(ft_tui_row *r, const json_t *ev) {
    const json_t *c = json_object_get(ev, "contention");
    if (!json_is_integer(json_object_get(c, "samples_taken"))) return; /* an older log */
    r->discarded = jint(c, "samples_discarded");
    r->taken = jint(c, "samples_taken");
    r->unclean = jint(c, "unclean");
    r->stopped = jint(c, "stopped");
}

void ft_tui_model_contention(const ft_tui_model *m, ft_tui_contention *c) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < m->nrows; i++) {
        const ft_tui_row *r = &m->rows[i];
        if (r->kind != FT_ROW_TUNE) continue;
        c->discarded += r->discarded;
        c->taken += r->taken;
        c->unclean += r->unclean;
        c->stopped += r->stopped;
    }
}

static void update_speedup(ft_tui_row *r) {
    if (isfinite(r->def) && isfinite(r->best) && r->best > 0) r->speedup = r->def / r->best;
}

/* run_start's "runs" ({"command", "index", "of"}: docs/events.md): a run of a command that
 * runs several (`tune all`, a sweep). The latest command's runs are counted as they start, so
 * between two of them the source is still running. */
static void apply_runs(ft_tui_model *m, const json_t *runs, double t) {
    const char *cmd = json_string_value(json_object_get(runs, "command"));
    int index = jint(runs, "index"), of = jint(runs, "of");
    if (!cmd || of < 1 || of > FT_TUI_MAX_RUNS || index < 1 || index > of) return;
    if (strcmp(cmd, m->runs_command) != 0) {
        if (m->runs_command[0] && !(t >= m->runs_t)) return; /* an older command's run */
        snprintf(m->runs_command, sizeof m->runs_command, "%s", cmd);
        memset(m->runs_seen, 0, sizeof m->runs_seen);
        m->runs_started = 0;
    }
    m->runs_of = of;
    if (!(t <= m->runs_t)) m->runs_t = t;
    unsigned char bit = (unsigned char)(1u << ((index - 1) % 8));
    if (!(m->runs_seen[(index - 1) / 8] & bit)) {
        m->runs_seen[(index - 1) / 8] |= bit;
        m->runs_started++;
    }
}

/* What a row's start event says of every kind of row: when, the op, backend and device, the
 * preset (the event's field preset_key names it) and the shape. */
static void row_start(ft_tui_row *r, ft_tui_row_kind kind, const json_t *ev, double t,
                      const char *preset_key) {
    r->kind = kind;
    r->t_start = r->t_last = t;
    snprintf(r->op, sizeof r->op, "%s", jstr(ev, "op"));
    snprintf(r->backend, sizeof r->backend, "%s", jstr(ev, "backend"));
    snprintf(r->preset, sizeof r->preset, "%s", jstr(ev, preset_key));
    snprintf(r->device, sizeof r->device, "%s", jstr(ev, "device"));
    shape_text(json_object_get(ev, "dims"), r->shape, sizeof r->shape);
}

static void apply_run_start(ft_tui_model *m, ft_tui_row *r, const json_t *ev, double t) {
    /* Runs of one feed follow each other: a run still open when another starts was lost
     * (killed, or its run_end torn off). */
    for (int i = 0; i < m->nrows; i++) {
        ft_tui_row *o = &m->rows[i];
        if (o != r && o->kind == FT_ROW_TUNE && o->state == FT_ROW_RUNNING) o->state = FT_ROW_LOST;
    }
    row_start(r, FT_ROW_TUNE, ev, t, "preset");
    snprintf(r->strategy, sizeof r->strategy, "%s", jstr(ev, "strategy"));
    r->valid = jint(ev, "space_valid");
    r->resumed = jint(ev, "resumed");
    r->resumed_rejected = jint(ev, "resumed_rejected");
    r->budget = jint(ev, "budget");
    r->time_budget_s = jnum(ev, "time_budget_s");
    obj_text(json_object_get(ev, "default"), 1, " ", r->def_key, sizeof r->def_key);
    snprintf(r->command, sizeof r->command, "%s", jstr(json_object_get(ev, "runs"), "command"));
    apply_runs(m, json_object_get(ev, "runs"), t);
}

static void apply_measured(ft_tui_row *r, const json_t *ev, double t) {
    const json_t *st = json_object_get(ev, "stats");
    double med = jnum(st, "median_s");
    int screened = json_is_true(json_object_get(ev, "screened"));
    /* Not measured cleanly, or stopped by the watchdog: never the best, never a speedup's
     * baseline (docs/events.md). */
    int unclean = json_is_false(json_object_get(ev, "clean"));
    const json_t *stop = json_object_get(ev, "stopped");
    int spoiled = unclean || json_is_object(stop);
    r->done++;
    r->measured++;
    r->screened += screened;
    r->last = med;
    r->last_rejected = 0;
    r->last_spoiled = unclean ? 1 : spoiled ? 2 : 0;
    count_samples(r, st);
    char key[160];
    obj_text(json_object_get(ev, "config"), 1, " ", key, sizeof key);
    if (spoiled) {
        r->unclean += unclean;
        r->stopped += !unclean;
        spoiled_add(r, ev, unclean, stop);
    } else {
        if (r->def_key[0] && !strcmp(key, r->def_key)) r->def = med;
        if (!screened && isfinite(med)) {
            top_offer(r, json_object_get(ev, "config"), st, json_object_get(ev, "hist"), 0);
            if (!(med >= r->best)) r->best = med;
        }
    }
    update_speedup(r);
    ft_tui_point p = {t - r->t_start, med, r->best,
                      unclean    ? FT_PT_UNCLEAN
                      : screened ? FT_PT_SCREENED
                                 : 0u};
    if (spoiled && !unclean) p.v = NAN; /* stopped: no median to plot */
    ft_tui_ring_push(&r->history, p);
}

static void apply_rejected(ft_tui_row *r, double t) {
    r->done++;
    r->rejected++;
    r->last_rejected = 1;
    r->last_spoiled = 0;
    ft_tui_point p = {t - r->t_start, NAN, r->best, FT_PT_REJECTED};
    ft_tui_ring_push(&r->history, p);
}

/* ---- ranks of a distributed run ---------------------------------------------------------- */

/* The row's entry for `rank`, added in rank order when new; NULL when the row holds
 * FT_TUI_MAX_RANKS already or memory ran out. */
static ft_tui_rank *rank_entry(ft_tui_row *r, int rank) {
    int lo = 0, hi = r->nranks;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (r->ranks[mid].rank < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < r->nranks && r->ranks[lo].rank == rank) return &r->ranks[lo];
    if (r->nranks >= FT_TUI_MAX_RANKS) return NULL;
    ft_tui_rank *ranks = room_for_one(r->ranks, r->nranks, &r->ranks_cap, 8, sizeof *ranks);
    if (!ranks) return NULL;
    r->ranks = ranks;
    memmove(&r->ranks[lo + 1], &r->ranks[lo], sizeof *r->ranks * (size_t)(r->nranks - lo));
    r->nranks++;
    ft_tui_rank *k = &r->ranks[lo];
    memset(k, 0, sizeof *k);
    k->rank = rank;
    k->t_first = k->t_last = NAN;
    return k;
}

/* A candidate event of a distributed run counts for the rank that evaluated it. Events without
 * an integer "rank" (a run that is not distributed) leave the ranks alone. */
static void apply_rank(ft_tui_row *r, const json_t *ev, const char *kind, double t) {
    const json_t *jr = json_object_get(ev, "rank");
    if (!json_is_integer(jr)) return;
    json_int_t rank = json_integer_value(jr);
    if (rank < 0 || rank > 1000000000) return;
    ft_tui_rank *k = rank_entry(r, (int)rank);
    if (!k) return;
    if (json_is_string(json_object_get(ev, "host")))
        snprintf(k->host, sizeof k->host, "%s", jstr(ev, "host"));
    if (json_is_string(json_object_get(ev, "device")))
        snprintf(k->device, sizeof k->device, "%s", jstr(ev, "device"));
    k->measured += !strcmp(kind, "measured");
    k->rejected += !strcmp(kind, "rejected");
    double started = jnum(ev, "started");
    double first = isfinite(started) && started <= t ? started : t;
    if (!(first >= k->t_first)) k->t_first = first;
    if (!(t <= k->t_last)) k->t_last = t;
}

double ft_tui_rank_rate(const ft_tui_rank *k) {
    double span = k->t_last - k->t_first;
    if (!(span > 0)) return NAN;
    return k->measured * 60.0 / span;
}

int ft_tui_row_ranks_shown(const ft_tui_row *r) { return r && r->nranks > 1 ? r->nranks : 0; }

static void apply_confirm(ft_tui_row *r, const json_t *ev) {
    const json_t *cfgs = json_object_get(ev, "configs"), *stats = json_object_get(ev, "stats");
    /* A round the scheduler spoiled: the run keeps the search's figures (docs/events.md). */
    int spoiled = json_is_false(json_object_get(ev, "clean"));
    for (size_t i = 0; i < json_array_size(cfgs) && i < json_array_size(stats); i++) {
        const json_t *c = json_array_get(cfgs, i), *st = json_array_get(stats, i);
        count_samples(r, st);
        if (spoiled || json_is_false(json_object_get(st, "clean"))) continue;
        char key[160];
        obj_text(c, 1, " ", key, sizeof key);
        if (r->def_key[0] && !strcmp(key, r->def_key)) r->def = jnum(st, "median_s");
        top_offer(r, c, st, NULL, 1);
    }
    if (spoiled) return;
    if (r->ntop) r->best = r->top[0].median;
    update_speedup(r);
}

static void apply_run_end(ft_tui_row *r, const json_t *ev, double t) {
    r->state = json_is_true(json_object_get(ev, "interrupted")) ? FT_ROW_INTERRUPTED : FT_ROW_DONE;
    r->t_end = t;
    snprintf(r->search_end, sizeof r->search_end, "%s", jstr(ev, "search_end"));
    const json_t *winner = json_object_get(ev, "winner");
    if (json_is_object(winner)) {
        char wkey[160];
        obj_text(winner, 1, " ", wkey, sizeof wkey);
        /* Its stats are the confirmation round's only where that round confirmed it (a run
         * stopped before the round, or one the scheduler spoiled, keeps the search's). */
        int confirmed = 0;
        for (int i = 0; i < r->ntop; i++)
            if (!strcmp(r->top[i].key, wkey)) confirmed = r->top[i].confirmed;
        top_offer(r, winner, json_object_get(ev, "stats"), NULL, confirmed);
        for (int i = 1; i < r->ntop; i++) /* the winner leads even within the noise */
            if (!strcmp(r->top[i].key, wkey)) {
                ft_tui_cand w = r->top[i];
                memmove(&r->top[1], &r->top[0], sizeof w * (size_t)i);
                r->top[0] = w;
            }
        double wmed = jnum(json_object_get(ev, "stats"), "median_s");
        if (isfinite(wmed)) r->best = wmed;
    }
    const json_t *dst = json_object_get(ev, "default_stats");
    double dmed = jnum(dst, "median_s");
    if (isfinite(dmed) && !json_is_false(json_object_get(dst, "clean"))) r->def = dmed;
    double sp = jnum(ev, "speedup");
    const char *withheld = jstr(ev, "speedup_withheld"), *no_winner = jstr(ev, "no_winner");
    if (isfinite(sp))
        r->speedup = sp;
    else if (*withheld) /* a baseline the scheduler spoiled is no baseline */
        r->speedup = r->def = NAN;
    else
        update_speedup(r);
    if (*withheld || *no_winner)
        snprintf(r->withheld, sizeof r->withheld, "%s: %s", *no_winner ? "no winner" : "no speedup",
                 *no_winner ? no_winner : withheld);
    run_end_contention(r, ev);
    const json_t *tie = json_object_get(ev, "tie");
    if (json_is_array(tie)) {
        r->ties_final = 1;
        for (int i = 0; i < r->ntop; i++) {
            r->top[i].tie = 0;
            for (size_t k = 0; k < json_array_size(tie) && i > 0; k++) {
                char key[160];
                obj_text(json_array_get(tie, k), 1, " ", key, sizeof key);
                if (!strcmp(key, r->top[i].key)) r->top[i].tie = 1;
            }
        }
    }
}

static void apply_watch_start(ft_tui_row *r, const json_t *ev, double t) {
    row_start(r, FT_ROW_WATCH, ev, t, "profile");
    obj_text(json_object_get(ev, "config"), 0, " ", r->config, sizeof r->config);
    r->profile_median = jnum(ev, "profile_median_s");
    ft_tui_vring_init(&r->window, FT_TUI_WINDOW);
}

static void apply_sample(ft_tui_row *r, const json_t *ev, double t) {
    const json_t *vals = json_object_get(ev, "values");
    size_t n = json_array_size(vals);
    if (!n) return;
    if (!r->window.cap) ft_tui_vring_init(&r->window, FT_TUI_WINDOW);
    r->kind = FT_ROW_WATCH;
    double *iv = malloc(sizeof *iv * n);
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        double v = json_number_value(json_array_get(vals, i));
        if (!(v >= 0) || !isfinite(v)) continue;
        ft_tui_vring_push(&r->window, v);
        if (iv) iv[k++] = v;
        r->last = v;
    }
    int calls = jint(ev, "calls");
    r->calls += calls > 0 ? calls : k;
    double imed = NAN, ip95, imax = NAN, ijit;
    if (iv) {
        ft_tui_window_stats(iv, k, &imed, &ip95, &imax, &ijit);
        free(iv);
    }
    double emax = jnum(ev, "max_s");
    if (isfinite(emax) && !(emax <= imax)) imax = emax;
    ft_tui_point p = {t - r->t_start, imax, imed, 0};
    ft_tui_ring_push(&r->history, p);

    int wn = r->window.n;
    double *w = malloc(sizeof *w * (size_t)(wn ? wn : 1));
    if (!w) return;
    for (int i = 0; i < wn; i++)
        w[i] = ft_tui_vring_at(&r->window, i);
    ft_tui_window_stats(w, wn, &r->p50, &r->p95, &r->max, &r->jitter);
    ft_tui_histogram(w, wn, r->win_hist, &r->win_lo, &r->win_hi);
    free(w);
    r->best = r->p50;
    if (isfinite(r->profile_median) && r->profile_median > 0)
        r->speedup = r->p50 / r->profile_median;
}

/* The writer of the log of run r is gone (top: the log's lock is free and every byte of the log
 * was read): a run without its run_end will have none, and its command will start no more runs.
 * A run that ended, of another command than the latest, says nothing. */
static void apply_gone(ft_tui_model *m, ft_tui_row *r) {
    if (!r) return;
    if (r->state == FT_ROW_RUNNING) {
        r->state = FT_ROW_GONE;
        snprintf(m->gone, sizeof m->gone, "the writer is gone: no run_end (killed?)");
    } else if (r->command[0] && !strcmp(r->command, m->runs_command) &&
               ft_tui_model_pending_runs(m) > 0 && !m->gone[0]) {
        int n = ft_tui_model_pending_runs(m);
        snprintf(m->gone, sizeof m->gone,
                 "the writer is gone: %d more run%s will not start (killed?)", n,
                 n == 1 ? "" : "s");
    }
}

int ft_tui_model_apply(ft_tui_model *m, const json_t *ev) {
    const char *kind = json_string_value(json_object_get(ev, "event"));
    if (!json_is_object(ev) || !kind) {
        m->nbad++;
        return 0;
    }
    double t = jnum(ev, "t");
    m->changed = 1;

    /* The source's own kinds (docs/dashboard.md). */
    if (!strcmp(kind, "done")) {
        m->finished = 1;
        const char *msg = jstr(ev, "message");
        if (*msg) snprintf(m->note, sizeof m->note, "%s", msg);
        return 1;
    }
    if (!strcmp(kind, "error")) {
        snprintf(m->error, sizeof m->error, "%s",
                 *jstr(ev, "message") ? jstr(ev, "message") : "failed");
        for (int i = 0; i < m->nrows; i++)
            if (m->rows[i].state == FT_ROW_RUNNING) m->rows[i].state = FT_ROW_FAILED;
        return 1;
    }
    if (!strcmp(kind, "gone")) {
        apply_gone(m, ft_tui_model_find(m, jstr(ev, "run")));
        return 1;
    }
    if (!strcmp(kind, "reopen")) {
        /* The logs are read again from the start (ft_tui_follow_poll): what they said before
         * goes, rows and counts, so the run of a truncated or replaced log leaves the screen
         * and the totals, and one still there is rebuilt as it is read again. */
        int expected = m->expected_runs;
        ft_tui_model_free(m);
        m->expected_runs = expected;
        m->changed = 1;
        snprintf(m->note, sizeof m->note, "log %s: reading it from the start",
                 *jstr(ev, "reason") ? jstr(ev, "reason") : "reopened");
        return 1;
    }

    static const char *const row_kinds[] = {"run_start",   "warm",     "verified", "rejected",
                                            "measured",    "ceilings", "confirm",  "run_end",
                                            "watch_start", "sample"};
    int known = 0;
    for (size_t i = 0; i < sizeof row_kinds / sizeof row_kinds[0]; i++)
        known |= !strcmp(kind, row_kinds[i]);
    const char *run = jstr(ev, "run");
    if (!known || !*run) {
        m->nbad++;
        return 0;
    }
    /* Times and rates count the runs' events, not the source's notices above. */
    if (isfinite(t)) {
        if (!isfinite(m->t_first) || t < m->t_first) m->t_first = t;
        if (!isfinite(m->t_last) || t > m->t_last) m->t_last = t;
        m->recent[m->recent_head] = t;
        m->recent_head = (m->recent_head + 1) % (int)(sizeof m->recent / sizeof m->recent[0]);
        if (m->nrecent < (int)(sizeof m->recent / sizeof m->recent[0])) m->nrecent++;
    }
    m->nevents++;
    if (!isfinite(t)) t = isfinite(m->t_last) ? m->t_last : 0;
    int starts = !strcmp(kind, "run_start") || !strcmp(kind, "watch_start");
    ft_tui_row *r = ft_tui_model_find(m, run);
    if (r && starts) row_reset(r, run, r->seq); /* the same run read again: rebuild it */
    if (!r) {
        r = row_add(m, run);
        if (!r) return 0;
        r->t_start = t;
    }
    r->t_last = t;
    /* A writer writes after all: its run goes on (run_end, below, ends it as usual). */
    if (r->state == FT_ROW_GONE) r->state = FT_ROW_RUNNING;
    m->gone[0] = '\0';
    if (!strcmp(kind, "run_start"))
        apply_run_start(m, r, ev, t);
    else if (!strcmp(kind, "watch_start"))
        apply_watch_start(r, ev, t);
    else if (!strcmp(kind, "measured"))
        apply_measured(r, ev, t);
    else if (!strcmp(kind, "rejected"))
        apply_rejected(r, t);
    else if (!strcmp(kind, "confirm"))
        apply_confirm(r, ev);
    else if (!strcmp(kind, "run_end"))
        apply_run_end(r, ev, t);
    else if (!strcmp(kind, "sample"))
        apply_sample(r, ev, t);
    if (!strcmp(kind, "measured") || !strcmp(kind, "rejected") || !strcmp(kind, "verified"))
        apply_rank(r, ev, kind, t);
    return 1;
}

/* ---- derived figures --------------------------------------------------------------------- */

int ft_tui_model_pending_runs(const ft_tui_model *m) {
    int ntune = 0;
    for (int i = 0; i < m->nrows; i++)
        ntune += m->rows[i].kind == FT_ROW_TUNE;
    int a = m->expected_runs - ntune, b = m->runs_of - m->runs_started;
    int p = a > b ? a : b;
    return p > 0 ? p : 0;
}

int ft_tui_model_running(const ft_tui_model *m) {
    if (m->finished || m->error[0]) return 0;
    for (int i = 0; i < m->nrows; i++)
        if (m->rows[i].state == FT_ROW_RUNNING) return 1;
    /* between two runs of `tune all`, unless its writer is gone */
    return !m->gone[0] && ft_tui_model_pending_runs(m) > 0;
}

double ft_tui_row_eta(const ft_tui_row *r, double now) {
    if (r->kind != FT_ROW_TUNE || r->state != FT_ROW_RUNNING) return NAN;
    int measured, target;
    ft_tui_row_progress(r, &measured, &target);
    int remaining = target - measured;
    if (remaining < 0) remaining = 0;
    double elapsed = now - r->t_start;
    if (elapsed < 0) elapsed = 0;
    double eta = NAN;
    /* Each measured candidate has cost its share of the time, its rejected ones included. */
    if (r->measured > 0) eta = elapsed / r->measured * remaining;
    if (r->time_budget_s > 0) {
        double left = r->time_budget_s - elapsed;
        if (left < 0) left = 0;
        if (!(eta <= left)) eta = left;
    }
    return eta;
}

/* Seconds per measured candidate over every tune row that has measured some (its elapsed time
 * to its end, or to now while it runs); NAN when none has. */
static double seconds_per_candidate(const ft_tui_model *m, double now) {
    double t = 0;
    long n = 0;
    for (int i = 0; i < m->nrows; i++) {
        const ft_tui_row *r = &m->rows[i];
        if (r->kind != FT_ROW_TUNE || r->measured < 1) continue;
        double end = r->state == FT_ROW_RUNNING ? now : r->t_end > 0 ? r->t_end : r->t_last;
        if (end > r->t_start) {
            t += end - r->t_start;
            n += r->measured;
        }
    }
    return n ? t / (double)n : NAN;
}

/* A running row that has measured nothing yet, at the source's seconds per candidate. */
static double row_eta_from(const ft_tui_row *r, double now, double per_cand) {
    int measured, target;
    ft_tui_row_progress(r, &measured, &target);
    int remaining = target - measured;
    double eta = per_cand * (remaining > 0 ? remaining : 0);
    if (r->time_budget_s > 0) {
        double left = r->time_budget_s - (now - r->t_start);
        if (!(eta <= left)) eta = left > 0 ? left : 0;
    }
    return eta;
}

double ft_tui_model_eta(const ft_tui_model *m, double now, int *partial) {
    if (partial) *partial = 0;
    if (!ft_tui_model_running(m)) return m->nrows ? 0 : NAN;
    double eta = 0, dur = 0, per_cand = seconds_per_candidate(m, now);
    int nfinished = 0, ntune = 0, known = 0, unknown = 0;
    for (int i = 0; i < m->nrows; i++) {
        const ft_tui_row *r = &m->rows[i];
        if (r->kind != FT_ROW_TUNE) continue;
        ntune++;
        if (r->state == FT_ROW_RUNNING) {
            double e = ft_tui_row_eta(r, now);
            if (!isfinite(e) && isfinite(per_cand)) e = row_eta_from(r, now, per_cand);
            if (isfinite(e)) {
                eta += e;
                known++;
            } else {
                unknown++;
            }
        } else if (r->t_end > r->t_start) {
            dur += r->t_end - r->t_start;
            nfinished++;
        }
    }
    if (!ntune) return NAN;
    int pending = ft_tui_model_pending_runs(m);
    if (pending > 0 && nfinished) {
        eta += pending * (dur / nfinished);
        known++;
    } else if (pending > 0) {
        unknown++;
    }
    if (unknown && partial) *partial = 1;
    return known || !unknown ? eta : NAN;
}

static double model_ref_time(const ft_tui_model *m, double now) {
    return ft_tui_model_running(m) ? now : m->t_last;
}

double ft_tui_model_rate(const ft_tui_model *m, double now) {
    if (!isfinite(m->t_first) || !m->nrecent) return NAN;
    double tref = model_ref_time(m, now);
    double span = tref - m->t_first;
    if (span > FT_TUI_RATE_SPAN) span = FT_TUI_RATE_SPAN;
    if (span < 0.5) span = 0.5;
    int cap = (int)(sizeof m->recent / sizeof m->recent[0]), k = 0;
    for (int i = 0; i < m->nrecent; i++) {
        double t = m->recent[(m->recent_head - 1 - i + cap) % cap];
        if (t > tref - span && t <= tref + 1e-9) k++;
    }
    return k / span;
}

double ft_tui_model_elapsed(const ft_tui_model *m, double now) {
    if (!isfinite(m->t_first)) return NAN;
    double e = model_ref_time(m, now) - m->t_first;
    return e > 0 ? e : 0;
}

/* ---- the table's order ------------------------------------------------------------------- */

const char *const ft_tui_sort_names[FT_SORT_COUNT] = {"arrival", "op", "fastest", "speedup",
                                                      "progress"};

static int contains_ci(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i]) {
            char a = hay[i], b = needle[i];
            if (a >= 'A' && a <= 'Z') a = (char)(a - 'A' + 'a');
            if (b >= 'A' && b <= 'Z') b = (char)(b - 'A' + 'a');
            if (a != b) break;
            i++;
        }
        if (i == n) return 1;
    }
    return n == 0;
}

void ft_tui_row_progress(const ft_tui_row *r, int *measured, int *target) {
    int resumed_measured = r->resumed - r->resumed_rejected;
    *measured = resumed_measured + r->measured;
    *target = ft_tune_progress_target(r->valid, r->budget, resumed_measured,
                                      r->resumed_rejected + r->rejected);
    if (*target < *measured) *target = *measured; /* (a default measured again past the budget) */
    /* Converged, out of budget or time: what it measured is all it will (an interrupted or
     * failed run keeps its target, which it did not reach). */
    if (r->state == FT_ROW_DONE && *target > *measured) *target = *measured;
}

static double progress(const ft_tui_row *r) {
    int measured, target;
    ft_tui_row_progress(r, &measured, &target);
    return target > 0 ? (double)measured / target : 0;
}

/* Negative when a goes before b. NAN keys go last. */
static int cmp_key(double a, double b) {
    if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);
    return a < b ? -1 : a > b;
}

static int row_cmp(const ft_tui_row *a, const ft_tui_row *b, ft_tui_sort sort) {
    int c = 0;
    switch (sort) {
    case FT_SORT_OP: c = strcmp(a->op, b->op); break;
    case FT_SORT_BEST: c = cmp_key(a->best, b->best); break;
    case FT_SORT_SPEEDUP:
        c = cmp_key(isnan(a->speedup) ? NAN : -a->speedup, isnan(b->speedup) ? NAN : -b->speedup);
        break;
    case FT_SORT_PROGRESS:
        c = (b->state == FT_ROW_RUNNING) - (a->state == FT_ROW_RUNNING);
        if (!c) c = cmp_key(-progress(a), -progress(b));
        break;
    default: break;
    }
    return c ? c : (a->seq > b->seq) - (a->seq < b->seq);
}

int ft_tui_model_view(const ft_tui_model *m, ft_tui_sort sort, const char *filter, int *idx,
                      int cap) {
    int n = 0;
    for (int i = 0; i < m->nrows && n < cap; i++)
        if (!filter || contains_ci(m->rows[i].op, filter)) idx[n++] = i;
    for (int i = 1; i < n; i++) /* insertion sort: stable, and tables are short */
        for (int j = i; j > 0 && row_cmp(&m->rows[idx[j - 1]], &m->rows[idx[j]], sort) > 0; j--) {
            int t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    return n;
}
