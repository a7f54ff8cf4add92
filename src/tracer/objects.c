/* objects.c - Python objects the traced code makes, and super().
 *
 * `Cls(...)` of a plain user class (object, dict or OrderedDict based: a
 * dataclass, a transformers ModelOutput, a cache object) is traced as
 * Python runs it: a new object, then Cls.__init__ inlined on it.  The
 * object is a DEFERRED var (TC_TMPL_CALL of new_object below): its
 * instance attributes and, for a dict subclass, its items are vars,
 * changed in place by STORE_ATTR, object.__setattr__ and the base's
 * __setitem__, and read back by LOAD_ATTR.  If it escapes the segment
 * (returned, left in a local at a break), the exit makes it with
 * cls.__new__ and writes its state as it was traced.
 *
 * super() (zero-argument, or super(C, self)) is a DEFERRED var too
 * (TC_TMPL_CALL of super): its attributes resolve along type(self)'s MRO
 * after C; Python methods are inlined on self, object's and dict's slots
 * act on an object made here.
 */
#include "tracer_internal.h"

#include "../guards/nn_module.h"

/* ---- the object and its state ---------------------------------------------- */

/* The exit's constructor: spec = (cls, attribute names, dict keys),
 * args = attribute values then item values. */
static PyObject *
new_object(PyObject *spec, PyObject *const *args, Py_ssize_t nargs)
{
    PyTypeObject *cls = (PyTypeObject *)PyTuple_GET_ITEM(spec, 0);
    PyObject *names = PyTuple_GET_ITEM(spec, 1);
    PyObject *keys = PyTuple_GET_ITEM(spec, 2);
    Py_ssize_t na = PyTuple_GET_SIZE(names), nk = PyTuple_GET_SIZE(keys);
    if (nargs != na + nk) {
        PyErr_SetString(PyExc_SystemError, "tcjit: malformed object");
        return NULL;
    }
    PyObject *empty = PyTuple_New(0);
    PyObject *obj = empty ? cls->tp_new(cls, empty, NULL) : NULL;
    Py_XDECREF(empty);
    if (obj == NULL) {
        return NULL;
    }
    /* items through the builtin base's own __setitem__ (OrderedDict keeps
     * its order list), not the class's override */
    if (nk > 0) {
        PyTypeObject *base = cls;
        while (base->tp_flags & Py_TPFLAGS_HEAPTYPE) {
            base = base->tp_base;
        }
        for (Py_ssize_t i = 0; i < nk; i++) {
            int r = base->tp_as_mapping && base->tp_as_mapping->mp_ass_subscript
                ? base->tp_as_mapping->mp_ass_subscript(
                      obj, PyTuple_GET_ITEM(keys, i), args[na + i])
                : -1;
            if (r < 0) {
                if (!PyErr_Occurred()) {
                    PyErr_SetString(PyExc_SystemError,
                                    "tcjit: object without items");
                }
                Py_DECREF(obj);
                return NULL;
            }
        }
    }
    PyObject *dict = na > 0 ? PyObject_GenericGetDict(obj, NULL) : NULL;
    for (Py_ssize_t i = 0; i < na; i++) {
        if (dict == NULL
            || PyDict_SetItem(dict, PyTuple_GET_ITEM(names, i), args[i]) < 0) {
            Py_XDECREF(dict);
            Py_DECREF(obj);
            return NULL;
        }
    }
    Py_XDECREF(dict);
    return obj;
}

static PyMethodDef new_object_def = {
    "new_object", (PyCFunction)(void (*)(void))new_object, METH_FASTCALL,
    NULL};

int
tc_tr_is_new_object(const tc_var *v)
{
    return v != NULL && v->kind == TC_VAR_DEFERRED && v->node == TC_TMPL_CALL
           && v->obj != NULL && PyCFunction_Check(v->obj)
           && ((PyCFunctionObject *)v->obj)->m_ml == &new_object_def;
}

int
tc_tr_is_super(const tc_var *v)
{
    return v != NULL && v->kind == TC_VAR_DEFERRED && v->node == TC_TMPL_CALL
           && v->obj == (PyObject *)&PySuper_Type && v->nitems == 2;
}

static PyObject *
spec_of(const tc_var *o)
{
    return PyCFunction_GET_SELF(o->obj);
}

static PyTypeObject *
class_of(const tc_var *o)
{
    return (PyTypeObject *)PyTuple_GET_ITEM(spec_of(o), 0);
}

PyTypeObject *
tc_tr_new_object_class(const tc_var *v)
{
    return tc_tr_is_new_object(v) ? class_of(v) : NULL;
}

/* where: 1 attributes, 2 items.  The index of name among them, or -1. */
static int
state_index(const tc_var *o, int where, PyObject *name, int *base)
{
    PyObject *names = PyTuple_GET_ITEM(spec_of(o), where);
    int n = (int)PyTuple_GET_SIZE(names);
    *base = where == 1 ? 0 : (int)PyTuple_GET_SIZE(PyTuple_GET_ITEM(spec_of(o),
                                                                    1));
    for (int i = 0; i < n; i++) {
        PyObject *k = PyTuple_GET_ITEM(names, i);
        int eq = k == name ? 1 : PyObject_RichCompareBool(k, name, Py_EQ);
        if (eq < 0) {
            PyErr_Clear();
            return -1;
        }
        if (eq) {
            return i;
        }
    }
    return -1;
}

static tc_var *
state_get(const tc_var *o, int where, PyObject *name)
{
    int base, i = state_index(o, where, name, &base);
    return i < 0 ? NULL : o->items[base + i];
}

/* What an inlined call changes in an object it did not make is logged
 * first, so a call that fails (and runs in Python instead) leaves the
 * object as it was. */
struct tc_undo {
    tc_var *target;
    PyObject *obj;         /* owned */
    tc_var **items;        /* owned copy */
    int nitems;
};

int
tc_tr_log_state(tracer *T, tc_var *o)
{
    trace_shared *sh = T->sh;
    if (T->depth == 0 || o->index >= T->serial) {
        return OK;   /* made by this call: dropped with it */
    }
    if (sh->nundo == sh->undo_cap) {
        int cap = sh->undo_cap ? 2 * sh->undo_cap : 16;
        struct tc_undo *u = PyMem_Realloc(sh->undo, cap * sizeof(*u));
        if (u == NULL) {
            PyErr_NoMemory();
            return ERROR;
        }
        sh->undo = u;
        sh->undo_cap = cap;
    }
    struct tc_undo *u = &sh->undo[sh->nundo];
    u->items = PyMem_Malloc((o->nitems + 1) * sizeof(tc_var *));
    if (u->items == NULL) {
        PyErr_NoMemory();
        return ERROR;
    }
    memcpy(u->items, o->items, o->nitems * sizeof(tc_var *));
    u->nitems = o->nitems;
    u->obj = Py_XNewRef(o->obj);   /* (NULL: a list's) */
    u->target = o;
    sh->nundo++;
    return OK;
}

void
tc_tr_undo_to(trace_shared *sh, int mark)
{
    /* mark < 0: keep the changes after record -mark - 1, free the log;
     * TC_UNDO_FINI: the trace is over */
    int fini = mark == TC_UNDO_FINI;
    int keep = mark < 0 && !fini;
    int to = fini ? 0 : keep ? -mark - 1 : mark;
    while (sh->nundo > to) {
        struct tc_undo *u = &sh->undo[--sh->nundo];
        if (!keep) {
            /* the arena frees the state the failed call left through a
             * var of its own */
            tc_var *t = u->target;
            Py_XSETREF(t->obj, u->obj);
            tc_var **cur = t->items;
            t->items = u->items;
            t->nitems = u->nitems;
            PyMem_Free(cur);
        }
        else {
            Py_XDECREF(u->obj);
            PyMem_Free(u->items);
        }
    }
    if (to == 0) {
        PyMem_Free(sh->undo);
        sh->undo = NULL;
        sh->undo_cap = 0;
    }
    if (fini) {
        PyMem_Free(sh->fx);
        sh->fx = NULL;
        sh->nfx = sh->fx_cap = 0;
    }
}

/* Whether the trace may change o in place: an object this trace made
 * (one read from the frame is Python's). */
static int
may_mutate(tracer *T, const tc_var *o)
{
    (void)T;
    return o->source < 0;
}

/* o.<name> = value (where 1) or o[name] = value (where 2), in place: every
 * alias of o sees it. */
static int
state_set(tracer *T, tc_var *o, int where, PyObject *name, tc_var *value)
{
    if (tc_tr_holds_inlined_cell(value, 0)) {
        return tc_tr_unsupported(T, "storing a closure over the variables of "
                                 "an inlined call in an object");
    }
    if (!may_mutate(T, o)) {
        return tc_tr_unsupported(T, "setting %R on a %s made outside the "
                                 "traced call", name,
                                 class_of(o)->tp_name);
    }
    if (tc_tr_log_state(T, o) != OK) {
        return ERROR;
    }
    int base, i = state_index(o, where, name, &base);
    if (i >= 0) {
        o->items[base + i] = value;
        return OK;
    }
    PyObject *spec = spec_of(o);
    PyObject *names = PyTuple_GET_ITEM(spec, 1), *keys = PyTuple_GET_ITEM(spec,
                                                                          2);
    Py_ssize_t na = PyTuple_GET_SIZE(names), nk = PyTuple_GET_SIZE(keys);
    if (na + nk + 1 > 4 * TC_MAX_CALL_ARGS) {
        return tc_tr_unsupported(T, "an object with more than %d attributes",
                                 4 * TC_MAX_CALL_ARGS);
    }
    tc_var *items[4 * TC_MAX_CALL_ARGS];
    memcpy(items, o->items, (na + nk) * sizeof(tc_var *));
    int at = where == 1 ? (int)na : (int)(na + nk);
    memmove(items + at + 1, items + at, (na + nk - at) * sizeof(tc_var *));
    items[at] = value;
    PyObject *one = PyTuple_Pack(1, name);
    PyObject *grown = one ? PySequence_Concat(where == 1 ? names : keys, one)
                          : NULL;
    Py_XDECREF(one);
    PyObject *nspec = grown == NULL ? NULL
        : PyTuple_Pack(3, PyTuple_GET_ITEM(spec, 0),
                       where == 1 ? grown : names, where == 1 ? keys : grown);
    Py_XDECREF(grown);
    PyObject *fn = nspec ? PyCFunction_New(&new_object_def, nspec) : NULL;
    Py_XDECREF(nspec);
    tc_var *n = fn ? tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED,
                                (int)(na + nk + 1), items) : NULL;
    if (n == NULL) {
        Py_XDECREF(fn);
        return ERROR;
    }
    /* o takes n's contents; the arena frees o's old ones through n */
    PyObject *old_obj = o->obj;
    tc_var **old_items = o->items;
    int old_n = o->nitems;
    o->obj = fn;
    o->items = n->items;
    o->nitems = n->nitems;
    n->obj = old_obj;
    n->items = old_items;
    n->nitems = old_n;
    return OK;
}

int
tc_tr_new_object_del_attr(tracer *T, tc_var *o, PyObject *name)
{
    PyTypeObject *tp = class_of(o);
    PyObject *descr = _PyType_Lookup(tp, name);
    if (descr != NULL && Py_TYPE(descr)->tp_descr_set != NULL) {
        return tc_tr_unsupported(T, "deleting %R of a %s (a descriptor)",
                                 name, tp->tp_name);
    }
    if (!may_mutate(T, o)) {
        return tc_tr_unsupported(T, "deleting %R of a %s made outside the "
                                 "traced call", name, tp->tp_name);
    }
    int base, at = state_index(o, 1, name, &base);
    if (at < 0) {
        return tc_tr_raise(T, PyObject_CallFunction(
            PyExc_AttributeError, "O", name));
    }
    if (tc_tr_log_state(T, o) != OK) {
        return ERROR;
    }
    PyObject *spec = spec_of(o), *names = PyTuple_GET_ITEM(spec, 1);
    Py_ssize_t na = PyTuple_GET_SIZE(names);
    PyObject *head = PyTuple_GetSlice(names, 0, at);
    PyObject *tail = head ? PyTuple_GetSlice(names, at + 1, na) : NULL;
    PyObject *kept = tail ? PySequence_Concat(head, tail) : NULL;
    Py_XDECREF(head);
    Py_XDECREF(tail);
    PyObject *nspec = kept ? PyTuple_Pack(3, PyTuple_GET_ITEM(spec, 0), kept,
                                          PyTuple_GET_ITEM(spec, 2))
                           : NULL;
    Py_XDECREF(kept);
    PyObject *fn = nspec ? PyCFunction_New(&new_object_def, nspec) : NULL;
    Py_XDECREF(nspec);
    if (fn == NULL) {
        return ERROR;
    }
    /* o keeps its items array: the logged copy is the undo's */
    memmove(o->items + at, o->items + at + 1,
            (o->nitems - at - 1) * sizeof(tc_var *));
    o->nitems--;
    Py_SETREF(o->obj, fn);
    return OK;
}

static tc_var *
make_object(tracer *T, PyTypeObject *cls)
{
    PyObject *e = PyTuple_New(0);
    PyObject *spec = e ? PyTuple_Pack(3, (PyObject *)cls, e, e) : NULL;
    Py_XDECREF(e);
    PyObject *fn = spec ? PyCFunction_New(&new_object_def, spec) : NULL;
    Py_XDECREF(spec);
    tc_var *o = fn ? tc_var_new(&T->sh->arena, TC_VAR_DEFERRED, -1) : NULL;
    if (o == NULL) {
        Py_XDECREF(fn);
        return NULL;
    }
    o->node = TC_TMPL_CALL;
    o->obj = fn;
    o->items = PyMem_Malloc(sizeof(tc_var *));
    o->nitems = 0;
    if (o->items == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    return o;
}

tc_var *
tc_tr_new_object_of(tracer *T, PyTypeObject *cls, PyObject *names,
                    tc_var **values)
{
    PyObject *e = PyTuple_New(0);
    PyObject *spec = e ? PyTuple_Pack(3, (PyObject *)cls, names, e) : NULL;
    Py_XDECREF(e);
    PyObject *fn = spec ? PyCFunction_New(&new_object_def, spec) : NULL;
    Py_XDECREF(spec);
    int n = (int)PyTuple_GET_SIZE(names);
    tc_var *o = fn ? tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED, n, values)
                   : NULL;
    if (o == NULL) {
        Py_XDECREF(fn);
        return NULL;
    }
    o->node = TC_TMPL_CALL;
    o->obj = fn;
    o->index = T->serial;
    return o;
}

tc_var *
tc_tr_new_object_state_dict(tracer *T, const tc_var *o)
{
    PyObject *names = PyTuple_GET_ITEM(spec_of(o), 1);
    tc_var *d = tc_var_seq(&T->sh->arena, TC_VAR_DICT,
                           (int)PyTuple_GET_SIZE(names), o->items);
    if (d != NULL) {
        d->obj = Py_NewRef(names);
        d->index = -1;
    }
    return d;
}

tc_var *
tc_tr_class_var(tracer *T, PyTypeObject *tp)
{
    int src = tc_source_add(T->out->guards, TC_SRC_CONST, -1, 0,
                            (PyObject *)tp);
    tc_var *c = src < 0 ? NULL : tc_var_new(&T->sh->arena, TC_VAR_UNKNOWN,
                                            src);
    if (c != NULL) {
        c->obj = Py_NewRef((PyObject *)tp);
    }
    return c;
}

/* The lists and objects a callee made and returns become the caller's. */
void
tc_tr_adopt_object(tc_var *v, int from, int to)
{
    if (tc_tr_is_new_object(v) && v->index >= from) {
        v->index = to;
    }
}

/* ---- making one: Cls(...) ------------------------------------------------ */

static PyObject *
str_of(const char *s)
{
    return PyUnicode_InternFromString(s);
}

/* The builtin base whose layout instances of cls have: object, dict or
 * OrderedDict (the ones new_object can fill), else NULL. */
static PyTypeObject *
solid_base(PyTypeObject *cls)
{
    PyTypeObject *base = cls;
    while (base != NULL && (base->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        base = base->tp_base;
    }
    if (base == &PyBaseObject_Type || base == &PyDict_Type) {
        return base;
    }
    return base != NULL && strcmp(base->tp_name, "collections.OrderedDict")
                           == 0 ? base : NULL;
}

/* A var for a function found on a (pinned) class. */
static tc_var *
class_function(tracer *T, PyObject *fn)
{
    tc_var *v = tc_var_new(&T->sh->arena, TC_VAR_OBJECT, -1);
    if (v != NULL) {
        v->obj = Py_NewRef(fn);
    }
    return v;
}

/* Inline fn(self, *args) (kwnames: the last ones' names). */
static int
inline_on(tracer *T, PyObject *fn, tc_var *self, tc_var **args, int nargs,
          PyObject *kwnames)
{
    tc_var *all[TC_MAX_CALL_ARGS];
    if (nargs + 1 > TC_MAX_CALL_ARGS) {
        return tc_tr_unsupported(T, "call with %d arguments", nargs);
    }
    tc_var *f = class_function(T, fn);
    if (f == NULL) {
        return ERROR;
    }
    all[0] = self;
    memcpy(all + 1, args, nargs * sizeof(tc_var *));
    return tc_tr_inline_call(T, f, all, nargs + 1, kwnames);
}

/* A torch.nn.Module class: its instances are made by Python. */
static int
is_module_class(PyObject *c)
{
    static PyObject *module_type;
    if (module_type == NULL) {
        PyObject *nn = PyObject_GetAttrString(tc_torch_module, "nn");
        module_type = nn ? PyObject_GetAttrString(nn, "Module") : NULL;
        Py_XDECREF(nn);
        if (module_type == NULL) {
            PyErr_Clear();
            return 1;
        }
    }
    return PyType_IsSubtype((PyTypeObject *)c, (PyTypeObject *)module_type);
}

int
tc_tr_call_class(tracer *T, tc_var *callable, tc_var **args, int nargs,
                 PyObject *kwnames)
{
    PyObject *c = callable->obj;
    if (c == NULL || !PyType_Check(c)
        || !(((PyTypeObject *)c)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        return NOT_HANDLED;
    }
    PyTypeObject *cls = (PyTypeObject *)c;
    PyTypeObject *base = solid_base(cls);
    if (Py_TYPE(cls)->tp_call != PyType_Type.tp_call || base == NULL
        || cls->tp_new != base->tp_new || cls->tp_dictoffset == 0
        || is_module_class(c)) {
        /* a metaclass __call__ (enums), a __new__ of its own, __slots__,
         * a module: Python makes it */
        return NOT_HANDLED;
    }
    static PyObject *str_init;
    if (str_init == NULL && (str_init = str_of("__init__")) == NULL) {
        return ERROR;
    }
    PyObject *init = _PyType_Lookup(cls, str_init);
    int plain_init = init == NULL
        || init == _PyType_Lookup(base, str_init);
    if (!plain_init && !PyFunction_Check(init)) {
        return NOT_HANDLED;
    }
    if (callable->kind == TC_VAR_UNKNOWN && callable->source >= 0
        && tc_guard_id(T->out->guards, callable->source, c) < 0) {
        return ERROR;
    }
    tc_var *o = make_object(T, cls);
    if (o == NULL) {
        return ERROR;
    }
    /* owned by the __init__ call about to be traced (its serial is the
     * next one), then by this code */
    o->index = T->sh->ntracers + 1;
    int rc;
    if (plain_init) {
        int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
        if (nargs > nkw || (nkw > 0 && base == &PyBaseObject_Type)) {
            return tc_tr_unsupported(T, "%s() with arguments for %s.__init__",
                                     cls->tp_name, base->tp_name);
        }
        o->index = T->serial;
        for (int i = 0; i < nkw; i++) {
            rc = state_set(T, o, 2, PyTuple_GET_ITEM(kwnames, i), args[i]);
            if (rc != OK) {
                return rc;
            }
        }
        return tc_tr_push(T, o);
    }
    rc = inline_on(T, init, o, args, nargs, kwnames);
    if (rc != OK) {
        return rc;
    }
    tc_var *r = tc_tr_pop(T);
    if (r == NULL || r->kind != TC_VAR_CONST || r->obj != Py_None) {
        return tc_tr_unsupported(T, "%s.__init__ returned a value",
                                 cls->tp_name);
    }
    o->index = T->serial;
    return tc_tr_push(T, o);
}

/* ---- attributes ------------------------------------------------------------ */

/* name on the class (the MRO from `start`, or all of it), as Python's
 * attribute lookup finds it: a function becomes a method of self, a
 * property runs its getter, a class value is read through the class. */
static int
class_attr(tracer *T, PyTypeObject *tp, PyTypeObject *start, tc_var *self,
           PyObject *name, int method, PyObject *descr)
{
    (void)tp;
    (void)start;
    if (PyFunction_Check(descr)) {
        if (!method) {
            /* obj.update passed on (f(*args, **kw) of it): a method var,
             * called through tc_tr_call_new_object_method */
            return tc_tr_push_method_var(T, self, name);
        }
        tc_var *f = class_function(T, descr);
        return f == NULL || tc_tr_push(T, f) < 0 ? ERROR : tc_tr_push(T, self);
    }
    if (Py_IS_TYPE(descr, &PyProperty_Type)) {
        PyObject *fget = PyObject_GetAttrString(descr, "fget");
        int rc = fget && PyFunction_Check(fget)
            ? inline_on(T, fget, self, NULL, 0, NULL)
            : tc_tr_unsupported(T, "property %U without a Python getter",
                                name);
        Py_XDECREF(fget);
        if (rc == OK && method) {
            tc_var *v = tc_tr_pop(T);
            rc = tc_tr_push_loaded_attr(T, v, 1);
        }
        return rc;
    }
    if (Py_IS_TYPE(descr, &PyClassMethod_Type)
        || Py_IS_TYPE(descr, &PyStaticMethod_Type)) {
        PyObject *fn = PyObject_GetAttrString(descr, "__func__");
        int cm = Py_IS_TYPE(descr, &PyClassMethod_Type);
        tc_var *f = fn && PyFunction_Check(fn) ? class_function(T, fn) : NULL;
        Py_XDECREF(fn);
        if (f == NULL) {
            return PyErr_Occurred() ? ERROR
                 : tc_tr_unsupported(T, "%U of a %s", name,
                                     tc_var_kind_name(self));
        }
        if (!cm) {
            return tc_tr_push_loaded_attr(T, f, method);
        }
        tc_var *c = class_function(T, (PyObject *)tp);
        if (c == NULL || !method) {
            return c == NULL ? ERROR
                 : tc_tr_unsupported(T, "a classmethod %U as a value", name);
        }
        return tc_tr_push(T, f) < 0 ? ERROR : tc_tr_push(T, c);
    }
    if (Py_IS_TYPE(descr, &PyWrapperDescr_Type)
        || Py_IS_TYPE(descr, &PyMethodDescr_Type)) {
        /* object.__setattr__, dict.__setitem__, OrderedDict.keys: the
         * descriptor called with self first (tc_tr_call_slot) */
        tc_var *f = class_function(T, descr);
        if (!method) {
            return tc_tr_unsupported(T, "a slot %U as a value", name);
        }
        return f == NULL || tc_tr_push(T, f) < 0 ? ERROR : tc_tr_push(T, self);
    }
    if (Py_TYPE(descr)->tp_descr_get != NULL) {
        return tc_tr_unsupported(T, "attribute %U of a %s (a descriptor)",
                                 name, tc_var_kind_name(self));
    }
    /* a class constant: read now, through the class (a source of its own:
     * class attributes can be assigned) */
    int csrc = tc_source_add(T->out->guards, TC_SRC_CONST, -1, 0,
                             (PyObject *)tp);
    PyObject *value = PyObject_GetAttr((PyObject *)tp, name);
    if (csrc < 0 || value == NULL) {
        Py_XDECREF(value);
        return csrc < 0 ? ERROR
                        : tc_tr_unsupported_from_exception(T, "class attribute");
    }
    return tc_tr_push_attr(T, csrc, name, value, method, "class attribute");
}

/* LOAD_ATTR of an object made here, or of super(). */
static int python_getattribute(tracer *T, tc_var *o, PyObject *name,
                               int method);
static int generic_attr(tracer *T, tc_var *o, PyObject *name, int method);

int
tc_tr_new_object_attr(tracer *T, tc_var *o, PyObject *name, int method)
{
    if (tc_tr_is_super(o)) {
        tc_var *c = o->items[0], *self = o->items[1];
        PyTypeObject *tp = tc_tr_is_new_object(self) ? class_of(self)
            : self->kind == TC_VAR_NN_MODULE || self->kind == TC_VAR_UNKNOWN
              ? Py_TYPE(self->obj) : NULL;
        if (tp == NULL || c->obj == NULL || !PyType_Check(c->obj)) {
            return tc_tr_unsupported(T, "super() of a %s",
                                     tc_var_kind_name(self));
        }
        if (self->kind == TC_VAR_UNKNOWN && self->source >= 0
            && tc_guard_type(T->out->guards, self->source, self->obj) < 0) {
            return ERROR;
        }
        PyObject *mro = tp->tp_mro;
        Py_ssize_t n = PyTuple_GET_SIZE(mro), i = 0;
        while (i < n && PyTuple_GET_ITEM(mro, i) != c->obj) {
            i++;
        }
        for (i++; i < n; i++) {
            PyObject *d = pyframe_type_dict(
                (PyTypeObject *)PyTuple_GET_ITEM(mro, i));
            PyObject *descr = d ? Py_XNewRef(PyDict_GetItemWithError(d, name))
                                : NULL;
            Py_XDECREF(d);
            if (descr != NULL) {
                int rc = class_attr(T, tp, (PyTypeObject *)PyTuple_GET_ITEM(
                                        mro, i), self, name, method, descr);
                Py_DECREF(descr);
                return rc;
            }
            if (PyErr_Occurred()) {
                return ERROR;
            }
        }
        return tc_tr_unsupported(T, "super() has no attribute %R", name);
    }
    PyTypeObject *tp = class_of(o);
    if (tp->tp_getattro != PyObject_GenericGetAttr) {
        return python_getattribute(T, o, name, method);
    }
    return generic_attr(T, o, name, method);
}

/* o.name of a new object whose class has a Python __getattribute__ (and
 * no __getattr__): inlined, as Python calls it (transformers'
 * PreTrainedConfig maps names through attribute_map so). */
static int
python_getattribute(tracer *T, tc_var *o, PyObject *name, int method)
{
    PyTypeObject *tp = class_of(o);
    static PyObject *str_ga, *str_getattr;
    if ((str_ga == NULL && (str_ga = str_of("__getattribute__")) == NULL)
        || (str_getattr == NULL
            && (str_getattr = str_of("__getattr__")) == NULL)) {
        return ERROR;
    }
    PyObject *ga = _PyType_Lookup(tp, str_ga);
    if (ga == NULL || !PyFunction_Check(ga)
        || _PyType_Lookup(tp, str_getattr) != NULL) {
        return tc_tr_unsupported(T, "attribute of a %s (its own "
                                 "__getattr__)", tp->tp_name);
    }
    tc_var *key = tc_tr_const_var(T, name);
    int rc = key ? inline_on(T, ga, o, &key, 1, NULL) : ERROR;
    tc_var *v = rc == OK ? tc_tr_pop(T) : NULL;
    return v ? tc_tr_push_loaded_attr(T, v, method) : rc;
}

/* object.__getattribute__(o, name) of a new object o. */
static int
generic_attr(tracer *T, tc_var *o, PyObject *name, int method)
{
    PyTypeObject *tp = class_of(o);
    PyObject *descr = _PyType_Lookup(tp, name);
    if (PyUnicode_CompareWithASCIIString(name, "__dict__") == 0) {
        /* self.__dict__.get(name): its attributes as a read-only dict */
        tc_var *d = tc_tr_new_object_state_dict(T, o);
        return d ? tc_tr_push_loaded_attr(T, d, method) : ERROR;
    }
    if (PyUnicode_CompareWithASCIIString(name, "__class__") == 0) {
        tc_var *c = tc_tr_class_var(T, tp);
        return c == NULL ? ERROR : tc_tr_push_loaded_attr(T, c, method);
    }
    int data = descr != NULL && Py_TYPE(descr)->tp_descr_set != NULL;
    tc_var *v = data ? NULL : state_get(o, 1, name);
    if (v != NULL) {
        return tc_tr_push_loaded_attr(T, v, method);
    }
    if (descr != NULL) {
        return class_attr(T, tp, tp, o, name, method, descr);
    }
    return tc_tr_raise(T, PyObject_CallFunction(
        PyExc_AttributeError, "N", PyUnicode_FromFormat(
            "'%s' object has no attribute '%U'", tp->tp_name, name)));
}

/* ---- attributes set on objects read from the frame ------------------------
 *
 * owner.name = value on an object that existed before the segment (a
 * library's context-variable holder, a config): recorded, read back by
 * later loads of the same attribute, and made when the segment exits,
 * before anything else Python runs (the exit's first value is built
 * through apply_effects, which sets them). */

struct tc_effect {
    tc_var *owner;
    PyObject *name;      /* borrowed: a code object's co_names */
    tc_var *value;
};

static PyObject *
apply_effects(PyObject *names, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    if (nargs != 1 + 2 * n) {
        PyErr_SetString(PyExc_SystemError, "tcjit: malformed effects");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyObject_SetAttr(args[1 + 2 * i], PyTuple_GET_ITEM(names, i),
                             args[2 + 2 * i]) < 0) {
            return NULL;
        }
    }
    return Py_NewRef(args[0]);
}

static PyMethodDef apply_effects_def = {
    "apply_effects", (PyCFunction)(void (*)(void))apply_effects,
    METH_FASTCALL, NULL};

static int
is_effects(const tc_var *v)
{
    return v->kind == TC_VAR_DEFERRED && v->node == TC_TMPL_CALL
           && v->obj != NULL && PyCFunction_Check(v->obj)
           && ((PyCFunctionObject *)v->obj)->m_ml == &apply_effects_def;
}

/* The value of owner.name the segment set last, or NULL.  An object
 * reached through two sources (o, and the __self__ of a bound method of
 * o the frame holds) is one object: matched by identity, both sources
 * pinned (ID_MATCH) so that it stays one. */
tc_var *
tc_tr_pending_attr(tracer *T, const tc_var *owner, PyObject *name)
{
    trace_shared *sh = T->sh;
    for (int i = sh->nfx - 1; i >= 0; i--) {
        struct tc_effect *e = &sh->fx[i];
        int same = e->owner == owner || (owner->source >= 0
                                         && e->owner->source == owner->source);
        int alias = !same && owner->source >= 0 && e->owner->source >= 0
                    && owner->obj != NULL && e->owner->obj == owner->obj;
        if ((same || alias) && PyUnicode_Compare(e->name, name) == 0) {
            if (alias
                && (tc_guard_id(T->out->guards, owner->source, owner->obj) < 0
                    || tc_guard_id(T->out->guards, e->owner->source,
                                   owner->obj) < 0)) {
                PyErr_Clear();   /* (out of memory: not matched) */
                continue;
            }
            return e->value;
        }
    }
    return NULL;
}

/* Whether mod.name = value, on an nn.Module read from the frame, is
 * object.__setattr__ in nn.Module.__setattr__ (self.seq_len = n in a
 * forward): a value that is no tensor or module, to a name that is no
 * parameter, buffer or submodule.  The exit replays it through the
 * module's own __setattr__. */
static int
plain_module_attr(tc_var *mod, PyObject *name, tc_var *value)
{
    if (mod->kind != TC_VAR_NN_MODULE || mod->source < 0
        || value->kind == TC_VAR_TENSOR || value->kind == TC_VAR_NN_MODULE
        || (value->obj != NULL && (tc_is_nn_module(value->obj)
                                   || tc_tensor_type_plain(value->obj)))) {
        return 0;
    }
    static const char *const dicts[] = {"_parameters", "_buffers",
                                        "_modules"};
    PyObject *d = PyObject_GenericGetDict(mod->obj, NULL);
    int plain = d != NULL;
    for (int i = 0; plain && i < 3; i++) {
        PyObject *sub = PyDict_GetItemString(d, dicts[i]);
        plain = sub != NULL && PyDict_Check(sub)
                && PyDict_GetItemWithError(sub, name) == NULL;
    }
    Py_XDECREF(d);
    PyErr_Clear();
    return plain;
}

static int
store_attr_of_frame_object(tracer *T, tc_var *o, PyObject *name,
                           tc_var *value)
{
    PyTypeObject *tp = o->obj ? Py_TYPE(o->obj) : NULL;
    int module = plain_module_attr(o, name, value);
    if ((o->kind != TC_VAR_UNKNOWN && !module) || o->source < 0 || tp == NULL
        || !(tp->tp_flags & Py_TPFLAGS_HEAPTYPE) || PyType_Check(o->obj)
        || (tp->tp_setattro != PyObject_GenericSetAttr && !module)) {
        return tc_tr_unsupported(T, "setting attribute %R of a %s", name,
                                 o->obj ? tp->tp_name : tc_var_kind_name(o));
    }
    PyObject *descr = _PyType_Lookup(tp, name);
    if (descr != NULL && Py_TYPE(descr)->tp_descr_set != NULL) {
        return tc_tr_unsupported(T, "setting attribute %R of a %s (a "
                                 "descriptor)", name, tp->tp_name);
    }
    if (tc_tr_holds_inlined_cell(value, 0)
        || ((tracer *)T->sh->root)->nlocals == 0) {
        return tc_tr_unsupported(T, "setting attribute %R of a %s to a "
                                 "closure of an inlined call", name,
                                 tp->tp_name);
    }
    if (tc_guard_type(T->out->guards, o->source, o->obj) < 0) {
        return ERROR;
    }
    trace_shared *sh = T->sh;
    if (sh->nfx == sh->fx_cap) {
        int cap = sh->fx_cap ? 2 * sh->fx_cap : 8;
        struct tc_effect *fx = PyMem_Realloc(sh->fx, cap * sizeof(*fx));
        if (fx == NULL) {
            PyErr_NoMemory();
            return ERROR;
        }
        sh->fx = fx;
        sh->fx_cap = cap;
    }
    sh->fx[sh->nfx++] = (struct tc_effect){o, name, value};
    return OK;
}

/* A var that is v, made after the recorded attribute writes. */
static tc_var *
with_effects(tracer *T, tc_var *v)
{
    trace_shared *sh = T->sh;
    tc_var *items[1 + 2 * 64];
    PyObject *names = PyTuple_New(sh->nfx);
    if (names == NULL || sh->nfx > 64) {
        Py_XDECREF(names);
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_RuntimeError,
                            "tcjit: more than 64 attribute writes");
        }
        return NULL;
    }
    items[0] = v;
    for (int i = 0; i < sh->nfx; i++) {
        PyTuple_SET_ITEM(names, i, Py_NewRef(sh->fx[i].name));
        items[1 + 2 * i] = sh->fx[i].owner;
        items[2 + 2 * i] = sh->fx[i].value;
    }
    PyObject *fn = PyCFunction_New(&apply_effects_def, names);
    Py_DECREF(names);
    tc_var *w = fn ? tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED,
                                1 + 2 * sh->nfx, items) : NULL;
    if (w == NULL) {
        Py_XDECREF(fn);
        return NULL;
    }
    w->node = TC_TMPL_CALL;
    w->obj = fn;
    return w;
}

int
tc_tr_attach_effects(tracer *T, tc_var **ret)
{
    if (T->sh->nfx == 0 || T->depth > 0) {
        return OK;
    }
    if (ret != NULL) {
        *ret = with_effects(T, *ret);
        return *ret ? OK : ERROR;
    }
    /* the first value the exit writes back: built before the others */
    for (int i = 0; i < T->sp; i++) {
        tc_var *v = T->stack[i];
        if (v->kind != TC_VAR_NULL && v->kind != TC_VAR_CELL
            && !is_effects(v)) {
            T->stack[i] = with_effects(T, v);
            return T->stack[i] ? OK : ERROR;
        }
    }
    for (int i = 0; i < T->nlocals; i++) {
        tc_var *v = T->locals[i];
        if (v == NULL && T->frame->localsplus[i] != NULL
            && tc_tr_local_value(T, i, &v) != OK) {
            PyErr_Clear();
            v = NULL;
        }
        if (v != NULL && v->kind != TC_VAR_NULL && v->kind != TC_VAR_CELL
            && !(PyBytes_AS_STRING(T->co->co_localspluskinds)[i]
                 & (TC_CO_FAST_CELL | TC_CO_FAST_FREE))) {
            T->locals[i] = with_effects(T, v);
            T->written[i] = 1;
            return T->locals[i] ? OK : ERROR;
        }
    }
    PyErr_SetString(PyExc_RuntimeError,
                    "tcjit: attribute writes with no value to make them with");
    return ERROR;
}

/* DELETE_ATTR and delattr(o, name): of an object made here, through its
 * class's Python __delattr__ (inlined) or object's. */
int
tc_tr_op_delete_attr(tracer *T, tc_var *o, PyObject *name)
{
    if (!tc_tr_is_new_object(o)) {
        return tc_tr_unsupported(T, "deleting attribute %R of a %s", name,
                                 tc_var_kind_name(o));
    }
    static PyObject *str_delattr;
    if (str_delattr == NULL && (str_delattr = str_of("__delattr__")) == NULL) {
        return ERROR;
    }
    PyObject *del = _PyType_Lookup(class_of(o), str_delattr);
    if (del != NULL && PyFunction_Check(del)) {
        tc_var *key = tc_tr_const_var(T, name);
        int rc = key ? inline_on(T, del, o, &key, 1, NULL) : ERROR;
        return rc == OK ? (tc_tr_pop(T) ? OK : ERROR) : rc;
    }
    if (del == NULL || !Py_IS_TYPE(del, &PyWrapperDescr_Type)
        || PyDescr_TYPE(del) != &PyBaseObject_Type) {
        return tc_tr_unsupported(T, "deleting an attribute of a %s (its "
                                 "__delattr__ is not Python)",
                                 class_of(o)->tp_name);
    }
    return tc_tr_new_object_del_attr(T, o, name);
}

/* STORE_ATTR: owner.name = value. */
int
tc_tr_op_store_attr(tracer *T, PyObject *name)
{
    tc_var *o = tc_tr_pop(T), *value = tc_tr_pop(T);
    if (o == NULL || value == NULL) {
        return tc_tr_unsupported(T, "malformed stack");
    }
    if (!tc_tr_is_new_object(o)) {
        return store_attr_of_frame_object(T, o, name, value);
    }
    PyTypeObject *tp = class_of(o);
    static PyObject *str_setattr;
    if (str_setattr == NULL && (str_setattr = str_of("__setattr__")) == NULL) {
        return ERROR;
    }
    PyObject *setattr = _PyType_Lookup(tp, str_setattr);
    if (tp->tp_setattro != PyObject_GenericSetAttr) {
        if (setattr == NULL || !PyFunction_Check(setattr)) {
            return tc_tr_unsupported(T, "setting an attribute of a %s (its "
                                     "__setattr__ is not Python)",
                                     tp->tp_name);
        }
        /* ModelOutput.__setattr__: inlined, its result dropped */
        tc_var *args[2] = {tc_tr_const_var(T, name), value};
        int rc = args[0] ? inline_on(T, setattr, o, args, 2, NULL) : ERROR;
        return rc == OK ? (tc_tr_pop(T) ? OK : ERROR) : rc;
    }
    PyObject *descr = _PyType_Lookup(tp, name);
    if (descr != NULL && Py_TYPE(descr)->tp_descr_set != NULL) {
        PyObject *fset = Py_IS_TYPE(descr, &PyProperty_Type)
            ? PyObject_GetAttrString(descr, "fset") : NULL;
        int rc = fset && PyFunction_Check(fset)
            ? inline_on(T, fset, o, &value, 1, NULL)
            : tc_tr_unsupported(T, "setting %R of a %s (a descriptor)", name,
                                tp->tp_name);
        Py_XDECREF(fset);
        return rc == OK ? (tc_tr_pop(T) ? OK : ERROR) : rc;
    }
    return state_set(T, o, 1, name, value);
}

/* ---- super() and the builtin slots -------------------------------------- */

/* super() in a method: __class__ (its cell) and its first argument;
 * super(C, obj) as given. */
int
tc_tr_call_super(tracer *T, tc_var **args, int nargs)
{
    tc_var *items[2];
    if (nargs == 2) {
        items[0] = args[0];
        items[1] = args[1];
    }
    else if (nargs == 0) {
        PyCodeObject *co = T->co;
        int slot = -1;
        for (int i = 0; i < co->co_nlocalsplus; i++) {
            if (PyUnicode_CompareWithASCIIString(
                    PyTuple_GET_ITEM(co->co_localsplusnames, i),
                    "__class__") == 0) {
                slot = i;
            }
        }
        if (slot < 0 || co->co_argcount < 1) {
            return tc_tr_unsupported(T, "super(): __class__ cell not found");
        }
        int rc = tc_tr_local_value(T, slot, &items[0]);
        if (rc == OK) {
            rc = tc_tr_local_value(T, 0, &items[1]);
        }
        if (rc != OK) {
            return rc;
        }
    }
    else {
        return NOT_HANDLED;
    }
    if (items[0]->obj == NULL || !PyType_Check(items[0]->obj)) {
        return tc_tr_unsupported(T, "super() of a class that is a %s",
                                 tc_var_kind_name(items[0]));
    }
    tc_var *s = tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED, 2, items);
    if (s == NULL) {
        return ERROR;
    }
    s->node = TC_TMPL_CALL;
    s->obj = Py_NewRef((PyObject *)&PySuper_Type);
    return tc_tr_push(T, s);
}

static int
slot_is(PyObject *descr, const char *name)
{
    return PyUnicode_CompareWithASCIIString(PyDescr_NAME(descr), name) == 0;
}

/* descr(self, *args) for a builtin slot found on the class of an object
 * made here (object.__setattr__, dict.__setitem__, object.__init__, ...):
 * what it does to the object's state.  NOT_HANDLED for other calls. */
int
tc_tr_call_slot(tracer *T, PyObject *descr, tc_var **args, int nargs,
                PyObject *kwnames)
{
    if (!(Py_IS_TYPE(descr, &PyWrapperDescr_Type)
          || Py_IS_TYPE(descr, &PyMethodDescr_Type)) || nargs < 1
        || !tc_tr_is_new_object(args[0])) {
        return NOT_HANDLED;
    }
    tc_var *o = args[0];
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    PyTypeObject *owner = PyDescr_TYPE(descr);
    int rc;
    if (slot_is(descr, "__init__") && nargs - nkw == 1) {
        for (int i = 0; i < nkw; i++) {
            if (owner == &PyBaseObject_Type) {
                return tc_tr_unsupported(T, "object.__init__() with "
                                         "arguments");
            }
            rc = state_set(T, o, 2, PyTuple_GET_ITEM(kwnames, i),
                           args[1 + i]);
            if (rc != OK) {
                return rc;
            }
        }
        return tc_tr_push(T, tc_tr_const_var(T, Py_None));
    }
    if (nkw > 0) {
        return NOT_HANDLED;
    }
    if ((slot_is(descr, "__getattribute__") || slot_is(descr, "__delattr__"))
        && owner == &PyBaseObject_Type && nargs == 2) {
        tc_var *key = args[1];
        if ((rc = tc_tr_reify(T, key)) != OK) {
            return rc;
        }
        if (key->kind != TC_VAR_CONST || !PyUnicode_CheckExact(key->obj)) {
            return tc_tr_unsupported(T, "object.%U of a %s key",
                                     PyDescr_NAME(descr),
                                     tc_var_kind_name(key));
        }
        if (slot_is(descr, "__getattribute__")) {
            return generic_attr(T, o, key->obj, 0);
        }
        rc = tc_tr_new_object_del_attr(T, o, key->obj);
        return rc == OK ? tc_tr_push(T, tc_tr_const_var(T, Py_None)) : rc;
    }
    int where = slot_is(descr, "__setattr__") ? 1
              : slot_is(descr, "__setitem__") ? 2 : 0;
    if (where != 0 && nargs == 3) {
        tc_var *key = args[1];
        if ((rc = tc_tr_reify(T, key)) != OK) {
            return rc;
        }
        if (key->kind != TC_VAR_CONST || !PyUnicode_CheckExact(key->obj)) {
            return tc_tr_unsupported(T, "%s of a %s key",
                                     where == 1 ? "__setattr__"
                                                : "__setitem__",
                                     tc_var_kind_name(key));
        }
        if (where == 2 && solid_base(class_of(o)) == &PyBaseObject_Type) {
            return NOT_HANDLED;
        }
        rc = state_set(T, o, where, key->obj, args[2]);
        return rc == OK ? tc_tr_push(T, tc_tr_const_var(T, Py_None)) : rc;
    }
    return NOT_HANDLED;
}

/* The items of an object made here that is a dict subclass, as a DICT var
 * that shares its values (read-only: its index is no tracer's), or NULL
 * (not such an object). */
tc_var *
tc_tr_new_object_items(tracer *T, tc_var *o)
{
    if (!tc_tr_is_new_object(o)
        || solid_base(class_of(o)) == &PyBaseObject_Type) {
        return NULL;
    }
    PyObject *spec = spec_of(o);
    int na = (int)PyTuple_GET_SIZE(PyTuple_GET_ITEM(spec, 1));
    int nk = (int)PyTuple_GET_SIZE(PyTuple_GET_ITEM(spec, 2));
    tc_var *d = tc_var_seq(&T->sh->arena, TC_VAR_DICT, nk, o->items + na);
    if (d != NULL) {
        d->obj = Py_NewRef(PyTuple_GET_ITEM(spec, 2));
        d->index = -1;
    }
    return d;
}

/* o[key] = value on an object made here whose class keeps dict's
 * __setitem__ (a Python one is inlined by the caller). */
int
tc_tr_new_object_store_item(tracer *T, tc_var *o, tc_var *key, tc_var *value)
{
    int rc = tc_tr_reify(T, key);
    if (rc != OK) {
        return rc;
    }
    if (key->kind != TC_VAR_CONST || !PyUnicode_CheckExact(key->obj)) {
        return tc_tr_unsupported(T, "item assignment of a %s key on a %s",
                                 tc_var_kind_name(key), class_of(o)->tp_name);
    }
    return state_set(T, o, 2, key->obj, value);
}

/* hasattr(o, name) of an object made here: 1, 0, or -1 (its class has a
 * __getattr__ / __getattribute__ of its own). */
tc_var *
tc_tr_new_object_state(const tc_var *o, PyObject *name)
{
    return tc_tr_is_new_object(o) ? state_get(o, 1, name) : NULL;
}

PyObject *
tc_tr_new_object_attr_names(const tc_var *o)
{
    return tc_tr_is_new_object(o) ? PyTuple_GET_ITEM(spec_of(o), 1) : NULL;
}

int
tc_tr_new_object_has_attr(const tc_var *o, PyObject *name)
{
    PyTypeObject *tp = class_of(o);
    if (tp->tp_getattro != PyObject_GenericGetAttr) {
        return -1;
    }
    return state_get(o, 1, name) != NULL || _PyType_Lookup(tp, name) != NULL;
}

/* self.<name>(*args) for an operator whose method the class of self
 * defines in Python (__getitem__ of a transformers AttentionInterface, a
 * ModelOutput's; __contains__, __len__ of a Mapping): inlined, for an
 * object made here or one read from the frame (its type guarded).
 * NOT_HANDLED if the class has no such Python method. */
int
tc_tr_call_python_dunder(tracer *T, tc_var *self, const char *name,
                         tc_var **args, int nargs)
{
    PyTypeObject *tp = tc_tr_is_new_object(self) ? class_of(self)
        : self->kind == TC_VAR_UNKNOWN && self->source >= 0
          && self->obj != NULL && !PyType_Check(self->obj)
          && (Py_TYPE(self->obj)->tp_flags & Py_TPFLAGS_HEAPTYPE)
        ? Py_TYPE(self->obj) : NULL;
    if (tp == NULL) {
        return NOT_HANDLED;
    }
    PyObject *n = PyUnicode_InternFromString(name);
    PyObject *f = n ? _PyType_Lookup(tp, n) : NULL;
    Py_XDECREF(n);
    if (f == NULL || !PyFunction_Check(f)) {
        return PyErr_Occurred() ? ERROR : NOT_HANDLED;
    }
    if (!tc_tr_is_new_object(self)
        && tc_guard_type(T->out->guards, self->source, self->obj) < 0) {
        return ERROR;
    }
    return inline_on(T, f, self, args, nargs, NULL);
}

/* m(*args) of a method var whose owner the trace made (obj.update as a
 * value): the class's function now, with the object first.  NOT_HANDLED
 * for other owners. */
int
tc_tr_call_new_object_method(tracer *T, tc_var *self, PyObject *name,
                             tc_var **args, int nargs, PyObject *kwnames)
{
    if (!tc_tr_is_new_object(self) || state_get(self, 1, name) != NULL) {
        return NOT_HANDLED;
    }
    PyObject *f = _PyType_Lookup(class_of(self), name);
    if (f == NULL || !PyFunction_Check(f)) {
        return NOT_HANDLED;
    }
    return inline_on(T, f, self, args, nargs, kwnames);
}
