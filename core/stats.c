/* stats.c: robust statistics of samples (see core/stats.h). */
#include "core/stats.h"

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
    /* Quartiles of fewer than FT_STATS_MIN_CI samples say nothing of the median's spread: no
     * interval (one sample would otherwise be "known to +-0%"). */
    st->ci_rel = st->median > 0 && n >= FT_STATS_MIN_CI
                     ? 1.57 * st->iqr / sqrt((double)n) / st->median
                     : INFINITY;
}

typedef struct {
    double v;
    int i;
} indexed;

/* By value, NaN after every number; ties by index. */
static int cmp_indexed(const void *a, const void *b) {
    const indexed *x = a, *y = b;
    int nx = isnan(x->v), ny = isnan(y->v);
    if (nx != ny) return nx - ny;
    if (!nx && x->v != y->v) return (x->v > y->v) - (x->v < y->v);
    return (x->i > y->i) - (x->i < y->i);
}

int ft_argsort(const double *v, int n, int *order) {
    indexed *tmp = malloc(sizeof *tmp * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++) {
        order[i] = i;
        if (tmp) tmp[i] = (indexed){v[i], i};
    }
    if (!tmp) return 0;
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_indexed);
    for (int i = 0; i < n; i++)
        order[i] = tmp[i].i;
    free(tmp);
    return 1;
}

/* The ranks (1-based; ties share their mean) of v[0..n) into r; 0 when out of memory. */
static int ranks_of(const double *v, int n, int *order, double *r) {
    if (!ft_argsort(v, n, order)) return 0;
    for (int a = 0; a < n;) {
        int b = a;
        while (b + 1 < n && v[order[b + 1]] == v[order[a]])
            b++;
        double mean = 0.5 * (a + b) + 1;
        for (int k = a; k <= b; k++)
            r[order[k]] = mean;
        a = b + 1;
    }
    return 1;
}

double ft_rank_correlation(const double *x, const double *y, int n) {
    if (n < 2) return NAN;
    int *order = malloc(sizeof *order * (size_t)n);
    double *rx = malloc(sizeof *rx * (size_t)n * 2);
    double *ry = rx ? rx + n : NULL;
    if (!order || !rx || !ranks_of(x, n, order, rx) || !ranks_of(y, n, order, ry)) {
        free(order);
        free(rx);
        return NAN;
    }
    double mean = 0.5 * (n + 1), sxy = 0, sxx = 0, syy = 0;
    for (int i = 0; i < n; i++) {
        double dx = rx[i] - mean, dy = ry[i] - mean;
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    free(order);
    free(rx);
    return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : NAN;
}
