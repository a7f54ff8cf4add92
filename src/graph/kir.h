/* kir.h - kernel IR: what one fused kernel computes, as a loop nest over
 * an iteration domain with a straight-line SSA body per element.
 *
 * Both code generators read this IR: src/jit (libgccjit, CPU) and src/gpu
 * (PTX text).  It is deliberately small, in the spirit of tinygrad's UOps:
 * a value is an index into insts[]; LOAD/STORE address a kernel argument at
 * the current point of the loop nest through that argument's strides.
 */
#ifndef TCJIT_KIR_H
#define TCJIT_KIR_H

#include "graph.h"

typedef enum {
    KOP_CONST,   /* imm, in dtype */
    KOP_LOAD,    /* arg = kernel argument slot */
    KOP_STORE,   /* arg = kernel argument slot, a = value */
    KOP_CAST,    /* a converted to dtype (C semantics, bool = a != 0) */
    KOP_BITCAST, /* a reinterpreted as dtype (same size) */
    /* unary, dtype = operand dtype */
    KOP_NEG, KOP_ABS, KOP_SQRT, KOP_EXP, KOP_LOG, KOP_SIN, KOP_COS,
    KOP_TANH, KOP_FLOOR, KOP_RINT, KOP_NOT,  /* NOT: bitwise; logical on bool */
    /* binary, dtype = operand dtype (comparisons produce TC_BOOL) */
    KOP_ADD, KOP_SUB, KOP_MUL, KOP_DIV, KOP_POW,
    KOP_MAX, KOP_MIN,             /* NaN-propagating, like torch.maximum */
    KOP_LT, KOP_LE, KOP_EQ, KOP_NE,
    KOP_AND, KOP_OR, KOP_XOR,     /* bitwise; logical on bool */
    KOP_SHL, KOP_SHR,             /* integer shifts (arithmetic SHR) */
    /* ternary */
    KOP_WHERE,                    /* a ? b : c, a is TC_BOOL */
    KOP_COUNT
} tc_kop;

typedef struct {
    tc_kop op;
    tc_dtype dtype;       /* result dtype */
    int a, b, c;          /* operand value ids, -1 if unused */
    int arg;              /* LOAD/STORE: kernel argument slot */
    union {
        double f;
        int64_t i;
    } imm;                /* CONST */
} tc_kinst;

/* A kernel argument: one plan buffer seen through per-loop-dim strides. */
typedef struct {
    int buffer;                       /* index into tc_plan.buffers */
    tc_dtype dtype;
    int64_t strides[TC_MAX_DIMS];     /* elements per step of each loop dim */
    int is_output;
} tc_karg;

typedef struct {
    char name[32];
    int ndim;                         /* loop dims, outermost first; 0 = 1 elem */
    int64_t sizes[TC_MAX_DIMS];
    int64_t numel;
    int nargs;
    tc_karg *args;
    int ninsts;
    tc_kinst *insts;
    char *desc;                       /* graph nodes it implements (malloc'd) */
} tc_kernel;

/* Builder used by op lowerings (ops.c) and decomposition passes. */
typedef struct tc_kbuilder {
    tc_kernel *k;
    int cap;
} tc_kbuilder;

int kb_emit(tc_kbuilder *kb, tc_kop op, tc_dtype dt, int a, int b, int c);
int kb_const_f(tc_kbuilder *kb, tc_dtype dt, double v);
int kb_const_i(tc_kbuilder *kb, tc_dtype dt, int64_t v);
int kb_cast(tc_kbuilder *kb, int v, tc_dtype to); /* no-op if same dtype */
/* Additions: LOAD of argument slot arg as dt (reused if already loaded),
 * STORE of value v into slot arg.  Return the instruction id or -1. */
int kb_load(tc_kbuilder *kb, int arg, tc_dtype dt);
int kb_store(tc_kbuilder *kb, int arg, int v);

void tc_kernel_clear(tc_kernel *k);

/* Rewrite float32/float64 EXP, LOG, SIN, COS, TANH (and POW with a float
 * exponent) into vectorizable polynomial code made of the other ops, for
 * targets without SIMD transcendentals.  Returns 0 or -1. */
int tc_kernel_decompose_transcendentals(tc_kernel *k);

/* C-like pseudo-source of a kernel (TCJIT_LOGS=output_code).  malloc'd. */
char *tc_kernel_format(const tc_kernel *k);

#endif
