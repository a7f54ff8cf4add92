/* guards.c - fetching source values and checking guards before a call.
 *
 * This runs before every compiled call, so the check path reads tensor
 * metadata through the cheapest attribute getters torch offers (dtype,
 * shape, stride(), requires_grad, get_device()) and compares in C.
 */
#include "guards.h"
#include "nn_module.h"
#include "tensor_keys.h"
#include "../runtime/torch_tensor.h"

PyObject *tc_torch_module;
PyObject *tc_tensor_type;

static PyObject *str_dtype, *str_shape, *str_stride, *str_requires_grad,
    *str_get_device, *str_is_cpu;
static PyObject *str_version;
static PyObject *str_code, *str_defaults, *str_kwdefaults, *str_globals;
static PyObject *fn_is_grad_enabled, *fn_get_default_dtype,
    *fn_any_autocast, *fn_dispatch_stack_len;
static PyObject *mod_forward_ad, *str_current_level;
static PyObject *torch_dtypes[TC_NDTYPES];

int
tc_guards_init(void)
{
    tc_torch_module = PyImport_ImportModule("torch");
    if (tc_torch_module == NULL) {
        return -1;
    }
    tc_tensor_type = PyObject_GetAttrString(tc_torch_module, "Tensor");
    fn_is_grad_enabled = PyObject_GetAttrString(tc_torch_module,
                                                "is_grad_enabled");
    fn_get_default_dtype = PyObject_GetAttrString(tc_torch_module,
                                                  "get_default_dtype");
    if (tc_tensor_type == NULL || fn_is_grad_enabled == NULL
        || fn_get_default_dtype == NULL) {
        return -1;
    }
    /* torch._C._is_any_autocast_enabled: any device's autocast (absent in
     * an older torch: autocast is then never seen as on) */
    PyObject *C = PyObject_GetAttrString(tc_torch_module, "_C");
    fn_any_autocast = C ? PyObject_GetAttrString(C, "_is_any_autocast_enabled")
                        : NULL;
    PyErr_Clear();
    fn_dispatch_stack_len = C ? PyObject_GetAttrString(
        C, "_len_torch_dispatch_stack") : NULL;
    Py_XDECREF(C);
    PyErr_Clear();
    /* torch.autograd.forward_ad._current_level: -1 outside dual_level() */
    mod_forward_ad = PyImport_ImportModule("torch.autograd.forward_ad");
    str_current_level = PyUnicode_InternFromString("_current_level");
    if (mod_forward_ad == NULL || str_current_level == NULL) {
        return -1;
    }
    for (int i = 0; i < TC_NDTYPES; i++) {
        /* tc_dtype_name spells dtypes as torch's attributes do */
        torch_dtypes[i] = PyObject_GetAttrString(tc_torch_module,
                                                 tc_dtype_name(i));
        if (torch_dtypes[i] == NULL) {
            return -1;
        }
    }
    str_dtype = PyUnicode_InternFromString("dtype");
    str_shape = PyUnicode_InternFromString("shape");
    str_stride = PyUnicode_InternFromString("stride");
    str_requires_grad = PyUnicode_InternFromString("requires_grad");
    str_get_device = PyUnicode_InternFromString("get_device");
    str_is_cpu = PyUnicode_InternFromString("is_cpu");
    str_version = PyUnicode_InternFromString("_version");
    str_code = PyUnicode_InternFromString("__code__");
    str_defaults = PyUnicode_InternFromString("__defaults__");
    str_kwdefaults = PyUnicode_InternFromString("__kwdefaults__");
    str_globals = PyUnicode_InternFromString("__globals__");
    if (!str_code || !str_defaults || !str_kwdefaults || !str_globals
        || !str_version) {
        return -1;
    }
    if (tc_nn_module_init() < 0 || tc_tensor_keys_init() < 0) {
        return -1;
    }
    if (!str_dtype || !str_shape || !str_stride || !str_requires_grad
        || !str_get_device || !str_is_cpu) {
        return -1;
    }
    return 0;
}

int
tc_dtype_from_torch(PyObject *obj)
{
    for (int i = 0; i < TC_NDTYPES; i++) {
        if (torch_dtypes[i] == obj) {
            return i;
        }
    }
    return -1;
}

PyObject *
tc_dtype_to_torch(tc_dtype dt)
{
    return torch_dtypes[dt];
}

int
tc_grad_enabled(void)
{
    PyObject *r = PyObject_CallNoArgs(fn_is_grad_enabled);
    if (r == NULL) {
        return -1;
    }
    int on = (r == Py_True);
    Py_DECREF(r);
    return on;
}

/* fn() is True or a nonzero int: 1; else 0; -1 on exception; 0 when
 * this torch has no fn. */
static int
call_flag(PyObject *fn)
{
    if (fn == NULL) {
        return 0;
    }
    PyObject *r = PyObject_CallNoArgs(fn);
    if (r == NULL) {
        return -1;
    }
    int on = PyObject_IsTrue(r);
    Py_DECREF(r);
    return on;
}

int
tc_autocast_enabled(void)
{
    return call_flag(fn_any_autocast);
}

int
tc_dispatch_modes_active(void)
{
    return call_flag(fn_dispatch_stack_len);
}

int
tc_forward_ad_active(void)
{
    PyObject *lv = PyObject_GetAttr(mod_forward_ad, str_current_level);
    if (lv == NULL) {
        return -1;
    }
    long v = PyLong_Check(lv) ? PyLong_AsLong(lv) : -1;
    Py_DECREF(lv);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    return v >= 0;
}

PyObject *
tc_default_dtype(void)
{
    /* dtypes are immortal singletons owned by torch: a borrowed result is
     * safe to compare by identity. */
    PyObject *r = PyObject_CallNoArgs(fn_get_default_dtype);
    Py_XDECREF(r);
    return r;
}

/* ---- sources ---------------------------------------------------------- */

tc_guard_set *
tc_guards_new(void)
{
    tc_guard_set *gs = PyMem_Calloc(1, sizeof(*gs));
    if (gs == NULL) {
        PyErr_NoMemory();
    }
    return gs;
}

void
tc_guards_free(tc_guard_set *gs)
{
    if (gs == NULL) {
        return;
    }
    for (int i = 0; i < gs->nsources; i++) {
        Py_XDECREF(gs->sources[i].name);
    }
    for (int i = 0; i < gs->nguards; i++) {
        Py_XDECREF(gs->guards[i].obj);
        Py_XDECREF(gs->guards[i].tensor.type);
        Py_XDECREF(gs->guards[i].tensor.dtype);
        Py_XDECREF(gs->guards[i].default_dtype);
    }
    PyMem_Free(gs->sources);
    PyMem_Free(gs->guards);
    PyMem_Free(gs->plan);
    PyMem_Free(gs->plan_start);
    PyMem_Free(gs->shared);
    PyMem_Free(gs);
}

static int
names_equal(PyObject *a, PyObject *b)
{
    if (a == NULL || b == NULL || !PyUnicode_Check(a)
        || !PyUnicode_Check(b)) {
        return a == b;  /* TC_SRC_CONST objects: by identity */
    }
    return PyUnicode_Compare(a, b) == 0;
}

int
tc_source_add(tc_guard_set *gs, tc_source_kind kind, int parent,
              Py_ssize_t index, PyObject *name)
{
    for (int i = 0; i < gs->nsources; i++) {
        tc_source *s = &gs->sources[i];
        if (s->kind == kind && s->parent == parent && s->index == index
            && names_equal(s->name, name)) {
            return i;
        }
    }
    if (gs->nsources == gs->srccap) {
        int cap = gs->srccap ? 2 * gs->srccap : 8;
        tc_source *n = PyMem_Realloc(gs->sources, cap * sizeof(*n));
        if (n == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        gs->sources = n;
        gs->srccap = cap;
    }
    tc_source *s = &gs->sources[gs->nsources];
    s->kind = kind;
    s->parent = parent;
    s->index = index;
    s->name = Py_XNewRef(name);
    return gs->nsources++;
}

static PyObject *call_repr(const tc_guard_set *gs, const tc_source *s);

PyObject *
tc_source_repr(const tc_guard_set *gs, int src)
{
    const tc_source *s = &gs->sources[src];
    PyObject *parent = NULL, *r = NULL;
    switch (s->kind) {
    case TC_SRC_LOCAL:
        return PyUnicode_FromFormat("L['%U']", s->name);
    case TC_SRC_GLOBAL:
        return PyUnicode_FromFormat("G['%U']", s->name);
    case TC_SRC_CLOSURE:
    case TC_SRC_CELL:
        return PyUnicode_FromFormat("C['%U']", s->name);
    case TC_SRC_STACK:
        return PyUnicode_FromFormat("S[%zd]", s->index);
    case TC_SRC_CONST:
        return PyUnicode_FromFormat("%R", s->name);
    case TC_SRC_CALL:
        return call_repr(gs, s);
    case TC_SRC_ITEM:
    case TC_SRC_ATTR:
    case TC_SRC_FUNC_GLOBAL:
    case TC_SRC_FUNC_CLOSURE:
    case TC_SRC_DICT_ITEM:
        parent = tc_source_repr(gs, s->parent);
        if (parent == NULL) {
            return NULL;
        }
        if (s->kind == TC_SRC_ITEM) {
            r = PyUnicode_FromFormat("%U[%zd]", parent, s->index);
        }
        else if (s->kind == TC_SRC_FUNC_GLOBAL) {
            r = PyUnicode_FromFormat("%U.__globals__['%U']", parent, s->name);
        }
        else if (s->kind == TC_SRC_FUNC_CLOSURE) {
            r = PyUnicode_FromFormat("%U.__closure__[%zd].cell_contents",
                                     parent, s->index);
        }
        else if (s->kind == TC_SRC_DICT_ITEM
                 && (PyUnicode_Check(s->name) || PyLong_Check(s->name))) {
            r = PyUnicode_FromFormat("%U[%R]", parent, s->name);
        }
        else if (s->kind == TC_SRC_DICT_ITEM) {
            /* an object key (a tensor: an optimizer's state[p]), by
             * identity; its repr would print its values */
            r = PyUnicode_FromFormat("%U[<%s at %p>]", parent,
                                     Py_TYPE(s->name)->tp_name, s->name);
        }
        else {
            r = PyUnicode_FromFormat("%U.%U", parent, s->name);
        }
        Py_DECREF(parent);
        return r;
    }
    Py_UNREACHABLE();
}

/* A tracer's bound call (tracer/pysem.c bound_call: a builtin function
 * "call" whose self is (fn, args)) as fn(arg, *args): hasattr(L['m'],
 * 'bias'), dict.get(L['d'], 'k').  NULL (no exception) if s is not one. */
static PyObject *
bound_call_repr(const tc_source *s, PyObject *arg)
{
    if (!PyCFunction_Check(s->name)
        || strcmp(((PyCFunctionObject *)s->name)->m_ml->ml_name, "call")) {
        return NULL;
    }
    PyObject *self = PyCFunction_GET_SELF(s->name);
    if (self == NULL || !PyTuple_Check(self) || PyTuple_GET_SIZE(self) != 2
        || !PyTuple_Check(PyTuple_GET_ITEM(self, 1))) {
        return NULL;
    }
    PyObject *fn = PyTuple_GET_ITEM(self, 0);
    PyObject *name = PyObject_GetAttrString(fn, "__qualname__");
    PyObject *parts = name ? PyList_New(0) : NULL;
    PyObject *r = NULL;
    int ok = parts != NULL && PyList_Append(parts, arg) == 0;
    PyObject *rest = PyTuple_GET_ITEM(self, 1);
    for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(rest); i++) {
        PyObject *a = PyObject_Repr(PyTuple_GET_ITEM(rest, i));
        ok = a != NULL && PyList_Append(parts, a) == 0;
        Py_XDECREF(a);
    }
    PyObject *sep = ok ? PyUnicode_FromString(", ") : NULL;
    PyObject *joined = sep ? PyUnicode_Join(sep, parts) : NULL;
    if (joined != NULL) {
        r = PyUnicode_FromFormat("%U(%U)", name, joined);
    }
    Py_XDECREF(sep);
    Py_XDECREF(joined);
    Py_XDECREF(parts);
    Py_XDECREF(name);
    if (r == NULL) {
        PyErr_Clear();
    }
    return r;
}

/* torch._C._is_torch_function_mode_enabled(), tuple(L['kw']) */
static PyObject *
call_repr(const tc_guard_set *gs, const tc_source *s)
{
    PyObject *mod = PyObject_GetAttrString(s->name, "__module__");
    PyObject *name = mod ? PyObject_GetAttrString(s->name, "__qualname__")
                         : NULL;
    if (name == NULL) {
        /* a callable object without a __qualname__ (its repr) */
        PyErr_Clear();
        Py_CLEAR(mod);
        name = PyObject_Repr(s->name);
    }
    PyObject *arg = s->parent < 0 || name == NULL
                    ? PyUnicode_FromString("")
                    : tc_source_repr(gs, s->parent);
    PyObject *r = arg != NULL ? bound_call_repr(s, arg) : NULL;
    if (arg != NULL && r == NULL && name != NULL) {
        r = mod != NULL && mod != Py_None && PyUnicode_Check(mod)
            ? PyUnicode_FromFormat("%U.%U(%U)", mod, name, arg)
            : PyUnicode_FromFormat("%U(%U)", name, arg);
    }
    Py_XDECREF(mod);
    Py_XDECREF(name);
    Py_XDECREF(arg);
    return r;
}

/* The name a TENSOR_MATCH message uses: the bare local name, as Dynamo
 * prints it, else the full source. */
static PyObject *
tensor_name(const tc_guard_set *gs, int src)
{
    const tc_source *s = &gs->sources[src];
    if (s->kind == TC_SRC_LOCAL) {
        return Py_NewRef(s->name);
    }
    return tc_source_repr(gs, src);
}

/* ---- fetching --------------------------------------------------------- */

/* A global or free variable of a function other than the frame's: what
 * LOAD_GLOBAL / LOAD_DEREF read when that function runs. */
static PyObject *
fetch_function_slot(const tc_source *s, PyFunctionObject *fn)
{
    if (s->kind == TC_SRC_FUNC_CLOSURE) {
        PyObject *cl = fn->func_closure;
        if (cl == NULL || s->index >= PyTuple_GET_SIZE(cl)) {
            return NULL;
        }
        return Py_XNewRef(PyCell_GET(PyTuple_GET_ITEM(cl, s->index)));
    }
    PyObject *v = PyDict_GetItemWithError(fn->func_globals, s->name);
    if (v == NULL && !PyErr_Occurred() && PyDict_Check(fn->func_builtins)) {
        v = PyDict_GetItemWithError(fn->func_builtins, s->name);
    }
    return Py_XNewRef(v);
}

static PyObject *
fetch_one(const tc_source *s, const tc_frame_view *fv, PyObject *const *vals)
{
    PyObject *v = NULL, *parent;
    switch (s->kind) {
    case TC_SRC_LOCAL:
        v = fv->localsplus[s->index];
        return Py_XNewRef(v);
    case TC_SRC_GLOBAL:
        v = PyDict_GetItemWithError(fv->globals, s->name);
        if (v == NULL && !PyErr_Occurred()) {
            v = PyDict_GetItemWithError(fv->builtins, s->name);
        }
        return Py_XNewRef(v);
    case TC_SRC_CLOSURE:
        if (fv->closure == NULL) {
            return NULL;
        }
        v = PyCell_GET(PyTuple_GET_ITEM(fv->closure, s->index));
        return Py_XNewRef(v);
    case TC_SRC_CELL:
        v = fv->localsplus[s->index];
        return v && PyCell_Check(v) ? Py_XNewRef(PyCell_GET(v)) : NULL;
    case TC_SRC_STACK:
        return Py_XNewRef(fv->stack[s->index]);
    case TC_SRC_CONST:
        return Py_NewRef(s->name);
    case TC_SRC_CALL:
        if (s->parent >= 0 && vals[s->parent] == NULL) {
            return NULL;
        }
        v = s->parent < 0 ? PyObject_CallNoArgs(s->name)
                          : PyObject_CallOneArg(s->name, vals[s->parent]);
        PyErr_Clear();
        return v;
    case TC_SRC_ITEM:
        parent = vals[s->parent];
        if (parent == NULL) {
            return NULL;
        }
        if (PyTuple_CheckExact(parent) && s->index < PyTuple_GET_SIZE(parent)) {
            return Py_NewRef(PyTuple_GET_ITEM(parent, s->index));
        }
        if (PyList_CheckExact(parent) && s->index < PyList_GET_SIZE(parent)) {
            return Py_NewRef(PyList_GET_ITEM(parent, s->index));
        }
        return NULL;
    case TC_SRC_ATTR:
        parent = vals[s->parent];
        if (parent == NULL) {
            return NULL;
        }
        v = tc_nn_getattr(parent, s->name);
        if (v == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
        }
        return v;
    case TC_SRC_FUNC_GLOBAL:
    case TC_SRC_FUNC_CLOSURE:
        /* the function itself is ID_MATCH-guarded by the tracer; a
         * different object here just fails the guards */
        parent = vals[s->parent];
        if (parent == NULL || !PyFunction_Check(parent)) {
            return NULL;
        }
        return fetch_function_slot(s, (PyFunctionObject *)parent);
    case TC_SRC_DICT_ITEM:
        parent = vals[s->parent];
        /* (a dict subclass only where the tracer guarded its type: a
         * defaultdict, whose storage holds what d[key] finds) */
        if (parent == NULL || !PyDict_Check(parent)) {
            return NULL;
        }
        return Py_XNewRef(PyDict_GetItemWithError(parent, s->name));
    }
    return NULL;
}

int
tc_guards_fetch(const tc_guard_set *gs, const tc_frame_view *fv,
                PyObject **vals)
{
    /* Parents always precede children: sources are interned in the order
     * the tracer first reads them. */
    for (int i = 0; i < gs->nsources; i++) {
        vals[i] = fetch_one(&gs->sources[i], fv, vals);
        if (vals[i] == NULL && PyErr_Occurred()) {
            for (int j = 0; j < i; j++) {
                Py_CLEAR(vals[j]);
            }
            return -1;
        }
    }
    return 0;
}

void
tc_guards_release(const tc_guard_set *gs, PyObject **vals)
{
    for (int i = 0; i < gs->nsources; i++) {
        Py_CLEAR(vals[i]);
    }
}

/* ---- tensor metadata -------------------------------------------------- */

static int
read_int_tuple(PyObject *tup, int64_t *out, int n)
{
    for (int i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(tup, i));
        if (v == -1 && PyErr_Occurred()) {
            return -1;
        }
        out[i] = v;
    }
    return 0;
}

static int
read_device_index(PyObject *t, int *index)
{
    PyObject *d = PyObject_CallMethodNoArgs(t, str_get_device);
    if (d == NULL) {
        return -1;
    }
    *index = (int)PyLong_AsLong(d);
    Py_DECREF(d);
    return (*index == -1 && PyErr_Occurred()) ? -1 : 0;
}

int
tc_tensor_read_meta(PyObject *t, tc_tensor_meta *m, tc_dtype *dt)
{
    PyObject *dtype = NULL, *shape = NULL, *stride = NULL, *rg = NULL;
    PyObject *is_cpu = NULL;
    int rc = -1;

    m->type = (PyObject *)Py_TYPE(t);
    /* the kind first: a nested tensor raises for its shape, a sparse one
     * for its strides, a functorch wrapper has no storage */
    if (!tc_tensor_type_plain(t)) {
        return 1;
    }
    if (tc_tensor_keys(t, &m->keys) < 0) {
        return -1;
    }
    if (!tc_tensor_keys_plain(m->keys)) {
        return 1;
    }
    dtype = PyObject_GetAttr(t, str_dtype);
    shape = PyObject_GetAttr(t, str_shape);
    stride = shape ? PyObject_CallMethodNoArgs(t, str_stride) : NULL;
    rg = PyObject_GetAttr(t, str_requires_grad);
    if (!dtype || !shape || !stride || !rg
        || read_device_index(t, &m->device_index) < 0) {
        goto done;
    }
    int code = tc_dtype_from_torch(dtype);
    Py_ssize_t ndim = PyTuple_GET_SIZE(shape);
    rc = 1;
    if (code < 0 || ndim > TC_MAX_DIMS || !PyTuple_Check(stride)) {
        goto done;
    }
    if (m->device_index < 0) {
        /* get_device() is -1 for cpu but also for meta and other devices. */
        is_cpu = PyObject_GetAttr(t, str_is_cpu);
        if (is_cpu == NULL) {
            rc = -1;
            goto done;
        }
        if (is_cpu != Py_True) {
            goto done;
        }
    }
    m->dtype = dtype;
    m->requires_grad = (rg == Py_True);
    m->ndim = (int)ndim;
    if (read_int_tuple(shape, m->sizes, m->ndim) < 0
        || read_int_tuple(stride, m->strides, m->ndim) < 0) {
        rc = -1;
        goto done;
    }
    *dt = (tc_dtype)code;
    rc = 0;
done:
    Py_XDECREF(dtype);
    Py_XDECREF(shape);
    Py_XDECREF(stride);
    Py_XDECREF(rg);
    Py_XDECREF(is_cpu);
    return rc;
}

/* ---- guard construction ----------------------------------------------- */

static tc_guard *
guard_append(tc_guard_set *gs, tc_guard_kind kind, int src)
{
    for (int i = 0; i < gs->nguards; i++) {
        if (gs->guards[i].kind == kind && gs->guards[i].source == src) {
            return NULL; /* already guarded; the caller treats as done */
        }
    }
    if (gs->nguards == gs->gcap) {
        int cap = gs->gcap ? 2 * gs->gcap : 8;
        tc_guard *n = PyMem_Realloc(gs->guards, cap * sizeof(*n));
        if (n == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        gs->guards = n;
        gs->gcap = cap;
    }
    tc_guard *g = &gs->guards[gs->nguards++];
    memset(g, 0, sizeof(*g));
    g->kind = kind;
    g->source = src;
    return g;
}

#define APPEND_OR_RETURN(g, gs, kind, src)                                   \
    tc_guard *g = guard_append(gs, kind, src);                               \
    if (g == NULL) {                                                         \
        return PyErr_Occurred() ? -1 : 0;                                    \
    }

int
tc_guard_type(tc_guard_set *gs, int src, PyObject *value)
{
    APPEND_OR_RETURN(g, gs, TC_GUARD_TYPE_MATCH, src);
    g->obj = Py_NewRef((PyObject *)Py_TYPE(value));
    return 0;
}

int
tc_guard_no_hooks(tc_guard_set *gs, int src)
{
    APPEND_OR_RETURN(g, gs, TC_GUARD_NO_HOOKS, src);
    (void)g;
    return 0;
}

int
tc_guard_id(tc_guard_set *gs, int src, PyObject *value)
{
    APPEND_OR_RETURN(g, gs, TC_GUARD_ID_MATCH, src);
    g->obj = Py_NewRef(value);
    return 0;
}

/* t._version and t.data_ptr(): 0, or -1 with an exception. */
static int
read_frozen(PyObject *t, int64_t *version, void **data_ptr)
{
    PyObject *v = PyObject_GetAttr(t, str_version);
    if (v == NULL) {
        return -1;
    }
    *version = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (*version == -1 && PyErr_Occurred()) {
        return -1;
    }
    return tc_alloc_data_ptr(t, data_ptr);
}

int
tc_guard_frozen(tc_guard_set *gs, int src, PyObject *tensor)
{
    APPEND_OR_RETURN(g, gs, TC_GUARD_FROZEN, src);
    g->obj = Py_NewRef(tensor);
    return read_frozen(tensor, &g->version, &g->data_ptr);
}

/* A value the tracer bakes in: a Python scalar by value, else by
 * identity. */
static int
guard_constant(tc_guard_set *gs, int src, PyObject *v)
{
    if (v == Py_None || PyBool_Check(v) || PyLong_CheckExact(v)
        || PyFloat_CheckExact(v) || PyUnicode_CheckExact(v)) {
        return tc_guard_equals(gs, src, v);
    }
    return tc_guard_id(gs, src, v);
}

/* A function's defaults tuple or keyword-defaults dict, item by item. */
static int
guard_items(tc_guard_set *gs, int src, PyObject *container)
{
    if (tc_guard_length(gs, src, container) < 0) {
        return -1;
    }
    Py_ssize_t pos = 0, n = PyTuple_Check(container)
                            ? PyTuple_GET_SIZE(container) : 0;
    PyObject *key, *item;
    for (Py_ssize_t i = 0; i < n; i++) {
        int s = tc_source_add(gs, TC_SRC_ITEM, src, i, NULL);
        if (s < 0
            || guard_constant(gs, s, PyTuple_GET_ITEM(container, i)) < 0) {
            return -1;
        }
    }
    while (PyDict_Check(container)
           && PyDict_Next(container, &pos, &key, &item)) {
        int s = PyUnicode_Check(key)
            ? tc_source_add(gs, TC_SRC_DICT_ITEM, src, 0, key) : -1;
        if (s < 0) {
            /* a non-str key (not made by `def`): by identity */
            return PyErr_Occurred() ? -1 : tc_guard_id(gs, src, container);
        }
        if (guard_constant(gs, s, item) < 0) {
            return -1;
        }
    }
    return 0;
}

int
tc_guard_function(tc_guard_set *gs, int src, PyObject *value)
{
    tc_source_kind root = gs->sources[src].kind;
    if (!PyFunction_Check(value) || PyFunction_GET_CLOSURE(value) != NULL
        || root == TC_SRC_GLOBAL || root == TC_SRC_FUNC_GLOBAL
        || root == TC_SRC_CONST) {
        return tc_guard_id(gs, src, value);
    }
    /* the type first: the attributes are read only from a function */
    if (tc_guard_type(gs, src, value) < 0) {
        return -1;
    }
    PyFunctionObject *fn = (PyFunctionObject *)value;
    PyObject *const names[] = {str_code, str_globals, str_defaults,
                               str_kwdefaults};
    PyObject *const attrs[] = {fn->func_code, fn->func_globals,
                               fn->func_defaults, fn->func_kwdefaults};
    for (int i = 0; i < 4; i++) {
        int a = tc_source_add(gs, TC_SRC_ATTR, src, 0, names[i]);
        if (a < 0) {
            return -1;
        }
        /* defaults are built per call (BUILD_TUPLE, BUILD_MAP): guarded by
         * their items, which the tracer binds as constants */
        int rc = i < 2 || attrs[i] == NULL
            ? tc_guard_id(gs, a, attrs[i] ? attrs[i] : Py_None)
            : guard_items(gs, a, attrs[i]);
        if (rc < 0) {
            return -1;
        }
    }
    return 0;
}

int
tc_guard_equals(tc_guard_set *gs, int src, PyObject *value)
{
    APPEND_OR_RETURN(g, gs, TC_GUARD_EQUALS, src);
    g->obj = Py_NewRef(value);
    return 0;
}

int
tc_guard_length(tc_guard_set *gs, int src, PyObject *value)
{
    APPEND_OR_RETURN(g, gs, TC_GUARD_LENGTH, src);
    g->obj = Py_NewRef((PyObject *)Py_TYPE(value));
    g->length = PyObject_Length(value);
    return g->length < 0 ? -1 : 0;
}

int
tc_guard_tensor(tc_guard_set *gs, int src, PyObject *tensor)
{
    tc_dtype dt;
    tc_tensor_meta m;
    int rc = tc_tensor_read_meta(tensor, &m, &dt);
    if (rc != 0) {
        if (rc > 0) {
            PyErr_SetString(PyExc_RuntimeError, "tensor not representable");
        }
        return -1;
    }
    APPEND_OR_RETURN(g, gs, TC_GUARD_TENSOR_MATCH, src);
    g->tensor = m;
    Py_INCREF(m.type);
    Py_INCREF(m.dtype);
    return 0;
}

int
tc_guard_global_state(tc_guard_set *gs)
{
    int on = tc_grad_enabled();
    if (on < 0) {
        return -1;
    }
    PyObject *dt = tc_default_dtype();
    if (dt == NULL) {
        return -1;
    }
    int ac = tc_autocast_enabled(), dm = tc_dispatch_modes_active();
    int fw = tc_forward_ad_active();
    if (ac < 0 || dm < 0 || fw < 0) {
        return -1;
    }
    APPEND_OR_RETURN(g, gs, TC_GUARD_GLOBAL_STATE, -1);
    g->grad_mode = on;
    g->autocast = ac;
    g->dispatch_modes = dm;
    g->forward_ad = fw;
    g->default_dtype = Py_NewRef(dt);
    return 0;
}

/* ---- checking ---------------------------------------------------------- */

/* Compare a tuple of ints (torch.Size or stride()) against expected values;
 * returns the first mismatching index, -1 if equal, -2 on exception. */
static int
first_mismatch(PyObject *tup, const int64_t *expect, int n)
{
    for (int i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(tup, i));
        if (v == -1 && PyErr_Occurred()) {
            return -2;
        }
        if (v != expect[i]) {
            return i;
        }
    }
    return -1;
}

/* 1 pass, 0 fail, -1 exception. */
static int
check_tensor(const tc_tensor_meta *m, PyObject *v)
{
    uint64_t keys;
    if ((PyObject *)Py_TYPE(v) != m->type) {
        return 0;
    }
    if (tc_tensor_keys(v, &keys) < 0) {
        return -1;
    }
    if (keys != m->keys) {
        return 0;  /* before anything that might raise for other kinds */
    }
    PyObject *a = PyObject_GetAttr(v, str_dtype);
    if (a == NULL) {
        return -1;
    }
    int ok = (a == m->dtype);
    Py_DECREF(a);
    if (!ok) {
        return 0;
    }
    a = PyObject_GetAttr(v, str_requires_grad);
    if (a == NULL) {
        return -1;
    }
    ok = ((a == Py_True) == m->requires_grad);
    Py_DECREF(a);
    if (!ok) {
        return 0;
    }
    /* equal key sets have the same backend key: a CPU tensor's device
     * index needs no call */
    int dev = -1;
    if (m->device_index >= 0 && read_device_index(v, &dev) < 0) {
        return -1;
    }
    if (dev != m->device_index) {
        return 0;
    }
    int ndim;
    const int64_t *sizes, *strides;
    if (tc_tensor_geometry(v, &ndim, &sizes, &strides)) {
        size_t n = (size_t)m->ndim * sizeof(int64_t);
        return ndim == m->ndim && memcmp(sizes, m->sizes, n) == 0
               && memcmp(strides, m->strides, n) == 0;
    }
    a = PyObject_GetAttr(v, str_shape);
    if (a == NULL) {
        return -1;
    }
    int r = PyTuple_GET_SIZE(a) != m->ndim ? 0 : first_mismatch(a, m->sizes,
                                                                 m->ndim);
    Py_DECREF(a);
    if (r != -1) {
        return r == -2 ? -1 : 0;
    }
    a = PyObject_CallMethodNoArgs(v, str_stride);
    if (a == NULL) {
        return -1;
    }
    r = first_mismatch(a, m->strides, m->ndim);
    Py_DECREF(a);
    return r == -1 ? 1 : (r == -2 ? -1 : 0);
}

/* 1 pass, 0 fail, -1 exception. */
static int
check_one(const tc_guard *g, PyObject *v)
{
    if (g->kind == TC_GUARD_GLOBAL_STATE) {
        int on = tc_grad_enabled();
        if (on != g->grad_mode) {
            return on < 0 ? -1 : 0;
        }
        PyObject *dt = tc_default_dtype();
        if (dt != g->default_dtype) {
            return dt == NULL ? -1 : 0;
        }
        int ac = tc_autocast_enabled();
        if (ac != g->autocast) {
            return ac < 0 ? -1 : 0;
        }
        int dm = tc_dispatch_modes_active();
        if (dm != g->dispatch_modes) {
            return dm < 0 ? -1 : 0;
        }
        int fw = tc_forward_ad_active();
        return fw < 0 ? -1 : fw == g->forward_ad;
    }
    if (v == NULL) {
        return 0;
    }
    switch (g->kind) {
    case TC_GUARD_TYPE_MATCH:
        return (PyObject *)Py_TYPE(v) == g->obj;
    case TC_GUARD_ID_MATCH:
        return v == g->obj;
    case TC_GUARD_EQUALS:
        if (Py_TYPE(v) != Py_TYPE(g->obj)) {
            return 0;
        }
        return PyObject_RichCompareBool(v, g->obj, Py_EQ);
    case TC_GUARD_LENGTH:
        if ((PyObject *)Py_TYPE(v) != g->obj) {
            return 0;
        }
        return PyObject_Length(v) == g->length;
    case TC_GUARD_TENSOR_MATCH:
        return check_tensor(&g->tensor, v);
    case TC_GUARD_NO_HOOKS: {
        int hooks = tc_nn_has_hooks(v);
        return hooks < 0 ? -1 : !hooks;
    }
    case TC_GUARD_FROZEN: {
        int64_t version;
        void *ptr;
        if (v != g->obj) {
            return 0;
        }
        if (read_frozen(v, &version, &ptr) < 0) {
            return -1;
        }
        return version == g->version && ptr == g->data_ptr;
    }
    default:
        return 0;
    }
}

/* ---- the source tree -------------------------------------------------- */

int
tc_guards_share(tc_guard_set *table, tc_guard_set *gs)
{
    int n = gs->nsources;
    gs->shared = PyMem_Calloc((size_t)n + 1, sizeof(int));
    gs->plan_start = PyMem_Calloc((size_t)n + 2, sizeof(int));
    gs->plan = PyMem_Calloc((size_t)gs->nguards + 1, sizeof(int));
    if (gs->shared == NULL || gs->plan_start == NULL || gs->plan == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const tc_source *s = &gs->sources[i];
        gs->shared[i] = tc_source_add(table, s->kind,
                                      s->parent >= 0 ? gs->shared[s->parent]
                                                     : -1,
                                      s->index, s->name);
        if (gs->shared[i] < 0) {
            return -1;
        }
    }
    /* counting sort by source (-1 first); within a source the guards keep
     * the order the tracer added them in */
    int *start = gs->plan_start;
    for (int g = 0; g < gs->nguards; g++) {
        start[gs->guards[g].source + 2]++;
    }
    for (int i = 1; i <= n + 1; i++) {
        start[i] += start[i - 1];
    }
    for (int g = 0; g < gs->nguards; g++) {
        gs->plan[start[gs->guards[g].source + 1]++] = g;
    }
    for (int i = n + 1; i > 0; i--) {
        start[i] = start[i - 1];
    }
    start[0] = 0;
    return 0;
}

/* Source s's guards: 1 pass, 0 fail (*failed set), -1 exception. */
static int
check_source(const tc_guard_set *gs, int s, PyObject *v, int *failed)
{
    for (int k = gs->plan_start[s + 1]; k < gs->plan_start[s + 2]; k++) {
        int r = check_one(&gs->guards[gs->plan[k]], v);
        if (r <= 0) {
            *failed = gs->plan[k];
            return r;
        }
    }
    return 1;
}

int
tc_guards_eval(const tc_guard_set *gs, const tc_frame_view *fv,
               PyObject **vals, tc_fetched *fetched, int *failed)
{
    int r = check_source(gs, -1, NULL, failed);
    int i = 0;
    for (; r == 1 && i < gs->nsources; i++) {
        /* (a table grown by a recompile during this lookup: not shared) */
        int k = fetched && gs->shared[i] < fetched->n ? gs->shared[i] : -1;
        if (k >= 0 && fetched->have[k]) {
            vals[i] = fetched->vals[k];  /* moved: stash returns it */
            fetched->vals[k] = NULL;
            fetched->have[k] = 0;
        }
        else {
            vals[i] = fetch_one(&gs->sources[i], fv, vals);
            if (vals[i] == NULL && PyErr_Occurred()) {
                r = -1;
                break;
            }
        }
        r = check_source(gs, i, vals[i], failed);
    }
    if (r == 1) {
        return 1;
    }
    /* sources 0 .. i-1 are fetched */
    if (r < 0) {
        for (int j = 0; j < i; j++) {
            Py_CLEAR(vals[j]);
        }
        return -1;
    }
    for (int j = i; j < gs->nsources; j++) {
        vals[j] = NULL;
    }
    return 0;
}

void
tc_guards_stash(const tc_guard_set *gs, PyObject **vals, tc_fetched *fetched)
{
    for (int i = 0; i < gs->nsources; i++) {
        int k = gs->shared[i];
        if (vals[i] != NULL && k < fetched->n && !fetched->have[k]) {
            fetched->vals[k] = vals[i];
            fetched->have[k] = 1;
        }
        else {
            Py_XDECREF(vals[i]);
        }
        vals[i] = NULL;
    }
}

int
tc_fetched_init(tc_fetched *f, int n)
{
    f->n = n;
    f->vals = PyMem_Calloc((size_t)n + 1, sizeof(PyObject *));
    f->have = PyMem_Calloc((size_t)n + 1, 1);
    if (f->vals == NULL || f->have == NULL) {
        tc_fetched_release(f);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

void
tc_fetched_release(tc_fetched *f)
{
    for (int i = 0; f->vals && i < f->n; i++) {
        Py_XDECREF(f->vals[i]);
    }
    PyMem_Free(f->vals);
    PyMem_Free(f->have);
    f->vals = NULL;
    f->have = NULL;
    f->n = 0;
}

/* ---- messages ----------------------------------------------------------- */

static const char *
dtype_scalar_name(PyObject *dtype)
{
    int code = tc_dtype_from_torch(dtype);
    return code < 0 ? "?" : tc_dtype_scalar_type_name((tc_dtype)code);
}

static PyObject *
tensor_fail_reason(const tc_guard_set *gs, const tc_guard *g, PyObject *v)
{
    const tc_tensor_meta *m = &g->tensor;
    PyObject *name = tensor_name(gs, g->source), *r = NULL;
    tc_tensor_meta a;
    tc_dtype dt;
    if (name == NULL) {
        return NULL;
    }
    if ((PyObject *)Py_TYPE(v) != m->type) {
        r = PyUnicode_FromFormat("expected type of '%U' to be a tensor type "
                                 "%s, but found %s", name,
                                 ((PyTypeObject *)m->type)->tp_name,
                                 Py_TYPE(v)->tp_name);
        goto done;
    }
    uint64_t keys;
    if (tc_tensor_keys(v, &keys) < 0) {
        goto done;
    }
    if (keys != m->keys) {
        PyObject *want = tc_tensor_keys_repr(m->keys);
        PyObject *got = want ? tc_tensor_keys_repr(keys) : NULL;
        if (got != NULL) {
            r = PyUnicode_FromFormat("tensor '%U' dispatch key set mismatch. "
                                     "expected %U, actual %U", name, want,
                                     got);
        }
        Py_XDECREF(want);
        Py_XDECREF(got);
        goto done;
    }
    int rc = tc_tensor_read_meta(v, &a, &dt);
    if (rc < 0) {
        goto done;
    }
    if (rc > 0) {
        PyObject *why = tc_tensor_unsupported_reason(v);
        r = why ? PyUnicode_FromFormat("tensor '%U' is %U", name, why) : NULL;
        Py_XDECREF(why);
    }
    else if (a.dtype != m->dtype) {
        r = PyUnicode_FromFormat("tensor '%U' dtype mismatch. expected %s, "
                                 "actual %s", name, dtype_scalar_name(m->dtype),
                                 dtype_scalar_name(a.dtype));
    }
    else if (a.device_index != m->device_index) {
        r = PyUnicode_FromFormat("tensor '%U' device mismatch. expected %d, "
                                 "actual %d", name, m->device_index,
                                 a.device_index);
    }
    else if (a.requires_grad != m->requires_grad) {
        r = PyUnicode_FromFormat("tensor '%U' requires_grad mismatch. "
                                 "expected requires_grad=%d", name,
                                 m->requires_grad);
    }
    else if (a.ndim != m->ndim) {
        r = PyUnicode_FromFormat("tensor '%U' rank mismatch. expected %d, "
                                 "actual %d", name, m->ndim, a.ndim);
    }
    else {
        for (int i = 0; i < m->ndim && r == NULL; i++) {
            if (a.sizes[i] != m->sizes[i]) {
                r = PyUnicode_FromFormat(
                    "tensor '%U' size mismatch at index %d. expected %lld, "
                    "actual %lld", name, i, (long long)m->sizes[i],
                    (long long)a.sizes[i]);
            }
        }
        for (int i = 0; i < m->ndim && r == NULL; i++) {
            if (a.strides[i] != m->strides[i]) {
                r = PyUnicode_FromFormat(
                    "tensor '%U' stride mismatch at index %d. expected %lld, "
                    "actual %lld", name, i, (long long)m->strides[i],
                    (long long)a.strides[i]);
            }
        }
    }
done:
    Py_DECREF(name);
    return r;
}

/* The guard written as code, like Dynamo's guard source lines. */
static PyObject *
guard_code(const tc_guard_set *gs, const tc_guard *g)
{
    if (g->kind == TC_GUARD_GLOBAL_STATE) {
        return PyUnicode_FromFormat("GLOBAL_STATE: grad_mode=%s, "
                                    "default_dtype=%R, autocast=%s",
                                    g->grad_mode ? "True" : "False",
                                    g->default_dtype,
                                    g->autocast ? "True" : "False");
    }
    PyObject *src = tc_source_repr(gs, g->source), *r = NULL;
    if (src == NULL) {
        return NULL;
    }
    switch (g->kind) {
    case TC_GUARD_TYPE_MATCH:
        r = PyUnicode_FromFormat("type(%U) is %s", src,
                                 ((PyTypeObject *)g->obj)->tp_name);
        break;
    case TC_GUARD_ID_MATCH:
        /* a function's globals, a tensor (an optimizer's parameter, a
         * state key): the address, not the contents */
        r = PyDict_Check(g->obj) || tc_tensor_type_plain(g->obj)
            ? PyUnicode_FromFormat("%U is <%s at %p>", src,
                                   Py_TYPE(g->obj)->tp_name, g->obj)
            : PyUnicode_FromFormat("%U is %R", src, g->obj);
        break;
    case TC_GUARD_EQUALS:
        r = PyUnicode_FromFormat("%U == %R", src, g->obj);
        break;
    case TC_GUARD_LENGTH:
        r = PyUnicode_FromFormat("len(%U) == %zd", src, g->length);
        break;
    case TC_GUARD_NO_HOOKS:
        r = PyUnicode_FromFormat("%U has no forward/backward hooks (nor "
                                 "global ones)", src);
        break;
    case TC_GUARD_FROZEN:
        r = PyUnicode_FromFormat("FROZEN %U: is <%s at %p>, _version == %lld, "
                                 "data_ptr() == %p (folded at compile time)",
                                 src, Py_TYPE(g->obj)->tp_name, g->obj,
                                 (long long)g->version, g->data_ptr);
        break;
    case TC_GUARD_TENSOR_MATCH: {
        const tc_tensor_meta *m = &g->tensor;
        r = PyUnicode_FromFormat("TENSOR_MATCH %U: %s, %s, requires_grad=%d, "
                                 "size=[", src, dtype_scalar_name(m->dtype),
                                 m->device_index < 0 ? "cpu" : "cuda",
                                 m->requires_grad);
        for (int i = 0; r && i < m->ndim; i++) {
            PyObject *t = PyUnicode_FromFormat("%U%s%lld", r, i ? ", " : "",
                                               (long long)m->sizes[i]);
            Py_SETREF(r, t);
        }
        for (int i = 0; r && i <= m->ndim; i++) {
            PyObject *t = i == 0
                ? PyUnicode_FromFormat("%U], stride=[", r)
                : PyUnicode_FromFormat("%U%s%lld", r, i > 1 ? ", " : "",
                                       (long long)m->strides[i - 1]);
            Py_SETREF(r, t);
        }
        if (r) {
            Py_SETREF(r, PyUnicode_FromFormat("%U]", r));
        }
        break;
    }
    default:
        break;
    }
    Py_DECREF(src);
    return r;
}

PyObject *
tc_guard_fail_reason(const tc_guard_set *gs, int i, PyObject *const *vals)
{
    const tc_guard *g = &gs->guards[i];
    if (g->kind == TC_GUARD_GLOBAL_STATE) {
        int on = tc_grad_enabled();
        if (on < 0) {
            return NULL;
        }
        if (on != g->grad_mode) {
            return PyUnicode_FromFormat("GLOBAL_STATE changed: grad_mode "
                                        "(expected %s)",
                                        g->grad_mode ? "True" : "False");
        }
        PyObject *dt = tc_default_dtype();
        if (dt == NULL) {
            return NULL;
        }
        int ac = dt == g->default_dtype ? tc_autocast_enabled() : 0;
        if (ac < 0) {
            return NULL;
        }
        if (dt == g->default_dtype && ac != g->autocast) {
            return PyUnicode_FromFormat("GLOBAL_STATE changed: autocast "
                                        "(expected %s)",
                                        g->autocast ? "True" : "False");
        }
        int dm = dt == g->default_dtype ? tc_dispatch_modes_active() : 0;
        if (dm < 0) {
            return NULL;
        }
        if (dt == g->default_dtype && dm != g->dispatch_modes) {
            return PyUnicode_FromFormat("GLOBAL_STATE changed: torch "
                                        "dispatch modes (expected %s)",
                                        g->dispatch_modes ? "some" : "none");
        }
        if (dt == g->default_dtype) {
            return PyUnicode_FromFormat("GLOBAL_STATE changed: forward-AD "
                                        "dual_level (expected %s)",
                                        g->forward_ad ? "active" : "none");
        }
        return PyUnicode_FromFormat("GLOBAL_STATE changed: default_dtype "
                                    "(expected %R)", g->default_dtype);
    }
    PyObject *v = vals[g->source];
    if (v == NULL) {
        PyObject *src = tc_source_repr(gs, g->source);
        PyObject *r = src ? PyUnicode_FromFormat("%U is not defined", src)
                          : NULL;
        Py_XDECREF(src);
        return r;
    }
    if (g->kind == TC_GUARD_TENSOR_MATCH) {
        return tensor_fail_reason(gs, g, v);
    }
    if (g->kind == TC_GUARD_FROZEN) {
        PyObject *src = tc_source_repr(gs, g->source);
        PyObject *r = src ? PyUnicode_FromFormat(
            "frozen tensor %U changed since it was folded into the compiled "
            "code (%s; tcjit.config.freezing)", src,
            v != g->obj ? "another tensor object" : "written in place or "
            "given new data") : NULL;
        Py_XDECREF(src);
        return r;
    }
    return guard_code(gs, g);
}

int
tc_guard_size_failure(const tc_guard_set *gs, int i, PyObject *const *vals,
                      PyObject **tensor, int *dim)
{
    const tc_guard *g = &gs->guards[i];
    if (g->kind != TC_GUARD_TENSOR_MATCH || vals[g->source] == NULL) {
        return 0;
    }
    PyObject *v = vals[g->source];
    const tc_tensor_meta *m = &g->tensor;
    tc_tensor_meta a;
    tc_dtype dt;
    uint64_t keys;
    if ((PyObject *)Py_TYPE(v) != m->type || tc_tensor_keys(v, &keys) < 0
        || keys != m->keys || tc_tensor_read_meta(v, &a, &dt) != 0) {
        PyErr_Clear();
        return 0;
    }
    if (a.dtype != m->dtype || a.device_index != m->device_index
        || a.requires_grad != m->requires_grad || a.ndim != m->ndim) {
        return 0;
    }
    *tensor = v;
    *dim = -1;
    for (int d = 0; d < a.ndim; d++) {
        if (a.sizes[d] != m->sizes[d]) {
            *dim = d;
            break;
        }
    }
    return 1;
}

PyObject *
tc_guards_format(const tc_guard_set *gs)
{
    PyObject *lines = PyList_New(0);
    if (lines == NULL) {
        return NULL;
    }
    for (int i = 0; i < gs->nguards; i++) {
        PyObject *line = guard_code(gs, &gs->guards[i]);
        if (line == NULL || PyList_Append(lines, line) < 0) {
            Py_XDECREF(line);
            Py_DECREF(lines);
            return NULL;
        }
        Py_DECREF(line);
    }
    return lines;
}
