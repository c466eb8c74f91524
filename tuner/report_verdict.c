/* report_verdict.c: whether a report's answers can stand on a busy machine (docs/report.md,
 * "A busy machine"): the one place that withholds a claim's verdict when a step its evidence
 * uses was not measured cleanly, and that words the page's banner.
 *
 * A step document (docs/step.md) was measured cleanly when every distinct measurement in it
 * was: each stage timed alone (a stage `timed_as` another shares that one's) and the whole step.
 * An unclean median counts every sample, contaminated ones too: an upper bound, which can make
 * a claim hold or fail by the scheduler's hand, so its verdict is "inconclusive". So is one
 * resting on a clean step measured while the machine was busy (its `load`): contention for
 * caches, memory and a core's SMT sibling slows every sample without showing as time lost.
 */
#include <stdio.h>
#include <string.h>

#include "tuner/report.h"

/* A count from a document: a non-negative integer, else 0. */
static long count(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (long)json_integer_value(v) : 0;
}

/* One stats object's samples thrown away and taken; 1 when it was not measured cleanly. A
 * document older than `taken`: an unclean measurement's samples are every one it took. */
static int stats_busy(const json_t *st, long *discarded, long *taken) {
    int unclean = json_is_false(json_object_get(st, "clean"));
    long d = count(st, "discarded"), n = count(st, "samples");
    *discarded += d;
    *taken += json_is_integer(json_object_get(st, "taken")) ? count(st, "taken")
              : unclean                                     ? n
                                                            : n + d;
    return unclean;
}

void ft_report_step_busy(const json_t *step, ft_report_busy *b) {
    int unclean = 0;
    size_t i;
    const json_t *sg;
    json_array_foreach(json_object_get(step, "stages"), i, sg) {
        if (json_object_get(sg, "timed_as")) continue;
        unclean |= stats_busy(json_object_get(sg, "alone"), &b->discarded, &b->taken);
    }
    unclean |= stats_busy(json_object_get(json_object_get(step, "whole"), "stats"), &b->discarded,
                          &b->taken);
    b->steps++;
    b->unclean_steps += unclean;
    b->loaded_steps +=
        !unclean && json_is_true(json_object_get(json_object_get(step, "load"), "busy"));
}

int ft_report_step_bound(const json_t *step) {
    ft_report_busy b = {0};
    ft_report_step_busy(step, &b);
    return b.unclean_steps || b.loaded_steps;
}

json_t *ft_report_busy_to_json(const ft_report_busy *b) {
    return json_pack("{s:i, s:i, s:i, s:I, s:I}", "steps", b->steps, "unclean_steps",
                     b->unclean_steps, "loaded_steps", b->loaded_steps, "samples_discarded",
                     (json_int_t)b->discarded, "samples_taken", (json_int_t)b->taken);
}

json_t *ft_report_evidence(const char *key, const json_t *step) {
    ft_report_busy b = {0};
    ft_report_step_busy(step, &b);
    return json_pack("{s:s, s:b, s:b, s:I, s:I}", "step", key, "clean", !b.unclean_steps, "loaded",
                     b.loaded_steps > 0, "samples_discarded", (json_int_t)b.discarded,
                     "samples_taken", (json_int_t)b.taken);
}

/* A claim's evidence (docs/report.md) added up. */
static void evidence_busy(const json_t *evidence, ft_report_busy *b) {
    size_t i;
    const json_t *e;
    json_array_foreach(evidence, i, e) {
        b->steps++;
        b->unclean_steps += json_is_false(json_object_get(e, "clean"));
        b->loaded_steps +=
            json_is_true(json_object_get(e, "clean")) && json_is_true(json_object_get(e, "loaded"));
        b->discarded += count(e, "samples_discarded");
        b->taken += count(e, "samples_taken");
    }
}

const char *ft_report_share_text(long part, long whole, char *buf, size_t n) {
    double f = whole > 0 ? (double)part / (double)whole : 0;
    if (f >= 0.01)
        snprintf(buf, n, "%.0f%%", 100 * f);
    else if (f >= 0.001)
        snprintf(buf, n, "%.1f%%", 100 * f);
    else
        snprintf(buf, n, part > 0 ? "<0.1%%" : "0%%");
    return buf;
}

/* The document's contention from its claims' evidence, each step once (a document that says
 * nothing of the sweep as a whole). */
static json_t *contention_from_claims(const json_t *claims) {
    ft_report_busy b = {0};
    json_t *seen = json_object();
    size_t i, k;
    const json_t *c, *e;
    json_array_foreach(claims, i, c) {
        json_array_foreach(json_object_get(c, "evidence"), k, e) {
            const char *key = json_string_value(json_object_get(e, "step"));
            if (!key || json_object_get(seen, key)) continue;
            json_object_set_new(seen, key, json_true());
            json_t *one = json_pack("[O]", e);
            evidence_busy(one, &b);
            json_decref(one);
        }
    }
    json_decref(seen);
    return b.steps ? ft_report_busy_to_json(&b) : NULL;
}

void ft_report_judge(json_t *doc) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(doc, "claims"), i, c) {
        const json_t *ev = json_object_get(c, "evidence");
        if (!json_is_array(ev)) continue;
        ft_report_busy b = {0};
        evidence_busy(ev, &b);
        if (!b.unclean_steps && !b.loaded_steps) continue;
        char pct[16], why[128];
        ft_report_share_text(b.discarded, b.taken, pct, sizeof pct);
        if (b.unclean_steps)
            snprintf(why, sizeof why, "the machine was busy; %s of samples discarded", pct);
        else
            snprintf(why, sizeof why, "the machine was busy while %d of its %d steps %s measured",
                     b.loaded_steps, b.steps, b.loaded_steps == 1 ? "was" : "were");
        json_object_set_new(c, "verdict", json_string("inconclusive"));
        json_object_set_new(c, "withheld", json_string(why));
    }
    if (!json_is_object(json_object_get(doc, "contention"))) {
        json_t *ct = contention_from_claims(json_object_get(doc, "claims"));
        if (ct) json_object_set_new(doc, "contention", ct);
    }
}

const char *ft_report_verdict_text(const json_t *claim, char *buf, size_t n) {
    const char *v = json_string_value(json_object_get(claim, "verdict"));
    const char *why = json_string_value(json_object_get(claim, "withheld"));
    if (!v) v = "";
    if (why && *why)
        snprintf(buf, n, "%s: %s", v, why);
    else
        snprintf(buf, n, "%s", v);
    return buf;
}

int ft_report_busy_text(const json_t *doc, char *buf, size_t n) {
    if (n) buf[0] = '\0';
    const json_t *ct = json_object_get(doc, "contention");
    long unclean = count(ct, "unclean_steps"), loaded = count(ct, "loaded_steps"),
         steps = count(ct, "steps");
    if ((!unclean && !loaded) || !n) return 0;
    char pct[16], unc[200] = "", load[200] = "";
    ft_report_share_text(count(ct, "samples_discarded"), count(ct, "samples_taken"), pct,
                         sizeof pct);
    if (unclean)
        snprintf(unc, sizeof unc,
                 " %ld of %ld steps %s not measured cleanly, and %s of the samples were thrown "
                 "away as contaminated (their threads lost time to other work)",
                 unclean, steps, unclean == 1 ? "was" : "were", pct);
    const char *were = loaded == 1 ? "was" : "were",
               *why = "measured while other processes kept the CPUs busy, which slows every sample "
                      "without showing as time lost";
    if (loaded && unclean)
        snprintf(load, sizeof load, "; %ld more step%s %s %s", loaded, loaded == 1 ? "" : "s", were,
                 why);
    else if (loaded)
        snprintf(load, sizeof load, " %ld of %ld steps %s %s", loaded, steps, were, why);
    snprintf(buf, n,
             "The machine was busy:%s%s. Those steps' medians are upper bounds, and a verdict "
             "that rests on them is withheld (inconclusive).",
             unc, load);
    return 1;
}
