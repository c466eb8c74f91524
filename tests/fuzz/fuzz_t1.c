/* fuzz_t1.c: the FAIR T1 reader (tuner/t1.c) and the expression evaluator under it
 * (core/expr.c) on arbitrary bytes.
 *
 * Reads the input as a T1 file (ft_t1_from_buffer, with no kernel folder, so the kernel file is
 * not looked for), and on one that reads: every configuration of its space (up to 4096) checked
 * against the conditions, each allowed one launched and turned into defines and a key. Also
 * reads the input's first line as an expression over four names and evaluates it (number,
 * truth, list).
 *
 * A finding, besides a sanitizer report, a leak or a timeout: a failure without its status and
 * message, or a message of more than one line; a file that reads but whose default is not
 * allowed, or that launches a grid or block below 1; more allowed configurations than the
 * space has; a key with fewer fields than parameters.
 */
#include <stdlib.h>
#include <string.h>

#include "core/expr.h"
#include "tuner/t1.h"
#include "fuzz.h"

static void one_line(ft_status s, const ft_err *err, const char *what) {
    fuzz_check_err(s, err, what);
    if (s) FUZZ_CHECK(!strchr(err->msg, '\n'), "%s: a message of two lines: %s", what, err->msg);
}

static void expression(const uint8_t *data, size_t size) {
    size_t n = 0;
    while (n < size && n < 4096 && data[n] != '\n') n++;
    char *src = malloc(n + 1);
    if (!src) return;
    memcpy(src, data, n);
    src[n] = 0;
    static const char *const names[] = {"a", "b", "L", "ProblemSize"};
    ft_expr_value items[3] = {ft_expr_int(3), ft_expr_float(0.5), ft_expr_int(-7)};
    ft_expr_value slots[4] = {ft_expr_int(12), ft_expr_float(-2.25), ft_expr_list(items, 3),
                              ft_expr_list(items, 2)};
    ft_expr *e = NULL;
    ft_err err = {0};
    ft_status s = ft_expr_compile(src, names, 4, &e, &err);
    one_line(s, &err, "ft_expr_compile");
    if (s == FT_OK) {
        ft_expr_value v;
        int truth;
        ft_expr_value *list = NULL;
        int nl = 0;
        one_line(ft_expr_eval(e, slots, &v, &err), &err, "ft_expr_eval");
        one_line(ft_expr_truth(e, slots, &truth, &err), &err, "ft_expr_truth");
        one_line(ft_expr_eval_list(e, slots, &list, &nl, &err), &err, "ft_expr_eval_list");
        char buf[64];
        for (int i = 0; i < nl && i < 8; i++) ft_expr_format(list[i], buf, sizeof buf);
        free(list);
        ft_expr_free(e);
    }
    free(src);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    expression(data, size);
    ft_t1 *t = NULL;
    ft_err err = {0};
    ft_status s = ft_t1_from_buffer((const char *)data, size, "fuzz", NULL, NULL, &t, &err);
    one_line(s, &err, "ft_t1_from_buffer");
    if (s != FT_OK) return 0;
    ft_config def;
    ft_config_default(&t->space, &def);
    int ok = 0;
    s = ft_t1_allowed(t, &def, &ok, NULL, 0, &err);
    FUZZ_CHECK(s == FT_OK && ok, "the default is not allowed (%s)", err.msg);
    int64_t total = ft_space_size(&t->space), allowed = 0;
    for (int64_t k = 0; k < total && k < 4096; k++) {
        ft_config c;
        ft_space_config_at(&t->space, k, &c);
        s = ft_t1_allowed(t, &c, &ok, NULL, 0, &err);
        one_line(s, &err, "ft_t1_allowed");
        if (s || !ok) continue;
        allowed++;
        long long g[3], b[3];
        s = ft_t1_launch(t, &c, g, b, &err);
        one_line(s, &err, "ft_t1_launch");
        if (s == FT_OK)
            for (int d = 0; d < 3; d++) FUZZ_CHECK(g[d] >= 1 && b[d] >= 1, "grid or block below 1");
        char defs[FT_T1_MAX_DEFINES][96], key[4096];
        int nd = ft_t1_defines(t, &c, defs, FT_T1_MAX_DEFINES);
        FUZZ_CHECK(nd == t->space.nparams + 1, "%d defines for %d parameters", nd, t->space.nparams);
        ft_t1_key(t, &c, key, sizeof key);
        int commas = 0;
        for (const char *p = key; *p; p++) commas += *p == ',';
        FUZZ_CHECK(commas >= t->space.nparams - 1, "key %s", key);
    }
    FUZZ_CHECK(allowed <= total, "more allowed than the space");
    if (total <= 4096) {
        ft_config *cfgs = NULL;
        int64_t n = 0;
        s = ft_t1_enumerate(t, &cfgs, &n, &err);
        one_line(s, &err, "ft_t1_enumerate");
        FUZZ_CHECK(s || n == allowed, "enumerated %lld, counted %lld", (long long)n, (long long)allowed);
        free(cfgs);
    }
    ft_t1_free(t);
    return 0;
}
