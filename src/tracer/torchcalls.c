/* torchcalls.c - calls of torch functions and Tensor methods.
 *
 * tc_tr_call_binding() hands a call the op table (bindings.h) knows to
 * the handler of its kind: elementwise ops, reductions, normalizations,
 * views, extern ops (matmul, attention, convolutions, embeddings),
 * activations and tensor factories.  They build graph nodes; nothing
 * runs here.
 */
#include "tracer_internal.h"

#include <math.h>

#include "../graph/extern.h"
#include "../pyrt/pyvalue.h"
#include "../runtime/extern_table.h"

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
        return tc_tr_unsupported(T, "%s() got %d positional arguments", fname,
                                 npos);
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
            return tc_tr_unsupported(T, "%s() with keyword argument '%s'",
                                     fname, name ? name : "?");
        }
        params[found] = args[npos + k];
    }
    unsigned given = 0;
    for (int i = 0; i < b->nparams; i++) {
        given |= (unsigned)(params[i] != NULL) << i;
        if (params[i] == NULL) {
            if (b->defaults[i] == NULL) {
                return tc_tr_unsupported(T, "%s() missing argument '%s'",
                                         fname, b->names[i]);
            }
            params[i] = tc_var_const(&T->sh->arena, b->defaults[i], -1);
            if (params[i] == NULL) {
                return ERROR;
            }
        }
    }
    int rc = tc_tr_reify_all(T, params, b->nparams);
    for (int i = 0; rc == OK && i < b->nparams; i++) {
        /* eager's TypeError: the frame runs eagerly and raises it */
        tc_var *v = params[i];
        const char *want =
            (b->tensor_only >> i & 1) && v->kind != TC_VAR_TENSOR ? "Tensor"
            : !(given >> i & 1) ? NULL
            : (b->bool_only >> i & 1)
              && !(v->kind == TC_VAR_CONST && PyBool_Check(v->obj)) ? "bool"
            : (b->not_none >> i & 1) && tc_tr_is_none(v) ? "not None"
            : NULL;
        if (want != NULL) {
            return tc_tr_unsupported(T, "%s(): argument '%s' must be %s",
                                     fname, b->names[i], want);
        }
    }
    return rc;
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
add_scaled_number(tracer *T, const tc_binding *b, tc_var *x, PyObject *other,
                  PyObject *alpha)
{
    double a = PyFloat_AsDouble(alpha), o = PyFloat_AsDouble(other);
    PyObject *prod = a == -1.0 && PyErr_Occurred() ? NULL
                   : o == -1.0 && PyErr_Occurred() ? NULL
                   : PyFloat_FromDouble(a * o);
    if (prod == NULL) {
        PyErr_Clear();    /* an int beyond a double: torch's verdict */
        return tc_tr_unsupported(T, "%s() with alpha and a huge number",
                                 b->def->path);
    }
    tc_var *v = tc_var_const(&T->sh->arena, prod, -1);
    Py_DECREF(prod);
    if (v == NULL) {
        return ERROR;
    }
    tc_var *args[2] = {x, v};
    return tc_tr_emit_op(T, b->def->op, 2, args, TC_F32);
}

static int
call_add_sub(tracer *T, const tc_binding *b, tc_var **p)
{
    tc_var *other = p[1], *alpha = p[2];
    PyObject *one = PyLong_FromLong(1);
    int plain = one && is_const(alpha, one);
    Py_XDECREF(one);
    if (plain) {
        tc_var *args[2] = {p[0], other};
        return tc_tr_emit_op(T, b->def->op, 2, args, TC_F32);
    }
    if (alpha->kind != TC_VAR_CONST
        || !(PyLong_CheckExact(alpha->obj) || PyFloat_CheckExact(alpha->obj))) {
        return tc_tr_unsupported(T, "%s() with a non-number alpha",
                                 b->def->path);
    }
    int rc = OK, nodes[2];
    for (int i = 0; i < 2; i++) {
        nodes[i] = tc_tr_operand_node(T, p[i], &rc);
        if (nodes[i] < 0) {
            return rc;
        }
    }
    tc_dtype rt = tc_promote_nodes(T->out->graph, 2, nodes);
    if (tc_dtype_is_float(rt) && other->kind == TC_VAR_CONST
        && (PyLong_CheckExact(other->obj) || PyFloat_CheckExact(other->obj))) {
        /* a number: eager adds alpha * other, both in the result's opmath
         * (the product of two Python numbers, rounded once) */
        return add_scaled_number(T, b, p[0], other->obj, alpha->obj);
    }
    if (!tc_dtype_is_float(rt) || other->kind != TC_VAR_TENSOR) {
        return tc_tr_unsupported(T, "%s() with alpha on a non-float result",
                                 b->def->path);
    }
    /* the op's own checks on the operands as given (sub of a bool tensor),
     * before other is cast to the result dtype */
    char err[256];
    tc_dtype compute, out;
    if (tc_op_infer_dtypes(T->out->graph, tc_op_lookup(b->def->op), nodes,
                           TC_F32, &compute, &out, err, sizeof(err)) < 0) {
        return tc_tr_unsupported(T, "%s: %s", b->def->path, err);
    }
    rc = call_cast(T, other, rt);
    if (rc != OK) {
        return rc;
    }
    tc_var *mul_args[2] = {tc_tr_pop(T), alpha};
    rc = tc_tr_emit_op(T, "mul", 2, mul_args, TC_F32);
    if (rc != OK) {
        return rc;
    }
    tc_var *args[2] = {p[0], tc_tr_pop(T)};
    return tc_tr_emit_op(T, b->def->op, 2, args, TC_F32);
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
            return tc_tr_unsupported(T, "clamp() with a NaN bound");
        }
    }
    if (has_min && has_max) {
        return tc_tr_emit_op(T, "clamp", 3, p, TC_F32);
    }
    if (!has_min && !has_max) {
        return tc_tr_unsupported(T, "clamp() with neither min nor max");
    }
    tc_var *args[2] = {p[0], has_min ? p[1] : p[2]};
    return tc_tr_emit_op(T, has_min ? "clamp_min" : "clamp_max", 2, args,
                         TC_F32);
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
        return tc_tr_unsupported(T, "cast of a non-tensor");
    }
    if (dt < 0) {
        return tc_tr_unsupported(T, "Tensor.to() with something other than a "
                                 "dtype");
    }
    if (tc_tr_tensor_node(T, self)->dtype == (tc_dtype)dt) {
        return tc_tr_push(T, self);
    }
    tc_var *args[1] = {self};
    return tc_tr_emit_op(T, "to", 1, args, (tc_dtype)dt);
}

/* x.shape and x.size() are torch.Size objects, constant under the tensor's
 * TENSOR_MATCH guard. */
PyObject *
tc_tr_size_object(const tc_layout *l)
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
        return tc_tr_unsupported(T, "%s on a non-tensor", b->def->path);
    }
    const tc_layout *l = &tc_tr_tensor_node(T, p[0])->layout;
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
            return tc_tr_unsupported(T, "Tensor.%s(%ld) out of range",
                                     b->def->call == TC_CALL_STRIDE
                                     ? "stride" : "size", d);
        }
        const int64_t *v = b->def->call == TC_CALL_STRIDE ? l->strides
                                                          : l->sizes;
        r = PyLong_FromLongLong(v[d < 0 ? d + l->ndim : d]);
    }
    else if (!tc_tr_is_none(p[1])) {
        return tc_tr_unsupported(T, "%s with a dim of a %s", b->def->path,
                                 tc_var_kind_name(p[1]));
    }
    else if (b->def->call == TC_CALL_STRIDE) {
        r = tc_int_tuple(l->ndim, l->strides);
    }
    else {
        r = tc_tr_size_object(l);
    }
    if (r == NULL) {
        return ERROR;
    }
    tc_var *v = tc_var_const(&T->sh->arena, r, -1);
    Py_DECREF(r);
    return tc_tr_push(T, v);
}

/* ---- reductions, normalizations, views ---------------------------------- */

int
tc_tr_push_node(tracer *T, int node, const char *what, const char *err)
{
    if (node < 0) {
        return tc_tr_unsupported(T, "%s: %s", what, err);
    }
    tc_var *v = tc_var_new(&T->sh->arena, TC_VAR_TENSOR, -1);
    if (v == NULL) {
        return ERROR;
    }
    v->node = node;
    return tc_tr_push(T, v);
}

int
tc_tr_is_none(tc_var *v)
{
    return v->kind == TC_VAR_CONST && v->obj == Py_None;
}

/* A Python int, or a tuple/list/torch.Size of them, known at trace time:
 * dims and shapes.  Returns the count, or -1 if it is not one. */
static int
int_list(tracer *T, tc_var *v, int64_t *out, int max)
{
    if (tc_tr_reify(T, v) != OK) {
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
    *has = !tc_tr_is_none(v);
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
            return tc_tr_unsupported(T,
                                     "norm with p other than 1, 2 or 'fro'");
        }
        a.p = pp;
    }
    if (!tc_tr_is_none(p[i])) {
        a.ndims = int_list(T, p[i], a.dims, TC_MAX_DIMS);
        if (a.ndims < 0) {
            return tc_tr_unsupported(T,
                                     "%s() with a dim that is not an int or "
                                     "a tuple of ints", name);
        }
        if (a.ndims == 0) {
            return tc_tr_unsupported(T, "%s() with dim=() (torch's meaning "
                                     "differs between ops)", name);
        }
    }
    i++;
    int var_like = strcmp(name, "var") == 0 || strcmp(name, "std") == 0;
    if (var_like && !tc_tr_is_none(p[i])) {       /* unbiased */
        a.correction = PyObject_IsTrue(p[i]->obj) ? 1 : 0;
    }
    i += var_like;
    a.keepdim = p[i]->kind == TC_VAR_CONST && PyObject_IsTrue(p[i]->obj);
    i++;
    if (var_like && !tc_tr_is_none(p[i])) {       /* correction */
        a.correction = PyFloat_AsDouble(p[i]->obj);
        if (a.correction == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return tc_tr_unsupported(T, "%s() with a non-number correction",
                                     name);
        }
    }
    else if (i < b->nparams && strcmp(b->names[i], "dtype") == 0
             && dtype_param(p[i], &a.has_dtype, &a.dtype) < 0) {
        return tc_tr_unsupported(T, "%s() with an unsupported dtype", name);
    }
    int rc = OK, x = tc_tr_operand_node(T, p[0], &rc);
    if (x < 0 || p[0]->kind != TC_VAR_TENSOR) {
        return x < 0 ? rc : tc_tr_unsupported(T, "%s() of a non-tensor", name);
    }
    char err[256];
    return tc_tr_push_node(T, tc_graph_reduce(T->out->graph, name, x, &a, err,
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
        return tc_tr_unsupported(T, "%s() needs a tensor and an int dim",
                                 b->def->op);
    }
    char err[256];
    int log = strcmp(b->def->op, "log_softmax") == 0;
    return tc_tr_push_node(T, tc_graph_softmax(T->out->graph, p[0]->node, dim,
                                               has_dtype, dt, log, err,
                                               sizeof(err)), b->def->op, err);
}

/* weight / bias: a tensor, or None (-1). */
static int
optional_tensor(tc_var *v)
{
    return v->kind == TC_VAR_TENSOR ? v->node : tc_tr_is_none(v) ? -1 : -2;
}

/* Dtypes of layer_norm's weight / bias (or -1) that eager accepts: x's
 * own, or on CPU float32 ones for a float16 / bfloat16 x ("mixed dtype
 * (CPU)"); the CUDA kernel reads them as x's dtype and raises otherwise. */
static int
layer_norm_params_ok(tracer *T, int x, int w, int bias)
{
    const tc_graph *g = T->out->graph;
    tc_dtype xd = g->nodes[x].dtype;
    int mixed = tc_tr_node_device(T, x) < 0
                && (xd == TC_F16 || xd == TC_BF16);
    int ps[2] = {w, bias};
    for (int i = 0; i < 2; i++) {
        if (ps[i] >= 0 && g->nodes[ps[i]].dtype != xd
            && !(mixed && g->nodes[ps[i]].dtype == TC_F32)) {
            return 0;
        }
    }
    /* a float32 weight with a bias of x's dtype is mixed too */
    return !(w >= 0 && bias >= 0
             && g->nodes[w].dtype != g->nodes[bias].dtype);
}

static int
call_norm_layer(tracer *T, const tc_binding *b, tc_var **p)
{
    int64_t shape[TC_MAX_DIMS];
    int n = int_list(T, p[1], shape, TC_MAX_DIMS);
    int rms = b->def->call == TC_CALL_RMS_NORM;
    int w = optional_tensor(p[2]), bias = rms ? -1 : optional_tensor(p[3]);
    tc_var *epsv = p[rms ? 3 : 4];
    int has_eps = !tc_tr_is_none(epsv);
    double eps = has_eps ? PyFloat_AsDouble(epsv->obj) : 0;
    if (p[0]->kind != TC_VAR_TENSOR || n < 0 || w == -2 || bias == -2
        || (eps == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return tc_tr_unsupported(T, "%s() with unsupported arguments",
                                 b->def->path);
    }
    if (!rms && !layer_norm_params_ok(T, p[0]->node, w, bias)) {
        return tc_tr_unsupported(T, "%s(): mixed dtype: weight and bias "
                                 "must have the input's dtype", b->def->path);
    }
    char err[256];
    int node = rms
        ? tc_graph_rms_norm(T->out->graph, p[0]->node, n, shape, w, has_eps,
                            eps, err, sizeof(err))
        : tc_graph_layer_norm(T->out->graph, p[0]->node, n, shape, w, bias,
                              eps, err, sizeof(err));
    return tc_tr_push_node(T, node, b->def->path, err);
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
        return tc_tr_unsupported(T, "%s of a non-tensor", op);
    }
    if (strcmp(op, "t") == 0) {
        node = tc_graph_t(g, x, err, sizeof(err));
    }
    else if (strcmp(op, "is_contiguous") == 0) {
        if (nrest != 0) {
            return tc_tr_unsupported(T, "is_contiguous(memory_format=...)");
        }
        return tc_tr_push_folded(T, PyBool_FromLong(
            is_contiguous_layout(&tc_tr_tensor_node(T, self)->layout)),
            "is_contiguous");
    }
    else if (strcmp(op, "expand_as") == 0 || strcmp(op, "view_as") == 0
             || strcmp(op, "reshape_as") == 0) {
        if (nrest != 1 || rest[0]->kind != TC_VAR_TENSOR) {
            return tc_tr_unsupported(T, "Tensor.%s() of a non-tensor", op);
        }
        const tc_layout *o = &tc_tr_tensor_node(T, rest[0])->layout;
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
            return tc_tr_unsupported(T, "unflatten() with non-constant sizes");
        }
        node = tc_graph_unflatten(g, x, dim, ns, sizes, err, sizeof(err));
    }
    else if (strcmp(op, "contiguous") == 0) {
        /* eager returns self whenever self is_contiguous() (size-1 dims
         * and empty tensors included, whatever the storage offset) */
        if (is_contiguous_layout(&tc_tr_tensor_node(T, self)->layout)) {
            return tc_tr_push(T, self);
        }
        node = tc_graph_op(g, "contiguous", 1, &x, TC_F32, err, sizeof(err));
    }
    else if ((n = vararg_dims(T, rest, nrest, d)) < 0 && nrest > 0) {
        return tc_tr_unsupported(T, "Tensor.%s() with non-constant arguments",
                                 op);
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
        return tc_tr_unsupported(T, "Tensor.%s() with these arguments", op);
    }
    if (node == x && strcmp(op, "flatten") == 0) {
        return tc_tr_push(T, self);   /* eager's flatten returns self */
    }
    if (node == x) {
        /* x.t() of a 1-d x, a squeeze with nothing to squeeze: eager's
         * result is another tensor object, a view of the same layout */
        node = tc_graph_alias(g, x, err, sizeof(err));
    }
    return tc_tr_push_node(T, node, op, err);
}

static int
call_view_binding(tracer *T, const tc_binding *b, tc_var **args, int nargs,
                  PyObject *kwnames)
{
    if (strstr(b->def->sig, "*dims") != NULL) {
        if (kwnames != NULL || nargs < 1) {
            return tc_tr_unsupported(T, "%s() with keyword arguments",
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
        if (!tc_tr_is_none(p[i])) {
            rest[nrest++] = p[i];
        }
    }
    return call_view(T, b->def->op, p[0], rest, nrest);
}

/* ---- extern ops and multi-view ops ------------------------------------ */

int
tc_tr_push_extern(tracer *T, const char *op, int n, const int *in,
                  const int64_t *xattr, double xfattr)
{
    char err[256];
    return tc_tr_push_node(T, tc_graph_extern(T->out->graph, op, n, in, xattr,
                                              xfattr, err, sizeof(err)),
                           op, err);
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
        else if (!tc_tr_is_none(p[i]) || i < 2) {
            return tc_tr_unsupported(T, "%s() with %s argument '%s'",
                                     b->def->path,
                                     tc_var_kind_name(p[i]), b->names[i]);
        }
    }
    return tc_tr_push_extern(T, b->def->op, n, in, NULL, 0);
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

/* (sizes, strides, dtype) of node id: what torch needs to make a stand-in. */
static PyObject *
operand_meta(tracer *T, int id)
{
    const tc_node *nd = &T->out->graph->nodes[id];
    const tc_layout *l = &nd->layout;
    PyObject *sz = PyTuple_New(l->ndim), *st = PyTuple_New(l->ndim);
    for (int i = 0; sz && st && i < l->ndim; i++) {
        PyTuple_SET_ITEM(sz, i, PyLong_FromLongLong(l->sizes[i]));
        PyTuple_SET_ITEM(st, i, PyLong_FromLongLong(l->strides[i]));
    }
    PyObject *r = NULL;
    if (sz != NULL && st != NULL && !PyErr_Occurred()) {
        r = PyTuple_Pack(3, sz, st, tc_dtype_to_torch(nd->dtype));
    }
    Py_XDECREF(sz);
    Py_XDECREF(st);
    return r;
}

/* tcjit._sdpa.<name> (a new reference, kept by the caller for the
 * process), or NULL with an exception. */
static PyObject *
sdpa_py(const char *name)
{
    PyObject *m = PyImport_ImportModule("tcjit._sdpa");
    PyObject *fn = m ? PyObject_GetAttrString(m, name) : NULL;
    Py_XDECREF(m);
    return fn;
}

/* The memory order of eager's result (extern.h TC_SDPA_*), so the
 * compiled result has eager's strides and the runtime need not copy it.
 * On the CPU (torch 2.13, every dtype) the flash kernel, taken for 4-d q,
 * k, v with one head dim, writes into empty_like(q) when q's last dim is
 * dense ([B, L, H, E] when heads were split off a projection, as in every
 * transformer), else into a contiguous tensor; the math fallback's is
 * contiguous.  Which kernel torch picks depends on the operands' metadata
 * on both devices (an expanded k takes math on the CPU):
 * python/tcjit/_sdpa.py asks torch.  -1 with an exception. */
static int
sdpa_layout(tracer *T, const int *in, int n, PyObject *causal,
            PyObject *scale)
{
    const tc_layout *ql = &T->out->graph->nodes[in[0]].layout;
    const tc_layout *vl = &T->out->graph->nodes[in[2]].layout;
    if (T->out->device < 0
        && !(ql->ndim == 4 && vl->ndim == 4 && ql->strides[3] == 1
             && ql->sizes[3] == vl->sizes[3])) {
        /* math, whatever torch chooses: q alone tells layout() so */
        n = 1;
    }
    static PyObject *fn;
    if (fn == NULL && (fn = sdpa_py("layout")) == NULL) {
        return -1;
    }
    PyObject *ops = PyTuple_New(n);
    for (int i = 0; ops != NULL && i < n; i++) {
        PyObject *o = operand_meta(T, in[i]);
        if (o == NULL) {
            Py_CLEAR(ops);
            break;
        }
        PyTuple_SET_ITEM(ops, i, o);
    }
    PyObject *dev = T->out->device < 0
                    ? PyUnicode_FromString("cpu")
                    : PyUnicode_FromFormat("cuda:%d", T->out->device);
    PyObject *r = ops && dev ? PyObject_CallFunctionObjArgs(fn, ops, dev, causal,
                                                            scale, NULL)
                             : NULL;
    long kind = r ? PyLong_AsLong(r) : -1;
    Py_XDECREF(ops);
    Py_XDECREF(dev);
    Py_XDECREF(r);
    return kind < 0 || PyErr_Occurred() ? -1 : (int)kind;
}

/* sdpa as torch's math kernel computes it: python/tcjit/_sdpa.py
 * math_attention(q, k, v, attn_mask, is_causal, scale) inlined.
 * UNSUPPORTED with nothing pushed and nothing that runs left in the graph
 * if some op of it cannot be traced (the caller then records the call as
 * one node). */
static int
inline_math_sdpa(tracer *T, tc_var **p)
{
    static PyObject *fn;
    if (fn == NULL && (fn = sdpa_py("math_attention")) == NULL) {
        return ERROR;
    }
    tc_var *fv = tc_tr_const_var(T, fn);
    if (fv == NULL) {
        return ERROR;
    }
    tc_var *args[6] = {p[0], p[1], p[2], p[3], p[5], p[6]};
    int sp = T->sp, nnodes = T->out->graph->nnodes;
    int rc = tc_tr_inline_call(T, fv, args, 6, NULL);
    if (rc == UNSUPPORTED && T->sp == sp) {
        tc_graph_drop_effects(T->out->graph, nnodes);
        Py_CLEAR(T->out->reason);
    }
    return rc;
}

static int
call_sdpa(tracer *T, tc_var **p)
{
    int64_t xa[TC_MAX_XATTR] = {0};
    int in[4], n = 3;
    double dropout = -1, scale = 0;
    for (int i = 0; i < 3; i++) {
        if (p[i]->kind != TC_VAR_TENSOR) {
            return tc_tr_unsupported(T, "scaled_dot_product_attention of a %s",
                                     tc_var_kind_name(p[i]));
        }
        in[i] = p[i]->node;
    }
    if (p[3]->kind == TC_VAR_TENSOR) {
        in[n++] = p[3]->node;
        xa[TC_XA_SDPA_HAS_MASK] = 1;
    }
    if ((!tc_tr_is_none(p[3]) && p[3]->kind != TC_VAR_TENSOR)
        || const_number(p[4], &dropout) < 0 || dropout != 0
        || p[5]->kind != TC_VAR_CONST || !PyBool_Check(p[5]->obj)
        || (!tc_tr_is_none(p[6]) && const_number(p[6], &scale) < 0)
        || p[7]->obj != Py_False) {
        return tc_tr_unsupported(T, "scaled_dot_product_attention with "
                                 "dropout_p, enable_gqa or non-constant "
                                 "arguments");
    }
    xa[TC_XA_SDPA_CAUSAL] = p[5]->obj == Py_True;
    int layout = sdpa_layout(T, in, n, p[5]->obj, p[6]->obj);
    if (layout < 0) {
        return ERROR;
    }
    if (layout == TC_SDPA_MATH) {
        int rc = inline_math_sdpa(T, p);
        if (rc != UNSUPPORTED) {
            return rc;
        }
        layout = TC_SDPA_CONTIG;
    }
    xa[TC_XA_SDPA_LAYOUT] = layout;
    xa[TC_XA_SDPA_HAS_SCALE] = !tc_tr_is_none(p[6]);
    return tc_tr_push_extern(T, "sdpa", n, in, xa, scale);
}

static int
call_embedding(tracer *T, tc_var **p)
{
    if (p[0]->kind != TC_VAR_TENSOR || p[1]->kind != TC_VAR_TENSOR
        || !tc_tr_is_none(p[3]) || p[6]->obj != Py_False) {
        return tc_tr_unsupported(T, "F.embedding with max_norm or sparse");
    }
    int in[2] = {p[0]->node, p[1]->node};
    /* the result does not depend on them, its gradient does */
    int64_t xa[TC_MAX_XATTR] = {-1, 0};
    double pad = -1;
    if ((!tc_tr_is_none(p[2]) && const_number(p[2], &pad) < 0)
        || (p[5]->obj != Py_False && p[5]->obj != Py_True)) {
        return tc_tr_unsupported(T, "F.embedding with a non-constant "
                                 "padding_idx or scale_grad_by_freq");
    }
    const tc_layout *w = &T->out->graph->nodes[p[1]->node].layout;
    xa[TC_XA_EMB_PADDING_IDX] = pad < 0 && w->ndim > 0
                                ? (int64_t)pad + w->sizes[0] : (int64_t)pad;
    if (tc_tr_is_none(p[2])) {
        xa[TC_XA_EMB_PADDING_IDX] = -1;
    }
    xa[TC_XA_EMB_SCALE_GRAD] = p[5]->obj == Py_True;
    return tc_tr_push_extern(T, "embedding", 2, in, xa, 0);
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

/* The layout of torch.<op>(input, weight, bias, stride, padding, dilation,
 * groups) for nodes in[0..n-1] (tc_tr_extern_layout). */
static int
conv_eager_layout(tracer *T, const char *op, int nsp, int n, const int *in,
                  const int64_t *xa, tc_layout *out)
{
    PyObject *argv[7] = {NULL};
    for (int k = 0; k < 3; k++) {
        argv[k] = k < n ? Py_XNewRef(tc_xtable_operand(k))
                        : Py_NewRef(Py_None);
    }
    argv[3] = tc_int_tuple(nsp, &xa[TC_XA_CONV_STRIDE]);
    argv[4] = tc_int_tuple(nsp, &xa[TC_XA_CONV_PADDING]);
    argv[5] = tc_int_tuple(nsp, &xa[TC_XA_CONV_DILATION]);
    argv[6] = PyLong_FromLongLong(xa[TC_XA_CONV_GROUPS]);
    int rc = -1;
    for (int i = 0; i < 7; i++) {
        if (argv[i] == NULL) {
            goto done;
        }
    }
    rc = tc_tr_extern_layout(T, op, 7, argv, n, in, out);
done:
    for (int i = 0; i < 7; i++) {
        Py_XDECREF(argv[i]);
    }
    return rc;
}

/* padding= of a convolution: conv_param's, or "valid" (none) and "same"
 * where eager pads both sides alike (stride 1, dilation * (kernel - 1)
 * even), read off weight w.  0, or -1 (not handled). */
static int
conv_padding(tracer *T, tc_var *pad, tc_var *w, int nsp, const int64_t *xa,
             int64_t *out)
{
    if (tc_tr_reify(T, pad) != OK) {
        PyErr_Clear();
        return -1;
    }
    if (pad->kind != TC_VAR_CONST || !PyUnicode_Check(pad->obj)) {
        return conv_param(T, pad, nsp, out);
    }
    int same = PyUnicode_CompareWithASCIIString(pad->obj, "same") == 0;
    if (!same && PyUnicode_CompareWithASCIIString(pad->obj, "valid") != 0) {
        return -1;
    }
    const tc_node *wn = tc_tr_tensor_node(T, w);
    if (wn == NULL || wn->layout.ndim != nsp + 2) {
        return -1;
    }
    for (int i = 0; i < nsp; i++) {
        int64_t k = wn->layout.sizes[2 + i];
        int64_t total = xa[TC_XA_CONV_DILATION + i] * (k - 1);
        if (same && (xa[TC_XA_CONV_STRIDE + i] != 1 || k < 1 || total % 2)) {
            return -1;
        }
        out[i] = same ? total / 2 : 0;
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
        || (n == 2 && !tc_tr_is_none(p[2]))
        || conv_param(T, p[3], nsp, &xa[TC_XA_CONV_STRIDE]) < 0
        || conv_param(T, p[5], nsp, &xa[TC_XA_CONV_DILATION]) < 0
        || conv_padding(T, p[4], p[1], nsp, xa,
                        &xa[TC_XA_CONV_PADDING]) < 0
        || int_list(T, p[6], &xa[TC_XA_CONV_GROUPS], 1) != 1) {
        return tc_tr_unsupported(T, "%s() with padding='same' that eager "
                                 "pads unevenly, or non-constant "
                                 "arguments", b->def->path);
    }
    char err[256];
    int node = tc_graph_extern(T->out->graph, b->def->op, n, in, xa, 0, err,
                               sizeof(err));
    if (node >= 0) {
        /* eager's memory format depends on the backend torch picks (the
         * shape rule cannot know it): ask torch, as for a generic conv3d */
        tc_layout l;
        int rc = conv_eager_layout(T, b->def->op, nsp, n, in, xa, &l);
        if (rc < 0) {
            return ERROR;
        }
        if (rc == 0 && tc_graph_extern_relayout(T->out->graph, node, &l) < 0) {
            return tc_tr_unsupported(T, "%s(): torch's result has another "
                                     "shape", b->def->path);
        }
    }
    return tc_tr_push_node(T, node, b->def->op, err);
}

#define MAX_CAT 512

/* cat / stack of more tensors than a node takes (an optimizer's stacked
 * step sizes, one per parameter): op on groups of TC_MAX_OP_INPUTS, then
 * cat of the groups' results along the same dim, until one node is left
 * (stack(xs, d) is cat(stack(group, d) for each group, d)).  Items of one
 * dtype only, so the groups promote as the whole would. */
static int
cat_in_groups(tracer *T, const char *op, int *in, int n, const int64_t *xa)
{
    const tc_graph *g = T->out->graph;
    for (int i = 1; n > TC_MAX_OP_INPUTS && i < n; i++) {
        if (g->nodes[in[i]].dtype != g->nodes[in[0]].dtype) {
            return tc_tr_unsupported(T, "%s() of more than %d tensors of "
                                     "different dtypes", op,
                                     TC_MAX_OP_INPUTS);
        }
    }
    while (n > TC_MAX_OP_INPUTS) {
        int m = 0;
        for (int at = 0; at < n; at += TC_MAX_OP_INPUTS) {
            int k = n - at < TC_MAX_OP_INPUTS ? n - at : TC_MAX_OP_INPUTS;
            int rc = tc_tr_push_extern(T, op, k, in + at, xa, 0);
            if (rc != OK) {
                return rc;
            }
            in[m++] = tc_tr_pop(T)->node;
        }
        n = m;
        op = "cat";
    }
    return tc_tr_push_extern(T, op, n, in, xa, 0);
}

/* torch.cat skips 1-d empty operands beside tensors of another rank
 * (the legacy rule HF's DynamicCache relies on: cat([tensor([]), k])).
 * Dropped only where every operand has one dtype (they would otherwise
 * take part in the type promotion); returns the new count. */
static int
drop_legacy_empty(const tc_graph *g, int *in, int n)
{
    int other_rank = 0, m = 0;
    for (int i = 0; i < n; i++) {
        other_rank |= g->nodes[in[i]].layout.ndim != 1;
        if (g->nodes[in[i]].dtype != g->nodes[in[0]].dtype) {
            return n;
        }
    }
    for (int i = 0; i < n; i++) {
        const tc_layout *l = &g->nodes[in[i]].layout;
        if (!(other_rank && l->ndim == 1 && l->sizes[0] == 0)) {
            in[m++] = in[i];
        }
    }
    return m ? m : n;
}

/* cat of one tensor: a copy of it (a tensor of its own, in cat's layout),
 * which fuses with what computes it instead of a torch call. */
static int
cat_copy(tracer *T, int x, int64_t dim)
{
    tc_graph *g = T->out->graph;
    const tc_layout *ins[1] = {&g->nodes[x].layout};
    char err[256] = "";
    int nd = ins[0]->ndim;
    if (dim < -nd || dim >= nd || nd == 0) {
        return NOT_HANDLED;     /* eager's IndexError: the torch call */
    }
    tc_node c;
    tc_node_init(&c, TC_NODE_OP, g->nodes[x].dtype);
    c.op = tc_op_lookup("clone");
    c.nin = 1;
    c.in[0] = x;
    c.layout = *ins[0];         /* the sizes; cat's rule sets the strides */
    tc_layout_of_cat(ins, 1, &c.layout);
    return tc_tr_push_node(T, tc_graph_push_op(g, &c, err, sizeof(err)),
                           "cat", err);
}

static int
call_cat(tracer *T, const tc_binding *b, tc_var **p)
{
    int64_t xa[TC_MAX_XATTR] = {0};
    int in[MAX_CAT];
    tc_var *seq = p[0];
    if ((seq->kind != TC_VAR_TUPLE && seq->kind != TC_VAR_LIST)
        || seq->nitems < 1 || seq->nitems > MAX_CAT
        || int_list(T, p[1], &xa[TC_XA_CAT_DIM], 1) != 1) {
        return tc_tr_unsupported(T,
                                 "%s() of other than 1 to %d tensors with a "
                                 "constant dim", b->def->path, MAX_CAT);
    }
    for (int i = 0; i < seq->nitems; i++) {
        if (seq->items[i]->kind != TC_VAR_TENSOR) {
            return tc_tr_unsupported(T, "%s() of a %s", b->def->path,
                                     tc_var_kind_name(seq->items[i]));
        }
        in[i] = seq->items[i]->node;
    }
    int n = seq->nitems;
    if (!strcmp(b->def->op, "cat")) {
        n = drop_legacy_empty(T->out->graph, in, n);
        int rc = n == 1 ? cat_copy(T, in[0], xa[TC_XA_CAT_DIM]) : NOT_HANDLED;
        if (rc != NOT_HANDLED) {
            return rc;
        }
    }
    return cat_in_groups(T, b->def->op, in, n, xa);
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
        return tc_tr_unsupported(T, "%s() with a non-constant dim",
                                 b->def->path);
    }
    const tc_layout *l = &tc_tr_tensor_node(T, p[0])->layout;
    int64_t d = dim < 0 ? dim + l->ndim : dim;
    int n = d >= 0 && d < l->ndim
        ? split_bounds(T, op, unbind ? NULL : p[1], l->sizes[d], start, len)
        : -1;
    if (n < 0) {
        return tc_tr_unsupported(T, "%s() with these sizes", b->def->path);
    }
    tc_graph *g = T->out->graph;
    char err[256] = "";
    for (int i = 0; i < n; i++) {
        int node = unbind
            ? tc_graph_select(g, p[0]->node, d, start[i], err, sizeof(err))
            : tc_graph_narrow(g, p[0]->node, d, start[i], len[i], err,
                              sizeof(err));
        if (node < 0) {
            return tc_tr_unsupported(T, "%s: %s", op, err);
        }
        g->nodes[node].multi_view = 1;
        items[i] = tc_var_new(&T->sh->arena, TC_VAR_TENSOR, -1);
        if (items[i] == NULL) {
            return ERROR;
        }
        items[i]->node = node;
    }
    return tc_tr_push(T, tc_var_seq(&T->sh->arena, TC_VAR_TUPLE, n, items));
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
        || (n == 2 && !tc_tr_is_none(p[2])) || !tc_tr_is_none(p[3])
        || !tc_tr_is_none(p[5])
        || xa[TC_XA_LOSS_REDUCTION] < 0
        || (!tc_tr_is_none(p[6]) && !(p[6]->kind == TC_VAR_CONST
                                      && PyUnicode_Check(p[6]->obj)))
        || int_list(T, p[4], &xa[TC_XA_LOSS_IGNORE_INDEX], 1) != 1
        || (b->nparams > 7 && const_number(p[7], &smoothing) < 0)) {
        return tc_tr_unsupported(T, "%s() with size_average/reduce or "
                                 "non-constant arguments", b->def->path);
    }
    const tc_node *x = &T->out->graph->nodes[in[0]];
    if (!strcmp(b->def->op, "cross_entropy") && n == 2 && smoothing == 0
        && x->layout.ndim == 2 && (x->dtype == TC_F32 || x->dtype == TC_F64)
        && T->grad_mode && in[0] < T->sh->grad_cap && T->sh->grad[in[0]]) {
        /* training: fused into our kernels (graph.c says why) */
        char err[256] = "";
        return tc_tr_push_node(T, tc_graph_cross_entropy(
            T->out->graph, in[0], in[1], (int)xa[TC_XA_LOSS_REDUCTION],
            xa[TC_XA_LOSS_IGNORE_INDEX], err, sizeof(err)), b->def->op, err);
    }
    return tc_tr_push_extern(T, b->def->op, n, in, xa, smoothing);
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
        else if (!tc_tr_is_none(p[2 + i])) {
            return tc_tr_unsupported(T, "F.group_norm with a %s weight",
                                     tc_var_kind_name(p[2 + i]));
        }
    }
    if (p[0]->kind != TC_VAR_TENSOR
        || int_list(T, p[1], &xa[TC_XA_GN_GROUPS], 1) != 1
        || const_number(p[4], &eps) < 0) {
        return tc_tr_unsupported(T,
                                 "F.group_norm with non-constant arguments");
    }
    return tc_tr_push_extern(T, "group_norm", n, in, xa, eps);
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
        return tc_tr_unsupported(T, "%s() of a %s", b->def->path,
                                 tc_var_kind_name(p[0]));
    }
    if (p[1]->kind == TC_VAR_TENSOR) {
        tc_var *args[2] = {p[0], p[1]};
        return tc_tr_emit_op(T, is_max ? "maximum" : "minimum", 2, args,
                             TC_F32);
    }
    if (tc_tr_is_none(p[1])) {
        tc_reduce_args a;
        memset(&a, 0, sizeof(a));
        return tc_tr_push_node(T, tc_graph_reduce(T->out->graph, b->def->op,
                                                  p[0]->node, &a, err,
                                                  sizeof(err)),
                               b->def->op, err);
    }
    int64_t dim;
    if (int_list(T, p[1], &dim, 1) != 1 || p[2]->kind != TC_VAR_CONST
        || !PyBool_Check(p[2]->obj)) {
        return tc_tr_unsupported(T, "%s() with a non-constant dim",
                                 b->def->path);
    }
    if (tc_graph_max_dim(T->out->graph, is_max, p[0]->node, dim,
                         p[2]->obj == Py_True, &values, &indices, err,
                         sizeof(err)) < 0) {
        return tc_tr_unsupported(T, "%s: %s", b->def->path, err);
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
    return tc_tr_push(T, r);
}

/* The (values, indices) tuple of a torch.return_types value, or NULL. */
tc_var *
tc_tr_structseq_items(tc_var *v)
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
        return tc_tr_unsupported(T, "F.dropout with non-constant arguments");
    }
    if (prob < 0 || prob > 1) {
        return tc_tr_unsupported(T, "F.dropout with p outside [0, 1]");
    }
    if (p[2]->obj != Py_False && prob != 0) {
        return tc_tr_unsupported(T, "F.dropout with training=True and p > 0 "
                                 "(random masks are not compiled)");
    }
    return tc_tr_push(T, p[0]);
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
    double lo = 0, hi = 6;
    tc_var *inplace = p[b->nparams - 1];
    int is_inplace = inplace->kind == TC_VAR_CONST && inplace->obj == Py_True;
    if ((!is_false(inplace) && !is_inplace) || p[0]->kind != TC_VAR_TENSOR
        || (!relu6 && (const_number(p[1], &lo) < 0
                       || const_number(p[2], &hi) < 0))) {
        return tc_tr_unsupported(T, "%s() on a non-tensor, with inplace not "
                                 "a bool or limits that are not numbers",
                                 b->def->path);
    }
    /* F.hardtanh's ValueError and aten's hardtanh checks (the frame runs
     * eagerly and raises them); clamp has none of them */
    tc_dtype dt = tc_tr_tensor_node(T, p[0])->dtype;
    if (lo > hi || dt == TC_BOOL
        || (dt == TC_U8 && ((int64_t)lo < 0 || (int64_t)hi < 0))) {
        return tc_tr_unsupported(T, "%s() of a %s tensor with limits %g, %g",
                                 b->def->path, tc_dtype_name(dt), lo, hi);
    }
    tc_var *args[3] = {p[0], relu6 ? int_var(T, 0) : p[1],
                       relu6 ? int_var(T, 6) : p[2]};
    if (args[1] == NULL || args[2] == NULL) {
        return ERROR;
    }
    int first = T->out->graph->nnodes;
    int rc = call_clamp(T, args);
    rc = rc != OK ? rc : call_cast(T, tc_tr_pop(T),
                                   tc_tr_tensor_node(T, p[0])->dtype);
    if (rc == OK && is_inplace) {
        /* hardtanh_: the clamped values written into the input */
        return tc_tr_inplace_result(T, p[0], args + 1, 2, first,
                                    b->def->path);
    }
    if (rc == OK && tc_graph_result_like(T->out->graph, tc_tr_peek(T, 1)->node,
                                         p[0]->node) < 0) {
        return tc_tr_unsupported(T, "%s() whose result is not a new tensor",
                                 b->def->path);
    }
    return rc;
}

static int
call_tril(tracer *T, const tc_binding *b, tc_var **p)
{
    int64_t k;
    if (p[0]->kind != TC_VAR_TENSOR || int_list(T, p[1], &k, 1) != 1) {
        return tc_tr_unsupported(T, "%s() needs a tensor and an int diagonal",
                                 b->def->path);
    }
    char err[256];
    int upper = strcmp(b->def->op, "triu") == 0;
    return tc_tr_push_node(T, tc_graph_tril(T->out->graph, p[0]->node, k,
                                            upper, err, sizeof(err)),
                           b->def->op, err);
}

static int
call_normalize(tracer *T, const tc_binding *b, tc_var **p)
{
    int64_t dim;
    double pp = p[1]->kind == TC_VAR_CONST ? PyFloat_AsDouble(p[1]->obj) : -1;
    double eps = p[3]->kind == TC_VAR_CONST ? PyFloat_AsDouble(p[3]->obj) : -1;
    if (PyErr_Occurred() || p[0]->kind != TC_VAR_TENSOR || !tc_tr_is_none(p[4])
        || int_list(T, p[2], &dim, 1) != 1 || (pp != 1 && pp != 2)) {
        PyErr_Clear();
        return tc_tr_unsupported(T, "%s() with p other than 1 or 2, out=, or "
                                 "non-constant arguments", b->def->path);
    }
    char err[256];
    return tc_tr_push_node(T, tc_graph_normalize(T->out->graph, p[0]->node, pp,
                                                 dim, eps, err, sizeof(err)),
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
int
tc_tr_device_param(tc_var *v, int dflt)
{
    if (v == NULL || tc_tr_is_none(v)) {
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

/* A tensor on device dev (-1 the CPU) joins the graph.  A graph runs on
 * one CUDA device; CPU tensors join any graph: on a CUDA graph they are its
 * host part (graph.h TC_PLACE_HOST), as eager keeps them on the CPU. */
int
tc_tr_join_device(tracer *T, const char *what, int dev)
{
    if (dev < 0) {
        return OK;
    }
    if (T->out->graph->cuda && dev != T->out->device) {
        char a[32], b[32];
        device_name(a, sizeof(a), dev);
        device_name(b, sizeof(b), T->out->device);
        return tc_tr_unsupported(T, "%s on %s while the graph's tensors are "
                                 "on %s (a compiled graph runs on one CUDA "
                                 "device)", what, a, b);
    }
    T->out->device = dev;
    T->out->graph->cuda = 1;
    return OK;
}

/* The nodes made since node `first` hold values on device dev: a CPU
 * tensor input, a creation op's or a copy's result (the leaves whose place
 * the others follow: place.c). */
void
tc_tr_place_since(tracer *T, int first, int dev)
{
    tc_graph *g = T->out->graph;
    for (int i = first < 0 ? g->nnodes : first; i < g->nnodes; i++) {
        if (g->nodes[i].kind != TC_NODE_SCALAR) {
            g->nodes[i].place = dev < 0 ? TC_PLACE_HOST : TC_PLACE_DEVICE;
        }
    }
}

/* The device of node id's value: -1 the CPU, else the graph's. */
int
tc_tr_node_device(tracer *T, int id)
{
    return tc_graph_is_host(T->out->graph, id) ? -1 : T->out->device;
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
             && (!lay || tc_tr_is_none(lay) || lay->obj == strided)
             && (!mf || tc_tr_is_none(mf) || mf->obj == preserve);
    Py_XDECREF(strided);
    Py_XDECREF(preserve);
    PyErr_Clear();
    return ok;
}

/* arange's length and dtype, with eager's checks (RangeFactories.cpp). */
static int
arange_args(tracer *T, tc_var **p, int has_dtype, tc_dtype *dt, int64_t *n)
{
    if (tc_tr_is_none(p[1])) {               /* arange(end) */
        tc_var *end = p[0];
        p[0] = int_var(T, 0);
        p[1] = end;
    }
    int any_float = 0;
    for (int i = 0; i < 3; i++) {
        if (p[i] == NULL || p[i]->kind != TC_VAR_CONST || PyBool_Check(p[i]->obj)
            || !(PyLong_CheckExact(p[i]->obj) || PyFloat_CheckExact(p[i]->obj))) {
            return tc_tr_unsupported(T,
                                     "torch.arange() with non-number bounds");
        }
        any_float |= PyFloat_CheckExact(p[i]->obj);
    }
    if (!has_dtype) {
        *dt = any_float ? TC_F32 : TC_I64;
    }
    if (any_float && !tc_dtype_is_float(*dt)) {
        return tc_tr_unsupported(T, "torch.arange() with float bounds and an "
                                 "integer dtype");
    }
    double s = PyFloat_AsDouble(p[0]->obj), e = PyFloat_AsDouble(p[1]->obj);
    double st = PyFloat_AsDouble(p[2]->obj);
    if (st == 0 || !((st > 0 && e >= s) || (st < 0 && e <= s))
        || !isfinite(s) || !isfinite(e)) {
        return tc_tr_unsupported(T, "torch.arange() with an empty or invalid "
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
        return tc_tr_unsupported(T, "%s() with these options (requires_grad, "
                                 "layout, memory_format, dtype)", what);
    }
    const tc_node *ln = like ? tc_tr_tensor_node(T, like) : NULL;
    int dev = tc_tr_device_param(named_param(b, p, "device"),
                                 like ? tc_tr_node_device(T, like->node) : -1);
    if (dev == -2) {
        return tc_tr_unsupported(T, "%s() with a device other than None, "
                                 "'cpu' or 'cuda:N' (a bare 'cuda' means the "
                                 "current device, which tcjit does not guard)",
                                 what);
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
        value = tc_tr_operand_node(T, p[0], &rc);
        step = value < 0 ? -1 : tc_tr_operand_node(T, p[2], &rc);
        if (step < 0) {
            return rc;
        }
    }
    else {
        if (size != NULL) {
            l.ndim = int_list(T, size, l.sizes, TC_MAX_DIMS);
            if (l.ndim < 0) {
                return tc_tr_unsupported(T,
                                         "%s() with a size that is not ints",
                                         what);
            }
        }
        else {
            tc_layout_like(&ln->layout, &l);
        }
        if (fill != NULL && (fill->kind != TC_VAR_CONST
                             || !(PyLong_Check(fill->obj)
                                  || PyFloat_CheckExact(fill->obj)))) {
            return tc_tr_unsupported(T, "%s() with a fill value that is not a "
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
        value = tc_tr_operand_node(T, fill, &rc);
        if (value < 0) {
            return rc;
        }
    }
    if (size != NULL || ln == NULL) {
        tc_layout_contiguous(&l);
    }
    if ((rc = tc_tr_join_device(T, what, dev)) != OK) {
        return rc;
    }
    char err[256];
    int first = T->out->graph->nnodes;
    int node = step >= 0
        ? tc_graph_arange(T->out->graph, &l, dt, value, step, err, sizeof(err))
        : tc_graph_full(T->out->graph, &l, dt, value, err, sizeof(err));
    if (node >= 0) {
        tc_tr_place_since(T, first, dev);
    }
    return tc_tr_push_node(T, node, what, err);
}

int
tc_tr_call_binding(tracer *T, const tc_binding *b, tc_var **args, int nargs,
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
        return tc_tr_emit_op(T, b->def->op, b->nparams, p, TC_F32);
    case TC_CALL_WHERE_METHOD: {
        tc_var *args[3] = {p[1], p[0], p[2]};  /* self.where(cond, other) */
        return tc_tr_emit_op(T, "where", 3, args, TC_F32);
    }
    case TC_CALL_ADD_SUB:
        return call_add_sub(T, b, p);
    case TC_CALL_DIV:
        if (!(p[2]->kind == TC_VAR_CONST && p[2]->obj == Py_None)) {
            return tc_tr_unsupported(T, "div() with a rounding_mode");
        }
        return tc_tr_emit_op(T, "div", 2, p, TC_F32);
    case TC_CALL_CLAMP:
        return call_clamp(T, p);
    case TC_CALL_GELU: {
        int is_str = p[1]->kind == TC_VAR_CONST && PyUnicode_Check(p[1]->obj);
        if (is_str && PyUnicode_CompareWithASCIIString(p[1]->obj, "tanh") == 0) {
            return tc_tr_emit_op(T, "gelu_tanh", 1, p, TC_F32);
        }
        if (tc_tr_is_none(p[1]) || (is_str && PyUnicode_CompareWithASCIIString(
                                            p[1]->obj, "none") == 0)) {
            return tc_tr_emit_op(T, "gelu", 1, p, TC_F32);
        }
        return tc_tr_unsupported(T, "F.gelu with approximate other than "
                                 "'none' or 'tanh'");
    }
    case TC_CALL_CAST:
        return call_cast(T, p[0], p[1]->obj ? tc_dtype_from_torch(p[1]->obj)
                                            : -1);
    case TC_CALL_CAST_TO:
        return call_cast(T, p[0], dtype_by_name(b->def->op));
    case TC_CALL_NO_INPLACE: {
        tc_var *inplace = p[b->nparams - 1];
        int first = T->out->graph->nnodes, rc;
        if (!is_false(inplace) && !(inplace->kind == TC_VAR_CONST
                                    && inplace->obj == Py_True)) {
            return tc_tr_unsupported(T, "%s with inplace not a bool",
                                     b->def->path);
        }
        rc = tc_tr_emit_op(T, b->def->op, b->nparams - 1, p, TC_F32);
        /* inplace=True: the result written into the input (mutation.c) */
        return rc != OK || is_false(inplace)
            ? rc : tc_tr_inplace_result(T, p[0], p + 1, b->nparams - 2, first,
                                        b->def->path);
    }
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
            return tc_tr_unsupported(T, "Tensor.type_as() of a non-tensor");
        }
        return call_cast(T, p[0], tc_tr_tensor_node(T, p[1])->dtype);
    case TC_CALL_SIZE:
    case TC_CALL_DIM:
    case TC_CALL_NUMEL:
    case TC_CALL_STRIDE:
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
    return tc_tr_unsupported(T, "call kind");
}
