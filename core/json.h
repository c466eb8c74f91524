/* json.h: JSON forms of the core's records (Jansson), shared by bench, the event log and profiles
 * so a number, a statistic or an environment is written one way everywhere. The op's records
 * (configurations, sizes, attributes) are in op_json.h, the ceilings' in ceilings.h. */
#ifndef FLARETUNE_JSON_H
#define FLARETUNE_JSON_H

#include <jansson.h>

#include "core/env.h"
#include "core/load.h"
#include "core/stats.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

json_t *ft_env_to_json(const ft_env *e);
json_t *ft_stats_to_json(const ft_stats *st);
/* The inverse, for the fields ft_stats_to_json writes (a field missing or null: NaN, or 0 for a
 * count). */
void ft_stats_from_json(const json_t *o, ft_stats *st);
/* The scheduler's share of st into o: "discarded", "taken", "lost_frac", "clean" (an unclean
 * median is an upper bound; docs/measurement.md, "A busy machine"). */
void ft_stats_sched_to_json(json_t *o, const ft_stats *st);
/* A real, or null when v is not finite (JSON has no Inf or NaN). */
json_t *ft_json_number(double v);
/* A scalar for humans: a string as it is (returned itself), an integer in full, a real %.6g,
 * true or false; `other` for null, an object, an array or no value. Numbers are written to buf,
 * which is returned. */
const char *ft_json_scalar_text(const json_t *v, const char *other, char *buf, size_t n);
/* {"known", "busy", "other_cpus", "steal_frac", "loadavg1", "cpus", "span_s"} */
json_t *ft_load_to_json(const ft_load *l);
/* A scalar as the text that names it: a string as it is, an integer, a real (%.17g, so it reads
 * back the same), a boolean as 0 or 1. Returns -1, with "?" in buf, for anything else. */
int ft_json_value_text(const json_t *v, char *buf, size_t n);
/* "key=value" appended to the text in buf (k of its n bytes used), after sep unless the text is
 * empty: a string value as it is, any other as an integer (reals read as 0), cut at 63 bytes.
 * Returns the text's length as snprintf counts it (>= n: cut); writes nothing once k >= n. */
size_t ft_json_pair_append(char *buf, size_t n, size_t k, const char *sep, const char *key,
                           const json_t *v);
/* "k=v,k=v" of an object of strings and integers, in its order (a configuration as its label;
 * any other value reads as an integer), cut at n. Returns the length written, 0 for none. */
size_t ft_json_pairs_text(const json_t *obj, char *buf, size_t n);
/* Write doc to path all or nothing (ft_file_write), as json_dumpf writes it with flags,
 * followed by a newline when newline. */
ft_status ft_json_save(const json_t *doc, const char *path, size_t flags, int newline,
                       ft_err *err);

#ifdef __cplusplus
}
#endif
#endif
