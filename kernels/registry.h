/* registry.h: every op and every backend, named once (registry.c): the lists and lookups the
 * front ends use (`flaretune list`, a name on the command line, the choice of `auto`).
 */
#ifndef FT_KERNELS_REGISTRY_H
#define FT_KERNELS_REGISTRY_H

#include "core/status.h"
#include "op/backend.h"
#include "op/op.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ops, in the order `flaretune list` prints them. */
int ft_op_count(void);
const ft_op *ft_op_at(int i);
/* Finds an op by name; on failure the error lists the known ops. */
const ft_op *ft_op_find(const char *name, ft_err *err);

/* Every backend, in order of preference for "auto". */
int ft_backend_count(void);
const ft_backend *ft_backend_at(int i);
/* Find by name; "auto" picks the best available backend that implements op (op may be NULL).
 * Fails with FT_EINVAL for an unknown name (listing the known ones), FT_ENODEV when the backend
 * is built but cannot run here, FT_EUNSUPPORTED when it lacks the op. */
ft_status ft_backend_resolve(const char *name, const ft_op *op, const ft_backend **out,
                             ft_err *err);

#ifdef __cplusplus
}
#endif
#endif
