/* ft_test_lock.h: a child process that holds a file's lock (core/filelock.h), as a tuner holds
 * its log's, for the tests of whoever tells whether a lock is held (test_filelock,
 * test_tui_follow). */
#ifndef FLARETUNE_FT_TEST_LOCK_H
#define FLARETUNE_FT_TEST_LOCK_H

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/filelock.h"

/* A child that takes the lock of path and holds it until it is killed; its pid once it holds
 * it, -1 when it could not take it. */
static inline pid_t ft_test_hold_lock(const char *path) {
    int ready[2];
    if (pipe(ready) != 0) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        ft_err err = {0};
        char ok = ft_file_lock(path, &err) >= 0 ? 'y' : 'n';
        if (write(ready[1], &ok, 1) != 1) _exit(1);
        for (;;)
            pause();
    }
    close(ready[1]);
    char ok = 'n';
    if (pid < 0 || read(ready[0], &ok, 1) != 1 || ok != 'y') {
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
        }
        pid = -1;
    }
    close(ready[0]);
    return pid;
}

#endif
