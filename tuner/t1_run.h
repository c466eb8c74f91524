/* t1_run.h: a T1 kernel's arguments on a device, and its time on a GPU predicted without one.
 *
 * ft_t1_bench_open allocates the file's arguments on a device (the emulator, or a GPU) and fills
 * them once from a seed: "Random" is uniform in [0, FillValue) (FillValue <= 0: [0, 1)) and
 * never all zero; "Constant" is FillValue everywhere. An argument in constant memory is also
 * written to the kernel's __constant__ symbol of that name before every launch, as Kernel Tuner
 * does; where the kernel has no such symbol it is passed as an argument only, and said so.
 *
 * ft_t1_predict compiles one configuration for the GPU's architecture (NVRTC: registers,
 * occupancy, the SASS instruction mix) and for the emulator with its profile on, runs a sample
 * of the grid's blocks there (boundary blocks: the corners and edge middles; interior blocks:
 * drawn from the seed), scales each stratum's traffic by the blocks it stands for, and gives the
 * time model of kernels/cuda/analysis/predict.h its inputs. DRAM bytes are the scaled distinct bytes,
 * at most the bytes of the arguments it may read plus those it may write (AccessType; a block's
 * halo re-read by its neighbours is one DRAM transfer when L2 keeps it). Built with the CUDA toolkit only for the
 * NVRTC part: without it the resources and SASS are unknown and the prediction says so.
 */
#ifndef FT_T1_RUN_H
#define FT_T1_RUN_H

#include <stdint.h>

#include "cuda/analysis/kfacts.h"
#include "cuda/analysis/predict.h"
#include "cuda/specs.h"
#include "cuda/device.h"
#include "tuner/t1.h"

typedef struct ft_t1_bench ft_t1_bench;

ft_status ft_t1_bench_open(const ft_t1 *t, ft_dev *d, uint64_t seed, ft_t1_bench **out,
                           ft_err *err);
void ft_t1_bench_close(ft_t1_bench *b);
/* A line of what was noticed while setting up (a constant argument without its symbol), or "". */
const char *ft_t1_bench_note(const ft_t1_bench *b);
/* Argument i's device memory (a vector), and what a launch passes (cuLaunchKernel's args). */
void *ft_t1_bench_arg(const ft_t1_bench *b, int i);
/* Argument i's first fill on the host (a vector). */
const void *ft_t1_bench_host(const ft_t1_bench *b, int i);
void **ft_t1_bench_argv(ft_t1_bench *b);
/* Compile cfg for b's device (the file as written, the values as macros) and write the
 * constant-memory arguments to their symbols. */
ft_status ft_t1_bench_compile(ft_t1_bench *b, const ft_config *cfg, ft_dev_module **m, ft_err *err);
#if FT_HAVE_CUDA
#include "cuda/nvrtc.h"
/* cfg compiled by NVRTC for arch (the file as written, its values as macros, the kernel found
 * by its name as written); free res with ft_nvrtc_result_free. */
ft_status ft_t1_nvrtc_compile(const ft_t1 *t, const ft_config *cfg, const char *arch,
                              ft_nvrtc_result *res, ft_err *err);
#endif
/* Up to `want` blocks of grid g (at most max): both strata of ft_t1_predict's sample, boundary
 * first; every block of a grid of at most `want`. Returns how many. */
int ft_t1_sample_blocks(const long long g[3], int want, ft_dim3 *out, int max);

typedef struct ft_t1_prediction {
    ft_prediction pred;  /* the time model's answer                                        */
    ft_predict_in in;    /* its inputs, at the whole grid                                  */
    long long grid[3], block[3];
    long long blocks;    /* in the grid                                                    */
    int sampled_boundary, sampled_interior; /* blocks emulated in each stratum            */
    int regs, spills;    /* ptxas's, for the GPU's architecture (0: unknown)               */
    int has_sass;
    char unfit[256];     /* why it cannot run on that GPU ("" when it can): not an error   */
    char nvrtc_error[256]; /* NVRTC's refusal, when it refused (resources then unknown)   */
    double emulate_s, compile_s; /* the host's time for each part                          */
} ft_t1_prediction;

/* What a prediction of t's configurations reads besides the configuration and the GPU, as a
 * digest (32 hex digits; out holds 33): the T1 file's text (geometry, shared memory, options,
 * arguments as written), the kernel's name, its source and the files that includes with quotes
 * (beside it, in the dialect's folder, in -I folders), each argument's type, size and fill as
 * used (--arg may change them), and whether this build reads SASS (its NVRTC). A predicted
 * landscape holds it in every line, so predictions of one source are never taken for another's.
 * FT_EIO when the source cannot be read. */
ft_status ft_t1_source_digest(const ft_t1 *t, char *out, ft_err *err);

/* Predict cfg on GPU g with nsample blocks emulated (2 to 64; half boundary, half interior where
 * the grid has both; a grid of at most nsample blocks in one plane is emulated whole). b's
 * device must be the emulator. */
ft_status ft_t1_predict(ft_t1_bench *b, const ft_config *cfg, const ft_gpu_spec *g, int nsample,
                        ft_t1_prediction *out, ft_err *err);

#endif
