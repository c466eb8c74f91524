/* nvrtc.c: kernel sources compiled to CUBINs by NVRTC, with ptxas's resource report, cached on
 * disk (see nvrtc.h).
 *
 * Options: --gpu-architecture=<arch> (a real architecture, so NVRTC runs ptxas and returns a
 * CUBIN), -std=c++17, --ptxas-options=-v (registers, spills, stack, shared memory per kernel),
 * -lineinfo (so Nsight Compute maps samples to source lines), the toolkit's and kernels/cuda's
 * include folders, and the config's -D macros. No fast-math: the kernels meet SPEC.md's
 * tolerances with IEEE division and square roots unless they ask for intrinsics themselves.
 */
#include "nvrtc.h"

#include <ctype.h>
#include <errno.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flaretune/paths.h"
#include "kcache.h"

#ifndef FT_CUDA_INCLUDE_DIR
#define FT_CUDA_INCLUDE_DIR "/usr/local/cuda/include"
#endif

#define MAX_OPTS (FT_NVRTC_MAX_DEFINES + 12)
enum { FT_NVRTC_MAX_DEFINES = 64 };

static char nvrtc_version_str[16];
static pthread_once_t nvrtc_version_once = PTHREAD_ONCE_INIT;

static void read_version(void) {
    int maj = 0, min = 0;
    if (nvrtcVersion(&maj, &min) == NVRTC_SUCCESS)
        snprintf(nvrtc_version_str, sizeof nvrtc_version_str, "%d.%d", maj, min);
    else
        snprintf(nvrtc_version_str, sizeof nvrtc_version_str, "unknown");
}

const char *ft_nvrtc_version(void) {
    pthread_once(&nvrtc_version_once, read_version);
    return nvrtc_version_str;
}

int ft_nvrtc_arch_supported(const char *arch) {
    if (!arch || strncmp(arch, "sm_", 3) != 0) return 0;
    int want = atoi(arch + 3);
    int n = 0;
    if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0 || n > 256) return 0;
    int archs[256];
    if (nvrtcGetSupportedArchs(archs) != NVRTC_SUCCESS) return 0;
    for (int i = 0; i < n; i++)
        if (archs[i] == want) return 1;
    return 0;
}

static const char *kernel_dir(void) {
    static _Thread_local char dir[4096];
    return ft_kernel_dir(dir, sizeof dir);
}

static void cuda_include(char *out, size_t n) {
    const char *v = getenv("FLARETUNE_CUDA_INCLUDE");
    if (v && *v) {
        snprintf(out, n, "%s", v);
        return;
    }
    if (access(FT_CUDA_INCLUDE_DIR "/cuda_bf16.h", R_OK) == 0) {
        snprintf(out, n, "%s", FT_CUDA_INCLUDE_DIR);
        return;
    }
    v = getenv("CUDA_HOME");
    if (!v || !*v) v = getenv("CUDA_PATH");
    snprintf(out, n, "%s/include", v && *v ? v : "/usr/local/cuda");
}

/* ---- ptxas's report ---------------------------------------------------------------------- */

static long num_before(const char *line, const char *end, const char *what) {
    const char *p = strstr(line, what);
    if (!p || p > end) return -1;
    const char *q = p;
    while (q > line && (q[-1] == ' ')) q--;
    while (q > line && isdigit((unsigned char)q[-1])) q--;
    return isdigit((unsigned char)*q) ? strtol(q, NULL, 10) : -1;
}

int ft_nvrtc_parse_ptxas(const char *log, ft_nvrtc_kernel *out, int max) {
    int n = 0;
    /* "Compiling entry function 'K'" opens kernel K: its "Used N registers" line follows.
     * "Function properties for F" is followed by F's stack and spill line; F may be a kernel or
     * a device function that was not inlined (whose numbers are not a kernel's). */
    ft_nvrtc_kernel *entry = NULL, *props = NULL;
    for (const char *p = log; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        const char *e = strchr(p, '\n');
        if (!e) e = p + strlen(p);
        const char *f = strstr(p, "Compiling entry function '");
        if (f && f < e) {
            f += strlen("Compiling entry function '");
            const char *q = memchr(f, '\'', (size_t)(e - f));
            entry = props = NULL;
            if (!q || n >= max) continue;
            entry = &out[n++];
            memset(entry, 0, sizeof *entry);
            snprintf(entry->name, sizeof entry->name, "%.*s", (int)(q - f), f);
            continue;
        }
        const char *fp = strstr(p, "Function properties for ");
        if (fp && fp < e) {
            fp += strlen("Function properties for ");
            size_t len = (size_t)(e - fp);
            while (len && (fp[len - 1] == ' ' || fp[len - 1] == '\r'))
                len--;
            props = NULL;
            for (int k = 0; k < n; k++)
                if (strlen(out[k].name) == len && strncmp(out[k].name, fp, len) == 0)
                    props = &out[k];
            continue;
        }
        long v;
        if (props) {
            if ((v = num_before(p, e, "bytes stack frame")) >= 0) props->info.stack_bytes = (size_t)v;
            if ((v = num_before(p, e, "bytes spill stores")) >= 0) props->info.spill_stores = (int)v;
            if ((v = num_before(p, e, "bytes spill loads")) >= 0) props->info.spill_loads = (int)v;
        }
        const char *u = strstr(p, "Used ");
        if (entry && u && u < e) {
            entry->info.regs = atoi(u + 5);
            if ((v = num_before(p, e, "bytes smem")) >= 0) entry->info.smem_static = (size_t)v;
        }
    }
    return n;
}

const ft_nvrtc_kernel *ft_nvrtc_kernel_of(const ft_nvrtc_result *r, const char *name) {
    for (int i = 0; i < r->nkernels; i++)
        if (strcmp(r->kernels[i].name, name) == 0) return &r->kernels[i];
    return NULL;
}

void ft_nvrtc_result_free(ft_nvrtc_result *r) {
    if (!r) return;
    free(r->cubin);
    free(r->log);
    r->cubin = NULL;
    r->log = NULL;
}

/* ---- compiling ------------------------------------------------------------------------------ */

static ft_status fail_nvrtc(ft_err *err, const char *what, nvrtcResult r, const char *name) {
    return ft_err_set(err, FT_EINTERNAL, "NVRTC %s(%s): %s", what, name, nvrtcGetErrorString(r));
}

static int load_cached(const char *base, ft_nvrtc_result *out) {
    char path[FT_KC_PATH_CAP + 96];
    snprintf(path, sizeof path, "%s.cubin", base);
    char *cubin = NULL, *log = NULL;
    size_t n = 0, ln = 0;
    if (ft_kc_read_file(path, &cubin, &n) != 0 || n == 0) {
        free(cubin);
        return 0;
    }
    snprintf(path, sizeof path, "%s.log", base);
    if (ft_kc_read_file(path, &log, &ln) != 0) {
        free(cubin);
        return 0;
    }
    out->cubin = cubin;
    out->cubin_size = n;
    out->log = log;
    out->cached = 1;
    return 1;
}

ft_status ft_nvrtc_compile(const char *source, const char *const *defines, int ndefines,
                           const char *arch, ft_nvrtc_result *out, ft_err *err) {
    memset(out, 0, sizeof *out);
    if (!source || !*source || !arch)
        return ft_err_set(err, FT_EINVAL, "NVRTC: no source or no architecture");
    if (strncmp(arch, "sm_", 3) != 0 || !isdigit((unsigned char)arch[3]))
        return ft_err_set(err, FT_EINVAL,
                          "NVRTC: '%s' is not a real GPU architecture (e.g. sm_80, sm_90a)", arch);
    if (ndefines < 0 || ndefines > FT_NVRTC_MAX_DEFINES)
        return ft_err_set(err, FT_EINVAL, "NVRTC: %d defines, at most %d", ndefines,
                          FT_NVRTC_MAX_DEFINES);
    char path[FT_KC_PATH_CAP], dir[FT_KC_PATH_CAP], inc[FT_KC_PATH_CAP], dialect[FT_KC_PATH_CAP];
    if ((size_t)(source[0] == '/' ? snprintf(path, sizeof path, "%s", source)
                                  : snprintf(path, sizeof path, "%s/%s", kernel_dir(), source)) >=
        sizeof path)
        return ft_err_set(err, FT_EINVAL, "NVRTC: the path of %s is too long", source);
    ft_kc_dir_of(path, dir, sizeof dir);
    cuda_include(inc, sizeof inc);
    snprintf(dialect, sizeof dialect, "%.*s/cuda", (int)sizeof dialect - 8, kernel_dir());
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;

    char dlist[512];
    int bad = ft_kc_define_list(defines, ndefines, 512, dlist, sizeof dlist);
    if (bad >= 0)
        return ft_err_set(err, FT_EINVAL,
                          "NVRTC: compiling %s: define '%s' is not NAME or NAME=VALUE", name,
                          defines[bad] ? defines[bad] : "(null)");

    char *text = NULL;
    size_t len = 0;
    if (ft_kc_read_file(path, &text, &len) != 0)
        return ft_err_set(err, FT_EIO, "NVRTC: cannot read kernel source %s: %s", path,
                          strerror(errno));

    /* The options (owned strings in store). */
    char store[MAX_OPTS][FT_KC_PATH_CAP + 16];
    const char *opts[MAX_OPTS];
    int nopt = 0;
#define OPT(...) (snprintf(store[nopt], sizeof store[nopt], __VA_ARGS__), opts[nopt] = store[nopt], nopt++)
    OPT("--gpu-architecture=%s", arch);
    OPT("-std=c++17");
    OPT("--ptxas-options=-v");
    OPT("-lineinfo");
    OPT("-I%s", inc);
    OPT("-I%s", dir);
    if (strcmp(dir, dialect) != 0) OPT("-I%s", dialect); /* ft_cuda.h for any source */
    for (int i = 0; i < ndefines; i++)
        OPT("-D%s", defines[i]);
#undef OPT

    /* The key is the same wherever the sources and the toolkit are installed (a cache built
     * on one machine serves another with the same NVRTC): the include folders count by their
     * role and by the content of the files included from them, not by their paths. */
    ft_kc_hash h;
    ft_kc_hash_init(&h);
    ft_kc_hash_str(&h, "flaretune nvrtc cubin 2");
    ft_kc_hash_str(&h, ft_nvrtc_version());
    for (int i = 0; i < nopt; i++)
        ft_kc_hash_str(&h, strncmp(opts[i], "-I", 2) == 0 ? "-I(folder)" : opts[i]);
    ft_kc_hash_str(&h, name);
    ft_kc_hash_bytes(&h, text, len);
    const char *incs[2] = {dir, dialect};
    ft_kc_seen *seen = calloc(1, sizeof *seen);
    if (!seen) {
        free(text);
        return ft_err_set(err, FT_ENOMEM, "NVRTC: out of memory");
    }
    ft_kc_hash_includes(&h, text, dir, incs, 2, seen, 0);
    free(seen);
    ft_kc_hash_hex(&h, out->key);

    char cdir[FT_KC_PATH_CAP], base[FT_KC_PATH_CAP + 48];
    int w = ft_kc_cache_dir("nvrtc", cdir, sizeof cdir);
    int cache_ok = w > 0 && (size_t)w < sizeof cdir &&
                   (size_t)snprintf(base, sizeof base, "%s/%s", cdir, out->key) < sizeof base;
    if (cache_ok && load_cached(base, out)) {
        free(text);
        ft_kc_note(out->key, 1);
        out->nkernels = ft_nvrtc_parse_ptxas(out->log, out->kernels, FT_NVRTC_MAX_KERNELS);
        return FT_OK;
    }

    nvrtcProgram prog;
    nvrtcResult r = nvrtcCreateProgram(&prog, text, name, 0, NULL, NULL);
    free(text);
    if (r != NVRTC_SUCCESS) return fail_nvrtc(err, "nvrtcCreateProgram", r, name);
    nvrtcResult cr = nvrtcCompileProgram(prog, nopt, opts);
    size_t logn = 0;
    nvrtcGetProgramLogSize(prog, &logn);
    out->log = malloc(logn + 1);
    if (!out->log) {
        nvrtcDestroyProgram(&prog);
        return ft_err_set(err, FT_ENOMEM, "NVRTC: out of memory");
    }
    out->log[0] = '\0';
    if (logn) nvrtcGetProgramLog(prog, out->log);
    out->log[logn] = '\0';
    if (cr != NVRTC_SUCCESS) {
        char line[400];
        ft_kc_first_error(out->log, line, sizeof line);
        nvrtcDestroyProgram(&prog);
        ft_nvrtc_result_free(out);
        return ft_err_set(err, FT_EINVAL, "compiling %s for %s with %s: %s", name, arch, dlist,
                          line);
    }
    r = nvrtcGetCUBINSize(prog, &out->cubin_size);
    if (r == NVRTC_SUCCESS && out->cubin_size) {
        out->cubin = malloc(out->cubin_size);
        if (!out->cubin) r = NVRTC_ERROR_OUT_OF_MEMORY;
        else r = nvrtcGetCUBIN(prog, out->cubin);
    }
    nvrtcDestroyProgram(&prog);
    if (r != NVRTC_SUCCESS || !out->cubin) {
        ft_nvrtc_result_free(out);
        return ft_err_set(err, FT_EINTERNAL, "NVRTC gave no CUBIN for %s (%s): %s", name, arch,
                          nvrtcGetErrorString(r));
    }
    out->nkernels = ft_nvrtc_parse_ptxas(out->log, out->kernels, FT_NVRTC_MAX_KERNELS);
    ft_kc_note(out->key, 0);
    /* Cache it (a failure to write only costs a later compile). */
    if (cache_ok && ft_kc_mkdir_p(cdir) == 0) {
        char p2[FT_KC_PATH_CAP + 96];
        snprintf(p2, sizeof p2, "%s.log", base);
        if (ft_kc_write_atomic(p2, out->log, strlen(out->log)) == 0) {
            snprintf(p2, sizeof p2, "%s.cubin", base);
            (void)ft_kc_write_atomic(p2, out->cubin, out->cubin_size);
        }
    }
    return FT_OK;
}
