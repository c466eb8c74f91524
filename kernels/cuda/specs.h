/* specs.h: GPUs described by their datasheets, and the theoretical occupancy of a kernel on one.
 *
 * Static analysis needs no GPU: NVRTC and ptxas say how many registers, how much shared memory
 * and stack a kernel uses for an architecture (nvrtc.h); this table says what a named device has
 * (SMs, register file, shared memory, allocation units, the per-SM limits), so `flaretune
 * compile` can print the occupancy of every config on an H100 from a laptop, and the tuner can
 * prune the configs that spill or cannot launch before it spends time measuring them.
 *
 * Occupancy is computed as the CUDA occupancy calculator does (cuda_occupancy.h's
 * cudaOccMaxActiveBlocksPerMultiprocessor with the default carveout and opt-in shared memory):
 * the blocks per SM allowed by warp slots, by registers (allocated per warp in units of 256,
 * per SM sub-partition), by shared memory (a reserved 1 KiB per block on sm_80 and later,
 * rounded to the allocation unit) and by the block slots; the least of them wins.
 *
 * Pure C with no CUDA dependency: it builds and is tested in the CPU-only build too.
 */
#ifndef FT_CUDA_SPECS_H
#define FT_CUDA_SPECS_H

#include <stddef.h>

#include "runtime.h"
#include "cuda/device.h"
#include "core/status.h"

typedef struct ft_gpu_spec {
    const char *name;    /* short name for --device: "h100" (matched case-insensitively)   */
    const char *aliases; /* other accepted names, space-separated                          */
    const char *model;   /* "NVIDIA H100 SXM5 80GB"                                         */
    const char *arch;    /* NVRTC target: "sm_90a"                                           */
    int cc_major, cc_minor;
    int sm_count;
    int warp_size;
    int max_threads_per_block;
    int max_threads_per_sm;
    int max_blocks_per_sm;
    int regs_per_sm;
    int regs_per_block;      /* register-file limit of one block                           */
    int max_regs_per_thread; /* 255                                                         */
    int reg_alloc_unit;      /* registers are given to a warp in units of this many (256)   */
    int sub_partitions;      /* SM sub-partitions; each holds 1/n of the register file      */
    size_t smem_per_sm;          /* shared memory per SM at the largest carveout, bytes      */
    size_t smem_per_block;       /* per block without the opt-in attribute (48 KiB)          */
    size_t smem_per_block_optin; /* per block with it (static + dynamic)                     */
    size_t smem_alloc_unit;      /* a block's shared memory is rounded up to this            */
    size_t smem_reserved_per_block; /* taken by the driver per resident block (sm_80+: 1 KiB) */
    size_t l2_bytes;
    size_t mem_bytes;
    double mem_bw;     /* peak DRAM bandwidth, bytes/s                                       */
    double bf16_flops; /* dense bf16 tensor throughput with fp32 accumulation, FLOP/s        */
    /* For the time model (predict.h); a rate of 0 is unknown. */
    double sm_clock_hz;          /* boost SM clock                                          */
    int schedulers_per_sm;       /* warp schedulers, each issuing one warp instruction a clock */
    int fp32_lanes_per_sm;       /* FP32 FMA lanes ("CUDA cores"): a warp's FFMA takes 32 / (this
                                    / schedulers) clocks of its scheduler's FP32 pipe          */
    int converts_per_sm;         /* type conversions (F2I, I2F, F2F, ...) per clock per SM    */
    double l2_bw;                /* L2 bandwidth to the SMs, bytes/s                        */
    double smem_bytes_per_clock; /* shared-memory bandwidth of one SM (one wavefront a clock) */
    double lsu_per_clock;        /* memory instructions (shared, global, local) the SM's LSU
                                    takes a clock: 1, or 0.5 on GA10x and Ada (specs.h)       */
    double launch_s;             /* the fixed cost of one kernel launch (FT_GPU_LAUNCH_S)   */
} ft_gpu_spec;

/* What one kernel launch costs however little it does: the front end's processing of the
 * launch, the grid's start on the SMs and its drain at the end. Kernels that do almost nothing
 * take 2-3 us from one launch to the next on a stream on the datacenter GPUs of the table
 * (CUDA events around back-to-back empty kernels; CUPTI's records of such kernels are 1-2 us
 * shorter, the rest being the gap between them); 2.5 us is the middle of that range: a floor
 * under every prediction, not a fitted figure. */
#define FT_GPU_LAUNCH_S 2.5e-6
/* The L2's bandwidth per clock: the A100 whitepaper's L2 read bandwidth, 5120 bytes per clock
 * (2.3x the V100's 2048 at their clocks). NVIDIA prints no per-clock figure for Hopper, Ada or
 * Blackwell: the table applies this one at each device's boost clock, a rule (an upper bound
 * microbenchmarks do not reach), not a measurement; on a GPU the tuner measures its L2. */
#define FT_L2_BYTES_PER_CLOCK 5120.0
/* Type conversions (F2I, I2F, F2F, F2FP, FRND): 16 results per clock per SM, the CUDA C++
 * Programming Guide's throughput table ("Arithmetic Instructions", "all other type
 * conversions") for compute capability 8.0, 8.6, 8.9 and 9.0; Blackwell is taken to keep it. A
 * warp's conversion takes two clocks of the SM's whole rate: a loop that converts an index and
 * a loaded byte each iteration is bound by them before it is by issue. */
#define FT_CONVERTS_PER_CLOCK 16
/* Shared memory: 32 banks of 4 bytes, one wavefront (128 bytes) per clock per SM on every
 * architecture of the table (CUDA programming guide, "Shared Memory", compute capability 5.x
 * and later). */
#define FT_SMEM_BYTES_PER_CLOCK 128.0
/* The load/store unit's instructions per clock per SM (shared, global and local loads and
 * stores, atomics): 1 on the datacenter architectures (GV100, GA100, GH100), 0.5 on GA10x (RTX
 * A4000, A6000) and Ada: Nsight Compute's sm__inst_executed_pipe_lsu.avg.peak_sustained, as
 * NVIDIA's Nsight Compute team gives it (forums.developer.nvidia.com/t/261150: "The A4000
 * (GA104) based GPU has a sustained throughput of 0.5 LSU instructions/cycle and 1 LSU
 * wavefront/cycle ... CC 7.0 (GV100), CC 8.0 (GA100) and CC 9.0 (GH100) can sustain 1 LSU
 * instruction/cycle/SM"); the SM diagrams of the whitepapers agree (8 LD/ST units a
 * sub-partition on GA100, 4 on GA102). Blackwell's datacenter part (sm_100a) is taken to keep
 * GH100's. On GA10x a warp's LDS.32 thus takes two clocks of the LSU where its wavefront takes
 * one. */
#define FT_LSU_PER_CLOCK_DC    1.0
#define FT_LSU_PER_CLOCK_GA10X 0.5

/* The table: A100, H100, H200, L40S, RTX 4090, B200 (in that order). */
int ft_gpu_spec_count(void);
const ft_gpu_spec *ft_gpu_spec_at(int i);
/* By name, alias or model (the name the device reports: "NVIDIA RTX A4000", as in a Kernel
 * Tuner cache), case-insensitively ("h200", "H100", "rtx4090"); NULL when unknown. */
const ft_gpu_spec *ft_gpu_spec_find(const char *name);
/* The first device of the table whose architecture is `arch` ("sm_90a"; "sm_90" matches the
 * same devices); NULL when none. */
const ft_gpu_spec *ft_gpu_spec_for_arch(const char *arch);
/* The known names, comma-separated, for error messages. */
const char *ft_gpu_spec_names(void);
/* A spec for a device that is present: its own properties (SMs, register file, shared memory,
 * L2, memory, clock) with the architecture's allocation units, per-SM block limit and schedulers,
 * the L2 rule at its clock and the launch cost. FT_EUNSUPPORTED for compute capabilities before
 * 8.0. DRAM bandwidth and FLOP/s are 0 (unknown). */
ft_status ft_gpu_spec_from_props(const ft_dev_props *p, ft_gpu_spec *out, ft_err *err);
/* The other way: the properties a device of spec s reports (its model and architecture, SMs,
 * limits, L2, memory, boost clock); what no spec holds (bus width, memory clock, versions, ECC)
 * is 0. */
void ft_gpu_spec_props(const ft_gpu_spec *s, ft_dev_props *p);

/* ---- occupancy -------------------------------------------------------------------------------- */

/* What bounds the blocks per SM; a bit set of every resource at the minimum. */
enum {
    FT_OCC_WARPS = 1 << 0,  /* warp slots (threads per SM)        */
    FT_OCC_REGS = 1 << 1,   /* the register file                  */
    FT_OCC_SMEM = 1 << 2,   /* shared memory                      */
    FT_OCC_BLOCKS = 1 << 3, /* the per-SM block slots             */
};

typedef struct ft_occupancy {
    int blocks_per_sm; /* active blocks per SM (0: the block cannot launch)          */
    int warps_per_sm;  /* active warps per SM                                         */
    double fraction;   /* active warps / the SM's warp slots                          */
    unsigned limits;   /* FT_OCC_* bits of the resources at the minimum               */
    /* Blocks per SM each resource allows on its own (INT_MAX: no limit). */
    int by_warps, by_regs, by_smem, by_blocks;
    int regs_per_block;    /* registers allocated to one block                   */
    size_t smem_per_block; /* shared memory allocated to one block, with the reserve */
} ft_occupancy;

/* Theoretical occupancy of blocks of `threads_per_block` threads using `regs_per_thread`
 * registers and `smem_per_block` bytes of shared memory (static + dynamic, without the driver's
 * reserve, which is added here). FT_EINVAL for non-positive threads or negative registers. */
ft_status ft_cuda_occupancy(const ft_gpu_spec *s, int threads_per_block, int regs_per_thread,
                            size_t smem_per_block, ft_occupancy *out, ft_err *err);
/* The single most telling limit of o->limits, as a word: "warps", "registers",
 * "shared memory", "blocks" (ties are named in that order); "none" when empty. */
const char *ft_occ_limit_name(unsigned limits);

/* ---- pruning before timing ------------------------------------------------------------------ */

/* 1 when a kernel with resources `k` launched with `block_threads` threads and `dyn_smem`
 * bytes of dynamic shared memory can run on device `s` without spilling; otherwise 0 and one
 * line in why, e.g. "spills 24 bytes", "needs 240 KiB of shared memory, the device allows
 * 227 KiB per block", "0 blocks fit per SM: ...". */
int ft_cuda_check_kernel(const ft_gpu_spec *s, const ft_kernel_info *k, int block_threads,
                         size_t dyn_smem, char *why, size_t n);
/* The same for every kernel of a module spec; info[i] is the resources of m->kernels[i]. The
 * reason is prefixed with the kernel's name. */
int ft_cuda_check_module(const ft_gpu_spec *s, const ft_cuda_module_spec *m,
                         const ft_kernel_info *info, char *why, size_t n);

/* "227 KiB", "1.5 KiB", "512 B": a byte count for people (for the reasons above and tables). */
void ft_fmt_bytes_kib(size_t bytes, char *buf, size_t n);

#endif
