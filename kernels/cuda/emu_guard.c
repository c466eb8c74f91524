/* emu_guard.c: the emulator's device memory, fenced (emu_guard.h).
 *
 * An allocation of n bytes is one private mapping of whole pages:
 *
 *   [ header page: read-only, its length ][ data pages ][ guard page: no access ]
 *
 * the buffer placed so that it ends, rounded up to 256 bytes, where the guard page starts. A
 * load or store up to a page past the end (255 bytes of slack aside), or into the page before
 * the buffer, faults. The live buffers are listed in a fixed table the signal handler can read
 * without a lock, so that its line can say which buffer was overrun and by how much.
 */
#define _GNU_SOURCE
#include "emu_guard.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ALIGN 256

#if !defined(__SANITIZE_ADDRESS__)
#define SLOTS 65536

typedef struct {
    _Atomic uintptr_t start;
    _Atomic size_t bytes;
} slot;

static slot slots[SLOTS];
static atomic_int slots_used; /* the slots ever taken: [0, slots_used) */
static const char *_Atomic running;
static struct sigaction before_segv, before_bus;
static atomic_int installed;

static size_t page_bytes(void) {
    static size_t p;
    if (!p) {
        long v = sysconf(_SC_PAGESIZE);
        p = v > 0 ? (size_t)v : 4096;
    }
    return p;
}

static void list(void *p, size_t n) {
    int used = atomic_load(&slots_used);
    for (int i = 0; i < SLOTS; i++) {
        uintptr_t zero = 0;
        if (atomic_compare_exchange_strong(&slots[i].start, &zero, (uintptr_t)p)) {
            atomic_store(&slots[i].bytes, n);
            while (i >= used && !atomic_compare_exchange_weak(&slots_used, &used, i + 1))
                ;
            return;
        }
    }
    /* A full table only costs the handler's detail: the guard pages still fault. */
}

static void unlist(void *p) {
    int used = atomic_load(&slots_used);
    for (int i = 0; i < used; i++)
        if (atomic_load(&slots[i].start) == (uintptr_t)p) {
            atomic_store(&slots[i].bytes, 0);
            atomic_store(&slots[i].start, 0);
            return;
        }
}

void *ft_emu_guard_alloc(size_t bytes) {
    const size_t page = page_bytes();
    size_t n = bytes ? bytes : 1;
    if (n > SIZE_MAX / 2) return NULL;
    size_t data = (n + ALIGN - 1) / ALIGN * ALIGN, pages = (data + page - 1) / page;
    size_t len = (pages + 2) * page;
    char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return NULL;
    memcpy(base, &len, sizeof len);
    char *guard = base + (pages + 1) * page;
    if (mprotect(base, page, PROT_READ) != 0 || mprotect(guard, page, PROT_NONE) != 0) {
        munmap(base, len);
        return NULL;
    }
    char *p = guard - data; /* in the first data page: base + page <= p < base + 2 * page */
    list(p, n);
    return p;
}

void ft_emu_guard_free(void *p) {
    if (!p) return;
    const size_t page = page_bytes();
    unlist(p);
    char *base = (char *)((uintptr_t)p / page * page) - page;
    size_t len;
    memcpy(&len, base, sizeof len);
    munmap(base, len);
}

void ft_emu_guard_running(const char *kernel) { atomic_store(&running, kernel); }

/* ---- the handler: async-signal-safe from here on ---------------------------------------- */

typedef struct {
    char b[512];
    size_t n;
} line;

static void put(line *l, const char *s) {
    while (*s && l->n < sizeof l->b - 1)
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
    while (k > 0 && l->n < sizeof l->b - 1)
        l->b[l->n++] = d[--k];
}

static void on_fault(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    const char *kernel = atomic_load(&running);
    if (!kernel) {
        /* Not a kernel's: the access faults again under what was there before (the default,
         * or a sanitizer's report). */
        sigaction(sig, sig == SIGBUS ? &before_bus : &before_segv, NULL);
        return;
    }
    const uintptr_t a = (uintptr_t)si->si_addr, page = page_bytes();
    line l = {.n = 0};
    put(&l, "flaretune: kernel '");
    put(&l, kernel);
    put(&l, "' on the emulator reached ");
    put_u(&l, a, 1);
    put(&l, ", ");
    int found = 0, used = atomic_load(&slots_used);
    for (int i = 0; i < used && !found; i++) {
        uintptr_t s = atomic_load(&slots[i].start);
        size_t n = atomic_load(&slots[i].bytes);
        if (!s || !n) continue;
        uintptr_t guard = s + (n + ALIGN - 1) / ALIGN * ALIGN, head = s / page * page - page;
        if (a >= guard && a < guard + page) {
            put_u(&l, a - (s + n), 0);
            put(&l, " bytes past the end of a ");
            found = 1;
        } else if (a >= head && a < s) {
            put_u(&l, s - a, 0);
            put(&l, " bytes before a ");
            found = 1;
        }
        if (found) {
            put_u(&l, n, 0);
            put(&l, "-byte device buffer: an argument is smaller than the kernel reads or "
                    "writes (a T1 file's Size; --arg NAME=TYPE:SIZE replaces one)\n");
        }
    }
    /* Past the guard: the nearest buffer below the address is the likeliest one overrun. */
    uintptr_t below = 0;
    size_t below_n = 0;
    for (int i = 0; i < used && !found; i++) {
        uintptr_t s = atomic_load(&slots[i].start);
        size_t n = atomic_load(&slots[i].bytes);
        if (s && n && s + n <= a && s > below) below = s, below_n = n;
    }
    if (!found && a < page)
        put(&l, "a null pointer: an argument the kernel dereferences is missing\n");
    else if (!found && below) {
        put_u(&l, a - (below + below_n), 0);
        put(&l, " bytes past the end of a ");
        put_u(&l, below_n, 0);
        put(&l, "-byte device buffer, the nearest below it (beyond its guard page): an index or "
                "an argument's size is wrong (a T1 file's Size; --arg NAME=TYPE:SIZE replaces "
                "one)\n");
    } else if (!found)
        put(&l, "outside every device buffer: an index or an argument's size is wrong\n");
    ssize_t w = write(STDERR_FILENO, l.b, l.n);
    (void)w;
    _exit(1);
}

int ft_emu_guard_install(void) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&installed, &expected, 1)) return 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &before_segv) != 0 || sigaction(SIGBUS, &sa, &before_bus) != 0) {
        atomic_store(&installed, 0);
        return -1;
    }
    return 0;
}

#else
/* Under AddressSanitizer (FT_SANITIZE) the kernels are instrumented: heap memory, whose redzones
 * give an overrun's report with the kernel's line, serves better than a fence. */
void *ft_emu_guard_alloc(size_t bytes) {
    void *p = NULL;
    size_t n = bytes ? bytes : 1;
    if (posix_memalign(&p, ALIGN, n) != 0) return NULL;
    memset(p, 0, n);
    return p;
}

void ft_emu_guard_free(void *p) { free(p); }

int ft_emu_guard_install(void) { return 0; }
void ft_emu_guard_running(const char *kernel) { (void)kernel; }
#endif
