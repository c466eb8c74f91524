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

/* A loss attribute added after profiles and logs were keyed by the loss's attributes, at a value
 * that changes nothing: left out of the JSON (as window and causal are below). */
static int loss_attr_left_out(const ft_call *c, const char *name) {
    const ft_loss_attrs *l = &c->attrs.loss;
    if (!l->final_norm && (!strcmp(name, "final_norm") || !strcmp(name, "eps"))) return 1;
    if (l->scheme != FT_SCHEME_PROGRESSIVE_EPOCH &&
        (!strcmp(name, "gamma_inc") || !strcmp(name, "epoch")))
        return 1;
    return 0;
}

json_t *ft_attrs_to_json(const ft_call *c) {
    json_t *o = json_object();
    for (int a = 0; c->op->attrs[a]; a++) {
        /* `window` and `causal` came after profiles and logs keyed by these attributes were
         * written: left out at 0, the attributes of a full-attention call stay those keys. */
        if (!strcmp(c->op->attrs[a], "window") && c->attrs.window == 0) continue;
        if (!strcmp(c->op->attrs[a], "causal") && c->attrs.causal == 0) continue;
        /* The loss's final norm and progressive_epoch likewise: final_norm (and the eps only it
         * reads) left out when off, gamma_inc and epoch unless the scheme reads them. */
        if (!strcmp(c->op->name, "loss") && loss_attr_left_out(c, c->op->attrs[a])) continue;
        /* The fusions' want_dx too, where it changes nothing: at its default (1), or with no
         * backward to compute dx in. */
        if (!strcmp(c->op->attrs[a], "want_dx") && (c->attrs.want_dx || !c->attrs.backward))
            continue;
        char v[64];
        ft_attrs_format(&c->attrs, c->op->attrs[a], v, sizeof v);
        json_object_set_new(o, c->op->attrs[a], json_string(v));
    }
    return o;
}
