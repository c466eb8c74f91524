/* json.h: JSON forms of flaretune's records (Jansson), shared by bench, the event log and
 * profiles so a configuration or an environment is written one way everywhere. */
#ifndef FLARETUNE_JSON_H
#define FLARETUNE_JSON_H

#include <jansson.h>

#include "flaretune/ceilings.h"
#include "flaretune/env.h"
#include "flaretune/load.h"
#include "flaretune/measure.h"
#include "flaretune/op.h"
#include "flaretune/space.h"

#ifdef __cplusplus
extern "C" {
#endif

/* {"name": value, ...}: labels for named parameters, numbers otherwise. */
json_t *ft_config_to_json(const ft_space *s, const ft_config *cfg);
/* The inverse; fails on unknown names or values outside the candidates. */
ft_status ft_config_from_json(const ft_space *s, const json_t *obj, ft_config *cfg, ft_err *err);
json_t *ft_env_to_json(const ft_env *e);
/* {"N": 24, ...} */
json_t *ft_dims_to_json(const ft_call *c);
/* The op's attributes with their values: {"eps": "1e-06", ...} */
json_t *ft_attrs_to_json(const ft_call *c);
json_t *ft_stats_to_json(const ft_stats *st);
/* A real, or null when v is not finite (JSON has no Inf or NaN). */
json_t *ft_json_number(double v);
json_t *ft_ceilings_to_json(const ft_ceilings *c);
/* {"floor_s", "frac", "level", "bytes_per_s", "working_set_bytes", "bound", "suspect"}: where a
 * call of median `median_s` sits under the roof (suspect: above it, a measurement error). */
json_t *ft_roofline_to_json(const ft_roofline *r, double median_s);
/* {"known", "busy", "other_cpus", "steal_frac", "loadavg1", "cpus", "span_s"} */
json_t *ft_load_to_json(const ft_load *l);

#ifdef __cplusplus
}
#endif
#endif
