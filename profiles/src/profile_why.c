/* profile_why.c: why a profile gave a call the default configuration, or what running its entry
 * changed (see profiles/src/profile.h). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "op/op.h"
#include "op/op_json.h"
#include "op/space.h"
#include "profiles/src/profile.h"

/* The attributes where entry attributes `have` differ from the call's `want` ("B=16 (this call:
 * B=4)"), at most three. */
static void attrs_diff(const json_t *have, const json_t *want, char *buf, size_t n) {
    size_t k = 0;
    int shown = 0;
    const char *key;
    json_t *v;
    buf[0] = '\0';
    json_object_foreach((json_t *)want, key, v) {
        const char *h = json_string_value(json_object_get(have, key)), *w = json_string_value(v);
        if (!w || (h && !strcmp(h, w)) || shown == 3 || k >= n) continue;
        k += (size_t)snprintf(buf + k, n - k, "%s%s=%s (this call: %s)", shown++ ? ", " : "", key,
                              h ? h : "unset", w);
    }
}

int ft_profile_config_why(const ft_profile *p, const ft_call *c, const char *backend,
                          const char *device, const ft_space *sp, ft_config *cfg, int *exact,
                          char *buf, size_t n) {
    int found = 0;
    buf[0] = '\0';
    json_t *want = ft_attrs_to_json(c);
    const ft_profile_entry *other = NULL, *elsewhere = NULL;
    int same = 0;
    for (int i = 0; i < ft_profile_count(p); i++) {
        const ft_profile_entry *e = ft_profile_entry_at(p, i);
        const int here = !device || !strcmp(e->device, device); /* NULL: any device */
        if (e->op == c->op && !strcmp(e->backend, backend) && !here && !elsewhere) elsewhere = e;
        if (e->op != c->op || strcmp(e->backend, backend) || !here) continue;
        if (ft_profile_attrs_match(e->attrs, want))
            same = 1;
        else if (!other)
            other = e;
    }
    if (!same && !other && elsewhere) {
        /* the devices side by side: another machine, or this one with other CPUs (an affinity
         * mask counts fewer) */
        snprintf(buf, n,
                 "the profile has no %s entry for %s on this device, '%s': it has one for '%s'",
                 c->op->name, backend, device, elsewhere->device);
    } else if (!same && !other) {
        snprintf(buf, n, "the profile has no %s entry for %s on this device", c->op->name, backend);
    } else if (!same) {
        char diff[512];
        attrs_diff(other->attrs, want, diff, sizeof diff);
        snprintf(buf, n, "the profile's %s entries for %s on this device have other attributes: %s",
                 c->op->name, backend, diff);
    } else {
        int ex = 0;
        const ft_profile_entry *e = ft_profile_lookup_call(p, c, backend, device, &ex);
        ft_config got;
        char why[256] = "";
        ft_err err = {0};
        if (e && ft_profile_config(sp, e->config, &got, buf, n, &err) != FT_OK) {
            snprintf(buf, n, "the profile's nearest %s entry has a config this space refuses: %s",
                     c->op->name, err.msg);
        } else if (e && !ft_space_runnable(sp, c, &got, why, sizeof why)) {
            snprintf(buf, n,
                     "the profile's nearest %s entry has a config that cannot run at these "
                     "sizes: %s",
                     c->op->name, why);
        } else if (e) {
            found = 1;
            if (cfg) *cfg = got;
            if (exact) *exact = ex;
        }
    }
    json_decref(want);
    return found;
}
