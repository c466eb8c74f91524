/* filelock.c: exclusive locks beside files (see core/filelock.h). */
#include "core/filelock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static int lock_as(const char *path, int how, ft_err *err) {
    /* The lock goes beside the file the path names, through symbolic links, so that a link
     * and its target (or two spellings of one file) take one lock. A path that names no file
     * yet keeps its own spelling. */
    char real[PATH_MAX];
    const char *target = realpath(path, real) ? real : path;
    struct stat st;
    if (target == path && errno == ELOOP) { /* no lock is left beside a link that leads nowhere */
        ft_err_set(err, FT_EIO, "%s: %s", path, strerror(ELOOP));
        return -1;
    }
    if (stat(target, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
        /* nothing is written beside a device or a directory, not even a lock */
        ft_err_set(err, FT_EIO, "%s %s", path,
                   S_ISDIR(st.st_mode) ? "is a directory, not a file"
                                       : "is not a regular file (a device or socket)");
        return -1;
    }
    char lock[4096];
    int w = snprintf(lock, sizeof lock, "%s.lock", target);
    if (w < 0 || (size_t)w >= sizeof lock) {
        ft_err_set(err, FT_EINVAL, "%.200s...: path too long for its lock file", path);
        return -1;
    }
    /* flock works on a descriptor opened for reading only: a lock file another user created
     * (mode 0644 under the usual umask) that this user may read but not write still locks, so
     * a shared profile stays shared. */
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    int e = errno;
    if (fd < 0 && e == EACCES) {
        fd = open(lock, O_RDONLY | O_CLOEXEC);
        if (fd < 0 && errno != ENOENT) e = errno; /* no lock file yet: the folder is the cause */
    }
    if (fd < 0) {
        ft_err_set(err, FT_EIO, "%s: cannot open the lock file: %s", lock, strerror(e));
        return -1;
    }
    while (flock(fd, how) != 0) {
        if (errno == EINTR) continue;
        e = errno;
        close(fd);
        if (e == EWOULDBLOCK)
            ft_err_set(err, FT_EBUSY, "%s is in use by another process (its lock %s is held)",
                       path, lock);
        else
            ft_err_set(err, FT_EIO, "%s: cannot lock: %s", lock, strerror(e));
        return -1;
    }
    return fd;
}

int ft_file_lock(const char *path, ft_err *err) { return lock_as(path, LOCK_EX, err); }

int ft_file_trylock(const char *path, ft_err *err) {
    return lock_as(path, LOCK_EX | LOCK_NB, err);
}

void ft_file_unlock(int fd) {
    if (fd >= 0) close(fd); /* closing the descriptor releases the flock */
}
