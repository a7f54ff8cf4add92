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

typedef struct {
    int nbuffers;
    tc_buffer *buffers;
    int nkernels;
    tc_kernel *kernels;   /* in execution order */
    int noutputs;
    int *output_buffer;   /* graph output j -> buffer index (INPUT or OUTPUT) */
} tc_plan;

/* Returns NULL with a message in err on failure. */
tc_plan *tc_schedule(const tc_graph *g, char *err, size_t errlen);
void tc_plan_free(tc_plan *p);

#endif
