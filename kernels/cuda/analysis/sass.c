/* sass.c: the instruction mix of compiled kernels, read from the SASS of their CUBIN (sass.h).
 *
 * Three parts. The classes: an opcode's class from its base (the text before the first '.'),
 * with a few decided by their modifiers; the bytes one thread moves from the width modifier.
 * The parser: nvdisasm's text (`.text.NAME:` opens a kernel, `.L_x_N:` labels, BRA `(.L_x_N)`)
 * or cuobjdump's (`Function : NAME`, BRA 0x120), one line at a time, then per kernel its loops
 * from the backward branches. The tool: found on this machine (FLARETUNE_NVDISASM, PATH, the
 * toolkit, NVIDIA's PyPI wheels), run on the CUBIN written to a temporary file; the parsed result
 * is cached by the CUBIN's hash, since nvdisasm costs about half a second per CUBIN whatever its
 * size (measured 2026-12-02 on a 2-core Xeon VM: 0.44 s for 38 KB, 0.51 s for 292 KB).
 *
 * Decisions the counts rest on:
 *   - NOPs (the padding after the last EXIT) are not counted; neither is the trap `BRA self`
 *     that follows it, as a loop (a loop is a backward branch, target < branch).
 *   - HFMA2.MMA with a zero product (`HFMA2.MMA R4, -RZ, RZ, 1.5, 0`) is how ptxas loads a
 *     constant on the FMA pipe: a move. Other HFMA2.MMA are half-precision math (fp16).
 *   - IMAD.MOV is a move; HADD2.F32 (half to float) a conversion; the uniform datapath
 *     (UIADD3, UMOV, ULDC, ...) counts as the class of its non-uniform twin.
 *   - Generic LD/ST count as global (the common case of a pointer ptxas cannot place); TMA and
 *     bulk copies (UTMALDG, UBLKCP) as ldgsts, UTMASTG as stg, with no per-thread bytes (a whole
 *     tile per CTA).
 *   - Loops are nested by their instruction ranges; several back edges to one target are one
 *     loop. Counts are static: every instruction once, predicated or not.
 *   - The hot loop weighs each loop's own memory instructions by HOT_LOOP_TRIPS^depth: the
 *     innermost loop with the most of them lost to a prologue loop run once per block
 *     (dflare_fwd_smem's softmax weights) over the row loop that holds most of the loads.
 */
#define _GNU_SOURCE
#include "sass.h"

#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda/kcache.h"

/* ---- classes ------------------------------------------------------------------------------- */

static const char *const class_names[FT_SASS_NCLASS] = {
    "ldg",  "stg", "lds",  "sts",     "ldsm", "ldgsts", "atom",   "local",   "const", "fp32",
    "fp16", "mma", "mufu", "convert", "int",  "move",   "branch", "barrier", "other", "fp64"};

const char *ft_sass_class_name(ft_sass_class c) {
    return c >= 0 && c < FT_SASS_NCLASS ? class_names[c] : "?";
}

typedef struct {
    const char *base;
    ft_sass_class c;
} base_class;

/* By base opcode. A base starting with U not listed here is looked up without its U (the
 * uniform datapath: UIADD3 as IADD3); a base ending in MMA is the tensor cores. */
static const base_class bases[] = {
    {"LDG", FT_SASS_LDG},
    {"LD", FT_SASS_LDG},
    {"STG", FT_SASS_STG},
    {"ST", FT_SASS_STG},
    {"UTMASTG", FT_SASS_STG},
    {"LDS", FT_SASS_LDS},
    {"STS", FT_SASS_STS},
    {"STSM", FT_SASS_STS},
    {"LDSM", FT_SASS_LDSM},
    {"LDGSTS", FT_SASS_LDGSTS},
    {"UTMALDG", FT_SASS_LDGSTS},
    {"UBLKCP", FT_SASS_LDGSTS},
    {"ATOM", FT_SASS_ATOM},
    {"ATOMG", FT_SASS_ATOM},
    {"ATOMS", FT_SASS_ATOM},
    {"RED", FT_SASS_ATOM},
    {"REDG", FT_SASS_ATOM},
    {"UTMAREDG", FT_SASS_ATOM},
    {"LDL", FT_SASS_LOCAL},
    {"STL", FT_SASS_LOCAL},
    {"LDC", FT_SASS_CONST},
    {"LDCU", FT_SASS_CONST},
    {"FFMA", FT_SASS_FP32},
    {"FADD", FT_SASS_FP32},
    {"FMUL", FT_SASS_FP32},
    {"FMNMX", FT_SASS_FP32},
    {"FMNMX3", FT_SASS_FP32},
    {"FSETP", FT_SASS_FP32},
    {"FSET", FT_SASS_FP32},
    {"FSEL", FT_SASS_FP32},
    {"FCHK", FT_SASS_FP32},
    {"FSWZADD", FT_SASS_FP32},
    {"FFMA32I", FT_SASS_FP32},
    {"FADD32I", FT_SASS_FP32},
    {"FMUL32I", FT_SASS_FP32},
    {"FFMA2", FT_SASS_FP32},
    {"FADD2", FT_SASS_FP32},
    {"FMUL2", FT_SASS_FP32},
    {"HFMA2", FT_SASS_FP16},
    {"HADD2", FT_SASS_FP16},
    {"HMUL2", FT_SASS_FP16},
    {"HMNMX2", FT_SASS_FP16},
    {"HSETP2", FT_SASS_FP16},
    {"HSET2", FT_SASS_FP16},
    {"MUFU", FT_SASS_MUFU},
    {"F2F", FT_SASS_CONVERT},
    {"F2I", FT_SASS_CONVERT},
    {"I2F", FT_SASS_CONVERT},
    {"F2FP", FT_SASS_CONVERT},
    {"FRND", FT_SASS_CONVERT},
    {"I2I", FT_SASS_CONVERT},
    {"I2FP", FT_SASS_CONVERT},
    {"F2IP", FT_SASS_CONVERT},
    {"I2IP", FT_SASS_CONVERT},
    {"IADD3", FT_SASS_INT},
    {"IADD", FT_SASS_INT},
    {"IADD32I", FT_SASS_INT},
    {"IMAD", FT_SASS_INT},
    {"IMUL", FT_SASS_INT},
    {"IMUL32I", FT_SASS_INT},
    {"LEA", FT_SASS_INT},
    {"SHF", FT_SASS_INT},
    {"SHL", FT_SASS_INT},
    {"SHR", FT_SASS_INT},
    {"LOP", FT_SASS_INT},
    {"LOP3", FT_SASS_INT},
    {"LOP32I", FT_SASS_INT},
    {"ISETP", FT_SASS_INT},
    {"ISET", FT_SASS_INT},
    {"IMNMX", FT_SASS_INT},
    {"IABS", FT_SASS_INT},
    {"POPC", FT_SASS_INT},
    {"FLO", FT_SASS_INT},
    {"BREV", FT_SASS_INT},
    {"BMSK", FT_SASS_INT},
    {"BFE", FT_SASS_INT},
    {"BFI", FT_SASS_INT},
    {"SGXT", FT_SASS_INT},
    {"VIADD", FT_SASS_INT},
    {"VIADDMNMX", FT_SASS_INT},
    {"VIMNMX", FT_SASS_INT},
    {"VIMNMX3", FT_SASS_INT},
    {"VABSDIFF", FT_SASS_INT},
    {"VABSDIFF4", FT_SASS_INT},
    {"IDP", FT_SASS_INT},
    {"ISCADD", FT_SASS_INT},
    {"PLOP3", FT_SASS_INT},
    {"PSETP", FT_SASS_INT},
    {"XMAD", FT_SASS_INT},
    {"MOV", FT_SASS_MOVE},
    {"MOV32I", FT_SASS_MOVE},
    {"SHFL", FT_SASS_MOVE},
    {"PRMT", FT_SASS_MOVE},
    {"SEL", FT_SASS_MOVE},
    {"S2R", FT_SASS_MOVE},
    {"CS2R", FT_SASS_MOVE},
    {"S2UR", FT_SASS_MOVE},
    {"CS2UR", FT_SASS_MOVE},
    {"R2UR", FT_SASS_MOVE},
    {"P2R", FT_SASS_MOVE},
    {"R2P", FT_SASS_MOVE},
    {"UP2UR", FT_SASS_MOVE},
    {"UR2UP", FT_SASS_MOVE},
    {"VOTE", FT_SASS_MOVE},
    {"MATCH", FT_SASS_MOVE},
    {"REDUX", FT_SASS_MOVE},
    {"ELECT", FT_SASS_MOVE},
    {"B2R", FT_SASS_MOVE},
    {"LEPC", FT_SASS_MOVE},
    {"BRA", FT_SASS_BRANCH},
    {"BRX", FT_SASS_BRANCH},
    {"BRXU", FT_SASS_BRANCH},
    {"JMP", FT_SASS_BRANCH},
    {"JMX", FT_SASS_BRANCH},
    {"JMXU", FT_SASS_BRANCH},
    {"EXIT", FT_SASS_BRANCH},
    {"RET", FT_SASS_BRANCH},
    {"CALL", FT_SASS_BRANCH},
    {"BSSY", FT_SASS_BRANCH},
    {"BSYNC", FT_SASS_BRANCH},
    {"BREAK", FT_SASS_BRANCH},
    {"BMOV", FT_SASS_BRANCH},
    {"WARPSYNC", FT_SASS_BRANCH},
    {"BPT", FT_SASS_BRANCH},
    {"KILL", FT_SASS_BRANCH},
    {"YIELD", FT_SASS_BRANCH},
    {"RTT", FT_SASS_BRANCH},
    {"BAR", FT_SASS_BARRIER},
    {"MEMBAR", FT_SASS_BARRIER},
    {"DEPBAR", FT_SASS_BARRIER},
    {"ERRBAR", FT_SASS_BARRIER},
    {"CGAERRBAR", FT_SASS_BARRIER},
    {"CCTL", FT_SASS_BARRIER},
    {"CCTLL", FT_SASS_BARRIER},
    {"FENCE", FT_SASS_BARRIER},
    {"LDGDEPBAR", FT_SASS_BARRIER},
    {"ARRIVES", FT_SASS_BARRIER},
    {"SYNCS", FT_SASS_BARRIER},
    {"WARPGROUP", FT_SASS_BARRIER},
    {"UCGABAR_ARV", FT_SASS_BARRIER},
    {"UCGABAR_WAIT", FT_SASS_BARRIER},
    {"VOTEU", FT_SASS_MOVE},
    {"ENDCOLLECTIVE", FT_SASS_BRANCH},
    {"DFMA", FT_SASS_FP64},
    {"DADD", FT_SASS_FP64},
    {"DMUL", FT_SASS_FP64},
    {"DSETP", FT_SASS_FP64},
    {"DMNMX", FT_SASS_FP64},
    {"DSET", FT_SASS_FP64},
};

/* The base of an opcode (up to the first '.') into out; 0 when it does not fit. */
static int base_of(const char *opcode, char *out, size_t n) {
    size_t k = strcspn(opcode, ".");
    if (k == 0 || k >= n) return 0;
    memcpy(out, opcode, k);
    out[k] = '\0';
    return 1;
}

/* 1 when the opcode has the modifier `mod` (a whole '.'-separated token after the base). */
static int has_mod(const char *opcode, const char *mod) {
    size_t m = strlen(mod);
    for (const char *p = strchr(opcode, '.'); p; p = strchr(p + 1, '.'))
        if (strncmp(p + 1, mod, m) == 0 && (p[1 + m] == '.' || p[1 + m] == '\0')) return 1;
    return 0;
}

static int lookup(const char *base, ft_sass_class *c) {
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++)
        if (strcmp(bases[i].base, base) == 0) return *c = bases[i].c, 1;
    return 0;
}

ft_sass_class ft_sass_classify(const char *opcode) {
    char base[32];
    ft_sass_class c;
    if (!opcode || !base_of(opcode, base, sizeof base)) return FT_SASS_OTHER;
    if (strcmp(base, "IMAD") == 0 && has_mod(opcode, "MOV")) return FT_SASS_MOVE;
    if (strcmp(base, "HADD2") == 0 && has_mod(opcode, "F32")) return FT_SASS_CONVERT;
    if (lookup(base, &c)) return c;
    size_t k = strlen(base);
    if (k >= 3 && strcmp(base + k - 3, "MMA") == 0) return FT_SASS_MMA; /* HMMA, HGMMA, ... */
    if (base[0] == 'U' && lookup(base + 1, &c)) return c;
    return FT_SASS_OTHER;
}

/* LDSM/STSM: .M88.4 (or .MT88.4) moves four 8x8 tiles of 16-bit values, one register (4 bytes)
 * of each per thread. */
static int matrix_bytes(const char *opcode) {
    for (const char *p = strchr(opcode, '.'); p; p = strchr(p + 1, '.')) {
        const char *q = p + 1;
        if (*q != 'M') continue;
        q += q[1] == 'T' ? 2 : 1;
        if (!isdigit((unsigned char)*q)) continue;
        while (isdigit((unsigned char)*q))
            q++;
        int n = q[0] == '.' && isdigit((unsigned char)q[1]) ? atoi(q + 1) : 1;
        return n >= 1 && n <= 8 ? 4 * n : 4;
    }
    return 4;
}

int ft_sass_access_bytes(const char *opcode) {
    char base[32];
    if (!opcode || !base_of(opcode, base, sizeof base)) return 0;
    static const char *const moving[] = {"LDG", "LD", "STG", "ST", "LDS", "STS", "LDGSTS"};
    if (strcmp(base, "LDSM") == 0 || strcmp(base, "STSM") == 0) return matrix_bytes(opcode);
    int known = 0;
    for (size_t i = 0; i < sizeof moving / sizeof moving[0]; i++)
        known |= strcmp(base, moving[i]) == 0;
    if (!known) return 0;
    static const struct {
        const char *mod;
        int bytes;
    } widths[] = {{"256", 32}, {"128", 16}, {"64", 8}, {"32", 4},
                  {"U16", 2},  {"S16", 2},  {"U8", 1}, {"S8", 1}};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        if (has_mod(opcode, widths[i].mod)) return widths[i].bytes;
    return 4;
}

/* ---- the parser ---------------------------------------------------------------------------- */

/* One instruction as the loops need it. */
typedef struct insn {
    unsigned addr;
    signed char cls;   /* ft_sass_class; -1 for a NOP */
    signed char bytes; /* ft_sass_access_bytes, for the classes that count them */
    int target;        /* a BRA's target (an instruction index once resolved), -1 none */
} insn;

/* A label (nvdisasm) or a branch's target before resolving. */
typedef struct mark {
    char name[48];
    unsigned addr; /* cuobjdump's target address */
    int at;        /* a label: the index of the instruction after it; a target: its branch */
} mark;

/* The function being read. */
typedef struct func {
    char name[128];
    insn *in;
    int n, cap;
    mark *lb, *br; /* labels, branches */
    int nlb, caplb, nbr, capbr;
} func;

static int grow(void **p, int *cap, int need, size_t size) {
    if (need <= *cap) return 0;
    int c = *cap ? *cap * 2 : 256;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * size);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* The line's text without its leading and trailing blanks. */
static void trim(const char **s, size_t *n) {
    while (*n && isspace((unsigned char)**s))
        (*s)++, (*n)--;
    while (*n && isspace((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

/* `.text.NAME:` (nvdisasm) or `Function : NAME` (cuobjdump) opens a function. */
static int line_function(const char *s, size_t n, char *name, size_t cap) {
    const char *p = NULL;
    size_t k = 0;
    if (n > 7 && strncmp(s, ".text.", 6) == 0 && s[n - 1] == ':') {
        p = s + 6, k = n - 7;
    } else if (n > 10 && strncmp(s, "Function", 8) == 0) {
        p = s + 8, k = n - 8;
        trim(&p, &k);
        if (!k || *p != ':') return 0;
        p++, k--;
        trim(&p, &k);
    }
    if (!p || !k) return 0;
    snprintf(name, cap, "%.*s", (int)k, p);
    return 1;
}

/* `NAME:` alone on its line: a label of nvdisasm. */
static int line_label(const char *s, size_t n, char *name, size_t cap) {
    if (n < 2 || n - 1 >= cap || s[n - 1] != ':') return 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '$') return 0;
    memcpy(name, s, n - 1);
    name[n - 1] = '\0';
    return 1;
}

/* An instruction line, `/ *0040* /  @!P0 LDG.E.128 R4, desc[UR4][R2.64] ;` (without the
 * spaces inside the address's comment marks): the address, the opcode with its modifiers and
 * the operands (up to the ';'). The predicate is skipped: every instruction counts once. 0 when
 * the line is not one. */
static int line_insn(const char *s, size_t n, unsigned *addr, char *op, size_t opcap,
                     const char **ops, size_t *nops) {
    if (n < 5 || s[0] != '/' || s[1] != '*' || !isxdigit((unsigned char)s[2])) return 0;
    const char *end = s + n, *p = s + 2;
    unsigned long a = strtoul(p, (char **)&p, 16);
    if (end - p < 2 || p[0] != '*' || p[1] != '/') return 0;
    const char *semi = memchr(p, ';', (size_t)(end - p));
    if (!semi) return 0; /* cut short */
    p += 2;
    while (p < semi && (isspace((unsigned char)*p) || *p == '{'))
        p++;
    if (p < semi && *p == '@') /* the predicate */
        while (p < semi && !isspace((unsigned char)*p))
            p++;
    while (p < semi && isspace((unsigned char)*p))
        p++;
    const char *o = p;
    while (p < semi && (isalnum((unsigned char)*p) || *p == '.' || *p == '_'))
        p++;
    size_t k = (size_t)(p - o);
    if (!k || k >= opcap || !isalpha((unsigned char)*o)) return 0;
    if (p < semi && !isspace((unsigned char)*p)) return 0;
    memcpy(op, o, k);
    op[k] = '\0';
    *addr = (unsigned)a;
    *ops = p;
    *nops = (size_t)(semi - p);
    return 1;
}

/* A BRA's target: nvdisasm's `(.L_x_3) label, else cuobjdump's last 0x address. */
static int branch_target(const char *ops, size_t n, mark *m) {
    const char *q = NULL;
    for (size_t i = 0; i + 1 < n; i++)
        if (ops[i] == '`' && ops[i + 1] == '(') q = ops + i + 2;
    if (q) {
        size_t k = 0;
        while (q + k < ops + n && q[k] != ')')
            k++;
        if (!k || k >= sizeof m->name || q + k == ops + n) return 0;
        memcpy(m->name, q, k);
        m->name[k] = '\0';
        return 1;
    }
    const char *last = NULL;
    for (size_t i = 0; i + 2 < n; i++)
        if (ops[i] == '0' && ops[i + 1] == 'x' && (i == 0 || !isalnum((unsigned char)ops[i - 1])))
            last = ops + i;
    if (!last) return 0;
    m->name[0] = '\0';
    m->addr = (unsigned)strtoul(last, NULL, 16);
    return 1;
}

static int func_add_insn(func *f, unsigned addr, const char *op, const char *ops, size_t nops) {
    if (grow((void **)&f->in, &f->cap, f->n + 1, sizeof *f->in)) return -1;
    insn *in = &f->in[f->n];
    in->addr = addr;
    char base[32];
    int nop = base_of(op, base, sizeof base) && strcmp(base, "NOP") == 0;
    in->cls = nop ? -1 : (signed char)ft_sass_classify(op);
    /* A zero product: `HFMA2.MMA R4, -RZ, RZ, 1.5, 0` loads a constant. */
    if (in->cls == FT_SASS_FP16 && has_mod(op, "MMA")) {
        const char *c = memchr(ops, ',', nops);
        size_t rest = c ? nops - (size_t)(c - ops) : 0;
        if (c && rest > 10 && strncmp(c, ", -RZ, RZ,", 10) == 0) in->cls = FT_SASS_MOVE;
    }
    in->bytes = (signed char)ft_sass_access_bytes(op);
    in->target = -1;
    if (strcmp(base, "BRA") == 0) {
        mark m = {.at = f->n};
        if (branch_target(ops, nops, &m)) {
            if (grow((void **)&f->br, &f->capbr, f->nbr + 1, sizeof *f->br)) return -1;
            f->br[f->nbr++] = m;
        }
    }
    f->n++;
    return 0;
}

static int func_add_label(func *f, const char *name) {
    if (grow((void **)&f->lb, &f->caplb, f->nlb + 1, sizeof *f->lb)) return -1;
    mark *m = &f->lb[f->nlb++];
    snprintf(m->name, sizeof m->name, "%.47s", name);
    m->at = f->n;
    return 0;
}

/* Each branch's target as an instruction index: its label's (nvdisasm), or the instruction at
 * its address (cuobjdump). A target not found (a label past the last instruction) is none. */
static void func_resolve(func *f) {
    for (int b = 0; b < f->nbr; b++) {
        mark *m = &f->br[b];
        int t = -1;
        if (m->name[0]) {
            for (int i = 0; i < f->nlb && t < 0; i++)
                if (strcmp(f->lb[i].name, m->name) == 0) t = f->lb[i].at;
        } else {
            int lo = 0, hi = f->n - 1;
            while (lo <= hi && t < 0) {
                int mid = (lo + hi) / 2;
                if (f->in[mid].addr == m->addr)
                    t = mid;
                else if (f->in[mid].addr < m->addr)
                    lo = mid + 1;
                else
                    hi = mid - 1;
            }
        }
        f->in[m->at].target = t >= 0 && t < f->n ? t : -1;
    }
}

static int is_mem(int c) {
    return c == FT_SASS_LDG || c == FT_SASS_STG || c == FT_SASS_LDS || c == FT_SASS_STS ||
           c == FT_SASS_LDSM || c == FT_SASS_LDGSTS || c == FT_SASS_ATOM || c == FT_SASS_LOCAL;
}

/* The mix of instructions [first, last]. */
static void mix_of(const func *f, int first, int last, ft_sass_mix *m) {
    memset(m, 0, sizeof *m);
    for (int i = first; i <= last; i++) {
        int c = f->in[i].cls;
        if (c < 0) continue;
        m->count[c]++;
        m->total++;
        if (c == FT_SASS_LDG || c == FT_SASS_STG || c == FT_SASS_LDGSTS)
            m->global_bytes += f->in[i].bytes;
        else if (c == FT_SASS_LDS || c == FT_SASS_STS || c == FT_SASS_LDSM)
            m->shared_bytes += f->in[i].bytes;
    }
}

/* A loop while they are being found: its range, nesting, its own memory instructions (in no
 * loop inside it) and all its instructions. */
typedef struct span {
    int first, last, depth, inner, own, total;
} span;

/* Outermost first, then the largest, then by address. */
static int span_order(const void *pa, const void *pb) {
    const span *a = pa, *b = pb;
    if (a->depth != b->depth) return a->depth - b->depth;
    if (a->last - a->first != b->last - b->first)
        return (b->last - b->first) - (a->last - a->first);
    return a->first - b->first;
}

/* The loops of f: one per branch target reached backwards (the farthest branch closes it),
 * nested by their ranges. Returns how many (malloc'd in *out), -1 when out of memory. */
static int find_loops(const func *f, span **out) {
    span *s = NULL;
    int n = 0, cap = 0;
    for (int i = 0; i < f->n; i++) {
        int t = f->in[i].target;
        if (t < 0 || t >= i) continue; /* forward, or the trap `BRA self` after EXIT */
        int k = 0;
        while (k < n && s[k].first != t)
            k++;
        if (k == n) {
            if (grow((void **)&s, &cap, n + 1, sizeof *s)) return free(s), -1;
            s[n++] = (span){.first = t, .last = i};
        } else if (i > s[k].last) {
            s[k].last = i;
        }
    }
    for (int a = 0; a < n; a++) {
        s[a].depth = 1;
        ft_sass_mix m;
        mix_of(f, s[a].first, s[a].last, &m);
        s[a].total = m.total;
        for (int b = 0; b < n; b++) {
            if (a == b) continue;
            if (s[b].first <= s[a].first && s[a].last <= s[b].last) s[a].depth++;
            if (s[a].first <= s[b].first && s[b].last <= s[a].last) s[a].inner++;
        }
    }
    /* Each memory instruction belongs to the innermost loop holding it (the deepest). */
    for (int i = 0; i < f->n && n; i++) {
        if (f->in[i].cls < 0 || !is_mem(f->in[i].cls)) continue;
        int own = -1;
        for (int a = 0; a < n; a++)
            if (s[a].first <= i && i <= s[a].last && (own < 0 || s[a].depth > s[own].depth))
                own = a;
        if (own >= 0) s[own].own++;
    }
    *out = s;
    return n;
}

/* The trips a loop is taken to make per iteration of the loop around it, for the hot loop's
 * weights. 4 rather than more: a short staging loop nested in a tile loop (block-strided copies
 * to shared memory, a few trips) should not outweigh the tile loop's own ldmatrix and mma work
 * (loss_online_fwd's mma variant); a GEMM's k-loop still outweighs its epilogue. */
#define HOT_LOOP_TRIPS 4

/* The rule of ft_sass_hot_loop over spans: the most own memory instructions weighted by
 * HOT_LOOP_TRIPS^depth, then the deepest, the most instructions, the first. -1 when none. */
static int hot_span(const span *s, int n) {
    int h = -1;
    double best = 0;
    for (int i = 0; i < n; i++) {
        double w = s[i].own;
        for (int d = 0; d < s[i].depth && d < 32; d++)
            w *= HOT_LOOP_TRIPS;
        int better = h < 0 || w > best;
        if (h >= 0 && w == best) {
            if (s[i].depth != s[h].depth)
                better = s[i].depth > s[h].depth;
            else if (s[i].total != s[h].total)
                better = s[i].total > s[h].total;
            else
                better = s[i].first < s[h].first;
        }
        if (better) h = i, best = w;
    }
    return h;
}

/* The function read so far into k: its mix and loops (the hot loop always kept). */
static int func_finish(func *f, ft_sass_kernel *k) {
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", f->name);
    func_resolve(f);
    mix_of(f, 0, f->n - 1, &k->mix);
    span *s = NULL;
    int n = find_loops(f, &s);
    if (n < 0) return -1;
    int h = hot_span(s, n);
    span hot = h >= 0 ? s[h] : (span){0, 0, 0, 0, 0, 0};
    if (n > 1) qsort(s, (size_t)n, sizeof *s, span_order);
    k->loops_found = n;
    k->nloops = n < FT_SASS_MAX_LOOPS ? n : FT_SASS_MAX_LOOPS;
    int kept = 0;
    for (int i = 0; i < k->nloops; i++)
        kept |= s[i].first == hot.first;
    if (h >= 0 && !kept) s[k->nloops - 1] = hot;
    for (int i = 0; i < k->nloops; i++) {
        ft_sass_loop *l = &k->loops[i];
        l->first = s[i].first;
        l->last = s[i].last;
        l->depth = s[i].depth;
        l->inner = s[i].inner;
        l->own_memory = s[i].own;
        mix_of(f, l->first, l->last, &l->mix);
    }
    free(s);
    return 0;
}

static void func_reset(func *f, const char *name) {
    snprintf(f->name, sizeof f->name, "%s", name);
    f->n = f->nlb = f->nbr = 0;
}

int ft_sass_parse(const char *text, ft_sass_kernel *out, int max) {
    if (!text) return -1;
    func f;
    memset(&f, 0, sizeof f);
    int found = 0, open = 0, failed = 0;
    for (const char *line = text; *line && !failed;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        const char *s = line, *ops;
        size_t k = n, nops;
        line = nl ? nl + 1 : line + n;
        trim(&s, &k);
        char name[128], op[48];
        unsigned addr;
        if (line_function(s, k, name, sizeof name)) {
            if (open && found < max && out) failed |= func_finish(&f, &out[found]);
            found += open;
            func_reset(&f, name);
            open = 1;
        } else if (!open) {
            continue;
        } else if (line_insn(s, k, &addr, op, sizeof op, &ops, &nops)) {
            failed |= func_add_insn(&f, addr, op, ops, nops);
        } else if (line_label(s, k, name, 48)) {
            failed |= func_add_label(&f, name);
        }
    }
    if (open && !failed && found < max && out) failed |= func_finish(&f, &out[found]);
    found += open;
    free(f.in);
    free(f.lb);
    free(f.br);
    return failed || !found ? -1 : found;
}

const ft_sass_kernel *ft_sass_find(const ft_sass_kernel *k, int n, const char *name) {
    for (int i = 0; k && name && i < n; i++)
        if (strcmp(k[i].name, name) == 0) return &k[i];
    return NULL;
}

const ft_sass_loop *ft_sass_hot_loop(const ft_sass_kernel *k) {
    if (!k || k->nloops <= 0) return NULL;
    span s[FT_SASS_MAX_LOOPS];
    int n = k->nloops < FT_SASS_MAX_LOOPS ? k->nloops : FT_SASS_MAX_LOOPS;
    for (int i = 0; i < n; i++) {
        const ft_sass_loop *l = &k->loops[i];
        s[i] = (span){l->first, l->last, l->depth, l->inner, l->own_memory, l->mix.total};
    }
    int h = hot_span(s, n);
    return h >= 0 ? &k->loops[h] : NULL;
}

/* ---- the tool ------------------------------------------------------------------------------ */

static int executable(const char *path) {
    struct stat st;
    return path && *path && stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

static int take(const char *path, char *buf, size_t n) {
    if (!executable(path) || (size_t)snprintf(buf, n, "%s", path) >= n) return 0;
    return 1;
}

/* dir/name when it is an executable file. */
static int in_dir(const char *dir, const char *name, char *buf, size_t n) {
    char p[FT_KC_PATH_CAP];
    if (!dir || !*dir || (size_t)snprintf(p, sizeof p, "%s/%s", dir, name) >= sizeof p) return 0;
    return take(p, buf, n);
}

static int on_path(const char *name, char *buf, size_t n) {
    const char *path = getenv("PATH");
    while (path && *path) {
        size_t k = strcspn(path, ":");
        char dir[FT_KC_PATH_CAP];
        if (k && k < sizeof dir) {
            memcpy(dir, path, k);
            dir[k] = '\0';
            if (in_dir(dir, name, buf, n)) return 1;
        }
        path += k + (path[k] == ':');
    }
    return 0;
}

/* The last match of a pattern (the newest of nvidia/cu12, nvidia/cu13, ...). */
static int globbed(const char *pattern, char *buf, size_t n) {
    glob_t g;
    int found = 0;
    if (glob(pattern, 0, NULL, &g) == 0)
        for (size_t i = g.gl_pathc; i-- > 0 && !found;)
            found = take(g.gl_pathv[i], buf, n);
    globfree(&g);
    return found;
}

/* NVIDIA's wheels (pip install nvidia-cuda-nvdisasm: nvidia/cu13/bin/nvdisasm): the folder
 * scripts/deps.sh installs them into, then a virtual environment's, the user's and the system's
 * Python site folders. */
static int in_wheels(char *buf, size_t n) {
    const char *home = getenv("HOME"), *xdg = getenv("XDG_DATA_HOME");
    const char *venv = getenv("VIRTUAL_ENV");
    char where[7][FT_KC_PATH_CAP];
    int nw = 0;
    if (xdg && *xdg)
        snprintf(where[nw++], sizeof where[0], "%s/flaretune/tools", xdg);
    else if (home && *home)
        snprintf(where[nw++], sizeof where[0], "%s/.local/share/flaretune/tools", home);
    if (venv && *venv)
        snprintf(where[nw++], sizeof where[0], "%s/lib/python3*/site-packages", venv);
    if (home && *home)
        snprintf(where[nw++], sizeof where[0], "%s/.local/lib/python3*/site-packages", home);
    snprintf(where[nw++], sizeof where[0], "/usr/local/lib/python3*/dist-packages");
    snprintf(where[nw++], sizeof where[0], "/usr/local/lib/python3*/site-packages");
    snprintf(where[nw++], sizeof where[0], "/usr/lib/python3/dist-packages");
    for (int i = 0; i < nw; i++) {
        char pat[FT_KC_PATH_CAP + 32];
        if ((size_t)snprintf(pat, sizeof pat, "%s/nvidia/*/bin/nvdisasm", where[i]) < sizeof pat &&
            globbed(pat, buf, n))
            return 1;
    }
    return 0;
}

/* nvdisasm where it may be, then cuobjdump (which runs nvdisasm itself in CUDA 12 and 13). */
int ft_sass_tool(char *buf, size_t n, char *why, size_t nwhy) {
    const char *env = getenv("FLARETUNE_NVDISASM");
    if (why && nwhy) why[0] = '\0';
    if (env && *env) {
        if (take(env, buf, n)) return 1;
        if (why) snprintf(why, nwhy, "FLARETUNE_NVDISASM=%s is not an executable file", env);
        return 0;
    }
    const char *cuda_home = getenv("CUDA_HOME");
    char home_bin[FT_KC_PATH_CAP] = "";
    if (cuda_home && *cuda_home) snprintf(home_bin, sizeof home_bin, "%s/bin", cuda_home);
    const char *const dirs[] = {home_bin,
#ifdef FT_CUDA_BIN_DIR
                                FT_CUDA_BIN_DIR, /* the toolkit flaretune was built with */
#endif
                                "/usr/local/cuda/bin"};
    const char *const tools[] = {"nvdisasm", "cuobjdump"};
    for (int t = 0; t < 2; t++) {
        if (on_path(tools[t], buf, n)) return 1;
        for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
            if (in_dir(dirs[i], tools[t], buf, n)) return 1;
        if (t == 0 && in_wheels(buf, n)) return 1;
    }
    if (why)
        snprintf(why, nwhy,
                 "no nvdisasm on PATH, in the CUDA toolkit or in NVIDIA's Python wheels (get it "
                 "with scripts/deps.sh build, or pip install nvidia-cuda-nvdisasm; "
                 "FLARETUNE_NVDISASM names one)");
    return 0;
}

/* ---- disassembling a CUBIN ----------------------------------------------------------------- */

/* The parsed result is cached under $FLARETUNE_CACHE_DIR/sass by the CUBIN's hash, as text:
 *   flaretune-sass 1 NCLASS NKERNELS
 *   kernel NAME LOOPS_FOUND NLOOPS TOTAL GLOBAL_BYTES SHARED_BYTES COUNT...
 *   loop FIRST LAST DEPTH INNER OWN_MEMORY TOTAL GLOBAL_BYTES SHARED_BYTES COUNT... (NLOOPS)
 * A file that does not read back whole is ignored (and written again). */
#define CACHE_MAGIC "flaretune-sass 2"

static void put_mix(FILE *f, const ft_sass_mix *m) {
    fprintf(f, " %d %d %d", m->total, m->global_bytes, m->shared_bytes);
    for (int c = 0; c < FT_SASS_NCLASS; c++)
        fprintf(f, " %d", m->count[c]);
    fputc('\n', f);
}

/* The cache text of n kernels (malloc'd), NULL when a name cannot be written in it. */
static char *cache_text(const ft_sass_kernel *k, int n, size_t *len) {
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!f) return NULL;
    int ok = 1;
    fprintf(f, "%s %d %d\n", CACHE_MAGIC, FT_SASS_NCLASS, n);
    for (int i = 0; i < n; i++) {
        for (const char *c = k[i].name; *c; c++)
            ok &= !isspace((unsigned char)*c);
        fprintf(f, "kernel %s %d %d", k[i].name[0] ? k[i].name : "?", k[i].loops_found,
                k[i].nloops);
        put_mix(f, &k[i].mix);
        for (int j = 0; j < k[i].nloops; j++) {
            const ft_sass_loop *l = &k[i].loops[j];
            fprintf(f, "loop %d %d %d %d %d", l->first, l->last, l->depth, l->inner, l->own_memory);
            put_mix(f, &l->mix);
        }
    }
    ok &= fclose(f) == 0;
    if (!ok) free(text);
    return ok ? text : NULL;
}

/* Read a mix's numbers from *p; 0 when one is missing. */
static int get_mix(const char **p, ft_sass_mix *m) {
    int *v[3] = {&m->total, &m->global_bytes, &m->shared_bytes};
    for (int i = 0; i < 3 + FT_SASS_NCLASS; i++) {
        char *end;
        long x = strtol(*p, &end, 10);
        if (end == *p || x < 0 || x > 1 << 30) return 0;
        *(i < 3 ? v[i] : &m->count[i - 3]) = (int)x;
        *p = end;
    }
    return 1;
}

/* The kernels of a cache file (malloc'd in *out); their count, -1 when it does not read back. */
static int cache_read(const char *path, ft_sass_kernel **out) {
    char *text = NULL;
    size_t len = 0;
    if (ft_kc_read_file(path, &text, &len) != 0) return -1;
    int ncls = 0, n = -1, used = 0;
    ft_sass_kernel *k = NULL;
    const char *p = text;
    if (sscanf(p, CACHE_MAGIC " %d %d%n", &ncls, &n, &used) != 2 || ncls != FT_SASS_NCLASS ||
        n < 1 || n > 4096 || !(k = calloc((size_t)n, sizeof *k)))
        n = -1;
    p += used;
    for (int i = 0; i < n; i++) {
        ft_sass_kernel *ki = &k[i];
        used = 0;
        if (sscanf(p, " kernel %127s %d %d%n", ki->name, &ki->loops_found, &ki->nloops, &used) !=
                3 ||
            ki->nloops < 0 || ki->nloops > FT_SASS_MAX_LOOPS || ki->loops_found < ki->nloops)
            break;
        p += used;
        int ok = get_mix(&p, &ki->mix);
        for (int j = 0; j < ki->nloops && ok; j++) {
            ft_sass_loop *l = &ki->loops[j];
            used = 0;
            ok = sscanf(p, " loop %d %d %d %d %d%n", &l->first, &l->last, &l->depth, &l->inner,
                        &l->own_memory, &used) == 5;
            p += used;
            ok = ok && get_mix(&p, &l->mix);
        }
        if (!ok) break;
        if (i == n - 1) {
            free(text);
            *out = k;
            return n;
        }
    }
    free(text);
    free(k);
    return -1;
}

/* A temporary file under $TMPDIR (or /tmp): its descriptor, -1 with errno. */
static int temp_file(char *path, size_t n) {
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    if ((size_t)snprintf(path, n, "%s/flaretune-sass-XXXXXX", dir) >= n) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return mkstemp(path);
}

static int write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w, n -= (size_t)w;
    }
    return 0;
}

/* The tool's first line of complaint (from its stderr file), blanks squeezed. */
static void first_line(const char *path, char *out, size_t n) {
    char *text = NULL;
    size_t len = 0;
    out[0] = '\0';
    if (ft_kc_read_file(path, &text, &len) != 0) return;
    const char *p = text;
    while (*p && isspace((unsigned char)*p))
        p++;
    size_t k = 0;
    for (; *p && *p != '\n' && k + 1 < n; p++)
        if (!isspace((unsigned char)*p) || (k && out[k - 1] != ' '))
            out[k++] = isspace((unsigned char)*p) ? ' ' : *p;
    out[k] = '\0';
    free(text);
}

/* Run the tool on the CUBIN (written to a temporary file); its text in *out (malloc'd). */
static ft_status disassemble(const void *cubin, size_t size, char **out, ft_err *err) {
    char tool[FT_KC_PATH_CAP], why[400];
    if (!ft_sass_tool(tool, sizeof tool, why, sizeof why))
        return ft_err_set(err, FT_EUNSUPPORTED, "SASS: %s", why);
    const char *name = strrchr(tool, '/') ? strrchr(tool, '/') + 1 : tool;
    int cuobjdump = strstr(name, "cuobjdump") != NULL;
    char in[FT_KC_PATH_CAP], errf[FT_KC_PATH_CAP];
    int fd = temp_file(in, sizeof in), efd = fd < 0 ? -1 : temp_file(errf, sizeof errf);
    if (fd < 0 || efd < 0 || write_all(fd, cubin, size) != 0) {
        int e = errno;
        if (fd >= 0) close(fd), unlink(in);
        if (efd >= 0) close(efd), unlink(errf);
        return ft_err_set(err, FT_EIO, "SASS: cannot write the CUBIN to a temporary file: %s",
                          strerror(e));
    }
    close(fd);
    close(efd);
    char *argv[] = {tool, cuobjdump ? "-sass" : "-c", in, NULL};
    int rc = ft_kc_run(argv, errf, (size_t)1 << 30, out, NULL);
    int e = errno;
    char line[300];
    first_line(errf, line, sizeof line);
    unlink(in);
    unlink(errf);
    if (rc < 0)
        return ft_err_set(err, FT_EUNSUPPORTED, "SASS: cannot run %s: %s", tool, strerror(e));
    if (rc != 0) {
        free(*out);
        *out = NULL;
        return ft_err_set(err, FT_EINVAL, "SASS: %s failed on the CUBIN (%zu bytes, exit %d): %s",
                          name, size, rc, line[0] ? line : "no message");
    }
    return FT_OK;
}

/* Disassemble and parse every kernel of the CUBIN (malloc'd in *out, their count in *n). */
static ft_status sass_of(const void *cubin, size_t size, ft_sass_kernel **out, int *n,
                         ft_err *err) {
    char *text = NULL;
    ft_status s = disassemble(cubin, size, &text, err);
    if (s) return s;
    const char *name = "the disassembler";
    int found = ft_sass_parse(text, NULL, 0);
    ft_sass_kernel *k = found > 0 ? calloc((size_t)found, sizeof *k) : NULL;
    if (found > 0 && !k)
        s = ft_err_set(err, FT_ENOMEM, "SASS: out of memory");
    else if (found <= 0 || ft_sass_parse(text, k, found) != found)
        s = ft_err_set(err, FT_EINVAL, "SASS: %s printed no function for the CUBIN (%zu bytes)",
                       name, size);
    free(text);
    if (s) return free(k), s;
    *out = k;
    *n = found;
    return FT_OK;
}

ft_status ft_sass_of_cubin(const void *cubin, size_t size, ft_sass_kernel *out, int max, int *nout,
                           ft_err *err) {
    if (nout) *nout = 0;
    if (!cubin || size < 4 || memcmp(cubin, "\177ELF", 4) != 0)
        return ft_err_set(err, FT_EINVAL, "SASS: not a CUBIN (%zu bytes without an ELF header)",
                          cubin ? size : 0);
    if (max < 0 || (max > 0 && !out))
        return ft_err_set(err, FT_EINVAL, "SASS: no room for the kernels");
    ft_kc_hash h;
    ft_kc_hash_init(&h);
    ft_kc_hash_str(&h, CACHE_MAGIC);
    ft_kc_hash_bytes(&h, cubin, size);
    char key[33], dir[FT_KC_PATH_CAP], path[FT_KC_PATH_CAP + 48];
    ft_kc_hash_hex(&h, key);
    int w = ft_kc_cache_dir("sass", dir, sizeof dir);
    int cache_ok = w > 0 && (size_t)w < sizeof dir &&
                   (size_t)snprintf(path, sizeof path, "%s/%s.txt", dir, key) < sizeof path;
    ft_sass_kernel *k = NULL;
    int n = cache_ok ? cache_read(path, &k) : -1;
    if (n < 0) {
        ft_status s = sass_of(cubin, size, &k, &n, err);
        if (s) return s;
        size_t len = 0;
        char *text = cache_ok ? cache_text(k, n, &len) : NULL;
        if (text && ft_kc_mkdir_p(dir) == 0) (void)ft_kc_write_atomic(path, text, len);
        free(text);
    }
    int m = n < max ? n : max;
    if (m > 0) memcpy(out, k, (size_t)m * sizeof *k);
    if (nout) *nout = m;
    free(k);
    return FT_OK;
}
