/* workspace.h: the scratch memory a kernel uses beyond its inputs and outputs.
 *
 * Kernels take every byte of scratch from the call's workspace, never from malloc, so that (1)
 * repeated calls in a timing loop reuse one allocation, as cuBLAS workspaces do, and (2) the
 * peak extra memory of each variant is known exactly and reported (`peak_extra_bytes`).
 */
#ifndef FLARETUNE_WORKSPACE_H
#define FLARETUNE_WORKSPACE_H

#include <stddef.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ft_workspace {
    void *ptr;
    size_t cap;  /* bytes allocated */
    size_t peak; /* largest request since creation or the last reset of the peak */
} ft_workspace;

/* A buffer of at least `bytes` (64-byte aligned), reusing or growing the workspace. Contents
 * are undefined. One request per kernel call: carve several buffers out of it with
 * ft_ws_carve. NULL with an error on allocation failure. */
void *ft_ws_get(ft_workspace *ws, size_t bytes, ft_err *err);
/* Bytes needed for a buffer of `bytes` carved at 64-byte alignment (sum these for ft_ws_get). */
size_t ft_ws_size(size_t bytes);
/* Take `bytes` from *cursor (64-byte aligned) and advance it. */
void *ft_ws_carve(char **cursor, size_t bytes);
void ft_ws_free(ft_workspace *ws);

#ifdef __cplusplus
}
#endif
#endif
