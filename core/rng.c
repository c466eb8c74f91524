/* rng.c: xoshiro256** seeded through splitmix64 (see core/rng.h). */
#include "core/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void ft_rng_seed(ft_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

uint64_t ft_rng_next(ft_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double ft_rng_uniform(ft_rng *r) { return (double)(ft_rng_next(r) >> 11) * 0x1.0p-53; }

uint64_t ft_rng_below(ft_rng *r, uint64_t n) {
    /* Rejection keeps the result unbiased for any n. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = ft_rng_next(r);
    while (x >= limit);
    return x % n;
}

double ft_rng_normal(ft_rng *r) {
    double u1 = ft_rng_uniform(r), u2 = ft_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void ft_rng_normal_pair(ft_rng *r, double *a, double *b) {
    double u, v, s;
    do { /* a point uniform in the unit disc, less its centre (about 21% are drawn again) */
        u = 2.0 * ft_rng_uniform(r) - 1.0;
        v = 2.0 * ft_rng_uniform(r) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    double m = sqrt(-2.0 * log(s) / s);
    *a = u * m;
    *b = v * m;
}
