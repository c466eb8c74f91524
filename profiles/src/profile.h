/* profile.h: the profile store: tuned results as JSON files (docs/profiles.md).
 *
 * A profile holds one entry per key (op, backend, device, shape, attrs); adding or merging keeps,
 * per key, the entry with the lowest stats.median_s. Loading validates entry by entry: an entry
 * that lacks a field, has a field of the wrong type, names an unknown op or a parameter the
 * backend's space does not have is skipped with a warning naming it, and the rest of the file is
 * used. Skipped entries are not thrown away: they are written back unchanged when the profile is
 * saved (a build with a different op registry or parameter space may still read them), until a
 * valid entry for the same key replaces them.
 *
 * Saving writes a temporary file and renames it into place, so a crash never leaves a torn file;
 * ft_profile_update and ft_profile_update_merge also hold an exclusive flock on PATH.lock from
 * load to rename, so concurrent writers never lose each other's entries. (The lock file stays:
 * removing it would race with a writer that has just opened it.) PATH is first resolved to its
 * real path: a symbolic link is written through (it stays a link) and locked as its target. The
 * new file keeps the mode of the one it replaces, and a read-only profile is refused (FT_EIO),
 * never replaced. An element of `entries` that is not an object is dropped with a warning.
 *
 * Entries are stored in a stable order (op in registry order, backend, device, attrs, shape), so
 * the same results always give the same file.
 */
#ifndef FLARETUNE_PROFILE_H
#define FLARETUNE_PROFILE_H

#include <stdint.h>

#include <jansson.h>
#include <stdio.h>

#include "op/op.h"
#include "op/space.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The newest schema_version this build reads. It writes 1, or 2 when the profile holds kernels
 * (below): a build that reads 1 only refuses such a file rather than drop its kernels when it
 * writes the file back. */
#define FT_PROFILE_SCHEMA_VERSION 2

typedef struct ft_profile ft_profile;

/* A valid entry, as the profile holds it. Pointers refer into the profile and stay valid until
 * the profile is changed or freed. */
typedef struct ft_profile_entry {
    const ft_op *op;
    const char *backend;
    const char *device;
    const json_t *shape;  /* {"M": 512, ...}: every size of the op      */
    uint64_t shape_hash;  /* of the sizes in the op's order: a quick "not the same shape" */
    const json_t *attrs;  /* {"scheme": "dpace", ...}: strings          */
    const json_t *config; /* the winning configuration                  */
    double median_s;      /* stats.median_s                             */
    const json_t *json;   /* the whole entry, as in the file            */
} ft_profile_entry;

/* A kernel a FAIR T1 file describes, as `tune --t1 --profile` writes it (docs/profiles.md,
 * "Kernels"): a list of its own beside the ops' entries, one per key (kernel, backend, device,
 * problem_size), the fastest kept. Pointers refer into the profile, as an entry's do. */
typedef struct ft_profile_kernel {
    const char *kernel;         /* the T1 file's KernelName                                 */
    const char *backend;        /* "cuda" or "cuda-emu"                                     */
    const char *device;
    const json_t *problem_size; /* [x], [x, y] or [x, y, z]: the file's ProblemSize          */
    const json_t *config;       /* tunable -> integer, or the text of its -D value           */
    double median_s;            /* stats.median_s                                            */
    const json_t *json;
} ft_profile_kernel;

/* What ft_profile_add did with an entry. */
typedef enum {
    FT_PROFILE_ADDED,    /* a key the profile did not have                             */
    FT_PROFILE_REPLACED, /* faster than the entry it had for the key (or replaced a
                            skipped one)                                               */
    FT_PROFILE_KEPT,     /* not faster than the entry it had: the profile is unchanged */
} ft_profile_outcome;

ft_profile *ft_profile_new(void); /* empty; NULL when out of memory */
void ft_profile_free(ft_profile *p);

/* The most bytes a profile may have (docs/profiles.md): some thousand entries of a few KiB. */
#define FT_PROFILE_MAX_BYTES ((long long)64 << 20)

/* Read path into a new profile. A missing file (or one holding only white space) is an empty
 * profile. Malformed JSON is FT_EFORMAT naming the file, line and column; a schema_version newer
 * than FT_PROFILE_SCHEMA_VERSION is FT_EUNSUPPORTED. Invalid entries become warnings. An empty
 * path, a directory, a device or socket (only files and pipes are read), more than
 * FT_PROFILE_MAX_BYTES and a read error are errors (FT_EIO, FT_EINVAL for the empty path). */
ft_status ft_profile_load(const char *path, ft_profile **out, ft_err *err);
/* The same from a parsed document; `name` is used in messages and warnings. */
ft_status ft_profile_from_json(const json_t *root, const char *name, ft_profile **out, ft_err *err);

/* Check one entry against docs/profiles.md and this build's registry. FT_OK, or FT_EINVAL and
 * one line saying what is wrong. */
ft_status ft_profile_entry_check(const json_t *entry, ft_err *err);

/* Add one entry (the profile keeps its own copy): an op's, or a kernel's (an object with a
 * "kernel" field and no "op"). An invalid entry is refused with FT_EINVAL. outcome may be
 * NULL. */
ft_status ft_profile_add(ft_profile *p, const json_t *entry, ft_profile_outcome *outcome,
                         ft_err *err);
/* Add every entry of src to dst, keeping the best per key; src's skipped entries and warnings
 * are carried over too. */
ft_status ft_profile_merge(ft_profile *dst, const ft_profile *src, ft_err *err);

/* The profile as a document: {"schema_version", "generator", "entries"} and "kernels" where it
 * has any; NULL when out of
 * memory. The document shares the entries' objects with the profile: read it, do not change
 * it. */
json_t *ft_profile_to_json(const ft_profile *p);
/* Write atomically (temporary file beside the real path, then rename). On failure the file that
 * was there is untouched. */
ft_status ft_profile_save(const ft_profile *p, const char *path, ft_err *err);

/* Under an exclusive lock on PATH.lock: load path, add entry, save. Safe against concurrent
 * writers (other processes or threads doing the same). A file that does not load (malformed,
 * too new) is left as it is and the error returned. */
ft_status ft_profile_update(const char *path, const json_t *entry, ft_err *err);
/* The same, adding every entry of src. */
ft_status ft_profile_update_merge(const char *path, const ft_profile *src, ft_err *err);

/* Whether ft_profile_update could write path, checked before a long search so a run does not
 * find out at its end: FT_OK, or one line saying why not. FT_EINVAL for an empty path or a name
 * or path too long; FT_EIO for a directory that does not exist, a path that is a directory, a
 * read-only profile, or a directory where no file can be created (a temporary file is created
 * and removed to find out); the status of ft_profile_load for an existing file that is not a
 * valid profile. Leaves no file behind. */
ft_status ft_profile_check_writable(const char *path, ft_err *err);

/* Valid entries, in the profile's order. */
int ft_profile_count(const ft_profile *p);
const ft_profile_entry *ft_profile_entry_at(const ft_profile *p, int i);
/* Entries skipped at load and kept to be written back. */
int ft_profile_skipped_count(const ft_profile *p);
/* Valid kernels, ordered by kernel, backend, device, problem size. */
int ft_profile_kernel_count(const ft_profile *p);
const ft_profile_kernel *ft_profile_kernel_at(const ft_profile *p, int i);
/* Check one kernel entry against docs/profiles.md: FT_OK, or FT_EINVAL and one line. */
ft_status ft_profile_kernel_check(const json_t *entry, ft_err *err);

/* Warnings gathered by loading and merging, one line each ("FILE: entries[3] (loss on cpu,
 * M=512 H=1024 V=32768) skipped: ..."). */
int ft_profile_warning_count(const ft_profile *p);
const char *ft_profile_warning_at(const ft_profile *p, int i);
/* Notes on what loading read differently from how it will be written: an entry whose config
 * names tunables by their former names (ft_space_renamed) is kept under the new names. */
int ft_profile_note_count(const ft_profile *p);
const char *ft_profile_note_at(const ft_profile *p, int i);

/* Do two attribute objects of an op ({name: value text}) give the same values? An attribute
 * one leaves out is at its default: an entry written before the op took an attribute (the rope
 * scaling of attention.kvproj, say) still matches the calls that leave it at its default. */
int ft_profile_attrs_match(const json_t *a, const json_t *b);
/* Every attribute of e's op, in the op's order, at e's value or, where e leaves it out, at its
 * default, each written as ft_profile_attrs_match reads it; "*" (any value) for one that
 * changes nothing in e's call (ft_attr_matters: the loss's eps without final_norm, say). What
 * emitted lookups compare a query with, so that a query can name an attribute at its default
 * ("want_dx=1"). A new reference; NULL when out of memory. */
json_t *ft_profile_attrs_all(const ft_profile_entry *e);
/* The entry of `op` with the nearest shape among those with the given backend, device and attrs
 * (each NULL for any; attrs compared by ft_profile_attrs_match). Exact when the query gives every
 * size of the entry with the same value; otherwise the entry with the smallest sum over sizes of
 * |log(size / entry size)| (sizes the query does not give are left out; sizes below 1 count as 1),
 * the first in the profile's order of those within 1e-9 of it. *exact (may be NULL) says which.
 * NULL when no entry of the op matches. */
const ft_profile_entry *ft_profile_lookup(const ft_profile *p, const char *op, const char *backend,
                                          const char *device, const json_t *attrs,
                                          const json_t *shape, int *exact);
/* The same for a call: its op, sizes and attributes. */
const ft_profile_entry *ft_profile_lookup_call(const ft_profile *p, const ft_call *c,
                                               const char *backend, const char *device, int *exact);
/* An entry's config (its "config" object) read against the space s of this machine, as the
 * profile's readers run it: any positive thread count is accepted (docs/profiles.md), and one
 * above this machine's cores (the largest candidate) is run with as many threads as there are
 * cores, which note (n bytes; "" when nothing was changed) says. */
ft_status ft_profile_config(const ft_space *s, const json_t *config, ft_config *cfg, char *note,
                            size_t n, ft_err *err);
/* The config the profile gives call c on this backend and device (NULL: any device), and in words,
 * for a reader of its result (n bytes of buf), why it gave none (no entry of the op here; entries
 * of other attributes, which and how; the nearest entry's config refused by the space sp or unable
 * to run at these sizes), else what running its entry changed (ft_profile_config's note), else "".
 * Returns 1 with the config in *cfg and whether the entry's shape is the call's in *exact (each
 * may be NULL), 0 when it gives none. profile_why.c. */
int ft_profile_config_why(const ft_profile *p, const ft_call *c, const char *backend,
                          const char *device, const ft_space *sp, ft_config *cfg, int *exact,
                          char *buf, size_t n);
/* The lookup metric: sum over the sizes of `entry` that `query` gives of |log(q / e)|. */
double ft_profile_shape_distance(const json_t *query, const json_t *entry);

/* ---- emitters (profiles/src/emit.c, docs/emit.md) -------------------------------------------- */

typedef enum {
    FT_EMIT_C_HEADER, /* a self-contained C/C++ header with the tables and a lookup */
    FT_EMIT_JSON,     /* a flat array of records for other tools                 */
    FT_EMIT_PACKAGE,  /* a standalone source package (a directory): kernels, dispatch, build */
} ft_emit_format;

typedef struct ft_emit_opts {
    ft_emit_format format;
    const char *backend; /* only entries of this backend (NULL: all)                    */
    const char *device;  /* only entries whose device contains this text (NULL: all)   */
    const char *prefix;  /* C identifier prefix of the header (NULL: "ft_tuned")        */
    const char *source;  /* named in the header's opening comment (NULL: not named)     */
} ft_emit_opts;

/* Does o's --backend and --device select a result of this backend and device? */
int ft_emit_selects(const ft_emit_opts *o, const char *backend, const char *device);
/* "c-header", "json" or "package"; FT_EINVAL listing the formats otherwise. */
ft_status ft_emit_format_parse(const char *name, ft_emit_format *out, ft_err *err);
/* Write the selected entries of p to f. *nemitted (may be NULL) is how many. FT_EINVAL for
 * FT_EMIT_PACKAGE, which writes a directory (ft_profile_emit_package). */
ft_status ft_profile_emit(const ft_profile *p, const ft_emit_opts *opts, FILE *f, int *nemitted,
                          ft_err *err);
/* Write the selected entries of p as a standalone source package in the new directory dir
 * (profiles/src/emit_package.c, docs/emit.md "--format package"): the kernel sources of one
 * backend and device, specialised per entry, a dispatch per op, a header, a CMakeLists.txt and
 * a README. The selected entries must share one backend (cpu or cuda) and one device. Built in
 * a temporary sibling directory and renamed into place; dir must not exist or be empty; on
 * failure nothing is left behind. *nemitted (may be NULL) is how many entries it holds. */
ft_status ft_profile_emit_package(const ft_profile *p, const ft_emit_opts *opts, const char *dir,
                                  int *nemitted, ft_err *err);

#ifdef __cplusplus
}
#endif
#endif
