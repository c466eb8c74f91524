/* ceilings.h: this machine's own ceilings, measured in the same run as the kernels they judge.
 *
 * A roofline fraction is only honest against what this machine does right now, not a
 * datasheet: the streaming-copy bandwidth (bytes read + bytes written per second, as STREAM
 * counts them) over buffers far larger than the last-level cache, and the FLOP rate of a large
 * single-precision GEMM from the BLAS the kernels use.
 */
#ifndef FLARETUNE_CEILINGS_H
#define FLARETUNE_CEILINGS_H

#include "flaretune/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ft_ceilings {
    double bw;         /* bytes per second, streaming copy                  */
    double flops;      /* FLOP per second, sgemm                            */
    double copy_bytes; /* size of each copy buffer                          */
    int gemm_n;        /* the GEMM was gemm_n^3                              */
    int threads;       /* threads used for both                             */
    double measured_s; /* time the measurement took                         */
    const char *gemm;  /* what the FLOP ceiling measured ("sgemm", "cuBLASLt bf16") */
} ft_ceilings;

struct ft_backend;
/* The ceilings of the machine a backend runs on: its own measurement when it has one (a GPU:
 * device-to-device copy and a cuBLASLt bf16 GEMM), else the CPU's with `threads` threads. */
ft_status ft_ceilings_of(const struct ft_backend *be, int threads, ft_ceilings *c, ft_err *err);

/* Measure both ceilings with `threads` threads (about a second). */
ft_status ft_ceilings_cpu(int threads, ft_ceilings *c, ft_err *err);

/* The roofline floor of a call moving `bytes` and doing `flops`: max(bytes/bw, flops/rate). */
double ft_roofline_s(const ft_ceilings *c, double bytes, double flops);

/* Last-level cache size in bytes (0 if unknown). */
long ft_llc_bytes(void);

#ifdef __cplusplus
}
#endif
#endif
