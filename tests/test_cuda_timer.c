/* test_cuda_timer.c: the GPU timer (kernels/cuda/timer.h) and the NVTX ranges.
 *
 * On any machine with the toolkit: a timer refuses a device that is not a GPU (FT_EINVAL, one
 * line); without a GPU, setting up CUPTI or CUDA events fails with FT_ENODEV or FT_EUNSUPPORTED
 * and one line, never a crash, and fails the same way when asked again; NVTX ranges push and pop
 * without a tool and colors are stable. With a GPU: a 256 MiB cudaMemsetAsync timed by both
 * clocks (positive times; CUPTI counts the device work and keeps its records), three memsets in
 * one region summed, two CUPTI timers sharing the process's CUPTI; a kernel compiled by NVRTC,
 * launched through the runtime (as the device layer launches) and through the driver API (as a
 * library may), each counted once with its name, and a queue of 100 launches on which the two
 * clocks agree.
 *
 * Events time the interval on the stream, so a region's first launch adds the host's launch
 * latency (large while CUPTI is enabled) to them; CUPTI sums the kernels alone. Hence the checks:
 * CUPTI <= events on one launch, and agreement only once the queue hides the launch latency.
 * Also, without a GPU: which CUDA errors lose the context (FT_ELOST: a kernel's fault, after
 * which every call fails) and which are the call's own.
 * Built only with the CUDA toolkit (FT_HAVE_CUDA).
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nvrtc.h>
#include <string.h>
#include <time.h>

#include "cuda/backend/cuda_backend.h"
#include "cuda/device_impl.h"
#include "cuda/timer.h"
#include "traces/nvtx.h"
#include "ft_test.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int gpu_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
    return n;
}

static void test_names_and_arguments(void) {
    FT_CHECK(!strcmp(ft_timer_name(FT_TIMER_CUPTI), "cupti"), "cupti name");
    FT_CHECK(!strcmp(ft_timer_name(FT_TIMER_EVENTS), "events"), "events name");
    ft_timer *t = (ft_timer *)1;
    ft_err err = {0};
    FT_CHECK(ft_timer_open(NULL, FT_TIMER_CUPTI, &t, &err) == FT_EINVAL && t == NULL && err.msg[0],
             "no device: EINVAL with a line");
    ft_timer_close(NULL);
    FT_CHECK(ft_timer_begin(NULL, &err) == FT_EINVAL, "begin without a timer");
    FT_CHECK(ft_timer_last_records(NULL, NULL, 4) == 0, "no records without a timer");
}

static void test_emulator_refused(void) {
    ft_dev *d = NULL;
    ft_err err = {0};
    ft_status s = ft_dev_open(FT_DEV_EMU, 0, &d, &err);
    FT_CHECK(s == FT_OK, "emulator opens: %s", err.msg);
    if (s) return;
    for (int k = 0; k < 2; k++) {
        ft_timer *t = (ft_timer *)1;
        ft_err e = {0};
        s = ft_timer_open(d, (ft_timer_kind)k, &t, &e);
        FT_CHECK(s == FT_EINVAL && t == NULL, "%s timer on the emulator: %s",
                 ft_timer_name((ft_timer_kind)k), ft_status_name(s));
        FT_CHECK(strstr(e.msg, "FT_DEV_CUDA") && !strchr(e.msg, '\n'),
                 "one line naming what it needs: %s", e.msg);
    }
    ft_dev_close(d);
}

/* No GPU: both clocks fail cleanly at setup. Without a GPU no FT_DEV_CUDA device opens, so a
 * bare one stands in: the timer asks nothing of the device before it knows a GPU is there. */
static void test_setup_without_gpu(void) {
    if (gpu_count() > 0) {
        fprintf(stderr, "  (a GPU is present: the no-GPU setup paths are not reachable)\n");
        return;
    }
    struct ft_dev bare;
    memset(&bare, 0, sizeof bare);
    bare.kind = FT_DEV_CUDA;
    for (int round = 0; round < 2; round++) { /* a second try fails the same way */
        for (int k = 0; k < 2; k++) {
            ft_timer *t = (ft_timer *)1;
            ft_err e = {0};
            ft_status s = ft_timer_open(&bare, (ft_timer_kind)k, &t, &e);
            FT_CHECK((s == FT_ENODEV || s == FT_EUNSUPPORTED) && t == NULL,
                     "%s timer without a GPU: %s (%s)", ft_timer_name((ft_timer_kind)k),
                     ft_status_name(s), e.msg);
            FT_CHECK(e.msg[0] && !strchr(e.msg, '\n'), "one line: %s", e.msg);
            FT_CHECK(k != FT_TIMER_CUPTI || strstr(e.msg, "CUPTI"), "names CUPTI: %s", e.msg);
            if (round == 0)
                fprintf(stderr, "  %s: %s: %s\n", ft_timer_name((ft_timer_kind)k),
                        ft_status_name(s), e.msg);
        }
    }
}

static void test_nvtx(void) {
    /* Without a tool attached these return at once; balanced and nested. */
    ft_nvtx_push("tune", "fusion.dflash", 0);
    for (uint64_t c = 0; c < 3; c++) {
        ft_nvtx_push("candidate", "fusion.dflash", c);
        ft_nvtx_push("samples", "fusion.dflash", c);
        ft_nvtx_pop();
        ft_nvtx_pop();
    }
    ft_nvtx_push(NULL, NULL, 7);
    ft_nvtx_pop();
    ft_nvtx_pop();
    uint32_t a = ft_nvtx_color("fusion.dflash"), b = ft_nvtx_color("fusion.dflash");
    FT_CHECK(a == b && (a >> 24) == 0xFF, "stable opaque color: %08x %08x", a, b);
    FT_CHECK(ft_nvtx_color(NULL) == ft_nvtx_color(""), "no op: the neutral color");
    int distinct = 0;
    const char *ops[] = {"fusion.dflash", "attention.decode", "loss.weighted_ce", "kvproj"};
    for (int i = 1; i < 4; i++)
        distinct += ft_nvtx_color(ops[i]) != ft_nvtx_color(ops[0]);
    FT_CHECK(distinct >= 1, "ops get different colors");
}

/* ---- with a GPU ---------------------------------------------------------------------------- */

#define MEMSET_BYTES ((size_t)256 << 20)

/* Time `n` memsets of the buffer in one region; returns seconds (negative on failure). */
static double time_memsets(ft_timer *t, cudaStream_t st, void *p, int n, int *nk) {
    ft_err e = {0};
    double secs = -1;
    FT_CHECK(ft_timer_begin(t, &e) == FT_OK, "begin: %s", e.msg);
    for (int i = 0; i < n; i++) {
        cudaError_t ce = cudaMemsetAsync(p, i + 1, MEMSET_BYTES, st);
        FT_CHECK(ce == cudaSuccess, "cudaMemsetAsync: %s", cudaGetErrorString(ce));
    }
    FT_CHECK(ft_timer_end(t, &secs, nk, &e) == FT_OK, "end: %s", e.msg);
    return secs;
}

static void test_gpu_memset(void) {
    if (gpu_count() <= 0) {
        fprintf(stderr, "  (no GPU: the timing checks are skipped, the checks above ran)\n");
        return;
    }
    ft_dev *d = NULL;
    ft_err err = {0};
    ft_status s = ft_dev_open(FT_DEV_CUDA, 0, &d, &err);
    FT_CHECK(s == FT_OK, "a GPU is present but does not open: %s", err.msg);
    if (s) return;
    cudaStream_t st = (cudaStream_t)ft_dev_cuda_stream(d);
    void *p = NULL;
    cudaError_t ce = cudaMalloc(&p, MEMSET_BYTES);
    FT_CHECK(ce == cudaSuccess, "cudaMalloc 256 MiB: %s", cudaGetErrorString(ce));
    if (ce != cudaSuccess) goto out;

    ft_timer *cu = NULL, *ev = NULL, *cu2 = NULL;
    s = ft_timer_open(d, FT_TIMER_CUPTI, &cu, &err);
    FT_CHECK(s == FT_OK, "CUPTI timer: %s", err.msg);
    s = ft_timer_open(d, FT_TIMER_EVENTS, &ev, &err);
    FT_CHECK(s == FT_OK, "events timer: %s", err.msg);
    if (!cu || !ev) goto out_timers;
    FT_CHECK(ft_timer_kind_of(cu) == FT_TIMER_CUPTI && ft_timer_kind_of(ev) == FT_TIMER_EVENTS,
             "kinds");
    int nk = 0, nk_ev = 0;
    time_memsets(cu, st, p, 1, &nk); /* warm-up: first touches of the pages */
    double t_cu = time_memsets(cu, st, p, 1, &nk);
    double t_ev = time_memsets(ev, st, p, 1, &nk_ev);
    fprintf(stderr, "  256 MiB memset: cupti %.1f us (%d records), events %.1f us\n", t_cu * 1e6,
            nk, t_ev * 1e6);
    FT_CHECK(t_cu > 0 && t_ev > 0, "both clocks positive: cupti %g s, events %g s", t_cu, t_ev);
    FT_CHECK(nk >= 1, "CUPTI counted the memset: %d", nk);
    FT_CHECK(nk_ev == -1, "events count no kernels: %d", nk_ev);
    FT_CHECK(t_cu <= t_ev + 2e-6, "the memset inside the events' interval: cupti %g s, events %g s",
             t_cu, t_ev);
    FT_CHECK((double)MEMSET_BYTES / t_cu < 20e12, "a plausible bandwidth: %.0f GB/s",
             (double)MEMSET_BYTES / t_cu * 1e-9);
    ft_kernel_record rec[8];
    int nr = ft_timer_last_records(cu, rec, 8);
    FT_CHECK(nr == nk || (nk > 8 && nr == 8), "records kept: %d of %d", nr, nk);
    for (int i = 0; i < nr; i++) {
        fprintf(stderr, "    record %s: %llu ns\n", rec[i].name,
                (unsigned long long)(rec[i].end_ns - rec[i].start_ns));
        FT_CHECK(rec[i].end_ns > rec[i].start_ns && rec[i].start_ns > 0, "timestamps of %s",
                 rec[i].name);
    }
    FT_CHECK(ft_timer_last_records(ev, rec, 8) == 0, "events keep no records");

    /* Several launches in one region are summed. */
    int nk3 = 0;
    double t3 = time_memsets(cu, st, p, 3, &nk3);
    FT_CHECK(nk3 == 3 * nk, "three memsets, three times the records: %d vs %d", nk3, nk);
    FT_CHECK(t3 > 2 * t_cu && t3 < 4.5 * t_cu, "three memsets take about 3x: %g vs %g", t3, t_cu);

    /* Work outside any region is not counted, and an empty region is zero. */
    cudaMemsetAsync(p, 0, MEMSET_BYTES, st);
    int nk0 = -5;
    double t0 = time_memsets(cu, st, p, 0, &nk0);
    FT_CHECK(nk0 == 0 && t0 == 0, "empty region: %d records, %g s", nk0, t0);

    /* A second CUPTI timer shares the process's CUPTI; closing it leaves the first working. */
    s = ft_timer_open(d, FT_TIMER_CUPTI, &cu2, &err);
    FT_CHECK(s == FT_OK, "second CUPTI timer: %s", err.msg);
    if (cu2) {
        int a = 0;
        FT_CHECK(time_memsets(cu2, st, p, 1, &a) > 0 && a == nk, "second timer counts: %d", a);
        ft_timer_close(cu2);
        a = 0;
        FT_CHECK(time_memsets(cu, st, p, 1, &a) > 0 && a == nk, "first timer after close: %d", a);
    }
    /* Region misuse is one line, not a crash. */
    double x;
    FT_CHECK(ft_timer_end(cu, &x, NULL, &err) == FT_EINVAL, "end without begin");
    FT_CHECK(ft_timer_begin(cu, &err) == FT_OK && ft_timer_begin(cu, &err) == FT_EINVAL,
             "begin twice");
    FT_CHECK(ft_timer_end(cu, &x, NULL, &err) == FT_OK, "end: %s", err.msg);

    /* Overhead of a region on the host (sync + forced flush), for the record. */
    double h0 = now_s();
    for (int i = 0; i < 100; i++) {
        ft_timer_begin(cu, NULL);
        cudaMemsetAsync(p, 0, 4096, st);
        ft_timer_end(cu, &x, NULL, NULL);
    }
    fprintf(stderr, "  small region: %.1f us on the host each\n", (now_s() - h0) * 1e4);
    FT_CHECK(ft_timer_dropped(cu) == 0, "no records dropped: %llu",
             (unsigned long long)ft_timer_dropped(cu));
out_timers:
    ft_timer_close(cu);
    ft_timer_close(ev);
    cudaFree(p);
out:
    ft_dev_close(d);
}

/* A kernel of known shape, compiled for the GPU's own architecture. */
static const char spin_src[] = "extern \"C\" __global__ void ft_timer_spin(float *p, int n) {\n"
                               "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                               "    if (i >= n) return;\n"
                               "    float v = p[i];\n"
                               "    for (int k = 0; k < 4000; k++) v = v * 0.999f + 1.0f;\n"
                               "    p[i] = v;\n"
                               "}\n";

static char *compile_spin(size_t *size) {
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return NULL;
    nvrtcProgram prog;
    if (nvrtcCreateProgram(&prog, spin_src, "spin.cu", 0, NULL, NULL) != NVRTC_SUCCESS) return NULL;
    char arch[48];
    snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d%d", prop.major, prop.minor);
    const char *opts[] = {arch};
    nvrtcResult r = nvrtcCompileProgram(prog, 1, opts);
    char *cubin = NULL;
    if (r == NVRTC_SUCCESS && nvrtcGetCUBINSize(prog, size) == NVRTC_SUCCESS) {
        cubin = ft_test_alloc(*size);
        if (nvrtcGetCUBIN(prog, cubin) != NVRTC_SUCCESS) {
            free(cubin);
            cubin = NULL;
        }
    }
    FT_CHECK(cubin != NULL, "NVRTC %s: %s", arch, nvrtcGetErrorString(r));
    nvrtcDestroyProgram(&prog);
    return cubin;
}

typedef CUresult (*fn_load)(CUmodule *, const void *);
typedef CUresult (*fn_getfn)(CUfunction *, CUmodule, const char *);
typedef CUresult (*fn_launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);

static void check_spin_region(ft_timer *cu, ft_timer *ev, const char *how, double t_ev, double t_cu,
                              int nk) {
    fprintf(stderr, "  ft_timer_spin via %s: cupti %.1f us (%d kernels), events %.1f us\n", how,
            t_cu * 1e6, nk, t_ev * 1e6);
    (void)ev;
    FT_CHECK(nk == 1, "%s: one kernel counted, got %d", how, nk);
    FT_CHECK(t_cu > 0 && t_ev > 0 && t_cu <= t_ev + 2e-6,
             "%s: positive, inside the events' interval: cupti %g s, events %g s", how, t_cu, t_ev);
    ft_kernel_record rec;
    if (ft_timer_last_records(cu, &rec, 1) == 1)
        FT_CHECK(strstr(rec.name, "ft_timer_spin") != NULL, "%s: the record names the kernel: %s",
                 how, rec.name);
    else
        FT_CHECK(0, "%s: no record kept", how);
}

static void test_gpu_kernels(void) {
    ft_dev *d = NULL;
    if (gpu_count() <= 0 || ft_dev_open(FT_DEV_CUDA, 0, &d, NULL) != FT_OK) return;
    cudaStream_t st = (cudaStream_t)ft_dev_cuda_stream(d);
    size_t size = 0;
    char *cubin = compile_spin(&size);
    const int n = 1 << 20;
    float *p = NULL;
    ft_timer *cu = NULL, *ev = NULL;
    ft_err err = {0};
    if (!cubin || cudaMalloc((void **)&p, n * sizeof(float)) != cudaSuccess) goto out;
    cudaMemset(p, 0, n * sizeof(float));
    FT_CHECK(ft_timer_open(d, FT_TIMER_CUPTI, &cu, &err) == FT_OK, "CUPTI timer: %s", err.msg);
    FT_CHECK(ft_timer_open(d, FT_TIMER_EVENTS, &ev, &err) == FT_OK, "events timer: %s", err.msg);
    if (!cu || !ev) goto out;
    void *args[] = {&p, (void *)&n};

    /* The runtime: a library loaded from the CUBIN, launched with cudaLaunchKernel. */
    cudaLibrary_t lib = NULL;
    cudaKernel_t kern = NULL;
    cudaError_t ce = cudaLibraryLoadData(&lib, cubin, NULL, NULL, 0, NULL, NULL, 0);
    if (ce == cudaSuccess) ce = cudaLibraryGetKernel(&kern, lib, "ft_timer_spin");
    FT_CHECK(ce == cudaSuccess, "cudaLibraryLoadData/GetKernel: %s", cudaGetErrorString(ce));
    if (ce == cudaSuccess) {
        double t[2] = {0, 0};
        int nk = 0;
        for (int rep = 0; rep < 2; rep++) { /* the first launch loads the module */
            for (int k = 0; k < 2; k++) {
                ft_timer *tm = k ? ev : cu;
                ft_timer_begin(tm, NULL);
                ce = cudaLaunchKernel((const void *)kern, (dim3){(unsigned)n / 256, 1, 1},
                                      (dim3){256, 1, 1}, args, 0, st);
                FT_CHECK(ce == cudaSuccess, "cudaLaunchKernel: %s", cudaGetErrorString(ce));
                FT_CHECK(ft_timer_end(tm, &t[k], k ? NULL : &nk, &err) == FT_OK, "end: %s",
                         err.msg);
            }
        }
        check_spin_region(cu, ev, "cudaLaunchKernel", t[1], t[0], nk);
        /* A queue of launches: the launch latency hides behind the kernels, the clocks agree. */
        for (int k = 0; k < 2; k++) {
            ft_timer *tm = k ? ev : cu;
            ft_timer_begin(tm, NULL);
            for (int i = 0; i < 100; i++)
                cudaLaunchKernel((const void *)kern, (dim3){(unsigned)n / 256, 1, 1},
                                 (dim3){256, 1, 1}, args, 0, st);
            FT_CHECK(ft_timer_end(tm, &t[k], k ? NULL : &nk, &err) == FT_OK, "end: %s", err.msg);
        }
        fprintf(stderr, "  100 launches: cupti %.1f us (%d kernels), events %.1f us\n", t[0] * 1e6,
                nk, t[1] * 1e6);
        FT_CHECK(nk == 100, "100 kernels counted: %d", nk);
        FT_CHECK(t[0] <= t[1] + 2e-6 && t[0] >= 0.85 * t[1],
                 "the clocks agree: cupti %g s, events %g s", t[0], t[1]);
        cudaLibraryUnload(lib);
    }

    /* The driver API, loaded at run time as the GPU device layer does. */
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    FT_CHECK(drv != NULL, "dlopen libcuda.so.1: %s", dlerror());
    if (drv) {
        fn_load load = (fn_load)dlsym(drv, "cuModuleLoadData");
        fn_getfn getfn = (fn_getfn)dlsym(drv, "cuModuleGetFunction");
        fn_launch launch = (fn_launch)dlsym(drv, "cuLaunchKernel");
        CUmodule mod = NULL;
        CUfunction fn = NULL;
        CUresult r = load && getfn && launch ? load(&mod, cubin) : CUDA_ERROR_NOT_FOUND;
        if (r == CUDA_SUCCESS) r = getfn(&fn, mod, "ft_timer_spin");
        FT_CHECK(r == CUDA_SUCCESS, "driver module: CUresult %d", (int)r);
        if (r == CUDA_SUCCESS) {
            double t[2] = {0, 0};
            int nk = 0;
            for (int rep = 0; rep < 2; rep++) {
                for (int k = 0; k < 2; k++) {
                    ft_timer *tm = k ? ev : cu;
                    ft_timer_begin(tm, NULL);
                    r = launch(fn, (unsigned)n / 256, 1, 1, 256, 1, 1, 0, (CUstream)st, args, NULL);
                    FT_CHECK(r == CUDA_SUCCESS, "cuLaunchKernel: CUresult %d", (int)r);
                    FT_CHECK(ft_timer_end(tm, &t[k], k ? NULL : &nk, &err) == FT_OK, "end: %s",
                             err.msg);
                }
            }
            check_spin_region(cu, ev, "cuLaunchKernel", t[1], t[0], nk);
        }
    }
out:
    ft_timer_close(cu);
    ft_timer_close(ev);
    cudaFree(p);
    free(cubin);
    ft_dev_close(d);
}

/* A kernel's fault loses the context; an allocation is out of memory; a bad argument, a
 * missing device or a compile error stay what the caller said. */
static void test_lost_errors(void) {
    static const cudaError_t lost[] = {
        cudaErrorIllegalAddress,      cudaErrorLaunchTimeout,      cudaErrorAssert,
        cudaErrorHardwareStackError,  cudaErrorIllegalInstruction, cudaErrorMisalignedAddress,
        cudaErrorInvalidAddressSpace, cudaErrorInvalidPc,          cudaErrorLaunchFailure};
    for (size_t k = 0; k < sizeof lost / sizeof lost[0]; k++)
        FT_CHECK(ft_cuda_error_status(lost[k], FT_EINVAL) == FT_ELOST, "%s loses the context",
                 cudaGetErrorName(lost[k]));
    FT_CHECK(ft_cuda_error_status(cudaErrorMemoryAllocation, FT_EINVAL) == FT_ENOMEM,
             "an allocation that failed is out of memory");
    static const cudaError_t own[] = {cudaErrorInvalidValue, cudaErrorNoDevice,
                                      cudaErrorInvalidConfiguration, cudaErrorLaunchOutOfResources,
                                      cudaErrorInvalidKernelImage};
    for (size_t k = 0; k < sizeof own / sizeof own[0]; k++)
        FT_CHECK(ft_cuda_error_status(own[k], FT_EINTERNAL) == FT_EINTERNAL, "%s is the caller's",
                 cudaGetErrorName(own[k]));
    FT_CHECK(!strcmp(ft_status_name(FT_ELOST), "ELOST"), "ELOST has its name");
}

int main(void) {
    FT_RUN(test_lost_errors);
    FT_RUN(test_names_and_arguments);
    FT_RUN(test_emulator_refused);
    FT_RUN(test_setup_without_gpu);
    FT_RUN(test_nvtx);
    FT_RUN(test_gpu_memset);
    FT_RUN(test_gpu_kernels);
    return ft_test_finish();
}
