/* device_impl.h: what a device backend provides to device.c (see include/flaretune/device.h).
 *
 * A backend is a table of functions, as the op backends are. Its device structure starts with a
 * struct ft_dev and its module structure with a struct ft_dev_module; device.c checks arguments
 * and dispatches by the device's table.
 */
#ifndef FT_DEVICE_IMPL_H
#define FT_DEVICE_IMPL_H

#include "flaretune/device.h"

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
    ft_status (*kernel_info)(ft_dev_module *m, const char *kernel, ft_kernel_info *info,
                             ft_err *err);
    ft_status (*launch)(ft_dev *d, ft_dev_module *m, const char *kernel, ft_dim3 grid,
                        ft_dim3 block, size_t smem, void **args, ft_err *err);
} ft_dev_ops;

struct ft_dev {
    ft_dev_kind kind;
    const ft_dev_ops *ops;
    ft_dev_props props;
};

struct ft_dev_module {
    ft_dev *dev;
};

/* The backends' open functions. */
ft_status ft_dev_emu_open(int ordinal, ft_dev **out, ft_err *err);

#endif
