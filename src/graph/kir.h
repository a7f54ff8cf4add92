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
    KOP_TANH, KOP_ERF, KOP_FLOOR, KOP_RINT,
    KOP_NOT,                      /* NOT: bitwise; logical on bool */
    /* binary, dtype = operand dtype (comparisons produce TC_BOOL) */
    KOP_ADD, KOP_SUB, KOP_MUL, KOP_DIV, KOP_POW,
    KOP_MAX, KOP_MIN,             /* NaN-propagating, like torch.maximum */
    KOP_LT, KOP_LE, KOP_EQ, KOP_NE,
    KOP_AND, KOP_OR, KOP_XOR,     /* bitwise; logical on bool */
    KOP_SHL, KOP_SHR,             /* integer shifts (arithmetic SHR) */
    /* ternary */
    KOP_WHERE,                    /* a ? b : c, a is TC_BOOL */
    /* reductions (additions; see "Reduction kernels" below) */
    KOP_ACC,                      /* declare an accumulator: imm.i = kind */
    KOP_ACC_UPDATE,               /* a = KOP_ACC id, b = value */
    KOP_ACC_RESULT,               /* a = KOP_ACC id, imm.i = component */
    KOP_INDEX,                    /* arg = an index argument (tc_karg): its
                                     element offset at the current point,
                                     as TC_I64 (see "Index arguments") */
    KOP_COUNT
} tc_kop;

/* Accumulator kinds (KOP_ACC imm.i).  The accumulator dtype is the
 * KOP_ACC's dtype; KOP_ACC_UPDATE's value b has that dtype too.
 *   kind      identity     update(acc, x)              components
 *   SUM       0            acc + x                     0: value
 *   PROD      1            acc * x                     0: value
 *   MAX       -inf / min   NaN-propagating max (bool: or)   0: value
 *   MIN       +inf / max   NaN-propagating min (bool: and)  0: value
 *   ARGMAX    (-inf, -1)   (x > v or x is NaN and v is not) ? (x, r) : (v, i)
 *                          i.e. first maximum, first NaN wins (torch CPU)
 *                                                      0: value, 1: index
 *   ARGMIN    (+inf, -1)   same with <                 0: value, 1: index
 *   ANY       false        acc | x   (bool)            0: value
 *   ALL       true         acc & x   (bool)            0: value
 *   SOFTMAX   (-inf, 0)    online max and sum of exp   0: max m,
 *             (float32 only; see below)                1: sum s
 * Integer/float identities of MAX/MIN are the dtype's lowest/highest value
 * (-inf/+inf for floats, false/true for bool).  r is the linear index of
 * the current point of the reduction domain (row-major over the kernel's
 * reduction dims, see below).  Component 0 has the accumulator dtype,
 * component 1 (index) is TC_I64; KOP_ACC_RESULT's dtype says which.
 * Combining partial accumulators (threads, vector lanes, blocks) must use
 * the same rule: SUM/PROD add/multiply partials; MAX/MIN NaN-propagating;
 * ARGMAX/ARGMIN pick the larger (smaller) value, NaN over non-NaN, and the
 * smaller index on ties (so the result equals a sequential scan).
 *
 * SOFTMAX (Inductor's online softmax; made only by
 * tc_kernel_online_softmax from a MAX phase and a later sum of exp(x -
 * max)) keeps the running max m (NaN-propagating) and s = sum of exp(x -
 * m) over the points seen, rescaled whenever m grows.  Both components
 * have the accumulator dtype.  A point x is the partial (x, 1); partials
 * (m1, s1), (m2, s2) combine as
 *     t = exp(-|max(m2, lowest) - m1|)
 *     s = m2 > m1 ? s1 t + s2 : s1 + s2 t,   m = max(m1, m2)
 * (lowest: the dtype's lowest finite value, so that m2 = m1 = -inf makes
 * t = 0, not exp(NaN): a partial whose m is -inf has s = 0, and keeps
 * it).  When the final
 * m is finite, s is sum exp(x - m) (rounded differently from two passes);
 * when m is +-inf, s is unspecified (the rewrite selects the two-pass
 * result from m alone); a NaN point makes both NaN. */
typedef enum {
    TC_ACC_SUM,
    TC_ACC_PROD,
    TC_ACC_MAX,
    TC_ACC_MIN,
    TC_ACC_ARGMAX,
    TC_ACC_ARGMIN,
    TC_ACC_ANY,
    TC_ACC_ALL,
    TC_ACC_SOFTMAX,
    TC_ACC_NKINDS
} tc_acc_kind;

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

/* A kernel argument: one plan buffer seen through per-loop-dim strides.
 *
 * Index arguments: buffer == TC_KARG_INDEX names no memory (the runtime
 * passes NULL for it).  KOP_INDEX of such an argument is the element
 * offset a LOAD through it would use: offset + sum of strides * loop
 * indices.  That is how kernels see positions (arange, tril): the
 * scheduler gives the argument the strides of a virtual contiguous tensor,
 * so merging and reordering loop dims works as for real arguments.  They
 * appear in pointwise kernels only (the scheduler materializes an index
 * node that a reduction kernel would read). */
#define TC_KARG_INDEX (-1)

typedef struct {
    int buffer;                       /* index into tc_plan.buffers, or
                                         TC_KARG_INDEX */
    tc_dtype dtype;
    int64_t strides[TC_MAX_DIMS];     /* elements per step of each loop dim
                                         (outer dims, then reduction dims) */
    int is_output;
    int64_t offset;                   /* addition: elements added to every
                                         address (views with a storage
                                         offset); 0 for older plans */
} tc_karg;

#define TC_KIR_MAX_PHASES 8

/* Body of one reduction pass: insts[begin, end). */
typedef struct {
    int begin, end;
} tc_kphase;

typedef struct {
    char name[48];                    /* k3_red_sub_exp_sum (schedule.c) */
    int ndim;                         /* loop dims, outermost first; 0 = 1 elem */
    int64_t sizes[TC_MAX_DIMS];
    int64_t numel;
    int nargs;
    tc_karg *args;
    int ninsts;
    tc_kinst *insts;
    char *desc;                       /* graph nodes it implements (malloc'd) */
    /* ---- additions: reduction kernels (all 0 for pointwise kernels) ---- */
    int nred;                         /* reduction loop dims, after the ndim
                                         outer dims: sizes[ndim + j] */
    int64_t red_numel;                /* product of the reduction sizes */
    int nphases;                      /* 0: pointwise kernel */
    tc_kphase phases[TC_KIR_MAX_PHASES];
} tc_kernel;

/* ---- Reduction kernels ---------------------------------------------------
 *
 * A kernel with nphases == 0 is pointwise: for every point of the ndim
 * loop dims, run insts[0, ninsts) (as before).  numel = product of sizes.
 *
 * A kernel with nphases > 0 computes "for each outer point: reduce over
 * the reduction domain, then an epilogue", possibly in several passes over
 * the same row (softmax = max pass, sum pass, write pass):
 *
 *   for each outer point i (loop dims 0..ndim-1; numel of them):
 *       pre_0
 *       for each reduction point r (dims ndim..ndim+nred-1, row-major):
 *           body_0
 *       pre_1
 *       for each reduction point r: body_1
 *       ...
 *       post
 *
 * where body_p = insts[phases[p].begin, phases[p].end), pre_0 =
 * insts[0, phases[0].begin), pre_p = insts[phases[p-1].end,
 * phases[p].begin) and post = insts[phases[nphases-1].end, ninsts).  The
 * regions tile insts[] in this order.  numel is the number of outer points
 * and red_numel = product of the nred reduction sizes (1 if nred == 0: the
 * bodies then run once per outer point; 0 if a reduction size is 0: the
 * bodies never run and accumulators keep their identity).
 *
 * Visibility: a value defined in a pre/post region is a per-row scalar,
 * usable by every later instruction (later pre/post regions and bodies).
 * A value defined in body_p is per reduction point and usable only inside
 * body_p.  LOAD/STORE in a pre/post region use only the outer indices: the
 * scheduler guarantees their strides on the reduction dims are 0.  A STORE
 * inside a body writes one element per reduction point (softmax's output).
 *
 * Accumulators: KOP_ACC appears in pre_p and belongs to phase p; it is
 * updated (KOP_ACC_UPDATE, possibly several times) only inside body_p and
 * read (KOP_ACC_RESULT) only in pre/post regions after body_p.  An ACC
 * value is not an ordinary operand: only ACC_UPDATE and ACC_RESULT name
 * it.  The emitter may reorder the reduction points of a body freely (split
 * across vector lanes, threads or a thread block, then combine partials as
 * tc_acc_kind says): float SUM must accumulate in the ACC dtype with
 * several partial sums (blocked or pairwise, e.g. 8-16 lanes) rather than
 * one sequential chain, so float32 sums of long rows stay accurate.
 * Everything else in a body is elementwise and order-independent.
 *
 * CPU (libgccjit): run the outer loop over [begin, end) of the outer
 * points as today (ranges split over the thread pool); each phase is an
 * inner loop nest over the reduction dims.  PTX: one block (or warp) per
 * outer point; each thread runs body_p for a strided subset of r, then a
 * block reduction (warp shuffles + shared memory) combines every ACC of
 * phase p and broadcasts the result; pre/post scalar code is computed by
 * every thread (it is cheap and keeps values in registers); a STORE in a
 * pre/post region is done by one thread.
 *
 * The kernel's reduction dims always follow the reduced dims of the graph
 * reductions in their logical order (adjacent dims may be merged), so
 * ARGMAX's index r is torch's index within the reduced dims.
 */

/* Builder used by op lowerings (ops.c) and decomposition passes. */
typedef struct tc_kbuilder {
    tc_kernel *k;
    int cap;
    int region_start;  /* addition: reuse (loads, casts, constants) only of
                          instructions at or after this id (the current
                          reduction region); 0 for pointwise kernels */
} tc_kbuilder;

int kb_emit(tc_kbuilder *kb, tc_kop op, tc_dtype dt, int a, int b, int c);
int kb_const_f(tc_kbuilder *kb, tc_dtype dt, double v);
int kb_const_i(tc_kbuilder *kb, tc_dtype dt, int64_t v);
int kb_cast(tc_kbuilder *kb, int v, tc_dtype to); /* no-op if same dtype */
/* Additions: LOAD of argument slot arg as dt (reused if already loaded),
 * STORE of value v into slot arg.  Return the instruction id or -1. */
int kb_load(tc_kbuilder *kb, int arg, tc_dtype dt);
int kb_store(tc_kbuilder *kb, int arg, int v);
/* KOP_INDEX of index argument arg (reused if already emitted). */
int kb_index(tc_kbuilder *kb, int arg);

/* Additions: accumulators (see "Reduction kernels").  Return ids or -1. */
int kb_acc(tc_kbuilder *kb, tc_acc_kind kind, tc_dtype dt);
int kb_acc_update(tc_kbuilder *kb, int acc, int v);
int kb_acc_result(tc_kbuilder *kb, int acc, int component);

void tc_kernel_clear(tc_kernel *k);

/* An instruction list being rebuilt by a rewriting pass (transcendental
 * decompositions for the CPU and for PTX).  put never fails loudly: it
 * sets `failed` and the pass checks once at the end. */
typedef struct {
    tc_kinst *v;
    int n, cap;
    int failed;
} tc_kbuf;

int tc_kbuf_put(tc_kbuf *t, tc_kop op, tc_dtype dt, int a, int b, int c);

/* A rewriting pass: for each instruction, expand() appends its
 * replacement to t (operands mapped through map) and returns the new value
 * id, or returns TC_KEEP to copy the instruction unchanged, or -1 having
 * appended nothing (the instruction is dropped; no kept one may use it).  The driver
 * remaps operands and phase boundaries and replaces k's instructions.
 * wanted() says whether an instruction is rewritten at all; if none is, k
 * is left alone.  Both get ctx.  Returns 0 or -1 (out of memory; k
 * unchanged). */
#define TC_KEEP (-2)
typedef int (*tc_kwanted_fn)(const tc_kinst *in, void *ctx);
typedef int (*tc_kexpand_fn)(tc_kbuf *t, const tc_kinst *in, const int *map,
                             void *ctx);
int tc_kernel_rewrite(tc_kernel *k, tc_kwanted_fn wanted, tc_kexpand_fn expand,
                      void *ctx);

/* ---- transcendentals (transcendental.c) ----------------------------------
 * One module decomposes EXP, LOG, SIN, COS, TANH, ERF and POW into range
 * reduction + polynomial made of basic KIR ops (tinygrad's
 * transcendental.py does the same), applied only to the ops a target
 * lacks.  Each target declares what it has: native[op] holds
 * TC_MATH_F32 / TC_MATH_F64 for the dtypes in which it computes op itself
 * (a hardware instruction, a libm call, its own instruction sequence);
 * every other float32 / float64 instance of those ops is decomposed.
 * Other ops and dtypes are never touched (float16 / bfloat16 math is
 * computed in float32 by the lowering). */
#define TC_MATH_F32 1
#define TC_MATH_F64 2
typedef struct {
    const char *name;
    unsigned char native[KOP_COUNT];
} tc_math_target;

/* A target with no transcendental of its own (everything decomposed): for
 * tests that interpret decomposed kernels. */
extern const tc_math_target tc_math_target_none;

/* Rewrites the transcendentals of k that target t lacks (ERF first: its
 * decomposition contains an EXP, decomposed with the others when t lacks
 * it).  With sincos_flag != NULL and a pointwise kernel (nphases == 0),
 * float32 SIN / COS take a fast float path valid for |x| <= 8192, and
 * *sincos_flag is the id of a TC_BOOL value true where a fast result is
 * invalid (-1 when the kernel has none): the target reruns such blocks
 * with the exact decomposition.  Reduction kernels always get the exact
 * form (a block cannot be redone once accumulators saw it).  Returns 0 or
 * -1 (out of memory; k unchanged). */
int tc_kernel_decompose_math(tc_kernel *k, const tc_math_target *t,
                             int *sincos_flag);

/* Rewrite every CAST from or to float16 / bfloat16 (KIR casts those only
 * to and from float32) into int32 / float32 bit manipulation, for targets
 * without native conversions (kir_half.c).  Returns 0 or -1. */
int tc_kernel_lower_half_casts(tc_kernel *k);

/* One pass instead of two (kir_online.c): a float32 MAX phase over
 * values x, and a later phase that only sums exp(x - c) with c the max
 * (softmax, log_softmax) or where(|max| == inf, 0, max) (cross-entropy,
 * logsumexp), become one SOFTMAX accumulator: the sum phase disappears
 * and its result is computed from the accumulator's two components, with
 * the two-pass result where the max is infinite.  Applied by a target
 * whose schedule reads such rows from memory twice (reduce_plan.h
 * tc_red_wants_online).  Returns the number of phases removed (0: k
 * unchanged), or -1 (out of memory; k unchanged). */
int tc_kernel_online_softmax(tc_kernel *k);
/* Would it rewrite k?  (Reads k only.) */
int tc_kernel_online_applies(const tc_kernel *k);
/* tcjit.counters()["online_softmax_kernels"]: a target notes each kernel
 * it compiles (or loads from its cache) in the online form, in the
 * process that runs it (CPU compile workers are forked processes);
 * reset != 0 zeroes the count. */
void tc_kernel_online_note(void);
long tc_kernel_online_count(int reset);

/* Does an output of k share its buffer with an input?  Then a value
 * loaded in one pass may differ from the same load in a later pass. */
int tc_kernel_writes_its_input(const tc_kernel *k);

/* Values computed from leaves only: flag[i] = leaf(k, i, ctx) for a
 * CONST, LOAD or INDEX instruction (the caller's rule), 0 for STORE and
 * the accumulator ops, else whether every operand of i is flagged.
 * Parts' shared values (tc_kernel_parts) and the PTX vector entry's
 * lane-uniform ones are both this with other leaves. */
typedef int (*tc_kleaf_fn)(const tc_kernel *k, int i, void *ctx);
void tc_kernel_leaf_values(const tc_kernel *k, tc_kleaf_fn leaf, void *ctx,
                           char *flag);

/* Independent parts of a pointwise kernel (a horizontally fused one: an
 * optimizer step's parameters, a grouped kernel's members).  part[i] is
 * the part of instruction i, numbered by first appearance, or -1 for a
 * shared value computed from constants, positions and scalar inputs only
 * (every argument stride 0, a buffer the kernel does not write): each
 * part that needs it computes it again.  Two instructions are in one part
 * when one is an operand of the other (shared values aside) or both
 * access one buffer, so no input is read by two parts and no part reads
 * what another writes.  Returns the number of parts (0 for a kernel
 * without instructions), -1 if out of memory. */
int tc_kernel_parts(const tc_kernel *k, int *part);

/* Part p of k alone (part from tc_kernel_parts): its instructions and
 * the shared values, in order, into *out (k's fields, insts malloc'd;
 * the arguments are k's, the other parts' simply unused).  0 or -1. */
int tc_kernel_part(const tc_kernel *k, const int *part, int p,
                   tc_kernel *out);

/* region[i] = 2p if instruction i is in pre_p, 2p + 1 if in body_p,
 * 2 nphases if in post (k validated; region has ninsts entries). */
void tc_kernel_regions(const tc_kernel *k, int *region);

/* Value numbering across the passes of a reduction kernel: vn[i] = the
 * first instruction j <= i computing the same value as i at the same
 * reduction point (equal constants; body instructions with equal op,
 * dtype and operand numbers; loads of the same argument).  Lets an
 * emitter keep softmax's exp(x - max) from the sum pass for the write
 * pass instead of recomputing it.  Loads are only equal across passes
 * when !tc_kernel_writes_its_input(k); callers check that. */
void tc_kernel_body_value_numbers(const tc_kernel *k, const int *region,
                                  int *vn);

/* Do a and b compile to the same code?  Everything but the names, the
 * descriptions and which plan buffers the arguments are (only which of
 * them alias one another) must match.  A model traced as one graph has
 * the same kernels once per layer; emitters compile each once. */
int tc_kernel_same_code(const tc_kernel *a, const tc_kernel *b);

/* Dynamic shapes: do a and b compile to the same size-generic code (an
 * emitter that reads sizes, strides, offsets and parameter constants at
 * run time)?  As tc_kernel_same_code, but sizes only by class (0, 1,
 * larger), strides by class (0, 1, larger, negative), offsets by zero /
 * non-zero, and parameter constants (tc_kconst_is_param: a mean's count
 * comes from a size) not by value: the emitters specialize on exactly
 * those. */
int tc_kernel_same_generic_code(const tc_kernel *a, const tc_kernel *b);
/* The stride classes it compares: 0, 1, larger, negative (0..3). */
int tc_stride_class(int64_t stride);

/* A finite float KOP_CONST: a size-generic kernel reads it at run time
 * (it may be derived from a size: 1 / n, n - 1).  While such a kernel is
 * emitted, its j-th one (in instruction order) carries arg
 * TC_KCONST_PARAM + j, through the rewriting passes; value numbering
 * never merges two of them. */
#define TC_KCONST_PARAM (1 << 20)
int tc_kconst_is_param(const tc_kinst *in);

/* Numbers k's parameter constants (arg = TC_KCONST_PARAM + j, in
 * instruction order) before an emitter's rewriting passes, which keep
 * them. */
void tc_kernel_number_params(tc_kernel *k);

/* The block a size-generic kernel reads its sizes from, the same on every
 * target (CPU: jit_internal.h tc_loop_dims; PTX: ptx.h): for the nd loop
 * dims the target iterates (after its own collapsing) the sizes [0, nd),
 * then the strides of argument a at tc_dims_stride_slot, the argument
 * offsets at tc_dims_offset_slot, then the bits of k's parameter
 * constants as doubles (tc_dims_param_slot, in instruction order).
 * strides: [k->nargs][>= nd].  Fills out (when not NULL) and returns its
 * length. */
int64_t tc_dims_block(const tc_kernel *k, int nd, const int64_t *sizes,
                      int64_t (*strides)[TC_MAX_DIMS], int64_t *out);

static inline int
tc_dims_stride_slot(int nd, int a, int d)
{
    return nd + a * nd + d;
}

static inline int
tc_dims_offset_slot(int nd, int nargs, int a)
{
    return nd * (1 + nargs) + a;
}

static inline int
tc_dims_param_slot(int nd, int nargs, int j)
{
    return nd * (1 + nargs) + nargs + j;
}

/* C-like pseudo-source of a kernel (TCJIT_LOGS=output_code).  malloc'd. */
char *tc_kernel_format(const tc_kernel *k);

#endif
