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
#include "runtime.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/paths.h"
#include "kcache.h"

#ifndef FT_CUDA_INCLUDE_DIR
#define FT_CUDA_INCLUDE_DIR "/usr/local/cuda/include"
#endif

#define MAX_OPTS (FT_NVRTC_MAX_DEFINES + FT_NVRTC_MAX_OPTIONS + 12)
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
    const char *low = ft_nvrtc_lowered(r, name);
    for (int i = 0; low && i < r->nkernels; i++)
        if (strcmp(r->kernels[i].name, low) == 0) return &r->kernels[i];
    for (int i = 0; i < r->nkernels; i++)
        if (strcmp(r->kernels[i].written, name) == 0) return &r->kernels[i];
    return NULL;
}

const char *ft_nvrtc_lowered(const ft_nvrtc_result *r, const char *expr) {
    for (int i = 0; i < r->nnames; i++)
        if (strcmp(r->names[i].expr, expr) == 0) return r->names[i].lowered;
    return NULL;
}

void ft_nvrtc_result_free(ft_nvrtc_result *r) {
    if (!r) return;
    free(r->cubin);
    free(r->log);
    free(r->names);
    r->cubin = NULL;
    r->log = NULL;
    r->names = NULL;
    r->nnames = 0;
}

/* The function name of a mangled kernel name (Itanium ABI): "_Z18convolution_kernelPfS_S_" is
 * "convolution_kernel", "_ZN2ns1kEPf" is "ns::k"; a template's arguments are left out. A name
 * that is not mangled, or not so simply, is copied as it is. */
static void demangle_function(const char *m, char *out, size_t n) {
    snprintf(out, n, "%s", m);
    if (strncmp(m, "_Z", 2) != 0) return;
    const char *p = m + 2;
    if (*p == 'L') p++;
    int nested = *p == 'N';
    if (nested) {
        p++;
        while (*p == 'r' || *p == 'V' || *p == 'K')
            p++;
    }
    char buf[256];
    size_t k = 0;
    for (int parts = 0; isdigit((unsigned char)*p); parts++) {
        char *end;
        long len = strtol(p, &end, 10);
        if (len <= 0 || (size_t)len > strlen(end) || k + (size_t)len + 3 >= sizeof buf) return;
        if (parts) buf[k++] = ':', buf[k++] = ':';
        memcpy(buf + k, end, (size_t)len);
        k += (size_t)len;
        p = end + len;
        if (!nested) break;
    }
    if (k == 0 || (nested && *p != 'E' && *p != 'I')) return;
    buf[k] = '\0';
    ft_kc_copy_cut(out, n, buf);
}

/* Each kernel's written name: its name expression's when one lowered to it, else demangled. */
static void name_kernels(ft_nvrtc_result *r) {
    for (int i = 0; i < r->nkernels; i++) {
        ft_nvrtc_kernel *k = &r->kernels[i];
        demangle_function(k->name, k->written, sizeof k->written);
        for (int j = 0; j < r->nnames; j++)
            if (strcmp(r->names[j].lowered, k->name) == 0)
                ft_kc_copy_cut(k->written, sizeof k->written, r->names[j].expr);
    }
}

/* ---- compiling ------------------------------------------------------------------------------ */

/* The program's log (malloc'd, NUL-terminated; NULL when out of memory). */
static char *program_log(nvrtcProgram prog) {
    size_t n = 0;
    nvrtcGetProgramLogSize(prog, &n);
    char *log = malloc(n + 1);
    if (!log) return NULL;
    log[0] = '\0';
    if (n) nvrtcGetProgramLog(prog, log);
    log[n] = '\0';
    return log;
}

/* NVRTC (13.0) drops ptxas's own error from the log when ptxas reports its resources (-v): a
 * kernel over one of its limits ("uses too much shared data (0xdbf0 bytes, 0xc000 max)": NVRTC
 * allows 48 KiB of static shared memory, where nvcc's ptxas allows the device's) fails with the
 * report alone. Compile again without the report to read the error into line; line is kept
 * when that gives none. */
static void refused_why(const char *text, const char *name, const char *const *opts, int nopt,
                        char *line, size_t n) {
    const char *quiet[MAX_OPTS];
    int nq = 0;
    for (int i = 0; i < nopt; i++)
        if (strcmp(opts[i], "--ptxas-options=-v") != 0) quiet[nq++] = opts[i];
    nvrtcProgram prog;
    if (nvrtcCreateProgram(&prog, text, name, 0, NULL, NULL) != NVRTC_SUCCESS) return;
    if (nvrtcCompileProgram(prog, nq, quiet) != NVRTC_SUCCESS) {
        char *log = program_log(prog);
        char again[400];
        if (log) ft_kc_first_error(log, again, sizeof again);
        if (log && strstr(again, "error")) snprintf(line, n, "%s", again);
        free(log);
    }
    nvrtcDestroyProgram(&prog);
}

static ft_status fail_nvrtc(ft_err *err, const char *what, nvrtcResult r, const char *name) {
    return ft_err_set(err, FT_EINTERNAL, "NVRTC %s(%s): %s", what, name, nvrtcGetErrorString(r));
}

/* An entry's digest: its CUBIN, log and names (NULL: none), as sealed when it was cached. */
static void entry_digest(const char *cubin, size_t n, const char *log, size_t ln, const char *names,
                         size_t nn, char *out) {
    const void *parts[3] = {cubin, log, names ? names : ""};
    const size_t lens[3] = {n, ln, names ? nn : 0};
    ft_kc_digest(parts, lens, 3, out);
}

static int load_cached(const char *base, ft_nvrtc_result *out) {
    char path[FT_KC_PATH_CAP + 96];
    snprintf(path, sizeof path, "%s.cubin", base);
    char *cubin = NULL, *log = NULL, *names = NULL;
    size_t n = 0, ln = 0, nn = 0;
    if (ft_kc_read_file(path, &cubin, &n) != 0 || n == 0) {
        free(cubin);
        return 0;
    }
    snprintf(path, sizeof path, "%s.log", base);
    if (ft_kc_read_file(path, &log, &ln) != 0) {
        free(cubin);
        return 0;
    }
    snprintf(path, sizeof path, "%s.names", base);
    if (out->nnames && ft_kc_read_file(path, &names, &nn) != 0) names = NULL;
    /* A damaged or half-replaced entry is no hit: compiled again, and cached again. */
    char digest[33];
    entry_digest(cubin, n, log, ln, names, nn, digest);
    snprintf(path, sizeof path, "%s.cubin", base);
    if ((out->nnames && !names) || !ft_kc_sealed(path, digest)) {
        free(cubin);
        free(log);
        free(names);
        return 0;
    }
    out->cubin = cubin;
    out->cubin_size = n;
    out->log = log;
    out->cached = 1;
    if (out->nnames == 0) return 1;
    /* The lowered names, a line each: "expr<TAB>lowered", in the order of the expressions. */
    int ok = 1;
    char *line = names;
    for (int i = 0; ok && i < out->nnames; i++) {
        char *nl = line ? strchr(line, '\n') : NULL, *tab = line ? strchr(line, '\t') : NULL;
        ok = nl && tab && tab < nl && (size_t)(tab - line) < sizeof out->names[i].expr &&
             (size_t)(nl - tab - 1) < sizeof out->names[i].lowered &&
             strncmp(line, out->names[i].expr, (size_t)(tab - line)) == 0 &&
             out->names[i].expr[tab - line] == '\0';
        if (ok) snprintf(out->names[i].lowered, sizeof out->names[i].lowered, "%.*s",
                         (int)(nl - tab - 1), tab + 1);
        line = nl ? nl + 1 : NULL;
    }
    free(names);
    if (!ok) {
        free(cubin);
        free(log);
        out->cubin = NULL;
        out->log = NULL;
        out->cached = 0;
    }
    return ok;
}

/* Compile the file at path (found already): the work of ft_nvrtc_compile and
 * ft_nvrtc_compile_file (options and name expressions: f, NULL for flaretune's own sources). */
static ft_status compile_at(const char *path, const char *const *defines, int ndefines,
                            const ft_nvrtc_file *f, const char *arch, ft_nvrtc_result *out,
                            ft_err *err) {
    char dir[FT_KC_PATH_CAP], inc[FT_KC_PATH_CAP], dialect[FT_KC_PATH_CAP];
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
    char(*store)[FT_KC_PATH_CAP + 16] = malloc(MAX_OPTS * sizeof *store);
    if (!store) {
        free(text);
        return ft_err_set(err, FT_ENOMEM, "NVRTC: out of memory");
    }
    const char *opts[MAX_OPTS];
    int nopt = 0, own_std = 0;
    for (int i = 0; f && i < f->noptions; i++)
        own_std |= strncmp(f->options[i], "-std=", 5) == 0 || strncmp(f->options[i], "--std=", 6) == 0;
#define OPT(...) (snprintf(store[nopt], sizeof store[nopt], __VA_ARGS__), opts[nopt] = store[nopt], nopt++)
    OPT("--gpu-architecture=%s", arch);
    if (!own_std) OPT("-std=c++17");
    OPT("--ptxas-options=-v");
    OPT("-lineinfo");
    OPT("-I%s", inc);
    OPT("-I%s", dir);
    if (strcmp(dir, dialect) != 0) OPT("-I%s", dialect); /* ft_cuda.h for any source */
    for (int i = 0; i < ndefines; i++)
        OPT("-D%s", defines[i]);
    for (int i = 0; f && i < f->noptions; i++)
        OPT("%s", f->options[i]);
#undef OPT

    /* The key is the same wherever the sources and the toolkit are installed (a cache built
     * on one machine serves another with the same NVRTC): the include folders count by their
     * role and by the content of the files included from them, not by their paths. */
    ft_kc_hash h;
    ft_kc_hash_init(&h);
    ft_kc_hash_str(&h, "flaretune nvrtc cubin 2");
    ft_kc_hash_str(&h, ft_nvrtc_version());
    const char *incs[2 + FT_NVRTC_MAX_OPTIONS] = {dir, dialect};
    int nincs = 2;
    for (int i = 0; i < nopt; i++) {
        ft_kc_hash_str(&h, strncmp(opts[i], "-I", 2) == 0 ? "-I(folder)" : opts[i]);
        if (f && i >= nopt - f->noptions && strncmp(opts[i], "-I", 2) == 0 && opts[i][2])
            incs[nincs++] = opts[i] + 2;
    }
    for (int i = 0; f && i < f->nnames; i++) {
        ft_kc_hash_str(&h, "name expression");
        ft_kc_hash_str(&h, f->names[i]);
    }
    ft_kc_hash_str(&h, name);
    ft_kc_hash_bytes(&h, text, len);
    ft_kc_seen *seen = calloc(1, sizeof *seen);
    if (f && f->nnames) out->names = calloc((size_t)f->nnames, sizeof *out->names);
    if (!seen || (f && f->nnames && !out->names)) {
        free(seen);
        free(text);
        free(store);
        return ft_err_set(err, FT_ENOMEM, "NVRTC: out of memory");
    }
    for (int i = 0; f && i < f->nnames; i++)
        snprintf(out->names[i].expr, sizeof out->names[i].expr, "%s", f->names[i]);
    out->nnames = f ? f->nnames : 0;
    ft_kc_hash_includes(&h, text, dir, incs, nincs, seen, 0);
    free(seen);
    ft_kc_hash_hex(&h, out->key);

    char cdir[FT_KC_PATH_CAP], base[FT_KC_PATH_CAP + 48];
    int w = ft_kc_cache_dir("nvrtc", cdir, sizeof cdir);
    int cache_ok = w > 0 && (size_t)w < sizeof cdir &&
                   (size_t)snprintf(base, sizeof base, "%s/%s", cdir, out->key) < sizeof base;
    if (cache_ok && load_cached(base, out)) {
        free(text);
        free(store);
        ft_kc_note(out->key, 1);
        out->nkernels = ft_nvrtc_parse_ptxas(out->log, out->kernels, FT_NVRTC_MAX_KERNELS);
        name_kernels(out);
        return FT_OK;
    }

    nvrtcProgram prog;
    nvrtcResult r = nvrtcCreateProgram(&prog, text, name, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        free(text);
        free(store);
        ft_nvrtc_result_free(out);
        return fail_nvrtc(err, "nvrtcCreateProgram", r, name);
    }
    for (int i = 0; i < out->nnames && r == NVRTC_SUCCESS; i++)
        r = nvrtcAddNameExpression(prog, out->names[i].expr);
    if (r != NVRTC_SUCCESS) {
        free(store);
        nvrtcDestroyProgram(&prog);
        ft_nvrtc_result_free(out);
        free(text);
        return fail_nvrtc(err, "nvrtcAddNameExpression", r, name);
    }
    nvrtcResult cr = nvrtcCompileProgram(prog, nopt, opts);
    out->log = program_log(prog);
    char line[400] = "";
    if (out->log && cr != NVRTC_SUCCESS) {
        ft_kc_first_error(out->log, line, sizeof line);
        /* What ptxas reported of each kernel before it refused one stays in out->kernels
         * (ft_nvrtc_kernel_of finds them): a kernel over a limit of NVRTC's still has its
         * registers and shared memory. */
        out->nkernels = ft_nvrtc_parse_ptxas(out->log, out->kernels, FT_NVRTC_MAX_KERNELS);
        name_kernels(out);
        if (!strstr(line, "error")) refused_why(text, name, opts, nopt, line, sizeof line);
    }
    free(text); /* the source and the options serve no one past here */
    free(store);
    if (!out->log) {
        nvrtcDestroyProgram(&prog);
        ft_nvrtc_result_free(out);
        return ft_err_set(err, FT_ENOMEM, "NVRTC: out of memory");
    }
    if (cr != NVRTC_SUCCESS) {
        nvrtcDestroyProgram(&prog);
        /* A name expression NVRTC could not resolve (its error is in the generated
         * "__nv_name_map"): the file has no such kernel or symbol. */
        const char *missing = NULL;
        for (int i = 0; i < out->nnames && !missing && strstr(line, "__nv_name_map"); i++) {
            char quoted[160];
            snprintf(quoted, sizeof quoted, "\"%s\"",
                     out->names[i].expr + (out->names[i].expr[0] == '&'));
            if (strstr(line, quoted)) missing = out->names[i].expr;
        }
        ft_status st;
        if (missing)
            st = ft_err_set(err, FT_EINVAL, "%s (for %s with %s) has no %s '%s' (NVRTC: %s)", name,
                            arch, dlist, missing[0] == '&' ? "symbol" : "kernel",
                            missing + (missing[0] == '&'), line);
        else
            st = ft_err_set(err, FT_EINVAL, "compiling %s for %s with %s: %s", name, arch, dlist,
                            line);
        ft_nvrtc_result_free(out);
        return st;
    }
    for (int i = 0; i < out->nnames && r == NVRTC_SUCCESS; i++) {
        const char *low = NULL;
        r = nvrtcGetLoweredName(prog, out->names[i].expr, &low);
        if (r == NVRTC_SUCCESS && low)
            snprintf(out->names[i].lowered, sizeof out->names[i].lowered, "%s", low);
    }
    if (r != NVRTC_SUCCESS) {
        nvrtcDestroyProgram(&prog);
        ft_nvrtc_result_free(out);
        return fail_nvrtc(err, "nvrtcGetLoweredName", r, name);
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
    name_kernels(out);
    ft_kc_note(out->key, 0);
    /* Cache it (a failure to write only costs a later compile); its seal last, since it says
     * the rest is there and whole. */
    if (cache_ok && ft_kc_mkdir_p(cdir) == 0) {
        char p2[FT_KC_PATH_CAP + 96];
        int ok = 1;
        char *t = NULL;
        size_t k = 0;
        if (out->nnames) {
            size_t cap = (size_t)out->nnames * (sizeof out->names[0] + 2);
            t = malloc(cap);
            for (int i = 0; t && i < out->nnames; i++)
                k += (size_t)snprintf(t + k, cap - k, "%s\t%s\n", out->names[i].expr,
                                      out->names[i].lowered);
            snprintf(p2, sizeof p2, "%s.names", base);
            ok = t && ft_kc_write_atomic(p2, t, k) == 0;
        }
        snprintf(p2, sizeof p2, "%s.log", base);
        if (ok && ft_kc_write_atomic(p2, out->log, strlen(out->log)) == 0) {
            snprintf(p2, sizeof p2, "%s.cubin", base);
            if (ft_kc_write_atomic(p2, out->cubin, out->cubin_size) == 0) {
                char digest[33];
                entry_digest(out->cubin, out->cubin_size, out->log, strlen(out->log), t, k, digest);
                (void)ft_kc_seal(p2, digest);
            }
        }
        free(t);
    }
    return FT_OK;
}

/* The checks both entry points make. */
static ft_status check_request(const char *arch, int ndefines, ft_err *err) {
    if (!arch) return ft_err_set(err, FT_EINVAL, "NVRTC: no architecture");
    if (strncmp(arch, "sm_", 3) != 0 || !isdigit((unsigned char)arch[3]))
        return ft_err_set(err, FT_EINVAL,
                          "NVRTC: '%s' is not a real GPU architecture (e.g. sm_80, sm_90a)", arch);
    if (ndefines < 0 || ndefines > FT_NVRTC_MAX_DEFINES)
        return ft_err_set(err, FT_EINVAL, "NVRTC: %d defines, at most %d", ndefines,
                          FT_NVRTC_MAX_DEFINES);
    return FT_OK;
}

ft_status ft_nvrtc_compile(const char *source, const char *const *defines, int ndefines,
                           const char *arch, ft_nvrtc_result *out, ft_err *err) {
    memset(out, 0, sizeof *out);
    if (!source || !*source) return ft_err_set(err, FT_EINVAL, "NVRTC: no source");
    ft_status st = check_request(arch, ndefines, err);
    if (st) return st;
    char path[FT_KC_PATH_CAP];
    if ((size_t)(source[0] == '/' ? snprintf(path, sizeof path, "%s", source)
                                  : snprintf(path, sizeof path, "%s/%s", kernel_dir(), source)) >=
        sizeof path)
        return ft_err_set(err, FT_EINVAL, "NVRTC: the path of %s is too long", source);
    return compile_at(path, defines, ndefines, NULL, arch, out, err);
}

ft_status ft_nvrtc_compile_module(const ft_cuda_module_spec *m, const char *arch,
                                  ft_nvrtc_result *out, ft_err *err) {
    memset(out, 0, sizeof *out);
    if (m->ndefines < 0 || m->ndefines > FT_CUDA_MAX_DEFINES)
        return ft_err_set(err, FT_EINVAL, "NVRTC: %s: %d defines, at most %d", m->source,
                          m->ndefines, FT_CUDA_MAX_DEFINES);
    const char *defs[FT_CUDA_MAX_DEFINES];
    for (int d = 0; d < m->ndefines; d++)
        defs[d] = m->defines[d];
    return ft_nvrtc_compile(m->source, defs, m->ndefines, arch, out, err);
}

ft_status ft_nvrtc_compile_file(const ft_nvrtc_file *f, const char *arch, ft_nvrtc_result *out,
                                ft_err *err) {
    memset(out, 0, sizeof *out);
    if (!f || !f->path || !*f->path) return ft_err_set(err, FT_EINVAL, "NVRTC: no file");
    ft_status st = check_request(arch, f->ndefines, err);
    if (st) return st;
    if (f->noptions < 0 || f->noptions > FT_NVRTC_MAX_OPTIONS || f->nnames < 0 ||
        f->nnames > FT_NVRTC_MAX_NAMES)
        return ft_err_set(err, FT_EINVAL, "NVRTC: %d options and %d names, at most %d and %d",
                          f->noptions, f->nnames, FT_NVRTC_MAX_OPTIONS, FT_NVRTC_MAX_NAMES);
    for (int i = 0; i < f->noptions; i++)
        if (!f->options[i] || strlen(f->options[i]) >= FT_KC_PATH_CAP)
            return ft_err_set(err, FT_EINVAL, "NVRTC: option %d is missing or too long", i);
    for (int i = 0; i < f->nnames; i++)
        if (!f->names[i] || !*f->names[i] ||
            strlen(f->names[i]) >= sizeof((ft_nvrtc_result *)0)->names[0].expr)
            return ft_err_set(err, FT_EINVAL, "NVRTC: name %d is missing or too long", i);
    char path[PATH_MAX];
    if (!realpath(f->path, path))
        return ft_err_set(err, FT_EIO, "NVRTC: cannot read kernel file %s: %s", f->path,
                          strerror(errno));
    if (strlen(path) >= FT_KC_PATH_CAP)
        return ft_err_set(err, FT_EINVAL, "NVRTC: the path of %s is too long", f->path);
    return compile_at(path, f->defines, f->ndefines, f, arch, out, err);
}
