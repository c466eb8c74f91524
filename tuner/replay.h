/* replay.h: recorded landscapes, and search strategies run against them without a kernel.
 *
 * A landscape is the score of every valid candidate of one tuning problem, read back from an
 * exhaustive run's event log (docs/events.md): the median of each measured candidate, INFINITY
 * for each rejected one, and for the few the run confirmed at its end (measured again
 * interleaved), the confirmed median. Replaying a strategy against it costs no kernel run: every
 * proposal is one evaluation, scored from the landscape, so the quality of a strategy on a real
 * machine's landscape is measured in evaluations, deterministically for a seed, and in the
 * seconds those evaluations took when the log was recorded.
 */
#ifndef FLARETUNE_REPLAY_H
#define FLARETUNE_REPLAY_H

#include <jansson.h>

#include "op/backend.h"
#include "op/op.h"
#include "op/space.h"
#include "core/status.h"
#include "tuner/strategies/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FT_REPLAY_TARGET 0.05 /* default: within 5% of the optimum */

typedef struct ft_landscape {
    const ft_op *op;
    const ft_backend *backend;
    char preset[64];
    char run[64];     /* id of the log's last run                                        */
    int nruns;        /* runs merged: the last one and earlier ones with its `key` (resume) */
    ft_call call;     /* the recorded sizes and attributes (no tensors)                  */
    ft_space space;   /* the backend's space, resolved for the machine that recorded it  */
    ft_param *params; /* space.params (owned)                                            */
    int ncands;       /* valid configurations, in space order                            */
    ft_config *cands;
    double *score; /* median seconds; INFINITY for a rejected candidate               */
    int nrejected;
    int best; /* index of the optimum (the lowest score)                         */
    int def;  /* index of the default configuration (-1: not a valid candidate)  */
    /* Each candidate's predicted seconds where its events carry one (predicted_s), else NaN;
     * how many have one, and the device they were predicted for (run_start.predict). */
    double *predicted;
    int npredicted;
    char predict_device[32];
    /* What evaluating each candidate cost in the recording, seconds: from its `started` to the
     * `t` of its measured or rejected event (verification, compilation where there is one, and
     * measurement); NaN when the log lacks them. ncost: how many have one. */
    double *cost;
    int ncost;
    /* Each measured candidate's stats.ci_rel (the relative half-width of its median's 95%
     * confidence interval; NaN for a rejected one or one without), and the median of them over
     * the measured candidates: how noisy the recording was (NaN: none). */
    double *ci_rel;
    double noise_ci_rel;
    /* The confirmation (the chain's last `confirm` event): the configs it names score their
     * confirmed medians scaled to the search's footing (the interleaved round is slower:
     * confirm_ratio, the median over them of confirmed / search median; NaN without a
     * confirmation), so the optimum is judged by a side-by-side re-measurement rather than a
     * lucky sample. The default, named only as the baseline, keeps its search median.
     * nconfirmed: candidates confirmed; confirm_samples[c] the samples of c's re-measurement
     * (0: not confirmed; -1: confirmed, the event does not say how often).
     * confirm_refused: "" when the round was applied (or there is none); else why it was not
     * (its re-measurement spread across its configs by more than the gap it decides, or a
     * rescaled score would leave the range the search measured): the search's medians then
     * stand, nconfirmed is 0, and confirm_ratio still says how the round ran. */
    int nconfirmed;
    int *confirm_samples;
    double confirm_ratio;
    char confirm_refused[256];
    /* The chain's last confirm event says its round was not measured cleanly ("clean": false,
     * "used": "search": the scheduler spoiled it): it is not applied, the search's medians
     * stand. */
    int confirm_unclean;
    /* Where it came from (tuner/landscape_formats.c, docs/events.md "Formats"): "log" (a
     * flaretune event log: op, backend, preset, call and space as above), "kt-cache" (a Kernel
     * Tuner cache file), "t4" (a FAIR T4 results file) or "export" (a landscape `replay
     * --export` wrote). A file names no flaretune op: op and backend are NULL, call is empty,
     * the space is the file's own parameters (no constraint: every configuration the file
     * holds is a candidate), and device, kernel and problem_size say what it measured ("" where
     * the file does not; an export's op, backend and dims). */
    char format[16];
    char device[128];
    char kernel[128];
    char problem_size[128];
    char **owned; /* a file's parameter names and labels (owned), nowned of them */
    int nowned;
} ft_landscape;

/* Load the landscape of the file at `path`, whatever it holds (the content decides, not the
 * name; gzip-compressed files are read as they are): a flaretune event log (its last run and
 * the earlier runs with the same compatibility key, which that run resumed), a Kernel Tuner
 * cache file (an unfinished one too) or a FAIR T4 results file (tuner/landscape_formats.c).
 * Fails with FT_EFORMAT and one line naming the file and what is wrong: for a log, when a
 * valid candidate was neither measured nor rejected (a replay needs the exhaustive landscape). */
ft_status ft_landscape_load(const char *path, ft_landscape *l, ft_err *err);
/* Why s cannot be read back as a parameter's name or a string value (NULL when it can): it
 * holds a control character (ft_text_control_len), or it is longer than 120 characters (a
 * value is written into cache keys, labels and messages whole, and two that differ past that
 * would read as one). The readers refuse such text; writers check it first. */
const char *ft_landscape_text_flaw(const char *s);
/* A number written as a string in decimal ("16", "1.0", "2e3"): its value, as the readers take
 * a string value or a cache key's part, else NAN (so "0x10", "inf" and " 16" are labels of their
 * own). */
double ft_landscape_decimal(const char *s);
/* The same from the bytes of such a file (not compressed); `name` names it in messages. */
ft_status ft_landscape_from_buffer(const char *data, size_t n, const char *name, ft_landscape *l,
                                   ft_err *err);
/* The problem of a log's last run without its scores: op, backend, preset, run, nruns, call
 * and space set; *first the index of the first event of the chain of runs it resumed. The
 * caller frees l (ft_landscape_free) whatever it returns. */
ft_status ft_landscape_problem(const json_t *events, const char *name, ft_landscape *l,
                               size_t *first, ft_err *err);
/* One line saying what was measured: "attention.decode on cpu, preset P (dims)" for a log,
 * "KERNEL on DEVICE (Kernel Tuner cache, problem size [..])" for a file. */
void ft_landscape_describe(const ft_landscape *l, char *buf, size_t n);
/* noise_ci_rel: the median ci_rel over the measured candidates; and ncost, how many have a
 * cost. */
ft_status ft_landscape_summarise_noise(ft_landscape *l, ft_err *err);
/* What kind of file l was read from, in words ("Kernel Tuner cache", "FAIR T4 results", ...). */
const char *ft_landscape_format_name(const ft_landscape *l);
/* Do a and b have the same parameters, with the same values in the same order? (Two files of
 * one kernel measured on two GPUs do: a warm start across them is meaningful.) */
int ft_landscape_same_params(const ft_landscape *a, const ft_landscape *b);
/* "name(n),name(n),...": the parameters and how many values each has. */
void ft_landscape_params_str(const ft_landscape *l, char *buf, size_t n);
/* The same from events already read (ft_eventlog_read); `name` names the source in messages. */
ft_status ft_landscape_from_events(const json_t *events, const char *name, ft_landscape *l,
                                   ft_err *err);
void ft_landscape_free(ft_landscape *l);
/* Allocate l's per-candidate arrays for n candidates (cands, score, predicted, cost, ci_rel;
 * confirm_samples zeroed); FT_ENOMEM when short (ft_landscape_free releases what was made). */
ft_status ft_landscape_alloc(ft_landscape *l, int n, ft_err *err);

/* Is score s within `target` (0.05: 5%) of the landscape's optimum? */
int ft_landscape_reaches(const ft_landscape *l, double s, double target);
/* Number of candidates within target of the optimum. */
int ft_landscape_count_within(const ft_landscape *l, double target);
/* Evaluations exhaustive search in space order needs to first reach the target. */
int ft_landscape_first_within(const ft_landscape *l, double target);
/* Seconds the first n candidates in space order cost in the recording (n <= 0: 0; n past the
 * candidates: all of them); NaN when one of them has no cost. */
double ft_landscape_cost_through(const ft_landscape *l, int n);

/* A warm start for l from another landscape `from` of the same op and backend (another shape or
 * machine), or for a community file from another file of the same parameters (the same kernel
 * on another GPU): prior[c] (l->ncands values) is from's score of l's candidate c (the same config;
 * NaN where from lacks it or rejected it), and first[0..*nfirst) are the indices in l of from's
 * best `want` configs that are candidates of l, best first. Either output may be NULL. Fails
 * (FT_EINVAL, naming both) when from is of another op or backend, when one is a log and the
 * other a file, or when two files have different parameters. */
ft_status ft_landscape_warm(const ft_landscape *l, const ft_landscape *from, int want, int *first,
                            int *nfirst, double *prior, ft_err *err);

/* ---- export ---------------------------------------------------------------------------------
 * The landscape as one JSON object, format "flaretune-landscape/1" (docs/events.md,
 * "Landscape export"): the problem, the parameters' candidate values, the optimum and the
 * noise, and every candidate's config, score, cost and ci_rel. `log` names the source. */
json_t *ft_landscape_to_json(const ft_landscape *l, const char *log);
/* Write it to `path` atomically (a temporary file beside it, renamed into place). */
ft_status ft_landscape_export(const ft_landscape *l, const char *log, const char *path,
                              ft_err *err);

/* ---- the community's formats (tuner/landscape_export.c) -----------------------------------
 * The measured and rejected candidates of an event log's last run (and the runs it resumed; any
 * strategy) as a Kernel Tuner cache file or a FAIR T4 results file (docs/events.md "Formats"). */
typedef enum { FT_EXPORT_KT_CACHE, FT_EXPORT_T4 } ft_export_format;
/* "kt-cache" or "t4" to the format; -1: neither. */
int ft_export_format_parse(const char *name);
/* One configuration's outcome, as both formats record it. */
typedef struct ft_export_result {
    int failed;
    const char *kt_error;      /* Kernel Tuner's error name when failed ("RuntimeFailedConfig") */
    const char *t4_invalidity; /* T4's invalidity when failed ("runtime", "compile", ...)      */
    double time_ms;            /* the median; NaN when failed                                  */
    double cost_ms;            /* what evaluating it cost; NaN when unknown                    */
    double bench_ms;           /* the measuring's share of it                                  */
    double t;                  /* epoch seconds it was done; NaN: none                         */
} ft_export_result;
/* One entry: a Kernel Tuner cache entry (its key in key) or a T4 result. */
json_t *ft_export_entry(const ft_space *sp, const ft_config *cfg, const ft_export_result *r,
                        ft_export_format f, char *key, size_t keylen);
/* The document around the entries (an object of keys for a cache, an array for T4; both and
 * problem_size are taken over). NULL when out of memory. */
json_t *ft_export_wrap(const ft_space *sp, json_t *entries, ft_export_format f, const char *device,
                       const char *kernel, json_t *problem_size, const char *backend);
/* Write (and free) doc to path atomically; "-": standard output. */
ft_status ft_export_write(json_t *doc, ft_export_format f, const char *path, ft_err *err);
/* A Kernel Tuner cache written as a run goes, the way Kernel Tuner writes its own: begin writes
 * doc (ft_export_wrap's, with the entries to keep; taken over) atomically without its closing
 * "}\n}", add appends an entry a line, flushed to the disk before it returns, and end closes
 * the document (NULL: nothing to do). A run killed at any point leaves a cache that
 * Kernel Tuner and flaretune read (ft_kt_cache_read): every entry added before, the one being
 * written cut away. */
typedef struct ft_kt_cache ft_kt_cache;
ft_status ft_kt_cache_begin(const char *path, json_t *doc, ft_kt_cache **out, ft_err *err);
ft_status ft_kt_cache_add(ft_kt_cache *c, const char *key, json_t *entry, ft_err *err);
/* The text ft_kt_cache_add would append for key and entry now (entry released), malloc'd, its
 * length in *n; NULL when out of memory. With ft_kt_cache_fd, what a process about to end can
 * still write (core/epitaph.h). */
char *ft_kt_cache_line(const ft_kt_cache *c, const char *key, json_t *entry, size_t *n);
int ft_kt_cache_fd(const ft_kt_cache *c);
ft_status ft_kt_cache_end(ft_kt_cache *c, ft_err *err);
/* A Kernel Tuner cache file as JSON, closed or still open (Kernel Tuner's rule: a trailing
 * comma dropped, "}\n}" added), a last line a crash cut short dropped. */
ft_status ft_kt_cache_read(const char *path, json_t **doc, ft_err *err);
/* The document from events already read (ft_eventlog_read); `name` names the log in messages. */
json_t *ft_eventlog_export_json(const json_t *events, const char *name, ft_export_format f,
                                ft_err *err);
/* The same, written to `path` as ft_export_write writes it. */
ft_status ft_eventlog_export_events(const json_t *events, const char *name, ft_export_format f,
                                    const char *path, ft_err *err);
/* Read the log at `log` and write the document to `path` atomically (a temporary file beside
 * it, renamed into place; "-": standard output); a Kernel Tuner cache is written as Kernel Tuner
 * writes one (an entry a line, closed with a brace a line). */
ft_status ft_eventlog_export(const char *log, ft_export_format f, const char *path, ft_err *err);

/* ---- replay --------------------------------------------------------------------------------- */

/* A replay's course, evaluation by evaluation (for the methodology score of
 * scripts/methodology.py): after evaluation e (0-based, e < n <= cap), best[e] is the best score
 * found so far (INFINITY: none valid yet) and cost[e] the recorded costs of evaluations 0..e
 * summed (NaN from an unknown one on). The caller owns the arrays. */
typedef struct ft_replay_trace {
    int cap, n;
    double *best, *cost;
} ft_replay_trace;

typedef struct ft_replay_opts {
    ft_strategy_kind kind;
    uint64_t seed;
    double target; /* within this of the optimum (0.05: 5%)                                  */
    int budget;    /* stop after this many evaluations (0: none)                             */
    int batch;     /* candidates asked for at a time (ft_strategy_next_batch); 1: one by one */
    /* Warm start (ft_strategy_warm): candidates proposed first, and a prior score per
     * candidate (NULL: none), as ft_landscape_warm makes them. */
    const int *first;
    int nfirst;
    const double *prior;
    /* The strategies' options (NULL: their defaults); bayes weighs the recorded costs with
     * bayes.cost_weight > 0. */
    const ft_strategy_opts *strategy;
    /* Where to record the replay's course (NULL: nowhere). */
    ft_replay_trace *trace;
} ft_replay_opts;

/* exhaustive, seed 1, FT_REPLAY_TARGET, no budget, batches of 1, no warm start. */
void ft_replay_opts_default(ft_replay_opts *o);

typedef struct ft_replay_result {
    int to_target;        /* evaluations paid until the best found was within target: to the end
                           * of the batch (round) that brought it there, every member of it
                           * counted (-1: not reached); with batches of 1, the evaluation itself  */
    int rounds_to_target; /* batches asked for up to and including that one (-1: not reached) */
    int evaluations;      /* evaluations made: every proposal (stops after the batch that reached
                           * the target, at the budget or when the strategy has nothing more)      */
    int rounds;           /* batches asked for (with batches of 1, the evaluations)               */
    double best; /* best score found                                                      */
    double time_to_target; /* seconds the to_target evaluations cost in the recording, summed:
                            * one device measuring them in turn (NaN: not reached, or one of
                            * them has no cost)                                              */
    double wall_to_target; /* the same rounds with each batch's members measured in parallel
                            * on as many devices: the sum over rounds of the slowest member's
                            * cost (with batches of 1, time_to_target)                       */
    double propose_s; /* CPU seconds the strategy spent proposing the `evaluations` (this
                       * thread's CPU clock: what a busy machine takes away is not counted) */
} ft_replay_result;

/* Run strategy o->kind seeded with o->seed against l, o->batch candidates at a time (each
 * batch's results reported in order, each cost before its score, before the next batch is
 * asked for), until the best score found is within o->target of the optimum, o->budget
 * evaluations or the strategy has nothing more to propose. Fails only on allocation failure,
 * options out of range (FT_EINVAL) or a strategy that breaks its contract (proposes a candidate
 * twice or out of range: FT_EINTERNAL). */
ft_status ft_replay_run(const ft_landscape *l, const ft_replay_opts *o, ft_replay_result *r,
                        ft_err *err);
/* The same for each of targets[0..ntargets) in one replay (o->target unused): r[t] is what
 * ft_replay_run gives for targets[t] (the proposals do not depend on the target, so a replay for
 * the tightest passes every looser one on its way), for the cost of the longest of them. */
ft_status ft_replay_run_targets(const ft_landscape *l, const ft_replay_opts *o,
                                const double *targets, int ntargets, ft_replay_result *r,
                                ft_err *err);

/* ---- orderings -----------------------------------------------------------------------------
 * The order of the parameters (which varies fastest in space order) changes what a strategy
 * does with the same landscape: a fair comparison replays over several orderings. Ordering 0 is
 * the identity; ordering j > 0 is a Fisher-Yates shuffle of 0..nparams-1 driven by splitmix64
 * seeded with j:
 *
 *     x = j; for i = nparams-1 down to 1: x += 0x9E3779B97F4A7C15; z = x;
 *         z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9; z = (z ^ z >> 27) * 0x94D049BB133111EB;
 *         z ^= z >> 31; swap(perm[i], perm[z % (i + 1)])
 *
 * (all arithmetic modulo 2^64), so that scripts/kt-compare.py draws the same ones. */

/* perm[0..nparams): ordering j's parameter q is the original parameter perm[q]. */
void ft_landscape_ordering(int nparams, int j, int *perm);

/* out: a copy of in with its parameters in the order perm (out's parameter q is in's perm[q]):
 * params, every candidate's config, the candidates re-sorted into the new space order, and
 * score, cost, ci_rel, predicted and confirm_samples, best and def carried along. out owns its
 * arrays (ft_landscape_free), and borrows a file's parameter names and labels from in (free out
 * first); its space has no validity function (a replay needs none). Fails
 * with FT_EINVAL on a perm that is not a permutation, FT_ENOMEM. */
ft_status ft_landscape_permute(const ft_landscape *in, const int *perm, ft_landscape *out,
                               ft_err *err);

/* ---- predicted time ------------------------------------------------------------------------
 * A tuning run with a prediction (tune --predict) measures the exhaustive strategy's
 * candidates fastest predicted first and may prune those predicted much slower than the best;
 * these are the rules it follows, and what a replay of its landscape asks of them. */

/* Candidates 0..n-1 ordered by predicted seconds, fastest first; unpredicted ones (NaN) last;
 * ties in index order. */
void ft_predicted_order(const double *predicted, int n, int *order);

/* Which candidates a prune by predicted time keeps: keep[i] = 1 when predicted[i] is within
 * `factor` (> 1) of the best prediction, when it has none (nothing to judge it by), or when
 * i == keep_always (the tuner's baseline, the default; -1: none). Returns how many it keeps. */
int ft_predicted_prune(const double *predicted, int n, double factor, int keep_always,
                       unsigned char *keep);

/* Spearman's rank correlation between the predicted and the measured seconds over the
 * candidates that have both (rejected ones left out); *n how many; NaN below 2. */
double ft_landscape_rank_correlation(const ft_landscape *l, int *n);

/* Evaluations measuring in predicted order needs to first reach the target (as
 * ft_landscape_first_within for space order); -1 when nothing was predicted. */
int ft_landscape_first_within_predicted(const ft_landscape *l, double target);

typedef struct ft_prune_outcome {
    double factor;
    int kept;               /* candidates the run would measure (the default included)          */
    int best_kept;          /* the optimum is among them                                        */
    int within_kept;        /* one within the target is among them                              */
    double best_kept_ratio; /* the best kept score / the optimum (1: the optimum kept)    */
} ft_prune_outcome;

/* What `tune --prune predicted=factor` would have kept of the landscape. */
void ft_landscape_prune(const ft_landscape *l, double factor, double target, ft_prune_outcome *out);

/* The `replay:LOG` backend (tuner/replay_backend.c): candidates "measured" at their medians in
 * the exhaustive landscape of event log LOG, outputs from the float64 reference. Opened once per
 * process (a second call returns the first landscape's backend). */
ft_status ft_replay_backend_open(const char *log, const ft_backend **out, ft_err *err);
/* Whether a run of op with these attributes at preset p is the problem be's landscape was
 * recorded at, checked before a search (each candidate would fail alike). FT_OK for any other
 * backend; FT_EINVAL, saying both shapes, when not. */
ft_status ft_replay_backend_check(const ft_backend *be, const ft_op *op, const ft_attrs *attrs,
                                  const ft_preset *p, ft_err *err);

#ifdef __cplusplus
}
#endif
#endif
