/* test_cuda_occupancy.c: specs.c's occupancy calculator against the CUDA runtime's, on the GPU
 * of this machine.
 *
 * Kernels of 20 to 230 registers and with static shared memory are compiled by NVRTC for the
 * GPU's architecture and loaded; for many block sizes and dynamic shared memory sizes, the blocks
 * per SM that ft_cuda_occupancy computes from a spec of the device's own properties (with
 * ptxas's register count) must equal cudaOccupancyMaxActiveBlocksPerMultiprocessor's. When the
 * GPU is one of the spec table's devices (by its exact name), the table's numbers are checked
 * against the device's.
 * Skips (77) without the toolkit or a GPU.
 */
#include "ft_test.h"

#if FT_HAVE_CUDA
#include <cuda_runtime.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "cuda/nvrtc.h"
#include "cuda/specs.h"

static const char *source =
    "#define LIVE(N, NAME, BOUNDS) \\\n"
    "    extern \"C\" __global__ void BOUNDS NAME(float *y, const float *x, int n) { \\\n"
    "        float acc[N]; \\\n"
    "        _Pragma(\"unroll\") for (int i = 0; i < N; i++) acc[i] = x[threadIdx.x + i * n]; \\\n"
    "        _Pragma(\"unroll\") for (int k = 0; k < 4; k++) \\\n"
    "            _Pragma(\"unroll\") for (int i = 0; i < N; i++) \\\n"
    "                acc[i] = acc[i] * acc[(i + k + 1) % N] + 1.0f; \\\n"
    "        float s = 0.0f; \\\n"
    "        _Pragma(\"unroll\") for (int i = 0; i < N; i++) s += acc[i] * (float)i; \\\n"
    "        y[threadIdx.x] = s; \\\n"
    "    }\n"
    "LIVE(8, regs_few, )\n"
    "LIVE(40, regs_mid, __launch_bounds__(1024, 1))\n"
    "LIVE(100, regs_many, __launch_bounds__(256, 1))\n"
    "LIVE(200, regs_max, __launch_bounds__(128, 1))\n"
    "extern \"C\" __global__ void smem_static(float *y, const float *x, int n) {\n"
    "    __shared__ float buf[4000];\n"
    "    for (int i = threadIdx.x; i < 4000; i += blockDim.x) buf[i] = x[i % n];\n"
    "    __syncthreads();\n"
    "    y[threadIdx.x] = buf[(threadIdx.x * 7) % 4000];\n"
    "}\n";

static const char *kernels[] = {"regs_few", "regs_mid", "regs_many", "regs_max", "smem_static"};

static ft_dev_props props;
static ft_gpu_spec spec;
static ft_nvrtc_result res;
static cudaLibrary_t lib;

static void test_against_runtime(void) {
    const int threads[] = {32, 64, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1024};
    const size_t dyns[] = {0, 1, 1000, 4096, 8192, 20000, 48 * 1024, 60000, 100000, 150000, 200000};
    int compared = 0;
    for (size_t ki = 0; ki < sizeof kernels / sizeof kernels[0]; ki++) {
        cudaKernel_t k;
        cudaError_t e = cudaLibraryGetKernel(&k, lib, kernels[ki]);
        FT_CHECK(e == cudaSuccess, "cudaLibraryGetKernel(%s): %s", kernels[ki],
                 cudaGetErrorString(e));
        if (e != cudaSuccess) continue;
        const ft_nvrtc_kernel *nk = ft_nvrtc_kernel_of(&res, kernels[ki]);
        FT_CHECK(nk != NULL, "ptxas reported no %s", kernels[ki]);
        if (!nk) continue;
        struct cudaFuncAttributes fa;
        cudaFuncGetAttributes(&fa, (const void *)k);
        FT_CHECK(fa.numRegs == nk->info.regs && fa.sharedSizeBytes == nk->info.smem_static,
                 "%s: the runtime says %d registers and %zu B static shared memory, ptxas %d and "
                 "%zu",
                 kernels[ki], fa.numRegs, fa.sharedSizeBytes, nk->info.regs,
                 nk->info.smem_static);
        int optin = (int)(props.smem_per_block_optin - fa.sharedSizeBytes);
        e = cudaFuncSetAttribute((const void *)k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 optin);
        FT_CHECK(e == cudaSuccess, "opt in %s: %s", kernels[ki], cudaGetErrorString(e));
        fprintf(stderr, "  %-12s %3d registers, %zu B static shared memory, max %d threads\n",
                kernels[ki], fa.numRegs, fa.sharedSizeBytes, fa.maxThreadsPerBlock);
        for (size_t ti = 0; ti < sizeof threads / sizeof threads[0]; ti++) {
            if (threads[ti] > fa.maxThreadsPerBlock) continue;
            for (size_t di = 0; di < sizeof dyns / sizeof dyns[0]; di++) {
                if (dyns[di] > (size_t)optin) continue;
                int want = -1;
                e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&want, (const void *)k,
                                                                  threads[ti], dyns[di]);
                FT_CHECK(e == cudaSuccess, "cudaOccupancyMaxActiveBlocksPerMultiprocessor: %s",
                         cudaGetErrorString(e));
                ft_occupancy o;
                ft_err err = {0};
                FT_CHECK(ft_cuda_occupancy(&spec, threads[ti], nk->info.regs,
                                           nk->info.smem_static + dyns[di], &o, &err) == FT_OK,
                         "%s", err.msg);
                FT_CHECK(o.blocks_per_sm == want,
                         "%s, %d threads, %zu B dynamic: %d blocks per SM, the runtime says %d "
                         "(limited by %s)",
                         kernels[ki], threads[ti], dyns[di], o.blocks_per_sm, want,
                         ft_occ_limit_name(o.limits));
                compared++;
            }
        }
    }
    fprintf(stderr, "  %d launch shapes compared\n", compared);
    FT_CHECK(compared > 100, "only %d shapes", compared);
}

/* The table's entry for this GPU, when it has one, agrees with the device. */
static void test_table_entry(void) {
    const ft_gpu_spec *t = NULL;
    for (int i = 0; i < ft_gpu_spec_count() && !t; i++)
        if (strcmp(props.name, ft_gpu_spec_at(i)->model) == 0) t = ft_gpu_spec_at(i);
    if (!t) {
        fprintf(stderr, "  (%s is not in the spec table)\n", props.name);
        return;
    }
    fprintf(stderr, "  %s is the table's %s: %d SMs, %zu B shared per SM, %zu per block, L2 %zu\n",
            props.name, t->name, props.sm_count, props.smem_per_sm, props.smem_per_block_optin,
            props.l2_bytes);
    FT_CHECK(t->sm_count == props.sm_count, "SMs: table %d, device %d", t->sm_count,
             props.sm_count);
    FT_CHECK(t->cc_major == props.cc_major && t->cc_minor == props.cc_minor, "compute capability");
    FT_CHECK(t->smem_per_sm == props.smem_per_sm, "smem per SM: table %zu, device %zu",
             t->smem_per_sm, props.smem_per_sm);
    FT_CHECK(t->smem_per_block_optin == props.smem_per_block_optin,
             "smem per block: table %zu, device %zu", t->smem_per_block_optin,
             props.smem_per_block_optin);
    FT_CHECK(t->max_threads_per_sm == props.max_threads_per_sm, "threads per SM");
    FT_CHECK(t->regs_per_sm == props.regs_per_sm, "registers per SM");
    FT_CHECK(t->l2_bytes == props.l2_bytes, "L2: table %zu, device %zu", t->l2_bytes,
             props.l2_bytes);
    FT_CHECK(t->max_blocks_per_sm == spec.max_blocks_per_sm, "blocks per SM");
    /* The boost clock the time model takes is the one the runtime reports (within 2%). */
    FT_CHECK(props.clock_khz > 0 && fabs(props.clock_khz * 1e3 / t->sm_clock_hz - 1) < 0.02,
             "SM clock: table %.0f MHz, device %d MHz", t->sm_clock_hz / 1e6,
             props.clock_khz / 1000);
    int v = 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxBlocksPerMultiprocessor, 0) == cudaSuccess)
        FT_CHECK(v == t->max_blocks_per_sm, "blocks per SM: table %d, device %d",
                 t->max_blocks_per_sm, v);
    if (cudaDeviceGetAttribute(&v, cudaDevAttrReservedSharedMemoryPerBlock, 0) == cudaSuccess)
        FT_CHECK((size_t)v == t->smem_reserved_per_block, "reserved smem: table %zu, device %d",
                 t->smem_reserved_per_block, v);
}

int main(void) {
    ft_dev *d = NULL;
    ft_err err = {0};
    if (ft_dev_open(FT_DEV_CUDA, 0, &d, &err)) ft_test_skip(err.msg);
    props = *ft_dev_props_of(d);
    if (ft_gpu_spec_from_props(&props, &spec, &err)) ft_test_skip(err.msg);
    char path[] = "/tmp/ft_occupancy_XXXXXX.cu";
    int fd = mkstemps(path, 3);
    if (fd < 0 || write(fd, source, strlen(source)) != (ssize_t)strlen(source)) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }
    close(fd);
    ft_status s = ft_nvrtc_compile(path, NULL, 0, props.arch, &res, &err);
    unlink(path);
    if (s) {
        fprintf(stderr, "NVRTC: %s\n", err.msg);
        return 1;
    }
    cudaError_t e = cudaLibraryLoadData(&lib, res.cubin, NULL, NULL, 0, NULL, NULL, 0);
    if (e != cudaSuccess) {
        fprintf(stderr, "cudaLibraryLoadData: %s\n", cudaGetErrorString(e));
        return 1;
    }
    FT_RUN(test_against_runtime);
    FT_RUN(test_table_entry);
    cudaLibraryUnload(lib);
    ft_nvrtc_result_free(&res);
    ft_dev_close(d);
    return ft_test_finish();
}

#else
static void test_skip(void) {
    ft_test_skip("built without the CUDA toolkit (FT_HAVE_CUDA=0): no NVRTC, no GPU runtime");
}

int main(void) {
    FT_RUN(test_skip);
    return ft_test_finish();
}
#endif
