/* ft_emu.h: opening the SIMT emulator's device for a test program that runs on it.
 *
 *   static ft_dev *dev;
 *   int main(void) { ft_test_open_emu(&dev, NULL); FT_RUN(test_something); ... }
 */
#ifndef FT_EMU_H
#define FT_EMU_H

#include "cuda/device.h"
#include "ft_test.h"

/* Opens the emulator's device into *dev and, when probe names a kernel file, compiles it: the
 * program goes no further when either fails. It is skipped (77) where the emulator cannot run
 * here (FT_EUNSUPPORTED: no C++ compiler), else it exits 1, saying why. */
static inline void ft_test_open_emu(ft_dev **dev, const char *probe) {
    ft_err err = {0};
    ft_status s = ft_dev_open(FT_DEV_EMU, 0, dev, &err);
    if (s == FT_OK && probe) {
        ft_dev_module *m = NULL;
        s = ft_dev_compile(*dev, probe, NULL, 0, &m, &err);
    }
    if (s == FT_OK) return;
    if (s == FT_EUNSUPPORTED) ft_test_skip(err.msg);
    fprintf(stderr, "cannot start the emulator: %s\n", err.msg);
    exit(1);
}

#endif
