/* cli_sass.c: a kernel's SASS instruction mix as JSON (compile --json and inspect --json). */
#include "cli.h"
#include "core/json.h"

/* Instructions per byte a thread moves to or from global memory; -1 when it moves none. */
static double per_global_byte(const ft_sass_mix *m) {
    return m->global_bytes > 0 ? (double)m->total / m->global_bytes : -1;
}

/* A mix as JSON: every class's count, the total, the bytes, instructions per global byte. */
static json_t *mix_json(const ft_sass_mix *m) {
    json_t *cls = json_object();
    for (int c = 0; c < FT_SASS_NCLASS; c++)
        json_object_set_new(cls, ft_sass_class_name((ft_sass_class)c), json_integer(m->count[c]));
    double x = per_global_byte(m);
    return json_pack("{s:o, s:i, s:i, s:i, s:o}", "classes", cls, "total", m->total, "global_bytes",
                     m->global_bytes, "shared_bytes", m->shared_bytes,
                     "instructions_per_global_byte", x >= 0 ? json_real(x) : json_null());
}

/* A kernel's instruction mix: in all, the number of loops, and its hot loop (or null). */
json_t *ft_cli_sass_json(const ft_sass_kernel *k) {
    json_t *o = mix_json(&k->mix), *hot = json_null();
    json_object_set_new(o, "loops", json_integer(k->loops_found));
    const ft_sass_loop *h = ft_sass_hot_loop(k);
    if (h) {
        hot = json_pack("{s:i, s:i, s:i}", "first", h->first, "last", h->last, "depth", h->depth);
        json_t *m = mix_json(&h->mix);
        json_object_update(hot, m);
        json_decref(m);
    }
    json_object_set_new(o, "hot_loop", hot);
    return o;
}
