/* test_t1_predict.c: a T1 kernel's time predicted from a sample of its grid (tuner/t1_run.c)
 * against the same prediction from every block of the grid emulated, on the hand-written
 * tests/data/t1/saxpy_tiled.json (a 1-D grid whose last block is partial) and stencil2d.json (a
 * 2-D grid, partial in x and y, blocks sharing a halo); the sample's
 * traffic, scaled by the blocks each stratum stands for, must give the whole launch's figures.
 * Also: the arguments' fill (never all zero), --arg overrides, and bad requests. */
#include <math.h>
#include <string.h>

#include "tuner/t1.h"
#include "tuner/t1_run.h"
#include "ft_test.h"

#define DATA FT_SOURCE_DIR "/tests/data/t1/"

static void near(double a, double b, double tol, const char *what) {
    FT_CHECK(fabs(a - b) <= tol * fabs(b) + 1e-12, "%s: sampled %.6g, whole %.6g", what, a, b);
}

/* The T1 file at path, the emulator and a bench of its arguments on it (seed 7): 1, or 0 with
 * everything released and the failure checked. */
static int open_bench(const char *path, ft_t1 **t, ft_dev **d, ft_t1_bench **b) {
    ft_err err = {0};
    FT_CHECK(ft_t1_load(path, NULL, t, &err) == FT_OK, "%s", err.msg);
    if (!*t) return 0;
    FT_CHECK(ft_dev_open(FT_DEV_EMU, 0, d, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(*d && ft_t1_bench_open(*t, *d, 7, b, &err) == FT_OK, "%s", err.msg);
    if (*b) return 1;
    if (*d) ft_dev_close(*d);
    ft_t1_free(*t);
    return 0;
}

static void test_sample_against_whole(void) {
    ft_t1 *t = NULL;
    ft_dev *d = NULL;
    ft_t1_bench *b = NULL;
    ft_err err = {0};
    if (!open_bench(DATA "saxpy_tiled.json", &t, &d, &b)) return;
    const ft_gpu_spec *g = ft_gpu_spec_find("a100-pcie");
    /* 10000 elements, 256 x 2 a block: 20 blocks, the last one 272 elements short of full */
    const char *cfgs[] = {"block_size_x=256,tile_size_x=2", "block_size_x=128,tile_size_x=4,use_ldg=1",
                          "block_size_x=64,tile_size_x=4,scale=0.5"};
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        ft_config c;
        FT_CHECK(ft_config_parse(&t->space, cfgs[i], &c, &err) == FT_OK, "%s", err.msg);
        ft_t1_prediction whole, part;
        FT_CHECK(ft_t1_predict(b, &c, g, 64, &whole, &err) == FT_OK, "%s: %s", cfgs[i], err.msg);
        FT_CHECK(ft_t1_predict(b, &c, g, 6, &part, &err) == FT_OK, "%s: %s", cfgs[i], err.msg);
        FT_CHECK(whole.sampled_boundary == whole.blocks && whole.sampled_interior == 0, "%s: whole %d of %lld",
                 cfgs[i], whole.sampled_boundary, whole.blocks);
        FT_CHECK(part.sampled_boundary == 2 && part.sampled_interior == 4, "%s: sample %d + %d", cfgs[i],
                 part.sampled_boundary, part.sampled_interior);
        /* one element a thread-iteration: y read and written, x read: 12 bytes an element */
        near(whole.in.dram_bytes, 10000.0 * 12, 0.05, "whole DRAM bytes");
        near(part.in.l2_bytes, whole.in.l2_bytes, 0.05, "L2 bytes");
        near(part.in.dram_bytes, whole.in.dram_bytes, 0.05, "DRAM bytes");
        near(part.in.warp_instructions, whole.in.warp_instructions, 0.05, "warp instructions");
        near(part.pred.seconds, whole.pred.seconds, 0.05, "predicted time");
        FT_CHECK(part.pred.seconds >= g->launch_s, "%s: below the launch cost", cfgs[i]);
    }
    /* a grid of more blocks than the sample: 10000 / 32 -> 313 blocks; a row has two boundary
     * blocks (its ends), the interior takes the other six places */
    ft_config c;
    ft_config_parse(&t->space, "block_size_x=32,tile_size_x=1", &c, &err);
    ft_t1_prediction p;
    FT_CHECK(ft_t1_predict(b, &c, g, 8, &p, &err) == FT_OK && p.blocks == 313 && p.sampled_boundary == 2 &&
                 p.sampled_interior == 6,
             "313 blocks: %d + %d (%s)", p.sampled_boundary, p.sampled_interior, err.msg);
    near(p.in.dram_bytes, 10000.0 * 12, 0.05, "313 blocks: DRAM bytes");
    ft_t1_bench_close(b);
    ft_dev_close(d);
    ft_t1_free(t);
}

/* The same on a 2-D grid, tests/data/t1/stencil2d.json: a 3x3 box filter over 100 x 60, whose
 * last column and row of blocks are partial and whose blocks share a halo. A sample of 8 blocks
 * (boundary and interior) against every block emulated. */
static void test_sample_against_whole_2d(void) {
    ft_t1 *t = NULL;
    ft_dev *d = NULL;
    ft_t1_bench *b = NULL;
    ft_err err = {0};
    if (!open_bench(DATA "stencil2d.json", &t, &d, &b)) return;
    const ft_gpu_spec *g = ft_gpu_spec_find("rtx-a4000");
    /* 7 x 8, 7 x 8 and 4 x 15 blocks: x is 100 = 6.25 or 3.125 blocks, y 60 = 7.5 or 15 */
    const char *cfgs[] = {"block_size_x=16,block_size_y=4,tile_size_y=2",
                          "block_size_x=16,block_size_y=8,tile_size_y=1",
                          "block_size_x=32,block_size_y=4,tile_size_y=1"};
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        ft_config c;
        FT_CHECK(ft_config_parse(&t->space, cfgs[i], &c, &err) == FT_OK, "%s", err.msg);
        ft_t1_prediction whole, part;
        FT_CHECK(ft_t1_predict(b, &c, g, 64, &whole, &err) == FT_OK, "%s: %s", cfgs[i], err.msg);
        FT_CHECK(ft_t1_predict(b, &c, g, 8, &part, &err) == FT_OK, "%s: %s", cfgs[i], err.msg);
        FT_CHECK(
            whole.sampled_boundary + whole.sampled_interior == whole.blocks &&
                part.sampled_boundary + part.sampled_interior == 8 && part.sampled_interior > 0,
            "%s: whole %d + %d of %lld, sample %d + %d", cfgs[i], whole.sampled_boundary,
            whole.sampled_interior, whole.blocks, part.sampled_boundary, part.sampled_interior);
        /* every output written once and every input read at least once: 4 + 4 bytes a pixel */
        FT_CHECK(whole.in.dram_bytes >= 100.0 * 60 * 8, "%s: whole DRAM bytes %.0f", cfgs[i],
                 whole.in.dram_bytes);
        /* (the distinct DRAM bytes are held to each buffer's size, which these grids reach
         * whether sampled or not: no check of the sample) */
        near(part.in.l2_bytes, whole.in.l2_bytes, 0.05, "2-D: L2 bytes");
        near(part.in.warp_instructions, whole.in.warp_instructions, 0.05, "2-D: warp instructions");
        near(part.pred.seconds, whole.pred.seconds, 0.05, "2-D: predicted time");
    }
    ft_t1_bench_close(b);
    ft_dev_close(d);
    ft_t1_free(t);
}

/* A grid with no interior (one or two columns, or two rows) draws the whole sample from its
 * boundary, every block distinct and in the grid; one with an interior keeps its strata. */
static void test_sample_narrow_grids(void) {
    const long long grids[][3] = {{1, 20000, 1}, {2, 5000, 1}, {10, 2, 1}, {20000, 1, 1}};
    for (size_t i = 0; i < sizeof grids / sizeof grids[0]; i++) {
        const long long *g = grids[i];
        ft_dim3 out[64];
        int n = ft_t1_sample_blocks(g, 16, out, 64);
        int bad = 0, dup = 0;
        for (int k = 0; k < n; k++) {
            bad += out[k].x >= g[0] || out[k].y >= g[1];
            for (int j = 0; j < k; j++)
                dup += out[j].x == out[k].x && out[j].y == out[k].y;
        }
        FT_CHECK(n == 16 && !bad && !dup,
                 "grid %lldx%lld: %d blocks sampled of 16 (%d outside, %d "
                 "twice)",
                 g[0], g[1], n, bad, dup);
    }
    /* A grid of no more blocks than wanted, in several planes too, is taken whole (the strata
     * left one of a 3 x 3 x 2 grid's 18 out of a sample of 64). */
    const long long small[3] = {3, 3, 2};
    ft_dim3 out[64];
    int n = ft_t1_sample_blocks(small, 64, out, 64), seen[18] = {0}, bad = 0;
    for (int k = 0; k < n; k++) {
        if (out[k].x >= 3 || out[k].y >= 3 || out[k].z >= 2 ||
            seen[(out[k].z * 3 + out[k].y) * 3 + out[k].x]++)
            bad++;
    }
    FT_CHECK(n == 18 && !bad, "grid 3x3x2: %d blocks of 18 (%d outside or twice)", n, bad);
}

static void test_args(void) {
    ft_t1 *t = NULL;
    ft_err err = {0};
    FT_CHECK(ft_t1_load(DATA "saxpy_tiled.json", NULL, &t, &err) == FT_OK, "%s", err.msg);
    if (!t) return;
    FT_CHECK(ft_t1_set_arg(t, "x=uint8:ProblemSize[0]*2:random:200", &err) == FT_OK, "%s", err.msg);
    FT_CHECK(t->args[1].type == FT_T1_UINT8 && t->args[1].elem_bytes == 1 && t->args[1].elems == 20000 &&
                 t->args[1].random && t->args[1].fill_value == 200,
             "override");
    FT_CHECK(ft_t1_set_arg(t, "nope=float:4", &err) == FT_EINVAL && strstr(err.msg, "no argument nope"), "%s",
             err.msg);
    FT_CHECK(ft_t1_set_arg(t, "n=int32:4", &err) == FT_EINVAL && strstr(err.msg, "scalar"), "%s", err.msg);
    FT_CHECK(ft_t1_set_arg(t, "x=half:4", &err) == FT_EINVAL && strstr(err.msg, "TYPE"), "%s", err.msg);
    FT_CHECK(ft_t1_set_arg(t, "x=float:0", &err) == FT_EINVAL && strstr(err.msg, "positive"), "%s", err.msg);
    FT_CHECK(ft_t1_set_arg(t, "x=float:4:sometimes", &err) == FT_EINVAL && strstr(err.msg, "random or constant"),
             "%s", err.msg);
    FT_CHECK(ft_t1_set_arg(t, "x=float:bogus_name", &err) != FT_OK && strstr(err.msg, "unknown name"), "%s",
             err.msg);
    FT_CHECK(ft_t1_set_arg(t, "x", &err) == FT_EINVAL, "no =");
    ft_t1_free(t);
}

int main(void) {
    FT_RUN(test_sample_narrow_grids);
    FT_RUN(test_args);
    FT_RUN(test_sample_against_whole);
    FT_RUN(test_sample_against_whole_2d);
    return ft_test_finish();
}
