/* attrs.c: the attributes of every op, their defaults and their parsing (SPEC.md "Attribute
 * defaults"). One table drives `list`, `exec --attr` and the attribute echo in events. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op/op.h"

const char *const ft_scheme_names[] = {"uniform",   "decay",      "progressive",       "dpace",
                                       "dpace_cum", "dpace_cont", "progressive_epoch", NULL};
const char *const ft_norm_names[] = {"default", "weight_sum", "count", "num_seqs", "none", NULL};
const char *const ft_dtype_attr_names[] = {"f32", "bf16", NULL};
const char *const ft_rope_scaling_names[] = {"none", "llama3", "yarn", NULL};

const ft_attr_desc ft_attr_table[] = {
    {"eps", FT_ATTR_FLOAT, NULL, "1e-6", "RMSNorm epsilon"},
    {"rope_theta", FT_ATTR_FLOAT, NULL, "1e6", "RoPE base (inv_freq[m] = theta^(-2m/dh))"},
    {"rope_scaling", FT_ATTR_ENUM, ft_rope_scaling_names, "none",
     "RoPE frequency scaling for long contexts (Llama 3.1: llama3; gpt-oss: yarn)"},
    {"rope_factor", FT_ATTR_FLOAT, NULL, "1", "llama3, yarn: context stretch (>= 1)"},
    {"rope_low_freq_factor", FT_ATTR_FLOAT, NULL, "1",
     "llama3: wavelengths over original_max_pos / this are divided by factor"},
    {"rope_high_freq_factor", FT_ATTR_FLOAT, NULL, "4",
     "llama3: wavelengths under original_max_pos / this are kept"},
    {"rope_original_max_pos", FT_ATTR_FLOAT, NULL, "8192",
     "llama3, yarn: the context length the model was pretrained at"},
    {"rope_beta_fast", FT_ATTR_FLOAT, NULL, "32",
     "yarn: dims turning over this many times in original_max_pos are kept"},
    {"rope_beta_slow", FT_ATTR_FLOAT, NULL, "1",
     "yarn: dims turning under this many times are divided by factor"},
    {"rope_truncate", FT_ATTR_BOOL, NULL, "1", "yarn: round the ramp's ends to whole dims"},
    {"scale", FT_ATTR_FLOAT, NULL, "dh^-0.5", "attention score scale"},
    {"backward", FT_ATTR_BOOL, NULL, "0", "also run the backward (reads df or do)"},
    {"B", FT_ATTR_INT, NULL, "16", "block size: row m is position m % B of its block"},
    {"scheme", FT_ATTR_ENUM, ft_scheme_names, "decay", "per-position loss weights"},
    {"gamma", FT_ATTR_FLOAT, NULL, "7", "decay: w_k = exp(-(k-1)/gamma)"},
    {"gamma0", FT_ATTR_FLOAT, NULL, "1", "progressive: gamma at step 0"},
    {"gamma_max", FT_ATTR_FLOAT, NULL, "7", "progressive: gamma once warmed up"},
    {"step", FT_ATTR_FLOAT, NULL, "0", "progressive: training step (>= 0)"},
    {"warmup_steps", FT_ATTR_FLOAT, NULL, "0", "progressive: warm-up length, >= 0 (0: none)"},
    {"gamma_inc", FT_ATTR_FLOAT, NULL, "0.5",
     "progressive_epoch: gamma added per whole epoch (gamma = gamma + gamma_inc * floor(epoch))"},
    {"epoch", FT_ATTR_FLOAT, NULL, "0", "progressive_epoch: training epoch"},
    {"alpha", FT_ATTR_FLOAT, NULL, "0.5", "dpace: smoothing s = (1-alpha) q + alpha"},
    {"num_seqs", FT_ATTR_FLOAT, NULL, "1", "dpace: default denominator"},
    {"norm", FT_ATTR_ENUM, ft_norm_names, "default", "denominator override"},
    {"want_dw", FT_ATTR_BOOL, NULL, "0", "also compute dw_lm"},
    {"final_norm", FT_ATTR_BOOL, NULL, "0",
     "loss: h is un-normed; the final RMSNorm (gain g_norm, eps) runs first (reads g_norm, "
     "writes dg)"},
    {"want_dx", FT_ATTR_BOOL, NULL, "1",
     "fusion ops with backward=1: also compute dx (0: the target's states are frozen, as in "
     "training; only dw and dg)"},
    {"grad_only", FT_ATTR_BOOL, NULL, "0",
     "linear with backward=1: only the backward's GEMMs (dx, dw; y is not computed)"},
    {"window", FT_ATTR_INT, NULL, "0",
     "attention: sliding window, a query at position i sees context keys p > i - window "
     "(0: full attention); the block's own keys stay visible"},
    {"causal", FT_ATTR_BOOL, NULL, "0",
     "attention: query b of a block sees its block's keys 0..b only (SpecForge's sliding "
     "layers); 0: all B"},
    {"dtype", FT_ATTR_ENUM, ft_dtype_attr_names, "f32",
     "float storage on a device backend (bf16: inputs rounded, fp32 accumulation)"},
    {NULL, FT_ATTR_FLOAT, NULL, NULL, NULL},
};

int ft_op_accepts_attr(const ft_op *op, const char *name) {
    for (int i = 0; op->attrs[i]; i++)
        if (strcmp(op->attrs[i], name) == 0) return 1;
    return 0;
}

/* Each attribute at the default its row of ft_attr_table writes, so that a default is stated in
 * one place; scale's ("dh^-0.5") is NAN, which the ops read as dh^-0.5. */
void ft_attrs_default(ft_attrs *a) {
    memset(a, 0, sizeof *a);
    for (const ft_attr_desc *d = ft_attr_table; d->name; d++)
        if (strcmp(d->name, "scale") != 0) ft_attrs_set(a, NULL, d->name, d->def, NULL);
    a->scale = NAN;
    a->rope.named = 0; /* the defaults were set by name, but no one named them */
}

void ft_rope_default(ft_rope_attrs *r) {
    ft_attrs a;
    ft_attrs_default(&a);
    *r = a.rope;
}

void ft_rope_format(double rope_theta, const ft_rope_attrs *r, char *buf, size_t n) {
    int k = snprintf(buf, n, "rope_theta=%.9g rope_scaling=%s", rope_theta,
                     ft_rope_scaling_names[r->scaling]);
    if (k < 0 || (size_t)k >= n) return;
    if (r->scaling == FT_ROPE_LLAMA3)
        snprintf(buf + k, n - (size_t)k,
                 " rope_factor=%.9g rope_low_freq_factor=%.9g rope_high_freq_factor=%.9g "
                 "rope_original_max_pos=%.9g",
                 r->factor, r->low_freq_factor, r->high_freq_factor, r->original_max_pos);
    else if (r->scaling == FT_ROPE_YARN)
        snprintf(buf + k, n - (size_t)k,
                 " rope_factor=%.9g rope_beta_fast=%.9g rope_beta_slow=%.9g "
                 "rope_original_max_pos=%.9g rope_truncate=%d",
                 r->factor, r->beta_fast, r->beta_slow, r->original_max_pos, r->truncate);
}

const ft_attr_desc *ft_attr_find(const char *name) {
    for (const ft_attr_desc *d = ft_attr_table; d->name; d++)
        if (strcmp(d->name, name) == 0) return d;
    return NULL;
}

/* Where each attribute lives in ft_attrs. */
static double *float_slot(ft_attrs *a, const char *name) {
    if (!strcmp(name, "eps")) return &a->eps;
    if (!strcmp(name, "rope_theta")) return &a->rope_theta;
    if (!strcmp(name, "rope_factor")) return &a->rope.factor;
    if (!strcmp(name, "rope_low_freq_factor")) return &a->rope.low_freq_factor;
    if (!strcmp(name, "rope_high_freq_factor")) return &a->rope.high_freq_factor;
    if (!strcmp(name, "rope_original_max_pos")) return &a->rope.original_max_pos;
    if (!strcmp(name, "rope_beta_fast")) return &a->rope.beta_fast;
    if (!strcmp(name, "rope_beta_slow")) return &a->rope.beta_slow;
    if (!strcmp(name, "scale")) return &a->scale;
    if (!strcmp(name, "gamma")) return &a->loss.gamma;
    if (!strcmp(name, "gamma0")) return &a->loss.gamma0;
    if (!strcmp(name, "gamma_max")) return &a->loss.gamma_max;
    if (!strcmp(name, "step")) return &a->loss.step;
    if (!strcmp(name, "warmup_steps")) return &a->loss.warmup_steps;
    if (!strcmp(name, "alpha")) return &a->loss.alpha;
    if (!strcmp(name, "num_seqs")) return &a->loss.num_seqs;
    if (!strcmp(name, "gamma_inc")) return &a->loss.gamma_inc;
    if (!strcmp(name, "epoch")) return &a->loss.epoch;
    return NULL;
}

static void list_choices(const char *const *choices, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; choices[i] && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", choices[i]);
}

static void list_op_attrs(const ft_op *op, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; op->attrs[i] && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", op->attrs[i]);
    if (!op->attrs[0]) snprintf(buf, n, "none");
}

/* The range of a RoPE scaling parameter, as the reason a value outside it is refused (NULL: in
 * range). The relations between two of them (high_freq_factor > low_freq_factor, beta_fast >
 * beta_slow) are checked where the call is checked (ft_rope_check), once all are set. */
static const char *rope_range(const char *name, double v) {
    if (!strcmp(name, "rope_factor") && v < 1) return "at least 1: a context is stretched";
    if ((!strcmp(name, "rope_low_freq_factor") || !strcmp(name, "rope_high_freq_factor") ||
         !strcmp(name, "rope_beta_fast") || !strcmp(name, "rope_beta_slow")) &&
        v <= 0)
        return "must be positive";
    if (!strcmp(name, "rope_original_max_pos") && (v < 1 || v != floor(v)))
        return "a whole number of positions, at least 1";
    return NULL;
}

ft_status ft_attrs_set(ft_attrs *a, const ft_op *op, const char *name, const char *value,
                       ft_err *err) {
    const ft_attr_desc *d = ft_attr_find(name);
    if (!d || (op && !ft_op_accepts_attr(op, name))) {
        char known[256];
        if (!op) return ft_err_set(err, FT_EINVAL, "unknown attribute '%s'", name);
        list_op_attrs(op, known, sizeof known);
        return ft_err_set(err, FT_EINVAL, "%s has no attribute '%s' (attributes: %s)", op->name,
                          name, known);
    }
    char *end;
    errno = 0;
    switch (d->kind) {
    case FT_ATTR_FLOAT: {
        if (!strcmp(name, "scale") && !strcmp(value, "auto")) {
            a->scale = NAN; /* dh^-0.5, as ft_attrs_format writes it */
            return FT_OK;
        }
        double v = strtod(value, &end);
        /* (an underflow to a subnormal or zero is still the finite number written) */
        if (end == value || *end || (errno && !(errno == ERANGE && fabs(v) < 1)) || !isfinite(v))
            return ft_err_set(err, FT_EINVAL, "attribute %s: '%s' is not a finite number", name,
                              value);
        if ((!strcmp(name, "eps") && v < 0) || (!strcmp(name, "gamma") && v <= 0) ||
            (!strcmp(name, "gamma0") && v <= 0) || (!strcmp(name, "gamma_max") && v <= 0) ||
            (!strcmp(name, "alpha") && (v < 0 || v > 1)) ||
            (!strcmp(name, "rope_theta") && v <= 0) || (!strcmp(name, "num_seqs") && v <= 0) ||
            (!strcmp(name, "gamma_inc") && v < 0) || (!strcmp(name, "epoch") && v < 0) ||
            (!strcmp(name, "step") && v < 0) || (!strcmp(name, "warmup_steps") && v < 0))
            return ft_err_set(err, FT_EINVAL, "attribute %s: %s is out of range", name, value);
        const char *why = rope_range(name, v);
        if (why)
            return ft_err_set(err, FT_EINVAL, "attribute %s: %s is out of range (%s)", name, value,
                              why);
        *float_slot(a, name) = v;
        if (!strncmp(name, "rope_", 5)) a->rope.named = 1;
        return FT_OK;
    }
    case FT_ATTR_INT:
    case FT_ATTR_BOOL: {
        long long v = strtoll(value, &end, 10);
        if (end == value || *end || errno)
            return ft_err_set(err, FT_EINVAL, "attribute %s: '%s' is not an integer", name, value);
        if (d->kind == FT_ATTR_BOOL) {
            if (v != 0 && v != 1)
                return ft_err_set(err, FT_EINVAL, "attribute %s: expected 0 or 1, got '%s'", name,
                                  value);
            if (!strcmp(name, "backward"))
                a->backward = (int)v;
            else if (!strcmp(name, "rope_truncate")) {
                a->rope.truncate = (int)v;
                a->rope.named = 1;
            } else if (!strcmp(name, "grad_only"))
                a->grad_only = (int)v;
            else if (!strcmp(name, "final_norm"))
                a->loss.final_norm = (int)v;
            else if (!strcmp(name, "causal"))
                a->causal = (int)v;
            else if (!strcmp(name, "want_dx"))
                a->want_dx = (int)v;
            else
                a->loss.want_dw = (int)v;
        } else if (!strcmp(name, "window")) {
            /* 0 is full attention; a window is counted in positions, so it never needs to
             * exceed an int32 position. */
            if (v < 0 || v > INT32_MAX)
                return ft_err_set(err, FT_EINVAL,
                                  "attribute window: %s is out of range (0 = full, or 1 to %d)",
                                  value, INT32_MAX);
            a->window = v;
        } else {
            if (v < 1 || v > 1 << 20)
                return ft_err_set(err, FT_EINVAL, "attribute %s: %s is out of range", name, value);
            a->loss.B = v;
        }
        return FT_OK;
    }
    case FT_ATTR_ENUM:
        for (int i = 0; d->choices[i]; i++) {
            if (strcmp(d->choices[i], value) == 0) {
                if (d->choices == ft_scheme_names)
                    a->loss.scheme = (ft_loss_scheme)i;
                else if (d->choices == ft_dtype_attr_names)
                    a->dtype = i;
                else if (d->choices == ft_rope_scaling_names) {
                    a->rope.scaling = i;
                    a->rope.named = 1;
                } else
                    a->loss.norm = (ft_loss_norm)i;
                return FT_OK;
            }
        }
        char choices[256];
        list_choices(d->choices, choices, sizeof choices);
        return ft_err_set(err, FT_EINVAL, "attribute %s: unknown value '%s' (one of: %s)", name,
                          value, choices);
    }
    return ft_err_set(err, FT_EINTERNAL, "attribute %s has no kind", name);
}

void ft_attrs_format(const ft_attrs *a, const char *name, char *buf, size_t n) {
    ft_attrs *m = (ft_attrs *)a; /* float_slot only computes an address */
    double *f = float_slot(m, name);
    if (f) {
        if (isnan(*f))
            snprintf(buf, n, "auto");
        else
            snprintf(buf, n, "%.9g", *f);
    } else if (!strcmp(name, "backward"))
        snprintf(buf, n, "%d", a->backward);
    else if (!strcmp(name, "want_dw"))
        snprintf(buf, n, "%d", a->loss.want_dw);
    else if (!strcmp(name, "grad_only"))
        snprintf(buf, n, "%d", a->grad_only);
    else if (!strcmp(name, "want_dx"))
        snprintf(buf, n, "%d", a->want_dx);
    else if (!strcmp(name, "final_norm"))
        snprintf(buf, n, "%d", a->loss.final_norm);
    else if (!strcmp(name, "causal"))
        snprintf(buf, n, "%d", a->causal);
    else if (!strcmp(name, "rope_truncate"))
        snprintf(buf, n, "%d", a->rope.truncate);
    else if (!strcmp(name, "rope_scaling"))
        snprintf(buf, n, "%s", ft_rope_scaling_names[a->rope.scaling]);
    else if (!strcmp(name, "B"))
        snprintf(buf, n, "%lld", (long long)a->loss.B);
    else if (!strcmp(name, "window"))
        snprintf(buf, n, "%lld", (long long)a->window);
    else if (!strcmp(name, "scheme"))
        snprintf(buf, n, "%s", ft_scheme_names[a->loss.scheme]);
    else if (!strcmp(name, "dtype"))
        snprintf(buf, n, "%s", ft_dtype_attr_names[a->dtype ? 1 : 0]);
    else if (!strcmp(name, "norm"))
        snprintf(buf, n, "%s", ft_norm_names[a->loss.norm]);
    else
        snprintf(buf, n, "?");
}

int ft_attr_matters(const ft_op *op, const ft_attrs *a, const char *name) {
    if (!strcmp(op->name, "loss")) {
        if (!strcmp(name, "eps")) return a->loss.final_norm;
        if (!strcmp(name, "gamma_inc") || !strcmp(name, "epoch"))
            return a->loss.scheme == FT_SCHEME_PROGRESSIVE_EPOCH;
    }
    if (!strcmp(name, "want_dx")) return a->backward;
    return 1;
}

void ft_attrs_format_all(const ft_attrs *a, const ft_op *op, char *buf, size_t n) {
    buf[0] = '\0';
    for (int k = 0; op->attrs[k]; k++) {
        size_t used = strlen(buf);
        snprintf(buf + used, n - used, "%s%s=", used ? "," : "", op->attrs[k]);
        used = strlen(buf);
        ft_attrs_format(a, op->attrs[k], buf + used, n - used);
    }
}
