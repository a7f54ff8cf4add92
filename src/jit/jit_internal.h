/* jit_internal.h - pieces shared by the CPU code generator, the runtime and
 * the C tests (tests/c/test_jit.c).  Not a public interface.
 */
#ifndef TCJIT_JIT_INTERNAL_H
#define TCJIT_JIT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "../graph/schedule.h"

/* Every kernel compiles to this signature: args[i] is the base pointer of
 * kernel argument i, and only outer indices [begin, end) of the *collapsed*
 * loop nest (tc_loop below) run; inner dimensions run in full. */
typedef void (*tc_kernel_fn)(void **args, int64_t begin, int64_t end);

/* A kernel's loop nest after merging dimensions that are contiguous for
 * every argument and dropping size-1 dimensions.  Merging gives the
 * vectorizer long unit-stride inner loops and the pool a long outer range;
 * the outer extent is what begin/end index. */
typedef struct {
    int ndim;                   /* >= 1 */
    int64_t sizes[TC_MAX_DIMS];
    int nargs;
    int64_t (*strides)[TC_MAX_DIMS]; /* [nargs][ndim], malloc'd */
} tc_loop;

int tc_loop_build(const tc_kernel *k, tc_loop *out);
void tc_loop_clear(tc_loop *l);

/* Elements one outer index stands for (product of inner sizes). */
int64_t tc_loop_inner_numel(const tc_loop *l);

/* Result of one libgccjit compile: one function per kernel of a plan. */
typedef struct tc_jit_code {
    void *result;               /* gcc_jit_result * */
    int nkernels;
    tc_kernel_fn *fns;          /* [nkernels] */
    tc_loop *loops;             /* [nkernels] */
} tc_jit_code;

/* Compiles all kernels of plan in one context with the flags of cpu.c.
 * No Python involved.  Returns NULL with a message in err on failure. */
tc_jit_code *tc_jit_code_compile(const tc_plan *plan, char *err,
                                 size_t errlen);
void tc_jit_code_free(tc_jit_code *code);

/* transcendental.c, CPU only: like tc_kernel_decompose_transcendentals but
 * float32 sin/cos take a fast float path valid for |x| <= 8192; *flag is
 * the id of a TC_BOOL value true where that result is invalid, or -1.  The
 * code generator reruns flagged blocks with the exact decomposition. */
int tc_kernel_decompose_transcendentals_cpu(tc_kernel *k, int *flag);

/* Debug switch for tests/benchmarks: 1 = vectorizer remarks, 2 = the
 * generated assembly, both to stderr. */
void tc_jit_set_opt_info(int on);

/* Detected CPU: "-march=..." argument (without "-march="). */
const char *tc_cpu_march(void);

/* Accessor for the C tests: the code object inside a tc_compiled. */
struct tc_compiled;
const tc_jit_code *tc_jit_compiled_code(const struct tc_compiled *c);

/* Elements at or above which a kernel is split over the thread pool. */
int64_t tc_jit_get_parallel_threshold(void);

#endif
