/* template.c: @NAME@ substitution in text files (template.h). */
#include "core/template.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A character of a name: a letter, '_' or (not first) a digit. */
static int name_char(char c, int first) {
    return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (!first && c >= '0' && c <= '9');
}

/* The length of the name a placeholder at text ("@NAME@") holds, or 0 when it holds none. */
static size_t name_len(const char *text) {
    size_t n = 0;
    while (name_char(text[1 + n], n == 0))
        n++;
    return n && text[1 + n] == '@' ? n : 0;
}

static const ft_tvar *find_var(const ft_tvar *vars, int nvars, const char *name, size_t len) {
    for (int i = 0; i < nvars; i++)
        if (strlen(vars[i].name) == len && !strncmp(vars[i].name, name, len)) return &vars[i];
    return NULL;
}

static int line_of(const char *text, const char *at) {
    int line = 1;
    for (const char *c = text; c < at; c++)
        line += *c == '\n';
    return line;
}

ft_status ft_template_subst(const char *where, const char *text, const ft_tvar *vars, int nvars,
                            char **out, ft_err *err) {
    char *buf = NULL;
    size_t size = 0;
    FILE *m = open_memstream(&buf, &size);
    *out = NULL;
    if (!m) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", where);
    ft_status s = FT_OK;
    for (const char *c = text; *c && !s;) {
        const char *at = strchr(c, '@');
        size_t plain = at ? (size_t)(at - c) : strlen(c);
        fwrite(c, 1, plain, m);
        if (!at) break;
        size_t n = name_len(at);
        const ft_tvar *v = n ? find_var(vars, nvars, at + 1, n) : NULL;
        if (at[1] == '@') {
            fputc('@', m);
            c = at + 2;
        } else if (v) {
            fputs(v->value, m);
            c = at + n + 2;
        } else if (n) {
            s = ft_err_set(err, FT_EINVAL, "%s:%d: unknown variable @%.*s@", where,
                           line_of(text, at), (int)n, at + 1);
        } else {
            s = ft_err_set(err, FT_EINVAL,
                           "%s:%d: an '@' that opens no @NAME@ (write @@ for one '@')", where,
                           line_of(text, at));
        }
    }
    if (fclose(m) != 0 && !s) s = ft_err_set(err, FT_ENOMEM, "%s: out of memory", where);
    if (s)
        free(buf);
    else
        *out = buf;
    return s;
}

ft_status ft_template_load(const char *path, char **out, ft_err *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return ft_err_set(err, FT_EIO, "template %s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (cap - len < 4096) {
            char *nb = realloc(buf, cap + 65536);
            if (!nb) {
                free(buf);
                fclose(f);
                return ft_err_set(err, FT_ENOMEM, "template %s: out of memory", path);
            }
            buf = nb;
            cap += 65536;
        }
        got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
    } while (got > 0);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return ft_err_set(err, FT_EIO, "template %s: read failed", path);
    }
    buf[len] = '\0';
    *out = buf;
    return FT_OK;
}
