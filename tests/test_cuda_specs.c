/* test_cuda_specs.c: the device table and the occupancy calculator (kernels/cuda/specs.c).
 *
 * Every occupancy case below is worked out by hand in its comment from the architecture's
 * numbers (64K registers in 4 sub-partitions, allocated per warp in units of 256; shared memory
 * with a 1 KiB reserve per block, in units of 128 bytes; 64 warp slots and 32 block slots per
 * SM on sm_80/sm_90, 48 and 24 on sm_89), so a change to the calculator that disagrees with the
 * CUDA occupancy calculator shows up here. Needs no toolkit and no GPU.
 */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "cuda/specs.h"
#include "ft_test.h"

static ft_occupancy occ(const char *dev, int threads, int regs, size_t smem) {
    ft_occupancy o;
    ft_err err = {0};
    const ft_gpu_spec *s = ft_gpu_spec_find(dev);
    FT_CHECK(s != NULL, "no device %s", dev);
    memset(&o, 0, sizeof o);
    if (s) FT_CHECK(ft_cuda_occupancy(s, threads, regs, smem, &o, &err) == FT_OK, "%s", err.msg);
    return o;
}

static void test_full_occupancy(void) {
    /* 256 threads = 8 warps; 32 regs -> 1024 per warp -> 16 warps per sub-partition -> 64 per
     * SM -> 8 blocks; warp slots 64 / 8 = 8; shared memory 228 KiB / 1 KiB reserve = 228. */
    ft_occupancy o = occ("h100", 256, 32, 0);
    FT_CHECK(o.blocks_per_sm == 8, "blocks %d", o.blocks_per_sm);
    FT_CHECK(o.warps_per_sm == 64, "warps %d", o.warps_per_sm);
    FT_CHECK_NEAR(o.fraction, 1.0, 1e-12);
    FT_CHECK(o.by_warps == 8 && o.by_regs == 8 && o.by_smem == 228 && o.by_blocks == 32,
             "by warps %d regs %d smem %d blocks %d", o.by_warps, o.by_regs, o.by_smem,
             o.by_blocks);
    FT_CHECK(o.limits == (FT_OCC_WARPS | FT_OCC_REGS), "limits %#x", o.limits);
    FT_CHECK(strcmp(ft_occ_limit_name(o.limits), "warps") == 0, "%s", ft_occ_limit_name(o.limits));
    FT_CHECK(o.smem_per_block == 1024, "smem per block %zu", o.smem_per_block);
    FT_CHECK(o.regs_per_block == 8192, "regs per block %d", o.regs_per_block);
    /* No registers at all: the register file sets no limit. */
    o = occ("h200", 256, 0, 0);
    FT_CHECK(o.by_regs == INT_MAX && o.blocks_per_sm == 8, "by_regs %d blocks %d", o.by_regs,
             o.blocks_per_sm);
}

static void test_register_limited(void) {
    /* 128 regs -> 4096 per warp -> 4 warps per sub-partition -> 16 per SM -> 2 blocks of 8
     * warps: 16 / 64 = 25%. */
    ft_occupancy o = occ("h100", 256, 128, 0);
    FT_CHECK(o.blocks_per_sm == 2, "blocks %d", o.blocks_per_sm);
    FT_CHECK(o.warps_per_sm == 16, "warps %d", o.warps_per_sm);
    FT_CHECK_NEAR(o.fraction, 0.25, 1e-12);
    FT_CHECK(o.limits == FT_OCC_REGS, "limits %#x", o.limits);
    FT_CHECK(strcmp(ft_occ_limit_name(o.limits), "registers") == 0, "name");
    /* 40 regs -> 1280 per warp -> 12 warps per sub-partition (16384/1280 = 12.8) -> 48 per SM
     * -> 6 blocks of 8 warps: 48 / 64 = 75%. */
    o = occ("a100", 256, 40, 0);
    FT_CHECK(o.blocks_per_sm == 6 && o.limits == FT_OCC_REGS, "blocks %d limits %#x",
             o.blocks_per_sm, o.limits);
    FT_CHECK_NEAR(o.fraction, 0.75, 1e-12);
    /* Rounding to the unit: 33 regs -> 1056 -> 1280 per warp, the same as 40. */
    o = occ("a100", 256, 33, 0);
    FT_CHECK(o.blocks_per_sm == 6, "blocks %d", o.blocks_per_sm);
}

static void test_smem_limited(void) {
    /* 100 KiB + 1 KiB reserve = 101 KiB per block; 228 / 101 = 2 blocks of 4 warps: 8 / 64. */
    ft_occupancy o = occ("h100", 128, 32, 100 * 1024);
    FT_CHECK(o.blocks_per_sm == 2 && o.limits == FT_OCC_SMEM, "blocks %d limits %#x",
             o.blocks_per_sm, o.limits);
    FT_CHECK(o.smem_per_block == 101 * 1024, "smem %zu", o.smem_per_block);
    FT_CHECK_NEAR(o.fraction, 0.125, 1e-12);
    /* A100: 48 KiB + 1 KiB = 49 KiB; 164 / 49 = 3 blocks. */
    o = occ("a100", 128, 32, 48 * 1024);
    FT_CHECK(o.blocks_per_sm == 3 && o.limits == FT_OCC_SMEM, "blocks %d", o.blocks_per_sm);
    /* Allocation unit: 1 byte + 1 KiB = 1025 -> 1152 bytes; 233472 / 1152 = 202 (below the
     * 32-block and warp limits only with 32 threads: 64 warp slots and 32 block slots). */
    o = occ("h100", 32, 16, 1);
    FT_CHECK(o.smem_per_block == 1152 && o.by_smem == 202, "smem %zu by_smem %d",
             o.smem_per_block, o.by_smem);
    /* The largest block the device allows: 227 KiB + 1 KiB = 228 KiB: exactly one per SM. */
    o = occ("h200", 128, 32, 227 * 1024);
    FT_CHECK(o.blocks_per_sm == 1 && o.limits == FT_OCC_SMEM, "blocks %d", o.blocks_per_sm);
    /* One byte more does not launch. */
    o = occ("h200", 128, 32, 227 * 1024 + 1);
    FT_CHECK(o.blocks_per_sm == 0 && o.by_smem == 0 && o.limits == FT_OCC_SMEM, "blocks %d",
             o.blocks_per_sm);
    /* Ada: 100 KiB per SM, 99 KiB per block. */
    o = occ("l40s", 128, 32, 99 * 1024);
    FT_CHECK(o.blocks_per_sm == 1, "blocks %d", o.blocks_per_sm);
    o = occ("rtx4090", 128, 32, 99 * 1024 + 1);
    FT_CHECK(o.blocks_per_sm == 0, "blocks %d", o.blocks_per_sm);
}

static void test_block_limited(void) {
    /* One-warp blocks with few registers: warp slots allow 64, registers 128, shared memory
     * 228, block slots 32: 32 blocks, 32 warps, 50%. */
    ft_occupancy o = occ("h100", 32, 16, 0);
    FT_CHECK(o.blocks_per_sm == 32 && o.limits == FT_OCC_BLOCKS, "blocks %d limits %#x",
             o.blocks_per_sm, o.limits);
    FT_CHECK_NEAR(o.fraction, 0.5, 1e-12);
    /* sm_89: 24 block slots of 48 warp slots: 50%. */
    o = occ("l40s", 32, 16, 0);
    FT_CHECK(o.blocks_per_sm == 24 && o.limits == FT_OCC_BLOCKS, "blocks %d", o.blocks_per_sm);
    FT_CHECK_NEAR(o.fraction, 0.5, 1e-12);
    /* sm_89: 512 threads = 16 warps; 48 / 16 = 3 blocks, full. */
    o = occ("rtx4090", 512, 32, 0);
    FT_CHECK(o.blocks_per_sm == 3 && o.warps_per_sm == 48, "blocks %d", o.blocks_per_sm);
    FT_CHECK_NEAR(o.fraction, 1.0, 1e-12);
}

static void test_register_and_thread_limits(void) {
    /* 255 regs -> 8160 -> 8192 per warp; 8 warps need 65536 = the per-block limit; 2 warps per
     * sub-partition -> 8 per SM -> 1 block, 12.5%. */
    ft_occupancy o = occ("h100", 256, 255, 0);
    FT_CHECK(o.blocks_per_sm == 1 && o.limits == FT_OCC_REGS, "blocks %d", o.blocks_per_sm);
    FT_CHECK_NEAR(o.fraction, 0.125, 1e-12);
    /* 256 registers per thread is beyond the architecture's 255. */
    o = occ("h100", 32, 256, 0);
    FT_CHECK(o.blocks_per_sm == 0 && o.by_regs == 0, "blocks %d", o.blocks_per_sm);
    /* 1024 threads x 64 regs = 65536: one block, 50%. */
    o = occ("a100", 1024, 64, 0);
    FT_CHECK(o.blocks_per_sm == 1 && o.limits == FT_OCC_REGS, "blocks %d", o.blocks_per_sm);
    FT_CHECK_NEAR(o.fraction, 0.5, 1e-12);
    /* 1024 threads x 65 regs: 2080 -> 2304 per warp x 32 = 73728 > 65536: cannot launch. */
    o = occ("a100", 1024, 65, 0);
    FT_CHECK(o.blocks_per_sm == 0 && o.regs_per_block == 73728, "blocks %d regs %d",
             o.blocks_per_sm, o.regs_per_block);
    /* 1024 threads x 32 regs: 2 blocks, full. */
    o = occ("b200", 1024, 32, 0);
    FT_CHECK(o.blocks_per_sm == 2 && o.warps_per_sm == 64, "blocks %d", o.blocks_per_sm);
    /* 1025 threads per block is beyond every device. */
    o = occ("b200", 1025, 32, 0);
    FT_CHECK(o.blocks_per_sm == 0 && o.by_warps == 0 && (o.limits & FT_OCC_WARPS),
             "blocks %d", o.blocks_per_sm);
    /* A partial warp takes a whole warp slot: 48 threads = 2 warps. */
    o = occ("h100", 48, 32, 0);
    FT_CHECK(o.by_warps == 32 && o.blocks_per_sm == 32, "by_warps %d", o.by_warps);
}

static void test_bad_inputs(void) {
    const ft_gpu_spec *s = ft_gpu_spec_find("h100");
    ft_occupancy o;
    ft_err err = {0};
    FT_CHECK(ft_cuda_occupancy(s, 0, 32, 0, &o, &err) == FT_EINVAL, "0 threads");
    FT_CHECK(strstr(err.msg, "threads per block") != NULL, "message: %s", err.msg);
    FT_CHECK(ft_cuda_occupancy(s, -32, 32, 0, &o, &err) == FT_EINVAL, "negative threads");
    FT_CHECK(ft_cuda_occupancy(s, 128, -1, 0, &o, &err) == FT_EINVAL, "negative registers");
    FT_CHECK(strstr(err.msg, "registers") != NULL, "message: %s", err.msg);
    FT_CHECK(ft_cuda_occupancy(NULL, 128, 32, 0, &o, &err) == FT_EINVAL, "no spec");
    FT_CHECK(ft_cuda_occupancy(s, 128, 32, 0, NULL, NULL) == FT_EINVAL, "no output");
    FT_CHECK(strcmp(ft_occ_limit_name(0), "none") == 0, "empty limit");
}

static void test_lookup(void) {
    const char *names[] = {"a100", "h100", "h200", "l40s", "rtx4090", "b200", "a100-pcie",
                           "rtx-a4000", "rtx-a6000"};
    FT_CHECK(ft_gpu_spec_count() == 9, "%d specs", ft_gpu_spec_count());
    for (int i = 0; i < 9; i++) {
        const ft_gpu_spec *s = ft_gpu_spec_at(i);
        FT_CHECK(s && strcmp(s->name, names[i]) == 0, "spec %d", i);
    }
    FT_CHECK(ft_gpu_spec_at(9) == NULL && ft_gpu_spec_at(-1) == NULL, "out of range");
    /* A name or an architecture and the index of the spec it finds (-1: none). H100-SXM is an
     * alias; h10 and h100x, a prefix and a suffix, are no names; the model a device reports
     * (a Kernel Tuner cache's device_name) finds its row, part of it none; sm_86 finds the first
     * GA10x, sm_87 is in no entry. */
    typedef struct {
        const char *key;
        int at;
    } lookup;
    static const lookup by_name[] = {{"A4000", 7},
                                     {"a100-pcie-40gb", 6},
                                     {"H200", 2},
                                     {"h100", 1},
                                     {"H100-SXM", 1},
                                     {"RTX4090", 4},
                                     {"4090", 4},
                                     {"L40S", 3},
                                     {"h10", -1},
                                     {"h100x", -1},
                                     {"NVIDIA RTX A4000", 7},
                                     {"nvidia a100-pcie-40gb", 6},
                                     {"NVIDIA A100-SXM4-80GB", 0},
                                     {"NVIDIA RTX", -1}};
    static const lookup by_arch[] = {{"sm_80", 0},   {"sm_90a", 1}, {"sm_90", 1}, {"SM_89", 3},
                                     {"sm_100a", 5}, {"sm_86", 7},  {"sm_87", -1}};
    for (size_t i = 0; i < sizeof by_name / sizeof by_name[0]; i++)
        FT_CHECK(ft_gpu_spec_find(by_name[i].key) == ft_gpu_spec_at(by_name[i].at), "name %s",
                 by_name[i].key);
    FT_CHECK(ft_gpu_spec_find("") == NULL && ft_gpu_spec_find(NULL) == NULL, "empty");
    FT_CHECK(strcmp(ft_gpu_spec_find("a100")->arch, "sm_80") == 0, "a100 arch");
    for (size_t i = 0; i < sizeof by_arch / sizeof by_arch[0]; i++)
        FT_CHECK(ft_gpu_spec_for_arch(by_arch[i].key) == ft_gpu_spec_at(by_arch[i].at), "arch %s",
                 by_arch[i].key);
    FT_CHECK(ft_gpu_spec_for_arch("sm_9") == NULL && ft_gpu_spec_for_arch("90") == NULL &&
                 ft_gpu_spec_for_arch("sm_90b") == NULL && ft_gpu_spec_for_arch(NULL) == NULL,
             "not architectures");
    FT_CHECK(strstr(ft_gpu_spec_names(), "h200") && strstr(ft_gpu_spec_names(), "rtx4090"),
             "names: %s", ft_gpu_spec_names());
}

static void test_table_consistency(void) {
    for (int i = 0; i < ft_gpu_spec_count(); i++) {
        const ft_gpu_spec *s = ft_gpu_spec_at(i);
        FT_CHECK(ft_gpu_spec_for_arch(s->arch) != NULL, "%s arch %s", s->name, s->arch);
        FT_CHECK(s->smem_per_block_optin + s->smem_reserved_per_block <= s->smem_per_sm,
                 "%s smem", s->name);
        FT_CHECK(s->smem_per_block <= s->smem_per_block_optin, "%s smem default", s->name);
        FT_CHECK(s->max_threads_per_sm % s->warp_size == 0 && s->max_threads_per_block == 1024,
                 "%s threads", s->name);
        FT_CHECK(s->sm_count > 0 && s->l2_bytes > 0 && s->mem_bytes > 0, "%s sizes", s->name);
        FT_CHECK(s->mem_bw > 1e11 && s->bf16_flops > 5e13, "%s rates", s->name);
        FT_CHECK(s->regs_per_sm == 65536 && s->max_regs_per_thread == 255, "%s regs", s->name);
        /* The time model's figures: a boost clock of 1.4 to 2.6 GHz, four schedulers, an L2
         * faster than DRAM, 128 bytes of shared memory a clock, the launch cost. */
        FT_CHECK(s->sm_clock_hz >= 1.4e9 && s->sm_clock_hz <= 2.6e9, "%s clock %g", s->name,
                 s->sm_clock_hz);
        FT_CHECK(s->schedulers_per_sm == 4 && s->smem_bytes_per_clock == 128, "%s issue", s->name);
        FT_CHECK(s->l2_bw > s->mem_bw && s->l2_bw == FT_L2_BYTES_PER_CLOCK * s->sm_clock_hz,
                 "%s L2 %g", s->name, s->l2_bw);
        FT_CHECK(s->launch_s == FT_GPU_LAUNCH_S && s->launch_s > 1e-6 && s->launch_s < 5e-6,
                 "%s launch %g", s->name, s->launch_s);
        /* Every device runs a 1024-thread block of 32-register threads. */
        ft_occupancy o;
        FT_CHECK(ft_cuda_occupancy(s, 1024, 32, 0, &o, NULL) == FT_OK && o.blocks_per_sm >= 1,
                 "%s 1024 threads", s->name);
    }
}

/* The clocks reproduce each datasheet's FP32 figure (SMs x FP32 lanes x 2 x clock) and the
 * L2 rule its A100 figure (5120 bytes a clock at 1410 MHz). */
static void test_clocks(void) {
    const struct {
        const char *dev;
        int lanes;
        double fp32;
    } rows[] = {{"a100", 64, 19.5e12},  {"h100", 128, 67e12},      {"h200", 128, 67e12},
                {"l40s", 128, 91.6e12}, {"rtx4090", 128, 82.6e12}, {"b200", 128, 75e12},
                {"a100-pcie", 64, 19.5e12}, {"rtx-a4000", 128, 19.2e12}, {"rtx-a6000", 128, 38.7e12}};
    for (int i = 0; i < 9; i++) {
        const ft_gpu_spec *s = ft_gpu_spec_find(rows[i].dev);
        FT_CHECK(s->fp32_lanes_per_sm == rows[i].lanes, "%s: %d FP32 lanes per SM", s->name,
                 s->fp32_lanes_per_sm);
        FT_CHECK(s->converts_per_sm == 16, "%s: %d conversions a clock per SM", s->name,
                 s->converts_per_sm);
        double fp32 = s->sm_count * s->fp32_lanes_per_sm * 2.0 * s->sm_clock_hz;
        FT_CHECK(fabs(fp32 / rows[i].fp32 - 1) < 0.002, "%s: FP32 %g, datasheet %g", s->name, fp32,
                 rows[i].fp32);
    }
    FT_CHECK_NEAR(ft_gpu_spec_find("a100")->l2_bw, 7.2192e12, 1e6);
    FT_CHECK_NEAR(ft_gpu_spec_find("h200")->sm_clock_hz, 1.98e9, 1e6);
}

/* Spec to properties (what the emulator reports) and back (a device that is present). */
static void test_from_props(void) {
    const ft_gpu_spec *h = ft_gpu_spec_find("h100");
    ft_dev_props p;
    ft_gpu_spec_props(h, &p);
    FT_CHECK(strcmp(p.name, "NVIDIA H100 80GB HBM3") == 0 && strcmp(p.arch, "sm_90a") == 0 &&
                 p.cc_major == 9 && p.cc_minor == 0 && p.sm_count == 132 && p.warp_size == 32 &&
                 p.max_threads_per_block == 1024 && p.max_threads_per_sm == 2048 &&
                 p.regs_per_sm == 65536 && p.max_regs_per_thread == 255 &&
                 p.smem_per_block == 48 * 1024 && p.smem_per_block_optin == 227 * 1024 &&
                 p.smem_per_sm == 228 * 1024 && p.l2_bytes == (size_t)50 << 20 &&
                 p.mem_bytes == (size_t)80e9 && p.clock_khz == 1980000 && p.bus_width_bits == 0,
             "an H100's properties: %s, %s, %d SMs, %d kHz", p.name, p.arch, p.sm_count,
             p.clock_khz);
    ft_gpu_spec s;
    ft_err err = {0};
    FT_CHECK(ft_gpu_spec_from_props(&p, &s, &err) == FT_OK, "%s", err.msg);
    FT_CHECK(s.sm_clock_hz == 1.98e9 && s.schedulers_per_sm == 4 && s.l2_bw == 5120 * 1.98e9 &&
                 s.launch_s == FT_GPU_LAUNCH_S && s.mem_bw == 0 && s.lsu_per_clock == 1,
             "present device's figures: clock %g, L2 %g", s.sm_clock_hz, s.l2_bw);
    const int cases[][3] = {{256, 32, 0}, {256, 128, 0}, {128, 32, 100 * 1024}, {32, 16, 0}};
    for (int i = 0; i < 4; i++) {
        ft_occupancy a, b;
        ft_cuda_occupancy(h, cases[i][0], cases[i][1], (size_t)cases[i][2], &a, NULL);
        ft_cuda_occupancy(&s, cases[i][0], cases[i][1], (size_t)cases[i][2], &b, NULL);
        FT_CHECK(a.blocks_per_sm == b.blocks_per_sm && a.limits == b.limits, "case %d: %d vs %d",
                 i, a.blocks_per_sm, b.blocks_per_sm);
    }
    p.cc_major = 8;
    p.cc_minor = 6;
    FT_CHECK(ft_gpu_spec_from_props(&p, &s, &err) == FT_OK && s.max_blocks_per_sm == 16 &&
                 s.lsu_per_clock == 0.5,
             "sm_86 blocks %d, LSU %g a clock", s.max_blocks_per_sm, s.lsu_per_clock);
    /* Every device of the table has its architecture's LSU rate: half on GA10x and Ada. */
    for (int i = 0; i < ft_gpu_spec_count(); i++) {
        const ft_gpu_spec *g = ft_gpu_spec_at(i);
        double want = g->cc_major == 8 && g->cc_minor != 0 ? 0.5 : 1;
        FT_CHECK(g->lsu_per_clock == want, "%s: LSU %g a clock", g->name, g->lsu_per_clock);
    }
    p.cc_major = 7;
    p.cc_minor = 5;
    FT_CHECK(ft_gpu_spec_from_props(&p, &s, &err) == FT_EUNSUPPORTED, "sm_75");
    FT_CHECK(strstr(err.msg, "7.5") != NULL, "message: %s", err.msg);
}

static void test_check(void) {
    const ft_gpu_spec *s = ft_gpu_spec_find("h100");
    char why[256];
    ft_kernel_info k;
    memset(&k, 0, sizeof k);
    k.regs = 64;
    FT_CHECK(ft_cuda_check_kernel(s, &k, 256, 16 * 1024, why, sizeof why) == 1, "ok: %s", why);
    FT_CHECK(why[0] == '\0', "ok leaves no reason: %s", why);

    k.spill_stores = k.spill_loads = 24;
    FT_CHECK(ft_cuda_check_kernel(s, &k, 256, 0, why, sizeof why) == 0, "spills");
    FT_CHECK(strcmp(why, "spills 24 bytes") == 0, "why: %s", why);
    k.spill_loads = 16;
    FT_CHECK(ft_cuda_check_kernel(s, &k, 256, 0, why, sizeof why) == 0, "spills");
    FT_CHECK(strcmp(why, "spills 24 bytes (24 bytes stored, 16 loaded)") == 0, "why: %s", why);
    k.spill_stores = k.spill_loads = 0;

    k.smem_static = 16 * 1024;
    FT_CHECK(ft_cuda_check_kernel(s, &k, 256, 224 * 1024, why, sizeof why) == 0, "smem");
    FT_CHECK(strcmp(why, "needs 240 KiB of shared memory, the device allows 227 KiB per block") == 0,
             "why: %s", why);
    /* 120 KiB fits an H100 block but not an L40S one. */
    k.smem_static = 0;
    FT_CHECK(ft_cuda_check_kernel(s, &k, 256, 120 * 1024, why, sizeof why) == 1, "120 KiB: %s",
             why);
    FT_CHECK(ft_cuda_check_kernel(ft_gpu_spec_find("l40s"), &k, 256, 120 * 1024, why,
                                  sizeof why) == 0,
             "120 KiB on l40s");
    FT_CHECK(strcmp(why, "needs 120 KiB of shared memory, the device allows 99 KiB per block") == 0,
             "why: %s", why);

    k.regs = 65;
    FT_CHECK(ft_cuda_check_kernel(s, &k, 1024, 0, why, sizeof why) == 0, "registers");
    FT_CHECK(strncmp(why, "0 blocks fit per SM", 19) == 0 && strstr(why, "73728"), "why: %s",
             why);
    k.regs = 32;
    FT_CHECK(ft_cuda_check_kernel(s, &k, 2048, 0, why, sizeof why) == 0, "threads");
    FT_CHECK(strstr(why, "2048 threads per block") != NULL, "why: %s", why);
    FT_CHECK(ft_cuda_check_kernel(s, &k, 0, 0, why, sizeof why) == 0, "0 threads");
    k.max_threads = 128;
    FT_CHECK(ft_cuda_check_kernel(s, &k, 256, 0, why, sizeof why) == 0, "launch bounds");
    FT_CHECK(strstr(why, "the kernel allows 128") != NULL, "why: %s", why);
    k.max_threads = 0;
    k.regs = 300;
    FT_CHECK(ft_cuda_check_kernel(s, &k, 32, 0, why, sizeof why) == 0, "300 registers");
    FT_CHECK(strstr(why, "300 registers") != NULL, "why: %s", why);
    FT_CHECK(ft_cuda_check_kernel(NULL, &k, 32, 0, why, sizeof why) == 0, "no spec");

    /* A module: the reason names the kernel. */
    ft_cuda_module_spec m;
    memset(&m, 0, sizeof m);
    m.nkernels = 2;
    m.kernels[0].name = "first";
    m.kernels[0].block_threads = 128;
    m.kernels[1].name = "second";
    m.kernels[1].block_threads = 256;
    ft_kernel_info info[2];
    memset(info, 0, sizeof info);
    info[0].regs = info[1].regs = 40;
    FT_CHECK(ft_cuda_check_module(s, &m, info, why, sizeof why) == 1, "module ok: %s", why);
    info[1].spill_stores = info[1].spill_loads = 8;
    FT_CHECK(ft_cuda_check_module(s, &m, info, why, sizeof why) == 0, "module spills");
    FT_CHECK(strcmp(why, "second: spills 8 bytes") == 0, "why: %s", why);
}

static void test_fmt(void) {
    char b[32];
    ft_fmt_bytes_kib(0, b, sizeof b);
    FT_CHECK(strcmp(b, "0 B") == 0, "%s", b);
    ft_fmt_bytes_kib(512, b, sizeof b);
    FT_CHECK(strcmp(b, "512 B") == 0, "%s", b);
    ft_fmt_bytes_kib(227 * 1024, b, sizeof b);
    FT_CHECK(strcmp(b, "227 KiB") == 0, "%s", b);
    ft_fmt_bytes_kib(1536, b, sizeof b);
    FT_CHECK(strcmp(b, "1.5 KiB") == 0, "%s", b);
}

int main(void) {
    FT_RUN(test_full_occupancy);
    FT_RUN(test_register_limited);
    FT_RUN(test_smem_limited);
    FT_RUN(test_block_limited);
    FT_RUN(test_register_and_thread_limits);
    FT_RUN(test_bad_inputs);
    FT_RUN(test_lookup);
    FT_RUN(test_table_consistency);
    FT_RUN(test_clocks);
    FT_RUN(test_from_props);
    FT_RUN(test_check);
    FT_RUN(test_fmt);
    return ft_test_finish();
}
