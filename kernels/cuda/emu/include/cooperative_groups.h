/* cooperative_groups.h under the SIMT emulator: cooperative groups (and clusters through them) is
 * not emulated (see docs/kernel-dialect.md). */
#ifndef FT_EMU_STUB_COOPERATIVE_GROUPS_H
#define FT_EMU_STUB_COOPERATIVE_GROUPS_H
#error                                                                                             \
    "cooperative groups (and clusters through them) is not emulated under FT_EMU: kernels use only what ft_cuda.h offers"
#endif
