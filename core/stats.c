/* stats.c: robust statistics of samples (see include/flaretune/stats.h). */
#include "flaretune/stats.h"

#include <math.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Quantile by linear interpolation between order statistics (type 7, as NumPy's default). */
static double quantile(const double *sorted, int n, double q) {
    if (n == 1) return sorted[0];
    double pos = q * (n - 1);
    int lo = (int)floor(pos);
    int hi = lo + 1 < n ? lo + 1 : lo;
    return sorted[lo] + (pos - lo) * (sorted[hi] - sorted[lo]);
}

void ft_stats_compute(double *x, int n, ft_stats *st) {
    st->samples = n;
    if (n <= 0) {
        st->median = st->q1 = st->q3 = st->iqr = st->min = st->max = st->mean = NAN;
        st->stdev = NAN;
        st->ci_rel = INFINITY;
        return;
    }
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    st->median = quantile(x, n, 0.5);
    st->q1 = quantile(x, n, 0.25);
    st->q3 = quantile(x, n, 0.75);
    st->iqr = st->q3 - st->q1;
    st->min = x[0];
    st->max = x[n - 1];
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += x[i];
    st->mean = sum / n;
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += (x[i] - st->mean) * (x[i] - st->mean);
    st->stdev = n > 1 ? sqrt(ss / (n - 1)) : 0;
    st->ci_rel = st->median > 0 ? 1.57 * st->iqr / sqrt((double)n) / st->median : INFINITY;
}
