/* kfacts.c: a configuration's kernels on a named GPU, known without running them (kfacts.h). */
#include "kfacts.h"

#include "cuda/kcache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if FT_HAVE_CUDA
#include "cuda/nvrtc.h"
#endif

#if FT_HAVE_CUDA
/* One module compiled for g: each of its kernels' resources, occupancy and (want_sass) SASS. */
static ft_status module_facts(const ft_cuda_module_spec *m, const ft_gpu_spec *g, int want_sass,
                              ft_kfacts_set *set, ft_err *err) {
    ft_nvrtc_result res;
    ft_status s = ft_nvrtc_compile_module(m, g->arch, &res, err);
    if (s) return s;
    ft_sass_kernel *sass = want_sass ? calloc(FT_NVRTC_MAX_KERNELS, sizeof *sass) : NULL;
    int nsass = 0;
    if (sass) {
        ft_err e2 = {0};
        if (ft_sass_of_cubin(res.cubin, res.cubin_size, sass, FT_NVRTC_MAX_KERNELS, &nsass, &e2) !=
            FT_OK) {
            nsass = 0;
            if (!set->sass_why[0]) ft_kc_copy_cut(set->sass_why, sizeof set->sass_why, e2.msg);
        }
    }
    ft_kernel_info info[FT_CUDA_MAX_KERNELS];
    memset(info, 0, sizeof info);
    for (int k = 0; k < m->nkernels && set->n < FT_KFACTS_MAX; k++) {
        ft_kfacts *f = &set->k[set->n++];
        memset(f, 0, sizeof *f);
        ft_kc_copy_cut(f->name, sizeof f->name, m->kernels[k].name);
        f->block_threads = m->kernels[k].block_threads;
        f->dyn_smem = m->kernels[k].dyn_smem;
        const ft_nvrtc_kernel *kr = ft_nvrtc_kernel_of(&res, f->name);
        if (kr) f->info = info[k] = kr->info;
        ft_err e3 = {0};
        if (ft_cuda_occupancy(g, f->block_threads, f->info.regs, f->info.smem_static + f->dyn_smem,
                              &f->occ, &e3) != FT_OK)
            memset(&f->occ, 0, sizeof f->occ);
        const ft_sass_kernel *sk = ft_sass_find(sass, nsass, f->name);
        if (sk) f->has_sass = 1, f->sass = *sk;
    }
    char why[256];
    if (!set->unfit[0] && !ft_cuda_check_module(g, m, info, why, sizeof why))
        ft_kc_copy_cut(set->unfit, sizeof set->unfit, why);
    ft_nvrtc_result_free(&res);
    free(sass);
    return FT_OK;
}
#endif

ft_status ft_kfacts_of(const ft_call *c, const ft_config *cfg, const ft_gpu_spec *g, int want_sass,
                       ft_kfacts_set *set, ft_err *err) {
    memset(set, 0, sizeof *set);
    const ft_cuda_op *op = ft_cuda_op_of(c->op);
    if (!op || !op->modules) return FT_OK;
    ft_cuda_module_spec ms[8];
    memset(ms, 0, sizeof ms);
    int nm = op->modules(c, ft_cuda_call_dt(c), cfg, ms, 8);
#if FT_HAVE_CUDA
    for (int i = 0; i < nm; i++) {
        ft_status s = module_facts(&ms[i], g, want_sass, set, err);
        if (s) return s;
    }
#else
    (void)g, (void)want_sass, (void)err;
    snprintf(set->sass_why, sizeof set->sass_why,
             "this flaretune was built without the CUDA toolkit (no NVRTC, no CUBIN)");
    for (int i = 0; i < nm; i++)
        for (int k = 0; k < ms[i].nkernels && set->n < FT_KFACTS_MAX; k++) {
            ft_kfacts *f = &set->k[set->n++];
            memset(f, 0, sizeof *f);
            ft_kc_copy_cut(f->name, sizeof f->name, ms[i].kernels[k].name);
            f->block_threads = ms[i].kernels[k].block_threads;
            f->dyn_smem = ms[i].kernels[k].dyn_smem;
        }
#endif
    if (want_sass && set->n && !set->sass_why[0]) {
        int any = 0;
        for (int i = 0; i < set->n; i++)
            any |= set->k[i].has_sass;
        if (!any) snprintf(set->sass_why, sizeof set->sass_why, "no kernel found in the SASS");
    }
    return FT_OK;
}

const ft_kfacts *ft_kfacts_find(const ft_kfacts_set *set, const char *name) {
    for (int i = 0; i < set->n; i++)
        if (strcmp(set->k[i].name, name) == 0) return &set->k[i];
    return NULL;
}

static const ft_sass_mix *hot_mix(const ft_kfacts *k) {
    if (!k || !k->has_sass) return NULL;
    const ft_sass_loop *l = ft_sass_hot_loop(&k->sass);
    return l ? &l->mix : &k->sass.mix;
}

static int memory_instructions(const ft_sass_mix *m) {
    return m->count[FT_SASS_LDG] + m->count[FT_SASS_STG] + m->count[FT_SASS_LDS] +
           m->count[FT_SASS_STS] + m->count[FT_SASS_LDSM] + m->count[FT_SASS_LDGSTS] +
           m->count[FT_SASS_ATOM];
}

double ft_kfacts_instructions_per_request(const ft_kfacts *k) {
    const ft_sass_mix *m = hot_mix(k);
    if (!m) return 0;
    int mem = memory_instructions(m);
    if (mem == 0 && m != &k->sass.mix) m = &k->sass.mix, mem = memory_instructions(m);
    return mem ? (double)m->total / mem : 0;
}

double ft_kfacts_instructions_per_byte(const ft_kfacts *k) {
    const ft_sass_mix *m = hot_mix(k);
    if (!m) return 0;
    if (m->global_bytes == 0 && m != &k->sass.mix) m = &k->sass.mix;
    return m->global_bytes ? (double)m->total / m->global_bytes : 0;
}

/* The SASS classes of each kind of request the emulator counts (cp.async: a global load and a
 * shared store; ldmatrix: a shared load). */
static int kind_count(const ft_sass_mix *m, ft_emu_acc kind) {
    switch (kind) {
    case FT_EMU_GLD: return m->count[FT_SASS_LDG] + m->count[FT_SASS_LDGSTS];
    case FT_EMU_GST: return m->count[FT_SASS_STG];
    case FT_EMU_GATOM: return m->count[FT_SASS_ATOM];
    case FT_EMU_SLD: return m->count[FT_SASS_LDS] + m->count[FT_SASS_LDSM];
    case FT_EMU_SST: return m->count[FT_SASS_STS] + m->count[FT_SASS_LDGSTS];
    default: return 0;
    }
}

static int is_global(ft_emu_acc kind) {
    return kind == FT_EMU_GLD || kind == FT_EMU_GST || kind == FT_EMU_GATOM;
}

/* a - b, class by class (a mix of the instructions of a that are not in b). */
static ft_sass_mix mix_minus(const ft_sass_mix *a, const ft_sass_mix *b) {
    ft_sass_mix m = *a;
    for (int c = 0; c < FT_SASS_NCLASS; c++)
        m.count[c] = m.count[c] > b->count[c] ? m.count[c] - b->count[c] : 0;
    m.total = m.total > b->total ? m.total - b->total : 0;
    m.global_bytes = m.global_bytes > b->global_bytes ? m.global_bytes - b->global_bytes : 0;
    m.shared_bytes = m.shared_bytes > b->shared_bytes ? m.shared_bytes - b->shared_bytes : 0;
    return m;
}

/* The instructions of the body in no loop: what runs once per warp that reaches them. */
static ft_sass_mix straight_line(const ft_sass_kernel *s) {
    ft_sass_mix m = s->mix;
    for (int i = 0; i < s->nloops; i++)
        if (s->loops[i].depth == 1) m = mix_minus(&m, &s->loops[i].mix);
    return m;
}

/* The dynamic count being summed: warp instructions, in all and by class. */
typedef struct issued {
    double total, by_class[FT_SASS_NCLASS];
} issued;

/* n executions of the instructions of m. */
static void run_mix(issued *u, double n, const ft_sass_mix *m) {
    if (!(n > 0)) return;
    u->total += n * m->total;
    for (int c = 0; c < FT_SASS_NCLASS; c++)
        u->by_class[c] += n * m->count[c];
}

/* The SASS class of an access kind's instruction, for requests counted one instruction each. */
static ft_sass_class class_of_kind(ft_emu_acc kind) {
    switch (kind) {
    case FT_EMU_GLD: return FT_SASS_LDG;
    case FT_EMU_GST: return FT_SASS_STG;
    case FT_EMU_GATOM: return FT_SASS_ATOM;
    case FT_EMU_SLD: return FT_SASS_LDS;
    case FT_EMU_SST: return FT_SASS_STS;
    default: return FT_SASS_OTHER;
    }
}

static void one_each(issued *u, double n, ft_sass_class c) {
    u->total += n;
    u->by_class[c] += n;
}

double ft_kfacts_issue(const ft_kfacts *k, const ft_emu_traffic t[FT_EMU_NACC], uint64_t mma,
                       double warps, double kept[FT_EMU_NACC], double by_class[FT_SASS_NCLASS]) {
    issued u;
    memset(&u, 0, sizeof u);
    for (int i = 0; i < FT_EMU_NACC; i++)
        if (kept) kept[i] = 1;
    if (!k || !k->has_sass || !(warps > 0)) {
        for (int i = 0; i < FT_EMU_NACC; i++)
            one_each(&u, (double)t[i].requests, class_of_kind((ft_emu_acc)i));
        one_each(&u, (double)mma, FT_SASS_MMA);
        if (by_class) memcpy(by_class, u.by_class, sizeof u.by_class);
        return u.total;
    }
    /* The straight-line code: its memory instructions of each kind, once per warp, against the
     * requests the emulator counted. A kind found in no loop runs only there: the SASS's count
     * is what issues (a compiler that keeps a value in a register issues fewer loads than the
     * source reads), and the share of warps that reached them is the share of those
     * instructions issued; a kind also in a loop leaves its requests past the straight line's
     * to the loops. A kind the SASS does not show counts one instruction a request. */
    ft_sass_mix line = straight_line(&k->sass), loops = mix_minus(&k->sass.mix, &line);
    double left[FT_EMU_NACC], left_mma = (double)mma;
    double line_mem = 0, line_reached = 0;
    for (int i = 0; i < FT_EMU_NACC; i++) {
        double want = warps * kind_count(&line, (ft_emu_acc)i), got = (double)t[i].requests;
        left[i] = 0;
        if (kind_count(&k->sass.mix, (ft_emu_acc)i) == 0) { /* a kind the SASS does not show */
            one_each(&u, got, class_of_kind((ft_emu_acc)i));
            continue;
        }
        double reached = got < want ? got : want;
        line_mem += want, line_reached += reached;
        if (kind_count(&loops, (ft_emu_acc)i) > 0)
            left[i] = got - reached;
        else if (kept && got > 0 && want < got)
            kept[i] = want / got;
    }
    double line_mma = warps * line.count[FT_SASS_MMA];
    if (k->sass.mix.count[FT_SASS_MMA] == 0)
        one_each(&u, left_mma, FT_SASS_MMA), left_mma = 0;
    else
        left_mma = loops.count[FT_SASS_MMA] ? (left_mma > line_mma ? left_mma - line_mma : 0) : 0;
    run_mix(&u, warps * (line_mem > 0 ? line_reached / line_mem : 1), &line);

    /* The loops: the hot one by the global bytes its kinds moved (its instructions per byte a
     * thread moves, over the lanes its requests had active: a warp of 8 live threads issues
     * each instruction as one of 32 does) when it moves global data, else by its kinds'
     * requests (each an execution of one of its memory instructions); the other loops by the
     * requests of the kinds the hot loop lacks (a kernel that stages with cp.async and computes
     * from shared memory: its staging does not take its compute loop's ratio). */
    const ft_sass_loop *hl = ft_sass_hot_loop(&k->sass);
    if (loops.total > 0 && hl) {
        const ft_sass_mix *hot = &hl->mix;
        ft_sass_mix rest = mix_minus(&loops, hot);
        int hot_mem = memory_instructions(hot), rest_mem = memory_instructions(&rest);
        /* The mix a request of a kind runs, and how many of its memory instructions that is. */
        const ft_sass_mix *hot_by = hot_mem ? hot : &loops, *rest_by = rest_mem ? &rest : hot_by;
        double hot_per = memory_instructions(hot_by), rest_per = memory_instructions(rest_by);
        if (hot_per <= 0) hot_per = hot_by->total > 0 ? hot_by->total : 1;
        if (rest_per <= 0) rest_per = rest_by->total > 0 ? rest_by->total : 1;
        double bytes = 0, lanes = 0, requests = 0, n_hot = 0, n_rest = 0;
        for (int i = 0; i < FT_EMU_NACC; i++)
            if (kind_count(hot, (ft_emu_acc)i) && is_global((ft_emu_acc)i) && t[i].requests) {
                bytes += (double)t[i].bytes * left[i] / (double)t[i].requests;
                lanes += (double)t[i].lanes, requests += (double)t[i].requests;
            }
        /* Active lanes a request, as the emulator counted them (32 where it did not). */
        double per_request = lanes > 0 && lanes < 32 * requests ? lanes / requests : 32;
        int by_bytes = hot->global_bytes > 0 && bytes > 0;
        if (by_bytes) run_mix(&u, bytes / per_request / hot->global_bytes, hot);
        for (int i = 0; i < FT_EMU_NACC; i++) {
            if (!kind_count(hot, (ft_emu_acc)i))
                n_rest += left[i] / rest_per;
            else if (!by_bytes)
                n_hot += left[i] / hot_per;
        }
        if (hot->count[FT_SASS_MMA]) {
            if (!by_bytes) n_hot += left_mma / hot_per;
        } else {
            n_rest += left_mma / rest_per;
        }
        run_mix(&u, n_hot, hot_by);
        run_mix(&u, n_rest, rest_by);
    }
    if (by_class) memcpy(by_class, u.by_class, sizeof u.by_class);
    return u.total;
}

/* Sum over the global kinds of access (global 1) or the shared ones (0) of a figure of their
 * traffic (units, or lines where lines is set), each in the share of its requests the SASS
 * issues. */
static double kept_sum(const ft_emu_traffic t[FT_EMU_NACC], const double kept[FT_EMU_NACC],
                       int global, int lines) {
    double sum = 0;
    for (int i = 0; i < FT_EMU_NACC; i++)
        if (is_global((ft_emu_acc)i) == global)
            sum += (double)(lines ? t[i].lines : t[i].units) * kept[i];
    return sum;
}

ft_predict_in ft_predict_in_of_record(const ft_dev_emu_launch_record *r, const ft_kfacts *k) {
    ft_predict_in in;
    memset(&in, 0, sizeof in);
    if (r->gemm_flops > 0) { /* cuBLASLt's: its operands once, its FLOPs where they run */
        in.dram_bytes = r->gemm_bytes;
        if (r->gemm_bf16)
            in.mma_flops = r->gemm_flops;
        else
            in.warp_instructions = in.fp32_instructions = r->gemm_flops / 64; /* FFMA: 32 x 2 */
        return in;
    }
    const ft_emu_launch_prof *p = &r->p;
    in.blocks = (double)p->blocks;
    in.block_threads = (int)(p->block.x * p->block.y * p->block.z);
    double warps = in.blocks * (double)((in.block_threads + 31) / 32), kept[FT_EMU_NACC];
    double by_class[FT_SASS_NCLASS];
    in.warp_instructions =
        ft_kfacts_issue(k, p->t, p->coll[FT_EMU_COLL_MMA], warps, kept, by_class);
    in.fp32_instructions = by_class[FT_SASS_FP32];
    in.convert_instructions = by_class[FT_SASS_CONVERT];
    static const ft_sass_class lsu[] = {FT_SASS_LDG,  FT_SASS_STG,  FT_SASS_LDS,   FT_SASS_STS,
                                        FT_SASS_LDSM, FT_SASS_ATOM, FT_SASS_LOCAL, FT_SASS_LDGSTS};
    for (size_t i = 0; i < sizeof lsu / sizeof lsu[0]; i++)
        in.lsu_instructions += by_class[lsu[i]];
    /* Without the SASS each request counted one instruction, and a cp.async is two requests
     * (its global load and its shared store) of one LDGSTS. */
    if (!(k && k->has_sass) && in.lsu_instructions >= (double)p->cp_async)
        in.lsu_instructions -= (double)p->cp_async;
    in.dram_bytes = (double)(p->unique_read_bytes + p->unique_write_bytes);
    in.l2_bytes = 32 * kept_sum(p->t, kept, 1, 0); /* sectors */
    in.shared_wavefronts = kept_sum(p->t, kept, 0, 0);
    in.global_wavefronts = kept_sum(p->t, kept, 1, 1);
    in.mma_flops = (double)p->coll[FT_EMU_COLL_MMA] * 2.0 * 16 * 8 * 16; /* m16n8k16 */
    in.warps_per_sm = k && k->occ.blocks_per_sm > 0 ? k->occ.warps_per_sm : 0;
    return in;
}
