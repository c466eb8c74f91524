/* emu_guard.h: the emulator's device memory, fenced.
 *
 * On the emulator a kernel's buffers are host memory and its loads and stores are the host's,
 * so a kernel that reaches past a buffer (an argument declared smaller than the kernel reads)
 * would read another allocation or corrupt the heap, and crash far from the cause. Each
 * allocation here is a reservation of its own whose buffer ends, 256-byte aligned, against
 * 16 GiB that nothing may touch, with 16 GiB of the same before it (less where the address space
 * is limited: emu_guard.c). A fault there ends the
 * process with one line naming the kernel running and how far past (or before) which buffer it
 * reached, as an illegal address ends a CUDA context on a GPU (likewise a fault on the guard page
 * under an emulated thread's stack: a kernel whose locals outgrow it), once the records
 * registered with core/epitaph.h are written, so that a resumed run goes on past the kernel.
 * Any other fault, and a signal sent, is left to the handler installed before. In sanitizer builds,
 * whose kernels are instrumented, allocations are heap memory instead, so that AddressSanitizer
 * reports an overrun with the kernel's line, and no handler is installed.
 */
#ifndef FT_CUDA_EMU_GUARD_H
#define FT_CUDA_EMU_GUARD_H

#include <stddef.h>

/* bytes of device memory, 256-byte aligned, its pages filled with the byte fill (or, with fill
 * -1, zeros as fresh pages are); NULL with errno when out of memory or mappings. */
void *ft_emu_guard_alloc(size_t bytes, int fill);
/* Releases p; a pointer that is no live buffer (freed twice) aborts the process. */
void ft_emu_guard_free(void *p);

/* Installs the SIGSEGV and SIGBUS handler once per process. 0, or -1 with errno. */
int ft_emu_guard_install(void);

/* The kernel a launch runs from now on (its name must outlive the launch); NULL when it ends. */
void ft_emu_guard_running(const char *kernel);

#endif
