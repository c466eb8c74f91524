/* registry.c: every op and every backend, registered once: the one place that names them all.
 *
 * An op family (kernels/fusion, kernels/attention, kernels/loss) describes each of its ops as
 * an ft_op, with its CPU and CUDA implementations attached; a backend (kernels/op/backend.c,
 * kernels/cpu, kernels/cuda) runs whatever implementation the op carries. This file, above them
 * all, lists them for the front ends: `flaretune list`, name lookup, and the choice of `auto`.
 */
#include <stdio.h>
#include <string.h>

#include "attention/attention.h"
#include "fusion/fusion.h"
#include "kernels/registry.h"
#include "linear/linear.h"
#include "loss/loss.h"
#include "op/backend.h"
#include "op/op.h"

/* ---- ops ----------------------------------------------------------------------------------- */

static const ft_op *const registry[] = {
    &ft_op_fusion_dflare, &ft_op_fusion_dflash, &ft_op_attention_kvproj,
    &ft_op_attention_decode, &ft_op_attention_train, &ft_op_loss, &ft_op_linear,
};
enum { NOPS = sizeof registry / sizeof registry[0] };

int ft_op_count(void) { return NOPS; }
const ft_op *ft_op_at(int i) { return i >= 0 && i < NOPS ? registry[i] : NULL; }

const ft_op *ft_op_find(const char *name, ft_err *err) {
    for (int i = 0; i < NOPS; i++)
        if (strcmp(registry[i]->name, name) == 0) return registry[i];
    char known[256];
    size_t k = 0;
    for (int i = 0; i < NOPS; i++)
        k +=
            (size_t)snprintf(known + k, sizeof known - k, "%s%s", i ? ", " : "", registry[i]->name);
    ft_err_set(err, FT_EINVAL, "unknown op '%s' (ops: %s)", name, known);
    return NULL;
}

/* ---- backends ------------------------------------------------------------------------------ */

/* In order of preference for "auto". */
static const ft_backend *const backends[] = {
    &ft_backend_cuda,
    &ft_backend_cpu,
    &ft_backend_ref,
    &ft_backend_cuda_emu, /* never chosen by "auto": the cpu backend runs every op */
};
enum { NBACKENDS = sizeof backends / sizeof backends[0] };

int ft_backend_count(void) { return NBACKENDS; }
const ft_backend *ft_backend_at(int i) { return i >= 0 && i < NBACKENDS ? backends[i] : NULL; }

ft_status ft_backend_resolve(const char *name, const ft_op *op, const ft_backend **out,
                             ft_err *err) {
    *out = NULL;
    char why[256];
    if (!name || strcmp(name, "auto") == 0) {
        for (int i = 0; i < NBACKENDS; i++) {
            const ft_backend *b = backends[i];
            if (b->built && b->available(why, sizeof why) && (!op || b->supports(op))) {
                *out = b;
                return FT_OK;
            }
        }
        return ft_err_set(err, FT_EUNSUPPORTED, "no available backend implements %s",
                          op ? op->name : "this op");
    }
    for (int i = 0; i < NBACKENDS; i++) {
        const ft_backend *b = backends[i];
        if (strcmp(b->name, name) != 0) continue;
        if (!b->built)
            return ft_err_set(err, FT_EUNSUPPORTED,
                              "backend '%s' is not built into this binary (see `flaretune list`)",
                              name);
        if (!b->available(why, sizeof why))
            return ft_err_set(err, FT_ENODEV, "backend '%s' cannot run here: %s", name, why);
        if (op && !b->supports(op))
            return ft_err_set(err, FT_EUNSUPPORTED, "backend '%s' does not implement %s", name,
                              op->name);
        *out = b;
        return FT_OK;
    }
    char known[256];
    size_t k = 0;
    for (int i = 0; i < NBACKENDS; i++)
        k += (size_t)snprintf(known + k, sizeof known - k, "%s, ", backends[i]->name);
    snprintf(known + k, sizeof known - k, "auto");
    return ft_err_set(err, FT_EINVAL, "unknown backend '%s' (backends: %s)", name, known);
}
