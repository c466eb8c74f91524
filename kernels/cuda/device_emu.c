/* device_emu.c: the SIMT emulator as a device (FT_DEV_EMU of kernels/cuda/device.h).
 *
 * Device memory is host memory (fresh allocations filled with 0xFF bytes, a NaN in every float
 * format, or with zeros while launches are profiled on a sample: emu_alloc), each allocation
 * fenced by a page nothing may touch, so a kernel reaching past a buffer ends the run with one
 * line (emu_guard.h); copies are memcpy and launches are synchronous. A module is kernels/<source>
 * compiled by the host C++ compiler with -DFT_EMU into a shared object and loaded with dlopen:
 *
 *   c++ -x c++ -std=c++17 -DFT_EMU -DFT_EMU_STACK_LOG2=n -I<kernels/cuda> -I<emu/include>
 *       -I<source dir> -O2 -fPIC -shared -fvisibility=hidden -fno-strict-aliasing
 *       -ffp-contract=off -D<defines> -o <cache>/emu/<key>.so <source>
 *
 * The key hashes the compiler's path and --version, the options, the source and every header it
 * includes with quotes (recursively). The object is written under a temporary name and renamed
 * into place, so processes sharing the cache never load a half-written file. Kernels are found
 * by name in the module's registry (FT_KERNEL_EXPORT) and run by the scheduler of emu/emu.c.
 * The compiler runs without the device's lock, so a compile pool (prefetch.h) builds modules
 * on several threads (ft_dev_prepare) while kernels run; loads and the module list take it.
 *
 * A file not written for flaretune (ft_dev_compile_file) is compiled through a small generated
 * translation unit, <cache>/emu/<key>.cu: the dialect (emu/ft_emu.h), the file's defines as
 * #define lines, `#include "<the file>"`, then a registration per kernel and per symbol the host
 * writes (their addresses and sizes: the module's names are hidden and C++ names mangled, so
 * dlsym could not find them). A compile error on a registration's line is a name the file lacks.
 */
#define _GNU_SOURCE
#include "device_emu.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/paths.h"
#include "core/sanitize.h"
#include "device_impl.h"
#include "emu/emu.h"
#include "emu_guard.h"
#include "kcache.h"
#include "specs.h"

#ifndef FT_EMU_CXX
#define FT_EMU_CXX ""
#endif

#define PATH_CAP 1024

typedef struct emu_module {
    ft_dev_module base;
    struct emu_module *next;
    char key[33];
    char source[256]; /* the source's file name, for messages */
    void *handle;
    int nkernels;
    const ft_emu_kernel *kernels;
    int nsymbols; /* the variables the host writes (ft_dev_compile_file's symbols) */
    const ft_emu_symbol *symbols;
    size_t tls_modid, tls_size;
    int *live;           /* a profile module's switch for its access hooks; NULL otherwise */
    uintptr_t load_addr; /* where it is loaded (its sites are reported relative to it) */
    char so[PATH_CAP + 64];
} emu_module;

typedef struct emu_dev {
    ft_dev base;
    char cxx[PATH_CAP];
    char kernel_dir[PATH_CAP];
    char cache_dir[PATH_CAP];
    char *cxx_version;
    int version_asked;
    pthread_mutex_t version_lock; /* the first compile asks the compiler its version */
    int debug, workers, ucontext;
    int profile; /* compile profile modules and record every launch (ft_dev_emu_set_profile) */
    int sample;  /* profiled launches of more blocks run a sample of this many (0: all)      */
    ft_emu_prof *prof;
    ft_emu_extent *ext; /* the live allocations, sorted by address (a sample's distinct bytes) */
    int next, capext;
    /* During a sampled launch: the distinct bytes it read [0] and wrote [1] in each allocation
     * and outside them, each stratum's scaled to the blocks it stands for (scale). */
    double *in_ext[2], outside[2], scale;
    ft_dev_emu_launch_record *records;
    int nrecords, caprecords;
    unsigned long long seed;
    emu_module *modules;
    ft_emu_pool *pools[FT_EMU_MAX_WORKERS];
    /* ft_dev_emu_stats, counted by any thread (a pool's builds hold no lock) */
    atomic_int compiled, disk_hits, memory_hits;
    atomic_uint tmp_seq;  /* makes the temporary names of builds in flight distinct */
    pthread_mutex_t lock; /* the module list, loads and launches (not the compiler's runs) */
} emu_dev;

static emu_dev *emu_of(ft_dev *d) { return (emu_dev *)d; }

/* ---- memory ---------------------------------------------------------------------------------- */

/* List the allocation [p, p + n) in d->ext, kept sorted (the caller holds the lock). -1 when
 * out of memory. */
static int ext_add(emu_dev *d, void *p, size_t n) {
    if (d->next == d->capext) {
        int cap = d->capext ? 2 * d->capext : 64;
        ft_emu_extent *e = realloc(d->ext, (size_t)cap * sizeof *e);
        if (!e) return -1;
        d->ext = e;
        d->capext = cap;
    }
    int at = d->next;
    while (at > 0 && d->ext[at - 1].start > (uintptr_t)p)
        at--;
    memmove(&d->ext[at + 1], &d->ext[at], (size_t)(d->next - at) * sizeof *d->ext);
    d->ext[at] = (ft_emu_extent){(uintptr_t)p, n};
    d->next++;
    return 0;
}

static ft_status emu_alloc(ft_dev *dev, size_t bytes, void **ptr, ft_err *err) {
    emu_dev *d = emu_of(dev);
    size_t n = bytes ? bytes : 1;
    /* Read before written: NaN, so that a kernel reading what nothing wrote fails its check.
     * But a launch profiled on a sample of its blocks leaves the rest of its outputs unwritten,
     * and a later kernel of the call reads them: NaN there turns every data-dependent branch
     * (decode_merge skips a split whose weight is not > 0) to never taken. Zeros read as the
     * data of a non-empty split does (a GPU skips the empty ones, which zeros do not say);
     * fresh pages are zeros already. */
    pthread_mutex_lock(&d->lock);
    const int sampling = d->profile && d->sample > 0;
    pthread_mutex_unlock(&d->lock);
    if (!(*ptr = ft_emu_guard_alloc(n, sampling ? -1 : 0xFF)))
        return ft_err_set(err, FT_ENOMEM,
                          "emulator: cannot allocate %zu bytes of device memory: %s", bytes,
                          strerror(errno));
    /* Allocations are listed only while launches are profiled, where a sample's distinct bytes
     * need them: a tuning run's allocations and frees stay O(1). */
    pthread_mutex_lock(&d->lock);
    const int listed = !d->profile || ext_add(d, *ptr, n) == 0;
    pthread_mutex_unlock(&d->lock);
    if (!listed) {
        ft_emu_guard_free(*ptr);
        *ptr = NULL;
        return ft_err_set(err, FT_ENOMEM, "emulator: out of memory for the allocation list");
    }
    return FT_OK;
}

static void emu_free(ft_dev *dev, void *ptr) {
    emu_dev *d = emu_of(dev);
    pthread_mutex_lock(&d->lock);
    for (int i = 0; ptr && i < d->next; i++)
        if (d->ext[i].start == (uintptr_t)ptr) {
            memmove(&d->ext[i], &d->ext[i + 1], (size_t)(d->next - i - 1) * sizeof *d->ext);
            d->next--;
            break;
        }
    pthread_mutex_unlock(&d->lock);
    ft_emu_guard_free(ptr);
}

static ft_status emu_copy(ft_dev *d, void *dst, const void *src, size_t bytes, ft_copy_kind kind,
                          ft_err *err) {
    (void)d, (void)kind, (void)err;
    memmove(dst, src, bytes);
    return FT_OK;
}

static ft_status emu_memset(ft_dev *d, void *dst, int byte, size_t bytes, ft_err *err) {
    (void)d, (void)err;
    memset(dst, byte, bytes);
    return FT_OK;
}

static ft_status emu_sync(ft_dev *d, ft_err *err) {
    (void)d, (void)err;
    return FT_OK; /* launches and copies are synchronous */
}

/* ---- running the compiler -------------------------------------------------------------------- */

/* ---- modules --------------------------------------------------------------------------------- */

typedef struct emu_tls_query {
    size_t modid, size;
} emu_tls_query;

static int tls_phdr(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    emu_tls_query *q = arg;
    if (info->dlpi_tls_modid != q->modid) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_TLS) q->size = info->dlpi_phdr[i].p_memsz;
    return 1;
}

/* dlopen path and read its registry into m. */
static ft_status module_load(emu_module *m, const char *path, ft_err *err) {
    m->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!m->handle)
        return ft_err_set(err, FT_EIO, "emulator: cannot load the module of %s: %s", m->source,
                          dlerror());
    void *sym = dlsym(m->handle, FT_EMU_MODULE_SYMBOL);
    ft_emu_module_fn fn;
    memcpy(&fn, &sym, sizeof fn);
    const ft_emu_module_info *info = sym ? fn() : NULL;
    ft_status s = FT_OK;
    if (!info)
        s = ft_err_set(err, FT_EINVAL, "emulator: %s has no %s (does it include ft_cuda.h?)",
                       m->source, FT_EMU_MODULE_SYMBOL);
    else if (info->abi != FT_EMU_ABI_VERSION || info->stack_log2 != FT_EMU_STACK_LOG2)
        s = ft_err_set(err, FT_EINTERNAL,
                       "emulator: the module of %s was built for ABI %u / stacks 2^%u, not %u / "
                       "2^%u",
                       m->source, info->abi, info->stack_log2, FT_EMU_ABI_VERSION,
                       FT_EMU_STACK_LOG2);
    else if (info->nkernels < 0 || info->nsymbols < 0)
        s = ft_err_set(err, FT_EINVAL,
                       "emulator: %s exports more kernels or symbols than the emulator holds",
                       m->source);
    if (s != FT_OK) {
        dlclose(m->handle);
        m->handle = NULL;
        return s;
    }
    m->nkernels = info->nkernels;
    m->kernels = info->kernels;
    m->nsymbols = info->nsymbols;
    m->symbols = info->symbols;
    m->live = dlsym(m->handle, "ft_emu_profile_live");
    struct link_map *lm = NULL;
    m->load_addr = dlinfo(m->handle, RTLD_DI_LINKMAP, &lm) == 0 && lm ? (uintptr_t)lm->l_addr : 0;
    snprintf(m->so, sizeof m->so, "%s", path);
    m->tls_modid = 0;
    m->tls_size = 0;
    if (dlinfo(m->handle, RTLD_DI_TLS_MODID, &m->tls_modid) == 0 && m->tls_modid) {
        emu_tls_query q = {m->tls_modid, 0};
        dl_iterate_phdr(tls_phdr, &q);
        m->tls_size = q.size;
    }
    return FT_OK;
}

/* The compiler's --version, part of every key: asked once per device, by the first thread that
 * needs it (a compile pool prepares modules on several threads at once). */
static const char *cxx_version(emu_dev *d) {
    pthread_mutex_lock(&d->version_lock);
    if (!d->version_asked) {
        d->version_asked = 1;
        char *out = NULL;
        char *argv[] = {d->cxx, "--version", NULL};
        if (ft_kc_run(argv, NULL, 4096, &out, NULL) == 0)
            d->cxx_version = out;
        else
            free(out);
    }
    pthread_mutex_unlock(&d->version_lock);
    return d->cxx_version ? d->cxx_version : "";
}

enum { MAX_ARGS = 128 };

enum { ARG_LEN = PATH_CAP + 32 }; /* a path and the option or subfolder around it */

/* One module to build: its source, its command line and its key in the cache. Worked out
 * without the device's lock (it reads the source and the headers it includes). */
typedef struct emu_build {
    char path[PATH_CAP];
    const char *name;         /* the source's file name, within path, for messages */
    char dlist[256];          /* the defines as a readable list, for messages */
    char *argv[MAX_ARGS + 1]; /* the compiler's command line ... */
    char (*store)[ARG_LEN];   /* ... and its strings (malloc'd: they are large) */
    int out_arg;              /* the output file's place in argv */
    uint64_t salt;            /* from the key, for temporary names */
    char key[33];
    char so[PATH_CAP + 64]; /* the module in the cache */
    /* A file not written for flaretune (ft_dev_compile_file): the generated translation unit
     * that includes it and registers its kernels and symbols, and where in it each is named
     * (a compile error there means the file has no such kernel or symbol). */
    const ft_dev_source *fs;
    char *wtext;
    char wrapper[PATH_CAP + 64];
    int reg_line; /* the line of the first registration: kernels, then symbols, one a line */
    int err_index; /* the kernel or symbol a compile error names (wrapper_name_at) */
} emu_build;

static void build_free(emu_build *b) {
    free(b->store);
    free(b->wtext);
    b->store = NULL;
    b->wtext = NULL;
}

/* A name the generated translation unit may spell: a C++ name (with :: and a kernel's template
 * arguments, e.g. "ns::kernel<float, 4>"), nothing that could end the line or the string. */
static int cxx_name_ok(const char *n, int templates) {
    if (!n[0] || !(isalpha((unsigned char)n[0]) || n[0] == '_' || n[0] == ':')) return 0;
    for (const char *c = n; *c; c++)
        if (!isalnum((unsigned char)*c) && *c != '_' && *c != ':' &&
            !(templates && strchr("<>, *&", *c)))
            return 0;
    return strlen(n) < 200;
}

/* "#define NAME VALUE" for "NAME=VALUE" (or "NAME 1" for "NAME"), at t + n. */
static size_t define_line(char *t, size_t cap, const char *d) {
    const char *eq = strchr(d, '=');
    return eq ? (size_t)snprintf(t, cap, "#define %.*s %s\n", (int)(eq - d), d, eq + 1)
              : (size_t)snprintf(t, cap, "#define %s 1\n", d);
}

/* The translation unit of a file as written: the dialect, the file's defines (after the
 * dialect, so a tunable named like one of its identifiers, "offset", cannot break it), the
 * file, then one registration a line (kernels, then symbols). */
static ft_status wrapper_text(emu_build *b, ft_err *err) {
    const ft_dev_source *fs = b->fs;
    for (const char *c = b->path; *c; c++)
        if (*c == '"' || *c == '\\' || *c == '\n')
            return ft_err_set(err, FT_EINVAL, "emulator: the path %s has a quote, backslash or "
                              "newline", b->path);
    for (int i = 0; i < fs->ndefines + fs->noptions; i++) {
        const char *o = i < fs->ndefines ? fs->defines[i] : fs->options[i - fs->ndefines];
        if (strpbrk(o, "\r\n"))
            return ft_err_set(err, FT_EINVAL, "emulator: a define or option of %s has a newline",
                              b->name);
    }
    for (int i = 0; i < fs->nkernels; i++)
        if (!cxx_name_ok(fs->kernels[i], 1))
            return ft_err_set(err, FT_EINVAL, "emulator: kernel '%s' of %s is not a C++ name",
                              fs->kernels[i], b->name);
    for (int i = 0; i < fs->nsymbols; i++)
        if (!cxx_name_ok(fs->symbols[i], 0))
            return ft_err_set(err, FT_EINVAL, "emulator: symbol '%s' of %s is not a C++ name",
                              fs->symbols[i], b->name);
    size_t cap = 512 + strlen(b->path);
    for (int i = 0; i < fs->ndefines; i++)
        cap += 16 + strlen(fs->defines[i]);
    for (int i = 0; i < fs->noptions; i++)
        cap += 16 + strlen(fs->options[i]);
    for (int i = 0; i < fs->nkernels; i++)
        cap += 128 + 3 * strlen(fs->kernels[i]);
    for (int i = 0; i < fs->nsymbols; i++)
        cap += 128 + 3 * strlen(fs->symbols[i]);
    char *t = malloc(cap);
    if (!t) return ft_err_set(err, FT_ENOMEM, "emulator: out of memory");
    size_t n = 0;
    n += (size_t)snprintf(t + n, cap - n,
                          "/* %s as written, for the emulator: its kernels and the variables the "
                          "host writes registered by name. */\n"
                          "#include \"emu/ft_emu.h\"\n",
                          b->name);
    int lines = 2;
    for (int i = 0; i < fs->noptions; i++) {
        const char *o = fs->options[i];
        const char *def = strncmp(o, "-D", 2) == 0 && o[2]                ? o + 2
                          : strncmp(o, "--define-macro=", 15) == 0 && o[15] ? o + 15
                                                                            : NULL;
        if (def) n += define_line(t + n, cap - n, def), lines++;
    }
    for (int i = 0; i < fs->ndefines; i++)
        n += define_line(t + n, cap - n, fs->defines[i]), lines++;
    n += (size_t)snprintf(t + n, cap - n, "#include \"%s\"\n", b->path);
    b->reg_line = lines + 2;
    for (int i = 0; i < fs->nkernels; i++)
        n += (size_t)snprintf(t + n, cap - n,
                              "static const ::ft_emu::kernel_registration ft_emu_foreign_k%d(\"%s\", "
                              "&::ft_emu::invoke<&%s>);\n",
                              i, fs->kernels[i], fs->kernels[i]);
    for (int i = 0; i < fs->nsymbols; i++)
        n += (size_t)snprintf(t + n, cap - n,
                              "static const ::ft_emu::symbol_registration ft_emu_foreign_s%d(\"%s\", "
                              "(void *)&%s, sizeof(%s));\n",
                              i, fs->symbols[i], fs->symbols[i], fs->symbols[i]);
    b->wtext = t;
    return FT_OK;
}

/* An option of a file (ft_dev_source.options) the emulator honours: -D and -I (the others are
 * NVRTC's: the language standard, fast math, ...). Returns the -D/-I argument, or NULL. */
static const char *option_kept(const char *o, char *out, size_t n) {
    if (strncmp(o, "-D", 2) == 0 && o[2]) return snprintf(out, n, "-D%s", o + 2), out;
    if (strncmp(o, "--define-macro=", 15) == 0) return snprintf(out, n, "-D%s", o + 15), out;
    if (strncmp(o, "-I", 2) == 0 && o[2]) return snprintf(out, n, "-I%s", o + 2), out;
    if (strncmp(o, "--include-path=", 15) == 0) return snprintf(out, n, "-I%s", o + 15), out;
    return NULL;
}

/* The command line and the key of a module (b is freed with build_free, also on failure). */
static ft_status build_plan(emu_dev *d, const char *source, const char *const *defines,
                            int ndefines, const ft_dev_source *fs, emu_build *b, ft_err *err) {
    memset(b, 0, sizeof *b);
    b->fs = fs;
    if (!d->cxx[0])
        return ft_err_set(err, FT_EUNSUPPORTED,
                          "emulator: no C++ compiler (none was found when flaretune was "
                          "configured; set FLARETUNE_EMU_CXX)");
    int nopts = fs ? fs->noptions : 0;
    if (ndefines + nopts > MAX_ARGS - 24)
        return ft_err_set(err, FT_EINVAL, "emulator: %d defines and options, at most %d",
                          ndefines + nopts, MAX_ARGS - 24);
    char dir[PATH_CAP];
    if (fs) {
        /* The file as the user names it: absolute, or from the working directory. */
        char real[PATH_MAX];
        if (!realpath(fs->path, real))
            return ft_err_set(err, FT_EIO, "emulator: cannot read kernel file %s: %s", fs->path,
                              strerror(errno));
        if ((size_t)snprintf(b->path, sizeof b->path, "%s", real) >= sizeof b->path)
            return ft_err_set(err, FT_EINVAL, "emulator: the path of %s is too long", fs->path);
    } else {
        int plen = source[0] == '/'
                       ? snprintf(b->path, sizeof b->path, "%s", source)
                       : snprintf(b->path, sizeof b->path, "%s/%s", d->kernel_dir, source);
        if (plen < 0 || (size_t)plen >= sizeof b->path)
            return ft_err_set(err, FT_EINVAL, "emulator: the path of %s is too long", source);
    }
    ft_kc_dir_of(b->path, dir, sizeof dir);
    b->name = strrchr(b->path, '/') ? strrchr(b->path, '/') + 1 : b->path;

    /* The defines, checked and as a readable list for messages. */
    snprintf(b->dlist, sizeof b->dlist, "no defines");
    int bad = ft_kc_define_list(defines, ndefines, PATH_CAP, b->dlist, sizeof b->dlist);
    if (bad >= 0)
        return ft_err_set(err, FT_EINVAL,
                          "emulator: compiling %s: define '%s' is not NAME or NAME=VALUE", b->name,
                          defines[bad]);

    b->store = malloc(MAX_ARGS * sizeof *b->store);
    if (!b->store) return ft_err_set(err, FT_ENOMEM, "emulator: out of memory");
    char *text = NULL;
    size_t len = 0;
    if (ft_kc_read_file(b->path, &text, &len) != 0)
        return ft_err_set(err, FT_EIO, "emulator: cannot read kernel source %s: %s", b->path,
                          strerror(errno));
    if (fs) {
        ft_status ws = wrapper_text(b, err);
        if (ws) {
            free(text);
            return ws;
        }
    }

    /* The command line. */
    char(*store)[ARG_LEN] = b->store;
    char **argv = b->argv;
    int argc = 0;
#define ARG(...) (snprintf(store[argc], ARG_LEN, __VA_ARGS__), argv[argc] = store[argc], argc++)
    ARG("%s", d->cxx);
    ARG("-std=c++17");
    ARG("-DFT_EMU");
    ARG("-DFT_EMU_STACK_LOG2=%d", FT_EMU_STACK_LOG2);
    int inc = argc; /* the two include directories, searched by ft_kc_hash_includes too */
    ARG("-I%s/cuda", d->kernel_dir);             /* ft_cuda.h, the dialect */
    ARG("-I%s/cuda/emu/include", d->kernel_dir); /* the emulator's CUDA headers */
    ARG("-I%s", dir);
    ARG("%s", d->debug ? "-O0" : "-O2");
    if (d->debug) ARG("-g3"); /* macros too: gdb can print threadIdx */
    if (d->debug) ARG("-DFT_EMU_DEBUG");
    ARG("-fPIC");
    ARG("-shared");
    ARG("-fvisibility=hidden");
    ARG("-fno-strict-aliasing"); /* CUDA code reinterprets pointers freely */
    ARG("-ffp-contract=off");
    /* Frames probed page by page as they grow: a kernel whose local arrays outgrow its thread's
     * stack faults on the guard page under it (one line, emu_guard.c) and cannot step over it
     * into the next thread's stack. */
    ARG("-fstack-clash-protection");
    ARG("-fdiagnostics-color=never");
    if (d->profile) {
        /* A profile module: ThreadSanitizer's instrumentation calls ft_emu.h's hooks at every
         * access (its runtime is not linked: -nodefaultlibs, the libraries named below);
         * accesses stay as the source writes them (no vectorizing, no merged stores), and
         * -g names their lines. */
        ARG("-DFT_EMU_PROFILE");
        ARG("-fsanitize=thread");
        ARG("--param=tsan-instrument-func-entry-exit=0");
        ARG("-fno-tree-vectorize");
        ARG("-fno-store-merging");
        ARG("-g");
        ARG("-nodefaultlibs");
    }
#if FT_ASAN
    /* This library runs under AddressSanitizer (FT_SANITIZE): instrument the kernels too, so an
     * out-of-bounds access to device memory is reported with the kernel's line (a profile
     * module is ThreadSanitizer's instead). */
    if (!d->profile) {
        ARG("-fsanitize=address,undefined");
        ARG("-fno-omit-frame-pointer");
    }
#endif
    for (int i = 0; i < ndefines && !fs; i++) /* a file's are in its wrapper */
        ARG("-D%s", defines[i]);
    int nincs = 2; /* the include folders ft_kc_hash_includes searches: the two above, -I's */
    for (int i = 0; i < nopts; i++) {
        char kept[ARG_LEN];
        if (!option_kept(fs->options[i], kept, sizeof kept) || kept[1] == 'D')
            continue; /* NVRTC's alone, or a define (in the wrapper) */
        if (kept[1] == 'I') nincs++;
        ARG("%s", kept);
    }
    int nhashed = argc;
    ARG("-o");
    b->out_arg = argc;
    ARG("(set below)");
    ARG("-x");
    ARG("c++");
    ARG("%s", fs ? "(the wrapper, set below)" : b->path);
    int src_arg = argc - 1;
    if (d->profile) {
        ARG("-lstdc++");
        ARG("-lm");
        ARG("-lc");
        ARG("-lgcc_s");
        ARG("-lgcc");
    }
#undef ARG
    argv[argc] = NULL;

    ft_kc_hash h;
    ft_kc_hash_init(&h);
    ft_kc_hash_str(&h, "flaretune emulator module");
    char abi[32];
    snprintf(abi, sizeof abi, "%d", FT_EMU_ABI_VERSION);
    ft_kc_hash_str(&h, abi);
    ft_kc_hash_str(&h, cxx_version(d));
    for (int i = 0; i < nhashed; i++)
        ft_kc_hash_str(&h, argv[i]);
    ft_kc_hash_str(&h, b->path);
    ft_kc_hash_bytes(&h, text, len);
    const char *incs[MAX_ARGS];
    incs[0] = store[inc] + 2;
    incs[1] = store[inc + 1] + 2;
    for (int i = inc + 2, k = 2; i < nhashed && k < nincs; i++)
        if (strncmp(store[i], "-I", 2) == 0 && i != inc + 2) incs[k++] = store[i] + 2;
    ft_kc_seen *seen = calloc(1, sizeof *seen);
    if (!seen) {
        free(text);
        return ft_err_set(err, FT_ENOMEM, "emulator: out of memory");
    }
    ft_kc_hash_includes(&h, text, dir, incs, nincs, seen, 0);
    if (fs) { /* the generated unit and the dialect it includes */
        ft_kc_hash_str(&h, "as written");
        ft_kc_hash_str(&h, b->wtext);
        ft_kc_hash_includes(&h, b->wtext, incs[0], incs, 0, seen, 0);
    }
    free(seen);
    free(text);
    snprintf(b->key, sizeof b->key, "%016llx%016llx", (unsigned long long)h.a,
             (unsigned long long)h.b);
    b->salt = h.b;
    if ((size_t)snprintf(b->so, sizeof b->so, "%s/%s.so", d->cache_dir, b->key) >= sizeof b->so ||
        (size_t)snprintf(b->wrapper, sizeof b->wrapper, "%s/%s.cu", d->cache_dir, b->key) >=
            sizeof b->wrapper)
        return ft_err_set(err, FT_EINVAL, "emulator: the cache directory %s is too long",
                          d->cache_dir);
    if (fs && (size_t)snprintf(store[src_arg], ARG_LEN, "%.*s", (int)ARG_LEN - 1, b->wrapper) >=
                  ARG_LEN)
        return ft_err_set(err, FT_EINVAL, "emulator: the cache directory %s is too long",
                          d->cache_dir);
    return FT_OK;
}

/* A compile error in the generated unit (its first error line names it: "<key>.cu:LINE:") is a
 * kernel or symbol the file does not have: "kernel" or "symbol", with b->err_index set; NULL for
 * an error anywhere else. */
static const char *wrapper_name_at(emu_build *b, const char *line) {
    char at[64];
    snprintf(at, sizeof at, "%s.cu:", b->key);
    const char *p = strstr(line, at);
    if (!p) return NULL;
    int ln = atoi(p + strlen(at)) - b->reg_line;
    if (ln >= 0 && ln < b->fs->nkernels) return b->err_index = ln, "kernel";
    ln -= b->fs->nkernels;
    if (ln >= 0 && ln < b->fs->nsymbols) return b->err_index = ln, "symbol";
    return NULL;
}

/* Build b's module into the cache unless it is there already (force: build it again, over a
 * file that would not load). The compiler writes a private name that is then renamed into
 * place, so threads and processes building the same module at once never see half a file.
 * Runs without the device's lock; *built is 1 when the compiler ran. */
/* The digest of the module file at path ("" when it cannot be read). */
static void module_digest(const char *path, char *out) {
    char *bytes = NULL;
    size_t n = 0;
    out[0] = '\0';
    if (ft_kc_read_file(path, &bytes, &n) != 0) return;
    const void *parts[1] = {bytes};
    ft_kc_digest(parts, &n, 1, out);
    free(bytes);
}

static ft_status build_run(emu_dev *d, emu_build *b, int force, int *built, ft_err *err) {
    *built = 0;
    /* A module in the cache is used only when its seal says it is whole: a truncated or
     * garbled file would be loaded into this process (SIGBUS, SIGSEGV), so it is built again. */
    char digest[33];
    if (!force && access(b->so, R_OK) == 0) {
        module_digest(b->so, digest);
        if (digest[0] && ft_kc_sealed(b->so, digest)) {
            ft_kc_note(b->key, 1);
            return FT_OK;
        }
    }
    if (ft_kc_mkdir_p(d->cache_dir) != 0)
        return ft_err_set(err, FT_EIO, "emulator: cannot create the cache directory %s: %s",
                          d->cache_dir, strerror(errno));
    static const char hexd[] = "0123456789abcdef";
    char tmp[PATH_CAP + 96], rnd[17];
    uint64_t r = (uint64_t)(uintptr_t)b ^ ((uint64_t)getpid() << 32) ^ b->salt ^
                 ((uint64_t)atomic_fetch_add(&d->tmp_seq, 1) << 48);
    for (int i = 0; i < 16; i++)
        rnd[i] = hexd[(r >> (4 * i)) & 15];
    rnd[16] = '\0';
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%s", b->so, (long)getpid(), rnd) >=
            sizeof tmp ||
        (size_t)snprintf(b->store[b->out_arg], ARG_LEN, "%s", tmp) >= ARG_LEN)
        return ft_err_set(err, FT_EINVAL, "emulator: the cache path %s is too long", b->so);
    if (b->fs && ft_kc_write_atomic(b->wrapper, b->wtext, strlen(b->wtext)) != 0)
        return ft_err_set(err, FT_EIO, "emulator: cannot write %s: %s", b->wrapper,
                          strerror(errno));
    char *log = NULL;
    int rc = ft_kc_run(b->argv, NULL, 65536, &log, NULL);
    if (rc != 0) {
        int spawn_errno = errno;
        unlink(tmp);
        ft_status s;
        if (rc < 0) {
            s = ft_err_set(err, FT_EUNSUPPORTED, "emulator: cannot run the C++ compiler %s: %s",
                           d->cxx, strerror(spawn_errno));
        } else if (rc > 128) { /* killed: no verdict on the source */
            s = ft_err_set(err, FT_EIO,
                           "emulator: the C++ compiler %s was killed (signal %d) compiling %s",
                           d->cxx, rc - 128, b->name);
        } else if (log &&
                   (strstr(log, "No space left on device") || strstr(log, "Disk quota exceeded") ||
                    strstr(log, "Read-only file system"))) {
            /* the cache's disk, not the source: an I/O error naming the reason */
            const char *why = strstr(log, "No space left on device") ? "No space left on device"
                              : strstr(log, "Disk quota exceeded")   ? "Disk quota exceeded"
                                                                     : "Read-only file system";
            s = ft_err_set(err, FT_EIO, "emulator: cannot write the module of %s into %s: %s",
                           b->name, d->cache_dir, why);
        } else {
            char line[400];
            ft_kc_first_error(log, line, sizeof line);
            const char *missing = b->fs ? wrapper_name_at(b, line) : NULL;
            if (missing)
                s = ft_err_set(err, FT_EINVAL, "%s (with %s) has no %s '%s' (the compiler: %s)",
                               b->name, b->dlist, missing,
                               missing[0] == 'k' ? b->fs->kernels[b->err_index]
                                                 : b->fs->symbols[b->err_index],
                               strchr(line, ' ') ? strchr(line, ' ') + 1 : line);
            else
                s = ft_err_set(err, FT_EINVAL, "compiling %s with %s: %s", b->name, b->dlist,
                               line);
        }
        free(log);
        return s;
    }
    free(log);
    module_digest(tmp, digest);
    if (rename(tmp, b->so) != 0) {
        int e = errno;
        unlink(tmp);
        return ft_err_set(err, FT_EIO, "emulator: cannot move the module into %s: %s", b->so,
                          strerror(e));
    }
    if (digest[0]) (void)ft_kc_seal(b->so, digest); /* unsealed: built again next time */
    atomic_fetch_add(&d->compiled, 1);
    ft_kc_note(b->key, 0);
    *built = 1;
    return FT_OK;
}

/* The loaded module of a key (the caller holds the device's lock). */
static emu_module *find_loaded(emu_dev *d, const char *key) {
    for (emu_module *m = d->modules; m; m = m->next)
        if (strcmp(m->key, key) == 0) return m;
    return NULL;
}

/* Load b's module from the cache, building it first when it is not there (or when the file
 * there does not load: another ABI, a damaged file). The compiler runs without the device's
 * lock; the load and the device's module list take it. */
static ft_status load_built(ft_dev *dev, emu_build *b, emu_module **out, ft_err *err) {
    emu_dev *d = emu_of(dev);
    int built = 0;
    ft_status s = build_run(d, b, 0, &built, err);
    for (int rebuilt = 0; s == FT_OK; rebuilt = 1) {
        pthread_mutex_lock(&d->lock);
        emu_module *m = find_loaded(d, b->key); /* another thread loaded it meanwhile */
        if (m) {
            atomic_fetch_add(&d->memory_hits, 1);
            pthread_mutex_unlock(&d->lock);
            *out = m;
            return FT_OK;
        }
        m = calloc(1, sizeof *m);
        if (!m) {
            pthread_mutex_unlock(&d->lock);
            return ft_err_set(err, FT_ENOMEM, "emulator: out of memory");
        }
        m->base.dev = dev;
        snprintf(m->key, sizeof m->key, "%s", b->key);
        if ((size_t)snprintf(m->source, sizeof m->source, "%s", b->name) >= sizeof m->source)
            m->source[sizeof m->source - 1] = '\0'; /* a long name, cut for messages */
        s = module_load(m, b->so, err);
        if (s == FT_OK) {
            if (!built) atomic_fetch_add(&d->disk_hits, 1);
            m->next = d->modules;
            d->modules = m;
            pthread_mutex_unlock(&d->lock);
            *out = m;
            return FT_OK;
        }
        pthread_mutex_unlock(&d->lock);
        free(m);
        if (built || rebuilt) return s; /* a fresh build that does not load: that error */
        s = build_run(d, b, 1, &built, err);
    }
    return s;
}

/* A module by its build plan: the one loaded already, else built (or found on disk) and loaded.
 * src: a file as written (ft_dev_compile_file), NULL for one of flaretune's sources. */
static ft_status compile_planned(ft_dev *dev, const char *source, const char *const *defines,
                                 int ndefines, const ft_dev_source *src, ft_dev_module **out,
                                 ft_err *err) {
    emu_dev *d = emu_of(dev);
    emu_build b;
    ft_status s = build_plan(d, source, defines, ndefines, src, &b, err);
    emu_module *m = NULL;
    if (s == FT_OK) {
        pthread_mutex_lock(&d->lock);
        m = find_loaded(d, b.key);
        if (m) atomic_fetch_add(&d->memory_hits, 1);
        pthread_mutex_unlock(&d->lock);
        if (!m) s = load_built(dev, &b, &m, err);
    }
    build_free(&b);
    if (s == FT_OK) *out = &m->base;
    return s;
}

static ft_status emu_compile(ft_dev *dev, const char *source, const char *const *defines,
                             int ndefines, ft_dev_module **out, ft_err *err) {
    return compile_planned(dev, source, defines, ndefines, NULL, out, err);
}

/* Into the disk cache only (a compile pool's job): no load, and the device's lock not taken. */
static ft_status emu_prepare(ft_dev *dev, const char *source, const char *const *defines,
                             int ndefines, int *cached, ft_err *err) {
    emu_dev *d = emu_of(dev);
    emu_build b;
    int built = 0;
    ft_status s = build_plan(d, source, defines, ndefines, NULL, &b, err);
    if (s == FT_OK) s = build_run(d, &b, 0, &built, err);
    build_free(&b);
    if (s == FT_OK) *cached = !built;
    return s;
}

/* A file as written: its own translation unit registers the kernels and symbols it names. */
static ft_status emu_compile_file(ft_dev *dev, const ft_dev_source *src, ft_dev_module **out,
                                  ft_err *err) {
    return compile_planned(dev, src->path, src->defines, src->ndefines, src, out, err);
}

/* Device memory is host memory: the variable is written in place (under the device's lock, so
 * never while a launch runs). */
static ft_status emu_symbol_write(ft_dev *dev, ft_dev_module *mod, const char *symbol,
                                  const void *host, size_t bytes, ft_err *err) {
    emu_dev *d = emu_of(dev);
    emu_module *m = (emu_module *)mod;
    for (int i = 0; i < m->nsymbols; i++) {
        const ft_emu_symbol *y = &m->symbols[i];
        if (strcmp(y->name, symbol) != 0) continue;
        if (bytes > y->bytes)
            return ft_err_set(err, FT_EINVAL,
                              "symbol '%s' of %s has %zu bytes, %zu were to be written", symbol,
                              m->source, y->bytes, bytes);
        pthread_mutex_lock(&d->lock);
        memcpy(y->addr, host, bytes);
        pthread_mutex_unlock(&d->lock);
        return FT_OK;
    }
    return ft_err_set(err, FT_EINVAL,
                      "%s has no symbol '%s' the host may write (name it in ft_dev_source.symbols)",
                      m->source, symbol);
}

static const ft_emu_kernel *find_kernel(const emu_module *m, const char *kernel, ft_err *err) {
    for (int i = 0; i < m->nkernels; i++)
        if (strcmp(m->kernels[i].name, kernel) == 0) return &m->kernels[i];
    char names[256] = "";
    size_t n = 0;
    for (int i = 0; i < m->nkernels && n + 1 < sizeof names; i++) {
        int w = snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", m->kernels[i].name);
        if (w > 0) n += (size_t)w;
    }
    ft_err_set(err, FT_EINVAL, "kernel '%s' is not in %s (it exports: %s)", kernel, m->source,
               m->nkernels ? names : "nothing; FT_KERNEL_EXPORT(name) after each kernel");
    return NULL;
}

static ft_status emu_kernel_info(ft_dev_module *mod, const char *kernel, ft_kernel_info *info,
                                 ft_err *err) {
    emu_module *m = (emu_module *)mod;
    if (!find_kernel(m, kernel, err)) return FT_EINVAL;
    memset(info, 0, sizeof *info);
    info->smem_static = m->tls_size; /* every kernel of the module together */
    info->max_threads = mod->dev->props.max_threads_per_block;
    return FT_OK;
}

/* Keep a launch's record, its sites made relative to the module (the caller holds the lock). */
static int record_add(emu_dev *d, const emu_module *m, ft_dev_emu_launch_record *r) {
    if (d->nrecords == d->caprecords) {
        int cap = d->caprecords ? 2 * d->caprecords : 16;
        ft_dev_emu_launch_record *v = realloc(d->records, (size_t)cap * sizeof *v);
        if (!v) return -1;
        d->records = v, d->caprecords = cap;
    }
    for (int i = 0; i < r->p.nsites; i++)
        r->p.sites[i].pc -= m->load_addr;
    ft_kc_copy_cut(r->source, sizeof r->source, m->source);
    snprintf(r->module, sizeof r->module, "%s", m->so);
    d->records[d->nrecords++] = *r;
    return 0;
}

/* One stratum's distinct sectors in each allocation and outside them, scaled (d->scale). */
static void sampled_extents(emu_dev *d, const ft_emu_prof *p, int w) {
    uint64_t *n = calloc((size_t)d->next + 1, sizeof *n);
    if (!n) {
        free(d->in_ext[w]); /* no estimate: the scaled figure stands */
        d->in_ext[w] = NULL;
        return;
    }
    d->outside[w] += d->scale * (double)ft_emu_prof_extents(p, w, d->ext, d->next, n);
    for (int i = 0; i < d->next; i++)
        d->in_ext[w][i] += d->scale * 32.0 * (double)n[i];
    free(n);
}

static ft_status emu_launch_locked(ft_dev *dev, ft_dev_module *mod, const char *kernel,
                                   ft_dim3 grid, ft_dim3 block, size_t smem, void **args,
                                   const ft_dim3 *only, int nonly, ft_err *err) {
    emu_dev *d = emu_of(dev);
    emu_module *m = (emu_module *)mod;
    const ft_emu_kernel *k = find_kernel(m, kernel, err);
    if (!k) return FT_EINVAL;
    const ft_dev_props *p = &dev->props;
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z)
        return ft_err_set(err, FT_EINVAL,
                          "launch of '%s': empty grid (%u,%u,%u) or block (%u,%u,%u)", kernel,
                          grid.x, grid.y, grid.z, block.x, block.y, block.z);
    if (block.x > 1024 || block.y > 1024 || block.z > 64 ||
        threads > (unsigned long long)p->max_threads_per_block)
        return ft_err_set(err, FT_EINVAL,
                          "launch of '%s': block (%u,%u,%u) exceeds the limits (1024, 1024, 64; "
                          "%d threads)",
                          kernel, block.x, block.y, block.z, p->max_threads_per_block);
    if (grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535)
        return ft_err_set(
            err, FT_EINVAL,
            "launch of '%s': grid (%u,%u,%u) exceeds the limits (2^31-1, 65535, 65535)", kernel,
            grid.x, grid.y, grid.z);
    if (smem + m->tls_size > p->smem_per_block_optin)
        return ft_err_set(err, FT_EINVAL,
                          "launch of '%s': %zu bytes of dynamic and %zu of static shared memory "
                          "exceed the %zu a block may have",
                          kernel, smem, m->tls_size, p->smem_per_block_optin);
    for (int i = 0; only && i < nonly; i++)
        if (only[i].x >= grid.x || only[i].y >= grid.y || only[i].z >= grid.z)
            return ft_err_set(err, FT_EINVAL,
                              "launch of '%s': sampled block (%u,%u,%u) is outside the grid "
                              "(%u,%u,%u)",
                              kernel, only[i].x, only[i].y, only[i].z, grid.x, grid.y, grid.z);
    ft_emu_launch l;
    memset(&l, 0, sizeof l);
    if (only) {
        _Static_assert(sizeof(ft_dim3) == sizeof(ft_emu_uint3), "ft_dim3 is CUDA's uint3");
        l.only = (const ft_emu_uint3 *)only;
        l.nonly = (unsigned long long)nonly;
    }
    if (d->profile && m->live) {
        if (!d->prof && !(d->prof = ft_emu_prof_new()))
            return ft_err_set(err, FT_ENOMEM, "emulator: out of memory");
        l.prof = d->prof;
        l.live = m->live;
        ft_emu_prof_begin(d->prof, kernel, (ft_emu_uint3){grid.x, grid.y, grid.z},
                          (ft_emu_uint3){block.x, block.y, block.z});
    }
    l.kernel = kernel;
    l.invoke = k->invoke;
    l.args = args;
    l.grid = (ft_emu_uint3){grid.x, grid.y, grid.z};
    l.block = (ft_emu_uint3){block.x, block.y, block.z};
    l.dyn_smem = smem;
    l.tls_modid = m->tls_modid;
    l.tls_size = m->tls_size;
    l.seed = d->seed;
    l.workers = d->workers;
    l.ucontext = d->ucontext;
    l.consts = m->symbols;
    l.nconsts = m->nsymbols;
    ft_emu_guard_running(kernel);
    ft_status s = ft_emu_run(d->pools, &l, err);
    ft_emu_guard_running(NULL);
    if (l.prof) {
        ft_dev_emu_launch_record r;
        memset(&r, 0, sizeof r);
        r.incomplete = ft_emu_prof_end(l.prof, &r.p) != 0;
        for (int w = 0; w < 2; w++)
            if (d->in_ext[w]) sampled_extents(d, l.prof, w);
        if (s == FT_OK && record_add(d, m, &r) != 0) {
            ft_emu_launch_prof_free(&r.p);
            return ft_err_set(err, FT_ENOMEM, "emulator: out of memory for the profile");
        }
        if (s != FT_OK) ft_emu_launch_prof_free(&r.p);
    }
    return s;
}

/* A profiled launch on a sample of its grid: the boundary's and the interior's records merged
 * into one, each scaled by the blocks its stratum stands for (the caller holds the lock). */
static ft_status emu_launch_sampled(ft_dev *dev, ft_dev_module *mod, const char *kernel,
                                    ft_dim3 grid, ft_dim3 block, size_t smem, void **args,
                                    ft_err *err) {
    emu_dev *d = emu_of(dev);
    ft_emu_uint3 g = {grid.x, grid.y, grid.z}, bnd[64], inner[64];
    int nb = 0, ni = 0;
    ft_emu_sample_pick(g, d->sample, 0x9e3779b97f4a7c15ull, bnd, &nb, inner, &ni);
    int before = d->nrecords;
    uint64_t total = (uint64_t)grid.x * grid.y * grid.z;
    uint64_t interior = ni ? ft_emu_grid_interior(g) * grid.z : 0, boundary = total - interior;
    for (int w = 0; w < 2; w++) {
        d->outside[w] = 0;
        d->in_ext[w] = calloc((size_t)d->next + 1, sizeof *d->in_ext[w]);
    }
    d->scale = (double)boundary / nb;
    ft_status s = emu_launch_locked(dev, mod, kernel, grid, block, smem, args, (const ft_dim3 *)bnd,
                                    nb, err);
    d->scale = ni ? (double)interior / ni : 0;
    if (s == FT_OK && ni)
        s = emu_launch_locked(dev, mod, kernel, grid, block, smem, args, (const ft_dim3 *)inner, ni,
                              err);
    /* Distinct bytes: each allocation's scaled figure, but never more than its size (what the
     * sample saw of it; an allocation only unsampled blocks touch is not seen), and what lay
     * outside every allocation scaled. Without the lists (memory ran out): the scaled figure. */
    uint64_t distinct[2] = {UINT64_MAX, UINT64_MAX};
    for (int w = 0; w < 2; w++) {
        if (!d->in_ext[w]) continue;
        double b = d->outside[w];
        for (int i = 0; i < d->next; i++)
            b += fmin(d->in_ext[w][i], (double)((d->ext[i].bytes + 31) / 32 * 32));
        distinct[w] = (uint64_t)llround(b);
        free(d->in_ext[w]);
        d->in_ext[w] = NULL;
    }
    if (s != FT_OK || d->nrecords == before) return s;
    ft_dev_emu_launch_record merged = d->records[before];
    ft_emu_launch_prof *m = &merged.p;
    memset(m->t, 0, sizeof m->t);
    memset(m->coll, 0, sizeof m->coll);
    m->unique_read_bytes = m->unique_write_bytes = m->barriers = m->cp_async = m->warps = 0;
    ft_emu_launch_prof_add_scaled(m, &d->records[before].p, (double)boundary / nb);
    if (d->nrecords > before + 1) {
        ft_dev_emu_launch_record *ri = &d->records[before + 1];
        ft_emu_launch_prof_add_scaled(m, &ri->p, (double)interior / ni);
        merged.incomplete |= ri->incomplete;
        ft_emu_launch_prof_free(&ri->p);
    }
    if (distinct[0] != UINT64_MAX) m->unique_read_bytes = distinct[0];
    if (distinct[1] != UINT64_MAX) m->unique_write_bytes = distinct[1];
    m->blocks = total;
    merged.sampled = nb + ni;
    merged.sampled_edge = nb;
    d->records[before] = merged;
    d->nrecords = before + 1;
    return FT_OK;
}

static ft_status emu_launch(ft_dev *dev, ft_dev_module *mod, const char *kernel, ft_dim3 grid,
                            ft_dim3 block, size_t smem, void **args, ft_err *err) {
    emu_dev *d = emu_of(dev);
    pthread_mutex_lock(&d->lock);
    uint64_t total = (uint64_t)grid.x * grid.y * grid.z;
    emu_module *m = (emu_module *)mod;
    ft_status s = d->profile && m && m->live && d->sample > 0 && total > (uint64_t)d->sample
                      ? emu_launch_sampled(dev, mod, kernel, grid, block, smem, args, err)
                      : emu_launch_locked(dev, mod, kernel, grid, block, smem, args, NULL, 0, err);
    pthread_mutex_unlock(&d->lock);
    return s;
}

ft_status ft_dev_emu_launch_blocks(ft_dev *dev, ft_dev_module *mod, const char *kernel,
                                   ft_dim3 grid, ft_dim3 block, size_t smem, void **args,
                                   const ft_dim3 *blocks, int nblocks, ft_err *err) {
    if (!dev || dev->kind != FT_DEV_EMU)
        return ft_err_set(err, FT_EINVAL, "ft_dev_emu_launch_blocks: not an emulator device");
    if (!mod || !kernel || mod->dev != dev)
        return ft_err_set(err, FT_EINVAL,
                          "ft_dev_emu_launch_blocks: no module or kernel, or a module of another "
                          "device");
    if (nblocks < 0 || (nblocks > 0 && !blocks))
        return ft_err_set(err, FT_EINVAL, "ft_dev_emu_launch_blocks: %d blocks but no array",
                          nblocks);
    emu_dev *d = emu_of(dev);
    ft_dim3 none = {0, 0, 0}; /* no block: the launch is checked, nothing runs */
    pthread_mutex_lock(&d->lock);
    ft_status s = emu_launch_locked(dev, mod, kernel, grid, block, smem, args,
                                    nblocks ? blocks : &none, nblocks, err);
    pthread_mutex_unlock(&d->lock);
    return s;
}

/* ---- the device ------------------------------------------------------------------------------ */

static void emu_close(ft_dev *dev) {
    emu_dev *d = emu_of(dev);
    for (emu_module *m = d->modules, *next; m; m = next) {
        next = m->next;
        if (m->handle) dlclose(m->handle);
        free(m);
    }
    for (int i = 0; i < FT_EMU_MAX_WORKERS; i++)
        ft_emu_pool_free(d->pools[i]);
    ft_dev_emu_records_free(d->records, d->nrecords);
    ft_emu_prof_free(d->prof);
    free(d->ext);
    free(d->cxx_version);
    pthread_mutex_destroy(&d->version_lock);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

static const ft_dev_ops emu_ops = FT_DEV_OPS(emu);

static ft_status env_number(const char *var, unsigned long long lo, unsigned long long hi,
                            unsigned long long *out, ft_err *err) {
    const char *v = getenv(var);
    if (!v || !*v) return FT_OK;
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || x < lo || x > hi || v[0] == '-')
        return ft_err_set(err, FT_EINVAL, "%s=%s: expected a number from %llu to %llu", var, v, lo,
                          hi);
    *out = x;
    return FT_OK;
}

/* The emulator reports the H100 of the spec table (its SMs, limits, L2 and clock), under its own
 * name and architecture; its memory is the host's, at most the H100's. */
static void fill_props(ft_dev_props *p) {
    const ft_gpu_spec *h100 = ft_gpu_spec_find("h100");
    ft_gpu_spec_props(h100, p);
    snprintf(p->name, sizeof p->name, "flaretune SIMT emulator (emulated H100-like, sm_90)");
    snprintf(p->arch, sizeof p->arch, "emu");
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t host = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
    if (host && host < p->mem_bytes) p->mem_bytes = host;
    p->bus_width_bits = 5120;
    p->mem_clock_khz = 2619000;
}

ft_status ft_dev_emu_open(int ordinal, ft_dev **out, ft_err *err) {
    if (ordinal != 0)
        return ft_err_set(err, FT_ENODEV, "the emulator has one device (ordinal 0), not %d",
                          ordinal);
    if (ft_emu_guard_install() != 0)
        return ft_err_set(err, FT_EINVAL, "emulator: cannot install its fault handler: %s",
                          strerror(errno));
    emu_dev *d = calloc(1, sizeof *d);
    if (!d) return ft_err_set(err, FT_ENOMEM, "emulator: out of memory");
    d->base.kind = FT_DEV_EMU;
    d->base.ops = &emu_ops;
    pthread_mutex_init(&d->lock, NULL);
    pthread_mutex_init(&d->version_lock, NULL);
    fill_props(&d->base.props);
    const char *v = getenv("FLARETUNE_EMU_CXX");
    snprintf(d->cxx, sizeof d->cxx, "%s", v && *v ? v : FT_EMU_CXX);
    ft_kernel_dir(d->kernel_dir, sizeof d->kernel_dir);
    int w = ft_kc_cache_dir("emu", d->cache_dir, sizeof d->cache_dir);
    if (w < 0 || (size_t)w >= sizeof d->cache_dir) {
        pthread_mutex_destroy(&d->version_lock);
        pthread_mutex_destroy(&d->lock);
        free(d);
        return ft_err_set(err, FT_EINVAL, "emulator: the cache directory's path is too long");
    }
    unsigned long long seed = 0, workers = 1, debug = 0, profile = 0, sample = 0;
    ft_status s = env_number("FLARETUNE_EMU_SEED", 0, ~0ull, &seed, err);
    if (s == FT_OK) s = env_number("FLARETUNE_EMU_PROFILE", 0, 1, &profile, err);
    if (s == FT_OK) s = env_number("FLARETUNE_EMU_SAMPLE", 0, 64, &sample, err);
    if (s == FT_OK) s = env_number("FLARETUNE_EMU_THREADS", 1, FT_EMU_MAX_WORKERS, &workers, err);
    if (s == FT_OK) s = env_number("FLARETUNE_EMU_DEBUG", 0, 1, &debug, err);
    v = getenv("FLARETUNE_EMU_FIBERS");
    if (s == FT_OK && v && *v && strcmp(v, "ucontext") != 0 && strcmp(v, "fast") != 0)
        s = ft_err_set(err, FT_EINVAL, "FLARETUNE_EMU_FIBERS=%s: expected ucontext or fast", v);
    if (s != FT_OK) {
        pthread_mutex_destroy(&d->version_lock);
        pthread_mutex_destroy(&d->lock);
        free(d);
        return s;
    }
    d->seed = seed;
    d->workers = (int)workers;
    d->debug = (int)debug;
    d->profile = (int)profile;
    d->sample = (int)sample;
    d->ucontext = v && strcmp(v, "ucontext") == 0;
    *out = &d->base;
    return FT_OK;
}

static emu_dev *emu_check(const ft_dev *d, ft_err *err) {
    if (!d || d->kind != FT_DEV_EMU) {
        ft_err_set(err, FT_EINVAL, "not an emulator device");
        return NULL;
    }
    return (emu_dev *)d;
}

ft_status ft_dev_emu_set_seed(ft_dev *dev, unsigned long long seed, ft_err *err) {
    emu_dev *d = emu_check(dev, err);
    if (!d) return FT_EINVAL;
    d->seed = seed;
    return FT_OK;
}

ft_status ft_dev_emu_set_workers(ft_dev *dev, int workers, ft_err *err) {
    emu_dev *d = emu_check(dev, err);
    if (!d) return FT_EINVAL;
    if (workers < 1 || workers > FT_EMU_MAX_WORKERS)
        return ft_err_set(err, FT_EINVAL, "emulator: %d worker threads, expected 1 to %d", workers,
                          FT_EMU_MAX_WORKERS);
    d->workers = workers;
    return FT_OK;
}

ft_status ft_dev_emu_set_ucontext(ft_dev *dev, int on, ft_err *err) {
    emu_dev *d = emu_check(dev, err);
    if (!d) return FT_EINVAL;
    d->ucontext = on != 0;
    return FT_OK;
}

ft_status ft_dev_emu_stats_of(const ft_dev *dev, ft_dev_emu_stats *out, ft_err *err) {
    emu_dev *d = emu_check(dev, err);
    if (!d || !out) return FT_EINVAL;
    out->compiled = atomic_load(&d->compiled);
    out->disk_hits = atomic_load(&d->disk_hits);
    out->memory_hits = atomic_load(&d->memory_hits);
    return FT_OK;
}

void ft_dev_emu_profile_gemm(ft_dev *dev, const char *what, double flops, double bytes, int bf16) {
    if (!dev || dev->kind != FT_DEV_EMU) return;
    emu_dev *d = emu_of(dev);
    pthread_mutex_lock(&d->lock);
    if (d->profile && d->nrecords < INT_MAX / 2) {
        ft_dev_emu_launch_record r;
        memset(&r, 0, sizeof r);
        ft_kc_copy_cut(r.p.kernel, sizeof r.p.kernel, what);
        ft_kc_copy_cut(r.source, sizeof r.source, "cuBLASLt");
        r.gemm_flops = flops, r.gemm_bytes = bytes, r.gemm_bf16 = bf16 != 0;
        if (d->nrecords == d->caprecords) {
            int cap = d->caprecords ? 2 * d->caprecords : 16;
            ft_dev_emu_launch_record *v = realloc(d->records, (size_t)cap * sizeof *v);
            if (v) d->records = v, d->caprecords = cap;
        }
        if (d->nrecords < d->caprecords) d->records[d->nrecords++] = r;
    }
    pthread_mutex_unlock(&d->lock);
}

ft_status ft_dev_emu_set_profile(ft_dev *dev, int on, ft_err *err) {
    emu_dev *d = emu_check(dev, err);
    if (!d) return FT_EINVAL;
    pthread_mutex_lock(&d->lock);
    d->profile = on != 0;
    pthread_mutex_unlock(&d->lock);
    return FT_OK;
}

ft_status ft_dev_emu_set_sample(ft_dev *dev, int blocks, ft_err *err) {
    emu_dev *d = emu_check(dev, err);
    if (!d) return FT_EINVAL;
    if (blocks < 0 || blocks > 64 || blocks == 1)
        return ft_err_set(err, FT_EINVAL, "emulator: a sample of %d blocks (0: all, else 2 to 64)", blocks);
    pthread_mutex_lock(&d->lock);
    d->sample = blocks;
    pthread_mutex_unlock(&d->lock);
    return FT_OK;
}

int ft_dev_emu_sampling(ft_dev *dev) {
    emu_dev *d = emu_check(dev, NULL);
    if (!d) return 0;
    pthread_mutex_lock(&d->lock);
    int blocks = d->profile ? d->sample : 0;
    pthread_mutex_unlock(&d->lock);
    return blocks;
}

void ft_dev_emu_records_free(ft_dev_emu_launch_record *r, int n) {
    for (int i = 0; r && i < n; i++)
        ft_emu_launch_prof_free(&r[i].p);
    free(r);
}

/* "fusion/fusion.cu:123 (dflare_fwd)" from addr2line's two lines (function, file:line). */
static void name_site(const emu_dev *d, ft_emu_site *s, const char *fn, const char *loc) {
    char file[PATH_CAP];
    snprintf(file, sizeof file, "%s", loc);
    char *disc = strstr(file, " (discriminator");
    if (disc) *disc = '\0';
    const char *shown = file;
    size_t kl = strlen(d->kernel_dir);
    if (strncmp(file, d->kernel_dir, kl) == 0 && file[kl] == '/') shown = file + kl + 1;
    char fnc[48];
    snprintf(fnc, sizeof fnc, "%s", fn);
    char *paren = strchr(fnc, '(');
    if (paren) *paren = '\0';
    if (strchr(file, ':') == NULL || strncmp(file, "??", 2) == 0)
        snprintf(s->where, sizeof s->where, "?");
    else {
        char where[PATH_CAP + 64];
        snprintf(where, sizeof where, "%s (%s)", shown, fnc);
        ft_kc_copy_cut(s->where, sizeof s->where, where);
    }
}

/* Is this location in the dialect's or the emulator's headers (a helper inlined into a kernel)? */
static int in_dialect(const char *loc) {
    return strstr(loc, "/cuda/ft_cuda.h:") || strstr(loc, "/cuda/emu/");
}

/* Name the sites of one record with addr2line (binutils): per address (-a) its chain of inlined
 * frames (-i), innermost first; the site is named by the innermost frame outside the dialect's
 * headers (the kernel's line that called ft_ld_float4, not the helper's). Left "" when addr2line
 * cannot run. */
static void symbolize(const emu_dev *d, ft_dev_emu_launch_record *r) {
    int n = r->p.nsites;
    if (n == 0) return;
    char(*store)[32] = malloc((size_t)n * sizeof *store);
    char **argv = malloc((size_t)(n + 8) * sizeof *argv);
    size_t cap = (size_t)n * 8 * (PATH_CAP / 4) + 4096;
    char *out = NULL;
    if (!store || !argv) goto done;
    int a = 0;
    argv[a++] = "addr2line";
    argv[a++] = "-a";
    argv[a++] = "-i";
    argv[a++] = "-f";
    argv[a++] = "-C";
    argv[a++] = "-e";
    argv[a++] = r->module;
    for (int i = 0; i < n; i++) {
        snprintf(store[i], sizeof store[i], "0x%llx", (unsigned long long)r->p.sites[i].pc);
        argv[a++] = store[i];
    }
    argv[a] = NULL;
    if (ft_kc_run(argv, NULL, cap, &out, NULL) != 0) goto done;
    int i = -1;
    const char *fn = NULL, *pick_fn = NULL, *pick_loc = NULL;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "0x", 2) == 0) { /* the next address */
            if (i >= 0 && i < n && pick_loc) name_site(d, &r->p.sites[i], pick_fn, pick_loc);
            i++;
            fn = pick_fn = pick_loc = NULL;
        } else if (!fn) {
            fn = line;
        } else { /* fn's location */
            if (!pick_loc || (in_dialect(pick_loc) && !in_dialect(line)))
                pick_fn = fn, pick_loc = line;
            fn = NULL;
        }
    }
    if (i >= 0 && i < n && pick_loc) name_site(d, &r->p.sites[i], pick_fn, pick_loc);
done:
    free(store);
    free(argv);
    free(out);
}

ft_status ft_dev_emu_profile_take(ft_dev *dev, ft_dev_emu_launch_record **out, int *n,
                                  ft_err *err) {
    emu_dev *d = emu_check(dev, err);
    if (!d || !out || !n) return FT_EINVAL;
    pthread_mutex_lock(&d->lock);
    *out = d->records;
    *n = d->nrecords;
    d->records = NULL;
    d->nrecords = d->caprecords = 0;
    pthread_mutex_unlock(&d->lock);
    for (int i = 0; i < *n; i++)
        if ((*out)[i].module[0]) symbolize(d, &(*out)[i]);
    return FT_OK;
}
