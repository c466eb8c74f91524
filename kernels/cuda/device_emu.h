/* device_emu.h: settings of the emulator device (FT_DEV_EMU) beyond include/flaretune/device.h.
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
 *   FLARETUNE_KERNEL_DIR=DIR  the kernels/ folder sources are named from ("fusion/fusion.cu"; default: the source tree's)
 *   FLARETUNE_CACHE_DIR=DIR   the module cache (default ~/.cache/flaretune); modules go in DIR/emu
 */
#ifndef FT_DEVICE_EMU_H
#define FT_DEVICE_EMU_H

#include "flaretune/device.h"

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

#endif
