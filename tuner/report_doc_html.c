/* report_doc_html.c: the report's document model (tuner/report_doc.h) written as one HTML page
 * that is also well-formed XML: only the five XML entities and numeric references, every tag
 * closed, no script and nothing fetched. Every string of the document is escaped here, once; the
 * SVG charts escape their text through ft_doc_html_text.
 */
#include <string.h>

#include "tuner/report.h"
#include "tuner/report_doc.h"

/* The replacement of a character in XML text, or NULL when it stays. Characters XML 1.0 does
 * not allow become a space: control characters, and U+FFFE and U+FFFF, which a JSON string
 * may hold (UTF-16's surrogates, also not allowed, never reach here: the JSON reader refuses
 * them). */
static const char *xml_entity(const char *s, size_t n, size_t *len) {
    const unsigned char *c = (const unsigned char *)s;
    switch (c[0]) {
    case '&': return "&amp;";
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '"': return "&quot;";
    case '\'': return "&#39;";
    case '\t':
    case '\n':
    case '\r': return NULL;
    default: break;
    }
    if (c[0] < 0x20) return " ";
    if (n >= 3 && c[0] == 0xEF && c[1] == 0xBF && (c[2] == 0xBE || c[2] == 0xBF)) {
        *len = 3;
        return " ";
    }
    return NULL;
}

char *ft_report_xml_escape(const char *s) { return ft_doc_escaped(s, xml_entity); }

void ft_doc_html_text(FILE *f, const char *s, size_t n) { ft_doc_put_escaped(f, s, n, xml_entity); }

static void put_xml(FILE *f, const char *s) {
    if (s) ft_doc_html_text(f, s, strlen(s));
}

/* An id attribute: letters, digits, - _ . kept, any other byte '-'. */
static void put_id(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        int keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '-' || c == '_' || c == '.';
        fputc(keep ? c : '-', f);
    }
}

/* <tag class="..." id="...">, each attribute when the node has it. */
static void open_tag(FILE *f, const char *tag, const ft_doc_node *n) {
    fprintf(f, "<%s", tag);
    if (n->cls) {
        fputs(" class=\"", f);
        put_xml(f, n->cls);
        fputs("\"", f);
    }
    if (n->id) {
        fputs(" id=\"", f);
        put_id(f, n->id);
        fputs("\"", f);
    }
    fputs(">", f);
}

static void span(FILE *f, const ft_doc_span *s) {
    switch (s->kind) {
    case FT_DOC_TEXT: put_xml(f, s->text); break;
    case FT_DOC_CODE:
        fputs("<code>", f);
        put_xml(f, s->text);
        fputs("</code>", f);
        break;
    case FT_DOC_SEP: fputs(" &#183; ", f); break;
    case FT_DOC_BADGE:
        fputs("<span class=\"badge ", f);
        put_xml(f, s->cls);
        fputs("\">", f);
        put_xml(f, s->text);
        fputs("</span>", f);
        break;
    }
}

static void spans(FILE *f, const ft_doc_node *n) { ft_doc_spans(f, n, FT_DOC_HTML, span); }

/* <tag ...>spans</tag> and a newline. */
static void spans_in(FILE *f, const char *tag, const ft_doc_node *n) {
    open_tag(f, tag, n);
    spans(f, n);
    fprintf(f, "</%s>\n", tag);
}

static void table(FILE *f, const ft_doc_node *t) {
    if (!t->nrows) return;
    fputs("<table>\n<thead>", f);
    ft_doc_put_row(f, t, 0, "<tr>", "<th>", "</th>", "</tr></thead>\n<tbody>\n", xml_entity);
    for (int r = 1; r < t->nrows; r++)
        ft_doc_put_row(f, t, r, "<tr>", "<td>", "</td>", "</tr>\n", xml_entity);
    fputs("</tbody>\n</table>\n", f);
}

/* A quotation in typographic quotes, then its source after a dash. */
static void quote(FILE *f, const ft_doc_node *q) {
    fputs("<blockquote><p>&#8220;", f);
    spans(f, q);
    fputs("&#8221;</p>", f);
    for (const ft_doc_node *s = q->first; s; s = s->next) {
        open_tag(f, "p", s);
        fputs("&#8212; ", f);
        spans(f, s);
        fputs("</p>", f);
    }
    fputs("</blockquote>\n", f);
}

static void block(FILE *f, const ft_doc_node *n);

static void blocks(FILE *f, const ft_doc_node *n) {
    for (const ft_doc_node *k = ft_doc_shown(n->first, FT_DOC_HTML); k;
         k = ft_doc_shown(k->next, FT_DOC_HTML))
        block(f, k);
}

/* A list's items, one line of spans each. */
static void items(FILE *f, const ft_doc_node *n) {
    for (const ft_doc_node *k = ft_doc_shown(n->first, FT_DOC_HTML); k;
         k = ft_doc_shown(k->next, FT_DOC_HTML))
        spans_in(f, "li", k);
}

/* <tag ...>, a newline, what is inside, </tag>. */
static void container(FILE *f, const char *tag, const ft_doc_node *n,
                      void (*inside)(FILE *, const ft_doc_node *)) {
    open_tag(f, tag, n);
    fputs("\n", f);
    inside(f, n);
    fprintf(f, "</%s>\n", tag);
}

static void block(FILE *f, const ft_doc_node *n) {
    static const char *const h[] = {"h1", "h2", "h3", "h4", "h5", "h6"};
    switch (n->kind) {
    case FT_DOC_ROOT:
    case FT_DOC_CARDS: blocks(f, n); break;
    case FT_DOC_SECTION: container(f, "section", n, blocks); break;
    case FT_DOC_FIGURE: container(f, "figure", n, blocks); break;
    case FT_DOC_CARD: container(f, "div", n, blocks); break;
    case FT_DOC_LIST: container(f, "ul", n, items); break;
    case FT_DOC_HEADING: spans_in(f, h[n->level - 1], n); break;
    case FT_DOC_PARA: spans_in(f, "p", n); break;
    case FT_DOC_CAPTION: spans_in(f, "figcaption", n); break;
    case FT_DOC_NOTE:
        open_tag(f, "div", n);
        fputs("<p>", f);
        spans(f, n);
        fputs("</p></div>\n", f);
        break;
    case FT_DOC_QUOTE: quote(f, n); break;
    case FT_DOC_TABLE: table(f, n); break;
    case FT_DOC_RAW: fwrite(n->raw, 1, n->raw_len, f); break;
    }
}

void ft_doc_write_html(const ft_doc *d, FILE *f) {
    fputs("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n"
          "<meta charset=\"utf-8\"/>\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n<title>",
          f);
    put_xml(f, d->title);
    fprintf(f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n", d->style ? d->style : "");
    block(f, &d->root);
    fputs("</body>\n</html>\n", f);
}
