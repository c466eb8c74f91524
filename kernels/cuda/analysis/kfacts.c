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

double ft_kfacts_warp_instructions(const ft_kfacts *k, const ft_emu_traffic t[FT_EMU_NACC],
                                   uint64_t mma) {
    double requests = (double)mma;
    for (int i = 0; i < FT_EMU_NACC; i++)
        requests += (double)t[i].requests;
    if (!k || !k->has_sass) return requests;
    const ft_sass_loop *hl = ft_sass_hot_loop(&k->sass);
    const ft_sass_mix *body = &k->sass.mix, *hot = hl ? &hl->mix : body;
    int hot_mem = memory_instructions(hot), body_mem = memory_instructions(body);
    double hot_ratio = hot_mem ? (double)hot->total / hot_mem : 0;
    double rest_ratio =
        body_mem > hot_mem ? (double)(body->total - hot->total) / (body_mem - hot_mem) : hot_ratio;
    if (hot_ratio <= 0) hot_ratio = body_mem ? (double)body->total / body_mem : 1;
    if (rest_ratio <= 0) rest_ratio = hot_ratio;
    /* The hot loop: by the global bytes its kinds moved (its instructions per byte a thread
     * moves, over 32 lanes) when it moves global data, else by its kinds' requests. */
    double w = 0, bytes = 0;
    for (int i = 0; i < FT_EMU_NACC; i++)
        if (kind_count(hot, (ft_emu_acc)i) && is_global((ft_emu_acc)i)) bytes += (double)t[i].bytes;
    int by_bytes = hot->global_bytes > 0 && bytes > 0;
    if (by_bytes) w += (double)hot->total / hot->global_bytes * bytes / 32;
    for (int i = 0; i < FT_EMU_NACC; i++) {
        int in_hot = kind_count(hot, (ft_emu_acc)i) > 0;
        if (!in_hot)
            w += (double)t[i].requests * rest_ratio;
        else if (!by_bytes)
            w += (double)t[i].requests * hot_ratio;
    }
    w += (double)mma * (hot->count[FT_SASS_MMA] ? (by_bytes ? 0 : hot_ratio) : rest_ratio);
    return w;
}

ft_predict_in ft_predict_in_of_record(const ft_dev_emu_launch_record *r, const ft_kfacts *k) {
    ft_predict_in in;
    memset(&in, 0, sizeof in);
    if (r->gemm_flops > 0) { /* cuBLASLt's: its operands once, its FLOPs where they run */
        in.dram_bytes = r->gemm_bytes;
        if (r->gemm_bf16)
            in.mma_flops = r->gemm_flops;
        else
            in.warp_instructions = r->gemm_flops / 64; /* FFMA: 32 lanes x 2 FLOPs */
        return in;
    }
    const ft_emu_launch_prof *p = &r->p;
    uint64_t sectors = p->t[FT_EMU_GLD].units + p->t[FT_EMU_GST].units + p->t[FT_EMU_GATOM].units;
    in.dram_bytes = (double)(p->unique_read_bytes + p->unique_write_bytes);
    in.l2_bytes = (double)sectors * 32;
    in.shared_wavefronts = (double)(p->t[FT_EMU_SLD].units + p->t[FT_EMU_SST].units);
    in.warp_instructions = ft_kfacts_warp_instructions(k, p->t, p->coll[FT_EMU_COLL_MMA]);
    in.mma_flops = (double)p->coll[FT_EMU_COLL_MMA] * 2.0 * 16 * 8 * 16; /* m16n8k16 */
    in.blocks = (double)p->blocks;
    in.block_threads = (int)(p->block.x * p->block.y * p->block.z);
    in.warps_per_sm = k && k->occ.blocks_per_sm > 0 ? k->occ.warps_per_sm : 0;
    return in;
}
