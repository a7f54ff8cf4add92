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
#include "../runtime/extern_table.h"
#include "../pyrt/pyvalue.h"

static struct {
    PyObject *function_type;   /* torch.autograd.Function */
    PyObject *apply_fn;        /* Function.apply.__func__ */
    PyObject *default_setup;   /* _SingleLevelFunction.setup_context */
    PyObject *ctx_class;       /* tcjit._autofn.TracedFunctionCtx */
    PyObject *link_class;      /* tcjit._autofn.Link */
    PyObject *view_as, *detach;
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
    PyObject *link = cm ? PyObject_GetAttrString(cm, "Link") : NULL;
    PyObject *view_as = PyObject_GetAttrString(tc_tensor_type, "view_as");
    PyObject *detach = PyObject_GetAttrString(tc_tensor_type, "detach");
    Py_XDECREF(fm);
    Py_XDECREF(cm);
    Py_XDECREF(single);
    if (apply == NULL || !PyMethod_Check(apply) || setup == NULL
        || ctx == NULL || link == NULL || view_as == NULL
        || detach == NULL) {
        Py_XDECREF(fn);
        Py_XDECREF(link);
        Py_XDECREF(apply);
        Py_XDECREF(setup);
        Py_XDECREF(ctx);
        Py_XDECREF(view_as);
        Py_XDECREF(detach);
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
    A.link_class = link;
    A.view_as = view_as;
    A.detach = detach;
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

/* forward's result does not hold its ctx (which is no object outside the
 * trace). */
static int
wrap_check(tracer *T, PyObject *cls, tc_var *result)
{
    int n = result->kind == TC_VAR_TUPLE ? result->nitems : 1;
    for (int i = 0; i < n; i++) {
        tc_var *o = result->kind == TC_VAR_TUPLE ? result->items[i] : result;
        if (tc_tr_is_new_object(o)
            && tc_tr_new_object_class(o) == (PyTypeObject *)A.ctx_class) {
            return tc_tr_unsupported(T, "custom autograd.Function %s "
                                     "returns its ctx",
                                     ((PyTypeObject *)cls)->tp_name);
        }
    }
    return OK;
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
    if (o->kind != TC_VAR_TENSOR) {
        return OK;
    }
    if (!among(o, inputs, n)) {
        if (tc_tr_requires_grad(T, o)) {
            /* (a tensor forward did not compute: eager detaches it in
             * place) */
            return tc_tr_unsupported(T, "custom autograd.Function %s returns "
                                     "a tensor that requires grad and is no "
                                     "input", name);
        }
        return OK;
    }
    int detach = tc_tr_requires_grad(T, o);
    if (!detach && dirty != NULL && among(o, dirty->items, dirty->nitems)) {
        return OK;
    }
    /* eager returns x.view_as(x), or x.detach() for an x that requires
     * grad (under no_grad: the call records no graph) */
    tc_var *two[2] = {o, o};
    int rc = tc_tr_call_object(T, detach ? A.detach : A.view_as, two,
                               detach ? 1 : 2);
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

/* ---- a call that records a graph: its results through cls.backward ----
 *
 * The traced forward's tensor results become the items of one generic
 * extern node (extern.h "extern") whose call is a tcjit._autofn.Link:
 * Link(*operands) returns them through a torch.autograd.Function whose
 * backward is cls.backward on a ctx rebuilt from what forward stored
 * (python/tcjit/_autofn.py).  The node reads the forward's tensor
 * arguments, its tensor results and the tensors it saved or stored on
 * ctx; the training plan keeps the node's autograd graph (its rule is
 * "vjp"), so the compiled node's backward calls the user's backward.  What
 * forward stores on ctx must be tensors or constants; anything else is a
 * graph break with a reason. */

typedef struct {
    tracer *T;
    const char *name;                  /* the Function's class name */
    tc_var **args;                     /* forward's arguments */
    int nargs;
    tc_var *outs[TC_XMAX_OUTPUTS];     /* its tensor results ... */
    int pos[TC_XMAX_OUTPUTS];          /* ... at these places */
    int nout;
    int ops[TC_MAX_OP_INPUTS];         /* the node's operands (nodes) */
    int nops;
} link_ctx;

static int
index_of(const tc_var *v, tc_var *const *vs, int n)
{
    for (int i = 0; i < n; i++) {
        if (vs[i] == v) {
            return i;
        }
    }
    return -1;
}

/* The operand index of tensor var v (added if new), or UNSUPPORTED. */
static int
link_operand(link_ctx *L, const tc_var *v, int *k)
{
    for (*k = 0; *k < L->nops; (*k)++) {
        if (L->ops[*k] == v->node) {
            return OK;
        }
    }
    if (L->nops == TC_MAX_OP_INPUTS) {
        return tc_tr_unsupported(L->T, "custom autograd.Function %s under "
                                 "grad reads more than %d tensors",
                                 L->name, TC_MAX_OP_INPUTS);
    }
    L->ops[L->nops++] = v->node;
    return OK;
}

/* Per forward argument, its operand or -1: a new tuple in *out. */
static int
link_inputs(link_ctx *L, PyObject **out)
{
    *out = PyTuple_New(L->nargs);
    for (int i = 0; *out != NULL && i < L->nargs; i++) {
        int k = -1;
        if (L->args[i]->kind == TC_VAR_TENSOR
            && link_operand(L, L->args[i], &k) != OK) {
            return UNSUPPORTED;
        }
        PyObject *v = PyLong_FromLong(k);
        if (v == NULL) {
            return ERROR;
        }
        PyTuple_SET_ITEM(*out, i, v);
    }
    return *out ? OK : ERROR;
}

/* The tensor results: L->outs, and ((place, operand), ...) in *out. */
static int
link_outputs(link_ctx *L, tc_var *const *items, int nitems, PyObject **out)
{
    for (int j = 0; j < nitems; j++) {
        tc_var *o = items[j];
        if (o->kind != TC_VAR_TENSOR) {
            continue;
        }
        if (tc_tr_requires_grad(L->T, o) && index_of(o, L->args, L->nargs) < 0) {
            return tc_tr_unsupported(L->T, "custom autograd.Function %s "
                                     "returns a tensor that requires grad "
                                     "and is no input", L->name);
        }
        if (L->nout == TC_XMAX_OUTPUTS) {
            return tc_tr_unsupported(L->T, "custom autograd.Function %s "
                                     "under grad returns more than %d "
                                     "tensors", L->name, TC_XMAX_OUTPUTS);
        }
        L->pos[L->nout] = j;
        L->outs[L->nout++] = o;
    }
    *out = PyTuple_New(L->nout);
    for (int j = 0; *out != NULL && j < L->nout; j++) {
        int k;
        if (link_operand(L, L->outs[j], &k) != OK) {
            return UNSUPPORTED;
        }
        PyObject *e = Py_BuildValue("(ii)", L->pos[j], k);
        if (e == NULL) {
            return ERROR;
        }
        PyTuple_SET_ITEM(*out, j, e);
    }
    return *out ? OK : ERROR;
}

/* A constant's value (tuples and lists of them too), a new reference;
 * NULL without an exception if v is not one. */
static PyObject *
const_value(tracer *T, tc_var *v)
{
    if (tc_tr_reify(T, v) != OK) {
        return NULL;
    }
    if (v->kind == TC_VAR_CONST) {
        return Py_NewRef(v->obj);
    }
    if (v->kind != TC_VAR_TUPLE && v->kind != TC_VAR_LIST) {
        return NULL;
    }
    PyObject *r = PyList_New(v->nitems);
    for (int i = 0; r != NULL && i < v->nitems; i++) {
        PyObject *item = const_value(T, v->items[i]);
        if (item == NULL) {
            Py_CLEAR(r);
            break;
        }
        PyList_SET_ITEM(r, i, item);
    }
    if (r != NULL && v->kind == TC_VAR_TUPLE) {
        Py_SETREF(r, PyList_AsTuple(r));
    }
    return r;
}

/* ctx.save_for_backward(*v): per tensor ("i", argument), ("o", result)
 * or ("t", operand), None for None; a new tuple in *out. */
static int
link_saved(link_ctx *L, tc_var *v, PyObject **out)
{
    if (v->kind != TC_VAR_TUPLE) {
        return tc_tr_unsupported(L->T, "custom autograd.Function %s: "
                                 "ctx.to_save replaced", L->name);
    }
    PyObject *t = PyTuple_New(v->nitems);
    for (int i = 0; t != NULL && i < v->nitems; i++) {
        tc_var *s = v->items[i];
        int a = index_of(s, L->args, L->nargs);
        int o = index_of(s, L->outs, L->nout), k = -1;
        PyObject *e = NULL;
        if (s->kind == TC_VAR_TENSOR) {
            if (a < 0 && o < 0 && link_operand(L, s, &k) != OK) {
                Py_DECREF(t);
                return UNSUPPORTED;
            }
            e = a >= 0 ? Py_BuildValue("(si)", "i", a)
              : o >= 0 ? Py_BuildValue("(si)", "o", o)
                       : Py_BuildValue("(si)", "t", k);
        }
        else if (s->kind == TC_VAR_CONST && s->obj == Py_None) {
            e = Py_NewRef(Py_None);
        }
        else {
            Py_DECREF(t);
            return tc_tr_unsupported(L->T, "custom autograd.Function %s "
                                     "saves %s for backward", L->name,
                                     tc_var_kind_name(s));
        }
        if (e == NULL) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, e);
    }
    *out = t;
    return t ? OK : ERROR;
}

/* ctx.mark_non_differentiable(*v): the results' indices in *out. */
static int
link_nondiff(link_ctx *L, tc_var *v, PyObject **out)
{
    int64_t idx[TC_XMAX_OUTPUTS];
    int n = 0;
    for (int i = 0; v->kind == TC_VAR_TUPLE && i < v->nitems; i++) {
        int o = index_of(v->items[i], L->outs, L->nout);
        if (o < 0) {
            return tc_tr_unsupported(L->T, "custom autograd.Function %s "
                                     "marks non-differentiable a value it "
                                     "does not return", L->name);
        }
        int seen = 0;
        for (int j = 0; j < n; j++) {
            seen |= idx[j] == o;
        }
        if (!seen) {
            idx[n++] = o;
        }
    }
    *out = tc_int_tuple(n, idx);
    return *out ? OK : ERROR;
}

/* One more attribute forward set on ctx: (name, value, -1) for a
 * constant, (name, None, operand) for a tensor, appended to list. */
static int
link_attr(link_ctx *L, PyObject *name, tc_var *v, PyObject *list)
{
    int k = -1;
    PyObject *value = NULL;
    if (v->kind == TC_VAR_TENSOR) {
        if (link_operand(L, v, &k) != OK) {
            return UNSUPPORTED;
        }
        value = Py_NewRef(Py_None);
    }
    else if ((value = const_value(L->T, v)) == NULL) {
        return PyErr_Occurred() ? ERROR
             : tc_tr_unsupported(L->T, "custom autograd.Function %s: "
                                 "forward stores %s as ctx.%U (tcjit gives "
                                 "its backward tensors and constants "
                                 "only)", L->name, tc_var_kind_name(v),
                                 name);
    }
    PyObject *e = Py_BuildValue("(OOi)", name, value, k);
    Py_DECREF(value);
    int rc = e != NULL && PyList_Append(list, e) == 0 ? OK : ERROR;
    Py_XDECREF(e);
    return rc;
}

/* What forward stored on ctx: out[0] attrs, out[1] saved, out[2]
 * nondiff, out[3] materialize (new references). */
static int
link_state(link_ctx *L, tc_var *ctx, PyObject **out)
{
    PyObject *names = tc_tr_new_object_attr_names(ctx);
    if (names == NULL) {
        return tc_tr_unsupported(L->T, "custom autograd.Function %s: its "
                                 "ctx is no object of the trace", L->name);
    }
    PyObject *attrs = PyList_New(0);
    out[1] = PyTuple_New(0);
    out[2] = PyTuple_New(0);
    out[3] = Py_NewRef(Py_True);
    int rc = attrs && out[1] && out[2] ? OK : ERROR;
    for (Py_ssize_t i = 0; rc == OK && i < PyTuple_GET_SIZE(names); i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        const char *s = PyUnicode_AsUTF8(name);
        tc_var *v = ctx->items[i];
        if (s == NULL || v == NULL) {
            rc = s == NULL ? ERROR : OK;
        }
        else if (!strcmp(s, "needs_input_grad")) {
            continue;
        }
        else if (!strcmp(s, "materialize_grads")) {
            Py_XSETREF(out[3], const_value(L->T, v));
            rc = out[3] != NULL && PyBool_Check(out[3]) ? OK
               : PyErr_Occurred() ? ERROR
               : tc_tr_unsupported(L->T, "custom autograd.Function %s: "
                                   "set_materialize_grads of a non-bool",
                                   L->name);
        }
        else if (!strcmp(s, "to_save")) {
            Py_CLEAR(out[1]);
            rc = link_saved(L, v, &out[1]);
        }
        else if (!strcmp(s, "non_differentiable")) {
            Py_CLEAR(out[2]);
            rc = link_nondiff(L, v, &out[2]);
        }
        else if (!strcmp(s, "dirty_tensors")
                 || !strcmp(s, "saved_for_forward")) {
            rc = tc_tr_unsupported(L->T, "custom autograd.Function %s "
                                   "with inputs that require grad calls "
                                   "ctx.%s", L->name, s[0] == 'd'
                                   ? "mark_dirty" : "save_for_forward");
        }
        else {
            rc = link_attr(L, name, v, attrs);
        }
    }
    out[0] = attrs ? PyList_AsTuple(attrs) : NULL;
    Py_XDECREF(attrs);
    return rc == OK && out[0] == NULL ? ERROR : rc;
}

/* The extern node calling link over L's operands, its items the new
 * tensor results; *out: the result with them in place. */
static int
link_nodes(link_ctx *L, PyObject *link, tc_var *result, tc_var **out)
{
    tracer *T = L->T;
    PyObject *argv[TC_MAX_OP_INPUTS];
    for (int k = 0; k < L->nops; k++) {
        if ((argv[k] = tc_xtable_operand(k)) == NULL) {
            return ERROR;
        }
    }
    char err[256];
    int call = tc_xtable_intern(link, L->nops, argv, NULL, L->nops, err,
                                sizeof(err));
    if (call < 0) {
        return call == -1 ? ERROR
             : tc_tr_unsupported(T, "custom autograd.Function %s: %s",
                                 L->name, err);
    }
    tc_graph *g = T->out->graph;
    tc_dtype dt[TC_XMAX_OUTPUTS];
    tc_layout lay[TC_XMAX_OUTPUTS];   /* copies: nodes move as they grow */
    for (int j = 0; j < L->nout; j++) {
        dt[j] = g->nodes[L->outs[j]->node].dtype;
        lay[j] = g->nodes[L->outs[j]->node].layout;
    }
    int x = tc_graph_extern_generic(g, call, L->nops, L->ops, L->nout,
                                    dt[0], &lay[0], err, sizeof(err));
    int single = result->kind != TC_VAR_TUPLE;
    tc_var *items[TC_MAX_ITEMS];
    if (!single) {
        memcpy(items, result->items, result->nitems * sizeof(tc_var *));
    }
    for (int j = 0; x >= 0 && j < L->nout; j++) {
        int node = tc_graph_extern_item(g, x, j, dt[j], &lay[j], err,
                                        sizeof(err));
        tc_var *v = node >= 0 ? tc_var_new(&T->sh->arena, TC_VAR_TENSOR, -1)
                              : NULL;
        if (node < 0) {
            x = -1;
            break;
        }
        if (v == NULL) {
            return ERROR;
        }
        v->node = node;
        items[L->pos[j]] = v;
    }
    if (x < 0) {
        return tc_tr_unsupported(T, "custom autograd.Function %s: %s",
                                 L->name, err);
    }
    *out = single ? items[0]
         : tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, result->nitems, items);
    return *out ? OK : ERROR;
}

/* forward's result under grad, linked to cls.backward (above) in *out. */
static int
link_result(tracer *T, PyObject *cls, tc_var *ctx, tc_var *result,
            tc_var **pargs, int n, tc_var **out)
{
    link_ctx L = {.T = T, .name = ((PyTypeObject *)cls)->tp_name,
                  .args = pargs, .nargs = n};
    int single = result->kind != TC_VAR_TUPLE;
    PyObject *outputs = NULL, *inputs = NULL, *link = NULL;
    PyObject *state[4] = {NULL, NULL, NULL, NULL};
    *out = result;
    int rc = link_outputs(&L, single ? &result : result->items,
                          single ? 1 : result->nitems, &outputs);
    if (rc != OK || L.nout == 0) {
        goto done;   /* no tensor result: nothing to differentiate */
    }
    rc = link_inputs(&L, &inputs);
    rc = rc == OK ? link_state(&L, ctx, state) : rc;
    if (rc == OK) {
        link = PyObject_CallFunction(A.link_class, "OOOiOOOO", cls, inputs,
                                     outputs, single ? -1 : result->nitems,
                                     state[1], state[0], state[2], state[3]);
        rc = link ? link_nodes(&L, link, result, out) : ERROR;
    }
done:
    Py_XDECREF(outputs);
    Py_XDECREF(inputs);
    Py_XDECREF(link);
    for (int i = 0; i < 4; i++) {
        Py_XDECREF(state[i]);
    }
    return rc;
}

/* Inline forward (and setup_context) of cls for args pargs with grad
 * mode off, as _FunctionBase.apply runs them; the wrapped outputs (under
 * grad: linked to the user's backward) are pushed. */
static int
inline_forward(tracer *T, PyObject *cls, int cls_source, tc_var **pargs,
               int n, int records)
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
                                tc_tr_requires_grad(T, pargs[i]) ? Py_True
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
    /* forward's nodes never require grad, whatever the call's result */
    rc = rc == OK ? tc_tr_sync_grad(T) : rc;
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
    if (result->kind == TC_VAR_TUPLE && result->nitems > TC_MAX_ITEMS) {
        rc = tc_tr_unsupported(T, "forward returned %d values",
                               result->nitems);
        goto error;
    }
    if ((rc = wrap_check(T, cls, result)) != OK) {
        goto error;
    }
    if (records) {
        rc = link_result(T, cls, ctx, result, pargs, n, &result);
        rc = rc == OK ? tc_tr_push(T, result) : rc;
        goto error;
    }
    tc_var *dirty = tc_tr_new_object_state(ctx, A.str_dirty);
    if (dirty != NULL
        && (rc = dirty_inputs(T, cls, dirty, pargs, n, result)) != OK) {
        goto error;
    }
    if (result->kind == TC_VAR_TUPLE) {
        tc_var *items[TC_MAX_ITEMS];
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

/* _autofn.apply_takes_keywords(): 1, 0, or -1 with an exception. */
static int
apply_takes_keywords(void)
{
    static int known = -1;
    if (known < 0) {
        PyObject *m = PyImport_ImportModule("tcjit._autofn");
        PyObject *r = m ? PyObject_CallMethod(m, "apply_takes_keywords", NULL)
                        : NULL;
        known = r ? PyObject_IsTrue(r) : -1;
        Py_XDECREF(r);
        Py_XDECREF(m);
    }
    return known;
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
    int kw = kwnames != NULL ? apply_takes_keywords() : 1;
    if (kw <= 0) {
        Py_DECREF(fwd);
        return kw < 0 ? ERROR
             : tc_tr_unsupported(T, "custom autograd.Function %s: "
                                 "apply() with keyword arguments, which "
                                 "this torch does not take (eager raises)",
                                 name);
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
        executable |= tc_tr_requires_grad(T, pargs[i]);
    }
    return inline_forward(T, cls, cls_source, pargs, n, executable);
}
