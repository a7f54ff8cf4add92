/* reduce_plan.h - what a reduction means and how it is scheduled, decided
 * once for every target.
 *
 * Two parts, both read by the CPU (src/jit) and PTX (src/gpu) emitters,
 * which only render them:
 *
 *   - accumulator semantics (tc_acc_sem): per tc_acc_kind the identity,
 *     the value rule of an update and of a combine, the NaN rule and the
 *     index tie rule.  kir.h's table is the contract; this is its one
 *     implementation as data.
 *   - the schedule of one reduction kernel (tc_red_plan) as a function of
 *     a target description (tc_red_target): threads per row and the
 *     cross-thread combine, persistent rows, independent accumulator sets
 *     per thread (vector lanes / unrolled sets), the float SUM cascade,
 *     the split of long rows into partial passes plus a final combine, the
 *     list of passes a target emits and runs, and the scratch layout of
 *     split partials.
 *
 * What stays in the emitters: the loop nest inside a pass (which loops,
 * how points are indexed), loads/stores, the cross-thread combine
 * primitive (warp shuffles + shared memory) and launch geometry.
 * docs/dev.md ("Reductions") describes both renderers against this plan.
 */
#ifndef TCJIT_REDUCE_PLAN_H
#define TCJIT_REDUCE_PLAN_H

#include "kir.h"

/* ---- accumulator semantics ------------------------------------------------
 *
 * Identity: the accumulator's value before any point.
 *
 * Value kinds (everything but ARGMAX / ARGMIN): update(v, x) and
 * combine(v, b) are the same binary op, value_op (bool_op on TC_BOOL
 * accumulators): ADD, MUL, MAX / MIN (NaN-propagating, kir.h) or OR / AND.
 *
 * Index kinds (ARGMAX / ARGMIN, component 1 = index, identity index -1):
 * "b beats a" means  better(b, a) || (b is NaN && a is not)
 * where better is b > a (greater) or b < a.  With the index compared as
 * an unsigned number (the identity's -1 is then the largest):
 *     update  (v, iv) with point (x, r):   take if x beats v, or iv < 0
 *     combine (v, iv) with partial (b, bi): take if b beats v, or b ties v
 *             (b == v, or both NaN) and bi < iv unsigned
 * so the first maximum (minimum) wins, NaN wins over any number and the
 * first NaN over later ones (torch CPU), and an empty partial never wins
 * nor blocks a real one.  An update is a combine with a larger index r,
 * so a target may render updates with its combine.
 *
 * SOFTMAX (online: the running max, component 0, and the sum of exp(x -
 * max), component 1, of the accumulator dtype; float32 only): kir.h's
 * rule.  A target renders it with its own float32 exp (the same function
 * as KOP_EXP's where it has one); updates are combines with the partial
 * (x, 1).  Identity (-inf, 0).
 *
 * Float SUM accumulators are summed in several partial sums, never one
 * sequential chain (kir.h); `cascade` marks them (tc_red_plan.levels). */
typedef enum {
    TC_ACC_ID_ZERO,     /* 0, false */
    TC_ACC_ID_ONE,      /* 1, true */
    TC_ACC_ID_LOWEST,   /* -inf, the dtype's lowest integer, false */
    TC_ACC_ID_HIGHEST   /* +inf, the dtype's highest integer, true */
} tc_acc_identity_kind;

typedef struct {
    tc_acc_identity_kind identity;
    tc_kop value_op;     /* value kinds: update and combine */
    tc_kop bool_op;      /* ... on TC_BOOL accumulators */
    int has_index;       /* ARGMAX / ARGMIN */
    int greater;         /* index kinds: better(b, a) is b > a (else b < a) */
    int online;          /* SOFTMAX: component 1 is a sum of the acc dtype */
} tc_acc_sem;

extern const tc_acc_sem tc_acc_sems[TC_ACC_NKINDS];

/* The binary op of updates and combines of a value kind on dt. */
tc_kop tc_acc_value_op(tc_acc_kind kind, tc_dtype dt);

/* The identity in both representations: *f for float dtypes (+-inf for
 * LOWEST / HIGHEST), *i for integer and bool dtypes. */
void tc_acc_identity(tc_acc_kind kind, tc_dtype dt, double *f, int64_t *i);

/* Components of an accumulator (1, or 2 for the index and SOFTMAX kinds)
 * and the dtype of component c (ARG index: TC_I64). */
int tc_acc_components(tc_acc_kind kind);
tc_dtype tc_acc_component_dtype(tc_acc_kind kind, tc_dtype dt, int c);

/* Is this accumulator cascaded (float SUM)? */
int tc_acc_cascaded(tc_acc_kind kind, tc_dtype dt);

/* ---- the schedule -----------------------------------------------------------
 *
 * A row (one outer point's reduction domain) runs on `threads` threads;
 * thread t takes points t, t + threads, ... (cross_thread targets, which
 * combine the threads' partials with their own primitive; else one thread
 * per row).  Inside a thread, phase p keeps sets[p] independent partial
 * accumulators, point j of the thread going to set j % sets[p] (CPU:
 * vector lanes over consecutive points; PTX: unrolled sets over the
 * thread's strided points), folded pairwise at the end of the phase.
 *
 * A persistent row (persist > 0 points per thread) keeps every point of the
 * thread in registers across the passes: loaded once, body values of an
 * earlier pass reused (softmax's exp(x - max)).
 *
 * Float SUM cascade (fsum_fan > 0): each of the sets[p] partial sums takes
 * fsum_fan points, then is added into a level above (and cleared), which
 * after fsum_fan such adds goes one level further up, and so on:
 * levels[p] levels above the sets for a whole row, levels_chunk[p] for one
 * chunk of a split row.
 *
 * Split rows (nsplit > 1): a few long rows are cut into nsplit chunks,
 * each reduced by a partial pass into a scratch slot, then combined by a
 * final pass (with final_threads threads on cross_thread targets).  On
 * split_outer_dim targets a chunk is chunk_rows consecutive indices of the
 * outermost reduction dim (red_outer of them in all); else chunk c takes
 * the interleaved points of its threads (chunk_rows 0).  Chunk boundaries
 * depend on the shape only, never on the thread count, so results are
 * reproducible. */
#define TC_RED_MAX_LEVELS 6

/* The passes a target emits and runs, in order (one function or kernel
 * each):
 *   ROWS      every row's whole program (not split);
 *   PARTIAL p the row program up to phase p over one chunk (pre region
 *             stores skipped, earlier phases' results read from scratch),
 *             phase p's partials into the chunk's scratch slots;
 *   COMBINE p phase p's partials of all chunks combined (pairwise, in a
 *             fixed order) into chunk 0's slots;
 *   FINAL     the rows' remaining program with its stores, results read
 *             from scratch.  A cross_thread target has no COMBINE pass:
 *             its FINAL folds the partials of phase 0 (its only split
 *             phase) over the final block's threads in place of body 0. */
typedef enum {
    TC_RED_PASS_ROWS,
    TC_RED_PASS_PARTIAL,
    TC_RED_PASS_COMBINE,
    TC_RED_PASS_FINAL
} tc_red_pass_kind;

typedef struct {
    tc_red_pass_kind kind;
    int phase;                          /* PARTIAL, COMBINE */
} tc_red_pass;

#define TC_RED_MAX_PASSES (2 * TC_KIR_MAX_PHASES + 1)

typedef struct {
    const char *name;
    /* threads per row */
    int cross_thread;          /* rows over a block of threads */
    int warp;                  /* block sizes are multiples of this */
    int block_rows;            /* threads per block, many rows */
    int64_t rows_busy;         /* with at least this many rows ... */
    int row_points;            /* ... a row's threads take about this
                                  many points each (0: no such rule) */
    int block_one_row;         /* threads per block, a single row */
    /* persistent rows (cross_thread targets) */
    int persist_points;        /* points per thread at most (0: never) */
    int persist_points_big;    /* ... with block_one_row threads */
    int persist_budget;        /* unrolled body instructions at most */
    int persist_pow2;          /* points per thread rounded up to a power
                                  of two (size-generic kernels: rows of
                                  many lengths share a schedule; every
                                  point is then checked against the row) */
    /* accumulator sets per thread */
    int sets;                  /* light bodies over short rows */
    int sets_long;             /* light bodies, rows >= long_row points */
    int64_t long_row;          /* (innermost reduction dim) */
    int sets_heavy;            /* bodies of more than heavy_body insts */
    int heavy_body;
    int sets_min_points;       /* rows of fewer than sets * this points:
                                  one set (0: no such rule) */
    int fsum_fan;              /* float SUM cascade fan-in (0: none) */
    /* split rows */
    int64_t split_min_points;  /* rows at least this long ... */
    int64_t split_max_rows;    /* ... when there are at most this many */
    int64_t split_chunk;       /* points per chunk at least */
    int64_t split_fill;        /* chunks over all rows wanted to fill the
                                  machine (0: no such bound) */
    int64_t split_max_chunks;
    int64_t split_min_chunks;
    int split_any_kernel;      /* every phase can be split (one partial
                                  pass per phase); 0 (and always on
                                  cross_thread targets): only one-phase
                                  kernels storing nothing before the
                                  combine (sum of a whole tensor, not
                                  softmax) */
    int split_outer_dim;       /* chunks are ranges of the outermost
                                  reduction dim (else interleaved) */
    /* online softmax (kir.h tc_kernel_online_softmax) */
    int online;                /* 0 never, 1 rows read twice from memory
                                  (looped), 2 always; never split rows */
} tc_red_target;

typedef struct {
    int threads;                        /* per row (1: no cross-thread) */
    int persist;                        /* points per thread, 0: looped */
    int sets[TC_KIR_MAX_PHASES];
    int levels[TC_KIR_MAX_PHASES];      /* cascade levels, whole row */
    int levels_chunk[TC_KIR_MAX_PHASES];/* ... one chunk of a split row */
    int64_t nsplit;                     /* chunks per row, 1: not split */
    int64_t chunk_rows;                 /* split_outer_dim: indices of the
                                           outermost reduction dim per
                                           chunk; else 0 */
    int final_threads;                  /* split, cross_thread: threads of
                                           the final combine */
    int npasses;
    tc_red_pass passes[TC_RED_MAX_PASSES];
} tc_red_plan;

/* Scratch of a split kernel (nsplit > 1), the same on every target: per
 * accumulator of k (in instruction order), numel * nsplit 8-byte value
 * slots, row-major (row * nsplit + chunk: the chunk's partial), and for
 * the index kinds as many index slots right after them.  slot[i] (for
 * every KOP_ACC i; other entries untouched; slot may be NULL) is the
 * first value slot of accumulator i.  A target that combines the partials
 * in a pass of their own leaves a row's result in its chunk 0 slots.
 * Returns the number of slots. */
int64_t tc_red_scratch_layout(const tc_kernel *k, const tc_red_plan *p,
                              int64_t *slot);

/* The plan of reduction kernel k (nphases > 0) on target t.  red_outer:
 * the size of the outermost reduction dim as the target loops over it
 * (its own dim merging may differ from k's), used by split_outer_dim
 * targets; 0 for k->sizes[k->ndim].  Returns 0, or -1 for a malformed
 * kernel (p zeroed). */
int tc_red_schedule(const tc_kernel *k, int64_t red_outer,
                    const tc_red_target *t, tc_red_plan *p);

/* Does target t want k's max-then-sum-of-exp phases in one pass
 * (tc_kernel_online_softmax), k scheduled as p?  Only where the second
 * pass would read its row from memory again: a looped row (a persistent
 * one is in registers) that is not split (SOFTMAX partials are never
 * split: split_rows keeps such kernels whole). */
int tc_red_wants_online(const tc_kernel *k, const tc_red_target *t,
                        const tc_red_plan *p);

#endif
