/* schedule.h - fusion and buffer planning: graph -> kernel plan.
 *
 * Pointwise nodes are grouped so that each group is one kernel over one
 * iteration domain; values flow between ops of a group in registers.  A node
 * is materialized into a buffer only when it is a graph output or when
 * recomputing it inside a broadcasting consumer would cost more than storing
 * it (a temporary).  Outputs get eager's layout (graph.h node layouts).
 */
#ifndef TCJIT_SCHEDULE_H
#define TCJIT_SCHEDULE_H

#include "graph.h"
#include "kir.h"

typedef enum {
    TC_BUF_INPUT,   /* graph input #index (a tensor passed in) */
    TC_BUF_OUTPUT,  /* a torch tensor allocated per call with the node's
                       layout: a graph output, or an operand of an extern
                       op (which needs a tensor) */
    TC_BUF_TEMP,    /* allocated per call, freed after the kernels ran */
    TC_BUF_EXTERN   /* the tensor an extern call returns (node #index) */
} tc_buf_kind;

typedef struct {
    tc_buf_kind kind;
    int index;      /* INPUT: graph input index; else the node id */
    tc_dtype dtype;
    tc_layout layout;
} tc_buffer;

/* Addition: how graph output j is returned.  is_view == 0: the buffer
 * itself (as before).  is_view == 1: eager returns an alias, so the runtime
 * returns torch.as_strided(B, layout.sizes, layout.strides,
 * B.storage_offset() + offset) where B is the buffer's tensor: the graph
 * input for TC_BUF_INPUT (so the result aliases the user's tensor), or the
 * freshly allocated TC_BUF_OUTPUT buffer (allocated with the buffer's own
 * layout, which the view's strides and offset index into). */
typedef struct {
    int buffer;
    int is_view;
    tc_layout layout;
    int64_t offset;   /* elements */
    /* a view made through detach() (TC_GRAD_STOP on its chain): the
     * runtime views B.detach(), so the alias shares storage with B but
     * does not require grad, as eager's x.detach() */
    int detached;
} tc_output_desc;

/* One call of an extern op (extern.h): operand k is buffer in[k].buffer,
 * or the view of it in[k] describes (as for a view output above). */
typedef struct {
    int node;
    int op;                        /* registry index */
    int nin;
    tc_output_desc in[TC_MAX_OP_INPUTS];
    int out_buffer;                /* its TC_BUF_EXTERN buffer */
    int64_t xattr[TC_MAX_XATTR];
    double xfattr;
} tc_extern_call;

typedef struct {
    int nbuffers;
    tc_buffer *buffers;
    int nkernels;
    tc_kernel *kernels;   /* in execution order */
    int noutputs;
    int *output_buffer;   /* graph output j -> buffer index (INPUT or OUTPUT);
                             for a view output: its base buffer */
    tc_output_desc *outputs; /* addition: per graph output, see above */
    int nexterns;
    tc_extern_call *externs;
    int nsteps;           /* execution order: steps[i] >= 0 runs kernel
                             steps[i], < 0 extern call -1 - steps[i] */
    int *steps;
    int dynamic;          /* addition (dynamic shapes): compile its kernels
                             size-generic where the target can (sizes,
                             strides and offsets read at run time), so
                             plans of other sizes reuse them; set by the
                             caller after tc_schedule */
    int autotune;         /* max-autotune (docs/autotune.md): the backend
                             times candidate configurations at compile
                             time; set by the caller */
} tc_plan;

/* Reductions: a reduction is computed inside the kernel of its consumer
 * (loads of its pointwise producers inlined into the reduction loop, its
 * pointwise consumers as epilogue); row-wise chains such as softmax
 * (amax -> sub/exp -> sum -> div) or layer_norm become one kernel with one
 * phase per pass over the row (kir.h).  A reduction whose consumers cannot
 * share its iteration domain is materialized into a temporary.  A full
 * reduction (all dims) is one kernel with ndim == 0 and a single row; the
 * emitter may split that row across threads and combine the partial
 * accumulators (kir.h gives the combine rule of each kind).
 *
 * Views: a view of a graph input (or of a materialized buffer) is read in
 * place through its strides and storage offset (tc_karg.offset); a view of
 * a computed node recomputes the producer under the view's indexing when
 * the view is affine, else the producer is materialized with its eager
 * layout.  A graph output that is a view is reported in plan->outputs.
 *
 * Extern ops: each is a step of its own between kernels.  Its operands are
 * stored as tensors first (or passed as views of stored tensors), and a
 * kernel never fuses work from both sides of an extern it depends on: nodes
 * are grouped only with nodes behind the same number of externs.
 *
 * Returns NULL with a message in err on failure. */
tc_plan *tc_schedule(const tc_graph *g, char *err, size_t errlen);
void tc_plan_free(tc_plan *p);

/* The first kernel of plan with kernel i's code (tc_kernel_same_code):
 * j < i, or i itself.  Emitters compile that one and share it. */
int tc_plan_first_same_kernel(const tc_plan *plan, int i);

#endif
