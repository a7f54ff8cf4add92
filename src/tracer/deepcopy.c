/* deepcopy.c - copy.deepcopy(x) of values the trace knows.
 *
 * transformers' PreTrainedConfig.get_text_config() deep-copies a config
 * and renames keys of the copy (BART, T5, Pegasus: DynamicCache(config)
 * asks it in every forward).  Tracing copy.deepcopy's Python (id(), the
 * memo, __reduce_ex__(4), copyreg) would need object identities the trace
 * does not have, so the copy is built from what copy.deepcopy would build
 * for values whose copy it knows:
 *
 * - atoms (numbers, str, bytes, None, types, functions, torch dtypes) and
 *   tuples of them: the value itself, as deepcopy's _deepcopy_atomic;
 * - lists, dicts (str keys, read from the frame or built by the trace):
 *   new ones of the items' copies;
 * - objects of a plain class (object's own __reduce_ex__, __new__ and
 *   state: no __deepcopy__, __setstate__, __slots__, copyreg entry), read
 *   from the frame or made by the trace: a new object (objects.c) whose
 *   attributes are the copies of the original's __dict__, in its order.
 *
 * Anything else (a tensor, a module, a set, a closure) is a graph break
 * naming it.  The copy shares nothing mutable with the original, as
 * deepcopy's; where two mutable values of the original are one object
 * (the memo), the copy would not share them: such a graph is refused,
 * and the mutable values read from the frame are pinned by identity so
 * that another call sees the same sharing.
 */
#include "tracer_internal.h"

#include "../graph/graph.h"

#define MAX_COPY_DEPTH 6
#define MAX_COPIED 256

typedef struct {
    PyObject *seen[MAX_COPIED];   /* mutable originals read from the frame */
    int n;
} copy_memo;

static tc_var *copy_var(tracer *T, tc_var *v, copy_memo *m, int depth,
                        int *rc);

/* Whether deepcopy(o) is o itself (copy._deepcopy_atomic, dtypes). */
static int
is_atom(PyObject *o)
{
    return o == Py_None || PyLong_Check(o) || PyFloat_Check(o)
           || PyUnicode_Check(o) || PyBytes_Check(o) || PyBool_Check(o)
           || PyComplex_Check(o) || PyType_Check(o) || PyFunction_Check(o)
           || PyCFunction_Check(o) || o == Py_Ellipsis
           || o == Py_NotImplemented || PyRange_Check(o) || PyCode_Check(o)
           || tc_dtype_from_torch(o) >= 0;
}

/* Whether deepcopy of an instance of cls is object.__reduce_ex__(4)'s:
 * cls.__new__(cls), then its __dict__ updated with the state's copy. */
static int
plain_class(PyTypeObject *cls)
{
    static const char *const own[] = {"__deepcopy__", "__setstate__",
                                      "__reduce__", "__reduce_ex__",
                                      "__getstate__", "__slots__",
                                      "__getnewargs_ex__", "__getnewargs__",
                                      NULL};
    if (!(cls->tp_flags & Py_TPFLAGS_HEAPTYPE) || cls->tp_dictoffset == 0
        || cls->tp_new != PyBaseObject_Type.tp_new
        || cls->tp_itemsize != 0) {
        return 0;
    }
    PyObject *mro = cls->tp_mro;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *b = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (b == &PyBaseObject_Type) {
            continue;
        }
        if (!(b->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
            return 0;   /* a builtin base with state of its own */
        }
        for (int k = 0; own[k]; k++) {
            if (PyDict_GetItemString(b->tp_dict, own[k]) != NULL) {
                return 0;
            }
        }
    }
    /* copyreg.dispatch_table (copy asks it before __reduce_ex__) */
    PyObject *copyreg = PyImport_ImportModule("copyreg");
    PyObject *table = copyreg ? PyObject_GetAttrString(copyreg,
                                                       "dispatch_table")
                              : NULL;
    int r = table && PyDict_Check(table)
            && PyDict_GetItemWithError(table, (PyObject *)cls) == NULL;
    Py_XDECREF(copyreg);
    Py_XDECREF(table);
    PyErr_Clear();
    return r;
}

/* A mutable original read from the frame, met once per copy; pinned by
 * identity (the sharing of the next call's originals is this one's). */
static int
first_sight(tracer *T, tc_var *v, PyObject *o, copy_memo *m)
{
    for (int i = 0; i < m->n; i++) {
        if (m->seen[i] == o) {
            return tc_tr_unsupported(T, "copy.deepcopy of a value that "
                                     "holds one %s twice",
                                     Py_TYPE(o)->tp_name);
        }
    }
    if (m->n == MAX_COPIED) {
        return tc_tr_unsupported(T, "copy.deepcopy of more than %d values",
                                 MAX_COPIED);
    }
    m->seen[m->n++] = o;
    if (v->source >= 0 && m->n > 1
        && tc_guard_id(T->out->guards, v->source, o) < 0) {
        return ERROR;
    }
    return OK;
}

static tc_var *
copy_items(tracer *T, tc_var *v, tc_var_kind kind, copy_memo *m, int depth,
           int *rc)
{
    tc_var *items[4 * TC_MAX_CALL_ARGS];
    int same = 1;
    if (v->nitems > 4 * TC_MAX_CALL_ARGS) {
        *rc = tc_tr_unsupported(T, "copy.deepcopy of a %s of %d items",
                                tc_var_kind_name(v), v->nitems);
        return NULL;
    }
    for (int i = 0; i < v->nitems; i++) {
        items[i] = copy_var(T, v->items[i], m, depth + 1, rc);
        if (items[i] == NULL) {
            return NULL;
        }
        same &= items[i] == v->items[i];
    }
    if (kind == TC_VAR_TUPLE && same) {
        return v;   /* a tuple of atoms is its own copy */
    }
    tc_var *c = tc_var_seq(&T->sh->arena, kind, v->nitems, items);
    if (c == NULL) {
        *rc = ERROR;
        return NULL;
    }
    if (kind == TC_VAR_LIST) {
        c->index = T->serial;
    }
    else if (kind == TC_VAR_DICT) {
        c->obj = Py_NewRef(v->obj);   /* the keys, in order */
        c->index = T->serial;
    }
    return c;
}

/* A new object of cls whose attributes are copies of dict var state's
 * items. */
static tc_var *
copy_object(tracer *T, PyTypeObject *cls, tc_var *state, copy_memo *m,
            int depth, int *rc)
{
    if (!plain_class(cls)) {
        *rc = tc_tr_unsupported(T, "copy.deepcopy of a %s (its class "
                                "copies itself)", cls->tp_name);
        return NULL;
    }
    tc_var *d = copy_items(T, state, TC_VAR_DICT, m, depth, rc);
    tc_var *o = d ? tc_tr_new_object_of(T, cls, d->obj, d->items) : NULL;
    if (d != NULL && o == NULL) {
        *rc = ERROR;
    }
    return o;
}

/* x.__dict__ of an object read from the frame, as a DICT var (its keys
 * guarded in order, each value a source of its own). */
static tc_var *
frame_object_state(tracer *T, tc_var *v, int *rc)
{
    PyObject *name = PyUnicode_InternFromString("__dict__");
    int src = name ? tc_source_add(T->out->guards, TC_SRC_ATTR, v->source, 0,
                                   name) : -1;
    Py_XDECREF(name);
    PyObject *d = src >= 0 ? PyObject_GenericGetDict(v->obj, NULL) : NULL;
    tc_var *dv = d ? tc_tr_wrap_value(T, d, src, rc) : NULL;
    Py_XDECREF(d);
    if (dv == NULL) {
        *rc = *rc != OK ? *rc : ERROR;
        return NULL;
    }
    *rc = tc_tr_as_dict(T, dv);
    if (*rc == NOT_HANDLED) {
        *rc = tc_tr_unsupported(T, "copy.deepcopy of a %s with such "
                                "attributes", Py_TYPE(v->obj)->tp_name);
    }
    return *rc == OK ? dv : NULL;
}

static tc_var *
copy_var(tracer *T, tc_var *v, copy_memo *m, int depth, int *rc)
{
    *rc = OK;
    if (depth > MAX_COPY_DEPTH) {
        *rc = tc_tr_unsupported(T, "copy.deepcopy nested deeper than %d",
                                MAX_COPY_DEPTH);
        return NULL;
    }
    if ((v->kind == TC_VAR_LAZY || v->kind == TC_VAR_CONST
         || v->kind == TC_VAR_OBJECT || v->kind == TC_VAR_UNKNOWN)
        && v->obj != NULL && is_atom(v->obj)) {
        return v;   /* (not reified: the copy is the value, unread) */
    }
    int fresh_list = v->kind == TC_VAR_LAZY && PyList_CheckExact(v->obj);
    if (fresh_list && (*rc = first_sight(T, v, v->obj, m)) != OK) {
        return NULL;
    }
    if (v->kind == TC_VAR_LAZY && (*rc = tc_tr_reify(T, v)) != OK) {
        return NULL;
    }
    if (v->kind == TC_VAR_CONST && PyTuple_CheckExact(v->obj)) {
        Py_ssize_t n = PyTuple_GET_SIZE(v->obj);
        for (Py_ssize_t i = 0; i < n; i++) {
            if (!is_atom(PyTuple_GET_ITEM(v->obj, i))) {
                goto refuse;
            }
        }
        return v;
    }
    if (v->kind == TC_VAR_UNKNOWN && v->source >= 0 && v->obj != NULL
        && PyDict_CheckExact(v->obj)) {
        if ((*rc = first_sight(T, v, v->obj, m)) != OK
            || (*rc = tc_tr_as_dict(T, v)) != OK) {
            if (*rc == NOT_HANDLED) {
                goto refuse;
            }
            return NULL;
        }
    }
    else if ((v->kind == TC_VAR_DICT || (v->kind == TC_VAR_LIST
                                         && !fresh_list))
             && v->source >= 0) {
        /* read from the frame before: an OrderedDict's copy is one too,
         * and which lists are one object is not known any more */
        goto refuse;
    }
    if (v->kind == TC_VAR_TUPLE || v->kind == TC_VAR_LIST
        || v->kind == TC_VAR_DICT) {
        return copy_items(T, v, v->kind, m, depth, rc);
    }
    if (tc_tr_is_new_object(v)) {
        tc_var *state = tc_tr_new_object_state_dict(T, v);
        return state ? copy_object(T, tc_tr_new_object_class(v), state, m,
                                   depth, rc)
                     : (*rc = ERROR, NULL);
    }
    if (v->kind == TC_VAR_UNKNOWN && v->source >= 0 && v->obj != NULL
        && !PyType_Check(v->obj)
        && (Py_TYPE(v->obj)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        if (!plain_class(Py_TYPE(v->obj))) {
            *rc = tc_tr_unsupported(T, "copy.deepcopy of a %s (its class "
                                    "copies itself)",
                                    Py_TYPE(v->obj)->tp_name);
            return NULL;
        }
        if ((*rc = first_sight(T, v, v->obj, m)) != OK) {
            return NULL;
        }
        if (tc_guard_type(T->out->guards, v->source, v->obj) < 0) {
            *rc = ERROR;
            return NULL;
        }
        tc_var *state = frame_object_state(T, v, rc);
        return state ? copy_object(T, Py_TYPE(v->obj), state, m, depth, rc)
                     : NULL;
    }
refuse:
    *rc = tc_tr_unsupported(T, "copy.deepcopy of a %s",
                            tc_var_kind_name(v));
    return NULL;
}

int
tc_tr_call_deepcopy(tracer *T, PyObject *fn, tc_var **args, int nargs,
                    PyObject *kwnames)
{
    static PyObject *deepcopy;
    PyObject *dc = tc_tr_lazy_attr(&deepcopy, "copy", "deepcopy");
    if (dc == NULL || fn != dc) {
        return NOT_HANDLED;
    }
    if (nargs != 1 || kwnames != NULL) {
        return tc_tr_unsupported(T, "copy.deepcopy with a memo");
    }
    copy_memo m = {.n = 0};
    int rc;
    tc_var *c = copy_var(T, args[0], &m, 0, &rc);
    return c ? tc_tr_push(T, c) : rc;
}
