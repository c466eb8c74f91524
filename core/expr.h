/* expr.h: a small, safe evaluator of the Python expressions tuning files carry.
 *
 * The community's tuning problem files (FAIR T1, Kernel Tuner's restrictions) write their
 * constraints, sizes and launch geometry as Python expressions over the tunable parameters:
 * "block_size_x*block_size_y<=1024", "32 <= bx * by <= 1024", "(262144 // bx) // tx",
 * "ProblemSize[0]*ProblemSize[1]", "max(filter_width)". This evaluates that subset without a
 * Python, a shell or anything that can reach outside the expression:
 *
 *   literals    integers (64-bit), decimals (double), True, False, lists [a, b, ...] and
 *               tuples (a, b, ...) (read as lists), strings 'abc' or "abc" (no escapes: a
 *               backslash in one is an error), which compare with each other (== != < <= > >=,
 *               `in` a list) and with nothing else (== with a number is false, < an error)
 *   names       bound when compiled to slots the caller fills (an unknown name is an error then,
 *               before any evaluation); a slot holds a number or a list
 *   arithmetic  + - * / // % ** and unary - +, with Python's rules: / is always a float, //
 *               and % round toward negative infinity (the result of % takes the divisor's sign),
 *               an int with a float is a float; integer overflow is an error (Python would grow);
 *               list + list joins, list * int repeats
 *   lists       comprehensions [item for x in iterable if cond ...] with one `for` (nested
 *               comprehensions allowed; at most 8 in an expression), as the community's T1 files
 *               write values: "[2**i for i in range(0, 6)]", "[1] + [2 * i for i in range(1, 11)]";
 *               a loop variable may not reuse a slot's name
 *   comparison  < <= > >= == != chained as Python does (a < b <= c), and `in` / `not in` a list
 *   logic       and, or (yielding the deciding operand, as Python), not; `A if C else B`
 *   calls       min, max (of arguments, or of one list), abs, int, float, round, len, and
 *               range / list (yielding lists, for parameter values such as "list(range(1, 9))")
 *   indexing    list[i], negative i from the end
 *
 * Compiled once, evaluated many times: an expression's nodes live in one allocation, and an
 * evaluation allocates nothing unless it builds a list. Errors are one line each, naming the
 * expression and the position or the operation.
 */
#ifndef FLARETUNE_EXPR_H
#define FLARETUNE_EXPR_H

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { FT_EXPR_INT = 0, FT_EXPR_FLOAT, FT_EXPR_LIST, FT_EXPR_STR } ft_expr_kind;

typedef struct ft_expr_value {
    ft_expr_kind kind;
    long long i;                        /* FT_EXPR_INT (True and False are 1 and 0)   */
    double f;                           /* FT_EXPR_FLOAT                              */
    const struct ft_expr_value *items;  /* FT_EXPR_LIST: borrowed, of scalars         */
    int n;
    const char *s; /* FT_EXPR_STR: borrowed (a literal's lives as long as its expression) */
} ft_expr_value;

typedef struct ft_expr ft_expr;

/* The longest expression compiled (bytes) and the deepest nesting; past them, an error. */
#define FT_EXPR_MAX_LEN   16384
#define FT_EXPR_MAX_DEPTH 64

/* Compile `src`; names[i] is the name of slot i (nnames of them; NULL with 0: no names). */
ft_status ft_expr_compile(const char *src, const char *const *names, int nnames, ft_expr **out,
                          ft_err *err);
void ft_expr_free(ft_expr *e);
/* The text it was compiled from. */
const char *ft_expr_text(const ft_expr *e);
/* Whether slot i is read by the expression. */
int ft_expr_uses(const ft_expr *e, int slot);

/* Evaluate to a number (a list result is an error). slots has the compiled nnames values. */
ft_status ft_expr_eval(const ft_expr *e, const ft_expr_value *slots, ft_expr_value *out,
                       ft_err *err);
/* Evaluate to a truth value (Python's: nonzero numbers and non-empty lists are true). */
ft_status ft_expr_truth(const ft_expr *e, const ft_expr_value *slots, int *out, ft_err *err);
/* Evaluate to a list of numbers, in a malloc'd array *items of *n (free() it); a number is a
 * list of one. */
ft_status ft_expr_eval_list(const ft_expr *e, const ft_expr_value *slots, ft_expr_value **items,
                            int *n, ft_err *err);

/* Constructors and helpers. */
ft_expr_value ft_expr_int(long long v);
ft_expr_value ft_expr_float(double v);
ft_expr_value ft_expr_list(const ft_expr_value *items, int n);
ft_expr_value ft_expr_str(const char *s);
/* The value as a double (a list or a string: NaN). */
double ft_expr_number(ft_expr_value v);
/* Format a number as Python prints it ("16", "0.5", "1e-05"); lists as "[1, 2]". */
int ft_expr_format(ft_expr_value v, char *buf, size_t cap);
/* Python's ==. */
int ft_expr_equal(ft_expr_value a, ft_expr_value b);

#ifdef __cplusplus
}
#endif
#endif
