/* tracer_internal.h - what the files of the tracer share (private).
 *
 * The tracer is one symbolic interpreter split by job: tracer.c has the
 * stack, loads and stores, control flow, exits and the opcode dispatch;
 * the other files hold the opcode families it dispatches to.  Only what
 * more than one file uses is declared here; the rest stays static.
 */
#ifndef TCJIT_TRACER_INTERNAL_H
#define TCJIT_TRACER_INTERNAL_H

#include "tracer.h"

#include <limits.h>

#include "bindings.h"
#include "vars.h"

#define OK 0
#define ERROR (-1)
#define UNSUPPORTED (-2)
#define DONE 1  /* the segment ended (return or exit) */
#define NOT_HANDLED 2  /* a special case does not apply: go on as usual */
#define RAISED 3       /* the traced program raised sh->raised, which a
                          try block of an inlined frame handles */

/* Room on the symbolic stack beyond co_stacksize: calls rewritten by the
 * tracer (CALL_FUNCTION_EX, functools.partial) push their arguments. */
#define STACK_SLACK 40

/* Most items of a list, tuple or chain the tracer models item by item
 * (an optimizer's parameter list: GPT-2's has 148 tensors). */
#define TC_MAX_ITEMS 1024

/* Most arguments of one call the tracer handles. */
#define TC_MAX_CALL_ARGS 32

/* What an inlined callee's tracer shares with its caller's. */
typedef struct {
    tc_var_arena arena;
    int *inputs;              /* graph input i -> guard source id */
    int ninputs, inputs_cap;
    int touched_tensor;       /* a tensor was read from the frame */
    int force_eager;          /* correctness needs the whole frame eager */
    unsigned char *grad;      /* by graph node: requires grad (inputs that
                                 do, and what grad mode computed from them) */
    int grad_cap;
    int grad_synced;          /* nodes whose grad flag is computed */
    unsigned char *ngw;       /* by graph node (grad_cap of them): a value
                                 written under no_grad into a tensor that
                                 requires grad, or a view of one
                                 (mutation.c) */
    int ngw_read;             /* an op under grad mode read such a value:
                                 eager's gradient flows through it to the
                                 tensor's history, the graph's would not
                                 (tc_writebacks.ngw_read) */
    void *root;               /* the frame's tracer (TC_VAR_CELL values) */
    int ntracers;             /* inlined calls traced so far (serials) */
    struct tc_undo *undo;     /* objects.c: states of objects before an
                                 inlined call changed them */
    int nundo, undo_cap;
    struct tc_effect *fx;     /* objects.c: attributes set on objects read
                                 from the frame, made at the exit */
    int nfx, fx_cap;
    struct tc_mut_state *mut; /* in-place writes so far (mutation.c) */
    int set_grad;             /* 1 + the mode the last traced call of
                                 torch.set_grad_enabled(mode) set, or 0
                                 (none, or it set the entry's mode) */
    int entry_grad;           /* the grad mode the segment starts in */
    PyObject *raised;         /* RAISED: the exception instance (owned) */
    int catching;             /* a builtin that catches (hasattr) is
                                 tracing a call: a raise is RAISED */
} trace_shared;

typedef struct {
    tc_iframe *frame;
    PyCodeObject *co;
    const tc_codeunit *code;  /* deoptimized code units */
    int ncode;
    PyObject *code_bytes;     /* owns code */
    PyObject *closure;        /* borrowed: func.__closure__ or NULL */
    int nlocals;              /* co_nlocalsplus */
    tc_var **locals;          /* NULL = not read yet */
    tc_var **stack;
    int sp, stack_cap;
    PyObject *kwnames;        /* pending KW_NAMES (borrowed from co_consts) */
    PyObject *global_vars;    /* {name: index into arena} */
    PyObject *globals;        /* borrowed: the globals LOAD_GLOBAL reads */
    PyObject *builtins;       /* borrowed */
    int globals_source;       /* -1: the frame's globals (G['x']); else the
                                 source of the inlined function whose
                                 __globals__ they are */
    PyFunctionObject *fn;     /* borrowed: the inlined function, if any */
    int fn_source;            /* its source (closure cells), or -1 */
    tc_var **frame_cells;     /* an inlined closure the frame made: the
                                 TC_VAR_CELLs of its free variables */
    trace_shared *sh;
    tc_trace *out;
    int pc;                   /* current instruction */
    int grad_mode;
    int start_pc;
    int depth;                /* inlined calls between here and the frame */
    int serial;               /* 0: the frame's; an inlined call's own
                                 number (the dicts it may mutate) */
    tc_var *inline_result;    /* an inlined callee's return value */
    char *written;            /* locals stored to by this segment */
    tc_var **saved_stack;     /* the stack before the current instruction */
    int *outs, nouts;         /* graph outputs the exit templates use */
    tc_var **memo;            /* containers given a memo slot, by slot */
    int nmemo, memo_cap;
    tc_var *yielded;          /* a generator expression run to its end:
                                 the tuple of what it yielded so far */
    void *parent;             /* the tracer of the caller (inlined calls) */
} tracer;

/* tracer.c: errors, stack, values wrapped, graph nodes, run */

int tc_tr_unsupported(tracer *T, const char *fmt, ...);
int tc_tr_unsupported_from_exception(tracer *T, const char *what);
/* The traced program raises exc (a new reference, consumed; NULL: ERROR)
 * at T's instruction, as Python would on these values (a KeyError of a
 * dict whose keys are guarded): RAISED when a try block of an inlined
 * frame on the way up may handle it, else UNSUPPORTED naming it. */
int tc_tr_raise(tracer *T, PyObject *exc);
/* What the call traced from `rc` (OK, its value pushed) says about the
 * attribute a getattr() asked: 1 found (popped), 0 an AttributeError
 * raised, else rc (a RAISED that is no AttributeError raised again). */
int tc_tr_caught_attribute_error(tracer *T, int rc);
int tc_tr_push(tracer *T, tc_var *v);
tc_var *tc_tr_pop(tracer *T);
tc_var *tc_tr_peek(tracer *T, int n);
int tc_tr_is_python_scalar(PyObject *v);
tc_var *tc_tr_wrap_value(tracer *T, PyObject *value, int source, int *rc);
tc_var *tc_tr_attr_var(tracer *T, int owner_source, PyObject *name,
                       PyObject *value, int *rc);
int tc_tr_push_loaded_attr(tracer *T, tc_var *v, int method);
int tc_tr_push_attr(tracer *T, int owner_source, PyObject *name,
                    PyObject *value, int method, const char *what);
int tc_tr_reify(tracer *T, tc_var *v);
int tc_tr_reify_all(tracer *T, tc_var **vs, int n);
tc_var *tc_tr_const_var(tracer *T, PyObject *value);
int tc_tr_operand_node(tracer *T, tc_var *v, int *rc);
int tc_tr_emit_op(tracer *T, const char *op, int n, tc_var **args,
                  tc_dtype attr);
const tc_node *tc_tr_tensor_node(tracer *T, tc_var *v);
int tc_tr_run(tracer *T);
int tc_tr_output_index(tracer *T, int node);
void tc_tr_fini(tracer *T);

/* torchcalls.c: torch functions and Tensor methods */

PyObject *tc_tr_size_object(const tc_layout *l);
int tc_tr_push_node(tracer *T, int node, const char *what, const char *err);
int tc_tr_is_none(tc_var *v);
int tc_tr_push_extern(tracer *T, const char *op, int n, const int *in,
                      const int64_t *xattr, double xfattr);
tc_var *tc_tr_structseq_items(tc_var *v);
int tc_tr_identity_equal(tracer *T, tc_var *a, tc_var *b);
/* externcall.c: the layout torch gives the result of the call
 * torch.<name>(*argv) (tc_xtable_operand(k) placeholders for the nodes
 * in[k]), from extern_table's run of it (a fake run for convolutions):
 * 0 with *out; 1 when that run cannot tell (the builder's layout
 * stays); -1 with an exception. */
int tc_tr_extern_layout(tracer *T, const char *name, int nargv,
                        PyObject *const *argv, int nin, const int *in,
                        tc_layout *out);
int tc_tr_call_binding(tracer *T, const tc_binding *b, tc_var **args,
                       int nargs, PyObject *kwnames);

/* inline.c: inlined Python functions, nn.Module */

/* Marks the nodes made since the last instruction as requiring grad or
 * not, by the grad mode now (tc_tr_run does it after every
 * instruction). */
int tc_tr_sync_grad(tracer *T);
/* Does tensor var v require grad (as of the last instruction's sync)? */
int tc_tr_requires_grad(const tracer *T, const tc_var *v);
int tc_tr_node_requires_grad(const tracer *T, int node);
/* Room for n nodes in the grad and ngw flags.  OK, or ERROR. */
int tc_tr_grow_grad(trace_shared *sh, int n);
int tc_tr_inline_call(tracer *T, tc_var *callable, tc_var **args, int nargs,
                      PyObject *kwnames);
int tc_tr_nn_module_attr(tracer *T, tc_var *mod, PyObject *name, int method);
int tc_tr_call_nn_module(tracer *T, tc_var *mod, tc_var **args, int nargs,
                         PyObject *kwnames);
tc_var *tc_tr_nn_container_items(tracer *T, tc_var *mod, int *rc);
int tc_tr_index_nn_module(tracer *T, tc_var *mod, tc_var *idx);
int tc_tr_is_module_slice(const tc_var *v);
int tc_tr_op_generator(tracer *T, int opcode);
/* Whether v is or holds a closure over a variable of an inlined call
 * (such a closure lives only as long as that call is traced). */
int tc_tr_holds_inlined_cell(const tc_var *v, int depth);
int tc_tr_is_closure(const tc_var *v);
/* A closure over the cells (a tuple var of TC_VAR_CELLs of this inlined
 * call) with code and MAKE_FUNCTION's other parts (constants or NULL). */
tc_var *tc_tr_make_closure(tracer *T, PyObject *code, PyObject *const *parts,
                           tc_var *cells);
/* The code object of a closure var (borrowed). */
PyObject *tc_tr_closure_code(const tc_var *v);

/* classdef.c: class statements (LOAD_BUILD_CLASS) */

int tc_tr_op_load_build_class(tracer *T);
int tc_tr_is_build_class(tracer *T, PyObject *fn);
int tc_tr_build_class(tracer *T, tc_var **args, int nargs, PyObject *kwnames);

/* pysem.c: Python semantics, CALL */

int tc_tr_op_get_iter(tracer *T);
/* iter(seq) of a sequence known item by item, unrolled by FOR_ITER. */
tc_var *tc_tr_iter_of(tracer *T, tc_var *seq);
int tc_tr_op_for_iter(tracer *T, int oparg, int *next);
int tc_tr_op_before_with(tracer *T);
int tc_tr_op_build_map(tracer *T, int n, int const_keys);
int tc_tr_op_build_set(tracer *T, int n);
int tc_tr_is_set_var(const tc_var *v);
PyObject *tc_tr_set_value(tracer *T, tc_var *s);
int tc_tr_set_binary(tracer *T, int nb, tc_var *a, tc_var *b);
int tc_tr_op_set_add(tracer *T, int oparg, int update);
int tc_tr_op_dict_merge(tracer *T, int oparg, int merge);
int tc_tr_dict_lookup(tracer *T, tc_var *d, tc_var *key, tc_var *dflt);
/* d[t] of a frame dict keyed by a frame tensor (self.state[p]);
 * NOT_HANDLED for other lookups. */
int tc_tr_tensor_key_lookup(tracer *T, tc_var *d, tc_var *key);
int tc_tr_as_dict(tracer *T, tc_var *v);
/* d[key] / d.get(key, dflt) (dflt non-NULL) of an exact dict read from the
 * frame that tc_tr_as_dict does not model whole (over 64 items, keys of
 * other types: os.environ's bytes): that one key, guarded by `key in d`
 * (a TC_SRC_CALL of dict.__contains__(d, key)) and,
 * found, its value a source of its own; missing, a KeyError raised.
 * NOT_HANDLED for other dicts and keys. */
int tc_tr_frame_dict_item(tracer *T, tc_var *d, tc_var *key, tc_var *dflt);
int tc_tr_op_store_subscr(tracer *T);
int tc_tr_op_is(tracer *T, int invert);
int tc_tr_op_import_name(tracer *T, int oparg);
int tc_tr_op_import_from(tracer *T, int oparg);
int tc_tr_op_contains(tracer *T, int invert);
int tc_tr_op_call_ex(tracer *T, int oparg);
int tc_tr_op_raise(tracer *T, int oparg);
int tc_tr_op_list_to_tuple(tracer *T);
int tc_tr_all_const(tc_var **args, int n);
int tc_tr_object_attr(tracer *T, tc_var *owner, PyObject *name, int method);
/* bool(v) of a dict read from the frame or an object without __bool__ /
 * __len__: 1/0, or -2 if not known at trace time. */
int tc_tr_object_truth(tracer *T, tc_var *v);
int tc_tr_op_call(tracer *T, int argc);
/* callable(*args) (keywords kwnames, a tuple some arena var owns)
 * through the ordinary CALL path: the result pushed. */
int tc_tr_call_with_args(tracer *T, tc_var *callable, tc_var **args, int n,
                         PyObject *kwnames);
/* torchcalls.c: a device= argument (None: dflt; "cpu", "cuda:N", a
 * torch.device constant) as -1 for the CPU or the CUDA index, -2 when not
 * understood.  tc_tr_join_device: a tensor on dev joins the graph (CPU ones
 * join any graph; a second CUDA device is a graph break naming `what`);
 * tc_tr_place_since marks the nodes made since `first` as on dev (leaves:
 * inputs, creation ops, copies); tc_tr_node_device: where a node's value
 * is (-1 the CPU). */
int tc_tr_device_param(tc_var *v, int dflt);
int tc_tr_join_device(tracer *T, const char *what, int dev);
void tc_tr_place_since(tracer *T, int first, int dev);
int tc_tr_node_device(tracer *T, int id);
/* externcall.c: any other torch op as a generic extern node; NOT_HANDLED
 * when fn is not a torch op, or no argument is a tensor and fn is no
 * tensor factory.  python_ok: fn may also be a Python function of torch's
 * functional modules (one the tracer could not inline, or whose registry
 * entry refused the arguments). */
int tc_tr_call_generic(tracer *T, PyObject *fn, tc_var **args, int nargs,
                       PyObject *kwnames, int python_ok);

/* tracer.c: module.name (name may be dotted), imported once into *slot
 * and kept for the process (borrowed); NULL, exception cleared, if it
 * cannot be. */
PyObject *tc_tr_lazy_attr(PyObject **slot, const char *module,
                          const char *name);

/* pysem.c: fn(*args) through the ordinary CALL path (fn borrowed). */
int tc_tr_call_object(tracer *T, PyObject *fn, tc_var **args, int n);

/* deepcopy.c: copy.deepcopy(x) of atoms, lists, dicts and objects of
 * plain classes, read from the frame or made by the trace; NOT_HANDLED
 * when fn is not copy.deepcopy. */
int tc_tr_call_deepcopy(tracer *T, PyObject *fn, tc_var **args, int nargs,
                        PyObject *kwnames);

/* autofn.c: cls.apply(...) of a torch.autograd.Function subclass:
 * its forward inlined where no autograd graph is recorded, else a graph
 * break.  NOT_HANDLED for other callables. */
int tc_tr_call_autograd_function(tracer *T, tc_var *callable, tc_var **args,
                                 int nargs, PyObject *kwnames);

/* objects.c: objects the traced code makes, super() */

int tc_tr_is_new_object(const tc_var *v);
/* A new object of cls (made by cls.__new__ at the exit if it escapes)
 * with attributes names (a tuple of str) = values[i]. */
tc_var *tc_tr_new_object_of(tracer *T, PyTypeObject *cls, PyObject *names,
                            tc_var **values);
/* del o.name of a new object o (object.__delattr__): OK, RAISED (an
 * AttributeError), UNSUPPORTED or ERROR. */
int tc_tr_new_object_del_attr(tracer *T, tc_var *o, PyObject *name);
/* The class of a new object (type(o), o.__class__): a source of its own,
 * its attributes read as a frame class's are (guarded). */
tc_var *tc_tr_class_var(tracer *T, PyTypeObject *tp);
/* o.__dict__ of a new object o: a read-only DICT var of its attributes. */
tc_var *tc_tr_new_object_state_dict(tracer *T, const tc_var *o);
PyTypeObject *tc_tr_new_object_class(const tc_var *v);
void tc_tr_adopt_object(tc_var *v, int from, int to);
/* Undo what inlined calls did to objects since the log had `mark`
 * records (a call that failed: its caller runs it in Python instead);
 * tc_tr_undo_to(sh, 0) after a trace also frees the log. */
void tc_tr_undo_to(trace_shared *sh, int mark);
/* Log the state of o (an object, list or dict a caller made) before an
 * inlined call changes it, for tc_tr_undo_to. */
int tc_tr_log_state(tracer *T, tc_var *o);
#define TC_UNDO_FINI INT_MIN
/* The attribute writes the exit makes (objects.c): attached to the value
 * *ret returns (ret non-NULL), else to a value the exit writes back into
 * the frame.  OK, or ERROR / UNSUPPORTED. */
int tc_tr_attach_effects(tracer *T, tc_var **ret);
/* The value the segment last set owner.name to, or NULL. */
tc_var *tc_tr_pending_attr(tracer *T, const tc_var *owner, PyObject *name);
int tc_tr_call_class(tracer *T, tc_var *callable, tc_var **args, int nargs,
                     PyObject *kwnames);
int tc_tr_new_object_attr(tracer *T, tc_var *o, PyObject *name, int method);
int tc_tr_op_store_attr(tracer *T, PyObject *name);
int tc_tr_op_delete_attr(tracer *T, tc_var *o, PyObject *name);
int tc_tr_call_super(tracer *T, tc_var **args, int nargs);
int tc_tr_is_super(const tc_var *v);
int tc_tr_call_slot(tracer *T, PyObject *descr, tc_var **args, int nargs,
                    PyObject *kwnames);
tc_var *tc_tr_new_object_items(tracer *T, tc_var *o);
int tc_tr_new_object_has_attr(const tc_var *o, PyObject *name);
/* The value of o.name a new object o holds (borrowed), or NULL. */
tc_var *tc_tr_new_object_state(const tc_var *o, PyObject *name);
/* The attribute names of new object o (a borrowed tuple: attribute i's
 * value is o->items[i]), or NULL if o is no new object. */
PyObject *tc_tr_new_object_attr_names(const tc_var *o);
int tc_tr_is_enum_member(PyObject *value);
int tc_tr_call_new_object_method(tracer *T, tc_var *self, PyObject *name,
                                 tc_var **args, int nargs,
                                 PyObject *kwnames);
int tc_tr_push_method_var(tracer *T, tc_var *owner, PyObject *name);
int tc_tr_call_python_dunder(tracer *T, tc_var *self, const char *name,
                             tc_var **args, int nargs);
int tc_tr_new_object_store_item(tracer *T, tc_var *o, tc_var *key,
                                tc_var *value);

/* valueops.c: attributes, operators, sequences, subscripts, f-strings */

int tc_tr_op_load_attr(tracer *T, PyObject *name, int method);
int tc_tr_push_folded(tracer *T, PyObject *r, const char *what);
/* The Python value of a constant, or of a tuple or list of them: a new
 * reference, or NULL (an exception only on error). */
PyObject *tc_tr_const_value(tracer *T, tc_var *v);
int tc_tr_op_binary(tracer *T, int nb);
int tc_tr_op_compare(tracer *T, int cmp);
int tc_tr_op_unary(tracer *T, int opcode);
int tc_tr_op_build(tracer *T, tc_var_kind kind, int n);
int tc_tr_op_unpack(tracer *T, int n);
int tc_tr_op_unpack_ex(tracer *T, int oparg);
int tc_tr_op_list_extend(tracer *T, int oparg);
int tc_tr_op_list_append(tracer *T, int oparg);
int tc_tr_op_map_add(tracer *T, int oparg);
int tc_tr_local_value(tracer *T, int i, tc_var **out);
int tc_tr_op_subscr(tracer *T);
int tc_tr_op_build_slice(tracer *T, int n);
int tc_tr_op_binary_slice(tracer *T);
int tc_tr_op_store_slice(tracer *T);
int tc_tr_op_make_function(tracer *T, int oparg);
int tc_tr_op_format_value(tracer *T, int oparg);
int tc_tr_op_build_string(tracer *T, int n);

/* mutation.c: in-place ops as data flow.  Each returns OK (the result
 * pushed: the mutated tensor itself for methods and operators, nothing for
 * item assignment), UNSUPPORTED with a reason, or NOT_HANDLED (call: not an
 * in-place method the registry defines). */

int tc_tr_call_inplace(tracer *T, PyObject *name, tc_var **args, int nargs,
                       PyObject *kwnames);
int tc_tr_inplace_binary(tracer *T, int nb, tc_var *a, tc_var *b);
/* torch.foo_(x, ...) (as x.foo_(...)) and torch._foreach_foo_(xs, ...)
 * (xs[k].foo_(...) for every k; xs itself pushed, as eager returns it). */
int tc_tr_call_torch_inplace(tracer *T, PyObject *fn, tc_var **args,
                             int nargs, PyObject *kwnames);
int tc_tr_setitem(tracer *T, tc_var *container, tc_var *key, tc_var *value);
/* A torch function called with out=tensor: the call without it, its
 * result written into the tensor, which it returns; NOT_HANDLED for other
 * calls. */
int tc_tr_call_out(tracer *T, tc_var *callable, tc_var **args, int nargs,
                   PyObject *kwnames);
/* The value an op just pushed (its nodes made from `first` on), written
 * into target as an in-place op writes it (F.relu(x, inplace=True));
 * pushes target.  ops: the op's other operands. */
int tc_tr_inplace_result(tracer *T, tc_var *target, tc_var **ops, int nops,
                         int first, const char *what);
/* The node an exit returns for node: a graph input's current value (or a
 * view of it) is the input itself (or that view of the input). */
int tc_tr_mut_identity(tracer *T, int node);
/* One more version-counter move of v's storage, without a write. */
int tc_tr_mut_bump(tracer *T, tc_var *v);
/* At a finished segment: the write-backs into T->out->wb (adds outputs);
 * once the graph's outputs are set, which output goes into which input
 * (tc_graph_set_output_write).  OK / 0, or ERROR / -1. */
int tc_tr_mut_finish(tracer *T);
int tc_tr_mut_mark_outputs(tc_trace *t);
/* An inlined call that fails undoes its writes (mark[2] is opaque). */
void tc_tr_mut_mark(tracer *T, int mark[2]);
void tc_tr_mut_rollback(tracer *T, const int mark[2]);
void tc_tr_mut_free(struct tc_mut_state *m);

#endif
