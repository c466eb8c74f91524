/* sass.h: the instruction mix of compiled kernels, read from the SASS of their CUBIN.
 *
 * NVRTC's CUBIN (nvrtc.h) is disassembled by the toolkit's nvdisasm (or cuobjdump -sass), found
 * on FLARETUNE_NVDISASM, PATH, the CUDA toolkit's bin/ or the NVIDIA wheels of PyPI
 * (nvidia-cuda-nvdisasm). Each kernel's instructions are counted by class, in all and per loop
 * (a backward branch closes a loop: the instructions from its target to the branch), with the
 * bytes a thread's global loads and stores move (LDG.E.128 moves 16), so instructions per byte
 * moved is known before any GPU runs the kernel.
 *
 * The parser is pure C and needs no tool (tests feed it recorded SASS); the disassembler is run
 * only by ft_sass_of_cubin. Built in every configuration; without the tool, ft_sass_of_cubin is
 * FT_EUNSUPPORTED with one line saying how to get it.
 */
#ifndef FT_CUDA_SASS_H
#define FT_CUDA_SASS_H

#include <stddef.h>

#include "core/status.h"

typedef enum ft_sass_class {
    FT_SASS_LDG,     /* global loads (LDG)                                                  */
    FT_SASS_STG,     /* global stores (STG)                                                 */
    FT_SASS_LDS,     /* shared loads (LDS)                                                  */
    FT_SASS_STS,     /* shared stores (STS)                                                 */
    FT_SASS_LDSM,    /* ldmatrix (LDSM)                                                     */
    FT_SASS_LDGSTS,  /* cp.async: global to shared without registers (LDGSTS)               */
    FT_SASS_ATOM,    /* atomics and reductions (ATOM, ATOMG, ATOMS, RED, REDG)              */
    FT_SASS_LOCAL,   /* local memory (LDL, STL): spills and stack arrays                    */
    FT_SASS_CONST,   /* constant loads (LDC, ULDC)                                          */
    FT_SASS_FP32,    /* FFMA, FADD, FMUL, FMNMX, FSETP, FSEL, ...                           */
    FT_SASS_FP16,    /* HFMA2, HADD2, HMUL2, HMNMX2, ... (half and bf16 pairs)              */
    FT_SASS_MMA,     /* tensor cores: HMMA, IMMA, HGMMA, ...                                */
    FT_SASS_MUFU,    /* special functions (MUFU.EX2, MUFU.RCP, ...)                         */
    FT_SASS_CONVERT, /* F2F, F2I, I2F, F2FP, FRND, ...                                      */
    FT_SASS_INT,     /* integer and address arithmetic: IADD3, IMAD, LEA, SHF, LOP3, ...    */
    FT_SASS_MOVE,    /* MOV, SHFL, PRMT, SEL, S2R, CS2R, ...                                */
    FT_SASS_BRANCH,  /* BRA, BRX, EXIT, RET, CALL, BSSY, BSYNC, WARPSYNC, ...               */
    FT_SASS_BARRIER, /* BAR, MEMBAR, DEPBAR, ...                                            */
    FT_SASS_OTHER,   /* the rest (NOP excluded from counts)                                 */
    FT_SASS_FP64,    /* DFMA, DADD, DMUL, DSETP, DMNMX (RoPE's angles, the loss's weights)   */
    FT_SASS_NCLASS
} ft_sass_class;

/* Short names for output: "ldg", "stg", "lds", ..., "other", "fp64". */
const char *ft_sass_class_name(ft_sass_class c);
/* The class of one opcode with its modifiers ("LDG.E.128.CONSTANT", "HMMA.16816.F32.BF16"). */
ft_sass_class ft_sass_classify(const char *opcode);
/* Bytes one thread moves with a global or shared load/store opcode (LDG.E.128: 16, STG.E: 4,
 * LDG.E.U16: 2, LDS.64: 8); 0 for other opcodes. */
int ft_sass_access_bytes(const char *opcode);

typedef struct ft_sass_mix {
    int count[FT_SASS_NCLASS]; /* instructions by class                         */
    int total;                 /* all of them but NOPs                          */
    int global_bytes;          /* bytes one thread's LDG+STG+LDGSTS move, once each */
    int shared_bytes;          /* bytes one thread's LDS+STS+LDSM move, once each   */
} ft_sass_mix;

#define FT_SASS_MAX_LOOPS 16

typedef struct ft_sass_loop {
    int first, last; /* instruction indexes (0-based, NOPs included) of the branch target
                        and the branch                                                   */
    int depth;       /* 1: outermost                                                     */
    int inner;       /* the loops found inside it (kept or not); 0: an innermost loop    */
    int own_memory;  /* its memory instructions in no loop inside it (ft_sass_hot_loop)  */
    ft_sass_mix mix; /* the instructions of its body (inner loops included)              */
} ft_sass_loop;

typedef struct ft_sass_kernel {
    char name[128]; /* the kernel's name as the CUBIN has it (extern "C": the source's) */
    ft_sass_mix mix;
    int nloops;      /* kept in loops[] (at most FT_SASS_MAX_LOOPS: outermost and largest first,
                        and the hot loop always)                                               */
    int loops_found; /* all the loops found                                           */
    ft_sass_loop loops[FT_SASS_MAX_LOOPS];
} ft_sass_kernel;

/* Parse disassembly (nvdisasm's or cuobjdump -sass's text) into kernels; returns how many were
 * found (at most max filled), -1 when the text holds no function at all. */
int ft_sass_parse(const char *text, ft_sass_kernel *out, int max);

/* The disassembler this machine has: its path in buf, 1; else 0 and one line in why. */
int ft_sass_tool(char *buf, size_t n, char *why, size_t nwhy);

/* Disassemble a CUBIN and parse it (out: up to max kernels; *nout how many). FT_EUNSUPPORTED
 * with one line when no disassembler is found, FT_EINVAL when it rejects the CUBIN. */
ft_status ft_sass_of_cubin(const void *cubin, size_t size, ft_sass_kernel *out, int max, int *nout,
                           ft_err *err);

/* The kernel of that name among n; NULL when absent. */
const ft_sass_kernel *ft_sass_find(const ft_sass_kernel *k, int n, const char *name);

/* The loop that dominates a kernel's time by the static count: the one with the most memory
 * instructions of its own (own_memory), each weighted by 4^depth as if every loop ran 4 times an
 * iteration of the loop around it; ties go to the deeper, then the larger, then the first. So a
 * GEMM's k-loop beats the tile loop around it, and a row loop holding most of the loads beats a
 * prologue loop before it and the short reductions inside it. NULL when the kernel has no loop. */
const ft_sass_loop *ft_sass_hot_loop(const ft_sass_kernel *k);

#endif
