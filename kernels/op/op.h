/* op.h: the op registry: what every drafter op reads, writes and accepts (SPEC.md).
 *
 * An op is described once, as data: its size symbols ("N", "T", "H", ...), its tensors with
 * their dtype and shape written in those symbols, the attributes it accepts, and four small
 * callbacks (derive and check the sizes, size it from a preset, fill realistic random inputs,
 * run the float64 reference). Every front end (exec, bench, the tuner) and every backend works
 * from this description, so an op's interface lives in exactly one place: kernels/op_<name>.c.
 */
#ifndef FLARETUNE_OP_H
#define FLARETUNE_OP_H

#include <stdint.h>
#include <time.h>

#include "core/clock.h"
#include "core/rng.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/workspace.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FT_MAX_TENSORS 16
#define FT_MAX_SYMS    12

/* ---- attributes ---------------------------------------------------------------------------- */

/* RoPE's frequency scaling (SPEC.md attention.kvproj): none keeps inv_freq[m] = theta^(-2m/dh);
 * llama3 and yarn stretch the low frequencies for long contexts as the target models do
 * (Llama 3.1: llama3; gpt-oss: yarn). kernels/attention/rope.c turns them into frequencies. */
typedef enum { FT_ROPE_NONE, FT_ROPE_LLAMA3, FT_ROPE_YARN } ft_rope_kind;

typedef struct ft_rope_attrs {
    int scaling;             /* ft_rope_kind, default none                                  */
    double factor;           /* context stretch (llama3, yarn), default 1                   */
    double low_freq_factor;  /* llama3: wavelengths over L/low are divided by factor (1)    */
    double high_freq_factor; /* llama3: wavelengths under L/high are kept (4)               */
    double original_max_pos; /* L: the context the model was pretrained at (8192)           */
    double beta_fast;        /* yarn: dims turning over beta_fast times in L are kept (32)  */
    double beta_slow;        /* yarn: dims turning under beta_slow times are stretched (1)  */
    int truncate;            /* yarn: round the ramp's ends to whole dims (1, HF's default) */
    int named; /* some rope attribute was set by name: a preset then keeps the call's RoPE */
} ft_rope_attrs;

typedef enum ft_loss_scheme {
    FT_SCHEME_UNIFORM = 0,
    FT_SCHEME_DECAY,
    FT_SCHEME_PROGRESSIVE,
    FT_SCHEME_DPACE,
    FT_SCHEME_DPACE_CUM,
    FT_SCHEME_DPACE_CONT,
    FT_SCHEME_PROGRESSIVE_EPOCH, /* decay with gamma + gamma_inc * floor(epoch) (AngelSlim) */
    FT_SCHEME_COUNT
} ft_loss_scheme;

typedef enum ft_loss_norm {
    FT_NORM_DEFAULT = 0, /* the scheme's own denominator (SPEC.md table) */
    FT_NORM_WEIGHT_SUM,
    FT_NORM_COUNT,
    FT_NORM_NUM_SEQS,
    FT_NORM_NONE,
    FT_NORM_COUNT_ /* number of values */
} ft_loss_norm;

/* The loss op's attributes (SPEC.md "loss" and "Attribute defaults"). */
typedef struct ft_loss_attrs {
    int64_t B;             /* block size; M % B == 0; row m is position m % B of its block  */
    ft_loss_scheme scheme; /* default decay                                                 */
    double gamma;          /* decay: default 7                                              */
    double gamma0;         /* progressive: gamma at step 0, default 1                       */
    double gamma_max;      /* progressive: gamma after warm-up, default 7                   */
    double step;           /* progressive: current step, default 0                          */
    double warmup_steps;   /* progressive: default 0 (no warm-up: gamma = gamma_max)        */
    double alpha;          /* dpace smoothing, default 0.5                                  */
    double num_seqs;       /* dpace denominator, default 1                                  */
    ft_loss_norm norm;     /* denominator override, default FT_NORM_DEFAULT                 */
    int want_dw;           /* also compute dw_lm                                            */
    double gamma_inc;      /* progressive_epoch: gamma added per whole epoch, default 0.5   */
    double epoch;          /* progressive_epoch: training epoch (fractional), default 0     */
    int final_norm;        /* h is the un-normed final state: RMSNorm (g_norm, eps) fused   */
} ft_loss_attrs;

/* Every attribute any op accepts, in one flat struct; each op lists the names it accepts. */
typedef struct ft_attrs {
    double eps;        /* RMSNorm epsilon, default 1e-6                              */
    double rope_theta; /* RoPE base, default 1e6 (Qwen3)                             */
    ft_rope_attrs rope; /* RoPE scaling, default none                                */
    double scale;      /* attention scale; NAN (the default) means dh^-0.5           */
    int backward;      /* fusion ops, attention.train: also run the backward         */
    int dtype;         /* device backends: float storage, 0 float32, 1 bfloat16      */
    int grad_only;     /* linear with backward: the backward's GEMMs alone           */
    int want_dx;       /* fusion ops with backward: also compute dx (default 1)      */
    int64_t window;    /* attention: sliding window W over the context, 0 = full     */
    int causal;        /* attention: query b sees block keys 0..b only (0: all B)    */
    ft_loss_attrs loss;
} ft_attrs;

typedef enum { FT_ATTR_FLOAT, FT_ATTR_INT, FT_ATTR_BOOL, FT_ATTR_ENUM } ft_attr_kind;

typedef struct ft_attr_desc {
    const char *name;
    ft_attr_kind kind;
    const char *const *choices; /* FT_ATTR_ENUM: NULL-terminated value names */
    const char *def;            /* default, as text */
    const char *doc;
} ft_attr_desc;

/* All attributes, in the order `list` prints them; NULL name terminates. */
extern const ft_attr_desc ft_attr_table[];
extern const char *const ft_scheme_names[];     /* indexed by ft_loss_scheme, NULL-terminated */
extern const char *const ft_norm_names[];       /* indexed by ft_loss_norm, NULL-terminated   */
extern const char *const ft_dtype_attr_names[]; /* "f32", "bf16" (ft_attrs.dtype)      */
extern const char *const ft_rope_scaling_names[]; /* indexed by ft_rope_kind, NULL-terminated */

void ft_attrs_default(ft_attrs *a);
/* No RoPE scaling, with every scaling parameter at its default (as `list ops` shows them). */
void ft_rope_default(ft_rope_attrs *r);
/* RoPE as the attributes that set it, "rope_theta=500000 rope_scaling=llama3 rope_factor=8 ...":
 * theta, the scaling, and the parameters that scaling reads (for `list presets` and `space`). */
void ft_rope_format(double rope_theta, const ft_rope_attrs *r, char *buf, size_t n);
const ft_attr_desc *ft_attr_find(const char *name);
/* Set attribute `name` from text. Fails (FT_EINVAL, one clear line) on an unknown name, a name
 * the op does not accept, or a bad value. */
struct ft_op;
ft_status ft_attrs_set(ft_attrs *a, const struct ft_op *op, const char *name, const char *value,
                       ft_err *err);
/* Current value of attribute `name` as text (for events, profiles and messages). */
void ft_attrs_format(const ft_attrs *a, const char *name, char *buf, size_t n);
/* Every attribute op accepts, "name=value,name=value" (as ft_attrs_format writes each), cut at n. */
void ft_attrs_format_all(const ft_attrs *a, const struct ft_op *op, char *buf, size_t n);
/* Does attribute `name` change what a call of op computes, given its other attributes? The
 * loss's eps only with final_norm, its gamma_inc and epoch only with scheme=progressive_epoch, a
 * fusion's want_dx only with backward=1; every other attribute op accepts does. */
int ft_attr_matters(const struct ft_op *op, const ft_attrs *a, const char *name);

/* ---- presets ------------------------------------------------------------------------------- */

/* A preset fixes every size any op needs: one target model, one drafter architecture, one
 * phase. Field names are the names `--set NAME=VALUE` accepts. */
typedef struct ft_preset {
    char name[64];
    const char *model, *arch, *phase;
    int64_t H, Hq, Hkv, dh, V, layers; /* target model                                 */
    int64_t inter;                     /* MLP intermediate size I (a draft layer's)     */
    int64_t D, T, B;                   /* drafter: draft layers, target layers, block   */
    int64_t N;                         /* rows fused and projected per call             */
    int64_t R, L;                      /* decode: requests, mean context length         */
    int64_t ragged;                    /* decode: context lengths spread over [0, 2L]   */
    int64_t nseq, S, NB;               /* train: sequences, context length, blocks/seq  */
    int64_t blocks;                    /* loss: blocks of B rows (M = blocks * B)       */
    int64_t window;                    /* sliding window of the sliding layers (0: none) */
    int64_t sliding;                   /* bit i: draft layer i slides (0: all, if window) */
    unsigned user_set;                 /* FT_PRESET_SET_*: derived sizes fixed by --set */
    /* The target's RoPE (its public config.json): what attention.kvproj rotates the context
     * keys with at this preset, unless the call names its own rope attributes. */
    double rope_theta;
    ft_rope_attrs rope;
} ft_preset;

enum { FT_PRESET_SET_N = 1, FT_PRESET_SET_BLOCKS = 2 };

int ft_preset_count(void);
const ft_preset *ft_preset_at(int i);
const ft_preset *ft_preset_find(const char *name);
/* The fields `--set` may change, NULL-terminated, and access by name. */
extern const char *const ft_preset_fields[];
int64_t *ft_preset_field(ft_preset *p, const char *name);
/* The value of field `name` of a preset (as ft_preset_field finds it), or -1 when it has none. */
int64_t ft_preset_size(const ft_preset *p, const char *name);
/* Apply "NAME=VALUE" to a copy of a preset; checks the name and that the value is positive
 * (ragged: 0 or 1). */
ft_status ft_preset_set(ft_preset *p, const char *assignment, ft_err *err);
/* Whether the sizes of p, once every --set is applied, ask for what can be run: a sliding
 * layout (`sliding`, bit i: layer i) names only layers the preset has (0 to D-1) and comes with
 * a window. FT_EINVAL, naming what to set, when not. */
ft_status ft_preset_check(const ft_preset *p, ft_err *err);
/* The attention window of draft layer i (0: full attention): window where layer i is one of the
 * sliding layers (bit i of sliding, or every layer when sliding = 0), else 0. */
int64_t ft_preset_layer_window(const ft_preset *p, int64_t i);
/* Context length of request r in a decode preset (uniform L, or spread over [0, 2L]). */
int64_t ft_preset_ctx_len(const ft_preset *p, int64_t r);
/* The sum of ft_preset_ctx_len over the R requests, computed without a loop over them; -1 when
 * R x 2L does not fit under FT_MAX_NUMEL (then no tensor of the step would). */
int64_t ft_preset_ctx_sum(const ft_preset *p);

/* ---- ops ----------------------------------------------------------------------------------- */

typedef enum {
    FT_ROLE_IN,       /* read by the forward                                   */
    FT_ROLE_OUT,      /* written by the forward                                */
    FT_ROLE_GRAD_IN,  /* upstream gradient, read only when the backward runs  */
    FT_ROLE_GRAD_OUT, /* written only when the backward runs                  */
} ft_role;

enum {
    FT_TS_WANT_DW = 1 << 0,    /* loss: present only when want_dw = 1 */
    FT_TS_FORWARD = 1 << 1,    /* absent when grad_only = 1 (linear's y)  */
    FT_TS_FINAL_NORM = 1 << 2, /* loss: present only when final_norm = 1 */
    FT_TS_WANT_DX = 1 << 3,    /* fusion ops' dx: present only when want_dx = 1 */
};

typedef struct ft_tensor_spec {
    const char *name;
    ft_dtype dtype;   /* FT_F32 for every float tensor (the reference sees float64 copies) */
    const char *dims; /* shape in the op's symbols, comma-separated; "" for a scalar */
    ft_role role;
    unsigned flags;
    const char *doc;
} ft_tensor_spec;

/* Two rows of an op's tensor table: a float32 tensor NAME (index I) and its gradient "d" NAME
 * (index DI), of the same dims. An input and the gradient the backward writes (FT_TS_IN_GRAD), or
 * an output and the upstream gradient the backward reads (FT_TS_OUT_GRAD). */
/* clang-format off */
#define FT_TS_IN_GRAD(I, DI, NAME, DIMS, DOC)                                                      \
    FT_TS_IN_GRAD_FLAGS(I, DI, NAME, DIMS, 0, DOC, "gradient of " NAME)
/* The same, its gradient present only as `flags` (FT_TS_WANT_*) say, which GDOC tells. */
#define FT_TS_IN_GRAD_FLAGS(I, DI, NAME, DIMS, FLAGS, DOC, GDOC)                                   \
    [I] = {NAME, FT_F32, DIMS, FT_ROLE_IN, 0, DOC},                                                \
    [DI] = {"d" NAME, FT_F32, DIMS, FT_ROLE_GRAD_OUT, FLAGS, GDOC}
/* clang-format on */
#define FT_TS_OUT_GRAD(I, DI, NAME, DIMS, DOC)                                                     \
    [I] = {NAME, FT_F32, DIMS, FT_ROLE_OUT, 0, DOC},                                               \
    [DI] = {"d" NAME, FT_F32, DIMS, FT_ROLE_GRAD_IN, 0, "upstream gradient of " NAME}

typedef enum { FT_BWD_NONE, FT_BWD_OPTIONAL, FT_BWD_ALWAYS } ft_bwd_kind;

typedef struct ft_call ft_call;

typedef struct ft_op {
    const char *name;
    const char *summary;
    const char *const *syms; /* size symbols, NULL-terminated */
    const ft_tensor_spec *tensors;
    int ntensors;
    const char *const *attrs; /* accepted attribute names, NULL-terminated */
    ft_bwd_kind backward;
    /* Derive the sizes no tensor binds directly and check every relation and index value the
     * op needs (called once the input shapes are bound, before anything is allocated). */
    ft_status (*check)(ft_call *c, ft_err *err);
    /* Set every size symbol and the attributes a preset fixes. */
    ft_status (*from_preset)(ft_call *c, const ft_preset *p, ft_err *err);
    /* Fill the inputs with realistic random data (valid indices, non-zero floats). p may be
     * NULL (a call sized by its dims alone, e.g. from a profile entry). */
    void (*fill_inputs)(ft_call *c, const ft_preset *p, ft_rng *rng);
    /* Run the float64 reference on a call whose float tensors are FT_F64. The reference
     * functions (each family's FAMILY_ref.h) take and produce double arrays (index tensors keep
     * their integer types), accumulate in double, and are written to be obviously right rather
     * than fast: one loop nest per formula of SPEC.md. Arrays are dense and row-major, last
     * index fastest; the comment after each pointer gives its shape. Outputs are fully
     * overwritten (no accumulation into caller memory). They cannot fail: shapes and index
     * ranges are validated by the op's check before they are called, so they only assert on
     * programming errors. A backward recomputes whatever forward state it needs from the
     * inputs. */
    void (*reference)(const ft_call *c);
    /* The floating-point work the call must do (napkin math, stated in the op's header
     * comment): the FLOPs of the minimal algorithm, forward plus backward when it runs.
     * Exact when the index tensors are filled (attention FLOPs depend on the visible keys),
     * an estimate from the sizes alone when they are NULL. */
    double (*flops)(const ft_call *c);
    /* Its implementations (NULL where a backend has none): what kernels/cpu and kernels/cuda
     * run. Opaque here; the op's family sets them beside its description. */
    const struct ft_cpu_impl *cpu;
    const struct ft_cuda_op *cuda;
} ft_op;

/* The fields of an op's description that its family names after one prefix P: the tables
 * P_syms and P_tensors and the hooks P_check, P_from_preset, P_fill, P_reference, P_flops.
 * The description sets the rest (name, summary, attrs, backward, cpu, cuda) itself. */
#define FT_OP_HOOKS(P)                                                                             \
    .syms = P##_syms, .tensors = P##_tensors,                                                      \
    .ntensors = (int)(sizeof P##_tensors / sizeof P##_tensors[0]), .check = P##_check,             \
    .from_preset = P##_from_preset, .fill_inputs = P##_fill, .reference = P##_reference,           \
    .flops = P##_flops
/* Its implementations, named after the op (FT_OP_IMPLS(fusion_dflare): ft_cpu_fusion_dflare,
 * ft_cuda_fusion_dflare). */
#define FT_OP_IMPLS(NAME) .cpu = &ft_cpu_##NAME, .cuda = &ft_cuda_##NAME
/* An op's whole description, ft_op_NAME: the tables and hooks named after the prefix P
 * (FT_OP_HOOKS) with the attributes it accepts in P_attrs, its implementations named after NAME
 * (FT_OP_IMPLS), the name users type (OP_NAME), how its backward runs (BWD, an ft_bwd_kind) and
 * the line `flaretune list` shows (SUMMARY). */
#define FT_OP_DEFINE(NAME, P, OP_NAME, BWD, SUMMARY)                                               \
    const ft_op ft_op_##NAME = {.name = OP_NAME,                                                   \
                                .summary = SUMMARY,                                                \
                                FT_OP_HOOKS(P),                                                    \
                                .attrs = P##_attrs,                                                \
                                .backward = BWD,                                                   \
                                FT_OP_IMPLS(NAME)}

/* One invocation of an op: its sizes, attributes and tensors (indexed like op->tensors; NULL
 * where a tensor does not take part, e.g. gradients when the backward does not run). */
struct ft_call {
    const ft_op *op;
    int64_t dim[FT_MAX_SYMS];
    ft_attrs attrs;
    int backward; /* resolved: does this call run the backward */
    ft_tensor *t[FT_MAX_TENSORS];
    ft_workspace *ws; /* kernel scratch, owned by the caller (NULL: the backend makes one) */
    /* A device backend's copies of the call's tensors, made on the first run and kept while the
     * tensors stay the same (freed by ft_call_free). Code that rewrites an input in place calls
     * ft_call_touch so the next run copies it again. */
    void *dev_state;
    void (*dev_state_free)(void *state);
    /* The tuner's watchdog (docs/measurement.md): the monotonic time (seconds) past which a
     * run stops early and returns FT_ETIMEDOUT (0: no limit), and from check_s on (0: never),
     * it also stops once the thread that started it (cpu_clock, its CPU time at start_s was
     * start_cpu_s) has been off its CPU for over half the time since start_s: a call the
     * scheduler took that much from cannot be a clean sample. The CPU kernels look between
     * their tasks (ft_call_overdue); ft_backend_time looks between calls. */
    double deadline_s, check_s, start_s, start_cpu_s;
    clockid_t cpu_clock;
    /* ...or once another thread of the process (an OpenMP or BLAS worker) has waited for a CPU
     * for over half of it, seconds as others_lost(others_ctx) says: the calling thread then
     * spins at a barrier on its CPU while the call waits for the worker
     * (ft_call_watch_threads; NULL: only the calling thread is judged). */
    double (*others_lost)(const void *ctx);
    const void *others_ctx;
    int checking; /* a thread is judging check_s */
    int overdue;  /* a kernel stopped early: its outputs are incomplete */
    int spoiled;  /* ...because the scheduler took over half the call (else the deadline) */
};

/* Arm c's watchdog from now: stop past `limit_s` (0: none) and, from `check_after_s` on (0:
 * never), once the calling thread has lost over half the call; 0, 0 disarms it. */
void ft_call_watch(ft_call *c, double limit_s, double check_after_s);
/* With the watchdog armed, judge the process's other threads too: lost(ctx), the longest any
 * of them has waited for a CPU since the call began (the tuner's scheduler probe, core/sched.h).
 * ctx must outlive the call; ft_call_watch forgets both. */
void ft_call_watch_threads(ft_call *c, double (*lost)(const void *ctx), const void *ctx);
/* The check of ft_call_overdue once check_s has come (op.c). */
int ft_call_judge(ft_call *c, double now);

/* 1 once c is past its deadline or spoiled (and marks it overdue): a kernel then skips its
 * remaining tasks. About as cheap as reading the clock; call it per task, not per element. */
static inline int ft_call_overdue(ft_call *c) {
    double check;
    __atomic_load(&c->check_s, &check, __ATOMIC_RELAXED); /* the judge moves it on */
    if (!(c->deadline_s > 0) && !(check > 0)) return 0;
    double now = ft_now_s();
    /* Judged before the deadline: a call the scheduler took over half of is spoiled, not slow,
     * even when both come at once (the two share a floor of a few scheduler slices). */
    if (check > 0 && now >= check && ft_call_judge(c, now)) return 1;
    if (c->deadline_s > 0 && now >= c->deadline_s) {
        __atomic_store_n(&c->overdue, 1, __ATOMIC_RELAXED);
        return 1;
    }
    return __atomic_load_n(&c->overdue, __ATOMIC_RELAXED);
}

int ft_op_sym(const ft_op *op, const char *sym);     /* index of a size symbol, -1 if none */
int ft_op_tensor(const ft_op *op, const char *name); /* index of a tensor, -1 if none */
int ft_op_accepts_attr(const ft_op *op, const char *name);

/* Set c->backward from the op's kind and the `backward` attribute (done by ft_call_bind and
 * ft_call_from_preset; call it directly before asking ft_call_uses which inputs to load). */
void ft_call_resolve_backward(ft_call *c);
/* Does tensor i take part in call c (role and flags against c->backward, want_dw, want_dx
 * and final_norm)? */
int ft_call_uses(const ft_call *c, int i);
/* Shape of tensor i from the call's sizes. Returns the rank. */
int ft_call_shape(const ft_call *c, int i, int64_t *shape);
void ft_call_init(ft_call *c, const ft_op *op);
/* Bind the sizes from the input tensors already placed in c->t, checking every shape and dtype
 * against the op's description, then run op->check. */
ft_status ft_call_bind(ft_call *c, ft_err *err);
/* Allocate (zeroed) every tensor of the given roles that takes part and is still NULL. */
ft_status ft_call_alloc(ft_call *c, int inputs, int outputs, ft_err *err);
/* Size a call (made with ft_call_init, attributes set) at a preset, allocate its tensors and
 * fill the inputs with realistic random data from `seed`. */
ft_status ft_call_from_preset(ft_call *c, const ft_preset *p, uint64_t seed, ft_err *err);
/* Size a call (made with ft_call_init, attributes set) from a list of sizes by symbol name
 * (every symbol of the op), allocate its tensors and fill the inputs at random from `seed`. */
ft_status ft_call_from_dims(ft_call *c, const char *const *names, const int64_t *values, int n,
                            uint64_t seed, ft_err *err);
void ft_call_free(ft_call *c);
/* Drop a device backend's copies of the call's tensors (after rewriting an input in place). */
void ft_call_touch(ft_call *c);
/* Bytes the call must move at the least: every input that takes part read once, every output
 * written once (float tensors in their storage type: 2 bytes with dtype=bf16). With flops, this
 * places the call on the machine's roofline. */
double ft_call_io_bytes(const ft_call *c);
/* Sizes as "N=24 T=4 H=64 D=3" (for messages, events and profile keys). */
void ft_call_dims_str(const ft_call *c, char *buf, size_t n);

/* Fill a float32 tensor with normal values N(mean, std^2) (random inputs for checks and timing). */
void ft_fill_normal(ft_tensor *t, ft_rng *rng, double mean, double std);
/* The attention scale of a call: the `scale` attribute, or dh^-0.5 when it is left at auto. */
double ft_attn_scale(const ft_attrs *a, int64_t dh);

/* Run the float64 reference: converts the float inputs to float64, runs op->reference and
 * writes every output that takes part into c's output tensors (converting as needed). */
ft_status ft_call_reference(ft_call *c, ft_err *err);
/* A float64 copy of c (inputs converted, outputs allocated) with the reference run on it; the
 * verifier compares a backend's outputs against it. With dtype=bf16 the float inputs are
 * rounded to bf16 first and the outputs after, as a device backend stores them (SPEC.md
 * "Tolerances"). Free with ft_call_free. */
ft_status ft_call_reference_f64(const ft_call *c, ft_call *ref, ft_err *err);

#ifdef __cplusplus
}
#endif
#endif
