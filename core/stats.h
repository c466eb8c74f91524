/* stats.h: robust statistics of a measurement's samples: median, quartiles, spread and the
 * confidence interval of the median (see measure.h for how the samples are taken). */
#ifndef FLARETUNE_STATS_H
#define FLARETUNE_STATS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ft_stats {
    int samples;   /* number of samples                                       */
    int batch;     /* calls per sample                                        */
    double median; /* seconds per call                                        */
    double q1, q3, iqr, min, max, mean, stdev;
    double ci_rel;   /* 95% CI half-width of the median, relative to it          */
    int converged;   /* the noise criterion held (else a cap on time or samples stopped it) */
    int screened;    /* early-abort screening stopped it: clearly slower than the best */
    int interrupted; /* *stop was raised                                        */
    double total_s;  /* wall time spent measuring, warm-up included             */
    /* The scheduler (measure.h max_lost): samples thrown away as contaminated, the share of
     * all timed samples' wall time that the call's threads lost to other work, and whether
     * too few clean samples were left: the statistics are then of every sample taken, an
     * upper bound on the kernel's time to show, never to rank. */
    int discarded;
    double lost_frac;
    int unclean;
    /* Samples timed, contaminated ones included: what `discarded` is a share of. The
     * statistics of a clean measurement are of its clean samples (taken = samples +
     * discarded), an unclean one's of every sample (taken = samples): `samples` cannot say. */
    int taken;
    /* A call ran past the measurement's call_limit_s and was stopped after stopped_s. */
    int stopped;
    double stopped_s;
    /* The fastest call seen, warm-up and contaminated samples included: an upper bound on the
     * kernel's time whatever the scheduler did (the watchdog's scale before any clean median). */
    double fastest_s;
} ft_stats;

/* The fewest samples whose quartiles give the median a confidence interval (ci_rel); below
 * it ci_rel is infinite and no interval is printed. */
#define FT_STATS_MIN_CI 5

/* The statistical fields of st (samples, median, quartiles, ...) from n samples in seconds per
 * call; sorts `x` in place and leaves batch, converged and total_s alone. */
void ft_stats_compute(double *x, int n, ft_stats *st);

/* order[0..n) = the indices of v by increasing value, ties in index order, NaNs last. Returns 0
 * (order then 0..n-1) when out of memory. */
int ft_argsort(const double *v, int n, int *order);

/* Spearman's rank correlation of n pairs (x[i], y[i]): the Pearson correlation of their ranks,
 * tied values sharing the mean of their ranks. 1: y orders the pairs as x does, -1: the
 * reverse. NaN when n < 2, when either side is constant, or out of memory. */
double ft_rank_correlation(const double *x, const double *y, int n);

#ifdef __cplusplus
}
#endif
#endif
