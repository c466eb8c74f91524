/* emit_package.h: what the files of the package emitter share (internal to profiles/src;
 * docs/emit.md, "--format package").
 *
 *   emit_package.c          the entries chosen and resolved, the copies, the cubins, the prefix
 *                           check and the whole emit;
 *   emit_package_runtime.c  every generated file, from the templates of
 *                           profiles/templates/package/ (core/template.h);
 *   emit_package_text.c     the generated text that follows the profile (declarations,
 *                           tables, lists), as the values of those templates' variables;
 *   emit_package_tree.c     what a package copies, and the temporary tree it is written in.
 */
#ifndef FT_PROFILES_EMIT_PACKAGE_H
#define FT_PROFILES_EMIT_PACKAGE_H

#include <stdio.h>

#include "cuda/backend/cuda_backend.h"
#include "profiles/src/profile.h"

/* ---- what a package copies (emit_package_tree.c) ------------------------------------------ */

/* An op family: the files its ops' CPU kernels and descriptions need (a CUDA package leaves
 * out the *_cpu.c), the CUDA implementations the descriptions name (defined empty in a CPU
 * package: src/P_absent.c), the CUDA host code and kernel sources of its ops (a CUDA package),
 * and the CPU implementations the descriptions name (defined empty in a CUDA package). */
typedef struct ft_pkg_family {
    const char *name;      /* the ops' names up to the '.' */
    const char *files[10]; /* NULL-terminated */
    const char *cuda[4];
    const char *cuda_files[8];
    const char *cpu[4];
} ft_pkg_family;

#define FT_PKG_NFAMILIES 4
extern const ft_pkg_family ft_pkg_families[FT_PKG_NFAMILIES];
/* Paths under ft_source_root() copied to the same paths under the package's src/: what every
 * package copies, what a CUDA package copies besides, and of those the files that call the
 * CUDA toolkit's libraries (compiled only where the package's CMake finds the toolkit). */
extern const char *const ft_pkg_common[];
extern const char *const ft_pkg_cuda_common[];
extern const char *const ft_pkg_cuda_gpu[];

/* ---- the package being written ------------------------------------------------------------- */

#define FT_PKG_MAX_OPS     16
#define FT_PKG_MAX_MODULES 4
#define FT_PKG_TEMPLATES   32

typedef struct ft_pkg {
    const char *P; /* the prefix, and U in upper case */
    char U[80];
    const char *backend, *device, *source;
    int n; /* selected entries, their configs in the backend's space, and their op's index */
    const ft_profile_entry **e;
    json_t **attrs; /* each entry's every attribute (ft_profile_attrs_all), as the package lists
                       them */
    ft_config *cfg;
    int *opi;
    const ft_op *ops[FT_PKG_MAX_OPS];
    int nops;
    int fam[FT_PKG_NFAMILIES]; /* 1 for a family the package copies */
    char tmp[4096];            /* the tree being written */
    int tmp_fd;                /* open on it, holding its flock while it is written (-1: none) */
    int cuda;                  /* backend cuda: the modules of each entry, for arch */
    char arch[32];
    ft_cuda_module_spec *mods; /* [n][FT_PKG_MAX_MODULES] */
    int *nmods;
    char (*keys)[40]; /* [n][FT_PKG_MAX_MODULES]: each module's key in NVRTC's kernel cache */
    char **logs;      /* [n][FT_PKG_MAX_MODULES]: ptxas's report cached with its cubin     */
    char *tmpl[FT_PKG_TEMPLATES]; /* the templates' text (emit_package_runtime.c)           */
} ft_pkg;

/* ---- the tree (emit_package_tree.c) -------------------------------------------------------- */

/* dir must not exist, or be an empty directory (a link to one is followed: *real is then the
 * directory it names, else dir itself). *mode: an existing directory's permissions, which the
 * package keeps (-1: none). */
ft_status ft_pkg_check_target(const char *dir, char *real, size_t n, int *mode, ft_err *err);
/* k->tmp: a fresh temporary directory beside dir, locked, stale ones of killed emits removed. */
ft_status ft_pkg_make_tmp(ft_pkg *k, const char *dir, ft_err *err);
/* Remove path and everything under it (a tree this process wrote: no links followed). */
void ft_pkg_remove_tree(const char *path);
/* Copy ft_source_root()/rel to the tree's src/rel. */
ft_status ft_pkg_copy(const ft_pkg *k, const char *rel, ft_err *err);
/* Write len bytes of data as the tree's file rel (its folders made). */
ft_status ft_pkg_write(const ft_pkg *k, const char *rel, const void *data, size_t len, ft_err *err);

/* ---- the generated text (emit_package_text.c) ---------------------------------------------- */

/* Text safe inside a C comment, a C string or a Markdown table cell. */
void ft_pkg_put_plain(FILE *f, const char *s);
/* Entry i's sizes ("N=48 T=4 H=64 D=3"), attributes ("eps=1e-06,...") or configuration
 * ("strategy=k_layers,k=2,...") for what 0, 1 or 2. */
void ft_pkg_entry_text(const ft_pkg *k, int i, int what, char *buf, size_t n);
/* The header's declarations of each op (its args struct and function). */
void ft_pkg_put_op_decls(FILE *f, const ft_pkg *k);
/* The op table and the per-op functions of src/P_entries.c. */
void ft_pkg_put_ops(FILE *f, const ft_pkg *k);
/* The buckets (with the entries' table in a CPU package). */
void ft_pkg_put_buckets(FILE *f, const ft_pkg *k);
/* The rows of the entries' table (a CUDA package's with each entry's sizes and modules). */
void ft_pkg_put_entry_rows(FILE *f, const ft_pkg *k);
/* A CUDA package's entries' sizes and modules; cubins[i * FT_PKG_MAX_MODULES + j] and sizes
 * are module j of entry i's cubin. */
void ft_pkg_put_cuda_modules(FILE *f, const ft_pkg *k, void *const *cubins, const size_t *sizes);
/* One #include line per family the package holds. */
void ft_pkg_put_family_includes(FILE *f, const ft_pkg *k);
/* The implementations the op descriptions name and the package lacks, defined empty. */
void ft_pkg_put_absent(FILE *f, const ft_pkg *k);
/* The compiled sources, one a line, for CMakeLists.txt's add_library. */
void ft_pkg_put_cmake_sources(FILE *f, const ft_pkg *k);
/* A CUDA package's files that call the toolkit's libraries, for target_sources. */
void ft_pkg_put_cmake_gpu_sources(FILE *f, const ft_pkg *k);
/* A CUDA package's specialised sources by name (bI_mJ), one a line, for nvcc. */
void ft_pkg_put_module_names(FILE *f, const ft_pkg *k);
/* Every copied file of a CPU package, a Markdown list for README.md. */
void ft_pkg_put_readme_sources(FILE *f, const ft_pkg *k);
/* The rows of README.md's entries table. */
void ft_pkg_put_readme_rows(FILE *f, const ft_pkg *k);

/* ---- the generated files (emit_package_runtime.c) ------------------------------------------ */

/* Every template a package is written from, read from ft_source_root(): before anything is
 * written, so a missing one stops the emit with nothing left behind. */
ft_status ft_pkg_templates_load(ft_pkg *k, ft_err *err);
void ft_pkg_templates_free(ft_pkg *k);
/* The templates of the package's code (as they are, placeholders and all), NULL-terminated in
 * *texts[0..n): what the prefix check reads. Returns how many. */
int ft_pkg_code_templates(const ft_pkg *k, const char **texts, int n);
/* The generated files of a CPU package; of a CUDA package (cubins as ft_pkg_put_cuda_modules
 * takes them); module j of entry i's specialised source (cuda/bI_mJ.cu). */
ft_status ft_pkg_write_cpu_files(const ft_pkg *k, ft_err *err);
ft_status ft_pkg_write_cuda_files(const ft_pkg *k, void *const *cubins, const size_t *sizes,
                                  ft_err *err);
ft_status ft_pkg_write_module_source(const ft_pkg *k, int i, int j, ft_err *err);

#endif
