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
    json_object_set_new(o, "copy_bytes_per_s", ft_json_number(c->bw));
    json_object_set_new(o, "sgemm_flops_per_s", ft_json_number(c->flops));
    json_object_set_new(o, "copy_buffer_bytes", ft_json_number(c->copy_bytes));
    json_object_set_new(o, "gemm_n", json_integer(c->gemm_n));
    json_object_set_new(o, "threads", json_integer(c->threads));
    json_object_set_new(o, "gemm", json_string(c->gemm ? c->gemm : "sgemm"));
    return o;
}
