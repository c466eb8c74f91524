/* replay.c: recorded landscapes and strategy replays (see tuner/replay.h).
 *
 * The problem is rebuilt from the last run_start of the log: the op, its sizes (`dims`) and
 * attributes (`attrs`), the backend by name (built into this binary; it need not be able to
 * run here) and its space. Thread-count candidates depend on the machine (ft_space_resolve), so
 * the space is resolved again for the recording machine, whose core count is the default
 * thread count of `default`. The candidates are then the valid configurations in space order,
 * exactly as the tuner enumerated them.
 *
 * Each candidate's score is its median from the search, unless the run's confirmation (its
 * last `confirm` event) measured it again: then the confirmed median, scaled to the search's
 * footing (read_confirm), so the optimum a replay aims at is the one the run confirmed. Its cost is the wall time its evaluation took, read off
 * the same events (`started` to `t`).
 */
#include "tuner/replay.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/json.h"
#include "core/npy.h"
#include "core/paths.h"
#include "core/stats.h"
#include "kernels/registry.h"
#include "op/op_json.h"
#include "traces/eventlog.h"

static const char *str_field(const json_t *o, const char *k) {
    return json_string_value(json_object_get(o, k));
}

static int is_event(const json_t *ev, const char *name) {
    const char *e = str_field(ev, "event");
    return e && strcmp(e, name) == 0;
}

/* The backend named `name`, built into this binary, that implements op (it may be unable to
 * run here: a replay runs no kernel). */
static ft_status find_backend(const char *name, const ft_op *op, const ft_backend **out,
                              ft_err *err) {
    ft_status s = ft_backend_resolve(name, op, out, err);
    if (s != FT_ENODEV) return s;
    for (int i = 0; i < ft_backend_count(); i++) {
        const ft_backend *b = ft_backend_at(i);
        if (strcmp(b->name, name) == 0 && b->built && b->supports(op)) {
            ft_err_clear(err);
            *out = b;
            return FT_OK;
        }
    }
    return s;
}

/* Sizes and attributes of the recorded call. */
static ft_status rebuild_call(const json_t *start, const char *name, ft_landscape *l, ft_err *err) {
    const json_t *dims = json_object_get(start, "dims"), *attrs = json_object_get(start, "attrs");
    if (!json_is_object(dims))
        return ft_err_set(err, FT_EFORMAT, "%s: run_start has no \"dims\" object", name);
    ft_call_init(&l->call, l->op);
    for (int i = 0; l->op->syms[i]; i++) {
        const json_t *d = json_object_get(dims, l->op->syms[i]);
        if (!json_is_integer(d))
            return ft_err_set(err, FT_EFORMAT, "%s: run_start dims lack the size %s of %s", name,
                              l->op->syms[i], l->op->name);
        l->call.dim[i] = (int64_t)json_integer_value(d);
    }
    if (attrs && !json_is_object(attrs))
        return ft_err_set(err, FT_EFORMAT, "%s: run_start \"attrs\" is not an object", name);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)attrs, k, v) {
        char text[64];
        if (ft_json_value_text(v, text, sizeof text))
            return ft_err_set(err, FT_EFORMAT, "%s: attribute %s has no usable value", name, k);
        /* What ft_attrs_format writes for a value left at its default (such as scale "auto")
         * need not parse back: an attribute already at the recorded value stays as it is. */
        char cur[64];
        ft_attrs_format(&l->call.attrs, k, cur, sizeof cur);
        if (strcmp(cur, text) == 0) continue;
        if (ft_attrs_set(&l->call.attrs, l->op, k, text, err))
            return ft_err_wrap(err, "%s: run_start attrs", name);
    }
    ft_call_resolve_backward(&l->call);
    return FT_OK;
}

/* The backend's space, copied and resolved for the machine that recorded the run. */

/* A log's thread count as a space resolves it: 1 to 4096 (what --threads takes), else not
 * known (0): a hand-made or damaged log's 2^40 is no machine's. */
static int thread_count(json_int_t v) { return v >= 1 && v <= 4096 ? (int)v : 0; }

static ft_status copy_space(const json_t *start, const char *name, ft_landscape *l, ft_err *err) {
    const ft_space *s = l->backend->space(l->op);
    if (!s)
        return ft_err_set(err, FT_EUNSUPPORTED, "%s: backend %s has no space for %s", name,
                          l->backend->name, l->op->name);
    if (s->nparams == 0)
        return ft_err_set(err, FT_EFORMAT,
                          "%s: backend %s has no tunable parameters for %s, so its run is no "
                          "landscape",
                          name, l->backend->name, l->op->name);
    l->space = *s;
    l->params = calloc((size_t)s->nparams, sizeof *l->params);
    if (!l->params) return ft_err_set(err, FT_ENOMEM, "out of memory");
    memcpy(l->params, s->params, (size_t)s->nparams * sizeof *l->params);
    l->space.params = l->params;
    int ncpu = 0;
    const json_t *def = json_object_get(start, "default");
    for (int i = 0; i < s->nparams; i++) {
        if (!(s->params[i].flags & FT_PARAM_THREADS)) continue;
        const json_t *t = json_object_get(def, s->params[i].name);
        if (json_is_integer(t)) ncpu = thread_count(json_integer_value(t));
    }
    if (ncpu <= 0) {
        const json_t *cores = json_object_get(json_object_get(start, "env"), "cores");
        if (json_is_integer(cores)) ncpu = thread_count(json_integer_value(cores));
    }
    if (ncpu > 0) ft_space_resolve(&l->space, ncpu);
    return FT_OK;
}

ft_status ft_landscape_alloc(ft_landscape *l, int n, ft_err *err) {
    l->cands = malloc((size_t)n * sizeof *l->cands);
    l->score = malloc((size_t)n * sizeof *l->score);
    l->predicted = malloc((size_t)n * sizeof *l->predicted);
    l->cost = malloc((size_t)n * sizeof *l->cost);
    l->ci_rel = malloc((size_t)n * sizeof *l->ci_rel);
    l->confirm_samples = calloc((size_t)n, sizeof *l->confirm_samples);
    if (!l->cands || !l->score || !l->predicted || !l->cost || !l->ci_rel || !l->confirm_samples)
        return ft_err_set(err, FT_ENOMEM, "out of memory");
    return FT_OK;
}

static ft_status enumerate(ft_landscape *l, int64_t **keys, ft_err *err) {
    int64_t total = ft_space_size(&l->space), n = 0;
    for (int64_t k = 0; k < total; k++) {
        ft_config cfg;
        ft_space_config_at(&l->space, k, &cfg);
        n += ft_space_valid(&l->space, &l->call, &cfg, NULL, 0);
    }
    if (n == 0) return ft_err_set(err, FT_EINVAL, "the recorded problem has no valid candidate");
    if (n > 1 << 28) return ft_err_set(err, FT_EUNSUPPORTED, "too many candidates to replay");
    *keys = malloc((size_t)n * sizeof **keys);
    if (!*keys || ft_landscape_alloc(l, (int)n, err))
        return ft_err_set(err, FT_ENOMEM, "out of memory");
    for (int64_t k = 0; k < total; k++) {
        ft_config cfg;
        ft_space_config_at(&l->space, k, &cfg);
        if (!ft_space_valid(&l->space, &l->call, &cfg, NULL, 0)) continue;
        (*keys)[l->ncands] = k;
        l->score[l->ncands] = NAN;
        l->predicted[l->ncands] = NAN;
        l->cost[l->ncands] = NAN;
        l->ci_rel[l->ncands] = NAN;
        l->cands[l->ncands++] = cfg;
    }
    return FT_OK;
}

static int find_key(const int64_t *keys, int n, int64_t k) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (keys[mid] == k) return mid;
        if (keys[mid] < k)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* What evaluating a candidate cost: its event's `t` less its `started`; NaN when either is
 * missing or the difference is not a duration. */
static double event_cost(const json_t *ev) {
    const json_t *t = json_object_get(ev, "t"), *started = json_object_get(ev, "started");
    if (!json_is_number(t) || !json_is_number(started)) return NAN;
    double c = json_number_value(t) - json_number_value(started);
    return c >= 0 && isfinite(c) ? c : NAN;
}

/* Scores from the candidate events from `first` on: the runs of the chain (every run_start
 * from there on has the last run's key). A candidate event counts for the run it follows.
 * *confirm: the index of the chain's last confirm event (0: none). */
static ft_status read_scores(const json_t *events, size_t first, const char *name,
                             const int64_t *keys, ft_landscape *l, size_t *confirm, ft_err *err) {
    const char *run = NULL; /* id of the run whose events follow ("" when it has none) */
    const json_t *start = NULL; /* its run_start */
    *confirm = 0;
    for (size_t i = first; i < json_array_size(events); i++) {
        const json_t *ev = json_array_get(events, i);
        if (is_event(ev, "run_start")) {
            run = str_field(ev, "run") ? str_field(ev, "run") : "";
            start = ev;
            continue;
        }
        if (!run) continue;
        const char *evrun = str_field(ev, "run");
        if (run[0] && evrun && strcmp(evrun, run) != 0) continue;
        if (is_event(ev, "confirm")) {
            /* A round the scheduler spoiled (its contenders then kept their search medians) */
            l->confirm_unclean = json_is_false(json_object_get(ev, "clean"));
            if (!l->confirm_unclean) *confirm = i;
            continue;
        }
        int measured = is_event(ev, "measured"), rejected = is_event(ev, "rejected");
        if (!measured && !rejected && !is_event(ev, "verified")) continue;
        ft_config cfg;
        char why[128];
        if (!ft_event_config_whole(start, ev, why, sizeof why))
            return ft_err_set(err, FT_EFORMAT, "%s: event %zu (%s): %s", name, i + 1,
                              str_field(ev, "event"), why);
        if (ft_config_from_json(&l->space, json_object_get(ev, "config"), &cfg, err)) {
            ft_err_wrap(err, "%s: event %zu (%s)", name, i + 1, str_field(ev, "event"));
            return ft_err_in_file(err);
        }
        int c = find_key(keys, l->ncands, ft_space_index_of(&l->space, &cfg));
        if (c < 0) continue; /* not a candidate at this shape (e.g. a baseline outside the space) */
        const json_t *pred = json_object_get(ev, "predicted_s");
        if (json_is_number(pred) && json_number_value(pred) > 0)
            l->predicted[c] = json_number_value(pred);
        if (!measured && !rejected) continue;
        l->cost[c] = event_cost(ev);
        l->ci_rel[c] = NAN;
        /* Rejected, stopped by the watchdog, or not measured cleanly (a busy machine's upper
         * bound, never ranked): no time this landscape can use. */
        if (rejected || json_is_false(json_object_get(ev, "clean")) ||
            json_is_object(json_object_get(ev, "stopped"))) {
            l->score[c] = INFINITY;
            continue;
        }
        const json_t *ci = json_object_get(json_object_get(ev, "stats"), "ci_rel");
        if (json_is_number(ci) && json_number_value(ci) >= 0 && isfinite(json_number_value(ci)))
            l->ci_rel[c] = json_number_value(ci);
        /* One a resumed run would not trust (no positive median, no sample count) is left out
         * as resume leaves it: the candidate's later event, which resume then wrote, counts;
         * with none, the landscape lacks it and says so. */
        if (!ft_event_measured_ok(ev, NULL, 0)) continue;
        l->score[c] = json_number_value(json_object_get(json_object_get(ev, "stats"), "median_s"));
    }
    return FT_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The confirm event at index i. The round measures the best few again side by side
 * (interleaved), which is not how the search measured them: on a memory-bound kernel the
 * interleaved round runs 1.2x to 1.45x slower (the others' data evict its own), on the others a
 * few percent. Its medians rank the configs it names fairly against each other, but not against
 * the search's. So each named candidate takes its confirmed median scaled by the round's ratio
 * to the search (the median over them of search / confirmed median): the round decides which
 * of them is fastest, a lucky search sample is undone, and the landscape stays on the search's
 * footing. The default, when the round names it only as the baseline (its search median above
 * every other named config's), is neither scaled by nor counted in the ratio. A round that
 * cannot carry the target is refused (below): scaled this way, one landscape's optimum came
 * out 4.9x faster than any time its search measured, another's 5% set shrank from 9 configs
 * to 1. */
static ft_status read_confirm(const json_t *events, size_t i, const char *name, const int64_t *keys,
                              int def, ft_landscape *l, ft_err *err) {
    const json_t *ev = json_array_get(events, i);
    const json_t *cfgs = json_object_get(ev, "configs"), *stats = json_object_get(ev, "stats");
    if (!json_is_array(cfgs) || !json_is_array(stats) ||
        json_array_size(cfgs) != json_array_size(stats))
        return ft_err_set(err, FT_EFORMAT,
                          "%s: event %zu (confirm) lacks \"configs\" and \"stats\" arrays of "
                          "one length",
                          name, i + 1);
    enum { MAXC = 64 };
    int cand[MAXC], samples[MAXC], n = 0;
    double med[MAXC], ratio[MAXC], cir[MAXC];
    for (size_t j = 0; j < json_array_size(cfgs) && n < MAXC; j++) {
        ft_config cfg;
        if (ft_config_from_json(&l->space, json_array_get(cfgs, j), &cfg, err)) {
            ft_err_wrap(err, "%s: event %zu (confirm), config %zu", name, i + 1, j + 1);
            return ft_err_in_file(err);
        }
        int c = find_key(keys, l->ncands, ft_space_index_of(&l->space, &cfg));
        if (c < 0 || !(l->score[c] < INFINITY)) continue; /* not a measured candidate */
        const json_t *st = json_array_get(stats, j), *m = json_object_get(st, "median_s");
        if (!json_is_number(m) || !(json_number_value(m) > 0) || !isfinite(json_number_value(m)))
            return ft_err_set(err, FT_EFORMAT,
                              "%s: event %zu (confirm): stats %zu has no positive median_s", name,
                              i + 1, j + 1);
        const json_t *k = json_object_get(st, "samples"), *ci = json_object_get(st, "ci_rel");
        cir[n] = json_is_number(ci) ? json_number_value(ci) : 0;
        cand[n] = c;
        med[n] = json_number_value(m);
        samples[n++] =
            json_is_integer(k) && json_integer_value(k) > 0 && json_integer_value(k) < 1 << 30
                ? (int)json_integer_value(k)
                : -1;
    }
    /* The default as the baseline only: slower in the search than every other named one. */
    int skip = -1;
    for (int j = 0; j < n && n > 1; j++) {
        if (cand[j] != def) continue;
        skip = j;
        for (int q = 0; q < n; q++)
            if (q != j && l->score[cand[q]] >= l->score[def]) skip = -1;
    }
    int m = 0, jbest = -1;
    double lo = INFINITY, hi = 0, c1 = INFINITY, c2 = INFINITY;
    for (int j = 0; j < n; j++) {
        if (j == skip) continue;
        ratio[m++] = l->score[cand[j]] / med[j];
        if (l->score[cand[j]] > hi) hi = l->score[cand[j]];
        if (med[j] < c1) {
            c2 = c1;
            c1 = med[j];
            jbest = j;
        } else if (med[j] < c2) {
            c2 = med[j];
        }
    }
    if (m == 0) return FT_OK;
    for (int c = 0; c < l->ncands; c++)
        if (l->score[c] < lo) lo = l->score[c];
    qsort(ratio, (size_t)m, sizeof *ratio, cmp_double);
    double f = 0.5 * (ratio[(m - 1) / 2] + ratio[m / 2]);
    l->confirm_ratio = 1 / f;
    /* Refuse a round the target cannot rest on (docs/search.md, "Wall time and noise"):
     *  - its footing differs between its configs (the spread of search / confirmed medians)
     *    by more than the gap it decides (between its best two confirmed medians): then its
     *    ranking says more about how each config fared interleaved than about which is
     *    fastest;
     *  - a rescaled score would leave the range the search measured: below the fastest median
     *    of the whole search, or above the slowest search median of the configs it names (give
     *    or take the confirmed best's ci_rel).
     * The search's medians then stand, and confirm_refused says why. */
    double ci = jbest >= 0 && cir[jbest] > 0 && cir[jbest] < 1 ? cir[jbest] : 0;
    double spread = ratio[m - 1] / ratio[0] - 1, gap = m >= 2 ? c2 / c1 - 1 : INFINITY;
    double top = 0, bottom = INFINITY;
    for (int j = 0; j < n; j++)
        if (j != skip) {
            if (med[j] * f > top) top = med[j] * f;
            if (med[j] * f < bottom) bottom = med[j] * f;
        }
    if (spread > gap)
        snprintf(l->confirm_refused, sizeof l->confirm_refused,
                 "the round ran %.2fx to %.2fx the search's medians across its %d configs (a "
                 "spread of %.1f%%), more than the %.1f%% gap it decides between its best two",
                 1 / ratio[m - 1], 1 / ratio[0], m, 100 * spread, 100 * gap);
    else if (bottom < lo * (1 - ci))
        snprintf(l->confirm_refused, sizeof l->confirm_refused,
                 "rescaled, it would put the optimum at %.4g s, %.2fx faster than the fastest "
                 "median the search measured (%.4g s)",
                 bottom, lo / bottom, lo);
    else if (top > hi * (1 + ci))
        snprintf(l->confirm_refused, sizeof l->confirm_refused,
                 "rescaled, a config it names would score %.4g s, slower than the slowest search "
                 "median among them (%.4g s)",
                 top, hi);
    if (l->confirm_refused[0]) return FT_OK;
    for (int j = 0; j < n; j++) {
        if (j == skip) continue;
        l->score[cand[j]] = med[j] * f;
        l->nconfirmed += l->confirm_samples[cand[j]] == 0;
        l->confirm_samples[cand[j]] = samples[j];
    }
    return FT_OK;
}

ft_status ft_landscape_summarise_noise(ft_landscape *l, ft_err *err) {
    double *v = malloc((size_t)l->ncands * sizeof *v);
    if (!v) return ft_err_set(err, FT_ENOMEM, "out of memory");
    int n = 0;
    l->ncost = 0;
    for (int c = 0; c < l->ncands; c++) {
        l->ncost += !isnan(l->cost[c]);
        if (l->score[c] < INFINITY && !isnan(l->ci_rel[c])) v[n++] = l->ci_rel[c];
    }
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    l->noise_ci_rel = n ? 0.5 * (v[(n - 1) / 2] + v[n / 2]) : NAN;
    free(v);
    return FT_OK;
}

ft_status ft_landscape_problem(const json_t *events, const char *name, ft_landscape *l,
                               size_t *firstp, ft_err *err) {
    memset(l, 0, sizeof *l);
    l->best = l->def = -1;
    l->confirm_ratio = NAN;
    snprintf(l->format, sizeof l->format, "log");
    *firstp = 0;
    l->confirm_refused[0] = '\0';
    if (!json_is_array(events)) return ft_err_set(err, FT_EINVAL, "%s: no events", name);
    size_t n = json_array_size(events), last = n;
    for (size_t i = n; i-- > 0;)
        if (is_event(json_array_get(events, i), "run_start")) {
            last = i;
            break;
        }
    if (last == n)
        return ft_err_set(err, FT_EFORMAT, "%s: no run_start event: not a tuning log", name);
    const json_t *start = json_array_get(events, last);
    const json_t *key = json_object_get(start, "key");
    /* Walk back over the runs this one resumed: the contiguous earlier runs with its key. */
    size_t first = last;
    l->nruns = 1;
    for (size_t i = last; key && i-- > 0;) {
        const json_t *ev = json_array_get(events, i);
        if (!is_event(ev, "run_start")) continue;
        const json_t *k = json_object_get(ev, "key");
        if (!k || !json_equal((json_t *)k, (json_t *)key)) break;
        first = i;
        l->nruns++;
    }
    const char *opname = str_field(start, "op"), *bename = str_field(start, "backend");
    if (!opname || !bename)
        return ft_err_set(err, FT_EFORMAT, "%s: the last run_start lacks \"op\" or \"backend\"",
                          name);
    snprintf(l->preset, sizeof l->preset, "%s",
             str_field(start, "preset") ? str_field(start, "preset") : "");
    snprintf(l->run, sizeof l->run, "%s", str_field(start, "run") ? str_field(start, "run") : "");
    ft_status s;
    if (strncmp(opname, "t1:", 3) == 0) /* tune --t1 --log: its measurements are in the cache */
        return ft_err_set(err, FT_EFORMAT,
                          "%s: the log of a T1 kernel's run (%s): replay the Kernel Tuner cache "
                          "it wrote (tune --t1 --kt-cache FILE), or the one `export --format "
                          "kt-cache` writes from the log, instead",
                          name, opname);
    if (strcmp(bename, "replay") == 0) /* tune --backend replay:LOG: no measurement of its own */
        return ft_err_set(err, FT_EFORMAT,
                          "%s: the log of a replay (tune --backend replay:LOG, %s) measured "
                          "nothing itself: replay or export the log it replayed instead",
                          name, str_field(start, "device") ? str_field(start, "device") : "");
    if (!(l->op = ft_op_find(opname, err))) return ft_err_wrap(err, "%s", name);
    if ((s = find_backend(bename, l->op, &l->backend, err))) return ft_err_wrap(err, "%s", name);
    if ((s = rebuild_call(start, name, l, err)) || (s = copy_space(start, name, l, err))) return s;
    *firstp = first;
    return FT_OK;
}

ft_status ft_landscape_from_events(const json_t *events, const char *name, ft_landscape *l,
                                   ft_err *err) {
    size_t first;
    ft_status s = ft_landscape_problem(events, name, l, &first, err);
    if (s) {
        ft_landscape_free(l);
        return s;
    }
    const json_t *start = json_array_get(events, first);
    for (size_t i = json_array_size(events); i-- > first;)
        if (is_event(json_array_get(events, i), "run_start")) {
            start = json_array_get(events, i); /* the last run's */
            break;
        }
    int64_t *keys = NULL;
    size_t confirm = 0;
    if ((s = enumerate(l, &keys, err)) ||
        (s = read_scores(events, first, name, keys, l, &confirm, err))) {
        free(keys);
        ft_landscape_free(l);
        return s;
    }
    ft_config def;
    l->def = ft_config_from_json(&l->space, json_object_get(start, "default"), &def, NULL)
                 ? -1
                 : find_key(keys, l->ncands, ft_space_index_of(&l->space, &def));
    if ((confirm && (s = read_confirm(events, confirm, name, keys, l->def, l, err))) ||
        (s = ft_landscape_summarise_noise(l, err))) {
        free(keys);
        ft_landscape_free(l);
        return s;
    }
    free(keys);
    const char *pdev = str_field(json_object_get(start, "predict"), "device");
    snprintf(l->predict_device, sizeof l->predict_device, "%s", pdev ? pdev : "");
    int missing = 0, first_missing = -1;
    for (int c = 0; c < l->ncands; c++) {
        l->npredicted += !isnan(l->predicted[c]);
        if (isnan(l->score[c])) {
            if (first_missing < 0) first_missing = c;
            missing++;
        } else if (!(l->score[c] < INFINITY)) {
            l->nrejected++;
        } else if (l->best < 0 || l->score[c] < l->score[l->best]) {
            l->best = c;
        }
    }
    if (missing) {
        char text[512];
        ft_config_format(&l->space, &l->cands[first_missing], text, sizeof text);
        s = ft_err_set(err, FT_EFORMAT,
                       "%s: %d of %d valid candidates were neither measured nor rejected (the "
                       "first: candidate %d, %s): a replay needs an exhaustive landscape "
                       "(tune --strategy exhaustive without a budget)",
                       name, missing, l->ncands, first_missing, text);
        ft_landscape_free(l);
        return s;
    }
    if (l->best < 0) {
        ft_landscape_free(l);
        return ft_err_set(err, FT_EFORMAT, "%s: every candidate was rejected: nothing to find",
                          name);
    }
    return FT_OK;
}

void ft_landscape_free(ft_landscape *l) {
    if (!l) return;
    free(l->params);
    free(l->cands);
    free(l->score);
    free(l->predicted);
    free(l->cost);
    free(l->ci_rel);
    free(l->confirm_samples);
    for (int i = 0; i < l->nowned; i++)
        free(l->owned[i]);
    free(l->owned);
    /* Empty, as a load starts it, so that freeing it again does nothing. */
    memset(l, 0, sizeof *l);
    l->best = l->def = -1;
}

int ft_landscape_reaches(const ft_landscape *l, double s, double target) {
    return l->best >= 0 && s <= l->score[l->best] * (1 + target);
}

int ft_landscape_count_within(const ft_landscape *l, double target) {
    int n = 0;
    for (int c = 0; c < l->ncands; c++)
        n += ft_landscape_reaches(l, l->score[c], target);
    return n;
}

int ft_landscape_first_within(const ft_landscape *l, double target) {
    for (int c = 0; c < l->ncands; c++)
        if (ft_landscape_reaches(l, l->score[c], target)) return c + 1;
    return -1;
}

double ft_landscape_cost_through(const ft_landscape *l, int n) {
    double t = 0;
    for (int c = 0; c < n && c < l->ncands; c++)
        t += l->cost[c]; /* NaN stays NaN */
    return t;
}

int ft_landscape_same_params(const ft_landscape *a, const ft_landscape *b) {
    if (a->space.nparams != b->space.nparams) return 0;
    for (int i = 0; i < a->space.nparams; i++) {
        const ft_param *p = &a->space.params[i], *q = &b->space.params[i];
        if (strcmp(p->name, q->name) != 0 || p->n != q->n || !p->labels != !q->labels) return 0;
        for (int k = 0; k < p->n; k++) {
            if (p->values[k] != q->values[k]) return 0;
            if (p->labels && strcmp(p->labels[k], q->labels[k]) != 0) return 0;
        }
    }
    return 1;
}

void ft_landscape_params_str(const ft_landscape *l, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < l->space.nparams && at + 1 < n; i++) {
        const ft_param *p = &l->space.params[i];
        int w = snprintf(buf + at, n - at, "%s%s(%d)", i ? "," : "", p->name, p->n);
        if (w < 0) break;
        at += (size_t)w;
    }
    if (at >= n && n > 4) snprintf(buf + n - 4, 4, "...");
}

/* ---- warm start ----------------------------------------------------------------------------- */

/* Index of candidate `cfg` (a config of the same op and backend) among l's, -1 when it is none
 * of them; keys: l's candidates' space indices (ascending). */
static int cand_of(const ft_landscape *l, const int64_t *keys, const ft_config *cfg) {
    if (cfg->n != l->space.nparams) return -1;
    int64_t k = ft_space_index_of(&l->space, cfg);
    return k < 0 ? -1 : find_key(keys, l->ncands, k);
}

ft_status ft_landscape_warm(const ft_landscape *l, const ft_landscape *from, int want, int *first,
                            int *nfirst, double *prior, ft_err *err) {
    if (nfirst) *nfirst = 0;
    if (!l->op != !from->op)
        return ft_err_set(err, FT_EINVAL,
                          "a warm start needs landscapes of one kind: this one is from %s, the "
                          "other from %s (a flaretune log names an op, a community file does not)",
                          l->format, from->format);
    if (l->op && (from->op != l->op || from->backend != l->backend))
        return ft_err_set(err, FT_EINVAL,
                          "a warm start needs a landscape of the same op and backend: this one is "
                          "%s on %s, the other %s on %s",
                          l->op->name, l->backend->name, from->op->name, from->backend->name);
    if (!l->op && !ft_landscape_same_params(l, from)) {
        char a[512], b[512];
        ft_landscape_params_str(l, a, sizeof a);
        ft_landscape_params_str(from, b, sizeof b);
        return ft_err_set(err, FT_EINVAL,
                          "a warm start needs a file of the same tunable parameters and values: "
                          "this one has %s, the other %s",
                          a, b);
    }
    int64_t *keys = malloc((size_t)l->ncands * sizeof *keys);
    int *map = malloc((size_t)from->ncands * sizeof *map);
    int *order = malloc((size_t)from->ncands * sizeof *order);
    if (!keys || !map || !order) {
        free(keys);
        free(map);
        free(order);
        return ft_err_set(err, FT_ENOMEM, "out of memory");
    }
    for (int c = 0; c < l->ncands; c++)
        keys[c] = ft_space_index_of(&l->space, &l->cands[c]);
    if (prior)
        for (int c = 0; c < l->ncands; c++)
            prior[c] = NAN;
    for (int j = 0; j < from->ncands; j++) {
        map[j] = cand_of(l, keys, &from->cands[j]);
        if (prior && map[j] >= 0 && from->score[j] < INFINITY) prior[map[j]] = from->score[j];
    }
    ft_argsort(from->score, from->ncands, order); /* out of memory: space order */
    int n = 0;
    for (int k = 0; k < from->ncands && n < want; k++) {
        int j = order[k];
        if (map[j] < 0 || !(from->score[j] < INFINITY)) continue;
        if (first) first[n] = map[j];
        n++;
    }
    if (nfirst) *nfirst = n;
    free(keys);
    free(map);
    free(order);
    return FT_OK;
}

/* ---- export --------------------------------------------------------------------------------- */

/* [{"name", "values", "named"}, ...]: each parameter's candidate values in the resolved space,
 * labels for a named one as configs write them. */
static json_t *params_json(const ft_space *s) {
    json_t *a = json_array();
    for (int p = 0; p < s->nparams; p++) {
        const ft_param *pa = &s->params[p];
        json_t *v = json_array();
        for (int i = 0; i < pa->n; i++) {
            if (pa->labels) {
                char text[64];
                ft_config_value_str(s, p, pa->values[i], text, sizeof text);
                json_array_append_new(v, json_string(text));
            } else {
                json_array_append_new(v, json_integer(pa->values[i]));
            }
        }
        json_array_append_new(a, json_pack("{s:s, s:o, s:b}", "name", pa->name, "values", v,
                                           "named", pa->labels != NULL));
    }
    return a;
}

json_t *ft_landscape_to_json(const ft_landscape *l, const char *log) {
    char dims[256] = "";
    if (l->op) ft_call_dims_str(&l->call, dims, sizeof dims);
    json_t *cands = json_array();
    for (int c = 0; c < l->ncands; c++)
        json_array_append_new(cands, json_pack("{s:o, s:o, s:o, s:o}", "config",
                                               ft_config_to_json(&l->space, &l->cands[c]),
                                               "score_s", ft_json_number(l->score[c]), "cost_s",
                                               ft_json_number(l->cost[c]), "ci_rel",
                                               ft_json_number(l->ci_rel[c])));
    json_t *doc = json_pack(
        "{s:s, s:o, s:o, s:s, s:s, s:s, s:o, s:o, s:i, s:i, s:o, s:{s:o}, s:o}", "format",
        "flaretune-landscape/1", "op", l->op ? json_string(l->op->name) : json_null(), "backend",
        l->backend ? json_string(l->backend->name) : json_null(), "preset", l->preset, "dims",
        dims, "log", log ? log : "", "params",
                     params_json(&l->space), "optimum_s",
                     ft_json_number(l->best >= 0 ? l->score[l->best] : NAN), "optimum", l->best,
                     "confirmed", l->nconfirmed, "confirm_ratio", ft_json_number(l->confirm_ratio),
                     "noise", "median_ci_rel",
                     ft_json_number(l->noise_ci_rel), "candidates", cands);
    /* Where it came from: a community file's kernel, device and problem size. */
    if (doc)
        json_object_update_new(doc, json_pack("{s:s, s:s, s:s, s:s}", "source", l->format,
                                              "kernel", l->kernel, "device", l->device,
                                              "problem_size", l->problem_size));
    /* Why the run's confirmation round was not applied (null: it was, or there was none). */
    if (doc)
        json_object_set_new(doc, "confirm_refused",
                            l->confirm_refused[0] ? json_string(l->confirm_refused) : json_null());
    return doc;
}

ft_status ft_landscape_export(const ft_landscape *l, const char *log, const char *path,
                              ft_err *err) {
    if (ft_same_file(log, path))
        return ft_err_set(err, FT_EINVAL, "%s: the output is the landscape it reads", path);
    json_t *doc = ft_landscape_to_json(l, log);
    if (!doc) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", path);
    ft_status s = ft_json_save(doc, path, JSON_COMPACT, 1, err);
    json_decref(doc);
    return s;
}

/* ---- replay --------------------------------------------------------------------------------- */

void ft_replay_opts_default(ft_replay_opts *o) {
    memset(o, 0, sizeof *o);
    o->kind = FT_STRAT_EXHAUSTIVE;
    o->seed = 1;
    o->target = FT_REPLAY_TARGET;
    o->batch = 1;
}

/* A replay in progress. */
typedef struct {
    const ft_landscape *l;
    const ft_replay_opts *o;
    ft_strategy *st;
    unsigned char *seen; /* proposed already */
    int *out, k;         /* the batch */
    int evaluations, rounds;
    double best, spent; /* the best score found; the costs of the evaluations so far */
    double wall, slowest; /* the rounds so far in parallel (each its slowest member's cost);
                           * the slowest cost of the round under way (NaN: one unknown) */
    double propose_s;     /* CPU seconds in the strategy's proposals so far */
} replay_state;

/* One proposal: checked, scored, its cost and score reported; each target it brings the best
 * found within marked in r (to_target -2: reached in this round, counted at its end). */
static ft_status replay_take(replay_state *R, int i, const double *targets, int ntargets,
                             ft_replay_result *r, ft_err *err) {
    const ft_landscape *l = R->l;
    if (i < 0 || i >= l->ncands || R->seen[i])
        return ft_err_set(err, FT_EINTERNAL, "strategy %s proposed candidate %d %s",
                          ft_strategy_names[R->o->kind], i,
                          i < 0 || i >= l->ncands ? "out of range" : "twice");
    R->seen[i] = 1;
    R->evaluations++;
    R->spent += l->cost[i]; /* NaN from an unknown cost on */
    if (isnan(l->cost[i]) || l->cost[i] > R->slowest) R->slowest = l->cost[i];
    if (!isnan(l->cost[i])) ft_strategy_report_cost(R->st, i, l->cost[i]);
    ft_strategy_report(R->st, i, l->score[i]);
    if (l->score[i] < R->best) R->best = l->score[i];
    ft_replay_trace *tr = R->o->trace;
    if (tr && tr->n < tr->cap) {
        tr->best[tr->n] = R->best;
        tr->cost[tr->n++] = R->spent;
    }
    for (int t = 0; t < ntargets; t++)
        if (r[t].to_target == -1 && ft_landscape_reaches(l, R->best, targets[t]))
            r[t].to_target = -2;
    return FT_OK;
}

/* The end of a round: its slowest member added to the parallel wall time, and each target
 * reached in it counted to here (every member of the round paid). */
static void replay_round_end(replay_state *R, ft_replay_result *r, int ntargets) {
    R->wall += R->slowest; /* NaN stays NaN */
    for (int t = 0; t < ntargets; t++)
        if (r[t].to_target == -2) {
            r[t].to_target = R->evaluations;
            r[t].rounds_to_target = R->rounds;
            r[t].time_to_target = R->spent;
            r[t].wall_to_target = R->wall;
        }
}

/* Where a replay that stops now leaves r. */
static void replay_stop(const replay_state *R, ft_replay_result *r) {
    r->evaluations = R->evaluations;
    r->rounds = R->rounds;
    r->best = R->best;
    r->propose_s = R->propose_s;
}

static double thread_cpu_s(void) {
    struct timespec ts;
    return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) ? 0 : ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* The next batch, into R->out: how many (0: nothing more to propose). */
static ft_status replay_ask(replay_state *R, int *n, ft_err *err) {
    const ft_replay_opts *o = R->o;
    int want =
        o->budget > 0 && o->budget - R->evaluations < R->k ? o->budget - R->evaluations : R->k;
    double t0 = thread_cpu_s();
    if (R->k == 1) {
        R->out[0] = ft_strategy_next(R->st);
        *n = R->out[0] >= 0;
    } else {
        *n = ft_strategy_next_batch(R->st, want, R->out);
    }
    R->propose_s += thread_cpu_s() - t0;
    if (*n > want)
        return ft_err_set(err, FT_EINTERNAL, "strategy %s proposed %d candidates for a batch of %d",
                          ft_strategy_names[o->kind], *n, want);
    return FT_OK;
}

static int opts_ok(const ft_replay_opts *o, const double *targets, int ntargets) {
    int ok = (int)o->kind >= 0 && o->kind < FT_STRAT_COUNT && o->batch >= 1 && o->budget >= 0 &&
             o->nfirst >= 0 && (!o->nfirst || o->first) && ntargets >= 1 && targets;
    for (int t = 0; ok && t < ntargets; t++)
        ok = targets[t] >= 0;
    return ok;
}

ft_status ft_replay_run_targets(const ft_landscape *l, const ft_replay_opts *o,
                                const double *targets, int ntargets, ft_replay_result *r,
                                ft_err *err) {
    for (int t = 0; t < ntargets; t++)
        r[t] = (ft_replay_result){.to_target = -1,
                                  .rounds_to_target = -1,
                                  .best = INFINITY,
                                  .time_to_target = NAN,
                                  .wall_to_target = NAN};
    if (!opts_ok(o, targets, ntargets))
        return ft_err_set(err, FT_EINVAL, "replay options out of range");
    replay_state R = {.l = l, .o = o, .best = INFINITY};
    if (o->trace) o->trace->n = 0;
    R.k = o->batch < l->ncands ? o->batch : l->ncands;
    R.st = ft_strategy_new_opts(o->kind, &l->space, l->cands, l->ncands, o->seed, o->strategy);
    R.seen = calloc((size_t)l->ncands, 1);
    R.out = malloc((size_t)R.k * sizeof *R.out);
    ft_status s = FT_OK;
    if (!R.st || !R.seen || !R.out) {
        s = ft_err_set(err, R.st || !o->strategy ? FT_ENOMEM : FT_EINVAL, "%s",
                       R.st || !o->strategy ? "out of memory" : "strategy options out of range");
        goto done;
    }
    if ((o->nfirst || o->prior) && ft_strategy_warm(R.st, o->first, o->nfirst, o->prior)) {
        s = ft_err_set(err, FT_EINVAL, "warm start: a first candidate is out of range");
        goto done;
    }
    /* One replay for every target: each stops after the batch that reached it, as a replay for
     * that target alone would (the proposals do not depend on the target). */
    int open = ntargets, n;
    while (open > 0 && (o->budget <= 0 || R.evaluations < o->budget)) {
        if ((s = replay_ask(&R, &n, err)) || n <= 0) break;
        R.rounds++;
        R.slowest = 0;
        for (int j = 0; j < n; j++)
            if ((s = replay_take(&R, R.out[j], targets, ntargets, r, err))) goto done;
        replay_round_end(&R, r, ntargets);
        for (int t = 0; t < ntargets; t++)
            if (r[t].to_target >= 0 && r[t].rounds == 0) {
                replay_stop(&R, &r[t]);
                open--;
            }
    }
    for (int t = 0; t < ntargets; t++)
        if (r[t].rounds == 0) replay_stop(&R, &r[t]);
done:
    free(R.out);
    free(R.seen);
    ft_strategy_free(R.st);
    return s;
}

ft_status ft_replay_run(const ft_landscape *l, const ft_replay_opts *o, ft_replay_result *r,
                        ft_err *err) {
    return ft_replay_run_targets(l, o, &o->target, 1, r, err);
}

/* ---- orderings ------------------------------------------------------------------------------ */

void ft_landscape_ordering(int nparams, int j, int *perm) {
    for (int q = 0; q < nparams; q++)
        perm[q] = q;
    uint64_t x = (uint64_t)j;
    for (int i = nparams - 1; i >= 1 && j > 0; i--) {
        x += 0x9E3779B97F4A7C15u; /* splitmix64 (Steele, Lea, Flood 2014), as kt-compare.py */
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
        z ^= z >> 31;
        int k = (int)(z % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[k];
        perm[k] = t;
    }
}

/* qsort context for ft_landscape_permute: candidates by their index in the new space order. */
typedef struct {
    int64_t key;
    int from;
} permuted_cand;

static int cmp_permuted(const void *a, const void *b) {
    int64_t x = ((const permuted_cand *)a)->key, y = ((const permuted_cand *)b)->key;
    return (x > y) - (x < y);
}

ft_status ft_landscape_permute(const ft_landscape *in, const int *perm, ft_landscape *out,
                               ft_err *err) {
    const int np = in->space.nparams, n = in->ncands;
    unsigned char used[FT_MAX_PARAMS] = {0};
    for (int q = 0; q < np; q++) {
        if (perm[q] < 0 || perm[q] >= np || used[perm[q]])
            return ft_err_set(err, FT_EINVAL, "not a permutation of the %d parameters", np);
        used[perm[q]] = 1;
    }
    *out = *in;
    /* A file's parameter names and labels stay in's: out borrows them (free out before in). */
    out->owned = NULL;
    out->nowned = 0;
    out->params = calloc((size_t)(np ? np : 1), sizeof *out->params);
    out->cands = malloc((size_t)n * sizeof *out->cands);
    out->score = malloc((size_t)n * sizeof *out->score);
    out->predicted = malloc((size_t)n * sizeof *out->predicted);
    out->cost = malloc((size_t)n * sizeof *out->cost);
    out->ci_rel = malloc((size_t)n * sizeof *out->ci_rel);
    out->confirm_samples = malloc((size_t)n * sizeof *out->confirm_samples);
    permuted_cand *pc = malloc((size_t)n * sizeof *pc);
    if (!out->params || !out->cands || !out->score || !out->predicted || !out->cost ||
        !out->ci_rel || !out->confirm_samples || !pc) {
        free(pc);
        ft_landscape_free(out);
        return ft_err_set(err, FT_ENOMEM, "out of memory");
    }
    for (int q = 0; q < np; q++)
        out->params[q] = in->space.params[perm[q]];
    out->space.params = out->params;
    out->space.valid = NULL;
    for (int c = 0; c < n; c++) {
        ft_config cfg = {.n = np};
        for (int q = 0; q < np; q++)
            cfg.v[q] = in->cands[c].v[perm[q]];
        out->cands[c] = cfg; /* placed below */
        pc[c].key = ft_space_index_of(&out->space, &cfg);
        pc[c].from = c;
    }
    qsort(pc, (size_t)n, sizeof *pc, cmp_permuted);
    ft_config *tmp = malloc((size_t)n * sizeof *tmp);
    if (!tmp) {
        free(pc);
        ft_landscape_free(out);
        return ft_err_set(err, FT_ENOMEM, "out of memory");
    }
    memcpy(tmp, out->cands, (size_t)n * sizeof *tmp);
    for (int c = 0; c < n; c++) {
        int f = pc[c].from;
        out->cands[c] = tmp[f];
        out->score[c] = in->score[f];
        out->predicted[c] = in->predicted ? in->predicted[f] : NAN;
        out->cost[c] = in->cost ? in->cost[f] : NAN;
        out->ci_rel[c] = in->ci_rel ? in->ci_rel[f] : NAN;
        out->confirm_samples[c] = in->confirm_samples ? in->confirm_samples[f] : 0;
        if (f == in->best) out->best = c;
        if (f == in->def) out->def = c;
    }
    free(tmp);
    free(pc);
    return FT_OK;
}

/* ---- predicted time ------------------------------------------------------------------------ */

void ft_predicted_order(const double *predicted, int n, int *order) {
    ft_argsort(predicted, n, order); /* out of memory: space order, still an order */
}

int ft_predicted_prune(const double *predicted, int n, double factor, int keep_always,
                       unsigned char *keep) {
    double best = INFINITY;
    for (int i = 0; i < n; i++)
        if (predicted[i] < best) best = predicted[i];
    int kept = 0;
    for (int i = 0; i < n; i++) {
        keep[i] = isnan(predicted[i]) || !isfinite(best) || predicted[i] <= factor * best ||
                  i == keep_always;
        kept += keep[i];
    }
    return kept;
}

double ft_landscape_rank_correlation(const ft_landscape *l, int *n) {
    double *x = malloc(sizeof *x * (size_t)(2 * l->ncands + 2));
    *n = 0;
    if (!x) return NAN;
    double *y = x + l->ncands + 1;
    for (int c = 0; c < l->ncands; c++)
        if (!isnan(l->predicted[c]) && isfinite(l->score[c])) {
            x[*n] = l->predicted[c];
            y[(*n)++] = l->score[c];
        }
    double r = ft_rank_correlation(x, y, *n);
    free(x);
    return r;
}

int ft_landscape_first_within_predicted(const ft_landscape *l, double target) {
    int *order = malloc(sizeof *order * (size_t)(l->ncands + 1));
    int at = -1;
    if (!order || l->npredicted == 0) {
        free(order);
        return -1;
    }
    ft_predicted_order(l->predicted, l->ncands, order);
    for (int k = 0; k < l->ncands && at < 0; k++)
        if (ft_landscape_reaches(l, l->score[order[k]], target)) at = k + 1;
    free(order);
    return at;
}

void ft_landscape_prune(const ft_landscape *l, double factor, double target,
                        ft_prune_outcome *out) {
    memset(out, 0, sizeof *out);
    out->factor = factor;
    out->best_kept_ratio = INFINITY;
    unsigned char *keep = malloc((size_t)l->ncands + 1);
    if (!keep || l->best < 0) {
        free(keep);
        return;
    }
    out->kept = ft_predicted_prune(l->predicted, l->ncands, factor, l->def, keep);
    double best = INFINITY;
    for (int c = 0; c < l->ncands; c++)
        if (keep[c] && l->score[c] < best) best = l->score[c];
    out->best_kept = keep[l->best];
    out->within_kept = ft_landscape_reaches(l, best, target);
    out->best_kept_ratio = best / l->score[l->best];
    free(keep);
}
