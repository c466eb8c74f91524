/* kfacts.h: what is known of a configuration's kernels on a named GPU without running them, and
 * the time model's inputs built from it.
 *
 * For each kernel a configuration launches (its module specs, runtime.h): ptxas's resources
 * for the GPU's architecture (NVRTC, through its disk cache), the occupancy they allow there
 * (specs.h), and the SASS instruction mix of its CUBIN (sass.h) when a disassembler is at hand.
 *
 * Two ways to feed predict.h from them:
 *   ft_kfacts_issue                      SASS and the emulator: the code in no loop once per
 *                                        warp that reaches it (the share of its memory
 *                                        instructions the emulator saw issued), the loops by
 *                                        the requests past the straight line's: the hot loop's
 *                                        instructions by the global bytes its kinds of access
 *                                        moved (its instructions per byte a thread moves, over
 *                                        the lanes its requests had active: a warp of 20 live
 *                                        threads issues every instruction as one of 32 does),
 *                                        or, when it moves no global data, by its kinds'
 *                                        requests (its instructions per memory
 *                                        instruction); requests of kinds the hot loop lacks
 *                                        weigh the other loops' instructions per memory
 *                                        instruction (a kernel that stages with cp.async and
 *                                        computes from shared memory: its staging does not
 *                                        take its compute loop's ratio); in all and by class
 *   ft_kfacts_instructions_per_byte      SASS: instructions per byte one thread's global loads
 *                                        and stores move in the hot loop; times the napkin
 *                                        bytes over 32 lanes, a static estimate of the same
 *                                        (no emulator run)
 * and ft_predict_in_of_record turns one launch the emulator profiled (device_emu.h) into the
 * model's inputs: distinct bytes (DRAM), sectors requested (L2), wavefronts (shared), each
 * scaled by the share of the kind's requests the SASS issues (a load the compiler keeps in a
 * register is not issued again), ft_kfacts_issue's warp instructions (issue) and their FP32
 * ones (fp32), mma.sync count x 4096 FLOPs (tensor), its grid, the occupancy;
 * a GEMM's record: its operand bytes, its FLOPs on the tensor cores (bf16) or as FP32 FMAs.
 */
#ifndef FT_CUDA_KFACTS_H
#define FT_CUDA_KFACTS_H

#include "cuda/runtime.h"
#include "cuda/device_emu.h"
#include "predict.h"
#include "sass.h"
#include "cuda/specs.h"

#define FT_KFACTS_MAX 16

typedef struct ft_kfacts {
    char name[96];
    int block_threads;
    size_t dyn_smem;
    ft_kernel_info info; /* ptxas's report for the GPU's architecture (zeros: not known)   */
    ft_occupancy occ;    /* on the GPU (blocks_per_sm 0: not known)                        */
    int has_sass;
    ft_sass_kernel sass;
} ft_kfacts;

typedef struct ft_kfacts_set {
    int n;
    ft_kfacts k[FT_KFACTS_MAX];
    char sass_why[160]; /* why no kernel has a SASS mix ("" when some has)           */
    char unfit[256];    /* why a kernel cannot run on the GPU ("" when all can)       */
} ft_kfacts_set;

/* The facts of cfg's kernels for call c on GPU g (want_sass: read the SASS too). Without the CUDA
 * toolkit nothing is compiled: the set lists the kernels with unknown resources. A kernel that
 * cannot run on g (spills, too much shared memory) is said in set->unfit, not an error. */
ft_status ft_kfacts_of(const ft_call *c, const ft_config *cfg, const ft_gpu_spec *g, int want_sass,
                       ft_kfacts_set *set, ft_err *err);

/* The kernel of that name in the set; NULL when absent. */
const ft_kfacts *ft_kfacts_find(const ft_kfacts_set *set, const char *name);

/* Warp instructions per memory instruction (global, shared, ldmatrix, cp.async, atomics) of the
 * kernel's hot loop, else of its whole body; 0 when it has no SASS or no memory instruction. */
double ft_kfacts_instructions_per_request(const ft_kfacts *k);
/* Instructions per byte of one thread's global traffic, in the hot loop (else the body); 0 when
 * unknown. */
double ft_kfacts_instructions_per_byte(const ft_kfacts *k);
/* The warp instructions a launch of `warps` warps with this traffic and `mma` mma.sync issues
 * (see above); without SASS, one a request (a floor). kept (may be NULL): for each kind of
 * access, the share of the emulator's requests the SASS issues (1 but where the compiler kept
 * values in registers: a kind found in no loop issues its straight-line count once per warp).
 * by_class (may be NULL): the same warp instructions by SASS class. */
double ft_kfacts_issue(const ft_kfacts *k, const ft_emu_traffic t[FT_EMU_NACC], uint64_t mma,
                       double warps, double kept[FT_EMU_NACC], double by_class[FT_SASS_NCLASS]);

/* The model's inputs for one profiled launch (k: its facts, or NULL: no SASS, full occupancy). */
ft_predict_in ft_predict_in_of_record(const ft_dev_emu_launch_record *r, const ft_kfacts *k);

#endif
