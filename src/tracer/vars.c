/* vars.c - arena allocation of tracer values. */
#include "vars.h"

tc_var *
tc_var_new(tc_var_arena *a, tc_var_kind kind, int source)
{
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 64;
        tc_var **n = PyMem_Realloc(a->vars, cap * sizeof(*n));
        if (n == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        a->vars = n;
        a->cap = cap;
    }
    tc_var *v = PyMem_Calloc(1, sizeof(*v));
    if (v == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    v->kind = kind;
    v->source = source;
    v->node = -1;
    a->vars[a->n++] = v;
    return v;
}

tc_var *
tc_var_const(tc_var_arena *a, PyObject *value, int source)
{
    tc_var *v = tc_var_new(a, TC_VAR_CONST, source);
    if (v != NULL) {
        v->obj = Py_NewRef(value);
    }
    return v;
}

tc_var *
tc_var_seq(tc_var_arena *a, tc_var_kind kind, int n, tc_var *const *items)
{
    tc_var *v = tc_var_new(a, kind, -1);
    if (v == NULL) {
        return NULL;
    }
    v->items = PyMem_Malloc((n ? n : 1) * sizeof(tc_var *));
    if (v->items == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(v->items, items, n * sizeof(tc_var *));
    v->nitems = n;
    return v;
}

void
tc_var_arena_clear(tc_var_arena *a)
{
    for (int i = 0; i < a->n; i++) {
        Py_XDECREF(a->vars[i]->obj);
        PyMem_Free(a->vars[i]->items);
        PyMem_Free(a->vars[i]);
    }
    PyMem_Free(a->vars);
    a->vars = NULL;
    a->n = a->cap = 0;
}

const char *
tc_var_kind_name(const tc_var *v)
{
    switch (v->kind) {
    case TC_VAR_NULL:
        return "NULL";
    case TC_VAR_TENSOR:
        return "Tensor";
    case TC_VAR_TUPLE:
        return "tuple";
    case TC_VAR_LIST:
        return "list";
    case TC_VAR_DICT:
        return "dict";
    case TC_VAR_CELL:
        return "closure cell";
    case TC_VAR_DEFERRED:
        /* made at the exit by a call of obj: a type names what it makes
         * (a set, an object), else the value is whatever obj returns */
        if (v->obj != NULL && PyType_Check(v->obj)) {
            return ((PyTypeObject *)v->obj)->tp_name;
        }
        return "object";
    default:
        return v->obj ? Py_TYPE(v->obj)->tp_name : "object";
    }
}
