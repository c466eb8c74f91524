/* verify.h: checking a backend's outputs against the float64 reference (SPEC.md tolerances).
 *
 * Per output: ||out - ref|| / ||ref|| over the entries where the reference is finite must be
 * under the op's tolerance; where the reference is not finite (the -inf lse of a dropped
 * block) the output must be exactly equal; NaN or Inf where the reference is finite always
 * fails. A scalar compares by relative error.
 */
#ifndef FLARETUNE_VERIFY_H
#define FLARETUNE_VERIFY_H

#include "op/op.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ft_verify_result {
    int ok;
    double worst;        /* largest error / tolerance ratio seen, for ranking        */
    double worst_rel;    /* relative error of the worst output                       */
    double tol;          /* its tolerance                                            */
    char worst_name[32]; /* the output it belongs to                                 */
    char msg[256];       /* one line: why it failed, or the worst error when it passed */
} ft_verify_result;

/* Tolerance of output tensor i of op for float32 inputs (SPEC.md "Tolerances"). */
double ft_verify_tolerance(const ft_op *op, int tensor);

/* Compare the outputs of c (any float dtype) with those of ref (a float64 call of the same op
 * and sizes, as made by ft_call_reference_f64). */
void ft_verify_outputs(const ft_call *c, const ft_call *ref, ft_verify_result *r);

#ifdef __cplusplus
}
#endif
#endif
