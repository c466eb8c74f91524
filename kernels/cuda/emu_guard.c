/* emu_guard.c: the emulator's device memory, fenced (emu_guard.h).
 *
 * An allocation of n bytes is one reservation of its own, no access but for its data pages:
 *
 *   [ head: no access ][ data pages: the buffer at their end ][ tail: no access ]
 *
 * the buffer placed so that it ends, rounded up to 256 bytes, where the tail starts. Head and
 * tail are 16 GiB each where the address space allows (address space only: nothing is
 * committed): any 32-bit index, of elements up to 8 bytes, gone negative or past the end lands
 * in them, the commonest wild access of a kernel. Under a limit on the address space (`ulimit
 * -v`, which counts reservations), past 256 live buffers, or where a reservation that large is
 * refused, the head is 64 KiB and the tail as long as the data pages, at least 64 MiB and at
 * most 1 GiB. A load or store past the end of the buffer (by 256
 * bytes or more, its alignment aside) or before the page it starts in faults, and the fault's
 * address says which buffer and how far: no two reservations overlap. The live buffers are
 * listed in a fixed table the signal handler reads without a lock.
 */
#define _GNU_SOURCE
#include "emu_guard.h"

#include "core/epitaph.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/sanitize.h"
#include "emu/emu.h"

#define ALIGN 256

#if !FT_ASAN
#define SLOTS    65536 /* more than the process's mappings allow (vm.max_map_count, 65530) */
#define WIDE     ((size_t)16 << 30) /* head and tail: 2^31 elements of 8 bytes */
#define HEAD     ((size_t)64 << 10)
#define TAIL_MIN ((size_t)64 << 20)
#define TAIL_MAX ((size_t)1 << 30)

typedef struct {
    _Atomic uintptr_t start; /* the buffer (0: a free slot) */
    _Atomic size_t bytes;
    _Atomic uintptr_t base; /* its reservation */
    _Atomic size_t len;
} slot;

static slot slots[SLOTS];
static atomic_int slots_used; /* the slots ever taken: [0, slots_used) */
static const char *_Atomic running;
static struct sigaction before_segv, before_bus;
static atomic_int installed;

static size_t page_bytes(void) {
    static _Atomic size_t p;
    size_t v = atomic_load(&p);
    if (!v) {
        long s = sysconf(_SC_PAGESIZE);
        v = s > 0 ? (size_t)s : 4096;
        atomic_store(&p, v);
    }
    return v;
}

static int list(uintptr_t p, size_t n, uintptr_t base, size_t len) {
    int used = atomic_load(&slots_used);
    for (int i = 0; i < SLOTS; i++) {
        uintptr_t zero = 0;
        if (atomic_compare_exchange_strong(&slots[i].start, &zero, p)) {
            atomic_store(&slots[i].bytes, n);
            atomic_store(&slots[i].base, base);
            atomic_store(&slots[i].len, len);
            while (i >= used && !atomic_compare_exchange_weak(&slots_used, &used, i + 1))
                ;
            return 0;
        }
    }
    return -1;
}

/* Wide fences only where they cost nothing anyone counts: no limit on the address space (a
 * `ulimit -v`, a batch system's vmem limit counts reservations too), and at most WIDE_MAX of
 * them live (a 47-bit space holds 4,096; a program with more buffers gets narrow ones). */
#define WIDE_MAX 256
static atomic_int wide_live;

static int wide_allowed(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) return 0;
    return atomic_load(&wide_live) < WIDE_MAX;
}

void *ft_emu_guard_alloc(size_t bytes, int fill) {
    const size_t page = page_bytes();
    const size_t n = bytes ? bytes : 1;
    if (n > ((size_t)1 << 46)) { /* more than any machine's memory: the sums below stay exact */
        errno = ENOMEM;
        return NULL;
    }
    const size_t data = (n + ALIGN - 1) / ALIGN * ALIGN, pages = (data + page - 1) / page * page;
    size_t head = WIDE, tail = WIDE, len = head + pages + tail;
    char *base = MAP_FAILED;
    if (wide_allowed()) {
        base = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (base != MAP_FAILED) atomic_fetch_add(&wide_live, 1);
    }
    if (base == MAP_FAILED) { /* the narrower fences */
        head = HEAD > page ? HEAD : page;
        tail = pages < TAIL_MIN ? TAIL_MIN : pages > TAIL_MAX ? TAIL_MAX : pages;
        len = head + pages + tail;
        base = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    }
    if (base == MAP_FAILED) return NULL;
    if (mprotect(base + head, pages, PROT_READ | PROT_WRITE) != 0) {
        const int e = errno;
        munmap(base, len);
        errno = e;
        return NULL;
    }
    char *p = base + head + pages - data;
    if (list((uintptr_t)p, n, (uintptr_t)base, len) != 0) {
        munmap(base, len);
        errno = ENOMEM;
        return NULL;
    }
    if (fill >= 0) memset(base + head, fill, pages); /* the slack around the buffer too */
    return p;
}

void ft_emu_guard_free(void *p) {
    if (!p) return;
    const int used = atomic_load(&slots_used);
    for (int i = 0; i < used; i++)
        if (atomic_load(&slots[i].start) == (uintptr_t)p) {
            const uintptr_t base = atomic_load(&slots[i].base);
            const size_t len = atomic_load(&slots[i].len);
            atomic_store(&slots[i].start, 0);
            if (len > 2 * WIDE) atomic_fetch_sub(&wide_live, 1);
            munmap((void *)base, len);
            return;
        }
    /* A second free would unmap whatever the address space put there since. */
    fprintf(stderr,
            "flaretune: emulator: %p freed, which is no live device buffer (freed twice?)\n", p);
    abort();
}

void ft_emu_guard_running(const char *kernel) { atomic_store(&running, kernel); }

/* ---- the handler: async-signal-safe from here on ---------------------------------------- */

typedef struct {
    char b[512];
    size_t n;
} line;

/* Appends s, keeping the last byte for the newline. */
static void put(line *l, const char *s) {
    while (*s && l->n < sizeof l->b - 2)
        l->b[l->n++] = *s++;
}

static void put_u(line *l, uint64_t v, int hex) {
    char d[24];
    int k = 0;
    do {
        d[k++] = "0123456789abcdef"[v % (hex ? 16 : 10)];
        v /= hex ? 16 : 10;
    } while (v);
    if (hex) put(l, "0x");
    while (k > 0 && l->n < sizeof l->b - 2)
        l->b[l->n++] = d[--k];
}

/* Ends the process as an illegal address ends a CUDA context: the epitaph, then the line. */
static _Noreturn void die(line *l) {
    l->b[l->n++] = '\n';
    ft_epitaph_write();
    ssize_t w = write(STDERR_FILENO, l->b, l->n);
    (void)w;
    _exit(1);
}

static void on_fault(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    const uintptr_t a = (uintptr_t)si->si_addr;
    const int used = atomic_load(&slots_used);
    int found = -1;
    /* A fault the kernel raised (not a signal sent), in a reservation outside its buffer. */
    for (int i = 0; si->si_code > 0 && i < used && found < 0; i++) {
        const uintptr_t s = atomic_load(&slots[i].start), base = atomic_load(&slots[i].base);
        if (s && a >= base && a < base + atomic_load(&slots[i].len)) found = i;
    }
    const int overflow = found < 0 && si->si_code > 0 && ft_emu_stack_overflow(a);
    /* A fault of this thread's kernel outside every fence: an index so far out of range that it
     * passed a buffer's fences, or a pointer that is no device buffer's. */
    const int stray = found < 0 && !overflow && si->si_code > 0 && ft_emu_running_kernel();
    if (found < 0 && !overflow && !stray) {
        /* Not an overrun: what was there before handles it (the default, or a sanitizer's
         * report), the access faulting again, or a signal sent raised again. */
        sigaction(sig, sig == SIGBUS ? &before_bus : &before_segv, NULL);
        if (si->si_code <= 0) raise(sig);
        return;
    }
    const char *kernel = ft_emu_running_kernel(); /* this thread's launch */
    if (!kernel) kernel = atomic_load(&running);  /* the host code of the latest one */
    line l = {.n = 0};
    if (kernel) {
        put(&l, "flaretune: kernel '");
        put(&l, kernel);
        put(&l, "' on the emulator ");
    } else {
        put(&l, "flaretune: the emulator's host code (no kernel running: a bug) ");
    }
    if (overflow) {
        put(&l, "overflowed a thread's stack (");
        put_u(&l, (FT_EMU_STACK_BYTES - 2 * FT_EMU_PAGE) >> 10, 0);
        put(&l, " KiB here, where a GPU allows a thread up to 512 KiB of local memory): its local "
                "arrays or calls are too deep for the emulator");
        die(&l);
    }
    if (stray) {
        put(&l, "faulted at ");
        put_u(&l, a, 1);
        put(&l, ", in no device buffer nor the fence around one: an index far out of range or a "
                "pointer that is no argument's");
        die(&l);
    }
    put(&l, "reached ");
    put_u(&l, a, 1);
    const uintptr_t s = atomic_load(&slots[found].start);
    const size_t n = atomic_load(&slots[found].bytes);
    put(&l, ", ");
    put_u(&l, a >= s + n ? a - (s + n) : s - a, 0);
    put(&l, a >= s + n ? " bytes past the end of a " : " bytes before a ");
    put_u(&l, n, 0);
    put(&l, "-byte device buffer: an argument is smaller than the kernel reads or writes (a T1 "
            "file's Size; --arg NAME=TYPE:SIZE replaces one), or an index is wrong");
    die(&l);
}

int ft_emu_guard_install(void) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&installed, &expected, 1)) return 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK; /* a worker's alternate stack, where it has one */
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &before_segv) != 0) {
        atomic_store(&installed, 0);
        return -1;
    }
    if (sigaction(SIGBUS, &sa, &before_bus) != 0) {
        const int e = errno;
        sigaction(SIGSEGV, &before_segv, NULL);
        atomic_store(&installed, 0);
        errno = e;
        return -1;
    }
    return 0;
}

#else
/* Under AddressSanitizer (FT_SANITIZE) the kernels are instrumented: heap memory, whose redzones
 * give an overrun's report with the kernel's line, serves better than a fence. */
void *ft_emu_guard_alloc(size_t bytes, int fill) {
    void *p = NULL;
    size_t n = bytes ? bytes : 1;
    if (posix_memalign(&p, ALIGN, n) != 0) return NULL;
    memset(p, fill >= 0 ? fill : 0, n);
    return p;
}

void ft_emu_guard_free(void *p) { free(p); }
int ft_emu_guard_install(void) { return 0; }
void ft_emu_guard_running(const char *kernel) { (void)kernel; }
#endif
