/* test_predict.c: the time model (kernels/cuda/analysis/predict.c) against closed forms worked out
 * by hand from the H200's figures (specs.c: 132 SMs at 1.98 GHz, 4 schedulers, 4.8 TB/s of DRAM,
 * 5120 bytes a clock of L2, a wavefront a clock of shared memory, 128 FP32 lanes an SM,
 * 989.5 TFLOP/s of bf16 tensor throughput, 2.5 us a launch; the A100's 64 FP32 lanes for the
 * FP32 pipe), one case per bound, then properties: the sum of a sequence,
 * empty and hostile input, and that the time never falls when an input grows. Needs no GPU.
 */
#include <math.h>
#include <string.h>

#include "cuda/analysis/predict.h"
#include "ft_test.h"

static const ft_gpu_spec *h200(void) { return ft_gpu_spec_find("h200"); }

/* Issue slots of the whole H200 per second: 132 SMs x 4 schedulers x 1.98 GHz. */
#define H200_ISSUE (132 * 4 * 1.98e9)

static void check_bound(const ft_prediction *p, ft_bound want, double seconds) {
    FT_CHECK(p->bound == want, "bound %s, want %s", ft_bound_name(p->bound), ft_bound_name(want));
    FT_CHECK(fabs(p->seconds / seconds - 1) < 1e-9, "%s: %.9g s, want %.9g", ft_bound_name(want),
             p->seconds, seconds);
    FT_CHECK(p->limit[want] == p->seconds, "the bound's limit is the time");
}

static void test_dram(void) {
    /* 4.8e9 bytes at 4.8 TB/s: 1 ms; the same bytes through L2 at 5120 x 1.98e9 B/s. */
    ft_predict_in in = {.dram_bytes = 4.8e9};
    ft_prediction p = ft_predict(h200(), &in);
    check_bound(&p, FT_BOUND_DRAM, 1e-3);
    FT_CHECK_NEAR(p.limit[FT_BOUND_L2], 4.8e9 / (5120 * 1.98e9), 1e-15);
    FT_CHECK(p.limit[FT_BOUND_LAUNCH] == 2.5e-6, "launch %g", p.limit[FT_BOUND_LAUNCH]);
    /* Requested sectors beyond DRAM's: L2-bound when they cost more. */
    in.l2_bytes = 3 * 5120 * 1.98e9 * 1e-3;
    p = ft_predict(h200(), &in);
    check_bound(&p, FT_BOUND_L2, 3e-3);
}

static void test_issue_and_occupancy(void) {
    /* 1 ms of the H200's issue slots. At full occupancy (64 warps per SM, 16 per scheduler)
     * every slot issues; 16 warps (4 per scheduler) still hide the latency; 8 fill half the
     * slots, 4 a quarter; unknown occupancy (0) is full. */
    const struct {
        int warps;
        double seconds;
    } cases[] = {{64, 1e-3}, {16, 1e-3}, {8, 2e-3}, {4, 4e-3}, {0, 1e-3}};
    for (int k = 0; k < 5; k++) {
        ft_predict_in in = {.warp_instructions = H200_ISSUE * 1e-3, .warps_per_sm = cases[k].warps};
        ft_prediction p = ft_predict(h200(), &in);
        check_bound(&p, FT_BOUND_ISSUE, cases[k].seconds);
    }
}

static void test_fp32(void) {
    /* 1 ms of the H200's issue slots, all FFMA: 32 FP32 lanes a scheduler take a warp's FFMA a
     * clock, so the FP32 pipe ties with issue (and the tie goes to issue). */
    ft_predict_in in = {.warp_instructions = H200_ISSUE * 1e-3,
                        .fp32_instructions = H200_ISSUE * 1e-3};
    ft_prediction p = ft_predict(h200(), &in);
    check_bound(&p, FT_BOUND_ISSUE, 1e-3);
    FT_CHECK_NEAR(p.limit[FT_BOUND_FP32], 1e-3, 1e-15);
    /* The A100's 16 lanes a scheduler take two clocks a warp FFMA: 108 SMs x 4 x 1.41 GHz
     * issue slots' worth of FFMAs take 2 ms there, half of them 1 ms, as their issue. */
    const ft_gpu_spec *a100 = ft_gpu_spec_find("a100-pcie");
    double slots = 108 * 4 * 1.41e9 * 1e-3;
    ft_predict_in fa = {.warp_instructions = slots, .fp32_instructions = slots};
    p = ft_predict(a100, &fa);
    check_bound(&p, FT_BOUND_FP32, 2e-3);
    FT_CHECK_NEAR(p.limit[FT_BOUND_ISSUE], 1e-3, 1e-15);
    fa.fp32_instructions = slots / 2;
    p = ft_predict(a100, &fa);
    check_bound(&p, FT_BOUND_ISSUE, 1e-3);
    FT_CHECK_NEAR(p.limit[FT_BOUND_FP32], 1e-3, 1e-15);
}

static void test_convert(void) {
    /* 16 conversions a clock an SM: a warp's takes two clocks of the SM, so 132 x 1.98e9 / 2
     * warp conversions a second on the H200; 1 ms of them, among as many other instructions
     * (a quarter of the issue slots), is convert-bound. */
    double warp_converts = 132 * 1.98e9 / 2 * 1e-3;
    ft_predict_in in = {.warp_instructions = 2 * warp_converts,
                        .convert_instructions = warp_converts};
    ft_prediction p = ft_predict(h200(), &in);
    check_bound(&p, FT_BOUND_CONVERT, 1e-3);
    FT_CHECK_NEAR(p.limit[FT_BOUND_ISSUE], 2 * warp_converts / H200_ISSUE, 1e-15);
}

static void test_tensor_and_shared(void) {
    ft_predict_in in = {.mma_flops = 989.5e12 * 1e-3};
    ft_prediction p = ft_predict(h200(), &in);
    check_bound(&p, FT_BOUND_TENSOR, 1e-3);
    /* 132 SMs x 1.98e9 wavefronts a second: 1 ms of them. */
    ft_predict_in sh = {.shared_wavefronts = 132 * 1.98e9 * 1e-3};
    p = ft_predict(h200(), &sh);
    check_bound(&p, FT_BOUND_SHARED, 1e-3); /* the L1's equal limit: the tie goes to shared */
    FT_CHECK_NEAR(p.limit[FT_BOUND_L1], 1e-3, 1e-15);
    /* Half of them shared, half the lines of global requests, and as many again of global:
     * the L1's data stage carries both, 1.5 ms, shared memory alone 0.5 ms. */
    ft_predict_in l1 = {.shared_wavefronts = 132 * 1.98e9 * 0.5e-3,
                        .global_wavefronts = 132 * 1.98e9 * 1e-3};
    p = ft_predict(h200(), &l1);
    check_bound(&p, FT_BOUND_L1, 1.5e-3);
    FT_CHECK_NEAR(p.limit[FT_BOUND_SHARED], 0.5e-3, 1e-15);
}

static void test_lsu(void) {
    /* Conflict-free LDS.32: a wavefront and an LSU instruction each. The RTX A4000's LSU takes
     * half an instruction a clock (GA10x), so 48 SMs x 1.56 GHz of them take 2 ms there, where
     * their wavefronts take 1 ms; the A100's takes one a clock: 108 x 1.41 GHz take 1 ms, as
     * their wavefronts do. */
    const ft_gpu_spec *a4000 = ft_gpu_spec_find("rtx-a4000"), *a100 = ft_gpu_spec_find("a100-pcie");
    FT_CHECK(a4000 && a100 && a4000->lsu_per_clock == 0.5 && a100->lsu_per_clock == 1,
             "LSU rates: %g, %g", a4000 ? a4000->lsu_per_clock : -1,
             a100 ? a100->lsu_per_clock : -1);
    double n = 48 * 1.56e9 * 1e-3;
    ft_predict_in in = {.shared_wavefronts = n, .lsu_instructions = n};
    ft_prediction p = ft_predict(a4000, &in);
    check_bound(&p, FT_BOUND_L1, 2e-3);
    FT_CHECK_NEAR(p.limit[FT_BOUND_SHARED], 1e-3, 1e-15);
    n = 108 * 1.41e9 * 1e-3;
    in = (ft_predict_in){.shared_wavefronts = n, .lsu_instructions = n};
    p = ft_predict(a100, &in);
    FT_CHECK_NEAR(p.limit[FT_BOUND_L1], 1e-3, 1e-15);
    FT_CHECK_NEAR(p.limit[FT_BOUND_SHARED], 1e-3, 1e-15);
    /* LDS.128, four wavefronts an instruction: the wavefronts bound on both. */
    in.lsu_instructions = n / 4;
    p = ft_predict(a100, &in);
    FT_CHECK_NEAR(p.limit[FT_BOUND_L1], 1e-3, 1e-15);
    n = 48 * 1.56e9 * 1e-3;
    in = (ft_predict_in){.shared_wavefronts = n, .lsu_instructions = n / 4};
    p = ft_predict(a4000, &in);
    FT_CHECK_NEAR(p.limit[FT_BOUND_L1], 1e-3, 1e-15);
}

static void test_small_grid(void) {
    /* 10 blocks of 256 threads use 10 of the 132 SMs: the tensor cores of 10 SMs only. */
    ft_predict_in in = {.mma_flops = 989.5e12 * 1e-3, .blocks = 10, .block_threads = 256};
    ft_prediction p = ft_predict(h200(), &in);
    check_bound(&p, FT_BOUND_TENSOR, 1e-3 * 132 / 10);
    /* Issue on 10 SMs, each with one block of 8 warps (2 per scheduler: half its slots), though
     * the kernel's occupancy would allow 64. */
    ft_predict_in is = {.warp_instructions = 10 * 4 * 1.98e9 * 1e-3,
                        .blocks = 10,
                        .block_threads = 256,
                        .warps_per_sm = 64};
    p = ft_predict(h200(), &is);
    check_bound(&p, FT_BOUND_ISSUE, 2e-3);
    /* DRAM is the device's whatever the grid. */
    ft_predict_in dr = {.dram_bytes = 4.8e9, .blocks = 10, .block_threads = 256};
    p = ft_predict(h200(), &dr);
    check_bound(&p, FT_BOUND_DRAM, 1e-3);
    /* 264 blocks of 256 on 132 SMs: two blocks, 16 warps per SM, full issue. */
    ft_predict_in two = {
        .warp_instructions = H200_ISSUE * 1e-3, .blocks = 264, .block_threads = 256};
    p = ft_predict(h200(), &two);
    check_bound(&p, FT_BOUND_ISSUE, 1e-3);
}

static void test_launch_and_empty(void) {
    /* A few bytes: the launch. */
    ft_predict_in in = {
        .dram_bytes = 4096, .warp_instructions = 100, .blocks = 1, .block_threads = 32};
    ft_prediction p = ft_predict(h200(), &in);
    check_bound(&p, FT_BOUND_LAUNCH, 2.5e-6);
    /* Nothing at all: zeros but the launch, finite everywhere. */
    ft_predict_in empty;
    memset(&empty, 0, sizeof empty);
    p = ft_predict(h200(), &empty);
    check_bound(&p, FT_BOUND_LAUNCH, 2.5e-6);
    for (int b = 0; b < FT_BOUND_LAUNCH; b++)
        FT_CHECK(p.limit[b] == 0, "empty input: %s %g", ft_bound_name((ft_bound)b), p.limit[b]);
    /* No device or no input: all zeros. */
    p = ft_predict(NULL, &in);
    FT_CHECK(p.seconds == 0 && p.bound == FT_BOUND_LAUNCH, "no device: %g", p.seconds);
    p = ft_predict(h200(), NULL);
    FT_CHECK(p.seconds == 0, "no input: %g", p.seconds);
    /* Hostile figures count as 0: every result finite. */
    ft_predict_in bad = {.dram_bytes = NAN,
                         .l2_bytes = -1,
                         .shared_wavefronts = INFINITY,
                         .warp_instructions = -INFINITY,
                         .mma_flops = NAN,
                         .blocks = NAN,
                         .block_threads = -5,
                         .warps_per_sm = -3};
    p = ft_predict(h200(), &bad);
    FT_CHECK(p.seconds == 2.5e-6, "hostile input: %g", p.seconds);
    for (int b = 0; b < FT_BOUND_N; b++)
        FT_CHECK(isfinite(p.limit[b]), "hostile input: %s not finite", ft_bound_name((ft_bound)b));
    /* A device of unknown rates (0, as a present GPU's DRAM bandwidth): those limits are 0. */
    ft_gpu_spec unknown = *h200();
    unknown.mem_bw = unknown.bf16_flops = 0;
    ft_predict_in big = {.dram_bytes = 4.8e9, .mma_flops = 1e15};
    p = ft_predict(&unknown, &big);
    FT_CHECK(p.limit[FT_BOUND_DRAM] == 0 && p.limit[FT_BOUND_TENSOR] == 0 && p.bound == FT_BOUND_L2,
             "unknown rates: bound %s", ft_bound_name(p.bound));
}

static void test_sum(void) {
    ft_predict_in a = {.dram_bytes = 4.8e9}, b = {.mma_flops = 989.5e12 * 2e-3}, c = {0};
    ft_prediction p[3] = {ft_predict(h200(), &a), ft_predict(h200(), &b), ft_predict(h200(), &c)};
    ft_prediction s = ft_predict_sum(p, 3);
    FT_CHECK_NEAR(s.seconds, 1e-3 + 2e-3 + 2.5e-6, 1e-15);
    FT_CHECK(s.bound == FT_BOUND_TENSOR, "bound of the longest launch: %s", ft_bound_name(s.bound));
    FT_CHECK_NEAR(s.limit[FT_BOUND_DRAM], 1e-3, 1e-15);
    FT_CHECK_NEAR(s.limit[FT_BOUND_LAUNCH], 3 * 2.5e-6, 1e-18);
    s = ft_predict_sum(NULL, 0);
    FT_CHECK(s.seconds == 0 && s.bound == FT_BOUND_LAUNCH, "empty sequence: %g", s.seconds);
    s = ft_predict_sum(p, 0);
    FT_CHECK(s.seconds == 0, "no launches: %g", s.seconds);
}

static void test_names(void) {
    const char *want[] = {"dram", "l2",      "shared", "l1",    "issue",
                          "fp32", "convert", "tensor", "launch"};
    for (int b = 0; b < FT_BOUND_N; b++)
        FT_CHECK(strcmp(ft_bound_name((ft_bound)b), want[b]) == 0, "name %d: %s", b,
                 ft_bound_name((ft_bound)b));
    FT_CHECK(strcmp(ft_bound_name(FT_BOUND_N), "?") == 0, "out of range");
}

/* Growing any amount of work never lowers the time; more blocks or more resident warps never
 * raise it. Checked on every device over a grid of inputs. */
static void test_monotone(void) {
    const double scale[] = {0, 1e3, 1e6, 1e8, 1e10};
    for (int d = 0; d < ft_gpu_spec_count(); d++) {
        const ft_gpu_spec *g = ft_gpu_spec_at(d);
        for (int f = 0; f < 5; f++) {
            ft_predict_in base = {.dram_bytes = scale[f],
                                  .l2_bytes = 2 * scale[f],
                                  .shared_wavefronts = scale[f] / 64,
                                  .global_wavefronts = scale[f] / 128,
                                  .warp_instructions = scale[f] / 8,
                                  .fp32_instructions = scale[f] / 16,
                                  .convert_instructions = scale[f] / 256,
                                  .lsu_instructions = scale[f] / 32,
                                  .mma_flops = scale[f] * 100,
                                  .blocks = 50,
                                  .block_threads = 128,
                                  .warps_per_sm = 12};
            double t0 = ft_predict(g, &base).seconds;
            for (int k = 0; k < 9; k++) {
                ft_predict_in more = base;
                double *w[] = {
                    &more.dram_bytes,           &more.l2_bytes,          &more.shared_wavefronts,
                    &more.global_wavefronts,    &more.warp_instructions, &more.fp32_instructions,
                    &more.convert_instructions, &more.mma_flops,         &more.lsu_instructions};
                *w[k] = *w[k] * 3 + 1e4;
                FT_CHECK(ft_predict(g, &more).seconds >= t0, "%s: more of input %d is faster",
                         g->name, k);
            }
            double prev = INFINITY;
            for (double blocks = 1; blocks <= 2000; blocks = blocks * 1.7 + 1) {
                ft_predict_in in = base;
                in.blocks = blocks;
                double t = ft_predict(g, &in).seconds;
                FT_CHECK(t <= prev, "%s: %g blocks slower than fewer", g->name, blocks);
                prev = t;
            }
            prev = INFINITY;
            for (int w = 1; w <= 64; w++) {
                ft_predict_in in = base;
                in.warps_per_sm = w;
                double t = ft_predict(g, &in).seconds;
                FT_CHECK(t <= prev, "%s: %d warps per SM slower than fewer", g->name, w);
                prev = t;
            }
        }
    }
}

int main(void) {
    FT_RUN(test_dram);
    FT_RUN(test_issue_and_occupancy);
    FT_RUN(test_fp32);
    FT_RUN(test_convert);
    FT_RUN(test_tensor_and_shared);
    FT_RUN(test_lsu);
    FT_RUN(test_small_grid);
    FT_RUN(test_launch_and_empty);
    FT_RUN(test_sum);
    FT_RUN(test_names);
    FT_RUN(test_monotone);
    return ft_test_finish();
}
