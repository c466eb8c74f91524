/* report_doc.h: the report's document model. report_render.c builds the page once as data
 * (sections, headings, paragraphs of text and code spans, tables, lists, quotes, banners,
 * figures) and two writers write it: HTML (report_doc_html.c) and Markdown (report_doc_md.c).
 * The builder writes no markup and escapes nothing; each writer escapes the document's text for
 * its format, once, as it writes it.
 *
 * A node or a span shows in both formats unless `only` names one: the page draws its charts (raw
 * SVG) where the Markdown file has their tables alone, and where the two say one thing in their
 * own ways (a verdict is a coloured badge on the page with its reason beneath, and bold with its
 * reason in the Markdown) each part says for which format it is.
 */
#ifndef FLARETUNE_REPORT_DOC_H
#define FLARETUNE_REPORT_DOC_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Which writers show a node or a span. */
typedef enum { FT_DOC_BOTH, FT_DOC_HTML, FT_DOC_MD } ft_doc_form;

typedef enum {
    FT_DOC_TEXT,  /* text of the document */
    FT_DOC_CODE,  /* a code span */
    FT_DOC_SEP,   /* the middle dot between the parts of a line, spaced */
    FT_DOC_BADGE, /* a label that stands out: coloured by its class on the page, bold in Markdown */
} ft_doc_span_kind;

typedef struct ft_doc_span {
    ft_doc_span_kind kind;
    ft_doc_form only;
    char *cls, *text; /* owned; cls: a badge's class */
} ft_doc_span;

typedef enum {
    FT_DOC_ROOT,    /* the page: its blocks */
    FT_DOC_SECTION, /* id; blocks (<section> on the page) */
    FT_DOC_HEADING, /* level, id; spans */
    FT_DOC_PARA,    /* cls; spans */
    FT_DOC_CAPTION, /* spans: a figure's caption (a paragraph in Markdown) */
    FT_DOC_NOTE,    /* cls, id; spans: a banner (a block quote in Markdown) */
    FT_DOC_FIGURE,  /* id; blocks: heading, drawing, caption, table */
    FT_DOC_CARDS,   /* CARD children: boxes on the page, a list in Markdown */
    FT_DOC_CARD,    /* cls, id; a lead PARA, then blocks (sub-items in Markdown) */
    FT_DOC_QUOTE,   /* spans: a quotation; PARA children: its source */
    FT_DOC_LIST,    /* cls; PARA children, one per item */
    FT_DOC_TABLE,   /* a header row, then the rows */
    FT_DOC_RAW,     /* markup for the page alone (an SVG drawing), written as it is */
} ft_doc_kind;

typedef struct ft_doc_node {
    ft_doc_kind kind;
    ft_doc_form only;
    int level;      /* a heading's, 1..6 */
    char *cls, *id; /* owned; a class on the page and an anchor (made safe by the writer) */
    ft_doc_span *spans;
    int nspans, spans_cap;
    int ncols, nrows, rows_cap; /* a table: nrows counts the header */
    char **cells;               /* row-major, owned */
    char *raw;                  /* owned */
    size_t raw_len;
    struct ft_doc_node *first, *last, *next;
    struct ft_doc *doc;
} ft_doc_node;

typedef struct ft_doc {
    ft_doc_node root;
    char *title;       /* the page's <title> */
    const char *style; /* the page's style sheet: the builder's constant */
    int oom;           /* a part could not be added: the document is incomplete */
} ft_doc;

/* An empty document, or NULL when out of memory. */
ft_doc *ft_doc_new(const char *title, const char *style);
void ft_doc_free(ft_doc *d);

/* Building. Each call on a NULL parent does nothing and returns NULL, and each failure to
 * allocate sets the document's oom and returns NULL, so a builder checks oom once, at the end.
 * Strings are copied; NULL cls or id is none. */
ft_doc_node *ft_doc_add(ft_doc_node *parent, ft_doc_kind kind, const char *cls, const char *id);
ft_doc_node *ft_doc_heading(ft_doc_node *parent, int level, const char *id, const char *text);
/* n's id: prefix then id, when id is not NULL (an anchor made of a string of the document). */
void ft_doc_anchor(ft_doc_node *n, const char *prefix, const char *id);
/* n shown in one format alone; returns n. */
ft_doc_node *ft_doc_only(ft_doc_node *n, ft_doc_form form);
/* A paragraph, with text as its first span unless text is NULL. */
ft_doc_node *ft_doc_para(ft_doc_node *parent, const char *cls, const char *text);
void ft_doc_span_add(ft_doc_node *n, ft_doc_span_kind kind, ft_doc_form only, const char *cls,
                     const char *text);
void ft_doc_text(ft_doc_node *n, const char *text);
void ft_doc_code(ft_doc_node *n, const char *text);
/* Markup for the page alone; the document takes markup (malloc'd), freed even on failure. */
ft_doc_node *ft_doc_raw(ft_doc_node *parent, char *markup, size_t n);
/* A table of ncols columns; its first row is the header. */
ft_doc_node *ft_doc_table(ft_doc_node *parent, int ncols);
/* A new row of empty cells; returns its first cell, or NULL. */
char **ft_doc_row(ft_doc_node *table);
void ft_doc_cell(ft_doc_node *table, char **row, int k, const char *s);
/* Cell (r, k); "" when empty. */
const char *ft_doc_cell_at(const ft_doc_node *table, int r, int k);
/* Remove child from parent and free it. */
void ft_doc_drop(ft_doc_node *parent, ft_doc_node *child);

/* Whether a node or a span shows in the format `form` (FT_DOC_HTML or FT_DOC_MD). */
int ft_doc_shows(ft_doc_form only, ft_doc_form form);
/* n, or the first node after it that shows in form; NULL when none. */
const ft_doc_node *ft_doc_shown(const ft_doc_node *n, ft_doc_form form);
/* Each span of n that shows in form, through a writer's `span`. */
void ft_doc_spans(FILE *f, const ft_doc_node *n, ft_doc_form form,
                  void (*span)(FILE *, const ft_doc_span *));

/* The replacement of the character at s (n bytes are left) in a format, or NULL when it stays.
 * *len is 1 on the call: a format that replaces a character of more bytes sets it to their
 * count. */
typedef const char *(*ft_doc_entity)(const char *s, size_t n, size_t *len);
/* n bytes of s with each character's replacement, to f. */
void ft_doc_put_escaped(FILE *f, const char *s, size_t n, ft_doc_entity entity);
/* s with each character's replacement, or NULL when out of memory; free() it. */
char *ft_doc_escaped(const char *s, ft_doc_entity entity);
/* Row r of table t to f: open, each cell escaped between before and after, then close. */
void ft_doc_put_row(FILE *f, const ft_doc_node *t, int r, const char *open, const char *before,
                    const char *after, const char *close, ft_doc_entity entity);

/* The writers. */
void ft_doc_write_html(const ft_doc *d, FILE *f);
void ft_doc_write_md(const ft_doc *d, FILE *f);
/* n bytes of s escaped for XML text and attributes, to f: the SVG charts' text. */
void ft_doc_html_text(FILE *f, const char *s, size_t n);

#ifdef __cplusplus
}
#endif
#endif
