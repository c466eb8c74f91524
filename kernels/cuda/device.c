/* device.c: the device interface of kernels/cuda/device.h, dispatched by kind.
 *
 * FT_DEV_EMU is the SIMT emulator (device_emu.c); FT_DEV_CUDA is the GPU (device_cuda.c, built
 * with the CUDA toolkit). Arguments are checked here once, so the
 * backends can assume a device, a module of that device and non-NULL outputs.
 */
#include "device_impl.h"

#include <stddef.h>

#include "runtime.h"

/* ---- the GPU ---------------------------------------------------------------------------------- */

#if FT_HAVE_CUDA
ft_status ft_dev_cuda_open(int ordinal, ft_dev **out, ft_err *err); /* device_cuda.c */
static ft_status dev_cuda_open(int ordinal, ft_dev **out, ft_err *err) {
    return ft_dev_cuda_open(ordinal, out, err);
}
#else
/* Built without the CUDA toolkit: no GPU device, which callers treat like a machine without a
 * GPU. */
static ft_status dev_cuda_open(int ordinal, ft_dev **out, ft_err *err) {
    (void)ordinal;
    *out = NULL;
    return ft_err_set(err, FT_ENODEV, "flaretune was built without the CUDA toolkit");
}
void *ft_dev_cuda_stream(ft_dev *d) {
    (void)d;
    return NULL;
}
#endif

/* ---- dispatch -------------------------------------------------------------------------------- */

ft_status ft_dev_open(ft_dev_kind kind, int ordinal, ft_dev **out, ft_err *err) {
    if (!out) return ft_err_set(err, FT_EINVAL, "ft_dev_open: no place for the device");
    *out = NULL;
    switch (kind) {
    case FT_DEV_CUDA: return dev_cuda_open(ordinal, out, err);
    case FT_DEV_EMU: return ft_dev_emu_open(ordinal, out, err);
    }
    return ft_err_set(err, FT_EINVAL, "ft_dev_open: unknown device kind %d", (int)kind);
}

void ft_dev_close(ft_dev *d) {
    if (d) d->ops->close(d);
}

ft_dev_kind ft_dev_kind_of(const ft_dev *d) { return d->kind; }

const ft_dev_props *ft_dev_props_of(const ft_dev *d) { return &d->props; }

ft_status ft_dev_alloc(ft_dev *d, size_t bytes, void **ptr, ft_err *err) {
    if (!d || !ptr) return ft_err_set(err, FT_EINVAL, "ft_dev_alloc: no device or no pointer");
    *ptr = NULL;
    return d->ops->alloc(d, bytes, ptr, err);
}

void ft_dev_free(ft_dev *d, void *ptr) {
    if (d && ptr) d->ops->free(d, ptr);
}

ft_status ft_dev_copy(ft_dev *d, void *dst, const void *src, size_t bytes, ft_copy_kind kind,
                      ft_err *err) {
    if (!d) return ft_err_set(err, FT_EINVAL, "ft_dev_copy: no device");
    if (bytes == 0) return FT_OK;
    if (!dst || !src) return ft_err_set(err, FT_EINVAL, "ft_dev_copy: NULL pointer");
    if (kind != FT_COPY_H2D && kind != FT_COPY_D2H && kind != FT_COPY_D2D)
        return ft_err_set(err, FT_EINVAL, "ft_dev_copy: unknown copy kind %d", (int)kind);
    return d->ops->copy(d, dst, src, bytes, kind, err);
}

ft_status ft_dev_memset(ft_dev *d, void *dst, int byte, size_t bytes, ft_err *err) {
    if (!d) return ft_err_set(err, FT_EINVAL, "ft_dev_memset: no device");
    if (bytes == 0) return FT_OK;
    if (!dst) return ft_err_set(err, FT_EINVAL, "ft_dev_memset: NULL pointer");
    return d->ops->memset(d, dst, byte, bytes, err);
}

ft_status ft_dev_sync(ft_dev *d, ft_err *err) {
    if (!d) return ft_err_set(err, FT_EINVAL, "ft_dev_sync: no device");
    return d->ops->sync(d, err);
}

/* The arguments of a module's compile (`what`: the caller's name, for the message). */
static ft_status module_args(const char *what, const ft_dev *d, const char *source,
                             const char *const *defines, int ndefines, ft_err *err) {
    if (!d || !source || !*source)
        return ft_err_set(err, FT_EINVAL, "%s: no device or no source", what);
    if (ndefines < 0 || (ndefines > 0 && !defines))
        return ft_err_set(err, FT_EINVAL, "%s: %d defines but no array", what, ndefines);
    for (int i = 0; i < ndefines; i++)
        if (!defines[i]) return ft_err_set(err, FT_EINVAL, "%s: define %d is NULL", what, i);
    return FT_OK;
}

ft_status ft_dev_compile(ft_dev *d, const char *source, const char *const *defines, int ndefines,
                         ft_dev_module **out, ft_err *err) {
    if (!out) return ft_err_set(err, FT_EINVAL, "ft_dev_compile: no place for the module");
    *out = NULL;
    ft_status st = module_args("ft_dev_compile", d, source, defines, ndefines, err);
    if (st) return st;
    /* A module a pool holds is compiled there (or being): wait for it rather than compile it a
     * second time; the compile below then finds it in the disk cache. */
    if (d->settle) {
        ft_status s = d->settle(d->pool, source, defines, ndefines, err);
        if (s) return s;
    }
    return d->ops->compile(d, source, defines, ndefines, out, err);
}

ft_status ft_dev_prepare(ft_dev *d, const char *source, const char *const *defines, int ndefines,
                         int *cached, ft_err *err) {
    int dummy;
    if (!cached) cached = &dummy;
    *cached = 0;
    ft_status st = module_args("ft_dev_prepare", d, source, defines, ndefines, err);
    if (st) return st;
    return d->ops->prepare(d, source, defines, ndefines, cached, err);
}

void ft_dev_attach_pool(ft_dev *d, ft_dev_settle_fn settle, void *pool) {
    if (!d) return;
    d->settle = settle;
    d->pool = settle ? pool : NULL;
}

ft_status ft_dev_kernel_info(ft_dev_module *m, const char *kernel, ft_kernel_info *info,
                             ft_err *err) {
    if (!m || !kernel || !info)
        return ft_err_set(err, FT_EINVAL, "ft_dev_kernel_info: no module, kernel or output");
    return m->dev->ops->kernel_info(m, kernel, info, err);
}

ft_status ft_dev_launch(ft_dev *d, ft_dev_module *m, const char *kernel, ft_dim3 grid,
                        ft_dim3 block, size_t smem, void **args, ft_err *err) {
    if (!d || !m || !kernel)
        return ft_err_set(err, FT_EINVAL, "ft_dev_launch: no device, module or kernel");
    if (m->dev != d)
        return ft_err_set(err, FT_EINVAL,
                          "ft_dev_launch: the module of '%s' belongs to another "
                          "device",
                          kernel);
    return d->ops->launch(d, m, kernel, grid, block, smem, args, err);
}

/* A list of n strings (`what` for the message), none NULL or empty. */
static ft_status list_args(const char *what, const char *const *v, int n, ft_err *err) {
    if (n < 0 || (n > 0 && !v))
        return ft_err_set(err, FT_EINVAL, "ft_dev_compile_file: %d %s but no array", n, what);
    for (int i = 0; i < n; i++)
        if (!v[i] || !*v[i])
            return ft_err_set(err, FT_EINVAL, "ft_dev_compile_file: %s %d is empty", what, i);
    return FT_OK;
}

ft_status ft_dev_compile_file(ft_dev *d, const ft_dev_source *src, ft_dev_module **out,
                              ft_err *err) {
    if (!out) return ft_err_set(err, FT_EINVAL, "ft_dev_compile_file: no place for the module");
    *out = NULL;
    if (!d || !src || !src->path || !*src->path)
        return ft_err_set(err, FT_EINVAL, "ft_dev_compile_file: no device or no file");
    ft_status st = list_args("defines", src->defines, src->ndefines, err);
    if (!st) st = list_args("options", src->options, src->noptions, err);
    if (!st) st = list_args("kernels", src->kernels, src->nkernels, err);
    if (!st) st = list_args("symbols", src->symbols, src->nsymbols, err);
    if (st) return st;
    return d->ops->compile_file(d, src, out, err);
}

ft_status ft_dev_symbol_write(ft_dev *d, ft_dev_module *m, const char *symbol, const void *host,
                              size_t bytes, ft_err *err) {
    if (!d || !m || !symbol || (!host && bytes))
        return ft_err_set(err, FT_EINVAL, "ft_dev_symbol_write: no device, module, symbol or data");
    if (m->dev != d)
        return ft_err_set(err, FT_EINVAL,
                          "ft_dev_symbol_write: the module of '%s' belongs to another device",
                          symbol);
    return d->ops->symbol_write(d, m, symbol, host, bytes, err);
}
