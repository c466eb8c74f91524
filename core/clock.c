/* clock.c: the host clock (see core/clock.h). */
#include "core/clock.h"

#include <time.h>

int64_t ft_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double ft_now_s(void) { return (double)ft_now_ns() * 1e-9; }
