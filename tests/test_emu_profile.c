/* test_emu_profile.c: the emulator's memory profile (kernels/cuda/emu/prof.h) on the planted
 * kernels of tests/cuda/emu_profile.cu, each figure asserted exactly: sectors per request
 * (coalesced 4, strided 32), bank-conflict wavefronts (32 and, padded, 1), a re-read (twice the
 * sectors of the distinct bytes), a divergent branch (16 active lanes, a partial request),
 * float4 accesses, barriers per launch, source lines; the request arithmetic and a sample's
 * choice of blocks on their own; and that the results of the kernels are still right with the
 * profile on.
 *
 * Modules are cached in $FLARETUNE_CACHE_DIR (ctest points it at the build directory). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device_emu.h"
#include "cuda/emu/prof.h"
#include "cuda/device.h"
#include "ft_test.h"

#define SAMPLE FT_SOURCE_DIR "/tests/cuda/emu_profile.cu"

static ft_dev *dev;
static ft_dev_module *mod;
static float *dx, *dy; /* device buffers: 2048 floats each */
enum { NX = 2048 };

/* Launch `kernel` and return its one record (the caller frees it). */
static ft_dev_emu_launch_record *run(const char *kernel, unsigned blocks, unsigned threads) {
    ft_err err = {0};
    void *args[2] = {&dx, &dy};
    ft_status s = ft_dev_launch(dev, mod, kernel, (ft_dim3){blocks, 1, 1}, (ft_dim3){threads, 1, 1},
                                0, args, &err);
    FT_CHECK(s == FT_OK, "launch %s: %s", kernel, err.msg);
    ft_dev_emu_launch_record *r = NULL;
    int n = 0;
    s = ft_dev_emu_profile_take(dev, &r, &n, &err);
    FT_CHECK(s == FT_OK && n == 1, "%s: %d records (%s)", kernel, n, err.msg);
    if (n != 1) exit(1);
    FT_CHECK(strcmp(r->p.kernel, kernel) == 0, "record of %s names %s", kernel, r->p.kernel);
    FT_CHECK(!r->incomplete, "%s: incomplete record", kernel);
    return r;
}

/* On a failed check, the record's sites say what the kernel did instead. */
static void dump_on_failure(const ft_dev_emu_launch_record *r, int failures_before) {
    if (ft_test_failures == failures_before) return;
    for (int i = 0; i < r->p.nsites; i++) {
        const ft_emu_site *s = &r->p.sites[i];
        fprintf(stderr,
                "  %s: %-13s %2u B  %llu requests, %llu lanes, %llu units (ideal %llu) %s\n",
                r->p.kernel, ft_emu_acc_name(s->kind), s->size, (unsigned long long)s->t.requests,
                (unsigned long long)s->t.lanes, (unsigned long long)s->t.units,
                (unsigned long long)s->t.ideal, s->where);
    }
}

static void check_traffic(const char *what, const ft_emu_traffic *t, uint64_t requests,
                          uint64_t lanes, uint64_t units, uint64_t ideal, uint64_t partial) {
    FT_CHECK(t->requests == requests, "%s: %llu requests, want %llu", what,
             (unsigned long long)t->requests, (unsigned long long)requests);
    FT_CHECK(t->lanes == lanes, "%s: %llu lanes, want %llu", what, (unsigned long long)t->lanes,
             (unsigned long long)lanes);
    FT_CHECK(t->units == units, "%s: %llu units, want %llu", what, (unsigned long long)t->units,
             (unsigned long long)units);
    FT_CHECK(t->ideal == ideal, "%s: ideal %llu, want %llu", what, (unsigned long long)t->ideal,
             (unsigned long long)ideal);
    FT_CHECK(t->partial == partial, "%s: %llu partial, want %llu", what,
             (unsigned long long)t->partial, (unsigned long long)partial);
}

/* The site of kind k whose source line contains `text`, or NULL. */
static const ft_emu_site *site_of(const ft_dev_emu_launch_record *r, ft_emu_acc k) {
    for (int i = 0; i < r->p.nsites; i++)
        if (r->p.sites[i].kind == k) return &r->p.sites[i];
    return NULL;
}

/* A planted kernel and what its launch must show: up to 4 kinds of traffic, exactly. */
typedef struct planted {
    const char *kernel;
    unsigned blocks, threads;
    struct {
        ft_emu_acc kind;
        uint64_t requests, lanes, units, ideal, partial;
    } t[4];
    int nt;
    long long read_bytes, written_bytes, barriers; /* -1: not checked */
    const char *line;                              /* a global load's source line, or NULL */
} planted;

static const planted cases[] = {
    {"coalesced",
     1,
     32,
     {{FT_EMU_GLD, 1, 32, 4, 4, 0}, {FT_EMU_GST, 1, 32, 4, 4, 0}},
     2,
     128,
     128,
     0,
     "emu_profile.cu:10"},
    {"strided",
     1,
     32,
     {{FT_EMU_GLD, 1, 32, 32, 4, 0}, {FT_EMU_GST, 1, 32, 4, 4, 0}},
     2,
     32 * 32,
     128,
     0,
     "emu_profile.cu:17"},
    {"bank_conflict",
     1,
     32,
     {{FT_EMU_SST, 1, 32, 32, 1, 0}, {FT_EMU_SLD, 1, 32, 32, 1, 0}},
     2,
     -1,
     -1,
     1,
     NULL},
    {"bank_padded",
     1,
     32,
     {{FT_EMU_SST, 1, 32, 1, 1, 0}, {FT_EMU_SLD, 1, 32, 1, 1, 0}},
     2,
     -1,
     -1,
     1,
     NULL},
    {"reread", 1, 32, {{FT_EMU_GLD, 2, 64, 8, 8, 0}}, 1, 128, 128, 0, NULL},
    {"divergent",
     1,
     32,
     {{FT_EMU_GLD, 1, 16, 4, 2, 1}, {FT_EMU_GST, 1, 16, 4, 2, 1}},
     2,
     128,
     128,
     0,
     NULL},
    {"vec4",
     1,
     32,
     {{FT_EMU_GLD, 1, 32, 16, 16, 0},
      {FT_EMU_GST, 1, 32, 16, 16, 0},
      {FT_EMU_SST, 1, 32, 4, 4, 0},
      {FT_EMU_SLD, 1, 32, 4, 4, 0}},
     4,
     512,
     512,
     1,
     NULL},
};

static void test_planted(void) {
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const planted *pc = &cases[c];
        int before = ft_test_failures;
        ft_dev_emu_launch_record *r = run(pc->kernel, pc->blocks, pc->threads);
        for (int i = 0; i < pc->nt; i++) {
            char what[64];
            snprintf(what, sizeof what, "%s: %s", pc->kernel, ft_emu_acc_name(pc->t[i].kind));
            check_traffic(what, &r->p.t[pc->t[i].kind], pc->t[i].requests, pc->t[i].lanes,
                          pc->t[i].units, pc->t[i].ideal, pc->t[i].partial);
        }
        FT_CHECK(pc->read_bytes < 0 || (long long)r->p.unique_read_bytes == pc->read_bytes,
                 "%s: %llu distinct bytes read, want %lld", pc->kernel,
                 (unsigned long long)r->p.unique_read_bytes, pc->read_bytes);
        FT_CHECK(pc->written_bytes < 0 || (long long)r->p.unique_write_bytes == pc->written_bytes,
                 "%s: %llu distinct bytes written, want %lld", pc->kernel,
                 (unsigned long long)r->p.unique_write_bytes, pc->written_bytes);
        FT_CHECK((long long)r->p.barriers == pc->barriers, "%s: %llu barriers, want %lld",
                 pc->kernel, (unsigned long long)r->p.barriers, pc->barriers);
        /* L1 wavefronts, a line each: the strided load's 32 lanes a line apart, its store's
         * one row; float4's 512 bytes, four lines each way. */
        if (strcmp(pc->kernel, "strided") == 0)
            FT_CHECK(r->p.t[FT_EMU_GLD].lines == 32 && r->p.t[FT_EMU_GST].lines == 1,
                     "strided: %llu and %llu lines", (unsigned long long)r->p.t[FT_EMU_GLD].lines,
                     (unsigned long long)r->p.t[FT_EMU_GST].lines);
        if (strcmp(pc->kernel, "vec4") == 0)
            FT_CHECK(r->p.t[FT_EMU_GLD].lines == 4 && r->p.t[FT_EMU_GST].lines == 4,
                     "vec4: %llu and %llu lines", (unsigned long long)r->p.t[FT_EMU_GLD].lines,
                     (unsigned long long)r->p.t[FT_EMU_GST].lines);
        if (pc->line) {
            const ft_emu_site *s = site_of(r, FT_EMU_GLD);
            FT_CHECK(s && strstr(s->where, pc->line), "%s: the load's line '%s', want %s",
                     pc->kernel, s ? s->where : "(no site)", pc->line);
        }
        dump_on_failure(r, before);
        ft_dev_emu_records_free(r, 1);
    }
}

static void test_barriers_and_results(void) {
    float *h = malloc(NX * sizeof *h), *out = malloc(NX * sizeof *out);
    for (int i = 0; i < NX; i++)
        h[i] = 0.5f + (float)i;
    ft_err err = {0};
    FT_CHECK(ft_dev_copy(dev, dx, h, NX * sizeof *h, FT_COPY_H2D, &err) == FT_OK, "%s", err.msg);
    int before = ft_test_failures;
    ft_dev_emu_launch_record *r = run("barriers", 3, 64);
    FT_CHECK(r->p.barriers == 9, "barriers: %llu, want 3 blocks x 3",
             (unsigned long long)r->p.barriers);
    FT_CHECK(r->p.blocks == 3 && r->p.warps == 6, "%llu blocks, %llu warps",
             (unsigned long long)r->p.blocks, (unsigned long long)r->p.warps);
    check_traffic("barriers load", &r->p.t[FT_EMU_GLD], 6, 192, 24, 24, 0);
    dump_on_failure(r, before);
    ft_dev_emu_records_free(r, 1);
    FT_CHECK(ft_dev_copy(dev, out, dy, NX * sizeof *out, FT_COPY_D2H, &err) == FT_OK, "%s",
             err.msg);
    int bad = 0;
    for (int b = 0; b < 3; b++)
        for (int t = 0; t < 64; t++)
            bad += out[b * 64 + t] != h[b * 64 + 63 - t];
    FT_CHECK(bad == 0, "barriers: %d wrong results with the profile on", bad);
    free(h);
    free(out);
}

/* The request arithmetic alone. */
static void test_arithmetic(void) {
    uintptr_t a[32];
    unsigned lane[32];
    uint64_t u, ideal;
    for (int i = 0; i < 32; i++)
        a[i] = 4096 + 2 * (uintptr_t)i, lane[i] = (unsigned)i; /* bf16, consecutive */
    ft_emu_sectors(a, 32, 2, &u, &ideal);
    FT_CHECK(u == 2 && ideal == 2, "bf16 row: %llu sectors, ideal %llu", (unsigned long long)u,
             (unsigned long long)ideal);
    for (int i = 0; i < 32; i++)
        a[i] = 4096 + 4 + 4 * (uintptr_t)i; /* misaligned by one float */
    ft_emu_sectors(a, 32, 4, &u, &ideal);
    FT_CHECK(u == 5 && ideal == 4, "misaligned: %llu sectors, ideal %llu", (unsigned long long)u,
             (unsigned long long)ideal);
    /* L1 wavefronts: the 128-byte lines. The misaligned row spans 4100..4231: two lines; an
     * aligned one, one; 16 bytes a lane, 512 bytes: four; a stride of a line, 32; 8-byte
     * accesses straddling a line's end count both lines. */
    FT_CHECK(ft_emu_lines(a, 32, 4) == 2, "misaligned: %llu lines",
             (unsigned long long)ft_emu_lines(a, 32, 4));
    for (int i = 0; i < 32; i++)
        a[i] = 4096 + 4 * (uintptr_t)i;
    FT_CHECK(ft_emu_lines(a, 32, 4) == 1, "aligned float row: one line");
    for (int i = 0; i < 32; i++)
        a[i] = 4096 + 16 * (uintptr_t)i;
    FT_CHECK(ft_emu_lines(a, 32, 16) == 4, "16 B a lane: four lines");
    for (int i = 0; i < 32; i++)
        a[i] = 4096 + 128 * (uintptr_t)i;
    FT_CHECK(ft_emu_lines(a, 32, 4) == 32, "a line apart: 32 lines");
    a[0] = 4096 + 124;
    FT_CHECK(ft_emu_lines(a, 1, 8) == 2, "straddling: two lines");
    for (int i = 0; i < 32; i++)
        a[i] = 4096; /* a broadcast */
    ft_emu_sectors(a, 32, 4, &u, &ideal);
    FT_CHECK(u == 1 && ideal == 1, "broadcast: %llu sectors", (unsigned long long)u);
    ft_emu_wavefronts(a, lane, 32, 4, &u, &ideal);
    FT_CHECK(u == 1 && ideal == 1, "shared broadcast: %llu wavefronts", (unsigned long long)u);
    for (int i = 0; i < 32; i++)
        a[i] = 8 * (uintptr_t)i; /* stride 2 words: 2-way conflict */
    ft_emu_wavefronts(a, lane, 32, 4, &u, &ideal);
    FT_CHECK(u == 2 && ideal == 1, "stride 2: %llu wavefronts", (unsigned long long)u);
    for (int i = 0; i < 32; i++)
        a[i] = 8 * (uintptr_t)i; /* float2, consecutive: 2 half-warp phases, no conflict */
    ft_emu_wavefronts(a, lane, 32, 8, &u, &ideal);
    FT_CHECK(u == 2 && ideal == 2, "float2: %llu wavefronts", (unsigned long long)u);
    for (int i = 0; i < 16; i++)
        a[i] = 4 * (uintptr_t)i, lane[i] = 2 * (unsigned)i; /* even lanes only */
    ft_emu_wavefronts(a, lane, 16, 4, &u, &ideal);
    FT_CHECK(u == 1 && ideal == 1, "16 lanes: %llu wavefronts", (unsigned long long)u);
}

/* A sample's blocks: each stratum spread evenly over the z planes (a plane can be another
 * request of another length), within the grid and never twice the same block; a grid of one
 * plane keeps them all in plane 0. */
static void test_sample_pick(void) {
    const ft_emu_uint3 grids[] = {{8, 4, 4}, {8, 4, 16}, {3, 1, 5},  {64, 64, 1},
                                  {2, 2, 3}, {1, 1, 24}, {2, 1, 24}, {1, 4, 64}};
    for (size_t gi = 0; gi < sizeof grids / sizeof grids[0]; gi++) {
        ft_emu_uint3 g = grids[gi], b[64], in[64];
        int nb = 0, ni = 0;
        ft_emu_sample_pick(g, 16, 7, b, &nb, in, &ni);
        FT_CHECK(nb + ni > 0 && nb + ni <= 16, "grid %u,%u,%u: %d + %d blocks", g.x, g.y, g.z, nb,
                 ni);
        /* A grid with no interior (every x-y place on an edge) fills the sample from its planes:
         * a request's one block over 24 requests is a sample of 16, not of 1. */
        if (ft_emu_grid_interior(g) == 0) {
            uint64_t all = (uint64_t)g.x * g.y * g.z;
            FT_CHECK((uint64_t)(nb + ni) == (all < 16 ? all : 16),
                     "grid %u,%u,%u: %d blocks, want %llu", g.x, g.y, g.z, nb + ni,
                     (unsigned long long)(all < 16 ? all : 16));
        }
        const ft_emu_uint3 *strata[2] = {b, in};
        const int counts[2] = {nb, ni};
        for (int st = 0; st < 2; st++) {
            unsigned seen[64] = {0};
            int planes = 0;
            for (int j = 0; j < counts[st]; j++) {
                ft_emu_uint3 v = strata[st][j];
                FT_CHECK(v.x < g.x && v.y < g.y && v.z < g.z,
                         "grid %u,%u,%u: block %u,%u,%u outside", g.x, g.y, g.z, v.x, v.y, v.z);
                if (v.z < 64 && !seen[v.z]++) planes++;
                for (int k = 0; k < j; k++)
                    FT_CHECK(strata[st][k].x != v.x || strata[st][k].y != v.y ||
                                 strata[st][k].z != v.z,
                             "grid %u,%u,%u: block %u,%u,%u twice", g.x, g.y, g.z, v.x, v.y, v.z);
            }
            /* As many planes as the stratum has blocks, or every plane. */
            int want = counts[st] < (int)g.z ? counts[st] : (int)g.z;
            FT_CHECK(planes == want, "grid %u,%u,%u, stratum %d: %d planes of %d blocks, want %d",
                     g.x, g.y, g.z, st, planes, counts[st], want);
        }
    }
}

/* Each sampled block stands for as many blocks of its stratum as any other, so the sample
 * follows work that changes along the grid. A grid 64 x 64: the boundary's 8 blocks fall two on
 * each edge (the corners first, then the middles, put 3 on each and stood each corner for 31
 * blocks where it has 1 place); the interior's 8 fall one in each eighth of the interior's
 * columns and one in each eighth of its rows (8 independent draws fill one axis's eighths once
 * in about 400 seeds). */
static void test_sample_spread(void) {
    const ft_emu_uint3 g = {64, 64, 1};
    for (uint64_t seed = 1; seed <= 3; seed++) {
        ft_emu_uint3 b[64], in[64];
        int nb = 0, ni = 0;
        ft_emu_sample_pick(g, 16, seed, b, &nb, in, &ni);
        FT_CHECK(nb == 8 && ni == 8, "64 x 64: %d boundary and %d interior blocks", nb, ni);
        int edge[4] = {0}; /* top, right, bottom, left; a corner counts for both its edges */
        for (int j = 0; j < nb; j++) {
            edge[0] += b[j].y == 0;
            edge[1] += b[j].x == g.x - 1;
            edge[2] += b[j].y == g.y - 1;
            edge[3] += b[j].x == 0;
        }
        FT_CHECK(edge[0] == 2 && edge[1] == 2 && edge[2] == 2 && edge[3] == 2,
                 "seed %llu: boundary blocks per edge %d %d %d %d, want 2 each",
                 (unsigned long long)seed, edge[0], edge[1], edge[2], edge[3]);
        unsigned cols = 0, rows = 0; /* the eighths of the interior's 62 columns (rows) seen */
        for (int j = 0; j < ni && ni == 8; j++) {
            cols |= 1u << ((in[j].x - 1) * 8 / (g.x - 2));
            rows |= 1u << ((in[j].y - 1) * 8 / (g.y - 2));
        }
        FT_CHECK(cols == 0xffu && rows == 0xffu,
                 "seed %llu: interior columns' eighths %#x, rows' %#x, want every one",
                 (unsigned long long)seed, cols, rows);
    }
}

/* The walk round a grid of two columns visits both (a walk row by row took every block of one
 * column when the sample's size divided the rows: attention.decode's 2 splits x 8 kv heads);
 * and the planes are dealt apart from the places (dealt in their order, the plane rose with x:
 * a sample of splits x requests saw the early splits of the early requests only). */
static void test_sample_columns_and_planes(void) {
    const ft_emu_uint3 grids[] = {{2, 16, 1}, {2, 8, 4}};
    for (int gi = 0; gi < 2; gi++) {
        ft_emu_uint3 b[64], in[64];
        int nb = 0, ni = 0, col[2] = {0, 0};
        ft_emu_sample_pick(grids[gi], 8, 1, b, &nb, in, &ni);
        for (int j = 0; j < nb; j++)
            col[b[j].x & 1]++;
        FT_CHECK(ni == 0 && col[0] == 4 && col[1] == 4, "grid %u,%u,%u: %d and %d blocks a column",
                 grids[gi].x, grids[gi].y, grids[gi].z, col[0], col[1]);
    }
    for (uint64_t seed = 1; seed <= 3; seed++) {
        ft_emu_uint3 b[64], in[64];
        int nb = 0, ni = 0, rising = 1;
        ft_emu_sample_pick((ft_emu_uint3){64, 1, 64}, 16, seed, b, &nb, in, &ni);
        for (int j = 1; j < ni; j++)
            rising &= in[j].x > in[j - 1].x && in[j].z > in[j - 1].z;
        FT_CHECK(ni >= 8 && !rising, "seed %llu: the interior's planes rise with x",
                 (unsigned long long)seed);
    }
}

int main(void) {
    ft_err err = {0};
    test_arithmetic();
    test_sample_pick();
    test_sample_spread();
    test_sample_columns_and_planes();
    ft_status s = ft_dev_open(FT_DEV_EMU, 0, &dev, &err);
    FT_CHECK(s == FT_OK, "open: %s", err.msg);
    if (s != FT_OK) return ft_test_finish();
    FT_CHECK(ft_dev_emu_set_profile(dev, 1, &err) == FT_OK, "%s", err.msg);
    s = ft_dev_compile(dev, SAMPLE, NULL, 0, &mod, &err);
    FT_CHECK(s == FT_OK, "compiling the profile module: %s", err.msg);
    if (s != FT_OK) return ft_test_finish();
    FT_CHECK(ft_dev_alloc(dev, NX * sizeof(float), (void **)&dx, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(ft_dev_alloc(dev, NX * sizeof(float), (void **)&dy, &err) == FT_OK, "%s", err.msg);
    float h[NX];
    for (int i = 0; i < NX; i++)
        h[i] = 1.0f + (float)i / 7.0f;
    FT_CHECK(ft_dev_copy(dev, dx, h, sizeof h, FT_COPY_H2D, &err) == FT_OK, "%s", err.msg);
    test_planted();
    test_barriers_and_results();
    ft_dev_free(dev, dx);
    ft_dev_free(dev, dy);
    ft_dev_close(dev);
    return ft_test_finish();
}
