/* emu.h: the SIMT emulator's runtime: fibers and the block scheduler (used by device_emu.c).
 *
 * A launch runs the grid's blocks one after another on the calling thread, or on a few OS worker
 * threads that take blocks in turn. Each worker owns a pool: one fiber per CUDA thread of the
 * block (stack regions reused from block to block and launch to launch), the block's dynamic
 * shared memory, and its copy of the module's static shared memory (the module's thread-local
 * storage block on that worker). The threads of a block run cooperatively: a fiber runs until it
 * waits at a barrier or a warp collective, yields, or exits, and hands over to the next runnable
 * fiber directly (a context switch of the callee-saved registers and the stack pointer on x86-64;
 * ucontext elsewhere or on request). The order is the threads' linear order, or a seeded random
 * order. When no fiber can run and not all have exited, the block is stuck: the runtime finds why
 * (a thread exited or waits elsewhere) and fails the launch with a message naming the kernel, the
 * block, the threads and the source lines, instead of hanging.
 */
#ifndef FT_EMU_RUNTIME_H
#define FT_EMU_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#include "ft_emu_abi.h"
#include "prof.h"

#define FT_EMU_MAX_WORKERS 64

typedef struct ft_emu_pool ft_emu_pool;

typedef struct ft_emu_launch {
    const char *kernel; /* for messages */
    ft_emu_invoke_fn invoke;
    void **args;
    ft_emu_uint3 grid, block;
    size_t dyn_smem;         /* bytes of dynamic shared memory per block */
    size_t tls_modid;        /* the module's TLS module id (0: no static shared memory) */
    size_t tls_size;         /* its static shared memory in bytes */
    unsigned long long seed; /* 0: threads in linear order; else a seeded random order */
    int workers;             /* OS threads (1: blocks run on the calling thread) */
    int ucontext;            /* 1: switch fibers with ucontext even where the fast switch exists */
    /* The profile (NULL: none): a profile module's accesses are collected into it, and `live`,
     * the module's switch for its access hooks, is 1 while its threads run. Blocks then run on
     * the calling thread, one after another, threads in linear order. */
    ft_emu_prof *prof;
    int *live;
    /* A sampled launch: only these blocks of the grid run (blockIdx and gridDim as in the whole
     * launch), in this order; NULL: every block. Each lies inside the grid. */
    const ft_emu_uint3 *only;
    unsigned long long nonly;
    /* The module's __constant__ variables the host writes (NULL: none): the profile counts no
     * global traffic for reads of them (a GPU serves them from its constant cache, or as
     * operands of the instructions that use them, which the SASS counts). */
    const ft_emu_symbol *consts;
    int nconsts;
} ft_emu_launch;

/* Run a launch. pools[0..FT_EMU_MAX_WORKERS) hold the workers' pools (created as needed, kept for
 * the next launch). A kernel fault (stuck barrier or collective, a misused collective, __trap,
 * a write past the dynamic shared memory) is FT_EINTERNAL with the message in err. */
ft_status ft_emu_run(ft_emu_pool **pools, const ft_emu_launch *l, ft_err *err);
void ft_emu_pool_free(ft_emu_pool *p);

/* Whether the address a is in the guard page under an emulated thread's stack, where a kernel
 * whose frames outgrow the stack (FT_EMU_STACK_BYTES a thread, less two pages) faults: its
 * frames are probed page by page as they grow (the modules are built with
 * -fstack-clash-protection), so a large local array cannot step over the guard. Async-signal-safe:
 * for a fault handler (emu_guard.c), which runs on an alternate stack while a launch's blocks run
 * (the fiber's own is the one that overflowed). */
int ft_emu_stack_overflow(uintptr_t a);

/* The kernel whose blocks the calling thread runs, NULL outside a launch. Async-signal-safe: a
 * fault handler names the kernel that faulted even while other threads run other launches. */
const char *ft_emu_running_kernel(void);

/* 1 when this build has the hand-written x86-64 context switch. */
int ft_emu_has_fast_switch(void);

/* Average cost in nanoseconds of one fiber-to-fiber switch (half a round trip between two
 * fibers), measured over `rounds` round trips; -1 when the fibers cannot be set up. */
double ft_emu_switch_ns(int ucontext, long rounds);

#endif
