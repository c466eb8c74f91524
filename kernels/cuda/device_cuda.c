/* device_cuda.c: the GPU as a device (FT_DEV_CUDA of kernels/cuda/device.h).
 *
 * Written against the CUDA runtime API (libcudart, found through the binary's RUNPATH): the
 * runtime loads the driver (libcuda) when the first call needs it, so the same binary starts on
 * machines without a driver and reports "no GPU" instead of failing to load. Modules are CUBINs from NVRTC (nvrtc.c) for the
 * device's exact architecture (sm_90a on Hopper: the 'a' features such as wgmma need it), loaded
 * with cudaLibraryLoadData; kernels are found by name with cudaLibraryGetKernel and launched with
 * cudaLaunchKernel. Every launch, copy and memset goes to one non-blocking stream per device, so
 * the timers (timer.c) and cuBLASLt (gemm.c) see the same ordered work.
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "device_impl.h"
#include "nvrtc.h"

typedef struct cuda_kernel {
    struct cuda_kernel *next;
    char name[96];
    cudaKernel_t k;
    size_t smem_optin; /* dynamic shared memory already allowed by cudaFuncSetAttribute */
} cuda_kernel;

typedef struct cuda_module {
    ft_dev_module base;
    struct cuda_module *next;
    char key[33];
    char source[128];
    cudaLibrary_t lib;
    ft_nvrtc_result res; /* CUBIN freed once loaded; the ptxas report stays */
    cuda_kernel *kernels;
} cuda_module;

typedef struct cuda_dev {
    ft_dev base;
    int ordinal;
    cudaStream_t stream;
    cuda_module *modules;
    pthread_mutex_t lock;
} cuda_dev;

static cuda_dev *cuda_of(ft_dev *d) { return (cuda_dev *)d; }

ft_status ft_cuda_error_status(int cuda_error, ft_status otherwise) {
    switch ((cudaError_t)cuda_error) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure: return FT_ELOST;
    case cudaErrorMemoryAllocation: return FT_ENOMEM;
    default: return otherwise;
    }
}

static ft_status fail(ft_err *err, cudaError_t e, const char *what) {
    ft_status s = ft_cuda_error_status(e, FT_EINTERNAL);
    return ft_err_set(err, s, "CUDA %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

void *ft_dev_cuda_stream(ft_dev *d) {
    return d && d->kind == FT_DEV_CUDA ? (void *)cuda_of(d)->stream : NULL;
}

static ft_status cu_alloc(ft_dev *d, size_t bytes, void **ptr, ft_err *err) {
    (void)d;
    cudaError_t e = cudaMalloc(ptr, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        *ptr = NULL;
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        return ft_err_set(err, FT_ENOMEM, "CUDA: cannot allocate %.1f MiB on the GPU (%.1f MiB free): %s",
                          (double)bytes / 1048576.0, (double)fr / 1048576.0, cudaGetErrorString(e));
    }
    return FT_OK;
}

static void cu_free(ft_dev *d, void *ptr) {
    /* Work that may still use ptr is on the stream: wait for it first. */
    cudaStreamSynchronize(cuda_of(d)->stream);
    cudaFree(ptr);
}

static ft_status cu_copy(ft_dev *d, void *dst, const void *src, size_t bytes, ft_copy_kind kind,
                         ft_err *err) {
    enum cudaMemcpyKind k = kind == FT_COPY_H2D   ? cudaMemcpyHostToDevice
                            : kind == FT_COPY_D2H ? cudaMemcpyDeviceToHost
                                                  : cudaMemcpyDeviceToDevice;
    cudaStream_t s = cuda_of(d)->stream;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, k, s);
    /* Host memory may be reused as soon as we return: copies to or from it complete here. */
    if (e == cudaSuccess && kind != FT_COPY_D2D) e = cudaStreamSynchronize(s);
    return e == cudaSuccess ? FT_OK : fail(err, e, "copy");
}

static ft_status cu_memset(ft_dev *d, void *dst, int byte, size_t bytes, ft_err *err) {
    cudaError_t e = cudaMemsetAsync(dst, byte, bytes, cuda_of(d)->stream);
    return e == cudaSuccess ? FT_OK : fail(err, e, "memset");
}

static ft_status cu_sync(ft_dev *d, ft_err *err) {
    cudaError_t e = cudaStreamSynchronize(cuda_of(d)->stream);
    return e == cudaSuccess ? FT_OK : fail(err, e, "kernel execution");
}

/* Load a compiled module (or find it loaded already); res is taken over either way. */
static ft_status load_result(cuda_dev *d, ft_nvrtc_result res, const char *source,
                             ft_dev_module **out, ft_err *err) {
    ft_dev *dev = &d->base;
    pthread_mutex_lock(&d->lock);
    for (cuda_module *m = d->modules; m; m = m->next)
        if (strcmp(m->key, res.key) == 0) {
            pthread_mutex_unlock(&d->lock);
            ft_nvrtc_result_free(&res);
            *out = &m->base;
            return FT_OK;
        }
    cuda_module *m = calloc(1, sizeof *m);
    if (!m) {
        pthread_mutex_unlock(&d->lock);
        ft_nvrtc_result_free(&res);
        return ft_err_set(err, FT_ENOMEM, "out of memory");
    }
    cudaError_t e = cudaLibraryLoadData(&m->lib, res.cubin, NULL, NULL, 0, NULL, NULL, 0);
    if (e != cudaSuccess) {
        pthread_mutex_unlock(&d->lock);
        ft_nvrtc_result_free(&res);
        free(m);
        return ft_err_set(err, FT_EINTERNAL, "CUDA cannot load the module of %s for %s: %s",
                          source, d->base.props.arch, cudaGetErrorString(e));
    }
    free(res.cubin);
    res.cubin = NULL;
    m->res = res;
    m->base.dev = dev;
    snprintf(m->key, sizeof m->key, "%s", res.key);
    snprintf(m->source, sizeof m->source, "%s", source);
    m->next = d->modules;
    d->modules = m;
    pthread_mutex_unlock(&d->lock);
    *out = &m->base;
    return FT_OK;
}

static ft_status cu_compile(ft_dev *dev, const char *source, const char *const *defines,
                            int ndefines, ft_dev_module **out, ft_err *err) {
    cuda_dev *d = cuda_of(dev);
    ft_nvrtc_result res;
    ft_status s = ft_nvrtc_compile(source, defines, ndefines, d->base.props.arch, &res, err);
    if (s) return s;
    return load_result(d, res, source, out, err);
}

/* A file as written: its kernels and symbols are NVRTC name expressions ("convolution_kernel",
 * "&d_filter"), so C++ names resolve to their mangled ones. */
static ft_status cu_compile_file(ft_dev *dev, const ft_dev_source *src, ft_dev_module **out,
                                 ft_err *err) {
    cuda_dev *d = cuda_of(dev);
    int n = src->nkernels + src->nsymbols;
    if (n > FT_NVRTC_MAX_NAMES)
        return ft_err_set(err, FT_EINVAL, "%s: %d kernels and symbols, at most %d", src->path, n,
                          FT_NVRTC_MAX_NAMES);
    char exprs[FT_NVRTC_MAX_NAMES][128];
    const char *names[FT_NVRTC_MAX_NAMES];
    for (int i = 0; i < n; i++) {
        const char *nm = i < src->nkernels ? src->kernels[i] : src->symbols[i - src->nkernels];
        if ((size_t)snprintf(exprs[i], sizeof exprs[i], "%s%s", i < src->nkernels ? "" : "&",
                             nm) >= sizeof exprs[i])
            return ft_err_set(err, FT_EINVAL, "%s: the name '%s' is too long", src->path, nm);
        names[i] = exprs[i];
    }
    ft_nvrtc_file f = {src->path, src->defines, src->ndefines, src->options, src->noptions,
                       names, n};
    ft_nvrtc_result res;
    ft_status s = ft_nvrtc_compile_file(&f, d->base.props.arch, &res, err);
    if (s) return s;
    const char *base = strrchr(src->path, '/') ? strrchr(src->path, '/') + 1 : src->path;
    return load_result(d, res, base, out, err);
}

/* Into NVRTC's disk cache only: the CUBIN is read back by cu_compile when the module is needed.
 * NVRTC runs on the calling thread, without the device's lock. */
static ft_status cu_prepare(ft_dev *dev, const char *source, const char *const *defines,
                            int ndefines, int *cached, ft_err *err) {
    ft_nvrtc_result res;
    ft_status s = ft_nvrtc_compile(source, defines, ndefines, dev->props.arch, &res, err);
    if (s) return s;
    *cached = res.cached;
    ft_nvrtc_result_free(&res);
    return FT_OK;
}

static ft_status find_kernel(cuda_module *m, const char *name, cuda_kernel **out, ft_err *err) {
    for (cuda_kernel *k = m->kernels; k; k = k->next)
        if (strcmp(k->name, name) == 0) {
            *out = k;
            return FT_OK;
        }
    cuda_kernel *k = calloc(1, sizeof *k);
    if (!k) return ft_err_set(err, FT_ENOMEM, "out of memory");
    const char *low = ft_nvrtc_lowered(&m->res, name); /* a file's kernel, by its written name */
    cudaError_t e = cudaLibraryGetKernel(&k->k, m->lib, low ? low : name);
    if (e != cudaSuccess) {
        free(k);
        return ft_err_set(err, FT_EINVAL, "module %s has no kernel '%s' (%s)", m->source, name,
                          cudaGetErrorString(e));
    }
    snprintf(k->name, sizeof k->name, "%s", name);
    k->next = m->kernels;
    m->kernels = k;
    *out = k;
    return FT_OK;
}

static ft_status cu_kernel_info(ft_dev_module *mod, const char *kernel, ft_kernel_info *info,
                                ft_err *err) {
    cuda_module *m = (cuda_module *)mod;
    const ft_nvrtc_kernel *r = ft_nvrtc_kernel_of(&m->res, kernel);
    if (!r) return ft_err_set(err, FT_EINVAL, "module %s has no kernel '%s'", m->source, kernel);
    *info = r->info;
    cuda_kernel *k;
    ft_status s = find_kernel(m, kernel, &k, err);
    if (s) return s;
    struct cudaFuncAttributes a;
    if (cudaFuncGetAttributes(&a, (const void *)k->k) == cudaSuccess) {
        info->max_threads = a.maxThreadsPerBlock;
        info->local_bytes = a.localSizeBytes;
        if (!info->regs) info->regs = a.numRegs;
    }
    return FT_OK;
}

static ft_status cu_symbol_write(ft_dev *dev, ft_dev_module *mod, const char *symbol,
                                 const void *host, size_t bytes, ft_err *err) {
    cuda_dev *d = cuda_of(dev);
    cuda_module *m = (cuda_module *)mod;
    char expr[160];
    snprintf(expr, sizeof expr, "&%s", symbol);
    const char *low = ft_nvrtc_lowered(&m->res, expr);
    if (!low)
        return ft_err_set(err, FT_EINVAL,
                          "%s has no symbol '%s' the host may write (name it in "
                          "ft_dev_source.symbols)",
                          m->source, symbol);
    void *dptr = NULL;
    size_t size = 0;
    cudaError_t e = cudaLibraryGetGlobal(&dptr, &size, m->lib, low);
    if (e != cudaSuccess)
        return ft_err_set(err, FT_EINVAL, "%s: symbol '%s' (%s): %s", m->source, symbol, low,
                          cudaGetErrorString(e));
    if (bytes > size)
        return ft_err_set(err, FT_EINVAL, "symbol '%s' of %s has %zu bytes, %zu were to be written",
                          symbol, m->source, size, bytes);
    /* In stream order with the launches, complete when this returns (host memory is the
     * caller's again). */
    e = cudaMemcpyAsync(dptr, host, bytes, cudaMemcpyHostToDevice, d->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(d->stream);
    return e == cudaSuccess ? FT_OK : fail(err, e, "copy to a symbol");
}

static ft_status cu_launch(ft_dev *dev, ft_dev_module *mod, const char *kernel, ft_dim3 grid,
                           ft_dim3 block, size_t smem, void **args, ft_err *err) {
    cuda_dev *d = cuda_of(dev);
    cuda_module *m = (cuda_module *)mod;
    pthread_mutex_lock(&d->lock);
    cuda_kernel *k;
    ft_status s = find_kernel(m, kernel, &k, err);
    if (s == FT_OK && smem > 48 * 1024 && smem > k->smem_optin) {
        cudaError_t e = cudaFuncSetAttribute((const void *)k->k,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess)
            s = ft_err_set(err, FT_EINVAL,
                           "%s: %zu bytes of dynamic shared memory are more than the device "
                           "allows (%zu): %s",
                           kernel, smem, d->base.props.smem_per_block_optin, cudaGetErrorString(e));
        else
            k->smem_optin = smem;
    }
    pthread_mutex_unlock(&d->lock);
    if (s) return s;
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return FT_OK; /* nothing to do */
    dim3 g = {grid.x, grid.y, grid.z}, b = {block.x, block.y, block.z};
    cudaError_t e = cudaLaunchKernel((const void *)k->k, g, b, args, smem, d->stream);
    /* (a bad launch is the caller's values; an earlier kernel's fault may surface here too) */
    if (e != cudaSuccess)
        return ft_err_set(err, ft_cuda_error_status(e, FT_EINVAL),
                          "launching %s (grid %ux%ux%u, block %ux%ux%u, %zu B shared): %s", kernel,
                          grid.x, grid.y, grid.z, block.x, block.y, block.z, smem,
                          cudaGetErrorString(e));
    return FT_OK;
}

static void cu_close(ft_dev *dev) {
    cuda_dev *d = cuda_of(dev);
    cudaStreamSynchronize(d->stream);
    for (cuda_module *m = d->modules, *n; m; m = n) {
        n = m->next;
        for (cuda_kernel *k = m->kernels, *kn; k; k = kn) {
            kn = k->next;
            free(k);
        }
        cudaLibraryUnload(m->lib);
        ft_nvrtc_result_free(&m->res);
        free(m);
    }
    cudaStreamDestroy(d->stream);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

static const ft_dev_ops cuda_ops = FT_DEV_OPS(cu);

/* The NVRTC target for a compute capability: the architecture-specific variant ('a') on the
 * chips that have one, so kernels may use their features. */
static void arch_of(int major, int minor, char *out, size_t n) {
    snprintf(out, n, "sm_%d%d%s", major, minor, (major == 9 || major == 10) && minor == 0 ? "a" : "");
    if (!ft_nvrtc_arch_supported(out)) snprintf(out, n, "sm_%d%d", major, minor);
}

static int attr(enum cudaDeviceAttr a, int dev) {
    int v = 0;
    return cudaDeviceGetAttribute(&v, a, dev) == cudaSuccess ? v : 0;
}

ft_status ft_dev_cuda_open(int ordinal, ft_dev **out, ft_err *err);
ft_status ft_dev_cuda_open(int ordinal, ft_dev **out, ft_err *err) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice)
        return ft_err_set(err, FT_ENODEV, "no NVIDIA GPU here (%s)",
                          e == cudaErrorNoDevice ? "no device" : "no driver, or one older than "
                                                                 "this CUDA runtime");
    if (e != cudaSuccess)
        return ft_err_set(err, FT_ENODEV, "no usable NVIDIA GPU: %s", cudaGetErrorString(e));
    if (count <= 0) return ft_err_set(err, FT_ENODEV, "no NVIDIA GPU found");
    if (ordinal < 0 || ordinal >= count)
        return ft_err_set(err, FT_ENODEV, "GPU %d does not exist (%d found)", ordinal, count);
    if ((e = cudaSetDevice(ordinal)) != cudaSuccess) return fail(err, e, "cudaSetDevice");
    struct cudaDeviceProp p;
    if ((e = cudaGetDeviceProperties(&p, ordinal)) != cudaSuccess)
        return fail(err, e, "cudaGetDeviceProperties");
    cuda_dev *d = calloc(1, sizeof *d);
    if (!d) return ft_err_set(err, FT_ENOMEM, "out of memory");
    if ((e = cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        free(d);
        return fail(err, e, "cudaStreamCreate");
    }
    pthread_mutex_init(&d->lock, NULL);
    d->ordinal = ordinal;
    d->base.kind = FT_DEV_CUDA;
    d->base.ops = &cuda_ops;
    ft_dev_props *q = &d->base.props;
    snprintf(q->name, sizeof q->name, "%.127s", p.name);
    q->cc_major = p.major;
    q->cc_minor = p.minor;
    arch_of(p.major, p.minor, q->arch, sizeof q->arch);
    q->sm_count = p.multiProcessorCount;
    q->warp_size = p.warpSize;
    q->max_threads_per_block = p.maxThreadsPerBlock;
    q->max_threads_per_sm = p.maxThreadsPerMultiProcessor;
    q->regs_per_sm = p.regsPerMultiprocessor;
    q->max_regs_per_thread = 255;
    q->smem_per_block = p.sharedMemPerBlock;
    q->smem_per_block_optin = p.sharedMemPerBlockOptin;
    q->smem_per_sm = p.sharedMemPerMultiprocessor;
    q->l2_bytes = (size_t)p.l2CacheSize;
    q->mem_bytes = p.totalGlobalMem;
    q->bus_width_bits = p.memoryBusWidth;
    q->clock_khz = attr(cudaDevAttrClockRate, ordinal);
    q->mem_clock_khz = attr(cudaDevAttrMemoryClockRate, ordinal);
    cudaDriverGetVersion(&q->driver_version);
    cudaRuntimeGetVersion(&q->runtime_version);
    q->ecc = p.ECCEnabled;
    *out = &d->base;
    return FT_OK;
}
