/* expr.c: the safe evaluator of Python expressions in tuning files (core/expr.h).
 *
 * A recursive-descent parser following Python's grammar for the subset it reads (conditional,
 * or, and, not, comparisons, + -, * / // %, unary, **, calls and indexing, atoms) builds nodes in
 * arrays; evaluation walks them. Lists built during an evaluation (a literal, range) live in an
 * arena freed when it ends.
 */
#include "core/expr.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
    N_NUM,
    N_NAME,
    N_NEG,
    N_POS,
    N_NOT,
    N_BIN,
    N_CMP,
    N_AND,
    N_OR,
    N_IF,
    N_CALL,
    N_INDEX,
    N_LIST,
    N_COMP
} nkind;

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW };
enum { C_LT, C_LE, C_GT, C_GE, C_EQ, C_NE, C_IN, C_NOTIN };
enum { F_MIN, F_MAX, F_ABS, F_INT, F_FLOAT, F_ROUND, F_LEN, F_RANGE, F_LIST, F_COUNT };
static const char *const FN_NAMES[F_COUNT] = {"min",   "max", "abs",   "int", "float",
                                              "round", "len", "range", "list"};

typedef struct node {
    nkind kind;
    int op;        /* N_BIN: OP_*; N_CALL: F_* */
    int pos;       /* where it starts in the text, for messages */
    ft_expr_value v; /* N_NUM */
    int slot;      /* N_NAME: a caller's slot, or a comprehension's variable past them */
    int a, b, c;   /* children: N_NEG/POS/NOT a; N_BIN, N_INDEX a b; N_IF a (then) b (cond) c;
                    * N_COMP a (item) b (iterable) c (condition, or -1), op its variable */
    int first, count; /* N_CMP, N_AND, N_OR, N_CALL, N_LIST: kids[first..first+count) */
} node;

/* The tree of an expression: its nodes, the operands of those with a list of them, and the
 * slots it reads. The parser grows it; the compiled expression keeps it. */
typedef struct tree {
    node *nodes;
    int nnodes, capnodes;
    int *kids, *kops; /* kops: N_CMP's operators, beside its operands (kops[first+1..]) */
    int nkids, capkids;
    unsigned char *used; /* per slot */
    char **strs;         /* the string literals' texts, which N_NUM nodes point at */
    int nstrs, capstrs;
} tree;

static void tree_free(tree *t) {
    free(t->nodes);
    free(t->kids);
    free(t->kops);
    free(t->used);
    for (int i = 0; i < t->nstrs; i++)
        free(t->strs[i]);
    free(t->strs);
}

struct ft_expr {
    char *text;
    tree t;
    int root;
    int nslots;  /* the caller's; comprehension variables are slots nslots.. */
};

/* Comprehension variables of one expression, at most (each comprehension has one). */
#define MAX_LOCALS 8

/* ---- parsing ---------------------------------------------------------------------------------- */

typedef enum { T_END, T_NUM, T_NAME, T_OP, T_STR } tkind;

typedef struct parser {
    const char *src;
    size_t len, pos;
    tkind tk;
    size_t tstart, tlen;
    ft_expr_value tnum;
    char op[3]; /* T_OP's spelling */
    const char *const *names;
    int nnames;
    tree t;
    int depth;
    /* Inside a list literal a name not known yet may be a comprehension's variable, bound by
     * the `for` that follows its item: such names wait here until their list closes. */
    int list_depth, nlocals, npend;
    struct pending {
        int node;
        size_t start, len;
    } pend[64];
    ft_err *err;
    ft_status st;
} parser;

static int fail(parser *p, size_t at, const char *what) {
    if (p->st == FT_OK)
        p->st = ft_err_set(p->err, FT_EINVAL, "expression \"%.200s\": %s at column %zu", p->src,
                           what, at + 1);
    return -1;
}

static int is_name_start(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_name_char(int c) { return is_name_start(c) || (c >= '0' && c <= '9'); }

static void next(parser *p) {
    const char *s = p->src;
    while (p->pos < p->len && (s[p->pos] == ' ' || s[p->pos] == '\t' || s[p->pos] == '\n' ||
                               s[p->pos] == '\r'))
        p->pos++;
    p->tstart = p->pos;
    if (p->pos >= p->len) {
        p->tk = T_END;
        p->tlen = 0;
        return;
    }
    int c = (unsigned char)s[p->pos];
    if ((c >= '0' && c <= '9') || (c == '.' && p->pos + 1 < p->len && s[p->pos + 1] >= '0' &&
                                   s[p->pos + 1] <= '9')) {
        size_t i = p->pos;
        int isfloat = 0;
        while (i < p->len && ((s[i] >= '0' && s[i] <= '9') || s[i] == '_')) i++;
        if (i < p->len && s[i] == '.') {
            isfloat = 1;
            i++;
            while (i < p->len && s[i] >= '0' && s[i] <= '9') i++;
        }
        if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
            size_t j = i + 1;
            if (j < p->len && (s[j] == '+' || s[j] == '-')) j++;
            if (j < p->len && s[j] >= '0' && s[j] <= '9') {
                isfloat = 1;
                i = j;
                while (i < p->len && s[i] >= '0' && s[i] <= '9') i++;
            }
        }
        if (i < p->len && is_name_char((unsigned char)s[i])) {
            fail(p, p->pos, "malformed number");
            p->tk = T_END;
            return;
        }
        char buf[64];
        size_t n = 0;
        for (size_t k = p->pos; k < i && n + 1 < sizeof buf; k++)
            if (s[k] != '_') buf[n++] = s[k];
        buf[n] = 0;
        if (i - p->pos >= sizeof buf) {
            fail(p, p->pos, "number too long");
            p->tk = T_END;
            return;
        }
        if (isfloat) {
            p->tnum = ft_expr_float(strtod(buf, NULL));
        } else {
            errno = 0;
            unsigned long long u = strtoull(buf, NULL, 10);
            if (errno == ERANGE || u > (unsigned long long)INT64_MAX) {
                fail(p, p->pos, "integer too large");
                p->tk = T_END;
                return;
            }
            p->tnum = ft_expr_int((long long)u);
        }
        p->tk = T_NUM;
        p->tlen = i - p->pos;
        p->pos = i;
        return;
    }
    if (c == '\'' || c == '"') { /* a string literal, its text between the quotes */
        size_t i = p->pos + 1;
        while (i < p->len && s[i] != c && s[i] != '\\')
            i++;
        if (i >= p->len || s[i] != c) {
            fail(p, p->pos,
                 i < p->len ? "a backslash in a string (escapes are not read)"
                            : "a string without its closing quote");
            p->tk = T_END;
            return;
        }
        p->tk = T_STR;
        p->tlen = i + 1 - p->pos;
        p->pos = i + 1;
        return;
    }
    if (is_name_start(c)) {
        size_t i = p->pos;
        while (i < p->len && is_name_char((unsigned char)s[i])) i++;
        p->tk = T_NAME;
        p->tlen = i - p->pos;
        p->pos = i;
        return;
    }
    static const char *const two[] = {"//", "**", "<=", ">=", "==", "!="};
    for (size_t k = 0; k < sizeof two / sizeof two[0]; k++)
        if (p->pos + 1 < p->len && s[p->pos] == two[k][0] && s[p->pos + 1] == two[k][1]) {
            p->tk = T_OP;
            memcpy(p->op, two[k], 3);
            p->tlen = 2;
            p->pos += 2;
            return;
        }
    if (strchr("+-*/%<>()[],", c)) {
        p->tk = T_OP;
        p->op[0] = (char)c;
        p->op[1] = 0;
        p->tlen = 1;
        p->pos++;
        return;
    }
    char what[64];
    if (c >= 0x20 && c < 0x7f)
        snprintf(what, sizeof what, "unexpected character '%c'", c);
    else
        snprintf(what, sizeof what, "unexpected byte 0x%02x", c);
    fail(p, p->pos, what);
    p->tk = T_END;
}

static int tok_is(const parser *p, const char *op) {
    return p->tk == T_OP && strcmp(p->op, op) == 0;
}
static int tok_word(const parser *p, const char *w) {
    return p->tk == T_NAME && p->tlen == strlen(w) && memcmp(p->src + p->tstart, w, p->tlen) == 0;
}

static int new_node(parser *p, nkind k, size_t pos) {
    if (p->st != FT_OK) return -1;
    if (p->t.nnodes == p->t.capnodes) {
        int cap = p->t.capnodes ? p->t.capnodes * 2 : 32;
        node *n = realloc(p->t.nodes, (size_t)cap * sizeof *n);
        if (!n) {
            p->st = ft_err_set(p->err, FT_ENOMEM, "expression: out of memory");
            return -1;
        }
        p->t.nodes = n;
        p->t.capnodes = cap;
    }
    node *n = &p->t.nodes[p->t.nnodes];
    memset(n, 0, sizeof *n);
    n->kind = k;
    n->pos = (int)pos;
    n->a = n->b = n->c = -1;
    return p->t.nnodes++;
}

/* A node of kind k with its operator and children (-1: none), or -1 when memory is short. */
static int new_node_of(parser *p, nkind k, size_t pos, int op, int a, int b, int c) {
    int nd = new_node(p, k, pos);
    if (nd >= 0) {
        p->t.nodes[nd].op = op;
        p->t.nodes[nd].a = a;
        p->t.nodes[nd].b = b;
        p->t.nodes[nd].c = c;
    }
    return nd;
}

/* Children gathered in a scratch list, then stored contiguously in kids. */
typedef struct kidlist {
    int v[256], o[256];
    int n;
} kidlist;

static int push_kid(parser *p, kidlist *k, int v, int op, size_t at) {
    if (k->n == (int)(sizeof k->v / sizeof k->v[0])) return fail(p, at, "too many operands");
    k->v[k->n] = v;
    k->o[k->n] = op;
    k->n++;
    return 0;
}

static int store_kids(parser *p, int nd, const kidlist *k) {
    if (p->st != FT_OK) return -1;
    if (p->t.nkids + k->n > p->t.capkids) {
        int cap = p->t.capkids ? p->t.capkids : 32;
        while (cap < p->t.nkids + k->n) cap *= 2;
        int *a = realloc(p->t.kids, (size_t)cap * sizeof *a);
        if (a) p->t.kids = a;
        int *b = a ? realloc(p->t.kops, (size_t)cap * sizeof *b) : NULL;
        if (b) p->t.kops = b;
        if (!a || !b) {
            p->st = ft_err_set(p->err, FT_ENOMEM, "expression: out of memory");
            return -1;
        }
        p->t.capkids = cap;
    }
    p->t.nodes[nd].first = p->t.nkids;
    p->t.nodes[nd].count = k->n;
    for (int i = 0; i < k->n; i++) {
        p->t.kids[p->t.nkids + i] = k->v[i];
        p->t.kops[p->t.nkids + i] = k->o[i];
    }
    p->t.nkids += k->n;
    return nd;
}

static int p_expr(parser *p);

static int expect(parser *p, const char *op) {
    if (!tok_is(p, op)) {
        char what[32];
        snprintf(what, sizeof what, "expected '%s'", op);
        return fail(p, p->tstart, what);
    }
    next(p);
    return 0;
}

static int unknown_name(parser *p, size_t start, size_t len) {
    char what[96];
    snprintf(what, sizeof what, "unknown name '%.*s'", (int)(len > 40 ? 40 : len), p->src + start);
    return fail(p, start, what);
}

static int p_bool(parser *p, int is_or);

/* Bind the names waiting in pend[from..to) that spell the variable at var/vlen to slot. */
static void bind_pending(parser *p, int from, int to, size_t var, size_t vlen, int slot) {
    for (int i = from; i < to; i++)
        if (p->pend[i].node >= 0 && p->pend[i].len == vlen &&
            memcmp(p->src + p->pend[i].start, p->src + var, vlen) == 0) {
            p->t.nodes[p->pend[i].node].slot = slot;
            p->pend[i].node = -1;
        }
}

/* The rest of "[ITEM for NAME in ITERABLE if COND ...]" after ITEM (node item, its waiting
 * names from pend[mark..]): Python's list comprehension with one `for` and any `if`s. The
 * iterable is read outside the loop, so only the item's and the conditions' names may be the
 * variable. Returns the N_COMP node, or -1; the ']' is left for the caller. */
static int p_comprehension(parser *p, int item, int mark, size_t at) {
    next(p); /* for */
    size_t var = p->tstart, vlen = p->tlen;
    if (p->tk != T_NAME || tok_word(p, "in") || tok_word(p, "for") || tok_word(p, "if"))
        return fail(p, p->tstart, "expected a name after 'for'");
    for (int s = 0; s < p->nnames; s++)
        if (p->names[s] && strlen(p->names[s]) == vlen &&
            memcmp(p->names[s], p->src + var, vlen) == 0)
            return fail(p, var, "a loop variable may not reuse a name of the file");
    if (p->nlocals == MAX_LOCALS) return fail(p, var, "too many comprehensions");
    const int slot = p->nnames + p->nlocals++;
    next(p);
    if (!tok_word(p, "in")) return fail(p, p->tstart, "expected 'in'");
    next(p);
    const int item_end = p->npend;
    int iter = p_bool(p, 1), cond = -1;
    const int cond_from = p->npend;
    while (iter >= 0 && p->st == FT_OK && tok_word(p, "if")) {
        size_t cat = p->tstart;
        next(p);
        int c = p_bool(p, 1);
        if (c < 0) return -1;
        if (cond < 0) {
            cond = c;
        } else { /* "if A if B": both must hold */
            kidlist k = {.n = 0};
            push_kid(p, &k, cond, 0, cat);
            push_kid(p, &k, c, 0, cat);
            int nd = new_node(p, N_AND, cat);
            cond = nd < 0 ? -1 : store_kids(p, nd, &k);
            if (cond < 0) return -1;
        }
    }
    if (iter < 0 || p->st != FT_OK) return -1;
    if (tok_word(p, "for"))
        return fail(p, p->tstart, "one 'for' to a list: nested loops are not read");
    bind_pending(p, mark, item_end, var, vlen, slot);
    bind_pending(p, cond_from, p->npend, var, vlen, slot);
    return new_node_of(p, N_COMP, at, slot, item, iter, cond);
}

/* A list literal "[e, e, ...]" or comprehension "[e for x in ...]", after its '['. */
static int p_list(parser *p, size_t at);

/* A node of kind (with op) whose kids are the items "e, e, ..." up to `close`, a trailing comma
 * allowed: a list's or a call's arguments (the first already parsed when first >= 0). The
 * closing token is taken. Returns the node, or -1. */
static int p_items(parser *p, nkind kind, int op, const char *close, size_t at, int first) {
    kidlist *k = calloc(1, sizeof *k);
    if (!k) return fail(p, at, "out of memory");
    int nd = new_node_of(p, kind, at, op, -1, -1, -1);
    while (nd >= 0 && p->st == FT_OK && (first >= 0 || !tok_is(p, close))) {
        int e = first >= 0 ? first : p_expr(p);
        first = -1;
        if (e < 0 || push_kid(p, k, e, 0, p->tstart) < 0) break;
        if (tok_is(p, ",")) {
            next(p);
        } else if (!tok_is(p, close)) {
            char what[32];
            snprintf(what, sizeof what, "expected ',' or '%s'", close);
            fail(p, p->tstart, what);
            break;
        }
    }
    if (p->st == FT_OK) {
        next(p);
        store_kids(p, nd, k);
    }
    free(k);
    return p->st == FT_OK ? nd : -1;
}

static int p_list(parser *p, size_t at) {
    const int mark = p->npend;
    p->list_depth++;
    int nd;
    if (tok_is(p, "]")) {
        nd = p_items(p, N_LIST, 0, "]", at, -1);
    } else {
        int item = p_expr(p);
        if (item >= 0 && tok_word(p, "for")) {
            nd = p_comprehension(p, item, mark, at);
            if (nd >= 0 && expect(p, "]") < 0) nd = -1;
        } else {
            nd = item < 0 ? -1 : p_items(p, N_LIST, 0, "]", at, item);
        }
    }
    p->list_depth--;
    /* Names still waiting when the outermost list closes were never bound: unknown. */
    if (nd >= 0 && p->list_depth == 0) {
        for (int i = mark; i < p->npend; i++)
            if (p->pend[i].node >= 0) return unknown_name(p, p->pend[i].start, p->pend[i].len);
        p->npend = mark;
    }
    return nd;
}

/* The text of the string token, kept with the tree; -1 when out of memory. */
static int keep_string(parser *p) {
    tree *t = &p->t;
    if (t->nstrs == t->capstrs) {
        int cap = t->capstrs ? 2 * t->capstrs : 4;
        char **more = realloc(t->strs, (size_t)cap * sizeof *more);
        if (!more) return fail(p, p->tstart, "out of memory");
        t->strs = more;
        t->capstrs = cap;
    }
    char *text = strndup(p->src + p->tstart + 1, p->tlen - 2);
    if (!text) return fail(p, p->tstart, "out of memory");
    t->strs[t->nstrs] = text;
    return t->nstrs++;
}

static int p_atom(parser *p) {
    size_t at = p->tstart;
    if (p->tk == T_NUM) {
        int n = new_node(p, N_NUM, at);
        if (n >= 0) p->t.nodes[n].v = p->tnum;
        next(p);
        return n;
    }
    if (p->tk == T_STR) {
        int k = keep_string(p), n = k < 0 ? -1 : new_node(p, N_NUM, at);
        if (n >= 0) p->t.nodes[n].v = ft_expr_str(p->t.strs[k]);
        next(p);
        return n;
    }
    if (tok_is(p, "(")) {
        next(p);
        if (tok_is(p, ")")) return p_items(p, N_LIST, 0, ")", at, -1); /* () */
        int e = p_expr(p);
        if (e >= 0 && tok_is(p, ",")) return p_items(p, N_LIST, 0, ")", at, e); /* a tuple */
        if (e < 0 || expect(p, ")") < 0) return -1;
        return e;
    }
    if (tok_is(p, "[")) {
        next(p);
        return p_list(p, at);
    }
    if (p->tk == T_NAME) {
        if (tok_word(p, "True") || tok_word(p, "False")) {
            int n = new_node(p, N_NUM, at);
            if (n >= 0) p->t.nodes[n].v = ft_expr_int(tok_word(p, "True"));
            next(p);
            return n;
        }
        static const char *const reserved[] = {"and", "or", "not", "if", "else", "in",
                                               "lambda", "None", "import", "for", "is"};
        for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
            if (tok_word(p, reserved[i])) {
                char what[64];
                snprintf(what, sizeof what, "unexpected '%s'", reserved[i]);
                return fail(p, at, what);
            }
        size_t nstart = p->tstart, nlen = p->tlen;
        next(p);
        if (tok_is(p, "(")) { /* a call: a builtin by name */
            int fn = -1;
            for (int f = 0; f < F_COUNT; f++)
                if (strlen(FN_NAMES[f]) == nlen && memcmp(p->src + nstart, FN_NAMES[f], nlen) == 0)
                    fn = f;
            if (fn < 0) {
                char what[96];
                snprintf(what, sizeof what, "unknown function '%.*s'", (int)(nlen > 40 ? 40 : nlen),
                         p->src + nstart);
                return fail(p, at, what);
            }
            next(p);
            return p_items(p, N_CALL, fn, ")", at, -1);
        }
        for (int s = 0; s < p->nnames; s++)
            if (p->names[s] && strlen(p->names[s]) == nlen &&
                memcmp(p->names[s], p->src + nstart, nlen) == 0) {
                int n = new_node(p, N_NAME, at);
                if (n >= 0) p->t.nodes[n].slot = s;
                p->t.used[s] = 1;
                return n;
            }
        if (p->list_depth > 0) { /* perhaps the variable of a comprehension: resolved later */
            if (p->npend == (int)(sizeof p->pend / sizeof p->pend[0]))
                return fail(p, at, "too many names in a list");
            int n = new_node(p, N_NAME, at);
            if (n >= 0) {
                p->t.nodes[n].slot = -1;
                p->pend[p->npend++] = (struct pending){n, nstart, nlen};
            }
            return n;
        }
        return unknown_name(p, nstart, nlen);
    }
    if (p->tk == T_END && p->st == FT_OK) return fail(p, at, "unexpected end");
    return fail(p, at, "expected a value");
}

static int p_primary(parser *p) {
    int a = p_atom(p);
    while (a >= 0 && tok_is(p, "[")) {
        size_t at = p->tstart;
        next(p);
        int i = p_expr(p);
        if (i < 0 || expect(p, "]") < 0) return -1;
        a = new_node_of(p, N_INDEX, at, 0, a, i, -1);
    }
    return a;
}

static int p_factor(parser *p);

static int p_power(parser *p) {
    int a = p_primary(p);
    if (a >= 0 && tok_is(p, "**")) {
        size_t at = p->tstart;
        next(p);
        int b = p_factor(p); /* right-associative, and binds tighter than a unary on its left */
        return b < 0 ? -1 : new_node_of(p, N_BIN, at, OP_POW, a, b, -1);
    }
    return a;
}

static int nest(parser *p, size_t at) {
    if (++p->depth > FT_EXPR_MAX_DEPTH) return fail(p, at, "nested too deeply");
    return 0;
}

/* A prefix operator (unary minus or plus, `not`) at the current token, applied to what
 * `operand` parses after it. */
static int p_prefix(parser *p, nkind k, int (*operand)(parser *)) {
    size_t at = p->tstart;
    if (nest(p, at) < 0) return -1;
    next(p);
    int a = operand(p);
    p->depth--;
    return a < 0 ? -1 : new_node_of(p, k, at, 0, a, -1, -1);
}

static int p_factor(parser *p) {
    if (tok_is(p, "-") || tok_is(p, "+"))
        return p_prefix(p, tok_is(p, "-") ? N_NEG : N_POS, p_factor);
    return p_power(p);
}

static int p_binary(parser *p, int level) {
    /* level 0: + -, level 1: * / // % */
    int a = level == 0 ? p_binary(p, 1) : p_factor(p);
    for (;;) {
        int op = -1;
        if (level == 0 && tok_is(p, "+")) op = OP_ADD;
        if (level == 0 && tok_is(p, "-")) op = OP_SUB;
        if (level == 1 && tok_is(p, "*")) op = OP_MUL;
        if (level == 1 && tok_is(p, "/")) op = OP_DIV;
        if (level == 1 && tok_is(p, "//")) op = OP_FLOORDIV;
        if (level == 1 && tok_is(p, "%")) op = OP_MOD;
        if (a < 0 || op < 0) return a;
        size_t at = p->tstart;
        next(p);
        int b = level == 0 ? p_binary(p, 1) : p_factor(p);
        a = b < 0 ? -1 : new_node_of(p, N_BIN, at, op, a, b, -1);
        if (a < 0) return -1;
    }
}

static int cmp_op(parser *p) {
    if (tok_is(p, "<")) return C_LT;
    if (tok_is(p, "<=")) return C_LE;
    if (tok_is(p, ">")) return C_GT;
    if (tok_is(p, ">=")) return C_GE;
    if (tok_is(p, "==")) return C_EQ;
    if (tok_is(p, "!=")) return C_NE;
    if (tok_word(p, "in")) return C_IN;
    if (tok_word(p, "not")) return C_NOTIN; /* "not in"; checked below */
    return -1;
}

static int p_comparison(parser *p) {
    size_t at = p->tstart;
    int a = p_binary(p, 0);
    int op = a < 0 ? -1 : cmp_op(p);
    if (op < 0) return a;
    kidlist *k = calloc(1, sizeof *k);
    if (!k) return fail(p, at, "out of memory");
    push_kid(p, k, a, 0, at);
    while (p->st == FT_OK && (op = cmp_op(p)) >= 0) {
        size_t opat = p->tstart;
        next(p);
        if (op == C_NOTIN) {
            if (!tok_word(p, "in")) {
                fail(p, opat, "expected 'in' after 'not'");
                break;
            }
            next(p);
        }
        int b = p_binary(p, 0);
        if (b < 0 || push_kid(p, k, b, op, opat) < 0) break;
    }
    int nd = p->st == FT_OK ? new_node(p, N_CMP, at) : -1;
    if (nd >= 0) store_kids(p, nd, k);
    free(k);
    return p->st == FT_OK ? nd : -1;
}

static int p_not(parser *p) {
    if (tok_word(p, "not")) return p_prefix(p, N_NOT, p_not);
    return p_comparison(p);
}

static int p_bool(parser *p, int is_or) {
    size_t at = p->tstart;
    int a = is_or ? p_bool(p, 0) : p_not(p);
    const char *w = is_or ? "or" : "and";
    if (a < 0 || !tok_word(p, w)) return a;
    kidlist *k = calloc(1, sizeof *k);
    if (!k) return fail(p, at, "out of memory");
    push_kid(p, k, a, 0, at);
    while (p->st == FT_OK && tok_word(p, w)) {
        next(p);
        int b = is_or ? p_bool(p, 0) : p_not(p);
        if (b < 0 || push_kid(p, k, b, 0, p->tstart) < 0) break;
    }
    int nd = p->st == FT_OK ? new_node(p, is_or ? N_OR : N_AND, at) : -1;
    if (nd >= 0) store_kids(p, nd, k);
    free(k);
    return p->st == FT_OK ? nd : -1;
}

static int p_expr(parser *p) {
    size_t at = p->tstart;
    if (nest(p, at) < 0) return -1;
    int a = p_bool(p, 1);
    if (a >= 0 && tok_word(p, "if")) {
        next(p);
        int c = p_bool(p, 1);
        if (c < 0) return -1;
        if (!tok_word(p, "else")) return fail(p, p->tstart, "expected 'else'");
        next(p);
        int b = p_expr(p);
        a = b < 0 ? -1 : new_node_of(p, N_IF, at, 0, a, c, b);
        if (a < 0) return -1;
    }
    p->depth--;
    return a;
}

ft_status ft_expr_compile(const char *src, const char *const *names, int nnames, ft_expr **out,
                          ft_err *err) {
    *out = NULL;
    if (!src) return ft_err_set(err, FT_EINVAL, "expression: none given");
    size_t len = strlen(src);
    if (len > FT_EXPR_MAX_LEN)
        return ft_err_set(err, FT_EINVAL, "expression of %zu bytes: longer than %d", len,
                          FT_EXPR_MAX_LEN);
    parser p = {.src = src, .len = len, .names = names, .nnames = nnames, .err = err};
    p.t.used = calloc(nnames > 0 ? (size_t)nnames : 1, 1);
    if (!p.t.used) return ft_err_set(err, FT_ENOMEM, "expression: out of memory");
    next(&p);
    int root = -1;
    if (p.st == FT_OK) {
        if (p.tk == T_END) fail(&p, 0, "empty");
        else root = p_expr(&p);
    }
    if (p.st == FT_OK && p.tk != T_END) fail(&p, p.tstart, "unexpected text");
    ft_expr *e = p.st == FT_OK ? calloc(1, sizeof *e) : NULL;
    if (p.st == FT_OK && (!e || !(e->text = strdup(src)))) {
        free(e);
        e = NULL;
        p.st = ft_err_set(err, FT_ENOMEM, "expression: out of memory");
    }
    if (p.st != FT_OK) {
        tree_free(&p.t);
        return p.st;
    }
    e->t = p.t;
    e->root = root;
    e->nslots = nnames;
    *out = e;
    return FT_OK;
}

void ft_expr_free(ft_expr *e) {
    if (!e) return;
    free(e->text);
    tree_free(&e->t);
    free(e);
}

const char *ft_expr_text(const ft_expr *e) { return e->text; }

int ft_expr_uses(const ft_expr *e, int slot) {
    return slot >= 0 && slot < e->nslots && e->t.used[slot];
}

/* ---- values ----------------------------------------------------------------------------------- */

ft_expr_value ft_expr_int(long long v) {
    ft_expr_value r = {.kind = FT_EXPR_INT, .i = v};
    return r;
}
ft_expr_value ft_expr_float(double v) {
    ft_expr_value r = {.kind = FT_EXPR_FLOAT, .f = v};
    return r;
}
ft_expr_value ft_expr_list(const ft_expr_value *items, int n) {
    ft_expr_value r = {.kind = FT_EXPR_LIST, .items = items, .n = n};
    return r;
}
ft_expr_value ft_expr_str(const char *s) {
    ft_expr_value r = {.kind = FT_EXPR_STR, .s = s};
    return r;
}

double ft_expr_number(ft_expr_value v) {
    return v.kind == FT_EXPR_INT ? (double)v.i : v.kind == FT_EXPR_FLOAT ? v.f : NAN;
}

/* Python's comparison of an integer with a float, exact where a double cannot hold the integer
 * (2**53 + 1 is not 2.0**53): -1, 0 or 1, or 2 when f is NaN (unordered). */
static int cmp_int_float(long long i, double f) {
    if (isnan(f)) return 2;
    if (f >= 9223372036854775808.0) return -1;
    if (f < -9223372036854775808.0) return 1;
    const double fl = floor(f);
    const long long k = (long long)fl;
    if (i != k) return i < k ? -1 : 1;
    return f > fl ? -1 : 0;
}

/* a against b, both numbers: -1, 0, 1, or 2 when unordered (a NaN). */
static int cmp_numbers(ft_expr_value a, ft_expr_value b) {
    if (a.kind == FT_EXPR_INT && b.kind == FT_EXPR_INT) return (a.i > b.i) - (a.i < b.i);
    if (a.kind == FT_EXPR_INT) return cmp_int_float(a.i, b.f);
    if (b.kind == FT_EXPR_INT) {
        const int r = cmp_int_float(b.i, a.f);
        return r == 2 ? 2 : -r;
    }
    if (isnan(a.f) || isnan(b.f)) return 2;
    return (a.f > b.f) - (a.f < b.f);
}

int ft_expr_equal(ft_expr_value a, ft_expr_value b) {
    if (a.kind == FT_EXPR_STR || b.kind == FT_EXPR_STR)
        return a.kind == b.kind && strcmp(a.s, b.s) == 0;
    if (a.kind == FT_EXPR_LIST || b.kind == FT_EXPR_LIST) {
        if (a.kind != b.kind || a.n != b.n) return 0;
        for (int i = 0; i < a.n; i++)
            if (!ft_expr_equal(a.items[i], b.items[i])) return 0;
        return 1;
    }
    return cmp_numbers(a, b) == 0;
}

int ft_expr_format(ft_expr_value v, char *buf, size_t cap) {
    if (v.kind == FT_EXPR_INT) return snprintf(buf, cap, "%lld", v.i);
    if (v.kind == FT_EXPR_STR)
        return snprintf(buf, cap, strchr(v.s, '\'') ? "\"%s\"" : "'%s'", v.s);
    if (v.kind == FT_EXPR_FLOAT) {
        if (isnan(v.f)) return snprintf(buf, cap, "nan");
        if (isinf(v.f)) return snprintf(buf, cap, v.f > 0 ? "inf" : "-inf");
        /* The shortest text that reads back the same, with a ".0" on integral values. */
        char t[40];
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(t, sizeof t, "%.*g", prec, v.f);
            if (strtod(t, NULL) == v.f) break;
        }
        if (!strpbrk(t, ".eEn")) return snprintf(buf, cap, "%s.0", t);
        return snprintf(buf, cap, "%s", t);
    }
    size_t n = 0;
    int w = snprintf(buf, cap, "[");
    n += w > 0 ? (size_t)w : 0;
    for (int i = 0; i < v.n; i++) {
        w = snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, "%s", i ? ", " : "");
        n += (size_t)w;
        w = ft_expr_format(v.items[i], n < cap ? buf + n : NULL, n < cap ? cap - n : 0);
        n += (size_t)w;
    }
    w = snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, "]");
    return (int)(n + (size_t)w);
}

/* ---- evaluation ------------------------------------------------------------------------------- */

/* Lists made while evaluating: chunks that never move, freed at the end. */
typedef struct chunk {
    struct chunk *next;
    int n;
    ft_expr_value v[];
} chunk;

typedef struct evalctx {
    const ft_expr *e;
    const ft_expr_value *slots;
    chunk *chunks;
    long long budget; /* list items that may still be made */
    ft_expr_value locals[MAX_LOCALS]; /* the comprehensions' variables */
    ft_err *err;
} evalctx;

#define LIST_BUDGET (1LL << 22) /* items, all lists of one evaluation together */

static ft_status efail(evalctx *c, int pos, const char *what) {
    return ft_err_set(c->err, FT_EINVAL, "expression \"%.200s\": %s at column %d", c->e->text,
                      what, pos + 1);
}

static ft_expr_value *alloc_items(evalctx *c, long long n, int pos, ft_status *st) {
    if (n < 0 || n > c->budget) {
        *st = efail(c, pos, "list too long");
        return NULL;
    }
    c->budget -= n;
    chunk *k = malloc(sizeof *k + (size_t)(n ? n : 1) * sizeof(ft_expr_value));
    if (!k) {
        *st = ft_err_set(c->err, FT_ENOMEM, "expression: out of memory");
        return NULL;
    }
    k->next = c->chunks;
    k->n = (int)n;
    c->chunks = k;
    *st = FT_OK;
    return k->v;
}

static int truthy(ft_expr_value v) {
    if (v.kind == FT_EXPR_INT) return v.i != 0;
    if (v.kind == FT_EXPR_FLOAT) return v.f != 0;
    if (v.kind == FT_EXPR_STR) return v.s[0] != 0;
    return v.n > 0;
}

static ft_status ev(evalctx *c, int ni, ft_expr_value *out);

static ft_status need_number(evalctx *c, const node *n, ft_expr_value v) {
    if (v.kind == FT_EXPR_LIST) return efail(c, n->pos, "a list where a number is needed");
    if (v.kind == FT_EXPR_STR) return efail(c, n->pos, "a string where a number is needed");
    return FT_OK;
}

/* Python's float % and // (Objects/floatobject.c: float_divmod), so both agree to the bit. */
static double py_mod(double x, double y) {
    double m = fmod(x, y);
    if (m != 0) {
        if ((y < 0) != (m < 0)) m += y;
    } else {
        m = copysign(0.0, y);
    }
    return m;
}

static double py_floordiv(double x, double y) {
    double m = fmod(x, y), d = (x - m) / y;
    if (m != 0 && ((y < 0) != (m < 0))) d -= 1.0;
    if (d != 0) {
        double f = floor(d);
        if (d - f > 0.5) f += 1.0;
        return f;
    }
    return copysign(0.0, x / y);
}

/* Python's list + list (concatenation) and list * int (repetition; none at a count <= 0). */
static ft_status list_op(evalctx *c, const node *n, ft_expr_value a, ft_expr_value b,
                         ft_expr_value *out) {
    ft_status st;
    if (n->op == OP_ADD && a.kind == FT_EXPR_LIST && b.kind == FT_EXPR_LIST) {
        ft_expr_value *items = alloc_items(c, (long long)a.n + b.n, n->pos, &st);
        if (!items) return st;
        if (a.n > 0) memcpy(items, a.items, (size_t)a.n * sizeof *items);
        if (b.n > 0) memcpy(items + a.n, b.items, (size_t)b.n * sizeof *items);
        *out = ft_expr_list(items, a.n + b.n);
        return FT_OK;
    }
    if (n->op == OP_MUL && (a.kind == FT_EXPR_INT || b.kind == FT_EXPR_INT)) {
        const ft_expr_value l = a.kind == FT_EXPR_LIST ? a : b;
        const long long times = a.kind == FT_EXPR_LIST ? b.i : a.i;
        const long long cnt = times <= 0 || l.n == 0 ? 0 : times;
        if (cnt > 0 && cnt > c->budget / l.n) return efail(c, n->pos, "list too long");
        ft_expr_value *items = alloc_items(c, cnt * l.n, n->pos, &st); /* never NULL when OK */
        if (!items) return st;
        for (long long t = 0; t < cnt; t++)
            memcpy(items + t * l.n, l.items, (size_t)l.n * sizeof *items);
        *out = ft_expr_list(items, (int)(cnt * l.n));
        return FT_OK;
    }
    return efail(c, n->pos, "a list where a number is needed");
}

static ft_status binop(evalctx *c, const node *n, ft_expr_value a, ft_expr_value b,
                       ft_expr_value *out) {
    if (a.kind == FT_EXPR_STR || b.kind == FT_EXPR_STR)
        return efail(c, n->pos, "arithmetic on a string (strings only compare)");
    if (a.kind == FT_EXPR_LIST || b.kind == FT_EXPR_LIST) return list_op(c, n, a, b, out);
    int ints = a.kind == FT_EXPR_INT && b.kind == FT_EXPR_INT;
    if (ints) {
        long long x = a.i, y = b.i, r = 0;
        switch (n->op) {
        case OP_ADD:
            if (__builtin_add_overflow(x, y, &r)) return efail(c, n->pos, "integer overflow");
            *out = ft_expr_int(r);
            return FT_OK;
        case OP_SUB:
            if (__builtin_sub_overflow(x, y, &r)) return efail(c, n->pos, "integer overflow");
            *out = ft_expr_int(r);
            return FT_OK;
        case OP_MUL:
            if (__builtin_mul_overflow(x, y, &r)) return efail(c, n->pos, "integer overflow");
            *out = ft_expr_int(r);
            return FT_OK;
        case OP_DIV:
            if (y == 0) return efail(c, n->pos, "division by zero");
            *out = ft_expr_float((double)x / (double)y);
            return FT_OK;
        case OP_FLOORDIV:
        case OP_MOD: {
            if (y == 0) return efail(c, n->pos, n->op == OP_MOD ? "modulo by zero" : "division by zero");
            if (x == INT64_MIN && y == -1) return efail(c, n->pos, "integer overflow");
            long long q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) {
                q -= 1;
                m += y;
            }
            *out = ft_expr_int(n->op == OP_MOD ? m : q);
            return FT_OK;
        }
        case OP_POW: {
            if (y < 0) {
                if (x == 0) return efail(c, n->pos, "zero to a negative power");
                *out = ft_expr_float(pow((double)x, (double)y));
                return FT_OK;
            }
            r = 1;
            long long base = x, e = y;
            while (e > 0) {
                if ((e & 1) && __builtin_mul_overflow(r, base, &r))
                    return efail(c, n->pos, "integer overflow");
                e >>= 1;
                if (e > 0 && __builtin_mul_overflow(base, base, &base))
                    return efail(c, n->pos, "integer overflow");
            }
            *out = ft_expr_int(r);
            return FT_OK;
        }
        }
    }
    double x = ft_expr_number(a), y = ft_expr_number(b), r = 0;
    switch (n->op) {
    case OP_ADD: r = x + y; break;
    case OP_SUB: r = x - y; break;
    case OP_MUL: r = x * y; break;
    case OP_DIV:
        if (y == 0) return efail(c, n->pos, "division by zero");
        r = x / y;
        break;
    case OP_FLOORDIV:
        if (y == 0) return efail(c, n->pos, "division by zero");
        r = py_floordiv(x, y);
        break;
    case OP_MOD:
        if (y == 0) return efail(c, n->pos, "modulo by zero");
        r = py_mod(x, y);
        break;
    case OP_POW:
        if (x == 0 && y < 0) return efail(c, n->pos, "zero to a negative power");
        if (x < 0 && y != floor(y)) return efail(c, n->pos, "a negative number to a fractional power");
        r = pow(x, y);
        if (isinf(r) && isfinite(x) && isfinite(y)) return efail(c, n->pos, "overflow");
        break;
    }
    *out = ft_expr_float(r);
    return FT_OK;
}

static int compare(int op, ft_expr_value a, ft_expr_value b) {
    if (op == C_EQ) return ft_expr_equal(a, b);
    if (op == C_NE) return !ft_expr_equal(a, b);
    if (a.kind == FT_EXPR_STR) { /* both strings: the caller checked */
        int d = strcmp(a.s, b.s);
        return op == C_LT ? d < 0 : op == C_LE ? d <= 0 : op == C_GT ? d > 0 : d >= 0;
    }
    const int r = cmp_numbers(a, b);
    if (r == 2) return 0; /* NaN: every ordering is false */
    switch (op) {
    case C_LT: return r < 0;
    case C_LE: return r <= 0;
    case C_GT: return r > 0;
    default: return r >= 0;
    }
}

static ft_status call(evalctx *c, const node *n, ft_expr_value *out) {
    ft_expr_value args[8];
    int na = n->count;
    if (na > 8) return efail(c, n->pos, "too many arguments");
    ft_status st;
    for (int i = 0; i < na; i++)
        if ((st = ev(c, c->e->t.kids[n->first + i], &args[i])) != FT_OK) return st;
    char what[96];
    switch (n->op) {
    case F_MIN:
    case F_MAX: {
        const ft_expr_value *it = args;
        int cnt = na;
        if (na == 1 && args[0].kind == FT_EXPR_LIST) {
            it = args[0].items;
            cnt = args[0].n;
        } else if (na == 1) { /* as Python: one argument must be a list */
            snprintf(what, sizeof what, "%s() of one number (a list is needed)", FN_NAMES[n->op]);
            return efail(c, n->pos, what);
        }
        if (cnt == 0) {
            snprintf(what, sizeof what, "%s() of nothing", FN_NAMES[n->op]);
            return efail(c, n->pos, what);
        }
        ft_expr_value best = it[0];
        for (int i = 0; i < cnt; i++) {
            if ((st = need_number(c, n, it[i])) != FT_OK) return st;
            if (n->op == F_MIN ? compare(C_LT, it[i], best) : compare(C_GT, it[i], best)) best = it[i];
        }
        *out = best;
        return FT_OK;
    }
    case F_LEN:
        if (na == 1 && args[0].kind == FT_EXPR_STR) {
            *out = ft_expr_int((long long)strlen(args[0].s)); /* bytes: ASCII names' length */
            return FT_OK;
        }
        if (na != 1 || args[0].kind != FT_EXPR_LIST) return efail(c, n->pos, "len() takes one list");
        *out = ft_expr_int(args[0].n);
        return FT_OK;
    case F_LIST:
        if (na != 1 || args[0].kind != FT_EXPR_LIST) return efail(c, n->pos, "list() takes one list");
        *out = args[0];
        return FT_OK;
    case F_RANGE: {
        if (na < 1 || na > 3) return efail(c, n->pos, "range() takes 1 to 3 integers");
        long long v[3];
        for (int i = 0; i < na; i++) {
            if (args[i].kind != FT_EXPR_INT) return efail(c, n->pos, "range() takes integers");
            v[i] = args[i].i;
        }
        long long lo = na == 1 ? 0 : v[0], hi = na == 1 ? v[0] : v[1], step = na == 3 ? v[2] : 1;
        if (step == 0) return efail(c, n->pos, "range() step is zero");
        /* The count in unsigned arithmetic, exact over the whole long long span (hi - lo may
         * not fit a long long, and a double loses the ones), checked against the budget before
         * any item is made. */
        unsigned long long span = 0, by = 0;
        if (step > 0 && hi > lo) span = (unsigned long long)hi - (unsigned long long)lo, by = (unsigned long long)step;
        if (step < 0 && hi < lo) span = (unsigned long long)lo - (unsigned long long)hi, by = 0ull - (unsigned long long)step;
        const unsigned long long ucnt = by ? span / by + (span % by != 0) : 0;
        if (ucnt > (unsigned long long)c->budget) return efail(c, n->pos, "list too long");
        const long long cnt = (long long)ucnt;
        ft_expr_value *items = alloc_items(c, cnt, n->pos, &st);
        if (!items) return st;
        /* Walked by adding the step: lo + i * step may overflow after the last item. */
        long long at = lo;
        for (long long i = 0; i < cnt; i++) {
            items[i] = ft_expr_int(at);
            if (i + 1 < cnt) at += step;
        }
        *out = ft_expr_list(items, (int)cnt);
        return FT_OK;
    }
    default: break;
    }
    /* abs, int, float, round: one number */
    if (na != 1 || args[0].kind == FT_EXPR_LIST || args[0].kind == FT_EXPR_STR) {
        snprintf(what, sizeof what, "%s() takes one number", FN_NAMES[n->op]);
        return efail(c, n->pos, what);
    }
    ft_expr_value a = args[0];
    double x = ft_expr_number(a);
    switch (n->op) {
    case F_ABS:
        if (a.kind == FT_EXPR_INT) {
            if (a.i == INT64_MIN) return efail(c, n->pos, "integer overflow");
            *out = ft_expr_int(a.i < 0 ? -a.i : a.i);
        } else {
            *out = ft_expr_float(fabs(a.f));
        }
        return FT_OK;
    case F_FLOAT: *out = ft_expr_float(x); return FT_OK;
    case F_INT:
    case F_ROUND: {
        if (a.kind == FT_EXPR_INT) {
            *out = a;
            return FT_OK;
        }
        double r = n->op == F_INT ? trunc(x) : nearbyint(x); /* Python rounds half to even */
        if (!(r >= -9.2e18 && r <= 9.2e18)) return efail(c, n->pos, "integer overflow");
        *out = ft_expr_int((long long)r);
        return FT_OK;
    }
    }
    return efail(c, n->pos, "internal: unknown function");
}

static ft_status ev(evalctx *c, int ni, ft_expr_value *out) {
    const node *n = &c->e->t.nodes[ni];
    ft_status st;
    ft_expr_value a, b;
    switch (n->kind) {
    case N_NUM: *out = n->v; return FT_OK;
    case N_NAME:
        *out = n->slot < c->e->nslots ? c->slots[n->slot] : c->locals[n->slot - c->e->nslots];
        return FT_OK;
    case N_NEG:
    case N_POS:
        if ((st = ev(c, n->a, &a)) != FT_OK || (st = need_number(c, n, a)) != FT_OK) return st;
        if (n->kind == N_POS) *out = a;
        else if (a.kind == FT_EXPR_INT) {
            if (a.i == INT64_MIN) return efail(c, n->pos, "integer overflow");
            *out = ft_expr_int(-a.i);
        } else {
            *out = ft_expr_float(-a.f);
        }
        return FT_OK;
    case N_NOT:
        if ((st = ev(c, n->a, &a)) != FT_OK) return st;
        *out = ft_expr_int(!truthy(a));
        return FT_OK;
    case N_BIN:
        if ((st = ev(c, n->a, &a)) != FT_OK || (st = ev(c, n->b, &b)) != FT_OK) return st;
        return binop(c, n, a, b, out);
    case N_CMP: {
        if ((st = ev(c, c->e->t.kids[n->first], &a)) != FT_OK) return st;
        for (int i = 1; i < n->count; i++) {
            int op = c->e->t.kops[n->first + i];
            if ((st = ev(c, c->e->t.kids[n->first + i], &b)) != FT_OK) return st;
            int r;
            if (op == C_IN || op == C_NOTIN) {
                if (b.kind != FT_EXPR_LIST) return efail(c, n->pos, "'in' needs a list on its right");
                r = 0;
                for (int k = 0; k < b.n && !r; k++) r = ft_expr_equal(a, b.items[k]);
                if (op == C_NOTIN) r = !r;
            } else if (op == C_EQ || op == C_NE) {
                r = compare(op, a, b);
            } else {
                if (a.kind == FT_EXPR_LIST || b.kind == FT_EXPR_LIST)
                    return efail(c, n->pos, "a list compared by order");
                if ((a.kind == FT_EXPR_STR) != (b.kind == FT_EXPR_STR))
                    return efail(c, n->pos, "a string compared by order with a number");
                r = compare(op, a, b);
            }
            if (!r) {
                *out = ft_expr_int(0);
                return FT_OK;
            }
            a = b;
        }
        *out = ft_expr_int(1);
        return FT_OK;
    }
    case N_AND:
    case N_OR:
        for (int i = 0; i < n->count; i++) {
            if ((st = ev(c, c->e->t.kids[n->first + i], &a)) != FT_OK) return st;
            if (i == n->count - 1 || (n->kind == N_AND ? !truthy(a) : truthy(a))) break;
        }
        *out = a;
        return FT_OK;
    case N_IF:
        if ((st = ev(c, n->b, &a)) != FT_OK) return st;
        return ev(c, truthy(a) ? n->a : n->c, out);
    case N_CALL: return call(c, n, out);
    case N_INDEX: {
        if ((st = ev(c, n->a, &a)) != FT_OK || (st = ev(c, n->b, &b)) != FT_OK) return st;
        if (a.kind != FT_EXPR_LIST)
            return efail(c, n->pos,
                         a.kind == FT_EXPR_STR ? "indexing a string" : "indexing a number");
        if (b.kind != FT_EXPR_INT) return efail(c, n->pos, "an index that is not an integer");
        long long i = b.i < 0 ? b.i + a.n : b.i;
        if (i < 0 || i >= a.n) {
            char what[80];
            snprintf(what, sizeof what, "index %lld out of range (%d items)", b.i, a.n);
            return efail(c, n->pos, what);
        }
        *out = a.items[i];
        return FT_OK;
    }
    case N_LIST: {
        ft_expr_value *items = alloc_items(c, n->count, n->pos, &st);
        if (!items) return st;
        for (int i = 0; i < n->count; i++) {
            if ((st = ev(c, c->e->t.kids[n->first + i], &items[i])) != FT_OK) return st;
            if (items[i].kind == FT_EXPR_LIST) return efail(c, n->pos, "a list of lists");
        }
        *out = ft_expr_list(items, n->count);
        return FT_OK;
    }
    case N_COMP: {
        if ((st = ev(c, n->b, &b)) != FT_OK) return st;
        if (b.kind != FT_EXPR_LIST)
            return efail(c, n->pos,
                         b.kind == FT_EXPR_STR ? "a loop over a string" : "a loop over a number");
        ft_expr_value *items = alloc_items(c, b.n, n->pos, &st);
        if (!items) return st;
        int cnt = 0;
        for (int i = 0; i < b.n; i++) {
            c->locals[n->op - c->e->nslots] = b.items[i];
            if (n->c >= 0) {
                if ((st = ev(c, n->c, &a)) != FT_OK) return st;
                if (!truthy(a)) continue;
            }
            if ((st = ev(c, n->a, &items[cnt])) != FT_OK) return st;
            if (items[cnt].kind == FT_EXPR_LIST) return efail(c, n->pos, "a list of lists");
            cnt++;
        }
        *out = ft_expr_list(items, cnt);
        return FT_OK;
    }
    }
    return efail(c, n->pos, "internal: unknown node");
}

static void release(evalctx *c) {
    while (c->chunks) {
        chunk *k = c->chunks;
        c->chunks = k->next;
        free(k);
    }
}

ft_status ft_expr_eval(const ft_expr *e, const ft_expr_value *slots, ft_expr_value *out,
                       ft_err *err) {
    evalctx c = {.e = e, .slots = slots, .budget = LIST_BUDGET, .err = err};
    ft_expr_value v;
    ft_status st = ev(&c, e->root, &v);
    if (st == FT_OK && v.kind == FT_EXPR_LIST)
        st = efail(&c, 0, "a list where a number is needed");
    if (st == FT_OK && v.kind == FT_EXPR_STR)
        st = efail(&c, 0, "a string where a number is needed");
    release(&c);
    if (st == FT_OK) *out = v;
    return st;
}

ft_status ft_expr_truth(const ft_expr *e, const ft_expr_value *slots, int *out, ft_err *err) {
    evalctx c = {.e = e, .slots = slots, .budget = LIST_BUDGET, .err = err};
    ft_expr_value v;
    ft_status st = ev(&c, e->root, &v);
    if (st == FT_OK) *out = truthy(v);
    release(&c);
    return st;
}

ft_status ft_expr_eval_list(const ft_expr *e, const ft_expr_value *slots, ft_expr_value **items,
                            int *n, ft_err *err) {
    *items = NULL;
    *n = 0;
    evalctx c = {.e = e, .slots = slots, .budget = LIST_BUDGET, .err = err};
    ft_expr_value v;
    ft_status st = ev(&c, e->root, &v);
    if (st == FT_OK) {
        int cnt = v.kind == FT_EXPR_LIST ? v.n : 1;
        ft_expr_value *r = malloc((size_t)(cnt ? cnt : 1) * sizeof *r);
        if (!r) {
            st = ft_err_set(err, FT_ENOMEM, "expression: out of memory");
        } else {
            if (v.kind == FT_EXPR_LIST && cnt > 0) memcpy(r, v.items, (size_t)cnt * sizeof *r);
            else r[0] = v;
            *items = r;
            *n = cnt;
        }
    }
    release(&c);
    return st;
}
