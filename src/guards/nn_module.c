/* nn_module.c - nn.Module attribute lookup and hook checks (nn_module.h).
 *
 * The dict names below are nn.Module's implementation (torch/nn/modules/
 * module.py): stable since torch 1.x, and checked at init so a torch that
 * changed them makes every module call a graph break instead of a wrong
 * answer.
 */
#include "nn_module.h"

static PyObject *module_type;       /* torch.nn.Module */
static PyObject *global_hooks[4];   /* module-level hook dicts */
static PyObject *str_dict_names[3]; /* _parameters, _buffers, _modules */
static PyObject *str_hook_names[4];
static PyObject *module_getattr;    /* nn.Module.__getattr__ */
static PyObject *str_getattr;

static const char *const hook_dicts[4] = {
    "_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
    "_backward_pre_hooks",
};

int
tc_nn_module_init(void)
{
    static const char *const dicts[3] = {"_parameters", "_buffers",
                                         "_modules"};
    static const char *const globals[4] = {
        "_global_forward_hooks", "_global_forward_pre_hooks",
        "_global_backward_hooks", "_global_backward_pre_hooks",
    };
    if (module_type != NULL) {
        return 0;
    }
    PyObject *mod = PyImport_ImportModule("torch.nn.modules.module");
    if (mod == NULL) {
        return -1;
    }
    for (int i = 0; i < 4; i++) {
        global_hooks[i] = PyObject_GetAttrString(mod, globals[i]);
        str_hook_names[i] = PyUnicode_InternFromString(hook_dicts[i]);
        if (global_hooks[i] == NULL || !PyDict_Check(global_hooks[i])
            || str_hook_names[i] == NULL) {
            goto error;
        }
    }
    for (int i = 0; i < 3; i++) {
        str_dict_names[i] = PyUnicode_InternFromString(dicts[i]);
        if (str_dict_names[i] == NULL) {
            goto error;
        }
    }
    module_type = PyObject_GetAttrString(mod, "Module");
    Py_DECREF(mod);
    str_getattr = PyUnicode_InternFromString("__getattr__");
    module_getattr = module_type && str_getattr
        ? PyObject_GetAttr(module_type, str_getattr) : NULL;
    return module_getattr != NULL ? 0 : -1;
error:
    Py_DECREF(mod);
    if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_RuntimeError, "tcjit: torch.nn.Module "
                        "internals changed (hook dicts)");
    }
    return -1;
}

int
tc_is_nn_module(PyObject *obj)
{
    return module_type != NULL
           && PyType_IsSubtype(Py_TYPE(obj), (PyTypeObject *)module_type);
}

/* m.__dict__[key] as a dict, borrowed, or NULL (no exception). */
static PyObject *
instance_dict_item(PyObject *dict, PyObject *key)
{
    PyObject *v = dict ? PyDict_GetItemWithError(dict, key) : NULL;
    if (v == NULL) {
        PyErr_Clear();
        return NULL;
    }
    return PyDict_Check(v) ? v : NULL;
}

PyObject *
tc_nn_getattr(PyObject *m, PyObject *name)
{
    if (!tc_is_nn_module(m) || _PyType_Lookup(Py_TYPE(m), name) != NULL) {
        return PyObject_GetAttr(m, name);
    }
    PyObject *dict = PyObject_GenericGetDict(m, NULL);
    if (dict == NULL) {
        PyErr_Clear();
        return PyObject_GetAttr(m, name);
    }
    PyObject *v = PyDict_GetItemWithError(dict, name);
    for (int i = 0; v == NULL && !PyErr_Occurred() && i < 3; i++) {
        PyObject *d = instance_dict_item(dict, str_dict_names[i]);
        v = d ? PyDict_GetItemWithError(d, name) : NULL;
    }
    Py_XINCREF(v);
    Py_DECREF(dict);
    if (v == NULL && !PyErr_Occurred()) {
        /* not there: let nn.Module raise its own message */
        return PyObject_GetAttr(m, name);
    }
    return v;
}

/* m's class looks attributes up as nn.Module does (no __getattr__ or
 * __getattribute__ of its own). */
static int
plain_lookup(PyObject *m)
{
    PyTypeObject *t = Py_TYPE(m);
    return tc_is_nn_module(m) && module_getattr != NULL
           && t->tp_getattro == ((PyTypeObject *)module_type)->tp_getattro
           && _PyType_Lookup(t, str_getattr) == module_getattr;
}

/* hasattr(m, name) as the builtin computes it: 1, 0, or -1 with an
 * exception other than AttributeError. */
static int
has_attr(PyObject *m, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(m, name);
    if (v != NULL) {
        Py_DECREF(v);
        return 1;
    }
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

int
tc_nn_hasattr(PyObject *m, PyObject *name)
{
    if (!PyUnicode_Check(name) || !plain_lookup(m)
        || _PyType_Lookup(Py_TYPE(m), name) != NULL) {
        return has_attr(m, name);
    }
    PyObject *dict = PyObject_GenericGetDict(m, NULL);
    if (dict == NULL) {
        PyErr_Clear();
        return has_attr(m, name);
    }
    int found = PyDict_Contains(dict, name);
    for (int i = 0; found == 0 && i < 3; i++) {
        PyObject *d = instance_dict_item(dict, str_dict_names[i]);
        found = d ? PyDict_Contains(d, name) : 0;
    }
    Py_DECREF(dict);
    return found;
}

int
tc_nn_has_hooks(PyObject *m)
{
    for (int i = 0; i < 4; i++) {
        if (PyDict_GET_SIZE(global_hooks[i]) > 0) {
            return 1;
        }
    }
    PyObject *dict = PyObject_GenericGetDict(m, NULL);
    if (dict == NULL) {
        return -1;
    }
    int any = 0;
    for (int i = 0; i < 4 && !any; i++) {
        PyObject *d = instance_dict_item(dict, str_hook_names[i]);
        any = d == NULL || PyDict_GET_SIZE(d) > 0;  /* missing: be safe */
    }
    Py_DECREF(dict);
    return any;
}
