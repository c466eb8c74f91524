/* device_impl.h: what a device backend provides to device.c (see kernels/cuda/device.h).
 *
 * A backend is a table of functions, as the op backends are. Its device structure starts with a
 * struct ft_dev and its module structure with a struct ft_dev_module; device.c checks arguments
 * and dispatches by the device's table.
 */
#ifndef FT_DEVICE_IMPL_H
#define FT_DEVICE_IMPL_H

#include "cuda/device.h"

typedef struct ft_dev_ops {
    void (*close)(ft_dev *d);
    ft_status (*alloc)(ft_dev *d, size_t bytes, void **ptr, ft_err *err);
    void (*free)(ft_dev *d, void *ptr);
    ft_status (*copy)(ft_dev *d, void *dst, const void *src, size_t bytes, ft_copy_kind kind,
                      ft_err *err);
    ft_status (*memset)(ft_dev *d, void *dst, int byte, size_t bytes, ft_err *err);
    ft_status (*sync)(ft_dev *d, ft_err *err);
    ft_status (*compile)(ft_dev *d, const char *source, const char *const *defines, int ndefines,
                         ft_dev_module **out, ft_err *err);
    /* Compile into the disk cache without loading (any thread, the device's lock not held
     * while the compiler runs); *cached: 1 when the cache had it already. */
    ft_status (*prepare)(ft_dev *d, const char *source, const char *const *defines, int ndefines,
                         int *cached, ft_err *err);
    /* A kernel file as written (the arguments checked by device.c). */
    ft_status (*compile_file)(ft_dev *d, const ft_dev_source *src, ft_dev_module **out,
                              ft_err *err);
    ft_status (*symbol_write)(ft_dev *d, ft_dev_module *m, const char *symbol, const void *host,
                              size_t bytes, ft_err *err);
    ft_status (*kernel_info)(ft_dev_module *m, const char *kernel, ft_kernel_info *info,
                             ft_err *err);
    ft_status (*launch)(ft_dev *d, ft_dev_module *m, const char *kernel, ft_dim3 grid,
                        ft_dim3 block, size_t smem, void **args, ft_err *err);
} ft_dev_ops;
/* The table of a backend whose functions are named after one prefix P: P_close, P_alloc, ...,
 * P_launch. */
#define FT_DEV_OPS(P)                                                                              \
    {.close = P##_close, .alloc = P##_alloc, .free = P##_free, .copy = P##_copy,                   \
     .memset = P##_memset, .sync = P##_sync, .compile = P##_compile, .prepare = P##_prepare,       \
     .compile_file = P##_compile_file, .symbol_write = P##_symbol_write,                           \
     .kernel_info = P##_kernel_info, .launch = P##_launch}

/* What ft_dev_compile does first when a pool compiles this device's modules ahead
 * (prefetch.c): wait for the module there (moving it to the front of the queue when it is still
 * waiting), then go on; FT_OK, or the error its compile failed with. */
typedef ft_status (*ft_dev_settle_fn)(void *pool, const char *source, const char *const *defines,
                                      int ndefines, ft_err *err);

struct ft_dev {
    ft_dev_kind kind;
    const ft_dev_ops *ops;
    ft_dev_props props;
    /* The attached pool, called through a pointer: the pool calls the device (ft_dev_prepare),
     * the device only waits on it. */
    ft_dev_settle_fn settle;
    void *pool;
};

struct ft_dev_module {
    ft_dev *dev;
};

/* Attach a pool to d (settle NULL: detach). Done by the pool's owner while no other thread
 * compiles on d. */
void ft_dev_attach_pool(ft_dev *d, ft_dev_settle_fn settle, void *pool);

/* The backends' open functions. */
ft_status ft_dev_emu_open(int ordinal, ft_dev **out, ft_err *err);

#endif
