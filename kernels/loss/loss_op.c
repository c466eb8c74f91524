/* loss_op.c: the interface of the fused LM head + weighted cross-entropy op (SPEC.md loss):
 * tensors, attributes, label checks, preset sizes, realistic inputs, the bridge to the float64
 * reference in kernels/loss/loss_ref.c, and the napkin math.
 *
 * The minimal work is the logits GEMM (2*Ms*V*H) and the dh GEMM (2*Ms*V*H), plus dw_lm
 * (2*Ms*V*H) when wanted, over the Ms scored rows (an unscored row has no loss and no
 * gradient); softmax, CE and the weights are O(M*V) and O(M). Strategies that never hold a
 * logits row whole recompute the logits (one more 2*M*V*H), a cost the roofline fraction shows.
 * At M = 8192, V = 151936, H = 4096, fp32 logits would take 5 GB: chunks of whole blocks keep
 * the scratch bounded. With final_norm the drafter's final RMSNorm (O(M*H) each way, not counted
 * in the FLOPs) runs first: h is then un-normed and the call also reads g_norm and writes dg. */
#include <math.h>

#include "loss/loss.h"
#include "loss/loss_ref.h"
#include "op/op.h"

static const char *const loss_syms[] = {"M", "H", "V", NULL};
static const ft_tensor_spec loss_tensors[] = {
    [LS_HID] = {"h", FT_F32, "M,H", FT_ROLE_IN, 0, "final drafter states, row = blk*B + k"},
    [LS_WLM] = {"w_lm", FT_F32, "V,H", FT_ROLE_IN, 0, "the target's LM head"},
    [LS_LABELS] = {"labels", FT_I32, "M", FT_ROLE_IN, 0,
                   "target token per row, in [0, V) where scored"},
    [LS_MASK] = {"mask", FT_U8, "M", FT_ROLE_IN, 0, "1 = scored (position 0 never is)"},
    [LS_LOSS] = {"loss", FT_F32, "", FT_ROLE_OUT, 0, "sum_m w[m] ce[m] / denominator"},
    [LS_CE] = {"ce", FT_F32, "M", FT_ROLE_OUT, 0, "cross entropy per row (0 if not scored)"},
    [LS_Q] = {"q", FT_F32, "M", FT_ROLE_OUT, 0, "draft probability of the target token"},
    [LS_W] = {"w", FT_F32, "M", FT_ROLE_OUT, 0, "row weights before the denominator"},
    [LS_DH] = {"dh", FT_F32, "M,H", FT_ROLE_OUT, 0, "gradient of h"},
    [LS_DWLM] = {"dw_lm", FT_F32, "V,H", FT_ROLE_OUT, FT_TS_WANT_DW,
                 "gradient of w_lm (want_dw = 1)"},
    [LS_GNORM] = {"g_norm", FT_F32, "H", FT_ROLE_IN, FT_TS_FINAL_NORM,
                  "gain of the drafter's final RMSNorm (final_norm = 1)"},
    [LS_DG] = {"dg", FT_F32, "H", FT_ROLE_OUT, FT_TS_FINAL_NORM,
               "gradient of g_norm (final_norm = 1)"},
};
static const char *const loss_attrs[] = {
    "B",        "scheme",    "gamma", "gamma0",  "gamma_max",  "step", "warmup_steps",
    "alpha",    "num_seqs",  "norm",  "want_dw", "gamma_inc",  "epoch", "final_norm",
    "eps",      "dtype",     NULL};

static ft_status loss_check(ft_call *c, ft_err *err) {
    int64_t M = c->dim[LS_M], V = c->dim[LS_V], B = c->attrs.loss.B;
    if (c->dim[LS_H] < 1 || V < 1)
        return ft_err_set(err, FT_ESHAPE, "loss: H and V must be at least 1");
    if (B < 1 || M % B)
        return ft_err_set(err, FT_ESHAPE,
                          "loss: M = %lld rows is not a whole number of blocks of B = %lld "
                          "(set the attribute B: \"B=...\" in the call's attrs, --attr B=... "
                          "on the command line)",
                          (long long)M, (long long)B);
    const int32_t *labels = c->t[LS_LABELS]->data;
    const uint8_t *mask = c->t[LS_MASK]->data;
    for (int64_t m = 0; m < M; m++) {
        if (mask[m] > 1)
            return ft_err_set(err, FT_EINVAL, "loss: mask[%lld] = %d, expected 0 or 1",
                              (long long)m, mask[m]);
        if (mask[m] && m % B && (labels[m] < 0 || labels[m] >= V))
            return ft_err_set(
                err, FT_EINVAL,
                "loss: labels[%lld] = %d is outside [0, V) with V = %lld on a scored row",
                (long long)m, labels[m], (long long)V);
    }
    return FT_OK;
}

static ft_status loss_from_preset(ft_call *c, const ft_preset *p, ft_err *err) {
    (void)err;
    c->attrs.loss.B = p->B;
    c->dim[LS_M] = p->blocks * p->B;
    c->dim[LS_H] = p->H;
    c->dim[LS_V] = p->V;
    return FT_OK;
}

/* Random logits alone make every row near-uniform (q ~ 1/V), which exercises nothing the
 * D-PACE weights care about. Instead each row's target logit is planted: h gets a component
 * along its label's LM-head row so that z[label] lands anywhere from "hopeless" to "confident". */
static void loss_fill(ft_call *c, const ft_preset *p, ft_rng *rng) {
    (void)p;
    int64_t M = c->dim[LS_M], H = c->dim[LS_H], V = c->dim[LS_V], B = c->attrs.loss.B;
    float *h = c->t[LS_HID]->data, *w = c->t[LS_WLM]->data;
    int32_t *labels = c->t[LS_LABELS]->data;
    uint8_t *mask = c->t[LS_MASK]->data;
    ft_fill_normal(c->t[LS_WLM], rng, 0.0, 1.0 / sqrt((double)H));
    for (int64_t m = 0; m < M; m++) {
        mask[m] = ft_rng_below(rng, 10) != 0;
        int32_t label = (int32_t)ft_rng_below(rng, (uint64_t)V);
        labels[m] = mask[m] || m % B == 0 ? label : -100;
        const float *wl = w + (int64_t)label * H;
        double norm2 = 0;
        for (int64_t k = 0; k < H; k++)
            norm2 += (double)wl[k] * wl[k];
        double target = 14.0 * ft_rng_uniform(rng); /* planted logit, nats above the noise */
        for (int64_t k = 0; k < H; k++)
            h[m * H + k] = (float)(ft_rng_normal(rng) + target * wl[k] / norm2);
    }
    /* The final norm's gain near 1, as a trained RMSNorm's is (drawn after everything else, so
     * the other inputs are the same with or without it). */
    if (c->attrs.loss.final_norm && c->t[LS_GNORM]) {
        float *g = c->t[LS_GNORM]->data;
        for (int64_t k = 0; k < H; k++)
            g[k] = (float)(1.0 + 0.1 * ft_rng_normal(rng));
    }
}

static void loss_reference(const ft_call *c) {
    const int64_t *d = c->dim;
    if (c->attrs.loss.final_norm) {
        ft_ref_loss_normed(d[LS_M], d[LS_H], d[LS_V], &c->attrs.loss, c->attrs.eps,
                           c->t[LS_HID]->data, c->t[LS_GNORM]->data, c->t[LS_WLM]->data,
                           c->t[LS_LABELS]->data, c->t[LS_MASK]->data, c->t[LS_LOSS]->data,
                           c->t[LS_CE]->data, c->t[LS_Q]->data, c->t[LS_W]->data,
                           c->t[LS_DH]->data, c->t[LS_DG]->data,
                           c->attrs.loss.want_dw ? c->t[LS_DWLM]->data : NULL);
        return;
    }
    ft_ref_loss(d[LS_M], d[LS_H], d[LS_V], &c->attrs.loss, c->t[LS_HID]->data, c->t[LS_WLM]->data,
                c->t[LS_LABELS]->data, c->t[LS_MASK]->data, c->t[LS_LOSS]->data, c->t[LS_CE]->data,
                c->t[LS_Q]->data, c->t[LS_W]->data, c->t[LS_DH]->data,
                c->attrs.loss.want_dw ? c->t[LS_DWLM]->data : NULL);
}

static double loss_flops(const ft_call *c) {
    const int64_t *d = c->dim;
    /* Only scored rows need logits: an unscored row has ce = 0 and a zero gradient. */
    double rows = (double)d[LS_M];
    if (c->t[LS_MASK]) {
        const uint8_t *mask = c->t[LS_MASK]->data;
        int64_t B = c->attrs.loss.B > 0 ? c->attrs.loss.B : 1;
        rows = 0;
        for (int64_t m = 0; m < d[LS_M]; m++) rows += mask[m] && m % B;
    }
    double gemm = 2.0 * rows * (double)d[LS_V] * (double)d[LS_H];
    return gemm * (2.0 + (c->attrs.loss.want_dw ? 1.0 : 0.0));
}

FT_OP_DEFINE(loss, loss, "loss", FT_BWD_ALWAYS,
             "LM head + weighted cross entropy (uniform, decay, progressive, D-PACE), forward "
             "and backward fused, optionally behind the drafter's final RMSNorm");
