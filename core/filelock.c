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

/* The lock file of `path` in lock[n]: PATH.lock beside the file the path names, through
 * symbolic links, so that a link and its target (or two spellings of one file) take one lock. A
 * path that names no file yet keeps its own spelling. -1 with err set when there is none (a
 * link that leads nowhere, a device or a directory, a path too long). */
static int lock_path(const char *path, char *lock, size_t n, ft_err *err) {
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
    int w = snprintf(lock, n, "%s.lock", target);
    if (w < 0 || (size_t)w >= n) {
        ft_err_set(err, FT_EINVAL, "%.200s...: path too long for its lock file", path);
        return -1;
    }
    return 0;
}

static int lock_as(const char *path, int how, ft_err *err) {
    char lock[4096];
    if (lock_path(path, lock, sizeof lock, err) < 0) return -1;
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

/* One line of /proc/locks (proc_locks(5)): "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF",
 * or "1: -> FLOCK ..." for a process waiting for the lock; the device in hex, the inode in
 * decimal, "<none>:0" for a lock on no inode. Returns 1 with *ino set, 0 for a lock on no
 * inode, -1 for a line that does not read so. */
static int locks_line(const char *s, unsigned long long *ino) {
    char *end;
    (void)strtol(s, &end, 10);
    if (end == s || *end != ':') return -1;
    s = end + 1;
    s += strspn(s, " ");
    if (!strncmp(s, "->", 2)) s += 2;
    for (int field = 0; field < 4; field++) { /* kind, ADVISORY, READ/WRITE, pid */
        s += strspn(s, " ");
        size_t k = strcspn(s, " \n");
        if (!k) return -1;
        s += k;
    }
    s += strspn(s, " ");
    if (!strncmp(s, "<none>", 6)) return 0;
    unsigned maj, mnr;
    return sscanf(s, "%x:%x:%llu", &maj, &mnr, ino) == 3 ? 1 : -1;
}

int ft_file_lock_held(const char *path) {
    char lock[4096];
    ft_err err = {0};
    struct stat st;
    if (lock_path(path, lock, sizeof lock, &err) < 0 || stat(lock, &st) != 0 ||
        !S_ISREG(st.st_mode))
        return -1;
    FILE *f = fopen("/proc/locks", "re");
    if (!f) return -1;
    /* A lock on the inode of the lock file, whatever device the line names: stat() of a file
     * on a btrfs subvolume or an overlay gives another device than the file system's, which
     * /proc/locks shows. Another file's lock taken for this one (the same inode number on
     * another device) only errs on the side of "held". */
    char line[512];
    int held = 0, readable = 1;
    while (!held && fgets(line, sizeof line, f)) {
        unsigned long long ino = 0;
        int r = strchr(line, '\n') ? locks_line(line, &ino) : -1;
        if (r < 0) { /* a line this reader does not understand: it cannot tell */
            readable = 0;
            break;
        }
        held = r == 1 && ino == (unsigned long long)st.st_ino;
    }
    if (ferror(f)) readable = 0;
    fclose(f);
    return held ? 1 : readable ? 0 : -1;
}
