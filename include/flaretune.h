/* flaretune.h: the C API of libflaretune: run the tuned drafter ops from another program.
 *
 * One context per backend ("cpu", "cuda", "cuda-emu", or "auto"): optionally load a profile
 * (the tuner's results), bind the caller's tensors by name (host or device memory, float32 or
 * bfloat16, with their shapes), run an op by name, read the status and its message, destroy.
 * The context keeps no pointer the caller did not bind and the library keeps no global state of
 * the API's; every function returns a status and never exits or aborts the process. See
 * docs/api.md for the ops' tensors, the profile rule and the threading rules; the code is
 * tuner/api.c.
 *
 *     flaretune_context *ctx;
 *     if (flaretune_create(&ctx, "cpu") != FLARETUNE_OK) { puts(flaretune_message(ctx)); ... }
 *     flaretune_load_profile(ctx, "profiles/local.json", 0);
 *     int64_t xs[3] = {N, T, H};
 *     flaretune_bind(ctx, "x", x, FLARETUNE_F32, 3, xs, FLARETUNE_HOST);
 *     ...     (and "w", "g", and the output "f": docs/api.md)
 *     if (flaretune_run(ctx, "fusion.dflare", NULL, NULL)) puts(flaretune_message(ctx));
 *     flaretune_destroy(ctx);
 *
 * Compatibility: within one major version (the soname, libflaretune.so.0) functions are only
 * added, never changed; enumerators keep their values.
 */
#ifndef FLARETUNE_H
#define FLARETUNE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FLARETUNE_API __attribute__((visibility("default")))
#else
#define FLARETUNE_API
#endif

/* The API this header declares: 1. flaretune_api_version() gives the library's. */
#define FLARETUNE_API_VERSION 1

typedef struct flaretune_context flaretune_context;

typedef enum flaretune_status {
    FLARETUNE_OK = 0,
    FLARETUNE_EINVAL = 1,       /* bad argument: unknown op, backend, tensor, attribute; a
                                   config outside the op's space                          */
    FLARETUNE_ESHAPE = 2,       /* a tensor's shape or dtype disagrees with the op or the
                                   other tensors                                          */
    FLARETUNE_EFORMAT = 3,      /* a malformed profile                                    */
    FLARETUNE_EIO = 4,          /* a file that cannot be read                             */
    FLARETUNE_ENOMEM = 5,       /* out of memory (host or device)                         */
    FLARETUNE_EUNSUPPORTED = 6, /* valid, but this backend or build cannot do it          */
    FLARETUNE_ENODEV = 7,       /* the backend's device is not present                    */
    FLARETUNE_EINTERNAL = 10,   /* a bug: please report it with the message               */
    FLARETUNE_EUNBOUND = 11,    /* a tensor the op reads or writes is not bound           */
    FLARETUNE_EDEVICE = 12      /* a profile with no entry for this context's device      */
} flaretune_status;

typedef enum flaretune_dtype {
    FLARETUNE_F32 = 0,  /* float                                                           */
    FLARETUNE_BF16 = 1, /* bfloat16 as uint16_t (the upper half of a float, rounded to even) */
    FLARETUNE_I32 = 2,  /* int32_t: indices, lengths, labels                               */
    FLARETUNE_U8 = 3    /* uint8_t: masks                                                  */
} flaretune_dtype;

typedef enum flaretune_memory {
    FLARETUNE_HOST = 0,  /* host memory                                                    */
    FLARETUNE_DEVICE = 1 /* the context's device (cudaMalloc, or flaretune_device_alloc)   */
} flaretune_memory;

typedef enum flaretune_copy_kind {
    FLARETUNE_HOST_TO_DEVICE = 0,
    FLARETUNE_DEVICE_TO_HOST = 1,
    FLARETUNE_DEVICE_TO_DEVICE = 2
} flaretune_copy_kind;

/* flaretune_load_profile flags. */
enum {
    /* Use the entries tuned on any device of the backend, not only this context's (their
     * configs run anywhere the space allows; their speed was measured elsewhere). */
    FLARETUNE_ANY_DEVICE = 1
};

/* The library's version ("0.1.0 (git-describe)") and API version. */
FLARETUNE_API const char *flaretune_version(void);
FLARETUNE_API int flaretune_api_version(void);
/* "OK", "EINVAL", ... for a status. */
FLARETUNE_API const char *flaretune_status_name(flaretune_status s);

/* A context on `backend` ("cpu", "cuda", "cuda-emu", "ref" (the float64 reference) or "auto":
 * the best that runs here). On
 * failure *ctx is still a context, holding only the message (flaretune_message) and to be
 * destroyed; *ctx is NULL only when even that could not be allocated (FLARETUNE_ENOMEM). */
FLARETUNE_API flaretune_status flaretune_create(flaretune_context **ctx, const char *backend);
/* Frees the context and what it allocated, the device buffers flaretune_device_alloc gave it
 * and that were not freed too (not the caller's tensors). NULL is a no-op. */
FLARETUNE_API void flaretune_destroy(flaretune_context *ctx);

/* The message of the context's last call: one line saying what went wrong and where, or ""
 * after a success. Valid until the next call on the context. */
FLARETUNE_API const char *flaretune_message(const flaretune_context *ctx);
/* The backend the context runs on ("cpu", ...; "auto" resolved) and its device fingerprint (the
 * key of profile entries: "cpu: Intel Xeon ... x 2 (SkylakeX)", "cuda: NVIDIA H200 (sm_90a, ...)"). */
FLARETUNE_API const char *flaretune_backend(const flaretune_context *ctx);
FLARETUNE_API const char *flaretune_device(const flaretune_context *ctx);

/* Load a profile (replacing one loaded before). Later runs without an explicit config use its
 * entry for the op with the nearest shape (docs/api.md). FLARETUNE_EIO for a missing or
 * unreadable file, FLARETUNE_EFORMAT for a malformed one, FLARETUNE_EUNSUPPORTED for one a
 * newer flaretune wrote (a schema_version this library does not read), FLARETUNE_EDEVICE when it
 * has no entry for this backend on this device, an empty file included (flags:
 * FLARETUNE_ANY_DEVICE to accept other devices'). path NULL unloads. */
FLARETUNE_API flaretune_status flaretune_load_profile(flaretune_context *ctx, const char *path,
                                                      unsigned flags);

/* Bind the caller's memory as tensor `name` (the tensor names of docs/api.md: "h", "f", ...),
 * row-major with `rank` dimensions of `shape` (rank 0: a scalar). The memory must stay valid
 * until it is unbound or rebound, or the context destroyed; the context never frees it. Inputs
 * are read and outputs written by flaretune_run. Rebinding a name replaces the binding. */
FLARETUNE_API flaretune_status flaretune_bind(flaretune_context *ctx, const char *name,
                                              void *data, flaretune_dtype dtype, int rank,
                                              const int64_t *shape, flaretune_memory memory);
/* Forget the binding of `name` (NULL: every binding). */
FLARETUNE_API flaretune_status flaretune_unbind(flaretune_context *ctx, const char *name);

/* Run op `op` ("fusion.dflare", "loss", ...) on the bound tensors: every tensor the op reads
 * or writes with these attributes must be bound with the op's shape (bound tensors it does not
 * use are ignored). attrs: NULL, or "name=value,..." (`flaretune list ops`). config: NULL for
 * the loaded profile's entry for the nearest shape (else the backend's default), or
 * "name=value,..." (`flaretune space OP`), which must be in the op's space and runnable at these
 * sizes. Outputs are written only on success. */
FLARETUNE_API flaretune_status flaretune_run(flaretune_context *ctx, const char *op,
                                             const char *attrs, const char *config);
/* The config the last successful run used ("name=value,...") and where it came from
 * ("config", "profile", "profile (nearest)" or "default"; "" and "none" before any run). */
FLARETUNE_API const char *flaretune_last_config(const flaretune_context *ctx);
FLARETUNE_API const char *flaretune_last_config_source(const flaretune_context *ctx);

/* Memory on the context's device, for FLARETUNE_DEVICE bindings where the caller has no CUDA
 * allocator of its own (and on cuda-emu, whose device is emulated in host memory).
 * FLARETUNE_EUNSUPPORTED on the cpu backend. device_free takes only what device_alloc gave this
 * context (anything else, a second free too: FLARETUNE_EINVAL; NULL: nothing). A copy, or a
 * FLARETUNE_DEVICE binding, inside such a buffer that runs past its end is FLARETUNE_EINVAL. */
FLARETUNE_API flaretune_status flaretune_device_alloc(flaretune_context *ctx, size_t bytes,
                                                      void **ptr);
FLARETUNE_API flaretune_status flaretune_device_free(flaretune_context *ctx, void *ptr);
FLARETUNE_API flaretune_status flaretune_device_copy(flaretune_context *ctx, void *dst,
                                                     const void *src, size_t bytes,
                                                     flaretune_copy_kind kind);

#ifdef __cplusplus
}
#endif
#endif
