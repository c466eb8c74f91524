/* test_kfacts.c: the time model's inputs from an emulator profile and a SASS mix (kfacts.h), on
 * hand-made records whose inputs are known in closed form: distinct bytes to DRAM, sectors to L2,
 * wavefronts to shared memory, straight-line code once per warp and the loops' requests times
 * their instructions per memory instruction to issue, mma.sync count x 4096 to the tensor cores; a GEMM's operands and FLOPs; the ratios
 * of a kernel with and without a loop, and with no SASS at all. */
#include <string.h>

#include "cuda/analysis/kfacts.h"
#include "ft_test.h"

/* A kernel of 100 instructions (5 LDG, 3 STG, 6 LDS, 20 FP32, 2 conversions) whose hot loop has
 * 60: 4 LDG, 2 STG (32 bytes a thread), 6 LDS, 15 FP32. */
static ft_kfacts kernel_with_loop(void) {
    ft_kfacts f;
    memset(&f, 0, sizeof f);
    strcpy(f.name, "k");
    f.has_sass = 1;
    f.sass.mix.total = 100;
    f.sass.mix.count[FT_SASS_LDG] = 5;
    f.sass.mix.count[FT_SASS_STG] = 3;
    f.sass.mix.count[FT_SASS_LDS] = 6;
    f.sass.mix.global_bytes = 64;
    f.sass.mix.count[FT_SASS_FP32] = 20;
    f.sass.mix.count[FT_SASS_CONVERT] = 2;
    f.sass.nloops = f.sass.loops_found = 1;
    ft_sass_loop *l = &f.sass.loops[0];
    l->first = 10, l->last = 69, l->depth = 1, l->own_memory = 12;
    l->mix.total = 60;
    l->mix.count[FT_SASS_LDG] = 4;
    l->mix.count[FT_SASS_STG] = 2;
    l->mix.count[FT_SASS_LDS] = 6;
    l->mix.global_bytes = 32;
    l->mix.count[FT_SASS_FP32] = 15;
    f.occ.blocks_per_sm = 2;
    f.occ.warps_per_sm = 32;
    return f;
}

static void test_ratios(void) {
    ft_kfacts f = kernel_with_loop();
    FT_CHECK_NEAR(ft_kfacts_instructions_per_request(&f), 60.0 / 12, 1e-12);
    FT_CHECK_NEAR(ft_kfacts_instructions_per_byte(&f), 60.0 / 32, 1e-12);
    f.sass.nloops = f.sass.loops_found = 0; /* no loop: the whole body */
    FT_CHECK_NEAR(ft_kfacts_instructions_per_request(&f), 100.0 / 14, 1e-12);
    FT_CHECK_NEAR(ft_kfacts_instructions_per_byte(&f), 100.0 / 64, 1e-12);
    f.has_sass = 0;
    FT_CHECK(ft_kfacts_instructions_per_request(&f) == 0, "no SASS: 0");
    FT_CHECK(ft_kfacts_instructions_per_request(NULL) == 0, "no facts: 0");
}

static void test_record(void) {
    ft_dev_emu_launch_record r;
    memset(&r, 0, sizeof r);
    r.p.t[FT_EMU_GLD] =
        (ft_emu_traffic){.requests = 100, .units = 400, .bytes = 12800, .lines = 100};
    r.p.t[FT_EMU_GST] = (ft_emu_traffic){.requests = 50, .units = 200, .bytes = 6400, .lines = 60};
    r.p.t[FT_EMU_SLD] = (ft_emu_traffic){.requests = 30, .units = 90};
    r.p.t[FT_EMU_SST] = (ft_emu_traffic){.requests = 20, .units = 20};
    r.p.unique_read_bytes = 12800, r.p.unique_write_bytes = 6400;
    r.p.coll[FT_EMU_COLL_MMA] = 10;
    r.p.blocks = 7;
    r.p.block = (ft_emu_uint3){128, 2, 1};
    ft_kfacts f = kernel_with_loop();
    ft_predict_in in = ft_predict_in_of_record(&r, &f);
    FT_CHECK(in.dram_bytes == 19200, "dram: the distinct bytes (%g)", in.dram_bytes);
    FT_CHECK(in.l2_bytes == 600 * 32, "l2: sectors x 32 (%g)", in.l2_bytes);
    FT_CHECK(in.shared_wavefronts == 110, "shared: wavefronts (%g)", in.shared_wavefronts);
    FT_CHECK(in.global_wavefronts == 160, "L1: the global requests' lines (%g)",
             in.global_wavefronts);
    /* 7 blocks of 8 warps: the 40 straight-line instructions (1 LDG, 1 STG) run once per warp
     * that reaches them: 56 of the 56 LDGs and 50 of the 56 STGs were issued, so 106/112 of
     * 56 x 40. The LDGs past the straight line's (44 of 100) are the loop's: 60 instructions for
     * 32 bytes a thread, over the 5632 bytes those 44 requests moved, 32 lanes a warp
     * instruction (its shared loads are among the 60). Shared stores and mma, which the SASS
     * does not show, count one instruction a request. */
    FT_CHECK_NEAR(in.warp_instructions, 56 * 40 * 106.0 / 112 + 60.0 / 32 * 5632 / 32 + 20 + 10,
                  1e-9);
    /* Of them FP32: 5 a warp on the straight line, 15 in each of the loop's 5632 / 32 / 32 runs
     * (one per 32 bytes a thread moves). */
    FT_CHECK_NEAR(in.fp32_instructions, 56 * 5 * 106.0 / 112 + 15 * 5632.0 / 32 / 32, 1e-9);
    FT_CHECK_NEAR(in.convert_instructions, 56 * 2 * 106.0 / 112, 1e-9); /* straight line only */
    /* The LSU's: the straight line's LDG and STG, the loop's 12 memory instructions a run, and
     * the 20 shared stores counted one a request (not the mma). */
    FT_CHECK_NEAR(in.lsu_instructions, 56 * 2 * 106.0 / 112 + 12 * 5632.0 / 32 / 32 + 20, 1e-9);
    /* A loop that reads shared memory only: the straight line now holds all 5 LDGs and 3 STGs,
     * of which 150 of 448 were issued; the 30 shared loads, at the loop's 60 / 6. */
    f.sass.loops[0].mix.count[FT_SASS_LDG] = f.sass.loops[0].mix.count[FT_SASS_STG] = 0;
    f.sass.loops[0].mix.global_bytes = 0;
    in = ft_predict_in_of_record(&r, &f);
    FT_CHECK_NEAR(in.warp_instructions, 56 * 40 * 150.0 / 448 + 30 * 10.0 + 20 + 10, 1e-9);
    FT_CHECK(in.shared_wavefronts == 110 && in.l2_bytes == 600 * 32,
             "no kind issued fewer times than the source asked: %g, %g", in.shared_wavefronts,
             in.l2_bytes);
    FT_CHECK(in.mma_flops == 10 * 4096, "tensor: 10 mma.sync m16n8k16 (%g)", in.mma_flops);
    FT_CHECK(in.blocks == 7 && in.block_threads == 256 && in.warps_per_sm == 32,
             "geometry and occupancy: %g blocks, %d threads, %d warps/SM", in.blocks,
             in.block_threads, in.warps_per_sm);
    /* Blocks of 40 threads: two warps of 20 live lanes each, 14 warps. The straight line's LDG
     * and STG were issued by all 14 (100 and 50 requests); the loop's runs are the 86 LDGs' and
     * 36 STGs' 15616 bytes over 32 bytes a thread and the 20 lanes each request had, not 32: a
     * warp of 20 threads issues every instruction of the loop as a full one does. */
    f = kernel_with_loop();
    r.p.block = (ft_emu_uint3){20, 2, 1};
    r.p.t[FT_EMU_GLD].lanes = 100 * 20, r.p.t[FT_EMU_GST].lanes = 50 * 20;
    in = ft_predict_in_of_record(&r, &f);
    FT_CHECK_NEAR(in.warp_instructions, 14 * 40 + 60.0 * 15616 / 20 / 32 + 20 + 10, 1e-9);
    FT_CHECK_NEAR(in.fp32_instructions, 14 * 5 + 15.0 * 15616 / 20 / 32, 1e-9);
    /* The same warps, full: the loop runs 20/32 as often. */
    r.p.t[FT_EMU_GLD].lanes = 100 * 32, r.p.t[FT_EMU_GST].lanes = 50 * 32;
    in = ft_predict_in_of_record(&r, &f);
    FT_CHECK_NEAR(in.warp_instructions, 14 * 40 + 60.0 * 15616 / 32 / 32 + 20 + 10, 1e-9);
    r.p.t[FT_EMU_GLD].lanes = r.p.t[FT_EMU_GST].lanes = 0;
    r.p.block = (ft_emu_uint3){128, 2, 1};
    /* No loop, and the source reads shared memory three times for each LDS the compiler
     * kept (the rest held in registers): the 6 LDSs once per warp, 336 of the 1008 requests,
     * so a third of their wavefronts; all 100 instructions of the 56 warps in the share of
     * the 784 memory instructions issued (100 + 50 + 336). */
    f = kernel_with_loop();
    f.sass.nloops = f.sass.loops_found = 0;
    r.p.t[FT_EMU_SLD] = (ft_emu_traffic){.requests = 1008, .units = 2016};
    in = ft_predict_in_of_record(&r, &f);
    FT_CHECK_NEAR(in.warp_instructions, 56 * 100 * 486.0 / 784 + 20 + 10, 1e-9);
    FT_CHECK_NEAR(in.shared_wavefronts, 2016.0 / 3 + 20, 1e-9);
    FT_CHECK(in.l2_bytes == 600 * 32, "global requests under the straight line's: all kept");
    in = ft_predict_in_of_record(&r, NULL); /* no facts: one instruction a request */
    FT_CHECK(in.warp_instructions == 1188 && in.warps_per_sm == 0, "no facts: %g, %d",
             in.warp_instructions, in.warps_per_sm);

    memset(&r, 0, sizeof r);
    r.gemm_flops = 2.0 * 64 * 64 * 64, r.gemm_bytes = 3 * 64 * 64 * 2.0, r.gemm_bf16 = 1;
    in = ft_predict_in_of_record(&r, NULL);
    FT_CHECK(in.mma_flops == r.gemm_flops && in.dram_bytes == r.gemm_bytes &&
                 in.warp_instructions == 0,
             "a bf16 GEMM on the tensor cores");
    r.gemm_bf16 = 0;
    in = ft_predict_in_of_record(&r, NULL);
    FT_CHECK(in.mma_flops == 0 && in.warp_instructions == r.gemm_flops / 64 &&
                 in.fp32_instructions == in.warp_instructions,
             "an f32 GEMM as FFMAs: %g", in.warp_instructions);
}

int main(void) {
    FT_RUN(test_ratios);
    FT_RUN(test_record);
    return ft_test_finish();
}
