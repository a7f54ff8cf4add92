/* ptx.h - kernel IR (kir.h) -> PTX text, one module per plan.
 *
 * No CUDA and no Python here: the emitter is plain C so that every kernel
 * can be checked with `ptxas` on machines without a GPU (tests/gpu).
 *
 * Module layout: every tc_kernel of a plan becomes one `.entry`; all of
 * them go into one module (one cuModuleLoadData per plan).  Parameters are
 * one `.u64` global pointer per kernel argument (tc_karg order); shapes,
 * strides and offsets are static and baked into the code as constants.
 * Entries with many div.rn / sqrt.rn call them as `.func`s defined at the
 * top of the module (emit_rn in ptx_emit.c; docs/dev.md "JIT time of
 * large PTX kernels").
 *
 * Size-generic kernels (dynamic shapes, tc_plan.dynamic; docs/dynamic.md):
 * every kernel but a split reduction reads its loop sizes, strides,
 * argument offsets and parameter constants (kir.h TC_KCONST_PARAM) from
 * one more parameter, `.param .align 8 .b8 <entry>_d[8 * n]`: the int64
 * block of kir.h tc_dims_block over the collapsed nests (outer dims, then
 * reduction dims), the layout the CPU's kernels read too.  Which strides
 * are 0 or 1, which offsets are 0, 32- or 64-bit index math, the vector
 * entry and the reduction schedule (threads, accumulator sets, persistent
 * points) stay compiled in, as the plan's sizes decide them.  Such a
 * kernel is a module of its own (tc_ptx_kernel.text, entry names
 * "tc_generic", "tc_generic_v4"), so its text depends only on its code:
 * the runtime shares a loaded module between plans of every size whose
 * text is the same (the reuse key: whatever the sizes decided is in the
 * text, the values are in the block).
 *
 * Pointwise kernels (nphases == 0): one element per thread per iteration of
 * a grid-stride loop.  The loop nest is first collapsed (size-1 dims
 * dropped, dims contiguous for every argument merged), then the linear
 * index is turned into per-argument element offsets by div/mod over the
 * (constant) loop sizes.  Index math is 32-bit when numel < 2^31 and every
 * reachable offset fits in 31 bits, 64-bit otherwise.
 *
 * Vector variant: when the collapsed nest is one dim and every argument
 * has stride 1 (or 0: a broadcast scalar, loaded once per thread and
 * iteration) with an offset that is a multiple of the lane count, a second
 * entry `<name>_v4` handles 4 consecutive elements per thread (8 when a
 * 1- or 2-byte dtype takes part, so float16/bfloat16 move 128 bits per
 * access too) with 16-byte accesses (ld.global.v4 of 4-byte types, v2 of
 * 8-byte types, packed 32-bit words of smaller ones), plus a scalar tail
 * loop.  It requires every argument pointer to be
 * 16-byte aligned: the runtime checks the pointers per call and launches
 * the scalar entry otherwise (two variants instead of a flag parameter, so
 * neither variant carries a branch).
 *
 * Reduction kernels (nphases > 0, kir.h "Reduction kernels"): one block
 * per outer point (grid-stride over rows).  Pre/post code runs in every
 * thread (per-row scalars stay in registers); a STORE there is done by
 * thread 0.  Each phase: every thread runs the body for r = tid, tid +
 * ntid, ... and accumulates; then the partial accumulators are combined by
 * warp shuffles (butterfly, so every lane holds the warp result) and one
 * shared-memory slot per warp, which every thread then folds in warp order
 * (identical, deterministic results in all threads; no broadcast step).
 *
 * Split reductions: a few long rows (a whole-tensor sum, argmax, ...)
 * would leave the device idle with one block per row, so such kernels
 * (red_splits in ptx_emit.c) become two entries: <name> runs S blocks per
 * row, each reducing a strided subset of the row and writing its partial
 * accumulators to a scratch buffer; <name>_fin runs one block per row,
 * combines the S partials in order and runs the epilogue.  Deterministic
 * (fixed S and assignment), and float sums become a tree.  Within a
 * thread, phases with accumulators run 4 points per iteration into 4
 * accumulator sets (folded at the end), so no thread sums one long
 * sequential chain.
 *
 * Math: see ptx_math.c (float64 transcendentals and pow as KIR, float32
 * transcendentals as PTX with fma, max 1.5 ulp).
 *
 * Index arguments (kir.h, TC_KARG_INDEX): their element offset is computed
 * like any argument's and KOP_INDEX reads it; the runtime passes a null
 * pointer for them, and kernels with one use the scalar entry only.
 */
#ifndef TCJIT_PTX_H
#define TCJIT_PTX_H

#include <stddef.h>
#include <stdint.h>
#include "../graph/schedule.h"

/* Launch description of one kernel of a module. */
typedef struct {
    char entry[64];        /* scalar entry name (always present) */
    char entry_vec[64];    /* 16-byte-aligned vector entry, "" if none */
    int nargs;
    int block;             /* threads per block */
    int grid;              /* blocks (from the SM count given) */
    int grid_vec;          /* blocks for entry_vec */
    int skip;              /* nothing to compute (an empty domain) */
    int is_reduction;
    /* split reductions: entry computes per-block partials into a scratch
     * buffer of scratch_bytes (one more .u64 parameter, after the
     * kernel arguments, in both entries), then entry_final (one more
     * launch, same parameters) combines them and runs the epilogue */
    char entry_final[64];  /* "" if not split */
    int grid_final;
    int block_final;
    int64_t scratch_bytes;
    /* size-generic kernels (see above), else NULL: the module holding the
     * entries (malloc'd), and the block for this plan's sizes
     * (malloc'd, ndims values), passed as the last parameter */
    char *text;
    int64_t *dims;
    int64_t ndims;
    int part;              /* tc_ptx_module.parts holding the entries */
} tc_ptx_kernel;

typedef struct {
    char *text;            /* the module (malloc'd): every kernel but the
                              size-generic ones */
    /* a large module again as parts (ptx_emit.c PART_BYTES), modules of
     * consecutive kernels' entries that the runtime JIT-compiles in
     * parallel; nparts 0: load text */
    char **parts;
    int nparts;
    int nkernels;
    tc_ptx_kernel *kernels;/* [nkernels], plan order */
} tc_ptx_module;

/* .version / .target for a compute capability (sm = 10 * major + minor):
 * the minimum PTX ISA that supports the target (7.0 for sm_70/75/80, 7.1
 * sm_86, 7.4 sm_87, 7.8 sm_89/sm_90, 8.6 sm_100, ...). */
const char *tc_ptx_isa_version(int sm);

/* Emits the module for plan.  sm_count (>= 1) sizes the grids: enough
 * blocks to fill the device (8 x 256-thread blocks per SM for the scalar
 * entries of pointwise kernels, which loop grid-stride), never more than
 * the work needs; vector entries get one block per 256 vectors (one
 * vector per thread, see emit_kernel).  Returns 0, or -1 with a
 * message in err.  The plan is not modified (kernels are copied before
 * the math rewrites). */
int tc_ptx_emit(const tc_plan *plan, int sm, int sm_count,
                tc_ptx_module *out, char *err, size_t errlen);
void tc_ptx_module_clear(tc_ptx_module *m);

/* max-autotune (docs/autotune.md): variant 0 is tc_ptx_emit's module;
 * 1 .. TC_PTX_VARIANTS - 1 change the threads per block of pointwise and
 * reduction kernels, the grid of grid-stride pointwise entries, and
 * persistent / looped / split reduction rows (ptx_emit.c
 * ptx_red_target, pw_block).  Every variant computes the same values
 * (float sums may add in another order). */
#define TC_PTX_VARIANTS 4
int tc_ptx_emit_variant(const tc_plan *plan, int sm, int sm_count,
                        int variant, tc_ptx_module *out, char *err,
                        size_t errlen);

/* For the test suites (ptxas checks): the module text for plan and sm, as
 * tc_ptx_emit_variant with TC_PTX_TEST_SMS SMs (the size-generic kernels'
 * modules are in the tc_ptx_module that call fills).  Returns 0 with *ptx malloc'd, or -1 with *ptx
 * a malloc'd error message (NULL if even that allocation failed). */
#define TC_PTX_TEST_SMS 132
int tc_gpu_emit_ptx_for_plan(const tc_plan *plan, int sm, int variant,
                             char **ptx);

/* ptx_math.c: the transcendentals the PTX target computes itself (float32
 * EXP, LOG, SIN, COS, TANH, written by tc_ptx_f32_unary); the emitter has
 * tc_kernel_decompose_math rewrite the others (float64 math, ERF, POW). */
extern const tc_math_target tc_ptx_math_target;

/* ptx_math.c: float32 EXP, LOG, SIN, COS, TANH of register x into register
 * d (PTX register names) as one `{ ... }` block of PTX lines, each passed
 * to pr (without indentation or newline).  uid makes the block's labels
 * unique within the entry; sm picks NaN-propagating min/max (sm_80+).
 * flags: TC_PTX_MATH_HALF_RESULTS when every float the kernel stores is
 * float16 / bfloat16 and every float it loads is too: SIN / COS may then
 * use the hardware approximations (absolute error ~1e-6, far inside
 * those dtypes' tolerances; see f32_sincos_half).
 * Returns 0, or -1 for another op. */
#define TC_PTX_MATH_HALF_RESULTS 1
/* TC_PTX_MATH_RCP_NEWTON: TANH's reciprocal as rcp.approx.ftz and one fma
 * Newton step, equal to rcp.rn bit for bit on its operand's range (see
 * f32_tanh), without rcp.rn's branch to a slow path; for pointwise
 * kernels on sm_90 to sm_99, where the equality was checked (an
 * approximation of another architecture may differ; emit_kernel). */
#define TC_PTX_MATH_RCP_NEWTON 2
/* TC_PTX_MATH_EXP_NONPOS: EXP of an argument <= 0 (or NaN) whose result
 * need not reproduce the CPU mirror: the same reduction, then
 * ex2.approx.ftz of the reduced argument instead of the polynomial (its
 * 2 ulp, flushed to 0 below e^-87); 15 instructions instead of 25.  For
 * the online softmax accumulator's factors (ptx_emit.c acc_softmax),
 * whose rounding differs from the two-pass sum's anyway. */
#define TC_PTX_MATH_EXP_NONPOS 4
typedef void (*tc_ptx_printf)(void *ctx, const char *fmt, ...);
int tc_ptx_f32_unary(tc_kop op, int sm, int flags, const char *d,
                     const char *x, int uid, tc_ptx_printf pr, void *ctx);

#endif
