/* sched.c: what took the CPU away from a measured call's threads (see
 * core/sched.h). */
#define _GNU_SOURCE
#include "core/sched.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long task_nlink(void) {
    struct stat st;
    return stat("/proc/self/task", &st) == 0 ? (long)st.st_nlink : -1;
}

static void close_fds(ft_sched_probe *p) {
    for (int i = 0; i < p->n; i++)
        if (p->fd[i] >= 0) close(p->fd[i]);
    p->n = 0;
}

static void list_threads(ft_sched_probe *p) {
    close_fds(p);
    p->nlink = task_nlink();
    DIR *d = opendir("/proc/self/task");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && p->n < FT_SCHED_MAX_THREADS) {
        char *end;
        long tid = strtol(e->d_name, &end, 10);
        if (*end || tid <= 0 || tid == p->self_tid) continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", tid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        p->tid[p->n] = (int)tid;
        p->fd[p->n++] = fd;
    }
    closedir(d);
}

void ft_sched_probe_open(ft_sched_probe *p) {
    memset(p, 0, sizeof *p);
    p->self_tid = (int)syscall(SYS_gettid);
    struct timespec ts;
    p->ok = clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0;
    list_threads(p);
}

void ft_sched_probe_refresh(ft_sched_probe *p) {
    if (task_nlink() != p->nlink) list_threads(p);
}

void ft_sched_probe_close(ft_sched_probe *p) {
    close_fds(p);
    p->ok = 0;
}

static double ts_s(const struct timespec *ts) { return (double)ts->tv_sec + 1e-9 * (double)ts->tv_nsec; }

/* The run-queue delay field (the second) of a schedstat file, seconds; -1 when unreadable. */
static double read_delay(int fd) {
    char buf[128];
    ssize_t k = pread(fd, buf, sizeof buf - 1, 0);
    if (k <= 0) return -1;
    buf[k] = 0;
    unsigned long long run, wait;
    if (sscanf(buf, "%llu %llu", &run, &wait) != 2) return -1;
    return 1e-9 * (double)wait;
}

void ft_sched_mark_take(const ft_sched_probe *p, ft_sched_mark *m) {
    struct timespec ts;
    for (int i = 0; i < p->n; i++) m->delay_s[i] = read_delay(p->fd[i]);
    m->self_cpu_s = p->ok && clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0 ? ts_s(&ts) : -1;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    m->wall_s = ts_s(&ts);
}

/* The longest run-queue wait of a watched thread between delays a and b (from `lost` up); a
 * thread unreadable at either (it ended between them) is left out. */
static double longest_wait(int n, const double *a, const double *b, double lost) {
    for (int i = 0; i < n; i++)
        if (a[i] >= 0 && b[i] >= 0 && b[i] - a[i] > lost) lost = b[i] - a[i];
    return lost;
}

double ft_sched_delay_since(const ft_sched_probe *p, const ft_sched_mark *a) {
    if (!p || !p->ok) return 0;
    double now[FT_SCHED_MAX_THREADS];
    for (int i = 0; i < p->n; i++)
        now[i] = read_delay(p->fd[i]);
    return longest_wait(p->n, a->delay_s, now, 0);
}

double ft_sched_lost(const ft_sched_probe *p, const ft_sched_mark *a, const ft_sched_mark *b) {
    if (!p->ok || a->self_cpu_s < 0 || b->self_cpu_s < 0) return 0;
    double lost = (b->wall_s - a->wall_s) - (b->self_cpu_s - a->self_cpu_s);
    lost = longest_wait(p->n, a->delay_s, b->delay_s, lost);
    return lost > 0 ? lost : 0;
}
