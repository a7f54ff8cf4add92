/* externcall.c - any other torch op as a graph node (the registry's
 * default entry, ../graph/extern.h "extern").
 *
 * A call of a torch callable that no registry entry binds (torch.*
 * builtins, Tensor methods, torch._C._nn / _special / _linalg / _fft,
 * torch.ops.aten packets and overloads) whose arguments are tensors of the
 * graph and constants becomes one node that calls torch at run time; a
 * tensor factory (torch.randn) needs no tensor argument, and a device
 * argument must be the graph's device.  What the call returns is learnt
 * from one run on meta tensors, with "meta" for its device arguments and
 * as the default device (../runtime/extern_table.h, cached per
 * signature):
 *   - a new tensor (or a tuple of them: torch.sort) -> an extern node
 *     (and extern_item nodes), laid out as the meta result;
 *   - an operand itself or a view of one (Tensor.diagonal, unfold) -> a
 *     view node of that operand (as_strided), so the graph returns an
 *     alias where eager does, and no call is made;
 *   - anything else is a graph break with a reason: meta raised (no meta
 *     kernel, a data-dependent output shape, an error eager would raise
 *     too: the frame then runs eagerly and raises it), an input mutated
 *     (issue 12), a non-tensor result.
 * Registry ops never get here: they are bound first and fuse.
 */
#include "tracer_internal.h"

#include "../graph/extern.h"
#include "../runtime/torch_tensor.h"
#include "../runtime/extern_table.h"

static PyObject *vf_class, *tensor_base, *factories;

/* 1 if name (NULL: an error, cleared) is one of the NULL-terminated
 * names. */
static int
in_list(const char *name, const char *const *names)
{
    for (int i = 0; name != NULL && names[i] != NULL; i++) {
        if (strcmp(name, names[i]) == 0) {
            return 1;
        }
    }
    PyErr_Clear();
    return 0;
}

/* 1 if fn is a Python function of torch's functional modules (F.softmin,
 * torch.functional.norm, Tensor.unique of torch/_tensor.py). */
static int
is_torch_python_op(PyObject *fn)
{
    static const char *const modules[] = {"torch.nn.functional",
                                          "torch.functional", "torch._tensor",
                                          NULL};
    if (!PyFunction_Check(fn)) {
        return 0;
    }
    PyObject *mod = ((PyFunctionObject *)fn)->func_module;
    return in_list(mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod)
                                               : NULL, modules);
}

/* 1 if fn makes a tensor from constants alone (torch.randn, linspace,
 * eye: torch.utils._device's list of what a device context changes).
 * These are the only calls without a tensor argument the tracer makes
 * extern nodes of: their meta run runs them for real at trace time, which
 * a call such as torch.manual_seed must not. */
static int
is_factory(PyObject *fn)
{
    if (factories == NULL) {
        PyObject *m = PyImport_ImportModule("torch.utils._device");
        factories = m ? PyObject_CallMethod(m, "_device_constructors", NULL)
                      : NULL;
        Py_XDECREF(m);
        if (factories == NULL || !PyAnySet_Check(factories)) {
            PyErr_Clear();
            Py_XSETREF(factories, PySet_New(NULL));
            if (factories == NULL) {
                PyErr_Clear();
                return 0;
            }
        }
    }
    int r = PySet_Contains(factories, fn);
    if (r < 0) {
        PyErr_Clear();   /* unhashable */
    }
    return r > 0;
}

/* 1 if the call makes a tensor from constants alone, the same each time,
 * and cannot fail at run time: a factory that is not random (the
 * positive list: an unknown factory keeps its effects). */
static int
is_pure_factory(PyObject *fn, const char *name, int nin)
{
    static const char *const pure[] = {
        "tensor", "as_tensor", "asarray", "empty", "empty_strided", "zeros",
        "ones", "full", "arange", "range", "linspace", "logspace", "eye",
        "scalar_tensor", "tril_indices", "triu_indices", NULL};
    return nin == 0 && is_factory(fn) && in_list(name, pure);
}

/* Nodes from `first` on that are generic externs lose their effects
 * (extern.h TC_XA_GENERIC_PURE). */
static void
mark_pure(tc_graph *g, int first)
{
    for (int i = first; i < g->nnodes; i++) {
        if (tc_node_has_effects(g, i)) {
            g->nodes[i].xattr[TC_XA_GENERIC_PURE] = 1;
        }
    }
}

/* 1 if fn is a torch op callable the generic extern may call. */
static int
is_torch_op(PyObject *fn)
{
    static const char *const modules[] = {"torch._C._nn", "torch._C._special",
                                          "torch._C._linalg",
                                          "torch._C._fft", NULL};
    if (vf_class == NULL) {
        PyObject *c = PyObject_GetAttrString(tc_torch_module, "_C");
        vf_class = c ? PyObject_GetAttrString(c, "_VariableFunctionsClass")
                     : NULL;
        tensor_base = c ? PyObject_GetAttrString(c, "TensorBase") : NULL;
        Py_XDECREF(c);
        if (vf_class == NULL || tensor_base == NULL) {
            PyErr_Clear();
            Py_CLEAR(vf_class);
            return 0;
        }
    }
    if (Py_IS_TYPE(fn, &PyMethodDescr_Type)
        || Py_IS_TYPE(fn, &PyWrapperDescr_Type)) {
        /* x.cumsum; Tensor.__getitem__ called as a function */
        return PyDescr_TYPE(fn) == (PyTypeObject *)tensor_base;
    }
    const char *tn = Py_TYPE(fn)->tp_name;
    if (!strcmp(tn, "OpOverload") || !strcmp(tn, "OpOverloadPacket")) {
        /* torch.ops.aten.* (an op that mutates is caught by the meta run's
         * version counters) */
        PyObject *ns = PyObject_GetAttrString(fn, "namespace");
        if (ns == NULL) {  /* a packet: "aten::cumsum" */
            PyErr_Clear();
            ns = PyObject_GetAttrString(fn, "_qualified_op_name");
        }
        /* and custom ops (torch.library.custom_op with a fake impl, which
         * gives their meta run: transformers::grouped_mm_fallback) */
        const char *s = ns && PyUnicode_Check(ns) ? PyUnicode_AsUTF8(ns)
                                                  : NULL;
        int known = s != NULL && strncmp(s, "prim", 4) != 0;
        Py_XDECREF(ns);
        PyErr_Clear();
        return known;
    }
    /* (torch.sort is a static method of _VariableFunctionsClass:
     * PyCFunction_GET_SELF hides m_self for those) */
    PyObject *self = PyCFunction_Check(fn) ? ((PyCFunctionObject *)fn)->m_self
                                           : NULL;
    if (self == NULL) {
        return 0;
    }
    if (self == vf_class) {
        return 1;
    }
    if (!PyModule_Check(self)) {
        return 0;
    }
    return in_list(PyModule_GetName(self), modules);
}

/* A constant an extern call may take as it is (a device: see
 * device_arg). */
static int
plain_constant(PyObject *v)
{
    if (tc_xtable_is_device(v)) {
        return 0;
    }
    if (v == Py_None || v == Py_Ellipsis || PyBool_Check(v)
        || PyLong_CheckExact(v) || PyFloat_CheckExact(v)
        || PyComplex_CheckExact(v) || PyUnicode_CheckExact(v)) {
        return 1;
    }
    if (PySlice_Check(v)) {
        PySliceObject *sl = (PySliceObject *)v;
        return plain_constant(sl->start) && plain_constant(sl->stop)
               && plain_constant(sl->step);
    }
    const char *tn = Py_TYPE(v)->tp_name;
    /* torch.dtype, torch.memory_format, torch.layout */
    return !strcmp(tn, "torch.dtype") || !strcmp(tn, "torch.memory_format")
           || !strcmp(tn, "torch.layout");
}

typedef struct {
    tracer *T;
    int in[TC_MAX_OP_INPUTS];
    int nin;
    int device;               /* a device argument's: -1 the CPU, N cuda:N,
                                 -3 none given */
    int rdev;                 /* the result's device (-1 the CPU) */
    const char *why;          /* an argument the call cannot take */
} args_ctx;

/* A device argument ("cpu", torch.device("cuda:0")): the call stays in the
 * graph if the device is the graph's (the meta run puts "meta" in its
 * place).  New reference, or NULL with X->why set. */
static PyObject *
device_arg(args_ctx *X, tc_var *v)
{
    int dev = tc_tr_device_param(v, -2);
    if (dev == -2) {
        X->why = "a device other than 'cpu' or 'cuda:N' (a bare 'cuda' "
                 "means the current device, which tcjit does not guard)";
        return NULL;
    }
    if (X->device != -3 && X->device != dev) {
        X->why = "two devices";
        return NULL;
    }
    X->device = dev;
    return Py_NewRef(v->obj);
}

/* The template value of argument v (operands as placeholders): a new
 * reference, NULL with X->why set (not an error) or with an exception. */
static PyObject *
template_of(args_ctx *X, tc_var *v, int depth)
{
    if (tc_tr_reify(X->T, v) != OK) {
        X->why = PyErr_Occurred() ? NULL : "an argument";
        return NULL;
    }
    switch (v->kind) {
    case TC_VAR_TENSOR:
        if (X->nin == TC_MAX_OP_INPUTS) {
            X->why = "more tensor arguments than an extern node takes";
            return NULL;
        }
        X->in[X->nin] = v->node;
        return Py_XNewRef(tc_xtable_operand(X->nin++));
    case TC_VAR_TUPLE:
    case TC_VAR_LIST: {
        if (depth > 2) {
            X->why = "deeply nested arguments";
            return NULL;
        }
        PyObject *t = v->kind == TC_VAR_TUPLE ? PyTuple_New(v->nitems)
                                              : PyList_New(v->nitems);
        for (int i = 0; t != NULL && i < v->nitems; i++) {
            PyObject *item = template_of(X, v->items[i], depth + 1);
            if (item == NULL) {
                Py_CLEAR(t);
                break;
            }
            if (v->kind == TC_VAR_TUPLE) {
                PyTuple_SET_ITEM(t, i, item);
            }
            else {
                PyList_SET_ITEM(t, i, item);
            }
        }
        return t;
    }
    case TC_VAR_UNKNOWN:
        /* torch.preserve_format read from torch; a memory format or device
         * the frame was given (guarded: the graph bakes it in) */
        if (v->obj == NULL || !(plain_constant(v->obj)
                                || tc_xtable_is_device(v->obj))) {
            X->why = tc_var_kind_name(v);
            return NULL;
        }
        if (v->source >= 0) {
            if (tc_guard_equals(X->T->out->guards, v->source, v->obj) < 0) {
                return NULL;
            }
            v->kind = TC_VAR_CONST;
        }
        return tc_xtable_is_device(v->obj) ? device_arg(X, v)
                                           : Py_NewRef(v->obj);
    case TC_VAR_OBJECT:   /* torch.float64 read from the torch module */
    case TC_VAR_CONST:
        if (plain_constant(v->obj)) {
            return Py_NewRef(v->obj);
        }
        if (tc_xtable_is_device(v->obj)) {
            return device_arg(X, v);
        }
        if (PyTuple_Check(v->obj) || PyList_Check(v->obj)) {
            /* torch.Size, a tuple of ints: copied, so that a list the
             * program changes later does not change the graph */
            Py_ssize_t n = PySequence_Fast_GET_SIZE(v->obj);
            for (Py_ssize_t i = 0; i < n; i++) {
                if (!plain_constant(PySequence_Fast_GET_ITEM(v->obj, i))) {
                    X->why = "a sequence argument of other constants";
                    return NULL;
                }
            }
            return PyList_Check(v->obj) ? PyList_GetSlice(v->obj, 0, n)
                   : PyTuple_CheckExact(v->obj) ? Py_NewRef(v->obj)
                   : PySequence_Tuple(v->obj);
        }
        X->why = Py_TYPE(v->obj)->tp_name;
        return NULL;
    default:
        X->why = tc_var_kind_name(v);
        return NULL;
    }
}

static int
push_tensor(tracer *T, int node, tc_var **out)
{
    *out = tc_var_new(&T->sh->arena, TC_VAR_TENSOR, -1);
    if (*out == NULL) {
        return ERROR;
    }
    (*out)->node = node;
    return OK;
}

/* The graph value of result item j. */
static int
build_output(tracer *T, const char *name, const args_ctx *X,
             const tc_xresult *res, int j, tc_var **args_vars, int call,
             int *callnode, tc_var **out)
{
    const tc_xout *o = &res->out[j];
    tc_graph *g = T->out->graph;
    char err[256];
    int node;
    /* x.to(other device) is a copy there, though the meta run (where
     * every tensor is on "meta") returned x itself */
    int moved = o->alias >= 0
                && tc_tr_node_device(T, X->in[o->alias]) != X->rdev;
    if (o->alias >= 0 && o->is_self && !moved) {
        *out = args_vars[o->alias];
        return OK;
    }
    if (moved) {
        tc_layout l;
        tc_layout_like(&g->nodes[X->in[o->alias]].layout, &l);
        node = tc_graph_extern_generic(g, call, X->nin, X->in, 0, o->dtype,
                                       &l, err, sizeof(err));
    }
    else if (o->alias >= 0) {
        if (g->nodes[X->in[o->alias]].dtype != o->dtype) {
            return tc_tr_unsupported(T, "%s returns a view as another dtype",
                                     name);
        }
        node = tc_graph_as_strided(g, X->in[o->alias], &o->layout, o->offset,
                                   err, sizeof(err));
        size_t len = strlen(name);
        if (node >= 0 && len >= 6 && !strcmp(name + len - 6, "detach")) {
            /* an alias that autograd does not flow through (graph.h) */
            g->nodes[node].requires_grad = TC_GRAD_STOP;
            g->nodes[node].detached = 1;
        }
    }
    else if (res->tuple) {
        if (*callnode < 0) {
            *callnode = tc_graph_extern_generic(g, call, X->nin, X->in,
                                                res->nout, res->out[0].dtype,
                                                &res->out[0].layout, err,
                                                sizeof(err));
            if (*callnode < 0) {
                return tc_tr_unsupported(T, "%s: %s", name, err);
            }
        }
        node = tc_graph_extern_item(g, *callnode, j, o->dtype, &o->layout,
                                    err, sizeof(err));
    }
    else {
        node = tc_graph_extern_generic(g, call, X->nin, X->in, 0, o->dtype,
                                       &o->layout, err, sizeof(err));
    }
    if (node < 0) {
        return tc_tr_unsupported(T, "%s: %s", name, err);
    }
    return push_tensor(T, node, out);
}

/* Pushes the value of the call from its meta result. */
static int
push_result(tracer *T, const char *name, const args_ctx *X,
            const tc_xresult *res, tc_var **opvars, int call)
{
    tc_var *items[TC_XMAX_OUTPUTS];
    int callnode = -1;
    for (int j = 0; j < res->nout; j++) {
        int rc = build_output(T, name, X, res, j, opvars, call, &callnode,
                              &items[j]);
        if (rc != OK) {
            return rc;
        }
    }
    if (!res->tuple) {
        return tc_tr_push(T, items[0]);
    }
    tc_var *seq = tc_var_seq(&T->sh->arena, res->tuple == 2 ? TC_VAR_LIST
                             : TC_VAR_TUPLE, res->nout, items);
    if (seq == NULL) {
        return ERROR;
    }
    if (res->tuple == 2 || (PyTypeObject *)res->seqtype == &PyTuple_Type) {
        return tc_tr_push(T, seq);
    }
    /* a torch.return_types structseq: built at the exit if it escapes,
     * read through its items inside (tc_tr_structseq_items) */
    tc_var *r = tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED, 1, &seq);
    if (r == NULL) {
        return ERROR;
    }
    r->node = TC_TMPL_CALL;
    r->obj = Py_NewRef(res->seqtype);
    return tc_tr_push(T, r);
}

/* Operand vars in placeholder order (for results that are an operand). */
static void
collect_operand_vars(tc_var *v, tc_var **out, int *n)
{
    if (v->kind == TC_VAR_TENSOR) {
        if (*n < TC_MAX_OP_INPUTS) {
            out[*n] = v;
        }
        (*n)++;
    }
    else if (v->kind == TC_VAR_TUPLE || v->kind == TC_VAR_LIST) {
        for (int i = 0; i < v->nitems; i++) {
            collect_operand_vars(v->items[i], out, n);
        }
    }
}

/* Ops whose meta result differs from the CPU kernel's: native_batch_norm
 * in eval mode returns empty saved statistics on the CPU, (C,) on meta. */
static const char *const meta_differs[] = {
    "native_batch_norm", "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training", "_batch_norm_with_update",
    NULL};

/* ... and on the CPU with float16 / bfloat16 operands: native_layer_norm
 * returns mean and rstd in the input's dtype there, float32 on meta. */
static const char *const meta_differs_reduced_cpu[] = {
    "native_layer_norm", NULL};

static int
any_reduced_operand(tracer *T, const args_ctx *X)
{
    for (int k = 0; k < X->nin; k++) {
        if (tc_dtype_is_reduced_float(T->out->graph->nodes[X->in[k]].dtype)) {
            return 1;
        }
    }
    return 0;
}

static int
is_mutating_name(const char *name, PyObject *kwnames)
{
    size_t n = strlen(name);
    int dunder = n > 4 && !strncmp(name, "__", 2) && !strcmp(name + n - 2, "__");
    if (dunder ? name[2] == 'i' && strcmp(name, "__index__") != 0
                 && strcmp(name, "__invert__") != 0
               : n > 1 && name[n - 1] == '_') {
        return 1;   /* x.add_(y), x.__iadd__(y) */
    }
    for (Py_ssize_t i = 0; kwnames && i < PyTuple_GET_SIZE(kwnames); i++) {
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, i),
                                             "out") == 0) {
            return 1;
        }
    }
    return 0;
}

/* torch.is_floating_point(x), x.is_signed(), x.is_complex(): a property
 * of x's dtype, which a graph tensor has fixed (an input's is guarded):
 * the torch.dtype attribute of the same name, a constant. */
static int
dtype_query(tracer *T, const char *name, tc_var **args, int nargs,
            PyObject *kwnames)
{
    static const char *const queries[] = {"is_floating_point", "is_complex",
                                          "is_signed", NULL};
    if (nargs != 1 || kwnames != NULL || args[0]->kind != TC_VAR_TENSOR
        || !in_list(name, queries)) {
        return NOT_HANDLED;
    }
    const tc_node *x = tc_tr_tensor_node(T, args[0]);
    PyObject *dt = x && tc_alloc_init() == 0
        ? tc_alloc_dtype_object(x->dtype) : NULL;
    PyObject *r = dt ? PyObject_GetAttrString(dt, name) : NULL;
    if (r == NULL || !PyBool_Check(r)) {
        Py_XDECREF(r);
        return PyErr_Occurred() ? ERROR : NOT_HANDLED;
    }
    tc_var *v = tc_var_const(&T->sh->arena, r, -1);
    Py_DECREF(r);
    return v ? tc_tr_push(T, v) : ERROR;
}

int
tc_tr_call_generic(tracer *T, PyObject *fn, tc_var **args, int nargs,
                   PyObject *kwnames, int python_ok)
{
    if (!is_torch_op(fn) && !(python_ok && is_torch_python_op(fn))) {
        return NOT_HANDLED;
    }
    int any_tensor = 0;
    for (int i = 0; i < nargs; i++) {
        int n = 0;
        tc_var *tmp[TC_MAX_OP_INPUTS];
        collect_operand_vars(args[i], tmp, &n);
        any_tensor |= n > 0;
    }
    if (!any_tensor && !is_factory(fn)) {
        return NOT_HANDLED;   /* torch.manual_seed(0): the usual reason */
    }
    PyObject *pyname = PyObject_GetAttrString(fn, "__name__");
    const char *bare = pyname ? PyUnicode_AsUTF8(pyname) : NULL;
    if (bare == NULL) {
        Py_XDECREF(pyname);
        return ERROR;
    }
    int rc = dtype_query(T, bare, args, nargs, kwnames);
    if (rc != NOT_HANDLED) {
        Py_DECREF(pyname);
        return rc;
    }
    if (is_mutating_name(bare, kwnames)) {
        rc = tc_tr_unsupported(T, "%s mutates an input: see issue 12", bare);
        Py_DECREF(pyname);
        return rc;
    }
    if (in_list(bare, meta_differs)) {
        rc = tc_tr_unsupported(T, "%s: its meta result differs from the CPU "
                               "kernel's", bare);
        Py_DECREF(pyname);
        return rc;
    }
    args_ctx X = {.T = T, .device = -3};
    PyObject *argv[TC_MAX_CALL_ARGS];
    int n = 0;
    rc = OK;
    for (; n < nargs; n++) {
        argv[n] = template_of(&X, args[n], 0);
        if (argv[n] == NULL) {
            rc = PyErr_Occurred() ? ERROR
                : tc_tr_unsupported(T, "%s with an argument it cannot "
                                    "take: %s", bare, X.why);
            break;
        }
    }
    /* the result's device: device='s (a factory without it: the default
     * device, the CPU, as for the registry's torch.zeros), else its
     * operands' (the CPU when all of them are on it) */
    int to_cpu = !strcmp(bare, "cpu") && nargs == 1;   /* x.cpu() */
    if (rc == OK && (!strcmp(bare, "item") || !strcmp(bare, "tolist"))) {
        rc = tc_tr_unsupported(T, "Tensor.%s() reads the tensor's values "
                               "(data-dependent: what follows depends on "
                               "them, as under Dynamo)", bare);
    }
    if (rc == OK && !strcmp(bare, "cuda")) {
        rc = tc_tr_unsupported(T, "Tensor.cuda(): the current CUDA device, "
                               "which tcjit does not guard (x.to('cuda:N') "
                               "is traced)");
    }
    int leaf = X.device != -3 || !any_tensor || to_cpu;
    int rdev = X.device != -3 ? X.device : -1;
    for (int k = 0; !leaf && k < X.nin && rdev < 0; k++) {
        rdev = tc_tr_node_device(T, X.in[k]);
    }
    X.rdev = rdev;
    if (rc == OK && rdev < 0 && in_list(bare, meta_differs_reduced_cpu)
        && any_reduced_operand(T, &X)) {
        rc = tc_tr_unsupported(T, "%s: its meta result differs from the CPU "
                               "kernel's for float16 / bfloat16", bare);
    }
    if (rc == OK && leaf) {
        rc = tc_tr_join_device(T, bare, rdev);
    }
    char err[512];
    int call = -1;
    if (rc == OK) {
        call = tc_xtable_intern(fn, nargs, argv, kwnames, X.nin, err,
                                sizeof(err));
        rc = call == -1 ? ERROR
           : call == -2 ? tc_tr_unsupported(T, "%s: %s", bare, err) : OK;
    }
    for (int i = 0; i < n; i++) {
        Py_DECREF(argv[i]);
    }
    const char *name = rc == OK ? tc_xtable_name(call) : bare;
    tc_xresult res;
    if (rc == OK) {
        tc_dtype dts[TC_MAX_OP_INPUTS];
        const tc_layout *ls[TC_MAX_OP_INPUTS];
        for (int k = 0; k < X.nin; k++) {
            dts[k] = T->out->graph->nodes[X.in[k]].dtype;
            ls[k] = &T->out->graph->nodes[X.in[k]].layout;
        }
        int m = tc_xtable_meta(call, X.nin, dts, ls, rdev, &res,
                               err, sizeof(err));
        rc = m < 0 ? ERROR
           : m > 0 ? tc_tr_unsupported(T, "%s: %s", name, err) : OK;
    }
    if (rc == OK) {
        tc_var *opvars[TC_MAX_OP_INPUTS];
        int nops = 0;
        for (int i = 0; i < nargs; i++) {
            collect_operand_vars(args[i], opvars, &nops);
        }
        int first = T->out->graph->nnodes;
        rc = push_result(T, name, &X, &res, opvars, call);
        if (rc == OK && leaf) {
            tc_tr_place_since(T, first, rdev);
        }
        if (rc == OK && is_pure_factory(fn, bare, X.nin)) {
            mark_pure(T->out->graph, first);
        }
    }
    Py_DECREF(pyname);
    return rc;
}

int
tc_tr_extern_layout(tracer *T, const char *name, int nargv,
                    PyObject *const *argv, int nin, const int *in,
                    tc_layout *out)
{
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *fn = torch ? PyObject_GetAttrString(torch, name) : NULL;
    Py_XDECREF(torch);
    if (fn == NULL) {
        return -1;
    }
    char err[512];
    int call = tc_xtable_intern(fn, nargv, argv, NULL, nin, err, sizeof(err));
    Py_DECREF(fn);
    if (call < 0) {
        return call == -1 ? -1 : 1;
    }
    tc_dtype dts[TC_MAX_OP_INPUTS];
    const tc_layout *ls[TC_MAX_OP_INPUTS];
    int dev = -1;
    for (int k = 0; k < nin; k++) {
        dts[k] = T->out->graph->nodes[in[k]].dtype;
        ls[k] = &T->out->graph->nodes[in[k]].layout;
        if (dev < 0) {
            dev = tc_tr_node_device(T, in[k]);
        }
    }
    tc_xresult res;
    int rc = tc_xtable_meta(call, nin, dts, ls, dev, &res, err, sizeof(err));
    if (rc != 0) {
        return rc;
    }
    if (res.tuple || res.nout != 1 || res.out[0].alias >= 0) {
        return 1;
    }
    *out = res.out[0].layout;
    return 0;
}
