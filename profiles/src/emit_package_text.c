/* emit_package_text.c: the text of an emitted package that follows the profile (docs/emit.md,
 * "--format package"): the header's declaration of each op (its args struct with the field
 * names of docs/emit.md), the op table and the per-op functions, the buckets and the entries,
 * a CUDA package's modules, and the lists of sources and entries of CMakeLists.txt and
 * README.md. emit_package_runtime.c puts them into the templates as variables' values.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "cpu/cpu.h"
#include "op/backend.h"
#include "op/space.h"
#include "profiles/src/emit_package.h"

static int op_nsyms(const ft_op *op) {
    int n = 0;
    while (op->syms[n])
        n++;
    return n;
}

/* Size s of entry e, as the profile gives it. */
static long long entry_size(const ft_profile_entry *e, int s) {
    return (long long)json_integer_value(json_object_get(e->shape, e->op->syms[s]));
}

/* The space of entry i's configuration: its op's CPU or CUDA space. */
static const ft_space *entry_space(const ft_pkg *k, int i) {
    return k->cuda ? ft_cuda_op_of(k->e[i]->op)->space : ft_backend_cpu.space(k->e[i]->op);
}

/* An op's name as a C identifier ("fusion.dflare" -> "fusion_dflare"). */
static void op_ident(const ft_op *op, char *buf, size_t n) {
    snprintf(buf, n, "%s", op->name);
    for (char *c = buf; *c; c++)
        if (!isalnum((unsigned char)*c)) *c = '_';
}

/* ---- field names --------------------------------------------------------------------------- */

/* The keywords of C (C11, C23) and C++ (C++20, the alternative operator tokens among them): the
 * header compiles as either, so no field may be named like one. */
/* clang-format off */
static const char *const c_keywords[] = {
    "_Alignas", "_Alignof", "_Atomic", "_BitInt", "_Bool", "_Complex", "_Decimal128",
    "_Decimal32", "_Decimal64", "_Generic", "_Imaginary", "_Noreturn", "_Static_assert",
    "_Thread_local", "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor",
    "bool", "break", "case", "catch", "char", "char16_t", "char32_t", "char8_t", "class",
    "co_await", "co_return", "co_yield", "compl", "concept", "const", "const_cast", "consteval",
    "constexpr", "constinit", "continue", "decltype", "default", "delete", "do", "double",
    "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for",
    "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept",
    "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private", "protected", "public",
    "register", "reinterpret_cast", "requires", "restrict", "return", "short", "signed",
    "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template", "this",
    "thread_local", "throw", "true", "try", "typedef", "typeid", "typename", "typeof",
    "typeof_unqual", "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t",
    "while", "xor", "xor_eq", NULL};
/* clang-format on */

static int is_keyword(const char *s) {
    for (int i = 0; c_keywords[i]; i++)
        if (!strcmp(c_keywords[i], s)) return 1;
    return 0;
}

/* The fields of an op's args struct: its sizes, then its tensors, in the op's order. */
#define PKG_FIELD_LEN 48
typedef struct op_fields {
    char size[FT_MAX_SYMS][PKG_FIELD_LEN];
    char tensor[FT_MAX_TENSORS][PKG_FIELD_LEN];
} op_fields;

/* The one rule that makes a size's or a tensor's name a field name (docs/emit.md): every
 * character but a letter, digit or '_' becomes '_' (and a name that starts with a digit gets an
 * 'n' before it); then, while the name is a C or C++ keyword or the name of a field before it
 * (or of the fixed fields `attrs` and `device`), a '_' is appended. So the tensor "do" of
 * attention.train is the field do_. */
static void op_fields_of(const ft_op *op, op_fields *f) {
    const char *taken[FT_MAX_SYMS + FT_MAX_TENSORS + 2] = {"attrs", "device"};
    int ntaken = 2;
    int nsyms = 0;
    while (op->syms[nsyms] && nsyms < FT_MAX_SYMS)
        nsyms++;
    for (int k = 0; k < nsyms + op->ntensors && k < FT_MAX_SYMS + FT_MAX_TENSORS; k++) {
        const char *name = k < nsyms ? op->syms[k] : op->tensors[k - nsyms].name;
        char *out = k < nsyms ? f->size[k] : f->tensor[k - nsyms];
        size_t len = 0;
        if (!isalpha((unsigned char)name[0]) && name[0] != '_') out[len++] = 'n';
        for (const char *c = name; *c && len < PKG_FIELD_LEN - 8; c++)
            out[len++] = isalnum((unsigned char)*c) || *c == '_' ? *c : '_';
        out[len] = '\0';
        for (;;) {
            int clash = is_keyword(out);
            for (int t = 0; t < ntaken && !clash; t++)
                clash = !strcmp(taken[t], out);
            if (!clash || len >= PKG_FIELD_LEN - 1) break;
            out[len++] = '_';
            out[len] = '\0';
        }
        taken[ntaken++] = out;
    }
}

/* ---- text --------------------------------------------------------------------------------- */

/* Text safe inside a C comment, a C string or a Markdown table cell: printable ASCII but for
 * quotes, backslashes, '?' (trigraphs), '|' and a '*' and '/' that would end or open a comment. */
void ft_pkg_put_plain(FILE *f, const char *s) {
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        int ok = isalnum(*c) || strchr(" ._+-:,()@=[]'<>^!#$%&~;{}", *c) ||
                 (*c == '*' && c[1] != '/') || (*c == '/' && c[1] != '*' && c[1] != '/');
        fputc(ok ? *c : '_', f);
    }
}

/* "N=48 T=4 H=64 D=3", "eps=1e-06,backward=0,...", "strategy=k_layers,k=2,..." of an entry. */
void ft_pkg_entry_text(const ft_pkg *k, int i, int what, char *buf, size_t n) {
    const ft_profile_entry *e = k->e[i];
    size_t len = 0;
    buf[0] = '\0';
    if (what == 0) {
        for (int s = 0; e->op->syms[s] && len < n; s++)
            len += (size_t)snprintf(buf + len, n - len, "%s%s=%lld", s ? " " : "", e->op->syms[s],
                                    entry_size(e, s));
    } else if (what == 1) {
        const char *key;
        json_t *v;
        json_object_foreach(k->attrs[i], key, v) {
            if (len < n)
                len += (size_t)snprintf(buf + len, n - len, "%s%s=%s", len ? "," : "", key,
                                        json_string_value(v));
        }
    } else {
        ft_config_format(entry_space(k, i), &k->cfg[i], buf, n);
    }
}

/* ---- the header ---------------------------------------------------------------------------- */

static const char *dtype_c(ft_dtype dt) {
    return dt == FT_I32 ? "int32_t" : dt == FT_U8 ? "uint8_t" : dt == FT_F64 ? "double" : "float";
}

/* The role of tensor ts in words, for the header's comments. */
static void role_text(const ft_op *op, const ft_tensor_spec *ts, char *buf, size_t n) {
    int in = ts->role == FT_ROLE_IN || ts->role == FT_ROLE_GRAD_IN;
    int grad = ts->role == FT_ROLE_GRAD_IN || ts->role == FT_ROLE_GRAD_OUT;
    snprintf(buf, n, "%s%s%s%s%s", in ? "in" : "out",
             grad && op->backward == FT_BWD_OPTIONAL ? ", backward=1 only" : "",
             ts->flags & FT_TS_WANT_DW ? ", want_dw=1 only" : "",
             ts->flags & FT_TS_WANT_DX ? ", want_dx=1 only" : "",
             ts->flags & FT_TS_FORWARD ? ", not with grad_only=1" : "");
}

/* The args struct and function of one op. */
static void put_op_decl(FILE *f, const ft_pkg *k, const ft_op *op) {
    char id[64], role[96];
    op_fields fld;
    op_ident(op, id, sizeof id);
    op_fields_of(op, &fld);
    fprintf(f, "/* %s: ", op->name);
    ft_pkg_put_plain(f, op->summary);
    fprintf(f, ".\n * Attributes (args.attrs, \"name=value,...\"; NULL: the defaults):");
    for (int a = 0; op->attrs[a]; a++)
        fprintf(f, "%s %s", a ? "," : "", op->attrs[a]);
    fprintf(f, ". Entries:");
    for (int i = 0; i < k->n; i++) {
        if (k->e[i]->op != op) continue;
        char s[256];
        ft_pkg_entry_text(k, i, 0, s, sizeof s);
        fprintf(f, "\n *   %d: ", i);
        ft_pkg_put_plain(f, s);
    }
    fprintf(f, " */\ntypedef struct %s_%s_args {\n    long long", k->P, id);
    for (int s = 0; op->syms[s]; s++)
        fprintf(f, "%s %s", s ? "," : "", fld.size[s]);
    fprintf(f, "; /* sizes */\n");
    for (int t = 0; t < op->ntensors; t++) {
        const ft_tensor_spec *ts = &op->tensors[t];
        int in = ts->role == FT_ROLE_IN || ts->role == FT_ROLE_GRAD_IN;
        role_text(op, ts, role, sizeof role);
        fprintf(f, "    %s%s *%s; /* [%s] %s: ", in ? "const " : "", dtype_c(ts->dtype),
                fld.tensor[t], ts->dims, role);
        ft_pkg_put_plain(f, ts->doc);
        if (strcmp(fld.tensor[t], ts->name) != 0) {
            fprintf(f, " (tensor '");
            ft_pkg_put_plain(f, ts->name);
            fprintf(f, "')");
        }
        fprintf(f, " */\n");
    }
    if (k->cuda)
        fprintf(f, "    const char *device; /* \"cuda\" (the GPU; NULL too) or \"cuda-emu\" */\n");
    fprintf(f,
            "    const char *attrs;\n} %1$s_%2$s_args;\n\n"
            "int %1$s_%2$s(const %1$s_%2$s_args *args, %1$s_info *info, char *msg, size_t "
            "msg_len);\n\n",
            k->P, id);
}

void ft_pkg_put_op_decls(FILE *f, const ft_pkg *k) {
    for (int j = 0; j < k->nops; j++)
        put_op_decl(f, k, k->ops[j]);
}

/* ---- the generated C ----------------------------------------------------------------------- */

/* The op table and the per-op functions. */
void ft_pkg_put_ops(FILE *f, const ft_pkg *k) {
    fprintf(f, "const %s_op_ %s_ops_[] = {\n", k->P, k->P);
    for (int j = 0; j < k->nops; j++) {
        const ft_op *op = k->ops[j];
        char id[64];
        op_ident(op, id, sizeof id);
        fprintf(f, "    {&ft_op_%s, \"", id);
        for (int s = 0; op->syms[s]; s++)
            fprintf(f, "%s%s", s ? ", " : "", op->syms[s]);
        fprintf(f, "\", \"");
        for (int t = 0; t < op->ntensors; t++)
            fprintf(f, "%s%s", t ? ", " : "", op->tensors[t].name);
        fprintf(f, "\"},\n");
    }
    fprintf(f, "};\nconst int %s_nops_ = %d;\nconst char %s_op_list_[] = \"ops:", k->P, k->nops,
            k->P);
    for (int j = 0; j < k->nops; j++)
        fprintf(f, "%s %s", j ? "," : "", k->ops[j]->name);
    fprintf(f, "\";\n\n");
    for (int j = 0; j < k->nops; j++) {
        const ft_op *op = k->ops[j];
        char id[64];
        op_fields fld;
        op_ident(op, id, sizeof id);
        op_fields_of(op, &fld);
        int ns = op_nsyms(op);
        fprintf(f,
                "int %1$s_%2$s(const %1$s_%2$s_args *args, %1$s_info *info, char *msg, size_t "
                "msg_len) {\n"
                "    if (!args) {\n"
                "        if (info) info->entry = -1, info->exact = 0;\n"
                "        if (msg && msg_len) snprintf(msg, msg_len, \"%3$s: args is NULL\");\n"
                "        return %4$s_EINVAL;\n"
                "    }\n"
                "    const long long sizes[%5$d] = {",
                k->P, id, op->name, k->U, ns);
        for (int s = 0; s < ns; s++)
            fprintf(f, "%sargs->%s", s ? ", " : "", fld.size[s]);
        fprintf(f, "};\n    void *const tensors[%d] = {", op->ntensors);
        for (int t = 0; t < op->ntensors; t++)
            fprintf(f, "%s(void *)args->%s", t ? ", " : "", fld.tensor[t]);
        fprintf(f,
                "};\n    return %s_run(%s\"%s\", args->attrs, sizes, %d, tensors, %d, info, msg, "
                "msg_len);\n}\n\n",
                k->P, k->cuda ? "args->device, " : "", op->name, ns, op->ntensors);
    }
}

/* One bucket: its attributes, then its row (sizes and configuration as constants). */
static void put_bucket_attrs(FILE *f, const ft_pkg *k, int i) {
    fprintf(f, "static const char *const %s_b%d_attrs_[] = {", k->P, i);
    const char *key;
    json_t *v;
    json_object_foreach(k->attrs[i], key, v) {
        fprintf(f, "\"");
        ft_pkg_put_plain(f, key);
        fprintf(f, "\", \"");
        ft_pkg_put_plain(f, json_string_value(v));
        fprintf(f, "\", ");
    }
    fprintf(f, "NULL};\n");
}

void ft_pkg_put_buckets(FILE *f, const ft_pkg *k) {
    for (int i = 0; i < k->n; i++)
        put_bucket_attrs(f, k, i);
    fprintf(f, "\nconst %s_bucket_ %s_buckets_[] = {\n", k->P, k->P);
    for (int i = 0; i < k->n; i++) {
        const ft_profile_entry *e = k->e[i];
        const ft_space *s = entry_space(k, i);
        char text[512];
        ft_pkg_entry_text(k, i, 0, text, sizeof text);
        fprintf(f, "    /* %d: %s ", i, e->op->name);
        ft_pkg_put_plain(f, text);
        fprintf(f, " */\n    {%d, {", k->opi[i]);
        for (int d = 0; e->op->syms[d]; d++)
            fprintf(f, "%s%lldLL", d ? ", " : "", entry_size(e, d));
        fprintf(f, "}, %s_b%d_attrs_, {%d, {", k->P, i, s->nparams);
        for (int p = 0; p < s->nparams; p++) {
            char v[64];
            ft_config_value_str(s, p, k->cfg[i].v[p], v, sizeof v);
            fprintf(f, "%s%d /* %s=", p ? ", " : "", k->cfg[i].v[p], s->params[p].name);
            ft_pkg_put_plain(f, v);
            fprintf(f, " */");
        }
        fprintf(f, "}}},\n");
    }
    fprintf(f, "};\n");
    if (k->cuda) return; /* a CUDA package's entries have their modules */
    fprintf(f, "\nconst %s_entry %s_entries[] = {\n", k->P, k->P);
    ft_pkg_put_entry_rows(f, k);
    fprintf(f, "};\n");
}

/* Entry i's sizes, attributes and configuration (ft_pkg_entry_text), sep between them. */
static void put_entry_texts(FILE *f, const ft_pkg *k, int i, const char *sep) {
    char text[1024];
    for (int what = 0; what < 3; what++) {
        ft_pkg_entry_text(k, i, what, text, what ? sizeof text : 512);
        fprintf(f, "%s", what ? sep : "");
        ft_pkg_put_plain(f, text);
    }
}

void ft_pkg_put_entry_rows(FILE *f, const ft_pkg *k) {
    for (int i = 0; i < k->n; i++) {
        fprintf(f, "    {\"%s\", \"", k->e[i]->op->name);
        put_entry_texts(f, k, i, "\", \"");
        fprintf(f, "\", %.9g", k->e[i]->median_s);
        if (k->cuda)
            fprintf(f, ", %s_b%d_sizes_, %d, %s_b%d_modules_, %d", k->P, i, op_nsyms(k->e[i]->op),
                    k->P, i, k->nmods[i]);
        fprintf(f, "},\n");
    }
}

/* ---- a CUDA package's modules -------------------------------------------------------------- */

/* Module j of entry i's row: the cubin's bytes, the defines, the kernels. */
static void put_cuda_module_data(FILE *f, const ft_pkg *k, int i, int j, const unsigned char *cubin,
                                 size_t size) {
    const ft_cuda_module_spec *m = &k->mods[i * FT_PKG_MAX_MODULES + j];
    fprintf(f, "static const unsigned char %s_b%d_m%d_cubin_[%zu] = {", k->P, i, j, size);
    for (size_t b = 0; b < size; b++)
        fprintf(f, "%s%u,", b % 24 ? "" : "\n   ", cubin[b]);
    fprintf(f, "\n};\nstatic const char *const %s_b%d_m%d_defines_[] = {", k->P, i, j);
    for (int d = 0; d < m->ndefines; d++)
        fprintf(f, "\"%s\", ", m->defines[d]);
    fprintf(f, "NULL};\nstatic const %s_kernel %s_b%d_m%d_kernels_[] = {", k->P, k->P, i, j);
    for (int q = 0; q < m->nkernels; q++)
        fprintf(f, "{\"%s\", %d, %zu}, ", m->kernels[q].name, m->kernels[q].block_threads,
                m->kernels[q].dyn_smem);
    /* ptxas's report as a string (NUL-terminated bytes: any text). */
    const char *log =
        k->logs[i * FT_PKG_MAX_MODULES + j] ? k->logs[i * FT_PKG_MAX_MODULES + j] : "";
    fprintf(f, "};\nstatic const char %s_b%d_m%d_log_[] = {", k->P, i, j);
    for (size_t b = 0; log[b]; b++)
        fprintf(f, "%s%d,", b % 24 ? "" : "\n   ", (int)(unsigned char)log[b]);
    fprintf(f, "0};\n");
}

static void put_cuda_entry(FILE *f, const ft_pkg *k, int i) {
    const ft_profile_entry *e = k->e[i];
    fprintf(f, "static const long long %s_b%d_sizes_[] = {", k->P, i);
    for (int d = 0; d < op_nsyms(e->op); d++)
        fprintf(f, "%s%lldLL", d ? ", " : "", entry_size(e, d));
    fprintf(f, "};\nstatic const %s_module %s_b%d_modules_[] = {\n", k->P, k->P, i);
    for (int j = 0; j < k->nmods[i]; j++) {
        const ft_cuda_module_spec *m = &k->mods[i * FT_PKG_MAX_MODULES + j];
        fprintf(f,
                "    {\"cuda/b%2$d_m%3$d.cu\", \"cubin/b%2$d_m%3$d.%4$s.cubin\", "
                "%1$s_b%2$d_m%3$d_cubin_,\n"
                "     sizeof %1$s_b%2$d_m%3$d_cubin_, %1$s_b%2$d_m%3$d_defines_, %5$d,\n"
                "     %1$s_b%2$d_m%3$d_kernels_, %6$d, \"%7$s\", %1$s_b%2$d_m%3$d_log_},\n",
                k->P, i, j, k->arch, m->ndefines, m->nkernels, k->keys[i * FT_PKG_MAX_MODULES + j]);
    }
    fprintf(f, "};\n");
}

void ft_pkg_put_cuda_modules(FILE *f, const ft_pkg *k, void *const *cubins, const size_t *sizes) {
    for (int i = 0; i < k->n; i++) {
        for (int j = 0; j < k->nmods[i]; j++)
            put_cuda_module_data(f, k, i, j, cubins[i * FT_PKG_MAX_MODULES + j],
                                 sizes[i * FT_PKG_MAX_MODULES + j]);
        put_cuda_entry(f, k, i);
    }
}

/* ---- lists ---------------------------------------------------------------------------------- */

void ft_pkg_put_family_includes(FILE *f, const ft_pkg *k) {
    for (int fam = 0; fam < FT_PKG_NFAMILIES; fam++)
        if (k->fam[fam])
            fprintf(f, "#include \"%s/%s.h\"\n", ft_pkg_families[fam].name,
                    ft_pkg_families[fam].name);
}

void ft_pkg_put_absent(FILE *f, const ft_pkg *k) {
    const char *type = k->cuda ? "ft_cpu_impl" : "struct ft_cuda_op";
    for (int fam = 0; fam < FT_PKG_NFAMILIES; fam++) {
        const char *const *names = k->cuda ? ft_pkg_families[fam].cpu : ft_pkg_families[fam].cuda;
        for (int c = 0; k->fam[fam] && names[c]; c++)
            fprintf(f, "extern const %1$s %2$s;\nconst %1$s %2$s = {0};\n", type, names[c]);
    }
}

/* Is rel a C source a package of k's backend compiles (not a header, a kernel source, or, in a
 * CUDA package, a CPU kernel)? */
static int compiled(const ft_pkg *k, const char *rel) {
    size_t n = strlen(rel);
    return n > 2 && !strcmp(rel + n - 2, ".c") && !(k->cuda && strstr(rel, "_cpu.c"));
}

static void put_list(FILE *f, const ft_pkg *k, const char *lead, const char *const *files,
                     int headers) {
    for (int i = 0; files[i]; i++)
        if (headers || compiled(k, files[i])) fprintf(f, "%ssrc/%s\n", lead, files[i]);
}

void ft_pkg_put_cmake_sources(FILE *f, const ft_pkg *k) {
    put_list(f, k, "  ", ft_pkg_common, 0);
    if (k->cuda) put_list(f, k, "  ", ft_pkg_cuda_common, 0);
    for (int fam = 0; fam < FT_PKG_NFAMILIES; fam++) {
        if (!k->fam[fam]) continue;
        put_list(f, k, "  ", ft_pkg_families[fam].files, 0);
        if (k->cuda) put_list(f, k, "  ", ft_pkg_families[fam].cuda_files, 0);
    }
    fprintf(f, "  src/%s_entries.c\n  src/%s_runtime.c\n", k->P, k->P);
    if (k->cuda) fprintf(f, "  src/%s_run.c\n", k->P);
    fprintf(f, "  src/%s_absent.c\n", k->P);
}

void ft_pkg_put_readme_sources(FILE *f, const ft_pkg *k) {
    put_list(f, k, "  - ", ft_pkg_common, 1);
    for (int fam = 0; fam < FT_PKG_NFAMILIES; fam++)
        if (k->fam[fam]) put_list(f, k, "  - ", ft_pkg_families[fam].files, 1);
    fprintf(f, "  - src/%1$s_entries.c\n  - src/%1$s_runtime.c\n  - src/%1$s_absent.c\n", k->P);
}

void ft_pkg_put_readme_rows(FILE *f, const ft_pkg *k) {
    for (int i = 0; i < k->n; i++) {
        fprintf(f, "| %d | %s | ", i, k->e[i]->op->name);
        put_entry_texts(f, k, i, " | ");
        fprintf(f, " | %.4g us |", k->e[i]->median_s * 1e6);
        for (int j = 0; k->cuda && j < k->nmods[i]; j++) {
            const ft_cuda_module_spec *m = &k->mods[i * FT_PKG_MAX_MODULES + j];
            fprintf(f, " b%d_m%d (", i, j);
            for (int q = 0; q < m->nkernels; q++)
                fprintf(f, "%s%s", q ? ", " : "", m->kernels[q].name);
            fprintf(f, ")");
        }
        fprintf(f, "%s\n", k->cuda ? " |" : "");
    }
}

void ft_pkg_put_cmake_gpu_sources(FILE *f, const ft_pkg *k) {
    put_list(f, k, "    ", ft_pkg_cuda_gpu, 0);
}

void ft_pkg_put_module_names(FILE *f, const ft_pkg *k) {
    for (int i = 0; i < k->n; i++)
        for (int j = 0; j < k->nmods[i]; j++)
            fprintf(f, "  b%d_m%d\n", i, j);
}
