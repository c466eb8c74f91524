/* test_nvrtc_foreign.c: kernel files not written for flaretune compiled by NVRTC as written
 * (ft_nvrtc_compile_file), for sm_80 and sm_86, without a GPU.
 *
 * C++ kernels are found by the names written in the source (NVRTC name expressions, also when
 * the module comes from the disk cache), __constant__ variables by "&name", and ptxas's report
 * gives their registers. Without name expressions the report's mangled names still carry the
 * written ones. A name the file lacks and a compile error are one line each; a kernel over
 * NVRTC's 48 KiB of static shared memory is refused with ptxas's own reason, its resources
 * still read. The FAIR hub's
 * convolution_milo.cu and dedispersion.cu are compiled with their tunables when they are beside
 * the repository (../shared/landscapes/kernels). Skips (77) only in a build without the CUDA
 * toolkit.
 */
#include "ft_test.h"

#if FT_HAVE_CUDA
#include <string.h>
#include <unistd.h>

#include "cuda/nvrtc.h"

#define FOREIGN FT_SOURCE_DIR "/tests/data/foreign/"
#define SHARED  FT_SOURCE_DIR "/../shared/landscapes/kernels/"

static const char *const archs[] = {"sm_80", "sm_86"};

/* Compile f for arch and check that each written kernel is found with registers. */
static void check_file(const ft_nvrtc_file *f, const char *arch, const char *const *kernels,
                       int nkernels, int cpp) {
    ft_nvrtc_result r;
    ft_err err = {0};
    ft_status st = ft_nvrtc_compile_file(f, arch, &r, &err);
    FT_CHECK(st == FT_OK, "%s for %s: %s", f->path, arch, err.msg);
    if (st) return;
    for (int i = 0; i < nkernels; i++) {
        const ft_nvrtc_kernel *k = ft_nvrtc_kernel_of(&r, kernels[i]);
        const char *low = ft_nvrtc_lowered(&r, kernels[i]);
        FT_CHECK(k != NULL, "%s %s: no kernel '%s'", f->path, arch, kernels[i]);
        FT_CHECK(low && (cpp ? strncmp(low, "_Z", 2) == 0 : strcmp(low, kernels[i]) == 0),
                 "%s: '%s' lowered to %s", arch, kernels[i], low ? low : "(none)");
        if (!k) continue;
        FT_CHECK(k->info.regs > 0 && k->info.regs <= 255, "%s %s: %d registers", arch, kernels[i],
                 k->info.regs);
        FT_CHECK(strcmp(k->written, kernels[i]) == 0, "written name %s, not %s", k->written,
                 kernels[i]);
        fprintf(stderr, "  %s %s: %s (%s), %d registers, %zu B static shared\n", arch,
                strrchr(f->path, '/') + 1, kernels[i], k->name, k->info.regs, k->info.smem_static);
    }
    ft_nvrtc_result_free(&r);
}

static void test_own_files(void) {
    const char *defines[] = {"block_size_x=32", "block_size_y=4"};
    const char *options[] = {"-std=c++11"};
    const char *names[] = {"stencil", "dot4", "&coef"};
    ft_nvrtc_file f = {FOREIGN "stencil.cu", defines, 2, options, 1, names, 3};
    for (int a = 0; a < 2; a++)
        check_file(&f, archs[a], names, 2, 1);
    /* Again, from the disk cache: the lowered names come back with it. */
    ft_nvrtc_result r;
    ft_err err = {0};
    if (ft_nvrtc_compile_file(&f, "sm_80", &r, &err) == FT_OK) {
        FT_CHECK(r.cached, "the second compile came from the cache");
        const char *low = ft_nvrtc_lowered(&r, "&coef");
        FT_CHECK(low && strcmp(low, "coef") == 0, "&coef lowered to %s", low ? low : "(none)");
        FT_CHECK(ft_nvrtc_kernel_of(&r, "stencil") != NULL, "cached: stencil by its name");
        ft_nvrtc_result_free(&r);
    }
    /* No name expressions: the written names from the mangled ones. */
    ft_nvrtc_file bare = {FOREIGN "stencil.cu", NULL, 0, NULL, 0, NULL, 0};
    if (ft_nvrtc_compile_file(&bare, "sm_80", &r, &err) == FT_OK) {
        FT_CHECK(r.nkernels == 2, "%d kernels", r.nkernels);
        for (int i = 0; i < r.nkernels; i++)
            FT_CHECK(strcmp(r.kernels[i].written, "stencil") == 0 ||
                         strcmp(r.kernels[i].written, "dot4") == 0,
                     "kernel %s written %s", r.kernels[i].name, r.kernels[i].written);
        ft_nvrtc_result_free(&r);
    } else {
        FT_CHECK(0, "stencil.cu without names: %s", err.msg);
    }
    const char *rdef[] = {"row_offset=0.5f", "tile=2"}, *rk[] = {"scale_rows"};
    ft_nvrtc_file rows = {FOREIGN "rows.cu", rdef, 2, NULL, 0, rk, 1};
    for (int a = 0; a < 2; a++)
        check_file(&rows, archs[a], rk, 1, 0);
    /* Its static_asserts hold the emulator's vector types to the toolkit's sizes and alignments. */
    const char *vk[] = {"vec_mix"};
    ft_nvrtc_file vectors = {FOREIGN "vectors.cu", NULL, 0, NULL, 0, vk, 1};
    for (int a = 0; a < 2; a++)
        check_file(&vectors, archs[a], vk, 1, 0);
}

/* A file NVRTC cannot compile as asked: the compile fails, its one-line message naming what is
 * wrong (one_line: with FT_EINVAL and no newline in it). */
typedef struct {
    const char *path, *const *names;
    int nnames, one_line;
    const char *want, *what;
} compile_error_case;

static void test_errors(void) {
    const char *names[] = {"stencil", "no_such_kernel"}, *sym[] = {"&no_such_symbol"};
    const compile_error_case cases[] = {
        {FOREIGN "stencil.cu", names, 2, 1, "no kernel 'no_such_kernel'", "unknown kernel"},
        {FOREIGN "stencil.cu", sym, 1, 1, "no symbol 'no_such_symbol'", "unknown symbol"},
        {FOREIGN "broken.cu", NULL, 0, 1, "undeclared_value", "compile error"},
        {FOREIGN "missing.cu", NULL, 0, 0, "missing.cu", "missing file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const compile_error_case *c = &cases[i];
        ft_nvrtc_result r;
        ft_err err = {0};
        ft_nvrtc_file f = {c->path, NULL, 0, NULL, 0, c->names, c->nnames};
        ft_status st = ft_nvrtc_compile_file(&f, "sm_80", &r, &err);
        fprintf(stderr, "  said: %s\n", err.msg);
        FT_CHECK(c->one_line ? st == FT_EINVAL && strstr(err.msg, c->want) && !strchr(err.msg, '\n')
                             : st != FT_OK && strstr(err.msg, c->want),
                 "%s: %s", c->what, err.msg);
    }
}

static void test_too_much_shared(void) {
    /* NVRTC leaves ptxas's error out of the log when ptxas reports its resources: the message is
     * the error of a compile without the report, and the report's resources stay. */
    const char *names[] = {"big_shared"};
    ft_nvrtc_file f = {FOREIGN "big_shared.cu", NULL, 0, NULL, 0, names, 1};
    ft_nvrtc_result r;
    ft_err err = {0};
    ft_status st = ft_nvrtc_compile_file(&f, "sm_80", &r, &err);
    fprintf(stderr, "  said: %s\n", err.msg);
    FT_CHECK(st == FT_EINVAL && strstr(err.msg, "too much shared data") && !strchr(err.msg, '\n'),
             "refused with ptxas's reason: %s", err.msg);
    const ft_nvrtc_kernel *k = ft_nvrtc_kernel_of(&r, "big_shared");
    FT_CHECK(k && k->info.smem_static == 56000 && k->info.regs > 0,
             "the refused kernel's resources: %zu B shared, %d registers",
             k ? k->info.smem_static : 0, k ? k->info.regs : 0);
    FT_CHECK(!r.cubin && !r.log, "nothing else is kept");
}

static void test_fair_kernels(void) {
    if (access(SHARED "convolution_milo.cu", R_OK) != 0) {
        fprintf(stderr, "  no %s: the FAIR hub's kernels are not compiled\n", SHARED);
        return;
    }
    const char *cdef[] = {"block_size_x=16", "block_size_y=4", "tile_size_x=2",
                          "tile_size_y=1",   "read_only=1",    "use_padding=1",
                          "use_shmem=1",     "use_cmem=1",     "filter_width=15",
                          "filter_height=15"};
    const char *cnames[] = {"convolution_kernel", "&d_filter"};
    ft_nvrtc_file conv = {SHARED "convolution_milo.cu", cdef, 10, NULL, 0, cnames, 2};
    const char *ddef[] = {"block_size_x=32",  "block_size_y=8",  "tile_size_x=2",
                          "tile_size_y=2",    "tile_stride_x=1", "tile_stride_y=0",
                          "loop_unroll_factor_channel=4"};
    const char *dnames[] = {"dedispersion_kernel"};
    ft_nvrtc_file ded = {SHARED "dedispersion.cu", ddef, 7, NULL, 0, dnames, 1};
    for (int a = 0; a < 2; a++) {
        check_file(&conv, archs[a], cnames, 1, 1);
        check_file(&ded, archs[a], dnames, 1, 0);
    }
}

int main(void) {
    FT_RUN(test_own_files);
    FT_RUN(test_errors);
    FT_RUN(test_too_much_shared);
    FT_RUN(test_fair_kernels);
    return ft_test_finish();
}
#else
static void test_skip(void) { ft_test_skip("built without the CUDA toolkit: no NVRTC"); }

int main(void) {
    FT_RUN(test_skip);
    return ft_test_finish();
}
#endif
