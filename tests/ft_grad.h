/* ft_grad.h: helpers of the float64 gradient tests: double arrays, random fills, and central
 * finite differences checked against an analytic gradient. Include after ft_test.h. */
#ifndef FT_GRAD_H
#define FT_GRAD_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "ft_test.h"

static inline double *dalloc(int64_t n) { return ft_test_alloc((size_t)n * sizeof(double)); }

static inline void fill_normal(ft_rng *r, double *a, int64_t n, double sd) {
    for (int64_t i = 0; i < n; i++)
        a[i] = sd * ft_rng_normal(r);
}

static inline double sum_prod(const double *a, const double *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static inline double norm2(const double *a, int64_t n) { return sqrt(sum_prod(a, a, n)); }

typedef double (*objective_fn)(void *ctx);

/* d obj / d p[i] by central differences with a relative step. */
static inline double fd_at(objective_fn obj, void *ctx, double *p, int64_t i) {
    const double save = p[i];
    const double h = 1e-5 * fmax(1.0, fabs(save));
    p[i] = save + h;
    const double up = p[i];
    const double fp = obj(ctx);
    p[i] = save - h;
    const double dn = p[i];
    const double fm = obj(ctx);
    p[i] = save;
    return (fp - fm) / (up - dn); /* the step actually taken, after rounding */
}

/* ||grad - fd|| / ||fd|| at every entry (count >= n) or at `count` random entries of p; the
 * norm of the finite-difference gradient goes to *fd_norm so the check cannot be vacuous. */
static inline double fd_check(objective_fn obj, void *ctx, double *p, const double *grad, int64_t n,
                              int64_t count, ft_rng *rng, double *fd_norm) {
    const int64_t m = count >= n ? n : count;
    double *an = dalloc(m), *fd = dalloc(m);
    for (int64_t s = 0; s < m; s++) {
        const int64_t i = count >= n ? s : (int64_t)ft_rng_below(rng, (uint64_t)n);
        an[s] = grad[i];
        fd[s] = fd_at(obj, ctx, p, i);
    }
    const double err = ft_test_rel_err(an, fd, m);
    *fd_norm = norm2(fd, m);
    free(an);
    free(fd);
    return err;
}

#define GRAD_TOL 1e-6

#define CHECK_GRAD(name, obj, ctx, p, grad, n, count, rng)                                         \
    do {                                                                                           \
        double fdn_;                                                                               \
        double err_ = fd_check(obj, ctx, p, grad, n, count, rng, &fdn_);                           \
        FT_CHECK(err_ < GRAD_TOL, "%s: rel err vs finite differences %.3g", name, err_);           \
        FT_CHECK(fdn_ > 1e-3, "%s: finite-difference gradient is ~0 (%.3g): trivial check", name,  \
                 fdn_);                                                                            \
    } while (0)

#endif
