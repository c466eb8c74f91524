/* report_doc_md.c: the report's document model (tuner/report_doc.h) written as Markdown:
 * headings, paragraphs and tables; a banner as a block quote; cards as a list, each card's lead
 * paragraph (and the quotation after it) on its bullet and its other blocks as sub-items. The
 * page's drawings are left out: each chart's table holds its data. Every string of the document
 * is escaped here, once: text with backslashes, code spans fenced by enough backticks.
 */
#include <string.h>

#include "tuner/report.h"
#include "tuner/report_doc.h"

/* The replacement of one byte in Markdown text (a table cell or a line), or NULL when it stays:
 * what would be markup escaped with a backslash, control characters a space. */
static const char *md_entity(const char *s, size_t n, size_t *len) {
    (void)n, (void)len;
    unsigned char c = (unsigned char)*s;
    switch (c) {
    case '\\': return "\\\\";
    case '|': return "\\|";
    case '<': return "\\<";
    case '>': return "\\>";
    case '&': return "\\&";
    case '`': return "\\`";
    default: return c < 0x20 ? " " : NULL;
    }
}

char *ft_report_md_escape(const char *s) { return ft_doc_escaped(s, md_entity); }

static void put_md(FILE *f, const char *s) {
    if (s) ft_doc_put_escaped(f, s, strlen(s), md_entity);
}

/* A code span that holds any text: as many backticks around it as it never contains. */
static void code(FILE *f, const char *s) {
    int run = 0, longest = 0;
    for (const char *p = s; *p; p++) {
        run = *p == '`' ? run + 1 : 0;
        if (run > longest) longest = run;
    }
    for (int i = 0; i <= longest; i++)
        fputc('`', f);
    if (longest) fputc(' ', f);
    for (const char *p = s; *p; p++)
        fputc(*p == '\n' || *p == '\r' ? ' ' : *p, f);
    if (longest) fputc(' ', f);
    for (int i = 0; i <= longest; i++)
        fputc('`', f);
}

static void span(FILE *f, const ft_doc_span *s) {
    switch (s->kind) {
    case FT_DOC_TEXT: put_md(f, s->text); break;
    case FT_DOC_CODE: code(f, s->text); break;
    case FT_DOC_SEP: fputs(" · ", f); break;
    case FT_DOC_BADGE:
        fputs("**", f);
        put_md(f, s->text);
        fputs("**", f);
        break;
    }
}

static void spans(FILE *f, const ft_doc_node *n) { ft_doc_spans(f, n, FT_DOC_MD, span); }

static void table(FILE *f, const ft_doc_node *t) {
    if (!t->nrows || !t->ncols) return;
    for (int r = 0; r < t->nrows; r++) {
        ft_doc_put_row(f, t, r, "|", " ", " |", "\n", md_entity);
        if (r == 0) {
            fputs("|", f);
            for (int k = 0; k < t->ncols; k++)
                fputs("---|", f);
            fputs("\n", f);
        }
    }
    fputs("\n", f);
}

/* "quotation" (source). */
static void quote(FILE *f, const ft_doc_node *q) {
    fputs("\"", f);
    spans(f, q);
    fputs("\"", f);
    for (const ft_doc_node *s = q->first; s; s = s->next) {
        fputs(" (", f);
        spans(f, s);
        fputs(")", f);
    }
}

/* n, or the next node after it that Markdown shows. */
static const ft_doc_node *shown(const ft_doc_node *n) { return ft_doc_shown(n, FT_DOC_MD); }

/* Each item of a list on its own line after `bullet`. */
static void items(FILE *f, const ft_doc_node *list, const char *bullet) {
    for (const ft_doc_node *k = shown(list->first); k; k = shown(k->next)) {
        fputs(bullet, f);
        spans(f, k);
        fputs("\n", f);
    }
}

/* A card: its lead paragraph on the bullet, with a quotation that follows it after ": ", then
 * every other block as a sub-item (a list's items each one). */
static void card(FILE *f, const ft_doc_node *c) {
    const ft_doc_node *k = shown(c->first);
    fputs("- ", f);
    if (k) {
        spans(f, k);
        k = shown(k->next);
    }
    if (k && k->kind == FT_DOC_QUOTE) {
        fputs(": ", f);
        quote(f, k);
        k = shown(k->next);
    }
    fputs("\n", f);
    for (; k; k = shown(k->next)) {
        if (k->kind == FT_DOC_LIST) {
            items(f, k, "  - ");
            continue;
        }
        fputs("  - ", f);
        if (k->kind == FT_DOC_QUOTE)
            quote(f, k);
        else
            spans(f, k);
        fputs("\n", f);
    }
}

static void block(FILE *f, const ft_doc_node *n) {
    switch (n->kind) {
    case FT_DOC_ROOT:
    case FT_DOC_SECTION:
    case FT_DOC_FIGURE:
        for (const ft_doc_node *k = shown(n->first); k; k = shown(k->next))
            block(f, k);
        break;
    case FT_DOC_HEADING:
        for (int i = 0; i < n->level; i++)
            fputc('#', f);
        fputc(' ', f);
        spans(f, n);
        fputs("\n\n", f);
        break;
    case FT_DOC_NOTE:
    case FT_DOC_PARA:
    case FT_DOC_CAPTION:
        if (n->kind == FT_DOC_NOTE) fputs("> ", f);
        spans(f, n);
        fputs("\n\n", f);
        break;
    case FT_DOC_QUOTE:
        quote(f, n);
        fputs("\n\n", f);
        break;
    case FT_DOC_CARD: card(f, n); break;
    case FT_DOC_CARDS:
        for (const ft_doc_node *k = shown(n->first); k; k = shown(k->next))
            card(f, k);
        fputs("\n", f);
        break;
    case FT_DOC_LIST:
        items(f, n, "- ");
        fputs("\n", f);
        break;
    case FT_DOC_TABLE: table(f, n); break;
    case FT_DOC_RAW: break; /* the page's alone */
    }
}

void ft_doc_write_md(const ft_doc *d, FILE *f) { block(f, &d->root); }
