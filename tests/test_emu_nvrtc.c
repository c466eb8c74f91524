/* test_emu_nvrtc.c: every sample kernel of tests/cuda/ (and every kernels/FAMILY/<name>.cu) compiled
 * for the GPU by NVRTC, for sm_80 and sm_90a, down to a CUBIN (so ptxas checks the inline PTX of
 * ft_cuda.h too), without warnings. The emulator's tests prove the kernels right; this proves the
 * same text is real CUDA. Needs the CUDA toolkit, not a GPU; skips (77) without the toolkit. */
#include "ft_test.h"

#if FT_HAVE_CUDA
#include <dirent.h>
#include <nvrtc.h>
#include <string.h>

#include "cuda/nvrtc.h"

#define SAMPLES FT_SOURCE_DIR "/tests/cuda/"
#define DIALECT FT_SOURCE_DIR "/kernels/cuda" /* ft_cuda.h */
#define KERNELS FT_SOURCE_DIR "/kernels"      /* the op families' folders of .cu sources */

/* Compile path with `def` (NULL: none) for arch; checks success, a CUBIN and a clean log. */
static void nvrtc_compile(const char *path, const char *def, const char *arch) {
    char *src = ft_test_read_file(path);
    FT_CHECK(src != NULL, "cannot read %s", path);
    if (!src) return;
    nvrtcProgram prog;
    nvrtcResult r = nvrtcCreateProgram(&prog, src, path, 0, NULL, NULL);
    FT_CHECK(r == NVRTC_SUCCESS, "nvrtcCreateProgram(%s): %s", path, nvrtcGetErrorString(r));
    if (r != NVRTC_SUCCESS) {
        free(src);
        return;
    }
    char opt_arch[64], opt_def[128];
    snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=%s", arch);
    snprintf(opt_def, sizeof opt_def, "-D%s", def ? def : "FT_NO_DEFINE");
    const char *opts[] = {opt_arch, "-I" FT_CUDA_INCLUDE_DIR, "-I" DIALECT, "-std=c++17", opt_def};
    r = nvrtcCompileProgram(prog, 5, opts);
    size_t logn = 0;
    nvrtcGetProgramLogSize(prog, &logn);
    char *log = ft_test_alloc(logn + 1);
    nvrtcGetProgramLog(prog, log);
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    FT_CHECK(r == NVRTC_SUCCESS, "NVRTC %s %s (%s): %s\n%s", name, arch, def ? def : "-",
             nvrtcGetErrorString(r), log);
    FT_CHECK(r != NVRTC_SUCCESS || strstr(log, "warning") == NULL, "NVRTC %s %s warns:\n%s", name,
             arch, log);
    if (r == NVRTC_SUCCESS) {
        size_t cubin = 0;
        nvrtcGetCUBINSize(prog, &cubin);
        FT_CHECK(cubin > 0, "NVRTC %s %s: no CUBIN", name, arch);
    }
    free(log);
    nvrtcDestroyProgram(&prog);
    free(src);
}

static const char *const archs[] = {"sm_80", "sm_90a"};

static void test_samples(void) {
    static const struct {
        const char *file, *def;
    } samples[] = {
        {"emu_basic.cu", NULL},    {"emu_matmul.cu", NULL},   {"emu_matmul.cu", "TILE=8"},
        {"emu_mma.cu", NULL},      {"emu_mma.cu", "B_NK=0"},  {"emu_errors.cu", NULL},
        {"planted.cu", "PLANT=0"}, {"planted.cu", "PLANT=1"}, {"planted.cu", "PLANT=2"},
        {"planted.cu", "PLANT=3"},
    };
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s%s", SAMPLES, samples[i].file);
        for (int a = 0; a < 2; a++)
            nvrtc_compile(path, samples[i].def, archs[a]);
    }
}

/* Every kernel source of every op family: the .cu files of each folder of kernels/. */
static void test_kernels(void) {
    DIR *top = opendir(KERNELS);
    FT_CHECK(top != NULL, "cannot list %s", KERNELS);
    if (!top) return;
    int n = 0;
    for (struct dirent *f; (f = readdir(top));) {
        if (f->d_name[0] == '.' || !strcmp(f->d_name, "cuda")) continue;
        char sub[1024];
        snprintf(sub, sizeof sub, "%s/%s", KERNELS, f->d_name);
        DIR *d = opendir(sub);
        if (!d) continue;
        for (struct dirent *e; (e = readdir(d));) {
            size_t len = strlen(e->d_name);
            if (len < 4 || strcmp(e->d_name + len - 3, ".cu") != 0) continue;
            char path[2048];
            snprintf(path, sizeof path, "%s/%s", sub, e->d_name);
            for (int a = 0; a < 2; a++)
                nvrtc_compile(path, NULL, archs[a]);
            n++;
        }
        closedir(d);
    }
    closedir(top);
    FT_CHECK(n >= 5, "only %d kernel sources found under %s", n, KERNELS);
    fprintf(stderr, "  %d kernel sources in the op families\n", n);
}

/* ptxas's -v report: numbers land on the kernel they belong to, a device function's are not a
 * kernel's, and a spill is credited to the kernel that spills. */
static void test_ptxas_report(void) {
    static const char log[] =
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function 'first' for 'sm_90a'\n"
        "ptxas info    : Function properties for first\n"
        "ptxas         .     16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Function properties for helper\n"
        "ptxas         .     96 bytes stack frame, 40 bytes spill stores, 40 bytes spill loads\n"
        "ptxas info    : Used 92 registers, used 1 barriers, 2048 bytes smem, 416 bytes cmem[0]\n"
        "ptxas info    : Compiling entry function 'second' for 'sm_90a'\n"
        "ptxas info    : Function properties for second\n"
        "ptxas         .     24 bytes stack frame, 24 bytes spill stores, 8 bytes spill loads\n"
        "ptxas info    : Used 255 registers, used 0 barriers, 384 bytes cmem[0]\n";
    ft_nvrtc_kernel k[4];
    int n = ft_nvrtc_parse_ptxas(log, k, 4);
    FT_CHECK(n == 2, "two kernels, got %d", n);
    if (n != 2) return;
    FT_CHECK(!strcmp(k[0].name, "first") && k[0].info.regs == 92 &&
                 k[0].info.smem_static == 2048 && k[0].info.stack_bytes == 16 &&
                 k[0].info.spill_stores == 0,
             "first: %d regs, %zu smem, %zu stack, %d spilled", k[0].info.regs,
             k[0].info.smem_static, k[0].info.stack_bytes, k[0].info.spill_stores);
    FT_CHECK(!strcmp(k[1].name, "second") && k[1].info.regs == 255 && k[1].info.smem_static == 0 &&
                 k[1].info.spill_stores == 24 && k[1].info.spill_loads == 8,
             "second: %d regs, %d/%d spilled", k[1].info.regs, k[1].info.spill_stores,
             k[1].info.spill_loads);
    FT_CHECK(ft_nvrtc_parse_ptxas("", k, 4) == 0, "an empty log has no kernels");
    FT_CHECK(ft_nvrtc_parse_ptxas(log, k, 1) == 1, "at most max kernels");
}

int main(void) {
    FT_RUN(test_ptxas_report);
    FT_RUN(test_samples);
    FT_RUN(test_kernels);
    return ft_test_finish();
}

#else
static void test_skip(void) {
    ft_test_skip("built without the CUDA toolkit (FT_HAVE_CUDA=0): NVRTC is not available");
}

int main(void) {
    FT_RUN(test_skip);
    return ft_test_finish();
}
#endif
