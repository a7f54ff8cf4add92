/* valueops.c - opcodes that read and build values.
 *
 * Attributes (tensor, module and object), operators folded or made graph
 * nodes, sequences, subscripts (tensor indexing and slicing), functions
 * made in the traced code, and f-strings.
 */
#include "tracer_internal.h"
#include <structmember.h>
#include "../graph/extern.h"

/* ---- attributes ------------------------------------------------------------ */

/* x.T (all dims reversed; torch deprecates it beyond 2-d but allows it)
 * and x.mT (the last two swapped). */
static int
tensor_transpose_attr(tracer *T, tc_var *self, PyObject *name, int method)
{
    const tc_layout *l = &tc_tr_tensor_node(T, self)->layout;
    int64_t dims[TC_MAX_DIMS];
    char err[256] = "";
    int node;
    if (PyUnicode_CompareWithASCIIString(name, "mT") == 0
        || PyUnicode_CompareWithASCIIString(name, "mH") == 0) {
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
    if (method
        && tc_tr_push(T, tc_var_new(&T->sh->arena, TC_VAR_NULL, -1)) < 0) {
        return ERROR;
    }
    return node == self->node ? tc_tr_push(T, self)
                              : tc_tr_push_node(T, node, "T", err);
}

/* A method load whose method is not traced (an untraceable tensor
 * method, list.append, obj.method): owner.name stays symbolic, so the
 * graph breaks once, at the call, not at the attribute load too. */
static int
push_method_var(tracer *T, tc_var *owner, PyObject *name, int method)
{
    tc_var *m = tc_var_seq(&T->sh->arena, TC_VAR_METHOD, 1, &owner);
    if (m == NULL) {
        return ERROR;
    }
    m->obj = Py_NewRef(name);
    return tc_tr_push_loaded_attr(T, m, method);
}

/* owner.name as a value (no call follows the load). */
int
tc_tr_push_method_var(tracer *T, tc_var *owner, PyObject *name)
{
    return push_method_var(T, owner, name, 0);
}

/* The index of field `name` of structseq type t (torch.return_types.sort's
 * "values" is 0), or -1: a structseq field is a member descriptor at its
 * item's offset. */
static int
structseq_field(PyObject *t, PyObject *name)
{
    PyObject *d = PyType_Check(t) ? _PyType_Lookup((PyTypeObject *)t, name)
                                  : NULL;
    if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)) {
        return -1;
    }
    Py_ssize_t off = ((PyMemberDescrObject *)d)->d_member->offset
                     - (Py_ssize_t)offsetof(PyTupleObject, ob_item);
    return off >= 0 ? (int)(off / (Py_ssize_t)sizeof(PyObject *)) : -1;
}

/* Tensor properties that are False for every tensor a graph holds. */
static int
is_plain_tensor_flag(PyObject *name)
{
    static const char *const flags[] = {"is_nested", "is_sparse",
                                        "is_sparse_csr", "is_quantized",
                                        "is_meta", "is_mkldnn", "is_xpu",
                                        "is_mps", "is_vulkan", "is_ipu",
                                        "is_mtia", "is_maia", NULL};
    for (int i = 0; flags[i]; i++) {
        if (PyUnicode_CompareWithASCIIString(name, flags[i]) == 0) {
            return 1;
        }
    }
    return 0;
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
        return tc_tr_push(T, d) ? ERROR : tc_tr_push(T, self);
    }
    if (descr != NULL && (method || Py_IS_TYPE(descr, &PyMethodDescr_Type)
                          || PyFunction_Check(descr))) {
        /* f = x.cumsum; f(0) (or a lambda's x.float(*args)): the call
         * binds it (pysem.c) */
        return push_method_var(T, self, name, method);
    }
    const tc_node *n = tc_tr_tensor_node(T, self);
    PyObject *r = NULL;
    if (PyUnicode_CompareWithASCIIString(name, "dtype") == 0) {
        r = Py_NewRef(tc_dtype_to_torch(n->dtype));
    }
    else if (PyUnicode_CompareWithASCIIString(name, "ndim") == 0) {
        r = PyLong_FromLong(n->layout.ndim);
    }
    else if (PyUnicode_CompareWithASCIIString(name, "shape") == 0) {
        r = tc_tr_size_object(&n->layout);
    }
    else if (PyUnicode_CompareWithASCIIString(name, "device") == 0) {
        /* the graph's (guarded) CUDA device, or the CPU for its host
         * part (graph.h TC_PLACE_HOST) */
        int dev = tc_tr_node_device(T, self->node);
        r = dev < 0
            ? PyObject_CallMethod(tc_torch_module, "device", "s", "cpu")
            : PyObject_CallMethod(tc_torch_module, "device", "si", "cuda",
                                  dev);
    }
    else if (PyUnicode_CompareWithASCIIString(name, "is_cuda") == 0) {
        r = PyBool_FromLong(tc_tr_node_device(T, self->node) >= 0);
    }
    else if (PyUnicode_CompareWithASCIIString(name, "is_cpu") == 0) {
        r = PyBool_FromLong(tc_tr_node_device(T, self->node) < 0);
    }
    else if (is_plain_tensor_flag(name)) {
        /* a graph's tensors are plain dense CPU/CUDA ones (inputs of other
         * kinds are refused by their guards): MultiheadAttention asks */
        r = Py_NewRef(Py_False);
    }
    else if (PyUnicode_CompareWithASCIIString(name, "T") == 0
             || PyUnicode_CompareWithASCIIString(name, "mT") == 0
             || PyUnicode_CompareWithASCIIString(name, "mH") == 0
             || (PyUnicode_CompareWithASCIIString(name, "H") == 0
                 && n->layout.ndim == 2)) {
        /* (H, mH: a graph's tensors are real, conjugation changes
         * nothing; eager raises for H of other than 2 dims) */
        return tensor_transpose_attr(T, self, name, method);
    }
    else if (PyUnicode_CompareWithASCIIString(name, "layout") == 0) {
        r = PyObject_GetAttrString(tc_torch_module, "strided");  /* dense */
    }
    else if (PyUnicode_CompareWithASCIIString(name, "grad") == 0
             && self->source >= 0 && self->obj != NULL) {
        /* p.grad of a tensor read from the frame (an optimizer's step): a
         * source of its own (a graph input, or None, guarded as such);
         * in-place writes to p leave its .grad object as it is */
        return tc_tr_push_attr(T, self->source, name,
                               PyObject_GetAttr(self->obj, name), method,
                               "Tensor.grad");
    }
    else {
        return tc_tr_unsupported(T, "Tensor.%U", name);
    }
    if (r == NULL) {
        return ERROR;
    }
    if (method
        && tc_tr_push(T, tc_var_new(&T->sh->arena, TC_VAR_NULL, -1)) < 0) {
        Py_DECREF(r);
        return ERROR;
    }
    tc_var *v = tc_var_const(&T->sh->arena, r, -1);
    Py_DECREF(r);
    return tc_tr_push(T, v);
}

/* Attribute of a module: torch's own modules are trusted (like Dynamo, we
 * do not guard torch.sin), and so are torch.ops.aten's op packets; other
 * modules' attributes are guarded values. */
static int
module_attr(tracer *T, tc_var *mod, PyObject *name, int method)
{
    PyObject *value = PyObject_GetAttr(mod->obj, name);
    if (value == NULL) {
        return tc_tr_unsupported_from_exception(T, "module attribute");
    }
    int rc = OK;
    tc_var *v;
    if (tc_is_trusted_module(mod->obj) || mod->source < 0) {
        /* (an owner without a source was itself read from a trusted
         * module: torch.ops.aten.cumsum) */
        v = tc_tr_const_var(T, value);
        if (v && (v->kind == TC_VAR_CONST || v->kind == TC_VAR_UNKNOWN)
            && !tc_tr_is_python_scalar(value)) {
            /* (torch.Tensor, torch.Size: fixed objects, `is` knows them) */
            v->kind = TC_VAR_OBJECT;
        }
        if (v == NULL) {
            rc = ERROR;
        }
    }
    else {
        v = tc_tr_attr_var(T, mod->source, name, value, &rc);
    }
    Py_DECREF(value);
    return v == NULL ? rc : tc_tr_push_loaded_attr(T, v, method);
}

/* Objects whose attributes never change: read them at trace time. */
static int
is_immutable_value(PyObject *o)
{
    static const char *const types[] = {"torch.device", "torch.finfo",
                                        "torch.iinfo", "Signature",
                                        "Parameter", NULL};
    const char *name = Py_TYPE(o)->tp_name;
    PyObject *mod = NULL;
    for (int i = 0; types[i]; i++) {
        if (strcmp(types[i], name) != 0) {
            continue;
        }
        if (strchr(name, '.') != NULL) {
            return 1;   /* a C type of torch */
        }
        /* inspect's own classes, not a namesake */
        mod = PyObject_GetAttrString((PyObject *)Py_TYPE(o), "__module__");
        int ok = mod != NULL && PyUnicode_Check(mod)
                 && PyUnicode_CompareWithASCIIString(mod, "inspect") == 0;
        Py_XDECREF(mod);
        PyErr_Clear();
        return ok;
    }
    return 0;
}

/* Cls.MEMBER of an enum class whose identity is guarded: the member, a
 * constant (an enum's members cannot be rebound; == and `is` of members
 * then fold). */
static int
enum_member(tracer *T, tc_var *owner, PyObject *name, int method)
{
    static PyObject *enum_meta;
    if (tc_tr_lazy_attr(&enum_meta, "enum", "EnumMeta") == NULL) {
        return NOT_HANDLED;
    }
    PyObject *cls = owner->obj;
    if (method || cls == NULL || !PyType_Check(cls)
        || !PyObject_TypeCheck(cls, (PyTypeObject *)enum_meta)) {
        return NOT_HANDLED;
    }
    PyObject *members = PyObject_GetAttrString(cls, "__members__");
    PyObject *m = members ? PyObject_GetItem(members, name) : NULL;
    Py_XDECREF(members);
    if (m == NULL) {
        PyErr_Clear();
        return NOT_HANDLED;
    }
    if (owner->source >= 0
        && tc_guard_id(T->out->guards, owner->source, cls) < 0) {
        Py_DECREF(m);
        return ERROR;
    }
    return tc_tr_push_folded(T, m, "enum member");
}

/* Whether o is a typing annotation object: int | None, list[int],
 * typing.Optional[int] (immutable). */
static int
is_type_alias(PyObject *o)
{
    static PyObject *union_type, *generic_alias, *typing_alias;
    PyObject *kinds[3] = {
        tc_tr_lazy_attr(&union_type, "types", "UnionType"),
        tc_tr_lazy_attr(&generic_alias, "types", "GenericAlias"),
        tc_tr_lazy_attr(&typing_alias, "typing", "_BaseGenericAlias"),
    };
    for (int i = 0; o != NULL && i < 3; i++) {
        if (kinds[i] != NULL && PyType_Check(kinds[i])
            && PyObject_TypeCheck(o, (PyTypeObject *)kinds[i])) {
            return 1;
        }
    }
    return 0;
}

int
tc_tr_op_load_attr(tracer *T, PyObject *name, int method)
{
    tc_var *owner = tc_tr_pop(T);
    if (owner == NULL) {
        return tc_tr_unsupported(T, "malformed attribute load");
    }
    if (owner->kind == TC_VAR_TENSOR) {
        return tensor_attr(T, owner, name, method);
    }
    if (owner->kind == TC_VAR_NN_MODULE) {
        return tc_tr_nn_module_attr(T, owner, name, method);
    }
    if (tc_tr_is_new_object(owner) || tc_tr_is_super(owner)) {
        return tc_tr_new_object_attr(T, owner, name, method);
    }
    int field = !method && tc_tr_structseq_items(owner) != NULL
                ? structseq_field(owner->obj, name) : -1;
    if (field >= 0 && field < tc_tr_structseq_items(owner)->nitems) {
        /* r.values, r.indices, r.eigenvalues: the item of that field */
        return tc_tr_push(T, tc_tr_structseq_items(owner)->items[field]);
    }
    if (!method && owner->kind == TC_VAR_CONST
        && (tc_dtype_from_torch(owner->obj) >= 0
            || is_immutable_value(owner->obj))) {
        /* x.device.type, x.dtype.is_floating_point, torch.finfo(dt).min,
         * inspect.signature(f).parameters: immutable values */
        return tc_tr_push_folded(T, PyObject_GetAttr(owner->obj, name),
                                 "attribute");
    }
    if (owner->kind == TC_VAR_OBJECT && PyModule_Check(owner->obj)
        && owner->source >= 0) {
        return module_attr(T, owner, name, method);
    }
    if ((owner->kind == TC_VAR_OBJECT && tc_is_trusted_module(owner->obj))
        || ((owner->kind == TC_VAR_OBJECT || owner->kind == TC_VAR_UNKNOWN)
            && owner->source < 0 && owner->obj != NULL
            && !strcmp(Py_TYPE(owner->obj)->tp_name, "OpOverloadPacket"))) {
        /* (torch.ops.aten.cumsum.default: an overload of a packet read
         * from torch.ops.aten) */
        return module_attr(T, owner, name, method);
    }
    int rc = enum_member(T, owner, name, method);
    if (rc != NOT_HANDLED) {
        return rc;
    }
    if (!method && is_type_alias(owner->obj)) {
        /* (int | None).__args__, list[int].__origin__: the parts of an
         * immutable annotation (a dataclass field's type that a strict
         * dataclass validates against), pinned by identity */
        if (owner->source >= 0
            && tc_guard_id(T->out->guards, owner->source, owner->obj) < 0) {
            return ERROR;
        }
        return tc_tr_push_folded(T, PyObject_GetAttr(owner->obj, name),
                                 "attribute");
    }
    rc = tc_tr_object_attr(T, owner, name, method);
    if (rc != NOT_HANDLED) {
        return rc;
    }
    if (method && owner->kind != TC_VAR_NULL) {
        /* list.append(...), obj.method(...) */
        return push_method_var(T, owner, name, 1);
    }
    return tc_tr_unsupported(T, "attribute '%U' of a %s", name,
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

int
tc_tr_push_folded(tracer *T, PyObject *r, const char *what)
{
    if (r == NULL) {
        return tc_tr_unsupported_from_exception(T, what);
    }
    tc_var *v = tc_var_const(&T->sh->arena, r, -1);
    Py_DECREF(r);
    return tc_tr_push(T, v);
}

static int seq_items(tracer *T, tc_var *v, tc_var **items, int cap);

/* a + b and a * n of tuples and lists the tracer knows item by item: a
 * new one of a's kind (tuples of tensors, shapes with symbolic items). */
static int
sequence_op(tracer *T, int nb, tc_var *a, tc_var *b)
{
    tc_var *items[128];
    int op = nb % NB_INPLACE_ADD;
    int seq_a = a->kind == TC_VAR_TUPLE || a->kind == TC_VAR_LIST;
    if (!seq_a || (op != NB_ADD && op != NB_MULTIPLY)
        || (nb >= NB_INPLACE_ADD && a->kind == TC_VAR_LIST)) {
        /* (list += mutates the list in place) */
        return NOT_HANDLED;
    }
    int n = seq_items(T, a, items, 128), m;
    if (n < 0) {
        return n == ERROR ? ERROR : NOT_HANDLED;
    }
    if (op == NB_ADD) {
        tc_var_kind kb = b->kind == TC_VAR_CONST
            ? (PyTuple_Check(b->obj) ? TC_VAR_TUPLE
               : PyList_Check(b->obj) ? TC_VAR_LIST : TC_VAR_NULL)
            : b->kind;
        if (kb != a->kind) {
            return NOT_HANDLED;   /* tuple + list raises */
        }
        m = seq_items(T, b, items + n, 128 - n);
        if (m < 0) {
            return m == ERROR ? ERROR : NOT_HANDLED;
        }
        n += m;
    }
    else {
        if (b->kind != TC_VAR_CONST || !PyLong_CheckExact(b->obj)) {
            return NOT_HANDLED;
        }
        long k = PyLong_AsLong(b->obj);
        k = k < 0 ? 0 : k;
        if (n * k > 128) {
            return tc_tr_unsupported(T, "a sequence of more than 128 items");
        }
        for (long r = 1; r < k; r++) {
            memcpy(items + r * n, items, n * sizeof(tc_var *));
        }
        n = (int)(n * k);
    }
    tc_var *v = tc_var_seq(&T->sh->arena, a->kind, n, items);
    if (v != NULL && a->kind == TC_VAR_LIST) {
        v->index = T->serial;
    }
    return tc_tr_push(T, v);
}

/* Operators on tensors that Tensor defines as torch functions: a // b is
 * torch.floor_divide(a, b) (reflected too), a % b torch.remainder, a << b
 * Tensor.__lshift__ (float tensors too: x * 2**y), b << a
 * torch.bitwise_left_shift(b, a); the call takes the registry entry or a
 * generic extern.  (Matrix multiplication has its own node.) */
static int
torch_function_operator(tracer *T, int nb, tc_var *a, tc_var *b)
{
    /* by nb: the forward form (a is a tensor), the reflected one */
    static const struct {
        int nb;
        const char *fwd, *rev;   /* attributes of torch */
    } ops[] = {
        {NB_FLOOR_DIVIDE, "floor_divide", "floor_divide"},
        {NB_REMAINDER, "remainder", "remainder"},
        {NB_LSHIFT, "Tensor.__lshift__", "bitwise_left_shift"},
        {NB_RSHIFT, "Tensor.__rshift__", "bitwise_right_shift"},
        {NB_MATRIX_MULTIPLY, "matmul", "matmul"},
    };
    static PyObject *fns[2 * sizeof(ops) / sizeof(ops[0])];
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        if (ops[i].nb != nb) {
            continue;
        }
        int fwd = a->kind == TC_VAR_TENSOR;
        PyObject *fn = tc_tr_lazy_attr(&fns[2 * i + !fwd], "torch",
                                       fwd ? ops[i].fwd : ops[i].rev);
        tc_var *args[2] = {a, b};
        return fn ? tc_tr_call_object(T, fn, args, 2)
                  : tc_tr_unsupported(T, "torch.%s not found",
                                      fwd ? ops[i].fwd : ops[i].rev);
    }
    return tc_tr_unsupported(T, "tensor operator #%d", nb);
}

int
tc_tr_op_binary(tracer *T, int nb)
{
    tc_var *b = tc_tr_pop(T), *a = tc_tr_pop(T);
    if (a == NULL || b == NULL) {
        return tc_tr_unsupported(T, "malformed binary op");
    }
    int rc;
    if ((rc = tc_tr_reify(T, a)) != OK || (rc = tc_tr_reify(T, b)) != OK) {
        return rc;
    }
    if (a->kind == TC_VAR_CONST && b->kind == TC_VAR_CONST) {
        /* the out-of-place form: a folded x += y must not mutate x */
        PyObject *r = tc_binary_op(nb % NB_INPLACE_ADD, a->obj, b->obj);
        return tc_tr_push_folded(T, r, "operator");
    }
    if (a->kind != TC_VAR_TENSOR && b->kind != TC_VAR_TENSOR) {
        /* x.size()[:-1] + (self.nf,): constants once their items are
         * (not lists or sets: a constant one would be one object for
         * every call) */
        PyObject *x = a->kind == TC_VAR_LIST || b->kind == TC_VAR_LIST
                      || tc_tr_is_set_var(a) || tc_tr_is_set_var(b)
                      ? NULL : tc_tr_const_value(T, a);
        PyObject *y = x ? tc_tr_const_value(T, b) : NULL;
        if (y != NULL) {
            PyObject *r = tc_binary_op(nb % NB_INPLACE_ADD, x, y);
            Py_DECREF(x);
            Py_DECREF(y);
            return tc_tr_push_folded(T, r, "operator");
        }
        Py_XDECREF(x);
        if (PyErr_Occurred()) {
            return ERROR;
        }
        rc = sequence_op(T, nb, a, b);
        if (rc == NOT_HANDLED) {
            rc = tc_tr_set_binary(T, nb, a, b);
        }
        if (rc != NOT_HANDLED) {
            return rc;
        }
        return tc_tr_unsupported(T, "operator on %s and %s",
                                 tc_var_kind_name(a), tc_var_kind_name(b));
    }
    if (nb >= NB_INPLACE_ADD) {
        return tc_tr_inplace_binary(T, nb, a, b);
    }
    if (nb == NB_MATRIX_MULTIPLY && a->kind == TC_VAR_TENSOR
        && b->kind == TC_VAR_TENSOR) {
        int in[2] = {a->node, b->node};
        return tc_tr_push_extern(T, "matmul", 2, in, NULL, 0);
    }
    const char *op = binary_op_name(nb);
    if (op == NULL) {
        return torch_function_operator(T, nb, a, b);
    }
    if (nb == NB_TRUE_DIVIDE && a->kind != TC_VAR_TENSOR) {
        /* number / tensor is Tensor.__rtruediv__: reciprocal() * number,
         * whose rounding and layout (a unary op first) eager's result has */
        if ((rc = tc_tr_emit_op(T, "reciprocal", 1, &b, TC_F32)) != OK) {
            return rc;
        }
        tc_var *r[2] = {tc_tr_pop(T), a};
        return tc_tr_emit_op(T, "mul", 2, r, TC_F32);
    }
    tc_var *args[2] = {a, b};
    return tc_tr_emit_op(T, op, 2, args, TC_F32);
}

/* The Python value of a constant, or of a tuple or list of them (items
 * reified): a new reference, or NULL (no exception) if some part is not
 * a constant, NULL with an exception on error. */
PyObject *
tc_tr_const_value(tracer *T, tc_var *v)
{
    if (tc_tr_reify(T, v) != OK) {
        PyErr_Clear();
        return NULL;
    }
    const char *tn = v->obj != NULL ? Py_TYPE(v->obj)->tp_name : "";
    if (v->kind == TC_VAR_CONST
        || (v->source < 0 && (!strcmp(tn, "torch.layout")
                              || !strcmp(tn, "torch.memory_format")
                              || !strcmp(tn, "torch.dtype")))) {
        /* (torch.strided, torch.float16 read from torch: one of torch's
         * singletons) */
        return Py_NewRef(v->obj);
    }
    if (tc_tr_is_set_var(v)) {
        return tc_tr_set_value(T, v);
    }
    if (v->kind != TC_VAR_TUPLE && v->kind != TC_VAR_LIST) {
        return NULL;
    }
    PyObject *r = v->kind == TC_VAR_TUPLE ? PyTuple_New(v->nitems)
                                          : PyList_New(v->nitems);
    for (int i = 0; r != NULL && i < v->nitems; i++) {
        PyObject *item = tc_tr_const_value(T, v->items[i]);
        if (item == NULL) {
            Py_CLEAR(r);
            break;
        }
        if (v->kind == TC_VAR_TUPLE) {
            PyTuple_SET_ITEM(r, i, item);
        }
        else {
            PyList_SET_ITEM(r, i, item);
        }
    }
    return r;
}

/* The items of a tuple or list var, or of a constant tuple, list or
 * torch.Size (as constants), into items[0..cap): their count, or
 * UNSUPPORTED (not such a sequence, or too long), or ERROR. */
static int
seq_items(tracer *T, tc_var *v, tc_var **items, int cap)
{
    if (v->kind == TC_VAR_TUPLE || v->kind == TC_VAR_LIST) {
        if (v->nitems > cap) {
            return UNSUPPORTED;
        }
        memcpy(items, v->items, v->nitems * sizeof(tc_var *));
        return v->nitems;
    }
    if (v->kind != TC_VAR_CONST
        || !(PyTuple_Check(v->obj) || PyList_CheckExact(v->obj))) {
        return UNSUPPORTED;
    }
    PyObject *seq = PySequence_Fast(v->obj, "");
    if (seq == NULL) {
        return ERROR;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int rc = n > cap ? UNSUPPORTED : (int)n;
    for (Py_ssize_t i = 0; rc >= 0 && i < n; i++) {
        items[i] = tc_tr_const_var(T, PySequence_Fast_GET_ITEM(seq, i));
        if (items[i] == NULL) {
            rc = ERROR;
        }
    }
    Py_DECREF(seq);
    return rc;
}

int
tc_tr_op_compare(tracer *T, int cmp)
{
    static const char *const names[] = {"lt", "le", "eq", "ne", "gt", "ge"};
    tc_var *b = tc_tr_pop(T), *a = tc_tr_pop(T);
    if (a == NULL || b == NULL || cmp < 0 || cmp > 5) {
        return tc_tr_unsupported(T, "malformed comparison");
    }
    int rc;
    if ((rc = tc_tr_reify(T, a)) != OK || (rc = tc_tr_reify(T, b)) != OK) {
        return rc;
    }
    /* constants, and objects guarded by identity (x.dtype != torch.int64) */
    if ((a->kind == TC_VAR_CONST || a->kind == TC_VAR_OBJECT)
        && (b->kind == TC_VAR_CONST || b->kind == TC_VAR_OBJECT)) {
        return tc_tr_push_folded(T, PyObject_RichCompare(a->obj, b->obj, cmp),
                                 "comparison");
    }
    if (a->kind != TC_VAR_TENSOR && b->kind != TC_VAR_TENSOR) {
        /* tuples and lists of constants (size == (2, 3), dims != []) */
        PyObject *x = tc_tr_const_value(T, a);
        PyObject *y = x ? tc_tr_const_value(T, b) : NULL;
        if (y != NULL) {
            PyObject *r = PyObject_RichCompare(x, y, cmp);
            Py_DECREF(x);
            Py_DECREF(y);
            return tc_tr_push_folded(T, r, "comparison");
        }
        Py_XDECREF(x);
        if (PyErr_Occurred()) {
            return ERROR;
        }
        rc = cmp == Py_EQ || cmp == Py_NE ? tc_tr_identity_equal(T, a, b)
                                          : NOT_HANDLED;
        if (rc == 0 || rc == 1) {
            return tc_tr_push(T, tc_tr_const_var(
                T, (rc == (cmp == Py_EQ)) ? Py_True : Py_False));
        }
        if (rc != NOT_HANDLED) {
            return rc;
        }
        return tc_tr_unsupported(T, "comparison of %s and %s",
                                 tc_var_kind_name(a), tc_var_kind_name(b));
    }
    tc_var *args[2] = {a, b};
    return tc_tr_emit_op(T, names[cmp], 2, args, TC_F32);
}

int
tc_tr_op_unary(tracer *T, int opcode)
{
    tc_var *a = tc_tr_pop(T);
    if (a == NULL) {
        return tc_tr_unsupported(T, "malformed unary op");
    }
    int rc = tc_tr_reify(T, a);
    if (rc != OK) {
        return rc;
    }
    if (a->kind == TC_VAR_CONST) {
        PyObject *r = opcode == UNARY_NEGATIVE ? PyNumber_Negative(a->obj)
                    : opcode == UNARY_INVERT ? PyNumber_Invert(a->obj)
                    : PyBool_FromLong(!PyObject_IsTrue(a->obj));
        return tc_tr_push_folded(T, r, "unary operator");
    }
    if (a->kind != TC_VAR_TENSOR) {
        return tc_tr_unsupported(T, "unary operator on %s",
                                 tc_var_kind_name(a));
    }
    if (opcode == UNARY_NOT) {
        return tc_tr_unsupported(T, "'not' on a tensor (data-dependent)");
    }
    return tc_tr_emit_op(T, opcode == UNARY_NEGATIVE ? "neg" : "bitwise_not",
                         1, &a, TC_F32);
}

/* ---- sequences --------------------------------------------------------------- */

int
tc_tr_op_build(tracer *T, tc_var_kind kind, int n)
{
    if (T->sp < n) {
        return tc_tr_unsupported(T, "malformed build");
    }
    T->sp -= n;
    tc_var *v = tc_var_seq(&T->sh->arena, kind, n, &T->stack[T->sp]);
    if (v != NULL && kind == TC_VAR_LIST) {
        v->index = T->serial;  /* who may mutate it (pysem.c) */
    }
    return tc_tr_push(T, v);
}

static int
unpack_const(tracer *T, PyObject *obj, int n)
{
    PyObject *seq = PySequence_Tuple(obj);
    if (seq == NULL) {
        return tc_tr_unsupported_from_exception(T, "unpacking");
    }
    int rc = PyTuple_GET_SIZE(seq) == n
        ? OK : tc_tr_unsupported(T, "unpacking %zd values into %d names",
                                 PyTuple_GET_SIZE(seq), n);
    for (int i = n - 1; rc == OK && i >= 0; i--) {
        rc = tc_tr_push(T, tc_var_const(&T->sh->arena, PyTuple_GET_ITEM(seq, i), -1));
    }
    Py_DECREF(seq);
    return rc;
}

int
tc_tr_op_unpack(tracer *T, int n)
{
    tc_var *seq = tc_tr_pop(T);
    int rc = tc_tr_reify(T, seq);
    if (rc != OK) {
        return rc;
    }
    if (tc_tr_structseq_items(seq) != NULL) {
        seq = tc_tr_structseq_items(seq);   /* values, indices = x.max(1) */
    }
    if (seq != NULL && seq->kind == TC_VAR_CONST && PyTuple_Check(seq->obj)) {
        return unpack_const(T, seq->obj, n);
    }
    if (seq != NULL && seq->kind != TC_VAR_TUPLE && seq->kind != TC_VAR_LIST
        && seq->kind != TC_VAR_TENSOR) {
        /* an iterator (a generator expression run to its end), a set, a
         * dict: unpacked as tuple(seq) is made, which consumes an
         * iterator as unpacking does */
        rc = tc_tr_call_object(T, (PyObject *)&PyTuple_Type, &seq, 1);
        tc_var *t = rc == OK ? tc_tr_pop(T) : NULL;
        if (t != NULL && t->kind == TC_VAR_TUPLE) {
            seq = t;
        }
        else if (rc == ERROR) {
            return rc;
        }
    }
    if (seq == NULL || (seq->kind != TC_VAR_TUPLE && seq->kind != TC_VAR_LIST)) {
        return tc_tr_unsupported(T, "unpacking a %s",
                                 seq ? tc_var_kind_name(seq) : "?");
    }
    if (seq->nitems != n) {
        return tc_tr_unsupported(T, "unpacking %d values into %d names",
                                 seq->nitems, n);
    }
    for (int i = n - 1; i >= 0; i--) {
        if (tc_tr_push(T, seq->items[i]) < 0) {
            return ERROR;
        }
    }
    return OK;
}

/* UNPACK_EX: `a, *rest, z = seq` of a sequence known item by item;
 * oparg's low byte counts the names before the star, its high byte those
 * after it.  The starred name gets a new list. */
int
tc_tr_op_unpack_ex(tracer *T, int oparg)
{
    enum { MAX_ITEMS = 256 };
    int before = oparg & 0xff, after = oparg >> 8;
    tc_var *seq = tc_tr_pop(T), *items[MAX_ITEMS];
    int rc = seq == NULL ? UNSUPPORTED : tc_tr_reify(T, seq);
    if (rc != OK) {
        return seq == NULL ? tc_tr_unsupported(T, "malformed stack") : rc;
    }
    int n = seq_items(T, seq, items, MAX_ITEMS);
    if (n == ERROR) {
        return ERROR;
    }
    if (n < 0) {
        return tc_tr_unsupported(T, "starred unpacking of a %s",
                                 tc_var_kind_name(seq));
    }
    if (n < before + after) {
        /* eager raises ValueError: not enough values to unpack */
        return tc_tr_unsupported(T, "unpacking %d values into %d names", n,
                                 before + after);
    }
    tc_var *mid = tc_var_seq(&T->sh->arena, TC_VAR_LIST, n - before - after,
                             items + before);
    if (mid == NULL) {
        return ERROR;
    }
    for (int i = n - 1; i >= n - after; i--) {
        if (tc_tr_push(T, items[i]) < 0) {
            return ERROR;
        }
    }
    if (tc_tr_push(T, mid) < 0) {
        return ERROR;
    }
    for (int i = before - 1; i >= 0; i--) {
        if (tc_tr_push(T, items[i]) < 0) {
            return ERROR;
        }
    }
    return OK;
}

int
tc_tr_op_list_extend(tracer *T, int oparg)
{
    tc_var *src = tc_tr_pop(T);
    if (src == NULL || oparg < 1 || T->sp < oparg) {
        return tc_tr_unsupported(T, "malformed stack");
    }
    tc_var *list = T->stack[T->sp - oparg];
    int rc = tc_tr_reify(T, src);
    if (rc != OK) {
        return rc;
    }
    tc_var *items[TC_MAX_ITEMS];
    int n = list->kind == TC_VAR_LIST && list->nitems <= TC_MAX_ITEMS
            ? seq_items(T, src, items + list->nitems,
                        TC_MAX_ITEMS - list->nitems)
            : UNSUPPORTED;
    if (n == ERROR) {
        return ERROR;
    }
    if (n < 0) {
        /* (*x.shape[:-1], -1): a torch.Size is a constant tuple */
        return tc_tr_unsupported(T, "list.extend of a %s",
                                 tc_var_kind_name(src));
    }
    memcpy(items, list->items, list->nitems * sizeof(tc_var *));
    /* a list under construction on the stack is no one else's (a list
     * comprehension's, a [*a, b] literal's): a new value replaces it */
    tc_var *v = tc_var_seq(&T->sh->arena, TC_VAR_LIST, list->nitems + n,
                           items);
    if (v == NULL) {
        return ERROR;
    }
    v->index = list->index;
    T->stack[T->sp - oparg] = v;
    return OK;
}

/* LIST_APPEND (list comprehensions): a one-item list, extended into the
 * list oparg deep. */
int
tc_tr_op_list_append(tracer *T, int oparg)
{
    int rc = tc_tr_op_build(T, TC_VAR_LIST, 1);
    return rc != OK ? rc : tc_tr_op_list_extend(T, oparg);
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

/* x[items]: ints, slices, None and one Ellipsis are basic indexing, a
 * chain of views; int64 / int32 index tensors among them are advanced
 * indexing, done in torch's order: the other items first, as views, then
 * one aten::index over the dims the tensors index (extern "index"; the
 * shape rule is in extern.c).  A bool or uint8 tensor is a mask: the
 * result's size depends on the data, so that stays a graph break. */
/* Whether index item v is a list of ints (not bools: a mask), which
 * torch indexes with as with torch.tensor(v). */
static int
is_int_list(const tc_var *v)
{
    if (v->kind != TC_VAR_LIST || v->nitems == 0) {
        return 0;
    }
    for (int i = 0; i < v->nitems; i++) {
        tc_var *x = v->items[i];
        if ((x->kind != TC_VAR_CONST && x->kind != TC_VAR_LAZY)
            || !PyLong_CheckExact(x->obj)) {
            return 0;
        }
    }
    return 1;
}

/* The index tensor torch makes of an int list item (Falcon's
 * fused_qkv[..., [-2], :]): torch.tensor(v), or NULL (*rc). */
static tc_var *
list_index_tensor(tracer *T, tc_var *v, int *rc)
{
    static PyObject *tensor_fn;
    PyObject *fn = tc_tr_lazy_attr(&tensor_fn, "torch", "tensor");
    *rc = fn ? tc_tr_reify_all(T, v->items, v->nitems) : ERROR;
    *rc = *rc == OK ? tc_tr_call_object(T, fn, &v, 1) : *rc;
    tc_var *t = *rc == OK ? tc_tr_pop(T) : NULL;
    if (*rc == OK && (t == NULL || t->kind != TC_VAR_TENSOR)) {
        *rc = tc_tr_unsupported(T, "indexing a tensor with a list");
        return NULL;
    }
    return t;
}

static int
index_tensor(tracer *T, tc_var *x, tc_var **given, int n)
{
    int in[TC_MAX_OP_INPUTS], nin = 1, consumed = 0;
    tc_var *items[64];
    if (n > 64) {
        return tc_tr_unsupported(T, "an index of more than 64 items");
    }
    memcpy(items, given, n * sizeof(tc_var *));
    for (int i = 0; i < n; i++) {
        tc_var *it = items[i];
        int rc = tc_tr_reify(T, it);
        if (rc != OK) {
            return rc;
        }
        if (is_int_list(it)
            && (it = items[i] = list_index_tensor(T, it, &rc)) == NULL) {
            return rc;
        }
        if (it->kind == TC_VAR_TENSOR) {
            tc_dtype dt = tc_tr_tensor_node(T, it)->dtype;
            if (dt == TC_BOOL || dt == TC_U8) {
                return tc_tr_unsupported(T, "indexing with a boolean mask "
                                         "(the result's size depends on "
                                         "the data)");
            }
            if (dt != TC_I64 && dt != TC_I32) {
                return tc_tr_unsupported(T, "indexing with a %s tensor",
                                         tc_dtype_name(dt));
            }
            consumed++;
            continue;
        }
        PyObject *o = it->kind == TC_VAR_CONST ? it->obj : NULL;
        if (o == NULL || !(o == Py_None || o == Py_Ellipsis
                           || PyLong_CheckExact(o) || PySlice_Check(o))) {
            return tc_tr_unsupported(T, "indexing a tensor with a %s",
                                     o ? Py_TYPE(o)->tp_name
                                       : tc_var_kind_name(it));
        }
        consumed += PyLong_CheckExact(o) || PySlice_Check(o);
    }
    int node = x->node, d = 0, ndim = tc_tr_tensor_node(T, x)->layout.ndim;
    int64_t xa[TC_MAX_XATTR] = {0};
    char err[256] = "";
    for (int i = 0; i < n && node >= 0; i++) {
        tc_var *it = items[i];
        if (it->kind == TC_VAR_TENSOR) {
            if (nin == TC_MAX_OP_INPUTS) {
                return tc_tr_unsupported(T, "indexing with more than %d "
                                         "index tensors",
                                         TC_MAX_OP_INPUTS - 1);
            }
            xa[TC_XA_INDEX_DIMS] |= (int64_t)1 << d++;
            in[nin++] = it->node;
        }
        else if (it->obj == Py_Ellipsis) {
            d += ndim - consumed;
        }
        else {
            node = index_item(T, node, it->obj, &d, err, sizeof(err));
        }
    }
    if (node == x->node && nin == 1) {
        /* x[...], x[:]: eager's result is a view, another object (an
         * advanced index after them makes a new tensor anyway) */
        node = tc_graph_alias(T->out->graph, node, err, sizeof(err));
    }
    if (node < 0 || nin == 1) {
        return tc_tr_push_node(T, node, "indexing", err);
    }
    in[0] = node;
    return tc_tr_push_extern(T, "index", nin, in, xa, 0);
}

/* x[c] with c a known constant: one index item, or a tuple of them. */
static int
index_tensor_const(tracer *T, tc_var *x, PyObject *c)
{
    tc_var *items[64];
    int n = PyTuple_Check(c) ? (int)PyTuple_GET_SIZE(c) : 1;
    if (n > 64) {
        return tc_tr_unsupported(T, "an index of more than 64 items");
    }
    for (int i = 0; i < n; i++) {
        items[i] = tc_tr_const_var(T, PyTuple_Check(c) ? PyTuple_GET_ITEM(c, i)
                                                       : c);
        if (items[i] == NULL) {
            return ERROR;
        }
    }
    return index_tensor(T, x, items, n);
}

/* xs[a:b:c] of a tuple or list var: a new one of the same kind. */
static int
slice_sequence(tracer *T, tc_var *seq, PyObject *slice)
{
    Py_ssize_t start, stop, step, n;
    tc_var *items[TC_MAX_ITEMS];
    if (PySlice_Unpack(slice, &start, &stop, &step) < 0) {
        return ERROR;
    }
    n = PySlice_AdjustIndices(seq->nitems, &start, &stop, step);
    if (n > TC_MAX_ITEMS) {
        return tc_tr_unsupported(T, "a slice of more than %d items",
                                 TC_MAX_ITEMS);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        items[i] = seq->items[start + i * step];
    }
    return tc_tr_push(T, tc_var_seq(&T->sh->arena, seq->kind, (int)n, items));
}

static int
subscript(tracer *T, tc_var *seq, tc_var *idx)
{
    int rc;
    if ((rc = tc_tr_reify(T, seq)) != OK || (rc = tc_tr_reify(T, idx)) != OK) {
        return rc;
    }
    if (tc_tr_structseq_items(seq) != NULL) {
        seq = tc_tr_structseq_items(seq);   /* x.max(1)[0] */
    }
    if ((rc = tc_tr_tensor_key_lookup(T, seq, idx)) != NOT_HANDLED
        || (rc = tc_tr_frame_dict_item(T, seq, idx, NULL)) != NOT_HANDLED) {
        return rc;
    }
    if ((rc = tc_tr_as_dict(T, seq)) == OK) {
        return tc_tr_dict_lookup(T, seq, idx, NULL);
    }
    if (rc != NOT_HANDLED) {
        return rc;
    }
    if (seq->kind == TC_VAR_CONST && idx->kind == TC_VAR_CONST) {
        return tc_tr_push_folded(T, PyObject_GetItem(seq->obj, idx->obj),
                                 "subscript");
    }
    if (seq->obj != NULL && PyType_Check(seq->obj) && idx->obj != NULL
        && !(((PyTypeObject *)seq->obj)->tp_flags & Py_TPFLAGS_HEAPTYPE)
        && seq->kind != TC_VAR_TENSOR && idx->kind != TC_VAR_TENSOR
        && (PyType_Check(idx->obj) || idx->kind == TC_VAR_CONST)) {
        /* list[Tensor] in a cast() or an annotation: a builtin type's
         * __class_getitem__ makes an alias, nothing else (both are
         * pinned: identity guards where they were read from the frame) */
        tc_guard_set *gs = T->out->guards;
        if ((seq->source >= 0 && tc_guard_id(gs, seq->source, seq->obj) < 0)
            || (idx->source >= 0
                && tc_guard_id(gs, idx->source, idx->obj) < 0)) {
            return ERROR;
        }
        return tc_tr_push_folded(T, PyObject_GetItem(seq->obj, idx->obj),
                                 "subscript of a type");
    }
    if ((seq->kind == TC_VAR_TUPLE || seq->kind == TC_VAR_LIST)
        && idx->kind == TC_VAR_CONST && PyLong_CheckExact(idx->obj)) {
        long i = PyLong_AsLong(idx->obj);
        if (i < 0) {
            i += seq->nitems;
        }
        if (i < 0 || i >= seq->nitems) {
            return tc_tr_unsupported(T, "index out of range");
        }
        return tc_tr_push(T, seq->items[i]);
    }
    if ((seq->kind == TC_VAR_TUPLE || seq->kind == TC_VAR_LIST)
        && idx->kind == TC_VAR_CONST && PySlice_Check(idx->obj)) {
        return slice_sequence(T, seq, idx->obj);
    }
    if (seq->kind == TC_VAR_TENSOR && idx->kind == TC_VAR_CONST) {
        return index_tensor_const(T, seq, idx->obj);
    }
    if (seq->kind == TC_VAR_TENSOR
        && (idx->kind == TC_VAR_TENSOR || is_int_list(idx))) {
        return index_tensor(T, seq, &idx, 1);
    }
    if (seq->kind == TC_VAR_TENSOR && idx->kind == TC_VAR_TUPLE) {
        /* x[:, :T, None], x[:, i, j] */
        return index_tensor(T, seq, idx->items, idx->nitems);
    }
    if (seq->kind == TC_VAR_NN_MODULE) {
        return tc_tr_index_nn_module(T, seq, idx);
    }
    rc = tc_tr_call_python_dunder(T, seq, "__getitem__", &idx, 1);
    if (rc != NOT_HANDLED) {
        return rc;
    }
    tc_var *items = tc_tr_new_object_items(T, seq);
    if (items != NULL) {
        return tc_tr_dict_lookup(T, items, idx, NULL);
    }
    return tc_tr_unsupported(T, "subscript of a %s with a %s",
                             tc_var_kind_name(seq), tc_var_kind_name(idx));
}

int
tc_tr_op_subscr(tracer *T)
{
    tc_var *idx = tc_tr_pop(T), *seq = tc_tr_pop(T);
    if (seq == NULL || idx == NULL) {
        return tc_tr_unsupported(T, "malformed subscript");
    }
    return subscript(T, seq, idx);
}

/* BUILD_SLICE of known ints (a tuple index such as x[:, :T] holds them). */
int
tc_tr_op_build_slice(tracer *T, int n)
{
    tc_var *parts[3] = {NULL, NULL, NULL};
    for (int i = n - 1; i >= 0; i--) {
        parts[i] = tc_tr_pop(T);
        if (parts[i] == NULL) {
            return tc_tr_unsupported(T, "malformed slice");
        }
        int rc = tc_tr_reify(T, parts[i]);
        if (rc != OK) {
            return rc;
        }
        if (parts[i]->kind != TC_VAR_CONST) {
            return tc_tr_unsupported(T, "a slice of a %s",
                                     tc_var_kind_name(parts[i]));
        }
    }
    return tc_tr_push_folded(T, PySlice_New(parts[0]->obj, parts[1]->obj,
                                            n == 3 ? parts[2]->obj : NULL),
                             "slice");
}

#if TC_HAVE_BINARY_SLICE
int
tc_tr_op_binary_slice(tracer *T)
{
    int rc = tc_tr_op_build_slice(T, 2);
    if (rc != OK) {
        return rc;
    }
    tc_var *sl = tc_tr_pop(T), *seq = tc_tr_pop(T);
    return seq ? subscript(T, seq, sl) : tc_tr_unsupported(T,
                                                           "malformed slice");
}

/* STORE_SLICE: value, container, start, stop -> container[start:stop] =
 * value, which is STORE_SUBSCR of the slice (t[1:3] = v on 3.12 was a
 * graph break, "bytecode STORE_SLICE is not supported yet"). */
int
tc_tr_op_store_slice(tracer *T)
{
    int rc = tc_tr_op_build_slice(T, 2);
    return rc != OK ? rc : tc_tr_op_store_subscr(T);
}
#endif

/* The Python value of a MAKE_FUNCTION part (defaults, keyword defaults,
 * annotations): constants, classes and functions the trace pins, and
 * tuples and dicts of them; a new reference, or NULL (no exception) if
 * some part is not known. */
static PyObject *
part_value(tracer *T, tc_var *v, int annotation)
{
    if (tc_tr_reify(T, v) != OK) {
        PyErr_Clear();
        return NULL;
    }
    if (v->kind == TC_VAR_CONST || v->kind == TC_VAR_OBJECT
        || (annotation && v->kind == TC_VAR_UNKNOWN)) {
        /* (an annotation is only kept: `int`, a class as it is now) */
        return Py_NewRef(v->obj);
    }
    if (v->kind != TC_VAR_TUPLE && v->kind != TC_VAR_DICT) {
        return NULL;
    }
    PyObject *r = v->kind == TC_VAR_TUPLE ? PyTuple_New(v->nitems)
                                          : PyDict_New();
    for (int i = 0; r != NULL && i < v->nitems; i++) {
        PyObject *item = part_value(T, v->items[i], annotation);
        if (item == NULL) {
            Py_CLEAR(r);
            break;
        }
        if (v->kind == TC_VAR_TUPLE) {
            PyTuple_SET_ITEM(r, i, item);
        }
        else {
            int e = PyDict_SetItem(r, PyTuple_GET_ITEM(v->obj, i), item);
            Py_DECREF(item);
            if (e < 0) {
                Py_CLEAR(r);
            }
        }
    }
    return r;
}

/* MAKE_FUNCTION.  A function without defaults or annotations over the
 * frame's own cells (or none) is made when the segment exits (a lambda
 * passed along, a comprehension on 3.11).  One over an inlined call's
 * variables is a closure of that call (inline.c, make_closure).  One
 * without a closure whose parts are constants (a function of another
 * module, defaults, annotations) is made now, as the object it then is. */
int
tc_tr_op_make_function(tracer *T, int oparg)
{
    tc_var *code = tc_tr_peek(T, 1);
    if ((oparg & ~15) || code == NULL || code->kind != TC_VAR_UNKNOWN
        || !PyCode_Check(code->obj)) {
        return tc_tr_unsupported(T, "malformed MAKE_FUNCTION");
    }
    tc_var *part_vars[TC_FN_NPARTS] = {NULL};
    int depth = 2;
    for (int bit = TC_FN_CLOSURE; bit >= 0; bit--) {
        if (oparg & (1 << bit)) {
            part_vars[bit] = tc_tr_peek(T, depth++);
        }
    }
    tc_var *closure = part_vars[TC_FN_CLOSURE];
    int inlined_cells = 0;
    for (int i = 0; closure && i < closure->nitems; i++) {
        if (closure->kind != TC_VAR_TUPLE
            || closure->items[i]->kind != TC_VAR_CELL) {
            return tc_tr_unsupported(T, "a closure over cells the traced "
                                     "code did not make");
        }
        inlined_cells |= closure->items[i]->index > 0;
    }
    PyObject *parts[TC_FN_NPARTS] = {NULL};
    int rc = OK, has_parts = 0;
    for (int bit = 0; bit < TC_FN_CLOSURE; bit++) {
        if (part_vars[bit] != NULL) {
            has_parts = 1;
            parts[bit] = part_value(T, part_vars[bit],
                                    bit == TC_FN_ANNOTATIONS);
            if (parts[bit] == NULL && rc == OK) {
                rc = PyErr_Occurred() ? ERROR
                   : tc_tr_unsupported(T, "a nested function whose defaults "
                                       "or annotations are not constants");
            }
        }
    }
    tc_var *v = NULL;
    int foreign = T->globals != T->frame->f_globals;
    if (rc == OK && closure != NULL && inlined_cells) {
        v = tc_tr_make_closure(T, code->obj, parts, closure);
        rc = v ? OK : ERROR;
    }
    else if (rc == OK && closure != NULL && (foreign || has_parts)) {
        /* the exit would make it with the frame's globals, no defaults */
        rc = tc_tr_unsupported(T, "a closure over the frame's variables "
                               "with defaults or annotations, or in a "
                               "function of another module");
    }
    else if (rc == OK && (foreign || has_parts)) {
        /* a comprehension or lambda of a library function, a function
         * with constant defaults: made now (nothing of this call is in
         * it), inlined like any function, left as that object if it
         * escapes */
        PyObject *f = pyframe_make_function(code->obj, T->globals, parts);
        v = f ? tc_var_new(&T->sh->arena, TC_VAR_UNKNOWN, -1) : NULL;
        if (v == NULL) {
            Py_XDECREF(f);
            rc = ERROR;
        }
        else {
            v->obj = f;
        }
    }
    else if (rc == OK) {
        v = closure != NULL
            ? tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED, closure->nitems,
                         closure->items)
            : tc_var_new(&T->sh->arena, TC_VAR_DEFERRED, -1);
        if (v == NULL) {
            rc = ERROR;
        }
        else {
            v->node = TC_TMPL_FUNCTION;
            v->obj = Py_NewRef(code->obj);
        }
    }
    for (int bit = 0; bit < TC_FN_CLOSURE; bit++) {
        Py_XDECREF(parts[bit]);
    }
    if (rc != OK) {
        return rc;
    }
    T->sp -= depth - 1;
    return tc_tr_push(T, v);
}

/* f-strings of Python values fold; of tensors they are deferred. */
int
tc_tr_op_format_value(tracer *T, int oparg)
{
    int has_spec = (oparg & FVS_MASK) != 0;
    tc_var *spec = has_spec ? tc_tr_peek(T, 1) : NULL;
    tc_var *value = tc_tr_peek(T, 1 + has_spec);
    if (value == NULL || tc_tr_reify(T, value) != OK
        || tc_tr_reify(T, spec) != OK) {
        return value == NULL ? tc_tr_unsupported(T, "malformed stack") : ERROR;
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
        return d->obj ? tc_tr_push(T, d) : ERROR;
    }
    T->sp -= 1 + has_spec;
    return tc_tr_push_folded(T, tc_format_value(value->obj,
                                                spec ? spec->obj : NULL,
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

int
tc_tr_op_build_string(tracer *T, int n)
{
    if (T->sp < n) {
        return tc_tr_unsupported(T, "malformed stack");
    }
    tc_var **parts = &T->stack[T->sp - n];
    if (!tc_tr_all_const(parts, n)) {
        tc_var *d = tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED, n, parts);
        if (d == NULL) {
            return ERROR;
        }
        d->node = TC_TMPL_JOIN;
        T->sp -= n;
        return tc_tr_push(T, d);
    }
    PyObject *tup = PyTuple_New(n), *empty = PyUnicode_FromString("");
    for (int i = 0; tup && i < n; i++) {
        PyTuple_SET_ITEM(tup, i, Py_NewRef(parts[i]->obj));
    }
    PyObject *r = tup && empty ? PyUnicode_Join(empty, tup) : NULL;
    Py_XDECREF(tup);
    Py_XDECREF(empty);
    T->sp -= n;
    return tc_tr_push_folded(T, r, "f-string");
}
