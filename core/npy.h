/* npy.h: NumPy .npy files, the interchange format of `flaretune exec`.
 *
 * Reads format versions 1.0, 2.0 and 3.0 in C order, little-endian. The dtypes an op uses are
 * float32, int32 and uint8; for convenience float64 is kept as float64 (the reference backend then
 * computes on the exact values), int64 is narrowed to int32 when every value fits, and bool is
 * read as uint8. Anything else is refused with one clear message naming the file.
 *
 * Writes version 1.0 (2.0 only when the header needs it), header padded to 64 bytes as NumPy
 * does, through a temporary file renamed into place so a failed write never leaves half a file.
 */
#ifndef FLARETUNE_NPY_H
#define FLARETUNE_NPY_H

#include <stdio.h>

#include "core/status.h"
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ft_npy_header {
    int major, minor;
    char descr[16];
    int fortran_order;
    int rank;
    int64_t shape[FT_MAX_RANK];
    size_t data_offset; /* bytes from the start of the file to the data */
} ft_npy_header;

/* Parse the header of a .npy file held in buf (at least the whole header). `name` is used in
 * messages. Fails with FT_EFORMAT and a message saying what is wrong. */
ft_status ft_npy_parse_header(const unsigned char *buf, size_t len, const char *name,
                              ft_npy_header *h, ft_err *err);

/* Read path into a new tensor. Every failure is one line naming the file: a directory, a
 * malformed header, a shape too large to address, data shorter or longer than the header says
 * (checked against the file's size before anything is allocated), an int64 that does not fit. */
ft_status ft_npy_load(const char *path, ft_tensor **out, ft_err *err);

/* Write t to path atomically (temporary file + rename). */
ft_status ft_npy_save(const char *path, const ft_tensor *t, ft_err *err);

/* Write t to a fresh temporary file beside path and return its name in tmp (size n); the caller
 * renames it with ft_file_commit or removes it. Lets several files be written all-or-nothing. */
ft_status ft_npy_save_tmp(const char *path, const ft_tensor *t, char *tmp, size_t n, ft_err *err);

/* Atomic file helpers shared by every writer (profiles, emitted headers, outputs). The
 * temporary file is created beside path with the permissions of the file it will replace (of a
 * symbolic link's target), or those of a new file under the umask. A path that is neither a
 * file nor a directory (a device such as /dev/null, a pipe) is opened and written in place,
 * never replaced: tmp is then "" and committing it only flushes and closes. The file is held
 * (flock) until it is closed; temporary files of path that earlier writers left behind (killed),
 * held by none and unchanged for a minute, are removed first. */
FILE *ft_file_create_tmp(const char *path, char *tmp, size_t n, ft_err *err);
/* Flush, sync and close f, then rename tmp to path. On failure tmp is removed. */
ft_status ft_file_commit(FILE *f, const char *tmp, const char *path, ft_err *err);
/* Write path all or nothing: write(f, ctx) fills a temporary file beside it (returning nonzero
 * when a write failed: "PATH: write failed"), which then replaces path (ft_file_commit). */
ft_status ft_file_write(const char *path, int (*write)(FILE *f, const void *ctx), const void *ctx,
                        ft_err *err);
/* Rename each closed tmp[k] to path[k], all or nothing: every target is checked before the
 * first rename (a directory in the way fails then), each replaced file is kept until all are in
 * place, and a rename that still fails puts the old files back. On failure every tmp[k] is
 * removed and the message names the path that failed. */
ft_status ft_file_commit_all(int n, const char *const *tmp, const char *const *path, ft_err *err);
/* Read what is left of f into a new buffer, *buf (the caller frees it) of *len bytes: 0; 1 when
 * f holds more than max bytes, -1 when memory is short (nothing to free then). A read error ends
 * the reading early: ferror(f) says so, with errno as the failed read left it. */
int ft_file_read_all(FILE *f, size_t max, char **buf, size_t *len);
/* Create dir and its missing parents (mkdir -p); FT_EIO naming the path that failed, or dir
 * when it exists but is not a directory. */
ft_status ft_dir_make(const char *dir, ft_err *err);
/* The same, noting the folders it created: made[] (at most max) gets the length of each prefix
 * of dir it created, in order, *nmade how many. ft_dir_unmake takes them away again, the last
 * first, each only while empty: a write that failed leaves no folder it made. */
ft_status ft_dir_make_noting(const char *dir, int *made, int max, int *nmade, ft_err *err);
void ft_dir_unmake(const char *dir, const int *made, int nmade);

#ifdef __cplusplus
}
#endif
#endif
