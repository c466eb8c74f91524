/* verify.c: compare a backend's outputs with the float64 reference (see
 * tuner/verify.h). */
#include "tuner/verify.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

double ft_verify_tolerance(const ft_op *op, int tensor) {
    (void)tensor;
    /* Every output of the loss depends on a reduction over the vocabulary. */
    return strcmp(op->name, "loss") == 0 ? 1e-4 : 1e-5;
}

void ft_verify_outputs(const ft_call *c, const ft_call *ref, ft_verify_result *r) {
    memset(r, 0, sizeof *r);
    r->ok = 1;
    for (int i = 0; i < c->op->ntensors; i++) {
        const ft_tensor_spec *ts = &c->op->tensors[i];
        if (!ft_call_uses(c, i) || (ts->role != FT_ROLE_OUT && ts->role != FT_ROLE_GRAD_OUT))
            continue;
        const ft_tensor *out = c->t[i], *want = ref->t[i];
        /* bf16 storage (SPEC.md "Tolerances": bf16 inputs under 1e-2). */
        double tol = c->attrs.dtype ? 1e-2 : ft_verify_tolerance(c->op, i);
        int64_t n = ft_tensor_numel(want);
        double num = 0, den = 0;
        int64_t bad = -1;
        for (int64_t k = 0; k < n; k++) {
            double a = ft_tensor_get(out, k), b = ft_tensor_get(want, k);
            if (!isfinite(b)) {
                if (!(a == b)) bad = k;
            } else if (!isfinite(a)) {
                bad = k;
            } else {
                num += (a - b) * (a - b);
                den += b * b;
            }
            if (bad >= 0) {
                r->ok = 0;
                snprintf(r->msg, sizeof r->msg, "%s[%lld] = %g where the reference has %g",
                         ts->name, (long long)bad, a, b);
                snprintf(r->worst_name, sizeof r->worst_name, "%s", ts->name);
                r->worst = INFINITY;
                r->worst_rel = INFINITY;
                r->tol = tol;
                return;
            }
        }
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        if (rel / tol > r->worst || !r->worst_name[0]) {
            r->worst = rel / tol;
            r->worst_rel = rel;
            r->tol = tol;
            snprintf(r->worst_name, sizeof r->worst_name, "%s", ts->name);
        }
        if (rel > tol) r->ok = 0;
    }
    snprintf(r->msg, sizeof r->msg, "%s: relative error %.3g %s tolerance %.0e", r->worst_name,
             r->worst_rel, r->ok ? "within" : "exceeds", r->tol);
}
