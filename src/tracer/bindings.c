/* bindings.c - the table of traceable Python callables, derived at init
 * from the op registry's spellings (src/graph/ops.h): adding a torch
 * function that maps onto a registry op is a spelling in its entry.
 */
#include "bindings.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static tc_binding_def *binding_defs;
static tc_binding *bindings;
static int nbindings;
static tc_nn_binding *nn_bindings;
static int n_nn_bindings;
static PyObject *binding_index;   /* {id(callable): index} */
static PyObject *trusted_modules; /* list of modules */

/* ---- deriving the table from the registry ------------------------------ */

/* The strings derived here live for the process, like the table. */
static char *
strndup_py(const char *s, size_t n)
{
    char *r = PyMem_Malloc(n + 1);
    if (r == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(r, s, n);
    r[n] = 0;
    return r;
}

/* Word i of a space-separated list, or NULL (*s_len: its length). */
static const char *
word_at(const char *s, int i, size_t *len)
{
    for (;;) {
        while (*s == ' ') {
            s++;
        }
        if (*s == 0) {
            return NULL;
        }
        const char *start = s;
        while (*s && *s != ' ') {
            s++;
        }
        if (i-- == 0) {
            *len = (size_t)(s - start);
            return start;
        }
    }
}

/* A Tensor method binds the torch.* form's first parameter as self:
 * "input, other" -> "self, other". */
static char *
method_sig(const char *sig)
{
    const char *rest = strchr(sig, ',');
    size_t n = rest ? strlen(rest) : 0;
    char *r = PyMem_Malloc(4 + n + 1);
    if (r == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(r, "self", 4);
    memcpy(r + 4, rest ? rest : "", n + 1);
    return r;
}

/* Appends the bindings of one registry row's spellings (count only when
 * out is NULL). */
static int
derive_spellings(const char *op, const tc_op_spelling *py, tc_binding_def *out,
                 int *n)
{
    for (int k = 0; k < TC_OP_MAX_SPELLINGS && py[k].names != NULL; k++) {
        size_t len;
        const char *w;
        for (int i = 0; (w = word_at(py[k].names, i, &len)) != NULL; i++) {
            if (out != NULL) {
                tc_binding_def *d = &out[*n];
                int method = len > 7 && memcmp(w, "Tensor.", 7) == 0;
                size_t alen = 0;
                const char *arg = py[k].arg ? word_at(py[k].arg, i, &alen)
                                            : NULL;
                d->path = strndup_py(w, len);
                d->op = arg ? strndup_py(arg, alen) : op;
                d->call = py[k].call;
                d->sig = method ? method_sig(py[k].sig) : py[k].sig;
                if (d->path == NULL || d->op == NULL || d->sig == NULL) {
                    return -1;
                }
            }
            (*n)++;
        }
    }
    return 0;
}

static int
derive_nn(const tc_op_module *m, tc_nn_binding *out, int *n)
{
    if (m->cls == NULL) {
        return 0;
    }
    if (out != NULL) {
        tc_nn_binding *b = &out[*n];
        size_t len;
        const char *w;
        b->cls = m->cls;
        b->path = m->path;
        b->attrs[0] = NULL;
        b->n = 1;
        for (int i = 0; (w = word_at(m->attrs, i, &len)) != NULL; i++) {
            if (b->n == TC_MAX_PARAMS) {
                PyErr_SetString(PyExc_RuntimeError, "nn binding overflow");
                return -1;
            }
            if ((b->attrs[b->n++] = strndup_py(w, len)) == NULL) {
                return -1;
            }
        }
    }
    (*n)++;
    return 0;
}

/* Two passes over the registry: count, then fill. */
static int
derive_table(void)
{
    for (int pass = 0; pass < 2; pass++) {
        int n = 0, nn = 0;
        for (int i = 0; i < tc_nops; i++) {
            if (derive_spellings(tc_ops[i].name, tc_ops[i].py, binding_defs,
                                 &n) < 0
                || derive_nn(&tc_ops[i].nn, nn_bindings, &nn) < 0) {
                return -1;
            }
        }
        for (int i = 0; i < tc_ndecomps; i++) {
            if (derive_spellings(tc_decomps[i].name, tc_decomps[i].py,
                                 binding_defs, &n) < 0
                || derive_nn(&tc_decomps[i].nn, nn_bindings, &nn) < 0) {
                return -1;
            }
        }
        if (pass == 0) {
            binding_defs = PyMem_Calloc((size_t)n, sizeof(*binding_defs));
            bindings = PyMem_Calloc((size_t)n, sizeof(*bindings));
            nn_bindings = PyMem_Calloc((size_t)nn + 1, sizeof(*nn_bindings));
            if (binding_defs == NULL || bindings == NULL
                || nn_bindings == NULL) {
                PyErr_NoMemory();
                return -1;
            }
        }
        nbindings = n;
        n_nn_bindings = nn;
    }
    return 0;
}

/* Parse a default literal: None, True, False, or a number. */
static PyObject *
parse_default(const char *s, size_t n)
{
    if (n == 4 && memcmp(s, "None", 4) == 0) {
        return Py_NewRef(Py_None);
    }
    if (n == 4 && memcmp(s, "True", 4) == 0) {
        return Py_NewRef(Py_True);
    }
    if (n == 5 && memcmp(s, "False", 5) == 0) {
        return Py_NewRef(Py_False);
    }
    char buf[32];
    if (n >= sizeof(buf)) {
        n = sizeof(buf) - 1;
    }
    memcpy(buf, s, n);
    buf[n] = 0;
    if (strchr(buf, '.') != NULL) {
        return PyFloat_FromDouble(atof(buf));
    }
    return PyLong_FromLongLong(atoll(buf));
}

/* "input, other: Tensor, *, alpha=1" -> names, defaults, keyword-only
 * start, the parameters that must be tensors.
 * Parameter names point into the static signature text: each name ends at
 * ',' '=' or the end, so we copy them into a small static pool. */
static char name_pool[16384];
static size_t name_pool_used;

static int
parse_signature(tc_binding *b)
{
    const char *s = b->def->sig;
    b->nkwonly_from = TC_MAX_PARAMS;
    b->varargs = -1;
    while (*s) {
        while (*s == ' ' || *s == ',') {
            s++;
        }
        if (*s == 0) {
            break;
        }
        if (*s == '*' && s[1] != ' ' && s[1] != ',' && s[1] != 0) {
            b->varargs = b->nparams;     /* "*size": what follows is
                                            keyword-only */
            b->nkwonly_from = b->nparams + 1;
            s++;
        }
        else if (*s == '*') {
            b->nkwonly_from = b->nparams;
            s++;
            continue;
        }
        const char *start = s;
        while (*s && *s != ',' && *s != '=' && *s != ':') {
            s++;
        }
        size_t len = (size_t)(s - start);
        if (*s == ':') {
            /* ": Tensor", ": bool", ": int" / ": ints": what eager's
             * parser accepts for an argument given (torchcalls.c) */
            const char *t = s + 1 + strspn(s + 1, " ");
            size_t tn = strcspn(t, ",=");
            unsigned *mask = tn == 6 && !memcmp(t, "Tensor", 6)
                ? &b->tensor_only : tn == 4 && !memcmp(t, "bool", 4)
                ? &b->bool_only : (tn == 3 && !memcmp(t, "int", 3))
                                  || (tn == 4 && !memcmp(t, "ints", 4))
                ? &b->not_none : NULL;
            if (mask == NULL) {
                PyErr_Format(PyExc_RuntimeError, "binding %s: unknown "
                             "annotation in '%s'", b->def->path, b->def->sig);
                return -1;
            }
            *mask |= 1u << b->nparams;
            s = t + tn;
        }
        if (b->nparams == TC_MAX_PARAMS
            || name_pool_used + len + 1 > sizeof(name_pool)) {
            PyErr_SetString(PyExc_RuntimeError, "binding table overflow");
            return -1;
        }
        char *name = name_pool + name_pool_used;
        memcpy(name, start, len);
        name[len] = 0;
        name_pool_used += len + 1;
        b->names[b->nparams] = name;
        if (*s == '=') {
            const char *d = ++s;
            while (*s && *s != ',') {
                s++;
            }
            b->defaults[b->nparams] = parse_default(d, (size_t)(s - d));
            if (b->defaults[b->nparams] == NULL) {
                return -1;
            }
        }
        b->nparams++;
    }
    return 0;
}

/* Attributes of a trusted module are read at trace time without a guard
 * (valueops.c module_attr). */
static int
trust_module(PyObject *mod)
{
    int known = PySequence_Contains(trusted_modules, mod);
    return known != 0 ? known : PyList_Append(trusted_modules, mod);
}

static int
init_trusted_modules(void)
{
    /* torch.nn too: torch.nn.functional.gelu(x) spelled out in full
     * reaches F through it; the modules a spelling goes through
     * (torch.special) are added by resolve_path */
    static const char *const names[] = {"torch", "torch.nn",
                                        "torch.nn.functional", "math",
                                        "torch.linalg", "torch.fft",
                                        "torch.special", "torch._C",
                                        "torch._C._nn"};
    trusted_modules = PyList_New(0);
    for (size_t i = 0; trusted_modules && i < 9; i++) {
        PyObject *mod = PyImport_ImportModule(names[i]);
        if (mod == NULL || trust_module(mod) < 0) {
            Py_XDECREF(mod);
            Py_CLEAR(trusted_modules);
            break;
        }
        Py_DECREF(mod);
    }
    /* torch.ops and torch.ops.aten (module objects of torch._ops): the
     * aten overloads read through them are generic extern ops */
    PyObject *torch = trusted_modules ? PyImport_ImportModule("torch") : NULL;
    PyObject *ops = torch ? PyObject_GetAttrString(torch, "ops") : NULL;
    PyObject *aten = ops ? PyObject_GetAttrString(ops, "aten") : NULL;
    if (aten == NULL || trust_module(ops) < 0 || trust_module(aten) < 0) {
        Py_CLEAR(trusted_modules);
    }
    Py_XDECREF(torch);
    Py_XDECREF(ops);
    Py_XDECREF(aten);
    return trusted_modules ? 0 : -1;
}

/* Resolve "torch.sin" / "Tensor.sin" / "F.relu" / "builtins.abs"; the
 * modules on the way ("torch.special.erf": torch.special) become
 * trusted, so that the spelling traces as written. */
static PyObject *
resolve_path(const char *path)
{
    const char *dot = strchr(path, '.');
    char head[32];
    size_t n = (size_t)(dot - path);
    memcpy(head, path, n);
    head[n] = 0;
    const char *modname = strcmp(head, "Tensor") == 0 ? "torch"
                        : strcmp(head, "F") == 0 ? "torch.nn.functional"
                        : head;
    PyObject *mod = PyImport_ImportModule(modname);
    if (mod == NULL) {
        return NULL;
    }
    PyObject *owner = mod;
    if (strcmp(head, "Tensor") == 0) {
        owner = PyObject_GetAttrString(mod, "Tensor");
        Py_DECREF(mod);
        if (owner == NULL) {
            return NULL;
        }
    }
    /* "torch.special.erf": one attribute per remaining dot */
    const char *name = dot + 1;
    while (owner != NULL && strchr(name, '.') != NULL) {
        char part[64];
        size_t k = (size_t)(strchr(name, '.') - name);
        if (k >= sizeof(part)) {
            Py_DECREF(owner);
            PyErr_SetString(PyExc_ValueError, "binding path too long");
            return NULL;
        }
        memcpy(part, name, k);
        part[k] = 0;
        Py_SETREF(owner, PyObject_GetAttrString(owner, part));
        if (owner != NULL && PyModule_Check(owner)
            && trust_module(owner) < 0) {
            Py_CLEAR(owner);
        }
        name += k + 1;
    }
    if (owner == NULL) {
        return NULL;
    }
    PyObject *r = PyObject_GetAttrString(owner, name);
    Py_DECREF(owner);
    return r;
}

int
tc_bindings_init(void)
{
    binding_index = PyDict_New();
    if (binding_index == NULL || init_trusted_modules() < 0
        || derive_table() < 0) {
        return -1;
    }
    for (int i = 0; i < nbindings; i++) {
        bindings[i].def = &binding_defs[i];
        if (parse_signature(&bindings[i]) < 0) {
            return -1;
        }
        PyObject *fn = resolve_path(binding_defs[i].path);
        if (fn == NULL) {
            /* A torch build without this function: leave it out. */
            PyErr_Clear();
            continue;
        }
        PyObject *key = PyLong_FromVoidPtr(fn);
        PyObject *val = PyLong_FromLong(i);
        int rc = (key && val) ? PyDict_SetItem(binding_index, key, val) : -1;
        Py_XDECREF(key);
        Py_XDECREF(val);
        /* Keep fn alive for the process: its address is the key. */
        if (rc < 0) {
            Py_DECREF(fn);
            return -1;
        }
    }
    return 0;
}

const tc_binding *
tc_binding_find(PyObject *callable)
{
    PyObject *key = PyLong_FromVoidPtr(callable);
    if (key == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *val = PyDict_GetItemWithError(binding_index, key);
    Py_DECREF(key);
    if (val == NULL) {
        PyErr_Clear();
        return NULL;
    }
    return &bindings[PyLong_AsLong(val)];
}

const tc_binding *
tc_binding_by_path(const char *path)
{
    for (int i = 0; i < nbindings; i++) {
        if (strcmp(binding_defs[i].path, path) == 0) {
            return bindings[i].def != NULL ? &bindings[i] : NULL;
        }
    }
    return NULL;
}

const tc_nn_binding *
tc_binding_nn(const char *cls)
{
    for (int i = 0; i < n_nn_bindings; i++) {
        if (strcmp(nn_bindings[i].cls, cls) == 0) {
            return &nn_bindings[i];
        }
    }
    return NULL;
}

/* The listed modules, and every module of torch (torch.jit, torch._C,
 * torch._C._nn, torch._VF, torch.nn._reduction, ...): what
 * torch.nn.functional's wrappers read on their way to the op. */
int
tc_is_trusted_module(PyObject *obj)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(trusted_modules); i++) {
        if (PyList_GET_ITEM(trusted_modules, i) == obj) {
            return 1;
        }
    }
    if (!PyModule_Check(obj)) {
        return 0;
    }
    PyObject *name = PyModule_GetNameObject(obj);
    if (name == NULL) {
        PyErr_Clear();
        return 0;
    }
    const char *s = PyUnicode_AsUTF8(name);
    int torch = s != NULL && (strcmp(s, "torch") == 0
                              || strncmp(s, "torch.", 6) == 0);
    PyErr_Clear();
    Py_DECREF(name);
    return torch;
}

/* Appends (a, b) to list; NULL on error (list released). */
static PyObject *
append_pair(PyObject *list, const char *a, const char *b)
{
    PyObject *row = Py_BuildValue("(sz)", a, b);
    if (row == NULL || PyList_Append(list, row) < 0) {
        Py_XDECREF(row);
        Py_DECREF(list);
        return NULL;
    }
    Py_DECREF(row);
    return list;
}

PyObject *
tc_bindings_table(void)
{
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < nbindings; i++) {
        list = append_pair(list, binding_defs[i].path, binding_defs[i].op);
    }
    for (int i = 0; list && i < n_nn_bindings; i++) {
        const tc_binding *b = tc_binding_by_path(nn_bindings[i].path);
        char path[64];
        snprintf(path, sizeof(path), "nn.%s", nn_bindings[i].cls);
        list = append_pair(list, path, b ? b->def->op : NULL);
    }
    return list;
}

PyObject *
tc_decomposed_table(void)
{
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < tc_ndecomps; i++) {
        list = append_pair(list, tc_decomps[i].name, tc_decomps[i].doc);
    }
    return list;
}
