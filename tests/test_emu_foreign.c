/* test_emu_foreign.c: kernel files not written for flaretune, run as written on the emulator
 * (ft_dev_compile_file, ft_dev_symbol_write, ft_dev_emu_launch_blocks).
 *
 * tests/data/foreign/ holds small files in the style of other tuners' kernels (no ft_cuda.h, a
 * C++ kernel with a __constant__ table the host fills, an extern "C" kernel with a header beside
 * it); their outputs are checked against C on random data, and bad requests give one clear line.
 * A sampled launch must give the blocks it runs exactly what the whole launch gives them. When
 * the FAIR benchmark hub's kernels are beside the repository (../shared/landscapes/kernels),
 * convolution_milo.cu and dedispersion.cu run at their full sizes on a few sampled blocks each,
 * checked against a direct C computation of those blocks.
 */
#include "ft_test.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "cuda/device_emu.h"
#include "cuda/device.h"
#include "ft_emu.h"

#define FOREIGN FT_SOURCE_DIR "/tests/data/foreign/"
#define SHARED  FT_SOURCE_DIR "/../shared/landscapes/kernels/"

static ft_dev *dev;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* in [-1, 1), never exactly 0 in practice */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}
static unsigned rand_byte(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(rng_state >> 56);
}

static void *dev_alloc(size_t bytes) {
    void *p = NULL;
    ft_err err = {0};
    if (ft_dev_alloc(dev, bytes, &p, &err)) {
        fprintf(stderr, "ft_dev_alloc: %s\n", err.msg);
        exit(2);
    }
    return p;
}

/* ---- stencil.cu: a C++ kernel with a __constant__ table, __ldg, a shared tile, min/max ---- */

enum { R = 2, D = 2 * R + 1 };

static float ref_stencil(const float *in, const float *coef, int w, int h, int x, int y, float lo,
                         float hi) {
    float sum = 0.0f;
    for (int i = 0; i < D; i++)
        for (int j = 0; j < D; j++) {
            int yy = y + i - R, xx = x + j - R;
            yy = yy < 0 ? 0 : yy > h - 1 ? h - 1 : yy;
            xx = xx < 0 ? 0 : xx > w - 1 ? w - 1 : xx;
            sum += in[yy * w + xx] * coef[i * D + j];
        }
    return sum < lo ? lo : sum > hi ? hi : sum;
}

static ft_status compile_stencil(const char *bx, const char *by, ft_dev_module **m, ft_err *err) {
    const char *defines[] = {bx, by};
    const char *kernels[] = {"stencil", "dot4"};
    const char *symbols[] = {"coef"};
    const char *options[] = {"-std=c++11", "--use_fast_math"}; /* NVRTC's: ignored here */
    ft_dev_source src = {FOREIGN "stencil.cu", defines, 2, options, 2, kernels, 2, symbols, 1};
    return ft_dev_compile_file(dev, &src, m, err);
}

static void test_stencil(void) {
    static const char *const configs[][2] = {{"block_size_x=16", "block_size_y=8"},
                                             {"block_size_x=8", "block_size_y=4"}};
    int w = 45, h = 29;
    float lo = -1.5f, hi = 1.5f;
    float *in = ft_test_alloc((size_t)w * h * sizeof *in), *out = ft_test_alloc((size_t)w * h * 4);
    float coef[D * D];
    for (int i = 0; i < w * h; i++)
        in[i] = frand();
    for (int i = 0; i < D * D; i++)
        coef[i] = frand() * 0.3f;
    float *d_in = dev_alloc((size_t)w * h * 4), *d_out = dev_alloc((size_t)w * h * 4);
    ft_err err = {0};
    ft_dev_copy(dev, d_in, in, (size_t)w * h * 4, FT_COPY_H2D, &err);
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        ft_dev_module *m = NULL;
        ft_status st = compile_stencil(configs[c][0], configs[c][1], &m, &err);
        FT_CHECK(st == FT_OK, "compile stencil.cu (%s %s): %s", configs[c][0], configs[c][1],
                 err.msg);
        if (st) continue;
        st = ft_dev_symbol_write(dev, m, "coef", coef, sizeof coef, &err);
        FT_CHECK(st == FT_OK, "write coef: %s", err.msg);
        unsigned bx = (unsigned)atoi(configs[c][0] + 13), by = (unsigned)atoi(configs[c][1] + 13);
        ft_dim3 grid = {(unsigned)(w + bx - 1) / bx, (unsigned)(h + by - 1) / by, 1};
        ft_dim3 block = {bx, by, 1};
        void *args[] = {&d_out, &d_in, &w, &h, &lo, &hi};
        st = ft_dev_launch(dev, m, "stencil", grid, block, 0, args, &err);
        FT_CHECK(st == FT_OK, "launch stencil: %s", err.msg);
        ft_dev_copy(dev, out, d_out, (size_t)w * h * 4, FT_COPY_D2H, &err);
        int bad = 0, clamped = 0;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                float want = ref_stencil(in, coef, w, h, x, y, lo, hi);
                clamped += want == lo || want == hi;
                if (fabsf(out[y * w + x] - want) > 1e-5f && bad++ < 3)
                    FT_CHECK(0, "stencil %s %s (%d,%d) = %g, expected %g", configs[c][0],
                             configs[c][1], x, y, out[y * w + x], want);
            }
        FT_CHECK(bad == 0, "%d of %d outputs wrong", bad, w * h);
        FT_CHECK(clamped > 0 && clamped < w * h / 2, "the clamp is exercised (%d)", clamped);

        /* dot4: float4 loads of the same table. */
        int n = 50;
        void *d4 = dev_alloc((size_t)n * 16);
        float *v = ft_test_alloc((size_t)n * 16), *o = ft_test_alloc((size_t)n * 4);
        for (int i = 0; i < 4 * n; i++)
            v[i] = frand();
        ft_dev_copy(dev, d4, v, (size_t)n * 16, FT_COPY_H2D, &err);
        void *a4[] = {&d_out, &d4, &n};
        st = ft_dev_launch(dev, m, "dot4", (ft_dim3){2, 1, 1}, (ft_dim3){32, 1, 1}, 0, a4, &err);
        FT_CHECK(st == FT_OK, "launch dot4: %s", err.msg);
        ft_dev_copy(dev, o, d_out, (size_t)n * 4, FT_COPY_D2H, &err);
        for (int i = 0; i < n; i++) {
            float want = v[4 * i] * coef[0] + v[4 * i + 1] * coef[1] + v[4 * i + 2] * coef[2] +
                         v[4 * i + 3] * coef[3];
            FT_CHECK_NEAR(o[i], want, 1e-6);
        }
        ft_dev_free(dev, d4);
        free(v);
        free(o);
    }
    ft_dev_free(dev, d_in);
    ft_dev_free(dev, d_out);
    free(in);
    free(out);
}

/* ---- rows.cu: extern "C", a header beside it, defines that are expressions ---------------- */

static void test_extern_c(void) {
    enum { ROW = 37, ROWS = 11 };
    float x[ROW * ROWS], scale[ROWS], y[ROW * ROWS];
    for (int i = 0; i < ROW * ROWS; i++)
        x[i] = frand();
    for (int r = 0; r < ROWS; r++)
        scale[r] = frand() * 4.0f;
    float *dx = dev_alloc(sizeof x), *ds = dev_alloc(sizeof scale), *dy = dev_alloc(sizeof y);
    ft_err err = {0};
    ft_dev_copy(dev, dx, x, sizeof x, FT_COPY_H2D, &err);
    ft_dev_copy(dev, ds, scale, sizeof scale, FT_COPY_H2D, &err);
    static const int tiles[] = {1, 3};
    for (int t = 0; t < 2; t++) {
        char tile[32];
        snprintf(tile, sizeof tile, "tile=%d", tiles[t]);
        const char *defines[] = {"row_offset=0.25f", tile};
        const char *kernels[] = {"scale_rows"};
        ft_dev_source src = {FOREIGN "rows.cu", defines, 2, NULL, 0, kernels, 1, NULL, 0};
        ft_dev_module *m = NULL;
        ft_status st = ft_dev_compile_file(dev, &src, &m, &err);
        FT_CHECK(st == FT_OK, "compile rows.cu: %s", err.msg);
        if (st) continue;
        int rows = ROWS;
        unsigned threads = 8, per = threads * (unsigned)tiles[t];
        void *args[] = {&dx, &ds, &dy, &rows};
        ft_dev_memset(dev, dy, 0xFF, sizeof y, &err);
        st = ft_dev_launch(dev, m, "scale_rows", (ft_dim3){(ROW + per - 1) / per, ROWS, 1},
                           (ft_dim3){threads, 1, 1}, 0, args, &err);
        FT_CHECK(st == FT_OK, "launch scale_rows: %s", err.msg);
        ft_dev_copy(dev, y, dy, sizeof y, FT_COPY_D2H, &err);
        for (int i = 0; i < ROW * ROWS; i++)
            if (y[i] != x[i] * scale[i / ROW] + 0.25f) {
                FT_CHECK(0, "tile %d: y[%d] = %g, expected %g", tiles[t], i, y[i],
                         x[i] * scale[i / ROW] + 0.25f);
                break;
            }
    }
    ft_dev_free(dev, dx);
    ft_dev_free(dev, ds);
    ft_dev_free(dev, dy);
}

/* ---- vectors.cu: CUDA's vector types (double3, short4, uchar3, float1) as CUDA lays them out */

static void test_vector_types(void) {
    enum { N = 45 };
    /* double3 and uchar3 are packed arrays of their components, short4 of 4 shorts a 8 bytes. */
    double in[3 * N], add[3] = {0.5, -2.0, 1e3}, out[3 * N];
    short s[4 * N], s0[4 * N];
    unsigned char c[3 * N];
    float w[N];
    for (int i = 0; i < 3 * N; i++) {
        in[i] = frand();
        c[i] = (unsigned char)rand_byte();
    }
    for (int i = 0; i < 4 * N; i++)
        s[i] = s0[i] = (short)(rand_byte() % 200) - 100;
    double *din = dev_alloc(sizeof in), *dadd = dev_alloc(sizeof add),
           *dout = dev_alloc(sizeof out);
    short *ds = dev_alloc(sizeof s);
    unsigned char *dc = dev_alloc(sizeof c);
    float *dw = dev_alloc(sizeof w);
    ft_err err = {0};
    ft_dev_copy(dev, din, in, sizeof in, FT_COPY_H2D, &err);
    ft_dev_copy(dev, dadd, add, sizeof add, FT_COPY_H2D, &err);
    ft_dev_copy(dev, ds, s, sizeof s, FT_COPY_H2D, &err);
    ft_dev_copy(dev, dc, c, sizeof c, FT_COPY_H2D, &err);
    const char *kernels[] = {"vec_mix"};
    ft_dev_source src = {FOREIGN "vectors.cu", NULL, 0, NULL, 0, kernels, 1, NULL, 0};
    ft_dev_module *m = NULL;
    ft_status st = ft_dev_compile_file(dev, &src, &m, &err);
    FT_CHECK(st == FT_OK, "compile vectors.cu: %s", err.msg);
    if (st == FT_OK) {
        short k = 3;
        int n = N;
        void *args[] = {&din, &dadd, &dout, &ds, &k, &dc, &dw, &n};
        st = ft_dev_launch(dev, m, "vec_mix", (ft_dim3){(N + 15) / 16, 1, 1}, (ft_dim3){16, 1, 1},
                           0, args, &err);
        FT_CHECK(st == FT_OK, "launch vec_mix: %s", err.msg);
        ft_dev_copy(dev, out, dout, sizeof out, FT_COPY_D2H, &err);
        ft_dev_copy(dev, s, ds, sizeof s, FT_COPY_D2H, &err);
        ft_dev_copy(dev, w, dw, sizeof w, FT_COPY_D2H, &err);
        for (int i = 0; i < 3 * N; i++)
            if (out[i] != in[i] + add[i % 3]) {
                FT_CHECK(0, "out[%d] = %g, expected %g", i, out[i], in[i] + add[i % 3]);
                break;
            }
        for (int i = 0; i < 4 * N; i++)
            if (s[i] != (short)(s0[i] * k)) {
                FT_CHECK(0, "s[%d] = %d, expected %d", i, s[i], s0[i] * k);
                break;
            }
        for (int i = 0; i < N; i++)
            if (w[i] != (float)(c[3 * i] + c[3 * i + 1] + c[3 * i + 2])) {
                FT_CHECK(0, "w[%d] = %g, expected the sum of c[%d..%d]", i, w[i], 3 * i, 3 * i + 2);
                break;
            }
    }
    ft_dev_free(dev, din);
    ft_dev_free(dev, dadd);
    ft_dev_free(dev, dout);
    ft_dev_free(dev, ds);
    ft_dev_free(dev, dc);
    ft_dev_free(dev, dw);
}

/* ---- bad requests: one line each, naming what is wrong ------------------------------------ */

static int one_line_with(const ft_err *e, const char *what) {
    fprintf(stderr, "  said: %s\n", e->msg);
    return strchr(e->msg, '\n') == NULL && strstr(e->msg, what) != NULL;
}

static void test_errors(void) {
    ft_err err = {0};
    ft_dev_module *m = NULL;
    const char *kernels[] = {"stencil"}, *nokernel[] = {"stencil", "no_such_kernel"};
    const char *nosym[] = {"no_such_symbol"}, *broken[] = {"broken"};
    ft_dev_source missing = {FOREIGN "missing.cu", NULL, 0, NULL, 0, kernels, 1, NULL, 0};
    ft_status st = ft_dev_compile_file(dev, &missing, &m, &err);
    FT_CHECK(st != FT_OK && one_line_with(&err, "missing.cu"), "missing file: %d %s", st, err.msg);

    ft_dev_source unk = {FOREIGN "stencil.cu", NULL, 0, NULL, 0, nokernel, 2, NULL, 0};
    st = ft_dev_compile_file(dev, &unk, &m, &err);
    FT_CHECK(st == FT_EINVAL && one_line_with(&err, "no kernel 'no_such_kernel'"),
             "unknown kernel: %s", err.msg);

    ft_dev_source uns = {FOREIGN "stencil.cu", NULL, 0, NULL, 0, kernels, 1, nosym, 1};
    st = ft_dev_compile_file(dev, &uns, &m, &err);
    FT_CHECK(st == FT_EINVAL && one_line_with(&err, "no symbol 'no_such_symbol'"),
             "unknown symbol: %s", err.msg);

    ft_dev_source brk = {FOREIGN "broken.cu", NULL, 0, NULL, 0, broken, 1, NULL, 0};
    st = ft_dev_compile_file(dev, &brk, &m, &err);
    FT_CHECK(st == FT_EINVAL && one_line_with(&err, "broken.cu:3") &&
                 one_line_with(&err, "undeclared_value"),
             "compile error: %s", err.msg);

    /* A module that compiled: a symbol it was not asked for, a write too large, a kernel it
     * does not register. */
    st = compile_stencil("block_size_x=16", "block_size_y=8", &m, &err);
    FT_CHECK(st == FT_OK, "compile stencil.cu: %s", err.msg);
    if (st) return;
    float big[64] = {0};
    st = ft_dev_symbol_write(dev, m, "tile", big, 4, &err);
    FT_CHECK(st == FT_EINVAL && one_line_with(&err, "no symbol 'tile'"), "unknown symbol: %s",
             err.msg);
    st = ft_dev_symbol_write(dev, m, "coef", big, sizeof big, &err);
    FT_CHECK(st == FT_EINVAL && one_line_with(&err, "'coef'") && one_line_with(&err, "100 bytes"),
             "too large: %s", err.msg);
    st = ft_dev_launch(dev, m, "clampf", (ft_dim3){1, 1, 1}, (ft_dim3){1, 1, 1}, 0, NULL, &err);
    FT_CHECK(st == FT_EINVAL && one_line_with(&err, "'clampf'"), "unregistered kernel: %s",
             err.msg);
}

/* ---- a sampled launch gives its blocks what the whole launch gives them -------------------- */

static void test_sampled_equals_full(void) {
    int w = 61, h = 35;
    float lo = -1.0f, hi = 1.0f;
    size_t bytes = (size_t)w * h * 4;
    float *in = ft_test_alloc(bytes), *full = ft_test_alloc(bytes), *part = ft_test_alloc(bytes);
    float coef[D * D];
    for (int i = 0; i < w * h; i++)
        in[i] = frand();
    for (int i = 0; i < D * D; i++)
        coef[i] = frand() * 0.3f;
    ft_err err = {0};
    ft_dev_module *m = NULL;
    ft_status st = compile_stencil("block_size_x=16", "block_size_y=8", &m, &err);
    FT_CHECK(st == FT_OK, "compile stencil.cu: %s", err.msg);
    if (st) return;
    ft_dev_symbol_write(dev, m, "coef", coef, sizeof coef, &err);
    float *d_in = dev_alloc(bytes), *d_out = dev_alloc(bytes);
    ft_dev_copy(dev, d_in, in, bytes, FT_COPY_H2D, &err);
    ft_dim3 grid = {(unsigned)(w + 15) / 16, (unsigned)(h + 7) / 8, 1}, block = {16, 8, 1};
    void *args[] = {&d_out, &d_in, &w, &h, &lo, &hi};
    st = ft_dev_launch(dev, m, "stencil", grid, block, 0, args, &err);
    FT_CHECK(st == FT_OK, "full launch: %s", err.msg);
    ft_dev_copy(dev, full, d_out, bytes, FT_COPY_D2H, &err);

    /* The first block, an interior one, the last (a partial block at both edges). */
    ft_dim3 sample[] = {{0, 0, 0}, {2, 2, 0}, {grid.x - 1, grid.y - 1, 0}};
    ft_dev_memset(dev, d_out, 0xFF, bytes, &err);
    st = ft_dev_emu_launch_blocks(dev, m, "stencil", grid, block, 0, args, sample, 3, &err);
    FT_CHECK(st == FT_OK, "sampled launch: %s", err.msg);
    ft_dev_copy(dev, part, d_out, bytes, FT_COPY_D2H, &err);
    int same = 0, untouched = 0, other = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            unsigned bx = (unsigned)x / 16, by = (unsigned)y / 8;
            int sampled = 0;
            for (int s = 0; s < 3; s++)
                sampled |= sample[s].x == bx && sample[s].y == by;
            float p = part[y * w + x];
            if (sampled)
                same += memcmp(&p, &full[y * w + x], 4) == 0;
            else if (isnan(p))
                untouched++;
            else
                other++;
        }
    int in_sample = 16 * 8 * 2 + (w - 16 * (int)(grid.x - 1)) * (h - 8 * (int)(grid.y - 1));
    FT_CHECK(same == in_sample, "%d of the %d outputs of the sampled blocks match", same,
             in_sample);
    FT_CHECK(other == 0 && untouched == w * h - in_sample,
             "blocks not sampled were written: %d (untouched %d)", other, untouched);

    /* A block outside the grid; no block at all. */
    ft_dim3 outside[] = {{grid.x, 0, 0}};
    st = ft_dev_emu_launch_blocks(dev, m, "stencil", grid, block, 0, args, outside, 1, &err);
    FT_CHECK(st == FT_EINVAL && one_line_with(&err, "outside the grid"), "outside: %s", err.msg);
    st = ft_dev_emu_launch_blocks(dev, m, "stencil", grid, block, 0, args, NULL, 0, &err);
    FT_CHECK(st == FT_OK, "no block: %s", err.msg);

    /* The profile counts the sampled blocks alone. */
    ft_dev_module *pm = NULL;
    if (ft_dev_emu_set_profile(dev, 1, &err) == FT_OK &&
        compile_stencil("block_size_x=16", "block_size_y=8", &pm, &err) == FT_OK) {
        ft_dev_symbol_write(dev, pm, "coef", coef, sizeof coef, &err);
        st = ft_dev_emu_launch_blocks(dev, pm, "stencil", grid, block, 0, args, sample, 3, &err);
        FT_CHECK(st == FT_OK, "sampled profile launch: %s", err.msg);
        ft_dev_emu_launch_record *r = NULL;
        int n = 0;
        ft_dev_emu_profile_take(dev, &r, &n, &err);
        FT_CHECK(n == 1 && r[0].p.blocks == 3, "%d records, %llu blocks", n,
                 n ? (unsigned long long)r[0].p.blocks : 0ull);
        ft_dev_emu_records_free(r, n);
    } else {
        FT_CHECK(0, "profile module: %s", err.msg);
    }
    ft_dev_emu_set_profile(dev, 0, &err);
    ft_dev_free(dev, d_in);
    ft_dev_free(dev, d_out);
    free(in);
    free(full);
    free(part);
}

/* ---- the FAIR hub's kernels at full size, on sampled blocks -------------------------------- */

/* Compiles configuration c of a FAIR hub kernel file (compiled with NAME=VALUE of each of the n
 * names and values; symbol: the __constant__ variable the host writes, or NULL); NULL, after a
 * failed check, when it does not compile. */
static ft_dev_module *compile_hub(const char *file, const char *const *names, const int *values,
                                  int n, const char *kernel, const char *symbol, size_t c) {
    char d[16][48], path[512];
    const char *defines[16];
    for (int i = 0; i < n; i++) {
        snprintf(d[i], sizeof d[i], "%s=%d", names[i], values[i]);
        defines[i] = d[i];
    }
    snprintf(path, sizeof path, SHARED "%s", file);
    const char *kernels[] = {kernel}, *symbols[] = {symbol};
    ft_dev_source src = {path, defines, n, NULL, 0, kernels, 1, symbol ? symbols : NULL, !!symbol};
    ft_dev_module *m = NULL;
    ft_err err = {0};
    ft_status st = ft_dev_compile_file(dev, &src, &m, &err);
    FT_CHECK(st == FT_OK, "compile %s config %zu: %s", file, c, err.msg);
    return st == FT_OK ? m : NULL;
}

/* Runs configuration c of kernel on the nsample blocks of grid in sample only; d_out (bytes) is
 * filled with 0xFF first, so that what no block wrote shows, and copied back into out. */
static void launch_sampled(ft_dev_module *m, const char *kernel, ft_dim3 grid, ft_dim3 block,
                           void **args, const ft_dim3 *sample, int nsample, void *d_out, void *out,
                           size_t bytes, size_t c) {
    ft_err err = {0};
    ft_dev_memset(dev, d_out, 0xFF, bytes, &err);
    ft_status st =
        ft_dev_emu_launch_blocks(dev, m, kernel, grid, block, 0, args, sample, nsample, &err);
    FT_CHECK(st == FT_OK, "launch %s config %zu: %s", kernel, c, err.msg);
    ft_dev_copy(dev, out, d_out, bytes, FT_COPY_D2H, &err);
}

static void test_convolution_milo(void) {
    enum { IMG = 4096, FW = 15, FH = 15, IW = IMG + FW - 1, IH = IMG + FH - 1 };
    static const struct {
        int bx, by, tx, ty, ro, pad;
    } cfgs[] = {{16, 4, 2, 1, 1, 1}, {32, 8, 1, 2, 0, 0}, {48, 2, 3, 4, 1, 1}};
    size_t in_n = (size_t)IW * IH, out_n = (size_t)IMG * IMG;
    float *in = ft_test_alloc(in_n * 4), *out = ft_test_alloc(out_n * 4), filter[FW * FH];
    for (size_t i = 0; i < in_n; i++)
        in[i] = frand();
    for (int i = 0; i < FW * FH; i++)
        filter[i] = frand();
    ft_err err = {0};
    float *d_in = dev_alloc(in_n * 4), *d_out = dev_alloc(out_n * 4), *d_f = dev_alloc(sizeof filter);
    ft_dev_copy(dev, d_in, in, in_n * 4, FT_COPY_H2D, &err);
    ft_dev_copy(dev, d_f, filter, sizeof filter, FT_COPY_H2D, &err);
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        static const char *const names[] = {"block_size_x", "block_size_y",  "tile_size_x",
                                            "tile_size_y",  "read_only",     "use_padding",
                                            "filter_width", "filter_height", "use_shmem"};
        const int values[] = {cfgs[c].bx,  cfgs[c].by, cfgs[c].tx, cfgs[c].ty, cfgs[c].ro,
                              cfgs[c].pad, FW,         FH,         1};
        ft_dev_module *m = compile_hub("convolution_milo.cu", names, values, 9,
                                       "convolution_kernel", "d_filter", c);
        if (!m) continue;
        ft_status st = ft_dev_symbol_write(dev, m, "d_filter", filter, sizeof filter, &err);
        FT_CHECK(st == FT_OK, "d_filter: %s", err.msg);
        unsigned ox = (unsigned)(cfgs[c].bx * cfgs[c].tx), oy = (unsigned)(cfgs[c].by * cfgs[c].ty);
        ft_dim3 grid = {(IMG + ox - 1) / ox, (IMG + oy - 1) / oy, 1};
        ft_dim3 block = {(unsigned)cfgs[c].bx, (unsigned)cfgs[c].by, 1};
        ft_dim3 sample[] = {{0, 0, 0}, {grid.x / 2, grid.y / 3, 0}, {grid.x - 1, 0, 0},
                            {0, grid.y - 1, 0}, {grid.x - 1, grid.y - 1, 0}};
        void *args[] = {&d_out, &d_in, &d_f};
        launch_sampled(m, "convolution_kernel", grid, block, args, sample, 5, d_out, out, out_n * 4,
                       c);
        int bad = 0, checked = 0;
        for (int s = 0; s < 5; s++)
            for (unsigned y = sample[s].y * oy; y < (sample[s].y + 1) * oy && y < IMG; y++)
                for (unsigned x = sample[s].x * ox; x < (sample[s].x + 1) * ox && x < IMG; x++) {
                    float want = 0.0f;
                    for (int i = 0; i < FH; i++)
                        for (int j = 0; j < FW; j++)
                            want += in[(y + i) * IW + x + j] * filter[i * FW + j];
                    float got = out[(size_t)y * IMG + x];
                    checked++;
                    if (!(fabsf(got - want) <= 1e-4f * (1.0f + fabsf(want))) && bad++ < 3)
                        FT_CHECK(0, "config %zu: out[%u][%u] = %g, expected %g", c, y, x, got,
                                 want);
                }
        FT_CHECK(bad == 0 && checked >= 5 * (int)(ox * oy) / 2, "config %zu: %d of %d wrong", c,
                 bad, checked);
    }
    ft_dev_free(dev, d_in);
    ft_dev_free(dev, d_out);
    ft_dev_free(dev, d_f);
    free(in);
    free(out);
}

static void test_dedispersion(void) {
    /* dedispersion.h's constants */
    enum { DMS = 2048, SAMPLES = 25000, CHANNELS = 1536, MAX_SHIFT = 650 };
    const int per_channel = SAMPLES + MAX_SHIFT;
    const float dm_first = 0.0f, dm_step = 0.02f;
    static const struct {
        int bx, by, tx, ty, sx, sy, unroll;
    } cfgs[] = {{32, 8, 2, 2, 1, 0, 4}, {64, 4, 1, 3, 0, 1, 1}};
    size_t in_n = (size_t)CHANNELS * per_channel, out_n = (size_t)DMS * SAMPLES;
    unsigned char *in = ft_test_alloc(in_n);
    float *out = ft_test_alloc(out_n * 4), shifts[CHANNELS];
    for (size_t i = 0; i < in_n; i++)
        in[i] = (unsigned char)rand_byte();
    /* The largest shift, at the last dm and channel, stays inside a channel's extra samples. */
    for (int c = 0; c < CHANNELS; c++)
        shifts[c] = (c / (float)CHANNELS) * (MAX_SHIFT - 1) / (dm_first + (DMS - 1) * dm_step);
    ft_err err = {0};
    unsigned char *d_in = dev_alloc(in_n);
    float *d_out = dev_alloc(out_n * 4), *d_sh = dev_alloc(sizeof shifts);
    ft_dev_copy(dev, d_in, in, in_n, FT_COPY_H2D, &err);
    ft_dev_copy(dev, d_sh, shifts, sizeof shifts, FT_COPY_H2D, &err);
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        static const char *const names[] = {"block_size_x",  "block_size_y",  "tile_size_x",
                                            "tile_size_y",   "tile_stride_x", "tile_stride_y",
                                            "loop_unroll_factor_channel"};
        const int values[] = {cfgs[c].bx, cfgs[c].by, cfgs[c].tx,    cfgs[c].ty,
                              cfgs[c].sx, cfgs[c].sy, cfgs[c].unroll};
        ft_dev_module *m =
            compile_hub("dedispersion.cu", names, values, 7, "dedispersion_kernel", NULL, c);
        if (!m) continue;
        unsigned ox = (unsigned)(cfgs[c].bx * cfgs[c].tx), oy = (unsigned)(cfgs[c].by * cfgs[c].ty);
        ft_dim3 grid = {(SAMPLES + ox - 1) / ox, (DMS + oy - 1) / oy, 1};
        ft_dim3 block = {(unsigned)cfgs[c].bx, (unsigned)cfgs[c].by, 1};
        ft_dim3 sample[] = {{0, 0, 0}, {grid.x / 2, grid.y / 2, 0}, {grid.x - 1, grid.y - 1, 0}};
        void *args[] = {&d_in, &d_out, &d_sh};
        launch_sampled(m, "dedispersion_kernel", grid, block, args, sample, 3, d_out, out,
                       out_n * 4, c);
        /* A block covers ox samples from blockIdx.x * ox and oy dms from blockIdx.y * oy,
         * whatever the strides. */
        int bad = 0, checked = 0;
        for (int s = 0; s < 3; s++)
            for (unsigned dm = sample[s].y * oy; dm < (sample[s].y + 1) * oy && dm < DMS; dm++)
                for (unsigned x = sample[s].x * ox; x < (sample[s].x + 1) * ox && x < SAMPLES;
                     x++) {
                    float want = 0.0f;
                    for (int ch = 0; ch < CHANNELS; ch++) {
                        unsigned shift = (unsigned)((dm_first + (float)dm * dm_step) * shifts[ch]);
                        want += in[(size_t)ch * per_channel + x + shift];
                    }
                    float got = out[(size_t)dm * SAMPLES + x];
                    checked++;
                    if (got != want && bad++ < 3)
                        FT_CHECK(0, "config %zu: out[dm %u][%u] = %g, expected %g", c, dm, x, got,
                                 want);
                }
        FT_CHECK(bad == 0 && checked > 0, "config %zu: %d of %d wrong", c, bad, checked);
    }
    ft_dev_free(dev, d_in);
    ft_dev_free(dev, d_out);
    ft_dev_free(dev, d_sh);
    free(in);
    free(out);
}

int main(void) {
    ft_test_open_emu(&dev, NULL);
    FT_RUN(test_stencil);
    FT_RUN(test_extern_c);
    FT_RUN(test_vector_types);
    FT_RUN(test_errors);
    FT_RUN(test_sampled_equals_full);
    if (access(SHARED "convolution_milo.cu", R_OK) == 0) {
        FT_RUN(test_convolution_milo);
        FT_RUN(test_dedispersion);
    } else {
        fprintf(stderr, "no %s: the FAIR hub's kernels are not checked\n", SHARED);
    }
    ft_dev_close(dev);
    return ft_test_finish();
}
