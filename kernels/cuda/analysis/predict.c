/* predict.c: the time model of predict.h: each limit a closed form over the device's figures
 * (specs.h), the time the largest of them.
 *
 * Nothing here knows where the inputs came from (the op's napkin math today, the emulator's
 * profile and the SASS mix when they are known): the same figures always give the same time,
 * so predictions can be compared across configurations of one call and against measurements.
 */
#include "predict.h"

#include <math.h>
#include <string.h>

const char *ft_bound_name(ft_bound b) {
    static const char *const names[FT_BOUND_N] = {"dram", "l2",      "shared", "l1",    "issue",
                                                  "fp32", "convert", "tensor", "launch"};
    return b >= 0 && b < FT_BOUND_N ? names[b] : "?";
}

/* A figure of the inputs or the device: negative, NaN or infinite counts as 0. */
static double pos(double x) { return isfinite(x) && x > 0 ? x : 0; }

/* work / rate, or 0 when the rate is unknown. */
static double per(double work, double rate) { return rate > 0 ? work / rate : 0; }

/* The device's warp size (32 where unknown). */
static double ws_of(const ft_gpu_spec *g) { return g->warp_size > 0 ? g->warp_size : 32; }

/* Resident warps on each SM that runs blocks: the occupancy, or what the grid brings. */
static double resident_warps(const ft_gpu_spec *g, const ft_predict_in *in, double blocks,
                             double sms_used) {
    const double ws = ws_of(g);
    double warps = in->warps_per_sm > 0 ? in->warps_per_sm : floor(pos(g->max_threads_per_sm) / ws);
    if (warps <= 0) warps = 64;
    if (in->blocks > 0 && in->block_threads > 0 && sms_used > 0) {
        double from_grid = ceil(blocks / sms_used) * ceil(in->block_threads / ws);
        if (from_grid < warps) warps = from_grid;
    }
    return warps;
}

ft_prediction ft_predict(const ft_gpu_spec *g, const ft_predict_in *in) {
    ft_prediction p;
    memset(&p, 0, sizeof p);
    p.bound = FT_BOUND_LAUNCH;
    if (!g || !in) return p;
    const double sms = g->sm_count > 0 ? g->sm_count : 1;
    const double blocks = in->blocks > 0 && isfinite(in->blocks) ? ceil(in->blocks) : sms;
    const double sms_used = blocks < sms ? blocks : sms;
    const double clock = pos(g->sm_clock_hz);
    const double dram = pos(in->dram_bytes);
    const double l2 = pos(in->l2_bytes) > 0 ? pos(in->l2_bytes) : dram;

    p.limit[FT_BOUND_DRAM] = per(dram, pos(g->mem_bw));
    p.limit[FT_BOUND_L2] = per(l2, pos(g->l2_bw));
    /* One wavefront (FT_SMEM_BYTES_PER_CLOCK bytes) per clock per SM. */
    double wavefronts_per_s =
        sms_used * clock * pos(g->smem_bytes_per_clock) / FT_SMEM_BYTES_PER_CLOCK;
    p.limit[FT_BOUND_SHARED] = per(pos(in->shared_wavefronts), wavefronts_per_s);
    p.limit[FT_BOUND_L1] =
        per(pos(in->shared_wavefronts) + pos(in->global_wavefronts), wavefronts_per_s);
    /* The LSU takes its instructions at its own rate, below the wavefronts' on GA10x and Ada. */
    double lsu = per(pos(in->lsu_instructions), sms_used * clock * pos(g->lsu_per_clock));
    if (lsu > p.limit[FT_BOUND_L1]) p.limit[FT_BOUND_L1] = lsu;
    double schedulers = g->schedulers_per_sm > 0 ? g->schedulers_per_sm : 4;
    double per_scheduler = resident_warps(g, in, blocks, sms_used) / schedulers;
    double hiding = per_scheduler / FT_PREDICT_WARPS_TO_HIDE;
    if (hiding > 1) hiding = 1;
    p.limit[FT_BOUND_ISSUE] =
        per(pos(in->warp_instructions), sms_used * schedulers * clock * hiding);
    /* A warp's FP32 instruction takes 32 / (lanes / schedulers) clocks of its scheduler's FP32
     * pipe (2 on the GA100's 16 lanes a sub-partition, 1 on 32). */
    p.limit[FT_BOUND_FP32] = per(pos(in->fp32_instructions) * ws_of(g),
                                 sms_used * pos(g->fp32_lanes_per_sm) * clock * hiding);
    p.limit[FT_BOUND_CONVERT] =
        per(pos(in->convert_instructions) * ws_of(g), sms_used * pos(g->converts_per_sm) * clock);
    p.limit[FT_BOUND_TENSOR] = per(pos(in->mma_flops), pos(g->bf16_flops) * sms_used / sms);
    p.limit[FT_BOUND_LAUNCH] = pos(g->launch_s);

    p.seconds = p.limit[FT_BOUND_LAUNCH];
    for (int b = 0; b < FT_BOUND_LAUNCH; b++)
        if (p.limit[b] > p.seconds) {
            p.seconds = p.limit[b];
            p.bound = (ft_bound)b;
        }
    return p;
}

ft_prediction ft_predict_sum(const ft_prediction *p, int n) {
    ft_prediction s;
    memset(&s, 0, sizeof s);
    s.bound = FT_BOUND_LAUNCH;
    double longest = -1;
    for (int i = 0; p && i < n; i++) {
        s.seconds += p[i].seconds;
        for (int b = 0; b < FT_BOUND_N; b++)
            s.limit[b] += p[i].limit[b];
        if (p[i].seconds > longest) {
            longest = p[i].seconds;
            s.bound = p[i].bound;
        }
    }
    return s;
}
