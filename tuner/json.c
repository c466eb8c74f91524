/* json.c: JSON forms of configurations, environments, sizes and statistics (see
 * include/flaretune/json.h). */
#include "flaretune/json.h"

#include <math.h>
#include <string.h>

json_t *ft_config_to_json(const ft_space *s, const ft_config *cfg) {
    json_t *o = json_object();
    for (int i = 0; i < s->nparams; i++) {
        const ft_param *p = &s->params[i];
        if (p->labels && cfg->v[i] >= 0 && cfg->v[i] < p->n)
            json_object_set_new(o, p->name, json_string(p->labels[cfg->v[i]]));
        else
            json_object_set_new(o, p->name, json_integer(cfg->v[i]));
    }
    return o;
}

ft_status ft_config_from_json(const ft_space *s, const json_t *obj, ft_config *cfg, ft_err *err) {
    if (!json_is_object(obj)) return ft_err_set(err, FT_EFORMAT, "config is not a JSON object");
    /* Reuse the text parser so both forms accept exactly the same things. */
    char text[1024];
    size_t k = 0;
    const char *key;
    json_t *val;
    text[0] = '\0';
    json_object_foreach((json_t *)obj, key, val) {
        char v[64];
        if (json_is_string(val))
            snprintf(v, sizeof v, "%s", json_string_value(val));
        else if (json_is_integer(val))
            snprintf(v, sizeof v, "%lld", (long long)json_integer_value(val));
        else
            return ft_err_set(err, FT_EFORMAT,
                              "config value of '%s' is neither a string nor an integer", key);
        k += (size_t)snprintf(text + k, sizeof text - k, "%s%s=%s", k ? "," : "", key, v);
        if (k >= sizeof text) return ft_err_set(err, FT_EFORMAT, "config object too long");
    }
    return ft_config_parse(s, text, cfg, err);
}

json_t *ft_env_to_json(const ft_env *e) {
    json_t *o =
        json_pack("{s:s, s:i, s:i, s:b, s:b, s:s, s:s, s:s, s:s, s:b}", "cpu", e->cpu_model,
                  "cores", e->cpu_cores, "omp_threads", e->omp_threads, "avx2", e->has_avx2,
                  "avx512f", e->has_avx512f, "blas", e->blas, "blas_core", e->blas_core, "compiler",
                  e->compiler, "flaretune", e->version, "cuda_built", e->cuda_built);
    if (e->blas_core_detected[0])
        json_object_set_new(o, "blas_core_detected", json_string(e->blas_core_detected));
    json_object_set_new(o, "source_hash", json_string(e->source_hash));
    return o;
}

json_t *ft_dims_to_json(const ft_call *c) {
    json_t *o = json_object();
    for (int s = 0; c->op->syms[s]; s++)
        json_object_set_new(o, c->op->syms[s], json_integer(c->dim[s]));
    return o;
}

json_t *ft_attrs_to_json(const ft_call *c) {
    json_t *o = json_object();
    for (int a = 0; c->op->attrs[a]; a++) {
        char v[64];
        ft_attrs_format(&c->attrs, c->op->attrs[a], v, sizeof v);
        json_object_set_new(o, c->op->attrs[a], json_string(v));
    }
    return o;
}

json_t *ft_json_number(double v) { return isfinite(v) ? json_real(v) : json_null(); }

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
    json_object_set_new(o, "ci_rel", ft_json_number(st->ci_rel));
    json_object_set_new(o, "samples", json_integer(st->samples));
    json_object_set_new(o, "batch", json_integer(st->batch));
    json_object_set_new(o, "converged", json_boolean(st->converged));
    json_object_set_new(o, "total_s", ft_json_number(st->total_s));
    return o;
}

json_t *ft_ceilings_to_json(const ft_ceilings *c) {
    json_t *o = json_object();
    json_t *levels = json_array();
    for (int i = 0; i < c->nlevels; i++) {
        const ft_ceil_level *l = &c->level[i];
        json_array_append_new(
            levels, json_pack("{s:s, s:o, s:o, s:o, s:o, s:s}", "name", l->name, "capacity_bytes",
                              l->capacity > 0 ? ft_json_number(l->capacity) : json_null(),
                              "bytes_per_s", ft_json_number(l->bw), "measured_bytes_per_s",
                              ft_json_number(l->bw_now), "probe_bytes",
                              ft_json_number(l->probe_bytes), "seen", l->seen));
    }
    json_object_set_new(o, "levels", levels);
    json_object_set_new(o, "flops_per_s", ft_json_number(c->flops));
    json_object_set_new(o, "measured_flops_per_s", ft_json_number(c->flops_now));
    json_object_set_new(o, "flops_seen", json_string(c->flops_seen));
    json_object_set_new(o, "peak_flops_per_s", ft_json_number(c->peak_flops));
    json_object_set_new(o, "gemm_flops_per_s", ft_json_number(c->gemm_flops));
    /* The memory level and the GEMM under their first names, for readers of older logs. */
    json_object_set_new(o, "copy_bytes_per_s", ft_json_number(c->bw));
    json_object_set_new(o, "sgemm_flops_per_s", ft_json_number(c->gemm_flops));
    json_object_set_new(o, "copy_buffer_bytes", ft_json_number(c->copy_bytes));
    json_object_set_new(o, "gemm_n", json_integer(c->gemm_n));
    json_object_set_new(o, "threads", json_integer(c->threads));
    json_object_set_new(o, "gemm", json_string(c->gemm ? c->gemm : "sgemm"));
    json_object_set_new(o, "rounds", json_integer(c->rounds));
    json_object_set_new(o, "from_cache", json_boolean(c->from_cache));
    json_object_set_new(o, "cache", json_string(c->cache_path));
    if (c->cache_note[0]) json_object_set_new(o, "cache_note", json_string(c->cache_note));
    return o;
}

json_t *ft_load_to_json(const ft_load *l) {
    if (!l->known)
        return json_pack("{s:b, s:f, s:f}", "known", 0, "span_s", l->span_s, "loadavg1",
                         l->loadavg1);
    return json_pack("{s:b, s:b, s:f, s:f, s:f, s:i, s:f}", "known", 1, "busy", l->busy,
                     "other_cpus", l->other_cpus, "steal_frac", l->steal_frac, "loadavg1",
                     l->loadavg1, "cpus", l->ncpu, "span_s", l->span_s);
}

json_t *ft_roofline_to_json(const ft_roofline *r, double median_s) {
    double frac = r->floor_s / median_s;
    json_t *o = json_pack("{s:o, s:o, s:s, s:o, s:o, s:s, s:b}", "floor_s",
                          ft_json_number(r->floor_s), "frac", ft_json_number(frac), "level",
                          r->level_name, "bytes_per_s", ft_json_number(r->bw), "working_set_bytes",
                          ft_json_number(r->working_set), "bound",
                          r->compute_bound ? "compute" : "memory", "suspect",
                          frac > FT_ROOFLINE_MAX_FRAC);
    return o;
}
