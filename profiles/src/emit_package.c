/* emit_package.c: `flaretune emit --format package`: a profile's tuned kernels as a standalone
 * source package for one backend and device (docs/emit.md, "--format package").
 *
 * A CPU package holds copies of the CPU kernels of the ops' families, of the op descriptions
 * they are checked by, and of the part of core/ and kernels/op/ both need (pkg_common and
 * pkg_families below: the one list of what a package copies), plus generated C: the buckets
 * (one per profile entry, its winning configuration as constants), a dispatch per op over the
 * same call machinery flaretune runs (so the same checks and the same kernels: bit-identical
 * outputs with the same compiler and flags), a header, a CMakeLists.txt and a README.
 *
 * A CUDA package holds copies of the CUDA backend (its host code, device layer, kernel cache,
 * NVRTC, cuBLASLt GEMM and SIMT emulator: pkg_cuda_common, pkg_cuda_gpu), of the ops'
 * descriptions and CUDA host code and kernels (pkg_families' cuda_files), plus generated C:
 * the entries with their modules (the cubins NVRTC compiled for the profile's architecture,
 * with their kernel-cache keys), the buckets, the lookup and a run through the copied backend
 * on "cuda" (the cubins seed the kernel cache) or "cuda-emu" (bit-identical to exec's).
 *
 * The tree is written into a temporary sibling of the target and renamed into place; on any
 * error it is removed, so the target either appears whole or not at all.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cuda/cuda_backend.h"
#include "emit_package.h"
#include "op/backend.h"
#include "core/npy.h"
#include "core/paths.h"
#include "flaretune/source_hash.h"
#include "op/space.h"
#include "flaretune/version.h"
#if FT_HAVE_CUDA
#include "cuda/nvrtc.h"
#endif

/* ---- what a package copies ----------------------------------------------------------------- */

/* Paths under ft_source_root(), copied to the same paths under the package's src/. The CPU
 * kernels call the workspace, the error records and OpenBLAS; the dispatch binds and checks a
 * call with op.c and attrs.c as `flaretune exec` does, which need tensors, the clock (the
 * watchdog's deadline in a call) and (for the random fills the descriptions carry) the
 * generator. Found by the undefined symbols of these objects;
 * a package that misses one does not link, which test_package checks. */
static const char *const pkg_common[] = {
    "kernels/op/backend.h",
    "core/clock.h",
    "kernels/op/op.h",
    "kernels/op/ref.h",
    "core/rng.h",
    "kernels/op/space.h",
    "core/status.h",
    "core/tensor.h",
    "core/workspace.h",
    "kernels/cpu/cpu.h",
    "core/clock.c",
    "core/rng.c",
    "core/status.c",
    "core/tensor.c",
    "core/workspace.c",
    "kernels/op/attrs.c",
    "kernels/op/op.c",
    NULL,
};

/* What a CUDA package copies besides pkg_common: the CUDA platform's host code (the backend,
 * the device layer for the GPU and the emulator, the kernel cache and NVRTC, cuBLASLt's GEMM,
 * the timer, the facts and predictions the backend's table names) with the SIMT emulator and
 * its headers, the dialect header, and the part of core/ and kernels/op/ they need. Found by the
 * undefined symbols of the backend and the ops' *_cuda.c; test_package builds the result. */
static const char *const pkg_cuda_common[] = {
    "kernels/cuda/device.h",
    "core/env.h",
    "core/paths.h",
    "core/stats.h",
    "core/env.c",
    "core/paths.c",
    "kernels/op/backend.c",
    "kernels/op/space.c",
    "kernels/cuda/ft_cuda.h",
    "kernels/cuda/context.h",
    "kernels/cuda/cuda_backend.h",
    "kernels/cuda/device_emu.h",
    "kernels/cuda/device_impl.h",
    "kernels/cuda/kcache.h",
    "kernels/cuda/kfacts.h",
    "kernels/cuda/nvrtc.h",
    "kernels/cuda/predict.h",
    "kernels/cuda/prefetch.h",
    "kernels/cuda/sass.h",
    "kernels/cuda/specs.h",
    "kernels/cuda/timer.h",
    "kernels/cuda/context.c",
    "kernels/cuda/cuda_backend.c",
    "kernels/cuda/device.c",
    "kernels/cuda/device_emu.c",
    "kernels/cuda/gemm.c",
    "kernels/cuda/kcache.c",
    "kernels/cuda/kfacts.c",
    "kernels/cuda/predict.c",
    "kernels/cuda/prefetch.c",
    "kernels/cuda/sass.c",
    "kernels/cuda/specs.c",
    "kernels/cuda/emu/emu.h",
    "kernels/cuda/emu/ft_emu.h",
    "kernels/cuda/emu/ft_emu_abi.h",
    "kernels/cuda/emu/prof.h",
    "kernels/cuda/emu/emu.c",
    "kernels/cuda/emu/prof.c",
    "kernels/cuda/emu/include/cooperative_groups.h",
    "kernels/cuda/emu/include/cuda_awbarrier.h",
    "kernels/cuda/emu/include/cuda_bf16.h",
    "kernels/cuda/emu/include/cuda_fp16.h",
    "kernels/cuda/emu/include/cuda_fp8.h",
    "kernels/cuda/emu/include/cuda_pipeline.h",
    "kernels/cuda/emu/include/mma.h",
    "kernels/cuda/emu/include/cuda/barrier",
    "kernels/cuda/emu/include/cuda/pipeline",
    "kernels/cuda/emu/include/cuda/ptx",
    NULL,
};

/* The files of pkg_cuda_common that call the CUDA toolkit's libraries: the package's CMake
 * compiles them only when it finds the toolkit (as flaretune's does). */
static const char *const pkg_cuda_gpu[] = {
    "kernels/cuda/device_cuda.c",
    "kernels/cuda/nvrtc.c",
    "kernels/cuda/timer.c",
    NULL,
};

/* An op family: the files its ops' CPU kernels and descriptions need (a CUDA package leaves
 * out the *_cpu.c), the CUDA implementations the descriptions name (defined empty in a CPU
 * package: src/P_absent.c), the CUDA host code and kernel sources of its ops (a CUDA package),
 * and the CPU implementations the descriptions name (defined empty in a CUDA package). */
typedef struct pkg_family {
    const char *name; /* the ops' names up to the '.' */
    const char *files[10]; /* NULL-terminated */
    const char *cuda[4];
    const char *cuda_files[8];
    const char *cpu[4];
} pkg_family;

static const pkg_family pkg_families[] = {
    {"fusion",
     {"kernels/fusion/fusion.h", "kernels/fusion/fusion_op.c", "kernels/fusion/fusion_ref.c",
      "kernels/fusion/fusion_cpu.c"},
     {"ft_cuda_fusion_dflare", "ft_cuda_fusion_dflash"},
     {"kernels/fusion/fusion_cuda.c", "kernels/fusion/fusion.cu"},
     {"ft_cpu_fusion_dflare", "ft_cpu_fusion_dflash"}},
    {"attention",
     {"kernels/attention/attention.h", "kernels/attention/attention_op.c",
      "kernels/attention/attention_ref.c", "kernels/attention/rope.c", "kernels/op/preset.c",
      "kernels/attention/kvproj_cpu.c", "kernels/attention/decode_cpu.c",
      "kernels/attention/train_cpu.c"},
     {"ft_cuda_attention_kvproj", "ft_cuda_attention_decode", "ft_cuda_attention_train"},
     {"kernels/attention/attention_cuda.c", "kernels/attention/train_cuda.c",
      "kernels/attention/kvproj.cu", "kernels/attention/attention_decode.cu",
      "kernels/attention/attention_train.cu"},
     {"ft_cpu_attention_kvproj", "ft_cpu_attention_decode", "ft_cpu_attention_train"}},
    {"loss",
     {"kernels/loss/loss.h", "kernels/loss/loss_op.c", "kernels/loss/loss_ref.c",
      "kernels/loss/loss_weights.c", "kernels/loss/loss_cpu.c"},
     {"ft_cuda_loss"},
     {"kernels/loss/loss_cuda.c", "kernels/loss/loss.cu"},
     {"ft_cpu_loss"}},
    {"linear",
     {"kernels/linear/linear.h", "kernels/linear/linear_op.c", "kernels/linear/linear_cpu.c"},
     {"ft_cuda_linear"},
     {"kernels/linear/linear_cuda.c"},
     {"ft_cpu_linear"}},
};
#define PKG_NFAMILIES ((int)(sizeof pkg_families / sizeof pkg_families[0]))

/* ---- the package being written ------------------------------------------------------------- */

#define PKG_MAX_OPS     16
#define PKG_MAX_MODULES 4

typedef struct pkg {
    const char *P; /* the prefix, and U in upper case */
    char U[80];
    const char *backend, *device, *source;
    int n; /* selected entries, their configs in the backend's space, and their op's index */
    const ft_profile_entry **e;
    ft_config *cfg;
    int *opi;
    const ft_op *ops[PKG_MAX_OPS];
    int nops;
    int fam[PKG_NFAMILIES]; /* 1 for a family the package copies */
    char tmp[4096];         /* the tree being written */
    int tmp_fd;             /* open on it, holding its flock while it is written (-1: none) */
    int cuda;               /* backend cuda: the modules of each entry, for arch */
    char arch[32];
    ft_cuda_module_spec *mods; /* [n][PKG_MAX_MODULES] */
    int *nmods;
    char (*keys)[40]; /* [n][PKG_MAX_MODULES]: each module's key in NVRTC's kernel cache */
    char **logs;      /* [n][PKG_MAX_MODULES]: ptxas's report cached with its cubin     */
} pkg;

static int selected(const ft_profile_entry *e, const ft_emit_opts *o) {
    return (!o->backend || strcmp(e->backend, o->backend) == 0) &&
           (!o->device || strstr(e->device, o->device) != NULL);
}

static int is_identifier(const char *s) {
    if (!s[0] || strlen(s) > 64 || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return 0;
    for (const char *c = s; *c; c++)
        if (!isalnum((unsigned char)*c) && *c != '_') return 0;
    return 1;
}

static int family_of(const ft_op *op) {
    size_t len = strcspn(op->name, ".");
    for (int f = 0; f < PKG_NFAMILIES; f++)
        if (strlen(pkg_families[f].name) == len && !strncmp(pkg_families[f].name, op->name, len))
            return f;
    return -1;
}

/* An op's name as a C identifier ("fusion.dflare" -> "fusion_dflare"). */
static void op_ident(const ft_op *op, char *buf, size_t n) {
    snprintf(buf, n, "%s", op->name);
    for (char *c = buf; *c; c++)
        if (!isalnum((unsigned char)*c)) *c = '_';
}

/* ---- field names --------------------------------------------------------------------------- */

/* The keywords of C (C11, C23) and C++ (C++20, the alternative operator tokens among them): the
 * header compiles as either, so no field may be named like one. */
/* clang-format off */
static const char *const c_keywords[] = {
    "_Alignas", "_Alignof", "_Atomic", "_BitInt", "_Bool", "_Complex", "_Decimal128",
    "_Decimal32", "_Decimal64", "_Generic", "_Imaginary", "_Noreturn", "_Static_assert",
    "_Thread_local", "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor",
    "bool", "break", "case", "catch", "char", "char16_t", "char32_t", "char8_t", "class",
    "co_await", "co_return", "co_yield", "compl", "concept", "const", "const_cast", "consteval",
    "constexpr", "constinit", "continue", "decltype", "default", "delete", "do", "double",
    "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for",
    "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept",
    "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private", "protected", "public",
    "register", "reinterpret_cast", "requires", "restrict", "return", "short", "signed",
    "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template", "this",
    "thread_local", "throw", "true", "try", "typedef", "typeid", "typename", "typeof",
    "typeof_unqual", "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t",
    "while", "xor", "xor_eq", NULL};
/* clang-format on */

static int is_keyword(const char *s) {
    for (int i = 0; c_keywords[i]; i++)
        if (!strcmp(c_keywords[i], s)) return 1;
    return 0;
}

/* The fields of an op's args struct: its sizes, then its tensors, in the op's order. */
#define PKG_FIELD_LEN 48
typedef struct op_fields {
    char size[FT_MAX_SYMS][PKG_FIELD_LEN];
    char tensor[FT_MAX_TENSORS][PKG_FIELD_LEN];
} op_fields;

/* The one rule that makes a size's or a tensor's name a field name (docs/emit.md): every
 * character but a letter, digit or '_' becomes '_' (and a name that starts with a digit gets an
 * 'n' before it); then, while the name is a C or C++ keyword or the name of a field before it
 * (or of the fixed fields `attrs` and `device`), a '_' is appended. So the tensor "do" of
 * attention.train is the field do_. */
static void op_fields_of(const ft_op *op, op_fields *f) {
    const char *taken[FT_MAX_SYMS + FT_MAX_TENSORS + 2] = {"attrs", "device"};
    int ntaken = 2;
    int nsyms = 0;
    while (op->syms[nsyms] && nsyms < FT_MAX_SYMS)
        nsyms++;
    for (int k = 0; k < nsyms + op->ntensors && k < FT_MAX_SYMS + FT_MAX_TENSORS; k++) {
        const char *name = k < nsyms ? op->syms[k] : op->tensors[k - nsyms].name;
        char *out = k < nsyms ? f->size[k] : f->tensor[k - nsyms];
        size_t len = 0;
        if (!isalpha((unsigned char)name[0]) && name[0] != '_') out[len++] = 'n';
        for (const char *c = name; *c && len < PKG_FIELD_LEN - 8; c++)
            out[len++] = isalnum((unsigned char)*c) || *c == '_' ? *c : '_';
        out[len] = '\0';
        for (;;) {
            int clash = is_keyword(out);
            for (int t = 0; t < ntaken && !clash; t++)
                clash = !strcmp(taken[t], out);
            if (!clash || len >= PKG_FIELD_LEN - 1) break;
            out[len++] = '_';
            out[len] = '\0';
        }
        taken[ntaken++] = out;
    }
}

/* ---- selection and configurations ---------------------------------------------------------- */

/* The entry's configuration as values of space s (a label's index for a named parameter;
 * parameters it does not name keep the default; a former name is read as the current one). */
static ft_status entry_config(const ft_profile_entry *e, const ft_space *s, ft_config *cfg,
                              ft_err *err) {
    ft_config_default(s, cfg);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)e->config, key, v) {
        int i = ft_space_param(s, key);
        const char *now = i < 0 ? ft_space_renamed(s, key) : NULL;
        if (now) i = ft_space_param(s, now);
        if (i < 0)
            return ft_err_set(err, FT_EINVAL, "%s: parameter '%s' is not in the %s space",
                              e->op->name, key, e->backend);
        const ft_param *pa = &s->params[i];
        int k = -1;
        if (pa->labels && json_is_string(v)) {
            for (int j = 0; j < pa->n && k < 0; j++)
                if (!strcmp(pa->labels[j], json_string_value(v))) k = j;
        } else if (!pa->labels && json_is_integer(v)) {
            long long x = json_integer_value(v);
            for (int j = 0; j < pa->n && k < 0; j++)
                if (pa->values[j] == x) k = (int)x;
            /* A thread count tuned on another machine is a number of threads all the same. */
            if (k < 0 && (pa->flags & FT_PARAM_THREADS) && x >= 1 && x <= 4096) k = (int)x;
        }
        if (k < 0)
            return ft_err_set(err, FT_EINVAL, "%s: parameter '%s' has a value the %s space lacks",
                              e->op->name, key, e->backend);
        cfg->v[i] = k;
    }
    return FT_OK;
}

/* One line naming the distinct values of a field over the selected entries; how many. */
static int distinct(const pkg *k, int device, char *buf, size_t n) {
    size_t len = 0;
    int count = 0;
    buf[0] = '\0';
    for (int i = 0; i < k->n; i++) {
        const char *v = device ? k->e[i]->device : k->e[i]->backend;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = !strcmp(v, device ? k->e[j]->device : k->e[j]->backend);
        if (!seen) count++;
        if (!seen && len < n)
            len += (size_t)snprintf(buf + len, n - len, "%s'%s'", len ? ", " : "", v);
    }
    return count;
}

/* The selected entries: one backend, one device, every op with a CPU implementation. */
static ft_status pkg_select(const ft_profile *p, const ft_emit_opts *o, pkg *k, ft_err *err) {
    int total = ft_profile_count(p);
    k->e = calloc((size_t)total + 1, sizeof *k->e);
    k->cfg = calloc((size_t)total + 1, sizeof *k->cfg);
    k->opi = calloc((size_t)total + 1, sizeof *k->opi);
    if (!k->e || !k->cfg || !k->opi) return ft_err_set(err, FT_ENOMEM, "out of memory");
    for (int i = 0; i < total; i++)
        if (selected(ft_profile_entry_at(p, i), o)) k->e[k->n++] = ft_profile_entry_at(p, i);
    if (!k->n)
        return ft_err_set(err, FT_EINVAL, "no entries%s%s%s%s to package",
                          o->backend ? " of backend " : "", o->backend ? o->backend : "",
                          o->device ? " on a device containing " : "", o->device ? o->device : "");
    char list[1024];
    for (int f = 0; f < 2; f++) {
        if (distinct(k, f, list, sizeof list) > 1)
            return ft_err_set(err, FT_EINVAL,
                              "the entries span several %s (%s): a package is for one; choose "
                              "with %s",
                              f ? "devices" : "backends", list, f ? "--device" : "--backend");
    }
    k->backend = k->e[0]->backend;
    k->device = k->e[0]->device;
    k->cuda = !strcmp(k->backend, "cuda");
    if (!k->cuda && strcmp(k->backend, "cpu") != 0)
        return ft_err_set(err, FT_EUNSUPPORTED,
                          "a package is for backend cpu or cuda, not '%s' (choose with --backend)",
                          k->backend);
    return FT_OK;
}

/* The ops of the entries, in registry order, and each entry's index among them. */
static ft_status pkg_ops(pkg *k, ft_err *err) {
    for (int r = 0; r < ft_op_count(); r++)
        for (int i = 0; i < k->n; i++)
            if (k->e[i]->op == ft_op_at(r)) {
                if (k->nops == PKG_MAX_OPS)
                    return ft_err_set(err, FT_EINTERNAL, "more than %d ops", PKG_MAX_OPS);
                k->ops[k->nops++] = ft_op_at(r);
                break;
            }
    for (int i = 0; i < k->n; i++)
        for (int j = 0; j < k->nops; j++)
            if (k->ops[j] == k->e[i]->op) k->opi[i] = j;
    return FT_OK;
}

#if FT_HAVE_CUDA
/* The GPU architecture a CUDA device string names ("cuda: NVIDIA H200 (sm_90a, ...)"). */
static ft_status pkg_arch(pkg *k, ft_err *err) {
    const char *sm = strstr(k->device, "sm_");
    size_t len = 0;
    while (sm && (isalnum((unsigned char)sm[len]) || sm[len] == '_'))
        len++;
    if (!sm || len < 4 || len >= sizeof k->arch)
        return ft_err_set(err, FT_EINVAL, "the device '%s' names no GPU architecture (sm_XX)",
                          k->device);
    snprintf(k->arch, sizeof k->arch, "%.*s", (int)len, sm);
    return FT_OK;
}

/* The call an entry was tuned at: its sizes and attributes (no tensors). */
static ft_status entry_call(const ft_profile_entry *e, ft_call *c, ft_err *err) {
    ft_call_init(c, e->op);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)e->attrs, key, v) {
        if (ft_attrs_set(&c->attrs, e->op, key, json_string_value(v), err))
            return ft_err_wrap(err, "%s", e->op->name);
    }
    for (int s = 0; e->op->syms[s]; s++)
        c->dim[s] = (int64_t)json_integer_value(json_object_get(e->shape, e->op->syms[s]));
    ft_call_resolve_backward(c);
    return FT_OK;
}
#endif

/* Each CUDA entry's configuration and the kernel modules it compiles (sources, -D macros,
 * kernels with their block size and dynamic shared memory), as the CUDA backend builds them. */
static ft_status pkg_resolve_cuda(pkg *k, ft_err *err) {
#if !FT_HAVE_CUDA
    (void)k;
    return ft_err_set(err, FT_EUNSUPPORTED,
                      "this flaretune is built without the CUDA toolkit: a cuda package needs "
                      "NVRTC to precompile its cubins");
#else
    ft_status s = pkg_arch(k, err);
    if (s) return s;
    if (!ft_nvrtc_arch_supported(k->arch))
        return ft_err_set(err, FT_EUNSUPPORTED, "NVRTC %s cannot compile for %s",
                          ft_nvrtc_version(), k->arch);
    k->mods = calloc((size_t)k->n * PKG_MAX_MODULES, sizeof *k->mods);
    k->nmods = calloc((size_t)k->n, sizeof *k->nmods);
    k->keys = calloc((size_t)k->n * PKG_MAX_MODULES, sizeof *k->keys);
    k->logs = calloc((size_t)k->n * PKG_MAX_MODULES, sizeof *k->logs);
    if (!k->mods || !k->nmods || !k->keys || !k->logs)
        return ft_err_set(err, FT_ENOMEM, "out of memory");
    for (int i = 0; i < k->n && !s; i++) {
        const ft_profile_entry *e = k->e[i];
        const ft_cuda_op *cop = ft_cuda_op_of(e->op);
        ft_call c;
        int f = family_of(e->op);
        if (!cop || f < 0)
            return ft_err_set(err, FT_EUNSUPPORTED, "%s has no CUDA kernels a package can hold",
                              e->op->name);
        k->fam[f] = 1;
        if ((s = entry_config(e, cop->space, &k->cfg[i], err)) || (s = entry_call(e, &c, err)))
            break;
        ft_cuda_module_spec *m = &k->mods[i * PKG_MAX_MODULES];
        int nm = cop->modules(&c, ft_cuda_call_dt(&c), &k->cfg[i], m, PKG_MAX_MODULES);
        if (nm < 1 || nm > PKG_MAX_MODULES)
            return ft_err_set(err, FT_EUNSUPPORTED,
                              "%s: its configuration compiles %d kernel modules (a package holds "
                              "1 to %d; cuBLASLt calls are not packaged)",
                              e->op->name, nm, PKG_MAX_MODULES);
        for (int j = 0; j < nm; j++)
            if (m[j].overflow)
                return ft_err_set(err, FT_EINTERNAL, "%s: a define did not fit the module spec",
                                  e->op->name);
        k->nmods[i] = nm;
    }
    return s;
#endif
}

/* Each entry's configuration in its op's CPU space, the ops (in registry order) and families. */
static ft_status pkg_resolve(pkg *k, ft_err *err) {
    ft_status st = pkg_ops(k, err);
    if (st) return st;
    if (k->cuda) return pkg_resolve_cuda(k, err);
    for (int i = 0; i < k->n; i++) {
        const ft_op *op = k->e[i]->op;
        int f = family_of(op);
        if (f < 0 || !ft_backend_cpu.supports(op))
            return ft_err_set(err, FT_EUNSUPPORTED, "%s: no CPU kernel a package can hold",
                              op->name);
        k->fam[f] = 1;
        ft_status s = entry_config(k->e[i], ft_backend_cpu.space(op), &k->cfg[i], err);
        if (s) return s;
    }
    return FT_OK;
}

/* ---- files --------------------------------------------------------------------------------- */

/* Remove path and everything under it (a tree this process wrote: no links followed). */
static void remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            char sub[4096];
            if (snprintf(sub, sizeof sub, "%s/%s", path, de->d_name) < (int)sizeof sub)
                remove_tree(sub);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* A new file at rel under the tree (its folders made). */
static FILE *pkg_open(const pkg *k, const char *rel, char *path, size_t n, ft_err *err) {
    if (snprintf(path, n, "%s/%s", k->tmp, rel) >= (int)n) {
        ft_err_set(err, FT_EINVAL, "%s: path too long", k->tmp);
        return NULL;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    if (ft_dir_make(dir, err)) return NULL;
    FILE *f = fopen(path, "w");
    if (!f) ft_err_set(err, FT_EIO, "%s: %s", path, strerror(errno));
    return f;
}

/* Close a file of the tree; a write that failed (now or before: a full disk, a file size limit)
 * is an error that says why. */
static ft_status pkg_close(FILE *f, const char *path, ft_err *err) {
    int before = errno, bad = ferror(f), e = 0;
    if (fflush(f) != 0) e = errno; /* the buffered bytes, tried again: the reason, again */
    if (fclose(f) != 0 && !e) e = errno;
    if (!bad && !e) return FT_OK;
    if (!e) e = before ? before : EIO;
    return ft_err_set(err, FT_EIO, "%s: write failed: %s", path, strerror(e));
}

/* Copy root/rel to the tree's src/rel. */
static ft_status pkg_copy(const pkg *k, const char *rel, ft_err *err) {
    char from[4096], to[4096], dst[4200];
    if (snprintf(from, sizeof from, "%s/%s", ft_source_root(), rel) >= (int)sizeof from)
        return ft_err_set(err, FT_EINVAL, "%s: path too long", ft_source_root());
    snprintf(dst, sizeof dst, "src/%s", rel);
    FILE *in = fopen(from, "rb");
    if (!in)
        return ft_err_set(err, FT_EIO, "kernel source %s: %s (set FLARETUNE_SOURCE_DIR?)", from,
                          strerror(errno));
    FILE *out = pkg_open(k, dst, to, sizeof to, err);
    if (!out) {
        fclose(in);
        return err ? err->status : FT_EIO;
    }
    char buf[65536];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, got, out) != got) break;
    int bad = ferror(in);
    fclose(in);
    ft_status s = pkg_close(out, to, err);
    return s ? s : bad ? ft_err_set(err, FT_EIO, "%s: read failed", from) : FT_OK;
}

/* Write text with @P@ and @U@ replaced by the prefix and its upper case. */
/* Finding OpenBLAS (the OpenMP build, where flaretune's CMakeLists finds it) and OpenMP, in
 * both packages' CMakeLists.txt (@BLAS@). */
static const char *const pkg_cmake_blas =
    "find_library(@U@_OPENBLAS_LIB NAMES openblas\n"
    "             PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp NO_DEFAULT_PATH)\n"
    "find_path(@U@_OPENBLAS_INCLUDE NAMES cblas.h\n"
    "          PATHS /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp NO_DEFAULT_PATH)\n"
    "if(NOT @U@_OPENBLAS_LIB OR NOT @U@_OPENBLAS_INCLUDE)\n"
    "  message(FATAL_ERROR \"@P@ needs OpenBLAS built with OpenMP: install it with \"\n"
    "                      \"`apt-get install libopenblas-openmp-dev` (or set @U@_OPENBLAS_LIB and "
    "\"\n"
    "                      \"@U@_OPENBLAS_INCLUDE), then configure again.\")\n"
    "endif()\n"
    "find_package(OpenMP COMPONENTS C)\n"
    "if(NOT OpenMP_C_FOUND)\n"
    "  message(FATAL_ERROR \"@P@ needs OpenMP: a C compiler with OpenMP support (gcc's "
    "libgomp).\")\n"
    "endif()\n";

static void put_subst(FILE *f, const pkg *k, const char *text) {
    for (const char *c = text; *c;) {
        if (!strncmp(c, "@BLAS@", 6)) {
            put_subst(f, k, pkg_cmake_blas);
            c += 6;
        } else if (!strncmp(c, "@P@", 3)) {
            fputs(k->P, f);
            c += 3;
        } else if (!strncmp(c, "@U@", 3)) {
            fputs(k->U, f);
            c += 3;
        } else {
            fputc(*c++, f);
        }
    }
}

/* Text safe inside a C comment, a C string or a Markdown table cell: printable ASCII but for
 * quotes, backslashes, '?' (trigraphs), '|' and a '*' and '/' that would end or open a comment. */
static void put_plain(FILE *f, const char *s) {
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        int ok = isalnum(*c) || strchr(" ._+-:,()@=[]'<>^!#$%&~;{}", *c) ||
                 (*c == '*' && c[1] != '/') || (*c == '/' && c[1] != '*' && c[1] != '/');
        fputc(ok ? *c : '_', f);
    }
}

/* "N=48 T=4 H=64 D=3", "eps=1e-06,backward=0,...", "strategy=k_layers,k=2,..." of an entry. */
static void entry_text(const pkg *k, int i, int what, char *buf, size_t n) {
    const ft_profile_entry *e = k->e[i];
    size_t len = 0;
    buf[0] = '\0';
    if (what == 0) {
        for (int s = 0; e->op->syms[s] && len < n; s++)
            len += (size_t)snprintf(
                buf + len, n - len, "%s%s=%lld", s ? " " : "", e->op->syms[s],
                (long long)json_integer_value(json_object_get(e->shape, e->op->syms[s])));
    } else if (what == 1) {
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)e->attrs, key, v) {
            if (len < n)
                len += (size_t)snprintf(buf + len, n - len, "%s%s=%s", len ? "," : "", key,
                                        json_string_value(v));
        }
    } else {
        const ft_space *s = k->cuda ? ft_cuda_op_of(e->op)->space : ft_backend_cpu.space(e->op);
        ft_config_format(s, &k->cfg[i], buf, n);
    }
}

/* The status codes, the entries and the generic calls: the header's fixed part. */
static const char *const pkg_header_top =
    "#ifndef @U@_H\n"
    "#define @U@_H\n"
    "\n"
    "#include <stddef.h>\n"
    "#include <stdint.h>\n"
    "\n"
    "#ifdef __cplusplus\n"
    "extern \"C\" {\n"
    "#endif\n"
    "\n"
    "/* What the calls return: 0, or flaretune's status codes, among them: */\n"
    "#define @U@_OK 0\n"
    "#define @U@_EINVAL 1       /* a NULL pointer, a bad attribute or value, a bad input value */\n"
    "#define @U@_ESHAPE 2       /* sizes below 1 or that disagree with each other             */\n"
    "#define @U@_ENOMEM 5       /* the kernel's scratch could not be allocated               */\n"
    "#define @U@_EUNSUPPORTED 6 /* an op not in the package, or no entry for the attributes   */\n"
    "\n"
    "/* One entry (bucket) of the package: a tuned shape and its winning configuration. */\n"
    "typedef struct @P@_entry {\n"
    "    const char *op;     /* \"fusion.dflare\"                                  */\n"
    "    const char *shape;  /* \"N=48 T=4 H=64 D=3\": the sizes it was tuned at   */\n"
    "    const char *attrs;  /* every attribute, \"eps=1e-06,backward=0,...\"     */\n"
    "    const char *config; /* \"strategy=k_layers,k=2,...\"                       */\n"
    "    double median_s;    /* its tuned median time per call                   */\n"
    "} @P@_entry;\n"
    "\n"
    "extern const @P@_entry @P@_entries[]; /* @U@_COUNT of them */\n"
    "\n"
    "/* The OpenBLAS kernels (core) the entries were tuned and checked with (\"\" when the\n"
    " * device string does not name one), and those OpenBLAS runs in this process. OpenBLAS picks\n"
    " * its core when it loads; flaretune restarts with OPENBLAS_CORETYPE set when OpenBLAS "
    "picked\n"
    " * an older core than the CPU has. Outputs equal flaretune's bit for bit only on the same\n"
    " * core: run with OPENBLAS_CORETYPE=@U@_BLAS_CORE when @P@_blas_core() differs. */\n"
    "const char *@P@_blas_core(void);\n"
    "\n"
    "/* Which entry a call ran, and whether its sizes were the entry's exactly. */\n"
    "typedef struct @P@_info {\n"
    "    int entry; /* index in @P@_entries, -1 when nothing ran */\n"
    "    int exact;\n"
    "} @P@_info;\n"
    "\n"
    "/* The entry a call of op with these attributes (\"name=value,...\" on top of the defaults;\n"
    " * NULL: the defaults) and sizes (all of the op's, in its order) runs: the one of the same\n"
    " * attributes at exactly these sizes, else the nearest (smallest sum over the sizes of\n"
    " * |log(size / entry size)|; the first of equally near ones). -1 when there is none or the\n"
    " * arguments are bad. A run takes the next nearest when the nearest's configuration cannot\n"
    " * run at the sizes (a tile larger than a dimension). exact may be NULL. */\n"
    "int @P@_lookup(const char *op, const char *attrs, const long long *sizes, int nsizes,\n"
    "               int *exact);\n"
    "\n"
    "/* Run op: sizes as for @P@_lookup, tensors in the op's order (below; NULL for one the call\n"
    " * does not use). Returns @U@_OK, or a status with one line in msg (msg_len bytes; msg may\n"
    " * be NULL). Checks what flaretune checks before anything runs; never exits or aborts.\n"
    " * info may be NULL. Thread-safe; every call allocates its kernel's scratch and frees it. */\n"
    "int @P@_run(const char *op, const char *attrs, const long long *sizes, int nsizes,\n"
    "            void *const *tensors, int ntensors, @P@_info *info, char *msg, size_t msg_len);\n"
    "\n"
    "/* One function per op: its sizes and tensors by name, then as @P@_run. */\n"
    "\n";

/* The OpenBLAS core a CPU device string names at its end ("cpu: ... x 2 (SkylakeX)"), or "". */
static void blas_core(const pkg *k, char *buf, size_t n) {
    const char *open = strrchr(k->device, '('), *close = strrchr(k->device, ')');
    buf[0] = '\0';
    if (open && close && close > open + 1 && !close[1] && (size_t)(close - open) < n)
        snprintf(buf, n, "%.*s", (int)(close - open - 1), open + 1);
}

static const char *dtype_c(ft_dtype dt) {
    return dt == FT_I32 ? "int32_t" : dt == FT_U8 ? "uint8_t" : dt == FT_F64 ? "double" : "float";
}

/* The role of tensor ts in words, for the header's comments. */
static void role_text(const ft_op *op, const ft_tensor_spec *ts, char *buf, size_t n) {
    int in = ts->role == FT_ROLE_IN || ts->role == FT_ROLE_GRAD_IN;
    int grad = ts->role == FT_ROLE_GRAD_IN || ts->role == FT_ROLE_GRAD_OUT;
    snprintf(buf, n, "%s%s%s%s", in ? "in" : "out",
             grad && op->backward == FT_BWD_OPTIONAL ? ", backward=1 only" : "",
             ts->flags & FT_TS_WANT_DW ? ", want_dw=1 only" : "",
             ts->flags & FT_TS_FORWARD ? ", not with grad_only=1" : "");
}

/* The args struct and function of one op. */
static void put_op_decl(FILE *f, const pkg *k, const ft_op *op) {
    char id[64], role[96];
    op_fields fld;
    op_ident(op, id, sizeof id);
    op_fields_of(op, &fld);
    fprintf(f, "/* %s: ", op->name);
    put_plain(f, op->summary);
    fprintf(f, ".\n * Attributes (args.attrs, \"name=value,...\"; NULL: the defaults):");
    for (int a = 0; op->attrs[a]; a++)
        fprintf(f, "%s %s", a ? "," : "", op->attrs[a]);
    fprintf(f, ". Entries:");
    for (int i = 0; i < k->n; i++) {
        if (k->e[i]->op != op) continue;
        char s[256];
        entry_text(k, i, 0, s, sizeof s);
        fprintf(f, "\n *   %d: ", i);
        put_plain(f, s);
    }
    fprintf(f, " */\ntypedef struct %s_%s_args {\n    long long", k->P, id);
    for (int s = 0; op->syms[s]; s++)
        fprintf(f, "%s %s", s ? "," : "", fld.size[s]);
    fprintf(f, "; /* sizes */\n");
    for (int t = 0; t < op->ntensors; t++) {
        const ft_tensor_spec *ts = &op->tensors[t];
        int in = ts->role == FT_ROLE_IN || ts->role == FT_ROLE_GRAD_IN;
        role_text(op, ts, role, sizeof role);
        fprintf(f, "    %s%s *%s; /* [%s] %s: ", in ? "const " : "", dtype_c(ts->dtype),
                fld.tensor[t], ts->dims, role);
        put_plain(f, ts->doc);
        if (strcmp(fld.tensor[t], ts->name) != 0) {
            fprintf(f, " (tensor '");
            put_plain(f, ts->name);
            fprintf(f, "')");
        }
        fprintf(f, " */\n");
    }
    if (k->cuda)
        fprintf(f, "    const char *device; /* \"cuda\" (the GPU; NULL too) or \"cuda-emu\" */\n");
    fprintf(f,
            "    const char *attrs;\n} %1$s_%2$s_args;\n\n"
            "int %1$s_%2$s(const %1$s_%2$s_args *args, %1$s_info *info, char *msg, size_t "
            "msg_len);\n\n",
            k->P, id);
}

static ft_status write_header(const pkg *k, ft_err *err) {
    char rel[256], path[4352];
    snprintf(rel, sizeof rel, "include/%s.h", k->P);
    FILE *f = pkg_open(k, rel, path, sizeof path, err);
    if (!f) return err ? err->status : FT_EIO;
    fprintf(f, "/* %s.h: the tuned kernels of ", k->P);
    put_plain(f, k->source ? k->source : "a profile");
    fprintf(f, " for backend %s on\n * ", k->backend);
    put_plain(f, k->device);
    fprintf(f,
            ", as a standalone library (README.md).\n"
            " * Generated by flaretune %s (",
            FT_VERSION);
    put_plain(f, FT_GIT_DESCRIBE);
    fprintf(f, "); do not edit. */\n");
    put_subst(f, k, pkg_header_top);
    for (int j = 0; j < k->nops; j++)
        put_op_decl(f, k, k->ops[j]);
    char core[64];
    blas_core(k, core, sizeof core);
    fprintf(f, "#define %s_COUNT %d /* entries in %s_entries */\n", k->U, k->n, k->P);
    fprintf(f, "#define %s_BLAS_CORE \"", k->U);
    put_plain(f, core);
    fprintf(f, "\"\n\n");
    fprintf(f, "#ifdef __cplusplus\n}\n#endif\n#endif /* %s_H */\n", k->U);
    return pkg_close(f, path, err);
}

/* ---- the generated C ----------------------------------------------------------------------- */

/* The op table and the per-op functions. */
static void put_ops(FILE *f, const pkg *k) {
    fprintf(f, "const %s_op_ %s_ops_[] = {\n", k->P, k->P);
    for (int j = 0; j < k->nops; j++) {
        const ft_op *op = k->ops[j];
        char id[64];
        op_ident(op, id, sizeof id);
        fprintf(f, "    {&ft_op_%s, \"", id);
        for (int s = 0; op->syms[s]; s++)
            fprintf(f, "%s%s", s ? ", " : "", op->syms[s]);
        fprintf(f, "\", \"");
        for (int t = 0; t < op->ntensors; t++)
            fprintf(f, "%s%s", t ? ", " : "", op->tensors[t].name);
        fprintf(f, "\"},\n");
    }
    fprintf(f, "};\nconst int %s_nops_ = %d;\nconst char %s_op_list_[] = \"ops:", k->P, k->nops,
            k->P);
    for (int j = 0; j < k->nops; j++)
        fprintf(f, "%s %s", j ? "," : "", k->ops[j]->name);
    fprintf(f, "\";\n\n");
    for (int j = 0; j < k->nops; j++) {
        const ft_op *op = k->ops[j];
        char id[64];
        op_fields fld;
        op_ident(op, id, sizeof id);
        op_fields_of(op, &fld);
        int ns = 0;
        while (op->syms[ns])
            ns++;
        fprintf(f,
                "int %1$s_%2$s(const %1$s_%2$s_args *args, %1$s_info *info, char *msg, size_t "
                "msg_len) {\n"
                "    if (!args) {\n"
                "        if (info) info->entry = -1, info->exact = 0;\n"
                "        if (msg && msg_len) snprintf(msg, msg_len, \"%3$s: args is NULL\");\n"
                "        return %4$s_EINVAL;\n"
                "    }\n"
                "    const long long sizes[%5$d] = {",
                k->P, id, op->name, k->U, ns);
        for (int s = 0; s < ns; s++)
            fprintf(f, "%sargs->%s", s ? ", " : "", fld.size[s]);
        fprintf(f, "};\n    void *const tensors[%d] = {", op->ntensors);
        for (int t = 0; t < op->ntensors; t++)
            fprintf(f, "%s(void *)args->%s", t ? ", " : "", fld.tensor[t]);
        fprintf(f,
                "};\n    return %s_run(%s\"%s\", args->attrs, sizes, %d, tensors, %d, info, msg, "
                "msg_len);\n}\n\n",
                k->P, k->cuda ? "args->device, " : "", op->name, ns, op->ntensors);
    }
}

/* One bucket: its attributes, then its row (sizes and configuration as constants). */
static void put_bucket_attrs(FILE *f, const pkg *k, int i) {
    fprintf(f, "static const char *const %s_b%d_attrs_[] = {", k->P, i);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)k->e[i]->attrs, key, v) {
        fprintf(f, "\"");
        put_plain(f, key);
        fprintf(f, "\", \"");
        put_plain(f, json_string_value(v));
        fprintf(f, "\", ");
    }
    fprintf(f, "NULL};\n");
}

static void put_buckets(FILE *f, const pkg *k, int with_entries) {
    for (int i = 0; i < k->n; i++)
        put_bucket_attrs(f, k, i);
    fprintf(f, "\nconst %s_bucket_ %s_buckets_[] = {\n", k->P, k->P);
    for (int i = 0; i < k->n; i++) {
        const ft_profile_entry *e = k->e[i];
        const ft_space *s = k->cuda ? ft_cuda_op_of(e->op)->space : ft_backend_cpu.space(e->op);
        char text[512];
        entry_text(k, i, 0, text, sizeof text);
        fprintf(f, "    /* %d: %s ", i, e->op->name);
        put_plain(f, text);
        fprintf(f, " */\n    {%d, {", k->opi[i]);
        for (int d = 0; e->op->syms[d]; d++)
            fprintf(f, "%s%lldLL", d ? ", " : "",
                    (long long)json_integer_value(json_object_get(e->shape, e->op->syms[d])));
        fprintf(f, "}, %s_b%d_attrs_, {%d, {", k->P, i, s->nparams);
        for (int p = 0; p < s->nparams; p++) {
            char v[64];
            ft_config_value_str(s, p, k->cfg[i].v[p], v, sizeof v);
            fprintf(f, "%s%d /* %s=", p ? ", " : "", k->cfg[i].v[p], s->params[p].name);
            put_plain(f, v);
            fprintf(f, " */");
        }
        fprintf(f, "}}},\n");
    }
    fprintf(f, "};\n");
    if (!with_entries) return;
    fprintf(f, "\nconst %s_entry %s_entries[] = {\n", k->P, k->P);
    for (int i = 0; i < k->n; i++) {
        char sh[512], at[1024], cf[1024];
        entry_text(k, i, 0, sh, sizeof sh);
        entry_text(k, i, 1, at, sizeof at);
        entry_text(k, i, 2, cf, sizeof cf);
        fprintf(f, "    {\"%s\", \"", k->e[i]->op->name);
        put_plain(f, sh);
        fprintf(f, "\", \"");
        put_plain(f, at);
        fprintf(f, "\", \"");
        put_plain(f, cf);
        fprintf(f, "\", %.9g},\n", k->e[i]->median_s);
    }
    fprintf(f, "};\n");
}

static ft_status write_entries(const pkg *k, ft_err *err) {
    char rel[256], path[4352];
    snprintf(rel, sizeof rel, "src/%s_entries.c", k->P);
    FILE *f = pkg_open(k, rel, path, sizeof path, err);
    if (!f) return err ? err->status : FT_EIO;
    fprintf(f,
            "/* %s_entries.c: the package's buckets, one per profile entry, each with its winning\n"
            " * configuration as constants (in the order of the op's CPU space), and one entry\n"
            " * point per op. Generated by `flaretune emit --format package`; do not edit. */\n"
            "#include <stdio.h>\n\n#include \"%s_internal.h\"\n",
            k->P, k->P);
    for (int fam = 0; fam < PKG_NFAMILIES; fam++)
        if (k->fam[fam])
            fprintf(f, "#include \"%s/%s.h\"\n", pkg_families[fam].name, pkg_families[fam].name);
    fprintf(f, "\n");
    put_buckets(f, k, 1);
    fprintf(f, "\n");
    put_ops(f, k);
    return pkg_close(f, path, err);
}

/* What the copied sources name and a CPU package has no use for. */
static ft_status write_absent(const pkg *k, ft_err *err) {
    char rel[256], path[4352];
    snprintf(rel, sizeof rel, "src/%s_absent.c", k->P);
    FILE *f = pkg_open(k, rel, path, sizeof path, err);
    if (!f) return err ? err->status : FT_EIO;
    fprintf(f,
            "/* %s_absent.c: what the copied sources name besides the CPU kernels. The op\n"
            " * descriptions carry a pointer to their CUDA implementation, which a CPU package\n"
            " * does not hold (empty here); ft_cpu_blas_threads is flaretune's CPU backend's.\n"
            " * Generated by `flaretune emit --format package`; do not edit. */\n"
            "#include <cblas.h>\n\n#include \"%s.h\"\n#include \"cpu/cpu.h\"\n\n"
            "struct ft_cuda_op {\n    int absent;\n};\n\n",
            k->P, k->P);
    for (int fam = 0; fam < PKG_NFAMILIES; fam++)
        for (int c = 0; k->fam[fam] && pkg_families[fam].cuda[c]; c++)
            fprintf(f,
                    "extern const struct ft_cuda_op %1$s;\nconst struct ft_cuda_op %1$s = {0};\n",
                    pkg_families[fam].cuda[c]);
    fprintf(f,
            "\nvoid ft_cpu_blas_threads(int n) { openblas_set_num_threads(n); }\n\n"
            "const char *%s_blas_core(void) { return openblas_get_corename(); }\n",
            k->P);
    return pkg_close(f, path, err);
}

static ft_status write_text(const pkg *k, const char *name, const char *text, ft_err *err) {
    char rel[256], path[4352];
    snprintf(rel, sizeof rel, "src/%s_%s", k->P, name);
    FILE *f = pkg_open(k, rel, path, sizeof path, err);
    if (!f) return err ? err->status : FT_EIO;
    put_subst(f, k, text);
    return pkg_close(f, path, err);
}

/* Every source file of the package, relative to its root, one per line after `lead`. */
static void put_sources(FILE *f, const pkg *k, const char *lead, int headers) {
    for (int i = 0; pkg_common[i]; i++)
        if (headers || strstr(pkg_common[i], ".c")) fprintf(f, "%ssrc/%s\n", lead, pkg_common[i]);
    for (int fam = 0; fam < PKG_NFAMILIES; fam++)
        for (int i = 0; k->fam[fam] && pkg_families[fam].files[i]; i++)
            if (headers || strstr(pkg_families[fam].files[i], ".c"))
                fprintf(f, "%ssrc/%s\n", lead, pkg_families[fam].files[i]);
    fprintf(f, "%ssrc/%s_entries.c\n%ssrc/%s_runtime.c\n%ssrc/%s_absent.c\n", lead, k->P, lead,
            k->P, lead, k->P);
}

/* ---- CMakeLists.txt and README.md --------------------------------------------------------- */

/* The build: the flags flaretune compiles its CPU kernels with (C11 without extensions,
 * Release -O3, -march=native, -ffp-contract=fast on the kernels, OpenMP), OpenBLAS built with
 * OpenMP found where flaretune finds it. */
static const char *const pkg_cmake_top =
    "# CMakeLists.txt of @P@: tuned CPU kernels as a static library (README.md). Generated by\n"
    "# `flaretune emit --format package`; do not edit.\n"
    "cmake_minimum_required(VERSION 3.16)\n"
    "project(@P@ LANGUAGES C)\n"
    "\n"
    "option(@U@_NATIVE \"Compile for this machine's instruction set (-march=native), as flaretune "
    "compiles its CPU kernels\" ON)\n"
    "set(CMAKE_C_STANDARD 11)\n"
    "set(CMAKE_C_STANDARD_REQUIRED ON)\n"
    "set(CMAKE_C_EXTENSIONS OFF)\n"
    "if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)\n"
    "  set(CMAKE_BUILD_TYPE Release CACHE STRING \"Build type\" FORCE)\n"
    "endif()\n"
    "\n"
    "# OpenBLAS built with OpenMP (Debian: libopenblas-openmp-dev), so a GEMM inside a kernel's\n"
    "# parallel region runs on its calling thread, as in flaretune.\n"
    "@BLAS@"
    "\n"
    "add_library(@P@ STATIC\n";

static const char *const pkg_cmake_end =
    "# The kernels may fuse multiply-adds, as flaretune's (C11 mode turns contraction off).\n"
    "file(GLOB @U@_KERNELS ${CMAKE_CURRENT_SOURCE_DIR}/src/kernels/*/*_cpu.c)\n"
    "set_source_files_properties(${@U@_KERNELS} PROPERTIES COMPILE_OPTIONS "
    "\"-ffp-contract=fast\")\n"
    "if(@U@_NATIVE)\n"
    "  target_compile_options(@P@ PRIVATE -march=native)\n"
    "endif()\n"
    "target_compile_definitions(@P@ PRIVATE _POSIX_C_SOURCE=200809L _DEFAULT_SOURCE)\n"
    "target_include_directories(@P@ PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include\n"
    "                           PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src\n"
    "                                   ${CMAKE_CURRENT_SOURCE_DIR}/src/include\n"
    "                                   ${CMAKE_CURRENT_SOURCE_DIR}/src/kernels\n"
    "                                   ${@U@_OPENBLAS_INCLUDE})\n"
    "target_link_libraries(@P@ PUBLIC ${@U@_OPENBLAS_LIB} OpenMP::OpenMP_C m)\n";

static ft_status write_cmake(const pkg *k, ft_err *err) {
    char path[4352];
    FILE *f = pkg_open(k, "CMakeLists.txt", path, sizeof path, err);
    if (!f) return err ? err->status : FT_EIO;
    put_subst(f, k, pkg_cmake_top);
    put_sources(f, k, "  ", 0);
    fprintf(f, ")\n");
    put_subst(f, k, pkg_cmake_end);
    return pkg_close(f, path, err);
}

static const char *const pkg_readme_use =
    "## Build\n"
    "\n"
    "Needs CMake (3.16 or newer), a C11 compiler with OpenMP and OpenBLAS built with OpenMP\n"
    "(Debian: `apt-get install cmake gcc libopenblas-openmp-dev`); not flaretune.\n"
    "\n"
    "```sh\n"
    "cmake -S . -B build && cmake --build build   # build/lib@P@.a\n"
    "```\n"
    "\n"
    "Flags: `-D@U@_NATIVE=OFF` leaves out `-march=native` (for another machine; the kernels then\n"
    "use the instruction set the compiler targets by default); `-D@U@_OPENBLAS_LIB=...` and\n"
    "`-D@U@_OPENBLAS_INCLUDE=...` name another OpenBLAS (OpenMP build). Outputs are bit for bit\n"
    "those of `flaretune exec OP --backend cpu --config CONFIG` on the same machine when built\n"
    "with the same compiler and flags as that flaretune (Release: `-O3`, `-march=native`, C11,\n"
    "`-ffp-contract=fast` on the kernels, the same OpenBLAS).\n"
    "\n"
    "OpenBLAS picks its kernels (its core) when it loads, and may pick older ones than the CPU\n"
    "has; flaretune then restarts with `OPENBLAS_CORETYPE` set. The entries were tuned with the\n"
    "core `@U@_BLAS_CORE` names (the one in the device string below); `@P@_blas_core()` says\n"
    "which one runs. Run with `OPENBLAS_CORETYPE=<that core>` when they differ: the GEMMs of\n"
    "other cores round differently (and run slower).\n"
    "\n"
    "Use it from another CMake project with `add_subdirectory(path/to/this @P@)` and\n"
    "`target_link_libraries(app PRIVATE @P@)`, or link `build/lib@P@.a` with `-fopenmp`, the\n"
    "OpenBLAS library and `-lm`.\n"
    "\n"
    "## Call\n"
    "\n"
    "`include/@P@.h` declares one function per op, taking the op's sizes and tensors by name\n"
    "(row-major, the shapes and types its comments give), its attributes as text and an optional\n"
    "message buffer, and the generic `@P@_run` and `@P@_lookup`:\n"
    "\n"
    "```c\n"
    "char msg[256];\n"
    "@P@_info info;\n"
    "@P@_fusion_dflare_args a = {.N = 48, .T = 4, .H = 64, .D = 3, .x = x, .w = w, .g = g,\n"
    "                            .f = f, .attrs = \"backward=0\"};\n"
    "if (@P@_fusion_dflare(&a, &info, msg, sizeof msg) != @U@_OK)\n"
    "    fprintf(stderr, \"%s\\n\", msg);\n"
    "else if (!info.exact)\n"
    "    fprintf(stderr, \"ran entry %d (%s), the nearest\\n\", info.entry,\n"
    "            @P@_entries[info.entry].shape);\n"
    "```\n"
    "\n"
    "(The example's op and sizes are illustrative: see the header for the ops this package\n"
    "holds.) A call takes the entry of the same attributes (every attribute, the given ones on\n"
    "top of the defaults) at exactly its sizes, else the nearest: the smallest sum over the sizes\n"
    "of |log(size / entry size)|, the first of equally near ones (the rule of\n"
    "`flaretune emit --format c-header`). When that entry's configuration cannot run at the\n"
    "sizes (a layer count or tile the call is too small for) the next nearest is taken. A call\n"
    "with sizes below 1, sizes that disagree (as the op's own checks say), a NULL tensor the call\n"
    "uses, an unknown attribute or an op not in the package returns a status and one line in\n"
    "`msg`; nothing exits or aborts. Each call allocates its scratch and frees it before it\n"
    "returns; calls are thread-safe. The thread count is the tuned configuration's.\n"
    "\n"
    "## Limits\n"
    "\n"
    "- Only the entries' attribute sets run; another attribute set returns @U@_EUNSUPPORTED.\n"
    "- The library holds copies of flaretune's internal `ft_*` functions (status, tensors, calls,\n"
    "  attributes): link one package per program, and not together with flaretune itself.\n"
    "- The configurations were tuned on the device below; they run anywhere, but are the\n"
    "  fastest only there.\n";

static void put_readme_entries(FILE *f, const pkg *k) {
    fprintf(f, "| # | op | shape | attributes | configuration | median |\n"
               "|---|---|---|---|---|---|\n");
    for (int i = 0; i < k->n; i++) {
        char sh[512], at[1024], cf[1024];
        entry_text(k, i, 0, sh, sizeof sh);
        entry_text(k, i, 1, at, sizeof at);
        entry_text(k, i, 2, cf, sizeof cf);
        fprintf(f, "| %d | %s | ", i, k->e[i]->op->name);
        put_plain(f, sh);
        fprintf(f, " | ");
        put_plain(f, at);
        fprintf(f, " | ");
        put_plain(f, cf);
        fprintf(f, " | %.4g us |\n", k->e[i]->median_s * 1e6);
    }
}

static ft_status write_readme(const pkg *k, ft_err *err) {
    char path[4352];
    FILE *f = pkg_open(k, "README.md", path, sizeof path, err);
    if (!f) return err ? err->status : FT_EIO;
    fprintf(f, "# %s: tuned CPU kernels\n\nThe tuned kernels of `", k->P);
    put_plain(f, k->source ? k->source : "a profile");
    fprintf(f, "` for backend `%s` on `", k->backend);
    put_plain(f, k->device);
    fprintf(
        f,
        "`, as a standalone C library: written by `flaretune emit --format package` "
        "(flaretune %s). It does not link flaretune.\n\n"
        "## What is in it\n\n"
        "- `include/%s.h`: the API (below);\n"
        "- `src/%s_entries.c`: the buckets, one per entry, each with its winning\n"
        "  configuration as constants, and one function per op;\n"
        "- `src/%s_runtime.c`: the lookup and the run;\n"
        "- `src/%s_absent.c`: what the copied sources name that a CPU package has no use for;\n"
        "- copies of flaretune's sources, unchanged, at their paths in its tree: the CPU kernels\n"
        "  of the ops' families (`*_cpu.c`), the op descriptions and their checks (`*_op.c`,\n"
        "  with the float64 references they point at), and the part of `core/` and\n"
        "  `kernels/op/` they need:\n\n",
        FT_VERSION, k->P, k->P, k->P, k->P);
    put_sources(f, k, "  - ", 1);
    fprintf(f, "\n## Entries\n\n");
    put_readme_entries(f, k);
    fprintf(f, "\n");
    put_subst(f, k, pkg_readme_use);
    return pkg_close(f, path, err);
}

/* ---- the whole package --------------------------------------------------------------------- */

/* ---- a CUDA package ------------------------------------------------------------------------ */

static int op_nsyms(const ft_op *op) {
    int n = 0;
    while (op->syms[n])
        n++;
    return n;
}

/* The specialised source of module j of entry i: its -D macros, then the kernel source. */
static ft_status write_cuda_source(const pkg *k, int i, int j, ft_err *err) {
    const ft_cuda_module_spec *m = &k->mods[i * PKG_MAX_MODULES + j];
    char rel[128], path[4352], text[512];
    snprintf(rel, sizeof rel, "cuda/b%d_m%d.cu", i, j);
    FILE *f = pkg_open(k, rel, path, sizeof path, err);
    if (!f) return err ? err->status : FT_EIO;
    entry_text(k, i, 0, text, sizeof text);
    fprintf(f, "/* b%d_m%d.cu: entry %d of %s, %s ", i, j, i, k->P, k->e[i]->op->name);
    put_plain(f, text);
    entry_text(k, i, 2, text, sizeof text);
    fprintf(f, "\n * config ");
    put_plain(f, text);
    fprintf(f,
            "\n * %s with the -D macros that configuration compiles with (what flaretune's NVRTC\n"
            " * compile passes). Generated by `flaretune emit --format package`; do not edit. */\n",
            m->source);
    for (int d = 0; d < m->ndefines; d++) {
        const char *eq = strchr(m->defines[d], '=');
        if (eq)
            fprintf(f, "#define %.*s %s\n", (int)(eq - m->defines[d]), m->defines[d], eq + 1);
        else
            fprintf(f, "#define %s 1\n", m->defines[d]);
    }
    fprintf(f, "#include \"%s\"\n", m->source);
    return pkg_close(f, path, err);
}

/* Module j of entry i compiled by NVRTC for the package's architecture: cubin/ and *out. */
static ft_status compile_cubin(pkg *k, int i, int j, void **out, size_t *size, ft_err *err) {
#if FT_HAVE_CUDA
    const ft_cuda_module_spec *m = &k->mods[i * PKG_MAX_MODULES + j];
    const char *defs[FT_CUDA_MAX_DEFINES];
    for (int d = 0; d < m->ndefines; d++)
        defs[d] = m->defines[d];
    ft_nvrtc_result r;
    ft_status s = ft_nvrtc_compile(m->source, defs, m->ndefines, k->arch, &r, err);
    if (s) return s;
    char rel[128], path[4352];
    snprintf(rel, sizeof rel, "cubin/b%d_m%d.%s.cubin", i, j, k->arch);
    FILE *f = pkg_open(k, rel, path, sizeof path, err);
    int short_write = f && fwrite(r.cubin, 1, r.cubin_size, f) != r.cubin_size;
    int why = errno;
    s = f ? pkg_close(f, path, err) : (err ? err->status : FT_EIO);
    if (!s && short_write)
        s = ft_err_set(err, FT_EIO, "%s: write failed: %s", path, strerror(why ? why : EIO));
    if (!s) {
        *out = r.cubin;
        *size = r.cubin_size;
        r.cubin = NULL;
        snprintf(k->keys[i * PKG_MAX_MODULES + j], sizeof k->keys[0], "%s", r.key);
        k->logs[i * PKG_MAX_MODULES + j] = r.log;
        r.log = NULL;
    }
    ft_nvrtc_result_free(&r);
    return s;
#else
    (void)k, (void)i, (void)j, (void)out, (void)size;
    return ft_err_set(err, FT_EUNSUPPORTED, "built without the CUDA toolkit");
#endif
}

static const char *const pkg_cuda_header_top =
    "#ifndef @U@_H\n"
    "#define @U@_H\n"
    "\n"
    "#include <stddef.h>\n"
    "#include <stdint.h>\n"
    "\n"
    "#ifdef __cplusplus\n"
    "extern \"C\" {\n"
    "#endif\n"
    "\n"
    "#define @U@_OK 0\n"
    "#define @U@_EINVAL 1       /* a NULL pointer or a wrong number of sizes          */\n"
    "#define @U@_ESHAPE 2       /* a size below 1                                     */\n"
    "#define @U@_ENOMEM 5       /* device or host memory could not be allocated       */\n"
    "#define @U@_EUNSUPPORTED 6 /* an op not in the package, or no entry for the attributes */\n"
    "#define @U@_ENODEV 7       /* device \"cuda\": no GPU (or no driver) here          */\n"
    "\n"
    "/* A kernel of a module: its name in the cubin (extern \"C\") and how the configuration\n"
    " * launches it. */\n"
    "typedef struct @P@_kernel {\n"
    "    const char *name;\n"
    "    int block_threads;\n"
    "    size_t dyn_smem_bytes;\n"
    "} @P@_kernel;\n"
    "\n"
    "/* A kernel module: the specialised source (relative to the package), its cubin for\n"
    " * @U@_ARCH (the file, and its bytes for cuModuleLoadData), the -D macros and kernels. */\n"
    "typedef struct @P@_module {\n"
    "    const char *source;\n"
    "    const char *cubin_file;\n"
    "    const unsigned char *cubin;\n"
    "    size_t cubin_size;\n"
    "    const char *const *defines;\n"
    "    int ndefines;\n"
    "    const @P@_kernel *kernels;\n"
    "    int nkernels;\n"
    "    const char *cache_key; /* its key in the kernel cache (NVRTC's compile of it) */\n"
    "    const char *ptxas_log; /* ptxas's report, cached with the cubin               */\n"
    "} @P@_module;\n"
    "\n"
    "/* One entry (bucket): a tuned shape, its winning configuration and its modules. */\n"
    "typedef struct @P@_entry {\n"
    "    const char *op, *shape, *attrs, *config;\n"
    "    double median_s;\n"
    "    const long long *sizes; /* in the op's size order */\n"
    "    int nsizes;\n"
    "    const @P@_module *modules;\n"
    "    int nmodules;\n"
    "} @P@_entry;\n"
    "\n"
    "extern const @P@_entry @P@_entries[]; /* @U@_COUNT of them */\n"
    "\n"
    "typedef struct @P@_info {\n"
    "    int entry; /* index in @P@_entries, -1 when none */\n"
    "    int exact;\n"
    "} @P@_info;\n"
    "\n"
    "/* The entry of op whose attributes include every \"name=value\" of attrs (as the entries\n"
    " * write them; NULL: any) at exactly these sizes, else the nearest (smallest sum over the\n"
    " * sizes of |log(size / entry size)|, the first of equally near ones); -1 when none. */\n"
    "int @P@_lookup(const char *op, const char *attrs, const long long *sizes, int nsizes,\n"
    "               int *exact);\n"
    "/* The same with a status and one line in msg for bad input; info->entry is the entry. */\n"
    "int @P@_select(const char *op, const char *attrs, const long long *sizes, int nsizes,\n"
    "               @P@_info *info, char *msg, size_t msg_len);\n"
    "\n"
    "/* Run op on device \"cuda\" (the GPU; NULL says the same) or \"cuda-emu\" (the SIMT\n"
    " * emulator on the CPU): the entry of the same attributes (every attribute, the given ones\n"
    " * on top of the defaults) at exactly these sizes, else the nearest whose configuration runs\n"
    " * at them, through the package's copy of flaretune's CUDA backend. tensors: host memory,\n"
    " * row-major, in the op's order (below; NULL for one the call does not use); the inputs are\n"
    " * copied to the device, the kernels run, the outputs come back. Returns @U@_OK, or a\n"
    " * status with one line in msg (msg may be NULL); never exits or aborts. info may be NULL.\n"
    " * One device context per process and device: calls take turns. */\n"
    "int @P@_run(const char *device, const char *op, const char *attrs, const long long *sizes,\n"
    "            int nsizes, void *const *tensors, int ntensors, @P@_info *info, char *msg,\n"
    "            size_t msg_len);\n"
    "\n"
    "/* One function per op: its sizes and tensors by name, the device, then as @P@_run. */\n"
    "\n";

static ft_status write_cuda_header(const pkg *k, ft_err *err) {
    char rel[256], path[4352];
    snprintf(rel, sizeof rel, "include/%s.h", k->P);
    FILE *f = pkg_open(k, rel, path, sizeof path, err);
    if (!f) return err ? err->status : FT_EIO;
    fprintf(f, "/* %s.h: the tuned CUDA kernels of ", k->P);
    put_plain(f, k->source ? k->source : "a profile");
    fprintf(f, " for ");
    put_plain(f, k->device);
    fprintf(f, " (README.md).\n * Generated by flaretune %s; do not edit. */\n", FT_VERSION);
    put_subst(f, k, pkg_cuda_header_top);
    for (int j = 0; j < k->nops; j++)
        put_op_decl(f, k, k->ops[j]);
    fprintf(f, "#define %s_COUNT %d\n#define %s_ARCH \"%s\" /* of the cubins */\n\n", k->U, k->n,
            k->U, k->arch);
    fprintf(f, "#ifdef __cplusplus\n}\n#endif\n#endif /* %s_H */\n", k->U);
    return pkg_close(f, path, err);
}

/* Module j of entry i's row: the cubin's bytes, the defines, the kernels. */
static void put_cuda_module_data(FILE *f, const pkg *k, int i, int j, const unsigned char *cubin,
                                 size_t size) {
    const ft_cuda_module_spec *m = &k->mods[i * PKG_MAX_MODULES + j];
    fprintf(f, "static const unsigned char %s_b%d_m%d_cubin_[%zu] = {", k->P, i, j, size);
    for (size_t b = 0; b < size; b++)
        fprintf(f, "%s%u,", b % 24 ? "" : "\n   ", cubin[b]);
    fprintf(f, "\n};\nstatic const char *const %s_b%d_m%d_defines_[] = {", k->P, i, j);
    for (int d = 0; d < m->ndefines; d++)
        fprintf(f, "\"%s\", ", m->defines[d]);
    fprintf(f, "NULL};\nstatic const %s_kernel %s_b%d_m%d_kernels_[] = {", k->P, k->P, i, j);
    for (int q = 0; q < m->nkernels; q++)
        fprintf(f, "{\"%s\", %d, %zu}, ", m->kernels[q].name, m->kernels[q].block_threads,
                m->kernels[q].dyn_smem);
    /* ptxas's report as a string (NUL-terminated bytes: any text). */
    const char *log = k->logs[i * PKG_MAX_MODULES + j] ? k->logs[i * PKG_MAX_MODULES + j] : "";
    fprintf(f, "};\nstatic const char %s_b%d_m%d_log_[] = {", k->P, i, j);
    for (size_t b = 0; log[b]; b++)
        fprintf(f, "%s%d,", b % 24 ? "" : "\n   ", (int)(unsigned char)log[b]);
    fprintf(f, "0};\n");
}

static void put_cuda_entry(FILE *f, const pkg *k, int i) {
    const ft_profile_entry *e = k->e[i];
    int ns = 0;
    while (e->op->syms[ns])
        ns++;
    fprintf(f, "static const long long %s_b%d_sizes_[] = {", k->P, i);
    for (int d = 0; d < ns; d++)
        fprintf(f, "%s%lldLL", d ? ", " : "",
                (long long)json_integer_value(json_object_get(e->shape, e->op->syms[d])));
    fprintf(f, "};\nstatic const %s_module %s_b%d_modules_[] = {\n", k->P, k->P, i);
    for (int j = 0; j < k->nmods[i]; j++) {
        const ft_cuda_module_spec *m = &k->mods[i * PKG_MAX_MODULES + j];
        fprintf(f,
                "    {\"cuda/b%2$d_m%3$d.cu\", \"cubin/b%2$d_m%3$d.%4$s.cubin\", "
                "%1$s_b%2$d_m%3$d_cubin_,\n"
                "     sizeof %1$s_b%2$d_m%3$d_cubin_, %1$s_b%2$d_m%3$d_defines_, %5$d,\n"
                "     %1$s_b%2$d_m%3$d_kernels_, %6$d, \"%7$s\", %1$s_b%2$d_m%3$d_log_},\n",
                k->P, i, j, k->arch, m->ndefines, m->nkernels, k->keys[i * PKG_MAX_MODULES + j]);
    }
    fprintf(f, "};\n");
}

static ft_status write_cuda_entries(const pkg *k, void **cubins, const size_t *sizes, ft_err *err) {
    char rel[256], path[4352];
    snprintf(rel, sizeof rel, "src/%s_entries.c", k->P);
    FILE *f = pkg_open(k, rel, path, sizeof path, err);
    if (!f) return err ? err->status : FT_EIO;
    fprintf(f,
            "/* %s_entries.c: the package's entries, each with its kernel modules: the cubins\n"
            " * NVRTC compiled for %s (with their keys in the kernel cache), the -D macros, the\n"
            " * kernels and their launch sizes; the buckets (each entry's configuration as\n"
            " * constants, in the order of the op's CUDA space) and one function per op.\n"
            " * Generated by `flaretune emit --format package`; do not edit. */\n"
            "#include <stdio.h>\n\n#include \"%s_internal.h\"\n",
            k->P, k->arch, k->P);
    for (int fam = 0; fam < PKG_NFAMILIES; fam++)
        if (k->fam[fam])
            fprintf(f, "#include \"%s/%s.h\"\n", pkg_families[fam].name, pkg_families[fam].name);
    fprintf(f, "\n");
    for (int i = 0; i < k->n; i++) {
        for (int j = 0; j < k->nmods[i]; j++)
            put_cuda_module_data(f, k, i, j, cubins[i * PKG_MAX_MODULES + j],
                                 sizes[i * PKG_MAX_MODULES + j]);
        put_cuda_entry(f, k, i);
    }
    fprintf(f, "\nconst %s_entry %s_entries[] = {\n", k->P, k->P);
    for (int i = 0; i < k->n; i++) {
        char sh[512], at[1024], cf[1024];
        entry_text(k, i, 0, sh, sizeof sh);
        entry_text(k, i, 1, at, sizeof at);
        entry_text(k, i, 2, cf, sizeof cf);
        fprintf(f, "    {\"%s\", \"", k->e[i]->op->name);
        put_plain(f, sh);
        fprintf(f, "\", \"");
        put_plain(f, at);
        fprintf(f, "\", \"");
        put_plain(f, cf);
        fprintf(f, "\", %.9g, %s_b%d_sizes_, %d, %s_b%d_modules_, %d},\n", k->e[i]->median_s, k->P,
                i, op_nsyms(k->e[i]->op), k->P, i, k->nmods[i]);
    }
    fprintf(f, "};\n\n");
    put_buckets(f, k, 0);
    fprintf(f, "\n");
    put_ops(f, k);
    return pkg_close(f, path, err);
}

/* The build: the library (the lookup, the embedded cubins, the run through the copied CUDA
 * backend) with flaretune's flags (C11, Release -O3, -march=native unless @U@_NATIVE is OFF),
 * OpenBLAS built with OpenMP (the emulator's GEMMs), and, when CMake finds the CUDA toolkit,
 * the GPU: cudart, NVRTC (by its file), cuBLASLt and CUPTI linked, libcuda loaded at run time,
 * as flaretune links them. The emulator's C++ compiler is recorded as flaretune records it.
 * With nvcc, the specialised sources compiled again for @U@_CUDA_ARCHS (a check). */
static const char *const pkg_cuda_cmake_top =
    "# CMakeLists.txt of @P@: tuned CUDA kernels (README.md). Generated by\n"
    "# `flaretune emit --format package`; do not edit.\n"
    "cmake_minimum_required(VERSION 3.18)\n"
    "project(@P@ LANGUAGES C)\n"
    "\n"
    "option(@U@_NATIVE \"Compile for this machine's instruction set (-march=native), as flaretune "
    "does\" ON)\n"
    "set(CMAKE_C_STANDARD 11)\n"
    "set(CMAKE_C_STANDARD_REQUIRED ON)\n"
    "set(CMAKE_C_EXTENSIONS OFF)\n"
    "if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)\n"
    "  set(CMAKE_BUILD_TYPE Release CACHE STRING \"Build type\" FORCE)\n"
    "endif()\n"
    "\n"
    "# The emulator (\"cuda-emu\") compiles the kernel sources at run time with this C++ "
    "compiler.\n"
    "include(CheckLanguage)\n"
    "check_language(CXX)\n"
    "if(CMAKE_CXX_COMPILER)\n"
    "  enable_language(CXX)\n"
    "endif()\n"
    "\n"
    "# OpenBLAS built with OpenMP (the emulator's GEMMs, as flaretune's).\n"
    "@BLAS@"
    "find_package(Threads REQUIRED)\n"
    "\n"
    "# The CUDA toolkit (\"cuda\": the GPU). Without it the library runs on \"cuda-emu\" alone.\n"
    "set(@U@_HAVE_CUDA OFF)\n"
    "find_package(CUDAToolkit QUIET)\n"
    "if(CUDAToolkit_FOUND AND TARGET CUDA::nvrtc AND TARGET CUDA::cupti AND TARGET "
    "CUDA::cublasLt)\n"
    "  set(@U@_HAVE_CUDA ON)\n"
    "endif()\n"
    "message(STATUS \"@P@: the GPU (device cuda): ${@U@_HAVE_CUDA}\")\n"
    "\n"
    "add_library(@P@ STATIC\n";

static const char *const pkg_cuda_cmake_mid = ")\n"
                                              "if(@U@_HAVE_CUDA)\n"
                                              "  target_sources(@P@ PRIVATE\n";

static const char *const pkg_cuda_cmake_lib =
    "  )\n"
    "  list(GET CUDAToolkit_INCLUDE_DIRS 0 @U@_CUDA_INCLUDE_DIR)\n"
    "  set_source_files_properties(src/kernels/cuda/nvrtc.c PROPERTIES COMPILE_DEFINITIONS\n"
    "    \"FT_CUDA_INCLUDE_DIR=\\\"${@U@_CUDA_INCLUDE_DIR}\\\"\")\n"
    "  set_source_files_properties(src/kernels/cuda/sass.c PROPERTIES COMPILE_DEFINITIONS\n"
    "    \"FT_CUDA_BIN_DIR=\\\"${CUDAToolkit_BIN_DIR}\\\"\")\n"
    "  # libcuda is never linked: it is loaded at run time (CMake's CUDA::nvrtc drags it in, so\n"
    "  # NVRTC is linked by its file), so a program starts where there is no GPU driver.\n"
    "  get_target_property(@U@_NVRTC_LIB CUDA::nvrtc IMPORTED_LOCATION)\n"
    "  target_compile_definitions(@P@ PRIVATE FT_HAVE_CUDA=1)\n"
    "  target_include_directories(@P@ PRIVATE ${CUDAToolkit_INCLUDE_DIRS})\n"
    "  target_link_libraries(@P@ PUBLIC ${@U@_NVRTC_LIB} CUDA::cupti CUDA::cublasLt CUDA::cudart)\n"
    "else()\n"
    "  target_compile_definitions(@P@ PRIVATE FT_HAVE_CUDA=0)\n"
    "endif()\n"
    "set_source_files_properties(src/kernels/cuda/device_emu.c PROPERTIES COMPILE_DEFINITIONS\n"
    "  \"FT_EMU_CXX=\\\"${CMAKE_CXX_COMPILER}\\\"\")\n"
    "if(@U@_NATIVE)\n"
    "  target_compile_options(@P@ PRIVATE -march=native)\n"
    "endif()\n"
    "# The kernel sources are read at run time from this folder's src/kernels (the emulator and\n"
    "# NVRTC compile them; FLARETUNE_KERNEL_DIR overrides it): keep the package where it is.\n"
    "target_compile_definitions(@P@ PRIVATE _POSIX_C_SOURCE=200809L _DEFAULT_SOURCE\n"
    "                           FT_SOURCE_DIR=\"${CMAKE_CURRENT_SOURCE_DIR}/src\")\n"
    "target_include_directories(@P@ PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include\n"
    "                           PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src\n"
    "                                   ${CMAKE_CURRENT_SOURCE_DIR}/src/include\n"
    "                                   ${CMAKE_CURRENT_SOURCE_DIR}/src/kernels\n"
    "                                   ${@U@_OPENBLAS_INCLUDE})\n"
    "target_link_libraries(@P@ PUBLIC ${@U@_OPENBLAS_LIB} OpenMP::OpenMP_C Threads::Threads m\n"
    "                      ${CMAKE_DL_LIBS})\n"
    "\n"
    "# The specialised sources compiled by nvcc for each architecture of @U@_CUDA_ARCHS into\n"
    "# build/cubin/ (the same sources, the same macros; a check of them, or for another GPU).\n"
    "set(@U@_CUDA_ARCHS \"@ARCHNUM@\" CACHE STRING\n"
    "    \"GPU architectures to compile the kernel sources for with nvcc (90a 80 ...; empty: "
    "none)\")\n"
    "find_program(@U@_NVCC nvcc HINTS $ENV{CUDA_HOME}/bin $ENV{CUDA_PATH}/bin "
    "/usr/local/cuda/bin)\n"
    "set(@U@_SOURCES\n";

static const char *const pkg_cuda_cmake_end =
    ")\n"
    "if(@U@_NVCC AND @U@_CUDA_ARCHS)\n"
    "  set(@U@_CUBINS)\n"
    "  foreach(arch ${@U@_CUDA_ARCHS})\n"
    "    foreach(name ${@U@_SOURCES})\n"
    "      set(out ${CMAKE_CURRENT_BINARY_DIR}/cubin/${name}.sm_${arch}.cubin)\n"
    "      add_custom_command(\n"
    "        OUTPUT ${out}\n"
    "        COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/cubin\n"
    "        COMMAND ${@U@_NVCC} --cubin -arch=sm_${arch} -std=c++17 -lineinfo\n"
    "                -I${CMAKE_CURRENT_SOURCE_DIR}/src/kernels "
    "-I${CMAKE_CURRENT_SOURCE_DIR}/src/kernels/cuda\n"
    "                -o ${out} ${CMAKE_CURRENT_SOURCE_DIR}/cuda/${name}.cu\n"
    "        DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cuda/${name}.cu\n"
    "        COMMENT \"nvcc: ${name}.cu for sm_${arch}\")\n"
    "      list(APPEND @U@_CUBINS ${out})\n"
    "    endforeach()\n"
    "  endforeach()\n"
    "  add_custom_target(@P@_cubins ALL DEPENDS ${@U@_CUBINS})\n"
    "elseif(@U@_CUDA_ARCHS)\n"
    "  message(STATUS \"@P@: no nvcc found: only the cubins for @ARCH@ in cubin/ (embedded)\")\n"
    "endif()\n";

/* put_subst, and @ARCH@ / @ARCHNUM@ for the architecture ("sm_90a" / "90a"). */
static void put_cuda_subst(FILE *f, const pkg *k, const char *text) {
    for (const char *c = text; *c;) {
        const char *a = strstr(c, "@ARCH"), *stop = a ? a : c + strlen(c);
        char part[4096];
        while (c < stop) {
            size_t len =
                (size_t)(stop - c) < sizeof part - 1 ? (size_t)(stop - c) : sizeof part - 1;
            memcpy(part, c, len);
            part[len] = '\0';
            put_subst(f, k, part);
            c += len;
        }
        if (!a) break;
        int num = !strncmp(a, "@ARCHNUM@", 9);
        fputs(num ? k->arch + 3 : k->arch, f);
        c = a + (num ? 9 : 6);
    }
}

static ft_status write_cuda_cmake(const pkg *k, ft_err *err) {
    char path[4352];
    FILE *f = pkg_open(k, "CMakeLists.txt", path, sizeof path, err);
    if (!f) return err ? err->status : FT_EIO;
    put_cuda_subst(f, k, pkg_cuda_cmake_top);
    for (int i = 0; pkg_common[i]; i++)
        if (strstr(pkg_common[i], ".c")) fprintf(f, "  src/%s\n", pkg_common[i]);
    for (int i = 0; pkg_cuda_common[i]; i++)
        if (strstr(pkg_cuda_common[i], ".c") && !strstr(pkg_cuda_common[i], ".cu"))
            fprintf(f, "  src/%s\n", pkg_cuda_common[i]);
    for (int fam = 0; fam < PKG_NFAMILIES; fam++) {
        const pkg_family *pf = &pkg_families[fam];
        for (int i = 0; k->fam[fam] && pf->files[i]; i++)
            if (strstr(pf->files[i], ".c") && !strstr(pf->files[i], "_cpu.c"))
                fprintf(f, "  src/%s\n", pf->files[i]);
        for (int i = 0; k->fam[fam] && pf->cuda_files[i]; i++)
            if (!strstr(pf->cuda_files[i], ".cu")) fprintf(f, "  src/%s\n", pf->cuda_files[i]);
    }
    fprintf(f,
            "  src/%1$s_entries.c\n  src/%1$s_runtime.c\n  src/%1$s_run.c\n  src/%1$s_absent.c\n",
            k->P);
    put_cuda_subst(f, k, pkg_cuda_cmake_mid);
    for (int i = 0; pkg_cuda_gpu[i]; i++)
        fprintf(f, "    src/%s\n", pkg_cuda_gpu[i]);
    put_cuda_subst(f, k, pkg_cuda_cmake_lib);
    for (int i = 0; i < k->n; i++)
        for (int j = 0; j < k->nmods[i]; j++)
            fprintf(f, "  b%d_m%d\n", i, j);
    put_cuda_subst(f, k, pkg_cuda_cmake_end);
    return pkg_close(f, path, err);
}

static const char *const pkg_cuda_readme_use =
    "## What runs where\n"
    "\n"
    "`@P@_run(device, ...)` (or the op's function, `args.device`) runs an entry's configuration\n"
    "through the package's copy of flaretune's CUDA backend: the op's host code (`*_cuda.c`: its\n"
    "grids, kernel arguments and GEMMs), the device layer and the kernel cache, on\n"
    "\n"
    "- `\"cuda\"` (or NULL): the GPU. Needs the CUDA toolkit at build time (cudart, NVRTC,\n"
    "  cuBLASLt and CUPTI are linked; libcuda is loaded at run time, so a program starts on a\n"
    "  machine without a GPU driver and the call returns @U@_ENODEV with one line). The cubins\n"
    "  NVRTC compiled for @ARCH@ when the package was written are put into the kernel cache\n"
    "  (`$FLARETUNE_CACHE_DIR`, else `~/.cache/flaretune`) under the keys the compile looks\n"
    "  for, so a GPU of that architecture with the same NVRTC compiles nothing; another\n"
    "  architecture or NVRTC compiles the kept sources (`src/kernels/`) with NVRTC once.\n"
    "- `\"cuda-emu\"`: the SIMT emulator on the CPU (checks, not speed). It compiles the kernel\n"
    "  sources with the C++ compiler CMake found (`FLARETUNE_EMU_CXX` overrides it), once per\n"
    "  configuration (cached). Its outputs equal `flaretune exec OP --backend cuda-emu --config\n"
    "  CONFIG` bit for bit with the same compilers, flags and OpenBLAS core\n"
    "  (`OPENBLAS_CORETYPE`, as for a CPU package).\n"
    "\n"
    "The kernel sources are read at run time from this folder's `src/kernels`\n"
    "(`FLARETUNE_KERNEL_DIR` overrides it): keep the package where it was built. Without the CUDA\n"
    "toolkit the library builds for `\"cuda-emu\"` alone (`\"cuda\"` then says so).\n"
    "\n"
    "With `nvcc`, `cmake --build` also compiles every specialised source for each architecture\n"
    "of `@U@_CUDA_ARCHS` (default: the profile's, @ARCH@) into `build/cubin/NAME.sm_ARCH.cubin`\n"
    "(`-D@U@_CUDA_ARCHS=\"80;90a\"` adds others, `\"\"` none): a check of the sources.\n"
    "\n"
    "## Build\n"
    "\n"
    "Needs CMake (3.18 or newer), a C11 compiler with OpenMP, OpenBLAS built with OpenMP\n"
    "(Debian: `libopenblas-openmp-dev`), a C++ compiler for `\"cuda-emu\"`, the CUDA toolkit for\n"
    "`\"cuda\"`; not flaretune.\n"
    "\n"
    "```sh\n"
    "cmake -S . -B build && cmake --build build   # build/lib@P@.a (+ build/cubin/ with nvcc)\n"
    "```\n"
    "\n"
    "Link it from another CMake project with `add_subdirectory(path/to/this @P@)` and\n"
    "`target_link_libraries(app PRIVATE @P@)` (its libraries come with it). `-D@U@_NATIVE=OFF`\n"
    "leaves out `-march=native`.\n"
    "\n"
    "## Call\n"
    "\n"
    "```c\n"
    "char msg[256];\n"
    "@P@_info info;\n"
    "@P@_fusion_dflare_args a = {.N = 48, .T = 4, .H = 64, .D = 3, .x = x, .w = w, .g = g,\n"
    "                            .f = f, .device = \"cuda\", .attrs = \"backward=0\"};\n"
    "if (@P@_fusion_dflare(&a, &info, msg, sizeof msg) != @U@_OK)\n"
    "    fprintf(stderr, \"%s\\n\", msg);\n"
    "```\n"
    "\n"
    "(The op and sizes are illustrative: the header declares the ops this package holds.) A run\n"
    "takes the entry of the same attributes (every attribute, the given ones on top of the\n"
    "defaults) at exactly its sizes, else the nearest: the smallest sum over the sizes of\n"
    "|log(size / entry size)|, the first of equally near ones; when its configuration cannot run\n"
    "at the sizes the next nearest is taken. Bad input (NULL, the wrong number of sizes, a size\n"
    "below 1, sizes that disagree, an unknown attribute, an op not in the package, no entry with\n"
    "the attributes, an unknown device) returns a status and one line in `msg`; nothing exits or\n"
    "aborts. Tensors are host memory: the inputs are copied to the device and the outputs back.\n"
    "\n"
    "`@P@_select(op, attrs, sizes, ...)` and `@P@_lookup` only choose an entry (every given\n"
    "`name=value` must be among the entry's attributes): its modules (`@P@_entries[i].modules`:\n"
    "the cubin's bytes, its kernels, block sizes and dynamic shared memory) are there for a\n"
    "program that loads them itself (`cuModuleLoadData`, `cuModuleGetFunction`).\n"
    "\n"
    "## Limits\n"
    "\n"
    "- Only the entries' attribute sets run; another attribute set returns @U@_EUNSUPPORTED.\n"
    "- The library holds copies of flaretune's internal `ft_*` functions: link one package per\n"
    "  program, and not together with flaretune itself.\n"
    "- One device context per process and device: runs take turns.\n";

static ft_status write_cuda_readme(const pkg *k, ft_err *err) {
    char path[4352];
    FILE *f = pkg_open(k, "README.md", path, sizeof path, err);
    if (!f) return err ? err->status : FT_EIO;
    fprintf(f, "# %s: tuned CUDA kernels\n\nThe tuned kernels of `", k->P);
    put_plain(f, k->source ? k->source : "a profile");
    fprintf(f, "` for `");
    put_plain(f, k->device);
    fprintf(
        f,
        "`, written by `flaretune emit --format package` (flaretune %s). It does not link "
        "flaretune.\n\n## What is in it\n\n"
        "- `include/%s.h`: the API;\n"
        "- `src/%s_entries.c`: the entries, each with its kernel modules (the cubins embedded,\n"
        "  the -D macros, the kernels and their block sizes), its configuration as constants,\n"
        "  and one function per op;\n"
        "- `src/%s_runtime.c`: the lookup; `src/%s_run.c`: the run (through the CUDA backend);\n"
        "- `src/%s_absent.c`, `src/include/flaretune/{version,source_hash}.h`,\n"
        "  `src/traces/eventlog.h`: what the\n"
        "  copied sources name that the package has no use for (the CPU kernels, the event log);\n"
        "- copies of flaretune's sources, unchanged, at their paths in its tree (`src/`): the\n"
        "  CUDA backend's host code, device layer, kernel cache, NVRTC, cuBLASLt GEMM, the SIMT\n"
        "  emulator and its headers, the ops' descriptions and CUDA host code (`*_op.c`,\n"
        "  `*_cuda.c`) and kernels (`*.cu`), and the part of `core/` and `kernels/op/` they need;\n"
        "- `cuda/bI_mJ.cu`: module J of entry I, the kernel source specialised with the -D\n"
        "  macros of its configuration (as `#define`s before the source);\n"
        "- `cubin/bI_mJ.%s.cubin`: the same compiled by NVRTC %s for %s;\n"
        "- `src/kernels/`: the kernel sources (copies, unchanged) and the dialect header\n"
        "  `cuda/ft_cuda.h`.\n\n## Entries\n\n"
        "| # | op | shape | attributes | configuration | median | modules (kernels) |\n"
        "|---|---|---|---|---|---|---|\n",
        FT_VERSION, k->P, k->P, k->P, k->P, k->P, k->arch,
#if FT_HAVE_CUDA
        ft_nvrtc_version(),
#else
        "",
#endif
        k->arch);
    for (int i = 0; i < k->n; i++) {
        char sh[512], at[1024], cf[1024];
        entry_text(k, i, 0, sh, sizeof sh);
        entry_text(k, i, 1, at, sizeof at);
        entry_text(k, i, 2, cf, sizeof cf);
        fprintf(f, "| %d | %s | ", i, k->e[i]->op->name);
        put_plain(f, sh);
        fprintf(f, " | ");
        put_plain(f, at);
        fprintf(f, " | ");
        put_plain(f, cf);
        fprintf(f, " | %.4g us |", k->e[i]->median_s * 1e6);
        for (int j = 0; j < k->nmods[i]; j++) {
            const ft_cuda_module_spec *m = &k->mods[i * PKG_MAX_MODULES + j];
            fprintf(f, " b%d_m%d (", i, j);
            for (int q = 0; q < m->nkernels; q++)
                fprintf(f, "%s%s", q ? ", " : "", m->kernels[q].name);
            fprintf(f, ")");
        }
        fprintf(f, " |\n");
    }
    fprintf(f, "\n");
    put_cuda_subst(f, k, pkg_cuda_readme_use);
    return pkg_close(f, path, err);
}

/* What the copied sources name besides the CUDA kernels: the CPU implementations the op
 * descriptions carry (empty), the wall clock the event log has, and flaretune's generated
 * headers (its version, the hash of its kernel sources) and the event log's declarations. */
static ft_status write_cuda_absent(const pkg *k, ft_err *err) {
    char rel[256], path[4352];
    snprintf(rel, sizeof rel, "src/%s_absent.c", k->P);
    FILE *f = pkg_open(k, rel, path, sizeof path, err);
    if (!f) return err ? err->status : FT_EIO;
    fprintf(f,
            "/* %s_absent.c: what the copied sources name besides the CUDA kernels. The op\n"
            " * descriptions carry a pointer to their CPU implementation, which a CUDA package\n"
            " * does not hold (empty here); ft_wall_time is flaretune's event log's (the backend\n"
            " * reads it for kernel spans in traces). Generated by `flaretune emit --format\n"
            " * package`; do not edit. */\n"
            "#include <time.h>\n\n#include \"cpu/cpu.h\"\n#include \"traces/eventlog.h\"\n\n",
            k->P);
    for (int fam = 0; fam < PKG_NFAMILIES; fam++)
        for (int c = 0; k->fam[fam] && pkg_families[fam].cpu[c]; c++)
            fprintf(f, "extern const ft_cpu_impl %1$s;\nconst ft_cpu_impl %1$s = {0};\n",
                    pkg_families[fam].cpu[c]);
    fprintf(f, "\ndouble ft_wall_time(void) {\n    struct timespec ts;\n"
               "    clock_gettime(CLOCK_REALTIME, &ts);\n"
               "    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;\n}\n");
    ft_status s = pkg_close(f, path, err);
    const char *const shims[][2] = {
        {"src/include/flaretune/version.h",
         "/* version.h: the flaretune this package was written by. Generated; do not edit. */\n"
         "#ifndef FLARETUNE_VERSION_H\n#define FLARETUNE_VERSION_H\n"
         "#define FT_VERSION \"" FT_VERSION "\"\n#define FT_GIT_DESCRIBE \"" FT_GIT_DESCRIBE
         "\"\n#endif\n"},
        {"src/include/flaretune/source_hash.h",
         "/* source_hash.h: the hash of the kernel sources this package holds. Generated. */\n"
         "#define FT_SOURCE_HASH \"" FT_SOURCE_HASH "\"\n"},
        {"src/traces/eventlog.h",
         "/* eventlog.h: of flaretune's event log, what the CUDA backend calls (the wall clock,\n"
         " * defined in the package's _absent.c). Generated; do not edit. */\n"
         "#ifndef FT_EVENTLOG_H\n#define FT_EVENTLOG_H\n"
         "/* Seconds since the epoch. */\ndouble ft_wall_time(void);\n#endif\n"},
    };
    for (size_t i = 0; i < sizeof shims / sizeof shims[0] && !s; i++) {
        FILE *h = pkg_open(k, shims[i][0], path, sizeof path, err);
        if (!h) return err ? err->status : FT_EIO;
        fputs(shims[i][1], h);
        s = pkg_close(h, path, err);
    }
    return s;
}

/* The copies (pkg_common, pkg_cuda_common, pkg_cuda_gpu, each family's files but its CPU
 * kernels, and its CUDA files), then the module sources the entries compile. */
static ft_status pkg_copy_cuda(const pkg *k, ft_err *err) {
    const char *const *lists[] = {pkg_common, pkg_cuda_common, pkg_cuda_gpu};
    ft_status s = FT_OK;
    for (int l = 0; l < 3 && !s; l++)
        for (int i = 0; lists[l][i] && !s; i++)
            s = pkg_copy(k, lists[l][i], err);
    for (int fam = 0; fam < PKG_NFAMILIES && !s; fam++) {
        const pkg_family *pf = &pkg_families[fam];
        for (int i = 0; k->fam[fam] && pf->files[i] && !s; i++)
            if (!strstr(pf->files[i], "_cpu.c")) s = pkg_copy(k, pf->files[i], err);
        for (int i = 0; k->fam[fam] && pf->cuda_files[i] && !s; i++)
            s = pkg_copy(k, pf->cuda_files[i], err);
    }
    return s;
}

/* Sources, specialised sources, cubins, then the generated files. */
static ft_status pkg_write_cuda(pkg *k, ft_err *err) {
    ft_status s = pkg_copy_cuda(k, err);
    for (int i = 0; i < k->n && !s; i++)
        for (int j = 0; j < k->nmods[i] && !s; j++) {
            const char *src = k->mods[i * PKG_MAX_MODULES + j].source;
            int seen = 0;
            for (int p = 0; p < i * PKG_MAX_MODULES + j && !seen; p++)
                seen = k->mods[p].source && !strcmp(k->mods[p].source, src);
            char rel[256];
            snprintf(rel, sizeof rel, "kernels/%s", src);
            if (!seen) s = pkg_copy(k, rel, err);
        }
    size_t total = (size_t)k->n * PKG_MAX_MODULES;
    void **cubins = calloc(total, sizeof *cubins);
    size_t *sizes = calloc(total, sizeof *sizes);
    if (!s && (!cubins || !sizes)) s = ft_err_set(err, FT_ENOMEM, "out of memory");
    for (int i = 0; i < k->n && !s; i++)
        for (int j = 0; j < k->nmods[i] && !s; j++) {
            s = write_cuda_source(k, i, j, err);
            if (!s)
                s = compile_cubin(k, i, j, &cubins[i * PKG_MAX_MODULES + j],
                                  &sizes[i * PKG_MAX_MODULES + j], err);
        }
    if (!s) s = write_cuda_header(k, err);
    if (!s) s = write_text(k, "runtime.c", ft_package_cuda_runtime_c, err);
    if (!s) s = write_text(k, "run.c", ft_package_cuda_run_c, err);
    if (!s) s = write_text(k, "lookup.inc", ft_package_lookup_inc, err);
    if (!s) s = write_text(k, "internal.h", ft_package_internal_h, err);
    if (!s) s = write_cuda_absent(k, err);
    if (!s) s = write_cuda_entries(k, cubins, sizes, err);
    if (!s) s = write_cuda_cmake(k, err);
    if (!s) s = write_cuda_readme(k, err);
    for (size_t i = 0; cubins && i < total; i++)
        free(cubins[i]);
    free(cubins);
    free(sizes);
    return s;
}

static ft_status pkg_write_tree(pkg *k, ft_err *err) {
    if (k->cuda) return pkg_write_cuda(k, err);
    ft_status s = FT_OK;
    for (int i = 0; pkg_common[i] && !s; i++)
        s = pkg_copy(k, pkg_common[i], err);
    for (int fam = 0; fam < PKG_NFAMILIES && !s; fam++)
        for (int i = 0; k->fam[fam] && pkg_families[fam].files[i] && !s; i++)
            s = pkg_copy(k, pkg_families[fam].files[i], err);
    if (!s) s = write_header(k, err);
    if (!s) s = write_text(k, "internal.h", ft_package_internal_h, err);
    if (!s) s = write_text(k, "runtime.c", ft_package_runtime_c, err);
    if (!s) s = write_text(k, "lookup.inc", ft_package_lookup_inc, err);
    if (!s) s = write_entries(k, err);
    if (!s) s = write_absent(k, err);
    if (!s) s = write_cmake(k, err);
    if (!s) s = write_readme(k, err);
    return s;
}

/* ---- the prefix ---------------------------------------------------------------------------- */

/* The first identifier of text (len bytes) that starts with "P_" or "U_", copied to found; 0
 * when none. In a template, placeholders (@P@, @BLAS@, ...) are skipped. */
static int prefixed_name(const char *text, size_t len, const pkg *k, int tmpl, char *found,
                         size_t n) {
    size_t lp = strlen(k->P);
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)text[i];
        if (tmpl && c == '@') {
            const char *end = memchr(text + i + 1, '@', len - i - 1);
            i = end ? (size_t)(end - text) + 1 : len;
            continue;
        }
        if (!isalpha(c) && c != '_') {
            i += isdigit(c) ? strspn(text + i, "0123456789abcdefABCDEFxX.uUlL") : 1;
            continue;
        }
        size_t j = i;
        while (j < len && (isalnum((unsigned char)text[j]) || text[j] == '_'))
            j++;
        size_t tl = j - i;
        for (int u = 0; u < 2; u++) {
            const char *pre = u ? k->U : k->P;
            if (tl > lp && !strncmp(text + i, pre, lp) && text[i + lp] == '_') {
                snprintf(found, n, "%.*s", (int)(tl < 200 ? tl : 200), text + i);
                return 1;
            }
        }
        i = j;
    }
    return 0;
}

/* The package's own names are the prefix, '_' and a word (P_run, P_OK in upper case, ...); the
 * copies of flaretune's sources sit beside them in one library. A prefix some name in those
 * sources (or in the package's fixed text) starts with could clash (ft: FT_OK, ft_status): it is
 * refused before anything is written. Every file any package copies is read, so the answer does
 * not depend on the profile. */
static ft_status check_prefix(const pkg *k, ft_err *err) {
    const char *const *lists[] = {pkg_common, pkg_cuda_common, pkg_cuda_gpu};
    char found[256];
    const char *where = NULL;
    char *buf = NULL;
    for (int l = 0; l < 3 + 2 * PKG_NFAMILIES && !where; l++) {
        const char *const *files = l < 3         ? lists[l]
                                   : (l - 3) % 2 ? pkg_families[(l - 3) / 2].cuda_files
                                                 : pkg_families[(l - 3) / 2].files;
        for (int i = 0; files[i] && !where; i++) {
            char path[4096];
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", ft_source_root(), files[i]);
            /* Sources only: what is missing or not a file, the copy says. */
            if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
            FILE *f = fopen(path, "rb");
            if (!f) continue;
            size_t len = 0, cap = 0, got = 1;
            while (got) {
                if (cap - len < 65536) {
                    char *nb = realloc(buf, cap + 262144);
                    if (!nb) break;
                    buf = nb;
                    cap += 262144;
                }
                got = fread(buf + len, 1, cap - len, f);
                len += got;
            }
            fclose(f);
            if (buf && prefixed_name(buf, len, k, 0, found, sizeof found)) where = files[i];
        }
    }
    free(buf);
    const char *const texts[] = {ft_package_runtime_c,
                                 ft_package_cuda_runtime_c,
                                 ft_package_cuda_run_c,
                                 ft_package_lookup_inc,
                                 ft_package_internal_h,
                                 pkg_header_top,
                                 pkg_cmake_blas,
                                 pkg_cmake_top,
                                 pkg_cmake_end,
                                 pkg_cuda_cmake_top,
                                 pkg_cuda_cmake_lib,
                                 pkg_cuda_cmake_end,
                                 NULL};
    for (int i = 0; texts[i] && !where; i++)
        if (prefixed_name(texts[i], strlen(texts[i]), k, 1, found, sizeof found))
            where = "the package's generated code";
    if (!where) return FT_OK;
    char starts[200];
    if (strcmp(k->P, k->U) != 0)
        snprintf(starts, sizeof starts, "'%s_' and '%s_'", k->P, k->U);
    else
        snprintf(starts, sizeof starts, "'%s_'", k->P);
    return ft_err_set(err, FT_EINVAL,
                      "prefix '%s' clashes with the sources a package holds: the package's names "
                      "start with %s, and %s already has '%s'; choose another --prefix",
                      k->P, starts, where, found);
}

/* dir must not exist, or be an empty directory (a link to one is followed: *real is then the
 * directory it names, else dir itself). *mode: an existing directory's permissions, which the
 * package keeps (-1: none; the new directory then gets the umask's). */
static ft_status check_target(const char *dir, char *real, size_t n, int *mode, ft_err *err) {
    struct stat st, lst;
    *mode = -1;
    snprintf(real, n, "%s", dir);
    if (!dir[0]) return ft_err_set(err, FT_EINVAL, "-o: the directory's path is empty");
    if (lstat(dir, &lst) != 0)
        return errno == ENOENT ? FT_OK : ft_err_set(err, FT_EIO, "%s: %s", dir, strerror(errno));
    if (stat(dir, &st) != 0)
        return ft_err_set(err, FT_EIO, "%s is a symbolic link to %s", dir,
                          errno == ENOENT ? "nothing (a dangling link): remove it or name a "
                                            "directory"
                                          : strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return ft_err_set(err, FT_EIO, "%s exists and is not a directory", dir);
    DIR *d = opendir(dir);
    if (!d) return ft_err_set(err, FT_EIO, "%s: %s", dir, strerror(errno));
    struct dirent *de;
    int empty = 1;
    while (empty && (de = readdir(d)) != NULL)
        empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
    closedir(d);
    if (!empty) return ft_err_set(err, FT_EIO, "%s exists and is not empty (nothing written)", dir);
    if (S_ISLNK(lst.st_mode)) {
        char *r = realpath(dir, NULL);
        if (!r) return ft_err_set(err, FT_EIO, "%s: %s", dir, strerror(errno));
        if (strlen(r) >= n) {
            free(r);
            return ft_err_set(err, FT_EINVAL, "%s: path too long", dir);
        }
        snprintf(real, n, "%s", r);
        free(r);
    }
    *mode = (int)(st.st_mode & 07777);
    return FT_OK;
}

/* Temporary trees of earlier emits to the same target that ended without removing theirs
 * (killed): `.BASE.tmp-XXXXXX` beside it, a directory of this user that no process holds (an
 * emit holds its own tree's flock until it is renamed into place or removed). */
static void remove_stale(const char *parent, const char *base) {
    DIR *d = opendir(parent);
    if (!d) return;
    char stem[512];
    snprintf(stem, sizeof stem, ".%s.tmp-", base);
    size_t sl = strlen(stem);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        if (strncmp(nm, stem, sl) != 0 || strlen(nm) != sl + 6) continue;
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", parent, nm) >= (int)sizeof path) continue;
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) continue;
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) remove_tree(path);
        close(fd);
    }
    closedir(d);
}

/* A fresh temporary directory beside dir (its parent made), locked, after the stale ones of
 * killed emits are removed. It is made as mkdir makes a directory (the umask's permissions). */
static ft_status make_tmp(pkg *k, const char *dir, ft_err *err) {
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", dir);
    size_t len = strlen(parent);
    while (len > 1 && parent[len - 1] == '/')
        parent[--len] = '\0';
    char *slash = strrchr(parent, '/');
    const char *base = slash ? slash + 1 : parent;
    if (!base[0] || !strcmp(base, ".") || !strcmp(base, ".."))
        return ft_err_set(err, FT_EINVAL, "%s: name a new directory", dir);
    if (strlen(base) > 200 ||
        snprintf(k->tmp, sizeof k->tmp, "%.*s.%s.tmp-XXXXXX", (int)(base - parent), parent, base) >=
            (int)sizeof k->tmp - 64)
        return ft_err_set(err, FT_EINVAL, "%s: path too long", dir);
    char where[4096]; /* the parent */
    if (!slash) {
        snprintf(where, sizeof where, ".");
    } else if (slash == parent) {
        snprintf(where, sizeof where, "/");
    } else {
        snprintf(where, sizeof where, "%.*s", (int)(slash - parent), parent);
        ft_status s = ft_dir_make(where, err);
        if (s) return s;
    }
    remove_stale(where, base);
    static const char digits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    char *x = k->tmp + strlen(k->tmp) - 6;
    uint64_t r = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)k;
    for (int tries = 0;; tries++) {
        for (int i = 0; i < 6; i++) {
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            x[i] = digits[(r >> 33) % (sizeof digits - 1)];
        }
        if (mkdir(k->tmp, 0777) == 0) break;
        if (errno != EEXIST || tries > 100) {
            int e = errno;
            k->tmp[0] = '\0';
            return ft_err_set(err, FT_EIO, "%s: cannot make a temporary directory beside it: %s",
                              dir, strerror(e));
        }
    }
    k->tmp_fd = open(k->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (k->tmp_fd >= 0) flock(k->tmp_fd, LOCK_EX);
    return FT_OK;
}

ft_status ft_profile_emit_package(const ft_profile *p, const ft_emit_opts *opts, const char *dir,
                                  int *nemitted, ft_err *err) {
    ft_emit_opts def = {FT_EMIT_PACKAGE, NULL, NULL, NULL, NULL};
    const ft_emit_opts *o = opts ? opts : &def;
    pkg k = {.P = o->prefix ? o->prefix : "ft_tuned", .source = o->source, .tmp_fd = -1};
    if (nemitted) *nemitted = 0;
    if (!is_identifier(k.P))
        return ft_err_set(err, FT_EINVAL,
                          "prefix '%s' is not a C identifier (letters, digits, '_'; at most 64)",
                          k.P);
    for (size_t i = 0; k.P[i]; i++)
        k.U[i] = (char)toupper((unsigned char)k.P[i]);
    char real[4096];
    int mode = -1;
    ft_status s = check_prefix(&k, err);
    if (!s) s = check_target(dir, real, sizeof real, &mode, err);
    if (!s) s = pkg_select(p, o, &k, err);
    if (!s) s = pkg_resolve(&k, err);
    if (!s) s = make_tmp(&k, real, err);
    if (!s) s = pkg_write_tree(&k, err);
    /* An existing empty directory keeps its permissions; a new one has the umask's. */
    if (!s && mode >= 0 && chmod(k.tmp, (mode_t)mode) != 0)
        s = ft_err_set(err, FT_EIO, "%s: %s (nothing written)", k.tmp, strerror(errno));
    if (!s && rename(k.tmp, real) != 0)
        s = ft_err_set(err, FT_EIO, "%s: %s (nothing written)", dir, strerror(errno));
    if (s && k.tmp[0]) remove_tree(k.tmp);
    if (k.tmp_fd >= 0) close(k.tmp_fd);
    if (!s && nemitted) *nemitted = k.n;
    free(k.e);
    free(k.cfg);
    free(k.opi);
    free(k.mods);
    free(k.nmods);
    for (int i = 0; k.logs && i < k.n * PKG_MAX_MODULES; i++)
        free(k.logs[i]);
    free(k.keys);
    free(k.logs);
    return s;
}
