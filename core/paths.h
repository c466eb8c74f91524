/* paths.h: where flaretune finds the files it ships besides its code.
 *
 * The kernel sources (.cu for NVRTC and the emulator, the CPU kernels and the core an emitted
 * package copies) live in the source tree while flaretune runs from its build directory, and in
 * PREFIX/share/flaretune once installed (`cmake --install`). The root is, in order:
 *   1. $FLARETUNE_SOURCE_DIR;
 *   2. share/flaretune beside the binary or library this code is part of (found from its own
 *      address: PREFIX/bin or PREFIX/lib[/multiarch] -> PREFIX/share/flaretune);
 *   3. the source tree it was built from.
 * The root holds kernels/ and core/ (their sources and headers) and profiles/templates/ (what
 * an emitted package's files are written from). $FLARETUNE_KERNEL_DIR still names the
 * kernel folder alone (the tests point it at their samples).
 */
#ifndef FLARETUNE_PATHS_H
#define FLARETUNE_PATHS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The root described above, never NULL (a static string; computed once, thread-safe). */
const char *ft_source_root(void);
/* The kernel folder: $FLARETUNE_KERNEL_DIR, else ft_source_root()/kernels. Returns buf. */
char *ft_kernel_dir(char *buf, size_t n);
/* Whether paths a and b name one existing file (the same device and inode: through a link, a
 * different spelling or a relative path alike), so a command refuses to write over its input. */
int ft_same_file(const char *a, const char *b);
/* The directory part of path as written: "." for a bare name, "/" for a name at the root, else
 * everything before the last '/'. Returns 0 (dir left "") when it does not fit in n. */
int ft_path_dir(const char *path, char *dir, size_t n);
/* Where a write to path lands when its symbolic links are followed, so that a link stays a
 * link: 0 with out its real path (*exists 1), or for a name that does not exist yet, a dangling
 * link's target included (links followed by hand, a relative target from its link's folder),
 * that name (*exists 0); a link only the kernel can follow (/dev/stdout to a pipe) is itself,
 * existing. Else an errno: ENAMETOOLONG (over n), ELOOP (40 links), ENOTDIR, or
 * what realpath or readlink said. */
int ft_path_follow(const char *path, char *out, size_t n, int *exists);
/* Whether paths a and b name one file, existing or to be made: ft_same_file, else the same
 * name in the same (resolved) directory; so two outputs of one command never collide. */
int ft_same_path(const char *a, const char *b);

#ifdef __cplusplus
}
#endif
#endif
