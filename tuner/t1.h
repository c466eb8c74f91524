/* t1.h: a tuning problem in the community's FAIR T1 input format.
 *
 * A T1 file (Kernel Tuner's tune_kernel_T1 reads the same; schema: the FAIR benchmark hub's
 * T1 input) describes a kernel's tuning completely: its tunable parameters and their values
 * ("ConfigurationSpace"), the constraints between them as Python expressions ("Conditions"),
 * the kernel's file, name, language and compiler options, its launch geometry, the problem size
 * and every argument (type, size expression, fill, constant memory, outputs).
 *
 * flaretune reads it into a space (space.h) and evaluates its expressions with expr.h, never
 * with a Python. Where the file says one thing two ways, it follows Kernel Tuner, so both tools
 * run the same configurations:
 *   - the grid: with GridDivX/Y/Z, ceil(ProblemSize[d] / the product of the named parameters),
 *     as Kernel Tuner; without them, GlobalSize (blocks when GlobalSizeType is "CUDA", threads
 *     otherwise, then divided by the block);
 *   - the block: LocalSize's expressions, else the parameters block_size_x/y/z (else 1);
 *   - an argument's Size: an expression in which each parameter's name stands for the list of
 *     its values (so "max(filter_width)" is the largest) and ProblemSize for the sizes;
 *   - the kernel file: as given, relative to the T1 file's folder, then its parent's.
 * Everything is checked when the file is read (expressions compile and evaluate at the default
 * configuration, names are known, the default satisfies the constraints, the kernel file
 * is a regular file to read): a bad file is one line naming what and where, before any work starts.
 */
#ifndef FLARETUNE_T1_H
#define FLARETUNE_T1_H

#include <stddef.h>
#include <stdint.h>

#include "core/expr.h"
#include "op/space.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FT_T1_MAX_ARGS  32
#define FT_T1_MAX_CONDS 64

typedef enum {
    FT_T1_FLOAT = 0,
    FT_T1_DOUBLE,
    FT_T1_INT32,
    FT_T1_UINT8,
    FT_T1_INT8,
    FT_T1_UINT32,
    FT_T1_INT16,
    FT_T1_UINT16
} ft_t1_type;

typedef struct ft_t1_arg {
    char *name;
    ft_t1_type type;
    size_t elem_bytes;
    int scalar;   /* MemoryType "Scalar": passed by value (fill_value) */
    int constant; /* MemType "Constant": a __constant__ symbol of that name, written before runs */
    int output;   /* "Output": 1, checked against the reference configuration */
    int random;   /* FillType "Random" (else "Constant": fill_value everywhere) */
    ft_expr *generator; /* FillType "Generator": DataSource, an expression of i, the index of
                           each value (a vector type's components counted one by one) */
    int reads, writes; /* AccessType ReadOnly, WriteOnly, ReadWrite; absent: read, and written
                          when it is an output */
    double fill_value;
    long long elems; /* evaluated Size (vectors), in elements of type: a float2's Size of n is 2n
                        floats */
    char *size_text;
    char *data_source; /* the Generator's text */
} ft_t1_arg;

typedef struct ft_t1 {
    char *path;        /* the T1 file as given */
    char *benchmark;   /* General.BenchmarkName */
    char *kernel_name; /* as written in the source */
    char *kernel_file; /* resolved path */
    char *language;    /* "CUDA" */
    char **options;    /* CompilerOptions */
    int noptions;
    /* The space: numeric parameters hold their values; float and string ones are labelled
     * (values 0..n-1, labels their text), and their -D value is the label. */
    ft_space space;
    ft_param params[FT_MAX_PARAMS];
    char **labels[FT_MAX_PARAMS];
    ft_expr_value *values[FT_MAX_PARAMS]; /* each parameter's values: numbers, or a string
                                           * tunable's labels as strings */
    char *constraint_text[FT_T1_MAX_CONDS + 1];
    ft_expr *conditions[FT_T1_MAX_CONDS];
    int nconditions;
    ft_expr *local[3], *global[3];
    int global_in_blocks; /* GlobalSizeType "CUDA" */
    int griddiv[3][FT_MAX_PARAMS]; /* parameter indices, -1 terminated; [d][0] == -2: no GridDiv */
    long long problem[3];
    int nproblem;
    long long shared_bytes; /* SharedMemory: dynamic shared memory per block */
    ft_t1_arg args[FT_T1_MAX_ARGS];
    int nargs;
    /* The default configuration (each parameter's Default, else its first value) when the
     * conditions allow it; else the allowed one that changes fewest of its values (the first in
 * space order among equals), and default_note says
     * which condition the file's own default breaks. The space's defaults are set to it: it is
     * the baseline and the reference the outputs are checked against. */
    char default_note[640];
    /* How the file was read where it leaves something to a reader's choice (no Output marks:
     * outputs from AccessType; no GlobalSizeType: threads): every --t1 command prints it. */
    char read_note[480];
} ft_t1;

/* Argument a's value at index i (0 <= i < a->elems) as its Generator gives it, checked to be a
 * value of its Type (an integer type's: an integer in its range). */
ft_status ft_t1_generate(const ft_t1_arg *a, long long i, double *v, ft_err *err);

/* Read a T1 file (a path) or its bytes (dir: where its KernelFile is looked for; NULL: not
 * looked for, to check a file's own text). kernel_file (NULL: the file's) replaces KernelFile,
 * for a file that names a kernel by another path than the one it has here. */
ft_status ft_t1_load(const char *path, const char *kernel_file, ft_t1 **out, ft_err *err);
ft_status ft_t1_from_buffer(const char *buf, size_t len, const char *name, const char *dir,
                            const char *kernel_file, ft_t1 **out, ft_err *err);
void ft_t1_free(ft_t1 *t);

/* Replace argument NAME's type, size and fill: "NAME=TYPE:SIZE[:random|constant[:VALUE]]", SIZE
 * an expression as the file's Size is (for a file whose arguments do not say what its kernel
 * reads: a size of 1, another type). The argument keeps its place, output and constant-memory
 * marks. */
ft_status ft_t1_set_arg(ft_t1 *t, const char *spec, ft_err *err);
/* ft_t1_load, then ft_t1_set_arg for each of the n specs. */
ft_status ft_t1_load_args(const char *path, const char *kernel_file, const char *const *args, int n,
                          ft_t1 **out, ft_err *err);
/* The configurations a command works on, in *cfgs (malloc'd), *n of them: with `config` (NULL:
 * none) that one over the defaults, which the conditions must allow; with all, every allowed one
 * in space order; with sample > 0, that many allowed ones drawn from seed (all of them when
 * there are fewer), the default first: shuffled from the list where it holds them all, else
 * drawn by ft_t1_draw; else the default alone. */
ft_status ft_t1_select(const ft_t1 *t, const char *config, int all, long sample,
                       unsigned long long seed, ft_config **cfgs, int64_t *n, ft_err *err);
/* Does cfg satisfy every condition? *why gets the first that fails. An expression that cannot
 * be evaluated at cfg (a division by zero) is an error. */
ft_status ft_t1_allowed(const ft_t1 *t, const ft_config *cfg, int *ok, char *why, size_t n,
                        ft_err *err);
/* The most allowed configurations a list holds (ft_t1_enumerate; space --list writes no more). */
#define FT_T1_MAX_ALLOWED (1LL << 24)
/* Every allowed configuration in space order (the last parameter fastest); *cfgs malloc'd. At
 * most FT_T1_MAX_ALLOWED of them (100 bytes each): past that, an error saying how many there
 * are. */
ft_status ft_t1_enumerate(const ft_t1 *t, ft_config **cfgs, int64_t *n, ft_err *err);
/* k allowed configurations drawn from seed without listing them all, each ordered k as likely as
 * any other (every allowed one when there are k or fewer, as ft_t1_enumerate lists them); *cfgs
 * malloc'd, in the order drawn: the first k of a larger draw from the same seed are these. k is
 * at most FT_T1_MAX_ALLOWED; the space may allow up to 2^63, found in the walk's 2^26 steps. */
ft_status ft_t1_draw(const ft_t1 *t, int64_t k, uint64_t seed, ft_config **cfgs, int64_t *n,
                     ft_err *err);
/* How many configurations the conditions allow, without listing them: the parameters no
 * condition names multiply the count, so a space of any size whose conditions prune early is
 * counted (past 2^63, an error). */
ft_status ft_t1_count(const ft_t1 *t, int64_t *n, ft_err *err);
/* Each allowed configuration, in space order as ft_t1_enumerate lists them, to visit(ctx, c),
 * which returns nonzero to stop there; none kept. */
ft_status ft_t1_each(const ft_t1 *t, int (*visit)(void *ctx, const ft_config *c), void *ctx,
                     ft_err *err);
/* Where c stands among the n configurations ft_t1_enumerate listed (in the space's order), by
 * binary search; -1 when it is not one of them. */
int64_t ft_t1_position(const ft_t1 *t, const ft_config *cfgs, int64_t n, const ft_config *c);
/* The launch of cfg: grid in blocks and block in threads. */
ft_status ft_t1_launch(const ft_t1 *t, const ft_config *cfg, long long grid[3], long long block[3],
                       ft_err *err);
/* cfg's values as the compiler's macros, "name=value" in buf (n of them, each < 96 bytes), then
 * kernel_tuner=1, which Kernel Tuner defines for every kernel it compiles: kernels written for
 * it give their parameters standalone values under #ifndef kernel_tuner. At most
 * FT_T1_MAX_DEFINES. */
#define FT_T1_MAX_DEFINES (FT_MAX_PARAMS + 1)
int ft_t1_defines(const ft_t1 *t, const ft_config *cfg, char (*buf)[96], int cap);
/* Kernel Tuner's cache key of cfg: the values in parameter order, joined by commas. */
void ft_t1_key(const ft_t1 *t, const ft_config *cfg, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
