/* fuzz_landscape.c: the readers of the community's landscape files (tuner/landscape_formats.c)
 * on arbitrary bytes: a Kernel Tuner cache (finished or not) and a FAIR T4 results file.
 *
 * Exercises ft_landscape_from_buffer on the input (detection by content, Kernel Tuner's reading
 * of an unfinished cache, tune_params and their values, cache keys against them, each entry's
 * time, error name and cost pieces; T4's parameters gathered from the configurations, its time
 * unit, invalidity, measurements and times), then ft_landscape_load on it as a file (the same,
 * through zlib, which reads a plain file as it is, and gzip-compressed input), and on a
 * landscape that loaded: its JSON export, a warm start from itself and a short replay of every
 * strategy.
 *
 * A finding, besides a sanitizer report, a leak or a timeout: a failure without its status and
 * message in ft_err, or a message of more than one line; a landscape with an op (a file names
 * none), candidates out of space order or outside the space, a score that is neither positive
 * nor infinite, an optimum that is not the lowest score, or counts of failures and costs that
 * disagree with the candidates; the two ways of reading the same bytes disagreeing; an export
 * that is not an object with a null op; a strategy that breaks its contract.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/replay.h"
#include "tuner/strategies/strategy.h"
#include "fuzz.h"

static void check_landscape(const ft_landscape *l) {
    FUZZ_CHECK(l->ncands > 0 && l->best >= 0 && l->best < l->ncands, "%d candidates, best %d",
               l->ncands, l->best);
    int rejected = 0, costs = 0;
    int64_t prev = -1;
    for (int c = 0; c < l->ncands; c++) {
        int64_t k = ft_space_index_of(&l->space, &l->cands[c]);
        FUZZ_CHECK(k > prev, "candidate %d at space index %lld after %lld", c, (long long)k,
                   (long long)prev);
        prev = k;
        FUZZ_CHECK(l->score[c] > 0, "candidate %d scores %g", c, l->score[c]);
        FUZZ_CHECK(l->score[c] >= l->score[l->best], "candidate %d below the optimum", c);
        rejected += !(l->score[c] < INFINITY);
        costs += !isnan(l->cost[c]);
        FUZZ_CHECK(isnan(l->predicted[c]) && l->confirm_samples[c] == 0, "predicted, confirmed");
    }
    FUZZ_CHECK(rejected == l->nrejected && rejected < l->ncands, "%d failed, nrejected %d",
               rejected, l->nrejected);
    FUZZ_CHECK(costs == l->ncost, "%d costs, ncost %d", costs, l->ncost);
}

static void use(const ft_landscape *l) {
    json_t *doc = ft_landscape_to_json(l, "fuzz");
    FUZZ_CHECK(json_is_object(doc) && json_is_null(json_object_get(doc, "op")),
               "export is not an object with a null op");
    json_decref(doc);
    ft_err err = {0};
    int first[3], nfirst = 0;
    double *prior = malloc((size_t)l->ncands * sizeof *prior);
    if (!prior) return;
    ft_status s = ft_landscape_warm(l, l, 3, first, &nfirst, prior, &err);
    fuzz_check_err(s, &err, "ft_landscape_warm");
    FUZZ_CHECK(s == FT_OK && nfirst >= 1 && first[0] == l->best, "warm from itself");
    for (int k = 0; k < FT_STRAT_COUNT; k++) {
        ft_replay_opts o;
        ft_replay_opts_default(&o);
        o.kind = (ft_strategy_kind)k;
        o.budget = 16;
        o.batch = 1 + k % 3;
        ft_replay_result r;
        s = ft_replay_run(l, &o, &r, &err);
        fuzz_check_err(s, &err, "ft_replay_run");
        FUZZ_CHECK(s != FT_EINTERNAL, "%s", err.msg);
    }
    free(prior);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ft_landscape a, b;
    ft_err ea = {0}, eb = {0};
    ft_status sa = ft_landscape_from_buffer((const char *)data, size, "fuzz", &a, &ea);
    fuzz_check_err(sa, &ea, "ft_landscape_from_buffer");
    if (sa) FUZZ_CHECK(!strchr(ea.msg, '\n'), "a message of two lines: %s", ea.msg);
    if (sa == FT_OK && a.op) {
        ft_landscape_free(&a); /* an event log: fuzz_eventlog's */
        return 0;
    }
    if (sa == FT_OK) {
        check_landscape(&a);
        use(&a);
    }
    ft_status sb = ft_landscape_load(fuzz_input_path(data, size), &b, &eb);
    fuzz_check_err(sb, &eb, "ft_landscape_load");
    /* The same bytes the same way, unless they are gzip-compressed (the buffer reader takes
     * them as they are). */
    int gz = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    if (!gz) {
        FUZZ_CHECK(!sa == !sb, "from the buffer %d, from the file %d (%s)", sa, sb, eb.msg);
        if (!sa && !sb)
            FUZZ_CHECK(a.ncands == b.ncands && a.best == b.best && a.nrejected == b.nrejected,
                       "the buffer and the file disagree");
    } else if (sb == FT_OK && !b.op) {
        check_landscape(&b);
    }
    if (sa == FT_OK) ft_landscape_free(&a);
    if (sb == FT_OK) ft_landscape_free(&b);
    return 0;
}
