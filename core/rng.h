/* rng.h: a small deterministic random generator (xoshiro256**) for inputs and searches.
 *
 * Every random tensor and every search decision in flaretune comes from an ft_rng seeded
 * explicitly, so a seed reproduces a run bit for bit on any machine.
 */
#ifndef FLARETUNE_RNG_H
#define FLARETUNE_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ft_rng {
    uint64_t s[4];
} ft_rng;

void ft_rng_seed(ft_rng *r, uint64_t seed);
uint64_t ft_rng_next(ft_rng *r);
/* Uniform in [0, 1). */
double ft_rng_uniform(ft_rng *r);
/* Uniform integer in [0, n); n > 0. */
uint64_t ft_rng_below(ft_rng *r, uint64_t n);
/* Standard normal (Box-Muller; no cached second value so the stream stays simple). */
double ft_rng_normal(ft_rng *r);

/* Elements a piece of ft_rng_fill_normal draws from a generator of its own. */
#define FT_RNG_FILL_PIECE 65536

/* x[0..n) = mean + std * a standard normal, rounded to float: what a call's inputs are filled
 * with. The values come in pieces of FT_RNG_FILL_PIECE, piece k from a generator seeded with one
 * draw of r plus k, by the ziggurat (Marsaglia and Tsang, 256 layers: 3.5 ns a value on one
 * thread of this project's 2-core machine, against 10 for the polar method and 29 for
 * ft_rng_normal, 2026-12-04), the pieces filled by OpenMP's threads: the values depend on r's
 * state and n alone, never on the threads, and r advances by one draw whatever n is. */
void ft_rng_fill_normal(ft_rng *r, float *x, int64_t n, double mean, double std);

#ifdef __cplusplus
}
#endif
#endif
