/* emit_package_runtime.c: the generated files of an emitted package (docs/emit.md, "--format
 * package"), written from the templates of profiles/templates/package/ (core/template.h):
 * its runtime (the lookup and the run, the tables they share), header, entries, CMakeLists.txt
 * and README.md.
 *
 * The templates are read from ft_source_root() (the source tree in a build, PREFIX/share/
 * flaretune once installed) before anything is written. package/ holds the files both kinds
 * of package have, package/cpu/ and package/cuda/ those of one kind, and package/parts/ the
 * pieces several of them share, each put in by a variable of its name (pick.c.in is @PICK@).
 * A part, and every value built here, goes in without its last newline: a variable that stands
 * for lines stands on a line of its own. What follows the profile (declarations, tables, lists)
 * comes from emit_package_text.c; the rest is the templates' text, with @P@ the prefix and @U@
 * it in upper case.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/paths.h"
#include "core/template.h"
#include "flaretune/source_hash.h"
#include "flaretune/version.h"
#include "profiles/src/emit_package.h"
#if FT_HAVE_CUDA
#include "cuda/nvrtc.h"
#endif

/* ---- the templates ------------------------------------------------------------------------- */

enum {
    T_INTERNAL,
    T_LOOKUP,
    T_CPU_HEADER,
    T_CPU_RUNTIME,
    T_CPU_ENTRIES,
    T_CPU_ABSENT,
    T_CPU_CMAKE,
    T_CPU_README,
    T_CUDA_HEADER,
    T_CUDA_RUNTIME,
    T_CUDA_RUN,
    T_CUDA_ENTRIES,
    T_CUDA_ABSENT,
    T_CUDA_CMAKE,
    T_CUDA_README,
    T_CUDA_MODULE,
    T_CUDA_VERSION,
    T_CUDA_HASH,
    T_CUDA_EVENTLOG,
    T_PARTS, /* the parts: each the value of the variable named beside it */
    T_HEADER_OPEN = T_PARTS,
    T_HEADER_CLOSE,
    T_FAIL,
    T_PICK,
    T_RUN_CHECKS,
    T_BLAS,
    T_C11,
    T_INCLUDES,
    T_COUNT
};

/* Each template's path under ft_source_root() and, for a part, its variable. */
static const struct {
    const char *path, *part;
} templates[T_COUNT] = {
    [T_INTERNAL] = {"internal.h.in", NULL},
    [T_LOOKUP] = {"lookup.inc.in", NULL},
    [T_CPU_HEADER] = {"cpu/header.h.in", NULL},
    [T_CPU_RUNTIME] = {"cpu/runtime.c.in", NULL},
    [T_CPU_ENTRIES] = {"cpu/entries.c.in", NULL},
    [T_CPU_ABSENT] = {"cpu/absent.c.in", NULL},
    [T_CPU_CMAKE] = {"cpu/CMakeLists.txt.in", NULL},
    [T_CPU_README] = {"cpu/README.md.in", NULL},
    [T_CUDA_HEADER] = {"cuda/header.h.in", NULL},
    [T_CUDA_RUNTIME] = {"cuda/runtime.c.in", NULL},
    [T_CUDA_RUN] = {"cuda/run.c.in", NULL},
    [T_CUDA_ENTRIES] = {"cuda/entries.c.in", NULL},
    [T_CUDA_ABSENT] = {"cuda/absent.c.in", NULL},
    [T_CUDA_CMAKE] = {"cuda/CMakeLists.txt.in", NULL},
    [T_CUDA_README] = {"cuda/README.md.in", NULL},
    [T_CUDA_MODULE] = {"cuda/module.cu.in", NULL},
    [T_CUDA_VERSION] = {"cuda/version.h.in", NULL},
    [T_CUDA_HASH] = {"cuda/source_hash.h.in", NULL},
    [T_CUDA_EVENTLOG] = {"cuda/eventlog.h.in", NULL},
    [T_HEADER_OPEN] = {"parts/header_open.h.in", "HEADER_OPEN"},
    [T_HEADER_CLOSE] = {"parts/header_close.h.in", "HEADER_CLOSE"},
    [T_FAIL] = {"parts/fail.c.in", "FAIL"},
    [T_PICK] = {"parts/pick.c.in", "PICK"},
    [T_RUN_CHECKS] = {"parts/run_checks.c.in", "RUN_CHECKS"},
    [T_BLAS] = {"parts/blas.cmake.in", "BLAS"},
    [T_C11] = {"parts/c11.cmake.in", "C11"},
    [T_INCLUDES] = {"parts/includes.cmake.in", "INCLUDES"},
};
_Static_assert(T_COUNT <= FT_PKG_TEMPLATES, "ft_pkg holds every template");

static void template_path(int t, char *buf, size_t n) {
    snprintf(buf, n, "%s/profiles/templates/package/%s", ft_source_root(), templates[t].path);
}

ft_status ft_pkg_templates_load(ft_pkg *k, ft_err *err) {
    for (int t = 0; t < T_COUNT; t++) {
        char path[4352];
        template_path(t, path, sizeof path);
        ft_status s = ft_template_load(path, &k->tmpl[t], err);
        if (s)
            return ft_err_wrap(err, "a package's files are written from templates (set "
                                    "FLARETUNE_SOURCE_DIR?)");
    }
    return FT_OK;
}

void ft_pkg_templates_free(ft_pkg *k) {
    for (int t = 0; t < T_COUNT; t++) {
        free(k->tmpl[t]);
        k->tmpl[t] = NULL;
    }
}

int ft_pkg_code_templates(const ft_pkg *k, const char **texts, int n) {
    /* The runtime and the headers, then the build: every part after the file it is part of. */
    static const int code[] = {T_CPU_RUNTIME, T_PICK,        T_RUN_CHECKS,   T_CUDA_RUNTIME,
                               T_FAIL,        T_CUDA_RUN,    T_LOOKUP,       T_INTERNAL,
                               T_CPU_HEADER,  T_HEADER_OPEN, T_HEADER_CLOSE, T_BLAS,
                               T_CPU_CMAKE,   T_C11,         T_INCLUDES,     T_CUDA_CMAKE};
    int m = 0;
    for (size_t i = 0; i < sizeof code / sizeof code[0] && m < n; i++)
        texts[m++] = k->tmpl[code[i]];
    return m;
}

/* ---- variables ----------------------------------------------------------------------------- */

#define MAX_VARS 48

/* The variables of one file: names and values, and the values built for it (freed after). */
typedef struct vars {
    ft_tvar v[MAX_VARS];
    char *own[MAX_VARS];
    int n, nown, oom;
} vars;

static void var(vars *vs, const char *name, const char *value) {
    if (vs->n < MAX_VARS) vs->v[vs->n++] = (ft_tvar){name, value ? value : ""};
}

/* A value built for the file (NULL: out of memory, said when the file is written). */
static void var_own(vars *vs, const char *name, char *value) {
    if (!value || vs->nown == MAX_VARS) {
        vs->oom = 1;
        free(value);
        return;
    }
    vs->own[vs->nown++] = value;
    var(vs, name, value);
}

static void vars_free(vars *vs) {
    for (int i = 0; i < vs->nown; i++)
        free(vs->own[i]);
}

/* What put writes (into the memory stream it is given), less its last newline. */
typedef struct mem {
    FILE *f;
    char *buf;
    size_t len;
} mem;

static FILE *mem_open(mem *m) {
    m->buf = NULL;
    m->len = 0;
    m->f = open_memstream(&m->buf, &m->len);
    return m->f;
}

static char *mem_value(mem *m) {
    if (!m->f) return NULL;
    if (fclose(m->f) != 0) {
        free(m->buf);
        return NULL;
    }
    if (m->len && m->buf[m->len - 1] == '\n') m->buf[--m->len] = '\0';
    return m->buf;
}

static char *text_of(void (*put)(FILE *, const ft_pkg *), const ft_pkg *k) {
    mem m;
    if (mem_open(&m)) put(m.f, k);
    return mem_value(&m);
}

static char *plain_of(const char *s) {
    mem m;
    if (mem_open(&m)) ft_pkg_put_plain(m.f, s);
    return mem_value(&m);
}

static char *number(long long x) {
    char *buf = malloc(24);
    if (buf) snprintf(buf, 24, "%lld", x);
    return buf;
}

/* What every template may name: the prefix, the profile, the device, flaretune's version. */
static void base_vars(const ft_pkg *k, vars *vs) {
    var(vs, "P", k->P);
    var(vs, "U", k->U);
    var(vs, "BACKEND", k->backend);
    var_own(vs, "SOURCE", plain_of(k->source ? k->source : "a profile"));
    var_own(vs, "DEVICE", plain_of(k->device));
    var(vs, "ARCH", k->arch);
    var(vs, "ARCHNUM", k->arch[0] ? k->arch + 3 : "");
    var(vs, "VERSION", FT_VERSION);
    var(vs, "DESCRIBE", FT_GIT_DESCRIBE);
    var(vs, "SOURCE_HASH", FT_SOURCE_HASH);
    /* The space a run checks a bucket's configuration in (pick.c.in). */
    var(vs, "SPACE", k->cuda ? "ft_cuda_op_of(c->op)->space" : "c->op->cpu->space");
}

/* ---- writing a file ------------------------------------------------------------------------ */

/* Template t with the variables of vs, those of base_vars and the parts, as the tree's file rel.
 * Frees what vs holds. */
static ft_status render(const ft_pkg *k, int t, const char *rel, vars *vs, ft_err *err) {
    char where[4352];
    ft_status s = FT_OK;
    base_vars(k, vs);
    for (int p = T_PARTS; p < T_COUNT && !s && !vs->oom; p++) {
        char *text = NULL;
        template_path(p, where, sizeof where);
        s = ft_template_subst(where, k->tmpl[p], vs->v, vs->n, &text, err);
        size_t len = text ? strlen(text) : 0;
        if (len && text[len - 1] == '\n') text[len - 1] = '\0';
        if (!s) var_own(vs, templates[p].part, text);
    }
    if (!s && vs->oom) s = ft_err_set(err, FT_ENOMEM, "%s: out of memory", rel);
    char *out = NULL;
    template_path(t, where, sizeof where);
    if (!s) s = ft_template_subst(where, k->tmpl[t], vs->v, vs->n, &out, err);
    if (!s) s = ft_pkg_write(k, rel, out, strlen(out), err);
    free(out);
    vars_free(vs);
    return s;
}

static ft_status render_at(const ft_pkg *k, int t, const char *rel, ft_err *err) {
    vars vs = {0};
    return render(k, t, rel, &vs, err);
}

/* The tree's file src/P_name from template t, with no variables of its own. */
static ft_status render_src(const ft_pkg *k, int t, const char *name, ft_err *err) {
    char rel[256];
    snprintf(rel, sizeof rel, "src/%s%s", k->P, name);
    return render_at(k, t, rel, err);
}

/* ---- the files ----------------------------------------------------------------------------- */

/* The OpenBLAS core a CPU device string names at its end ("cpu: ... x 2 (SkylakeX)"), or "". */
static char *blas_core(const ft_pkg *k) {
    const char *open = strrchr(k->device, '('), *close = strrchr(k->device, ')');
    char core[64] = "";
    if (open && close && close > open + 1 && !close[1] && (size_t)(close - open) < sizeof core)
        snprintf(core, sizeof core, "%.*s", (int)(close - open - 1), open + 1);
    return plain_of(core);
}

static ft_status write_header(const ft_pkg *k, ft_err *err) {
    char rel[256];
    vars vs = {0};
    snprintf(rel, sizeof rel, "include/%s.h", k->P);
    var_own(&vs, "OPS", text_of(ft_pkg_put_op_decls, k));
    var_own(&vs, "COUNT", number(k->n));
    if (!k->cuda) {
        var_own(&vs, "BLAS_CORE", blas_core(k));
        var_own(&vs, "DESCRIBE", plain_of(FT_GIT_DESCRIBE));
    }
    return render(k, k->cuda ? T_CUDA_HEADER : T_CPU_HEADER, rel, &vs, err);
}

/* The runtime: the lookup and the run (a CUDA package's in two files), what they share. */
static ft_status write_runtime(const ft_pkg *k, ft_err *err) {
    ft_status s = render_src(k, k->cuda ? T_CUDA_RUNTIME : T_CPU_RUNTIME, "_runtime.c", err);
    if (!s && k->cuda) s = render_src(k, T_CUDA_RUN, "_run.c", err);
    if (!s) s = render_src(k, T_LOOKUP, "_lookup.inc", err);
    if (!s) s = render_src(k, T_INTERNAL, "_internal.h", err);
    return s;
}

/* What the copied sources name and the package has no use for; in a CUDA package, flaretune's
 * generated headers (its version, the hash of its kernel sources) and the event log's. */
static ft_status write_absent(const ft_pkg *k, ft_err *err) {
    char rel[256];
    vars vs = {0};
    snprintf(rel, sizeof rel, "src/%s_absent.c", k->P);
    var_own(&vs, "ABSENT", text_of(ft_pkg_put_absent, k));
    ft_status s = render(k, k->cuda ? T_CUDA_ABSENT : T_CPU_ABSENT, rel, &vs, err);
    if (!s && k->cuda) s = render_at(k, T_CUDA_VERSION, "src/include/flaretune/version.h", err);
    if (!s && k->cuda) s = render_at(k, T_CUDA_HASH, "src/include/flaretune/source_hash.h", err);
    if (!s && k->cuda) s = render_at(k, T_CUDA_EVENTLOG, "src/traces/eventlog.h", err);
    return s;
}

static ft_status write_entries(const ft_pkg *k, void *const *cubins, const size_t *sizes,
                               ft_err *err) {
    char rel[256];
    vars vs = {0};
    snprintf(rel, sizeof rel, "src/%s_entries.c", k->P);
    var_own(&vs, "INCLUDES", text_of(ft_pkg_put_family_includes, k));
    var_own(&vs, "BUCKETS", text_of(ft_pkg_put_buckets, k));
    var_own(&vs, "OPS", text_of(ft_pkg_put_ops, k));
    if (k->cuda) {
        mem m;
        if (mem_open(&m)) ft_pkg_put_cuda_modules(m.f, k, cubins, sizes);
        var_own(&vs, "MODULES", mem_value(&m));
        var_own(&vs, "ENTRIES", text_of(ft_pkg_put_entry_rows, k));
    }
    return render(k, k->cuda ? T_CUDA_ENTRIES : T_CPU_ENTRIES, rel, &vs, err);
}

static ft_status write_cmake(const ft_pkg *k, ft_err *err) {
    vars vs = {0};
    var_own(&vs, "SOURCES", text_of(ft_pkg_put_cmake_sources, k));
    if (k->cuda) {
        var_own(&vs, "GPU_SOURCES", text_of(ft_pkg_put_cmake_gpu_sources, k));
        var_own(&vs, "MODULES", text_of(ft_pkg_put_module_names, k));
    }
    return render(k, k->cuda ? T_CUDA_CMAKE : T_CPU_CMAKE, "CMakeLists.txt", &vs, err);
}

static ft_status write_readme(const ft_pkg *k, ft_err *err) {
    vars vs = {0};
    var_own(&vs, "ENTRIES", text_of(ft_pkg_put_readme_rows, k));
    if (!k->cuda) var_own(&vs, "SOURCES", text_of(ft_pkg_put_readme_sources, k));
#if FT_HAVE_CUDA
    var(&vs, "NVRTC", ft_nvrtc_version());
#else
    var(&vs, "NVRTC", "");
#endif
    return render(k, k->cuda ? T_CUDA_README : T_CPU_README, "README.md", &vs, err);
}

ft_status ft_pkg_write_cpu_files(const ft_pkg *k, ft_err *err) {
    ft_status s = write_header(k, err);
    if (!s) s = write_runtime(k, err);
    if (!s) s = write_entries(k, NULL, NULL, err);
    if (!s) s = write_absent(k, err);
    if (!s) s = write_cmake(k, err);
    if (!s) s = write_readme(k, err);
    return s;
}

ft_status ft_pkg_write_cuda_files(const ft_pkg *k, void *const *cubins, const size_t *sizes,
                                  ft_err *err) {
    ft_status s = write_header(k, err);
    if (!s) s = write_runtime(k, err);
    if (!s) s = write_absent(k, err);
    if (!s) s = write_entries(k, cubins, sizes, err);
    if (!s) s = write_cmake(k, err);
    if (!s) s = write_readme(k, err);
    return s;
}

ft_status ft_pkg_write_module_source(const ft_pkg *k, int i, int j, ft_err *err) {
    const ft_cuda_module_spec *m = &k->mods[i * FT_PKG_MAX_MODULES + j];
    char rel[128], text[512];
    vars vs = {0};
    snprintf(rel, sizeof rel, "cuda/b%d_m%d.cu", i, j);
    var_own(&vs, "I", number(i));
    var_own(&vs, "J", number(j));
    var(&vs, "OP", k->e[i]->op->name);
    ft_pkg_entry_text(k, i, 0, text, sizeof text);
    var_own(&vs, "SHAPE", plain_of(text));
    ft_pkg_entry_text(k, i, 2, text, sizeof text);
    var_own(&vs, "CONFIG", plain_of(text));
    var(&vs, "KERNEL_SOURCE", m->source);
    mem d;
    if (mem_open(&d))
        for (int q = 0; q < m->ndefines; q++) {
            const char *eq = strchr(m->defines[q], '=');
            if (eq)
                fprintf(d.f, "#define %.*s %s\n", (int)(eq - m->defines[q]), m->defines[q], eq + 1);
            else
                fprintf(d.f, "#define %s 1\n", m->defines[q]);
        }
    var_own(&vs, "DEFINES", mem_value(&d));
    return render(k, T_CUDA_MODULE, rel, &vs, err);
}
