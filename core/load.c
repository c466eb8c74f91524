/* load.c: how busy the rest of the machine is (see core/load.h). */
#define _GNU_SOURCE /* cpu_set_t */
#include "core/load.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/env.h"

void ft_load_mark_take(ft_load_mark *m) {
    memset(m, 0, sizeof *m);
    m->wall_s = ft_now_s();
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        m->self_s = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                    (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return;
    long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0) hz = 100;
    /* The CPUs this process may use (taskset, a cpuset, an MPI rank's slice): the rest of the
     * machine is judged on them, not on CPUs the process never runs on. */
    cpu_set_t mine;
    const int masked = ft_env_usable_set(&mine, sizeof mine) == 0;
    double all_busy = 0, all_steal = 0, my_busy = 0, my_steal = 0;
    int all = 0, ncpus = 0, used = 0;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "cpu", 3) != 0) break;
        /* user nice system idle iowait irq softirq steal (guest time is inside user) */
        unsigned long long v[8] = {0};
        int id = -1, skip = 0;
        if (line[3] != ' ' && sscanf(line + 3, "%d%n", &id, &skip) != 1) break;
        int got = sscanf(line + 3 + skip, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
                         &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
        if (got < 4) break;
        const double busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6]) / (double)hz;
        const double steal = (double)v[7] / (double)hz;
        if (id < 0) {
            all_busy = busy, all_steal = steal, all = 1;
        } else {
            ncpus++;
            if (masked && id < CPU_SETSIZE && CPU_ISSET(id, &mine))
                my_busy += busy, my_steal += steal, used++;
        }
    }
    fclose(f);
    if (used > 0 && used < ncpus) {
        m->busy_s = my_busy, m->steal_s = my_steal, m->ncpu = used;
    } else {
        m->busy_s = all_busy, m->steal_s = all_steal, m->ncpu = ncpus;
    }
    m->ok = all && m->ncpu >= 1;
}

static double loadavg1(void) {
    double la = 0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &la) != 1) la = 0;
        fclose(f);
    }
    return la;
}

double ft_load_busy_cpus(void) {
    const char *env = getenv("FLARETUNE_MAX_LOAD");
    if (!env || !*env) return FT_LOAD_BUSY_CPUS;
    if (!strcmp(env, "off")) return INFINITY;
    char *end;
    double v = strtod(env, &end);
    return end != env && !*end && v >= 0 && isfinite(v) ? v : FT_LOAD_BUSY_CPUS;
}

/* Busy: known, and others used the CPUs FLARETUNE_MAX_LOAD allows (a quarter of one unless set)
 * or the host stole 5%; never with FLARETUNE_MAX_LOAD=off. */
static int judged_busy(const ft_load *l) {
    const double cpus = ft_load_busy_cpus();
    return l->known && isfinite(cpus) &&
           (l->other_cpus >= cpus || l->steal_frac >= FT_LOAD_BUSY_STEAL);
}

void ft_load_between(const ft_load_mark *a, const ft_load_mark *b, ft_load *out) {
    memset(out, 0, sizeof *out);
    out->span_s = b->wall_s - a->wall_s;
    out->ncpu = b->ncpu;
    out->loadavg1 = loadavg1();
    if (!a->ok || !b->ok || !(out->span_s > 0)) return;
    double others = (b->busy_s - a->busy_s) - (b->self_s - a->self_s);
    out->other_cpus = others > 0 ? others / out->span_s : 0;
    if (out->other_cpus > out->ncpu) out->other_cpus = out->ncpu;
    double steal = b->steal_s - a->steal_s;
    out->steal_frac = steal > 0 ? steal / (out->span_s * out->ncpu) : 0;
    out->read = 1;
    out->known = out->span_s >= FT_LOAD_MIN_SPAN_S;
    out->busy = judged_busy(out);
}

void ft_load_add(ft_load *acc, const ft_load *more) {
    if (!more->read) {
        if (!acc->read) acc->loadavg1 = more->loadavg1;
        return;
    }
    if (!acc->read) {
        *acc = *more;
        return;
    }
    double t = acc->span_s + more->span_s;
    acc->other_cpus = (acc->other_cpus * acc->span_s + more->other_cpus * more->span_s) / t;
    acc->steal_frac = (acc->steal_frac * acc->span_s + more->steal_frac * more->span_s) / t;
    acc->span_s = t;
    acc->loadavg1 = more->loadavg1;
    acc->ncpu = more->ncpu;
    acc->known = t >= FT_LOAD_MIN_SPAN_S;
    acc->busy = judged_busy(acc);
}

char *ft_load_describe(const ft_load *l, char *buf, unsigned long n) {
    if (!l->known)
        snprintf(buf, n, "load not known (span %.2f s, load average %.2f)", l->span_s, l->loadavg1);
    else
        snprintf(buf, n, "other processes used %.2f of %d CPUs, the host stole %.0f%%, load average %.2f",
                 l->other_cpus, l->ncpu, 100 * l->steal_frac, l->loadavg1);
    return buf;
}
