/* report.c: `flaretune report`'s measuring side: the papers' design axes swept as whole drafter
 * steps (tuner/step.c), each point appended to an event log as it is measured so an
 * interrupted sweep resumes, and the report document (docs/report.md) built from the points:
 * the claims answered in words, the charts and tables. report_render.c draws it.
 *
 * The points, at MODEL's presets (the sizes DFLARE and D-PACE vary):
 *   - each drafter's own step (DFlash D5 T5, DFLARE D7 T9 at real sizes), inference and training;
 *   - draft layers D 3, 5, 7 and target layers T 5, 7, 9, each drafter, both phases;
 *   - block size B 8, 12, 16 with every loss scheme (decay, progressive, dpace and its two
 *     ablations), DFLARE training.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/env.h"
#include "core/filelock.h"
#include "core/json.h"
#include "core/npy.h"
#include "kernels/registry.h"
#include "op/op_json.h"
#include "traces/eventlog.h"
#include "tuner/ceilings.h"
#include "tuner/report.h"
#include "tuner/report_sweep.h"
#include "tuner/step.h"

void ft_report_sweep_opts_default(ft_report_sweep_opts *o) {
    memset(o, 0, sizeof *o);
    o->model = "small";
    o->backend = "auto";
}

/* ---- the points ------------------------------------------------------------------------------ */

typedef struct point {
    char arch[8], phase[8], scheme[16];
    int64_t D, T, B; /* 0: the preset's own */
    char key[96];
} point;

#define MAX_POINTS 64

static const char *const schemes[] = {"decay", "progressive", "dpace", "dpace_cum", "dpace_cont"};
enum { NSCHEMES = 5 };
static const int64_t axis_D[] = {3, 5, 7}, axis_T[] = {5, 7, 9}, axis_B[] = {8, 12, 16};

static void key_of(point *p) {
    char d[16] = "", t[16] = "", b[16] = "";
    if (p->D) snprintf(d, sizeof d, ".D%lld", (long long)p->D);
    if (p->T) snprintf(t, sizeof t, ".T%lld", (long long)p->T);
    if (p->B) snprintf(b, sizeof b, ".B%lld", (long long)p->B);
    snprintf(p->key, sizeof p->key, "%s.%s%s%s%s.%s", p->arch, p->phase, d, t, b, p->scheme);
}

static int add_point(point *pts, int n, const char *arch, const char *phase, int64_t D, int64_t T,
                     int64_t B, const char *scheme) {
    point p = {.D = D, .T = T, .B = B};
    snprintf(p.arch, sizeof p.arch, "%s", arch);
    snprintf(p.phase, sizeof p.phase, "%s", phase);
    snprintf(p.scheme, sizeof p.scheme, "%s", scheme);
    key_of(&p);
    for (int i = 0; i < n; i++)
        if (!strcmp(pts[i].key, p.key)) return n;
    if (n < MAX_POINTS) pts[n++] = p;
    return n;
}

static int make_points(point *pts) {
    static const char *const archs[] = {"dflash", "dflare"}, *const phases[] = {"decode", "train"};
    int n = 0;
    for (int a = 0; a < 2; a++)
        for (int ph = 0; ph < 2; ph++) {
            n = add_point(pts, n, archs[a], phases[ph], 0, 0, 0, "decay");
            for (int i = 0; i < 3; i++)
                n = add_point(pts, n, archs[a], phases[ph], axis_D[i], 0, 0, "decay");
            for (int i = 0; i < 3; i++)
                n = add_point(pts, n, archs[a], phases[ph], 0, axis_T[i], 0, "decay");
        }
    for (int i = 0; i < 3; i++)
        for (int s = 0; s < NSCHEMES; s++)
            n = add_point(pts, n, "dflare", "train", 0, 0, axis_B[i], schemes[s]);
    return n;
}

static ft_status point_preset(const point *pt, const char *model, ft_preset *out, ft_err *err) {
    char name[64];
    snprintf(name, sizeof name, "%s.%s.%s", model, pt->arch, pt->phase);
    const ft_preset *p = ft_preset_find(name);
    if (!p)
        return ft_err_set(err, FT_EINVAL, "no preset %s (models: see `flaretune list presets`)",
                          name);
    *out = *p;
    char set[32];
    ft_status s = FT_OK;
    if (pt->D && !s)
        snprintf(set, sizeof set, "D=%lld", (long long)pt->D), s = ft_preset_set(out, set, err);
    if (pt->T && !s)
        snprintf(set, sizeof set, "T=%lld", (long long)pt->T), s = ft_preset_set(out, set, err);
    if (pt->B && !s)
        snprintf(set, sizeof set, "B=%lld", (long long)pt->B), s = ft_preset_set(out, set, err);
    return s;
}

static int same_sizes(const ft_preset *a, const ft_preset *b) {
    if (strcmp(a->model, b->model) || strcmp(a->arch, b->arch) || strcmp(a->phase, b->phase))
        return 0; /* not the names: --set appends to them */
    for (int k = 0; ft_preset_fields[k]; k++)
        if (*ft_preset_field((ft_preset *)a, ft_preset_fields[k]) !=
            *ft_preset_field((ft_preset *)b, ft_preset_fields[k]))
            return 0;
    return 1;
}

/* ---- the log: resume ------------------------------------------------------------------------- */

/* The steps an earlier run of the same sweep (model, backend, device) logged, by key; an error
 * when the log belongs to another sweep. */
/* The entries of a profile as 16 hex digits (FNV-1a over each entry's JSON, keys sorted): a
 * sweep's configs are the same when this is. */
static const char *profile_digest(const ft_profile *p, char out[17]) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int k = 0; k < ft_profile_count(p); k++) {
        char *text = json_dumps(ft_profile_entry_at(p, k)->json, JSON_COMPACT | JSON_SORT_KEYS);
        for (const char *c = text ? text : ""; *c; c++)
            h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
        h = (h ^ '\n') * 0x100000001b3ull;
        free(text);
    }
    snprintf(out, 17, "%016llx", (unsigned long long)h);
    return out;
}

static ft_status read_done(const char *log, const json_t *ident, json_t *done, json_t *paired,
                           ft_err *err) {
    if (access(log, F_OK) != 0) return FT_OK;
    json_t *evs = NULL;
    int torn = 0;
    ft_status s = ft_eventlog_read(log, &evs, &torn, err);
    if (s) return s;
    size_t i;
    json_t *ev;
    json_array_foreach(evs, i, ev) {
        const char *type = json_string_value(json_object_get(ev, "event"));
        if (type && strncmp(type, "report_", 7) != 0) {
            /* Not a report's event: the log is another kind's (a tuning run's run_start, ...);
             * appending the sweep's steps to it would mix the two. */
            s = ft_err_set(err, FT_EINVAL,
                           "%s is not a report's log: its line %zu is a '%s' event (a tuning "
                           "run's log?); give report another --log",
                           log, i + 1, type);
            break;
        }
        if (type && !strcmp(type, "report_start")) {
            const json_t *id = json_object_get(ev, "sweep");
            if (!json_equal((json_t *)id, (json_t *)ident)) {
                char *a = json_dumps(id, JSON_COMPACT), *b = json_dumps(ident, JSON_COMPACT);
                s = ft_err_set(err, FT_EINVAL,
                               "%s holds another sweep (%s, this one is %s): give another --log or "
                               "remove it",
                               log, a ? a : "?", b ? b : "?");
                free(a);
                free(b);
                break;
            }
        } else if (type && !strcmp(type, "report_step")) {
            const char *key = json_string_value(json_object_get(ev, "key"));
            json_t *doc = json_object_get(ev, "step");
            if (key && json_is_object(doc)) json_object_set(done, key, doc);
        } else if (type && !strcmp(type, "report_paired")) {
            const char *key = json_string_value(json_object_get(ev, "key"));
            json_t *doc = json_object_get(ev, "paired");
            if (key && json_is_object(doc)) json_object_set(paired, key, doc);
        }
    }
    json_decref(evs);
    return s;
}

/* ---- the document ---------------------------------------------------------------------------- */

static double num(const json_t *o, const char *path) {
    /* "a.b.c" */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    const json_t *v = o;
    for (char *tok = strtok(buf, "."); tok && v; tok = strtok(NULL, "."))
        v = json_object_get(v, tok);
    return v ? json_number_value(v) : NAN;
}

static point point_at(const char *arch, const char *phase, int64_t D, int64_t T, int64_t B,
                      const char *scheme) {
    point p = {.D = D, .T = T, .B = B};
    snprintf(p.arch, sizeof p.arch, "%s", arch);
    snprintf(p.phase, sizeof p.phase, "%s", phase);
    snprintf(p.scheme, sizeof p.scheme, "%s", scheme);
    key_of(&p);
    return p;
}

static const json_t *step_at(const json_t *done, const char *arch, const char *phase, int64_t D,
                             int64_t T, int64_t B, const char *scheme) {
    point p = point_at(arch, phase, D, T, B, scheme);
    return json_object_get(done, p.key);
}

/* Add the step at a point (decay's loss) to a claim's evidence: the steps its verdict rests on,
 * each with whether it was measured cleanly (report_verdict.c withholds the verdict if not). */
static void evidence_add(json_t *ev, const json_t *done, const char *arch, const char *phase,
                         int64_t D, int64_t T, int64_t B) {
    point p = point_at(arch, phase, D, T, B, "decay");
    const json_t *st = json_object_get(done, p.key);
    if (st) json_array_append_new(ev, ft_report_evidence(p.key, st));
}

/* The alone median of an op (by stage name) in a step document. */
static double op_s(const json_t *step, const char *name) {
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(step, "ops"), i, o) {
        if (!strcmp(json_string_value(json_object_get(o, "name")), name))
            return json_number_value(json_object_get(o, "median_s"));
    }
    return NAN;
}

static const char *arch_label(const char *arch) {
    return strcmp(arch, "dflare") ? "DFlash" : "DFLARE";
}

static json_t *stacked(const json_t *done, const char *phase) {
    json_t *bars = json_array();
    static const char *const archs[] = {"dflash", "dflare"};
    for (int a = 0; a < 2; a++) {
        const json_t *st = step_at(done, archs[a], phase, 0, 0, 0, "decay");
        if (!st) continue;
        json_t *segs = json_array();
        size_t i;
        json_t *o;
        json_array_foreach(json_object_get(st, "ops"), i, o) {
            json_array_append_new(segs, json_pack("{s:O, s:O}", "label", json_object_get(o, "name"),
                                                  "value", json_object_get(o, "median_s")));
        }
        char label[96];
        snprintf(label, sizeof label, "%s D%lld T%lld%s", arch_label(archs[a]),
                 (long long)num(st, "sizes.D"), (long long)num(st, "sizes.T"),
                 ft_report_step_bound(st) ? " (busy: an upper bound)" : "");
        json_array_append_new(bars, json_pack("{s:s, s:o}", "label", label, "segments", segs));
    }
    char id[32], title[160];
    snprintf(id, sizeof id, "breakdown-%s", phase);
    snprintf(title, sizeof title, "%s step by op (each op timed alone, summed over the layers)",
             strcmp(phase, "train") ? "Inference (decode)" : "Training");
    return json_pack("{s:s, s:s, s:s, s:s, s:o, s:s}", "id", id, "kind", "stacked", "title", title,
                     "unit", "s", "bars", bars, "note",
                     "flaretune step MODEL.ARCH.PHASE: every op alone at the drafter's sizes");
}

/* Whole-step medians against D or T (axis 'D' or 'T'), one series per drafter. */
static json_t *axis_chart(const json_t *done, char axis, const char *phase) {
    static const char *const archs[] = {"dflash", "dflare"};
    const int64_t *xs = axis == 'D' ? axis_D : axis_T;
    json_t *series = json_array();
    int nbound = 0;
    for (int a = 0; a < 2; a++) {
        json_t *pts = json_array(), *lo = json_array(), *hi = json_array(), *bound = json_array();
        for (int i = 0; i < 3; i++) {
            const json_t *st = step_at(done, archs[a], phase, axis == 'D' ? xs[i] : 0,
                                       axis == 'T' ? xs[i] : 0, 0, "decay");
            if (!st) continue;
            json_array_append_new(
                pts, json_pack("[I, f]", (json_int_t)xs[i], num(st, "whole.stats.median_s")));
            json_array_append_new(lo, json_real(num(st, "whole.stats.q1_s")));
            json_array_append_new(hi, json_real(num(st, "whole.stats.q3_s")));
            const int b = ft_report_step_bound(st);
            json_array_append_new(bound, json_boolean(b));
            nbound += b;
        }
        char label[64];
        snprintf(label, sizeof label, "%s", arch_label(archs[a]));
        json_array_append_new(series, json_pack("{s:s, s:o, s:o, s:o, s:o}", "label", label,
                                                "points", pts, "lo", lo, "hi", hi, "bound", bound));
    }
    char id[32], title[160];
    snprintf(id, sizeof id, "%s-%s", axis == 'D' ? "depth" : "targets", phase);
    snprintf(title, sizeof title, "%s step against %s (whole step, median and quartiles)",
             strcmp(phase, "train") ? "Inference" : "Training",
             axis == 'D' ? "draft layers D" : "target layers T");
    json_t *chart =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:o}", "id", id, "kind", "lines", "title", title,
                  "unit", "s", "x_label", axis == 'D' ? "draft layers D" : "target layers T",
                  "y_label", "step time", "series", series);
    if (chart && nbound)
        json_object_set_new(chart, "note",
                            json_string("hollow markers: steps measured on a busy machine, whose "
                                        "medians are upper bounds"));
    return chart;
}

/* A scheme's training-step overhead over decay at block size B, in percent: the loss with the
 * scheme minus the loss with decay, measured side by side in alternating rounds (paired_losses:
 * the median of the per-round differences, so drift between two measurements taken minutes
 * apart does not pass for an overhead), over the decay step's sum of ops (every other op of the
 * step is the same call), with the quartiles of the differences as its range. 0 with *ok = 0
 * when a point is missing. */
static double overhead(const json_t *done, const json_t *paired, const char *scheme, int64_t B,
                       double *lo, double *hi, int *ok) {
    const json_t *d = step_at(done, "dflare", "train", 0, 0, B, "decay");
    char key[32];
    snprintf(key, sizeof key, "B%lld", (long long)B);
    const json_t *x =
        json_object_get(json_object_get(json_object_get(paired, key), "schemes"), scheme);
    double base = d ? num(d, "whole.sum_alone_s") : NAN;
    *ok = x && base > 0;
    if (!*ok) return 0;
    *lo = 100 * num(x, "diff_q1_s") / base;
    *hi = 100 * num(x, "diff_q3_s") / base;
    return 100 * num(x, "diff_median_s") / base;
}

static json_t *scheme_chart(const json_t *done, const json_t *paired) {
    json_t *series = json_array();
    for (int s = 1; s < NSCHEMES; s++) {
        json_t *pts = json_array(), *lo = json_array(), *hi = json_array();
        for (int i = 0; i < 3; i++) {
            double l, h;
            int ok;
            double v = overhead(done, paired, schemes[s], axis_B[i], &l, &h, &ok);
            if (!ok) continue;
            json_array_append_new(pts, json_pack("[I, f]", (json_int_t)axis_B[i], v));
            json_array_append_new(lo, json_real(l));
            json_array_append_new(hi, json_real(h));
        }
        json_array_append_new(series, json_pack("{s:s, s:o, s:o, s:o}", "label", schemes[s],
                                                "points", pts, "lo", lo, "hi", hi));
    }
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:s}", "id", "scheme-overhead", "kind",
                     "lines", "title",
                     "Each loss scheme's training-step overhead over decay, against block size B "
                     "(DFLARE)",
                     "unit", "%", "x_label", "block size B", "y_label", "overhead over decay",
                     "series", series, "note",
                     "the loss with the scheme minus the loss with decay, timed side by side in "
                     "alternating rounds (median of the per-round differences), over the decay "
                     "step's sum of ops; the bars span the differences' quartiles");
}

static void fmt_t(double s, char *buf, size_t n) {
    if (!(s > 0))
        snprintf(buf, n, "-");
    else if (s < 1e-3)
        snprintf(buf, n, "%.1f us", s * 1e6);
    else if (s < 1)
        snprintf(buf, n, "%.2f ms", s * 1e3);
    else
        snprintf(buf, n, "%.2f s", s);
}

/* The papers the claims are quoted from, by title and section (the technical summaries the
 * project was given: DESIGN.md, "Checking against work nobody here wrote"). */
#define SOURCE_DFLARE                                                                              \
    "DFLARE: scaling the draft capacity of block-diffusion speculative decoding (technical "       \
    "summary)"
#define SOURCE_DPACE "D-PACE: Dynamic Position-Aware Cross-Entropy (technical summary)"

/* v with `decimals` decimals, with its sign when `plus`; a value that rounds to zero reads
 * 0.00, never -0.00. Returns buf. */
static const char *fixed(double v, int decimals, int plus, char *buf, size_t n) {
    snprintf(buf, n, plus ? "%+.*f" : "%.*f", decimals, v);
    if (strtod(buf, NULL) == 0) snprintf(buf, n, "%.*f", decimals, 0.0);
    return buf;
}

static json_t *claim(const char *id, const char *text, const char *source, const char *answer,
                     const char *verdict, json_t *figures, const char *command, json_t *evidence) {
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:o}", "id", id, "claim", text, "source",
                     source, "answer", answer, "verdict", verdict, "figures", figures, "command",
                     command, "evidence", evidence);
}

static json_t *claim_fusion(const json_t *done, const char *model) {
    const json_t *fl = step_at(done, "dflare", "decode", 0, 0, 0, "decay");
    const json_t *fh = step_at(done, "dflash", "decode", 0, 0, 0, "decay");
    if (!fl || !fh) return NULL;
    double tl = op_s(fl, "fusion"), th = op_s(fh, "fusion");
    double sl = tl / num(fl, "whole.sum_alone_s"), sh = th / num(fh, "whole.sum_alone_s");
    const json_t *trl = step_at(done, "dflare", "train", 0, 0, 0, "decay");
    const json_t *trh = step_at(done, "dflash", "train", 0, 0, 0, "decay");
    double ttl = trl ? op_s(trl, "fusion") / num(trl, "whole.sum_alone_s") : NAN;
    double tth = trh ? op_s(trh, "fusion") / num(trh, "whole.sum_alone_s") : NAN;
    char a[32], b[32], ans[512], p[4][32];
    fmt_t(tl, a, sizeof a);
    fmt_t(th, b, sizeof b);
    /* No added latency: DFLARE's fusion costs no more than DFlash's, or under 1% of its step. */
    const char *verdict = tl <= th || sl < 0.01 ? "holds" : "does not hold";
    snprintf(ans, sizeof ans,
             "fusion.dflare (%s) costs %s%% of the DFLARE inference step against fusion.dflash's "
             "(%s) %s%% of the DFlash step; in training %s%% against %s%%. DFLARE's fusion is "
             "%.2fx DFlash's time here.",
             a, fixed(100 * sl, 2, 0, p[0], 32), b, fixed(100 * sh, 2, 0, p[1], 32),
             fixed(100 * ttl, 2, 0, p[2], 32), fixed(100 * tth, 2, 0, p[3], 32),
             th > 0 ? tl / th : 0.0);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "flaretune step %s.dflare.decode; flaretune step %s.dflash.decode",
             model, model);
    json_t *ev = json_array(); /* the verdict compares the inference steps */
    evidence_add(ev, done, "dflare", "decode", 0, 0, 0);
    evidence_add(ev, done, "dflash", "decode", 0, 0, 0);
    return claim("fusion-overhead",
                 "DFLARE's adaptive fusion adds negligible overhead (D x T scalars) and no "
                 "inference latency compared with DFlash's FC fusion, while attending to 9 target "
                 "layers instead of 5.",
                 SOURCE_DFLARE ", 2.1 Adaptive layer fusion", ans, verdict,
                 json_pack("{s:f, s:f, s:f, s:f}", "dflare_share", sl, "dflash_share", sh,
                           "dflare_fusion_s", tl, "dflash_fusion_s", th),
                 cmd, ev);
}

static json_t *claim_scaling(const json_t *done, const char *model) {
    double v[2][2][2]; /* phase, axis (D, T), {from, to} */
    static const char *const phases[] = {"decode", "train"};
    for (int ph = 0; ph < 2; ph++) {
        const json_t *d5 = step_at(done, "dflare", phases[ph], 5, 0, 0, "decay");
        const json_t *d7 = step_at(done, "dflare", phases[ph], 7, 0, 0, "decay");
        const json_t *t5 = step_at(done, "dflare", phases[ph], 0, 5, 0, "decay");
        const json_t *t9 = step_at(done, "dflare", phases[ph], 0, 9, 0, "decay");
        if (!d5 || !d7 || !t5 || !t9) return NULL;
        v[ph][0][0] = num(d5, "whole.stats.median_s");
        v[ph][0][1] = num(d7, "whole.stats.median_s");
        v[ph][1][0] = num(t5, "whole.stats.median_s");
        v[ph][1][1] = num(t9, "whole.stats.median_s");
    }
    char ans[640], p[5][32];
    snprintf(ans, sizeof ans,
             "Going from 5 to 7 draft layers costs %s%% per inference step (%s%% per added "
             "layer) and %s%% per training step; going from 5 to 9 target layers costs %s%% "
             "per inference step and %s%% per training step (DFLARE, whole steps, medians).",
             fixed(100 * (v[0][0][1] / v[0][0][0] - 1), 1, 1, p[0], 32),
             fixed(50 * (v[0][0][1] / v[0][0][0] - 1), 1, 1, p[1], 32),
             fixed(100 * (v[1][0][1] / v[1][0][0] - 1), 1, 1, p[2], 32),
             fixed(100 * (v[0][1][1] / v[0][1][0] - 1), 1, 1, p[3], 32),
             fixed(100 * (v[1][1][1] / v[1][1][0] - 1), 1, 1, p[4], 32));
    char cmd[200];
    snprintf(cmd, sizeof cmd,
             "flaretune step %s.dflare.decode --set D=5 (and D=7; --set T=5, T=9; .train)", model);
    json_t *ev = json_array();
    for (int ph = 0; ph < 2; ph++) {
        evidence_add(ev, done, "dflare", phases[ph], 5, 0, 0);
        evidence_add(ev, done, "dflare", phases[ph], 7, 0, 0);
        evidence_add(ev, done, "dflare", phases[ph], 0, 5, 0);
        evidence_add(ev, done, "dflare", phases[ph], 0, 9, 0);
    }
    return claim("depth-scaling",
                 "DFLARE scales the drafter from 5 to 7 draft layers and from 5 to 9 target "
                 "layers.",
                 SOURCE_DFLARE ", 3 Main contributions (draft depth scaling) and 4 Results "
                               "(scaling behaviour)",
                 ans, "measured",
                 json_pack("{s:f, s:f, s:f, s:f}", "decode_D5_s", v[0][0][0], "decode_D7_s",
                           v[0][0][1], "train_D5_s", v[1][0][0], "train_D7_s", v[1][0][1]),
                 cmd, ev);
}

static json_t *claim_dpace(const json_t *done, const json_t *paired, const char *model) {
    double lo, hi;
    int ok;
    double z = overhead(done, paired, "dpace", 16, &lo, &hi, &ok);
    if (!ok) return NULL;
    double lo8, hi8, z8 = overhead(done, paired, "dpace", 8, &lo8, &hi8, &ok);
    if (!ok) return NULL;
    double lo12, hi12, z12 = overhead(done, paired, "dpace", 12, &lo12, &hi12, &ok);
    if (!ok) return NULL;
    /* Holds when the measurement allows 2.3% or less: the differences' lower quartile is at or
     * under it. Its losses are timed side by side in rounds whose samples are not judged (a
     * busy machine spreads them), so a spread of the quartiles wider than the 2.3% it decides
     * allows anything, and decides nothing: inconclusive, said why. */
    const int spread = hi - lo > 2.3;
    const char *verdict = spread ? "inconclusive" : lo <= 2.3 ? "holds" : "does not hold";
    char ans[640], p[5][32];
    snprintf(ans, sizeof ans,
             "D-PACE adds %s%% to the training step at B=16 (quartile range %s%% to %s%%), "
             "%s%% at B=12 and %s%% at B=8, over the fixed decay schedule (DFLARE; the loss's "
             "weights are the only difference, both losses timed side by side). Its accuracy gains "
             "against B need trained models "
             "and are not measured here; their cost is.",
             fixed(z, 2, 0, p[0], 32), fixed(lo, 2, 0, p[1], 32), fixed(hi, 2, 0, p[2], 32),
             fixed(z12, 2, 0, p[3], 32), fixed(z8, 2, 0, p[4], 32));
    char cmd[200];
    snprintf(cmd, sizeof cmd,
             "flaretune step %s.dflare.train --set B=16 --scheme dpace (and --scheme decay)",
             model);
    /* The decay steps give the base of every overhead; the losses side by side are timed in
     * rounds of their own, whose samples are not judged. */
    json_t *ev = json_array();
    for (int i = 0; i < 3; i++)
        evidence_add(ev, done, "dflare", "train", 0, 0, axis_B[i]);
    json_t *c = claim("dpace-overhead",
                      "D-PACE adds about 2.3% training time over the fixed decay schedule, and its "
                      "gains grow with the block size (B = 8, 12, 16).",
                      SOURCE_DPACE ", Contributions 3 (efficiency: +2.3% training time) and "
                                   "Results (block size ablation)",
                      ans, verdict,
                      json_pack("{s:f, s:f, s:f, s:f, s:f}", "overhead_B16_pct", z, "low_pct", lo,
                                "high_pct", hi, "overhead_B12_pct", z12, "overhead_B8_pct", z8),
                      cmd, ev);
    if (spread && c) {
        char why[160];
        snprintf(why, sizeof why,
                 "the side-by-side losses' quartiles span %.1f points at B=16, more than the 2.3%% "
                 "the claim is about",
                 hi - lo);
        json_object_set_new(c, "withheld", json_string(why));
    }
    return c;
}

/* "yes", "no: 37% of samples discarded", or "no: the machine was busy (others used 0.93 of 2
 * CPUs)" (its medians are upper bounds either way). */
static void step_clean(const json_t *st, char *buf, size_t n) {
    ft_report_busy b = {0};
    ft_report_step_busy(st, &b);
    char pct[16];
    if (b.unclean_steps)
        snprintf(buf, n, "no: %s of samples discarded",
                 ft_report_share_text(b.discarded, b.taken, pct, sizeof pct));
    else if (b.loaded_steps)
        snprintf(buf, n, "no: the machine was busy (others used %.2f of %lld CPUs)",
                 num(st, "load.other_cpus"), (long long)num(st, "load.cpus"));
    else
        snprintf(buf, n, "yes");
}

static json_t *steps_table(const json_t *done) {
    json_t *rows = json_array();
    const char *key;
    json_t *st;
    json_t *seen = json_array();
    json_object_foreach((json_t *)done, key, st) {
        int dup = 0;
        for (size_t k = 0; k < json_array_size(seen) && !dup; k++)
            dup = json_equal(json_array_get(seen, k), st);
        if (dup) continue;
        json_array_append(seen, st);
        char m[32], iqr[32], sum[32];
        fmt_t(num(st, "whole.stats.median_s"), m, sizeof m);
        fmt_t(num(st, "whole.stats.q3_s") - num(st, "whole.stats.q1_s"), iqr, sizeof iqr);
        fmt_t(num(st, "whole.sum_alone_s"), sum, sizeof sum);
        char clean[80];
        step_clean(st, clean, sizeof clean);
        json_array_append_new(
            rows,
            json_pack("[s, s, I, I, I, s, s, s, s, f, I, s]",
                      arch_label(json_string_value(json_object_get(st, "arch"))),
                      json_string_value(json_object_get(st, "phase")),
                      (json_int_t)num(st, "sizes.D"), (json_int_t)num(st, "sizes.T"),
                      (json_int_t)num(st, "sizes.B"),
                      json_string_value(json_object_get(st, "loss_scheme")), m, iqr, sum,
                      num(st, "whole.ratio"), (json_int_t)num(st, "whole.stats.samples"), clean));
    }
    json_decref(seen);
    return json_pack("{s:s, s:s, s:[s,s,s,s,s,s,s,s,s,s,s,s], s:o}", "id", "steps", "title",
                     "Every step measured (whole step end to end; sum of its ops timed alone)",
                     "columns", "drafter", "phase", "D", "T", "B", "loss", "step median", "IQR",
                     "sum of ops", "step / sum", "samples", "measured cleanly", "rows", rows);
}

static json_t *build_doc(const json_t *done, const json_t *paired, const ft_report_sweep_opts *o,
                         const char *device, const char *clock, json_t *machine) {
    json_t *claims = json_array(), *c;
    if ((c = claim_fusion(done, o->model))) json_array_append_new(claims, c);
    if ((c = claim_scaling(done, o->model))) json_array_append_new(claims, c);
    if ((c = claim_dpace(done, paired, o->model))) json_array_append_new(claims, c);
    json_t *charts = json_pack("[o, o, o, o, o, o, o]", stacked(done, "decode"),
                               stacked(done, "train"), axis_chart(done, 'D', "decode"),
                               axis_chart(done, 'D', "train"), axis_chart(done, 'T', "decode"),
                               axis_chart(done, 'T', "train"), scheme_chart(done, paired));
    json_t *steps = json_array();
    const char *key;
    json_t *st;
    ft_report_busy busy = {0};
    json_object_foreach((json_t *)done, key, st) {
        int dup = 0;
        for (size_t k = 0; k < json_array_size(steps) && !dup; k++)
            dup = json_equal(json_array_get(steps, k), st);
        if (!dup) json_array_append(steps, st);
        if (!dup) ft_report_step_busy(st, &busy);
    }
    char date[32], title[128];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(title, sizeof title, "Drafter steps on this machine (%s presets)", o->model);
    json_t *doc =
        json_pack("{s:s, s:s, s:s, s:s, s:[s], s:s, s:s, s:s, s:o, s:o, s:o, s:[o], s:o, s:o}",
                  "format", FT_REPORT_FORMAT, "title", title, "date", date, "command",
                  o->command ? o->command : "flaretune report", "models", o->model, "backend",
                  o->backend_name ? o->backend_name : "", "device", device, "clock", clock,
                  "machine", machine, "claims", claims, "charts", charts, "tables",
                  steps_table(done), "steps", steps, "contention", ft_report_busy_to_json(&busy));
    if (doc) ft_report_judge(doc); /* no verdict on steps not measured cleanly */
    return doc;
}

/* ---- the losses side by side ------------------------------------------------------------------
 */

#define PAIRED_ROUNDS 21

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Quartile q (0.25, 0.5, 0.75) of n sorted values, linearly interpolated. */
static double quart(const double *v, int n, double q) {
    double pos = q * (n - 1);
    int i = (int)pos;
    return i + 1 < n ? v[i] + (pos - i) * (v[i + 1] - v[i]) : v[n - 1];
}

/* Every scheme's loss at DFLARE training with block size B, on the same inputs and config,
 * timed in PAIRED_ROUNDS rounds that each time every scheme once (in an order that rotates), so
 * that a scheme's overhead is the median of differences taken moments apart. */
static ft_status paired_losses(const ft_report_sweep_opts *o, const ft_backend *be,
                               const char *device, int64_t B, json_t **out, ft_err *err) {
    point pt = {.B = B};
    snprintf(pt.arch, sizeof pt.arch, "dflare");
    snprintf(pt.phase, sizeof pt.phase, "train");
    ft_preset p;
    ft_status s = point_preset(&pt, o->model, &p, err);
    if (s) return s;
    const ft_op *op = ft_op_find("loss", err);
    ft_call c[NSCHEMES];
    ft_config cfg[NSCHEMES];
    ft_workspace ws = {0};
    double t[NSCHEMES][PAIRED_ROUNDS];
    memset(c, 0, sizeof c);
    for (int k = 0; k < NSCHEMES && !s; k++) {
        ft_call_init(&c[k], op);
        if ((s = ft_attrs_set(&c[k].attrs, op, "scheme", schemes[k], err)) ||
            (s = ft_call_from_preset(&c[k], &p, 1, err)))
            break;
        c[k].ws = &ws;
        const ft_space *sp = be->space(op);
        ft_config_default(sp, &cfg[k]);
        const ft_profile_entry *e =
            o->profile ? ft_profile_lookup_call(o->profile, &c[k], be->name, device, NULL) : NULL;
        ft_config pc;
        if (e && ft_profile_config(sp, e->config, &pc, NULL, 0, NULL) == FT_OK &&
            ft_space_runnable(sp, &c[k], &pc, NULL, 0))
            cfg[k] = pc;
    }
    /* Warm every call, and size the repetitions so one timing of the slowest scheme lasts about
     * time_s / 4 (sized on the last one's first call, a busy machine's rounds ran 30 times as
     * long). A round that still runs past four times its share (the machine got busier) halves
     * them for the rounds after it: each round times every scheme with the same count. */
    int reps = 1;
    double one = 0;
    const double want = (o->time_s > 0 ? o->time_s : 0.25) / 4;
    for (int k = 0; k < NSCHEMES && !s; k++) {
        double secs = 0;
        s = ft_backend_time(be, &c[k], &cfg[k], 1, &secs, err);
        if (!s) s = ft_backend_time(be, &c[k], &cfg[k], 2, &secs, err);
        if (!s && secs / 2 > one) one = secs / 2;
    }
    if (!s) reps = one > 0 && one < want ? (int)(want / one) + 1 : 1;
    for (int r = 0; r < PAIRED_ROUNDS && !s; r++) {
        const double t0 = ft_now_s();
        for (int j = 0; j < NSCHEMES && !s; j++) {
            if (o->stop && *o->stop) {
                s = ft_err_set(err, FT_EIO, "interrupted");
                break;
            }
            int k = (j + r) % NSCHEMES;
            double secs = 0;
            s = ft_backend_time(be, &c[k], &cfg[k], reps, &secs, err);
            t[k][r] = secs / reps;
        }
        if (ft_now_s() - t0 > 4 * NSCHEMES * want && reps > 1) reps /= 2;
    }
    if (!s) {
        json_t *sch = json_object();
        for (int k = 0; k < NSCHEMES; k++) {
            double d[PAIRED_ROUNDS], m[PAIRED_ROUNDS];
            for (int r = 0; r < PAIRED_ROUNDS; r++) {
                d[r] = t[k][r] - t[0][r];
                m[r] = t[k][r];
            }
            qsort(d, PAIRED_ROUNDS, sizeof d[0], cmp_d);
            qsort(m, PAIRED_ROUNDS, sizeof m[0], cmp_d);
            json_object_set_new(sch, schemes[k],
                                json_pack("{s:f, s:f, s:f, s:f}", "median_s",
                                          quart(m, PAIRED_ROUNDS, 0.5), "diff_median_s",
                                          quart(d, PAIRED_ROUNDS, 0.5), "diff_q1_s",
                                          quart(d, PAIRED_ROUNDS, 0.25), "diff_q3_s",
                                          quart(d, PAIRED_ROUNDS, 0.75)));
        }
        char dims[160];
        ft_call_dims_str(&c[0], dims, sizeof dims);
        *out = json_pack("{s:I, s:s, s:i, s:i, s:o}", "B", (json_int_t)B, "dims", dims, "rounds",
                         PAIRED_ROUNDS, "reps", reps, "schemes", sch);
    }
    for (int k = 0; k < NSCHEMES; k++) /* zeroed or made: either frees */
        ft_call_free(&c[k]);
    ft_ws_free(&ws);
    return s;
}
/* Path p (a buffer) without its trailing slashes; then, by up(), its parent folder in place
 * (0 when it has none to go up to: a bare name or a folder of the root). */
static void trim_slashes(char *p) {
    size_t len = strlen(p);
    while (len > 1 && p[len - 1] == '/')
        p[--len] = '\0';
}
static int up(char *p) {
    char *slash = strrchr(p, '/');
    if (!slash || slash == p) return 0;
    *slash = '\0';
    trim_slashes(p);
    return 1;
}

/* Into top (n bytes), the highest folder of path dir that does not exist ("" when dir does). */
static void missing_top(const char *dir, char *top, size_t n) {
    top[0] = '\0';
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return;
    trim_slashes(p);
    do {
        if (!p[0] || access(p, F_OK) == 0) return;
        snprintf(top, n, "%s", p);
    } while (up(p));
}

/* Remove dir and its parents up to top, each only if empty (what this sweep made). */
static void unmake(const char *dir, const char *top) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return;
    trim_slashes(p);
    do {
        if (rmdir(p) != 0 || !strcmp(p, top)) return;
    } while (up(p));
}

/* Whether a file can be made in dir: a temporary one, made and removed. */
static ft_status check_writable_dir(const char *dir, ft_err *err) {
    char probe[4200], tmp[4300];
    snprintf(probe, sizeof probe, "%s/report.html", dir);
    FILE *f = ft_file_create_tmp(probe, tmp, sizeof tmp, err);
    if (!f) return err->status ? err->status : FT_EIO;
    fclose(f);
    unlink(tmp);
    return FT_OK;
}

/* ---- the sweep ---------------------------------------------------------------------------------
 */

ft_status ft_report_sweep(ft_report_sweep_opts *o, json_t **out, ft_err *err) {
    *out = NULL;
    point pts[MAX_POINTS];
    int n = make_points(pts);
    /* Every preset first: a bad model is one line before anything runs. */
    for (int i = 0; i < n; i++) {
        ft_preset p;
        ft_status s = point_preset(&pts[i], o->model, &p, err);
        if (s) return s;
    }
    const ft_backend *be;
    ft_status s = ft_backend_resolve(o->backend ? o->backend : "auto", NULL, &be, err);
    if (s) return s;
    o->backend_name = be->name;
    ft_env env;
    ft_env_probe(&env);
    char device[256];
    ft_backend_device(be, &env, device, sizeof device);
    /* The folders made here (DIR and any missing parent) are taken away again when the sweep
     * is refused before its first step: made_top is the highest of them ("": none). */
    char made_top[4096] = "";
    if (o->dir) missing_top(o->dir, made_top, sizeof made_top);
    int made = made_top[0] != '\0';
    if (o->dir && (s = ft_dir_make(o->dir, err))) return s;
    /* DIR must take the report: found out now, not after the sweep. */
    if (o->dir && (s = check_writable_dir(o->dir, err))) {
        if (made) unmake(o->dir, made_top);
        return s;
    }
    json_t *ident = json_pack("{s:s, s:s, s:s, s:f}", "model", o->model, "backend", be->name,
                              "device", device, "time_s", o->time_s);
    /* The configs come from the profile: a resume with another one (or none) would mix them. */
    char prof_digest[17];
    if (o->profile)
        json_object_set_new(ident, "profile", json_string(profile_digest(o->profile, prof_digest)));
    int lock = ft_file_trylock(o->log, err);
    if (lock < 0) {
        json_decref(ident);
        if (made) unmake(o->dir, made_top);
        return err->status == FT_EBUSY
                   ? ft_err_set(err, FT_EBUSY, "%s is being written by another report", o->log)
                   : err->status;
    }
    json_t *done = json_object(), *paired = json_object();
    ft_eventlog *log = NULL;
    char run[32];
    snprintf(run, sizeof run, "report-%ld", (long)time(NULL));
    if (!(s = read_done(o->log, ident, done, paired, err)) &&
        !(s = ft_eventlog_open(o->log, run, &log, err)))
        s = ft_eventlog_write(log,
                              json_pack("{s:s, s:O, s:i, s:i}", "event", "report_start", "sweep",
                                        ident, "points", n, "done", (int)json_object_size(done)),
                              err);
    int resumed = (int)json_object_size(done);
    for (int i = 0; i < n && !s; i++) {
        if (json_object_get(done, pts[i].key)) continue;
        if (o->stop && *o->stop) {
            s = ft_err_set(err, FT_EIO,
                           "interrupted after %d of %d steps (%s keeps them: run "
                           "the same command again to resume)",
                           (int)json_object_size(done), n, o->log);
            break;
        }
        if (o->progress) o->progress(o->progress_ctx, pts[i].key, (int)json_object_size(done), n);
        ft_preset p;
        point_preset(&pts[i], o->model, &p, err);
        /* A point whose sizes and scheme are another's (D 5 is DFlash's own depth) is that
         * step: one measurement, so the charts that share it agree. */
        json_t *twin = NULL;
        for (int j = 0; j < i && !twin; j++) {
            ft_preset q;
            json_t *dj = json_object_get(done, pts[j].key);
            if (dj && !strcmp(pts[i].scheme, pts[j].scheme) &&
                point_preset(&pts[j], o->model, &q, NULL) == FT_OK && same_sizes(&p, &q))
                twin = dj;
        }
        if (twin) {
            json_object_set(done, pts[i].key, twin);
            s = ft_eventlog_write(log,
                                  json_pack("{s:s, s:s, s:O}", "event", "report_step", "key",
                                            pts[i].key, "step", twin),
                                  err);
            continue;
        }
        ft_step_opts so;
        ft_step_opts_default(&so);
        so.backend = be->name;
        so.profile = o->profile;
        so.scheme = pts[i].scheme;
        so.stop = o->stop;
        ft_step_measure_time(o->time_s, &so.measure);
        ft_step step;
        if (!(s = ft_step_build(&step, &p, &so, err)) && !(s = ft_step_measure(&step, &so, err))) {
            json_t *doc = ft_step_to_json(&step);
            if (!doc) {
                s = ft_err_set(err, FT_ENOMEM, "out of memory");
            } else {
                json_object_set(done, pts[i].key, doc);
                s = ft_eventlog_write(log,
                                      json_pack("{s:s, s:s, s:o}", "event", "report_step", "key",
                                                pts[i].key, "step", doc),
                                      err);
            }
        }
        ft_step_free(&step);
        if (s && o->stop && *o->stop)
            s = ft_err_set(err, FT_EIO,
                           "interrupted after %d of %d steps (%s keeps them: run the "
                           "same command again to resume)",
                           (int)json_object_size(done), n, o->log);
    }
    for (int i = 0; i < 3 && !s; i++) {
        char key[32];
        snprintf(key, sizeof key, "B%lld", (long long)axis_B[i]);
        if (json_object_get(paired, key)) continue;
        if (o->progress) {
            char what[64];
            snprintf(what, sizeof what, "the losses side by side at B=%lld", (long long)axis_B[i]);
            o->progress(o->progress_ctx, what, n, n);
        }
        json_t *pd = NULL;
        if (!(s = paired_losses(o, be, device, axis_B[i], &pd, err))) {
            json_object_set(paired, key, pd);
            s = ft_eventlog_write(
                log,
                json_pack("{s:s, s:s, s:o}", "event", "report_paired", "key", key, "paired", pd),
                err);
        }
        if (s && o->stop && *o->stop)
            s = ft_err_set(err, FT_EIO,
                           "interrupted after %d of %d steps (%s keeps them: run the "
                           "same command again to resume)",
                           (int)json_object_size(done), n, o->log);
    }
    if (!s) {
        ft_ceilings ceil;
        json_t *machine = ft_env_to_json(&env);
        if (machine && ft_ceilings_of(be, env.usable_cpus, &ceil, NULL) == FT_OK)
            json_object_set_new(machine, "ceilings", ft_ceilings_to_json(&ceil));
        if (machine) json_object_set_new(machine, "resumed_steps", json_integer(resumed));
        *out = build_doc(done, paired, o, device, ft_backend_clock(be),
                         machine ? machine : json_object());
        if (!*out)
            s = ft_err_set(err, FT_ENOMEM, "out of memory building the report");
        else if ((s = ft_report_check(*out, err))) {
            json_decref(*out);
            *out = NULL;
        }
    }
    if (log) ft_eventlog_close(log);
    ft_file_unlock(lock);
    /* Refused before a step was taken (another sweep's log, ...): the folders made go. */
    if (s && made && !log) unmake(o->dir, made_top);
    json_decref(done);
    json_decref(paired);
    json_decref(ident);
    return s;
}
