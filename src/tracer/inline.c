/* inline.c - inlining Python functions and nn.Module calls.
 *
 * A call of a Python function is traced into the caller's graph by a
 * child tracer over the callee's code; a module call inlines its forward,
 * or maps a torch.nn layer to the functional op it computes.
 */
#include "tracer_internal.h"

#include "../guards/nn_module.h"

#define MAX_INLINE_DEPTH 32

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
        return tc_tr_unsupported(T, "too many positional arguments");
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
            rc = tc_tr_unsupported(T, "keyword argument '%U'", name);
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
            locals[slot]->index = T->serial;  /* the callee's own dict */
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
                 : tc_tr_unsupported(
                       T, "missing argument '%U'",
                       PyTuple_GET_ITEM(co->co_localsplusnames, i));
        }
        if ((locals[i] = tc_tr_const_var(T, d)) == NULL) {
            return ERROR;
        }
    }
    return OK;
}

/* The lists and dicts a callee built and returns become the caller's to
 * mutate (pysem.c check_mutable): the callee can no longer break. */
static void
adopt(tc_var *v, int from, int to, int depth)
{
    tc_tr_adopt_object(v, from, to);
    if (tc_tr_is_set_var(v) && v->index == from) {
        v->index = to;
    }
    if (depth > 4 || (v->kind != TC_VAR_TUPLE && v->kind != TC_VAR_LIST
                      && v->kind != TC_VAR_DICT
                      && !tc_tr_is_new_object(v))) {
        return;
    }
    if (v->kind != TC_VAR_TUPLE && !tc_tr_is_new_object(v) && v->source < 0
        && v->index == from) {
        v->index = to;
    }
    for (int i = 0; i < v->nitems; i++) {
        adopt(v->items[i], from, to, depth + 1);
    }
}

/* A callee reads its own module's globals: the caller's, or (a function
 * of another module) fn.__globals__ through the function's source. */
static int
tracer_init_inline(tracer *C, tracer *T, PyCodeObject *co,
                   PyFunctionObject *fn, int fn_source, tracer *owner)
{
    memset(C, 0, sizeof(*C));
    C->parent = T;
    C->sh = T->sh;
    C->out = T->out;
    C->frame = T->frame;
    C->co = co;
    C->fn = fn;
    C->fn_source = fn_source;
    C->depth = T->depth + 1;
    C->serial = ++T->sh->ntracers;
    C->grad_mode = T->grad_mode;
    C->nlocals = co->co_nlocalsplus;
    if (fn == NULL && owner != NULL) {
        /* a function the traced code made: it runs with the globals of
         * the code that made it (the frame, or an inlined call whose
         * variables it closes over) */
        T = owner;
    }
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

/* ---- closures over an inlined call's variables ----
 *
 * A nested function made by an inlined call over its variables is a
 * DEFERRED var (TC_TMPL_CALL of make_closure, spec = (code, globals,
 * defaults, kwdefaults, annotations)): its items are the cells (TC_VAR_CELL
 * of index = owner serial + 1) while the call is traced, so it sees their
 * current values; when the call returns them, its variables are final and
 * the items become their values.  The exit makes it with fresh cells
 * holding those values. */

static PyObject *
make_closure(PyObject *spec, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *cells = PyTuple_New(nargs);
    for (Py_ssize_t i = 0; cells && i < nargs; i++) {
        /* (a cell of the frame's is passed on: the closure reads the
         * frame's variable when it runs) */
        PyObject *c = PyCell_Check(args[i]) ? Py_NewRef(args[i])
                                            : PyCell_New(args[i]);
        if (c == NULL) {
            Py_CLEAR(cells);
            break;
        }
        PyTuple_SET_ITEM(cells, i, c);
    }
    if (cells == NULL) {
        return NULL;
    }
    PyObject *parts[TC_FN_NPARTS];
    for (int i = 0; i < TC_FN_CLOSURE; i++) {
        PyObject *p = PyTuple_GET_ITEM(spec, 2 + i);
        parts[i] = p == Py_None ? NULL : p;
    }
    parts[TC_FN_CLOSURE] = cells;
    PyObject *f = pyframe_make_function(PyTuple_GET_ITEM(spec, 0),
                                        PyTuple_GET_ITEM(spec, 1), parts);
    Py_DECREF(cells);
    return f;
}

static PyMethodDef make_closure_def = {
    "make_closure", (PyCFunction)(void (*)(void))make_closure, METH_FASTCALL,
    NULL};

int
tc_tr_is_closure(const tc_var *v)
{
    return v != NULL && v->kind == TC_VAR_DEFERRED && v->node == TC_TMPL_CALL
           && v->obj != NULL && PyCFunction_Check(v->obj)
           && ((PyCFunctionObject *)v->obj)->m_ml == &make_closure_def;
}

tc_var *
tc_tr_make_closure(tracer *T, PyObject *code, PyObject *const *parts,
                   tc_var *cells)
{
    PyObject *spec = PyTuple_Pack(5, code, T->globals,
                                  parts[0] ? parts[0] : Py_None,
                                  parts[1] ? parts[1] : Py_None,
                                  parts[2] ? parts[2] : Py_None);
    PyObject *fn = spec ? PyCFunction_New(&make_closure_def, spec) : NULL;
    Py_XDECREF(spec);
    tc_var *v = fn ? tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED, cells->nitems,
                                cells->items) : NULL;
    if (v == NULL) {
        Py_XDECREF(fn);
        return NULL;
    }
    v->node = TC_TMPL_CALL;
    v->obj = fn;
    return v;
}

PyObject *
tc_tr_closure_code(const tc_var *v)
{
    return PyTuple_GET_ITEM(PyCFunction_GET_SELF(v->obj), 0);
}

/* A function with the closure's code, globals and defaults (for binding
 * arguments and reading globals; never run). */
static PyObject *
closure_function(tc_var *v)
{
    PyObject *spec = PyCFunction_GET_SELF(v->obj);
    PyObject *parts[TC_FN_NPARTS] = {NULL};
    for (int i = 0; i < TC_FN_CLOSURE; i++) {
        PyObject *p = PyTuple_GET_ITEM(spec, 2 + i);
        parts[i] = p == Py_None ? NULL : p;
    }
    return pyframe_make_function(PyTuple_GET_ITEM(spec, 0),
                                 PyTuple_GET_ITEM(spec, 1), parts);
}

/* The items of the closures in v (a returned value) that are cells of
 * call C become the cells' values: C's variables are final now. */
static int
freeze_closures(tracer *C, tc_var *v, int depth)
{
    if (depth > 6) {
        return OK;
    }
    if (tc_tr_is_closure(v)) {
        for (int i = 0; i < v->nitems; i++) {
            tc_var *c = v->items[i];
            if (c->kind != TC_VAR_CELL || c->index != C->serial + 1) {
                continue;
            }
            if (C->locals[c->node] == NULL) {
                return tc_tr_unsupported(C, "a closure over a variable that "
                                         "is not set");
            }
            v->items[i] = C->locals[c->node];
        }
    }
    for (int i = 0; i < v->nitems; i++) {
        if (v->items[i] != NULL && v->items[i]->kind != TC_VAR_CELL) {
            int rc = freeze_closures(C, v->items[i], depth + 1);
            if (rc != OK) {
                return rc;
            }
        }
    }
    return OK;
}

/* The tracer whose variables the cells of a closure the traced code made
 * are (the frame's: the root; an inlined call's: that call, if it is
 * still being traced), or NULL. */
static tracer *
closure_owner(tracer *T, tc_var *callable)
{
    if (callable->kind != TC_VAR_DEFERRED) {
        return NULL;
    }
    int serial = -1;
    for (int i = 0; i < callable->nitems; i++) {
        if (callable->items[i]->kind == TC_VAR_CELL) {
            serial = callable->items[i]->index - 1;
        }
    }
    if (serial < 0) {
        return (tracer *)T->sh->root;
    }
    for (tracer *t = T; t != NULL; t = (tracer *)t->parent) {
        if (t->serial == serial && t->depth > 0) {
            return t;
        }
    }
    return NULL;
}

/* Whether every inlined cell v holds belongs to T or a caller of T
 * (still traced: the closure stays valid). */
static int
holds_live_cells_of_caller(tracer *T, const tc_var *v)
{
    if (v->kind == TC_VAR_CELL) {
        if (v->index <= 0) {
            return 1;
        }
        for (tracer *t = T; t != NULL; t = (tracer *)t->parent) {
            if (t->depth > 0 && t->serial == v->index - 1) {
                return 1;
            }
        }
        return 0;
    }
    for (int i = 0; i < v->nitems; i++) {
        if (v->items[i] != NULL && !holds_live_cells_of_caller(T,
                                                               v->items[i])) {
            return 0;
        }
    }
    return 1;
}

int
tc_tr_holds_inlined_cell(const tc_var *v, int depth)
{
    if (v->kind == TC_VAR_CELL) {
        return v->index > 0;
    }
    for (int i = 0; depth < 6 && i < v->nitems; i++) {
        if (v->items[i] != NULL && tc_tr_holds_inlined_cell(v->items[i],
                                                            depth + 1)) {
            return 1;
        }
    }
    return 0;
}

/* The free variables of a make_closure closure: its owner's current
 * values, or the values it was frozen with. */
static int
bind_closure_values(tracer *C, tracer *T, tc_var *closure, PyCodeObject *co)
{
    int nfree = co->co_nfreevars;
    if (closure->nitems != nfree) {
        return tc_tr_unsupported(T, "a closure of %d cells for %d free "
                                 "variables", closure->nitems, nfree);
    }
    for (int j = 0; j < nfree; j++) {
        tc_var *c = closure->items[j], *v = c;
        int rc = OK;
        if (c->kind == TC_VAR_CELL && c->index == 0) {
            rc = tc_tr_local_value((tracer *)T->sh->root, c->node, &v);
        }
        else if (c->kind == TC_VAR_CELL) {
            tracer *owner = NULL;
            for (tracer *t = T; t != NULL; t = (tracer *)t->parent) {
                if (t->depth > 0 && t->serial == c->index - 1) {
                    owner = t;
                }
            }
            if (owner == NULL || (v = owner->locals[c->node]) == NULL) {
                rc = tc_tr_unsupported(T, "a closure over a variable that is "
                                       "not set");
            }
        }
        if (rc != OK) {
            return rc;
        }
        C->locals[C->nlocals - nfree + j] = v;
    }
    return OK;
}

/* The free variables of a closure the traced frame made (MAKE_FUNCTION
 * over LOAD_CLOSURE cells): the current values of the frame's variables,
 * which the callee can read but not assign (STORE_DEREF of a free slot is
 * unsupported), so the values stay right for the whole call. */
static int
bind_closure(tracer *C, tracer *T, tc_var *callable, PyCodeObject *co)
{
    int nfree = co->co_nfreevars;
    if (callable->node != TC_TMPL_FUNCTION || callable->nitems != nfree) {
        return tc_tr_unsupported(T, "a closure of %d cells for %d free "
                                 "variables", callable->nitems, nfree);
    }
    for (int j = 0; j < nfree; j++) {
        if (callable->items[j]->kind != TC_VAR_CELL) {
            return tc_tr_unsupported(T, "a closure over cells the traced "
                                     "code did not make");
        }
    }
    tracer *owner = closure_owner(T, callable);
    if (owner == NULL) {
        return tc_tr_unsupported(T, "a closure of a call that has returned");
    }
    for (int j = 0; j < nfree; j++) {
        tc_var *v = NULL;
        int slot = callable->items[j]->node, rc = OK;
        if (owner->depth == 0) {
            rc = tc_tr_local_value(owner, slot, &v);
        }
        else if ((v = owner->locals[slot]) == NULL) {
            rc = tc_tr_unsupported(T, "a closure over a variable not set "
                                   "yet");
        }
        if (rc != OK) {
            return rc;
        }
        C->locals[C->nlocals - nfree + j] = v;
    }
    C->frame_cells = callable->items;
    return OK;
}

static int inline_call(tracer *T, tc_var *callable, tc_var **args,
                       int nargs, PyObject *kwnames, tc_var *closure);

/* A closure of an inlined call (make_closure): traced as a function with
 * its code, globals and defaults, its free variables bound to the
 * owner's current values (while the owner is traced) or the final ones. */
static int
call_closure(tracer *T, tc_var *callable, tc_var **args, int nargs,
             PyObject *kwnames)
{
    PyObject *f = closure_function(callable);
    tc_var *fv = f ? tc_var_new(&T->sh->arena, TC_VAR_UNKNOWN, -1) : NULL;
    if (fv == NULL) {
        Py_XDECREF(f);
        return ERROR;
    }
    fv->obj = f;
    return inline_call(T, fv, args, nargs, kwnames, callable);
}

/* Calls of Python functions are traced into the caller's graph: functions
 * read from the frame (guarded by identity, so their code, defaults,
 * globals and closure cells are those traced), and lambdas made by the
 * traced code itself (callable is DEFERRED).  If the callee cannot be
 * traced whole, the call is a STEP of the caller (the callee then
 * compiles on its own when it runs). */
int
tc_tr_inline_call(tracer *T, tc_var *callable, tc_var **args, int nargs,
                  PyObject *kwnames)
{
    return inline_call(T, callable, args, nargs, kwnames, NULL);
}

/* torch's own function behind a torch._dynamo.disable wrapper (borrowed),
 * or NULL.  Dynamo wraps torch internals it cannot trace (once it has
 * run, every optimizer's _init_group); that says nothing about tcjit, which
 * traces the function itself.  A user's torch.compiler.disable is kept:
 * its call runs in Python. */
static PyObject *
dynamo_disabled_torch_fn(PyFunctionObject *fn)
{
    PyObject *d = fn->func_dict;
    PyObject *orig = d ? PyDict_GetItemString(d, "_torchdynamo_orig_callable")
                       : NULL;
    if (orig == NULL || !PyFunction_Check(orig)
        || PyDict_GetItemString(d, "_torchdynamo_disable") != Py_True) {
        return NULL;
    }
    PyObject *mod = ((PyFunctionObject *)orig)->func_module;
    const char *m = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
    if (m == NULL) {
        PyErr_Clear();
        return NULL;
    }
    return strncmp(m, "torch.", 6) == 0 ? orig : NULL;
}

static int
inline_call(tracer *T, tc_var *callable, tc_var **args, int nargs,
            PyObject *kwnames, tc_var *closure)
{
    PyFunctionObject *fn = NULL;
    PyCodeObject *co;
    if (tc_tr_is_closure(callable)) {
        return call_closure(T, callable, args, nargs, kwnames);
    }
    if (callable->kind == TC_VAR_DEFERRED) {
        co = (PyCodeObject *)callable->obj;
    }
    else {
        fn = (PyFunctionObject *)callable->obj;
        co = (PyCodeObject *)fn->func_code;
        PyObject *orig = dynamo_disabled_torch_fn(fn);
        if (orig != NULL) {
            tc_var *v = tc_var_const(&T->sh->arena, orig, -1);
            return v ? inline_call(T, v, args, nargs, kwnames, closure)
                     : ERROR;
        }
    }
    const int unsupported_flags = CO_GENERATOR | CO_COROUTINE
        | CO_ASYNC_GENERATOR;
    if (T->depth >= MAX_INLINE_DEPTH) {
        return tc_tr_unsupported(T,
                                 "call to %U: calls nested deeper than %d are "
                                 "not inlined", co->co_qualname,
                                 MAX_INLINE_DEPTH);
    }
    /* a generator expression is run to its end where it is made (what
     * consumes it, tuple(), all(), a loop, gets an iterator over what it
     * yielded); other generators are not inlined */
    int genexpr = (co->co_flags & CO_GENERATOR)
        && PyUnicode_CompareWithASCIIString(co->co_name, "<genexpr>") == 0;
    if ((co->co_flags & unsupported_flags) && !genexpr) {
        return tc_tr_unsupported(T,
                                 "call to %U (not inlined: generators are not "
                                 "inlined)", co->co_qualname);
    }
    /* the code, defaults, globals and cells traced are those of this
     * function (guards.h: tc_guard_function); a function without a source
     * is a method found on a type that a TYPE guard already pins
     * (nn.Module.forward) */
    if (fn != NULL && callable->source >= 0
        && tc_guard_function(T->out->guards, callable->source,
                             callable->obj) < 0) {
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
    int undo_mark = T->sh->nundo, fx_mark = T->sh->nfx;
    int set_grad = T->sh->set_grad;
    tracer *owner = fn == NULL ? closure_owner(T, callable) : NULL;
    if (fn == NULL && owner == NULL) {
        return tc_tr_unsupported(T, "call to %U (a closure of a call that "
                                 "has returned)", co->co_qualname);
    }
    int mark[2];
    tc_tr_mut_mark(T, mark);
    int rc = tracer_init_inline(&C, T, co, fn, fn_source, owner);
    if (rc == OK) {
        rc = bind_arguments(&C, fn, co, args, nargs, kwnames, C.locals);
    }
    if (rc == OK && callable->kind == TC_VAR_DEFERRED && co->co_nfreevars) {
        rc = bind_closure(&C, T, callable, co);
    }
    if (rc == OK && closure != NULL) {
        rc = bind_closure_values(&C, T, closure, co);
    }
    if (rc == OK && genexpr) {
        C.yielded = tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, 0, NULL);
        rc = C.yielded ? OK : ERROR;
    }
    if (rc == OK) {
        rc = tc_tr_run(&C);
    }
    tc_var *result = C.inline_result;
    if (rc == DONE && genexpr) {
        result = tc_tr_iter_of(T, C.yielded);
        rc = result ? DONE : ERROR;
    }
    if (rc == DONE && result != NULL) {
        /* closures over the callee's variables keep their final values */
        rc = freeze_closures(&C, result, 0);
        rc = rc == OK ? DONE : rc;
    }
    tc_tr_fini(&C);
    if (rc == DONE && result != NULL
        && tc_tr_holds_inlined_cell(result, 0)
        && !holds_live_cells_of_caller(T, result)) {
        rc = tc_tr_unsupported(T, "returning a closure over the "
                               "variables of an inlined call");
    }
    if (rc == RAISED && (T->depth > 0 || T->sh->catching > 0)) {
        /* to a try block up the chain: what the callee did stays, as in
         * Python (the frame's own caller runs the call in Python: undone
         * below) */
        T->grad_mode = C.grad_mode;
        return RAISED;
    }
    if (rc == DONE && result != NULL) {
        adopt(result, C.serial, T->serial, 0);
        T->grad_mode = C.grad_mode;  /* torch.set_grad_enabled() in it */
        if (T->depth == 0) {
            tc_tr_undo_to(T->sh, -undo_mark - 1);  /* kept: forget them */
        }
        return tc_tr_push(T, result);
    }
    /* the call runs in Python (or as an extern): the objects it changed
     * are as they were, the attributes it set are not set, the tensors it
     * wrote are not written */
    tc_tr_undo_to(T->sh, undo_mark);
    T->sh->nfx = fx_mark;
    T->sh->set_grad = set_grad;
    tc_tr_mut_rollback(T, mark);
    if (rc == RAISED) {
        PyObject *exc = T->sh->raised;
        T->sh->raised = NULL;
        rc = exc ? tc_tr_unsupported(T, "%s: %S", Py_TYPE(exc)->tp_name, exc)
                 : tc_tr_unsupported(T, "an exception without a value");
        Py_XDECREF(exc);
    }
    if (rc == UNSUPPORTED) {
        PyObject *why = Py_NewRef(T->out->reason);
        int line = T->out->reason_line;
        rc = tc_tr_unsupported(T, "call to %U (not inlined: %U at %U:%d)",
                               co->co_qualname, why, co->co_filename, line);
        Py_DECREF(why);
    }
    return rc == DONE ? tc_tr_unsupported(T, "inlining failed") : rc;
}

/* RETURN_GENERATOR and YIELD_VALUE of a generator expression being run to
 * its end (tc_tr_inline_call): what it yields is collected, and the value
 * sent back into it is None, as next() sends. */
int
tc_tr_op_generator(tracer *T, int opcode)
{
    if (T->yielded == NULL) {
        return tc_tr_unsupported(T, "a generator");
    }
    if (opcode == YIELD_VALUE) {
        tc_var *v = tc_tr_pop(T), *items[TC_MAX_ITEMS];
        int n = T->yielded->nitems;
        if (v == NULL || n >= TC_MAX_ITEMS) {
            return v ? tc_tr_unsupported(T, "a generator of more than %d "
                                         "items", TC_MAX_ITEMS)
                     : tc_tr_unsupported(T, "malformed stack");
        }
        memcpy(items, T->yielded->items, n * sizeof(tc_var *));
        items[n] = v;
        T->yielded = tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, n + 1, items);
        if (T->yielded == NULL) {
            return ERROR;
        }
    }
    return tc_tr_push(T, tc_tr_const_var(T, Py_None));
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
int
tc_tr_nn_module_attr(tracer *T, tc_var *mod, PyObject *name, int method)
{
    tc_var *set = tc_tr_pending_attr(T, mod, name);
    if (set != NULL) {
        /* written earlier in this segment (made at its exit) */
        return tc_tr_push_loaded_attr(T, set, method);
    }
    PyObject *descr = _PyType_Lookup(Py_TYPE(mod->obj), name);
    if (method && descr != NULL && PyFunction_Check(descr)) {
        tc_var *f = class_function(T, descr);
        return f == NULL || tc_tr_push(T, f) < 0 ? ERROR : tc_tr_push(T, mod);
    }
    return tc_tr_push_attr(T, mod->source, name,
                           tc_nn_getattr(mod->obj, name), method,
                           "module attribute");
}

/* The var of attribute `name` of module var mod (see nn_module_attr). */
static tc_var *
nn_attr_var(tracer *T, tc_var *mod, const char *name, int *rc)
{
    PyObject *key = PyUnicode_InternFromString(name);
    *rc = key ? tc_tr_nn_module_attr(T, mod, key, 0) : ERROR;
    Py_XDECREF(key);
    return *rc == OK ? tc_tr_pop(T) : NULL;
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
        return tc_tr_unsupported(T, "%s is not available in this torch", path);
    }
    for (int i = 0; i < n; i++) {
        args[i] = attrs[i] ? nn_attr_var(T, mod, attrs[i], &rc) : input;
        if (args[i] == NULL) {
            return rc;
        }
    }
    return tc_tr_call_binding(T, b, args, n, kwnames);
}

/* nn.Sequential: each submodule in order, unrolled (the count is
 * guarded). */
static int
call_sequential(tracer *T, tc_var *mod, tc_var *x)
{
    PyObject *subs = PyObject_GetAttrString(mod->obj, "_modules");
    if (subs == NULL || !PyDict_Check(subs)) {
        Py_XDECREF(subs);
        return tc_tr_unsupported_from_exception(T, "Sequential._modules");
    }
    if (tc_guard_length(T->out->guards, mod->source, mod->obj) < 0) {
        Py_DECREF(subs);
        return ERROR;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    int rc = OK;
    while (rc == OK && PyDict_Next(subs, &pos, &key, &value)) {
        rc = tc_tr_nn_module_attr(T, mod, key, 0);
        tc_var *sub = rc == OK ? tc_tr_pop(T) : NULL;
        if (sub != NULL && sub->kind != TC_VAR_NN_MODULE) {
            rc = tc_tr_unsupported(T, "Sequential item %R is not a module",
                                   key);
        }
        rc = rc == OK ? tc_tr_call_nn_module(T, sub, &x, 1, NULL) : rc;
        x = rc == OK ? tc_tr_pop(T) : NULL;
    }
    Py_DECREF(subs);
    return rc == OK ? tc_tr_push(T, x) : rc;
}

/* nn.Linear, nn.LayerNorm, ...: their forward is one functional call on
 * attributes, which bindings.c already traces; the op registry names the
 * class beside the op (ops.h tc_op_module), so that torch's own modules
 * need no cross-module inlining. */
static int
call_torch_module(tracer *T, tc_var *mod, tc_var *x, int *handled)
{
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
        return tc_tr_push(T, x);
    }
    if (strcmp(name, "Sequential") == 0) {
        return call_sequential(T, mod, x);
    }
    if (strcmp(name, "GELU") == 0) {
        int rc;
        tc_var *args[2] = {x, nn_attr_var(T, mod, "approximate", &rc)};
        PyObject *kw = Py_BuildValue("(s)", "approximate");
        rc = args[1] && kw
             ? tc_tr_call_binding(T, tc_binding_by_path("F.gelu"), args, 2,
                                  kw)
             : (args[1] ? ERROR : rc);
        Py_XDECREF(kw);
        return rc;
    }
    if (strncmp(name, "Conv", 4) == 0) {
        int rc;
        tc_var *mode = nn_attr_var(T, mod, "padding_mode", &rc);
        if (mode == NULL || tc_tr_reify(T, mode) != OK) {
            return mode == NULL ? rc : ERROR;
        }
        if (mode->kind != TC_VAR_CONST || !PyUnicode_Check(mode->obj)
            || PyUnicode_CompareWithASCIIString(mode->obj, "zeros") != 0) {
            return tc_tr_unsupported(T,
                                     "%s with padding_mode other than 'zeros'",
                                     name);
        }
    }
    const tc_nn_binding *nb = tc_binding_nn(name);
    if (nb != NULL) {
        return nn_call_functional(T, nb->path, mod, x, nb->attrs, nb->n,
                                  NULL);
    }
    *handled = 0;
    return OK;
}

/* Without hooks, Module.__call__ is m.forward(*args): torch's own modules
 * map onto functional calls, other modules inline type(m).forward with
 * self = m (a module with its own instance "forward" is left to Python). */
int
tc_tr_call_nn_module(tracer *T, tc_var *mod, tc_var **args, int nargs,
                     PyObject *kwnames)
{
    static PyObject *str_forward;
    PyObject *m = mod->obj;
    int hooks = tc_nn_has_hooks(m);
    if (hooks != 0) {
        return hooks < 0 ? ERROR
             : tc_tr_unsupported(T,
                                 "call of %s, a module with hooks (the hooks "
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
        return tc_tr_unsupported(T, "call of module %s (its forward is not "
                                 "a plain method)", Py_TYPE(m)->tp_name);
    }
    tc_var *f = class_function(T, forward), *full[17];
    if (f == NULL) {
        return ERROR;
    }
    full[0] = mod;
    memcpy(full + 1, args, sizeof(tc_var *) * nargs);
    return tc_tr_inline_call(T, f, full, nargs + 1, kwnames);
}

/* for m in self.layers: Sequential and ModuleList yield their submodules,
 * ModuleDict its keys, in _modules order.  The container becomes a tuple
 * var (its length guarded; each submodule a source of its own). */
/* "ModuleList", "Sequential" or "ModuleDict" if tp is that container of
 * torch.nn, or a subclass that iterates as it does (torchvision's MLPBlock
 * is a Sequential with its own __init__); else NULL. */
static const char *
container_kind(PyTypeObject *tp)
{
    static const char *const names[] = {"ModuleList", "Sequential",
                                        "ModuleDict", NULL};
    PyObject *mro = tp->tp_mro;
    PyObject *it = PyUnicode_InternFromString("__iter__");
    const char *r = NULL;
    for (Py_ssize_t i = 0; it && mro && i < PyTuple_GET_SIZE(mro) && !r; i++) {
        PyTypeObject *base = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        PyObject *mod = PyDict_GetItemString(base->tp_dict, "__module__");
        if (mod == NULL || !PyUnicode_Check(mod)
            || PyUnicode_CompareWithASCIIString(
                   mod, "torch.nn.modules.container") != 0) {
            continue;
        }
        for (int k = 0; names[k] && !r; k++) {
            if (strcmp(base->tp_name, names[k]) == 0
                && _PyType_Lookup(tp, it) == _PyType_Lookup(base, it)) {
                r = names[k];
            }
        }
    }
    Py_XDECREF(it);
    PyErr_Clear();
    return r;
}

tc_var *
tc_tr_nn_container_items(tracer *T, tc_var *mod, int *rc)
{
    if (tc_tr_is_module_slice(mod)) {
        /* self.layers[:n]: the slice of its items */
        tc_var *all = tc_tr_nn_container_items(T, mod->items[0], rc);
        if (all == NULL) {
            return NULL;
        }
        Py_ssize_t start, stop, step, n;
        tc_var *items[64];
        if (PySlice_Unpack(mod->items[1]->obj, &start, &stop, &step) < 0) {
            *rc = ERROR;
            return NULL;
        }
        n = PySlice_AdjustIndices(all->nitems, &start, &stop, step);
        for (Py_ssize_t i = 0; i < n && i < 64; i++) {
            items[i] = all->items[start + i * step];
        }
        tc_var *r = tc_var_seq(&T->sh->arena, TC_VAR_TUPLE,
                               (int)(n < 64 ? n : 64), items);
        *rc = r ? OK : ERROR;
        return r;
    }
    const char *name = container_kind(Py_TYPE(mod->obj));
    int keys = name != NULL && strcmp(name, "ModuleDict") == 0;
    tc_var *items[64];
    *rc = OK;
    if (name == NULL) {
        return NULL;
    }
    PyObject *subs = PyObject_GetAttrString(mod->obj, "_modules");
    if (subs == NULL || !PyDict_Check(subs) || PyDict_GET_SIZE(subs) > 64
        || tc_guard_length(T->out->guards, mod->source, mod->obj) < 0) {
        Py_XDECREF(subs);
        *rc = PyErr_Occurred() ? ERROR
                               : tc_tr_unsupported(T, "a module container of "
                                                   "more than 64 items");
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
        *rc = tc_tr_nn_module_attr(T, mod, key, 0);
        if (*rc == OK) {
            items[n++] = tc_tr_pop(T);
        }
    }
    Py_DECREF(subs);
    return *rc == OK ? tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, n, items)
                     : NULL;
}

/* seq[a:b] of nn.Sequential / ModuleList: a new container of the same
 * class, made (by its own __getitem__) only if it leaves the segment;
 * inside, it is the slice of the items (tc_tr_nn_container_items). */
static PyObject *
slice_module(PyObject *unused, PyObject *const *args, Py_ssize_t nargs)
{
    (void)unused;
    if (nargs != 2) {
        PyErr_SetString(PyExc_SystemError, "tcjit: malformed module slice");
        return NULL;
    }
    return PyObject_GetItem(args[0], args[1]);
}

static PyMethodDef slice_module_def = {
    "slice_module", (PyCFunction)(void (*)(void))slice_module,
    METH_FASTCALL, NULL};

int
tc_tr_is_module_slice(const tc_var *v)
{
    return v != NULL && v->kind == TC_VAR_DEFERRED && v->node == TC_TMPL_CALL
           && v->obj != NULL && PyCFunction_Check(v->obj)
           && ((PyCFunctionObject *)v->obj)->m_ml == &slice_module_def;
}

/* seq[i] of nn.Sequential / ModuleList / ModuleDict: the submodule, a
 * source of its own (getattr(seq, "i") is what their __getitem__ reads). */
int
tc_tr_index_nn_module(tracer *T, tc_var *mod, tc_var *idx)
{
    PyObject *key = NULL;
    if (idx->kind == TC_VAR_CONST && PyLong_CheckExact(idx->obj)) {
        Py_ssize_t n = PyObject_Length(mod->obj), i = PyLong_AsSsize_t(idx->obj);
        if (n < 0) {
            return tc_tr_unsupported_from_exception(T, "len() of a module");
        }
        if (i < -n || i >= n) {
            return tc_tr_unsupported(T, "module index out of range");
        }
        if (tc_guard_length(T->out->guards, mod->source, mod->obj) < 0) {
            return ERROR;
        }
        key = PyUnicode_FromFormat("%zd", i < 0 ? i + n : i);
    }
    else if (idx->kind == TC_VAR_CONST && PyUnicode_CheckExact(idx->obj)) {
        key = Py_NewRef(idx->obj);
    }
    else if (idx->kind == TC_VAR_CONST && PySlice_Check(idx->obj)
             && strcmp(Py_TYPE(mod->obj)->tp_name, "ModuleDict") != 0) {
        int rc;
        tc_var *all = tc_tr_nn_container_items(T, mod, &rc);
        if (all == NULL) {
            return rc != OK ? rc : tc_tr_unsupported(T, "slicing a %s",
                                                     Py_TYPE(mod->obj)->tp_name);
        }
        static PyObject *fn;
        if (fn == NULL
            && (fn = PyCFunction_New(&slice_module_def, NULL)) == NULL) {
            return ERROR;
        }
        tc_var *parts[2] = {mod, idx};
        tc_var *v = tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED, 2, parts);
        if (v == NULL) {
            return ERROR;
        }
        v->node = TC_TMPL_CALL;
        v->obj = Py_NewRef(fn);
        return tc_tr_push(T, v);
    }
    else {
        return tc_tr_unsupported(T, "indexing a module with a %s",
                                 tc_var_kind_name(idx));
    }
    if (key == NULL) {
        return ERROR;
    }
    int rc = tc_tr_nn_module_attr(T, mod, key, 0);
    Py_DECREF(key);
    return rc;
}
