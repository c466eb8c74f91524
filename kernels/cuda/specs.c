/* specs.c: the device table and the occupancy calculator (see specs.h).
 *
 * Numbers come from NVIDIA's documents, cited per entry: the product datasheets (SMs, memory,
 * bandwidth, tensor throughput), the architecture whitepapers, and the per-architecture tuning
 * guides (shared memory per SM and per block). Tensor throughput is dense (the datasheets print
 * the 2:4-sparse figure, twice the dense one, with an asterisk) and with fp32 accumulation,
 * since that is what every GEMM of this project computes.
 */
#include "specs.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define KIB ((size_t)1024)
#define MIB (KIB * 1024)

/* How every architecture of the table (sm_80 and later) allocates registers and shared memory
 * (CUDA programming guide, "Technical Specifications per Compute Capability"; the occupancy
 * calculator): also what a present device of these architectures is given. */
#define FT_SM80_UNITS                                                                              \
    .reg_alloc_unit = 256, .sub_partitions = 4, .smem_alloc_unit = 128,                            \
    .smem_reserved_per_block = 1 * KIB

/* What the time model (predict.h) takes the same on every architecture of the table: four
 * warp schedulers per SM, one per sub-partition, each issuing one warp instruction a clock (the
 * A100, H100 and Ada whitepapers' SM diagrams), the shared memory's wavefront a clock, the
 * type conversions' rate (specs.h), the launch cost (specs.h). */
#define FT_SM80_ISSUE                                                                              \
    .schedulers_per_sm = 4, .smem_bytes_per_clock = FT_SMEM_BYTES_PER_CLOCK,                       \
    .converts_per_sm = FT_CONVERTS_PER_CLOCK, .launch_s = FT_GPU_LAUNCH_S

/* Limits every architecture of the table shares (the same guide). */
#define FT_SM80_PLUS                                                                               \
    .warp_size = 32, .max_threads_per_block = 1024, .regs_per_sm = 65536, .regs_per_block = 65536, \
    .max_regs_per_thread = 255, .smem_per_block = 48 * KIB, FT_SM80_UNITS, FT_SM80_ISSUE

/* A device's boost SM clock, and its L2 bandwidth by the rule of specs.h at that clock. Where a
 * datasheet prints no clock, it is the one its FP32 figure implies, to 10 MHz: FP32 FLOP/s = SMs
 * x 128 lanes (64 on the A100) x 2 (an FMA) x clock (test_cuda_specs checks each against its
 * datasheet's FP32 figure). */
#define FT_CLOCK(hz) .sm_clock_hz = (hz), .l2_bw = FT_L2_BYTES_PER_CLOCK * (hz)

/* An architecture: its name and compute capability, threads and blocks per SM, shared memory
 * per SM and per block (opt-in), KiB, FP32 lanes and LSU instructions a clock per SM; the limits
 * all share. */
#define FT_ARCH(name, major, minor, threads, blocks, smem_kib, optin_kib, fp32_lanes, lsu)         \
    .arch = name, .cc_major = major, .cc_minor = minor, .max_threads_per_sm = threads,             \
    .max_blocks_per_sm = blocks, .smem_per_sm = (smem_kib)*KIB,                                    \
    .smem_per_block_optin = (optin_kib)*KIB, .fp32_lanes_per_sm = fp32_lanes,                      \
    .lsu_per_clock = lsu, FT_SM80_PLUS

/* Each architecture's per-SM limits, from its tuning guide; its FP32 lanes per SM, from its
 * whitepaper (each datasheet's FP32 figure is SMs x lanes x 2 x clock: test_cuda_specs); its
 * LSU's instructions per clock (specs.h). Ampere: up to 164 KB shared memory per SM, 163 KB per
 * block, 32 blocks and 2048 threads per SM; GA100 has 64 FP32 lanes per SM. */
#define FT_ARCH_SM80 FT_ARCH("sm_80", 8, 0, 2048, 32, 164, 163, 64, FT_LSU_PER_CLOCK_DC)
/* GA10x (compute capability 8.6): 100 KB shared memory per SM, 99 KB per block, 16 blocks and
 * 1536 threads per SM; 128 FP32 lanes per SM (GA102 whitepaper: each sub-partition's second
 * datapath runs FP32 or INT32). */
#define FT_ARCH_SM86 FT_ARCH("sm_86", 8, 6, 1536, 16, 100, 99, 128, FT_LSU_PER_CLOCK_GA10X)
/* Ada: 100 KB shared memory per SM, 99 KB per block, 24 blocks and 1536 threads per SM; 128
 * FP32 lanes per SM. */
#define FT_ARCH_SM89 FT_ARCH("sm_89", 8, 9, 1536, 24, 100, 99, 128, FT_LSU_PER_CLOCK_GA10X)
/* Hopper: 228 KB shared memory per SM, 227 KB per block, 32 blocks and 2048 threads per SM; 128
 * FP32 lanes per SM. */
#define FT_ARCH_SM90A FT_ARCH("sm_90a", 9, 0, 2048, 32, 228, 227, 128, FT_LSU_PER_CLOCK_DC)
/* Blackwell: 228 KB shared memory per SM, 227 KB per block, 32 blocks and 2048 threads per SM;
 * 128 FP32 lanes per SM. */
#define FT_ARCH_SM100A FT_ARCH("sm_100a", 10, 0, 2048, 32, 228, 227, 128, FT_LSU_PER_CLOCK_DC)

/* One row a device: its name, aliases and model string, its architecture, then its
 * datasheet's numbers: SMs, L2 bytes, memory bytes, DRAM bandwidth (bytes/s), dense bf16
 * FLOP/s, boost clock (Hz). (Laid out by hand, a line a device past the column limit, so the
 * table reads as one; the formatter would break the rows.) */
#define FT_GPU(nm, al, mdl, arch_, sms, l2, mem, bw, bf16, clock_hz)                               \
    {.name = nm, .aliases = al, .model = mdl, arch_, .sm_count = sms, .l2_bytes = l2,              \
     .mem_bytes = (size_t)(mem), .mem_bw = bw, .bf16_flops = bf16, FT_CLOCK(clock_hz)}
/* clang-format off */
static const ft_gpu_spec specs[] = {
    /* A100 SXM4 80GB. NVIDIA A100 datasheet: 80 GB HBM2e, 2,039 GB/s, BF16 Tensor Core
     * 312 TFLOPS (624 with sparsity). A100 whitepaper: 108 SMs, 40 MB L2, boost clock
     * 1410 MHz (FP32 19.5 TFLOPS = 108 x 64 x 2 x 1.41 GHz). */
    FT_GPU("a100", "a100-sxm a100-80gb a100-sxm4", "NVIDIA A100-SXM4-80GB", FT_ARCH_SM80, 108, 40 * MIB, 80e9, 2039e9, 312e12, 1410e6),
    /* H100 SXM5 80GB. NVIDIA H100 datasheet: 80 GB HBM3, 3.35 TB/s, BF16 Tensor Core
     * 1,979 TFLOPS with sparsity (989.5 dense), FP32 67 TFLOPS: a 1.98 GHz boost clock.
     * H100 whitepaper: 132 SMs in the SXM5 part, 50 MB L2. */
    FT_GPU("h100", "h100-sxm h100-sxm5 h100-80gb", "NVIDIA H100 80GB HBM3", FT_ARCH_SM90A, 132, 50 * MIB, 80e9, 3.35e12, 989.5e12, 1980e6),
    /* H200 SXM 141GB. NVIDIA H200 datasheet: 141 GB HBM3e, 4.8 TB/s, BF16 Tensor Core
     * 1,979 TFLOPS with sparsity (989.5 dense), FP32 67 TFLOPS (1.98 GHz, as the H100's).
     * The same GH100 SMs as the H100 SXM5 (132 SMs)
     * but 60 MiB of L2, as the CUDA runtime reports on an H200 (checked by
     * test_cuda_occupancy). */
    FT_GPU("h200", "h200-sxm h200-141gb", "NVIDIA H200", FT_ARCH_SM90A, 132, 60 * MIB, 141e9, 4.8e12, 989.5e12, 1980e6),
    /* L40S. NVIDIA L40S datasheet: 18,176 CUDA cores (142 SMs of 128), 48 GB GDDR6, 864 GB/s,
     * BF16 Tensor Core 362.05 TFLOPS (733 with sparsity), 96 MB L2, FP32 91.6 TFLOPS (a
     * 2.52 GHz boost clock). */
    FT_GPU("l40s", "l40-s", "NVIDIA L40S", FT_ARCH_SM89, 142, 96 * MIB, 48e9, 864e9, 362.05e12, 2520e6),
    /* GeForce RTX 4090. Ada Lovelace whitepaper (appendix, RTX 4090 column): 128 SMs, 72 MB L2,
     * 24 GB GDDR6X at 21 Gbps on 384 bits (1,008 GB/s), peak BF16 tensor with FP32 accumulate
     * 165.2 TFLOPS dense (330.4 with sparsity; GeForce parts run fp32 accumulation at half the
     * fp16-accumulate rate), boost clock 2520 MHz. */
    FT_GPU("rtx4090", "4090 rtx-4090 geforce-rtx-4090", "NVIDIA GeForce RTX 4090", FT_ARCH_SM89, 128, 72 * MIB, 24e9, 1008e9, 165.2e12, 2520e6),
    /* B200 (HGX B200, 180 GB). NVIDIA HGX B200 datasheet, per GPU: 180 GB HBM3e, 8 TB/s,
     * FP16/BF16 Tensor Core 4.5 PFLOPS with sparsity (2.25 dense), FP32 75 TFLOPS (a
     * 1.98 GHz boost clock at 148 SMs). The SM count (148) and L2
     * (126 MB) are what the CUDA runtime reports for a B200; the datasheet does not print
     * them. */
    FT_GPU("b200", "b200-sxm hgx-b200", "NVIDIA B200", FT_ARCH_SM100A, 148, 126 * MIB, 180e9, 8e12, 2.25e15, 1980e6),
    /* A100 PCIe 40GB. NVIDIA A100 datasheet (PCIe column): 40 GB HBM2, 1,555 GB/s, BF16 Tensor
     * Core 312 TFLOPS (624 with sparsity), FP32 19.5 TFLOPS. A100 whitepaper: the same GA100 of
     * 108 SMs and 40 MB L2 as the SXM4 part, boost clock 1410 MHz. The device of the FAIR
     * benchmark hub's A100 landscapes. */
    FT_GPU("a100-pcie", "a100-pcie-40gb a100-40gb", "NVIDIA A100-PCIE-40GB", FT_ARCH_SM80, 108, 40 * MIB, 40e9, 1555e9, 312e12, 1410e6),
    /* RTX A4000. NVIDIA RTX A4000 datasheet: 6,144 CUDA cores (48 SMs of 128), 16 GB GDDR6,
     * 448 GB/s, FP32 19.2 TFLOPS (a 1.56 GHz boost clock), Tensor 153.4 TFLOPS with sparsity
     * (76.7 dense: 48 SMs x 4 tensor cores x 128 FMA x 2 x 1.56 GHz; the professional GA10x
     * parts accumulate in fp32 at the full rate). NVIDIA Ampere GA102 whitepaper: GA104 has
     * 4 MB of L2. */
    FT_GPU("rtx-a4000", "a4000 rtxa4000", "NVIDIA RTX A4000", FT_ARCH_SM86, 48, 4 * MIB, 16e9, 448e9, 76.7e12, 1560e6),
    /* RTX A6000. NVIDIA RTX A6000 datasheet: 10,752 CUDA cores (84 SMs of 128), 48 GB GDDR6,
     * 768 GB/s, FP32 38.7 TFLOPS (a 1.80 GHz boost clock), Tensor 309.7 TFLOPS with sparsity
     * (154.8 dense). GA102 whitepaper: 6 MB of L2. */
    FT_GPU("rtx-a6000", "a6000 rtxa6000", "NVIDIA RTX A6000", FT_ARCH_SM86, 84, 6 * MIB, 48e9, 768e9, 154.8e12, 1800e6),
};
/* clang-format on */
enum { NSPECS = sizeof specs / sizeof specs[0] };

int ft_gpu_spec_count(void) { return NSPECS; }

const ft_gpu_spec *ft_gpu_spec_at(int i) { return i >= 0 && i < NSPECS ? &specs[i] : NULL; }

/* Is `name` one of the space-separated words of `list` (case-insensitively)? */
static int in_words(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        while (*p == ' ')
            p++;
        size_t w = strcspn(p, " ");
        if (w == n && w > 0 && strncasecmp(p, name, n) == 0) return 1;
        p += w;
    }
    return 0;
}

const ft_gpu_spec *ft_gpu_spec_find(const char *name) {
    if (!name || !*name) return NULL;
    for (int i = 0; i < NSPECS; i++)
        if (strcasecmp(specs[i].name, name) == 0 || in_words(specs[i].aliases, name) ||
            strcasecmp(specs[i].model, name) == 0)
            return &specs[i];
    return NULL;
}

/* "sm_90a" -> 90 and 'a'; 0 when the text is not an architecture. */
static int parse_arch(const char *arch, char *suffix) {
    int v = 0, digits = 0;
    if (!arch || strncasecmp(arch, "sm_", 3) != 0) return 0;
    const char *p = arch + 3;
    for (; *p >= '0' && *p <= '9'; p++, digits++)
        if ((v = v * 10 + (*p - '0')) > 10000) return 0;
    if (digits < 2) return 0;
    *suffix = 0;
    if (*p == 'a' || *p == 'f') *suffix = *p++;
    return *p ? 0 : v;
}

const ft_gpu_spec *ft_gpu_spec_for_arch(const char *arch) {
    char sx = 0, sy = 0;
    int v = parse_arch(arch, &sx);
    if (!v) return NULL;
    for (int i = 0; i < NSPECS; i++)
        if (parse_arch(specs[i].arch, &sy) == v) return &specs[i];
    return NULL;
}

const char *ft_gpu_spec_names(void) {
    static char buf[256];
    if (!buf[0]) {
        size_t k = 0;
        for (int i = 0; i < NSPECS && k < sizeof buf; i++)
            k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", i ? ", " : "", specs[i].name);
    }
    return buf;
}

ft_status ft_gpu_spec_from_props(const ft_dev_props *p, ft_gpu_spec *out, ft_err *err) {
    if (!p || !out) return ft_err_set(err, FT_EINVAL, "ft_gpu_spec_from_props: NULL argument");
    if (p->cc_major < 8)
        return ft_err_set(err, FT_EUNSUPPORTED,
                          "%s has compute capability %d.%d; flaretune's occupancy model starts at "
                          "8.0",
                          p->name, p->cc_major, p->cc_minor);
    /* Per-SM block slots by compute capability (CUDA programming guide, "Technical
     * Specifications per Compute Capability"). */
    int blocks = 32;
    /* The LSU's rate (specs.h): half on the non-datacenter parts of 8.x. */
    double lsu =
        p->cc_major == 8 && p->cc_minor != 0 ? FT_LSU_PER_CLOCK_GA10X : FT_LSU_PER_CLOCK_DC;
    if (p->cc_major == 8 && p->cc_minor == 9)
        blocks = 24;
    else if (p->cc_major == 8 && p->cc_minor != 0)
        blocks = 16;
    else if (p->cc_major == 10 && p->cc_minor == 1)
        blocks = 24;
    else if (p->cc_major == 11 || p->cc_major >= 12)
        blocks = 24;
    *out = (ft_gpu_spec){
        .name = p->name,
        .aliases = "",
        .model = p->name,
        .arch = p->arch,
        .cc_major = p->cc_major,
        .cc_minor = p->cc_minor,
        .sm_count = p->sm_count,
        .warp_size = p->warp_size > 0 ? p->warp_size : 32,
        .max_threads_per_block = p->max_threads_per_block,
        .max_threads_per_sm = p->max_threads_per_sm,
        .max_blocks_per_sm = blocks,
        .regs_per_sm = p->regs_per_sm,
        .regs_per_block = p->regs_per_sm < 65536 ? p->regs_per_sm : 65536,
        .max_regs_per_thread = p->max_regs_per_thread,
        .smem_per_sm = p->smem_per_sm,
        .smem_per_block = p->smem_per_block,
        .smem_per_block_optin = p->smem_per_block_optin,
        .l2_bytes = p->l2_bytes,
        .mem_bytes = p->mem_bytes,
        FT_SM80_UNITS,
        FT_SM80_ISSUE,
        .lsu_per_clock = lsu,
        FT_CLOCK(p->clock_khz * 1e3),
    };
    return FT_OK;
}

void ft_gpu_spec_props(const ft_gpu_spec *s, ft_dev_props *p) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", s->model);
    snprintf(p->arch, sizeof p->arch, "%s", s->arch);
    p->cc_major = s->cc_major;
    p->cc_minor = s->cc_minor;
    p->sm_count = s->sm_count;
    p->warp_size = s->warp_size;
    p->max_threads_per_block = s->max_threads_per_block;
    p->max_threads_per_sm = s->max_threads_per_sm;
    p->regs_per_sm = s->regs_per_sm;
    p->max_regs_per_thread = s->max_regs_per_thread;
    p->smem_per_block = s->smem_per_block;
    p->smem_per_block_optin = s->smem_per_block_optin;
    p->smem_per_sm = s->smem_per_sm;
    p->l2_bytes = s->l2_bytes;
    p->mem_bytes = s->mem_bytes;
    p->clock_khz = (int)(s->sm_clock_hz / 1e3);
}

/* ---- occupancy --------------------------------------------------------------------------------
 */

static int div_up(int a, int b) { return (a + b - 1) / b; }
static size_t round_up(size_t a, size_t b) { return b ? (a + b - 1) / b * b : a; }
static int min_int(int a, int b) { return a < b ? a : b; }

ft_status ft_cuda_occupancy(const ft_gpu_spec *s, int threads_per_block, int regs_per_thread,
                            size_t smem_per_block, ft_occupancy *o, ft_err *err) {
    if (!s || !o) return ft_err_set(err, FT_EINVAL, "ft_cuda_occupancy: NULL argument");
    memset(o, 0, sizeof *o);
    if (threads_per_block <= 0)
        return ft_err_set(err, FT_EINVAL, "occupancy: %d threads per block (must be positive)",
                          threads_per_block);
    if (regs_per_thread < 0)
        return ft_err_set(err, FT_EINVAL, "occupancy: %d registers per thread (must be >= 0)",
                          regs_per_thread);
    if (smem_per_block > ((size_t)1 << 40))
        return ft_err_set(err, FT_EINVAL, "occupancy: %zu bytes of shared memory per block",
                          smem_per_block);
    const int ws = s->warp_size;
    const int max_warps = s->max_threads_per_sm / ws;
    /* Registers and warps below stay far from overflow: threads are capped first. */
    const int threads = threads_per_block > s->max_threads_per_block ? s->max_threads_per_block + 1
                                                                     : threads_per_block;
    const int warps = div_up(threads, ws);

    /* Warp slots. */
    o->by_warps = threads_per_block > s->max_threads_per_block ? 0 : max_warps / warps;
    /* Block slots. */
    o->by_blocks = s->max_blocks_per_sm;
    /* Registers: allocated per warp in units; each sub-partition holds its share of the file
     * and whole warps; the hardware also checks a block against the per-block limit as if its
     * warps were spread evenly over the sub-partitions. */
    int regs = regs_per_thread > 1024 ? 1024 : regs_per_thread;
    int regs_warp = (int)round_up((size_t)regs * (size_t)ws, (size_t)s->reg_alloc_unit);
    o->regs_per_block = regs_warp * warps;
    int assumed = regs_warp * (int)round_up((size_t)warps, (size_t)s->sub_partitions);
    if (regs_per_thread > s->max_regs_per_thread || o->regs_per_block > s->regs_per_block ||
        assumed > s->regs_per_block)
        o->by_regs = 0;
    else if (regs_warp == 0)
        o->by_regs = INT_MAX;
    else
        o->by_regs = (s->regs_per_sm / s->sub_partitions / regs_warp) * s->sub_partitions / warps;
    /* Shared memory: the block's bytes plus the driver's reserve, in allocation units, against
     * the opt-in per-block limit (the launcher opts in when a kernel needs more than the
     * default) and the SM at its largest carveout. */
    o->smem_per_block = round_up(smem_per_block + s->smem_reserved_per_block, s->smem_alloc_unit);
    if (o->smem_per_block > s->smem_per_block_optin + s->smem_reserved_per_block)
        o->by_smem = 0;
    else if (o->smem_per_block == 0)
        o->by_smem = INT_MAX;
    else {
        size_t b = s->smem_per_sm / o->smem_per_block;
        o->by_smem = b > INT_MAX ? INT_MAX : (int)b;
    }

    int blocks = min_int(min_int(o->by_warps, o->by_regs), min_int(o->by_smem, o->by_blocks));
    o->blocks_per_sm = blocks;
    o->limits =
        (blocks == o->by_warps ? FT_OCC_WARPS : 0u) | (blocks == o->by_regs ? FT_OCC_REGS : 0u) |
        (blocks == o->by_smem ? FT_OCC_SMEM : 0u) | (blocks == o->by_blocks ? FT_OCC_BLOCKS : 0u);
    o->warps_per_sm = blocks * warps;
    o->fraction = max_warps > 0 ? (double)o->warps_per_sm / max_warps : 0.0;
    return FT_OK;
}

const char *ft_occ_limit_name(unsigned limits) {
    if (limits & FT_OCC_WARPS) return "warps";
    if (limits & FT_OCC_REGS) return "registers";
    if (limits & FT_OCC_SMEM) return "shared memory";
    if (limits & FT_OCC_BLOCKS) return "blocks";
    return "none";
}

/* ---- pruning before timing ------------------------------------------------------------------ */

void ft_fmt_bytes_kib(size_t bytes, char *buf, size_t n) {
    if (bytes < KIB)
        snprintf(buf, n, "%zu B", bytes);
    else if (bytes % KIB == 0)
        snprintf(buf, n, "%zu KiB", bytes / KIB);
    else
        snprintf(buf, n, "%.1f KiB", (double)bytes / (double)KIB);
}

/* Write one line into why and return 0 (not fit). */
static int reject(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int reject(char *why, size_t n, const char *fmt, ...) {
    if (why && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, n, fmt, ap);
        va_end(ap);
    }
    return 0;
}

int ft_cuda_check_kernel(const ft_gpu_spec *s, const ft_kernel_info *k, int block_threads,
                         size_t dyn_smem, char *why, size_t n) {
    if (why && n) why[0] = '\0';
    if (!s || !k) return reject(why, n, "no device spec or no kernel resources");
    if (block_threads <= 0 || block_threads > s->max_threads_per_block)
        return reject(why, n, "launches %d threads per block, the device allows 1 to %d",
                      block_threads, s->max_threads_per_block);
    if (k->max_threads > 0 && block_threads > k->max_threads)
        return reject(why, n, "launches %d threads per block, the kernel allows %d", block_threads,
                      k->max_threads);
    if (k->spill_stores > 0 || k->spill_loads > 0) {
        if (k->spill_stores == k->spill_loads)
            return reject(why, n, "spills %d bytes", k->spill_stores);
        return reject(why, n, "spills %d bytes (%d bytes stored, %d loaded)",
                      k->spill_stores > k->spill_loads ? k->spill_stores : k->spill_loads,
                      k->spill_stores, k->spill_loads);
    }
    if (k->regs > s->max_regs_per_thread)
        return reject(why, n, "uses %d registers per thread, the device allows %d", k->regs,
                      s->max_regs_per_thread);
    size_t smem = k->smem_static + dyn_smem;
    if (smem > s->smem_per_block_optin) {
        char need[32], have[32];
        ft_fmt_bytes_kib(smem, need, sizeof need);
        ft_fmt_bytes_kib(s->smem_per_block_optin, have, sizeof have);
        return reject(why, n, "needs %s of shared memory, the device allows %s per block", need,
                      have);
    }
    ft_occupancy o;
    if (ft_cuda_occupancy(s, block_threads, k->regs, smem, &o, NULL))
        return reject(why, n, "invalid launch: %d threads, %d registers", block_threads, k->regs);
    if (o.blocks_per_sm == 0) {
        if (o.by_regs == 0)
            return reject(why, n,
                          "0 blocks fit per SM: %d threads x %d registers take %d registers, "
                          "a block may have %d",
                          block_threads, k->regs, o.regs_per_block, s->regs_per_block);
        return reject(why, n, "0 blocks fit per SM (limited by %s)", ft_occ_limit_name(o.limits));
    }
    return 1;
}

int ft_cuda_check_module(const ft_gpu_spec *s, const ft_cuda_module_spec *m,
                         const ft_kernel_info *info, char *why, size_t n) {
    if (why && n) why[0] = '\0';
    if (!s || !m || !info) return reject(why, n, "no device spec, module or kernel resources");
    for (int i = 0; i < m->nkernels; i++) {
        char r[256];
        if (!ft_cuda_check_kernel(s, &info[i], m->kernels[i].block_threads, m->kernels[i].dyn_smem,
                                  r, sizeof r))
            return reject(why, n, "%s: %s", m->kernels[i].name ? m->kernels[i].name : "?", r);
    }
    return 1;
}
