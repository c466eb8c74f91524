/* test_template.c: @NAME@ substitution (core/template.h): values put in, "@@" for one '@', an
 * '@' in a value kept, an unknown variable or a stray '@' refused with the template's line, a
 * file read whole, a missing one named. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/template.h"
#include "ft_test.h"

static const ft_tvar vars[] = {{"P", "tk"}, {"U", "TK"}, {"MAIL", "a@b @P@ @@"}, {"EMPTY", ""}};
#define NVARS ((int)(sizeof vars / sizeof vars[0]))

/* text through the routine: the result (to free), or NULL with err set. */
static char *subst(const char *text, ft_err *err) {
    char *out = NULL;
    ft_err_clear(err);
    ft_status s = ft_template_subst("t.in", text, vars, NVARS, &out, err);
    FT_CHECK((s == FT_OK) == (out != NULL), "a result exactly when it succeeds (%d)", (int)s);
    return out;
}

static void expect(const char *text, const char *want) {
    ft_err err;
    char *got = subst(text, &err);
    FT_CHECK(got && !strcmp(got, want), "'%s' gave '%s' (%s), want '%s'", text,
             got ? got : "(null)", err.msg, want);
    free(got);
}

static void expect_error(const char *text, const char *words) {
    ft_err err;
    char *got = subst(text, &err);
    FT_CHECK(!got && err.status == FT_EINVAL && strstr(err.msg, words), "'%s': '%s' (want '%s')",
             text, got ? got : err.msg, words);
    FT_CHECK(!strchr(err.msg, '\n'), "one line: '%s'", err.msg);
    free(got);
}

static void test_substitution(void) {
    expect("", "");
    expect("no placeholders\n", "no placeholders\n");
    expect("@P@_run(@U@_OK)", "tk_run(TK_OK)");
    expect("#define @U@_H\n@P@@P@", "#define TK_H\ntktk");
    expect("[@EMPTY@]", "[]");
    expect("at the end: @P@", "at the end: tk");
}

static void test_at_signs(void) {
    expect("mail: @@ and @@@P@", "mail: @ and @tk");
    expect("@MAIL@", "a@b @P@ @@"); /* a value is put in as it is */
    expect("@@P@@", "@P@");         /* "@@" first: the name between is text */
}

static void test_errors(void) {
    expect_error("line 1\nline 2 @NOPE@\n", "t.in:2: unknown variable @NOPE@");
    expect_error("@p@", "unknown variable @p@"); /* names are case-sensitive */
    expect_error("an @ alone", "t.in:1: an '@' that opens no @NAME@");
    expect_error("trailing @", "write @@");
    expect_error("@P", "t.in:1:");
    expect_error("@1X@", "t.in:1:");
}

static void test_files(void) {
    char dir[] = "/tmp/ft_test_template.XXXXXX", path[256];
    FT_CHECK(mkdtemp(dir) != NULL, "a temporary folder");
    snprintf(path, sizeof path, "%s/a.in", dir);
    FILE *f = fopen(path, "w");
    FT_CHECK(f != NULL, "%s", path);
    if (!f) return;
    fputs("x @P@ y\n", f);
    fclose(f);
    char *text = NULL;
    ft_err err = {0};
    FT_CHECK(ft_template_load(path, &text, &err) == FT_OK && text && !strcmp(text, "x @P@ y\n"),
             "load: '%s' %s", text ? text : "(null)", err.msg);
    free(text);
    unlink(path);
    text = (char *)1;
    FT_CHECK(ft_template_load(path, &text, &err) == FT_EIO && text == NULL, "a missing file");
    FT_CHECK(strstr(err.msg, "template ") && strstr(err.msg, path) &&
                 strstr(err.msg, "No such file"),
             "the message names it: '%s'", err.msg);
    rmdir(dir);
}

int main(void) {
    FT_RUN(test_substitution);
    FT_RUN(test_at_signs);
    FT_RUN(test_errors);
    FT_RUN(test_files);
    return ft_test_finish();
}
