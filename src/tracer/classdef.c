/* classdef.c - a class statement in traced code (LOAD_BUILD_CLASS).
 *
 * `class C(Base): ...` runs builtins.__build_class__(body, "C", Base): the
 * body function fills a namespace, the metaclass makes the class.  The
 * tracer does not run that: the class is a DEFERRED var (TC_TMPL_CALL of
 * __build_class__ over the body function, the name and the bases), made
 * when the segment exits if the class is still live there, as a lambda
 * is.  Any use of it (an attribute, a call, an isinstance) is unsupported,
 * so an inlined function that uses its class runs in CPython, and the
 * frame's own use is a break before which the exit has made the class.
 *
 * Not making a class that nothing uses is eager's behaviour only if making
 * it has no effect outside the class, so a class statement is traced only
 * when
 *   - its body only binds names to constants and functions (decorated by
 *     staticmethod, classmethod or property at most): no other call, no
 *     read of an undefined name, no other statement (annotations
 *     included);
 *   - its bases are classes the trace pins (guarded by identity) and
 *     there are no keywords (metaclass=...);
 *   - its metaclass is type, abc.ABCMeta, or torch.autograd.Function's
 *     FunctionMeta (each touches only the class it makes; FunctionMeta
 *     also numbers it), and no base defines __init_subclass__.
 * torch.masked's _combine_input_and_mask defines such a class
 * (torch.autograd.Function) and uses it only for a MaskedTensor input.
 */
#include "tracer_internal.h"

#include "../guards/guards.h"

/* The metaclasses whose class creation touches nothing but the class. */
static PyObject *abc_meta, *function_meta;

static int
load_metaclasses(void)
{
    if (abc_meta != NULL) {
        return 0;
    }
    PyObject *abc = PyImport_ImportModule("abc");
    PyObject *fn = PyImport_ImportModule("torch.autograd.function");
    PyObject *a = abc ? PyObject_GetAttrString(abc, "ABCMeta") : NULL;
    PyObject *f = fn ? PyObject_GetAttrString(fn, "FunctionMeta") : NULL;
    Py_XDECREF(abc);
    Py_XDECREF(fn);
    if (a == NULL || f == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(f);
        return -1;
    }
    abc_meta = a;       /* kept for the life of the process */
    function_meta = f;
    return 0;
}

int
tc_tr_is_build_class(tracer *T, PyObject *fn)
{
    PyObject *b = PyDict_GetItemString(T->builtins, "__build_class__");
    return b != NULL && fn == b;
}

/* LOAD_BUILD_CLASS: the frame's builtins.__build_class__, as a known
 * object (the call below is what the tracer models). */
int
tc_tr_op_load_build_class(tracer *T)
{
    PyObject *b = PyDict_GetItemString(T->builtins, "__build_class__");
    if (b == NULL) {
        return tc_tr_unsupported(T, "__build_class__ not found");
    }
    tc_var *v = tc_var_new(&T->sh->arena, TC_VAR_OBJECT, -1);
    if (v == NULL) {
        return ERROR;
    }
    v->obj = Py_NewRef(b);
    return tc_tr_push(T, v);
}

/* The code object of the class body function var f (borrowed), or NULL. */
static PyObject *
body_code(tc_var *f)
{
    if (f->kind == TC_VAR_DEFERRED && f->node == TC_TMPL_FUNCTION) {
        return f->obj;
    }
    if (tc_tr_is_closure(f)) {
        return tc_tr_closure_code(f);
    }
    if (f->kind == TC_VAR_UNKNOWN && f->obj && PyFunction_Check(f->obj)) {
        return PyFunction_GET_CODE(f->obj);
    }
    return NULL;
}

/* What LOAD_NAME of name in the body reads from the body function's
 * globals or the builtins: 1 a builtin decorator (staticmethod,
 * classmethod, property: calling one has no effect), 0 another value, -1
 * none (eager raises NameError). */
static int
name_kind(tracer *T, PyObject *globals, PyObject *name)
{
    PyObject *v = PyDict_GetItemWithError(globals, name);
    if (v == NULL && !PyErr_Occurred()) {
        v = PyDict_GetItemWithError(T->builtins, name);
    }
    PyErr_Clear();
    if (v == NULL) {
        return -1;
    }
    return v == (PyObject *)&PyStaticMethod_Type
           || v == (PyObject *)&PyClassMethod_Type
           || v == (PyObject *)&PyProperty_Type;
}

/* What a value on the class body's stack is, for body_effect. */
enum { V_PURE = 'd', V_NULL = 'n', V_OTHER = 'o' };

/* Whether the body code only binds names to constants and (decorated)
 * functions: NULL if so, else what it does (for the reason).  A small
 * stack of what each value is shows that every call calls a builtin
 * decorator. */
static const char *
body_effect(tracer *T, PyCodeObject *co, PyObject *globals)
{
    PyObject *bytes = PyCode_GetCode(co);
    if (bytes == NULL) {
        PyErr_Clear();
        return "unreadable code";
    }
    const unsigned char *c = (const unsigned char *)PyBytes_AS_STRING(bytes);
    Py_ssize_t n = PyBytes_GET_SIZE(bytes) / 2;
    const char *why = NULL;
    char st[64];
    int sp = 0, ext = 0;
#define NEED(k) if (sp < (k)) { why = "malformed"; break; }
#define PUSH(x) if (sp == 64) { why = "too deep"; break; } st[sp++] = (x)
    for (Py_ssize_t i = 0; i < n && why == NULL; i++) {
        int op = c[2 * i], arg = c[2 * i + 1] | ext;
        ext = 0;
        switch (op) {
        case EXTENDED_ARG:
            ext = arg << 8;
            break;
        case CACHE:
        case NOP:
        case RESUME:
        case COPY_FREE_VARS:
        case MAKE_CELL:
#ifdef PRECALL
        case PRECALL:
#endif
            break;
        case LOAD_NAME: {
            /* a name the body binds is one of its functions or constants
             * (any name of the same low byte counts: strict) */
            int bound = 0;
            for (Py_ssize_t j = 0; j < n && !bound; j++) {
                bound = c[2 * j] == STORE_NAME
                        && c[2 * j + 1] == (arg & 0xff);
            }
            int k = name_kind(T, globals,
                              PyTuple_GET_ITEM(co->co_names, arg));
            if (!bound && k < 0) {
                why = "reads an undefined name";
                break;
            }
            PUSH(!bound && k == 1 ? V_PURE : V_OTHER);
            break;
        }
        case LOAD_CONST:
        case LOAD_CLOSURE:
        case LOAD_FAST:     /* 3.13: a cell for a closure (LOAD_CLOSURE) */
            PUSH(V_OTHER);
            break;
        case PUSH_NULL:
            PUSH(V_NULL);
            break;
        case STORE_NAME:
        case POP_TOP:
        case RETURN_VALUE:
            NEED(1);
            sp--;
            break;
#ifdef RETURN_CONST
        case RETURN_CONST:
            break;
#endif
        case BUILD_TUPLE:
            NEED(arg);
            sp -= arg;
            PUSH(V_OTHER);
            break;
        case MAKE_FUNCTION: {
            int parts = 1;
            for (int bit = 0; bit < 4; bit++) {
                parts += (arg >> bit) & 1;
            }
            NEED(parts);
            sp -= parts;
            PUSH(V_OTHER);
            break;
        }
#ifdef SET_FUNCTION_ATTRIBUTE
        case SET_FUNCTION_ATTRIBUTE:
            NEED(2);
            sp -= 2;
            PUSH(V_OTHER);
            break;
#endif
        case CALL: {
            /* [NULL, callable, args] or [callable, self, args] */
            NEED(arg + 2);
            char first = st[sp - arg - 2];
            char callee = first == V_NULL ? st[sp - arg - 1] : first;
            if (callee != V_PURE) {
                why = "calls something other than a builtin decorator";
                break;
            }
            sp -= arg + 2;
            PUSH(V_OTHER);
            break;
        }
        default:
            why = "runs other statements than definitions";
        }
    }
#undef NEED
#undef PUSH
    Py_DECREF(bytes);
    return why;
}

/* A base class the trace pins (guarded by identity where it was read from
 * the frame), borrowed, or NULL. */
static PyObject *
pinned_base(tracer *T, tc_var *b, int *rc)
{
    *rc = OK;
    if ((b->kind != TC_VAR_OBJECT && b->kind != TC_VAR_UNKNOWN
         && b->kind != TC_VAR_CONST)
        || b->obj == NULL || !PyType_Check(b->obj)) {
        return NULL;
    }
    if (b->source >= 0 && tc_guard_id(T->out->guards, b->source, b->obj) < 0) {
        *rc = ERROR;
        return NULL;
    }
    return b->obj;
}

/* The metaclass __build_class__ would use for these bases (borrowed), or
 * NULL if they conflict (CPython raises then). */
static PyTypeObject *
metaclass_of(PyObject *const *bases, int nbases)
{
    PyTypeObject *winner = &PyType_Type;
    for (int i = 0; i < nbases; i++) {
        PyTypeObject *t = Py_TYPE(bases[i]);
        if (PyType_IsSubtype(winner, t)) {
            continue;
        }
        if (!PyType_IsSubtype(t, winner)) {
            return NULL;
        }
        winner = t;
    }
    return winner;
}

/* Whether a base or its MRO defines __init_subclass__ other than
 * object's (it could register the class). */
static int
has_init_subclass(PyObject *const *bases, int nbases)
{
    PyObject *name = PyUnicode_InternFromString("__init_subclass__");
    if (name == NULL) {
        PyErr_Clear();
        return 1;
    }
    PyObject *base_default = _PyType_Lookup(&PyBaseObject_Type, name);
    int has = 0;
    for (int i = 0; i < nbases && !has; i++) {
        has = _PyType_Lookup((PyTypeObject *)bases[i], name) != base_default;
    }
    Py_DECREF(name);
    return has;
}

int
tc_tr_build_class(tracer *T, tc_var **args, int nargs, PyObject *kwnames)
{
    if (kwnames != NULL) {
        return tc_tr_unsupported(T, "a class statement with keywords "
                                 "(metaclass=...)");
    }
    if (nargs < 2 || nargs - 2 > 16) {
        return tc_tr_unsupported(T, "a class statement with %d bases",
                                 nargs - 2);
    }
    int rc;
    if ((rc = tc_tr_reify_all(T, args + 1, nargs - 1)) != OK) {
        return rc;
    }
    PyObject *code = body_code(args[0]);
    if (code == NULL || !PyCode_Check(code) || args[1]->kind != TC_VAR_CONST
        || !PyUnicode_Check(args[1]->obj)) {
        return tc_tr_unsupported(T, "a class statement the tracer cannot "
                                 "read");
    }
    /* (a function made now, of another module, reads its own globals) */
    PyObject *globals = args[0]->kind == TC_VAR_UNKNOWN
        ? PyFunction_GET_GLOBALS(args[0]->obj) : T->globals;
    const char *why = body_effect(T, (PyCodeObject *)code, globals);
    if (why != NULL) {
        return tc_tr_unsupported(T, "class %U defined in traced code: its "
                                 "body %s", args[1]->obj, why);
    }
    PyObject *bases[16];
    for (int i = 2; i < nargs; i++) {
        bases[i - 2] = pinned_base(T, args[i], &rc);
        if (bases[i - 2] == NULL) {
            return rc != OK ? rc
                : tc_tr_unsupported(T, "class %U defined in traced code "
                                    "with a base that is not a known class",
                                    args[1]->obj);
        }
    }
    if (load_metaclasses() < 0) {
        return tc_tr_unsupported_from_exception(T, "a class statement");
    }
    PyTypeObject *meta = metaclass_of(bases, nargs - 2);
    if (meta == NULL || (meta != &PyType_Type
                         && (PyObject *)meta != abc_meta
                         && (PyObject *)meta != function_meta)) {
        return tc_tr_unsupported(T, "class %U defined in traced code with "
                                 "metaclass %s", args[1]->obj,
                                 meta ? meta->tp_name : "(conflicting)");
    }
    if (has_init_subclass(bases, nargs - 2)) {
        return tc_tr_unsupported(T, "class %U defined in traced code: a "
                                 "base defines __init_subclass__",
                                 args[1]->obj);
    }
    /* made at the exit, by __build_class__ itself, if still live there */
    tc_var *v = tc_var_seq(&T->sh->arena, TC_VAR_DEFERRED, nargs, args);
    if (v == NULL) {
        return ERROR;
    }
    v->node = TC_TMPL_CALL;
    v->obj = Py_NewRef(PyDict_GetItemString(T->builtins, "__build_class__"));
    return tc_tr_push(T, v);
}
