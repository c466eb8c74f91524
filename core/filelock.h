/* filelock.h: an exclusive advisory lock beside a file, for read-modify-write updates that
 * several processes may make at once (profiles, the ceilings cache).
 *
 * The lock is a flock on PATH.lock, not on PATH itself: updates replace PATH by renaming a
 * temporary file over it, and a lock held on the old inode would not exclude a writer that
 * opened the new one.
 */
#ifndef FLARETUNE_FILELOCK_H
#define FLARETUNE_FILELOCK_H

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Take the lock of `path` (waiting for it); returns a descriptor to pass to ft_file_unlock, or
 * -1 with err set (FT_EIO naming the lock file). The lock is beside the file path names through
 * symbolic links (a link and its target take one lock; hard links to one file do not); a device
 * or a directory gets none (FT_EIO, nothing created). An existing lock file this user may read
 * but not write (another user's, mode 0644) is opened read-only: flock needs no more. */
int ft_file_lock(const char *path, ft_err *err);
/* Take it only if it is free now: -1 with FT_EBUSY in err when another process holds it. */
int ft_file_trylock(const char *path, ft_err *err);
void ft_file_unlock(int fd);
/* Whether a process holds the lock of `path` now, found without taking it (taking it, even
 * shared and for an instant, would make a tuner starting then fail as busy): 1 held, 0 not
 * held, -1 when it cannot tell (no lock file beside the file, which is never created here;
 * /proc/locks, Linux's list of every lock, unreadable or not understood). The lock file is
 * found as ft_file_lock finds it. A lock another host holds over a network file system is not
 * in this host's /proc/locks, nor one a process of another PID namespace holds: both read
 * as 0. */
int ft_file_lock_held(const char *path);

#ifdef __cplusplus
}
#endif
#endif
