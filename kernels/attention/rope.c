/* rope.c: RoPE's frequencies (SPEC.md attention.kvproj, "RoPE scaling"), computed once on the
 * host for every implementation: the float64 reference, the CPU variants and the CUDA kernels
 * all rotate with the inv_freq and mscale made here, so a scaling is written in one place.
 *
 *   angle(pos, m) = pos * inv_freq[m]   (m < dh/2)
 *   rope(x)       = mscale * (x * cos + rotate_half(x) * sin)
 *
 * with base[m] = theta^(-2m/dh) and, by `rope_scaling` (L = original_max_pos, s = factor):
 *   none    inv_freq = base, mscale = 1.
 *   llama3  by wavelength w = 2 pi / base[m]: w < L/high_freq_factor kept; w > L/low_freq_factor
 *           divided by s; in between (1 - t) base/s + t base with
 *           t = (L/w - low_freq_factor) / (high_freq_factor - low_freq_factor). mscale = 1.
 *           (Hugging Face transformers, modeling_rope_utils.py `_compute_llama3_parameters`.)
 *   yarn    d(r) = dh ln(L / (2 pi r)) / (2 ln theta), the dim that turns r times over L;
 *           lo = d(beta_fast), hi = d(beta_slow), floored and ceiled when truncate; lo >= 0,
 *           hi <= dh - 1, hi += 0.001 when equal; ramp[m] = clamp((m - lo) / (hi - lo), 0, 1);
 *           inv_freq = base (1 - ramp) + base / s * ramp; mscale = 0.1 ln s + 1 (s > 1).
 *           (transformers `_compute_yarn_parameters`; gpt-oss's own RotaryEmbedding,
 *           gpt_oss/torch/model.py, is the same with truncate off and multiplies cos and sin by
 *           the same 0.1 ln s + 1, its "concentration". Some transformers versions take s as
 *           max_position_embeddings / L instead: 131072 / 4096 = 32 for gpt-oss, its factor.)
 * Everything is in double: the frequencies are dh/2 numbers per call, and the kernels form the
 * angles in double from them (pos * inv_freq reaches thousands of radians).
 */
#include <math.h>

#include "attention/attention.h"

static const double TWO_PI = 6.283185307179586476925286766559;

/* Llama 3.1: the long wavelengths (low frequencies) are interpolated by the factor, the short
 * ones kept, with a band between where the two mix linearly in L / wavelength. */
static void llama3(const ft_rope_attrs *r, int64_t half, double *inv_freq) {
    const double L = r->original_max_pos, lo = r->low_freq_factor, hi = r->high_freq_factor;
    const double long_w = L / lo, short_w = L / hi;
    for (int64_t m = 0; m < half; m++) {
        const double f = inv_freq[m], w = TWO_PI / f;
        if (w < short_w) continue;
        if (w > long_w) {
            inv_freq[m] = f / r->factor;
            continue;
        }
        const double t = (L / w - lo) / (hi - lo);
        inv_freq[m] = (1 - t) * f / r->factor + t * f;
    }
}

/* The (fractional) dim whose frequency turns `turns` times over L positions. */
static double yarn_dim(double turns, int64_t dh, double theta, double L) {
    return (double)dh * log(L / (turns * TWO_PI)) / (2 * log(theta));
}

/* YaRN ("NTK by parts"): dims that turn many times over the pretraining context keep their
 * frequency, dims that turn less than once are interpolated by the factor, a linear ramp over
 * the dims between; the attention logits then get mscale^2 through cos and sin. */
static void yarn(const ft_rope_attrs *r, double theta, int64_t dh, double *inv_freq,
                 double *mscale) {
    const double L = r->original_max_pos;
    double lo = yarn_dim(r->beta_fast, dh, theta, L), hi = yarn_dim(r->beta_slow, dh, theta, L);
    if (r->truncate) {
        lo = floor(lo);
        hi = ceil(hi);
    }
    lo = lo > 0 ? lo : 0;
    hi = hi < (double)(dh - 1) ? hi : (double)(dh - 1);
    if (lo == hi) hi += 0.001; /* as transformers: no division by zero when the range is a dim */
    for (int64_t m = 0; m < dh / 2; m++) {
        double ramp = ((double)m - lo) / (hi - lo);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        inv_freq[m] = inv_freq[m] * (1 - ramp) + inv_freq[m] / r->factor * ramp;
    }
    *mscale = r->factor > 1 ? 0.1 * log(r->factor) + 1 : 1;
}

void ft_rope_freqs(const ft_attrs *a, int64_t dh, double *inv_freq, double *mscale) {
    const int64_t half = dh / 2;
    for (int64_t m = 0; m < half; m++)
        inv_freq[m] = pow(a->rope_theta, -2.0 * (double)m / (double)dh);
    *mscale = 1;
    if (a->rope.scaling == FT_ROPE_LLAMA3)
        llama3(&a->rope, half, inv_freq);
    else if (a->rope.scaling == FT_ROPE_YARN)
        yarn(&a->rope, a->rope_theta, dh, inv_freq, mscale);
}

ft_status ft_rope_check(const char *op, const ft_attrs *a, ft_err *err) {
    const ft_rope_attrs *r = &a->rope;
    if (r->scaling == FT_ROPE_LLAMA3 && !(r->high_freq_factor > r->low_freq_factor))
        return ft_err_set(err, FT_EINVAL,
                          "%s: rope_scaling=llama3 needs rope_high_freq_factor (%g) above "
                          "rope_low_freq_factor (%g)",
                          op, r->high_freq_factor, r->low_freq_factor);
    if (r->scaling == FT_ROPE_YARN && !(r->beta_fast > r->beta_slow))
        return ft_err_set(err, FT_EINVAL,
                          "%s: rope_scaling=yarn needs rope_beta_fast (%g) above rope_beta_slow "
                          "(%g)",
                          op, r->beta_fast, r->beta_slow);
    if (r->scaling == FT_ROPE_YARN && !(a->rope_theta > 1))
        return ft_err_set(err, FT_EINVAL,
                          "%s: rope_scaling=yarn needs rope_theta above 1 (its dims are "
                          "log(L) / log(theta)), got %g",
                          op, a->rope_theta);
    return FT_OK;
}
