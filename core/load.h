/* load.h: how busy the machine is besides this process, so a timing taken on a shared machine
 * says so.
 *
 * On a machine whose other processes keep cores busy, a multi-threaded kernel waits for its
 * descheduled threads at every barrier and its time comes in multiples of the scheduler tick;
 * a virtual machine may lose time to its host (steal). Two marks around a measurement give the
 * CPU time the rest of the machine used between them (the busy time, from /proc/stat, of the
 * CPUs this process may use, minus its own, from getrusage), the fraction stolen, and the
 * load average; the measurement is flagged busy above the thresholds below.
 */
#ifndef FLARETUNE_LOAD_H
#define FLARETUNE_LOAD_H

#ifdef __cplusplus
extern "C" {
#endif

/* Others using a quarter of a CPU, or the host stealing 5% of the time, is contention
 * (FLARETUNE_MAX_LOAD sets the CPUs; off: no measurement is called busy by its load). */
#define FT_LOAD_BUSY_CPUS  0.25
#define FT_LOAD_BUSY_STEAL 0.05
/* Marks closer together than this are too short for the 10 ms ticks of /proc/stat to judge
 * (two ticks of error over half a second is 0.04 CPUs). */
#define FT_LOAD_MIN_SPAN_S 0.5

typedef struct ft_load_mark {
    double wall_s;  /* monotonic seconds                                  */
    double busy_s;  /* CPU seconds every CPU spent busy (user, system, irq) */
    double steal_s; /* CPU seconds taken by the hypervisor                */
    double self_s;  /* CPU seconds this process used (every thread)       */
    int ncpu;       /* CPUs judged: those this process may use (its affinity) */
    int ok;         /* /proc/stat could be read                           */
} ft_load_mark;

typedef struct ft_load {
    double span_s;     /* time between the marks                                    */
    double other_cpus; /* CPUs the rest of the machine kept busy on average          */
    double steal_frac; /* fraction of the machine's CPU time stolen by its host      */
    double loadavg1;   /* the 1-minute load average at the second mark (ours counts) */
    int ncpu;
    int read;  /* both marks were read: the figures above hold, over any span  */
    int known; /* read, over a span long enough to judge (FT_LOAD_MIN_SPAN_S) */
    int busy;  /* known, and above a threshold                               */
} ft_load;

void ft_load_mark_take(ft_load_mark *m);
/* The CPUs others may keep busy before a measurement is busy: FLARETUNE_MAX_LOAD (a number >= 0,
 * or off: infinity), else FT_LOAD_BUSY_CPUS; a value that does not parse leaves the default. */
double ft_load_busy_cpus(void);
/* The load between two marks (a taken before b). */
void ft_load_between(const ft_load_mark *a, const ft_load_mark *b, ft_load *out);
/* Combine: the load over both spans, weighted by their lengths. Spans too short to judge alone
 * count too, so that many short ones (the candidates of a run) add up to a known load. */
void ft_load_add(ft_load *acc, const ft_load *more);
/* "other processes used 0.93 of 2 CPUs, the host stole 0%, load average 2.10". Returns buf. */
char *ft_load_describe(const ft_load *l, char *buf, unsigned long n);

#ifdef __cplusplus
}
#endif
#endif
