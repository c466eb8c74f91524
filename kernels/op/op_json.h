/* op_json.h: JSON forms of an op's records: configurations, sizes and attributes, written one
 * way in events, profiles and bench's output. */
#ifndef FLARETUNE_OP_JSON_H
#define FLARETUNE_OP_JSON_H

#include <jansson.h>

#include "core/json.h"
#include "op/op.h"
#include "op/space.h"

#ifdef __cplusplus
extern "C" {
#endif

/* {"name": value, ...}: labels for named parameters, numbers otherwise. */
json_t *ft_config_to_json(const ft_space *s, const ft_config *cfg);
/* The inverse; fails on unknown names or values outside the candidates. A record written before
 * a tunable was renamed is read under the former name too (ft_space_renamed). */
ft_status ft_config_from_json(const ft_space *s, const json_t *obj, ft_config *cfg, ft_err *err);
/* Rename the former names of obj's keys in place (ft_space_renamed); the renames are described
 * in `note` ("cpt -> vecs_per_thread, ...", empty when none). Returns how many. */
int ft_config_json_rename(const ft_space *s, json_t *obj, char *note, size_t n);
/* {"N": 24, ...} */
json_t *ft_dims_to_json(const ft_call *c);
/* The op's attributes with their values: {"eps": "1e-06", ...} */
json_t *ft_attrs_to_json(const ft_call *c);

#ifdef __cplusplus
}
#endif
#endif
