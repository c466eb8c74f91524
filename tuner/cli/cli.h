/* cli.h: what the command-line front end's files share. Only the front end prints to the
 * terminal and decides exit codes; the library returns statuses and messages. */
#ifndef FLARETUNE_CLI_H
#define FLARETUNE_CLI_H

#include <stdio.h>

#include "core/status.h"
#include "tui/tui.h"

/* Exit codes (documented in docs/usage.md). */
enum {
    FT_EXIT_OK = 0,
    FT_EXIT_FAIL = 1,   /* the work failed: I/O, a malformed or inconsistent input, ...   */
    FT_EXIT_USAGE = 2,  /* the request is invalid: unknown command, option, op, value, ... */
    FT_EXIT_NODEV = 3,  /* the backend's device is not present on this machine            */
    FT_EXIT_VERIFY = 4, /* a result disagreed with the reference                          */
};

typedef struct ft_cmd {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the command name */
    void (*usage)(FILE *f);
} ft_cmd;

extern const ft_cmd ft_cmd_list, ft_cmd_space, ft_cmd_exec, ft_cmd_bench, ft_cmd_tune,
    ft_cmd_version;
extern const ft_cmd ft_cmd_replay, ft_cmd_trace, ft_cmd_export;
extern const ft_cmd ft_cmd_show, ft_cmd_merge, ft_cmd_emit;
extern const ft_cmd ft_cmd_top, ft_cmd_watch;
extern const ft_cmd ft_cmd_compile, ft_cmd_inspect;
extern const ft_cmd ft_cmd_step;
extern const ft_cmd ft_cmd_report;

/* `inspect --t1 FILE` (cmd_inspect_t1.c): a T1 kernel's predicted time; its usage lines. */
int ft_cli_inspect_t1(int argc, char **argv);
void ft_cli_inspect_t1_usage(FILE *f);
/* `compile --t1 FILE` (cmd_compile_t1.c): a T1 kernel's configurations through NVRTC. */
int ft_cli_compile_t1(int argc, char **argv);
void ft_cli_compile_t1_usage(FILE *f);
/* `tune --t1 FILE` (cmd_tune_t1.c): tune a T1 kernel; its usage lines. */
int ft_cli_tune_t1(int argc, char **argv);
int ft_cli_bench_t1(int argc, char **argv);
void ft_cli_bench_t1_usage(FILE *f);
void ft_cli_tune_t1_usage(FILE *f);

/* Print "flaretune: <message>" on stderr and return code. */
int ft_cli_fail(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Print err's message and return the exit code for its status. */
int ft_cli_fail_err(const ft_err *err);
int ft_cli_exit_code(ft_status s);
/* err's one line for a profile that cannot be used or written: exit 1 (input data that is
 * malformed or unusable, as a schema_version too new for this build), except a path refused as
 * such (empty, too long: FT_EINVAL), a usage error, 2. */
int ft_cli_fail_profile(const ft_err *err);
/* When log is a file with sibling logs of a `tune all` or sweep (log.OP, ...), say on stderr
 * that cmd reads the file alone, as named. */
void ft_cli_note_family(const char *cmd, const char *log);

/* SIGINT and SIGTERM to handler from now on, with sigaction's flags (SA_RESETHAND: the signal
 * after the first ends the process as it would have without the handler). */
void ft_cli_catch_stop(void (*handler)(int), int flags);
/* --candidate-timeout S of cmd into *out (seconds, 1 to 1e6); an exit code, 0 when taken. */
int ft_cli_candidate_timeout(const char *cmd, const char *arg, double *out);
/* SIGALRM (a candidate past --candidate-timeout) from now on: the records of the candidate in
 * flight (core/epitaph.h) are written, one line says so, and the process ends. */
void ft_cli_catch_candidate_timeout(void);
/* From a handler of signal sig: write the records of the candidate in flight, then `recorded`
 * (or `unrecorded` when there were none) on stderr, and end the process as sig would have.
 * Async-signal-safe. */
void ft_cli_end_in_flight(int sig, const char *recorded, const char *unrecorded);

/* A tuner under the dashboard (cli_dash.c): worker(arg) on a thread of its own feeding feed
 * (it pushes a "done" or "error" event last), the dashboard titled `title` on this one, p and q
 * raising *pause and *stop, Ctrl-C on_signal (which raises *stop). Returns when both have
 * ended: the dashboard's status; *source_done says whether the worker had finished when the
 * dashboard closed (else *stop was raised and the worker stopped). */
typedef struct ft_cli_dash {
    const char *title;
    ft_tui_feed *feed;
    void *(*worker)(void *);
    void *arg;
    volatile int *pause, *stop;
    int expected_runs;
    void (*on_signal)(int);
    const char *stopping; /* said on stderr when q stopped the worker, before waiting for it */
} ft_cli_dash;
ft_status ft_cli_dashboard(const ft_cli_dash *d, int *source_done, ft_err *err);
/* The worker's last event: "error" with failed's message, else "done" saying `done`. */
void ft_cli_dash_end(ft_tui_feed *feed, const ft_err *failed, const char *done);

/* "--help" anywhere among the arguments. */
int ft_cli_wants_help(int argc, char **argv);

/* ---- arguments shared by exec, bench and tune (cli_args.c) ---------------------------------- */

#include "op/backend.h"
#include "tuner/measure.h"
#include "op/op.h"

#define FT_CLI_MAX_LIST 64

/* The problem options every running command accepts. */
typedef struct ft_cli_problem {
    const char *preset;                /* --preset                      */
    const char *sets[FT_CLI_MAX_LIST]; /* --set NAME=VALUE          */
    int nsets;
    const char *attrs[FT_CLI_MAX_LIST]; /* --attr NAME=VALUE        */
    int nattrs;
    const char *backend;     /* --backend (default "auto")    */
    const char *config;      /* --config NAME=VALUE,...       */
    int threads;             /* --threads (0: not given)      */
    unsigned long long seed; /* --seed (default 1)            */
    int seed_given;          /* --seed was given (its default is a seed too) */
} ft_cli_problem;

void ft_cli_problem_init(ft_cli_problem *p);
/* Handle one getopt_long result if it is a problem option (FT_OPT_* below): returns 1 when
 * handled, 0 when not a problem option, -1 (message printed) on a bad value. */
int ft_cli_problem_opt(ft_cli_problem *p, int opt, const char *arg, const char *cmd);
/* The entry of list (n "NAME=VALUE" texts) that names what arg names, or NULL: a --set or
 * --attr given twice is refused rather than the last one silently taken. */
const char *ft_cli_named_before(const char *const *list, int n, const char *arg);
enum {
    FT_OPT_PRESET = 1000,
    FT_OPT_SET,
    FT_OPT_ATTR,
    FT_OPT_BACKEND,
    FT_OPT_CONFIG,
    FT_OPT_THREADS,
    FT_OPT_SEED,
    FT_OPT_TIMER
};
/* A row of a command's getopt_long table: a long option that takes a value (once), one that
 * takes a value and may be given again (each adds an item to a list: --set, --attr), one that
 * takes none, and the row that ends the table. ft_cli_getopt refuses an option of one value
 * given twice and hands a list option's code back without the FT_CLI_REPEATS bit. */
#define FT_CLI_REPEATS (1 << 20)
#define FT_CLI_ARG(name, code)                                                                     \
    { name, required_argument, NULL, code }
#define FT_CLI_LIST(name, code)                                                                    \
    { name, required_argument, NULL, (code) | FT_CLI_REPEATS }
#define FT_CLI_FLAG(name, code)                                                                    \
    { name, no_argument, NULL, code }
#define FT_CLI_END                                                                                 \
    { NULL, 0, NULL, 0 }

#define FT_CLI_PROBLEM_OPTIONS                                                                     \
    FT_CLI_ARG("preset", FT_OPT_PRESET), FT_CLI_LIST("set", FT_OPT_SET),                           \
        FT_CLI_LIST("attr", FT_OPT_ATTR), FT_CLI_ARG("backend", FT_OPT_BACKEND),                   \
        FT_CLI_ARG("config", FT_OPT_CONFIG), FT_CLI_ARG("threads", FT_OPT_THREADS),                \
        FT_CLI_ARG("timer", FT_OPT_TIMER), FT_CLI_ARG("seed", FT_OPT_SEED)

/* Apply the --attr list to c's attributes. Returns an exit code (0 on success). */
int ft_cli_apply_attrs(const ft_cli_problem *p, ft_call *c);
/* The --attr values op's preset would overwrite as one of its sizes (the loss's B, which a
 * preset sets): refused in one line pointing at --set, exit 2; else 0. */
int ft_cli_check_preset_attrs(const ft_cli_problem *p, const ft_op *op, const ft_preset *preset);
/* A --set of a size op does not read changes nothing: refused (exit 2, one line), so that a run
 * is never labelled "+N=1000000" with the preset's sizes (linear's M is blocks*B, its N and K
 * its own). c: a call of the op whose sizes came from the preset with every --set. */
int ft_cli_check_sets_read(const ft_cli_problem *p, const ft_call *c);
/* The preset named by p (or `fallback` when none was given) with the --set changes. */
int ft_cli_make_preset(const ft_cli_problem *p, const char *fallback, ft_preset *out);
/* The configuration from --config and --threads on top of the backend's default for op. */
int ft_cli_make_config(const ft_cli_problem *p, const ft_backend *be, const ft_op *op,
                       ft_config *cfg);
/* The measurement options of bench and tune, rows of their tables: --max-time SECONDS,
 * --noise FRACTION and --max-lost X|off (the share of a sample its threads may lose to other
 * work, measure.h). */
enum { FT_OPT_MAX_TIME = 1100, FT_OPT_NOISE, FT_OPT_MAX_LOST };
#define FT_CLI_MEASURE_OPTIONS                                                                     \
    FT_CLI_ARG("max-time", FT_OPT_MAX_TIME), FT_CLI_ARG("noise", FT_OPT_NOISE),                    \
        FT_CLI_ARG("max-lost", FT_OPT_MAX_LOST)
/* One measurement option (its code opt, its value arg) into mo. Returns an exit code (0 when the
 * value is good). */
int ft_cli_measure_opt(ft_measure_opts *mo, int opt, const char *arg, const char *cmd);

/* The default preset of an op for quick runs (small, the phase the op belongs to). */
const char *ft_cli_default_preset(const ft_op *op);

struct option;
/* getopt_long over shortopts and opts that also notes which option its result came from (for
 * ft_cli_option_written and ft_cli_bad_option), reports a missing value as ':' whether or not
 * shortopts starts with ':', and an empty one (--out= or --out '') as missing too. Sets opterr
 * to 0: nothing is printed. */
int ft_cli_getopt(int argc, char **argv, const char *shortopts, const struct option *opts);
/* The option of ft_cli_getopt's last result as the user named it, without its value: "--blocks"
 * (for --blocks=3, --blocks 3 or the abbreviation --bl 3), "-o", "-x" in a cluster -xy. */
const char *ft_cli_option_written(void);
/* The failure for a ft_cli_getopt result no command option claims, in one line pointing at
 * `flaretune CMD --help`: a missing value (':'), a value given to an option that takes none, or
 * an unknown option. */
int ft_cli_bad_option(const char *cmd, int opt);
/* Said after the command's name of an unknown option from now on (" --t1": the command's options
 * differ in that form); NULL or "" for none. */
void ft_cli_option_form(const char *form);
/* An option's value, all of it, as a decimal whole number from lo to hi into *out: whether it is
 * one (no space or '+' before it, nothing after it; a number past the range of long, or outside
 * [lo, hi], is not). Every command's counts take their values this way. */
int ft_cli_whole(const char *arg, long lo, long hi, long *out);
/* A seed: a decimal whole number from 0 to 2^64 - 1, no sign (strtoull would take "-1" as
 * 2^64 - 1), into *out; whether it is one. */
int ft_cli_seed(const char *arg, unsigned long long *out);
/* Whether a is a GPU architecture as NVRTC takes it: sm_ and 2 or 3 digits, then a or f. */
int ft_cli_arch_ok(const char *a);

/* What a command does with one getopt_long result: opt its code ('?' or ':' for an unknown
 * option or a missing value), arg its value (optarg). Returns an exit code, 0 to go on. */
typedef int ft_cli_opt_fn(void *ctx, int opt, const char *arg);
/* Every option of argv from the first, by ft_cli_getopt over shortopts and opts, each handed to
 * own(ctx, ...). Returns the first non-zero exit code own returns, else
 * 0 with optind at the first operand. */
int ft_cli_parse_options(int argc, char **argv, const char *shortopts, const struct option *opts,
                         ft_cli_opt_fn *own, void *ctx);
/* Options that several commands' tables hold (the problem options, those of --t1): take sets
 * *taken when opt is one of them, and returns an exit code (messages naming cmd). */
typedef int ft_cli_shared_fn(const char *cmd, void *shared, int opt, const char *arg, int *taken);
/* ft_cli_parse_options without short options, each result offered to take(cmd, shared, ...)
 * first: own has those it does not take. */
int ft_cli_parse_shared(const char *cmd, int argc, char **argv, const struct option *opts,
                        ft_cli_shared_fn *take, void *shared, ft_cli_opt_fn *own, void *ctx);
/* The same with the problem options into p (ft_cli_problem_opt), and an unknown option or a
 * missing value reported here (ft_cli_bad_option): own has only its own codes of opts. */
int ft_cli_parse_problem(const char *cmd, int argc, char **argv, const struct option *opts,
                         ft_cli_problem *p, ft_cli_opt_fn *own, void *ctx);
/* The command's one operand after the options, at optind: a usage failure when it is missing
 * ("CMD: which op? (HINT)") or followed by another. Returns an exit code (0 when exactly one). */
int ft_cli_one_operand(const char *cmd, const char *hint, int argc, char **argv);
/* The command line of a command that runs one op: p initialised (ft_cli_problem_init), then
 * ft_cli_parse_problem and ft_cli_one_operand, the operand into *op. Returns an exit code. */
int ft_cli_parse_op(const char *cmd, const char *hint, int argc, char **argv,
                    const struct option *opts, ft_cli_problem *p, ft_cli_opt_fn *own, void *ctx,
                    const char **op);

/* One op made ready to run from the problem options: what exec and bench both set up. */
typedef struct ft_cli_setup {
    const ft_op *op;
    const ft_backend *be;
    ft_call c;        /* the op's call with the --attr attributes; inputs once made */
    ft_preset preset; /* valid when has_preset */
    int has_preset;
    ft_config cfg; /* --config and --threads on top of the backend's default */
} ft_cli_setup;

/* Find op_name, apply --attr, resolve --backend and check the attributes on it, make the preset
 * when with_preset (--preset and --set, or the op's default), then the configuration: the order
 * in which a bad request is reported. Returns an exit code (message printed); nothing is held
 * on failure, and on success s->c holds no tensors yet. */
int ft_cli_setup_problem(const ft_cli_problem *p, const char *op_name, int with_preset,
                         ft_cli_setup *s);
/* Random inputs for s's call at its preset, seeded by --seed; the preset is made first when
 * ft_cli_setup_problem did not. On failure s->c is freed and the exit code returned. */
int ft_cli_setup_inputs(const ft_cli_problem *p, ft_cli_setup *s);

/* ---- the options `inspect`, `compile` and `tune` share with --t1 (cli_t1.c) ----------------- */

#include <stdint.h>

#include "tuner/t1.h"
#include "tuner/t1_tune.h"

#define FT_CLI_T1_MAX_ARGS 16

/* What a T1 command was told about the kernel and the configurations to work on. */
typedef struct ft_cli_t1_args {
    const char *path, *kfile, *config;           /* --t1, --kernel-file, --config     */
    const char *argspecs[FT_CLI_T1_MAX_ARGS];     /* --arg NAME=TYPE:SIZE[:FILL[:V]]   */
    int nargspecs;
    int all;                 /* --all-configs                                          */
    long sample;             /* --sample K (0: not given)                              */
    unsigned long long seed; /* --seed (the caller's default until given)              */
    /* How a configuration is run and checked (tune and bench): --backend (NULL: the GPU where
     * there is one, else the emulator), --blocks and --reps (0: not given), --reference. */
    const char *backend;
    int blocks, reps;
    const char *refs[FT_CLI_T1_MAX_ARGS];
    int nrefs;
} ft_cli_t1_args;

/* getopt_long codes of the shared options, for each command's table. */
enum {
    FT_T1_OPT_T1 = 2000,
    FT_T1_OPT_KFILE,
    FT_T1_OPT_ARG,
    FT_T1_OPT_CONFIG,
    FT_T1_OPT_ALL,
    FT_T1_OPT_SAMPLE,
    FT_T1_OPT_SEED,
    FT_T1_OPT_BACKEND,
    FT_T1_OPT_BLOCKS,
    FT_T1_OPT_REPS,
    FT_T1_OPT_REF
};

/* The rows of the shared options in a command's table: the kernel (--t1, --kernel-file), the
 * kernel's arguments (--arg), and which configurations (--config, --all-configs, --sample,
 * --seed). */
#define FT_CLI_T1_KERNEL_OPTIONS                                                                   \
    FT_CLI_ARG("t1", FT_T1_OPT_T1), FT_CLI_ARG("kernel-file", FT_T1_OPT_KFILE)
#define FT_CLI_T1_ARG_OPTION FT_CLI_LIST("arg", FT_T1_OPT_ARG)
#define FT_CLI_T1_SELECT_OPTIONS                                                                   \
    FT_CLI_ARG("config", FT_T1_OPT_CONFIG), FT_CLI_FLAG("all-configs", FT_T1_OPT_ALL),             \
        FT_CLI_ARG("sample", FT_T1_OPT_SAMPLE), FT_CLI_ARG("seed", FT_T1_OPT_SEED)

#define FT_CLI_T1_RUN_OPTIONS                                                                      \
    FT_CLI_ARG("backend", FT_T1_OPT_BACKEND), FT_CLI_ARG("blocks", FT_T1_OPT_BLOCKS),              \
        FT_CLI_ARG("reps", FT_T1_OPT_REPS), FT_CLI_LIST("reference", FT_T1_OPT_REF)

/* Whether the arguments after the command name hold --t1 (the command is then the --t1 one). */
int ft_cli_names_t1(int argc, char **argv);
/* Parse a --t1 command line into a: the shared options (those of opts) here, every other one by
 * own(ctx, code, optarg, argv), which returns an exit code. An unknown option or an operand is a
 * usage failure naming cmd. Returns an exit code (0: all parsed). */
int ft_cli_t1_parse(const char *cmd, int argc, char **argv, const struct option *opts,
                    ft_cli_t1_args *a, ft_cli_opt_fn *own, void *ctx);
/* a's run options into to: --seed, --blocks and --reps where given, --reference, and the
 * backend: --backend, else cuda where a GPU opens, else cuda-emu (saying so on stderr, naming
 * cmd). */
void ft_cli_t1_apply(const char *cmd, const ft_cli_t1_args *a, ft_t1_tune_opts *to);
/* A T1 failure as "CMD: message": a usage failure for a bad request (FT_EINVAL), else a failure. */
int ft_cli_t1_fail(const char *cmd, const ft_err *err);
/* 0 when t declares an output to check configurations by; else one line saying it does not, and
 * FT_EXIT_FAIL (tune and bench, where every configuration but the reference would be rejected). */
int ft_cli_t1_checkable(const char *cmd, const ft_t1 *t);
/* The configurations a's --config, --all-configs or --sample name (ft_t1_select). Returns an
 * exit code (message printed). */
/* Print how the T1 file was read where it left a choice to the reader (t->read_note), if it
 * did: one "CMD: note:" line on stderr. */
void ft_cli_t1_note(const char *cmd, const ft_t1 *t);
int ft_cli_t1_select(const char *cmd, const ft_t1 *t, const ft_cli_t1_args *a, ft_config **cfgs,
                     int64_t *n);

/* ---- JSON on standard output (cli_json.c) and a kernel's SASS instruction mix (cli_sass.c) --- */

#include <jansson.h>

/* doc on standard output, indented by 2, and a newline; doc released. */
void ft_cli_print_json(json_t *doc);

#include "cuda/analysis/sass.h"

/* Every class's count, the total, the bytes a thread moves, instructions per global byte, the
 * number of loops and the hot loop's own mix (or null): `"sass"` of compile and inspect. */
json_t *ft_cli_sass_json(const ft_sass_kernel *k);

#endif
