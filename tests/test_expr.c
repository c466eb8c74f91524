/* test_expr.c: the safe expression evaluator (core/expr.c) on cases worked out by Python's rules,
 * the T1 files' own expressions, and bad input.
 *
 * `test_expr --lines` reads "EXPRESSION" lines on stdin with the slots a=7, b=-3, c=2.5, d=0,
 * L=[4, 1, 9] and prints each result (Python's repr for numbers and lists, True/False as 1/0)
 * or "error": tests/test_expr_python.py compares it with Python on random expressions.
 */
#include <string.h>

#include "core/expr.h"
#include "ft_test.h"

static const char *const NAMES[] = {"a", "b", "c", "d", "L", "ProblemSize", "filter_width", "s"};
static ft_expr_value L_ITEMS[3], PS_ITEMS[2], FW_ITEMS[3];
static ft_expr_value SLOTS[8];

static void init_slots(void) {
    L_ITEMS[0] = ft_expr_int(4);
    L_ITEMS[1] = ft_expr_int(1);
    L_ITEMS[2] = ft_expr_int(9);
    PS_ITEMS[0] = ft_expr_int(4096);
    PS_ITEMS[1] = ft_expr_int(2048);
    FW_ITEMS[0] = ft_expr_int(3);
    FW_ITEMS[1] = ft_expr_int(15);
    FW_ITEMS[2] = ft_expr_int(7);
    SLOTS[0] = ft_expr_int(7);
    SLOTS[1] = ft_expr_int(-3);
    SLOTS[2] = ft_expr_float(2.5);
    SLOTS[3] = ft_expr_int(0);
    SLOTS[4] = ft_expr_list(L_ITEMS, 3);
    SLOTS[5] = ft_expr_list(PS_ITEMS, 2);
    SLOTS[6] = ft_expr_list(FW_ITEMS, 3);
    SLOTS[7] = ft_expr_str("row"); /* a string tunable's value */
}

/* Evaluate src and format the result (or "error: ..."). */
static void run(const char *src, char *out, size_t cap) {
    ft_expr *e = NULL;
    ft_err err = {0};
    if (ft_expr_compile(src, NAMES, 8, &e, &err) != FT_OK) {
        snprintf(out, cap, "error: %s", err.msg);
        return;
    }
    ft_expr_value *items = NULL;
    int n = 0;
    if (ft_expr_eval_list(e, SLOTS, &items, &n, &err) != FT_OK) {
        snprintf(out, cap, "error: %s", err.msg);
    } else {
        ft_expr_value v;
        ft_expr_value tmp;
        ft_err e2 = {0};
        int is_number = ft_expr_eval(e, SLOTS, &tmp, &e2) == FT_OK;
        v = is_number ? tmp : ft_expr_list(items, n);
        ft_expr_format(v, out, cap);
    }
    free(items);
    ft_expr_free(e);
}

static void expect(const char *src, const char *want) {
    char got[256];
    run(src, got, sizeof got);
    FT_CHECK(strcmp(got, want) == 0, "%s = %s, expected %s", src, got, want);
}

static void expect_error(const char *src, const char *fragment) {
    char got[512];
    run(src, got, sizeof got);
    FT_CHECK(strncmp(got, "error: ", 7) == 0 && strstr(got, fragment), "%s gave \"%s\", expected an error with \"%s\"",
             src, got, fragment);
    FT_CHECK(!strchr(got, '\n'), "%s: error of more than one line", src);
}

static void test_arithmetic(void) {
    expect("1 + 2 * 3", "7");
    expect("(1 + 2) * 3", "9");
    expect("7 // 2", "3");
    expect("-7 // 2", "-4");
    expect("7 // -2", "-4");
    expect("-7 % 3", "2");
    expect("7 % -3", "-2");
    expect("7 / 2", "3.5");
    expect("6 / 3", "2.0");
    expect("2 ** 10", "1024");
    expect("2 ** -1", "0.5");
    expect("-2 ** 2", "-4");
    expect("2 ** 3 ** 2", "512");
    expect("7.5 // 2", "3.0");
    expect("-7.5 % 2", "0.5");
    expect("1e3 + 1", "1001.0");
    expect("1_000 * 2", "2000");
    expect("a * b + c", "-18.5");
    expect("--a", "7");
    expect("+b", "-3");
}

static void test_logic(void) {
    expect("1 < 2 < 3", "1");
    expect("1 < 3 < 2", "0");
    expect("32 <= a * 8 <= 1024", "1");
    expect("a == 7.0", "1");
    expect("a != 7", "0");
    expect("not d", "1");
    expect("not a", "0");
    expect("d or 5", "5");
    expect("a and 0", "0");
    expect("a and b", "-3");
    expect("0 or 0.0", "0.0");
    expect("1 if d else 2", "2");
    expect("1 if a else 2", "1");
    expect("4 in L", "1");
    expect("5 not in L", "1");
    expect("True + True", "2");
    expect("d == 0 or 1 / d > 0", "1"); /* short-circuit: the division is never made */
    /* An integer against a float, exactly, as Python compares them: past 2**53 a double does not
     * hold every integer, and converting the integer would make these equal. */
    expect("9007199254740993 == 9007199254740992.0", "0");
    expect("2 ** 53 + 1 > 2.0 ** 53", "1");
    expect("9223372036854775807 == 9223372036854775807.0", "0");
    expect("9223372036854775807 < 9223372036854775807.0", "1");
    expect("-9223372036854775807 - 1 == -9223372036854775808.0", "1");
    expect("3 < 3.5 and 4 > 3.5 and 3 <= 3.0 and 3 >= 3.0", "1");
    expect("1e400 > 9223372036854775807", "1");
    expect("a == 0.0 / 1 or 7 < 1e400 * 0", "0"); /* a NaN compares false */
}

static void test_calls_and_lists(void) {
    expect("min(a, b, c)", "-3");
    expect_error("max(a)", "a list is needed");
    expect("max(L)", "9");
    expect("min(L)", "1");
    expect("max(filter_width) * max(filter_width)", "225");
    expect("ProblemSize[0] * ProblemSize[1]", "8388608");
    expect("ProblemSize[-1]", "2048");
    expect("L[1] + L[2]", "10");
    expect("len(L)", "3");
    expect("abs(b)", "3");
    expect("int(c)", "2");
    expect("int(-2.5)", "-2");
    expect("round(2.5)", "2");
    expect("round(3.5)", "4");
    expect("float(a)", "7.0");
    expect("[16, 32, 48]", "[16, 32, 48]");
    expect("list(range(1, 9, 3))", "[1, 4, 7]");
    expect("range(3)", "[0, 1, 2]");
    expect("range(5, 0, -2)", "[5, 3, 1]");
    /* at the ends of a long long: no item computed past them */
    expect("range(9223372036854775806, 9223372036854775807)", "[9223372036854775806]");
    expect("range(-9223372036854775807, 9223372036854775807, 6000000000000000000)",
           "[-9223372036854775807, -3223372036854775807, 2776627963145224193, "
           "8776627963145224193]");
    expect("[]", "[]");
    expect("[1, 2,]", "[1, 2]");
    expect("[5]", "[5]");
    /* + and * of lists, as Python */
    expect("[1] + [2, 3]", "[1, 2, 3]");
    expect("L + []", "[4, 1, 9]");
    expect("[7, 8] * 2", "[7, 8, 7, 8]");
    expect("2 * [0]", "[0, 0]");
    expect("[1] * -1", "[]");
    expect("len(L * 3)", "9");
}

/* Comprehensions: the way the FAIR benchmark hub's T1 files write their values. */
static void test_comprehensions(void) {
    expect("[2**i for i in range(0, 6)]", "[1, 2, 4, 8, 16, 32]");
    expect("[i for i in range(1, 11)]", "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]");
    expect("[32 * i for i in range(1, 4)]", "[32, 64, 96]");
    expect("[1] + [2 * i for i in range(1, 4)]", "[1, 2, 4, 6]");
    expect("[1, 2, 4, 8, 16] + list(range(32, 128+1, 32))", "[1, 2, 4, 8, 16, 32, 64, 96, 128]");
    /* the file's names inside, conditions, a conditional item, nesting */
    expect("[a * i for i in L if i > 1]", "[28, 63]");
    expect("[i for i in L if i > 1 if i < 9]", "[4]");
    expect("[i if i > 1 else 0 for i in L]", "[4, 0, 9]");
    expect("[x for x in [y * 2 for y in range(3)]]", "[0, 2, 4]");
    expect("[max([x, 5]) for x in L]", "[5, 5, 9]");
    expect("max([x * x for x in L])", "81");
    expect("[i for i in []]", "[]");
    /* a variable is bound in its own comprehension only */
    expect_error("[i for j in L]", "unknown name 'i'");
    expect_error("[y + x for x in [y for y in range(3)]]", "unknown name 'y'");
    expect_error("[i for i in range(i)]", "unknown name 'i'");
    expect_error("[zz]", "unknown name 'zz' at column 2");
    expect_error("[a for a in L]", "may not reuse a name of the file");
    expect_error("[i for i in L for j in L]", "nested loops are not read");
    expect_error("[i for i in 3]", "a loop over a number");
    expect_error("[[i] for i in L]", "a list of lists");
    expect_error("[i for in L]", "expected a name after 'for'");
    expect_error("[i for i L]", "expected 'in'");
    expect_error("[i for i in L", "expected ']'");
    expect_error("[1] * 100000000", "list too long");
    expect_error("[1] * 2.0", "a list where a number is needed");
    expect_error("[1] + 1", "a list where a number is needed");
    expect_error("[x for x in [x for x in [x for x in [x for x in [x for x in [x for x in [x for x "
                 "in [x for x in [x for x in L]]]]]]]]]",
                 "too many comprehensions");
}

/* The T1 files' expressions (FAIR benchmark hub: convolution, dedispersion). */
static void test_t1_expressions(void) {
    const char *const names[] = {"block_size_x", "block_size_y", "tile_size_x", "tile_size_y",
                                 "use_padding",  "use_shmem",    "filter_width", "filter_height"};
    ft_expr_value v[8] = {ft_expr_int(48), ft_expr_int(16), ft_expr_int(2), ft_expr_int(3),
                          ft_expr_int(1),  ft_expr_int(1),  ft_expr_int(15), ft_expr_int(15)};
    /* Each holds at these values. */
    const char *const holds[] = {
        "use_padding==0 or block_size_x % 32 != 0",
        "block_size_x*block_size_y<=1024",
        "use_padding==0 or use_shmem != 0",
        /* (48*2+14) * (16*3+14) = 110 * 62 = 6820 < 12288 */
        ("use_shmem == 0 or (((block_size_x*tile_size_x+(filter_width-1)))*((block_size_y*tile_"
         "size_y+(filter_height-1)))) < 12*1024"), /* one string (clang's -Wstring-concatenation) */
        "32 <= block_size_x * block_size_y <= 1024",
        "tile_size_x > 1 or use_padding == 0",
        "block_size_x * block_size_y * tile_size_y > 2048",
    };
    for (size_t i = 0; i < sizeof holds / sizeof holds[0]; i++) {
        ft_expr *e = NULL;
        ft_err err = {0};
        FT_CHECK(ft_expr_compile(holds[i], names, 8, &e, &err) == FT_OK, "%s: %s", holds[i], err.msg);
        if (!e) continue;
        int t = -1;
        FT_CHECK(ft_expr_truth(e, v, &t, &err) == FT_OK && t == 1, "%s: %d", holds[i], t);
        ft_expr_free(e);
    }
    ft_expr *e = NULL;
    ft_err err = {0};
    FT_CHECK(ft_expr_compile("(262144 // block_size_x) // tile_size_x", names, 8, &e, &err) == FT_OK, "%s",
             err.msg);
    ft_expr_value r;
    FT_CHECK(e && ft_expr_eval(e, v, &r, &err) == FT_OK && r.kind == FT_EXPR_INT && r.i == 2730, "grid %lld",
             r.i);
    FT_CHECK(e && ft_expr_uses(e, 0) && ft_expr_uses(e, 2) && !ft_expr_uses(e, 1), "slots used");
    ft_expr_free(e);
}

/* Strings and tuples, as T1 files write conditions on string tunables: they compare with each
 * other and are members of lists; with numbers they are never equal and never ordered. */
static void test_strings_and_tuples(void) {
    expect("s == 'row'", "1");
    expect("s != \"col\"", "1");
    expect("s in ['row', 'col']", "1");
    expect("s not in ('col', 'tile')", "1");
    expect("'a' < 'b' <= 'b'", "1");
    expect("s == 'col' or a == 7", "1");
    expect("'x' == 1", "0");
    expect("1 != 'x'", "1");
    expect("len(s)", "3");
    expect("(s if a else 'none') == 'row'", "1");
    expect("['row', 'col']", "['row', 'col']");
    expect("[\"it's\", '']", "[\"it's\", '']");
    expect("a in (7, 8)", "1");
    expect("(a,)", "[7]");
    expect("()", "[]");
    expect("(a)", "7");
    expect("[x for x in ('p', 'q') if x != 'p']", "['q']");
    expect_error("'x' < 1", "a string compared by order with a number");
    expect_error("s + 'x'", "arithmetic on a string");
    expect_error("-s", "a string where a number is needed");
    expect_error("abs(s)", "abs() takes one number");
    expect_error("s[0]", "indexing a string");
    expect_error("[x for x in s]", "a loop over a string");
    expect_error("max('a', 'b')", "a string where a number is needed");
    /* a string is no number: an evaluation that needs one says so */
    ft_expr *e = NULL;
    ft_err err = {0};
    ft_expr_value v;
    FT_CHECK(ft_expr_compile("s", NAMES, 8, &e, &err) == FT_OK &&
                 ft_expr_eval(e, SLOTS, &v, &err) == FT_EINVAL &&
                 strstr(err.msg, "a string where a number is needed"),
             "eval of a string: %s", err.msg);
    int truth = 0;
    FT_CHECK(ft_expr_truth(e, SLOTS, &truth, &err) == FT_OK && truth == 1, "'row' is true");
    ft_expr_free(e);
}

static void test_errors(void) {
    expect_error("", "empty");
    expect_error("1 +", "unexpected end");
    expect_error("1 / d", "division by zero");
    expect_error("a // d", "division by zero");
    expect_error("a % d", "modulo by zero");
    expect_error("zz + 1", "unknown name 'zz'");
    expect_error("__import__('os')", "unknown function '__import__'");
    expect_error("open('x')", "unknown function 'open'");
    expect_error("a; b", "unexpected character ';'");
    expect_error("'it\\'s'", "a backslash in a string");
    expect_error("'open", "without its closing quote");
    expect_error("a.b", "unexpected character '.'");
    expect_error("a b", "unexpected text");
    expect_error("L + 1", "a list where a number is needed");
    expect_error("L[3]", "index 3 out of range");
    expect_error("a[0]", "indexing a number");
    expect_error("L[c]", "not an integer");
    expect_error("9223372036854775807 + 1", "integer overflow");
    expect_error("99999999999999999999", "integer too large");
    expect_error("2 ** 64", "integer overflow");
    expect_error("min()", "of nothing");
    expect_error("range(0, 10, 0)", "step is zero");
    expect_error("range(1 << 30)", "expected a value");
    expect_error("range(100000000)", "list too long");
    /* a count beyond what a long long holds (found by fuzz_t1) */
    expect_error("min(range(9223372036854775807)) + 3", "list too long");
    expect_error("1 if a", "expected 'else'");
    expect_error("(1 + 2", "expected ')'");
    expect_error("lambda: 1", "unexpected 'lambda'");
    expect_error("a not b", "expected 'in'");
    expect_error("12abc", "malformed number");
    expect_error("L < L", "compared by order");
    /* nesting past the limit is refused, not a stack overflow */
    char deep[400];
    size_t n = 0;
    for (int i = 0; i < 150; i++) deep[n++] = '(';
    deep[n++] = '1';
    for (int i = 0; i < 150; i++) deep[n++] = ')';
    deep[n] = 0;
    expect_error(deep, "nested too deeply");
    char negs[300];
    memset(negs, '-', 200);
    strcpy(negs + 200, "1");
    expect_error(negs, "nested too deeply");
}

static int lines_mode(void) {
    char line[4096], out[8192];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        run(line, out, sizeof out);
        if (strncmp(out, "error: ", 7) == 0) strcpy(out, "error");
        printf("%s\n", out);
    }
    return 0;
}

int main(int argc, char **argv) {
    init_slots();
    if (argc > 1 && strcmp(argv[1], "--lines") == 0) return lines_mode();
    FT_RUN(test_arithmetic);
    FT_RUN(test_logic);
    FT_RUN(test_calls_and_lists);
    FT_RUN(test_comprehensions);
    FT_RUN(test_t1_expressions);
    FT_RUN(test_strings_and_tuples);
    FT_RUN(test_errors);
    return ft_test_finish();
}
