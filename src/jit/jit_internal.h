/* jit_internal.h - pieces shared by the CPU code generator, the runtime and
 * the C tests (tests/c/test_jit.c).  Not a public interface.
 */
#ifndef TCJIT_JIT_INTERNAL_H
#define TCJIT_JIT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "../graph/schedule.h"
#include "../graph/reduce_plan.h"

/* Every kernel compiles to this signature: args[i] is the base pointer of
 * kernel argument i (tc_karg.offset is added inside), and only outer
 * indices [begin, end) of the *collapsed* loop nest (tc_loop below) run;
 * inner dimensions run in full.  For a reduction kernel every outer point
 * runs its whole row program (all phases). */
typedef void (*tc_kernel_fn)(void **args, int64_t begin, int64_t end);

/* A full reduction (one outer point, a long reduction domain) is instead
 * split into chunks of its outermost collapsed reduction dim, with fixed
 * boundaries (they depend on the shape only, so results do not depend on
 * the thread count).  state is int64_t[scratch_slots], laid out as
 * reduce_plan.h's tc_red_scratch_layout says (per accumulator nchunks
 * value slots, then nchunks index slots for ARGMAX / ARGMIN).  For each
 * pass of tc_red_plan.passes (for each phase p: PARTIAL, COMBINE; then
 * FINAL):
 *     part[p](args, rb, re, state, c) for every chunk c (in parallel):
 *         pre regions 0..p (stores skipped, earlier accumulators read from
 *         their chunk 0 slots), body_p over outermost reduction indices
 *         [rb, re), partial accumulators of phase p written to chunk c;
 *     comb[p](state, nchunks): pairwise combine of the partials (fixed
 *         order) into chunk 0's slots;
 * then fin(args, state) runs the pre and post regions with their stores. */
typedef void (*tc_part_fn)(void **args, int64_t rb, int64_t re,
                           int64_t *state, int64_t chunk);
typedef void (*tc_comb_fn)(int64_t *state, int64_t nchunks);
typedef void (*tc_fin_fn)(void **args, int64_t *state);

typedef struct {
    tc_part_fn part[TC_KIR_MAX_PHASES];
    tc_comb_fn comb[TC_KIR_MAX_PHASES];
    tc_fin_fn fin;
} tc_split_fns;

/* A kernel's loop nest after merging dimensions that are contiguous for
 * every argument and dropping size-1 dimensions.  Merging gives the
 * vectorizer long unit-stride inner loops and the pool a long outer range;
 * the outer extent is what begin/end index. */
typedef struct {
    int ndim;                   /* >= 1 */
    int64_t sizes[TC_MAX_DIMS];
    int nargs;
    int64_t (*strides)[TC_MAX_DIMS]; /* [nargs][ndim + nred], malloc'd */
    /* Reduction kernels (all 0 for pointwise ones): the reduction dims,
     * collapsed among themselves the same way (merging keeps the row-major
     * linear index r), follow the outer ones: sizes[ndim .. ndim+nred-1]. */
    int nred;                   /* >= 1 for a reduction kernel */
    int64_t red_numel;
    int nphases;
    int64_t nchunks;            /* > 0: a split full reduction (above) */
    int64_t chunk_rows;         /* outermost reduction indices per chunk */
    int64_t scratch_slots;      /* int64_t slots of a split's state */
    int npasses;                /* reduce_plan.h: the functions of a */
    tc_red_pass passes[TC_RED_MAX_PASSES]; /* reduction, run in order */
} tc_loop;

int tc_loop_build(const tc_kernel *k, tc_loop *out);
void tc_loop_clear(tc_loop *l);

/* Elements one outer index stands for (product of inner sizes). */
int64_t tc_loop_inner_numel(const tc_loop *l);

typedef struct tc_holder tc_holder;

/* Result of compiling a plan: one function (or, for split reductions, a
 * set of them) per kernel. */
typedef struct tc_jit_code {
    tc_holder **holders;        /* what holds the functions (references):
                                   the groups compiled in memory, to files
                                   or loaded from the on-disk cache
                                   (kcache.c), and those of kernels shared
                                   with earlier plans (generic.c) */
    int nholders;
    int nkernels;
    tc_kernel_fn *fns;          /* [nkernels]; NULL for split kernels */
    tc_loop *loops;             /* [nkernels] */
    tc_split_fns *split;        /* [nkernels]; used where loops[i].nchunks */
    /* Dynamic shapes (tc_plan.dynamic): dims[i] is kernel i's block of
     * sizes, strides and offsets (tc_loop_dims), passed as args[nargs],
     * for a size-generic kernel; NULL for a constant-folded one. */
    int64_t **dims;
    int ncompiled;              /* kernels this compile built (the others
                                   came from the generic cache) */
    int64_t *grain;             /* max-autotune: per kernel, element-steps
                                   per thread-pool task (0: the default,
                                   -1: never split); NULL: all default */
} tc_jit_code;

/* The block a size-generic kernel reads (gccjit_emit.c): kir.h's
 * tc_dims_block over the collapsed loop (nd = l->ndim + l->nred).  Fills
 * out (when not NULL) and returns its length. */
int64_t tc_loop_dims(const tc_kernel *k, const tc_loop *l, int64_t *out);

/* The reduction schedule gccjit_emit.c compiles reduction kernel k with. */
int tc_jit_red_plan(const tc_kernel *k, const tc_loop *l, tc_red_plan *p);

/* generic.c: what holds compiled functions (a gcc_jit_result, or a
 * shared object when lib), counted: new (one reference), ref (returns
 * o), unref (the last releases it).  (The type is declared above.) */
tc_holder *tc_holder_new(void *h, int lib);
tc_holder *tc_holder_ref(tc_holder *o);
void tc_holder_unref(tc_holder *o);

/* generic.c: kernels already compiled, shared by plans (the caller holds
 * the compile lock).  Size-generic ones: find gives the function of a
 * kernel with k's generic code and l's loop structure, or NULL; add
 * records one (0, or -1 when out of memory: simply not shared).  Those
 * compiled for their exact sizes (variant: the reduction-schedule
 * variant they were compiled with) the same, until tc_shared_forget
 * (tc_jit_forget_shared).  A record keeps a reference to h; find gives
 * the caller one in *holder. */
tc_kernel_fn tc_generic_find(const tc_kernel *k, const tc_loop *l,
                             tc_holder **holder);
int tc_generic_add(const tc_kernel *k, const tc_loop *l, tc_kernel_fn fn,
                   tc_holder *h);
tc_kernel_fn tc_shared_find(const tc_kernel *k, int variant,
                            tc_holder **holder);
int tc_shared_add(const tc_kernel *k, const tc_loop *l, int variant,
                  tc_kernel_fn fn, tc_holder *h);
void tc_shared_forget(void);

/* Compiles all kernels of plan with the flags of cpu.c: pointwise kernels
 * in one context, reduction kernels in another.  No Python involved.
 * Returns NULL with a message in err on failure. */
tc_jit_code *tc_jit_code_compile(const tc_plan *plan, int variant,
                                 char *err, size_t errlen);
/* variant: 0 the default schedule; 1 .. TC_JIT_VARIANTS - 1 the
 * max-autotune candidates (gccjit_emit.c cpu_variant). */
#define TC_JIT_VARIANTS 5

/* autotune.c: max-autotune.  Compiles plan, the configuration taken from
 * the table on disk (../runtime/tunetable.h) or found by timing the
 * candidates on zero-filled buffers (and then stored).  As
 * tc_jit_code_compile; plans with dynamic sizes are not tuned. */
tc_jit_code *tc_jit_autotune(const tc_plan *plan, char *err, size_t errlen);
void tc_jit_code_free(tc_jit_code *code);

/* Element-steps kernel i does per call (what parallelism is judged by). */
int64_t tc_jit_code_work(const tc_jit_code *code, int i);

/* Runs kernel i of code over its whole domain: rows split over the thread
 * pool when the work is at least threshold elements, split full
 * reductions chunked (chunks in parallel under the same condition).  No
 * Python involved: the caller releases the GIL if it wants to.  Returns 0,
 * or -1 when scratch memory could not be allocated. */
int tc_jit_code_run(const tc_jit_code *code, int i, void **args,
                    int64_t threshold);

/* kcache.c: one gccjit context's kernels in the on-disk cache.  key:
 * the entry of kernels idx[0..n) of plan compiled in a context of that
 * kind (TC_KEY_CHARS + 1 chars).  load: the loaded shared object, or NULL
 * (a miss).  install: reads the shared object gcc wrote to path, stores it
 * under key (unless key is NULL), loads it; NULL with a message in err.
 * sym / close: dlsym / dlclose. */
void tc_kcache_key(const tc_plan *plan, const tc_jit_code *code,
                   const int *idx, int n, int kind, int variant, char *key);
void *tc_kcache_load(const char *key, char *err, size_t errlen);
void *tc_kcache_install(const char *key, const char *path, char *err,
                        size_t errlen);
void *tc_kcache_sym(void *lib, const char *name);
void tc_kcache_close(void *lib);

/* gccjit_emit.c: the transcendentals the CPU target computes itself (libm
 * calls); tc_kernel_decompose_math rewrites the others.  With a sin/cos
 * flag (tc_kernel_decompose_math), the code generator reruns flagged
 * blocks with the exact decomposition. */
extern const tc_math_target tc_jit_math_target;

/* Debug switch for tests/benchmarks: 1 = vectorizer remarks, 2 = the
 * generated assembly, both to stderr; 3 = vectorizer details dumped into
 * a kept /tmp/libgccjit-* directory; 4 = the initial GIMPLE to stderr. */
void tc_jit_set_opt_info(int on);

/* Detected CPU: "-march=..." argument (without "-march="). */
const char *tc_cpu_march(void);

/* Accessor for the C tests: the code object inside a tc_compiled. */
struct tc_compiled;
const tc_jit_code *tc_jit_compiled_code(const struct tc_compiled *c);

/* Elements at or above which a kernel is split over the thread pool. */
int64_t tc_jit_get_parallel_threshold(void);

#endif
