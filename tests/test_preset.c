/* test_preset.c: the preset table is built on first use, and the first use may come from several
 * threads at once (the dashboard's and the tuner's). This program looks presets up from many
 * threads released together before anything else touches the table, so the first build itself
 * is raced; a lookup that saw a half-built table returns NULL or another preset. */
#include <pthread.h>
#include <string.h>

#include "op/op.h"
#include "ft_test.h"

enum { NTHREADS = 8, MAXPRESETS = 64 };

/* Names known without a lookup, so the first call of every thread is a lookup by name. */
static const char *const names[] = {"tiny.dflare.train", "qwen3-8b.dflash.decode",
                                    "small.dflare.decode", "gpt-oss-20b.dflash.train"};
enum { NNAMES = sizeof names / sizeof names[0] };

typedef struct {
    const ft_preset *by_name[NNAMES];
    const ft_preset *by_index[MAXPRESETS];
    int mismatches; /* presets whose own name finds another preset (or none) */
} seen;

static pthread_barrier_t start;
static seen results[NTHREADS];

static void *look_up(void *arg) {
    seen *r = arg;
    pthread_barrier_wait(&start);
    for (int i = 0; i < NNAMES; i++)
        r->by_name[i] = ft_preset_find(names[i]);
    int n = ft_preset_count();
    for (int i = 0; i < n && i < MAXPRESETS; i++) {
        r->by_index[i] = ft_preset_at(i);
        if (!r->by_index[i] || ft_preset_find(r->by_index[i]->name) != r->by_index[i])
            r->mismatches++;
    }
    return NULL;
}

static void test_first_lookups_from_many_threads(void) {
    pthread_t t[NTHREADS];
    FT_CHECK(pthread_barrier_init(&start, NULL, NTHREADS) == 0, "barrier");
    for (int k = 0; k < NTHREADS; k++)
        FT_CHECK(pthread_create(&t[k], NULL, look_up, &results[k]) == 0, "thread %d", k);
    for (int k = 0; k < NTHREADS; k++)
        pthread_join(t[k], NULL);
    pthread_barrier_destroy(&start);

    int n = ft_preset_count();
    FT_CHECK(n > 0 && n <= MAXPRESETS, "%d presets", n);
    for (int k = 0; k < NTHREADS; k++) {
        FT_CHECK(results[k].mismatches == 0, "thread %d: %d presets not found by their name", k,
                 results[k].mismatches);
        for (int i = 0; i < NNAMES; i++) {
            const ft_preset *p = results[k].by_name[i];
            FT_CHECK(p && strcmp(p->name, names[i]) == 0, "thread %d: %s found as %s", k, names[i],
                     p ? p->name : "nothing");
            FT_CHECK(p == results[0].by_name[i], "thread %d: %s at another address", k, names[i]);
        }
        for (int i = 0; i < n && i < MAXPRESETS; i++)
            FT_CHECK(results[k].by_index[i] == ft_preset_at(i), "thread %d: preset %d differs", k,
                     i);
    }
    /* The table the threads built is the table a single thread sees: full sizes, not zeroes. */
    const ft_preset *p = ft_preset_find("tiny.dflare.train");
    FT_CHECK(p && p->H == 64 && p->D == 3 && p->T == 4 && p->N == p->nseq * p->S,
             "tiny.dflare.train has its sizes");
}

/* The context rows of a decode preset, summed without a loop over the requests, equal the sum
 * of every request's length (uniform and ragged, many R and L); sizes whose rows do not fit are
 * -1 at once. */
static void test_ctx_sum(void) {
    ft_preset p = *ft_preset_find("small.dflare.decode");
    for (int ragged = 0; ragged < 2; ragged++)
        for (int64_t R = 1; R <= 70; R += 3)
            for (int64_t L = 1; L <= 5000; L = L * 3 + 1) {
                p.ragged = ragged;
                p.R = R;
                p.L = L;
                int64_t sum = 0;
                for (int64_t r = 0; r < R; r++)
                    sum += ft_preset_ctx_len(&p, r);
                FT_CHECK(ft_preset_ctx_sum(&p) == sum, "R=%lld L=%lld ragged=%d: %lld, loop %lld",
                         (long long)R, (long long)L, ragged, (long long)ft_preset_ctx_sum(&p),
                         (long long)sum);
            }
    p.R = p.L = 2147483647;
    FT_CHECK(ft_preset_ctx_sum(&p) == -1, "R = L = 2^31-1 is too many rows");
}

/* The sliding-window layout (docs/step.md): every preset full; window = W slides every layer,
 * sliding = MASK only the layers of its bits; 0 is allowed for both, a negative value is not. */
static void test_layer_windows(void) {
    for (int i = 0; i < ft_preset_count(); i++) {
        const ft_preset *q = ft_preset_at(i);
        for (int64_t l = 0; l < q->D; l++)
            FT_CHECK(ft_preset_layer_window(q, l) == 0, "%s layer %lld is not full attention",
                     q->name, (long long)l);
    }
    ft_preset p = *ft_preset_find("qwen3-8b.dflash.train");
    ft_err err = {0};
    FT_CHECK(ft_preset_set(&p, "sliding=15", &err) == FT_OK, "%s", err.msg);
    FT_CHECK(ft_preset_layer_window(&p, 0) == 0, "sliding without a window slides nothing");
    FT_CHECK(ft_preset_set(&p, "window=2048", &err) == FT_OK, "%s", err.msg);
    int64_t want[5] = {2048, 2048, 2048, 2048, 0}; /* SpecForge qwen3.6-27b-dflash's layout */
    for (int64_t l = 0; l < 5; l++)
        FT_CHECK(ft_preset_layer_window(&p, l) == want[l], "sliding=15: layer %lld has %lld",
                 (long long)l, (long long)ft_preset_layer_window(&p, l));
    FT_CHECK(ft_preset_set(&p, "sliding=0", &err) == FT_OK, "%s", err.msg);
    FT_CHECK(ft_preset_layer_window(&p, 4) == 2048, "sliding=0: every layer slides");
    FT_CHECK(ft_preset_set(&p, "window=0", &err) == FT_OK, "%s", err.msg);
    FT_CHECK(ft_preset_layer_window(&p, 0) == 0, "window=0: full attention");
    FT_CHECK(ft_preset_set(&p, "window=-1", &err) == FT_EINVAL && strchr(err.msg, '\n') == NULL,
             "window=-1 accepted or a multi-line message: %s", err.msg);
}

/* A layout that asks for what no layer would get is refused once the sizes are set: sliding
 * layers without a window, or bits past the preset's D layers. Every preset passes. */
static void test_preset_check(void) {
    ft_err err = {0};
    for (int i = 0; i < ft_preset_count(); i++)
        FT_CHECK(ft_preset_check(ft_preset_at(i), &err) == FT_OK, "%s: %s", ft_preset_at(i)->name,
                 err.msg);
    ft_preset p = *ft_preset_find("qwen3-8b.dflash.train"); /* D = 5 */
    FT_CHECK(ft_preset_set(&p, "sliding=15", &err) == FT_OK &&
                 ft_preset_check(&p, &err) == FT_EINVAL && strstr(err.msg, "set window=W"),
             "sliding without a window: %s", err.msg);
    FT_CHECK(ft_preset_set(&p, "window=2048", &err) == FT_OK && ft_preset_check(&p, &err) == FT_OK,
             "sliding=15 window=2048: %s", err.msg);
    FT_CHECK(ft_preset_set(&p, "sliding=32", &err) == FT_OK &&
                 ft_preset_check(&p, &err) == FT_EINVAL && strstr(err.msg, "D=5"),
             "a bit past D: %s", err.msg);
    FT_CHECK(ft_preset_set(&p, "sliding=16", &err) == FT_OK && ft_preset_check(&p, &err) == FT_OK,
             "bit 4 of D=5: %s", err.msg);
}

int main(void) {
    FT_RUN(test_first_lookups_from_many_threads); /* first: the table must not be built yet */
    FT_RUN(test_ctx_sum);
    FT_RUN(test_layer_windows);
    FT_RUN(test_preset_check);
    return ft_test_finish();
}
