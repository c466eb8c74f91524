/* status.h: error reporting for the flaretune library.
 *
 * The library never exits and never prints: a function that can fail returns an ft_status and,
 * when given an ft_err, fills it with one human-readable line that says what went wrong and where
 * (the tensor, the file, the attribute). Only the command-line front end prints and exits.
 */
#ifndef FLARETUNE_STATUS_H
#define FLARETUNE_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ft_status {
    FT_OK = 0,
    FT_EINVAL,       /* bad argument: unknown op, attribute, preset, value out of range */
    FT_ESHAPE,       /* tensor shapes disagree with each other or with the op */
    FT_EFORMAT,      /* malformed file (.npy, profile, event log) */
    FT_EIO,          /* file system error */
    FT_ENOMEM,       /* allocation failed */
    FT_EUNSUPPORTED, /* valid request this build or backend cannot do */
    FT_ENODEV,       /* the backend's device is not present */
    FT_EVERIFY,      /* a result disagrees with the reference */
    FT_EBUSY,        /* another process holds it (an event log being written) */
    FT_ETIMEDOUT,    /* a call ran past its time limit and was stopped */
    FT_EINTERNAL,    /* a bug: an invariant did not hold */
    FT_ELOST,        /* the device is lost to this process: a kernel faulted on the GPU (an
                      * illegal address, a trap), which leaves its CUDA context unusable; only a
                      * new process can use the GPU again */
} ft_status;

#define FT_ERR_MSG_LEN 512

typedef struct ft_err {
    ft_status status;
    char msg[FT_ERR_MSG_LEN];
} ft_err;

/* Short stable name of a status ("EINVAL", ...). */
const char *ft_status_name(ft_status s);

/* Record an error in err (which may be NULL) and return s. printf-style message, no newline. */
ft_status ft_err_set(ft_err *err, ft_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Prefix the message already in err with "prefix: " (used to add context on the way up). */
ft_status ft_err_wrap(ft_err *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* A bad value read from a file is a malformed file (FT_EFORMAT: exit 1), not a bad argument
 * (FT_EINVAL: exit 2): err's status is made so where it was FT_EINVAL. Returns the status. */
ft_status ft_err_in_file(ft_err *err);

void ft_err_clear(ft_err *err);

/* Make msg one line of plain text, as every message is: each control character (a line break,
 * a carriage return, an escape that would start a terminal sequence) becomes a space. For text
 * that quotes input and is printed without going through ft_err_set (warnings). */
void ft_err_one_line(char *msg);

/* The length in bytes of the control character at s: 1 for C0 (a line break, an escape) and
 * DEL, 2 for a C1 control in UTF-8 (U+0080 to U+009F, which a terminal may take as a sequence
 * of its own: U+009B is CSI), 0 for anything else and at the end. */
int ft_text_control_len(const char *s);
/* s with each control character (ft_text_control_len) replaced by the character c, in place:
 * text from a file printed on one line of a terminal. */
void ft_text_printable(char *s, char c);

#ifdef __cplusplus
}
#endif
#endif
