/* test_filelock.c: the lock beside a file (core/filelock.h) probed without taking it: held by
 * another process, released when that process ends (or is killed), found through a symbolic
 * link; no lock file created, and none to judge by when there is none. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/filelock.h"
#include "ft_test.h"
#include "ft_test_lock.h"

static char dir[256];

static void touch(const char *path) {
    FILE *f = fopen(path, "ab");
    FT_CHECK(f != NULL, "create %s: %s", path, strerror(errno));
    if (f) fclose(f);
}

/* Held while a child holds it, not held once the child is killed (SIGKILL: no clean-up of its
 * own, the kernel releases the lock), both through the file and a symbolic link to it. */
static void test_held_by_another_process(void) {
    const char *log = ft_test_path(dir, "run.jsonl"), *link = ft_test_path(dir, "link.jsonl");
    touch(log);
    FT_CHECK(symlink(log, link) == 0, "symlink %s: %s", link, strerror(errno));
    pid_t pid = ft_test_hold_lock(log);
    FT_CHECK(pid > 0, "the child took the lock");
    if (pid <= 0) return;
    FT_CHECK(ft_file_lock_held(log) == 1, "held by the child: %d", ft_file_lock_held(log));
    FT_CHECK(ft_file_lock_held(link) == 1, "held, seen through the link: %d",
             ft_file_lock_held(link));
    /* The probe took nothing: the lock is still the child's alone. */
    ft_err err = {0};
    FT_CHECK(ft_file_trylock(log, &err) < 0 && err.status == FT_EBUSY,
             "still busy after the probes: %s", err.msg);
    kill(pid, SIGKILL);
    FT_CHECK(waitpid(pid, NULL, 0) == pid, "wait for the child");
    FT_CHECK(ft_file_lock_held(log) == 0, "released by the killed child: %d",
             ft_file_lock_held(log));
    FT_CHECK(ft_file_lock_held(link) == 0, "released, seen through the link: %d",
             ft_file_lock_held(link));
    /* This process's own lock is held too; and released by ft_file_unlock. */
    int fd = ft_file_lock(link, &err);
    FT_CHECK(fd >= 0, "lock through the link: %s", err.msg);
    FT_CHECK(ft_file_lock_held(log) == 1, "held by this process: %d", ft_file_lock_held(log));
    ft_file_unlock(fd);
    FT_CHECK(ft_file_lock_held(log) == 0, "unlocked: %d", ft_file_lock_held(log));
    unlink(link);
    unlink(log);
    unlink(ft_test_path(dir, "run.jsonl.lock"));
}

/* No lock file: it cannot tell, and it creates none (neither beside a file nor beside a name
 * that is no file yet); a directory has no lock. */
static void test_no_lock_file(void) {
    const char *log = ft_test_path(dir, "quiet.jsonl"),
               *lock = ft_test_path(dir, "quiet.jsonl.lock");
    touch(log);
    FT_CHECK(ft_file_lock_held(log) == -1, "no lock file: cannot tell");
    FT_CHECK(access(lock, F_OK) != 0, "no lock file created beside %s", log);
    const char *none = ft_test_path(dir, "none.jsonl");
    FT_CHECK(ft_file_lock_held(none) == -1, "no file, no lock file: cannot tell");
    FT_CHECK(access(ft_test_path(dir, "none.jsonl.lock"), F_OK) != 0,
             "no lock file created beside %s", none);
    FT_CHECK(ft_file_lock_held(dir) == -1, "a directory: no lock");
    /* A lock file left by a writer that ended: not held. */
    ft_err err = {0};
    ft_file_unlock(ft_file_lock(log, &err));
    FT_CHECK(access(lock, F_OK) == 0, "the lock file stays: %s", err.msg);
    FT_CHECK(ft_file_lock_held(log) == 0, "a lock file no one holds: %d", ft_file_lock_held(log));
    unlink(lock);
    unlink(log);
}

int main(void) {
    if (access("/proc/locks", R_OK) != 0) ft_test_skip("/proc/locks cannot be read here");
    snprintf(dir, sizeof dir, "/tmp/ft-filelock-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    FT_RUN(test_held_by_another_process);
    FT_RUN(test_no_lock_file);
    rmdir(dir);
    return ft_test_finish();
}
