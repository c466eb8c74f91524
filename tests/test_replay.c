/* test_replay.c: what a replay measures besides evaluations (tuner/replay.c): each candidate's
 * recorded cost and ci_rel, the optimum the run confirmed, the wall time to the target, batches,
 * warm starts from another landscape, and the landscape's JSON export. The logs are written
 * here by hand, so every time in them is known exactly (multiples of 1/8 s: sums are exact).
 * (Loading logs, resumed runs and predicted times: tests/test_strategy.c.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "op/backend.h"
#include "core/json.h"
#include "op/op_json.h"
#include "tuner/replay.h"
#include "tuner/strategies/strategy.h"
#include "ft_problem.h"
#include "ft_test.h"

static int make_problem(problem *p, const char *opname, const char *preset) {
    return make_problem_min(p, opname, preset, 8);
}

/* What candidate i scored, cost and how noisy it was, in the hand-made logs. */
static double score_of(int i) { return 1e-3 * (1.0 + ((i * 37) % 101) / 50.0); }
static double cost_of(int i) { return (1 + i % 7) / 8.0; }
static double ci_of(int i) { return (1 + i % 5) / 64.0; }

/* How one run of a hand-made log goes. */
typedef struct {
    const char *run, *key;
    int from, to;          /* candidates measured, in space order */
    int reject;            /* this one rejected instead (-1: none) */
    int timed;             /* events carry `started` (candidate i's at 100 i s) and `t` */
    const int *conf;       /* the confirm event's candidates (nconf 0: no confirm event) */
    const double *confmed; /* ... and their confirmed medians */
    int nconf;
    double (*score)(int i); /* NULL: score_of */
} run_spec;

static void write_run(FILE *f, const problem *p, const run_spec *r) {
    json_t *start = problem_run_start(p, r->key);
    json_object_set_new(start, "t", json_real(0.0));
    json_object_set_new(start, "run", json_string(r->run));
    put_event(f, start);
    for (int i = r->from; i < r->to; i++) {
        json_t *cfg = ft_config_to_json(&p->space, &p->cands[i]), *ev;
        if (i == r->reject)
            ev = json_pack("{s:s, s:o, s:i, s:s, s:s}", "event", "rejected", "config", cfg,
                           "candidate", i, "reason", "verify", "message", "mismatch");
        else
            ev = json_pack("{s:s, s:o, s:i, s:{s:f, s:f, s:i}}", "event", "measured", "config", cfg,
                           "candidate", i, "stats", "median_s",
                           r->score ? r->score(i) : score_of(i), "ci_rel", ci_of(i), "samples", 10);
        if (r->timed) {
            json_object_set_new(ev, "started", json_real(100.0 * i));
            json_object_set_new(ev, "t", json_real(100.0 * i + cost_of(i)));
        }
        json_object_set_new(ev, "run", json_string(r->run));
        put_event(f, ev);
    }
    if (r->nconf) {
        json_t *cfgs = json_array(), *stats = json_array();
        for (int j = 0; j < r->nconf; j++) {
            json_array_append_new(cfgs, ft_config_to_json(&p->space, &p->cands[r->conf[j]]));
            json_array_append_new(stats, json_pack("{s:f, s:f, s:i}", "median_s", r->confmed[j],
                                                   "ci_rel", 0.01, "samples", 30 + j));
        }
        put_event(f, json_pack("{s:s, s:o, s:o, s:f, s:f, s:s}", "event", "confirm", "configs", cfgs,
                         "stats", stats, "started", 1e6, "t", 1e6 + 1, "run", r->run));
    }
    put_event(f, json_pack("{s:s, s:f, s:s}", "event", "run_end", "t", 1e6 + 2, "run", r->run));
}

static void temp_path(char *buf, size_t n) { temp_file(buf, n, "replay", ""); }

/* The candidate with the lowest score_of, and one that is neither it nor `not`. */
static int best_of(const problem *p, int reject) {
    int b = -1;
    for (int i = 0; i < p->n; i++)
        if (i != reject && (b < 0 || score_of(i) < score_of(b))) b = i;
    return b;
}

/* The hand-made log of test_load_costs: two runs of one chain (the second resumes the first),
 * candidate 3 rejected; the first run's confirm event names `early` at an absurdly fast median
 * (the chain's last confirm event wins, so it is ignored), the second's confirms the search's
 * optimum b0 at twice its median, c2 at 0.9 of b0's (the optimum now) and the default. */
typedef struct {
    int b0, c2, def, early;
} confirm_plan;

static void write_chain(const char *path, const problem *p, confirm_plan *cp) {
    ft_config def;
    ft_config_default(&p->space, &def);
    cp->def = -1;
    for (int i = 0; i < p->n; i++)
        if (ft_config_equal(&p->cands[i], &def)) cp->def = i;
    cp->b0 = best_of(p, 3);
    cp->c2 = cp->b0 == 5 || cp->def == 5 ? 6 : 5;
    cp->early = cp->c2 == 1 || cp->b0 == 1 ? 2 : 1;
    int conf[3] = {cp->b0, cp->c2, cp->def}, early[1] = {cp->early};
    double med[3] = {2 * score_of(cp->b0), 0.9 * score_of(cp->b0), score_of(cp->def)};
    double emed[1] = {1e-9};
    FILE *f = fopen(path, "w");
    run_spec r1 = {"r1", "k1", 0, p->n / 2, 3, 1, early, emed, 1, NULL};
    run_spec r2 = {"r2", "k1", p->n / 2, p->n, 3, 1, conf, med, cp->def >= 0 ? 3 : 2, NULL};
    write_run(f, p, &r1);
    write_run(f, p, &r2);
    fclose(f);
}

static double sum_costs(int n) {
    double t = 0;
    for (int i = 0; i < n; i++)
        t += cost_of(i);
    return t;
}

/* The chain of write_chain for kvproj at small.dflare.train, loaded into l (path: its log, kept
 * for the caller). 0 when it could not be made or loaded (a failed check says why). */
static int load_chain(problem *p, ft_landscape *l, confirm_plan *cp, char *path, size_t n) {
    ft_err err = {0};
    if (!make_problem(p, "attention.kvproj", "small.dflare.train")) return 0;
    temp_path(path, n);
    write_chain(path, p, cp);
    FT_CHECK(ft_landscape_load(path, l, &err) == FT_OK, "%s", err.msg);
    return err.status == FT_OK;
}

/* Costs, ci_rel and noise read; the optimum replaced by the confirmed median; the exhaustive
 * replay's time to the target exactly the sum of the costs in space order. */
static void test_load_costs(void) {
    problem p;
    char path[512];
    ft_err err = {0};
    ft_landscape l;
    confirm_plan cp;
    if (!load_chain(&p, &l, &cp, path, sizeof path)) return;
    FT_CHECK(l.ncands == p.n && l.nruns == 2 && l.nrejected == 1, "%d candidates, %d runs",
             l.ncands, l.nruns);
    int costs = 1, cis = 1;
    double ci[512];
    int nci = 0;
    for (int i = 0; i < l.ncands; i++) {
        costs &= l.cost[i] == cost_of(i);
        cis &= i == 3 ? isnan(l.ci_rel[i]) : l.ci_rel[i] == ci_of(i);
        if (i != 3) ci[nci++] = ci_of(i);
    }
    FT_CHECK(costs && l.ncost == p.n, "every candidate's cost read (%d)", l.ncost);
    FT_CHECK(cis, "every measured candidate's ci_rel read, none for the rejected one");
    for (int i = 1; i < nci; i++) /* insertion sort: the median by hand */
        for (int j = i; j > 0 && ci[j] < ci[j - 1]; j--) {
            double t = ci[j];
            ci[j] = ci[j - 1];
            ci[j - 1] = t;
        }
    FT_CHECK(l.noise_ci_rel == 0.5 * (ci[(nci - 1) / 2] + ci[nci / 2]), "noise %g", l.noise_ci_rel);
    /* The confirmation: b0 re-measured at 2x its search median, c2 at 0.9 of b0's (under half
     * of its own): the round's footing differs between its configs far more than the gap it
     * decides, so it is refused and every candidate keeps its search median (the old rule
     * scaled both by the median ratio and made c2 the optimum). */
    FT_CHECK(l.confirm_refused[0] && strstr(l.confirm_refused, "spread"), "refused: '%s'",
             l.confirm_refused);
    FT_CHECK(l.score[cp.c2] == score_of(cp.c2) && l.score[cp.b0] == score_of(cp.b0) &&
                 l.best == cp.b0 && l.nconfirmed == 0 && l.confirm_samples[cp.c2] == 0,
             "the search's medians stand: optimum %d (%g), %d confirmed", l.best, l.score[l.best],
             l.nconfirmed);
    FT_CHECK(isfinite(l.confirm_ratio) && l.confirm_ratio > 0, "the round's ratio still told: %g",
             l.confirm_ratio);
    FT_CHECK(l.score[cp.early] == score_of(cp.early), "an earlier confirm event is ignored: %g",
             l.score[cp.early]);
    json_t *exp = ft_landscape_to_json(&l, path);
    FT_CHECK(json_is_string(json_object_get(exp, "confirm_refused")), "the export says why");
    json_decref(exp);
    /* Exhaustive search in space order: the wall time to the target is every cost before it. */
    for (int k = 0; k < 3; k++) {
        double target = (double[]){0.0, 0.05, 0.5}[k];
        int first = ft_landscape_first_within(&l, target);
        ft_replay_opts o;
        ft_replay_result r;
        ft_replay_opts_default(&o);
        o.target = target;
        FT_CHECK(ft_replay_run(&l, &o, &r, &err) == FT_OK, "%s", err.msg);
        FT_CHECK(r.to_target == first && r.evaluations == first && r.rounds == first,
                 "target %g: at %d of %d in %d rounds, want %d", target, r.to_target, r.evaluations,
                 r.rounds, first);
        FT_CHECK(r.time_to_target == sum_costs(first) &&
                     ft_landscape_cost_through(&l, first) == sum_costs(first),
                 "target %g: %.17g s, want %.17g", target, r.time_to_target, sum_costs(first));
    }
    FT_CHECK(ft_landscape_cost_through(&l, 1 << 20) == sum_costs(p.n), "all of them");
    ft_landscape_free(&l);

    /* Without `started`: no cost, no time; the search's medians without a confirm event. */
    FILE *f = fopen(path, "w");
    run_spec r = {"r3", "k3", 0, p.n, -1, 0, NULL, NULL, 0, NULL};
    write_run(f, &p, &r);
    fclose(f);
    FT_CHECK(ft_landscape_load(path, &l, &err) == FT_OK, "%s", err.msg);
    if (err.status) return;
    FT_CHECK(l.ncost == 0 && isnan(l.cost[0]) && l.nconfirmed == 0 && l.best == best_of(&p, -1),
             "%d costs, %d confirmed, optimum %d", l.ncost, l.nconfirmed, l.best);
    ft_replay_opts o;
    ft_replay_result res;
    ft_replay_opts_default(&o);
    FT_CHECK(ft_replay_run(&l, &o, &res, &err) == FT_OK && res.to_target >= 1 &&
                 isnan(res.time_to_target) && isnan(ft_landscape_cost_through(&l, 1)),
             "no cost: time %g", res.time_to_target);
    ft_landscape_free(&l);

    /* A confirm event that is not two arrays of one length is a clear error. */
    f = fopen(path, "w");
    write_run(f, &p, &r);
    fputs("{\"event\":\"confirm\",\"configs\":[],\"stats\":[{}],\"run\":\"r3\"}\n", f);
    fclose(f);
    FT_CHECK(ft_landscape_load(path, &l, &err) == FT_EFORMAT && strstr(err.msg, "confirm"),
             "a broken confirm event: %s", err.msg);
    unlink(path);
}

/* A log of one run over p's candidates confirming conf[0..n) at med[0..n), loaded into l. */
static int load_confirmed(const problem *p, const int *conf, const double *med, int n,
                          ft_landscape *l) {
    char path[512];
    ft_err err = {0};
    temp_path(path, sizeof path);
    FILE *f = fopen(path, "w");
    run_spec r = {"r9", "k9", 0, p->n, -1, 1, conf, med, n, NULL};
    write_run(f, p, &r);
    fclose(f);
    ft_status s = ft_landscape_load(path, l, &err);
    FT_CHECK(s == FT_OK, "%s", err.msg);
    unlink(path);
    return s == FT_OK;
}

/* A confirmation round is applied when it is consistent, refused when the old rule would have
 * put the optimum outside what the search measured. */
static void test_confirm_refused(void) {
    problem p;
    ft_landscape l;
    if (!make_problem(&p, "attention.kvproj", "small.dflare.train")) return;
    int b0 = best_of(&p, -1), c2 = b0 == 5 ? 6 : 5;
    /* Consistent: both re-measured about 1.2x slower (the interleaved round's footing); the
     * round keeps the ranking, its medians are scaled back by the median ratio. */
    int conf[3] = {b0, c2, -1};
    double med[3] = {1.20 * score_of(b0), 1.21 * score_of(c2), 0};
    if (!load_confirmed(&p, conf, med, 2, &l)) return;
    double f = 0.5 * (1 / 1.20 + 1 / 1.21);
    FT_CHECK(l.confirm_refused[0] == '\0', "a consistent round applied: '%s'", l.confirm_refused);
    FT_CHECK(l.nconfirmed == 2 && fabs(l.score[b0] - 1.20 * score_of(b0) * f) < 1e-15 &&
                 fabs(l.score[c2] - 1.21 * score_of(c2) * f) < 1e-15 && l.best == b0,
             "scaled: %g %g, %d confirmed", l.score[b0], l.score[c2], l.nconfirmed);
    ft_landscape_free(&l);
    /* The old rule's flattering case: two configs re-measured at their search medians, a third
     * at a fifth of the best's. The median ratio is 1, so it scored 0.2 x the search's optimum:
     * 5x faster than anything the search measured. Refused now: the search's optimum stands. */
    int x = c2 == 6 ? 7 : 6;
    int conf3[3] = {b0, x, c2};
    double med3[3] = {score_of(b0), score_of(x), 0.2 * score_of(b0)};
    if (!load_confirmed(&p, conf3, med3, 3, &l)) return;
    FT_CHECK(l.confirm_refused[0] != '\0' && l.best == b0 && l.score[b0] == score_of(b0) &&
                 l.score[c2] == score_of(c2) && l.nconfirmed == 0,
             "refused (%s): optimum %d at %g", l.confirm_refused, l.best, l.score[l.best]);
    ft_landscape_free(&l);
    /* One config named: its ratio is the round's, so it keeps its search median however fast
     * the round measured it. */
    int conf1[1] = {c2};
    double med1[1] = {score_of(c2) / 3};
    if (!load_confirmed(&p, conf1, med1, 1, &l)) return;
    FT_CHECK(l.confirm_refused[0] == '\0' && l.score[c2] == score_of(c2) && l.best == b0,
             "one config: its search median stays (%g)", l.score[c2]);
    ft_landscape_free(&l);
}

/* A landscape in memory over p's candidates: candidate `opt` the optimum, the rest slower the
 * later they come; cost_of each. */
static void make_landscape(ft_landscape *l, const problem *p, int opt, double *score,
                           double *cost) {
    memset(l, 0, sizeof *l);
    l->op = p->op;
    l->backend = p->be;
    l->space = p->space;
    l->cands = (ft_config *)p->cands;
    l->ncands = p->n;
    for (int i = 0; i < p->n; i++) {
        score[i] = i == opt ? 1e-3 : 2e-3 + 1e-5 * i;
        cost[i] = cost_of(i);
    }
    l->score = score;
    l->cost = cost;
    l->best = opt;
    l->def = -1;
}

/* Batches of k: every strategy proposes each candidate once (the replay checks it) and every
 * result is reported; the evaluation that reached the target is counted within its batch. */
static void test_batches(void) {
    problem p;
    if (!make_problem(&p, "attention.kvproj", "small.dflare.train")) return;
    double score[512], cost[512];
    ft_landscape l;
    ft_err err = {0};
    ft_replay_opts o;
    ft_replay_result r;
    /* Exhaustive, the optimum last: all of them, in ceil(n/4) batches. */
    make_landscape(&l, &p, p.n - 1, score, cost);
    ft_replay_opts_default(&o);
    o.batch = 4;
    o.target = 0;
    FT_CHECK(ft_replay_run(&l, &o, &r, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(r.to_target == p.n && r.evaluations == p.n && r.rounds == (p.n + 3) / 4 &&
                 r.time_to_target == sum_costs(p.n),
             "exhaustive in batches of 4: %d of %d in %d rounds", r.to_target, r.evaluations,
             r.rounds);
    /* The optimum at 5: reached at evaluation 6, in the second batch, all of which is paid:
     * 8 evaluations in 2 rounds; in parallel each round costs its slowest member. */
    make_landscape(&l, &p, 5, score, cost);
    FT_CHECK(ft_replay_run(&l, &o, &r, &err) == FT_OK && r.to_target == 8 && r.evaluations == 8 &&
                 r.rounds == 2 && r.rounds_to_target == 2 && r.time_to_target == sum_costs(8) &&
                 r.wall_to_target == cost_of(3) + cost_of(6),
             "optimum at 5: %d of %d in %d rounds, %g s, wall %g s", r.to_target, r.evaluations,
             r.rounds, r.time_to_target, r.wall_to_target);
    /* Hit at the batch's 2nd member: its 4 evaluations count. */
    make_landscape(&l, &p, 1, score, cost);
    FT_CHECK(ft_replay_run(&l, &o, &r, &err) == FT_OK && r.to_target == 4 &&
                 r.rounds_to_target == 1 && r.time_to_target == sum_costs(4) &&
                 r.wall_to_target == cost_of(3),
             "optimum at 1, batch 4: %d evaluations in %d rounds, wall %g", r.to_target,
             r.rounds_to_target, r.wall_to_target);
    /* Batches of 1: the wall time is the summed time. */
    o.batch = 1;
    FT_CHECK(ft_replay_run(&l, &o, &r, &err) == FT_OK && r.to_target == 2 &&
                 r.rounds_to_target == 2 && r.wall_to_target == r.time_to_target,
             "batch 1: %d, wall %g, time %g", r.to_target, r.wall_to_target, r.time_to_target);
    o.batch = 4;
    /* A budget cuts the last batch short. */
    o.budget = 7;
    make_landscape(&l, &p, p.n - 1, score, cost);
    FT_CHECK(ft_replay_run(&l, &o, &r, &err) == FT_OK && r.to_target == -1 && r.evaluations == 7 &&
                 r.rounds == 2 && isnan(r.time_to_target),
             "budget 7: %d evaluations in %d rounds", r.evaluations, r.rounds);
    o.budget = 0;
    /* Every strategy, batches of 1, 4 and 16: the optimum found, each candidate once. */
    for (int k = 0; k < FT_STRAT_COUNT; k++)
        for (int b = 1; b <= 16; b *= 4)
            for (uint64_t seed = 1; seed <= 3; seed++) {
                o.kind = (ft_strategy_kind)k;
                o.batch = b;
                o.seed = seed;
                ft_status s = ft_replay_run(&l, &o, &r, &err);
                FT_CHECK(s == FT_OK, "%s, batch %d: %s", ft_strategy_names[k], b, err.msg);
                FT_CHECK(r.to_target >= 1 && r.best == l.score[l.best] &&
                             r.evaluations == r.to_target && r.rounds_to_target == r.rounds &&
                             r.evaluations <= p.n && r.rounds >= (r.evaluations + b - 1) / b &&
                             r.rounds <= r.evaluations,
                         "%s, batch %d, seed %d: reached at %d of %d in %d rounds",
                         ft_strategy_names[k], b, (int)seed, r.to_target, r.evaluations, r.rounds);
                FT_CHECK(r.time_to_target > 0 && r.time_to_target <= sum_costs(p.n), "%s: time %g",
                         ft_strategy_names[k], r.time_to_target);
            }
    /* Out of range. */
    o.batch = 0;
    FT_CHECK(ft_replay_run(&l, &o, &r, &err) == FT_EINVAL, "batch 0");
    o.batch = 1;
    o.nfirst = 1;
    FT_CHECK(ft_replay_run(&l, &o, &r, &err) == FT_EINVAL, "a warm start without candidates");
}

/* Several targets in one replay: each as its own replay gives it, whatever the strategy, batch
 * size, budget and warm start. */
static void test_targets(void) {
    problem p;
    char path[512];
    ft_err err = {0};
    ft_landscape l;
    confirm_plan cp;
    int ok = load_chain(&p, &l, &cp, path, sizeof path);
    unlink(path);
    if (!ok) return;
    const double targets[4] = {0.5, 0.05, 0.0, 0.1};
    const int first[2] = {7, 2};
    int same = 1, runs = 0;
    for (int k = 0; k < FT_STRAT_COUNT; k++)
        for (int v = 0; v < 8; v++) {
            ft_replay_opts o;
            ft_replay_result all[4], one;
            ft_replay_opts_default(&o);
            o.kind = (ft_strategy_kind)k;
            o.batch = v & 1 ? 3 : 1;
            o.budget = v & 2 ? 10 : 0;
            o.first = v & 4 ? first : NULL;
            o.nfirst = v & 4 ? 2 : 0;
            o.seed = (uint64_t)v + 1;
            FT_CHECK(ft_replay_run_targets(&l, &o, targets, 4, all, &err) == FT_OK, "%s", err.msg);
            for (int t = 0; t < 4; t++) {
                o.target = targets[t];
                FT_CHECK(ft_replay_run(&l, &o, &one, &err) == FT_OK, "%s", err.msg);
                int eq = one.to_target == all[t].to_target &&
                         one.evaluations == all[t].evaluations && one.rounds == all[t].rounds &&
                         one.best == all[t].best &&
                         (one.time_to_target == all[t].time_to_target ||
                          (isnan(one.time_to_target) && isnan(all[t].time_to_target)));
                if (!eq)
                    FT_CHECK(0, "%s, variant %d, target %g: %d/%d/%d alone, %d/%d/%d together",
                             ft_strategy_names[k], v, targets[t], one.to_target, one.evaluations,
                             one.rounds, all[t].to_target, all[t].evaluations, all[t].rounds);
                same &= eq;
                runs++;
            }
        }
    FT_CHECK(same && runs == FT_STRAT_COUNT * 8 * 4, "%d replays compared", runs);
    ft_replay_opts o;
    ft_replay_result r[1];
    ft_replay_opts_default(&o);
    FT_CHECK(ft_replay_run_targets(&l, &o, targets, 0, r, &err) == FT_EINVAL, "no target");
    ft_landscape_free(&l);
}

/* A warm start proposes its `first` first, in order, cold or batched, whatever the strategy. */
static void test_warm_first(void) {
    problem p;
    if (!make_problem(&p, "attention.kvproj", "small.dflare.train")) return;
    double score[512], cost[512], prior[512];
    ft_landscape l;
    ft_err err = {0};
    int opt = p.n / 2;
    make_landscape(&l, &p, opt, score, cost);
    for (int i = 0; i < p.n; i++)
        prior[i] = 1e-3 * (1 + abs(i - opt)); /* a prior that ranks the optimum first */
    const int first3[3] = {1, p.n - 1, opt}, first1[1] = {opt};
    for (int k = 0; k < FT_STRAT_COUNT; k++)
        for (int b = 1; b <= 4; b += 3)
            for (int w = 0; w < 2; w++) {
                ft_replay_opts o;
                ft_replay_result r;
                ft_replay_opts_default(&o);
                o.kind = (ft_strategy_kind)k;
                o.batch = b;
                o.target = 0;
                o.first = w ? first1 : first3;
                o.nfirst = w ? 1 : 3;
                o.prior = w ? prior : NULL;
                FT_CHECK(ft_replay_run(&l, &o, &r, &err) == FT_OK, "%s", err.msg);
                /* In a batch of 4 the whole first batch is paid: the first candidates and
                 * what the strategy adds to them. */
                double firsts = w ? cost_of(opt) : cost_of(1) + cost_of(p.n - 1) + cost_of(opt);
                FT_CHECK(b == 1 ? r.to_target == o.nfirst && r.time_to_target == firsts
                                : r.to_target == 4 && r.rounds_to_target == 1 &&
                                      r.time_to_target >= firsts,
                         "%s, batch %d, %d first: reached at %d", ft_strategy_names[k], b, o.nfirst,
                         r.to_target);
            }
    /* Out of range: refused. */
    const int bad[1] = {p.n};
    ft_replay_opts o;
    ft_replay_result r;
    ft_replay_opts_default(&o);
    o.first = bad;
    o.nfirst = 1;
    FT_CHECK(ft_replay_run(&l, &o, &r, &err) == FT_EINVAL, "a first candidate out of range");
}

/* Another shape's scores for the small shape's candidates. */
static double other_score(int i) { return 1e-4 * (1.0 + ((i * 53) % 97)); }

/* ft_landscape_warm: the prior from the same config at another shape (none where that shape
 * lacks it or rejected it), its best few that are candidates here; another op is refused. */
static void test_warm_landscape(void) {
    problem p, q, other;
    if (!make_problem(&p, "attention.kvproj", "small.dflare.train") ||
        !make_problem(&q, "attention.kvproj", "tiny.dflare.train") ||
        !make_problem(&other, "loss", "small.dflare.train"))
        return;
    char pa[512], pb[512], pc[512];
    temp_path(pa, sizeof pa);
    temp_path(pb, sizeof pb);
    temp_path(pc, sizeof pc);
    int qreject = 2;
    FILE *f = fopen(pa, "w");
    run_spec rp = {"a", "ka", 0, p.n, -1, 1, NULL, NULL, 0, NULL};
    write_run(f, &p, &rp);
    fclose(f);
    f = fopen(pb, "w");
    run_spec rq = {"b", "kb", 0, q.n, qreject, 1, NULL, NULL, 0, other_score};
    write_run(f, &q, &rq);
    fclose(f);
    f = fopen(pc, "w");
    run_spec ro = {"c", "kc", 0, other.n, -1, 1, NULL, NULL, 0, NULL};
    write_run(f, &other, &ro);
    fclose(f);
    ft_landscape l, from, wrong;
    ft_err err = {0};
    FT_CHECK(ft_landscape_load(pa, &l, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(ft_landscape_load(pb, &from, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(ft_landscape_load(pc, &wrong, &err) == FT_OK, "%s", err.msg);
    double prior[512];
    int first[3], nfirst = -1;
    FT_CHECK(ft_landscape_warm(&l, &from, 3, first, &nfirst, prior, &err) == FT_OK, "%s", err.msg);
    /* By hand: each of l's candidates in q's list. */
    int mapped = 0, ok = 1, want[3], nwant = 0;
    double ws[3];
    for (int c = 0; c < l.ncands; c++) {
        int j = -1;
        for (int k = 0; k < q.n; k++)
            if (ft_config_equal(&q.cands[k], &l.cands[c])) j = k;
        double expect = j < 0 || j == qreject ? NAN : other_score(j);
        ok &= isnan(expect) ? isnan(prior[c]) : prior[c] == expect;
        mapped += j >= 0 && j != qreject;
        if (j < 0 || j == qreject) continue;
        /* keep the 3 best, best first */
        int at = nwant < 3 ? nwant++ : 3;
        while (at > 0 && ws[at - 1] > expect) {
            if (at < 3) {
                ws[at] = ws[at - 1];
                want[at] = want[at - 1];
            }
            at--;
        }
        if (at < 3) {
            ws[at] = expect;
            want[at] = c;
        }
    }
    FT_CHECK(ok && mapped > 0 && mapped < l.ncands, "prior: %d of %d from the other shape", mapped,
             l.ncands);
    FT_CHECK(nfirst == nwant && memcmp(first, want, sizeof(int) * (size_t)nwant) == 0,
             "first: %d (%d %d %d), want %d (%d %d %d)", nfirst, first[0], first[1], first[2],
             nwant, want[0], want[1], want[2]);
    FT_CHECK(ft_landscape_warm(&l, &wrong, 3, first, &nfirst, prior, &err) == FT_EINVAL &&
                 strstr(err.msg, "attention.kvproj") && strstr(err.msg, "loss"),
             "another op: %s", err.msg);
    ft_landscape_free(&l);
    ft_landscape_free(&from);
    ft_landscape_free(&wrong);
    unlink(pa);
    unlink(pb);
    unlink(pc);
}

/* A JSON number as written for v: null for what JSON cannot hold (NaN, INFINITY). */
static int same_number(const json_t *j, double v) {
    return isfinite(v) ? json_is_number(j) && json_number_value(j) == v : json_is_null(j);
}

/* --export: the file parses back into the landscape (format flaretune-landscape/1). */
static void test_export(void) {
    problem p;
    char path[512], out[600];
    ft_err err = {0};
    ft_landscape l;
    confirm_plan cp;
    if (!load_chain(&p, &l, &cp, path, sizeof path)) return;
    snprintf(out, sizeof out, "%s.landscape.json", path);
    FT_CHECK(ft_landscape_export(&l, path, out, &err) == FT_OK, "%s", err.msg);
    json_error_t jerr;
    json_t *doc = json_load_file(out, 0, &jerr);
    FT_CHECK(doc != NULL, "%s: %s", out, jerr.text);
    if (!doc) return;
    char dims[256];
    ft_call_dims_str(&l.call, dims, sizeof dims);
#define STR(k) json_string_value(json_object_get(doc, k))
    FT_CHECK(STR("format") && strcmp(STR("format"), "flaretune-landscape/1") == 0, "format");
    FT_CHECK(STR("op") && strcmp(STR("op"), "attention.kvproj") == 0 && STR("backend") &&
                 strcmp(STR("backend"), "cpu") == 0 && STR("preset") &&
                 strcmp(STR("preset"), "small.dflare.train") == 0 && STR("dims") &&
                 strcmp(STR("dims"), dims) == 0 && STR("log") && strcmp(STR("log"), path) == 0,
             "the problem");
#undef STR
    const json_t *params = json_object_get(doc, "params");
    int pok = json_is_array(params) && (int)json_array_size(params) == l.space.nparams;
    for (int i = 0; pok && i < l.space.nparams; i++) {
        const ft_param *pa = &l.space.params[i];
        const json_t *e = json_array_get(params, (size_t)i), *v = json_object_get(e, "values");
        pok &= strcmp(json_string_value(json_object_get(e, "name")), pa->name) == 0 &&
               json_is_boolean(json_object_get(e, "named")) &&
               json_is_true(json_object_get(e, "named")) == (pa->labels != NULL) &&
               (int)json_array_size(v) == pa->n;
        for (int k = 0; pok && k < pa->n; k++) {
            const json_t *x = json_array_get(v, (size_t)k);
            pok &= pa->labels ? json_is_string(x) &&
                                    strcmp(json_string_value(x), pa->labels[pa->values[k]]) == 0
                              : json_is_integer(x) && json_integer_value(x) == pa->values[k];
        }
    }
    FT_CHECK(pok, "params: every parameter's candidate values");
    FT_CHECK(same_number(json_object_get(doc, "optimum_s"), l.score[l.best]) &&
                 json_integer_value(json_object_get(doc, "optimum")) == l.best &&
                 json_integer_value(json_object_get(doc, "confirmed")) == l.nconfirmed &&
                 same_number(json_object_get(json_object_get(doc, "noise"), "median_ci_rel"),
                             l.noise_ci_rel),
             "the optimum, confirmation and noise");
    const json_t *cands = json_object_get(doc, "candidates");
    int cok = json_is_array(cands) && (int)json_array_size(cands) == l.ncands;
    for (int c = 0; cok && c < l.ncands; c++) {
        const json_t *e = json_array_get(cands, (size_t)c);
        ft_config cfg;
        cok &= ft_config_from_json(&l.space, json_object_get(e, "config"), &cfg, &err) == FT_OK &&
               ft_config_equal(&cfg, &l.cands[c]) &&
               same_number(json_object_get(e, "score_s"), l.score[c]) &&
               same_number(json_object_get(e, "cost_s"), l.cost[c]) &&
               same_number(json_object_get(e, "ci_rel"), l.ci_rel[c]);
        if (!cok) FT_CHECK(0, "candidate %d differs", c);
    }
    FT_CHECK(cok && json_is_null(json_object_get(json_array_get(cands, 3), "score_s")),
             "candidates: configs, scores (the rejected one null), costs, ci_rel");
    json_decref(doc);
    /* Written over an existing file; a directory that does not exist fails with the path. */
    FT_CHECK(ft_landscape_export(&l, path, out, &err) == FT_OK, "again: %s", err.msg);
    char bad[700];
    snprintf(bad, sizeof bad, "%s.missing/landscape.json", path);
    FT_CHECK(ft_landscape_export(&l, path, bad, &err) != FT_OK && strstr(err.msg, bad),
             "into a missing directory: %s", err.msg);
    ft_landscape_free(&l);
    unlink(out);
    unlink(path);
}

/* The orderings: 0 the identity, j > 0 splitmix64 + Fisher-Yates, the very permutations
 * scripts/ordering.py draws (tests/test_kt_compare.py checks the same constants there). */
static void test_orderings(void) {
    static const int want[][9] = {
        /* nparams, j, perm... */
        {5, 1, 2, 1, 4, 3, 0},       {5, 2, 1, 3, 4, 2, 0},       {5, 7, 4, 1, 3, 0, 2},
        {8, 1, 4, 3, 2, 7, 5, 6, 0}, {8, 3, 7, 0, 1, 4, 2, 6, 3}, {3, 2, 2, 0, 1},
    };
    for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
        int perm[FT_MAX_PARAMS], n = want[k][0], ok = 1;
        ft_landscape_ordering(n, want[k][1], perm);
        for (int q = 0; q < n && q < 7; q++)
            ok &= perm[q] == want[k][2 + q];
        FT_CHECK(ok, "ordering %d of %d parameters: %d %d %d ...", want[k][1], n, perm[0], perm[1],
                 perm[2]);
    }
    int id[FT_MAX_PARAMS];
    ft_landscape_ordering(6, 0, id);
    FT_CHECK(id[0] == 0 && id[3] == 3 && id[5] == 5, "ordering 0 is the identity");
}

/* A permuted landscape: the same scores, costs and optimum config, the candidates in the new
 * space order; the parameters reversed, exhaustive search meets the optimum where the new
 * order puts it. */
static void test_permute(void) {
    problem p;
    if (!make_problem(&p, "attention.kvproj", "small.dflare.train")) return;
    double score[512], cost[512], ci[512], pred[512];
    int samples[512] = {0};
    ft_landscape l, q;
    ft_err err = {0};
    int opt = p.n / 3;
    make_landscape(&l, &p, opt, score, cost);
    for (int i = 0; i < p.n; i++) {
        ci[i] = ci_of(i);
        pred[i] = NAN;
    }
    l.ci_rel = ci;
    l.predicted = pred;
    l.confirm_samples = samples;
    const int np = p.space.nparams;
    int perm[FT_MAX_PARAMS];
    for (int i = 0; i < np; i++)
        perm[i] = np - 1 - i;
    FT_CHECK(ft_landscape_permute(&l, perm, &q, &err) == FT_OK, "%s", err.msg);
    if (err.status) return;
    FT_CHECK(q.ncands == p.n && q.space.nparams == np &&
                 strcmp(q.params[0].name, p.space.params[np - 1].name) == 0,
             "%d candidates, first parameter %s", q.ncands, q.params[0].name);
    /* Each candidate of q: its config back in the old order, found in l with its score, cost
     * and ci_rel; q's candidates strictly ascending in q's space order. */
    int same = 1, sorted = 1;
    double sum_l = 0, sum_q = 0;
    for (int c = 0; c < q.ncands; c++) {
        ft_config back = {.n = np};
        for (int i = 0; i < np; i++)
            back.v[perm[i]] = q.cands[c].v[i];
        int at = -1;
        for (int i = 0; i < p.n && at < 0; i++)
            if (ft_config_equal(&back, &p.cands[i])) at = i;
        same &=
            at >= 0 && q.score[c] == score[at] && q.cost[c] == cost[at] && q.ci_rel[c] == ci[at];
        if (c)
            sorted &= ft_space_index_of(&q.space, &q.cands[c - 1]) <
                      ft_space_index_of(&q.space, &q.cands[c]);
        sum_l += score[c];
        sum_q += q.score[c];
    }
    FT_CHECK(same && sum_l == sum_q, "every candidate carries its own score, cost, ci_rel");
    FT_CHECK(sorted, "the candidates in the new space order");
    ft_config ob = {.n = np};
    for (int i = 0; i < np; i++)
        ob.v[i] = p.cands[opt].v[perm[i]];
    FT_CHECK(ft_config_equal(&q.cands[q.best], &ob) && q.score[q.best] == score[opt],
             "the same optimum config");
    /* Where exhaustive search meets it: after every candidate before it in the new order. */
    int before = 0;
    for (int i = 0; i < p.n; i++) {
        ft_config c = {.n = np};
        for (int k = 0; k < np; k++)
            c.v[k] = p.cands[i].v[perm[k]];
        before += ft_space_index_of(&q.space, &c) < ft_space_index_of(&q.space, &ob);
    }
    FT_CHECK(ft_landscape_first_within(&q, 0) == before + 1 &&
                 ft_landscape_first_within(&l, 0) == opt + 1,
             "exhaustive reaches it at %d (want %d), at %d in the log's order",
             ft_landscape_first_within(&q, 0), before + 1, ft_landscape_first_within(&l, 0));
    FT_CHECK(before != opt, "reversing the parameters moves the optimum in space order");
    ft_replay_opts o;
    ft_replay_result r;
    ft_replay_opts_default(&o);
    o.target = 0;
    FT_CHECK(ft_replay_run(&q, &o, &r, &err) == FT_OK && r.to_target == before + 1,
             "replayed exhaustively: %d", r.to_target);
    ft_landscape_free(&q);
    perm[0] = perm[1];
    FT_CHECK(ft_landscape_permute(&l, perm, &q, &err) == FT_EINVAL, "not a permutation");
}

int main(void) {
    FT_RUN(test_confirm_refused);
    FT_RUN(test_load_costs);
    FT_RUN(test_batches);
    FT_RUN(test_targets);
    FT_RUN(test_warm_first);
    FT_RUN(test_warm_landscape);
    FT_RUN(test_export);
    FT_RUN(test_orderings);
    FT_RUN(test_permute);
    return ft_test_finish();
}
