/* space.c: parameter spaces and configurations (see kernels/op/space.h). */
#include "op/space.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A space's thread counts are filled in once per process, before the space is first handed
 * out; the lock keeps two first callers (the tuner and the dashboard's thread) from writing at
 * once, and a resolved parameter is never written again, so readers never see it change. */
static pthread_mutex_t resolve_lock = PTHREAD_MUTEX_INITIALIZER;

void ft_space_resolve(ft_space *s, int ncpu) {
    if (ncpu < 1) ncpu = 1;
    pthread_mutex_lock(&resolve_lock);
    for (int i = 0; i < s->nparams; i++) {
        ft_param *p = &s->params[i];
        if (!(p->flags & FT_PARAM_THREADS)) continue;
        if (p->n > 0 && p->values[p->n - 1] == ncpu && p->def == ncpu) continue; /* resolved */
        int values[FT_MAX_VALUES], n = 0;
        for (long long t = 1; t < ncpu && n < FT_MAX_VALUES - 1; t *= 2) /* (ncpu up to INT_MAX) */
            values[n++] = (int)t;
        values[n++] = ncpu;
        memcpy(p->values, values, sizeof values);
        p->n = n;
        p->def = ncpu;
    }
    pthread_mutex_unlock(&resolve_lock);
}

void ft_config_default(const ft_space *s, ft_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->n = s->nparams;
    for (int i = 0; i < s->nparams; i++)
        cfg->v[i] = s->params[i].def;
}

int ft_space_param(const ft_space *s, const char *name) {
    for (int i = 0; i < s->nparams; i++)
        if (strcmp(s->params[i].name, name) == 0) return i;
    return -1;
}

/* Every rename of a tunable, for as long as records written with the former name may be read:
 * the former name, what it is called now. A rename applies to every space that has the new
 * name and not the former one. */
static const struct {
    const char *former, *name;
} renames[] = {
    {"vec", "vec_bytes"},       /* bytes, where the kernels count elements (FT_VEC_ELEMS) */
    {"cpt", "vecs_per_thread"}, /* vectors per thread per row                           */
    {"rpc", "rows_per_block"},  /* rows per block                                       */
    {"ctas", "blocks_per_sm"},  /* blocks per SM of a persistent grid                   */
    {"kt", "keys_per_tile"},    /* keys per K/V tile in shared memory                   */
    {"tpw", "tiles_per_warp"},  /* 16-row tiles per warp                                */
    {"bm", "tile_rows"},        /* rows of a logit tile                                 */
    {"bn", "tile_cols"},        /* vocab columns of a logit tile                        */
};

const char *ft_space_renamed(const ft_space *s, const char *name) {
    if (ft_space_param(s, name) >= 0) return NULL;
    for (size_t i = 0; i < sizeof renames / sizeof renames[0]; i++)
        if (strcmp(renames[i].former, name) == 0 && ft_space_param(s, renames[i].name) >= 0)
            return renames[i].name;
    return NULL;
}

void ft_config_value_str(const ft_space *s, int i, int value, char *buf, size_t n) {
    const ft_param *p = &s->params[i];
    if (p->labels && value >= 0 && value < p->n)
        snprintf(buf, n, "%s", p->labels[value]);
    else
        snprintf(buf, n, "%d", value);
}

static int candidate_index(const ft_param *p, int value) {
    for (int k = 0; k < p->n; k++)
        if (p->values[k] == value) return k;
    return -1;
}

static void candidates_str(const ft_space *s, int i, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = '\0';
    for (int j = 0; j < s->params[i].n && k < n; j++) {
        char v[48];
        ft_config_value_str(s, i, s->params[i].values[j], v, sizeof v);
        k += (size_t)snprintf(buf + k, n - k, "%s%s", j ? ", " : "", v);
    }
}

ft_status ft_config_parse(const ft_space *s, const char *text, ft_config *cfg, ft_err *err) {
    ft_config_default(s, cfg);
    unsigned char given[FT_MAX_PARAMS] = {0};
    const char *p = text;
    while (*p) {
        size_t len = strcspn(p, ",");
        char item[128];
        if (len >= sizeof item) return ft_err_set(err, FT_EINVAL, "config item too long");
        memcpy(item, p, len);
        item[len] = '\0';
        p += len + (p[len] == ',');
        if (!item[0]) continue;
        char *eq = strchr(item, '=');
        if (!eq || eq == item)
            return ft_err_set(err, FT_EINVAL, "config: expected NAME=VALUE, got '%s'", item);
        *eq = '\0';
        const char *name = item, *val = eq + 1;
        int i = ft_space_param(s, name);
        const char *now = i < 0 ? ft_space_renamed(s, name) : NULL;
        if (now)
            return ft_err_set(err, FT_EINVAL, "config: parameter '%s' is now called '%s'", name,
                              now);
        if (i < 0) {
            char known[256];
            size_t k = 0;
            known[0] = '\0';
            for (int j = 0; j < s->nparams && k < sizeof known; j++)
                k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", j ? ", " : "",
                                      s->params[j].name);
            return ft_err_set(err, FT_EINVAL, "config: unknown parameter '%s' (parameters: %s)",
                              name, s->nparams ? known : "none");
        }
        if (given[i]++)
            return ft_err_set(err, FT_EINVAL, "config: %s is given twice", s->params[i].name);
        const ft_param *pp = &s->params[i];
        int value = 0, found = 0;
        if (pp->labels) {
            for (int k = 0; k < pp->n; k++)
                if (strcmp(pp->labels[k], val) == 0) {
                    value = k;
                    found = 1;
                }
        } else {
            char *end;
            errno = 0;
            long v = strtol(val, &end, 10);
            /* a value past an int is no candidate (never one wrapped into range) */
            if (end != val && !*end && !errno && v >= INT_MIN && v <= INT_MAX &&
                candidate_index(pp, (int)v) >= 0) {
                value = (int)v;
                found = 1;
            }
        }
        if (!found) {
            char cands[256];
            candidates_str(s, i, cands, sizeof cands);
            return ft_err_set(err, FT_EINVAL, "config: %s=%s is not a candidate (one of: %s)", name,
                              val, cands);
        }
        cfg->v[i] = value;
    }
    return FT_OK;
}

void ft_config_format(const ft_space *s, const ft_config *cfg, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->nparams && k < n; i++) {
        char v[48];
        ft_config_value_str(s, i, cfg->v[i], v, sizeof v);
        k += (size_t)snprintf(buf + k, n - k, "%s%s=%s", i ? "," : "", s->params[i].name, v);
    }
}

int ft_config_equal(const ft_config *a, const ft_config *b) {
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++)
        if (a->v[i] != b->v[i]) return 0;
    return 1;
}

int64_t ft_space_size(const ft_space *s) {
    int64_t n = 1;
    for (int i = 0; i < s->nparams; i++) {
        if (s->params[i].n > 0 && n > INT64_MAX / s->params[i].n) return INT64_MAX;
        n *= s->params[i].n;
    }
    return n;
}

void ft_space_config_at(const ft_space *s, int64_t k, ft_config *cfg) {
    cfg->n = s->nparams;
    for (int i = s->nparams - 1; i >= 0; i--) {
        int n = s->params[i].n;
        cfg->v[i] = s->params[i].values[k % n];
        k /= n;
    }
}

int64_t ft_space_index_of(const ft_space *s, const ft_config *cfg) {
    int64_t k = 0;
    for (int i = 0; i < s->nparams; i++) {
        int j = candidate_index(&s->params[i], cfg->v[i]);
        if (j < 0) return -1;
        k = k * s->params[i].n + j;
    }
    return k;
}

int ft_space_check(const ft_space *s, const struct ft_call *c, const ft_config *cfg, char *why,
                   size_t n) {
    if (why && n) why[0] = '\0';
    if (cfg->n != s->nparams)
        return ft_config_why(FT_CONFIG_INVALID, why, n,
                             "config has %d values, the space %d parameters", cfg->n, s->nparams);
    for (int i = 0; i < s->nparams; i++)
        if (candidate_index(&s->params[i], cfg->v[i]) < 0)
            return ft_config_why(FT_CONFIG_INVALID, why, n, "%s=%d is not a candidate",
                                 s->params[i].name, cfg->v[i]);
    char local[8];
    if (!s->valid) return FT_CONFIG_VALID;
    int v = s->valid(c, cfg, why ? why : local, why ? n : sizeof local);
    return v == FT_CONFIG_VALID || v == FT_CONFIG_DUPLICATE ? v : FT_CONFIG_INVALID;
}

int ft_space_valid(const ft_space *s, const struct ft_call *c, const ft_config *cfg, char *why,
                   size_t n) {
    return ft_space_check(s, c, cfg, why, n) == FT_CONFIG_VALID;
}

int ft_space_runnable(const ft_space *s, const struct ft_call *c, const ft_config *cfg, char *why,
                      size_t n) {
    return ft_space_check(s, c, cfg, why, n) != FT_CONFIG_INVALID;
}
