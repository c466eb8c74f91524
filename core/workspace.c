/* workspace.c: kernel scratch memory (see core/workspace.h). */
#include "core/workspace.h"

#include <stdint.h>

#include "core/tensor.h"

size_t ft_ws_size(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

void *ft_ws_carve(char **cursor, size_t bytes) {
    void *p = *cursor;
    *cursor += ft_ws_size(bytes);
    return p;
}

void *ft_ws_get(ft_workspace *ws, size_t bytes, ft_err *err) {
    if (bytes > ws->peak) ws->peak = bytes;
    if (bytes <= ws->cap && ws->ptr) return ws->ptr;
    ft_free(ws->ptr);
    ws->ptr = ft_alloc(bytes ? bytes : 64);
    ws->cap = ws->ptr ? bytes : 0;
    if (!ws->ptr) ft_err_set(err, FT_ENOMEM, "out of memory allocating %zu bytes of scratch", bytes);
    return ws->ptr;
}

void ft_ws_free(ft_workspace *ws) {
    ft_free(ws->ptr);
    ws->ptr = NULL;
    ws->cap = 0;
}
