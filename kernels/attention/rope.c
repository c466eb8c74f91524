/* rope.c: the RoPE rotation frequencies of the attention ops (SPEC.md attention.kvproj), in one
 * host-side place, so every implementation that needs them (the float64 reference's backward,
 * the CPU backward, the CUDA backward's device table) rotates by the same angles.
 *
 *   angle[n, m] = pos[n] * inv_freq[m],  m < dh/2
 *   rope(x)     = mscale * (x * cos(angle) + rotate_half(x) * sin(angle))
 *
 * Plain RoPE (Qwen3's default rope_type): inv_freq[m] = rope_theta^(-2m/dh), mscale = 1
 * (transformers' modeling_rope_utils.py, _compute_default_rope_parameters). The frequencies are
 * computed in double: positions reach tens of thousands, so an angle formed from a float
 * frequency would be off by ~1e-4 rad, which is larger than the tolerances the ops are held to.
 */
#include <math.h>

#include "attention/attention.h"

void ft_rope_freqs(const ft_attrs *a, int64_t dh, double *inv_freq, double *mscale) {
    for (int64_t m = 0; m < dh / 2; m++)
        inv_freq[m] = pow(a->rope_theta, -2.0 * (double)m / (double)dh);
    *mscale = 1.0;
}
