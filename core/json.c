/* json.c: the JSON forms of the core's records: numbers that may not be finite, statistics,
 * the environment and the machine's load (see core/json.h). */
#include "core/json.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/npy.h"

json_t *ft_env_to_json(const ft_env *e) {
    json_t *o = json_pack("{s:s, s:i, s:i, s:i, s:b, s:b, s:s, s:s, s:s, s:s, s:b}", "cpu",
                          e->cpu_model, "cores", e->cpu_cores, "usable_cpus", e->usable_cpus,
                          "omp_threads", e->omp_threads, "avx2", e->has_avx2, "avx512f",
                          e->has_avx512f, "blas", e->blas, "blas_core", e->blas_core, "compiler",
                          e->compiler, "flaretune", e->version, "cuda_built", e->cuda_built);
    if (e->blas_core_detected[0])
        json_object_set_new(o, "blas_core_detected", json_string(e->blas_core_detected));
    json_object_set_new(o, "source_hash", json_string(e->source_hash));
    return o;
}

json_t *ft_json_number(double v) { return isfinite(v) ? json_real(v) : json_null(); }

const char *ft_json_scalar_text(const json_t *v, const char *other, char *buf, size_t n) {
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_integer(v))
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, n, "%.6g", json_real_value(v));
    else if (json_is_boolean(v))
        snprintf(buf, n, "%s", json_is_true(v) ? "true" : "false");
    else
        return other;
    return buf;
}

json_t *ft_stats_to_json(const ft_stats *st) {
    json_t *o = json_object();
    json_object_set_new(o, "median_s", ft_json_number(st->median));
    json_object_set_new(o, "q1_s", ft_json_number(st->q1));
    json_object_set_new(o, "q3_s", ft_json_number(st->q3));
    json_object_set_new(o, "iqr_s", ft_json_number(st->iqr));
    json_object_set_new(o, "min_s", ft_json_number(st->min));
    json_object_set_new(o, "max_s", ft_json_number(st->max));
    json_object_set_new(o, "mean_s", ft_json_number(st->mean));
    json_object_set_new(o, "stdev_s", ft_json_number(st->stdev));
    /* (null for an unclean measurement: the spread of contaminated samples says nothing) */
    json_object_set_new(o, "ci_rel", ft_json_number(st->unclean ? NAN : st->ci_rel));
    json_object_set_new(o, "samples", json_integer(st->samples));
    json_object_set_new(o, "batch", json_integer(st->batch));
    json_object_set_new(o, "converged", json_boolean(st->converged));
    json_object_set_new(o, "total_s", ft_json_number(st->total_s));
    ft_stats_sched_to_json(o, st);
    if (st->stopped) json_object_set_new(o, "stopped_s", ft_json_number(st->stopped_s));
    return o;
}

void ft_stats_from_json(const json_t *o, ft_stats *st) {
    static const struct {
        const char *name;
        size_t at;
    } times[] = {{"median_s", offsetof(ft_stats, median)}, {"q1_s", offsetof(ft_stats, q1)},
                 {"q3_s", offsetof(ft_stats, q3)},         {"iqr_s", offsetof(ft_stats, iqr)},
                 {"min_s", offsetof(ft_stats, min)},       {"max_s", offsetof(ft_stats, max)},
                 {"mean_s", offsetof(ft_stats, mean)},     {"stdev_s", offsetof(ft_stats, stdev)},
                 {"ci_rel", offsetof(ft_stats, ci_rel)},   {"total_s", offsetof(ft_stats, total_s)},
                 {"lost_frac", offsetof(ft_stats, lost_frac)}};
    memset(st, 0, sizeof *st);
    for (size_t k = 0; k < sizeof times / sizeof times[0]; k++) {
        json_t *v = json_object_get(o, times[k].name);
        *(double *)((char *)st + times[k].at) = json_is_number(v) ? json_number_value(v) : NAN;
    }
    st->samples = (int)json_integer_value(json_object_get(o, "samples"));
    st->batch = (int)json_integer_value(json_object_get(o, "batch"));
    st->discarded = (int)json_integer_value(json_object_get(o, "discarded"));
    st->taken = (int)json_integer_value(json_object_get(o, "taken"));
    st->converged = json_is_true(json_object_get(o, "converged"));
    st->unclean = json_is_false(json_object_get(o, "clean"));
}

void ft_stats_sched_to_json(json_t *o, const ft_stats *st) {
    json_object_set_new(o, "discarded", json_integer(st->discarded));
    json_object_set_new(o, "taken", json_integer(st->taken));
    json_object_set_new(o, "lost_frac", ft_json_number(st->lost_frac));
    json_object_set_new(o, "clean", json_boolean(!st->unclean));
}

json_t *ft_load_to_json(const ft_load *l) {
    if (!l->known)
        return json_pack("{s:b, s:f, s:f}", "known", 0, "span_s", l->span_s, "loadavg1",
                         l->loadavg1);
    return json_pack("{s:b, s:b, s:f, s:f, s:f, s:i, s:f}", "known", 1, "busy", l->busy,
                     "other_cpus", l->other_cpus, "steal_frac", l->steal_frac, "loadavg1",
                     l->loadavg1, "cpus", l->ncpu, "span_s", l->span_s);
}

int ft_json_value_text(const json_t *v, char *buf, size_t n) {
    if (json_is_string(v))
        snprintf(buf, n, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, n, "%.17g", json_real_value(v));
    else if (json_is_boolean(v))
        snprintf(buf, n, "%d", json_is_true(v));
    else {
        snprintf(buf, n, "?");
        return -1;
    }
    return 0;
}

size_t ft_json_pair_append(char *buf, size_t n, size_t k, const char *sep, const char *key,
                           const json_t *v) {
    if (k >= n) return k;
    char val[64];
    if (json_is_string(v))
        snprintf(val, sizeof val, "%s", json_string_value(v));
    else
        snprintf(val, sizeof val, "%lld", (long long)json_integer_value(v));
    return k + (size_t)snprintf(buf + k, n - k, "%s%s=%s", k ? sep : "", key, val);
}

size_t ft_json_pairs_text(const json_t *obj, char *buf, size_t n) {
    size_t k = 0;
    const char *key;
    json_t *v;
    buf[0] = '\0';
    json_object_foreach((json_t *)obj, key, v) {
        k = ft_json_pair_append(buf, n, k, ",", key, v);
        if (k >= n) return n - 1;
    }
    return k;
}

typedef struct {
    const json_t *doc;
    size_t flags;
    int newline;
} json_dump;

static int write_json(FILE *f, const void *ctx) {
    const json_dump *d = ctx;
    return json_dumpf(d->doc, f, d->flags) != 0 || (d->newline && fputc('\n', f) == EOF);
}

ft_status ft_json_save(const json_t *doc, const char *path, size_t flags, int newline,
                       ft_err *err) {
    json_dump d = {doc, flags, newline};
    return ft_file_write(path, write_json, &d, err);
}
