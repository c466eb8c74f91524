/* rng.c: xoshiro256** seeded through splitmix64 (see core/rng.h). */
#include "core/rng.h"

#include <math.h>
#include <pthread.h>

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

/* ---- standard normals by the ziggurat ------------------------------------------------------ */

/* Marsaglia and Tsang's ziggurat ("The Ziggurat Method for Generating Random Variables", J.
 * Stat. Softw. 5(8), 2000) with 256 layers, as Doornik lays it out ("An Improved Ziggurat
 * Method to Generate Normal Random Samples", 2005): 256 layers of equal area V under
 * f(x) = exp(-x^2 / 2), the lowest one carrying the tail beyond R. Layer i spans [0, zig_x[i]]
 * across, zig_x[i + 1] < zig_x[i] being the width of the layer above, so a point drawn across
 * layer i below zig_x[i + 1] lies under f at once: 99% of draws cost one 64-bit draw, a multiply
 * and a compare. R and V are the published pair for 256 layers; the widths follow from them
 * (the recursion ends at 0 to within 3e-11). */
#define ZIG_LAYERS 256
#define ZIG_R      3.6541528853610088
#define ZIG_V      4.92867323399e-3

static double zig_x[ZIG_LAYERS + 1], zig_f[ZIG_LAYERS + 1];
static pthread_once_t zig_once = PTHREAD_ONCE_INIT;

static void zig_init(void) {
    zig_x[0] = ZIG_V / exp(-0.5 * ZIG_R * ZIG_R);
    zig_x[1] = ZIG_R;
    for (int i = 1; i < ZIG_LAYERS - 1; i++)
        zig_x[i + 1] = sqrt(-2.0 * log(ZIG_V / zig_x[i] + exp(-0.5 * zig_x[i] * zig_x[i])));
    zig_x[ZIG_LAYERS] = 0.0;
    for (int i = 0; i <= ZIG_LAYERS; i++)
        zig_f[i] = exp(-0.5 * zig_x[i] * zig_x[i]);
}

static double zig_normal(ft_rng *r) {
    for (;;) {
        /* One draw gives the layer (bits 0-7), the sign (bit 8) and the point across (53
         * high bits), none shared. */
        const uint64_t u = ft_rng_next(r);
        const int i = (int)(u & 0xff);
        const double sign = (double)(1 - (int)((u >> 7) & 2)); /* bit 8: 1 or -1 */
        const double x = (double)(int64_t)(u >> 11) * 0x1.0p-53 * zig_x[i];
        if (x < zig_x[i + 1]) return sign * x;
        if (i == 0) { /* the tail beyond R (Marsaglia 1964) */
            double a, b;
            do {
                a = -log(1.0 - ft_rng_uniform(r)) / ZIG_R;
                b = -log(1.0 - ft_rng_uniform(r));
            } while (b + b < a * a);
            return sign * (ZIG_R + a);
        }
        /* The wedge between the layer's rectangle and f: a height drawn in the layer. */
        if (zig_f[i] + ft_rng_uniform(r) * (zig_f[i + 1] - zig_f[i]) < exp(-0.5 * x * x))
            return sign * x;
    }
}

/* One piece: its own generator, its own loop (out of the parallel region, so that the state and
 * the bounds stay in registers). */
static void fill_piece(uint64_t seed, float *restrict x, int64_t n, double mean, double std) {
    ft_rng p;
    ft_rng_seed(&p, seed);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(mean + std * zig_normal(&p));
}

void ft_rng_fill_normal(ft_rng *r, float *x, int64_t n, double mean, double std) {
    pthread_once(&zig_once, zig_init);
    const uint64_t base = ft_rng_next(r);
    const int64_t pieces = n > 0 ? (n + FT_RNG_FILL_PIECE - 1) / FT_RNG_FILL_PIECE : 0;
#pragma omp parallel for schedule(static) if (pieces > 1)
    for (int64_t k = 0; k < pieces; k++) {
        const int64_t at = k * FT_RNG_FILL_PIECE;
        fill_piece(base + (uint64_t)k, x + at, k + 1 < pieces ? FT_RNG_FILL_PIECE : n - at, mean,
                   std);
    }
}
