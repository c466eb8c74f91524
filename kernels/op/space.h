/* space.h: the tunable parameters of an op on a backend, and configurations in that space.
 *
 * Each kernel implementation declares its parameters in one place: a name, the candidate
 * values, a default, a line saying why it matters, and a constraint function that rejects the
 * combinations that cannot run or would duplicate another. The tuner, `flaretune space`, `exec
 * --config` and the variant tests all read this declaration and nothing else.
 *
 * A parameter is numeric (values are the numbers themselves) or named (labels[i] names value i,
 * values are 0..n-1), such as a strategy. Configurations are written "name=value,name=value"
 * with labels for named parameters; unnamed parameters keep their default.
 */
#ifndef FLARETUNE_SPACE_H
#define FLARETUNE_SPACE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FT_MAX_PARAMS 24
#define FT_MAX_VALUES 64

enum {
    /* Candidate values filled in at run time from the machine: powers of two below the number
     * of online CPUs, and that number itself (the default). */
    FT_PARAM_THREADS = 1 << 0,
};

typedef struct ft_param {
    const char *name;
    const char *doc; /* why this parameter changes how the work is done */
    int n;           /* number of candidate values */
    int values[FT_MAX_VALUES];
    const char *const *labels; /* NULL, or names of the values 0..n-1 */
    int def;                   /* default value */
    unsigned flags;
} ft_param;

/* A parameter's initializer, its candidate values last and counted: FT_PARAM("tile", "why it
 * matters", NULL, 128, 32, 128, 512) (labels NULL: numeric; no flags). */
#define FT_PARAM(name, doc, labels, def, ...)                                                      \
    { name, doc, FT_NVALUES(__VA_ARGS__), {__VA_ARGS__}, labels, def, 0 }
#define FT_NVALUES(...) ((int)(sizeof((const int[]){__VA_ARGS__}) / sizeof(int)))
/* The threads parameter of a CPU kernel (FT_PARAM_THREADS: its values are the machine's). */
#define FT_THREADS_PARAM(doc)                                                                      \
    { "threads", doc, 1, {1}, NULL, 1, FT_PARAM_THREADS }

/* One point of a space: v[i] is the value of parameter i. */
typedef struct ft_config {
    int n;
    int v[FT_MAX_PARAMS];
} ft_config;

struct ft_call;

typedef struct ft_space {
    ft_param *params;
    int nparams;
    /* Human-readable constraints, NULL-terminated (printed by `flaretune space`). */
    const char *const *constraints;
    /* What cfg is at this call's sizes (NULL: every config is valid): FT_CONFIG_VALID, or
     * FT_CONFIG_INVALID (it cannot run) or FT_CONFIG_DUPLICATE (it runs, but at these sizes it
     * does the same work as another config that is kept: a tile or chunk covering a whole
     * dimension), the last two with one line saying why. The call's sizes and attributes are
     * set; its tensors may not be allocated. */
    int (*valid)(const struct ft_call *c, const ft_config *cfg, char *why, size_t n);
} ft_space;

/* The verdicts of ft_space.valid. A tuner enumerates the valid configs of the shape it times;
 * a backend runs valid and duplicate ones (a config distinct at the timing shape may duplicate
 * another at the smaller shape it is verified at). */
enum { FT_CONFIG_INVALID = 0, FT_CONFIG_VALID = 1, FT_CONFIG_DUPLICATE = 2 };

/* A rule's verdict with its line: writes the printf-style reason into why (when why is not
 * NULL) and returns verdict, so a rule reads
 * `if (...) return ft_config_why(FT_CONFIG_INVALID, why, n, "...", ...);`. Inline: the CPU
 * kernels an emitted package copies use it without space.c. */
__attribute__((format(printf, 4, 5))) static inline int
ft_config_why(int verdict, char *why, size_t n, const char *fmt, ...) {
    if (why && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, n, fmt, ap);
        va_end(ap);
    }
    return verdict;
}

/* Fill the machine-dependent candidate values (FT_PARAM_THREADS) of a space. Idempotent and
 * thread-safe; a backend resolves its spaces before it hands them out. */
void ft_space_resolve(ft_space *s, int ncpu);

void ft_config_default(const ft_space *s, ft_config *cfg);
int ft_space_param(const ft_space *s, const char *name); /* index, -1 if none */
/* Tunables renamed so their names say what they are (cpt -> vecs_per_thread, ...): the current
 * name of a former one in s, or NULL when `name` is not a former name of a parameter of s (a
 * name s still has is never read as a former one). Records written before a rename (profiles,
 * event logs) are read with it; what a user types gets the new name in its error. */
const char *ft_space_renamed(const ft_space *s, const char *name);
/* Parse "name=value,..." on top of the defaults. Unknown names and values outside the
 * candidates are errors that list what is allowed; a former name is an error naming the
 * current one; a name given twice is an error. */
ft_status ft_config_parse(const ft_space *s, const char *text, ft_config *cfg, ft_err *err);
/* "name=value,..." with every parameter, labels for named ones. */
void ft_config_format(const ft_space *s, const ft_config *cfg, char *buf, size_t n);
/* Value of parameter i as text (label or number). */
void ft_config_value_str(const ft_space *s, int i, int value, char *buf, size_t n);
int ft_config_equal(const ft_config *a, const ft_config *b);

/* Number of configurations before constraints (product of the candidate counts); INT64_MAX
 * when the product is larger (a T1 file's 24 parameters of 64 values each could make it). */
int64_t ft_space_size(const ft_space *s);
/* The k-th configuration in mixed-radix order (the last parameter varies fastest), k in
 * [0, ft_space_size). */
void ft_space_config_at(const ft_space *s, int64_t k, ft_config *cfg);
/* Inverse of ft_space_config_at; -1 if a value is not a candidate. */
int64_t ft_space_index_of(const ft_space *s, const ft_config *cfg);
/* Is cfg valid for the call (candidates, then the space's constraint), and distinct from every
 * other valid config? */
int ft_space_valid(const ft_space *s, const struct ft_call *c, const ft_config *cfg, char *why,
                   size_t n);
/* The space's verdict on cfg: FT_CONFIG_VALID, _DUPLICATE or _INVALID (a value that is not a
 * candidate is invalid). */
int ft_space_check(const ft_space *s, const struct ft_call *c, const ft_config *cfg, char *why,
                   size_t n);
/* Can cfg run this call (valid or a duplicate)? What a backend checks before it runs. */
int ft_space_runnable(const ft_space *s, const struct ft_call *c, const ft_config *cfg, char *why,
                      size_t n);
/* For a constraint where the values of p from `least` up all act alike (a chunk of at least as
 * many blocks as the batch has): the one of them a space keeps, the default when it is among
 * them (so the default is valid at every size), else the smallest; v itself when v < least. A
 * value v is a duplicate when this is not v. */
static inline int ft_param_kept(const ft_param *p, int v, int64_t least) {
    if (v < least || p->def >= least) return v < least ? v : p->def;
    int smallest = v;
    for (int k = 0; k < p->n; k++)
        if (p->values[k] >= least && p->values[k] < smallest) smallest = p->values[k];
    return smallest;
}

#ifdef __cplusplus
}
#endif
#endif
