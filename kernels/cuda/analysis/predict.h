/* predict.h: how long a kernel would take on a named GPU, from figures known without one.
 *
 * A launch is described by what it moves and issues: the bytes it brings from DRAM, the bytes
 * its requests move between the SMs and L2 (whole 32-byte sectors), shared-memory wavefronts,
 * warp instructions issued, and tensor-core FLOPs; with its geometry and occupancy on the device
 * (specs.h). Those figures come from the emulator's profile (emu/emu.h: sectors, unique bytes,
 * requests), the SASS instruction mix (sass.h: instructions per memory instruction), ptxas's
 * resources (occupancy), or the op's napkin math where nothing better is known.
 *
 * The time is the largest of the limits, each a closed form over the device's datasheet
 * figures (specs.h):
 *
 *   dram    = dram_bytes / mem_bw
 *   l2      = l2_bytes / l2_bw
 *   shared  = wavefronts / (SMs used x 1 per clock x clock)
 *   l1      = (shared wavefronts + global wavefronts) / (SMs used x 1 per clock x clock): the
 *             L1 and shared memory are one array with one data stage, through which a global
 *             request takes a wavefront for each 128-byte line it touches; or, when longer, the
 *             LSU's instructions / (SMs used x LSU instructions per clock x clock), which on
 *             GA10x and Ada take half a clock's rate (specs.h)
 *   issue   = warp instructions / (SMs used x schedulers x clock x latency hiding)
 *   fp32    = FP32 warp instructions x 32 / (SMs used x FP32 lanes per SM x clock x hiding)
 *   convert = conversion warp instructions x 32 / (SMs used x conversions per SM x clock)
 *   tensor  = mma FLOPs / (bf16_flops x SMs used / SMs)
 *   launch  = a fixed cost per launch
 *
 * where "SMs used" is min(SMs, blocks) (a grid smaller than the device leaves SMs idle) and the
 * latency hiding is the fraction of a scheduler's issue slots that its resident warps can fill
 * (min(1, warps per scheduler / FT_PREDICT_WARPS_TO_HIDE)). The bound is the limit that gave
 * the time (a tie goes to the launch, then to the limit listed first). Pure C; built everywhere.
 *
 * Resident warps per SM are the kernel's occupancy (warps_per_sm), or fewer when the grid has
 * fewer blocks than that per SM: ceil(blocks / SMs used) x the warps of a block (block_threads
 * given). Unknown inputs: blocks <= 0 is a grid that fills the device, warps_per_sm <= 0 full
 * occupancy, a device rate of 0 (specs.h: unknown) leaves its limit at 0; negative or NaN
 * figures count as 0, so every result is finite.
 */
#ifndef FT_CUDA_PREDICT_H
#define FT_CUDA_PREDICT_H

#include "cuda/specs.h"

/* Warps a scheduler needs to issue every clock: the dependent-issue latency of an FFMA is 4
 * clocks from Volta on (Jia et al., "Dissecting the NVIDIA Volta GPU Architecture via
 * Microbenchmarking", 2018; the same on Ampere and Hopper), so four warps with no
 * instruction-level parallelism keep a scheduler busy; fewer leave issue slots empty in
 * proportion. (Memory latency needs more warps or more bytes in flight per warp: the dram and
 * l2 limits assume the kernel has them.) */
#define FT_PREDICT_WARPS_TO_HIDE 4

/* The model's version, written with every saved prediction (`inspect --t1 --jsonl`) so that a
 * rerun predicts again what an earlier model predicted: raised whenever the model, the
 * emulator's profile or the reading of SASS changes what a prediction comes to.
 * 2: reads of __constant__ variables are no global traffic.
 * 3: a sample of a launch's blocks spreads over its z planes (a grid of one plane, as both T1
 *    files' are, predicts as in 2).
 * 4: a sample's distinct bytes are each allocation's scaled figure, at most its size (the
 *    convolution's DRAM bytes lose its 900-byte filter, read as __constant__; no prediction of
 *    the check's cache changed: none is DRAM-bound).
 * 5: a sample's boundary blocks are taken at even steps round the grid's edges, its interior
 *    ones as a Latin hypercube, and the planes are dealt to them by a permutation (before: the
 *    corners, then the edges' middles, and independent draws, planes in the blocks' order).
 * 6: the l1 limit is also the LSU's instructions at its rate: half a clock's on GA10x and Ada,
 *    so a warp's conflict-free shared load takes two clocks there (specs.h). */
#define FT_PREDICT_MODEL 6

typedef enum ft_bound {
    FT_BOUND_DRAM,
    FT_BOUND_L2,
    FT_BOUND_SHARED,
    FT_BOUND_L1,
    FT_BOUND_ISSUE,
    FT_BOUND_FP32,
    FT_BOUND_CONVERT,
    FT_BOUND_TENSOR,
    FT_BOUND_LAUNCH,
    FT_BOUND_N
} ft_bound;

/* "dram", "l2", "shared", "l1", "issue", "fp32", "convert", "tensor", "launch". */
const char *ft_bound_name(ft_bound b);

typedef struct ft_predict_in {
    double dram_bytes;        /* bytes read from and written to DRAM (unique sectors x 32)  */
    double l2_bytes;          /* bytes of sectors requested by the SMs (0: dram_bytes)       */
    double shared_wavefronts; /* shared-memory wavefronts, all warps                         */
    double global_wavefronts; /* the L1 wavefronts of global requests (128-byte lines each)  */
    double warp_instructions; /* warp instructions issued, all warps                         */
    double fp32_instructions; /* of which FP32 (FFMA, FADD, FMUL, ...): the FP32 pipe's      */
    double convert_instructions; /* of which type conversions (F2I, I2F, F2F, F2FP, FRND) */
    double lsu_instructions;     /* of which the LSU's: shared, global and local loads and
                                    stores, cp.async, ldmatrix, atomics                          */
    double mma_flops;         /* tensor-core FLOPs                                           */
    double blocks;            /* blocks in the grid                                          */
    int block_threads;
    int warps_per_sm; /* resident warps per SM at the kernel's occupancy (specs.h)   */
} ft_predict_in;

typedef struct ft_prediction {
    double seconds;           /* the largest limit                  */
    double limit[FT_BOUND_N]; /* each limit in seconds               */
    ft_bound bound;           /* which one gave `seconds`            */
} ft_prediction;

ft_prediction ft_predict(const ft_gpu_spec *g, const ft_predict_in *in);

/* A sequence of launches: the sum of their times, bound by the launch that took longest. */
ft_prediction ft_predict_sum(const ft_prediction *p, int n);

#endif
