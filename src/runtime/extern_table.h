/* extern_table.h - the torch calls of generic extern nodes ("any other
 * torch op", ../graph/extern.h tc_graph_extern_generic).
 *
 * The graph stage has no Python, so a generic extern node names its call
 * by an index into this table: the torch callable and its arguments, the
 * tensor operands left as placeholders (tc_xtable_operand(k) marks operand
 * k, at the top level or inside one tuple/list argument).  Entries are
 * interned by (callable, arguments with their types): the same call in
 * another trace, or traced again after a recompile, gets the same index,
 * so the table grows with the program's distinct call sites, not with
 * compilations.  Entries live until the process ends.
 *
 * tc_xtable_meta gives the result's metadata by running the call once on
 * meta tensors (torch.empty_strided(..., device="meta") per operand),
 * never on data; an op without a meta kernel runs on fake tensors instead
 * (torch's FakeTensorMode: its kernel on zeros of the operands' sizes,
 * unless torch tags its output shape data-dependent).  The strides of a
 * new result's size-1 dims, where torch's meta functions and kernels
 * disagree, come from one more run for real on zeros on the CPU (small
 * operands only; the random state kept).  Convolutions (torch.conv*d,
 * conv_transpose*d, convolution) run on fake tensors in place of the meta
 * run: their result's memory format is the one of the backend torch picks
 * (channels last from the input or the weight), which FakeTensorMode
 * asks torch for and the meta functions do not.  Results are cached
 * per (entry, device, operand dtypes, sizes, strides), since a meta run
 * goes through torch's Python meta functions (median 0.15 ms over OpInfo)
 * and a cached answer is a dict lookup.
 */
#ifndef TCJIT_EXTERN_TABLE_H
#define TCJIT_EXTERN_TABLE_H

#include <Python.h>
#include "../graph/graph.h"

#define TC_XMAX_OUTPUTS 8

/* The placeholder of operand k (borrowed; k < TC_MAX_OP_INPUTS), or NULL
 * with an exception. */
PyObject *tc_xtable_operand(int k);

/* 1 if v is a device argument: a torch.device, or a string naming one
 * ("cpu", "cuda:0").  The meta run passes "meta" in its place (and makes
 * "meta" the default device, for factories without device=). */
int tc_xtable_is_device(PyObject *v);

/* Interns the call fn(*argv[:nargv - nkw], **dict(zip(kwnames,
 * argv[nargv - nkw:]))) whose argv holds the placeholders of operands
 * 0..nin-1.  Returns the entry's index, -1 with an exception, or -2 with
 * a reason in err for arguments the table cannot replay (operands nested
 * deeper than one tuple/list, or in two of them). */
int tc_xtable_intern(PyObject *fn, int nargv, PyObject *const *argv,
                     PyObject *kwnames, int nin, char *err, size_t errlen);

/* Calls entry id with operands ops[0..nin-1].  New reference, or NULL with
 * torch's exception. */
PyObject *tc_xtable_invoke(int id, PyObject *const *ops);

/* Entry id as data, for compile-time passes that recognize a call
 * (freezing folds torch.batch_norm into a convolution):
 * (fn, args, operands, kwnames): args the positional-then-keyword values
 * with None where an operand goes, operands the operand index per slot
 * (-1: a value), kwnames the names of the last len(kwnames) args.  New
 * reference, or NULL with an exception. */
PyObject *tc_xtable_args(int id);

/* The callable's name for graph printing and reasons ("torch.sort",
 * "Tensor.cumsum"); borrowed, valid while the process lives. */
const char *tc_xtable_name(int id);

/* One result tensor of a meta run. */
typedef struct {
    tc_dtype dtype;
    tc_layout layout;
    int alias;        /* -1: a new tensor; k: a view of operand k (or k
                         itself), at storage offset `offset` from it */
    int is_self;      /* alias: operand k itself (eager returns self) */
    int64_t offset;   /* elements */
} tc_xout;

typedef struct {
    int tuple;        /* 0: one tensor; 1: a tuple; 2: a list */
    PyObject *seqtype;/* tuple: its type (a torch.return_types structseq
                         or tuple); borrowed, types live forever */
    int nout;
    tc_xout out[TC_XMAX_OUTPUTS];
} tc_xresult;

/* Metadata of entry id's result for operands of dtypes dts and layouts ls
 * on device `device` (-1 the CPU, N cuda:N): 0; 1 with a reason in err
 * when the call
 * cannot be a graph node (meta raised, data-dependent output shape, an
 * input mutated, a non-tensor result, a dtype tcjit has no type for); -1
 * with an exception. */
int tc_xtable_meta(int id, int nin, const tc_dtype *dts,
                   const tc_layout *const *ls, int device, tc_xresult *res,
                   char *err, size_t errlen);

/* Trace-time cost counters (tcjit.counters()): meta runs and cache hits,
 * and the seconds spent in meta runs. */
void tc_xtable_stats(long *runs, long *hits, double *seconds);

#endif
