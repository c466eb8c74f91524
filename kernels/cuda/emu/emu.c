/* emu.c: fibers and the block scheduler of the SIMT emulator (see emu.h and ft_emu_abi.h).
 *
 * Cost model: every __syncthreads is one context switch per thread of the block, every warp
 * collective one per lane (32). The x86-64 switch saves six callee-saved registers, MXCSR and the
 * x87 control word and swaps stack pointers: about 15 ns here, against 300 ns for glibc's
 * swapcontext, which makes a system call per switch for the signal mask. Other architectures
 * (and FLARETUNE_EMU_FIBERS=ucontext) use swapcontext.
 */
#define _GNU_SOURCE
#include "emu.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#include "core/sanitize.h"
#if FT_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__) && !defined(FT_EMU_NO_FAST_SWITCH)
#define FT_EMU_FAST_SWITCH 1
#else
#define FT_EMU_FAST_SWITCH 0
#endif

/* ---- contexts -------------------------------------------------------------------------------- */

typedef struct emu_ctx {
    void *sp;      /* the fast switch: the saved stack pointer */
    ucontext_t uc; /* the portable one */
    int use_uc;
    void *stack_lo; /* the stack this context runs on (for AddressSanitizer) */
    size_t stack_size;
} emu_ctx;

#if FT_EMU_FAST_SWITCH
/* ft_emu_ctx_switch(void **save_sp, void *load_sp): push the callee-saved registers (System V
 * x86-64: rbx, rbp, r12-r15) and MXCSR / the x87 control word on the current stack, save the stack
 * pointer, load the other one and pop its registers: its `ret` resumes it where it switched away.
 * A fresh fiber's stack is built to "return" into ft_emu_fiber_entry, which calls r13(r12). */
void ft_emu_ctx_switch(void **save_sp, void *load_sp);
void ft_emu_fiber_entry(void);
__asm__(".text\n"
        ".p2align 4\n"
        ".globl ft_emu_ctx_switch\n"
        ".hidden ft_emu_ctx_switch\n"
        ".type ft_emu_ctx_switch,@function\n"
        "ft_emu_ctx_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size ft_emu_ctx_switch, .-ft_emu_ctx_switch\n"
        ".p2align 4\n"
        ".globl ft_emu_fiber_entry\n"
        ".hidden ft_emu_fiber_entry\n"
        ".type ft_emu_fiber_entry,@function\n"
        "ft_emu_fiber_entry:\n"
        "    .cfi_startproc\n"
        "    .cfi_undefined rip\n" /* debuggers: the fiber's call chain starts here */
        "    movq %r12, %rdi\n"
        "    callq *%r13\n"
        "    ud2\n"
        "    .cfi_endproc\n"
        ".size ft_emu_fiber_entry, .-ft_emu_fiber_entry\n");
#endif

int ft_emu_has_fast_switch(void) { return FT_EMU_FAST_SWITCH; }

typedef void (*emu_entry_fn)(void *arg);

static void uc_trampoline(unsigned hi, unsigned lo, unsigned fhi, unsigned flo) {
    void *arg = (void *)(((uintptr_t)hi << 32) | lo);
    emu_entry_fn fn;
    uintptr_t f = ((uintptr_t)fhi << 32) | flo;
    memcpy(&fn, &f, sizeof fn);
    fn(arg);
    abort(); /* a fiber never returns: it switches away for good when its thread exits */
}

/* Prepare c to start fn(arg) on the stack [lo, lo + size) at its next switch. `clean` bytes at
 * the top of the stack are cleared of AddressSanitizer's poison first: the frames a fiber
 * abandons (the exit path's, or all of them when its block failed) leave their redzones
 * poisoned, and the next fiber's uninstrumented kernel frames may sit there. */
static int ctx_init(emu_ctx *c, void *lo, size_t size, emu_entry_fn fn, void *arg, int use_uc,
                    size_t clean) {
    c->stack_lo = lo;
    c->stack_size = size;
    c->use_uc = use_uc || !FT_EMU_FAST_SWITCH;
#if FT_ASAN
    if (clean > size) clean = size;
    ASAN_UNPOISON_MEMORY_REGION((unsigned char *)lo + size - clean, clean);
#else
    (void)clean;
#endif
    if (c->use_uc) {
        if (getcontext(&c->uc) != 0) return -1;
        c->uc.uc_stack.ss_sp = lo;
        c->uc.uc_stack.ss_size = size;
        c->uc.uc_link = NULL;
        uintptr_t a = (uintptr_t)arg, f;
        memcpy(&f, &fn, sizeof f);
        void (*tramp)(void) = NULL;
        void (*t4)(unsigned, unsigned, unsigned, unsigned) = uc_trampoline;
        memcpy(&tramp, &t4, sizeof tramp);
        makecontext(&c->uc, tramp, 4, (unsigned)(a >> 32), (unsigned)a, (unsigned)(f >> 32),
                    (unsigned)f);
        return 0;
    }
#if FT_EMU_FAST_SWITCH
    uintptr_t top = ((uintptr_t)lo + size) & ~(uintptr_t)15;
    uint64_t *s = (uint64_t *)(top - 80); /* 16-byte aligned, see ft_emu_ctx_switch */
    uint32_t csr[2];
    __asm__ volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(csr[0]), "=m"(csr[1]));
    s[0] = (uint64_t)(csr[0] & 0xffffffffu) | ((uint64_t)(csr[1] & 0xffffu) << 32);
    s[1] = 0;                        /* r15 */
    s[2] = 0;                        /* r14 */
    memcpy(&s[3], &fn, sizeof fn);   /* r13: the function */
    s[4] = (uint64_t)(uintptr_t)arg; /* r12: its argument */
    s[5] = 0;                        /* rbx */
    s[6] = 0;                        /* rbp */
    void (*entry)(void) = ft_emu_fiber_entry;
    memcpy(&s[7], &entry, sizeof entry);
    s[8] = 0;
    s[9] = 0;
    c->sp = s;
#endif
    return 0;
}

/* Switch from `from` to `to`. `from_ends`: `from` will never be resumed (its thread exited or the
 * block failed), which AddressSanitizer needs to know to drop its fake stack. */
static void ctx_switch(emu_ctx *from, emu_ctx *to, int from_ends) {
#if FT_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(from_ends ? NULL : &fake, to->stack_lo, to->stack_size);
#else
    (void)from_ends;
#endif
    if (from->use_uc || to->use_uc) {
        swapcontext(&from->uc, &to->uc);
    } else {
#if FT_EMU_FAST_SWITCH
        ft_emu_ctx_switch(&from->sp, to->sp);
#endif
    }
#if FT_ASAN
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

/* The first thing a fiber does (it arrived by a switch AddressSanitizer was told about). */
static void ctx_started(void) {
#if FT_ASAN
    __sanitizer_finish_switch_fiber(NULL, NULL, NULL);
#endif
}

/* The context of the thread running the scheduler (its stack bounds, for AddressSanitizer). */
static void ctx_init_host(emu_ctx *c, int use_uc) {
    memset(c, 0, sizeof *c);
    c->use_uc = use_uc || !FT_EMU_FAST_SWITCH;
#if FT_ASAN
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        pthread_attr_getstack(&attr, &c->stack_lo, &c->stack_size);
        pthread_attr_destroy(&attr);
    }
#endif
}

/* ---- fibers, pools, blocks ------------------------------------------------------------------- */

enum { ST_RUNNABLE, ST_BARRIER, ST_WARP, ST_EXITED };

struct emu_block;

/* A CUDA thread. Lives on the first page of its stack region; `t` (the ABI part kernel code
 * reads) must stay the first member. */
typedef struct emu_fiber {
    ft_emu_thread t;
    emu_ctx ctx;
    struct emu_block *blk;
    int state;
    const char *file; /* where it waits */
    int line;
    const ft_emu_coll *coll;
    unsigned coll_mask;
    int bar_op, bar_result;
} emu_fiber;

_Static_assert(sizeof(emu_fiber) <= FT_EMU_PAGE, "a fiber's descriptor fits its first page");

struct ft_emu_pool {
    unsigned char *map; /* the mapping (one extra region for alignment) */
    size_t map_bytes;
    unsigned char *region; /* fiber i's region: region + i * FT_EMU_STACK_BYTES */
    unsigned cap;
    unsigned *runq;
    unsigned char *dyn; /* dynamic shared memory with canaries on both sides */
    size_t dyn_cap;
    int dirty; /* the last block failed: its fibers' stacks hold abandoned frames */
    unsigned char *alt; /* the stack a fault handler runs on while the worker runs blocks */
};

#define DYN_CANARY 256u
#define DYN_ALIGN  128u

typedef struct emu_block {
    const ft_emu_launch *l;
    ft_emu_pool *pool;
    const ft_emu_api *api;
    unsigned n, nwarps;
    ft_emu_uint3 bid;
    unsigned exist[FT_EMU_MAX_WARPS];   /* lanes that exist (the last warp may be partial) */
    unsigned alive[FT_EMU_MAX_WARPS];   /* ... and have not exited                        */
    unsigned waiting[FT_EMU_MAX_WARPS]; /* ... and wait in a warp collective              */
    unsigned qhead, qcount;
    unsigned nexited;
    /* the barrier being gathered */
    unsigned bar_arrived;
    const char *bar_file;
    int bar_line, bar_op, bar_mismatch, bar_count, bar_and, bar_or;
    emu_ctx host;
    int shuffle;
    uint64_t rng;
    unsigned char *tls; /* static shared memory (the module's TLS block on this worker) */
    size_t tls_size;
    unsigned char *dyn;
    size_t dyn_bytes;
    int failed;
    char msg[FT_ERR_MSG_LEN];
} emu_block;

static emu_fiber *fiber_at(const emu_block *b, unsigned i) {
    return (emu_fiber *)(b->pool->region + (size_t)i * FT_EMU_STACK_BYTES);
}

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void runq_push(emu_block *b, unsigned i) {
    b->pool->runq[(b->qhead + b->qcount) % b->n] = i;
    b->qcount++;
}

static emu_fiber *runq_pop(emu_block *b) {
    if (b->qcount == 0) return NULL;
    unsigned *q = b->pool->runq;
    if (b->shuffle && b->qcount > 1) {
        unsigned j = (unsigned)(rng_next(&b->rng) % b->qcount);
        unsigned a = b->qhead, c = (b->qhead + j) % b->n, tmp = q[a];
        q[a] = q[c];
        q[c] = tmp;
    }
    unsigned i = q[b->qhead];
    b->qhead = (b->qhead + 1) % b->n;
    b->qcount--;
    return fiber_at(b, i);
}

/* Hand the CPU to the next runnable fiber (or back to the scheduler when there is none). Returns
 * when f runs again, which is at once when f itself is next. */
static void suspend(emu_block *b, emu_fiber *f, int ends) {
    emu_fiber *next = b->failed ? NULL : runq_pop(b);
    if (next == f) return;
    ctx_switch(&f->ctx, next ? &next->ctx : &b->host, ends);
}

static const char *base_name(const char *path) {
    if (!path) return "?";
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static void describe_thread(const emu_fiber *f, char *buf, size_t n) {
    snprintf(buf, n, "thread (%u,%u,%u)", f->t.tid.x, f->t.tid.y, f->t.tid.z);
}

static void block_fail(emu_block *b, const char *what) {
    if (b->failed) return;
    b->failed = 1;
    /* A message too long for the buffer is cut: it is for people, and stays NUL-terminated. */
    if (snprintf(b->msg, sizeof b->msg, "kernel '%s' block (%u,%u,%u): %s", b->l->kernel, b->bid.x,
                 b->bid.y, b->bid.z, what) < 0)
        b->msg[0] = '\0';
}

static const char *barrier_name(int op) {
    switch (op) {
    case FT_EMU_BAR_COUNT: return "__syncthreads_count";
    case FT_EMU_BAR_AND: return "__syncthreads_and";
    case FT_EMU_BAR_OR: return "__syncthreads_or";
    default: return "__syncthreads";
    }
}

static int same_site(const char *fa, int la, const char *fb, int lb) {
    return la == lb && (fa == fb || (fa && fb && strcmp(fa, fb) == 0));
}

/* ---- the runtime's side of the ABI (called from kernel code, on the calling fiber) ----------- */

static emu_fiber *fiber_of(ft_emu_thread *t) { return (emu_fiber *)t; }

_Noreturn static void api_fail(ft_emu_thread *t, const char *file, int line, const char *msg) {
    emu_fiber *f = fiber_of(t);
    emu_block *b = f->blk;
    char who[64], what[FT_ERR_MSG_LEN];
    describe_thread(f, who, sizeof who);
    snprintf(what, sizeof what, "%s: %s (%s:%d)", who, msg, base_name(file), line);
    block_fail(b, what);
    ctx_switch(&f->ctx, &b->host, 1);
    abort(); /* never resumed */
}

static int api_barrier(ft_emu_thread *t, int op, int pred, const char *file, int line) {
    emu_fiber *f = fiber_of(t);
    emu_block *b = f->blk;
    if (b->bar_arrived == 0) {
        b->bar_file = file, b->bar_line = line, b->bar_op = op;
        b->bar_mismatch = 0, b->bar_count = 0, b->bar_and = 1, b->bar_or = 0;
    } else if (op != b->bar_op || !same_site(file, line, b->bar_file, b->bar_line)) {
        b->bar_mismatch = 1;
    }
    b->bar_arrived++;
    b->bar_count += pred != 0;
    b->bar_and &= pred != 0;
    b->bar_or |= pred != 0;
    f->state = ST_BARRIER, f->file = file, f->line = line, f->bar_op = op;
    if (b->bar_arrived == b->n && !b->bar_mismatch) {
        if (b->l->prof) ft_emu_prof_sync(b->l->prof, 1);
        int r = op == FT_EMU_BAR_COUNT ? b->bar_count
                : op == FT_EMU_BAR_AND ? b->bar_and
                : op == FT_EMU_BAR_OR  ? b->bar_or
                                       : 0;
        for (unsigned i = 0; i < b->n; i++) {
            emu_fiber *g = fiber_at(b, i);
            g->state = ST_RUNNABLE;
            g->bar_result = r;
            runq_push(b, i);
        }
        b->bar_arrived = 0;
    }
    suspend(b, f, 0);
    return f->bar_result;
}

static int coll_matches(const emu_fiber *g, const emu_fiber *f) {
    return g->state == ST_WARP && g->coll == f->coll && g->coll_mask == f->coll_mask &&
           (!f->coll->same_site || same_site(g->file, g->line, f->file, f->line));
}

static void api_collective(ft_emu_thread *t, unsigned mask, const ft_emu_coll *c, const char *file,
                           int line) {
    emu_fiber *f = fiber_of(t);
    emu_block *b = f->blk;
    unsigned w = t->warp, bit = 1u << t->lane;
    char msg[256];
    if (!(mask & bit)) {
        snprintf(msg, sizeof msg, "%s with mask 0x%08x, which does not name its own lane %u",
                 c->name, mask, t->lane);
        api_fail(t, file, line, msg);
    }
    if (c->full_warp && (mask != 0xffffffffu || b->exist[w] != 0xffffffffu)) {
        snprintf(msg, sizeof msg, "%s needs all 32 lanes of the warp (mask 0x%08x, %d threads)",
                 c->name, mask, __builtin_popcount(b->exist[w]));
        api_fail(t, file, line, msg);
    }
    f->state = ST_WARP, f->coll = c, f->coll_mask = mask, f->file = file, f->line = line;
    b->waiting[w] |= bit;
    unsigned need = mask & b->exist[w];
    if ((b->waiting[w] & need) == need) {
        ft_emu_thread *lanes[32] = {0};
        int agree = 1;
        for (unsigned l = 0; l < 32 && agree; l++) {
            if (!(need >> l & 1u)) continue;
            emu_fiber *g = fiber_at(b, w * 32 + l);
            agree = coll_matches(g, f);
            lanes[l] = &g->t;
        }
        if (agree) {
            c->combine(lanes, need);
            if (b->l->prof) ft_emu_prof_collective(b->l->prof, c->name);
            for (unsigned l = 0; l < 32; l++)
                if (need >> l & 1u) {
                    fiber_at(b, w * 32 + l)->state = ST_RUNNABLE;
                    runq_push(b, w * 32 + l);
                }
            b->waiting[w] &= ~need;
        }
    }
    suspend(b, f, 0);
}

static void api_yield(ft_emu_thread *t) {
    emu_fiber *f = fiber_of(t);
    emu_block *b = f->blk;
    runq_push(b, t->linear);
    suspend(b, f, 0);
}

static int api_is_shared(ft_emu_thread *t, const void *p, size_t bytes) {
    emu_block *b = fiber_of(t)->blk;
    const unsigned char *c = p;
    if (b->tls && c >= b->tls && bytes <= b->tls_size &&
        c - b->tls <= (ptrdiff_t)(b->tls_size - bytes))
        return 1;
    return b->dyn && c >= b->dyn && bytes <= b->dyn_bytes &&
           c - b->dyn <= (ptrdiff_t)(b->dyn_bytes - bytes);
}

static unsigned api_active_mask(ft_emu_thread *t) { return fiber_of(t)->blk->alive[t->warp]; }

/* A profile module's access: the threads' stacks (their descriptors, which warp collectives
 * read and write, registers spilled by the host compiler, local arrays) are not memory a GPU
 * kernel would request; the rest is shared or global memory by address. */
static const ft_emu_api emu_api;

static void api_access(ft_emu_thread *t, const void *pc, const void *addr, unsigned size,
                       unsigned flags) {
    emu_fiber *f = fiber_of(t);
    emu_block *b = f->blk;
    ft_emu_prof *p = b->l->prof;
    uintptr_t a = (uintptr_t)addr;
    uintptr_t stacks = (uintptr_t)b->pool->region;
    if (!p || (a >= stacks && a - stacks < (uintptr_t)b->n * FT_EMU_STACK_BYTES)) return;
    /* Nor is the dialect's reading of this table, to call the runtime. */
    if (a >= (uintptr_t)&emu_api && a < (uintptr_t)(&emu_api + 1)) return;
    /* Nor a read of __constant__ memory: the constant cache's, not the global path's. */
    for (int i = 0; i < b->l->nconsts; i++) {
        uintptr_t lo = (uintptr_t)b->l->consts[i].addr;
        if (a >= lo && a - lo < b->l->consts[i].bytes && !(flags & FT_EMU_ACCESS_WRITE)) return;
    }
    int shared = api_is_shared(t, addr, size ? size : 1);
    ft_emu_acc kind = shared ? ((flags & FT_EMU_ACCESS_WRITE) ? FT_EMU_SST : FT_EMU_SLD)
                      : (flags & FT_EMU_ACCESS_ATOMIC) ? FT_EMU_GATOM
                      : (flags & FT_EMU_ACCESS_WRITE)  ? FT_EMU_GST
                                                       : FT_EMU_GLD;
    ft_emu_prof_access(p, t->warp, t->lane, (uintptr_t)pc, a, size, kind, flags);
}

static const ft_emu_api emu_api = {FT_EMU_ABI_VERSION, api_barrier,   api_collective,  api_yield,
                                   api_fail,           api_is_shared, api_active_mask, api_access};

/* ---- running a block ------------------------------------------------------------------------- */

static void fiber_main(void *arg) {
    emu_fiber *f = arg;
    ctx_started();
    emu_block *b = f->blk;
    b->l->invoke(b->l->args);
    f->state = ST_EXITED;
    b->nexited++;
    b->alive[f->t.warp] &= ~(1u << f->t.lane);
    suspend(b, f, 1);
    abort(); /* never resumed */
}

/* Why can no thread run? Called when the run queue is empty and some thread has not exited. */
static void explain_stuck(emu_block *b) {
    char a[64], c[64], what[FT_ERR_MSG_LEN];
    for (unsigned i = 0; i < b->n; i++) {
        emu_fiber *f = fiber_at(b, i);
        if (f->state != ST_WARP) continue;
        unsigned w = f->t.warp, need = f->coll_mask & b->exist[w];
        for (unsigned l = 0; l < 32; l++) {
            if (!(need >> l & 1u)) continue;
            emu_fiber *g = fiber_at(b, w * 32 + l);
            if (g == f || coll_matches(g, f)) continue;
            char instead[200];
            if (g->state == ST_EXITED)
                snprintf(instead, sizeof instead, "exited without reaching it");
            else if (g->state == ST_BARRIER)
                snprintf(instead, sizeof instead, "waits at %s (%s:%d) instead",
                         barrier_name(g->bar_op), base_name(g->file), g->line);
            else
                snprintf(instead, sizeof instead, "waits in %s (%s:%d, mask 0x%08x) instead",
                         g->coll->name, base_name(g->file), g->line, g->coll_mask);
            describe_thread(f, a, sizeof a);
            describe_thread(g, c, sizeof c);
            snprintf(what, sizeof what,
                     "warp %u never completes %s (%s:%d, mask 0x%08x): %s waits in it, but lane "
                     "%u, %s, %s",
                     w, f->coll->name, base_name(f->file), f->line, f->coll_mask, a, l, c, instead);
            block_fail(b, what);
            return;
        }
    }
    for (unsigned i = 0; i < b->n; i++) {
        emu_fiber *f = fiber_at(b, i);
        if (f->state != ST_BARRIER) continue;
        for (unsigned j = 0; j < b->n; j++) {
            emu_fiber *g = fiber_at(b, j);
            if (g->state == ST_BARRIER && g->bar_op == f->bar_op &&
                same_site(g->file, g->line, f->file, f->line))
                continue;
            describe_thread(f, a, sizeof a);
            describe_thread(g, c, sizeof c);
            if (g->state == ST_EXITED)
                snprintf(what, sizeof what,
                         "%s waits at %s (%s:%d), but %s exited without reaching it", a,
                         barrier_name(f->bar_op), base_name(f->file), f->line, c);
            else
                snprintf(what, sizeof what,
                         "divergent barrier: %s waits at %s (%s:%d), but %s waits at %s (%s:%d)", a,
                         barrier_name(f->bar_op), base_name(f->file), f->line, c,
                         barrier_name(g->bar_op), base_name(g->file), g->line);
            block_fail(b, what);
            return;
        }
    }
    block_fail(b, "no thread can run, yet not all have exited (an emulator bug)");
}

static void check_canaries(emu_block *b) {
    if (!b->dyn) return;
    const unsigned char *lo = b->dyn - DYN_CANARY, *hi = b->dyn + b->dyn_bytes;
    for (unsigned i = 0; i < DYN_CANARY; i++)
        if (lo[i] != 0xA5 || hi[i] != 0xA5) {
            char what[160];
            snprintf(what, sizeof what,
                     "a thread wrote %s its %zu bytes of dynamic shared memory (byte %d)",
                     lo[i] != 0xA5 ? "before" : "past the end of", b->dyn_bytes,
                     lo[i] != 0xA5 ? (int)i - (int)DYN_CANARY : (int)i);
            block_fail(b, what);
            return;
        }
}

static void run_block(emu_block *b, unsigned long long index) {
    const ft_emu_launch *l = b->l;
    ft_emu_pool *p = b->pool;
    unsigned bx = l->block.x, by = l->block.y;
    b->bid.x = (unsigned)(index % l->grid.x);
    b->bid.y = (unsigned)(index / l->grid.x % l->grid.y);
    b->bid.z = (unsigned)(index / ((unsigned long long)l->grid.x * l->grid.y));
    b->qhead = b->qcount = 0;
    b->nexited = 0;
    b->bar_arrived = 0;
    b->failed = 0;
    b->msg[0] = '\0';
    b->shuffle = l->seed != 0 && !l->prof; /* a profile runs threads in linear order */
    b->rng = l->seed ^ (index * 0xd1342543de82ef95ull);
    memset(b->waiting, 0, sizeof b->waiting);
    memset(b->exist, 0, sizeof b->exist);
    /* A read of shared memory before any thread wrote it reads NaN (0xFF bytes). */
    if (b->tls) memset(b->tls, 0xFF, b->tls_size);
    if (b->dyn) {
        memset(b->dyn - DYN_CANARY, 0xA5, DYN_CANARY);
        memset(b->dyn, 0xFF, b->dyn_bytes);
        memset(b->dyn + b->dyn_bytes, 0xA5, DYN_CANARY);
    }
    size_t stack_off = 2 * FT_EMU_PAGE; /* descriptor page, guard page */
    for (unsigned i = 0; i < b->n; i++) {
        emu_fiber *f = fiber_at(b, i);
        memset(&f->t, 0, sizeof f->t);
        f->t.tid.x = i % bx;
        f->t.tid.y = i / bx % by;
        f->t.tid.z = i / (bx * by);
        f->t.bid = b->bid;
        f->t.bdim = l->block;
        f->t.gdim = l->grid;
        f->t.lane = i % 32;
        f->t.warp = i / 32;
        f->t.linear = i;
        f->t.dyn_smem = b->dyn;
        f->t.dyn_smem_bytes = b->dyn_bytes;
        f->t.api = b->api;
        f->blk = b;
        f->state = ST_RUNNABLE;
        f->coll = NULL;
        b->exist[i / 32] |= 1u << (i % 32);
        if (ctx_init(&f->ctx, (unsigned char *)f + stack_off, FT_EMU_STACK_BYTES - stack_off,
                     fiber_main, f, l->ucontext, p->dirty ? FT_EMU_STACK_BYTES : 16384) != 0) {
            block_fail(b, "cannot set up the fibers (getcontext failed)");
            return;
        }
        runq_push(b, i);
    }
    memcpy(b->alive, b->exist, sizeof b->alive);
    p->dirty = 0;
    if (l->prof) ft_emu_prof_block(l->prof, b->exist, b->nwarps);
    emu_fiber *first = runq_pop(b);
    ctx_switch(&b->host, &first->ctx, 0);
    /* Back here: every thread exited, or none can run, or one failed. */
    if (!b->failed && b->nexited != b->n) explain_stuck(b);
    if (!b->failed) check_canaries(b);
    if (b->failed) p->dirty = 1; /* fibers abandoned mid-call */
    if (l->prof) ft_emu_prof_sync(l->prof, 0);
}

/* Unmap fiber stacks. AddressSanitizer keeps the poison of the frames abandoned on them; clear
 * it, or whatever is mapped there next would inherit it. */
static void stacks_unmap(void *p, size_t bytes) {
#if FT_ASAN
    ASAN_UNPOISON_MEMORY_REGION(p, bytes);
#endif
    munmap(p, bytes);
}

/* ---- overflowing a stack --------------------------------------------------------------------- */

/* The live pools' fiber regions, for ft_emu_stack_overflow: a fixed table read without a lock
 * (a pool that finds it full is not listed, and its overflow is left to the default handler). */
#define STACK_SLOTS 4096
static struct {
    _Atomic uintptr_t region; /* 0: a free slot */
    _Atomic unsigned n;       /* fibers */
} stack_slots[STACK_SLOTS];

/* The alternate signal stack of a worker (the handler writes one line and ends the process). */
#define ALT_BYTES ((size_t)64 << 10)

static void stacks_list(const ft_emu_pool *p) {
    for (int i = 0; i < STACK_SLOTS; i++) {
        uintptr_t zero = 0; /* a free slot's n is 0 until its region is set */
        if (atomic_compare_exchange_strong(&stack_slots[i].region, &zero, (uintptr_t)p->region)) {
            atomic_store(&stack_slots[i].n, p->cap);
            return;
        }
    }
}

static void stacks_unlist(const ft_emu_pool *p) {
    for (int i = 0; p->region && i < STACK_SLOTS; i++)
        if (atomic_load(&stack_slots[i].region) == (uintptr_t)p->region) {
            atomic_store(&stack_slots[i].n, 0);
            atomic_store(&stack_slots[i].region, 0);
            return;
        }
}

int ft_emu_stack_overflow(uintptr_t a) {
    for (int i = 0; i < STACK_SLOTS; i++) {
        const uintptr_t r = atomic_load(&stack_slots[i].region);
        const unsigned n = atomic_load(&stack_slots[i].n);
        if (!r || a < r || a - r >= (uintptr_t)n * FT_EMU_STACK_BYTES) continue;
        const uintptr_t in = (a - r) % FT_EMU_STACK_BYTES;
        return in >= FT_EMU_PAGE && in < 2 * FT_EMU_PAGE;
    }
    return 0;
}

/* The kernel this thread runs blocks of (NULL: none), for the fault handler: a process may run
 * launches on several devices at once, each on its own threads. A worker sets it before it runs
 * a block, so the thread's TLS block exists by the time a kernel's fault is handled and reading
 * it allocates nothing (the library may be loaded with dlopen: no initial-exec model). */
static __thread const char *running_here;

const char *ft_emu_running_kernel(void) { return running_here; }

/* Runs the calling thread's fault handlers on the pool's alternate stack until alt_end: a fiber
 * that overflowed its stack has none left to run one on. 1 when set (old: what was before). */
static int alt_begin(const ft_emu_pool *p, stack_t *old) {
    if (FT_ASAN || !p->alt) return 0; /* AddressSanitizer has its own */
    stack_t ss = {.ss_sp = p->alt, .ss_size = ALT_BYTES, .ss_flags = 0};
    return sigaltstack(&ss, old) == 0;
}

static void alt_end(int set, const stack_t *old) {
    if (set) sigaltstack(old, NULL);
}

/* ---- pools ----------------------------------------------------------------------------------- */

void ft_emu_pool_free(ft_emu_pool *p) {
    if (!p) return;
    stacks_unlist(p);
    if (p->alt) munmap(p->alt, ALT_BYTES);
    if (p->map) stacks_unmap(p->map, p->map_bytes);
    free(p->runq);
    free(p->dyn);
    free(p);
}

static ft_status pool_reserve(ft_emu_pool *p, unsigned n, size_t dyn, ft_err *err) {
    if (!p->alt) {
        void *m = mmap(NULL, ALT_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return ft_err_set(err, FT_ENOMEM, "emulator: cannot map a signal stack: %s",
                              strerror(errno));
        p->alt = m;
    }
    if (n > p->cap) {
        stacks_unlist(p);
        if (p->map) stacks_unmap(p->map, p->map_bytes);
        p->map = NULL;
        p->region = NULL;
        p->cap = 0;
        size_t bytes = ((size_t)n + 1) * FT_EMU_STACK_BYTES;
        void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED)
            return ft_err_set(err, FT_ENOMEM, "emulator: cannot map %zu bytes of fiber stacks: %s",
                              bytes, strerror(errno));
        p->map = m;
        p->map_bytes = bytes;
        uintptr_t a =
            ((uintptr_t)m + FT_EMU_STACK_BYTES - 1) & ~(uintptr_t)(FT_EMU_STACK_BYTES - 1);
        p->region = (unsigned char *)a;
        for (unsigned i = 0; i < n; i++)
            if (mprotect(p->region + (size_t)i * FT_EMU_STACK_BYTES + FT_EMU_PAGE, FT_EMU_PAGE,
                         PROT_NONE) != 0)
                return ft_err_set(err, FT_ENOMEM, "emulator: cannot protect a stack guard page: %s",
                                  strerror(errno));
        unsigned *q = realloc(p->runq, n * sizeof *q);
        if (!q) return ft_err_set(err, FT_ENOMEM, "emulator: out of memory");
        p->runq = q;
        p->cap = n;
        stacks_list(p);
    }
    if (dyn + 2 * DYN_CANARY > p->dyn_cap) {
        free(p->dyn);
        p->dyn = NULL;
        p->dyn_cap = 0;
        size_t bytes = (dyn + 2 * DYN_CANARY + DYN_ALIGN - 1) / DYN_ALIGN * DYN_ALIGN;
        if (posix_memalign((void **)&p->dyn, DYN_ALIGN, bytes) != 0)
            return ft_err_set(err, FT_ENOMEM,
                              "emulator: cannot allocate %zu bytes of shared memory", dyn);
        p->dyn_cap = bytes;
    }
    return FT_OK;
}

/* ---- the grid -------------------------------------------------------------------------------- */

typedef struct {
    unsigned long ti_module, ti_offset;
} emu_tls_index;
extern void *__tls_get_addr(emu_tls_index *ti);

typedef struct emu_grid {
    const ft_emu_launch *l;
    unsigned long long nblocks;
    atomic_ullong next;
    atomic_int stop;
    pthread_mutex_t lock;
    unsigned long long err_block; /* the lowest failed block, reported */
    int failed;
    char msg[FT_ERR_MSG_LEN];
} emu_grid;

typedef struct emu_worker {
    emu_grid *g;
    ft_emu_pool *pool;
    pthread_t thread;
    int started;
} emu_worker;

static void *worker_main(void *arg) {
    emu_worker *w = arg;
    emu_grid *g = w->g;
    const ft_emu_launch *l = g->l;
    emu_block *b = calloc(1, sizeof *b);
    if (!b) {
        pthread_mutex_lock(&g->lock);
        if (!g->failed)
            g->failed = 1, g->err_block = 0,
            snprintf(g->msg, sizeof g->msg, "emulator: out of memory");
        pthread_mutex_unlock(&g->lock);
        atomic_store(&g->stop, 1);
        return NULL;
    }
    b->l = l;
    b->pool = w->pool;
    b->api = &emu_api;
    b->n = l->block.x * l->block.y * l->block.z;
    b->nwarps = (b->n + 31) / 32;
    b->dyn_bytes = l->dyn_smem;
    b->dyn = l->dyn_smem ? w->pool->dyn + DYN_CANARY : NULL;
    if (l->tls_modid && l->tls_size) {
        emu_tls_index ti = {(unsigned long)l->tls_modid, 0};
        b->tls = __tls_get_addr(&ti); /* this worker's copy, allocated on first use */
        b->tls_size = l->tls_size;
    }
    ctx_init_host(&b->host, l->ucontext);
    stack_t old_alt;
    const int alt = alt_begin(w->pool, &old_alt);
    running_here = l->kernel;
    while (!atomic_load(&g->stop)) {
        unsigned long long i = atomic_fetch_add(&g->next, 1);
        if (i >= g->nblocks) break;
        if (l->only) { /* the i-th block of the sample, by its index in the grid */
            const ft_emu_uint3 *q = &l->only[i];
            i = q->x + (unsigned long long)l->grid.x * (q->y + (unsigned long long)l->grid.y * q->z);
        }
        run_block(b, i);
        if (b->failed) {
            pthread_mutex_lock(&g->lock);
            if (!g->failed || i < g->err_block) {
                g->failed = 1;
                g->err_block = i;
                memcpy(g->msg, b->msg, sizeof g->msg);
            }
            pthread_mutex_unlock(&g->lock);
            atomic_store(&g->stop, 1);
        }
    }
    running_here = NULL;
    alt_end(alt, &old_alt);
    free(b);
    return NULL;
}

ft_status ft_emu_run(ft_emu_pool **pools, const ft_emu_launch *l, ft_err *err) {
    unsigned n = l->block.x * l->block.y * l->block.z;
    if (n == 0 || n > 32u * FT_EMU_MAX_WARPS)
        return ft_err_set(err, FT_EINVAL, "emulator: a block of %u threads", n);
    emu_grid g;
    memset(&g, 0, sizeof g);
    g.l = l;
    g.nblocks = l->only ? l->nonly : (unsigned long long)l->grid.x * l->grid.y * l->grid.z;
    if (g.nblocks == 0) return FT_OK;
    atomic_init(&g.next, 0);
    atomic_init(&g.stop, 0);
    pthread_mutex_init(&g.lock, NULL);
    int workers = l->prof || l->workers < 1         ? 1
                  : l->workers > FT_EMU_MAX_WORKERS ? FT_EMU_MAX_WORKERS
                                                    : l->workers;
    if ((unsigned long long)workers > g.nblocks) workers = (int)g.nblocks;
    emu_worker w[FT_EMU_MAX_WORKERS];
    ft_status s = FT_OK;
    for (int i = 0; i < workers && s == FT_OK; i++) {
        if (!pools[i] && !(pools[i] = calloc(1, sizeof *pools[i])))
            s = ft_err_set(err, FT_ENOMEM, "emulator: out of memory");
        if (s == FT_OK) s = pool_reserve(pools[i], n, l->dyn_smem, err);
        w[i].g = &g, w[i].pool = pools[i], w[i].started = 0;
    }
    if (s != FT_OK) {
        pthread_mutex_destroy(&g.lock);
        return s;
    }
    for (int i = 1; i < workers; i++) {
        w[i].started = pthread_create(&w[i].thread, NULL, worker_main, &w[i]) == 0;
    }
    if (l->live) *l->live = 1;
    worker_main(&w[0]); /* the calling thread works too (and alone when workers == 1) */
    if (l->live) *l->live = 0;
    for (int i = 1; i < workers; i++)
        if (w[i].started) pthread_join(w[i].thread, NULL);
    pthread_mutex_destroy(&g.lock);
    if (g.failed) return ft_err_set(err, FT_EINTERNAL, "%s", g.msg);
    return FT_OK;
}

/* ---- measuring a switch ---------------------------------------------------------------------- */

typedef struct emu_pingpong {
    emu_ctx host, a, b;
    long rounds;
} emu_pingpong;

static void pingpong_a(void *arg) {
    emu_pingpong *p = arg;
    ctx_started();
    for (long i = 0; i < p->rounds; i++)
        ctx_switch(&p->a, &p->b, 0);
    ctx_switch(&p->a, &p->host, 1);
}

static void pingpong_b(void *arg) {
    emu_pingpong *p = arg;
    ctx_started();
    for (;;)
        ctx_switch(&p->b, &p->a, 0);
}

double ft_emu_switch_ns(int ucontext, long rounds) {
    size_t bytes = 3 * FT_EMU_STACK_BYTES;
    unsigned char *m =
        mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return -1;
    emu_pingpong *p = calloc(1, sizeof *p);
    if (!p) {
        munmap(m, bytes);
        return -1;
    }
    p->rounds = rounds;
    ctx_init_host(&p->host, ucontext);
    double ns = -1;
    if (ctx_init(&p->a, m, FT_EMU_STACK_BYTES, pingpong_a, p, ucontext, 0) == 0 &&
        ctx_init(&p->b, m + FT_EMU_STACK_BYTES, FT_EMU_STACK_BYTES, pingpong_b, p, ucontext, 0) ==
            0) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        ctx_switch(&p->host, &p->a, 0);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double dt = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
        ns = dt / (2.0 * (double)rounds);
    }
    free(p);
    stacks_unmap(m, bytes);
    return ns;
}
