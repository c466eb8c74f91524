/* test_sass.c: the SASS instruction mix (kernels/cuda/analysis/sass.h) from recorded disassembly.
 *
 * The fixtures are written by hand in the two formats the parser reads, nvdisasm's (labels) and
 * cuobjdump's (addresses), after real output of CUDA 13 for sm_90a: a loop of LDG.E.128 and
 * FFMA behind a predicated branch, nested loops with a second back edge, shared memory, HMMA,
 * an unknown opcode, the trap and NOP padding after EXIT, a function with no instructions. The
 * counts, loop bounds, depths and bytes asserted are worked out by hand in the comments. No
 * tool is needed (test_sass_nvrtc runs the real one).
 */
#include <string.h>

#include "cuda/analysis/sass.h"
#include "ft_test.h"

/* A grid-stride loop of float4 loads and FMAs (nvdisasm -c). Twenty instructions and two NOPs:
 *   const 2 (LDC, ULDC)  move 2 (S2R, HFMA2.MMA of a zero product)  int 4  branch 4 (two BRA,
 *   EXIT, the trap)  ldg 1 (16 bytes)  fp32 4  mma 1  other 1 (FROBNICATE)  stg 1 (4 bytes).
 * One loop: .L_x_0 (instruction 6) to the @!P0 BRA (14); the @P0 BRA is forward. */
static const char *const VECDOT_NVDISASM =
    "\t.target\tsm_90a\n"
    "\n"
    "//--------------------- .text.vecdot              --------------------------\n"
    "\t.section\t.text.vecdot,\"ax\",@progbits\n"
    "        .global         vecdot\n"
    "vecdot:\n"
    ".text.vecdot:\n"
    "        /*0000*/                   LDC R1, c[0x0][0x28] ;\n"
    "        /*0010*/                   S2R R0, SR_TID.X ;\n"
    "        /*0020*/                   ULDC.64 UR4, c[0x0][0x208] ;\n"
    "        /*0030*/                   HFMA2.MMA R8, -RZ, RZ, 0, 0 ;\n"
    "        /*0040*/                   ISETP.GE.AND P0, PT, R0, 0x100, PT ;\n"
    "        /*0050*/               @P0 BRA `(.L_x_1) ;\n"
    ".L_x_0:\n"
    "        /*0060*/                   IMAD.WIDE R2, R0, 0x10, R6 ;\n"
    "        /*0070*/                   LDG.E.128 R12, desc[UR4][R2.64] ;\n"
    "        /*0080*/                   IADD3 R0, R0, 0x20, RZ ;\n"
    "        /*0090*/                   FFMA R8, R12, R12, R8 ;\n"
    "        /*00a0*/                   FFMA R8, R13, R13, R8 ;\n"
    "        /*00b0*/                   ISETP.GE.AND P0, PT, R0, 0x100, PT ;\n"
    "        /*00c0*/                   FFMA R8, R14, R14, R8 ;\n"
    "        /*00d0*/                   FFMA R8, R15, R15, R8 ;\n"
    "        /*00e0*/              @!P0 BRA `(.L_x_0) ;\n"
    ".L_x_1:\n"
    "        /*00f0*/                   HMMA.16816.F32.BF16 R16, R4, R10, R16 ;\n"
    "        /*0100*/                   FROBNICATE.X R1, R2 ;\n"
    "        /*0110*/                   STG.E desc[UR4][R2.64], R8 ;\n"
    "        /*0120*/                   EXIT ;\n"
    ".L_x_2:\n"
    "        /*0130*/                   BRA `(.L_x_2);\n"
    "        /*0140*/                   NOP;\n"
    "        /*0150*/                   NOP;\n"
    ".L_x_3:\n"
    "\n"
    "\n"
    "//--------------------- SYMBOLS --------------------------\n";

/* The same kernel as cuobjdump -sass prints it (targets as addresses, encodings beside). */
static const char *const VECDOT_CUOBJDUMP =
    "\n"
    "\tcode for sm_90a\n"
    "\t.target\tsm_90a\n"
    "\n"
    "\t\tFunction : vecdot\n"
    "\t.headerflags\t@\"EF_CUDA_ACCELERATORS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)\"\n"
    "        /*0000*/                   LDC R1, c[0x0][0x28] ;          /* 0x00000a00ff017b82 */\n"
    "                                                                   /* 0x000ff00000000800 */\n"
    "        /*0010*/                   S2R R0, SR_TID.X ;              /* 0x0000000000007919 */\n"
    "                                                                   /* 0x000e620000002100 */\n"
    "        /*0020*/                   ULDC.64 UR4, c[0x0][0x208] ;    /* 0x0000820000047ab9 */\n"
    "        /*0030*/                   HFMA2.MMA R8, -RZ, RZ, 0, 0 ;   /* 0x00000000ff087435 */\n"
    "        /*0040*/                   ISETP.GE.AND P0, PT, R0, 0x100, PT ; /* 0x000001000000780c "
    "*/\n"
    "        /*0050*/               @P0 BRA 0xf0 ;                      /* 0x0000000800d88947 */\n"
    "        /*0060*/                   IMAD.WIDE R2, R0, 0x10, R6 ;    /* 0x0000001000027825 */\n"
    "        /*0070*/                   LDG.E.128 R12, desc[UR4][R2.64] ; /* 0x000000040201c981 "
    "*/\n"
    "        /*0080*/                   IADD3 R0, R0, 0x20, RZ ;        /* 0x0000002000007810 */\n"
    "        /*0090*/                   FFMA R8, R12, R12, R8 ;         /* 0x0000000c0c087223 */\n"
    "        /*00a0*/                   FFMA R8, R13, R13, R8 ;         /* 0x0000000d0d087223 */\n"
    "        /*00b0*/                   ISETP.GE.AND P0, PT, R0, 0x100, PT ; /* 0x000001000000780c "
    "*/\n"
    "        /*00c0*/                   FFMA R8, R14, R14, R8 ;         /* 0x0000000e0e087223 */\n"
    "        /*00d0*/                   FFMA R8, R15, R15, R8 ;         /* 0x0000000f0f087223 */\n"
    "        /*00e0*/              @!P0 BRA 0x60 ;                      /* 0xfffffffc00149947 */\n"
    "        /*00f0*/                   HMMA.16816.F32.BF16 R16, R4, R10, R16 ; /* "
    "0x0000000a0410723c */\n"
    "        /*0100*/                   FROBNICATE.X R1, R2 ;           /* 0x0000000201017abc */\n"
    "        /*0110*/                   STG.E desc[UR4][R2.64], R8 ;    /* 0x0000000802007986 */\n"
    "        /*0120*/                   EXIT ;                          /* 0x000000000000794d */\n"
    "        /*0130*/                   BRA 0x130;                      /* 0xfffffffc00fc7947 */\n"
    "        /*0140*/                   NOP;                            /* 0x0000000000007918 */\n"
    "        /*0150*/                   NOP;                            /* 0x0000000000007918 */\n"
    "\t\t..........\n";

/* A cp.async + ldmatrix + HMMA main loop (.L_x_10, instructions 1 to 16, closed twice: the
 * @!P2 BRA at 13 and the @P1 BRA at 16) around an inner loop (.L_x_11, 6 to 11), then a
 * function with no instructions. Twenty-two instructions:
 *   move 2  ldgsts 1 (16 B)  barrier 3  ldsm 1 (16 B)  lds 1 (8 B)  mma 1  int 4  branch 5
 *   sts 1 (2 B)  mufu 1  convert 1  stg 1 (2 B): global 18 bytes, shared 26. */
static const char *const NESTED_NVDISASM =
    "//--------------------- .text.nested              --------------------------\n"
    ".text.nested:\n"
    "        /*0000*/                   MOV R0, RZ ;\n"
    ".L_x_10:\n"
    "        /*0010*/                   LDGSTS.E.BYPASS.128 [R5], desc[UR4][R2.64] ;\n"
    "        /*0020*/                   LDGDEPBAR ;\n"
    "        /*0030*/                   DEPBAR.LE SB0, 0x0 ;\n"
    "        /*0040*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;\n"
    "        /*0050*/                   MOV R1, RZ ;\n"
    ".L_x_11:\n"
    "        /*0060*/                   LDSM.16.M88.4 R8, [R5] ;\n"
    "        /*0070*/                   LDS.64 R12, [R5+0x100] ;\n"
    "        /*0080*/                   HMMA.16816.F32.BF16 R16, R8, R12, R16 ;\n"
    "        /*0090*/                   IADD3 R1, R1, 0x1, RZ ;\n"
    "        /*00a0*/                   ISETP.NE.AND P0, PT, R1, 0x4, PT ;\n"
    "        /*00b0*/               @P0 BRA `(.L_x_11) ;\n"
    "        /*00c0*/                   STS.U16 [R5], R16 ;\n"
    "        /*00d0*/              @!P2 BRA `(.L_x_10) ;\n"
    "        /*00e0*/                   IADD3 R0, R0, 0x1, RZ ;\n"
    "        /*00f0*/                   ISETP.NE.AND P1, PT, R0, 0x8, PT ;\n"
    "        /*0100*/               @P1 BRA `(.L_x_10) ;\n"
    "        /*0110*/                   MUFU.EX2 R3, R3 ;\n"
    "        /*0120*/                   F2FP.BF16.F32.PACK_AB R3, R3, R3 ;\n"
    "        /*0130*/                   STG.E.U16 desc[UR4][R2.64], R3 ;\n"
    "        /*0140*/                   EXIT ;\n"
    ".L_x_12:\n"
    "        /*0150*/                   BRA `(.L_x_12);\n"
    ".L_x_13:\n"
    "\n"
    "//--------------------- .text.empty               --------------------------\n"
    ".text.empty:\n"
    "\n";

/* Which loop is hot: a prologue loop of four loads ([1, 5]: 4 x 4 = 16), a row loop with five
 * memory instructions of its own ([6, 14]: 5 x 4 = 20) around a loop of arithmetic ([10, 11]:
 * none). The row loop, though a loop lies inside it. */
static const char *const ROWS_NVDISASM =
    ".text.rows:\n"
    "        /*0000*/                   MOV R0, RZ ;\n"
    ".L_x_0:\n"
    "        /*0010*/                   LDG.E R2, desc[UR4][R4.64] ;\n"
    "        /*0020*/                   LDG.E R3, desc[UR4][R4.64+0x4] ;\n"
    "        /*0030*/                   LDG.E R6, desc[UR4][R4.64+0x8] ;\n"
    "        /*0040*/                   LDG.E R7, desc[UR4][R4.64+0xc] ;\n"
    "        /*0050*/               @P0 BRA `(.L_x_0) ;\n"
    ".L_x_1:\n"
    "        /*0060*/                   LDGSTS.E.BYPASS.128 [R8], desc[UR4][R4.64] ;\n"
    "        /*0070*/                   LDS.128 R12, [R8] ;\n"
    "        /*0080*/                   LDS.128 R16, [R8+0x10] ;\n"
    "        /*0090*/                   STG.E.128 desc[UR4][R10.64], R12 ;\n"
    ".L_x_2:\n"
    "        /*00a0*/                   FFMA R1, R1, R1, R1 ;\n"
    "        /*00b0*/               @P1 BRA `(.L_x_2) ;\n"
    "        /*00c0*/                   STS [R8], R1 ;\n"
    "        /*00d0*/                   IADD3 R0, R0, 0x1, RZ ;\n"
    "        /*00e0*/               @P2 BRA `(.L_x_1) ;\n"
    "        /*00f0*/                   EXIT ;\n";

static void check_vecdot(const ft_sass_kernel *k, const char *fmt) {
    FT_CHECK(strcmp(k->name, "vecdot") == 0, "%s: name '%s'", fmt, k->name);
    const ft_sass_mix *m = &k->mix;
    FT_CHECK(m->total == 20, "%s: total %d, expected 20 (NOPs left out)", fmt, m->total);
    static const struct {
        ft_sass_class c;
        int n;
    } want[] = {{FT_SASS_CONST, 2}, {FT_SASS_MOVE, 2}, {FT_SASS_INT, 4}, {FT_SASS_BRANCH, 4},
                {FT_SASS_LDG, 1},   {FT_SASS_FP32, 4}, {FT_SASS_MMA, 1}, {FT_SASS_OTHER, 1},
                {FT_SASS_STG, 1},   {FT_SASS_FP16, 0}, {FT_SASS_LDS, 0}, {FT_SASS_BARRIER, 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        FT_CHECK(m->count[want[i].c] == want[i].n, "%s: %s %d, expected %d", fmt,
                 ft_sass_class_name(want[i].c), m->count[want[i].c], want[i].n);
    FT_CHECK(m->global_bytes == 20 && m->shared_bytes == 0, "%s: bytes %d/%d, expected 20/0", fmt,
             m->global_bytes, m->shared_bytes);
    FT_CHECK(k->nloops == 1 && k->loops_found == 1, "%s: %d loops (%d found), expected 1", fmt,
             k->nloops, k->loops_found);
    if (k->nloops != 1) return;
    const ft_sass_loop *l = &k->loops[0];
    FT_CHECK(l->first == 6 && l->last == 14 && l->depth == 1 && l->inner == 0 && l->own_memory == 1,
             "%s: loop %d..%d depth %d inner %d own %d, expected 6..14 depth 1 inner 0 own 1", fmt,
             l->first, l->last, l->depth, l->inner, l->own_memory);
    FT_CHECK(l->mix.total == 9 && l->mix.count[FT_SASS_INT] == 3 &&
                 l->mix.count[FT_SASS_LDG] == 1 && l->mix.count[FT_SASS_FP32] == 4 &&
                 l->mix.count[FT_SASS_BRANCH] == 1 && l->mix.global_bytes == 16,
             "%s: loop body total %d int %d ldg %d fp32 %d branch %d, %d bytes", fmt, l->mix.total,
             l->mix.count[FT_SASS_INT], l->mix.count[FT_SASS_LDG], l->mix.count[FT_SASS_FP32],
             l->mix.count[FT_SASS_BRANCH], l->mix.global_bytes);
    FT_CHECK(ft_sass_hot_loop(k) == l, "%s: the hot loop is the only loop", fmt);
}

static void test_loop_nvdisasm(void) {
    ft_sass_kernel k[2];
    int n = ft_sass_parse(VECDOT_NVDISASM, k, 2);
    FT_CHECK(n == 1, "%d kernels, expected 1", n);
    if (n == 1) check_vecdot(&k[0], "nvdisasm");
}

static void test_loop_cuobjdump(void) {
    ft_sass_kernel a, b;
    int n = ft_sass_parse(VECDOT_CUOBJDUMP, &a, 1);
    FT_CHECK(n == 1, "%d kernels, expected 1", n);
    if (n != 1) return;
    check_vecdot(&a, "cuobjdump");
    FT_CHECK(ft_sass_parse(VECDOT_NVDISASM, &b, 1) == 1 && memcmp(&a, &b, sizeof a) == 0,
             "the two formats of one kernel parse differently");
}

static void test_nested(void) {
    ft_sass_kernel k[3];
    memset(k, 0, sizeof k);
    int n = ft_sass_parse(NESTED_NVDISASM, k, 3);
    FT_CHECK(n == 2, "%d kernels, expected 2", n);
    if (n != 2) return;
    const ft_sass_kernel *x = ft_sass_find(k, n, "nested");
    FT_CHECK(x == &k[0] && ft_sass_find(k, n, "empty") == &k[1] && !ft_sass_find(k, n, "nope"),
             "ft_sass_find");
    const ft_sass_mix *m = &k[0].mix;
    FT_CHECK(m->total == 22, "total %d, expected 22", m->total);
    static const struct {
        ft_sass_class c;
        int n;
    } want[] = {{FT_SASS_MOVE, 2}, {FT_SASS_LDGSTS, 1}, {FT_SASS_BARRIER, 3}, {FT_SASS_LDSM, 1},
                {FT_SASS_LDS, 1},  {FT_SASS_MMA, 1},    {FT_SASS_INT, 4},     {FT_SASS_BRANCH, 5},
                {FT_SASS_STS, 1},  {FT_SASS_MUFU, 1},   {FT_SASS_CONVERT, 1}, {FT_SASS_STG, 1},
                {FT_SASS_OTHER, 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        FT_CHECK(m->count[want[i].c] == want[i].n, "%s %d, expected %d",
                 ft_sass_class_name(want[i].c), m->count[want[i].c], want[i].n);
    FT_CHECK(m->global_bytes == 18 && m->shared_bytes == 26, "bytes %d/%d, expected 18/26",
             m->global_bytes, m->shared_bytes);
    FT_CHECK(k[0].nloops == 2 && k[0].loops_found == 2, "%d loops, expected 2", k[0].nloops);
    if (k[0].nloops != 2) return;
    const ft_sass_loop *o = &k[0].loops[0], *in = &k[0].loops[1];
    FT_CHECK(o->first == 1 && o->last == 16 && o->depth == 1 && o->inner == 1,
             "outer %d..%d depth %d inner %d, expected 1..16 depth 1 inner 1", o->first, o->last,
             o->depth, o->inner);
    FT_CHECK(in->first == 6 && in->last == 11 && in->depth == 2 && in->inner == 0,
             "inner %d..%d depth %d inner %d, expected 6..11 depth 2 inner 0", in->first, in->last,
             in->depth, in->inner);
    FT_CHECK(o->mix.total == 16 && o->mix.global_bytes == 16 && o->mix.shared_bytes == 26 &&
                 o->mix.count[FT_SASS_BRANCH] == 3 && o->mix.count[FT_SASS_BARRIER] == 3,
             "outer body: total %d, %d/%d bytes, %d branches", o->mix.total, o->mix.global_bytes,
             o->mix.shared_bytes, o->mix.count[FT_SASS_BRANCH]);
    FT_CHECK(in->mix.total == 6 && in->mix.global_bytes == 0 && in->mix.shared_bytes == 24 &&
                 in->mix.count[FT_SASS_MMA] == 1 && in->mix.count[FT_SASS_LDSM] == 1,
             "inner body: total %d, %d/%d bytes", in->mix.total, in->mix.global_bytes,
             in->mix.shared_bytes);
    FT_CHECK(o->own_memory == 2 && in->own_memory == 2, "own memory instructions %d, %d (2, 2)",
             o->own_memory, in->own_memory);
    FT_CHECK(ft_sass_hot_loop(&k[0]) == in, "the hot loop is the inner one (2 x 16 > 2 x 4)");
    FT_CHECK(k[1].mix.total == 0 && k[1].nloops == 0 && !ft_sass_hot_loop(&k[1]),
             "the empty function: total %d, %d loops", k[1].mix.total, k[1].nloops);

    /* Room for one: both are counted, one is written. */
    ft_sass_kernel one[2];
    memset(one, 0x5a, sizeof one);
    FT_CHECK(ft_sass_parse(NESTED_NVDISASM, one, 1) == 2 && one[1].name[0] == 0x5a,
             "max 1 writes one kernel and counts both");
    FT_CHECK(ft_sass_parse(NESTED_NVDISASM, NULL, 0) == 2, "a count without output");
}

static void test_hot_rule(void) {
    ft_sass_kernel k;
    FT_CHECK(ft_sass_parse(ROWS_NVDISASM, &k, 1) == 1, "one kernel");
    FT_CHECK(k.nloops == 3, "%d loops, expected 3", k.nloops);
    if (k.nloops != 3) return;
    const ft_sass_loop *row = &k.loops[0], *pro = &k.loops[1], *in = &k.loops[2];
    FT_CHECK(row->first == 6 && row->last == 14 && row->own_memory == 5 && row->inner == 1,
             "row loop %d..%d own %d inner %d", row->first, row->last, row->own_memory, row->inner);
    FT_CHECK(pro->first == 1 && pro->last == 5 && pro->own_memory == 4 && pro->depth == 1,
             "prologue %d..%d own %d", pro->first, pro->last, pro->own_memory);
    FT_CHECK(in->first == 10 && in->depth == 2 && in->own_memory == 0, "inner %d depth %d own %d",
             in->first, in->depth, in->own_memory);
    const ft_sass_loop *h = ft_sass_hot_loop(&k);
    FT_CHECK(h == row && h->mix.global_bytes == 32 && h->mix.shared_bytes == 36,
             "the hot loop is the row loop (%d), moving 32 global and 36 shared bytes",
             h ? h->first : -1);
    /* Equal weights: the deeper wins. */
    ft_sass_kernel t;
    memset(&t, 0, sizeof t);
    t.nloops = 2;
    t.loops[0] = (ft_sass_loop){.first = 0, .last = 9, .depth = 1, .inner = 1, .own_memory = 4};
    t.loops[1] = (ft_sass_loop){.first = 2, .last = 4, .depth = 2, .inner = 0, .own_memory = 1};
    FT_CHECK(ft_sass_hot_loop(&t) == &t.loops[1], "4 x 4 against 1 x 16: the deeper");
    t.loops[0].own_memory = 5;
    FT_CHECK(ft_sass_hot_loop(&t) == &t.loops[0], "5 x 4 against 1 x 16: the outer");
}

/* More loops than are kept: twenty innermost loops of two instructions, the last with the only
 * load. Kept: sixteen, the hot one among them. */
static void test_many_loops(void) {
    char *text = ft_test_alloc(8192);
    size_t w = (size_t)snprintf(text, 8192, ".text.many:\n");
    for (int i = 0; i < 20; i++)
        w += (size_t)snprintf(
            text + w, 8192 - w, ".L_x_%d:\n /*%04x*/ %s ;\n /*%04x*/ @P0 BRA `(.L_x_%d) ;\n", i,
            32 * i, i == 19 ? "LDG.E R4, desc[UR4][R2.64]" : "IADD3 R0, R0, 1, RZ", 32 * i + 16, i);
    ft_sass_kernel k;
    FT_CHECK(ft_sass_parse(text, &k, 1) == 1, "one kernel");
    FT_CHECK(k.loops_found == 20 && k.nloops == FT_SASS_MAX_LOOPS, "%d found, %d kept",
             k.loops_found, k.nloops);
    const ft_sass_loop *h = ft_sass_hot_loop(&k);
    FT_CHECK(h && h->first == 38 && h->mix.count[FT_SASS_LDG] == 1,
             "the hot loop (the load's, instructions 38..39) is kept: %d", h ? h->first : -1);
    FT_CHECK(k.loops[0].first == 0 && k.loops[14].first == 28, "the first loops kept, in order");
    free(text);
}

static void test_bad_text(void) {
    ft_sass_kernel k[2];
    FT_CHECK(ft_sass_parse(NULL, k, 2) == -1, "NULL");
    FT_CHECK(ft_sass_parse("", k, 2) == -1, "empty text");
    FT_CHECK(ft_sass_parse("hello world\nthis is not SASS\n\x01\x02\xff\n", k, 2) == -1, "garbage");
    FT_CHECK(ft_sass_parse("        /*0000*/ MOV R0, RZ ;\n", k, 2) == -1,
             "instructions outside any function");
    /* Cut short in the middle of the loop's fifth line: the cut line and what follows are gone,
     * and so is the loop's back edge. */
    const char *cut = strstr(VECDOT_NVDISASM, "FFMA R8, R13");
    size_t n = (size_t)(cut - VECDOT_NVDISASM) + 6;
    char *text = ft_test_alloc(n + 1);
    memcpy(text, VECDOT_NVDISASM, n);
    int got = ft_sass_parse(text, k, 2);
    FT_CHECK(got == 1 && k[0].mix.total == 10 && k[0].nloops == 0,
             "truncated: %d kernels, total %d, %d loops (expected 1, 10, 0)", got, k[0].mix.total,
             k[0].nloops);
    /* Lines that look almost like instructions. */
    FT_CHECK(ft_sass_parse(".text.k:\n /*zz*/ MOV R0 ;\n /*0010*/ ;\n /*0020*/ @P0 ;\n"
                           " /*0030 MOV R1 ;\n /*0040*/ 12AB R0 ;\n /*0050*/ BRA `(.L_x_9 ;\n",
                           k, 2) == 1 &&
                 k[0].mix.total == 1 && k[0].nloops == 0,
             "near misses: total %d (only the BRA with a broken target counts)", k[0].mix.total);
    free(text);
}

static void test_classify(void) {
    static const struct {
        const char *op;
        ft_sass_class c;
    } t[] = {
        {"LDG.E.128.CONSTANT", FT_SASS_LDG},
        {"LD.E.64", FT_SASS_LDG},
        {"STG.E.U16", FT_SASS_STG},
        {"LDS.U.128", FT_SASS_LDS},
        {"STS.64", FT_SASS_STS},
        {"STSM.16.M88.4", FT_SASS_STS},
        {"LDSM.16.MT88.4", FT_SASS_LDSM},
        {"LDGSTS.E.BYPASS.LTC128B.128", FT_SASS_LDGSTS},
        {"UTMALDG.2D", FT_SASS_LDGSTS},
        {"ATOMG.E.ADD.F32.FTZ.RN.STRONG.GPU", FT_SASS_ATOM},
        {"RED.E.ADD.F32.FTZ.RN.STRONG.GPU", FT_SASS_ATOM},
        {"ATOMS.ADD", FT_SASS_ATOM},
        {"STL.64", FT_SASS_LOCAL},
        {"LDL", FT_SASS_LOCAL},
        {"ULDC.64", FT_SASS_CONST},
        {"LDC.64", FT_SASS_CONST},
        {"FFMA.FTZ", FT_SASS_FP32},
        {"FSEL", FT_SASS_FP32},
        {"FMNMX", FT_SASS_FP32},
        {"HFMA2.BF16_V2", FT_SASS_FP16},
        {"HFMA2.MMA", FT_SASS_FP16},
        {"HADD2.F32", FT_SASS_CONVERT},
        {"HMMA.16816.F32.BF16", FT_SASS_MMA},
        {"HGMMA.64x128x16.F32.BF16", FT_SASS_MMA},
        {"IMMA.16832.S8.S8", FT_SASS_MMA},
        {"MUFU.EX2", FT_SASS_MUFU},
        {"F2FP.BF16.F32.PACK_AB", FT_SASS_CONVERT},
        {"I2F.U32.RP", FT_SASS_CONVERT},
        {"IMAD.WIDE.U32", FT_SASS_INT},
        {"IMAD.MOV.U32", FT_SASS_MOVE},
        {"UIADD3.X", FT_SASS_INT},
        {"ULOP3.LUT", FT_SASS_INT},
        {"UMOV", FT_SASS_MOVE},
        {"LEA.HI.X", FT_SASS_INT},
        {"SHFL.BFLY", FT_SASS_MOVE},
        {"S2R", FT_SASS_MOVE},
        {"BRA.DIV", FT_SASS_BRANCH},
        {"WARPSYNC.ALL", FT_SASS_BRANCH},
        {"BSSY", FT_SASS_BRANCH},
        {"EXIT", FT_SASS_BRANCH},
        {"BAR.SYNC.DEFER_BLOCKING", FT_SASS_BARRIER},
        {"MEMBAR.SC.GPU", FT_SASS_BARRIER},
        {"DEPBAR.LE", FT_SASS_BARRIER},
        {"WARPGROUP.ARRIVE", FT_SASS_BARRIER},
        {"NOP", FT_SASS_OTHER},
        {"DFMA", FT_SASS_FP64},
        {"DSETP.GEU.AND", FT_SASS_FP64},
        {"VOTEU.ALL", FT_SASS_MOVE},
        {"ENDCOLLECTIVE", FT_SASS_BRANCH},
        {"CALL.REL.NOINC", FT_SASS_BRANCH},
        {"FROBNICATE.X", FT_SASS_OTHER},
        {"", FT_SASS_OTHER},
        {"U", FT_SASS_OTHER},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        ft_sass_class c = ft_sass_classify(t[i].op);
        FT_CHECK(c == t[i].c, "%s: %s, expected %s", t[i].op, ft_sass_class_name(c),
                 ft_sass_class_name(t[i].c));
    }
    FT_CHECK(ft_sass_classify(NULL) == FT_SASS_OTHER, "NULL");
    FT_CHECK(strcmp(ft_sass_class_name(FT_SASS_LDG), "ldg") == 0 &&
                 strcmp(ft_sass_class_name(FT_SASS_OTHER), "other") == 0 &&
                 strcmp(ft_sass_class_name(FT_SASS_NCLASS), "?") == 0,
             "class names");
}

static void test_access_bytes(void) {
    static const struct {
        const char *op;
        int bytes;
    } t[] = {
        {"LDG.E.128", 16},
        {"LDG.E.128.CONSTANT", 16},
        {"LDG.E.64", 8},
        {"LDG.E", 4},
        {"LDG.E.U16", 2},
        {"LDG.E.S16", 2},
        {"LDG.E.U8", 1},
        {"LDG.E.S8", 1},
        {"LDG.E.ENL2.256", 32},
        {"STG.E.128", 16},
        {"STG.E", 4},
        {"LD.E.64", 8},
        {"LDS.128", 16},
        {"LDS.U.64", 8},
        {"STS", 4},
        {"STS.U16", 2},
        {"LDSM.16.M88.4", 16},
        {"LDSM.16.MT88.2", 8},
        {"LDSM.16.M88", 4},
        {"STSM.16.M88.4", 16},
        {"LDGSTS.E.BYPASS.128", 16},
        {"LDGSTS.E.BYPASS.LTC128B.128", 16},
        {"LDGSTS.E.LTC128B", 4},
        {"LDGSTS.E.64", 8},
        {"ATOMG.E.ADD.F32", 0},
        {"LDL.64", 0},
        {"LDC.64", 0},
        {"FFMA", 0},
        {"UTMALDG.2D", 0},
        {"", 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int b = ft_sass_access_bytes(t[i].op);
        FT_CHECK(b == t[i].bytes, "%s: %d bytes, expected %d", t[i].op, b, t[i].bytes);
    }
    FT_CHECK(ft_sass_access_bytes(NULL) == 0, "NULL");
}

/* A CUBIN the tool cannot be found for (no cache holds this one): FT_EUNSUPPORTED, one line; a
 * buffer that is no ELF file: FT_EINVAL. */
static void test_no_tool(void) {
    static const unsigned char fake[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0x33, 0x41, 0x42};
    ft_sass_kernel k[1];
    int n = -1;
    ft_err err = {0};
    setenv("FLARETUNE_NVDISASM", "/nonexistent/nvdisasm", 1);
    ft_status s = ft_sass_of_cubin(fake, sizeof fake, k, 1, &n, &err);
    FT_CHECK(s == FT_EUNSUPPORTED && n == 0 && strstr(err.msg, "FLARETUNE_NVDISASM") &&
                 !strchr(err.msg, '\n'),
             "%s: %s", ft_status_name(s), err.msg);
    char path[256], why[256];
    FT_CHECK(!ft_sass_tool(path, sizeof path, why, sizeof why) && strstr(why, "/nonexistent"),
             "ft_sass_tool: %s", why);
    unsetenv("FLARETUNE_NVDISASM");
    s = ft_sass_of_cubin("not an ELF", 10, k, 1, &n, &err);
    FT_CHECK(s == FT_EINVAL && strstr(err.msg, "not a CUBIN"), "%s: %s", ft_status_name(s),
             err.msg);
    FT_CHECK(ft_sass_of_cubin(NULL, 0, k, 1, &n, &err) == FT_EINVAL, "NULL CUBIN");
}

int main(void) {
    FT_RUN(test_loop_nvdisasm);
    FT_RUN(test_loop_cuobjdump);
    FT_RUN(test_nested);
    FT_RUN(test_hot_rule);
    FT_RUN(test_many_loops);
    FT_RUN(test_bad_text);
    FT_RUN(test_classify);
    FT_RUN(test_access_bytes);
    FT_RUN(test_no_tool);
    return ft_test_finish();
}
