/* ft_test_cpus.h: pinning the calling thread to one CPU, as `taskset -c` pins a process, for
 * the tests of what counts the CPUs a process may use (test_env, test_api). Include it after
 * defining _GNU_SOURCE. */
#ifndef FLARETUNE_FT_TEST_CPUS_H
#define FLARETUNE_FT_TEST_CPUS_H

#include <sched.h>

/* Pins the calling thread to the first CPU of *all (restore it with sched_setaffinity(0,
 * sizeof *all, all)); that CPU, or -1 when it could not. */
static inline int ft_test_pin_first(const cpu_set_t *all) {
    int first = 0;
    while (first < CPU_SETSIZE && !CPU_ISSET(first, all))
        first++;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    return first < CPU_SETSIZE && sched_setaffinity(0, sizeof one, &one) == 0 ? first : -1;
}

#endif
