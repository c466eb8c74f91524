/* status.c: error records (see core/status.h). */
#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *ft_status_name(ft_status s) {
    switch (s) {
    case FT_OK: return "OK";
    case FT_EINVAL: return "EINVAL";
    case FT_ESHAPE: return "ESHAPE";
    case FT_EFORMAT: return "EFORMAT";
    case FT_EIO: return "EIO";
    case FT_ENOMEM: return "ENOMEM";
    case FT_EUNSUPPORTED: return "EUNSUPPORTED";
    case FT_ENODEV: return "ENODEV";
    case FT_EVERIFY: return "EVERIFY";
    case FT_EBUSY: return "EBUSY";
    case FT_ETIMEDOUT: return "ETIMEDOUT";
    case FT_EINTERNAL: return "EINTERNAL";
    case FT_ELOST: return "ELOST";
    }
    return "E?";
}

int ft_text_control_len(const char *s) {
    const unsigned char *c = (const unsigned char *)s;
    if (*c == 0) return 0;
    if (*c < 0x20 || *c == 0x7f) return 1;
    return c[0] == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f ? 2 : 0;
}

void ft_text_printable(char *s, char c) {
    char *o = s;
    while (*s) {
        int k = ft_text_control_len(s);
        if (k) {
            *o++ = c;
            s += k;
        } else {
            *o++ = *s++;
        }
    }
    *o = '\0';
}

/* A message is one line: a control character that came in with a quoted input (a parser's
 * error text, a file name) becomes a space. */
void ft_err_one_line(char *msg) { ft_text_printable(msg, ' '); }

ft_status ft_err_set(ft_err *err, ft_status s, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        ft_err_one_line(err->msg);
        err->status = s;
    }
    return s;
}

ft_status ft_err_wrap(ft_err *err, const char *fmt, ...) {
    if (!err) return FT_EINTERNAL;
    char prefix[FT_ERR_MSG_LEN], old[FT_ERR_MSG_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    /* Truncation is acceptable here: the message is for people and stays NUL-terminated. */
    size_t n = strlen(prefix);
    if (n > sizeof err->msg - 3) n = sizeof err->msg - 3;
    memcpy(err->msg, prefix, n);
    memcpy(err->msg + n, ": ", 2);
    size_t room = sizeof err->msg - n - 3;
    size_t m = strlen(old);
    if (m > room) m = room;
    memcpy(err->msg + n + 2, old, m);
    err->msg[n + 2 + m] = '\0';
    ft_err_one_line(err->msg);
    return err->status;
}

void ft_err_clear(ft_err *err) {
    if (err) {
        err->status = FT_OK;
        err->msg[0] = '\0';
    }
}

ft_status ft_err_in_file(ft_err *err) {
    if (!err) return FT_EINTERNAL;
    if (err->status == FT_EINVAL) err->status = FT_EFORMAT;
    return err->status;
}
