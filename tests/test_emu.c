/* test_emu.c: the SIMT emulator (FT_DEV_EMU) on the sample kernels of tests/cuda/: indices,
 * shuffles, votes, atomics, shared memory, tiled SGEMM, mma.sync and ldmatrix against CPU
 * products, the errors it must report instead of hanging, what it refuses to compile, its module
 * cache, and the planted-bug test (every planted bug caught, the correct kernel passing).
 *
 * Modules are cached in $FLARETUNE_CACHE_DIR (ctest points it at the build directory). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda/device_emu.h"
#include "cuda/emu/emu.h"
#include "cuda/device.h"
#include "ft_emu.h"
#include "ft_test.h"

#define SAMPLE(name) FT_SOURCE_DIR "/tests/cuda/" name

static ft_dev *dev;

/* ---- helpers --------------------------------------------------------------------------------- */

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint32_t rnd_u32(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}
static float rnd_float(void) { return (float)rnd_u32() / 4294967296.0f * 2.0f - 1.0f; }

static ft_dev_module *compile(const char *src, const char *const *defs, int n) {
    ft_dev_module *m = NULL;
    ft_err err = {0};
    ft_status s = ft_dev_compile(dev, src, defs, n, &m, &err);
    FT_CHECK(s == FT_OK, "compiling %s: %s: %s", src, ft_status_name(s), err.msg);
    return s == FT_OK ? m : NULL;
}

static void *dalloc(size_t bytes) {
    void *p = NULL;
    ft_err err = {0};
    ft_status s = ft_dev_alloc(dev, bytes, &p, &err);
    FT_CHECK(s == FT_OK, "alloc %zu: %s", bytes, err.msg);
    if (s != FT_OK) exit(2);
    return p;
}

static void h2d(void *d, const void *h, size_t n) {
    ft_err err = {0};
    FT_CHECK(ft_dev_copy(dev, d, h, n, FT_COPY_H2D, &err) == FT_OK, "%s", err.msg);
}

static void d2h(void *h, const void *d, size_t n) {
    ft_err err = {0};
    FT_CHECK(ft_dev_copy(dev, h, d, n, FT_COPY_D2H, &err) == FT_OK, "%s", err.msg);
}

static ft_dim3 dim3_of(unsigned x, unsigned y, unsigned z) { return (ft_dim3){x, y, z}; }

/* Launch and expect success. */
static int run(ft_dev_module *m, const char *k, ft_dim3 g, ft_dim3 b, size_t smem, void **args) {
    if (!m) return 0;
    ft_err err = {0};
    ft_status s = ft_dev_launch(dev, m, k, g, b, smem, args, &err);
    FT_CHECK(s == FT_OK, "launch %s: %s: %s", k, ft_status_name(s), err.msg);
    return s == FT_OK;
}

/* Launch and expect a failure whose message holds every one of the NULL-terminated needles. */
static void run_fails(ft_dev_module *m, const char *k, ft_dim3 g, ft_dim3 b, size_t smem,
                      void **args, ft_status want, const char *const *needles) {
    if (!m) return;
    ft_err err = {0};
    ft_status s = ft_dev_launch(dev, m, k, g, b, smem, args, &err);
    FT_CHECK(s == want, "launch %s: expected %s, got %s: %s", k, ft_status_name(want),
             ft_status_name(s), err.msg);
    for (int i = 0; needles[i]; i++)
        FT_CHECK(strstr(err.msg, needles[i]) != NULL, "launch %s: '%s' not in: %s", k, needles[i],
                 err.msg);
}

static void set_order(unsigned long long seed) {
    ft_err err = {0};
    FT_CHECK(ft_dev_emu_set_seed(dev, seed, &err) == FT_OK, "%s", err.msg);
}

static void set_workers(int n) {
    ft_err err = {0};
    FT_CHECK(ft_dev_emu_set_workers(dev, n, &err) == FT_OK, "%s", err.msg);
}

static void set_ucontext(int on) {
    ft_err err = {0};
    FT_CHECK(ft_dev_emu_set_ucontext(dev, on, &err) == FT_OK, "%s", err.msg);
}

/* bf16 bits nearest to x, ties to even, chosen by comparing distances in double (independent of
 * the emulator's bit trick). NaN gives 0x7fff. */
static uint16_t bf16_nearest(float x) {
    if (isnan(x)) return 0x7fff;
    uint32_t u;
    memcpy(&u, &x, 4);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    if ((u & 0xffffu) == 0) return lo;
    float flo, fhi;
    uint32_t a = (uint32_t)lo << 16, b = (uint32_t)hi << 16;
    memcpy(&flo, &a, 4);
    memcpy(&fhi, &b, 4);
    /* Past the largest finite bf16 the next value up is 2^128 (which rounds to infinity). */
    double vhi = isinf(fhi) ? copysign(ldexp(1.0, 128), x) : (double)fhi;
    double dl = fabs((double)x - (double)flo), dh = fabs(vhi - (double)x);
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1) ? hi : lo;
}

static float bf16_value(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* A random bf16 value exactly k / 16 for k in [-32, 32]: products and short sums stay exact. */
static uint16_t rnd_bf16_small(void) {
    int k = (int)(rnd_u32() % 65) - 32;
    return bf16_nearest((float)k / 16.0f);
}

/* ---- the device ------------------------------------------------------------------------------ */

static void test_open_and_props(void) {
    const ft_dev_props *p = ft_dev_props_of(dev);
    FT_CHECK(ft_dev_kind_of(dev) == FT_DEV_EMU, "kind");
    FT_CHECK(strstr(p->name, "emulat") != NULL, "name %s", p->name);
    FT_CHECK(strcmp(p->arch, "emu") == 0, "arch %s", p->arch);
    FT_CHECK(p->cc_major == 9 && p->cc_minor == 0, "cc %d.%d", p->cc_major, p->cc_minor);
    FT_CHECK(p->sm_count == 132 && p->warp_size == 32, "sms %d warp %d", p->sm_count, p->warp_size);
    FT_CHECK(p->smem_per_block_optin == 227 * 1024, "smem opt-in %zu", p->smem_per_block_optin);
    FT_CHECK(p->max_threads_per_block == 1024, "threads %d", p->max_threads_per_block);
    /* The H100 of the spec table, its memory the host's at most. */
    FT_CHECK(p->clock_khz == 1980000 && p->l2_bytes == (size_t)50 << 20 && p->mem_bytes > 0 &&
                 p->mem_bytes <= (size_t)80e9,
             "clock %d kHz, L2 %zu, memory %zu", p->clock_khz, p->l2_bytes, p->mem_bytes);
    ft_dev *g = NULL;
    ft_err err = {0};
    /* The GPU beside it: absent here is one clear line, never a crash. */
    ft_status s = ft_dev_open(FT_DEV_CUDA, 0, &g, &err);
    if (s == FT_OK) {
        FT_CHECK(ft_dev_kind_of(g) == FT_DEV_CUDA, "a GPU device");
        ft_dev_close(g);
    } else {
        FT_CHECK(s == FT_ENODEV && g == NULL, "CUDA open: %s", ft_status_name(s));
        FT_CHECK(strstr(err.msg, FT_HAVE_CUDA ? "GPU" : "without the CUDA toolkit") != NULL,
                 "CUDA open says: %s", err.msg);
    }
    s = ft_dev_open(FT_DEV_EMU, 1, &g, &err);
    FT_CHECK(s == FT_ENODEV && g == NULL, "emulator ordinal 1: %s", ft_status_name(s));
}

static void test_memory(void) {
    unsigned char *d = dalloc(1000), h[1000];
    d2h(h, d, sizeof h);
    int poisoned = 1;
    for (int i = 0; i < 1000; i++)
        poisoned &= h[i] == 0xFF;
    FT_CHECK(poisoned, "a fresh allocation is filled with 0xFF");
    float f;
    memcpy(&f, h, 4);
    FT_CHECK(isnan(f), "and reads as NaN");
    ft_err err = {0};
    FT_CHECK(ft_dev_memset(dev, d, 0, 1000, &err) == FT_OK, "%s", err.msg);
    for (int i = 0; i < 1000; i++)
        h[i] = (unsigned char)i;
    h2d(d + 10, h, 500);
    unsigned char back[1000];
    d2h(back, d, sizeof back);
    FT_CHECK(back[0] == 0 && back[9] == 0 && back[10] == 0 && back[11] == 1 && back[509] == 243 &&
                 back[510] == 0,
             "copy round trip");
    FT_CHECK(ft_dev_sync(dev, &err) == FT_OK, "sync");
    ft_dev_free(dev, d);
}

/* ---- threads, shuffles, votes, atomics ------------------------------------------------------- */

static ft_dev_module *basic(void) { return compile(SAMPLE("emu_basic.cu"), NULL, 0); }

static void test_indices(void) {
    ft_dev_module *m = basic();
    ft_dim3 g = dim3_of(3, 2, 2), b = dim3_of(5, 3, 2);
    unsigned nb = 12, nt = 30, *d = dalloc(nb * nt * 4), *h = ft_test_alloc(nb * nt * 4);
    void *args[] = {&d};
    if (!run(m, "indices", g, b, 0, args)) return;
    d2h(h, d, nb * nt * 4);
    int bad = 0;
    for (unsigned bz = 0; bz < 2; bz++)
        for (unsigned by = 0; by < 2; by++)
            for (unsigned bx = 0; bx < 3; bx++)
                for (unsigned tz = 0; tz < 2; tz++)
                    for (unsigned ty = 0; ty < 3; ty++)
                        for (unsigned tx = 0; tx < 5; tx++) {
                            unsigned bl = bx + 3 * (by + 2 * bz), tl = tx + 5 * (ty + 3 * tz);
                            unsigned want = bx | by << 4 | bz << 8 | tx << 12 | ty << 18 | tz << 24;
                            bad += h[bl * nt + tl] != want;
                        }
    FT_CHECK(bad == 0, "%d threads saw the wrong indices", bad);
    free(h);
    ft_dev_free(dev, d);
}

static void test_warp_sums(void) {
    ft_dev_module *m = basic();
    unsigned n = 4 * 128, nw = n / 32;
    float *x = ft_test_alloc(n * 4), *y = ft_test_alloc(nw * 12);
    for (unsigned i = 0; i < n; i++)
        x[i] = rnd_float();
    float *dx = dalloc(n * 4), *dy = dalloc(nw * 12);
    h2d(dx, x, n * 4);
    void *args[] = {&dy, &dx};
    if (!run(m, "warp_sums", dim3_of(4, 1, 1), dim3_of(128, 1, 1), 0, args)) return;
    d2h(y, dy, nw * 12);
    for (unsigned w = 0; w < nw; w++) {
        double s = 0;
        float mx = -INFINITY;
        for (unsigned l = 0; l < 32; l++)
            s += x[32 * w + l], mx = fmaxf(mx, x[32 * w + l]);
        FT_CHECK_NEAR(y[3 * w], s, 1e-5);
        FT_CHECK_NEAR(y[3 * w + 1], s, 1e-5);
        FT_CHECK(y[3 * w + 2] == mx, "warp %u max %g, expected %g", w, y[3 * w + 2], mx);
    }
    free(x), free(y);
    ft_dev_free(dev, dx), ft_dev_free(dev, dy);
}

static void test_shuffles(void) {
    ft_dev_module *m = basic();
    int *d = dalloc(32 * 8 * 4), h[32 * 8];
    void *args[] = {&d};
    if (!run(m, "shuffles", dim3_of(1, 1, 1), dim3_of(32, 1, 1), 0, args)) return;
    d2h(h, d, sizeof h);
    int bad = 0;
    for (int l = 0; l < 32; l++) {
        int v = 100 + l, *o = h + 8 * l;
        int want[8];
        want[0] = 103;
        want[1] = 100 + (l / 8) * 8 + (l + 1) % 8; /* srcLane % width */
        want[2] = l % 16 >= 2 ? v - 2 : v;         /* within the segment */
        want[3] = l % 16 + 3 < 16 ? v + 3 : v;
        want[4] = 100 + (l ^ 5);
        want[5] = (l ^ 9) / 8 > l / 8 ? v : 100 + (l ^ 9); /* no later segment */
        want[6] = l >= 1 ? v - 1 : v;
        want[7] = l < 31 ? (v + 1) + (l + 1) : v + l;
        for (int k = 0; k < 8; k++)
            if (o[k] != want[k]) {
                if (bad++ < 5)
                    fprintf(stderr, "lane %d shuffle %d: %d, expected %d\n", l, k, o[k], want[k]);
            }
    }
    FT_CHECK(bad == 0, "%d wrong shuffle results", bad);
    ft_dev_free(dev, d);
}

static void test_votes(void) {
    ft_dev_module *m = basic();
    unsigned *d = dalloc(32 * 8 * 4), h[32 * 8];
    void *args[] = {&d};
    for (int pass = 0; pass < 2; pass++) {
        set_order(pass ? 7 : 0);
        if (!run(m, "votes", dim3_of(1, 1, 1), dim3_of(32, 1, 1), 0, args)) break;
        d2h(h, d, sizeof h);
        int bad = 0;
        unsigned ballot3 = 0;
        for (int l = 0; l < 32; l += 3)
            ballot3 |= 1u << l;
        for (unsigned l = 0; l < 32; l++) {
            unsigned *o = h + 8 * l, want[8];
            want[0] = ballot3;
            if (l % 2 == 0)
                want[1] = 0x155, want[2] = 1, want[3] = 1;
            else if (l < 16)
                want[1] = 0xaa80, want[2] = 0, want[3] = 0;
            else
                want[1] = want[2] = want[3] = 0xdeadbeefu;
            want[4] = 496;
            want[5] = 0xfu << (4 * (l / 4));
            want[6] = 0xffffffffu;
            want[7] = 16;
            for (int k = 0; k < 8; k++)
                if (o[k] != want[k] && bad++ < 5)
                    fprintf(stderr, "lane %u vote %d: %#x, expected %#x\n", l, k, o[k], want[k]);
        }
        FT_CHECK(bad == 0, "%d wrong votes (seed %d)", bad, pass ? 7 : 0);
    }
    set_order(0);
    ft_dev_free(dev, d);
}

static void check_atomics(ft_dev_module *m, unsigned blocks, const char *how) {
    unsigned bt = 64, n = blocks * bt;
    int gi0[8] = {0, 0, 0, 1000, 0, -1, 0, 0}, gi[8];
    float gf0 = 0, gf;
    unsigned gu0[2] = {0, 0}, gu[2];
    unsigned long long gull0 = 0, gull;
    int *dgi = dalloc(sizeof gi), *dsh = dalloc(blocks * 12);
    float *dgf = dalloc(4);
    unsigned *dgu = dalloc(8);
    unsigned long long *dgull = dalloc(8);
    h2d(dgi, gi0, sizeof gi0), h2d(dgf, &gf0, 4), h2d(dgu, gu0, 8), h2d(dgull, &gull0, 8);
    void *args[] = {&dgi, &dgf, &dgu, &dsh, &dgull};
    if (run(m, "atomics", dim3_of(blocks, 1, 1), dim3_of(bt, 1, 1), 0, args)) {
        int *sh = ft_test_alloc(blocks * 12);
        d2h(gi, dgi, sizeof gi), d2h(&gf, dgf, 4), d2h(gu, dgu, 8), d2h(&gull, dgull, 8);
        d2h(sh, dsh, blocks * 12);
        int x = 0;
        for (unsigned t = 0; t < n; t++)
            x ^= (int)t;
        FT_CHECK(gi[0] == (int)n && gi[1] == 3 * (int)n && gi[2] == 7 &&
                     gi[3] == 1000 - 2 * (int)n && gi[4] == -(int)(n - 1),
                 "%s: add %d cas %d exch %d sub %d min %d", how, gi[0], gi[1], gi[2], gi[3], gi[4]);
        FT_CHECK((unsigned)gi[5] == 0x80000000u && gi[6] == 0x7fffffff && gi[7] == x,
                 "%s: and %#x or %#x xor %d (expected %d)", how, (unsigned)gi[5], gi[6], gi[7], x);
        FT_CHECK(gf == 0.5f * (float)n, "%s: float add %g", how, gf);
        FT_CHECK(gu[0] == n - 1 && gu[1] == n % 10, "%s: max %u inc %u", how, gu[0], gu[1]);
        FT_CHECK(gull == (unsigned long long)n << 33, "%s: u64 add %llu", how, gull);
        int bad = 0;
        for (unsigned b = 0; b < blocks; b++)
            bad += sh[3 * b] != 2 * (int)bt || sh[3 * b + 1] != (int)bt ||
                   sh[3 * b + 2] != (int)bt - 1;
        FT_CHECK(bad == 0, "%s: %d blocks with wrong shared-memory atomics", how, bad);
        free(sh);
    }
    ft_dev_free(dev, dgi), ft_dev_free(dev, dsh), ft_dev_free(dev, dgf);
    ft_dev_free(dev, dgu), ft_dev_free(dev, dgull);
}

static void test_atomics(void) {
    ft_dev_module *m = basic();
    check_atomics(m, 6, "in order");
    set_order(12345);
    check_atomics(m, 6, "shuffled");
    set_order(0);
    set_workers(2);
    check_atomics(m, 40, "2 OS threads");
    set_workers(1);
}

static void test_spinlock(void) {
    ft_dev_module *m = basic();
    int *d = dalloc(3 * 4), h[3];
    void *args[] = {&d};
    for (int pass = 0; pass < 2; pass++) {
        set_order(pass ? 99 : 0);
        if (!run(m, "spinlock", dim3_of(3, 1, 1), dim3_of(96, 1, 1), 0, args)) break;
        d2h(h, d, sizeof h);
        FT_CHECK(h[0] == 96 && h[1] == 96 && h[2] == 96, "lock-protected counts %d %d %d", h[0],
                 h[1], h[2]);
    }
    set_order(0);
    ft_dev_free(dev, d);
}

static void test_dynamic_smem(void) {
    ft_dev_module *m = basic();
    unsigned bt = 96, nb = 5, n = bt * nb;
    float *x = ft_test_alloc(n * 4), *y = ft_test_alloc(n * 4);
    for (unsigned i = 0; i < n; i++)
        x[i] = (float)i;
    float *dx = dalloc(n * 4), *dy = dalloc(n * 4);
    h2d(dx, x, n * 4);
    void *args[] = {&dy, &dx};
    if (run(m, "reverse_dyn", dim3_of(nb, 1, 1), dim3_of(bt, 1, 1), bt * 4, args)) {
        d2h(y, dy, n * 4);
        int bad = 0;
        for (unsigned b = 0; b < nb; b++)
            for (unsigned t = 0; t < bt; t++)
                bad += y[b * bt + t] != x[b * bt + bt - 1 - t];
        FT_CHECK(bad == 0, "%d reversed elements wrong", bad);
    }
    free(x), free(y);
    ft_dev_free(dev, dx), ft_dev_free(dev, dy);
}

static void test_block_sum(void) {
    ft_dev_module *m = basic();
    int n = 1000;
    float *x = ft_test_alloc((size_t)n * 4), y[5];
    for (int i = 0; i < n; i++)
        x[i] = rnd_float();
    float *dx = dalloc((size_t)n * 4), *dy = dalloc(sizeof y);
    h2d(dx, x, (size_t)n * 4);
    void *args[] = {&dy, &dx, &n};
    if (run(m, "block_sum", dim3_of(4, 1, 1), dim3_of(256, 1, 1), 0, args)) {
        d2h(y, dy, 16);
        for (int b = 0; b < 4; b++) {
            double s = 0;
            for (int i = 256 * b; i < 256 * b + 256 && i < n; i++)
                s += x[i];
            FT_CHECK_NEAR(y[b], s, 1e-5);
        }
    }
    /* Blocks of 200 threads: the last warp has 8 lanes, and the full-mask shuffles of
     * ft_warp_sum read lanes that do not exist; hardware leaves those values undefined, the
     * emulator makes them NaN. */
    if (run(m, "block_sum", dim3_of(5, 1, 1), dim3_of(200, 1, 1), 0, args)) {
        d2h(y, dy, 20);
        FT_CHECK(isnan(y[0]), "a partial warp's full-mask shuffle reads NaN, not %g", y[0]);
    }
    free(x);
    ft_dev_free(dev, dx), ft_dev_free(dev, dy);
}

static void test_poison(void) {
    ft_dev_module *m = basic();
    float *dy = dalloc(64 * 4), *dacc = dalloc(64 * 4), y[64], acc[64];
    void *args[] = {&dy, &dacc};
    if (!run(m, "read_before_write", dim3_of(1, 1, 1), dim3_of(64, 1, 1), 0, args)) return;
    d2h(y, dy, sizeof y), d2h(acc, dacc, sizeof acc);
    int lower = 0, upper = 0, accn = 0;
    for (int i = 0; i < 64; i++) {
        if (i < 32)
            lower += y[i] == 1.0f;
        else
            upper += isnan(y[i]) != 0;
        accn += isnan(acc[i]) != 0;
    }
    FT_CHECK(lower == 32, "written shared memory reads back (%d of 32)", lower);
    FT_CHECK(upper == 32, "shared memory read before written is NaN (%d of 32)", upper);
    FT_CHECK(accn == 64, "a fresh device buffer accumulated into is NaN (%d of 64)", accn);
    ft_dev_free(dev, dy), ft_dev_free(dev, dacc);
}

static void test_bf16(void) {
    ft_dev_module *m = basic();
    unsigned n = 8 * 64;
    float *x = ft_test_alloc(n * 4), *y = ft_test_alloc(n * 4);
    for (unsigned i = 0; i < n; i++)
        x[i] = rnd_float() * 1000.0f;
    /* ties (to even, both ways), NaN, infinities, the largest finite, tiny and negative zero */
    uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x7fc00001u, 0x7f800000u, 0xff800000u,
                          0x7f7fffffu, 0x00000001u, 0x80000000u, 0x3f80ffffu, 0xbf807fffu};
    for (unsigned i = 0; i < sizeof special / 4; i++)
        memcpy(&x[i], &special[i], 4);
    float *dx = dalloc(n * 4), *dy = dalloc(n * 4);
    void *dh = dalloc(n * 2);
    h2d(dx, x, n * 4);
    void *args[] = {&dy, &dh, &dx};
    if (run(m, "bf16_roundtrip", dim3_of(2, 1, 1), dim3_of(32, 1, 1), 0, args)) {
        d2h(y, dy, n * 4);
        int bad = 0;
        for (unsigned i = 0; i < n; i++) {
            float want = bf16_value(bf16_nearest(x[i]));
            int same = (isnan(want) && isnan(y[i])) || memcmp(&want, &y[i], 4) == 0;
            if (!same && bad++ < 5)
                fprintf(stderr, "bf16(%a) = %a, expected %a\n", x[i], y[i], want);
        }
        FT_CHECK(bad == 0, "%d bf16 conversions differ from round-to-nearest-even", bad);
    }
    free(x), free(y);
    ft_dev_free(dev, dx), ft_dev_free(dev, dy), ft_dev_free(dev, dh);
}

/* ---- GEMMs ----------------------------------------------------------------------------------- */

/* Runs kernel k(C, A, B, M, N, K) of m: A (M x K) and B (K x N, or N x K) of elem bytes an
 * element go in, C (M x N floats) comes back. 0 when the launch failed. */
static int run_gemm(ft_dev_module *m, const char *k, ft_dim3 g, ft_dim3 b, const void *A,
                    const void *B, size_t elem, int M, int N, int K, float *C) {
    void *dA = dalloc((size_t)M * K * elem), *dB = dalloc((size_t)K * N * elem);
    float *dC = dalloc((size_t)M * N * 4);
    h2d(dA, A, (size_t)M * K * elem), h2d(dB, B, (size_t)K * N * elem);
    void *args[] = {&dC, &dA, &dB, &M, &N, &K};
    int ok = run(m, k, g, b, 0, args);
    if (ok) d2h(C, dC, (size_t)M * N * 4);
    ft_dev_free(dev, dA), ft_dev_free(dev, dB), ft_dev_free(dev, dC);
    return ok;
}

static void test_sgemm_tiled(void) {
    ft_dev_module *m = compile(SAMPLE("emu_matmul.cu"), NULL, 0);
    int M = 70, N = 45, K = 53;
    float *A = ft_test_alloc((size_t)M * K * 4), *B = ft_test_alloc((size_t)K * N * 4);
    float *C = ft_test_alloc((size_t)M * N * 4);
    double *got = ft_test_alloc((size_t)M * N * 8), *want = ft_test_alloc((size_t)M * N * 8);
    for (int i = 0; i < M * K; i++)
        A[i] = rnd_float();
    for (int i = 0; i < K * N; i++)
        B[i] = rnd_float();
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += (double)A[i * K + k] * B[k * N + j];
            want[i * N + j] = s;
        }
    if (run_gemm(m, "sgemm_tiled", dim3_of(3, 5, 1), dim3_of(16, 16, 1), A, B, 4, M, N, K, C)) {
        for (int i = 0; i < M * N; i++)
            got[i] = C[i];
        double e = ft_test_rel_err(got, want, (int64_t)M * N);
        FT_CHECK(e < 1e-6, "tiled SGEMM relative error %g", e);
    }
    ft_kernel_info info;
    ft_err err = {0};
    if (m && ft_dev_kernel_info(m, "sgemm_tiled", &info, &err) == FT_OK)
        FT_CHECK(info.smem_static == 2 * 16 * 17 * 4 && info.regs == 0 && info.max_threads == 1024,
                 "kernel info: smem %zu regs %d max threads %d", info.smem_static, info.regs,
                 info.max_threads);
    else
        FT_CHECK(0, "kernel info: %s", err.msg);
    free(A), free(B), free(C), free(got), free(want);
}

static void test_mma_tile(void) {
    ft_dev_module *m = compile(SAMPLE("emu_mma.cu"), NULL, 0);
    uint16_t A[256], Bt[128];
    float C[128], D[128];
    for (int i = 0; i < 256; i++)
        A[i] = rnd_bf16_small();
    for (int i = 0; i < 128; i++)
        Bt[i] = rnd_bf16_small(), C[i] = rnd_float();
    float *dD = dalloc(sizeof D), *dC = dalloc(sizeof C);
    uint16_t *dA = dalloc(sizeof A), *dB = dalloc(sizeof Bt);
    h2d(dA, A, sizeof A), h2d(dB, Bt, sizeof Bt), h2d(dC, C, sizeof C);
    void *args[] = {&dD, &dA, &dB, &dC};
    if (run(m, "mma_tile", dim3_of(1, 1, 1), dim3_of(32, 1, 1), 0, args)) {
        d2h(D, dD, sizeof D);
        int bad = 0;
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 8; j++) {
                double s = C[i * 8 + j];
                for (int k = 0; k < 16; k++)
                    s += (double)bf16_value(A[i * 16 + k]) * bf16_value(Bt[j * 16 + k]);
                if (fabs(D[i * 8 + j] - s) > 1e-5 * fmax(1.0, fabs(s)) && bad++ < 5)
                    fprintf(stderr, "D[%d][%d] = %g, expected %g\n", i, j, D[i * 8 + j], s);
            }
        FT_CHECK(bad == 0, "%d elements of the 16x8x16 mma tile wrong", bad);
    }
    ft_dev_free(dev, dD), ft_dev_free(dev, dC), ft_dev_free(dev, dA), ft_dev_free(dev, dB);
}

static void check_mma_gemm(int b_nk) {
    const char *def = b_nk ? "B_NK=1" : "B_NK=0";
    ft_dev_module *m = compile(SAMPLE("emu_mma.cu"), &def, 1);
    int M = 128, N = 64, K = 96;
    uint16_t *A = ft_test_alloc((size_t)M * K * 2), *B = ft_test_alloc((size_t)K * N * 2);
    float *C = ft_test_alloc((size_t)M * N * 4);
    for (int i = 0; i < M * K; i++)
        A[i] = bf16_nearest(rnd_float());
    for (int i = 0; i < K * N; i++)
        B[i] = bf16_nearest(rnd_float()); /* [N][K] or [K][N] */
    if (run_gemm(m, "mma_gemm", dim3_of(1, 2, 1), dim3_of(128, 1, 1), A, B, 2, M, N, K, C)) {
        int bad = 0;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int k = 0; k < K; k++)
                    s += (double)bf16_value(A[i * K + k]) *
                         bf16_value(b_nk ? B[j * K + k] : B[k * N + j]);
                if (fabs(C[i * N + j] - s) > 1e-4 * fmax(1.0, fabs(s)) && bad++ < 5)
                    fprintf(stderr, "C[%d][%d] = %g, expected %g\n", i, j, C[i * N + j], s);
            }
        FT_CHECK(bad == 0, "%d elements of the mma GEMM (%s) wrong", bad, def);
    }
    free(A), free(B), free(C);
}

static void test_mma_gemm(void) {
    check_mma_gemm(1);
    check_mma_gemm(0);
}

static void test_ldmatrix(void) {
    ft_dev_module *m = compile(SAMPLE("emu_mma.cu"), NULL, 0);
    uint16_t src[32 * 8];
    for (int i = 0; i < 32 * 8; i++)
        src[i] = (uint16_t)(1000 + i); /* matrix i/64, row, col */
    uint16_t *dsrc = dalloc(sizeof src);
    uint32_t *dout = dalloc(32 * 4 * 4), out[32 * 4];
    h2d(dsrc, src, sizeof src);
    int nums[3] = {1, 2, 4};
    for (int v = 0; v < 6; v++) {
        int num = nums[v % 3], trans = v / 3;
        void *args[] = {&dout, &dsrc, &num, &trans};
        if (!run(m, "ldmatrix_probe", dim3_of(1, 1, 1), dim3_of(32, 1, 1), 0, args)) continue;
        d2h(out, dout, sizeof out);
        int bad = 0;
        for (int l = 0; l < 32; l++)
            for (int i = 0; i < 4; i++) {
                uint32_t want = 0;
                if (i < num) {
                    /* lane l: row l/4, columns 2(l%4), +1 of matrix i (.trans: those rows,
                     * column l/4) */
                    int r0 = trans ? 2 * (l % 4) : l / 4, c0 = trans ? l / 4 : 2 * (l % 4);
                    int r1 = trans ? r0 + 1 : r0, c1 = trans ? c0 : c0 + 1;
                    want = (uint32_t)(1000 + i * 64 + r0 * 8 + c0) |
                           (uint32_t)(1000 + i * 64 + r1 * 8 + c1) << 16;
                }
                if (out[l * 4 + i] != want && bad++ < 4)
                    fprintf(stderr, "ldmatrix x%d%s lane %d reg %d: %#x, expected %#x\n", num,
                            trans ? ".trans" : "", l, i, out[l * 4 + i], want);
            }
        FT_CHECK(bad == 0, "ldmatrix x%d%s: %d registers wrong", num, trans ? ".trans" : "", bad);
    }
    ft_dev_free(dev, dsrc), ft_dev_free(dev, dout);
}

/* ---- what must fail, and how ----------------------------------------------------------------- */

static void run_errors(const char *how) {
    ft_dev_module *m = compile(SAMPLE("emu_errors.cu"), NULL, 0);
    ft_dev_module *b = basic();
    if (!m || !b) return;
    float *y = dalloc(1024 * 4), *x = dalloc(1024 * 4);
    uint16_t *g = dalloc(1024);
    void *a1[] = {&y};
    int n = 64;
    void *a2[] = {&y, &n};
    void *a3[] = {&y, &g};
    void *a4[] = {&y, &x};
    ft_dim3 one = dim3_of(1, 1, 1), w32 = dim3_of(32, 1, 1), w64 = dim3_of(64, 1, 1);
    fprintf(stderr, "  (%s)\n", how);
    run_fails(m, "divergent_barrier", one, w32, 0, a1, FT_EINTERNAL,
              (const char *[]){"kernel 'divergent_barrier' block (0,0,0)", "divergent barrier",
                               "__syncthreads (emu_errors.cu:", NULL});
    run_fails(m, "exit_before_barrier", one, w64, 0, a1, FT_EINTERNAL,
              (const char *[]){"thread (5,0,0) exited", "__syncthreads (emu_errors.cu:", NULL});
    run_fails(m, "missing_lane", dim3_of(2, 1, 1), w64, 0, a1, FT_EINTERNAL,
              (const char *[]){"block (0,0,0)", "__shfl_down_sync (emu_errors.cu:",
                               "lane 31, thread (31,0,0), exited", NULL});
    run_fails(m, "missing_lane_at_barrier", one, w64, 0, a1, FT_EINTERNAL,
              (const char *[]){"__shfl_xor_sync", "lane 31", "waits at __syncthreads", NULL});
    run_fails(m, "mask_without_self", one, w32, 0, a1, FT_EINTERNAL,
              (const char *[]){"thread (20,0,0)", "does not name its own lane 20", NULL});
    run_fails(
        m, "trap_one", dim3_of(4, 1, 1), w32, 0, a1, FT_EINTERNAL,
        (const char *[]){"kernel 'trap_one' block (2,0,0): thread (7,0,0): __trap() called", NULL});
    run_fails(m, "dyn_overflow", one, w64, 64 * 4, a2, FT_EINTERNAL,
              (const char *[]){"past the end of its 256 bytes of dynamic shared memory", NULL});
    run_fails(m, "mma_partial_warp", one, dim3_of(48, 1, 1), 0, a1, FT_EINTERNAL,
              (const char *[]){"needs all 32 lanes", "16 threads", NULL});
    run_fails(m, "ldmatrix_global", one, w32, 0, a3, FT_EINTERNAL,
              (const char *[]){"not in this block's shared memory", NULL});
    run_fails(m, "misaligned_float4", one, w32, 0, a4, FT_EINTERNAL,
              (const char *[]){"a float4 load", "not 16-byte aligned", NULL});
    /* The device is still fine afterwards (the failed blocks' fibers are reused). */
    int sn = 1000;
    void *args[] = {&y, &x, &sn};
    float h[4];
    float *ones = ft_test_alloc(1024 * 4);
    for (int i = 0; i < 1024; i++)
        ones[i] = 1.0f;
    h2d(x, ones, 1024 * 4);
    if (run(b, "block_sum", dim3_of(4, 1, 1), dim3_of(256, 1, 1), 0, args)) {
        d2h(h, y, sizeof h);
        FT_CHECK(h[0] == 256 && h[3] == 1000 - 768, "after the errors: %g %g", h[0], h[3]);
    }
    free(ones);
    ft_dev_free(dev, y), ft_dev_free(dev, x), ft_dev_free(dev, g);
}

static void test_errors(void) {
    run_errors("threads in order");
    set_order(4242);
    run_errors("threads shuffled");
    set_order(0);
}

static void test_compile_errors(void) {
    struct {
        const char *def, *needle;
    } cases[] = {
        {"USE=1", "inline PTX (asm) is not emulated under FT_EMU"},
        {"USE=2", "thread block clusters (__cluster_dims__) are not emulated"},
        {"USE=3", "cooperative groups"},
        {"USE=4", "cuda::barrier"},
        {"USE=5", "WMMA"},
        {"USE=6", "undeclared_variable"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ft_dev_module *m = NULL;
        ft_err err = {0};
        ft_status s = ft_dev_compile(dev, SAMPLE("emu_unsupported.cu"), &cases[i].def, 1, &m, &err);
        FT_CHECK(s == FT_EINVAL && m == NULL, "%s: %s", cases[i].def, ft_status_name(s));
        FT_CHECK(strstr(err.msg, cases[i].needle) && strstr(err.msg, "emu_unsupported.cu") &&
                     strstr(err.msg, cases[i].def) && strstr(err.msg, "error"),
                 "%s: message: %s", cases[i].def, err.msg);
        if (i == 5) fprintf(stderr, "  e.g. %s\n", err.msg);
    }
    ft_dev_module *m = NULL;
    ft_err err = {0};
    const char *bad = "1X=2";
    FT_CHECK(ft_dev_compile(dev, SAMPLE("emu_basic.cu"), &bad, 1, &m, &err) == FT_EINVAL &&
                 strstr(err.msg, "1X=2"),
             "a malformed define: %s", err.msg);
    FT_CHECK(ft_dev_compile(dev, "no_such_kernel.cu", NULL, 0, &m, &err) == FT_EIO &&
                 strstr(err.msg, "no_such_kernel.cu"),
             "a missing source: %s", err.msg);
}

static void test_launch_errors(void) {
    ft_dev_module *m = basic();
    float *y = dalloc(4096);
    void *args[] = {&y};
    run_fails(m, "no_such_kernel", dim3_of(1, 1, 1), dim3_of(32, 1, 1), 0, args, FT_EINVAL,
              (const char *[]){"'no_such_kernel' is not in emu_basic.cu", "warp_sums", NULL});
    run_fails(m, "indices", dim3_of(1, 1, 1), dim3_of(1025, 1, 1), 0, args, FT_EINVAL,
              (const char *[]){"block (1025,1,1)", NULL});
    run_fails(m, "indices", dim3_of(1, 1, 1), dim3_of(32, 32, 2), 0, args, FT_EINVAL,
              (const char *[]){"1024 threads", NULL});
    run_fails(m, "indices", dim3_of(0, 1, 1), dim3_of(32, 1, 1), 0, args, FT_EINVAL,
              (const char *[]){"empty grid", NULL});
    run_fails(m, "reverse_dyn", dim3_of(1, 1, 1), dim3_of(32, 1, 1), 300 * 1024, args, FT_EINVAL,
              (const char *[]){"shared memory", NULL});
    ft_dev_free(dev, y);
}

/* Launches kernel (y, x, arg) in a child process, its stderr into out; the child's status. */
/* Runs body(ctx) in a child process and returns its wait status, with what it wrote to stderr in
 * out (NUL-terminated). */
static int in_child(void (*body)(void *), void *ctx, char *out, size_t cap) {
    int fds[2];
    FT_CHECK(pipe(fds) == 0, "pipe");
    fflush(stderr);
    pid_t kid = fork();
    if (kid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        body(ctx);
        _exit(0);
    }
    close(fds[1]);
    size_t got = 0;
    for (ssize_t r; (r = read(fds[0], out + got, cap - 1 - got)) > 0;)
        got += (size_t)r;
    out[got] = '\0';
    close(fds[0]);
    int st = 0;
    waitpid(kid, &st, 0);
    return st;
}

typedef struct {
    ft_dev_module *m;
    const char *kernel;
    float *y, *x;
    void *arg;
} one_launch;

static void launch_one(void *ctx) {
    one_launch *o = ctx;
    void *args[] = {&o->y, &o->x, o->arg};
    ft_err err = {0};
    ft_dev_launch(dev, o->m, o->kernel, dim3_of(1, 1, 1), dim3_of(32, 1, 1), 0, args, &err);
}

/* kernel(y, x, *arg) in one block of 32 threads, in a child process (a fault ends it). */
static int launch_in_child(ft_dev_module *m, const char *kernel, float *y, float *x, void *arg,
                           char *out, size_t cap) {
    one_launch o = {m, kernel, y, x, arg};
    return in_child(launch_one, &o, out, cap);
}

/* A read past the end of a device buffer, in a child process, which it ends. In sanitizer builds
 * the kernels are instrumented too, and it is AddressSanitizer's report naming the kernel;
 * otherwise the buffer ends against pages nothing may touch (emu_guard.c), and it is one line
 * naming the kernel and how far past (or before) which buffer it reached, exit 1: just past the
 * end, 200 KB, 40 MiB and 256 MiB past it, and 8000 bytes and 8 GiB (a 32-bit index of floats
 * gone negative) before the start; and a write further out than any fence, still named as the
 * kernel's fault. */
static void test_read_past_end(void) {
    ft_dev_module *m = compile(SAMPLE("emu_errors.cu"), NULL, 0);
    if (!m) return;
    int n = 64; /* 256 bytes: the buffer ends where the guard starts */
    float *x = dalloc((size_t)n * 4), *y = dalloc((size_t)n * 4);
    char out[16384];
    int st = launch_in_child(m, "read_past_end", y, x, &n, out, sizeof out);
#if defined(FT_TEST_ASAN)
    FT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) != 0, "the child ended with status %d", st);
    FT_CHECK(strstr(out, "heap-buffer-overflow") && strstr(out, "read_past_end"),
             "AddressSanitizer's report names the kernel:\n%.2000s", out);
#else
    FT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1, "the child exited 1, not with status %d", st);
    FT_CHECK(strstr(out, "flaretune: kernel 'read_past_end' on the emulator reached ") &&
                 strstr(out, ", 0 bytes past the end of a 256-byte device buffer") &&
                 strchr(out, '\n') == out + strlen(out) - 1,
             "one line naming the kernel, the buffer and how far past it:\n%.2000s", out);
    const struct {
        long long off;
        const char *says;
    } far[] = {{64 + 50000, ", 200000 bytes past the end of a 256-byte device buffer"},
               {64 + (10 << 20), ", 41943040 bytes past the end of a 256-byte device buffer"},
               {-2000, ", 8000 bytes before a 256-byte device buffer"},
               /* past the narrow fences: 256 MiB past, and a 32-bit index gone negative */
               {64 + (64LL << 20), ", 268435456 bytes past the end of a 256-byte device buffer"},
               {-(1LL << 31), ", 8589934592 bytes before a 256-byte device buffer"}};
    /* (the wide fences, past the narrow ones, only without a limit on the address space) */
    struct rlimit as;
    const int wide = getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur == RLIM_INFINITY;
    for (size_t i = 0; i < sizeof far / sizeof far[0] - (wide ? 0 : 2); i++) {
        long long off = far[i].off;
        st = launch_in_child(m, "read_at", y, x, &off, out, sizeof out);
        FT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 &&
                     strstr(out, "flaretune: kernel 'read_at' on the emulator reached ") &&
                     strstr(out, far[i].says),
                 "x[%lld]: status %d:\n%.2000s", off, st, out);
    }
    /* Further out than any fence (a terabyte before the buffer): the kernel's fault still. */
    long long off = -(1LL << 38);
    st = launch_in_child(m, "write_at", y, x, &off, out, sizeof out);
    FT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 &&
                 strstr(out, "flaretune: kernel 'write_at' on the emulator faulted at 0x") &&
                 strstr(out, "in no device buffer nor the fence around one") &&
                 strchr(out, '\n') == out + strlen(out) - 1,
             "y[-2^38]: status %d:\n%.2000s", st, out);
#endif
    ft_dev_free(dev, x), ft_dev_free(dev, y);
}

/* A kernel whose local array (256 KiB) is larger than an emulated thread's stack, in a child
 * process, which it ends: one line naming the kernel and the stack, exit 1, with either fiber
 * switch (its frame is probed page by page, so it faults on the guard page under its stack, and
 * the handler runs on the worker's alternate stack). Sanitizer builds leave faults to
 * AddressSanitizer, whose stacks are larger and whose frames may live on the heap. */
static void test_stack_overflow(void) {
#if !defined(FT_TEST_ASAN)
    ft_dev_module *m = compile(SAMPLE("emu_errors.cu"), NULL, 0);
    if (!m) return;
    float *x = dalloc(32 * 4), *y = dalloc(32 * 4);
    char out[16384];
    for (int uc = 0; uc < 2; uc++) {
        ft_err err = {0};
        FT_CHECK(ft_dev_emu_set_ucontext(dev, uc, &err) == FT_OK, "%s", err.msg);
        int n = 1 << 16;
        int st = launch_in_child(m, "deep_stack", y, x, &n, out, sizeof out);
        FT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1,
                 "ucontext %d: the child exited 1, not with status %d:\n%.2000s", uc, st, out);
        FT_CHECK(strstr(out, "flaretune: kernel 'deep_stack' on the emulator overflowed a "
                             "thread's stack (120 KiB here") &&
                     strchr(out, '\n') == out + strlen(out) - 1,
                 "ucontext %d: one line naming the kernel and the stack:\n%.2000s", uc, out);
    }
    ft_err err = {0};
    ft_dev_emu_set_ucontext(dev, 0, &err);
    ft_dev_free(dev, x), ft_dev_free(dev, y);
#endif
}

typedef struct {
    volatile int *flags;
    ft_dev_module *m, *m2;
    ft_dev *d2;
    float *y, *x;
} two_devices;

static void *launch_set_go(void *arg) {
    two_devices *o = arg;
    while (!o->flags[0]) /* the faulting kernel is running */
        usleep(1000);
    void *args[] = {&o->flags};
    ft_err err = {0};
    ft_dev_launch(o->d2, o->m2, "set_go", dim3_of(1, 1, 1), dim3_of(1, 1, 1), 0, args, &err);
    return NULL;
}

static void fault_beside_another(void *ctx) {
    two_devices *o = ctx;
    ft_err err = {0};
    if (ft_dev_open(FT_DEV_EMU, 0, &o->d2, &err) ||
        ft_dev_compile(o->d2, SAMPLE("emu_errors.cu"), NULL, 0, &o->m2, &err)) {
        fprintf(stderr, "second device: %s\n", err.msg);
        _exit(3);
    }
    pthread_t th;
    if (pthread_create(&th, NULL, launch_set_go, o) != 0) _exit(4);
    int n = 64;
    void *args[] = {&o->y, &o->x, &o->flags, &n};
    ft_dev_launch(dev, o->m, "read_past_end_later", dim3_of(1, 1, 1), dim3_of(1, 1, 1), 0, args,
                  &err);
}

/* Two devices on two threads: a kernel reads past a buffer on one while a launch on the other
 * starts and ends. The line names the kernel that faulted, not the other device's latest. */
static void test_fault_names_its_kernel(void) {
    two_devices o = {.m = compile(SAMPLE("emu_errors.cu"), NULL, 0)};
    if (!o.m) return;
    o.x = dalloc(64 * 4), o.y = dalloc(64 * 4);
    int *flags = dalloc(2 * sizeof(int));
    memset(flags, 0, 2 * sizeof(int)); /* emulator memory is the host's */
    o.flags = flags;
    char out[16384];
    int st = in_child(fault_beside_another, &o, out, sizeof out);
#if defined(FT_TEST_ASAN)
    FT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) != 0 && strstr(out, "heap-buffer-overflow") &&
                 strstr(out, "read_past_end_later"),
             "status %d: AddressSanitizer's report names the kernel:\n%.2000s", st, out);
#else
    FT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 &&
                 strstr(out, "flaretune: kernel 'read_past_end_later' on the emulator reached ") &&
                 strstr(out, ", 0 bytes past the end of a 256-byte device buffer"),
             "status %d: the line names the kernel that faulted:\n%.2000s", st, out);
#endif
    ft_dev_free(dev, o.x), ft_dev_free(dev, o.y), ft_dev_free(dev, flags);
}

/* ---- the module cache ------------------------------------------------------------------------ */

/* The temporary files in dir that process pid made (they are named FILE.tmp.PID.*); other
 * tests compiling into the same cache at the same time have theirs. */
static int count_tmp_files(const char *dir, pid_t pid) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    char mark[48];
    snprintf(mark, sizeof mark, ".tmp.%ld.", (long)pid);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strstr(e->d_name, mark) != NULL;
    closedir(d);
    return n;
}

static void test_cache(void) {
    ft_dev_emu_stats s0, s1;
    ft_err err = {0};
    ft_dev_emu_stats_of(dev, &s0, &err);
    ft_dev_module *a = basic(), *b = basic();
    ft_dev_emu_stats_of(dev, &s1, &err);
    FT_CHECK(a == b && s1.memory_hits == s0.memory_hits + 2,
             "the same source and options give the device's module back");
    /* A second device finds the module on disk. */
    ft_dev *d2 = NULL;
    FT_CHECK(ft_dev_open(FT_DEV_EMU, 0, &d2, &err) == FT_OK, "%s", err.msg);
    if (d2) {
        ft_dev_module *m = NULL;
        FT_CHECK(ft_dev_compile(d2, SAMPLE("emu_basic.cu"), NULL, 0, &m, &err) == FT_OK, "%s",
                 err.msg);
        ft_dev_emu_stats st;
        ft_dev_emu_stats_of(d2, &st, &err);
        FT_CHECK(st.disk_hits == 1 && st.compiled == 0, "second device: %d disk hits, %d compiled",
                 st.disk_hits, st.compiled);
        ft_dev_close(d2);
    }
    /* Two processes compiling the same new module at once both get it, and leave no temporary
     * files behind. */
    char def[64];
    snprintf(def, sizeof def, "FT_CACHE_PROBE=%ld%ld", (long)getpid(), (long)time(NULL));
    pid_t kids[2];
    for (int i = 0; i < 2; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            ft_dev *dk = NULL;
            ft_dev_module *m = NULL;
            ft_err e = {0};
            const char *dd = def;
            int ok = ft_dev_open(FT_DEV_EMU, 0, &dk, &e) == FT_OK &&
                     ft_dev_compile(dk, SAMPLE("emu_matmul.cu"), &dd, 1, &m, &e) == FT_OK;
            if (!ok) fprintf(stderr, "child: %s\n", e.msg);
            _exit(ok ? 0 : 1);
        }
    }
    for (int i = 0; i < 2; i++) {
        int st = 0;
        waitpid(kids[i], &st, 0);
        FT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "concurrent compile %d failed", i);
    }
    const char *cache = getenv("FLARETUNE_CACHE_DIR");
    if (cache) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/emu", cache);
        for (int i = 0; i < 2; i++)
            FT_CHECK(count_tmp_files(dir, kids[i]) == 0, "process %ld left temporary files in %s",
                     (long)kids[i], dir);
    }
}

/* ---- the planted bugs ------------------------------------------------------------------------ */

/* Run planted.cu's gemv with PLANT=plant in thread order `seed`: 1 when it fails (an error, or
 * a result off the reference), 0 when it passes. */
static int planted_fails(int plant, unsigned long long seed, const char **why) {
    char def[24];
    snprintf(def, sizeof def, "PLANT=%d", plant);
    const char *d = def;
    ft_dev_module *m = compile(SAMPLE("planted.cu"), &d, 1);
    if (!m) return -1;
    int M = 37, K = 300;
    float *A = ft_test_alloc((size_t)M * K * 4), *x = ft_test_alloc((size_t)K * 4);
    float *y = ft_test_alloc((size_t)M * 4);
    for (int i = 0; i < M * K; i++)
        A[i] = rnd_float();
    for (int i = 0; i < K; i++)
        x[i] = rnd_float();
    float *dA = dalloc((size_t)M * K * 4), *dx = dalloc((size_t)K * 4), *dy = dalloc((size_t)M * 4);
    h2d(dA, A, (size_t)M * K * 4), h2d(dx, x, (size_t)K * 4);
    void *args[] = {&dy, &dA, &dx, &M, &K};
    set_order(seed);
    ft_err err = {0};
    int fails = 0;
    ft_status s = ft_dev_launch(dev, m, "gemv_tiled", dim3_of((unsigned)(M + 3) / 4, 1, 1),
                                dim3_of(128, 1, 1), 0, args, &err);
    if (s != FT_OK) {
        fails = 1, *why = "launch error";
    } else {
        d2h(y, dy, (size_t)M * 4);
        for (int r = 0; r < M && !fails; r++) {
            double want = 0;
            for (int k = 0; k < K; k++)
                want += (double)A[r * K + k] * x[k];
            if (!(fabs(y[r] - want) <= 1e-4 * fmax(1.0, fabs(want)))) fails = 1;
        }
        *why = fails ? "wrong result" : "right result";
    }
    set_order(0);
    free(A), free(x), free(y);
    ft_dev_free(dev, dA), ft_dev_free(dev, dx), ft_dev_free(dev, dy);
    return fails;
}

static void test_planted_bugs(void) {
    static const char *what[4] = {"correct", "off-by-one tile bound", "missing __syncthreads",
                                  "wrong shuffle lane"};
    /* In thread order and in three shuffled orders: the correct kernel always passes, every
     * planted bug always fails. */
    unsigned long long seeds[4] = {0, 1, 2, 3};
    for (int plant = 0; plant < 4; plant++)
        for (int s = 0; s < 4; s++) {
            const char *why = "";
            int f = planted_fails(plant, seeds[s], &why);
            FT_CHECK(f == (plant != 0), "PLANT=%d (%s), seed %llu: %s", plant, what[plant],
                     seeds[s], why);
            if (s == 0) fprintf(stderr, "  PLANT=%d (%s): %s\n", plant, what[plant], why);
        }
}

/* A missing barrier that the linear order hides (each thread reads its left neighbour, which
 * ran first) and a shuffled order shows. */
static void test_shuffled_order(void) {
    ft_dev_module *m = basic();
    unsigned n = 2 * 128;
    float *x = ft_test_alloc(n * 4), *y = ft_test_alloc(n * 4);
    for (unsigned i = 0; i < n; i++)
        x[i] = (float)(i + 1);
    float *dx = dalloc(n * 4), *dy = dalloc(n * 4);
    h2d(dx, x, n * 4);
    for (int sync = 1; sync >= 0; sync--)
        for (unsigned long long seed = 0; seed < 4; seed++) {
            void *args[] = {&dy, &dx, &sync};
            set_order(seed);
            if (!run(m, "shift_right", dim3_of(2, 1, 1), dim3_of(128, 1, 1), 0, args)) continue;
            d2h(y, dy, n * 4);
            int bad = 0;
            for (unsigned i = 0; i < n; i++)
                bad += y[i] != (i % 128 ? x[i - 1] : 0.0f);
            int want_bad = !sync && seed != 0;
            FT_CHECK((bad > 0) == want_bad, "sync %d seed %llu: %d wrong", sync, seed, bad);
        }
    set_order(0);
    free(x), free(y);
    ft_dev_free(dev, dx), ft_dev_free(dev, dy);
}

/* ---- fibers ---------------------------------------------------------------------------------- */

static void test_ucontext_fibers(void) {
    set_ucontext(1);
    test_warp_sums();
    test_votes();
    test_sgemm_tiled();
    run_errors("ucontext fibers");
    set_ucontext(0);
}

static void test_workers(void) {
    set_workers(2);
    test_sgemm_tiled();
    run_errors("2 OS threads");
    set_workers(1);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void test_switch_cost(void) {
    double fast = ft_emu_has_fast_switch() ? ft_emu_switch_ns(0, 2000000) : -1;
    double uc = ft_emu_switch_ns(1, 20000);
    FT_CHECK(uc > 0, "the ucontext switch runs");
    if (ft_emu_has_fast_switch()) FT_CHECK(fast > 0, "the fast switch runs");
    fprintf(stderr, "  one fiber switch: %.1f ns (x86-64 switch), %.1f ns (ucontext)\n", fast, uc);
    ft_dev_module *m = basic();
    int rounds = 100;
    float *y = dalloc(4 * 256 * 4);
    void *args[] = {&y, &rounds};
    for (int uctx = 0; uctx < 2; uctx++) {
        set_ucontext(uctx);
        rounds = uctx ? 20 : 100; /* ucontext is slow, and very slow under AddressSanitizer */
        double t0 = now_s();
        if (!run(m, "barriers", dim3_of(4, 1, 1), dim3_of(256, 1, 1), 0, args)) break;
        double dt = now_s() - t0;
        double per = dt * 1e9 / (4.0 * 256 * 2 * rounds);
        fprintf(stderr,
                "  __syncthreads in 256-thread blocks: %.1f ns per thread and barrier (%s)\n", per,
                uctx ? "ucontext" : "x86-64 switch");
    }
    set_ucontext(0);
    ft_dev_free(dev, y);
}

static void test_debug_build(void) {
    /* FLARETUNE_EMU_DEBUG=1: modules built with -O0 -g run the same. */
    setenv("FLARETUNE_EMU_DEBUG", "1", 1);
    ft_dev *keep = dev, *d = NULL;
    ft_err err = {0};
    FT_CHECK(ft_dev_open(FT_DEV_EMU, 0, &d, &err) == FT_OK, "%s", err.msg);
    unsetenv("FLARETUNE_EMU_DEBUG");
    if (!d) return;
    dev = d;
    test_warp_sums();
    dev = keep;
    ft_dev_close(d);
    setenv("FLARETUNE_EMU_THREADS", "zero", 1);
    FT_CHECK(ft_dev_open(FT_DEV_EMU, 0, &d, &err) == FT_EINVAL &&
                 strstr(err.msg, "FLARETUNE_EMU_THREADS"),
             "a bad setting is refused: %s", err.msg);
    unsetenv("FLARETUNE_EMU_THREADS");
}

int main(void) {
    double t0 = now_s();
    /* Settings from the environment must not change what this test sees. */
    unsetenv("FLARETUNE_EMU_SEED");
    unsetenv("FLARETUNE_EMU_THREADS");
    unsetenv("FLARETUNE_EMU_FIBERS");
    unsetenv("FLARETUNE_EMU_DEBUG");
    ft_test_open_emu(&dev, SAMPLE("emu_basic.cu"));
    FT_RUN(test_open_and_props);
    FT_RUN(test_memory);
    FT_RUN(test_indices);
    FT_RUN(test_warp_sums);
    FT_RUN(test_shuffles);
    FT_RUN(test_votes);
    FT_RUN(test_atomics);
    FT_RUN(test_spinlock);
    FT_RUN(test_dynamic_smem);
    FT_RUN(test_block_sum);
    FT_RUN(test_poison);
    FT_RUN(test_bf16);
    FT_RUN(test_sgemm_tiled);
    FT_RUN(test_mma_tile);
    FT_RUN(test_mma_gemm);
    FT_RUN(test_ldmatrix);
    FT_RUN(test_errors);
    FT_RUN(test_compile_errors);
    FT_RUN(test_launch_errors);
    FT_RUN(test_read_past_end);
    FT_RUN(test_stack_overflow);
    FT_RUN(test_fault_names_its_kernel);
    FT_RUN(test_cache);
    FT_RUN(test_planted_bugs);
    FT_RUN(test_shuffled_order);
    FT_RUN(test_ucontext_fibers);
    FT_RUN(test_workers);
    FT_RUN(test_switch_cost);
    FT_RUN(test_debug_build);
    ft_dev_close(dev);
    fprintf(stderr, "test_emu: %.1f s\n", now_s() - t0);
    return ft_test_finish();
}
