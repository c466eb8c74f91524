/* emit_package.c: `flaretune emit --format package`: a profile's tuned kernels as a standalone
 * source package for one backend and device (docs/emit.md, "--format package").
 *
 * A CPU package holds copies of the CPU kernels of the ops' families, of the op descriptions
 * they are checked by, and of the part of core/ and kernels/op/ both need (the one list
 * of what a package copies: emit_package_tree.c), plus generated C: the buckets
 * (one per profile entry, its winning configuration as constants), a dispatch per op over the
 * same call machinery flaretune runs (so the same checks and the same kernels: bit-identical
 * outputs with the same compiler and flags), a header, a CMakeLists.txt and a README.
 *
 * A CUDA package holds copies of the CUDA backend (its host code, device layer, kernel cache,
 * NVRTC, cuBLASLt GEMM and SIMT emulator: emit_package_tree.c), of the ops'
 * descriptions and CUDA host code and kernels, plus generated C:
 * the entries with their modules (the cubins NVRTC compiled for the profile's architecture,
 * with their kernel-cache keys), the buckets, the lookup and a run through the copied backend
 * on "cuda" (the cubins seed the kernel cache) or "cuda-emu" (bit-identical to exec's).
 *
 * The generated files are written from templates (emit_package_runtime.c), all read before
 * anything is written. The tree is written into a temporary sibling of the target and renamed
 * into place; on any error it is removed, so the target either appears whole or not at all.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/paths.h"
#include "cpu/cpu.h"
#include "kernels/registry.h"
#include "op/backend.h"
#include "op/space.h"
#include "profiles/src/emit_package.h"
#if FT_HAVE_CUDA
#include "cuda/nvrtc.h"
#endif

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
    for (int f = 0; f < FT_PKG_NFAMILIES; f++)
        if (strlen(ft_pkg_families[f].name) == len &&
            !strncmp(ft_pkg_families[f].name, op->name, len))
            return f;
    return -1;
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
        if (i < 0) /* a malformed profile: exit 1, as any bad value read from a file */
            return ft_err_set(err, FT_EFORMAT, "%s: parameter '%s' is not in the %s space",
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
            /* A thread count tuned on another machine is a number of threads all the same
             * (any the profile reader accepts: run with at most the cores there are). */
            if (k < 0 && (pa->flags & FT_PARAM_THREADS) && x >= 1 && x <= INT_MAX) k = (int)x;
        }
        if (k < 0)
            return ft_err_set(err, FT_EFORMAT, "%s: parameter '%s' has a value the %s space lacks",
                              e->op->name, key, e->backend);
        cfg->v[i] = k;
    }
    return FT_OK;
}

/* One line naming the distinct values of a field over the selected entries; how many. */
static int distinct(const ft_pkg *k, int device, char *buf, size_t n) {
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
static ft_status pkg_select(const ft_profile *p, const ft_emit_opts *o, ft_pkg *k, ft_err *err) {
    int total = ft_profile_count(p);
    k->e = calloc((size_t)total + 1, sizeof *k->e);
    k->cfg = calloc((size_t)total + 1, sizeof *k->cfg);
    k->opi = calloc((size_t)total + 1, sizeof *k->opi);
    k->attrs = calloc((size_t)total + 1, sizeof *k->attrs);
    if (!k->e || !k->cfg || !k->opi || !k->attrs)
        return ft_err_set(err, FT_ENOMEM, "out of memory");
    for (int i = 0; i < total; i++) {
        if (!selected(ft_profile_entry_at(p, i), o)) continue;
        k->e[k->n] = ft_profile_entry_at(p, i);
        k->attrs[k->n] = ft_profile_attrs_all(k->e[k->n]);
        if (!k->attrs[k->n++]) return ft_err_set(err, FT_ENOMEM, "out of memory");
    }
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
static ft_status pkg_ops(ft_pkg *k, ft_err *err) {
    for (int r = 0; r < ft_op_count(); r++)
        for (int i = 0; i < k->n; i++)
            if (k->e[i]->op == ft_op_at(r)) {
                if (k->nops == FT_PKG_MAX_OPS)
                    return ft_err_set(err, FT_EINTERNAL, "more than %d ops", FT_PKG_MAX_OPS);
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
static ft_status pkg_arch(ft_pkg *k, ft_err *err) {
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
static ft_status pkg_resolve_cuda(ft_pkg *k, ft_err *err) {
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
    k->mods = calloc((size_t)k->n * FT_PKG_MAX_MODULES, sizeof *k->mods);
    k->nmods = calloc((size_t)k->n, sizeof *k->nmods);
    k->keys = calloc((size_t)k->n * FT_PKG_MAX_MODULES, sizeof *k->keys);
    k->logs = calloc((size_t)k->n * FT_PKG_MAX_MODULES, sizeof *k->logs);
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
        ft_cuda_module_spec *m = &k->mods[i * FT_PKG_MAX_MODULES];
        int nm = cop->modules(&c, ft_cuda_call_dt(&c), &k->cfg[i], m, FT_PKG_MAX_MODULES);
        if (nm < 1 || nm > FT_PKG_MAX_MODULES)
            return ft_err_set(err, FT_EUNSUPPORTED,
                              "%s: its configuration compiles %d kernel modules (a package holds "
                              "1 to %d; cuBLASLt calls are not packaged)",
                              e->op->name, nm, FT_PKG_MAX_MODULES);
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
static ft_status pkg_resolve(ft_pkg *k, ft_err *err) {
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

/* Module j of entry i compiled by NVRTC for the package's architecture: cubin/ and *out. */
static ft_status compile_cubin(ft_pkg *k, int i, int j, void **out, size_t *size, ft_err *err) {
#if FT_HAVE_CUDA
    const ft_cuda_module_spec *m = &k->mods[i * FT_PKG_MAX_MODULES + j];
    ft_nvrtc_result r;
    ft_status s = ft_nvrtc_compile_module(m, k->arch, &r, err);
    if (s) return s;
    char rel[128];
    snprintf(rel, sizeof rel, "cubin/b%d_m%d.%s.cubin", i, j, k->arch);
    s = ft_pkg_write(k, rel, r.cubin, r.cubin_size, err);
    if (!s) {
        *out = r.cubin;
        *size = r.cubin_size;
        r.cubin = NULL;
        snprintf(k->keys[i * FT_PKG_MAX_MODULES + j], sizeof k->keys[0], "%s", r.key);
        k->logs[i * FT_PKG_MAX_MODULES + j] = r.log;
        r.log = NULL;
    }
    ft_nvrtc_result_free(&r);
    return s;
#else
    (void)k, (void)i, (void)j, (void)out, (void)size;
    return ft_err_set(err, FT_EUNSUPPORTED, "built without the CUDA toolkit");
#endif
}

/* The copies (ft_pkg_common, ft_pkg_cuda_common, ft_pkg_cuda_gpu, each family's files but its CPU
 * kernels, and its CUDA files), then the module sources the entries compile. */
static ft_status pkg_copy_cuda(const ft_pkg *k, ft_err *err) {
    const char *const *lists[] = {ft_pkg_common, ft_pkg_cuda_common, ft_pkg_cuda_gpu};
    ft_status s = FT_OK;
    for (int l = 0; l < 3 && !s; l++)
        for (int i = 0; lists[l][i] && !s; i++)
            s = ft_pkg_copy(k, lists[l][i], err);
    for (int fam = 0; fam < FT_PKG_NFAMILIES && !s; fam++) {
        const ft_pkg_family *pf = &ft_pkg_families[fam];
        for (int i = 0; k->fam[fam] && pf->files[i] && !s; i++)
            if (!strstr(pf->files[i], "_cpu.c")) s = ft_pkg_copy(k, pf->files[i], err);
        for (int i = 0; k->fam[fam] && pf->cuda_files[i] && !s; i++)
            s = ft_pkg_copy(k, pf->cuda_files[i], err);
    }
    return s;
}

/* Sources, specialised sources, cubins, then the generated files. */
static ft_status pkg_write_cuda(ft_pkg *k, ft_err *err) {
    ft_status s = pkg_copy_cuda(k, err);
    for (int i = 0; i < k->n && !s; i++)
        for (int j = 0; j < k->nmods[i] && !s; j++) {
            const char *src = k->mods[i * FT_PKG_MAX_MODULES + j].source;
            int seen = 0;
            for (int p = 0; p < i * FT_PKG_MAX_MODULES + j && !seen; p++)
                seen = k->mods[p].source && !strcmp(k->mods[p].source, src);
            char rel[256];
            snprintf(rel, sizeof rel, "kernels/%s", src);
            if (!seen) s = ft_pkg_copy(k, rel, err);
        }
    size_t total = (size_t)k->n * FT_PKG_MAX_MODULES;
    void **cubins = calloc(total, sizeof *cubins);
    size_t *sizes = calloc(total, sizeof *sizes);
    if (!s && (!cubins || !sizes)) s = ft_err_set(err, FT_ENOMEM, "out of memory");
    for (int i = 0; i < k->n && !s; i++)
        for (int j = 0; j < k->nmods[i] && !s; j++) {
            s = ft_pkg_write_module_source(k, i, j, err);
            if (!s)
                s = compile_cubin(k, i, j, &cubins[i * FT_PKG_MAX_MODULES + j],
                                  &sizes[i * FT_PKG_MAX_MODULES + j], err);
        }
    if (!s) s = ft_pkg_write_cuda_files(k, cubins, sizes, err);
    for (size_t i = 0; cubins && i < total; i++)
        free(cubins[i]);
    free(cubins);
    free(sizes);
    return s;
}

static ft_status pkg_write_tree(ft_pkg *k, ft_err *err) {
    if (k->cuda) return pkg_write_cuda(k, err);
    ft_status s = FT_OK;
    for (int i = 0; ft_pkg_common[i] && !s; i++)
        s = ft_pkg_copy(k, ft_pkg_common[i], err);
    for (int fam = 0; fam < FT_PKG_NFAMILIES && !s; fam++)
        for (int i = 0; k->fam[fam] && ft_pkg_families[fam].files[i] && !s; i++)
            s = ft_pkg_copy(k, ft_pkg_families[fam].files[i], err);
    if (!s) s = ft_pkg_write_cpu_files(k, err);
    return s;
}

/* ---- the prefix ---------------------------------------------------------------------------- */

/* The first identifier of text (len bytes) that starts with "P_" or "U_", copied to found; 0
 * when none. In a template, placeholders (@P@, @BLAS@, ...) are skipped. */
static int prefixed_name(const char *text, size_t len, const ft_pkg *k, int tmpl, char *found,
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
 * sources (or in the templates of the package's code) starts with could clash (ft: FT_OK,
 * ft_status): it is refused before anything is written. Every file any package copies is read, so
 * the answer does not depend on the profile. */
static ft_status check_prefix(const ft_pkg *k, ft_err *err) {
    const char *const *lists[] = {ft_pkg_common, ft_pkg_cuda_common, ft_pkg_cuda_gpu};
    char found[256];
    const char *where = NULL;
    char *buf = NULL;
    for (int l = 0; l < 3 + 2 * FT_PKG_NFAMILIES && !where; l++) {
        const char *const *files = l < 3         ? lists[l]
                                   : (l - 3) % 2 ? ft_pkg_families[(l - 3) / 2].cuda_files
                                                 : ft_pkg_families[(l - 3) / 2].files;
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
    const char *texts[FT_PKG_TEMPLATES];
    int ntexts = ft_pkg_code_templates(k, texts, FT_PKG_TEMPLATES);
    for (int i = 0; i < ntexts && !where; i++)
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

/* A message that names the temporary tree (a file in it that could not be written) names it as
 * the package would have been, under dir as the user gave it: the tree is removed. */
static void name_as_output(ft_err *err, const char *tmp, const char *dir) {
    char *at = err && tmp[0] ? strstr(err->msg, tmp) : NULL;
    if (!at) return;
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%.*s%.*s%s", (int)(at - err->msg), err->msg, (int)dl, dir,
             at + strlen(tmp));
    memcpy(err->msg, msg, sizeof msg);
}

ft_status ft_profile_emit_package(const ft_profile *p, const ft_emit_opts *opts, const char *dir,
                                  int *nemitted, ft_err *err) {
    ft_emit_opts def = {FT_EMIT_PACKAGE, NULL, NULL, NULL, NULL};
    const ft_emit_opts *o = opts ? opts : &def;
    ft_pkg k = {.P = o->prefix ? o->prefix : "ft_tuned", .source = o->source, .tmp_fd = -1};
    if (nemitted) *nemitted = 0;
    if (!is_identifier(k.P))
        return ft_err_set(err, FT_EINVAL,
                          "prefix '%s' is not a C identifier (letters, digits, '_'; at most 64)",
                          k.P);
    for (size_t i = 0; k.P[i]; i++)
        k.U[i] = (char)toupper((unsigned char)k.P[i]);
    char real[4096];
    int mode = -1;
    ft_status s = ft_pkg_templates_load(&k, err);
    if (!s) s = check_prefix(&k, err);
    if (!s) s = ft_pkg_check_target(dir, real, sizeof real, &mode, err);
    if (!s) s = pkg_select(p, o, &k, err);
    if (!s) s = pkg_resolve(&k, err);
    if (!s) s = ft_pkg_make_tmp(&k, real, err);
    if (!s) s = pkg_write_tree(&k, err);
    /* An existing empty directory keeps its permissions; a new one has the umask's. */
    if (!s && mode >= 0 && chmod(k.tmp, (mode_t)mode) != 0)
        s = ft_err_set(err, FT_EIO, "%s: %s (nothing written)", k.tmp, strerror(errno));
    if (!s && rename(k.tmp, real) != 0)
        s = ft_err_set(err, FT_EIO, "%s: %s (nothing written)", dir, strerror(errno));
    if (s && k.tmp[0]) {
        name_as_output(err, k.tmp, dir);
        ft_pkg_remove_tree(k.tmp);
    }
    if (k.tmp_fd >= 0) close(k.tmp_fd);
    if (!s && nemitted) *nemitted = k.n;
    for (int i = 0; k.attrs && i < k.n; i++)
        json_decref(k.attrs[i]);
    free(k.attrs);
    free(k.e);
    free(k.cfg);
    free(k.opi);
    free(k.mods);
    free(k.nmods);
    for (int i = 0; k.logs && i < k.n * FT_PKG_MAX_MODULES; i++)
        free(k.logs[i]);
    free(k.keys);
    free(k.logs);
    ft_pkg_templates_free(&k);
    return s;
}
