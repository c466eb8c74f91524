/* test_sass_nvrtc.c: the instruction mix of kernels NVRTC really compiled for sm_90a, read by
 * the disassembler this machine has (sass.h), and its cache.
 *
 * A float4 grid-stride copy has one loop holding one LDG.E.128 and one STG.E.128: 32 bytes a
 * thread per iteration. A kernel staging float4 tiles in shared memory has a loop inside a loop,
 * shared loads and stores and barriers, and its hot loop is the inner one, which reads shared
 * memory. The second disassembly of a CUBIN comes from the cache, equal to the first. Needs the
 * CUDA toolkit (NVRTC) and nvdisasm (scripts/deps.sh fetches it), no GPU; skips (77) without
 * either. Works in a private cache folder it removes.
 */
#include "ft_test.h"

#if FT_HAVE_CUDA
#include <dirent.h>
#include <string.h>
#include <unistd.h>

#include "cuda/nvrtc.h"
#include "cuda/analysis/sass.h"
#include "core/clock.h"

static const char *const SOURCE =
    "extern \"C\" __global__ void copy4(const float4 *__restrict__ x, float4 *__restrict__ y,\n"
    "                                   int n) {\n"
    "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)\n"
    "        y[i] = x[i];\n"
    "}\n"
    "extern \"C\" __global__ void stage(const float4 *__restrict__ x, float *__restrict__ y,\n"
    "                                  int n, int m) {\n"
    "    __shared__ float4 t[256];\n"
    "    float acc = 0.f;\n"
    "    for (int b = 0; b < n; b += 256) {\n"
    "        t[threadIdx.x] = x[b + threadIdx.x];\n"
    "        __syncthreads();\n"
    "        for (int j = 0; j < m; j++) {\n"
    "            float4 v = t[(threadIdx.x + 7 * j) & 255];\n"
    "            acc += v.x * v.y + v.z * v.w;\n"
    "        }\n"
    "        __syncthreads();\n"
    "    }\n"
    "    y[blockIdx.x * blockDim.x + threadIdx.x] = acc;\n"
    "}\n";

static ft_nvrtc_result res;
static char dir[] = "/tmp/ft_sass_XXXXXX";

static void test_copy4(void) {
    ft_sass_kernel k[4];
    int n = 0;
    ft_err err = {0};
    double t0 = ft_now_s();
    ft_status s = ft_sass_of_cubin(res.cubin, res.cubin_size, k, 4, &n, &err);
    double t1 = ft_now_s();
    FT_CHECK(s == FT_OK && n == 2, "%s: %s (%d kernels)", ft_status_name(s), err.msg, n);
    const ft_sass_kernel *c = ft_sass_find(k, n, "copy4");
    FT_CHECK(c != NULL, "no kernel copy4 among %d", n);
    if (!c) return;
    FT_CHECK(c->mix.count[FT_SASS_LDG] == 1 && c->mix.count[FT_SASS_STG] == 1 &&
                 c->mix.global_bytes == 32,
             "copy4: %d LDG, %d STG, %d global bytes (expected 1, 1, 32: LDG.E.128 + STG.E.128)",
             c->mix.count[FT_SASS_LDG], c->mix.count[FT_SASS_STG], c->mix.global_bytes);
    const ft_sass_loop *h = ft_sass_hot_loop(c);
    FT_CHECK(c->nloops == 1 && h && h->depth == 1 && h->mix.global_bytes == 32 &&
                 h->mix.count[FT_SASS_LDG] == 1 && h->mix.count[FT_SASS_STG] == 1,
             "copy4: %d loops; the hot one moves %d bytes", c->nloops,
             h ? h->mix.global_bytes : -1);
    if (h)
        fprintf(stderr, "  copy4: %d instructions, its loop %d (%.2f per global byte)\n",
                c->mix.total, h->mix.total, (double)h->mix.total / h->mix.global_bytes);

    /* Again: from the cache, the same. */
    ft_sass_kernel again[4];
    int n2 = 0;
    double t2 = ft_now_s();
    s = ft_sass_of_cubin(res.cubin, res.cubin_size, again, 4, &n2, &err);
    double t3 = ft_now_s();
    FT_CHECK(s == FT_OK && n2 == n && memcmp(k, again, (size_t)n * sizeof *k) == 0,
             "the cached result differs from the first");
    fprintf(stderr, "  disassembling a %zu-byte CUBIN: %.3f s; from the cache: %.4f s\n",
            res.cubin_size, t1 - t0, t3 - t2);
    /* Room for one kernel: one written. */
    FT_CHECK(ft_sass_of_cubin(res.cubin, res.cubin_size, again, 1, &n2, &err) == FT_OK && n2 == 1,
             "max 1 gives %d", n2);
}

static void test_stage(void) {
    ft_sass_kernel k[4];
    int n = 0;
    ft_err err = {0};
    ft_status s = ft_sass_of_cubin(res.cubin, res.cubin_size, k, 4, &n, &err);
    const ft_sass_kernel *st = s ? NULL : ft_sass_find(k, n, "stage");
    FT_CHECK(st != NULL, "no kernel stage: %s", err.msg);
    if (!st) return;
    const ft_sass_mix *m = &st->mix;
    FT_CHECK(m->count[FT_SASS_STS] >= 1 && m->count[FT_SASS_LDS] >= 1 &&
                 m->count[FT_SASS_BARRIER] >= 2 && m->shared_bytes >= 32 &&
                 m->count[FT_SASS_LDG] >= 1,
             "stage: %d STS, %d LDS, %d barriers, %d shared bytes", m->count[FT_SASS_STS],
             m->count[FT_SASS_LDS], m->count[FT_SASS_BARRIER], m->shared_bytes);
    int deepest = 0;
    for (int i = 0; i < st->nloops; i++)
        if (st->loops[i].depth > deepest) deepest = st->loops[i].depth;
    const ft_sass_loop *h = ft_sass_hot_loop(st);
    FT_CHECK(st->loops_found >= 2 && deepest >= 2, "stage: %d loops, the deepest at depth %d",
             st->loops_found, deepest);
    FT_CHECK(h && h->depth >= 2 && h->inner == 0 && h->mix.count[FT_SASS_LDS] >= 1 &&
                 h->mix.count[FT_SASS_LDG] == 0,
             "stage: the hot loop (depth %d) should be the inner one, reading shared memory",
             h ? h->depth : 0);
}

/* Remove the private cache: its two folders of files, then itself. */
static void remove_cache(void) {
    const char *const subs[] = {"nvrtc", "sass"};
    for (int i = 0; i < 2; i++) {
        char d[256], f[600];
        snprintf(d, sizeof d, "%s/%s", dir, subs[i]);
        DIR *dp = opendir(d);
        for (struct dirent *e; dp && (e = readdir(dp));)
            if (e->d_name[0] != '.' && snprintf(f, sizeof f, "%s/%s", d, e->d_name) > 0) unlink(f);
        if (dp) closedir(dp);
        rmdir(d);
    }
    char src[300];
    snprintf(src, sizeof src, "%s/sass_probe.cu", dir);
    unlink(src);
    rmdir(dir);
}

int main(void) {
    char tool[1024], why[512];
    if (!ft_sass_tool(tool, sizeof tool, why, sizeof why)) ft_test_skip(why);
    fprintf(stderr, "disassembler: %s\n", tool);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    setenv("FLARETUNE_CACHE_DIR", dir, 1);
    char src[300];
    snprintf(src, sizeof src, "%s/sass_probe.cu", dir);
    FILE *f = fopen(src, "w");
    int wrote = f && fputs(SOURCE, f) >= 0;
    if (f) wrote &= fclose(f) == 0;
    ft_err err = {0};
    ft_status s = wrote ? ft_nvrtc_compile(src, NULL, 0, "sm_90a", &res, &err) : FT_EIO;
    if (s) {
        fprintf(stderr, "cannot compile the probe kernels: %s\n", wrote ? err.msg : src);
        remove_cache();
        return 1;
    }
    FT_RUN(test_copy4);
    FT_RUN(test_stage);
    ft_nvrtc_result_free(&res);
    remove_cache();
    return ft_test_finish();
}

#else
static void test_skip(void) {
    ft_test_skip("built without the CUDA toolkit (FT_HAVE_CUDA=0): no NVRTC to compile a kernel");
}

int main(void) {
    FT_RUN(test_skip);
    return ft_test_finish();
}
#endif
