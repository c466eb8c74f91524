/* report_sweep.h: the measuring side of `flaretune report` (tuner/report.c): the papers' design
 * axes swept as whole drafter steps, resumable through an event log, into a report document
 * (format FT_REPORT_FORMAT, docs/report.md) that report.h renders. */
#ifndef FLARETUNE_REPORT_SWEEP_H
#define FLARETUNE_REPORT_SWEEP_H

#include <jansson.h>

#include "profiles/src/profile.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ft_report_sweep_opts {
    const char *model;         /* the presets' model: "tiny", "small", "qwen3-8b", ...       */
    const char *backend;       /* a backend name or "auto"                                   */
    const ft_profile *profile; /* the configs (NULL: every op's default)                     */
    const char *log;           /* the event log that keeps every measured step (and its lock) */
    const char *dir;           /* created (with its parents) once the presets and backend are
                                  known good, before the log is opened (NULL: none)          */
    const char *command;       /* how to regenerate the report, for the document            */
    double time_s;             /* each measurement's time (ft_step_measure_time; 0: bench's) */
    void (*progress)(void *ctx, const char *what, int done, int total);
    void *progress_ctx;
    volatile int *stop;       /* Ctrl-C: stop before the next step; the log keeps the rest */
    const char *backend_name; /* set by the sweep: the backend resolved                      */
} ft_report_sweep_opts;

void ft_report_sweep_opts_default(ft_report_sweep_opts *o);
/* Measure every point the log does not hold yet (each appended as it is measured), then build
 * the document. FT_EBUSY when another process writes the log; FT_EINVAL when the log holds
 * another sweep (model, backend, device). */
ft_status ft_report_sweep(ft_report_sweep_opts *o, json_t **doc, ft_err *err);

#ifdef __cplusplus
}
#endif
#endif
