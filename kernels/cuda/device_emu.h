/* device_emu.h: settings of the emulator device (FT_DEV_EMU) beyond kernels/cuda/device.h.
 *
 * Each has an environment variable read when the device opens; these functions override it for
 * one device (tests, tools). All fail with FT_EINVAL on a device of another kind.
 *
 *   FLARETUNE_EMU_SEED=N      threads of a block run in a random order drawn from seed N (per
 *                             block, reproducible); unset or 0: in linear order
 *   FLARETUNE_EMU_THREADS=N   run blocks on N OS threads (default 1: one after another)
 *   FLARETUNE_EMU_FIBERS=ucontext   switch fibers with ucontext instead of the x86-64 switch
 *   FLARETUNE_EMU_DEBUG=1     compile kernels with -O0 -g (for gdb); default -O2
 *   FLARETUNE_EMU_CXX=PATH    the C++ compiler (default: the one CMake found)
 *   FLARETUNE_KERNEL_DIR=DIR  the kernels/ folder sources are named from ("fusion/fusion.cu";
 * default: the source tree's) FLARETUNE_CACHE_DIR=DIR   the module cache (default
 * ~/.cache/flaretune); modules go in DIR/emu FLARETUNE_EMU_PROFILE=1   profile every launch
 * (ft_dev_emu_set_profile) FLARETUNE_EMU_SAMPLE=N   profile a launch of more blocks on a sample
 * of N (ft_dev_emu_set_sample)
 */
#ifndef FT_DEVICE_EMU_H
#define FT_DEVICE_EMU_H

#include "cuda/device.h"

#include "emu/prof.h"

/* Launch only `blocks` (nblocks of them) of the grid: each runs as in the whole launch
 * (blockIdx, gridDim), the others not at all, so a kernel's work at full size can be checked or
 * profiled on a sample (an interior block, the edges). The profile, when on, counts these
 * blocks alone. A block outside the grid is FT_EINVAL. */
ft_status ft_dev_emu_launch_blocks(ft_dev *d, ft_dev_module *m, const char *kernel, ft_dim3 grid,
                                   ft_dim3 block, size_t smem, void **args, const ft_dim3 *blocks,
                                   int nblocks, ft_err *err);

ft_status ft_dev_emu_set_seed(ft_dev *d, unsigned long long seed, ft_err *err);
ft_status ft_dev_emu_set_workers(ft_dev *d, int workers, ft_err *err);
ft_status ft_dev_emu_set_ucontext(ft_dev *d, int on, ft_err *err);

/* What the device did so far: modules built by the compiler (for ft_dev_compile or
 * ft_dev_prepare), and those ft_dev_compile loaded from the disk cache or found in the device's
 * memory. */
typedef struct ft_dev_emu_stats {
    int compiled, disk_hits, memory_hits;
} ft_dev_emu_stats;
ft_status ft_dev_emu_stats_of(const ft_dev *d, ft_dev_emu_stats *out, ft_err *err);

/* The profile (emu/prof.h): when on, modules compiled from then on are profile modules (their
 * own build: ThreadSanitizer's instrumentation with ft_emu.h's hooks, -g, other cache keys),
 * and every launch of one is recorded: its warps' requests, sectors, wavefronts, unique bytes,
 * barriers and collectives, per launch and per source line. Blocks then run on one thread in
 * linear order. Off, nothing of it runs: the modules and launches are the usual ones. */
ft_status ft_dev_emu_set_profile(ft_dev *d, int on, ft_err *err);
/* While profiling, a launch of more than `blocks` blocks runs only a sample of that many (the
 * strata of emu/prof.h: boundary and interior blocks), and its record is the sample's figures
 * scaled to the grid (its `sampled` says how many ran; its source lines are the sample's own).
 * Its outputs are then incomplete: for what a launch moves, not for what it computes. 0 (the
 * default): every block. FLARETUNE_EMU_SAMPLE=N sets it when the device opens. */
ft_status ft_dev_emu_set_sample(ft_dev *d, int blocks, ft_err *err);
/* The sample's blocks while the profile is on with one (ft_dev_emu_set_sample); 0 when it is
 * off, samples nothing, or d is not the emulator. */
int ft_dev_emu_sampling(ft_dev *d);

typedef struct ft_dev_emu_launch_record {
    ft_emu_launch_prof p; /* sites' pc relative to the module, `where` filled when it can be */
    char source[64];      /* the module's source, "fusion/fusion.cu"                        */
    char module[1100];    /* the module file in the cache (its debug info names the lines)   */
    int incomplete;       /* memory ran out while collecting: the figures are a lower bound */
    int sampled;          /* blocks emulated when the launch was profiled on a sample (its
                             figures are the strata's, scaled to the grid); 0: every block  */
    int sampled_edge;     /* of those, the blocks on the grid's edge (the other stratum: the
                             interior's)                                                     */
    /* A GEMM the op asked of cuBLASLt (the emulator computes it on the host: no kernel of ours,
     * no accesses recorded): its FLOPs, the bytes of its operands, and its operands' type
     * (1: bf16 on the tensor cores; 0: f32, fp32 compute on the CUDA cores). 0 FLOPs: a kernel. */
    double gemm_flops, gemm_bytes;
    int gemm_bf16;
} ft_dev_emu_launch_record;

/* The launches recorded since profiling began or the last take, in order; the caller frees them
 * with ft_dev_emu_records_free. Source lines are looked up (addr2line) here. */
ft_status ft_dev_emu_profile_take(ft_dev *d, ft_dev_emu_launch_record **out, int *n, ft_err *err);
void ft_dev_emu_records_free(ft_dev_emu_launch_record *r, int n);
/* While profiling: record a GEMM (p.kernel = what) in launch order; nothing when not profiling. */
void ft_dev_emu_profile_gemm(ft_dev *d, const char *what, double flops, double bytes, int bf16);

#endif
