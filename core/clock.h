/* clock.h: the host clock (CLOCK_MONOTONIC), used to time CPU kernels and whole runs. */
#ifndef FLARETUNE_CLOCK_H
#define FLARETUNE_CLOCK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Monotonic time in nanoseconds. */
int64_t ft_now_ns(void);
/* Monotonic time in seconds. */
double ft_now_s(void);

#ifdef __cplusplus
}
#endif
#endif
