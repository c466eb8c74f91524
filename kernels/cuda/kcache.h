/* kcache.h: what the two kernel compilers share (the emulator's C++ modules and NVRTC's CUBINs):
 * the cache key (a 128-bit hash of the source, every header it includes with quotes, the options
 * and the compiler), the cache folder, small file helpers, and running a tool (the C++ compiler,
 * the disassembler) with its output captured.
 */
#ifndef FT_KCACHE_H
#define FT_KCACHE_H

#include <stddef.h>
#include <stdint.h>

#define FT_KC_PATH_CAP 1024

/* Two independent 64-bit FNV-1a streams (different offset bases and primes): a 128-bit key. */
typedef struct ft_kc_hash {
    uint64_t a, b;
} ft_kc_hash;

void ft_kc_hash_init(ft_kc_hash *h);
void ft_kc_hash_bytes(ft_kc_hash *h, const void *p, size_t n);
void ft_kc_hash_str(ft_kc_hash *h, const char *s);
/* The key as 32 hex digits (out holds 33 bytes). */
void ft_kc_hash_hex(const ft_kc_hash *h, char *out);

typedef struct ft_kc_seen {
    char paths[64][FT_KC_PATH_CAP];
    int n;
} ft_kc_seen;
/* Hash the files `text` includes with quotes, found next to `dir` or in incs, recursively. */
void ft_kc_hash_includes(ft_kc_hash *h, const char *text, const char *dir, const char *const *incs,
                         int nincs, ft_kc_seen *seen, int depth);

/* Read a whole file (NUL-terminated); 0, or -1 with errno. */
int ft_kc_read_file(const char *path, char **out, size_t *len);
void ft_kc_dir_of(const char *path, char *dir, size_t n);
int ft_kc_mkdir_p(const char *dir);
/* Write bytes to path atomically: a private temporary name in the same folder, then rename.
 * 0, or -1 with errno. */
int ft_kc_write_atomic(const char *path, const void *data, size_t n);
/* A cached entry's seal: the digest (32 hex digits, out holds 33) of its files' contents, each
 * with its length, written last into PATH.sum when the entry is complete. An entry whose files
 * no longer have their digest (truncated, garbled, one rewritten by another process meanwhile)
 * or that has no seal is no cache hit: it is built again and sealed anew. */
void ft_kc_digest(const void *const *parts, const size_t *lens, int n, char *out);
/* Write the seal of `path` (path + ".sum"); 0, or -1 with errno. */
int ft_kc_seal(const char *path, const char *digest);
/* Whether path + ".sum" holds exactly digest. */
int ft_kc_sealed(const char *path, const char *digest);

/* NAME or NAME=VALUE with NAME an identifier. */
int ft_kc_valid_define(const char *d);
/* Check every define (valid, at most max_len characters) and write them as "-DA -DB=1" (or "no
 * defines") into out for messages. Returns -1, or the index of the first bad one. */
int ft_kc_define_list(const char *const *defines, int n, size_t max_len, char *out, size_t cap);
/* A compiler's first error line, with directories stripped from its leading path. */
/* src into dst[n], cut to fit (names for messages and reports). */
void ft_kc_copy_cut(char *dst, size_t n, const char *src);

void ft_kc_first_error(const char *log, char *out, size_t n);
/* The distinct kernel modules this process has needed, each counted once, when first seen:
 * compiled here, or found in the disk cache (a kit's, an earlier run's). The compilers note
 * every module by its key; a key seen again is not counted again (thread-safe). */
void ft_kc_note(const char *key, int cached);
void ft_kc_counts(int *compiled, int *cached);

/* Run argv (argv[0] a path, or a name looked up in PATH) with LC_ALL=C, so messages are in
 * English, and its standard output captured into *out (malloc'd, NUL-terminated; at most max
 * bytes kept, the rest read and dropped; *len its length when len is not NULL). Standard error
 * goes into the same capture, or into the file err_path when that is not NULL. Returns the exit
 * status (128 + the signal when one ended it), or -1 with errno and *out NULL when the program
 * could not be started. It runs in a process group of its own, so the signals of flaretune's
 * terminal (Ctrl-C) do not reach it: flaretune decides what they stop. */
int ft_kc_run(char *const argv[], const char *err_path, size_t max, char **out, size_t *len);

/* The cache folder: $FLARETUNE_CACHE_DIR, else ~/.cache/flaretune, else
 * /tmp/flaretune-cache-UID; with `sub` appended ("emu", "nvrtc"). Returns snprintf's count. */
int ft_kc_cache_dir(const char *sub, char *out, size_t n);

#endif
