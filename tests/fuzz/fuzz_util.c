/* fuzz_util.c: the input file and the checks every fuzz target shares (see fuzz.h). */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"

static int input_fd = -1;
static char input_path[4096];
static int input_is_tmp; /* a file in TMPDIR, removed at exit */

static void remove_tmp(void) {
    if (input_is_tmp) unlink(input_path);
}

static void open_input(void) {
#ifdef MFD_CLOEXEC
    input_fd = memfd_create("fuzz-input", MFD_CLOEXEC);
    if (input_fd >= 0) {
        snprintf(input_path, sizeof input_path, "/proc/self/fd/%d", input_fd);
        if (access(input_path, R_OK) == 0) return;
        close(input_fd); /* no /proc: fall back to a file */
        input_fd = -1;
    }
#endif
    const char *dir = getenv("TMPDIR");
    snprintf(input_path, sizeof input_path, "%s/ft-fuzz-input.XXXXXX",
             dir && dir[0] ? dir : "/tmp");
    input_fd = mkstemp(input_path);
    if (input_fd < 0) fuzz_fail("cannot create the input file %s: %s", input_path, strerror(errno));
    input_is_tmp = 1;
    atexit(remove_tmp);
}

const char *fuzz_input_path(const uint8_t *data, size_t size) {
    if (input_fd < 0) open_input();
    if (ftruncate(input_fd, 0) != 0) fuzz_fail("ftruncate: %s", strerror(errno));
    for (size_t done = 0; done < size;) {
        ssize_t w = pwrite(input_fd, data + done, size - done, (off_t)done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) fuzz_fail("writing the input file: %s", strerror(errno));
        done += (size_t)w;
    }
    return input_path;
}

void fuzz_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

void fuzz_check_err(ft_status s, const ft_err *err, const char *what) {
    if (s == FT_OK) return;
    FUZZ_CHECK(err->status == s, "%s returned %s but err holds %s (%s)", what, ft_status_name(s),
               ft_status_name(err->status), err->msg);
    FUZZ_CHECK(err->msg[0] != '\0', "%s failed with %s and no message", what, ft_status_name(s));
    FUZZ_CHECK(memchr(err->msg, '\0', sizeof err->msg) != NULL, "%s: unterminated message", what);
}

int fuzz_loaded(ft_status s, const ft_err *err, const void *obj, const char *what) {
    fuzz_check_err(s, err, what);
    if (s == FT_OK) return 1;
    FUZZ_CHECK(obj == NULL, "%s failed (%s) but returned a result", what, err->msg);
    return 0;
}
