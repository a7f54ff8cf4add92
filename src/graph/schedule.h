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
    TC_BUF_OUTPUT,  /* allocated per call, returned to the user */
    TC_BUF_TEMP     /* allocated per call, freed after the kernels ran */
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
} tc_output_desc;

typedef struct {
    int nbuffers;
    tc_buffer *buffers;
    int nkernels;
    tc_kernel *kernels;   /* in execution order */
    int noutputs;
    int *output_buffer;   /* graph output j -> buffer index (INPUT or OUTPUT);
                             for a view output: its base buffer */
    tc_output_desc *outputs; /* addition: per graph output, see above */
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
 * Returns NULL with a message in err on failure. */
tc_plan *tc_schedule(const tc_graph *g, char *err, size_t errlen);
void tc_plan_free(tc_plan *p);

#endif
