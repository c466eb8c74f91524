/* emu_guard.h: the emulator's device memory, fenced.
 *
 * On the emulator a kernel's buffers are host memory and its loads and stores are the host's,
 * so a kernel that reaches past a buffer (an argument declared smaller than the kernel reads)
 * would read another allocation or corrupt the heap, and crash far from the cause. Each
 * allocation here is a mapping of its own that ends, 256-byte aligned, against a page nothing
 * may touch; while a launch runs, a fault ends the process with one line naming the kernel and
 * where it reached (how far past the end of a buffer of how many bytes), as an illegal address
 * ends a CUDA context on a GPU. Outside a launch a fault is left to the handler installed before.
 * In sanitizer builds, whose kernels are instrumented, allocations are heap memory instead, so
 * that AddressSanitizer reports an overrun with the kernel's line, and no handler is installed.
 */
#ifndef FT_CUDA_EMU_GUARD_H
#define FT_CUDA_EMU_GUARD_H

#include <stddef.h>

/* bytes of device memory, 256-byte aligned, ending within 255 bytes of a guard page; NULL when
 * out of memory. Fresh pages read as zeros. */
void *ft_emu_guard_alloc(size_t bytes);
void ft_emu_guard_free(void *p);

/* Installs the SIGSEGV and SIGBUS handler once per process. 0, or -1 with errno. */
int ft_emu_guard_install(void);

/* The kernel a launch runs from now on (its name must outlive the launch); NULL when it ends. */
void ft_emu_guard_running(const char *kernel);

#endif
