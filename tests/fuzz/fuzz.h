/* fuzz.h: what the fuzz targets of tests/fuzz share.
 *
 * Each target is one LLVMFuzzerTestOneInput: built with clang and libFuzzer under ASan + UBSan
 * (cmake -DFT_FUZZ=ON, scripts/fuzz.sh), and built with the project's compiler and driver.c as
 * a ctest that replays the target's corpus (tests/fuzz/corpus/TARGET/) on every build.
 *
 * A finding is anything that stops the process: a sanitizer report, a leak, a timeout, an
 * allocation beyond the fuzzer's limit, or fuzz_fail() when a promise of the parser's header
 * does not hold for the input (a wrong answer, not only a memory error).
 */
#ifndef FT_FUZZ_H
#define FT_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A path naming a file that holds exactly data[0..size): an in-memory file (memfd) reached
 * through /proc/self/fd, or a temporary file where memfd is missing; the same path is rewritten
 * by every call. Aborts when neither can be made (the target cannot run at all). */
const char *fuzz_input_path(const uint8_t *data, size_t size);

/* Report a broken promise and abort (libFuzzer then saves the input as a crash). */
void fuzz_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;

#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) fuzz_fail(__VA_ARGS__);                                                       \
    } while (0)

/* The error contract of the library: a failure returns the status err holds, with a message. */
void fuzz_check_err(ft_status s, const ft_err *err, const char *what);

/* The contract of a loader named what: fuzz_check_err, and no result (obj NULL) when it fails.
 * Returns whether it succeeded. */
int fuzz_loaded(ft_status s, const ft_err *err, const void *obj, const char *what);

#endif
