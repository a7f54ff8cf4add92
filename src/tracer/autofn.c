/* autofn.c - custom torch.autograd.Function subclasses: cls.apply(...).
 *
 * Function.apply's own Python body asks functorch and calls the C++
 * _FunctionBase.apply, which the tracer cannot follow.  What that C++
 * code does depends on whether the call records an autograd graph:
 *
 * - It records none when grad mode is off or no tensor argument requires
 *   grad.  Then eager's result is cls.forward(ctx, *args) run with grad
 *   off (new style: forward(*args), then setup_context(ctx, args,
 *   output)), and nothing reads ctx afterwards.  The tracer inlines those
 *   on a throwaway ctx (python/tcjit/_autofn.py) and gives the outputs
 *   eager's identities: an input returned as is comes back as a new view
 *   of it (x.view_as(x)).
 * - Otherwise the backward would be needed: the whole call is a graph
 *   break (a STEP exit: CPython runs cls.apply, so gradients are eager's).
 */
#include "tracer_internal.h"
#include "../graph/extern.h"

static struct {
    PyObject *function_type;   /* torch.autograd.Function */
    PyObject *apply_fn;        /* Function.apply.__func__ */
    PyObject *default_setup;   /* _SingleLevelFunction.setup_context */
    PyObject *ctx_class;       /* tcjit._autofn.TracedFunctionCtx */
    PyObject *view_as;
    PyObject *str_forward, *str_setup, *str_dirty, *str_wrapped;
} A;

/* Looked up at the first call of a bound method (importing torch's
 * autograd.function at tcjit's import is fine, tcjit's own module too,
 * but a call is the first time they are needed). */
static int
load(void)
{
    if (A.str_wrapped != NULL) {
        return OK;
    }
    PyObject *fm = PyImport_ImportModule("torch.autograd.function");
    PyObject *cm = fm ? PyImport_ImportModule("tcjit._autofn") : NULL;
    PyObject *fn = fm ? PyObject_GetAttrString(fm, "Function") : NULL;
    PyObject *single = fm ? PyObject_GetAttrString(fm, "_SingleLevelFunction")
                          : NULL;
    PyObject *apply = fn ? PyObject_GetAttrString(fn, "apply") : NULL;
    PyObject *setup = single ? PyObject_GetAttrString(single, "setup_context")
                             : NULL;
    PyObject *ctx = cm ? PyObject_GetAttrString(cm, "TracedFunctionCtx")
                       : NULL;
    PyObject *view_as = PyObject_GetAttrString(tc_tensor_type, "view_as");
    Py_XDECREF(fm);
    Py_XDECREF(cm);
    Py_XDECREF(single);
    if (apply == NULL || !PyMethod_Check(apply) || setup == NULL
        || ctx == NULL || view_as == NULL) {
        Py_XDECREF(fn);
        Py_XDECREF(apply);
        Py_XDECREF(setup);
        Py_XDECREF(ctx);
        Py_XDECREF(view_as);
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_SystemError,
                            "tcjit: torch.autograd.Function.apply is not a "
                            "classmethod");
        }
        return ERROR;
    }
    /* kept for the life of the process */
    A.function_type = fn;
    A.apply_fn = Py_NewRef(PyMethod_GET_FUNCTION(apply));
    Py_DECREF(apply);
    A.default_setup = setup;
    A.ctx_class = ctx;
    A.view_as = view_as;
    A.str_forward = PyUnicode_InternFromString("forward");
    A.str_setup = PyUnicode_InternFromString("setup_context");
    A.str_dirty = PyUnicode_InternFromString("dirty_tensors");
    A.str_wrapped = PyUnicode_InternFromString("__wrapped__");
    return A.str_forward && A.str_setup && A.str_dirty && A.str_wrapped
           ? OK : ERROR;
}

static int
attr_source(tracer *T, int parent, PyObject *name)
{
    return parent < 0 ? -1
         : tc_source_add(T->out->guards, TC_SRC_ATTR, parent, 0, name);
}

static int
requires_grad(tracer *T, const tc_var *v)
{
    return v->kind == TC_VAR_TENSOR && v->node >= 0
           && v->node < T->sh->grad_cap && T->sh->grad[v->node];
}

/* A known object as a var of its own (functions and classes found on a
 * class the guards pin). */
static tc_var *
object_var(tracer *T, PyObject *obj, int source)
{
    tc_var *v = tc_var_new(&T->sh->arena, TC_VAR_OBJECT, source);
    if (v != NULL) {
        v->obj = Py_NewRef(obj);
    }
    return v;
}

/* The positional arguments _FunctionBase.apply passes to forward (after
 * ctx), in out[0..*nout).  Keywords: new style, Function.apply binds them
 * with the defaults of forward's signature (inspect.signature(...).bind);
 * old style, the C++ apply puts each at its positional parameter and
 * fills no defaults.  Anything else (keyword-only parameters, **kwargs, a
 * forward wrapped by a decorator whose signature is another's) is left to
 * CPython: UNSUPPORTED. */
static int
bind_forward(tracer *T, PyObject *cls, PyObject *fwd, int new_style,
             tc_var **args, int nargs, PyObject *kwnames, tc_var **out,
             int *nout)
{
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    int npos = nargs - nkw;
    const char *name = ((PyTypeObject *)cls)->tp_name;
    memcpy(out, args, npos * sizeof(tc_var *));
    *nout = npos;
    if (nkw == 0 && !new_style) {
        return OK;
    }
    PyFunctionObject *f = (PyFunctionObject *)fwd;
    PyCodeObject *co = (PyCodeObject *)f->func_code;
    PyObject *d = f->func_dict;
    if ((d != NULL && PyDict_GetItemWithError(d, A.str_wrapped) != NULL)
        || PyErr_Occurred()) {
        return PyErr_Occurred() ? ERROR
             : tc_tr_unsupported(T, "custom autograd.Function %s: a "
                                 "decorated forward's signature", name);
    }
    int skip = new_style ? 0 : 1;   /* ctx */
    int nparams = co->co_argcount - skip;
    if (nparams < 0 || (new_style && co->co_kwonlyargcount > 0)) {
        return tc_tr_unsupported(T, "custom autograd.Function %s: forward "
                                 "with keyword-only parameters", name);
    }
    if (nparams > TC_MAX_CALL_ARGS) {
        return tc_tr_unsupported(T, "custom autograd.Function %s: forward "
                                 "with %d parameters", name, nparams);
    }
    for (int i = npos; i < nparams; i++) {
        out[i] = NULL;
    }
    int filled = npos;
    for (int k = 0; k < nkw; k++) {
        PyObject *kw = PyTuple_GET_ITEM(kwnames, k);
        int at = -1;
        for (int i = 0; i < nparams && at < 0; i++) {
            int eq = PyUnicode_Compare(
                PyTuple_GET_ITEM(co->co_localsplusnames, i + skip), kw);
            if (eq == -1 && PyErr_Occurred()) {
                return ERROR;
            }
            at = eq == 0 ? i : -1;
        }
        if (at < npos || out[at] != NULL) {
            /* a keyword forward has no positional parameter of: eager
             * raises TypeError */
            return tc_tr_unsupported(T, "custom autograd.Function %s: "
                                     "keyword argument %U", name, kw);
        }
        out[at] = args[npos + k];
        filled = at + 1 > filled ? at + 1 : filled;
    }
    if (new_style) {
        /* apply_defaults: every positional parameter gets a value */
        PyObject *defs = f->func_defaults;
        int ndefs = defs ? (int)PyTuple_GET_SIZE(defs) : 0;
        filled = nparams > filled ? nparams : filled;
        for (int i = npos; i < nparams; i++) {
            int di = i - (nparams - ndefs);
            if (out[i] == NULL && di >= 0) {
                out[i] = tc_var_const(&T->sh->arena,
                                      PyTuple_GET_ITEM(defs, di), -1);
                if (out[i] == NULL) {
                    return ERROR;
                }
            }
        }
    }
    for (int i = npos; i < filled; i++) {
        if (out[i] == NULL) {
            return tc_tr_unsupported(T, "custom autograd.Function %s: "
                                     "argument %d of forward is missing",
                                     name, i);
        }
    }
    *nout = filled;
    return OK;
}

/* Whether tensor var o is one of vs (the tracer's `is`: the same var; an
 * in-place op rebinds the var itself). */
static int
among(const tc_var *o, tc_var *const *vs, int n)
{
    for (int i = 0; i < n; i++) {
        if (vs[i] == o) {
            return 1;
        }
    }
    return 0;
}

/* What eager's _FunctionBase.apply makes of one output of forward when it
 * records no graph: an input returned as is becomes a view of it
 * (x.view_as(x)) unless forward marked it dirty (then it is the input
 * itself); a computed tensor is returned as is.  *out: the var. */
static int
wrap_output(tracer *T, PyObject *cls, tc_var *o, tc_var **inputs, int n,
            tc_var *dirty, tc_var **out)
{
    const char *name = ((PyTypeObject *)cls)->tp_name;
    *out = o;
    if (tc_tr_is_new_object(o)
        && tc_tr_new_object_class(o) == (PyTypeObject *)A.ctx_class) {
        return tc_tr_unsupported(T, "custom autograd.Function %s returns "
                                 "its ctx", name);
    }
    if (o->kind != TC_VAR_TENSOR) {
        return OK;
    }
    if (!among(o, inputs, n)) {
        if (requires_grad(T, o)) {
            /* (a tensor forward did not compute: eager detaches it in
             * place) */
            return tc_tr_unsupported(T, "custom autograd.Function %s returns "
                                     "a tensor that requires grad and is no "
                                     "input", name);
        }
        return OK;
    }
    if (requires_grad(T, o)) {
        /* eager returns o.detach() (under no_grad); the exit would rebuild
         * a traced detach() of an input as a view that requires grad */
        return tc_tr_unsupported(T, "custom autograd.Function %s returns "
                                 "an input that requires grad (eager "
                                 "detaches it)", name);
    }
    if (dirty != NULL && among(o, dirty->items, dirty->nitems)) {
        return OK;
    }
    tc_var *two[2] = {o, o};
    int rc = tc_tr_call_object(T, A.view_as, two, 2);
    if (rc != OK) {
        return rc;
    }
    *out = tc_tr_pop(T);
    return *out ? OK : tc_tr_unsupported(T, "malformed stack");
}

/* ctx.mark_dirty(*tensors) of forward: each must be a tensor argument
 * that forward returns (eager raises otherwise); eager moves its version
 * counter once more. */
static int
dirty_inputs(tracer *T, PyObject *cls, tc_var *dirty, tc_var **inputs,
             int n, tc_var *result)
{
    const char *name = ((PyTypeObject *)cls)->tp_name;
    if (dirty->kind != TC_VAR_TUPLE) {
        return tc_tr_unsupported(T, "custom autograd.Function %s: "
                                 "ctx.dirty_tensors replaced", name);
    }
    tc_var *const *outs = result->kind == TC_VAR_TUPLE ? result->items
                                                       : &result;
    int nouts = result->kind == TC_VAR_TUPLE ? result->nitems : 1;
    for (int i = 0; i < dirty->nitems; i++) {
        tc_var *d = dirty->items[i];
        if (d->kind != TC_VAR_TENSOR || !among(d, inputs, n)
            || !among(d, outs, nouts)) {
            return tc_tr_unsupported(T, "custom autograd.Function %s marks "
                                     "dirty a tensor it does not take and "
                                     "return (eager raises)", name);
        }
        int rc = tc_tr_mut_bump(T, d);
        if (rc != OK) {
            return rc;
        }
    }
    return OK;
}

/* Inline forward (and setup_context) of cls for args pargs with grad
 * mode off, as _FunctionBase.apply runs them; the wrapped outputs are
 * pushed. */
static int
inline_forward(tracer *T, PyObject *cls, int cls_source, tc_var **pargs,
               int n)
{
    const char *name = ((PyTypeObject *)cls)->tp_name;
    int rc = ERROR, traced = 0, mark[2] = {0, 0}, fx_mark = 0, nnodes = 0;
    PyObject *fwd = PyObject_GetAttr(cls, A.str_forward);
    PyObject *setup = fwd ? PyObject_GetAttr(cls, A.str_setup) : NULL;
    if (setup == NULL) {
        goto error;
    }
    int new_style = setup != A.default_setup;
    if (!PyFunction_Check(fwd) || (new_style && !PyFunction_Check(setup))) {
        rc = tc_tr_unsupported(T, "custom autograd.Function %s: forward or "
                               "setup_context is not a Python function",
                               name);
        goto error;
    }
    if (!new_style && cls_source >= 0) {
        /* old style relies on setup_context being the default one */
        int src = attr_source(T, cls_source, A.str_setup);
        if (src < 0 || tc_guard_id(T->out->guards, src, setup) < 0) {
            goto error;
        }
    }
    /* ctx.needs_input_grad: eager's, a tensor's requires_grad (True
     * under no_grad too) */
    tc_var *flags[TC_MAX_CALL_ARGS];
    for (int i = 0; i < n; i++) {
        flags[i] = tc_var_const(&T->sh->arena,
                                requires_grad(T, pargs[i]) ? Py_True
                                                           : Py_False, -1);
        if (flags[i] == NULL) {
            goto error;
        }
    }
    tc_var *nig = tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, n, flags);
    tc_var *cv = nig ? object_var(T, A.ctx_class, -1) : NULL;
    if (cv == NULL) {
        goto error;
    }
    rc = tc_tr_call_class(T, cv, &nig, 1, NULL);
    if (rc != OK) {
        rc = rc == NOT_HANDLED ? tc_tr_unsupported(T, "ctx object") : rc;
        goto error;
    }
    tc_var *ctx = tc_tr_pop(T);
    int fsrc = attr_source(T, cls_source, A.str_forward);
    tc_var *fv = cls_source < 0 || fsrc >= 0 ? object_var(T, fwd, fsrc)
                                             : NULL;
    if (ctx == NULL || fv == NULL) {
        rc = ERROR;
        goto error;
    }
    tc_var *all[TC_MAX_CALL_ARGS + 1];
    all[0] = ctx;
    memcpy(all + 1, pargs, n * sizeof(tc_var *));
    /* forward runs with grad off (and whatever it sets is undone after
     * it, as C++'s AutoGradMode guard does) */
    int grad = T->grad_mode, set_grad = T->sh->set_grad;
    /* what forward did, undone if its outputs are refused after it was
     * traced whole (the call then runs in Python, once) */
    tc_tr_mut_mark(T, mark);
    fx_mark = T->sh->nfx;
    nnodes = T->out->graph->nnodes;
    traced = 1;
    T->grad_mode = 0;
    rc = new_style ? tc_tr_inline_call(T, fv, pargs, n, NULL)
                   : tc_tr_inline_call(T, fv, all, n + 1, NULL);
    tc_var *result = rc == OK ? tc_tr_pop(T) : NULL;
    if (rc == OK && new_style) {
        int ssrc = attr_source(T, cls_source, A.str_setup);
        tc_var *sv = cls_source < 0 || ssrc >= 0 ? object_var(T, setup, ssrc)
                                                 : NULL;
        tc_var *in = tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, n, pargs);
        tc_var *sargs[3] = {ctx, in, result};
        rc = sv && in && result ? tc_tr_inline_call(T, sv, sargs, 3, NULL)
                                : ERROR;
        rc = rc == OK && tc_tr_pop(T) == NULL ? ERROR : rc;
    }
    T->grad_mode = grad;
    if (rc == OK && T->sh->set_grad != set_grad) {
        rc = tc_tr_unsupported(T, "custom autograd.Function %s sets the "
                               "grad mode in forward", name);
    }
    if (rc != OK) {
        goto error;
    }
    if (result == NULL) {
        rc = tc_tr_unsupported(T, "malformed stack");
        goto error;
    }
    tc_var *dirty = tc_tr_new_object_state(ctx, A.str_dirty);
    if (dirty != NULL
        && (rc = dirty_inputs(T, cls, dirty, pargs, n, result)) != OK) {
        goto error;
    }
    if (result->kind == TC_VAR_TUPLE) {
        tc_var *items[TC_MAX_ITEMS];
        if (result->nitems > TC_MAX_ITEMS) {
            rc = tc_tr_unsupported(T, "forward returned %d values",
                                   result->nitems);
            goto error;
        }
        for (int i = 0; i < result->nitems; i++) {
            rc = wrap_output(T, cls, result->items[i], pargs, n, dirty,
                             &items[i]);
            if (rc != OK) {
                goto error;
            }
        }
        result = tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, result->nitems,
                            items);
        if (result == NULL) {
            rc = ERROR;
            goto error;
        }
    }
    else if ((rc = wrap_output(T, cls, result, pargs, n, dirty, &result))
             != OK) {
        goto error;
    }
    rc = tc_tr_push(T, result);
error:
    if (traced && rc == UNSUPPORTED) {
        tc_tr_mut_rollback(T, mark);
        T->sh->nfx = fx_mark;
        tc_graph_drop_effects(T->out->graph, nnodes);
    }
    Py_XDECREF(fwd);
    Py_XDECREF(setup);
    return rc;
}

int
tc_tr_call_autograd_function(tracer *T, tc_var *callable, tc_var **args,
                             int nargs, PyObject *kwnames)
{
    PyObject *m = callable->obj;
    if (m == NULL || !PyMethod_Check(m) || load() != OK) {
        return PyErr_Occurred() ? ERROR : NOT_HANDLED;
    }
    PyObject *cls = PyMethod_GET_SELF(m);
    if (PyMethod_GET_FUNCTION(m) != A.apply_fn || !PyType_Check(cls)
        || !PyType_IsSubtype((PyTypeObject *)cls,
                             (PyTypeObject *)A.function_type)) {
        return NOT_HANDLED;
    }
    /* the bound method is a new object at every access: its function and
     * class are what the guards pin */
    int cls_source = -1;
    if (callable->source >= 0) {
        PyObject *sn = PyUnicode_FromString("__self__");
        PyObject *fn = sn ? PyUnicode_FromString("__func__") : NULL;
        cls_source = fn ? attr_source(T, callable->source, sn) : -1;
        int fsrc = cls_source >= 0 ? attr_source(T, callable->source, fn)
                                   : -1;
        Py_XDECREF(sn);
        Py_XDECREF(fn);
        if (fsrc < 0
            || tc_guard_id(T->out->guards, fsrc, A.apply_fn) < 0
            || tc_guard_id(T->out->guards, cls_source, cls) < 0) {
            return ERROR;
        }
    }
    else if (callable->kind == TC_VAR_UNKNOWN) {
        return NOT_HANDLED;   /* nothing pins it */
    }
    const char *name = ((PyTypeObject *)cls)->tp_name;
    PyObject *fwd = PyObject_GetAttr(cls, A.str_forward);
    PyObject *setup = fwd ? PyObject_GetAttr(cls, A.str_setup) : NULL;
    int new_style = setup != NULL && setup != A.default_setup;
    int ok = fwd != NULL && setup != NULL && PyFunction_Check(fwd);
    Py_XDECREF(setup);
    if (!ok) {
        Py_XDECREF(fwd);
        return PyErr_Occurred() ? ERROR
             : tc_tr_unsupported(T, "custom autograd.Function %s: forward "
                                 "is not a Python function", name);
    }
    tc_var *pargs[TC_MAX_CALL_ARGS];
    int n = 0;
    int rc = bind_forward(T, cls, fwd, new_style, args, nargs, kwnames,
                          pargs, &n);
    Py_DECREF(fwd);
    if (rc != OK) {
        return rc;
    }
    /* _FunctionBase.apply records a graph when grad mode is on and a
     * tensor argument (not one inside a list) requires grad */
    int executable = 0;
    for (int i = 0; i < n && T->grad_mode; i++) {
        executable |= requires_grad(T, pargs[i]);
    }
    if (executable) {
        return tc_tr_unsupported(T, "custom autograd.Function %s with inputs "
                                 "that require grad (its backward is not "
                                 "traced yet)", name);
    }
    return inline_forward(T, cls, cls_source, pargs, n);
}
