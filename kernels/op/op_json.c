/* op_json.c: the JSON forms of configurations, sizes and attributes (see
 * kernels/op/op_json.h). */
#include "op/op_json.h"

#include <stdio.h>
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
        if (!json_is_string(val) && !json_is_integer(val))
            return ft_err_set(err, FT_EFORMAT,
                              "config value of '%s' is neither a string nor an integer", key);
        const char *now = ft_space_renamed(s, key);
        if (now && json_object_get(obj, now)) now = NULL; /* both: refused by the parser */
        k = ft_json_pair_append(text, sizeof text, k, ",", now ? now : key, val);
        if (k >= sizeof text) return ft_err_set(err, FT_EFORMAT, "config object too long");
    }
    return ft_config_parse(s, text, cfg, err);
}

int ft_config_json_rename(const ft_space *s, json_t *obj, char *note, size_t n) {
    int count = 0;
    size_t k = 0;
    if (n) note[0] = '\0';
    /* Rebuilt in the same order, each former name replaced where it stands. */
    json_t *out = json_object();
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val) {
        const char *now = ft_space_renamed(s, key);
        if (now && json_object_get(obj, now)) now = NULL; /* both: left for the check to refuse */
        if (now) {
            if (k < n)
                k += (size_t)snprintf(note + k, n - k, "%s%s -> %s", count ? ", " : "", key, now);
            count++;
        }
        json_object_set(out, now ? now : key, val);
    }
    if (count) {
        json_object_clear(obj);
        json_object_update(obj, out);
    }
    json_decref(out);
    return count;
}

json_t *ft_dims_to_json(const ft_call *c) {
    json_t *o = json_object();
    for (int s = 0; c->op->syms[s]; s++)
        json_object_set_new(o, c->op->syms[s], json_integer(c->dim[s]));
    return o;
}

/* Attributes that came after profiles and logs keyed by a call's attributes were written, left
 * out at their defaults so that those keys still match: `window` and `causal` (0: full
 * attention), the loss's `final_norm` (0) and the fusions' `want_dx` (1). */
static int later_at_default(const ft_call *c, const char *name) {
    return (!strcmp(name, "window") && c->attrs.window == 0) ||
           (!strcmp(name, "causal") && c->attrs.causal == 0) ||
           (!strcmp(name, "final_norm") && !c->attrs.loss.final_norm) ||
           (!strcmp(name, "want_dx") && c->attrs.want_dx);
}

json_t *ft_attrs_to_json(const ft_call *c) {
    json_t *o = json_object();
    for (int a = 0; c->op->attrs[a]; a++) {
        /* Left out too: what changes nothing (the loss's eps without final_norm, say). */
        if (!ft_attr_matters(c->op, &c->attrs, c->op->attrs[a]) ||
            later_at_default(c, c->op->attrs[a]))
            continue;
        char v[64];
        ft_attrs_format(&c->attrs, c->op->attrs[a], v, sizeof v);
        json_object_set_new(o, c->op->attrs[a], json_string(v));
    }
    return o;
}
