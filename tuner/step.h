/* step.h: one whole drafter step, built from the ops with a profile's tuned configs.
 *
 * A step is what a serving engine (decode) or a trainer (train) runs per drafter call, as the
 * list of op calls SPEC.md's "One draft layer" gives: the context's fusion and K/V projection,
 * then per draft layer the block's q and k/v projections, its attention, the output projection
 * and the MLP's two GEMMs, then the LM head (decode) or the loss (train). In training every call
 * runs its backward too (one fused call per op, as the tuned kernels do); the K/V projection,
 * which has no backward kernel, adds its backward GEMMs as `linear` calls (grad_only), labelled
 * so. The elementwise parts (norms, RoPE on the block, SiLU gating, residual adds) are not
 * timed, and the step says so.
 *
 * Each draft layer has its own tensors, as a real drafter has its own weights, so the whole step
 * streams through every layer's weights. Every stage is timed alone (the same call repeated, the
 * measurement of `bench`; stages that repeat per layer at the same sizes are timed once), and
 * the whole step end to end (on the CPU back to back; on a GPU captured once as a CUDA graph and
 * replayed, when the backend can).
 */
#ifndef FLARETUNE_STEP_H
#define FLARETUNE_STEP_H

#include <jansson.h>
#include <stdint.h>

#include "core/load.h"
#include "core/stats.h"
#include "core/status.h"
#include "core/workspace.h"
#include "op/backend.h"
#include "op/op.h"
#include "op/space.h"
#include "profiles/src/profile.h"
#include "tuner/measure.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FT_STEP_FORMAT "flaretune-step/1"

typedef struct ft_step_stage {
    char name[32];  /* "fusion", "kv_proj", "q_proj", ..., "lm_head", "loss"              */
    int layer;      /* draft layer 0..D-1, or -1 outside the layers                      */
    char pass[16];  /* "forward", "fwd+bwd" or "backward"                                 */
    char note[160]; /* what the stage stands for when it is not the op itself ("" if none) */
    ft_call call;
    ft_config cfg;
    char cfg_from[24]; /* "profile", "profile (nearest)" or "default"                    */
    char cfg_why[320]; /* with a profile: why the default, or what the entry's run changed
                        * (a thread count clamped to the cores); "" when nothing to say     */
    int twin;          /* an earlier stage with the same op, sizes and attributes, or -1  */
    ft_stats alone;    /* timed alone (copied from its twin when it has one)              */
} ft_step_stage;

typedef struct ft_step {
    ft_preset preset;
    const ft_backend *be;
    char device[256];
    char loss_scheme[16];
    int n;
    ft_step_stage *stages;
    ft_stats whole;      /* the whole step end to end                                      */
    char whole_mode[96]; /* how: "back to back (host clock)", "cuda graph", ...          */
    double sum_alone_s;  /* sum over the stages of their medians alone                     */
    double bytes;        /* the tensors the step holds                                     */
    ft_load load;        /* the machine while the step was measured (core/load.h): busy, the
                            medians may read slow though no sample lost time to the scheduler
                            (other processes contend for caches, memory and SMT siblings) */
    ft_workspace ws;     /* every stage\'s scratch: one allocation, reused, as the tuner does */
} ft_step;

typedef struct ft_step_opts {
    const char *backend;       /* a backend name or "auto" (NULL: auto)                     */
    const ft_profile *profile; /* the configs to run (NULL: every op's default)           */
    const char *scheme;        /* train: the loss's weighting scheme (NULL: decay)          */
    uint64_t seed;             /* the inputs' seed (0: 1)                                   */
    ft_measure_opts measure;   /* for every stage alone and for the whole step             */
    /* Called before each timing with what is timed and how far along the step is. */
    void (*progress)(void *ctx, const char *what, int done, int total);
    void *progress_ctx;
    volatile int *stop; /* Ctrl-C: stop before the next timing (FT_EIO "interrupted") */
} ft_step_opts;

/* Defaults: auto backend, no profile, decay, seed 1, bench's measurement. */
void ft_step_opts_default(ft_step_opts *o);
/* Bench's measurement with every sample window shortened to time_s seconds (the minimum time
 * of a measurement; its cap is ten times that, its warm-up at most time_s); time_s <= 0 keeps
 * bench's. What `step --time` and `report --time` set. */
void ft_step_measure_time(double time_s, ft_measure_opts *m);

/* Build the step of preset p (its phase decides inference or training): every stage's call
 * sized, allocated and filled, its config looked up. Fails before anything is allocated when
 * the tensors would not fit in memory, with one line saying how much they need. */
ft_status ft_step_build(ft_step *s, const ft_preset *p, const ft_step_opts *o, ft_err *err);
/* Time every distinct stage alone, then the whole step. */
ft_status ft_step_measure(ft_step *s, const ft_step_opts *o, ft_err *err);
/* The op named like stage i, when i is its first stage (0 when an earlier stage has that name):
 * its stages' count and the sum of their medians alone, in *count and *sum_s. */
int ft_step_op_sum(const ft_step *s, int i, int *count, double *sum_s);
/* The sum of the medians alone of layer l's stages (-1: the context and the head). */
double ft_step_layer_sum(const ft_step *s, int l);
/* The step as a document (format FT_STEP_FORMAT, docs/step.md); NULL when out of memory. */
json_t *ft_step_to_json(const ft_step *s);
void ft_step_free(ft_step *s);

#ifdef __cplusplus
}
#endif
#endif
