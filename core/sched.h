/* sched.h: what took the CPU away from a measured call's threads.
 *
 * A call timed by the host clock is a measurement of the kernel only while its threads ran:
 * on a machine whose other processes want more CPUs than there are, the scheduler takes a
 * thread off its core for a slice of milliseconds, and a 20 µs call then measures 4 ms. Two
 * marks around a sample say how much of it was lost that way:
 *
 *   - the calling thread (the OpenMP master, the BLAS's caller) is busy for the whole call, so
 *     the part of the sample it was not on a CPU (wall time minus its CPU time, from
 *     CLOCK_THREAD_CPUTIME_ID: exact, and it also sees a hypervisor's steal and any sleep);
 *   - every other thread of the process (OpenMP and BLAS workers) waits for work legitimately,
 *     so for them only the time they were runnable but kept waiting for a CPU counts (the
 *     run-queue delay of /proc/self/task/TID/schedstat).
 *
 * The sample's lost time is the larger of the two; docs/measurement.md gives the rule that
 * uses it. Reading a mark costs a few microseconds, taken outside the timed window.
 */
#ifndef FLARETUNE_SCHED_H
#define FLARETUNE_SCHED_H

#ifdef __cplusplus
extern "C" {
#endif

#define FT_SCHED_MAX_THREADS 64

typedef struct ft_sched_probe {
    int ok;       /* the calling thread's CPU clock can be read (else nothing is judged) */
    int n;        /* other threads of the process watched                            */
    int tid[FT_SCHED_MAX_THREADS];
    int fd[FT_SCHED_MAX_THREADS]; /* their /proc/self/task/TID/schedstat, kept open */
    int self_tid;
    long nlink; /* /proc/self/task's link count when the threads were listed (2 + threads) */
} ft_sched_probe;

typedef struct ft_sched_mark {
    double wall_s;                       /* CLOCK_MONOTONIC                      */
    double self_cpu_s;                   /* the calling thread's CPU time        */
    double delay_s[FT_SCHED_MAX_THREADS]; /* each watched thread's run-queue wait */
} ft_sched_mark;

/* Watch the calling thread and every other thread the process has now. */
void ft_sched_probe_open(ft_sched_probe *p);
/* List the threads again when the process has started or ended one since (cheap when not). */
void ft_sched_probe_refresh(ft_sched_probe *p);
void ft_sched_probe_close(ft_sched_probe *p);
/* Take a mark; from the thread that opened the probe. */
void ft_sched_mark_take(const ft_sched_probe *p, ft_sched_mark *m);
/* Seconds of the span between marks a and b that the call's threads lost (see above); 0 when
 * the probe could not read the clocks. */
double ft_sched_lost(const ft_sched_probe *p, const ft_sched_mark *a, const ft_sched_mark *b);
/* The longest run-queue wait any watched other thread has had since mark a, seconds: what an
 * OpenMP or BLAS worker lost while the calling thread went on (spinning at a barrier, its own
 * CPU clock running). From any thread, during the call; 0 without a probe. */
double ft_sched_delay_since(const ft_sched_probe *p, const ft_sched_mark *a);

#ifdef __cplusplus
}
#endif
#endif
