/* tracer.c - the symbolic bytecode interpreter.
 *
 * One function per opcode family, dispatched from trace_instruction().  Each
 * returns OK, or UNSUPPORTED after recording a reason a user can act on
 * (what, and the line it happened on), or ERROR with a Python exception set
 * for internal failures.  Nothing here executes tensor code: tensor values
 * are graph nodes whose metadata the op registry computes.
 */
#include "tracer_internal.h"
#include "../graph/extern.h"

#include "../guards/nn_module.h"

/* Straight-line code only: a budget keeps a constant-condition loop from
 * unrolling forever (an optimizer's loop over GPT-2's 148 parameters
 * takes ~25000). */
#define INSTRUCTION_BUDGET 200000

/* ---- errors --------------------------------------------------------------- */

int
tc_tr_unsupported(tracer *T, const char *fmt, ...)
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
int
tc_tr_unsupported_from_exception(tracer *T, const char *what)
{
    PyObject *type, *value, *tb;
    if (!PyErr_Occurred()) {
        /* an ERROR without an exception: an UNSUPPORTED that a caller
         * passed on as ERROR keeps its reason; anything else is a tracer
         * bug, said as such instead of dereferencing a NULL type */
        return T->out->reason
            ? UNSUPPORTED
            : tc_tr_unsupported(T, "%s failed without an exception "
                                "(internal error, please report)", what);
    }
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    int rc = tc_tr_unsupported(T, "%s raised %s: %S", what,
                               ((PyTypeObject *)type)->tp_name,
                               value ? value : Py_None);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return rc;
}

/* Whether a try block of an inlined frame, from T up to the frame's own
 * tracer (excluded: its handlers run in Python), covers that frame's
 * current instruction. */
static int
handler_above(tracer *T)
{
    int depth, lasti;
    if (T->sh->catching > 0) {
        return 1;
    }
    for (tracer *t = T; t != NULL && t->depth > 0; t = t->parent) {
        if (pyframe_exception_handler(t->co, t->pc, &depth, &lasti) >= 0) {
            return 1;
        }
    }
    return 0;
}

static int
unsupported_raise(tracer *T, PyObject *exc)
{
    return tc_tr_unsupported(T, "%s: %S", Py_TYPE(exc)->tp_name, exc);
}

int
tc_tr_raise(tracer *T, PyObject *exc)
{
    if (exc == NULL) {
        return ERROR;
    }
    if (!handler_above(T)) {
        int rc = unsupported_raise(T, exc);
        Py_DECREF(exc);
        return rc;
    }
    Py_XSETREF(T->sh->raised, exc);
    return RAISED;
}

int
tc_tr_caught_attribute_error(tracer *T, int rc)
{
    if (rc == OK) {
        return tc_tr_pop(T) ? 1 : ERROR;
    }
    if (rc != RAISED) {
        return rc;
    }
    PyObject *exc = T->sh->raised;
    T->sh->raised = NULL;
    if (exc != NULL && PyErr_GivenExceptionMatches(exc,
                                                   PyExc_AttributeError)) {
        Py_DECREF(exc);
        return 0;
    }
    return exc ? tc_tr_raise(T, exc)
               : tc_tr_unsupported(T, "an exception without a value");
}

/* RAISED at T's instruction (its stack as it was before it: sp items of
 * saved_stack): on to T's handler (OK, *next its code unit), or RAISED
 * for T's caller; the frame's own tracer says UNSUPPORTED. */
static int
catch_raised(tracer *T, int sp, int *next)
{
    int depth, lasti, at = T->depth > 0
        ? pyframe_exception_handler(T->co, T->pc, &depth, &lasti) : -1;
    PyObject *exc = T->sh->raised;
    if (exc == NULL) {
        return tc_tr_unsupported(T, "an exception without a value");
    }
    if (at < 0) {
        return T->depth > 0 ? RAISED : unsupported_raise(T, exc);
    }
    if (depth > sp) {
        return tc_tr_unsupported(T, "malformed stack at an except block");
    }
    memcpy(T->stack, T->saved_stack, depth * sizeof(tc_var *));
    T->sp = depth;
    PyObject *off = lasti ? PyLong_FromLong(T->pc) : NULL;
    if (lasti && (off == NULL
                  || tc_tr_push(T, tc_tr_const_var(T, off)) != OK)) {
        Py_XDECREF(off);
        return ERROR;
    }
    Py_XDECREF(off);
    /* a constant: its type, args and str() fold (the trace made it) */
    tc_var *e = tc_var_const(&T->sh->arena, exc, -1);
    Py_CLEAR(T->sh->raised);
    *next = at;
    return tc_tr_push(T, e);
}

/* Whether exc matches what an except clause names (an exception class,
 * or a tuple of them, pinned by identity where read from the frame):
 * 1/0, or UNSUPPORTED / ERROR. */
static int
exception_matches(tracer *T, PyObject *exc, tc_var *what)
{
    if (what->kind == TC_VAR_TUPLE) {
        int r = 0;
        for (int i = 0; r == 0 && i < what->nitems; i++) {
            r = exception_matches(T, exc, what->items[i]);
        }
        return r;
    }
    if (what->obj == NULL || !PyExceptionClass_Check(what->obj)) {
        return tc_tr_unsupported(T, "except of a %s",
                                 tc_var_kind_name(what));
    }
    if (what->source >= 0
        && tc_guard_id(T->out->guards, what->source, what->obj) < 0) {
        return ERROR;
    }
    return PyErr_GivenExceptionMatches(exc, what->obj);
}

/* The instructions of an except block: PUSH_EXC_INFO (the exception
 * handled before, None: the trace handles none), CHECK_EXC_MATCH,
 * POP_EXCEPT, RERAISE. */
static int
op_exception(tracer *T, int opcode, int oparg)
{
    tc_var *v = tc_tr_pop(T);
    if (v == NULL) {
        return tc_tr_unsupported(T, "malformed stack");
    }
    if (opcode == PUSH_EXC_INFO) {
        int rc = tc_tr_push(T, tc_tr_const_var(T, Py_None));
        return rc == OK ? tc_tr_push(T, v) : rc;
    }
    if (opcode == POP_EXCEPT) {
        return OK;
    }
    tc_var *exc = opcode == RERAISE ? v : tc_tr_peek(T, 1);
    if (exc == NULL || exc->kind != TC_VAR_CONST
        || !PyExceptionInstance_Check(exc->obj)) {
        return tc_tr_unsupported(T, "an except block of an exception the "
                                 "trace did not raise");
    }
    if (opcode == RERAISE) {
        if (oparg && tc_tr_pop(T) == NULL) {
            return tc_tr_unsupported(T, "malformed stack");
        }
        return tc_tr_raise(T, Py_NewRef(exc->obj));
    }
    int r = exception_matches(T, exc->obj, v);
    return r < 0 ? r : tc_tr_push(T, tc_tr_const_var(T, r ? Py_True
                                                        : Py_False));
}

/* ---- stack ---------------------------------------------------------------- */

int
tc_tr_push(tracer *T, tc_var *v)
{
    if (v == NULL) {
        return ERROR;
    }
    if (T->sp == T->stack_cap) {
        return tc_tr_unsupported(T, "value stack overflow");
    }
    T->stack[T->sp++] = v;
    return OK;
}

tc_var *
tc_tr_pop(tracer *T)
{
    return T->sp > 0 ? T->stack[--T->sp] : NULL;
}

tc_var *
tc_tr_peek(tracer *T, int n)
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

int
tc_tr_grow_grad(trace_shared *sh, int n)
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
    sh->grad = g;
    unsigned char *w = PyMem_Realloc(sh->ngw, cap);
    if (w == NULL) {
        PyErr_NoMemory();
        return ERROR;
    }
    sh->ngw = w;
    memset(g + sh->grad_cap, 0, cap - sh->grad_cap);
    memset(w + sh->grad_cap, 0, cap - sh->grad_cap);
    sh->grad_cap = cap;
    return OK;
}

int
tc_tr_node_requires_grad(const tracer *T, int node)
{
    return node >= 0 && node < T->sh->grad_cap && T->sh->grad[node];
}

int
tc_tr_requires_grad(const tracer *T, const tc_var *v)
{
    return v->kind == TC_VAR_TENSOR && tc_tr_node_requires_grad(T, v->node);
}

/* A node requires grad when grad mode is on and an operand of it does
 * (under no_grad results do not, as in eager).  After every traced
 * instruction the nodes it created are marked, here rather than in each
 * op, so every way of making nodes is covered; the graph then compiles
 * as an autograd node (frame_eval/autograd.c, docs/training.md). */
int
tc_tr_sync_grad(tracer *T)
{
    trace_shared *sh = T->sh;
    tc_graph *g = T->out->graph;
    if (tc_tr_grow_grad(sh, g->nnodes) != OK) {
        return ERROR;
    }
    for (; sh->grad_synced < g->nnodes; sh->grad_synced++) {
        tc_node *n = &g->nodes[sh->grad_synced];
        int needs = 0;
        for (int i = 0; i < n->nin; i++) {
            needs |= sh->grad[n->in[i]];
        }
        if (n->kind == TC_NODE_INPUT) {
            needs = sh->grad[sh->grad_synced];
        }
        else if (n->requires_grad == TC_GRAD_STOP) {
            needs = 0;
        }
        else {
            needs &= T->grad_mode != 0;
        }
        sh->grad[sh->grad_synced] = (unsigned char)needs;
        n->requires_grad = (unsigned char)needs;
        /* a value written under no_grad into a tensor that requires
         * grad: its views are such values too; an op under grad mode
         * that reads one would get eager's gradient wrong (mutation.c) */
        if (n->kind == TC_NODE_OP && n->nin > 0 && n->view_base >= 0) {
            sh->ngw[sh->grad_synced] |= sh->ngw[n->in[0]];
        }
        else if (n->kind == TC_NODE_OP && T->grad_mode) {
            for (int i = 0; i < n->nin; i++) {
                sh->ngw_read |= sh->ngw[n->in[i]];
            }
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
    tc_var_arena *a = &T->sh->arena;
    for (int i = 0; i < a->n; i++) {
        /* read from this source before (an optimizer's state[p] looked up
         * twice): that var, which in-place writes since have updated; a
         * second graph input would hold the value before them */
        tc_var *seen = a->vars[i];
        if (seen->kind == TC_VAR_TENSOR && seen->source == source
            && seen->obj == value) {
            return seen;
        }
    }
    int r = tc_tensor_read_meta(value, &m, &dt);
    if (r != 0) {
        PyObject *why = r > 0 ? tc_tensor_unsupported_reason(value) : NULL;
        *rc = why ? tc_tr_unsupported(T, "%U", why) : ERROR;
        Py_XDECREF(why);
        return NULL;
    }
    if (tc_guard_tensor(T->out->guards, source, value) < 0) {
        *rc = ERROR;
        return NULL;
    }
    if ((*rc = tc_tr_join_device(T, "a tensor", m.device_index)) != OK) {
        return NULL;
    }
    tc_layout l;
    l.ndim = m.ndim;
    memcpy(l.sizes, m.sizes, sizeof(l.sizes));
    memcpy(l.strides, m.strides, sizeof(l.strides));
    tc_var *v = tc_var_new(&T->sh->arena, TC_VAR_TENSOR, source);
    if (v == NULL || add_input(T, source) < 0) {
        *rc = ERROR;
        return NULL;
    }
    v->obj = Py_NewRef(value);  /* the tensor seen (hasattr asks it) */
    v->node = tc_graph_input(T->out->graph, dt, &l);
    if (v->node < 0) {
        *rc = tc_tr_unsupported(T, "graph input");
        return NULL;
    }
    tc_tr_place_since(T, v->node, m.device_index);
    if (tc_tr_grow_grad(T->sh, v->node + 1) != OK) {
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
    if (n > TC_MAX_ITEMS) {
        *rc = tc_tr_unsupported(T, "a sequence of %zd items", n);
        return NULL;
    }
    tc_var *items[TC_MAX_ITEMS];
    for (Py_ssize_t i = 0; i < n; i++) {
        int src = tc_source_add(T->out->guards, TC_SRC_ITEM, source, i, NULL);
        if (src < 0) {
            *rc = ERROR;
            return NULL;
        }
        items[i] = tc_tr_wrap_value(T, PySequence_Fast_GET_ITEM(value, i), src,
                                    rc);
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

int
tc_tr_is_python_scalar(PyObject *v)
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

/* The var of value (borrowed), attribute `name` of a var whose guard
 * source is owner_source: a source of its own, guarded like any other.
 * NULL with *rc set. */
tc_var *
tc_tr_attr_var(tracer *T, int owner_source, PyObject *name, PyObject *value,
               int *rc)
{
    int src = tc_source_add(T->out->guards, TC_SRC_ATTR, owner_source, 0,
                            name);
    if (src < 0) {
        *rc = ERROR;
        return NULL;
    }
    return tc_tr_wrap_value(T, value, src, rc);
}

/* LOAD_ATTR of attribute `name` of a var whose guard source is
 * owner_source: value is the attribute (a new reference, stolen), NULL if
 * reading it raised (a graph break naming `what`). */
int
tc_tr_push_attr(tracer *T, int owner_source, PyObject *name, PyObject *value,
                int method, const char *what)
{
    if (value == NULL) {
        return tc_tr_unsupported_from_exception(T, what);
    }
    int rc = OK;
    tc_var *v = tc_tr_attr_var(T, owner_source, name, value, &rc);
    Py_DECREF(value);
    return v == NULL ? rc : tc_tr_push_loaded_attr(T, v, method);
}

/* Pushes the result of LOAD_ATTR: v, after a NULL for a method load (v is
 * then called as a plain callable). */
int
tc_tr_push_loaded_attr(tracer *T, tc_var *v, int method)
{
    if (method
        && tc_tr_push(T, tc_var_new(&T->sh->arena, TC_VAR_NULL, -1)) < 0) {
        return ERROR;
    }
    return tc_tr_push(T, v);
}

PyObject *
tc_tr_lazy_attr(PyObject **slot, const char *module, const char *name)
{
    if (*slot == NULL) {
        /* name may be dotted: "Tensor.__lshift__" */
        PyObject *v = PyImport_ImportModule(module);
        char part[64];
        for (const char *p = name; v != NULL && *p != '\0';) {
            size_t n = strcspn(p, ".");
            snprintf(part, sizeof(part), "%.*s", (int)n, p);
            Py_SETREF(v, PyObject_GetAttrString(v, part));
            p += n + (p[n] == '.');
        }
        *slot = v;
        if (v == NULL) {
            PyErr_Clear();
        }
    }
    return *slot;
}

/* An instance of enum.Enum (its class's members are fixed). */
int
tc_tr_is_enum_member(PyObject *value)
{
    static PyObject *enum_cls;
    return tc_tr_lazy_attr(&enum_cls, "enum", "Enum") != NULL
           && PyObject_TypeCheck(value, (PyTypeObject *)enum_cls);
}

/* Turn a real value read from `source` into a var, installing the guards
 * that make the specialization valid. */
tc_var *
tc_tr_wrap_value(tracer *T, PyObject *value, int source, int *rc)
{
    tc_guard_set *gs = T->out->guards;
    tc_var *v;
    *rc = OK;
    /* torch.Tensor and nn.Parameter only: other subclasses may override
     * ops (__torch_function__) and must keep their type, so they stay
     * opaque and every op on them runs eagerly */
    if (tc_tensor_type_plain(value)) {
        return wrap_tensor(T, value, source, rc);
    }
    if (tc_tr_is_python_scalar(value)) {
        v = tc_var_const(&T->sh->arena, value, source);
        if (v != NULL) {
            v->kind = TC_VAR_LAZY;
        }
    }
    else if (PyBytes_CheckExact(value)) {
        /* (os.environ's storage) guarded by value only if used */
        v = tc_var_const(&T->sh->arena, value, source);
        if (v != NULL) {
            v->kind = TC_VAR_LAZY;
        }
    }
    else if (PyTuple_CheckExact(value) || PyList_CheckExact(value)
             || (PyTuple_Check(value)
                 && strcmp(Py_TYPE(value)->tp_name, "torch.Size") == 0)) {
        /* guarded (length, items; a torch.Size by value) only if the code
         * looks inside it */
        v = tc_var_const(&T->sh->arena, value, source);
        if (v != NULL) {
            v->kind = TC_VAR_LAZY;
        }
    }
    else if (tc_tr_is_enum_member(value) || value == Py_Ellipsis
             || value == Py_NotImplemented) {
        /* a member of an enum (a library's Action.NONE), or the builtin
         * Ellipsis (FX-printed code indexes x[(Ellipsis, slice(...))]):
         * fixed, guarded by identity, a constant for ==, `is` and `in` */
        if (tc_guard_id(gs, source, value) < 0) {
            *rc = ERROR;
            return NULL;
        }
        v = tc_var_const(&T->sh->arena, value, source);
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
int
tc_tr_reify(tracer *T, tc_var *v)
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

int
tc_tr_reify_all(tracer *T, tc_var **vs, int n)
{
    for (int i = 0; i < n; i++) {
        int rc = tc_tr_reify(T, vs[i]);
        if (rc != OK) {
            return rc;
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

/* The slot of the traced frame that holds cell, or -1.  Only after the
 * prologue do cell slots hold cells (a segment starting at pc 0 runs it
 * after the trace). */
static int
frame_cell_slot(void *root, PyObject *cell)
{
    tracer *R = root;
    if (cell == NULL || R->start_pc == 0) {
        return -1;
    }
    for (int i = 0; i < R->nlocals; i++) {
        if (is_cell_slot(R, i) && R->frame->localsplus[i] == cell) {
            return i;
        }
    }
    return -1;
}

/* A free variable of an inlined function: the contents of its closure
 * cell, read through the function's own source. */
static int
load_inlined_free(tracer *T, int i)
{
    if (!is_free_slot(T, i) || T->fn == NULL || T->fn_source < 0) {
        return tc_tr_unsupported(T, "read of unbound variable '%U'",
                                 local_name(T, i));
    }
    int j = i - (T->nlocals - T->co->co_nfreevars), rc;
    PyObject *cells = T->fn->func_closure;
    PyObject *cell = cells && j < PyTuple_GET_SIZE(cells)
                     ? PyTuple_GET_ITEM(cells, j) : NULL;
    int slot = frame_cell_slot(T->sh->root, cell);
    if (slot >= 0) {
        /* a cell of the frame being traced: the traced code may have
         * assigned the variable since (not written back yet) */
        tc_var *v;
        rc = tc_tr_local_value(T->sh->root, slot, &v);
        if (rc == OK) {
            T->locals[i] = v;
            rc = tc_tr_push(T, v);
        }
        return rc;
    }
    PyObject *value = cell ? PyCell_GET(cell) : NULL;
    if (value == NULL) {
        return tc_tr_unsupported(T, "read of unbound variable '%U'",
                                 local_name(T, i));
    }
    int src = tc_source_add(T->out->guards, TC_SRC_FUNC_CLOSURE,
                            T->fn_source, j, local_name(T, i));
    tc_var *v = src < 0 ? NULL : tc_tr_wrap_value(T, value, src, &rc);
    if (v == NULL) {
        return src < 0 ? ERROR : rc;
    }
    T->locals[i] = v;
    return tc_tr_push(T, v);
}

static int
load_local(tracer *T, int i)
{
    if (T->locals[i] != NULL && T->locals[i]->kind == TC_VAR_NULL) {
        return tc_tr_unsupported(T, "read of unbound variable '%U'",
                                 local_name(T, i));
    }
    if (T->locals[i] != NULL) {
        return tc_tr_push(T, T->locals[i]);
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
        return tc_tr_unsupported(T, "read of unbound variable '%U'",
                                 local_name(T, i));
    }
    tc_var *v = tc_tr_wrap_value(T, value, src, &rc);
    if (v == NULL) {
        return rc;
    }
    T->locals[i] = v;
    return tc_tr_push(T, v);
}

/* The value of local i (read from the frame, with its guard, if this
 * segment has not yet), for callers outside the opcode loop. */
int
tc_tr_local_value(tracer *T, int i, tc_var **out)
{
    int rc = load_local(T, i);
    *out = rc == OK ? tc_tr_pop(T) : NULL;
    return rc;
}

/* 3.12's inlined comprehensions save their iteration variable's outer
 * value (a NULL marker when unbound) on the stack, and STORE_FAST puts it
 * back afterwards. */
static int
load_fast_and_clear(tracer *T, int i)
{
    int unbound = T->locals[i] == NULL
                  && (T->depth > 0 || T->frame->localsplus[i] == NULL);
    if (is_cell_slot(T, i)) {
        return tc_tr_unsupported(T, "a comprehension variable in a closure");
    }
    int rc = unbound ? tc_tr_push(T, tc_var_new(&T->sh->arena, TC_VAR_NULL,
                                                -1))
                     : T->locals[i] && T->locals[i]->kind == TC_VAR_NULL
                     ? tc_tr_push(T, T->locals[i]) : load_local(T, i);
    if (rc != OK) {
        return rc;
    }
    T->locals[i] = tc_var_new(&T->sh->arena, TC_VAR_NULL, -1);
    T->written[i] = 1;
    return T->locals[i] != NULL ? OK : ERROR;
}

/* DELETE_FAST: the local becomes unbound (eager's UnboundLocalError for
 * one that is not bound comes from Python: a break before it). */
static int
delete_local(tracer *T, int i)
{
    if (is_cell_slot(T, i) || is_free_slot(T, i)) {
        return tc_tr_unsupported(T, "del of a variable in a closure");
    }
    int rc = load_local(T, i);
    if (rc != OK) {
        return rc;
    }
    tc_tr_pop(T);
    T->locals[i] = tc_var_new(&T->sh->arena, TC_VAR_NULL, -1);
    T->written[i] = 1;
    return T->locals[i] != NULL ? OK : ERROR;
}

/* LOAD_CLOSURE: the cell of the frame's variable i, for a closure that
 * MAKE_FUNCTION builds.  An inlined call of the closure reads the
 * variable's current value (tc_tr_inline_call); at an exit the template
 * is the frame's own cell object (the prologue made it).  Callees have
 * no frame of their own, so their closures stay graph breaks. */
static int
load_closure(tracer *T, int i)
{
    if (T->depth > 0 && is_free_slot(T, i) && T->frame_cells != NULL) {
        /* a cell of the frame passed on (nested comprehensions) */
        return tc_tr_push(T, T->frame_cells[i - (T->nlocals
                                                 - T->co->co_nfreevars)]);
    }
    tc_var *c = tc_var_new(&T->sh->arena, TC_VAR_CELL, -1);
    if (c == NULL) {
        return ERROR;
    }
    c->node = i;
    c->index = T->depth > 0 ? T->serial + 1 : 0;  /* an inlined call's
                                                     (inline.c) */
    return tc_tr_push(T, c);
}

static int
store_local(tracer *T, int i)
{
    if (is_free_slot(T, i)) {
        return tc_tr_unsupported(T,
                                 "write to closure variable '%U' (nonlocal)",
                                 local_name(T, i));
    }
    T->locals[i] = tc_tr_pop(T);
    T->written[i] = 1;
    return OK;
}

static int
load_global(tracer *T, PyObject *name)
{
    PyObject *cached = PyDict_GetItemWithError(T->global_vars, name);
    if (cached != NULL) {
        return tc_tr_push(T, T->sh->arena.vars[PyLong_AsLong(cached)]);
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
                                : tc_tr_unsupported(T,
                                                    "name '%U' is not defined",
                                                    name);
    }
    int rc;
    int src = T->globals_source < 0
        ? tc_source_add(T->out->guards, TC_SRC_GLOBAL, -1, 0, name)
        : tc_source_add(T->out->guards, TC_SRC_FUNC_GLOBAL, T->globals_source,
                        0, name);
    tc_var *v = src < 0 ? NULL : tc_tr_wrap_value(T, value, src, &rc);
    if (v == NULL) {
        return src < 0 ? ERROR : rc;
    }
    PyObject *idx = PyLong_FromLong(T->sh->arena.n - 1);
    if (idx == NULL || PyDict_SetItem(T->global_vars, name, idx) < 0) {
        Py_XDECREF(idx);
        return ERROR;
    }
    Py_DECREF(idx);
    return tc_tr_push(T, v);
}

/* Constants: tuples become TUPLE vars so they can be unpacked/indexed. */
tc_var *
tc_tr_const_var(tracer *T, PyObject *value)
{
    if (!PyTuple_CheckExact(value)) {
        /* a frozenset constant (`x in {"a", "b"}`) holds constants only */
        if (tc_tr_is_python_scalar(value) || is_known_object(value)
            || value == Py_Ellipsis || PySlice_Check(value)
            || PyFrozenSet_CheckExact(value)) {
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
        items[i] = tc_tr_const_var(T, PyTuple_GET_ITEM(value, i));
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
int
tc_tr_operand_node(tracer *T, tc_var *v, int *rc)
{
    tc_graph *g = T->out->graph;
    int node = -1;
    if (v->kind == TC_VAR_TENSOR) {
        return v->node;
    }
    if (tc_tr_reify(T, v) != OK) {
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
            *rc = tc_tr_unsupported(T, "an integer operand that does not "
                                    "fit int64");
            return -1;
        }
        node = tc_graph_scalar_int(g, x);
    }
    else if (v->kind == TC_VAR_CONST && PyFloat_CheckExact(v->obj)) {
        node = tc_graph_scalar_float(g, PyFloat_AS_DOUBLE(v->obj));
    }
    else {
        *rc = tc_tr_unsupported(T, "a tensor op with an operand of type %s",
                          tc_var_kind_name(v));
        return -1;
    }
    if (node < 0) {
        *rc = ERROR;
        PyErr_NoMemory();
    }
    return node;
}

int
tc_tr_emit_op(tracer *T, const char *op, int n, tc_var **args, tc_dtype attr)
{
    int nodes[TC_MAX_OP_INPUTS], rc = OK, any_tensor = 0;
    for (int i = 0; i < n; i++) {
        nodes[i] = tc_tr_operand_node(T, args[i], &rc);
        if (nodes[i] < 0) {
            return rc;
        }
        any_tensor |= args[i]->kind == TC_VAR_TENSOR;
    }
    if (!any_tensor) {
        return tc_tr_unsupported(T, "torch op '%s' on Python numbers only",
                                 op);
    }
    char err[256];
    int node = tc_graph_op(T->out->graph, op, n, nodes, attr, err, sizeof(err));
    if (node < 0) {
        return tc_tr_unsupported(T, "%s: %s", op, err);
    }
    tc_var *v = tc_var_new(&T->sh->arena, TC_VAR_TENSOR, -1);
    if (v == NULL) {
        return ERROR;
    }
    v->node = node;
    return tc_tr_push(T, v);
}

const tc_node *
tc_tr_tensor_node(tracer *T, tc_var *v)
{
    return &T->out->graph->nodes[v->node];
}

/* ---- control flow -------------------------------------------------------------- */

/* Truth value of a var known at trace time: 1/0, or -2 if data-dependent. */
static int
static_truth(tracer *T, tc_var *v)
{
    if (tc_tr_reify(T, v) != OK) {
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
    return tc_tr_object_truth(T, v);
}

static int
op_jump(tracer *T, tc_jump_kind kind, int target, int *next)
{
    if (kind == TC_JUMP_ALWAYS) {
        *next = target;
        return OK;
    }
    tc_var *v = tc_tr_peek(T, 1);
    if (v == NULL) {
        return tc_tr_unsupported(T, "malformed jump");
    }
    int taken;
    if (kind == TC_JUMP_POP_IF_NONE || kind == TC_JUMP_POP_IF_NOT_NONE) {
        int rc = tc_tr_reify(T, v);
        if (rc != OK) {
            return rc;
        }
        int tc_tr_is_none = v->kind == TC_VAR_CONST && v->obj == Py_None;
        taken = (kind == TC_JUMP_POP_IF_NONE) == tc_tr_is_none;
    }
    else {
        int t = static_truth(T, v);
        if (t == -2) {
            return tc_tr_unsupported(T, "data-dependent branch on a %s value",
                                     tc_var_kind_name(v));
        }
        int on_true = kind == TC_JUMP_POP_IF_TRUE
                      || kind == TC_JUMP_IF_TRUE_OR_POP;
        taken = on_true == t;
    }
    int keep = taken && (kind == TC_JUMP_IF_FALSE_OR_POP
                         || kind == TC_JUMP_IF_TRUE_OR_POP);
    if (!keep) {
        tc_tr_pop(T);
    }
    if (taken) {
        *next = target;
    }
    return OK;
}

/* ---- exits: what the frame must hold afterwards ----------------------------- */

int
tc_tr_output_index(tracer *T, int node)
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

static int var_template(tracer *T, tc_var *v, tc_template *t);

/* t->items: the templates of v's items. */
static int
items_template(tracer *T, tc_var *v, tc_template *t)
{
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
        return items_template(T, v, t);
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
        t->index = tc_tr_output_index(T, tc_tr_mut_identity(T, v->node));
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
        return items_template(T, v, t);
    case TC_VAR_CELL:
        t->kind = TC_TMPL_CELL;
        t->index = v->node;
        return OK;
    default:
        PyErr_SetString(PyExc_RuntimeError, "tcjit: no template for a var");
        return ERROR;
    }
}

/* v is or holds a closure over the frame's cells (TC_VAR_CELL items). */
static int
holds_cell(const tc_var *v, int depth)
{
    if (v->kind == TC_VAR_CELL) {
        return 1;
    }
    for (int i = 0; depth < 8 && i < v->nitems; i++) {
        if (v->items[i] != NULL && holds_cell(v->items[i], depth + 1)) {
            return 1;
        }
    }
    return 0;
}

static int
op_return(tracer *T, tc_var *v, int pushes)
{
    if (holds_cell(v, 0)) {
        /* the return value is built before the prologue makes the cells
         * (a first segment) and without the locals written back into
         * them: CPython returns it instead, after an exit that does both */
        return tc_tr_unsupported(T, "returning a closure over the "
                                 "function's variables");
    }
    T->out->exit.kind = TC_EXIT_RETURN;
    T->out->exit.set_grad = T->sh->set_grad;
    T->out->return_pc = T->pc;
    T->out->return_pushes = pushes;
    int rc = tc_tr_attach_effects(T, &v);  /* attribute writes (objects.c) */
    return rc != OK ? rc : var_template(T, v, &T->out->ret);
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
    case CALL_KW:
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
    x->set_grad = T->sh->set_grad;
    if (tc_tr_attach_effects(T, NULL) != OK) {  /* attribute writes */
        return ERROR;
    }
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

/* 3.13 keeps a call's NULL above the callable (TC_NULL_AFTER_CALLABLE);
 * the tracer's call paths take the 3.12 order.  `hi` is the stack depth of
 * the entry above the callable: swap the pair where it holds the NULL. */
static void
null_below_callable(tracer *T, int hi)
{
    if (TC_NULL_AFTER_CALLABLE && hi >= 1 && T->sp >= hi + 1
        && T->stack[T->sp - hi]->kind == TC_VAR_NULL) {
        tc_var *null = T->stack[T->sp - hi];
        T->stack[T->sp - hi] = T->stack[T->sp - hi - 1];
        T->stack[T->sp - hi - 1] = null;
    }
}

/* The other way, after an instruction pushed [NULL, value] (a method
 * LOAD_ATTR of a plain attribute, LOAD_GLOBAL with a NULL). */
static int
null_above_callable(tracer *T, int rc)
{
    if (TC_NULL_AFTER_CALLABLE && rc == OK && T->sp >= 2
        && T->stack[T->sp - 2]->kind == TC_VAR_NULL) {
        tc_var *null = T->stack[T->sp - 2];
        T->stack[T->sp - 2] = T->stack[T->sp - 1];
        T->stack[T->sp - 1] = null;
    }
    return rc;
}

/* LOAD_SUPER_ATTR (3.12+): super(class, self).name, as 3.11 spells it
 * (CALL of super, then LOAD_ATTR), through the same call and attribute
 * paths. */
static int
op_load_super_attr(tracer *T, int oparg)
{
    if (T->sp < 3) {
        return tc_tr_unsupported(T, "malformed stack");
    }
    tc_var *self = T->stack[T->sp - 1], *cls = T->stack[T->sp - 2];
    tc_var *sup = T->stack[T->sp - 3];
    T->sp -= 3;
    int method = TC_LOAD_SUPER_ATTR_IS_METHOD(oparg);
    tc_var *null = tc_var_new(&T->sh->arena, TC_VAR_NULL, -1);
    if (null == NULL || tc_tr_push(T, null) != OK || tc_tr_push(T, sup) != OK
        || tc_tr_push(T, cls) != OK || tc_tr_push(T, self) != OK) {
        return ERROR;
    }
    int rc = tc_tr_op_call(T, 2);
    if (rc == OK) {
        rc = tc_tr_op_load_attr(
            T, PyTuple_GET_ITEM(T->co->co_names,
                                TC_LOAD_SUPER_ATTR_NAME(oparg)), method);
    }
    return method ? null_above_callable(T, rc) : rc;
}

/* LOAD_FAST of a cell or free slot pushes the cell itself: 3.13's
 * spelling of LOAD_CLOSURE. */
static int
load_fast(tracer *T, int i)
{
    return TC_LOAD_FAST_OF_CELL_IS_CLOSURE && is_cell_slot(T, i)
           ? load_closure(T, i) : load_local(T, i);
}

/* CALL_KW (3.13): the keyword names are a constant tuple on the stack. */
static int
op_call_kw(tracer *T, int argc)
{
    tc_var *names = tc_tr_pop(T);
    if (names == NULL || names->kind != TC_VAR_TUPLE) {
        return tc_tr_unsupported(T, "malformed stack");
    }
    PyObject *kw = PyTuple_New(names->nitems);
    if (kw == NULL) {
        return ERROR;
    }
    for (int i = 0; i < names->nitems; i++) {
        PyObject *k = names->items[i]->obj;
        if (k == NULL || !PyUnicode_Check(k)) {
            Py_DECREF(kw);
            return tc_tr_unsupported(T, "keywords must be strings");
        }
        PyTuple_SET_ITEM(kw, i, Py_NewRef(k));
    }
    tc_var *keep = tc_var_const(&T->sh->arena, kw, -1);  /* owns kw */
    Py_DECREF(kw);
    if (keep == NULL) {
        return ERROR;
    }
    null_below_callable(T, argc + 1);
    T->kwnames = keep->obj;
    return tc_tr_op_call(T, argc);
}


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
        return load_fast(T, oparg);
    case LOAD_DEREF:
        return load_local(T, oparg);
    case STORE_FAST:
    case STORE_DEREF:
        return store_local(T, oparg);
    case LOAD_FAST_LOAD_FAST:  /* 3.13 pairs: two 4-bit slots */
    case STORE_FAST_STORE_FAST:
    case STORE_FAST_LOAD_FAST: {
        int rc = opcode == LOAD_FAST_LOAD_FAST ? load_fast(T, oparg >> 4)
                                               : store_local(T, oparg >> 4);
        return rc != OK ? rc
               : opcode == STORE_FAST_STORE_FAST ? store_local(T, oparg & 15)
               : load_fast(T, oparg & 15);
    }
    case TO_BOOL:
        /* 3.13 makes the condition a bool before POP_JUMP_IF_* and
         * UNARY_NOT; both take the value's truth in the tracer, and a
         * BRANCH exit takes bool() of it: the value stays as it is */
        return T->sp > 0 ? OK : tc_tr_unsupported(T, "malformed stack");
    case LOAD_FAST_AND_CLEAR:
        return load_fast_and_clear(T, oparg);
    case DELETE_FAST:
        return delete_local(T, oparg);
    case LOAD_CLOSURE:
        return load_closure(T, oparg);
    case LOAD_CONST:
        return tc_tr_push(
            T, tc_tr_const_var(T, PyTuple_GET_ITEM(co->co_consts, oparg)));
    case LOAD_GLOBAL:
        if ((oparg & 1)
            && tc_tr_push(T, tc_var_new(&T->sh->arena, TC_VAR_NULL, -1)) < 0) {
            return ERROR;
        }
        return (oparg & 1)
               ? null_above_callable(T, load_global(
                     T, PyTuple_GET_ITEM(co->co_names, oparg >> 1)))
               : load_global(T, PyTuple_GET_ITEM(co->co_names, oparg >> 1));
    case LOAD_ATTR:
    case LOAD_METHOD:
        if (TC_LOAD_ATTR_IS_METHOD(opcode, oparg)) {
            return null_above_callable(T, tc_tr_op_load_attr(
                T, PyTuple_GET_ITEM(co->co_names, TC_LOAD_ATTR_NAME(oparg)),
                1));
        }
        return tc_tr_op_load_attr(
            T, PyTuple_GET_ITEM(co->co_names, TC_LOAD_ATTR_NAME(oparg)), 0);
    case LOAD_SUPER_ATTR:
        return op_load_super_attr(T, oparg);
    case PUSH_NULL:
        return tc_tr_push(T, tc_var_new(&T->sh->arena, TC_VAR_NULL, -1));
    case KW_NAMES:
        T->kwnames = PyTuple_GET_ITEM(co->co_consts, oparg);
        return OK;
    case CALL:
        null_below_callable(T, oparg + 1);
        return tc_tr_op_call(T, oparg);
    case CALL_KW:
        return op_call_kw(T, oparg);
    case BINARY_OP:
        return tc_tr_op_binary(T, oparg);
    case COMPARE_OP:
        return tc_tr_op_compare(T, TC_COMPARE_OP_ARG(oparg));
    case STORE_SUBSCR:
        return tc_tr_op_store_subscr(T);
    case STORE_ATTR:
        return tc_tr_op_store_attr(T, PyTuple_GET_ITEM(co->co_names, oparg));
    case DELETE_ATTR:
        v = tc_tr_pop(T);
        return v ? tc_tr_op_delete_attr(T, v, PyTuple_GET_ITEM(co->co_names,
                                                               oparg))
                 : tc_tr_unsupported(T, "malformed stack");
    case RETURN_GENERATOR:
    case YIELD_VALUE:
        return tc_tr_op_generator(T, opcode);
    case BUILD_SET:
        return tc_tr_op_build_set(T, oparg);
    case SET_ADD:
    case SET_UPDATE:
        return tc_tr_op_set_add(T, oparg, opcode == SET_UPDATE);
    case IS_OP:
        return tc_tr_op_is(T, oparg);
    case IMPORT_NAME:
        return tc_tr_op_import_name(T, oparg);
    case IMPORT_FROM:
        return tc_tr_op_import_from(T, oparg);
    case CONTAINS_OP:
        return tc_tr_op_contains(T, oparg);
    case UNARY_NEGATIVE:
    case UNARY_INVERT:
    case UNARY_NOT:
        return tc_tr_op_unary(T, opcode);
    case BUILD_TUPLE:
        return tc_tr_op_build(T, TC_VAR_TUPLE, oparg);
    case BUILD_LIST:
        return tc_tr_op_build(T, TC_VAR_LIST, oparg);
    case LIST_EXTEND:
        return tc_tr_op_list_extend(T, oparg);
    case LIST_APPEND:
        return tc_tr_op_list_append(T, oparg);
    case MAP_ADD:
        return tc_tr_op_map_add(T, oparg);
    case UNPACK_SEQUENCE:
        return tc_tr_op_unpack(T, oparg);
    case UNPACK_EX:
        return tc_tr_op_unpack_ex(T, oparg);
    case BINARY_SUBSCR:
        return tc_tr_op_subscr(T);
    case BUILD_SLICE:
        return tc_tr_op_build_slice(T, oparg);
#if TC_HAVE_BINARY_SLICE
    case BINARY_SLICE:
        return tc_tr_op_binary_slice(T);
    case STORE_SLICE:
        return tc_tr_op_store_slice(T);
#endif
    case POP_TOP:
        return tc_tr_pop(T) ? OK : tc_tr_unsupported(T, "malformed stack");
    case COPY:
        v = tc_tr_peek(T, oparg);
        return v ? tc_tr_push(T, v) : tc_tr_unsupported(T, "malformed stack");
    case SWAP:
        if (T->sp < oparg) {
            return tc_tr_unsupported(T, "malformed stack");
        }
        v = T->stack[T->sp - 1];
        T->stack[T->sp - 1] = T->stack[T->sp - oparg];
        T->stack[T->sp - oparg] = v;
        return OK;
    case MAKE_FUNCTION:
        return tc_tr_op_make_function(T, oparg);
    case LOAD_BUILD_CLASS:
        return tc_tr_op_load_build_class(T);
    case GET_ITER:
        return tc_tr_op_get_iter(T);
    case FOR_ITER:
        return tc_tr_op_for_iter(T, oparg, next);
    case END_FOR:
        return tc_tr_pop(T) && (TC_END_FOR_POPS == 1 || tc_tr_pop(T))
               ? OK : tc_tr_unsupported(T, "malformed stack");
    case BEFORE_WITH:
        return tc_tr_op_before_with(T);
    case BUILD_MAP:
        return tc_tr_op_build_map(T, oparg, 0);
    case BUILD_CONST_KEY_MAP:
        return tc_tr_op_build_map(T, oparg, 1);
    case DICT_MERGE:
    case DICT_UPDATE:
        return tc_tr_op_dict_merge(T, oparg, opcode == DICT_MERGE);
    case CALL_FUNCTION_EX:
        null_below_callable(T, (oparg & 1) + 2);
        return tc_tr_op_call_ex(T, oparg);
    case FORMAT_VALUE:
        return tc_tr_op_format_value(T, oparg);
    case BUILD_STRING:
        return tc_tr_op_build_string(T, oparg);
    case RETURN_VALUE:
    case RETURN_CONST:
        v = opcode == RETURN_VALUE
            ? tc_tr_pop(T)
            : tc_tr_const_var(T, PyTuple_GET_ITEM(co->co_consts, oparg));
        if (v == NULL) {
            return opcode == RETURN_VALUE
                   ? tc_tr_unsupported(T, "malformed stack") : ERROR;
        }
        if (T->depth > 0) {
            T->inline_result = v;  /* an inlined callee returns */
            return OK;
        }
        return op_return(T, v, opcode == RETURN_VALUE);
    case RAISE_VARARGS:
        return tc_tr_op_raise(T, oparg);
    case PUSH_EXC_INFO:
    case POP_EXCEPT:
    case CHECK_EXC_MATCH:
    case RERAISE:
        return op_exception(T, opcode, oparg);
    default: {
        if (TC_IS_LIST_TO_TUPLE(opcode, oparg)) {
            return tc_tr_op_list_to_tuple(T);
        }
        PyObject *opname = NULL, *dis = PyImport_ImportModule("dis");
        if (dis != NULL) {
            PyObject *names = PyObject_GetAttrString(dis, "opname");
            opname = names ? PySequence_GetItem(names, opcode) : NULL;
            Py_XDECREF(names);
            Py_DECREF(dis);
        }
        PyErr_Clear();
        int rc = tc_tr_unsupported(T, "bytecode %S is not supported yet",
                                   opname ? opname : Py_None);
        Py_XDECREF(opname);
        return rc;
    }
    }
}

int
tc_tr_run(tracer *T)
{
    int pc = T->start_pc, budget = INSTRUCTION_BUDGET;
    while (pc < T->ncode) {
        T->pc = pc;
        int opcode, oparg;
        int next = pyframe_decode(T->code, T->ncode, &pc, &opcode, &oparg);
        int sp = T->sp;
        PyObject *kwnames = T->kwnames;
        memcpy(T->saved_stack, T->stack, sp * sizeof(tc_var *));
        int nnodes = T->out->graph->nnodes;
        int rc = --budget == 0
            ? tc_tr_unsupported(T, "more than %d instructions traced (a long "
                                "loop?)", INSTRUCTION_BUDGET)
            : trace_instruction(T, opcode, oparg, &next);
        if (rc == OK) {
            rc = tc_tr_sync_grad(T);
        }
        if (rc == RAISED && (rc = catch_raised(T, sp, &next)) == OK) {
            pc = next;
            continue;
        }
        if (rc == UNSUPPORTED && !T->sh->force_eager && T->depth == 0) {
            /* Python runs the instruction: no generic extern it (or a
             * callee it inlined) built may run too (an RNG op twice) */
            tc_graph_drop_effects(T->out->graph, nnodes);
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
    return tc_tr_unsupported(T, "fell off the end of the code");
}

/* ---- entry point ---------------------------------------------------------------- */

/* A segment after a break starts from the value stack the previous exit
 * wrote into the frame. */
static int
wrap_stack(tracer *T)
{
    int depth = T->frame->stacktop - T->nlocals;
    if (depth < 0 || depth > T->stack_cap) {
        return tc_tr_unsupported(T, "unexpected stack depth %d", depth);
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
            v = src < 0 ? NULL : tc_tr_wrap_value(T, base[i], src, &rc);
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
    sh->root = T;
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
    T->sh->entry_grad = T->grad_mode;
    /* The op registry promotes Python floats and int->float ops to
     * float32, torch's default default dtype. */
    PyObject *dt = tc_default_dtype();
    if (dt == NULL) {
        return ERROR;
    }
    if (tc_dtype_from_torch(dt) != TC_F32) {
        T->sh->force_eager = 1;
        return tc_tr_unsupported(T, "torch.set_default_dtype(%R) is not "
                                 "supported yet", dt);
    }
    int dm = tc_dispatch_modes_active();
    if (dm != 0) {
        /* a TorchDispatchMode sees every op torch dispatches: tcjit's
         * kernels would hide them from it */
        T->sh->force_eager = 1;
        return dm < 0 ? ERROR
                      : tc_tr_unsupported(T, "a TorchDispatchMode is active "
                                          "(its ops run eagerly)");
    }
    int fw = tc_forward_ad_active();
    if (fw != 0) {
        /* a dual tensor's tangent lives in autograd's forward-AD state,
         * which compiled kernels neither read nor propagate */
        T->sh->force_eager = 1;
        return fw < 0 ? ERROR
                      : tc_tr_unsupported(T, "forward-mode AD: a "
                                          "torch.autograd.forward_ad."
                                          "dual_level is active (its ops "
                                          "run eagerly)");
    }
    int ac = tc_autocast_enabled();
    if (ac != 0) {
        /* autocast changes ops' dtypes at dispatch: neither the registry's
         * dtype rules nor the meta runs of externs see it (GLOBAL_STATE
         * keeps a graph traced without it from running under it) */
        T->sh->force_eager = 1;
        return ac < 0 ? ERROR
                      : tc_tr_unsupported(T, "torch.autocast is enabled "
                                          "(autocast regions are not "
                                          "compiled yet)");
    }
    return start_pc > 0 ? wrap_stack(T) : OK;
}

void
tc_tr_fini(tracer *T)
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
    tc_tr_undo_to(sh, TC_UNDO_FINI);  /* (frees the undo log, effects) */
    Py_CLEAR(sh->raised);
    tc_var_arena_clear(&sh->arena);
    PyMem_Free(sh->inputs);
    PyMem_Free(sh->grad);
    PyMem_Free(sh->ngw);
    tc_tr_mut_free(sh->mut);
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
        rc = tc_tr_run(&T);
    }
    if (rc == ERROR && !PyErr_ExceptionMatches(PyExc_MemoryError)) {
        rc = tc_tr_unsupported_from_exception(&T, "tracing");
    }
    t->nmemo = T.nmemo;
    if (rc == DONE && tc_tr_mut_finish(&T) != OK) {
        rc = ERROR;
    }
    if (rc == DONE && (tc_graph_set_outputs(t->graph, T.nouts, T.outs) < 0
                       || tc_tr_mut_mark_outputs(t) < 0)) {
        PyErr_NoMemory();
        rc = ERROR;
    }
    if (rc == ERROR) {
        tc_tr_fini(&T);
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
    tc_tr_fini(&T);
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
tc_writebacks_clear(tc_writebacks *w)
{
    PyMem_Free(w->items);
    PyMem_Free(w->span);
    PyMem_Free(w->written);
    memset(w, 0, sizeof(*w));
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
    tc_writebacks_clear(&t->wb);
    Py_CLEAR(t->reason);
    memset(t, 0, sizeof(*t));
}
