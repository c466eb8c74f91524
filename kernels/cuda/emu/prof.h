/* prof.h: what a launch does to memory, as the emulator sees it (the profile of emu.h).
 *
 * A profile module (compiled with -DFT_EMU_PROFILE and GCC's ThreadSanitizer instrumentation,
 * whose per-access hooks ft_emu.h defines) reports every load and store its threads make: the
 * instruction's address, the data's address and size. The emulator drops accesses to the thread's
 * own stack (registers and local arrays), tells shared memory from global, and hands the rest
 * here with the warp and lane that made them.
 *
 * A warp-level request is what one instruction of a warp asks for: the k-th time lanes of a warp
 * execute the access at one instruction address, those lanes' k-th accesses form one request
 * (threads that skip the instruction are inactive lanes of it). Requests never span a barrier.
 * For each request:
 *
 *   global  sectors: the distinct 32-byte sectors its lanes touch (4 when 32 lanes read
 *           consecutive floats from an aligned address, 32 when they read with a stride of 32
 *           floats); ideal: the distinct bytes touched, in whole sectors
 *   shared  wavefronts: the passes the 32 banks need: per phase (all lanes for accesses of up to
 *           4 bytes, half-warps for 8, quarter-warps for 16), the most distinct 4-byte words that
 *           fall in one bank; ideal: one per phase that has active lanes
 *
 * and per launch the distinct sectors read and written (the traffic DRAM must at least carry:
 * what the kernel would move with a perfect cache), barriers, warp collectives by class, and
 * per instruction address ("site") the same figures, to be named with their source line.
 */
#ifndef FT_EMU_PROF_H
#define FT_EMU_PROF_H

#include <stddef.h>
#include <stdint.h>

#include "ft_emu_abi.h"

typedef enum ft_emu_acc {
    FT_EMU_GLD,   /* global loads               */
    FT_EMU_GST,   /* global stores              */
    FT_EMU_GATOM, /* global atomics             */
    FT_EMU_SLD,   /* shared loads (ldmatrix too) */
    FT_EMU_SST,   /* shared stores (cp.async's destination too) */
    FT_EMU_NACC
} ft_emu_acc;

/* "global load", "global store", "global atomic", "shared load", "shared store". */
const char *ft_emu_acc_name(ft_emu_acc k);

typedef struct ft_emu_traffic {
    uint64_t requests; /* warp-level requests                                     */
    uint64_t lanes;    /* active lanes, summed over requests                       */
    uint64_t partial;  /* requests some existing lane of the warp did not take part in */
    uint64_t units;    /* sectors (global) or wavefronts (shared)                   */
    uint64_t ideal;    /* the least units those requests could have needed          */
    uint64_t bytes;    /* bytes the lanes asked for                                 */
    uint64_t lines;    /* global: distinct 128-byte lines, the L1's data wavefronts */
} ft_emu_traffic;

typedef struct ft_emu_site {
    uintptr_t pc; /* the instruction's address (absolute while profiling; the
                   * device makes it module-relative)                        */
    ft_emu_acc kind;
    unsigned flags; /* FT_EMU_ACCESS_* seen here (ASYNC: cp.async, MATRIX: ldmatrix) */
    unsigned size;  /* bytes per lane (the largest seen)                       */
    ft_emu_traffic t;
    char where[160]; /* "fusion/fusion.cu:123 (dflare_fwd)" once symbolized, else "" */
} ft_emu_site;

enum {
    FT_EMU_COLL_MMA,
    FT_EMU_COLL_LDMATRIX,
    FT_EMU_COLL_SHUFFLE,
    FT_EMU_COLL_VOTE,
    FT_EMU_COLL_OTHER,
    FT_EMU_NCOLL
};
/* "mma", "ldmatrix", "shuffle", "vote", "other". */
const char *ft_emu_coll_class_name(int c);

typedef struct ft_emu_launch_prof {
    char kernel[96];
    ft_emu_uint3 grid, block;
    uint64_t blocks, warps;
    ft_emu_traffic t[FT_EMU_NACC];
    uint64_t unique_read_bytes;  /* distinct sectors read (loads, atomics) x 32    */
    uint64_t unique_write_bytes; /* distinct sectors written (stores, atomics) x 32 */
    uint64_t cp_async;           /* cp.async warp requests                          */
    uint64_t barriers;           /* block-wide barriers completed, all blocks       */
    uint64_t coll[FT_EMU_NCOLL]; /* warp collectives completed, by class            */
    int nsites;
    ft_emu_site *sites; /* by kind, then by units, most first (malloc'd)            */
} ft_emu_launch_prof;

void ft_emu_launch_prof_free(ft_emu_launch_prof *p);

/* ---- a sample of a grid ------------------------------------------------------------------------
 * A large launch is profiled on a sample of its blocks in two strata: the boundary (a block on
 * an edge of the x-y grid: x first or last, or, with more than one row, y first or last; taken
 * at even steps along a walk round the edges) and the interior (a Latin hypercube: even steps
 * along x and along y, paired by a permutation drawn from `seed`), each stratum's blocks spread
 * over the z planes, the planes dealt by a permutation (a plane may be another request, of
 * another length, and should not rise with x). Each stratum's figures are then scaled by the
 * blocks it stands for, so each of its blocks should stand for as many as any other: work that
 * changes along x or y is then sampled along it evenly. */

/* The grid's interior blocks in one z plane. */
uint64_t ft_emu_grid_interior(ft_emu_uint3 grid);
/* Up to `want` (<= 64) sampled blocks: *nb boundary ones in bnd, *ni interior ones in inner
 * (half each where the grid has an interior; the interior takes the places a short boundary,
 * such as a row's two ends, leaves; a grid with no interior, one or two columns or two rows,
 * takes its whole sample from the boundary; where the hypercube gives a place twice, more
 * places wanted than the interior has columns or rows, the rest are drawn from `seed`). */
void ft_emu_sample_pick(ft_emu_uint3 grid, int want, uint64_t seed, ft_emu_uint3 *bnd, int *nb,
                        ft_emu_uint3 *inner, int *ni);
/* acc += p's counts times f (sites are not scaled: they stay the sample's). */
void ft_emu_launch_prof_add_scaled(ft_emu_launch_prof *acc, const ft_emu_launch_prof *p, double f);

/* ---- collecting (the emulator's runtime) ------------------------------------------------------
 */

typedef struct ft_emu_prof ft_emu_prof;

ft_emu_prof *ft_emu_prof_new(void);
void ft_emu_prof_free(ft_emu_prof *p);
/* Start a launch's record; blocks of `nwarps` warps, `exist[w]` the lanes of warp w. */
int ft_emu_prof_begin(ft_emu_prof *p, const char *kernel, ft_emu_uint3 grid, ft_emu_uint3 block);
/* A block starts (exist: the lanes of each of its warps). */
void ft_emu_prof_block(ft_emu_prof *p, const unsigned *exist, unsigned nwarps);
/* One lane's access. Returns -1 when out of memory (the record is then marked incomplete). */
int ft_emu_prof_access(ft_emu_prof *p, unsigned warp, unsigned lane, uintptr_t pc, uintptr_t addr,
                       unsigned size, ft_emu_acc kind, unsigned flags);
/* Every thread of the block passed a barrier (or the block ended): requests close here. */
void ft_emu_prof_sync(ft_emu_prof *p, int barrier);
/* A warp collective completed (coll_name: its ft_emu_coll name). */
void ft_emu_prof_collective(ft_emu_prof *p, const char *coll_name);
/* Close the launch's record into *out (sites sorted; out owns them). Returns -1 when the
 * record is incomplete (memory ran out while collecting). */
int ft_emu_prof_end(ft_emu_prof *p, ft_emu_launch_prof *out);

/* A piece of device memory (an allocation), for ft_emu_prof_extents. */
typedef struct ft_emu_extent {
    uintptr_t start;
    size_t bytes;
} ft_emu_extent;
/* After ft_emu_prof_end, before the next begin: adds to sectors[i] the distinct sectors the
 * launch read (written = 0) or wrote (written = 1) in each extent of ext (n, sorted by start,
 * not overlapping), and returns the bytes of those that lie in none. A sample's distinct bytes
 * scaled to the grid count what blocks share once per block (K and V, which every query tile
 * of attention reads); no extent can give more than its size. */
uint64_t ft_emu_prof_extents(const ft_emu_prof *p, int written, const ft_emu_extent *ext, int n,
                             uint64_t *sectors);

/* ---- the figures of one request (exposed for tests) ------------------------------------------ */

/* Sectors and ideal sectors of a global request: n lanes' addresses, each `size` bytes. */
void ft_emu_sectors(const uintptr_t *addr, int n, unsigned size, uint64_t *sectors,
                    uint64_t *ideal);
/* The distinct 128-byte lines a global request touches: the wavefronts its data takes through
 * the L1 (a wavefront moves up to the 4 sectors of one line). */
uint64_t ft_emu_lines(const uintptr_t *addr, int n, unsigned size);
/* Wavefronts and ideal wavefronts of a shared request: lane[i] in 0..31 made access i. */
void ft_emu_wavefronts(const uintptr_t *addr, const unsigned *lane, int n, unsigned size,
                       uint64_t *wavefronts, uint64_t *ideal);

#endif
