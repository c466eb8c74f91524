/* json.h: JSON forms of the core's records (Jansson), shared by bench, the event log and profiles
 * so a number, a statistic or an environment is written one way everywhere. The op's records
 * (configurations, sizes, attributes) are in op_json.h, the ceilings' in ceilings.h. */
#ifndef FLARETUNE_JSON_H
#define FLARETUNE_JSON_H

#include <jansson.h>

#include "core/env.h"
#include "core/load.h"
#include "core/stats.h"

#ifdef __cplusplus
extern "C" {
#endif

json_t *ft_env_to_json(const ft_env *e);
json_t *ft_stats_to_json(const ft_stats *st);
/* A real, or null when v is not finite (JSON has no Inf or NaN). */
json_t *ft_json_number(double v);
/* A scalar for humans: a string as it is (returned itself), an integer in full, a real %.6g,
 * true or false; `other` for null, an object, an array or no value. Numbers are written to buf,
 * which is returned. */
const char *ft_json_scalar_text(const json_t *v, const char *other, char *buf, size_t n);
/* {"known", "busy", "other_cpus", "steal_frac", "loadavg1", "cpus", "span_s"} */
json_t *ft_load_to_json(const ft_load *l);

#ifdef __cplusplus
}
#endif
#endif
