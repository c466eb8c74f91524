/* report_doc.c: the report's document model, built and freed (see tuner/report_doc.h), and the
 * byte-by-byte escaping both writers run with their own table of replacements. */
#include "tuner/report_doc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A copy of s (NULL stays NULL); sets the document's oom when it cannot. */
static char *dup_or_oom(ft_doc *d, const char *s) {
    if (!s) return NULL;
    char *c = strdup(s);
    if (!c) d->oom = 1;
    return c;
}

ft_doc *ft_doc_new(const char *title, const char *style) {
    ft_doc *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->root.kind = FT_DOC_ROOT;
    d->root.doc = d;
    d->style = style;
    d->title = dup_or_oom(d, title ? title : "");
    if (d->oom) {
        free(d);
        return NULL;
    }
    return d;
}

static void node_clear(ft_doc_node *n) {
    for (ft_doc_node *k = n->first, *next; k; k = next) {
        next = k->next;
        node_clear(k);
        free(k);
    }
    for (int i = 0; i < n->nspans; i++) {
        free(n->spans[i].cls);
        free(n->spans[i].text);
    }
    for (int i = 0; i < n->nrows * n->ncols; i++)
        free(n->cells[i]);
    free(n->spans);
    free(n->cells);
    free(n->cls);
    free(n->id);
    free(n->raw);
}

void ft_doc_free(ft_doc *d) {
    if (!d) return;
    node_clear(&d->root);
    free(d->title);
    free(d);
}

ft_doc_node *ft_doc_add(ft_doc_node *parent, ft_doc_kind kind, const char *cls, const char *id) {
    if (!parent) return NULL;
    ft_doc *d = parent->doc;
    ft_doc_node *n = calloc(1, sizeof *n);
    if (!n) {
        d->oom = 1;
        return NULL;
    }
    n->kind = kind;
    n->doc = d;
    n->cls = dup_or_oom(d, cls);
    n->id = dup_or_oom(d, id);
    if (parent->last)
        parent->last->next = n;
    else
        parent->first = n;
    parent->last = n;
    return n;
}

void ft_doc_anchor(ft_doc_node *n, const char *prefix, const char *id) {
    if (!n || !id) return;
    size_t len = strlen(prefix) + strlen(id) + 1;
    char *a = malloc(len);
    if (!a) {
        n->doc->oom = 1;
        return;
    }
    snprintf(a, len, "%s%s", prefix, id);
    free(n->id);
    n->id = a;
}

ft_doc_node *ft_doc_only(ft_doc_node *n, ft_doc_form form) {
    if (n) n->only = form;
    return n;
}

void ft_doc_drop(ft_doc_node *parent, ft_doc_node *child) {
    if (!parent || !child) return;
    ft_doc_node **at = &parent->first, *prev = NULL;
    while (*at && *at != child) {
        prev = *at;
        at = &(*at)->next;
    }
    if (!*at) return;
    *at = child->next;
    if (parent->last == child) parent->last = prev;
    node_clear(child);
    free(child);
}

void ft_doc_span_add(ft_doc_node *n, ft_doc_span_kind kind, ft_doc_form only, const char *cls,
                     const char *text) {
    if (!n) return;
    if (n->nspans == n->spans_cap) {
        int cap = n->spans_cap ? 2 * n->spans_cap : 4;
        ft_doc_span *s = realloc(n->spans, (size_t)cap * sizeof *s);
        if (!s) {
            n->doc->oom = 1;
            return;
        }
        n->spans = s;
        n->spans_cap = cap;
    }
    n->spans[n->nspans++] =
        (ft_doc_span){kind, only, dup_or_oom(n->doc, cls), dup_or_oom(n->doc, text ? text : "")};
}

void ft_doc_text(ft_doc_node *n, const char *text) {
    ft_doc_span_add(n, FT_DOC_TEXT, FT_DOC_BOTH, NULL, text);
}

void ft_doc_code(ft_doc_node *n, const char *text) {
    ft_doc_span_add(n, FT_DOC_CODE, FT_DOC_BOTH, NULL, text);
}

ft_doc_node *ft_doc_heading(ft_doc_node *parent, int level, const char *id, const char *text) {
    ft_doc_node *h = ft_doc_add(parent, FT_DOC_HEADING, NULL, id);
    if (h) h->level = level < 1 ? 1 : level > 6 ? 6 : level;
    ft_doc_text(h, text);
    return h;
}

ft_doc_node *ft_doc_para(ft_doc_node *parent, const char *cls, const char *text) {
    ft_doc_node *p = ft_doc_add(parent, FT_DOC_PARA, cls, NULL);
    if (text) ft_doc_text(p, text);
    return p;
}

ft_doc_node *ft_doc_raw(ft_doc_node *parent, char *markup, size_t n) {
    ft_doc_node *r = ft_doc_add(parent, FT_DOC_RAW, NULL, NULL);
    if (!r) {
        free(markup);
        return NULL;
    }
    r->only = FT_DOC_HTML;
    r->raw = markup;
    r->raw_len = n;
    return r;
}

ft_doc_node *ft_doc_table(ft_doc_node *parent, int ncols) {
    ft_doc_node *t = ft_doc_add(parent, FT_DOC_TABLE, NULL, NULL);
    if (t) t->ncols = ncols;
    return t;
}

char **ft_doc_row(ft_doc_node *t) {
    if (!t || t->doc->oom) return NULL;
    if (t->nrows == t->rows_cap) {
        int cap = t->rows_cap ? 2 * t->rows_cap : 8;
        char **c = realloc(t->cells, (size_t)cap * (size_t)(t->ncols ? t->ncols : 1) * sizeof *c);
        if (!c) {
            t->doc->oom = 1;
            return NULL;
        }
        t->cells = c;
        t->rows_cap = cap;
    }
    char **row = t->cells + (size_t)t->nrows * (size_t)t->ncols;
    for (int k = 0; k < t->ncols; k++)
        row[k] = NULL;
    t->nrows++;
    return row;
}

void ft_doc_cell(ft_doc_node *t, char **row, int k, const char *s) {
    if (!t || !row) return;
    row[k] = dup_or_oom(t->doc, s ? s : "");
}

const char *ft_doc_cell_at(const ft_doc_node *t, int r, int k) {
    const char *s = t->cells[(size_t)r * (size_t)t->ncols + (size_t)k];
    return s ? s : "";
}

int ft_doc_shows(ft_doc_form only, ft_doc_form form) { return only == FT_DOC_BOTH || only == form; }

const ft_doc_node *ft_doc_shown(const ft_doc_node *n, ft_doc_form form) {
    while (n && !ft_doc_shows(n->only, form))
        n = n->next;
    return n;
}

void ft_doc_spans(FILE *f, const ft_doc_node *n, ft_doc_form form,
                  void (*span)(FILE *, const ft_doc_span *)) {
    for (int i = 0; i < n->nspans; i++)
        if (ft_doc_shows(n->spans[i].only, form)) span(f, &n->spans[i]);
}

void ft_doc_put_escaped(FILE *f, const char *s, size_t n, ft_doc_entity entity) {
    for (size_t i = 0, len; i < n; i += len) {
        len = 1;
        const char *e = entity(s + i, n - i, &len);
        if (e)
            fputs(e, f);
        else
            fputc(s[i], f);
    }
}

void ft_doc_put_row(FILE *f, const ft_doc_node *t, int r, const char *open, const char *before,
                    const char *after, const char *close, ft_doc_entity entity) {
    fputs(open, f);
    for (int k = 0; k < t->ncols; k++) {
        const char *s = ft_doc_cell_at(t, r, k);
        fputs(before, f);
        ft_doc_put_escaped(f, s, strlen(s), entity);
        fputs(after, f);
    }
    fputs(close, f);
}

char *ft_doc_escaped(const char *s, ft_doc_entity entity) {
    size_t n = 1, all = strlen(s), len;
    for (size_t i = 0; i < all; i += len) {
        len = 1;
        const char *e = entity(s + i, all - i, &len);
        n += e ? strlen(e) : 1;
    }
    char *out = malloc(n), *q = out;
    if (!out) return NULL;
    for (size_t i = 0; i < all; i += len) {
        len = 1;
        const char *e = entity(s + i, all - i, &len);
        if (e) {
            size_t k = strlen(e);
            memcpy(q, e, k);
            q += k;
        } else {
            *q++ = s[i];
        }
    }
    *q = '\0';
    return out;
}
