"""ordering.py: the orders of the parameters a fair comparison replays over.

The order of the parameters (which varies fastest in space order) changes what a strategy does
with the same landscape. Ordering 0 is the parameters' own order; ordering j > 0 is a
Fisher-Yates shuffle of 0..n-1 driven by splitmix64 seeded with j, exactly as
ft_landscape_ordering (tuner/replay.h) draws it, so `flaretune replay --orderings N`
and `scripts/kt-compare.py --orderings N` replay seed s on the same ordering (s - 1) % N.
"""

MASK = (1 << 64) - 1


def ordering(nparams, j):
    """perm: ordering j's parameter q is the original parameter perm[q]."""
    perm = list(range(nparams))
    if j <= 0:
        return perm
    x = j & MASK
    for i in range(nparams - 1, 0, -1):
        x = (x + 0x9E3779B97F4A7C15) & MASK
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z ^= z >> 31
        k = z % (i + 1)
        perm[i], perm[k] = perm[k], perm[i]
    return perm
