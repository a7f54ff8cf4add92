/* tracer.c - the symbolic bytecode interpreter.
 *
 * One function per opcode family, dispatched from trace_instruction().  Each
 * returns OK, or UNSUPPORTED after recording a reason a user can act on
 * (what, and the line it happened on), or ERROR with a Python exception set
 * for internal failures.  Nothing here executes tensor code: tensor values
 * are graph nodes whose metadata the op registry computes.
 */
#include "tracer.h"

#include <math.h>

#include "bindings.h"
#include "../graph/extern.h"
#include "../guards/nn_module.h"
#include "vars.h"

#define OK 0
#define ERROR (-1)
#define UNSUPPORTED (-2)
#define DONE 1  /* the segment ended (return or exit) */
#define NOT_HANDLED 2  /* a special case does not apply: go on as usual */

/* Straight-line code only: a budget keeps a constant-condition loop from
 * unrolling forever. */
#define INSTRUCTION_BUDGET 20000

/* Room on the symbolic stack beyond co_stacksize: calls rewritten by the
 * tracer (CALL_FUNCTION_EX, functools.partial) push their arguments. */
#define STACK_SLACK 40

/* Most arguments of one call the tracer handles. */
#define TC_MAX_CALL_ARGS 32

/* What an inlined callee's tracer shares with its caller's. */
typedef struct {
    tc_var_arena arena;
    int *inputs;              /* graph input i -> guard source id */
    int ninputs, inputs_cap;
    int touched_tensor;       /* a tensor was read from the frame */
    int device_fixed;         /* a creation op chose out->device */
    int force_eager;          /* correctness needs the whole frame eager */
    unsigned char *grad;      /* by graph node: requires grad (inputs that
                                 do, and what grad mode computed from them) */
    int grad_cap;
    int grad_synced;          /* nodes whose grad flag is computed */
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
    trace_shared *sh;
    tc_trace *out;
    int pc;                   /* current instruction */
    int grad_mode;
    int start_pc;
    int depth;                /* inlined calls between here and the frame */
    tc_var *inline_result;    /* an inlined callee's return value */
    char *written;            /* locals stored to by this segment */
    tc_var **saved_stack;     /* the stack before the current instruction */
    int *outs, nouts;         /* graph outputs the exit templates use */
    tc_var **memo;            /* containers given a memo slot, by slot */
    int nmemo, memo_cap;
} tracer;

/* ---- errors --------------------------------------------------------------- */

static int
unsupported(tracer *T, const char *fmt, ...)
{
    va_list va;
    va_start(va, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, va);
    va_end(va);
    if (msg == NULL) {
        return ERROR;
    }
    Py_XSETREF(T->out->reason, msg);
    T->out->reason_line = PyCode_Addr2Line(T->co, T->pc * 2);
    return UNSUPPORTED;
}

/* A Python exception raised by something the user's code does (a failing
 * constant fold, an op the registry rejects): leave it for eager to raise. */
static int
unsupported_from_exception(tracer *T, const char *what)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    int rc = unsupported(T, "%s raised %s: %S", what,
                         ((PyTypeObject *)type)->tp_name,
                         value ? value : Py_None);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return rc;
}

/* ---- stack ---------------------------------------------------------------- */

static int
push(tracer *T, tc_var *v)
{
    if (v == NULL) {
        return ERROR;
    }
    if (T->sp == T->stack_cap) {
        return unsupported(T, "value stack overflow");
    }
    T->stack[T->sp++] = v;
    return OK;
}

static tc_var *
pop(tracer *T)
{
    return T->sp > 0 ? T->stack[--T->sp] : NULL;
}

static tc_var *
peek(tracer *T, int n)
{
    return T->sp >= n ? T->stack[T->sp - n] : NULL;
}

/* ---- wrapping real values ---------------------------------------------- */

static int
add_input(tracer *T, int source)
{
    if (T->sh->ninputs == T->sh->inputs_cap) {
        int cap = T->sh->inputs_cap ? 2 * T->sh->inputs_cap : 8;
        int *n = PyMem_Realloc(T->sh->inputs, cap * sizeof(int));
        if (n == NULL) {
            PyErr_NoMemory();
            return ERROR;
        }
        T->sh->inputs = n;
        T->sh->inputs_cap = cap;
    }
    T->sh->inputs[T->sh->ninputs++] = source;
    return OK;
}

static tc_var *wrap_value(tracer *T, PyObject *value, int source, int *rc);

static int
grow_grad(trace_shared *sh, int n)
{
    if (n <= sh->grad_cap) {
        return OK;
    }
    int cap = sh->grad_cap ? 2 * sh->grad_cap : 64;
    cap = cap < n ? n : cap;
    unsigned char *g = PyMem_Realloc(sh->grad, cap);
    if (g == NULL) {
        PyErr_NoMemory();
        return ERROR;
    }
    memset(g + sh->grad_cap, 0, cap - sh->grad_cap);
    sh->grad = g;
    sh->grad_cap = cap;
    return OK;
}

/* Inputs that require grad may be read and computed with under no_grad
 * (the results do not require grad, as in eager).  After every traced
 * instruction, the nodes it created require grad if grad mode is on and
 * an input of theirs does: that needs autograd, which is not compiled,
 * so the frame runs eagerly.  Checking here, not in each op, covers
 * every way of making nodes. */
static int
sync_grad(tracer *T)
{
    trace_shared *sh = T->sh;
    const tc_graph *g = T->out->graph;
    if (grow_grad(sh, g->nnodes) != OK) {
        return ERROR;
    }
    for (; sh->grad_synced < g->nnodes; sh->grad_synced++) {
        const tc_node *n = &g->nodes[sh->grad_synced];
        int needs = 0;
        for (int i = 0; i < n->nin; i++) {
            needs |= sh->grad[n->in[i]];
        }
        if (needs && T->grad_mode) {
            sh->force_eager = 1;
            return unsupported(T, "an input requires grad while grad mode "
                               "is on (training is not compiled yet)");
        }
    }
    return OK;
}

static tc_var *
wrap_tensor(tracer *T, PyObject *value, int source, int *rc)
{
    tc_tensor_meta m;
    tc_dtype dt;
    T->sh->touched_tensor = 1;
    int r = tc_tensor_read_meta(value, &m, &dt);
    if (r != 0) {
        *rc = r < 0 ? ERROR : unsupported(T, "a tensor with unsupported "
                                          "dtype, device or rank > %d",
                                          TC_MAX_DIMS);
        return NULL;
    }
    if (tc_guard_tensor(T->out->guards, source, value) < 0) {
        *rc = ERROR;
        return NULL;
    }
    if ((T->sh->ninputs > 0 || T->sh->device_fixed)
        && m.device_index != T->out->device) {
        /* eager raises its own "Expected all tensors to be on the same
         * device" error, at the op that mixes them */
        *rc = unsupported(T, "tensors on different devices");
        return NULL;
    }
    T->out->device = m.device_index;
    tc_layout l;
    l.ndim = m.ndim;
    memcpy(l.sizes, m.sizes, sizeof(l.sizes));
    memcpy(l.strides, m.strides, sizeof(l.strides));
    tc_var *v = tc_var_new(&T->sh->arena, TC_VAR_TENSOR, source);
    if (v == NULL || add_input(T, source) < 0) {
        *rc = ERROR;
        return NULL;
    }
    v->node = tc_graph_input(T->out->graph, dt, &l);
    if (v->node < 0) {
        *rc = unsupported(T, "graph input");
        return NULL;
    }
    if (grow_grad(T->sh, v->node + 1) != OK) {
        *rc = ERROR;
        return NULL;
    }
    T->sh->grad[v->node] = (unsigned char)m.requires_grad;
    return v;
}

static tc_var *
wrap_sequence(tracer *T, PyObject *value, int source, int *rc)
{
    if (tc_guard_length(T->out->guards, source, value) < 0) {
        *rc = ERROR;
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(value);
    if (n > 64) {
        *rc = unsupported(T, "a sequence of %zd items", n);
        return NULL;
    }
    tc_var *items[64];
    for (Py_ssize_t i = 0; i < n; i++) {
        int src = tc_source_add(T->out->guards, TC_SRC_ITEM, source, i, NULL);
        if (src < 0) {
            *rc = ERROR;
            return NULL;
        }
        items[i] = wrap_value(T, PySequence_Fast_GET_ITEM(value, i), src, rc);
        if (items[i] == NULL) {
            return NULL;
        }
    }
    tc_var *v = tc_var_seq(&T->sh->arena, PyTuple_CheckExact(value)
                           ? TC_VAR_TUPLE : TC_VAR_LIST, (int)n, items);
    if (v == NULL) {
        *rc = ERROR;
        return NULL;
    }
    v->source = source;  /* the caller's own list: keep its identity */
    return v;
}

/* torch.Tensor and nn.Parameter only: other subclasses may override ops
 * (__torch_function__) and must keep their type, so they stay opaque and
 * every op on them runs eagerly. */
static int
is_plain_tensor(PyObject *v)
{
    static PyObject *parameter_type;
    if (parameter_type == NULL) {
        PyObject *nn = PyImport_ImportModule("torch.nn");
        parameter_type = nn ? PyObject_GetAttrString(nn, "Parameter") : NULL;
        Py_XDECREF(nn);
        if (parameter_type == NULL) {
            PyErr_Clear();
            parameter_type = tc_tensor_type;
        }
    }
    PyObject *t = (PyObject *)Py_TYPE(v);
    return t == tc_tensor_type || t == parameter_type;
}

static int
is_python_scalar(PyObject *v)
{
    return PyBool_Check(v) || PyLong_CheckExact(v) || PyFloat_CheckExact(v)
           || v == Py_None || PyUnicode_CheckExact(v);
}

static int
is_known_object(PyObject *v)
{
    /* Python functions are not inlined yet: the tracer never depends on
     * their identity, so they need no guard. */
    int plain_builtin = PyCFunction_Check(v)
        && (PyCFunction_GET_SELF(v) == NULL
            || PyModule_Check(PyCFunction_GET_SELF(v)));
    return PyModule_Check(v) || plain_builtin
           || tc_dtype_from_torch(v) >= 0 || tc_binding_find(v) != NULL;
}

/* Turn a real value read from `source` into a var, installing the guards
 * that make the specialization valid. */
static tc_var *
wrap_value(tracer *T, PyObject *value, int source, int *rc)
{
    tc_guard_set *gs = T->out->guards;
    tc_var *v;
    *rc = OK;
    if (is_plain_tensor(value)) {
        return wrap_tensor(T, value, source, rc);
    }
    if (is_python_scalar(value)) {
        v = tc_var_const(&T->sh->arena, value, source);
        if (v != NULL) {
            v->kind = TC_VAR_LAZY;
        }
    }
    else if (PyTuple_CheckExact(value) || PyList_CheckExact(value)) {
        /* guarded (length, items) only if the code looks inside it */
        v = tc_var_const(&T->sh->arena, value, source);
        if (v != NULL) {
            v->kind = TC_VAR_LAZY;
        }
    }
    else if (tc_is_nn_module(value)) {
        if (tc_guard_type(gs, source, value) < 0) {
            *rc = ERROR;
            return NULL;
        }
        v = tc_var_new(&T->sh->arena, TC_VAR_NN_MODULE, source);
        if (v) {
            v->obj = Py_NewRef(value);
        }
    }
    else if (is_known_object(value)) {
        if (tc_guard_id(gs, source, value) < 0) {
            *rc = ERROR;
            return NULL;
        }
        v = tc_var_new(&T->sh->arena, TC_VAR_OBJECT, source);
        if (v) {
            v->obj = Py_NewRef(value);
        }
    }
    else {
        v = tc_var_new(&T->sh->arena, TC_VAR_UNKNOWN, source);
        if (v) {
            v->obj = Py_NewRef(value);
        }
    }
    if (v == NULL) {
        *rc = ERROR;
    }
    return v;
}

/* The traced code depends on the value of v: specialize on it. */
static int
reify(tracer *T, tc_var *v)
{
    if (v == NULL || v->kind != TC_VAR_LAZY) {
        return OK;
    }
    if (PyTuple_CheckExact(v->obj) || PyList_CheckExact(v->obj)) {
        int rc = OK;
        tc_var *seq = wrap_sequence(T, v->obj, v->source, &rc);
        if (seq == NULL) {
            return rc;
        }
        PyObject *obj = v->obj;
        *v = *seq;  /* v becomes the sequence var; seq gives up its items
                       so the arena frees them once, through v */
        seq->items = NULL;
        seq->nitems = 0;
        Py_DECREF(obj);
        return OK;
    }
    if (tc_guard_equals(T->out->guards, v->source, v->obj) < 0) {
        return ERROR;
    }
    v->kind = TC_VAR_CONST;
    return OK;
}

static int
reify_all(tracer *T, tc_var **vs, int n)
{
    for (int i = 0; i < n; i++) {
        if (reify(T, vs[i]) != OK) {
            return ERROR;
        }
    }
    return OK;
}

/* ---- loads and stores ----------------------------------------------------- */

static PyObject *
local_name(tracer *T, int i)
{
    return PyTuple_GET_ITEM(T->co->co_localsplusnames, i);
}

static int
is_free_slot(tracer *T, int i)
{
    return i >= T->nlocals - T->co->co_nfreevars;
}

static int
is_cell_slot(tracer *T, int i)
{
    unsigned char kind = PyBytes_AS_STRING(T->co->co_localspluskinds)[i];
    return (kind & (TC_CO_FAST_CELL | TC_CO_FAST_FREE)) != 0;
}

/* A free variable of an inlined function: the contents of its closure
 * cell, read through the function's own source. */
static int
load_inlined_free(tracer *T, int i)
{
    if (!is_free_slot(T, i) || T->fn == NULL || T->fn_source < 0) {
        return unsupported(T, "read of unbound variable '%U'",
                           local_name(T, i));
    }
    int j = i - (T->nlocals - T->co->co_nfreevars), rc;
    PyObject *cells = T->fn->func_closure;
    PyObject *value = cells && j < PyTuple_GET_SIZE(cells)
                      ? PyCell_GET(PyTuple_GET_ITEM(cells, j)) : NULL;
    if (value == NULL) {
        return unsupported(T, "read of unbound variable '%U'",
                           local_name(T, i));
    }
    int src = tc_source_add(T->out->guards, TC_SRC_FUNC_CLOSURE,
                            T->fn_source, j, local_name(T, i));
    tc_var *v = src < 0 ? NULL : wrap_value(T, value, src, &rc);
    if (v == NULL) {
        return src < 0 ? ERROR : rc;
    }
    T->locals[i] = v;
    return push(T, v);
}

static int
load_local(tracer *T, int i)
{
    if (T->locals[i] != NULL) {
        return push(T, T->locals[i]);
    }
    if (T->depth > 0) {
        return load_inlined_free(T, i);
    }
    int rc, src;
    PyObject *value;
    if (T->start_pc > 0 && is_cell_slot(T, i)) {
        /* after the prologue, cell and free slots hold cells */
        PyObject *cell = T->frame->localsplus[i];
        value = cell && PyCell_Check(cell) ? PyCell_GET(cell) : NULL;
        src = tc_source_add(T->out->guards, TC_SRC_CELL, -1, i,
                            local_name(T, i));
    }
    else if (is_free_slot(T, i)) {
        int j = i - (T->nlocals - T->co->co_nfreevars);
        value = T->closure ? PyCell_GET(PyTuple_GET_ITEM(T->closure, j)) : NULL;
        src = tc_source_add(T->out->guards, TC_SRC_CLOSURE, -1, j,
                            local_name(T, i));
    }
    else {
        value = T->frame->localsplus[i];
        src = tc_source_add(T->out->guards, TC_SRC_LOCAL, -1, i,
                            local_name(T, i));
    }
    if (src < 0) {
        return ERROR;
    }
    if (value == NULL) {
        return unsupported(T, "read of unbound variable '%U'",
                           local_name(T, i));
    }
    tc_var *v = wrap_value(T, value, src, &rc);
    if (v == NULL) {
        return rc;
    }
    T->locals[i] = v;
    return push(T, v);
}

static int
store_local(tracer *T, int i)
{
    if (is_free_slot(T, i)) {
        return unsupported(T, "write to closure variable '%U' (nonlocal)",
                           local_name(T, i));
    }
    T->locals[i] = pop(T);
    T->written[i] = 1;
    return OK;
}

static int
load_global(tracer *T, PyObject *name)
{
    PyObject *cached = PyDict_GetItemWithError(T->global_vars, name);
    if (cached != NULL) {
        return push(T, T->sh->arena.vars[PyLong_AsLong(cached)]);
    }
    if (PyErr_Occurred()) {
        return ERROR;
    }
    PyObject *value = PyDict_GetItemWithError(T->globals, name);
    if (value == NULL && !PyErr_Occurred()) {
        value = PyDict_GetItemWithError(T->builtins, name);
    }
    if (value == NULL) {
        return PyErr_Occurred() ? ERROR
                                : unsupported(T, "name '%U' is not defined",
                                              name);
    }
    int rc;
    int src = T->globals_source < 0
        ? tc_source_add(T->out->guards, TC_SRC_GLOBAL, -1, 0, name)
        : tc_source_add(T->out->guards, TC_SRC_FUNC_GLOBAL, T->globals_source,
                        0, name);
    tc_var *v = src < 0 ? NULL : wrap_value(T, value, src, &rc);
    if (v == NULL) {
        return src < 0 ? ERROR : rc;
    }
    PyObject *idx = PyLong_FromLong(T->sh->arena.n - 1);
    if (idx == NULL || PyDict_SetItem(T->global_vars, name, idx) < 0) {
        Py_XDECREF(idx);
        return ERROR;
    }
    Py_DECREF(idx);
    return push(T, v);
}

/* Constants: tuples become TUPLE vars so they can be unpacked/indexed. */
static tc_var *
const_var(tracer *T, PyObject *value)
{
    if (!PyTuple_CheckExact(value)) {
        if (is_python_scalar(value) || is_known_object(value)
            || value == Py_Ellipsis || PySlice_Check(value)) {
            return tc_var_const(&T->sh->arena, value, -1);
        }
        tc_var *v = tc_var_new(&T->sh->arena, TC_VAR_UNKNOWN, -1);
        if (v) {
            v->obj = Py_NewRef(value);
        }
        return v;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(value);
    tc_var **items = PyMem_Malloc((n ? n : 1) * sizeof(tc_var *));
    if (items == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    tc_var *v = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        items[i] = const_var(T, PyTuple_GET_ITEM(value, i));
        if (items[i] == NULL) {
            goto done;
        }
    }
    v = tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, (int)n, items);
done:
    PyMem_Free(items);
    return v;
}

/* ---- tensors: graph nodes -------------------------------------------------- */

/* The graph node for an operand: a tensor, or a Python number baked in as a
 * wrapped scalar.  Returns -1 after recording a reason. */
static int
operand_node(tracer *T, tc_var *v, int *rc)
{
    tc_graph *g = T->out->graph;
    int node = -1;
    if (v->kind == TC_VAR_TENSOR) {
        return v->node;
    }
    if (reify(T, v) != OK) {
        *rc = ERROR;
        return -1;
    }
    if (v->kind == TC_VAR_CONST && PyBool_Check(v->obj)) {
        node = tc_graph_scalar_bool(g, v->obj == Py_True);
    }
    else if (v->kind == TC_VAR_CONST && PyLong_CheckExact(v->obj)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v->obj, &overflow);
        if (overflow) {
            *rc = unsupported(T, "an integer operand that does not fit int64");
            return -1;
        }
        node = tc_graph_scalar_int(g, x);
    }
    else if (v->kind == TC_VAR_CONST && PyFloat_CheckExact(v->obj)) {
        node = tc_graph_scalar_float(g, PyFloat_AS_DOUBLE(v->obj));
    }
    else {
        *rc = unsupported(T, "a tensor op with an operand of type %s",
                          tc_var_kind_name(v));
        return -1;
    }
    if (node < 0) {
        *rc = ERROR;
        PyErr_NoMemory();
    }
    return node;
}

static int
emit_op(tracer *T, const char *op, int n, tc_var **args, tc_dtype attr)
{
    int nodes[TC_MAX_OP_INPUTS], rc = OK, any_tensor = 0;
    for (int i = 0; i < n; i++) {
        nodes[i] = operand_node(T, args[i], &rc);
        if (nodes[i] < 0) {
            return rc;
        }
        any_tensor |= args[i]->kind == TC_VAR_TENSOR;
    }
    if (!any_tensor) {
        return unsupported(T, "torch op '%s' on Python numbers only", op);
    }
    char err[256];
    int node = tc_graph_op(T->out->graph, op, n, nodes, attr, err, sizeof(err));
    if (node < 0) {
        return unsupported(T, "%s: %s", op, err);
    }
    tc_var *v = tc_var_new(&T->sh->arena, TC_VAR_TENSOR, -1);
    if (v == NULL) {
        return ERROR;
    }
    v->node = node;
    return push(T, v);
}

static const tc_node *
tensor_node(tracer *T, tc_var *v)
{
    return &T->out->graph->nodes[v->node];
}

/* ---- calls ------------------------------------------------------------------ */

static int
parse_args(tracer *T, const tc_binding *b, tc_var **args, int nargs,
           PyObject *kwnames, tc_var **params)
{
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    int npos = nargs - nkw;
    const char *fname = b->def->path;
    int ncopy = npos;
    memset(params, 0, sizeof(tc_var *) * TC_MAX_PARAMS);
    if (b->varargs >= 0 && npos > b->varargs) {
        /* zeros(2, 3) as zeros((2, 3)); zeros(5) and zeros((5,)) as is */
        int nv = npos - b->varargs;
        params[b->varargs] = nv == 1 ? args[b->varargs]
            : tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, nv, args + b->varargs);
        if (params[b->varargs] == NULL) {
            return ERROR;
        }
        ncopy = b->varargs;
    }
    else if (npos > b->nparams || npos > b->nkwonly_from) {
        return unsupported(T, "%s() got %d positional arguments", fname, npos);
    }
    for (int i = 0; i < ncopy; i++) {
        params[i] = args[i];
    }
    for (int k = 0; k < nkw; k++) {
        const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
        int found = -1;
        for (int i = 0; name && i < b->nparams; i++) {
            if (strcmp(b->names[i], name) == 0) {
                found = i;
            }
        }
        if (found < 0 || params[found] != NULL) {
            return unsupported(T, "%s() with keyword argument '%s'", fname,
                               name ? name : "?");
        }
        params[found] = args[npos + k];
    }
    for (int i = 0; i < b->nparams; i++) {
        if (params[i] == NULL) {
            if (b->defaults[i] == NULL) {
                return unsupported(T, "%s() missing argument '%s'", fname,
                                   b->names[i]);
            }
            params[i] = tc_var_const(&T->sh->arena, b->defaults[i], -1);
            if (params[i] == NULL) {
                return ERROR;
            }
        }
    }
    return reify_all(T, params, b->nparams);
}

static int call_cast(tracer *T, tc_var *self, int dt);

static int
is_const(tc_var *v, PyObject *value)
{
    if (v->kind != TC_VAR_CONST) {
        return 0;
    }
    if (v->obj == value) {
        return 1;
    }
    int eq = PyObject_RichCompareBool(v->obj, value, Py_EQ);
    if (eq < 0) {
        PyErr_Clear();
        return 0;
    }
    return eq && Py_TYPE(v->obj) != &PyBool_Type;
}

/* torch.add(input, other, alpha=a) computes input + a * other in the result
 * dtype.  Integral and bool results have extra rules (and errors) for
 * alpha: leave those to eager. */
static int
call_add_sub(tracer *T, const tc_binding *b, tc_var **p)
{
    tc_var *other = p[1], *alpha = p[2];
    PyObject *one = PyLong_FromLong(1);
    int plain = one && is_const(alpha, one);
    Py_XDECREF(one);
    if (plain) {
        tc_var *args[2] = {p[0], other};
        return emit_op(T, b->def->op, 2, args, TC_F32);
    }
    if (alpha->kind != TC_VAR_CONST
        || !(PyLong_CheckExact(alpha->obj) || PyFloat_CheckExact(alpha->obj))) {
        return unsupported(T, "%s() with a non-number alpha", b->def->path);
    }
    int rc = OK, nodes[2];
    for (int i = 0; i < 2; i++) {
        nodes[i] = operand_node(T, p[i], &rc);
        if (nodes[i] < 0) {
            return rc;
        }
    }
    tc_dtype rt = tc_promote_nodes(T->out->graph, 2, nodes);
    if (!tc_dtype_is_float(rt) || other->kind != TC_VAR_TENSOR) {
        return unsupported(T, "%s() with alpha on a non-float result",
                           b->def->path);
    }
    rc = call_cast(T, other, rt);
    if (rc != OK) {
        return rc;
    }
    tc_var *mul_args[2] = {pop(T), alpha};
    rc = emit_op(T, "mul", 2, mul_args, TC_F32);
    if (rc != OK) {
        return rc;
    }
    tc_var *args[2] = {p[0], pop(T)};
    return emit_op(T, b->def->op, 2, args, TC_F32);
}

static int
call_clamp(tracer *T, tc_var **p)
{
    int has_min = !(p[1]->kind == TC_VAR_CONST && p[1]->obj == Py_None);
    int has_max = !(p[2]->kind == TC_VAR_CONST && p[2]->obj == Py_None);
    for (int i = 1; i <= 2; i++) {
        if (p[i]->kind == TC_VAR_CONST && PyFloat_CheckExact(p[i]->obj)
            && isnan(PyFloat_AS_DOUBLE(p[i]->obj))) {
            /* torch releases disagree on what a NaN bound means */
            return unsupported(T, "clamp() with a NaN bound");
        }
    }
    if (has_min && has_max) {
        return emit_op(T, "clamp", 3, p, TC_F32);
    }
    if (!has_min && !has_max) {
        return unsupported(T, "clamp() with neither min nor max");
    }
    tc_var *args[2] = {p[0], has_min ? p[1] : p[2]};
    return emit_op(T, has_min ? "clamp_min" : "clamp_max", 2, args, TC_F32);
}

static int
dtype_by_name(const char *name)
{
    for (int i = 0; i < TC_NDTYPES; i++) {
        if (strcmp(tc_dtype_name((tc_dtype)i), name) == 0) {
            return i;
        }
    }
    return -1;
}

/* x.to(dtype) returns x itself when nothing changes, as eager does. */
static int
call_cast(tracer *T, tc_var *self, int dt)
{
    if (self->kind != TC_VAR_TENSOR) {
        return unsupported(T, "cast of a non-tensor");
    }
    if (dt < 0) {
        return unsupported(T, "Tensor.to() with something other than a "
                           "dtype");
    }
    if (tensor_node(T, self)->dtype == (tc_dtype)dt) {
        return push(T, self);
    }
    tc_var *args[1] = {self};
    return emit_op(T, "to", 1, args, (tc_dtype)dt);
}

/* x.shape and x.size() are torch.Size objects, constant under the tensor's
 * TENSOR_MATCH guard. */
static PyObject *
tc_size_object(const tc_layout *l)
{
    static PyObject *size_type;
    if (size_type == NULL) {
        size_type = PyObject_GetAttrString(tc_torch_module, "Size");
        if (size_type == NULL) {
            return NULL;
        }
    }
    PyObject *t = PyTuple_New(l->ndim);
    for (int i = 0; t && i < l->ndim; i++) {
        PyObject *d = PyLong_FromLongLong(l->sizes[i]);
        if (d == NULL) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, d);
    }
    PyObject *r = t ? PyObject_CallOneArg(size_type, t) : NULL;
    Py_XDECREF(t);
    return r;
}

static int
call_meta(tracer *T, const tc_binding *b, tc_var **p)
{
    if (p[0]->kind != TC_VAR_TENSOR) {
        return unsupported(T, "%s on a non-tensor", b->def->path);
    }
    const tc_layout *l = &tensor_node(T, p[0])->layout;
    PyObject *r = NULL;
    if (b->def->call == TC_CALL_DIM) {
        r = PyLong_FromLong(l->ndim);
    }
    else if (b->def->call == TC_CALL_NUMEL) {
        r = PyLong_FromLongLong(tc_layout_numel(l));
    }
    else if (p[1]->kind == TC_VAR_CONST && PyLong_CheckExact(p[1]->obj)) {
        long d = PyLong_AsLong(p[1]->obj);
        if (d < -l->ndim || d >= l->ndim) {
            return unsupported(T, "Tensor.size(%ld) out of range", d);
        }
        r = PyLong_FromLongLong(l->sizes[d < 0 ? d + l->ndim : d]);
    }
    else {
        r = tc_size_object(l);
    }
    if (r == NULL) {
        return ERROR;
    }
    tc_var *v = tc_var_const(&T->sh->arena, r, -1);
    Py_DECREF(r);
    return push(T, v);
}

/* ---- reductions, normalizations, views ---------------------------------- */

static int
push_node(tracer *T, int node, const char *what, const char *err)
{
    if (node < 0) {
        return unsupported(T, "%s: %s", what, err);
    }
    tc_var *v = tc_var_new(&T->sh->arena, TC_VAR_TENSOR, -1);
    if (v == NULL) {
        return ERROR;
    }
    v->node = node;
    return push(T, v);
}

static int
is_none(tc_var *v)
{
    return v->kind == TC_VAR_CONST && v->obj == Py_None;
}

/* A Python int, or a tuple/list/torch.Size of them, known at trace time:
 * dims and shapes.  Returns the count, or -1 if it is not one. */
static int
int_list(tracer *T, tc_var *v, int64_t *out, int max)
{
    if (reify(T, v) != OK) {
        PyErr_Clear();
        return -1;
    }
    if (v->kind == TC_VAR_CONST && PyLong_Check(v->obj)
        && !PyBool_Check(v->obj)) {
        out[0] = PyLong_AsLongLong(v->obj);
        return 1;
    }
    if (v->kind == TC_VAR_CONST && PyTuple_Check(v->obj)) {
        Py_ssize_t n = PyTuple_GET_SIZE(v->obj);
        if (n > max) {
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *x = PyTuple_GET_ITEM(v->obj, i);
            if (!PyLong_Check(x) || PyBool_Check(x)) {
                return -1;
            }
            out[i] = PyLong_AsLongLong(x);
        }
        return (int)n;
    }
    if ((v->kind == TC_VAR_TUPLE || v->kind == TC_VAR_LIST)
        && v->nitems <= max) {
        for (int i = 0; i < v->nitems; i++) {
            if (int_list(T, v->items[i], &out[i], 1) != 1) {
                return -1;
            }
        }
        return v->nitems;
    }
    return -1;
}

static int
dtype_param(tc_var *v, int *has, tc_dtype *dt)
{
    *has = !is_none(v);
    if (!*has) {
        return 0;
    }
    int code = v->obj ? tc_dtype_from_torch(v->obj) : -1;
    if (code < 0) {
        return -1;
    }
    *dt = (tc_dtype)code;
    return 0;
}

static int
call_reduce(tracer *T, const tc_binding *b, tc_var **p)
{
    const char *name = b->def->op;
    tc_reduce_args a;
    memset(&a, 0, sizeof(a));
    a.correction = 1;
    a.p = 2;
    int i = 1;
    if (strcmp(name, "norm") == 0) {
        tc_var *pv = p[i++];
        double pp = -1;
        if (pv->kind == TC_VAR_CONST && PyUnicode_Check(pv->obj)
            && PyUnicode_CompareWithASCIIString(pv->obj, "fro") == 0) {
            pp = 2;
        }
        else if (pv->kind == TC_VAR_CONST && PyNumber_Check(pv->obj)) {
            pp = PyFloat_AsDouble(pv->obj);
        }
        if (pp != 1 && pp != 2) {
            PyErr_Clear();
            return unsupported(T, "norm with p other than 1, 2 or 'fro'");
        }
        a.p = pp;
    }
    if (!is_none(p[i])) {
        a.ndims = int_list(T, p[i], a.dims, TC_MAX_DIMS);
        if (a.ndims < 0) {
            return unsupported(T, "%s() with a dim that is not an int or "
                               "a tuple of ints", name);
        }
        if (a.ndims == 0) {
            return unsupported(T, "%s() with dim=() (torch's meaning "
                               "differs between ops)", name);
        }
    }
    i++;
    int var_like = strcmp(name, "var") == 0 || strcmp(name, "std") == 0;
    if (var_like && !is_none(p[i])) {       /* unbiased */
        a.correction = PyObject_IsTrue(p[i]->obj) ? 1 : 0;
    }
    i += var_like;
    a.keepdim = p[i]->kind == TC_VAR_CONST && PyObject_IsTrue(p[i]->obj);
    i++;
    if (var_like && !is_none(p[i])) {       /* correction */
        a.correction = PyFloat_AsDouble(p[i]->obj);
        if (a.correction == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return unsupported(T, "%s() with a non-number correction", name);
        }
    }
    else if (i < b->nparams && strcmp(b->names[i], "dtype") == 0
             && dtype_param(p[i], &a.has_dtype, &a.dtype) < 0) {
        return unsupported(T, "%s() with an unsupported dtype", name);
    }
    int rc = OK, x = operand_node(T, p[0], &rc);
    if (x < 0 || p[0]->kind != TC_VAR_TENSOR) {
        return x < 0 ? rc : unsupported(T, "%s() of a non-tensor", name);
    }
    char err[256];
    return push_node(T, tc_graph_reduce(T->out->graph, name, x, &a, err,
                                        sizeof(err)), name, err);
}

static int
call_softmax(tracer *T, const tc_binding *b, tc_var **p)
{
    int64_t dim;
    int has_dtype = 0;
    tc_dtype dt = TC_F32;
    tc_var *dtv = p[b->nparams - 1];
    if (p[0]->kind != TC_VAR_TENSOR || int_list(T, p[1], &dim, 1) != 1
        || dtype_param(dtv, &has_dtype, &dt) < 0) {
        return unsupported(T, "%s() needs a tensor and an int dim",
                           b->def->op);
    }
    char err[256];
    int log = strcmp(b->def->op, "log_softmax") == 0;
    return push_node(T, tc_graph_softmax(T->out->graph, p[0]->node, dim,
                                         has_dtype, dt, log, err,
                                         sizeof(err)), b->def->op, err);
}

/* weight / bias: a tensor, or None (-1). */
static int
optional_tensor(tc_var *v)
{
    return v->kind == TC_VAR_TENSOR ? v->node : is_none(v) ? -1 : -2;
}

static int
call_norm_layer(tracer *T, const tc_binding *b, tc_var **p)
{
    int64_t shape[TC_MAX_DIMS];
    int n = int_list(T, p[1], shape, TC_MAX_DIMS);
    int rms = b->def->call == TC_CALL_RMS_NORM;
    int w = optional_tensor(p[2]), bias = rms ? -1 : optional_tensor(p[3]);
    tc_var *epsv = p[rms ? 3 : 4];
    int has_eps = !is_none(epsv);
    double eps = has_eps ? PyFloat_AsDouble(epsv->obj) : 0;
    if (p[0]->kind != TC_VAR_TENSOR || n < 0 || w == -2 || bias == -2
        || (eps == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return unsupported(T, "%s() with unsupported arguments",
                           b->def->path);
    }
    char err[256];
    int node = rms
        ? tc_graph_rms_norm(T->out->graph, p[0]->node, n, shape, w, has_eps,
                            eps, err, sizeof(err))
        : tc_graph_layer_norm(T->out->graph, p[0]->node, n, shape, w, bias,
                              eps, err, sizeof(err));
    return push_node(T, node, b->def->path, err);
}

/* x.view(2, 3) and x.view((2, 3)) alike. */
static int
vararg_dims(tracer *T, tc_var **args, int nargs, int64_t *dims)
{
    if (nargs == 1) {
        return int_list(T, args[0], dims, TC_MAX_DIMS);
    }
    if (nargs > TC_MAX_DIMS) {
        return -1;
    }
    for (int i = 0; i < nargs; i++) {
        if (int_list(T, args[i], &dims[i], 1) != 1) {
            return -1;
        }
    }
    return nargs;
}

static int push_folded(tracer *T, PyObject *r, const char *what);

/* torch's is_contiguous(): strides of size-1 dims do not matter, and an
 * empty tensor is contiguous. */
static int
is_contiguous_layout(const tc_layout *l)
{
    int64_t expected = 1;
    if (tc_layout_numel(l) == 0) {
        return 1;
    }
    for (int d = l->ndim - 1; d >= 0; d--) {
        if (l->sizes[d] != 1 && l->strides[d] != expected) {
            return 0;
        }
        expected *= l->sizes[d];
    }
    return 1;
}

static int
call_view(tracer *T, const char *op, tc_var *self, tc_var **rest, int nrest)
{
    tc_graph *g = T->out->graph;
    int64_t d[TC_MAX_DIMS];
    char err[256] = "";
    int x = self->node, node = -1, n = 0;
    if (self->kind != TC_VAR_TENSOR) {
        return unsupported(T, "%s of a non-tensor", op);
    }
    if (strcmp(op, "t") == 0) {
        node = tc_graph_t(g, x, err, sizeof(err));
    }
    else if (strcmp(op, "is_contiguous") == 0) {
        if (nrest != 0) {
            return unsupported(T, "is_contiguous(memory_format=...)");
        }
        return push_folded(T, PyBool_FromLong(
            is_contiguous_layout(&tensor_node(T, self)->layout)),
            "is_contiguous");
    }
    else if (strcmp(op, "expand_as") == 0 || strcmp(op, "view_as") == 0
             || strcmp(op, "reshape_as") == 0) {
        if (nrest != 1 || rest[0]->kind != TC_VAR_TENSOR) {
            return unsupported(T, "Tensor.%s() of a non-tensor", op);
        }
        const tc_layout *o = &tensor_node(T, rest[0])->layout;
        node = op[0] == 'e'
            ? tc_graph_expand(g, x, o->ndim, o->sizes, err, sizeof(err))
            : op[0] == 'v'
            ? tc_graph_view(g, x, o->ndim, o->sizes, err, sizeof(err))
            : tc_graph_reshape(g, x, o->ndim, o->sizes, err, sizeof(err));
    }
    else if (strcmp(op, "unflatten") == 0) {
        int64_t dim, sizes[TC_MAX_DIMS];
        int ns = nrest == 2 ? int_list(T, rest[1], sizes, TC_MAX_DIMS) : -1;
        if (ns < 0 || int_list(T, rest[0], &dim, 1) != 1) {
            return unsupported(T, "unflatten() with non-constant sizes");
        }
        node = tc_graph_unflatten(g, x, dim, ns, sizes, err, sizeof(err));
    }
    else if (strcmp(op, "contiguous") == 0) {
        const tc_layout *l = &tensor_node(T, self)->layout;
        tc_layout c = *l;
        tc_layout_contiguous(&c);
        if (memcmp(c.strides, l->strides, l->ndim * sizeof(int64_t)) == 0
            && tensor_node(T, self)->offset == 0) {
            return push(T, self);       /* eager returns self */
        }
        node = tc_graph_op(g, "contiguous", 1, &x, TC_F32, err, sizeof(err));
    }
    else if ((n = vararg_dims(T, rest, nrest, d)) < 0 && nrest > 0) {
        return unsupported(T, "Tensor.%s() with non-constant arguments", op);
    }
    else if (strcmp(op, "transpose") == 0 && n == 2) {
        node = tc_graph_transpose(g, x, d[0], d[1], err, sizeof(err));
    }
    else if (strcmp(op, "unsqueeze") == 0 && n == 1) {
        node = tc_graph_unsqueeze(g, x, d[0], err, sizeof(err));
    }
    else if (strcmp(op, "squeeze") == 0) {
        node = tc_graph_squeeze(g, x, nrest ? n : -1, d, err, sizeof(err));
    }
    else if (strcmp(op, "flatten") == 0) {
        int64_t s = nrest > 0 ? d[0] : 0, e = nrest > 1 ? d[1] : -1;
        node = tc_graph_flatten(g, x, s, e, err, sizeof(err));
    }
    else if (strcmp(op, "permute") == 0) {
        node = tc_graph_permute(g, x, n, d, err, sizeof(err));
    }
    else if (strcmp(op, "view") == 0) {
        node = tc_graph_view(g, x, n, d, err, sizeof(err));
    }
    else if (strcmp(op, "reshape") == 0) {
        node = tc_graph_reshape(g, x, n, d, err, sizeof(err));
    }
    else if (strcmp(op, "expand") == 0) {
        node = tc_graph_expand(g, x, n, d, err, sizeof(err));
    }
    else if (strcmp(op, "narrow") == 0 && n == 3) {
        node = tc_graph_narrow(g, x, d[0], d[1], d[2], err, sizeof(err));
    }
    else if (strcmp(op, "select") == 0 && n == 2) {
        node = tc_graph_select(g, x, d[0], d[1], err, sizeof(err));
    }
    else {
        return unsupported(T, "Tensor.%s() with these arguments", op);
    }
    if (node == x) {
        return push(T, self);
    }
    return push_node(T, node, op, err);
}

static int
call_view_binding(tracer *T, const tc_binding *b, tc_var **args, int nargs,
                  PyObject *kwnames)
{
    if (strstr(b->def->sig, "*dims") != NULL) {
        if (kwnames != NULL || nargs < 1) {
            return unsupported(T, "%s() with keyword arguments",
                               b->def->path);
        }
        return call_view(T, b->def->op, args[0], args + 1, nargs - 1);
    }
    tc_var *p[TC_MAX_PARAMS];
    int rc = parse_args(T, b, args, nargs, kwnames, p);
    if (rc != OK) {
        return rc;
    }
    int nrest = 0;
    tc_var *rest[TC_MAX_PARAMS];
    for (int i = 1; i < b->nparams; i++) {
        if (!is_none(p[i])) {
            rest[nrest++] = p[i];
        }
    }
    return call_view(T, b->def->op, p[0], rest, nrest);
}

/* ---- extern ops and multi-view ops ------------------------------------ */

static int
push_extern(tracer *T, const char *op, int n, const int *in,
            const int64_t *xattr, double xfattr)
{
    char err[256];
    return push_node(T, tc_graph_extern(T->out->graph, op, n, in, xattr,
                                        xfattr, err, sizeof(err)), op, err);
}

/* matmul, mm, bmm, addmm, baddbmm, linear: tensors in order; a None bias
 * is dropped; beta / alpha must be 1 (else eager runs it). */
static int
call_extern(tracer *T, const tc_binding *b, tc_var **p)
{
    int in[TC_MAX_OP_INPUTS], n = 0;
    for (int i = 0; i < b->nparams; i++) {
        if (p[i]->kind == TC_VAR_TENSOR && n < TC_MAX_OP_INPUTS) {
            in[n++] = p[i]->node;
        }
        else if (p[i]->kind == TC_VAR_CONST && PyLong_CheckExact(p[i]->obj)
                 && PyLong_AsLong(p[i]->obj) == 1) {
            continue;
        }
        else if (!is_none(p[i]) || i < 2) {
            return unsupported(T, "%s() with %s argument '%s'", b->def->path,
                               tc_var_kind_name(p[i]), b->names[i]);
        }
    }
    return push_extern(T, b->def->op, n, in, NULL, 0);
}

static int
const_number(tc_var *v, double *out)
{
    if (v->kind != TC_VAR_CONST || !PyNumber_Check(v->obj)
        || PyBool_Check(v->obj)) {
        return -1;
    }
    *out = PyFloat_AsDouble(v->obj);
    return *out == -1 && PyErr_Occurred() ? (PyErr_Clear(), -1) : 0;
}

static int
call_sdpa(tracer *T, tc_var **p)
{
    int64_t xa[TC_MAX_XATTR] = {0};
    int in[4], n = 3;
    double dropout = -1, scale = 0;
    for (int i = 0; i < 3; i++) {
        if (p[i]->kind != TC_VAR_TENSOR) {
            return unsupported(T, "scaled_dot_product_attention of a %s",
                               tc_var_kind_name(p[i]));
        }
        in[i] = p[i]->node;
    }
    if (p[3]->kind == TC_VAR_TENSOR) {
        in[n++] = p[3]->node;
        xa[TC_XA_SDPA_HAS_MASK] = 1;
    }
    if ((!is_none(p[3]) && p[3]->kind != TC_VAR_TENSOR)
        || const_number(p[4], &dropout) < 0 || dropout != 0
        || p[5]->kind != TC_VAR_CONST || !PyBool_Check(p[5]->obj)
        || (!is_none(p[6]) && const_number(p[6], &scale) < 0)
        || p[7]->obj != Py_False) {
        return unsupported(T, "scaled_dot_product_attention with dropout_p, "
                           "enable_gqa or non-constant arguments");
    }
    xa[TC_XA_SDPA_CAUSAL] = p[5]->obj == Py_True;
    /* The memory order eager's result has (and the runtime then need not
     * copy): CUDA's kernels write [B, L, H, E], so transpose(1, 2)
     * .contiguous() after it is free.  On the CPU (torch 2.13, every
     * dtype) the result follows q: [B, L, H, E] when q is laid out that
     * way (heads split off a projection, as in every transformer),
     * contiguous otherwise.  A wrong guess costs a copy, not a result. */
    const tc_node *qn = &T->out->graph->nodes[in[0]];
    const int64_t *qs = qn->layout.strides;
    int cpu_heads_inner = qn->layout.ndim == 4 && qs[3] == 1
                          && qs[1] < qs[2];
    xa[TC_XA_SDPA_HEADS_INNER] = T->out->device >= 0 || cpu_heads_inner;
    xa[TC_XA_SDPA_HAS_SCALE] = !is_none(p[6]);
    return push_extern(T, "sdpa", n, in, xa, scale);
}

static int
call_embedding(tracer *T, tc_var **p)
{
    if (p[0]->kind != TC_VAR_TENSOR || p[1]->kind != TC_VAR_TENSOR
        || !is_none(p[3]) || p[6]->obj != Py_False) {
        return unsupported(T, "F.embedding with max_norm or sparse");
    }
    int in[2] = {p[0]->node, p[1]->node};
    return push_extern(T, "embedding", 2, in, NULL, 0);
}

/* stride / padding / dilation: an int or a tuple of nsp ints. */
static int
conv_param(tracer *T, tc_var *v, int nsp, int64_t *out)
{
    int64_t d[TC_MAX_DIMS];
    int n = int_list(T, v, d, TC_MAX_DIMS);
    if (n != 1 && n != nsp) {
        return -1;
    }
    for (int i = 0; i < nsp; i++) {
        out[i] = d[n == 1 ? 0 : i];
    }
    return 0;
}

static int
call_conv(tracer *T, const tc_binding *b, tc_var **p)
{
    int nsp = b->def->op[4] - '0';
    int64_t xa[TC_MAX_XATTR] = {0};
    int in[3] = {p[0]->node, p[1]->node, -1};
    int n = p[2]->kind == TC_VAR_TENSOR ? 3 : 2;
    in[2] = n == 3 ? p[2]->node : -1;
    if (p[0]->kind != TC_VAR_TENSOR || p[1]->kind != TC_VAR_TENSOR
        || (n == 2 && !is_none(p[2]))
        || conv_param(T, p[3], nsp, &xa[TC_XA_CONV_STRIDE]) < 0
        || conv_param(T, p[4], nsp, &xa[TC_XA_CONV_PADDING]) < 0
        || conv_param(T, p[5], nsp, &xa[TC_XA_CONV_DILATION]) < 0
        || int_list(T, p[6], &xa[TC_XA_CONV_GROUPS], 1) != 1) {
        return unsupported(T, "%s() with string padding or non-constant "
                           "arguments", b->def->path);
    }
    return push_extern(T, b->def->op, n, in, xa, 0);
}

static int
call_cat(tracer *T, const tc_binding *b, tc_var **p)
{
    int64_t xa[TC_MAX_XATTR] = {0};
    int in[TC_MAX_OP_INPUTS];
    tc_var *seq = p[0];
    if ((seq->kind != TC_VAR_TUPLE && seq->kind != TC_VAR_LIST)
        || seq->nitems < 1 || seq->nitems > TC_MAX_OP_INPUTS
        || int_list(T, p[1], &xa[TC_XA_CAT_DIM], 1) != 1) {
        return unsupported(T, "%s() of other than 1 to %d tensors with a "
                           "constant dim", b->def->path, TC_MAX_OP_INPUTS);
    }
    for (int i = 0; i < seq->nitems; i++) {
        if (seq->items[i]->kind != TC_VAR_TENSOR) {
            return unsupported(T, "%s() of a %s", b->def->path,
                               tc_var_kind_name(seq->items[i]));
        }
        in[i] = seq->items[i]->node;
    }
    return push_extern(T, b->def->op, seq->nitems, in, xa, 0);
}

#define MAX_PIECES 64

/* Boundaries of split / chunk / unbind along a dim of size `size`: the
 * number of pieces, or -1. */
static int
split_bounds(tracer *T, const char *op, tc_var *arg, int64_t size,
             int64_t *start, int64_t *len)
{
    int64_t v[MAX_PIECES];
    if (!strcmp(op, "unbind")) {
        for (int i = 0; i < size && size <= MAX_PIECES; i++) {
            start[i] = i, len[i] = 1;
        }
        return size <= MAX_PIECES ? (int)size : -1;
    }
    int n = int_list(T, arg, v, MAX_PIECES);
    int sections = !(arg->kind == TC_VAR_CONST && PyLong_Check(arg->obj));
    if (n < 1 || (sections && strcmp(op, "split") != 0)) {
        return -1;
    }
    if (sections) {            /* split(x, [2, 3, 1]) */
        int64_t at = 0;
        for (int i = 0; i < n; i++) {
            start[i] = at, len[i] = v[i];
            at += v[i];
        }
        return at == size ? n : -1;
    }
    if (v[0] <= 0) {
        return -1;
    }
    /* split: pieces of v[0]; chunk: v[0] pieces of ceil(size / v[0]) */
    int64_t step = strcmp(op, "chunk") ? v[0] : (size + v[0] - 1) / v[0];
    step = step > 0 ? step : 1;  /* an empty dim gives one empty piece */
    n = 0;
    for (int64_t at = 0; (at < size || n == 0) && n < MAX_PIECES; at += step) {
        start[n] = at;
        len[n++] = size - at < step ? size - at : step;
    }
    return start[n - 1] + len[n - 1] == size ? n : -1;
}

static int
call_split(tracer *T, const tc_binding *b, tc_var **p)
{
    const char *op = b->def->op;
    int unbind = strcmp(op, "unbind") == 0;
    int64_t dim, start[MAX_PIECES], len[MAX_PIECES];
    tc_var *items[MAX_PIECES];
    if (p[0]->kind != TC_VAR_TENSOR
        || int_list(T, p[unbind ? 1 : 2], &dim, 1) != 1) {
        return unsupported(T, "%s() with a non-constant dim", b->def->path);
    }
    const tc_layout *l = &tensor_node(T, p[0])->layout;
    int64_t d = dim < 0 ? dim + l->ndim : dim;
    int n = d >= 0 && d < l->ndim
        ? split_bounds(T, op, unbind ? NULL : p[1], l->sizes[d], start, len)
        : -1;
    if (n < 0) {
        return unsupported(T, "%s() with these sizes", b->def->path);
    }
    tc_graph *g = T->out->graph;
    char err[256] = "";
    for (int i = 0; i < n; i++) {
        int node = unbind
            ? tc_graph_select(g, p[0]->node, d, start[i], err, sizeof(err))
            : tc_graph_narrow(g, p[0]->node, d, start[i], len[i], err,
                              sizeof(err));
        if (node < 0) {
            return unsupported(T, "%s: %s", op, err);
        }
        items[i] = tc_var_new(&T->sh->arena, TC_VAR_TENSOR, -1);
        if (items[i] == NULL) {
            return ERROR;
        }
        items[i]->node = node;
    }
    return push(T, tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, n, items));
}

/* F.cross_entropy / F.nll_loss with class-index targets. */
static int
call_loss(tracer *T, const tc_binding *b, tc_var **p)
{
    int64_t xa[TC_MAX_XATTR] = {0};
    int in[3] = {p[0]->node, p[1]->node, -1}, n = 2;
    double smoothing = 0;
    const char *red = "mean";
    if (p[6]->kind == TC_VAR_CONST && PyUnicode_Check(p[6]->obj)) {
        red = PyUnicode_AsUTF8(p[6]->obj);
    }
    xa[TC_XA_LOSS_REDUCTION] = !strcmp(red, "none") ? 0
                             : !strcmp(red, "mean") ? 1
                             : !strcmp(red, "sum") ? 2 : -1;
    if (p[2]->kind == TC_VAR_TENSOR) {
        in[n++] = p[2]->node;
    }
    if (p[0]->kind != TC_VAR_TENSOR || p[1]->kind != TC_VAR_TENSOR
        || (n == 2 && !is_none(p[2])) || !is_none(p[3]) || !is_none(p[5])
        || xa[TC_XA_LOSS_REDUCTION] < 0
        || (!is_none(p[6]) && !(p[6]->kind == TC_VAR_CONST
                                && PyUnicode_Check(p[6]->obj)))
        || int_list(T, p[4], &xa[TC_XA_LOSS_IGNORE_INDEX], 1) != 1
        || (b->nparams > 7 && const_number(p[7], &smoothing) < 0)) {
        return unsupported(T, "%s() with size_average/reduce or "
                           "non-constant arguments", b->def->path);
    }
    return push_extern(T, b->def->op, n, in, xa, smoothing);
}

static int
call_group_norm(tracer *T, tc_var **p)
{
    int64_t xa[TC_MAX_XATTR] = {0};
    int in[3] = {p[0]->node}, n = 1;
    double eps = 0;
    for (int i = 0; i < 2; i++) {
        if (p[2 + i]->kind == TC_VAR_TENSOR) {
            in[n++] = p[2 + i]->node;
            xa[TC_XA_GN_HAS_WEIGHT + i] = 1;
        }
        else if (!is_none(p[2 + i])) {
            return unsupported(T, "F.group_norm with a %s weight",
                               tc_var_kind_name(p[2 + i]));
        }
    }
    if (p[0]->kind != TC_VAR_TENSOR
        || int_list(T, p[1], &xa[TC_XA_GN_GROUPS], 1) != 1
        || const_number(p[4], &eps) < 0) {
        return unsupported(T, "F.group_norm with non-constant arguments");
    }
    return push_extern(T, "group_norm", n, in, xa, eps);
}

/* torch.max(x) / torch.max(x, y) / torch.max(x, dim, keepdim): the last
 * returns torch.return_types.max(values, indices), a structseq.  It is a
 * DEFERRED call (built only if it escapes the segment) whose one item is
 * the (values, indices) tuple that unpacking, indexing and .values /
 * .indices read (structseq_items). */
static int
call_max_min(tracer *T, const tc_binding *b, tc_var **p)
{
    int is_max = strcmp(b->def->op, "max") == 0, values, indices;
    char err[256] = "";
    if (p[0]->kind != TC_VAR_TENSOR) {
        return unsupported(T, "%s() of a %s", b->def->path,
                           tc_var_kind_name(p[0]));
    }
    if (p[1]->kind == TC_VAR_TENSOR) {
        tc_var *args[2] = {p[0], p[1]};
        return emit_op(T, is_max ? "maximum" : "minimum", 2, args, TC_F32);
    }
    if (is_none(p[1])) {
        tc_reduce_args a;
        memset(&a, 0, sizeof(a));
        return push_node(T, tc_graph_reduce(T->out->graph, b->def->op,
                                            p[0]->node, &a, err, sizeof(err)),
                         b->def->op, err);
    }
    int64_t dim;
    if (int_list(T, p[1], &dim, 1) != 1 || p[2]->kind != TC_VAR_CONST
        || !PyBool_Check(p[2]->obj)) {
        return unsupported(T, "%s() with a non-constant dim", b->def->path);
    }
    if (tc_graph_max_dim(T->out->graph, is_max, p[0]->node, dim,
                         p[2]->obj == Py_True, &values, &indices, err,
                         sizeof(err)) < 0) {
        return unsupported(T, "%s: %s", b->def->path, err);
    }
    tc_var *parts[2] = {tc_var_new(&T->sh->arena, TC_VAR_TENSOR, -1),
                        tc_var_new(&T->sh->arena, TC_VAR_TENSOR, -1)};
    if (parts[0] == NULL || parts[1] == NULL) {
        return ERROR;
    }
    parts[0]->node = values;
    parts[1]->node = indices;
    tc_var *pair = tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, 2, parts);
    tc_var *r = pair ? tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED, 1, &pair)
                     : NULL;
    PyObject *types = PyObject_GetAttrString(tc_torch_module, "return_types");
    PyObject *cls = types ? PyObject_GetAttrString(types, b->def->op) : NULL;
    Py_XDECREF(types);
    if (r == NULL || cls == NULL) {
        Py_XDECREF(cls);
        return ERROR;
    }
    r->node = TC_TMPL_CALL;
    r->obj = cls;
    return push(T, r);
}

/* The (values, indices) tuple of a torch.return_types value, or NULL. */
static tc_var *
structseq_items(tc_var *v)
{
    if (v == NULL || v->kind != TC_VAR_DEFERRED || v->node != TC_TMPL_CALL
        || v->nitems != 1 || v->items[0]->kind != TC_VAR_TUPLE
        || !PyType_Check(v->obj)
        || !PyType_IsSubtype((PyTypeObject *)v->obj, &PyTuple_Type)) {
        return NULL;
    }
    return v->items[0];
}

/* F.dropout: the identity in eval mode (training=False) or with p == 0,
 * which is all inference needs; training-mode dropout runs eagerly. */
static int
call_dropout(tracer *T, tc_var **p)
{
    double prob = -1;
    if (p[0]->kind != TC_VAR_TENSOR || p[2]->kind != TC_VAR_CONST
        || const_number(p[1], &prob) < 0 || p[3]->obj != Py_False) {
        return unsupported(T, "F.dropout with non-constant arguments");
    }
    if (p[2]->obj != Py_False && prob != 0) {
        return unsupported(T, "F.dropout with training=True and p > 0 "
                           "(random masks are not compiled)");
    }
    return push(T, p[0]);
}

/* ---- activations, masks, new tensors (graph.h builders) ------------------- */

static int
is_false(tc_var *v)
{
    return v->kind == TC_VAR_CONST && v->obj == Py_False;
}

static tc_var *
int_var(tracer *T, long v)
{
    PyObject *o = PyLong_FromLong(v);
    tc_var *r = o ? tc_var_const(&T->sh->arena, o, -1) : NULL;
    Py_XDECREF(o);
    return r;
}

/* F.hardtanh / F.relu6: eager clamps into a tensor of the input's dtype
 * (hardtanh_out on empty_like(input)). */
static int
call_hardtanh(tracer *T, const tc_binding *b, tc_var **p)
{
    int relu6 = b->nparams == 2;
    if (!is_false(p[b->nparams - 1]) || p[0]->kind != TC_VAR_TENSOR) {
        return unsupported(T, "%s() on a non-tensor or with inplace=True",
                           b->def->path);
    }
    tc_var *args[3] = {p[0], relu6 ? int_var(T, 0) : p[1],
                       relu6 ? int_var(T, 6) : p[2]};
    if (args[1] == NULL || args[2] == NULL) {
        return ERROR;
    }
    int rc = call_clamp(T, args);
    return rc != OK ? rc : call_cast(T, pop(T), tensor_node(T, p[0])->dtype);
}

static int
call_tril(tracer *T, const tc_binding *b, tc_var **p)
{
    int64_t k;
    if (p[0]->kind != TC_VAR_TENSOR || int_list(T, p[1], &k, 1) != 1) {
        return unsupported(T, "%s() needs a tensor and an int diagonal",
                           b->def->path);
    }
    char err[256];
    int upper = strcmp(b->def->op, "triu") == 0;
    return push_node(T, tc_graph_tril(T->out->graph, p[0]->node, k, upper,
                                      err, sizeof(err)), b->def->op, err);
}

static int
call_normalize(tracer *T, const tc_binding *b, tc_var **p)
{
    int64_t dim;
    double pp = p[1]->kind == TC_VAR_CONST ? PyFloat_AsDouble(p[1]->obj) : -1;
    double eps = p[3]->kind == TC_VAR_CONST ? PyFloat_AsDouble(p[3]->obj) : -1;
    if (PyErr_Occurred() || p[0]->kind != TC_VAR_TENSOR || !is_none(p[4])
        || int_list(T, p[2], &dim, 1) != 1 || (pp != 1 && pp != 2)) {
        PyErr_Clear();
        return unsupported(T, "%s() with p other than 1 or 2, out=, or "
                           "non-constant arguments", b->def->path);
    }
    char err[256];
    return push_node(T, tc_graph_normalize(T->out->graph, p[0]->node, pp, dim,
                                           eps, err, sizeof(err)),
                     b->def->path, err);
}

static tc_var *
named_param(const tc_binding *b, tc_var **p, const char *name)
{
    for (int i = 0; i < b->nparams; i++) {
        if (strcmp(b->names[i], name) == 0) {
            return p[i];
        }
    }
    return NULL;
}

/* device=: None (dflt), "cpu", "cuda", "cuda:N", or a known torch.device
 * (x.device of a traced tensor); -1 is the CPU, -2 not understood (a
 * torch.device read from the frame is not guarded here: eager). */
static int
device_param(tc_var *v, int dflt)
{
    if (v == NULL || is_none(v)) {
        return dflt;
    }
    PyObject *text = NULL;
    if (v->kind == TC_VAR_CONST && PyUnicode_Check(v->obj)) {
        text = Py_NewRef(v->obj);
    }
    else if (v->kind == TC_VAR_CONST
             && strcmp(Py_TYPE(v->obj)->tp_name, "torch.device") == 0) {
        text = PyObject_Str(v->obj);   /* "cpu", "cuda:0" */
    }
    const char *s = text ? PyUnicode_AsUTF8(text) : NULL;
    char buf[32];
    snprintf(buf, sizeof(buf), "%s", s ? s : "");
    Py_XDECREF(text);
    s = buf;
    if (s[0] == 0) {
        PyErr_Clear();
        return -2;
    }
    if (strcmp(s, "cpu") == 0) {
        return -1;
    }
    if (strncmp(s, "cuda:", 5) == 0 && s[5] >= '0' && s[5] <= '9') {
        return atoi(s + 5);
    }
    return -2;   /* "cuda" means the current device, which is not guarded */
}

static void
device_name(char *buf, size_t n, int dev)
{
    if (dev < 0) {
        snprintf(buf, n, "cpu");
    }
    else {
        snprintf(buf, n, "cuda:%d", dev);
    }
}

/* A graph runs on one device: the creation op's must be the graph's. */
static int
use_device(tracer *T, const char *what, int dev)
{
    if ((T->sh->ninputs > 0 || T->sh->device_fixed)
        && dev != T->out->device) {
        char a[32], b[32];
        device_name(a, sizeof(a), dev);
        device_name(b, sizeof(b), T->out->device);
        return unsupported(T, "%s on %s while the graph's tensors are on %s "
                           "(a compiled graph runs on one device)", what, a,
                           b);
    }
    T->out->device = dev;
    T->sh->device_fixed = 1;
    return OK;
}

/* Options eager accepts that change nothing here, or unsupported. */
static int
plain_options(const tc_binding *b, tc_var **p)
{
    tc_var *rg = named_param(b, p, "requires_grad");
    tc_var *pin = named_param(b, p, "pin_memory");
    tc_var *lay = named_param(b, p, "layout");
    tc_var *mf = named_param(b, p, "memory_format");
    PyObject *strided = PyObject_GetAttrString(tc_torch_module, "strided");
    PyObject *preserve = PyObject_GetAttrString(tc_torch_module,
                                                "preserve_format");
    int ok = strided && preserve && (!rg || is_false(rg))
             && (!pin || is_false(pin))
             && (!lay || is_none(lay) || lay->obj == strided)
             && (!mf || is_none(mf) || mf->obj == preserve);
    Py_XDECREF(strided);
    Py_XDECREF(preserve);
    PyErr_Clear();
    return ok;
}

/* arange's length and dtype, with eager's checks (RangeFactories.cpp). */
static int
arange_args(tracer *T, tc_var **p, int has_dtype, tc_dtype *dt, int64_t *n)
{
    if (is_none(p[1])) {               /* arange(end) */
        tc_var *end = p[0];
        p[0] = int_var(T, 0);
        p[1] = end;
    }
    int any_float = 0;
    for (int i = 0; i < 3; i++) {
        if (p[i] == NULL || p[i]->kind != TC_VAR_CONST || PyBool_Check(p[i]->obj)
            || !(PyLong_CheckExact(p[i]->obj) || PyFloat_CheckExact(p[i]->obj))) {
            return unsupported(T, "torch.arange() with non-number bounds");
        }
        any_float |= PyFloat_CheckExact(p[i]->obj);
    }
    if (!has_dtype) {
        *dt = any_float ? TC_F32 : TC_I64;
    }
    if (any_float && !tc_dtype_is_float(*dt)) {
        return unsupported(T, "torch.arange() with float bounds and an "
                           "integer dtype");
    }
    double s = PyFloat_AsDouble(p[0]->obj), e = PyFloat_AsDouble(p[1]->obj);
    double st = PyFloat_AsDouble(p[2]->obj);
    if (st == 0 || !((st > 0 && e >= s) || (st < 0 && e <= s))
        || !isfinite(s) || !isfinite(e)) {
        return unsupported(T, "torch.arange() with an empty or invalid "
                           "range (eager raises or returns nothing)");
    }
    double len;
    if (!any_float) {
        long long a = PyLong_AsLongLong(p[0]->obj);
        long long z = PyLong_AsLongLong(p[1]->obj);
        long long c = PyLong_AsLongLong(p[2]->obj);
        len = (double)((z - a + c - (c > 0 ? 1 : -1)) / c);  /* C division */
    }
    else {
        len = ceil((e - s) / st);
    }
    *n = (int64_t)len;
    return OK;
}

/* zeros / ones / empty / full / arange, their *_like and new_* forms. */
static int
call_new(tracer *T, const tc_binding *b, tc_var **p)
{
    const char *op = b->def->op, *what = b->def->path;
    tc_var *like = named_param(b, p, "input");
    like = like ? like : named_param(b, p, "self");
    tc_var *size = named_param(b, p, "size");
    tc_var *fill = named_param(b, p, "fill_value");
    int has_dtype = 0;
    tc_dtype dt = TC_F32;
    if ((like && like->kind != TC_VAR_TENSOR) || !plain_options(b, p)
        || dtype_param(named_param(b, p, "dtype"), &has_dtype, &dt) < 0) {
        return unsupported(T, "%s() with these options (requires_grad, "
                           "layout, memory_format, dtype)", what);
    }
    const tc_node *ln = like ? tensor_node(T, like) : NULL;
    int dev = device_param(named_param(b, p, "device"),
                           like ? T->out->device : -1);
    if (dev == -2) {
        return unsupported(T, "%s() with a device other than None, 'cpu' or "
                           "'cuda:N' (a bare 'cuda' means the current device, "
                           "which tcjit does not guard)", what);
    }
    tc_layout l = {0};
    int rc = OK, value, step = -1;
    if (strcmp(op, "arange") == 0) {
        int64_t n = 0;
        if ((rc = arange_args(T, p, has_dtype, &dt, &n)) != OK) {
            return rc;
        }
        l.ndim = 1;
        l.sizes[0] = n;
        value = operand_node(T, p[0], &rc);
        step = value < 0 ? -1 : operand_node(T, p[2], &rc);
        if (step < 0) {
            return rc;
        }
    }
    else {
        if (size != NULL) {
            l.ndim = int_list(T, size, l.sizes, TC_MAX_DIMS);
            if (l.ndim < 0) {
                return unsupported(T, "%s() with a size that is not ints",
                                   what);
            }
        }
        else {
            tc_layout_like(&ln->layout, &l);
        }
        if (fill != NULL && (fill->kind != TC_VAR_CONST
                             || !(PyLong_Check(fill->obj)
                                  || PyFloat_CheckExact(fill->obj)))) {
            return unsupported(T, "%s() with a fill value that is not a "
                               "number", what);
        }
        if (fill == NULL) {
            fill = int_var(T, strcmp(op, "ones") == 0);
        }
        if (!has_dtype && ln != NULL) {
            dt = ln->dtype;
        }
        else if (!has_dtype && strcmp(op, "full") == 0) {
            dt = PyBool_Check(fill->obj) ? TC_BOOL
                 : PyLong_Check(fill->obj) ? TC_I64 : TC_F32;
        }
        value = operand_node(T, fill, &rc);
        if (value < 0) {
            return rc;
        }
    }
    if (size != NULL || ln == NULL) {
        tc_layout_contiguous(&l);
    }
    if ((rc = use_device(T, what, dev)) != OK) {
        return rc;
    }
    char err[256];
    int node = step >= 0
        ? tc_graph_arange(T->out->graph, &l, dt, value, step, err, sizeof(err))
        : tc_graph_full(T->out->graph, &l, dt, value, err, sizeof(err));
    return push_node(T, node, what, err);
}

static int
call_binding(tracer *T, const tc_binding *b, tc_var **args, int nargs,
             PyObject *kwnames)
{
    if (b->def->call == TC_CALL_VIEW) {
        return call_view_binding(T, b, args, nargs, kwnames);
    }
    tc_var *p[TC_MAX_PARAMS];
    int rc = parse_args(T, b, args, nargs, kwnames, p);
    if (rc != OK) {
        return rc;
    }
    switch (b->def->call) {
    case TC_CALL_OP:
        return emit_op(T, b->def->op, b->nparams, p, TC_F32);
    case TC_CALL_WHERE_METHOD: {
        tc_var *args[3] = {p[1], p[0], p[2]};  /* self.where(cond, other) */
        return emit_op(T, "where", 3, args, TC_F32);
    }
    case TC_CALL_ADD_SUB:
        return call_add_sub(T, b, p);
    case TC_CALL_DIV:
        if (!(p[2]->kind == TC_VAR_CONST && p[2]->obj == Py_None)) {
            return unsupported(T, "div() with a rounding_mode");
        }
        return emit_op(T, "div", 2, p, TC_F32);
    case TC_CALL_CLAMP:
        return call_clamp(T, p);
    case TC_CALL_GELU: {
        int is_str = p[1]->kind == TC_VAR_CONST && PyUnicode_Check(p[1]->obj);
        if (is_str && PyUnicode_CompareWithASCIIString(p[1]->obj, "tanh") == 0) {
            return emit_op(T, "gelu_tanh", 1, p, TC_F32);
        }
        if (is_none(p[1]) || (is_str && PyUnicode_CompareWithASCIIString(
                                            p[1]->obj, "none") == 0)) {
            return emit_op(T, "gelu", 1, p, TC_F32);
        }
        return unsupported(T, "F.gelu with approximate other than 'none' or "
                           "'tanh'");
    }
    case TC_CALL_CAST:
        return call_cast(T, p[0], p[1]->obj ? tc_dtype_from_torch(p[1]->obj)
                                            : -1);
    case TC_CALL_CAST_TO:
        return call_cast(T, p[0], dtype_by_name(b->def->op));
    case TC_CALL_NO_INPLACE:
        if (!is_false(p[b->nparams - 1])) {
            return unsupported(T, "%s(inplace=True) mutates its input",
                               b->def->path);
        }
        return emit_op(T, b->def->op, b->nparams - 1, p, TC_F32);
    case TC_CALL_HARDTANH:
        return call_hardtanh(T, b, p);
    case TC_CALL_TRIL:
        return call_tril(T, b, p);
    case TC_CALL_NEW:
        return call_new(T, b, p);
    case TC_CALL_NORMALIZE:
        return call_normalize(T, b, p);
    case TC_CALL_TYPE_AS:
        if (p[1]->kind != TC_VAR_TENSOR) {
            return unsupported(T, "Tensor.type_as() of a non-tensor");
        }
        return call_cast(T, p[0], tensor_node(T, p[1])->dtype);
    case TC_CALL_SIZE:
    case TC_CALL_DIM:
    case TC_CALL_NUMEL:
        return call_meta(T, b, p);
    case TC_CALL_REDUCE:
        return call_reduce(T, b, p);
    case TC_CALL_SOFTMAX:
        return call_softmax(T, b, p);
    case TC_CALL_LAYER_NORM:
    case TC_CALL_RMS_NORM:
        return call_norm_layer(T, b, p);
    case TC_CALL_EXTERN:
        return call_extern(T, b, p);
    case TC_CALL_SDPA:
        return call_sdpa(T, p);
    case TC_CALL_EMBEDDING:
        return call_embedding(T, p);
    case TC_CALL_CONV:
        return call_conv(T, b, p);
    case TC_CALL_CAT:
        return call_cat(T, b, p);
    case TC_CALL_SPLIT:
        return call_split(T, b, p);
    case TC_CALL_DROPOUT:
        return call_dropout(T, p);
    case TC_CALL_LOSS:
        return call_loss(T, b, p);
    case TC_CALL_GROUP_NORM:
        return call_group_norm(T, p);
    case TC_CALL_MAX_MIN:
        return call_max_min(T, b, p);
    case TC_CALL_VIEW:
        break;
    }
    return unsupported(T, "call kind");
}

static int
all_const(tc_var **args, int n)
{
    for (int i = 0; i < n; i++) {
        if (args[i]->kind != TC_VAR_CONST) {
            return 0;
        }
    }
    return 1;
}

/* Builtins (functions and int/float/bool) and math functions that are
 * pure on Python scalars. */
static int
is_pure_builtin(PyObject *fn)
{
    static const char *const pure[] = {"abs", "min", "max", "round", "len",
                                       "pow", NULL};
    if (fn == (PyObject *)&PyLong_Type || fn == (PyObject *)&PyFloat_Type
        || fn == (PyObject *)&PyBool_Type) {
        return 1;
    }
    if (!PyCFunction_Check(fn)) {
        return 0;
    }
    const char *name = ((PyCFunctionObject *)fn)->m_ml->ml_name;
    PyObject *mod = ((PyCFunctionObject *)fn)->m_module;
    if (mod != NULL && PyUnicode_Check(mod)
        && PyUnicode_CompareWithASCIIString(mod, "math") == 0) {
        return 1;   /* math.sqrt(head_dim), math.log(2): pure on numbers */
    }
    if (mod == NULL || !PyUnicode_Check(mod)
        || PyUnicode_CompareWithASCIIString(mod, "builtins") != 0) {
        return 0;
    }
    int ok = 0;
    for (int i = 0; pure[i]; i++) {
        ok |= strcmp(pure[i], name) == 0;
    }
    return ok;
}

/* Builtins that are pure on Python scalars: fold them. */
static int
fold_builtin_call(tracer *T, PyObject *fn, tc_var **args, int n,
                  PyObject *kwnames)
{
    if (!is_pure_builtin(fn) || kwnames != NULL || n > 4) {
        return UNSUPPORTED;
    }
    const char *name = PyType_Check(fn) ? ((PyTypeObject *)fn)->tp_name
                                        : ((PyCFunctionObject *)fn)->m_ml->ml_name;
    if (reify_all(T, args, n) != OK) {
        return ERROR;
    }
    if (!all_const(args, n)) {
        return UNSUPPORTED;
    }
    PyObject *argv[4];
    for (int i = 0; i < n; i++) {
        argv[i] = args[i]->obj;
    }
    PyObject *r = PyObject_Vectorcall(fn, argv, n, NULL);
    if (r == NULL) {
        return unsupported_from_exception(T, name);
    }
    tc_var *v = tc_var_const(&T->sh->arena, r, -1);
    Py_DECREF(r);
    return push(T, v);
}

static PyObject *
callable_name(PyObject *fn)
{
    PyObject *name = PyObject_GetAttrString(fn, "__qualname__");
    if (name == NULL) {
        PyErr_Clear();
        name = PyObject_Repr(fn);
    }
    return name;
}

static int run(tracer *T);
static void tracer_fini(tracer *T);

#define MAX_INLINE_DEPTH 8

/* Bind a call's arguments to the callee's parameters (positional,
 * keyword, defaults, *args, **kwargs).  fn is NULL for a lambda made in
 * the traced code (no defaults).  Returns OK or UNSUPPORTED. */
static int
bind_arguments(tracer *T, PyFunctionObject *fn, PyCodeObject *co,
               tc_var **args, int nargs, PyObject *kwnames, tc_var **locals)
{
    int nparams = co->co_argcount + co->co_kwonlyargcount;
    int has_varargs = (co->co_flags & CO_VARARGS) != 0;
    int has_varkw = (co->co_flags & CO_VARKEYWORDS) != 0;
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, npos = nargs - nkw;
    int nextra = npos > co->co_argcount ? npos - co->co_argcount : 0;
    if (nextra > 0 && !has_varargs) {
        return unsupported(T, "too many positional arguments");
    }
    for (int i = 0; i < npos - nextra; i++) {
        locals[i] = args[i];
    }
    if (has_varargs) {
        locals[nparams] = tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, nextra,
                                     args + co->co_argcount);
        if (locals[nparams] == NULL) {
            return ERROR;
        }
    }
    PyObject *extra_keys = has_varkw ? PyList_New(0) : NULL;
    tc_var *extra_vals[TC_MAX_CALL_ARGS];
    int nextra_kw = 0, rc = OK;
    if (has_varkw && extra_keys == NULL) {
        return ERROR;
    }
    for (int k = 0; rc == OK && k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        int found = -1;
        for (int i = co->co_posonlyargcount; i < nparams; i++) {
            if (PyUnicode_Compare(PyTuple_GET_ITEM(co->co_localsplusnames, i),
                                  name) == 0) {
                found = i;
            }
        }
        if (found < 0 && has_varkw) {
            rc = PyList_Append(extra_keys, name) < 0 ? ERROR : OK;
            extra_vals[nextra_kw++] = args[npos + k];
        }
        else if (found < 0 || locals[found] != NULL) {
            rc = unsupported(T, "keyword argument '%U'", name);
        }
        else {
            locals[found] = args[npos + k];
        }
    }
    if (rc == OK && has_varkw) {
        int slot = nparams + has_varargs;
        PyObject *keys = PyList_AsTuple(extra_keys);
        locals[slot] = keys ? tc_var_seq(&T->sh->arena, TC_VAR_DICT,
                                         nextra_kw, extra_vals) : NULL;
        if (locals[slot] != NULL) {
            locals[slot]->obj = Py_NewRef(keys);
        }
        Py_XDECREF(keys);
        rc = locals[slot] ? OK : ERROR;
    }
    Py_XDECREF(extra_keys);
    if (rc != OK) {
        return rc;
    }
    PyObject *defs = fn ? fn->func_defaults : NULL;
    PyObject *kwdefs = fn ? fn->func_kwdefaults : NULL;
    Py_ssize_t ndefs = defs ? PyTuple_GET_SIZE(defs) : 0;
    for (int i = 0; i < nparams; i++) {
        if (locals[i] != NULL) {
            continue;
        }
        PyObject *d = NULL;
        if (i < co->co_argcount && i >= co->co_argcount - ndefs) {
            d = PyTuple_GET_ITEM(defs, i - (co->co_argcount - ndefs));
        }
        else if (i >= co->co_argcount && kwdefs != NULL) {
            d = PyDict_GetItemWithError(
                kwdefs, PyTuple_GET_ITEM(co->co_localsplusnames, i));
        }
        if (d == NULL) {
            return PyErr_Occurred() ? ERROR
                 : unsupported(T, "missing argument '%U'",
                               PyTuple_GET_ITEM(co->co_localsplusnames, i));
        }
        if ((locals[i] = const_var(T, d)) == NULL) {
            return ERROR;
        }
    }
    return OK;
}

/* A callee reads its own module's globals: the caller's, or (a function
 * of another module) fn.__globals__ through the function's source. */
static int
tracer_init_inline(tracer *C, tracer *T, PyCodeObject *co,
                   PyFunctionObject *fn, int fn_source)
{
    memset(C, 0, sizeof(*C));
    C->sh = T->sh;
    C->out = T->out;
    C->frame = T->frame;
    C->co = co;
    C->fn = fn;
    C->fn_source = fn_source;
    C->depth = T->depth + 1;
    C->grad_mode = T->grad_mode;
    C->nlocals = co->co_nlocalsplus;
    if (fn == NULL || fn->func_globals == T->globals) {
        C->globals = T->globals;
        C->builtins = T->builtins;
        C->globals_source = T->globals_source;
        C->global_vars = Py_NewRef(T->global_vars);
    }
    else {
        C->globals = fn->func_globals;
        C->builtins = fn->func_builtins;
        C->globals_source = fn->func_globals == T->frame->f_globals
                            ? -1 : fn_source;
        C->global_vars = PyDict_New();
    }
    C->code_bytes = PyCode_GetCode(co);
    C->stack_cap = co->co_stacksize + STACK_SLACK;
    C->locals = PyMem_Calloc(C->nlocals + 1, sizeof(tc_var *));
    C->written = PyMem_Calloc(C->nlocals + 1, 1);
    C->stack = PyMem_Calloc(C->stack_cap, sizeof(tc_var *));
    C->saved_stack = PyMem_Calloc(C->stack_cap, sizeof(tc_var *));
    if (!C->global_vars || !C->code_bytes || !C->locals || !C->written
        || !C->stack || !C->saved_stack) {
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        return ERROR;
    }
    C->code = (const tc_codeunit *)PyBytes_AS_STRING(C->code_bytes);
    C->ncode = (int)(PyBytes_GET_SIZE(C->code_bytes) / 2);
    return OK;
}

/* Calls of Python functions are traced into the caller's graph: functions
 * read from the frame (guarded by identity, so their code, defaults,
 * globals and closure cells are those traced), and lambdas made by the
 * traced code itself (callable is DEFERRED).  If the callee cannot be
 * traced whole, the call is a STEP of the caller (the callee then
 * compiles on its own when it runs). */
static int
inline_call(tracer *T, tc_var *callable, tc_var **args, int nargs,
            PyObject *kwnames)
{
    PyFunctionObject *fn = NULL;
    PyCodeObject *co;
    if (callable->kind == TC_VAR_DEFERRED) {
        co = (PyCodeObject *)callable->obj;
    }
    else {
        fn = (PyFunctionObject *)callable->obj;
        co = (PyCodeObject *)fn->func_code;
    }
    const int unsupported_flags = CO_GENERATOR | CO_COROUTINE
        | CO_ASYNC_GENERATOR;
    if (T->depth >= MAX_INLINE_DEPTH) {
        return unsupported(T, "call to %U: calls nested deeper than %d are "
                           "not inlined", co->co_qualname, MAX_INLINE_DEPTH);
    }
    if ((co->co_flags & unsupported_flags)) {
        return unsupported(T, "call to %U (not inlined: generators are not "
                           "inlined)", co->co_qualname);
    }
    /* the code, defaults, globals and cells traced are those of this very
     * function; a function without a source is a method found on a type
     * that a TYPE guard already pins (nn.Module.forward) */
    if (fn != NULL && callable->source >= 0
        && tc_guard_id(T->out->guards, callable->source, callable->obj) < 0) {
        return ERROR;
    }
    int fn_source = callable->source;
    if (fn != NULL && fn_source < 0) {
        fn_source = tc_source_add(T->out->guards, TC_SRC_CONST, -1, 0,
                                  (PyObject *)fn);
        if (fn_source < 0) {
            return ERROR;
        }
    }
    tracer C;
    int rc = tracer_init_inline(&C, T, co, fn, fn_source);
    if (rc == OK) {
        rc = bind_arguments(&C, fn, co, args, nargs, kwnames, C.locals);
    }
    if (rc == OK) {
        rc = run(&C);
    }
    tc_var *result = C.inline_result;
    tracer_fini(&C);
    if (rc == DONE && result != NULL) {
        return push(T, result);
    }
    if (rc == UNSUPPORTED) {
        PyObject *why = Py_NewRef(T->out->reason);
        int line = T->out->reason_line;
        rc = unsupported(T, "call to %U (not inlined: %U at %U:%d)",
                         co->co_qualname, why, co->co_filename, line);
        Py_DECREF(why);
    }
    return rc == DONE ? unsupported(T, "inlining failed") : rc;
}

/* ---- nn.Module ------------------------------------------------------------ */

/* A function var for a method found on a module's (type-guarded) class. */
static tc_var *
class_function(tracer *T, PyObject *fn)
{
    tc_var *v = tc_var_new(&T->sh->arena, TC_VAR_OBJECT, -1);
    if (v != NULL) {
        v->obj = Py_NewRef(fn);
    }
    return v;
}

/* mod.name: a parameter, buffer or submodule (a source of its own, read
 * again on every call), a Python value (specialized if used), or a method
 * of the module's class. */
static int
nn_module_attr(tracer *T, tc_var *mod, PyObject *name, int method)
{
    PyObject *descr = _PyType_Lookup(Py_TYPE(mod->obj), name);
    if (method && descr != NULL && PyFunction_Check(descr)) {
        tc_var *f = class_function(T, descr);
        return f == NULL || push(T, f) < 0 ? ERROR : push(T, mod);
    }
    PyObject *value = tc_nn_getattr(mod->obj, name);
    if (value == NULL) {
        return unsupported_from_exception(T, "module attribute");
    }
    int rc = OK;
    int src = tc_source_add(T->out->guards, TC_SRC_ATTR, mod->source, 0, name);
    tc_var *v = src < 0 ? NULL : wrap_value(T, value, src, &rc);
    Py_DECREF(value);
    if (v == NULL) {
        return src < 0 ? ERROR : rc;
    }
    if (method && push(T, tc_var_new(&T->sh->arena, TC_VAR_NULL, -1)) < 0) {
        return ERROR;
    }
    return push(T, v);
}

/* The var of attribute `name` of module var mod (see nn_module_attr). */
static tc_var *
nn_attr_var(tracer *T, tc_var *mod, const char *name, int *rc)
{
    PyObject *key = PyUnicode_InternFromString(name);
    *rc = key ? nn_module_attr(T, mod, key, 0) : ERROR;
    Py_XDECREF(key);
    return *rc == OK ? pop(T) : NULL;
}

/* Call binding `path` with the input and attributes of mod, as the module's
 * forward does: attrs[i] names an attribute, or is NULL for the input. */
static int
nn_call_functional(tracer *T, const char *path, tc_var *mod, tc_var *input,
                   const char *const *attrs, int n, PyObject *kwnames)
{
    const tc_binding *b = tc_binding_by_path(path);
    tc_var *args[TC_MAX_PARAMS];
    int rc = OK;
    if (b == NULL) {
        return unsupported(T, "%s is not available in this torch", path);
    }
    for (int i = 0; i < n; i++) {
        args[i] = attrs[i] ? nn_attr_var(T, mod, attrs[i], &rc) : input;
        if (args[i] == NULL) {
            return rc;
        }
    }
    return call_binding(T, b, args, n, kwnames);
}

static int call_nn_module(tracer *T, tc_var *mod, tc_var **args, int nargs,
                          PyObject *kwnames);

/* nn.Sequential: each submodule in order, unrolled (the count is
 * guarded). */
static int
call_sequential(tracer *T, tc_var *mod, tc_var *x)
{
    PyObject *subs = PyObject_GetAttrString(mod->obj, "_modules");
    if (subs == NULL || !PyDict_Check(subs)) {
        Py_XDECREF(subs);
        return unsupported_from_exception(T, "Sequential._modules");
    }
    if (tc_guard_length(T->out->guards, mod->source, mod->obj) < 0) {
        Py_DECREF(subs);
        return ERROR;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    int rc = OK;
    while (rc == OK && PyDict_Next(subs, &pos, &key, &value)) {
        rc = nn_module_attr(T, mod, key, 0);
        tc_var *sub = rc == OK ? pop(T) : NULL;
        if (sub != NULL && sub->kind != TC_VAR_NN_MODULE) {
            rc = unsupported(T, "Sequential item %R is not a module", key);
        }
        rc = rc == OK ? call_nn_module(T, sub, &x, 1, NULL) : rc;
        x = rc == OK ? pop(T) : NULL;
    }
    Py_DECREF(subs);
    return rc == OK ? push(T, x) : rc;
}

/* nn.Linear, nn.LayerNorm, ...: their forward is one functional call on
 * attributes, which bindings.c already traces; spelled out here so that
 * torch's own modules need no cross-module inlining. */
static int
call_torch_module(tracer *T, tc_var *mod, tc_var *x, int *handled)
{
    static const struct {
        const char *type, *path;
        int n;
        const char *attrs[8];
    } table[] = {
        {"Linear", "F.linear", 3, {NULL, "weight", "bias"}},
        {"LayerNorm", "F.layer_norm", 5,
         {NULL, "normalized_shape", "weight", "bias", "eps"}},
        {"RMSNorm", "F.rms_norm", 4,
         {NULL, "normalized_shape", "weight", "eps"}},
        {"Embedding", "F.embedding", 4,
         {NULL, "weight", "padding_idx", "max_norm"}},
        {"Dropout", "F.dropout", 4, {NULL, "p", "training", "inplace"}},
        {"ReLU", "F.relu", 2, {NULL, "inplace"}},
        {"SiLU", "F.silu", 2, {NULL, "inplace"}},
        {"Tanh", "torch.tanh", 1, {NULL}},
        {"Sigmoid", "torch.sigmoid", 1, {NULL}},
        {"Softmax", "F.softmax", 2, {NULL, "dim"}},
        {"LogSoftmax", "F.log_softmax", 2, {NULL, "dim"}},
        {"Conv1d", "F.conv1d", 7,
         {NULL, "weight", "bias", "stride", "padding", "dilation", "groups"}},
        {"Conv2d", "F.conv2d", 7,
         {NULL, "weight", "bias", "stride", "padding", "dilation", "groups"}},
        {"GroupNorm", "F.group_norm", 5,
         {NULL, "num_groups", "weight", "bias", "eps"}},
    };
    PyTypeObject *tp = Py_TYPE(mod->obj);
    PyObject *owner = PyDict_GetItemString(tp->tp_dict, "__module__");
    const char *where = owner && PyUnicode_Check(owner)
                        ? PyUnicode_AsUTF8(owner) : NULL;
    *handled = 0;
    if (where == NULL || strncmp(where, "torch.nn.modules.", 17) != 0) {
        PyErr_Clear();
        return OK;  /* a subclass of Linear may override forward */
    }
    const char *name = tp->tp_name;
    *handled = 1;
    if (strcmp(name, "Identity") == 0) {
        return push(T, x);
    }
    if (strcmp(name, "Sequential") == 0) {
        return call_sequential(T, mod, x);
    }
    if (strcmp(name, "GELU") == 0) {
        int rc;
        tc_var *args[2] = {x, nn_attr_var(T, mod, "approximate", &rc)};
        PyObject *kw = Py_BuildValue("(s)", "approximate");
        rc = args[1] && kw ? call_binding(T, tc_binding_by_path("F.gelu"),
                                          args, 2, kw)
                           : (args[1] ? ERROR : rc);
        Py_XDECREF(kw);
        return rc;
    }
    if (strncmp(name, "Conv", 4) == 0) {
        int rc;
        tc_var *mode = nn_attr_var(T, mod, "padding_mode", &rc);
        if (mode == NULL || reify(T, mode) != OK) {
            return mode == NULL ? rc : ERROR;
        }
        if (mode->kind != TC_VAR_CONST || !PyUnicode_Check(mode->obj)
            || PyUnicode_CompareWithASCIIString(mode->obj, "zeros") != 0) {
            return unsupported(T, "%s with padding_mode other than 'zeros'",
                               name);
        }
    }
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (strcmp(name, table[i].type) == 0) {
            return nn_call_functional(T, table[i].path, mod, x,
                                      table[i].attrs, table[i].n, NULL);
        }
    }
    *handled = 0;
    return OK;
}

/* Without hooks, Module.__call__ is m.forward(*args): torch's own modules
 * map onto functional calls, other modules inline type(m).forward with
 * self = m (a module with its own instance "forward" is left to Python). */
static int
call_nn_module(tracer *T, tc_var *mod, tc_var **args, int nargs,
               PyObject *kwnames)
{
    static PyObject *str_forward;
    PyObject *m = mod->obj;
    int hooks = tc_nn_has_hooks(m);
    if (hooks != 0) {
        return hooks < 0 ? ERROR
             : unsupported(T, "call of %s, a module with hooks (the hooks "
                           "run in Python)", Py_TYPE(m)->tp_name);
    }
    if (tc_guard_no_hooks(T->out->guards, mod->source) < 0) {
        return ERROR;
    }
    if (str_forward == NULL
        && (str_forward = PyUnicode_InternFromString("forward")) == NULL) {
        return ERROR;
    }
    if (nargs == 1 && kwnames == NULL) {
        int handled, rc = call_torch_module(T, mod, args[0], &handled);
        if (handled || rc != OK) {
            return rc;
        }
    }
    PyObject *forward = _PyType_Lookup(Py_TYPE(m), str_forward);
    PyObject *dict = PyObject_GenericGetDict(m, NULL);
    PyObject *own = dict ? PyDict_GetItemWithError(dict, str_forward) : NULL;
    Py_XDECREF(dict);
    if (PyErr_Occurred()) {
        return ERROR;
    }
    if (forward == NULL || !PyFunction_Check(forward) || own != NULL
        || nargs + 1 > 16) {
        return unsupported(T, "call of module %s (its forward is not a plain "
                           "method)", Py_TYPE(m)->tp_name);
    }
    tc_var *f = class_function(T, forward), *full[17];
    if (f == NULL) {
        return ERROR;
    }
    full[0] = mod;
    memcpy(full + 1, args, sizeof(tc_var *) * nargs);
    return inline_call(T, f, full, nargs + 1, kwnames);
}

/* ---- Python semantics: loops, grad-mode contexts, dicts, builtins ------- */

/* Callables the tracer gives their Python meaning instead of tracing
 * into them; looked up once. */
static struct {
    PyObject *iter, *enumerate, *zip, *reversed, *range, *len, *isinstance,
        *getattr, *hasattr, *partial, *no_grad, *enable_grad,
        *inference_mode, *set_grad_enabled;
} K;

static int
known_init(void)
{
    static const struct {
        const char *module, *name;
        PyObject **slot;
    } table[] = {
        {"builtins", "iter", &K.iter},
        {"builtins", "enumerate", &K.enumerate},
        {"builtins", "zip", &K.zip},
        {"builtins", "reversed", &K.reversed},
        {"builtins", "range", &K.range},
        {"builtins", "len", &K.len},
        {"builtins", "isinstance", &K.isinstance},
        {"builtins", "getattr", &K.getattr},
        {"builtins", "hasattr", &K.hasattr},
        {"functools", "partial", &K.partial},
        {"torch", "no_grad", &K.no_grad},
        {"torch", "enable_grad", &K.enable_grad},
        {"torch", "inference_mode", &K.inference_mode},
        {"torch", "set_grad_enabled", &K.set_grad_enabled},
    };
    if (K.set_grad_enabled != NULL) {
        return OK;
    }
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        PyObject *mod = PyImport_ImportModule(table[i].module);
        PyObject *v = mod ? PyObject_GetAttrString(mod, table[i].name) : NULL;
        Py_XDECREF(mod);
        if (v == NULL) {
            return ERROR;
        }
        Py_XSETREF(*table[i].slot, v);  /* kept for the process */
    }
    return OK;
}

static int op_call(tracer *T, int argc);
static int op_load_attr(tracer *T, PyObject *name, int method);
static int push_folded(tracer *T, PyObject *r, const char *what);

/* A callable read from the frame whose meaning the tracer relies on. */
static int
guard_callable(tracer *T, tc_var *callable)
{
    if (callable->kind == TC_VAR_UNKNOWN && callable->source >= 0) {
        return tc_guard_id(T->out->guards, callable->source, callable->obj);
    }
    return OK;
}

/* Call callable(*args) with keywords kwnames (a tuple some arena var
 * owns) through the ordinary CALL path. */
static int
call_with_args(tracer *T, tc_var *callable, tc_var **args, int n,
               PyObject *kwnames)
{
    if (push(T, tc_var_new(&T->sh->arena, TC_VAR_NULL, -1)) != OK
        || push(T, callable) != OK) {
        return PyErr_Occurred() ? ERROR : UNSUPPORTED;
    }
    for (int i = 0; i < n; i++) {
        if (push(T, args[i]) != OK) {
            return UNSUPPORTED;
        }
    }
    T->kwnames = kwnames;
    return op_call(T, n);
}

static tc_var *
new_const(tracer *T, PyObject *value)
{
    if (value == NULL) {
        return NULL;
    }
    tc_var *v = tc_var_const(&T->sh->arena, value, -1);
    Py_DECREF(value);
    return v;
}

static int
push_const(tracer *T, PyObject *value)
{
    return value == NULL ? ERROR : push(T, new_const(T, value));
}

/* ---- sequences known item by item, and iterators of unrolled loops ----
 *
 * An iterator is a DEFERRED var: obj is the builtin that makes it (iter,
 * enumerate, zip, reversed), items its arguments, index how many items it
 * has yielded.  FOR_ITER computes the next item from the arguments, so a
 * loop over a range, a tuple or a list (of tensors: graph inputs with
 * ITEM sources, length guarded) is unrolled into the graph.  If the
 * segment ends inside the loop, the exit template makes the iterator
 * afresh and advances it as far (TC_TMPL_ITER). */

static int
is_iterator(tc_var *v)
{
    return v->kind == TC_VAR_DEFERRED && v->node == TC_TMPL_ITER;
}

static Py_ssize_t iter_length(tracer *T, tc_var *it, int *rc);
static tc_var *iter_item(tracer *T, tc_var *it, Py_ssize_t k);

/* How many items a tuple, list, range, string or unrolled iterator still
 * yields; -1 if v is none of them (*rc says whether that is an error). */
static Py_ssize_t
seq_length(tracer *T, tc_var *v, int *rc)
{
    *rc = reify(T, v);
    if (*rc != OK) {
        return -1;
    }
    v = structseq_items(v) ? structseq_items(v) : v;
    if (v->kind == TC_VAR_TUPLE || v->kind == TC_VAR_LIST) {
        return v->nitems;
    }
    if (is_iterator(v)) {
        Py_ssize_t n = iter_length(T, v, rc);
        return n < 0 ? n : n - v->index;
    }
    if (v->kind == TC_VAR_CONST && (PyRange_Check(v->obj)
                                    || PyUnicode_CheckExact(v->obj))) {
        Py_ssize_t n = PyObject_Length(v->obj);
        *rc = n < 0 ? ERROR : OK;
        return n;
    }
    return -1;
}

/* Item k of what seq_length measured. */
static tc_var *
seq_item(tracer *T, tc_var *v, Py_ssize_t k)
{
    v = structseq_items(v) ? structseq_items(v) : v;
    if (v->kind == TC_VAR_TUPLE || v->kind == TC_VAR_LIST) {
        return v->items[k];
    }
    if (is_iterator(v)) {
        return iter_item(T, v, v->index + k);
    }
    return new_const(T, PySequence_GetItem(v->obj, k));
}

static tc_var *
make_iter(tracer *T, PyObject *factory, tc_var **args, int n)
{
    tc_var *it = tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED, n, args);
    if (it != NULL) {
        it->node = TC_TMPL_ITER;
        it->obj = Py_NewRef(factory);
    }
    return it;
}

/* Iterators are mutable objects but vars are values: an iterator is only
 * advanced in place when nothing else (a local, the stack below it, a
 * container on it) can see it. */
static int
is_aliased(tracer *T, tc_var *v)
{
    for (int i = 0; i < T->nlocals; i++) {
        if (T->locals[i] == v) {
            return 1;
        }
    }
    for (int i = 0; i < T->sp - 1; i++) {
        tc_var *s = T->stack[i];
        if (s == v) {
            return 1;
        }
        for (int j = 0; j < s->nitems; j++) {
            if (s->items[j] == v) {
                return 1;
            }
        }
    }
    return 0;
}

/* iter(), reversed(), enumerate(), zip() of known sequences (reversed
 * needs a sequence, the others also take an unrolled iterator). */
static tc_var *nn_container_items(tracer *T, tc_var *mod, int *rc);

static int
call_iter_builtin(tracer *T, PyObject *fn, tc_var **args, int nargs)
{
    int nseq = fn == K.zip ? nargs : 1, rc;
    if (nargs < 1 || nargs > 16 || (fn != K.zip && fn != K.enumerate
                                    && nargs != 1)
        || (fn == K.enumerate && nargs > 2)) {
        return NOT_HANDLED;
    }
    for (int i = 0; i < nseq; i++) {
        if (args[i]->kind == TC_VAR_NN_MODULE) {
            tc_var *items = nn_container_items(T, args[i], &rc);
            if (items == NULL) {
                return rc != OK ? rc : NOT_HANDLED;
            }
            args[i] = items;
        }
        if ((is_iterator(args[i])
             && (fn == K.reversed || is_aliased(T, args[i])))
            || seq_length(T, args[i], &rc) < 0) {
            return rc != OK ? rc : NOT_HANDLED;
        }
    }
    if (fn == K.iter && is_iterator(args[0])) {
        return push(T, args[0]);  /* iter(it) is it */
    }
    if (fn == K.enumerate && nargs == 2
        && (reify(T, args[1]) != OK || args[1]->kind != TC_VAR_CONST
            || !PyLong_CheckExact(args[1]->obj))) {
        return PyErr_Occurred() ? ERROR : NOT_HANDLED;
    }
    return push(T, make_iter(T, fn, args, nargs));
}

/* How many items an unrolled iterator yields from its start. */
static Py_ssize_t
iter_length(tracer *T, tc_var *it, int *rc)
{
    Py_ssize_t n = PY_SSIZE_T_MAX;
    int nseq = it->obj == K.zip ? it->nitems : 1;
    for (int i = 0; i < nseq; i++) {
        Py_ssize_t len = seq_length(T, it->items[i], rc);
        if (len < 0) {
            return -1;
        }
        n = len < n ? len : n;
    }
    return n;
}

/* Item k (counted from the iterator's start) of an unrolled iterator. */
static tc_var *
iter_item(tracer *T, tc_var *it, Py_ssize_t k)
{
    tc_var *parts[16];
    int nparts = it->obj == K.zip ? it->nitems : 1;
    if (it->obj == K.iter) {
        return seq_item(T, it->items[0], k);
    }
    if (it->obj == K.reversed) {
        int rc;
        Py_ssize_t n = seq_length(T, it->items[0], &rc);
        return n < 0 ? NULL : seq_item(T, it->items[0], n - 1 - k);
    }
    if (it->obj == K.enumerate) {
        long long start = it->nitems > 1
            ? PyLong_AsLongLong(it->items[1]->obj) : 0;
        if (start == -1 && PyErr_Occurred()) {
            return NULL;
        }
        parts[0] = new_const(T, PyLong_FromLongLong(start + k));
        parts[1] = seq_item(T, it->items[0], k);
        nparts = 2;
    }
    else {
        for (int i = 0; i < nparts; i++) {
            parts[i] = seq_item(T, it->items[i], k);
        }
    }
    for (int i = 0; i < nparts; i++) {
        if (parts[i] == NULL) {
            return NULL;
        }
    }
    return tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, nparts, parts);
}

/* for m in self.layers: Sequential and ModuleList yield their submodules,
 * ModuleDict its keys, in _modules order.  The container becomes a tuple
 * var (its length guarded; each submodule a source of its own). */
static tc_var *
nn_container_items(tracer *T, tc_var *mod, int *rc)
{
    const char *name = Py_TYPE(mod->obj)->tp_name;
    int keys = strcmp(name, "ModuleDict") == 0;
    tc_var *items[64];
    *rc = OK;
    if (!keys && strcmp(name, "ModuleList") && strcmp(name, "Sequential")) {
        return NULL;
    }
    PyObject *subs = PyObject_GetAttrString(mod->obj, "_modules");
    if (subs == NULL || !PyDict_Check(subs) || PyDict_GET_SIZE(subs) > 64
        || tc_guard_length(T->out->guards, mod->source, mod->obj) < 0) {
        Py_XDECREF(subs);
        *rc = PyErr_Occurred() ? ERROR : unsupported(T, "a module container "
                                                     "of more than 64 items");
        return NULL;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    int n = 0;
    while (*rc == OK && PyDict_Next(subs, &pos, &key, &value)) {
        if (keys) {
            items[n] = tc_var_const(&T->sh->arena, key, -1);
            *rc = items[n++] ? OK : ERROR;
            continue;
        }
        *rc = nn_module_attr(T, mod, key, 0);
        if (*rc == OK) {
            items[n++] = pop(T);
        }
    }
    Py_DECREF(subs);
    return *rc == OK ? tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, n, items)
                     : NULL;
}

static int
op_get_iter(tracer *T)
{
    tc_var *v = peek(T, 1);
    int rc;
    if (v == NULL) {
        return unsupported(T, "malformed stack");
    }
    if (v->kind == TC_VAR_NN_MODULE) {
        tc_var *items = nn_container_items(T, v, &rc);
        if (items == NULL) {
            return rc != OK ? rc : unsupported(T, "a loop over module %s",
                                               Py_TYPE(v->obj)->tp_name);
        }
        T->stack[T->sp - 1] = v = items;
    }
    if (is_iterator(v)) {
        return is_aliased(T, v)
            ? unsupported(T, "a loop over an iterator that is also stored "
                          "elsewhere")
            : OK;  /* iter(it) is it */
    }
    if (seq_length(T, v, &rc) < 0) {
        return rc != OK ? rc
             : unsupported(T, "a loop over a %s (only ranges, tuples, lists "
                           "and their enumerate/zip/reversed are unrolled)",
                           tc_var_kind_name(v));
    }
    pop(T);
    return push(T, make_iter(T, K.iter, &v, 1));
}

static int
op_for_iter(tracer *T, int oparg, int *next)
{
    tc_var *it = peek(T, 1), *item = NULL;
    int rc;
    if (it == NULL || !is_iterator(it)) {
        return unsupported(T, "a for loop over an unknown iterator");
    }
    Py_ssize_t n = iter_length(T, it, &rc);
    if (n < 0) {
        return rc != OK ? rc : unsupported(T, "malformed iterator");
    }
    if (it->index >= n) {
        pop(T);
        *next = pyframe_for_iter_exit(oparg, *next);
        return OK;
    }
    if ((item = iter_item(T, it, it->index)) == NULL) {
        return ERROR;
    }
    tc_var *advanced = make_iter(T, it->obj, it->items, it->nitems);
    if (advanced == NULL) {
        return ERROR;
    }
    advanced->index = it->index + 1;
    T->stack[T->sp - 1] = advanced;
    return push(T, item);
}

/* ---- grad-mode context managers ----
 *
 * `with torch.no_grad():` (enable_grad, inference_mode, set_grad_enabled)
 * changes T->grad_mode for the ops traced inside.  The context manager is
 * a DEFERRED var (TC_TMPL_CALL: made by calling obj(*items); index = the
 * mode it sets); BEFORE_WITH leaves on the stack a DEFERRED exit
 * (TC_TMPL_ENTER; index = the mode to restore), which the normal exit
 * sequence calls.  A segment that ends inside the block materializes the
 * context manager, enters it for real and leaves its __exit__ where
 * CPython expects it, so the rest of the block, its exception path
 * (WITH_EXCEPT_START) and the exit run in Python exactly as eager. */

static int
next_opcode(tracer *T)
{
    int pc = T->pc;
    while ((T->code[pc] & 0xff) == EXTENDED_ARG) {
        pc++;
    }
    pc += 1 + tc_inline_caches[T->code[pc] & 0xff];
    while (pc < T->ncode && (T->code[pc] & 0xff) == EXTENDED_ARG) {
        pc++;
    }
    return pc < T->ncode ? T->code[pc] & 0xff : -1;
}

static int
const_truth(tracer *T, tc_var *v)
{
    if (reify(T, v) != OK) {
        return ERROR;
    }
    return v->kind == TC_VAR_CONST && PyBool_Check(v->obj)
           ? v->obj == Py_True : -1;
}

static int
is_grad_ctx_object(PyObject *obj)
{
    PyObject *tp = (PyObject *)Py_TYPE(obj);
    return tp == K.no_grad || tp == K.enable_grad || tp == K.inference_mode
           || tp == K.set_grad_enabled;
}

/* The grad mode a call makes a context manager for (0/1), -1 if fn is
 * not one of them, or UNSUPPORTED/ERROR. */
static int
grad_ctx_mode(tracer *T, PyObject *fn, tc_var **args, int nargs,
              PyObject *kwnames)
{
    PyObject *inst = NULL;
    if (PyMethod_Check(fn) && nargs == 0) {
        /* the factory of a @torch.no_grad()-style decorator: the bound
         * clone() of such an object */
        PyObject *name = PyObject_GetAttrString(PyMethod_GET_FUNCTION(fn),
                                                "__name__");
        int is_clone = name && PyUnicode_Check(name)
                       && PyUnicode_CompareWithASCIIString(name, "clone") == 0;
        Py_XDECREF(name);
        PyErr_Clear();
        if (!is_clone) {
            return -1;
        }
        inst = PyMethod_GET_SELF(fn);
        if (!is_grad_ctx_object(inst)) {
            return -1;
        }
        fn = (PyObject *)Py_TYPE(inst);
    }
    if (fn != K.no_grad && fn != K.enable_grad && fn != K.inference_mode
        && fn != K.set_grad_enabled) {
        return -1;
    }
    if (kwnames != NULL) {
        return unsupported(T, "%s() with keyword arguments",
                           ((PyTypeObject *)fn)->tp_name);
    }
    if (fn == K.no_grad || fn == K.enable_grad) {
        return nargs == 0 ? fn == K.enable_grad
                          : unsupported(T, "grad mode context with arguments");
    }
    int mode = -1;
    if (inst != NULL) {
        PyObject *m = PyObject_GetAttrString(inst, "mode");
        mode = m == Py_True ? 1 : m == Py_False ? 0 : -1;
        Py_XDECREF(m);
        PyErr_Clear();
    }
    else if (nargs == 1) {
        mode = const_truth(T, args[0]);
        if (mode == ERROR) {
            return ERROR;
        }
    }
    else if (nargs == 0 && fn == K.inference_mode) {
        mode = 1;
    }
    if (mode < 0) {
        return unsupported(T, "%s() with a non-constant mode",
                           ((PyTypeObject *)fn)->tp_name);
    }
    if (fn == K.inference_mode) {
        /* inference_mode(False) inside inference mode would turn it off:
         * not traced */
        return mode ? 0 : unsupported(T, "torch.inference_mode(False)");
    }
    if (inst == NULL && next_opcode(T) != BEFORE_WITH) {
        return unsupported(T, "torch.set_grad_enabled() outside a with "
                           "statement (changes global state)");
    }
    return mode;
}

static int
make_grad_ctx(tracer *T, tc_var *callable, tc_var **args, int nargs,
              int mode)
{
    if (guard_callable(T, callable) < 0) {
        return ERROR;
    }
    tc_var *ctx = tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED, nargs, args);
    if (ctx == NULL) {
        return ERROR;
    }
    ctx->node = TC_TMPL_CALL;  /* only grad-mode contexts are made so */
    ctx->obj = Py_NewRef(callable->obj);
    ctx->index = mode;
    return push(T, ctx);
}

static int
op_before_with(tracer *T)
{
    tc_var *ctx = peek(T, 1);
    if (ctx == NULL || ctx->kind != TC_VAR_DEFERRED
        || ctx->node != TC_TMPL_CALL) {
        return unsupported(T, "a with statement on a %s (only grad-mode "
                           "context managers are traced)",
                           ctx ? tc_var_kind_name(ctx) : "?");
    }
    tc_var *exit = tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED, 1, &ctx);
    if (exit == NULL) {
        return ERROR;
    }
    exit->node = TC_TMPL_ENTER;
    exit->index = T->grad_mode;
    pop(T);
    if (push(T, exit) != OK) {
        return ERROR;
    }
    T->grad_mode = ctx->index;
    return push_const(T, Py_NewRef(Py_None));  /* what __enter__ returns */
}

/* The normal exit of a with block: exit(None, None, None). */
static int
call_with_exit(tracer *T, tc_var *exit, int nargs)
{
    if (nargs != 3) {
        return unsupported(T, "a call of a context manager's __exit__");
    }
    T->grad_mode = exit->index;
    return push_const(T, Py_NewRef(Py_None));
}

/* ---- dicts with constant keys ---- */

static tc_var *
make_dict(tracer *T, PyObject *keys, tc_var **values)
{
    int n = (int)PyTuple_GET_SIZE(keys);
    tc_var *d = tc_var_seq(&T->sh->arena, TC_VAR_DICT, n, values);
    if (d != NULL) {
        d->obj = Py_NewRef(keys);
    }
    return d;
}

/* The keys of a dict literal must be constants and distinct (a repeated
 * key keeps its first position: not worth tracing). */
static int
check_keys(tracer *T, PyObject *keys)
{
    PyObject *set = PySet_New(keys);
    if (set == NULL) {
        return unsupported_from_exception(T, "dict keys");
    }
    int distinct = PySet_GET_SIZE(set) == PyTuple_GET_SIZE(keys);
    Py_DECREF(set);
    return distinct ? OK : unsupported(T, "a dict literal with repeated "
                                       "keys");
}

static int
op_build_map(tracer *T, int n, int const_keys)
{
    int depth = const_keys ? n + 1 : 2 * n;
    if (T->sp < depth) {
        return unsupported(T, "malformed stack");
    }
    tc_var **base = &T->stack[T->sp - depth];
    tc_var *values[TC_MAX_CALL_ARGS];
    if (n > TC_MAX_CALL_ARGS) {
        return unsupported(T, "a dict literal of %d items", n);
    }
    PyObject *keys = PyTuple_New(n);
    if (keys == NULL) {
        return ERROR;
    }
    tc_var *kv = const_keys ? base[n] : NULL;
    int rc = kv && (kv->kind != TC_VAR_TUPLE || kv->nitems != n)
             ? unsupported(T, "malformed BUILD_CONST_KEY_MAP") : OK;
    for (int i = 0; rc == OK && i < n; i++) {
        tc_var *k = const_keys ? kv->items[i] : base[2 * i];
        values[i] = const_keys ? base[i] : base[2 * i + 1];
        rc = reify(T, k);
        if (rc == OK && k->kind != TC_VAR_CONST) {
            rc = unsupported(T, "a dict with a key of type %s",
                             tc_var_kind_name(k));
        }
        if (rc == OK) {
            PyTuple_SET_ITEM(keys, i, Py_NewRef(k->obj));
        }
    }
    if (rc == OK) {
        rc = check_keys(T, keys);
    }
    if (rc == OK) {
        T->sp -= depth;
        rc = push(T, make_dict(T, keys, values));
    }
    Py_DECREF(keys);
    return rc;
}

/* DICT_MERGE (f(**a, **b): repeated keys are an error) and DICT_UPDATE
 * ({**a, **b}: later keys win). */
static int
op_dict_merge(tracer *T, int oparg, int merge)
{
    tc_var *other = peek(T, 1), *d = peek(T, oparg + 1);
    if (other == NULL || d == NULL || other->kind != TC_VAR_DICT
        || d->kind != TC_VAR_DICT) {
        return unsupported(T, "merging a dict that is not a literal or "
                           "**kwargs");
    }
    if (d->nitems + other->nitems > TC_MAX_CALL_ARGS) {
        return unsupported(T, "dict too long");
    }
    tc_var *values[TC_MAX_CALL_ARGS];
    PyObject *keys = PyList_New(0);
    if (keys == NULL) {
        return ERROR;
    }
    int n = 0, rc = OK;
    for (int i = 0; rc == OK && i < d->nitems + other->nitems; i++) {
        int mine = i < d->nitems;
        PyObject *k = PyTuple_GET_ITEM(mine ? d->obj : other->obj,
                                       mine ? i : i - d->nitems);
        tc_var *v = mine ? d->items[i] : other->items[i - d->nitems];
        int at = (int)PySequence_Index(keys, k);
        if (at < 0) {
            PyErr_Clear();
            rc = PyList_Append(keys, k) < 0 ? ERROR : OK;
            values[n++] = v;
        }
        else if (merge) {
            rc = unsupported(T, "got multiple values for keyword argument "
                             "%R", k);
        }
        else {
            values[at] = v;
        }
    }
    PyObject *kt = rc == OK ? PyList_AsTuple(keys) : NULL;
    Py_DECREF(keys);
    if (rc != OK || kt == NULL) {
        return rc != OK ? rc : ERROR;
    }
    tc_var *merged = make_dict(T, kt, values);
    Py_DECREF(kt);
    if (merged == NULL) {
        return ERROR;
    }
    pop(T);
    T->stack[T->sp - oparg] = merged;
    return OK;
}

/* d[key] and d.get(key, default) with a constant key. */
static int
dict_lookup(tracer *T, tc_var *d, tc_var *key, tc_var *dflt)
{
    if (reify(T, key) != OK) {
        return ERROR;
    }
    if (key->kind != TC_VAR_CONST) {
        return unsupported(T, "a dict subscript with a non-constant key");
    }
    for (int i = 0; i < d->nitems; i++) {
        int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(d->obj, i),
                                          key->obj, Py_EQ);
        if (eq < 0) {
            return unsupported_from_exception(T, "dict lookup");
        }
        if (eq) {
            return push(T, d->items[i]);
        }
    }
    if (dflt != NULL) {
        return push(T, dflt);
    }
    return unsupported(T, "KeyError: %R", key->obj);
}

/* f(*args, **kwargs): the call with its arguments spread out. */
static int
op_call_ex(tracer *T, int oparg)
{
    tc_var *kw = (oparg & 1) ? pop(T) : NULL, *a = pop(T), *f = pop(T);
    tc_var *null = pop(T);
    if (null == NULL || a == NULL) {
        return unsupported(T, "malformed stack");
    }
    if (reify(T, a) != OK) {
        return ERROR;
    }
    a = structseq_items(a) ? structseq_items(a) : a;  /* f(*x.max(1)) */
    if (null->kind != TC_VAR_NULL
        || (a->kind != TC_VAR_TUPLE && a->kind != TC_VAR_LIST)
        || (kw != NULL && kw->kind != TC_VAR_DICT)) {
        return unsupported(T, "a call with *args or **kwargs of unknown "
                           "length");
    }
    int n = a->nitems + (kw ? kw->nitems : 0);
    tc_var *args[TC_MAX_CALL_ARGS];
    if (n > 16) {
        return unsupported(T, "call with %d arguments", n);
    }
    memcpy(args, a->items, a->nitems * sizeof(tc_var *));
    for (int i = 0; kw && i < kw->nitems; i++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(kw->obj, i))) {
            return unsupported(T, "keywords must be strings");
        }
        args[a->nitems + i] = kw->items[i];
    }
    /* the dict var owns its keys tuple for the whole trace */
    return call_with_args(T, f, args, n,
                          kw && kw->nitems ? kw->obj : NULL);
}

static int
op_list_to_tuple(tracer *T)
{
    tc_var *l = pop(T);
    if (l == NULL || reify(T, l) != OK) {
        return l ? ERROR : unsupported(T, "malformed stack");
    }
    if (l->kind != TC_VAR_LIST && l->kind != TC_VAR_TUPLE) {
        return unsupported(T, "tuple() of a %s", tc_var_kind_name(l));
    }
    return push(T, tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, l->nitems,
                              l->items));
}

/* ---- builtins folded on what the tracer knows ---- */

/* The exact type of v's value, guarding it where it came from the frame;
 * NULL if unknown (borrowed). */
static PyObject *
known_type(tracer *T, tc_var *v)
{
    switch (v->kind) {
    case TC_VAR_TENSOR:
        /* TENSOR_MATCH guards an input's exact type (Tensor or
         * Parameter); computed tensors are Tensors */
        for (int i = 0; v->source >= 0 && i < T->out->guards->nguards; i++) {
            tc_guard *g = &T->out->guards->guards[i];
            if (g->kind == TC_GUARD_TENSOR_MATCH && g->source == v->source) {
                return g->tensor.type;
            }
        }
        return tc_tensor_type;
    case TC_VAR_TUPLE:
        return (PyObject *)&PyTuple_Type;
    case TC_VAR_LIST:
        return (PyObject *)&PyList_Type;
    case TC_VAR_DICT:
        return (PyObject *)&PyDict_Type;
    case TC_VAR_LAZY:
    case TC_VAR_UNKNOWN:
        if (v->source >= 0
            && tc_guard_type(T->out->guards, v->source, v->obj) < 0) {
            return NULL;
        }
        return (PyObject *)Py_TYPE(v->obj);
    case TC_VAR_CONST:
    case TC_VAR_OBJECT:
        return (PyObject *)Py_TYPE(v->obj);
    default:
        return NULL;
    }
}

/* The classinfo argument of isinstance: a class or a tuple of them. */
static PyObject *
classinfo_of(tracer *T, tc_var *v)
{
    if (v->kind == TC_VAR_TUPLE) {
        PyObject *t = PyTuple_New(v->nitems);
        for (int i = 0; t && i < v->nitems; i++) {
            PyObject *c = classinfo_of(T, v->items[i]);
            if (c == NULL) {
                Py_CLEAR(t);
                break;
            }
            PyTuple_SET_ITEM(t, i, c);
        }
        return t;
    }
    if ((v->kind != TC_VAR_CONST && v->kind != TC_VAR_OBJECT
         && v->kind != TC_VAR_UNKNOWN) || !PyType_Check(v->obj)) {
        return NULL;
    }
    if (guard_callable(T, v) < 0) {
        return NULL;
    }
    return Py_NewRef(v->obj);
}

static int
call_isinstance(tracer *T, tc_var **args, int nargs)
{
    if (nargs != 2) {
        return NOT_HANDLED;
    }
    PyObject *type = known_type(T, args[0]);
    PyObject *cls = type ? classinfo_of(T, args[1]) : NULL;
    if (cls == NULL) {
        return PyErr_Occurred() ? ERROR : NOT_HANDLED;
    }
    /* constants answer for themselves (__class__ may differ from type) */
    int r = args[0]->kind == TC_VAR_CONST || args[0]->kind == TC_VAR_OBJECT
        ? PyObject_IsInstance(args[0]->obj, cls)
        : PyObject_IsSubclass(type, cls);
    Py_DECREF(cls);
    if (r < 0) {
        return unsupported_from_exception(T, "isinstance");
    }
    return push_const(T, PyBool_FromLong(r));
}

/* len() of a tensor is its first size; of a sequence from the frame, its
 * guarded length (the items need not be read). */
static int
call_len(tracer *T, tc_var **args, int nargs)
{
    tc_var *x = nargs == 1 ? args[0] : NULL;
    Py_ssize_t n = -1;
    if (x == NULL) {
        return NOT_HANDLED;
    }
    if (x->kind == TC_VAR_TENSOR) {
        const tc_layout *l = &tensor_node(T, x)->layout;
        if (l->ndim == 0) {
            return unsupported(T, "len() of a 0-d tensor");
        }
        return push_const(T, PyLong_FromLongLong(l->sizes[0]));
    }
    if (x->kind == TC_VAR_LAZY
        && (PyTuple_CheckExact(x->obj) || PyList_CheckExact(x->obj))) {
        if (tc_guard_length(T->out->guards, x->source, x->obj) < 0) {
            return ERROR;
        }
        n = PyObject_Length(x->obj);
    }
    else if (x->kind == TC_VAR_TUPLE || x->kind == TC_VAR_LIST
             || x->kind == TC_VAR_DICT) {
        n = x->nitems;
    }
    else {
        return NOT_HANDLED;  /* constants fold with the other builtins */
    }
    return push_const(T, PyLong_FromSsize_t(n));
}

static PyObject *
const_str(tracer *T, tc_var *v)
{
    if (reify(T, v) != OK) {
        PyErr_Clear();
        return NULL;
    }
    return v->kind == TC_VAR_CONST && PyUnicode_CheckExact(v->obj) ? v->obj
                                                                   : NULL;
}

/* getattr(x, "name") is the attribute load x.name; with a default, a
 * missing attribute is left to eager. */
static int
call_getattr(tracer *T, tc_var **args, int nargs)
{
    PyObject *name = nargs >= 2 && nargs <= 3 ? const_str(T, args[1]) : NULL;
    if (name == NULL) {
        return NOT_HANDLED;
    }
    if (push(T, args[0]) != OK) {
        return UNSUPPORTED;
    }
    return op_load_attr(T, name, 0);
}

static int is_plain_object(PyObject *obj);

/* hasattr(x, "name"): true through the type (a method, a class attribute)
 * when the type is guarded; constants answer for themselves. */
static int
call_hasattr(tracer *T, tc_var **args, int nargs)
{
    PyObject *name = nargs == 2 ? const_str(T, args[1]) : NULL;
    tc_var *x = nargs == 2 ? args[0] : NULL;
    if (name == NULL || reify(T, x) != OK) {
        return PyErr_Occurred() ? ERROR : NOT_HANDLED;
    }
    if (x->kind == TC_VAR_CONST || x->kind == TC_VAR_OBJECT) {
        PyObject *a = PyObject_GetAttr(x->obj, name);
        if (a == NULL && !PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return unsupported_from_exception(T, "hasattr");
        }
        PyErr_Clear();
        Py_XDECREF(a);
        return push_const(T, PyBool_FromLong(a != NULL));
    }
    int plain = x->kind == TC_VAR_TENSOR
                || (x->kind == TC_VAR_UNKNOWN && x->source >= 0
                    && is_plain_object(x->obj));
    PyObject *type = plain ? known_type(T, x) : NULL;
    if (type == NULL) {
        return PyErr_Occurred() ? ERROR : NOT_HANDLED;
    }
    if (_PyType_Lookup((PyTypeObject *)type, name) == NULL) {
        return unsupported(T, "hasattr(%s, %R) (an instance attribute)",
                           ((PyTypeObject *)type)->tp_name, name);
    }
    return push_const(T, Py_NewRef(Py_True));
}

static int
call_range(tracer *T, tc_var **args, int nargs)
{
    if (nargs < 1 || nargs > 3) {
        return NOT_HANDLED;
    }
    PyObject *t = PyTuple_New(nargs);
    for (int i = 0; t && i < nargs; i++) {
        if (reify(T, args[i]) != OK) {
            Py_CLEAR(t);
            break;
        }
        if (args[i]->kind != TC_VAR_CONST) {
            Py_DECREF(t);
            return unsupported(T, "range() of a %s",
                               tc_var_kind_name(args[i]));
        }
        PyTuple_SET_ITEM(t, i, Py_NewRef(args[i]->obj));
    }
    if (t == NULL) {
        return ERROR;
    }
    PyObject *r = PyObject_Call(K.range, t, NULL);
    Py_DECREF(t);
    return push_folded(T, r, "range");
}

static int
call_builtin_semantics(tracer *T, tc_var *callable, tc_var **args,
                       int nargs, PyObject *kwnames)
{
    PyObject *fn = callable->obj;
    int rc = NOT_HANDLED;
    if (kwnames != NULL) {
        return NOT_HANDLED;
    }
    if (is_pure_builtin(fn) && nargs <= 4) {
        /* on constants, before torch's overloads of abs, min, ... */
        if (reify_all(T, args, nargs) != OK) {
            return ERROR;
        }
        if (all_const(args, nargs)) {
            rc = fold_builtin_call(T, fn, args, nargs, kwnames);
        }
    }
    if (rc != NOT_HANDLED) {
        /* folded */
    }
    else if (fn == K.iter || fn == K.reversed || fn == K.enumerate
        || fn == K.zip) {
        rc = call_iter_builtin(T, fn, args, nargs);
    }
    else if (fn == K.range) {
        rc = call_range(T, args, nargs);
    }
    else if (fn == K.len) {
        rc = call_len(T, args, nargs);
    }
    else if (fn == K.isinstance) {
        rc = call_isinstance(T, args, nargs);
    }
    else if (fn == K.getattr) {
        rc = call_getattr(T, args, nargs);
    }
    else if (fn == K.hasattr) {
        rc = call_hasattr(T, args, nargs);
    }
    if (rc != NOT_HANDLED && rc != ERROR && guard_callable(T, callable) < 0) {
        return ERROR;
    }
    return rc;
}

/* ---- plain Python objects, bound methods, functools.partial ---- */

/* An instance of a user class without __getattr__/__getattribute__:
 * reading its attributes runs no code (properties aside), so they are
 * guarded values like locals. */
static int
is_plain_object(PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
    return (tp->tp_flags & Py_TPFLAGS_HEAPTYPE)
           && tp->tp_getattro == PyObject_GenericGetAttr
           && !PyType_Check(obj) && !PyModule_Check(obj)
           && !PyObject_TypeCheck(obj, (PyTypeObject *)tc_tensor_type);
}

static int
object_attr(tracer *T, tc_var *owner, PyObject *name, int method)
{
    if (owner->kind != TC_VAR_UNKNOWN || owner->source < 0
        || !is_plain_object(owner->obj)) {
        return NOT_HANDLED;
    }
    PyTypeObject *tp = Py_TYPE(owner->obj);
    PyObject *descr = _PyType_Lookup(tp, name);
    if (descr != NULL && PyFunction_Check(descr) && method) {
        return NOT_HANDLED;  /* a method: inlined at the call */
    }
    if (descr != NULL && !PyFunction_Check(descr)
        && Py_TYPE(descr)->tp_descr_get != NULL
        && Py_TYPE(descr) != &PyMemberDescr_Type) {
        return unsupported(T, "attribute '%U' of %s is a %s (runs code)",
                           name, tp->tp_name, Py_TYPE(descr)->tp_name);
    }
    if (tc_guard_type(T->out->guards, owner->source, owner->obj) < 0) {
        return ERROR;
    }
    PyObject *value = PyObject_GetAttr(owner->obj, name);
    if (value == NULL) {
        return unsupported_from_exception(T, "attribute");
    }
    int rc, src = tc_source_add(T->out->guards, TC_SRC_ATTR, owner->source,
                                0, name);
    tc_var *v = src < 0 ? NULL : wrap_value(T, value, src, &rc);
    Py_DECREF(value);
    if (v == NULL) {
        return src < 0 ? ERROR : rc;
    }
    if (method && push(T, tc_var_new(&T->sh->arena, TC_VAR_NULL, -1)) < 0) {
        return ERROR;
    }
    return push(T, v);
}

/* Inline `func(self, *args)`, func read from source fsrc. */
static int
inline_method(tracer *T, PyObject *func, int fsrc, tc_var *self,
              tc_var **args, int nargs, PyObject *kwnames)
{
    tc_var *all[TC_MAX_CALL_ARGS];
    if (nargs + 1 > TC_MAX_CALL_ARGS) {
        return unsupported(T, "call with %d arguments", nargs);
    }
    tc_var *f = tc_var_new(&T->sh->arena, TC_VAR_UNKNOWN, fsrc);
    if (f == NULL) {
        return ERROR;
    }
    f->obj = Py_NewRef(func);
    all[0] = self;
    memcpy(all + 1, args, nargs * sizeof(tc_var *));
    return inline_call(T, f, all, nargs + 1, kwnames);
}

/* obj.method(...) on a plain object: type(obj).method inlined with
 * self = obj.  The guard is on obj.method.__func__, the function Python
 * itself would call (an instance attribute shadowing it fails it). */
static int
call_method(tracer *T, tc_var *m, tc_var **args, int nargs,
            PyObject *kwnames)
{
    tc_var *self = m->items[0];
    if (self->kind == TC_VAR_DICT
        && PyUnicode_CompareWithASCIIString(m->obj, "get") == 0
        && kwnames == NULL && (nargs == 1 || nargs == 2)) {
        return dict_lookup(T, self, args[0], nargs == 2 ? args[1] : NULL);
    }
    if (self->kind != TC_VAR_UNKNOWN || self->source < 0
        || !is_plain_object(self->obj)) {
        return NOT_HANDLED;
    }
    PyObject *bound = PyObject_GetAttr(self->obj, m->obj);
    if (bound == NULL) {
        return unsupported_from_exception(T, "method");
    }
    int rc = NOT_HANDLED;
    if (PyMethod_Check(bound) && PyMethod_GET_SELF(bound) == self->obj
        && PyFunction_Check(PyMethod_GET_FUNCTION(bound))) {
        int msrc = tc_source_add(T->out->guards, TC_SRC_ATTR, self->source,
                                 0, m->obj);
        PyObject *fname = PyUnicode_FromString("__func__");
        int fsrc = msrc < 0 || fname == NULL ? -1
            : tc_source_add(T->out->guards, TC_SRC_ATTR, msrc, 0, fname);
        Py_XDECREF(fname);
        rc = fsrc < 0 ? ERROR
           : inline_method(T, PyMethod_GET_FUNCTION(bound), fsrc, self, args,
                           nargs, kwnames);
    }
    Py_DECREF(bound);
    return rc;
}

static int
attr_source(tracer *T, int parent, const char *name)
{
    PyObject *n = PyUnicode_FromString(name);
    int src = n ? tc_source_add(T->out->guards, TC_SRC_ATTR, parent, 0, n)
                : -1;
    Py_XDECREF(n);
    return src;
}

/* A bound method read from the frame (m = obj.method; m(x)). */
static int
call_bound_method(tracer *T, tc_var *callable, tc_var **args, int nargs,
                  PyObject *kwnames)
{
    PyObject *m = callable->obj;
    if (!PyFunction_Check(PyMethod_GET_FUNCTION(m))) {
        return NOT_HANDLED;
    }
    int ssrc = attr_source(T, callable->source, "__self__");
    int fsrc = attr_source(T, callable->source, "__func__");
    int rc;
    tc_var *self = ssrc < 0 || fsrc < 0 ? NULL
        : wrap_value(T, PyMethod_GET_SELF(m), ssrc, &rc);
    if (self == NULL) {
        return ssrc < 0 || fsrc < 0 ? ERROR : rc;
    }
    return inline_method(T, PyMethod_GET_FUNCTION(m), fsrc, self, args,
                         nargs, kwnames);
}

/* functools.partial(func, *pargs, **pkw)(*args, **kw): guarded by
 * identity (its func, args and keywords are read-only), then called as
 * func(*pargs, *args, **{**pkw, **kw}). */
static int
call_partial(tracer *T, tc_var *callable, tc_var **args, int nargs,
             PyObject *kwnames)
{
    PyObject *p = callable->obj;
    PyObject *func = PyObject_GetAttrString(p, "func");
    PyObject *pargs = PyObject_GetAttrString(p, "args");
    PyObject *pkw = PyObject_GetAttrString(p, "keywords");
    tc_var *all[TC_MAX_CALL_ARGS], *f = NULL;
    PyObject *names = NULL, *keys = NULL;
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0, n = 0, rc = OK;
    if (!func || !pargs || !pkw || !PyTuple_Check(pargs)
        || !PyDict_Check(pkw)) {
        rc = PyErr_Occurred() ? ERROR : NOT_HANDLED;
        goto done;
    }
    if (PyTuple_GET_SIZE(pargs) + PyDict_GET_SIZE(pkw) + nargs
        > TC_MAX_CALL_ARGS) {
        rc = unsupported(T, "a partial with too many arguments");
        goto done;
    }
    if (tc_guard_id(T->out->guards, callable->source, p) < 0) {
        rc = ERROR;
        goto done;
    }
    int fsrc = attr_source(T, callable->source, "func");
    int asrc = attr_source(T, callable->source, "args");
    int ksrc = attr_source(T, callable->source, "keywords");
    if (fsrc < 0 || asrc < 0 || ksrc < 0
        || (f = wrap_value(T, func, fsrc, &rc)) == NULL) {
        rc = rc != OK ? rc : ERROR;
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pargs); i++) {
        int src = tc_source_add(T->out->guards, TC_SRC_ITEM, asrc, i, NULL);
        all[n] = src < 0 ? NULL
               : wrap_value(T, PyTuple_GET_ITEM(pargs, i), src, &rc);
        if (all[n++] == NULL) {
            rc = rc != OK ? rc : ERROR;
            goto done;
        }
    }
    for (int i = 0; i < nargs - nkw; i++) {
        all[n++] = args[i];
    }
    /* keywords: the partial's, unless the call gives them too */
    names = PyList_New(0);
    if (names == NULL) {
        rc = ERROR;
        goto done;
    }
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(pkw, &pos, &k, &v)) {
        int overridden = 0;
        for (int i = 0; i < nkw; i++) {
            overridden |= PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, i),
                                            k) == 0;
        }
        if (overridden) {
            continue;
        }
        int src = tc_source_add(T->out->guards, TC_SRC_DICT_ITEM, ksrc, 0, k);
        all[n] = src < 0 ? NULL : wrap_value(T, v, src, &rc);
        if (all[n++] == NULL || PyList_Append(names, k) < 0) {
            rc = rc != OK ? rc : ERROR;
            goto done;
        }
    }
    for (int i = 0; i < nkw; i++) {
        all[n++] = args[nargs - nkw + i];
        if (PyList_Append(names, PyTuple_GET_ITEM(kwnames, i)) < 0) {
            rc = ERROR;
            goto done;
        }
    }
    keys = PyList_AsTuple(names);
    /* an arena var keeps the keyword names alive for the trace */
    if (keys == NULL || tc_var_const(&T->sh->arena, keys, -1) == NULL) {
        rc = ERROR;
        goto done;
    }
    if (n > 16) {
        rc = unsupported(T, "call with %d arguments", n);
        goto done;
    }
    rc = call_with_args(T, f, all, n,
                        PyTuple_GET_SIZE(keys) ? keys : NULL);
done:
    Py_XDECREF(func);
    Py_XDECREF(pargs);
    Py_XDECREF(pkw);
    Py_XDECREF(names);
    Py_XDECREF(keys);
    return rc;
}

/* Calls whose Python meaning the tracer implements itself; NOT_HANDLED
 * lets op_call go on with torch bindings and inlining. */
static int
call_python_semantics(tracer *T, tc_var *callable, tc_var **args,
                      int nargs, PyObject *kwnames)
{
    if (known_init() < 0) {
        return ERROR;
    }
    if (callable->kind == TC_VAR_DEFERRED) {
        if (callable->node == TC_TMPL_ENTER) {
            return call_with_exit(T, callable, nargs);
        }
        if (callable->node == TC_TMPL_FUNCTION) {
            return inline_call(T, callable, args, nargs, kwnames);
        }
        return NOT_HANDLED;
    }
    if (callable->kind == TC_VAR_METHOD) {
        return call_method(T, callable, args, nargs, kwnames);
    }
    if (callable->kind != TC_VAR_OBJECT && callable->kind != TC_VAR_UNKNOWN
        && callable->kind != TC_VAR_CONST) {
        return NOT_HANDLED;
    }
    PyObject *fn = callable->obj;
    int mode = grad_ctx_mode(T, fn, args, nargs, kwnames);
    if (mode != -1) {
        return mode < 0 ? mode : make_grad_ctx(T, callable, args, nargs,
                                               mode);
    }
    if (PyMethod_Check(fn) && is_grad_ctx_object(PyMethod_GET_SELF(fn))) {
        /* __exit__ of a with block entered before this segment: it
         * changes the real grad mode, so Python must run it */
        return unsupported(T, "the end of a with block that an earlier "
                           "segment entered");
    }
    if (PyMethod_Check(fn) && callable->source >= 0) {
        return call_bound_method(T, callable, args, nargs, kwnames);
    }
    if (Py_TYPE(fn) == (PyTypeObject *)K.partial && callable->source >= 0) {
        return call_partial(T, callable, args, nargs, kwnames);
    }
    return call_builtin_semantics(T, callable, args, nargs, kwnames);
}

static int
op_call(tracer *T, int argc)
{
    PyObject *kwnames = T->kwnames;
    T->kwnames = NULL;
    if (T->sp < argc + 2) {
        return unsupported(T, "malformed call stack");
    }
    tc_var **argv = &T->stack[T->sp - argc];
    tc_var *x = peek(T, argc + 1), *y = peek(T, argc + 2);
    tc_var *callable = x;
    int nargs = argc;
    if (y->kind != TC_VAR_NULL) {
        callable = y;     /* method call: x is self */
        argv--;
        nargs++;
    }
    tc_var *args[16];
    if (nargs > 16) {
        return unsupported(T, "call with %d arguments", nargs);
    }
    memcpy(args, argv, nargs * sizeof(tc_var *));
    T->sp -= argc + 2;
    int rc = call_python_semantics(T, callable, args, nargs, kwnames);
    if (rc != NOT_HANDLED) {
        return rc;
    }
    if (callable->kind == TC_VAR_METHOD) {
        tc_var *self = callable->items[0];
        return unsupported(T, "call to %s.%U (not a traceable torch op)",
                           self->kind == TC_VAR_LAZY && self->obj
                               ? Py_TYPE(self->obj)->tp_name
                               : tc_var_kind_name(self), callable->obj);
    }
    if (callable->kind == TC_VAR_NN_MODULE) {
        return call_nn_module(T, callable, args, nargs, kwnames);
    }
    if (callable->kind != TC_VAR_OBJECT && callable->kind != TC_VAR_CONST
        && callable->kind != TC_VAR_UNKNOWN) {
        return unsupported(T, "call of a %s value", tc_var_kind_name(callable));
    }
    PyObject *fn = callable->obj;
    const tc_binding *b = tc_binding_find(fn);
    if (b != NULL) {
        return call_binding(T, b, args, nargs, kwnames);
    }
    if (PyFunction_Check(fn)) {
        return inline_call(T, callable, args, nargs, kwnames);
    }
    rc = fold_builtin_call(T, fn, args, nargs, kwnames);
    if (rc != UNSUPPORTED || T->out->reason != NULL) {
        return rc;
    }
    PyObject *name = callable_name(fn);
    if (name == NULL) {
        return ERROR;
    }
    rc = unsupported(T, "call to %U (not a traceable torch op)", name);
    Py_DECREF(name);
    return rc;
}

/* ---- attributes ------------------------------------------------------------ */

/* x.T (all dims reversed; torch deprecates it beyond 2-d but allows it)
 * and x.mT (the last two swapped). */
static int
tensor_transpose_attr(tracer *T, tc_var *self, PyObject *name, int method)
{
    const tc_layout *l = &tensor_node(T, self)->layout;
    int64_t dims[TC_MAX_DIMS];
    char err[256] = "";
    int node;
    if (PyUnicode_CompareWithASCIIString(name, "mT") == 0) {
        node = tc_graph_transpose(T->out->graph, self->node, -2, -1, err,
                                  sizeof(err));
    }
    else {
        for (int d = 0; d < l->ndim; d++) {
            dims[d] = l->ndim - 1 - d;
        }
        node = tc_graph_permute(T->out->graph, self->node, l->ndim, dims, err,
                                sizeof(err));
    }
    if (method && push(T, tc_var_new(&T->sh->arena, TC_VAR_NULL, -1)) < 0) {
        return ERROR;
    }
    return node == self->node ? push(T, self) : push_node(T, node, "T", err);
}

static int
tensor_attr(tracer *T, tc_var *self, PyObject *name, int method)
{
    PyObject *descr = _PyType_Lookup((PyTypeObject *)tc_tensor_type, name);
    const tc_binding *b = descr ? tc_binding_find(descr) : NULL;
    if (method && b != NULL) {
        tc_var *d = tc_var_new(&T->sh->arena, TC_VAR_OBJECT, -1);
        if (d == NULL) {
            return ERROR;
        }
        d->obj = Py_NewRef(descr);
        return push(T, d) ? ERROR : push(T, self);
    }
    if (method && descr != NULL) {
        /* A method we cannot trace: keep it symbolic so that the break
         * happens once, at the call, not at the attribute load too. */
        tc_var *m = tc_var_seq(&T->sh->arena, TC_VAR_METHOD, 1, &self);
        if (m == NULL) {
            return ERROR;
        }
        m->obj = Py_NewRef(name);
        return push(T, tc_var_new(&T->sh->arena, TC_VAR_NULL, -1)) ? ERROR
                                                                  : push(T, m);
    }
    const tc_node *n = tensor_node(T, self);
    PyObject *r = NULL;
    if (PyUnicode_CompareWithASCIIString(name, "dtype") == 0) {
        r = Py_NewRef(tc_dtype_to_torch(n->dtype));
    }
    else if (PyUnicode_CompareWithASCIIString(name, "ndim") == 0) {
        r = PyLong_FromLong(n->layout.ndim);
    }
    else if (PyUnicode_CompareWithASCIIString(name, "shape") == 0) {
        r = tc_size_object(&n->layout);
    }
    else if (PyUnicode_CompareWithASCIIString(name, "device") == 0) {
        /* every tensor of a graph is on the (guarded) device of its inputs */
        r = T->out->device < 0
            ? PyObject_CallMethod(tc_torch_module, "device", "s", "cpu")
            : PyObject_CallMethod(tc_torch_module, "device", "si", "cuda",
                                  T->out->device);
    }
    else if (PyUnicode_CompareWithASCIIString(name, "is_cuda") == 0) {
        r = PyBool_FromLong(T->out->device >= 0);
    }
    else if (PyUnicode_CompareWithASCIIString(name, "T") == 0
             || PyUnicode_CompareWithASCIIString(name, "mT") == 0) {
        return tensor_transpose_attr(T, self, name, method);
    }
    else {
        return unsupported(T, "Tensor.%U", name);
    }
    if (r == NULL) {
        return ERROR;
    }
    if (method && push(T, tc_var_new(&T->sh->arena, TC_VAR_NULL, -1)) < 0) {
        Py_DECREF(r);
        return ERROR;
    }
    tc_var *v = tc_var_const(&T->sh->arena, r, -1);
    Py_DECREF(r);
    return push(T, v);
}

/* Attribute of a module: torch's own modules are trusted (like Dynamo, we
 * do not guard torch.sin); other modules' attributes are guarded values. */
static int
module_attr(tracer *T, tc_var *mod, PyObject *name, int method)
{
    PyObject *value = PyObject_GetAttr(mod->obj, name);
    if (value == NULL) {
        return unsupported_from_exception(T, "module attribute");
    }
    int rc = OK;
    tc_var *v;
    if (tc_is_trusted_module(mod->obj)) {
        v = const_var(T, value);
        if (v && v->kind == TC_VAR_CONST && !is_python_scalar(value)) {
            v->kind = TC_VAR_OBJECT;
        }
        if (v == NULL) {
            rc = ERROR;
        }
    }
    else {
        int src = tc_source_add(T->out->guards, TC_SRC_ATTR, mod->source, 0,
                                name);
        v = src < 0 ? NULL : wrap_value(T, value, src, &rc);
        if (src < 0) {
            rc = ERROR;
        }
    }
    Py_DECREF(value);
    if (v == NULL) {
        return rc;
    }
    if (method && push(T, tc_var_new(&T->sh->arena, TC_VAR_NULL, -1)) < 0) {
        return ERROR;
    }
    return push(T, v);
}

static int
op_load_attr(tracer *T, PyObject *name, int method)
{
    tc_var *owner = pop(T);
    if (owner == NULL) {
        return unsupported(T, "malformed attribute load");
    }
    if (owner->kind == TC_VAR_TENSOR) {
        return tensor_attr(T, owner, name, method);
    }
    if (owner->kind == TC_VAR_NN_MODULE) {
        return nn_module_attr(T, owner, name, method);
    }
    if (!method && structseq_items(owner) != NULL
        && (PyUnicode_CompareWithASCIIString(name, "values") == 0
            || PyUnicode_CompareWithASCIIString(name, "indices") == 0)) {
        return push(T, structseq_items(owner)->items[
            PyUnicode_CompareWithASCIIString(name, "indices") == 0]);
    }
    if (!method && owner->kind == TC_VAR_CONST
        && (tc_dtype_from_torch(owner->obj) >= 0
            || strcmp(Py_TYPE(owner->obj)->tp_name, "torch.device") == 0)) {
        /* x.device.type, x.dtype.is_floating_point: immutable values */
        return push_folded(T, PyObject_GetAttr(owner->obj, name),
                           "attribute");
    }
    if (owner->kind == TC_VAR_OBJECT && PyModule_Check(owner->obj)
        && owner->source >= 0) {
        return module_attr(T, owner, name, method);
    }
    if (owner->kind == TC_VAR_OBJECT && tc_is_trusted_module(owner->obj)) {
        return module_attr(T, owner, name, method);
    }
    int rc = object_attr(T, owner, name, method);
    if (rc != NOT_HANDLED) {
        return rc;
    }
    if (method && owner->kind != TC_VAR_NULL) {
        /* list.append(...), obj.method(...): one break, at the call */
        tc_var *m = tc_var_seq(&T->sh->arena, TC_VAR_METHOD, 1, &owner);
        if (m == NULL) {
            return ERROR;
        }
        m->obj = Py_NewRef(name);
        return push(T, tc_var_new(&T->sh->arena, TC_VAR_NULL, -1)) ? ERROR
                                                                  : push(T, m);
    }
    return unsupported(T, "attribute '%U' of a %s", name,
                       tc_var_kind_name(owner));
}

/* ---- operators -------------------------------------------------------------- */

static const char *
binary_op_name(int nb)
{
    switch (nb) {
    case NB_ADD: return "add";
    case NB_SUBTRACT: return "sub";
    case NB_MULTIPLY: return "mul";
    case NB_TRUE_DIVIDE: return "div";
    case NB_POWER: return "pow";
    case NB_AND: return "bitwise_and";
    case NB_OR: return "bitwise_or";
    case NB_XOR: return "bitwise_xor";
    default: return NULL;
    }
}

static PyObject *
fold_binary(int nb, PyObject *a, PyObject *b)
{
    switch (nb % NB_INPLACE_ADD) {
    case NB_ADD: return PyNumber_Add(a, b);
    case NB_SUBTRACT: return PyNumber_Subtract(a, b);
    case NB_MULTIPLY: return PyNumber_Multiply(a, b);
    case NB_TRUE_DIVIDE: return PyNumber_TrueDivide(a, b);
    case NB_FLOOR_DIVIDE: return PyNumber_FloorDivide(a, b);
    case NB_REMAINDER: return PyNumber_Remainder(a, b);
    case NB_POWER: return PyNumber_Power(a, b, Py_None);
    case NB_AND: return PyNumber_And(a, b);
    case NB_OR: return PyNumber_Or(a, b);
    case NB_XOR: return PyNumber_Xor(a, b);
    case NB_LSHIFT: return PyNumber_Lshift(a, b);
    case NB_RSHIFT: return PyNumber_Rshift(a, b);
    default:
        PyErr_SetString(PyExc_TypeError, "unsupported operator");
        return NULL;
    }
}

static int
push_folded(tracer *T, PyObject *r, const char *what)
{
    if (r == NULL) {
        return unsupported_from_exception(T, what);
    }
    tc_var *v = tc_var_const(&T->sh->arena, r, -1);
    Py_DECREF(r);
    return push(T, v);
}

static int
op_binary(tracer *T, int nb)
{
    tc_var *b = pop(T), *a = pop(T);
    if (a == NULL || b == NULL) {
        return unsupported(T, "malformed binary op");
    }
    if (reify(T, a) != OK || reify(T, b) != OK) {
        return ERROR;
    }
    if (a->kind == TC_VAR_CONST && b->kind == TC_VAR_CONST) {
        return push_folded(T, fold_binary(nb, a->obj, b->obj), "operator");
    }
    if (a->kind != TC_VAR_TENSOR && b->kind != TC_VAR_TENSOR) {
        return unsupported(T, "operator on %s and %s", tc_var_kind_name(a),
                           tc_var_kind_name(b));
    }
    if (nb >= NB_INPLACE_ADD) {
        return unsupported(T, "in-place operator on a tensor (mutation is "
                           "not traced yet)");
    }
    if (nb == NB_MATRIX_MULTIPLY && a->kind == TC_VAR_TENSOR
        && b->kind == TC_VAR_TENSOR) {
        int in[2] = {a->node, b->node};
        return push_extern(T, "matmul", 2, in, NULL, 0);
    }
    const char *op = binary_op_name(nb);
    if (op == NULL) {
        return unsupported(T, "tensor operator #%d (matmul, floor division, "
                           "remainder and shifts are not supported yet)", nb);
    }
    tc_var *args[2] = {a, b};
    return emit_op(T, op, 2, args, TC_F32);
}

static int
op_compare(tracer *T, int cmp)
{
    static const char *const names[] = {"lt", "le", "eq", "ne", "gt", "ge"};
    tc_var *b = pop(T), *a = pop(T);
    if (a == NULL || b == NULL || cmp < 0 || cmp > 5) {
        return unsupported(T, "malformed comparison");
    }
    if (reify(T, a) != OK || reify(T, b) != OK) {
        return ERROR;
    }
    if (a->kind == TC_VAR_CONST && b->kind == TC_VAR_CONST) {
        return push_folded(T, PyObject_RichCompare(a->obj, b->obj, cmp),
                           "comparison");
    }
    if (a->kind != TC_VAR_TENSOR && b->kind != TC_VAR_TENSOR) {
        return unsupported(T, "comparison of %s and %s", tc_var_kind_name(a),
                           tc_var_kind_name(b));
    }
    tc_var *args[2] = {a, b};
    return emit_op(T, names[cmp], 2, args, TC_F32);
}

static int
op_unary(tracer *T, int opcode)
{
    tc_var *a = pop(T);
    if (a == NULL) {
        return unsupported(T, "malformed unary op");
    }
    if (reify(T, a) != OK) {
        return ERROR;
    }
    if (a->kind == TC_VAR_CONST) {
        PyObject *r = opcode == UNARY_NEGATIVE ? PyNumber_Negative(a->obj)
                    : opcode == UNARY_INVERT ? PyNumber_Invert(a->obj)
                    : PyBool_FromLong(!PyObject_IsTrue(a->obj));
        return push_folded(T, r, "unary operator");
    }
    if (a->kind != TC_VAR_TENSOR) {
        return unsupported(T, "unary operator on %s", tc_var_kind_name(a));
    }
    if (opcode == UNARY_NOT) {
        return unsupported(T, "'not' on a tensor (data-dependent)");
    }
    return emit_op(T, opcode == UNARY_NEGATIVE ? "neg" : "bitwise_not", 1, &a,
                   TC_F32);
}

/* ---- sequences --------------------------------------------------------------- */

static int
op_build(tracer *T, tc_var_kind kind, int n)
{
    if (T->sp < n) {
        return unsupported(T, "malformed build");
    }
    T->sp -= n;
    return push(T, tc_var_seq(&T->sh->arena, kind, n, &T->stack[T->sp]));
}

static int
unpack_const(tracer *T, PyObject *obj, int n)
{
    PyObject *seq = PySequence_Tuple(obj);
    if (seq == NULL) {
        return unsupported_from_exception(T, "unpacking");
    }
    int rc = PyTuple_GET_SIZE(seq) == n
        ? OK : unsupported(T, "unpacking %zd values into %d names",
                           PyTuple_GET_SIZE(seq), n);
    for (int i = n - 1; rc == OK && i >= 0; i--) {
        rc = push(T, tc_var_const(&T->sh->arena, PyTuple_GET_ITEM(seq, i), -1));
    }
    Py_DECREF(seq);
    return rc;
}

static int
op_unpack(tracer *T, int n)
{
    tc_var *seq = pop(T);
    if (reify(T, seq) != OK) {
        return ERROR;
    }
    if (structseq_items(seq) != NULL) {
        seq = structseq_items(seq);   /* values, indices = x.max(1) */
    }
    if (seq != NULL && seq->kind == TC_VAR_CONST && PyTuple_Check(seq->obj)) {
        return unpack_const(T, seq->obj, n);
    }
    if (seq == NULL || (seq->kind != TC_VAR_TUPLE && seq->kind != TC_VAR_LIST)) {
        return unsupported(T, "unpacking a %s",
                           seq ? tc_var_kind_name(seq) : "?");
    }
    if (seq->nitems != n) {
        return unsupported(T, "unpacking %d values into %d names",
                           seq->nitems, n);
    }
    for (int i = n - 1; i >= 0; i--) {
        if (push(T, seq->items[i]) < 0) {
            return ERROR;
        }
    }
    return OK;
}

static int
op_list_extend(tracer *T)
{
    tc_var *src = pop(T), *list = pop(T);
    if (reify(T, src) != OK) {
        return ERROR;
    }
    if (src == NULL || list == NULL || list->kind != TC_VAR_LIST
        || (src->kind != TC_VAR_TUPLE && src->kind != TC_VAR_LIST)) {
        return unsupported(T, "list.extend of a non-sequence");
    }
    tc_var *items[128];
    if (list->nitems + src->nitems > 128) {
        return unsupported(T, "list too long");
    }
    memcpy(items, list->items, list->nitems * sizeof(tc_var *));
    memcpy(items + list->nitems, src->items, src->nitems * sizeof(tc_var *));
    return push(T, tc_var_seq(&T->sh->arena, TC_VAR_LIST,
                              list->nitems + src->nitems, items));
}

/* One index item applied at dim *d of node x (basic indexing): an int
 * selects, a slice narrows, None inserts a dim.  Returns the node. */
static int
index_item(tracer *T, int x, PyObject *it, int *d, char *err, size_t n)
{
    tc_graph *g = T->out->graph;
    if (it == Py_None) {
        return tc_graph_unsqueeze(g, x, (*d)++, err, n);
    }
    if (PyLong_CheckExact(it)) {
        return tc_graph_select(g, x, *d, PyLong_AsLongLong(it), err, n);
    }
    PySliceObject *sl = (PySliceObject *)it;
    int64_t v[3];
    PyObject *parts[3] = {sl->start, sl->stop, sl->step};
    for (int i = 0; i < 3; i++) {
        if (parts[i] != Py_None && !PyLong_CheckExact(parts[i])) {
            snprintf(err, n, "a slice bound that is not an int");
            return -1;
        }
        v[i] = parts[i] == Py_None ? (i == 2) : PyLong_AsLongLong(parts[i]);
    }
    if (v[2] <= 0) {
        snprintf(err, n, "slice step must be positive");
        return -1;
    }
    return tc_graph_slice(g, x, (*d)++, parts[0] == Py_None ? NULL : &v[0],
                          parts[1] == Py_None ? NULL : &v[1], v[2], err, n);
}

/* x[idx] with ints, slices, None and one Ellipsis: a chain of views. */
static int
index_tensor(tracer *T, tc_var *x, PyObject *idx)
{
    PyObject *items = PyTuple_Check(idx) ? Py_NewRef(idx)
                                         : PyTuple_Pack(1, idx);
    if (items == NULL) {
        return ERROR;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(items), consumed = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PyTuple_GET_ITEM(items, i);
        consumed += PyLong_CheckExact(it) || PySlice_Check(it);
        if (!(it == Py_None || it == Py_Ellipsis || PyLong_CheckExact(it)
              || PySlice_Check(it))) {
            Py_DECREF(items);
            return unsupported(T, "indexing a tensor with a %s (advanced "
                               "indexing is not compiled yet)",
                               Py_TYPE(it)->tp_name);
        }
    }
    int node = x->node, d = 0, ndim = tensor_node(T, x)->layout.ndim;
    char err[256] = "";
    for (Py_ssize_t i = 0; i < n && node >= 0; i++) {
        PyObject *it = PyTuple_GET_ITEM(items, i);
        if (it == Py_Ellipsis) {
            d += ndim - (int)consumed;
            continue;
        }
        node = index_item(T, node, it, &d, err, sizeof(err));
    }
    Py_DECREF(items);
    if (node == x->node) {
        return push(T, x);
    }
    return push_node(T, node, "indexing", err);
}

/* seq[i] of nn.Sequential / ModuleList / ModuleDict: the submodule, a
 * source of its own (getattr(seq, "i") is what their __getitem__ reads). */
static int
index_nn_module(tracer *T, tc_var *mod, tc_var *idx)
{
    PyObject *key = NULL;
    if (idx->kind == TC_VAR_CONST && PyLong_CheckExact(idx->obj)) {
        Py_ssize_t n = PyObject_Length(mod->obj), i = PyLong_AsSsize_t(idx->obj);
        if (n < 0) {
            return unsupported_from_exception(T, "len() of a module");
        }
        if (i < -n || i >= n) {
            return unsupported(T, "module index out of range");
        }
        if (tc_guard_length(T->out->guards, mod->source, mod->obj) < 0) {
            return ERROR;
        }
        key = PyUnicode_FromFormat("%zd", i < 0 ? i + n : i);
    }
    else if (idx->kind == TC_VAR_CONST && PyUnicode_CheckExact(idx->obj)) {
        key = Py_NewRef(idx->obj);
    }
    else {
        return unsupported(T, "indexing a module with a %s",
                           tc_var_kind_name(idx));
    }
    if (key == NULL) {
        return ERROR;
    }
    int rc = nn_module_attr(T, mod, key, 0);
    Py_DECREF(key);
    return rc;
}

/* xs[a:b:c] of a tuple or list var: a new one of the same kind. */
static int
slice_sequence(tracer *T, tc_var *seq, PyObject *slice)
{
    Py_ssize_t start, stop, step, n;
    tc_var *items[64];
    if (PySlice_Unpack(slice, &start, &stop, &step) < 0) {
        return ERROR;
    }
    n = PySlice_AdjustIndices(seq->nitems, &start, &stop, step);
    if (n > 64) {
        return unsupported(T, "a slice of more than 64 items");
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        items[i] = seq->items[start + i * step];
    }
    return push(T, tc_var_seq(&T->sh->arena, seq->kind, (int)n, items));
}

static int
subscript(tracer *T, tc_var *seq, tc_var *idx)
{
    if (reify(T, seq) != OK || reify(T, idx) != OK) {
        return ERROR;
    }
    if (structseq_items(seq) != NULL) {
        seq = structseq_items(seq);   /* x.max(1)[0] */
    }
    if (seq->kind == TC_VAR_DICT) {
        return dict_lookup(T, seq, idx, NULL);
    }
    if (seq->kind == TC_VAR_CONST && idx->kind == TC_VAR_CONST) {
        return push_folded(T, PyObject_GetItem(seq->obj, idx->obj),
                           "subscript");
    }
    if ((seq->kind == TC_VAR_TUPLE || seq->kind == TC_VAR_LIST)
        && idx->kind == TC_VAR_CONST && PyLong_CheckExact(idx->obj)) {
        long i = PyLong_AsLong(idx->obj);
        if (i < 0) {
            i += seq->nitems;
        }
        if (i < 0 || i >= seq->nitems) {
            return unsupported(T, "index out of range");
        }
        return push(T, seq->items[i]);
    }
    if ((seq->kind == TC_VAR_TUPLE || seq->kind == TC_VAR_LIST)
        && idx->kind == TC_VAR_CONST && PySlice_Check(idx->obj)) {
        return slice_sequence(T, seq, idx->obj);
    }
    if (seq->kind == TC_VAR_TENSOR && idx->kind == TC_VAR_CONST) {
        return index_tensor(T, seq, idx->obj);
    }
    if (seq->kind == TC_VAR_TENSOR && idx->kind == TC_VAR_TUPLE) {
        /* x[:, :T, None]: a tuple of known ints and slices */
        PyObject *t = PyTuple_New(idx->nitems);
        for (int i = 0; t != NULL && i < idx->nitems; i++) {
            tc_var *it = idx->items[i];
            if (reify(T, it) != OK || it->kind != TC_VAR_CONST) {
                Py_DECREF(t);
                return PyErr_Occurred() ? ERROR
                     : unsupported(T, "indexing a tensor with a %s",
                                   tc_var_kind_name(it));
            }
            PyTuple_SET_ITEM(t, i, Py_NewRef(it->obj));
        }
        int rc = t ? index_tensor(T, seq, t) : ERROR;
        Py_XDECREF(t);
        return rc;
    }
    if (seq->kind == TC_VAR_NN_MODULE) {
        return index_nn_module(T, seq, idx);
    }
    if (seq->kind == TC_VAR_TENSOR && idx->kind == TC_VAR_TENSOR) {
        return unsupported(T, "indexing a tensor with a tensor (advanced "
                           "indexing is not compiled yet)");
    }
    return unsupported(T, "subscript of a %s with a %s", tc_var_kind_name(seq),
                       tc_var_kind_name(idx));
}

static int
op_subscr(tracer *T)
{
    tc_var *idx = pop(T), *seq = pop(T);
    if (seq == NULL || idx == NULL) {
        return unsupported(T, "malformed subscript");
    }
    return subscript(T, seq, idx);
}

/* BUILD_SLICE of known ints (a tuple index such as x[:, :T] holds them). */
static int
op_build_slice(tracer *T, int n)
{
    tc_var *parts[3] = {NULL, NULL, NULL};
    for (int i = n - 1; i >= 0; i--) {
        parts[i] = pop(T);
        if (parts[i] == NULL) {
            return unsupported(T, "malformed slice");
        }
        if (reify(T, parts[i]) != OK) {
            return ERROR;
        }
        if (parts[i]->kind != TC_VAR_CONST) {
            return unsupported(T, "a slice of a %s",
                               tc_var_kind_name(parts[i]));
        }
    }
    return push_folded(T, PySlice_New(parts[0]->obj, parts[1]->obj,
                                      n == 3 ? parts[2]->obj : NULL),
                       "slice");
}

#if TC_HAVE_BINARY_SLICE
static int
op_binary_slice(tracer *T)
{
    int rc = op_build_slice(T, 2);
    if (rc != OK) {
        return rc;
    }
    tc_var *sl = pop(T), *seq = pop(T);
    return seq ? subscript(T, seq, sl) : unsupported(T, "malformed slice");
}
#endif

/* A lambda or nested function without closure or defaults: made when the
 * segment exits (it is only passed along, e.g. as a sort key). */
static int
op_make_function(tracer *T, int oparg)
{
    tc_var *code = peek(T, 1);
    if (oparg != 0 || code == NULL || code->kind != TC_VAR_UNKNOWN
        || !PyCode_Check(code->obj)) {
        return unsupported(T, "a nested function with defaults or a "
                           "closure");
    }
    if (T->globals != T->frame->f_globals) {
        /* the exit would make it with the frame's globals */
        return unsupported(T, "a nested function in a function of another "
                           "module");
    }
    tc_var *d = tc_var_new(&T->sh->arena, TC_VAR_DEFERRED, -1);
    if (d == NULL) {
        return ERROR;
    }
    d->node = TC_TMPL_FUNCTION;
    d->obj = Py_NewRef(code->obj);
    pop(T);
    return push(T, d);
}

/* f-strings of Python values fold; of tensors they are deferred. */
static int
op_format_value(tracer *T, int oparg)
{
    int has_spec = (oparg & FVS_MASK) != 0;
    tc_var *spec = has_spec ? peek(T, 1) : NULL;
    tc_var *value = peek(T, 1 + has_spec);
    if (value == NULL || reify(T, value) != OK || reify(T, spec) != OK) {
        return value == NULL ? unsupported(T, "malformed stack") : ERROR;
    }
    if (value->kind != TC_VAR_CONST || (spec && spec->kind != TC_VAR_CONST)) {
        /* formatting a tensor: done when the segment exits, so the break
         * happens once, where the string is used (print, logging...) */
        tc_var *items[2] = {value, spec};
        tc_var *d = tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED, 1 + has_spec,
                               items);
        if (d == NULL) {
            return ERROR;
        }
        d->node = TC_TMPL_FORMAT;
        d->obj = PyLong_FromLong(oparg);
        T->sp -= 1 + has_spec;
        return d->obj ? push(T, d) : ERROR;
    }
    T->sp -= 1 + has_spec;
    return push_folded(T, tc_format_value(value->obj, spec ? spec->obj : NULL,
                                          oparg), "format");
}

PyObject *
tc_format_value(PyObject *value, PyObject *spec, int oparg)
{
    PyObject *conv = (oparg & FVC_MASK) == FVC_STR ? PyObject_Str(value)
                   : (oparg & FVC_MASK) == FVC_REPR ? PyObject_Repr(value)
                   : (oparg & FVC_MASK) == FVC_ASCII ? PyObject_ASCII(value)
                   : Py_NewRef(value);
    PyObject *r = conv ? PyObject_Format(conv, spec) : NULL;
    Py_XDECREF(conv);
    return r;
}

static int
op_build_string(tracer *T, int n)
{
    if (T->sp < n) {
        return unsupported(T, "malformed stack");
    }
    tc_var **parts = &T->stack[T->sp - n];
    if (!all_const(parts, n)) {
        tc_var *d = tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED, n, parts);
        if (d == NULL) {
            return ERROR;
        }
        d->node = TC_TMPL_JOIN;
        T->sp -= n;
        return push(T, d);
    }
    PyObject *tup = PyTuple_New(n), *empty = PyUnicode_FromString("");
    for (int i = 0; tup && i < n; i++) {
        PyTuple_SET_ITEM(tup, i, Py_NewRef(parts[i]->obj));
    }
    PyObject *r = tup && empty ? PyUnicode_Join(empty, tup) : NULL;
    Py_XDECREF(tup);
    Py_XDECREF(empty);
    T->sp -= n;
    return push_folded(T, r, "f-string");
}

/* ---- control flow -------------------------------------------------------------- */

/* Truth value of a var known at trace time: 1/0, or -2 if data-dependent. */
static int
static_truth(tracer *T, tc_var *v)
{
    if (reify(T, v) != OK) {
        PyErr_Clear();
        return -2;
    }
    if (v->kind == TC_VAR_CONST || v->kind == TC_VAR_OBJECT) {
        int r = PyObject_IsTrue(v->obj);
        if (r < 0) {
            PyErr_Clear();
            return -2;
        }
        return r;
    }
    if (v->kind == TC_VAR_TUPLE || v->kind == TC_VAR_LIST
        || v->kind == TC_VAR_DICT) {
        return v->nitems > 0;
    }
    (void)T;
    return -2;
}

static int
op_jump(tracer *T, tc_jump_kind kind, int target, int *next)
{
    if (kind == TC_JUMP_ALWAYS) {
        *next = target;
        return OK;
    }
    tc_var *v = peek(T, 1);
    if (v == NULL) {
        return unsupported(T, "malformed jump");
    }
    int taken;
    if (kind == TC_JUMP_POP_IF_NONE || kind == TC_JUMP_POP_IF_NOT_NONE) {
        if (reify(T, v) != OK) {
            return ERROR;
        }
        int is_none = v->kind == TC_VAR_CONST && v->obj == Py_None;
        taken = (kind == TC_JUMP_POP_IF_NONE) == is_none;
    }
    else {
        int t = static_truth(T, v);
        if (t == -2) {
            return unsupported(T, "data-dependent branch on a %s value",
                               tc_var_kind_name(v));
        }
        int on_true = kind == TC_JUMP_POP_IF_TRUE
                      || kind == TC_JUMP_IF_TRUE_OR_POP;
        taken = on_true == t;
    }
    int keep = taken && (kind == TC_JUMP_IF_FALSE_OR_POP
                         || kind == TC_JUMP_IF_TRUE_OR_POP);
    if (!keep) {
        pop(T);
    }
    if (taken) {
        *next = target;
    }
    return OK;
}

/* ---- exits: what the frame must hold afterwards ----------------------------- */

static int
output_index(tracer *T, int node)
{
    for (int i = 0; i < T->nouts; i++) {
        if (T->outs[i] == node) {
            return i;
        }
    }
    int *n = PyMem_Realloc(T->outs, (T->nouts + 1) * sizeof(int));
    if (n == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    T->outs = n;
    n[T->nouts] = node;
    return T->nouts++;
}

/* How to rebuild a var's real value after the graph ran.  Values read from
 * the frame come back as the very same objects (identity matters: a list
 * the caller holds, a tensor returned unchanged). */
static int
memo_slot(tracer *T, tc_var *v)
{
    for (int i = 0; i < T->nmemo; i++) {
        if (T->memo[i] == v) {
            return i;
        }
    }
    if (T->nmemo == T->memo_cap) {
        int cap = T->memo_cap ? 2 * T->memo_cap : 8;
        tc_var **n = PyMem_Realloc(T->memo, cap * sizeof(*n));
        if (n == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        T->memo = n;
        T->memo_cap = cap;
    }
    T->memo[T->nmemo] = v;
    return T->nmemo++;
}

static int
var_template(tracer *T, tc_var *v, tc_template *t)
{
    memset(t, 0, sizeof(*t));
    t->memo = -1;
    if (v->source < 0 && (v->kind == TC_VAR_TUPLE || v->kind == TC_VAR_LIST
                          || v->kind == TC_VAR_DEFERRED
                          || v->kind == TC_VAR_DICT)) {
        t->memo = memo_slot(T, v);
        if (t->memo < 0) {
            return ERROR;
        }
    }
    if (v->kind == TC_VAR_NULL) {
        t->kind = TC_TMPL_NULL;
        return OK;
    }
    if (v->source >= 0) {
        t->kind = TC_TMPL_SOURCE;
        t->index = v->source;
        return OK;
    }
    if (v->kind == TC_VAR_DEFERRED || v->kind == TC_VAR_DICT) {
        t->kind = v->kind == TC_VAR_DICT ? TC_TMPL_DICT : (tc_tmpl_kind)v->node;
        t->obj = Py_XNewRef(v->obj);
        t->index = v->index;
        t->items = PyMem_Calloc(v->nitems + 1, sizeof(tc_template));
        if (t->items == NULL) {
            PyErr_NoMemory();
            return ERROR;
        }
        t->n = v->nitems;
        for (int i = 0; i < v->nitems; i++) {
            if (var_template(T, v->items[i], &t->items[i]) != OK) {
                return ERROR;
            }
        }
        return OK;
    }
    if (v->kind == TC_VAR_METHOD) {
        t->kind = TC_TMPL_ATTR;
        t->obj = Py_NewRef(v->obj);
        t->items = PyMem_Calloc(1, sizeof(tc_template));
        t->n = t->items ? 1 : 0;
        if (t->items == NULL) {
            PyErr_NoMemory();
            return ERROR;
        }
        return var_template(T, v->items[0], &t->items[0]);
    }
    switch (v->kind) {
    case TC_VAR_TENSOR:
        t->kind = TC_TMPL_OUTPUT;
        t->index = output_index(T, v->node);
        return t->index < 0 ? ERROR : OK;
    case TC_VAR_CONST:
    case TC_VAR_OBJECT:
    case TC_VAR_UNKNOWN:
        t->kind = TC_TMPL_CONST;
        t->obj = Py_NewRef(v->obj);
        return OK;
    case TC_VAR_TUPLE:
    case TC_VAR_LIST:
        t->kind = v->kind == TC_VAR_TUPLE ? TC_TMPL_TUPLE : TC_TMPL_LIST;
        t->items = PyMem_Calloc(v->nitems ? v->nitems : 1, sizeof(tc_template));
        if (t->items == NULL) {
            PyErr_NoMemory();
            return ERROR;
        }
        t->n = v->nitems;
        for (int i = 0; i < v->nitems; i++) {
            if (var_template(T, v->items[i], &t->items[i]) != OK) {
                return ERROR;
            }
        }
        return OK;
    default:
        PyErr_SetString(PyExc_RuntimeError, "tcjit: no template for a var");
        return ERROR;
    }
}

static int
op_return(tracer *T, tc_var *v, int pushes)
{
    T->out->exit.kind = TC_EXIT_RETURN;
    T->out->return_pc = T->pc;
    T->out->return_pushes = pushes;
    return var_template(T, v, &T->out->ret);
}

/* Which exit an instruction the tracer could not compile becomes: the
 * runtime performs simple ones itself (STEP), decides data-dependent jumps
 * (BRANCH), and hands everything else to CPython (FALLBACK). */
static tc_exit_kind
exit_kind_for(int opcode, int oparg, int next_pc, int *jump, int *target)
{
    tc_jump_kind jk = pyframe_jump(opcode, oparg, next_pc, target);
    *jump = jk;
    if (jk == TC_JUMP_POP_IF_FALSE || jk == TC_JUMP_POP_IF_TRUE
        || jk == TC_JUMP_IF_FALSE_OR_POP || jk == TC_JUMP_IF_TRUE_OR_POP) {
        return TC_EXIT_BRANCH;
    }
    switch (opcode) {
    case CALL:
    case CALL_FUNCTION_EX:
    case LOAD_ATTR:
    case LOAD_METHOD:
    case STORE_ATTR:
    case STORE_SUBSCR:
    case DELETE_SUBSCR:
    case BINARY_SUBSCR:
    case BINARY_OP:
    case COMPARE_OP:
    case IS_OP:
    case CONTAINS_OP:
    case UNARY_NEGATIVE:
    case UNARY_INVERT:
    case UNARY_NOT:
    case FORMAT_VALUE:
    case BUILD_STRING:
    case MAKE_FUNCTION:
        return TC_EXIT_STEP;
    default:
        return TC_EXIT_FALLBACK;
    }
}

/* End the segment before the instruction at T->pc, with the stack as it
 * was before that instruction. */
static int
end_segment(tracer *T, int opcode, int oparg, int op_pc, int next_pc,
            PyObject *kwnames)
{
    tc_exit *x = &T->out->exit;
    x->kind = exit_kind_for(opcode, oparg, next_pc, &x->jump, &x->target);
    x->pc = T->pc;
    x->op_pc = op_pc;
    x->next_pc = next_pc;
    x->opcode = opcode;
    x->oparg = oparg;
    x->kwnames = Py_XNewRef(opcode == CALL ? kwnames : NULL);
    x->reason = Py_XNewRef(T->out->reason);
    x->reason_line = T->out->reason_line;
    x->local_slots = PyMem_Calloc(T->nlocals + 1, sizeof(int));
    x->local_vals = PyMem_Calloc(T->nlocals + 1, sizeof(tc_template));
    x->stack_vals = PyMem_Calloc(T->sp + 1, sizeof(tc_template));
    if (!x->local_slots || !x->local_vals || !x->stack_vals) {
        PyErr_NoMemory();
        return ERROR;
    }
    for (int i = 0; i < T->nlocals; i++) {
        if (T->written[i]) {
            x->local_slots[x->nlocals] = i;
            if (var_template(T, T->locals[i], &x->local_vals[x->nlocals++])) {
                return ERROR;
            }
        }
    }
    for (int i = 0; i < T->sp; i++) {
        if (var_template(T, T->stack[i], &x->stack_vals[i]) != OK) {
            return ERROR;
        }
        x->nstack++;
    }
    return OK;
}

/* ---- dispatch ---------------------------------------------------------------------- */


static int
trace_instruction(tracer *T, int opcode, int oparg, int *next)
{
    PyCodeObject *co = T->co;
    tc_var *v;
    int target;
    tc_jump_kind jk = pyframe_jump(opcode, oparg, *next, &target);
    if (jk != TC_JUMP_NONE) {
        return op_jump(T, jk, target, next);
    }
    switch (opcode) {
    case NOP:
    case RESUME:
    case MAKE_CELL:
    case COPY_FREE_VARS:
    case PRECALL:
        return OK;
    case LOAD_FAST:
    case LOAD_FAST_CHECK:
    case LOAD_DEREF:
        return load_local(T, oparg);
    case STORE_FAST:
    case STORE_DEREF:
        return store_local(T, oparg);
    case LOAD_CONST:
        return push(T, const_var(T, PyTuple_GET_ITEM(co->co_consts, oparg)));
    case LOAD_GLOBAL:
        if ((oparg & 1)
            && push(T, tc_var_new(&T->sh->arena, TC_VAR_NULL, -1)) < 0) {
            return ERROR;
        }
        return load_global(T, PyTuple_GET_ITEM(co->co_names, oparg >> 1));
    case LOAD_ATTR:
    case LOAD_METHOD:
        return op_load_attr(T, PyTuple_GET_ITEM(co->co_names,
                                                TC_LOAD_ATTR_NAME(oparg)),
                            TC_LOAD_ATTR_IS_METHOD(opcode, oparg));
    case PUSH_NULL:
        return push(T, tc_var_new(&T->sh->arena, TC_VAR_NULL, -1));
    case KW_NAMES:
        T->kwnames = PyTuple_GET_ITEM(co->co_consts, oparg);
        return OK;
    case CALL:
        return op_call(T, oparg);
    case BINARY_OP:
        return op_binary(T, oparg);
    case COMPARE_OP:
        return op_compare(T, TC_COMPARE_OP_ARG(oparg));
    case UNARY_NEGATIVE:
    case UNARY_INVERT:
    case UNARY_NOT:
        return op_unary(T, opcode);
    case BUILD_TUPLE:
        return op_build(T, TC_VAR_TUPLE, oparg);
    case BUILD_LIST:
        return op_build(T, TC_VAR_LIST, oparg);
    case LIST_EXTEND:
        return oparg == 1 ? op_list_extend(T)
                          : unsupported(T, "list.extend deep in the stack");
    case UNPACK_SEQUENCE:
        return op_unpack(T, oparg);
    case BINARY_SUBSCR:
        return op_subscr(T);
    case BUILD_SLICE:
        return op_build_slice(T, oparg);
#if TC_HAVE_BINARY_SLICE
    case BINARY_SLICE:
        return op_binary_slice(T);
#endif
    case POP_TOP:
        return pop(T) ? OK : unsupported(T, "malformed stack");
    case COPY:
        v = peek(T, oparg);
        return v ? push(T, v) : unsupported(T, "malformed stack");
    case SWAP:
        if (T->sp < oparg) {
            return unsupported(T, "malformed stack");
        }
        v = T->stack[T->sp - 1];
        T->stack[T->sp - 1] = T->stack[T->sp - oparg];
        T->stack[T->sp - oparg] = v;
        return OK;
    case MAKE_FUNCTION:
        return op_make_function(T, oparg);
    case GET_ITER:
        return op_get_iter(T);
    case FOR_ITER:
        return op_for_iter(T, oparg, next);
    case END_FOR:
        return pop(T) && pop(T) ? OK : unsupported(T, "malformed stack");
    case BEFORE_WITH:
        return op_before_with(T);
    case BUILD_MAP:
        return op_build_map(T, oparg, 0);
    case BUILD_CONST_KEY_MAP:
        return op_build_map(T, oparg, 1);
    case DICT_MERGE:
    case DICT_UPDATE:
        return op_dict_merge(T, oparg, opcode == DICT_MERGE);
    case CALL_FUNCTION_EX:
        return op_call_ex(T, oparg);
    case FORMAT_VALUE:
        return op_format_value(T, oparg);
    case BUILD_STRING:
        return op_build_string(T, oparg);
    case RETURN_VALUE:
    case RETURN_CONST:
        v = opcode == RETURN_VALUE
            ? pop(T) : const_var(T, PyTuple_GET_ITEM(co->co_consts, oparg));
        if (v == NULL) {
            return opcode == RETURN_VALUE ? unsupported(T, "malformed stack")
                                          : ERROR;
        }
        if (T->depth > 0) {
            T->inline_result = v;  /* an inlined callee returns */
            return OK;
        }
        return op_return(T, v, opcode == RETURN_VALUE);
    default: {
        if (TC_IS_LIST_TO_TUPLE(opcode, oparg)) {
            return op_list_to_tuple(T);
        }
        PyObject *opname = NULL, *dis = PyImport_ImportModule("dis");
        if (dis != NULL) {
            PyObject *names = PyObject_GetAttrString(dis, "opname");
            opname = names ? PySequence_GetItem(names, opcode) : NULL;
            Py_XDECREF(names);
            Py_DECREF(dis);
        }
        PyErr_Clear();
        int rc = unsupported(T, "bytecode %S is not supported yet",
                             opname ? opname : Py_None);
        Py_XDECREF(opname);
        return rc;
    }
    }
}

static int
run(tracer *T)
{
    int pc = T->start_pc, budget = INSTRUCTION_BUDGET;
    while (pc < T->ncode) {
        T->pc = pc;
        int opcode = T->code[pc] & 0xff, oparg = T->code[pc] >> 8;
        while (opcode == EXTENDED_ARG) {
            pc++;
            opcode = T->code[pc] & 0xff;
            oparg = (oparg << 8) | (T->code[pc] >> 8);
        }
        int next = pc + 1 + tc_inline_caches[opcode];
        int sp = T->sp;
        PyObject *kwnames = T->kwnames;
        memcpy(T->saved_stack, T->stack, sp * sizeof(tc_var *));
        int rc = --budget == 0
            ? unsupported(T, "more than %d instructions traced (a long "
                          "loop?)", INSTRUCTION_BUDGET)
            : trace_instruction(T, opcode, oparg, &next);
        if (rc == OK) {
            rc = sync_grad(T);
        }
        if (rc == UNSUPPORTED && !T->sh->force_eager && T->depth == 0) {
            memcpy(T->stack, T->saved_stack, sp * sizeof(tc_var *));
            T->sp = sp;
            return end_segment(T, opcode, oparg, pc, next, kwnames)
                   ? ERROR : DONE;
        }
        if (rc != OK) {
            return rc;
        }
        if (opcode == RETURN_VALUE || opcode == RETURN_CONST) {
            return DONE;
        }
        pc = next;
    }
    return unsupported(T, "fell off the end of the code");
}

/* ---- entry point ---------------------------------------------------------------- */

/* A segment after a break starts from the value stack the previous exit
 * wrote into the frame. */
static int
wrap_stack(tracer *T)
{
    int depth = T->frame->stacktop - T->nlocals;
    if (depth < 0 || depth > T->stack_cap) {
        return unsupported(T, "unexpected stack depth %d", depth);
    }
    PyObject **base = T->frame->localsplus + T->nlocals;
    for (int i = 0; i < depth; i++) {
        int rc = OK;
        tc_var *v;
        if (base[i] == NULL) {
            v = tc_var_new(&T->sh->arena, TC_VAR_NULL, -1);
        }
        else {
            int src = tc_source_add(T->out->guards, TC_SRC_STACK, -1, i, NULL);
            v = src < 0 ? NULL : wrap_value(T, base[i], src, &rc);
        }
        if (v == NULL) {
            return rc != OK ? rc : ERROR;
        }
        T->stack[T->sp++] = v;
    }
    return OK;
}

static int
tracer_init(tracer *T, trace_shared *sh, tc_iframe *f, int start_pc,
            tc_trace *t)
{
    memset(T, 0, sizeof(*T));
    memset(t, 0, sizeof(*t));
    T->sh = sh;
    T->start_pc = start_pc;
    T->frame = f;
    T->co = f->f_code;
    T->out = t;
    t->device = -1;
    T->nlocals = T->co->co_nlocalsplus;
    PyObject *func = pyframe_func(f);
    T->closure = func ? PyFunction_GET_CLOSURE(func) : NULL;
    T->code_bytes = PyCode_GetCode(T->co);
    T->global_vars = PyDict_New();
    T->globals = f->f_globals;
    T->builtins = f->f_builtins;
    T->globals_source = -1;
    T->fn_source = -1;
    T->stack_cap = T->co->co_stacksize + STACK_SLACK;
    T->locals = PyMem_Calloc(T->nlocals + 1, sizeof(tc_var *));
    T->written = PyMem_Calloc(T->nlocals + 1, 1);
    T->stack = PyMem_Calloc(T->stack_cap, sizeof(tc_var *));
    T->saved_stack = PyMem_Calloc(T->stack_cap, sizeof(tc_var *));
    t->graph = tc_graph_new();
    t->guards = tc_guards_new();
    if (!T->code_bytes || !T->global_vars || !T->locals || !T->stack
        || !T->written || !T->saved_stack || !t->graph || !t->guards) {
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        return ERROR;
    }
    T->code = (const tc_codeunit *)PyBytes_AS_STRING(T->code_bytes);
    T->ncode = (int)(PyBytes_GET_SIZE(T->code_bytes) / 2);
    T->grad_mode = tc_grad_enabled();
    if (T->grad_mode < 0 || tc_guard_global_state(t->guards) < 0) {
        return ERROR;
    }
    /* The op registry promotes Python floats and int->float ops to
     * float32, torch's default default dtype. */
    PyObject *dt = tc_default_dtype();
    if (dt == NULL) {
        return ERROR;
    }
    if (tc_dtype_from_torch(dt) != TC_F32) {
        T->sh->force_eager = 1;
        return unsupported(T, "torch.set_default_dtype(%R) is not supported "
                           "yet", dt);
    }
    return start_pc > 0 ? wrap_stack(T) : OK;
}

static void
tracer_fini(tracer *T)
{
    Py_XDECREF(T->code_bytes);
    Py_XDECREF(T->global_vars);
    PyMem_Free(T->locals);
    PyMem_Free(T->written);
    PyMem_Free(T->stack);
    PyMem_Free(T->saved_stack);
    PyMem_Free(T->outs);
    PyMem_Free(T->memo);
}

static void
shared_fini(trace_shared *sh)
{
    tc_var_arena_clear(&sh->arena);
    PyMem_Free(sh->inputs);
    PyMem_Free(sh->grad);
}

/* Does the frame receive a tensor argument?  Such a frame is not "tensor
 * free" even if tracing stopped before reading it. */
static int
has_tensor_argument(tc_iframe *f)
{
    PyCodeObject *co = f->f_code;
    int nargs = co->co_argcount + co->co_kwonlyargcount
                + !!(co->co_flags & CO_VARARGS)
                + !!(co->co_flags & CO_VARKEYWORDS);
    for (int i = 0; i < nargs && i < co->co_nlocalsplus; i++) {
        PyObject *v = f->localsplus[i];
        if (v && PyObject_TypeCheck(v, (PyTypeObject *)tc_tensor_type)) {
            return 1;
        }
    }
    return 0;
}

int
tc_trace_frame(tc_iframe *f, int start_pc, tc_trace *t)
{
    tracer T;
    trace_shared sh;
    memset(&sh, 0, sizeof(sh));
    int rc = tracer_init(&T, &sh, f, start_pc, t);
    if (rc == OK) {
        rc = run(&T);
    }
    if (rc == ERROR && !PyErr_ExceptionMatches(PyExc_MemoryError)) {
        rc = unsupported_from_exception(&T, "tracing");
    }
    t->nmemo = T.nmemo;
    if (rc == DONE && tc_graph_set_outputs(t->graph, T.nouts, T.outs) < 0) {
        PyErr_NoMemory();
        rc = ERROR;
    }
    if (rc == ERROR) {
        tracer_fini(&T);
        shared_fini(&sh);
        tc_trace_clear(t);
        return -1;
    }
    int no_tensors = !T.sh->touched_tensor && !has_tensor_argument(f);
    if (rc == UNSUPPORTED) {
        t->status = no_tensors && start_pc == 0 ? TC_TRACE_NO_TENSORS
                                                : TC_TRACE_EAGER;
    }
    else if (start_pc == 0 && no_tensors && t->exit.kind != TC_EXIT_RETURN) {
        /* stopped before any tensor work: nothing to gain from this code */
        t->status = TC_TRACE_NO_TENSORS;
    }
    else if (T.sh->ninputs == 0 && tc_graph_op_count(t->graph) == 0
             && start_pc == 0 && t->exit.kind == TC_EXIT_RETURN) {
        t->status = TC_TRACE_NO_TENSORS;
    }
    else {
        t->status = TC_TRACE_COMPILED;
        t->input_sources = T.sh->inputs;
        T.sh->inputs = NULL;
    }
    tracer_fini(&T);
    shared_fini(&sh);
    return 0;
}

void
tc_exit_clear(tc_exit *x)
{
    for (int i = 0; i < x->nlocals; i++) {
        tc_template_clear(&x->local_vals[i]);
    }
    for (int i = 0; i < x->nstack; i++) {
        tc_template_clear(&x->stack_vals[i]);
    }
    PyMem_Free(x->local_slots);
    PyMem_Free(x->local_vals);
    PyMem_Free(x->stack_vals);
    Py_CLEAR(x->kwnames);
    Py_CLEAR(x->reason);
    memset(x, 0, sizeof(*x));
}

void
tc_template_clear(tc_template *t)
{
    Py_CLEAR(t->obj);
    for (int i = 0; i < t->n; i++) {
        tc_template_clear(&t->items[i]);
    }
    PyMem_Free(t->items);
    t->items = NULL;
    t->n = 0;
}

void
tc_trace_clear(tc_trace *t)
{
    tc_graph_free(t->graph);
    tc_guards_free(t->guards);
    PyMem_Free(t->input_sources);
    tc_template_clear(&t->ret);
    tc_exit_clear(&t->exit);
    Py_CLEAR(t->reason);
    memset(t, 0, sizeof(*t));
}
